//! Adoption takes whatever PVE reports: arbitrary values under every key
//! it reads never make it panic, the output is deterministic, and every
//! file it writes either validates or is listed INCOMPLETE.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use proxops_core::adopt::{AdoptOptions, adopt, render_gaps};
use proxops_core::live::{
    GuestType, LiveConfig, LiveGuest, LiveSnapshot, NodeState, Power, StorageContent,
};
use proxops_core::names::{ClusterName, Kind, NodeName, StorageId, Vmid};
use proxops_core::wire::TagSet;

const QEMU_KEYS: &[&str] = &[
    "name",
    "memory",
    "cpu",
    "cores",
    "sockets",
    "numa",
    "machine",
    "bios",
    "vga",
    "serial0",
    "scsihw",
    "scsi0",
    "scsi1",
    "virtio0",
    "sata0",
    "ide0",
    "ide2",
    "ide3",
    "efidisk0",
    "tpmstate0",
    "hostpci0",
    "hostpci3",
    "net0",
    "net1",
    "net5",
    "onboot",
    "protection",
    "acpi",
    "tablet",
    "agent",
    "startup",
    "hotplug",
    "boot",
    "ciuser",
    "sshkeys",
    "cipassword",
    "cicustom",
    "nameserver",
    "searchdomain",
    "ipconfig0",
    "ipconfig7",
    "description",
    "tags",
    "args",
    "unused0",
];
const LXC_KEYS: &[&str] = &[
    "hostname",
    "memory",
    "swap",
    "cores",
    "arch",
    "rootfs",
    "mp0",
    "mp1",
    "mp7",
    "net0",
    "net1",
    "nameserver",
    "searchdomain",
    "unprivileged",
    "protection",
    "onboot",
    "console",
    "features",
    "nesting",
    "startup",
    "description",
    "tags",
    "lxc",
    "cmode",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9=,:;./ _-]{0,40}",
        "local-lvm:vm-1-disk-0(,size=[0-9]{1,3}[KMGT])?(,mp=/[a-z]{1,5})?",
        "(virtio|e1000)=BC:24:11:00:00:0[0-9],bridge=vmbr[0-9](,tag=[0-9]{1,4})?(,rate=[0-9.]{1,4})?",
        "name=eth[0-9],bridge=vmbr0(,ip=[0-9./]{1,18})?(,gw=[0-9.]{1,15})?",
        "/[a-z/]{1,12}(,mp=/[a-z]{1,6})?(,ro=[01])?",
        "local:iso/[a-zA-Z .-]{1,12}\\.iso,media=cdrom",
        "\\PC{0,30}",
        // Numbers past what a byte count holds (memory and swap are MiB).
        "[0-9]{12,20}",
    ]
}

fn config(keys: &'static [&'static str]) -> impl Strategy<Value = Vec<(usize, String)>> {
    prop::collection::vec((0..keys.len(), value()), 0..14)
}

