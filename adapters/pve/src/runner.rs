//! The runner: performs a plan's actions against PVE, one at a time, in the
//! order core's execution state machine hands them out (spec §14).
//!
//! Owns the mapping of each `Work` to its PVE endpoints (§14.1), waiting
//! for the tasks PVE starts (§14.2, `GET /nodes/{n}/tasks/{upid}/status`
//! until `stopped`, bounded by the task timeout), and the reading of PVE's
//! errors into an `Outcome`: a locked guest or a lock timeout is a transient
//! failure, a digest mismatch means the config changed under us, anything
//! else is a failure carrying PVE's own text.
//!
//! **Architecture Invariant:** the runner decides nothing. It never retries
//! an action, never forces a stop (`forceStop`, `skiplock`) or a delete
//! (`force`), never passes `start` to a clone (PVE rejects it; a clone
//! that should run is started after its config write) and never writes a
//! config without the digest the planner read. Form values
//! are exposed (`Params::to_wire`) only at the moment they are sent; no
//! error or log line holds one.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use proxops_core::action::{Action, Params, Target, Work};
use proxops_core::exec::{Execution, Outcome, Timestamp};
use proxops_core::live::GuestType;
use proxops_core::names::{NodeName, Vmid};
use proxops_core::plan::Plan;
use serde_json::Value;

use crate::retry::pve_message;
use crate::transport::{Method, Request, Response, Transport, TransportError, encode_segment};

/// Told each action and its outcome as soon as it ends.
pub type ActionObserver<'a> = dyn Fn(&Action, &Outcome) + Sync + 'a;

/// What the runner is doing, told as it happens, so a caller can show
/// progress. The runner itself prints and logs nothing.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// The plan's action number `index` (0-based) is about to start.
    Started { index: usize, action: &'a Action },
    /// One of its PVE tasks is not finished after `elapsed` (told after
    /// every status read that found it running).
    TaskRunning {
        index: usize,
        action: &'a Action,
        upid: &'a str,
        elapsed: Duration,
    },
    /// The action ended after `elapsed`; `upids` are the tasks PVE ran for
    /// it, in order (none for a synchronous write).
    Finished {
        index: usize,
        action: &'a Action,
        outcome: &'a Outcome,
        elapsed: Duration,
        upids: &'a [String],
    },
}

/// Told every [`Progress`] event.
pub type ProgressObserver<'a> = dyn Fn(&Progress<'_>) + Sync + 'a;

/// How the runner waits and when it stops.
pub struct RunOptions<'a> {
    /// Longest wait for one PVE task (`reconcile.task-timeout`, default 30 min).
    pub task_timeout: Duration,
    /// Pause between two task status reads (2 s; tests use a few ms).
    pub poll_interval: Duration,
    /// Wall-clock seconds for the execution record.
    pub now: &'a (dyn Fn() -> Timestamp + Sync),
    /// Set by a signal handler: the action in flight finishes, no other starts.
    pub stop: Option<&'a AtomicBool>,
    /// Called after each action with its result (for log events).
    pub on_result: Option<&'a ActionObserver<'a>>,
    /// Called when an action starts, while its tasks run and when it ends.
    pub on_progress: Option<&'a ProgressObserver<'a>>,
}

impl RunOptions<'_> {
    pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(30 * 60);
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(2);
}

