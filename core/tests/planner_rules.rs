//! The planner's rules, one behaviour per test (spec §13, with the
//! additions documented in core/src/plan.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proxops_core::action::{AnomalyType, Impact, Op, SkipReason, Work};
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::live::{
    GuestType, LiveConfig, LiveGuest, LiveSnapshot, NodeState, Power, ReadFailure, StorageContent,
};
use proxops_core::names::{Kind, NodeName, StorageId, Vmid};
use proxops_core::plan::{Plan, Policy};
use proxops_core::planner::plan;
use proxops_core::repo::ClusterDesired;
use proxops_core::wire::TagSet;
use support::fixture::cluster;

const VM: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";
const VM_STOPPED: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  state: stopped\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";
const VM_KEEP: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n  annotations:\n    proxops/prune: disabled\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";
const TEMPLATE: &str = "apiVersion: proxops/v1alpha1\nkind: TemplateVM\nmetadata:\n  name: tmpl\nspec:\n  node: pve1\n  vmid: 9000\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";
const CT: &str = "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct\nspec:\n  node: pve1\n  vmid: 200\n  template: debian-ct\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n";

fn node(n: &str) -> NodeName {
    NodeName::new(n).unwrap()
}

fn snapshot() -> LiveSnapshot {
    let mut s = LiveSnapshot::default();
    s.nodes.insert(node("pve1"), NodeState::Online);
    s.nodes.insert(node("pve2"), NodeState::Online);
    let listing = serde_json::json!([
        {"volid": "local:iso/debian-13.iso", "content": "iso"},
        {"volid": "local:import/debian-13.qcow2", "content": "import"},
        {"volid": "local:vztmpl/debian-13-standard.tar.zst", "content": "vztmpl"}
    ]);
    s.storage.insert(
        (node("pve1"), StorageId::new("local").unwrap()),
        Ok(StorageContent::from_json(&listing).unwrap()),
    );
    s
}

fn vm_config(vmid: u32, memory: &str, tags: &str, template: bool) -> LiveConfig {
    LiveConfig::from_json(&serde_json::json!({
        "name": "web", "memory": memory, "cpu": "host", "cores": 1,
        "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=8G"),
        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        "tags": tags, "template": u8::from(template), "digest": "d1",
    }))
    .unwrap()
}

#[allow(clippy::too_many_arguments)] // one call per seeded guest reads best flat
fn add(
    s: &mut LiveSnapshot,
    n: &str,
    vmid: u32,
    power: Power,
    template: bool,
    cfg: Result<LiveConfig, ReadFailure>,
    tags: &str,
    name: &str,
) {
    s.guests.insert(
        (node(n), Vmid::new(vmid as u64).unwrap()),
        LiveGuest {
            node: node(n),
            vmid: Vmid::new(vmid as u64).unwrap(),
            guest_type: GuestType::Qemu,
            name: name.into(),
            template,
            power,
            lock: None,
            ha_state: None,
            tags: TagSet::parse(tags).unwrap(),
            config: cfg,
        },
    );
}

/// A running, readable VM on pve1 carrying `tags` in its listing and config.
fn add_running(s: &mut LiveSnapshot, vmid: u32, tags: &str, name: &str) {
    add(
        s,
        "pve1",
        vmid,
        Power::Running,
        false,
        Ok(vm_config(vmid, "1024", tags, false)),
        tags,
        name,
    );
}

fn run(c: &ClusterDesired, s: &LiveSnapshot, budget: u32) -> Plan {
    run_with(c, s, budget, false)
}

fn run_with(c: &ClusterDesired, s: &LiveSnapshot, budget: u32, allow_empty_prune: bool) -> Plan {
    let secrets = CloudInitSecrets::default();
    plan(
        c,
        s,
        &Context {
            cluster: c,
            secrets: &secrets,
        },
        &Policy {
            prune_budget: budget,
            nodes: Default::default(),
            allow_empty_prune,
            ..Default::default()
        },
    )
}

#[test]
fn prune_disabled_annotation_is_written_as_a_tag_at_create() {
    let c = cluster(&[VM_KEEP]);
    let p = run(&c, &snapshot(), 3);
    let create = p.actions.iter().find(|a| a.op == Op::Create).unwrap();
    let Work::CreateGuest { params, .. } = &create.work else {
        panic!()
    };
    assert_eq!(
        params.get("tags").map(|v| v.expose()),
        Some("proxops;proxops-noprune")
    );
}

