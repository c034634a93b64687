//! `proxops show PLAN`: a plan `diff --out` saved (from the demo's
//! recordings) printed for review in a directory with no repository, no
//! configuration and no credentials, in text, Markdown and JSON (insta
//! snapshots); a truncated, retargeted or foreign file is exit 2 and
//! prints no plan.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use crate::live_support::{Repo, copy_dir, offline, workspace_root};

/// The demo repository under git and a plan saved from its recordings
/// into `out/plan.json`; returns the repository (kept alive) and the
/// commit the plan names.
fn saved_demo_plan(out: &Path) -> (Repo, String) {
    let repo = Repo {
        dir: tempfile::tempdir().unwrap(),
    };
    copy_dir(&workspace_root().join("fixtures/repos/demo"), repo.path());
    repo.git(&["init", "-q", "-b", "main"]);
    repo.commit_all("demo");
    let replay = workspace_root().join("fixtures/live/demo");
    let plan = out.join("plan.json");
    let run = offline(
        out,
        &[
            "--git-path",
            repo.path().to_str().unwrap(),
            "diff",
            "--replay",
            replay.to_str().unwrap(),
            "--out",
            plan.to_str().unwrap(),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.all());
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let commit = doc["commit"].as_str().unwrap().to_owned();
    (repo, commit)
}

#[test]
fn a_saved_plan_shows_offline_in_text_markdown_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let (_repo, commit) = saved_demo_plan(dir.path());
    assert!(!dir.path().join(".git").exists());
    let show = |format: &str| {
        let run = offline(dir.path(), &["show", "plan.json", "-o", format]);
        assert_eq!(run.code, 0, "{}", run.all());
        assert_eq!(run.stderr, "", "show reads no repository and logs nothing");
        run.stdout.replace(&commit, "<commit>")
    };
    let text = show("text");
    assert!(
        text.starts_with("Saved plan plan.json, computed from commit <commit>;"),
        "{text}"
    );
    // The actions diff printed, in the manifest's terms.
    assert!(
        text.contains("~ memory (spec.memory)                2GiB → 4GiB  ← stop-start"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "\nPlan: 6 to create, 1 to update, 1 power change, 3 to prune (2 clusters)\n"
        ),
        "{text}"
    );
    insta::assert_snapshot!("show_plan_text", text);
    let markdown = show("markdown");
    assert!(markdown.contains("## ProxOps plan"), "{markdown}");
    insta::assert_snapshot!("show_plan_markdown", markdown);
    let json = show("json");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["format"], "proxops-plan/v1");
    insta::assert_snapshot!("show_plan_json", json);
}

#[test]
fn a_damaged_or_foreign_plan_file_is_exit_2_and_prints_no_plan() {
    let dir = tempfile::tempdir().unwrap();
    saved_demo_plan(dir.path());
    let good = std::fs::read_to_string(dir.path().join("plan.json")).unwrap();
    let retargeted = good.replacen(
        "\"target\": {\n            \"guest\": 110",
        "\"target\": {\n            \"guest\": 999",
        1,
    );
    assert_ne!(retargeted, good, "the fixture's create of 110 moved");
    let cases = [
        (
            "truncated",
            good[..good.len() / 2].to_owned(),
            "plan.json: not a saved plan: line",
        ),
        (
            "retargeted",
            retargeted,
            "the plan's actions touch guest 999 that it has no record of (an edited or damaged plan file)",
        ),
        (
            "unknown op",
            good.replacen("\"op\": \"create\"", "\"op\": \"explode\"", 1),
            "clusters[0].actions[1].op: unknown variant `explode`",
        ),
        (
            "another version",
            good.replacen("\"version\": 2", "\"version\": 9", 1),
            "saved plan version 9 is not supported by this build",
        ),
        (
            "not JSON",
            "hello\n".to_owned(),
            "plan.json: not a saved plan: line 1",
        ),
    ];
    let mut seen = Vec::new();
    for (what, text, expected) in cases {
        std::fs::write(dir.path().join("plan.json"), &text).unwrap();
        let run = offline(dir.path(), &["show", "plan.json"]);
        assert_eq!(run.code, 2, "{what}: {}", run.all());
        assert_eq!(run.stdout, "", "{what}: no plan printed");
        assert!(run.stderr.contains(expected), "{what}: {}", run.stderr);
        seen.push(format!("{what}: {}", run.stderr.trim_end()));
    }
    let missing = offline(dir.path(), &["show", "nowhere.json"]);
    assert_eq!(missing.code, 2, "{}", missing.all());
    seen.push(format!("missing: {}", missing.stderr.trim_end()));
    let bare = offline(dir.path(), &["show"]);
    assert_eq!(bare.code, 2, "{}", bare.all());
    seen.push(format!("no operand: {}", bare.stderr.trim_end()));
    insta::assert_snapshot!("show_plan_refusals", seen.join("\n"));
}
