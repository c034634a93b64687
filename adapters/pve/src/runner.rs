//! The runner: performs a plan's actions against PVE as core's execution
//! state machine hands them out (spec §14), several at once on a small
//! pool of blocking worker threads (std threads and channels, no async
//! runtime).
//!
//! A driver loop and nothing more: the main thread asks the machine for
//! every action that may start, hands each to an idle worker and records
//! results as workers report them, in any order. For each action a worker
//! runs core's step
//! protocol ([`proxops_core::step::Step`]), sends the call the protocol
//! asks for, hands back PVE's answer (classified once, by
//! [`proxops_core::step::classify`]) and sleeps until the protocol next
//! needs time. Which calls an action makes, how a task is followed, what
//! PVE's errors mean and when a guest may be stopped hard are core's.
//!
//! **Architecture Invariant:** the runner decides nothing: which action
//! starts when, within which limits, is the machine's. It owns the clock,
//! the threads, the sleep the protocol may not have, the progress events
//! and the `stop` flag. Form values are exposed (`Params::to_wire`) only at the
//! moment they are sent; no error or log line holds one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use proxops_core::action::Action;
use proxops_core::exec::{Execution, Outcome, Timestamp};
use proxops_core::plan::Plan;
use proxops_core::repo::ClusterDesired;
use proxops_core::rollout::{self, Limits};
use proxops_core::step::{self, Answer, Call, Instant, PowerPolicy, PveError, Step, StepSettings};

use crate::retry::explained_message;
use crate::transport::{Request, Transport, TransportError};

/// Told each action, its outcome and the worker that ran it (1-based) as
/// soon as it ends.
pub type ActionObserver<'a> = dyn Fn(&Action, &Outcome, usize) + Sync + 'a;

/// What the runner is doing, told as it happens, so a caller can show
/// progress. The runner itself prints and logs nothing.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// The plan's action number `index` (0-based) is about to start on
    /// worker `worker` (1-based); `running` actions are in flight with it.
    Started {
        index: usize,
        action: &'a Action,
        worker: usize,
        running: usize,
    },
    /// It moved on to a write that does something else (`shutting down`,
    /// `cloning from VM 9000`, `starting`), `elapsed` after it started.
    Phase {
        index: usize,
        action: &'a Action,
        worker: usize,
        doing: &'a str,
        elapsed: Duration,
    },
    /// One of its PVE tasks is not finished after `elapsed` (told after
    /// every status read that found it running); `doing` is its phase.
    TaskRunning {
        index: usize,
        action: &'a Action,
        worker: usize,
        upid: &'a str,
        doing: &'a str,
        elapsed: Duration,
    },
    /// The action ended after `elapsed`; `upids` are the tasks PVE ran for
    /// it, in order (none for a synchronous write).
    Finished {
        index: usize,
        action: &'a Action,
        worker: usize,
        outcome: &'a Outcome,
        elapsed: Duration,
        upids: &'a [String],
    },
}

/// Told every [`Progress`] event.
pub type ProgressObserver<'a> = dyn Fn(&Progress<'_>) + Sync + 'a;

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

/// The wall clock in Unix seconds (0 if the clock is before 1970).
pub fn unix_now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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
    let outcome = step.outcome().cloned().unwrap_or(Outcome::Failed {
        error: format!(
            "{} {}/{}: the step protocol stopped without an outcome",
            action.op, action.kind, action.name
        ),
        transient: false,
    });
    (outcome, step.upids().to_vec())
}

/// Sends one call; the form's secrets are exposed here and nowhere else.
fn send(transport: &dyn Transport, call: &Call) -> Answer {
    let request = Request::new(call.method, &call.path, call.form.to_wire());
    match transport.call(&request) {
        Ok(r) if r.is_success() => Answer::Data(r.data().clone()),
        Ok(r) => Answer::Error(step::classify(
            r.status,
            &explained_message(&r, transport.acting_as().as_deref()),
        )),
        Err(e @ TransportError::Io { .. }) => Answer::Error(PveError::NoAnswer {
            text: e.to_string(),
        }),
        Err(e) => Answer::Error(PveError::NotSent {
            text: e.to_string(),
        }),
    }
}
