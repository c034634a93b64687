//! A PVE simulator for plan → apply → re-plan tests: applies one `Work` to
//! a `LiveSnapshot` the way PVE 9.2 (and the fakepve stand-in) store it.
//!
//! What it reproduces: create allocates volumes (`<pool>:<GiB>` →
//! `<pool>:vm-<id>-disk-<n>,<opts>,size=<N>G`; `import-from` →
//! `<pool>:vm-<id>-disk-<n>,size=3G`, the import not re-reported; cloud-init
//! → `<pool>:vm-<id>-cloudinit,media=cdrom`, and a second cloud-init drive
//! refused as qemu-server `API2/Qemu.pm` `create_disks` refuses it),
//! assigns upper-case MACs to unpinned NICs (pve-common `Tools.pm`
//! `random_ether_addr`) and keeps a given MAC as spelled, stores `tags` as
//! pve-guest-common `GuestHelpers.pm` `get_unique_tags` does (lower-cased,
//! sorted, de-duplicated, `;`-joined), stores a download under the name
//! pve-storage `Storage.pm` `normalize_content_filename` makes, writes
//! `unprivileged` only when set (pve-container `API2/LXC.pm`: absent is
//! privileged), keeps `memory` as text, reports
//! `cipassword` as the `**********` mask, adds `meta`/`smbios1`/`vmgenid`
//! and a default `boot`; template marking renames `vm-` → `base-`; a full
//! clone copies the config (not `name`) with fresh MACs and renamed volumes;
//! config updates set and delete keys, keeping live forms as sent (and
//! allocating a create form written into an empty slot); start/stop flip
//! power; delete removes the guest; download adds a content entry; resize
//! writes the grown `size=`.
//!
//! Pending semantics (PVE 9, from Proxmox's source; each rule cites it in
//! `takes_live`): a config write to a running guest applies at once only
//! what PVE hot-applies; every other key is stored as PVE will have it and
//! recorded as pending with the value the guest runs with. A stop, a
//! reboot or a start applies what is pending (qemu-server `API2/Qemu.pm`
//! `vm_reboot`, `QemuServer.pm` `vm_stop_cleanup` → `vmconfig_apply_pending`;
//! pve-container's poststop hook). A stop-start update is written while the
//! guest runs, then the guest is shut down and started. A delete of a `protection=1` guest is
//! refused and changes nothing (qemu-server `API2/Qemu.pm` `destroy_vm`,
//! `check_protection`), and so is one of an HA-managed or replicated guest
//! without `purge`. A config write PVE refuses whatever the guest's state
//! (a protected container's volumes, balloon above memory, a boot order
//! naming a missing device) panics: the planner refuses those itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proxops_core::action::{Params, Target, Work};
use proxops_core::live::{
    ContentEntry, GuestType, LiveConfig, LiveGuest, LiveSnapshot, NodeState, Power, StorageContent,
};
use proxops_core::names::{NodeName, StorageId, Vmid};
use proxops_core::wire::{
    Bytes, Drive, DriveVolume, EfiDisk, LxcMount, LxcNet, LxcVolumeMount, MacAddr, QemuNet, TagSet,
    TpmState, Volid,
};

/// The mask PVE reports for any set `cipassword` [PROBE §20.27].
pub const PASSWORD_MASK: &str = "**********";

/// Applies `work` for `target` on `node`. Panics on what PVE would refuse
/// outright (unknown guest, clone source missing): tests should not do that.
/// Tags are stored as under PVE's default (lower-case) tag style.
pub fn apply(snapshot: &mut LiveSnapshot, node: &NodeName, target: &Target, work: &Work) {
    apply_styled(snapshot, node, target, work, false);
}

