//! LXC and TemplateCT: create form and drift (spec §8, §9, §12, §22.1).
//!
//! Impact on a running container, per key. Upstream stopped the container
//! for nearly every change; PVE itself applies much of it to a running
//! container, and a careful operator expects no stop where PVE needs none:
//! - `Live`: `cores`, `memory`, `swap` (cgroup limits, applied at once),
//!   `netN` (PVE re-plugs the veth of a running container: a short link
//!   drop, no stop), `tags`, `description`, `protection`, `onboot`,
//!   `startup` (config only).
//! - `Reboot`: `hostname`, `nameserver`, `searchdomain`, `console` and
//!   `spec.extra` keys: PVE keeps them pending and writes them into the
//!   container at its next start; nothing forces that start.
//! - `StopStart`: `features` (nesting), `arch`, `rootfs`/`mpN` writes (new
//!   volumes, mount options, guest paths, binds): they only take effect on
//!   a fresh start, so ProxOps stops and starts the container (kept from
//!   upstream; shown in the plan as a stop-start).

use std::collections::BTreeSet;

use crate::action::{AnomalyType, Impact, Params};
use crate::live::LiveConfig;
use crate::manifest::{self, LxcNic, LxcSpec, MountPoint};
use crate::names::Kind;
use crate::repo::DesiredObject;
use crate::wire::{
    Bytes, DnsList, DriveVolume, LxcBindMount, LxcFeatures, LxcMount, LxcNet, LxcVolumeMount,
    MacAddr, write_bool,
};

use super::resolve::artifact_volid;
use super::{Acc, Context, DriftError, desired_tags, rate_text, same_rate};

const STOP: Impact = Impact::StopStart;
const REBOOT: Impact = Impact::Reboot;
const LIVE: Impact = Impact::Live;

pub(crate) fn hostname(obj: &DesiredObject, ct: &LxcSpec) -> String {
    ct.dns
        .as_ref()
        .and_then(|d| d.hostname.clone())
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| obj.metadata.name.to_string())
}

fn mib(obj: &DesiredObject, q: crate::units::Quantity, field: &str) -> Result<u64, DriftError> {
    q.whole_mib().ok_or_else(|| DriftError::Unsupported {
        object: obj.r#ref.clone(),
        field: field.into(),
        message: format!("{q} is not a whole number of MiB"),
    })
}

fn opts(ct: &LxcSpec) -> manifest::LxcOptions {
    ct.options.clone().unwrap_or_default()
}

/// keyctl/fuse cannot be set through PVE 9.2's API (400/403) [PROBE §20.11].
fn refuse_features(obj: &DesiredObject, ct: &LxcSpec) -> Result<(), DriftError> {
    let o = opts(ct);
    for (name, on) in [("keyctl", o.keyctl), ("fuse", o.fuse)] {
        if on == Some(true) {
            return Err(DriftError::Unsupported {
                object: obj.r#ref.clone(),
                field: format!("spec.options.{name}"),
                message: format!(
                    "PVE refuses {name} through its API: create the container without it, then enable it on the host (pct set {} -features {name}=1)",
                    ct.vmid
                ),
            });
        }
    }
    Ok(())
}

fn rootfs_create(ct: &LxcSpec) -> LxcVolumeMount {
    LxcVolumeMount::new(DriveVolume::Create {
        storage: ct.root.storage.clone(),
        size: Bytes(ct.root.size.bytes()),
    })
}