#[test]
fn a_guest_tagged_noprune_is_never_pruned_after_its_manifest_is_gone() {
    let c = cluster(&[]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve1",
        100,
        Power::Running,
        false,
        Ok(vm_config(100, "1024", "proxops;proxops-noprune", false)),
        "proxops;proxops-noprune",
        "web",
    );
    let p = run(&c, &s, 0);
    assert!(p.actions.iter().all(|a| a.op != Op::Prune));
    assert!(p.deferred.is_empty());
    assert!(
        p.skipped
            .iter()
            .any(|k| k.reason == SkipReason::PruneProtected)
    );
}

#[test]
fn a_guest_found_on_another_node_is_claimed_not_created_twice() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve2",
        100,
        Power::Running,
        false,
        Ok(vm_config(100, "1024", "proxops", false)),
        "proxops",
        "web",
    );
    let p = run(&c, &s, 3);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.message.contains("exists on node pve2"))
    );
}

#[test]
fn nothing_is_planned_for_an_offline_node() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    s.nodes.insert(node("pve1"), NodeState::Offline);
    let p = run(&c, &s, 3);
    assert!(
        p.actions.iter().all(|a| a.node.as_str() != "pve1"),
        "{:?}",
        p.actions
    );
    assert!(
        p.skipped
            .iter()
            .any(|k| k.name == "web" && matches!(k.reason, SkipReason::NodeOffline { .. }))
    );
}

#[test]
fn an_unreadable_config_aborts_the_cluster_for_this_cycle() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    let fail = || {
        Err(ReadFailure {
            what: "GET /nodes/pve1/qemu/101/config".into(),
            message: "500 boom".into(),
        })
    };
    add(
        &mut s,
        "pve1",
        101,
        Power::Running,
        false,
        fail(),
        "proxops",
        "orphan",
    );
    let p = run(&c, &s, 0);
    assert!(p.is_aborted());
    assert!(
        p.actions.is_empty() && p.deferred.is_empty(),
        "{:?}",
        p.actions
    );
    assert!(
        p.abort_reason()
            .unwrap()
            .starts_with("pve inventory read failed: GET /nodes/pve1/qemu/101/config")
    );
}

#[test]
fn guests_on_an_offline_node_do_not_stop_the_other_nodes() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    s.nodes.insert(node("pve2"), NodeState::Offline);
    let fail = || {
        Err(ReadFailure {
            what: "GET /nodes/pve2/qemu/300/config".into(),
            message: "595".into(),
        })
    };
    add(
        &mut s,
        "pve2",
        300,
        Power::Unknown,
        false,
        fail(),
        "proxops",
        "far",
    );
    let p = run(&c, &s, 3);
    assert!(!p.is_aborted());
    assert_eq!(
        p.actions.iter().map(|a| a.op).collect::<Vec<_>>(),
        vec![Op::Create]
    );
}

#[test]
fn a_container_create_waits_when_its_template_presence_is_unknown() {
    let c = cluster(&[CT]);
    let mut s = snapshot();
    s.storage.insert(
        (node("pve1"), StorageId::new("local").unwrap()),
        Err(ReadFailure {
            what: "GET content".into(),
            message: "500".into(),
        }),
    );
    let p = run(&c, &s, 3);
    assert!(
        p.actions.iter().all(|a| a.op != Op::Create),
        "{:?}",
        p.actions
    );
    assert!(p.skipped.iter().any(|k| k.name == "ct"
        && matches!(
            k.reason,
            SkipReason::ArtifactNotPlaced { .. } | SkipReason::ArtifactUnknown { .. }
        )));
    assert!(
        p.skipped
            .iter()
            .any(|k| matches!(k.reason, SkipReason::StorageUnreadable { .. }))
    );
}

#[test]
fn a_template_manifest_over_a_plain_guest_marks_it_stopping_first() {
    let c = cluster(&[TEMPLATE]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve1",
        9000,
        Power::Running,
        false,
        Ok(vm_config(9000, "1024", "proxops", false)),
        "proxops",
        "tmpl",
    );
    let p = run(&c, &s, 3);
    let mark = p.actions.iter().find(|a| a.op == Op::MarkTemplate).unwrap();
    assert_eq!(
        mark.work,
        Work::MarkTemplate {
            guest_type: GuestType::Qemu,
            stop_first: true,
            digest: None,
        }
    );
    assert!(
        p.actions
            .iter()
            .all(|a| a.op != Op::Start && a.op != Op::Stop)
    );
}

