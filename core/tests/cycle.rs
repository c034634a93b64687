//! Whole cluster cycles, in process: the cycle machine ([`proxops_core::cycle`])
//! driven against the simulated PVE (support/sim_pve.rs) on a simulated
//! clock. Each test is one way a cycle ends: refused before any request,
//! refused before any inventory read, refused before any write, partly
//! executed, executed without a read-back, stopped half way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use proxops_core::cycle::{Abort, Cycle, CycleRecord, Event, Known, Mode, Now, Settings};
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::exec::{ActionState, ObjectReport, ObjectState, Outcome};
use proxops_core::names::ClusterName;
use proxops_core::plan::{AbortCause, Policy};
use proxops_core::repo::ClusterDesired;
use proxops_core::rollout::Limits;
use proxops_core::step::{PowerPolicy, PveError};
use support::fixture::cluster;
use support::sim_pve::{SimPve, drive};

/// A VM on its own, and one whose disk is imported from the fixture's
/// `debian-cloud` disk image (so it waits for that download).
const WEB: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";
const APP: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: app\nspec:\n  node: pve1\n  vmid: 101\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      image: debian-cloud\n  networks:\n    - bridge: vmbr0\n";

fn desired() -> ClusterDesired {
    cluster(&[WEB, APP])
}

fn name(n: &str) -> ClusterName {
    ClusterName::new(n).unwrap()
}

fn settings(mode: Mode, cluster: &str) -> Settings {
    Settings {
        mode,
        policy: Policy::default(),
        power: PowerPolicy::default(),
        limits: Limits::serial(),
        task_timeout: Duration::from_secs(30 * 60),
        identify: Some(format!(
            "{cluster:?} (base-url \"https://{cluster}.example.org:8006\" in clusters/{cluster}/config.yaml)"
        )),
        lock: true,
        confirm: true,
        targets: None,
    }
}

fn start() -> Now {
    Now {
        instant: Default::default(),
        wall: 1_750_000_000,
    }
}

/// Runs one apply cycle of `desired` against `pve`.
fn apply(
    desired: &ClusterDesired,
    pve: &mut SimPve,
    lock: Result<(), Abort>,
    on_event: impl FnMut(&mut Cycle<'_>, &Event),
) -> (CycleRecord, Vec<Event>) {
    let secrets = CloudInitSecrets::default();
    let ctx = Context {
        cluster: desired,
        secrets: &secrets,
    };
    let mut cycle = Cycle::new(desired, ctx, name("t"), settings(Mode::Apply, "t"), start());
    let driven = drive(&mut cycle, pve, &[], lock, on_event);
    (cycle.finish(), driven.events)
}

fn object<'a>(r: &'a CycleRecord, kind: &str, name: &str) -> &'a ObjectReport {
    r.objects
        .iter()
        .find(|o| o.kind == kind && o.name == name)
        .unwrap_or_else(|| panic!("no record of {kind}/{name}: {:#?}", r.objects))
}

fn state_of(r: &CycleRecord, name: &str) -> ActionState {
    let e = r.execution.as_ref().expect("executed");
    let i = e.actions().iter().position(|a| a.name == name).unwrap();
    e.states()[i].clone()
}

#[test]
fn a_healthy_cycle_creates_everything_and_reads_it_back_converged() {
    let d = desired();
    let mut pve = SimPve::empty_for(&d, "lab");
    let (r, events) = apply(&d, &mut pve, Ok(()), |_, _| {});
    assert!(!r.plan.is_aborted(), "{:?}", r.plan.abort_reason());
    assert_eq!(pve.reads, 2, "the inventory, then the read-back");
    assert!(
        r.objects.iter().all(|o| o.state == ObjectState::Converged),
        "{:#?}",
        r.objects
    );
    assert_eq!(r.objects.len(), 5);
    assert!(r.readback.as_ref().is_some_and(|p| p.actions.is_empty()));
    assert_eq!(events.first(), Some(&Event::Planned));
    let started = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Started {
                    worker: 1,
                    running: 1,
                    ..
                }
            )
        })
        .count();
    assert_eq!(started, 5, "serial: one worker, one action at a time");
}

#[test]
fn unusable_credentials_refuse_the_cluster_before_any_request() {
    let d = desired();
    let mut pve = SimPve::empty_for(&d, "lab");
    let abort = Abort::new(
        AbortCause::Credentials,
        "credentials: cluster \"t\": PROXOPS_T_TOKEN: not a token secret",
    );
    let mut cycle = Cycle::refused(name("t"), abort, Vec::new(), start());
    drive(&mut cycle, &mut pve, &[], Ok(()), |_, _| panic!("no event"));
    let r = cycle.finish();
    assert_eq!(pve.requests, 0, "nothing sent to PVE");
    assert_eq!(r.plan.abort_cause(), Some(AbortCause::Credentials));
    assert!(r.execution.is_none() && r.snapshot.is_none());
}