/// The wall clock in Unix seconds (0 if the clock is before 1970).
pub fn unix_now() -> Timestamp {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Performs every runnable action of `plan` and returns the execution
/// record (each action's outcome, or why it was deferred). An aborted plan
/// performs nothing.
pub fn execute(transport: &dyn Transport, plan: &Plan, opts: &RunOptions<'_>) -> Execution {
    let mut execution = Execution::new(plan);
    loop {
        if opts.stop.is_some_and(|s| s.load(Ordering::SeqCst)) {
            execution.stop();
            break;
        }
        let Some((index, action)) = execution.next((opts.now)()) else {
            break;
        };
        let action = action.clone();
        if let Some(progress) = opts.on_progress {
            progress(&Progress::Started {
                index,
                action: &action,
            });
        }
        let started = Instant::now();
        let (outcome, upids) = perform_observed(transport, index, &action, opts);
        if let Some(progress) = opts.on_progress {
            progress(&Progress::Finished {
                index,
                action: &action,
                outcome: &outcome,
                elapsed: started.elapsed(),
                upids: &upids,
            });
        }
        if let Some(report) = opts.on_result {
            report(&action, &outcome);
        }
        execution.record(index, outcome, (opts.now)());
    }
    execution
}

/// Performs one action and reads PVE's answers into an `Outcome`.
pub fn perform(transport: &dyn Transport, action: &Action, opts: &RunOptions<'_>) -> Outcome {
    perform_observed(transport, 0, action, opts).0
}

/// [`perform`], also returning the UPIDs of the tasks PVE ran for it.
fn perform_observed(
    transport: &dyn Transport,
    index: usize,
    action: &Action,
    opts: &RunOptions<'_>,
) -> (Outcome, Vec<String>) {
    let pve = Pve {
        transport,
        opts,
        node: &action.node,
        index,
        action,
        upids: RefCell::new(Vec::new()),
    };
    let outcome = match run_work(&pve, action) {
        Ok(()) => Outcome::Succeeded,
        Err(e) => e.into_outcome(),
    };
    (outcome, pve.upids.into_inner())
}

/// Why a step failed, before it becomes an `Outcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StepError {
    /// What was being done, e.g. `POST /nodes/pve1/qemu/100/config`.
    what: String,
    /// PVE's text (reason phrase, message, errors) or the transport's.
    message: String,
    /// No answer at all (connection, timeout): expected to clear.
    no_answer: bool,
}

impl StepError {
    fn into_outcome(self) -> Outcome {
        classify_error(&format!("{}: {}", self.what, self.message), self.no_answer)
    }
}

/// Reads an error text into an `Outcome` (spec §14.2, §22.8): a digest
/// mismatch is `ChangedUnderUs`; a locked guest, a config lock timeout, an
/// operation already running, a lost quorum, an unreachable node or no
/// answer at all are transient failures; everything else is a failure.
pub fn classify_error(text: &str, no_answer: bool) -> Outcome {
    let lower = text.to_lowercase();
    let changed = [
        "checksum mismatch",
        "digest mismatch",
        "detected modified configuration",
        "file changed by other user",
        "file change by other user",
    ]
    .iter()
    .any(|m| lower.contains(m));
    if changed {
        return Outcome::ChangedUnderUs;
    }
    let transient = no_answer
        || lower.contains("vm is locked")
        || lower.contains("ct is locked")
        || (lower.contains("can't lock file") && lower.contains("got timeout"))
        || lower.contains("operation already in progress")
        || lower.contains("no quorum")
        || lower.contains("http 595");
    Outcome::Failed {
        error: text.to_owned(),
        transient,
    }
}

fn guest_path(node: &NodeName, guest_type: GuestType, vmid: Vmid) -> String {
    format!(
        "/nodes/{}/{}/{}",
        encode_segment(node.as_str()),
        guest_type.path_segment(),
        vmid
    )
}

fn guest_vmid(action: &Action) -> Result<Vmid, StepError> {
    match &action.target {
        Target::Guest(v) => Ok(*v),
        Target::File { .. } => Err(StepError {
            what: format!("{} {}/{}", action.op, action.kind, action.name),
            message: "a guest action without a guest id".into(),
            no_answer: false,
        }),
    }
}

