//! Identifiers that reach PVE URL paths, volume ids or file names.
//!
//! Every one is validated against a strict pattern when it is built, so the
//! planner and the adapters never see a raw string they must re-check
//! (a name containing `/` must never become a path segment). This module
//! owns those patterns and nothing else.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The manifests' `apiVersion`.
pub const API_VERSION: &str = "proxops/v1alpha1";
/// The ownership tag: only objects carrying it are ever pruned.
pub const OWNERSHIP_TAG: &str = "proxops";
/// The pre-rename ownership tag: treated as untagged, never pruned.
pub const LEGACY_TAG: &str = "pveconform";
/// The PVE tag that mirrors `proxops/prune: disabled` onto the guest, so
/// the protection still holds after the manifest is gone (there is no state
/// file: PVE itself must carry it).
pub const NO_PRUNE_TAG: &str = "proxops-noprune";
/// `proxops/depends-on: "Kind:name,Kind:name"`.
pub const ANNOTATION_DEPENDS_ON: &str = "proxops/depends-on";
/// `proxops/prune: disabled` keeps an object from ever being pruned.
pub const ANNOTATION_PRUNE: &str = "proxops/prune";
/// `proxops/adopted-vmid: "<vmid>"`, written by `adopt`: this manifest
/// claims the guest it was adopted from even though that guest does not
/// carry the ownership tag yet (the first apply adds it). Without it a
/// manifest never acts on a guest ProxOps does not own.
pub const ANNOTATION_ADOPTED_VMID: &str = "proxops/adopted-vmid";
/// `proxops/adopted-id: "<PVE id>"`, written by `adopt` on a pool or a
/// backup job: this manifest claims the object of that id although its
/// comment does not carry the proxops marker yet (the first apply adds it).
pub const ANNOTATION_ADOPTED_ID: &str = "proxops/adopted-id";
/// `proxops/shutdown-timeout: 5m`: how long a graceful shutdown of this
/// guest may take, instead of the cluster's `shutdown-timeout`.
pub const ANNOTATION_SHUTDOWN_TIMEOUT: &str = "proxops/shutdown-timeout";

/// `proxops/disruption-group: db`: guests of one group are made
/// unavailable (stopped, rebooted) at most the group's budget at a time
/// (`disruption-groups`). Also read as a label of that name.
pub const ANNOTATION_DISRUPTION_GROUP: &str = "proxops/disruption-group";

/// `proxops/restart-policy: never|reboot`: this guest's restart policy,
/// over the cluster's `restart-policy`.
pub const ANNOTATION_RESTART_POLICY: &str = "proxops/restart-policy";

/// Why a text is not a valid identifier of some sort. The message says what
/// would be valid, so it can go straight into a diagnostic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NameError(pub String);

/// The manifest kinds: guests, storage files and cluster-level objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    VM,
    TemplateVM,
    LXC,
    TemplateCT,
    ISO,
    CTTemplate,
    DiskImage,
    Pool,
    BackupJob,
    HAResource,
    HARule,
    ReplicationJob,
    FirewallAlias,
    FirewallIPSet,
    SecurityGroup,
    ClusterFirewall,
}

/// An array of one `&'static str` per kind, `Kind::ALL[i].$f()`, built
/// at compile time.
macro_rules! per_kind {
    ($f:ident) => {{
        let mut out = [""; Kind::ALL.len()];
        let mut i = 0;
        while i < out.len() {
            out[i] = Kind::ALL[i].$f();
            i += 1;
        }
        out
    }};
}

impl Kind {
    pub const ALL: [Kind; 16] = [
        Kind::VM,
        Kind::TemplateVM,
        Kind::LXC,
        Kind::TemplateCT,
        Kind::ISO,
        Kind::CTTemplate,
        Kind::DiskImage,
        Kind::Pool,
        Kind::BackupJob,
        Kind::HAResource,
        Kind::HARule,
        Kind::ReplicationJob,
        Kind::FirewallAlias,
        Kind::FirewallIPSet,
        Kind::SecurityGroup,
        Kind::ClusterFirewall,
    ];