fn mp_create(
    obj: &DesiredObject,
    m: &MountPoint,
    index: usize,
) -> Result<LxcVolumeMount, DriftError> {
    let path = m
        .mount_point
        .clone()
        .ok_or_else(|| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: format!("spec.mount-points[{index}].mount-point"),
            message: "a mount point needs the path inside the container (PVE's mp=)".into(),
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

fn bind_create(b: &manifest::BindMount) -> LxcBindMount {
    LxcBindMount {
        host_path: b.host_path.clone(),
        mp: Some(b.mount_point.clone()),
        ro: b.read_only,
        extra: Vec::new(),
    }
}

fn net(obj: &DesiredObject, n: &LxcNic, index: usize) -> Result<LxcNet, DriftError> {
    let slot = manifest::lxc_nic_slot(n, index);
    let mut v = LxcNet::new(n.iface.as_deref().unwrap_or(&slot));
    v.net_type = n.nic_type.clone();
    v.bridge = Some(n.bridge.clone());
    v.tag = n.tag.filter(|t| *t > 0).map(|t| t as u16);
    if let Some(m) = &n.hwaddr {
        v.hwaddr = Some(MacAddr::parse(m).map_err(|e| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: format!("spec.networks[{index}].hwaddr"),
            message: e.to_string(),
        })?);
    }
    v.rate = n.rate_limit.filter(|r| *r > 0.0).map(rate_text);
    if n.firewall == Some(true) {
        v.firewall = Some(true);
    }
    v.ip = n.ip.clone().filter(|s| !s.is_empty());
    v.gw = n.gw.clone().filter(|s| !s.is_empty());
    Ok(v)
}

pub(crate) fn create(
    obj: &DesiredObject,
    ct: &LxcSpec,
    ctx: &Context<'_>,
) -> Result<Params, DriftError> {
    refuse_features(obj, ct)?;
    let o = opts(ct);
    let mut p = Params::new();
    p.push("vmid", ct.vmid.to_string());
    p.push(
        "ostemplate",
        artifact_volid(obj, ctx, Kind::CTTemplate, &ct.template, "spec.template")?.to_wire(),
    );
    p.push("hostname", hostname(obj, ct));
    p.push("memory", mib(obj, ct.memory, "spec.memory")?.to_string());
    if let Some(s) = ct.swap {
        p.push("swap", mib(obj, s, "spec.swap")?.to_string());
    }
    p.push("cores", ct.cpu.cores.to_string());
    p.push("rootfs", rootfs_create(ct).to_wire());
    let (alloc, binds) = manifest::lxc_mount_slots(ct);
    for (i, (m, slot)) in ct.mount_points.iter().zip(&alloc).enumerate() {
        p.push(slot.clone(), mp_create(obj, m, i)?.to_wire());
    }
    for (b, slot) in ct.bind_mounts.iter().zip(&binds) {
        p.push(slot.clone(), bind_create(b).to_wire());
    }
    for (i, n) in ct.networks.iter().enumerate() {
        p.push(manifest::lxc_nic_slot(n, i), net(obj, n, i)?.to_wire());
    }
    if let Some(d) = &ct.dns {
        if !d.nameservers.is_empty() {
            p.push("nameserver", d.nameservers.join(" "));
        }
        if let Some(s) = d.domain.as_ref().filter(|s| !s.trim().is_empty()) {
            p.push("searchdomain", s.trim());
        }
    }
    if let Some(a) = &ct.arch {
        p.push("arch", a.clone());
    }
    for (k, v) in [
        ("unprivileged", o.unprivileged),
        ("protection", o.protection),
        ("onboot", o.onboot),
        ("console", o.console),
    ] {
        if let Some(b) = v {
            p.push(k, write_bool(b));
        }
    }
    if let Some(n) = o.nesting {
        p.push("features", format!("nesting={}", write_bool(n)));
    }
    if let Some(s) = o.startup.as_ref().filter(|s| !s.trim().is_empty()) {
        p.push("startup", s.trim());
    }
    if let Some(d) = &ct.pve_description {
        p.push("description", d.clone());
    }
    p.push("tags", desired_tags(obj, &ct.tags)?.to_wire());
    p.push("start", super::create::lxc_start(obj, ct));
    for (k, v) in &ct.extra {
        p.push(k.clone(), v.clone());
    }
    Ok(p)
}

fn flag(cfg: &LiveConfig, key: &str, default: bool) -> bool {
    match cfg.flag(key) {
        Some(Ok(b)) => b,
        _ => default,
    }
}

/// A slot is new (safe for a create form) only when absent, empty or `none`.
fn is_empty_slot(v: Option<&str>) -> bool {
    v.is_none_or(|v| v.trim().is_empty() || v.trim() == "none")
}

pub(crate) fn drift(
    obj: &DesiredObject,
    ct: &LxcSpec,
    _ctx: &Context<'_>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    let o = opts(ct);
    let get = |k: &str| cfg.get(k);

    let host = hostname(obj, ct);
    if get("hostname") != Some(host.as_str()) {
        acc.set_plain("hostname", get("hostname"), host, REBOOT);
    }
    let mem = mib(obj, ct.memory, "spec.memory")?;
    if !matches!(cfg.memory_mib(), Some(Ok(m)) if m == mem) {
        acc.set_plain("memory", get("memory"), mem.to_string(), LIVE);
    }
    if let Some(s) = ct.swap {
        let s = mib(obj, s, "spec.swap")?;
        if get("swap").and_then(|v| v.trim().parse::<u64>().ok()) != Some(s) {
            acc.set_plain("swap", get("swap"), s.to_string(), LIVE);
        }
    }
    if get("cores").and_then(|c| c.trim().parse::<u32>().ok()) != Some(ct.cpu.cores) {
        acc.set_plain("cores", get("cores"), ct.cpu.cores.to_string(), LIVE);
    }
    if let Some(a) = &ct.arch
        && get("arch").unwrap_or("amd64") != a
    {
        acc.set_plain("arch", get("arch"), a.clone(), STOP);
    }
    if let Some(d) = &ct.dns {
        if !d.nameservers.is_empty() {
            let want: BTreeSet<&str> = d.nameservers.iter().map(String::as_str).collect();
            let live = get("nameserver").and_then(|v| DnsList::parse(v).ok());
            if live.as_ref().map(|l| l.set()) != Some(want) {
                acc.set_plain(
                    "nameserver",
                    get("nameserver"),
                    d.nameservers.join(" "),
                    REBOOT,
                );
            }
        }
        if let Some(s) = d.domain.as_ref().filter(|s| !s.trim().is_empty())
            && get("searchdomain").map(str::trim) != Some(s.trim())
        {
            acc.set_plain(
                "searchdomain",
                get("searchdomain"),
                s.trim().to_owned(),
                REBOOT,
            );
        }
    }

    // Create-only and API-refused options: anomalies, never writes.
    if let Some(want) = o.unprivileged {
        // Absent means unprivileged: PVE 9's default; only an explicit 0 is privileged.
        let live = flag(cfg, "unprivileged", true);
        if live != want {
            acc.anomaly(
                AnomalyType::NeedsPerson,
                Some("unprivileged"),
                format!("the container is {} on PVE but the manifest asks for {}: PVE cannot change this on an existing container (recreate required)", if live { "unprivileged" } else { "privileged" }, if want { "unprivileged" } else { "privileged" }),
            );
        }
    }
    let features = get("features")
        .and_then(|f| LxcFeatures::parse(f).ok())
        .unwrap_or_default();
    for (name, want, live) in [
        (
            "keyctl",
            o.keyctl,
            features.keyctl.or(cfg.flag("keyctl").and_then(Result::ok)),
        ),
        (
            "fuse",
            o.fuse,
            features.fuse.or(cfg.flag("fuse").and_then(Result::ok)),
        ),
    ] {
        if want == Some(true) && live != Some(true) {
            acc.anomaly(AnomalyType::NeedsPerson, Some("features"), format!("{name} is off on PVE and PVE refuses to turn it on through its API: run `pct set {} -features {name}=1` on the host (keeping the other features)", ct.vmid));
        }
    }
    if let Some(want) = o.nesting {
        let live = cfg
            .flag("nesting")
            .and_then(Result::ok)
            .or(features.nesting)
            .unwrap_or(false);
        if live != want {
            // The live composite keeps its other tokens (keyctl, fuse, mknod…).
            let mut next = features.clone();
            next.nesting = Some(want);
            acc.set_plain("features", get("features"), next.to_wire(), STOP);
        }
    }
    for (key, want, impact) in [
        ("protection", o.protection, LIVE),
        ("onboot", o.onboot, LIVE),
        ("console", o.console, REBOOT),
    ] {
        if let Some(w) = want
            && flag(cfg, key, false) != w
        {
            acc.set_plain(key, get(key), write_bool(w).to_owned(), impact);
        }
    }
    if let Some(s) = o.startup.as_ref().filter(|s| !s.trim().is_empty())
        && get("startup").map(str::trim) != Some(s.trim())
    {
        acc.set_plain("startup", get("startup"), s.trim().to_owned(), LIVE);
    }

    // Storage slots.
    volume_drift(
        acc,
        cfg,
        "rootfs",
        rootfs_create(ct),
        &ct.root.storage,
        ct.root.size.bytes(),
        None,
    )?;
    let (alloc, binds) = manifest::lxc_mount_slots(ct);
    let mut owned_mp: BTreeSet<&str> = BTreeSet::new();
    for (i, (m, slot)) in ct.mount_points.iter().zip(&alloc).enumerate() {
        owned_mp.insert(slot);
        let want = if is_empty_slot(get(slot)) {
            Some(mp_create(obj, m, i)?)
        } else {
            None
        };
        volume_drift(
            acc,
            cfg,
            slot,
            want.unwrap_or_else(|| LxcVolumeMount::new(DriveVolume::None)),
            &m.storage,
            m.size.bytes(),
            Some(m),
        )?;
    }
    for (b, slot) in ct.bind_mounts.iter().zip(&binds) {
        owned_mp.insert(slot);
        bind_drift(acc, cfg, slot, b);
    }
    for (_, key, value) in cfg.slots("mp") {
        if !owned_mp.contains(key) && !is_empty_slot(Some(value)) {
            acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never detaches a mount point (mpN=none would leave the volume behind); declare it or remove it by hand"));
        }
    }

    // NICs.
    let mut owned_nets = BTreeSet::new();
    for (i, n) in ct.networks.iter().enumerate() {
        let slot = manifest::lxc_nic_slot(n, i);
        let want = net(obj, n, i)?;
        net_drift(acc, cfg, &slot, n, want);
        owned_nets.insert(slot);
    }
    for (_, key, _) in cfg.slots("net") {
        if !owned_nets.contains(key) {
            acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never removes a NIC; declare it or remove it by hand"));
        }
    }

    if let Some(d) = &ct.pve_description
        && get("description").unwrap_or("").trim() != d.trim()
    {
        acc.set_plain("description", get("description"), d.clone(), LIVE);
    }
    let tags = desired_tags(obj, &ct.tags)?;
    if cfg.tags().ok().as_ref() != Some(&tags) {
        acc.set_plain("tags", get("tags"), tags.to_wire(), LIVE);
    }
    for (k, v) in &ct.extra {
        if get(k).map(str::trim) != Some(v.trim()) {
            acc.set_plain(k, get(k), v.clone(), REBOOT);
        }
    }
    Ok(())
}

/// rootfs or an allocated mpN. `create` is the form for an empty slot.
fn volume_drift(
    acc: &mut Acc,
    cfg: &LiveConfig,
    slot: &str,
    create: LxcVolumeMount,
    pool: &crate::names::StorageId,
    size: u64,
    mp: Option<&MountPoint>,
) -> Result<(), DriftError> {
    let live = cfg.get(slot);
    if is_empty_slot(live) {
        acc.set_plain(slot, live, create.to_wire(), STOP);
        return Ok(());
    }
    let live = live.unwrap_or_default();
    let lm = match LxcMount::parse(live) {
        Ok(LxcMount::Allocated(m)) => m,
        Ok(LxcMount::Bind(_)) => {
            acc.anomaly(AnomalyType::NeedsPerson, Some(slot), format!("{slot} is a bind mount on PVE but the manifest declares an allocated volume: change one of them by hand"));
            return Ok(());
        }
        Err(e) => {
            acc.anomaly(
                AnomalyType::NeedsPerson,
                Some(slot),
                format!("cannot read the live {slot} ({e}): ProxOps does not write over it"),
            );
            return Ok(());
        }
    };
    let size_differs = lm.size.is_some_and(|s| s.get() != size);
    if lm.volume.storage() != Some(pool) || size_differs {
        acc.anomaly(
            AnomalyType::DataLoss,
            Some(slot),
            format!("{slot} differs from the manifest (wanted {pool}, {} bytes): a create-form write would re-create the volume; move or resize it by hand, or change the manifest", size),
        );
        return Ok(());
    }
    let Some(m) = mp else { return Ok(()) };
    // Guest path and options converge through the live form [PROBE §20.16].
    let mut next = lm.clone();
    if let Some(p) = &m.mount_point
        && lm.mp.as_deref() != Some(p.as_str())
    {
        next.mp = Some(p.clone());
    }
    let o = m.options.clone().unwrap_or_default();
    let pairs: [(Option<bool>, &mut Option<bool>, bool); 5] = [
        (o.read_only, &mut next.ro, false),
        (o.backup, &mut next.backup, true),
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
    if next != lm {
        acc.set_plain(slot, Some(live), next.to_wire(), STOP);
    }
    Ok(())
}

fn bind_drift(acc: &mut Acc, cfg: &LiveConfig, slot: &str, b: &manifest::BindMount) {
    let live = cfg.get(slot);
    if is_empty_slot(live) {
        acc.set_plain(slot, live, bind_create(b).to_wire(), STOP);
        return;
    }
    let live = live.unwrap_or_default();
    let lb = match LxcMount::parse(live) {
        Ok(LxcMount::Bind(lb)) => lb,
        Ok(LxcMount::Allocated(_)) => {
            acc.anomaly(AnomalyType::NeedsPerson, Some(slot), format!("{slot} is an allocated volume on PVE but the manifest declares a bind mount: change one of them by hand"));
            return;
        }
        Err(e) => {
            acc.anomaly(
                AnomalyType::NeedsPerson,
                Some(slot),
                format!("cannot read the live {slot} ({e}): ProxOps does not write over it"),
            );
            return;
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

fn net_drift(acc: &mut Acc, cfg: &LiveConfig, slot: &str, n: &LxcNic, want: LxcNet) {
    let Some(live) = cfg.get(slot) else {
        acc.set_plain(slot, None, want.to_wire(), LIVE);
        return;
    };
    let ln = match LxcNet::parse(live) {
        Ok(ln) => ln,
        Err(e) => {
            acc.anomaly(
                AnomalyType::NeedsPerson,
                Some(slot),
                format!("cannot read the live {slot} ({e}): ProxOps does not rewrite it"),
            );
            return;
        }
    };
    // Owned tokens only; `type` is never compared; an assigned hwaddr stays.
    let mut next = ln.clone();
    if n.iface.is_some() {
        next.name = want.name.clone();
    }
    next.bridge = want.bridge.clone();
    if want.tag.is_some() {
        next.tag = want.tag;
    }
    if want.hwaddr.is_some() {
        next.hwaddr = want.hwaddr;
    }
    if let Some(r) = n.rate_limit.filter(|r| *r > 0.0)
        && !same_rate(ln.rate.as_deref(), r)
    {
        next.rate = want.rate.clone();
    }
    if want.firewall == Some(true) {
        next.firewall = Some(true);
    }
    if want.ip.is_some() {
        next.ip = want.ip.clone();
    }
    if want.gw.is_some() {
        next.gw = want.gw.clone();
    }
    if next != ln {
        acc.set_plain(slot, Some(live), next.to_wire(), LIVE);
    }
}
