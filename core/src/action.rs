//! What a plan is made of: actions, their field changes, their impact on
//! the guest, and the PVE work each one stands for.
//!
//! These are values only. The planner builds them, renderings print them,
//! the adapters' runner turns `Work` into requests. Secret parameter values
//! (a cloud-init password resolved from SOPS) are carried as `Secret` and
//! never rendered.
//!
//! Actions serialise and deserialise (serde) for saved plans
//! ([`crate::saved`]). A secret value never does: serialising one is an
//! error; only a [`ParamValue::SecretRef`], the name of the secret in the
//! cluster's SOPS file, is written, and it must be resolved again before
//! the action may run.

use std::fmt;

use serde::{Deserialize, Serialize};

use proxops_model::live::GuestType;
use proxops_model::names::{Kind, NodeName, Ref, StorageId, Vmid};
use proxops_model::wire::Bytes;

pub use proxops_translate::change::{
    Anomaly, AnomalyKind, AnomalyType, Change, Impact, ParamValue, Params, SECRET_PLACEHOLDER,
    Target, impact_word,
};

/// The PVE work an action stands for; the runner maps it to endpoints
/// (spec §14.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Work {
    /// `POST /nodes/{n}/qemu` (or `/lxc`), then for templates mark it.
    CreateGuest {
        guest_type: GuestType,
        params: Params,
        mark_template: bool,
    },
    /// `POST /nodes/{n}/qemu/{source}/clone` then a config write of
    /// `config` plus `delete`, then `status/start` when `start_after` (the
    /// clone endpoint rejects `start`, so a clone that should run is started
    /// in the same action and converges in one cycle).
    CloneGuest {
        source: Vmid,
        /// The node the template is on (or is being created on): the clone
        /// request goes there, with `target` when the clone lives elsewhere.
        source_node: NodeName,
        name: String,
        config: Params,
        delete: Vec<String>,
        start_after: bool,
        /// The pool the clone joins, sent with the clone request
        /// (qemu-server `PVE/API2/Qemu.pm` `clone_vm`: `pool`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pool: Option<String>,
    },
    /// `POST /nodes/{n}/storage/{s}/download-url`.
    Download { storage: StorageId, params: Params },
    /// A config write (`POST` qemu, `PUT` lxc) carrying the digest PVE
    /// reported when the config was read, so a concurrent edit is refused.
    UpdateConfig {
        guest_type: GuestType,
        params: Params,
        delete: Vec<String>,
        digest: Option<String>,
        /// The change needs the guest powered off (a `stop-start` change,
        /// or `state: stopped`): written first while the guest runs (PVE
        /// holds it pending), then the guest is shut down, which applies
        /// it. The name is kept from when the stop came first, so saved
        /// plans still read.
        stop_first: bool,
        /// Started again after that shutdown.
        restart_after: bool,
        /// The HA resource (`vm:100`) when the HA manager owns the guest's
        /// power: the power-off and the start are requested from it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ha: Option<String>,
    },
    /// `status/start`, or for an HA-managed guest (`ha`) the HA manager
    /// asked for `started`.
    Start {
        guest_type: GuestType,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ha: Option<String>,
    },
    /// A graceful `status/shutdown`, or for an HA-managed guest (`ha`) the
    /// HA manager asked for `stopped`; `digest` is the config digest the
    /// plan saw, which the guest must still show before it is shut down.
    Stop {
        guest_type: GuestType,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ha: Option<String>,
        digest: Option<String>,
    },
    /// Mark as template; a running guest is stopped first (PVE refuses to
    /// convert a running guest), after the guest is found as the plan saw
    /// it (`digest`).
    MarkTemplate {
        guest_type: GuestType,
        stop_first: bool,
        digest: Option<String>,
    },
    /// `DELETE /nodes/{n}/{type}/{id}` (never `force`), stopping first
    /// when the guest runs; with `purge=1` when the cluster lets ProxOps
    /// remove an HA-managed or replicated guest from those configurations
    /// too (`reconcile.purge-ha-and-replicated`). Only after the guest is
    /// found as the plan saw it: config `digest`, the ownership tag, no
    /// `proxops-noprune`, no protection, no lock.
    Delete {
        guest_type: GuestType,
        stop_first: bool,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        purge: bool,
        digest: Option<String>,
    },
    /// A restart that applies the changes PVE holds pending: a VM's
    /// `status/reboot` with the shutdown timeout (qemu-server `API2/Qemu.pm`
    /// `vm_reboot`), a container's graceful shutdown and start, an
    /// HA-managed guest's (`ha`) `stopped` then `started` asked of the HA
    /// manager (`vm_reboot` is not HA-aware); after the guest is found as
    /// the plan saw it (`digest`).
    Reboot {
        guest_type: GuestType,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ha: Option<String>,
        digest: Option<String>,
    },
    /// One synchronous write to a cluster-level object (`/pools`,
    /// `/cluster/backup`): PVE answers `null` and the change is made. The
    /// planner builds the path and the form ([`crate::cluster`]); a delete
    /// of an object already gone is done.
    ClusterWrite {
        method: WriteMethod,
        path: String,
        params: Params,
    },
    /// Writes to PVE's firewall (pve-firewall `API2/Firewall/*.pm`), one
    /// entry per call, in order: the calls that turn one list (a rule
    /// list, an IP set, the aliases, the options) or one object into what
    /// the manifest says. Each is synchronous (PVE answers `null`); each
    /// that PVE checks carries a digest: the one the plan read, or the
    /// one a read right before it returned, after that read found the
    /// list as the plan expects it at that point ([`FirewallCall`]).
    Firewall { calls: Vec<FirewallCall> },
    /// `PUT /nodes/{n}/{type}/{id}/resize` with `disk=<key>` and the new
    /// absolute `size` (PVE's binary K/M/G/T spelling): grows one disk or
    /// mount point, online too. PVE refuses to shrink, so `size` is
    /// always larger than the live one.
    Resize {
        guest_type: GuestType,
        disk: String,
        size: Bytes,
    },
}

