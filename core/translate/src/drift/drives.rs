//! The qemu drive bus (`scsiN`, `virtioN`, `sataN`, `ideN`): disks with
//! their controller (`scsihw`), the cloud-init drive (created on `ide2`,
//! found on any bus) and the CD drive — create form, overlay on the live
//! value, and adoption.
//!
//! The three families share one slot namespace, so one adoption scan reads
//! every drive key and sorts it into disk, cloud-init drive or CD drive;
//! the cloud-init and CD families adopt nothing of their own. A live drive
//! no family owns is a live-only slot: never detached, never deleted.

use std::collections::BTreeSet;

use crate::change::AnomalyType;
use crate::inverse::GuestCx;
use proxops_model::live::LiveConfig;
use proxops_model::manifest::{
    self, Aio, CdMedia, Cdrom, CdromIntent, CloudInitDrive, Discard, VmDisk, VmSpec,
};
use proxops_model::names::{Kind, StorageId};
use proxops_model::units::Quantity;
use proxops_model::wire::{self, Bytes, Drive, DriveVolume, Media, PropToken};

use super::owned::{Family, Form, Input};
use super::qemu::{STOP, hardware};
use super::resolve::artifact_volid;
use super::{Acc, DriftError};

/// Disks and their controller; a clone's disks belong to its template.
pub(crate) const DISKS: Family<VmSpec> = Family {
    keys: "scsihw, scsiN, virtioN, sataN, ideN",
    field: "spec.disks",
    create: |i, form, p| {
        if form == Form::Create {
            if let Some(c) = scsihw(i.spec) {
                p.push("scsihw", c);
            }
            for (n, d) in i.spec.disks.iter().enumerate() {
                p.push(manifest::disk_slot(d, n), disk_create(i, d, n)?.to_wire());
            }
        }
        Ok(())
    },
    drift: disks_drift,
    adopt: adopt_drives,
};

/// The cloud-init drive: created as `ide2: <storage>:cloudinit`; a live one
/// on any bus and slot is the VM's one cloud-init drive (real PVE 9
/// configs put it on `scsi1` or `ide0`; PVE refuses a second, qemu-server
/// `API2/Qemu.pm` `create_disks`), kept where it is.
pub(crate) const CLOUD_INIT_DRIVE: Family<VmSpec> = Family {
    keys: "ide2 (cloud-init drive)",
    field: "spec.hardware.cloud-init",
    create: |i, form, p| {
        if form == Form::Create
            && let Some(storage) = cloud_init_storage(i.spec)
        {
            p.push("ide2", format!("{storage}:cloudinit"));
        }
        Ok(())
    },
    drift: |i, cfg, acc| {
        if let Some(storage) = &cloud_init_storage(i.spec) {
            cloud_init_drift(acc, cfg, storage);
        }
        Ok(())
    },
    adopt: |_, _| true,
};

/// The CD drive in its three states: not owned, detached, an ISO.
pub(crate) const CDROM: Family<VmSpec> = Family {
    keys: "ide2/ide3 (CD drive)",
    field: "spec.hardware.cdrom",
    create: |i, form, p| {
        if form == Form::Create
            && let Some((slot, d)) = cdrom(i)?
        {
            p.push(slot, d.to_wire());
        }
        Ok(())
    },
    drift: |i, cfg, acc| {
        if let Some((slot, want)) = cdrom(i)? {
            let pinned = hardware(i.spec)
                .cdrom
                .as_ref()
                .and_then(|c| c.media)
                .is_some();
            cdrom_drift(acc, cfg, slot, &want, pinned);
        }
        Ok(())
    },
    adopt: |_, _| true,
};

// ------------------------------------------------------------ desired values

/// `scsihw`: the first disk that declares a controller.
pub(crate) fn scsihw(vm: &VmSpec) -> Option<String> {
    vm.disks.iter().find_map(|d| d.controller.clone())
}