#[test]
fn two_clusters_on_one_pve_are_both_refused_before_any_inventory_read() {
    let (da, db, dc) = (desired(), desired(), desired());
    let mut pves = [
        SimPve::empty_for(&da, "lab"),
        SimPve::empty_for(&db, "lab"),
        SimPve::empty_for(&dc, "other"),
    ];
    pves[2].identity.as_mut().unwrap().nodes = [("pve9".into(), "192.0.2.9".into())].into();
    let names = ["a", "b", "c"];
    // The driver's barrier: every cluster's PVE says which it is first.
    let known: Vec<Known> = pves
        .iter()
        .zip(names)
        .map(|(p, n)| Known {
            described: format!("{n:?}"),
            identity: p.identity.clone().unwrap(),
        })
        .collect();
    let secrets = CloudInitSecrets::default();
    let mut records = Vec::new();
    for (i, (d, pve)) in [&da, &db, &dc].into_iter().zip(pves.iter_mut()).enumerate() {
        let ctx = Context {
            cluster: d,
            secrets: &secrets,
        };
        let mut s = settings(Mode::Apply, names[i]);
        s.identify = Some(format!("{:?}", names[i]));
        let mut cycle = Cycle::new(d, ctx, name(names[i]), s, start());
        let others: Vec<Known> = known
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, k)| k.clone())
            .collect();
        drive(&mut cycle, pve, &others, Ok(()), |_, _| {});
        records.push(cycle.finish());
    }
    for (r, pve) in records.iter().zip(&pves).take(2) {
        assert_eq!(
            r.plan.abort_cause(),
            Some(AbortCause::SharedPve),
            "{:?}",
            r.plan.abort_reason()
        );
        assert_eq!((pve.reads, pve.writes.len()), (0, 0));
    }
    assert_eq!(
        records[0].plan.abort_reason(),
        Some(
            "cluster \"a\" leads to PVE cluster \"lab\" (nodes pve1 192.0.2.1), the same PVE as cluster \"b\": two cluster configs must never manage one PVE (each would prune the other's guests); no inventory read, no write"
        )
    );
    // The third cluster's PVE is another: it is read, planned and applied.
    assert!(!records[2].plan.is_aborted());
    assert!(pves[2].reads == 2 && !pves[2].writes.is_empty());
}

#[test]
fn a_pve_that_cannot_say_which_it_is_is_never_read() {
    let d = desired();
    let mut pve = SimPve::empty_for(&d, "lab");
    pve.identity = Err("GET /cluster/status: HTTP 403 Permission check failed".into());
    let (r, _) = apply(&d, &mut pve, Ok(()), |_, _| {});
    assert_eq!(r.plan.abort_cause(), Some(AbortCause::PveUnidentified));
    assert_eq!((pve.reads, pve.writes.len()), (0, 0));
}

#[test]
fn a_held_lock_refuses_the_cluster_before_its_inventory_is_read() {
    let d = desired();
    let mut pve = SimPve::empty_for(&d, "lab");
    let held = Abort::new(
        AbortCause::Locked,
        "another proxops process holds the lock of cluster \"t\"",
    );
    let (r, events) = apply(&d, &mut pve, Err(held), |_, _| {});
    assert_eq!(r.plan.abort_cause(), Some(AbortCause::Locked));
    assert_eq!(
        r.plan.abort_reason(),
        Some("another proxops process holds the lock of cluster \"t\"")
    );
    assert_eq!((pve.reads, pve.writes.len()), (0, 0));
    assert!(events.is_empty());
}

#[test]
fn a_failed_inventory_read_writes_nothing() {
    let d = desired();
    let mut pve = SimPve::empty_for(&d, "lab");
    pve.failing_reads.insert(1);
    let (r, _) = apply(&d, &mut pve, Ok(()), |_, _| {});
    assert_eq!(r.plan.abort_cause(), Some(AbortCause::PveRead));
    assert_eq!(
        r.plan.abort_reason(),
        Some("pve inventory read failed: GET /cluster/resources: HTTP 596 Connection timed out")
    );
    assert!(pve.writes.is_empty(), "{:?}", pve.writes);
    assert!(r.execution.is_none() && r.objects.is_empty());
}

