//! What a PVE error means to ProxOps ([`PveError`]: the one reading of
//! PVE's text, made by `step::classify`), and which configured limit a
//! deadline came from ([`TimeoutName`]). Below the execution machine, so
//! an action's outcome can carry the classified error it failed with.

use std::fmt;
use std::time::Duration;

use proxops_model::manifest::ANNOTATION_SHUTDOWN_TIMEOUT;

/// What a PVE error means to ProxOps: the one reading of PVE's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PveError {
    /// The addressed object is not there: 404, or PVE's 5xx wording
    /// ("does not exist", "no such …", "unable to parse worker upid").
    #[error("{text}")]
    NotFound { text: String },
    /// A shutdown or reboot of a guest that is not running.
    #[error("{text}")]
    NotRunning { text: String },
    /// The guest holds a lock (backup, migrate, snapshot, suspended, …):
    /// "VM is locked (backup)". Clears when that operation ends.
    #[error("{text}")]
    Locked { text: String },
    /// Another task holds the guest's config lock file: "can't lock file
    /// … got timeout". Short-lived.
    #[error("{text}")]
    ConfigLockTimeout { text: String },
    /// The config changed between our read and our write (digest mismatch).
    #[error("{text}")]
    ChangedUnderUs { text: String },
    /// PVE is busy or partly unreachable: an operation already in progress,
    /// no quorum, a node behind the proxy not answering (595, 596).
    #[error("{text}")]
    Busy { text: String },
    /// No HTTP answer at all (connection refused, reset, timed out).
    #[error("{text}")]
    NoAnswer { text: String },
    /// The transport sent nothing and another attempt would not help
    /// (TLS refused, credentials refused, read-only, not in a recording).
    #[error("{text}")]
    NotSent { text: String },
    /// A task ended with an exit status other than OK or `WARNINGS: n`.
    #[error("task {upid} failed: {exitstatus}")]
    TaskFailed { upid: String, exitstatus: String },
    /// A task was still running at its deadline.
    #[error(
        "task {upid} still not finished after {}s, the {timeout} (last seen: {last})",
        .after.as_secs()
    )]
    TaskTimedOut {
        upid: String,
        after: Duration,
        timeout: TimeoutName,
        last: String,
    },
    /// A create refused because its id or volume is taken (qemu-server
    /// `create_disks`, pve-storage `alloc_image`: "… already exists"):
    /// asking again gets the same answer; the next cycle re-reads.
    #[error("{text}")]
    AlreadyExists { text: String },
    /// Any other refusal, with PVE's status and text.
    #[error("{text}")]
    Refused { status: u16, text: String },
}

impl PveError {
    /// Expected to clear by itself: the next cycle tries again.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            PveError::Locked { .. }
                | PveError::ConfigLockTimeout { .. }
                | PveError::Busy { .. }
                | PveError::NoAnswer { .. }
                | PveError::TaskTimedOut { .. }
        )
    }
}

/// Which configured limit a deadline came from, so a timeout names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutName {
    /// `reconcile.task-timeout`.
    Task(Duration),
    /// The cluster's `shutdown-timeout` (`reconcile.shutdown-timeout`).
    Shutdown(Duration),
    /// The guest's `proxops/shutdown-timeout` annotation.
    ShutdownAnnotation(Duration),
}

impl fmt::Display for TimeoutName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeoutName::Task(d) => write!(f, "reconcile.task-timeout of {}s", d.as_secs()),
            TimeoutName::Shutdown(d) => write!(f, "shutdown-timeout of {}s", d.as_secs()),
            TimeoutName::ShutdownAnnotation(d) => {
                write!(f, "{ANNOTATION_SHUTDOWN_TIMEOUT} of {}s", d.as_secs())
            }
        }
    }
}
