//! The daemon's engine (`proxops run`): clusters cycled side by side, each
//! on its own schedule ([`Lanes`]); what a long-running process remembers
//! from one cycle to the next ([`Memory`]: the guests held back after a
//! failed disruptive action, the PVE request counts); how one pass over a
//! session's clusters runs ([`converge`]) and what each cluster's cycle
//! reports; and the notifications its reports turn into ([`Notices`]).
//!
//! The binary keeps loading the repository, the status server, logging
//! and the exit: it is told what happens through plain callbacks.
//!
//! Must never: stop cycling because one cluster's cycle failed or
//! panicked (that cluster is tried again next poll interval).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use proxops_core::cycle::CycleRecord;
use proxops_core::exec::Timestamp;
use proxops_core::hold::{Backoff, Holds};
use proxops_core::notify::Tracker;
use proxops_core::plan::Plan;
use proxops_core::repo::ClusterDesired;
use proxops_core::report::{ClusterReport, CycleReport, HeldObject, RunMode};
use proxops_http::{DeliveryObserver, Notifier, Target};
use proxops_pve::live::LiveTransport;
use proxops_pve::runner::unix_now;

use crate::cluster::{Prepared, Session};
use crate::drive::{self, ApplyOptions};

/// One cluster's schedule: its cycle in flight, and when the next is due
/// (a poll interval after the last one started, as one cluster alone).
/// Clusters run side by side (`daemon.parallel-clusters` at a time), so a
/// slow or hung PVE holds back its own cycles only.
struct Lane {
    cycle: Option<JoinHandle<()>>,
    next: Instant,
}

impl Lane {
    fn is_due(&self, now: Instant) -> bool {
        self.cycle.is_none() && self.next <= now
    }
}

/// Every cluster's schedule, by cluster name.
pub struct Lanes {
    lanes: BTreeMap<String, Lane>,
    /// Told when a cluster's cycle thread ended in a panic (a bug).
    on_panic: fn(),
}

impl Lanes {
    pub fn new(on_panic: fn()) -> Lanes {
        Lanes {
            lanes: BTreeMap::new(),
            on_panic,
        }
    }

    /// Forgets the cycles that finished.
    pub fn reap(&mut self) {
        let on_panic = self.on_panic;
        for lane in self.lanes.values_mut() {
            if lane.cycle.as_ref().is_some_and(JoinHandle::is_finished) {
                wait(lane, on_panic);
            }
        }
    }

    /// Every cluster is due now (one still in its cycle right after it).
    pub fn all_due(&mut self, now: Instant) {
        for lane in self.lanes.values_mut() {
            lane.next = now;
        }
    }

    /// How many clusters are in a cycle.
    pub fn busy(&self) -> usize {
        self.lanes.values().filter(|l| l.cycle.is_some()).count()
    }

    /// A cluster with no lane yet, or whose lane is due.
    pub fn is_due(&self, name: &str, now: Instant) -> bool {
        self.lanes.get(name).is_none_or(|l| l.is_due(now))
    }

    /// `name`'s cycle started (on `cycle`); the next is due at `next`.
    pub fn started(&mut self, name: String, cycle: JoinHandle<()>, next: Instant) {
        self.lanes.insert(
            name,
            Lane {
                cycle: Some(cycle),
                next,
            },
        );
    }

    /// `name` had its turn without a cycle (the repository did not load);
    /// the next is due at `next`.
    pub fn skipped(&mut self, name: String, next: Instant) {
        self.lanes
            .entry(name)
            .or_insert(Lane { cycle: None, next })
            .next = next;
    }

    /// A cluster gone from `scheduled` keeps no schedule (once its cycle
    /// in flight is done).
    pub fn retain(&mut self, scheduled: &[String]) {
        self.lanes
            .retain(|name, lane| lane.cycle.is_some() || scheduled.contains(name));
    }

    /// `run --once`: every cluster has had its turn and none is in a cycle.
    pub fn turn_taken(&self, clusters: &[String]) -> bool {
        clusters
            .iter()
            .all(|n| self.lanes.get(n).is_some_and(|l| l.cycle.is_none()))
    }

    /// Waits for every cycle in flight.
    pub fn wait_all(&mut self) {
        let on_panic = self.on_panic;
        for lane in self.lanes.values_mut() {
            wait(lane, on_panic);
        }
    }
}

