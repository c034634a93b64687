//! The manifest model: the envelope and the seven kinds' specs, exactly as
//! an operator writes them (spec §5–§10), parsed into typed values.
//!
//! Unknown fields are errors (a typo must never silently drop a setting).
//! Rules that need no other manifest are enforced here by `validate`; rules
//! across manifests (references, vmid collisions, cycles) are the
//! composition's. This module never decides what PVE should do.

use core::net::IpAddr;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::extra::{self, AllowList, GuestType};
use crate::names::{Kind, NodeName, ResourceName, StorageId, Vmid};
use crate::units::Quantity;

pub use crate::diag::FieldError;
pub use crate::names::{
    ANNOTATION_ADOPTED_ID, ANNOTATION_ADOPTED_VMID, ANNOTATION_DEPENDS_ON,
    ANNOTATION_DISRUPTION_GROUP, ANNOTATION_PRUNE, ANNOTATION_RESTART_POLICY,
    ANNOTATION_SHUTDOWN_TIMEOUT, API_VERSION, LEGACY_TAG, NO_PRUNE_TAG, OWNERSHIP_TAG,
};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// The object's name, unique per kind in a cluster: 1-63 lowercase letters
    /// and digits with single dashes between them (e.g. `web-01`). A VM's PVE
    /// `name` unless `spec.pve-name` is set; a container's `hostname` unless
    /// `spec.dns.hostname` is set.
    #[schemars(extend("x-pve-key" = "name (VM), hostname (LXC)", "x-default" = "— (required)", "x-impact" = "live"))]
    pub name: ResourceName,
    /// Free-form labels for people and tools; ProxOps reads none of them.
    #[schemars(extend("x-default" = "none"))]
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `proxops/depends-on: "Kind:name,Kind:name"` (extra ordering),
    /// `proxops/prune: disabled` (never prune this object),
    /// `proxops/restart-policy: never|reboot` (over the cluster's
    /// `restart-policy`), `proxops/shutdown-timeout` (`30s`, `5m`; at least
    /// `1s`, over the cluster's `shutdown-timeout`) and `proxops/adopted-vmid`
    /// (written by `adopt`). Any other `proxops/` key is refused; other keys
    /// are free-form.
    #[schemars(extend("x-default" = "none"))]
    #[schemars(schema_with = "crate::schema_attrs::annotations")]
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Metadata {
    /// `proxops/prune: disabled`.
    pub fn prune_disabled(&self) -> bool {
        self.annotations
            .get(ANNOTATION_PRUNE)
            .is_some_and(|v| v.trim() == "disabled")
    }

    /// The policy named by `proxops/restart-policy` (validated at load).
    pub fn restart_policy(&self) -> Option<crate::policy::RestartPolicy> {
        let v = self.annotations.get(ANNOTATION_RESTART_POLICY)?;
        crate::policy::RestartPolicy::parse(v).ok()
    }

    /// The vmid named by `proxops/adopted-vmid`, when it is one.
    pub fn adopted_vmid(&self) -> Option<Vmid> {
        let v = self.annotations.get(ANNOTATION_ADOPTED_VMID)?;
        Vmid::new(v.trim().parse().ok()?).ok()
    }

    /// The timeout named by `proxops/shutdown-timeout`, when it is a valid
    /// duration above zero.
    pub fn shutdown_timeout(&self) -> Option<std::time::Duration> {
        let v = self.annotations.get(ANNOTATION_SHUTDOWN_TIMEOUT)?;
        let d = crate::units::Duration::parse(v).ok()?;
        (d.as_millis() > 0).then(|| d.as_std())
    }
}

/// One manifest document of a given spec type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Document<S> {
    /// Always `proxops/v1alpha1`.
    #[schemars(extend("x-default" = "— (required)"))]
    pub api_version: String,
    /// The kind: VM, TemplateVM, LXC, TemplateCT, ISO, CTTemplate, DiskImage,
    /// Pool, BackupJob, HAResource, HARule, ReplicationJob, FirewallAlias,
    /// FirewallIPSet, SecurityGroup or ClusterFirewall;
    /// it must match the kind directory the file lives under.
    #[schemars(extend("x-default" = "— (required)"))]
    pub kind: String,
    /// The object's name, labels and annotations.
    #[schemars(extend("x-default" = "— (required)"))]
    pub metadata: Metadata,
    /// What the object is: the kind's fields.
    #[schemars(extend("x-default" = "— (required)"))]
    pub spec: S,
}

/// A parsed manifest's spec, by kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Spec {
    Vm(VmSpec),
    TemplateVm(VmSpec),
    Lxc(LxcSpec),
    TemplateCt(LxcSpec),
    Iso(ArtifactSpec),
    CtTemplate(ArtifactSpec),
    DiskImage(ArtifactSpec),
    Pool(crate::cluster::spec::PoolSpec),
    BackupJob(crate::cluster::spec::BackupJobSpec),
    HaResource(crate::cluster::spec::HaResourceSpec),
    HaRule(crate::cluster::spec::HaRuleSpec),
    ReplicationJob(crate::cluster::spec::ReplicationJobSpec),
    FirewallAlias(crate::firewall::AliasSpec),
    FirewallIpSet(crate::firewall::IpSetSpec),
    SecurityGroup(crate::firewall::SecurityGroupSpec),
    ClusterFirewall(crate::firewall::ClusterFirewallSpec),
}

impl Spec {
    pub fn kind(&self) -> Kind {
        match self {
            Spec::Vm(_) => Kind::VM,
            Spec::TemplateVm(_) => Kind::TemplateVM,
            Spec::Lxc(_) => Kind::LXC,
            Spec::TemplateCt(_) => Kind::TemplateCT,
            Spec::Iso(_) => Kind::ISO,
            Spec::CtTemplate(_) => Kind::CTTemplate,
            Spec::DiskImage(_) => Kind::DiskImage,
            Spec::Pool(_) => Kind::Pool,
            Spec::BackupJob(_) => Kind::BackupJob,
            Spec::HaResource(_) => Kind::HAResource,
            Spec::HaRule(_) => Kind::HARule,
            Spec::ReplicationJob(_) => Kind::ReplicationJob,
            Spec::FirewallAlias(_) => Kind::FirewallAlias,
            Spec::FirewallIpSet(_) => Kind::FirewallIPSet,
            Spec::SecurityGroup(_) => Kind::SecurityGroup,
            Spec::ClusterFirewall(_) => Kind::ClusterFirewall,
        }
    }

    pub fn vm(&self) -> Option<&VmSpec> {
        match self {
            Spec::Vm(s) | Spec::TemplateVm(s) => Some(s),
            _ => None,
        }
    }

    pub fn lxc(&self) -> Option<&LxcSpec> {
        match self {
            Spec::Lxc(s) | Spec::TemplateCt(s) => Some(s),
            _ => None,
        }
    }

    pub fn artifact(&self) -> Option<&ArtifactSpec> {
        match self {
            Spec::Iso(s) | Spec::CtTemplate(s) | Spec::DiskImage(s) => Some(s),
            _ => None,
        }
    }

    /// `(node, vmid)` of a guest.
    pub fn guest_id(&self) -> Option<(&NodeName, Vmid)> {
        match self {
            Spec::Vm(s) | Spec::TemplateVm(s) => Some((&s.node, s.vmid)),
            Spec::Lxc(s) | Spec::TemplateCt(s) => Some((&s.node, s.vmid)),
            _ => None,
        }
    }

    /// Every node the object lives on.
    pub fn nodes(&self) -> Vec<NodeName> {
        match self {
            Spec::Vm(s) | Spec::TemplateVm(s) => vec![s.node.clone()],
            Spec::Lxc(s) | Spec::TemplateCt(s) => vec![s.node.clone()],
            Spec::Iso(s) | Spec::CtTemplate(s) | Spec::DiskImage(s) => s.all_nodes(),
            Spec::Pool(_)
            | Spec::HaResource(_)
            | Spec::FirewallAlias(_)
            | Spec::FirewallIpSet(_)
            | Spec::SecurityGroup(_)
            | Spec::ClusterFirewall(_) => Vec::new(),
            Spec::HaRule(r) => r
                .nodes
                .iter()
                .filter_map(|n| crate::cluster::spec::parse_node_priority(n).map(|(n, _)| n))
                .collect(),
            Spec::BackupJob(b) => b.node.iter().cloned().collect(),
            Spec::ReplicationJob(j) => vec![j.target.clone()],
        }
    }
}

impl Spec {
    /// The name a cluster-level firewall manifest gives its object in PVE
    /// (`spec.name`, else `metadata.name`); `None` for other kinds.
    pub fn firewall_name(&self, metadata_name: &ResourceName) -> Option<String> {
        let own =
            |name: &Option<String>| Some(name.clone().unwrap_or_else(|| metadata_name.to_string()));
        match self {
            Spec::FirewallAlias(a) => own(&a.name),
            Spec::FirewallIpSet(s) => own(&s.name),
            Spec::SecurityGroup(g) => own(&g.name),
            _ => None,
        }
    }

    /// Every object of the cluster's firewall this manifest's rules and
    /// IP set entries name.
    pub fn firewall_refs(&self) -> Vec<crate::firewall::spec::ClusterRef> {
        use crate::firewall::spec::{entry_refs, rule_refs};
        let none = crate::firewall::Known::default();
        let guest = |fw: &Option<crate::firewall::GuestFirewall>| {
            fw.as_ref()
                .map(|f| f.cluster_refs("spec.firewall"))
                .unwrap_or_default()
        };
        match self {
            Spec::FirewallIpSet(s) => entry_refs(s, "spec", &none),
            Spec::SecurityGroup(g) => rule_refs(&g.rules, "spec.rules", &none),
            Spec::ClusterFirewall(c) => rule_refs(&c.rules, "spec.rules", &none),
            Spec::Vm(v) | Spec::TemplateVm(v) => guest(&v.firewall),
            Spec::Lxc(l) | Spec::TemplateCt(l) => guest(&l.firewall),
            _ => Vec::new(),
        }
    }
}

/// One firewall manifest's own rules (a cluster-level firewall kind's
/// `spec`), its PVE name being `spec.name` or else `metadata.name`.
fn validate_firewall(metadata_name: &ResourceName, spec: &Spec) -> Vec<FieldError> {
    use crate::firewall::spec::{check_alias, check_group, check_ipset, check_rules};
    let name = spec.firewall_name(metadata_name).unwrap_or_default();
    match spec {
        Spec::FirewallAlias(a) => check_alias(&name, a, "spec"),
        Spec::FirewallIpSet(s) => check_ipset(&name, s, "spec"),
        Spec::SecurityGroup(g) => check_group(&name, g, "spec"),
        Spec::ClusterFirewall(c) => {
            check_rules(&c.rules, crate::firewall::RuleEnv::Cluster, "spec.rules")
                .err()
                .unwrap_or_default()
        }
        _ => Vec::new(),
    }
}

// ---------------------------------------------------------------- power

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PowerState {
    Started,
    Stopped,
}

