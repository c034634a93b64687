//! VM and TemplateVM: the desired value of every owned qemu key, and the
//! comparison with a live `/config` (spec §6, §7, §12).
//!
//! Impact on a running VM, per key (spec §12, refined):
//! - `StopStart`: `cpu`, `cores`, `memory`, `sockets`, `numa`, `machine`,
//!   `bios`, `scsihw`, `netN`, disks, `efidisk0` (slot), `tpmstate0`,
//!   `serial0`, the cloud-init drive, the CD drive, `hostpciN`: PVE keeps
//!   them pending, and the guest only sees them after a cold start.
//! - `Reboot`: `vga`, `agent`, `acpi`, `tablet`, `hotplug`, `boot`, the
//!   cloud-init data keys (read by the guest at boot), `efidisk0`'s
//!   `pre-enrolled-keys` (enrolment takes effect at next boot [PROBE]) and
//!   `spec.extra` keys (ProxOps cannot know whether PVE hot-applies them, so
//!   they are written and left pending at worst).
//! - `Live`: `name`, `description`, `tags`, `onboot`, `startup`,
//!   `protection`: PVE applies them to the config at once.

use std::collections::BTreeSet;

use crate::action::{AnomalyType, Impact, ParamValue};
use crate::live::LiveConfig;
use crate::manifest::{self, CdMedia, CdromIntent, SecureBoot, VmDisk, VmNic, VmSpec};
use crate::names::Kind;
use crate::repo::DesiredObject;
use crate::wire::{
    Agent, Bdf, Boot, Bytes, DnsList, Drive, DriveVolume, EfiDisk, HostPci, MacAddr, Media,
    PciDevice, PropToken, PropertyString, QemuNet, SshKeys, TpmState, TpmVersion,
};

use super::resolve::{artifact_volid, password, ssh_keys};
use super::{Acc, Context, DriftError, desired_tags, rate_text, same_rate};

const STOP: Impact = Impact::StopStart;
const REBOOT: Impact = Impact::Reboot;
const LIVE: Impact = Impact::Live;

// ------------------------------------------------------------ desired values

pub(crate) fn name(obj: &DesiredObject, vm: &VmSpec) -> String {
    vm.pve_name
        .clone()
        .unwrap_or_else(|| obj.metadata.name.to_string())
}

pub(crate) fn memory_mib(obj: &DesiredObject, vm: &VmSpec) -> Result<u64, DriftError> {
    vm.memory
        .whole_mib()
        .filter(|m| *m > 0)
        .ok_or_else(|| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: "spec.memory".into(),
            message: format!(
                "memory {} is not a whole, non-zero number of MiB",
                vm.memory
            ),
        })
}

fn options(vm: &VmSpec) -> manifest::VmOptions {
    vm.options.clone().unwrap_or_default()
}

fn hardware(vm: &VmSpec) -> manifest::VmHardware {
    vm.hardware.clone().unwrap_or_default()
}

/// `nested-virt`: PVE 9 has no `nestedvirt` key, and `flags=+vmx`/`+svm`
/// inside `cpu` depends on the host's CPU vendor, which ProxOps does not
/// know. With `cpu.type: host` the host's virtualisation extensions already
/// reach the guest, so nothing is sent; any other type fails closed.
fn check_nested(obj: &DesiredObject, vm: &VmSpec) -> Result<(), DriftError> {
    if options(vm).nested_virt == Some(true) && vm.cpu.cpu_type != "host" {
        return Err(DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: "spec.options.nested-virt".into(),
            message: format!(
                "PVE has no nested-virtualisation key and the cpu flag (+vmx or +svm) depends on the host's CPU vendor: use cpu.type \"host\" (passes the host's extensions through) instead of {:?}",
                vm.cpu.cpu_type
            ),
        });
    }
    Ok(())
}

/// `cpu`: the model, plus `hidden=1` when asked.
pub(crate) fn cpu(obj: &DesiredObject, vm: &VmSpec) -> Result<String, DriftError> {
    check_nested(obj, vm)?;
    let mut v = vm.cpu.cpu_type.clone();
    if options(vm).hidden == Some(true) {
        v.push_str(",hidden=1");
    }
    Ok(v)
}

/// PVE's machine schema has no `i440fx`: its name for the family is `pc`.
pub(crate) fn machine(m: &str) -> String {
    if m == "i440fx" {
        "pc".to_owned()
    } else {
        m.to_owned()
    }
}

fn machine_family(m: &str) -> &str {
    if m == "pc" || m.starts_with("pc-i440fx") {
        "pc"
    } else if m == "q35" || m.starts_with("pc-q35") {
        "q35"
    } else {
        m
    }
}

/// `scsihw`: the first disk that declares a controller.
pub(crate) fn scsihw(vm: &VmSpec) -> Option<String> {
    vm.disks.iter().find_map(|d| d.controller.clone())
}

