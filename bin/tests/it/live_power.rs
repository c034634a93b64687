//! Graceful power end to end: a change that needs the guest off shuts it
//! down (`status/shutdown` with the cluster's `shutdown-timeout`), never
//! pulls the plug (`status/stop`) unless the cluster's
//! `force-stop-after-timeout` allows it after a shutdown that did not
//! finish; a guest that does not shut down in time is left running with its
//! config untouched. Against fakepve (its request log, its guest knobs).

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::transport::{Request, Transport};
use serde_json::Value;

/// The demo's monitoring VM (150 on pve1, 1 GiB, started) created and
/// running; its manifest then asks for 2 GiB, which a VM without memory
/// hotplug only takes cold (stop-start).
fn running_vm_wanting_more_memory() -> (FakePve, Repo) {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let created = apply(&pve, &repo, &[]);
    assert_eq!(created.code, 0, "{}", created.all());
    assert_eq!(current(&pve)["status"], "running");
    let p = repo.path().join("vm/base/monitoring.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("memory: 1GiB", "memory: 2GiB")).unwrap();
    pve.forget_requests().unwrap();
    (pve, repo)
}

fn read(pve: &FakePve, path: &str) -> Value {
    let t = LiveTransport::new(pve.live_config()).unwrap();
    t.call(&Request::get(path)).unwrap().data().clone()
}

fn current(pve: &FakePve) -> Value {
    read(pve, "/nodes/pve1/qemu/150/status/current")
}

/// VM 150's `memory` as PVE shows it (a number or, once written, a string).
fn memory(pve: &FakePve) -> String {
    match &read(pve, "/nodes/pve1/qemu/150/config")["memory"] {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The power calls sent, in order: `(path tail, body)`.
fn power_calls(pve: &FakePve) -> Vec<(String, String)> {
    pve.requests()
        .unwrap()
        .into_iter()
        .filter(|(m, p, _)| m == "POST" && p.contains("/qemu/150/status/"))
        .map(|(_, p, b)| (p.rsplit('/').next().unwrap().to_owned(), b))
        .collect()
}

#[test]
fn a_cold_memory_change_shuts_the_vm_down_never_stops_it_and_converges() {
    let (pve, repo) = running_vm_wanting_more_memory();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        power_calls(&pve),
        [
            ("shutdown".to_owned(), "timeout=180".to_owned()),
            ("start".to_owned(), String::new())
        ],
        "{}",
        run.all()
    );
    // After the power actions PVE's own status/current was asked.
    assert!(
        pve.requests()
            .unwrap()
            .iter()
            .any(|(m, p, _)| m == "GET" && p.ends_with("/qemu/150/status/current"))
    );
    assert_eq!(memory(&pve), "2048");
    assert_eq!(current(&pve)["status"], "running");
    let again = proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(again.code, 0, "converged:\n{}", again.all());
}

#[test]
fn a_shutdown_that_times_out_is_read_back_and_leaves_the_written_change_pending() {
    let (pve, repo) = running_vm_wanting_more_memory();
    // The guest takes 500 s to shut down; PVE's shutdown task gives up at
    // the 180 s timeout ProxOps asks for (fakepve: "VM quit/powerdown
    // failed - got timeout"). The change was written first, while the VM
    // ran: PVE holds it pending.
    pve.set_guest(150, serde_json::json!({"shutdown_secs": 500}))
        .unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 1, "{}", run.all());
    assert!(
        run.all().contains("shutdown-timeout of 180s")
            && run.all().contains("PVE reports it running")
            && run.all().contains("pending until the guest restarts"),
        "{}",
        run.all()
    );
    assert_eq!(
        power_calls(&pve),
        [("shutdown".to_owned(), "timeout=180".to_owned())],
        "no stop, no start"
    );
    let sent = pve.requests().unwrap();
    let write = sent
        .iter()
        .position(|(m, p, _)| m != "GET" && p.ends_with("/qemu/150/config"))
        .expect("the config write was sent");
    let shutdown = sent
        .iter()
        .position(|(_, p, _)| p.ends_with("/qemu/150/status/shutdown"))
        .unwrap();
    assert!(write < shutdown, "written before the shutdown: {sent:?}");
    assert!(
        sent[shutdown + 1..]
            .iter()
            .any(|(m, p, _)| m == "GET" && p.ends_with("/qemu/150/status/current")),
        "read back after the timeout: {sent:?}"
    );
    assert_eq!(current(&pve)["status"], "running");
    // The running VM keeps its memory; 2048 waits for the restart.
    assert_eq!(memory(&pve), "1024");
    let again = proxops(&pve, &repo, &["diff"]);
    assert!(
        again.all().contains("pending restart") && again.all().contains("memory"),
        "{}",
        again.all()
    );
}

#[test]
fn with_force_stop_after_timeout_a_stop_follows_the_timed_out_shutdown() {
    let (pve, repo) = running_vm_wanting_more_memory();
    pve.set_guest(150, serde_json::json!({"shutdown_secs": 500}))
        .unwrap();
    repo.set_reconcile("force-stop-after-timeout", "true");
    repo.set_reconcile("shutdown-timeout", "30s");
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        power_calls(&pve),
        [
            ("shutdown".to_owned(), "timeout=30".to_owned()),
            ("stop".to_owned(), String::new()),
            ("start".to_owned(), String::new())
        ],
        "{}",
        run.all()
    );
    assert_eq!(memory(&pve), "2048");
    assert_eq!(current(&pve)["status"], "running");
}

#[test]
fn a_guests_shutdown_timeout_annotation_is_what_pve_is_asked_to_wait() {
    let (pve, repo) = running_vm_wanting_more_memory();
    let p = repo.path().join("vm/base/monitoring.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        &p,
        text.replace(
            "  name: monitoring\n",
            "  name: monitoring\n  annotations:\n    proxops/shutdown-timeout: 10m\n",
        ),
    )
    .unwrap();
    pve.set_guest(150, serde_json::json!({"shutdown_secs": 500}))
        .unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        power_calls(&pve)[0],
        ("shutdown".to_owned(), "timeout=600".to_owned())
    );
    assert_eq!(memory(&pve), "2048");
}
