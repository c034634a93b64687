//! One cluster's cycle as a sans-IO machine, in the manner of quinn-proto:
//! identity → lock → snapshot → planned → executing → read-back → done.
//!
//! Call order: [`Cycle::new`] (or [`Cycle::refused`] for a cluster refused
//! before any PVE request); then repeatedly [`Cycle::poll`], which says what
//! to do next ([`Io`]), and the matching `handle_*` with the answer, until
//! `poll` says [`Io::Done`]; then [`Cycle::finish`]. Several actions run at
//! once: `poll` hands out one call per action in flight, in any order the
//! answers may come back ([`Cycle::handle_answer`] names the action). When
//! nothing is to be sent, [`Io::Wait`] says until when; the caller calls
//! [`Cycle::handle_timeout`] then (or earlier, on an answer). Events for
//! the caller's progress lines come from [`Cycle::poll_event`].
//!
//! **Architecture Invariant:** the machine reads no clock and does no I/O:
//! every instant is an argument ([`Now`]), every PVE answer is handed in.
//! The driver (adapters) owns threads, the clock, locks and transports;
//! which call is made when, what an answer means, when a cluster is
//! refused and in which words are decided here. A cycle in
//! [`Mode::Plan`] or [`Mode::Observe`] never reaches [`Phase::Executing`].

use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::time::Duration;

use crate::exec::{Execution, ObjectReport, Outcome, Timestamp};
use crate::plan::{AbortCause, Plan, Policy};
use crate::rollout::Limits;
use crate::step::{Answer, Call, Instant, PowerPolicy, Step, StepSettings};
use proxops_model::diag::Diagnostic;
use proxops_model::live::LiveSnapshot;
use proxops_model::names::{ClusterName, Ref};
use proxops_model::repo::ClusterDesired;
use proxops_model::wire::json_to_text;
use proxops_translate::drift::Context;

/// The time, as the driver's clocks tell it: a monotonic instant for
/// deadlines, and wall-clock seconds for records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Now {
    pub instant: Instant,
    pub wall: Timestamp,
}

/// What the cycle is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Read and plan (`diff`, `status`, `apply --dry-run`).
    Plan,
    /// Read and plan through a transport that refuses every write (`run
    /// --dry-run`): never executes, whatever the plan.
    Observe,
    /// Read, plan, execute and read back (`apply`, `run`).
    Apply,
}

pub use crate::plan::Abort;

/// Which PVE a cluster's base URL leads to: the cluster name PVE reports
/// (none for a standalone node) and its members (name, address), as
/// `GET /cluster/status` lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PveIdentity {
    pub cluster: Option<String>,
    pub nodes: BTreeSet<(String, String)>,
}

impl PveIdentity {
    /// Reads `GET /cluster/status`'s `data`.
    pub fn from_json(data: &serde_json::Value) -> Result<PveIdentity, String> {
        let rows = data
            .as_array()
            .ok_or_else(|| "expected a JSON array in data".to_owned())?;
        let mut cluster = None;
        let mut nodes = BTreeSet::new();
        for row in rows {
            let text = |k: &str| row.get(k).and_then(json_to_text);
            match text("type").as_deref() {
                Some("cluster") => cluster = text("name").filter(|n| !n.is_empty()),
                Some("node") => {
                    if let Some(name) = text("name").filter(|n| !n.is_empty()) {
                        nodes.insert((name, text("ip").unwrap_or_default()));
                    }
                }
                _ => {}
            }
        }
        if nodes.is_empty() {
            return Err("PVE listed no node, so which PVE this is cannot be told".to_owned());
        }
        Ok(PveIdentity { cluster, nodes })
    }

    /// The same PVE: the same cluster name (or both standalone) and a
    /// member in common.
    pub fn same_pve(&self, other: &PveIdentity) -> bool {
        self.cluster == other.cluster && !self.nodes.is_disjoint(&other.nodes)
    }
}

