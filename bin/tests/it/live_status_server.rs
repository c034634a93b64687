//! The status server of a real `proxops run` against what a listener on a
//! network meets: a file-descriptor table run dry by idle connections
//! (under `ulimit -n 64`), request heads of a megabyte, and an address
//! beyond loopback.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use live_support::daemon::Daemon;
use live_support::*;
use proxops_pve::fakepve::FakePve;

/// Everything in these tests finishes well within this.
const DEADLINE: Duration = Duration::from_secs(90);

/// `proxops run` on `listen` for the demo repository with nothing
/// desired, one cycle a minute; under `ulimit -n <nofile>` if given (the
/// shell `exec`s proxops, so the pid is proxops').
fn start(pve: &FakePve, repo: &Repo, listen: &str, nofile: Option<u32>) -> Daemon {
    let inner = command(
        pve,
        repo,
        &["--git-poll-sec", "60", "--listen", listen, "run"],
    );
    let cmd = match nofile {
        Some(n) => {
            let mut sh = Command::new("sh");
            sh.arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$0\" \"$@\""))
                .arg(inner.get_program())
                .args(inner.get_args());
            for (k, v) in inner.get_envs() {
                match v {
                    Some(v) => sh.env(k, v),
                    None => sh.env_remove(k),
                };
            }
            sh.current_dir(repo.path());
            sh
        }
        None => inner,
    };
    Daemon::spawn(cmd)
}

/// Waits for a log line containing `text`.
fn wait_for_log(daemon: &mut Daemon, text: &str) -> String {
    daemon.wait_for_log(text, Instant::now() + DEADLINE)
}

/// The address the server bound (a wildcard turned into loopback, so the
/// tests talk only to 127.0.0.1).
fn address(daemon: &mut Daemon) -> SocketAddr {
    let bound = daemon.address(Instant::now() + DEADLINE);
    SocketAddr::from(([127, 0, 0, 1], bound.port()))
}

/// Waits until `/healthz` answers 200 (the first cycle is done).
fn wait_healthy(daemon: &mut Daemon, addr: SocketAddr) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some((200, _)) = get(addr, "/healthz") {
            return;
        }
        if let Ok(Some(status)) = daemon.child.try_wait() {
            panic!("proxops run exited ({status}):\n{}", daemon.stderr());
        }
        assert!(
            Instant::now() < deadline,
            "/healthz never answered 200:\n{}",
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn rss_kib(daemon: &Daemon) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// One GET; `None` when the server does not answer within 5 s.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let status = raw.split(' ').nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n")?.1.to_owned();
    Some((status, body))
}

fn quiet_repo(pve: &FakePve) -> Repo {
    let repo = Repo::demo_for(pve);
    repo.set_resources(&[]);
    repo
}

#[test]
fn the_status_server_outlives_running_out_of_file_descriptors() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = quiet_repo(&pve);
    let mut daemon = start(&pve, &repo, "127.0.0.1:0", Some(64));
    let addr = address(&mut daemon);
    wait_healthy(&mut daemon, addr);

    // 200 connections at once, none sending a request: far more than 64
    // descriptors. Connects the kernel cannot queue time out; the rest
    // stay open until all are made.
    let open: Vec<TcpStream> = std::thread::scope(|s| {
        let tries: Vec<_> = (0..200)
            .map(|_| {
                s.spawn(move || TcpStream::connect_timeout(&addr, Duration::from_secs(3)).ok())
            })
            .collect();
        tries
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect()
    });
    assert!(open.len() > 64, "only {} connections were made", open.len());
    // The server really ran out of descriptors, and said so.
    let line = wait_for_log(&mut daemon, "status server: accept failed");
    assert!(line.contains("Too many open files"), "{line}");
    drop(open);

    // It accepts again: /healthz answers.
    let deadline = Instant::now() + DEADLINE;
    loop {
        match get(addr, "/healthz") {
            Some((200, body)) => {
                assert_eq!(body, "ok\n");
                break;
            }
            other => {
                assert!(
                    daemon.child.try_wait().unwrap().is_none(),
                    "proxops run died:\n{}",
                    daemon.stderr()
                );
                assert!(
                    Instant::now() < deadline,
                    "/healthz does not answer after the connections closed ({other:?}):\n{}",
                    daemon.stderr()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    wait_for_log(&mut daemon, "status server: accepting again");
    assert!(
        !daemon.stderr().contains("listens beyond loopback"),
        "a loopback listener needs no warning:\n{}",
        daemon.stderr()
    );
}

#[test]
fn a_one_megabyte_header_is_answered_431_and_the_process_barely_grows() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = quiet_repo(&pve);
    let mut daemon = start(&pve, &repo, "127.0.0.1:0", None);
    let addr = address(&mut daemon);
    wait_healthy(&mut daemon, addr);
    let before = rss_kib(&daemon);

    // Four heads of a megabyte that never end, each sent while the answer
    // is read.
    for _ in 0..4 {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut writer = s.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let mut head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: ".to_vec();
            head.extend(std::iter::repeat_n(b'a', 1 << 20));
            // The server may stop reading and close: that is its right.
            let _ = writer.write_all(&head);
        });
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        sender.join().unwrap();
        let text = String::from_utf8_lossy(&answer);
        assert!(
            text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{text}"
        );
    }

    let grown = rss_kib(&daemon).saturating_sub(before);
    assert!(
        grown < 10 * 1024,
        "the process grew by {grown} KiB for four 1 MiB heads"
    );
    assert_eq!(get(addr, "/healthz").map(|a| a.0), Some(200));
}

#[test]
fn listening_beyond_loopback_logs_a_warning() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = quiet_repo(&pve);
    let mut daemon = start(&pve, &repo, "0.0.0.0:0", None);
    let addr = address(&mut daemon);
    let line = wait_for_log(&mut daemon, "listens beyond loopback");
    assert!(line.starts_with("warn "), "{line}");
    assert!(line.contains("listen=0.0.0.0:"), "{line}");
    // Served all the same (asked over loopback only).
    assert!(get(addr, "/metrics").is_some_and(|(status, _)| status == 200));
}
