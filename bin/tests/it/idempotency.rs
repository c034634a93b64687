//! Idempotency of the demo plan: executing the plan (in the PVE simulator
//! shared with the core's tests) and planning again converges. Starting from
//! the demo recordings, the second plan holds only the prunes the budget
//! deferred, the third plan nothing; starting from an empty PVE, the second
//! plan is empty. Anomalies are observations, never actions, and stay.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::sim;

use std::path::Path;

use proxops_core::action::Op;
use proxops_core::config::Overrides;
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::live::{LiveSnapshot, NodeState, StorageContent};
use proxops_core::plan::{Plan, Policy};
use proxops_core::planner::plan;
use proxops_core::repo::{self, ClusterDesired, RepoInput};
use proxops_pve::reader::{ReadScope, read_snapshot};
use proxops_pve::replay::ReplayTransport;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn demo() -> (proxops_core::config::Config, Vec<ClusterDesired>) {
    let tree = proxops_git::read_tree(
        &proxops_git::RepoRoot::explicit(&root().join("fixtures/repos/demo")).unwrap(),
    )
    .unwrap();
    let loaded = repo::load(
        RepoInput {
            files: &tree.files,
            cluster_dirs: &tree.cluster_dirs,
        },
        None,
        &Overrides::default(),
    )
    .unwrap();
    let clusters = loaded.clusters.into_values().map(|c| c.unwrap()).collect();
    (loaded.config, clusters)
}

fn replan(d: &ClusterDesired, s: &LiveSnapshot, policy: &Policy) -> Plan {
    let secrets = CloudInitSecrets::default();
    plan(
        d,
        s,
        &Context {
            cluster: d,
            secrets: &secrets,
        },
        policy,
    )
}

fn execute(p: &Plan, s: &mut LiveSnapshot) {
    for a in &p.actions {
        sim::apply(s, &a.node, &a.target, &a.work);
    }
}

#[test]
fn executing_the_demo_plan_converges() {
    let (cfg, clusters) = demo();
    for d in clusters {
        let cc = &cfg.clusters[&d.name];
        let policy = Policy {
            prune_budget: cfg.prune_budget,
            nodes: cc.nodes.clone(),
            allow_empty_prune: cc.allow_empty_prune,
            ..Default::default()
        };
        let transport =
            ReplayTransport::load(&root().join(format!("fixtures/live/demo/{}.json", d.name)))
                .unwrap();
        let scope = ReadScope {
            allowlist: Some(cc.nodes.clone()),
            storages: d.storage_pairs(),
            concurrency: 4,
            firewall: proxops_core::firewall_plan::read_scope(&d),
        };
        let mut live = read_snapshot(&transport, &scope).unwrap();

        let first = replan(&d, &live, &policy);
        assert!(
            !first.actions.is_empty(),
            "{}: the demo recordings carry drift",
            d.name
        );
        execute(&first, &mut live);

        let second = replan(&d, &live, &policy);
        let deferred: Vec<(String, String)> = first
            .deferred
            .iter()
            .map(|a| (a.name.clone(), a.target.to_string()))
            .collect();
        let now: Vec<(String, String)> = second
            .actions
            .iter()
            .map(|a| (a.name.clone(), a.target.to_string()))
            .collect();
        assert_eq!(
            now, deferred,
            "{}: after executing, only the deferred prunes remain: {:#?}",
            d.name, second.actions
        );
        assert!(second.actions.iter().all(|a| a.op == Op::Prune));
        assert_eq!(
            second.anomalies.len(),
            first.anomalies.len(),
            "{}: anomalies are reported, never acted on",
            d.name
        );
        execute(&second, &mut live);

        let third = replan(&d, &live, &policy);
        assert!(third.actions.is_empty(), "{}: {:#?}", d.name, third.actions);
        assert!(third.deferred.is_empty());
    }
}

#[test]
fn executing_the_demo_plan_on_an_empty_pve_converges() {
    let (cfg, clusters) = demo();
    for d in clusters {
        let cc = &cfg.clusters[&d.name];
        let policy = Policy {
            prune_budget: cfg.prune_budget,
            nodes: cc.nodes.clone(),
            allow_empty_prune: cc.allow_empty_prune,
            ..Default::default()
        };
        let mut live = LiveSnapshot::default();
        for n in &cc.nodes {
            live.nodes.insert(n.clone(), NodeState::Online);
        }
        for pair in d.storage_pairs() {
            live.storage.insert(pair, Ok(StorageContent::default()));
        }
        let first = replan(&d, &live, &policy);
        assert!(
            first.anomalies.is_empty(),
            "{}: {:#?}",
            d.name,
            first.anomalies
        );
        let objects = d.objects.len();
        assert!(
            first.actions.len() >= objects,
            "{}: every object is created",
            d.name
        );
        execute(&first, &mut live);
        let second = replan(&d, &live, &policy);
        assert!(second.is_empty(), "{}: {:#?}", d.name, second.actions);
    }
}
