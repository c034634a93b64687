//! Ownership re-checked at the last moment, against fakepve: `apply` shows
//! its plan and asks on a terminal (util-linux `script` gives it one);
//! while it waits, a person edits the guest through PVE's API — tags it
//! `proxops-noprune`, takes the `proxops` tag off, changes its config.
//! After "yes", the guest is read again before anything shuts it down,
//! stops or deletes it: nothing is sent to it, and the run says why.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use live_support::*;
use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::transport::{Method, Request, Transport};
use serde_json::json;

/// The question `apply` asks before its first write.
const QUESTION: &str = "Only 'yes' goes on:";

/// Runs `proxops … apply` on a pseudo-terminal; when it asks, runs `edit`
/// (the plan is made and shown, nothing is written yet), then answers
/// `yes`. The exit code and everything it printed.
fn apply_editing_at_the_question(pve: &FakePve, repo: &Repo, edit: impl FnOnce()) -> (i32, String) {
    let mut script = on_a_pty(pve, repo, &["apply"]);
    let mut child = script
        .spawn()
        .expect("util-linux `script` runs the binary on a pseudo-terminal");
    let shown = Arc::new(Mutex::new(String::new()));
    let reader = {
        let shown = Arc::clone(&shown);
        let mut stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                shown
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let asked = Instant::now();
    while !shown.lock().unwrap().contains(QUESTION) {
        assert!(
            asked.elapsed() < Duration::from_secs(120),
            "never asked:\n{}",
            shown.lock().unwrap()
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended without asking:\n{}",
            shown.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    edit();
    child.stdin.take().unwrap().write_all(b"yes\n").unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let text = shown.lock().unwrap().replace('\r', "") + &err;
    (status.code().unwrap_or(-1), text)
}

/// A person's edit of guest `vmid`'s config through PVE's API.
fn edit_by_hand(pve: &FakePve, vmid: u32, form: &[(&str, &str)]) {
    let hand = LiveTransport::new(pve.live_config()).unwrap();
    let put = hand
        .call(&Request::new(
            Method::Put,
            format!("/nodes/pve1/qemu/{vmid}/config"),
            form.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        ))
        .unwrap();
    assert!(put.is_success(), "{put:?}");
}

/// The requests PVE saw for guest `vmid` that change something.
fn writes_to(pve: &FakePve, vmid: u32) -> Vec<(String, String)> {
    let needle = format!("/qemu/{vmid}");
    writes(pve)
        .into_iter()
        .filter(|(_, p)| p.contains(&needle))
        .collect()
}

fn power_of(pve: &FakePve, vmid: u32) -> String {
    let hand = LiveTransport::new(pve.live_config()).unwrap();
    let r = hand
        .call(&Request::get(format!(
            "/nodes/pve1/qemu/{vmid}/status/current"
        )))
        .unwrap();
    r.data()["status"].as_str().unwrap_or("").to_owned()
}

/// A running, proxops-tagged guest 160 without a manifest (the plan
/// prunes it), next to the monitoring VM's manifest.
fn prune_planned() -> (FakePve, Repo) {
    let mut seed = empty_seed();
    seed["guests"] = json!([seed_vm(160, "old-batch", Some("proxops"), true)]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let dry = proxops(&pve, &repo, &["diff"]);
    assert!(
        dry.stdout.contains("prune") && dry.stdout.contains("old-batch"),
        "{}",
        dry.all()
    );
    (pve, repo)
}

#[test]
fn a_guest_tagged_noprune_after_the_plan_was_shown_is_neither_stopped_nor_deleted() {
    let (pve, repo) = prune_planned();
    pve.forget_requests().unwrap();
    let (code, text) = apply_editing_at_the_question(&pve, &repo, || {
        edit_by_hand(&pve, 160, &[("tags", "proxops;proxops-noprune")]);
    });
    assert_eq!(code, 1, "{text}");
    for needle in [
        "the guest is not as the plan saw it",
        "it is now tagged proxops-noprune",
        "nothing was sent to it",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
    // The edit itself is the only write to 160.
    assert_eq!(
        writes_to(&pve, 160),
        [("PUT".into(), "/api2/json/nodes/pve1/qemu/160/config".into())],
        "{text}"
    );
    assert_eq!(power_of(&pve, 160), "running");
    // The rest of the plan went on: the monitoring VM was created.
    assert!(
        writes(&pve)
            .iter()
            .any(|(m, p)| m == "POST" && p.ends_with("/nodes/pve1/qemu")),
        "{text}"
    );
}

#[test]
fn a_guest_whose_proxops_tag_was_taken_off_after_the_plan_was_shown_is_left_alone() {
    let (pve, repo) = prune_planned();
    pve.forget_requests().unwrap();
    let (code, text) = apply_editing_at_the_question(&pve, &repo, || {
        edit_by_hand(&pve, 160, &[("tags", "batch")]);
    });
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("it no longer carries the proxops tag"),
        "{text}"
    );
    assert_eq!(writes_to(&pve, 160).len(), 1, "{text}");
    assert_eq!(power_of(&pve, 160), "running");
}

#[test]
fn a_stop_start_update_of_a_guest_edited_after_the_plan_was_shown_does_not_shut_it_down() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let created = apply(&pve, &repo, &[]);
    assert_eq!(created.code, 0, "{}", created.all());
    assert_eq!(power_of(&pve, 150), "running");
    // More memory: a stop-start change for a running VM.
    let p = repo.path().join("vm/base/monitoring.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, text.replace("memory: 1GiB", "memory: 2GiB")).unwrap();
    let dry = proxops(&pve, &repo, &["diff"]);
    assert!(dry.stdout.contains("[stop-start]"), "{}", dry.all());

    pve.forget_requests().unwrap();
    let (code, text) = apply_editing_at_the_question(&pve, &repo, || {
        edit_by_hand(&pve, 150, &[("description", "edited by hand")]);
    });
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("its config changed since the plan read it"),
        "{text}"
    );
    assert_eq!(writes_to(&pve, 150).len(), 1, "only the hand edit: {text}");
    assert_eq!(power_of(&pve, 150), "running");
}
