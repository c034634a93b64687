//! Adoption (spec §15, §22.10): a live snapshot of one cluster turned into
//! manifests, the exact inverse of the drift translation, so that the
//! adopted manifests, once listed, plan nothing but the ownership-tag claim.
//!
//! This module owns the reverse translation of every owned PVE key, the
//! naming of adopted objects, the gap report (every live key that is not
//! modelled and not PVE bookkeeping) and the YAML text of the manifests.
//!
//! **Architecture Invariant:** adoption never drops a live key silently
//! (it is adopted, bookkeeping, or a gap), never writes a secret (gap
//! values of sensitive keys are `<redacted>`, `cipassword` is never
//! adopted), never pins a PVE-assigned MAC, and passes user text
//! (descriptions, cloud-init values) through byte for byte. It is pure:
//! no I/O, no clock; the same snapshot gives the same bytes.

// Each translation stays short enough to read whole (core/clippy.toml).
#![warn(clippy::too_many_lines)]

mod one;
pub use one::{GuestPick, already_managed, only_guest, pick_guest};
mod emit;
mod firewall;
mod guest;

use std::collections::{BTreeMap, BTreeSet};

use proxops_model::live::{GuestType, LiveConfig, LiveGuest, LiveSnapshot, Power, ReadFailure};
use proxops_model::manifest::{
    self, API_VERSION, ArtifactSpec, Document, LxcSpec, Metadata, PowerState, Spec, VmSpec,
};
use proxops_model::names::{ClusterName, Kind, NodeName, Ref, ResourceName, StorageId, Vmid};
use proxops_model::wire::SshKeys;

/// `spec.template` of an adopted LXC or TemplateCT: PVE does not persist
/// `ostemplate`, so no real value can be known. The name is valid (the
/// manifest parses and validates on its own) but names no CTTemplate, so a
/// composition listing it fails until an operator sets the real one.
pub const TEMPLATE_PLACEHOLDER: &str = "replace-with-cttemplate";

pub use crate::inverse::REDACTED;
use crate::inverse::{GuestCx, Shared};

/// Inputs besides the snapshot.
#[derive(Clone, Default)]
pub struct AdoptOptions {
    /// The cluster's node allowlist; empty = every node of the snapshot.
    /// Guests on other nodes are SKIPPED.
    pub nodes: BTreeSet<NodeName>,
    /// `cloud-init.ssh-keys` of the cluster's SOPS file (name → one
    /// OpenSSH public-key line), when the cluster has one. A VM whose live
    /// keys all match entries gets `ssh-key-refs`; otherwise `["*"]`.
    pub sops_ssh_keys: Option<BTreeMap<String, String>>,
}

impl std::fmt::Debug for AdoptOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdoptOptions")
            .field("nodes", &self.nodes)
            .field(
                "sops_ssh_keys",
                &self
                    .sops_ssh_keys
                    .as_ref()
                    .map(|m| m.keys().collect::<Vec<_>>()),
            )
            .finish()
    }
}

pub use crate::change::Gap;

/// What adoption produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Adoption {
    /// `<kind-dir>/<cluster>/<name>.yaml` → YAML text.
    pub files: BTreeMap<String, String>,
    /// Lines to add under `resources:` in `clusters/<cluster>/resources.yaml`
    /// for every file that is not INCOMPLETE, e.g. `  - ../../vm/c/web-01.yaml`.
    pub resources_lines: Vec<String>,
    /// Sorted, without duplicates.
    pub gaps: Vec<Gap>,
    /// `<path>: <what is missing>`, sorted: written but not listable as is.
    pub incomplete: Vec<String>,
    /// Guests not adopted, sorted by node then vmid.
    pub skipped: Vec<String>,
    /// `Kind/name` of guests with a live `cipassword` (never adopted).
    pub cipassword_guests: Vec<String>,
    /// Each adopted guest's manifest path, by vmid.
    pub guests: BTreeMap<Vmid, String>,
}

impl Adoption {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }
}

