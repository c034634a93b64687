//! The planner's rules, applied again to each action just before it runs:
//! a plan may come from a file (`apply --plan`), and whatever made it, an
//! action that breaks one of these rules is never sent.
//!
//! Owns the rules an action must keep that need no live state: it lands
//! on a node of the cluster's `nodes:`; it serves the manifest it names,
//! at that manifest's node and id (a prune: a guest no manifest claims);
//! every form key it sends is one a structured field writes, or a
//! `spec.extra` key of that manifest with that value and allowed there
//! (`allow-extra-keys`); a bind mount passes the bind-mount guard; a
//! `delete=` list removes only cloud-init identity keys. What needs the
//! guest as it is now (the ownership tag, protection, a lock, the config
//! digest) is checked by the step protocol's verification read right
//! before a shutdown, stop or delete ([`crate::step`]).
//!
//! Must never: do I/O, or let an action through because its plan says so.

use crate::action::{Action, Anomaly, Op, ParamValue, Params, Target, Work};
use crate::plan::{Plan, Policy};
use proxops_model::extra::{self, AllowList, Refusal};
use proxops_model::live::GuestType;
use proxops_model::manifest::{Spec, refused_bind_source};
use proxops_model::repo::{ClusterDesired, DesiredObject};

/// Why `action` may not run under `desired` and `policy`, if it may not.
pub fn refusal(action: &Action, desired: &ClusterDesired, policy: &Policy) -> Option<String> {
    if let Work::Firewall { calls } = &action.work {
        return crate::firewall_plan::plan::refusal(action, calls, desired, policy).err();
    }
    if action.kind.is_cluster_object() {
        return crate::cluster::plan::refusal(action, desired).err();
    }
    if !policy.allows(&action.node) {
        return Some(format!(
            "node {} is not in the cluster's nodes",
            action.node
        ));
    }
    let checked = match &action.object {
        None => prune_target(action, desired),
        Some(r) => match desired.get(r) {
            None => Err(format!("it serves {r}, which no manifest declares")),
            Some(obj) => serves(action, obj, desired).and_then(|()| forms(action, obj, desired)),
        },
    };
    checked.err()
}

/// Takes out of `plan` every action that breaks a rule ([`refusal`]),
/// each replaced by a `needs_person` anomaly saying why; returns how many.
pub fn guard(plan: &mut Plan, desired: &ClusterDesired, policy: &Policy) -> usize {
    let mut refused = Vec::new();
    plan.actions.retain(|a| match refusal(a, desired, policy) {
        None => true,
        Some(why) => {
            refused.push(anomaly(a, &why));
            false
        }
    });
    let n = refused.len();
    plan.anomalies.extend(refused);
    plan.anomalies.sort();
    plan.anomalies.dedup();
    n
}

/// The anomaly that replaces a refused action.
fn anomaly(a: &Action, why: &str) -> Anomaly {
    a.instead(format!(
        "{} {}/{} (id {}) refused before it was sent: {why}",
        a.op, a.kind, a.name, a.target
    ))
}

/// A prune: a `Delete` of a guest no manifest claims; nothing else may
/// act without a manifest.
fn prune_target(a: &Action, desired: &ClusterDesired) -> Result<(), String> {
    let (Op::Prune, Work::Delete { .. }, Target::Guest(vmid)) = (a.op, &a.work, &a.target) else {
        return Err("only a prune of a guest may act without a manifest".to_owned());
    };
    if !a.kind.is_guest() {
        return Err(format!("{} is not a guest kind", a.kind));
    }
    match desired
        .objects
        .values()
        .find(|o| o.spec.guest_id().is_some_and(|(_, v)| v == *vmid))
    {
        Some(o) => Err(format!(
            "vmid {vmid} is {}'s, a manifest of this cluster: it is never pruned",
            o.r#ref
        )),
        None => Ok(()),
    }
}

