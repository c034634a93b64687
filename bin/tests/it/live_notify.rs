//! Notifications end to end: `proxops run` applies the demo to fakepve and
//! tells a local HTTP receiver on loopback (a generic webhook, a
//! Slack-compatible one, an ntfy topic with a token, and a webhook that
//! answers 500 twice), their URLs and the token from the daemon's SOPS file
//! made by the real `sops`. A guest resized by hand is drift: "drift
//! detected" is told, the drift is applied, "converged again" is told —
//! exactly one message per change of state over ten cycles, the same
//! payloads every time (snapshots); the failing target is tried again
//! after 1 s and 2 s, shows in `/status` and the metrics; no URL or token
//! reaches the log or `/status`.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use live_support::daemon::{Daemon, get};
use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(150);
/// Secret parts of the targets' URLs and the ntfy token: none may be logged.
const HOOK_PATH: &str = "/hook/wh-91c4e7a2";
const SLACK_PATH: &str = "/services/T000/B000/sl-5d2e8f1a";
const NTFY_PATH: &str = "/proxops-nt-3b7a90c1";
const FLAKY_PATH: &str = "/flaky/fl-7e2d41b9";
const NTFY_TOKEN: &str = "tk_6f0b2c9d8e7a1f3b";

/// One request the receiver took.
#[derive(Debug, Clone)]
struct Received {
    at: Instant,
    path: String,
    headers: BTreeMap<String, String>,
    body: String,
}