#[test]
fn a_vm_manifest_over_a_live_template_is_an_anomaly_only() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve1",
        100,
        Power::Stopped,
        true,
        Ok(vm_config(100, "1024", "proxops", true)),
        "proxops",
        "web",
    );
    let p = run(&c, &s, 3);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.anomaly_type() == AnomalyType::NeedsPerson
                && a.field.as_deref() == Some("template"))
    );
}

#[test]
fn drift_on_a_guest_that_should_stop_is_written_after_stopping_without_restart() {
    let c = cluster(&[VM_STOPPED]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve1",
        100,
        Power::Running,
        false,
        Ok(vm_config(100, "1024", "proxops", false)),
        "proxops",
        "web",
    );
    let p = run(&c, &s, 3);
    assert_eq!(p.actions.len(), 1, "{:?}", p.actions);
    let a = &p.actions[0];
    assert_eq!(a.impact, Impact::StopStart);
    let Work::UpdateConfig {
        stop_first,
        restart_after,
        digest,
        ..
    } = &a.work
    else {
        panic!()
    };
    assert!(*stop_first && !*restart_after);
    assert_eq!(
        digest.as_deref(),
        Some("d1"),
        "the update carries the digest read with the config"
    );
}

#[test]
fn a_stopped_guest_that_should_run_is_updated_live_then_started() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve1",
        100,
        Power::Stopped,
        false,
        Ok(vm_config(100, "512", "proxops", false)),
        "proxops",
        "web",
    );
    let p = run(&c, &s, 3);
    let ops: Vec<(Op, Impact)> = p.actions.iter().map(|a| (a.op, a.impact)).collect();
    assert_eq!(
        ops,
        vec![(Op::Update, Impact::Live), (Op::Start, Impact::Live)]
    );
}

#[test]
fn empty_desired_guard_with_unlimited_budget_trips_on_any_orphan() {
    let c = cluster(&[CT]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve1",
        300,
        Power::Stopped,
        false,
        Ok(vm_config(300, "1024", "proxops", false)),
        "proxops",
        "old",
    );
    let p = run(&c, &s, 0);
    assert!(p.actions.iter().all(|a| a.op != Op::Prune));
    assert_eq!(p.deferred.len(), 1);
    assert!(p.anomalies.iter().any(
        |a| a.anomaly_type() == AnomalyType::EmptyDesired && a.message.contains("0 desired VM")
    ));
}

/// Two running proxops-tagged VMs, 300 and 301, and nothing else.
fn two_tagged_vms() -> LiveSnapshot {
    let mut s = snapshot();
    for (vmid, name) in [(300, "old-a"), (301, "old-b")] {
        add_running(&mut s, vmid, "proxops", name);
    }
    s
}

#[test]
fn an_emptied_composition_prunes_nothing_whatever_the_budget() {
    let c = cluster(&[]);
    for budget in [0, 1, 2, 3, 100] {
        let p = run(&c, &two_tagged_vms(), budget);
        assert!(
            p.actions.iter().all(|a| a.op != Op::Prune),
            "budget {budget}: {:?}",
            p.actions
        );
        assert_eq!(p.deferred.len(), 2, "budget {budget}");
        assert!(
            p.deferred
                .iter()
                .all(|a| a.reason.contains("empty-desired guard"))
        );
        let guard: Vec<_> = p
            .anomalies
            .iter()
            .filter(|a| a.anomaly_type() == AnomalyType::EmptyDesired)
            .collect();
        assert_eq!(guard.len(), 1, "budget {budget}: {:?}", p.anomalies);
        assert_eq!(guard[0].kind, Some(Kind::VM));
        assert!(guard[0].message.contains("0 desired VM but 2"));
        assert!(guard[0].message.contains("allow-empty-prune: true"));
    }
}

#[test]
fn a_kind_with_no_manifest_is_held_even_when_other_kinds_remain() {
    // Only a container is left: the tagged VM of the emptied kind stays,
    // though one prune is well within the budget.
    let c = cluster(&[CT]);
    let mut s = snapshot();
    add_running(&mut s, 300, "proxops", "old");
    let p = run(&c, &s, 3);
    assert!(p.actions.iter().all(|a| a.op != Op::Prune));
    assert_eq!(p.deferred.len(), 1);
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.anomaly_type() == AnomalyType::EmptyDesired && a.kind == Some(Kind::VM))
    );
}