impl fmt::Display for PveIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|(n, ip)| {
                if ip.is_empty() {
                    n.clone()
                } else {
                    format!("{n} {ip}")
                }
            })
            .collect();
        match &self.cluster {
            Some(name) => write!(f, "PVE cluster {name:?} (nodes {})", nodes.join(", ")),
            None => write!(f, "standalone PVE node {}", nodes.join(", ")),
        }
    }
}

/// Another cluster's PVE, as it identified itself (this cycle or an
/// earlier one), to tell this cluster's PVE apart from.
#[derive(Debug, Clone)]
pub struct Known {
    /// How the other cluster is named in a refusal (`"b" (base-url … in …)`).
    pub described: String,
    pub identity: PveIdentity,
}

/// The same PVE as another cluster's: the refusal, naming both.
pub fn shared_pve(described: &str, id: &PveIdentity, others: &[Known]) -> Option<Abort> {
    let same: Vec<&str> = others
        .iter()
        .filter(|k| id.same_pve(&k.identity))
        .map(|k| k.described.as_str())
        .collect();
    (!same.is_empty()).then(|| {
        Abort::new(
            AbortCause::SharedPve,
            format!(
                "cluster {described} leads to {id}, the same PVE as cluster {}: two cluster configs must never manage one PVE (each would prune the other's guests); no inventory read, no write",
                same.join(", ")
            ),
        )
    })
}

/// A PVE that could not say which it is.
pub fn unidentified(error: &str) -> Abort {
    Abort::new(
        AbortCause::PveUnidentified,
        format!(
            "{error}; so which PVE base-url leads to is not confirmed (it may be another cluster's): no inventory read, no write (asked again next cycle)"
        ),
    )
}

/// How a cycle runs, from the cluster's configuration and the command.
#[derive(Debug, Clone)]
pub struct Settings {
    pub mode: Mode,
    pub policy: Policy,
    pub power: PowerPolicy,
    pub limits: Limits,
    pub task_timeout: Duration,
    /// Confirm which PVE this is before anything else, this cluster named
    /// so in a refusal; `None` skips it (a replayed recording).
    pub identify: Option<String>,
    /// Hold the cluster's lock from before the inventory read to the end.
    pub lock: bool,
    /// Apply mode: wait for [`Cycle::proceed`] or [`Cycle::cancel`] once
    /// planned (the plan is shown and confirmed first).
    pub confirm: bool,
    /// `--target`: plan only these objects and what they depend on.
    pub targets: Option<BTreeSet<Ref>>,
}

/// Where a cycle is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    Identity,
    Lock,
    Snapshot,
    Planned,
    Executing,
    ReadBack,
    Done,
}

/// What the driver is to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Io {
    /// Read `GET /cluster/status`; answer with [`Cycle::handle_identity`].
    ReadIdentity,
    /// Take the cluster's lock; answer with [`Cycle::handle_lock`].
    Lock,
    /// Read the live inventory; answer with [`Cycle::handle_snapshot`].
    ReadSnapshot,
    /// Send `call` for action `action`; answer with
    /// [`Cycle::handle_answer`]. At most one call per action is out.
    Send { action: usize, call: Call },
    /// Nothing to send: wait for an answer, or until this instant and then
    /// call [`Cycle::handle_timeout`]. `None`: only for an answer.
    Wait { until: Option<Instant> },
    /// Planned: the driver shows the plan, then [`Cycle::proceed`] or
    /// [`Cycle::cancel`].
    AwaitDecision,
    /// Finished: release the lock, [`Cycle::finish`].
    Done,
}

/// Something the caller may tell a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The plan is made (before any action starts).
    Planned,
    /// An action started on worker slot `worker` (1-based, the lowest free
    /// one), `running` actions in flight with it.
    Started {
        index: usize,
        worker: usize,
        running: usize,
    },
    /// An action sent a write for a new stage (`doing`).
    Phase {
        index: usize,
        worker: usize,
        doing: String,
        elapsed: Duration,
    },
    /// A task read found it still running.
    TaskRunning {
        index: usize,
        worker: usize,
        upid: String,
        doing: String,
        elapsed: Duration,
    },
    /// An action ended.
    Finished {
        index: usize,
        worker: usize,
        outcome: Outcome,
        elapsed: Duration,
        upids: Vec<String>,
    },
}

