//! Container storage slots: `rootfs`, allocated `mpN` volumes and bind
//! mounts. An empty slot takes the create form; a live volume keeps its
//! pool and size (a difference is an anomaly, never a re-create); guest
//! path and options converge through the live form [PROBE §20.16].

use std::collections::BTreeSet;

use crate::change::AnomalyType;
use crate::inverse::GuestCx;
use proxops_model::live::LiveConfig;
use proxops_model::manifest::{self, BindMount, LxcRoot, LxcSpec, MountOptions, MountPoint};
use proxops_model::names::StorageId;
use proxops_model::units::Quantity;
use proxops_model::wire::{
    self, Bytes, DriveVolume, LxcBindMount, LxcMount, LxcVolumeMount, PropToken,
};

use super::lxc::STOP;
use super::owned::{Family, Input};
use super::{Acc, DriftError};

/// The root volume. Without a readable storage-backed rootfs a container
/// cannot be declared: adoption skips it.
pub(crate) const ROOTFS: Family<LxcSpec> = Family {
    keys: "rootfs",
    field: "spec.root",
    create: |i, _, p| {
        p.push("rootfs", rootfs_create(i.spec).to_wire());
        Ok(())
    },
    drift: |i, cfg, acc| {
        let root = &i.spec.root;
        volume_drift(
            acc,
            cfg,
            "rootfs",
            rootfs_create(i.spec),
            &root.storage,
            root.size.bytes(),
            None,
        );
        Ok(())
    },
    adopt: adopt_rootfs,
};

/// `mpN`: allocated volumes first, then bind mounts (spec §9 slot order).
pub(crate) const MOUNT_POINTS: Family<LxcSpec> = Family {
    keys: "mpN",
    field: "spec.mount-points, spec.bind-mounts",
    create: |i, _, p| {
        let (alloc, binds) = manifest::lxc_mount_slots(i.spec);
        for (n, (m, slot)) in i.spec.mount_points.iter().zip(&alloc).enumerate() {
            p.push(slot.clone(), mp_create(i, m, n)?.to_wire());
        }
        for (b, slot) in i.spec.bind_mounts.iter().zip(&binds) {
            p.push(slot.clone(), bind_create(b).to_wire());
        }
        Ok(())
    },
    drift: mounts_drift,
    adopt: adopt_mounts,
};

fn rootfs_create(ct: &LxcSpec) -> LxcVolumeMount {
    LxcVolumeMount::new(DriveVolume::Create {
        storage: ct.root.storage.clone(),
        size: Bytes(ct.root.size.bytes()),
    })
}

fn mp_create(
    i: &Input<'_, LxcSpec>,
    m: &MountPoint,
    index: usize,
) -> Result<LxcVolumeMount, DriftError> {
    let path = m.mount_point.clone().ok_or_else(|| {
        i.unsupported(
            format!("spec.mount-points[{index}].mount-point"),
            "a mount point needs the path inside the container (PVE's mp=)".into(),
        )
    })?;
    let mut v = LxcVolumeMount::new(DriveVolume::Create {
        storage: m.storage.clone(),
        size: Bytes(m.size.bytes()),
    });
    v.mp = Some(path);
    let o = m.options.clone().unwrap_or_default();
    v.ro = o.read_only;
    v.backup = o.backup;
    v.acl = o.acl;
    v.quota = o.quota;
    v.shared = o.shared;
    v.mountoptions = o.mount_options;
    Ok(v)
}

fn bind_create(b: &BindMount) -> LxcBindMount {
    LxcBindMount {
        host_path: b.host_path.clone(),
        mp: Some(b.mount_point.clone()),
        ro: b.read_only,
        extra: Vec::new(),
    }
}

/// A slot is new (safe for a create form) only when absent, empty or `none`.
fn is_empty_slot(v: Option<&str>) -> bool {
    v.is_none_or(|v| v.trim().is_empty() || v.trim() == "none")
}

fn mounts_drift(i: &Input<'_, LxcSpec>, cfg: &LiveConfig, acc: &mut Acc) -> Result<(), DriftError> {
    let ct = i.spec;
    let (alloc, binds) = manifest::lxc_mount_slots(ct);
    let mut owned: BTreeSet<&str> = BTreeSet::new();
    for (n, (m, slot)) in ct.mount_points.iter().zip(&alloc).enumerate() {
        owned.insert(slot);
        let want = if is_empty_slot(cfg.get(slot)) {
            mp_create(i, m, n)?
        } else {
            LxcVolumeMount::new(DriveVolume::None)
        };
        volume_drift(acc, cfg, slot, want, &m.storage, m.size.bytes(), Some(m));
    }
    for (b, slot) in ct.bind_mounts.iter().zip(&binds) {
        owned.insert(slot);
        bind_drift(acc, cfg, slot, b);
    }
    for (_, key, value) in cfg.slots("mp") {
        if !owned.contains(key) && !is_empty_slot(Some(value)) {
            acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never detaches a mount point (mpN=none would leave the volume behind); declare it or remove it by hand"));
        }
    }
    Ok(())
}

