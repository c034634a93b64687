//! One PVE is managed under one cluster name on a host, across processes,
//! and a cluster whose PVE did not say which it is writes nothing. Against
//! one fakepve served on two loopback addresses (two names no URL
//! comparison can match): two processes sharding one configuration
//! (`--cluster home`, `--cluster edge`) whose `base-url`s reach that one
//! PVE; and a `/cluster/status` that fails.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::time::{Duration, Instant};

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::json;

/// A VM manifest `name` at `vmid` on pve1, in `vm/<dir>/`.
fn vm_manifest(repo: &Repo, dir: &str, name: &str, vmid: u32) -> String {
    let path = format!("vm/{dir}/{name}.yaml");
    repo.write(
        &path,
        &format!(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: pve1\n  vmid: {vmid}\n  memory: 512MiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 1GiB\n  networks:\n    - bridge: vmbr0\n"
        ),
    );
    format!("../../{path}")
}

/// The demo with `home` at `pve`'s first address managing `app` (vmid
/// 300), and `edge` at its second address (the same PVE) managing another
/// VM: `edge` alone would prune `app`.
fn one_pve_under_two_names(pve: &FakePve) -> Repo {
    let repo = Repo::demo_for(pve);
    let app = vm_manifest(&repo, "home", "app", 300);
    repo.set_resources(&[&app]);
    repo.write(
        "clusters/edge/config.yaml",
        &format!(
            "pve:\n  clusters:\n    edge:\n      base-url: {}\n      nodes: [pve1]\n      ca-file: {}\n",
            pve.also_url().unwrap(),
            pve.ca_file().display()
        ),
    );
    let other = vm_manifest(&repo, "edge", "other", 400);
    repo.write(
        "clusters/edge/resources.yaml",
        &format!("resources:\n  - {other}\n"),
    );
    repo
}

fn seeded_app() -> serde_json::Value {
    let mut seed = empty_seed();
    seed["guests"] = json!([seed_vm(300, "app", Some("proxops"), true)]);
    seed
}

#[test]
fn two_processes_sharding_one_config_never_manage_one_pve_under_two_names() {
    let pve = FakePve::start_on_two_addresses(&seeded_app()).unwrap();
    let repo = one_pve_under_two_names(&pve);
    // The attack as it was: each process alone sees one cluster, and
    // `edge` plans to prune `home`'s guest.
    let plan = proxops_selecting(&pve, &repo, &["--cluster", "edge"], &["diff"]);
    assert!(
        plan.stdout.contains("prune") && plan.stdout.contains("app"),
        "{}",
        plan.all()
    );

    // `home` applies first and claims the PVE on this host.
    let home = proxops_selecting(&pve, &repo, &["--cluster", "home"], &["apply", "--yes"]);
    assert_eq!(home.code, 0, "{}", home.all());
    let record = std::fs::read_to_string(repo.data_dir().join("pve-claims.json")).unwrap();
    assert!(record.contains("\"cluster\": \"home\""), "{record}");

    // Another process, `--cluster edge`: refused before any inventory read.
    for args in [&["apply", "--yes"][..], &["diff"][..]] {
        pve.forget_requests().unwrap();
        let edge = proxops_selecting(&pve, &repo, &["--cluster", "edge"], args);
        assert_eq!(edge.code, 1, "{}", edge.all());
        for needle in [
            "this host manages",
            "as cluster \"home\"",
            "pve-claims.json",
            "one PVE is never managed under two cluster names",
        ] {
            assert!(edge.all().contains(needle), "{needle}\n{}", edge.all());
        }
        let requests = pve.requests().unwrap();
        assert!(
            requests
                .iter()
                .all(|(m, p, _)| m == "GET" && p.ends_with("/cluster/status")),
            "{requests:?}"
        );
    }
    // `home` goes on as before.
    let again = proxops_selecting(&pve, &repo, &["--cluster", "home"], &["apply", "--yes"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(deletes(&pve).is_empty());
}

#[test]
fn a_read_only_command_checks_the_record_but_claims_nothing() {
    let pve = FakePve::start_on_two_addresses(&seeded_app()).unwrap();
    let repo = one_pve_under_two_names(&pve);
    let diff = proxops_selecting(&pve, &repo, &["--cluster", "edge"], &["diff"]);
    assert_eq!(diff.code, 0, "{}", diff.all());
    assert!(!repo.data_dir().join("pve-claims.json").exists());
    // So the name that writes first is the one kept.
    let home = proxops_selecting(&pve, &repo, &["--cluster", "home"], &["apply", "--yes"]);
    assert_eq!(home.code, 0, "{}", home.all());
}

/// `GET /cluster/status` answers 500 from now on.
fn identity_fails(pve: &FakePve) {
    pve.call(
        "fail",
        json!(["GET", "/cluster/status"]),
        json!({"status": 500, "message": "cluster status unavailable"}),
    )
    .unwrap();
}

#[test]
fn a_cluster_whose_pve_did_not_say_which_it_is_writes_nothing_and_is_asked_again() {
    let pve = FakePve::start(&seeded_app()).unwrap();
    let repo = Repo::demo_for(&pve);
    let other = vm_manifest(&repo, "home", "other", 400);
    // Alone in its configuration, the cluster would prune `app` (300).
    repo.set_resources(&[&other]);
    identity_fails(&pve);
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 1, "{}", run.all());
    assert!(
        run.all()
            .contains("which PVE base-url leads to is not confirmed"),
        "{}",
        run.all()
    );
    let requests = pve.requests().unwrap();
    assert!(
        requests
            .iter()
            .all(|(m, p, _)| m == "GET" && p.ends_with("/cluster/status")),
        "no inventory read, no write: {requests:?}"
    );

    // The daemon asks every cycle and writes nothing while PVE does not say.
    let logs = tempfile::tempdir().unwrap();
    let stderr_file = logs.path().join("stderr");
    let mut daemon = spawn_daemon(&pve, &repo, &["--cluster", "home"], &stderr_file);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut text = String::new();
    while Instant::now() < deadline && text.matches("leads to is not confirmed").count() < 3 {
        std::thread::sleep(Duration::from_millis(100));
        text = std::fs::read_to_string(&stderr_file).unwrap_or_default();
    }
    let reads = pve
        .requests()
        .unwrap()
        .iter()
        .filter(|(_, p, _)| p.ends_with("/cluster/status"))
        .count();
    assert!(writes(&pve).is_empty(), "{text}");
    assert!(
        text.matches("leads to is not confirmed").count() >= 3,
        "{text}"
    );
    // PVE answers again: the next cycle confirms it and goes on.
    pve.clear().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline && deletes(&pve).is_empty() {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    assert!(reads >= 3, "asked every cycle: {reads}");
    assert_eq!(deletes(&pve), ["/api2/json/nodes/pve1/qemu/300"]);
}
