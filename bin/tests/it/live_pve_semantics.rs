//! Against fakepve, what real PVE does with a change (pve-semantics.md):
//! a change PVE holds pending is restarted with `status/reboot` when the
//! restart policy says so; guests PVE would refuse to delete (protection,
//! HA) are never stopped or deleted; a locked guest is not touched.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

/// A running proxops-tagged VM on pve1 as PVE reports it after create.
fn app_vm(vmid: u32, name: &str) -> Value {
    json!({"vmid": vmid, "name": name, "node": "pve1", "status": "running",
           "config": {
               "name": name, "memory": 512, "cores": 1, "cpu": "host", "scsihw": "virtio-scsi-pci",
               "net0": format!("virtio=BC:24:11:00:{:02X}:{:02X},bridge=vmbr0", vmid / 256, vmid % 256),
               "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=1G"), "tags": "proxops"}})
}

/// The manifest `app_vm` matches; `extra` is appended to its spec.
fn app_manifest(vmid: u32, name: &str, annotations: &str, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\n{annotations}spec:\n  node: pve1\n  vmid: {vmid}\n  memory: 512MiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 1GiB\n  networks:\n    - bridge: vmbr0\n{extra}"
    )
}

fn seed_with(guests: Vec<Value>) -> Value {
    let mut seed = empty_seed();
    seed["guests"] = Value::Array(guests);
    seed
}

/// A repo whose `home` composition is the one `app` manifest.
fn app_repo(pve: &FakePve, manifest: &str) -> Repo {
    let repo = Repo::demo_for(pve);
    repo.write("vm/home/app.yaml", manifest);
    repo.set_resources(&["../../vm/home/app.yaml"]);
    repo
}

#[test]
fn a_converged_guest_with_a_pending_change_is_rebooted_when_the_policy_says_so() {
    // The VM's vga was changed while it ran: PVE keeps it pending.
    let mut vm = app_vm(310, "app");
    vm["config"]["vga"] = json!("std");
    vm["pending"] = json!({"vga": "virtio"});
    let pve = FakePve::start(&seed_with(vec![vm])).unwrap();
    let extra = "  hardware:\n    display: virtio\n";

    // Policy never (the default): not converged, nothing written.
    let repo = app_repo(&pve, &app_manifest(310, "app", "", extra));
    let diff = proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(diff.code, 3, "{}", diff.all());
    assert!(
        diff.stdout.contains("pending restart") && diff.stdout.contains("vga"),
        "{}",
        diff.all()
    );
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(writes(&pve).is_empty(), "{:?}", writes(&pve));

    // proxops/restart-policy: reboot: apply restarts it with status/reboot
    // (never a stop), and it converges.
    let annotated = app_manifest(
        310,
        "app",
        "  annotations:\n    proxops/restart-policy: reboot\n",
        extra,
    );
    repo.write("vm/home/app.yaml", &annotated);
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        writes(&pve),
        vec![(
            "POST".to_owned(),
            "/api2/json/nodes/pve1/qemu/310/status/reboot".to_owned()
        )],
        "{}",
        run.all()
    );
    let reboot = pve
        .requests()
        .unwrap()
        .into_iter()
        .find(|(_, p, _)| p.ends_with("/status/reboot"))
        .unwrap();
    // qemu-server `vm_reboot` takes the shutdown's `timeout` (60 s without).
    assert_eq!(reboot.2, "timeout=180");
    let diff = proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(diff.code, 0, "{}", diff.all());
}

#[test]
fn a_protected_or_ha_managed_guest_is_never_stopped_or_pruned() {
    let mut protected = app_vm(320, "kept-protected");
    protected["config"]["protection"] = json!(1);
    let mut ha = app_vm(321, "kept-ha");
    ha["attrs"] = json!({"ha_state": "started"});
    let pve = FakePve::start(&seed_with(vec![app_vm(310, "app"), protected, ha])).unwrap();
    let repo = app_repo(&pve, &app_manifest(310, "app", "", ""));

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert!(writes(&pve).is_empty(), "{:?}\n{}", writes(&pve), run.all());
    let anomalies: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| l.contains("needs_person"))
        .collect();
    assert!(
        anomalies
            .iter()
            .any(|l| l.contains("kept-protected") && l.contains("protection=1")),
        "{}",
        run.all()
    );
    assert!(
        anomalies
            .iter()
            .any(|l| l.contains("kept-ha") && l.contains("HA-managed")),
        "{}",
        run.all()
    );
}

#[test]
fn a_guest_locked_for_backup_is_skipped_with_its_lock_named() {
    let mut vm = app_vm(310, "app");
    vm["lock"] = json!("backup");
    let pve = FakePve::start(&seed_with(vec![vm])).unwrap();
    // The manifest wants more memory: an update PVE would refuse.
    let repo = app_repo(
        &pve,
        &app_manifest(310, "app", "", "").replace("512MiB", "1GiB"),
    );

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert!(writes(&pve).is_empty(), "{:?}\n{}", writes(&pve), run.all());
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("VM/app") && l.contains("locked (backup)")),
        "{}",
        run.all()
    );
}

