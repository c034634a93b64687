//! `proxops run` with two clusters, one behind a slow PVE: each cluster
//! keeps its own poll interval, so the slow one does not delay the other's
//! cycles. The real binary against two fakepve servers
//! (tools/install-test-tools.sh); cycles are counted from what each PVE
//! was asked (one `GET /cluster/resources` per cycle) and from `/status`.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::time::{Duration, Instant};

use live_support::daemon::get;
use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

/// Everything here finishes well within this.
const DEADLINE: Duration = Duration::from_secs(90);

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
    let fast = two_clusters::fake();
    let slow = two_clusters::fake();
    let repo = two_clusters::repo(&fast, &slow);

    let mut daemon = two_clusters::start(&repo);
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
