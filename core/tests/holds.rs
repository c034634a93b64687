//! Holds: a guest whose disruptive action failed is not tried again at the
//! next poll but after a backoff (5 minutes, doubling, at most an hour by
//! default); a success or a commit that changes it clears the hold, and a
//! restart that left PVE holding the change pending counts as a failure
//! (qemu-server `QemuServer.pm` `vmconfig_apply_pending` keeps a key it
//! could not apply pending).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use proxops_core::action::{Op, SkipReason};
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::exec::{Execution, Outcome, Timestamp};
use proxops_core::hold::{Backoff, Holds};
use proxops_core::live::{GuestType, LiveSnapshot, NodeState, Power};
use proxops_core::names::{NodeName, Vmid};
use proxops_core::plan::{Plan, Policy};
use proxops_core::planner::plan;
use proxops_core::repo::ClusterDesired;
use support::fixture::{cluster, config, live};

const NOW: Timestamp = 1_800_000_000;

fn vm(memory: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  memory: {memory}\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n"
    )
}

/// VM 100 running with 1 GiB: a memory change is a stop-start update (no
/// memory hotplug).
fn pve(pending: &[(&str, Option<&str>)]) -> LiveSnapshot {
    let mut cfg = config(serde_json::json!({
        "name": "web", "memory": "1024", "cpu": "host", "cores": 1,
        "scsi0": "local-lvm:vm-100-disk-0,size=8G",
        "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        "tags": "proxops", "digest": "d1",
    }));
    for (k, v) in pending {
        cfg.pending.insert((*k).to_owned(), v.map(str::to_owned));
    }
    let mut s = LiveSnapshot::default();
    let node = NodeName::new("pve1").unwrap();
    s.nodes.insert(node.clone(), NodeState::Online);
    s.guests.insert(
        (node, Vmid::new(100).unwrap()),
        live(GuestType::Qemu, 100, Power::Running, &cfg),
    );
    s
}

fn run(c: &ClusterDesired, s: &LiveSnapshot, holds: &Holds, now: Timestamp) -> Plan {
    let secrets = CloudInitSecrets::default();
    let policy = Policy {
        holds: holds.clone(),
        now,
        restart_policy: proxops_core::config::RestartPolicy::Reboot,
        ..Default::default()
    };
    let ctx = Context {
        cluster: c,
        secrets: &secrets,
    };
    plan(c, s, &ctx, &policy)
}

/// Every action of `p` ends with `outcome`.
fn executed(p: &Plan, outcome: &Outcome) -> Execution {
    let mut e = Execution::new(p);
    while let Some((i, _)) = e.next(NOW) {
        e.record(i, outcome.clone(), NOW);
    }
    e
}

fn failed() -> Outcome {
    Outcome::Failed {
        error: "POST /nodes/pve1/qemu/100/status/shutdown: HTTP 500 boom".into(),
        pve: None,
    }
}

fn ops(p: &Plan) -> Vec<Op> {
    p.actions.iter().map(|a| a.op).collect()
}

fn held(p: &Plan) -> Option<&SkipReason> {
    p.skipped
        .iter()
        .map(|s| &s.reason)
        .find(|r| matches!(r, SkipReason::Held { .. }))
}

/// VM 100 whose stop-start update failed once at `NOW`: held.
fn held_after_one_failure() -> (ClusterDesired, LiveSnapshot, Holds) {
    let c = cluster(&[&vm("2GiB")]);
    let s = pve(&[]);
    let mut holds = Holds::default();
    let first = run(&c, &s, &holds, NOW);
    assert_eq!(ops(&first), [Op::Update], "{:#?}", first.actions);
    holds.record(
        &executed(&first, &failed()),
        None,
        &c,
        &Backoff::default(),
        NOW,
    );
    (c, s, holds)
}

#[test]
fn the_backoff_doubles_from_its_first_wait_up_to_its_cap() {
    let b = Backoff::default();
    let mins = |f| b.wait(f).as_secs() / 60;
    assert_eq!(
        [mins(1), mins(2), mins(3), mins(4), mins(5), mins(50)],
        [5, 10, 20, 40, 60, 60]
    );
    let short = Backoff {
        first: Duration::from_secs(2),
        max: Duration::from_secs(5),
    };
    assert_eq!(short.wait(1), Duration::from_secs(2));
    assert_eq!(short.wait(2), Duration::from_secs(4));
    assert_eq!(short.wait(3), Duration::from_secs(5));
}

