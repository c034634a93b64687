//! The machine ProxOps runs on, as data: its network interfaces' MAC
//! addresses and, in a VM, its SMBIOS system UUID. A live guest that shows
//! one of them is the *self guest*: the guest this very process runs in.
//!
//! The planner never plans anything for the self guest that would stop,
//! restart or delete it (a stop-start update, a reboot, a stop, marking it
//! a template, a prune): the process would end in the middle of its own
//! action, with the guest down and nobody left to start it. Such a change
//! becomes an anomaly for a person; a change PVE applies live is still
//! written.
//!
//! Must never: read the identity itself. The caller learns it (the CLI
//! reads `/sys`, or takes `self:` from the configuration) and hands it in;
//! this module only compares it with what PVE reported.

use crate::action::{Action, Anomaly, AnomalyKind, Op, Target, Work};
use crate::plan::Plan;
use proxops_model::live::LiveSnapshot;

pub use crate::plan::SelfGuest;
pub use proxops_model::host::{HostIdentity, IdentityError};

/// Finds the self guests of `live` and takes out of `plan` (its actions
/// and its deferred prunes) every action that would stop, restart or
/// delete one of them, each replaced by an anomaly naming the guest. The
/// planner calls it last; a saved plan goes through it again before it runs
/// on another host.
pub fn guard(plan: &mut Plan, live: &LiveSnapshot, host: &HostIdentity) {
    plan.self_guests = live
        .guests
        .values()
        .filter_map(|g| {
            host.matches(g).map(|matched| SelfGuest {
                node: g.node.clone(),
                vmid: g.vmid,
                name: g.display_name(),
                matched,
            })
        })
        .collect();
    if plan.self_guests.is_empty() {
        return;
    }
    let mut refused = Vec::new();
    for list in [&mut plan.actions, &mut plan.deferred] {
        list.retain(|a| {
            let Some(s) = plan
                .self_guests
                .iter()
                .find(|s| a.target == Target::Guest(s.vmid))
            else {
                return true;
            };
            if disruption(a).is_none() && !reidentifies(a, s) {
                return true;
            }
            refused.push(refusal(a, s));
            false
        });
    }
    plan.anomalies.extend(refused);
    plan.anomalies.sort();
    plan.anomalies.dedup();
}

/// What `a` would do to a running guest that takes it down, if anything.
/// A config write PVE applies live (or holds pending for the next restart),
/// a grow, a start: nothing.
pub fn disruption(a: &Action) -> Option<&'static str> {
    match (&a.op, &a.work) {
        (Op::Prune, _) => Some("a prune (it is proxops-tagged and absent in git) would delete it"),
        (Op::Stop, _) => Some("a stop (state: stopped) would stop it"),
        (Op::Reboot, _) => Some("a reboot to apply pending changes would restart it"),
        (Op::MarkTemplate, _) => Some("marking it a template would stop it for good"),
        (
            _,
            Work::UpdateConfig {
                stop_first: true, ..
            }
            | Work::UpdateConfig {
                restart_after: true,
                ..
            },
        ) => Some("a stop-required update would stop and restart it"),
        _ => None,
    }
}

/// Whether `a` rewrites or removes what makes `s` the self guest: the NIC
/// whose MAC matched (a new MAC, or none) or its `smbios1` UUID. After such
/// a write ProxOps would no longer know the guest it runs in.
fn reidentifies(a: &Action, s: &SelfGuest) -> bool {
    let (Work::UpdateConfig { params, delete, .. }
    | Work::CloneGuest {
        config: params,
        delete,
        ..
    }) = &a.work
    else {
        return false;
    };
    let mut words = s.matched.split_whitespace();
    let (Some(key), Some(_), Some(value)) = (words.next(), words.next(), words.next()) else {
        return false;
    };
    delete.iter().any(|d| d == key)
        || params.get(key).is_some_and(|v| {
            !v.expose()
                .to_ascii_lowercase()
                .contains(&value.to_ascii_lowercase())
        })
}

