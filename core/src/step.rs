//! The PVE step protocol: the calls one action makes, in order, and what
//! PVE's answers mean (spec §14.1, §14.2), as a sans-IO machine in the
//! manner of quinn-proto.
//!
//! Owns, for every [`Work`]: the sequence of PVE calls (create then mark
//! template; clone, configure, start; write while the guest runs, then
//! shut it down and start it; delete treating "gone" as done), following
//! the tasks PVE starts until their deadline, graceful power
//! (`status/shutdown` with a timeout,
//! `status/stop` only when the cluster's policy allows it after that
//! timeout), the power state read back from `status/current`, and the one
//! classification of PVE's error text ([`classify`]) that the adapters'
//! retry policy reuses.
//!
//! Call order: [`Step::new`]; then repeatedly [`Step::poll_request`] for the
//! next call to send (its answer goes to [`Step::handle_answer`]), and when
//! it has none, wait until [`Step::poll_timeout`] and call
//! [`Step::handle_timeout`]; [`Step::outcome`] is `Some` when the action
//! has ended. At most one call is in flight.
//!
//! **Architecture Invariant:** no I/O and no clock: the driver passes `now`
//! (an [`Instant`] it measures from an origin of its own). Form values stay
//! [`ParamValue`]s; only the driver exposes a secret, at send time. The
//! protocol never retries a call (the next cycle re-plans), never sends
//! `forceStop`, `skiplock` or a delete's `force`, and sends `status/stop`
//! only after a shutdown that did not finish, when the cluster's
//! `force-stop-after-timeout` says so.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use serde_json::Value;

use crate::action::{Action, Params, Target, Work, WriteMethod};
use crate::exec::Outcome;
use proxops_model::live::GuestType;
use proxops_model::names::{NodeName, Vmid};
use proxops_model::repo::ClusterDesired;
use proxops_model::wire::Bytes;

/// A point in time the driver measures from an origin of its own (a
/// monotonic clock's start). Core reads no clock: only differences count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(Duration);

impl Instant {
    /// The instant `since` after the driver's origin.
    pub fn from_origin(since: Duration) -> Instant {
        Instant(since)
    }

    /// How long after the driver's origin.
    pub fn since_origin(self) -> Duration {
        self.0
    }

    /// `self − earlier`, zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    fn after(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d))
    }
}

/// HTTP method of a PVE API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }

    pub fn parse(s: &str) -> Option<Method> {
        match s {
            "GET" => Some(Method::Get),
            "POST" => Some(Method::Post),
            "PUT" => Some(Method::Put),
            "DELETE" => Some(Method::Delete),
            _ => None,
        }
    }

    pub fn is_write(self) -> bool {
        self != Method::Get
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Percent-encodes one path segment; its home is the wire grammar.
pub use crate::pve_error::{PveError, TimeoutName};
pub use proxops_model::wire::encode_segment;

/// One call the protocol asks the driver to send. `path` is below
/// `/api2/json`, its data segments already encoded. Secrets in `form` are
/// exposed by the driver only as it sends them ([`Params::to_wire`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: Method,
    pub path: String,
    pub form: Params,
}

impl Call {
    fn new(method: Method, path: String) -> Call {
        Call {
            method,
            path,
            form: Params::new(),
        }
    }

    fn with_form(method: Method, path: String, form: Params) -> Call {
        Call { method, path, form }
    }

    /// `POST /nodes/…` as errors name the call.
    pub fn what(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// PVE's answer to one call, as the driver hands it in.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A 2xx answer: the envelope's `data` (`null` when absent).
    Data(Value),
    /// Anything else, classified once by [`classify`] (or
    /// [`PveError::NoAnswer`] / [`PveError::NotSent`] from the transport).
    Error(PveError),
}

impl PveError {
    /// A task's failure, read like PVE's other errors: a lock or a digest
    /// mismatch inside a task means what it means on a synchronous call.
    pub fn from_task_exit(upid: &str, exitstatus: &str) -> PveError {
        let shown = if exitstatus.is_empty() {
            "no exit status"
        } else {
            exitstatus
        };
        let failed = PveError::TaskFailed {
            upid: upid.to_owned(),
            exitstatus: shown.to_owned(),
        };
        let text = failed.to_string();
        let lower = exitstatus.to_lowercase();
        match classify_text(&lower, &text) {
            Some(e) => e,
            None if lower.contains("does not exist") || lower.contains("no such") => {
                PveError::NotFound { text }
            }
            None => failed,
        }
    }
}

/// Reads one non-2xx answer: its status and PVE's text (reason phrase,
/// message, field errors). The one place PVE's wording is interpreted; the
/// retry policy, the step protocol and every other reader use it.
pub fn classify(status: u16, message: &str) -> PveError {
    let text = if message.trim().is_empty() {
        format!("HTTP {status}")
    } else {
        format!("HTTP {status} {}", message.trim())
    };
    let lower = message.to_lowercase();
    if status == 404 {
        return PveError::NotFound { text };
    }
    // A 4xx names a parameter ("storage 'x' does not exist"), not absence.
    if status >= 500
        && (says_gone(message)
            || lower.contains("no such")
            || lower.contains("unable to parse worker upid"))
    {
        return PveError::NotFound { text };
    }
    if let Some(e) = classify_text(&lower, &text) {
        return e;
    }
    if matches!(status, 595 | 596) {
        return PveError::Busy { text };
    }
    if status == 500 && lower.contains("already exists") {
        return PveError::AlreadyExists { text };
    }
    PveError::Refused { status, text }
}

/// PVE's wording that the addressed object is gone ("Configuration file
/// '…' does not exist"), as opposed to a path it does not know.
pub fn says_gone(message: &str) -> bool {
    message.to_lowercase().contains("does not exist")
}

/// `(path, privilege)` from PVE's `Permission check failed (/vms/100,
/// VM.Config.Memory)` (pve-access-control `PVE/RPCEnvironment.pm` `check`,
/// raised by pve-common `PVE/Exception.pm` `raise_perm_exc`), for the hint
/// on a 403.
pub fn missing_privilege(message: &str) -> Option<(&str, &str)> {
    let start = message.find("Permission check failed (")? + "Permission check failed (".len();
    let inside = &message[start..];
    let inside = &inside[..inside.find(')')?];
    let (path, privilege) = inside.split_once(',')?;
    let (path, privilege) = (path.trim(), privilege.trim());
    (!path.is_empty() && !privilege.is_empty()).then_some((path, privilege))
}

/// The wordings that mean the same whatever the status or wherever they
/// appear (an HTTP error or a task's exit status).
fn classify_text(lower: &str, text: &str) -> Option<PveError> {
    let text = text.to_owned();
    let changed = [
        "checksum mismatch",
        "digest mismatch",
        "detected modified configuration",
        "file changed by other user",
        "file change by other user",
    ];
    if changed.iter().any(|m| lower.contains(m)) {
        return Some(PveError::ChangedUnderUs { text });
    }
    if lower.contains("can't lock file") && lower.contains("got timeout") {
        return Some(PveError::ConfigLockTimeout { text });
    }
    // pve-guest-common `AbstractConfig.pm` `check_lock`: "VM is locked (backup)";
    // some callers name the id ("VM 100 is locked (…)").
    if lower.contains("vm is locked")
        || lower.contains("ct is locked")
        || lower.contains(" is locked (")
    {
        return Some(PveError::Locked { text });
    }
    if lower.contains("operation already in progress") || lower.contains("no quorum") {
        return Some(PveError::Busy { text });
    }
    if lower.contains(" not running") {
        return Some(PveError::NotRunning { text });
    }
    None
}

/// How a guest is powered off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerPolicy {
    /// How long PVE's shutdown task waits for the guest (its `timeout=`).
    pub shutdown_timeout: Duration,
    /// Whether the timeout came from the guest's annotation.
    pub from_annotation: bool,
    /// After a shutdown that did not finish: `status/stop` (a hard stop)
    /// instead of failing with the guest left running.
    pub force_stop_after_timeout: bool,
}