/// A disk's create form: `<pool>:<GiB>[,opts]` or `<pool>:0,import-from=<volid>`.
pub(crate) fn disk_create(
    obj: &DesiredObject,
    ctx: &Context<'_>,
    d: &VmDisk,
    index: usize,
) -> Result<Drive, DriftError> {
    let size = match (&d.image, d.size) {
        (Some(_), _) => Bytes(0),
        (None, Some(q)) => Bytes(q.bytes()),
        (None, None) => {
            return Err(DriftError::Unsupported {
                object: obj.r#ref.clone(),
                field: format!("spec.disks[{index}].size"),
                message: "size is required unless image is set".into(),
            });
        }
    };
    let mut drive = Drive::new(DriveVolume::Create {
        storage: d.storage.clone(),
        size,
    });
    if let Some(img) = &d.image {
        drive.import_from = Some(artifact_volid(
            obj,
            ctx,
            Kind::DiskImage,
            img,
            &format!("spec.disks[{index}].image"),
        )?);
    }
    if d.iothread == Some(true) {
        drive.iothread = Some(true);
    }
    drive.discard = d.discard.map(discard);
    drive.ssd = d.ssd;
    drive.aio = d.aio.map(aio);
    Ok(drive)
}

fn discard(d: manifest::Discard) -> crate::wire::Discard {
    match d {
        manifest::Discard::On => crate::wire::Discard::On,
        manifest::Discard::Ignore => crate::wire::Discard::Ignore,
    }
}

fn aio(a: manifest::Aio) -> crate::wire::Aio {
    match a {
        manifest::Aio::Native => crate::wire::Aio::Native,
        manifest::Aio::Threads => crate::wire::Aio::Threads,
        manifest::Aio::IoUring => crate::wire::Aio::IoUring,
    }
}

/// `efidisk0=<storage>:1[,efitype=..][,pre-enrolled-keys=0|1]`. PVE sizes
/// the EFI vars volume from the OVMF template whatever number is sent (the
/// web UI sends `1`); the manifest's `size` is therefore not sent.
pub(crate) fn efidisk_create(e: &manifest::EfiDisk) -> EfiDisk {
    EfiDisk {
        volume: DriveVolume::Create {
            storage: e.storage.clone(),
            size: Bytes(1 << 30),
        },
        efitype: e.template.clone(),
        pre_enrolled_keys: e.secure_boot.map(|s| s == SecureBoot::Enabled),
        ms_cert: None,
        size: None,
        extra: Vec::new(),
    }
}

fn tpm_version(t: &manifest::Tpm) -> TpmVersion {
    if t.version.as_deref() == Some("v1.2") {
        TpmVersion::V1_2
    } else {
        TpmVersion::V2_0
    }
}

/// `tpmstate0=<storage>:1,version=v2.0` (PVE sizes the state itself).
pub(crate) fn tpm_create(t: &manifest::Tpm) -> TpmState {
    TpmState {
        volume: DriveVolume::Create {
            storage: t.storage.clone(),
            size: Bytes(1 << 30),
        },
        version: Some(tpm_version(t)),
        size: None,
        extra: Vec::new(),
    }
}

/// The owned CD drive: slot and value, or `None` when not owned.
pub(crate) fn cdrom(
    obj: &DesiredObject,
    ctx: &Context<'_>,
    vm: &VmSpec,
) -> Result<Option<(&'static str, Drive)>, DriftError> {
    let Some(c) = hardware(vm).cdrom else {
        return Ok(None);
    };
    let media = match c.media {
        Some(CdMedia::Disk) => Media::Disk,
        _ => Media::Cdrom,
    };
    let slot = manifest::cdrom_slot(vm);
    match c.intent() {
        CdromIntent::NotOwned => Ok(None),
        CdromIntent::Detach => {
            let mut d = Drive::new(DriveVolume::None);
            d.media = Some(Media::Cdrom);
            Ok(Some((slot, d)))
        }
        CdromIntent::Attach(iso) => {
            let volid = artifact_volid(obj, ctx, Kind::ISO, &iso, "spec.hardware.cdrom.iso")?;
            let mut d = Drive::new(DriveVolume::Volume(volid));
            d.media = Some(media);
            Ok(Some((slot, d)))
        }
    }
}

/// The cloud-init drive's storage when enabled (always `ide2`).
pub(crate) fn cloud_init_storage(vm: &VmSpec) -> Option<crate::names::StorageId> {
    hardware(vm)
        .cloud_init
        .filter(|c| c.enabled)
        .and_then(|c| c.storage)
}

pub(crate) fn net(nic: &VmNic) -> Result<QemuNet, String> {
    let mut n = QemuNet::new(nic.model.as_deref().unwrap_or("virtio"), &nic.bridge);
    if let Some(m) = &nic.mac {
        n.mac = Some(MacAddr::parse(m).map_err(|e| e.to_string())?);
    }
    n.tag = nic.vlan.map(|v| v as u16);
    n.rate = nic.rate_limit.filter(|r| *r > 0.0).map(rate_text);
    if nic.firewall == Some(true) {
        n.firewall = Some(true);
    }
    Ok(n)
}

