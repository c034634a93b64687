//! Which PVE server certificates the live transport accepts.
//!
//! Owns the trust modes (`TlsTrust`) and turns one into a rustls client
//! configuration. Verification is always on, except through the variant named
//! `TlsTrust::DangerInsecure`, which a caller must pick by name and should warn
//! about every cycle.
//!
//! **Architecture Invariant:** a server that fails verification is refused
//! during the handshake, before any request byte (and so any credential) is
//! sent. This module never weakens a mode silently: a CA file without a
//! certificate, or a malformed fingerprint, is an error, not "trust anything".
//!
//! A refusal says what the server presented (the certificate's issuer and
//! its SHA-256 fingerprint, in the form `fingerprint:` takes) and the two
//! ways to trust it, since an untrusted PVE node certificate is the first
//! error nearly every new installation meets.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use sha2::{Digest, Sha256};

/// How the PVE endpoint's certificate is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsTrust {
    /// The operating system's trust store (the CAs `update-ca-certificates`
    /// manages), so an internal CA the host already trusts works unchanged.
    SystemRoots,
    /// Only the certificates in this PEM file (`pve.ca-file`); it must hold at
    /// least one. A self-signed server certificate can be its own CA here.
    CaFile(PathBuf),
    /// Accept exactly the server certificate whose SHA-256 fingerprint is this,
    /// whoever issued it and whatever name it carries (PVE's default
    /// self-signed node certificates). The handshake signature is still checked.
    Fingerprint(Fingerprint),
    /// Accept any certificate. Anyone on the path can read the API token or
    /// ticket. Only for a lab, only when asked for by name.
    DangerInsecure,
}

impl TlsTrust {
    /// From the settings of one cluster: `insecure: true` (refused together
    /// with a fingerprint, which would mean two opposite things), else a
    /// fingerprint pin, else a CA file (the cluster's, else `pve.ca-file`),
    /// else the system trust store. Blank strings count as absent.
    pub fn from_settings(
        ca_file: Option<&str>,
        fingerprint: Option<&str>,
        insecure: bool,
    ) -> Result<TlsTrust, TlsError> {
        fn given(s: Option<&str>) -> Option<&str> {
            s.map(str::trim).filter(|s| !s.is_empty())
        }
        match (insecure, given(fingerprint), given(ca_file)) {
            (true, Some(_), _) => Err(TlsError::Setup(
                "both `insecure: true` and a certificate fingerprint are set; pin the fingerprint and drop insecure"
                    .into(),
            )),
            (true, None, _) => Ok(TlsTrust::DangerInsecure),
            (false, Some(pin), _) => Fingerprint::parse(pin).map(TlsTrust::Fingerprint),
            (false, None, Some(path)) => Ok(TlsTrust::CaFile(PathBuf::from(path))),
            (false, None, None) => Ok(TlsTrust::SystemRoots),
        }
    }

    /// True for the one mode that does not authenticate the server.
    pub fn is_insecure(&self) -> bool {
        matches!(self, TlsTrust::DangerInsecure)
    }
}

/// The SHA-256 fingerprint of a DER-encoded certificate.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// The fingerprint of this certificate (DER bytes).
    pub fn of_der(der: &[u8]) -> Fingerprint {
        Fingerprint(Sha256::digest(der).into())
    }

    /// Parses `AA:BB:…` (as PVE and openssl print it) or plain hex, in any case.
    pub fn parse(text: &str) -> Result<Fingerprint, TlsError> {
        let trimmed = text.trim();
        let hex: String = trimmed.chars().filter(|c| *c != ':').collect();
        let bad = |why: &str| {
            TlsError::Fingerprint(format!("{why} (expected 32 hex bytes, e.g. AA:BB:…)"))
        };
        if hex.len() != 64 {
            return Err(bad(&format!("{} hex digits", hex.len())));
        }
        if trimmed.contains(':') && !colon_separated_pairs(trimmed) {
            return Err(bad("colons must separate pairs of hex digits"));
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            let pair = hex
                .get(2 * i..2 * i + 2)
                .ok_or_else(|| bad("not ASCII hex"))?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad("not hex"))?;
        }
        Ok(Fingerprint(out))
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

