//! Cycle reports, the status store, and what `/status`, `/metrics` and
//! `/healthz` say (spec §17.2–§17.4, §22.6).
//!
//! Owns: the [`CycleReport`] one reconcile cycle produces (per cluster: its
//! result, counters, object records, anomalies and actions), the
//! [`StatusStore`] that accumulates cycles for a long-running process, and
//! the three renderings served over HTTP — JSON status
//! ([`render_status_json`]), Prometheus text ([`render_metrics`]) and the
//! health verdict ([`healthz`]). Timestamps are written by
//! [`proxops_model::time::rfc3339`].
//!
//! Must never: read a clock (every "now" is an argument), hold or render a
//! secret (the store is built only from object identities, states, counts
//! and error texts, which are secret-free by construction upstream: action
//! parameters, where secrets live, never reach it), or depend on hash order
//! (every map is a `BTreeMap`; same store and `now`, same bytes out).
//!
//! Call order for a daemon: `StatusStore::new(process_start)` once; after
//! each cycle build one [`ClusterReport`] per cluster (usually with
//! [`ClusterReport::from_cycle`]), wrap them in a [`CycleReport`] and hand it
//! to [`StatusStore::record_cycle`]; add PVE request counts with
//! [`StatusStore::add_pve_requests`]; render on demand with the current time.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

use serde::Serialize;

use crate::action::{Action, AnomalyType, Change, Impact, Op};
use crate::exec::{ActionState, Execution, ObjectReport, ObjectState, Outcome, Timestamp};
use crate::plan::{AbortCause, Plan};
use proxops_model::names::Kind;
pub use proxops_model::outcome::CycleResult;
use proxops_model::repo::ClusterDesired;
use proxops_model::time::rfc3339;

/// Kept here too: stores merge records of one object across cycles.
pub use crate::state::merge_records;

/// What a daemon does with its plans: execute them, or only observe
/// (`run --dry-run`: read, plan and report; no write ever reaches PVE).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunMode {
    #[default]
    Apply,
    Observe,
}

impl RunMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RunMode::Apply => "apply",
            RunMode::Observe => "observe",
        }
    }
}

/// An action planned but not done this cycle: every planned action of a
/// dry-run cycle, or one that did not succeed in an executed cycle. Its
/// field changes show secrets as `<secret>`, as every rendering does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PendingAction {
    pub kind: String,
    pub name: String,
    pub node: String,
    pub id: String,
    /// An [`Op::as_str`] name.
    pub action: &'static str,
    pub impact: Impact,
    pub reason: String,
    pub changes: Vec<Change>,
}

impl PendingAction {
    pub fn of(a: &Action) -> PendingAction {
        PendingAction {
            kind: a.kind.to_string(),
            name: a.name.clone(),
            node: a.node.to_string(),
            id: a.target.to_string(),
            action: a.op.as_str(),
            impact: a.impact,
            reason: a.reason.clone(),
            changes: a.changes.clone(),
        }
    }
}

/// One action of an object's last plan, and what became of it: what the
/// dashboard's object page shows under "last planned".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedAction {
    #[serde(flatten)]
    pub action: PendingAction,
    /// `ok`, `error` or `skipped` when the cycle executed its plan; `null`
    /// when it only planned (a dry run).
    pub result: Option<ActionResult>,
}

/// A plan anomaly about one object: something for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AnomalyRecord {
    pub kind: String,
    pub name: String,
    #[serde(rename = "type")]
    pub anomaly_type: AnomalyType,
    /// The PVE key concerned, when there is one.
    pub field: Option<String>,
    pub message: String,
}

/// An object held back after a failed disruptive action: ProxOps does not
/// try it again before `until`. The daemon's hold policy fills it in
/// ([`ClusterReport::holds`]); every rendering shows it when present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// When the next attempt may start.
    pub until: Timestamp,
    /// Why it is held (the failure that started the hold).
    pub reason: String,
}

impl From<&HeldObject> for Hold {
    fn from(h: &HeldObject) -> Hold {
        Hold {
            until: h.next_attempt,
            reason: match h.failures {
                0 | 1 => format!("{} failed: {}", h.op, h.last_error),
                n => format!("{} failed {n} times in a row: {}", h.op, h.last_error),
            },
        }
    }
}

/// Where a cluster stands, as the dashboard and `/status` say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncState {
    /// No cycle of it has finished yet.
    Waiting,
    /// Every object matches: nothing planned, nothing failed or held.
    Converged,
    /// Something differs: planned and not done, failed, anomalous,
    /// skipped or waiting for a restart.
    Drifting,
    /// A cycle is executing its plan right now.
    Applying,
    /// Its last cycle did nothing (`abort_reason` says why).
    Aborted,
}

impl SyncState {
    pub fn as_str(self) -> &'static str {
        match self {
            SyncState::Waiting => "waiting",
            SyncState::Converged => "converged",
            SyncState::Drifting => "drifting",
            SyncState::Applying => "applying",
            SyncState::Aborted => "aborted",
        }
    }
}

/// One cluster's cycle, as the timeline lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleEntry {
    pub cluster: String,
    /// The desired-state commit it planned from ("" when none).
    pub commit: String,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// How long it took, in milliseconds.
    pub took_ms: u64,
    pub result: CycleResult,
    /// Empty unless the cluster aborted.
    pub abort_reason: String,
    pub actions_ok: u64,
    pub actions_error: u64,
    /// The cluster's objects not converged after the cycle: its drift.
    pub unconverged: u64,
    /// How the cluster stood after it.
    pub sync: SyncState,
}

/// How sending to one notification target goes: what `/status`,
/// `/metrics` and the dashboard say of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetHealth {
    /// `webhook`, `slack`, `ntfy`, `gotify`.
    pub kind: String,
    pub sent: u64,
    /// Sends that failed (each attempt).
    pub failed: u64,
    /// Messages given up after their last attempt.
    pub gave_up: u64,
    /// Messages dropped from a full queue.
    pub dropped: u64,
    /// Messages waiting now.
    pub queued: u64,
    /// The last attempt failed (until one succeeds).
    pub failing: bool,
    /// Why the last failed attempt failed (status or network error; never
    /// the URL or a token).
    pub last_error: String,
    pub last_failure_at: Option<Timestamp>,
    pub last_sent_at: Option<Timestamp>,
}

/// One attempt to notify a target, or a message it lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// `gave_up`: the message is not tried again.
    Failed {
        error: String,
        gave_up: bool,
    },
    Dropped,
}

/// How many cycles the timeline keeps (over all clusters): two hours at
/// the default poll interval of one cluster.
pub const RECENT_CYCLES: usize = 240;

/// The `result` label of `proxops_actions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionResult {
    Ok,
    Error,
    /// Not attempted: a prerequisite failed, or shutdown.
    Skipped,
}

impl ActionResult {
    pub fn as_str(self) -> &'static str {
        match self {
            ActionResult::Ok => "ok",
            ActionResult::Error => "error",
            ActionResult::Skipped => "skipped",
        }
    }
}

/// Key of one `proxops_actions_total` series: kind, action (an
/// [`Op::as_str`] name), result.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ActionKey {
    pub kind: String,
    pub action: String,
    pub result: ActionResult,
}

/// The per-cycle counters of `/status` `last_cycle` (spec §17.3, §22.6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CycleCounts {
    /// Object records written this cycle.
    pub objects: u64,
    pub actions_ok: u64,
    pub actions_error: u64,
    /// Successful prune actions.
    pub pruned: u64,
    /// Prunes held back by the budget or the empty-desired guard.
    pub prune_deferred: u64,
    /// The plan's skipped entries.
    pub skipped: u64,
    pub anomalies: u64,
}