impl PowerPolicy {
    /// `reconcile.shutdown-timeout`'s default: long enough for a guest OS
    /// to flush and stop its services, short enough that a guest ignoring
    /// ACPI does not hold the cycle for long.
    pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(180);

    pub fn new(shutdown_timeout: Duration, force_stop_after_timeout: bool) -> PowerPolicy {
        PowerPolicy {
            shutdown_timeout,
            from_annotation: false,
            force_stop_after_timeout,
        }
    }

    /// How `cluster`'s guests are powered off: its `shutdown-timeout` and
    /// `force-stop-after-timeout`.
    pub fn from_config(cluster: &proxops_model::config::ClusterConfig) -> PowerPolicy {
        PowerPolicy::new(
            cluster.shutdown_timeout.as_std(),
            cluster.force_stop_after_timeout,
        )
    }

    /// The policy for one action: the desired object's
    /// `proxops/shutdown-timeout` annotation, when it has a valid one,
    /// wins over the cluster's timeout.
    pub fn for_action(self, desired: &ClusterDesired, action: &Action) -> PowerPolicy {
        let annotated = action
            .object
            .as_ref()
            .and_then(|r| desired.get(r))
            .and_then(|o| o.metadata.shutdown_timeout());
        match annotated {
            Some(t) => PowerPolicy {
                shutdown_timeout: t,
                from_annotation: true,
                ..self
            },
            None => self,
        }
    }

    fn timeout_name(&self) -> TimeoutName {
        if self.from_annotation {
            TimeoutName::ShutdownAnnotation(self.shutdown_timeout)
        } else {
            TimeoutName::Shutdown(self.shutdown_timeout)
        }
    }
}

impl Default for PowerPolicy {
    fn default() -> PowerPolicy {
        PowerPolicy::new(PowerPolicy::DEFAULT_SHUTDOWN_TIMEOUT, false)
    }
}

/// The limits one action runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSettings {
    /// The longest wait for one PVE task (`reconcile.task-timeout`).
    pub task_timeout: Duration,
    pub power: PowerPolicy,
    /// The cluster declares PVE's case-sensitive `tag-style`: the
    /// ownership tag must read `proxops` exactly ([`proxops_model::live::owns`]).
    pub tags_case_sensitive: bool,
}

/// The first task status read comes this long after the task started: a
/// config write's task ends within it. (At 100 ms, a stop-start update
/// waited 100 ms for a write done in one; with the wait below, that was
/// 1.12-1.14x the tasks' own time; docs/performance.md.)
pub const FIRST_TASK_POLL: Duration = Duration::from_millis(25);
/// …then the wait is a tenth of the time the task has run
/// ([`TASK_POLL_SHARE`]), at least the first wait and at most this, so a
/// task is seen ended within a tenth of its own duration (about 1.05× its
/// time on average) and a 20-minute clone costs a few hundred reads, not
/// thousands.
pub const MAX_TASK_POLL: Duration = Duration::from_secs(5);
/// The next status read of a running task comes after its running time
/// divided by this. Doubling (the wait before) found a task that ended
/// just after a read up to twice its duration late; a fifth, a fifth late.
pub const TASK_POLL_SHARE: u32 = 10;
/// PVE's shutdown task gives up at its own `timeout`; ProxOps follows it
/// this much longer before calling it lost.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// How long ProxOps waits for a rebooted VM to run again. PVE starts it
/// after the reboot task has ended (qemu-server `QemuServer.pm`
/// `vm_reboot` leaves a reboot request, qmeventd's `qm cleanup` starts the
/// VM), so `running` is waited for, not read once; a start on a busy node
/// takes tens of seconds.
pub const RESTART_WAIT: Duration = Duration::from_secs(120);
/// While waiting for a power state, `status/current` is read this often.
pub const CONFIRM_POLL: Duration = Duration::from_secs(1);

/// The power state a read of `status/current` must confirm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Power {
    Running,
    Stopped,
}

impl Power {
    /// The HA resource state that asks for it.
    fn ha_state(self) -> &'static str {
        match self {
            Power::Running => "started",
            Power::Stopped => "stopped",
        }
    }
}

/// One thing an action does, in order. Sequences are lists of these.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage {
    /// A write; a UPID answer is a task followed to its end. With
    /// `gone_is_done`, "not found" ends the whole action as done (a delete
    /// that already happened).
    Write { call: Call, gone_is_done: bool },
    /// `status/shutdown` with `timeout=`; when it does not finish, either
    /// `status/stop` (policy) or the action fails, guest left running.
    Shutdown { guest: String, gone_is_done: bool },
    /// `status/stop`, only after a shutdown that did not finish.
    ForceStop { guest: String },
    /// A VM's `status/reboot` with `timeout=` (the shutdown timeout), its
    /// task followed as a shutdown's is. PVE restarts the VM after the
    /// task ends (qmeventd), so a waiting [`Stage::Confirm`] follows.
    Reboot { guest: String },
    /// `status/start`. `restores`: starts a guest this action stopped,
    /// even after a later step failed.
    Start { guest: String, restores: bool },
    /// `PUT /cluster/ha/resources/{sid}` with `state=`: the HA manager
    /// owns the guest's power and carries the request out later
    /// (pve-ha-manager `API2/HA/Resources.pm` `update`), as PVE's own
    /// `status/start` and `shutdown` of an HA guest ask it to.
    HaRequest {
        sid: String,
        want: Power,
        restores: bool,
    },
    /// `GET /cluster/ha/status/current` until the manager reports the
    /// service in the requested state (`HA/Tools.pm`
    /// `get_verbose_service_state`: `stopping` becomes `stopped`).
    HaWait {
        sid: String,
        want: Power,
        restores: bool,
    },
    /// `GET …/status/current` after a shutdown that did not finish in
    /// time: PVE had already signalled the guest, which may be off by now
    /// or power off later. Off: the action goes on as after a shutdown;
    /// else it fails with `error` and what PVE reports.
    ReadBack {
        guest: String,
        error: String,
        /// Off, the guest is started again (a reboot that timed out: PVE
        /// cleared the reboot request, so an off VM stays off).
        restart: bool,
    },
    /// `GET …/status/current`: PVE's own word on the power state.
    Confirm {
        guest: String,
        want: Power,
        restores: bool,
        /// Read again until PVE reports `want` or this long has passed
        /// since the first read; `None`: one read.
        wait: Option<Duration>,
    },
    /// `GET …/config` before anything that takes the guest down or deletes
    /// it: the guest must still be as the plan saw it ([`Expect`]), or the
    /// action ends with nothing sent to it.
    Verify { guest: String, expect: Expect },
    /// The kind's listing read before a cluster-level object is deleted:
    /// it must still end its `comment` with ProxOps' marker (without
    /// `noprune`), or the action ends with nothing deleted. Gone already
    /// (or a replication job PVE is removing) is done.
    VerifyMark {
        endpoints: crate::cluster::Endpoints,
        id: String,
    },
    /// The read before a firewall write ([`crate::action::ReadBack`]): the
    /// list must be as the plan expects it at this point, or the action
    /// ends with nothing more written; its digest goes with the write
    /// that follows.
    FirewallRead(crate::action::ReadBack),
}

