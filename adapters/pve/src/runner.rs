//! The step protocol's wire end: one call of core's step protocol
//! ([`proxops_core::step::Step`]) sent to PVE and its answer classified
//! once ([`proxops_core::step::classify`]), and the progress a caller is
//! told about actions in flight. The loop that runs a cycle's actions is
//! the driver's (crate proxops-driver, on core's cycle machine).
//!
//! **Architecture Invariant:** nothing here decides: which call is sent
//! when and what an answer means are core's. Form values are exposed
//! (`Params::to_wire`) only at the moment they are sent ([`send`]); no
//! error or log line holds one.

use std::time::Duration;

use proxops_core::action::Action;
use proxops_core::exec::{Outcome, Timestamp};
use proxops_core::step::{self, Answer, Call, PveError};

use crate::retry::explained_message;
use crate::transport::{Request, Transport, TransportError};

/// Told each action, its outcome and the worker that ran it (1-based) as
/// soon as it ends.
pub type ActionObserver<'a> = dyn Fn(&Action, &Outcome, usize) + Sync + 'a;

/// What the runner is doing, told as it happens, so a caller can show
/// progress. The runner itself prints and logs nothing.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// The plan's action number `index` (0-based) is about to start on
    /// worker `worker` (1-based); `running` actions are in flight with it.
    Started {
        index: usize,
        action: &'a Action,
        worker: usize,
        running: usize,
    },
    /// It moved on to a write that does something else (`shutting down`,
    /// `cloning from VM 9000`, `starting`), `elapsed` after it started.
    Phase {
        index: usize,
        action: &'a Action,
        worker: usize,
        doing: &'a str,
        elapsed: Duration,
    },
    /// One of its PVE tasks is not finished after `elapsed` (told after
    /// every status read that found it running); `doing` is its phase.
    TaskRunning {
        index: usize,
        action: &'a Action,
        worker: usize,
        upid: &'a str,
        doing: &'a str,
        elapsed: Duration,
    },
    /// The action ended after `elapsed`; `upids` are the tasks PVE ran for
    /// it, in order (none for a synchronous write).
    Finished {
        index: usize,
        action: &'a Action,
        worker: usize,
        outcome: &'a Outcome,
        elapsed: Duration,
        upids: &'a [String],
    },
}

/// Told every [`Progress`] event.
pub type ProgressObserver<'a> = dyn Fn(&Progress<'_>) + Sync + 'a;

/// The wall clock in Unix seconds (0 if the clock is before 1970).
pub fn unix_now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Sends one call; the form's secrets are exposed here and nowhere else.
pub fn send(transport: &dyn Transport, call: &Call) -> Answer {
    let request = Request::new(call.method, &call.path, call.form.to_wire());
    match transport.call(&request) {
        Ok(r) if r.is_success() => Answer::Data(r.data().clone()),
        Ok(r) => Answer::Error(step::classify(
            r.status,
            &explained_message(&r, transport.acting_as().as_deref()),
        )),
        Err(e @ TransportError::Io { .. }) => Answer::Error(PveError::NoAnswer {
            text: e.to_string(),
        }),
        Err(e) => Answer::Error(PveError::NotSent {
            text: e.to_string(),
        }),
    }
}