fn colon_separated_pairs(text: &str) -> bool {
    text.split(':').all(|pair| pair.len() == 2)
}

impl FromStr for Fingerprint {
    type Err = TlsError;
    fn from_str(s: &str) -> Result<Fingerprint, TlsError> {
        Fingerprint::parse(s)
    }
}

/// `AA:BB:…`, uppercase, as PVE shows it.
impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// A trust mode that cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    #[error("CA file {path}: {message}")]
    CaFile { path: PathBuf, message: String },
    #[error("invalid certificate fingerprint: {0}")]
    Fingerprint(String),
    #[error("system trust store: {0}")]
    SystemRoots(String),
    #[error("TLS setup: {0}")]
    Setup(String),
}

/// The rustls client configuration for a trust mode (TLS 1.2 and 1.3, ring).
pub(crate) fn client_config(trust: &TlsTrust) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Setup(e.to_string()))?;
    // The CA modes verify with rustls' own WebPKI verifier, unchanged; the
    // custom-verifier door is used only to say what was refused.
    let config = match trust {
        TlsTrust::SystemRoots => builder
            .dangerous()
            .with_custom_certificate_verifier(explained(
                system_roots()?,
                provider,
                "the system trust store".to_owned(),
            )?)
            .with_no_client_auth(),
        TlsTrust::CaFile(path) => builder
            .dangerous()
            .with_custom_certificate_verifier(explained(
                ca_file_roots(path)?,
                provider,
                format!("the CA file {}", path.display()),
            )?)
            .with_no_client_auth(),
        TlsTrust::Fingerprint(pin) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CertificateCheck {
                pin: Some(*pin),
                algorithms,
            }))
            .with_no_client_auth(),
        TlsTrust::DangerInsecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CertificateCheck {
                pin: None,
                algorithms,
            }))
            .with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

fn system_roots() -> Result<RootCertStore, TlsError> {
    let found = rustls_native_certs::load_native_certs();
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "no certificates found".into());
        return Err(TlsError::SystemRoots(format!(
            "{why}; install the ca-certificates package, or set pve.ca-file or a certificate fingerprint"
        )));
    }
    Ok(store)
}

fn ca_file_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let fail = |message: String| TlsError::CaFile {
        path: path.to_path_buf(),
        message,
    };
    let pem = crate::localfile::read_capped(path, crate::localfile::PEM_MAX_BYTES)
        .map_err(|e| fail(e.to_string()))?;
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| fail(format!("not PEM: {e}")))?;
        store
            .add(cert)
            .map_err(|e| fail(format!("unusable certificate: {e}")))?;
    }
    if store.is_empty() {
        return Err(fail("holds no PEM certificate".into()));
    }
    Ok(store)
}

/// `TlsTrust::Fingerprint` (`pin: Some`): accepts exactly one end-entity
/// certificate, by fingerprint. `TlsTrust::DangerInsecure` (`pin: None`):
/// any certificate. Either way the handshake signature is still checked, so
/// the peer at least holds the key of what it presented.
#[derive(Debug)]
struct CertificateCheck {
    pin: Option<Fingerprint>,
    algorithms: WebPkiSupportedAlgorithms,
}

/// Why a server certificate was refused, with what the server presented:
/// reported through rustls as `CertificateError::Other` and shown by the
/// transport as it is.
#[derive(Debug)]
pub(crate) struct Refusal {
    reason: RefusalReason,
    presented: Presented,
}

#[derive(Debug)]
enum RefusalReason {
    /// Not the pinned certificate.
    Pin(Fingerprint),
    /// The WebPKI check against `trusted` failed.
    Chain {
        why: CertificateError,
        trusted: String,
    },
}

/// The end-entity certificate a server presented.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Presented {
    fingerprint: Fingerprint,
    /// The issuer's distinguished name as `CN=…, O=…`, when it parses.
    issuer: Option<String>,
    self_signed: bool,
}

