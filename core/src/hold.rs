//! Holds: a guest whose disruptive action failed is not tried again at the
//! next poll, but after an exponential backoff.
//!
//! A shutdown, a reboot or the write of a stop-start update that fails
//! would otherwise be planned again every poll interval: a production
//! guest shut down and started over and over, or a refused write retried
//! forever. So the daemon remembers, per object and across cycles, how
//! often its disruptive action failed and when it may be tried next: the
//! first retry after [`Backoff::first`], then twice as long each time, at
//! most [`Backoff::max`]. A success clears the hold, and so does a commit
//! that changes the object (its manifest is compared as a whole), which is
//! a new decision a person made.
//!
//! A restart that succeeded but left PVE holding changes pending (qemu-server
//! `QemuServer.pm` `vmconfig_apply_pending` keeps a key it could not apply
//! pending, `$add_apply_error`) would be planned again at once: the
//! read-back plan still restarting the object counts as a failure too.
//!
//! Owns: [`Holds`] (one cluster's memory), [`Holds::record`] (what a cycle
//! teaches it) and [`guard`] (the planner's step that holds back a held
//! object's disruptive actions, each becoming a skipped entry that says
//! until when). Must never read a clock: `now` is a [`Timestamp`] handed
//! in. Only the daemon keeps holds; a one-shot command plans without.

pub use proxops_model::policy::Backoff;

use crate::action::{SkipReason, Skipped};
use crate::exec::{ActionState, Execution, Outcome, Timestamp};
use crate::holds::fingerprint;
use crate::plan::Plan;
use crate::rollout::is_disruptive;
use proxops_model::names::Ref;
use proxops_model::repo::ClusterDesired;

pub use crate::holds::{Hold, Holds};

impl Holds {
    /// What one executed cycle teaches: each disruptive action that failed
    /// (or succeeded while the read-back plan still restarts its object)
    /// holds its object longer; one that succeeded clears it. Holds of
    /// objects no longer desired, or whose manifest changed, are dropped.
    pub fn record(
        &mut self,
        execution: &Execution,
        readback: Option<&Plan>,
        desired: &ClusterDesired,
        backoff: &Backoff,
        now: Timestamp,
    ) {
        self.held.retain(|r, h| {
            desired
                .get(r)
                .is_some_and(|o| fingerprint(o) == h.fingerprint)
        });
        for (a, s) in execution.actions().iter().zip(execution.states()) {
            let (Some(r), true) = (&a.object, is_disruptive(a)) else {
                continue;
            };
            let Some(obj) = desired.get(r) else { continue };
            let failed = match s {
                ActionState::Done {
                    outcome: Outcome::Failed { error, .. },
                    ..
                } => Some(error.clone()),
                ActionState::Done {
                    outcome: Outcome::Succeeded,
                    ..
                } => still_restarting(readback, r),
                // A digest mismatch is refused before anything is done; a
                // deferred or unfinished action did nothing.
                _ => continue,
            };
            match failed {
                None => {
                    self.held.remove(r);
                }
                Some(error) => {
                    let failures = self.held.get(r).map_or(0, |h| h.failures) + 1;
                    let wait = backoff.wait(failures).as_secs();
                    self.held.insert(
                        r.clone(),
                        Hold {
                            failures,
                            next_attempt: now.saturating_add(wait),
                            op: a.op.as_str().to_owned(),
                            error,
                            fingerprint: fingerprint(obj),
                        },
                    );
                }
            }
        }
    }
}

/// The read-back plan restarts the object again: what PVE still holds
/// pending after the restart, as an error; `None` when it does not.
fn still_restarting(readback: Option<&Plan>, r: &Ref) -> Option<String> {
    let again = readback?
        .actions
        .iter()
        .find(|a| a.object.as_ref() == Some(r) && is_disruptive(a))?;
    let keys: Vec<&str> = again.changes.iter().map(|c| c.field.as_str()).collect();
    Some(format!(
        "the restart succeeded, but PVE still holds {} pending for another one (qemu-server `vmconfig_apply_pending` keeps a change it could not apply pending): look at the guest's pending changes on PVE",
        if keys.is_empty() {
            "changes".to_owned()
        } else {
            keys.join(", ")
        }
    ))
}

/// The planner's step for holds: every disruptive action of an object
/// held at `now` is taken out of the plan and becomes a skipped entry
/// saying until when, after how many failures and why. The object's other
/// actions (a live write, a grow, a start) still run.
pub fn guard(plan: &mut Plan, desired: &ClusterDesired, holds: &Holds, now: Timestamp) {
    if holds.is_empty() {
        return;
    }
    let mut kept = Vec::with_capacity(plan.actions.len());
    for a in std::mem::take(&mut plan.actions) {
        let hold = a
            .object
            .as_ref()
            .and_then(|r| desired.get(r))
            .filter(|_| is_disruptive(&a))
            .and_then(|o| holds.in_force(o, now));
        let Some(h) = hold else {
            kept.push(a);
            continue;
        };
        plan.skipped.push(Skipped {
            kind: a.kind,
            name: a.name.clone(),
            node: a.node.clone(),
            id: a.target.clone(),
            reason: SkipReason::Held {
                op: a.op.as_str().to_owned(),
                failures: h.failures,
                next_attempt: h.next_attempt,
                error: h.error.clone(),
            },
        });
    }
    plan.actions = kept;
}
