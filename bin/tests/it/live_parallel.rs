//! Actions at once, end to end against fakepve: a stop-start change rolls
//! through a disruption group never more than its budget at a time, and a
//! failed clone defers only what depends on it while independent branches
//! finish.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::transport::{Request, Transport};
use serde_json::{Value, json};

fn read(pve: &FakePve, path: &str) -> Result<Value, String> {
    let t = LiveTransport::new(pve.live_config()).unwrap();
    t.call(&Request::get(path))
        .map_err(|e| e.to_string())
        .and_then(|r| {
            if r.is_success() {
                Ok(r.data().clone())
            } else {
                Err(format!("HTTP {}", r.status))
            }
        })
}

fn vm_manifest(name: &str, vmid: u32, node: &str, extra_meta: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\n{extra_meta}spec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 4GiB\n  networks:\n    - bridge: vmbr0\n{extra_spec}"
    )
}

/// The most guests of `vmids` between their `status/shutdown` and their
/// `status/start` at any point of the request log.
fn most_down_at_once(requests: &[(String, String, String)], vmids: &[u32]) -> (usize, usize) {
    let mut down = std::collections::BTreeSet::new();
    let (mut most, mut shutdowns) = (0, 0);
    for (m, p, _) in requests {
        if m != "POST" {
            continue;
        }
        for v in vmids {
            if p.ends_with(&format!("/qemu/{v}/status/shutdown")) {
                down.insert(*v);
                shutdowns += 1;
            } else if p.ends_with(&format!("/qemu/{v}/status/start")) {
                down.remove(v);
            }
        }
        most = most.max(down.len());
    }
    (most, shutdowns)
}

#[test]
fn a_stop_start_change_rolls_through_a_disruption_group_within_its_budget_and_converges() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let vmids: Vec<u32> = (160..166).collect();
    let mut resources = Vec::new();
    for (i, v) in vmids.iter().enumerate() {
        let name = format!("db-{i}");
        let node = if i % 2 == 0 { "pve1" } else { "pve2" };
        let meta = "  annotations:\n    proxops/disruption-group: db\n";
        repo.write(
            &format!("vm/roll/{name}.yaml"),
            &vm_manifest(&name, *v, node, meta, ""),
        );
        resources.push(format!("../../vm/roll/{name}.yaml"));
    }
    let refs: Vec<&str> = resources.iter().map(String::as_str).collect();
    repo.set_resources(&refs);
    // Room for many at once: only the group's budget holds them back.
    repo.set_reconcile("tasks-per-node", "8");
    repo.set_reconcile("tasks-per-cluster", "8");
    repo.set_reconcile("disruption-budget", "6");
    repo.set_reconcile("disruption-groups", "{db: 2}");
    let created = apply(&pve, &repo, &[]);
    assert_eq!(created.code, 0, "{}", created.all());

    // Every guest takes a while to shut down, so shutdowns overlap when
    // nothing holds them back.
    pve.settings(json!({"time_scale": 0.01})).unwrap();
    for v in &vmids {
        pve.set_guest(*v, json!({"shutdown_secs": 20, "start_secs": 5}))
            .unwrap();
    }
    for i in 0..vmids.len() {
        let p = repo.path().join(format!("vm/roll/db-{i}.yaml"));
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.replace("memory: 1GiB", "memory: 2GiB")).unwrap();
    }
    let plan = proxops(&pve, &repo, &["diff"]);
    assert!(
        plan.stdout
            .contains("Rollout: 6 stop-start updates (2 guest(s) unavailable at once: 3 turns)")
            && plan.stdout.contains("group db: 6, 2 at a time"),
        "{}",
        plan.all()
    );
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    let (most, shutdowns) = most_down_at_once(&pve.requests().unwrap(), &vmids);
    assert_eq!(shutdowns, 6, "{}", run.all());
    assert!(
        (1..=2).contains(&most),
        "{most} guests of group db down at once, budget 2"
    );
    for (i, v) in vmids.iter().enumerate() {
        let node = if i % 2 == 0 { "pve1" } else { "pve2" };
        let cfg = read(&pve, &format!("/nodes/{node}/qemu/{v}/config")).unwrap();
        assert_eq!(cfg["memory"].as_str().unwrap_or_default(), "2048");
        let cur = read(&pve, &format!("/nodes/{node}/qemu/{v}/status/current")).unwrap();
        assert_eq!(cur["status"], "running");
    }
    // Progress lines name the worker and how many run at once.
    assert!(
        run.stderr.contains(", worker ") && run.stderr.contains(" running)"),
        "{}",
        run.stderr
    );
    let again = proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(again.code, 0, "converged:\n{}", again.all());
}