/// What a guest must still be when an action is about to shut it down,
/// stop, reboot, convert or delete it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expect {
    /// The config digest the plan read; `None` when an earlier action of
    /// the same plan writes the guest's config (then the tags, protection
    /// and lock are what is compared).
    digest: Option<String>,
    /// A prune: the guest must also carry no `proxops-noprune` tag and no
    /// `protection=1`.
    prune: bool,
}

impl Expect {
    /// Every way `config` (the guest read now) is not what the plan saw,
    /// in words; empty when it is.
    fn differences(
        &self,
        config: &proxops_model::live::LiveConfig,
        case_sensitive: bool,
    ) -> Vec<String> {
        let mut out = Vec::new();
        match config.tags() {
            Ok(tags) if !proxops_model::live::owns(&tags, case_sensitive) => out.push(format!(
                "it no longer carries the {} tag",
                proxops_model::manifest::OWNERSHIP_TAG
            )),
            Ok(tags) if self.prune && proxops_model::live::keeps(&tags) => out.push(format!(
                "it is now tagged {}",
                proxops_model::manifest::NO_PRUNE_TAG
            )),
            Ok(_) => {}
            Err(e) => out.push(format!("its tags cannot be read ({e})")),
        }
        if self.prune
            && config
                .current("protection")
                .is_some_and(|p| proxops_model::wire::parse_bool(p).unwrap_or(true))
        {
            out.push("protection is on".to_owned());
        }
        if let Some(lock) = config.current("lock").filter(|l| !l.is_empty()) {
            out.push(format!("it is locked ({lock})"));
        }
        if let Some(want) = &self.digest
            && config.digest.as_ref() != Some(want)
        {
            out.push(format!(
                "its config changed since the plan read it (digest {want}, now {})",
                config.digest.as_deref().unwrap_or("none")
            ));
        }
        out
    }
}

impl Stage {
    fn restores(&self) -> bool {
        matches!(
            self,
            Stage::Start { restores: true, .. }
                | Stage::Confirm { restores: true, .. }
                | Stage::HaRequest { restores: true, .. }
                | Stage::HaWait { restores: true, .. }
        )
    }

    /// What this stage does, in an operator's words, for progress lines:
    /// `shutting down`, `cloning from VM 9000`.
    fn doing(&self) -> String {
        match self {
            Stage::Write { call, .. } => writing(call),
            Stage::Shutdown { .. } => "shutting down".into(),
            Stage::ForceStop { .. } => "stopping (the shutdown timed out)".into(),
            Stage::Reboot { .. } => "rebooting".into(),
            Stage::Start { .. } => "starting".into(),
            Stage::HaRequest { .. } | Stage::HaWait { .. } => "waiting for the HA manager".into(),
            Stage::ReadBack { .. } | Stage::Confirm { .. } => "reading the power state".into(),
            Stage::Verify { .. } => "checking the guest is as planned".into(),
            Stage::VerifyMark { .. } => "checking the object is still ProxOps'".into(),
            Stage::FirewallRead(_) => "reading the firewall list".into(),
        }
    }

    fn call(&self, power: &PowerPolicy) -> Call {
        match self {
            Stage::Write { call, .. } => call.clone(),
            Stage::Shutdown { guest, .. } => {
                let mut form = Params::new();
                form.push("timeout", power.shutdown_timeout.as_secs().to_string());
                Call::with_form(Method::Post, format!("{guest}/status/shutdown"), form)
            }
            Stage::ForceStop { guest } => Call::new(Method::Post, format!("{guest}/status/stop")),
            Stage::Start { guest, .. } => Call::new(Method::Post, format!("{guest}/status/start")),
            Stage::Reboot { guest } => {
                let mut form = Params::new();
                form.push("timeout", power.shutdown_timeout.as_secs().to_string());
                Call::with_form(Method::Post, format!("{guest}/status/reboot"), form)
            }
            Stage::Confirm { guest, .. } | Stage::ReadBack { guest, .. } => {
                Call::new(Method::Get, format!("{guest}/status/current"))
            }
            Stage::HaRequest { sid, want, .. } => {
                let mut form = Params::new();
                form.push("state", want.ha_state());
                let path = format!("/cluster/ha/resources/{}", encode_segment(sid));
                Call::with_form(Method::Put, path, form)
            }
            Stage::HaWait { .. } => Call::new(Method::Get, "/cluster/ha/status/current".into()),
            Stage::Verify { guest, .. } => Call::new(Method::Get, format!("{guest}/config")),
            Stage::VerifyMark { endpoints, .. } => {
                Call::new(Method::Get, endpoints.collection.to_owned())
            }
            Stage::FirewallRead(read) => Call::new(Method::Get, read.list.clone()),
        }
    }
}

/// A write's phase word, from the PVE call it makes.
fn writing(call: &Call) -> String {
    let segments: Vec<&str> = call.path.split('/').filter(|s| !s.is_empty()).collect();
    let last = segments.last().copied().unwrap_or_default();
    if call.method == Method::Delete {
        return "destroying".into();
    }
    match (last, segments.as_slice()) {
        ("clone", [.., guest, id, _]) => {
            let kind = if *guest == "lxc" { "CT" } else { "VM" };
            format!("cloning from {kind} {id}")
        }
        ("download-url", _) => "downloading".into(),
        ("resize", _) => "resizing a disk".into(),
        ("move_disk" | "move_volume", _) => "moving a disk".into(),
        ("migrate", _) => "migrating".into(),
        ("template", _) => "converting to a template".into(),
        ("config", _) => "writing the config".into(),
        ("qemu" | "lxc", ["nodes", _, _]) => "creating".into(),
        _ => "waiting for PVE".into(),
    }
}

/// Following one task: when to read its status next and when to give up.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TaskWatch {
    upid: String,
    status_path: String,
    started: Instant,
    next_read: Instant,
    interval: Duration,
    deadline: Instant,
    timeout: TimeoutName,
    /// What the last status read saw.
    last: String,
    /// The last status read found it running, at `last_read`.
    running: bool,
    last_read: Instant,
}

/// Where the current stage is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    /// Its call is to be sent.
    Ready,
    /// Its call is sent; its answer is awaited.
    Sent(Call),
    /// Following its task; `reading` while a status read is in flight.
    Task { watch: TaskWatch, reading: bool },
    /// A waiting [`Stage::Confirm`] saw another power state: its call is
    /// sent again at `next_read`.
    Waiting { next_read: Instant },
}

/// The step protocol of one action. See the module docs for call order.
#[derive(Debug, Clone)]
pub struct Step {
    settings: StepSettings,
    node: NodeName,
    stages: VecDeque<Stage>,
    phase: Phase,
    /// This action powered the guest off (a restore start may follow a
    /// failure).
    stopped_by_us: bool,
    /// A config write of this action has ended: PVE holds what it could
    /// not apply to the running guest pending.
    config_written: bool,
    /// Until when a waiting [`Stage::Confirm`] reads again.
    wait_until: Option<Instant>,
    /// The first failure; restore stages may still run after it.
    failure: Option<Outcome>,
    outcome: Option<Outcome>,
    upids: Vec<String>,
}

