//! The runner against fakepve: a config edited on PVE between our read and
//! our write is never overwritten; task waits are bounded; deletes of a
//! vanished guest succeed; a stop request ends the run between actions; a
//! revoked ticket is re-acquired for the next write.

#![allow(clippy::unwrap_used)]

use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use proxops_core::action::{Action, Impact, Op, Params, Target, Work};
use proxops_core::exec::{ActionState, Outcome};
use proxops_core::live::GuestType;
use proxops_core::names::{ClusterName, Kind, NodeName, Vmid};
use proxops_core::plan::Plan;
use proxops_core::rollout::Limits;
use proxops_core::step::PowerPolicy;
use proxops_pve::auth::Credentials;
use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::reader::{ReadScope, read_snapshot};
use proxops_pve::runner;
use proxops_pve::serial::{self, RunOptions};
use proxops_pve::transport::{Method, Request, Response, Transport, TransportError};
use serde_json::{Value, json};

fn seed() -> Value {
    json!({"guests": [
        {"vmid": 100, "name": "web1", "status": "running",
         "config": {"memory": 2048, "cores": 2, "description": "ours-v1", "tags": "proxops",
                    "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
                    "scsi0": "local-lvm:vm-100-disk-0,size=32G"}},
        {"vmid": 200, "type": "lxc", "name": "ct1",
         "ostemplate": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
         "config": {"hostname": "ct1", "rootfs": "local-lvm:vm-200-disk-0,size=8G",
                    "net0": "name=eth0,bridge=vmbr0,ip=dhcp"}}
    ]})
}

fn now() -> u64 {
    runner::unix_now()
}

fn opts<'a>(stop: Option<&'a AtomicBool>) -> RunOptions<'a> {
    RunOptions {
        task_timeout: Duration::from_secs(10),
        power: PowerPolicy::default(),
        desired: None,
        limits: Limits::serial(),
        now: &now,
        stop,
        on_result: None,
        on_progress: None,
    }
}

fn action(vmid: u32, op: Op, work: Work) -> Action {
    Action {
        op,
        kind: Kind::VM,
        name: format!("vm-{vmid}"),
        node: NodeName::new("pve1").unwrap(),
        target: Target::Guest(Vmid::new(u64::from(vmid)).unwrap()),
        impact: Impact::Live,
        changes: Vec::new(),
        reason: "test".into(),
        level: 0,
        deps: Vec::new(),
        object: None,
        work,
    }
}

fn plan(actions: Vec<Action>) -> Plan {
    Plan {
        cluster: ClusterName::new("home").unwrap(),
        abort: None,
        actions,
        skipped: Vec::new(),
        deferred: Vec::new(),
        rollout: Default::default(),
        not_considered: Vec::new(),
        anomalies: Vec::new(),
        self_guests: Vec::new(),
        diagnostics: Vec::new(),
    }
}

fn live(pve: &FakePve) -> LiveTransport {
    LiveTransport::new(pve.live_config()).unwrap()
}

/// Runs a plan of one action: stop VM 100.
fn stop_vm_100(t: &LiveTransport, o: &RunOptions<'_>) -> proxops_core::exec::Execution {
    serial::execute(
        t,
        &plan(vec![action(
            100,
            Op::Stop,
            Work::Stop {
                guest_type: GuestType::Qemu,
                ha: None,
                digest: None,
            },
        )]),
        o,
    )
}

fn config(t: &dyn Transport, path: &str) -> Value {
    t.call(&Request::get(path)).unwrap().data().clone()
}

/// The description write the planner would make for VM 100, with the
/// digest of the config as read now.
fn description_update(t: &dyn Transport, text: &str) -> Action {
    let snap = read_snapshot(t, &ReadScope::default()).unwrap();
    let guest = snap
        .guest(&NodeName::new("pve1").unwrap(), Vmid::new(100).unwrap())
        .unwrap();
    let digest = guest.config.as_ref().unwrap().digest.clone();
    assert!(digest.is_some());
    let mut params = Params::new();
    params.push("description", text);
    action(
        100,
        Op::Update,
        Work::UpdateConfig {
            guest_type: GuestType::Qemu,
            params,
            delete: Vec::new(),
            digest,
            stop_first: false,
            restart_after: false,
            ha: None,
        },
    )
}

/// Forwards every call; before the first config write, someone else edits
/// the same config through a second request.
struct EditsBeforeOurWrite<'a> {
    inner: &'a dyn Transport,
    edited: Mutex<bool>,
}

impl Transport for EditsBeforeOurWrite<'_> {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        if request.method != Method::Get && request.path.ends_with("/config") {
            let mut edited = self.edited.lock().unwrap();
            if !*edited {
                *edited = true;
                let theirs = Request::new(
                    Method::Put,
                    request.path.clone(),
                    vec![("description".into(), "theirs".into())],
                );
                let r = self.inner.call(&theirs).unwrap();
                assert!(r.is_success(), "{r:?}");
            }
        }
        self.inner.call(request)
    }
}