/// `apply` on a PVE whose datacenter `tag-style` is case-sensitive when
/// `case_sensitive_tags` (tags then keep their case).
pub fn apply_styled(
    snapshot: &mut LiveSnapshot,
    node: &NodeName,
    target: &Target,
    work: &Work,
    case_sensitive_tags: bool,
) {
    if !node.is_cluster_wide() {
        snapshot
            .nodes
            .entry(node.clone())
            .or_insert(NodeState::Online);
    }
    match work {
        Work::Download { storage, params } => {
            let content = param(params, "content").unwrap_or("iso").to_owned();
            let filename = proxops_core::names::pve_content_filename(
                param(params, "filename").expect("download needs a filename"),
            );
            let entry = snapshot
                .storage
                .entry((node.clone(), storage.clone()))
                .or_insert_with(|| Ok(StorageContent::default()));
            if let Ok(c) = entry {
                c.entries.push(ContentEntry {
                    volid: format!("{storage}:{content}/{filename}"),
                    content,
                    format: None,
                    size: Some(1 << 20),
                });
            }
        }
        Work::ClusterWrite {
            method,
            path,
            params,
        } => apply_cluster(snapshot, *method, path, params),
        _ => {
            let Target::Guest(vmid) = target else {
                panic!("guest work needs a guest target")
            };
            apply_guest(snapshot, node, *vmid, work, case_sensitive_tags);
        }
    }
}