/// The live mount in `slot`. An empty slot takes the `create` form and an
/// unreadable one is an anomaly: `None` then.
fn live_mount<'c>(
    acc: &mut Acc,
    cfg: &'c LiveConfig,
    slot: &str,
    create: String,
) -> Option<(&'c str, LxcMount)> {
    let live = cfg.get(slot);
    if is_empty_slot(live) {
        acc.set_plain(slot, live, create, STOP);
        return None;
    }
    let live = live.unwrap_or_default();
    match LxcMount::parse(live) {
        Ok(m) => Some((live, m)),
        Err(e) => {
            acc.anomaly(
                AnomalyType::NeedsPerson,
                Some(slot),
                format!("cannot read the live {slot} ({e}): ProxOps does not write over it"),
            );
            None
        }
    }
}

/// The slot holds the other kind of mount: a person decides.
fn other_kind(acc: &mut Acc, slot: &str, live: &str, declared: &str) {
    acc.anomaly(
        AnomalyType::NeedsPerson,
        Some(slot),
        format!("{slot} is {live} on PVE but the manifest declares {declared}: change one of them by hand"),
    );
}

/// rootfs or an allocated mpN. `create` is the form for an empty slot.
fn volume_drift(
    acc: &mut Acc,
    cfg: &LiveConfig,
    slot: &str,
    create: LxcVolumeMount,
    pool: &StorageId,
    size: u64,
    mp: Option<&MountPoint>,
) {
    let Some((live, lm)) = live_mount(acc, cfg, slot, create.to_wire()) else {
        return;
    };
    let lm = match lm {
        LxcMount::Allocated(m) => m,
        LxcMount::Bind(_) => return other_kind(acc, slot, "a bind mount", "an allocated volume"),
    };
    if lm.volume.storage() != Some(pool) {
        acc.anomaly(
            AnomalyType::DataLoss,
            Some(slot),
            format!("{slot} lives on {} but the manifest asks for {pool}: a create-form write would re-create the volume; move it by hand (Move Volume) or change the manifest", lm.volume.storage().map_or("an unknown storage".to_owned(), |p| p.to_string())),
        );
        return;
    }
    // Larger grows (`resize`), smaller is a `shrink` anomaly.
    if let Some(live_size) = lm.size {
        acc.resize(slot, live_size, Bytes(size));
    }
    let Some(m) = mp else { return };
    let next = mount_overlay(&lm, m);
    if next != lm {
        acc.set_plain(slot, Some(live), next.to_wire(), STOP);
    }
}

/// The live mount with the owned guest path and options set.
fn mount_overlay(lm: &LxcVolumeMount, m: &MountPoint) -> LxcVolumeMount {
    let mut next = lm.clone();
    if let Some(p) = &m.mount_point
        && lm.mp.as_deref() != Some(p.as_str())
    {
        next.mp = Some(p.clone());
    }
    let o = m.options.clone().unwrap_or_default();
    // Each option with what an absent token means to PVE. A mount point
    // without `backup` is not backed up (pve-container `LXC/Config.pm`
    // `mountpoint_backup_enabled`: only rootfs always is; the schema gives
    // `backup` no default).
    let pairs: [(Option<bool>, &mut Option<bool>, bool); 5] = [
        (o.read_only, &mut next.ro, false),
        (o.backup, &mut next.backup, false),
        (o.acl, &mut next.acl, false),
        (o.quota, &mut next.quota, false),
        (o.shared, &mut next.shared, false),
    ];
    for (want, live, default) in pairs {
        if let Some(w) = want
            && live.unwrap_or(default) != w
        {
            *live = Some(w);
        }
    }
    // Absent live mountoptions is PVE's default (none): a desired value is written.
    if let Some(mo) = &o.mount_options
        && lm.mountoptions.as_deref().unwrap_or("") != mo.as_str()
    {
        next.mountoptions = Some(mo.clone());
    }
    next
}

fn bind_drift(acc: &mut Acc, cfg: &LiveConfig, slot: &str, b: &BindMount) {
    let Some((live, lb)) = live_mount(acc, cfg, slot, bind_create(b).to_wire()) else {
        return;
    };
    let lb = match lb {
        LxcMount::Bind(lb) => lb,
        LxcMount::Allocated(_) => {
            return other_kind(acc, slot, "an allocated volume", "a bind mount");
        }
    };
    let trim = |p: &str| {
        let t = p.trim_end_matches('/');
        if t.is_empty() {
            "/".to_owned()
        } else {
            t.to_owned()
        }
    };
    if trim(&lb.host_path) != trim(&b.host_path) {
        acc.anomaly(AnomalyType::NeedsPerson, Some(slot), format!("{slot} binds {} on PVE but the manifest binds {}: ProxOps never re-points a bind mount; change it by hand", lb.host_path, b.host_path));
        return;
    }
    let path_differs = lb.mp.as_deref() != Some(b.mount_point.as_str());
    let ro_differs = b.read_only.is_some_and(|w| lb.ro.unwrap_or(false) != w);
    if path_differs || ro_differs {
        let next = LxcBindMount {
            host_path: lb.host_path.clone(),
            mp: Some(b.mount_point.clone()),
            ro: b.read_only.or(lb.ro),
            extra: lb.extra.clone(),
        };
        acc.set_plain(slot, Some(live), next.to_wire(), STOP);
    }
}