fn run_work(pve: &Pve<'_>, action: &Action) -> Result<(), StepError> {
    let node = &action.node;
    match &action.work {
        Work::CreateGuest {
            guest_type,
            params,
            mark_template,
        } => {
            let vmid = guest_vmid(action)?;
            let base = format!(
                "/nodes/{}/{}",
                encode_segment(node.as_str()),
                guest_type.path_segment()
            );
            pve.write_and_wait(Method::Post, &base, params.to_wire())?;
            if *mark_template {
                // qemu answers a UPID, lxc `null` (synchronous) [PROBE].
                pve.write_and_wait(
                    Method::Post,
                    &format!("{}/template", guest_path(node, *guest_type, vmid)),
                    Vec::new(),
                )?;
            }
            Ok(())
        }
        Work::CloneGuest {
            source,
            source_node,
            name,
            config,
            delete,
            start_after,
        } => {
            let vmid = guest_vmid(action)?;
            let mut form = vec![
                ("newid".to_owned(), vmid.to_string()),
                ("name".to_owned(), name.clone()),
                ("full".to_owned(), "1".to_owned()),
            ];
            if source_node != node {
                form.push(("target".to_owned(), node.to_string()));
            }
            let clone_path = format!(
                "{}/clone",
                guest_path(source_node, GuestType::Qemu, *source)
            );
            pve.write_and_wait(Method::Post, &clone_path, form)?;
            let form = config_form(config, delete, None);
            if !form.is_empty() {
                pve.write_and_wait(
                    Method::Post,
                    &format!("{}/config", guest_path(node, GuestType::Qemu, vmid)),
                    form,
                )?;
            }
            if *start_after {
                pve.power(&guest_path(node, GuestType::Qemu, vmid), "start")?;
            }
            Ok(())
        }
        Work::Download { storage, params } => {
            let path = format!(
                "/nodes/{}/storage/{}/download-url",
                encode_segment(node.as_str()),
                encode_segment(storage.as_str())
            );
            pve.write_and_wait(Method::Post, &path, params.to_wire())
        }
        Work::UpdateConfig {
            guest_type,
            params,
            delete,
            digest,
            stop_first,
            restart_after,
        } => {
            let vmid = guest_vmid(action)?;
            let path = guest_path(node, *guest_type, vmid);
            if *stop_first {
                pve.power(&path, "stop")?;
            }
            // qemu: async POST (a UPID); lxc: PUT (PVE has no POST there).
            let method = match guest_type {
                GuestType::Qemu => Method::Post,
                GuestType::Lxc => Method::Put,
            };
            let written = pve.write_and_wait(
                method,
                &format!("{path}/config"),
                config_form(params, delete, digest.as_deref()),
            );
            if *stop_first && *restart_after {
                // Start again even when the write failed: we stopped it, the
                // desired power is started, and nothing was changed.
                let started = pve.power(&path, "start");
                written?;
                started.map_err(|e| StepError {
                    message: format!(
                        "{}; the guest is left stopped, the next cycle re-plans its power",
                        e.message
                    ),
                    ..e
                })?;
                return Ok(());
            }
            written
        }
        Work::Start { guest_type } => {
            pve.power(&guest_path(node, *guest_type, guest_vmid(action)?), "start")
        }
        Work::Stop { guest_type } => {
            pve.power(&guest_path(node, *guest_type, guest_vmid(action)?), "stop")
        }
        Work::MarkTemplate {
            guest_type,
            stop_first,
        } => {
            let path = guest_path(node, *guest_type, guest_vmid(action)?);
            if *stop_first {
                pve.power(&path, "stop")?;
            }
            pve.write_and_wait(Method::Post, &format!("{path}/template"), Vec::new())
        }
        Work::Resize {
            guest_type,
            disk,
            size,
        } => {
            // qemu-server and pve-container `resize_vm` answer a task UPID
            // on PVE 9; an absolute size (no `+`) makes a retried write
            // harmless.
            let path = guest_path(node, *guest_type, guest_vmid(action)?);
            let form = vec![
                ("disk".to_owned(), disk.clone()),
                ("size".to_owned(), size.to_wire()),
            ];
            pve.write_and_wait(Method::Put, &format!("{path}/resize"), form)
        }
        Work::Delete {
            guest_type,
            stop_first,
        } => {
            let path = guest_path(node, *guest_type, guest_vmid(action)?);
            if *stop_first {
                match pve.power(&path, "stop") {
                    Err(e) if is_gone(&e.message) => return Ok(()),
                    other => other?,
                }
            }
            match pve.write_and_wait(Method::Delete, &path, Vec::new()) {
                Err(e) if is_gone(&e.message) => Ok(()),
                other => other,
            }
        }
    }
}