/// One write of a [`Work::Firewall`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FirewallCall {
    pub method: WriteMethod,
    /// Below `/api2/json`, its data segments encoded.
    pub path: String,
    /// The form, without the digest.
    pub params: Params,
    /// The list's digest as the plan read it, sent as `digest`: PVE
    /// refuses the call when the list changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// A read of the list right before the call, which must find it as
    /// the plan expects it at this point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadBack>,
}

/// The read before a [`FirewallCall`]: `GET list`, each entry as one line
/// (a rule in its config-file form, an entry or option as `key=value`
/// fields), compared with `expect`; then the call carries the digest that
/// read returned, when PVE's endpoint takes one (`send_digest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadBack {
    pub list: String,
    /// The field naming each entry: `pos` for a rule list, `name`,
    /// `cidr` or `group` for a keyed list, `options` for options.
    pub key: String,
    /// Only the entry of this name is compared (a list other objects
    /// share, as the cluster's aliases); `None`: the whole list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<String>,
    pub expect: Vec<String>,
    pub send_digest: bool,
}

/// The HTTP method of a [`Work::ClusterWrite`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum WriteMethod {
    Post,
    Put,
    Delete,
}

/// The kind of an action, as renderings and metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    Create,
    Clone,
    Download,
    MarkTemplate,
    Update,
    Resize,
    Start,
    Stop,
    /// A restart that applies the changes PVE holds pending.
    Reboot,
    Prune,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Clone => "clone",
            Op::Download => "download",
            Op::MarkTemplate => "mark-template",
            Op::Update => "update",
            Op::Resize => "resize",
            Op::Start => "start",
            Op::Stop => "stop",
            Op::Reboot => "reboot",
            Op::Prune => "prune",
        }
    }

    /// Sort rank inside a dependency level (spec §13.7, with mark-template
    /// given its own rank right after create).
    pub fn rank(self) -> u8 {
        match self {
            Op::Download => 0,
            Op::Create | Op::Clone => 1,
            Op::MarkTemplate => 2,
            Op::Update => 3,
            // After the guest's config write: a write that carries the
            // disk's live form (with its old `size=`) never undoes a grow.
            Op::Resize => 4,
            Op::Start => 5,
            Op::Stop => 6,
            // After the update whose changes it applies.
            Op::Reboot => 7,
            Op::Prune => 9,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    pub op: Op,
    pub kind: Kind,
    /// `metadata.name` for desired objects; the PVE name for prunes of
    /// objects that have no manifest.
    pub name: String,
    pub node: NodeName,
    pub target: Target,
    pub impact: Impact,
    pub changes: Vec<Change>,
    /// Why, in words a reviewer understands.
    pub reason: String,
    /// Dependency level of the object (prunes: reverse order).
    pub level: u32,
    /// Objects whose actions must succeed first in this cycle.
    pub deps: Vec<Ref>,
    /// The desired object this action serves (`None` for prunes of
    /// objects without a manifest).
    pub object: Option<Ref>,
    pub work: Work,
}

impl Action {
    /// A `needs_person` anomaly that stands for this action, which is not
    /// done, `message` saying why.
    pub fn instead(&self, message: String) -> Anomaly {
        Anomaly {
            anomaly: AnomalyKind::NeedsPerson,
            kind: Some(self.kind),
            name: Some(self.name.clone()),
            node: Some(self.node.clone()),
            id: Some(self.target.clone()),
            field: None,
            message,
        }
    }

    /// The word the renderings show in the impact column: the impact on
    /// the guest, except that a stop is downtime and a prune destroys the
    /// guest and its disks, which "live" would hide.
    pub fn impact_word(&self) -> &'static str {
        impact_word(self.op.as_str(), self.impact)
    }

    pub fn is_destructive(&self) -> bool {
        self.op == Op::Prune || self.impact == Impact::StopStart || self.op == Op::Stop
    }
}