impl Step {
    /// The protocol for `action`; nothing is sent before `poll_request`.
    pub fn new(action: &Action, settings: StepSettings) -> Step {
        let (stages, outcome) = match stages(action) {
            Ok(mut stages) => {
                if let Some(verify) = verification(action) {
                    stages.push_front(verify);
                }
                (stages, None)
            }
            Err(error) => (VecDeque::new(), Some(Outcome::failed(error))),
        };
        let mut step = Step {
            settings,
            node: action.node.clone(),
            stages,
            phase: Phase::Ready,
            stopped_by_us: false,
            config_written: false,
            wait_until: None,
            failure: None,
            outcome,
            upids: Vec::new(),
        };
        step.finish_if_empty();
        step
    }

    /// How the action ended, once it has.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// The tasks PVE started for this action, in order.
    pub fn upids(&self) -> &[String] {
        &self.upids
    }

    /// What the action is doing now, in an operator's words (`shutting
    /// down`, `cloning from VM 9000`): the stage whose call was sent or
    /// whose task is followed.
    pub fn doing(&self) -> Option<String> {
        match self.phase {
            Phase::Sent(_) | Phase::Task { .. } | Phase::Waiting { .. } => {
                self.stages.front().map(Stage::doing)
            }
            Phase::Ready => None,
        }
    }

    /// The task whose last status read found it running, and how long it
    /// had run then.
    pub fn task_running(&self) -> Option<(&str, Duration)> {
        match &self.phase {
            Phase::Task { watch, .. } if watch.running => Some((
                watch.upid.as_str(),
                watch.last_read.saturating_duration_since(watch.started),
            )),
            _ => None,
        }
    }

    /// The next call to send now, if one is due. Its answer must go to
    /// [`Step::handle_answer`] before this hands out another.
    pub fn poll_request(&mut self, now: Instant) -> Option<Call> {
        if self.outcome.is_some() {
            return None;
        }
        match &mut self.phase {
            Phase::Ready => {
                let call = self.stages.front()?.call(&self.settings.power);
                self.phase = Phase::Sent(call.clone());
                Some(call)
            }
            Phase::Task { watch, reading } if !*reading && now >= watch.next_read => {
                *reading = true;
                Some(Call::new(Method::Get, watch.status_path.clone()))
            }
            Phase::Waiting { next_read, .. } if now >= *next_read => {
                let call = self.stages.front()?.call(&self.settings.power);
                self.phase = Phase::Sent(call.clone());
                Some(call)
            }
            _ => None,
        }
    }