/// One action in flight.
struct Running {
    index: usize,
    worker: usize,
    step: Step,
    started: Instant,
    /// A call was handed out and its answer has not come.
    awaiting: bool,
    /// The last stage a progress event named.
    told: String,
}

/// What one cluster's cycle did.
#[derive(Debug, Clone)]
pub struct CycleRecord {
    pub name: ClusterName,
    pub plan: Plan,
    /// What the plan was made from.
    pub snapshot: Option<LiveSnapshot>,
    pub execution: Option<Execution>,
    /// The re-plan after execution; `None` when not executed or when the
    /// read-back failed.
    pub readback: Option<Plan>,
    pub objects: Vec<ObjectReport>,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    pub elapsed: Duration,
}

impl CycleRecord {
    /// How many of its actions failed.
    pub fn failed_actions(&self) -> usize {
        self.execution.as_ref().map_or(0, |e| e.counts().1)
    }
}

/// One cluster's cycle.
pub struct Cycle<'d> {
    name: ClusterName,
    desired: Option<&'d ClusterDesired>,
    ctx: Option<Context<'d>>,
    settings: Settings,
    phase: Phase,
    plan: Option<Plan>,
    snapshot: Option<LiveSnapshot>,
    execution: Option<Execution>,
    readback: Option<Plan>,
    readback_failed: bool,
    running: Vec<Running>,
    workers: Vec<bool>,
    events: VecDeque<Event>,
    stopping: bool,
    started: Now,
    finished: Option<Now>,
}