/// An HTTP receiver on loopback: records every request and answers each
/// path from its script of statuses (200 once the script is used up).
/// Its loop stops when it is dropped.
struct Receiver {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    fn start(script: BTreeMap<&'static str, Vec<u16>>) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, halt) = (Arc::clone(&seen), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut script = script;
            while !halt.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if let Some(r) = take(stream, &mut script) {
                            s.lock().unwrap().push(r);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Receiver {
            addr,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn at(&self, path: &str) -> Vec<Received> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one request and answers it.
fn take(mut stream: TcpStream, script: &mut BTreeMap<&'static str, Vec<u16>>) -> Option<Received> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers.get("content-length")?.parse().ok()?;
    while raw.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&raw[head_end..]).into_owned();
    let status = script
        .iter_mut()
        .find(|(p, _)| **p == path)
        .and_then(|(_, s)| (!s.is_empty()).then(|| s.remove(0)))
        .unwrap_or(200);
    let _ = write!(
        stream,
        "HTTP/1.1 {status} Scripted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    Some(Received {
        at: Instant::now(),
        path,
        headers,
        body,
    })
}

/// The event a received message is about (webhook JSON, Slack text, ntfy
/// title).
fn event_of(r: &Received) -> String {
    if let Ok(doc) = serde_json::from_str::<Value>(&r.body)
        && let Some(e) = doc["event"].as_str()
    {
        return e.to_owned();
    }
    let text = r
        .headers
        .get("title")
        .cloned()
        .unwrap_or_else(|| r.body.clone());
    for (words, event) in [
        ("drift detected", "drift_detected"),
        ("converged again", "converged_again"),
    ] {
        if text.contains(words) {
            return event.to_owned();
        }
    }
    format!("unknown: {text}")
}

fn events_at(rx: &Receiver, path: &str) -> Vec<String> {
    rx.at(path).iter().map(event_of).collect()
}

/// A received message as a snapshot shows it: its headers that matter and
/// its body, with the time (which changes from run to run) replaced.
fn shown(r: &Received) -> String {
    let mut out = String::new();
    for h in ["content-type", "title", "priority", "tags"] {
        if let Some(v) = r.headers.get(h) {
            out.push_str(&format!("{h}: {v}\n"));
        }
    }
    let body = match serde_json::from_str::<Value>(&r.body) {
        Ok(mut doc) if doc.get("at").is_some() => {
            doc["at"] = Value::from("<at>");
            serde_json::to_string_pretty(&doc).unwrap()
        }
        _ => r.body.clone(),
    };
    out.push('\n');
    out.push_str(&body);
    out
}

fn cycles(addr: SocketAddr) -> usize {
    let doc: Value = serde_json::from_str(&get(addr, "/status").body).unwrap();
    doc["recent_cycles"].as_array().unwrap().len()
}

#[test]
fn drift_is_told_applied_and_converged_again_told_once_each_over_ten_cycles() {
    let deadline = Instant::now() + DEADLINE;
    let rx = Receiver::start(BTreeMap::from([(FLAKY_PATH, vec![500, 500])]));
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let first = apply(&pve, &repo, &[]);
    assert_eq!(first.code, 0, "{}", first.all());

    let (sops, key) = live_support::sops::encrypt(
        repo.path(),
        &format!(
            "secrets:\n  hook: {}\n  chat: {}\n  phone: {}\n  phone-token: {NTFY_TOKEN}\n  flaky: {}\n",
            rx.url(HOOK_PATH),
            rx.url(SLACK_PATH),
            rx.url(NTFY_PATH),
            rx.url(FLAKY_PATH)
        ),
    );
    repo.write("daemon.sops.yaml", &sops);
    let cfg = std::fs::read_to_string(repo.path().join("proxops.yaml")).unwrap();
    repo.write(
        "proxops.yaml",
        &format!(
            "{cfg}daemon:\n  secrets-file: daemon.sops.yaml\n  notify:\n    - {{name: ops-hook, type: webhook, url: hook}}\n    - {{name: ops-chat, type: slack, url: chat, clusters: [home]}}\n    - {{name: phone, type: ntfy, url: phone, token: phone-token}}\n    - {{name: flaky, type: webhook, url: flaky}}\n"
        ),
    );

    let mut cmd = command(
        &pve,
        &repo,
        &["--git-poll-sec", "1", "--listen", "127.0.0.1:0", "run"],
    );
    cmd.env("SOPS_AGE_KEY_FILE", &key);
    let mut daemon = Daemon::spawn(cmd);
    let addr = daemon.address(deadline);
    // Converged from the start: two cycles, not a word.
    daemon.wait_for(addr, "/status", deadline, "two cycles", |a| {
        serde_json::from_str::<Value>(&a.body)
            .is_ok_and(|d| d["recent_cycles"].as_array().is_some_and(|c| c.len() >= 2))
    });
    assert!(
        rx.seen.lock().unwrap().is_empty(),
        "{:?}",
        rx.seen.lock().unwrap()
    );

    // Someone halves web-01's memory by hand.
    edit_by_hand(&pve, 101, "memory", "2048");
    let edited_at = cycles(addr);
    // Ten cycles after the edit.
    while cycles(addr) < edited_at + 10 {
        assert!(
            Instant::now() < deadline,
            "ten cycles not reached:\n{}",
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    // One message per change of state, in order, to every target.
    for path in [HOOK_PATH, SLACK_PATH, NTFY_PATH] {
        assert_eq!(
            events_at(&rx, path),
            ["drift_detected", "converged_again"],
            "{path}"
        );
    }
    let hook = rx.at(HOOK_PATH);
    insta::assert_snapshot!("webhook_drift_detected", shown(&hook[0]));
    insta::assert_snapshot!("webhook_converged_again", shown(&hook[1]));
    insta::assert_snapshot!("slack_drift_detected", shown(&rx.at(SLACK_PATH)[0]));
    let phone = rx.at(NTFY_PATH);
    insta::assert_snapshot!("ntfy_drift_detected", shown(&phone[0]));
    assert_eq!(
        phone[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {NTFY_TOKEN}").as_str())
    );
    assert!(
        !hook[0].headers.contains_key("authorization"),
        "no token, no header"
    );

    // The flaky target: refused twice, tried again after 1 s then 2 s,
    // then both messages, in order.
    let flaky = rx.at(FLAKY_PATH);
    assert_eq!(
        flaky.iter().map(event_of).collect::<Vec<_>>(),
        [
            "drift_detected",
            "drift_detected",
            "drift_detected",
            "converged_again"
        ]
    );
    // The outbox counts in whole seconds of the wall clock: a back-off of
    // n s ends at a second boundary, between n - 1 and n s after the
    // failure (the notifier looks again as soon as another message
    // wakes it). So the first retry comes within about a second, and the
    // second waits more than one.
    let gap = |a: &Received, b: &Received| b.at.duration_since(a.at);
    assert!(
        gap(&flaky[0], &flaky[1]) <= Duration::from_millis(1500),
        "{:?}",
        gap(&flaky[0], &flaky[1])
    );
    assert!(
        gap(&flaky[1], &flaky[2]) >= Duration::from_millis(900),
        "{:?}",
        gap(&flaky[1], &flaky[2])
    );
    let status: Value = serde_json::from_str(&get(addr, "/status").body).unwrap();
    let targets: BTreeMap<String, Value> = status["notifications"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["target"].as_str().unwrap().to_owned(), t.clone()))
        .collect();
    assert_eq!(targets["flaky"]["failed"], 2, "{targets:#?}");
    assert_eq!(targets["flaky"]["sent"], 2);
    assert_eq!(targets["flaky"]["failing"], false);
    assert_eq!(targets["flaky"]["last_error"], "HTTP 500");
    assert_eq!(targets["ops-hook"]["sent"], 2);
    assert_eq!(targets["ops-chat"]["type"], "slack");
    let metrics = get(addr, "/metrics").body;
    assert!(
        metrics.contains("proxops_notifications_total{target=\"flaky\",result=\"failed\"} 2\n"),
        "{metrics}"
    );
    assert!(metrics.contains("proxops_notification_target_failing{target=\"flaky\"} 0\n"));

    // No URL, path or token anywhere a person or a scraper reads.
    let log = daemon.stderr();
    assert!(
        log.contains("notification failed; trying again later"),
        "{log}"
    );
    assert!(log.contains("error=\"HTTP 500\""), "{log}");
    for secret in [HOOK_PATH, SLACK_PATH, NTFY_PATH, FLAKY_PATH, NTFY_TOKEN] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
        assert!(!status.to_string().contains(secret), "{secret} in /status");
        assert!(!metrics.contains(secret), "{secret} in /metrics");
    }
}
