//! Create, clone and download form values (spec §6.1, §8, §10, §14.1,
//! §22.1). Built from the same per-key translations drift compares with.

use crate::change::Params;
use proxops_model::manifest::{LxcSpec, PowerState, Spec};
use proxops_model::names::Vmid;
use proxops_model::repo::DesiredObject;
use proxops_model::wire::write_bool;

use super::owned::Form;
use super::{Context, DriftError, cloudinit, lxc, qemu, resolve};

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
            qemu::config(obj, vm, ctx, Form::Create, &mut p)?;
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
    qemu::config(obj, vm, ctx, Form::Clone, &mut p)?;
    extra(&mut p, &vm.extra);
    let declared = cloudinit::declared_identity(vm);
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
    if let Some(c) = &a.compression {
        p.push("compression", c.clone());
    }
    if let Some(v) = a.verify_certificates {
        p.push("verify-certificates", write_bool(v));
    }
    p
}

fn extra(p: &mut Params, extra: &std::collections::BTreeMap<String, String>) {
    for (k, v) in extra {
        p.push(k.clone(), v.clone());
    }
}

/// Shared with the LXC create: the `start` flag of a container.
pub(crate) fn lxc_start(obj: &DesiredObject, ct: &LxcSpec) -> &'static str {
    write_bool(matches!(obj.spec, Spec::Lxc(_)) && ct.state != Some(PowerState::Stopped))
}
