//! `ClusterReport::from_cycle`: counters, action results and object records
//! derived from a plan and its execution, for executed, dry-run and aborted
//! clusters.

#![allow(clippy::unwrap_used)]

mod support;

use proxops_core::action::{
    Action, Anomaly, AnomalyKind, AnomalyType, Impact, Op, Params, SkipReason, Skipped, Target,
    Work,
};
use proxops_core::exec::{Execution, ObjectReport, ObjectState, Outcome};
use proxops_core::live::GuestType;
use proxops_core::names::{ClusterName, Kind, NodeName, Ref, ResourceName, Vmid};
use proxops_core::plan::{AbortCause, Plan};
use proxops_core::report::{ActionKey, ActionResult, ClusterReport, CycleResult, merge_records};
use proxops_core::state::object_states;

fn r(kind: Kind, name: &str) -> Ref {
    Ref {
        kind,
        name: ResourceName::new(name).unwrap(),
    }
}

fn action(op: Op, kind: Kind, name: &str, vmid: u64, deps: Vec<Ref>) -> Action {
    Action {
        op,
        kind,
        name: name.into(),
        node: NodeName::new("pve1").unwrap(),
        target: Target::Guest(Vmid::new(vmid).unwrap()),
        impact: Impact::Live,
        changes: Vec::new(),
        reason: format!("{op} {name}"),
        level: 0,
        deps,
        object: (op != Op::Prune).then(|| r(kind, name)),
        work: Work::CreateGuest {
            guest_type: GuestType::Qemu,
            params: Params::new(),
            mark_template: false,
        },
    }
}

/// Creates `web` (ok) and `db` (fails), starts `db` (deferred: its create
/// failed), prunes `old` (ok); defers a prune of `older`; skips `cache`;
/// one data-loss anomaly on `web` and one empty-desired anomaly for the cluster.
fn plan() -> Plan {
    let mut p = Plan::aborted(ClusterName::new("prod").unwrap(), AbortCause::PveRead, "");
    p.abort = None;
    p.actions = vec![
        action(Op::Create, Kind::VM, "web", 100, vec![]),
        action(Op::Create, Kind::LXC, "db", 200, vec![]),
        action(Op::Start, Kind::LXC, "db", 200, vec![r(Kind::LXC, "db")]),
        action(Op::Prune, Kind::VM, "old", 300, vec![]),
    ];
    p.deferred = vec![action(Op::Prune, Kind::VM, "older", 301, vec![])];
    p.skipped = vec![Skipped {
        kind: Kind::VM,
        name: "cache".into(),
        node: NodeName::new("pve1").unwrap(),
        id: Target::Guest(Vmid::new(101).unwrap()),
        reason: SkipReason::NodeOffline {
            node: NodeName::new("pve1").unwrap(),
        },
    }];
    p.anomalies = vec![
        Anomaly {
            anomaly: AnomalyKind::DataLoss,
            kind: Some(Kind::VM),
            name: Some("web".into()),
            node: Some(NodeName::new("pve1").unwrap()),
            id: Some(Target::Guest(Vmid::new(100).unwrap())),
            field: Some("scsi0".into()),
            message: "scsi0 would be re-created".into(),
        },
        Anomaly {
            anomaly: AnomalyKind::EmptyDesired,
            kind: Some(Kind::LXC),
            name: None,
            node: None,
            id: None,
            field: None,
            message: "no LXC manifests left while tagged containers remain".into(),
        },
    ];
    p
}

fn executed(p: &Plan) -> Execution {
    let mut e = Execution::new(p);
    let mut now = 10;
    while let Some((i, a)) = e.next(now) {
        let outcome = if a.name == "db" {
            Outcome::Failed {
                error: "PVE 500: storage full".into(),
                pve: None,
            }
        } else {
            Outcome::Succeeded
        };
        now += 1;
        e.record(i, outcome, now);
    }
    e
}

fn state_of(r: &ClusterReport, kind: &str, name: &str) -> ObjectReport {
    r.objects
        .iter()
        .find(|o| o.kind == kind && o.name == name)
        .cloned()
        .unwrap()
}