fn apply_guest(
    snapshot: &mut LiveSnapshot,
    node: &NodeName,
    vmid: Vmid,
    work: &Work,
    case_sensitive_tags: bool,
) {
    let store = |cfg: &mut LiveConfig, gt, vmid, k: &str, v: &str, counter: &mut u32| {
        store(cfg, gt, vmid, k, v, counter, case_sensitive_tags)
    };
    let key = (node.clone(), vmid);
    match work {
        Work::CreateGuest {
            guest_type,
            params,
            mark_template,
        } => {
            assert!(
                !snapshot.guests.contains_key(&key),
                "unable to create VM {vmid}: already exists"
            );
            let mut cfg = LiveConfig::default();
            let mut counter = 0;
            for (k, v) in &params.0 {
                let v = v.expose();
                match k.as_str() {
                    "vmid" | "start" | "ostemplate" => {}
                    _ => store(&mut cfg, *guest_type, vmid, k, v, &mut counter),
                }
            }
            if *guest_type == GuestType::Qemu {
                qemu_defaults(&mut cfg, vmid);
            } else {
                let defaults = [
                    ("arch", "amd64"),
                    ("ostype", "debian"),
                    ("memory", "512"),
                    ("swap", "512"),
                ];
                for (k, v) in defaults {
                    if !cfg.values.contains_key(k) {
                        cfg.values.insert(k.into(), v.into()).unwrap();
                    }
                }
            }
            let start = param(params, "start") == Some("1");
            let name_key = if *guest_type == GuestType::Qemu {
                "name"
            } else {
                "hostname"
            };
            let name = cfg.get(name_key).unwrap_or("").to_owned();
            let mut g = guest(node, vmid, *guest_type, name, cfg);
            g.power = if start {
                Power::Running
            } else {
                Power::Stopped
            };
            snapshot.guests.insert(key.clone(), g);
            if *mark_template {
                mark_as_template(snapshot.guests.get_mut(&key).unwrap());
            }
        }
        Work::CloneGuest {
            source,
            source_node,
            name,
            config,
            delete,
            start_after,
            ..
        } => {
            let src = snapshot
                .guests
                .get(&(source_node.clone(), *source))
                .expect("unable to find configuration file for the clone source");
            let src_cfg = src.config.clone().unwrap();
            let mut cfg = LiveConfig::default();
            let mut counter = 0;
            for (k, v) in &src_cfg.values {
                if matches!(k, "template" | "lock" | "name") {
                    continue;
                }
                let v = if is_volume_key(k) {
                    rename_volume(v, *source, vmid, &mut counter)
                } else if let Some(n) = k.strip_prefix("net").filter(|n| n.parse::<u32>().is_ok()) {
                    fresh_mac(src.guest_type, v, vmid, n.parse().unwrap())
                } else {
                    v.to_owned()
                };
                cfg.values.insert(k.to_owned(), v).unwrap();
            }
            cfg.values.insert("name".into(), name.clone()).unwrap();
            cfg.values
                .insert(
                    "smbios1".into(),
                    format!("uuid=00000000-0000-4000-8000-{:012}", vmid.get()),
                )
                .unwrap();
            cfg.values
                .insert(
                    "vmgenid".into(),
                    format!("00000000-0000-4000-9000-{:012}", vmid.get()),
                )
                .unwrap();
            let gt = src.guest_type;
            for (k, v) in &config.0 {
                store(&mut cfg, gt, vmid, k, v.expose(), &mut counter);
            }
            for k in delete {
                cfg.values.remove(k);
            }
            let mut g = guest(node, vmid, gt, name.clone(), cfg);
            if *start_after {
                g.power = Power::Running;
            }
            snapshot.guests.insert(key, g);
        }
        Work::UpdateConfig {
            params,
            delete,
            stop_first,
            restart_after,
            ..
        } => {
            let g = snapshot.guests.get_mut(&key).expect("no such guest");
            let gt = g.guest_type;
            let was_running = g.power == Power::Running;
            let mut cfg = g.config.clone().unwrap();
            refuse_write(gt, &cfg, params, delete);
            // Written first, while the guest runs (ProxOps writes before it
            // stops): what PVE cannot apply live goes pending.
            let running = g.power == Power::Running;
            let before = cfg.clone();
            let mut counter = next_disk_number(&cfg, vmid);
            for (k, v) in &params.0 {
                store(&mut cfg, gt, vmid, k, v.expose(), &mut counter);
            }
            for k in delete {
                cfg.values.remove(k);
            }
            if running {
                let written = params.0.iter().map(|(k, _)| k).chain(delete.iter());
                for k in written {
                    let (old, new) = (before.current(k), cfg.get(k));
                    if old == new {
                        // pve-guest-common `AbstractConfig.pm`
                        // `cleanup_pending`: a pending value equal to the
                        // current one is dropped.
                        cfg.pending.remove(k);
                    } else if !takes_live(gt, &before, k, old, new) {
                        cfg.pending
                            .entry(k.clone())
                            .or_insert_with(|| old.map(str::to_owned));
                    }
                }
            }
            g.tags = cfg.tags().unwrap_or_default();
            let name_key = if gt == GuestType::Qemu {
                "name"
            } else {
                "hostname"
            };
            g.name = cfg.get(name_key).unwrap_or("").to_owned();
            g.config = Ok(cfg);
            if *stop_first {
                // The shutdown applies what is pending (qemu-server
                // `QemuServer.pm` `vm_stop_cleanup` →
                // `vmconfig_apply_pending`; pve-container's poststop hook).
                g.power = Power::Stopped;
                apply_pending(g);
                if *restart_after && was_running {
                    g.power = Power::Running;
                }
            }
        }
        Work::Start { .. } => {
            let g = snapshot.guests.get_mut(&key).expect("no such guest");
            g.power = Power::Running;
            apply_pending(g);
        }
        Work::Stop { .. } => {
            let g = snapshot.guests.get_mut(&key).expect("no such guest");
            g.power = Power::Stopped;
            apply_pending(g);
        }
        Work::Reboot { .. } => {
            apply_pending(snapshot.guests.get_mut(&key).expect("no such guest"));
        }
        Work::MarkTemplate { .. } => {
            mark_as_template(snapshot.guests.get_mut(&key).expect("no such guest"))
        }
        Work::Delete { purge, .. } => {
            let protected = snapshot.guests.get(&key).is_some_and(|g| {
                g.config
                    .as_ref()
                    .is_ok_and(|c| c.current("protection") == Some("1"))
            });
            // qemu-server `destroy_vm` → `check_protection`: "can't remove
            // VM … - protection mode enabled"; without `purge`, an HA
            // resource or a replication job (pve-guest-common
            // `ReplicationConfig.pm` `check_for_existing_jobs`) refuses it
            // too. The guest stays.
            let ha = snapshot
                .guests
                .get(&key)
                .is_some_and(|g| g.ha_state.is_some());
            let replicated = snapshot.replication.of(vmid) != Ok(&[][..]);
            if !protected && (*purge || !(ha || replicated)) {
                snapshot.guests.remove(&key);
            }
        }
        Work::Resize { disk, size, .. } => {
            // qemu-server and pve-container `resize_vm`: the volume grows
            // and the key's `size=` says the new size; never smaller.
            let g = snapshot.guests.get_mut(&key).expect("no such guest");
            let mut cfg = g.config.clone().unwrap();
            let live = cfg.get(disk).expect("no such disk").to_owned();
            let value = match g.guest_type {
                GuestType::Qemu => {
                    let mut d = Drive::parse(&live).unwrap();
                    assert!(d.size.is_none_or(|s| s <= *size), "PVE cannot shrink");
                    d.size = Some(*size);
                    d.to_wire()
                }
                GuestType::Lxc => match LxcMount::parse(&live).unwrap() {
                    LxcMount::Allocated(mut m) => {
                        assert!(m.size.is_none_or(|s| s <= *size), "PVE cannot shrink");
                        m.size = Some(*size);
                        m.to_wire()
                    }
                    LxcMount::Bind(_) => panic!("a bind mount has no size"),
                },
            };
            cfg.values.insert(disk.clone(), value).unwrap();
            g.config = Ok(cfg);
        }
        Work::Download { .. } | Work::ClusterWrite { .. } => unreachable!(),
        // The firewall is modelled by fakepve (its digests included), not
        // here: the simulator's plans hold no firewall.
        Work::Firewall { .. } => unreachable!("the simulator keeps no firewall"),
    }
}

