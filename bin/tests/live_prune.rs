//! Prune safety against a live (fakepve) cluster: only proxops-tagged
//! guests absent from git are deleted, at most the budget per cycle, the
//! rest on later cycles; with no VM manifest at all and more tagged VMs
//! than the budget, nothing is pruned and the cycle reports an anomaly.

#![allow(clippy::unwrap_used)]

mod live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

fn vm(vmid: u32, name: &str, tags: Option<&str>, running: bool) -> Value {
    let mut config = json!({
        "memory": 512, "cores": 1, "scsihw": "virtio-scsi-pci",
        "net0": format!("virtio=BC:24:11:00:{:02X}:{:02X},bridge=vmbr0", vmid / 256, vmid % 256),
        "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=1G"),
    });
    if let Some(t) = tags {
        config["tags"] = json!(t);
    }
    json!({"vmid": vmid, "name": name, "node": "pve1",
           "status": if running { "running" } else { "stopped" }, "config": config})
}

/// Untagged 300, pveconform-tagged 301, and five proxops-tagged orphans
/// 302–306 (302 running).
fn orphan_seed() -> Value {
    let mut seed = empty_seed();
    seed["guests"] = json!([
        vm(300, "hand-made", None, true),
        vm(301, "legacy", Some("pveconform"), false),
        vm(302, "orphan-a", Some("proxops"), true),
        vm(303, "orphan-b", Some("proxops;web"), false),
        vm(304, "orphan-c", Some("proxops"), false),
        vm(305, "orphan-d", Some("proxops"), false),
        vm(306, "orphan-e", Some("proxops"), false),
    ]);
    seed
}

fn deletes(pve: &FakePve) -> Vec<String> {
    writes(pve)
        .into_iter()
        .filter(|(m, _)| m == "DELETE")
        .map(|(_, p)| p)
        .collect()
}

#[test]
fn only_tagged_orphans_are_pruned_within_the_budget_and_the_rest_later() {
    let pve = FakePve::start(&orphan_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);

    pve.forget_requests().unwrap();
    let first = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(first.code, 0, "{}", first.all());
    assert_eq!(
        deletes(&pve),
        vec![
            "/api2/json/nodes/pve1/qemu/302",
            "/api2/json/nodes/pve1/qemu/303",
            "/api2/json/nodes/pve1/qemu/304"
        ],
        "{}",
        first.all()
    );
    // The running orphan is stopped first (never forced).
    let all = pve.requests().unwrap();
    let stop = all
        .iter()
        .position(|(m, p, _)| m == "POST" && p.ends_with("/qemu/302/status/stop"))
        .unwrap();
    let del = all
        .iter()
        .position(|(m, p, _)| m == "DELETE" && p.ends_with("/qemu/302"))
        .unwrap();
    assert!(stop < del);
    assert!(
        all.iter()
            .all(|(_, _, body)| !body.contains("force") && !body.contains("skiplock")),
        "{all:?}"
    );
    assert!(
        first.stdout.contains("deferred prunes (budget) (2)"),
        "{}",
        first.all()
    );

    pve.forget_requests().unwrap();
    let second = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(second.code, 0, "{}", second.all());
    assert_eq!(
        deletes(&pve),
        vec![
            "/api2/json/nodes/pve1/qemu/305",
            "/api2/json/nodes/pve1/qemu/306"
        ]
    );

    pve.forget_requests().unwrap();
    let third = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(third.code, 0, "{}", third.all());
    assert!(writes(&pve).is_empty(), "{}", third.all());
    // Untagged and pveconform-tagged guests are still there, never touched.
    let diff = proxops(&pve, &repo, &["diff"]);
    assert!(
        diff.stdout.contains("hand-made") && diff.stdout.contains("legacy"),
        "{}",
        diff.all()
    );
    assert!(
        diff.stdout.contains("skipped (no proxops tag) (2)"),
        "{}",
        diff.all()
    );
}

#[test]
fn no_vm_manifest_and_more_tagged_vms_than_the_budget_prunes_nothing() {
    let pve = FakePve::start(&orphan_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    // Only an ISO: zero VM manifests (a probable bad push).
    repo.set_resources(&["../../iso/base/debian-13-netinst.yaml"]);

    pve.forget_requests().unwrap();
    let run = proxops(&pve, &repo, &["apply", "--yes"]);
    assert!(deletes(&pve).is_empty(), "{}", run.all());
    assert!(
        writes(&pve)
            .iter()
            .all(|(_, p)| p.contains("/download-url")),
        "{:?}",
        writes(&pve)
    );
    assert!(run.stdout.contains("probable bad push"), "{}", run.all());
    assert_eq!(run.code, 0, "{}", run.all());
}
