//! Decrypting a SOPS YAML document: unwrap the data key with the first age
//! identity that matches a recipient, open every encrypted leaf with its key
//! path as AAD, hash every leaf as sops types it, and verify the MAC before
//! anything is returned. Plaintext lives only in zeroizing buffers; nothing
//! is written anywhere and no value ever reaches an error message.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use age::armor::ArmoredReader;
use sha2::{Digest, Sha512};
use zeroize::Zeroizing;

use crate::cipher::{DataKey, EncValue, looks_encrypted};
use crate::metadata::{CompiledRule, Metadata};
use crate::resolve::{self, Resolved};
use crate::yaml::{self, RawNode, RawScalar};
use crate::{Identities, IdentitySources, SecretDocument, SecretNode, SecretValue, SopsError};

/// A parsed, still encrypted SOPS document.
pub struct SopsFile {
    label: String,
    data: Vec<(String, RawNode)>,
    meta: Metadata,
}

impl std::fmt::Debug for SopsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SopsFile")
            .field("label", &self.label)
            .field("recipients", &self.recipients())
            .field("rule", &self.meta.rule)
            .finish_non_exhaustive()
    }
}

/// Largest credentials file read: encrypted values are about three times
/// their plaintext, and credentials are short.
pub const MAX_FILE_BYTES: usize = 1024 * 1024;

/// `O_NONBLOCK` on Linux's common architectures (0 elsewhere, where the
/// regular-file check after opening is what stands).
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64"
))]
const O_NONBLOCK: i32 = 0o4000;
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "x86",
    target_arch = "aarch64",
    target_arch = "arm",
    target_arch = "riscv64"
)))]
const O_NONBLOCK: i32 = 0;

/// Reads, parses and decrypts `path` with the identities sops would find.
pub fn decrypt_file(path: &Path, sources: &IdentitySources) -> Result<SecretDocument, SopsError> {
    let label = path.display().to_string();
    let io = |e: std::io::Error| SopsError::Io {
        file: label.clone(),
        reason: match e.kind() {
            // The kind's own wording is "entity not found".
            std::io::ErrorKind::NotFound => "no such file".into(),
            kind => kind.to_string(),
        },
    };
    // Bounded read of a regular file: a file over the cap is refused
    // without holding it whole, and a FIFO or a device a repository put in
    // its place is refused at once (O_NONBLOCK: opening a FIFO does not
    // wait for a writer), never read forever.
    let mut bytes = Vec::new();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(SopsError::Io {
            file: label,
            reason: "not a regular file".into(),
        });
    }
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(SopsError::Malformed {
            file: label,
            line: None,
            message: format!(
                "the file is larger than the 1 MiB size cap for a SOPS credentials file ({MAX_FILE_BYTES} bytes)"
            ),
        });
    }
    let text = String::from_utf8(bytes).map_err(|_| SopsError::Malformed {
        file: label.clone(),
        line: None,
        message: "file is not UTF-8 text".into(),
    })?;
    decrypt_str(&text, &label, sources)
}

/// Parses and decrypts document text; `label` names it in errors.
pub fn decrypt_str(
    text: &str,
    label: &str,
    sources: &IdentitySources,
) -> Result<SecretDocument, SopsError> {
    // Parse first: a plaintext file is refused as such whatever the keys.
    let file = SopsFile::parse(text, label)?;
    let identities = Identities::load(sources)?;
    file.decrypt(&identities)
}

