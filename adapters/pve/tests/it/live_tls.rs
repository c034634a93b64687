//! TLS trust modes against fakepve's self-signed certificate: a refused
//! server must see no request at all.
#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::{Probe, start};
use proxops_pve::live::{LiveError, LiveTransport};
use proxops_pve::tls::{Fingerprint, TlsTrust};
use proxops_pve::transport::{Request, Transport, TransportError};

#[test]
fn the_servers_own_certificate_as_ca_file_verifies() {
    let fake = start();
    let probe = Probe::plain(fake.live_config());
    assert_eq!(
        probe
            .transport
            .call(&Request::get("/version"))
            .unwrap()
            .status,
        200
    );
}

#[test]
fn a_wrong_ca_is_refused_at_the_handshake_before_any_request() {
    let fake = start();
    let other = start();
    let mut config = fake.live_config();
    config.tls = TlsTrust::CaFile(other.ca_file().to_path_buf());
    let probe = Probe::plain(config);
    let err = probe
        .transport
        .call(&Request::get("/cluster/resources"))
        .unwrap_err();
    assert!(matches!(err, TransportError::Tls { .. }), "{err:?}");
    assert!(err.to_string().contains("certificate"), "{err}");
    assert_eq!(probe.sleeps(), 0, "a refused certificate is not retried");
    assert!(
        fake.requests().unwrap().is_empty(),
        "no request may reach an untrusted server"
    );
}

#[test]
fn a_wrong_fingerprint_is_refused_before_any_request() {
    let fake = start();
    let mut config = fake.live_config();
    let wrong = Fingerprint::of_der(b"some other certificate");
    config.tls = TlsTrust::Fingerprint(wrong);
    // A write carries the most: nothing of it may leave.
    let probe = Probe::plain(config);
    let write = Request::new(
        proxops_pve::transport::Method::Put,
        "/nodes/pve1/qemu/100/config",
        vec![("memory".into(), "4096".into())],
    );
    let err = probe.transport.call(&write).unwrap_err();
    assert!(matches!(err, TransportError::Tls { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("does not match the pinned fingerprint"),
        "{err}"
    );
    assert!(
        err.to_string().contains(fake.fingerprint()),
        "names what the server presented: {err}"
    );
    assert!(fake.requests().unwrap().is_empty());
}

#[test]
fn the_right_fingerprint_is_accepted_in_either_spelling() {
    let fake = start();
    let colons = Fingerprint::parse(fake.fingerprint()).unwrap();
    let plain_lower =
        Fingerprint::parse(&fake.fingerprint().replace(':', "").to_lowercase()).unwrap();
    assert_eq!(colons, plain_lower);
    let mut config = fake.live_config();
    config.tls = TlsTrust::Fingerprint(plain_lower);
    let probe = Probe::plain(config);
    assert_eq!(
        probe
            .transport
            .call(&Request::get("/version"))
            .unwrap()
            .status,
        200
    );
}

#[test]
fn danger_insecure_accepts_any_certificate_and_says_so() {
    let fake = start();
    let mut config = fake.live_config();
    config.tls = TlsTrust::DangerInsecure;
    let transport = LiveTransport::new(config).unwrap();
    assert!(transport.is_insecure());
    assert_eq!(
        transport.call(&Request::get("/version")).unwrap().status,
        200
    );
}

#[test]
fn system_roots_do_not_trust_a_self_signed_server() {
    let fake = start();
    let mut config = fake.live_config();
    config.tls = TlsTrust::SystemRoots;
    match LiveTransport::new(config) {
        // A machine without any system CA certificates: a clear setup error.
        Err(LiveError::Tls(e)) => assert!(e.to_string().contains("system trust store"), "{e}"),
        Err(other) => panic!("unexpected error {other}"),
        Ok(transport) => {
            assert!(!transport.is_insecure());
            let err = transport.call(&Request::get("/version")).unwrap_err();
            assert!(matches!(err, TransportError::Tls { .. }), "{err:?}");
            assert!(fake.requests().unwrap().is_empty());
        }
    }
}
