//! The PVE step protocol, driven in memory with a simulated clock: every
//! sequence of calls, task following and its deadlines, graceful power and
//! what PVE's answers mean. No sleep, no server: time jumps to the
//! protocol's `poll_timeout`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use proxops_core::action::{Action, Impact, Op, Params, Target, Work};
use proxops_core::exec::Outcome;
use proxops_core::live::GuestType;
use proxops_core::names::{Kind, NodeName, Ref, ResourceName, Vmid};
use proxops_core::step::{
    self, Answer, Call, Instant, Method, PowerPolicy, PveError, Step, StepSettings,
};
use proxops_core::wire::Bytes;
use serde_json::json;

const TASK_TIMEOUT: Duration = Duration::from_secs(30 * 60);

fn settings() -> StepSettings {
    StepSettings {
        task_timeout: TASK_TIMEOUT,
        power: PowerPolicy::default(),
        tags_case_sensitive: true,
    }
}

fn action(op: Op, work: Work) -> Action {
    Action {
        op,
        kind: Kind::VM,
        name: "web".into(),
        node: NodeName::new("pve1").unwrap(),
        target: Target::Guest(Vmid::new(100).unwrap()),
        impact: Impact::Live,
        changes: Vec::new(),
        reason: String::new(),
        level: 0,
        deps: Vec::new(),
        object: Some(Ref {
            kind: Kind::VM,
            name: ResourceName::new("web").unwrap(),
        }),
        work,
    }
}

fn memory_update(stop_first: bool) -> Action {
    let mut params = Params::new();
    params.push("memory", "4096");
    action(
        Op::Update,
        Work::UpdateConfig {
            guest_type: GuestType::Qemu,
            params,
            delete: Vec::new(),
            digest: Some(PLANNED.into()),
            stop_first,
            restart_after: stop_first,
            ha: None,
        },
    )
}

fn start() -> Action {
    action(
        Op::Start,
        Work::Start {
            guest_type: GuestType::Qemu,
            ha: None,
        },
    )
}

fn delete(stop_first: bool) -> Action {
    action(
        Op::Prune,
        Work::Delete {
            guest_type: GuestType::Qemu,
            stop_first,
            purge: false,
            digest: Some(PLANNED.into()),
        },
    )
}

/// What one drive of the protocol did.
struct Run {
    outcome: Outcome,
    /// Each call as `METHOD path form` with the simulated time it was sent.
    calls: Vec<(Duration, String)>,
    upids: Vec<String>,
    ended: Duration,
}

impl Run {
    fn sent(&self) -> Vec<&str> {
        self.calls.iter().map(|(_, c)| c.as_str()).collect()
    }

    /// The calls that change something (not reads).
    fn writes(&self) -> Vec<&str> {
        self.sent()
            .into_iter()
            .filter(|c| !c.starts_with("GET "))
            .collect()
    }
}

fn shown(call: &Call) -> String {
    let form: Vec<String> = call
        .form
        .to_wire()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{} {} {}", call.method, call.path, form.join("&"))
        .trim_end()
        .to_owned()
}

/// Drives `action` against `pve` (an answer for each call at a simulated
/// time). When the protocol has no call to make, time jumps to its
/// `poll_timeout`.
fn drive(
    action: &Action,
    settings: StepSettings,
    mut pve: impl FnMut(&Call, Duration) -> Answer,
) -> Run {
    let mut step = Step::new(action, settings);
    let mut now = Instant::default();
    let mut calls = Vec::new();
    for _ in 0..100_000 {
        if step.outcome().is_some() {
            break;
        }
        if let Some(call) = step.poll_request(now) {
            assert!(
                step.poll_request(now).is_none(),
                "a second call while one is in flight"
            );
            calls.push((now.since_origin(), shown(&call)));
            let answer = pve(&call, now.since_origin());
            step.handle_answer(now, answer);
            continue;
        }
        let due = step
            .poll_timeout()
            .expect("no outcome, no call and no timeout: the protocol is stuck");
        assert!(due >= now, "a timeout in the past");
        now = due;
        step.handle_timeout(now);
    }
    Run {
        outcome: step.outcome().cloned().expect("the protocol never ended"),
        calls,
        upids: step.upids().to_vec(),
        ended: now.since_origin(),
    }
}

fn upid(kind: &str) -> Answer {
    Answer::Data(json!(format!(
        "UPID:pve1:0001:0002:6B0C:{kind}:100:root@pam:"
    )))
}

fn task(status: &str, exitstatus: Option<&str>) -> Answer {
    let mut data = json!({"status": status});
    if let Some(e) = exitstatus {
        data["exitstatus"] = json!(e);
    }
    Answer::Data(data)
}

fn refused(status: u16, text: &str) -> Answer {
    Answer::Error(step::classify(status, text))
}

/// The config digest the actions of these tests were planned with.
const PLANNED: &str = "planned";

/// A PVE whose every write starts a task that has ended OK by the first
/// status read; `status/current` tells `power`; `GET config` shows the
/// guest as planned (tagged `proxops`, digest [`PLANNED`]) until a
/// power-off rewrote its config (then digest `fresh`).
fn healthy(power: &'static str) -> impl FnMut(&Call, Duration) -> Answer {
    let mut state = power;
    let mut digest = PLANNED;
    move |call: &Call, _| {
        let path = call.path.as_str();
        match call.method {
            Method::Get if path.contains("/tasks/") => task("stopped", Some("OK")),
            Method::Get if path.ends_with("/status/current") => {
                Answer::Data(json!({"status": state, "qmpstatus": state}))
            }
            Method::Get if path.ends_with("/config") => {
                Answer::Data(json!({"memory": 2048, "tags": "proxops;web", "digest": digest}))
            }
            _ => {
                if path.ends_with("/status/shutdown") || path.ends_with("/status/stop") {
                    digest = "fresh";
                    state = "stopped";
                } else if path.ends_with("/status/start") {
                    state = "running";
                }
                upid("qmtask")
            }
        }
    }
}

