//! Faults injected through fakepve's control port while `proxops apply`
//! runs against it: each one loses nothing, and the cluster converges on
//! the next cycle once the fault is cleared.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

/// The monitoring VM (150, pve1) with a description, so a later edit of
/// the description is a hot (live) config change.
fn monitoring_repo(pve: &FakePve) -> Repo {
    let repo = Repo::demo_for(pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    repo.set_monitoring_description("metrics");
    let created = proxops(pve, &repo, &["apply", "--yes"]);
    assert_eq!(created.code, 0, "{}", created.all());
    repo
}

fn assert_converged(pve: &FakePve, repo: &Repo) {
    pve.forget_requests().unwrap();
    let again = proxops(pve, repo, &["apply", "--yes"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(writes(pve).is_empty(), "{}\n{:?}", again.all(), writes(pve));
    let diff = proxops(pve, repo, &["diff"]);
    assert!(diff.stdout.contains("no drift"), "{}", diff.all());
}

fn config_of(pve: &FakePve, repo: &Repo, vmid: u32) -> Value {
    // What the next plan would write tells whether the VM changed; the
    // description itself is read back through a recording.
    // The read is `/pending`: a list of keys with their values.
    let path = format!("/nodes/pve1/qemu/{vmid}/pending");
    let entries = recorded_home(pve, repo)
        .into_iter()
        .find(|r| r["path"] == path.as_str())
        .unwrap()["body"]["data"]
        .clone();
    let mut config = serde_json::Map::new();
    for e in entries.as_array().unwrap() {
        let value = e.get("pending").or_else(|| e.get("value")).cloned();
        config.insert(
            e["key"].as_str().unwrap().to_owned(),
            value.unwrap_or(Value::Null),
        );
    }
    Value::Object(config)
}

#[test]
fn a_locked_guest_is_skipped_and_converges_once_unlocked() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = monitoring_repo(&pve);
    repo.set_monitoring_description("metrics-v2");
    pve.call("snapshot_lock", json!([150, "backup"]), Value::Null)
        .unwrap();

    // PVE refuses changes to a locked guest: nothing is attempted, the
    // lock is named (qemu-server `QemuConfig.pm` `check_lock`).
    pve.forget_requests().unwrap();
    let locked = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(locked.code, 0, "{}", locked.all());
    assert!(writes(&pve).is_empty(), "{}", locked.all());
    assert!(
        locked.stdout.contains("locked (backup)"),
        "{}",
        locked.all()
    );
    assert_eq!(config_of(&pve, &repo, 150)["description"], "metrics");

    pve.call("unlock", json!([150]), Value::Null).unwrap();
    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert_eq!(config_of(&pve, &repo, 150)["description"], "metrics-v2");
    assert_converged(&pve, &repo);
}

#[test]
fn a_config_lock_held_by_another_task_fails_transiently_and_converges_later() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = monitoring_repo(&pve);
    repo.set_monitoring_description("metrics-v2");
    pve.call("hold_config_lock", json!([150, null]), Value::Null)
        .unwrap();

    let held = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(held.code, 1, "{}", held.all());
    assert!(held.stdout.contains("got timeout"), "{}", held.all());
    assert!(held.stdout.contains("transient"), "{}", held.all());

    pve.call("release_config_lock", json!([150]), Value::Null)
        .unwrap();
    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert_converged(&pve, &repo);
}

#[test]
fn a_failing_config_read_prunes_nothing_and_the_next_cycle_catches_up() {
    let mut seed = empty_seed();
    seed["guests"] = json!([{
        "vmid": 302, "name": "orphan", "node": "pve1", "status": "stopped",
        "config": {"memory": 512, "tags": "proxops", "net0": "virtio=BC:24:11:00:01:2E,bridge=vmbr0",
                   "scsi0": "local-lvm:vm-302-disk-0,size=1G"}
    }]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    // Every VM config read answers 500 (retries included) until cleared.
    pve.call(
        "fail",
        json!(["GET", "/nodes/{node}/qemu/{vmid}/pending"]),
        json!({"status": 500, "message": "boom: config unreadable"}),
    )
    .unwrap();

    pve.forget_requests().unwrap();
    let failing = proxops(&pve, &repo, &["apply", "--yes"]);
    let deletes: Vec<_> = writes(&pve)
        .into_iter()
        .filter(|(m, _)| m == "DELETE")
        .collect();
    assert!(
        deletes.is_empty(),
        "a tagged orphan whose config could not be read was pruned:\n{}",
        failing.all()
    );
    // The cluster aborts its cycle: nothing at all is written on a partial
    // read, and apply says so with exit 1.
    assert_eq!(failing.code, 1, "{}", failing.all());
    assert!(
        writes(&pve).is_empty(),
        "{}\n{:?}",
        failing.all(),
        writes(&pve)
    );
    assert!(
        failing.all().contains("pve inventory read failed"),
        "{}",
        failing.all()
    );

    pve.clear().unwrap();
    pve.forget_requests().unwrap();
    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert!(
        writes(&pve).contains(&("DELETE".into(), "/api2/json/nodes/pve1/qemu/302".into())),
        "{}",
        applied.all()
    );
    assert_converged(&pve, &repo);
}

#[test]
fn a_failing_config_read_of_a_managed_guest_writes_nothing_to_it() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = monitoring_repo(&pve);
    repo.set_monitoring_description("metrics-v2");
    pve.call(
        "fail",
        json!(["GET", "/nodes/{node}/qemu/{vmid}/pending"]),
        json!({"status": 500, "message": "boom: config unreadable"}),
    )
    .unwrap();

    pve.forget_requests().unwrap();
    let failing = proxops(&pve, &repo, &["apply", "--yes"]);
    assert!(
        writes(&pve).is_empty(),
        "{}\n{:?}",
        failing.all(),
        writes(&pve)
    );
    assert_eq!(failing.code, 1, "{}", failing.all());
    assert!(
        failing.all().contains("pve inventory read failed"),
        "{}",
        failing.all()
    );

    pve.clear().unwrap();
    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert_eq!(config_of(&pve, &repo, 150)["description"], "metrics-v2");
    assert_converged(&pve, &repo);
}

#[test]
fn a_download_task_error_defers_its_dependants_and_the_next_cycle_converges() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&[
        "../../ctt/base/debian-13-standard.yaml",
        "../../templatect/home/ct-base.yaml",
        "../../lxc/home/dns-01.yaml",
    ]);
    pve.call(
        "fail",
        json!(["POST", "/nodes/pve1/storage/local/download-url"]),
        json!({"error": "decompression_not_supported", "times": 1}),
    )
    .unwrap();

    pve.forget_requests().unwrap();
    let failed = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(failed.code, 1, "{}", failed.all());
    assert!(
        failed.stdout.contains("decompression not supported"),
        "{}",
        failed.all()
    );
    assert!(
        failed
            .stdout
            .contains("deferred: prerequisite CTTemplate/debian-13-standard failed"),
        "{}",
        failed.all()
    );
    assert!(
        writes(&pve)
            .iter()
            .all(|(_, p)| p.ends_with("/download-url")),
        "only the download was attempted: {:?}",
        writes(&pve)
    );

    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert!(
        applied.stdout.contains("3 ok, 0 failed"),
        "{}",
        applied.all()
    );
    assert_converged(&pve, &repo);
}