    /// When the protocol next needs time: a task status read is due or a
    /// deadline passes. `None` while a call is in flight or when done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Task {
                watch,
                reading: false,
            } if self.outcome.is_none() => Some(watch.next_read.min(watch.deadline)),
            Phase::Waiting { next_read, .. } if self.outcome.is_none() => Some(*next_read),
            _ => None,
        }
    }

    /// Time has passed: a task past its deadline fails.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Phase::Task {
            watch,
            reading: false,
        } = &self.phase
            && now >= watch.deadline
        {
            let e = PveError::TaskTimedOut {
                upid: watch.upid.clone(),
                after: now.saturating_duration_since(watch.started),
                timeout: watch.timeout,
                last: watch.last.clone(),
            };
            self.stage_failed(e);
        }
    }

    /// PVE's answer to the call [`Step::poll_request`] handed out last.
    pub fn handle_answer(&mut self, now: Instant, answer: Answer) {
        match std::mem::replace(&mut self.phase, Phase::Ready) {
            Phase::Sent(call) => self.call_answered(now, &call, answer),
            Phase::Task { watch, .. } => self.task_read(now, watch, answer),
            Phase::Ready | Phase::Waiting { .. } => {}
        }
    }

    fn call_answered(&mut self, now: Instant, call: &Call, answer: Answer) {
        let Some(stage) = self.stages.front() else {
            return;
        };
        match answer {
            Answer::Error(e) => self.stage_failed_with(e, Some(call)),
            Answer::Data(data) => match stage {
                Stage::Confirm { want, wait, .. } => {
                    let (want, wait) = (*want, *wait);
                    self.confirmed(now, call, (want, wait), &data)
                }
                Stage::HaWait { sid, want, .. } => {
                    let (sid, want) = (sid.clone(), *want);
                    self.ha_reported(now, call, (&sid, want), &data)
                }
                Stage::ReadBack {
                    guest,
                    error,
                    restart,
                } => {
                    let restart = restart.then(|| guest.clone());
                    let error = error.clone();
                    self.read_back(&error, restart, &data)
                }
                Stage::Verify { expect, .. } => {
                    let expect = expect.clone();
                    self.verified(call, &expect, &data)
                }
                Stage::VerifyMark { endpoints, id } => {
                    let (endpoints, id) = (*endpoints, id.clone());
                    self.mark_verified(call, endpoints, &id, &data)
                }
                Stage::FirewallRead(read) => {
                    let read = read.clone();
                    self.firewall_read(call, &read, &data)
                }
                _ => match data {
                    Value::String(upid) => self.follow(now, call, upid),
                    _ => self.stage_done(),
                },
            },
        }
    }

    fn follow(&mut self, now: Instant, call: &Call, upid: String) {
        let node = upid_node(&upid).unwrap_or_else(|| self.node.to_string());
        let (limit, timeout) = match self.stages.front() {
            Some(Stage::Shutdown { .. } | Stage::Reboot { .. }) => {
                let p = self.settings.power;
                (p.shutdown_timeout + SHUTDOWN_GRACE, p.timeout_name())
            }
            _ => (
                self.settings.task_timeout,
                TimeoutName::Task(self.settings.task_timeout),
            ),
        };
        self.upids.push(upid.clone());
        let watch = TaskWatch {
            status_path: format!(
                "/nodes/{}/tasks/{}/status",
                encode_segment(&node),
                encode_segment(&upid)
            ),
            upid,
            started: now,
            next_read: now.after(FIRST_TASK_POLL),
            interval: FIRST_TASK_POLL,
            deadline: now.after(limit),
            timeout,
            last: format!("started by {}", call.what()),
            running: false,
            last_read: now,
        };
        self.phase = Phase::Task {
            watch,
            reading: false,
        };
    }

    fn task_read(&mut self, now: Instant, mut watch: TaskWatch, answer: Answer) {
        match answer {
            Answer::Data(data) => {
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
                        return self.stage_done();
                    }
                    return self.stage_failed(PveError::from_task_exit(&watch.upid, exit));
                }
                watch.last = format!("status {status:?}");
                watch.running = true;
                watch.last_read = now;
            }
            // The task is unknown to PVE: waiting will not find it.
            Answer::Error(PveError::NotFound { text }) => {
                let e = PveError::NotFound {
                    text: format!("task {}: {text}", watch.upid),
                };
                return self.stage_failed(e);
            }
            // A read error while polling: keep polling until the deadline.
            Answer::Error(e) => {
                watch.last = e.to_string();
                watch.running = false;
            }
        }
        watch.interval = (now.saturating_duration_since(watch.started) / TASK_POLL_SHARE)
            .clamp(FIRST_TASK_POLL, MAX_TASK_POLL);
        watch.next_read = now.after(watch.interval);
        self.phase = Phase::Task {
            watch,
            reading: false,
        };
    }

    fn confirmed(
        &mut self,
        now: Instant,
        call: &Call,
        (want, wait): (Power, Option<Duration>),
        data: &Value,
    ) {
        let status = data.get("status").and_then(Value::as_str).unwrap_or("");
        let qmp = data.get("qmpstatus").and_then(Value::as_str);
        let ok = match want {
            Power::Stopped => status == "stopped",
            // A VM paused on an I/O error has `status: running`.
            Power::Running => status == "running" && qmp.is_none_or(|q| q == "running"),
        };
        if ok {
            self.wait_until = None;
            return self.stage_done();
        }
        if wait.is_some_and(|w| self.keep_waiting(now, w)) {
            return;
        }
        let waited = self.wait_until.take().map_or(String::new(), |_| {
            format!(" after {}s", wait.unwrap_or_default().as_secs())
        });
        let seen = match qmp {
            Some(q) if q != status => format!("{status} ({q})"),
            _ => status.to_owned(),
        };
        let wanted = match want {
            Power::Running => "running",
            Power::Stopped => "stopped",
        };
        let e = PveError::Refused {
            status: 200,
            text: format!("PVE reports the guest {seen}{waited}, not {wanted}"),
        };
        self.stage_failed_with(e, Some(call));
    }

    /// The stage being waited on is not there yet: `true` while it may be
    /// read again (within `wait` of its first read), the next read set.
    fn keep_waiting(&mut self, now: Instant, wait: Duration) -> bool {
        let until = *self.wait_until.get_or_insert(now.after(wait));
        if now >= until {
            return false;
        }
        self.phase = Phase::Waiting {
            next_read: now.after(CONFIRM_POLL).min(until),
        };
        true
    }

    /// `/cluster/ha/status/current`: the service `sid` in state `want`
    /// ends the wait; another state waits, for a stop as long as a
    /// shutdown may take, for a start [`RESTART_WAIT`].
    fn ha_reported(&mut self, now: Instant, call: &Call, (sid, want): (&str, Power), data: &Value) {
        let entry = data
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e.get("sid").and_then(Value::as_str) == Some(sid));
        let state = entry
            .and_then(|e| e.get("state"))
            .and_then(Value::as_str)
            .unwrap_or("not reported");
        if state == want.ha_state() {
            self.wait_until = None;
            return self.stage_done();
        }
        let wait = match want {
            Power::Stopped => self.settings.power.shutdown_timeout + SHUTDOWN_GRACE,
            Power::Running => RESTART_WAIT,
        };
        if entry.is_some() && self.keep_waiting(now, wait) {
            return;
        }
        self.wait_until = None;
        let e = PveError::Refused {
            status: 200,
            text: format!(
                "the HA manager reports {sid} {state}, not {} (after up to {}s)",
                want.ha_state(),
                wait.as_secs()
            ),
        };
        self.stage_failed_with(e, Some(call));
    }

    /// The answer of `status/current` after a shutdown that timed out:
    /// off is as good as a finished shutdown; running (or anything else)
    /// fails the action with what PVE reports, as the guest may still
    /// power off by itself.
    fn read_back(&mut self, error: &str, restart: Option<String>, data: &Value) {
        let status = data.get("status").and_then(Value::as_str).unwrap_or("");
        if status == "stopped" {
            self.stopped_by_us = true;
            if let Some(guest) = restart {
                // After this read-back, before whatever follows it.
                for (i, stage) in power_on(&guest, true).into_iter().enumerate() {
                    self.stages.insert(i + 1, stage);
                }
            }
            return self.stage_done();
        }
        let seen = match data.get("qmpstatus").and_then(Value::as_str) {
            Some(q) if q != status => format!("{status} ({q})"),
            _ => status.to_owned(),
        };
        let error = format!(
            "{error}; PVE reports it {seen}: the shutdown was signalled, so it may still power off by itself (the next cycle looks again); {}",
            self.left_as_is()
        );
        self.fail(Outcome::failed(error));
    }

    /// The guest as read now against what the plan saw: any difference
    /// ends the action before anything is sent to the guest.
    fn verified(&mut self, call: &Call, expect: &Expect, data: &Value) {
        let differences = match proxops_model::live::LiveConfig::from_json(data) {
            Ok(config) => expect.differences(&config, self.settings.tags_case_sensitive),
            Err(e) => vec![format!("its config cannot be read ({e})")],
        };
        if differences.is_empty() {
            return self.stage_done();
        }
        let error = format!(
            "{}: the guest is not as the plan saw it: {}; nothing was sent to it (the next cycle plans from what it is now)",
            call.what(),
            differences.join("; ")
        );
        self.stages.clear();
        self.fail(Outcome::failed(error));
    }

    /// The answer of a [`Stage::VerifyMark`]: delete only an object that
    /// is still ProxOps' to delete.
    fn mark_verified(
        &mut self,
        call: &Call,
        endpoints: crate::cluster::Endpoints,
        id: &str,
        data: &Value,
    ) {
        use crate::cluster::Owner;
        let listing = match endpoints.parse(data) {
            Ok(listing) => listing,
            Err(e) => {
                return self.not_as_planned(call, &format!("the listing cannot be read ({e})"));
            }
        };
        let Some(object) = listing
            .get(id)
            .filter(|o| !crate::cluster::being_removed(o))
        else {
            // Deleted already, by someone else or an earlier attempt.
            self.stages.clear();
            self.outcome = Some(Outcome::Succeeded);
            return;
        };
        match object.owner() {
            Owner::Marked { noprune: false } => self.stage_done(),
            Owner::Marked { noprune: true } => {
                self.not_as_planned(call, &format!("{id} is marked noprune now"));
            }
            Owner::Unmarked => self.not_as_planned(
                call,
                &format!("{id} no longer ends its comment with the ProxOps marker"),
            ),
        }
    }

    /// The answer of a [`Stage::FirewallRead`]: the list as the plan
    /// expects it, and its digest put on the write that follows; else the
    /// action ends before that write (the next cycle plans from what PVE
    /// holds then).
    fn firewall_read(&mut self, call: &Call, read: &crate::action::ReadBack, data: &Value) {
        let found = match crate::firewall_plan::lines(&read.key, read.only.as_deref(), data) {
            Ok(found) => found,
            Err(e) => {
                return self.changed_under_us(call, &format!("the list cannot be read ({e})"));
            }
        };
        if found.lines != read.expect {
            let why = format!(
                "it holds [{}], the plan expects [{}]",
                found.lines.join(" | "),
                read.expect.join(" | ")
            );
            return self.changed_under_us(call, &why);
        }
        self.stage_done();
        if read.send_digest
            && let Some(Stage::Write { call, .. }) = self.stages.front_mut()
        {
            call.form.push("digest", found.digest);
        }
    }

    /// A firewall list changed since the plan read it (by hand, or by
    /// another writer): nothing more is written.
    fn changed_under_us(&mut self, call: &Call, why: &str) {
        let error = format!(
            "{}: the list changed since the plan read it: {why}; nothing more was written (the next cycle plans from what PVE holds)",
            call.what()
        );
        self.stages.clear();
        self.fail(Outcome::failed(error));
    }

    /// The object about to be deleted is not as the plan saw it: the
    /// action fails with nothing deleted.
    fn not_as_planned(&mut self, call: &Call, why: &str) {
        let error = format!(
            "{}: the object is not as the plan saw it: {why}; nothing was deleted (the next cycle plans from what it is now)",
            call.what()
        );
        self.stages.clear();
        self.fail(Outcome::failed(error));
    }

    /// What stays as it is after a shutdown that did not finish.
    fn left_as_is(&self) -> &'static str {
        if self.config_written {
            "the change is written and PVE holds it pending until the guest restarts; force-stop-after-timeout: true would stop it hard after the timeout"
        } else {
            "nothing else was changed; force-stop-after-timeout: true would stop it hard after the timeout"
        }
    }

    fn stage_done(&mut self) {
        self.phase = Phase::Ready;
        match self.stages.pop_front() {
            Some(
                Stage::Shutdown { .. }
                | Stage::ForceStop { .. }
                | Stage::HaWait {
                    want: Power::Stopped,
                    ..
                },
            ) => self.stopped_by_us = true,
            Some(Stage::Write { call, .. }) if call.path.ends_with("/config") => {
                self.config_written = true;
            }
            _ => {}
        }
        self.finish_if_empty();
    }

    fn stage_failed(&mut self, e: PveError) {
        self.stage_failed_with(e, None);
    }

    /// A stage failed. What follows depends on the stage: a shutdown that
    /// did not finish may become a hard stop; "gone" may end a delete as
    /// done; otherwise the action fails, and only the steps that restore a
    /// guest this action stopped still run.
    fn stage_failed_with(&mut self, e: PveError, call: Option<&Call>) {
        self.phase = Phase::Ready;
        let Some(stage) = self.stages.pop_front() else {
            return;
        };
        let what = call
            .cloned()
            .unwrap_or_else(|| stage.call(&self.settings.power))
            .what();
        match (&stage, &e) {
            (
                Stage::Write {
                    gone_is_done: true, ..
                }
                | Stage::Shutdown {
                    gone_is_done: true, ..
                }
                | Stage::Verify {
                    expect: Expect { prune: true, .. },
                    ..
                },
                PveError::NotFound { .. },
            ) => {
                self.stages.clear();
                self.outcome = Some(Outcome::Succeeded);
                return;
            }
            // Already off: the shutdown's purpose is met.
            (Stage::Shutdown { .. }, PveError::NotRunning { .. }) => {
                self.stopped_by_us = true;
                return self.finish_if_empty();
            }
            (
                Stage::Shutdown { guest, .. } | Stage::Reboot { guest },
                PveError::TaskFailed { .. } | PveError::TaskTimedOut { .. },
            ) => {
                let power = self.settings.power;
                let reboot = matches!(stage, Stage::Reboot { .. });
                if power.force_stop_after_timeout && !reboot {
                    self.stages.push_front(Stage::ForceStop {
                        guest: guest.clone(),
                    });
                    return;
                }
                let error = format!(
                    "{what}: the guest did not shut down within its {} ({e})",
                    power.timeout_name()
                );
                if reboot {
                    // The waiting confirmation of a restart that did not
                    // happen: the read-back decides what comes next.
                    self.stages.clear();
                }
                self.stages.push_front(Stage::ReadBack {
                    guest: guest.clone(),
                    error,
                    restart: reboot,
                });
                return;
            }
            (Stage::ReadBack { error, .. }, _) => {
                let error = format!(
                    "{error}; its power state could not be read back ({e}): the shutdown was signalled, so it may still power off by itself; {}",
                    self.left_as_is()
                );
                return self.fail(Outcome::failed(error));
            }
            _ => {}
        }
        let outcome = match e {
            PveError::ChangedUnderUs { .. } => Outcome::ChangedUnderUs,
            e => {
                let mut error = format!("{what}: {e}");
                if stage.restores() && self.failure.is_none() {
                    error
                        .push_str("; the guest is left stopped, the next cycle re-plans its power");
                }
                Outcome::Failed {
                    error,
                    pve: Some(e),
                }
            }
        };
        self.fail(outcome);
    }

    fn fail(&mut self, outcome: Outcome) {
        if self.failure.is_none() {
            self.failure = Some(outcome);
        }
        if self.stopped_by_us {
            self.stages.retain(Stage::restores);
        } else {
            self.stages.clear();
        }
        self.finish_if_empty();
    }

    fn finish_if_empty(&mut self) {
        if self.stages.is_empty() && self.outcome.is_none() {
            self.outcome = Some(self.failure.take().unwrap_or(Outcome::Succeeded));
        }
    }
}