/// Why nothing was adopted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// A listing or config read failed: adoption has no partial success.
    #[error("adopt: {} PVE read(s) failed, nothing adopted: {}", .0.len(), join_failures(.0))]
    Unreadable(Vec<ReadFailure>),
    /// A `/nodes/{n}/storage` answer that is not a list of storages.
    #[error("adopt: GET /nodes/{node}/storage: {message}")]
    StorageList { node: String, message: String },
}

fn join_failures(f: &[ReadFailure]) -> String {
    f.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The storages of `node` whose bare content listing adoption needs, from
/// the `data` of `GET /nodes/{node}/storage`: every enabled, active storage
/// holding ISO images, container templates, disk images or container
/// volumes (the last two so volume sizes PVE does not report in a config
/// can be looked up). Sorted.
pub fn storages_to_read(
    node: &NodeName,
    data: &serde_json::Value,
) -> Result<Vec<StorageId>, AdoptError> {
    let bad = |message: String| AdoptError::StorageList {
        node: node.to_string(),
        message,
    };
    let rows = data
        .as_array()
        .ok_or_else(|| bad("expected a JSON array of storages".into()))?;
    let mut out = BTreeSet::new();
    for row in rows {
        let text = |k: &str| row.get(k).and_then(proxops_model::wire::json_to_text);
        let Some(id) = text("storage") else {
            return Err(bad("a storage entry without a storage id".into()));
        };
        let id = StorageId::new(&id).map_err(|e| bad(e.to_string()))?;
        let off = |k: &str| text(k).is_some_and(|v| v.trim() == "0");
        if off("enabled") || off("active") {
            continue;
        }
        let content = text("content").unwrap_or_default();
        if content
            .split(',')
            .map(str::trim)
            .any(|c| matches!(c, "iso" | "vztmpl" | "images" | "rootdir"))
        {
            out.insert(id);
        }
    }
    Ok(out.into_iter().collect())
}

/// The distinct SSH public keys of the adoptable qemu guests (decoded from
/// `sshkeys`, one line each, sorted by key type and blob): what an
/// `--adopt-secrets` merge would add to the SOPS file under new names
/// before calling `adopt` with the merged `sops_ssh_keys`.
pub fn live_ssh_keys(snapshot: &LiveSnapshot, options: &AdoptOptions) -> Vec<String> {
    let allowed = |n: &NodeName| options.nodes.is_empty() || options.nodes.contains(n);
    let mut out: BTreeMap<proxops_model::wire::SshKeyId, String> = BTreeMap::new();
    for g in snapshot
        .guests
        .values()
        .filter(|g| allowed(&g.node) && g.guest_type == GuestType::Qemu)
    {
        let Some(Ok(keys)) = g
            .config
            .as_ref()
            .ok()
            .and_then(|c| c.get("sshkeys"))
            .map(SshKeys::parse)
        else {
            continue;
        };
        for k in keys.keys {
            out.entry(k.id()).or_insert_with(|| k.to_line());
        }
    }
    out.into_values().collect()
}

/// Adopts every guest and every ISO / container-template file of the
/// snapshot's allowed nodes. The snapshot must hold the bare content
/// listing of every storage `storages_to_read` names for every node.
pub fn adopt(
    cluster: &ClusterName,
    snapshot: &LiveSnapshot,
    options: &AdoptOptions,
) -> Result<Adoption, AdoptError> {
    let allowed = |n: &NodeName| options.nodes.is_empty() || options.nodes.contains(n);
    all_readable(snapshot, &allowed)?;

    let mut out = Adoption::default();
    let artifacts = artifacts(snapshot, &allowed, &mut out.gaps);
    let mut docs: BTreeMap<String, (Ref, String)> = BTreeMap::new();
    let mut incomplete_paths: BTreeSet<String> = BTreeSet::new();
    artifact_docs(cluster, &artifacts, &mut docs, &mut out);

    let names = guest_names(snapshot, &allowed);
    let isos: BTreeMap<(StorageId, String), ResourceName> = artifacts
        .iter()
        .filter(|a| a.kind == Kind::ISO)
        .map(|a| {
            (
                (a.spec.storage.clone(), a.spec.filename.clone()),
                a.name.clone(),
            )
        })
        .collect();
    let ctx = Shared {
        snapshot,
        isos: &isos,
        ssh_names: ssh_names(options),
    };

    for g in snapshot.guests.values() {
        if !allowed(&g.node) {
            out.skipped.push(format!(
                "{} {} {}: node {} is outside the cluster's node allowlist",
                g.node,
                g.vmid,
                display_name(g),
                g.node
            ));
            continue;
        }
        let Ok(cfg) = &g.config else { continue };
        let Some(name) = names.get(&(g.node.clone(), g.vmid)) else {
            continue;
        };
        let Some((path, r, text, incomplete)) = adopt_guest(&ctx, cluster, g, cfg, name, &mut out)
        else {
            continue;
        };
        if incomplete {
            incomplete_paths.insert(path.clone());
        }
        out.guests.insert(g.vmid, path.clone());
        push_doc(&mut docs, &mut out, path, r, text);
    }

    cluster_objects(cluster, snapshot, &names, &mut docs, &mut out);

    // Every written manifest must read back and validate on its own.
    for (path, (r, text)) in &docs {
        if let Err(why) = check_manifest(r.kind, text) {
            out.incomplete.push(format!("{path}: {why}"));
            incomplete_paths.insert(path.clone());
        }
        out.files.insert(path.clone(), text.clone());
    }
    out.resources_lines = out
        .files
        .keys()
        .filter(|p| !incomplete_paths.contains(*p))
        .map(|p| format!("  - ../../{p}"))
        .collect();
    out.gaps.sort();
    out.gaps.dedup();
    out.incomplete.sort();
    out.incomplete.dedup();
    out.cipassword_guests.sort();
    // Skipped lines start with node then vmid: sort numerically on the id.
    out.skipped.sort_by_key(|l| skip_key(l));
    Ok(out)
}

/// Every guest config and storage listing of the allowed nodes was read:
/// adoption never takes a read failure for absence.
fn all_readable(
    snapshot: &LiveSnapshot,
    allowed: &dyn Fn(&NodeName) -> bool,
) -> Result<(), AdoptError> {
    let mut failures: BTreeSet<ReadFailure> = snapshot.failures.iter().cloned().collect();
    for g in snapshot.guests.values().filter(|g| allowed(&g.node)) {
        if let Err(f) = &g.config {
            failures.insert(f.clone());
        }
    }
    for ((node, _), c) in &snapshot.storage {
        if let (true, Err(f)) = (allowed(node), c) {
            failures.insert(f.clone());
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(AdoptError::Unreadable(failures.into_iter().collect()))
    }
}

/// One manifest per ISO and container-template file, each with the gap of
/// its unknown source URL.
fn artifact_docs(
    cluster: &ClusterName,
    artifacts: &[AdoptedArtifact],
    docs: &mut BTreeMap<String, (Ref, String)>,
    out: &mut Adoption,
) {
    for a in artifacts {
        let path = format!("{}/{cluster}/{}.yaml", a.kind.dir(), a.name);
        let doc = Document {
            api_version: API_VERSION.to_owned(),
            kind: a.kind.to_string(),
            metadata: metadata(&a.name, BTreeMap::new()),
            spec: a.spec.clone(),
        };
        out.gaps.push(Gap {
            object: format!("{}/{}", a.kind, a.name),
            node: a.spec.nodes.first().map(ToString::to_string).unwrap_or_default(),
            id: format!("{}:{}", a.spec.storage, a.spec.filename),
            key: "spec.url".into(),
            value: Some(a.spec.url.clone()),
            note: "PVE does not record where a file came from: replace the placeholder URL before a node that lacks the file needs it".into(),
        });
        push_doc(
            docs,
            out,
            path,
            Ref {
                kind: a.kind,
                name: a.name.clone(),
            },
            emit::to_yaml(&doc),
        );
    }
}

/// Pools, backup jobs and HA resources as manifests, next to the guests
/// (`names`) they name.
fn cluster_objects(
    cluster: &ClusterName,
    snapshot: &LiveSnapshot,
    names: &BTreeMap<(NodeName, Vmid), ResourceName>,
    docs: &mut BTreeMap<String, (Ref, String)>,
    out: &mut Adoption,
) {
    let by_vmid: BTreeMap<Vmid, ResourceName> =
        names.iter().map(|((_, v), n)| (*v, n.clone())).collect();
    let mut adopted = crate::cluster::adopt::adopt(&snapshot.cluster, &by_vmid, &mut out.gaps);
    if let Some(fw) = &snapshot.firewall {
        adopted.extend(firewall::cluster(cluster, fw, &mut out.gaps));
    }
    for a in adopted {
        let path = format!("{}/{cluster}/{}.yaml", a.kind.dir(), a.name);
        let r = Ref {
            kind: a.kind,
            name: a.name.clone(),
        };
        let text = a.spec.and_then(|spec| {
            emit::to_yaml(&Document {
                api_version: API_VERSION.to_owned(),
                kind: a.kind.to_string(),
                metadata: metadata(&a.name, a.annotations),
                spec,
            })
        });
        push_doc(docs, out, path, r, text);
    }
}

/// A guest written as a manifest: path, object, YAML text (or why not),
/// and whether it is INCOMPLETE.
type AdoptedGuest = (String, Ref, Result<String, String>, bool);

/// One guest into its manifest, its gaps and INCOMPLETE lines; `None`
/// (with a SKIPPED line) when it cannot be declared.
fn adopt_guest(
    shared: &Shared<'_>,
    cluster: &ClusterName,
    g: &LiveGuest,
    cfg: &LiveConfig,
    name: &ResourceName,
    out: &mut Adoption,
) -> Option<AdoptedGuest> {
    let template = g.template || cfg.is_template().unwrap_or(false);
    let kind = match (g.guest_type, template) {
        (GuestType::Qemu, false) => Kind::VM,
        (GuestType::Qemu, true) => Kind::TemplateVM,
        (GuestType::Lxc, false) => Kind::LXC,
        (GuestType::Lxc, true) => Kind::TemplateCT,
    };
    let r = Ref {
        kind,
        name: name.clone(),
    };
    let path = format!("{}/{cluster}/{name}.yaml", kind.dir());
    let mut cx = GuestCx::new(shared, g, cfg, &r);
    if !g.is_owned() {
        // The claim: a manifest never acts on a guest without the
        // ownership tag unless it names that guest's vmid here.
        cx.annotations
            .insert(manifest::ANNOTATION_ADOPTED_VMID.into(), g.vmid.to_string());
    }
    let state = if template { None } else { power_state(g.power) };
    let firewall = || {
        let fw = shared.snapshot.firewall.as_ref()?;
        firewall::guest(fw.guests.get(&g.vmid)?)
    };
    let text = if kind.is_qemu() {
        let mut spec = guest::vm(&mut cx, state);
        spec.firewall = firewall();
        let doc = Document {
            api_version: API_VERSION.to_owned(),
            kind: kind.to_string(),
            metadata: metadata(name, cx.annotations.clone()),
            spec,
        };
        emit::to_yaml(&doc)
    } else {
        let Some(mut spec) = guest::ct(&mut cx, state) else {
            out.skipped.push(format!(
                "{} {} {}: no readable storage-backed rootfs; not adopted",
                g.node, g.vmid, name
            ));
            out.gaps.append(&mut cx.gaps);
            return None;
        };
        spec.firewall = firewall();
        let doc = Document {
            api_version: API_VERSION.to_owned(),
            kind: kind.to_string(),
            metadata: metadata(name, cx.annotations.clone()),
            spec,
        };
        emit::to_yaml(&doc).map(|t| mark_placeholder(&t))
    };
    cx.finish();
    if cx.cipassword {
        out.cipassword_guests.push(r.to_string());
    }
    if g.is_owned() && !cx.incomplete.is_empty() {
        cx.incomplete.push("it carries the proxops tag: a plan of a composition without it would prune it, so list it as soon as it is complete".into());
    }
    for why in &cx.incomplete {
        out.incomplete.push(format!("{path}: {why}"));
    }
    out.gaps.append(&mut cx.gaps);
    Some((path, r, text, !cx.incomplete.is_empty()))
}

fn skip_key(line: &str) -> (String, u64, String) {
    let mut parts = line.splitn(3, ' ');
    let node = parts.next().unwrap_or("").to_owned();
    let id = parts.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    (node, id, line.to_owned())
}

fn push_doc(
    docs: &mut BTreeMap<String, (Ref, String)>,
    out: &mut Adoption,
    path: String,
    r: Ref,
    text: Result<String, String>,
) {
    match text {
        Ok(t) => {
            docs.insert(path, (r, t));
        }
        Err(e) => out
            .incomplete
            .push(format!("{path}: could not be written ({e})")),
    }
}

fn display_name(g: &LiveGuest) -> String {
    let n = sanitize(&g.name, 63);
    if n.is_empty() { default_name(g) } else { n }
}

fn default_name(g: &LiveGuest) -> String {
    match g.guest_type {
        GuestType::Qemu => format!("vm-{}", g.vmid),
        GuestType::Lxc => format!("ct-{}", g.vmid),
    }
}

fn metadata(name: &ResourceName, annotations: BTreeMap<String, String>) -> Metadata {
    Metadata {
        name: name.clone(),
        labels: BTreeMap::new(),
        annotations,
    }
}

fn power_state(p: Power) -> Option<PowerState> {
    match p {
        Power::Running => Some(PowerState::Started),
        Power::Stopped => Some(PowerState::Stopped),
        Power::Unknown => None,
    }
}

/// The placeholder `spec.template` line, with a comment above it saying
/// what to do.
fn mark_placeholder(text: &str) -> String {
    let line = format!("  template: {TEMPLATE_PLACEHOLDER}\n");
    text.replacen(
        &line,
        &format!("  # PVE does not keep ostemplate: name the CTTemplate this container\n  # was created from (INCOMPLETE until then).\n{line}"),
        1,
    )
}

/// Reads `text` back with the manifest parser and validates it.
fn check_manifest(kind: Kind, text: &str) -> Result<(), String> {
    use proxops_model::firewall as fw;
    fn read<S: serde::de::DeserializeOwned>(
        text: &str,
        spec: fn(S) -> Spec,
    ) -> Result<(Metadata, Spec), proxops_model::yaml::DocError> {
        proxops_model::yaml::deserialize_document::<Document<S>>(text, 0)
            .map(|d| (d.metadata, spec(d.spec)))
    }
    let parsed = match kind {
        Kind::VM => read::<VmSpec>(text, Spec::Vm),
        Kind::TemplateVM => read::<VmSpec>(text, Spec::TemplateVm),
        Kind::LXC => read::<LxcSpec>(text, Spec::Lxc),
        Kind::TemplateCT => read::<LxcSpec>(text, Spec::TemplateCt),
        Kind::ISO => read::<ArtifactSpec>(text, Spec::Iso),
        Kind::CTTemplate => read::<ArtifactSpec>(text, Spec::CtTemplate),
        Kind::DiskImage => read::<ArtifactSpec>(text, Spec::DiskImage),
        Kind::Pool => read::<crate::cluster::spec::PoolSpec>(text, Spec::Pool),
        Kind::BackupJob => read::<crate::cluster::spec::BackupJobSpec>(text, Spec::BackupJob),
        Kind::HAResource => read::<crate::cluster::spec::HaResourceSpec>(text, Spec::HaResource),
        Kind::HARule => read::<crate::cluster::spec::HaRuleSpec>(text, Spec::HaRule),
        Kind::ReplicationJob => {
            read::<crate::cluster::spec::ReplicationJobSpec>(text, Spec::ReplicationJob)
        }
        Kind::FirewallAlias => read::<fw::AliasSpec>(text, Spec::FirewallAlias),
        Kind::FirewallIPSet => read::<fw::IpSetSpec>(text, Spec::FirewallIpSet),
        Kind::SecurityGroup => read::<fw::SecurityGroupSpec>(text, Spec::SecurityGroup),
        Kind::ClusterFirewall => read::<fw::ClusterFirewallSpec>(text, Spec::ClusterFirewall),
    };
    let (metadata, spec) = parsed.map_err(|e| format!("{}: {}", e.path, e.message))?;
    let errs = manifest::validate(&metadata, &spec);
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs
            .iter()
            .map(|e| format!("{}: {}", e.path, e.message))
            .collect::<Vec<_>>()
            .join("; "))
    }
}

