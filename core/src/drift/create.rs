//! Create, clone and download form values (spec §6.1, §8, §10, §14.1,
//! §22.1). Built from the same per-key translations drift compares with.

use crate::action::{ParamValue, Params};
use crate::manifest::{self, LxcSpec, PowerState, Spec, VmSpec};
use crate::names::Vmid;
use crate::repo::DesiredObject;
use crate::wire::write_bool;

use super::{Context, DriftError, desired_tags, lxc, qemu, resolve};

/// The form of `POST /nodes/{n}/qemu` (VM, TemplateVM) or
/// `POST /nodes/{n}/lxc` (LXC, TemplateCT). Clone-backed VMs use
/// `clone_params`.
pub fn create_params(obj: &DesiredObject, ctx: &Context<'_>) -> Result<Params, DriftError> {
    match &obj.spec {
        Spec::Vm(vm) | Spec::TemplateVm(vm) => {
            if vm.clone.is_some() {
                return Err(DriftError::WrongKind {
                    object: obj.r#ref.clone(),
                    message: "a clone-backed VM is created by clone_params, not create_params"
                        .into(),
                });
            }
            let mut p = Params::new();
            p.push("vmid", vm.vmid.to_string());
            qemu_config(obj, vm, ctx, &mut p, Mode::Create)?;
            // start=1 only for a VM desired started: never `true` [PROBE §20.4].
            let start = matches!(obj.spec, Spec::Vm(_)) && vm.state != Some(PowerState::Stopped);
            p.push("start", write_bool(start));
            extra(&mut p, &vm.extra);
            Ok(p)
        }
        Spec::Lxc(ct) | Spec::TemplateCt(ct) => lxc::create(obj, ct, ctx),
        _ => Err(DriftError::WrongKind {
            object: obj.r#ref.clone(),
            message: "storage artifacts are downloaded, not created: use download_params".into(),
        }),
    }
}

/// A clone-backed VM: the TemplateVM's vmid, the new guest's name, the
/// config write that follows the clone, and its `delete=` list.
///
/// The config write carries the VM's own values (memory, cpu, cores, NICs,
/// hardware scalars, options, tags with the ownership tag, declared
/// cloud-init data, description, `extra`) — never disks or `scsihw` (the
/// template owns the disk layout), and no volume-bearing slot (cloud-init
/// drive, CD drive, `efidisk0`, `tpmstate0`): the clone inherits those and a
/// create form over an inherited volume fails [PROBE §20.22], so they are
/// left to drift, which compares them with the clone's real config.
/// `delete` lists every identity key the manifest does not declare
/// (`ciuser`, `sshkeys`, `nameserver`, `searchdomain`, `cipassword`,
/// `cicustom`, `ipconfig0`–`ipconfig31`); deleting an absent known key is
/// accepted by PVE, and the list never meets the set keys [PROBE §20.19].
pub fn clone_params(
    obj: &DesiredObject,
    ctx: &Context<'_>,
) -> Result<(Vmid, String, Params, Vec<String>), DriftError> {
    let Some(vm) = obj.spec.vm().filter(|v| v.clone.is_some()) else {
        return Err(DriftError::WrongKind {
            object: obj.r#ref.clone(),
            message: "only a VM with spec.clone is cloned".into(),
        });
    };
    let (source, _) =
        resolve::resolve_clone_source(obj, ctx)?.ok_or_else(|| DriftError::WrongKind {
            object: obj.r#ref.clone(),
            message: "only a VM with spec.clone is cloned".into(),
        })?;
    let name = qemu::name(obj, vm);
    let mut p = Params::new();
    qemu_config(obj, vm, ctx, &mut p, Mode::Clone)?;
    extra(&mut p, &vm.extra);
    let declared = qemu::declared_identity(vm);
    let mut delete: Vec<String> = resolve::CLONE_IDENTITY_KEYS
        .iter()
        .map(|k| (*k).to_owned())
        .chain((0..=31).map(|n| format!("ipconfig{n}")))
        .filter(|k| !declared.contains(k) && !p.contains(k))
        .collect();
    delete.sort();
    Ok((source, name, p, delete))
}