impl SopsFile {
    /// Parses the YAML and the `sops:` metadata; decrypts nothing.
    pub fn parse(text: &str, label: &str) -> Result<SopsFile, SopsError> {
        let root = yaml::parse_document(text).map_err(|p| {
            if p.unsupported {
                SopsError::Unsupported {
                    file: label.to_string(),
                    what: match p.line {
                        Some(l) => format!("line {l}: {}", p.message),
                        None => p.message,
                    },
                }
            } else {
                SopsError::Malformed {
                    file: label.to_string(),
                    line: p.line,
                    message: p.message,
                }
            }
        })?;
        let mut data = match root {
            Some(RawNode::Map(entries)) => entries,
            Some(RawNode::List(_)) => {
                return Err(SopsError::Malformed {
                    file: label.to_string(),
                    line: None,
                    message: "the document root is a list; sops documents are maps".into(),
                });
            }
            _ => {
                return Err(SopsError::NotSops {
                    file: label.to_string(),
                });
            }
        };
        let position =
            data.iter()
                .position(|(k, _)| k == "sops")
                .ok_or_else(|| SopsError::NotSops {
                    file: label.to_string(),
                })?;
        let (_, meta_node) = data.remove(position);
        let meta = Metadata::parse(&meta_node).map_err(|(line, message, unsupported)| {
            if unsupported {
                SopsError::Unsupported {
                    file: label.to_string(),
                    what: message,
                }
            } else {
                SopsError::Malformed {
                    file: label.to_string(),
                    line,
                    message,
                }
            }
        })?;
        Ok(SopsFile {
            label: label.to_string(),
            data,
            meta,
        })
    }

    /// The `age1…` recipients the data key is wrapped for.
    pub fn recipients(&self) -> Vec<String> {
        self.meta.age.iter().map(|s| s.recipient.clone()).collect()
    }

    /// The crypt rule in force (sops' default when the file names none),
    /// so a re-encryption can keep it.
    pub fn rule(&self) -> &crate::CryptRule {
        &self.meta.rule
    }

    /// Whether the MAC covers only encrypted values.
    pub fn mac_only_encrypted(&self) -> bool {
        self.meta.mac_only_encrypted
    }

    /// Decrypts every value and verifies the MAC. Returns nothing on any
    /// failure: values are only handed out once the MAC matched.
    pub fn decrypt(&self, identities: &Identities) -> Result<SecretDocument, SopsError> {
        let key = self.data_key(identities)?;
        let rule = self
            .meta
            .rule
            .compile()
            .map_err(|message| SopsError::Malformed {
                file: self.label.clone(),
                line: None,
                message,
            })?;
        let mut walk = Walk {
            file: &self.label,
            key: &key,
            rule: &rule,
            mac_only_encrypted: self.meta.mac_only_encrypted,
            hash: Sha512::new(),
            path: Vec::new(),
        };
        if self.meta.mac_only_encrypted {
            walk.hash.update(MAC_ONLY_ENCRYPTED_PREFIX);
        }
        let mut entries = Vec::with_capacity(self.data.len());
        for (k, node) in &self.data {
            walk.path.push(k.clone());
            let value = walk.node(node, k);
            walk.path.pop();
            entries.push((k.clone(), value?));
        }
        let document = SecretDocument::from_entries(entries);
        let computed = Zeroizing::new(upper_hex(&walk.hash.finalize()));
        self.verify_mac(&key, &computed)?;
        Ok(document)
    }

    fn data_key(&self, identities: &Identities) -> Result<DataKey, SopsError> {
        if self.meta.age.is_empty() {
            return Err(SopsError::Unsupported {
                file: self.label.clone(),
                what: "the file has no age recipient (only age keys are supported)".into(),
            });
        }
        if identities.is_empty() {
            return Err(SopsError::NoIdentity {
                file: self.label.clone(),
                searched: identities.searched().to_vec(),
            });
        }
        let mut unreadable = 0;
        for stanza in &self.meta.age {
            let decryptor = match age::Decryptor::new(ArmoredReader::new(stanza.enc.as_bytes())) {
                Ok(d) => d,
                Err(_) => {
                    unreadable += 1;
                    continue;
                }
            };
            let mut reader = match decryptor.decrypt(identities.as_dyn()) {
                Ok(r) => r,
                Err(age::DecryptError::NoMatchingKeys) => continue,
                Err(_) => {
                    unreadable += 1;
                    continue;
                }
            };
            let mut plain = Zeroizing::new(Vec::new());
            if reader.read_to_end(&mut plain).is_err() {
                unreadable += 1;
                continue;
            }
            let mut key: DataKey = Zeroizing::new([0u8; 32]);
            if plain.len() != key.len() {
                return Err(SopsError::Malformed {
                    file: self.label.clone(),
                    line: None,
                    message: format!(
                        "the data key wrapped for {} is not 32 bytes",
                        stanza.recipient
                    ),
                });
            }
            key.copy_from_slice(&plain);
            return Ok(key);
        }
        if unreadable == self.meta.age.len() {
            return Err(SopsError::Malformed {
                file: self.label.clone(),
                line: None,
                message: "no `enc` entry of `sops.age` is a readable age file".into(),
            });
        }
        Err(SopsError::NoMatchingIdentity {
            file: self.label.clone(),
            recipients: self.recipients(),
        })
    }