// ------------------------------------------------------------ names

/// Lowercase; every run of characters other than ASCII letters and digits
/// becomes one `-`; trimmed of `-`; at most `max` characters.
pub fn sanitize(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut dash = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        } else {
            dash = true;
        }
    }
    out.truncate(max);
    out.trim_end_matches('-').to_owned()
}

/// `base` made unique against `taken` by appending `-<suffix>` (the base
/// shortened so the whole stays within 63 characters), then `-2`, `-3`, …
fn unique(base: &str, suffix: &str, taken: &BTreeSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_owned();
    }
    for n in 1u32.. {
        let tail = if n == 1 {
            format!("-{suffix}")
        } else {
            format!("-{suffix}-{n}")
        };
        let keep = 63usize.saturating_sub(tail.len());
        let head: String = base.chars().take(keep).collect();
        let candidate = format!("{}{tail}", head.trim_end_matches('-'));
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
    base.to_owned()
}

fn to_name(s: &str) -> Option<ResourceName> {
    ResourceName::new(s).ok()
}

/// `metadata.name` of every allowed guest: from PVE `name` / `hostname`,
/// sanitised; a collision takes `-<vmid>` (the lowest vmid keeps the plain
/// name). Names are unique across all guest kinds.
fn guest_names(
    snapshot: &LiveSnapshot,
    allowed: &dyn Fn(&NodeName) -> bool,
) -> BTreeMap<(NodeName, Vmid), ResourceName> {
    let mut guests: Vec<&LiveGuest> = snapshot
        .guests
        .values()
        .filter(|g| allowed(&g.node))
        .collect();
    guests.sort_by_key(|g| (g.vmid, g.node.clone()));
    let mut taken = BTreeSet::new();
    let mut out = BTreeMap::new();
    for g in guests {
        let live_name = g
            .config
            .as_ref()
            .ok()
            .and_then(|c| {
                c.get(if g.guest_type == GuestType::Qemu {
                    "name"
                } else {
                    "hostname"
                })
                .map(str::to_owned)
            })
            .unwrap_or_else(|| g.name.clone());
        let mut base = sanitize(&live_name, 63);
        if base.is_empty() {
            base = default_name(g);
        }
        let name = unique(&base, &g.vmid.to_string(), &taken);
        if let Some(n) = to_name(&name) {
            taken.insert(name);
            out.insert((g.node.clone(), g.vmid), n);
        }
    }
    out
}