pub(crate) fn hostpci(
    obj: &DesiredObject,
    p: &manifest::PciDevice,
    index: usize,
) -> Result<HostPci, DriftError> {
    let bdf = Bdf::parse(&p.device).map_err(|e| DriftError::Unsupported {
        object: obj.r#ref.clone(),
        field: format!("spec.hardware.pci-devices[{index}].device"),
        message: e.to_string(),
    })?;
    Ok(HostPci {
        device: PciDevice::Host(vec![bdf]),
        pcie: p.pcie,
        extra: Vec::new(),
    })
}

/// The same device whatever the spelling: `00:17.0` = `0000:00:17.0`.
fn bdf_key(b: &Bdf) -> String {
    let s = b.as_str();
    let main = s.split('.').next().unwrap_or(s);
    let mut out = if main.matches(':').count() == 1 {
        format!("0000:{s}")
    } else {
        s.to_owned()
    };
    if !out.contains('.') {
        out.push_str(".*");
    }
    out
}

/// Option keys owned by the manifest, with their impact.
pub(crate) fn option_values(vm: &VmSpec) -> Vec<(&'static str, String, Impact)> {
    let o = options(vm);
    let mut out = Vec::new();
    if o.onboot == Some(true) {
        out.push(("onboot", "1".to_owned(), LIVE));
    }
    if let Some(s) = o.startup.as_ref().filter(|s| !s.trim().is_empty()) {
        out.push(("startup", s.trim().to_owned(), LIVE));
    }
    if o.protection == Some(true) {
        out.push(("protection", "1".to_owned(), LIVE));
    }
    if o.agent == Some(true) {
        out.push(("agent", "1".to_owned(), REBOOT));
    }
    if o.acpi == Some(true) {
        out.push(("acpi", "1".to_owned(), REBOOT));
    }
    if o.tablet == Some(true) {
        out.push(("tablet", "1".to_owned(), REBOOT));
    }
    if !o.hotplug.is_empty() {
        out.push(("hotplug", o.hotplug.join(","), REBOOT));
    }
    if !o.boot_order.is_empty() {
        out.push(("boot", Boot::Order(o.boot_order.clone()).to_wire(), REBOOT));
    }
    out
}

/// Cloud-init data keys the manifest owns (spec §6.7.2), in wire order.
pub(crate) fn cloud_init_values(
    obj: &DesiredObject,
    vm: &VmSpec,
    ctx: &Context<'_>,
) -> Result<Vec<(String, ParamValue)>, DriftError> {
    let mut out = Vec::new();
    let Some(ci) = &vm.cloud_init_data else {
        return Ok(out);
    };
    if let Some(u) = ci.ci_user.as_ref().filter(|u| !u.trim().is_empty()) {
        out.push(("ciuser".to_owned(), ParamValue::Plain(u.trim().to_owned())));
    }
    if let Some(keys) = ssh_keys(obj, ci, ctx)? {
        out.push(("sshkeys".to_owned(), ParamValue::Plain(keys.to_wire())));
    }
    if let Some(p) = password(obj, ci, ctx)? {
        out.push(("cipassword".to_owned(), ParamValue::Secret(p)));
    }
    if !ci.nameservers.is_empty() {
        out.push((
            "nameserver".to_owned(),
            ParamValue::Plain(ci.nameservers.join(" ")),
        ));
    }
    if !ci.search_domains.is_empty() {
        out.push((
            "searchdomain".to_owned(),
            ParamValue::Plain(ci.search_domains.join(" ")),
        ));
    }
    let mut ips: Vec<_> = ci.ipconfigs.iter().collect();
    ips.sort_by_key(|i| i.nic);
    for ip in ips {
        let mut v = format!("ip={}", ip.ip);
        if let Some(gw) = &ip.gateway {
            v.push_str(&format!(",gw={gw}"));
        }
        out.push((format!("ipconfig{}", ip.nic), ParamValue::Plain(v)));
    }
    Ok(out)
}

/// Identity keys a clone-backed VM declares (so they are not cleared).
pub(crate) fn declared_identity(vm: &VmSpec) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    if let Some(ci) = &vm.cloud_init_data {
        if ci.ci_user.as_ref().is_some_and(|u| !u.trim().is_empty()) {
            out.insert("ciuser".to_owned());
        }
        if !ci.ssh_keys.is_empty() || !ci.ssh_key_refs.is_empty() {
            out.insert("sshkeys".to_owned());
        }
        if ci.ci_password_ref.is_some() {
            out.insert("cipassword".to_owned());
        }
        if !ci.nameservers.is_empty() {
            out.insert("nameserver".to_owned());
        }
        if !ci.search_domains.is_empty() {
            out.insert("searchdomain".to_owned());
        }
        for ip in &ci.ipconfigs {
            out.insert(format!("ipconfig{}", ip.nic));
        }
    }
    out.extend(vm.extra.keys().cloned());
    out
}

