//! The calls that turn a live keyed list into the desired one: an IP set's
//! entries (keyed by address, `API2/Firewall/IPSet.pm`) and aliases (keyed
//! by name, ignoring case, `API2/Firewall/Aliases.pm`). Order means
//! nothing here. Like a rule list, every update and delete checks the
//! digest of the whole list (`assert_if_modified`), and a create checks
//! none: the first update or delete carries the digest the planner read,
//! every other call follows a read that must find the entries it expects.

use proxops_model::firewall::live::LiveEntry;

use super::list::Check;

/// One PVE call on a keyed list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryCall {
    /// `POST …/ipset/{set}` (`cidr`, `nomatch`, `comment`) or
    /// `POST …/aliases` (`name`, `cidr`, `comment`).
    Create(LiveEntry),
    /// `PUT …/ipset/{set}/{cidr}` or `PUT …/aliases/{name}`: PVE replaces
    /// `nomatch` and `comment` (an entry) or `cidr` and `comment` (an
    /// alias) with what is sent, so all of them are sent.
    Update { was: LiveEntry, now: LiveEntry },
    /// `DELETE …/ipset/{set}/{cidr}` or `DELETE …/aliases/{name}`.
    Delete(LiveEntry),
}

/// A call with the entries it expects to find (sorted by key) and its
/// digest rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryStep {
    pub call: EntryCall,
    pub expect: Vec<LiveEntry>,
    pub check: Check,
}

impl EntryCall {
    /// The form of the call, the digest left to [`Check`]; `alias` for
    /// an alias's fields (`name`, `cidr`), else an IP set entry's (`cidr`,
    /// `nomatch`).
    pub fn form(&self, alias: bool) -> Vec<(&'static str, String)> {
        let (entry, create) = match self {
            EntryCall::Create(e) => (e, true),
            EntryCall::Update { now, .. } => (now, false),
            EntryCall::Delete(_) => return Vec::new(),
        };
        let mut form = Vec::new();
        if alias {
            if create {
                form.push(("name", entry.name.clone()));
            }
            form.push(("cidr", entry.cidr.clone().unwrap_or_default()));
        } else {
            if create {
                form.push(("cidr", entry.name.clone()));
            }
            // create_ip stores nomatch only when set; update_ip replaces it.
            if entry.nomatch || !create {
                form.push(("nomatch", u8::from(entry.nomatch).to_string()));
            }
        }
        form.extend(entry.comment.clone().map(|c| ("comment", c)));
        form
    }
}

fn key(e: &LiveEntry) -> String {
    e.name.to_ascii_lowercase()
}

/// The same entry: key, address, `nomatch` and comment (a name that
/// differs in case only is the same alias).
fn same(a: &LiveEntry, b: &LiveEntry) -> bool {
    key(a) == key(b) && a.cidr == b.cidr && a.nomatch == b.nomatch && a.comment == b.comment
}

fn sorted(mut v: Vec<LiveEntry>) -> Vec<LiveEntry> {
    v.sort_by_key(key);
    v
}

/// Deletes, then updates, then creates, each entry compared by its key
/// (the address as PVE stores it, or the alias's name ignoring case). The
/// desired entries are written as PVE stores them
/// (`grammar::stored_ipset_cidr`, `stored_alias_cidr`), or every read
/// would differ.
pub fn entry_calls(live: &[LiveEntry], desired: &[LiveEntry], digest: &str) -> Vec<EntryStep> {
    let find = |list: &[LiveEntry], e: &LiveEntry| list.iter().find(|o| key(o) == key(e)).cloned();
    let mut calls = Vec::new();
    calls.extend(
        live.iter()
            .filter(|e| find(desired, e).is_none())
            .map(|e| EntryCall::Delete(e.clone())),
    );
    for want in desired {
        match find(live, want) {
            Some(was) if !same(&was, want) => calls.push(EntryCall::Update {
                was,
                now: want.clone(),
            }),
            Some(_) => {}
            None => calls.push(EntryCall::Create(want.clone())),
        }
    }
    let mut state = sorted(live.to_vec());
    let mut out = Vec::with_capacity(calls.len());
    for (i, call) in calls.into_iter().enumerate() {
        let check = match call {
            EntryCall::Create(_) => Check::ReadBack,
            _ if i == 0 => Check::Digest(digest.to_string()),
            _ => Check::ReadBack,
        };
        let expect = state.clone();
        match &call {
            EntryCall::Create(e) => state.push(e.clone()),
            EntryCall::Update { now, .. } => {
                state.retain(|o| key(o) != key(now));
                state.push(now.clone());
            }
            EntryCall::Delete(e) => state.retain(|o| key(o) != key(e)),
        }
        state = sorted(state);
        out.push(EntryStep {
            call,
            expect,
            check,
        });
    }
    out
}