// ------------------------------------------------------------ artifacts

struct AdoptedArtifact {
    kind: Kind,
    name: ResourceName,
    spec: ArtifactSpec,
}

fn artifact_spec(kind: Kind, spec: ArtifactSpec) -> Spec {
    if kind == Kind::ISO {
        Spec::Iso(spec)
    } else {
        Spec::CtTemplate(spec)
    }
}

/// The name part of an artifact file name: its kind's extension dropped.
fn artifact_stem(kind: Kind, filename: &str) -> &str {
    let lower = filename.to_ascii_lowercase();
    let mut exts: Vec<&str> = manifest::artifact_extensions(kind).to_vec();
    exts.sort_by_key(|e| std::cmp::Reverse(e.len()));
    for e in exts {
        if lower.ends_with(e) && filename.len() > e.len() {
            return &filename[..filename.len() - e.len()];
        }
    }
    filename
}

/// ISO and vztmpl files of the allowed nodes, one manifest per (storage,
/// file name) listing every node that holds it. A file name that is not a
/// valid artifact file name is left out (its manifest would not validate).
fn artifacts(
    snapshot: &LiveSnapshot,
    allowed: &dyn Fn(&NodeName) -> bool,
    gaps: &mut Vec<Gap>,
) -> Vec<AdoptedArtifact> {
    let mut found: BTreeMap<(Kind, StorageId, String), BTreeSet<NodeName>> = BTreeMap::new();
    for ((node, storage), content) in &snapshot.storage {
        let (true, Ok(content)) = (allowed(node), content) else {
            continue;
        };
        for e in &content.entries {
            let kind = match e.content.as_str() {
                "iso" => Kind::ISO,
                "vztmpl" => Kind::CTTemplate,
                _ => continue,
            };
            found
                .entry((kind, storage.clone(), e.file_name().to_owned()))
                .or_default()
                .insert(node.clone());
        }
    }
    let mut taken: BTreeSet<(Kind, String)> = BTreeSet::new();
    let mut out = Vec::new();
    for ((kind, storage, filename), nodes) in found {
        let spec = ArtifactSpec {
            nodes: nodes.into_iter().collect(),
            node: None,
            url: format!("https://placeholder.invalid/{storage}/{filename}"),
            storage: storage.clone(),
            filename: filename.clone(),
            checksum: None,
            verify_certificates: None,
            compression: None,
        };
        let mut base = sanitize(artifact_stem(kind, &filename), 63);
        if base.is_empty() {
            base = "unnamed".into();
        }
        let names: BTreeSet<String> = taken
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n.clone())
            .collect();
        let name = unique(&base, &sanitize(storage.as_str(), 20), &names);
        let Some(rn) = to_name(&name) else { continue };
        let errs = manifest::validate(
            &metadata(&rn, BTreeMap::new()),
            &artifact_spec(kind, spec.clone()),
        );
        if !errs.is_empty() {
            let why = errs
                .iter()
                .map(|e| e.message.clone())
                .collect::<Vec<_>>()
                .join("; ");
            gaps.push(Gap {
                object: format!("{kind}/{rn}"),
                node: spec.nodes.first().map(ToString::to_string).unwrap_or_default(),
                id: format!("{storage}:{filename}"),
                key: "spec.filename".into(),
                value: Some(filename.clone()),
                note: format!("not adopted: a manifest could not declare this file ({why}); a CD drive holding it is left to PVE"),
            });
            continue;
        }
        taken.insert((kind, name));
        out.push(AdoptedArtifact {
            kind,
            name: rn,
            spec,
        });
    }
    out
}

