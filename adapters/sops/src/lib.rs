//! SOPS (YAML + age) for ProxOps: decrypts `clusters/<name>/secrets.sops.yaml`
//! natively, in memory, exactly as sops 3.11 does (data key unwrapped with an
//! age identity, AES-256-GCM values with the key path as AAD, SHA-512 MAC over
//! every leaf as sops types it), and writes documents the real `sops` can
//! decrypt.
//!
//! What it must never do: run the `sops` binary, write plaintext anywhere,
//! put a value, a data key or an identity in an error or `Debug` output, or
//! return any value from a document whose MAC does not verify.
//!
//! Entry points: [`decrypt_file`] / [`decrypt_str`] (with the environment as
//! an [`IdentitySources`] value), [`SopsFile`] for the two steps apart, and
//! [`encrypt`]. The format itself is described in `docs/sops-format.md`.

mod cipher;
mod decrypt;
mod encrypt;
mod error;
mod identity;
mod metadata;
mod resolve;
mod tree;
mod yaml;

pub use decrypt::{MAX_FILE_BYTES, SopsFile, decrypt_file, decrypt_str};
pub use encrypt::{EncryptOptions, encrypt};
pub use error::{MacFailure, SopsError};
pub use identity::{ConfigDirRule, Identities, IdentitySources};
pub use metadata::CryptRule;
pub use tree::{SecretDocument, SecretNode, SecretValue};