    /// The kinds as messages list them: `VM, TemplateVM, …`.
    pub fn list() -> String {
        Kind::ALL.map(Kind::as_str).join(", ")
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::VM => "VM",
            Kind::TemplateVM => "TemplateVM",
            Kind::LXC => "LXC",
            Kind::TemplateCT => "TemplateCT",
            Kind::ISO => "ISO",
            Kind::CTTemplate => "CTTemplate",
            Kind::DiskImage => "DiskImage",
            Kind::Pool => "Pool",
            Kind::BackupJob => "BackupJob",
            Kind::HAResource => "HAResource",
            Kind::HARule => "HARule",
            Kind::ReplicationJob => "ReplicationJob",
            Kind::FirewallAlias => "FirewallAlias",
            Kind::FirewallIPSet => "FirewallIPSet",
            Kind::SecurityGroup => "SecurityGroup",
            Kind::ClusterFirewall => "ClusterFirewall",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The repository directory that holds manifests of this kind (§2.1).
    pub const fn dir(self) -> &'static str {
        match self {
            Kind::VM => "vm",
            Kind::TemplateVM => "templatevm",
            Kind::LXC => "lxc",
            Kind::TemplateCT => "templatect",
            Kind::ISO => "iso",
            Kind::CTTemplate => "ctt",
            Kind::DiskImage => "diskimage",
            Kind::Pool => "pool",
            Kind::BackupJob => "backupjob",
            Kind::HAResource => "haresource",
            Kind::HARule => "harule",
            Kind::ReplicationJob => "replicationjob",
            Kind::FirewallAlias => "firewallalias",
            Kind::FirewallIPSet => "firewallipset",
            Kind::SecurityGroup => "securitygroup",
            Kind::ClusterFirewall => "clusterfirewall",
        }
    }

