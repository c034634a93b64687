//! Property tests of the planner's safety rails and invariants, over
//! generated desired state and live snapshots (at least 2,000 cases each).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proxops_core::action::{AnomalyType, Op, Target};
use proxops_core::config::Overrides;
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::live::{
    GuestType, LiveConfig, LiveGuest, LiveSnapshot, NodeState, Power, ReadFailure, StorageContent,
};
use proxops_core::names::{ClusterName, Kind, NodeName, StorageId, Vmid};
use proxops_core::plan::{Plan, Policy};
use proxops_core::planner::plan;
use proxops_core::repo::{self, ClusterDesired, RepoInput};
use proxops_core::wire::TagSet;

const CASES: u32 = 2000;

#[derive(Debug, Clone)]
struct DesiredGuest {
    kind: Kind,
    vmid: u32,
    node: &'static str,
    pool: &'static str,
    no_prune: bool,
}

#[derive(Debug, Clone)]
struct LiveSpec {
    vmid: u32,
    node: &'static str,
    lxc: bool,
    template: bool,
    running: bool,
    tags: Vec<&'static str>,
    config_ok: bool,
    pool: &'static str,
}

fn desired_guest() -> impl Strategy<Value = DesiredGuest> {
    (
        prop_oneof![
            Just(Kind::VM),
            Just(Kind::LXC),
            Just(Kind::TemplateVM),
            Just(Kind::TemplateCT)
        ],
        100u32..130,
        prop_oneof![Just("n1"), Just("n2")],
        prop_oneof![Just("local-lvm"), Just("tank")],
        any::<bool>(),
    )
        .prop_map(|(kind, vmid, node, pool, no_prune)| DesiredGuest {
            kind,
            vmid,
            node,
            pool,
            no_prune,
        })
}

fn live_guest() -> impl Strategy<Value = LiveSpec> {
    (
        100u32..140,
        prop_oneof![Just("n1"), Just("n2"), Just("n3")],
        any::<bool>(),
        prop::bool::weighted(0.2),
        any::<bool>(),
        prop::sample::subsequence(
            vec![
                "proxops",
                "Proxops",
                "pveconform",
                "proxops-noprune",
                "Proxops-NoPrune",
                "web",
            ],
            0..=3,
        ),
        prop::bool::weighted(0.85),
        prop_oneof![Just("local-lvm"), Just("tank")],
    )
        .prop_map(
            |(vmid, node, lxc, template, running, tags, config_ok, pool)| LiveSpec {
                vmid,
                node,
                lxc,
                template,
                running: running && !template,
                tags,
                config_ok,
                pool,
            },
        )
}

fn manifest(g: &DesiredGuest, i: usize) -> (String, String) {
    let name = format!("g{i}");
    let ann = if g.no_prune {
        "\n  annotations:\n    proxops/prune: disabled"
    } else {
        ""
    };
    let text = match g.kind {
        Kind::VM | Kind::TemplateVM => format!(
            "apiVersion: proxops/v1alpha1\nkind: {}\nmetadata:\n  name: {name}{ann}\nspec:\n  node: {}\n  vmid: {}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: {}\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
            g.kind, g.node, g.vmid, g.pool
        ),
        _ => format!(
            "apiVersion: proxops/v1alpha1\nkind: {}\nmetadata:\n  name: {name}{ann}\nspec:\n  node: {}\n  vmid: {}\n  template: ct-tmpl\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: {}\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n",
            g.kind, g.node, g.vmid, g.pool
        ),
    };
    (format!("{}/c1/{name}.yaml", g.kind.dir()), text)
}

fn load_desired(guests: &[DesiredGuest]) -> ClusterDesired {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/c1/config.yaml".into(),
        b"pve:\n  clusters:\n    c1:\n      base-url: https://c1.example.org:8006\n      nodes: [n1, n2]\n".to_vec(),
    );
    let mut list = vec!["../../ctt/base/ct-tmpl.yaml".to_owned()];
    files.insert(
        "ctt/base/ct-tmpl.yaml".into(),
        b"apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: ct-tmpl\nspec:\n  nodes: [n1, n2]\n  storage: local\n  filename: debian-13-standard_13.1-2_amd64.tar.zst\n  url: https://example.org/t.tar.zst\n".to_vec(),
    );
    let mut seen = BTreeSet::new();
    for (i, g) in guests.iter().enumerate() {
        if !seen.insert(g.vmid) {
            continue;
        }
        let (path, text) = manifest(g, i);
        list.push(format!("../../{path}"));
        files.insert(path, text.into_bytes());
    }
    let comp = format!(
        "resources:\n{}",
        list.iter()
            .map(|p| format!("  - {p}\n"))
            .collect::<String>()
    );
    files.insert("clusters/c1/resources.yaml".into(), comp.into_bytes());
    let dirs: BTreeSet<String> = ["c1".to_owned()].into();
    let loaded = repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    )
    .expect("config loads");
    let (_, c) = loaded.clusters.into_iter().next().expect("one cluster");
    c.expect("generated desired state is valid")
}

