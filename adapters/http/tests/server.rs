//! The status server over a real loopback socket: routes, content types,
//! methods, unknown paths, the store-backed source, and shutdown.

#![allow(clippy::unwrap_used)]

mod support;

use std::net::TcpStream;
use std::sync::{Arc, Mutex};

use proxops_core::report::StatusStore;
use proxops_http::{DEFAULT_LISTEN, HttpError, Reply, Route, StatusServer, store_source};
use support::{START, get, request};

fn fixed_source() -> proxops_http::Source {
    Arc::new(|route, _now| match route {
        Route::Healthz => Reply::new(
            503,
            "text/plain; charset=utf-8",
            "no cycle has finished yet\n",
        ),
        Route::Metrics => Reply::new(200, "text/plain; version=0.0.4; charset=utf-8", "m 1\n"),
        Route::Status => Reply::new(200, "application/json", "{}\n"),
    })
}

#[test]
fn serves_the_three_routes_with_their_status_and_content_type() {
    let server = StatusServer::start("127.0.0.1:0", fixed_source()).unwrap();
    let addr = server.local_addr();
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);

    let h = get(addr, "/healthz");
    assert_eq!(
        (h.status, h.body.as_str()),
        (503, "no cycle has finished yet\n")
    );
    let m = get(addr, "/metrics");
    assert_eq!(m.status, 200);
    assert_eq!(
        m.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(m.body, "m 1\n");
    let s = get(addr, "/status?pretty=1");
    assert_eq!(s.status, 200);
    assert_eq!(s.header("content-type"), Some("application/json"));
    server.shutdown();
}

#[test]
fn unknown_paths_are_404_and_other_methods_405() {
    let server = StatusServer::start("127.0.0.1:0", fixed_source()).unwrap();
    let addr = server.local_addr();
    assert_eq!(get(addr, "/").status, 404);
    assert_eq!(get(addr, "/status/extra").status, 404);
    assert_eq!(get(addr, "/../etc/passwd").status, 404);
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let a = request(addr, method, "/status");
        assert_eq!(a.status, 405, "{method}");
        assert_eq!(a.header("allow"), Some("GET, HEAD"));
    }
    let head = request(addr, "HEAD", "/metrics");
    assert_eq!((head.status, head.body.as_str()), (200, ""));
}

#[test]
fn the_store_source_serves_core_renderings() {
    let store = Arc::new(Mutex::new(StatusStore::new(START)));
    let server = StatusServer::start("127.0.0.1:0", store_source(Arc::clone(&store), 30)).unwrap();
    let addr = server.local_addr();

    let h = get(addr, "/healthz");
    assert_eq!(
        (h.status, h.body.as_str()),
        (503, "no cycle has finished yet\n")
    );
    let before: serde_json::Value = serde_json::from_str(&get(addr, "/status").body).unwrap();
    assert!(before["last_cycle"].is_null());

    // A cycle that finished just now (the server reads the real clock).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    store.lock().unwrap().record_cycle(support::cycle(now - 12));
    let h = get(addr, "/healthz");
    assert_eq!((h.status, h.body.as_str()), (200, "ok\n"));
    let after: serde_json::Value = serde_json::from_str(&get(addr, "/status").body).unwrap();
    assert_eq!(after["last_cycle"]["actions_ok"], 2);
    assert_eq!(after["objects"].as_array().unwrap().len(), 3);
    let m = get(addr, "/metrics");
    assert!(
        m.body.contains("proxops_cycles_total{result=\"ok\"} 1\n"),
        "{}",
        m.body
    );
    server.shutdown();
}

#[test]
fn shutdown_closes_the_port() {
    let server = StatusServer::start("127.0.0.1:0", fixed_source()).unwrap();
    let addr = server.local_addr();
    assert_eq!(get(addr, "/metrics").status, 200);
    server.shutdown();
    assert!(TcpStream::connect(addr).is_err(), "the listener is gone");
}

#[test]
fn dropping_the_server_stops_it_too() {
    let addr = {
        let server = StatusServer::start("127.0.0.1:0", fixed_source()).unwrap();
        server.local_addr()
    };
    assert!(TcpStream::connect(addr).is_err());
}

#[test]
fn a_bad_listen_address_is_a_clear_error() {
    let err = StatusServer::start("not-an-address", fixed_source())
        .err()
        .unwrap();
    assert!(matches!(err, HttpError::Bind { .. }));
    assert!(
        err.to_string()
            .starts_with("status server: cannot listen on not-an-address:"),
        "{err}"
    );
}

#[test]
fn a_port_already_taken_is_a_clear_error() {
    let first = StatusServer::start("127.0.0.1:0", fixed_source()).unwrap();
    let taken = first.local_addr().to_string();
    let err = StatusServer::start(&taken, fixed_source()).err().unwrap();
    assert!(err.to_string().contains(&taken), "{err}");
}

#[test]
fn the_default_listen_address_is_loopback() {
    let addr: std::net::SocketAddr = DEFAULT_LISTEN.parse().unwrap();
    assert!(addr.ip().is_loopback());
    assert_eq!(addr.port(), 9494);
}
