//! The driver: runs core's cluster cycle ([`proxops_core::cycle::Cycle`])
//! against PVE for every command that reads or writes a cluster: `diff`,
//! `status` and `apply --dry-run` (plan), `run --dry-run` (observe through
//! a transport that refuses writes), `apply` and `run` (plan, confirm,
//! execute, read back), `apply --plan` (a saved plan, executed and read
//! back).
//!
//! The machine says what to do next; this module does it: it reads the
//! inventory ([`reader::read_snapshot`]), takes the cluster's lock, sends
//! each call an action in flight asks for on a small pool of worker
//! threads (std threads and channels, no async runtime), hands PVE's
//! answers back (classified once, by [`proxops_core::step::classify`]),
//! keeps the clocks, and turns the machine's events into progress for the
//! caller.
//!
//! **Architecture Invariant:** the driver decides nothing: which call is
//! made when, what an answer means, when an action starts and when a
//! cluster is refused are the machine's. It owns threads, clocks, locks
//! and the `stop` flag. Form values are exposed (`Params::to_wire`) only
//! at the moment they are sent; no error or log line holds one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use proxops_core::cycle::{Cycle, CycleRecord, Event, Io, Mode, Now, Settings};
use proxops_core::diag::Diagnostic;
use proxops_core::drift::Context;
use proxops_core::live::LiveSnapshot;
use proxops_core::names::ClusterName;
use proxops_core::plan::Plan;
use proxops_core::step::{Answer, Call, Instant};
use proxops_pve::reader;
use proxops_pve::runner::{self, ActionObserver, Progress, unix_now};
use proxops_pve::transport::Transport;

use crate::cluster::{Prepared, Ready, Session};
use crate::lock::{ClusterLock, Locking};
use crate::readonly::ReadOnly;

/// How long the driver waits at most before it looks at the `stop` flag
/// again.
const TICK: Duration = Duration::from_millis(200);

/// One cluster read and planned.
pub struct ClusterPlan {
    pub plan: Plan,
    /// What the plan was made from (for commands that show live state).
    pub snapshot: Option<LiveSnapshot>,
}

/// Every selected cluster read and planned.
pub struct PlanAll {
    pub plans: Vec<ClusterPlan>,
    /// Diagnostics of clusters refused for invalid input.
    pub invalid: Vec<Diagnostic>,
}

/// A progress observer that also hears which cluster is meant.
pub type ClusterProgress<'a> = dyn Fn(&ClusterName, &Progress<'_>) + Sync + 'a;

/// How a converge cycle runs.
#[derive(Default)]
pub struct ApplyOptions<'a> {
    pub stop: Option<&'a AtomicBool>,
    pub on_result: Option<&'a ActionObserver<'a>>,
    /// Take each cluster's lock before reading it (live writes); `None`
    /// for replays.
    pub lock: Option<&'a Locking>,
    /// Told each action's progress, with the cluster it is about.
    pub on_progress: Option<&'a ClusterProgress<'a>>,
}

/// The clocks of one cycle: a monotonic origin for deadlines, the wall
/// clock for records.
struct Clock(std::time::Instant);

impl Clock {
    fn start() -> Clock {
        Clock(std::time::Instant::now())
    }

    fn now(&self) -> Now {
        Now {
            instant: Instant::from_origin(self.0.elapsed()),
            wall: unix_now(),
        }
    }
}

/// What one cycle is driven with: the PVE it talks to, the cluster's lock
/// and the caller's ears.
struct Pve<'a> {
    transport: &'a dyn Transport,
    ready: &'a Ready<'a>,
    lock: Option<&'a Locking>,
    held: Option<ClusterLock>,
}

/// The settings of a cycle of `ready` in `mode`.
fn settings(ready: &Ready<'_>, mode: Mode, lock: bool, confirm: bool) -> Settings {
    Settings {
        mode,
        policy: ready.policy.clone(),
        power: ready.power,
        limits: ready.limits.clone(),
        task_timeout: ready.task_timeout,
        // Which PVE each cluster leads to is confirmed for the whole
        // session first ([`crate::cluster::confirm_distinct_pves`]).
        identify: None,
        lock,
        confirm,
        targets: ready.targets.clone(),
    }
}

