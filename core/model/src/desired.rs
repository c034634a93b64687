//! A cluster's desired state: the objects its composition lists, each with
//! its file, document, prerequisites and level. Repository loading builds
//! it ([`crate::repo`]); the composition graph orders it ([`crate::graph`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::spec::parse_guest_ref;
use crate::diag::{Diagnostic, YamlIndex};
use crate::manifest::{Metadata, Spec};
use crate::names::{ClusterName, Kind, Ref, Vmid};

/// One desired object of one cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredObject {
    pub r#ref: Ref,
    /// Repo-relative file and 0-based document index.
    pub file: String,
    pub doc: usize,
    pub metadata: Metadata,
    pub spec: Spec,
    /// Prerequisites (structured edges plus `proxops/depends-on`).
    pub deps: BTreeSet<Ref>,
    /// Topological level: 0 without prerequisites, else 1 + the deepest.
    pub level: u32,
}

/// A cluster's desired state: every object its composition lists.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterDesired {
    pub name: ClusterName,
    pub objects: BTreeMap<Ref, DesiredObject>,
    /// The cluster declares PVE's case-sensitive `tag-style`: tags keep
    /// their case and compare exactly (otherwise PVE lower-cases them and
    /// they compare ignoring case).
    pub tag_case_sensitive: bool,
    /// The cluster's `allow-extra-keys`: the `spec.extra` keys it lets
    /// through that are otherwise refused (checked again at execution).
    pub allow_extra_keys: BTreeSet<String>,
}

impl ClusterDesired {
    pub fn get(&self, r: &Ref) -> Option<&DesiredObject> {
        self.objects.get(r)
    }

    /// Count of desired objects of a kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.objects.keys().filter(|r| r.kind == kind).count()
    }
}

/// Diagnostic for a field of a desired object.
pub fn object_diag(
    o: &DesiredObject,
    indexes: &BTreeMap<String, YamlIndex>,
    field: &str,
    message: String,
) -> Diagnostic {
    let pos = indexes.get(&o.file).and_then(|i| i.locate(o.doc, field));
    Diagnostic::file(&o.file, message).with_field(field).at(pos)
}

/// A Pool manifest's PVE id.
pub fn pool_id(obj: &DesiredObject) -> Option<String> {
    match &obj.spec {
        Spec::Pool(p) => Some(p.id.clone().unwrap_or_else(|| obj.r#ref.name.to_string())),
        _ => None,
    }
}

/// The identity of a cluster-level manifest: its PVE id (an HA
/// resource's is its guest's among `objects`), or a replication job's
/// guest and target (`identity` of the live object).
pub fn id_of(obj: &DesiredObject, objects: &BTreeMap<Ref, DesiredObject>) -> Option<String> {
    match &obj.spec {
        Spec::Pool(_) => pool_id(obj),
        Spec::BackupJob(b) => Some(b.id.clone().unwrap_or_else(|| obj.r#ref.name.to_string())),
        Spec::HaResource(h) => {
            let r = parse_guest_ref(&h.guest, |r| objects.contains_key(r))?;
            let (_, vmid) = objects.get(&r)?.spec.guest_id()?;
            Some(ha_sid(r.kind, vmid))
        }
        Spec::HaRule(r) => Some(r.id.clone().unwrap_or_else(|| obj.r#ref.name.to_string())),
        Spec::ReplicationJob(j) => {
            let r = parse_guest_ref(&j.guest, |r| objects.contains_key(r))?;
            let (_, vmid) = objects.get(&r)?.spec.guest_id()?;
            Some(crate::cluster::replication_identity(
                vmid,
                j.target.as_str(),
            ))
        }
        _ => None,
    }
}

/// pve-ha-manager `HA/Config.pm` `parse_sid`: `vm:<vmid>` for qemu
/// guests, `ct:<vmid>` for containers.
pub fn ha_sid(kind: Kind, vmid: Vmid) -> String {
    if kind.is_lxc() {
        format!("ct:{vmid}")
    } else {
        format!("vm:{vmid}")
    }
}

/// The guest manifest a reference names: `Kind:name`, or a bare name
/// looked up among the guest kinds.
pub fn guest_ref(all: &ClusterDesired, text: &str) -> Option<Ref> {
    parse_guest_ref(text, |r| all.objects.contains_key(r))
}