#[test]
fn a_replicated_orphan_is_never_stopped_without_purge_and_purged_with_it() {
    // qemu-server `API2/Qemu.pm` `destroy_vm`: a guest with replication
    // jobs is destroyed only with `purge` (pve-guest-common
    // `ReplicationConfig.pm` `check_for_existing_jobs`); the launcher's
    // replication model refuses the same way.
    let mut seed = seed_with(vec![app_vm(310, "app"), app_vm(330, "old")]);
    seed["nodes"] = json!(["pve2"]);
    seed["replication"] = json!([{"id": "330-0", "target": "pve2"}]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = app_repo(&pve, &app_manifest(310, "app", "", ""));

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert!(writes(&pve).is_empty(), "{:?}\n{}", writes(&pve), run.all());
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("needs_person") && l.contains("replication job(s) 330-0")),
        "{}",
        run.all()
    );

    repo.set_reconcile("purge-ha-and-replicated", "true");
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    let sent = pve.requests().unwrap();
    assert!(
        sent.iter()
            .any(|(m, p, _)| m == "DELETE" && p.ends_with("/qemu/330")),
        "{sent:?}\n{}",
        run.all()
    );
    // The launcher destroys a replicated guest only with purge=1, which
    // removes its jobs (fakepve keeps no query string to show).
    let jobs = pve_get(&pve, "/cluster/replication");
    assert_eq!(jobs, json!([]));
}

#[test]
fn an_ha_guests_stop_start_change_goes_through_the_ha_manager() {
    // The guest's power is the HA manager's: PVE's own tools ask it
    // (`PUT /cluster/ha/resources/{sid}` `state`), and ProxOps waits on
    // `/cluster/ha/status/current` until it reports the state.
    let mut seed = seed_with(vec![app_vm(310, "app")]);
    seed["ha_resources"] = json!([{"sid": "vm:310", "state": "started"}]);
    let pve = FakePve::start(&seed).unwrap();
    let more = app_manifest(310, "app", "", "").replace("512MiB", "1GiB");
    let repo = app_repo(&pve, &more);

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    let sent = pve.requests().unwrap();
    let ha: Vec<String> = sent
        .iter()
        .filter(|(m, p, _)| m == "PUT" && p.contains("/cluster/ha/resources/"))
        .map(|(_, _, b)| b.clone())
        .collect();
    assert_eq!(ha, ["state=stopped", "state=started"], "{}", run.all());
    assert!(
        !sent.iter().any(|(_, p, _)| p.ends_with("/status/shutdown")),
        "{sent:?}"
    );
    assert!(
        sent.iter()
            .filter(|(_, p, _)| p.ends_with("/cluster/ha/status/current"))
            .count()
            >= 2
    );
    let diff = proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(diff.code, 0, "{}", diff.all());
}

/// `spec.balloon` converges: written once into the config, then nothing to
/// do. (A stopped VM: fakepve keeps every key but a few pending on a
/// running VM, where qemu-server's `vmconfig_hotplug_pending` applies a
/// new balloon target at once.)
#[test]
fn a_balloon_target_converges() {
    let mut vm = app_vm(330, "app");
    vm["status"] = json!("stopped");
    vm["config"]["memory"] = json!(1024);
    let pve = FakePve::start(&seed_with(vec![vm])).unwrap();
    let manifest = app_manifest(330, "app", "", "  state: stopped\n  balloon: 512MiB\n")
        .replace("memory: 512MiB", "memory: 1GiB");
    let repo = app_repo(&pve, &manifest);

    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        writes(&pve),
        vec![(
            "POST".to_owned(),
            "/api2/json/nodes/pve1/qemu/330/config".to_owned()
        )],
        "{}",
        run.all()
    );
    let config = pve_get(&pve, "/nodes/pve1/qemu/330/config");
    assert_eq!(config["balloon"].to_string().trim_matches('"'), "512");
    let diff = proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(diff.code, 0, "{}", diff.all());

    // A target above the memory is refused before anything is read.
    repo.write(
        "vm/home/app.yaml",
        &manifest.replace("balloon: 512MiB", "balloon: 2GiB"),
    );
    let refused = proxops(&pve, &repo, &["validate"]);
    assert_eq!(refused.code, 2, "{}", refused.all());
    assert!(
        refused.all().contains("vm/home/app.yaml:")
            && refused.all().contains("spec.balloon")
            && refused.all().contains("balloon 2GiB is above memory 1GiB"),
        "{}",
        refused.all()
    );
}

/// `GET path`'s `data` from fakepve, as the configured token.
fn pve_get(pve: &FakePve, path: &str) -> Value {
    use proxops_pve::transport::{Request, Transport};
    let t = proxops_pve::live::LiveTransport::new(pve.live_config()).unwrap();
    t.call(&Request::get(path)).unwrap().data().clone()
}
