//! `proxops run` with two clusters, one behind a slow PVE: each cluster
//! keeps its own poll interval, so the slow one does not delay the other's
//! cycles. The real binary against two fakepve servers
//! (tools/install-test-tools.sh); cycles are counted from what each PVE
//! was asked (one `GET /cluster/resources` per cycle) and from `/status`.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::process::Command;
use std::time::{Duration, Instant};

use live_support::daemon::{Daemon, get};
use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

/// Everything here finishes well within this.
const DEADLINE: Duration = Duration::from_secs(90);

/// One API token both fakes accept, so one `PROXOPS_PVE_TOKEN_VALUE`
/// serves both clusters.
const TOKEN_ID: &str = "root@pam!both";
const TOKEN_SECRET: &str = "5b0c6a0e-0000-4000-8000-00000000b07a";

fn fake() -> FakePve {
    let mut seed = empty_seed();
    seed["tokens"] = json!({ TOKEN_ID: TOKEN_SECRET });
    FakePve::start(&seed).unwrap()
}

/// `proxops run` over `repo`, one cycle a second, the shared token in its
/// environment.
fn start(repo: &Repo) -> Daemon {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    without_proxops_env(&mut cmd)
        .current_dir(repo.path())
        .env(
            "PROXOPS_PVE_TOKEN_VALUE",
            format!("{TOKEN_ID}={TOKEN_SECRET}"),
        )
        .arg("--git-path")
        .arg(repo.path())
        .args(["--git-poll-sec", "1", "--listen", "127.0.0.1:0", "run"]);
    Daemon::spawn(cmd)
}

/// Inventory reads `pve` answered: one per cycle of its cluster.
fn cycles_seen(pve: &FakePve) -> usize {
    pve.requests()
        .unwrap()
        .iter()
        .filter(|(m, p, _)| m == "GET" && p.ends_with("/cluster/resources"))
        .count()
}

#[test]
fn a_slow_cluster_does_not_delay_the_other_clusters_cycles() {
    let deadline = Instant::now() + DEADLINE;
    let fast = fake();
    let slow = fake();
    let repo = empty_repo(&fast);
    // The demo's `edge` names a host beyond loopback: this daemon runs
    // every cluster of the tree, so it goes.
    std::fs::remove_dir_all(repo.path().join("clusters/edge")).unwrap();
    repo.write(
        "clusters/lab/config.yaml",
        &format!(
            "pve:\n  clusters:\n    lab:\n      base-url: {}\n      nodes: [pve1, pve2]\n      ca-file: {}\n",
            slow.url(),
            slow.ca_file().display()
        ),
    );
    repo.write("clusters/lab/resources.yaml", "resources: []\n");

    let mut daemon = start(&repo);
    let addr = daemon.address(deadline);
    // Both clusters had a first cycle at full speed.
    while cycles_seen(&fast) < 1 || cycles_seen(&slow) < 1 {
        assert!(Instant::now() < deadline, "{}", daemon.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    // From now on every answer of the lab PVE takes 1.5 s: a cycle there
    // (several reads) takes many poll intervals.
    slow.settings(json!({"time_scale": 1})).unwrap();
    slow.call("slow_network", json!([1.5]), Value::Null)
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (fast_before, slow_before) = (cycles_seen(&fast), cycles_seen(&slow));
    std::thread::sleep(Duration::from_secs(8));
    let (fast_after, slow_after) = (cycles_seen(&fast), cycles_seen(&slow));
    let fast_cycles = fast_after - fast_before;
    let slow_cycles = slow_after - slow_before;
    // About 8 at a 1 s poll interval; one cycle after another, home could
    // not run more than one cycle per lab cycle, and lab runs two or so.
    assert!(slow_cycles <= 3, "lab is not slow: {slow_cycles} cycles");
    assert!(
        fast_cycles >= slow_cycles + 3,
        "home ran {fast_cycles} cycles while lab ran {slow_cycles}:\n{}",
        daemon.stderr()
    );

    // /status reports both clusters, each with its last cycle.
    let answer = get(addr, "/status");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let status: Value = serde_json::from_str(&answer.body).unwrap();
    let names: Vec<&str> = status["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["home", "lab"], "{status:#}");

    // SIGTERM waits for the lab cycle in flight and exits 0.
    slow.clear().unwrap();
    let exit = daemon.terminate(deadline);
    assert_eq!(exit.code(), Some(0), "{}", daemon.stderr());
    assert!(daemon.stderr().contains("proxops.run stopping"));
}
