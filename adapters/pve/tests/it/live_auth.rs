//! The live transport against fakepve: request shape, API token and ticket
//! authentication, PVE's error answers, and secret hygiene.
#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::time::Duration;

use live_support::{Probe, sent, start};
use proxops_pve::auth::{ApiToken, Credentials, Secret, TicketLogin};
use proxops_pve::retry::{Class, classify};
use proxops_pve::transport::{Method, Request, Transport, TransportError};

fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn token_auth_reads_and_writes() {
    let fake = start();
    let probe = Probe::plain(fake.live_config());
    let t = &probe.transport;

    let version = t.call(&Request::get("/version")).unwrap();
    assert_eq!(version.status, 200);
    assert_eq!(version.data()["version"], "9.0.10");

    let resources = t
        .call(&Request::new(
            Method::Get,
            "/cluster/resources",
            params(&[("type", "vm")]),
        ))
        .unwrap();
    assert_eq!(resources.data().as_array().unwrap().len(), 2);

    let put = Request::new(
        Method::Put,
        "/nodes/pve1/qemu/101/config",
        params(&[("memory", "4096")]),
    );
    assert_eq!(t.call(&put).unwrap().status, 200);
    let config = t
        .call(&Request::get("/nodes/pve1/qemu/101/config"))
        .unwrap();
    assert_eq!(config.data()["memory"], "4096");

    let create = Request::new(
        Method::Post,
        "/nodes/pve1/qemu",
        params(&[
            ("vmid", "102"),
            ("name", "new1"),
            ("memory", "512"),
            ("net0", "virtio,bridge=vmbr0"),
        ]),
    );
    let upid = t.call(&create).unwrap();
    assert_eq!(upid.status, 200, "{upid:?}");
    assert!(
        upid.data().as_str().unwrap().starts_with("UPID:pve1:"),
        "{upid:?}"
    );

    // DELETE parameters travel in the query string (the body stays empty),
    // and PVE validates them there.
    let bad_delete = Request::new(
        Method::Delete,
        "/nodes/pve1/qemu/101",
        params(&[("purge", "maybe")]),
    );
    let refused = t.call(&bad_delete).unwrap();
    assert_eq!(refused.status, 400, "{refused:?}");
    assert!(
        refused.body["errors"]["purge"]
            .as_str()
            .unwrap()
            .contains("boolean"),
        "{refused:?}"
    );
    let delete = Request::new(
        Method::Delete,
        "/nodes/pve1/qemu/102",
        params(&[("purge", "1")]),
    );
    assert_eq!(t.call(&delete).unwrap().status, 200);
    let requests = fake.requests().unwrap();
    let bodies: Vec<_> = requests
        .iter()
        .map(|(m, p, b)| format!("{m} {p} {b}"))
        .collect();
    assert!(
        bodies.contains(&"POST /api2/json/nodes/pve1/qemu vmid=102&name=new1&memory=512&net0=virtio%2Cbridge%3Dvmbr0".into()),
        "{bodies:#?}"
    );
    assert!(
        bodies.contains(&"DELETE /api2/json/nodes/pve1/qemu/102 ".into()),
        "{bodies:#?}"
    );
    assert!(
        bodies.contains(&"PUT /api2/json/nodes/pve1/qemu/101/config memory=4096".into()),
        "{bodies:#?}"
    );
    assert_eq!(t.write_calls(), 4);
    assert!(t.last_successful_read().is_some());
}

#[test]
fn composed_token_value_authenticates_like_the_three_fields() {
    let fake = start();
    let mut config = fake.live_config();
    config.credentials =
        Credentials::Token(ApiToken::from_token_value(&fake.token_value()).unwrap());
    let probe = Probe::plain(config);
    assert_eq!(
        probe
            .transport
            .call(&Request::get("/nodes"))
            .unwrap()
            .status,
        200
    );
}

#[test]
fn a_wrong_token_is_an_answer_not_an_error_and_is_not_retried() {
    let fake = start();
    let mut config = fake.live_config();
    let wrong = "00000000-0000-4000-8000-000000000000";
    config.credentials =
        Credentials::Token(ApiToken::new("root@pam", "proxops", Secret::new(wrong)).unwrap());
    let probe = Probe::plain(config);
    let answer = probe
        .transport
        .call(&Request::get("/cluster/resources"))
        .unwrap();
    assert_eq!(answer.status, 401);
    assert_eq!(answer.reason, "authentication failure");
    assert_eq!(classify(Ok(&answer)), Class::Fail);
    assert_eq!(probe.sleeps(), 0);
    assert_eq!(sent(&fake, "GET", "/cluster/resources"), 1);
}

