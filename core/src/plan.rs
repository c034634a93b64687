//! The planner (spec §13): (desired, live, policy) → an ordered plan with
//! its safety rails applied. Pure and deterministic: same inputs, same plan,
//! byte for byte.
//!
//! Safety rails, each proven by property tests in `core/tests/`:
//! - only guests carrying the `proxops` tag are ever prune candidates
//!   (`pveconform` counts as untagged); storage artifacts and objects
//!   annotated `proxops/prune: disabled` never are;
//! - at most `prune_budget` prunes per cluster per cycle (0 = unlimited),
//!   the rest deferred;
//! - the empty-desired guard: when a guest kind (VM, TemplateVM, LXC,
//!   TemplateCT) has no manifest left but PVE holds proxops-tagged guests of
//!   that kind that would be pruned, none of them is, whatever the budget,
//!   and an `empty_desired` anomaly says why — unless the cluster sets
//!   `allow-empty-prune: true`;
//! - a manifest acts only on a guest that carries the `proxops` tag (or that
//!   its adopted manifest claims): a vmid held by a guest ProxOps does not
//!   own is an anomaly, never a write, stop, update or create;
//! - tags are matched as PVE matches them, ignoring case;
//! - a failed PVE read is never absence: nothing is created or pruned from it;
//! - a change PVE would implement by re-creating a volume is an anomaly,
//!   never a write;
//! - the guest ProxOps runs in (its MAC or SMBIOS UUID, [`crate::host`]) is
//!   never stopped, restarted, marked a template or pruned: such a change is
//!   an anomaly naming it, while a change PVE applies live is still written.

use serde::Serialize;

use crate::action::{Action, Anomaly, Skipped};
use proxops_model::diag::Diagnostic;
use proxops_model::names::{ClusterName, Kind, NodeName, Vmid};
pub use proxops_model::outcome::AbortCause;

/// Knobs that shape a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Prunes per cluster per cycle; 0 = unlimited.
    pub prune_budget: u32,
    /// The cluster's node allowlist; empty = every node. Nothing outside it
    /// is planned for, even if a snapshot holds it.
    pub nodes: std::collections::BTreeSet<proxops_model::names::NodeName>,
    /// The cluster's `allow-empty-prune`: a kind with no manifest left may
    /// be pruned (within the budget) instead of being held by the
    /// empty-desired guard.
    pub allow_empty_prune: bool,
    /// The cluster's `allow-firewall-lockout`: a plan that would lock
    /// operators out through the cluster firewall goes, with a warning
    /// naming the weakened rail, instead of being refused.
    pub allow_firewall_lockout: bool,
    /// `restart-policy`: whether ProxOps restarts a guest that waits for a
    /// restart to take pending changes (a manifest's
    /// `proxops/restart-policy` overrides it).
    pub restart_policy: proxops_model::config::RestartPolicy,
    /// `purge-ha-and-replicated`: a prune of an HA-managed or replicated
    /// guest is sent with `purge=1` instead of being an anomaly.
    pub purge_ha_and_replicated: bool,
    /// What identifies the host ProxOps runs on: a live guest that shows
    /// it is never stopped, restarted or deleted (see [`crate::host`]).
    pub host: proxops_model::host::HostIdentity,
    /// The disruption budget the plan's rollout is told under (execution
    /// applies it; the plan only says how the change will roll).
    pub disruption: crate::rollout::DisruptionBudget,
    /// ProxOps calls PVE as `root@pam` (ticket authentication as that
    /// user). An API token never is: PVE refuses it what only `root@pam`
    /// may change, and the planner refuses that at plan time
    /// ([`proxops_translate::refuse`]).
    pub root_pam: bool,
    /// Objects held back after a failed disruptive action (the daemon's
    /// memory across cycles, [`crate::holds`]); empty for a one-shot plan.
    pub holds: crate::holds::Holds,
    /// The time holds are judged at (core reads no clock).
    pub now: proxops_model::time::Timestamp,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            prune_budget: proxops_model::config::DEFAULT_PRUNE_BUDGET,
            nodes: Default::default(),
            allow_empty_prune: false,
            allow_firewall_lockout: false,
            restart_policy: proxops_model::config::RestartPolicy::Never,
            purge_ha_and_replicated: false,
            host: Default::default(),
            disruption: Default::default(),
            root_pam: false,
            holds: Default::default(),
            now: 0,
        }
    }
}

/// The one PVE user that may change what PVE reserves for `root@pam`
/// (privileged containers' features, bind mounts, raw PCI addresses).
pub const ROOT_PAM: &str = "root@pam";

impl Policy {
    /// The policy cluster `cc`'s plans are made under, from the
    /// configuration, on the host `host` identifies. No holds: those are
    /// the daemon's, set per cycle. A plan from a recording is made as the
    /// configuration would call PVE (`root_pam` from its `auth` and
    /// `user`); the caller sets what the credentials really are.
    pub fn from_config(
        cfg: &proxops_model::config::Config,
        cc: &proxops_model::config::ClusterConfig,
        host: proxops_model::host::HostIdentity,
    ) -> Policy {
        use proxops_model::config::AuthMethod;
        Policy {
            prune_budget: cfg.prune_budget,
            nodes: cc.nodes.clone(),
            allow_empty_prune: cc.allow_empty_prune,
            allow_firewall_lockout: cc.allow_firewall_lockout,
            restart_policy: cc.restart_policy,
            purge_ha_and_replicated: cc.purge_ha_and_replicated,
            host,
            disruption: cc.limits.disruption.clone(),
            root_pam: cfg.auth == AuthMethod::Ticket && cfg.user.as_deref() == Some(ROOT_PAM),
            holds: Default::default(),
            now: 0,
        }
    }

