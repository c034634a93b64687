//! Notifications in memory: the tracker tells each change of state once
//! (drift, a failure, an anomaly, a hold, an abort, and "converged again"
//! after them) and nothing while the state stays; each target kind's
//! message is snapshot exactly; the outbox keeps the rate limit, retries
//! with backoff and gives up.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proxops_core::action::{AnomalyType, Change, Impact};
use proxops_core::config::TargetKind;
use proxops_core::exec::{ObjectReport, ObjectState};
use proxops_core::notify::{
    ATTEMPTS, BACKOFF_MAX_SECS, BURST, Event, EventKind, Outbox, REFILL_SECS, Retry, Tracker,
    message,
};
use proxops_core::plan::AbortCause;
use proxops_core::report::{
    AnomalyRecord, ClusterReport, CycleCounts, CycleResult, HeldObject, PendingAction,
};

const T0: u64 = 1_798_675_200;

fn obj(name: &str, state: ObjectState, error: Option<&str>) -> ObjectReport {
    ObjectReport {
        kind: "VM".into(),
        name: name.into(),
        node: "pve1".into(),
        id: "101".into(),
        state,
        last_action: None,
        last_error: error.map(str::to_owned),
        prune_reason: None,
        last_converged_at: None,
    }
}

fn memory(from: &str, to: &str) -> PendingAction {
    PendingAction {
        kind: "VM".into(),
        name: "web-01".into(),
        node: "pve1".into(),
        id: "101".into(),
        action: "update",
        impact: Impact::StopStart,
        reason: "VM/web-01: config drift (stop-required)".into(),
        changes: vec![Change::new("memory", Some(from.into()), Some(to.into()))],
    }
}

/// A `home` report: `web-01` in `state`, `db-01` converged.
fn report(state: ObjectState, pending: Vec<PendingAction>, error: Option<&str>) -> ClusterReport {
    ClusterReport {
        name: "home".into(),
        result: CycleResult::Ok,
        aborted: false,
        abort_reason: String::new(),
        counts: CycleCounts::default(),
        objects: vec![
            obj("web-01", state, error),
            obj("db-01", ObjectState::Converged, None),
        ],
        anomalies: BTreeMap::new(),
        actions: BTreeMap::new(),
        prune_deferred: BTreeMap::new(),
        desired_stale: false,
        read_only: false,
        pve_read_at: None,
        pending,
        self_guests: Vec::new(),
        planned: Vec::new(),
        object_anomalies: Vec::new(),
        manifests: BTreeMap::new(),
        holds: Vec::new(),
        elapsed_ms: 0,
    }
}

fn converged() -> ClusterReport {
    report(ObjectState::Converged, Vec::new(), None)
}

/// A planned drift on web-01 (before it is executed).
fn drift(from: &str) -> ClusterReport {
    report(ObjectState::Drift, vec![memory(from, "4096")], None)
}

fn kinds(events: &[Event]) -> Vec<EventKind> {
    events.iter().map(|e| e.kind).collect()
}

#[test]
fn a_fixed_drift_is_told_once_then_converged_again_once() {
    let mut t = Tracker::new();
    assert!(
        t.observe(&converged(), T0).is_empty(),
        "a start converged is quiet"
    );
    // Planned, then applied.
    let told = t.observe(&drift("2048"), T0 + 30);
    assert_eq!(kinds(&told), [EventKind::DriftDetected]);
    assert_eq!(
        told[0].objects[0].detail,
        "update [stop-start]: memory 2048 → 4096"
    );
    assert_eq!(
        kinds(&t.observe(&converged(), T0 + 31)),
        [EventKind::ConvergedAgain]
    );
    // Ten quiet cycles say nothing.
    for i in 0..10 {
        assert!(t.observe(&converged(), T0 + 60 + i * 30).is_empty());
    }
    // The same drift again later is news again.
    assert_eq!(
        kinds(&t.observe(&drift("2048"), T0 + 400)),
        [EventKind::DriftDetected]
    );
}