/// A write to `/pools` or `/cluster/backup` as PVE keeps it: the form's
/// keys become the object's (`delete=` removes keys), a guest joins a
/// pool with `vms=`.
fn apply_cluster(
    snapshot: &mut LiveSnapshot,
    method: proxops_core::action::WriteMethod,
    path: &str,
    params: &Params,
) {
    use proxops_core::action::WriteMethod;
    use proxops_core::cluster::{KINDS, LiveObject};
    let ep = KINDS
        .into_iter()
        .find(|e| path == e.collection || path.starts_with(&format!("{}/", e.collection)))
        .expect("a cluster-level path");
    let id = path
        .strip_prefix(&format!("{}/", ep.collection))
        .map(str::to_owned)
        .or_else(|| param(params, ep.id_key).map(str::to_owned))
        .expect("an object id");
    if let Some(vms) = param(params, "vms") {
        let vmid = Vmid::new(vms.parse().unwrap()).unwrap();
        snapshot.cluster.guest_pools.insert(vmid, id);
        return;
    }
    let listing = snapshot
        .cluster
        .listings
        .entry(ep.kind)
        .or_insert_with(|| Ok(Default::default()))
        .as_mut()
        .unwrap();
    match method {
        WriteMethod::Delete => {
            listing.remove(&id);
        }
        WriteMethod::Post | WriteMethod::Put => {
            let o = listing.entry(id.clone()).or_insert_with(|| LiveObject {
                id: id.clone(),
                values: Default::default(),
            });
            for (k, v) in &params.0 {
                if k == "delete" {
                    for d in v.expose().split(',') {
                        o.values.remove(d);
                    }
                } else if k != ep.id_key {
                    o.values.insert(k.clone(), v.expose().to_owned());
                }
            }
        }
    }
}