/// The action is about its manifest: same kind and name, the manifest's
/// node and id, and an operation that fits it.
fn serves(a: &Action, obj: &DesiredObject, desired: &ClusterDesired) -> Result<(), String> {
    let r = &obj.r#ref;
    if a.kind != r.kind || a.name != r.name.as_str() {
        return Err(format!("it is named {}/{} but serves {r}", a.kind, a.name));
    }
    if let Work::ClusterWrite { .. } = &a.work {
        return crate::cluster::plan::membership_refusal(a, obj, desired);
    }
    if matches!(a.op, Op::Prune) || matches!(a.work, Work::Delete { .. }) {
        return Err(format!("{r} has a manifest: it is never pruned"));
    }
    if matches!(a.work, Work::MarkTemplate { .. }) != (a.op == Op::MarkTemplate)
        || (a.op == Op::MarkTemplate && !r.kind.is_template())
    {
        return Err(format!("{} does not fit {r}", a.op));
    }
    if let Some((node, vmid)) = obj.spec.guest_id() {
        if a.target != Target::Guest(vmid) || &a.node != node {
            return Err(format!(
                "{r} is vmid {vmid} on node {node}, not id {} on node {}",
                a.target, a.node
            ));
        }
        return Ok(());
    }
    let Some(art) = obj.spec.artifact() else {
        return Err(format!("{r} is neither a guest nor a storage file"));
    };
    let file = Target::File {
        storage: art.storage.clone(),
        filename: art.filename.clone(),
    };
    if a.target != file || !art.all_nodes().contains(&a.node) || a.op != Op::Download {
        return Err(format!(
            "{r} is {file} on its own nodes, not {} {} on node {}",
            a.op, a.target, a.node
        ));
    }
    Ok(())
}

/// Every guest form key the action sends, and every key it removes.
fn forms(a: &Action, obj: &DesiredObject, desired: &ClusterDesired) -> Result<(), String> {
    let (guest_type, params, delete): (GuestType, &Params, &[String]) = match &a.work {
        Work::CreateGuest {
            guest_type, params, ..
        } => (*guest_type, params, &[]),
        Work::UpdateConfig {
            guest_type,
            params,
            delete,
            ..
        } => (*guest_type, params, delete),
        Work::CloneGuest { config, delete, .. } => (GuestType::Qemu, config, delete),
        _ => return Ok(()),
    };
    if obj.r#ref.kind.guest_type() != Some(guest_type) {
        return Err(format!("{} is not a {guest_type:?} guest", obj.r#ref));
    }
    let spec_extra = match &obj.spec {
        Spec::Vm(v) | Spec::TemplateVm(v) => &v.extra,
        Spec::Lxc(l) | Spec::TemplateCt(l) => &l.extra,
        _ => return Err(format!("{} is not a guest", obj.r#ref)),
    };
    let allow = AllowList {
        keys: &desired.allow_extra_keys,
        ..AllowList::none()
    };
    let pool = crate::cluster::plan::guest_pool(obj, desired);
    for (key, value) in &params.0 {
        let shown = match value {
            ParamValue::Plain(v) => v.as_str(),
            ParamValue::Secret(_) | ParamValue::SecretRef(_) => "",
        };
        // The pool a guest joins at create: its manifest's `spec.pool`.
        if key == "pool" && matches!(a.work, Work::CreateGuest { .. }) {
            if pool.as_deref() != Some(shown) {
                return Err(format!(
                    "it sends pool={shown:?}, but {}'s spec.pool is {pool:?}",
                    obj.r#ref
                ));
            }
            continue;
        }
        let refused = extra::refusal(guest_type, key, shown);
        if let Some(want) = spec_extra.get(key) {
            if want != shown {
                return Err(format!(
                    "it sends {key}={shown:?}, but {}'s spec.extra says {want:?}",
                    obj.r#ref
                ));
            }
            if let Some(why) = refused.and_then(|r| extra::message(key, r, &allow)) {
                return Err(why);
            }
            continue;
        }
        match refused {
            Some(Refusal::Structural) => {}
            Some(Refusal::HostBindMount) => {
                let source = shown.split(',').next().unwrap_or(shown);
                if let Some(why) = refused_bind_source(source) {
                    return Err(format!("{key}: {why}"));
                }
            }
            _ => {
                return Err(format!(
                    "it sends {key}, which no field of {} writes and its spec.extra does not hold",
                    obj.r#ref
                ));
            }
        }
    }
    if let Some(k) = delete
        .iter()
        .find(|k| !proxops_translate::drift::is_clone_identity_key(k))
    {
        return Err(format!(
            "it removes {k}: ProxOps removes only cloud-init identity keys a clone inherited, never a device, volume or setting"
        ));
    }
    Ok(())
}
