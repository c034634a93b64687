//! LXC and TemplateCT: a live container `/config` read back into an
//! `LxcSpec`, the inverse of `drift::lxc`. `spec.template` cannot be known
//! (PVE does not persist `ostemplate`): it gets the placeholder and the
//! manifest is INCOMPLETE.

use crate::manifest::{
    BindMount, LxcCpu, LxcDns, LxcNic, LxcOptions, LxcRoot, LxcSpec, MountOptions, MountPoint,
    PowerState,
};
use crate::names::{ResourceName, StorageId};
use crate::units::Quantity;
use crate::wire::{self, DnsList, DriveVolume, LxcFeatures, LxcMount, LxcNet, LxcVolumeMount};

use super::{GuestCx, TEMPLATE_PLACEHOLDER};

const MIB: u64 = 1 << 20;

/// Storage and size of a live rootfs or allocated mount point; `None` size
/// when neither the config nor the storage listing knows it.
fn volume(
    cx: &mut GuestCx<'_>,
    key: &str,
    live: &str,
    m: &LxcVolumeMount,
) -> Option<(StorageId, Option<u64>)> {
    let DriveVolume::Volume(vol) = &m.volume else {
        cx.gap(key, Some(live), "not a storage volume: not adopted");
        return None;
    };
    let size = m.size.map(|b| b.get()).or_else(|| cx.listed_size(vol));
    Some((vol.storage.clone(), size))
}