impl CycleCounts {
    fn add(&mut self, o: &CycleCounts) {
        self.objects += o.objects;
        self.actions_ok += o.actions_ok;
        self.actions_error += o.actions_error;
        self.pruned += o.pruned;
        self.prune_deferred += o.prune_deferred;
        self.skipped += o.skipped;
        self.anomalies += o.anomalies;
    }
}

/// What one cluster's part of a cycle did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterReport {
    pub name: String,
    pub result: CycleResult,
    pub aborted: bool,
    /// Empty unless `aborted`.
    pub abort_reason: String,
    pub counts: CycleCounts,
    /// Every desired object's record this cycle, plus prunes and anomalies.
    /// A cluster that was not aborted replaces all its records in the
    /// store with these; include converged objects too (§22.6 step 7).
    pub objects: Vec<ObjectReport>,
    /// Anomalies this cycle, by type.
    pub anomalies: BTreeMap<AnomalyType, u64>,
    /// Actions this cycle, by kind, action and result (executed cycles only).
    pub actions: BTreeMap<ActionKey, u64>,
    /// Deferred prunes this cycle, by kind.
    pub prune_deferred: BTreeMap<String, u64>,
    /// Running on a cached tree after a failed git fetch.
    pub desired_stale: bool,
    /// The PVE write circuit breaker was open (§18.3).
    pub read_only: bool,
    /// When the live inventory was last read successfully in this cycle.
    pub pve_read_at: Option<Timestamp>,
    /// Actions planned and not done this cycle, in plan order.
    pub pending: Vec<PendingAction>,
    /// The guests ProxOps runs in, as the plan found them.
    pub self_guests: Vec<crate::host::SelfGuest>,
    /// Every action of the plan, in plan order, with its result.
    pub planned: Vec<PlannedAction>,
    /// The plan's anomalies that name an object.
    pub object_anomalies: Vec<AnomalyRecord>,
    /// Each desired object's manifest file, keyed `Kind/name`.
    pub manifests: BTreeMap<String, String>,
    /// How long the cluster's cycle took, in milliseconds (0: not
    /// measured; the cycle's whole seconds are used instead).
    pub elapsed_ms: u64,
    /// Guests held back after a failed disruptive action, with their next
    /// attempt (the daemon's holds after this cycle; empty elsewhere).
    pub holds: Vec<HeldObject>,
}

/// A guest held back after its shutdown, reboot or stop-start write
/// failed ([`crate::hold`]), as `/status` and `/metrics` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldObject {
    pub kind: String,
    pub name: String,
    /// The action that failed (`update`, `reboot`, `stop`, …).
    pub op: String,
    /// Failures in a row.
    pub failures: u32,
    /// When the daemon tries it again (at once after a commit that
    /// changes it).
    pub next_attempt: Timestamp,
    pub last_error: String,
}

impl HeldObject {
    /// Every hold of one cluster, sorted by kind and name.
    pub fn all(holds: &crate::hold::Holds) -> Vec<HeldObject> {
        holds
            .iter()
            .map(|(r, h)| HeldObject {
                kind: r.kind.to_string(),
                name: r.name.to_string(),
                op: h.op.clone(),
                failures: h.failures,
                next_attempt: h.next_attempt,
                last_error: h.error.clone(),
            })
            .collect()
    }
}

impl ClusterReport {
    /// A cluster that did nothing this cycle; the result comes from the
    /// cause ([`AbortCause::result`]), never from the reason's wording.
    pub fn aborted(
        name: impl Into<String>,
        cause: AbortCause,
        reason: impl Into<String>,
    ) -> ClusterReport {
        ClusterReport::aborted_as(name.into(), cause.result(), reason.into())
    }

    fn aborted_as(name: String, result: CycleResult, reason: String) -> ClusterReport {
        ClusterReport {
            name,
            result,
            aborted: true,
            abort_reason: reason,
            counts: CycleCounts::default(),
            objects: Vec::new(),
            anomalies: BTreeMap::new(),
            actions: BTreeMap::new(),
            prune_deferred: BTreeMap::new(),
            desired_stale: false,
            read_only: false,
            pve_read_at: None,
            pending: Vec::new(),
            self_guests: Vec::new(),
            planned: Vec::new(),
            object_anomalies: Vec::new(),
            manifests: BTreeMap::new(),
            holds: Vec::new(),
            elapsed_ms: 0,
        }
    }

    /// Builds a cluster's report from its plan, the execution (`None` for a
    /// dry run or when nothing ran), the object records
    /// [`crate::state::object_states`] gave (empty when nothing ran) and the
    /// cluster's desired state (`None` when it could not be loaded).
    ///
    /// Object states follow [`crate::state::object_states`]' precedence;
    /// records it did not give yet (a dry run's, the desired objects') are
    /// added by the same rules. Result: the abort
    /// cause's class if the plan was aborted, else `dry_run` or `ok`.
    /// `pve_read_at` is set to `finished_at` unless the plan was aborted.
    /// `pending`: without an execution every planned action, else those
    /// that did not succeed.
    pub fn from_cycle(
        plan: &Plan,
        execution: Option<&Execution>,
        objects: Vec<ObjectReport>,
        desired: Option<&ClusterDesired>,
        dry_run: bool,
        finished_at: Timestamp,
    ) -> ClusterReport {
        let name = plan.cluster.to_string();
        if let Some(abort) = &plan.abort {
            let mut r = ClusterReport::aborted_as(name, abort.cause.result(), abort.reason.clone());
            r.objects = objects;
            r.counts.objects = r.objects.len() as u64;
            return r;
        }
        let records = crate::state::complete(plan, execution.is_some(), objects, desired);

        let mut counts = CycleCounts {
            objects: records.len() as u64,
            prune_deferred: plan.deferred.len() as u64,
            skipped: plan.skipped.len() as u64,
            anomalies: plan.anomalies.len() as u64,
            ..CycleCounts::default()
        };
        let mut actions: BTreeMap<ActionKey, u64> = BTreeMap::new();
        if let Some(ex) = execution {
            for (a, s) in ex.actions().iter().zip(ex.states()) {
                let result = action_result(s);
                match result {
                    ActionResult::Ok => {
                        counts.actions_ok += 1;
                        if a.op == Op::Prune {
                            counts.pruned += 1;
                        }
                    }
                    ActionResult::Error => counts.actions_error += 1,
                    ActionResult::Skipped => {}
                }
                let key = ActionKey {
                    kind: a.kind.to_string(),
                    action: a.op.as_str().to_owned(),
                    result,
                };
                *actions.entry(key).or_default() += 1;
            }
        }
        let mut anomalies: BTreeMap<AnomalyType, u64> = BTreeMap::new();
        for an in &plan.anomalies {
            *anomalies.entry(an.anomaly_type()).or_default() += 1;
        }
        let mut prune_deferred: BTreeMap<String, u64> = BTreeMap::new();
        for d in &plan.deferred {
            *prune_deferred.entry(d.kind.to_string()).or_default() += 1;
        }
        let planned: Vec<PlannedAction> = match execution {
            None => plan
                .actions
                .iter()
                .map(|a| PlannedAction {
                    action: PendingAction::of(a),
                    result: None,
                })
                .collect(),
            Some(ex) => ex
                .actions()
                .iter()
                .zip(ex.states())
                .map(|(a, s)| PlannedAction {
                    action: PendingAction::of(a),
                    result: Some(action_result(s)),
                })
                .collect(),
        };
        let pending = planned
            .iter()
            .filter(|p| p.result != Some(ActionResult::Ok))
            .map(|p| p.action.clone())
            .collect();
        ClusterReport {
            name,
            result: if dry_run {
                CycleResult::DryRun
            } else {
                CycleResult::Ok
            },
            aborted: false,
            abort_reason: String::new(),
            counts,
            objects: records,
            anomalies,
            actions,
            prune_deferred,
            desired_stale: false,
            read_only: false,
            pve_read_at: Some(finished_at),
            pending,
            self_guests: plan.self_guests.clone(),
            planned,
            object_anomalies: object_anomalies(plan),
            manifests: manifests(desired),
            holds: Vec::new(),
            elapsed_ms: 0,
        }
    }
}