impl Presented {
    fn of(der: &[u8]) -> Presented {
        let names = der::issuer_and_subject(der);
        Presented {
            fingerprint: Fingerprint::of_der(der),
            self_signed: names.as_ref().is_some_and(|(i, s)| i == s),
            issuer: names.map(|(issuer, _)| issuer),
        }
    }
}

impl fmt::Display for Presented {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.issuer, self.self_signed) {
            (Some(issuer), true) => write!(f, "a self-signed certificate \"{issuer}\"")?,
            (Some(issuer), false) => write!(f, "a certificate issued by \"{issuer}\"")?,
            (None, _) => f.write_str("a certificate")?,
        }
        write!(f, " with SHA-256 fingerprint {}", self.fingerprint)
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seen = &self.presented.fingerprint;
        match &self.reason {
            RefusalReason::Pin(pin) => write!(
                f,
                "server certificate fingerprint {seen} does not match the pinned fingerprint {pin}; \
                 the server presented {}. If the node's certificate was replaced on purpose, \
                 set `fingerprint: \"{seen}\"` for the cluster; otherwise something else answers at this address",
                self.presented
            ),
            RefusalReason::Chain { why, trusted } => write!(
                f,
                "the server's certificate is not trusted: {} {trusted}; the server presented {}. \
                 To trust it, copy /etc/pve/pve-root-ca.pem from a node of the cluster and set \
                 `ca-file: /etc/pve/pve-root-ca.pem` (its path on this host) for the cluster, \
                 or pin this certificate with `fingerprint: \"{seen}\"`",
                why_text(why),
                self.presented
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// What a WebPKI failure means, in words (rustls shows some variants in
/// Debug form, e.g. `UnknownIssuer`).
fn why_text(why: &CertificateError) -> String {
    match why {
        CertificateError::UnknownIssuer => "it is not signed by a CA in".to_owned(),
        CertificateError::BadSignature => {
            "its signature does not verify against the CAs in".to_owned()
        }
        CertificateError::NotValidForName => {
            "it does not name the host of base-url; checked against".to_owned()
        }
        CertificateError::Expired => "it has expired; checked against".to_owned(),
        CertificateError::NotValidYet => {
            "it is not valid yet (is this host's clock right?); checked against".to_owned()
        }
        CertificateError::Revoked => "it is revoked; checked against".to_owned(),
        CertificateError::NotValidForNameContext { .. }
        | CertificateError::ExpiredContext { .. }
        | CertificateError::NotValidYetContext { .. }
        | CertificateError::InvalidPurposeContext { .. } => format!("{why}; checked against"),
        _ => "it failed verification against".to_owned(),
    }
}

fn refused(reason: RefusalReason, end_entity: &CertificateDer<'_>) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(rustls::OtherError(Arc::new(
        Refusal {
            reason,
            presented: Presented::of(end_entity.as_ref()),
        },
    ))))
}

/// rustls' WebPKI verifier over `roots`, whose refusals say what was
/// presented (see [`Refusal`]). Every check is rustls'.
fn explained(
    roots: RootCertStore,
    provider: Arc<CryptoProvider>,
    trusted: String,
) -> Result<Arc<ExplainedWebPki>, TlsError> {
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| TlsError::Setup(e.to_string()))?;
    Ok(Arc::new(ExplainedWebPki { inner, trusted }))
}

#[derive(Debug)]
struct ExplainedWebPki {
    inner: Arc<WebPkiServerVerifier>,
    /// How messages name the trust anchors ("the CA file …").
    trusted: String,
}

