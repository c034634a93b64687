//! What PVE's firewall API answers, as values: a rule list with its
//! digest, options, aliases, IP sets and security groups (the `data` of
//! the `GET`s of pve-firewall's `src/PVE/API2/Firewall/*.pm`). A rule
//! ProxOps cannot read makes the whole list unreadable, never a shorter
//! list: a list is planned as a whole, by position.

use std::collections::BTreeMap;

use serde_json::Value;

use super::rule::Rule;

/// The digest of an empty list: `copy_list_with_digest` (Firewall.pm)
/// hashes nothing, and an empty answer has no entry to carry it.
pub const EMPTY_LIST_DIGEST: &str = "da39a3ee5e6b4b0d3255bfef95601890afd80709";

/// A rule list as `GET …/firewall/rules` answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRules {
    /// The digest of the whole list, which every entry carries.
    pub digest: String,
    /// In position order.
    pub rules: Vec<Rule>,
}

fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn entries<'a>(data: &'a Value, what: &str) -> Result<&'a Vec<Value>, String> {
    data.as_array()
        .ok_or_else(|| format!("the {what} answer is not a list"))
}

impl LiveRules {
    /// Reads the answer's `data`; an entry whose rule does not read, or
    /// entries that disagree on the digest or skip a position, are an
    /// error naming the position.
    pub fn from_json(data: &Value) -> Result<LiveRules, String> {
        let mut rules: Vec<(u64, Rule)> = Vec::new();
        let mut digest: Option<String> = None;
        for entry in entries(data, "rules")? {
            let pos = entry
                .get("pos")
                .and_then(Value::as_u64)
                .ok_or("a rule without its position")?;
            let rule = Rule::from_api(entry).map_err(|errors| {
                let why: Vec<String> = errors.iter().map(ToString::to_string).collect();
                format!("rule {pos}: {}", why.join("; "))
            })?;
            let d = text(entry, "digest").ok_or_else(|| format!("rule {pos} without a digest"))?;
            if digest.as_ref().is_some_and(|seen| *seen != d) {
                return Err(format!("rule {pos} carries another digest than the list's"));
            }
            digest = Some(d);
            rules.push((pos, rule));
        }
        rules.sort_by_key(|(pos, _)| *pos);
        if let Some((i, (pos, _))) = rules
            .iter()
            .enumerate()
            .find(|(i, (pos, _))| *pos != *i as u64)
        {
            return Err(format!("no rule at position {i} (next is {pos})"));
        }
        Ok(LiveRules {
            digest: digest.unwrap_or_else(|| EMPTY_LIST_DIGEST.to_string()),
            rules: rules.into_iter().map(|(_, r)| r).collect(),
        })
    }
}

/// Options (`GET …/firewall/options`): each key as PVE answers it, and
/// the digest of the object (`copy_opject_with_digest`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveOptions {
    pub digest: String,
    pub values: BTreeMap<String, String>,
}

impl LiveOptions {
    pub fn from_json(data: &Value) -> Result<LiveOptions, String> {
        let obj = data
            .as_object()
            .ok_or("the options answer is not an object")?;
        let mut out = LiveOptions::default();
        for (k, v) in obj {
            let value = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => u8::from(*b).to_string(),
                _ => continue,
            };
            if k == "digest" {
                out.digest = value;
            } else {
                out.values.insert(k.clone(), value);
            }
        }
        Ok(out)
    }
}

/// A named object of a listing: an alias (`name`, `cidr`), an IP set
/// (`name`), a security group (`group`), or an IP set's entry (`cidr`,
/// `nomatch`), with its comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveEntry {
    pub name: String,
    pub cidr: Option<String>,
    pub nomatch: bool,
    pub comment: Option<String>,
}

/// A listing and the digest it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveList {
    pub digest: String,
    pub entries: Vec<LiveEntry>,
}

impl LiveList {
    /// Reads `GET …/aliases` (`name`), `…/ipset` (`name`), `…/groups`
    /// (`group`) or `…/ipset/{name}` (`cidr`): `key` is the field that
    /// names each entry.
    pub fn from_json(data: &Value, key: &str) -> Result<LiveList, String> {
        let mut digest = None;
        let mut out = Vec::new();
        for entry in entries(data, key)? {
            let name = text(entry, key).ok_or_else(|| format!("an entry without its {key}"))?;
            digest = digest.or_else(|| text(entry, "digest"));
            out.push(LiveEntry {
                cidr: text(entry, "cidr"),
                // IPSet.pm answers nomatch as a boolean (1 or true).
                nomatch: match entry.get("nomatch") {
                    Some(Value::Bool(b)) => *b,
                    Some(Value::Number(n)) => n.as_u64() != Some(0),
                    Some(Value::String(s)) => !s.is_empty() && s != "0",
                    _ => false,
                },
                comment: text(entry, "comment").filter(|c| !c.trim().is_empty()),
                name,
            });
        }
        Ok(LiveList {
            digest: digest.unwrap_or_else(|| EMPTY_LIST_DIGEST.to_string()),
            entries: out,
        })
    }
}
