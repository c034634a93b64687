//! The CLI's exit codes, fixed for every command (docs/cli.md).

use proxops_core::diag::Diagnostic;
use proxops_core::plan::AbortCause;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: success.
    Ok = 0,
    /// 1: failure at run time: PVE, git, a failed action, an aborted cycle.
    Runtime = 1,
    /// 2: invalid input: usage, configuration, credentials, manifests.
    /// Nothing was read from PVE and nothing was written.
    Input = 2,
    /// 3: `diff --exit-code` found changes.
    Changes = 3,
    /// 4: `diff --exit-code` found what ProxOps will not do by itself: an
    /// anomaly for a person or work skipped this cycle (changes or not).
    Attention = 4,
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The worse of two outcomes (input errors outrank run-time errors,
    /// which outrank "needs a person", which outranks "changes found").
    pub fn worst(self, other: Exit) -> Exit {
        fn rank(e: Exit) -> u8 {
            match e {
                Exit::Ok => 0,
                Exit::Changes => 1,
                Exit::Attention => 2,
                Exit::Runtime => 3,
                Exit::Input => 4,
            }
        }
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }
}

/// An error that ends the command, with its exit code.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
    /// How a daemon's cycle that ends with this failure counts, when the
    /// exit code alone does not say it (a git sync with no good tree is
    /// `not_ready`, not just any run-time failure).
    pub cause: Option<AbortCause>,
    /// The problems with the input that `message` renders, as data, when
    /// they are problems of the repository or configuration
    /// (`validate --output json` prints them).
    pub diagnostics: Vec<Diagnostic>,
    /// Standard output was closed by its reader ([`Failure::stdout_closed`]).
    pub stdout_closed: bool,
}

impl Failure {
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            exit: Exit::Input,
            message: message.into(),
            cause: None,
            diagnostics: Vec::new(),
            stdout_closed: false,
        }
    }

    pub fn runtime(message: impl Into<String>) -> Failure {
        Failure {
            exit: Exit::Runtime,
            message: message.into(),
            cause: None,
            diagnostics: Vec::new(),
            stdout_closed: false,
        }
    }

    /// Git sync failed and there is no good tree to plan from (exit 1).
    pub fn not_ready(message: impl Into<String>) -> Failure {
        Failure {
            cause: Some(AbortCause::NotReady),
            ..Failure::runtime(message)
        }
    }

    /// Standard output was closed by its reader (`| head`): the command
    /// stops printing and ends quietly with exit 0.
    pub fn stdout_closed() -> Failure {
        Failure {
            exit: Exit::Ok,
            message: String::new(),
            cause: None,
            diagnostics: Vec::new(),
            stdout_closed: true,
        }
    }
}