/// What PVE refuses of a config write whatever the guest's state: the
/// planner must never send it (it refuses at plan time), so the simulator
/// panics with PVE's message.
fn refuse_write(gt: GuestType, cfg: &LiveConfig, params: &Params, delete: &[String]) {
    let mount = |k: &str| {
        k == "rootfs"
            || k.strip_prefix("mp")
                .is_some_and(|n| n.parse::<u32>().is_ok())
    };
    if gt == GuestType::Lxc {
        // pve-container `LXC/Config.pm` `update_pct_config` → `check_protection`.
        if cfg.current("protection") == Some("1") && params.0.iter().any(|(k, _)| mount(k)) {
            panic!("can't update CT drive - protection mode enabled");
        }
        return;
    }
    // qemu-server `API2/Qemu.pm` `$update_vm_api`: balloon above memory,
    // a boot order naming a device the VM does not have.
    if let (Some(m), Some(b)) = (param(params, "memory"), cfg.get("balloon")) {
        let (m, b) = (m.parse::<u64>().unwrap_or(0), b.parse::<u64>().unwrap_or(0));
        assert!(
            b <= m,
            "balloon value too large (must be smaller than assigned memory)"
        );
    }
    if let Some(order) = param(params, "boot").and_then(|b| b.strip_prefix("order=")) {
        for dev in order.split(';').filter(|d| !d.is_empty()) {
            let exists = cfg.get(dev).is_some() || params.contains(dev);
            assert!(
                exists && !delete.iter().any(|k| k == dev),
                "invalid bootorder: device '{dev}' does not exist"
            );
        }
    }
}

/// A cold start (stop, reboot, start) takes what PVE held pending: the
/// config already holds the new values, the pending list empties.
fn apply_pending(g: &mut LiveGuest) {
    if let Ok(cfg) = g.config.as_mut() {
        cfg.pending.clear();
    }
}

/// Whether PVE changes `key` from `old` to `new` on the running guest at
/// once, given the guest's config `now` (its `hotplug` and `numa`). Written
/// from the sources, not from ProxOps' classifier:
fn takes_live(
    gt: GuestType,
    now: &LiveConfig,
    key: &str,
    old: Option<&str>,
    new: Option<&str>,
) -> bool {
    // qemu-server `QemuServer.pm`: `hotplug` defaults to
    // "network,disk,usb"; `1` is that default, `0` nothing.
    let hotplug: Vec<&str> = match now.current("hotplug") {
        None | Some("1") => vec!["network", "disk", "usb"],
        Some("0") => Vec::new(),
        Some(h) => h.split(',').collect(),
    };
    let plugs = |f: &str| hotplug.contains(&f);
    let digits = key.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let bus = &key[..key.len() - digits.len()];
    if gt == GuestType::Lxc {
        // pve-container `LXC/Config.pm` `vmconfig_hotplug_pending`: cgroup
        // values and fast-plug options live; `LXC.pm` `update_net` for NICs;
        // a new mount point is hot-plugged, an existing one waits.
        return match bus {
            "net" => true,
            "mp" => old.is_none(),
            _ => matches!(
                key,
                "cores"
                    | "memory"
                    | "swap"
                    | "hostname"
                    | "description"
                    | "onboot"
                    | "startup"
                    | "protection"
                    | "tags"
            ),
        };
    }
    match bus {
        // `vmconfig_update_net`: a NIC whose model, MAC, queues or mtu
        // change (or a new or removed NIC) needs network hotplug; bridge,
        // tag, trunks, firewall, rate and link_down are changed on the tap.
        "net" => {
            let parse = |v: Option<&str>| v.and_then(|v| QemuNet::parse(v).ok());
            match (parse(old), parse(new)) {
                (Some(a), Some(b)) => {
                    let same_device = a.model == b.model && a.mac == b.mac;
                    let rest = |n: &QemuNet| {
                        let mut e: Vec<String> = n
                            .extra
                            .iter()
                            .map(|t| format!("{t:?}"))
                            .filter(|t| !t.contains("trunks") && !t.contains("link_down"))
                            .collect();
                        e.sort();
                        e
                    };
                    (same_device && rest(&a) == rest(&b)) || plugs("network")
                }
                _ => plugs("network"),
            }
        }
        // `vmconfig_update_disk`: a CD-ROM medium is swapped with
        // `change_medium`; a new disk on scsi/virtio is hot-plugged with
        // disk hotplug; ide/sata disks and option changes wait.
        "ide" | "sata" | "scsi" | "virtio" if !digits.is_empty() => {
            let cd = |v: Option<&str>| v.is_some_and(|v| v.contains("media=cdrom"));
            if cd(old) && cd(new) {
                return true;
            }
            old.is_none() && !cd(new) && (bus == "scsi" || bus == "virtio") && plugs("disk")
        }
        // `QemuServer/Memory.pm`: memory hotplug needs NUMA.
        _ if key == "memory" => plugs("memory") && now.current("numa") == Some("1"),
        // Only `vcpus` has a hot-plug branch (`qemu_cpu_hotplug`); `cores`
        // has none and waits for a restart.
        _ if key == "vcpus" => plugs("cpu"),
        // The tablet device is plugged with usb hotplug; `hotplug` applies
        // at once unless either value names memory or cpu.
        _ if key == "tablet" => plugs("usb"),
        _ if key == "hotplug" => ![old, new]
            .iter()
            .any(|v| v.is_some_and(|v| v.contains("memory") || v.contains("cpu"))),
        // `vmconfig_hotplug_pending`'s fast-plug options and the cgroup
        // `cpulimit`; PVE 9.2 also fast-plugs the cloud-init keys.
        _ => matches!(
            key,
            "name" | "description" | "tags" | "onboot" | "startup" | "protection" | "cpulimit"
        ),
    }
}

