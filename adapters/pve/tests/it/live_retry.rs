//! Retries, not-found classification and the write circuit breaker against
//! fakepve's injected faults. Retry waits are recorded, not slept.
#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use live_support::{Probe, sent, start};
use proxops_pve::fakepve::FakePve;
use proxops_pve::live::RequestResult;
use proxops_pve::retry::{Class, classify};
use proxops_pve::transport::{Method, Request, Transport, TransportError};
use serde_json::{Value, json};

fn fail(fake: &FakePve, method: &str, path: &str, kwargs: Value) {
    fake.call("fail", json!([method, path]), kwargs).unwrap();
}

fn config_put(memory: &str) -> Request {
    Request::new(
        Method::Put,
        "/nodes/pve1/qemu/100/config",
        vec![("memory".into(), memory.into())],
    )
}

#[test]
fn dropped_connections_are_retried_three_times_then_reported() {
    let fake = start();
    fake.call("flaky_network", Value::Null, json!({"drop_rate": 1.0}))
        .unwrap();
    let probe = Probe::plain(fake.live_config());
    let err = probe.transport.call(&Request::get("/version")).unwrap_err();
    assert!(matches!(err, TransportError::Io { .. }), "{err:?}");
    assert_eq!(probe.sleeps(), 3);
    let attempts = probe
        .log
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.path == "/version")
        .count();
    assert_eq!(attempts, 4, "one attempt and three retries");
}

#[test]
fn a_dropped_connection_then_an_answer_succeeds() {
    let fake = Arc::new(start());
    fake.call("flaky_network", Value::Null, json!({"drop_rate": 1.0}))
        .unwrap();
    let healer = fake.clone();
    let probe = Probe::new(fake.live_config(), move |_| healer.clear().unwrap());
    let answer = probe.transport.call(&Request::get("/version")).unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(probe.sleeps(), 1);
}

#[test]
fn an_injected_500_is_retried_once_and_then_succeeds() {
    let fake = start();
    fail(
        &fake,
        "GET",
        "/version",
        json!({"status": 500, "message": "temporary trouble", "times": 1}),
    );
    let probe = Probe::plain(fake.live_config());
    let answer = probe.transport.call(&Request::get("/version")).unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(probe.sleeps(), 1);
    assert_eq!(sent(&fake, "GET", "/version"), 2);
    let counts = probe.transport.request_counts();
    let count = |result| {
        counts
            .iter()
            .find(|c| c.method == Method::Get && c.result == result)
            .map(|c| c.count)
    };
    assert_eq!(count(RequestResult::ServerError), Some(1));
    assert_eq!(count(RequestResult::Success), Some(1));
}

#[test]
fn backoff_doubles_between_retries() {
    let fake = start();
    fail(
        &fake,
        "GET",
        "/version",
        json!({"status": 503, "message": "unavailable"}),
    );
    let mut config = fake.live_config();
    config.retry.base = Duration::from_millis(10);
    config.retry.cap = Duration::from_millis(30);
    let probe = Probe::plain(config);
    let answer = probe.transport.call(&Request::get("/version")).unwrap();
    assert_eq!(
        answer.status, 503,
        "the last answer is returned, not an error"
    );
    let sleeps = probe.sleeps.lock().unwrap().clone();
    let ms: Vec<u128> = sleeps.iter().map(Duration::as_millis).collect();
    assert_eq!(ms.len(), 3);
    assert!(
        (8..12).contains(&ms[0]) && (16..24).contains(&ms[1]) && (24..36).contains(&ms[2]),
        "{ms:?}"
    );
}

#[test]
fn a_400_is_not_retried() {
    let fake = start();
    fail(
        &fake,
        "POST",
        "/nodes/pve1/qemu/101/status/start",
        json!({"status": 400, "message": "bad"}),
    );
    let probe = Probe::plain(fake.live_config());
    let answer = probe
        .transport
        .call(&Request::new(
            Method::Post,
            "/nodes/pve1/qemu/101/status/start",
            vec![],
        ))
        .unwrap();
    assert_eq!(answer.status, 400);
    assert_eq!(probe.sleeps(), 0);
    assert_eq!(sent(&fake, "POST", "/status/start"), 1);
}