#[test]
fn a_config_changed_between_read_and_write_is_not_overwritten() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    let racing = EditsBeforeOurWrite {
        inner: &t,
        edited: Mutex::new(false),
    };

    let update = description_update(&t, "ours-v2");
    let exec = serial::execute(&racing, &plan(vec![update]), &opts(None));
    assert!(
        matches!(
            &exec.states()[0],
            ActionState::Done {
                outcome: Outcome::ChangedUnderUs,
                ..
            }
        ),
        "{:?}",
        exec.states()
    );
    let path = "/nodes/pve1/qemu/100/config";
    assert_eq!(
        config(&t, path)["description"],
        "theirs",
        "the concurrent edit was overwritten"
    );

    // Next cycle: read again (new digest), write again: converges.
    let update = description_update(&t, "ours-v2");
    let exec = serial::execute(&t, &plan(vec![update]), &opts(None));
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    assert_eq!(config(&t, path)["description"], "ours-v2");
}

#[test]
fn a_container_config_is_written_with_put_and_its_digest() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    let snap = read_snapshot(&t, &ReadScope::default()).unwrap();
    let guest = snap
        .guest(&NodeName::new("pve1").unwrap(), Vmid::new(200).unwrap())
        .unwrap();
    let mut params = Params::new();
    params.push("memory", "1024");
    let mut a = action(
        200,
        Op::Update,
        Work::UpdateConfig {
            guest_type: GuestType::Lxc,
            params,
            delete: Vec::new(),
            digest: guest.config.as_ref().unwrap().digest.clone(),
            stop_first: false,
            restart_after: false,
            ha: None,
        },
    );
    a.kind = Kind::LXC;
    pve.forget_requests().unwrap();
    let exec = serial::execute(&t, &plan(vec![a]), &opts(None));
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    let sent = pve.requests().unwrap();
    let put = sent
        .iter()
        .find(|(m, p, _)| m == "PUT" && p.ends_with("/lxc/200/config"))
        .unwrap();
    assert!(
        put.2.contains("memory=1024") && put.2.contains("digest="),
        "{put:?}"
    );
    assert_eq!(
        config(&t, "/nodes/pve1/lxc/200/config")["memory"],
        json!(1024)
    );
}