fn snapshot(qemu: &[(usize, String)], lxc: &[(usize, String)], listing: &[String]) -> LiveSnapshot {
    let node = NodeName::new("pve1").unwrap();
    let mut s = LiveSnapshot::default();
    s.nodes.insert(node.clone(), NodeState::Online);
    for (vmid, gt, keys, pairs) in [
        (100, GuestType::Qemu, QEMU_KEYS, qemu),
        (200, GuestType::Lxc, LXC_KEYS, lxc),
    ] {
        let mut cfg = LiveConfig::default();
        for (k, v) in pairs {
            cfg.values.insert(keys[*k].to_owned(), v.clone()).unwrap();
        }
        s.guests.insert(
            (node.clone(), Vmid::new(vmid).unwrap()),
            LiveGuest {
                node: node.clone(),
                vmid: Vmid::new(vmid).unwrap(),
                guest_type: gt,
                name: cfg.get("name").unwrap_or("").to_owned(),
                template: false,
                power: Power::Running,
                lock: None,
                ha_state: None,
                tags: cfg.tags().unwrap_or_else(|_| TagSet::default()),
                config: Ok(cfg),
            },
        );
    }
    let mut entries: Vec<serde_json::Value> = listing
        .iter()
        .map(
            |f| serde_json::json!({"volid": format!("local:iso/{f}"), "content": "iso", "size": 1}),
        )
        .collect();
    entries.push(
        serde_json::json!({"volid": "local:vztmpl/debian.tar.zst", "content": "vztmpl", "size": 1}),
    );
    s.storage.insert(
        (node, StorageId::new("local").unwrap()),
        Ok(StorageContent::from_json(&serde_json::Value::Array(entries)).unwrap()),
    );
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn adoption_never_panics_and_every_listed_file_validates(
        qemu in config(QEMU_KEYS),
        lxc in config(LXC_KEYS),
        listing in prop::collection::vec("[a-zA-Z0-9 ._-]{1,16}(\\.iso|\\.img)?", 0..4),
    ) {
        let s = snapshot(&qemu, &lxc, &listing);
        let cluster = ClusterName::new("c").unwrap();
        let a = adopt(&cluster, &s, &AdoptOptions::default()).unwrap();
        let b = adopt(&cluster, &s, &AdoptOptions::default()).unwrap();
        prop_assert_eq!(&a, &b);
        let _ = render_gaps(&a);
        for line in &a.resources_lines {
            let path = line.trim_start_matches("  - ../../");
            prop_assert!(a.files.contains_key(path));
            prop_assert!(!a.incomplete.iter().any(|i| i.starts_with(&format!("{path}:"))), "{} listed and incomplete", path);
        }
        for text in a.files.values() {
            prop_assert!(serde_yaml::from_str::<serde_yaml::Value>(text).is_ok(), "{}", text);
        }
    }
}

