//! The guest ProxOps runs in, end to end: the real binary against a
//! fakepve server (tools/install-test-tools.sh), with the host's identity
//! given as `self:` in the configuration (what the CLI otherwise reads
//! from `/sys`). A proxops-tagged orphan that is the self guest is not
//! pruned, a stop-required change to a self guest is not made, and both
//! are reported; the rest of the plan runs.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::Value;

/// A running VM `app` (110) whose manifest wants 2 cores: PVE applies a
/// core count only at a cold start, so the update is stop-required.
const APP: &str = "apiVersion: proxops/v1alpha1
kind: VM
metadata:
  name: app
spec:
  node: pve1
  vmid: 110
  memory: 512MiB
  cpu:
    type: host
    cores: 2
  disks:
    - storage: local-lvm
      size: 1GiB
  networks:
    - bridge: vmbr0
";

/// The MAC `seed_vm` gives `vmid`'s net0, spelled lower-case (PVE's is
/// upper-case: ProxOps compares them ignoring case).
fn mac(vmid: u32) -> String {
    format!("bc:24:11:00:{:02x}:{:02x}", vmid / 256, vmid % 256)
}

/// Three tagged, running VMs: `proxops-host` (300) and `old` (301) with no
/// manifest, and `app` (110) with one.
fn seeded() -> (FakePve, Repo) {
    let mut seed = empty_seed();
    seed["guests"] = serde_json::json!([
        seed_vm(110, "app", Some("proxops"), true),
        seed_vm(300, "proxops-host", Some("proxops"), true),
        seed_vm(301, "old", Some("proxops"), true),
    ]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = empty_repo(&pve);
    repo.write("vm/home/app.yaml", APP);
    repo.set_resources(&["../../vm/home/app.yaml"]);
    (pve, repo)
}

/// Declares the host's identity: the MACs of 300 and 110, as a host with
/// two interfaces would show them.
fn declare_self(repo: &Repo) {
    let p = repo.path().join("proxops.yaml");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str(&format!(
        "self:\n  macs: [\"{}\", \"{}\"]\n",
        mac(300),
        mac(110)
    ));
    std::fs::write(p, text).unwrap();
}

fn touches(writes: &[(String, String)], vmid: u32) -> Vec<(String, String)> {
    let needle = format!("/qemu/{vmid}");
    writes
        .iter()
        .filter(|(_, p)| p.contains(&needle))
        .cloned()
        .collect()
}

#[test]
fn apply_writes_nothing_to_the_self_guest_and_reports_both_anomalies() {
    let (pve, repo) = seeded();
    // Without the identity, the plan prunes 300 and stops 110 for its
    // update: the changes are real.
    let blind = proxops(&pve, &repo, &["diff"]);
    assert!(
        blind.stdout.contains("proxops-host") && blind.stdout.contains("stop-required"),
        "{}",
        blind.all()
    );

    declare_self(&repo);
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    let w = writes(&pve);
    assert!(touches(&w, 300).is_empty(), "{w:?}\n{}", run.all());
    assert!(touches(&w, 110).is_empty(), "{w:?}\n{}", run.all());
    // The rest of the plan ran: the other orphan is gone.
    assert!(
        deletes(&pve).contains(&"/api2/json/nodes/pve1/qemu/301".to_owned()),
        "{w:?}\n{}",
        run.all()
    );
    let text = run.all();
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ProxOps runs in this guest"))
        .collect();
    assert!(
        said.iter()
            .any(|l| l.contains("proxops-host") && l.contains("prune")),
        "{text}"
    );
    assert!(
        said.iter()
            .any(|l| l.contains("app") && l.contains("stop-required")),
        "{text}"
    );
}

#[test]
fn status_shows_the_self_guests() {
    let (pve, repo) = seeded();
    declare_self(&repo);
    let text = proxops(&pve, &repo, &["status"]);
    assert!(
        text.stdout.contains(
            "self: proxops-host (vmid 300 on node pve1, matched by net0 MAC bc:24:11:00:01:2c)"
        ),
        "{}",
        text.all()
    );
    let json = proxops(&pve, &repo, &["status", "--output", "json"]);
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    let selves: Vec<u64> = doc["clusters"][0]["self"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", json.all()))
        .iter()
        .map(|s| s["vmid"].as_u64().unwrap())
        .collect();
    assert_eq!(selves, vec![110, 300]);
}
