//! Writing a SOPS YAML document that the real `sops` decrypts: a fresh data
//! key wrapped for each age recipient, every leaf the rule selects sealed
//! under a fresh random IV with its key path as AAD, and the MAC over the
//! leaves as sops types them. `lastmodified` is an argument: this module
//! reads no clock. It never writes a file; the caller decides where the
//! ciphertext goes.

use std::io::Write;
use std::str::FromStr;

use age::armor::{ArmoredWriter, Format};
use sha2::{Digest, Sha512};
use zeroize::Zeroizing;

use crate::cipher::{self, DataKey};
use crate::decrypt::{MAC_ONLY_ENCRYPTED_PREFIX, upper_hex};
use crate::metadata::{AgeStanza, CompiledRule, CryptRule, Metadata};
use crate::resolve;
use crate::yaml::{self, OutNode};
use crate::{SecretDocument, SecretNode, SecretValue, SopsError};

/// What to encrypt for and how.
#[derive(Clone, Debug)]
pub struct EncryptOptions {
    /// `age1…` public keys; each gets the data key.
    pub recipients: Vec<String>,
    /// Which leaves are encrypted (default: keys ending `_unencrypted` stay
    /// plaintext).
    pub rule: CryptRule,
    /// Let the MAC cover only encrypted leaves.
    pub mac_only_encrypted: bool,
    /// RFC 3339 UTC, whole seconds, `Z` (e.g. `2026-11-29T15:40:23Z`): the
    /// MAC's AAD.
    pub lastmodified: String,
}

/// The sops version written into the metadata (informational only; files
/// written here use exactly the 3.11 format).
const WRITTEN_VERSION: &str = "3.11.0";