fn live_config(l: &LiveSpec) -> LiveConfig {
    let json = if l.lxc {
        serde_json::json!({
            "hostname": format!("h{}", l.vmid), "memory": 512, "cores": 1,
            "rootfs": format!("{}:vm-{}-disk-0,size=4G", l.pool, l.vmid),
            "net0": "name=net0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,type=veth",
            "tags": l.tags.join(";"), "template": u8::from(l.template), "digest": "abc",
        })
    } else {
        serde_json::json!({
            "name": format!("h{}", l.vmid), "memory": "1024", "cpu": "host", "cores": 1,
            "scsi0": format!("{}:vm-{}-disk-0,size=8G", l.pool, l.vmid),
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
            "tags": l.tags.join(";"), "template": u8::from(l.template), "digest": "abc",
        })
    };
    LiveConfig::from_json(&json).expect("generated config parses")
}

fn snapshot(live: &[LiveSpec], n2_online: bool, storage_ok: bool) -> LiveSnapshot {
    let mut s = LiveSnapshot::default();
    for n in ["n1", "n2", "n3"] {
        let st = if n == "n2" && !n2_online {
            NodeState::Offline
        } else {
            NodeState::Online
        };
        s.nodes.insert(NodeName::new(n).unwrap(), st);
    }
    let mut seen = BTreeSet::new();
    for l in live {
        // PVE ids are unique across a cluster.
        if !seen.insert(l.vmid) {
            continue;
        }
        let node = NodeName::new(l.node).unwrap();
        let config = if l.config_ok && (l.node != "n2" || n2_online) {
            Ok(live_config(l))
        } else {
            Err(ReadFailure {
                what: "GET config".into(),
                message: "boom".into(),
            })
        };
        s.guests.insert(
            (node.clone(), Vmid::new(l.vmid as u64).unwrap()),
            LiveGuest {
                node,
                vmid: Vmid::new(l.vmid as u64).unwrap(),
                guest_type: if l.lxc {
                    GuestType::Lxc
                } else {
                    GuestType::Qemu
                },
                name: format!("h{}", l.vmid),
                template: l.template,
                power: if l.running {
                    Power::Running
                } else {
                    Power::Stopped
                },
                lock: None,
                ha_state: None,
                tags: TagSet::parse(&l.tags.join(";")).unwrap(),
                config,
            },
        );
    }
    for n in ["n1", "n2"] {
        let content = if storage_ok && (n != "n2" || n2_online) {
            Ok(StorageContent::from_json(&serde_json::json!([{"volid": "local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst", "content": "vztmpl"}])).unwrap())
        } else {
            Err(ReadFailure {
                what: "GET content".into(),
                message: "boom".into(),
            })
        };
        s.storage.insert(
            (NodeName::new(n).unwrap(), StorageId::new("local").unwrap()),
            content,
        );
    }
    s
}

fn make_plan(desired: &ClusterDesired, live: &LiveSnapshot, budget: u32) -> Plan {
    make_plan_with(desired, live, budget, false)
}

fn make_plan_with(
    desired: &ClusterDesired,
    live: &LiveSnapshot,
    budget: u32,
    allow_empty_prune: bool,
) -> Plan {
    let secrets = CloudInitSecrets::default();
    let ctx = Context {
        cluster: desired,
        secrets: &secrets,
    };
    let policy = Policy {
        prune_budget: budget,
        nodes: ["n1", "n2"]
            .iter()
            .map(|n| NodeName::new(n).unwrap())
            .collect(),
        allow_empty_prune,
        ..Default::default()
    };
    plan(desired, live, &ctx, &policy)
}

fn scenario() -> impl Strategy<Value = (Vec<DesiredGuest>, Vec<LiveSpec>, bool, bool, u32)> {
    (
        prop::collection::vec(desired_guest(), 0..6),
        prop::collection::vec(live_guest(), 0..14),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.8),
        0u32..5,
    )
}

