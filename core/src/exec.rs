//! The execution state machine, sans-IO in the manner of quinn-proto.
//!
//! Call order: `Execution::new(plan)` (one action at a time) or
//! [`Execution::with_limits`]; then repeatedly `next()` to get a runnable
//! action, hand it to a worker, and `next()` again until it returns `None`;
//! each result goes to `record()`, in any order. `next()` hands out every
//! action whose prerequisites have ended ([`crate::rollout::prerequisites`]),
//! up to the limits (actions in flight per node and per cluster, downloads
//! per storage, the disruption budget per cluster and per group).
//! `stop()` (shutdown) lets the actions in flight finish and starts no
//! other. After a read-back the caller passes the re-planned plan to
//! `finish()`, which decides each object's final state: `converged` only
//! when PVE, read back, matches.
//!
//! A failed prerequisite defers its dependants (and theirs) for this
//! cycle; independent branches go on. A failed disruptive action (a
//! stop-start update whose restart failed, a stop, a reboot) pauses the
//! rollout: its guest may be left down and counts against the disruption
//! budget for the rest of the cycle, so no other disruptive action starts
//! (each is deferred, saying why); the others go on. Prunes start only after every other
//! action has ended. Nothing is retried within a cycle and no state
//! survives it. No clock inside: every timestamp is an argument.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::action::{Action, Op};
use crate::plan::Plan;
use crate::pve_error::PveError;
use crate::rollout::{self, Limits, Wait};

pub use proxops_model::time::Timestamp;

/// How one action ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    /// PVE or the transport refused or failed it (`pve`: PVE's answer,
    /// classified once by `step::classify`), or ProxOps ended it before
    /// anything was sent to the guest (`pve` is `None`: the guest was not
    /// as the plan saw it, or its step could not be made). `error` tells
    /// the whole story in an operator's words.
    Failed {
        error: String,
        pve: Option<PveError>,
    },
    /// The config changed between our read and our write (digest mismatch):
    /// nothing was overwritten; the next cycle re-plans it.
    ChangedUnderUs,
}

impl Outcome {
    /// A failure expected to clear by itself (a locked guest, a lock
    /// timeout, a busy PVE, no answer): the next cycle tries again.
    pub fn is_transient(&self) -> bool {
        matches!(self, Outcome::Failed { pve: Some(e), .. } if e.is_transient())
    }

    /// A failure ProxOps itself ended (nothing PVE answered failed it).
    pub fn failed(error: String) -> Outcome {
        Outcome::Failed { error, pve: None }
    }
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

/// Drives one plan's actions, several at once within the limits.
#[derive(Debug, Clone)]
pub struct Execution {
    actions: Vec<Action>,
    states: Vec<ActionState>,
    /// Per action: the earlier actions it waits for.
    prereqs: Vec<Vec<(usize, Wait)>>,
    /// Per action: it makes a guest unavailable, and its disruption group.
    disruptive: Vec<Option<Option<String>>>,
    limits: Limits,
    /// Every action before this one has ended or is in flight.
    first_open: usize,
    /// Non-prune actions not yet ended: prunes wait for none to be left.
    others_open: usize,
    stopping: bool,
    /// A disruptive action failed this cycle (its guest may be left down,
    /// and still counts as down): the rollout stops taking guests down,
    /// and this says which.
    paused: Option<String>,
}

impl Execution {
    /// One action at a time, as a caller without limits gets it.
    pub fn new(plan: &Plan) -> Execution {
        Execution::with_limits(plan, &Limits::serial(), |_| None)
    }

    /// Actions run at once within `limits`; `group` names each action's
    /// disruption group ([`crate::rollout::disruption_group`]).
    pub fn with_limits(
        plan: &Plan,
        limits: &Limits,
        group: impl Fn(&Action) -> Option<String>,
    ) -> Execution {
        let actions = if plan.is_aborted() {
            Vec::new()
        } else {
            plan.actions.clone()
        };
        let states = vec![ActionState::Pending; actions.len()];
        let prereqs = rollout::prerequisites(&actions);
        let disruptive = actions
            .iter()
            .map(|a| rollout::is_disruptive(a).then(|| group(a)))
            .collect();
        let others_open = actions.iter().filter(|a| a.op != Op::Prune).count();
        let mut limits = limits.clone();
        limits.per_node = limits.per_node.max(1);
        limits.per_cluster = limits.per_cluster.max(1);
        limits.downloads_per_storage = limits.downloads_per_storage.max(1);
        limits.disruption.cluster = limits.disruption.cluster.max(1);
        Execution {
            actions,
            states,
            prereqs,
            disruptive,
            limits,
            first_open: 0,
            others_open,
            stopping: false,
            paused: None,
        }
    }