// ---------------------------------------------------------------- VM

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VmSpec {
    /// The PVE node the VM lives on; it must be in the cluster's `nodes`. Never
    /// migrated: if the vmid lives on another node, the plan shows an anomaly
    /// ("migrate it back or change spec.node") and creates nothing.
    #[schemars(extend("x-pve-key" = "path", "x-default" = "— (required)", "x-impact" = "anomaly"))]
    pub node: NodeName,
    /// The PVE guest id, unique per cluster across VMs and containers. A new
    /// vmid is a new guest; the old tagged guest is neither updated nor pruned
    /// but reported as a `needs_person` anomaly. A vmid held by a guest without
    /// the `proxops` tag is an anomaly too: never taken over.
    #[schemars(extend("x-pve-key" = "path", "x-default" = "— (required)", "x-impact" = "anomaly"))]
    pub vmid: Vmid,
    /// `started` or `stopped`. `started`: `status/start`; `stopped`:
    /// `status/shutdown` with the shutdown timeout (never `status/stop` unless
    /// `force-stop-after-timeout`); either is confirmed by `status/current`. A
    /// template is never started: `stopped` or left out.
    #[schemars(extend("x-pve-key" = "power", "x-default" = "started", "default" = "started", "x-impact" = "power action"))]
    pub state: Option<PowerState>,
    /// Memory, a whole number of MiB (e.g. `2GiB`, `512MiB`; decimal units such
    /// as GB count powers of 1000).
    pub memory: Quantity,
    /// The ballooning target, a whole number of MiB at most `memory` (e.g.
    /// `1GiB`); `0` turns ballooning off. Absent, PVE balloons with the
    /// whole of `memory` as its target.
    pub balloon: Option<Quantity>,
    /// The CPU model and core count.
    #[schemars(extend("x-default" = "— (required)"))]
    pub cpu: VmCpu,
    /// One entry per disk (at least one, unless `clone`). Not allowed together
    /// with `clone`: the template owns the disk layout. A disk on PVE but not
    /// in the manifest is a `live_only_slot` anomaly, never detached.
    #[schemars(extend("x-pve-key" = "scsiN, virtioN, sataN, ideN", "x-default" = "— (required unless clone)"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disks: Vec<VmDisk>,
    /// One entry per NIC (at least one, unless `clone`). A NIC on PVE but not
    /// in the manifest is a `live_only_slot` anomaly, never detached.
    #[schemars(extend("x-pve-key" = "netN", "x-default" = "— (required unless clone)"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<VmNic>,
    /// Sockets, NUMA, machine, firmware, display, serial port, CD drive, EFI
    /// disk, cloud-init drive, TPM and PCI devices.
    #[schemars(extend("x-default" = "not owned"))]
    pub hardware: Option<VmHardware>,
    /// Boot and guest options. A boolean option is owned in both states: `true`
    /// and `false` are compared and written (`protection: false` turns
    /// protection off); absent leaves PVE's value alone.
    #[schemars(extend("x-default" = "not owned"))]
    pub options: Option<VmOptions>,
    /// Cloud-init data, read by the guest at boot, so every change is `reboot`.
    /// Secrets come from the cluster's SOPS file by reference.
    #[schemars(extend("x-default" = "not owned"))]
    pub cloud_init_data: Option<CloudInitData>,
    /// The PVE `name` when it is not `metadata.name`: a DNS name of letters,
    /// digits, '-' and '.'.
    #[schemars(extend("x-pve-key" = "name", "x-default" = "metadata.name", "x-impact" = "live"))]
    #[schemars(length(min = 1, max = 63), pattern(r"^[A-Za-z0-9.-]+$"))]
    pub pve_name: Option<String>,
    /// The PVE description (the notes shown in the web UI).
    #[schemars(extend("x-pve-key" = "description", "x-default" = "not owned", "x-impact" = "live"))]
    pub pve_description: Option<String>,
    /// PVE tags. ProxOps always adds `proxops` (do not write it yourself) and
    /// `proxops-noprune` for `proxops/prune: disabled`. Compared as PVE stores
    /// tags: a set, sorted, without duplicates, ignoring case; an upper-case
    /// tag is refused (PVE lower-cases it) unless the cluster declares
    /// `tag-style: case-sensitive`.
    #[schemars(extend("x-pve-key" = "tags", "x-default" = "`proxops` only", "x-impact" = "live"))]
    #[schemars(inner(pattern(r"^[A-Za-z0-9_][A-Za-z0-9_+.-]*$")), transform = crate::schema_attrs::not_ownership_tag)]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// A Pool `metadata.name`: the guest is a member of that PVE pool
    /// (`pool` at create, then `PUT /pools` with `vms`, moving it from
    /// another pool). Absent: the guest's pool is not ProxOps' business.
    #[schemars(extend("x-pve-key" = "pool (create), PUT /pools vms=", "x-default" = "not managed", "x-impact" = "live"))]
    pub pool: Option<ResourceName>,
    /// PVE keys and values ProxOps does not model (`keyboard: de`), sent as is
    /// after the structured fields on create and on every drift update.
    /// Structural keys (a structured field writes them) and API control
    /// parameters are always refused; host-level keys (`hookscript`, `args`,
    /// `usbN`, …) and keys PVE never reads back as written (`vmgenid`) only
    /// pass when the cluster lists the exact key in `allow-extra-keys`.
    #[schemars(extend("x-pve-key" = "<key>", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[schemars(transform = crate::schema_attrs::qemu_extra_keys)]
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
    /// A TemplateVM `metadata.name`: the VM is created as a full clone of it,
    /// then gets the VM's own values (then no `disks`). A live VM is never
    /// re-cloned; cloud-init identity keys the manifest does not declare are
    /// deleted from the clone.
    #[schemars(extend("x-pve-key" = "POST …/clone", "x-default" = "not cloned", "x-impact" = "create-only"))]
    pub clone: Option<ResourceName>,
    /// The guest's firewall (`/nodes/{node}/{type}/{vmid}/firewall`):
    /// options, rules, aliases and IP sets. Declaring it makes the guest's
    /// rule list ProxOps': a rule added by hand is drift. Absent: the
    /// guest's firewall is not ProxOps' business.
    #[schemars(extend("x-pve-key" = "…/firewall", "x-default" = "not managed", "x-impact" = "live"))]
    pub firewall: Option<crate::firewall::GuestFirewall>,
}

