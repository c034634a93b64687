//! Sync on push, end to end: `proxops run` in URL mode pulls the demo
//! repository from a real git remote (a bare repository on disk, over
//! `file://`) with a poll interval of an hour, and applies to fakepve. A
//! push signed the way GitHub signs (`X-Hub-Signature-256`, the secret from
//! the daemon's SOPS file made by the real `sops`) makes the next cycle
//! start at once and apply the pushed commit; an unsigned or wrongly signed
//! one is 401, logged without its body, and changes nothing; a burst of
//! pushes is one cycle, not one each. The listener's access token (from
//! the same SOPS file) guards `/status` but not `/healthz` or the webhook.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use crate::git_support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use git_support::Scratch;
use hmac::{Hmac, Mac};
use live_support::daemon::{Answer, Daemon, request};
use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(120);
const WEBHOOK_SECRET: &str = "whsec-8d1f6c2e9a0b4e7f";
const ACCESS_TOKEN: &str = "dash-4a7c0e1b93f2d658";
/// A push event as GitHub sends it (shortened); never logged.
const PUSH: &str = r#"{"ref":"refs/heads/main","after":"feedc0de","repository":{"full_name":"ops/pve"},"secret-looking":"do-not-log-me"}"#;

fn github_signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256={hex}")
}

/// A remote with the demo repository for cluster `home` (nothing desired
/// yet), an operator directory outside any checkout with the config file
/// and the daemon's SOPS file, and the daemon running on them.
struct Rig {
    scratch: Scratch,
    work: PathBuf,
    bare: PathBuf,
    daemon: Daemon,
    addr: SocketAddr,
    _pve: FakePve,
}

impl Rig {
    fn start(deadline: Instant) -> Rig {
        let pve = FakePve::start(&empty_seed()).unwrap();
        let scratch = Scratch::new();
        let work = scratch.work_repo("work");
        copy_dir(&workspace_root().join("fixtures/repos/demo"), &work);
        std::fs::remove_dir_all(work.join("clusters/edge")).unwrap();
        std::fs::write(work.join("clusters/home/resources.yaml"), "resources: []\n").unwrap();
        scratch.commit_all(&work, "nothing desired yet");
        let bare = scratch.bare_repo("srv/pve.git");
        scratch.push(&work, &bare, "main");

        let ops = scratch.path().join("ops");
        std::fs::create_dir_all(&ops).unwrap();
        let (sops, key) = live_support::sops::encrypt(
            &ops,
            &format!("secrets:\n  git-webhook: {WEBHOOK_SECRET}\n  dashboard: {ACCESS_TOKEN}\n"),
        );
        std::fs::write(ops.join("daemon.sops.yaml"), sops).unwrap();
        let config = format!(
            "git:\n  url: file://{}\n  branch: main\ndata-dir: {}\npve:\n  retry:\n    base: 5ms\n  clusters:\n    home:\n      base-url: {}\n      nodes: [pve1, pve2]\n      ca-file: {}\ndaemon:\n  secrets-file: daemon.sops.yaml\n  access:\n    token: dashboard\n  git-webhook:\n    secret: git-webhook\n",
            bare.display(),
            ops.join("data").display(),
            pve.url(),
            pve.ca_file().display()
        );
        std::fs::write(ops.join("proxops.yaml"), config).unwrap();

        let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
        without_proxops_env(&mut cmd)
            .current_dir(&ops)
            .env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
            .env("SOPS_AGE_KEY_FILE", &key)
            .env("HOME", scratch.home())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args(["--config", "proxops.yaml", "--git-poll-sec", "3600"])
            .args(["--listen", "127.0.0.1:0", "run"]);
        let mut daemon = Daemon::spawn(cmd);
        let addr = daemon.address(deadline);
        let mut rig = Rig {
            scratch,
            work,
            bare,
            daemon,
            addr,
            _pve: pve,
        };
        rig.wait_for_cycles(1, deadline);
        rig
    }

    fn status(&self) -> Value {
        let a = request(
            self.addr,
            "GET",
            "/status",
            &[("Authorization", &format!("Bearer {ACCESS_TOKEN}"))],
            b"",
        );
        assert_eq!(a.status, 200, "{}", a.body);
        serde_json::from_str(&a.body).unwrap()
    }

    fn cycles(&self) -> Vec<Value> {
        self.status()["recent_cycles"].as_array().unwrap().clone()
    }