/// The guest's config as the plan saw it.
fn as_planned() -> Answer {
    Answer::Data(json!({"tags": "proxops", "digest": PLANNED}))
}

/// Drives `a` against a [`healthy`] PVE whose guest is `power`; it must
/// succeed.
fn succeeds(a: &Action, power: &'static str) -> Run {
    let run = drive(a, settings(), healthy(power));
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    run
}

/// The action failed, and its error says `text`.
fn assert_fails_with(run: &Run, text: &str) {
    match &run.outcome {
        Outcome::Failed { error, .. } => assert!(error.contains(text), "{error}"),
        other => panic!("{other:?}"),
    }
}

// ------------------------------------------------------------ sequences

#[test]
fn a_template_is_created_then_marked() {
    let a = action(
        Op::Create,
        Work::CreateGuest {
            guest_type: GuestType::Qemu,
            params: Params::new(),
            mark_template: true,
        },
    );
    let run = succeeds(&a, "stopped");
    assert_eq!(
        run.writes(),
        [
            "POST /nodes/pve1/qemu",
            "POST /nodes/pve1/qemu/100/template"
        ]
    );
    assert_eq!(run.upids.len(), 2);
}

#[test]
fn a_disk_grows_with_one_resize_to_its_absolute_size() {
    // qemu-server `API2/Qemu.pm` `resize_vm` answers a task UPID on PVE 9;
    // the size is absolute (no `+`), so a repeated write changes nothing.
    let a = action(
        Op::Resize,
        Work::Resize {
            guest_type: GuestType::Qemu,
            disk: "scsi0".into(),
            size: Bytes(6 << 30),
        },
    );
    let run = succeeds(&a, "running");
    assert_eq!(
        run.writes(),
        ["PUT /nodes/pve1/qemu/100/resize disk=scsi0&size=6G"]
    );
    assert_eq!(run.upids.len(), 1);
}

fn reboot(guest_type: GuestType) -> Action {
    action(
        Op::Reboot,
        Work::Reboot {
            guest_type,
            ha: None,
            digest: None,
        },
    )
}

#[test]
fn a_vm_reboot_carries_the_shutdown_timeout_and_waits_for_running() {
    // qemu-server `API2/Qemu.pm` `vm_reboot` takes `timeout` for its
    // shutdown (60 s without); qmeventd starts the VM after the task ends,
    // so `status/current` may say stopped for a while.
    let mut reads = 0;
    let run = drive(&reboot(GuestType::Qemu), settings(), |call, _| {
        if call.method == Method::Get && call.path.ends_with("/config") {
            as_planned()
        } else if call.path.ends_with("/status/current") {
            reads += 1;
            let state = if reads < 4 { "stopped" } else { "running" };
            Answer::Data(json!({"status": state, "qmpstatus": state}))
        } else if call.path.contains("/tasks/") {
            task("stopped", Some("OK"))
        } else {
            upid("qmreboot")
        }
    });
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    assert_eq!(
        run.writes(),
        ["POST /nodes/pve1/qemu/100/status/reboot timeout=180"]
    );
    let confirms: Vec<Duration> = run
        .calls
        .iter()
        .filter(|(_, c)| c.ends_with("/status/current"))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(confirms.len(), 4, "{:?}", run.calls);
    assert_eq!(confirms[3] - confirms[0], step::CONFIRM_POLL * 3);
}

#[test]
fn a_vm_that_does_not_run_again_after_its_reboot_fails_after_the_wait() {
    let run = drive(&reboot(GuestType::Qemu), settings(), |call, _| {
        if call.method == Method::Get && call.path.ends_with("/config") {
            as_planned()
        } else if call.path.ends_with("/status/current") {
            Answer::Data(json!({"status": "stopped"}))
        } else if call.path.contains("/tasks/") {
            task("stopped", Some("OK"))
        } else {
            upid("qmreboot")
        }
    });
    assert_fails_with(
        &run,
        "PVE reports the guest stopped after 120s, not running",
    );
}

#[test]
fn a_vm_reboot_that_timed_out_and_left_the_vm_off_starts_it() {
    // `vm_reboot` clears the reboot request when its shutdown times out
    // (`clear_reboot_request`): a VM that powers off later stays off.
    let mut started = false;
    let run = drive(&reboot(GuestType::Qemu), settings(), move |call, _| {
        let path = call.path.as_str();
        if call.method == Method::Get && path.ends_with("/config") {
            return as_planned();
        }
        if path.ends_with("/status/start") {
            started = true;
            return upid("qmstart");
        }
        if path.ends_with("/status/current") {
            let state = if started { "running" } else { "stopped" };
            return Answer::Data(json!({"status": state}));
        }
        if path.contains("qmreboot") {
            return task("stopped", Some("VM quit/powerdown failed - got timeout"));
        }
        if path.contains("/tasks/") {
            return task("stopped", Some("OK"));
        }
        upid("qmreboot")
    });
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    assert_eq!(
        run.writes(),
        [
            "POST /nodes/pve1/qemu/100/status/reboot timeout=180",
            "POST /nodes/pve1/qemu/100/status/start"
        ]
    );
}

