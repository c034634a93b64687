//! The execution machine running actions at once, under proptest: for any
//! plan, any limits and any order and outcome in which the actions in
//! flight end, it never hands out an action before the actions of its
//! dependencies succeeded, never exceeds a limit (per node, per cluster,
//! downloads per storage), never has more disruptive actions in flight than
//! the disruption budget allows (per cluster and per group), never runs two
//! actions on one guest at once, hands out prunes only after every other
//! action ended, and ends with every action done or deferred — deferred
//! only when a dependency failed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use proxops_core::action::{Action, Impact, Op, Params, Target, Work};
use proxops_core::exec::{ActionState, Execution, Outcome};
use proxops_core::live::GuestType;
use proxops_core::names::{ClusterName, Kind, NodeName, Ref, ResourceName, StorageId, Vmid};
use proxops_core::plan::{AbortCause, Plan};
use proxops_core::planner::sort_actions;
use proxops_core::rollout::{DisruptionBudget, Limits};

const NODES: [&str; 3] = ["pve1", "pve2", "pve3"];
const STORAGES: [&str; 2] = ["local", "nfs"];
const GROUPS: [&str; 2] = ["db", "web"];

fn obj(i: usize) -> Ref {
    Ref {
        kind: Kind::VM,
        name: ResourceName::new(&format!("o{i}")).unwrap(),
    }
}

/// One generated action: (shape, object, node, deps among lower objects).
#[derive(Debug, Clone)]
struct Spec {
    shape: u8,
    object: usize,
    node: usize,
    storage: usize,
    deps: Vec<usize>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        0u8..9,
        0usize..8,
        0usize..3,
        0usize..2,
        prop::collection::vec(0usize..8, 0..3),
    )
        .prop_map(|(shape, object, node, storage, deps)| Spec {
            shape,
            object,
            node,
            storage,
            // Dependencies point at objects of a lower index: no cycle.
            deps: deps.into_iter().filter(|d| *d < object).collect(),
        })
}

fn action(s: &Spec, prune_id: u64) -> Action {
    let guest = || Target::Guest(Vmid::new(100 + s.object as u64).unwrap());
    let gt = GuestType::Qemu;
    let (op, impact, work, target) = match s.shape {
        0 => (
            Op::Download,
            Impact::Live,
            Work::Download {
                storage: StorageId::new(STORAGES[s.storage]).unwrap(),
                params: Params::new(),
            },
            Target::File {
                storage: StorageId::new(STORAGES[s.storage]).unwrap(),
                filename: format!("f{}.iso", s.object),
            },
        ),
        1 => (
            Op::Create,
            Impact::Live,
            Work::CreateGuest {
                guest_type: gt,
                params: Params::new(),
                mark_template: false,
            },
            guest(),
        ),
        2 => (
            Op::Update,
            Impact::StopStart,
            Work::UpdateConfig {
                guest_type: gt,
                params: Params::new(),
                delete: Vec::new(),
                digest: None,
                stop_first: true,
                restart_after: true,
                ha: None,
            },
            guest(),
        ),
        3 => (
            Op::Update,
            Impact::Live,
            Work::UpdateConfig {
                guest_type: gt,
                params: Params::new(),
                delete: Vec::new(),
                digest: None,
                stop_first: false,
                restart_after: false,
                ha: None,
            },
            guest(),
        ),
        4 => (
            Op::Start,
            Impact::Live,
            Work::Start {
                guest_type: gt,
                ha: None,
            },
            guest(),
        ),
        5 => (
            Op::Stop,
            Impact::Live,
            Work::Stop {
                guest_type: gt,
                ha: None,
                digest: None,
            },
            guest(),
        ),
        6 => (
            Op::Reboot,
            Impact::Reboot,
            Work::Reboot {
                guest_type: gt,
                ha: None,
                digest: None,
            },
            guest(),
        ),
        7 => (
            Op::MarkTemplate,
            Impact::Live,
            Work::MarkTemplate {
                guest_type: gt,
                stop_first: true,
                digest: None,
            },
            guest(),
        ),
        _ => (
            Op::Prune,
            Impact::Live,
            Work::Delete {
                guest_type: gt,
                stop_first: false,
                purge: false,
                digest: None,
            },
            Target::Guest(Vmid::new(prune_id).unwrap()),
        ),
    };
    let prune = op == Op::Prune;
    Action {
        op,
        kind: Kind::VM,
        name: format!("o{}", s.object),
        node: NodeName::new(NODES[s.node]).unwrap(),
        target,
        impact,
        changes: Vec::new(),
        reason: String::new(),
        level: s.object as u32 / 2,
        deps: if prune {
            Vec::new()
        } else {
            s.deps.iter().map(|d| obj(*d)).collect()
        },
        object: (!prune).then(|| obj(s.object)),
        work,
    }
}