#[test]
fn restarts_that_fail_pause_the_rollout_with_one_guest_down_at_most() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let vmids: Vec<u32> = (170..174).collect();
    let mut resources = Vec::new();
    for (i, v) in vmids.iter().enumerate() {
        let name = format!("web-{i}");
        repo.write(
            &format!("vm/roll/{name}.yaml"),
            &vm_manifest(&name, *v, "pve1", "", ""),
        );
        resources.push(format!("../../vm/roll/{name}.yaml"));
    }
    let refs: Vec<&str> = resources.iter().map(String::as_str).collect();
    repo.set_resources(&refs);
    repo.set_reconcile("tasks-per-node", "8");
    repo.set_reconcile("tasks-per-cluster", "8");
    let created = apply(&pve, &repo, &[]);
    assert_eq!(created.code, 0, "{}", created.all());

    // The attack: every restart fails. Before, each failure freed the
    // budget of 1 and the next guest went down too: 4 down at once.
    for v in &vmids {
        pve.set_guest(
            *v,
            json!({"start_error": "start failed: QEMU exited with code 1"}),
        )
        .unwrap();
    }
    for i in 0..vmids.len() {
        let p = repo.path().join(format!("vm/roll/web-{i}.yaml"));
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, text.replace("memory: 1GiB", "memory: 2GiB")).unwrap();
    }
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 1, "{}", run.all());
    let (most, shutdowns) = most_down_at_once(&pve.requests().unwrap(), &vmids);
    assert_eq!((most, shutdowns), (1, 1), "{}", run.all());
    assert!(
        run.all()
            .contains("the rollout paused after update VM/web-"),
        "{}",
        run.all()
    );
    let running = vmids
        .iter()
        .filter(|v| {
            read(&pve, &format!("/nodes/pve1/qemu/{v}/status/current")).unwrap()["status"]
                == "running"
        })
        .count();
    assert_eq!(running, 3, "one guest left down, the others untouched");
}

/// Clones of one template run side by side: PVE takes only a shared lock on
/// a clone source that is not running (every template), and an exclusive one
/// on the new vmid (qemu-server `PVE/API2/Qemu.pm`, `clone_vm`:
/// `lock_config_shared` for the source, `lock_config_full` for the target).
#[test]
fn a_failed_clone_defers_its_dependants_while_independent_branches_finish() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let template = |name: &str, vmid: u32| {
        vm_manifest(name, vmid, "pve1", "", "")
            .replace("kind: VM\n", "kind: TemplateVM\n")
            .replace("  memory: 1GiB\n", "  memory: 1GiB\n  tags: [template]\n")
    };
    repo.write("templatevm/par/ta.yaml", &template("ta", 9001));
    repo.write("templatevm/par/tb.yaml", &template("tb", 9002));
    let clone = |name: &str, vmid: u32, from: &str, meta: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\n{meta}spec:\n  node: pve1\n  vmid: {vmid}\n  clone: {from}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  networks:\n    - bridge: vmbr0\n"
        )
    };
    repo.write("vm/par/a1.yaml", &clone("a1", 171, "ta", ""));
    repo.write("vm/par/b1.yaml", &clone("b1", 173, "tb", ""));
    repo.write(
        "vm/par/c.yaml",
        &vm_manifest(
            "c",
            172,
            "pve1",
            "  annotations:\n    proxops/depends-on: VM:a1\n",
            "",
        ),
    );
    repo.write("vm/par/d.yaml", &vm_manifest("d", 174, "pve2", "", ""));
    repo.set_resources(&[
        "../../templatevm/par/ta.yaml",
        "../../templatevm/par/tb.yaml",
        "../../vm/par/a1.yaml",
        "../../vm/par/b1.yaml",
        "../../vm/par/c.yaml",
        "../../vm/par/d.yaml",
    ]);
    pve.call(
        "fail",
        json!(["POST", "/nodes/pve1/qemu/9001/clone"]),
        json!({"error": "clone_failed"}),
    )
    .unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 1, "{}", run.all());
    // The branch of ta: a1's clone failed, c (depends on a1) never created.
    assert!(read(&pve, "/nodes/pve1/qemu/171/config").is_err());
    assert!(read(&pve, "/nodes/pve1/qemu/172/config").is_err());
    assert!(
        !pve.requests().unwrap().iter().any(|(m, p, b)| m == "POST"
            && p.ends_with("/nodes/pve1/qemu")
            && b.contains("vmid=172")),
        "c's create was never sent"
    );
    assert!(
        run.stdout.contains("prerequisite VM/a1 failed this cycle"),
        "{}",
        run.all()
    );
    // The independent branches finished: tb's clone b1, and d.
    let b1 = read(&pve, "/nodes/pve1/qemu/173/status/current").unwrap();
    assert_eq!(b1["status"], "running", "{}", run.all());
    let d = read(&pve, "/nodes/pve2/qemu/174/status/current").unwrap();
    assert_eq!(d["status"], "running", "{}", run.all());
    assert!(run.stdout.contains(" 1 failed, "), "{}", run.all());
}