/// An action's result for `proxops_actions_total` and the object page.
fn action_result(s: &ActionState) -> ActionResult {
    match s {
        ActionState::Done {
            outcome: Outcome::Succeeded,
            ..
        } => ActionResult::Ok,
        ActionState::Done { .. } => ActionResult::Error,
        ActionState::Deferred { .. } | ActionState::Pending | ActionState::InProgress { .. } => {
            ActionResult::Skipped
        }
    }
}

/// The plan's anomalies about one object each.
fn object_anomalies(plan: &Plan) -> Vec<AnomalyRecord> {
    plan.anomalies
        .iter()
        .filter_map(|a| {
            let (kind, name) = a.object()?;
            Some(AnomalyRecord {
                kind: kind.to_string(),
                name: name.to_owned(),
                anomaly_type: a.anomaly_type(),
                field: a.field.clone(),
                message: a.message.clone(),
            })
        })
        .collect()
}

/// Each desired object's manifest file, keyed `Kind/name`.
fn manifests(desired: Option<&ClusterDesired>) -> BTreeMap<String, String> {
    desired
        .iter()
        .flat_map(|d| d.objects.values())
        .map(|o| {
            (
                format!("{}/{}", o.r#ref.kind.as_str(), o.r#ref.name),
                o.file.clone(),
            )
        })
        .collect()
}

/// One reconcile cycle over the clusters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CycleReport {
    /// The desired-state commit planned from ("" when none could be read).
    pub commit: String,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// How long the cycle took, in milliseconds, as the shell's monotonic
    /// clock measured it: the timestamps are whole seconds, and a
    /// sub-second cycle would count as no time at all.
    pub duration_ms: u64,
    /// Every configured cluster had its turn (a cluster that aborted still
    /// had its turn; a cycle cut short by shutdown did not). Only complete
    /// cycles count for `/healthz`.
    pub complete: bool,
    /// When the desired tree was last fetched (URL mode) or read (local
    /// mode) successfully in this cycle; `None` when that failed.
    pub git_fetched_at: Option<Timestamp>,
    /// In cluster order.
    pub clusters: Vec<ClusterReport>,
}

impl CycleReport {
    /// Sum of the clusters' counters.
    pub fn counts(&self) -> CycleCounts {
        let mut c = CycleCounts::default();
        for cl in &self.clusters {
            c.add(&cl.counts);
        }
        c
    }

    pub fn desired_stale(&self) -> bool {
        self.clusters.iter().any(|c| c.desired_stale)
    }

    pub fn read_only(&self) -> bool {
        self.clusters.iter().any(|c| c.read_only)
    }

    pub fn aborted(&self) -> bool {
        self.clusters.iter().any(|c| c.aborted)
    }

    /// `<cluster>: <reason>` for each aborted cluster, joined with `; `.
    pub fn abort_reason(&self) -> String {
        self.clusters
            .iter()
            .filter(|c| c.aborted)
            .map(|c| format!("{}: {}", c.name, c.abort_reason))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One object's record in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredObject {
    pub cluster: String,
    pub report: ObjectReport,
    /// When this record was last written.
    pub updated_at: Timestamp,
    /// The object's actions planned and not done in its cluster's last
    /// cycle that was not aborted.
    pub pending: Vec<PendingAction>,
    /// The object's manifest file, when it has one (a prune has none).
    pub manifest: Option<String>,
    /// The object's actions in the last plan that had any, with their
    /// results, and when that cycle finished: kept through later cycles
    /// that plan nothing for it, so a converged object still shows what
    /// was last done to it.
    pub planned: Vec<PlannedAction>,
    pub planned_at: Option<Timestamp>,
    /// The last plan's anomalies about it.
    pub anomalies: Vec<AnomalyRecord>,
    /// Held back after a failed disruptive action.
    pub hold: Option<Hold>,
}

/// An object's record from this cycle's report `c` of its cluster and
/// its record before the cycle, if any.
fn stored_object(
    c: &ClusterReport,
    report: ObjectReport,
    previous: Option<&StoredObject>,
    finished_at: Timestamp,
) -> StoredObject {
    let mine = |kind: &str, name: &str| kind == report.kind && name == report.name;
    let key = format!("{}/{}", report.kind, report.name);
    let pending = c
        .pending
        .iter()
        .filter(|p| mine(&p.kind, &p.name))
        .cloned()
        .collect();
    let planned: Vec<PlannedAction> = c
        .planned
        .iter()
        .filter(|p| mine(&p.action.kind, &p.action.name))
        .cloned()
        .collect();
    let (planned, planned_at) = match previous {
        Some(p) if planned.is_empty() => (p.planned.clone(), p.planned_at),
        _ if planned.is_empty() => (planned, None),
        _ => (planned, Some(finished_at)),
    };
    StoredObject {
        cluster: c.name.clone(),
        updated_at: finished_at,
        pending,
        manifest: c.manifests.get(&key).cloned(),
        planned,
        planned_at,
        anomalies: c
            .object_anomalies
            .iter()
            .filter(|a| mine(&a.kind, &a.name))
            .cloned()
            .collect(),
        hold: c
            .holds
            .iter()
            .find(|h| mine(&h.kind, &h.name))
            .map(Hold::from),
        report,
    }
}

/// Whether an object needs nothing: converged (or just pruned), with no
/// action left and no hold.
fn is_settled(o: &StoredObject) -> bool {
    matches!(o.report.state, ObjectState::Converged | ObjectState::Pruned)
        && o.pending.is_empty()
        && o.hold.is_none()
}

/// Upper bounds (seconds) of the `proxops_cycle_duration_seconds` buckets;
/// `+Inf` is implied.
pub const CYCLE_DURATION_BUCKETS: [u64; 9] = [1, 5, 10, 30, 60, 120, 300, 600, 1800];

/// Everything `/status`, `/metrics` and `/healthz` need, accumulated over
/// the cycles of one process. Holds no secret: only identities, states,
/// counts and error texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusStore {
    process_start: Timestamp,
    mode: RunMode,
    last_cycle: Option<CycleReport>,
    last_full_cycle_finished_at: Option<Timestamp>,
    /// When each cluster's last complete cycle finished: with clusters on
    /// schedules of their own, a full cycle is as old as the stalest one.
    cluster_finished_at: BTreeMap<String, Timestamp>,
    /// The clusters the process works on ([`StatusStore::retain_clusters`]):
    /// until each has completed a turn, no full cycle has finished.
    expected: Vec<String>,
    /// Keyed `cluster|kind|name`.
    objects: BTreeMap<String, StoredObject>,
    cycles_total: BTreeMap<CycleResult, u64>,
    actions_total: BTreeMap<ActionKey, u64>,
    prune_deferred_total: BTreeMap<String, u64>,
    anomalies_total: BTreeMap<AnomalyType, u64>,
    pve_requests_total: BTreeMap<(String, String), u64>,
    git_last_fetch_at: Option<Timestamp>,
    pve_last_read_at: Option<Timestamp>,
    /// Cumulative counts per bucket of [`CYCLE_DURATION_BUCKETS`].
    duration_buckets: [u64; CYCLE_DURATION_BUCKETS.len()],
    duration_count: u64,
    /// Milliseconds, so sub-second cycles add up.
    duration_sum_ms: u64,
    /// The last [`RECENT_CYCLES`] cluster cycles, oldest first.
    recent: VecDeque<CycleEntry>,
    /// Each cluster's last cycle.
    cluster_cycles: BTreeMap<String, CycleEntry>,
    /// Clusters executing a plan now, and since when.
    applying: BTreeMap<String, Timestamp>,
    /// Notification targets by name.
    targets: BTreeMap<String, TargetHealth>,
}

