//! `efidisk0` and `tpmstate0`: volume-bearing firmware slots. PVE sizes
//! both volumes itself, so only the pool and a few tokens are compared; a
//! change that needs a new volume (pool, TPM version) is an anomaly.

use crate::change::AnomalyType;
use crate::inverse::GuestCx;
use proxops_model::live::LiveConfig;
use proxops_model::manifest::{self, Bios, SecureBoot, Tpm, VmSpec};
use proxops_model::wire::{Bytes, DriveVolume, EfiDisk, TpmState, TpmVersion};

use super::Acc;
use super::owned::{Family, Form};
use super::qemu::{STOP, hardware};

/// `efidisk0` and `tpmstate0`, next to each other in the create form.
pub(crate) const FIRMWARE: Family<VmSpec> = Family {
    keys: "efidisk0, tpmstate0",
    field: "spec.hardware.efi-disk, spec.hardware.tpm",
    create: |i, form, p| {
        let hw = hardware(i.spec);
        if form == Form::Create {
            if let Some(e) = &hw.efi_disk {
                p.push("efidisk0", efidisk_create(e).to_wire());
            }
            if let Some(t) = &hw.tpm {
                p.push(TpmState::KEY, tpm_create(t).to_wire());
            }
        }
        Ok(())
    },
    drift: |i, cfg, acc| {
        let hw = hardware(i.spec);
        if let Some(e) = &hw.efi_disk {
            efidisk_drift(acc, cfg, e);
        }
        if let Some(t) = &hw.tpm {
            tpm_drift(acc, cfg, t);
        }
        Ok(())
    },
    adopt: |cx, vm| adopt_efidisk(cx, vm) & adopt_tpm(cx, vm),
};

/// `efidisk0=<storage>:1[,efitype=..][,pre-enrolled-keys=0|1]`. PVE sizes
/// the EFI vars volume from the OVMF template whatever number is sent (the
/// web UI sends `1`); the manifest's `size` is therefore not sent.
fn efidisk_create(e: &manifest::EfiDisk) -> EfiDisk {
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

fn tpm_version(t: &Tpm) -> TpmVersion {
    if t.version.as_deref() == Some("v1.2") {
        TpmVersion::V1_2
    } else {
        TpmVersion::V2_0
    }
}

/// `tpmstate0=<storage>:1,version=v2.0` (PVE sizes the state itself).
fn tpm_create(t: &Tpm) -> TpmState {
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
    // Size is not compared: PVE sizes the volume itself (a tiny size is
    // clamped to 4M). `efitype` picks the firmware and its VARS layout
    // (qemu-server `QemuServer/OVMF.pm` `get_ovmf_files`; absent is 2m):
    // changing it needs a new EFI disk, so a difference is for a person.
    let live_type = le.efitype.as_deref().unwrap_or("2m");
    if let Some(t) = &want.efitype
        && t != live_type
    {
        acc.anomaly(
            AnomalyType::NeedsPerson,
            Some("efidisk0"),
            format!("efidisk0 is efitype {live_type} on PVE but the manifest asks for {t}: the EFI type is fixed when the EFI disk is created (its variables store has that layout), so writing it would change nothing; remove efidisk0 by hand so ProxOps creates it anew (the EFI variables are lost), or set template: {live_type}"),
        );
    }
    // `pre-enrolled-keys` only picks the OVMF VARS template when the EFI
    // disk is created (qemu-server `QemuServer/OVMF.pm`): writing it on an
    // existing disk enrols nothing, so a change is for a person.
    if let Some(w) = want.pre_enrolled_keys
        && le.pre_enrolled_keys.unwrap_or(false) != w
    {
        acc.anomaly(
            AnomalyType::NeedsPerson,
            Some("efidisk0"),
            secure_boot_message(w),
        );
    }
}

fn secure_boot_message(enable: bool) -> String {
    if enable {
        "the manifest turns Secure Boot on (pre-enrolled-keys) but the EFI disk exists without the keys: PVE only enrols them when the EFI disk is created, so writing the flag would change nothing. Enrol the keys in the guest's firmware setup, or remove efidisk0 by hand so ProxOps creates it with the keys (the EFI variables are lost)".to_owned()
    } else {
        "the manifest turns Secure Boot off (pre-enrolled-keys) but the EFI disk holds enrolled keys: PVE only chooses them when the EFI disk is created, so writing the flag would change nothing. Disable Secure Boot in the guest's firmware setup, or remove efidisk0 by hand so ProxOps creates it without keys (the EFI variables are lost)".to_owned()
    }
}

fn tpm_drift(acc: &mut Acc, cfg: &LiveConfig, t: &Tpm) {
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

/// An EFI disk is declared only beside `bios: ovmf` (adopted before it).
fn adopt_efidisk(cx: &mut GuestCx<'_>, vm: &mut VmSpec) -> bool {
    let Some(e) = cx.take("efidisk0") else {
        return true;
    };
    let ovmf = hardware(vm).bios == Some(Bios::Ovmf);
    match EfiDisk::parse(e) {
        Ok(ed) if ovmf => match ed.volume.storage() {
            Some(st) => {
                crate::inverse::section(&mut vm.hardware).efi_disk = Some(manifest::EfiDisk {
                    storage: st.clone(),
                    size: None,
                    template: ed.efitype.clone(),
                    secure_boot: ed.pre_enrolled_keys.map(|b| {
                        if b {
                            SecureBoot::Enabled
                        } else {
                            SecureBoot::Disabled
                        }
                    }),
                });
                cx.token_gap("efidisk0", &ed.extra, "EFI disk options other than efitype and pre-enrolled-keys are not modelled; PVE keeps them");
            }
            None => cx.gap("efidisk0", Some(e), "not a storage volume: not adopted"),
        },
        Ok(_) => cx.gap(
            "efidisk0",
            Some(e),
            "an EFI disk without bios ovmf cannot be declared: not adopted",
        ),
        Err(err) => cx.gap(
            "efidisk0",
            Some(e),
            format!("unreadable ({err}): not adopted"),
        ),
    }
    true
}

fn adopt_tpm(cx: &mut GuestCx<'_>, vm: &mut VmSpec) -> bool {
    let Some(t) = cx.take(TpmState::KEY) else {
        return true;
    };
    match TpmState::parse(t) {
        Ok(ts) => match ts.volume.storage() {
            Some(st) => {
                let version = ts.version.unwrap_or(TpmVersion::V1_2);
                crate::inverse::section(&mut vm.hardware).tpm = Some(Tpm {
                    storage: st.clone(),
                    version: Some(version.as_str().to_owned()),
                });
                cx.token_gap(
                    TpmState::KEY,
                    &ts.extra,
                    "TPM options other than version are not modelled; PVE keeps them",
                );
            }
            None => cx.gap(TpmState::KEY, Some(t), "not a storage volume: not adopted"),
        },
        Err(err) => cx.gap(
            TpmState::KEY,
            Some(t),
            format!("unreadable ({err}): not adopted"),
        ),
    }
    true
}
