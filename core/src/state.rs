//! Each object's state in a cycle: the one place that decides whether an
//! object is `converged`, `drift`, `failed`, `skipped`, `pruned` or
//! `anomalous`, for `apply`, `run`, `/status` and `proxops status` alike.
//!
//! Owns: [`object_states`] (plan + execution + read-back + desired state →
//! one record per object) and [`merge_records`] (two records of one object
//! into the worse). Must never: read a clock (`now` is an argument), or let
//! a caller derive a state on its own — a second set of rules is how
//! `/status` and `proxops status` came to disagree.

use std::collections::BTreeMap;

use crate::exec::{Execution, ObjectReport, ObjectState, Timestamp};
use crate::plan::Plan;
use proxops_model::repo::ClusterDesired;

/// Every object's record for one cluster's cycle, ordered by kind and name.
///
/// `execution` is `None` when nothing ran (a dry run, `diff`, `status`);
/// `readback` is the plan made from PVE read again after the execution
/// (`None` when nothing ran or the read-back failed); `desired` adds a
/// `converged` record for every desired object nothing else names (`None`
/// limits the records to objects the plan names, as `apply` reports them).
///
/// One precedence decides, first match wins:
///
/// | # | what is known about the object | state | `last_error` |
/// |---|---|---|---|
/// | 1 | one of its actions failed, or PVE changed it between read and write | `failed` | PVE's message |
/// | 2 | a plan anomaly names it, and it was not skipped by the plan (rule 5) | `anomalous` | the anomaly |
/// | 3 | its prune succeeded | `pruned` | — |
/// | 4 | an action of it was deferred by the execution (failed prerequisite, shutdown) | `skipped` | the reason |
/// | 5 | the plan skipped it, or deferred its prune (budget, empty-desired guard) | `skipped` (`pending_restart` when PVE holds changes pending for a restart the policy leaves to a person) | the reason (`prune deferred: …` for a prune; the pending keys) |
/// | 6 | its actions succeeded and the read-back plan has nothing for it | `converged` | — (`last_converged_at` = `now`) |
/// | 7 | its actions succeeded but the read-back still differs, or failed | `drift` | says which |
/// | 8 | an action was planned and not executed (no execution, or not reached) | `drift` | — (`last_action` = the op) |
/// | 9 | a desired object the plan has nothing for | `converged` | — |
///
/// A storage artifact has one record per node; records of one object merge
/// into the worse ([`merge_records`]), so a failure on one node is never
/// hidden by success on another.
pub fn object_states(
    plan: &Plan,
    execution: Option<&Execution>,
    readback: Option<&Plan>,
    desired: Option<&ClusterDesired>,
    now: Timestamp,
) -> Vec<ObjectReport> {
    let executed = execution
        .map(|e| e.finish(plan, readback, now))
        .unwrap_or_default();
    complete(plan, execution.is_some(), executed, desired)
}

