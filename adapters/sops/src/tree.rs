//! The decrypted document: an ordered tree of typed values held in memory
//! only. It owns lookups by dot path and the flat leaf listing; it must never
//! print a value (its `Debug` output is redacted) nor write one anywhere.

use std::fmt;

use zeroize::Zeroizing;

/// A decrypted SOPS document: the top-level map, in file order, without the
/// `sops:` metadata.
#[derive(Clone, Default, PartialEq)]
pub struct SecretDocument {
    entries: Vec<(String, SecretNode)>,
}

/// One node of the tree.
#[derive(Clone, PartialEq)]
pub enum SecretNode {
    /// A map, entries in file order.
    Map(Vec<(String, SecretNode)>),
    /// A list.
    List(Vec<SecretNode>),
    /// A scalar.
    Leaf(SecretValue),
}

/// A typed scalar, typed as sops types it.
#[derive(Clone)]
#[non_exhaustive]
pub enum SecretValue {
    Str(Zeroizing<String>),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// RFC 3339 text, exactly as sops renders a YAML timestamp.
    Time(Zeroizing<String>),
    Bytes(Zeroizing<Vec<u8>>),
    Null,
}

impl SecretDocument {
    /// A document from top-level entries (in the order they are to be written).
    pub fn from_entries(entries: Vec<(String, SecretNode)>) -> Self {
        SecretDocument { entries }
    }

    /// The top-level entries in file order.
    pub fn entries(&self) -> &[(String, SecretNode)] {
        &self.entries
    }

    /// The top-level entries, to add or change values before re-encrypting.
    pub fn entries_mut(&mut self) -> &mut Vec<(String, SecretNode)> {
        &mut self.entries
    }

    /// Looks a node up by dot path, e.g. `secrets.proxops-token`,
    /// `cloud-init.ssh-keys.main` or `clusters.dr.tokens[1].secret`.
    /// A key that itself contains dots is found too (`a.b.c` matches a
    /// top-level key `a.b` holding `c`).
    pub fn get(&self, path: &str) -> Option<&SecretNode> {
        lookup_in_map(&self.entries, path)
    }

    /// Looks a scalar up by dot path; `None` for a missing path or a
    /// map/list/null.
    pub fn get_text(&self, path: &str) -> Option<Zeroizing<String>> {
        match self.get(path)? {
            SecretNode::Leaf(v) => v.text(),
            _ => None,
        }
    }

    /// Every non-null scalar with its path (`pve.token_secret`,
    /// `clusters.dr.tokens[1].secret`) and its text, in document order.
    pub fn leaves(&self) -> impl Iterator<Item = (String, Zeroizing<String>)> + '_ {
        let mut out = Vec::new();
        for (key, node) in &self.entries {
            collect_leaves(node, key.clone(), &mut out);
        }
        out.into_iter()
    }
}

impl SecretValue {
    /// The value as text: strings and times as they are, numbers in
    /// decimal (no trailing `.0`), booleans `true`/`false`, bytes as UTF-8
    /// (lossy). `None` for null.
    pub fn text(&self) -> Option<Zeroizing<String>> {
        Some(Zeroizing::new(match self {
            SecretValue::Str(s) | SecretValue::Time(s) => String::clone(s),
            SecretValue::Int(i) => i.to_string(),
            SecretValue::Float(f) => crate::resolve::go_float(*f),
            SecretValue::Bool(b) => b.to_string(),
            SecretValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            SecretValue::Null => return None,
        }))
    }

    /// The name sops gives this type in `ENC[…,type:<name>]`.
    pub fn sops_type(&self) -> &'static str {
        match self {
            SecretValue::Str(_) => "str",
            SecretValue::Int(_) => "int",
            SecretValue::Float(_) => "float",
            SecretValue::Bool(_) => "bool",
            SecretValue::Time(_) => "time",
            SecretValue::Bytes(_) => "bytes",
            SecretValue::Null => "null",
        }
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Self {
        SecretValue::Str(Zeroizing::new(s.into()))
    }
}

impl PartialEq for SecretValue {
    fn eq(&self, other: &Self) -> bool {
        use SecretValue as V;
        match (self, other) {
            (V::Str(a), V::Str(b)) | (V::Time(a), V::Time(b)) => a == b,
            (V::Int(a), V::Int(b)) => a == b,
            // Bitwise, so -0 differs from 0 and NaN equals NaN: a round
            // trip must keep exactly what it was given.
            (V::Float(a), V::Float(b)) => a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Bytes(a), V::Bytes(b)) => a == b,
            (V::Null, V::Null) => true,
            _ => false,
        }
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(<redacted>)", self.sops_type())
    }
}

impl fmt::Debug for SecretNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretNode::Map(m) => write!(f, "Map(<redacted>, {} entries)", m.len()),
            SecretNode::List(l) => write!(f, "List(<redacted>, {} items)", l.len()),
            SecretNode::Leaf(v) => v.fmt(f),
        }
    }
}