/// `POST /nodes/{n}/storage/{s}/download-url`: `content`, `filename`, `url`,
/// and with a checksum `checksum` + `checksum-algorithm` (PVE's schema
/// spelling; the `checksum_algorithm` some older notes use is not in it).
/// A guest object has nothing to download: its form is empty.
pub fn download_params(obj: &DesiredObject) -> Params {
    let (Some(a), Some(content)) = (obj.spec.artifact(), obj.r#ref.kind.content_type()) else {
        return Params::new();
    };
    let mut p = Params::new();
    p.push("content", content);
    p.push("filename", a.filename.clone());
    p.push("url", a.url.clone());
    if let Some(c) = &a.checksum {
        p.push("checksum", c.value.to_ascii_lowercase());
        p.push("checksum-algorithm", c.algorithm.to_ascii_lowercase());
    }
    p
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Mode {
    Create,
    Clone,
}

fn extra(p: &mut Params, extra: &std::collections::BTreeMap<String, String>) {
    for (k, v) in extra {
        p.push(k.clone(), v.clone());
    }
}

fn qemu_config(
    obj: &DesiredObject,
    vm: &VmSpec,
    ctx: &Context<'_>,
    p: &mut Params,
    mode: Mode,
) -> Result<(), DriftError> {
    let hw = vm.hardware.clone().unwrap_or_default();
    p.push("name", qemu::name(obj, vm));
    p.push("memory", qemu::memory_mib(obj, vm)?.to_string());
    p.push("cpu", qemu::cpu(obj, vm)?);
    p.push("cores", vm.cpu.cores.to_string());
    if let Some(s) = hw.sockets {
        p.push("sockets", s.to_string());
    }
    if let Some(n) = hw.numa {
        p.push("numa", write_bool(n));
    }
    if let Some(m) = &hw.machine {
        p.push("machine", qemu::machine(m));
    }
    if let Some(b) = hw.bios {
        p.push("bios", b.as_str());
    }
    if let Some(d) = hw.display.as_ref().filter(|d| !d.trim().is_empty()) {
        p.push("vga", d.trim());
    }
    if mode == Mode::Create {
        if let Some(c) = qemu::scsihw(vm) {
            p.push("scsihw", c);
        }
        for (i, d) in vm.disks.iter().enumerate() {
            p.push(
                manifest::disk_slot(d, i),
                qemu::disk_create(obj, ctx, d, i)?.to_wire(),
            );
        }
        if let Some(e) = &hw.efi_disk {
            p.push("efidisk0", qemu::efidisk_create(e).to_wire());
        }
        if let Some(t) = &hw.tpm {
            p.push("tpmstate0", qemu::tpm_create(t).to_wire());
        }
    }
    if let Some(s) = hw.serial0.as_ref().filter(|s| !s.trim().is_empty()) {
        p.push("serial0", s.trim());
    }
    if mode == Mode::Create {
        if let Some(storage) = qemu::cloud_init_storage(vm) {
            p.push("ide2", format!("{storage}:cloudinit"));
        }
        if let Some((slot, d)) = qemu::cdrom(obj, ctx, vm)? {
            p.push(slot, d.to_wire());
        }
    }
    for (i, dev) in hw.pci_devices.iter().enumerate() {
        p.push(
            format!("hostpci{}", dev.slot.0),
            qemu::hostpci(obj, dev, i)?.to_wire(),
        );
    }
    for (i, n) in vm.networks.iter().enumerate() {
        let v = qemu::net(n).map_err(|message| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: format!("spec.networks[{i}].mac"),
            message,
        })?;
        p.push(manifest::vm_nic_slot(n, i), v.to_wire());
    }
    for (k, v, _) in qemu::option_values(vm) {
        p.push(k, v);
    }
    for (k, v) in qemu::cloud_init_values(obj, vm, ctx)? {
        match v {
            ParamValue::Plain(s) => p.push(k, s),
            ParamValue::Secret(s) => p.push_secret(k, s),
            r @ ParamValue::SecretRef(_) => p.0.push((k, r)),
        }
    }
    if let Some(d) = &vm.pve_description {
        p.push("description", d.clone());
    }
    p.push("tags", desired_tags(obj, &vm.tags)?.to_wire());
    Ok(())
}

/// Shared with the LXC create: the `start` flag of a container.
pub(crate) fn lxc_start(obj: &DesiredObject, ct: &LxcSpec) -> &'static str {
    write_bool(matches!(obj.spec, Spec::Lxc(_)) && ct.state != Some(PowerState::Stopped))
}