#[test]
fn a_task_that_outlives_the_task_timeout_fails_with_its_last_status() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    pve.settings(json!({"time_scale": 0.01})).unwrap();
    // The shutdown gives up after 1 PVE second; the hard stop that the
    // policy then sends runs 500.
    pve.set_guest(100, json!({"shutdown_secs": 500, "stop_secs": 500}))
        .unwrap();
    let mut o = opts(None);
    o.power = PowerPolicy::new(Duration::from_secs(1), true);
    o.task_timeout = Duration::from_millis(300);
    let exec = stop_vm_100(&t, &o);
    match &exec.states()[0] {
        ActionState::Done {
            outcome: outcome @ Outcome::Failed { error, .. },
            ..
        } => {
            assert!(
                error.contains("still not finished")
                    && error.contains("running")
                    && error.contains("reconcile.task-timeout")
                    && error.contains("status/stop"),
                "{error}"
            );
            assert!(outcome.is_transient());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_task_error_fails_the_action_with_the_exit_status() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    pve.call(
        "fail",
        json!(["POST", "/nodes/pve1/qemu/100/status/start"]),
        json!({"error": "already_running", "times": 1}),
    )
    .unwrap();
    let exec = serial::execute(
        &t,
        &plan(vec![action(
            100,
            Op::Start,
            Work::Start {
                guest_type: GuestType::Qemu,
                ha: None,
            },
        )]),
        &opts(None),
    );
    match &exec.states()[0] {
        ActionState::Done {
            outcome: outcome @ Outcome::Failed { error, .. },
            ..
        } => {
            assert!(
                error.contains("VM 100 already running") && error.contains("task UPID:"),
                "{error}"
            );
            assert!(!outcome.is_transient());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn deleting_a_guest_that_is_already_gone_succeeds() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    let a = action(
        555,
        Op::Prune,
        Work::Delete {
            guest_type: GuestType::Qemu,
            stop_first: true,
            purge: false,
            digest: None,
        },
    );
    let exec = serial::execute(&t, &plan(vec![a]), &opts(None));
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
}

#[test]
fn a_running_guest_is_shut_down_then_deleted_never_forced() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    pve.forget_requests().unwrap();
    let a = action(
        100,
        Op::Prune,
        Work::Delete {
            guest_type: GuestType::Qemu,
            stop_first: true,
            purge: false,
            digest: None,
        },
    );
    let exec = serial::execute(&t, &plan(vec![a]), &opts(None));
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    let writes: Vec<(String, String, String)> = pve
        .requests()
        .unwrap()
        .into_iter()
        .filter(|(m, _, _)| m != "GET")
        .collect();
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(
        writes[0].1.ends_with("/qemu/100/status/shutdown") && writes[0].2 == "timeout=180",
        "{writes:?}"
    );
    assert!(
        writes[1].0 == "DELETE"
            && writes[1].1.ends_with("/qemu/100")
            && !writes[1].2.contains("force")
    );
}

#[test]
fn a_stop_request_starts_no_further_action() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    let stop = AtomicBool::new(true);
    pve.forget_requests().unwrap();
    let exec = stop_vm_100(&t, &opts(Some(&stop)));
    assert!(
        matches!(&exec.states()[0], ActionState::Deferred { .. }),
        "{:?}",
        exec.states()
    );
    assert!(pve.requests().unwrap().is_empty());
}

#[test]
fn a_revoked_ticket_is_renewed_for_the_next_write() {
    let pve = FakePve::start(&seed()).unwrap();
    let mut cfg = pve.live_config();
    cfg.credentials = Credentials::Ticket(pve.ticket_login());
    let t = LiveTransport::new(cfg).unwrap();
    let _ = read_snapshot(&t, &ReadScope::default()).unwrap();
    pve.call("revoke_tickets", Value::Null, Value::Null)
        .unwrap();
    let update = description_update(&t, "after-relogin");
    let exec = serial::execute(&t, &plan(vec![update]), &opts(None));
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    assert_eq!(
        config(&t, "/nodes/pve1/qemu/100/config")["description"],
        "after-relogin"
    );
}

#[test]
fn the_observer_hears_the_start_the_running_task_and_the_end_with_its_upid() {
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    // A shutdown of 30 PVE seconds runs ~300 ms: several status reads see
    // it running.
    pve.settings(json!({"time_scale": 0.01})).unwrap();
    pve.set_guest(100, json!({"shutdown_secs": 30})).unwrap();
    let heard: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let observer = |p: &runner::Progress<'_>| {
        let line = match p {
            runner::Progress::Started { index, action, .. } => {
                format!("started {index} {}", action.op.as_str())
            }
            runner::Progress::Phase { index, doing, .. } => format!("phase {index} {doing}"),
            runner::Progress::TaskRunning { index, upid, .. } => {
                format!("running {index} {upid}")
            }
            runner::Progress::Finished {
                index,
                outcome,
                upids,
                ..
            } => format!("finished {index} {outcome:?} {}", upids.join(" ")),
        };
        heard.lock().unwrap().push(line);
    };
    let mut o = opts(None);
    o.on_progress = Some(&observer);
    let exec = stop_vm_100(&t, &o);
    assert!(matches!(
        exec.states()[0],
        ActionState::Done {
            outcome: Outcome::Succeeded,
            ..
        }
    ));
    let mut heard = heard.into_inner().unwrap();
    assert_eq!(
        heard.first().map(String::as_str),
        Some("started 0 stop"),
        "{heard:?}"
    );
    // The phase is told once, before its task is followed.
    assert_eq!(
        heard
            .iter()
            .filter(|l| l.starts_with("phase"))
            .collect::<Vec<_>>(),
        ["phase 0 shutting down"],
        "{heard:?}"
    );
    heard.retain(|l| !l.starts_with("phase"));
    let last = heard.last().unwrap();
    assert!(
        last.starts_with("finished 0 Succeeded UPID:pve1:"),
        "{heard:?}"
    );
    assert!(last.contains(":qmshutdown:100:"), "{heard:?}");
    let upid = last.rsplit(' ').next().unwrap();
    let running: Vec<&String> = heard.iter().filter(|l| l.starts_with("running")).collect();
    assert!(!running.is_empty(), "{heard:?}");
    assert!(
        running.iter().all(|l| **l == format!("running 0 {upid}")),
        "{heard:?}"
    );
}

/// The non-GET requests fakepve saw, as `METHOD path body`.
fn sent_writes(pve: &FakePve) -> Vec<String> {
    pve.requests()
        .unwrap()
        .into_iter()
        .filter(|(m, _, _)| m != "GET")
        .map(|(m, p, b)| format!("{m} {} {b}", p.trim_start_matches("/api2/json")))
        .map(|s| s.trim_end().to_owned())
        .collect()
}

