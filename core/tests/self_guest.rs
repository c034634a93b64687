//! The guest ProxOps runs in (matched by a NIC MAC or, for a VM, the SMBIOS
//! UUID) is never stopped, restarted, marked a template or pruned: each such
//! action becomes an anomaly naming it, while a change PVE applies live is
//! still planned. Guests are created and started through the simulated PVE
//! (support/sim.rs), then the manifest changes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proptest::prelude::*;
use proxops_core::action::{Anomaly, Op, Target};
use proxops_core::config::RestartPolicy;
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::host::{self, HostIdentity};
use proxops_core::live::{LiveSnapshot, NodeState, StorageContent};
use proxops_core::names::Vmid;
use proxops_core::plan::{Plan, Policy};
use proxops_core::planner::plan;
use proxops_core::repo::ClusterDesired;
use support::fixture::cluster;
use support::sim;

const UUID: &str = "3f1d0c2e-5b7a-4c1e-9d2f-0a1b2c3d4e5f";

/// A VM `web` (vmid 100) of `kind` on `bridge`, with `extra` spec lines.
fn vm(kind: &str, cores: u32, bridge: &str, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: {cores}\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: {bridge}\n{extra}"
    )
}

/// A container `ct` (vmid 200) with `extra` spec lines.
fn ct(memory: &str, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct\nspec:\n  node: pve1\n  vmid: 200\n  template: debian-ct\n  memory: {memory}\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n{extra}"
    )
}

/// Another VM, so a removed manifest leaves its kind non-empty.
const OTHER: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: other\nspec:\n  node: pve1\n  vmid: 150\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";

/// Another container, for the same reason.
const OTHER_CT: &str = "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: other-ct\nspec:\n  node: pve1\n  vmid: 250\n  template: debian-ct\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n";

fn run(c: &ClusterDesired, live: &LiveSnapshot, policy: &Policy) -> Plan {
    let secrets = CloudInitSecrets::default();
    let ctx = Context {
        cluster: c,
        secrets: &secrets,
    };
    plan(c, live, &ctx, policy)
}

/// PVE after `docs` were applied until nothing is left: every guest
/// created, running and tagged.
fn converged(docs: &[&str]) -> LiveSnapshot {
    let c = cluster(docs);
    let mut live = LiveSnapshot::default();
    live.nodes.insert(
        proxops_core::names::NodeName::new("pve1").unwrap(),
        NodeState::Online,
    );
    for pair in c.storage_pairs() {
        live.storage.insert(pair, Ok(StorageContent::default()));
    }
    for _ in 0..4 {
        let p = run(&c, &live, &Policy::default());
        if p.actions.is_empty() {
            return live;
        }
        for a in &p.actions {
            sim::apply(&mut live, &a.node, &a.target, &a.work);
        }
    }
    panic!("{docs:?} did not converge")
}

fn vmid(n: u64) -> Vmid {
    Vmid::new(n).unwrap()
}

/// The live MAC of `id`'s `net0`, lower-cased (PVE spells it upper-case:
/// the comparison must ignore case).
fn mac_of(live: &LiveSnapshot, id: u64) -> String {
    let g = live.guest_by_vmid(vmid(id)).unwrap();
    let net0 = g.config.as_ref().unwrap().get("net0").unwrap().to_owned();
    let mac = net0
        .split(',')
        .find_map(|t| {
            let v = t.rsplit('=').next()?;
            (v.len() == 17 && v.matches(':').count() == 5).then(|| v.to_owned())
        })
        .unwrap();
    assert_ne!(mac, mac.to_ascii_lowercase(), "PVE spells MACs upper-case");
    mac.to_ascii_lowercase()
}

fn by_mac(live: &LiveSnapshot, id: u64) -> Policy {
    Policy {
        host: HostIdentity::new([mac_of(live, id).as_str()], None).unwrap(),
        ..Policy::default()
    }
}

fn by_uuid(live: &mut LiveSnapshot, id: u64) -> Policy {
    let g = live
        .guests
        .values_mut()
        .find(|g| g.vmid == vmid(id))
        .unwrap();
    if let Ok(c) = &mut g.config {
        c.values
            .insert("smbios1".into(), format!("uuid={}", UUID.to_uppercase()))
            .unwrap();
    }
    Policy {
        host: HostIdentity::new(None, Some(UUID)).unwrap(),
        ..Policy::default()
    }
}

fn ops_on(p: &Plan, id: u64) -> Vec<Op> {
    p.actions
        .iter()
        .chain(&p.deferred)
        .filter(|a| a.target == Target::Guest(vmid(id)))
        .map(|a| a.op)
        .collect()
}

fn self_anomalies(p: &Plan, id: u64) -> Vec<&Anomaly> {
    p.anomalies
        .iter()
        .filter(|a| {
            a.id == Some(Target::Guest(vmid(id)))
                && a.message.contains("ProxOps runs in this guest")
        })
        .collect()
}

