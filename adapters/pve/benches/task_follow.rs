//! How closely the runner follows a PVE task (`cargo bench -p proxops-pve
//! --bench task_follow`): stopped VMs on fakepve whose start task takes a
//! known time (the guest's `start_secs` at a time scale), started one at a
//! time. Prints, per task duration, the wall time per start action against
//! the task's own duration; the action also confirms the power state with
//! one `status/current` read. The task poll (25 ms, then a tenth of the
//! running time, at most 5 s) should keep it within 1.15× of the task.
//! Needs the test tools (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;
use std::time::{Duration, Instant};

use proxops_core::action::{Action, Impact, Op, Target, Work};
use proxops_core::exec::{ActionState, Outcome};
use proxops_core::live::GuestType;
use proxops_core::names::{ClusterName, Kind, NodeName, Vmid};
use proxops_core::plan::{AbortCause, Plan};
use proxops_core::rollout::Limits;
use proxops_core::step::PowerPolicy;
use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::runner::{self, Progress};
use proxops_pve::serial::RunOptions;
use serde_json::json;

/// Starts per task duration.
const STARTS: u32 = 8;
/// PVE seconds are this many real seconds.
const TIME_SCALE: f64 = 0.01;

fn start(vmid: u32) -> Action {
    Action {
        op: Op::Start,
        kind: Kind::VM,
        name: format!("vm-{vmid}"),
        node: NodeName::new("pve1").unwrap(),
        target: Target::Guest(Vmid::new(u64::from(vmid)).unwrap()),
        impact: Impact::Live,
        changes: Vec::new(),
        reason: "bench".into(),
        level: 0,
        deps: Vec::new(),
        object: None,
        work: Work::Start {
            guest_type: GuestType::Qemu,
            ha: None,
        },
    }
}

fn main() {
    let guests: Vec<_> = (0..STARTS * 4)
        .map(|i| {
            let vmid = 100 + i;
            json!({"vmid": vmid, "name": format!("vm-{vmid}"), "node": "pve1", "status": "stopped",
                   "config": {"memory": 512, "cores": 1,
                              "net0": format!("virtio=BC:24:11:00:00:{:02X},bridge=vmbr0", i),
                              "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=1G")}})
        })
        .collect();
    let pve = FakePve::start(&json!({"guests": guests}))
        .expect("fakepve (run tools/install-test-tools.sh)");
    pve.settings(json!({"time_scale": TIME_SCALE})).unwrap();
    let t = LiveTransport::new(pve.live_config()).unwrap();
    // The task durations, in real seconds: 0.5 s to 4 s.
    for (round, task_secs) in [0.5f64, 1.0, 2.0, 4.0].into_iter().enumerate() {
        let vmids: Vec<u32> = (0..STARTS)
            .map(|i| 100 + round as u32 * STARTS + i)
            .collect();
        for v in &vmids {
            pve.set_guest(*v, json!({"start_secs": task_secs / TIME_SCALE}))
                .unwrap();
        }
        let mut p = Plan::aborted(ClusterName::new("bench").unwrap(), AbortCause::PveRead, "");
        p.abort = None;
        p.actions = vmids.iter().map(|v| start(*v)).collect();
        let took = Mutex::new(Vec::new());
        let on_progress = |e: &Progress<'_>| {
            if let Progress::Finished { elapsed, .. } = e {
                took.lock().unwrap().push(*elapsed);
            }
        };
        let now = runner::unix_now;
        let opts = RunOptions {
            task_timeout: Duration::from_secs(60),
            power: PowerPolicy::default(),
            desired: None,
            limits: Limits::serial(),
            now: &now,
            stop: None,
            on_result: None,
            on_progress: Some(&on_progress),
        };
        let wall = Instant::now();
        let e = proxops_pve::serial::execute(&t, &p, &opts);
        let wall = wall.elapsed();
        assert!(
            e.states().iter().all(|s| matches!(
                s,
                ActionState::Done {
                    outcome: Outcome::Succeeded,
                    ..
                }
            )),
            "{:?}",
            e.states()
        );
        let took = took.into_inner().unwrap();
        let mean = took.iter().sum::<Duration>().as_secs_f64() / took.len() as f64;
        let worst = took.iter().max().copied().unwrap_or_default().as_secs_f64();
        println!(
            "start task of {task_secs:.1} s, one at a time: {:.3} s per action on average ({:.2}x the task), worst {:.3} s ({:.2}x); {STARTS} actions in {:.2} s",
            mean,
            mean / task_secs,
            worst,
            worst / task_secs,
            wall.as_secs_f64()
        );
    }
}