/// A config write's form: the values, `delete=` (comma-joined) and the
/// digest PVE reported when the config was read.
fn config_form(params: &Params, delete: &[String], digest: Option<&str>) -> Vec<(String, String)> {
    let mut form = params.to_wire();
    if !delete.is_empty() {
        form.push(("delete".to_owned(), delete.join(",")));
    }
    if let Some(d) = digest.filter(|d| !d.is_empty()) {
        form.push(("digest".to_owned(), d.to_owned()));
    }
    form
}

/// PVE's wording for a guest that is not there (a delete that already
/// happened is done).
fn is_gone(message: &str) -> bool {
    let m = message.to_lowercase();
    m.contains("does not exist")
        || m.contains("no such vm")
        || m.contains("no such ct")
        || m.contains("http 404")
}

struct Pve<'a> {
    transport: &'a dyn Transport,
    opts: &'a RunOptions<'a>,
    node: &'a NodeName,
    /// The action being performed and its place in the plan (for progress).
    index: usize,
    action: &'a Action,
    /// The tasks PVE started for it, in order.
    upids: RefCell<Vec<String>>,
}

impl Pve<'_> {
    /// One call; a non-2xx answer is an error with PVE's text.
    fn call(
        &self,
        method: Method,
        path: &str,
        form: Vec<(String, String)>,
    ) -> Result<Response, StepError> {
        let request = Request::new(method, path, form);
        let what = format!("{method} {path}");
        match self.transport.call(&request) {
            Ok(r) if r.is_success() => Ok(r),
            Ok(r) => Err(StepError {
                what,
                message: http_message(&r),
                no_answer: false,
            }),
            Err(e) => Err(StepError {
                what,
                message: transport_message(&e),
                no_answer: matches!(e, TransportError::Io { .. }),
            }),
        }
    }

    /// A write; when PVE answers a task UPID, waits for the task.
    fn write_and_wait(
        &self,
        method: Method,
        path: &str,
        form: Vec<(String, String)>,
    ) -> Result<(), StepError> {
        let response = self.call(method, path, form)?;
        match response.data() {
            Value::String(upid) => {
                self.upids.borrow_mut().push(upid.clone());
                self.wait(upid, &format!("{method} {path}"))
            }
            _ => Ok(()),
        }
    }

    fn power(&self, guest_path: &str, action: &str) -> Result<(), StepError> {
        self.write_and_wait(
            Method::Post,
            &format!("{guest_path}/status/{action}"),
            Vec::new(),
        )
    }

    /// Waits for a task to stop (§14.2). Read errors while polling are
    /// tolerated until the deadline; an unknown task is an error.
    fn wait(&self, upid: &str, what: &str) -> Result<(), StepError> {
        let node = upid_node(upid).unwrap_or_else(|| self.node.to_string());
        let path = format!(
            "/nodes/{}/tasks/{}/status",
            encode_segment(&node),
            encode_segment(upid)
        );
        let started = Instant::now();
        let deadline = started + self.opts.task_timeout;
        let mut last;
        loop {
            match self.transport.call(&Request::get(&path)) {
                Ok(r) if r.is_success() => {
                    let data = r.data();
                    let status = data
                        .get("status")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if status == "stopped" {
                        let exit = data
                            .get("exitstatus")
                            .and_then(Value::as_str)
                            .unwrap_or_default();
                        if exit.eq_ignore_ascii_case("OK") || exit.starts_with("WARNINGS") {
                            return Ok(());
                        }
                        let shown = if exit.is_empty() {
                            "no exit status"
                        } else {
                            exit
                        };
                        return Err(StepError {
                            what: what.to_owned(),
                            message: format!("task {upid} failed: {shown}"),
                            no_answer: false,
                        });
                    }
                    last = format!("status {status:?}");
                }
                Ok(r) => {
                    let message = http_message(&r);
                    let lower = message.to_lowercase();
                    if lower.contains("no such task")
                        || lower.contains("unable to parse worker upid")
                    {
                        return Err(StepError {
                            what: what.to_owned(),
                            message: format!("task {upid}: {message}"),
                            no_answer: false,
                        });
                    }
                    last = message;
                }
                Err(e) => last = transport_message(&e),
            }
            if let Some(progress) = self.opts.on_progress {
                progress(&Progress::TaskRunning {
                    index: self.index,
                    action: self.action,
                    upid,
                    elapsed: started.elapsed(),
                });
            }
            if Instant::now() >= deadline {
                return Err(StepError {
                    what: what.to_owned(),
                    message: format!(
                        "task {upid} still not finished after {}s (last seen: {last})",
                        started.elapsed().as_secs()
                    ),
                    no_answer: true,
                });
            }
            std::thread::sleep(
                self.opts
                    .poll_interval
                    .min(deadline.saturating_duration_since(Instant::now())),
            );
        }
    }
}