impl StatusStore {
    pub fn new(process_start: Timestamp) -> StatusStore {
        StatusStore {
            process_start,
            mode: RunMode::Apply,
            last_cycle: None,
            last_full_cycle_finished_at: None,
            cluster_finished_at: BTreeMap::new(),
            expected: Vec::new(),
            objects: BTreeMap::new(),
            cycles_total: BTreeMap::new(),
            actions_total: BTreeMap::new(),
            prune_deferred_total: BTreeMap::new(),
            anomalies_total: BTreeMap::new(),
            pve_requests_total: BTreeMap::new(),
            git_last_fetch_at: None,
            pve_last_read_at: None,
            duration_buckets: [0; CYCLE_DURATION_BUCKETS.len()],
            duration_count: 0,
            duration_sum_ms: 0,
            recent: VecDeque::new(),
            cluster_cycles: BTreeMap::new(),
            applying: BTreeMap::new(),
            targets: BTreeMap::new(),
        }
    }

    /// A notification target to report on, before anything was sent.
    pub fn add_target(&mut self, name: &str, kind: &str) {
        self.targets.entry(name.to_owned()).or_default().kind = kind.to_owned();
    }

    /// What became of one message to target `name`, which has `queued`
    /// messages waiting after it.
    pub fn record_delivery(&mut self, name: &str, d: &Delivery, queued: usize, now: Timestamp) {
        let t = self.targets.entry(name.to_owned()).or_default();
        t.queued = queued as u64;
        match d {
            Delivery::Sent => {
                t.sent += 1;
                t.failing = false;
                t.last_sent_at = Some(now);
            }
            Delivery::Failed { error, gave_up } => {
                t.failed += 1;
                t.gave_up += u64::from(*gave_up);
                t.failing = true;
                t.last_error = error.clone();
                t.last_failure_at = Some(now);
            }
            Delivery::Dropped => t.dropped += 1,
        }
    }

    /// Notification targets by name.
    pub fn targets(&self) -> impl Iterator<Item = (&String, &TargetHealth)> {
        self.targets.iter()
    }