#[test]
fn allow_empty_prune_prunes_an_emptied_kind_within_the_budget() {
    let c = cluster(&[]);
    let p = run_with(&c, &two_tagged_vms(), 1, true);
    let prunes: Vec<_> = p.actions.iter().filter(|a| a.op == Op::Prune).collect();
    assert_eq!(prunes.len(), 1, "{:?}", p.actions);
    assert_eq!(prunes[0].target.to_string(), "300");
    assert_eq!(
        prunes[0].work,
        Work::Delete {
            guest_type: GuestType::Qemu,
            stop_first: true,
            purge: false,
            digest: Some("d1".into()),
        }
    );
    assert_eq!(p.deferred.len(), 1);
    assert!(p.deferred[0].reason.contains("prune budget of 1"));
    assert!(
        p.anomalies
            .iter()
            .all(|a| a.anomaly_type() != AnomalyType::EmptyDesired)
    );
    let all = run_with(&c, &two_tagged_vms(), 0, true);
    assert_eq!(all.actions.iter().filter(|a| a.op == Op::Prune).count(), 2);
}

#[test]
fn a_mixed_case_noprune_tag_protects_as_pve_matches_tags() {
    let c = cluster(&[]);
    let mut s = snapshot();
    add_running(&mut s, 300, "proxops;Proxops-NoPrune", "keep");
    let p = run_with(&c, &s, 0, true);
    assert!(p.actions.is_empty() && p.deferred.is_empty(), "{p:?}");
    assert!(
        p.skipped
            .iter()
            .any(|k| k.id.to_string() == "300" && k.reason == SkipReason::PruneProtected)
    );
}

#[test]
fn under_a_case_sensitive_tag_style_only_proxops_as_written_owns_a_guest() {
    // Under PVE's case-sensitive tag-style `PROXOPS` and `Proxops` are
    // tags of their own, which ProxOps never wrote: the guest is not
    // ProxOps'. Under the default style PVE itself takes them for
    // `proxops` (and stores every tag lower-cased).
    let mut c = cluster(&[]);
    c.tag_case_sensitive = true;
    for tag in ["PROXOPS", "Proxops"] {
        let mut s = snapshot();
        add_running(&mut s, 300, tag, "old");
        let p = run_with(&c, &s, 0, true);
        assert!(
            p.actions.is_empty() && p.deferred.is_empty(),
            "{tag}: {p:?}"
        );
        assert!(
            p.skipped
                .iter()
                .any(|k| k.id.to_string() == "300" && k.reason.is_untagged()),
            "{tag}: {p:?}"
        );
        c.tag_case_sensitive = false;
        let p = run_with(&c, &s, 0, true);
        assert_eq!(p.actions.iter().filter(|a| a.op == Op::Prune).count(), 1);
        c.tag_case_sensitive = true;
    }
    let mut s = snapshot();
    add_running(&mut s, 300, "proxops", "old");
    let p = run_with(&c, &s, 0, true);
    assert_eq!(p.actions.iter().filter(|a| a.op == Op::Prune).count(), 1);
}

#[test]
fn a_manifest_never_takes_over_an_untagged_guest_at_its_vmid() {
    let c = cluster(&[VM]);
    for tags in ["", "pveconform", "prod;web"] {
        let mut s = snapshot();
        add(
            &mut s,
            "pve1",
            100,
            Power::Running,
            false,
            Ok(vm_config(100, "4096", tags, false)),
            tags,
            "hand-made",
        );
        let p = run(&c, &s, 3);
        assert!(p.actions.is_empty(), "{tags}: {:?}", p.actions);
        assert!(p.deferred.is_empty());
        let a = p
            .anomalies
            .iter()
            .find(|a| a.message.contains("does not own"))
            .unwrap_or_else(|| panic!("{tags}: {:?}", p.anomalies));
        assert_eq!(a.anomaly_type(), AnomalyType::NeedsPerson);
        assert_eq!((a.kind, a.name.as_deref()), (Some(Kind::VM), Some("web")));
        for part in ["vmid 100", "\"hand-made\"", "node pve1", "proxops adopt"] {
            assert!(a.message.contains(part), "{part}: {}", a.message);
        }
    }
}

#[test]
fn a_manifest_never_creates_over_an_untagged_guest_on_another_node() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve2",
        100,
        Power::Stopped,
        false,
        Ok(vm_config(100, "1024", "", false)),
        "",
        "hand-made",
    );
    let p = run(&c, &s, 3);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.message.contains("node pve2") && a.message.contains("does not own"))
    );
}