fn context<'a>(ready: &'a Ready<'a>) -> Context<'a> {
    Context {
        cluster: ready.desired,
        secrets: &ready.secrets,
    }
}

/// The record of a cluster refused before any request.
fn refused(p: &Prepared<'_>) -> Option<CycleRecord> {
    let unready = p.ready.as_ref().err()?;
    let now = Clock::start().now();
    let cycle = Cycle::refused(
        p.name.clone(),
        unready.abort(),
        unready.diagnostics.clone(),
        now,
    );
    Some(cycle.finish())
}

impl Ready<'_> {
    /// Reads the cluster through `transport` and plans it (a cycle in
    /// [`Mode::Plan`]: nothing executes, whatever the plan).
    pub fn read_and_plan(&self, name: &ClusterName, transport: &dyn Transport) -> ClusterPlan {
        let clock = Clock::start();
        let mut cycle = Cycle::new(
            self.desired,
            context(self),
            name.clone(),
            settings(self, Mode::Plan, false, false),
            clock.now(),
        );
        let mut pve = Pve {
            transport,
            ready: self,
            lock: None,
            held: None,
        };
        drive(&mut cycle, &clock, &mut pve, &Ears::default());
        let record = cycle.finish();
        ClusterPlan {
            plan: record.plan,
            snapshot: record.snapshot,
        }
    }
}

/// Reads and plans every cluster of `session` (diff, apply --dry-run,
/// status).
pub fn plan_all(session: Session<'_>) -> PlanAll {
    let plans = session
        .clusters
        .iter()
        .map(|p| match &p.ready {
            Err(unready) => ClusterPlan {
                plan: unready.plan(&p.name),
                snapshot: None,
            },
            Ok(r) => r.read_and_plan(&p.name, r.transport.as_ref()),
        })
        .collect();
    PlanAll {
        plans,
        invalid: session.invalid,
    }
}

/// One cluster read and planned, waiting to be executed: the first half of
/// its converge cycle. Its lock, when taken, is held until the read-back.
pub struct PlannedCluster<'a> {
    /// The plan, to show before it runs.
    pub plan: Plan,
    cycle: Cycle<'a>,
    clock: Clock,
    held: Option<ClusterLock>,
}

/// Takes the cluster's lock (when `lock` is given), then reads and plans
/// it. An invalid, unreadable or held cluster gets an aborted plan.
pub fn plan_cluster<'a>(p: &'a Prepared<'a>, lock: Option<&'a Locking>) -> PlannedCluster<'a> {
    let clock = Clock::start();
    let ready = match &p.ready {
        Ok(ready) => ready,
        Err(unready) => {
            let now = clock.now();
            let cycle = Cycle::refused(
                p.name.clone(),
                unready.abort(),
                unready.diagnostics.clone(),
                now,
            );
            return PlannedCluster::new(cycle, clock, None);
        }
    };
    let mut cycle = Cycle::new(
        ready.desired,
        context(ready),
        p.name.clone(),
        settings(ready, Mode::Apply, lock.is_some(), true),
        clock.now(),
    );
    let mut pve = Pve {
        transport: ready.transport.as_ref(),
        ready,
        lock,
        held: None,
    };
    drive(&mut cycle, &clock, &mut pve, &Ears::default());
    PlannedCluster::new(cycle, clock, pve.held)
}

