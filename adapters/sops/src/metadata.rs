//! The `sops:` metadata block: recipients and their wrapped data keys,
//! `lastmodified`, the encrypted MAC and the rule that says which leaves are
//! encrypted. It reads and writes that block; it never touches values.

use regex::Regex;

use crate::yaml::{OutNode, RawNode, RawScalar};
use proxops_model::yaml_emit::double_quoted;

/// Which leaves get encrypted. At most one rule applies to a document; with
/// none, sops uses `UnencryptedSuffix("_unencrypted")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CryptRule {
    /// Leaves under a key ending in this suffix stay plaintext.
    UnencryptedSuffix(String),
    /// Only leaves under a key ending in this suffix are encrypted.
    EncryptedSuffix(String),
    /// Leaves under a key matching this (unanchored) regex stay plaintext.
    UnencryptedRegex(String),
    /// Only leaves under a key matching this (unanchored) regex are encrypted.
    EncryptedRegex(String),
}

impl Default for CryptRule {
    fn default() -> Self {
        CryptRule::UnencryptedSuffix("_unencrypted".into())
    }
}

impl CryptRule {
    fn field_name(&self) -> &'static str {
        match self {
            CryptRule::UnencryptedSuffix(_) => "unencrypted_suffix",
            CryptRule::EncryptedSuffix(_) => "encrypted_suffix",
            CryptRule::UnencryptedRegex(_) => "unencrypted_regex",
            CryptRule::EncryptedRegex(_) => "encrypted_regex",
        }
    }

    fn value(&self) -> &str {
        match self {
            CryptRule::UnencryptedSuffix(v)
            | CryptRule::EncryptedSuffix(v)
            | CryptRule::UnencryptedRegex(v)
            | CryptRule::EncryptedRegex(v) => v,
        }
    }

    pub(crate) fn compile(&self) -> Result<CompiledRule, String> {
        let regex = |r: &str| {
            Regex::new(r).map_err(|e| format!("invalid regex in `{}`: {e}", self.field_name()))
        };
        Ok(match self {
            CryptRule::UnencryptedSuffix(s) => CompiledRule::UnencryptedSuffix(s.clone()),
            CryptRule::EncryptedSuffix(s) => CompiledRule::EncryptedSuffix(s.clone()),
            CryptRule::UnencryptedRegex(r) => CompiledRule::UnencryptedRegex(regex(r)?),
            CryptRule::EncryptedRegex(r) => CompiledRule::EncryptedRegex(regex(r)?),
        })
    }
}

pub(crate) enum CompiledRule {
    UnencryptedSuffix(String),
    EncryptedSuffix(String),
    UnencryptedRegex(Regex),
    EncryptedRegex(Regex),
}

impl CompiledRule {
    /// sops' `shouldBeEncrypted`: the rule applies to any component of the
    /// path, so a matching parent key decides for its whole subtree.
    pub(crate) fn should_encrypt(&self, path: &[String]) -> bool {
        match self {
            CompiledRule::UnencryptedSuffix(s) => !path.iter().any(|k| k.ends_with(s.as_str())),
            CompiledRule::EncryptedSuffix(s) => path.iter().any(|k| k.ends_with(s.as_str())),
            CompiledRule::UnencryptedRegex(r) => !path.iter().any(|k| r.is_match(k)),
            CompiledRule::EncryptedRegex(r) => path.iter().any(|k| r.is_match(k)),
        }
    }
}

/// One age recipient and the data key wrapped for it.
#[derive(Clone, Debug)]
pub(crate) struct AgeStanza {
    pub(crate) recipient: String,
    pub(crate) enc: String,
}

/// The parsed `sops:` block.
#[derive(Debug)]
pub(crate) struct Metadata {
    pub(crate) age: Vec<AgeStanza>,
    pub(crate) lastmodified: String,
    pub(crate) mac: String,
    pub(crate) rule: CryptRule,
    pub(crate) mac_only_encrypted: bool,
}

/// A metadata problem: `(line, message, unsupported)`.
pub(crate) type MetaProblem = (Option<usize>, String, bool);