#[test]
fn an_executed_cycle_counts_actions_prunes_deferrals_skips_and_anomalies() {
    let p = plan();
    let e = executed(&p);
    let objects = e.finish(
        &p,
        Some(&Plan {
            actions: Vec::new(),
            ..p.clone()
        }),
        20,
    );
    let rep = ClusterReport::from_cycle(&p, Some(&e), objects, None, false, 20);
    assert_eq!(rep.name, "prod");
    assert_eq!(rep.result, CycleResult::Ok);
    assert!(!rep.aborted);
    let c = rep.counts;
    assert_eq!((c.actions_ok, c.actions_error, c.pruned), (2, 1, 1));
    assert_eq!((c.prune_deferred, c.skipped, c.anomalies), (1, 1, 2));
    assert_eq!(c.objects, rep.objects.len() as u64);
    let key = |kind: &str, action: &str, result| ActionKey {
        kind: kind.into(),
        action: action.into(),
        result,
    };
    assert_eq!(
        rep.actions.get(&key("VM", "create", ActionResult::Ok)),
        Some(&1)
    );
    assert_eq!(
        rep.actions.get(&key("LXC", "create", ActionResult::Error)),
        Some(&1)
    );
    assert_eq!(
        rep.actions.get(&key("LXC", "start", ActionResult::Skipped)),
        Some(&1)
    );
    assert_eq!(
        rep.actions.get(&key("VM", "prune", ActionResult::Ok)),
        Some(&1)
    );
    assert_eq!(rep.anomalies.get(&AnomalyType::DataLoss), Some(&1));
    assert_eq!(rep.anomalies.get(&AnomalyType::EmptyDesired), Some(&1));
    assert_eq!(rep.prune_deferred.get("VM"), Some(&1));
    assert_eq!(rep.pve_read_at, Some(20));

    assert_eq!(state_of(&rep, "LXC", "db").state, ObjectState::Failed);
    assert_eq!(state_of(&rep, "VM", "old").state, ObjectState::Pruned);
    let web = state_of(&rep, "VM", "web");
    assert_eq!(
        web.state,
        ObjectState::Anomalous,
        "an anomaly overrides converged"
    );
    assert_eq!(web.last_error.as_deref(), Some("scsi0 would be re-created"));
    let older = state_of(&rep, "VM", "older");
    assert_eq!(older.state, ObjectState::Skipped);
    assert_eq!(older.prune_reason.as_deref(), Some("prune older"));
    let cache = state_of(&rep, "VM", "cache");
    assert_eq!(cache.state, ObjectState::Skipped);
    assert_eq!(
        cache.last_error.as_deref(),
        Some("node pve1 is not online this cycle; nothing planned for it")
    );
}

#[test]
fn a_dry_run_records_planned_actions_as_drift_and_counts_no_action() {
    let p = plan();
    let rep = ClusterReport::from_cycle(&p, None, Vec::new(), None, true, 20);
    assert_eq!(rep.result, CycleResult::DryRun);
    assert!(rep.actions.is_empty());
    assert_eq!(
        (
            rep.counts.actions_ok,
            rep.counts.actions_error,
            rep.counts.pruned
        ),
        (0, 0, 0)
    );
    let db = state_of(&rep, "LXC", "db");
    assert_eq!(db.state, ObjectState::Drift);
    assert_eq!(db.last_action.as_deref(), Some("start"));
    assert_eq!(state_of(&rep, "VM", "old").state, ObjectState::Drift);
    assert_eq!(state_of(&rep, "VM", "web").state, ObjectState::Anomalous);
}

#[test]
fn records_given_by_the_caller_win_over_derived_ones() {
    let p = plan();
    let given = ObjectReport {
        kind: "VM".into(),
        name: "cache".into(),
        node: "pve1".into(),
        id: "101".into(),
        state: ObjectState::Converged,
        last_action: None,
        last_error: None,
        prune_reason: None,
        last_converged_at: Some(5),
    };
    let rep = ClusterReport::from_cycle(&p, None, vec![given.clone()], None, true, 20);
    assert_eq!(state_of(&rep, "VM", "cache"), given);
}

