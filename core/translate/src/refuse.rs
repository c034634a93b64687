//! What PVE will refuse, known before anything is sent: a write, a grow or
//! a template conversion PVE answers with an error whatever the guest's
//! state, read from data the planner already has (the live config as PVE
//! will have it, `/cluster/resources`' storages, how ProxOps
//! authenticates).
//!
//! Sending such a write would only fail, and before ProxOps wrote first it
//! cost a shutdown every cycle. So each becomes a `needs_person` anomaly
//! naming PVE's rule and what to do, and the object gets no action at all:
//! no write, no shutdown, no restart. Every rule cites the Proxmox source
//! that refuses.
//!
//! Must never: send or read anything (pure), or refuse what PVE would take
//! (a refusal here is a guest left unconverged).

use crate::change::Params;
use crate::drift::{DiskGrowth, Drift};
use proxops_model::live::{GuestType, LiveConfig, LiveGuest, LiveSnapshot};
use proxops_model::wire::{Boot, Bytes, LxcMount, parse_memory_mib};

/// One refusal: the PVE key concerned and the message a person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: Option<String>,
    pub message: String,
}

impl Refusal {
    fn new(field: &str, message: String) -> Refusal {
        Refusal {
            field: Some(field.to_owned()),
            message,
        }
    }
}

/// Whether PVE refuses the config write `d` would make to `live`.
/// `root_pam`: ProxOps calls PVE as `root@pam` (never true for an API
/// token, which PVE never treats as `root@pam`).
pub fn update(live: &LiveGuest, config: &LiveConfig, d: &Drift, root_pam: bool) -> Vec<Refusal> {
    if d.params.is_empty() && d.delete.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    match live.guest_type {
        GuestType::Lxc => {
            protected_volumes(live, &d.params, &mut out);
            root_only(live, config, &d.params, &d.delete, root_pam, &mut out);
            out.extend(quota_unprivileged(
                config.flag_on("unprivileged"),
                &d.params,
            ));
        }
        GuestType::Qemu => {
            out.extend(balloon_above_memory(config, &d.params));
            out.extend(boot_order(config, &d.params, &d.delete));
        }
    }
    out
}

/// Whether PVE refuses to create a container with these create-form
/// values: a quota on a mount point of an unprivileged container.
pub fn create(guest_type: GuestType, params: &Params) -> Vec<Refusal> {
    if guest_type != GuestType::Lxc {
        return Vec::new();
    }
    let unprivileged = params
        .get("unprivileged")
        .is_some_and(|v| proxops_model::wire::parse_bool(v.expose()).unwrap_or(false));
    quota_unprivileged(unprivileged, params)
}

/// Whether PVE refuses to convert `live` into a template: it has
/// snapshots (qemu-server `API2/Qemu.pm` `template`, pve-container
/// `API2/LXC.pm` `template`: "unable to create template, because VM
/// contains snapshots"). The config's `parent` key names the snapshot the
/// current state descends from (pve-guest-common `AbstractConfig.pm`
/// `snapshot_prepare` sets it, `snapshot_delete` unlinks it), so it is
/// there exactly when the guest has snapshots to descend from.
pub fn mark_template(live: &LiveGuest, config: &LiveConfig) -> Option<Refusal> {
    let parent = config.get("parent").filter(|p| !p.trim().is_empty())?;
    let (what, cmd) = match live.guest_type {
        GuestType::Qemu => ("VM", "qm"),
        GuestType::Lxc => ("CT", "pct"),
    };
    Some(Refusal::new(
        "template",
        format!(
            "vmid {} has snapshots (its current state descends from snapshot {parent:?}): PVE refuses to make a template of a guest with snapshots (\"unable to create template, because {what} contains snapshots\"), so ProxOps neither stops nor converts it; delete its snapshots ({cmd} delsnapshot {} <name>), then the next cycle converts it",
            live.vmid, live.vmid
        ),
    ))
}

/// Whether PVE refuses to grow `g` on the template `live`: marking it a
/// template made its volumes base volumes, and on file storage
/// (`dir`, `nfs`, `cifs`, `glusterfs`, `cephfs`: the plugins that keep
/// pve-storage's `Plugin.pm` `create_base`) the base volume is made
/// immutable (`chmod 0444`, `chattr +i`): a resize fails.
pub fn grow(
    live: &LiveGuest,
    config: &LiveConfig,
    g: &DiskGrowth,
    snapshot: &LiveSnapshot,
) -> Option<Refusal> {
    if !live.template {
        return None;
    }
    let value = config.get(&g.disk)?;
    let storage =
        proxops_model::names::StorageId::new(value.split([':', ',']).next()?.trim()).ok()?;
    let plugin = snapshot.storage_type(&storage)?;
    if !matches!(plugin, "dir" | "nfs" | "cifs" | "glusterfs" | "cephfs") {
        return None;
    }
    Some(Refusal::new(
        &g.disk,
        format!(
            "{} of template {} is a base volume on {plugin} storage {storage}, which PVE made immutable when it made the template (pve-storage `create_base`: chmod 0444, chattr +i): a resize to {} fails; the template keeps {}: clone it and grow the clone's disk, or set the size back in the manifest",
            g.disk,
            live.vmid,
            g.to.to_wire(),
            g.from.to_wire()
        ),
    ))
}