impl Metadata {
    pub(crate) fn parse(node: &RawNode) -> Result<Metadata, MetaProblem> {
        let malformed = |msg: &str| (None, msg.to_string(), false);
        let RawNode::Map(fields) = node else {
            return Err(malformed("`sops` metadata is not a map"));
        };
        let mut age = Vec::new();
        let mut lastmodified = None;
        let mut mac = String::new();
        let mut rules = Vec::new();
        let mut mac_only_encrypted = false;
        for (name, value) in fields {
            match name.as_str() {
                "age" => age.extend(parse_age_list(value)?),
                "key_groups" => {
                    let RawNode::List(groups) = value else {
                        return Err(malformed("`sops.key_groups` is not a list"));
                    };
                    if groups.len() > 1 {
                        return Err((
                            None,
                            "Shamir secret sharing (more than one key group) is not supported"
                                .into(),
                            true,
                        ));
                    }
                    for group in groups {
                        if let RawNode::Map(members) = group {
                            for (kind, list) in members {
                                if kind == "age" {
                                    age.extend(parse_age_list(list)?);
                                }
                            }
                        }
                    }
                }
                "lastmodified" => lastmodified = Some(scalar(value, name)?.text.clone()),
                "mac" => mac = scalar(value, name)?.text.clone(),
                "unencrypted_suffix" => rules.push(CryptRule::UnencryptedSuffix(
                    scalar(value, name)?.text.clone(),
                )),
                "encrypted_suffix" => rules.push(CryptRule::EncryptedSuffix(
                    scalar(value, name)?.text.clone(),
                )),
                "unencrypted_regex" => rules.push(CryptRule::UnencryptedRegex(
                    scalar(value, name)?.text.clone(),
                )),
                "encrypted_regex" => {
                    rules.push(CryptRule::EncryptedRegex(scalar(value, name)?.text.clone()))
                }
                "unencrypted_comment_regex" | "encrypted_comment_regex" => {
                    return Err((
                        scalar(value, name).ok().map(|s| s.line),
                        format!("`{name}` is not supported"),
                        true,
                    ));
                }
                "mac_only_encrypted" => {
                    let s = scalar(value, name)?;
                    mac_only_encrypted = match s.text.as_str() {
                        "true" | "True" | "TRUE" => true,
                        "false" | "False" | "FALSE" | "" => false,
                        _ => {
                            return Err((
                                Some(s.line),
                                "`sops.mac_only_encrypted` is not a boolean".into(),
                                false,
                            ));
                        }
                    };
                }
                // Other master keys (pgp, kms, …), version, shamir_threshold:
                // not needed when an age stanza unwraps the key.
                _ => {}
            }
        }
        if rules.len() > 1 {
            return Err(malformed(
                "more than one of unencrypted_suffix, encrypted_suffix, unencrypted_regex, encrypted_regex is set",
            ));
        }
        let lastmodified =
            lastmodified.ok_or_else(|| malformed("`sops.lastmodified` is missing"))?;
        Ok(Metadata {
            age,
            lastmodified,
            mac,
            rule: rules.pop().unwrap_or_default(),
            mac_only_encrypted,
        })
    }

    /// The block as sops writes it (keys in sops' order).
    pub(crate) fn to_out_node(&self, version: &str) -> OutNode {
        let mut fields = Vec::new();
        let stanzas = self
            .age
            .iter()
            .map(|s| {
                OutNode::Map(vec![
                    ("recipient".into(), OutNode::Scalar(s.recipient.clone())),
                    ("enc".into(), OutNode::Literal(s.enc.clone())),
                ])
            })
            .collect();
        fields.push(("age".to_string(), OutNode::List(stanzas)));
        fields.push((
            "lastmodified".into(),
            OutNode::Scalar(double_quoted(&self.lastmodified)),
        ));
        fields.push(("mac".into(), OutNode::Scalar(self.mac.clone())));
        fields.push((
            self.rule.field_name().into(),
            OutNode::Scalar(double_quoted(self.rule.value())),
        ));
        if self.mac_only_encrypted {
            fields.push(("mac_only_encrypted".into(), OutNode::Scalar("true".into())));
        }
        fields.push(("version".into(), OutNode::Scalar(version.into())));
        OutNode::Map(fields)
    }
}

fn scalar<'a>(node: &'a RawNode, name: &str) -> Result<&'a RawScalar, MetaProblem> {
    match node {
        RawNode::Scalar(s) => Ok(s),
        _ => Err((None, format!("`sops.{name}` is not a scalar"), false)),
    }
}

fn parse_age_list(node: &RawNode) -> Result<Vec<AgeStanza>, MetaProblem> {
    let bad = |msg: &str| (None, msg.to_string(), false);
    let RawNode::List(items) = node else {
        return Err(bad("`sops.age` is not a list"));
    };
    items
        .iter()
        .map(|item| {
            let RawNode::Map(fields) = item else {
                return Err(bad("an entry of `sops.age` is not a map"));
            };
            let get = |name: &str| {
                fields
                    .iter()
                    .find(|(k, _)| k == name)
                    .and_then(|(_, v)| match v {
                        RawNode::Scalar(s) => Some(s.text.clone()),
                        _ => None,
                    })
                    .ok_or_else(|| bad(&format!("an entry of `sops.age` has no `{name}`")))
            };
            Ok(AgeStanza {
                recipient: get("recipient")?,
                enc: get("enc")?,
            })
        })
        .collect()
}