/// Encrypts `doc` into SOPS YAML text.
pub fn encrypt(doc: &SecretDocument, options: &EncryptOptions) -> Result<String, SopsError> {
    let fail = |reason: String| SopsError::Encrypt { reason };
    if !is_canonical_lastmodified(&options.lastmodified) {
        return Err(fail(
            "lastmodified must be RFC 3339 UTC with whole seconds and `Z`, e.g. 2026-11-29T15:40:23Z"
                .into(),
        ));
    }
    if options.recipients.is_empty() {
        return Err(fail("no age recipient given".into()));
    }
    let recipients = options
        .recipients
        .iter()
        .enumerate()
        .map(|(i, r)| {
            age::x25519::Recipient::from_str(r.trim())
                .map_err(|_| fail(format!("recipient {} is not an age1… public key", i + 1)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if doc.entries().iter().any(|(k, _)| k == "sops") {
        return Err(fail(
            "the document has a top-level key `sops`, which sops reserves for its metadata".into(),
        ));
    }
    let rule = options.rule.compile().map_err(fail)?;

    let key = cipher::new_data_key();
    let mut writer = Writer {
        key: &key,
        rule: &rule,
        mac_only_encrypted: options.mac_only_encrypted,
        hash: Sha512::new(),
        path: Vec::new(),
    };
    if options.mac_only_encrypted {
        writer.hash.update(MAC_ONLY_ENCRYPTED_PREFIX);
    }
    let mut out = Vec::with_capacity(doc.entries().len() + 1);
    for (k, node) in doc.entries() {
        writer.path.push(k.clone());
        let written = writer.node(node);
        writer.path.pop();
        out.push((k.clone(), written?));
    }
    let mac_hex = Zeroizing::new(upper_hex(&writer.hash.finalize()));
    let mac = cipher::seal(&key, mac_hex.as_bytes(), &options.lastmodified, "str").map_err(fail)?;

    let age = recipients
        .iter()
        .map(|r| {
            Ok(AgeStanza {
                recipient: r.to_string(),
                enc: wrap_data_key(&key, r).map_err(fail)?,
            })
        })
        .collect::<Result<Vec<_>, SopsError>>()?;
    let meta = Metadata {
        age,
        lastmodified: options.lastmodified.clone(),
        mac,
        rule: options.rule.clone(),
        mac_only_encrypted: options.mac_only_encrypted,
    };
    out.push(("sops".into(), meta.to_out_node(WRITTEN_VERSION)));
    Ok(yaml::emit(&out))
}

struct Writer<'a> {
    key: &'a DataKey,
    rule: &'a CompiledRule,
    mac_only_encrypted: bool,
    hash: Sha512,
    path: Vec<String>,
}

impl Writer<'_> {
    fn node(&mut self, node: &SecretNode) -> Result<OutNode, SopsError> {
        match node {
            SecretNode::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, child) in entries {
                    self.path.push(k.clone());
                    let written = self.node(child);
                    self.path.pop();
                    out.push((k.clone(), written?));
                }
                Ok(OutNode::Map(out))
            }
            SecretNode::List(items) => items
                .iter()
                .map(|item| self.node(item))
                .collect::<Result<_, _>>()
                .map(OutNode::List),
            SecretNode::Leaf(value) => self.leaf(value).map(OutNode::Scalar),
        }
    }

    fn leaf(&mut self, value: &SecretValue) -> Result<String, SopsError> {
        let fail = |reason: &str| SopsError::Encrypt {
            reason: format!("value at `{}`: {reason}", self.path.join(".")),
        };
        if let SecretValue::Time(t) = value
            && resolve::parse_timestamp(t).as_deref() != Some(t.as_str())
        {
            return Err(fail("a time value must be canonical RFC 3339"));
        }
        // The bytes sops hashes (and, for encrypted leaves, seals).
        let canonical: Zeroizing<Vec<u8>> = Zeroizing::new(match value {
            SecretValue::Null => return Ok("null".into()),
            SecretValue::Str(s) | SecretValue::Time(s) => s.as_bytes().to_vec(),
            SecretValue::Int(i) => i.to_string().into_bytes(),
            SecretValue::Float(f) => resolve::go_float(*f).into_bytes(),
            SecretValue::Bool(b) => resolve::go_bool(*b).as_bytes().to_vec(),
            SecretValue::Bytes(b) => b.to_vec(),
        });
        let encrypted = self.rule.should_encrypt(&self.path);
        let source = if encrypted {
            if matches!(value, SecretValue::Str(s) if s.is_empty()) {
                "\"\"".to_string()
            } else {
                let aad = format!("{}:", self.path.join(":"));
                cipher::seal(self.key, &canonical, &aad, value.sops_type()).map_err(|e| fail(&e))?
            }
        } else {
            match value {
                SecretValue::Str(s) => yaml::string(s),
                SecretValue::Int(i) => i.to_string(),
                SecretValue::Float(f) => yaml_float(*f),
                SecretValue::Bool(b) => b.to_string(),
                SecretValue::Time(t) => String::clone(t),
                SecretValue::Bytes(_) => {
                    return Err(fail("a bytes value cannot be written as plaintext"));
                }
                SecretValue::Null => "null".into(),
            }
        };
        if !self.mac_only_encrypted || encrypted {
            self.hash.update(&canonical[..]);
        }
        Ok(source)
    }
}

/// A plaintext float in YAML source that yaml.v3 reads back as the same
/// float (never as an int).
fn yaml_float(f: f64) -> String {
    resolve::non_finite(f, [".nan", ".inf", "-.inf"]).unwrap_or_else(|| {
        let s = resolve::go_float(f);
        if s.contains('.') { s } else { format!("{s}.0") }
    })
}

fn wrap_data_key(key: &DataKey, recipient: &age::x25519::Recipient) -> Result<String, String> {
    let io = |e: std::io::Error| format!("age encryption failed: {}", e.kind());
    let encryptor =
        age::Encryptor::with_recipients(std::iter::once(recipient as &dyn age::Recipient))
            .map_err(|_| "age encryption failed".to_string())?;
    let mut armored = Vec::new();
    let armor = ArmoredWriter::wrap_output(&mut armored, Format::AsciiArmor).map_err(io)?;
    let mut stream = encryptor.wrap_output(armor).map_err(io)?;
    stream.write_all(&key[..]).map_err(io)?;
    stream.finish().map_err(io)?.finish().map_err(io)?;
    String::from_utf8(armored).map_err(|_| "age armor is not text".to_string())
}

fn is_canonical_lastmodified(s: &str) -> bool {
    s.len() == 20 && s.ends_with('Z') && resolve::parse_timestamp(s).as_deref() == Some(s)
}