impl<'a> PlannedCluster<'a> {
    fn new(cycle: Cycle<'a>, clock: Clock, held: Option<ClusterLock>) -> PlannedCluster<'a> {
        let plan = cycle.plan().cloned().unwrap_or_else(|| {
            Plan::aborted(
                cycle.name().clone(),
                proxops_core::plan::AbortCause::Plan,
                "not planned",
            )
        });
        PlannedCluster {
            plan,
            cycle,
            clock,
            held,
        }
    }
}

/// Executes the plan `plan_cluster` made for `p`, then reads back and
/// re-plans; the cluster's lock is let go after the read-back. An aborted
/// or empty plan performs nothing.
pub fn execute_cluster(
    p: &Prepared<'_>,
    planned: PlannedCluster<'_>,
    opts: &ApplyOptions<'_>,
) -> CycleRecord {
    let PlannedCluster {
        mut cycle,
        clock,
        held,
        ..
    } = planned;
    if let Ok(ready) = &p.ready {
        cycle.proceed();
        let mut pve = Pve {
            transport: ready.transport.as_ref(),
            ready,
            lock: None,
            held,
        };
        drive(&mut cycle, &clock, &mut pve, &Ears::from(opts));
    }
    cycle.finish()
}

/// Executes `plan` (saved, and checked against a fresh read of this
/// cluster) as it is, then reads back and re-plans. The caller holds the
/// cluster's lock.
pub fn execute_plan(ready: &Ready<'_>, plan: Plan, opts: &ApplyOptions<'_>) -> CycleRecord {
    let clock = Clock::start();
    let mut cycle = Cycle::with_plan(
        ready.desired,
        context(ready),
        settings(ready, Mode::Apply, false, false),
        plan,
        clock.now(),
    );
    let mut pve = Pve {
        transport: ready.transport.as_ref(),
        ready,
        lock: None,
        held: None,
    };
    drive(&mut cycle, &clock, &mut pve, &Ears::from(opts));
    cycle.finish()
}

/// One observing cycle per selected cluster (`run --dry-run`): read and
/// plan, nothing else. Reads go through [`ReadOnly`], which refuses any
/// write, and the cycles run in [`Mode::Observe`], which never executes.
/// Returns the cycles and the number of writes refused (0 unless there is
/// a bug).
pub fn observe_all(session: &Session<'_>) -> (Vec<CycleRecord>, u64) {
    let mut out = Vec::new();
    let mut refused_writes = 0;
    for p in &session.clusters {
        if let Some(record) = refused(p) {
            out.push(record);
            continue;
        }
        let Ok(ready) = &p.ready else { continue };
        let guard = ReadOnly::new(ready.transport.as_ref());
        let clock = Clock::start();
        let mut cycle = Cycle::new(
            ready.desired,
            context(ready),
            p.name.clone(),
            settings(ready, Mode::Observe, false, false),
            clock.now(),
        );
        let mut pve = Pve {
            transport: &guard,
            ready,
            lock: None,
            held: None,
        };
        drive(&mut cycle, &clock, &mut pve, &Ears::default());
        refused_writes += guard.refused();
        out.push(cycle.finish());
    }
    (out, refused_writes)
}

/// Who hears what a cycle does.
#[derive(Default)]
struct Ears<'a> {
    stop: Option<&'a AtomicBool>,
    on_result: Option<&'a ActionObserver<'a>>,
    on_progress: Option<&'a ClusterProgress<'a>>,
}

impl<'a> From<&ApplyOptions<'a>> for Ears<'a> {
    fn from(opts: &ApplyOptions<'a>) -> Ears<'a> {
        Ears {
            stop: opts.stop,
            on_result: opts.on_result,
            on_progress: opts.on_progress,
        }
    }
}