/// `UPID:<node>:…` → the node that runs the task.
pub fn upid_node(upid: &str) -> Option<String> {
    let mut parts = upid.split(':');
    (parts.next()? == "UPID").then_some(())?;
    parts.next().filter(|n| !n.is_empty()).map(str::to_owned)
}

fn guest_path(node: &NodeName, guest_type: GuestType, vmid: proxops_model::names::Vmid) -> String {
    format!(
        "/nodes/{}/{}/{}",
        encode_segment(node.as_str()),
        guest_type.path_segment(),
        vmid
    )
}

/// A config write's form: the values, then `delete=` (comma-joined), then
/// the digest the planner read.
pub fn config_form(params: &Params, delete: &[String], digest: Option<&str>) -> Params {
    let mut form = params.clone();
    if !delete.is_empty() {
        form.push("delete", delete.join(","));
    }
    if let Some(d) = digest.filter(|d| !d.is_empty()) {
        form.push("digest", d);
    }
    form
}

fn write(call: Call) -> Stage {
    Stage::Write {
        call,
        gone_is_done: false,
    }
}

/// The power-off of a running guest: a graceful shutdown, then PVE's word
/// that it is off.
fn power_off(guest: &str) -> [Stage; 2] {
    [
        Stage::Shutdown {
            guest: guest.to_owned(),
            gone_is_done: false,
        },
        Stage::Confirm {
            guest: guest.to_owned(),
            want: Power::Stopped,
            restores: false,
            wait: None,
        },
    ]
}

/// The power-off of a guest: through the HA manager when it owns the
/// guest's power (`ha`), else a graceful shutdown.
fn power_off_via(guest: &str, ha: Option<&str>) -> Vec<Stage> {
    match ha {
        None => power_off(guest).into(),
        Some(sid) => ha_power(sid, guest, Power::Stopped, false).into(),
    }
}

/// The start of a guest: through the HA manager when it owns the guest's
/// power (`ha`), else `status/start`.
fn power_on_via(guest: &str, ha: Option<&str>, restores: bool) -> Vec<Stage> {
    match ha {
        None => power_on(guest, restores).into(),
        Some(sid) => ha_power(sid, guest, Power::Running, restores).into(),
    }
}

/// The HA manager asked for `want`, its word waited for, then PVE's own.
fn ha_power(sid: &str, guest: &str, want: Power, restores: bool) -> [Stage; 3] {
    [
        Stage::HaRequest {
            sid: sid.to_owned(),
            want,
            restores,
        },
        Stage::HaWait {
            sid: sid.to_owned(),
            want,
            restores,
        },
        Stage::Confirm {
            guest: guest.to_owned(),
            want,
            restores,
            wait: None,
        },
    ]
}

