//! The execution state machine, sans-IO in the manner of quinn-proto.
//!
//! Call order: `Execution::new(plan)`; then repeatedly `next()` to get the
//! next runnable action, perform it, and hand its result to `record()`;
//! `next()` returns `None` when nothing more may run. `stop()` (shutdown)
//! lets the action in flight finish and starts no other. After a read-back
//! the caller passes the re-planned plan to `finish()`, which decides each
//! object's final state: `converged` only when PVE, read back, matches.
//!
//! A failed prerequisite defers its dependants on the same node for this
//! cycle; nothing is retried within a cycle and no state survives it.
//! No clock inside: every timestamp is an argument.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::action::{Action, Op};
use crate::names::{NodeName, Ref};
use crate::plan::Plan;

/// Seconds since the Unix epoch, handed in by the caller.
pub type Timestamp = u64;

/// How one action ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    /// PVE or the transport refused or failed it. `transient` failures
    /// (a locked guest, a lock timeout) are expected to clear by themselves.
    Failed {
        error: String,
        transient: bool,
    },
    /// The config changed between our read and our write (digest mismatch):
    /// nothing was overwritten; the next cycle re-plans it.
    ChangedUnderUs,
}

/// Per-object states, as `/status` names them (spec §17.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectState {
    Desired,
    Drift,
    Converged,
    InProgress,
    Failed,
    Skipped,
    Pruned,
    Anomalous,
    /// PVE holds changes pending that the running guest takes only at its
    /// next restart: not converged.
    PendingRestart,
}

impl ObjectState {
    pub fn as_str(self) -> &'static str {
        match self {
            ObjectState::Desired => "desired",
            ObjectState::Drift => "drift",
            ObjectState::Converged => "converged",
            ObjectState::InProgress => "in_progress",
            ObjectState::Failed => "failed",
            ObjectState::Skipped => "skipped",
            ObjectState::Pruned => "pruned",
            ObjectState::Anomalous => "anomalous",
            ObjectState::PendingRestart => "pending_restart",
        }
    }
}

/// What happened to one action this cycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ActionState {
    Pending,
    InProgress {
        started: Timestamp,
    },
    Done {
        outcome: Outcome,
        started: Timestamp,
        finished: Timestamp,
    },
    /// Not attempted: a prerequisite failed this cycle, or shutdown.
    Deferred {
        reason: String,
    },
}

/// Drives one plan's actions in order.
#[derive(Debug, Clone)]
pub struct Execution {
    actions: Vec<Action>,
    states: Vec<ActionState>,
    cursor: usize,
    failed: BTreeSet<(Ref, NodeName)>,
    stopping: bool,
}

impl Execution {
    pub fn new(plan: &Plan) -> Execution {
        let actions = if plan.aborted {
            Vec::new()
        } else {
            plan.actions.clone()
        };
        let states = vec![ActionState::Pending; actions.len()];
        Execution {
            actions,
            states,
            cursor: 0,
            failed: BTreeSet::new(),
            stopping: false,
        }
    }

    /// The next action to perform, with its index for `record`. Actions
    /// whose prerequisites failed are marked deferred and passed over.
    /// Returns `None` when done, when stopping, or while an action is in
    /// flight (actions run one at a time: never two operations on one
    /// cluster's guests at once).
    pub fn next(&mut self, now: Timestamp) -> Option<(usize, &Action)> {
        if self.stopping
            || self
                .states
                .iter()
                .any(|s| matches!(s, ActionState::InProgress { .. }))
        {
            return None;
        }
        while self.cursor < self.actions.len() {
            let i = self.cursor;
            self.cursor += 1;
            let a = &self.actions[i];
            let blocked = a
                .deps
                .iter()
                .find(|d| self.failed.contains(&((*d).clone(), a.node.clone())));
            if let Some(dep) = blocked {
                self.states[i] = ActionState::Deferred {
                    reason: format!("deferred: prerequisite {dep} failed this cycle"),
                };
                if let Some(obj) = &a.object {
                    self.failed.insert((obj.clone(), a.node.clone()));
                }
                continue;
            }
            self.states[i] = ActionState::InProgress { started: now };
            return Some((i, &self.actions[i]));
        }
        None
    }

    /// Takes the result of the action `next()` handed out.
    pub fn record(&mut self, index: usize, outcome: Outcome, now: Timestamp) {
        let Some(state) = self.states.get_mut(index) else {
            return;
        };
        let started = match state {
            ActionState::InProgress { started } => *started,
            _ => now,
        };
        if outcome != Outcome::Succeeded
            && let Some(a) = self.actions.get(index)
            && let Some(obj) = &a.object
        {
            self.failed.insert((obj.clone(), a.node.clone()));
        }
        *state = ActionState::Done {
            outcome,
            started,
            finished: now,
        };
    }

    /// Shutdown: the action in flight may finish; nothing new starts and
    /// what is left is deferred.
    pub fn stop(&mut self) {
        self.stopping = true;
        for s in &mut self.states {
            if *s == ActionState::Pending {
                *s = ActionState::Deferred {
                    reason: "deferred: shutting down".into(),
                };
            }
        }
    }