fn plan(specs: &[Spec]) -> Plan {
    let mut actions: Vec<Action> = specs
        .iter()
        .enumerate()
        .map(|(i, s)| action(s, 900 + i as u64))
        .collect();
    sort_actions(&mut actions);
    let mut p = Plan::aborted(ClusterName::new("c").unwrap(), AbortCause::PveRead, "");
    p.abort = None;
    p.actions = actions;
    p
}

/// Disruptive as the budget counts it: the guest is down while it runs.
fn disruptive(a: &Action) -> bool {
    matches!(
        a.work,
        Work::UpdateConfig {
            stop_first: true,
            ..
        } | Work::MarkTemplate {
            stop_first: true,
            ..
        } | Work::Reboot { .. }
            | Work::Stop { .. }
    )
}

/// The earlier actions whose success `i` needs: those of each object it
/// depends on, on its node, or on any node when the object has none there.
fn dependencies(actions: &[Action], i: usize) -> Vec<usize> {
    let a = &actions[i];
    let mut out = Vec::new();
    for dep in &a.deps {
        let of_dep: Vec<usize> = (0..i)
            .filter(|&j| actions[j].object.as_ref() == Some(dep))
            .collect();
        let here: Vec<usize> = of_dep
            .iter()
            .copied()
            .filter(|&j| actions[j].node == a.node)
            .collect();
        out.extend(if here.is_empty() { of_dep } else { here });
    }
    out
}

fn succeeded(s: &ActionState) -> bool {
    matches!(
        s,
        ActionState::Done {
            outcome: Outcome::Succeeded,
            ..
        }
    )
}

fn ended(s: &ActionState) -> bool {
    matches!(s, ActionState::Done { .. } | ActionState::Deferred { .. })
}

fn limits() -> impl Strategy<Value = Limits> {
    (
        1usize..4,
        1usize..7,
        1usize..3,
        1usize..4,
        1usize..3,
        1usize..3,
    )
        .prop_map(
            |(per_node, per_cluster, downloads, k, group_default, db)| Limits {
                per_node,
                per_cluster,
                downloads_per_storage: downloads,
                disruption: DisruptionBudget {
                    cluster: k,
                    group_default,
                    groups: BTreeMap::from([("db".to_owned(), db)]),
                },
            },
        )
}

