//! Adoption takes whatever PVE reports: arbitrary values under every key
//! it reads never make it panic, the output is deterministic, and every
//! file it writes either validates or is listed INCOMPLETE.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use proxops_core::adopt::{AdoptOptions, adopt, render_gaps};
use proxops_core::live::{
    GuestType, LiveConfig, LiveGuest, LiveSnapshot, NodeState, Power, StorageContent,
};
use proxops_core::names::{ClusterName, NodeName, StorageId, Vmid};
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
            cfg.values.insert(keys[*k].to_owned(), v.clone());
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
                tags: cfg.tags().unwrap_or_else(|_| TagSet::default()),
                config: Ok(cfg),
            },
        );
    }
    let entries: Vec<serde_json::Value> = listing
        .iter()
        .map(
            |f| serde_json::json!({"volid": format!("local:iso/{f}"), "content": "iso", "size": 1}),
        )
        .collect();
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