/// `UPID:<node>:…` → the node that runs the task.
fn upid_node(upid: &str) -> Option<String> {
    let mut parts = upid.split(':');
    (parts.next()? == "UPID").then_some(())?;
    parts.next().filter(|n| !n.is_empty()).map(str::to_owned)
}

fn http_message(r: &Response) -> String {
    let text = pve_message(r);
    if text.is_empty() {
        format!("HTTP {}", r.status)
    } else {
        format!("HTTP {} {text}", r.status)
    }
}

fn transport_message(e: &TransportError) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_guest_is_a_transient_failure() {
        for text in [
            "POST /nodes/pve1/qemu/100/config: HTTP 500 VM is locked (backup)",
            "PUT /nodes/pve1/lxc/200/config: HTTP 500 CT is locked (snapshot)",
            "HTTP 500 can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
        ] {
            assert!(
                matches!(
                    classify_error(text, false),
                    Outcome::Failed {
                        transient: true,
                        ..
                    }
                ),
                "{text}"
            );
        }
    }

    #[test]
    fn a_digest_mismatch_means_changed_under_us() {
        assert_eq!(
            classify_error(
                "HTTP 500 checksum mismatch (file change by other user?)",
                false
            ),
            Outcome::ChangedUnderUs
        );
        assert_eq!(
            classify_error(
                "detected modified configuration - file changed by other user? Try again.",
                false
            ),
            Outcome::ChangedUnderUs
        );
    }

    #[test]
    fn other_errors_fail_with_pves_text() {
        let o = classify_error(
            "POST /nodes/pve1/qemu: HTTP 403 Permission check failed (/vms/100, VM.Allocate)",
            false,
        );
        assert_eq!(
            o,
            Outcome::Failed {
                error: "POST /nodes/pve1/qemu: HTTP 403 Permission check failed (/vms/100, VM.Allocate)".into(),
                transient: false
            }
        );
    }

    #[test]
    fn upids_name_their_node() {
        assert_eq!(
            upid_node("UPID:pve2:000A:0001:6B0C:qmstart:100:root@pam:").as_deref(),
            Some("pve2")
        );
        assert_eq!(upid_node("garbage"), None);
    }

    #[test]
    fn config_forms_carry_delete_and_digest_after_the_values() {
        let mut p = Params::new();
        p.push("memory", "2048");
        let form = config_form(&p, &["ciuser".into(), "sshkeys".into()], Some("abc"));
        assert_eq!(
            form,
            vec![
                ("memory".into(), "2048".into()),
                ("delete".into(), "ciuser,sshkeys".into()),
                ("digest".into(), "abc".into())
            ]
        );
    }
}