/// The order `sort_actions` gave when it compared whole keys.
fn sorted_by_whole_keys(mut actions: Vec<Action>) -> Vec<Action> {
    actions.sort_by(|a, b| {
        let tier = |x: &Action| u8::from(x.op == Op::Prune);
        let level = |x: &Action| {
            if x.op == Op::Prune {
                u32::MAX - x.level
            } else {
                x.level
            }
        };
        (tier(a), level(a), a.op.rank(), &a.node, &a.target, &a.name).cmp(&(
            tier(b),
            level(b),
            b.op.rank(),
            &b.node,
            &b.target,
            &b.name,
        ))
    });
    actions
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn actions_sort_as_comparing_whole_keys_sorted_them(
        specs in prop::collection::vec(spec(), 0..40),
        levels in prop::collection::vec(prop::sample::select(vec![0u32, 1, 2, 7, u32::MAX - 1, u32::MAX]), 40),
    ) {
        let mut actions: Vec<Action> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut a = action(s, 900 + (i % 5) as u64);
                a.level = levels[i];
                a
            })
            .collect();
        let expected = sorted_by_whole_keys(actions.clone());
        sort_actions(&mut actions);
        prop_assert_eq!(actions, expected);
    }

    #[test]
    fn handed_out_actions_respect_dependencies_limits_budgets_and_prune_order(
        specs in prop::collection::vec(spec(), 1..28),
        groups in prop::collection::vec(prop::option::of(0usize..2), 8),
        limits in limits(),
        // Which action in flight ends next, and whether it succeeds.
        ends in prop::collection::vec((any::<prop::sample::Index>(), 0u8..10), 64),
    ) {
        let p = plan(&specs);
        let group_of = |a: &Action| -> Option<String> {
            let o: usize = a.object.as_ref()?.name.as_str()[1..].parse().ok()?;
            groups[o].map(|g| GROUPS[g].to_owned())
        };
        let mut e = Execution::with_limits(&p, &limits, group_of);
        let actions = p.actions.clone();
        let mut in_flight: Vec<usize> = Vec::new();
        let mut t = 0;
        let mut step = 0;
        loop {
            t += 1;
            while let Some((i, _)) = e.next(t) {
                let states = e.states();
                for j in dependencies(&actions, i) {
                    prop_assert!(succeeded(&states[j]), "action {i} handed out before its dependency {j} succeeded: {:?}", states[j]);
                }
                if actions[i].op == Op::Prune {
                    for (j, b) in actions.iter().enumerate() {
                        if b.op != Op::Prune {
                            prop_assert!(ended(&states[j]), "prune {i} handed out while {j} has not ended");
                        } else if b.level > actions[i].level {
                            prop_assert!(ended(&states[j]), "prune {i} before prune {j} of a higher level");
                        }
                    }
                }
                in_flight.push(i);
                let flying: Vec<&Action> = in_flight.iter().map(|&j| &actions[j]).collect();
                prop_assert!(flying.len() <= limits.per_cluster);
                for n in NODES {
                    prop_assert!(flying.iter().filter(|a| a.node.as_str() == n).count() <= limits.per_node);
                    for s in STORAGES {
                        let downloads = flying.iter().filter(|a| a.node.as_str() == n && matches!(&a.work, Work::Download { storage, .. } if storage.as_str() == s)).count();
                        prop_assert!(downloads <= limits.downloads_per_storage);
                    }
                }
                let down: Vec<&&Action> = flying.iter().filter(|a| disruptive(a)).collect();
                // A guest a failed disruptive action left down counts too.
                let left_down = (0..actions.len())
                    .filter(|&j| disruptive(&actions[j]) && matches!(&states[j], ActionState::Done { outcome, .. } if *outcome != Outcome::Succeeded))
                    .count();
                prop_assert!(down.len() + left_down <= limits.disruption.cluster, "{} disruptive in flight and {left_down} left down, budget {}", down.len(), limits.disruption.cluster);
                for g in GROUPS {
                    let in_group = down.iter().filter(|a| group_of(a).as_deref() == Some(g)).count();
                    prop_assert!(in_group <= limits.disruption.of_group(g), "group {g}: {in_group} in flight");
                }
                let mut targets: Vec<(&str, String)> = flying.iter().map(|a| (a.node.as_str(), a.target.to_string())).collect();
                targets.sort();
                let before = targets.len();
                targets.dedup();
                prop_assert_eq!(before, targets.len(), "two actions on one guest or file at once");
            }
            if in_flight.is_empty() {
                break;
            }
            let (pick, ok) = ends[step % ends.len()];
            step += 1;
            let i = in_flight.swap_remove(pick.index(in_flight.len()));
            let outcome = if ok < 7 {
                Outcome::Succeeded
            } else {
                Outcome::Failed { error: "task failed".into(), pve: None }
            };
            e.record(i, outcome, t);
        }
        prop_assert!(e.is_finished(), "every action ends: {:?}", e.states());
        // Deferred only because a dependency did not succeed, or, for a
        // disruptive action, because another one failed (the rollout
        // paused).
        let any_disruptive_failed = (0..actions.len()).any(|j| {
            disruptive(&actions[j])
                && matches!(&e.states()[j], ActionState::Done { outcome, .. } if *outcome != Outcome::Succeeded)
        });
        for (i, s) in e.states().iter().enumerate() {
            if let ActionState::Deferred { reason } = s {
                prop_assert!(
                    dependencies(&actions, i).iter().any(|&j| !succeeded(&e.states()[j]))
                        || (disruptive(&actions[i]) && any_disruptive_failed && reason.contains("rollout paused")),
                    "action {i} deferred ({reason}) though its dependencies succeeded"
                );
            }
        }
    }

    #[test]
    fn unlimited_limits_run_independent_actions_at_once(
        n in 2usize..12,
    ) {
        // n updates on n guests of one node, no dependencies: with room for
        // all, all are handed out before any ends.
        let specs: Vec<Spec> = (0..n)
            .map(|o| Spec { shape: 3, object: o % 8, node: 0, storage: 0, deps: Vec::new() })
            .collect();
        let distinct: std::collections::BTreeSet<usize> = specs.iter().map(|s| s.object).collect();
        let p = plan(&specs);
        let limits = Limits { per_node: 64, per_cluster: 64, ..Limits::default() };
        let mut e = Execution::with_limits(&p, &limits, |_| None);
        let mut out = 0;
        while e.next(1).is_some() {
            out += 1;
        }
        // One at a time per guest: as many at once as there are guests.
        prop_assert_eq!(out, distinct.len());
    }
}

