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
            digest: Some("planned".into()),
            stop_first,
            restart_after: stop_first,
        },
    )
}

fn start() -> Action {
    action(
        Op::Start,
        Work::Start {
            guest_type: GuestType::Qemu,
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

/// A PVE whose every write starts a task that has ended OK by the first
/// status read; `status/current` tells `power`; `GET config` a fresh digest.
fn healthy(power: &'static str) -> impl FnMut(&Call, Duration) -> Answer {
    let mut state = power;
    move |call: &Call, _| {
        let path = call.path.as_str();
        match call.method {
            Method::Get if path.contains("/tasks/") => task("stopped", Some("OK")),
            Method::Get if path.ends_with("/status/current") => {
                Answer::Data(json!({"status": state, "qmpstatus": state}))
            }
            Method::Get if path.ends_with("/config") => {
                Answer::Data(json!({"memory": 2048, "digest": "fresh"}))
            }
            _ => {
                if path.ends_with("/status/shutdown") || path.ends_with("/status/stop") {
                    state = "stopped";
                } else if path.ends_with("/status/start") {
                    state = "running";
                }
                upid("qmtask")
            }
        }
    }
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

#[test]
fn a_reboot_is_one_status_reboot_confirmed_by_status_current() {
    // qemu-server `API2/Qemu.pm` `vm_reboot`: a clean shutdown and start
    // that applies what PVE holds pending; never a stop.
    let a = action(
        Op::Reboot,
        Work::Reboot {
            guest_type: GuestType::Qemu,
        },
    );
    let run = succeeds(&a, "running");
    assert_eq!(run.writes(), ["POST /nodes/pve1/qemu/100/status/reboot"]);
    assert!(
        run.sent()
            .contains(&"GET /nodes/pve1/qemu/100/status/current"),
        "{:?}",
        run.calls
    );
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
fn a_stop_start_update_shuts_down_rereads_the_digest_writes_and_starts() {
    let run = succeeds(&memory_update(true), "running");
    let sent: Vec<&str> = run
        .sent()
        .into_iter()
        .filter(|c| !c.contains("/tasks/"))
        .collect();
    assert_eq!(
        sent,
        [
            "POST /nodes/pve1/qemu/100/status/shutdown timeout=180",
            "GET /nodes/pve1/qemu/100/status/current",
            "GET /nodes/pve1/qemu/100/config",
            // The digest of the config as the shutdown left it, not the
            // planner's ("planned").
            "POST /nodes/pve1/qemu/100/config memory=4096&digest=fresh",
            "POST /nodes/pve1/qemu/100/status/start",
            "GET /nodes/pve1/qemu/100/status/current",
        ]
    );
    assert!(!run.sent().iter().any(|c| c.contains("status/stop")));
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
        Outcome::Failed { error, transient } => {
            assert!(
                error.contains("still not finished after 1800s")
                    && error.contains("reconcile.task-timeout of 1800s")
                    && error.contains("status \"running\""),
                "{error}"
            );
            assert!(*transient);
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
        matches!(&run.outcome, Outcome::Failed { error, transient: false } if error.contains("unable to parse worker upid")),
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
            transient: false
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
        if call.path.contains("/tasks/") {
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
    assert!(matches!(
        run.outcome,
        Outcome::Failed {
            transient: false,
            ..
        }
    ));
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
            matches!(&run.outcome, Outcome::Failed { transient: true, error } if error.contains("lock")),
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
    assert!(matches!(
        run.outcome,
        Outcome::Failed {
            transient: true,
            ..
        }
    ));
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
fn a_shutdown_that_times_out_leaves_the_guest_running_and_its_config_untouched() {
    let run = drive(&memory_update(true), settings(), shutdown_fails());
    match &run.outcome {
        Outcome::Failed { error, transient } => {
            assert!(
                error.contains("did not shut down within its shutdown-timeout of 180s")
                    && error.contains("left running with its config untouched")
                    && error.contains("got timeout"),
                "{error}"
            );
            assert!(!transient);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        run.writes(),
        ["POST /nodes/pve1/qemu/100/status/shutdown timeout=180"],
        "no stop, no write, no start"
    );
}

#[test]
fn a_shutdown_task_that_outlives_its_timeout_is_given_up_on() {
    let run = drive(&memory_update(true), settings(), |call, _| {
        if call.path.contains("/tasks/") {
            task("running", None)
        } else {
            upid("qmshutdown")
        }
    });
    assert_fails_with(&run, "shutdown-timeout of 180s");
    assert_eq!(
        run.ended,
        Duration::from_secs(180) + step::SHUTDOWN_GRACE,
        "the shutdown's own deadline, not the task timeout"
    );
    assert_eq!(run.writes().len(), 1);
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
            "POST /nodes/pve1/qemu/100/status/shutdown timeout=180",
            "POST /nodes/pve1/qemu/100/status/stop",
            "POST /nodes/pve1/qemu/100/config memory=4096&digest=fresh",
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
fn a_failed_write_after_a_shutdown_still_starts_the_guest_again() {
    let mut answered = healthy("running");
    let run = drive(&memory_update(true), settings(), move |call, t| {
        if call.method == Method::Post && call.path.ends_with("/config") {
            refused(500, "unable to apply pending change memory")
        } else {
            answered(call, t)
        }
    });
    assert_fails_with(&run, "unable to apply pending change memory");
    assert!(
        run.writes()
            .contains(&"POST /nodes/pve1/qemu/100/status/start")
    );
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
        ["POST /nodes/pve1/qemu/100/status/shutdown timeout=300"]
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
        },
    );
    let mut step = Step::new(&a, settings());
    let call = step.poll_request(Instant::default()).unwrap();
    assert!(!format!("{call:?}").contains("hunter2"));
    assert_eq!(call.form.to_wire()[0].1, "hunter2");
}
