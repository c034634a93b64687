//! Desired state → PVE form values, and desired vs live `/config` drift
//! (spec §6–§12, §14.1, §22.1–§22.5).
//!
//! This module owns three pure translations of one desired guest:
//! - `create_params` / `clone_params` / `download_params`: the form values
//!   of the create, clone and download requests;
//! - `guest_drift`: which owned PVE keys differ from a live `/config`, the
//!   form values and `delete=` list that converge them, the impact on a
//!   running guest, and the anomalies ProxOps refuses to act on.
//!
//! Create and drift share one translation per key, so a guest created from
//! `create_params` and read back from PVE shows no drift.
//!
//! **Architecture Invariant:** drift never writes what would lose data:
//! a live volume on another pool or of another size, a live-only slot, a
//! template that should be a guest, a create-only option. Those become
//! anomalies, never `delete=` or create-form writes. Secrets are carried as
//! `Secret` and shown as `<secret>`; no error text ever holds one. This
//! module does no I/O and reads no clock.

// Each translation stays short enough to read whole (core/clippy.toml).
#![warn(clippy::too_many_lines)]

mod cloudinit;
mod codec;
mod create;
mod drives;
mod efi;
mod hotplug;
mod lxc;
mod mounts;
mod nic;
mod owned;
mod pci;
mod qemu;
mod resolve;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::OnceLock;

use crate::change::{Anomaly, AnomalyType, Change, Impact, ParamValue, Params, Target};
use proxops_model::live::{GuestType, LiveConfig, LiveGuest, Power};
use proxops_model::names::{NodeName, Ref, Vmid};
use proxops_model::repo::{ClusterDesired, DesiredObject};
use proxops_model::secret::Secret;
use proxops_model::wire::Bytes;

pub use codec::{Absent, Doc};
pub use create::{clone_params, create_params, download_params};
pub use owned::OwnedKey;
pub use resolve::{CLONE_IDENTITY_KEYS, resolve_clone_source};

/// A cloud-init identity key a clone inherits from its template and the
/// drift clears unless the manifest declares it (`ciuser`, `sshkeys`,
/// `ipconfigN`, …): the only keys ProxOps ever sends in a `delete=` list.
pub fn is_clone_identity_key(key: &str) -> bool {
    cloudinit::is_identity_key(key)
}

/// The keys and slot families a VM or TemplateVM owns, in create-form
/// order: the table create, drift and adoption fold over.
pub fn qemu_owned_keys() -> Vec<OwnedKey> {
    owned::listing(qemu::KEYS)
}

/// The keys and slot families an LXC or TemplateCT owns, in create-form
/// order.
pub fn lxc_owned_keys() -> Vec<OwnedKey> {
    owned::listing(lxc::KEYS)
}

/// Each create or clone form change of a guest of `kind` with the manifest
/// field that asks for it (`memory` ← `spec.memory`, an extra key ←
/// `spec.extra.<key>`), where one row of the kind's table owns the key.
pub fn with_create_paths(
    kind: proxops_model::names::Kind,
    extra: &BTreeMap<String, String>,
    mut changes: Vec<Change>,
) -> Vec<Change> {
    let path = |key: &str| -> Option<String> {
        if extra.contains_key(key) {
            return Some(format!("spec.extra.{key}"));
        }
        if key == "vmid" {
            return Some("spec.vmid".to_owned());
        }
        static QEMU: OnceLock<owned::KeyIndex> = OnceLock::new();
        static LXC: OnceLock<owned::KeyIndex> = OnceLock::new();
        let field = if kind.is_qemu() {
            QEMU.get_or_init(|| owned::KeyIndex::of(qemu::KEYS))
                .create_path(key)
        } else {
            LXC.get_or_init(|| owned::KeyIndex::of(lxc::KEYS))
                .create_path(key)
        };
        field.filter(|f| *f != key).map(str::to_owned)
    };
    for c in &mut changes {
        c.path = path(&c.field);
    }
    changes
}