impl VmSpec {
    /// A VM of `node`/`vmid` with only its required fields: every optional
    /// field absent (the start of an adopted manifest).
    pub fn minimal(node: NodeName, vmid: Vmid, memory: Quantity, cpu: VmCpu) -> VmSpec {
        VmSpec {
            node,
            vmid,
            state: None,
            memory,
            balloon: None,
            cpu,
            disks: Vec::new(),
            networks: Vec::new(),
            hardware: None,
            options: None,
            cloud_init_data: None,
            pve_name: None,
            pve_description: None,
            tags: Vec::new(),
            pool: None,
            extra: BTreeMap::new(),
            clone: None,
            firewall: None,
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VmCpu {
    /// The PVE CPU model, e.g. `host` or `x86-64-v2-AES`.
    #[schemars(extend("x-pve-key" = "cpu", "x-default" = "— (required)", "x-impact" = "stop-start"))]
    #[schemars(pattern(r"^[^, =]*[^, =\s][^, =]*$"))]
    #[serde(rename = "type")]
    pub cpu_type: String,
    /// Cores per socket, at least 1. PVE hot-plugs only `vcpus`, never `cores`,
    /// even with cpu hotplug.
    #[schemars(range(min = 1))]
    pub cores: u32,
    /// Host CPUs' worth of time, 0 (unlimited) to 128, fractions allowed: PVE
    /// changes the guest's CPU quota at once.
    #[schemars(range(min = 0, max = 128))]
    pub limit: Option<f64>,
    /// Parsed and kept, never sent (a documented gap); raw QEMU flags go in
    /// `extra.args`.
    #[schemars(extend("x-pve-key" = "—", "x-default" = "none", "x-impact" = "never sent"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VmDisk {
    /// The storage of the disk's volume. Another storage is an anomaly
    /// (`data_loss`): PVE would re-create the volume; move it by hand (Move
    /// Storage).
    #[schemars(extend("x-pve-key" = "the volume's storage", "x-default" = "— (required)", "x-impact" = "anomaly"))]
    pub storage: StorageId,
    /// The volume's size, a whole number of KiB, sent in GiB; required unless
    /// `image`, left out with it (PVE sizes an imported disk from the image).
    /// Larger: a `resize` action (PVE grows the disk online); smaller: a
    /// `shrink` anomaly, never done.
    #[schemars(extend("x-pve-key" = "the volume's size", "x-default" = "— (required unless image)", "x-impact" = "live", "x-impact-note" = "a larger size is a resize action, grown online; a smaller one is a shrink anomaly, never done"))]
    pub size: Option<Quantity>,
    /// A DiskImage `metadata.name` to import the disk from; create-only: PVE
    /// does not report `import-from` back.
    #[schemars(extend("x-pve-key" = "import-from=<DiskImage volid>", "x-default" = "none", "x-impact" = "create-only"))]
    pub image: Option<ResourceName>,
    /// The slot: `scsi0`-`scsi30`, `virtio0`-`virtio15`, `sata0`-`sata5` or
    /// `ide0`-`ide3`. A different slot is a new disk, and the old slot becomes
    /// a `live_only_slot` anomaly.
    #[schemars(extend("x-pve-key" = "scsiN, virtioN, sataN, ideN", "x-default" = "scsi<index>", "x-impact" = "stop-start", "x-impact-note" = "a new disk on scsiN or virtioN is live when the VM's hotplug has disk"))]
    #[schemars(pattern(r"^(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5]|ide[0-3])$"))]
    pub interface: Option<String>,
    /// The VM-wide SCSI controller; the first disk that declares one wins.
    #[schemars(extend("x-pve-key" = "scsihw", "x-default" = "not owned (PVE: lsi)", "x-impact" = "stop-start"))]
    #[schemars(transform = crate::schema_attrs::one_of(SCSI_CONTROLLERS))]
    pub controller: Option<String>,
    /// A separate I/O thread for the disk.
    #[schemars(extend("x-pve-key" = ",iothread=1", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub iothread: Option<bool>,
    /// `on` passes discards (TRIM) to the storage; `ignore` does not.
    #[schemars(extend("x-pve-key" = ",discard=on|ignore", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub discard: Option<Discard>,
    /// Present the disk as an SSD: scsi, sata and ide only (PVE rejects it on
    /// virtio).
    #[schemars(extend("x-pve-key" = ",ssd=1", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub ssd: Option<bool>,
    /// The asynchronous I/O mode: `native`, `threads` or `io_uring`.
    #[schemars(extend("x-pve-key" = ",aio=native|threads|io_uring", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub aio: Option<Aio>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Discard {
    Ignore,
    On,
}

impl Discard {
    pub fn as_str(self) -> &'static str {
        match self {
            Discard::Ignore => "ignore",
            Discard::On => "on",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Aio {
    Native,
    Threads,
    IoUring,
}

impl Aio {
    pub fn as_str(self) -> &'static str {
        match self {
            Aio::Native => "native",
            Aio::Threads => "threads",
            Aio::IoUring => "io_uring",
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VmNic {
    /// The NIC model: virtio, e1000, e1000e, rtl8139, vmxnet3, …
    #[schemars(extend("x-pve-key" = "netN model", "x-default" = "virtio", "default" = "virtio", "x-impact" = "stop-start", "x-impact-note" = "live when the VM's hotplug has network"))]
    #[schemars(transform = crate::schema_attrs::one_of(VM_NIC_MODELS))]
    pub model: Option<String>,
    /// The Linux bridge the NIC is plugged into, e.g. `vmbr0`.
    #[schemars(extend("x-pve-key" = ",bridge=", "x-default" = "— (required)", "x-impact" = "live"))]
    #[schemars(pattern(r"^[A-Za-z0-9._-]{1,15}$"))]
    pub bridge: String,
    /// The MAC address, six hex pairs (`bc:24:11:00:00:01`). Left out, PVE
    /// generates one (upper case) and ProxOps keeps it; compared ignoring case,
    /// and an unchanged address is written back as PVE spells it.
    #[schemars(extend("x-pve-key" = "netN model=<MAC>", "x-default" = "not owned", "x-impact" = "stop-start", "x-impact-note" = "live when the VM's hotplug has network"))]
    #[schemars(pattern(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"))]
    pub mac: Option<String>,
    /// The VLAN tag, 1-4094; `0` is untagged and removes a live tag.
    #[schemars(extend("x-pve-key" = ",tag=", "x-default" = "not owned: a live tag stays", "x-impact" = "live"))]
    #[schemars(range(max = 4094))]
    pub vlan: Option<u32>,
    /// The rate limit in MB/s (megabytes per second); `0` is unlimited and
    /// removes a live rate.
    #[schemars(extend("x-pve-key" = ",rate=", "x-default" = "not owned: a live rate stays", "x-impact" = "live"))]
    #[schemars(range(min = 0))]
    pub rate_limit: Option<f64>,
    /// PVE's firewall on this NIC; `false` turns a live firewall off.
    #[schemars(extend("x-pve-key" = ",firewall=1", "x-default" = "not owned: PVE's stays", "x-impact" = "live"))]
    pub firewall: Option<bool>,
    /// The NIC's slot, `net0`-`net31`. Another slot is a new NIC; the old one
    /// becomes a `live_only_slot` anomaly.
    #[schemars(extend("x-pve-key" = "netN", "x-default" = "net<index>", "x-impact" = "stop-start", "x-impact-note" = "a new NIC is live when the VM's hotplug has network"))]
    #[schemars(pattern(r"^net([0-9]|[12][0-9]|3[01])$"))]
    pub slot: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VmHardware {
    /// The machine type: `i440fx` (sent as `pc`), `q35`, or a pinned version
    /// (`pc-q35-9.0`); a pinned version of the same family counts as equal.
    #[schemars(extend("x-pve-key" = "machine", "x-default" = "not owned", "x-impact" = "stop-start"))]
    #[schemars(pattern(r"^(i440fx|q35|pc|pc-.*)$"))]
    pub machine: Option<String>,
    /// The firmware: `seabios` or `ovmf` (UEFI, needed for an EFI disk).
    #[schemars(extend("x-pve-key" = "bios", "x-default" = "not owned (PVE: seabios)", "x-impact" = "stop-start"))]
    pub bios: Option<Bios>,
    /// The display, e.g. `std`, `virtio` or `serial0`.
    #[schemars(extend("x-pve-key" = "vga", "x-default" = "not owned", "x-impact" = "reboot"))]
    pub display: Option<String>,
    /// CPU sockets, at least 1.
    #[schemars(range(min = 1))]
    pub sockets: Option<u32>,
    /// NUMA emulation; with memory hotplug it lets PVE change memory live.
    pub numa: Option<bool>,
    /// The first serial port, e.g. `socket`.
    #[schemars(extend("x-pve-key" = "serial0", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub serial0: Option<String>,
    /// The IDE CD drive: `ide2`, or `ide3` when the cloud-init drive is
    /// enabled.
    #[schemars(extend("x-pve-key" = "ide2 or ide3", "x-default" = "not owned"))]
    pub cdrom: Option<Cdrom>,
    /// The EFI variables disk (needs `bios: ovmf`).
    #[schemars(extend("x-pve-key" = "efidisk0", "x-default" = "not owned"))]
    pub efi_disk: Option<EfiDisk>,
    /// The cloud-init drive (PVE allows one per VM).
    #[schemars(extend("x-pve-key" = "ide2 (cloud-init drive)", "x-default" = "not owned"))]
    pub cloud_init: Option<CloudInitDrive>,
    /// The TPM state volume.
    #[schemars(extend("x-pve-key" = "tpmstate0", "x-default" = "not owned"))]
    pub tpm: Option<Tpm>,
    /// PCI devices passed through from the host. A `hostpciN` on PVE but not in
    /// the manifest is a `live_only_slot` anomaly, never removed.
    #[schemars(extend("x-pve-key" = "hostpciN", "x-default" = "none"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pci_devices: Vec<PciDevice>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Bios {
    Seabios,
    Ovmf,
}

impl Bios {
    pub fn as_str(self) -> &'static str {
        match self {
            Bios::Seabios => "seabios",
            Bios::Ovmf => "ovmf",
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Cdrom {
    /// An ISO `metadata.name` to insert, or `none` to own an empty drive. PVE
    /// swaps the medium of a running VM at once; a new CD drive is a
    /// `stop-start`.
    #[schemars(extend("x-pve-key" = "ide2 or ide3", "x-default" = "not owned", "x-impact" = "live", "x-impact-note" = "a new CD drive: stop-start"))]
    #[schemars(pattern(r"^\s*(none|[a-z0-9]+(-[a-z0-9]+)*)?\s*$"))]
    pub iso: Option<String>,
    /// `cdrom` or `disk`.
    #[schemars(extend("x-pve-key" = ",media=", "x-default" = "cdrom", "default" = "cdrom", "x-impact" = "stop-start"))]
    pub media: Option<CdMedia>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CdMedia {
    Cdrom,
    Disk,
}

impl CdMedia {
    pub fn as_str(self) -> &'static str {
        match self {
            CdMedia::Cdrom => "cdrom",
            CdMedia::Disk => "disk",
        }
    }
}

/// What `cdrom.iso` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CdromIntent {
    /// No IDE CD slot is owned.
    NotOwned,
    /// The slot is owned and empty (`none`).
    Detach,
    /// The slot holds this ISO.
    Attach(ResourceName),
}

impl Cdrom {
    pub fn intent(&self) -> CdromIntent {
        match self.iso.as_deref().map(str::trim) {
            None | Some("") => CdromIntent::NotOwned,
            Some("none") => CdromIntent::Detach,
            Some(name) => match ResourceName::new(name) {
                Ok(n) => CdromIntent::Attach(n),
                // validate() reports it; treat as not owned meanwhile.
                Err(_) => CdromIntent::NotOwned,
            },
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EfiDisk {
    /// The storage of the EFI variables volume: created if absent; on another
    /// storage an anomaly (`data_loss`).
    #[schemars(extend("x-pve-key" = "efidisk0", "x-default" = "— (required)", "x-impact" = "stop-start", "x-impact-note" = "on another storage: anomaly"))]
    pub storage: StorageId,
    /// Parsed, not sent: PVE sizes the EFI variables volume itself.
    #[schemars(extend("x-pve-key" = "—", "x-default" = "none", "x-impact" = "never sent"))]
    pub size: Option<Quantity>,
    /// The EFI variables template: `2m` or `4m`, the only values PVE accepts.
    #[schemars(extend("x-pve-key" = ",efitype=", "x-default" = "PVE's", "x-impact" = "create-only"))]
    #[schemars(transform = crate::schema_attrs::one_of(&["2m", "4m"]))]
    pub template: Option<String>,
    /// Secure Boot keys pre-enrolled: `enabled` or `disabled`. Create-only: PVE
    /// uses it only when it creates the EFI disk, so a change on an existing
    /// disk is a `needs_person` anomaly (enrol or clear the keys in the guest's
    /// firmware setup, or remove `efidisk0` by hand so ProxOps creates it
    /// anew).
    #[schemars(extend("x-pve-key" = ",pre-enrolled-keys=", "x-default" = "not owned", "x-impact" = "create-only"))]
    pub secure_boot: Option<SecureBoot>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SecureBoot {
    Enabled,
    Disabled,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CloudInitDrive {
    /// A cloud-init drive, created as `ide2` = `<storage>:cloudinit` if the VM
    /// has none; a live one on any bus and slot is the VM's one drive and stays
    /// where it is.
    #[schemars(extend("x-pve-key" = "ide2 (cloud-init drive)", "x-default" = "— (required)", "x-impact" = "stop-start"))]
    pub enabled: bool,
    /// The drive's storage (one with images content); required when `enabled`.
    /// On another storage: an anomaly.
    #[schemars(extend("x-pve-key" = "ide2 = <storage>:cloudinit", "x-default" = "— (required when enabled)", "x-impact" = "stop-start", "x-impact-note" = "on another storage: anomaly"))]
    pub storage: Option<StorageId>,
    /// Parsed, not sent.
    #[schemars(extend("x-pve-key" = "—", "x-default" = "none", "x-impact" = "never sent"))]
    pub size: Option<Quantity>,
}

impl CloudInitDrive {
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Tpm {
    /// The storage of the TPM state volume: created if absent; on another
    /// storage an anomaly.
    #[schemars(extend("x-pve-key" = "tpmstate0", "x-default" = "— (required)", "x-impact" = "stop-start", "x-impact-note" = "on another storage: anomaly"))]
    pub storage: StorageId,
    /// `v1.2` or `v2.0`. Changing it would re-create the TPM state: an anomaly.
    #[schemars(extend("x-pve-key" = ",version=", "x-default" = "v2.0", "default" = "v2.0", "x-impact" = "anomaly"))]
    #[schemars(transform = crate::schema_attrs::one_of(&["v1.2", "v2.0"]))]
    pub version: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PciDevice {
    /// N in `hostpci<N>` (0-999); `hostpci<N>` is accepted too.
    #[schemars(extend("x-pve-key" = "hostpci<slot>", "x-default" = "— (required)", "x-impact" = "stop-start"))]
    pub slot: PciSlot,
    /// The host PCI address, `[domain:]bus:device[.function]` in hex
    /// (`0000:17:00.0`, `17:00.0`). A raw (non-mapped) device needs `root@pam`
    /// on PVE.
    #[schemars(extend("x-pve-key" = "hostpciN host address", "x-default" = "— (required)", "x-impact" = "stop-start"))]
    #[schemars(pattern(r"^([0-9A-Fa-f]{4,5}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(\.[0-7])?$"))]
    pub device: String,
    /// Pass the device as PCI Express (q35 only).
    #[schemars(extend("x-pve-key" = ",pcie=1", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub pcie: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PciSlot(pub u16);

/// What `Deserialize` takes: a number from 0 to 999, or its text with an
/// optional `hostpci` in front.
impl schemars::JsonSchema for PciSlot {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PciSlot".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "N in hostpci<N>: a number from 0 to 999, or \"hostpci<N>\".",
            "oneOf": [
                {"type": "integer", "minimum": 0, "maximum": 999},
                {"type": "string", "pattern": "^(hostpci)?[+]?0*[0-9]{1,3}$"}
            ]
        })
    }
}

impl<'de> Deserialize<'de> for PciSlot {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Text(String),
        }
        let bad = |s: &dyn std::fmt::Display| {
            serde::de::Error::custom(format!(
                "invalid PCI slot {s}: use a number from 0 to 999 (or \"hostpci<N>\")"
            ))
        };
        let n = match Raw::deserialize(d)? {
            Raw::Int(n) => n,
            Raw::Text(s) => s
                .strip_prefix("hostpci")
                .unwrap_or(&s)
                .parse::<i64>()
                .map_err(|_| bad(&format!("{s:?}")))?,
        };
        if (0..=999).contains(&n) {
            Ok(PciSlot(n as u16))
        } else {
            Err(bad(&n))
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VmOptions {
    /// Start the VM when its node boots.
    pub onboot: Option<bool>,
    /// Start and shutdown order and delays, e.g. `order=2,up=30`.
    #[schemars(extend("x-pve-key" = "startup", "x-default" = "not owned", "x-impact" = "live"))]
    pub startup: Option<String>,
    /// PVE's protection against removal; `false` turns it off, so the guest can
    /// be pruned again.
    pub protection: Option<bool>,
    /// The QEMU guest agent (`enabled=1`; other agent options are kept).
    #[schemars(extend("x-pve-key" = "agent", "x-default" = "not owned", "x-impact" = "reboot"))]
    pub agent: Option<bool>,
    /// ACPI.
    pub acpi: Option<bool>,
    /// A USB tablet pointer.
    pub tablet: Option<bool>,
    /// What PVE may hot-plug: `network`, `disk`, `cpu`, `memory`, `usb`,
    /// `cloudinit`; compared as a set.
    #[schemars(transform = crate::schema_attrs::items_one_of(HOTPLUG_ITEMS))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hotplug: Vec<String>,
    /// Boot devices in order, by slot (`scsi0`, `net0`); PVE `boot` is
    /// written as `order=scsi0;net0`.
    #[schemars(extend("x-pve-key" = "boot", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[schemars(inner(pattern(r"^[^;,=]*[^;,=\s][^;,=]*$")))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boot_order: Vec<String>,
    /// Nested virtualisation: with `cpu.type: host` nothing is sent (the host's
    /// extensions already reach the guest); with any other type `+nested-virt`
    /// is added to the live CPU flags. Needs qemu-server 9.1 or later.
    #[schemars(extend("x-pve-key" = "cpu (,flags=+nested-virt)", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub nested_virt: Option<bool>,
    /// Hide the hypervisor from the guest.
    #[schemars(extend("x-pve-key" = "cpu (,hidden=1)", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub hidden: Option<bool>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CloudInitData {
    /// The user cloud-init creates.
    #[schemars(extend("x-pve-key" = "ciuser", "x-default" = "not owned", "x-impact" = "reboot"))]
    pub ci_user: Option<String>,
    /// OpenSSH public key lines (`<type> <base64 key> [comment]`), compared by
    /// key, not by comment; `["*"]` keeps the live keys. Not together with
    /// `ssh-key-refs`.
    #[schemars(extend("x-pve-key" = "sshkeys", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_keys: Vec<String>,
    /// `cloud-init.ssh-keys.<name>` entries of the cluster's SOPS file. Not
    /// together with `ssh-keys`.
    #[schemars(extend("x-pve-key" = "sshkeys", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[schemars(inner(pattern(r"^cloud-init\.ssh-keys\.[a-z0-9][a-z0-9-]{0,63}$")))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ssh_key_refs: Vec<String>,
    /// `cloud-init.passwords.<name>` in the cluster's SOPS file. PVE only
    /// reports a mask, so ProxOps writes it when absent and never compares the
    /// value.
    #[schemars(extend("x-pve-key" = "cipassword", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[schemars(pattern(r"^cloud-init\.passwords\.[a-z0-9][a-z0-9-]{0,63}$"))]
    pub ci_password_ref: Option<String>,
    /// DNS servers, IP addresses; compared as a set.
    #[schemars(extend("x-pve-key" = "nameserver", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// DNS search domains; compared as a set.
    #[schemars(extend("x-pve-key" = "searchdomain", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub search_domains: Vec<String>,
    /// Addresses per NIC; other live tokens (e.g. IPv6) are kept.
    #[schemars(extend("x-pve-key" = "ipconfigN", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipconfigs: Vec<IpConfig>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct IpConfig {
    /// The N of the NIC's `netN` (0-31).
    #[schemars(extend("x-pve-key" = "ipconfigN", "x-default" = "— (required)", "x-impact" = "reboot"))]
    #[schemars(range(max = 31))]
    pub nic: u32,
    /// The address in CIDR form, e.g. `10.0.0.5/24`, or `dhcp` (qemu-server
    /// `QemuServer/Cloudinit.pm` reads `ip=dhcp` as DHCP; no gateway then).
    #[schemars(extend("x-pve-key" = "ipconfigN", "x-default" = "— (required)", "x-impact" = "reboot"))]
    #[schemars(pattern(r"^([0-9A-Fa-f:.]+/[0-9]{1,3}|dhcp)$"))]
    pub ip: String,
    /// The gateway, an IP address.
    #[schemars(extend("x-pve-key" = "ipconfigN", "x-default" = "none", "x-impact" = "reboot"))]
    #[schemars(pattern(r"^[0-9A-Fa-f:.]+$"))]
    pub gateway: Option<String>,
}

// ---------------------------------------------------------------- LXC

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LxcSpec {
    /// The PVE node the container lives on; it must be in the cluster's
    /// `nodes`. Never migrated: a vmid on another node is an anomaly.
    #[schemars(extend("x-pve-key" = "path", "x-default" = "— (required)", "x-impact" = "anomaly"))]
    pub node: NodeName,
    /// The PVE guest id, unique per cluster across VMs and containers. A new
    /// vmid is a new guest; a vmid held by a guest without the `proxops` tag is
    /// an anomaly, never taken over.
    #[schemars(extend("x-pve-key" = "path", "x-default" = "— (required)", "x-impact" = "anomaly"))]
    pub vmid: Vmid,
    /// A CTTemplate `metadata.name` the container is created from. Create-only:
    /// PVE does not keep the template name, so it is never compared.
    #[schemars(extend("x-pve-key" = "ostemplate", "x-default" = "— (required)", "x-impact" = "create-only"))]
    pub template: ResourceName,
    /// `started` or `stopped`: a power action, `status/start`, or
    /// `status/shutdown` with the shutdown timeout, confirmed by
    /// `status/current`. A template is never started: `stopped` or left out.
    #[schemars(extend("x-pve-key" = "power", "x-default" = "started", "default" = "started", "x-impact" = "power action"))]
    pub state: Option<PowerState>,
    /// Memory, a whole number of MiB (e.g. `512MiB`).
    pub memory: Quantity,
    /// Swap, a whole number of MiB.
    #[schemars(extend("x-pve-key" = "swap", "x-default" = "not owned", "x-impact" = "live"))]
    pub swap: Option<Quantity>,
    /// The core count.
    #[schemars(extend("x-default" = "— (required)"))]
    pub cpu: LxcCpu,
    /// The root volume.
    #[schemars(extend("x-pve-key" = "rootfs", "x-default" = "— (required)"))]
    pub root: LxcRoot,
    /// Allocated volumes mounted into the container. An `mpN` on PVE but not in
    /// the manifest is never detached (`live_only_slot` anomaly).
    #[schemars(extend("x-pve-key" = "mpN", "x-default" = "none"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_points: Vec<MountPoint>,
    /// Host directories mounted into the container. Only `root@pam` can write
    /// them: an API token gets HTTP 403.
    #[schemars(extend("x-pve-key" = "mpN", "x-default" = "none"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bind_mounts: Vec<BindMount>,
    /// One entry per NIC, at least one.
    #[schemars(extend("x-pve-key" = "netN", "x-default" = "— (required)"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<LxcNic>,
    /// Hostname and DNS settings.
    #[schemars(extend("x-default" = "not owned"))]
    pub dns: Option<LxcDns>,
    /// The architecture, spelled as PVE spells it: `amd64`, `i386` (32-bit x86,
    /// not `i686`), `arm64`, `armhf`, `riscv32`, `riscv64`.
    #[schemars(extend("x-pve-key" = "arch", "x-default" = "not owned (PVE: amd64)", "x-impact" = "stop-start"))]
    #[schemars(transform = crate::schema_attrs::one_of(LXC_ARCHES))]
    pub arch: Option<String>,
    /// Container options. A boolean option is owned when set to `true` or
    /// `false`; absent leaves PVE's value alone.
    #[schemars(extend("x-default" = "not owned"))]
    pub options: Option<LxcOptions>,
    /// The PVE description (the notes shown in the web UI).
    #[schemars(extend("x-pve-key" = "description", "x-default" = "not owned", "x-impact" = "live"))]
    pub pve_description: Option<String>,
    /// PVE tags. ProxOps always adds `proxops` (do not write it yourself).
    /// Compared as PVE stores tags: a set, sorted, without duplicates, ignoring
    /// case; an upper-case tag is refused (PVE lower-cases it) unless the
    /// cluster declares `tag-style: case-sensitive`.
    #[schemars(extend("x-pve-key" = "tags", "x-default" = "`proxops` only", "x-impact" = "live"))]
    #[schemars(inner(pattern(r"^[A-Za-z0-9_][A-Za-z0-9_+.-]*$")), transform = crate::schema_attrs::not_ownership_tag)]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// A Pool `metadata.name`: the guest is a member of that PVE pool
    /// (`pool` at create, then `PUT /pools` with `vms`, moving it from
    /// another pool). Absent: the guest's pool is not ProxOps' business.
    #[schemars(extend("x-pve-key" = "pool (create), PUT /pools vms=", "x-default" = "not managed", "x-impact" = "live"))]
    pub pool: Option<ResourceName>,
    /// PVE keys and values ProxOps does not model (`timezone`, `cpulimit`,
    /// `tty`), sent as is after the structured fields on create and on every
    /// drift update. Structural keys (a structured field writes them) and API
    /// control parameters are always refused; host-level keys (`hookscript`,
    /// `devN`, raw `lxc.*`, …) and keys PVE never stores (`password`,
    /// `ssh-public-keys`) only pass when the cluster lists the exact key in
    /// `allow-extra-keys`.
    #[schemars(extend("x-pve-key" = "<key>", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[schemars(transform = crate::schema_attrs::lxc_extra_keys)]
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, String>,
    /// The guest's firewall (`/nodes/{node}/{type}/{vmid}/firewall`):
    /// options, rules, aliases and IP sets. Declaring it makes the guest's
    /// rule list ProxOps': a rule added by hand is drift. Absent: the
    /// guest's firewall is not ProxOps' business.
    #[schemars(extend("x-pve-key" = "…/firewall", "x-default" = "not managed", "x-impact" = "live"))]
    pub firewall: Option<crate::firewall::GuestFirewall>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LxcCpu {
    /// Cores, at least 1; PVE changes a running container's limit at once.
    #[schemars(range(min = 1))]
    pub cores: u32,
    /// Parsed, never sent (`cpuunits` is not modelled).
    #[schemars(extend("x-pve-key" = "—", "x-default" = "none", "x-impact" = "never sent"))]
    pub units: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LxcRoot {
    /// The root volume's storage. Another storage is an anomaly (`data_loss`):
    /// a write would re-create the volume; move it by hand.
    #[schemars(extend("x-pve-key" = "rootfs", "x-default" = "— (required)", "x-impact" = "anomaly"))]
    pub storage: StorageId,
    /// The root volume's size, a whole number of KiB (e.g. `8GiB`). Larger: a
    /// `resize` action (PVE grows the volume and its filesystem, running or
    /// not); smaller: a `shrink` anomaly, never done.
    #[schemars(extend("x-pve-key" = "rootfs", "x-default" = "— (required)", "x-impact" = "live", "x-impact-note" = "a larger size is a resize action, grown online; a smaller one is a shrink anomaly, never done"))]
    pub size: Quantity,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MountPoint {
    /// The volume's storage. Another storage is an anomaly (`data_loss`).
    #[schemars(extend("x-pve-key" = "mpN", "x-default" = "— (required)", "x-impact" = "anomaly", "x-impact-note" = "a new mount point is hot-plugged (live)"))]
    pub storage: StorageId,
    /// The volume's size, a whole number of KiB. Larger: a `resize` action;
    /// smaller: a `shrink` anomaly, never done.
    #[schemars(extend("x-pve-key" = "mpN", "x-default" = "— (required)", "x-impact" = "live", "x-impact-note" = "a larger size is a resize action, grown online; a smaller one is a shrink anomaly, never done"))]
    pub size: Quantity,
    /// The path inside the container, absolute.
    #[schemars(extend("x-pve-key" = ",mp=", "x-default" = "— (required)", "x-impact" = "stop-start"))]
    #[schemars(pattern(r"^/[^,\s]*$"))]
    pub mount_point: Option<String>,
    /// Mount options, changed in place (never re-created).
    #[schemars(extend("x-pve-key" = "mpN options", "x-default" = "not owned"))]
    pub options: Option<MountOptions>,
    /// The slot, `mp0`-`mp255`. Another slot is a new volume; the old one
    /// becomes a `live_only_slot` anomaly.
    #[schemars(extend("x-pve-key" = "mpN", "x-default" = "mp<index>", "x-impact" = "stop-start"))]
    #[schemars(pattern(MP_SLOT_PATTERN))]
    pub slot: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MountOptions {
    /// Mount read-only.
    #[schemars(extend("x-pve-key" = ",ro=", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub read_only: Option<bool>,
    /// Include the volume in backups.
    #[schemars(extend("x-pve-key" = ",backup=", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub backup: Option<bool>,
    /// POSIX ACLs.
    #[schemars(extend("x-pve-key" = ",acl=", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub acl: Option<bool>,
    /// User quotas inside the container.
    #[schemars(extend("x-pve-key" = ",quota=", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub quota: Option<bool>,
    /// Mark the volume as available on every node.
    #[schemars(extend("x-pve-key" = ",shared=", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub shared: Option<bool>,
    /// Extra mount options, e.g. `noatime`.
    #[schemars(extend("x-pve-key" = ",mountoptions=", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub mount_options: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BindMount {
    /// The absolute host directory. System roots (`/`, `/etc`, `/var`, …) are
    /// refused; ProxOps never re-points a bind mount (a change is an anomaly).
    #[schemars(extend("x-pve-key" = "mpN host path", "x-default" = "— (required)", "x-impact" = "anomaly"))]
    #[schemars(pattern(r"^/[^,\s]*$"))]
    pub host_path: String,
    /// The path inside the container, absolute.
    #[schemars(extend("x-pve-key" = ",mp=", "x-default" = "— (required)", "x-impact" = "stop-start"))]
    #[schemars(pattern(r"^/[^,\s]*$"))]
    pub mount_point: String,
    /// The slot, `mp0`-`mp255`, shared with the allocated mount points.
    #[schemars(extend("x-pve-key" = "mpN", "x-default" = "after the allocated mount points", "x-impact" = "stop-start"))]
    #[schemars(pattern(MP_SLOT_PATTERN))]
    pub slot: Option<String>,
    /// Mount read-only.
    #[schemars(extend("x-pve-key" = ",ro=1", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub read_only: Option<bool>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
#[schemars(transform = crate::schema_attrs::gw_alias)]
pub struct LxcNic {
    /// The Linux bridge the NIC is plugged into, e.g. `vmbr0`.
    #[schemars(extend("x-pve-key" = ",bridge=", "x-default" = "— (required)", "x-impact" = "live"))]
    #[schemars(pattern(r"^[A-Za-z0-9._-]{1,15}$"))]
    pub bridge: String,
    /// The interface name inside the container, e.g. `eth0`; PVE re-plugs the
    /// veth (a short link drop, no stop).
    #[schemars(extend("x-pve-key" = ",name=", "x-default" = "the slot name at create; not compared when left out", "x-impact" = "live"))]
    #[schemars(pattern(r"^[A-Za-z0-9._-]{1,15}$"))]
    pub iface: Option<String>,
    /// The NIC type; PVE containers use `veth`. Create-only: never compared.
    #[schemars(extend("x-pve-key" = ",type=", "x-default" = "PVE's (veth)", "x-impact" = "create-only"))]
    #[schemars(transform = crate::schema_attrs::one_of(&["veth"]))]
    #[serde(rename = "type")]
    pub nic_type: Option<String>,
    /// The VLAN tag, 1-4094; `0` is untagged and removes a live tag.
    #[schemars(extend("x-pve-key" = ",tag=", "x-default" = "not owned: a live tag stays", "x-impact" = "live"))]
    #[schemars(range(max = 4094))]
    pub tag: Option<u32>,
    /// The MAC address, six hex pairs. Left out, PVE generates one (upper case)
    /// and ProxOps keeps it; compared ignoring case, and an unchanged address
    /// is written back as PVE spells it.
    #[schemars(extend("x-pve-key" = ",hwaddr=", "x-default" = "not owned", "x-impact" = "live"))]
    #[schemars(pattern(r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"))]
    pub hwaddr: Option<String>,
    /// The rate limit in MB/s (megabytes per second); `0` is unlimited and
    /// removes a live rate.
    #[schemars(extend("x-pve-key" = ",rate=", "x-default" = "not owned: a live rate stays", "x-impact" = "live"))]
    #[schemars(range(min = 0))]
    pub rate_limit: Option<f64>,
    /// PVE's firewall on this NIC; `false` turns a live firewall off.
    #[schemars(extend("x-pve-key" = ",firewall=1", "x-default" = "not owned: PVE's stays", "x-impact" = "live"))]
    pub firewall: Option<bool>,
    /// The address: CIDR (`10.0.0.5/24`), `dhcp` or `manual`.
    #[schemars(extend("x-pve-key" = ",ip=", "x-default" = "not owned", "x-impact" = "live"))]
    #[schemars(pattern(r"^(dhcp|manual|[0-9A-Fa-f:.]+/[0-9]{1,3})$"))]
    pub ip: Option<String>,
    /// The gateway, an IP address. Spelled `gateway` as a VM's
    /// `ipconfigs[].gateway`; PVE's own `gw` is read too (not both at once).
    #[schemars(extend("x-pve-key" = ",gw=", "x-default" = "not owned", "x-impact" = "live"))]
    #[schemars(pattern(r"^[0-9A-Fa-f:.]+$"))]
    #[serde(rename = "gateway", alias = "gw")]
    pub gw: Option<String>,
    /// The NIC's slot, `net0`-`net31`.
    #[schemars(extend("x-pve-key" = "netN", "x-default" = "net<index>", "x-impact" = "live"))]
    #[schemars(pattern(r"^net([0-9]|[12][0-9]|3[01])$"))]
    pub slot: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LxcDns {
    /// The container's hostname: letters, digits, '-' and '.'.
    #[schemars(extend("x-pve-key" = "hostname", "x-default" = "metadata.name", "x-impact" = "live"))]
    #[schemars(pattern(r"^[A-Za-z0-9.-]{1,63}$"))]
    pub hostname: Option<String>,
    /// DNS servers, IP addresses; compared as a set.
    #[schemars(extend("x-pve-key" = "nameserver", "x-default" = "not owned", "x-impact" = "reboot"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nameservers: Vec<String>,
    /// The DNS search domain.
    #[schemars(extend("x-pve-key" = "searchdomain", "x-default" = "not owned", "x-impact" = "reboot"))]
    pub domain: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LxcOptions {
    /// An unprivileged container. Left out, nothing is sent and PVE's API
    /// creates a privileged one. Create-only: a difference is a `needs_person`
    /// anomaly ("recreate required").
    #[schemars(extend("x-pve-key" = "unprivileged", "x-default" = "not owned", "x-impact" = "anomaly"))]
    pub unprivileged: Option<bool>,
    /// PVE's protection against removal; `false` turns it off.
    pub protection: Option<bool>,
    /// Nesting (containers or Docker inside); other feature tokens are kept.
    #[schemars(extend("x-pve-key" = "features (nesting=)", "x-default" = "not owned", "x-impact" = "stop-start"))]
    pub nesting: Option<bool>,
    /// `true` is refused: PVE does not let its API turn it on (a `needs_person`
    /// anomaly names the `pct set` command).
    #[schemars(extend("x-pve-key" = "features (keyctl=)", "x-default" = "not owned", "x-impact" = "anomaly"))]
    pub keyctl: Option<bool>,
    /// `true` is refused: PVE does not let its API turn it on (a `needs_person`
    /// anomaly names the `pct set` command).
    #[schemars(extend("x-pve-key" = "features (fuse=)", "x-default" = "not owned", "x-impact" = "anomaly"))]
    pub fuse: Option<bool>,
    /// Start the container when its node boots.
    pub onboot: Option<bool>,
    /// Start and shutdown order and delays, e.g. `order=2,up=30`.
    #[schemars(extend("x-pve-key" = "startup", "x-default" = "not owned", "x-impact" = "live"))]
    pub startup: Option<String>,
    /// The console device.
    pub console: Option<bool>,
    /// Parsed, never sent: PVE rejects `ttys=` at create.
    #[schemars(extend("x-pve-key" = "—", "x-default" = "none", "x-impact" = "never sent"))]
    pub ttys: Option<u32>,
}

// ---------------------------------------------------------------- artifacts

#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ArtifactSpec {
    /// Every node the file must exist on (at least one); each must be in the
    /// cluster's `nodes`. Removing a node only stops checking it.
    #[schemars(extend("x-pve-key" = "path", "x-default" = "— (required)", "x-impact" = "create-only"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeName>,
    /// Legacy single node, merged into `nodes`.
    #[schemars(extend("x-pve-key" = "path", "x-default" = "none", "x-impact" = "create-only"))]
    pub node: Option<NodeName>,
    /// A storage that accepts the kind's content (`iso`, `vztmpl` or `import`).
    #[schemars(extend("x-pve-key" = "path", "x-default" = "— (required)", "x-impact" = "create-only"))]
    pub storage: StorageId,
    /// A plain file name with the kind's extension; a name PVE would store
    /// under another name (every character outside `a-z A-Z 0-9 _ . -` replaced
    /// by `_`) is refused. To replace a file, give it a new name.
    #[schemars(extend("x-pve-key" = "filename=", "x-default" = "— (required)", "x-impact" = "create-only"))]
    #[schemars(pattern(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$"))]
    pub filename: String,
    /// An absolute `https://` (or `http://`) URL PVE downloads from; never
    /// compared again once the file exists.
    #[schemars(extend("x-pve-key" = "url=", "x-default" = "— (required)", "x-impact" = "create-only"))]
    #[schemars(pattern(
        r"^https?://([^/?#\s]*@)?(\[[^\]\s/?#]+\]|[^:/?#\s@\[]+)(:[0-9]{1,5})?([/?#]\S*)?$"
    ))]
    pub url: String,
    /// A checksum PVE verifies the download against.
    #[schemars(extend("x-pve-key" = "checksum-algorithm=, checksum=", "x-default" = "none", "x-impact" = "create-only"))]
    pub checksum: Option<Checksum>,
    /// `false` lets PVE download from a server whose TLS certificate it cannot
    /// verify.
    #[schemars(extend("x-pve-key" = "verify-certificates=", "x-default" = "not sent (PVE: on)", "x-impact" = "create-only"))]
    pub verify_certificates: Option<bool>,
    /// ISO only: `gz`, `lzo`, `zst` or `bz2`; PVE decompresses the download and
    /// stores it as `filename` (`url` names the compressed file).
    #[schemars(extend("x-pve-key" = "compression=", "x-default" = "not sent", "x-impact" = "create-only"))]
    #[schemars(transform = crate::schema_attrs::one_of(ARTIFACT_COMPRESSIONS))]
    pub compression: Option<String>,
}

/// The `compression` values PVE's download-url takes (pve-storage
/// `src/PVE/Storage.pm` `KNOWN_COMPRESSION_FORMATS`).
pub const ARTIFACT_COMPRESSIONS: &[&str] = &["gz", "lzo", "zst", "bz2"];

impl ArtifactSpec {
    /// `node` and `nodes` merged, sorted, without duplicates.
    pub fn all_nodes(&self) -> Vec<NodeName> {
        let mut v: Vec<NodeName> = self
            .nodes
            .iter()
            .cloned()
            .chain(self.node.clone())
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Checksum {
    /// `md5`, `sha1`, `sha224`, `sha256`, `sha384` or `sha512`.
    #[schemars(extend("x-pve-key" = "checksum-algorithm=", "x-default" = "— (required)", "x-impact" = "create-only"))]
    #[schemars(pattern(r"^([mM][dD]5|[sS][hH][aA](1|224|256|384|512))$"))]
    pub algorithm: String,
    /// The checksum in hex digits, as many as the algorithm makes (64 for
    /// sha256, 128 for sha512).
    #[schemars(extend("x-pve-key" = "checksum=", "x-default" = "— (required)", "x-impact" = "create-only"))]
    #[schemars(pattern(r"^[0-9A-Fa-f]+$"))]
    pub value: String,
}

// ---------------------------------------------------------------- validation

/// Host directories a bind mount may never be or lie under: the host's
/// system, its credentials and PVE's own state. Mounting any of them, or
/// anything below them, into a container hands the container the host
/// (`/etc/pve/priv` holds PVE's keys and tokens, `/root/.ssh` root's keys,
/// `/var/lib/pve-cluster` the database `/etc/pve` is made from,
/// `/var/lib/vz` other guests' disks).
const REFUSED_BIND_TREES: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/lib/pve-cluster",
    "/var/lib/pve-manager",
    "/var/lib/vz",
    "/var/log",
    "/var/run",
];

/// Host directories a bind mount may not be, though a directory below
/// them may (`/srv/data`, `/mnt/backup`): the root and the roots of data
/// trees that hold every other directory.
const REFUSED_BIND_ROOTS: &[&str] = &["/", "/mnt", "/srv", "/var", "/var/lib", "/opt", "/media"];

/// A host path as the kernel resolves it without following links: `//`
/// and `/./` collapse, `..` takes a component off (never above `/`), a
/// trailing `/` goes. `None` for a path that is not absolute.
pub fn normalise_host_path(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    Some(format!("/{}", parts.join("/")))
}

/// Why a bind mount of host path `path` is refused, if it is: it is, or
/// (normalised lexically) lies below, a host system directory. Symlinks on
/// the host are not followed: ProxOps cannot see the host's filesystem.
pub fn refused_bind_source(path: &str) -> Option<String> {
    let norm = normalise_host_path(path)?;
    let under = REFUSED_BIND_TREES
        .iter()
        .find(|t| norm == **t || norm.starts_with(&format!("{t}/")));
    let named = if norm == path {
        String::new()
    } else {
        format!(" (written {path:?})")
    };
    if let Some(tree) = under {
        return Some(format!(
            "refusing to bind-mount {norm:?}{named}: it is or lies under the host's {tree:?}; use a dedicated data directory such as /srv/data or /mnt/data"
        ));
    }
    REFUSED_BIND_ROOTS.contains(&norm.as_str()).then(|| {
        format!(
            "refusing to bind-mount {norm:?}{named}: that host directory holds every other one below it; use a dedicated data directory such as /srv/data or /mnt/data"
        )
    })
}

/// Rules of one document that need no other document, outside any
/// cluster: no `spec.extra` key is allow-listed.
pub fn validate(metadata: &Metadata, spec: &Spec) -> Vec<FieldError> {
    validate_in(metadata, spec, &AllowList::none())
}

/// Rules of one document as composed into one cluster, whose
/// `allow-extra-keys` may let through `spec.extra` keys otherwise refused.
pub fn validate_in(metadata: &Metadata, spec: &Spec, allow: &AllowList<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    validate_metadata(metadata, &mut errs);
    match spec {
        Spec::Vm(s) | Spec::TemplateVm(s) => {
            check_extra(&s.extra, GuestType::Qemu, allow, &mut errs);
            check_tags(&s.tags, allow.tag_case_sensitive, &mut errs);
        }
        Spec::Lxc(s) | Spec::TemplateCt(s) => {
            check_extra(&s.extra, GuestType::Lxc, allow, &mut errs);
            check_tags(&s.tags, allow.tag_case_sensitive, &mut errs);
        }
        _ => {}
    }
    match spec {
        Spec::Vm(s) => validate_vm(s, false, &mut errs),
        Spec::TemplateVm(s) => validate_vm(s, true, &mut errs),
        Spec::Lxc(s) => validate_lxc(s, false, &mut errs),
        Spec::TemplateCt(s) => validate_lxc(s, true, &mut errs),
        Spec::Iso(s) | Spec::CtTemplate(s) | Spec::DiskImage(s) => {
            validate_artifact(spec.kind(), s, &mut errs)
        }
        Spec::Pool(s) => crate::cluster::spec::validate_pool(&metadata.name, s, &mut errs),
        Spec::BackupJob(s) => {
            crate::cluster::spec::validate_backup_job(&metadata.name, s, &mut errs)
        }
        Spec::HaResource(s) => crate::cluster::spec::validate_ha_resource(s, &mut errs),
        Spec::HaRule(s) => crate::cluster::spec::validate_ha_rule(&metadata.name, s, &mut errs),
        Spec::ReplicationJob(s) => crate::cluster::spec::validate_replication_job(s, &mut errs),
        Spec::FirewallAlias(_)
        | Spec::FirewallIpSet(_)
        | Spec::SecurityGroup(_)
        | Spec::ClusterFirewall(_) => errs.extend(validate_firewall(&metadata.name, spec)),
    }
    if let Some(v) = metadata.annotations.get(ANNOTATION_ADOPTED_ID) {
        let path = format!("metadata.annotations.{ANNOTATION_ADOPTED_ID}");
        let own = match spec {
            Spec::Pool(p) => Some(p.id.clone().unwrap_or_else(|| metadata.name.to_string())),
            Spec::BackupJob(b) => Some(b.id.clone().unwrap_or_else(|| metadata.name.to_string())),
            // Its id is its guest's (`vm:<vmid>`), known to the composition.
            Spec::HaResource(_) => Some(v.trim().to_owned()),
            // PVE chose it (`<vmid>-<n>`); the planner matches it to the
            // live job of the manifest's guest and target.
            Spec::ReplicationJob(_) => Some(v.trim().to_owned()),
            Spec::HaRule(r) => Some(r.id.clone().unwrap_or_else(|| metadata.name.to_string())),
            // An alias, IP set or group: its PVE name.
            Spec::FirewallAlias(_) | Spec::FirewallIpSet(_) | Spec::SecurityGroup(_) => {
                spec.firewall_name(&metadata.name)
            }
            _ => None,
        };
        match own {
            None => errs.push(FieldError::new(
                path,
                format!("{ANNOTATION_ADOPTED_ID} only applies to Pool, BackupJob, HAResource, HARule, ReplicationJob, FirewallAlias, FirewallIPSet and SecurityGroup manifests"),
            )),
            Some(id) if v.trim() != id => errs.push(FieldError::new(
                path,
                format!("{v:?} is not this manifest's PVE id {id:?}: the annotation claims the object adopt read under that id; remove it from a manifest that was copied or renamed"),
            )),
            Some(_) => {}
        }
    }
    if let Some(v) = metadata.annotations.get(ANNOTATION_ADOPTED_VMID) {
        let path = format!("metadata.annotations.{ANNOTATION_ADOPTED_VMID}");
        match spec.guest_id() {
            None => errs.push(FieldError::new(
                path,
                format!("{ANNOTATION_ADOPTED_VMID} only applies to VM, TemplateVM, LXC and TemplateCT manifests"),
            )),
            // A copied adopted manifest whose vmid was changed must not claim
            // the guest at its new vmid.
            Some((_, vmid)) if metadata.adopted_vmid() != Some(vmid) => errs.push(FieldError::new(
                path,
                format!("{v:?} is not this manifest's spec.vmid {vmid}: the annotation claims the guest adopt read at that vmid; remove it from a manifest that was copied or renumbered"),
            )),
            Some(_) => {}
        }
    }
    errs
}

fn validate_metadata(m: &Metadata, errs: &mut Vec<FieldError>) {
    for (k, v) in &m.annotations {
        let path = format!("metadata.annotations.{k}");
        if k == ANNOTATION_DEPENDS_ON {
            if let Err(e) = parse_depends_on(v) {
                errs.push(FieldError::new(path, e));
            }
        } else if k == ANNOTATION_PRUNE {
            if v.trim() != "disabled" && v.trim() != "enabled" {
                errs.push(FieldError::new(
                    path,
                    format!("invalid value {v:?}: use \"disabled\" (never prune) or \"enabled\""),
                ));
            }
        } else if k == ANNOTATION_RESTART_POLICY {
            if let Err(e) = crate::policy::RestartPolicy::parse(v) {
                errs.push(FieldError::new(path, e));
            }
        } else if k == ANNOTATION_SHUTDOWN_TIMEOUT {
            match crate::units::Duration::parse(v) {
                Ok(d) if d.as_millis() >= 1000 => {}
                Ok(_) => errs.push(FieldError::new(
                    path,
                    format!("invalid value {v:?}: a shutdown timeout is at least 1s"),
                )),
                Err(e) => errs.push(FieldError::new(path, e.0)),
            }
        } else if k == ANNOTATION_DISRUPTION_GROUP {
            let plain = !v.trim().is_empty()
                && v.trim()
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            if !plain {
                errs.push(FieldError::new(
                    path,
                    format!("invalid value {v:?}: a disruption group is a name of letters, digits, '-', '_' and '.'"),
                ));
            }
        } else if k != ANNOTATION_ADOPTED_VMID
            && k != ANNOTATION_ADOPTED_ID
            && let Some(why) = lookalike_key(k)
        {
            errs.push(FieldError::new(
                path,
                format!(
                    "{why}: ProxOps knows {ANNOTATION_DEPENDS_ON:?}, {ANNOTATION_PRUNE:?}, {ANNOTATION_ADOPTED_VMID:?}, {ANNOTATION_ADOPTED_ID:?}, {ANNOTATION_RESTART_POLICY:?}, {ANNOTATION_SHUTDOWN_TIMEOUT:?} and {ANNOTATION_DISRUPTION_GROUP:?}, each spelt exactly so"
                ),
            ));
        }
    }
    for k in m.labels.keys() {
        if !k.is_ascii() || k.chars().any(char::is_whitespace) {
            errs.push(FieldError::new(
                format!("metadata.labels.{k}"),
                format!("label key {k:?} holds a non-ASCII or blank character: label keys are plain ASCII"),
            ));
        }
    }
}

/// Why an annotation key that is none of ProxOps' own is refused: one
/// that would look like ProxOps' to a reviewer and do nothing. An unknown
/// key under `proxops/`, a key with a non-ASCII character (`рroxops/prune`
/// with a Cyrillic `р`), and a key that reads `proxops` once case, blanks
/// and separators are set aside (`proxops /prune`, `ProxOps/prune`,
/// `proxops.prune`).
fn lookalike_key(k: &str) -> Option<String> {
    if !k.is_ascii() {
        return Some(format!(
            "annotation key {k:?} holds a non-ASCII character: annotation keys are plain ASCII (a look-alike letter would make a key that seems ProxOps' and does nothing)"
        ));
    }
    if k.starts_with("proxops/") {
        return Some(format!("unknown annotation {k:?}"));
    }
    let folded: String = k
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    folded
        .starts_with("proxops")
        .then(|| format!("annotation key {k:?} looks like one of ProxOps' and is not"))
}

/// Parses `"Kind:name,Kind:name"`.
pub fn parse_depends_on(text: &str) -> Result<Vec<crate::names::Ref>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((kind, name)) = item.split_once(':') else {
            return Err(format!(
                "invalid dependency {item:?}: use \"Kind:name\" entries separated by commas, e.g. \"ISO:debian-iso,VM:db\""
            ));
        };
        let kind = Kind::parse(kind.trim()).ok_or_else(|| {
            format!(
                "invalid dependency {item:?}: unknown kind {kind:?} (use one of {})",
                Kind::list()
            )
        })?;
        let name = ResourceName::new(name.trim())
            .map_err(|e| format!("invalid dependency {item:?}: {e}"))?;
        out.push(crate::names::Ref { kind, name });
    }
    Ok(out)
}

/// Tags as PVE stores them (pve-guest-common `GuestHelpers.pm`
/// `get_unique_tags`): PVE lower-cases every tag unless the datacenter's
/// `tag-style` is case-sensitive, so an upper-case tag would be rewritten
/// by PVE and is refused here, with the spelling PVE would store.
fn check_tags(tags: &[String], case_sensitive: bool, errs: &mut Vec<FieldError>) {
    for (i, t) in tags.iter().enumerate() {
        let ok = !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'.'))
            && !t.starts_with(['-', '+', '.']);
        if !ok {
            errs.push(FieldError::new(
                format!("spec.tags[{i}]"),
                format!("invalid tag {t:?}: PVE tags are letters, digits, '-', '_', '+' and '.', not starting with a symbol"),
            ));
        } else if t.eq_ignore_ascii_case(OWNERSHIP_TAG) {
            errs.push(FieldError::new(
                format!("spec.tags[{i}]"),
                "the ownership tag \"proxops\" is added by ProxOps; do not list it",
            ));
        } else if !case_sensitive && t.bytes().any(|b| b.is_ascii_uppercase()) {
            errs.push(FieldError::new(
                format!("spec.tags[{i}]"),
                format!(
                    "tag {t:?} has upper case, which PVE lower-cases when it stores tags: write {:?} (or declare tag-style: case-sensitive in the cluster's configuration when PVE's datacenter keeps the case)",
                    t.to_ascii_lowercase()
                ),
            ));
        }
    }
}

fn check_extra(
    extra: &BTreeMap<String, String>,
    guest: GuestType,
    allow: &AllowList<'_>,
    errs: &mut Vec<FieldError>,
) {
    for (k, v) in extra {
        let path = format!("spec.extra.{k}");
        if let Some(m) = extra::refusal(guest, k, v).and_then(|r| extra::message(k, r, allow)) {
            errs.push(FieldError::new(path, m));
            continue;
        }
        let well_formed = !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !well_formed {
            errs.push(FieldError::new(
                path,
                format!("invalid PVE key {k:?}: use letters, digits, '-', '_' and '.'"),
            ));
        }
    }
}

fn check_mac(mac: &str) -> bool {
    let parts: Vec<&str> = mac.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `a.b.c.d/len` or an IPv6 CIDR.
pub fn check_cidr(text: &str) -> bool {
    let Some((addr, len)) = text.split_once('/') else {
        return false;
    };
    let Ok(ip) = addr.parse::<IpAddr>() else {
        return false;
    };
    let Ok(len) = len.parse::<u8>() else {
        return false;
    };
    match ip {
        IpAddr::V4(_) => len <= 32,
        IpAddr::V6(_) => len <= 128,
    }
}

/// `http(s)://host[:port]/…` with a non-empty host.
pub fn check_url(text: &str) -> Result<(), String> {
    let bad =
        || format!("invalid url {text:?}: use an absolute https:// (or http://) URL with a host");
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(bad)?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let hostname = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    if hostname.is_empty() || text.contains(char::is_whitespace) {
        return Err(bad());
    }
    if let Some(port) = host
        .strip_prefix(&format!("{hostname}:"))
        .filter(|_| !host.starts_with('['))
        && port.parse::<u16>().is_err()
    {
        return Err(bad());
    }
    Ok(())
}

fn check_abs_path(p: &str) -> bool {
    p.starts_with('/') && !p.contains(',') && !p.contains(char::is_whitespace)
}

/// PVE takes memory in whole MiB; say what the written value came to.
fn memory_message(q: Quantity, example: &str) -> String {
    let bytes = q.bytes();
    let mib = bytes as f64 / 1_048_576.0;
    format!(
        "memory is {bytes} bytes ({mib:.2} MiB), not a whole, non-zero number of MiB: use binary units, e.g. {example} (decimal units such as GB and MB count powers of 1000)"
    )
}

fn power_rule(state: Option<PowerState>, template: bool, errs: &mut Vec<FieldError>) {
    if template && state == Some(PowerState::Started) {
        errs.push(FieldError::new(
            "spec.state",
            "a template is never started: use \"stopped\" or leave state out",
        ));
    }
}

/// Where a VM disk goes: `scsi0`, `virtio1`, …
pub fn disk_slot(disk: &VmDisk, index: usize) -> String {
    disk.interface
        .clone()
        .unwrap_or_else(|| numbered_slot("scsi", index))
}

/// `prefix` and `index` (`scsi0`): what `format!("{prefix}{index}")`
/// gives, without the formatting machinery for the usual one digit (every
/// disk and NIC of every guest is named each cycle).
fn numbered_slot(prefix: &str, index: usize) -> String {
    let mut s = String::with_capacity(prefix.len() + 2);
    s.push_str(prefix);
    match u8::try_from(index) {
        Ok(d) if d < 10 => s.push(char::from(b'0' + d)),
        _ => s.push_str(&index.to_string()),
    }
    s
}

fn parse_slot(slot: &str, buses: &[(&str, u32)]) -> Option<(String, u32)> {
    for (bus, max) in buses {
        if let Some(n) = slot.strip_prefix(bus)
            && !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && !(n.len() > 1 && n.starts_with('0'))
            && let Ok(n) = n.parse::<u32>()
            && n <= *max
        {
            return Some((bus.to_string(), n));
        }
    }
    None
}

/// What a VM's `hotplug` may list.
pub const HOTPLUG_ITEMS: &[&str] = &["network", "disk", "cpu", "memory", "usb", "cloudinit"];

/// `mp0`-`mp255`, as `parse_slot` reads a mount point slot.
const MP_SLOT_PATTERN: &str = "^mp([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])$";

/// Disk buses and their highest index in PVE 9.
pub const DISK_BUSES: &[(&str, u32)] = &[("scsi", 30), ("virtio", 15), ("sata", 5), ("ide", 3)];

/// Where a VM NIC goes: `net0`, …
pub fn vm_nic_slot(nic: &VmNic, index: usize) -> String {
    nic.slot
        .clone()
        .unwrap_or_else(|| numbered_slot("net", index))
}

/// The IDE slot the CD drive uses: `ide2`, or `ide3` when cloud-init owns `ide2`.
pub fn cdrom_slot(vm: &VmSpec) -> &'static str {
    if vm
        .hardware
        .as_ref()
        .and_then(|h| h.cloud_init.as_ref())
        .is_some_and(|c| c.enabled)
    {
        "ide3"
    } else {
        "ide2"
    }
}

const VM_NIC_MODELS: &[&str] = &[
    "virtio",
    "e1000",
    "e1000e",
    "rtl8139",
    "vmxnet3",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
];
pub const SCSI_CONTROLLERS: &[&str] = &[
    "lsi",
    "lsi53c810",
    "virtio-scsi-pci",
    "virtio-scsi-single",
    "megasas",
    "pvscsi",
];

/// A VM's or TemplateVM's one-document rules, field group by field group.
fn validate_vm(s: &VmSpec, template: bool, errs: &mut Vec<FieldError>) {
    power_rule(s.state, template, errs);
    vm_scalars(s, errs);
    vm_disks(s, template, errs);
    vm_networks(s, errs);
    vm_hardware(s, errs);
    vm_options(s, errs);
    if let Some(fw) = &s.firewall {
        errs.extend(crate::firewall::spec::check_guest(fw, "spec.firewall"));
    }
}

/// Memory, the CPU and the PVE name.
fn vm_scalars(s: &VmSpec, errs: &mut Vec<FieldError>) {
    if s.memory.whole_mib().is_none_or(|m| m == 0) {
        errs.push(FieldError::new(
            "spec.memory",
            memory_message(s.memory, "\"2GiB\" or \"512MiB\""),
        ));
    }
    vm_balloon(s, errs);
    if s.cpu.cpu_type.trim().is_empty() || s.cpu.cpu_type.contains([',', ' ', '=']) {
        errs.push(FieldError::new(
            "spec.cpu.type",
            "cpu type must be one PVE CPU model, e.g. \"host\" or \"x86-64-v2-AES\"",
        ));
    }
    if s.cpu.cores == 0 {
        errs.push(FieldError::new(
            "spec.cpu.cores",
            "cores must be at least 1",
        ));
    }
    if let Some(l) = s.cpu.limit
        && !(0.0..=128.0).contains(&l)
    {
        errs.push(FieldError::new(
            "spec.cpu.limit",
            format!("invalid cpu limit {l}: use 0 (unlimited) to 128 host CPUs"),
        ));
    }
    if let Some(name) = &s.pve_name
        && (name.is_empty()
            || name.len() > 63
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.')))
    {
        errs.push(FieldError::new(
            "spec.pve-name",
            format!("invalid PVE name {name:?}: a DNS name of letters, digits, '-' and '.'"),
        ));
    }
}

/// `balloon`: a whole number of MiB, and at most `memory`: PVE refuses a
/// larger target before it writes anything (qemu-server `API2/Qemu.pm`
/// `update_vm_api`: "balloon value too large (must be smaller than
/// assigned memory)").
fn vm_balloon(s: &VmSpec, errs: &mut Vec<FieldError>) {
    let Some(b) = s.balloon else { return };
    match (b.whole_mib(), s.memory.whole_mib()) {
        (None, _) => errs.push(FieldError::new(
            "spec.balloon",
            memory_message(b, "\"1GiB\", \"512MiB\" or 0"),
        )),
        (Some(balloon), Some(memory)) if balloon > memory => errs.push(FieldError::new(
            "spec.balloon",
            format!(
                "balloon {b} is above memory {}: the ballooning target cannot exceed the memory the VM has (PVE refuses it); lower balloon, or 0 to turn ballooning off",
                s.memory
            ),
        )),
        _ => {}
    }
}

/// `clone` against `disks`, and each disk.
fn vm_disks(s: &VmSpec, template: bool, errs: &mut Vec<FieldError>) {
    if s.clone.is_some() {
        if !s.disks.is_empty() {
            errs.push(FieldError::new(
                "spec.disks",
                "a VM cloned from a TemplateVM must not declare disks: the template owns the disk layout",
            ));
        }
        if template {
            errs.push(FieldError::new(
                "spec.clone",
                "a TemplateVM cannot be cloned from another template",
            ));
        }
    } else if s.disks.is_empty() {
        errs.push(FieldError::new(
            "spec.disks",
            "at least one disk is required (or clone from a TemplateVM with spec.clone)",
        ));
    }

    let mut slots: BTreeMap<String, usize> = BTreeMap::new();
    let mut controller_seen = false;
    for (i, d) in s.disks.iter().enumerate() {
        let base = format!("spec.disks[{i}]");
        let slot = disk_slot(d, i);
        match parse_slot(&slot, DISK_BUSES) {
            None => errs.push(FieldError::new(
                format!("{base}.interface"),
                format!("invalid interface {slot:?}: use scsi0-scsi30, virtio0-virtio15, sata0-sata5 or ide0-ide3"),
            )),
            Some((bus, _)) => {
                if d.ssd.is_some() && bus == "virtio" {
                    errs.push(FieldError::new(
                        format!("{base}.ssd"),
                        "ssd is not supported on virtio disks (PVE rejects it): use a scsi, sata or ide interface, or drop ssd",
                    ));
                }
            }
        }
        if let Some(prev) = slots.insert(slot.clone(), i) {
            errs.push(FieldError::new(
                format!("{base}.interface"),
                format!("interface {slot} is already used by spec.disks[{prev}]"),
            ));
        }
        if matches!(slot.as_str(), "ide2" | "ide3")
            && s.hardware.as_ref().is_some_and(|h| {
                h.cdrom
                    .as_ref()
                    .is_some_and(|c| c.intent() != CdromIntent::NotOwned && cdrom_slot(s) == slot)
                    || (slot == "ide2" && h.cloud_init.as_ref().is_some_and(|c| c.enabled))
            })
        {
            errs.push(FieldError::new(
                format!("{base}.interface"),
                format!("interface {slot} is used by the CD-ROM or cloud-init drive"),
            ));
        }
        match (&d.size, &d.image) {
            (Some(_), Some(_)) => errs.push(FieldError::new(
                format!("{base}.size"),
                "size must be left out when image is set: PVE sizes an imported disk from the image",
            )),
            (None, None) => errs.push(FieldError::new(format!("{base}.size"), "size is required (e.g. \"32GiB\") unless image is set")),
            (Some(q), None) if q.bytes() == 0 || q.bytes() % 1024 != 0 => errs.push(FieldError::new(
                format!("{base}.size"),
                format!("size {q} must be a non-zero whole number of KiB, e.g. \"32GiB\""),
            )),
            _ => {}
        }
        if let Some(c) = &d.controller {
            if !SCSI_CONTROLLERS.contains(&c.as_str()) {
                errs.push(FieldError::new(
                    format!("{base}.controller"),
                    format!(
                        "invalid controller {c:?}: use one of {}",
                        SCSI_CONTROLLERS.join(", ")
                    ),
                ));
            }
            controller_seen = true;
        }
    }
    let _ = controller_seen;
}

/// Each NIC, and at least one unless cloned.
fn vm_networks(s: &VmSpec, errs: &mut Vec<FieldError>) {
    let mut nic_slots: BTreeMap<String, usize> = BTreeMap::new();
    for (i, n) in s.networks.iter().enumerate() {
        let base = format!("spec.networks[{i}]");
        let slot = vm_nic_slot(n, i);
        if parse_slot(&slot, &[("net", 31)]).is_none() {
            errs.push(FieldError::new(
                format!("{base}.slot"),
                format!("invalid slot {slot:?}: use net0-net31"),
            ));
        }
        if let Some(prev) = nic_slots.insert(slot.clone(), i) {
            errs.push(FieldError::new(
                format!("{base}.slot"),
                format!("slot {slot} is already used by spec.networks[{prev}]"),
            ));
        }
        if let Some(m) = &n.model
            && !VM_NIC_MODELS.contains(&m.as_str())
        {
            errs.push(FieldError::new(
                format!("{base}.model"),
                format!(
                    "invalid model {m:?}: use one of {}",
                    VM_NIC_MODELS.join(", ")
                ),
            ));
        }
        if !check_bridge(&n.bridge) {
            errs.push(FieldError::new(
                format!("{base}.bridge"),
                format!(
                    "invalid bridge {:?}: a Linux bridge name such as \"vmbr0\"",
                    n.bridge
                ),
            ));
        }
        if let Some(mac) = &n.mac
            && !check_mac(mac)
        {
            errs.push(FieldError::new(
                format!("{base}.mac"),
                format!("invalid MAC {mac:?}: use six hex pairs, e.g. \"bc:24:11:00:00:01\""),
            ));
        }
        if let Some(v) = n.vlan
            && v > 4094
        {
            errs.push(FieldError::new(
                format!("{base}.vlan"),
                format!("invalid VLAN {v}: use 1-4094 (0 = untagged)"),
            ));
        }
        if let Some(r) = n.rate_limit
            && !(r >= 0.0 && r.is_finite())
        {
            errs.push(FieldError::new(
                format!("{base}.rate-limit"),
                "rate-limit is in MB/s (megabytes per second) and must be 0 or more (0 = unlimited)",
            ));
        }
    }
    if s.networks.is_empty() && s.clone.is_none() {
        errs.push(FieldError::new(
            "spec.networks",
            "at least one network is required",
        ));
    }
}

/// `spec.hardware`.
fn vm_hardware(s: &VmSpec, errs: &mut Vec<FieldError>) {
    if let Some(h) = &s.hardware {
        if let Some(m) = &h.machine
            && !(m == "i440fx" || m == "q35" || m == "pc" || m.starts_with("pc-"))
        {
            errs.push(FieldError::new(
                "spec.hardware.machine",
                format!("invalid machine {m:?}: use \"i440fx\" or \"q35\""),
            ));
        }
        if h.sockets == Some(0) {
            errs.push(FieldError::new(
                "spec.hardware.sockets",
                "sockets must be at least 1",
            ));
        }
        if let Some(c) = &h.cdrom
            && let Some(iso) = &c.iso
        {
            let iso = iso.trim();
            if !iso.is_empty() && iso != "none" && ResourceName::new(iso).is_err() {
                errs.push(FieldError::new("spec.hardware.cdrom.iso", format!("invalid ISO reference {iso:?}: an ISO metadata.name, or \"none\" for an empty drive")));
            }
        }
        if let Some(e) = &h.efi_disk {
            if let Some(t) = &e.template
                && !["2m", "4m"].contains(&t.as_str())
            {
                errs.push(FieldError::new(
                    "spec.hardware.efi-disk.template",
                    format!("invalid efi type {t:?}: PVE accepts 2m or 4m only"),
                ));
            }
            if h.bios != Some(Bios::Ovmf) {
                errs.push(FieldError::new(
                    "spec.hardware.efi-disk",
                    "an EFI disk needs bios: ovmf",
                ));
            }
            // qemu-server `QemuServer/OVMF.pm` `get_ovmf_files`: on x86_64
            // only `efitype=4m` picks the Secure Boot firmware and the
            // VARS with Microsoft's keys; PVE's default (2m) ignores
            // `pre-enrolled-keys`.
            if e.secure_boot == Some(SecureBoot::Enabled) && e.template.as_deref() != Some("4m") {
                errs.push(FieldError::new(
                    "spec.hardware.efi-disk.secure-boot",
                    "Secure Boot needs template: 4m: with PVE's default EFI type (2m) the firmware has no Secure Boot and the keys are not enrolled; set spec.hardware.efi-disk.template: 4m",
                ));
            }
        }
        if let Some(ci) = &h.cloud_init
            && ci.enabled
            && ci.storage.is_none()
        {
            errs.push(FieldError::new(
                "spec.hardware.cloud-init.storage",
                "storage is required when cloud-init is enabled (a storage with images content)",
            ));
        }
        if let Some(t) = &h.tpm
            && let Some(v) = &t.version
            && v != "v1.2"
            && v != "v2.0"
        {
            errs.push(FieldError::new(
                "spec.hardware.tpm.version",
                format!("invalid TPM version {v:?}: use v1.2 or v2.0"),
            ));
        }
        let mut pci: BTreeMap<u16, usize> = BTreeMap::new();
        for (i, p) in h.pci_devices.iter().enumerate() {
            let base = format!("spec.hardware.pci-devices[{i}]");
            if let Some(prev) = pci.insert(p.slot.0, i) {
                errs.push(FieldError::new(
                    format!("{base}.slot"),
                    format!("slot {} is already used by pci-devices[{prev}]", p.slot.0),
                ));
            }
            if !check_bdf(&p.device) {
                errs.push(FieldError::new(
                    format!("{base}.device"),
                    format!("invalid PCI address {:?}: use [domain:]bus:device[.function] in hex, e.g. \"0000:17:00.0\" or \"00:17.0\"", p.device),
                ));
            }
        }
    }
}

/// `spec.options` and `spec.cloud-init-data`.
fn vm_options(s: &VmSpec, errs: &mut Vec<FieldError>) {
    if let Some(o) = &s.options {
        let mut seen = std::collections::BTreeSet::new();
        for (i, b) in o.boot_order.iter().enumerate() {
            if b.trim().is_empty() || b.contains([';', ',', '=']) {
                errs.push(FieldError::new(
                    format!("spec.options.boot-order[{i}]"),
                    format!("invalid boot device {b:?}: a slot name such as \"scsi0\" or \"net0\""),
                ));
            } else if !seen.insert(b.clone()) {
                errs.push(FieldError::new(
                    format!("spec.options.boot-order[{i}]"),
                    format!("{b} is listed twice"),
                ));
            }
        }
        for (i, h) in o.hotplug.iter().enumerate() {
            if !HOTPLUG_ITEMS.contains(&h.as_str()) {
                errs.push(FieldError::new(format!("spec.options.hotplug[{i}]"), format!("invalid hotplug item {h:?}: use network, disk, cpu, memory, usb or cloudinit")));
            }
        }
    }

    if let Some(ci) = &s.cloud_init_data {
        validate_cloud_init_data(ci, errs);
    }
}

fn check_bridge(b: &str) -> bool {
    !b.is_empty()
        && b.len() <= 15
        && b.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// PVE's PCI address grammar: `[domain:]bus:device[.function]`, hex.
pub fn check_bdf(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    let (rest, func) = match t.split_once('.') {
        Some((r, f)) => (r.to_owned(), Some(f.to_owned())),
        None => (t.clone(), None),
    };
    if let Some(f) = &func
        && !(f.len() == 1 && matches!(f.as_bytes()[0], b'0'..=b'7'))
    {
        return false;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    let hex = |s: &str, lo: usize, hi: usize| {
        (lo..=hi).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    match parts.as_slice() {
        [bus, dev] => hex(bus, 2, 2) && hex(dev, 2, 2),
        [dom, bus, dev] => hex(dom, 4, 5) && hex(bus, 2, 2) && hex(dev, 2, 2),
        _ => false,
    }
}

fn validate_cloud_init_data(ci: &CloudInitData, errs: &mut Vec<FieldError>) {
    let base = "spec.cloud-init-data";
    if ci.ssh_keys.iter().any(|k| k.trim() == "*") && ci.ssh_keys.len() > 1 {
        errs.push(FieldError::new(
            format!("{base}.ssh-keys"),
            "\"*\" (PVE keeps the live keys) cannot be mixed with real keys: use either [\"*\"] or a list of keys",
        ));
    }
    for (i, k) in ci.ssh_keys.iter().enumerate() {
        let k = k.trim();
        if k != "*" {
            let fields: Vec<&str> = k.split_whitespace().collect();
            if fields.len() < 2 || fields[1].len() < 16 || k.contains('\n') {
                errs.push(FieldError::new(
                    format!("{base}.ssh-keys[{i}]"),
                    "not an OpenSSH public key line: \"<type> <base64 key> [comment]\"",
                ));
            } else if let Err(why) = crate::wire::SshKey::parse(k)
                .map_err(|e| e.to_string())
                .and_then(|key| key.check_blob())
            {
                errs.push(FieldError::new(
                    format!("{base}.ssh-keys[{i}]"),
                    format!("a public key PVE would refuse (it reads each key with ssh-keygen and refuses the whole write): {why}"),
                ));
            }
        }
    }
    if !ci.ssh_keys.is_empty() && !ci.ssh_key_refs.is_empty() {
        errs.push(FieldError::new(
            format!("{base}.ssh-key-refs"),
            "use either ssh-keys or ssh-key-refs, not both",
        ));
    }
    for (i, r) in ci.ssh_key_refs.iter().enumerate() {
        if let Err(e) = check_secret_ref(r, "cloud-init.ssh-keys.") {
            errs.push(FieldError::new(format!("{base}.ssh-key-refs[{i}]"), e));
        }
    }
    if let Some(r) = &ci.ci_password_ref
        && let Err(e) = check_secret_ref(r, "cloud-init.passwords.")
    {
        errs.push(FieldError::new(format!("{base}.ci-password-ref"), e));
    }
    for (i, ns) in ci.nameservers.iter().enumerate() {
        if ns.parse::<IpAddr>().is_err() {
            errs.push(FieldError::new(
                format!("{base}.nameservers[{i}]"),
                format!("invalid nameserver {ns:?}: an IP address"),
            ));
        }
    }
    let mut nics = std::collections::BTreeSet::new();
    for (i, ip) in ci.ipconfigs.iter().enumerate() {
        if ip.nic > 31 {
            errs.push(FieldError::new(
                format!("{base}.ipconfigs[{i}].nic"),
                "nic must be 0-31 (the N of netN)",
            ));
        }
        if !nics.insert(ip.nic) {
            errs.push(FieldError::new(
                format!("{base}.ipconfigs[{i}].nic"),
                format!("nic {} is configured twice", ip.nic),
            ));
        }
        if ip.ip != "dhcp" && !check_cidr(&ip.ip) {
            errs.push(FieldError::new(
                format!("{base}.ipconfigs[{i}].ip"),
                format!(
                    "invalid address {:?}: use CIDR, e.g. \"10.0.0.5/24\", or dhcp",
                    ip.ip
                ),
            ));
        }
        if ip.ip == "dhcp" && ip.gateway.is_some() {
            errs.push(FieldError::new(
                format!("{base}.ipconfigs[{i}].gateway"),
                "a gateway comes from DHCP: leave it out with ip: dhcp",
            ));
        }
        if let Some(gw) = &ip.gateway
            && gw.parse::<IpAddr>().is_err()
        {
            errs.push(FieldError::new(
                format!("{base}.ipconfigs[{i}].gateway"),
                format!("invalid gateway {gw:?}: an IP address"),
            ));
        }
    }
}

/// A SOPS dot-path such as `cloud-init.ssh-keys.main`.
fn check_secret_ref(r: &str, prefix: &str) -> Result<(), String> {
    let name = r
        .strip_prefix(prefix)
        .ok_or_else(|| format!("invalid reference {r:?}: use \"{prefix}<name>\""))?;
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid reference {r:?}: the name after {prefix:?} is 1-64 lowercase letters, digits and '-'"
        ))
    }
}

/// Allocated mount point slots first (`mp<index>`), then bind mounts.
pub fn lxc_mount_slots(s: &LxcSpec) -> (Vec<String>, Vec<String>) {
    let alloc: Vec<String> = s
        .mount_points
        .iter()
        .enumerate()
        .map(|(i, m)| m.slot.clone().unwrap_or_else(|| format!("mp{i}")))
        .collect();
    let binds: Vec<String> = s
        .bind_mounts
        .iter()
        .enumerate()
        .map(|(i, b)| {
            b.slot
                .clone()
                .unwrap_or_else(|| format!("mp{}", s.mount_points.len() + i))
        })
        .collect();
    (alloc, binds)
}

pub fn lxc_nic_slot(nic: &LxcNic, index: usize) -> String {
    nic.slot
        .clone()
        .unwrap_or_else(|| numbered_slot("net", index))
}

/// The container architectures PVE accepts, spelled as PVE spells them
/// (pve-container `src/PVE/LXC/Config.pm`, `$confdesc` `arch`).
pub const LXC_ARCHES: &[&str] = &["amd64", "i386", "arm64", "armhf", "riscv32", "riscv64"];

fn validate_lxc(s: &LxcSpec, template: bool, errs: &mut Vec<FieldError>) {
    power_rule(s.state, template, errs);
    lxc_scalars(s, errs);
    lxc_networks(s, errs);
    lxc_mounts(s, errs);
    lxc_dns(s, errs);
    if let Some(fw) = &s.firewall {
        errs.extend(crate::firewall::spec::check_guest(fw, "spec.firewall"));
    }
}

/// Memory, swap, cores, the root size and the architecture.
fn lxc_scalars(s: &LxcSpec, errs: &mut Vec<FieldError>) {
    if s.memory.whole_mib().is_none_or(|m| m == 0) {
        errs.push(FieldError::new(
            "spec.memory",
            memory_message(s.memory, "\"512MiB\""),
        ));
    }
    if let Some(sw) = s.swap
        && sw.whole_mib().is_none()
    {
        errs.push(FieldError::new(
            "spec.swap",
            format!("swap {sw} is not a whole number of MiB"),
        ));
    }
    if s.cpu.cores == 0 {
        errs.push(FieldError::new(
            "spec.cpu.cores",
            "cores must be at least 1",
        ));
    }
    if s.root.size.bytes() == 0 || !s.root.size.bytes().is_multiple_of(1024) {
        errs.push(FieldError::new(
            "spec.root.size",
            format!(
                "size {} must be a non-zero whole number of KiB, e.g. \"8GiB\"",
                s.root.size
            ),
        ));
    }
    if let Some(a) = &s.arch
        && !LXC_ARCHES.contains(&a.as_str())
    {
        let hint = if a == "i686" {
            " (PVE calls 32-bit x86 \"i386\")"
        } else {
            ""
        };
        errs.push(FieldError::new(
            "spec.arch",
            format!(
                "invalid arch {a:?}{hint}: use one of {}",
                LXC_ARCHES.join(", ")
            ),
        ));
    }
}

/// Each NIC, and at least one.
fn lxc_networks(s: &LxcSpec, errs: &mut Vec<FieldError>) {
    if s.networks.is_empty() {
        errs.push(FieldError::new(
            "spec.networks",
            "at least one network is required",
        ));
    }
    let mut nic_slots: BTreeMap<String, usize> = BTreeMap::new();
    for (i, n) in s.networks.iter().enumerate() {
        let base = format!("spec.networks[{i}]");
        let slot = lxc_nic_slot(n, i);
        if parse_slot(&slot, &[("net", 31)]).is_none() {
            errs.push(FieldError::new(
                format!("{base}.slot"),
                format!("invalid slot {slot:?}: use net0-net31"),
            ));
        }
        if let Some(prev) = nic_slots.insert(slot.clone(), i) {
            errs.push(FieldError::new(
                format!("{base}.slot"),
                format!("slot {slot} is already used by spec.networks[{prev}]"),
            ));
        }
        if !check_bridge(&n.bridge) {
            errs.push(FieldError::new(
                format!("{base}.bridge"),
                format!(
                    "invalid bridge {:?}: a Linux bridge name such as \"vmbr0\"",
                    n.bridge
                ),
            ));
        }
        if let Some(iface) = &n.iface
            && !check_bridge(iface)
        {
            errs.push(FieldError::new(
                format!("{base}.iface"),
                format!("invalid interface name {iface:?}: e.g. \"eth0\""),
            ));
        }
        if let Some(t) = &n.nic_type
            && t != "veth"
        {
            errs.push(FieldError::new(
                format!("{base}.type"),
                format!("invalid type {t:?}: PVE containers use \"veth\""),
            ));
        }
        if let Some(v) = n.tag
            && v > 4094
        {
            errs.push(FieldError::new(
                format!("{base}.tag"),
                format!("invalid VLAN {v}: use 1-4094 (0 = untagged)"),
            ));
        }
        if let Some(mac) = &n.hwaddr
            && !check_mac(mac)
        {
            errs.push(FieldError::new(
                format!("{base}.hwaddr"),
                format!("invalid MAC {mac:?}: use six hex pairs, e.g. \"bc:24:11:00:00:01\""),
            ));
        }
        if let Some(r) = n.rate_limit
            && !(r >= 0.0 && r.is_finite())
        {
            errs.push(FieldError::new(
                format!("{base}.rate-limit"),
                "rate-limit is in MB/s (megabytes per second) and must be 0 or more (0 = unlimited)",
            ));
        }
        if let Some(ip) = &n.ip
            && !(ip == "dhcp" || ip == "manual" || check_cidr(ip))
        {
            errs.push(FieldError::new(
                format!("{base}.ip"),
                format!(
                    "invalid address {ip:?}: use CIDR (\"10.0.0.5/24\"), \"dhcp\" or \"manual\""
                ),
            ));
        }
        if let Some(gw) = &n.gw
            && gw.parse::<IpAddr>().is_err()
        {
            errs.push(FieldError::new(
                format!("{base}.gateway"),
                format!("invalid gateway {gw:?}: an IP address"),
            ));
        }
    }
}

/// Mount points and bind mounts, and their slots.
fn lxc_mounts(s: &LxcSpec, errs: &mut Vec<FieldError>) {
    let (alloc, binds) = lxc_mount_slots(s);
    let mut mp: BTreeMap<String, String> = BTreeMap::new();
    for (i, (m, slot)) in s.mount_points.iter().zip(&alloc).enumerate() {
        let base = format!("spec.mount-points[{i}]");
        if parse_slot(slot, &[("mp", 255)]).is_none() {
            errs.push(FieldError::new(
                format!("{base}.slot"),
                format!("invalid slot {slot:?}: use mp0-mp255"),
            ));
        }
        if let Some(prev) = mp.insert(slot.clone(), base.clone()) {
            errs.push(FieldError::new(
                format!("{base}.slot"),
                format!("slot {slot} is already used by {prev}"),
            ));
        }
        if m.size.bytes() == 0 || m.size.bytes() % 1024 != 0 {
            errs.push(FieldError::new(
                format!("{base}.size"),
                format!("size {} must be a non-zero whole number of KiB", m.size),
            ));
        }
        if let Some(p) = &m.mount_point
            && !check_abs_path(p)
        {
            errs.push(FieldError::new(
                format!("{base}.mount-point"),
                format!("invalid path {p:?}: an absolute path inside the container"),
            ));
        }
    }
    for (i, (b, slot)) in s.bind_mounts.iter().zip(&binds).enumerate() {
        let base = format!("spec.bind-mounts[{i}]");
        if parse_slot(slot, &[("mp", 255)]).is_none() {
            errs.push(FieldError::new(
                format!("{base}.slot"),
                format!("invalid slot {slot:?}: use mp0-mp255"),
            ));
        }
        if let Some(prev) = mp.insert(slot.clone(), base.clone()) {
            errs.push(FieldError::new(
                format!("{base}.slot"),
                format!("slot {slot} is already used by {prev} (bind and allocated mounts share the mpN slots)"),
            ));
        }
        if !check_abs_path(&b.host_path) {
            errs.push(FieldError::new(
                format!("{base}.host-path"),
                format!("invalid path {:?}: an absolute host path", b.host_path),
            ));
        } else if let Some(why) = refused_bind_source(&b.host_path) {
            errs.push(FieldError::new(format!("{base}.host-path"), why));
        }
        if !check_abs_path(&b.mount_point) {
            errs.push(FieldError::new(
                format!("{base}.mount-point"),
                format!(
                    "invalid path {:?}: an absolute path inside the container",
                    b.mount_point
                ),
            ));
        }
    }
}

/// `spec.dns`.
fn lxc_dns(s: &LxcSpec, errs: &mut Vec<FieldError>) {
    if let Some(d) = &s.dns {
        if let Some(h) = &d.hostname
            && (h.is_empty()
                || h.len() > 63
                || !h
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.')))
        {
            errs.push(FieldError::new(
                "spec.dns.hostname",
                format!("invalid hostname {h:?}: letters, digits, '-' and '.'"),
            ));
        }
        for (i, ns) in d.nameservers.iter().enumerate() {
            if ns.parse::<IpAddr>().is_err() {
                errs.push(FieldError::new(
                    format!("spec.dns.nameservers[{i}]"),
                    format!("invalid nameserver {ns:?}: an IP address"),
                ));
            }
        }
    }
}

/// The file extensions PVE's download-url accepts per content type
/// (pve-storage `src/PVE/Storage.pm` `ISO_EXT_RE_0`, `VZTMPL_EXT_RE_1`:
/// a CT template is `.tar` or `.tar.{gz,xz,zst,bz2}`, never `.tgz`).
pub fn artifact_extensions(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::ISO => &[".iso", ".img"],
        Kind::CTTemplate => &[".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2", ".tar"],
        Kind::DiskImage => &[".qcow2", ".vmdk", ".raw"],
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
        | Kind::ClusterFirewall => &[],
    }
}

fn validate_artifact(kind: Kind, s: &ArtifactSpec, errs: &mut Vec<FieldError>) {
    if s.nodes.is_empty() && s.node.is_none() {
        errs.push(FieldError::new(
            "spec.nodes",
            "list at least one node the file must exist on",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, n) in s.nodes.iter().enumerate() {
        if !seen.insert(n) {
            errs.push(FieldError::new(
                format!("spec.nodes[{i}]"),
                format!("node {n} is listed twice"),
            ));
        }
    }
    let f = &s.filename;
    if f.is_empty()
        || f.contains(['/', '\\', ':', ','])
        || f.starts_with('.')
        || f.contains(char::is_whitespace)
        || f.contains("..")
    {
        errs.push(FieldError::new(
            "spec.filename",
            format!("invalid file name {f:?}: a plain file name with no path, spaces, ':' or ','"),
        ));
    } else if crate::names::pve_content_filename(f) != *f {
        errs.push(FieldError::new(
            "spec.filename",
            format!(
                "file name {f:?} would be stored by PVE as {:?} (PVE replaces every character outside a-z, A-Z, 0-9, '_', '.' and '-' with '_'): write {:?}",
                crate::names::pve_content_filename(f),
                crate::names::pve_content_filename(f)
            ),
        ));
    } else {
        let lower = f.to_ascii_lowercase();
        let exts = artifact_extensions(kind);
        if !exts
            .iter()
            .any(|e| lower.ends_with(e) && lower.len() > e.len())
        {
            errs.push(FieldError::new(
                "spec.filename",
                format!(
                    "file name {f:?} has the wrong extension for {} {kind}: PVE accepts {}",
                    crate::names::article(kind),
                    exts.join(", ")
                ),
            ));
        }
    }
    if let Err(e) = check_url(&s.url) {
        errs.push(FieldError::new("spec.url", e));
    }
    if let Some(c) = &s.compression {
        if kind != Kind::ISO {
            errs.push(FieldError::new(
                "spec.compression",
                format!("PVE decompresses downloads of ISO files only, not of {} {kind}: remove compression", crate::names::article(kind)),
            ));
        } else if !ARTIFACT_COMPRESSIONS.contains(&c.as_str()) {
            errs.push(FieldError::new(
                "spec.compression",
                format!(
                    "invalid compression {c:?}: use one of {}",
                    ARTIFACT_COMPRESSIONS.join(", ")
                ),
            ));
        }
    }
    if let Some(c) = &s.checksum {
        let alg = c.algorithm.to_ascii_lowercase();
        let hex_len = match alg.as_str() {
            "md5" => 32,
            "sha1" => 40,
            "sha224" => 56,
            "sha256" => 64,
            "sha384" => 96,
            "sha512" => 128,
            _ => {
                errs.push(FieldError::new(
                    "spec.checksum.algorithm",
                    format!(
                        "invalid algorithm {:?}: use sha256, sha512, sha1 or md5",
                        c.algorithm
                    ),
                ));
                0
            }
        };
        if hex_len > 0
            && !(c.value.len() == hex_len && c.value.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            errs.push(FieldError::new(
                "spec.checksum.value",
                format!("a {alg} checksum is {hex_len} hex digits"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_slots_are_spelled_as_formatting_spells_them() {
        for n in [0, 1, 9, 10, 11, 30, 99, 100, 255, 256, 1000] {
            assert_eq!(numbered_slot("scsi", n), format!("scsi{n}"));
            assert_eq!(numbered_slot("net", n), format!("net{n}"));
        }
    }

    #[test]
    fn an_lxc_gateway_reads_as_gateway_or_pves_gw() {
        let nic = |yaml: &str| serde_yaml::from_str::<LxcNic>(yaml).map(|n| n.gw);
        let want = Some("10.0.0.1".to_owned());
        assert_eq!(
            nic("bridge: vmbr0\ngateway: 10.0.0.1\n").ok(),
            Some(want.clone())
        );
        assert_eq!(nic("bridge: vmbr0\ngw: 10.0.0.1\n").ok(), Some(want));
        assert!(nic("bridge: vmbr0\ngw: 10.0.0.1\ngateway: 10.0.0.1\n").is_err());
    }

    #[test]
    fn bdf_accepts_pves_forms() {
        for ok in [
            "0000:17:00",
            "0000:17:00.0",
            "00:17.0",
            "00000:17:00",
            "1234:01:00.1",
        ] {
            assert!(check_bdf(ok), "{ok}");
        }
        for bad in ["zz:17.0", "0000:17:00.8", "17", ""] {
            assert!(!check_bdf(bad), "{bad}");
        }
    }

    #[test]
    fn urls_need_scheme_and_host() {
        assert!(check_url("https://example.org/a.iso").is_ok());
        assert!(check_url("http://10.0.0.1:8080/x").is_ok());
        assert!(check_url("ftp://example.org/a.iso").is_err());
        assert!(check_url("https:///a.iso").is_err());
        assert!(check_url("https://host:99999/a").is_err());
    }

    #[test]
    fn depends_on_parses_kind_and_name() {
        let refs = parse_depends_on("ISO:debian-iso, VM:db").unwrap_or_default();
        assert_eq!(refs.len(), 2);
        assert!(parse_depends_on("Bogus:x").is_err());
        assert!(parse_depends_on("ISO").is_err());
    }

    #[test]
    fn host_paths_normalise_as_the_kernel_resolves_them_without_links() {
        for (written, resolved) in [
            ("/./etc", "/etc"),
            ("//etc", "/etc"),
            ("/etc/../etc", "/etc"),
            ("/srv/../", "/"),
            ("/srv/data/", "/srv/data"),
            ("/../../etc/pve", "/etc/pve"),
            ("/", "/"),
        ] {
            assert_eq!(
                normalise_host_path(written).as_deref(),
                Some(resolved),
                "{written}"
            );
        }
        assert_eq!(normalise_host_path("srv/data"), None);
    }

    #[test]
    fn a_bind_mount_of_a_system_directory_or_below_it_is_refused_however_written() {
        for path in [
            "/",
            "/./etc",
            "//etc",
            "/etc/../etc",
            "/srv/../",
            "/etc/pve",
            "/etc/pve/priv",
            "/root",
            "/root/.ssh",
            "/var/lib/pve-cluster",
            "/var/lib/vz/images",
            "/dev/sda",
            "/srv",
            "/srv/",
            "/var",
            "/mnt/../usr/lib",
            "/proc/1/root",
        ] {
            assert!(refused_bind_source(path).is_some(), "{path}");
        }
        let why = refused_bind_source("/srv/../etc/pve/priv").unwrap_or_default();
        assert!(
            why.contains(r#""/etc/pve/priv""#) && why.contains(r#"written "/srv/../etc/pve/priv""#),
            "{why}"
        );
        for path in [
            "/srv/data",
            "/mnt/backup",
            "/srv/dns-zones",
            "/var/lib/data",
            "/data",
        ] {
            assert_eq!(refused_bind_source(path), None, "{path}");
        }
    }
}
