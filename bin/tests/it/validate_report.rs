//! `validate` reports every problem in one run, as text or as JSON for
//! editors and CI; a typo is answered with "did you mean"; a decimal or
//! bare size that PVE would take differently is a warning naming the
//! binary spelling. Wording is pinned by insta snapshots.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::live_support;

use live_support::{copy_dir, without_proxops_env, workspace_root as workspace};

fn proxops(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    cmd.current_dir(workspace()).args(args);
    without_proxops_env(&mut cmd);
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\nstdout: {}\nstderr: {}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

/// A copy of a fixture repository with one file's text replaced.
fn edited(fixture: &str, file: &str, from: &str, to: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&workspace().join(fixture), dir.path());
    let path = dir.path().join(file);
    let before = std::fs::read_to_string(&path).unwrap();
    assert!(before.contains(from), "{file} has no {from:?}");
    std::fs::write(&path, before.replacen(from, to, 1)).unwrap();
    dir
}

fn invalid_cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(workspace().join("fixtures/repos/invalid"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_invalid_repository_reports_json_with_file_line_and_message() {
    let cases = invalid_cases();
    assert!(cases.len() >= 45, "only {} cases", cases.len());
    for case in &cases {
        let name = case.file_name().unwrap().to_str().unwrap();
        let git_path = case.to_str().unwrap();
        let out = proxops(&["--git-path", git_path, "validate", "--output", "json"]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", text(&out.stderr));
        let doc = json_of(&out);
        let diags = doc["diagnostics"].as_array().unwrap();
        let mut errors = 0;
        for d in diags {
            let file = d["file"].as_str().unwrap_or_default();
            assert!(!file.is_empty() && !file.starts_with('/'), "{name}: {d}");
            assert!(
                d["line"].is_null() || d["line"].as_u64().is_some_and(|l| l > 0),
                "{name}: line is 1-based or null: {d}"
            );
            assert!(d["column"].is_null() || d["column"].as_u64().is_some_and(|c| c > 0));
            assert!(d["path"].is_null() || d["path"].is_string(), "{name}: {d}");
            assert!(d["hint"].is_null() || d["hint"].is_string(), "{name}: {d}");
            assert!(
                !d["message"].as_str().unwrap_or_default().trim().is_empty(),
                "{name}: {d}"
            );
            match d["severity"].as_str() {
                Some("error") => errors += 1,
                Some("warning") => {}
                other => panic!("{name}: severity {other:?}"),
            }
        }
        assert!(errors > 0, "{name}: no error in {doc}");
        assert_eq!(doc["errors"], errors, "{name}");
        assert_eq!(doc["warnings"], diags.len() - errors, "{name}");
        // Text and JSON report the same problems.
        let plain = proxops(&["--git-path", git_path, "validate"]);
        let error_lines = text(&plain.stderr)
            .lines()
            .filter(|l| l.starts_with("error: "))
            .count();
        assert_eq!(error_lines, errors, "{name}: text and JSON disagree");
    }
}

#[test]
fn three_mistakes_in_one_file_are_three_diagnostics_in_text_and_json() {
    let case = workspace().join("fixtures/repos/invalid/89-manifest-three-mistakes");
    let case = case.to_str().unwrap();
    let plain = proxops(&["--git-path", case, "validate"]);
    assert_eq!(plain.status.code(), Some(2));
    let stderr = text(&plain.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(lines.len(), 3, "{stderr}");

    let out = proxops(&["--git-path", case, "validate", "-o", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let doc = json_of(&out);
    let diags = doc["diagnostics"].as_array().unwrap();
    let mut found: Vec<(&str, u64, &str)> = diags
        .iter()
        .map(|d| {
            (
                d["path"].as_str().unwrap(),
                d["line"].as_u64().unwrap(),
                d["hint"].as_str().unwrap_or(""),
            )
        })
        .collect();
    found.sort();
    assert_eq!(
        found,
        vec![
            ("spec.cores", 9, "did you mean spec.cpu.cores?"),
            ("spec.disks[1].size", 18, ""),
            ("spec.memory", 8, "did you mean 4096MiB?"),
        ]
    );
    assert!(diags.iter().all(|d| d["file"] == "vm/home/db-01.yaml"));
}

#[test]
fn a_valid_repository_is_an_empty_json_report_and_exit_0() {
    let out = proxops(&[
        "--git-path",
        "fixtures/repos/demo",
        "validate",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = json_of(&out);
    assert_eq!(doc["diagnostics"], serde_json::json!([]));
    assert_eq!(doc["errors"], 0);
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn validate_refuses_markdown_output() {
    let out = proxops(&[
        "--git-path",
        "fixtures/repos/demo",
        "validate",
        "-o",
        "markdown",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).contains("use text or json"));
}

/// Exit code and stderr of a command line that is refused while parsing.
fn refusal(args: &[&str]) -> String {
    let out = proxops(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(out.stdout.is_empty(), "{args:?}");
    text(&out.stderr)
}

#[test]
fn did_you_mean_a_command() {
    insta::assert_snapshot!("plan_is_diff", refusal(&["plan"]));
    insta::assert_snapshot!("valdate", refusal(&["valdate"]));
}

#[test]
fn did_you_mean_a_flag_or_its_value() {
    insta::assert_snapshot!(
        "diff_o_jsn",
        refusal(&["--git-path", "fixtures/repos/demo", "diff", "-o", "jsn"])
    );
    insta::assert_snapshot!("unknown_flag", refusal(&["diff", "--ouptut", "json"]));
    insta::assert_snapshot!(
        "unknown_global_flag",
        refusal(&["--clusters", "home", "diff"])
    );
}

#[test]
fn did_you_mean_a_field_elsewhere_in_the_model() {
    let repo = edited(
        "fixtures/repos/demo",
        "vm/home/web-01.yaml",
        "  cpu:\n    type: x86-64-v2-AES\n    cores: 2\n",
        "  cores: 2\n  cpu:\n    type: x86-64-v2-AES\n",
    );
    let out = proxops(&["--git-path", repo.path().to_str().unwrap(), "validate"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("spec_cores", text(&out.stderr));
}

#[test]
fn did_you_mean_a_kind() {
    let repo = edited(
        "fixtures/repos/demo",
        "vm/home/web-01.yaml",
        "kind: VM\n",
        "kind: Vm\n",
    );
    let out = proxops(&["--git-path", repo.path().to_str().unwrap(), "validate"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("unknown_kind", text(&out.stderr));
}

#[test]
fn a_decimal_disk_size_is_a_warning_in_validate_and_diff() {
    let repo = edited(
        "fixtures/repos/demo",
        "vm/home/db-01.yaml",
        "size: 32GiB",
        "size: 32G",
    );
    let git_path = repo.path().to_str().unwrap();
    let out = proxops(&["--git-path", git_path, "validate"]);
    assert_eq!(out.status.code(), Some(0), "warnings never fail validate");
    assert_eq!(text(&out.stdout), "ok: 2 clusters, 14 objects\n");
    insta::assert_snapshot!("size_32g", text(&out.stderr));

    let replay = workspace().join("fixtures/live/demo");
    let out = proxops(&[
        "--git-path",
        git_path,
        "diff",
        "--replay",
        replay.to_str().unwrap(),
    ]);
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("warning: vm/home/db-01.yaml:14:7: spec.disks[0].size: 32G is 29.80 GiB; PVE's 32G means 32GiB: write 32GiB"),
        "{stderr}"
    );
}

#[test]
fn bare_memory_is_refused_with_its_mib_spelling() {
    let repo = edited(
        "fixtures/repos/demo",
        "vm/home/web-01.yaml",
        "memory: 4GiB",
        "memory: 4096",
    );
    let out = proxops(&["--git-path", repo.path().to_str().unwrap(), "validate"]);
    assert_eq!(out.status.code(), Some(2));
    insta::assert_snapshot!("memory_4096", text(&out.stderr));
}