/// Adoption of a VM: every row of the qemu table, backwards.
pub(crate) fn adopt_vm(
    cx: &mut crate::inverse::GuestCx<'_>,
    vm: &mut proxops_model::manifest::VmSpec,
) {
    owned::adopt(qemu::KEYS, cx, vm);
}

/// Adoption of a container; `false` when it cannot be declared.
pub(crate) fn adopt_ct(
    cx: &mut crate::inverse::GuestCx<'_>,
    ct: &mut proxops_model::manifest::LxcSpec,
) -> bool {
    owned::adopt(lxc::KEYS, cx, ct)
}

/// Cloud-init material read from the cluster's SOPS file (spec §4.5).
/// `Debug` shows names only.
#[derive(Clone, Default)]
pub struct CloudInitSecrets {
    /// `cloud-init.ssh-keys.<name>` → one OpenSSH public key line.
    pub ssh_keys: BTreeMap<String, String>,
    /// `cloud-init.passwords.<name>` → the password.
    pub passwords: BTreeMap<String, Secret>,
}

impl std::fmt::Debug for CloudInitSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudInitSecrets")
            .field("ssh_keys", &self.ssh_keys.keys().collect::<Vec<_>>())
            .field("passwords", &self.passwords.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Every cloud-init secret reference of a cluster's desired state that
/// `secrets` cannot resolve (missing, empty, or not of the form
/// `cloud-init.ssh-keys.<name>` / `cloud-init.passwords.<name>`), one
/// diagnostic each, naming the file, the field and the reference, never a
/// value. Any of them refuses the whole cluster for the cycle (spec §4.5):
/// planning the rest would prune and reconfigure around a guest whose
/// secrets are not there. Sorted.
pub fn unresolved_secrets(
    desired: &ClusterDesired,
    secrets: &CloudInitSecrets,
) -> Vec<proxops_model::diag::Diagnostic> {
    let mut out = Vec::new();
    for obj in desired.objects.values() {
        for (field, reference, prefix) in secret_refs(obj) {
            let found = reference.strip_prefix(prefix).is_some_and(|name| {
                if prefix == "cloud-init.passwords." {
                    secrets.passwords.get(name).is_some_and(|s| !s.is_empty())
                } else {
                    secrets
                        .ssh_keys
                        .get(name)
                        .is_some_and(|s| !s.trim().is_empty())
                }
            });
            let unreadable = found && prefix == "cloud-init.ssh-keys." && {
                let name = reference.strip_prefix(prefix).unwrap_or_default();
                secrets.ssh_keys.get(name).is_some_and(|k| {
                    proxops_model::wire::SshKey::parse(k.trim())
                        .map_err(|e| e.to_string())
                        .and_then(|key| key.check_blob())
                        .is_err()
                })
            };
            if unreadable {
                out.push(
                    proxops_model::diag::Diagnostic::file(
                        &obj.file,
                        format!(
                            "{}: secret {reference:?} in the cluster's SOPS file is not a public key PVE reads (PVE checks each key with ssh-keygen and refuses the whole write, which would leave a clone with its template's config): the cluster does nothing this cycle",
                            obj.r#ref
                        ),
                    )
                    .with_field(format!("spec.cloud-init-data.{field}")),
                );
            }
            if !found {
                out.push(
                    proxops_model::diag::Diagnostic::file(
                        &obj.file,
                        format!(
                            "{}: secret {reference:?} is missing or empty in the cluster's SOPS file (cloud-init section): the cluster does nothing this cycle",
                            obj.r#ref
                        ),
                    )
                    .with_field(format!("spec.cloud-init-data.{field}")),
                );
            }
        }
    }
    out.sort();
    out
}

/// Every cloud-init secret reference of a cluster that has no
/// `secrets-file`, one diagnostic each: with no SOPS file none of them can
/// resolve, and the fix is the missing key in the cluster's configuration,
/// not the SOPS file's content (which [`unresolved_secrets`] would point
/// at). Sorted; empty when nothing references a secret.
pub fn secrets_without_file(
    desired: &ClusterDesired,
    cluster: &str,
) -> Vec<proxops_model::diag::Diagnostic> {
    let mut out: Vec<_> = desired
        .objects
        .values()
        .flat_map(|obj| object_secrets_without_file(obj, cluster))
        .collect();
    out.sort();
    out
}

/// [`secrets_without_file`] for one object (unsorted): each diagnostic
/// belongs to `obj`, whose document a caller may locate.
pub fn object_secrets_without_file(
    obj: &proxops_model::repo::DesiredObject,
    cluster: &str,
) -> Vec<proxops_model::diag::Diagnostic> {
    secret_refs(obj)
        .map(|(field, reference, _)| {
            proxops_model::diag::Diagnostic::file(
                &obj.file,
                format!(
                    "{}: secret {reference:?} is read from the cluster's SOPS file, and cluster {cluster:?} has no secrets-file: set pve.clusters.{cluster}.secrets-file in its config.yaml (docs/credentials.md), or write the key inline in ssh-keys",
                    obj.r#ref
                ),
            )
            .with_field(format!("spec.cloud-init-data.{field}"))
        })
        .collect()
}

/// A guest's cloud-init secret references: (field under
/// `spec.cloud-init-data`, reference, the SOPS section it must name).
fn secret_refs(
    obj: &proxops_model::repo::DesiredObject,
) -> impl Iterator<Item = (String, &String, &'static str)> {
    let ci = obj.spec.vm().and_then(|v| v.cloud_init_data.as_ref());
    let keys = ci
        .into_iter()
        .flat_map(|ci| ci.ssh_key_refs.iter().enumerate())
        .map(|(i, r)| (format!("ssh-key-refs[{i}]"), r, "cloud-init.ssh-keys."));
    let passwords = ci
        .into_iter()
        .flat_map(|ci| ci.ci_password_ref.iter())
        .map(|r| ("ci-password-ref".to_owned(), r, "cloud-init.passwords."));
    keys.chain(passwords)
}

/// What a desired object's references resolve against: its own cluster's
/// composition (ISO, DiskImage, CTTemplate, TemplateVM) and SOPS material.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub cluster: &'a ClusterDesired,
    pub secrets: &'a CloudInitSecrets,
}

