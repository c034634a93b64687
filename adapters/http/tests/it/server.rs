//! The status server over a real loopback socket: routes, content types,
//! methods, unknown paths, the store-backed source, shutdown, and the
//! limits that keep it alive (connection cap, head size and time).

#![allow(clippy::unwrap_used)]

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proxops_core::report::StatusStore;
use proxops_http::{
    DEFAULT_LISTEN, Dashboard, HttpError, Reply, Request, Route, ServerLimits, ServerOptions,
    StatusServer, store_source,
};
use support::{START, get, request};

fn fixed_source() -> proxops_http::Source {
    Arc::new(|request: &Request<'_>, _now| match request.route {
        Route::Healthz => Reply::new(
            503,
            "text/plain; charset=utf-8",
            "no cycle has finished yet\n",
        ),
        Route::Metrics => Reply::new(200, "text/plain; version=0.0.4; charset=utf-8", "m 1\n"),
        Route::Status => Reply::new(200, "application/json", "{}\n"),
        Route::GitHook | Route::Page => proxops_http::not_found(),
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
    let server = StatusServer::start(
        "127.0.0.1:0",
        store_source(Arc::clone(&store), 30, Dashboard::On),
    )
    .unwrap();
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

fn with_limits(limits: ServerLimits) -> StatusServer {
    let options = ServerOptions {
        limits,
        ..ServerOptions::default()
    };
    StatusServer::start_with("127.0.0.1:0", fixed_source(), options).unwrap()
}

/// Whatever the server sends until it closes (or 10 s pass).
fn read_all(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

#[test]
fn a_head_over_the_limit_is_answered_431() {
    let server = with_limits(ServerLimits {
        max_header_bytes: 1024,
        ..ServerLimits::default()
    });
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    let mut head = b"GET /metrics HTTP/1.1\r\nX-Filler: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 64 * 1024));
    head.extend_from_slice(b"\r\n\r\n");
    s.write_all(&head).unwrap();
    let answer = read_all(&mut s);
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{answer}"
    );
    // A head within the limit is served as before.
    assert_eq!(get(server.local_addr(), "/metrics").status, 200);
}

#[test]
fn a_head_that_never_ends_is_answered_408_after_the_header_timeout() {
    let server = with_limits(ServerLimits {
        header_timeout: Duration::from_millis(300),
        ..ServerLimits::default()
    });
    let mut s = TcpStream::connect(server.local_addr()).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let started = Instant::now();
    let answer = read_all(&mut s);
    assert!(
        answer.starts_with("HTTP/1.1 408 Request Timeout\r\n"),
        "{answer}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "closed only after {:?}",
        started.elapsed()
    );
}

#[test]
fn a_connection_over_the_cap_pushes_out_the_idle_one_that_waited_longest() {
    let server = with_limits(ServerLimits {
        max_connections: 2,
        ..ServerLimits::default()
    });
    let addr = server.local_addr();
    let mut idle_a = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let mut idle_b = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    // Both slots are taken by connections that send nothing: a third is
    // served at once, in the place of the one that waited longest...
    let started = Instant::now();
    let mut third = TcpStream::connect(addr).unwrap();
    third
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let answer = read_all(&mut third);
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "served only after {:?}",
        started.elapsed()
    );
    // ...which was closed, with no answer; the other is still waited for.
    assert_eq!(read_all(&mut idle_a), "");
    idle_b
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert!(idle_b.read(&mut byte).is_err(), "idle_b was closed too");
}

#[test]
fn shutdown_returns_while_every_slot_is_held() {
    let server = with_limits(ServerLimits {
        max_connections: 1,
        ..ServerLimits::default()
    });
    let addr = server.local_addr();
    let _idle = TcpStream::connect(addr).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    server.shutdown();
    assert!(TcpStream::connect(addr).is_err(), "the listener is gone");
}

#[test]
fn the_store_source_serves_the_dashboard_with_its_policy_unless_it_is_off() {
    let store = Arc::new(Mutex::new(support::store()));
    let on = StatusServer::start(
        "127.0.0.1:0",
        store_source(Arc::clone(&store), 30, Dashboard::On),
    )
    .unwrap();
    let page = get(on.local_addr(), "/?cluster=prod&state=failed");
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(
        page.header("content-security-policy"),
        Some(proxops_http::page_policy())
    );
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    assert!(page.body.contains("/objects/prod/LXC/db"), "{}", page.body);
    let object = get(on.local_addr(), "/objects/prod/LXC/db");
    assert_eq!(object.status, 200);
    assert!(
        object
            .body
            .contains("unable to parse &quot;C:\\x&quot; value"),
        "{}",
        object.body
    );
    assert_eq!(get(on.local_addr(), "/objects/prod/LXC/nope").status, 404);

    let off = StatusServer::start(
        "127.0.0.1:0",
        store_source(Arc::clone(&store), 30, Dashboard::Off),
    )
    .unwrap();
    for path in ["/", "/objects/prod/LXC/db"] {
        assert_eq!(get(off.local_addr(), path).status, 404, "{path}");
    }
    assert_eq!(get(off.local_addr(), "/status").status, 200);
}

#[test]
fn the_page_policy_allows_exactly_the_embedded_style_and_script() {
    use base64::Engine as _;
    use sha2::Digest as _;
    let hash = |t: &str| {
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(t.as_bytes()))
    };
    let policy = proxops_http::page_policy();
    assert!(policy.starts_with("default-src 'none';"), "{policy}");
    assert!(policy.contains(&format!(
        "style-src 'sha256-{}'",
        hash(proxops_core::dashboard::STYLE)
    )));
    assert!(policy.contains(&format!(
        "script-src 'sha256-{}'",
        hash(proxops_core::dashboard::SCRIPT)
    )));
}