    pub fn is_finished(&self) -> bool {
        !self
            .states
            .iter()
            .any(|s| matches!(s, ActionState::Pending | ActionState::InProgress { .. }))
    }

    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    pub fn states(&self) -> &[ActionState] {
        &self.states
    }

    /// Counts of actions that succeeded and failed.
    pub fn counts(&self) -> (usize, usize) {
        let mut ok = 0;
        let mut err = 0;
        for s in &self.states {
            match s {
                ActionState::Done {
                    outcome: Outcome::Succeeded,
                    ..
                } => ok += 1,
                ActionState::Done { .. } => err += 1,
                _ => {}
            }
        }
        (ok, err)
    }

    /// The execution's part of each object's state after the read-back
    /// re-plan (`readback`, `None` when the read-back itself failed): one
    /// record per object and node that had an action. Callers want
    /// [`crate::state::object_states`], which adds the plan's part and
    /// holds the precedence of both.
    pub fn finish(
        &self,
        plan: &Plan,
        readback: Option<&Plan>,
        now: Timestamp,
    ) -> Vec<ObjectReport> {
        let mut reports: BTreeMap<(String, String, String), ObjectReport> = BTreeMap::new();
        let key = |kind: &str, name: &str, node: &str| {
            (kind.to_owned(), name.to_owned(), node.to_owned())
        };
        let pending_after: BTreeSet<(String, String)> = readback
            .map(|p| {
                p.actions
                    .iter()
                    .map(|a| (a.kind.to_string(), a.name.clone()))
                    .collect()
            })
            .unwrap_or_default();
        // Objects the read-back finds waiting for a restart (their write
        // went pending): named with the keys.
        let restart_after: BTreeMap<(String, String), String> = readback
            .map(|p| {
                p.skipped
                    .iter()
                    .filter(|s| s.reason.is_pending_restart())
                    .map(|s| ((s.kind.to_string(), s.name.clone()), s.reason.to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let anomalous: BTreeMap<(String, String), String> = plan
            .anomalies
            .iter()
            .filter_map(|a| {
                let (kind, name) = a.object()?;
                Some(((kind.to_string(), name.to_owned()), a.message.clone()))
            })
            .collect();

        for (a, s) in self.actions.iter().zip(&self.states) {
            let k = key(a.kind.as_str(), &a.name, a.node.as_str());
            let entry = reports.entry(k).or_insert_with(|| ObjectReport::new(a));
            entry.last_action = Some(a.op.as_str().to_owned());
            match s {
                ActionState::Done {
                    outcome: Outcome::Succeeded,
                    ..
                } => {
                    if a.op == Op::Prune {
                        entry.state = ObjectState::Pruned;
                        entry.prune_reason = Some(a.reason.clone());
                    } else if entry.state != ObjectState::Failed {
                        entry.state = ObjectState::InProgress;
                    }
                }
                ActionState::Done {
                    outcome: Outcome::Failed { error, .. },
                    ..
                } => {
                    entry.state = ObjectState::Failed;
                    entry.last_error = Some(error.clone());
                }
                ActionState::Done {
                    outcome: Outcome::ChangedUnderUs,
                    ..
                } => {
                    entry.state = ObjectState::Failed;
                    entry.last_error = Some("changed on PVE between read and write (digest mismatch); re-planned next cycle".into());
                }
                ActionState::Deferred { reason } => {
                    if entry.state != ObjectState::Failed {
                        entry.state = ObjectState::Skipped;
                        entry.last_error = Some(reason.clone());
                    }
                }
                ActionState::Pending | ActionState::InProgress { .. } => {
                    entry.state = ObjectState::Drift;
                }
            }
        }
        for r in reports.values_mut() {
            if r.state == ObjectState::InProgress {
                let still = pending_after.contains(&(r.kind.clone(), r.name.clone()));
                let waiting = restart_after.get(&(r.kind.clone(), r.name.clone()));
                if let Some(why) = waiting.filter(|_| !still) {
                    r.state = ObjectState::PendingRestart;
                    r.last_error = Some(why.clone());
                } else if readback.is_some() && !still {
                    r.state = ObjectState::Converged;
                    r.last_converged_at = Some(now);
                } else {
                    r.state = ObjectState::Drift;
                    r.last_error = Some(if readback.is_some() {
                        "read back from PVE, still differs".into()
                    } else {
                        "read-back failed; convergence not confirmed".into()
                    });
                }
            }
            if let Some(m) = anomalous.get(&(r.kind.clone(), r.name.clone()))
                && r.state != ObjectState::Failed
            {
                r.state = ObjectState::Anomalous;
                r.last_error = Some(m.clone());
            }
        }
        reports.into_values().collect()
    }
}

/// One object's outcome this cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectReport {
    pub kind: String,
    pub name: String,
    pub node: String,
    pub id: String,
    pub state: ObjectState,
    pub last_action: Option<String>,
    pub last_error: Option<String>,
    pub prune_reason: Option<String>,
    pub last_converged_at: Option<Timestamp>,
}

impl ObjectReport {
    fn new(a: &Action) -> ObjectReport {
        ObjectReport {
            kind: a.kind.to_string(),
            name: a.name.clone(),
            node: a.node.to_string(),
            id: a.target.to_string(),
            state: ObjectState::Desired,
            last_action: None,
            last_error: None,
            prune_reason: None,
            last_converged_at: None,
        }
    }
}