#[test]
fn a_container_restart_is_a_shutdown_with_its_timeout_then_a_start() {
    // pve-container `LXC.pm` `vm_reboot` stops without `--nokill`: the
    // container is killed after 60 s whatever its timeout. Never sent.
    let run = succeeds(&reboot(GuestType::Lxc), "running");
    assert_eq!(
        run.writes(),
        [
            "POST /nodes/pve1/lxc/100/status/shutdown timeout=180",
            "POST /nodes/pve1/lxc/100/status/start"
        ]
    );
    assert!(!run.sent().iter().any(|c| c.contains("/status/reboot")));
}

#[test]
fn a_purging_delete_asks_pve_to_purge() {
    // qemu-server `API2/Qemu.pm` `destroy_vm`: an HA-managed or replicated
    // guest is destroyed only with `purge=1`.
    let a = action(
        Op::Prune,
        Work::Delete {
            guest_type: GuestType::Qemu,
            stop_first: false,
            purge: true,
            digest: None,
        },
    );
    let run = succeeds(&a, "stopped");
    assert_eq!(run.writes(), ["DELETE /nodes/pve1/qemu/100 purge=1"]);
}

#[test]
fn a_clone_is_cloned_configured_started_and_confirmed_running() {
    let mut config = Params::new();
    config.push("memory", "2048");
    let a = action(
        Op::Clone,
        Work::CloneGuest {
            source: Vmid::new(9000).unwrap(),
            source_node: NodeName::new("pve2").unwrap(),
            name: "web".into(),
            config,
            delete: vec!["ciuser".into()],
            start_after: true,
            pool: None,
        },
    );
    let run = succeeds(&a, "stopped");
    let sent: Vec<&str> = run
        .sent()
        .into_iter()
        .filter(|c| !c.contains("/tasks/"))
        .collect();
    assert_eq!(
        sent,
        [
            "POST /nodes/pve2/qemu/9000/clone newid=100&name=web&full=1&target=pve1",
            "POST /nodes/pve1/qemu/100/config memory=2048&delete=ciuser",
            "POST /nodes/pve1/qemu/100/status/start",
            "GET /nodes/pve1/qemu/100/status/current",
        ]
    );
}

#[test]
fn a_stop_start_update_writes_first_then_shuts_down_and_starts() {
    // Write before you stop: qemu-server `API2/Qemu.pm` `$update_vm_api`
    // takes a write to a running VM into `[PENDING]`; the shutdown applies
    // it (`QemuServer.pm` `vm_stop_cleanup` → `vmconfig_apply_pending`).
    let run = succeeds(&memory_update(true), "running");
    let sent: Vec<&str> = run
        .sent()
        .into_iter()
        .filter(|c| !c.contains("/tasks/"))
        .collect();
    assert_eq!(
        sent,
        [
            // The guest is still as planned before it is shut down.
            "GET /nodes/pve1/qemu/100/config",
            // The planner's digest: the write comes while the guest runs.
            "POST /nodes/pve1/qemu/100/config memory=4096&digest=planned",
            "POST /nodes/pve1/qemu/100/status/shutdown timeout=180",
            "GET /nodes/pve1/qemu/100/status/current",
            "POST /nodes/pve1/qemu/100/status/start",
            "GET /nodes/pve1/qemu/100/status/current",
        ]
    );
    assert!(!run.sent().iter().any(|c| c.contains("status/stop")));
}

#[test]
fn a_refused_stop_start_write_costs_no_shutdown() {
    let mut answered = healthy("running");
    let run = drive(&memory_update(true), settings(), move |call, t| {
        if call.method == Method::Post && call.path.ends_with("/config") {
            refused(
                500,
                "balloon value too large (must be smaller than assigned memory)",
            )
        } else {
            answered(call, t)
        }
    });
    assert_fails_with(&run, "balloon value too large");
    assert_eq!(
        run.writes(),
        ["POST /nodes/pve1/qemu/100/config memory=4096&digest=planned"],
        "no shutdown, no start"
    );
}

#[test]
fn a_live_update_carries_the_planners_digest_and_touches_no_power() {
    let run = succeeds(&memory_update(false), "running");
    assert_eq!(
        run.writes(),
        ["POST /nodes/pve1/qemu/100/config memory=4096&digest=planned"]
    );
}

#[test]
fn a_running_guest_is_shut_down_then_deleted() {
    let run = succeeds(&delete(true), "running");
    assert_eq!(
        run.writes(),
        [
            "POST /nodes/pve1/qemu/100/status/shutdown timeout=180",
            "DELETE /nodes/pve1/qemu/100"
        ]
    );
}

#[test]
fn a_running_guest_is_shut_down_before_it_is_marked_template() {
    let a = action(
        Op::MarkTemplate,
        Work::MarkTemplate {
            guest_type: GuestType::Qemu,
            stop_first: true,
            digest: None,
        },
    );
    let run = succeeds(&a, "running");
    assert_eq!(
        run.writes(),
        [
            "POST /nodes/pve1/qemu/100/status/shutdown timeout=180",
            "POST /nodes/pve1/qemu/100/template"
        ]
    );
}

#[test]
fn state_stopped_is_a_graceful_shutdown_confirmed_by_status_current() {
    let a = action(
        Op::Stop,
        Work::Stop {
            guest_type: GuestType::Lxc,
            ha: None,
            digest: None,
        },
    );
    let run = succeeds(&a, "running");
    assert_eq!(
        run.sent().last().copied(),
        Some("GET /nodes/pve1/lxc/100/status/current")
    );
    assert_eq!(
        run.writes(),
        ["POST /nodes/pve1/lxc/100/status/shutdown timeout=180"]
    );
}