    /// Takes one finished cycle: bumps the counters (one `cycles_total` per
    /// cluster), replaces the object records of every cluster that was not
    /// aborted (an aborted cluster keeps its last known records), carries
    /// `last_converged_at` over from earlier cycles, and remembers the
    /// cycle as `last_cycle`.
    pub fn record_cycle(&mut self, cycle: CycleReport) {
        for c in &cycle.clusters {
            *self.cycles_total.entry(c.result).or_default() += 1;
            for (k, n) in &c.actions {
                *self.actions_total.entry(k.clone()).or_default() += n;
            }
            for (k, n) in &c.prune_deferred {
                *self.prune_deferred_total.entry(k.clone()).or_default() += n;
            }
            for (t, n) in &c.anomalies {
                *self.anomalies_total.entry(*t).or_default() += n;
            }
            if let Some(at) = c.pve_read_at {
                self.pve_last_read_at = Some(self.pve_last_read_at.map_or(at, |p| p.max(at)));
            }
            if c.aborted {
                continue;
            }
            let prefix = format!("{}|", c.name);
            let previous: BTreeMap<String, StoredObject> = {
                let keys: Vec<String> = self
                    .objects
                    .range(prefix.clone()..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .map(|(k, _)| k.clone())
                    .collect();
                keys.into_iter()
                    .filter_map(|k| self.objects.remove(&k).map(|v| (k, v)))
                    .collect()
            };
            for o in &c.objects {
                let key = format!("{}|{}|{}", c.name, o.kind, o.name);
                let mut report = o.clone();
                if report.last_converged_at.is_none() {
                    report.last_converged_at = if report.state == ObjectState::Converged {
                        Some(cycle.finished_at)
                    } else {
                        previous.get(&key).and_then(|p| p.report.last_converged_at)
                    };
                }
                // Two records of one object this cycle: keep the worse.
                let report = match self.objects.remove(&key) {
                    Some(done) => merge_records(done.report, report),
                    None => report,
                };
                let stored = stored_object(c, report, previous.get(&key), cycle.finished_at);
                self.objects.insert(key, stored);
            }
        }
        let mut by_name: Vec<&ClusterReport> = cycle.clusters.iter().collect();
        by_name.sort_by(|a, b| a.name.cmp(&b.name));
        for c in by_name {
            self.applying.remove(&c.name);
            let entry = CycleEntry {
                cluster: c.name.clone(),
                commit: cycle.commit.clone(),
                started_at: cycle.started_at,
                finished_at: cycle.finished_at,
                took_ms: if c.elapsed_ms > 0 {
                    c.elapsed_ms
                } else {
                    cycle.finished_at.saturating_sub(cycle.started_at) * 1000
                },
                result: c.result,
                abort_reason: c.abort_reason.clone(),
                actions_ok: c.counts.actions_ok,
                actions_error: c.counts.actions_error,
                unconverged: self.unconverged(&c.name),
                sync: self.settled_sync(c),
            };
            if self.recent.len() >= RECENT_CYCLES {
                self.recent.pop_front();
            }
            self.recent.push_back(entry.clone());
            self.cluster_cycles.insert(c.name.clone(), entry);
        }
        if let Some(at) = cycle.git_fetched_at {
            self.git_last_fetch_at = Some(self.git_last_fetch_at.map_or(at, |p| p.max(at)));
        }
        let duration_ms = cycle.duration_ms;
        for (i, le) in CYCLE_DURATION_BUCKETS.iter().enumerate() {
            if duration_ms <= le.saturating_mul(1000) {
                self.duration_buckets[i] += 1;
            }
        }
        self.duration_count += 1;
        self.duration_sum_ms = self.duration_sum_ms.saturating_add(duration_ms);
        if cycle.complete {
            for c in &cycle.clusters {
                self.cluster_finished_at
                    .insert(c.name.clone(), cycle.finished_at);
            }
            self.last_full_cycle_finished_at = self
                .full_cycle_at()
                .or_else(|| self.expected.is_empty().then_some(cycle.finished_at));
        }
        // A cycle of some clusters only (the daemon cycles each cluster on
        // its own schedule) keeps the others' last reports.
        let mut cycle = cycle;
        if let Some(previous) = self.last_cycle.take() {
            for c in previous.clusters {
                if !cycle.clusters.iter().any(|n| n.name == c.name) {
                    cycle.clusters.push(c);
                }
            }
            cycle.clusters.sort_by(|a, b| a.name.cmp(&b.name));
        }
        self.last_cycle = Some(cycle);
    }

    /// Forgets the last report of every cluster not in `names` (a cluster
    /// removed from the configuration).
    pub fn retain_clusters(&mut self, names: &[String]) {
        if let Some(c) = &mut self.last_cycle {
            c.clusters.retain(|r| names.contains(&r.name));
        }
        self.cluster_finished_at.retain(|n, _| names.contains(n));
        self.cluster_cycles.retain(|n, _| names.contains(n));
        self.applying.retain(|n, _| names.contains(n));
        self.expected = names.to_vec();
        self.last_full_cycle_finished_at = self.full_cycle_at();
    }

    /// When the stalest cluster last completed a turn: `None` while any
    /// cluster the process works on has not completed one yet (a fast
    /// cluster's turns say nothing of a slow one still in its first).
    fn full_cycle_at(&self) -> Option<Timestamp> {
        if self
            .expected
            .iter()
            .any(|n| !self.cluster_finished_at.contains_key(n))
        {
            return None;
        }
        self.cluster_finished_at.values().copied().min()
    }

    /// The clusters that have not completed a turn yet, while the process
    /// is starting (empty once every one has).
    pub fn starting(&self) -> Vec<&str> {
        self.expected
            .iter()
            .filter(|n| !self.cluster_finished_at.contains_key(*n))
            .map(String::as_str)
            .collect()
    }

    /// Cluster `name` has started executing its plan (until its cycle is
    /// recorded, it is [`SyncState::Applying`]).
    pub fn set_applying(&mut self, name: &str, since: Timestamp) {
        self.applying.insert(name.to_owned(), since);
    }

    /// Where cluster `name` stands now.
    pub fn sync(&self, name: &str) -> SyncState {
        if self.applying.contains_key(name) {
            return SyncState::Applying;
        }
        self.cluster_cycles
            .get(name)
            .map_or(SyncState::Waiting, |e| e.sync)
    }

    /// When cluster `name` started executing its plan, while it does.
    pub fn applying_since(&self, name: &str) -> Option<Timestamp> {
        self.applying.get(name).copied()
    }

    /// Each cluster's last cycle, by name.
    pub fn cluster_cycles(&self) -> impl Iterator<Item = &CycleEntry> {
        self.cluster_cycles.values()
    }

    /// The last cycles of every cluster, oldest first.
    pub fn recent_cycles(&self) -> impl DoubleEndedIterator<Item = &CycleEntry> {
        self.recent.iter()
    }

    /// The names of the clusters known to the store: those with a cycle
    /// recorded or executing now.
    pub fn cluster_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .cluster_cycles
            .keys()
            .chain(self.applying.keys())
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Objects of cluster `name` not converged: what the timeline calls
    /// its drift.
    fn unconverged(&self, name: &str) -> u64 {
        self.objects
            .values()
            .filter(|o| o.cluster == name && !is_settled(o))
            .count() as u64
    }

    /// How a cluster stands once its cycle `c` is recorded.
    fn settled_sync(&self, c: &ClusterReport) -> SyncState {
        if c.aborted {
            SyncState::Aborted
        } else if self.unconverged(&c.name) > 0 || !c.pending.is_empty() || !c.holds.is_empty() {
            SyncState::Drifting
        } else {
            SyncState::Converged
        }
    }

    /// Adds PVE request counts `(method, result, count)` as the transport
    /// reports them for the requests made since the last call (deltas, not
    /// running totals).
    pub fn add_pve_requests(&mut self, counts: &[(String, String, u64)]) {
        for (method, result, n) in counts {
            *self
                .pve_requests_total
                .entry((method.clone(), result.clone()))
                .or_default() += n;
        }
    }

    pub fn process_start(&self) -> Timestamp {
        self.process_start
    }

    /// Says whether the process executes its plans or only observes;
    /// `/status` and `/metrics` show it.
    pub fn set_mode(&mut self, mode: RunMode) {
        self.mode = mode;
    }

    pub fn mode(&self) -> RunMode {
        self.mode
    }

    pub fn last_cycle(&self) -> Option<&CycleReport> {
        self.last_cycle.as_ref()
    }

    pub fn last_full_cycle_finished_at(&self) -> Option<Timestamp> {
        self.last_full_cycle_finished_at
    }

    /// Object records, ordered by `cluster|kind|name`.
    pub fn objects(&self) -> impl Iterator<Item = &StoredObject> {
        self.objects.values()
    }

    /// The record of one object.
    pub fn object(&self, cluster: &str, kind: &str, name: &str) -> Option<&StoredObject> {
        self.objects.get(&format!("{cluster}|{kind}|{name}"))
    }

    pub fn cycles_total(&self, result: CycleResult) -> u64 {
        self.cycles_total.get(&result).copied().unwrap_or(0)
    }

    /// Seconds since the last successful git fetch (since process start
    /// when there was none, so a fetch that never works still ages).
    pub fn git_last_fetch_age(&self, now: Timestamp) -> u64 {
        now.saturating_sub(self.git_last_fetch_at.unwrap_or(self.process_start))
    }

    /// Seconds since the last successful PVE inventory read (since process
    /// start when there was none).
    pub fn pve_last_read_age(&self, now: Timestamp) -> u64 {
        now.saturating_sub(self.pve_last_read_at.unwrap_or(self.process_start))
    }
}

// ---------------------------------------------------------------------------
// /healthz

/// The shortest window in which a full cycle must have finished (§17.2).
pub const HEALTH_MIN_WINDOW_SECS: u64 = 120;

/// `/healthz`: `(200, "ok\n")` when a complete cycle finished within
/// `max(120 s, 3 × poll_interval_secs)` of `now`; otherwise 503 with the
/// reason (`starting: waiting for the first complete turn of a, b` while
/// a cluster the process works on has not completed one, `no cycle has
/// finished yet`, or `last full cycle finished N s ago (limit M s)`).
pub fn healthz(store: &StatusStore, now: Timestamp, poll_interval_secs: u64) -> (u16, String) {
    let window = HEALTH_MIN_WINDOW_SECS.max(poll_interval_secs.saturating_mul(3));
    let starting = store.starting();
    if !starting.is_empty() {
        return (
            503,
            format!(
                "starting: waiting for the first complete turn of {}\n",
                starting.join(", ")
            ),
        );
    }
    match store.last_full_cycle_finished_at {
        None => (503, "no cycle has finished yet\n".to_owned()),
        Some(at) => {
            let age = now.saturating_sub(at);
            if age <= window {
                (200, "ok\n".to_owned())
            } else {
                (
                    503,
                    format!("last full cycle finished {age} s ago (limit {window} s)\n"),
                )
            }
        }
    }
}

// ---------------------------------------------------------------------------
// /status

#[derive(Serialize)]
struct StatusDoc<'a> {
    /// `apply`, or `observe` for `run --dry-run`.
    mode: &'static str,
    /// Additive: `starting` until every cluster completed a turn, then
    /// `running`.
    state: &'static str,
    /// Additive: the clusters that have not completed a turn yet.
    starting: Vec<&'a str>,
    process_start: String,
    last_cycle: Option<LastCycleDoc<'a>>,
    objects: Vec<ObjectDoc<'a>>,
    /// Additive to §17.3: the last cycle per cluster.
    clusters: Vec<ClusterDoc<'a>>,
    /// Additive: the last cycles of every cluster, oldest first.
    recent_cycles: Vec<CycleDoc<'a>>,
    /// Additive: each notification target, and how sending to it goes.
    notifications: Vec<TargetDoc<'a>>,
}