#[test]
fn a_failed_stop_start_update_is_held_until_its_backoff_ends() {
    let (c, s, mut holds) = held_after_one_failure();
    // The next polls: no update, no shutdown, a skipped entry that says
    // until when and why.
    let again = run(&c, &s, &holds, NOW + 1);
    assert_eq!(ops(&again), [], "{:#?}", again.actions);
    let Some(SkipReason::Held {
        op,
        failures,
        next_attempt,
        error,
    }) = held(&again)
    else {
        panic!("{:#?}", again.skipped)
    };
    assert_eq!((op.as_str(), *failures), ("update", 1));
    assert_eq!(*next_attempt, NOW + 300);
    assert!(error.contains("boom"), "{error}");
    let shown = held(&again).unwrap().to_string();
    assert!(shown.contains("2027-01-15T08:05:00Z"), "{shown}");
    assert_eq!(ops(&run(&c, &s, &holds, NOW + 299)), []);

    // Due again: planned; a second failure doubles the wait.
    let due = run(&c, &s, &holds, NOW + 300);
    assert_eq!(ops(&due), [Op::Update]);
    let later = NOW + 300;
    holds.record(
        &executed(&due, &failed()),
        None,
        &c,
        &Backoff::default(),
        later,
    );
    let h = holds.iter().next().unwrap().1;
    assert_eq!((h.failures, h.next_attempt), (2, later + 600));

    // Success clears it.
    let due = run(&c, &s, &holds, later + 600);
    holds.record(
        &executed(&due, &Outcome::Succeeded),
        None,
        &c,
        &Backoff::default(),
        later + 600,
    );
    assert!(holds.is_empty(), "{holds:?}");
}

#[test]
fn a_commit_that_changes_the_object_clears_its_hold() {
    let (c, s, mut holds) = held_after_one_failure();
    assert_eq!(ops(&run(&c, &s, &holds, NOW + 1)), []);

    let changed = cluster(&[&vm("3GiB")]);
    assert_eq!(ops(&run(&changed, &s, &holds, NOW + 1)), [Op::Update]);
    // And the daemon forgets it with the next record.
    holds.record(
        &Execution::new(&run(&changed, &s, &Holds::default(), NOW)),
        None,
        &changed,
        &Backoff::default(),
        NOW + 1,
    );
    assert!(holds.is_empty(), "{holds:?}");
}

#[test]
fn a_reboot_that_leaves_the_change_pending_is_held_not_repeated_every_poll() {
    // Under restart-policy reboot a pending change plans a reboot; PVE
    // applied nothing (the key stays pending after the restart).
    let c = cluster(&[&vm("1GiB")]);
    let s = pve(&[("cores", Some("2"))]);
    let mut holds = Holds::default();
    let first = run(&c, &s, &holds, NOW);
    assert_eq!(ops(&first), [Op::Reboot], "{:#?}", first.actions);
    // The reboot succeeded; the read-back still plans one.
    let readback = run(&c, &s, &Holds::default(), NOW + 60);
    holds.record(
        &executed(&first, &Outcome::Succeeded),
        Some(&readback),
        &c,
        &Backoff::default(),
        NOW + 60,
    );
    let again = run(&c, &s, &holds, NOW + 61);
    assert_eq!(ops(&again), [], "{:#?}", again.actions);
    let shown = held(&again).unwrap().to_string();
    assert!(
        shown.contains("reboot failed 1 time(s)") && shown.contains("still holds cores pending"),
        "{shown}"
    );
}

#[test]
fn a_live_change_of_a_held_object_still_goes_through() {
    // The hold is on disruption only: a description PVE applies live is
    // written.
    let (c, _, holds) = held_after_one_failure();
    let stopped = {
        let mut s = pve(&[]);
        for g in s.guests.values_mut() {
            g.power = Power::Stopped;
        }
        s
    };
    // Stopped, the same update is live (no power-off needed): it runs, and
    // the start the manifest asks for too.
    let p = run(&c, &stopped, &holds, NOW + 1);
    assert_eq!(ops(&p), [Op::Update, Op::Start], "{:#?}", p.actions);
}