    pub fn from_dir(dir: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.dir() == dir)
    }

    /// What this kind's objects are on PVE. Every rule that differs by
    /// class (how objects are read, owned, planned and pruned) asks this,
    /// one exhaustive match: a new kind that is not placed here does not
    /// compile.
    pub const fn class(self) -> Class {
        match self {
            Kind::VM | Kind::TemplateVM => Class::Guest(GuestType::Qemu),
            Kind::LXC | Kind::TemplateCT => Class::Guest(GuestType::Lxc),
            Kind::ISO | Kind::CTTemplate | Kind::DiskImage => Class::StorageFile,
            Kind::Pool
            | Kind::BackupJob
            | Kind::HAResource
            | Kind::HARule
            | Kind::ReplicationJob => Class::ClusterObject,
            Kind::FirewallAlias
            | Kind::FirewallIPSet
            | Kind::SecurityGroup
            | Kind::ClusterFirewall => Class::Firewall,
        }
    }

    /// The guest type of a guest kind; `None` for every other class.
    pub const fn guest_type(self) -> Option<GuestType> {
        match self.class() {
            Class::Guest(t) => Some(t),
            Class::StorageFile | Class::ClusterObject | Class::Firewall => None,
        }
    }

    /// Guests carry a vmid on a node ([`Class::Guest`]).
    pub const fn is_guest(self) -> bool {
        matches!(self.class(), Class::Guest(_))
    }

    /// Files in storage: ISO, CTTemplate, DiskImage ([`Class::StorageFile`]).
    pub const fn is_artifact(self) -> bool {
        matches!(self.class(), Class::StorageFile)
    }

    /// Cluster-level objects: Pool, BackupJob, HAResource, HARule,
    /// ReplicationJob ([`Class::ClusterObject`]): no node, no vmid, no
    /// tags; owned through the marker ProxOps writes in their `comment`
    /// ([`crate::cluster::mark`]).
    pub const fn is_cluster_object(self) -> bool {
        matches!(self.class(), Class::ClusterObject)
    }

    /// The cluster's firewall: FirewallAlias, FirewallIPSet,
    /// SecurityGroup, ClusterFirewall ([`Class::Firewall`]).
    pub const fn is_firewall(self) -> bool {
        matches!(self.class(), Class::Firewall)
    }

    /// A guest kind PVE holds as a template.
    pub const fn is_template(self) -> bool {
        match self {
            Kind::TemplateVM | Kind::TemplateCT => true,
            Kind::VM
            | Kind::LXC
            | Kind::ISO
            | Kind::CTTemplate
            | Kind::DiskImage
            | Kind::Pool
            | Kind::BackupJob
            | Kind::HAResource
            | Kind::HARule
            | Kind::ReplicationJob
            | Kind::FirewallAlias
            | Kind::FirewallIPSet
            | Kind::SecurityGroup
            | Kind::ClusterFirewall => false,
        }
    }

    /// qemu guests (VM, TemplateVM) versus containers (LXC, TemplateCT).
    pub const fn is_qemu(self) -> bool {
        matches!(self.guest_type(), Some(GuestType::Qemu))
    }

    pub const fn is_lxc(self) -> bool {
        matches!(self.guest_type(), Some(GuestType::Lxc))
    }

    /// The PVE storage content type of a storage-file kind; `None` for
    /// every other class.
    pub const fn content_type(self) -> Option<&'static str> {
        match self {
            Kind::ISO => Some("iso"),
            Kind::CTTemplate => Some("vztmpl"),
            Kind::DiskImage => Some("import"),
            Kind::VM
            | Kind::TemplateVM
            | Kind::LXC
            | Kind::TemplateCT
            | Kind::Pool
            | Kind::BackupJob
            | Kind::HAResource
            | Kind::HARule
            | Kind::ReplicationJob
            | Kind::FirewallAlias
            | Kind::FirewallIPSet
            | Kind::SecurityGroup
            | Kind::ClusterFirewall => None,
        }
    }

    /// The kind in lower case, as commands take it (`proxops schema vm`,
    /// `explain lxc.spec.memory`) and as its docs page and schema file are
    /// named (docs/resources/vm.md, docs/schema/vm.json).
    pub const fn word(self) -> &'static str {
        match self {
            Kind::VM => "vm",
            Kind::TemplateVM => "templatevm",
            Kind::LXC => "lxc",
            Kind::TemplateCT => "templatect",
            Kind::ISO => "iso",
            Kind::CTTemplate => "cttemplate",
            Kind::DiskImage => "diskimage",
            Kind::Pool => "pool",
            Kind::BackupJob => "backupjob",
            Kind::HAResource => "haresource",
            Kind::HARule => "harule",
            Kind::ReplicationJob => "replicationjob",
            Kind::FirewallAlias => "firewallalias",
            Kind::FirewallIPSet => "firewallipset",
            Kind::SecurityGroup => "securitygroup",
            Kind::ClusterFirewall => "clusterfirewall",
        }
    }

    /// Every kind's [`Kind::as_str`], in [`Kind::ALL`]'s order.
    pub const NAMES: [&'static str; Kind::ALL.len()] = per_kind!(as_str);

    /// Every kind's [`Kind::dir`], in [`Kind::ALL`]'s order.
    pub const DIRS: [&'static str; Kind::ALL.len()] = per_kind!(dir);

    /// Every kind's [`Kind::word`], in [`Kind::ALL`]'s order.
    pub const WORDS: [&'static str; Kind::ALL.len()] = per_kind!(word);
}

/// What a kind's objects are on PVE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// A qemu VM or an LXC container: a vmid on a node, owned through the
    /// `proxops` tag.
    Guest(GuestType),
    /// A file in a node's storage (an ISO, a container template, a disk
    /// image), named by its storage and file name.
    StorageFile,
    /// A cluster-wide object (a pool, a job, an HA resource or rule),
    /// named by its PVE id and owned through the marker in its `comment`.
    ClusterObject,
    /// PVE's firewall at cluster level: an alias, an IP set or a security
    /// group (owned through the marker in its `comment`), or the cluster's
    /// own options and rules (one per cluster). Each is a list PVE edits
    /// one entry per call, every write checked against the digest of the
    /// list it changes (pve-firewall `API2/Firewall/*.pm`).
    Firewall,
}

/// The two kinds of PVE guest: qemu virtual machines and LXC containers.
/// The one guest type of the project: the live model, `spec.extra`'s
/// rules and the planner all speak of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum GuestType {
    Qemu,
    Lxc,
}

impl GuestType {
    /// `/cluster/resources` `type`: `qemu` (older PVE also `qm`) or `lxc`.
    pub fn from_resource_type(t: &str) -> Option<GuestType> {
        match t {
            "qemu" | "qm" => Some(GuestType::Qemu),
            "lxc" => Some(GuestType::Lxc),
            _ => None,
        }
    }

    /// The path segment below `/nodes/{node}/`.
    pub fn path_segment(self) -> &'static str {
        match self {
            GuestType::Qemu => "qemu",
            GuestType::Lxc => "lxc",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! string_newtype {
    ($(#[$m:meta])* $name:ident, $check:path, $schema:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn new(s: &str) -> Result<Self, NameError> {
                $check(s)?;
                Ok(Self(s.to_owned()))
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                Self::new(s)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::from_saved(&s).map_err(serde::de::Error::custom)
            }
        }

        /// The same pattern `new` checks, for editors.
        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $schema
            }
        }
    };
}