#[derive(Serialize)]
struct TargetDoc<'a> {
    target: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    sent: u64,
    failed: u64,
    gave_up: u64,
    dropped: u64,
    queued: u64,
    failing: bool,
    last_error: &'a str,
    last_failure_at: Option<String>,
    last_sent_at: Option<String>,
}

#[derive(Serialize)]
struct CycleDoc<'a> {
    cluster: &'a str,
    commit: &'a str,
    started_at: String,
    finished_at: String,
    took_ms: u64,
    result: &'static str,
    abort_reason: &'a str,
    actions_ok: u64,
    actions_error: u64,
    unconverged: u64,
    sync: &'static str,
}

#[derive(Serialize)]
struct ObjectHoldDoc<'a> {
    until: String,
    reason: &'a str,
}

#[derive(Serialize)]
struct LastCycleDoc<'a> {
    commit: &'a str,
    started_at: String,
    finished_at: String,
    objects: u64,
    actions_ok: u64,
    actions_error: u64,
    pruned: u64,
    prune_deferred: u64,
    skipped: u64,
    anomalies: u64,
    desired_stale: bool,
    read_only: bool,
    aborted: bool,
    abort_reason: String,
}

#[derive(Serialize)]
struct ObjectDoc<'a> {
    cluster: &'a str,
    kind: &'a str,
    name: &'a str,
    node: &'a str,
    id: serde_json::Value,
    state: &'static str,
    last_action: &'a str,
    last_error: &'a str,
    last_converged_at: Option<String>,
    prune_reason: &'a str,
    updated_at: String,
    /// Actions planned and not done: what it would take to converge.
    pending: &'a [PendingAction],
    /// Additive: the manifest file (`null` for an object without one).
    manifest: Option<&'a str>,
    /// Additive: the last plan that had actions for it, and those actions
    /// with their results.
    planned_at: Option<String>,
    planned: &'a [PlannedAction],
    /// Additive: the last plan's anomalies about it.
    anomalies: &'a [AnomalyRecord],
    /// Additive, only when held back: until when, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    hold: Option<ObjectHoldDoc<'a>>,
}

#[derive(Serialize)]
struct ClusterDoc<'a> {
    name: &'a str,
    /// Additive: `waiting`, `converged`, `drifting`, `applying`, `aborted`.
    sync: &'static str,
    /// Additive: the commit, start and end of its last cycle.
    commit: &'a str,
    started_at: Option<String>,
    finished_at: Option<String>,
    result: &'static str,
    aborted: bool,
    abort_reason: &'a str,
    #[serde(flatten)]
    counts: CycleCounts,
    desired_stale: bool,
    read_only: bool,
    /// Planned actions not done, by action (every action named); `null`
    /// for an aborted cluster, whose pending work is unknown.
    pending_actions: Option<BTreeMap<&'static str, u64>>,
    /// The guests ProxOps runs in (left out when none is known): never
    /// stopped, restarted or pruned by it.
    #[serde(rename = "self", skip_serializing_if = "<[_]>::is_empty")]
    self_guests: &'a [crate::host::SelfGuest],
    /// Guests held back after a failed disruptive action, with the time
    /// of their next attempt.
    holds: Vec<HoldDoc<'a>>,
}

#[derive(Serialize)]
struct HoldDoc<'a> {
    kind: &'a str,
    name: &'a str,
    action: &'a str,
    failures: u32,
    next_attempt: String,
    last_error: &'a str,
}

/// `/status`: the JSON document of spec §17.3, pretty-printed, ending in a
/// newline. Objects are ordered by `cluster|kind|name`. Timestamps are RFC
/// 3339 UTC; a missing `last_converged_at` is `null`; missing texts
/// (`last_action`, `last_error`, `prune_reason`, `abort_reason`) are `""`.
/// `id` is a number for guests and a string (`storage:file`) for storage
/// artifacts. `last_cycle` is `null` before the first cycle; its counters
/// sum the clusters, `aborted` is true if any cluster aborted and
/// `abort_reason` joins `<cluster>: <reason>` with `; `. A top-level
/// `clusters` array (additive) repeats the last cycle per cluster with its
/// `pending_actions` counts. Additive too: `mode` (`apply` or `observe`)
/// first, and each object's `pending` actions with their field changes.
pub fn render_status_json(store: &StatusStore, _now: Timestamp) -> String {
    let last_cycle = store.last_cycle.as_ref().map(|c| {
        let n = c.counts();
        LastCycleDoc {
            commit: &c.commit,
            started_at: rfc3339(c.started_at),
            finished_at: rfc3339(c.finished_at),
            objects: n.objects,
            actions_ok: n.actions_ok,
            actions_error: n.actions_error,
            pruned: n.pruned,
            prune_deferred: n.prune_deferred,
            skipped: n.skipped,
            anomalies: n.anomalies,
            desired_stale: c.desired_stale(),
            read_only: c.read_only(),
            aborted: c.aborted(),
            abort_reason: c.abort_reason(),
        }
    });
    let objects = store.objects.values().map(object_doc).collect();
    let clusters = store
        .last_cycle
        .iter()
        .flat_map(|c| &c.clusters)
        .map(|c| cluster_doc(store, c))
        .collect();
    let recent_cycles = store
        .recent
        .iter()
        .map(|e| CycleDoc {
            cluster: &e.cluster,
            commit: &e.commit,
            started_at: rfc3339(e.started_at),
            finished_at: rfc3339(e.finished_at),
            took_ms: e.took_ms,
            result: e.result.as_str(),
            abort_reason: &e.abort_reason,
            actions_ok: e.actions_ok,
            actions_error: e.actions_error,
            unconverged: e.unconverged,
            sync: e.sync.as_str(),
        })
        .collect();
    let notifications = store
        .targets
        .iter()
        .map(|(name, t)| TargetDoc {
            target: name,
            kind: &t.kind,
            sent: t.sent,
            failed: t.failed,
            gave_up: t.gave_up,
            dropped: t.dropped,
            queued: t.queued,
            failing: t.failing,
            last_error: &t.last_error,
            last_failure_at: t.last_failure_at.map(rfc3339),
            last_sent_at: t.last_sent_at.map(rfc3339),
        })
        .collect();
    let starting = store.starting();
    let doc = StatusDoc {
        mode: store.mode.as_str(),
        state: if starting.is_empty() {
            "running"
        } else {
            "starting"
        },
        starting,
        process_start: rfc3339(store.process_start),
        last_cycle,
        objects,
        clusters,
        recent_cycles,
        notifications,
    };
    // Serialising plain structs of strings, numbers and bools cannot fail.
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".to_owned());
    out.push('\n');
    out
}

/// One object of `/status`: its report, what it waits for, its hold.
fn object_doc(o: &StoredObject) -> ObjectDoc<'_> {
    let r = &o.report;
    ObjectDoc {
        cluster: &o.cluster,
        kind: &r.kind,
        name: &r.name,
        node: &r.node,
        id: match r.id.parse::<u64>() {
            Ok(n) if !r.id.starts_with('0') || r.id == "0" => serde_json::Value::from(n),
            _ => serde_json::Value::from(r.id.as_str()),
        },
        state: r.state.as_str(),
        last_action: r.last_action.as_deref().unwrap_or(""),
        last_error: r.last_error.as_deref().unwrap_or(""),
        last_converged_at: r.last_converged_at.map(rfc3339),
        prune_reason: r.prune_reason.as_deref().unwrap_or(""),
        updated_at: rfc3339(o.updated_at),
        pending: &o.pending,
        manifest: o.manifest.as_deref(),
        planned_at: o.planned_at.map(rfc3339),
        planned: &o.planned,
        anomalies: &o.anomalies,
        hold: o.hold.as_ref().map(|h| ObjectHoldDoc {
            until: rfc3339(h.until),
            reason: &h.reason,
        }),
    }
}

