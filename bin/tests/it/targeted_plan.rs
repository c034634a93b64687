//! `--target KIND/NAME` on `diff` and `apply`: only the targets and what
//! they depend on are planned, the rest is listed as not considered (text,
//! Markdown, JSON); nothing is pruned; an unknown target is exit 2 with the
//! nearest name, before PVE is read. Offline from the demo's recordings,
//! and against fakepve, where an apply writes only what the target needs.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use proxops_pve::fakepve::FakePve;
use serde_json::Value;

use crate::live_support::{self, Repo, Run, empty_seed, seed_vm, workspace_root, writes};

/// `proxops --git-path fixtures/repos/demo diff --replay fixtures/live/demo <args>`.
fn replayed_diff(args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    Run::from(
        live_support::without_proxops_env(&mut cmd)
            .current_dir(workspace_root())
            .args(["--git-path", "fixtures/repos/demo", "diff", "--replay"])
            .arg("fixtures/live/demo")
            .args(args)
            .output()
            .unwrap(),
    )
}

const TARGETS: [&str; 4] = ["--target", "VM/installer", "--target", "lxc/dns-01"];

#[test]
fn a_targeted_diff_plans_the_targets_and_their_prerequisites_only() {
    let text = replayed_diff(&TARGETS);
    assert_eq!(text.code, 0, "{}", text.all());
    let out = &text.stdout;
    // VM/installer's disk image comes along; nothing else is planned.
    assert!(
        out.contains("download       DiskImage/debian-13-genericcloud"),
        "{out}"
    );
    assert!(out.contains("create         VM/installer"), "{out}");
    assert!(out.contains("start          LXC/dns-01"), "{out}");
    assert!(
        !out.contains("prune "),
        "a targeted plan prunes nothing:\n{out}"
    );
    assert!(!out.contains("VM/web-01  "), "{out}");
    assert!(
        out.contains("=== not considered (--target) (11) ===\n  VM/db-01\n"),
        "{out}"
    );
    assert!(
        out.contains("=== edge ===\nno drift in the targeted objects\n"),
        "{out}"
    );
    assert!(
        out.ends_with("\nPlan: 2 to create, 1 power change (2 clusters)\n"),
        "{out}"
    );
    insta::assert_snapshot!("targeted_plan_text", out);

    let md = replayed_diff(&[&TARGETS[..], &["-o", "markdown"]].concat());
    assert_eq!(md.code, 0, "{}", md.all());
    assert!(
        md.stdout
            .contains("<summary>Not considered (--target): 11</summary>\n\n- VM/db-01\n"),
        "{}",
        md.stdout
    );

    let json = replayed_diff(&[&TARGETS[..], &["-o", "json"]].concat());
    assert_eq!(json.code, 0, "{}", json.all());
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    let home = &doc["clusters"][1];
    assert_eq!(home["name"], "home");
    let acted: Vec<String> = home["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{} {}/{}",
                a["action"].as_str().unwrap(),
                a["kind"].as_str().unwrap(),
                a["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        acted,
        [
            "download DiskImage/debian-13-genericcloud",
            "create VM/installer",
            "start LXC/dns-01"
        ]
    );
    assert_eq!(home["deferred"], serde_json::json!([]));
    let left = home["not_considered"].as_array().unwrap();
    assert_eq!(left.len(), 11);
    assert_eq!(left[0], serde_json::json!({"kind": "VM", "name": "db-01"}));
    // Without --target the key is absent, as before.
    let whole = replayed_diff(&["-o", "json"]);
    assert!(!whole.stdout.contains("not_considered"), "{}", whole.stdout);
}

#[test]
fn an_unknown_target_is_exit_2_with_the_nearest_name() {
    let run = replayed_diff(&[
        "--target",
        "VM/web01",
        "--target",
        "web-01",
        "--target",
        "LXC/dns-01",
    ]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert_eq!(run.stdout, "");
    insta::assert_snapshot!("targeted_plan_unknown", run.stderr);
    let saved = replayed_diff(&["--target", "LXC/dns-01", "--out", "/nonexistent/plan.json"]);
    assert_eq!(saved.code, 2, "{}", saved.all());
    assert!(
        saved.stderr.contains("leave out --target"),
        "{}",
        saved.stderr
    );
}

#[test]
fn a_targeted_apply_on_fakepve_writes_only_the_target_and_its_prerequisites() {
    // A proxops-tagged guest no manifest declares: a whole apply would
    // prune it, a targeted one never.
    let mut seed = empty_seed();
    seed["guests"] = serde_json::json!([seed_vm(400, "scratch-1", Some("proxops"), false)]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);

    let run = live_support::apply(&pve, &repo, &["--target", "VM/installer"]);
    assert_eq!(run.code, 0, "{}", run.all());
    // Its disk image and its ISO (neither is on this PVE yet), then it.
    assert!(run.stdout.contains("home: 3 ok, 0 failed"), "{}", run.all());
    // Only the two downloads and VM 102's creation.
    let mut w = writes(&pve);
    w.sort();
    let download = (
        "POST".to_owned(),
        "/api2/json/nodes/pve1/storage/local/download-url".to_owned(),
    );
    assert_eq!(
        w,
        [
            ("POST".into(), "/api2/json/nodes/pve1/qemu".into()),
            download.clone(),
            download,
        ]
    );
    assert!(live_support::deletes(&pve).is_empty());

    // The rest of the repository is still to do, and 400 is still there.
    let after = live_support::proxops(&pve, &repo, &["diff", "-o", "json"]);
    let doc: Value = serde_json::from_str(&after.stdout).unwrap();
    let actions = doc["clusters"][0]["actions"].as_array().unwrap();
    let names: Vec<&str> = actions
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"installer"), "{names:?}");
    assert!(
        names.contains(&"web-01") && names.contains(&"scratch-1"),
        "{names:?}"
    );
}