/// Rules 2, 5, 8 and 9 of [`object_states`] over the records the execution
/// gave (rules 1, 3, 4, 6, 7; empty when nothing ran), merged per object.
/// Adding to records that already went through it changes nothing.
pub(crate) fn complete(
    plan: &Plan,
    executed: bool,
    objects: Vec<ObjectReport>,
    desired: Option<&ClusterDesired>,
) -> Vec<ObjectReport> {
    let mut records: BTreeMap<(String, String), ObjectReport> = BTreeMap::new();
    for o in objects {
        merge_into(&mut records, o);
    }
    let blank = |kind: &str, name: &str, node: &str, id: &str, state: ObjectState| ObjectReport {
        kind: kind.to_owned(),
        name: name.to_owned(),
        node: node.to_owned(),
        id: id.to_owned(),
        state,
        last_action: None,
        last_error: None,
        prune_reason: None,
        last_converged_at: None,
    };
    if !executed {
        for a in &plan.actions {
            let k = (a.kind.to_string(), a.name.clone());
            let r = records.entry(k).or_insert_with(|| {
                blank(
                    a.kind.as_str(),
                    &a.name,
                    a.node.as_str(),
                    &a.target.to_string(),
                    ObjectState::Drift,
                )
            });
            if r.state == ObjectState::Drift {
                r.last_action = Some(a.op.as_str().to_owned());
            }
        }
    }
    for s in &plan.skipped {
        records
            .entry((s.kind.to_string(), s.name.clone()))
            .or_insert_with(|| {
                let state = if s.reason.is_pending_restart() {
                    ObjectState::PendingRestart
                } else {
                    ObjectState::Skipped
                };
                let mut r = blank(
                    s.kind.as_str(),
                    &s.name,
                    s.node.as_str(),
                    &s.id.to_string(),
                    state,
                );
                r.last_error = Some(s.reason.to_string());
                r
            });
    }
    for d in &plan.deferred {
        records
            .entry((d.kind.to_string(), d.name.clone()))
            .or_insert_with(|| {
                let mut r = blank(
                    d.kind.as_str(),
                    &d.name,
                    d.node.as_str(),
                    &d.target.to_string(),
                    ObjectState::Skipped,
                );
                // The planner's deferral reasons say `prune deferred: …`
                // themselves; a second prefix only stuttered.
                r.last_error = Some(d.reason.clone());
                r.prune_reason = Some(d.reason.clone());
                r
            });
    }
    for o in desired.iter().flat_map(|d| d.objects.values()) {
        let kind = o.r#ref.kind.as_str();
        let name = o.r#ref.name.to_string();
        records
            .entry((kind.to_owned(), name.clone()))
            .or_insert_with(|| {
                let (node, id) = match (o.spec.guest_id(), o.spec.artifact()) {
                    (Some((node, vmid)), _) => (node.to_string(), vmid.to_string()),
                    (None, Some(a)) => (
                        a.all_nodes()
                            .iter()
                            .map(|n| n.as_str())
                            .collect::<Vec<_>>()
                            .join(","),
                        format!("{}:{}", a.storage, a.filename),
                    ),
                    (None, None) => (String::new(), String::new()),
                };
                blank(kind, &name, &node, &id, ObjectState::Converged)
            });
    }
    for an in &plan.anomalies {
        // A kind-wide anomaly (empty_desired) names no object.
        let Some((kind, an_name)) = an.object() else {
            continue;
        };
        let r = records
            .entry((kind.to_string(), an_name.to_owned()))
            .or_insert_with(|| {
                let (node, id) = an.node_and_id();
                blank(kind.as_str(), an_name, node, &id, ObjectState::Anomalous)
            });
        if matches!(
            r.state,
            ObjectState::Anomalous
                | ObjectState::Converged
                | ObjectState::Drift
                | ObjectState::Desired
        ) {
            r.state = ObjectState::Anomalous;
            r.last_error = Some(an.message.clone());
        }
    }
    records.into_values().collect()
}

/// How bad a state is, for merging two records of one object: the worse
/// one is kept, so a failure on one node is never hidden by success on
/// another.
fn severity(s: ObjectState) -> u8 {
    match s {
        ObjectState::Converged => 0,
        ObjectState::Pruned => 1,
        ObjectState::Desired => 2,
        ObjectState::InProgress => 3,
        ObjectState::Skipped => 4,
        ObjectState::PendingRestart => 4,
        ObjectState::Drift => 5,
        ObjectState::Anomalous => 6,
        ObjectState::Failed => 7,
    }
}

/// Merges two records of one object (same kind and name): the one with the
/// worse state wins; on a tie the later one. The nodes are listed together
/// when they differ.
pub fn merge_records(earlier: ObjectReport, later: ObjectReport) -> ObjectReport {
    let nodes = if earlier.node == later.node || earlier.node.is_empty() {
        later.node.clone()
    } else if later.node.is_empty() {
        earlier.node.clone()
    } else {
        let mut all: Vec<&str> = earlier
            .node
            .split(',')
            .chain(later.node.split(','))
            .collect();
        all.sort_unstable();
        all.dedup();
        all.join(",")
    };
    let converged_at = earlier.last_converged_at.max(later.last_converged_at);
    let mut kept = if severity(later.state) >= severity(earlier.state) {
        later
    } else {
        earlier
    };
    kept.node = nodes;
    if kept.state == ObjectState::Converged {
        kept.last_converged_at = converged_at;
    }
    kept
}

fn merge_into(records: &mut BTreeMap<(String, String), ObjectReport>, o: ObjectReport) {
    let key = (o.kind.clone(), o.name.clone());
    let merged = match records.remove(&key) {
        Some(earlier) => merge_records(earlier, o),
        None => o,
    };
    records.insert(key, merged);
}