#[test]
fn an_aborted_plan_reports_the_class_of_its_cause() {
    let name = ClusterName::new("lab").unwrap();
    let cases = [
        (AbortCause::NotReady, CycleResult::NotReady),
        (AbortCause::InvalidInput, CycleResult::ParseError),
        (AbortCause::UnknownNode, CycleResult::UnknownNode),
        (AbortCause::PveRead, CycleResult::PveReadError),
        (AbortCause::Plan, CycleResult::PlanError),
        (AbortCause::Locked, CycleResult::Locked),
        (AbortCause::LockUnavailable, CycleResult::Aborted),
        (AbortCause::Recording, CycleResult::Aborted),
        (AbortCause::PveUnidentified, CycleResult::Aborted),
        (AbortCause::SharedPve, CycleResult::Aborted),
        (AbortCause::MissingPrivilege, CycleResult::Aborted),
        (AbortCause::Credentials, CycleResult::Aborted),
        (AbortCause::RepositoryUnreadable, CycleResult::Aborted),
    ];
    assert_eq!(
        cases.map(|(c, _)| c),
        AbortCause::ALL,
        "every cause has its expected class here"
    );
    let reason = "pve inventory read failed: timeout";
    for (cause, want) in cases {
        let rep = ClusterReport::from_cycle(
            &Plan::aborted(name.clone(), cause, reason),
            None,
            Vec::new(),
            None,
            false,
            20,
        );
        assert!(rep.aborted);
        assert_eq!(rep.abort_reason, reason);
        assert_eq!(rep.result, want, "{cause:?}");
        assert_eq!(cause.label(), want.as_str(), "{cause:?}");
        assert_eq!(rep.pve_read_at, None);
    }
}

/// The `result` label comes from the cause alone: whatever the reason says
/// (another class's wording, nothing, any text), the label does not move.
#[test]
fn rewording_an_abort_reason_never_moves_its_metrics_label() {
    let name = ClusterName::new("lab").unwrap();
    let wordings = [
        "",
        "pve inventory read failed: timeout",
        "git sync failed and no previous good tree",
        "invalid input: 2 problem(s) in the repository; nothing read or written",
        "unknown node: VM/a references node x",
        "plan error: cycle",
        "locked: cluster lab is held by another proxops process",
        "cannot load recording /x.json: gone",
        "the cluster could not be planned, reworded",
    ];
    for cause in AbortCause::ALL {
        let label = cause.label();
        for reason in wordings {
            let plan = Plan::aborted(name.clone(), cause, reason);
            let rep = ClusterReport::from_cycle(&plan, None, Vec::new(), None, false, 20);
            assert_eq!(rep.result.as_str(), label, "{cause:?} with {reason:?}");
            let direct = ClusterReport::aborted("lab", cause, reason);
            assert_eq!(direct.result.as_str(), label, "{cause:?} with {reason:?}");
        }
    }
}

/// A plan marked aborted by hand, with no cause, is the catch-all class.
const VM_WEB: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";
const VM_CALM: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: calm\nspec:\n  node: pve1\n  vmid: 105\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";

#[test]
fn every_desired_object_without_an_action_is_recorded_converged() {
    let desired = support::fixture::cluster(&[VM_WEB, VM_CALM]);
    let mut p = plan();
    p.cluster = ClusterName::new("t").unwrap();
    let rep = ClusterReport::from_cycle(&p, None, Vec::new(), Some(&desired), true, 20);
    let calm = state_of(&rep, "VM", "calm");
    assert_eq!(
        (calm.state, calm.node.as_str(), calm.id.as_str()),
        (ObjectState::Converged, "pve1", "105")
    );
    let iso = state_of(&rep, "ISO", "debian-iso");
    assert_eq!(
        (iso.state, iso.id.as_str()),
        (ObjectState::Converged, "local:debian-13.iso")
    );
    assert_eq!(
        state_of(&rep, "VM", "web").state,
        ObjectState::Anomalous,
        "the anomaly still wins"
    );
    assert_eq!(
        state_of(&rep, "LXC", "db").state,
        ObjectState::Drift,
        "planned actions stay drift"
    );
    assert_eq!(rep.counts.objects, rep.objects.len() as u64);
}