/// Waits for the lane's cycle in flight, if any.
fn wait(lane: &mut Lane, on_panic: fn()) {
    if let Some(c) = lane.cycle.take()
        && c.join().is_err()
    {
        on_panic();
    }
}

/// A wish to sync now, from a verified push: set by the webhook on the
/// server's thread, taken by the loop at its next turn. Pushes that
/// arrive before the loop takes the wish are one wish: a burst starts one
/// cycle per cluster.
#[derive(Default)]
pub struct Wake {
    wanted: AtomicBool,
}

impl Wake {
    pub fn push(&self) {
        self.wanted.store(true, Ordering::SeqCst);
    }

    /// Whether a sync was wished for since the last call.
    pub fn take(&self) -> bool {
        self.wanted.swap(false, Ordering::SeqCst)
    }
}

/// Waits `d`, looking at `stop` every `tick` and returning early once it
/// is set.
pub fn pause(stop: &AtomicBool, d: Duration, tick: Duration) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(tick));
    }
}

/// What the daemon remembers from one cycle to the next, shared by the
/// clusters' cycle threads (each lock held for a look-up or an update,
/// never across a request).
#[derive(Default)]
pub struct Memory {
    /// Per cluster, the guests held back after a failed disruptive action
    /// (core's `hold`).
    holds: Mutex<BTreeMap<String, Holds>>,
    counted: Mutex<Counted>,
}

/// A cluster's cycle as the status store records it, and how long it took.
pub struct Reported {
    pub report: ClusterReport,
    pub elapsed: Duration,
}

impl Memory {
    /// The holds of the last cycles, judged at this cycle's start (`now`).
    pub fn prime(&self, session: &mut Session<'_>, now: Timestamp) {
        if let Ok(held) = self.holds.lock() {
            for p in &mut session.clusters {
                if let Ok(ready) = &mut p.ready {
                    ready.policy.holds = held.get(p.name.as_str()).cloned().unwrap_or_default();
                    ready.policy.now = now;
                }
            }
        }
    }

    /// Each cluster's cycle as the store records it (holds remembered, PVE
    /// requests counted); `desired` finds a cluster's desired state. The
    /// requests made since the last cycle come back as `(method, result,
    /// count)`.
    pub fn reports<'w>(
        &self,
        cycles: Vec<CycleRecord>,
        session: &Session<'_>,
        desired: impl Fn(&str) -> Option<&'w ClusterDesired>,
        (mode, backoff): (RunMode, &Backoff),
    ) -> (Vec<Reported>, Vec<(String, String, u64)>) {
        let mut reported = Vec::new();
        let mut requests = Vec::new();
        for c in cycles {
            let desired = desired(c.name.as_str());
            let held = self.remember_holds(&c, desired, backoff);
            let mut report = ClusterReport::from_cycle(
                &c.plan,
                c.execution.as_ref(),
                c.objects,
                desired,
                mode == RunMode::Observe,
                c.finished_at,
            );
            report.holds = held;
            report.elapsed_ms = u64::try_from(c.elapsed.as_millis()).unwrap_or(u64::MAX);
            let live = session
                .clusters
                .iter()
                .find(|p| p.name == c.name)
                .and_then(|p| p.ready.as_ref().ok())
                .and_then(|r| r.live.as_ref());
            if let Some(live) = live {
                report.read_only = live.is_read_only();
                if let Ok(mut counted) = self.counted.lock() {
                    requests.extend(counted.delta(report.name.as_str(), live));
                }
            }
            reported.push(Reported {
                report,
                elapsed: c.elapsed,
            });
        }
        (reported, requests)
    }

    /// Teaches the cluster's holds what its executed cycle did, and returns
    /// them as `/status` and `/metrics` show them.
    fn remember_holds(
        &self,
        c: &CycleRecord,
        desired: Option<&ClusterDesired>,
        backoff: &Backoff,
    ) -> Vec<HeldObject> {
        let Ok(mut all) = self.holds.lock() else {
            return Vec::new();
        };
        let mine = all.entry(c.name.as_str().to_owned()).or_default();
        if let (Some(execution), Some(desired)) = (&c.execution, desired) {
            mine.record(
                execution,
                c.readback.as_ref(),
                desired,
                backoff,
                c.finished_at,
            );
        }
        HeldObject::all(mine)
    }
}