const VM_ADOPTED: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n  annotations:\n    proxops/adopted-vmid: \"100\"\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";

/// [`VM_ADOPTED`] with the guest's own tags, as `adopt` writes it.
fn adopted_with_tags(tags: &str) -> String {
    format!("{VM_ADOPTED}  tags: [{tags}]\n")
}

#[test]
fn an_adopted_manifest_claims_its_untagged_guest_by_adding_the_tag_to_its_own() {
    let doc = adopted_with_tags("web, prod");
    let c = cluster(&[&doc]);
    let mut s = snapshot();
    add_running(&mut s, 100, "prod;web", "web");
    let p = run(&c, &s, 3);
    assert!(p.anomalies.is_empty(), "{:?}", p.anomalies);
    assert_eq!(p.actions.len(), 1, "{:?}", p.actions);
    let claim = &p.actions[0];
    assert_eq!((claim.op, claim.impact), (Op::Update, Impact::Live));
    assert_eq!(claim.changes.len(), 1, "{:?}", claim.changes);
    assert_eq!(claim.changes[0].to.as_deref(), Some("prod;proxops;web"));
    let Work::UpdateConfig {
        params,
        delete,
        stop_first,
        restart_after,
        ..
    } = &claim.work
    else {
        panic!("{:?}", claim.work);
    };
    assert_eq!(params.0.len(), 1);
    assert_eq!(params.get("tags").unwrap().expose(), "prod;proxops;web");
    assert!(delete.is_empty() && !stop_first && !restart_after);
}

#[test]
fn a_hand_written_claim_that_is_not_the_guest_as_adopt_wrote_it_writes_nothing() {
    // Another name, fewer tags, a stop-start change to the running guest:
    // the attack claimed the guest, dropped its tags, and the next apply
    // shut it down and renamed it.
    let renamed = adopted_with_tags("web").replace("  name: web\n", "  name: takeover\n");
    for (doc, memory, differ) in [
        (adopted_with_tags("web, payroll"), "4096", "memory"),
        (adopted_with_tags("web"), "1024", "tags"),
        (
            renamed.replace("tags: [web]", "tags: [web, payroll]"),
            "1024",
            "name",
        ),
    ] {
        let c = cluster(&[&doc]);
        let mut s = snapshot();
        add(
            &mut s,
            "pve1",
            100,
            Power::Running,
            false,
            Ok(vm_config(100, memory, "web;payroll", false)),
            "web;payroll",
            "web",
        );
        let p = run(&c, &s, 3);
        assert!(p.actions.is_empty(), "{differ}: {:?}", p.actions);
        let a = p
            .anomalies
            .iter()
            .find(|a| {
                a.message
                    .contains("not that guest as `proxops adopt` wrote it")
            })
            .unwrap_or_else(|| panic!("{differ}: {:?}", p.anomalies));
        assert!(a.message.contains(differ), "{differ}: {}", a.message);
        assert!(a.message.contains("nothing is written"), "{}", a.message);
    }
}

#[test]
fn a_renumbered_manifest_reports_the_old_guest_and_never_prunes_it() {
    // VM/web moved from vmid 100 to 105: the tagged guest at 100 still
    // carries its name.
    let renumbered = VM.replace("vmid: 100", "vmid: 105");
    let c = cluster(&[renumbered.as_str()]);
    let mut s = snapshot();
    add_running(&mut s, 100, "proxops", "web");
    for budget in [0, 3] {
        let p = run_with(&c, &s, budget, true);
        assert!(
            p.actions.iter().all(|a| a.target.to_string() != "100"),
            "{:?}",
            p.actions
        );
        assert!(p.deferred.is_empty());
        let a = p
            .anomalies
            .iter()
            .find(|a| a.id.as_ref().is_some_and(|id| id.to_string() == "100"))
            .unwrap_or_else(|| panic!("{:?}", p.anomalies));
        assert_eq!(a.anomaly_type(), AnomalyType::NeedsPerson);
        assert!(
            a.message
                .contains("renumbered manifest leaves the old guest")
        );
        assert!(a.message.contains("VM/web") && a.message.contains("vmid 105"));
    }
}

#[test]
fn pveconform_tag_alone_is_treated_as_untagged() {
    let c = cluster(&[]);
    let mut s = snapshot();
    add_running(&mut s, 300, "pveconform", "legacy");
    let p = run(&c, &s, 0);
    assert!(p.actions.is_empty() && p.deferred.is_empty());
    assert!(
        p.skipped
            .iter()
            .any(|k| k.reason == SkipReason::Untagged { legacy: true })
    );
}