fn power_on(guest: &str, restores: bool) -> [Stage; 2] {
    [
        Stage::Start {
            guest: guest.to_owned(),
            restores,
        },
        Stage::Confirm {
            guest: guest.to_owned(),
            want: Power::Running,
            restores,
            wait: None,
        },
    ]
}

/// The check that comes before everything else for work that takes a
/// guest down or deletes it (a stop-start update, a stop, a reboot, a
/// template conversion, a prune): the guest is read and must still be as
/// the plan saw it — its config digest, the ownership tag, and for a prune
/// no `proxops-noprune` and no protection; never locked. Prunes run last,
/// after shutdown timeouts, clones and a confirmation prompt: a person may
/// have claimed the guest back in between. A cluster-level object's prune
/// reads its kind's listing the same way: still marked, not `noprune`.
fn verification(action: &Action) -> Option<Stage> {
    let (guest_type, expect) = match &action.work {
        Work::UpdateConfig {
            guest_type,
            digest,
            stop_first: true,
            ..
        }
        | Work::Stop {
            guest_type, digest, ..
        }
        | Work::Reboot {
            guest_type, digest, ..
        }
        | Work::MarkTemplate {
            guest_type, digest, ..
        } => (
            *guest_type,
            Expect {
                digest: digest.clone(),
                prune: false,
            },
        ),
        Work::Delete {
            guest_type, digest, ..
        } => (
            *guest_type,
            Expect {
                digest: digest.clone(),
                prune: true,
            },
        ),
        Work::ClusterWrite {
            method: crate::action::WriteMethod::Delete,
            ..
        } => {
            let Target::Cluster(id) = &action.target else {
                return None;
            };
            return Some(Stage::VerifyMark {
                endpoints: crate::cluster::endpoints(action.kind)?,
                id: id.clone(),
            });
        }
        _ => return None,
    };
    let Target::Guest(vmid) = &action.target else {
        return None;
    };
    Some(Stage::Verify {
        guest: guest_path(&action.node, guest_type, *vmid),
        expect,
    })
}

/// The sequence of stages each kind of work is (spec §14.1). Adding a verb
/// is one arm here.
fn stages(action: &Action) -> Result<VecDeque<Stage>, String> {
    let node = &action.node;
    let guest = |guest_type: GuestType| match &action.target {
        Target::Guest(v) => Ok(guest_path(node, guest_type, *v)),
        Target::File { .. } | Target::Cluster(_) => Err(format!(
            "{} {}/{}: a guest action without a guest id",
            action.op, action.kind, action.name
        )),
    };
    let mut out = VecDeque::new();
    match &action.work {
        Work::CreateGuest {
            guest_type,
            params,
            mark_template,
        } => out.extend(create_guest(
            node,
            *guest_type,
            guest(*guest_type)?,
            params,
            *mark_template,
        )),
        Work::CloneGuest {
            source,
            source_node,
            name,
            config,
            delete,
            start_after,
            pool,
        } => out.extend(clone_guest(
            action,
            guest(GuestType::Qemu)?,
            (*source, source_node),
            name,
            (config, delete),
            *start_after,
            pool.as_deref(),
        )),
        Work::Download { storage, params } => {
            let path = format!(
                "/nodes/{}/storage/{}/download-url",
                encode_segment(node.as_str()),
                encode_segment(storage.as_str())
            );
            out.push_back(write(Call::with_form(Method::Post, path, params.clone())));
        }
        Work::UpdateConfig {
            guest_type,
            params,
            delete,
            digest,
            stop_first,
            restart_after,
            ha,
        } => out.extend(update_config(
            *guest_type,
            guest(*guest_type)?,
            config_form(params, delete, digest.as_deref()),
            (*stop_first, *restart_after),
            ha.as_deref(),
        )),
        Work::Start { guest_type, ha } => {
            out.extend(power_on_via(&guest(*guest_type)?, ha.as_deref(), false))
        }
        Work::Stop { guest_type, ha, .. } => {
            out.extend(power_off_via(&guest(*guest_type)?, ha.as_deref()))
        }
        Work::Reboot { guest_type, ha, .. } => {
            out.extend(reboot(*guest_type, guest(*guest_type)?, ha.as_deref()))
        }
        Work::MarkTemplate {
            guest_type,
            stop_first,
            ..
        } => {
            let path = guest(*guest_type)?;
            if *stop_first {
                out.extend(power_off(&path));
            }
            out.push_back(write(Call::new(Method::Post, format!("{path}/template"))));
        }
        Work::Resize {
            guest_type,
            disk,
            size,
        } => out.push_back(resize(guest(*guest_type)?, disk, size)),
        Work::ClusterWrite {
            method,
            path,
            params,
        } => {
            let method = match method {
                WriteMethod::Post => Method::Post,
                WriteMethod::Put => Method::Put,
                WriteMethod::Delete => Method::Delete,
            };
            out.push_back(Stage::Write {
                call: Call::with_form(method, path.clone(), params.clone()),
                gone_is_done: method == Method::Delete,
            });
        }
        Work::Delete {
            guest_type,
            stop_first,
            purge,
            ..
        } => out.extend(delete_guest(guest(*guest_type)?, *stop_first, *purge)),
        Work::Firewall { calls } => out.extend(firewall(calls)),
    }
    Ok(out)
}

/// A firewall action's stages: each call, after its read when it has one,
/// with the digest the plan read when it carries one.
fn firewall(calls: &[crate::action::FirewallCall]) -> Vec<Stage> {
    let mut out = Vec::new();
    for c in calls {
        let method = match c.method {
            WriteMethod::Post => Method::Post,
            WriteMethod::Put => Method::Put,
            WriteMethod::Delete => Method::Delete,
        };
        let mut form = c.params.clone();
        if let Some(d) = &c.digest {
            form.push("digest", d.clone());
        }
        if let Some(read) = &c.read {
            out.push(Stage::FirewallRead(read.clone()));
        }
        out.push(Stage::Write {
            call: Call::with_form(method, c.path.clone(), form),
            gone_is_done: false,
        });
    }
    out
}

/// A disk grown to its absolute size: qemu-server and pve-container
/// `resize_vm` answer a task UPID on PVE 9; an absolute size (no `+`)
/// makes a retried write harmless.
fn resize(path: String, disk: &str, size: &Bytes) -> Stage {
    let mut form = Params::new();
    form.push("disk", disk.to_owned());
    form.push("size", size.to_wire());
    write(Call::with_form(Method::Put, format!("{path}/resize"), form))
}

/// A create on the guest's node, then the template marking a template
/// kind asks for.
fn create_guest(
    node: &NodeName,
    guest_type: GuestType,
    path: String,
    params: &Params,
    mark_template: bool,
) -> VecDeque<Stage> {
    let mut out = VecDeque::new();
    let base = format!(
        "/nodes/{}/{}",
        encode_segment(node.as_str()),
        guest_type.path_segment()
    );
    out.push_back(write(Call::with_form(Method::Post, base, params.clone())));
    if mark_template {
        // qemu answers a UPID, lxc `null` (synchronous) [PROBE].
        out.push_back(write(Call::new(Method::Post, format!("{path}/template"))));
    }
    out
}