/// Runs `cycle` until it is done or waits for the caller's decision:
/// whatever the machine asks for is done here, its events told to `ears`.
/// Calls of actions in flight are sent by worker threads (one per action
/// in flight at most), so several PVE tasks run at once.
fn drive(cycle: &mut Cycle<'_>, clock: &Clock, pve: &mut Pve<'_>, ears: &Ears<'_>) {
    let transport = pve.transport;
    let (jobs_tx, jobs_rx) = mpsc::channel::<(usize, Call)>();
    let jobs_rx = Mutex::new(jobs_rx);
    let (done_tx, done_rx) = mpsc::channel::<(usize, Answer)>();
    std::thread::scope(|scope| {
        let (mut workers, mut out) = (0usize, 0usize);
        loop {
            if ears.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
                cycle.stop();
            }
            let io = cycle.poll(clock.now());
            match io {
                Io::Done | Io::AwaitDecision => {
                    tell(cycle, ears);
                    break;
                }
                Io::Send { action, call } => {
                    out += 1;
                    if out > workers {
                        workers += 1;
                        let (jobs, done) = (&jobs_rx, done_tx.clone());
                        scope.spawn(move || work(transport, jobs, &done));
                    }
                    if jobs_tx.send((action, call)).is_err() {
                        break;
                    }
                }
                Io::Wait { until } => {
                    let now = clock.now();
                    let wait = until.map_or(TICK, |u| u.saturating_duration_since(now.instant));
                    match done_rx.recv_timeout(wait.min(TICK)) {
                        Ok((action, answer)) => {
                            out -= 1;
                            cycle.handle_answer(clock.now(), action, answer);
                        }
                        Err(mpsc::RecvTimeoutError::Timeout) => cycle.handle_timeout(clock.now()),
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
                other => serve(cycle, clock, pve, other),
            }
            tell(cycle, ears);
        }
        // The workers end once no job can come.
        drop(jobs_tx);
    });
}

/// A worker: sends the calls it is handed, one at a time, and hands back
/// PVE's answers.
fn work(
    transport: &dyn Transport,
    jobs: &Mutex<mpsc::Receiver<(usize, Call)>>,
    done: &mpsc::Sender<(usize, Answer)>,
) {
    // The lock is held only to take a job, never while sending it.
    while let Some((action, call)) = jobs.lock().ok().and_then(|rx| rx.recv().ok()) {
        if done.send((action, runner::send(transport, &call))).is_err() {
            break;
        }
    }
}

/// The machine's requests the driver serves on its own thread: the lock,
/// the inventory read, PVE's identity.
fn serve(cycle: &mut Cycle<'_>, clock: &Clock, pve: &mut Pve<'_>, io: Io) {
    match io {
        Io::Lock => {
            let got = match pve.lock {
                None => Ok(()),
                Some(locking) => locking
                    .acquire(cycle.name(), &pve.ready.base_url)
                    .map(|held| pve.held = Some(held))
                    .map_err(|e| proxops_core::plan::Abort::new(e.cause(), e.to_string())),
            };
            cycle.handle_lock(clock.now(), got);
        }
        Io::ReadSnapshot => {
            let read = reader::read_snapshot(pve.transport, &pve.ready.scope);
            cycle.handle_snapshot(clock.now(), read.map_err(|e| e.to_string()));
        }
        Io::ReadIdentity => {
            let id = proxops_pve::identity::read_identity(pve.transport);
            cycle.handle_identity(clock.now(), id.map_err(|e| e.to_string()), &[]);
        }
        Io::Send { .. } | Io::Wait { .. } | Io::AwaitDecision | Io::Done => {}
    }
}

/// Tells `ears` the machine's events, as the runner's progress.
fn tell(cycle: &mut Cycle<'_>, ears: &Ears<'_>) {
    while let Some(event) = cycle.poll_event() {
        let Some(index) = event_index(&event) else {
            continue;
        };
        let Some(action) = cycle.action(index) else {
            continue;
        };
        let progress = match &event {
            Event::Planned => continue,
            Event::Started {
                worker, running, ..
            } => Progress::Started {
                index,
                action,
                worker: *worker,
                running: *running,
            },
            Event::Phase {
                worker,
                doing,
                elapsed,
                ..
            } => Progress::Phase {
                index,
                action,
                worker: *worker,
                doing,
                elapsed: *elapsed,
            },
            Event::TaskRunning {
                worker,
                upid,
                doing,
                elapsed,
                ..
            } => Progress::TaskRunning {
                index,
                action,
                worker: *worker,
                upid,
                doing,
                elapsed: *elapsed,
            },
            Event::Finished {
                worker,
                outcome,
                elapsed,
                upids,
                ..
            } => Progress::Finished {
                index,
                action,
                worker: *worker,
                outcome,
                elapsed: *elapsed,
                upids,
            },
        };
        if let Some(f) = ears.on_progress {
            f(cycle.name(), &progress);
        }
        if let (
            Some(f),
            Event::Finished {
                worker, outcome, ..
            },
        ) = (ears.on_result, &event)
        {
            f(action, outcome, *worker);
        }
    }
}

fn event_index(event: &Event) -> Option<usize> {
    match event {
        Event::Planned => None,
        Event::Started { index, .. }
        | Event::Phase { index, .. }
        | Event::TaskRunning { index, .. }
        | Event::Finished { index, .. } => Some(*index),
    }
}