    pub fn allows(&self, node: &proxops_model::names::NodeName) -> bool {
        self.nodes.is_empty() || self.nodes.contains(node)
    }
}

/// A live guest found to be the one ProxOps runs in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct SelfGuest {
    pub node: NodeName,
    pub vmid: Vmid,
    /// The PVE name, or `vmid-<id>`.
    pub name: String,
    /// What matched: `net0 MAC bc:24:11:4e:8f:d1`, `smbios1 uuid …`.
    pub matched: String,
}

/// An object a targeted plan left out, as `Kind/name` (a live guest
/// without a manifest by its PVE name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct NotConsidered {
    pub kind: Kind,
    pub name: String,
}

impl std::fmt::Display for NotConsidered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// Why a cluster does nothing this cycle: its cause (what code and metrics
/// branch on) and the words a person reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abort {
    pub cause: AbortCause,
    pub reason: String,
}

impl Abort {
    pub fn new(cause: AbortCause, reason: impl Into<String>) -> Abort {
        Abort {
            cause,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

/// One cluster's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub cluster: ClusterName,
    /// Why the cluster does nothing this cycle (failed read, invalid
    /// input); `None` for a plan that goes ahead.
    pub abort: Option<Abort>,
    /// In execution order.
    pub actions: Vec<Action>,
    pub skipped: Vec<Skipped>,
    /// Prunes held back by the budget or the empty-desired guard.
    pub deferred: Vec<Action>,
    pub anomalies: Vec<Anomaly>,
    /// The live guests ProxOps runs in (matched by [`Policy::host`]).
    pub self_guests: Vec<SelfGuest>,
    /// What made an aborted cluster's input invalid, one entry per problem
    /// (file, line, field, message), sorted; empty otherwise. Like every
    /// diagnostic, none holds a secret value.
    pub diagnostics: Vec<Diagnostic>,
    /// How the actions roll out: which may run at once, how many guests
    /// are made unavailable at a time.
    pub rollout: crate::rollout::Rollout,
    /// What `--target` left out of this plan, sorted ([`crate::target`]);
    /// empty for a plan of everything.
    pub not_considered: Vec<NotConsidered>,
}

impl Plan {
    /// A plan that does nothing: the cluster aborts for `cause`, `reason`
    /// saying why to a person.
    pub fn aborted(cluster: ClusterName, cause: AbortCause, reason: impl Into<String>) -> Plan {
        Plan {
            cluster,
            abort: Some(Abort::new(cause, reason)),
            actions: Vec::new(),
            skipped: Vec::new(),
            deferred: Vec::new(),
            anomalies: Vec::new(),
            self_guests: Vec::new(),
            diagnostics: Vec::new(),
            rollout: Default::default(),
            not_considered: Vec::new(),
        }
    }

    /// The cluster does nothing this cycle.
    pub fn is_aborted(&self) -> bool {
        self.abort.is_some()
    }

    /// Why, in words, when aborted.
    pub fn abort_reason(&self) -> Option<&str> {
        self.abort.as_ref().map(|a| a.reason.as_str())
    }

    /// Why, as a class, when aborted.
    pub fn abort_cause(&self) -> Option<AbortCause> {
        self.abort.as_ref().map(|a| a.cause)
    }

    /// The plan with the input problems that aborted it, sorted.
    pub fn with_diagnostics(mut self, mut diagnostics: Vec<Diagnostic>) -> Plan {
        diagnostics.sort();
        diagnostics.dedup();
        self.diagnostics = diagnostics;
        self
    }

    /// Nothing to do and nothing to report.
    pub fn is_empty(&self) -> bool {
        !self.is_aborted()
            && self.actions.is_empty()
            && self.deferred.is_empty()
            && self.anomalies.is_empty()
            && !self.waits_for_restart()
    }

    /// A guest waits for a restart to take changes PVE holds pending: a
    /// change not yet in effect, though nothing is written for it.
    pub fn waits_for_restart(&self) -> bool {
        self.skipped.iter().any(|s| s.reason.is_pending_restart())
    }

    /// `diff --exit-code`'s question: does this plan change something, or
    /// leave a change waiting for a restart?
    pub fn has_changes(&self) -> bool {
        !self.actions.is_empty() || self.waits_for_restart()
    }

    /// The skipped items that are work left undone this cycle
    /// ([`crate::action::SkipReason::is_undone_work`]).
    pub fn skipped_work(&self) -> usize {
        self.skipped
            .iter()
            .filter(|s| s.reason.is_undone_work())
            .count()
    }

    /// `diff --exit-code`'s other question: does something remain that
    /// ProxOps will not do by itself — an anomaly for a person, work
    /// skipped this cycle, or the whole cluster aborted? (Prunes deferred
    /// past the budget are not: later cycles do them.)
    pub fn needs_attention(&self) -> bool {
        self.is_aborted() || !self.anomalies.is_empty() || self.skipped_work() > 0
    }
}

/// Counts used by summaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PlanCounts {
    pub actions: usize,
    pub prunes: usize,
    pub deferred: usize,
    pub skipped: usize,
    pub anomalies: usize,
}