/// `None` when the container has no readable storage-backed rootfs.
pub(crate) fn adopt(cx: &mut GuestCx<'_>, state: Option<PowerState>) -> Option<LxcSpec> {
    let mut o = LxcOptions::default();

    let hostname = {
        let missing = format!("no hostname on PVE: the first apply sets it to {}", cx.name);
        cx.name_override("hostname", missing)
    };
    let memory = cx.memory_mib();
    let swap = match cx.take("swap").map(|s| {
        (
            s,
            s.trim()
                .parse::<u64>()
                .ok()
                .and_then(|n| n.checked_mul(MIB)),
        )
    }) {
        Some((_, Some(bytes))) => Some(Quantity::from_bytes(bytes)),
        Some((s, None)) => {
            cx.gap("swap", Some(s), "unreadable: not adopted");
            None
        }
        None => None,
    };
    let cores = match cx.take("cores").map(|c| c.trim().parse::<u32>()) {
        Some(Ok(c)) if c > 0 => c,
        other => {
            let live = cx.cfg.get("cores");
            let note = if other.is_none() {
                "not set on PVE (no limit: every host core)"
            } else {
                "unreadable"
            };
            cx.gap(
                "cores",
                live,
                format!("cores {note}: the manifest says 1 and the first apply writes it; raise spec.cpu.cores first if the container needs more"),
            );
            1
        }
    };
    let arch = match cx.take("arch") {
        Some(a)
            if ["amd64", "arm64", "i686", "armhf", "riscv32", "riscv64"].contains(&a.trim()) =>
        {
            Some(a.trim().to_owned())
        }
        Some(a) => {
            cx.gap(
                "arch",
                Some(a),
                "an architecture ProxOps does not know: not adopted",
            );
            None
        }
        None => None,
    };

    // rootfs: without a readable storage volume there is no manifest.
    let rootfs = cx.take("rootfs");
    let root = match rootfs.map(|r| (r, LxcVolumeMount::parse(r))) {
        Some((r, Ok(m))) => {
            let (storage, size) = volume(cx, "rootfs", r, &m)?;
            let size = match size {
                Some(s) => s,
                None => {
                    cx.gap("rootfs", Some(r), "volume sizes unknown: the size is in neither the config nor the storage listing");
                    cx.incomplete.push(
                        "spec.root.size: PVE reports no size for the root volume; set it".into(),
                    );
                    0
                }
            };
            let mut rest = m.extra.clone();
            for (k, v) in [
                ("ro", m.ro),
                ("backup", m.backup),
                ("acl", m.acl),
                ("quota", m.quota),
                ("shared", m.shared),
            ] {
                if let Some(b) = v {
                    rest.push(wire::PropToken::Pair {
                        key: k.into(),
                        value: wire::write_bool(b).into(),
                    });
                }
            }
            if let Some(mo) = &m.mountoptions {
                rest.push(wire::PropToken::Pair {
                    key: "mountoptions".into(),
                    value: mo.clone(),
                });
            }
            if let Some(p) = &m.mp {
                rest.push(wire::PropToken::Pair {
                    key: "mp".into(),
                    value: p.clone(),
                });
            }
            cx.token_gap(
                "rootfs",
                &rest,
                "root file system options are not modelled; PVE keeps them",
            );
            LxcRoot {
                storage,
                size: Quantity::from_bytes(size),
            }
        }
        Some((r, Err(e))) => {
            cx.gap("rootfs", Some(r), format!("unreadable ({e})"));
            return None;
        }
        None => return None,
    };

    // Mount points: allocated vs bind by the first token.
    let mut mount_points: Vec<MountPoint> = Vec::new();
    let mut bind_mounts: Vec<BindMount> = Vec::new();
    let mps: Vec<(String, String)> = cx
        .cfg
        .slots("mp")
        .into_iter()
        .map(|(_, k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let mut alloc_slots = Vec::new();
    let mut bind_slots = Vec::new();
    for (key, v) in &mps {
        cx.consume(key);
        if v.trim().is_empty() || v.trim() == "none" {
            continue;
        }
        match LxcMount::parse(v) {
            Ok(LxcMount::Allocated(m)) => {
                let Some((storage, size)) = volume(cx, key, v, &m) else {
                    continue;
                };
                let size = match size {
                    Some(s) => s,
                    None => {
                        cx.gap(key, Some(v), "volume sizes unknown: the size is in neither the config nor the storage listing");
                        cx.incomplete.push(format!(
                            "spec.mount-points ({key}): PVE reports no size for the volume; set it"
                        ));
                        0
                    }
                };
                let opts = MountOptions {
                    read_only: m.ro,
                    backup: m.backup,
                    acl: m.acl,
                    quota: m.quota,
                    shared: m.shared,
                    mount_options: m.mountoptions.clone(),
                };
                mount_points.push(MountPoint {
                    storage,
                    size: Quantity::from_bytes(size),
                    mount_point: m.mp.clone(),
                    options: (opts != MountOptions::default()).then_some(opts),
                    slot: None,
                });
                alloc_slots.push(key.clone());
                cx.token_gap(key, &m.extra, "mount point options other than ro, backup, acl, quota, shared and mountoptions (replicate, …) are not modelled; PVE keeps them");
            }
            Ok(LxcMount::Bind(b)) => {
                let Some(mp) = b.mp.clone() else {
                    cx.gap(key, Some(v), "a bind mount without a guest path: not adopted (plans show it as a live-only slot)");
                    continue;
                };
                bind_mounts.push(BindMount {
                    host_path: b.host_path.clone(),
                    mount_point: mp,
                    slot: None,
                    read_only: b.ro,
                });
                bind_slots.push(key.clone());
                cx.token_gap(
                    key,
                    &b.extra,
                    "bind mount options other than ro are not modelled; PVE keeps them",
                );
            }
            Err(e) => cx.gap(
                key,
                Some(v),
                format!("unreadable ({e}): left to PVE (plans show it as a live-only slot)"),
            ),
        }
    }
    for (i, (m, slot)) in mount_points.iter_mut().zip(&alloc_slots).enumerate() {
        if *slot != format!("mp{i}") {
            m.slot = Some(slot.clone());
        }
    }
    let n_alloc = mount_points.len();
    for (i, (b, slot)) in bind_mounts.iter_mut().zip(&bind_slots).enumerate() {
        if *slot != format!("mp{}", n_alloc + i) {
            b.slot = Some(slot.clone());
        }
    }

    // NICs; hwaddr is PVE's and never pinned.
    let mut networks = Vec::new();
    let nets: Vec<(String, String)> = cx
        .cfg
        .slots("net")
        .into_iter()
        .map(|(_, k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for (key, v) in nets {
        cx.consume(&key);
        let n = match LxcNet::parse(&v) {
            Ok(n) => n,
            Err(e) => {
                cx.gap(
                    &key,
                    Some(&v),
                    format!("unreadable ({e}): left to PVE (plans show it as a live-only slot)"),
                );
                continue;
            }
        };
        let Some(bridge) = n.bridge.clone() else {
            cx.gap(&key, Some(&v), "a NIC without a bridge is not modelled: left to PVE (plans show it as a live-only slot)");
            continue;
        };
        let index = networks.len();
        let rate = n
            .rate
            .as_deref()
            .and_then(|r| r.parse::<f64>().ok())
            .filter(|r| *r > 0.0);
        let mut rest = n.extra.clone();
        if let Some(t) = n.net_type.as_ref().filter(|t| *t != "veth") {
            rest.push(wire::PropToken::Pair {
                key: "type".into(),
                value: t.clone(),
            });
        }
        networks.push(LxcNic {
            bridge,
            iface: Some(n.name.clone()),
            nic_type: None,
            tag: n.tag.filter(|t| *t > 0).map(u32::from),
            hwaddr: None,
            rate_limit: rate,
            firewall: (n.firewall == Some(true)).then_some(true),
            ip: n.ip.clone().filter(|s| !s.is_empty()),
            gw: n.gw.clone().filter(|s| !s.is_empty()),
            slot: (key != format!("net{index}")).then(|| key.clone()),
        });
        cx.token_gap(&key, &rest, "NIC options other than name, bridge, tag, rate, firewall, ip and gw (ip6, gw6, mtu, …) are not modelled; PVE keeps them");
    }

    // DNS.
    let mut dns = LxcDns {
        hostname,
        ..LxcDns::default()
    };
    if let Some(ns) = cx.take("nameserver") {
        match DnsList::parse(ns) {
            Ok(l)
                if !l.entries.is_empty()
                    && l.entries
                        .iter()
                        .all(|e| e.parse::<core::net::IpAddr>().is_ok()) =>
            {
                dns.nameservers = l.entries
            }
            _ => cx.gap(
                "nameserver",
                Some(ns),
                "not a list of IP addresses: left to PVE",
            ),
        }
    }
    if let Some(sd) = cx.take("searchdomain")
        && !sd.trim().is_empty()
    {
        dns.domain = Some(sd.to_owned());
    }

    // Options: tri-state, an explicit 0 is kept.
    for (key, slot) in [
        ("unprivileged", &mut o.unprivileged),
        ("protection", &mut o.protection),
        ("onboot", &mut o.onboot),
        ("console", &mut o.console),
    ] {
        if let Some(v) = cx.take(key) {
            match wire::parse_bool(v) {
                Ok(b) => *slot = Some(b),
                Err(_) => cx.gap(key, Some(v), "unreadable flag: not adopted"),
            }
        }
    }
    if let Some(f) = cx.take("features") {
        match LxcFeatures::parse(f) {
            Ok(feat) => {
                o.nesting = feat.nesting;
                o.keyctl = feat.keyctl;
                o.fuse = feat.fuse;
                let mut rest = feat.extra.clone();
                if let Some(m) = feat.mknod {
                    rest.push(wire::PropToken::Pair {
                        key: "mknod".into(),
                        value: wire::write_bool(m).into(),
                    });
                }
                cx.token_gap("features", &rest, &super::key_note("features"));
            }
            Err(e) => cx.gap(
                "features",
                Some(f),
                format!("unreadable ({e}): left to PVE"),
            ),
        }
    }
    for key in ["nesting", "keyctl", "fuse"] {
        if let Some(v) = cx.take(key) {
            match (key, wire::parse_bool(v)) {
                ("nesting", Ok(b)) => o.nesting = Some(b),
                ("keyctl", Ok(b)) => o.keyctl = Some(b),
                ("fuse", Ok(b)) => o.fuse = Some(b),
                _ => cx.gap(key, Some(v), "unreadable flag: not adopted"),
            }
        }
    }
    if let Some(s) = cx.take("startup") {
        if s.trim().is_empty() {
            cx.gap("startup", Some(s), "empty: not adopted");
        } else {
            o.startup = Some(s.to_owned());
        }
    }

    let pve_description = cx.take("description").map(str::to_owned);
    let tags = cx.tags();
    cx.incomplete.push(format!(
        "spec.template: PVE does not keep the template a container was created from (ostemplate); replace {TEMPLATE_PLACEHOLDER:?} with the CTTemplate's metadata.name"
    ));

    Some(LxcSpec {
        node: cx.guest.node.clone(),
        vmid: cx.guest.vmid,
        template: ResourceName::new(TEMPLATE_PLACEHOLDER).unwrap_or_else(|_| cx.name.clone()),
        state,
        memory: Quantity::from_bytes(memory * MIB),
        swap,
        cpu: LxcCpu { cores, units: None },
        root,
        mount_points,
        bind_mounts,
        networks,
        dns: (dns != LxcDns::default()).then_some(dns),
        arch,
        options: (o != LxcOptions::default()).then_some(o),
        pve_description,
        tags,
        extra: Default::default(),
    })
}