#[test]
fn one_refused_write_fails_its_object_defers_its_dependants_and_the_rest_converges() {
    let d = desired();
    let mut pve = SimPve::empty_for(&d, "lab");
    pve.refuse = Some((
        "debian-cloud".into(),
        "storage 'local' is not online".into(),
    ));
    let (r, _) = apply(&d, &mut pve, Ok(()), |_, _| {});
    match state_of(&r, "debian-cloud") {
        ActionState::Done {
            outcome: Outcome::Failed { error, pve },
            ..
        } => {
            assert!(
                error.contains("HTTP 500 storage 'local' is not online"),
                "{error}"
            );
            assert!(
                matches!(pve, Some(PveError::Refused { status: 500, .. })),
                "{pve:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(state_of(&r, "app"), ActionState::Deferred { .. }));
    assert_eq!(
        object(&r, "DiskImage", "debian-cloud").state,
        ObjectState::Failed
    );
    assert_eq!(object(&r, "VM", "app").state, ObjectState::Skipped);
    for (kind, n) in [
        ("VM", "web"),
        ("ISO", "debian-iso"),
        ("CTTemplate", "debian-ct"),
    ] {
        assert_eq!(
            object(&r, kind, n).state,
            ObjectState::Converged,
            "{kind}/{n}"
        );
    }
    // The dependant sent nothing: web is the one guest PVE holds.
    assert_eq!(pve.live.guests.len(), 1);
    assert!(pve.live.guests.values().all(|g| g.name == "web"));
}

#[test]
fn a_failed_read_back_leaves_what_was_done_unconfirmed() {
    let d = desired();
    let mut pve = SimPve::empty_for(&d, "lab");
    pve.failing_reads.insert(2);
    let (r, _) = apply(&d, &mut pve, Ok(()), |_, _| {});
    assert!(!r.plan.is_aborted());
    assert!(r.readback.is_none());
    assert_eq!(pve.live.guests.len(), 2, "the writes happened");
    for o in &r.objects {
        assert_eq!(o.state, ObjectState::Drift, "{o:?}");
        assert_eq!(
            o.last_error.as_deref(),
            Some("read-back failed; convergence not confirmed")
        );
    }
}

#[test]
fn a_shutdown_lets_the_action_in_flight_finish_and_defers_the_rest() {
    let d = desired();
    let mut pve = SimPve::empty_for(&d, "lab");
    let mut first = None;
    let (r, events) = apply(&d, &mut pve, Ok(()), |cycle, event| {
        if let Event::Started { index, .. } = event
            && first.is_none()
        {
            first = Some(*index);
            cycle.stop();
        }
    });
    let first = first.expect("an action started");
    let e = r.execution.as_ref().unwrap();
    for (i, s) in e.states().iter().enumerate() {
        if i == first {
            assert!(
                matches!(
                    s,
                    ActionState::Done {
                        outcome: Outcome::Succeeded,
                        ..
                    }
                ),
                "{s:?}"
            );
        } else {
            assert_eq!(
                s,
                &ActionState::Deferred {
                    reason: "deferred: shutting down".into()
                }
            );
        }
    }
    let finished = events
        .iter()
        .filter(|e| matches!(e, Event::Finished { .. }))
        .count();
    assert_eq!(finished, 1);
    assert_eq!(pve.reads, 2, "the read-back still runs");
    let done = &e.actions()[first];
    assert_eq!(
        object(&r, done.kind.as_str(), &done.name).state,
        ObjectState::Converged
    );
    assert_eq!(
        r.objects
            .iter()
            .filter(|o| o.state == ObjectState::Skipped)
            .count(),
        4
    );
}

#[test]
fn planning_and_observing_never_execute() {
    for mode in [Mode::Plan, Mode::Observe] {
        let d = desired();
        let mut pve = SimPve::empty_for(&d, "lab");
        let secrets = CloudInitSecrets::default();
        let ctx = Context {
            cluster: &d,
            secrets: &secrets,
        };
        let mut cycle = Cycle::new(&d, ctx, name("t"), settings(mode, "t"), start());
        let driven = drive(&mut cycle, &mut pve, &[], Ok(()), |_, _| {});
        let r = cycle.finish();
        assert_eq!(r.plan.actions.len(), 5, "{mode:?}");
        assert!(pve.writes.is_empty() && r.execution.is_none(), "{mode:?}");
        assert_eq!(driven.events, vec![Event::Planned]);
    }
}

#[test]
fn a_task_that_never_ends_fails_at_its_deadline_on_the_simulated_clock() {
    // The deadline is judged on the clock the driver passes in: a cycle
    // whose task never ends takes exactly its task timeout, with no sleep.
    let d = cluster(&[WEB]);
    let mut pve = SimPve::empty_for(&d, "lab");
    pve.never_ending_tasks = true;
    let secrets = CloudInitSecrets::default();
    let ctx = Context {
        cluster: &d,
        secrets: &secrets,
    };
    let mut s = settings(Mode::Apply, "t");
    s.task_timeout = Duration::from_secs(60);
    let mut cycle = Cycle::new(&d, ctx, name("t"), s, start());
    let driven = drive(&mut cycle, &mut pve, &[], Ok(()), |_, _| {});
    let r = cycle.finish();
    let failed = r
        .execution
        .as_ref()
        .unwrap()
        .states()
        .iter()
        .filter(|s| {
            matches!(
                s,
                ActionState::Done {
                    outcome: Outcome::Failed { .. },
                    ..
                }
            )
        })
        .count();
    assert_eq!(failed, 4, "every download and the create time out");
    assert_eq!(driven.took, Duration::from_secs(4 * 60));
}