#[test]
fn an_offline_node_is_left_alone_and_caught_up_when_it_returns() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    pve.call("set_node_offline", json!(["pve2"]), Value::Null)
        .unwrap();

    pve.forget_requests().unwrap();
    let partial = proxops(&pve, &repo, &["apply", "--yes"]);
    assert!(
        partial.stdout.contains("node pve2 is not online"),
        "{}",
        partial.all()
    );
    assert!(
        writes(&pve)
            .iter()
            .all(|(_, p)| !p.contains("/nodes/pve2/")),
        "{:?}",
        writes(&pve)
    );
    assert_eq!(partial.code, 0, "{}", partial.all());

    pve.call("set_node_offline", json!(["pve2", false]), Value::Null)
        .unwrap();
    let caught_up = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(caught_up.code, 0, "{}", caught_up.all());
    assert!(caught_up.stdout.contains("VM/db-01"), "{}", caught_up.all());
    pve.forget_requests().unwrap();
    let again = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(writes(&pve).is_empty(), "{}", again.all());
}

#[test]
fn dropped_connections_are_retried_and_nothing_is_done_twice() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&[
        "../../vm/base/monitoring.yaml",
        "../../iso/base/debian-13-netinst.yaml",
    ]);
    pve.call("flaky_network", Value::Null, json!({"drop_rate": 0.3}))
        .unwrap();
    let _ = proxops(&pve, &repo, &["apply", "--yes"]);
    let _ = proxops(&pve, &repo, &["apply", "--yes"]);
    pve.clear().unwrap();
    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    pve.forget_requests().unwrap();
    let again = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(writes(&pve).is_empty(), "{}", again.all());
}

#[test]
fn a_permission_error_fails_the_action_with_pves_words_and_converges_once_granted() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    pve.call(
        "fail",
        json!(["POST", "/nodes/pve1/qemu"]),
        json!({"status": 403, "message": "Permission check failed (/vms/150, VM.Allocate)"}),
    )
    .unwrap();
    let denied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(denied.code, 1, "{}", denied.all());
    assert!(
        denied
            .stdout
            .contains("HTTP 403 Permission check failed (/vms/150, VM.Allocate)"),
        "{}",
        denied.all()
    );
    assert!(!denied.stdout.contains("transient"), "{}", denied.all());

    pve.clear().unwrap();
    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert_converged(&pve, &repo);
}

#[test]
fn an_unreadable_inventory_aborts_the_cluster_with_nothing_written() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    pve.call(
        "fail",
        json!(["GET", "/cluster/resources"]),
        json!({"status": 500, "message": "boom: inventory"}),
    )
    .unwrap();
    pve.forget_requests().unwrap();
    for args in [&["apply", "--yes"][..], &["status"][..], &["diff"][..]] {
        let run = proxops(&pve, &repo, args);
        assert_eq!(run.code, 1, "{args:?}: {}", run.all());
        assert!(
            run.stdout.contains("aborted: pve inventory read failed"),
            "{}",
            run.all()
        );
        assert!(run.stdout.contains("boom: inventory"), "{}", run.all());
    }
    assert!(writes(&pve).is_empty(), "{:?}", writes(&pve));
    pve.clear().unwrap();
    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    pve.forget_requests().unwrap();
    let again = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(writes(&pve).is_empty(), "{}", again.all());
}