fn ssh_names(options: &AdoptOptions) -> Option<BTreeMap<proxops_model::wire::SshKeyId, String>> {
    let keys = options.sops_ssh_keys.as_ref()?;
    let mut out = BTreeMap::new();
    for (name, line) in keys {
        // A name stands for one key line: a multi-key entry would own more
        // keys than the guest has.
        if let Ok(parsed) = SshKeys::from_text(line)
            && let [k] = parsed.keys.as_slice()
        {
            out.entry(k.id()).or_insert_with(|| name.clone());
        }
    }
    Some(out)
}

// ------------------------------------------------------------ report

/// The gap report as text: gaps, then INCOMPLETE, SKIPPED and the
/// cloud-init password census. Values of sensitive keys are already
/// `<redacted>`; values are shown escaped on one line.
pub fn render_gaps(a: &Adoption) -> String {
    let mut out = String::new();
    if a.gaps.is_empty() {
        out.push_str("gaps: none\n");
    } else {
        out.push_str(&format!("gaps ({}):\n", a.gaps.len()));
        for g in &a.gaps {
            let value = g
                .value
                .as_deref()
                .map(|v| format!(" = {v:?}"))
                .unwrap_or_default();
            out.push_str(&format!(
                "  GAP {} ({} {}) {}{value}: {}\n",
                g.object, g.node, g.id, g.key, g.note
            ));
        }
    }
    if !a.incomplete.is_empty() {
        out.push_str(&format!(
            "incomplete ({}): complete these before listing them\n",
            a.incomplete.len()
        ));
        for i in &a.incomplete {
            out.push_str(&format!("  INCOMPLETE {i}\n"));
        }
    }
    if !a.skipped.is_empty() {
        out.push_str(&format!("skipped ({}):\n", a.skipped.len()));
        for s in &a.skipped {
            out.push_str(&format!("  SKIPPED {s}\n"));
        }
    }
    if !a.cipassword_guests.is_empty() {
        out.push_str(&format!(
            "cloud-init passwords: {} guest(s) have one on PVE (never adopted): {}\n",
            a.cipassword_guests.len(),
            a.cipassword_guests.join(", ")
        ));
    }
    out
}