/// Loads the listed adopted files as cluster `c` and plans them.
fn plan_listed(
    a: &proxops_core::adopt::Adoption,
    s: &LiveSnapshot,
) -> Result<proxops_core::plan::Plan, String> {
    use std::collections::{BTreeMap, BTreeSet};
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/c/config.yaml".into(),
        b"pve:\n  clusters:\n    c:\n      base-url: https://pve.example.org:8006\n".to_vec(),
    );
    let mut lines = a.resources_lines.clone();
    for (p, t) in &a.files {
        // The operator's completion of a container: name its CTTemplate.
        let only_template_missing = a
            .incomplete
            .iter()
            .filter(|i| i.starts_with(&format!("{p}:")))
            .all(|i| i.contains("spec.template"));
        if t.contains(proxops_core::adopt::TEMPLATE_PLACEHOLDER) && only_template_missing {
            let done = t.replace(proxops_core::adopt::TEMPLATE_PLACEHOLDER, "debian");
            files.insert(p.clone(), done.into_bytes());
            lines.push(format!("  - ../../{p}"));
        } else {
            files.insert(p.clone(), t.clone().into_bytes());
        }
    }
    files.insert(
        "clusters/c/resources.yaml".into(),
        format!("resources:\n{}\n", lines.join("\n")).into_bytes(),
    );
    let dirs: BTreeSet<String> = ["c".to_owned()].into();
    let loaded = proxops_core::repo::load(
        proxops_core::repo::RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &proxops_core::config::Overrides::default(),
    )
    .map_err(|d| format!("{d:#?}"))?;
    let c = loaded
        .clusters
        .into_values()
        .next()
        .unwrap()
        .map_err(|d| format!("{d:#?}"))?;
    let secrets = proxops_core::drift::CloudInitSecrets::default();
    Ok(proxops_core::planner::plan(
        &c,
        s,
        &proxops_core::drift::Context {
            cluster: &c,
            secrets: &secrets,
        },
        &proxops_core::plan::Policy {
            prune_budget: 0,
            nodes: Default::default(),
            allow_empty_prune: false,
            ..Default::default()
        },
    ))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn whatever_a_plan_would_change_on_an_adopted_vm_was_reported(
        qemu in config(QEMU_KEYS),
        listing in prop::collection::vec("[a-zA-Z0-9 ._-]{1,16}(\\.iso|\\.img)?", 0..4),
    ) {
        // A working VM underneath, then the random values over it.
        let base = [("name", "vm"), ("memory", "1024"), ("cpu", "host"), ("cores", "1"), ("scsi0", "local-lvm:vm-100-disk-0,size=8G"), ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0")];
        let mut pairs: Vec<(usize, String)> =
            base.iter().map(|(k, v)| (QEMU_KEYS.iter().position(|x| x == k).unwrap(), (*v).to_owned())).collect();
        pairs.extend(qemu);
        let s = snapshot(&pairs, &[], &listing);
        let cluster = ClusterName::new("c").unwrap();
        let a = adopt(&cluster, &s, &AdoptOptions::default()).unwrap();
        let Some(vm) = a.files.keys().find(|p| p.starts_with("vm/")).cloned() else { return Ok(()) };
        if !a.resources_lines.iter().any(|l| l.ends_with(&vm)) {
            return Ok(());
        }
        let p = plan_listed(&a, &s).map_err(|e| TestCaseError::fail(format!("listed files do not load: {e}\n{:#?}", a.files)))?;
        let reported = |field: &str| a.gaps.iter().any(|g| g.object.starts_with("VM/") && g.key == field);
        for act in p.actions.iter().filter(|x| x.kind == proxops_core::names::Kind::VM) {
            prop_assert_eq!(act.op, proxops_core::action::Op::Update, "{:#?}", act);
            for c in act.changes.iter().filter(|c| c.field != "tags") {
                prop_assert!(reported(&c.field), "silent change of {}: {:#?}\n{}\n{:#?}", c.field, act.changes, a.files[&vm], a.gaps);
            }
        }
        for an in p.anomalies.iter().filter(|x| x.kind == Some(Kind::VM)) {
            let field = an.field.clone().unwrap_or_default();
            prop_assert!(reported(&field), "silent anomaly {:#?}\n{}\n{:#?}", an, a.files[&vm], a.gaps);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn whatever_a_plan_would_change_on_an_adopted_container_was_reported(lxc in config(LXC_KEYS)) {
        let base = [("hostname", "ct"), ("memory", "512"), ("cores", "1"), ("rootfs", "local-lvm:vm-200-disk-0,size=8G"), ("net0", "name=eth0,bridge=vmbr0")];
        let mut pairs: Vec<(usize, String)> =
            base.iter().map(|(k, v)| (LXC_KEYS.iter().position(|x| x == k).unwrap(), (*v).to_owned())).collect();
        pairs.extend(lxc);
        let s = snapshot(&[], &pairs, &[]);
        let cluster = ClusterName::new("c").unwrap();
        let a = adopt(&cluster, &s, &AdoptOptions::default()).unwrap();
        let Some(ct) = a.files.keys().find(|p| p.starts_with("lxc/")).cloned() else { return Ok(()) };
        if a.incomplete.iter().any(|i| i.starts_with(&format!("{ct}:")) && !i.contains("spec.template")) {
            return Ok(());
        }
        let p = plan_listed(&a, &s).map_err(|e| TestCaseError::fail(format!("completed files do not load: {e}\n{:#?}", a.files)))?;
        let reported = |field: &str| a.gaps.iter().any(|g| g.object.starts_with("LXC/") && g.key == field);
        for act in p.actions.iter().filter(|x| x.kind == proxops_core::names::Kind::LXC) {
            prop_assert_eq!(act.op, proxops_core::action::Op::Update, "{:#?}", act);
            for c in act.changes.iter().filter(|c| c.field != "tags") {
                prop_assert!(reported(&c.field), "silent change of {}: {:#?}\n{}\n{:#?}", c.field, act.changes, a.files[&ct], a.gaps);
            }
        }
        for an in p.anomalies.iter().filter(|x| x.kind == Some(Kind::LXC)) {
            let field = an.field.clone().unwrap_or_default();
            prop_assert!(reported(&field), "silent anomaly {:#?}\n{}\n{:#?}", an, a.files[&ct], a.gaps);
        }
    }
}

#[test]
fn memory_and_swap_too_large_for_a_byte_count_are_gaps_not_a_panic() {
    let huge = (0, u64::MAX.to_string());
    let swap = (2, "17592186044416".to_owned()); // 2^44 MiB = 2^64 bytes
    let lxc_memory = (1, "17592186044416".to_owned());
    let s = snapshot(&[(1, huge.1.clone())], &[huge, swap, lxc_memory], &[]);
    let a = adopt(
        &ClusterName::new("c").unwrap(),
        &s,
        &AdoptOptions::default(),
    )
    .unwrap();
    let gaps = render_gaps(&a);
    assert!(gaps.contains("memory unreadable"), "{gaps}");
    assert!(gaps.contains("swap"), "{gaps}");
}
