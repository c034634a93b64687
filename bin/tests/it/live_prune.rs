//! Prune safety against a live (fakepve) cluster: only proxops-tagged
//! guests absent from git are deleted, at most the budget per cycle, the
//! rest on later cycles; with no VM manifest at all, nothing is pruned and
//! the cycle reports an anomaly.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

/// Untagged 300, pveconform-tagged 301, and five proxops-tagged orphans
/// 302–306 (302 running).
fn orphan_seed() -> Value {
    let mut seed = empty_seed();
    seed["guests"] = json!([
        seed_vm(300, "hand-made", None, true),
        seed_vm(301, "legacy", Some("pveconform"), false),
        seed_vm(302, "orphan-a", Some("proxops"), true),
        seed_vm(303, "orphan-b", Some("proxops;web"), false),
        seed_vm(304, "orphan-c", Some("proxops"), false),
        seed_vm(305, "orphan-d", Some("proxops"), false),
        seed_vm(306, "orphan-e", Some("proxops"), false),
    ]);
    seed
}

#[test]
fn only_tagged_orphans_are_pruned_within_the_budget_and_the_rest_later() {
    let pve = FakePve::start(&orphan_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);

    pve.forget_requests().unwrap();
    let first = apply(&pve, &repo, &[]);
    assert_eq!(first.code, 0, "{}", first.all());
    let mut deleted = deletes(&pve);
    // Prunes of one level run at once: sorted, not in the order sent.
    deleted.sort();
    assert_eq!(
        deleted,
        vec![
            "/api2/json/nodes/pve1/qemu/302",
            "/api2/json/nodes/pve1/qemu/303",
            "/api2/json/nodes/pve1/qemu/304"
        ],
        "{}",
        first.all()
    );
    // The running orphan is shut down first (never stopped hard, never
    // forced).
    let all = pve.requests().unwrap();
    let stop = all
        .iter()
        .position(|(m, p, _)| m == "POST" && p.ends_with("/qemu/302/status/shutdown"))
        .unwrap();
    assert!(
        !all.iter().any(|(_, p, _)| p.ends_with("/status/stop")),
        "{all:?}"
    );
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
    let second = apply(&pve, &repo, &[]);
    assert_eq!(second.code, 0, "{}", second.all());
    let mut deleted = deletes(&pve);
    deleted.sort();
    assert_eq!(
        deleted,
        vec![
            "/api2/json/nodes/pve1/qemu/305",
            "/api2/json/nodes/pve1/qemu/306"
        ]
    );

    pve.forget_requests().unwrap();
    let third = apply(&pve, &repo, &[]);
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
fn no_vm_manifest_prunes_no_tagged_vm() {
    let pve = FakePve::start(&orphan_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    // Only an ISO: zero VM manifests (a probable bad push).
    repo.set_resources(&["../../iso/base/debian-13-netinst.yaml"]);

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert!(deletes(&pve).is_empty(), "{}", run.all());
    assert!(
        writes(&pve)
            .iter()
            .all(|(_, p)| p.contains("/download-url")),
        "{:?}",
        writes(&pve)
    );
    assert!(
        run.stdout.contains("looks like a bad push"),
        "{}",
        run.all()
    );
    assert_eq!(run.code, 0, "{}", run.all());
}