/// `n` stop-start updates of guests o0… on three nodes, independent.
fn stop_start_updates(n: usize) -> Plan {
    let specs: Vec<Spec> = (0..n)
        .map(|o| Spec {
            shape: 2,
            object: o,
            node: o % 3,
            storage: 0,
            deps: Vec::new(),
        })
        .collect();
    plan(&specs)
}

#[test]
fn a_disruption_budget_of_one_rolls_stop_start_updates_one_at_a_time() {
    let p = stop_start_updates(6);
    let mut e = Execution::with_limits(&p, &Limits::default(), |_| None);
    let (first, _) = e.next(1).unwrap();
    assert!(e.next(1).is_none(), "a second guest down while one is");
    e.record(first, Outcome::Succeeded, 2);
    assert!(e.next(2).is_some(), "the next rolls once the first is back");
}

#[test]
fn a_failed_stop_start_update_pauses_the_rollout_and_counts_as_down() {
    // Budget 1 and restarts that fail: before, each failure freed the
    // budget and the next guest went down too (4 down at once).
    let p = stop_start_updates(4);
    let mut e = Execution::with_limits(&p, &Limits::default(), |_| None);
    let (first, _) = e.next(1).unwrap();
    e.record(
        first,
        Outcome::Failed {
            error: "POST …/status/start: start failed: QEMU exited with code 1".into(),
            pve: None,
        },
        2,
    );
    assert!(e.next(2).is_none(), "no second guest taken down");
    assert!(e.is_finished());
    let deferred: Vec<&str> = e
        .states()
        .iter()
        .filter_map(|s| match s {
            ActionState::Deferred { reason } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deferred.len(), 3, "{:?}", e.states());
    assert!(
        deferred
            .iter()
            .all(|r| r.contains("the rollout paused after update VM/o0 failed")),
        "{deferred:?}"
    );
}

#[test]
fn a_failure_that_takes_no_guest_down_does_not_pause_the_rollout() {
    // A plain (live) update fails: the stop-start updates still roll.
    let mut specs: Vec<Spec> = (0..3)
        .map(|o| Spec {
            shape: 2,
            object: o,
            node: 0,
            storage: 0,
            deps: Vec::new(),
        })
        .collect();
    specs.insert(
        0,
        Spec {
            shape: 3,
            object: 5,
            node: 1,
            storage: 0,
            deps: Vec::new(),
        },
    );
    let p = plan(&specs);
    let mut e = Execution::with_limits(&p, &Limits::default(), |_| None);
    let mut handed = Vec::new();
    while let Some((i, a)) = e.next(1) {
        handed.push((i, disruptive(a)));
    }
    let (live, _) = *handed.iter().find(|(_, d)| !d).unwrap();
    e.record(
        live,
        Outcome::Failed {
            error: "refused".into(),
            pve: None,
        },
        2,
    );
    let (down, _) = *handed.iter().find(|(_, d)| *d).unwrap();
    e.record(down, Outcome::Succeeded, 3);
    assert!(e.next(3).is_some(), "the next stop-start update rolls");
}

#[test]
fn a_group_budget_holds_its_members_while_other_guests_roll() {
    let p = stop_start_updates(4);
    let mut limits = Limits::default();
    limits.disruption.cluster = 3;
    limits.disruption.groups.insert("db".into(), 1);
    // o0 and o1 are in db; o2 and o3 in no group.
    let group = |a: &Action| {
        let n = &a.object.as_ref()?.name;
        (n.as_str() == "o0" || n.as_str() == "o1").then(|| "db".to_owned())
    };
    let mut e = Execution::with_limits(&p, &limits, group);
    let mut out = Vec::new();
    while let Some((_, a)) = e.next(1) {
        out.push(a.name.clone());
    }
    out.sort();
    assert_eq!(out, ["o0", "o2", "o3"], "o1 waits for o0, the others go");
}

/// The plan's rollout line says how many turns the budget makes, and an
/// execution handing out what it may and ending it all before the next
/// round takes exactly that many rounds (equal actions, no groups).
#[test]
fn the_rollout_counts_the_turns_the_budget_makes() {
    use proxops_core::rollout::Rollout;
    for (n, budget) in [(20, 1), (20, 2), (20, 3), (20, 4), (20, 5), (7, 20), (1, 1)] {
        let p = stop_start_updates(n);
        let mut limits = Limits {
            per_node: n,
            per_cluster: n,
            ..Limits::default()
        };
        limits.disruption.cluster = budget;
        let rollout = Rollout::of(&p.actions, |_| None, &limits.disruption);
        assert_eq!(rollout.turns, n.div_ceil(budget), "{n} at {budget}");
        let mut e = Execution::with_limits(&p, &limits, |_| None);
        let mut rounds = 0;
        let mut now = 1;
        while !e.is_finished() {
            let started: Vec<usize> = std::iter::from_fn(|| e.next(now).map(|(i, _)| i)).collect();
            assert!(
                !started.is_empty(),
                "nothing runs, nothing left to wait for"
            );
            rounds += 1;
            now += 1;
            for i in started {
                e.record(i, Outcome::Succeeded, now);
            }
        }
        assert_eq!(rounds, rollout.turns, "{n} at {budget}");
    }
    let p = stop_start_updates(20);
    let line = Rollout::of(&p.actions, |_| None, &DisruptionBudget::default()).line();
    assert_eq!(
        line.as_deref(),
        Some(
            "Rollout: 20 stop-start updates (1 guest(s) unavailable at once: 20 turns), in 1 dependency wave(s)."
        )
    );
}

#[test]
fn a_group_budget_sets_the_turns_when_it_is_the_tighter_one() {
    use proxops_core::rollout::Rollout;
    let p = stop_start_updates(6);
    let mut budget = DisruptionBudget {
        cluster: 4,
        ..DisruptionBudget::default()
    };
    budget.groups.insert("db".into(), 1);
    // o0, o1 and o2 in db: three turns of one, beside the others.
    let group = |a: &Action| {
        let n = &a.object.as_ref()?.name;
        ["o0", "o1", "o2"]
            .contains(&n.as_str())
            .then(|| "db".to_owned())
    };
    let rollout = Rollout::of(&p.actions, group, &budget);
    assert_eq!(rollout.turns, 3);
    budget.groups.insert("db".into(), 3);
    assert_eq!(
        Rollout::of(&p.actions, group, &budget).turns,
        2,
        "6 at 4 at once"
    );
}
