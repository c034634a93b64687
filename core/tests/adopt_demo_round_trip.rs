//! Adoption of what ProxOps itself created: every cluster of the demo
//! repository is created in the PVE simulator (which stores values the
//! way PVE 9.2 reports them), adopted, loaded back as a repository and
//! planned against the same state. Every guest carries the ownership tag,
//! so the plan is empty.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proxops_core::action::{Target, Work};
use proxops_core::adopt::{AdoptOptions, TEMPLATE_PLACEHOLDER, adopt};
use proxops_core::config::Overrides;
use proxops_core::drift::{
    CloudInitSecrets, Context, clone_params, create_params, download_params,
};
use proxops_core::live::{GuestType, LiveSnapshot};
use proxops_core::plan::{Policy, plan};
use proxops_core::repo::{self, ClusterDesired, DesiredObject, RepoInput};

use support::sim;

fn read_tree(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            read_tree(root, &p, out);
        } else {
            let rel = p
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel, std::fs::read(&p).unwrap());
        }
    }
}

fn load(files: &BTreeMap<String, Vec<u8>>, dirs: &BTreeSet<String>) -> Vec<ClusterDesired> {
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

fn demo() -> Vec<ClusterDesired> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/repos/demo");
    let mut files = BTreeMap::new();
    read_tree(&root, &root, &mut files);
    let dirs: BTreeSet<String> = std::fs::read_dir(root.join("clusters"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    load(&files, &dirs)
}

fn build(c: &ClusterDesired, ctx: &Context<'_>) -> LiveSnapshot {
    let mut objs: Vec<&DesiredObject> = c.objects.values().collect();
    objs.sort_by_key(|o| (o.level, o.r#ref.clone()));
    let mut snap = LiveSnapshot::default();
    for o in objs {
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
            Work::CloneGuest {
                source,
                source_node: node.clone(),
                name,
                config,
                delete,
                start_after: false,
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

#[test]
fn what_proxops_created_adopts_back_into_an_empty_plan() {
    let secrets = CloudInitSecrets::default();
    let mut guests = 0;
    for c in demo() {
        let ctx = Context {
            cluster: &c,
            secrets: &secrets,
        };
        let snap = build(&c, &ctx);
        let a = adopt(&c.name, &snap, &AdoptOptions::default()).unwrap();
        let ctt = a
            .files
            .keys()
            .find_map(|p| p.strip_prefix(&format!("ctt/{}/", c.name)))
            .map(|f| f.trim_end_matches(".yaml").to_owned());
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        files.insert(
            format!("clusters/{}/config.yaml", c.name),
            format!(
                "pve:\n  clusters:\n    {}:\n      base-url: https://pve.example.org:8006\n",
                c.name
            )
            .into_bytes(),
        );
        let mut lines = a.resources_lines.clone();
        for (path, text) in &a.files {
            let text = if text.contains(TEMPLATE_PLACEHOLDER) {
                lines.push(format!("  - ../../{path}"));
                let name = ctt
                    .clone()
                    .expect("a container needs an adopted CTTemplate");
                text.lines()
                    .map(|l| {
                        if l.starts_with("  template: ") {
                            format!("  template: {name}")
                        } else {
                            l.to_owned()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
                    + "\n"
            } else {
                text.clone()
            };
            files.insert(path.clone(), text.into_bytes());
        }
        files.insert(
            format!("clusters/{}/resources.yaml", c.name),
            format!("resources:\n{}\n", lines.join("\n")).into_bytes(),
        );
        let dirs: BTreeSet<String> = [c.name.to_string()].into();
        let adopted = load(&files, &dirs).pop().unwrap();
        guests += adopted
            .objects
            .values()
            .filter(|o| o.r#ref.kind.is_guest())
            .count();
        assert_eq!(
            adopted
                .objects
                .values()
                .filter(|o| o.r#ref.kind.is_guest())
                .count(),
            c.objects
                .values()
                .filter(|o| o.r#ref.kind.is_guest())
                .count()
        );
        let p = plan(
            &adopted,
            &snap,
            &Context {
                cluster: &adopted,
                secrets: &secrets,
            },
            &Policy::default(),
        );
        assert!(
            p.actions.is_empty(),
            "{}: {:#?}\n{:#?}",
            c.name,
            p.actions,
            a.files
        );
        assert!(p.anomalies.is_empty(), "{}: {:#?}", c.name, p.anomalies);
        assert!(p.skipped.is_empty(), "{}: {:#?}", c.name, p.skipped);
    }
    assert!(guests >= 7, "only {guests} guests");
}