fn is_identity_key(k: &str) -> bool {
    super::CLONE_IDENTITY_KEYS.contains(&k)
        || k.strip_prefix("ipconfig")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

// ------------------------------------------------------------ drift

fn is_disk_key(k: &str) -> bool {
    manifest::DISK_BUSES.iter().any(|(bus, _)| {
        k.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

fn head_of(v: &str, key: &str) -> Option<String> {
    let p = PropertyString::parse(v).ok()?;
    p.positional()
        .map(str::to_owned)
        .or_else(|| p.get(key).map(str::to_owned))
}

/// Rebuilds `live` with `head` as its leading value (keeping other tokens),
/// for `cpu`, `vga`, `machine` whose leading value may be spelled `key=`.
fn with_head(live: Option<&str>, head: &str, key: &str) -> String {
    let Some(p) = live.and_then(|l| PropertyString::parse(l).ok()) else {
        return head.to_owned();
    };
    let mut tokens = vec![PropToken::Positional(head.to_owned())];
    for (i, t) in p.into_tokens().into_iter().enumerate() {
        match &t {
            PropToken::Positional(_) if i == 0 => {}
            PropToken::Pair { key: k, .. } if k == key => {}
            _ => tokens.push(t),
        }
    }
    PropertyString::from_tokens(tokens).to_wire()
}

pub(crate) fn drift(
    obj: &DesiredObject,
    vm: &VmSpec,
    ctx: &Context<'_>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    let clone_backed = vm.clone.is_some();
    let hw = hardware(vm);
    let get = |k: &str| cfg.get(k);

    let want_name = name(obj, vm);
    if get("name") != Some(want_name.as_str()) {
        acc.set_plain("name", get("name"), want_name, LIVE);
    }

    let mem = memory_mib(obj, vm)?;
    if !matches!(cfg.memory_mib(), Some(Ok(m)) if m == mem) {
        acc.set_plain("memory", get("memory"), mem.to_string(), STOP);
    }

    // cpu: the model always; `hidden` only when owned.
    let want_cpu = cpu(obj, vm)?;
    let live_cpu = get("cpu");
    let live_model = live_cpu.and_then(|c| head_of(c, "cputype"));
    let live_hidden = live_cpu
        .and_then(|c| PropertyString::parse(c).ok())
        .and_then(|p| {
            p.get("hidden")
                .map(|h| crate::wire::parse_bool(h).unwrap_or(false))
        })
        .unwrap_or(false);
    let hidden = options(vm).hidden == Some(true);
    if live_model.as_deref() != Some(vm.cpu.cpu_type.as_str()) || (hidden && !live_hidden) {
        let mut v = with_head(live_cpu, &vm.cpu.cpu_type, "cputype");
        if hidden {
            let mut p = PropertyString::parse(&v).unwrap_or_default();
            p.set("hidden", "1");
            v = p.to_wire();
        }
        let _ = want_cpu;
        acc.set_plain("cpu", live_cpu, v, STOP);
    }

    if get("cores").and_then(|c| c.trim().parse::<u32>().ok()) != Some(vm.cpu.cores) {
        acc.set_plain("cores", get("cores"), vm.cpu.cores.to_string(), STOP);
    }
    if let Some(s) = hw.sockets
        && get("sockets").map_or(Some(1), |c| c.trim().parse::<u32>().ok()) != Some(s)
    {
        acc.set_plain("sockets", get("sockets"), s.to_string(), STOP);
    }
    if let Some(n) = hw.numa
        && flag(cfg, "numa", false) != n
    {
        acc.set_plain(
            "numa",
            get("numa"),
            crate::wire::write_bool(n).to_owned(),
            STOP,
        );
    }
    if let Some(m) = &hw.machine {
        let want = machine(m);
        let live = get("machine")
            .and_then(|v| head_of(v, "type"))
            .unwrap_or_else(|| "pc".to_owned());
        let same = if want == "pc" || want == "q35" {
            machine_family(&live) == want
        } else {
            live == want
        };
        if !same {
            acc.set_plain(
                "machine",
                get("machine"),
                with_head(get("machine"), &want, "type"),
                STOP,
            );
        }
    }
    if let Some(b) = hw.bios
        && get("bios").unwrap_or("seabios") != b.as_str()
    {
        acc.set_plain("bios", get("bios"), b.as_str().to_owned(), STOP);
    }
    if let Some(d) = hw.display.as_ref().filter(|d| !d.trim().is_empty())
        && get("vga").and_then(|v| head_of(v, "type")).as_deref() != Some(d.trim())
    {
        acc.set_plain(
            "vga",
            get("vga"),
            with_head(get("vga"), d.trim(), "type"),
            REBOOT,
        );
    }
    if !clone_backed
        && let Some(c) = scsihw(vm)
        && get("scsihw").unwrap_or("lsi") != c
    {
        acc.set_plain("scsihw", get("scsihw"), c, STOP);
    }
    if let Some(s) = hw.serial0.as_ref().filter(|s| !s.trim().is_empty())
        && get("serial0").map(str::trim) != Some(s.trim())
    {
        acc.set_plain("serial0", get("serial0"), s.trim().to_owned(), STOP);
    }

    // Disks (a clone's disks belong to its template).
    let mut owned_drive_slots: BTreeSet<String> = BTreeSet::new();
    if !clone_backed {
        for (i, d) in vm.disks.iter().enumerate() {
            let slot = manifest::disk_slot(d, i);
            owned_drive_slots.insert(slot.clone());
            let want = disk_create(obj, ctx, d, i)?;
            disk_drift(acc, cfg, &slot, d, want);
        }
    }

    if let Some(e) = &hw.efi_disk {
        efidisk_drift(acc, cfg, e);
    }
    if let Some(t) = &hw.tpm {
        tpm_drift(acc, cfg, t);
    }

    let ci_storage = cloud_init_storage(vm);
    if let Some(storage) = &ci_storage {
        owned_drive_slots.insert("ide2".to_owned());
        cloud_init_drift(acc, cfg, storage);
    }
    if let Some((slot, want)) = cdrom(obj, ctx, vm)? {
        owned_drive_slots.insert(slot.to_owned());
        cdrom_drift(
            acc,
            cfg,
            slot,
            &want,
            hw.cdrom.as_ref().and_then(|c| c.media).is_some(),
        );
    }
    if !clone_backed {
        live_only_drives(acc, cfg, &owned_drive_slots);
    }

    // Host PCI.
    let mut owned_pci = BTreeSet::new();
    for (i, p) in hw.pci_devices.iter().enumerate() {
        let key = format!("hostpci{}", p.slot.0);
        owned_pci.insert(key.clone());
        let want = hostpci(obj, p, i)?;
        hostpci_drift(acc, cfg, &key, want);
    }
    for (_, key, _) in cfg.slots("hostpci") {
        if !owned_pci.contains(key) {
            acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never removes a passthrough device; declare it or remove it by hand"));
        }
    }

    // NICs.
    let mut owned_nets = BTreeSet::new();
    for (i, n) in vm.networks.iter().enumerate() {
        let slot = manifest::vm_nic_slot(n, i);
        owned_nets.insert(slot.clone());
        let want = net(n).map_err(|message| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: format!("spec.networks[{i}].mac"),
            message,
        })?;
        net_drift(acc, cfg, &slot, n, want);
    }
    if !(clone_backed && vm.networks.is_empty()) {
        for (_, key, _) in cfg.slots("net") {
            if !owned_nets.contains(key) {
                acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never removes a NIC; declare it or remove it by hand"));
            }
        }
    }

    // Options.
    for (key, want, impact) in option_values(vm) {
        let live = get(key);
        let same = match key {
            "onboot" | "protection" => flag(cfg, key, false),
            "acpi" | "tablet" => flag(cfg, key, true),
            "agent" => live
                .and_then(|l| Agent::parse(l).ok())
                .is_some_and(|a| a.enabled),
            "hotplug" => hotplug_set(live) == hotplug_set(Some(&want)),
            "boot" => live.and_then(|l| Boot::parse(l).ok()) == Boot::parse(&want).ok(),
            _ => live.map(str::trim) == Some(want.as_str()),
        };
        if !same {
            let v = if key == "agent" {
                live.and_then(|l| Agent::parse(l).ok())
                    .map(|a| {
                        Agent {
                            enabled: true,
                            extra: a.extra,
                        }
                        .to_wire()
                    })
                    .unwrap_or(want)
            } else {
                want
            };
            acc.set_plain(key, live, v, impact);
        }
    }

    // Cloud-init data.
    for (key, want) in cloud_init_values(obj, vm, ctx)? {
        let live = get(&key);
        let same = match key.as_str() {
            // §6.7.2: PVE reports only a mask; present means satisfied,
            // never rewritten (writing the mask would set it) [PROBE].
            "cipassword" => live.is_some(),
            "sshkeys" => {
                live.and_then(|l| SshKeys::parse(l).ok()).map(|k| k.ids())
                    == SshKeys::parse(want.expose()).ok().map(|k| k.ids())
            }
            "nameserver" | "searchdomain" => {
                live.and_then(|l| DnsList::parse(l).ok()).map(|d| {
                    d.set()
                        .into_iter()
                        .map(str::to_owned)
                        .collect::<BTreeSet<_>>()
                }) == DnsList::parse(want.expose())
                    .ok()
                    .map(|d| d.set().into_iter().map(str::to_owned).collect())
            }
            k if k.starts_with("ipconfig") => ipconfig_same(live, want.expose()),
            _ => live.map(str::trim) == Some(want.expose()),
        };
        if !same {
            let v = if key.starts_with("ipconfig") {
                ParamValue::Plain(ipconfig_live_form(live, want.expose()))
            } else {
                want
            };
            acc.set(&key, live, v, REBOOT);
        }
    }
    if clone_backed {
        // §6.8: identity inherited from the template is cleared unless
        // declared. `cipassword` is the exception after the clone step: it
        // cannot be told apart from one set by an operator, and deleting it
        // can lock a person out of a running guest (§22.5).
        let declared = declared_identity(vm);
        let keys: Vec<String> = cfg
            .values
            .keys()
            .filter(|k| is_identity_key(k) && *k != "cipassword" && !declared.contains(*k))
            .cloned()
            .collect();
        for k in keys {
            acc.delete(&k, get(&k), REBOOT);
        }
    }

    if let Some(d) = &vm.pve_description
        && get("description").unwrap_or("").trim() != d.trim()
    {
        acc.set_plain("description", get("description"), d.clone(), LIVE);
    }
    let tags = desired_tags(obj, &vm.tags)?;
    if cfg.tags().ok().as_ref() != Some(&tags) {
        acc.set_plain("tags", get("tags"), tags.to_wire(), LIVE);
    }
    for (k, v) in &vm.extra {
        if get(k).map(str::trim) != Some(v.trim()) {
            acc.set_plain(k, get(k), v.clone(), REBOOT);
        }
    }
    Ok(())
}

/// A boolean key; absent (or unreadable) = `default`.
fn flag(cfg: &LiveConfig, key: &str, default: bool) -> bool {
    match cfg.flag(key) {
        Some(Ok(b)) => b,
        _ => default,
    }
}

fn hotplug_set(v: Option<&str>) -> BTreeSet<String> {
    match v.map(str::trim) {
        None | Some("1") => ["network", "disk", "usb"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
        Some("0") => BTreeSet::new(),
        Some(s) => s
            .split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(str::to_owned)
            .collect(),
    }
}

fn ipconfig_same(live: Option<&str>, want: &str) -> bool {
    let (Some(l), Ok(w)) = (
        live.and_then(|l| PropertyString::parse(l).ok()),
        PropertyString::parse(want),
    ) else {
        return false;
    };
    l.get("ip") == w.get("ip") && (w.get("gw").is_none() || l.get("gw") == w.get("gw"))
}

/// The live `ipconfigN` with the owned `ip`/`gw` set (`ip6=` kept).
fn ipconfig_live_form(live: Option<&str>, want: &str) -> String {
    let (Some(mut l), Ok(w)) = (
        live.and_then(|l| PropertyString::parse(l).ok()),
        PropertyString::parse(want),
    ) else {
        return want.to_owned();
    };
    for k in ["ip", "gw"] {
        if let Some(v) = w.get(k) {
            l.set(k, v);
        }
    }
    l.to_wire()
}

fn disk_drift(acc: &mut Acc, cfg: &LiveConfig, slot: &str, d: &VmDisk, want: Drive) {
    let Some(live) = cfg.get(slot) else {
        acc.set_plain(slot, None, want.to_wire(), STOP);
        return;
    };
    let ld = match Drive::parse(live) {
        Ok(ld) => ld,
        Err(e) => {
            acc.anomaly(AnomalyType::NeedsPerson, Some(slot), format!("cannot read the live {slot} ({e}): ProxOps does not write over a volume it cannot read"));
            return;
        }
    };
    if ld.volume == DriveVolume::None {
        // An empty owned slot takes the create form.
        acc.set_plain(slot, Some(live), want.to_wire(), STOP);
        return;
    }
    if ld.is_cdrom() || ld.is_cloudinit() {
        acc.anomaly(AnomalyType::NeedsPerson, Some(slot), format!("{slot} holds a CD/cloud-init drive on PVE but the manifest declares a disk there: move one of them"));
        return;
    }
    let live_pool = ld.volume.storage();
    if live_pool != Some(&d.storage) {
        acc.anomaly(
            AnomalyType::DataLoss,
            Some(slot),
            format!("{slot} lives on {} but the manifest asks for {}: PVE would re-create the volume; move the disk by hand (Move Storage) or change the manifest", live_pool.map_or("an unknown storage".to_owned(), |p| p.to_string()), d.storage),
        );
        return;
    }
    if d.image.is_none()
        && let (Some(ls), Some(ds)) = (ld.size, d.size)
        && ls.get() != ds.bytes()
    {
        acc.anomaly(
            AnomalyType::DataLoss,
            Some(slot),
            format!("{slot} is {} on PVE but the manifest asks for {}: ProxOps never re-creates or resizes a live volume; resize it by hand or change the manifest", ls.to_wire(), Bytes(ds.bytes()).to_wire()),
        );
        return;
    }
    // Option tokens converge through the live form: same volume, new tokens [PROBE].
    let mut next = ld.clone();
    if let Some(w) = d.iothread
        && ld.iothread.unwrap_or(false) != w
    {
        next.iothread = Some(w);
    }
    if let Some(w) = d.discard.map(discard)
        && ld.discard.unwrap_or(crate::wire::Discard::Ignore) != w
    {
        next.discard = Some(w);
    }
    if let Some(w) = d.ssd
        && ld.ssd != Some(w)
    {
        next.ssd = Some(w);
    }
    if let Some(w) = d.aio.map(aio)
        && ld.aio != Some(w)
    {
        next.aio = Some(w);
    }
    let _ = want;
    if next != ld {
        acc.set_plain(slot, Some(live), next.to_wire(), STOP);
    }
}

fn efidisk_drift(acc: &mut Acc, cfg: &LiveConfig, e: &manifest::EfiDisk) {
    let want = efidisk_create(e);
    let Some(live) = cfg.get("efidisk0") else {
        acc.set_plain("efidisk0", None, want.to_wire(), STOP);
        return;
    };
    let le = match EfiDisk::parse(live) {
        Ok(le) => le,
        Err(err) => {
            acc.anomaly(
                AnomalyType::NeedsPerson,
                Some("efidisk0"),
                format!("cannot read the live efidisk0 ({err}): ProxOps does not write over it"),
            );
            return;
        }
    };
    if le.volume == DriveVolume::None {
        acc.set_plain("efidisk0", Some(live), want.to_wire(), STOP);
        return;
    }
    if le.volume.storage() != Some(&e.storage) {
        acc.anomaly(AnomalyType::DataLoss, Some("efidisk0"), format!("efidisk0 lives on another storage than {}: PVE would re-create the EFI variables; move it by hand or change the manifest", e.storage));
        return;
    }
    // Size and efitype are not compared: PVE sizes the volume itself (a tiny
    // size is clamped to 4M) and changing efitype needs a new volume.
    if let Some(w) = want.pre_enrolled_keys
        && le.pre_enrolled_keys.unwrap_or(false) != w
    {
        // Live form keeps the volume and PVE's ms-cert token [PROBE].
        let mut next = le.clone();
        next.pre_enrolled_keys = Some(w);
        acc.set_plain("efidisk0", Some(live), next.to_wire(), REBOOT);
    }
}

fn tpm_drift(acc: &mut Acc, cfg: &LiveConfig, t: &manifest::Tpm) {
    let want = tpm_create(t);
    let Some(live) = cfg.get(TpmState::KEY) else {
        acc.set_plain(TpmState::KEY, None, want.to_wire(), STOP);
        return;
    };
    let lt = match TpmState::parse(live) {
        Ok(lt) => lt,
        Err(err) => {
            acc.anomaly(
                AnomalyType::NeedsPerson,
                Some(TpmState::KEY),
                format!("cannot read the live tpmstate0 ({err}): ProxOps does not write over it"),
            );
            return;
        }
    };
    if lt.volume == DriveVolume::None {
        acc.set_plain(TpmState::KEY, Some(live), want.to_wire(), STOP);
        return;
    }
    if lt.volume.storage() != Some(&t.storage) {
        acc.anomaly(AnomalyType::DataLoss, Some(TpmState::KEY), format!("tpmstate0 lives on another storage than {}: PVE would re-create the TPM state; move it by hand or change the manifest", t.storage));
        return;
    }
    // PVE's default TPM version is v1.2 when the token is absent.
    if lt.version.unwrap_or(TpmVersion::V1_2) != tpm_version(t) {
        acc.anomaly(AnomalyType::DataLoss, Some(TpmState::KEY), format!("tpmstate0 is not version {}: changing the version re-creates the TPM state; do it by hand or change the manifest", tpm_version(t).as_str()));
    }
}

fn cloud_init_drift(acc: &mut Acc, cfg: &LiveConfig, storage: &crate::names::StorageId) {
    let want = DriveVolume::CloudInitCreate {
        storage: storage.clone(),
    }
    .to_wire();
    let Some(live) = cfg.get("ide2") else {
        acc.set_plain("ide2", None, want, STOP);
        return;
    };
    let Ok(ld) = Drive::parse(live) else {
        acc.anomaly(
            AnomalyType::NeedsPerson,
            Some("ide2"),
            "cannot read the live ide2: ProxOps does not write the cloud-init drive over it".into(),
        );
        return;
    };
    if ld.volume == DriveVolume::None {
        acc.set_plain("ide2", Some(live), want, STOP);
    } else if !ld.is_cloudinit() {
        acc.anomaly(AnomalyType::NeedsPerson, Some("ide2"), "ide2 holds another drive on PVE but the manifest puts the cloud-init drive there: empty ide2 by hand".into());
    } else if ld.volume.storage() != Some(storage) {
        // Re-sending the create form over a live cloud-init volume fails
        // ("already exists") [PROBE]; another pool is left to a person.
        acc.anomaly(AnomalyType::DataLoss, Some("ide2"), format!("the cloud-init drive lives on another storage than {storage}: remove it by hand so ProxOps can create it there"));
    }
}

fn cdrom_drift(acc: &mut Acc, cfg: &LiveConfig, slot: &str, want: &Drive, media_pinned: bool) {
    let Some(live) = cfg.get(slot) else {
        acc.set_plain(slot, None, want.to_wire(), STOP);
        return;
    };
    let Ok(ld) = Drive::parse(live) else {
        acc.anomaly(
            AnomalyType::NeedsPerson,
            Some(slot),
            format!("cannot read the live {slot}: ProxOps does not write the CD drive over it"),
        );
        return;
    };
    if ld.is_cloudinit()
        || (ld.volume != DriveVolume::None && !ld.is_cdrom() && ld.iso_file().is_none())
    {
        acc.anomaly(AnomalyType::NeedsPerson, Some(slot), format!("{slot} holds a disk or cloud-init drive on PVE but the manifest puts the CD drive there: move one of them"));
        return;
    }
    let same = match (&want.volume, &ld.volume) {
        (DriveVolume::None, DriveVolume::None) => true,
        (DriveVolume::Volume(w), DriveVolume::Volume(l)) => {
            w == l
                && (!media_pinned
                    || ld.media.unwrap_or(Media::Disk) == want.media.unwrap_or(Media::Cdrom))
        }
        _ => false,
    };
    if !same {
        acc.set_plain(slot, Some(live), want.to_wire(), STOP);
    }
}

fn live_only_drives(acc: &mut Acc, cfg: &LiveConfig, owned: &BTreeSet<String>) {
    for (key, value) in &cfg.values {
        if !is_disk_key(key) || owned.contains(key) {
            continue;
        }
        match Drive::parse(value) {
            Ok(d) if d.volume == DriveVolume::None => {}
            // A CD drive on IDE the manifest does not own: not ProxOps's.
            Ok(d) if key.starts_with("ide") && (d.is_cdrom() || d.is_cloudinit()) => {}
            Ok(d) if d.is_cloudinit() => acc.anomaly(
                AnomalyType::LiveOnlySlot,
                Some(key),
                format!("{key} holds a cloud-init drive: ProxOps models cloud-init on ide2 only, so this slot stays PVE's (never removed)"),
            ),
            _ => acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never detaches or deletes a disk; declare it or remove it by hand")),
        }
    }
}

fn hostpci_drift(acc: &mut Acc, cfg: &LiveConfig, key: &str, want: HostPci) {
    let Some(live) = cfg.get(key) else {
        acc.set_plain(key, None, want.to_wire(), STOP);
        return;
    };
    let Ok(lp) = HostPci::parse(live) else {
        acc.set_plain(key, Some(live), want.to_wire(), STOP);
        return;
    };
    let same_dev = match (&lp.device, &want.device) {
        (PciDevice::Host(l), PciDevice::Host(w)) => {
            l.iter().map(bdf_key).collect::<Vec<_>>() == w.iter().map(bdf_key).collect::<Vec<_>>()
        }
        _ => false,
    };
    let same_pcie = want.pcie.is_none_or(|w| lp.pcie.unwrap_or(false) == w);
    if !(same_dev && same_pcie) {
        // Unowned live tokens (x-vga, rombar, …) ride along verbatim.
        let next = HostPci {
            device: want.device,
            pcie: want.pcie.or(lp.pcie),
            extra: lp.extra,
        };
        acc.set_plain(key, Some(live), next.to_wire(), STOP);
    }
}

fn net_drift(acc: &mut Acc, cfg: &LiveConfig, slot: &str, n: &VmNic, want: QemuNet) {
    let Some(live) = cfg.get(slot) else {
        acc.set_plain(slot, None, want.to_wire(), STOP);
        return;
    };
    let ln = match QemuNet::parse(live) {
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
    let mut next = ln.clone();
    next.model = want.model.clone();
    next.bridge = want.bridge.clone();
    if want.mac.is_some() {
        next.mac = want.mac;
    }
    if want.tag.is_some() {
        next.tag = want.tag;
    }
    if let Some(r) = n.rate_limit.filter(|r| *r > 0.0)
        && !same_rate(ln.rate.as_deref(), r)
    {
        next.rate = want.rate.clone();
    }
    if want.firewall == Some(true) {
        next.firewall = Some(true);
    }
    // A MAC PVE assigned stays: the live form keeps it.
    if next != ln {
        acc.set_plain(slot, Some(live), next.to_wire(), STOP);
    }
}
