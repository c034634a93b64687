//! The README's main command: the demo repository planned against its
//! recordings, in all three renderings (insta snapshots), deterministic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn diff(output: &str, extra: &[&str]) -> (i32, String, String) {
    let root = root();
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(&root)
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .args([
            "--git-path",
            "fixtures/repos/demo",
            "diff",
            "--replay",
            "fixtures/live/demo",
            "--output",
            output,
        ])
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn demo_plan_text() {
    let (code, stdout, stderr) = diff("text", &[]);
    assert_eq!(code, 0, "{stderr}");
    insta::assert_snapshot!("demo_plan_text", stdout);
}

#[test]
fn demo_plan_json() {
    let (code, stdout, stderr) = diff("json", &[]);
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["format"], "proxops-plan/v1");
    insta::assert_snapshot!("demo_plan_json", stdout);
}

#[test]
fn demo_plan_markdown() {
    let (code, stdout, stderr) = diff("markdown", &[]);
    assert_eq!(code, 0, "{stderr}");
    insta::assert_snapshot!("demo_plan_markdown", stdout);
}

#[test]
fn exit_code_flag_reports_changes_with_3() {
    let (code, _, _) = diff("text", &["--exit-code"]);
    assert_eq!(code, 3);
}

#[test]
fn same_inputs_give_the_same_bytes() {
    let a = diff("json", &[]).1;
    let b = diff("json", &[]).1;
    assert_eq!(a, b);
}

#[test]
fn a_cluster_filter_plans_only_that_cluster() {
    let (code, stdout, _) = diff("text", &["--cluster", "edge"]);
    assert_eq!(code, 0);
    assert!(stdout.contains("=== edge ==="));
    assert!(!stdout.contains("=== home ==="));
}

#[test]
fn a_missing_recording_aborts_that_cluster_only() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        root().join("fixtures/live/demo/edge.json"),
        dir.path().join("edge.json"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(root())
        .args(["--git-path", "fixtures/repos/demo", "diff", "--replay"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("=== edge ===\n=== will create"), "{stdout}");
    assert!(stdout.contains("=== home ===\naborted:"), "{stdout}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn files_under(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = format!("{prefix}{}", e.file_name().to_string_lossy());
        if e.file_type().unwrap().is_dir() {
            files_under(&e.path(), &format!("{name}/"), out);
        } else {
            out.push((name, std::fs::read(e.path()).unwrap()));
        }
    }
}

#[test]
fn adopt_from_the_demo_recordings_is_offline_and_byte_stable() {
    let mut trees = Vec::new();
    let mut outputs = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&root().join("fixtures/repos/demo"), dir.path());
        let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
            .current_dir(root())
            .env_remove("PROXOPS_PVE_TOKEN_VALUE")
            .arg("--git-path")
            .arg(dir.path())
            .args([
                "--cluster",
                "home",
                "adopt",
                "--replay",
                "fixtures/live/demo",
            ])
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("wrote vm/home/legacy-app.yaml"), "{stdout}");
        assert!(
            stdout.contains("INCOMPLETE lxc/home/old-tool.yaml"),
            "{stdout}"
        );
        let mut files = Vec::new();
        files_under(dir.path(), "", &mut files);
        trees.push(files);
        outputs.push(stdout);
    }
    assert_eq!(trees[0], trees[1]);
    assert_eq!(outputs[0], outputs[1]);
}