#[test]
fn two_records_of_one_object_merge_into_the_worse() {
    let rec = |node: &str, state| ObjectReport {
        kind: "ISO".into(),
        name: "debian".into(),
        node: node.into(),
        id: "local:debian-13.iso".into(),
        state,
        last_action: Some("download".into()),
        last_error: (state == ObjectState::Failed).then(|| "storage full".into()),
        prune_reason: None,
        last_converged_at: (state == ObjectState::Converged).then_some(15),
    };
    let failed_second = merge_records(
        rec("pve1", ObjectState::Converged),
        rec("pve2", ObjectState::Failed),
    );
    let failed_first = merge_records(
        rec("pve2", ObjectState::Failed),
        rec("pve1", ObjectState::Converged),
    );
    for m in [failed_first, failed_second] {
        assert_eq!(m.state, ObjectState::Failed);
        assert_eq!(m.last_error.as_deref(), Some("storage full"));
        assert_eq!(m.node, "pve1,pve2");
    }
    let both = merge_records(
        rec("pve1", ObjectState::Converged),
        rec("pve2", ObjectState::Converged),
    );
    assert_eq!(
        (both.state, both.node.as_str(), both.last_converged_at),
        (ObjectState::Converged, "pve1,pve2", Some(15))
    );
}

/// The plan, its execution and the states decided after a read-back whose
/// plan has no action left.
fn executed_states() -> (Plan, Execution, Vec<ObjectReport>) {
    let p = plan();
    let e = executed(&p);
    let readback = Plan {
        actions: Vec::new(),
        ..p.clone()
    };
    let decided = object_states(&p, Some(&e), Some(&readback), None, 20);
    (p, e, decided)
}

/// Each named object's state in `records`.
fn states(records: &[ObjectReport]) -> Vec<(String, ObjectState)> {
    records.iter().map(|o| (o.name.clone(), o.state)).collect()
}

#[test]
fn object_states_of_an_executed_cycle_follow_the_precedence_table() {
    // Read back, `cache` still differs: the plan's skip (rule 5) stands.
    let (_, _, got) = executed_states();
    let want = [
        // Rule 1 over rule 4: its start was deferred, its create failed.
        ("db", ObjectState::Failed),
        ("cache", ObjectState::Skipped),
        // Rule 3.
        ("old", ObjectState::Pruned),
        // Rule 5: the prune budget held it back.
        ("older", ObjectState::Skipped),
        // Rule 2 over rule 6: created and read back, but an anomaly names it.
        ("web", ObjectState::Anomalous),
    ];
    assert_eq!(
        states(&got),
        want.map(|(n, s)| (n.to_owned(), s)).to_vec(),
        "{got:#?}"
    );
    let older = got.iter().find(|o| o.name == "older").unwrap();
    assert_eq!(older.last_error.as_deref(), Some("prune older"));
    let old = got.iter().find(|o| o.name == "old").unwrap();
    assert_eq!(old.prune_reason.as_deref(), Some("prune old"));
}

#[test]
fn object_states_without_an_execution_call_every_planned_object_drift() {
    let p = plan();
    let got = object_states(&p, None, None, None, 20);
    let drift: Vec<&str> = got
        .iter()
        .filter(|o| o.state == ObjectState::Drift)
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(drift, ["db", "old"], "{got:#?}");
    // Its last planned action: the start that follows its create.
    let db = got.iter().find(|o| o.name == "db").unwrap();
    assert_eq!(db.last_action.as_deref(), Some("start"));
}

#[test]
fn a_cycle_report_keeps_the_states_object_states_decided() {
    let (p, e, decided) = executed_states();
    let rep = ClusterReport::from_cycle(&p, Some(&e), decided.clone(), None, false, 20);
    assert_eq!(rep.objects, decided);
}
