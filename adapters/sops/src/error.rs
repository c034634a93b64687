//! The one error type of this crate. Every variant names the file (and, where
//! there is one, the key path) so a person can act; none ever carries a
//! plaintext value, a data key or an identity.

use std::fmt;

/// Why a SOPS document could not be read, decrypted or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SopsError {
    /// The file could not be read from disk.
    #[error("{file}: cannot read file: {reason}")]
    Io { file: String, reason: String },

    /// No top-level `sops:` metadata: a plaintext file is refused.
    #[error(
        "{file}: not a SOPS-encrypted file (no top-level `sops:` metadata); plaintext credentials files are refused"
    )]
    NotSops { file: String },

    /// No age identity was found in any of the places sops looks.
    #[error("{file}: no age identity found (looked in: {})", searched.join(", "))]
    NoIdentity { file: String, searched: Vec<String> },

    /// An identity source exists but does not hold a usable identity.
    #[error("{origin}: {reason}")]
    InvalidIdentity { origin: String, reason: String },

    /// Identities were loaded, but none unwraps the data key.
    #[error("{file}: no age identity matches any recipient of this file (recipients: {})", recipients.join(", "))]
    NoMatchingIdentity {
        file: String,
        recipients: Vec<String>,
    },

    /// The document's MAC does not verify: the file was tampered with or
    /// corrupted. No value is returned.
    #[error("{file}: {kind}")]
    MacMismatch { file: String, kind: MacFailure },

    /// One value failed to decrypt or authenticate.
    #[error("{file}: value at `{path}` cannot be decrypted: {reason}")]
    ValueDecrypt {
        file: String,
        path: String,
        reason: String,
    },

    /// The document is not valid YAML or its `sops:` metadata is broken.
    #[error("{file}{}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    Malformed {
        file: String,
        line: Option<usize>,
        message: String,
    },

    /// A valid SOPS feature this reader does not implement.
    #[error("{file}: unsupported: {what}")]
    Unsupported { file: String, what: String },

    /// Encryption failed (bad recipient, bad input tree).
    #[error("cannot encrypt SOPS document: {reason}")]
    Encrypt { reason: String },
}

/// How the MAC check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MacFailure {
    /// The MAC decrypted, but does not match the values.
    Mismatch,
    /// The encrypted MAC itself does not authenticate (MAC or
    /// `lastmodified` tampered with).
    Undecryptable,
    /// The metadata holds no MAC.
    Missing,
}

impl fmt::Display for MacFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MacFailure::Mismatch => "MAC mismatch: the file was modified after it was encrypted",
            MacFailure::Undecryptable => {
                "MAC cannot be authenticated (file or lastmodified tampered with)"
            }
            MacFailure::Missing => "MAC mismatch: the file has no MAC",
        })
    }
}

impl SopsError {
    /// A stable short name of the error class, for exit codes and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            SopsError::Io { .. } => "io",
            SopsError::NotSops { .. } => "not-sops",
            SopsError::NoIdentity { .. } => "no-identity",
            SopsError::InvalidIdentity { .. } => "invalid-identity",
            SopsError::NoMatchingIdentity { .. } => "no-matching-identity",
            SopsError::MacMismatch { .. } => "mac-mismatch",
            SopsError::ValueDecrypt { .. } => "value-decrypt",
            SopsError::Malformed { .. } => "malformed",
            SopsError::Unsupported { .. } => "unsupported",
            SopsError::Encrypt { .. } => "encrypt",
        }
    }
}
