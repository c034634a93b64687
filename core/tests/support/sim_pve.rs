//! A call-level front of the simulator ([`super::sim`]): PVE as the cycle
//! machine sees it, answering each call with `data` as the API does, on a
//! simulated clock.
//!
//! An action's work is applied to the simulated inventory at its first
//! write (`sim::apply` does all of it: create, config, power). Power calls
//! then flip the guest as PVE does, so a stop-start update's status reads
//! see it stopped between its shutdown and its start. Every task has ended
//! `OK` by its first status read. Every write for the object named in
//! `refuse` is refused with PVE's 500 and its text, changing nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proxops_core::action::Action;
use proxops_core::cycle::{Cycle, Event, Io, Known, Now, PveIdentity};
use proxops_core::live::{LiveSnapshot, NodeState, Power, StorageContent};
use proxops_core::repo::ClusterDesired;
use proxops_core::step::{self, Answer, Call, Instant, Method};
use serde_json::json;

use super::sim;

/// One simulated PVE.
pub struct SimPve {
    pub live: LiveSnapshot,
    /// Which PVE this is (`GET /cluster/status`), or what it answers
    /// instead.
    pub identity: Result<PveIdentity, String>,
    /// Inventory reads so far, and which of them fail (1-based).
    pub reads: usize,
    pub failing_reads: BTreeSet<usize>,
    /// `METHOD path` of every write, in order.
    pub writes: Vec<String>,
    /// Every request, reads included (identity and inventory reads count
    /// as one each).
    pub requests: usize,
    /// Every write for the object of this name is refused with this text.
    pub refuse: Option<(String, String)>,
    /// Every task is still running whenever it is read.
    pub never_ending_tasks: bool,
    applied: BTreeSet<usize>,
}

impl SimPve {
    /// A PVE with the nodes and (empty) storages `desired` names, and no
    /// guest.
    pub fn empty_for(desired: &ClusterDesired, cluster: &str) -> SimPve {
        let live = empty_snapshot(desired);
        let nodes = live
            .nodes
            .keys()
            .map(|n| (n.to_string(), "192.0.2.1".to_owned()))
            .collect();
        SimPve {
            live,
            identity: Ok(PveIdentity {
                cluster: Some(cluster.to_owned()),
                nodes,
            }),
            reads: 0,
            failing_reads: BTreeSet::new(),
            writes: Vec::new(),
            requests: 0,
            refuse: None,
            never_ending_tasks: false,
            applied: BTreeSet::new(),
        }
    }

    pub fn read_identity(&mut self) -> Result<PveIdentity, String> {
        self.requests += 1;
        self.identity.clone()
    }

    /// The inventory, as the reader would return it.
    pub fn read(&mut self) -> Result<LiveSnapshot, String> {
        self.requests += 1;
        self.reads += 1;
        if self.failing_reads.contains(&self.reads) {
            return Err("GET /cluster/resources: HTTP 596 Connection timed out".into());
        }
        Ok(self.live.clone())
    }

    /// PVE's answer to `call`, sent for action `index` (`action`).
    pub fn answer(&mut self, index: usize, action: &Action, call: &Call) -> Answer {
        self.requests += 1;
        let path = call.path.as_str();
        if call.method == Method::Get {
            return self.get(action, path);
        }
        self.writes.push(format!("{} {path}", call.method));
        if let Some((name, text)) = &self.refuse
            && action.name == *name
        {
            return Answer::Error(step::classify(500, text));
        }
        if self.applied.insert(index) {
            sim::apply(&mut self.live, &action.node, &action.target, &action.work);
        }
        let power = if path.ends_with("/status/shutdown") || path.ends_with("/status/stop") {
            Some(Power::Stopped)
        } else if path.ends_with("/status/start") {
            Some(Power::Running)
        } else {
            None
        };
        if let (Some(power), Some(guest)) = (power, self.guest(action)) {
            guest.power = power;
        }
        Answer::Data(json!(format!(
            "UPID:{}:0001:0002:6B0C:task:{}:root@pam:",
            action.node, action.target
        )))
    }

    fn guest(&mut self, action: &Action) -> Option<&mut proxops_core::live::LiveGuest> {
        self.live
            .guests
            .values_mut()
            .find(|g| g.node == action.node && action.target.to_string() == g.vmid.to_string())
    }