/// One cluster of `/status`, as the last cycle left it.
fn cluster_doc<'a>(store: &'a StatusStore, c: &'a ClusterReport) -> ClusterDoc<'a> {
    ClusterDoc {
        name: &c.name,
        sync: store.sync(&c.name).as_str(),
        commit: store
            .cluster_cycles
            .get(&c.name)
            .map_or("", |e| e.commit.as_str()),
        started_at: store
            .cluster_cycles
            .get(&c.name)
            .map(|e| rfc3339(e.started_at)),
        finished_at: store
            .cluster_cycles
            .get(&c.name)
            .map(|e| rfc3339(e.finished_at)),
        result: c.result.as_str(),
        aborted: c.aborted,
        abort_reason: &c.abort_reason,
        counts: c.counts,
        desired_stale: c.desired_stale,
        read_only: c.read_only,
        pending_actions: (!c.aborted).then(|| pending_by_action(c)),
        self_guests: &c.self_guests,
        holds: c
            .holds
            .iter()
            .map(|h| HoldDoc {
                kind: &h.kind,
                name: &h.name,
                action: &h.op,
                failures: h.failures,
                next_attempt: rfc3339(h.next_attempt),
                last_error: &h.last_error,
            })
            .collect(),
    }
}

// ---------------------------------------------------------------------------
// /metrics

/// Every anomaly type, for zero samples.
const ANOMALY_TYPES: [AnomalyType; 5] = [
    AnomalyType::EmptyDesired,
    AnomalyType::LiveOnlySlot,
    AnomalyType::DataLoss,
    AnomalyType::Shrink,
    AnomalyType::NeedsPerson,
];

/// Every action, for zero samples.
const OPS: [Op; 10] = [
    Op::Create,
    Op::Clone,
    Op::Download,
    Op::MarkTemplate,
    Op::Update,
    Op::Resize,
    Op::Start,
    Op::Stop,
    Op::Reboot,
    Op::Prune,
];

/// A cluster's pending actions by action name, every action present.
fn pending_by_action(c: &ClusterReport) -> BTreeMap<&'static str, u64> {
    let mut out: BTreeMap<&'static str, u64> = OPS.iter().map(|o| (o.as_str(), 0)).collect();
    for p in &c.pending {
        *out.entry(p.action).or_default() += 1;
    }
    out
}

/// Every object state, for zero samples.
const OBJECT_STATES: [ObjectState; 9] = [
    ObjectState::Desired,
    ObjectState::Drift,
    ObjectState::Converged,
    ObjectState::InProgress,
    ObjectState::Failed,
    ObjectState::Skipped,
    ObjectState::Pruned,
    ObjectState::Anomalous,
    ObjectState::PendingRestart,
];

/// A new variant must be added to the lists above: this match stops the
/// build until it is. Never called; named below so the build checks it.
const _: fn(AnomalyType, ObjectState, Op) = lists_are_exhaustive;
fn lists_are_exhaustive(t: AnomalyType, s: ObjectState, o: Op) {
    match o {
        Op::Create
        | Op::Clone
        | Op::Download
        | Op::MarkTemplate
        | Op::Update
        | Op::Resize
        | Op::Start
        | Op::Stop
        | Op::Reboot
        | Op::Prune => {}
    }
    match t {
        AnomalyType::EmptyDesired
        | AnomalyType::LiveOnlySlot
        | AnomalyType::DataLoss
        | AnomalyType::Shrink
        | AnomalyType::NeedsPerson => {}
    }
    match s {
        ObjectState::Desired
        | ObjectState::Drift
        | ObjectState::Converged
        | ObjectState::InProgress
        | ObjectState::Failed
        | ObjectState::Skipped
        | ObjectState::Pruned
        | ObjectState::Anomalous
        | ObjectState::PendingRestart => {}
    }
}

/// The content type of [`render_metrics`]' output.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `/metrics`: Prometheus text exposition format 0.0.4.
///
/// Families (each always present with `# HELP` and `# TYPE`):
/// `proxops_cycles_total{result}` (every [`CycleResult`], zero included),
/// `proxops_cycle_duration_seconds` (histogram), `proxops_last_full_cycle_age_seconds`,
/// `proxops_git_last_fetch_age_seconds`, `proxops_pve_last_read_age_seconds`,
/// `proxops_actions_total{kind,action,result}` (series seen so far),
/// `proxops_prune_deferred_total{kind}` (every kind), `proxops_anomalies_total{type}`
/// (every type), `proxops_read_only`, `proxops_desired_stale`,
/// `proxops_objects{kind,state}` (every kind × §17.3 state, counted over the
/// store), `proxops_pve_requests_total{method,result}` (series seen so far),
/// `proxops_process_start_time_seconds`, `proxops_notifications_total{target,result}`
/// and `proxops_notification_target_failing{target}` (each configured
/// target), `proxops_observe_only` (1 under
/// `run --dry-run`), and from the last cycle, for each cluster that was not
/// aborted, `proxops_pending_actions{cluster,action}` (every action) and
/// `proxops_plan_anomalies{cluster,type}` (every type), and for every
/// cluster of the last cycle `proxops_objects_held{cluster}` (guests held
/// back after a failed disruptive action whose next attempt is after
/// `now`). Ages count from process start when the event never happened.
pub fn render_metrics(store: &StatusStore, now: Timestamp) -> String {
    let mut m = Metrics::default();
    cycle_metrics(&mut m, store, now);
    outcome_metrics(&mut m, store);
    object_metrics(&mut m, store);
    last_plan_metrics(&mut m, store);
    notification_metrics(&mut m, store);
    hold_and_process_metrics(&mut m, store, now);
    m.out
}

/// Cycles: how many by result, how long, and how long since the last full
/// cycle, git fetch and PVE read.
fn cycle_metrics(m: &mut Metrics, store: &StatusStore, now: Timestamp) {
    m.family(
        "proxops_cycles_total",
        "counter",
        "Completed per-cluster reconcile cycles, by result.",
    );
    for r in CycleResult::ALL {
        m.sample(
            "proxops_cycles_total",
            &[("result", r.as_str())],
            store.cycles_total(r),
        );
    }

    m.family(
        "proxops_cycle_duration_seconds",
        "histogram",
        "Duration of reconcile cycles over all clusters.",
    );
    for (i, le) in CYCLE_DURATION_BUCKETS.iter().enumerate() {
        m.sample(
            "proxops_cycle_duration_seconds_bucket",
            &[("le", &le.to_string())],
            store.duration_buckets[i],
        );
    }
    m.sample(
        "proxops_cycle_duration_seconds_bucket",
        &[("le", "+Inf")],
        store.duration_count,
    );
    m.sample_millis_as_seconds("proxops_cycle_duration_seconds_sum", store.duration_sum_ms);
    m.sample(
        "proxops_cycle_duration_seconds_count",
        &[],
        store.duration_count,
    );

    m.family(
        "proxops_last_full_cycle_age_seconds",
        "gauge",
        "Seconds since a cycle over all clusters last finished (since process start if none has).",
    );
    m.sample(
        "proxops_last_full_cycle_age_seconds",
        &[],
        now.saturating_sub(
            store
                .last_full_cycle_finished_at
                .unwrap_or(store.process_start),
        ),
    );

    m.family(
        "proxops_git_last_fetch_age_seconds",
        "gauge",
        "Seconds since the desired state was last fetched successfully (since process start if never).",
    );
    m.sample(
        "proxops_git_last_fetch_age_seconds",
        &[],
        store.git_last_fetch_age(now),
    );

    m.family(
        "proxops_pve_last_read_age_seconds",
        "gauge",
        "Seconds since a PVE inventory was last read successfully (since process start if never).",
    );
    m.sample(
        "proxops_pve_last_read_age_seconds",
        &[],
        store.pve_last_read_age(now),
    );
}

