//! Create → read back → drift is empty, for every guest of the demo
//! repository; and drift → update → drift converges.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proxops_core::action::{Target, Work};
use proxops_core::config::Overrides;
use proxops_core::drift::{
    CloudInitSecrets, Context, clone_params, create_params, download_params, guest_drift,
};
use proxops_core::live::{GuestType, LiveSnapshot};
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

fn demo() -> Vec<ClusterDesired> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/repos/demo");
    let mut files = BTreeMap::new();
    read_tree(&root, &root, &mut files);
    let dirs: BTreeSet<String> = std::fs::read_dir(root.join("clusters"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let loaded = repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    )
    .unwrap();
    loaded.clusters.into_values().map(|c| c.unwrap()).collect()
}

fn in_order(c: &ClusterDesired) -> Vec<&DesiredObject> {
    let mut objs: Vec<&DesiredObject> = c.objects.values().collect();
    objs.sort_by_key(|o| (o.level, o.r#ref.clone()));
    objs
}

/// Every object of the cluster created (downloads, creates, clones) in
/// dependency order.
fn build(c: &ClusterDesired, ctx: &Context<'_>) -> LiveSnapshot {
    let mut snap = LiveSnapshot::default();
    for o in in_order(c) {
        if let Some(a) = o.spec.artifact() {
            for node in a.all_nodes() {
                let target = Target::File {
                    storage: a.storage.clone(),
                    filename: a.filename.clone(),
                };
                sim::apply(
                    &mut snap,
                    &node,
                    &target,
                    &Work::Download {
                        storage: a.storage.clone(),
                        params: download_params(o),
                    },
                );
            }
            continue;
        }
        let (node, vmid) = o.spec.guest_id().unwrap();
        let target = Target::Guest(vmid);
        let work = if o.spec.vm().is_some_and(|v| v.clone.is_some()) {
            let (source, name, config, delete) = clone_params(o, ctx).unwrap();
            Work::CloneGuest {
                source,
                name,
                config,
                delete,
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
        sim::apply(&mut snap, node, &target, &work);
    }
    snap
}

#[test]
fn every_demo_guest_reads_back_without_drift_after_create_or_clone() {
    let secrets = CloudInitSecrets::default();
    let mut checked = 0;
    for c in demo() {
        let ctx = Context {
            cluster: &c,
            secrets: &secrets,
        };
        let snap = build(&c, &ctx);
        for o in in_order(&c) {
            let Some((node, vmid)) = o.spec.guest_id() else {
                continue;
            };
            let live = snap.guest(node, vmid).unwrap();
            let d = guest_drift(o, &ctx, live, live.config.as_ref().unwrap()).unwrap();
            assert!(
                d.changes.is_empty(),
                "{}: {:#?}\nlive: {:#?}",
                o.r#ref,
                d.changes,
                live.config
            );
            assert!(d.anomalies.is_empty(), "{}: {:#?}", o.r#ref, d.anomalies);
            assert!(d.params.is_empty() && d.delete.is_empty());
            checked += 1;
        }
    }
    assert!(checked >= 7, "only {checked} guests checked");
}

#[test]
fn drift_update_converges_in_one_write() {
    let secrets = CloudInitSecrets::default();
    for c in demo() {
        let ctx = Context {
            cluster: &c,
            secrets: &secrets,
        };
        let mut snap = build(&c, &ctx);
        for o in in_order(&c) {
            let Some((node, vmid)) = o.spec.guest_id() else {
                continue;
            };
            // Someone edits the guest by hand: other memory, other cores, a
            // stray tag, the NIC moved to another bridge.
            {
                let g = snap.guests.get_mut(&(node.clone(), vmid)).unwrap();
                let cfg = g.config.as_mut().unwrap();
                cfg.values.insert("memory".into(), "12345".into());
                cfg.values.insert("cores".into(), "7".into());
                cfg.values.insert("tags".into(), "handmade;proxops".into());
                let net0 = cfg.values.get("net0").cloned().unwrap();
                cfg.values
                    .insert("net0".into(), net0.replace("bridge=vmbr0", "bridge=vmbr9"));
            }
            let live = snap.guest(node, vmid).unwrap().clone();
            let d = guest_drift(o, &ctx, &live, live.config.as_ref().unwrap()).unwrap();
            let keys: Vec<&str> = d.changes.iter().map(|c| c.field.as_str()).collect();
            assert_eq!(keys, ["cores", "memory", "net0", "tags"], "{}", o.r#ref);
            // The rewritten NIC keeps the MAC PVE assigned.
            let old_net = live
                .config
                .as_ref()
                .unwrap()
                .get("net0")
                .unwrap()
                .to_ascii_lowercase();
            let new_net = d.params.get("net0").unwrap().expose().to_ascii_lowercase();
            let mac = |s: &str| {
                s.split(',').find_map(|t| {
                    t.split_once('=')
                        .filter(|(k, _)| *k != "bridge" && *k != "name")
                        .map(|(_, v)| v.to_owned())
                        .filter(|v| v.contains(':'))
                })
            };
            assert_eq!(mac(&old_net), mac(&new_net), "{}", o.r#ref);
            let work = Work::UpdateConfig {
                guest_type: live.guest_type,
                params: d.params.clone(),
                delete: d.delete.clone(),
                digest: live.config.as_ref().unwrap().digest.clone(),
                stop_first: false,
                restart_after: false,
            };
            sim::apply(&mut snap, node, &Target::Guest(vmid), &work);
            let live = snap.guest(node, vmid).unwrap();
            let again = guest_drift(o, &ctx, live, live.config.as_ref().unwrap()).unwrap();
            assert!(
                again.changes.is_empty(),
                "{}: {:#?}",
                o.r#ref,
                again.changes
            );
        }
    }
}

#[test]
#[ignore]
fn print_demo_live_configs() {
    let secrets = CloudInitSecrets::default();
    for c in demo() {
        let ctx = Context {
            cluster: &c,
            secrets: &secrets,
        };
        let snap = build(&c, &ctx);
        for g in snap.guests.values() {
            println!("== {} {} {:?} {:?}", g.vmid, g.name, g.power, g.template);
            for (k, v) in &g.config.as_ref().unwrap().values {
                println!("  {k}: {v}");
            }
        }
        for o in in_order(&c) {
            if o.spec.guest_id().is_some() && o.spec.vm().is_none_or(|v| v.clone.is_none()) {
                println!(
                    "-- create {}: {:?}",
                    o.r#ref,
                    create_params(o, &ctx).unwrap()
                );
            }
        }
    }
}