    fn get(&mut self, action: &Action, path: &str) -> Answer {
        if path.contains("/tasks/") && self.never_ending_tasks {
            return Answer::Data(json!({"status": "running"}));
        }
        if path.contains("/tasks/") {
            return Answer::Data(json!({"status": "stopped", "exitstatus": "OK"}));
        }
        let guest = self.guest(action).map(|g| (g.power, g.config.clone()));
        if path.ends_with("/status/current") {
            let power = match guest {
                Some((Power::Running, _)) => "running",
                _ => "stopped",
            };
            return Answer::Data(json!({"status": power, "qmpstatus": power}));
        }
        match guest {
            Some((_, Ok(cfg))) => {
                let mut data: BTreeMap<String, serde_json::Value> = cfg
                    .values
                    .iter()
                    .map(|(k, v)| (k.to_owned(), json!(v)))
                    .collect();
                if let Some(d) = cfg.digest {
                    data.insert("digest".into(), json!(d));
                }
                Answer::Data(json!(data))
            }
            _ => Answer::Error(step::classify(500, "Configuration file does not exist")),
        }
    }
}

/// A PVE inventory with the nodes and (empty) storages `desired` names,
/// and no guest.
pub fn empty_snapshot(desired: &ClusterDesired) -> LiveSnapshot {
    let mut live = LiveSnapshot::default();
    for o in desired.objects.values() {
        if let Some((node, _)) = o.spec.guest_id() {
            live.nodes.insert(node.clone(), NodeState::Online);
        }
        if let Some(a) = o.spec.artifact() {
            for n in a.all_nodes() {
                live.nodes.insert(n.clone(), NodeState::Online);
            }
        }
    }
    for pair in desired.storage_pairs() {
        live.storage.insert(pair, Ok(StorageContent::default()));
    }
    live
}

/// What driving a cycle saw.
#[derive(Debug, Default)]
pub struct Driven {
    pub events: Vec<Event>,
    /// The simulated time the cycle took.
    pub took: Duration,
}

/// Drives `cycle` against `pve` to its end on a simulated clock, as the
/// driver would with one worker answering at once: when nothing is to be
/// sent, time jumps to the machine's deadline. `others` are the other
/// clusters' PVEs; `lock` is what taking the lock gives; `on_event` may
/// act on the cycle after each event (e.g. stop it).
pub fn drive(
    cycle: &mut Cycle<'_>,
    pve: &mut SimPve,
    others: &[Known],
    lock: Result<(), proxops_core::cycle::Abort>,
    mut on_event: impl FnMut(&mut Cycle<'_>, &Event),
) -> Driven {
    let mut now = Now {
        instant: Instant::default(),
        wall: 1_750_000_000,
    };
    let mut lock = Some(lock);
    let mut driven = Driven::default();
    for _ in 0..100_000 {
        let io = cycle.poll(now);
        while let Some(event) = cycle.poll_event() {
            on_event(cycle, &event);
            driven.events.push(event);
        }
        match io {
            Io::ReadIdentity => {
                let mine = pve.read_identity();
                cycle.handle_identity(now, mine, others);
            }
            Io::Lock => cycle.handle_lock(now, lock.take().expect("the lock is taken once")),
            Io::ReadSnapshot => {
                let read = pve.read();
                cycle.handle_snapshot(now, read);
            }
            Io::Send { action, call } => {
                let a = cycle.action(action).expect("an action in flight").clone();
                let answer = pve.answer(action, &a, &call);
                cycle.handle_answer(now, action, answer);
            }
            Io::Wait { until: Some(due) } => {
                assert!(due >= now.instant, "a deadline in the past");
                now.wall += due.saturating_duration_since(now.instant).as_secs();
                now.instant = due;
                cycle.handle_timeout(now);
            }
            Io::Wait { until: None } => panic!("waiting for an answer no call awaits"),
            Io::AwaitDecision => cycle.proceed(),
            Io::Done => {
                while let Some(event) = cycle.poll_event() {
                    driven.events.push(event);
                }
                driven.took = now.instant.since_origin();
                return driven;
            }
        }
    }
    panic!("the cycle never ended")
}