#[test]
fn under_restart_policy_reboot_a_container_is_shut_down_with_its_timeout_and_started() {
    // pve-container `LXC.pm` `vm_reboot` stops without `--nokill`: PVE's
    // own reboot kills a container after 60 s. Never sent.
    let mut s = seed();
    s["guests"][1]["status"] = json!("running");
    // Ours, as the plan saw it: the action reads the config first.
    s["guests"][1]["config"]["tags"] = json!("proxops");
    let pve = FakePve::start(&s).unwrap();
    let t = live(&pve);
    pve.forget_requests().unwrap();
    let mut a = action(
        200,
        Op::Reboot,
        Work::Reboot {
            guest_type: GuestType::Lxc,
            ha: None,
            digest: None,
        },
    );
    a.kind = Kind::LXC;
    let exec = serial::execute(&t, &plan(vec![a]), &opts(None));
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    assert_eq!(
        sent_writes(&pve),
        [
            "POST /nodes/pve1/lxc/200/status/shutdown timeout=180",
            "POST /nodes/pve1/lxc/200/status/start"
        ]
    );
}

#[test]
fn a_vm_reboot_carries_the_shutdown_timeout_and_is_confirmed_running() {
    // qemu-server `API2/Qemu.pm` `vm_reboot`: `timeout` for its shutdown.
    let pve = FakePve::start(&seed()).unwrap();
    let t = live(&pve);
    pve.forget_requests().unwrap();
    let a = action(
        100,
        Op::Reboot,
        Work::Reboot {
            guest_type: GuestType::Qemu,
            ha: None,
            digest: None,
        },
    );
    let exec = serial::execute(&t, &plan(vec![a]), &opts(None));
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    assert_eq!(
        sent_writes(&pve),
        ["POST /nodes/pve1/qemu/100/status/reboot timeout=180"]
    );
    assert!(
        pve.requests()
            .unwrap()
            .iter()
            .any(|(m, p, _)| m == "GET" && p.ends_with("/qemu/100/status/current"))
    );
}

#[test]
fn an_ha_managed_vm_is_stopped_and_started_by_the_ha_manager() {
    // The launcher's HA manager (pve-ha-manager `API2/HA/Resources.pm`)
    // carries a request out ~0.3 s later; the step waits on
    // `/cluster/ha/status/current` until it reports the state.
    let mut s = seed();
    s["ha_resources"] = json!([{"sid": "vm:100", "state": "started"}]);
    let pve = FakePve::start(&s).unwrap();
    let t = live(&pve);
    let snap = read_snapshot(&t, &ReadScope::default()).unwrap();
    let g = snap
        .guest(&NodeName::new("pve1").unwrap(), Vmid::new(100).unwrap())
        .unwrap();
    assert_eq!(g.ha_sid().as_deref(), Some("vm:100"));
    let mut params = Params::new();
    params.push("cores", "4");
    let a = action(
        100,
        Op::Update,
        Work::UpdateConfig {
            guest_type: GuestType::Qemu,
            params,
            delete: Vec::new(),
            digest: g.config.as_ref().unwrap().digest.clone(),
            stop_first: true,
            restart_after: true,
            ha: g.ha_sid(),
        },
    );
    pve.forget_requests().unwrap();
    let exec = serial::execute(&t, &plan(vec![a]), &opts(None));
    assert_eq!(exec.counts(), (1, 0), "{:?}", exec.states());
    let writes = sent_writes(&pve);
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(writes[0].starts_with("POST /nodes/pve1/qemu/100/config cores=4&digest="));
    assert_eq!(
        writes[1..],
        [
            "PUT /cluster/ha/resources/vm:100 state=stopped",
            "PUT /cluster/ha/resources/vm:100 state=started"
        ]
    );
    let waits = pve
        .requests()
        .unwrap()
        .iter()
        .filter(|(_, p, _)| p.ends_with("/cluster/ha/status/current"))
        .count();
    assert!(waits >= 4, "each request is waited for: {waits}");
    let current = t
        .call(&Request::get("/nodes/pve1/qemu/100/status/current"))
        .unwrap();
    assert_eq!(current.data()["status"], "running");
    let config = t
        .call(&Request::get("/nodes/pve1/qemu/100/config"))
        .unwrap();
    assert_eq!(config.data()["cores"], json!("4"));
}

#[test]
fn replication_jobs_are_read_once_per_snapshot() {
    let mut s = seed();
    s["nodes"] = json!(["pve2"]);
    s["replication"] = json!([{"id": "200-0", "target": "pve2", "schedule": "*/15"}]);
    let pve = FakePve::start(&s).unwrap();
    let t = live(&pve);
    pve.forget_requests().unwrap();
    let snap = read_snapshot(&t, &ReadScope::default()).unwrap();
    assert_eq!(
        snap.replication.of(Vmid::new(200).unwrap()),
        Ok(&["200-0".to_owned()][..])
    );
    assert_eq!(snap.replication.of(Vmid::new(100).unwrap()), Ok(&[][..]));
    let reads = pve
        .requests()
        .unwrap()
        .iter()
        .filter(|(_, p, _)| p.ends_with("/cluster/replication"))
        .count();
    assert_eq!(reads, 1);
}
