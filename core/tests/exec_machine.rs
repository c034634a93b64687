//! The execution state machine: order, deferral of dependants, shutdown,
//! and convergence decided by the read-back plan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proxops_core::action::{Action, Impact, Op, Params, Target, Work};
use proxops_core::exec::{ActionState, Execution, ObjectState, Outcome};
use proxops_core::live::GuestType;
use proxops_core::names::{ClusterName, Kind, NodeName, Ref, ResourceName, StorageId, Vmid};
use proxops_core::plan::{AbortCause, Plan};

fn r(kind: Kind, name: &str) -> Ref {
    Ref {
        kind,
        name: ResourceName::new(name).unwrap(),
    }
}

fn action(op: Op, kind: Kind, name: &str, node: &str, target: Target, deps: Vec<Ref>) -> Action {
    let work = match op {
        Op::Download => Work::Download {
            storage: StorageId::new("local").unwrap(),
            params: Params::new(),
        },
        Op::Prune => Work::Delete {
            guest_type: GuestType::Qemu,
            stop_first: false,
            purge: false,
            digest: None,
        },
        Op::Start => Work::Start {
            guest_type: GuestType::Lxc,
            ha: None,
        },
        _ => Work::CreateGuest {
            guest_type: GuestType::Lxc,
            params: Params::new(),
            mark_template: false,
        },
    };
    Action {
        op,
        kind,
        name: name.into(),
        node: NodeName::new(node).unwrap(),
        target,
        impact: Impact::Live,
        changes: Vec::new(),
        reason: String::new(),
        level: 0,
        deps,
        object: (op != Op::Prune).then(|| r(kind, name)),
        work,
    }
}

fn file() -> Target {
    Target::File {
        storage: StorageId::new("local").unwrap(),
        filename: "t.tar.zst".into(),
    }
}

fn guest(id: u64) -> Target {
    Target::Guest(Vmid::new(id).unwrap())
}

fn plan(actions: Vec<Action>) -> Plan {
    let mut p = Plan::aborted(ClusterName::new("c").unwrap(), AbortCause::PveRead, "");
    p.abort = None;
    p.actions = actions;
    p
}

fn demo_plan() -> Plan {
    plan(vec![
        action(
            Op::Download,
            Kind::CTTemplate,
            "tmpl",
            "pve1",
            file(),
            vec![],
        ),
        action(
            Op::Download,
            Kind::CTTemplate,
            "tmpl",
            "pve2",
            file(),
            vec![],
        ),
        action(
            Op::Create,
            Kind::LXC,
            "a",
            "pve1",
            guest(200),
            vec![r(Kind::CTTemplate, "tmpl")],
        ),
        action(
            Op::Create,
            Kind::LXC,
            "b",
            "pve2",
            guest(201),
            vec![r(Kind::CTTemplate, "tmpl")],
        ),
        action(
            Op::Start,
            Kind::LXC,
            "a",
            "pve1",
            guest(200),
            vec![r(Kind::CTTemplate, "tmpl")],
        ),
        action(Op::Prune, Kind::VM, "old", "pve1", guest(300), vec![]),
    ])
}

#[test]
fn actions_come_out_one_at_a_time_in_plan_order() {
    let p = demo_plan();
    let mut e = Execution::new(&p);
    let (i, _) = e.next(1).unwrap();
    assert_eq!(i, 0);
    assert!(
        e.next(1).is_none(),
        "never a second action while one is in flight"
    );
    e.record(i, Outcome::Succeeded, 2);
    assert_eq!(e.next(2).map(|(i, _)| i), Some(1));
}

#[test]
fn a_failed_prerequisite_defers_its_dependants_on_that_node_only() {
    let p = demo_plan();
    let mut e = Execution::new(&p);
    let mut order = Vec::new();
    while let Some((i, a)) = e.next(10) {
        order.push(i);
        let fail = a.op == Op::Download && a.node.as_str() == "pve1";
        e.record(
            i,
            if fail {
                Outcome::Failed {
                    error: "download failed: exit code 8".into(),
                    pve: None,
                }
            } else {
                Outcome::Succeeded
            },
            11,
        );
    }
    // pve1's create and start are deferred; pve2's create and the prune run.
    assert_eq!(order, vec![0, 1, 3, 5]);
    assert!(
        matches!(&e.states()[2], ActionState::Deferred { reason } if reason.contains("CTTemplate/tmpl"))
    );
    assert!(matches!(&e.states()[4], ActionState::Deferred { .. }));
    assert_eq!(e.counts(), (3, 1));
    assert!(e.is_finished());
}

#[test]
fn stop_lets_the_action_in_flight_finish_and_starts_nothing_else() {
    let p = demo_plan();
    let mut e = Execution::new(&p);
    let (i, _) = e.next(1).unwrap();
    e.stop();
    e.record(i, Outcome::Succeeded, 2);
    assert!(e.next(3).is_none());
    assert!(e.is_finished());
    assert!(
        e.states()[1..]
            .iter()
            .all(|s| matches!(s, ActionState::Deferred { .. }))
    );
}

#[test]
fn converged_only_when_the_read_back_plan_is_empty_for_the_object() {
    let p = plan(vec![
        action(Op::Create, Kind::LXC, "a", "pve1", guest(200), vec![]),
        action(Op::Create, Kind::LXC, "b", "pve1", guest(201), vec![]),
        action(Op::Prune, Kind::VM, "old", "pve1", guest(300), vec![]),
    ]);
    let mut e = Execution::new(&p);
    while let Some((i, _)) = e.next(5) {
        e.record(i, Outcome::Succeeded, 6);
    }
    // Read back: b still differs.
    let readback = plan(vec![action(
        Op::Create,
        Kind::LXC,
        "b",
        "pve1",
        guest(201),
        vec![],
    )]);
    let reports = e.finish(&p, Some(&readback), 7);
    let state = |n: &str| reports.iter().find(|r| r.name == n).unwrap().state;
    assert_eq!(state("a"), ObjectState::Converged);
    assert_eq!(state("b"), ObjectState::Drift);
    assert_eq!(state("old"), ObjectState::Pruned);
    assert_eq!(
        reports
            .iter()
            .find(|r| r.name == "a")
            .unwrap()
            .last_converged_at,
        Some(7)
    );
    // Without a read-back nothing is called converged.
    let blind = e.finish(&p, None, 7);
    assert!(blind.iter().all(|r| r.state != ObjectState::Converged));
}

#[test]
fn a_concurrent_change_is_a_failure_of_that_object_not_an_overwrite() {
    let p = plan(vec![action(
        Op::Create,
        Kind::LXC,
        "a",
        "pve1",
        guest(200),
        vec![],
    )]);
    let mut e = Execution::new(&p);
    let (i, _) = e.next(1).unwrap();
    e.record(i, Outcome::ChangedUnderUs, 2);
    let reports = e.finish(&p, Some(&plan(vec![])), 3);
    assert_eq!(reports[0].state, ObjectState::Failed);
    assert!(reports[0].last_error.as_deref().unwrap().contains("digest"));
}

#[test]
fn an_aborted_plan_executes_nothing() {
    let p = Plan::aborted(
        ClusterName::new("c").unwrap(),
        AbortCause::PveRead,
        "pve inventory read failed",
    );
    let mut e = Execution::new(&p);
    assert!(e.next(1).is_none());
    assert!(e.is_finished());
}