/// The anomaly that replaces `a`, a disruptive action on the self guest `s`.
pub(crate) fn refusal(a: &Action, s: &SelfGuest) -> Anomaly {
    let what = disruption(a).unwrap_or(
        "a change to what identifies this host (its NIC's MAC or SMBIOS UUID) would make ProxOps lose track of the guest it runs in",
    );
    let fields: Vec<&str> = a.changes.iter().map(|c| c.field.as_str()).collect();
    let changes = if fields.is_empty() {
        String::new()
    } else {
        format!(" (changes: {})", fields.join(", "))
    };
    Anomaly {
        anomaly: AnomalyKind::SelfGuest,
        ..a.instead(format!(
            "ProxOps runs in this guest (\"{}\", vmid {} on node {}, matched by {}): {what}{changes}, so it is not planned; apply this change from another host",
            s.name, s.vmid, s.node, s.matched
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proxops_model::live::{GuestType, LiveConfig, LiveGuest, Power};
    use proxops_model::names::{NodeName, Vmid};
    use proxops_model::wire::TagSet;

    fn guest(t: GuestType, values: &[(&str, &str)]) -> LiveGuest {
        let mut c = LiveConfig::default();
        for (k, v) in values {
            c.values.insert((*k).into(), (*v).into()).unwrap();
        }
        LiveGuest {
            node: NodeName::new("pve1").unwrap(),
            vmid: Vmid::new(100).unwrap(),
            guest_type: t,
            name: "proxops".into(),
            template: false,
            power: Power::Running,
            lock: None,
            ha_state: None,
            tags: TagSet::default(),
            config: Ok(c),
        }
    }

    #[test]
    fn a_mac_matches_in_either_case_in_any_nic_slot() {
        let host = HostIdentity::new(["bc:24:11:aa:bb:cc"], None).unwrap();
        let vm = guest(
            GuestType::Qemu,
            &[
                ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
                ("net3", "e1000=BC:24:11:AA:BB:CC,bridge=vmbr1"),
            ],
        );
        assert_eq!(
            host.matches(&vm).as_deref(),
            Some("net3 MAC bc:24:11:aa:bb:cc")
        );
        let ct = guest(
            GuestType::Lxc,
            &[("net0", "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC")],
        );
        assert!(host.matches(&ct).is_some());
    }

    #[test]
    fn the_smbios_uuid_matches_a_vm_ignoring_case() {
        let host = HostIdentity::new(None, Some("3F1D0C2E-5B7A-4C1E-9D2F-0A1B2C3D4E5F")).unwrap();
        let vm = guest(
            GuestType::Qemu,
            &[("smbios1", "uuid=3f1d0c2e-5b7a-4c1e-9d2f-0a1b2c3d4e5f")],
        );
        assert!(host.matches(&vm).is_some());
        let other = guest(
            GuestType::Qemu,
            &[("smbios1", "uuid=3f1d0c2e-5b7a-4c1e-9d2f-0a1b2c3d4e50")],
        );
        assert_eq!(host.matches(&other), None);
    }

    #[test]
    fn an_empty_identity_or_all_zero_mac_matches_nothing() {
        let zero = HostIdentity::new(["00:00:00:00:00:00"], None).unwrap();
        assert!(zero.is_empty());
        let vm = guest(GuestType::Qemu, &[("net0", "virtio=00:00:00:00:00:00")]);
        assert_eq!(zero.matches(&vm), None);
    }

    #[test]
    fn bad_text_is_refused_with_what_to_write() {
        let e = HostIdentity::new(["bc:24:11"], None).unwrap_err();
        assert!(e.0.contains("not a MAC address"), "{e}");
        let e = HostIdentity::new(None, Some("not-a-uuid")).unwrap_err();
        assert!(e.0.contains("8-4-4-4-12"), "{e}");
    }
}