impl ServerCertVerifier for ExplainedWebPki {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .map_err(|e| match e {
                rustls::Error::InvalidCertificate(why) => refused(
                    RefusalReason::Chain {
                        why,
                        trusted: self.trusted.clone(),
                    },
                    end_entity,
                ),
                other => other,
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

impl ServerCertVerifier for CertificateCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(pin) = self.pin else {
            return Ok(ServerCertVerified::assertion());
        };
        if Fingerprint::of_der(end_entity.as_ref()) == pin {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(refused(RefusalReason::Pin(pin), end_entity))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Just enough DER to name a certificate's issuer and subject in a
/// message; anything unexpected gives `None` (the message then goes
/// without), never a panic.
mod der {
    /// One TLV: its tag, its content, and what follows it.
    fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, &rest[n..])
        };
        (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
    }

    const SEQUENCE: u8 = 0x30;
    const SET: u8 = 0x31;

    /// Issuer and subject, each as `CN=…, O=…` in the certificate's order.
    pub(super) fn issuer_and_subject(cert: &[u8]) -> Option<(String, String)> {
        let (SEQUENCE, cert, _) = tlv(cert)? else {
            return None;
        };
        let (SEQUENCE, tbs, _) = tlv(cert)? else {
            return None;
        };
        let (tag, _, mut rest) = tlv(tbs)?;
        // [0] version, then serialNumber; without a version the first
        // field was already the serial number.
        if tag == 0xa0 {
            rest = tlv(rest)?.2;
        }
        let (_, _, rest) = tlv(rest)?; // signature algorithm
        let (SEQUENCE, issuer, rest) = tlv(rest)? else {
            return None;
        };
        let (_, _, rest) = tlv(rest)?; // validity
        let (SEQUENCE, subject, _) = tlv(rest)? else {
            return None;
        };
        Some((name(issuer)?, name(subject)?))
    }

    /// A Name's RDNs joined with ", ".
    fn name(mut rdns: &[u8]) -> Option<String> {
        let mut parts = Vec::new();
        while !rdns.is_empty() {
            let (SET, mut set, rest) = tlv(rdns)? else {
                return None;
            };
            rdns = rest;
            while !set.is_empty() {
                let (SEQUENCE, attr, rest) = tlv(set)? else {
                    return None;
                };
                set = rest;
                let (0x06, oid, value) = tlv(attr)? else {
                    return None;
                };
                let (tag, value, _) = tlv(value)?;
                parts.push(format!("{}={}", attribute(oid), text(tag, value)));
            }
        }
        Some(parts.join(", "))
    }

    fn attribute(oid: &[u8]) -> String {
        match oid {
            [0x55, 0x04, 0x03] => "CN".to_owned(),
            [0x55, 0x04, 0x06] => "C".to_owned(),
            [0x55, 0x04, 0x07] => "L".to_owned(),
            [0x55, 0x04, 0x08] => "ST".to_owned(),
            [0x55, 0x04, 0x0a] => "O".to_owned(),
            [0x55, 0x04, 0x0b] => "OU".to_owned(),
            _ => dotted(oid),
        }
    }

    fn dotted(oid: &[u8]) -> String {
        let mut arcs: Vec<u64> = Vec::new();
        let mut acc = 0u64;
        for b in oid {
            acc = (acc << 7) | u64::from(b & 0x7f);
            if b & 0x80 == 0 {
                if arcs.is_empty() {
                    arcs.extend([acc.min(80) / 40, acc - acc.min(80) / 40 * 40]);
                } else {
                    arcs.push(acc);
                }
                acc = 0;
            }
        }
        arcs.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(".")
    }

    /// A directory string as text; control characters are dropped so a
    /// certificate cannot break a log line.
    fn text(tag: u8, value: &[u8]) -> String {
        let decoded = match tag {
            // BMPString: UTF-16BE.
            0x1e => String::from_utf16_lossy(
                &value
                    .chunks(2)
                    .map(|p| u16::from_be_bytes([p[0], *p.get(1).unwrap_or(&0)]))
                    .collect::<Vec<_>>(),
            ),
            // TeletexString: read as Latin-1.
            0x14 => value.iter().map(|b| char::from(*b)).collect(),
            _ => String::from_utf8_lossy(value).into_owned(),
        };
        decoded.chars().filter(|c| !c.is_control()).collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn truncated_or_foreign_input_gives_none() {
            assert_eq!(issuer_and_subject(b""), None);
            assert_eq!(issuer_and_subject(&[0x30, 0x82, 0xff]), None);
            assert_eq!(issuer_and_subject(&[0x30, 0x02, 0x05, 0x00]), None);
        }

        #[test]
        fn oids_outside_the_short_list_are_dotted() {
            // 1.2.840.113549.1.9.1 (emailAddress)
            assert_eq!(
                attribute(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01]),
                "1.2.840.113549.1.9.1"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const HEX: &str = "1e00409db6c8ee6cc0a56e5695a00cd4a2c7f04fe9c2bac32ed6d106be973f45";

    #[test]
    fn fingerprint_accepts_colon_pairs_and_plain_hex_in_any_case() {
        let plain = Fingerprint::parse(HEX).unwrap();
        let colons = Fingerprint::parse(
            "1E:00:40:9D:B6:C8:EE:6C:C0:A5:6E:56:95:A0:0C:D4:A2:C7:F0:4F:E9:C2:BA:C3:2E:D6:D1:06:BE:97:3F:45",
        )
        .unwrap();
        assert_eq!(plain, colons);
        assert_eq!(Fingerprint::parse(&HEX.to_uppercase()).unwrap(), plain);
        assert_eq!(
            plain.to_string(),
            "1E:00:40:9D:B6:C8:EE:6C:C0:A5:6E:56:95:A0:0C:D4:A2:C7:F0:4F:E9:C2:BA:C3:2E:D6:D1:06:BE:97:3F:45"
        );
    }

    #[test]
    fn fingerprint_rejects_wrong_length_and_non_hex() {
        assert!(Fingerprint::parse(&HEX[..62]).is_err());
        assert!(Fingerprint::parse(&format!("{}zz", &HEX[..62])).is_err());
        assert!(Fingerprint::parse("").is_err());
        assert!(Fingerprint::parse(&format!("{}:{}", &HEX[..3], &HEX[3..])).is_err());
    }

    #[test]
    fn fingerprint_of_der_is_sha256() {
        // SHA-256 of the empty string.
        assert_eq!(
            Fingerprint::of_der(b""),
            Fingerprint::parse("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
                .unwrap()
        );
    }

    #[test]
    fn ca_file_without_a_certificate_is_an_error_not_trust_everything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let err = client_config(&TlsTrust::CaFile(path)).unwrap_err();
        assert!(
            err.to_string().contains("holds no PEM certificate"),
            "{err}"
        );
        let missing = client_config(&TlsTrust::CaFile(dir.path().join("missing.pem"))).unwrap_err();
        assert!(missing.to_string().contains("missing.pem"), "{missing}");
    }

    #[test]
    fn settings_choose_insecure_then_pin_then_ca_file_then_system_roots() {
        assert_eq!(
            TlsTrust::from_settings(None, None, false).unwrap(),
            TlsTrust::SystemRoots
        );
        assert_eq!(
            TlsTrust::from_settings(Some(" "), Some(""), false).unwrap(),
            TlsTrust::SystemRoots
        );
        assert_eq!(
            TlsTrust::from_settings(Some("/etc/pve-ca.pem"), None, false).unwrap(),
            TlsTrust::CaFile(PathBuf::from("/etc/pve-ca.pem"))
        );
        assert_eq!(
            TlsTrust::from_settings(Some("/etc/pve-ca.pem"), Some(HEX), false).unwrap(),
            TlsTrust::Fingerprint(Fingerprint::parse(HEX).unwrap())
        );
        assert_eq!(
            TlsTrust::from_settings(Some("/x.pem"), None, true).unwrap(),
            TlsTrust::DangerInsecure
        );
        assert!(TlsTrust::from_settings(None, Some(HEX), true).is_err());
        assert!(TlsTrust::from_settings(None, Some("AB:CD"), false).is_err());
    }

    #[test]
    fn only_danger_insecure_is_insecure() {
        assert!(TlsTrust::DangerInsecure.is_insecure());
        assert!(!TlsTrust::SystemRoots.is_insecure());
        assert!(!TlsTrust::Fingerprint(Fingerprint::of_der(b"x")).is_insecure());
    }
}
