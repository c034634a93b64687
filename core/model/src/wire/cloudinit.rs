//! `sshkeys`: PVE stores the whole value percent-encoded (a raw key is
//! rejected with 400 "invalid urlencoded string" [PROBE §20.5]). Keys are
//! compared by identity (type + blob), never by comment.

use std::collections::BTreeSet;

use super::WireError;

/// Percent-encodes every byte outside RFC 3986's unreserved set
/// (`A-Z a-z 0-9 - . _ ~`): space `%20`, newline `%0A`, `@` `%40`, `+` `%2B`.
/// PVE unescapes path-style, so a raw `+` is never produced [PROBE §22.4].
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3 / 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` escapes (either hex case). `+` stays `+`: PVE's encoding is
/// path-style, not form-style.
pub fn percent_decode(s: &str) -> Result<String, WireError> {
    let bad = || WireError::invalid("sshkeys", s, "a percent-encoded value (%XX escapes)");
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).ok_or_else(bad)?;
            let hex = std::str::from_utf8(hex).map_err(|_| bad())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

/// Standard padded base64 (what OpenSSH writes); `None` when it is not.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes = text.as_bytes();
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let last = bytes.len() / 4 - 1;
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let pad = chunk.iter().rev().take_while(|c| **c == b'=').count();
        if pad > 2 || (pad > 0 && i != last) {
            return None;
        }
        let mut n = 0u32;
        for c in &chunk[..4 - pad] {
            n = (n << 6) | value(*c)?;
        }
        n <<= 6 * pad as u32;
        let got = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&got[..3 - pad]);
    }
    Some(out)
}

/// One public key line: `<type> <blob> [comment…]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SshKey {
    pub key_type: String,
    pub blob: String,
    /// Everything after the blob, verbatim (may be empty).
    pub comment: String,
}

/// What makes two keys the same key: type and blob, comment excluded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct SshKeyId {
    pub key_type: String,
    pub blob: String,
}

impl SshKey {
    /// A key line needs at least two whitespace-separated fields and a blob
    /// of at least 16 characters [PROBE §22.4].
    pub fn parse(line: &str) -> Result<SshKey, WireError> {
        let mut fields = line.split_whitespace();
        let (Some(key_type), Some(blob)) = (fields.next(), fields.next()) else {
            return Err(WireError::invalid(
                "sshkeys",
                line,
                "a public key line \"<type> <base64 blob> [comment]\"",
            ));
        };
        if blob.len() < 16 {
            return Err(WireError::invalid(
                "sshkeys",
                line,
                "a key blob of at least 16 characters",
            ));
        }
        Ok(SshKey {
            key_type: key_type.to_owned(),
            blob: blob.to_owned(),
            comment: fields.collect::<Vec<_>>().join(" "),
        })
    }

    /// Whether the key blob parses as `ssh-keygen -l` reads it, which is
    /// PVE's check (qemu-server `API2/Qemu.pm` `$check_sshkeys` →
    /// `PVE::Tools::validate_ssh_public_keys`: a key `ssh-keygen` cannot
    /// read is a 500 "SSH public key validation error", and the whole
    /// write is refused): padded base64 of length-prefixed strings, the
    /// first the key type named before it, as many as that type has (an
    /// ed25519 key of 32 bytes), nothing left over. `Err` says what is
    /// wrong.
    pub fn check_blob(&self) -> Result<(), String> {
        let bytes = base64_decode(&self.blob).ok_or("the key blob is not padded base64")?;
        let mut parts = Vec::new();
        let mut rest = bytes.as_slice();
        while !rest.is_empty() {
            let (len, tail) = rest
                .split_first_chunk::<4>()
                .ok_or("the key blob is truncated")?;
            let len = u32::from_be_bytes(*len) as usize;
            if tail.len() < len {
                return Err("the key blob is truncated".into());
            }
            parts.push(&tail[..len]);
            rest = &tail[len..];
        }
        let Some(first) = parts.first() else {
            return Err("the key blob is empty".into());
        };
        if *first != self.key_type.as_bytes() {
            return Err(format!(
                "the key blob is not a {} key (it says {:?})",
                self.key_type,
                String::from_utf8_lossy(first)
            ));
        }
        let want = match self.key_type.as_str() {
            "ssh-ed25519" => 2,
            "ssh-rsa"
            | "ecdsa-sha2-nistp256"
            | "ecdsa-sha2-nistp384"
            | "ecdsa-sha2-nistp521"
            | "sk-ssh-ed25519@openssh.com" => 3,
            "sk-ecdsa-sha2-nistp256@openssh.com" => 4,
            "ssh-dss" => 5,
            other => return Err(format!("unknown key type {other:?}")),
        };
        if parts.len() != want || parts.iter().skip(1).any(|p| p.is_empty()) {
            return Err("the key blob is truncated or has extra data".into());
        }
        if self.key_type == "ssh-ed25519" && parts[1].len() != 32 {
            return Err("an ed25519 key blob holds a 32-byte key".into());
        }
        Ok(())
    }

