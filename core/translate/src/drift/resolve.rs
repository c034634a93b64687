//! Reference resolution (spec §11 "resolve refs"): ISO, DiskImage and
//! CTTemplate names to volume ids, a clone's TemplateVM to its vmid, and
//! SOPS dot-paths to cloud-init material. Errors name the reference, never
//! a value.

use proxops_model::manifest::{ArtifactSpec, CloudInitData, Spec};
use proxops_model::names::{Kind, NodeName, Ref, ResourceName, Vmid};
use proxops_model::repo::DesiredObject;
use proxops_model::secret::Secret;
use proxops_model::wire::{SshKeys, Volid};

use super::{Context, DriftError};

/// Identity keys a full clone inherits from its template that belong to the
/// template's own guest identity: cleared on a clone-backed VM unless its
/// manifest declares them (spec §6.8). `ipconfig<N>` is matched by prefix.
pub const CLONE_IDENTITY_KEYS: &[&str] = &[
    "ciuser",
    "sshkeys",
    "nameserver",
    "searchdomain",
    "cipassword",
    "cicustom",
];

fn artifact<'a>(
    obj: &DesiredObject,
    ctx: &'a Context<'_>,
    kind: Kind,
    name: &ResourceName,
    field: &str,
) -> Result<&'a ArtifactSpec, DriftError> {
    let r = Ref {
        kind,
        name: name.clone(),
    };
    let bad = |message: String| DriftError::Reference {
        object: obj.r#ref.clone(),
        field: field.to_owned(),
        message,
    };
    let target = ctx.cluster.get(&r).ok_or_else(|| {
        bad(format!(
            "{r} is not in cluster {}'s composition",
            ctx.cluster.name
        ))
    })?;
    target
        .spec
        .artifact()
        .ok_or_else(|| bad(format!("{r} is not a storage artifact")))
}

/// `<storage>:<content>/<filename>` of an ISO, DiskImage or CTTemplate.
pub(crate) fn artifact_volid(
    obj: &DesiredObject,
    ctx: &Context<'_>,
    kind: Kind,
    name: &ResourceName,
    field: &str,
) -> Result<Volid, DriftError> {
    let a = artifact(obj, ctx, kind, name, field)?;
    let content = kind.content_type().unwrap_or("iso");
    Ok(Volid::for_file(a.storage.clone(), content, &a.filename))
}

/// The vmid and node of the TemplateVM a clone-backed VM names.
pub fn resolve_clone_source(
    obj: &DesiredObject,
    ctx: &Context<'_>,
) -> Result<Option<(Vmid, NodeName)>, DriftError> {
    let Some(vm) = obj.spec.vm() else {
        return Ok(None);
    };
    let Some(source) = &vm.clone else {
        return Ok(None);
    };
    let bad = |message: String| DriftError::Reference {
        object: obj.r#ref.clone(),
        field: "spec.clone".into(),
        message,
    };
    let r = Ref {
        kind: Kind::TemplateVM,
        name: source.clone(),
    };
    let target = ctx.cluster.get(&r).ok_or_else(|| {
        bad(format!(
            "{r} is not in cluster {}'s composition",
            ctx.cluster.name
        ))
    })?;
    let Spec::TemplateVm(t) = &target.spec else {
        return Err(bad(format!("{r} is not a TemplateVM")));
    };
    if t.vmid == vm.vmid {
        return Err(bad(format!(
            "the template's vmid {} is this VM's own vmid",
            t.vmid
        )));
    }
    Ok(Some((t.vmid, t.node.clone())))
}

/// The `sshkeys` the manifest owns: `None` when not owned (no keys, or the
/// `["*"]` sentinel that leaves them to PVE).
pub(crate) fn ssh_keys(
    obj: &DesiredObject,
    ci: &CloudInitData,
    ctx: &Context<'_>,
) -> Result<Option<SshKeys>, DriftError> {
    let field = |f: &str| format!("spec.cloud-init-data.{f}");
    if !ci.ssh_key_refs.is_empty() {
        let mut lines = Vec::new();
        for r in &ci.ssh_key_refs {
            let missing = || DriftError::MissingSecret {
                object: obj.r#ref.clone(),
                field: field("ssh-key-refs"),
                reference: r.clone(),
            };
            let name = r.strip_prefix("cloud-init.ssh-keys.").ok_or_else(missing)?;
            let line = ctx
                .secrets
                .ssh_keys
                .get(name)
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .ok_or_else(missing)?;
            lines.push(line.to_owned());
        }
        let keys = SshKeys::from_text(&lines.join("\n")).map_err(|_| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: field("ssh-key-refs"),
            message: "a referenced secret is not an OpenSSH public key line \"<type> <base64 key> [comment]\"".into(),
        })?;
        return Ok(Some(keys));
    }
    let inline: Vec<&str> = ci
        .ssh_keys
        .iter()
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
        .collect();
    if inline.is_empty() || inline.contains(&"*") {
        return Ok(None);
    }
    SshKeys::from_text(&inline.join("\n"))
        .map(Some)
        .map_err(|e| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: field("ssh-keys"),
            message: e.to_string(),
        })
}

/// The cloud-init password a `ci-password-ref` names.
pub(crate) fn password(
    obj: &DesiredObject,
    ci: &CloudInitData,
    ctx: &Context<'_>,
) -> Result<Option<Secret>, DriftError> {
    let Some(r) = &ci.ci_password_ref else {
        return Ok(None);
    };
    let missing = || DriftError::MissingSecret {
        object: obj.r#ref.clone(),
        field: "spec.cloud-init-data.ci-password-ref".into(),
        reference: r.clone(),
    };
    let name = r
        .strip_prefix("cloud-init.passwords.")
        .ok_or_else(missing)?;
    let s = ctx
        .secrets
        .passwords
        .get(name)
        .filter(|s| !s.is_empty())
        .ok_or_else(missing)?;
    Ok(Some(s.clone()))
}