string_newtype!(
    /// `metadata.name`: lowercase letters and digits, single dashes between them.
    ResourceName,
    check_resource_name,
    schemars::json_schema!({
        "description": "1-63 lowercase letters and digits with single dashes between them, e.g. \"web-01\".",
        "type": "string",
        "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$",
        "maxLength": 63
    })
);
string_newtype!(
    /// A cluster name: `^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$`, 1–64 characters (§3.4).
    ClusterName,
    check_cluster_name,
    schemars::json_schema!({
        "description": "1-64 lowercase letters, digits and '-', not starting or ending with '-'.",
        "type": "string",
        "pattern": "^[a-z0-9]([a-z0-9-]*[a-z0-9])?$",
        "maxLength": 64
    })
);
string_newtype!(
    /// A PVE node name as it appears in `/nodes/{node}`: never a hostname.
    NodeName,
    check_node_name,
    schemars::json_schema!({
        "description": "A PVE node name: 1-63 letters, digits and '-' (no spaces, dots or '/'), not starting or ending with '-'.",
        "type": "string",
        "pattern": "^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$",
        "maxLength": 63
    })
);
string_newtype!(
    /// A PVE storage id (`local`, `local-lvm`, `ceph_pool.1`).
    StorageId,
    check_storage_id,
    schemars::json_schema!({
        "description": "A PVE storage id: a letter, then letters, digits, '-', '_' or '.', ending in a letter or digit.",
        "type": "string",
        "pattern": "^[A-Za-z][A-Za-z0-9_.-]*[A-Za-z0-9]$",
        "maxLength": 64
    })
);

/// A DNS-label-like name: 1..=`max` bytes that `allowed` accepts or '-',
/// not starting or ending with '-' and, unless `double_dash`, without "--".
/// The error reads "invalid {what} {s:?}: {hint}".
impl ResourceName {
    fn from_saved(s: &str) -> Result<Self, NameError> {
        Self::new(s)
    }
}

impl ClusterName {
    fn from_saved(s: &str) -> Result<Self, NameError> {
        Self::new(s)
    }
}

impl StorageId {
    fn from_saved(s: &str) -> Result<Self, NameError> {
        Self::new(s)
    }
}

/// What a plan shows as the node of a cluster-level object (a pool, a
/// backup job): PVE keeps them cluster-wide, in files every node shares.
const CLUSTER_WIDE: &str = "-";

impl NodeName {
    /// The node of an action on a cluster-level object: `-`, which no PVE
    /// node is called (a manifest can never name it).
    pub fn cluster_wide() -> NodeName {
        NodeName(CLUSTER_WIDE.to_owned())
    }

    /// Whether this is [`NodeName::cluster_wide`].
    pub fn is_cluster_wide(&self) -> bool {
        self.0 == CLUSTER_WIDE
    }

    /// A saved plan reads back the cluster-wide node it wrote.
    fn from_saved(s: &str) -> Result<Self, NameError> {
        if s == CLUSTER_WIDE {
            return Ok(Self::cluster_wide());
        }
        Self::new(s)
    }
}

