//! The policies configuration sets, as plain values: whether a guest with
//! pending changes is restarted ([`RestartPolicy`]), how many actions run
//! at once and how many guests may be down together ([`Limits`]), and how
//! long a failed object is held ([`Backoff`]). Their rules live with their
//! users (the rollout, the hold, the step protocol).

use std::collections::BTreeMap;
use std::time::Duration;

/// Whether ProxOps restarts a guest whose changes PVE holds pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RestartPolicy {
    /// The guest is reported `pending_restart`; a person restarts it.
    #[default]
    Never,
    /// ProxOps sends `status/reboot` (a clean shutdown and start).
    Reboot,
}

impl RestartPolicy {
    /// `never` or `reboot`.
    pub fn parse(text: &str) -> Result<RestartPolicy, String> {
        match text.trim() {
            "never" => Ok(RestartPolicy::Never),
            "reboot" => Ok(RestartPolicy::Reboot),
            other => Err(format!(
                "restart-policy {other:?} must be \"never\" (report pending_restart) or \"reboot\" (restart with status/reboot)"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Never => "never",
            RestartPolicy::Reboot => "reboot",
        }
    }
}

/// Default `reconcile.tasks-per-node`. Measured against fakepve (see
/// docs/performance.md): 4 clones per node in flight take a 200-guest first
/// apply close to its bound; beyond that a real node's disks, not the
/// API, are the limit, and PVE's own task workers queue the rest.
pub const DEFAULT_TASKS_PER_NODE: usize = 4;
/// Default `reconcile.tasks-per-cluster`: the pool of workers one cluster
/// gets. pveproxy answers with 3 workers by default; task status reads are
/// short, so 8 clients in flight keep its queue short.
pub const DEFAULT_TASKS_PER_CLUSTER: usize = 8;
/// Default `reconcile.downloads-per-storage`: two downloads share a
/// storage's bandwidth without one starving the other.
pub const DEFAULT_DOWNLOADS_PER_STORAGE: usize = 2;
/// Default `reconcile.disruption-budget`: rolling, one guest at a time.
pub const DEFAULT_DISRUPTION_BUDGET: usize = 1;

/// How many guests ProxOps may make unavailable at once (stopped for a
/// stop-start change, rebooting, shut down before a template conversion,
/// stopped by a Stop action).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisruptionBudget {
    /// Per cluster (`disruption-budget`, default 1: rolling).
    pub cluster: usize,
    /// Per group, for a group not named in `groups`
    /// (`disruption-group-budget`, default 1).
    pub group_default: usize,
    /// Named groups' budgets (`disruption-groups: {db: 1}`).
    pub groups: BTreeMap<String, usize>,
}

impl DisruptionBudget {
    /// The budget of the group `name`.
    pub fn of_group(&self, name: &str) -> usize {
        self.groups
            .get(name)
            .copied()
            .unwrap_or(self.group_default)
            .max(1)
    }
}

impl Default for DisruptionBudget {
    fn default() -> DisruptionBudget {
        DisruptionBudget {
            cluster: DEFAULT_DISRUPTION_BUDGET,
            group_default: DEFAULT_DISRUPTION_BUDGET,
            groups: BTreeMap::new(),
        }
    }
}

/// The limits a cluster's actions run under. Every limit is at least 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Actions in flight on one node (`tasks-per-node`).
    pub per_node: usize,
    /// Actions in flight in the cluster (`tasks-per-cluster`).
    pub per_cluster: usize,
    /// Downloads in flight to one storage of one node
    /// (`downloads-per-storage`).
    pub downloads_per_storage: usize,
    pub disruption: DisruptionBudget,
}

impl Limits {
    /// One action at a time: what a caller without configuration gets.
    pub fn serial() -> Limits {
        Limits {
            per_node: 1,
            per_cluster: 1,
            downloads_per_storage: 1,
            disruption: DisruptionBudget::default(),
        }
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            per_node: DEFAULT_TASKS_PER_NODE,
            per_cluster: DEFAULT_TASKS_PER_CLUSTER,
            downloads_per_storage: DEFAULT_DOWNLOADS_PER_STORAGE,
            disruption: DisruptionBudget::default(),
        }
    }
}

/// How long a held object waits: `first` after its first failure, doubling
/// with each further one, never more than `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Backoff {
    /// `reconcile.hold-after-failure`'s default: long enough that a guest
    /// is not taken down every poll interval (30 s by default), short
    /// enough that a fix on PVE is picked up within minutes.
    pub const DEFAULT_FIRST: Duration = Duration::from_secs(5 * 60);
    /// `reconcile.hold-max`'s default: a guest whose restart keeps failing
    /// is tried once an hour, where a person will have seen it.
    pub const DEFAULT_MAX: Duration = Duration::from_secs(60 * 60);

    /// The wait after `failures` failures in a row (at least one).
    pub fn wait(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.first
            .saturating_mul(1u32 << doublings)
            .min(self.max.max(self.first))
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            first: Backoff::DEFAULT_FIRST,
            max: Backoff::DEFAULT_MAX,
        }
    }
}