const CLONE: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  clone: tmpl\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n";

fn clone_source(p: &Plan) -> Option<(Vmid, NodeName)> {
    p.actions.iter().find_map(|a| match &a.work {
        Work::CloneGuest {
            source,
            source_node,
            ..
        } => Some((*source, source_node.clone())),
        _ => None,
    })
}

#[test]
fn a_clone_of_a_template_made_in_the_same_plan_is_sent_to_the_template_node() {
    let c = cluster(&[TEMPLATE, CLONE]);
    let p = run(&c, &snapshot(), 3);
    assert_eq!(
        clone_source(&p),
        Some((Vmid::new(9000).unwrap(), node("pve1"))),
        "{:#?}",
        p.actions
    );
}

#[test]
fn a_clone_is_sent_to_the_node_pve_has_the_template_on() {
    // The template was migrated to pve2 by hand: PVE answers a clone
    // request only on the node that holds the source.
    let c = cluster(&[TEMPLATE, CLONE]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve2",
        9000,
        Power::Stopped,
        true,
        Ok(vm_config(9000, "1024", "proxops", true)),
        "proxops",
        "tmpl",
    );
    s.shared_storage
        .insert(StorageId::new("local-lvm").unwrap(), true);
    let p = run(&c, &s, 3);
    let source = clone_source(&p);
    assert_eq!(
        source,
        Some((Vmid::new(9000).unwrap(), node("pve2"))),
        "{:#?}",
        p
    );
}

fn with_ha(s: &mut LiveSnapshot, vmid: u32, state: &str) {
    let g = s
        .guests
        .get_mut(&(node("pve1"), Vmid::new(vmid as u64).unwrap()))
        .unwrap();
    g.ha_state = Some(state.into());
}

#[test]
fn an_ha_managed_guests_stop_start_goes_through_the_ha_manager() {
    // pve-ha-manager: the HA manager owns the guest's power; PVE's own
    // `status/shutdown`/`start` of an HA guest ask it (qemu-server
    // `API2/Qemu.pm` `vm_shutdown`: `ha-manager crm-command stop`). The
    // update is written, then stopped and started through it.
    let c = cluster(&[VM]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve1",
        100,
        Power::Running,
        false,
        Ok(vm_config(100, "2048", "proxops", false)),
        "proxops",
        "web",
    );
    with_ha(&mut s, 100, "started");
    let p = run(&c, &s, 3);
    assert_eq!(p.actions.len(), 1, "{:#?}", p.actions);
    assert!(p.anomalies.is_empty(), "{:#?}", p.anomalies);
    assert!(
        matches!(
            &p.actions[0].work,
            Work::UpdateConfig { stop_first: true, restart_after: true, ha: Some(sid), .. } if sid == "vm:100"
        ),
        "{:#?}",
        p.actions[0].work
    );

    // `ignored` is not HA-managed for power (pve-ha-manager `HA/Config.pm`
    // `$service_check_ha_state`): a plain stop-start.
    with_ha(&mut s, 100, "ignored");
    let p = run(&c, &s, 3);
    assert!(
        matches!(
            &p.actions[0].work,
            Work::UpdateConfig {
                stop_first: true,
                ha: None,
                ..
            }
        ),
        "{:#?}",
        p.actions[0].work
    );
}

#[test]
fn a_replicated_orphan_is_refused_at_plan_time_unless_purge_is_allowed() {
    // qemu-server `API2/Qemu.pm` `destroy_vm` → pve-guest-common
    // `ReplicationConfig.pm` `check_for_existing_jobs`: "There is a
    // replication job …" without purge. Refused before any stop.
    let c = cluster(&[VM]);
    let mut s = snapshot();
    add_running(&mut s, 100, "proxops", "web");
    add_running(&mut s, 300, "proxops", "old");
    s.replication = proxops_core::live::Replication::from_json(&serde_json::json!([
        {"id": "300-0", "guest": 300, "target": "pve2", "type": "local"}
    ]))
    .unwrap();
    let p = run(&c, &s, 3);
    assert!(
        !p.actions.iter().any(|a| a.target.to_string() == "300"),
        "{:#?}",
        p.actions
    );
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.message.contains("replication job(s) 300-0")),
        "{:#?}",
        p.anomalies
    );
    let secrets = CloudInitSecrets::default();
    let p = plan(
        &c,
        &s,
        &Context {
            cluster: &c,
            secrets: &secrets,
        },
        &Policy {
            purge_ha_and_replicated: true,
            ..Default::default()
        },
    );
    let prune = p.actions.iter().find(|a| a.op == Op::Prune).unwrap();
    assert!(
        matches!(
            prune.work,
            Work::Delete {
                purge: true,
                stop_first: true,
                ..
            }
        ),
        "{:#?}",
        prune.work
    );
}