/// A disk's create form: `<pool>:<GiB>[,opts]` or `<pool>:0,import-from=<volid>`.
fn disk_create(i: &Input<'_, VmSpec>, d: &VmDisk, index: usize) -> Result<Drive, DriftError> {
    let size = match (&d.image, d.size) {
        (Some(_), _) => Bytes(0),
        (None, Some(q)) => Bytes(q.bytes()),
        (None, None) => {
            return Err(i.unsupported(
                format!("spec.disks[{index}].size"),
                "size is required unless image is set".into(),
            ));
        }
    };
    let mut drive = Drive::new(DriveVolume::Create {
        storage: d.storage.clone(),
        size,
    });
    if let Some(img) = &d.image {
        drive.import_from = Some(artifact_volid(
            i.obj,
            i.ctx,
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

fn discard(d: Discard) -> wire::Discard {
    match d {
        Discard::On => wire::Discard::On,
        Discard::Ignore => wire::Discard::Ignore,
    }
}

fn aio(a: Aio) -> wire::Aio {
    match a {
        Aio::Native => wire::Aio::Native,
        Aio::Threads => wire::Aio::Threads,
        Aio::IoUring => wire::Aio::IoUring,
    }
}

/// The cloud-init drive's storage when enabled.
pub(crate) fn cloud_init_storage(vm: &VmSpec) -> Option<StorageId> {
    hardware(vm)
        .cloud_init
        .as_ref()
        .filter(|c| c.enabled)
        .and_then(|c| c.storage.clone())
}

/// The owned CD drive: slot and value, or `None` when not owned.
fn cdrom(i: &Input<'_, VmSpec>) -> Result<Option<(&'static str, Drive)>, DriftError> {
    let Some(c) = hardware(i.spec).cdrom.clone() else {
        return Ok(None);
    };
    let media = match c.media {
        Some(CdMedia::Disk) => Media::Disk,
        _ => Media::Cdrom,
    };
    let slot = manifest::cdrom_slot(i.spec);
    match c.intent() {
        CdromIntent::NotOwned => Ok(None),
        CdromIntent::Detach => {
            let mut d = Drive::new(DriveVolume::None);
            d.media = Some(Media::Cdrom);
            Ok(Some((slot, d)))
        }
        CdromIntent::Attach(iso) => {
            let volid = artifact_volid(i.obj, i.ctx, Kind::ISO, &iso, "spec.hardware.cdrom.iso")?;
            let mut d = Drive::new(DriveVolume::Volume(volid));
            d.media = Some(media);
            Ok(Some((slot, d)))
        }
    }
}

/// The live cloud-init drive, on whichever bus and slot PVE holds it:
/// its slot and value (the first in key order; PVE allows one).
pub(crate) fn live_cloud_init(cfg: &LiveConfig) -> Option<(&str, Drive)> {
    cfg.values.iter().find_map(|(key, value)| {
        if !is_disk_key(key) {
            return None;
        }
        Drive::parse(value)
            .ok()
            .filter(Drive::is_cloudinit)
            .map(|d| (key, d))
    })
}

/// Every drive slot a family owns (the live-only check spares them); the
/// cloud-init drive's is its live slot, or `ide2` where it will be created.
fn owned_drive_slots(vm: &VmSpec, cfg: &LiveConfig) -> BTreeSet<String> {
    let mut owned: BTreeSet<String> = vm
        .disks
        .iter()
        .enumerate()
        .map(|(n, d)| manifest::disk_slot(d, n))
        .collect();
    if cloud_init_storage(vm).is_some() {
        let slot = live_cloud_init(cfg).map_or("ide2", |(slot, _)| slot);
        owned.insert(slot.to_owned());
    }
    if hardware(vm)
        .cdrom
        .as_ref()
        .is_some_and(|c| c.intent() != CdromIntent::NotOwned)
    {
        owned.insert(manifest::cdrom_slot(vm).to_owned());
    }
    owned
}

// ------------------------------------------------------------ drift

fn disks_drift(i: &Input<'_, VmSpec>, cfg: &LiveConfig, acc: &mut Acc) -> Result<(), DriftError> {
    if i.spec.clone.is_some() {
        return Ok(());
    }
    if let Some(c) = scsihw(i.spec)
        && cfg.get("scsihw").unwrap_or("lsi") != c
    {
        acc.set_plain("scsihw", cfg.get("scsihw"), c, STOP);
    }
    for (n, d) in i.spec.disks.iter().enumerate() {
        let slot = manifest::disk_slot(d, n);
        let want = disk_create(i, d, n)?;
        disk_drift(acc, cfg, &slot, d, want);
    }
    live_only_drives(acc, cfg, &owned_drive_slots(i.spec, cfg));
    Ok(())
}

fn is_disk_key(k: &str) -> bool {
    manifest::DISK_BUSES.iter().any(|(bus, _)| {
        k.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
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
    // A disk made from an image takes the image's size: only a declared
    // size is owned. Larger grows (`resize`), smaller is a `shrink` anomaly.
    if d.image.is_none()
        && let (Some(ls), Some(ds)) = (ld.size, d.size)
    {
        acc.resize(slot, ls, Bytes(ds.bytes()));
    }
    // Option tokens converge through the live form: same volume, new tokens [PROBE].
    if let Some(next) = disk_overlay(ld, d) {
        acc.set_plain(slot, Some(live), next.to_wire(), STOP);
    }
}

/// The live drive with the owned option tokens set, everything else kept;
/// `None` when that is the live drive itself. Each token below is set only
/// where it differs from the live one, so any set changes the drive.
fn disk_overlay(mut next: Drive, d: &VmDisk) -> Option<Drive> {
    let mut changed = false;
    if let Some(w) = d.iothread
        && next.iothread.unwrap_or(false) != w
    {
        next.iothread = Some(w);
        changed = true;
    }
    if let Some(w) = d.discard.map(discard)
        && next.discard.unwrap_or(wire::Discard::Ignore) != w
    {
        next.discard = Some(w);
        changed = true;
    }
    if let Some(w) = d.ssd
        && next.ssd != Some(w)
    {
        next.ssd = Some(w);
        changed = true;
    }
    if let Some(w) = d.aio.map(aio)
        && next.aio != Some(w)
    {
        next.aio = Some(w);
        changed = true;
    }
    changed.then_some(next)
}

/// A live cloud-init drive anywhere satisfies the manifest (its slot is
/// PVE's); only when there is none is one created, on `ide2`. Never a
/// second: PVE refuses it ("cloud-init drive is already attached").
fn cloud_init_drift(acc: &mut Acc, cfg: &LiveConfig, storage: &StorageId) {
    if let Some((slot, ld)) = live_cloud_init(cfg) {
        if ld.volume.storage() != Some(storage) {
            // Re-sending the create form over a live cloud-init volume fails
            // ("already exists") [PROBE]; another pool is left to a person.
            acc.anomaly(AnomalyType::DataLoss, Some(slot), format!("the cloud-init drive on {slot} lives on another storage than {storage}: remove it by hand so ProxOps can create it there"));
        }
        return;
    }
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
    } else {
        acc.anomaly(AnomalyType::NeedsPerson, Some("ide2"), "ide2 holds another drive on PVE but the manifest puts the cloud-init drive there: empty ide2 by hand".into());
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
                format!("{key} holds a cloud-init drive the manifest does not declare (hardware.cloud-init): it stays PVE's (never removed)"),
            ),
            _ => acc.anomaly(AnomalyType::LiveOnlySlot, Some(key), format!("{key} is on PVE but not in the manifest: ProxOps never detaches or deletes a disk; declare it or remove it by hand")),
        }
    }
}

// ------------------------------------------------------------ adopt

/// What the drive scan found besides disks.
#[derive(Default)]
struct Scan {
    disks: Vec<VmDisk>,
    cloud_init: Option<CloudInitDrive>,
    cd: Option<(String, Cdrom)>,
}

/// Every drive key, in bus order then slot number, sorted into disks, the
/// cloud-init drive and the CD drive; then `scsihw` onto the first disk.
fn adopt_drives(cx: &mut GuestCx<'_>, vm: &mut VmSpec) -> bool {
    let mut drive_keys: Vec<String> = Vec::new();
    for (bus, _) in manifest::DISK_BUSES {
        for (_, key, _) in cx.cfg.slots(bus) {
            drive_keys.push(key.to_owned());
        }
    }
    let mut scan = Scan::default();
    for key in drive_keys {
        let Some(v) = cx.take(&key) else { continue };
        match Drive::parse(v) {
            Ok(d) => adopt_drive(cx, &mut scan, &key, v, &d),
            Err(e) => cx.gap(
                &key,
                Some(v),
                format!("unreadable drive ({e}): not adopted"),
            ),
        }
    }
    adopt_scsihw(cx, &mut scan.disks);
    let cloud_init_on_ide2 = scan.cloud_init.is_some();
    if let Some(ci) = scan.cloud_init {
        crate::inverse::section(&mut vm.hardware).cloud_init = Some(ci);
    }
    if let Some((slot, c)) = scan.cd {
        let want_slot = if cloud_init_on_ide2 { "ide3" } else { "ide2" };
        if slot == want_slot {
            crate::inverse::section(&mut vm.hardware).cdrom = Some(c);
        } else {
            let v = cx.cfg.get(&slot);
            cx.gap(
                &slot,
                v,
                format!("ProxOps puts the CD drive on {want_slot}: this one is left to PVE"),
            );
        }
    }
    vm.disks = scan.disks;
    true
}

fn adopt_drive(cx: &mut GuestCx<'_>, scan: &mut Scan, key: &str, v: &str, d: &Drive) {
    if d.is_cloudinit() {
        // One per VM, on any bus (qemu-server `API2/Qemu.pm` `create_disks`).
        if scan.cloud_init.is_none()
            && let Some(storage) = d.volume.storage()
        {
            scan.cloud_init = Some(CloudInitDrive {
                enabled: true,
                storage: Some(storage.clone()),
                size: None,
            });
            return;
        }
        cx.gap(key, Some(v), "a second cloud-init drive (or one on no storage): ProxOps models one per VM, so this slot stays PVE's (plans show it as a live-only slot)");
        return;
    }
    if d.is_cdrom() || d.iso_file().is_some() || d.volume == DriveVolume::None {
        adopt_cd(cx, scan, key, v, d);
        return;
    }
    let DriveVolume::Volume(vol) = &d.volume else {
        cx.gap(key, Some(v), "not a storage volume (a device path or passthrough): not modelled; plans show it as a live-only slot");
        return;
    };
    let size = match d.size.map(|b| b.get()).or_else(|| cx.listed_size(vol)) {
        Some(s) => Some(Quantity::from_bytes(s)),
        None => {
            cx.gap(key, Some(v), "the volume size is in neither the config nor the storage listing: set spec.disks size by hand");
            None
        }
    };
    let is_virtio = key.starts_with("virtio");
    scan.disks.push(VmDisk {
        storage: vol.storage.clone(),
        size,
        image: None,
        interface: Some(key.to_owned()),
        controller: None,
        iothread: d.iothread,
        discard: d.discard.map(|x| match x {
            wire::Discard::On => Discard::On,
            wire::Discard::Ignore => Discard::Ignore,
        }),
        ssd: if is_virtio { None } else { d.ssd },
        aio: d.aio.map(|a| match a {
            wire::Aio::Native => Aio::Native,
            wire::Aio::Threads => Aio::Threads,
            wire::Aio::IoUring => Aio::IoUring,
        }),
    });
    if is_virtio && d.ssd.is_some() {
        cx.gap(
            key,
            Some(v),
            "ssd on a virtio disk is not valid in a manifest: left out",
        );
    }
    let mut rest: Vec<PropToken> = d.extra.clone();
    if let Some(m) = d.media.filter(|m| *m != Media::Disk) {
        rest.push(PropToken::Pair {
            key: "media".into(),
            value: m.as_str().into(),
        });
    }
    if !rest.is_empty() {
        cx.token_gap(key, &rest, "drive options other than iothread, discard, ssd and aio (cache, backup, replicate, serial, …) are not modelled; PVE keeps them");
    }
}

/// A CD drive on IDE holding nothing or an adopted ISO; anything else stays PVE's.
fn adopt_cd(cx: &mut GuestCx<'_>, scan: &mut Scan, key: &str, v: &str, d: &Drive) {
    if !key.starts_with("ide") {
        cx.gap(key, Some(v), "a CD drive outside IDE is not modelled: the slot stays PVE's (plans show it as a live-only slot)");
        return;
    }
    let iso = match &d.volume {
        DriveVolume::None => Some("none".to_owned()),
        DriveVolume::Volume(vol) => match d.iso_file() {
            Some(f) => match cx.shared.isos.get(&(vol.storage.clone(), f.to_owned())) {
                Some(n) => Some(n.to_string()),
                None => {
                    cx.gap(key, Some(v), "the ISO is in no adopted ISO manifest (not in a storage listing, or not a valid ISO file name): the CD drive is left to PVE");
                    None
                }
            },
            None => {
                cx.gap(
                    key,
                    Some(v),
                    "a CD drive holding something other than an ISO: left to PVE",
                );
                None
            }
        },
        _ => {
            cx.gap(key, Some(v), "a physical or unusual CD drive: left to PVE");
            None
        }
    };
    let Some(iso) = iso else { return };
    if scan.cd.is_some() {
        cx.gap(
            key,
            Some(v),
            "a second CD drive: ProxOps owns one (ide2, or ide3 beside cloud-init); left to PVE",
        );
    } else {
        scan.cd = Some((
            key.to_owned(),
            Cdrom {
                iso: Some(iso),
                media: None,
            },
        ));
    }
}

fn adopt_scsihw(cx: &mut GuestCx<'_>, disks: &mut [VmDisk]) {
    let Some(c) = cx.take("scsihw") else { return };
    if !manifest::SCSI_CONTROLLERS.contains(&c.trim()) {
        cx.gap(
            "scsihw",
            Some(c),
            "a SCSI controller ProxOps does not know: PVE keeps it",
        );
    } else if let Some(first) = disks.first_mut() {
        first.controller = Some(c.trim().to_owned());
    } else {
        cx.gap(
            "scsihw",
            Some(c),
            "no disk to carry the controller: not adopted",
        );
    }
}