#[test]
fn a_config_lock_timeout_is_retried_until_the_lock_is_free() {
    let fake = Arc::new(start());
    fake.call("hold_config_lock", json!([100, null]), Value::Null)
        .unwrap();
    let releaser = fake.clone();
    let probe = Probe::new(fake.live_config(), move |_| {
        releaser
            .call("release_config_lock", json!([100]), Value::Null)
            .unwrap();
    });
    let answer = probe.transport.call(&config_put("4096")).unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(probe.sleeps(), 1);
    let first = &probe.log.lock().unwrap()[0];
    assert_eq!(first.status, Some(500));
}

#[test]
fn missing_guests_are_not_found_and_not_retried() {
    let fake = start();
    let probe = Probe::plain(fake.live_config());
    let answer = probe
        .transport
        .call(&Request::get("/nodes/pve1/qemu/555/status/current"))
        .unwrap();
    assert_eq!(classify(Ok(&answer)), Class::NotFound, "{answer:?}");
    assert_eq!(probe.sleeps(), 0);
    fail(
        &fake,
        "GET",
        "/nodes/pve1/qemu/556/config",
        json!({"status": 404, "message": "no such VM"}),
    );
    let answer = probe
        .transport
        .call(&Request::get("/nodes/pve1/qemu/556/config"))
        .unwrap();
    assert_eq!(classify(Ok(&answer)), Class::NotFound);
    assert_eq!(probe.sleeps(), 0);
}

#[test]
fn breaker_opens_after_twenty_failed_writes_and_refuses_the_21st_unsent() {
    let fake = start();
    fail(
        &fake,
        "PUT",
        "/nodes/pve1/qemu/100/config",
        json!({"status": 400, "message": "refused"}),
    );
    let probe = Probe::plain(fake.live_config());
    let t = &probe.transport;
    for _ in 0..20 {
        assert!(!t.is_read_only());
        assert_eq!(t.call(&config_put("4096")).unwrap().status, 400);
    }
    assert!(t.is_read_only());
    let refused = t.call(&config_put("4096")).unwrap_err();
    assert!(
        matches!(refused, TransportError::ReadOnly { .. }),
        "{refused:?}"
    );
    let post = t
        .call(&Request::new(
            Method::Post,
            "/nodes/pve1/qemu/101/status/start",
            vec![],
        ))
        .unwrap_err();
    assert!(matches!(post, TransportError::ReadOnly { .. }));
    assert_eq!(
        sent(&fake, "PUT", "/qemu/100/config"),
        20,
        "the 21st write never left"
    );
    assert_eq!(sent(&fake, "POST", "/status/start"), 0);

    // Reads go on, and a successful read does not close the breaker.
    assert_eq!(
        t.call(&Request::get("/cluster/resources")).unwrap().status,
        200
    );
    assert!(t.is_read_only());
    let counts = t.request_counts();
    assert!(
        counts.iter().any(|c| c.result == RequestResult::ReadOnly
            && c.count == 1
            && c.method == Method::Put)
    );

    // After ten minutes a write goes through; success closes the breaker.
    fake.clear().unwrap();
    probe.advance(Duration::from_secs(600));
    assert!(!t.is_read_only());
    assert_eq!(t.call(&config_put("4096")).unwrap().status, 200);
    assert!(!t.is_read_only());
}

#[test]
fn a_hanging_server_times_out_and_is_retried() {
    let fake = start();
    fake.call(
        "flaky_network",
        Value::Null,
        json!({"hang_rate": 1.0, "hang_secs": 3}),
    )
    .unwrap();
    let mut config = fake.live_config();
    config.timeout = Duration::from_millis(300);
    config.retry.max_retries = 1;
    let probe = Probe::plain(config);
    let err = probe.transport.call(&Request::get("/version")).unwrap_err();
    assert!(matches!(err, TransportError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("timeout"), "{err}");
    assert_eq!(probe.sleeps(), 1);
}

#[test]
fn concurrent_callers_share_one_transport() {
    let fake = start();
    let probe = Probe::plain(fake.live_config());
    let seen = Mutex::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5 {
                    assert_eq!(
                        probe
                            .transport
                            .call(&Request::get("/nodes/pve1/qemu"))
                            .unwrap()
                            .status,
                        200
                    );
                    *seen.lock().unwrap() += 1;
                }
            });
        }
    });
    assert_eq!(*seen.lock().unwrap(), 20);
    assert_eq!(sent(&fake, "GET", "/nodes/pve1/qemu"), 20);
}
