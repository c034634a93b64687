//! The sops value cipher: `ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]` with
//! AES-256-GCM under the document's data key, a 32-byte nonce (sops' choice;
//! legal GCM, see `AesGcm<Aes256, U32>`) and the key path as AAD. It owns the
//! text format of an encrypted value and nothing else; it never sees a file.

use aes_gcm::aead::consts::U32;
use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::{Aead, KeyInit, OsRng, Payload};
use aes_gcm::aes::Aes256;
use aes_gcm::{AesGcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroizing;

type SopsGcm = AesGcm<Aes256, U32>;

const TAG_LEN: usize = 16;
const IV_LEN: usize = 32;

/// The 32-byte document data key.
pub(crate) type DataKey = Zeroizing<[u8; 32]>;

/// One encrypted value, split into its fields.
pub(crate) struct EncValue {
    data: Vec<u8>,
    iv: Vec<u8>,
    tag: Vec<u8>,
    pub(crate) value_type: String,
}

/// Why a value could not be opened. Never carries plaintext.
#[derive(Debug)]
pub(crate) enum CipherFailure {
    /// Not in the `ENC[AES256_GCM,…]` format.
    Format(String),
    /// GCM authentication failed (wrong key, tampered data, wrong path).
    Authentication,
}

impl std::fmt::Display for CipherFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CipherFailure::Format(why) => f.write_str(why),
            CipherFailure::Authentication => f.write_str("message authentication failed"),
        }
    }
}

/// sops' own test: the value starts with this (the regex is unanchored at
/// the end).
pub(crate) fn looks_encrypted(text: &str) -> bool {
    text.starts_with("ENC[AES256_GCM,")
}

impl EncValue {
    pub(crate) fn parse(text: &str) -> Result<EncValue, CipherFailure> {
        let bad = |why: &str| CipherFailure::Format(why.to_string());
        let inner = text
            .strip_prefix("ENC[AES256_GCM,")
            .and_then(|t| t.strip_suffix(']'))
            .ok_or_else(|| bad("value is not in the ENC[AES256_GCM,…] format"))?;
        let mut fields = inner.split(',');
        let mut field = |name: &str| -> Result<&str, CipherFailure> {
            fields
                .next()
                .and_then(|f| f.strip_prefix(name))
                .and_then(|f| f.strip_prefix(':'))
                .ok_or_else(|| {
                    CipherFailure::Format(format!("encrypted value has no `{name}` field"))
                })
        };
        let decode = |name: &str, b64: &str| {
            STANDARD
                .decode(b64)
                .map_err(|_| CipherFailure::Format(format!("`{name}` is not base64")))
        };
        let data = decode("data", field("data")?)?;
        let iv = decode("iv", field("iv")?)?;
        let tag = decode("tag", field("tag")?)?;
        let value_type = field("type")?.to_string();
        if iv.len() != IV_LEN {
            return Err(bad("`iv` is not 32 bytes"));
        }
        if tag.len() != TAG_LEN {
            return Err(bad("`tag` is not 16 bytes"));
        }
        Ok(EncValue {
            data,
            iv,
            tag,
            value_type,
        })
    }

    /// Opens the value; the AAD binds it to its key path (or, for the MAC,
    /// to `lastmodified`).
    pub(crate) fn open(
        &self,
        key: &DataKey,
        aad: &str,
    ) -> Result<Zeroizing<Vec<u8>>, CipherFailure> {
        let cipher =
            SopsGcm::new_from_slice(&key[..]).map_err(|_| CipherFailure::Authentication)?;
        let mut sealed = Vec::with_capacity(self.data.len() + TAG_LEN);
        sealed.extend_from_slice(&self.data);
        sealed.extend_from_slice(&self.tag);
        cipher
            .decrypt(
                Nonce::<U32>::from_slice(&self.iv),
                Payload {
                    msg: &sealed,
                    aad: aad.as_bytes(),
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| CipherFailure::Authentication)
    }
}

/// Seals `plaintext` under a fresh random 32-byte IV.
pub(crate) fn seal(
    key: &DataKey,
    plaintext: &[u8],
    aad: &str,
    value_type: &str,
) -> Result<String, String> {
    let cipher =
        SopsGcm::new_from_slice(&key[..]).map_err(|_| "bad data key length".to_string())?;
    let mut iv = [0u8; IV_LEN];
    OsRng.fill_bytes(&mut iv);
    let sealed = cipher
        .encrypt(
            Nonce::<U32>::from_slice(&iv),
            Payload {
                msg: plaintext,
                aad: aad.as_bytes(),
            },
        )
        .map_err(|_| "AES-GCM encryption failed".to_string())?;
    let (data, tag) = sealed.split_at(sealed.len() - TAG_LEN);
    Ok(format!(
        "ENC[AES256_GCM,data:{},iv:{},tag:{},type:{}]",
        STANDARD.encode(data),
        STANDARD.encode(iv),
        STANDARD.encode(tag),
        value_type
    ))
}

/// A fresh random data key.
pub(crate) fn new_data_key() -> DataKey {
    let mut key = Zeroizing::new([0u8; 32]);
    OsRng.fill_bytes(&mut key[..]);
    key
}