/// Without the identity the plan has `op` on `id` (the scenario is real);
/// with it, nothing disruptive is left on `id` and one anomaly names the
/// guest and says to apply from another host.
fn check_refused(c: &ClusterDesired, live: &LiveSnapshot, policy: &Policy, id: u64, op: Op) {
    let blind = run(
        c,
        live,
        &Policy {
            host: HostIdentity::default(),
            ..policy.clone()
        },
    );
    assert!(
        ops_on(&blind, id).contains(&op),
        "scenario without {op:?}: {:#?}",
        blind.actions
    );
    let p = run(c, live, policy);
    let left: Vec<_> = p
        .actions
        .iter()
        .chain(&p.deferred)
        .filter(|a| a.target == Target::Guest(vmid(id)))
        .filter_map(host::disruption)
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!ops_on(&p, id).contains(&op), "{:#?}", p.actions);
    let found = self_anomalies(&p, id);
    assert_eq!(found.len(), 1, "{:#?}", p.anomalies);
    assert!(
        found[0]
            .message
            .contains("apply this change from another host"),
        "{}",
        found[0].message
    );
    assert_eq!(p.self_guests.len(), 1);
    assert_eq!(p.self_guests[0].vmid, vmid(id));
}

#[test]
fn a_stop_start_update_of_the_self_vm_found_by_mac_is_an_anomaly() {
    let live = converged(&[&vm("VM", 1, "vmbr0", "")]);
    let c = cluster(&[&vm("VM", 2, "vmbr0", "")]);
    check_refused(&c, &live, &by_mac(&live, 100), 100, Op::Update);
}

#[test]
fn a_stop_start_update_of_the_self_vm_found_by_smbios_uuid_is_an_anomaly() {
    let mut live = converged(&[&vm("VM", 1, "vmbr0", "")]);
    let policy = by_uuid(&mut live, 100);
    let c = cluster(&[&vm("VM", 2, "vmbr0", "")]);
    check_refused(&c, &live, &policy, 100, Op::Update);
}

#[test]
fn stopping_the_self_vm_is_an_anomaly() {
    let live = converged(&[&vm("VM", 1, "vmbr0", "")]);
    let c = cluster(&[&vm("VM", 1, "vmbr0", "  state: stopped\n")]);
    check_refused(&c, &live, &by_mac(&live, 100), 100, Op::Stop);
}

#[test]
fn rebooting_the_self_vm_for_pending_changes_is_an_anomaly() {
    let mut live = converged(&[&vm("VM", 1, "vmbr0", "")]);
    let g = live
        .guests
        .values_mut()
        .find(|g| g.vmid == vmid(100))
        .unwrap();
    if let Ok(c) = &mut g.config {
        c.pending.insert("cores".into(), Some("4".into()));
    }
    let c = cluster(&[&vm("VM", 1, "vmbr0", "")]);
    let policy = Policy {
        restart_policy: RestartPolicy::Reboot,
        ..by_uuid(&mut live, 100)
    };
    check_refused(&c, &live, &policy, 100, Op::Reboot);
}

#[test]
fn marking_the_self_vm_a_template_is_an_anomaly() {
    let live = converged(&[&vm("VM", 1, "vmbr0", "")]);
    let c = cluster(&[&vm("TemplateVM", 1, "vmbr0", "")]);
    check_refused(&c, &live, &by_mac(&live, 100), 100, Op::MarkTemplate);
}

#[test]
fn pruning_the_self_vm_is_an_anomaly_and_uses_no_prune_budget() {
    let live = converged(&[&vm("VM", 1, "vmbr0", ""), OTHER]);
    // Both gone from git, budget 1: the other VM is pruned, not deferred
    // behind a prune that can never happen.
    let c = cluster(&[&vm("VM", 1, "vmbr0", "")
        .replace("vmid: 100", "vmid: 101")
        .replace("name: web", "name: web2")]);
    let policy = Policy {
        prune_budget: 1,
        ..by_mac(&live, 100)
    };
    check_refused(&c, &live, &policy, 100, Op::Prune);
    let p = run(&c, &live, &policy);
    assert_eq!(ops_on(&p, 150), vec![Op::Prune]);
    assert!(p.deferred.is_empty(), "{:#?}", p.deferred);
}

#[test]
fn a_stop_start_update_of_the_self_container_is_an_anomaly() {
    let live = converged(&[&ct("512MiB", "")]);
    let c = cluster(&[&ct("512MiB", "  options:\n    nesting: true\n")]);
    // The container is privileged: only root@pam may change its features
    // (pve-container `LXC.pm` `check_ct_modify_config_perm`).
    let policy = Policy {
        root_pam: true,
        ..by_mac(&live, 200)
    };
    check_refused(&c, &live, &policy, 200, Op::Update);
}

#[test]
fn stopping_the_self_container_is_an_anomaly() {
    let live = converged(&[&ct("512MiB", "")]);
    let c = cluster(&[&ct("512MiB", "  state: stopped\n")]);
    check_refused(&c, &live, &by_mac(&live, 200), 200, Op::Stop);
}

#[test]
fn pruning_the_self_container_is_an_anomaly() {
    let live = converged(&[&ct("512MiB", ""), OTHER_CT]);
    let c = cluster(&[OTHER_CT]);
    check_refused(&c, &live, &by_mac(&live, 200), 200, Op::Prune);
}