/// The difference between one desired guest and its live `/config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// One entry per PVE key written or deleted, sorted by key; secret
    /// values are shown as `<secret>`.
    pub changes: Vec<Change>,
    /// The form values to write, sorted by key (live forms where a live
    /// volume or MAC must be kept).
    pub params: Params,
    /// Keys for `delete=`; never overlaps `params` [PROBE §20.19].
    pub delete: Vec<String>,
    /// The largest impact of any change; `Live` when nothing changes or the
    /// guest is not running.
    pub impact: Impact,
    /// What ProxOps will not do by itself, sorted.
    pub anomalies: Vec<Anomaly>,
    /// Disks and mount points to grow, one `PUT …/resize` each, sorted by
    /// key. Never in `params`: a config write cannot grow a live volume.
    pub grows: Vec<DiskGrowth>,
}

impl Drift {
    /// True when nothing is to be written, deleted or grown.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty() && self.delete.is_empty() && self.grows.is_empty()
    }
}

/// One live volume smaller than the manifest asks: PVE grows it online
/// (`PUT …/resize`, qemu-server and pve-container `resize_vm`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DiskGrowth {
    /// The config key: `scsi0`, `virtio1`, `rootfs`, `mp0`, …
    pub disk: String,
    pub from: Bytes,
    pub to: Bytes,
}

/// Why a desired object could not be translated. The text names the object,
/// the field and the reference, never a secret value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DriftError {
    /// A reference to another object that is not in the cluster's
    /// composition, or is of the wrong kind.
    #[error("{object}: {field}: {message}")]
    Reference {
        object: Ref,
        field: String,
        message: String,
    },
    /// A SOPS reference with no (or an empty) value.
    #[error(
        "{object}: {field}: secret {reference:?} is missing or empty in the cluster's cloud-init secrets"
    )]
    MissingSecret {
        object: Ref,
        field: String,
        reference: String,
    },
    /// An option PVE cannot be told through its API, or a field a request
    /// needs that the manifest leaves out.
    #[error("{object}: {field}: {message}")]
    Unsupported {
        object: Ref,
        field: String,
        message: String,
    },
    /// The object is not of a kind this function handles.
    #[error("{object}: {message}")]
    WrongKind { object: Ref, message: String },
}

