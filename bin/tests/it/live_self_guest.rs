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

/// Declares the host's identity in the host's own configuration (a
/// `--config` file outside the repository, holding what the repository's
/// `proxops.yaml` says and `self:`): the MACs of 300 and 110, as a host
/// with two interfaces would show them. The selection to run with.
fn declare_self(repo: &Repo, host: &tempfile::TempDir) -> Vec<String> {
    let mut text = std::fs::read_to_string(repo.path().join("proxops.yaml")).unwrap();
    text.push_str(&format!(
        "self:\n  macs: [\"{}\", \"{}\"]\n",
        mac(300),
        mac(110)
    ));
    let file = host.path().join("proxops.yaml");
    std::fs::write(&file, text).unwrap();
    vec![
        "--cluster".into(),
        "home".into(),
        "--config".into(),
        file.display().to_string(),
    ]
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

    let host = tempfile::tempdir().unwrap();
    let selection = declare_self(&repo, &host);
    let selection: Vec<&str> = selection.iter().map(String::as_str).collect();
    pve.forget_requests().unwrap();
    let run = proxops_selecting(&pve, &repo, &selection, &["apply", "--yes"]);
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
    let host = tempfile::tempdir().unwrap();
    let selection = declare_self(&repo, &host);
    let selection: Vec<&str> = selection.iter().map(String::as_str).collect();
    let text = proxops_selecting(&pve, &repo, &selection, &["status"]);
    assert!(
        text.stdout.contains(
            "self: proxops-host (vmid 300 on node pve1, matched by net0 MAC bc:24:11:00:01:2c)"
        ),
        "{}",
        text.all()
    );
    let json = proxops_selecting(&pve, &repo, &selection, &["status", "--output", "json"]);
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    let selves: Vec<u64> = doc["clusters"][0]["self"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", json.all()))
        .iter()
        .map(|s| s["vmid"].as_u64().unwrap())
        .collect();
    assert_eq!(selves, vec![110, 300]);
}

#[test]
fn a_repository_cannot_name_the_guest_proxops_runs_in() {
    let (pve, repo) = seeded();
    // The attack: the repository's proxops.yaml names another guest, so
    // this host's own would be left unguarded.
    let p = repo.path().join("proxops.yaml");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("self:\n  macs: [\"bc:24:11:ff:ff:ff\"]\n");
    std::fs::write(p, text).unwrap();
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("proxops.yaml")
            && run
                .stderr
                .contains("self: belongs in the host's own configuration"),
        "{}",
        run.all()
    );
    assert_eq!(pve.requests().unwrap(), Vec::new());
}

#[test]
fn a_manifest_cannot_change_the_mac_that_identifies_the_self_guest() {
    let mut app = seed_vm(110, "app", Some("proxops"), true);
    app["config"]["cpu"] = serde_json::json!("host");
    let mut seed = empty_seed();
    seed["guests"] = serde_json::json!([app]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = empty_repo(&pve);
    repo.set_resources(&["../../vm/home/app.yaml"]);
    // app (110) is the self guest by its net0 MAC; its manifest pins
    // another MAC, a live change that would make ProxOps lose track of it.
    // Otherwise as the guest is (one core), so the MAC is the change.
    repo.write(
        "vm/home/app.yaml",
        &APP.replace("cores: 2", "cores: 1").replace(
            "    - bridge: vmbr0\n",
            "    - bridge: vmbr0\n      mac: \"BC:24:11:AA:BB:CC\"\n",
        ),
    );
    let host = tempfile::tempdir().unwrap();
    let selection = declare_self(&repo, &host);
    let selection: Vec<&str> = selection.iter().map(String::as_str).collect();
    pve.forget_requests().unwrap();
    let run = proxops_selecting(&pve, &repo, &selection, &["apply", "--yes"]);
    assert!(
        run.all().contains("ProxOps runs in this guest")
            && run
                .all()
                .contains("would make ProxOps lose track of the guest it runs in"),
        "{}",
        run.all()
    );
    assert!(touches(&writes(&pve), 110).is_empty(), "{}", run.all());
}