// ------------------------------------------------------------ adopt

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

/// A size PVE does not report is a gap, `0` and an INCOMPLETE line.
fn size_or_incomplete(
    cx: &mut GuestCx<'_>,
    key: &str,
    v: &str,
    size: Option<u64>,
    field: String,
) -> u64 {
    size.unwrap_or_else(|| {
        cx.gap(
            key,
            Some(v),
            "volume sizes unknown: the size is in neither the config nor the storage listing",
        );
        cx.incomplete.push(field);
        0
    })
}

fn adopt_rootfs(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) -> bool {
    let Some(r) = cx.take("rootfs") else {
        return false;
    };
    let m = match LxcVolumeMount::parse(r) {
        Ok(m) => m,
        Err(e) => {
            cx.gap("rootfs", Some(r), format!("unreadable ({e})"));
            return false;
        }
    };
    let Some((storage, size)) = volume(cx, "rootfs", r, &m) else {
        return false;
    };
    let field = "spec.root.size: PVE reports no size for the root volume; set it".to_owned();
    let size = size_or_incomplete(cx, "rootfs", r, size, field);
    let mut rest = m.extra.clone();
    for (k, v) in [
        ("ro", m.ro),
        ("backup", m.backup),
        ("acl", m.acl),
        ("quota", m.quota),
        ("shared", m.shared),
    ] {
        if let Some(b) = v {
            rest.push(PropToken::Pair {
                key: k.into(),
                value: wire::write_bool(b).into(),
            });
        }
    }
    for (k, v) in [("mountoptions", &m.mountoptions), ("mp", &m.mp)] {
        if let Some(v) = v {
            rest.push(PropToken::Pair {
                key: k.into(),
                value: v.clone(),
            });
        }
    }
    cx.token_gap(
        "rootfs",
        &rest,
        "root file system options are not modelled; PVE keeps them",
    );
    ct.root = LxcRoot {
        storage,
        size: Quantity::from_bytes(size),
    };
    true
}

/// Allocated vs bind by the first token; slots named only where they are
/// not the default (allocated `mp0..`, then binds).
fn adopt_mounts(cx: &mut GuestCx<'_>, ct: &mut LxcSpec) -> bool {
    let mps = cx.take_slots("mp");
    let mut alloc_slots = Vec::new();
    let mut bind_slots = Vec::new();
    for (_, key, v) in &mps {
        if is_empty_slot(Some(v)) {
            continue;
        }
        match LxcMount::parse(v) {
            Ok(LxcMount::Allocated(m)) => {
                if let Some(mp) = adopt_allocated(cx, key, v, &m) {
                    ct.mount_points.push(mp);
                    alloc_slots.push(key.clone());
                }
            }
            Ok(LxcMount::Bind(b)) => {
                let Some(mp) = b.mp.clone() else {
                    cx.gap(key, Some(v), "a bind mount without a guest path: not adopted (plans show it as a live-only slot)");
                    continue;
                };
                ct.bind_mounts.push(BindMount {
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
    for (i, (m, slot)) in ct.mount_points.iter_mut().zip(&alloc_slots).enumerate() {
        if *slot != format!("mp{i}") {
            m.slot = Some(slot.clone());
        }
    }
    let n_alloc = ct.mount_points.len();
    for (i, (b, slot)) in ct.bind_mounts.iter_mut().zip(&bind_slots).enumerate() {
        if *slot != format!("mp{}", n_alloc + i) {
            b.slot = Some(slot.clone());
        }
    }
    true
}

fn adopt_allocated(
    cx: &mut GuestCx<'_>,
    key: &str,
    v: &str,
    m: &LxcVolumeMount,
) -> Option<MountPoint> {
    let (storage, size) = volume(cx, key, v, m)?;
    let field = format!("spec.mount-points ({key}): PVE reports no size for the volume; set it");
    let size = size_or_incomplete(cx, key, v, size, field);
    let opts = MountOptions {
        read_only: m.ro,
        backup: m.backup,
        acl: m.acl,
        quota: m.quota,
        shared: m.shared,
        mount_options: m.mountoptions.clone(),
    };
    cx.token_gap(key, &m.extra, "mount point options other than ro, backup, acl, quota, shared and mountoptions (replicate, …) are not modelled; PVE keeps them");
    Some(MountPoint {
        storage,
        size: Quantity::from_bytes(size),
        mount_point: m.mp.clone(),
        options: (opts != MountOptions::default()).then_some(opts),
        slot: None,
    })
}