/// A clone: the clone call on the template's node, the config the clone
/// does not carry, and a start when the manifest asks for it.
fn clone_guest(
    action: &Action,
    path: String,
    (source, source_node): (Vmid, &NodeName),
    name: &str,
    (config, delete): (&Params, &[String]),
    start_after: bool,
    pool: Option<&str>,
) -> VecDeque<Stage> {
    let node = &action.node;
    let mut out = VecDeque::new();
    let vmid = match &action.target {
        Target::Guest(v) => v.to_string(),
        Target::File { .. } | Target::Cluster(_) => String::new(),
    };
    let mut form = Params::new();
    form.push("newid", vmid);
    form.push("name", name.to_owned());
    form.push("full", "1");
    if source_node != node {
        form.push("target", node.to_string());
    }
    if let Some(pool) = pool {
        form.push("pool", pool.to_owned());
    }
    let source = guest_path(source_node, GuestType::Qemu, source);
    out.push_back(write(Call::with_form(
        Method::Post,
        format!("{source}/clone"),
        form,
    )));
    let form = config_form(config, delete, None);
    if !form.is_empty() {
        out.push_back(write(Call::with_form(
            Method::Post,
            format!("{path}/config"),
            form,
        )));
    }
    if start_after {
        out.extend(power_on(&path, false));
    }
    out
}

/// A config update: the write first, then, for a change PVE applies only
/// at a restart, the power-off and (when the guest ran) the start.
fn update_config(
    guest_type: GuestType,
    path: String,
    form: Params,
    (stop_first, restart_after): (bool, bool),
    ha: Option<&str>,
) -> VecDeque<Stage> {
    let mut out = VecDeque::new();
    // qemu: async POST (a UPID); lxc: PUT (PVE has no POST there).
    let method = match guest_type {
        GuestType::Qemu => Method::Post,
        GuestType::Lxc => Method::Put,
    };
    // Write before you stop: PVE takes a config write to a running
    // guest and holds what it cannot apply live as pending
    // (qemu-server `API2/Qemu.pm` `$update_vm_api` writes every key
    // to `[PENDING]`, then `vmconfig_hotplug_pending`; pve-container
    // `LXC/Config.pm` `update_pct_config` likewise), and the
    // power-off applies it (qemu-server `QemuServer.pm`
    // `vm_stop_cleanup` → `vmconfig_apply_pending`; pve-container's
    // poststop hook). So the write comes first, with the planner's
    // digest, while the guest runs: a write PVE refuses costs no
    // downtime. Neither refuses a write ProxOps makes because the
    // guest runs, so no update is written after the stop; only
    // `template` and `DELETE` must find the guest off (below).
    out.push_back(write(Call::with_form(
        method,
        format!("{path}/config"),
        form,
    )));
    if stop_first {
        out.extend(power_off_via(&path, ha));
        if restart_after {
            out.extend(power_on_via(&path, ha, true));
        }
    }
    out
}

/// A restart that applies what PVE holds pending and keeps the guest's
/// shutdown timeout.
fn reboot(guest_type: GuestType, path: String, ha: Option<&str>) -> VecDeque<Stage> {
    let mut out = VecDeque::new();
    match (guest_type, ha) {
        // qemu-server `API2/Qemu.pm` `vm_reboot` is not HA-aware:
        // the HA manager is asked for `stopped`, then `started`.
        (_, Some(sid)) => {
            out.extend(power_off_via(&path, Some(sid)));
            out.extend(power_on_via(&path, Some(sid), true));
        }
        // pve-container `LXC.pm` `vm_reboot` stops with
        // `vm_stop($vmid, 0, $timeout, 1)`: lxc-stop without
        // `--nokill`, which kills the container after 60 s whatever
        // its shutdown timeout. A graceful shutdown with the
        // timeout (`--nokill`), then a start, keeps it.
        (GuestType::Lxc, None) => {
            out.extend(power_off(&path));
            out.extend(power_on(&path, true));
        }
        // qemu-server `API2/Qemu.pm` `vm_reboot` takes `timeout`
        // for its shutdown (60 s without); the VM is started again
        // after the task ends (qmeventd), so `running` is waited
        // for.
        (GuestType::Qemu, None) => {
            out.push_back(Stage::Reboot {
                guest: path.clone(),
            });
            out.push_back(Stage::Confirm {
                guest: path,
                want: Power::Running,
                restores: false,
                wait: Some(RESTART_WAIT),
            });
        }
    }
    out
}

/// A delete: a graceful shutdown first when the guest runs.
fn delete_guest(path: String, stop_first: bool, purge: bool) -> VecDeque<Stage> {
    let mut out = VecDeque::new();
    if stop_first {
        out.push_back(Stage::Shutdown {
            guest: path.clone(),
            gone_is_done: true,
        });
    }
    // `purge=1`: PVE refuses to destroy an HA-managed or replicated
    // guest without it (qemu-server `API2/Qemu.pm` `destroy_vm`).
    let mut form = Params::new();
    if purge {
        form.push("purge", "1");
    }
    out.push_back(Stage::Write {
        call: Call::with_form(Method::Delete, path, form),
        gone_is_done: true,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PVE's wording is read here only: a taken id is its own error, a
    /// gone object is told from an unknown path, and a 4xx naming a missing
    /// parameter is neither.
    #[test]
    fn pves_wording_is_classified_once() {
        let taken = classify(500, "unable to create VM 100: config file already exists");
        assert!(matches!(taken, PveError::AlreadyExists { .. }), "{taken:?}");
        assert_eq!(
            taken.to_string(),
            "HTTP 500 unable to create VM 100: config file already exists"
        );
        assert!(!taken.is_transient());
        let refused = classify(400, "storage 'x' already exists");
        assert!(
            matches!(refused, PveError::Refused { status: 400, .. }),
            "{refused:?}"
        );
        assert!(says_gone(
            "Configuration file 'nodes/pve1/qemu-server/555.conf' does not exist"
        ));
        assert!(!says_gone(
            "Method 'GET /nodes/pve1/qemu/555/pending' not implemented"
        ));
    }

    #[test]
    fn a_writes_phase_is_named_from_its_call() {
        let word = |method, path: &str| writing(&Call::new(method, path.into()));
        for (method, path, want) in [
            (
                Method::Post,
                "/nodes/pve1/qemu/9000/clone",
                "cloning from VM 9000",
            ),
            (
                Method::Post,
                "/nodes/pve1/lxc/9001/clone",
                "cloning from CT 9001",
            ),
            (Method::Post, "/nodes/pve1/qemu", "creating"),
            (
                Method::Post,
                "/nodes/pve1/qemu/150/config",
                "writing the config",
            ),
            (
                Method::Put,
                "/nodes/pve1/qemu/150/resize",
                "resizing a disk",
            ),
            (
                Method::Post,
                "/nodes/pve1/storage/local/download-url",
                "downloading",
            ),
            (Method::Delete, "/nodes/pve1/qemu/150", "destroying"),
            (Method::Post, "/nodes/pve1/qemu/150/migrate", "migrating"),
        ] {
            assert_eq!(word(method, path), want, "{path}");
        }
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
            form.to_wire(),
            vec![
                ("memory".into(), "2048".into()),
                ("delete".into(), "ciuser,sshkeys".into()),
                ("digest".into(), "abc".into())
            ]
        );
    }

    #[test]
    fn a_400_naming_a_missing_thing_is_a_parameter_error_not_absence() {
        assert!(matches!(
            classify(400, "storage: storage 'x' does not exist"),
            PveError::Refused { status: 400, .. }
        ));
    }
}
