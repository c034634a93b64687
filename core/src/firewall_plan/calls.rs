//! The firewall's writes as a plan carries them ([`FirewallCall`]), and
//! the one way a list is compared, in the plan and in the read right
//! before a write: each entry as one line ([`lines`]).

use proxops_model::firewall::Rule;
use proxops_model::firewall::live::{LiveEntry, LiveList, LiveOptions, LiveRules};
use serde_json::Value;

use super::keyed::{EntryCall, EntryStep};
use super::list::{self, Check};
use crate::action::{FirewallCall, Params, ReadBack, WriteMethod};
use proxops_model::wire::encode_segment;

/// The key a [`ReadBack`] names a rule list by.
pub const RULES: &str = "pos";
/// The key of options.
pub const OPTIONS: &str = "options";

/// A list as a read found it: one line per entry, and its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub lines: Vec<String>,
    pub digest: String,
}

/// A rule as a line (its config-file form).
pub fn rule_line(rule: &Rule) -> String {
    rule.to_string()
}

/// A keyed entry as a line: name, address, `nomatch`, comment.
pub fn entry_line(e: &LiveEntry) -> String {
    let mut line = e.name.clone();
    if let Some(cidr) = &e.cidr
        && *cidr != e.name
    {
        line.push_str(&format!(" cidr={cidr}"));
    }
    if e.nomatch {
        line.push_str(" nomatch");
    }
    if let Some(c) = &e.comment {
        line.push_str(&format!(" # {c}"));
    }
    line
}

/// A keyed list's lines, sorted by key ignoring case, only the entry named
/// `only` when given.
pub fn entry_lines(entries: &[LiveEntry], only: Option<&str>) -> Vec<String> {
    let mut kept: Vec<&LiveEntry> = entries
        .iter()
        .filter(|e| only.is_none_or(|o| e.name.eq_ignore_ascii_case(o)))
        .collect();
    kept.sort_by_key(|e| e.name.to_ascii_lowercase());
    kept.into_iter().map(entry_line).collect()
}

/// Options as `key=value` lines, by key.
pub fn option_lines(o: &LiveOptions) -> Vec<String> {
    o.values.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// What a firewall `GET` answered (`data`), as lines: a rule list (`key`
/// [`RULES`]), options ([`OPTIONS`]), or a list keyed by `key`.
pub fn lines(key: &str, only: Option<&str>, data: &Value) -> Result<Listed, String> {
    match key {
        RULES => {
            let l = LiveRules::from_json(data)?;
            Ok(Listed {
                lines: l.rules.iter().map(rule_line).collect(),
                digest: l.digest,
            })
        }
        OPTIONS => {
            let o = LiveOptions::from_json(data)?;
            Ok(Listed {
                lines: option_lines(&o),
                digest: o.digest,
            })
        }
        key => {
            let l = LiveList::from_json(data, key)?;
            Ok(Listed {
                lines: entry_lines(&l.entries, only),
                digest: l.digest,
            })
        }
    }
}

fn method(m: &str) -> WriteMethod {
    match m {
        "POST" => WriteMethod::Post,
        "PUT" => WriteMethod::Put,
        _ => WriteMethod::Delete,
    }
}

fn params(form: Vec<(&'static str, String)>) -> Params {
    let mut p = Params::new();
    for (k, v) in form {
        p.push(k, v);
    }
    p
}

/// A step's digest rule as a call carries it: the plan's digest, or a
/// read of the whole list at `path` (entries named by `key`) that must
/// find `expect`, its digest sent when the endpoint takes one.
fn checked(
    check: Check,
    (path, key): (&str, &str),
    expect: impl FnOnce() -> Vec<String>,
    send_digest: bool,
) -> (Option<String>, Option<ReadBack>) {
    match check {
        Check::Digest(d) => (Some(d), None),
        Check::ReadBack => (
            None,
            Some(ReadBack {
                list: path.to_owned(),
                key: key.to_owned(),
                only: None,
                expect: expect(),
                send_digest,
            }),
        ),
    }
}

/// The calls of a rule list at `path` (`…/rules` or a group's path):
/// [`list::sequence`]'s steps, each read back or carrying the plan's
/// digest. PVE's rule create takes a digest and ignores it
/// (`register_create_rule`): it gets the one its read returned too.
pub fn rule_calls(path: &str, live: &[Rule], desired: &[Rule], digest: &str) -> Vec<FirewallCall> {
    list::sequence(live, desired, digest)
        .into_iter()
        .map(|step| {
            let (m, tail, form) = step.call.request();
            let expect = || step.expect.iter().map(rule_line).collect();
            let (digest, read) = checked(step.check.clone(), (path, RULES), expect, true);
            FirewallCall {
                method: method(m),
                path: format!("{path}{tail}"),
                params: params(form),
                digest,
                read,
            }
        })
        .collect()
}

/// The calls of a keyed list at `path` (an IP set's entries, keyed by
/// `cidr`; aliases, by `name`): [`super::keyed::entry_calls`]' steps. A
/// create takes no digest (`create_ip`, `create_alias`); an update or
/// delete carries the plan's or its read's.
pub fn entry_calls(
    path: &str,
    key: &str,
    live: &[LiveEntry],
    desired: &[LiveEntry],
    digest: &str,
) -> Vec<FirewallCall> {
    let alias = key == "name";
    super::keyed::entry_calls(live, desired, digest)
        .into_iter()
        .map(|step: EntryStep| {
            let (m, item) = match &step.call {
                EntryCall::Create(_) => (WriteMethod::Post, None),
                EntryCall::Update { now, .. } => (WriteMethod::Put, Some(now.name.clone())),
                EntryCall::Delete(e) => (WriteMethod::Delete, Some(e.name.clone())),
            };
            let takes_digest = m != WriteMethod::Post;
            let expect = || entry_lines(&step.expect, None);
            let (digest, read) = checked(step.check.clone(), (path, key), expect, takes_digest);
            FirewallCall {
                method: m,
                path: match item {
                    Some(name) => format!("{path}/{}", encode_segment(&name)),
                    None => path.to_owned(),
                },
                params: params(step.call.form(alias)),
                digest,
                read,
            }
        })
        .collect()
}

/// One write to an object of a list other objects share (the cluster's
/// aliases, its IP set and group indexes): read first, the object named
/// `only` must be as `expect` says; the digest of that read goes with it
/// when PVE's endpoint takes one.
pub fn object_call(
    (m, path, form): (WriteMethod, String, Params),
    (list, key, only): (&str, &str, &str),
    expect: Vec<String>,
    send_digest: bool,
) -> FirewallCall {
    FirewallCall {
        method: m,
        path,
        params: form,
        digest: None,
        read: Some(ReadBack {
            list: list.to_owned(),
            key: key.to_owned(),
            only: Some(only.to_owned()),
            expect,
            send_digest,
        }),
    }
}
