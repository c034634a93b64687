//! The demo repository (fixtures/repos/demo) for the core's integration
//! tests: its files as the git adapter hands them over, its clusters
//! loaded, and a simulated PVE on which every one of its objects was
//! created in dependency order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proxops_core::action::{Target, Work};
use proxops_core::config::Overrides;
use proxops_core::drift::{Context, clone_params, create_params, download_params};
use proxops_core::live::{GuestType, LiveSnapshot};
use proxops_core::names::Kind;
use proxops_core::repo::{self, ClusterDesired, DesiredObject, RepoInput};

use super::sim;

/// Every file of the demo repository by its `/`-separated path, and the
/// cluster directories under `clusters/`.
pub fn files() -> (BTreeMap<String, Vec<u8>>, BTreeSet<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/repos/demo");
    let mut files = BTreeMap::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                files.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let dirs = files
        .keys()
        .filter_map(|p| p.strip_prefix("clusters/"))
        .filter_map(|p| p.split_once('/').map(|(d, _)| d.to_owned()))
        .collect();
    (files, dirs)
}

/// Loads a repository's clusters; any diagnostic fails the test.
pub fn load(files: &BTreeMap<String, Vec<u8>>, dirs: &BTreeSet<String>) -> Vec<ClusterDesired> {
    let loaded = repo::load(
        RepoInput {
            files,
            cluster_dirs: dirs,
        },
        None,
        &Overrides::default(),
    )
    .unwrap_or_else(|d| panic!("{d:#?}"));
    loaded
        .clusters
        .into_values()
        .map(|c| c.unwrap_or_else(|d| panic!("{d:#?}")))
        .collect()
}

/// The demo repository's clusters.
pub fn clusters() -> Vec<ClusterDesired> {
    let (files, dirs) = files();
    load(&files, &dirs)
}

/// A cluster's objects in dependency order (level, then ref).
pub fn in_order(c: &ClusterDesired) -> Vec<&DesiredObject> {
    let mut objs: Vec<&DesiredObject> = c.objects.values().collect();
    objs.sort_by_key(|o| (o.level, o.r#ref.clone()));
    objs
}

/// Every object of the cluster created in the simulator (downloads,
/// creates, clones) in dependency order, as a first apply would.
pub fn created(c: &ClusterDesired, ctx: &Context<'_>) -> LiveSnapshot {
    let mut snap = LiveSnapshot::default();
    for o in in_order(c) {
        if let Some(a) = o.spec.artifact() {
            for node in a.all_nodes() {
                let target = Target::File {
                    storage: a.storage.clone(),
                    filename: a.filename.clone(),
                };
                let work = Work::Download {
                    storage: a.storage.clone(),
                    params: download_params(o),
                };
                sim::apply(&mut snap, &node, &target, &work);
            }
            continue;
        }
        let (node, vmid) = o.spec.guest_id().unwrap();
        let work = if o.spec.vm().is_some_and(|v| v.clone.is_some()) {
            let (source, name, config, delete) = clone_params(o, ctx).unwrap();
            // The template's own manifest says where it is.
            let source_node = o
                .deps
                .iter()
                .filter(|d| d.kind == Kind::TemplateVM)
                .find_map(|d| c.objects.get(d)?.spec.guest_id())
                .map(|(n, _)| n.clone())
                .unwrap();
            Work::CloneGuest {
                source,
                source_node,
                name,
                config,
                delete,
                start_after: false,
                pool: None,
            }
        } else {
            let guest_type = if o.r#ref.kind.is_qemu() {
                GuestType::Qemu
            } else {
                GuestType::Lxc
            };
            Work::CreateGuest {
                guest_type,
                params: create_params(o, ctx).unwrap(),
                mark_template: o.r#ref.kind.is_template(),
            }
        };
        sim::apply(&mut snap, node, &Target::Guest(vmid), &work);
    }
    snap
}