fn param<'a>(p: &'a Params, key: &str) -> Option<&'a str> {
    p.get(key).map(|v| v.expose())
}

fn guest(
    node: &NodeName,
    vmid: Vmid,
    guest_type: GuestType,
    name: String,
    cfg: LiveConfig,
) -> LiveGuest {
    let mut cfg = cfg;
    cfg.digest = Some(format!(
        "{:040x}",
        cfg.values.len() as u64 * 7919 + u64::from(vmid.get())
    ));
    LiveGuest {
        node: node.clone(),
        vmid,
        guest_type,
        name,
        template: cfg.is_template().unwrap_or(false),
        power: Power::Stopped,
        lock: None,
        ha_state: None,
        tags: cfg.tags().unwrap_or_default(),
        config: Ok(cfg),
    }
}

fn qemu_defaults(cfg: &mut LiveConfig, vmid: Vmid) {
    let v = &mut cfg.values;
    v.insert(
        "meta".into(),
        "creation-qemu=10.0.2,ctime=1754900283".into(),
    )
    .unwrap();
    v.insert(
        "smbios1".into(),
        format!("uuid=00000000-0000-4000-8000-{:012}", vmid.get()),
    )
    .unwrap();
    v.insert(
        "vmgenid".into(),
        format!("00000000-0000-4000-9000-{:012}", vmid.get()),
    )
    .unwrap();
    if !v.contains_key("boot") {
        let mut order: Vec<String> = v
            .keys()
            .filter(|k| is_disk_slot(k) || k.starts_with("net"))
            .map(str::to_owned)
            .collect();
        order.sort();
        v.insert("boot".into(), format!("order={}", order.join(";")))
            .unwrap();
    }
}

fn is_disk_slot(k: &str) -> bool {
    ["scsi", "virtio", "sata", "ide"].iter().any(|b| {
        k.strip_prefix(b)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
    })
}

