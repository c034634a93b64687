//! The outcome vocabulary of a cluster's cycle: how it ended
//! ([`CycleResult`], the `result` label of `proxops_cycles_total`) and why
//! a cluster did nothing ([`AbortCause`]).

use serde::Serialize;

/// How one cluster's part of a cycle ended: the `result` label of
/// `proxops_cycles_total`.
///
/// The set is the one of spec §22.6 (more informative than §17.4's
/// `ok`/`parse_error`/`git_error`/`aborted`), plus `aborted` for every other
/// reason a cluster did nothing (invalid configuration or credentials,
/// shutdown before its turn). A git failure with no previous good tree is
/// `not_ready`; a git failure with a good tree is not a result at all but
/// `desired_stale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CycleResult {
    /// Planned and executed (whatever the individual actions did).
    Ok,
    /// Planned; the executor was gated off.
    DryRun,
    /// Git sync failed and there is no previous good tree: no PVE call made.
    NotReady,
    /// A manifest, composition or cloud-init secret reference is invalid.
    ParseError,
    /// A manifest names a node outside the cluster's allowlist.
    UnknownNode,
    /// The live inventory could not be read.
    PveReadError,
    /// The planner refused.
    PlanError,
    /// Another ProxOps process on this host held the cluster (its lock in
    /// the data directory): nothing read or written; tried again next cycle.
    Locked,
    /// Any other abort (configuration, credentials, shutdown).
    Aborted,
}

impl CycleResult {
    /// Every result, in the order metrics list them.
    pub const ALL: [CycleResult; 9] = [
        CycleResult::Ok,
        CycleResult::DryRun,
        CycleResult::NotReady,
        CycleResult::ParseError,
        CycleResult::UnknownNode,
        CycleResult::PveReadError,
        CycleResult::PlanError,
        CycleResult::Locked,
        CycleResult::Aborted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CycleResult::Ok => "ok",
            CycleResult::DryRun => "dry_run",
            CycleResult::NotReady => "not_ready",
            CycleResult::ParseError => "parse_error",
            CycleResult::UnknownNode => "unknown_node",
            CycleResult::PveReadError => "pve_read_error",
            CycleResult::PlanError => "plan_error",
            CycleResult::Locked => "locked",
            CycleResult::Aborted => "aborted",
        }
    }
}

/// Why a cluster does nothing this cycle: one value per place that aborts
/// a cluster, as code and metrics branch on it. The abort's text
/// (the plan's `abort_reason`) is for a person and may be reworded freely; the
/// `result` label of `proxops_cycles_total` comes from the cause alone
/// ([`AbortCause::label`]), never from the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AbortCause {
    /// Git sync failed and there is no previous good tree: no PVE call.
    NotReady,
    /// Manifests, composition, configuration or cloud-init secret
    /// references are invalid.
    InvalidInput,
    /// A manifest names a node outside the cluster's allowlist.
    UnknownNode,
    /// The live inventory (or a guest config on an online node) could not
    /// be read.
    PveRead,
    /// The planner refused.
    Plan,
    /// Another ProxOps process on this host held the cluster's lock for the
    /// whole wait.
    Locked,
    /// The cluster's lock file could not be created, opened or locked.
    LockUnavailable,
    /// The recording to replay could not be loaded.
    Recording,
    /// PVE did not say which cluster it is, so it may be another cluster's.
    PveUnidentified,
    /// Two cluster configurations lead to one PVE.
    SharedPve,
    /// The credentials cannot audit what the cluster manages (PVE would
    /// hide guests from the inventory read).
    MissingPrivilege,
    /// Credentials or TLS settings are unusable.
    Credentials,
    /// The repository could not be read (not invalid: unreadable).
    RepositoryUnreadable,
}

impl AbortCause {
    /// Every cause.
    pub const ALL: [AbortCause; 13] = [
        AbortCause::NotReady,
        AbortCause::InvalidInput,
        AbortCause::UnknownNode,
        AbortCause::PveRead,
        AbortCause::Plan,
        AbortCause::Locked,
        AbortCause::LockUnavailable,
        AbortCause::Recording,
        AbortCause::PveUnidentified,
        AbortCause::SharedPve,
        AbortCause::MissingPrivilege,
        AbortCause::Credentials,
        AbortCause::RepositoryUnreadable,
    ];

    /// The cycle result an abort of this cause counts as.
    pub fn result(self) -> CycleResult {
        match self {
            AbortCause::NotReady => CycleResult::NotReady,
            AbortCause::InvalidInput => CycleResult::ParseError,
            AbortCause::UnknownNode => CycleResult::UnknownNode,
            AbortCause::PveRead => CycleResult::PveReadError,
            AbortCause::Plan => CycleResult::PlanError,
            AbortCause::Locked => CycleResult::Locked,
            AbortCause::LockUnavailable
            | AbortCause::Recording
            | AbortCause::PveUnidentified
            | AbortCause::SharedPve
            | AbortCause::MissingPrivilege
            | AbortCause::Credentials
            | AbortCause::RepositoryUnreadable => CycleResult::Aborted,
        }
    }

    /// The `result` label of `proxops_cycles_total` for this cause.
    pub fn label(self) -> &'static str {
        self.result().as_str()
    }
}
