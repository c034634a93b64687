//! A recording of real PVE shapes where `/config` shows the desired value
//! and `/pending` shows it still pending: the guest is not converged. The
//! plan and `status` name it as waiting for a restart with the key, and
//! `diff --exit-code` counts it as a change.
//!
//! Real PVE's `GET …/config` returns the config with pending changes
//! applied and `GET …/pending` lists `value` (current) and `pending`
//! (queued) per key (qemu-server `API2/Qemu.pm` `vm_config`, `vm_pending`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn proxops(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(root())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .args(["--git-path", "fixtures/repos/pending"])
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_pending_change_is_a_change_for_diff_exit_code() {
    let (code, stdout, stderr) =
        proxops(&["diff", "--replay", "fixtures/live/pending", "--exit-code"]);
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(!stdout.contains("no drift"), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.contains("VM/k-test-c-3"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains("pending restart") && line.contains("agent"),
        "{stdout}"
    );
    assert!(stdout.contains("=== pending restart"), "{stdout}");
    // Nothing is written for it: no action section.
    assert!(!stdout.contains("will update"), "{stdout}");

    // Without --exit-code the same plan exits 0.
    let (code, _, stderr) = proxops(&["diff", "--replay", "fixtures/live/pending"]);
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn status_shows_the_guest_pending_restart_with_the_key() {
    let (code, stdout, stderr) = proxops(&[
        "status",
        "--replay",
        "fixtures/live/pending",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let objects = v["objects"].as_array().unwrap();
    let vm = objects
        .iter()
        .find(|o| o["name"] == "k-test-c-3")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(vm["state"], "pending_restart", "{stdout}");
    assert!(
        vm["last_error"].as_str().unwrap().contains("agent"),
        "{stdout}"
    );
}

#[test]
fn the_same_config_with_nothing_pending_is_converged() {
    // The recording without its /pending answer is read through /config
    // (a server or recording that lacks the endpoint): nothing pending.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(root().join("fixtures/live/pending/lab.json")).unwrap();
    let mut rec: serde_json::Value = serde_json::from_str(&text).unwrap();
    rec["responses"]
        .as_array_mut()
        .unwrap()
        .retain(|r| !r["path"].as_str().unwrap().ends_with("/pending"));
    std::fs::write(dir.path().join("lab.json"), rec.to_string()).unwrap();
    let (code, stdout, stderr) = proxops(&[
        "diff",
        "--replay",
        dir.path().to_str().unwrap(),
        "--exit-code",
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("no drift"), "{stdout}");
}