impl<'d> Cycle<'d> {
    pub fn new(
        desired: &'d ClusterDesired,
        ctx: Context<'d>,
        name: ClusterName,
        settings: Settings,
        now: Now,
    ) -> Cycle<'d> {
        let mut cycle = Cycle::empty(name, settings, now);
        cycle.desired = Some(desired);
        cycle.ctx = Some(ctx);
        cycle.phase = cycle.after(Phase::Identity);
        cycle
    }

    /// A plan made earlier (a saved plan, checked against a fresh read):
    /// executed as it is, never re-planned before it runs; read back and
    /// re-planned after, even when it holds no action. `settings.mode`
    /// must be [`Mode::Apply`] (else the cycle ends with the plan, nothing
    /// executed).
    pub fn with_plan(
        desired: &'d ClusterDesired,
        ctx: Context<'d>,
        settings: Settings,
        plan: Plan,
        now: Now,
    ) -> Cycle<'d> {
        let mut cycle = Cycle::empty(plan.cluster.clone(), settings, now);
        cycle.desired = Some(desired);
        cycle.ctx = Some(ctx);
        let executes = cycle.settings.mode == Mode::Apply && !plan.is_aborted();
        cycle.plan = Some(plan);
        cycle.phase = Phase::Planned;
        if !executes {
            cycle.done(now);
        } else if !cycle.settings.confirm {
            cycle.proceed();
        }
        cycle
    }

    /// A cluster refused before any PVE request (invalid input,
    /// credentials, a recording that does not load): done at once.
    pub fn refused(
        name: ClusterName,
        abort: Abort,
        diagnostics: Vec<Diagnostic>,
        now: Now,
    ) -> Cycle<'d> {
        let settings = Settings {
            mode: Mode::Plan,
            policy: Policy::default(),
            power: PowerPolicy::default(),
            limits: Limits::serial(),
            task_timeout: Duration::ZERO,
            identify: None,
            lock: false,
            confirm: false,
            targets: None,
        };
        let mut cycle = Cycle::empty(name, settings, now);
        cycle.abort(abort, now);
        if let Some(plan) = cycle.plan.take() {
            cycle.plan = Some(plan.with_diagnostics(diagnostics));
        }
        cycle
    }

    fn empty(name: ClusterName, settings: Settings, now: Now) -> Cycle<'d> {
        Cycle {
            name,
            desired: None,
            ctx: None,
            settings,
            phase: Phase::Identity,
            plan: None,
            snapshot: None,
            execution: None,
            readback: None,
            readback_failed: false,
            running: Vec::new(),
            workers: Vec::new(),
            events: VecDeque::new(),
            stopping: false,
            started: now,
            finished: None,
        }
    }

    /// The phase a cycle enters after `phase`'s work, skipping what its
    /// settings leave out.
    fn after(&self, phase: Phase) -> Phase {
        match phase {
            Phase::Identity if self.settings.identify.is_some() => Phase::Identity,
            Phase::Identity | Phase::Lock if self.settings.lock => Phase::Lock,
            _ => Phase::Snapshot,
        }
    }

    pub fn name(&self) -> &ClusterName {
        &self.name
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The plan, once made (or the abort's plan).
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    /// The action `index` of the plan being executed.
    pub fn action(&self, index: usize) -> Option<&crate::action::Action> {
        self.execution.as_ref()?.actions().get(index)
    }

    /// What to do next.
    pub fn poll(&mut self, now: Now) -> Io {
        match self.phase {
            Phase::Identity => Io::ReadIdentity,
            Phase::Lock => Io::Lock,
            Phase::Snapshot | Phase::ReadBack => Io::ReadSnapshot,
            Phase::Planned => Io::AwaitDecision,
            Phase::Executing => self.poll_executing(now),
            Phase::Done => Io::Done,
        }
    }

    /// The next event for the caller, oldest first.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// PVE's answer to [`Io::ReadIdentity`] and the PVEs of the other
    /// clusters this one must not share.
    pub fn handle_identity(
        &mut self,
        now: Now,
        mine: Result<PveIdentity, String>,
        others: &[Known],
    ) {
        if self.phase != Phase::Identity {
            return;
        }
        let described = self.settings.identify.clone().unwrap_or_default();
        let refusal = match &mine {
            Err(e) => Some(unidentified(e)),
            Ok(id) => shared_pve(&described, id, others),
        };
        match refusal {
            Some(abort) => self.abort(abort, now),
            None => self.phase = self.after(Phase::Lock),
        }
    }

    /// Refuses the cluster before it is planned (a claim by another
    /// configuration, missing privileges): nothing is read or written.
    pub fn refuse(&mut self, now: Now, abort: Abort) {
        if self.phase < Phase::Planned {
            self.abort(abort, now);
        }
    }

    /// The lock was taken, or why not.
    pub fn handle_lock(&mut self, now: Now, got: Result<(), Abort>) {
        if self.phase != Phase::Lock {
            return;
        }
        match got {
            Ok(()) => self.phase = Phase::Snapshot,
            Err(abort) => self.abort(abort, now),
        }
    }

    /// The inventory read (first, or the read-back after execution).
    pub fn handle_snapshot(&mut self, now: Now, read: Result<LiveSnapshot, String>) {
        match self.phase {
            Phase::Snapshot => match read {
                Ok(snapshot) => self.planned(now, snapshot),
                Err(e) => self.abort(
                    Abort::new(
                        AbortCause::PveRead,
                        format!("pve inventory read failed: {e}"),
                    ),
                    now,
                ),
            },
            Phase::ReadBack => {
                match read {
                    Ok(snapshot) => {
                        let again = self.make_plan(&snapshot);
                        self.readback = (!again.is_aborted()).then_some(again);
                        self.readback_failed = self.readback.is_none();
                    }
                    Err(_) => self.readback_failed = true,
                }
                self.done(now);
            }
            _ => {}
        }
    }

    fn make_plan(&self, snapshot: &LiveSnapshot) -> Plan {
        let (Some(desired), Some(ctx)) = (self.desired, self.ctx.as_ref()) else {
            return Plan::aborted(self.name.clone(), AbortCause::Plan, "nothing to plan");
        };
        let policy = &self.settings.policy;
        let mut plan = crate::planner::plan(desired, snapshot, ctx, policy);
        if let Some(targets) = &self.settings.targets {
            crate::target::restrict(&mut plan, desired, targets, &policy.disruption);
        }
        plan
    }

    fn planned(&mut self, now: Now, snapshot: LiveSnapshot) {
        let plan = self.make_plan(&snapshot);
        self.snapshot = Some(snapshot);
        let executes =
            self.settings.mode == Mode::Apply && !plan.is_aborted() && !plan.actions.is_empty();
        self.plan = Some(plan);
        self.events.push_back(Event::Planned);
        if !executes {
            self.done(now);
        } else if self.settings.confirm {
            self.phase = Phase::Planned;
        } else {
            self.proceed();
        }
    }

    /// Planned: execute the plan (after the driver showed and confirmed
    /// it). Actions the admission checks refuse become anomalies.
    pub fn proceed(&mut self) {
        if !matches!(self.phase, Phase::Planned | Phase::Snapshot)
            || self.settings.mode != Mode::Apply
        {
            return;
        }
        let (Some(plan), Some(desired)) = (self.plan.as_mut(), self.desired) else {
            return;
        };
        crate::admit::guard(plan, desired, &self.settings.policy);
        let mut execution = Execution::with_limits(plan, &self.settings.limits, |a| {
            crate::rollout::disruption_group(desired, a)
        });
        if self.stopping {
            execution.stop();
        }
        let slots = self
            .settings
            .limits
            .per_cluster
            .clamp(1, plan.actions.len().max(1));
        self.workers = vec![false; slots];
        self.execution = Some(execution);
        self.phase = Phase::Executing;
    }

    /// Planned: do not execute; the cycle ends with its plan.
    pub fn cancel(&mut self, now: Now) {
        if self.phase == Phase::Planned {
            self.done(now);
        }
    }

    /// Shutdown: the actions in flight finish, nothing new starts and the
    /// rest is deferred; the read-back still runs.
    pub fn stop(&mut self) {
        self.stopping = true;
        if let Some(execution) = &mut self.execution {
            execution.stop();
        }
    }

    fn poll_executing(&mut self, now: Now) -> Io {
        self.start_ready(now);
        if let Some(io) = self.next_call(now) {
            return io;
        }
        if self.running.is_empty() {
            if self.execution.as_ref().is_none_or(Execution::is_finished) {
                self.phase = Phase::ReadBack;
                return Io::ReadSnapshot;
            }
            // Nothing in flight and nothing may start: cannot happen with
            // the execution machine's rules; end rather than wait forever.
            self.stop();
            self.phase = Phase::ReadBack;
            return Io::ReadSnapshot;
        }
        let until = self
            .running
            .iter()
            .filter(|r| !r.awaiting)
            .filter_map(|r| r.step.poll_timeout())
            .min();
        Io::Wait { until }
    }

    /// Starts every action the execution hands out now.
    fn start_ready(&mut self, now: Now) {
        let Some(desired) = self.desired else { return };
        let Some(execution) = self.execution.as_mut() else {
            return;
        };
        while let Some((index, action)) = execution.next(now.wall) {
            let settings = StepSettings {
                task_timeout: self.settings.task_timeout,
                power: self.settings.power.for_action(desired, action),
                tags_case_sensitive: desired.tag_case_sensitive,
            };
            let step = Step::new(action, settings);
            let worker = match self.workers.iter().position(|busy| !busy) {
                Some(free) => free,
                None => {
                    self.workers.push(false);
                    self.workers.len() - 1
                }
            };
            self.workers[worker] = true;
            self.running.push(Running {
                index,
                worker: worker + 1,
                step,
                started: now.instant,
                awaiting: false,
                told: String::new(),
            });
            self.events.push_back(Event::Started {
                index,
                worker: worker + 1,
                running: self.running.len(),
            });
        }
        self.settle(now);
    }

    /// The first call an action in flight has to send now.
    fn next_call(&mut self, now: Now) -> Option<Io> {
        for r in self.running.iter_mut().filter(|r| !r.awaiting) {
            let Some(call) = r.step.poll_request(now.instant) else {
                continue;
            };
            r.awaiting = true;
            let doing = r.step.doing().unwrap_or_default();
            if call.method.is_write() && doing != r.told {
                r.told.clone_from(&doing);
                self.events.push_back(Event::Phase {
                    index: r.index,
                    worker: r.worker,
                    doing,
                    elapsed: now.instant.saturating_duration_since(r.started),
                });
            }
            return Some(Io::Send {
                action: r.index,
                call,
            });
        }
        None
    }

    /// PVE's answer to the call [`Io::Send`] handed out for `action`.
    pub fn handle_answer(&mut self, now: Now, action: usize, answer: Answer) {
        let Some(r) = self
            .running
            .iter_mut()
            .find(|r| r.index == action && r.awaiting)
        else {
            return;
        };
        r.awaiting = false;
        r.step.handle_answer(now.instant, answer);
        if let Some((upid, elapsed)) = r.step.task_running() {
            self.events.push_back(Event::TaskRunning {
                index: r.index,
                worker: r.worker,
                upid: upid.to_owned(),
                doing: r.step.doing().unwrap_or_default(),
                elapsed,
            });
        }
        self.settle(now);
    }

    /// Time has passed: deadlines of the actions in flight are judged.
    pub fn handle_timeout(&mut self, now: Now) {
        for r in self.running.iter_mut().filter(|r| !r.awaiting) {
            if r.step.poll_timeout().is_some_and(|due| due <= now.instant) {
                r.step.handle_timeout(now.instant);
            }
        }
        self.settle(now);
    }

    /// Records every action in flight whose protocol has ended.
    fn settle(&mut self, now: Now) {
        let mut i = 0;
        while i < self.running.len() {
            let Some(outcome) = self.running[i].step.outcome().cloned() else {
                i += 1;
                continue;
            };
            let r = self.running.remove(i);
            if let Some(slot) = self.workers.get_mut(r.worker - 1) {
                *slot = false;
            }
            if let Some(execution) = &mut self.execution {
                execution.record(r.index, outcome.clone(), now.wall);
            }
            self.events.push_back(Event::Finished {
                index: r.index,
                worker: r.worker,
                outcome,
                elapsed: now.instant.saturating_duration_since(r.started),
                upids: r.step.upids().to_vec(),
            });
        }
    }

    fn abort(&mut self, abort: Abort, now: Now) {
        self.plan = Some(Plan::aborted(self.name.clone(), abort.cause, abort.reason));
        self.done(now);
    }

    fn done(&mut self, now: Now) {
        self.phase = Phase::Done;
        self.finished = Some(now);
    }

    /// The read-back after execution failed (objects it would confirm are
    /// not converged).
    pub fn readback_failed(&self) -> bool {
        self.readback_failed
    }

    /// What the cycle did. Object states come from the plan, the execution
    /// and the read-back ([`crate::state::object_states`]).
    pub fn finish(self) -> CycleRecord {
        let finished = self.finished.unwrap_or(self.started);
        let plan = self
            .plan
            .unwrap_or_else(|| Plan::aborted(self.name.clone(), AbortCause::Plan, "not planned"));
        let objects = match &self.execution {
            Some(execution) => crate::state::object_states(
                &plan,
                Some(execution),
                self.readback.as_ref(),
                None,
                finished.wall,
            ),
            None => Vec::new(),
        };
        CycleRecord {
            name: self.name,
            plan,
            snapshot: self.snapshot,
            execution: self.execution,
            readback: self.readback,
            objects,
            started_at: self.started.wall,
            finished_at: finished.wall,
            elapsed: finished
                .instant
                .saturating_duration_since(self.started.instant),
        }
    }
}