    pub fn id(&self) -> SshKeyId {
        SshKeyId {
            key_type: self.key_type.clone(),
            blob: self.blob.clone(),
        }
    }

    pub fn to_line(&self) -> String {
        if self.comment.is_empty() {
            format!("{} {}", self.key_type, self.blob)
        } else {
            format!("{} {} {}", self.key_type, self.blob, self.comment)
        }
    }
}

/// The `sshkeys` value: key lines in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct SshKeys {
    pub keys: Vec<SshKey>,
}

impl SshKeys {
    /// Reads PVE's percent-encoded value.
    pub fn parse(wire: &str) -> Result<SshKeys, WireError> {
        SshKeys::from_text(&percent_decode(wire)?)
    }

    /// Reads plain text, one key per line (empty lines and `#` comments skipped).
    pub fn from_text(text: &str) -> Result<SshKeys, WireError> {
        let keys = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(SshKey::parse)
            .collect::<Result<_, _>>()?;
        Ok(SshKeys { keys })
    }

    /// Identities for set comparison: reordering, re-encoding or a changed
    /// comment is not drift.
    pub fn ids(&self) -> BTreeSet<SshKeyId> {
        self.keys.iter().map(SshKey::id).collect()
    }

    pub fn to_text(&self) -> String {
        self.keys
            .iter()
            .map(SshKey::to_line)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Keys joined by newline, then percent-encoded as PVE expects.
    pub fn to_wire(&self) -> String {
        percent_encode(&self.to_text())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const ED: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y+TBx08F7zRdhBlKjk7aywMT";

    #[test]
    fn sshkeys_are_percent_encoded_space_newline_at_plus() {
        let k = SshKeys::from_text(&format!("{ED} me@host\n{ED}x other")).unwrap();
        let w = k.to_wire();
        assert!(w.starts_with("ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y%2BTBx08F7zRdhBlKjk7aywMT%20me%40host%0A"));
        assert!(!w.contains('+') && !w.contains(' ') && !w.contains('@'));
        assert_eq!(SshKeys::parse(&w).unwrap(), k);
    }

    #[test]
    fn real_pve_sshkeys_value_decodes() {
        let live =
            "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y%2BTBx08F7zRdhBlKjk7aywMT";
        let k = SshKeys::parse(live).unwrap();
        assert_eq!(k.keys.len(), 1);
        assert_eq!(k.to_wire(), live);
    }

    #[test]
    fn key_identity_excludes_the_comment() {
        let a = SshKeys::from_text(&format!("{ED} alice@laptop")).unwrap();
        let b = SshKeys::from_text(&format!("{ED} renamed")).unwrap();
        assert_eq!(a.ids(), b.ids());
    }

    #[test]
    fn a_key_needs_two_fields_and_a_long_blob() {
        assert!(SshKey::parse("ssh-ed25519").is_err());
        assert!(SshKey::parse("ssh-ed25519 short").is_err());
    }

    #[test]
    fn bad_escapes_are_errors() {
        assert!(percent_decode("abc%2").is_err());
        assert!(percent_decode("abc%zz").is_err());
        assert_eq!(percent_decode("a%2bb+c").unwrap(), "a+b+c");
    }
}