#[test]
fn a_drift_seen_every_cycle_is_told_once_and_a_different_one_again() {
    let mut t = Tracker::new();
    assert_eq!(
        kinds(&t.observe(&drift("2048"), T0)),
        [EventKind::DriftDetected]
    );
    for i in 1..10 {
        assert!(
            t.observe(&drift("2048"), T0 + i * 30).is_empty(),
            "cycle {i}"
        );
    }
    let other = t.observe(&drift("1024"), T0 + 400);
    assert_eq!(kinds(&other), [EventKind::DriftDetected]);
    assert_eq!(
        other[0].objects[0].detail,
        "update [stop-start]: memory 1024 → 4096"
    );
}

#[test]
fn a_failure_repeating_every_cycle_is_told_once_and_recovery_closes_it() {
    let mut t = Tracker::new();
    let failed = || {
        report(
            ObjectState::Failed,
            vec![memory("2048", "4096")],
            Some("PVE 500: storage busy"),
        )
    };
    for i in 0..5 {
        let before = t.observe(&drift("2048"), T0 + i * 30);
        let after = t.observe(&failed(), T0 + i * 30 + 5);
        if i == 0 {
            assert_eq!(kinds(&before), [EventKind::DriftDetected]);
            assert_eq!(kinds(&after), [EventKind::ApplyFailed]);
            assert_eq!(after[0].objects[0].detail, "PVE 500: storage busy");
        } else {
            assert!(
                before.is_empty() && after.is_empty(),
                "cycle {i}: {before:?} {after:?}"
            );
        }
    }
    assert!(t.observe(&drift("2048"), T0 + 200).is_empty());
    assert_eq!(
        kinds(&t.observe(&converged(), T0 + 205)),
        [EventKind::ConvergedAgain]
    );
}

#[test]
fn an_abort_is_told_once_per_cause_and_closed_by_convergence() {
    let mut t = Tracker::new();
    t.observe(&converged(), T0);
    let refused = ClusterReport::aborted("home", AbortCause::PveRead, "connection refused");
    let told = t.observe(&refused, T0 + 30);
    assert_eq!(kinds(&told), [EventKind::ClusterAborted]);
    assert_eq!(told[0].reason, "connection refused");
    // Same cause, other words: not news.
    let again = ClusterReport::aborted("home", AbortCause::PveRead, "timed out");
    assert!(t.observe(&again, T0 + 60).is_empty());
    let locked = ClusterReport::aborted("home", AbortCause::Locked, "held by an apply");
    assert_eq!(
        kinds(&t.observe(&locked, T0 + 90)),
        [EventKind::ClusterAborted]
    );
    assert_eq!(
        kinds(&t.observe(&converged(), T0 + 120)),
        [EventKind::ConvergedAgain]
    );
}

#[test]
fn anomalies_and_holds_are_told_when_they_appear() {
    let mut t = Tracker::new();
    let mut r = report(
        ObjectState::Anomalous,
        Vec::new(),
        Some("scsi0 would be re-created"),
    );
    r.object_anomalies = vec![AnomalyRecord {
        kind: "VM".into(),
        name: "web-01".into(),
        anomaly_type: AnomalyType::DataLoss,
        field: Some("scsi0".into()),
        message: "scsi0 would be re-created".into(),
    }];
    let told = t.observe(&r, T0);
    assert_eq!(kinds(&told), [EventKind::AnomalyRaised]);
    assert_eq!(
        told[0].objects[0].detail,
        "data_loss scsi0: scsi0 would be re-created"
    );
    assert!(t.observe(&r, T0 + 30).is_empty());

    // The hold a failed shutdown starts (the daemon's hold policy fills it).
    let mut held = report(ObjectState::Failed, Vec::new(), Some("shutdown timed out"));
    held.holds.push(HeldObject {
        kind: "VM".into(),
        name: "web-01".into(),
        op: "update".into(),
        failures: 1,
        next_attempt: T0 + 600,
        last_error: "shutdown timed out after 180 s".into(),
    });
    let told = t.observe(&held, T0 + 60);
    assert_eq!(kinds(&told), [EventKind::ApplyFailed, EventKind::HeldBack]);
    assert_eq!(
        told[1].objects[0].detail,
        "not tried again before 2026-12-31T00:10:00Z: update failed: shutdown timed out after 180 s"
    );
    assert!(t.observe(&held, T0 + 90).is_empty());
    assert_eq!(
        kinds(&t.observe(&converged(), T0 + 700)),
        [EventKind::ConvergedAgain]
    );
}