fn is_volume_key(k: &str) -> bool {
    is_disk_slot(k)
        || k == "efidisk0"
        || k == "tpmstate0"
        || k == "rootfs"
        || k.strip_prefix("mp")
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

fn mac_for(vmid: Vmid, slot: u32) -> String {
    let id = vmid.get();
    format!(
        "BC:24:11:{:02X}:{:02X}:{:02X}",
        (id >> 8) & 0xff,
        id & 0xff,
        slot & 0xff
    )
}

fn fresh_mac(gt: GuestType, value: &str, vmid: Vmid, slot: u32) -> String {
    match gt {
        GuestType::Qemu => {
            let mut n = QemuNet::parse(value).unwrap();
            n.mac = Some(MacAddr::parse(&mac_for(vmid, slot)).unwrap());
            upper_mac_qemu(&n)
        }
        GuestType::Lxc => {
            let mut n = LxcNet::parse(value).unwrap();
            n.hwaddr = Some(MacAddr::parse(&mac_for(vmid, slot)).unwrap());
            upper_mac_lxc(&n)
        }
    }
}

/// A NIC as PVE stores it: the MAC as spelled (generated ones upper-case).
fn upper_mac_qemu(n: &QemuNet) -> String {
    n.to_wire()
}

fn upper_mac_lxc(n: &LxcNet) -> String {
    n.to_wire()
}

fn next_disk_number(cfg: &LiveConfig, vmid: Vmid) -> u32 {
    let prefixes = [format!("vm-{vmid}-disk-"), format!("base-{vmid}-disk-")];
    cfg.values
        .values()
        .filter_map(|v| {
            let head = v.split(',').next()?;
            let name = head.split_once(':')?.1;
            prefixes
                .iter()
                .find_map(|p| name.strip_prefix(p.as_str()))
                .and_then(|n| n.parse::<u32>().ok())
        })
        .max()
        .map_or(0, |n| n + 1)
}

fn allocate(storage: &StorageId, vmid: Vmid, counter: &mut u32) -> DriveVolume {
    let v = DriveVolume::Volume(Volid {
        storage: storage.clone(),
        volname: format!("vm-{vmid}-disk-{counter}"),
    });
    *counter += 1;
    v
}

/// Stores one key as PVE would after a create or config write.
fn store(
    cfg: &mut LiveConfig,
    gt: GuestType,
    vmid: Vmid,
    k: &str,
    v: &str,
    counter: &mut u32,
    case_sensitive_tags: bool,
) {
    let value = match (gt, k) {
        (_, "tags") => TagSet::parse(v)
            .unwrap()
            .as_pve_stores(case_sensitive_tags)
            .to_wire(),
        (_, "cipassword") => PASSWORD_MASK.to_owned(),
        (GuestType::Lxc, "nameserver" | "searchdomain") => v.replace(',', " "),
        (GuestType::Qemu, "efidisk0") => {
            let mut e = EfiDisk::parse(v).unwrap();
            if let DriveVolume::Create { storage, .. } = &e.volume {
                e.volume = allocate(&storage.clone(), vmid, counter);
                e.size = Some(Bytes(4 << 20));
                if e.pre_enrolled_keys == Some(true) {
                    e.ms_cert = Some("2023".into());
                }
            }
            e.to_wire()
        }
        (GuestType::Qemu, "tpmstate0") => {
            let mut t = TpmState::parse(v).unwrap();
            if let DriveVolume::Create { storage, .. } = &t.volume {
                t.volume = allocate(&storage.clone(), vmid, counter);
                t.size = Some(Bytes(4 << 20));
            }
            t.to_wire()
        }
        (GuestType::Qemu, k) if is_disk_slot(k) => {
            let mut d = Drive::parse(v).unwrap();
            match d.volume.clone() {
                DriveVolume::Create { storage, size } => {
                    d.volume = allocate(&storage, vmid, counter);
                    // PVE does not re-report import-from and sizes the
                    // volume from the image (3G for the Debian cloud image).
                    d.size = Some(if d.import_from.take().is_some() {
                        Bytes(3 << 30)
                    } else {
                        size
                    });
                }
                DriveVolume::CloudInitCreate { storage } => {
                    if let Some((slot, _)) = cfg.values.iter().find(|(other, value)| {
                        *other != k
                            && is_disk_slot(other)
                            && Drive::parse(value).is_ok_and(|d| d.is_cloudinit())
                    }) {
                        panic!("cloud-init drive is already attached at '{slot}'");
                    }
                    d.volume = DriveVolume::Volume(Volid {
                        storage,
                        volname: format!("vm-{vmid}-cloudinit"),
                    });
                    d.media = Some(proxops_core::wire::Media::Cdrom);
                }
                _ => {}
            }
            d.to_wire()
        }
        (GuestType::Qemu, k) if k.starts_with("net") => {
            let mut n = QemuNet::parse(v).unwrap();
            if n.mac.is_none() {
                n.mac = Some(MacAddr::parse(&mac_for(vmid, k[3..].parse().unwrap_or(0))).unwrap());
            }
            upper_mac_qemu(&n)
        }
        (GuestType::Lxc, "rootfs") => alloc_lxc(v, vmid, counter, true),
        (GuestType::Lxc, k) if k.starts_with("mp") => match LxcMount::parse(v).unwrap() {
            LxcMount::Allocated(_) => alloc_lxc(v, vmid, counter, false),
            LxcMount::Bind(b) => b.to_wire(),
        },
        (GuestType::Lxc, k) if k.starts_with("net") => {
            let mut n = LxcNet::parse(v).unwrap();
            if n.hwaddr.is_none() {
                n.hwaddr =
                    Some(MacAddr::parse(&mac_for(vmid, k[3..].parse().unwrap_or(0))).unwrap());
            }
            if n.net_type.is_none() {
                n.net_type = Some("veth".into());
            }
            upper_mac_lxc(&n)
        }
        _ => v.to_owned(),
    };
    cfg.values.insert(k.to_owned(), value).unwrap();
}

/// rootfs takes `disk-0`; mount points share the counter [PROBE §20.16].
fn alloc_lxc(v: &str, vmid: Vmid, counter: &mut u32, _rootfs: bool) -> String {
    let mut m = LxcVolumeMount::parse(v).unwrap();
    if let DriveVolume::Create { storage, size } = m.volume.clone() {
        m.volume = allocate(&storage, vmid, counter);
        m.size = Some(size);
    }
    m.to_wire()
}

fn rename_volume(v: &str, from: Vmid, to: Vmid, counter: &mut u32) -> String {
    let Ok(d) = Drive::parse(v) else {
        return v.to_owned();
    };
    if let DriveVolume::Volume(vol) = &d.volume {
        let name = &vol.volname;
        let new = if name.contains(&format!("-{from}-cloudinit")) {
            format!("vm-{to}-cloudinit")
        } else if name.starts_with(&format!("base-{from}-disk-"))
            || name.starts_with(&format!("vm-{from}-disk-"))
        {
            let n = *counter;
            *counter += 1;
            format!("vm-{to}-disk-{n}")
        } else {
            return v.to_owned();
        };
        let rest = v.split_once(',').map(|(_, r)| r.to_owned());
        return match rest {
            Some(r) => format!("{}:{new},{r}", vol.storage),
            None => format!("{}:{new}", vol.storage),
        };
    }
    v.to_owned()
}

fn mark_as_template(g: &mut LiveGuest) {
    let mut cfg = g.config.clone().unwrap();
    let id = g.vmid;
    let renamed: BTreeMap<String, String> = cfg
        .values
        .iter()
        .filter(|(k, _)| is_volume_key(k))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.replace(&format!(":vm-{id}-disk-"), &format!(":base-{id}-disk-")),
            )
        })
        .collect();
    cfg.values.extend(renamed).unwrap();
    cfg.values.insert("template".into(), "1".into()).unwrap();
    g.template = true;
    g.power = Power::Stopped;
    g.config = Ok(cfg);
}