fn check_label(
    s: &str,
    max: usize,
    allowed: fn(u8) -> bool,
    double_dash: bool,
    (what, hint): (&str, &str),
) -> Result<(), NameError> {
    let ok = !s.is_empty()
        && s.len() <= max
        && s.bytes().all(|b| allowed(b) || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
        && (double_dash || !s.contains("--"));
    if ok {
        Ok(())
    } else {
        Err(NameError(format!("invalid {what} {s:?}: {hint}")))
    }
}

fn lower_or_digit(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn check_resource_name(s: &str) -> Result<(), NameError> {
    let hint =
        "use 1-63 lowercase letters and digits with single dashes between them, e.g. \"web-01\"";
    check_label(s, 63, lower_or_digit, false, ("name", hint))
}

fn check_cluster_name(s: &str) -> Result<(), NameError> {
    let hint = "use 1-64 lowercase letters, digits and '-', not starting or ending with '-'";
    check_label(s, 64, lower_or_digit, true, ("cluster name", hint))
}

fn check_node_name(s: &str) -> Result<(), NameError> {
    // PVE node names are DNS labels: letters, digits and '-'.
    let hint = "a PVE node name is 1-63 letters, digits and '-' (no spaces, dots or '/')";
    check_label(
        s,
        63,
        |b| b.is_ascii_alphanumeric(),
        true,
        ("node name", hint),
    )
}

fn check_storage_id(s: &str) -> Result<(), NameError> {
    // PVE's pve-storage-id format: ^[a-z][a-z0-9\-\_\.]*[a-z0-9]$ (case-insensitive).
    let b = s.as_bytes();
    let ok = b.len() >= 2
        && b.len() <= 64
        && b[0].is_ascii_alphabetic()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(NameError(format!(
            "invalid storage id {s:?}: a letter, then letters, digits, '-', '_' or '.', ending in a letter or digit"
        )))
    }
}

/// A PVE guest id. PVE accepts 100..=999_999_999; ProxOps never allocates one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Vmid(u32);

impl Vmid {
    pub const MIN: u32 = 100;
    pub const MAX: u32 = 999_999_999;

    pub fn new(n: u64) -> Result<Vmid, NameError> {
        if (Vmid::MIN as u64..=Vmid::MAX as u64).contains(&n) {
            Ok(Vmid(n as u32))
        } else {
            Err(NameError(format!(
                "invalid vmid {n}: PVE guest ids are whole numbers from {} to {}",
                Vmid::MIN,
                Vmid::MAX
            )))
        }
    }

    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Vmid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl<'de> Deserialize<'de> for Vmid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        if n < 0 {
            return Err(serde::de::Error::custom(format!(
                "invalid vmid {n}: PVE guest ids are whole numbers from {} to {}",
                Vmid::MIN,
                Vmid::MAX
            )));
        }
        Vmid::new(n as u64).map_err(serde::de::Error::custom)
    }
}

/// Whole numbers from 100 to 999999999, as `Deserialize` takes them (a
/// quoted number is refused).
impl schemars::JsonSchema for Vmid {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Vmid".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A PVE guest id: a whole number from 100 to 999999999.",
            "type": "integer",
            "minimum": Vmid::MIN,
            "maximum": Vmid::MAX
        })
    }
}

/// `Kind/name`: ProxOps' own identity of a desired object (§5).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Ref {
    pub kind: Kind,
    pub name: ResourceName,
}

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// The name PVE stores a downloaded file under (pve-storage
/// `src/PVE/Storage.pm` `normalize_content_filename`): everything up to the
/// last `/` or `\\` dropped, then every character outside
/// `[a-zA-Z0-9_.-]` replaced by `_`. A name this leaves unchanged is one
/// PVE keeps as written.
pub fn pve_content_filename(name: &str) -> String {
    let name = name.strip_suffix('\n').unwrap_or(name);
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// "a" or "an", as an operator would say the kind aloud (an LXC, an ISO).
pub fn article(kind: Kind) -> &'static str {
    if matches!(kind, Kind::LXC | Kind::ISO) {
        "an"
    } else {
        "a"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kinds_word_is_its_name_in_lower_case() {
        for k in Kind::ALL {
            assert_eq!(k.word(), k.as_str().to_ascii_lowercase());
        }
        assert_eq!(Kind::WORDS.len(), Kind::ALL.len());
        assert_eq!(Kind::DIRS[Kind::ALL.len() - 1], Kind::ClusterFirewall.dir());
    }

    #[test]
    fn exactly_the_storage_file_kinds_have_a_content_type() {
        for k in Kind::ALL {
            assert_eq!(
                k.content_type().is_some(),
                k.class() == Class::StorageFile,
                "{k}"
            );
            assert_eq!(k.guest_type().is_some(), k.is_guest(), "{k}");
        }
    }

    #[test]
    fn resource_names_are_lowercase_with_single_dashes() {
        assert!(ResourceName::new("web-01").is_ok());
        for bad in ["", "Web", "-a", "a-", "a--b", "a_b", "a/b", "a.b"] {
            assert!(ResourceName::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_names_never_hold_a_slash_or_dot() {
        assert!(NodeName::new("pve-01").is_ok());
        for bad in ["", "pve 1", "pve/1", "pve.example.com"] {
            assert!(NodeName::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn vmid_range_is_pves() {
        assert!(Vmid::new(99).is_err());
        assert!(Vmid::new(100).is_ok());
        assert!(Vmid::new(1_000_000_000).is_err());
    }

    #[test]
    fn storage_ids_follow_pve_grammar() {
        assert!(StorageId::new("local-lvm").is_ok());
        assert!(StorageId::new("ceph_pool.1").is_ok());
        for bad in ["", "1abc", "a", "a/b", "a:b"] {
            assert!(StorageId::new(bad).is_err(), "{bad}");
        }
    }
}