#[test]
fn clusters_are_tracked_apart() {
    let mut t = Tracker::new();
    let mut lab = drift("2048");
    lab.name = "lab".into();
    assert_eq!(
        kinds(&t.observe(&drift("2048"), T0)),
        [EventKind::DriftDetected]
    );
    assert_eq!(kinds(&t.observe(&lab, T0)), [EventKind::DriftDetected]);
    assert_eq!(t.observe(&lab, T0)[..], []);
}

fn drift_event() -> Event {
    let mut t = Tracker::new();
    let mut r = drift("2048");
    r.pending.push(PendingAction {
        name: "db-01".into(),
        id: "110".into(),
        node: "pve2".into(),
        impact: Impact::Live,
        changes: vec![Change::new(
            "description",
            Some("old <b>".into()),
            Some("new & better".into()),
        )],
        ..memory("", "")
    });
    t.observe(&r, T0).remove(0)
}

fn converged_event() -> Event {
    let mut t = Tracker::new();
    t.observe(&drift("2048"), T0);
    t.observe(&converged(), T0 + 5).remove(0)
}

fn shown(kind: TargetKind, e: &Event) -> String {
    let m = message(kind, e);
    let mut out = format!("{} {}\n", m.content_type, m.path);
    for (k, v) in &m.headers {
        out.push_str(&format!("{k}: {v}\n"));
    }
    out.push_str(&format!(
        "token in: {}: {}<token>\n\n",
        m.token_header.0, m.token_header.1
    ));
    out.push_str(&m.body);
    out
}

#[test]
fn messages_for_each_kind_of_target() {
    for kind in TargetKind::ALL {
        insta::assert_snapshot!(
            format!("{}_drift_detected", kind.as_str()),
            shown(kind, &drift_event())
        );
        insta::assert_snapshot!(
            format!("{}_converged_again", kind.as_str()),
            shown(kind, &converged_event())
        );
    }
}

#[test]
fn the_outbox_keeps_its_rate_and_order() {
    let mut o = Outbox::new(T0);
    for _ in 0..(BURST + 2) {
        assert!(o.push(drift_event(), T0).is_none());
    }
    let mut sent = 0;
    while o.next(T0).is_some() {
        o.sent();
        sent += 1;
    }
    assert_eq!(sent, BURST, "a burst, then the rate limit");
    assert_eq!(o.wake_at(T0), Some(T0 + REFILL_SECS));
    assert!(o.next(T0 + REFILL_SECS - 1).is_none());
    assert!(o.next(T0 + REFILL_SECS).is_some());
    o.sent();
    assert!(o.next(T0 + REFILL_SECS).is_none());
    assert!(o.next(T0 + 2 * REFILL_SECS).is_some());
    o.sent();
    assert!(o.is_empty());
    assert_eq!(o.wake_at(T0 + 100), None);
}

#[test]
fn a_failed_send_backs_off_doubling_to_the_cap_then_gives_up() {
    let mut o = Outbox::new(T0);
    o.push(drift_event(), T0);
    let mut now = T0;
    let mut waits = Vec::new();
    loop {
        // The rate limit is not what this is about: refill freely.
        let Some(_) = o.next(now) else {
            now = o.wake_at(now).unwrap();
            continue;
        };
        match o.failed(now, true) {
            Retry::At(at) => {
                waits.push(at - now);
                now = at;
            }
            Retry::GaveUp => break,
        }
    }
    assert_eq!(waits.len(), (ATTEMPTS - 1) as usize);
    assert_eq!(waits[..5], [1, 2, 4, 8, 16]);
    assert!(waits.iter().all(|w| *w <= BACKOFF_MAX_SECS));
    assert!(o.is_empty(), "given up");

    // A refusal a repeat cannot change is given up at once.
    o.push(drift_event(), now);
    assert!(o.next(now + 100).is_some());
    assert_eq!(o.failed(now + 100, false), Retry::GaveUp);
}

#[test]
fn a_full_queue_drops_its_oldest() {
    let mut o = Outbox::new(T0);
    let mut dropped = 0;
    for i in 0..(proxops_core::notify::QUEUE + 3) {
        let mut e = drift_event();
        e.at = T0 + i as u64;
        if let Some(old) = o.push(e, T0) {
            assert_eq!(old.at, T0 + dropped);
            dropped += 1;
        }
    }
    assert_eq!(dropped, 3);
}
