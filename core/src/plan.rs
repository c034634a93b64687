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
//!   never a write.

use serde::Serialize;

use crate::action::{Action, Anomaly, Skipped};
use crate::names::ClusterName;

/// Knobs that shape a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Prunes per cluster per cycle; 0 = unlimited.
    pub prune_budget: u32,
    /// The cluster's node allowlist; empty = every node. Nothing outside it
    /// is planned for, even if a snapshot holds it.
    pub nodes: std::collections::BTreeSet<crate::names::NodeName>,
    /// The cluster's `allow-empty-prune`: a kind with no manifest left may
    /// be pruned (within the budget) instead of being held by the
    /// empty-desired guard.
    pub allow_empty_prune: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            prune_budget: crate::config::DEFAULT_PRUNE_BUDGET,
            nodes: Default::default(),
            allow_empty_prune: false,
        }
    }
}

impl Policy {
    pub fn allows(&self, node: &crate::names::NodeName) -> bool {
        self.nodes.is_empty() || self.nodes.contains(node)
    }
}

/// One cluster's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub cluster: ClusterName,
    /// The cluster does nothing this cycle (failed read, invalid input).
    pub aborted: bool,
    pub abort_reason: Option<String>,
    /// In execution order.
    pub actions: Vec<Action>,
    pub skipped: Vec<Skipped>,
    /// Prunes held back by the budget or the empty-desired guard.
    pub deferred: Vec<Action>,
    pub anomalies: Vec<Anomaly>,
}

impl Plan {
    pub fn aborted(cluster: ClusterName, reason: impl Into<String>) -> Plan {
        Plan {
            cluster,
            aborted: true,
            abort_reason: Some(reason.into()),
            actions: Vec::new(),
            skipped: Vec::new(),
            deferred: Vec::new(),
            anomalies: Vec::new(),
        }
    }

    /// Nothing to do and nothing to report.
    pub fn is_empty(&self) -> bool {
        !self.aborted
            && self.actions.is_empty()
            && self.deferred.is_empty()
            && self.anomalies.is_empty()
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

pub use crate::planner::{plan, sort_actions};