#[test]
fn ticket_auth_logs_in_sends_csrf_on_writes_and_logs_in_again_after_revocation() {
    let fake = start();
    let mut config = fake.live_config();
    config.credentials = Credentials::Ticket(fake.ticket_login());
    let probe = Probe::plain(config);
    let t = &probe.transport;

    assert_eq!(
        t.call(&Request::get("/cluster/resources")).unwrap().status,
        200
    );
    let put = Request::new(
        Method::Put,
        "/nodes/pve1/qemu/101/config",
        params(&[("cores", "2")]),
    );
    assert_eq!(
        t.call(&put).unwrap().status,
        200,
        "a write without CSRF token would be 401"
    );
    assert_eq!(
        sent(&fake, "POST", "/access/ticket"),
        1,
        "the ticket is reused"
    );

    fake.call(
        "revoke_tickets",
        serde_json::Value::Null,
        serde_json::Value::Null,
    )
    .unwrap();
    let after = t.call(&Request::get("/cluster/resources")).unwrap();
    assert_eq!(after.status, 200);
    assert_eq!(
        sent(&fake, "POST", "/access/ticket"),
        2,
        "one new login after the 401"
    );
    assert_eq!(
        probe.sleeps(),
        0,
        "a 401 re-login is not a retry with backoff"
    );

    // The password never reaches the request log.
    let password = fake.password();
    for (_, _, body) in fake.requests().unwrap() {
        assert!(!body.contains(password.expose()), "{body}");
    }
}

#[test]
fn ticket_is_renewed_before_it_expires() {
    let fake = start();
    let mut config = fake.live_config();
    config.credentials = Credentials::Ticket(fake.ticket_login());
    let probe = Probe::plain(config);
    let t = &probe.transport;
    t.call(&Request::get("/version")).unwrap();
    probe.advance(Duration::from_secs(100 * 60));
    t.call(&Request::get("/version")).unwrap();
    assert_eq!(sent(&fake, "POST", "/access/ticket"), 1);
    probe.advance(Duration::from_secs(6 * 60));
    t.call(&Request::get("/version")).unwrap();
    assert_eq!(
        sent(&fake, "POST", "/access/ticket"),
        2,
        "renewed after 1 h 45 min, without a 401 first"
    );
    assert!(
        probe
            .log
            .lock()
            .unwrap()
            .iter()
            .all(|line| line.status == Some(200)),
        "no 401 on the way"
    );
}

#[test]
fn a_refused_login_is_an_auth_error_without_the_password() {
    let fake = start();
    let mut config = fake.live_config();
    let password = "definitely-wrong-password";
    config.credentials =
        Credentials::Ticket(TicketLogin::new("root@pam", Secret::new(password)).unwrap());
    let probe = Probe::plain(config);
    let err = probe.transport.call(&Request::get("/version")).unwrap_err();
    assert!(matches!(err, TransportError::Auth(_)), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(
        text.contains("root@pam") && text.contains("authentication failure"),
        "{text}"
    );
    assert!(!text.contains(password), "{text}");
    assert_eq!(
        sent(&fake, "GET", "/version"),
        0,
        "nothing sent without a ticket"
    );
}

#[test]
fn pve_error_text_is_kept_from_the_reason_phrase() {
    let fake = start();
    let probe = Probe::plain(fake.live_config());
    let t = &probe.transport;

    let missing = t
        .call(&Request::get("/nodes/pve1/qemu/555/config"))
        .unwrap();
    assert_eq!(missing.status, 500);
    assert_eq!(
        missing.reason,
        "Configuration file 'nodes/pve1/qemu-server/555.conf' does not exist"
    );
    assert_eq!(classify(Ok(&missing)), Class::NotFound);

    let bad = t
        .call(&Request::new(
            Method::Put,
            "/nodes/pve1/qemu/100/config",
            params(&[("memory", "lots")]),
        ))
        .unwrap();
    assert_eq!(bad.status, 400);
    assert_eq!(bad.reason, "Parameter verification failed.");
    assert!(
        bad.body["errors"]["memory"]
            .as_str()
            .unwrap()
            .contains("type check"),
        "{bad:?}"
    );

    // An unknown path: fakepve answers 404 text/plain, kept as a JSON string.
    let unknown = t.call(&Request::get("/no/such/endpoint")).unwrap();
    assert_eq!(unknown.status, 404);
    assert_eq!(
        unknown.body,
        serde_json::Value::String("404: Not Found".into())
    );
    assert_eq!(classify(Ok(&unknown)), Class::NotFound);
    assert_eq!(probe.sleeps(), 0, "not-found and 400 are never retried");
}

#[test]
fn no_secret_in_debug_output_errors_or_the_request_log() {
    let fake = start();
    let token = fake.token_value();
    let secret = token.expose().rsplit('=').next().unwrap().to_owned();
    let config = fake.live_config();
    let probe = Probe::plain(config.clone());
    let t = &probe.transport;
    t.call(&Request::get("/version")).unwrap();
    fake.call(
        "fail",
        serde_json::json!(["GET", "/version"]),
        serde_json::json!({"status": 500, "message": "boom"}),
    )
    .unwrap();
    let _ = t.call(&Request::get("/version"));
    fake.call(
        "flaky_network",
        serde_json::Value::Null,
        serde_json::json!({"drop_rate": 1.0}),
    )
    .unwrap();
    let dropped = t.call(&Request::get("/version")).unwrap_err();

    let log: Vec<String> = probe
        .log
        .lock()
        .unwrap()
        .iter()
        .map(|l| format!("{l} {l:?}"))
        .collect();
    let shown = format!("{config:?} {t:?} {dropped} {dropped:?} {log:?}");
    assert!(!shown.contains(&secret), "{shown}");
    assert!(shown.contains("<redacted>"));
}