/// The request counts each cluster's transport had at the end of the last
/// cycle: transports live across cycles (their counts are running totals)
/// until a configuration change replaces them (counts start again).
#[derive(Default)]
struct Counted {
    last: BTreeMap<String, (Arc<LiveTransport>, RequestTotals)>,
}

/// Requests by `(method, result)`.
type RequestTotals = BTreeMap<(String, String), u64>;

impl Counted {
    /// `(method, result, count)` added since the last call for `cluster`.
    fn delta(&mut self, cluster: &str, live: &Arc<LiveTransport>) -> Vec<(String, String, u64)> {
        let now: RequestTotals = live
            .request_counts()
            .into_iter()
            .map(|rc| {
                (
                    (rc.method.as_str().to_owned(), rc.result.as_str().to_owned()),
                    rc.count,
                )
            })
            .collect();
        let before = match self.last.get(cluster) {
            Some((t, counts)) if Arc::ptr_eq(t, live) => counts.clone(),
            _ => BTreeMap::new(),
        };
        let out = now
            .iter()
            .filter_map(|(k, n)| {
                let d = n.saturating_sub(before.get(k).copied().unwrap_or(0));
                (d > 0).then(|| (k.0.clone(), k.1.clone(), d))
            })
            .collect();
        self.last
            .insert(cluster.to_owned(), (Arc::clone(live), now));
        out
    }
}

/// What one pass over a session's clusters is told as it goes.
pub struct Pass<'a> {
    pub mode: RunMode,
    pub opts: ApplyOptions<'a>,
    /// A cluster's plan, before it is executed (apply mode).
    pub planned: &'a dyn Fn(&Prepared<'_>, &Plan),
    /// Observe mode: the number of writes the read-only transport refused
    /// (0 unless there is a bug), and each plan.
    pub observed: &'a dyn Fn(u64, &[CycleRecord]),
}

/// One pass over `session`'s clusters, one after another: in apply mode
/// each is planned (told to `pass.planned`) and executed; observing, each
/// is read and planned through a transport that refuses writes.
pub fn converge(session: &Session<'_>, pass: &Pass<'_>) -> Vec<CycleRecord> {
    match pass.mode {
        RunMode::Apply => session
            .clusters
            .iter()
            .map(|p| {
                let planned = drive::plan_cluster(p, pass.opts.lock);
                (pass.planned)(p, &planned.plan);
                drive::execute_cluster(p, planned, &pass.opts)
            })
            .collect(),
        RunMode::Observe => {
            let (cycles, refused) = drive::observe_all(session);
            (pass.observed)(refused, &cycles);
            cycles
        }
    }
}

/// What turns cluster reports into notifications: core's tracker (what
/// has been told) and the notifier thread (which sends). Without targets
/// it does nothing.
pub struct Notices {
    tracker: Mutex<Tracker>,
    notifier: Option<Notifier>,
}

impl Notices {
    /// Starts the notifier for `targets`, telling `observer` what becomes
    /// of each message.
    pub fn start(targets: Vec<Target>, observer: DeliveryObserver) -> Result<Notices, String> {
        let notifier = if targets.is_empty() {
            None
        } else {
            Some(
                Notifier::start(targets, observer)
                    .map_err(|e| format!("cannot start the notifier: {e}"))?,
            )
        };
        Ok(Notices {
            tracker: Mutex::new(Tracker::new()),
            notifier,
        })
    }

    /// A cluster's plan, before it is executed: drift (and an abort) is
    /// told now, not after the apply.
    pub fn planned(&self, plan: &Plan, desired: Option<&ClusterDesired>) {
        if self.notifier.is_some() {
            let report =
                ClusterReport::from_cycle(plan, None, Vec::new(), desired, false, unix_now());
            self.tell(&report);
        }
    }

    /// A finished cycle: failures, anomalies, holds, aborts, convergence.
    pub fn after(&self, cycle: &CycleReport) {
        if self.notifier.is_some() {
            for c in &cycle.clusters {
                self.tell(c);
            }
        }
    }

    fn tell(&self, report: &ClusterReport) {
        let events = match self.tracker.lock() {
            Ok(mut t) => t.observe(report, unix_now()),
            Err(_) => return,
        };
        if let Some(n) = &self.notifier {
            n.tell(events);
        }
    }
}