/// What cycles did and found: actions, deferred prunes, anomalies, and the
/// last cycle's read-only and stale-desired flags.
fn outcome_metrics(m: &mut Metrics, store: &StatusStore) {
    m.family(
        "proxops_actions_total",
        "counter",
        "Plan actions by kind, action and result (ok, error, skipped).",
    );
    for (k, n) in &store.actions_total {
        m.sample(
            "proxops_actions_total",
            &[
                ("kind", &k.kind),
                ("action", &k.action),
                ("result", k.result.as_str()),
            ],
            *n,
        );
    }

    m.family(
        "proxops_prune_deferred_total",
        "counter",
        "Prunes held back by the prune budget or the empty-desired guard.",
    );
    let mut deferred: BTreeMap<&str, u64> = Kind::ALL.iter().map(|k| (k.as_str(), 0)).collect();
    for (k, n) in &store.prune_deferred_total {
        *deferred.entry(k.as_str()).or_default() += n;
    }
    for (k, n) in deferred {
        m.sample("proxops_prune_deferred_total", &[("kind", k)], n);
    }

    m.family(
        "proxops_anomalies_total",
        "counter",
        "Anomalies found by planning, by type.",
    );
    for t in ANOMALY_TYPES {
        m.sample(
            "proxops_anomalies_total",
            &[("type", t.as_str())],
            store.anomalies_total.get(&t).copied().unwrap_or(0),
        );
    }

    let last = store.last_cycle.as_ref();
    m.family(
        "proxops_read_only",
        "gauge",
        "1 when the PVE write circuit breaker was open in the last cycle.",
    );
    m.sample(
        "proxops_read_only",
        &[],
        u64::from(last.is_some_and(|c| c.read_only())),
    );
    m.family(
        "proxops_desired_stale",
        "gauge",
        "1 when the last cycle ran on a cached tree after a failed git fetch.",
    );
    m.sample(
        "proxops_desired_stale",
        &[],
        u64::from(last.is_some_and(|c| c.desired_stale())),
    );
}

/// The status store's objects by state, PVE requests, and observe-only mode.
fn object_metrics(m: &mut Metrics, store: &StatusStore) {
    m.family(
        "proxops_objects",
        "gauge",
        "Objects in the status store, by kind and state.",
    );
    let mut objects: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for k in Kind::ALL {
        for s in OBJECT_STATES {
            objects.insert((k.as_str(), s.as_str()), 0);
        }
    }
    for o in store.objects.values() {
        *objects
            .entry((o.report.kind.as_str(), o.report.state.as_str()))
            .or_default() += 1;
    }
    for ((k, s), n) in objects {
        m.sample("proxops_objects", &[("kind", k), ("state", s)], n);
    }

    m.family(
        "proxops_pve_requests_total",
        "counter",
        "Requests sent to PVE, by HTTP method and result.",
    );
    for ((method, result), n) in &store.pve_requests_total {
        m.sample(
            "proxops_pve_requests_total",
            &[("method", method), ("result", result)],
            *n,
        );
    }

    m.family(
        "proxops_observe_only",
        "gauge",
        "1 when the process only observes (run --dry-run): it plans and reports but never writes to PVE.",
    );
    m.sample(
        "proxops_observe_only",
        &[],
        u64::from(store.mode == RunMode::Observe),
    );
}

/// The last cycle's plans: pending actions and anomalies by cluster.
fn last_plan_metrics(m: &mut Metrics, store: &StatusStore) {
    let planned: Vec<&ClusterReport> = store
        .last_cycle
        .as_ref()
        .iter()
        .flat_map(|c| &c.clusters)
        .filter(|c| !c.aborted)
        .collect();
    m.family(
        "proxops_pending_actions",
        "gauge",
        "Actions the last cycle planned and did not do, by cluster and action.",
    );
    for c in &planned {
        for (action, n) in pending_by_action(c) {
            m.sample(
                "proxops_pending_actions",
                &[("cluster", &c.name), ("action", action)],
                n,
            );
        }
    }
    m.family(
        "proxops_plan_anomalies",
        "gauge",
        "Anomalies in the last cycle's plan, by cluster and type.",
    );
    for c in &planned {
        for t in ANOMALY_TYPES {
            m.sample(
                "proxops_plan_anomalies",
                &[("cluster", &c.name), ("type", t.as_str())],
                c.anomalies.get(&t).copied().unwrap_or(0),
            );
        }
    }
}

/// Notifications by target and result, and failing targets.
fn notification_metrics(m: &mut Metrics, store: &StatusStore) {
    m.family(
        "proxops_notifications_total",
        "counter",
        "Notification messages by target and result (sent, failed attempts, gave_up, dropped).",
    );
    for (name, t) in &store.targets {
        for (result, n) in [
            ("sent", t.sent),
            ("failed", t.failed),
            ("gave_up", t.gave_up),
            ("dropped", t.dropped),
        ] {
            m.sample(
                "proxops_notifications_total",
                &[("target", name), ("result", result)],
                n,
            );
        }
    }
    m.family(
        "proxops_notification_target_failing",
        "gauge",
        "1 while the last attempt to notify the target failed.",
    );
    for (name, t) in &store.targets {
        m.sample(
            "proxops_notification_target_failing",
            &[("target", name)],
            u64::from(t.failing),
        );
    }
}

/// Guests held back after a failed disruptive action, and the process'
/// start time.
fn hold_and_process_metrics(m: &mut Metrics, store: &StatusStore, now: Timestamp) {
    m.family(
        "proxops_objects_held",
        "gauge",
        "Guests held back after a failed shutdown, reboot or stop-start write, not to be tried again yet, by cluster.",
    );
    let held: BTreeMap<&str, usize> = store
        .last_cycle
        .iter()
        .flat_map(|c| &c.clusters)
        .map(|c| {
            let n = c.holds.iter().filter(|h| h.next_attempt > now).count();
            (c.name.as_str(), n)
        })
        .collect();
    for (cluster, n) in held {
        m.sample("proxops_objects_held", &[("cluster", cluster)], n as u64);
    }

    m.family(
        "proxops_process_start_time_seconds",
        "gauge",
        "Start time of the process since the Unix epoch in seconds.",
    );
    m.sample(
        "proxops_process_start_time_seconds",
        &[],
        store.process_start,
    );
}

#[derive(Default)]
struct Metrics {
    out: String,
}

impl Metrics {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// An unlabelled sample of `ms` milliseconds, written in seconds with
    /// three decimals (`0.250`): exact, and the same bytes every time.
    fn sample_millis_as_seconds(&mut self, name: &str, ms: u64) {
        let _ = writeln!(self.out, "{name} {}.{:03}", ms / 1000, ms % 1000);
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label_value(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// Escapes a label value for the text format: `\` → `\\`, `"` → `\"`,
/// newline → `\n`.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}