/// The emptied kind, the desired guests (none of that kind), the generated
/// live guests, the extra tagged guests of that kind (vmid, running), the
/// budget and `allow-empty-prune`.
type EmptiedKind = (
    Kind,
    Vec<DesiredGuest>,
    Vec<LiveSpec>,
    Vec<(u32, bool)>,
    u32,
    bool,
);

/// A guest kind left without any manifest, while PVE holds at least one
/// proxops-tagged guest of it (vmid 140-149 on n1, readable, unclaimed) on
/// top of the generated live set.
fn emptied_kind_scenario() -> impl Strategy<Value = EmptiedKind> {
    (
        prop_oneof![
            Just(Kind::VM),
            Just(Kind::LXC),
            Just(Kind::TemplateVM),
            Just(Kind::TemplateCT)
        ],
        prop::collection::vec(desired_guest(), 0..6),
        prop::collection::vec(live_guest(), 0..14),
        prop::collection::vec((140u32..150, any::<bool>()), 1..4),
        0u32..5,
        any::<bool>(),
    )
        .prop_map(|(kind, desired, live, tagged, budget, allow)| {
            let desired = desired.into_iter().filter(|g| g.kind != kind).collect();
            (kind, desired, live, tagged, budget, allow)
        })
}

fn tagged_of_kind(kind: Kind, vmid: u32, running: bool) -> LiveSpec {
    LiveSpec {
        vmid,
        node: "n1",
        lxc: kind.is_lxc(),
        template: kind.is_template(),
        running: running && !kind.is_template(),
        tags: vec!["proxops"],
        config_ok: true,
        pool: "local-lvm",
    }
}

fn prunes(p: &Plan) -> Vec<&proxops_core::action::Action> {
    p.actions.iter().filter(|a| a.op == Op::Prune).collect()
}