    fn wait_for_cycles(&mut self, n: usize, deadline: Instant) -> Vec<Value> {
        loop {
            let cycles = self.cycles();
            if cycles.len() >= n {
                return cycles;
            }
            assert!(
                Instant::now() < deadline,
                "{n} cycles not reached:\n{}",
                self.daemon.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Commits a composition with the monitoring VM and pushes it; the
    /// new commit's id.
    fn push_monitoring(&self) -> String {
        std::fs::write(
            self.work.join("clusters/home/resources.yaml"),
            "resources:\n  - ../../vm/base/monitoring.yaml\n",
        )
        .unwrap();
        let commit = self.scratch.commit_all(&self.work, "monitoring");
        self.scratch.push(&self.work, &self.bare, "main");
        commit
    }

    fn hook(&self, headers: &[(&str, &str)]) -> Answer {
        let mut all = vec![
            ("X-GitHub-Event", "push"),
            ("Content-Type", "application/json"),
        ];
        all.extend_from_slice(headers);
        request(self.addr, "POST", "/hooks/git", &all, PUSH.as_bytes())
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_signed_github_push_starts_the_next_cycle_at_once_and_an_unsigned_one_changes_nothing() {
    let deadline = Instant::now() + DEADLINE;
    let mut rig = Rig::start(deadline);
    let first = rig.cycles()[0]["commit"].as_str().unwrap().to_owned();

    // The access token guards the listener, but not the probe.
    assert_eq!(request(rig.addr, "GET", "/status", &[], b"").status, 401);
    assert_eq!(request(rig.addr, "GET", "/", &[], b"").status, 401);
    assert_eq!(request(rig.addr, "GET", "/healthz", &[], b"").status, 200);

    let pushed = rig.push_monitoring();
    assert_ne!(pushed, first);

    // Unsigned, then signed with another secret: 401, and nothing moves.
    assert_eq!(rig.hook(&[]).status, 401);
    let forged = github_signature("guessed", PUSH.as_bytes());
    assert_eq!(rig.hook(&[("X-Hub-Signature-256", &forged)]).status, 401);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(rig.cycles().len(), 1, "an unverified push started a cycle");
    let log = rig.daemon.stderr();
    assert!(log.contains("git webhook refused"), "{log}");
    assert!(!log.contains("sync on push"), "{log}");
    for never in [
        "do-not-log-me",
        "refs/heads/main",
        WEBHOOK_SECRET,
        ACCESS_TOKEN,
        &forged,
    ] {
        assert!(!log.contains(never), "{never:?} logged:\n{log}");
    }

    // Signed: accepted, and the next cycle starts now, not in an hour.
    let sent_at = unix_now();
    let signature = github_signature(WEBHOOK_SECRET, PUSH.as_bytes());
    let accepted = rig.hook(&[("X-Hub-Signature-256", &signature)]);
    assert_eq!(
        (accepted.status, accepted.body.as_str()),
        (202, "push received: syncing now\n")
    );
    let cycles = rig.wait_for_cycles(2, deadline);
    let next = &cycles[1];
    let started = next["started_at"].as_str().unwrap();
    // Whole seconds on both sides: "within a second" is at most the next
    // second but one; the poll interval is 3600 s. (RFC 3339 UTC times of
    // one width compare as text.)
    let latest = proxops_core::time::rfc3339(sent_at + 2);
    assert!(
        started <= latest.as_str(),
        "the cycle started at {started}, the push was sent at {}",
        proxops_core::time::rfc3339(sent_at)
    );
    assert_eq!(
        next["commit"],
        pushed.as_str(),
        "the pushed commit was fetched"
    );
    assert!(rig.daemon.stderr().contains("proxops.run sync on push"));
    // And applied: the monitoring VM exists and converged.
    let status = rig.status();
    let monitoring = status["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "monitoring")
        .unwrap_or_else(|| panic!("{status:#}"));
    assert_eq!(monitoring["state"], "converged", "{monitoring:#}");
}

#[test]
fn a_burst_of_pushes_is_one_cycle_not_one_each() {
    let deadline = Instant::now() + DEADLINE;
    let mut rig = Rig::start(deadline);
    rig.push_monitoring();
    let signature = github_signature(WEBHOOK_SECRET, PUSH.as_bytes());
    for _ in 0..8 {
        assert_eq!(rig.hook(&[("X-Hub-Signature-256", &signature)]).status, 202);
    }
    rig.wait_for_cycles(2, deadline);
    // Let any cycle the burst could still start finish.
    std::thread::sleep(Duration::from_secs(4));
    let n = rig.cycles().len();
    // One cycle for the burst, or two when pushes also arrived while it
    // ran (that one follows right after): never one per push.
    assert!((2..=3).contains(&n), "{n} cycles after 8 pushes");
    assert!(Instant::now() < deadline);
}