/// An object that gets no action this cycle, and why.
///
/// Ordered as the renderings list it: by kind, name, node, id and reason
/// as they are shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub kind: Kind,
    /// `metadata.name`, or the PVE name of a live guest without a manifest.
    pub name: String,
    pub node: NodeName,
    /// The guest's vmid or the storage file.
    pub id: Target,
    pub reason: SkipReason,
}

impl PartialOrd for Skipped {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Skipped {
    /// Kind, name, node, then the id and reason as shown: each text is
    /// built only when everything before it ties (building them for every
    /// comparison made sorting a large plan's skips costly).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.kind.as_str(), self.name.as_str(), self.node.as_str())
            .cmp(&(
                other.kind.as_str(),
                other.name.as_str(),
                other.node.as_str(),
            ))
            .then_with(|| self.id.to_string().cmp(&other.id.to_string()))
            .then_with(|| self.reason.to_string().cmp(&other.reason.to_string()))
    }
}

/// Why an object gets no action this cycle. Code branches on the variant;
/// its `Display` is the text every rendering shows.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SkipReason {
    /// A live guest ProxOps does not own: no `proxops` tag (`legacy`: only
    /// the old `pveconform` tag, treated as untagged).
    Untagged { legacy: bool },
    /// A proxops-tagged guest with no manifest, annotated
    /// `proxops/prune: disabled`.
    PruneProtected,
    /// The guest's node is not online: nothing is planned for it.
    NodeOffline { node: NodeName },
    /// The guest's config could not be read (PVE's message).
    ConfigUnreadable { message: String },
    /// The storage listing an artifact's download depends on failed.
    StorageUnreadable {
        message: String,
        storage: StorageId,
        filename: String,
    },
    /// The storage an artifact goes to was not read this cycle.
    StorageNotRead {
        node: NodeName,
        storage: StorageId,
        filename: String,
    },
    /// A create waits for an artifact that is not placed on its node.
    ArtifactNotPlaced { artifact: Ref, node: NodeName },
    /// A create waits for an artifact whose presence on its node is
    /// unknown this cycle.
    ArtifactUnknown { artifact: Ref, node: NodeName },
    /// A create waits for an artifact whose download to its node PVE
    /// would refuse (the artifact's own anomaly says why).
    ArtifactRefused { artifact: Ref, node: NodeName },
    /// PVE holds the guest locked (`backup`, `migrate`, `snapshot`,
    /// `suspended`, …) and refuses config changes until the lock goes:
    /// nothing is attempted.
    Locked { lock: String },
    /// The config matches, but PVE holds changes pending that the running
    /// guest only takes at its next restart, and the restart policy is
    /// `never`: the keys are named, nothing is written.
    PendingRestart { keys: Vec<String> },
    /// A clone on another node than its template's, whose template has a
    /// volume on storage not known to be shared: PVE refuses that clone
    /// ("can't clone VM to node … (VM uses local storage)").
    CloneNeedsSharedStorage {
        template: Vmid,
        template_node: NodeName,
        storage: StorageId,
    },
    /// A clone on another node than its template's whose template's
    /// volumes are not known this cycle (its config was not read).
    CloneStorageUnknown {
        template: Vmid,
        template_node: NodeName,
    },
    /// PVE reports the guest's status as neither running nor stopped
    /// (`unknown`: its node sent no data yet): no power is assumed, nothing
    /// is planned.
    PowerUnknown,
    /// PVE still lists an object with this identity that it is removing
    /// (a replication job marked `remove_job`, `id`): a new one would be
    /// refused until the replication runner has removed it.
    BeingRemoved { id: String },
    /// QEMU reports the running VM paused: PVE refuses to shut it down or
    /// reboot it, so its disruptive action waits (`op`).
    Paused { op: String },
    /// The object's disruptive action (`op`) failed `failures` times in a
    /// row; the daemon tries it again at `next_attempt` (a backoff,
    /// [`crate::hold`]), or at once after a commit that changes it.
    Held {
        op: String,
        failures: u32,
        next_attempt: proxops_model::time::Timestamp,
        error: String,
    },
}