    fn verify_mac(&self, key: &DataKey, computed: &str) -> Result<(), SopsError> {
        let fail = |kind| SopsError::MacMismatch {
            file: self.label.clone(),
            kind,
        };
        if self.meta.mac.is_empty() {
            return Err(fail(crate::MacFailure::Missing));
        }
        let aad = mac_aad(&self.meta.lastmodified);
        let stored = EncValue::parse(&self.meta.mac)
            .and_then(|enc| enc.open(key, &aad))
            .map_err(|_| fail(crate::MacFailure::Undecryptable))?;
        if !constant_time_eq(&stored, computed.as_bytes()) {
            return Err(fail(crate::MacFailure::Mismatch));
        }
        Ok(())
    }
}

/// `SHA-256("sops")`: the first bytes hashed when `mac_only_encrypted` is set.
pub(crate) const MAC_ONLY_ENCRYPTED_PREFIX: [u8; 32] = [
    0x8a, 0x3f, 0xd2, 0xad, 0x54, 0xce, 0x66, 0x52, 0x7b, 0x10, 0x34, 0xf3, 0xd1, 0x47, 0xbe, 0x0b,
    0x0b, 0x97, 0x5b, 0x3b, 0xf4, 0x4f, 0x72, 0xc6, 0xfd, 0xad, 0xec, 0x81, 0x76, 0xf2, 0x7d, 0x69,
];

struct Walk<'a> {
    file: &'a str,
    key: &'a DataKey,
    rule: &'a CompiledRule,
    mac_only_encrypted: bool,
    hash: Sha512,
    /// Map keys from the root: the AAD, without list indices.
    path: Vec<String>,
}

impl Walk<'_> {
    /// `display` is the path with list indices, for error messages.
    fn node(&mut self, node: &RawNode, display: &str) -> Result<SecretNode, SopsError> {
        match node {
            RawNode::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, child) in entries {
                    self.path.push(k.clone());
                    let value = self.node(child, &format!("{display}.{k}"));
                    self.path.pop();
                    out.push((k.clone(), value?));
                }
                Ok(SecretNode::Map(out))
            }
            RawNode::List(items) => items
                .iter()
                .enumerate()
                .map(|(i, child)| self.node(child, &format!("{display}[{i}]")))
                .collect::<Result<_, _>>()
                .map(SecretNode::List),
            RawNode::Scalar(s) => self.leaf(s, display).map(SecretNode::Leaf),
        }
    }

    fn leaf(&mut self, s: &RawScalar, display: &str) -> Result<SecretValue, SopsError> {
        let typed = if s.quoted {
            Resolved::Str
        } else {
            resolve::resolve_plain(&s.text).map_err(|what| SopsError::Unsupported {
                file: self.file.to_string(),
                what: format!("line {}, `{display}`: {what}", s.line),
            })?
        };
        if typed == Resolved::Null {
            return Ok(SecretValue::Null);
        }
        let encrypted = self.rule.should_encrypt(&self.path);
        let (value, mac_bytes) = if encrypted {
            self.open(s, display)?
        } else {
            plaintext(s, typed)
        };
        if !self.mac_only_encrypted || encrypted {
            self.hash.update(&mac_bytes[..]);
        }
        Ok(value)
    }

    /// Decrypts one leaf; returns the value and its MAC bytes.
    fn open(
        &self,
        s: &RawScalar,
        display: &str,
    ) -> Result<(SecretValue, Zeroizing<Vec<u8>>), SopsError> {
        let fail = |reason: &str| SopsError::ValueDecrypt {
            file: self.file.to_string(),
            path: display.to_string(),
            reason: reason.to_string(),
        };
        if s.text.is_empty() {
            return Ok((SecretValue::str(""), Zeroizing::new(Vec::new())));
        }
        if !looks_encrypted(&s.text) {
            return Err(fail(
                "the value should be encrypted but is plaintext (edited by hand?)",
            ));
        }
        let enc = EncValue::parse(&s.text).map_err(|e| fail(&e.to_string()))?;
        let aad = format!("{}:", self.path.join(":"));
        let plain = enc.open(self.key, &aad).map_err(|e| fail(&e.to_string()))?;
        let text = || {
            std::str::from_utf8(&plain)
                .map(|t| Zeroizing::new(t.to_string()))
                .map_err(|_| fail("the decrypted value is not UTF-8"))
        };
        let bad_type = |t: &str| fail(&format!("the decrypted value is not a valid {t}"));
        let rendered = |s: String| Zeroizing::new(s.into_bytes());
        Ok(match enc.value_type.as_str() {
            "str" => (SecretValue::Str(text()?), plain.clone()),
            "int" => {
                let i = resolve::go_atoi(&text()?).ok_or_else(|| bad_type("int"))?;
                (SecretValue::Int(i), rendered(i.to_string()))
            }
            "float" => {
                let f = resolve::go_parse_float(&text()?).ok_or_else(|| bad_type("float"))?;
                (SecretValue::Float(f), rendered(resolve::go_float(f)))
            }
            "bool" => {
                let b = resolve::go_parse_bool(&text()?).ok_or_else(|| bad_type("bool"))?;
                (SecretValue::Bool(b), rendered(resolve::go_bool(b).into()))
            }
            "time" => (SecretValue::Time(text()?), plain.clone()),
            "bytes" => (SecretValue::Bytes(plain.clone()), plain.clone()),
            other => return Err(fail(&format!("unknown value type `{other}`"))),
        })
    }
}