/// Desired vs live for one VM, TemplateVM, LXC or TemplateCT.
///
/// `live` is the guest's `/cluster/resources` entry, `config` its read
/// `/config`. The guest's power decides the impact: a guest that is not
/// running takes every change live; unknown power counts as running.
pub fn guest_drift(
    obj: &DesiredObject,
    ctx: &Context<'_>,
    live: &LiveGuest,
    config: &LiveConfig,
) -> Result<Drift, DriftError> {
    let mut acc = Acc::new(obj, live, config);
    let live_template = live.template || config.is_template().unwrap_or(false);
    match &obj.spec {
        proxops_model::manifest::Spec::Vm(vm) | proxops_model::manifest::Spec::TemplateVm(vm) => {
            if !kind_mismatch(&mut acc, obj, live, live_template, GuestType::Qemu) {
                qemu::drift(obj, vm, ctx, config, &mut acc)?;
            }
        }
        proxops_model::manifest::Spec::Lxc(ct) | proxops_model::manifest::Spec::TemplateCt(ct) => {
            if !kind_mismatch(&mut acc, obj, live, live_template, GuestType::Lxc) {
                lxc::drift(obj, ct, ctx, config, &mut acc)?;
            }
        }
        _ => {
            return Err(DriftError::WrongKind {
                object: obj.r#ref.clone(),
                message: "storage artifacts have no config to compare".into(),
            });
        }
    }
    Ok(acc.finish())
}

/// A guest of the other type at this vmid, or a template where the manifest
/// declares a plain guest (PVE cannot untemplate): an anomaly, and nothing
/// else is compared.
fn kind_mismatch(
    acc: &mut Acc,
    obj: &DesiredObject,
    live: &LiveGuest,
    live_template: bool,
    want: GuestType,
) -> bool {
    let (other, plain, untemplate) = match want {
        GuestType::Qemu => (
            "a container",
            proxops_model::names::Kind::VM,
            "PVE holds a template at this vmid but the manifest declares kind VM: PVE cannot turn a template back into a VM (no untemplate); change the manifest to TemplateVM, or delete the template by hand",
        ),
        GuestType::Lxc => (
            "a VM",
            proxops_model::names::Kind::LXC,
            "PVE holds a template container at this vmid but the manifest declares kind LXC: PVE cannot untemplate; change the manifest to TemplateCT, or delete the template by hand",
        ),
    };
    if live.guest_type != want {
        let message = format!(
            "vmid {} is {other} on PVE, the manifest declares a {}: remove one of them",
            live.vmid, obj.r#ref.kind
        );
        acc.anomaly(AnomalyType::NeedsPerson, None, message);
        return true;
    }
    if obj.r#ref.kind == plain && live_template {
        acc.anomaly(
            AnomalyType::NeedsPerson,
            Some("template"),
            untemplate.into(),
        );
        return true;
    }
    false
}