// qemu-server `destroy_vm`: an HA-managed guest is destroyed only with
// `purge=1`; ProxOps sends it only when the cluster opts in, and never
// stops an HA-managed guest itself.
#[test]
fn an_ha_managed_orphan_is_purged_only_by_consent_and_only_when_stopped() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    add_running(&mut s, 100, "proxops", "web");
    add(
        &mut s,
        "pve1",
        300,
        Power::Stopped,
        false,
        Ok(vm_config(300, "1024", "proxops", false)),
        "proxops",
        "gone-stopped",
    );
    add_running(&mut s, 301, "proxops", "gone-running");
    with_ha(&mut s, 300, "stopped");
    with_ha(&mut s, 301, "started");

    let p = run(&c, &s, 3);
    assert!(
        p.actions.iter().all(|a| a.op != Op::Prune),
        "{:#?}",
        p.actions
    );
    assert_eq!(
        p.anomalies
            .iter()
            .filter(|a| a.message.contains("purge"))
            .count(),
        2,
        "{:#?}",
        p.anomalies
    );

    let secrets = CloudInitSecrets::default();
    let p = plan(
        &c,
        &s,
        &Context {
            cluster: &c,
            secrets: &secrets,
        },
        &Policy {
            prune_budget: 3,
            purge_ha_and_replicated: true,
            ..Default::default()
        },
    );
    let prunes: Vec<_> = p.actions.iter().filter(|a| a.op == Op::Prune).collect();
    assert_eq!(prunes.len(), 1, "{:#?}", p.actions);
    assert_eq!(
        prunes[0].work,
        Work::Delete {
            guest_type: GuestType::Qemu,
            stop_first: false,
            purge: true,
            digest: Some("d1".into()),
        }
    );
    assert!(
        p.anomalies
            .iter()
            .any(|a| a.name.as_deref() == Some("gone-running") && a.message.contains("ha-manager")),
        "{:#?}",
        p.anomalies
    );
}

// A lock in the config (not only in /cluster/resources) is a lock:
// qemu-server `QemuConfig.pm` `check_lock` refuses the write.
#[test]
fn a_guest_locked_in_its_config_is_skipped_with_the_lock_named() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    let mut cfg = vm_config(100, "2048", "proxops", false);
    cfg.values
        .insert("lock".into(), "suspended".into())
        .unwrap();
    add(
        &mut s,
        "pve1",
        100,
        Power::Running,
        false,
        Ok(cfg),
        "proxops",
        "web",
    );
    let p = run(&c, &s, 3);
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    assert_eq!(p.skipped.len(), 1);
    assert_eq!(
        p.skipped[0].reason,
        SkipReason::Locked {
            lock: "suspended".into()
        }
    );
    assert!(p.skipped[0].reason.to_string().contains("resume"));
}

/// The template of `CLONE` moved to pve2 by hand, its disk on `storage`
/// (shared or not as `/cluster/resources` says), beside a plain VM `other`.
fn template_on_pve2(storage: &str, shared: bool) -> LiveSnapshot {
    let mut s = snapshot();
    let mut cfg = vm_config(9000, "1024", "proxops", true);
    cfg.values
        .insert(
            "scsi0".into(),
            format!("{storage}:base-9000-disk-0,size=8G"),
        )
        .unwrap();
    add(
        &mut s,
        "pve2",
        9000,
        Power::Stopped,
        true,
        Ok(cfg),
        "proxops",
        "tmpl",
    );
    s.shared_storage
        .insert(StorageId::new(storage).unwrap(), shared);
    s
}

const OTHER: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: other\nspec:\n  node: pve1\n  vmid: 101\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";