/// pve-container `LXC/Config.pm` `update_pct_config`: any `rootfs` or
/// `mpN` in a write (a new mount point too) goes through
/// `check_protection`: "can't update CT <vmid> drive '<key>' - protection
/// mode enabled". `protection` is fast-plugged, so what the config holds
/// now is what PVE checks.
fn protected_volumes(live: &LiveGuest, params: &Params, out: &mut Vec<Refusal>) {
    if !live.is_protected() {
        return;
    }
    for (key, _) in params.0.iter().filter(|(k, _)| is_mount_key(k)) {
        out.push(Refusal::new(
            key,
            format!(
                "CT {} has protection=1 and PVE refuses every rootfs or mount point write to a protected container (\"can't update CT {} drive '{key}' - protection mode enabled\"), so ProxOps neither writes nor restarts it; clear protection on PVE (pct set {} --protection 0; a manifest's protection: false would be refused in the same request), then the next cycle writes {key}; or undo the change in the manifest",
                live.vmid, live.vmid, live.vmid
            ),
        ));
    }
}

/// pve-container `LXC.pm` `check_ct_modify_config_perm`, which returns
/// early only for `root@pam`: "changing feature flags for privileged
/// container is only allowed for root@pam", and a `rootfs`/`mpN` whose
/// type is not `volume` (a bind or device mount) "is only allowed for
/// root@pam" (removing one is not checked).
fn root_only(
    live: &LiveGuest,
    config: &LiveConfig,
    params: &Params,
    delete: &[String],
    root_pam: bool,
    out: &mut Vec<Refusal>,
) {
    if root_pam {
        return;
    }
    let how = "ProxOps calls PVE with an API token, which is never root@pam";
    let fix = "make this change by hand on the host, or run ProxOps for this cluster with ticket authentication as root@pam (docs/gaps.md)";
    let privileged = !config.flag_on("unprivileged");
    let features = params.contains("features") || delete.iter().any(|k| k == "features");
    if privileged && features {
        out.push(Refusal::new(
            "features",
            format!(
                "CT {} is privileged and PVE lets only root@pam change a privileged container's features (\"changing feature flags for privileged container is only allowed for root@pam\"); {how}: {fix}",
                live.vmid
            ),
        ));
    }
    for (key, value) in params.0.iter().filter(|(k, _)| is_mount_key(k)) {
        if matches!(LxcMount::parse(value.expose()), Ok(LxcMount::Bind(_))) {
            out.push(Refusal::new(
                key,
                format!(
                    "{key} of CT {} is a bind mount and PVE lets only root@pam write one (\"mount point type bind is only allowed for root@pam\"); {how}: {fix}",
                    live.vmid
                ),
            ));
        }
    }
}

/// pve-container `API2/LXC/Status.pm` `vm_start`, for a container with
/// `unprivileged` set: "Quotas are not supported by unprivileged
/// containers". PVE stores the option and the create or write succeeds;
/// the container then fails to start.
fn quota_unprivileged(unprivileged: bool, params: &Params) -> Vec<Refusal> {
    if !unprivileged {
        return Vec::new();
    }
    params
        .0
        .iter()
        .filter(|(k, _)| is_mount_key(k))
        .filter(|(_, v)| {
            matches!(LxcMount::parse(v.expose()), Ok(LxcMount::Allocated(m)) if m.quota == Some(true))
        })
        .map(|(key, _)| {
            Refusal::new(
                key,
                format!(
                    "{key} asks for quota=1 on an unprivileged container: PVE stores it but refuses to start the container (\"Quotas are not supported by unprivileged containers\"), so ProxOps does not write it; remove quota from the mount point's options, or make the container privileged"
                ),
            )
        })
        .collect()
}

/// qemu-server `API2/Qemu.pm` `$update_vm_api` (`$load_and_check_config`,
/// before anything is written): "balloon value too large (must be smaller
/// than assigned memory)" when the new `memory` is below the `balloon`
/// the same write sets, else the one the config holds (its pending value,
/// else its current one).
fn balloon_above_memory(config: &LiveConfig, params: &Params) -> Option<Refusal> {
    let memory = params.get("memory")?;
    let memory = parse_memory_mib(memory.expose()).ok()?;
    let balloon = params
        .get("balloon")
        .map(|b| b.expose())
        .or_else(|| config.get("balloon"))
        .and_then(|b| b.trim().parse::<u64>().ok())
        .filter(|b| *b > 0)?;
    (balloon > memory).then(|| {
        Refusal::new(
            "memory",
            format!(
                "memory {} is below the guest's balloon target of {} on PVE, and PVE refuses such a write before it writes anything (\"balloon value too large (must be smaller than assigned memory)\"); lower balloon on PVE first (qm set <vmid> --balloon <MiB>, or 0 to turn ballooning off), or ask for at least {} of memory",
                Bytes(memory << 20).to_wire(),
                Bytes(balloon << 20).to_wire(),
                Bytes(balloon << 20).to_wire()
            ),
        )
    })
}

/// qemu-server `API2/Qemu.pm` `$update_vm_api`: each device of a new
/// `boot` `order=` must be in the config, its pending values or the same
/// write, and not deleted by it: "invalid bootorder: device '<dev>' does
/// not exist".
fn boot_order(config: &LiveConfig, params: &Params, delete: &[String]) -> Option<Refusal> {
    let boot = params.get("boot")?;
    let Ok(Boot::Order(order)) = Boot::parse(boot.expose()) else {
        return None;
    };
    let missing: Vec<&str> = order
        .iter()
        .map(String::as_str)
        .filter(|dev| {
            let exists = config.get(dev).is_some() || params.contains(dev);
            !exists || delete.iter().any(|k| k == dev)
        })
        .collect();
    let first = missing.first()?;
    Some(Refusal::new(
        "boot",
        format!(
            "the boot order names {} that the VM does not have, and PVE refuses the whole write (\"invalid bootorder: device '{first}' does not exist\"); name only devices the manifest declares (its disks, CD drive and NICs), or add the device",
            missing.join(", ")
        ),
    ))
}

/// `rootfs` or `mpN`.
fn is_mount_key(key: &str) -> bool {
    key == "rootfs"
        || key
            .strip_prefix("mp")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