/// Where the changes being collected come from. A row's field stays the
/// table's static text, and whether it names one field is asked only
/// when the row changes something: copying and scanning it for every row
/// of every guest was a tenth of planning 10,000 guests.
enum FieldAt {
    Unknown,
    /// A table row's field as written (`spec.memory`, or several:
    /// `spec.mount-points, spec.bind-mounts`).
    Row(&'static str),
    Given(Cow<'static, str>),
}

impl FieldAt {
    fn path(&self) -> Option<&str> {
        match self {
            FieldAt::Unknown => None,
            FieldAt::Row(field) => owned::single_field(field),
            FieldAt::Given(path) => Some(path),
        }
    }
}

/// Collects one drift: changes with their impact, anomalies.
pub(crate) struct Acc {
    running: bool,
    /// What the running guest takes live (its `hotplug`, `numa`).
    hotplug: hotplug::Hotplug,
    object: Ref,
    node: NodeName,
    id: Vmid,
    changes: Vec<(Change, Impact)>,
    /// The manifest field the row being compared reads (`spec.memory`):
    /// the path of every change it makes.
    path: FieldAt,
    params: Vec<(String, ParamValue)>,
    delete: Vec<String>,
    anomalies: Vec<Anomaly>,
    grows: Vec<DiskGrowth>,
}

impl Acc {
    fn new(obj: &DesiredObject, live: &LiveGuest, config: &LiveConfig) -> Acc {
        Acc {
            // Unknown power counts as running; a template never runs.
            running: live.power != Power::Stopped && !live.template,
            hotplug: hotplug::Hotplug::of(live.guest_type, config),
            object: obj.r#ref.clone(),
            node: live.node.clone(),
            id: live.vmid,
            changes: Vec::new(),
            path: FieldAt::Unknown,
            params: Vec::new(),
            delete: Vec::new(),
            anomalies: Vec::new(),
            grows: Vec::new(),
        }
    }

    /// Writes `key=to`; `impact` is what it means for a running guest when
    /// PVE cannot apply it live (the guest's hotplug settings decide).
    pub(crate) fn set(&mut self, key: &str, from: Option<&str>, to: ParamValue, impact: Impact) {
        self.change(key, from, Some(to.shown().to_owned()), impact);
        self.params.push((key.to_owned(), to));
    }

    fn change(&mut self, key: &str, from: Option<&str>, to: Option<String>, impact: Impact) {
        let impact = self.hotplug.impact(key, from, to.as_deref(), impact);
        self.change_at(key, from, to, impact);
    }

    /// What the running guest takes live, for a row that decides its own
    /// impact.
    pub(crate) fn hotplug(&self) -> &hotplug::Hotplug {
        &self.hotplug
    }

    /// Writes `key=to` at the impact its row decided from the old and new
    /// values and the guest's hotplug settings.
    pub(crate) fn set_decided(
        &mut self,
        key: &str,
        from: Option<&str>,
        to: ParamValue,
        impact: Impact,
    ) {
        self.change_at(key, from, Some(to.shown().to_owned()), impact);
        self.params.push((key.to_owned(), to));
    }

    fn change_at(&mut self, key: &str, from: Option<&str>, to: Option<String>, impact: Impact) {
        let change = Change {
            path: self.path.path().filter(|p| *p != key).map(str::to_owned),
            impact: Some(impact),
            ..Change::new(key, from.map(str::to_owned), to)
        };
        self.changes.push((change, impact));
    }

    /// The manifest field the next changes come from; `None`: unknown.
    pub(crate) fn at_path(&mut self, path: Option<Cow<'static, str>>) {
        self.path = path.map_or(FieldAt::Unknown, FieldAt::Given);
    }

    /// The changes that follow come from a table row reading `field`.
    pub(crate) fn at_row(&mut self, field: &'static str) {
        self.path = FieldAt::Row(field);
    }

    pub(crate) fn set_plain(&mut self, key: &str, from: Option<&str>, to: String, impact: Impact) {
        self.set(key, from, ParamValue::Plain(to), impact);
    }

    pub(crate) fn delete(&mut self, key: &str, from: Option<&str>, impact: Impact) {
        self.change(key, from, None, impact);
        self.delete.push(key.to_owned());
    }

    /// Grows the volume at `key` from the live size to the desired one;
    /// a desired size below the live one is a `shrink` anomaly instead
    /// (PVE refuses to shrink: qemu-server `resize_vm` "shrinking disks
    /// is not supported", pve-container `resize_vm` "unable to shrink
    /// disk size"). Equal sizes are nothing: pve-container refuses a
    /// resize to the same size ("disk is already at specified size").
    pub(crate) fn resize(&mut self, key: &str, live: Bytes, desired: Bytes) {
        match desired.cmp(&live) {
            std::cmp::Ordering::Greater => self.grows.push(DiskGrowth {
                disk: key.to_owned(),
                from: live,
                to: desired,
            }),
            std::cmp::Ordering::Less => self.anomaly(
                AnomalyType::Shrink,
                Some(key),
                format!(
                    "{key} is {} on PVE but the manifest asks for {}: PVE cannot shrink a volume; ProxOps leaves it as it is (raise the manifest's size, or move the data to a smaller volume by hand)",
                    live.to_wire(),
                    desired.to_wire()
                ),
            ),
            std::cmp::Ordering::Equal => {}
        }
    }

    pub(crate) fn anomaly(&mut self, t: AnomalyType, field: Option<&str>, message: String) {
        self.anomalies.push(Anomaly {
            anomaly: t.into(),
            kind: Some(self.object.kind),
            name: Some(self.object.name.to_string()),
            node: Some(self.node.clone()),
            id: Some(Target::Guest(self.id)),
            field: field.map(str::to_owned),
            message,
        });
    }

    fn finish(mut self) -> Drift {
        let impact = if self.running {
            self.changes
                .iter()
                .map(|(_, i)| *i)
                .max()
                .unwrap_or(Impact::Live)
        } else {
            Impact::Live
        };
        self.changes.sort();
        self.params.sort_by(|a, b| a.0.cmp(&b.0));
        self.delete.sort();
        self.delete.dedup();
        self.anomalies.sort();
        self.anomalies.dedup();
        self.grows.sort();
        Drift {
            changes: self.changes.into_iter().map(|(c, _)| c).collect(),
            params: Params(self.params),
            delete: self.delete,
            impact,
            anomalies: self.anomalies,
            grows: self.grows,
        }
    }
}

/// `tags`: the user's tags plus the ownership tag, sorted, `;`-joined;
/// plus `proxops-noprune` for an object annotated `proxops/prune: disabled`,
/// so PVE itself remembers the protection once the manifest is gone.
/// The text of the `TagSet` they make, without building it: every guest's
/// tags are compared each cycle.
pub(crate) fn desired_tags(obj: &DesiredObject, tags: &[String]) -> Result<String, DriftError> {
    let no_prune = obj
        .metadata
        .prune_disabled()
        .then_some(proxops_model::manifest::NO_PRUNE_TAG);
    let mut set: Vec<&str> = Vec::with_capacity(tags.len() + 2);
    for t in tags
        .iter()
        .map(String::as_str)
        .chain(std::iter::once(proxops_model::manifest::OWNERSHIP_TAG))
        .chain(no_prune)
    {
        proxops_model::wire::Tag::check(t).map_err(|e| DriftError::Unsupported {
            object: obj.r#ref.clone(),
            field: "spec.tags".into(),
            message: e.to_string(),
        })?;
        set.push(t);
    }
    // A `TagSet`'s order (tags compare as their text) and its one copy
    // of each.
    set.sort_unstable();
    set.dedup();
    Ok(proxops_model::wire::join_tags(set.into_iter()))
}

/// A rate (a NIC's MB/s, a CPU limit) as PVE spells it: `100`, `12.5`.
pub(crate) fn rate_text(r: f64) -> String {
    if r.fract() == 0.0 && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// Rates compare as numbers (`100` = `100.0`).
pub(crate) fn same_rate(live: Option<&str>, desired: f64) -> bool {
    live.and_then(|l| l.parse::<f64>().ok())
        .is_some_and(|l| (l - desired).abs() < 1e-9)
}

/// `spec.extra`: raw keys written as given; ProxOps cannot know whether PVE
/// hot-applies them, so a change counts as a reboot.
pub(crate) fn extra_drift(extra: &BTreeMap<String, String>, cfg: &LiveConfig, acc: &mut Acc) {
    for (k, v) in extra {
        if cfg.get(k).map(str::trim) != Some(v.trim()) {
            acc.at_path(Some(Cow::Owned(format!("spec.extra.{k}"))));
            acc.set_plain(k, cfg.get(k), v.clone(), Impact::Reboot);
        }
    }
    acc.at_path(None);
}
