//! Two `apply` runs on one cluster at once (a cron job beside another run):
//! the cluster lock lets one act at a time. The second either gives up
//! after `reconcile.lock-wait`, naming the holder, having read and written
//! nothing; or it waits, then reads what the first left and prunes within
//! its own budget. Either way no two runs plan from the same live state,
//! so the prune budget of 3 holds per run: six tagged orphans are never
//! deleted by two overlapping runs. The daemon, finding the cluster held,
//! skips its cycle as `locked` and reconciles it once it is free.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

/// Everything in these tests finishes well within this.
const DEADLINE: Duration = Duration::from_secs(120);

fn orphan(vmid: u32, running: bool) -> Value {
    json!({"vmid": vmid, "name": format!("orphan-{vmid}"), "node": "pve1",
           "status": if running { "running" } else { "stopped" },
           "config": {"memory": 512, "cores": 1, "tags": "proxops",
                      "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=1G")}})
}

/// Six proxops-tagged orphans, 302–307; 302 runs and takes 3 s to shut
/// down, so the first apply holds the cluster for at least that long.
fn slow_orphans() -> FakePve {
    let mut seed = empty_seed();
    seed["guests"] = json!(
        (302..=307)
            .map(|id| orphan(id, id == 302))
            .collect::<Vec<_>>()
    );
    let pve = FakePve::start(&seed).unwrap();
    pve.settings(json!({"time_scale": 0.01})).unwrap();
    pve.set_guest(302, json!({"shutdown_secs": 300})).unwrap();
    pve
}

/// The demo repository with one VM desired (so an empty-desired guard does
/// not hold the prunes back), budget 3, and `lock_wait`.
fn repo_for(pve: &FakePve, lock_wait: &str) -> Repo {
    let repo = Repo::demo_for(pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    repo.set_lock_wait(lock_wait);
    // Longer than 302's 300 PVE seconds of shutdown.
    repo.set_reconcile("shutdown-timeout", "10m");
    repo
}

/// `proxops … apply`: every apply of these tests is spelt here.
fn apply(pve: &FakePve, repo: &Repo) -> Command {
    command(pve, repo, &["apply", "--yes"])
}

fn spawn(mut cmd: Command) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the first apply is stopping 302: it holds the cluster.
fn wait_until_stopping(pve: &FakePve, first: &mut Child) {
    let deadline = Instant::now() + DEADLINE;
    while !pve
        .requests()
        .unwrap()
        .iter()
        .any(|(m, p, _)| m == "POST" && p.ends_with("/qemu/302/status/shutdown"))
    {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first apply ended early"
        );
        assert!(
            Instant::now() < deadline,
            "the first apply never stopped 302"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn deleted(pve: &FakePve) -> Vec<String> {
    // Prunes of one level run at once: sorted, not in the order sent.
    let mut ids: Vec<String> = writes(pve)
        .into_iter()
        .filter(|(m, _)| m == "DELETE")
        .map(|(_, p)| p.rsplit('/').next().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

#[test]
fn a_second_apply_gives_up_after_the_wait_naming_the_holder_and_touches_nothing() {
    let pve = slow_orphans();
    let repo = repo_for(&pve, "1s");
    pve.forget_requests().unwrap();

    let mut first = spawn(apply(&pve, &repo));
    wait_until_stopping(&pve, &mut first);
    let first_pid = first.id();
    let started = Instant::now();
    let second = finished(&pve, apply(&pve, &repo).output().unwrap());
    let waited = started.elapsed();
    let first = finished(&pve, first.wait_with_output().unwrap());

    assert_eq!(first.code, 0, "{}", first.all());
    assert_eq!(second.code, 1, "{}", second.all());
    let holder = format!(
        "locked: cluster home is held by another proxops process (pid {first_pid}, proxops apply, since 20"
    );
    assert!(second.stdout.contains(&holder), "{}", second.all());
    assert!(waited >= Duration::from_secs(1), "gave up after {waited:?}");
    // It planned nothing: the lock comes before the read.
    assert!(!second.stdout.contains("prune"), "{}", second.all());
    assert_eq!(deleted(&pve), ["302", "303", "304"], "{}", first.all());
}

#[test]
fn a_second_apply_waits_then_prunes_from_what_the_first_left_within_its_own_budget() {
    let pve = slow_orphans();
    let repo = repo_for(&pve, "60s");
    pve.forget_requests().unwrap();

    let mut first = spawn(apply(&pve, &repo));
    wait_until_stopping(&pve, &mut first);
    let first_pid = first.id();
    let second = spawn(apply(&pve, &repo));
    let second = finished(&pve, second.wait_with_output().unwrap());
    let first = finished(&pve, first.wait_with_output().unwrap());

    assert_eq!(first.code, 0, "{}", first.all());
    assert_eq!(second.code, 0, "{}", second.all());
    let waiting = second
        .stderr
        .lines()
        .find(|l| l.contains("cluster held by another proxops process; waiting"))
        .unwrap_or_else(|| panic!("the second apply did not wait:\n{}", second.all()));
    assert!(
        waiting.contains(&format!("pid {first_pid}, proxops apply")),
        "{waiting}"
    );
    // Three each, none twice: the second planned from after the first.
    assert_eq!(
        deleted(&pve),
        ["302", "303", "304", "305", "306", "307"],
        "{}\n{}",
        first.all(),
        second.all()
    );
}

/// A child process killed when the test ends, however it ends.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_daemon_skips_a_held_cluster_as_locked_and_reconciles_it_once_freed() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = repo_for(&pve, "0s");
    repo.set_resources(&[]);
    // This test holds the cluster, as a long `apply` would.
    let held = repo.hold_cluster_lock(&pve);
    let me = std::process::id();

    let logs = tempfile::tempdir().unwrap();
    let stderr_path = logs.path().join("stderr");
    let mut daemon = KillOnDrop(
        command(
            &pve,
            &repo,
            &["--git-poll-sec", "1", "--listen", "127.0.0.1:0", "run"],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap(),
    );
    let mut wait_for = |text: &str| {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let log = std::fs::read_to_string(&stderr_path).unwrap_or_default();
            if let Some(line) = log.lines().find(|l| l.contains(text)) {
                return line.to_owned();
            }
            assert!(
                daemon.0.try_wait().unwrap().is_none(),
                "proxops run exited:\n{log}"
            );
            assert!(Instant::now() < deadline, "no {text:?}:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let skipped = wait_for("result=locked");
    assert!(skipped.starts_with("warn "), "{skipped}");
    assert!(
        skipped.contains(&format!(
            "pid {me}, proxops apply, since 2026-12-01T15:00:00Z"
        )),
        "{skipped}"
    );
    // Which PVE this is and what the token may see, nothing more.
    assert!(
        pve.requests().unwrap().iter().all(|(m, p, _)| m == "GET"
            && (p.ends_with("/cluster/status") || p.ends_with("/access/permissions"))),
        "a locked cycle read PVE's inventory"
    );

    // Freed: a later cycle reconciles the cluster.
    drop(held);
    wait_for("cluster=home result=ok");
}