/// A plaintext leaf and its MAC bytes: Go's rendering of the yaml.v3 type.
fn plaintext(s: &RawScalar, typed: Resolved) -> (SecretValue, Zeroizing<Vec<u8>>) {
    let bytes = |t: String| Zeroizing::new(t.into_bytes());
    match typed {
        Resolved::Bool(b) => (SecretValue::Bool(b), bytes(resolve::go_bool(b).into())),
        Resolved::Int(i) => (SecretValue::Int(i), bytes(i.to_string())),
        Resolved::Float(f) => (SecretValue::Float(f), bytes(resolve::go_float(f))),
        Resolved::Time(t) => (SecretValue::Time(Zeroizing::new(t.clone())), bytes(t)),
        Resolved::Str | Resolved::Null => (SecretValue::str(s.text.clone()), bytes(s.text.clone())),
    }
}

/// sops authenticates the MAC with `lastmodified` parsed and re-rendered as
/// Go's RFC 3339 (no fractional seconds, `Z` for UTC). For the files sops
/// writes that is the stored text itself.
fn mac_aad(lastmodified: &str) -> String {
    match resolve::parse_timestamp(lastmodified) {
        Some(canonical) if lastmodified.contains(['T', 't']) => match canonical.split_once('.') {
            // Drop the fraction but keep the zone after it.
            Some((seconds, rest)) => {
                let zone = rest.trim_start_matches(|c: char| c.is_ascii_digit());
                format!("{seconds}{zone}")
            }
            None => canonical,
        },
        _ => lastmodified.to_string(),
    }
}

pub(crate) fn upper_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_aad_is_lastmodified_as_go_renders_rfc3339() {
        assert_eq!(mac_aad("2026-11-29T15:40:23Z"), "2026-11-29T15:40:23Z");
        assert_eq!(mac_aad("2026-11-29T15:40:23.25Z"), "2026-11-29T15:40:23Z");
        assert_eq!(mac_aad("2026-11-29T15:40:23+00:00"), "2026-11-29T15:40:23Z");
        assert_eq!(
            mac_aad("2026-11-29T15:40:23.5+02:00"),
            "2026-11-29T15:40:23+02:00"
        );
        assert_eq!(mac_aad("not a time"), "not a time");
    }
}