    /// The next action to start now, with its index for `record`: the
    /// first in plan order whose prerequisites have ended and that fits
    /// the limits. Actions whose prerequisites failed are marked deferred
    /// and passed over. Returns `None` when stopping, when done, or when
    /// nothing more may start until an action in flight ends.
    pub fn next(&mut self, now: Timestamp) -> Option<(usize, &Action)> {
        if self.stopping {
            return None;
        }
        while self
            .states
            .get(self.first_open)
            .is_some_and(|s| !matches!(s, ActionState::Pending))
        {
            self.first_open += 1;
        }
        let mut found = None;
        for i in self.first_open..self.actions.len() {
            if self.states[i] != ActionState::Pending {
                continue;
            }
            // Paused: a disruptive action whose turn has come is deferred
            // (only once the actions it waits for have ended, so the next
            // action on its guest still waits for those).
            let readiness = match (self.ready(i), &self.paused, &self.disruptive[i]) {
                (Readiness::Ready, Some(why), Some(_)) => Readiness::Deferred(why.clone()),
                (r, _, _) => r,
            };
            match readiness {
                Readiness::Blocked => continue,
                Readiness::Deferred(reason) => {
                    self.end_open(i);
                    self.states[i] = ActionState::Deferred { reason };
                    continue;
                }
                Readiness::Ready => {}
            }
            if self.fits(i) {
                found = Some(i);
                break;
            }
        }
        let i = found?;
        self.states[i] = ActionState::InProgress { started: now };
        Some((i, &self.actions[i]))
    }

    /// Takes the result of an action `next()` handed out, in any order.
    pub fn record(&mut self, index: usize, outcome: Outcome, now: Timestamp) {
        let Some(ActionState::InProgress { started }) = self.states.get(index).cloned() else {
            return;
        };
        self.end_open(index);
        if outcome != Outcome::Succeeded
            && self.disruptive[index].is_some()
            && self.paused.is_none()
        {
            let a = &self.actions[index];
            self.paused = Some(format!(
                "deferred: the rollout paused after {} {}/{} failed this cycle (its guest may be left down, and counts as down)",
                a.op, a.kind, a.name
            ));
        }
        self.states[index] = ActionState::Done {
            outcome,
            started,
            finished: now,
        };
    }

    /// Actions handed out and not yet recorded.
    pub fn in_flight(&self) -> impl Iterator<Item = (usize, &Action)> {
        self.states
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, ActionState::InProgress { .. }))
            .map(|(i, _)| (i, &self.actions[i]))
    }

    /// The limits this execution runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Action `i` ends (done or deferred): a non-prune one no longer holds
    /// the prunes back.
    fn end_open(&mut self, i: usize) {
        if self.actions[i].op != Op::Prune {
            self.others_open = self.others_open.saturating_sub(1);
        }
    }

    /// Whether action `i` (pending) may start as far as the actions it
    /// waits for are concerned: only once all of them have ended, so that
    /// even a deferral ends after the earlier actions on its guest.
    fn ready(&self, i: usize) -> Readiness {
        let a = &self.actions[i];
        let mut failed = None;
        for &(j, wait) in &self.prereqs[i] {
            match (&self.states[j], wait) {
                (ActionState::Pending | ActionState::InProgress { .. }, _) => {
                    return Readiness::Blocked;
                }
                (
                    ActionState::Done {
                        outcome: Outcome::Succeeded,
                        ..
                    },
                    _,
                )
                | (_, Wait::Order) => {}
                (_, Wait::Dependency) => {
                    failed = failed.or(Some(j));
                }
            }
        }
        if let Some(j) = failed {
            let dep = self.actions[j]
                .object
                .as_ref()
                .map_or_else(|| self.actions[j].name.clone(), ToString::to_string);
            return Readiness::Deferred(format!("deferred: prerequisite {dep} failed this cycle"));
        }
        if a.op == Op::Prune && self.others_open > 0 {
            return Readiness::Blocked;
        }
        Readiness::Ready
    }

    /// Whether action `i` fits the limits next to the actions in flight.
    fn fits(&self, i: usize) -> bool {
        let a = &self.actions[i];
        let storage = rollout::download_storage(a);
        let disruptive = self.disruptive[i].as_ref();
        let (mut cluster, mut node, mut downloads, mut down, mut group) = (0, 0, 0, 0, 0);
        for (j, b) in self.in_flight() {
            cluster += 1;
            node += usize::from(b.node == a.node);
            downloads += usize::from(storage.is_some() && rollout::download_storage(b) == storage);
            if let (Some(mine), Some(theirs)) = (disruptive, self.disruptive[j].as_ref()) {
                down += 1;
                group += usize::from(mine.is_some() && mine == theirs);
            }
        }
        let l = &self.limits;
        cluster < l.per_cluster
            && node < l.per_node
            && (storage.is_none() || downloads < l.downloads_per_storage)
            && match disruptive {
                None => true,
                Some(None) => down < l.disruption.cluster,
                Some(Some(g)) => down < l.disruption.cluster && group < l.disruption.of_group(g),
            }
    }

    /// Shutdown: the actions in flight may finish; nothing new starts and
    /// what is left is deferred.
    pub fn stop(&mut self) {
        self.stopping = true;
        for i in 0..self.states.len() {
            if self.states[i] == ActionState::Pending {
                self.end_open(i);
                self.states[i] = ActionState::Deferred {
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

/// Whether a pending action may start, as far as its prerequisites say.
enum Readiness {
    Ready,
    /// A prerequisite is still pending or in flight.
    Blocked,
    /// A dependency failed or was deferred: this action is deferred too.
    Deferred(String),
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
