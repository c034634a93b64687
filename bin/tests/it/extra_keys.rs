//! `spec.extra` against the real binary: an API control parameter is
//! refused before any request reaches PVE, and a host-level key passes only
//! where the cluster's configuration lists it in `allow-extra-keys`.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::json;

const MONITORING: &str = "vm/base/monitoring.yaml";

/// The demo's monitoring VM (150) with this `extra` block.
fn monitoring_with(repo: &Repo, extra: &str) {
    let demo = workspace_root()
        .join("fixtures/repos/demo")
        .join(MONITORING);
    let text = std::fs::read_to_string(demo).unwrap();
    std::fs::write(
        repo.path().join(MONITORING),
        format!("{text}  extra:\n{extra}"),
    )
    .unwrap();
}

/// fakepve already holds VM 150 as the demo declares it, disk included.
fn seed_with_monitoring() -> serde_json::Value {
    let mut seed = empty_seed();
    seed["guests"] = json!([{
        "vmid": 150, "name": "monitoring", "node": "pve1", "status": "running",
        "config": {
            "memory": "1024", "cpu": "host", "cores": 1, "tags": "monitoring;proxops",
            "scsi0": "local-lvm:vm-150-disk-0,size=20G",
            "net0": "virtio=BC:24:11:00:01:50,bridge=vmbr0"
        }
    }]);
    seed
}

#[test]
fn extra_delete_is_refused_with_exit_2_before_any_pve_request() {
    let pve = FakePve::start(&seed_with_monitoring()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    monitoring_with(&repo, "    delete: scsi0\n");

    pve.forget_requests().unwrap();
    for args in [&["apply", "--yes"][..], &["diff"][..]] {
        let run = proxops(&pve, &repo, args);
        assert_eq!(run.code, 2, "{args:?}\n{}", run.all());
        let line = run
            .stderr
            .lines()
            .find(|l| l.contains("spec.extra.delete"))
            .unwrap_or_else(|| panic!("{args:?}: no diagnostic\n{}", run.all()));
        assert!(
            line.contains(&format!("{MONITORING}:19:")) && line.contains("API control parameter"),
            "{line}"
        );
    }
    assert_eq!(pve.requests().unwrap(), vec![], "no request may reach PVE");
}

#[test]
fn allow_extra_keys_lets_a_host_level_key_through_but_never_a_control_parameter() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    monitoring_with(&repo, "    args: -cpu host,+invtsc\n");

    let refused = proxops(&pve, &repo, &["validate"]);
    assert_eq!(refused.code, 2, "{}", refused.all());
    assert!(
        refused
            .stderr
            .contains("spec.extra.args: key \"args\" is host-level")
            && refused
                .stderr
                .contains("pve.clusters.home.allow-extra-keys"),
        "{}",
        refused.all()
    );

    let config = repo.path().join("clusters/home/config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("      allow-extra-keys: [args, skiplock]\n");
    std::fs::write(&config, text).unwrap();
    let allowed = proxops(&pve, &repo, &["validate"]);
    assert_eq!(allowed.code, 0, "{}", allowed.all());

    monitoring_with(&repo, "    args: -cpu host,+invtsc\n    skiplock: \"1\"\n");
    let control = proxops(&pve, &repo, &["validate"]);
    assert_eq!(control.code, 2, "{}", control.all());
    assert!(
        control.stderr.contains("spec.extra.skiplock")
            && control.stderr.contains("stays refused although")
            && !control.stderr.contains("spec.extra.args"),
        "{}",
        control.all()
    );
}