// ------------------------------------------------------------ tasks

#[test]
fn a_task_that_never_ends_fails_at_its_deadline_naming_the_timeout() {
    let a = action(
        Op::Create,
        Work::CreateGuest {
            guest_type: GuestType::Qemu,
            params: Params::new(),
            mark_template: false,
        },
    );
    let run = drive(&a, settings(), |call, _| {
        if call.path.contains("/tasks/") {
            task("running", None)
        } else {
            upid("qmcreate")
        }
    });
    match &run.outcome {
        outcome @ Outcome::Failed { error, pve } => {
            assert!(
                error.contains("still not finished after 1800s")
                    && error.contains("reconcile.task-timeout of 1800s")
                    && error.contains("status \"running\""),
                "{error}"
            );
            assert!(
                matches!(pve, Some(PveError::TaskTimedOut { .. })),
                "{pve:?}"
            );
            assert!(outcome.is_transient());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(run.ended, TASK_TIMEOUT, "fails at its deadline, not later");
    // Polling backs off: 30 minutes cost a few hundred reads, not 18,000.
    let reads = run.sent().iter().filter(|c| c.contains("/tasks/")).count();
    assert!((300..450).contains(&reads), "{reads} status reads");
}

#[test]
fn task_polling_starts_at_25ms_then_waits_a_tenth_of_the_running_time_up_to_5s() {
    let a = start();
    let mut reads = 0;
    let run = drive(&a, settings(), |call, _| {
        if call.path.contains("/tasks/") {
            reads += 1;
            if reads < 80 {
                task("running", None)
            } else {
                task("stopped", Some("OK"))
            }
        } else if call.path.ends_with("/status/current") {
            Answer::Data(json!({"status": "running", "qmpstatus": "running"}))
        } else {
            upid("qmstart")
        }
    });
    assert_eq!(run.outcome, Outcome::Succeeded);
    let times: Vec<u128> = run
        .calls
        .iter()
        .filter(|(_, c)| c.contains("/tasks/"))
        .map(|(t, _)| t.as_millis())
        .collect();
    // The task started when the start call's UPID came back.
    let started = run
        .calls
        .iter()
        .find(|(_, c)| c.contains("/status/start"))
        .map(|(t, _)| t.as_millis())
        .unwrap();
    assert_eq!(times[0] - started, 25, "first read 25 ms after the start");
    for w in times.windows(2) {
        let ran = w[0] - started;
        let gap = w[1] - w[0];
        // Whole milliseconds of sub-millisecond instants: ±1 ms.
        let want = (ran / 10).clamp(25, 5000);
        assert!(
            gap.abs_diff(want) <= 1,
            "after {ran} ms running: waited {gap} ms, want {want}"
        );
    }
    let last_gap = times[times.len() - 1] - times[times.len() - 2];
    assert_eq!(last_gap, 5000, "the wait stops growing at 5 s");
}

#[test]
fn a_read_error_while_polling_is_tolerated_until_the_task_ends() {
    let a = start();
    let mut reads = 0;
    let run = drive(&a, settings(), |call, _| {
        if call.path.contains("/tasks/") {
            reads += 1;
            match reads {
                1 => Answer::Error(PveError::NoAnswer {
                    text: "connection reset".into(),
                }),
                2 => refused(595, "Connection refused"),
                _ => task("stopped", Some("WARNINGS: 1")),
            }
        } else if call.path.ends_with("/status/current") {
            Answer::Data(json!({"status": "running"}))
        } else {
            upid("qmstart")
        }
    });
    assert_eq!(run.outcome, Outcome::Succeeded);
}

#[test]
fn an_unknown_task_fails_at_once() {
    let a = start();
    let run = drive(&a, settings(), |call, _| {
        if call.path.contains("/tasks/") {
            refused(500, "unable to parse worker upid 'UPID:pve1:…'")
        } else {
            upid("qmstart")
        }
    });
    assert!(
        matches!(&run.outcome, Outcome::Failed { error, pve: Some(PveError::NotFound { .. }) } if error.contains("unable to parse worker upid")),
        "{:?}",
        run.outcome
    );
    assert_eq!(run.ended, step::FIRST_TASK_POLL);
}

#[test]
fn a_task_error_fails_with_its_exit_status() {
    let a = start();
    let run = drive(&a, settings(), |call, _| {
        if call.path.contains("/tasks/") {
            task("stopped", Some("start failed: QEMU exited with code 1"))
        } else {
            upid("qmstart")
        }
    });
    assert_eq!(
        run.outcome,
        Outcome::Failed {
            error: "POST /nodes/pve1/qemu/100/status/start: task UPID:pve1:0001:0002:6B0C:qmstart:100:root@pam: failed: start failed: QEMU exited with code 1".into(),
            pve: Some(PveError::TaskFailed {
                upid: "UPID:pve1:0001:0002:6B0C:qmstart:100:root@pam:".into(),
                exitstatus: "start failed: QEMU exited with code 1".into(),
            }),
        }
    );
}

// ------------------------------------------------------------ answers

#[test]
fn a_gone_answer_to_a_delete_is_success() {
    for stop_first in [false, true] {
        let run = drive(&delete(stop_first), settings(), |_, _| {
            refused(
                500,
                "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist",
            )
        });
        assert_eq!(run.outcome, Outcome::Succeeded, "stop_first {stop_first}");
        assert_eq!(run.calls.len(), 1, "{:?}", run.calls);
    }
    // Gone inside the delete's task, too.
    let run = drive(&delete(false), settings(), |call, _| {
        if call.path.ends_with("/config") {
            as_planned()
        } else if call.path.contains("/tasks/") {
            task("stopped", Some("no such VM ('100')"))
        } else {
            upid("qmdestroy")
        }
    });
    assert_eq!(run.outcome, Outcome::Succeeded);
}

#[test]
fn gone_is_not_success_for_anything_but_a_delete() {
    let run = drive(&memory_update(false), settings(), |_, _| {
        refused(
            500,
            "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist",
        )
    });
    assert!(
        matches!(run.outcome, Outcome::Failed { .. }) && !run.outcome.is_transient(),
        "{:?}",
        run.outcome
    );
}

#[test]
fn a_lock_answer_is_a_transient_failure_left_to_the_next_cycle() {
    let answers = [
        refused(500, "VM is locked (backup)"),
        refused(
            500,
            "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
        ),
    ];
    for answer in answers {
        let run = drive(&memory_update(false), settings(), |_, _| answer.clone());
        assert!(
            matches!(&run.outcome, outcome @ Outcome::Failed { error, .. } if error.contains("lock") && outcome.is_transient()),
            "{:?}",
            run.outcome
        );
        assert_eq!(run.calls.len(), 1, "no retry within the cycle");
    }
    // The config lock held by another task, inside the write's task.
    let run = drive(&memory_update(false), settings(), |call, _| {
        if call.path.contains("/tasks/") {
            task(
                "stopped",
                Some("can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"),
            )
        } else {
            upid("qmconfig")
        }
    });
    assert!(
        matches!(
            run.outcome,
            Outcome::Failed {
                pve: Some(PveError::ConfigLockTimeout { .. }),
                ..
            }
        ) && run.outcome.is_transient(),
        "{:?}",
        run.outcome
    );
    assert_eq!(run.writes().len(), 1, "no retry within the cycle");
}

#[test]
fn a_digest_mismatch_is_changed_under_us() {
    let run = drive(&memory_update(false), settings(), |_, _| {
        refused(500, "checksum mismatch (file change by other user?)")
    });
    assert_eq!(run.outcome, Outcome::ChangedUnderUs);
    let run = drive(&memory_update(false), settings(), |call, _| {
        if call.path.contains("/tasks/") {
            task(
                "stopped",
                Some("detected modified configuration - file changed by other user? Try again."),
            )
        } else {
            upid("qmconfig")
        }
    });
    assert_eq!(run.outcome, Outcome::ChangedUnderUs);
}

#[test]
fn pves_answers_are_classified_once() {
    type Case = (u16, &'static str, fn(&PveError) -> bool);
    let cases: [Case; 9] = [
        (404, "Not Found", |e| matches!(e, PveError::NotFound { .. })),
        (500, "no such VM ('555')", |e| {
            matches!(e, PveError::NotFound { .. })
        }),
        (400, "storage: storage 'x' does not exist", |e| {
            matches!(e, PveError::Refused { status: 400, .. })
        }),
        (500, "VM is locked (snapshot)", |e| {
            matches!(e, PveError::Locked { .. })
        }),
        (500, "CT is locked (backup)", |e| {
            matches!(e, PveError::Locked { .. })
        }),
        (500, "VM 101 not running", |e| {
            matches!(e, PveError::NotRunning { .. })
        }),
        (500, "cluster not ready - no quorum?", |e| {
            matches!(e, PveError::Busy { .. })
        }),
        (596, "Broken pipe", |e| matches!(e, PveError::Busy { .. })),
        (
            403,
            "Permission check failed (/vms/100, VM.Allocate)",
            |e| matches!(e, PveError::Refused { status: 403, text } if text == "HTTP 403 Permission check failed (/vms/100, VM.Allocate)"),
        ),
    ];
    for (status, text, is) in cases {
        let e = step::classify(status, text);
        assert!(is(&e), "{status} {text}: {e:?}");
    }
}

// ------------------------------------------------------------ graceful power

/// A guest that ignores the shutdown: PVE's shutdown task gives up.
fn shutdown_fails() -> impl FnMut(&Call, Duration) -> Answer {
    let mut pve = healthy("running");
    move |call, t| {
        if call.path.ends_with("/status/shutdown") {
            Answer::Data(json!("UPID:pve1:0001:0002:6B0C:qmshutdown:100:root@pam:"))
        } else if call.path.contains("qmshutdown") {
            task("stopped", Some("VM quit/powerdown failed - got timeout"))
        } else {
            pve(call, t)
        }
    }
}

#[test]
fn a_shutdown_that_times_out_is_read_back_and_the_written_change_waits_pending() {
    let run = drive(&memory_update(true), settings(), shutdown_fails());
    match &run.outcome {
        outcome @ Outcome::Failed { error, .. } => {
            assert!(
                error.contains("did not shut down within its shutdown-timeout of 180s")
                    && error.contains("got timeout")
                    && error.contains("PVE reports it running")
                    && error.contains("may still power off by itself")
                    && error.contains("holds it pending until the guest restarts"),
                "{error}"
            );
            assert!(!outcome.is_transient());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        run.writes(),
        [
            "POST /nodes/pve1/qemu/100/config memory=4096&digest=planned",
            "POST /nodes/pve1/qemu/100/status/shutdown timeout=180"
        ],
        "no stop, no start"
    );
    assert_eq!(
        run.sent().last().copied(),
        Some("GET /nodes/pve1/qemu/100/status/current"),
        "the power state is read back"
    );
}

#[test]
fn a_guest_that_powered_off_after_its_shutdown_timed_out_is_started_again() {
    // qemu-server `QemuServer.pm` `_do_vm_stop`: the powerdown request was
    // delivered before the task gave up; a slow guest is off later.
    let mut off_later = shutdown_fails();
    let mut started = false;
    let run = drive(&memory_update(true), settings(), move |call, t| {
        if call.path.ends_with("/status/start") {
            started = true;
        }
        if call.path.ends_with("/status/current") {
            let state = if started { "running" } else { "stopped" };
            return Answer::Data(json!({"status": state, "qmpstatus": state}));
        }
        off_later(call, t)
    });
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    assert_eq!(
        run.writes().last().copied(),
        Some("POST /nodes/pve1/qemu/100/status/start")
    );
}

#[test]
fn a_shutdown_task_that_outlives_its_timeout_is_given_up_on() {
    let run = drive(&memory_update(true), settings(), |call, _| {
        if call.path.contains("qmshutdown") {
            task("running", None)
        } else if call.path.contains("/tasks/") {
            task("stopped", Some("OK"))
        } else if call.method == Method::Get && call.path.ends_with("/config") {
            as_planned()
        } else if call.path.ends_with("/config") {
            upid("qmconfig")
        } else {
            upid("qmshutdown")
        }
    });
    assert_fails_with(&run, "shutdown-timeout of 180s");
    assert_eq!(
        run.ended,
        step::FIRST_TASK_POLL + Duration::from_secs(180) + step::SHUTDOWN_GRACE,
        "the write's task, then the shutdown's own deadline, not the task timeout"
    );
    assert_eq!(run.writes().len(), 2, "the write, then the shutdown");
}

#[test]
fn with_force_stop_after_timeout_a_stop_follows_and_the_update_goes_on() {
    let s = StepSettings {
        power: PowerPolicy::new(Duration::from_secs(180), true),
        ..settings()
    };
    let run = drive(&memory_update(true), s, shutdown_fails());
    assert_eq!(run.outcome, Outcome::Succeeded);
    assert_eq!(
        run.writes(),
        [
            "POST /nodes/pve1/qemu/100/config memory=4096&digest=planned",
            "POST /nodes/pve1/qemu/100/status/shutdown timeout=180",
            "POST /nodes/pve1/qemu/100/status/stop",
            "POST /nodes/pve1/qemu/100/status/start",
        ]
    );
}

#[test]
fn a_guest_already_off_needs_no_shutdown() {
    let mut answered = healthy("stopped");
    let run = drive(&delete(true), settings(), move |call, t| {
        if call.path.ends_with("/status/shutdown") {
            refused(500, "VM 100 not running")
        } else {
            answered(call, t)
        }
    });
    assert_eq!(run.outcome, Outcome::Succeeded);
    assert_eq!(
        run.writes().last().copied(),
        Some("DELETE /nodes/pve1/qemu/100")
    );
}

#[test]
fn a_failed_start_after_the_shutdown_leaves_the_guest_stopped_and_says_so() {
    let mut answered = healthy("running");
    let run = drive(&memory_update(true), settings(), move |call, t| {
        if call.path.ends_with("/status/start") {
            refused(500, "start failed: QEMU exited with code 1")
        } else {
            answered(call, t)
        }
    });
    assert_fails_with(&run, "the guest is left stopped");
}

#[test]
fn a_vm_paused_after_its_start_is_not_running() {
    let a = start();
    let run = drive(&a, settings(), |call, _| {
        if call.path.ends_with("/status/current") {
            Answer::Data(json!({"status": "running", "qmpstatus": "paused"}))
        } else if call.path.contains("/tasks/") {
            task("stopped", Some("OK"))
        } else {
            upid("qmstart")
        }
    });
    assert_fails_with(&run, "running (paused), not running");
}

#[test]
fn the_shutdown_timeout_annotation_wins_over_the_clusters() {
    let doc = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n  annotations:\n    proxops/shutdown-timeout: 5m\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";
    let desired = support::fixture::cluster(&[doc]);
    let a = memory_update(true);
    let power = PowerPolicy::default().for_action(&desired, &a);
    assert_eq!(power.shutdown_timeout, Duration::from_secs(300));
    let run = drive(
        &a,
        StepSettings {
            power,
            ..settings()
        },
        shutdown_fails(),
    );
    assert_eq!(
        run.writes(),
        [
            "POST /nodes/pve1/qemu/100/config memory=4096&digest=planned",
            "POST /nodes/pve1/qemu/100/status/shutdown timeout=300"
        ]
    );
    assert_fails_with(&run, "proxops/shutdown-timeout of 300s");
}

#[test]
fn a_secret_is_exposed_only_in_the_wire_form() {
    let mut params = Params::new();
    params.push_secret("cipassword", proxops_core::secret::Secret::new("hunter2"));
    let a = action(
        Op::Update,
        Work::UpdateConfig {
            guest_type: GuestType::Qemu,
            params,
            delete: Vec::new(),
            digest: None,
            stop_first: false,
            restart_after: false,
            ha: None,
        },
    );
    let mut step = Step::new(&a, settings());
    let call = step.poll_request(Instant::default()).unwrap();
    assert!(!format!("{call:?}").contains("hunter2"));
    assert_eq!(call.form.to_wire()[0].1, "hunter2");
}

#[test]
fn an_ha_guests_stop_start_asks_the_ha_manager_and_waits_for_its_word() {
    // pve-ha-manager `API2/HA/Resources.pm` `update` takes the requested
    // state; the manager carries it out later and reports it in
    // `/cluster/ha/status/current` (`HA/Tools.pm`
    // `get_verbose_service_state`: `stopping`, then `stopped`).
    let mut a = memory_update(true);
    if let Work::UpdateConfig { ha, .. } = &mut a.work {
        *ha = Some("vm:100".into());
    }
    let mut requested = "started";
    let mut reads = 0;
    let run = drive(&a, settings(), move |call, _| {
        let path = call.path.as_str();
        if call.method == Method::Put && path.starts_with("/cluster/ha/resources/") {
            requested = if shown(call).ends_with("state=stopped") {
                "stopped"
            } else {
                "started"
            };
            reads = 0;
            return Answer::Data(serde_json::Value::Null);
        }
        if path == "/cluster/ha/status/current" {
            reads += 1;
            let state = match (requested, reads) {
                ("stopped", 1) => "stopping",
                ("started", 1) => "starting",
                (r, _) => r,
            };
            return Answer::Data(json!([
                {"id": "quorum", "type": "quorum", "status": "OK"},
                {"id": "service:vm:100", "type": "service", "sid": "vm:100", "state": state}
            ]));
        }
        if path.ends_with("/status/current") {
            let s = if requested == "stopped" {
                "stopped"
            } else {
                "running"
            };
            return Answer::Data(json!({"status": s, "qmpstatus": s}));
        }
        if path.contains("/tasks/") {
            return task("stopped", Some("OK"));
        }
        if call.method == Method::Get && path.ends_with("/config") {
            return as_planned();
        }
        upid("qmconfig")
    });
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    let sent: Vec<&str> = run
        .sent()
        .into_iter()
        .filter(|c| !c.contains("/tasks/"))
        .collect();
    assert_eq!(
        sent,
        [
            // The guest is still as planned before anything is sent to it.
            "GET /nodes/pve1/qemu/100/config",
            "POST /nodes/pve1/qemu/100/config memory=4096&digest=planned",
            "PUT /cluster/ha/resources/vm%3A100 state=stopped",
            "GET /cluster/ha/status/current",
            "GET /cluster/ha/status/current",
            "GET /nodes/pve1/qemu/100/status/current",
            "PUT /cluster/ha/resources/vm%3A100 state=started",
            "GET /cluster/ha/status/current",
            "GET /cluster/ha/status/current",
            "GET /nodes/pve1/qemu/100/status/current",
        ]
    );
    assert!(!run.sent().iter().any(|c| c.contains("/status/shutdown")));
}

// ------------------------------------------------ the guest as planned

/// A PVE whose guest config reads as `config` (JSON, no digest: `digest`
/// is added), otherwise [`healthy`] with the guest `power`.
fn reading(
    config: serde_json::Value,
    digest: &'static str,
    power: &'static str,
) -> impl FnMut(&Call, Duration) -> Answer {
    let mut rest = healthy(power);
    move |call: &Call, at| {
        if call.method == Method::Get && call.path.ends_with("/config") {
            let mut c = config.clone();
            c["digest"] = json!(digest);
            return Answer::Data(c);
        }
        rest(call, at)
    }
}

/// The action ended with nothing written, saying why the guest is not as
/// planned.
fn refused_as_changed(run: &Run, why: &str) {
    assert_eq!(run.writes(), Vec::<&str>::new(), "{:?}", run.calls);
    assert_fails_with(run, "the guest is not as the plan saw it");
    assert_fails_with(run, why);
    assert_fails_with(run, "nothing was sent to it");
    assert_eq!(
        run.sent(),
        ["GET /nodes/pve1/qemu/100/config"],
        "one read, then nothing"
    );
}

#[test]
fn a_prune_reads_the_guest_first_and_deletes_only_what_the_plan_saw() {
    let run = succeeds(&delete(true), "running");
    assert_eq!(run.sent()[0], "GET /nodes/pve1/qemu/100/config");
}

#[test]
fn a_prune_of_a_guest_tagged_noprune_since_the_plan_sends_nothing() {
    // An operator saw the plan and protected the guest: PVE's config holds
    // the new tag (and so a new digest).
    let run = drive(
        &delete(true),
        settings(),
        reading(
            json!({"tags": "proxops;proxops-noprune"}),
            "edited",
            "running",
        ),
    );
    refused_as_changed(&run, "it is now tagged proxops-noprune");
    refused_as_changed(&run, "digest planned, now edited");
}

#[test]
fn a_prune_of_a_guest_untagged_protected_or_locked_since_the_plan_sends_nothing() {
    for (config, why) in [
        (
            json!({"tags": "web"}),
            "it no longer carries the proxops tag",
        ),
        // These settings are a cluster with a case-sensitive tag-style:
        // only ProxOps' own spelling owns there.
        (
            json!({"tags": "PROXOPS"}),
            "it no longer carries the proxops tag",
        ),
        (
            json!({"tags": "proxops", "protection": 1}),
            "protection is on",
        ),
        (
            json!({"tags": "proxops", "lock": "backup"}),
            "it is locked (backup)",
        ),
    ] {
        // The digest alone would not tell: the edit kept it (as a pending
        // change or a lock may).
        let run = drive(
            &delete(false),
            settings(),
            reading(config, PLANNED, "stopped"),
        );
        refused_as_changed(&run, why);
    }
}

#[test]
fn a_stop_start_update_of_a_guest_edited_by_hand_is_not_shut_down() {
    let run = drive(
        &memory_update(true),
        settings(),
        reading(
            json!({"tags": "proxops", "memory": 8192}),
            "edited",
            "running",
        ),
    );
    refused_as_changed(&run, "its config changed since the plan read it");
}

#[test]
fn a_stop_reboot_or_conversion_of_a_guest_untagged_since_the_plan_sends_nothing() {
    for work in [
        Work::Stop {
            guest_type: GuestType::Qemu,
            ha: None,
            digest: Some(PLANNED.into()),
        },
        Work::Reboot {
            guest_type: GuestType::Qemu,
            ha: None,
            digest: Some(PLANNED.into()),
        },
        Work::MarkTemplate {
            guest_type: GuestType::Qemu,
            stop_first: true,
            digest: Some(PLANNED.into()),
        },
    ] {
        let run = drive(
            &action(Op::Stop, work),
            settings(),
            reading(json!({"tags": "web"}), PLANNED, "running"),
        );
        refused_as_changed(&run, "it no longer carries the proxops tag");
    }
}

#[test]
fn an_action_after_another_on_its_guest_compares_tags_lock_and_protection_not_the_digest() {
    // A reboot that follows this plan's own update: the digest moved, as
    // planned; the guest is still ProxOps'.
    let reboot = action(
        Op::Reboot,
        Work::Reboot {
            guest_type: GuestType::Qemu,
            ha: None,
            digest: None,
        },
    );
    let run = drive(
        &reboot,
        settings(),
        reading(
            json!({"tags": "proxops"}),
            "written-by-the-update",
            "running",
        ),
    );
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    let run = drive(
        &reboot,
        settings(),
        reading(json!({"tags": "proxops", "lock": "backup"}), "x", "running"),
    );
    refused_as_changed(&run, "it is locked (backup)");
}

#[test]
fn a_prune_whose_guest_is_already_gone_is_done_without_a_write() {
    let run = drive(&delete(true), settings(), |call: &Call, _| {
        if call.method == Method::Get {
            refused(
                500,
                "Configuration file 'nodes/pve1/qemu-server/100.conf' does not exist",
            )
        } else {
            upid("qmdestroy")
        }
    });
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    assert!(run.writes().is_empty(), "{:?}", run.calls);
}

#[test]
fn a_guest_that_cannot_be_read_before_a_prune_is_not_deleted() {
    let run = drive(&delete(true), settings(), |call: &Call, _| {
        if call.method == Method::Get {
            refused(596, "Connection timed out")
        } else {
            upid("qmdestroy")
        }
    });
    assert!(run.writes().is_empty(), "{:?}", run.calls);
    assert!(
        matches!(run.outcome, Outcome::Failed { .. }),
        "{:?}",
        run.outcome
    );
}

// ------------------------------------------ a cluster-level object's prune

/// The prune of backup job `nightly`.
fn backup_job_prune() -> Action {
    let mut a = action(
        Op::Prune,
        proxops_core::cluster::BACKUP_JOB.delete("nightly"),
    );
    a.kind = Kind::BackupJob;
    a.name = "nightly".into();
    a.target = Target::Cluster("nightly".into());
    a.object = None;
    a
}

/// A PVE listing backup job `nightly` with `comment` (none: not listed),
/// deleting whatever it is asked to.
fn listing_nightly(comment: Option<&'static str>) -> impl FnMut(&Call, Duration) -> Answer {
    move |call: &Call, _| match call.method {
        Method::Get => Answer::Data(match comment {
            Some(c) => json!([{"id": "nightly", "schedule": "21:00", "comment": c}]),
            None => json!([{"id": "weekly", "comment": "[proxops]"}]),
        }),
        _ => Answer::Data(serde_json::Value::Null),
    }
}

#[test]
fn a_cluster_object_prune_reads_the_listing_first_and_deletes_only_what_is_still_marked() {
    let run = drive(
        &backup_job_prune(),
        settings(),
        listing_nightly(Some("Nightly [proxops]")),
    );
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    assert_eq!(
        run.sent(),
        ["GET /cluster/backup", "DELETE /cluster/backup/nightly"]
    );
}

#[test]
fn a_cluster_object_unmarked_or_noprune_since_the_plan_is_not_deleted() {
    for (comment, why) in [
        (
            "Nightly, claimed by hand",
            "no longer ends its comment with the ProxOps marker",
        ),
        ("Nightly [proxops noprune]", "is marked noprune now"),
    ] {
        let run = drive(
            &backup_job_prune(),
            settings(),
            listing_nightly(Some(comment)),
        );
        assert_eq!(run.sent(), ["GET /cluster/backup"], "{comment}");
        assert_fails_with(&run, "the object is not as the plan saw it");
        assert_fails_with(&run, why);
        assert_fails_with(&run, "nothing was deleted");
    }
}

#[test]
fn a_cluster_object_already_gone_is_pruned_without_a_write() {
    let run = drive(&backup_job_prune(), settings(), listing_nightly(None));
    assert_eq!(run.outcome, Outcome::Succeeded, "{:?}", run.calls);
    assert_eq!(run.sent(), ["GET /cluster/backup"]);
}

#[test]
fn a_cluster_listing_that_cannot_be_read_before_a_prune_deletes_nothing() {
    let run = drive(
        &backup_job_prune(),
        settings(),
        |call: &Call, _| match call.method {
            Method::Get => refused(596, "Connection timed out"),
            _ => Answer::Data(serde_json::Value::Null),
        },
    );
    assert!(run.writes().is_empty(), "{:?}", run.calls);
    assert!(
        matches!(run.outcome, Outcome::Failed { .. }),
        "{:?}",
        run.outcome
    );
}