// qemu-server src/PVE/API2/Qemu.pm `clone_vm`: with `target`, every volume
// of the source must be on shared storage (`$check_storage_access_clone`),
// else "can't clone VM to node '<n>' (VM uses local storage)".
#[test]
fn a_clone_across_nodes_from_shared_storage_is_planned() {
    let c = cluster(&[TEMPLATE, CLONE, OTHER]);
    let p = run(&c, &template_on_pve2("ceph", true), 3);
    assert_eq!(
        clone_source(&p),
        Some((Vmid::new(9000).unwrap(), node("pve2"))),
        "{p:#?}"
    );
    assert!(p.skipped.is_empty(), "{:#?}", p.skipped);
}

#[test]
fn a_clone_across_nodes_from_local_storage_refuses_that_vm_alone() {
    let c = cluster(&[TEMPLATE, CLONE, OTHER]);
    let p = run(&c, &template_on_pve2("local-lvm", false), 3);
    assert!(!p.is_aborted(), "{p:#?}");
    assert_eq!(clone_source(&p), None, "{:#?}", p.actions);
    let refused: Vec<_> = p.skipped.iter().filter(|s| s.name == "web").collect();
    assert_eq!(refused.len(), 1, "{:#?}", p.skipped);
    assert_eq!(
        refused[0].reason,
        SkipReason::CloneNeedsSharedStorage {
            template: Vmid::new(9000).unwrap(),
            template_node: node("pve2"),
            storage: StorageId::new("local-lvm").unwrap(),
        }
    );
    assert!(refused[0].reason.to_string().contains("not shared"));
    // The rest of the cluster goes on.
    assert!(
        p.actions
            .iter()
            .any(|a| a.name == "other" && a.op == Op::Create),
        "{:#?}",
        p.actions
    );
}

#[test]
fn a_storage_pve_did_not_list_counts_as_not_shared() {
    let c = cluster(&[TEMPLATE, CLONE]);
    let mut s = template_on_pve2("ceph", true);
    s.shared_storage.clear();
    let p = run(&c, &s, 3);
    assert_eq!(clone_source(&p), None);
    assert!(matches!(
        p.skipped[0].reason,
        SkipReason::CloneNeedsSharedStorage { .. }
    ));
}

const BIG: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 20GiB\n  networks:\n    - bridge: vmbr0\n";

// qemu-server src/PVE/API2/Qemu.pm `resize_vm`: a disk grows online
// (`PUT …/resize`, `size` absolute in binary units), so the action's impact
// is live and nothing is stopped.
#[test]
fn a_larger_disk_is_one_live_resize_action() {
    let c = cluster(&[BIG]);
    let mut s = snapshot();
    add_running(&mut s, 100, "proxops", "web");
    let p = run(&c, &s, 3);
    assert_eq!(p.actions.len(), 1, "{:#?}", p.actions);
    let a = &p.actions[0];
    assert_eq!((a.op, a.impact), (Op::Resize, Impact::Live));
    assert_eq!(
        a.work,
        Work::Resize {
            guest_type: GuestType::Qemu,
            disk: "scsi0".into(),
            size: proxops_core::wire::Bytes(20 << 30),
        }
    );
    assert_eq!(a.changes[0].from.as_deref(), Some("8G"));
    assert_eq!(a.changes[0].to.as_deref(), Some("20G"));
    assert!(!a.is_destructive());
}

// Same source: "shrinking disks is not supported".
#[test]
fn a_smaller_disk_is_a_shrink_anomaly_and_no_action() {
    let c = cluster(&[VM]);
    let mut s = snapshot();
    add(
        &mut s,
        "pve1",
        100,
        Power::Running,
        false,
        Ok(LiveConfig::from_json(&serde_json::json!({
            "name": "web", "memory": "1024", "cpu": "host", "cores": 1,
            "scsi0": "local-lvm:vm-100-disk-0,size=32G",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
            "tags": "proxops", "digest": "d1",
        }))
        .unwrap()),
        "proxops",
        "web",
    );
    let p = run(&c, &s, 3);
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    assert_eq!(p.anomalies.len(), 1);
    assert_eq!(p.anomalies[0].anomaly_type(), AnomalyType::Shrink);
}

#[test]
fn a_grow_applied_as_pve_applies_it_re_plans_to_nothing() {
    let c = cluster(&[BIG]);
    let mut s = snapshot();
    add_running(&mut s, 100, "proxops", "web");
    let p = run(&c, &s, 3);
    assert_eq!(p.actions.len(), 1);
    for a in &p.actions {
        support::sim::apply(&mut s, &a.node, &a.target, &a.work);
    }
    let again = run(&c, &s, 3);
    assert!(
        again.actions.is_empty() && again.anomalies.is_empty(),
        "{again:#?}"
    );
}