impl fmt::Debug for SecretDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SecretDocument(<redacted>, {} entries)",
            self.entries.len()
        )
    }
}

fn collect_leaves(node: &SecretNode, path: String, out: &mut Vec<(String, Zeroizing<String>)>) {
    match node {
        SecretNode::Map(entries) => {
            for (key, child) in entries {
                collect_leaves(child, format!("{path}.{key}"), out);
            }
        }
        SecretNode::List(items) => {
            for (i, child) in items.iter().enumerate() {
                collect_leaves(child, format!("{path}[{i}]"), out);
            }
        }
        SecretNode::Leaf(v) => {
            if let Some(text) = v.text() {
                out.push((path, text));
            }
        }
    }
}

fn lookup_in_map<'a>(entries: &'a [(String, SecretNode)], path: &str) -> Option<&'a SecretNode> {
    // A key may itself contain dots, so every key that prefixes the path is
    // tried and the first one that resolves the whole path wins.
    entries
        .iter()
        .find_map(|(key, node)| lookup_below(node, path.strip_prefix(key.as_str())?))
}

/// `node` itself for an empty `rest`, else what `.key…` or `[i]…` names
/// inside it.
fn lookup_below<'a>(node: &'a SecretNode, rest: &str) -> Option<&'a SecretNode> {
    if rest.is_empty() {
        Some(node)
    } else if let Some(rest) = rest.strip_prefix('.') {
        match node {
            SecretNode::Map(m) => lookup_in_map(m, rest),
            _ => None,
        }
    } else if rest.starts_with('[') {
        lookup_in_list(node, rest)
    } else {
        None
    }
}

fn lookup_in_list<'a>(node: &'a SecretNode, path: &str) -> Option<&'a SecretNode> {
    let SecretNode::List(items) = node else {
        return None;
    };
    let inner = path.strip_prefix('[')?;
    let close = inner.find(']')?;
    let index: usize = inner[..close].parse().ok()?;
    let child = items.get(index)?;
    lookup_below(child, &inner[close + 1..])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sample() -> SecretDocument {
        let s = |t: &str| SecretNode::Leaf(SecretValue::str(t));
        SecretDocument::from_entries(vec![
            (
                "secrets".into(),
                SecretNode::Map(vec![("proxops-token".into(), s("t-1"))]),
            ),
            (
                "clusters".into(),
                SecretNode::Map(vec![(
                    "dr".into(),
                    SecretNode::Map(vec![(
                        "tokens".into(),
                        SecretNode::List(vec![
                            SecretNode::Map(vec![("secret".into(), s("a"))]),
                            SecretNode::Map(vec![
                                ("secret".into(), s("b")),
                                ("port".into(), SecretNode::Leaf(SecretValue::Int(8006))),
                                ("none".into(), SecretNode::Leaf(SecretValue::Null)),
                            ]),
                        ]),
                    )]),
                )]),
            ),
            (
                "a.b".into(),
                SecretNode::Map(vec![("c".into(), s("dotted"))]),
            ),
            ("ratio".into(), SecretNode::Leaf(SecretValue::Float(2.0))),
        ])
    }

    #[test]
    fn get_follows_dot_paths_list_indices_and_dotted_keys() {
        let doc = sample();
        assert_eq!(
            doc.get_text("secrets.proxops-token").unwrap().as_str(),
            "t-1"
        );
        assert_eq!(
            doc.get_text("clusters.dr.tokens[1].secret")
                .unwrap()
                .as_str(),
            "b"
        );
        assert_eq!(doc.get_text("a.b.c").unwrap().as_str(), "dotted");
        assert!(doc.get("clusters.dr.tokens[2]").is_none());
        assert!(doc.get("secrets.missing").is_none());
        assert!(doc.get_text("clusters.dr").is_none(), "a map has no text");
        assert!(doc.get_text("clusters.dr.tokens[1].none").is_none());
    }

    #[test]
    fn leaves_list_every_non_null_scalar_with_its_path_in_order() {
        let leaves: Vec<(String, String)> = sample()
            .leaves()
            .map(|(p, v)| (p, String::clone(&v)))
            .collect();
        let want = [
            ("secrets.proxops-token", "t-1"),
            ("clusters.dr.tokens[0].secret", "a"),
            ("clusters.dr.tokens[1].secret", "b"),
            ("clusters.dr.tokens[1].port", "8006"),
            ("a.b.c", "dotted"),
            ("ratio", "2"),
        ];
        assert_eq!(
            leaves,
            want.map(|(p, v)| (p.to_string(), v.to_string())).to_vec()
        );
    }

    #[test]
    fn debug_output_is_redacted() {
        let shown = format!("{:?} {:?}", sample(), sample().entries());
        assert!(!shown.contains("t-1") && !shown.contains("8006") && !shown.contains("dotted"));
        assert!(shown.contains("<redacted>"));
    }
}