#[test]
fn a_live_change_to_the_self_guest_is_still_planned() {
    // A NIC's bridge is changed on the running VM at once; a container's
    // memory through its cgroup.
    let live = converged(&[&vm("VM", 1, "vmbr0", ""), &ct("512MiB", "")]);
    let c = cluster(&[&vm("VM", 1, "vmbr1", ""), &ct("1GiB", "")]);
    let host = HostIdentity::new(
        [mac_of(&live, 100).as_str(), mac_of(&live, 200).as_str()],
        None,
    )
    .unwrap();
    let p = run(
        &c,
        &live,
        &Policy {
            host,
            ..Policy::default()
        },
    );
    assert_eq!(ops_on(&p, 100), vec![Op::Update], "{:#?}", p.anomalies);
    assert_eq!(ops_on(&p, 200), vec![Op::Update], "{:#?}", p.anomalies);
    assert!(p.actions.iter().all(|a| host::disruption(a).is_none()));
    assert!(self_anomalies(&p, 100).is_empty() && self_anomalies(&p, 200).is_empty());
    assert_eq!(p.self_guests.len(), 2);
}

#[test]
fn without_a_match_nothing_changes() {
    let live = converged(&[&vm("VM", 1, "vmbr0", "")]);
    let c = cluster(&[&vm("VM", 2, "vmbr0", "")]);
    let policy = Policy {
        host: HostIdentity::new(["02:00:00:00:00:01"], Some(UUID)).unwrap(),
        ..Policy::default()
    };
    assert_eq!(run(&c, &live, &policy), run(&c, &live, &Policy::default()));
}

/// One generated change to the running guests `web` (VM 100) and `ct`
/// (LXC 200): which manifests stay and how.
#[derive(Debug, Clone)]
struct Change {
    vm: Option<(u32, bool, bool, bool)>,
    ct: Option<(bool, bool, bool)>,
    pending: bool,
    reboot: bool,
    budget: u32,
    self_vm: u8,
    self_ct: bool,
}

fn change() -> impl Strategy<Value = Change> {
    (
        proptest::option::of((1u32..3, any::<bool>(), any::<bool>(), any::<bool>())),
        proptest::option::of((any::<bool>(), any::<bool>(), any::<bool>())),
        any::<bool>(),
        any::<bool>(),
        0u32..3,
        0u8..3,
        any::<bool>(),
    )
        .prop_map(
            |(vm, ct, pending, reboot, budget, self_vm, self_ct)| Change {
                vm,
                ct,
                pending,
                reboot,
                budget,
                self_vm,
                self_ct,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever changes in git, no plan stops, restarts, marks or prunes a
    /// self guest, in its actions or its deferred prunes.
    #[test]
    fn no_plan_holds_a_disruptive_action_on_a_self_guest(ch in change()) {
        let mut live = converged(&[&vm("VM", 1, "vmbr0", ""), &ct("512MiB", ""), OTHER]);
        if ch.pending
            && let Some(g) = live.guests.values_mut().find(|g| g.vmid == vmid(100))
            && let Ok(c) = &mut g.config
        {
            c.pending.insert("cores".into(), Some("4".into()));
        }
        let mut docs = vec![OTHER.to_owned()];
        if let Some((cores, stopped, template, bridge)) = ch.vm {
            let mut extra = String::new();
            if stopped { extra.push_str("  state: stopped\n"); }
            let kind = if template { "TemplateVM" } else { "VM" };
            docs.push(vm(kind, cores, if bridge { "vmbr1" } else { "vmbr0" }, &extra));
        }
        if let Some((stopped, nesting, memory)) = ch.ct {
            let mut extra = String::new();
            if stopped { extra.push_str("  state: stopped\n"); }
            if nesting { extra.push_str("  options:\n    nesting: true\n"); }
            docs.push(ct(if memory { "1GiB" } else { "512MiB" }, &extra));
        }
        let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
        let c = cluster(&refs);
        let mut macs = Vec::new();
        let mut uuid = None;
        let mut selves: Vec<u64> = Vec::new();
        match ch.self_vm {
            1 => { macs.push(mac_of(&live, 100)); selves.push(100); }
            2 => { by_uuid(&mut live, 100); uuid = Some(UUID); selves.push(100); }
            _ => {}
        }
        if ch.self_ct { macs.push(mac_of(&live, 200)); selves.push(200); }
        let policy = Policy {
            host: HostIdentity::new(macs.iter().map(String::as_str), uuid).unwrap(),
            prune_budget: ch.budget,
            restart_policy: if ch.reboot { RestartPolicy::Reboot } else { RestartPolicy::Never },
            ..Policy::default()
        };
        let p = run(&c, &live, &policy);
        for a in p.actions.iter().chain(&p.deferred) {
            let on_self = selves.iter().any(|s| a.target == Target::Guest(vmid(*s)));
            prop_assert!(!on_self || host::disruption(a).is_none(), "{a:#?}");
        }
        let found: Vec<u64> = p.self_guests.iter().map(|s| u64::from(s.vmid.get())).collect();
        prop_assert_eq!(found, selves);
    }
}
