//! A plain executor of a plan's actions, one step protocol per action on
//! a few threads, with no admission checks and no read-back: for the
//! adapter's own tests and benches of the step protocol against fakepve
//! (built with the `fakepve` feature only). Commands run their cycles
//! through the driver (crate proxops-driver, on core's cycle machine),
//! which this never replaces.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use proxops_core::action::Action;
use proxops_core::exec::{Execution, Outcome, Timestamp};
use proxops_core::plan::Plan;
use proxops_core::repo::ClusterDesired;
use proxops_core::rollout::{self, Limits};
use proxops_core::step::{Instant, PowerPolicy, Step, StepSettings};

use crate::runner::{ActionObserver, Progress, ProgressObserver, send};
use crate::transport::Transport;

/// How the runner waits and when it stops.
pub struct RunOptions<'a> {
    /// Longest wait for one PVE task (`reconcile.task-timeout`, default 30 min).
    pub task_timeout: Duration,
    /// How the cluster's guests are powered off (`shutdown-timeout`,
    /// `force-stop-after-timeout`).
    pub power: PowerPolicy,
    /// The desired state the plan came from: a guest's
    /// `proxops/shutdown-timeout` annotation is read there.
    pub desired: Option<&'a ClusterDesired>,
    /// Wall-clock seconds for the execution record.
    pub now: &'a (dyn Fn() -> Timestamp + Sync),
    /// How many actions run at once and how many guests may be down at
    /// once (the cluster's `tasks-per-node`, `disruption-budget`, …).
    pub limits: Limits,
    /// Set by a signal handler: the actions in flight finish, no other starts.
    pub stop: Option<&'a AtomicBool>,
    /// Called after each action with its result (for log events).
    pub on_result: Option<&'a ActionObserver<'a>>,
    /// Called when an action starts, while its tasks run and when it ends.
    pub on_progress: Option<&'a ProgressObserver<'a>>,
}

impl RunOptions<'_> {
    pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(30 * 60);
}

/// Performs every runnable action of `plan` and returns the execution
/// record (each action's outcome, or why it was deferred). An aborted plan
/// performs nothing.
pub fn execute(transport: &dyn Transport, plan: &Plan, opts: &RunOptions<'_>) -> Execution {
    let mut execution = Execution::with_limits(plan, &opts.limits, |a| {
        opts.desired.and_then(|d| rollout::disruption_group(d, a))
    });
    let workers = opts.limits.per_cluster.clamp(1, plan.actions.len().max(1));
    let (jobs_tx, jobs_rx) = mpsc::channel::<(usize, Action, usize)>();
    let jobs_rx = Mutex::new(jobs_rx);
    let (done_tx, done_rx) = mpsc::channel::<(usize, Outcome)>();
    std::thread::scope(|scope| {
        for worker in 1..=workers {
            let jobs = &jobs_rx;
            let done = done_tx.clone();
            scope.spawn(move || {
                // The lock is held only to take a job, never while running it.
                while let Some((index, action, running)) =
                    jobs.lock().ok().and_then(|rx| rx.recv().ok())
                {
                    let outcome = run_one(transport, index, &action, worker, running, opts);
                    if done.send((index, outcome)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let mut in_flight = 0usize;
        loop {
            if opts.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
                execution.stop();
            }
            while let Some((index, action)) = execution.next((opts.now)()) {
                in_flight += 1;
                if jobs_tx.send((index, action.clone(), in_flight)).is_err() {
                    break;
                }
            }
            if in_flight == 0 {
                break;
            }
            // Woken by a result, or often enough to see the stop flag.
            match done_rx.recv_timeout(Duration::from_millis(200)) {
                Ok((index, outcome)) => {
                    in_flight -= 1;
                    execution.record(index, outcome, (opts.now)());
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        drop(jobs_tx);
    });
    execution
}

/// One action on worker `worker`, with its progress events.
fn run_one(
    transport: &dyn Transport,
    index: usize,
    action: &Action,
    worker: usize,
    running: usize,
    opts: &RunOptions<'_>,
) -> Outcome {
    if let Some(progress) = opts.on_progress {
        progress(&Progress::Started {
            index,
            action,
            worker,
            running,
        });
    }
    let started = std::time::Instant::now();
    let (outcome, upids) = perform_observed(transport, index, worker, action, opts);
    if let Some(progress) = opts.on_progress {
        progress(&Progress::Finished {
            index,
            action,
            worker,
            outcome: &outcome,
            elapsed: started.elapsed(),
            upids: &upids,
        });
    }
    if let Some(report) = opts.on_result {
        report(action, &outcome, worker);
    }
    outcome
}

/// Performs one action and reads PVE's answers into an `Outcome`.
pub fn perform(transport: &dyn Transport, action: &Action, opts: &RunOptions<'_>) -> Outcome {
    perform_observed(transport, 0, 1, action, opts).0
}

/// [`perform`], also returning the UPIDs of the tasks PVE ran for it: the
/// driver loop around core's [`Step`] — send the call it asks for, hand
/// back the answer, sleep until it next needs time.
fn perform_observed(
    transport: &dyn Transport,
    index: usize,
    worker: usize,
    action: &Action,
    opts: &RunOptions<'_>,
) -> (Outcome, Vec<String>) {
    let power = match opts.desired {
        Some(desired) => opts.power.for_action(desired, action),
        None => opts.power,
    };
    let settings = StepSettings {
        task_timeout: opts.task_timeout,
        power,
        tags_case_sensitive: opts.desired.is_some_and(|d| d.tag_case_sensitive),
    };
    let origin = std::time::Instant::now();
    let now = || Instant::from_origin(origin.elapsed());
    let mut step = Step::new(action, settings);
    let mut told = String::new();
    while step.outcome().is_none() {
        if let Some(call) = step.poll_request(now()) {
            let doing = step.doing().unwrap_or_default();
            if let Some(progress) = opts.on_progress
                && call.method.is_write()
                && doing != told
            {
                progress(&Progress::Phase {
                    index,
                    action,
                    worker,
                    doing: &doing,
                    elapsed: origin.elapsed(),
                });
                told.clone_from(&doing);
            }
            let answer = send(transport, &call);
            step.handle_answer(now(), answer);
            if let (Some(progress), Some((upid, elapsed))) = (opts.on_progress, step.task_running())
            {
                progress(&Progress::TaskRunning {
                    index,
                    action,
                    worker,
                    upid,
                    doing: &doing,
                    elapsed,
                });
            }
            continue;
        }
        let Some(due) = step.poll_timeout() else {
            break;
        };
        std::thread::sleep(due.saturating_duration_since(now()));
        step.handle_timeout(now());
    }
    let outcome = step.outcome().cloned().unwrap_or_else(|| {
        Outcome::failed(format!(
            "{} {}/{}: the step protocol stopped without an outcome",
            action.op, action.kind, action.name
        ))
    });
    (outcome, step.upids().to_vec())
}