impl SkipReason {
    /// A live guest ProxOps does not own.
    pub fn is_untagged(&self) -> bool {
        matches!(self, SkipReason::Untagged { .. })
    }

    /// The guest waits for a restart to take pending changes: not converged.
    pub fn is_pending_restart(&self) -> bool {
        matches!(self, SkipReason::PendingRestart { .. })
    }

    /// Work the desired state asks for and this cycle does not do (a
    /// locked guest, an offline node, an artifact not there yet, …), as
    /// against what ProxOps never touches by design (an untagged guest, a
    /// prune-protected one) and a pending restart (counted on its own).
    pub fn is_undone_work(&self) -> bool {
        !matches!(
            self,
            SkipReason::Untagged { .. }
                | SkipReason::PruneProtected
                | SkipReason::PendingRestart { .. }
        )
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Untagged { legacy: true } => f.write_str(
                "live object without proxops tag (only the old pveconform tag, treated as untagged); never touched",
            ),
            SkipReason::Untagged { legacy: false } => {
                f.write_str("live object without proxops tag; never touched")
            }
            SkipReason::PruneProtected => write!(
                f,
                "absent in git but tagged {} (proxops/prune: disabled); never pruned",
                proxops_model::manifest::NO_PRUNE_TAG
            ),
            SkipReason::NodeOffline { node } => {
                write!(f, "node {node} is not online this cycle; nothing planned for it")
            }
            SkipReason::ConfigUnreadable { message } => write!(
                f,
                "config unreadable this cycle ({message}); no change planned"
            ),
            SkipReason::StorageUnreadable {
                message,
                storage,
                filename,
            } => write!(
                f,
                "live inventory unreadable this cycle ({message}); skipping download of {storage}/{filename}"
            ),
            SkipReason::StorageNotRead {
                node,
                storage,
                filename,
            } => write!(
                f,
                "storage {storage} on {node} was not read this cycle; skipping download of {filename}"
            ),
            SkipReason::ArtifactNotPlaced { artifact, node } => write!(
                f,
                "create deferred: {artifact} is not placed on node {node} (add {node} to its spec.nodes)"
            ),
            SkipReason::ArtifactRefused { artifact, node } => write!(
                f,
                "create deferred: {artifact} cannot be downloaded to node {node} (see its anomaly)"
            ),
            SkipReason::ArtifactUnknown { artifact, node } => write!(
                f,
                "create deferred: {artifact} presence on node {node} is unknown this cycle"
            ),
            SkipReason::Locked { lock } if lock == "suspended" => f.write_str(
                "locked (suspended): PVE refuses changes to a hibernated guest until it is resumed; resume it (qm resume), nothing is attempted until then",
            ),
            SkipReason::Locked { lock } => write!(
                f,
                "locked ({lock}): PVE refuses changes while the lock is held; nothing attempted this cycle"
            ),
            SkipReason::PendingRestart { keys } => write!(
                f,
                "pending restart: PVE holds {} pending until the guest restarts (restart-policy never: restart it, or set proxops/restart-policy: reboot)",
                keys.join(", ")
            ),
            SkipReason::CloneNeedsSharedStorage {
                template,
                template_node,
                storage,
            } => write!(
                f,
                "clone refused: template {template} is on node {template_node} with a volume on storage {storage}, which is not shared; PVE clones to another node only from shared storage (put the VM on {template_node}, or the template on shared storage)"
            ),
            SkipReason::CloneStorageUnknown {
                template,
                template_node,
            } => write!(
                f,
                "create deferred: template {template} on node {template_node} could not be read this cycle, so whether its volumes are on shared storage is unknown"
            ),
            SkipReason::BeingRemoved { id } => write!(
                f,
                "create deferred: PVE is still removing {id} (remove_job) and refuses a second job to the same target until its replication runner has removed it"
            ),
            SkipReason::PowerUnknown => f.write_str(
                "PVE reports its status as unknown (neither running nor stopped: its node has sent no status yet); nothing planned this cycle",
            ),
            SkipReason::Paused { op } => write!(
                f,
                "paused: QEMU reports the VM paused (qmpstatus), and PVE refuses to shut down or reboot a paused VM (\"VM is paused - cannot shutdown\"); its {op} waits: resume it (qm resume) or stop it by hand"
            ),
            SkipReason::Held {
                op,
                failures,
                next_attempt,
                error,
            } => write!(
                f,
                "held: its {op} failed {failures} time(s) in a row, so it is not tried again before {} (or a commit that changes it); last error: {error}",
                proxops_model::time::rfc3339(*next_attempt)
            ),
        }
    }
}