fn guest_of<'a>(live: &'a LiveSnapshot, a: &proxops_core::action::Action) -> &'a LiveGuest {
    let Target::Guest(vmid) = a.target else {
        panic!("a prune of something that is not a guest: {a:?}")
    };
    live.guest(&a.node, vmid)
        .expect("a prune targets a guest of this cluster's snapshot")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn never_prunes_an_object_without_the_proxops_tag((d, l, n2, st, budget) in scenario()) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let p = make_plan(&desired, &live, budget);
        for a in prunes(&p) {
            let g = guest_of(&live, a);
            prop_assert!(g.tags.has("proxops"), "pruned untagged {a:?}");
        }
    }

    #[test]
    fn never_prunes_artifacts_or_protected_or_unread_objects((d, l, n2, st, budget) in scenario()) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let p = make_plan(&desired, &live, budget);
        let claimed: BTreeSet<u32> = desired.objects.values().filter_map(|o| o.spec.guest_id()).map(|(_, v)| v.get()).collect();
        for a in prunes(&p).into_iter().chain(p.deferred.iter()) {
            prop_assert!(a.kind.is_guest());
            let g = guest_of(&live, a);
            prop_assert!(!g.tags.has("proxops-noprune"), "pruned a prune-disabled guest {a:?}");
            prop_assert!(g.config.is_ok(), "pruned a guest whose config was unreadable");
            prop_assert_eq!(live.node_state(&g.node), NodeState::Online);
            prop_assert!(!claimed.contains(&g.vmid.get()), "pruned a guest a manifest claims");
        }
    }

    #[test]
    fn never_more_prunes_than_the_budget((d, l, n2, st, budget) in scenario()) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let p = make_plan(&desired, &live, budget);
        if budget > 0 {
            prop_assert!(prunes(&p).len() <= budget as usize);
        }
    }

    #[test]
    fn never_prunes_outside_the_allowlist_or_the_cluster((d, l, n2, st, budget) in scenario()) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let p = make_plan(&desired, &live, budget);
        for a in p.actions.iter().chain(p.deferred.iter()) {
            prop_assert!(a.node.as_str() == "n1" || a.node.as_str() == "n2", "action outside the allowlist: {a:?}");
            if let Target::Guest(v) = a.target
                && a.op != Op::Create && a.op != Op::Clone
            {
                prop_assert!(live.guest(&a.node, v).is_some(), "action on a guest this cluster does not have");
            }
        }
    }

    #[test]
    fn a_kind_without_manifests_is_never_pruned_unless_allowed(
        (kind, d, l, tagged, budget, allow) in emptied_kind_scenario(),
    ) {
        let desired = load_desired(&d);
        prop_assert_eq!(desired.count(kind), 0);
        // The extra tagged guests replace any generated guest at their vmid.
        let mut live_specs: Vec<LiveSpec> = tagged
            .iter()
            .map(|(vmid, running)| tagged_of_kind(kind, *vmid, *running))
            .collect();
        // Every config readable: an unreadable one aborts the whole plan,
        // which is a different rail.
        live_specs.extend(
            l.into_iter()
                .filter(|g| g.vmid < 140 || g.vmid >= 150)
                .map(|g| LiveSpec { config_ok: true, ..g }),
        );
        let live = snapshot(&live_specs, true, true);
        let p = make_plan_with(&desired, &live, budget, allow);
        let of_kind = |a: &&proxops_core::action::Action| a.kind == kind;
        let pruned = prunes(&p).into_iter().filter(of_kind).count();
        let held = p.deferred.iter().filter(of_kind).count();
        let guard = p
            .anomalies
            .iter()
            .any(|a| a.anomaly_type() == AnomalyType::EmptyDesired && a.kind == Some(kind));
        if allow {
            prop_assert!(!guard, "the guard spoke though allow-empty-prune is set");
            prop_assert!(pruned + held >= 1, "the tagged {} guest vanished from the plan", kind);
            if budget > 0 {
                prop_assert!(prunes(&p).len() <= budget as usize);
                prop_assert!(
                    pruned >= 1 || prunes(&p).len() == budget as usize,
                    "with the key set, prunes proceed until the budget is spent"
                );
            } else {
                prop_assert_eq!(held, 0, "an unlimited budget holds nothing back");
            }
        } else {
            prop_assert_eq!(pruned, 0, "pruned a {} though none is desired", kind);
            prop_assert!(held >= 1);
            prop_assert!(guard, "no empty_desired anomaly for {}", kind);
            for a in p.deferred.iter().filter(of_kind) {
                prop_assert!(a.reason.contains("empty-desired guard"), "{}", a.reason);
            }
        }
    }

    #[test]
    fn no_write_stop_update_or_create_over_a_guest_proxops_does_not_own(
        (d, l, n2, st, budget) in scenario(),
    ) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let p = make_plan(&desired, &live, budget);
        for a in p.actions.iter().filter(|a| a.op != Op::Prune) {
            if let Target::Guest(v) = a.target
                && let Some(g) = live.guest_by_vmid(v)
            {
                prop_assert!(g.tags.has("proxops"), "{:?} on vmid {} held by untagged {:?}", a.op, v, g.tags);
            }
        }
        // And each such manifest is reported, naming the live guest (an
        // aborted plan reports only why it aborted).
        for o in desired.objects.values().filter(|_| !p.is_aborted()) {
            let Some((node, vmid)) = o.spec.guest_id() else { continue };
            let Some(g) = live.guest_by_vmid(vmid) else { continue };
            if g.tags.has("proxops") || live.node_state(node) != NodeState::Online {
                continue;
            }
            prop_assert!(
                p.anomalies.iter().any(|a| a.anomaly_type() == AnomalyType::NeedsPerson
                    && a.name.as_deref() == Some(o.r#ref.name.as_str())
                    && a.message.contains(&format!("vmid {vmid} is held by"))
                    && a.message.contains(&g.name)),
                "no anomaly for {} over untagged vmid {}: {:?}", o.r#ref, vmid, p.anomalies
            );
            // Word for word the message `format!` spelled before it was
            // joined from its parts.
            let kind = match (g.guest_type, g.template) {
                (GuestType::Qemu, false) => Kind::VM,
                (GuestType::Qemu, true) => Kind::TemplateVM,
                (GuestType::Lxc, false) => Kind::LXC,
                (GuestType::Lxc, true) => Kind::TemplateCT,
            };
            let tagged = if g.has_legacy_tag() {
                "carries no proxops tag (only the old pveconform tag)"
            } else {
                "carries no proxops tag"
            };
            let whole = format!(
                "vmid {} is held by {} \"{}\" on node {}, which {tagged}: ProxOps never takes over a guest it does not own (no stop, update or create); give {} a free vmid, or bring the guest under ProxOps with `proxops adopt`, the one way to claim it",
                g.vmid,
                kind,
                g.display_name(),
                g.node,
                o.r#ref,
            );
            prop_assert!(
                p.anomalies.iter().any(|a| a.message == whole),
                "no anomaly reads {:?}: {:?}", whole, p.anomalies
            );
        }
    }

    #[test]
    fn no_write_over_a_live_volume((d, l, n2, st, budget) in scenario()) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let p = make_plan(&desired, &live, budget);
        for a in &p.actions {
            if a.op != Op::Update {
                continue;
            }
            for c in &a.changes {
                let is_volume_key = ["scsi", "virtio", "sata", "ide", "rootfs", "mp", "efidisk", "tpmstate"]
                    .iter()
                    .any(|k| c.field.starts_with(k));
                if let (true, Some(from), Some(to)) = (is_volume_key, &c.from, &c.to) {
                    let vol = |s: &str| s.split(',').next().unwrap_or("").to_owned();
                    prop_assert_eq!(vol(from), vol(to), "a write would replace the live volume of {}", c.field);
                }
            }
        }
        // A pool divergence is reported, not written.
        for a in &p.anomalies {
            if a.anomaly_type() == AnomalyType::DataLoss {
                prop_assert!(!p.actions.iter().any(|x| x.op == Op::Update && a.name.as_ref() == Some(&x.name)
                    && x.changes.iter().any(|c| Some(&c.field) == a.field.as_ref())));
            }
        }
    }

    #[test]
    fn prunes_come_last_and_templates_after_their_clones((d, l, n2, st, budget) in scenario()) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let p = make_plan(&desired, &live, if budget == 0 { 0 } else { budget + 3 });
        let first_prune = p.actions.iter().position(|a| a.op == Op::Prune).unwrap_or(p.actions.len());
        prop_assert!(p.actions[first_prune..].iter().all(|a| a.op == Op::Prune));
        let pr = prunes(&p);
        let first_template = pr.iter().position(|a| a.kind.is_template()).unwrap_or(pr.len());
        prop_assert!(pr[first_template..].iter().all(|a| a.kind.is_template()), "a template pruned before a guest");
    }

    #[test]
    fn identical_inputs_give_identical_plan_bytes((d, l, n2, st, budget) in scenario()) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let a = make_plan(&desired, &live, budget);
        let b = make_plan(&load_desired(&d), &snapshot(&l, n2, st), budget);
        prop_assert_eq!(&a, &b);
        let ca = ClusterName::new("c1").unwrap();
        prop_assert_eq!(&a.cluster, &ca);
        prop_assert_eq!(proxops_core::render::json(std::slice::from_ref(&a)), proxops_core::render::json(std::slice::from_ref(&b)));
        prop_assert_eq!(proxops_core::render::text(std::slice::from_ref(&a)), proxops_core::render::text(std::slice::from_ref(&b)));
    }

    /// `--target`: a narrowed plan prunes nothing, acts only on the
    /// targets' closure, keeps every action of the full plan that serves
    /// it, and lists every declared object outside it as not considered.
    #[test]
    fn a_targeted_plan_prunes_nothing_and_acts_only_within_the_targets(
        (d, l, n2, st, budget) in scenario(),
        pick in any::<prop::sample::Index>(),
    ) {
        let desired = load_desired(&d);
        let live = snapshot(&l, n2, st);
        let full = make_plan(&desired, &live, budget);
        let refs: Vec<_> = desired.objects.keys().cloned().collect();
        prop_assume!(!refs.is_empty());
        let targets: BTreeSet<_> = [refs[pick.index(refs.len())].clone()].into();
        let keep = proxops_core::target::closure(&desired, &targets);
        let mut narrowed = full.clone();
        proxops_core::target::restrict(&mut narrowed, &desired, &targets, &Default::default());
        if full.is_aborted() {
            // An aborted plan does nothing, targeted or not.
            prop_assert_eq!(&narrowed, &full);
            return Ok(());
        }
        prop_assert!(prunes(&narrowed).is_empty() && narrowed.deferred.is_empty());
        for a in &narrowed.actions {
            prop_assert!(a.object.as_ref().is_some_and(|o| keep.contains(o)), "{a:?} outside {keep:?}");
        }
        let served: Vec<_> = full.actions.iter().filter(|a| a.object.as_ref().is_some_and(|o| keep.contains(o))).collect();
        prop_assert_eq!(narrowed.actions.iter().collect::<Vec<_>>(), served);
        for r in refs.iter().filter(|r| !keep.contains(*r)) {
            prop_assert!(narrowed.not_considered.iter().any(|o| o.kind == r.kind && o.name == r.name.as_str()));
        }
    }
}
