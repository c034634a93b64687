//! The CLI's exit codes, fixed for every command (docs/cli.md).

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
}

impl Exit {
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The worse of two outcomes (input errors outrank run-time errors,
    /// which outrank "changes found").
    pub fn worst(self, other: Exit) -> Exit {
        fn rank(e: Exit) -> u8 {
            match e {
                Exit::Ok => 0,
                Exit::Changes => 1,
                Exit::Runtime => 2,
                Exit::Input => 3,
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
}

impl Failure {
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            exit: Exit::Input,
            message: message.into(),
        }
    }

    pub fn runtime(message: impl Into<String>) -> Failure {
        Failure {
            exit: Exit::Runtime,
            message: message.into(),
        }
    }

    /// Standard output was closed by its reader (`| head`): the command
    /// stops printing and ends quietly with exit 0.
    pub fn stdout_closed() -> Failure {
        Failure {
            exit: Exit::Ok,
            message: String::new(),
        }
    }
}
