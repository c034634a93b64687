//! The README's main command: the demo repository planned against its
//! recordings, in all three renderings (insta snapshots), deterministic.
//! Its colour: on a terminal (a pseudo-terminal made by python3's `pty`
//! module) the text plan is coloured, through a pipe it is not, `NO_COLOR`
//! turns it off on a terminal, and `--color always` / `never` override
//! both. Colour changes no word of the plan.

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
    // What a reviewer reads, whatever the snapshot holds: the field that
    // changes with its manifest path, and that it forces the stop.
    assert!(
        stdout.contains("~ memory (spec.memory)                2GiB → 4GiB  ← stop-start"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("      + memory (spec.memory) ") && l.ends_with("  8GiB")),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "home: 4 to create, 1 to update, 1 power change, 3 to prune, 1 prune deferred, 2 need a person\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("=== needs a person (1) ==="), "{stdout}");
    assert!(
        stdout.ends_with(
            "\nPlan: 6 to create, 1 to update, 1 power change, 3 to prune, 1 prune deferred, 3 need a person (2 clusters)\n"
        ),
        "{stdout}"
    );
    // Volumes read as the manifest asks for them, not as PVE's API takes them.
    assert!(
        stdout.contains("100GiB on local-lvm, iothread=1, discard=on"),
        "{stdout}"
    );
    assert!(!stdout.contains("local-lvm:0,import-from"), "{stdout}");
    insta::assert_snapshot!("demo_plan_text", stdout);
}

#[test]
fn verbose_shows_pves_form_beside_the_manifests() {
    let (code, stdout, stderr) = diff("text", &["--verbose"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("~ memory (spec.memory)                2GiB (PVE: 2048) → 4GiB (PVE: 4096)  ← stop-start"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "imported from local:import/debian-13-genericcloud-amd64.qcow2 onto local-lvm, discard=on (PVE: local-lvm:0,import-from=local:import/debian-13-genericcloud-amd64.qcow2,discard=on)"
        ),
        "{stdout}"
    );
    // The JSON plan is PVE's form whatever the flag.
    let (_, json, _) = diff("json", &[]);
    assert!(json.contains("\"local-lvm:0,import-from="), "{json}");
}

#[test]
fn apply_dry_run_prints_what_diff_prints_and_diff_is_a_no_op() {
    let (code, plan, _) = diff("text", &[]);
    for extra in [&["--diff"][..], &[]] {
        let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
            .current_dir(root())
            .env_remove("PROXOPS_GIT_PATH")
            .env_remove("PROXOPS_CONFIG")
            .args(["--git-path", "fixtures/repos/demo", "apply", "-n"])
            .args(["--replay", "fixtures/live/demo"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{extra:?}");
        assert_eq!(String::from_utf8(out.stdout).unwrap(), plan, "{extra:?}");
    }
    for output in ["text", "json", "markdown"] {
        assert_eq!(diff(output, &["--diff"]).1, diff(output, &[]).1, "{output}");
    }
}

#[test]
fn an_aborted_cluster_shows_its_problems_in_the_markdown() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&root().join("fixtures/repos/demo"), dir.path());
    let web = dir.path().join("vm/home/web-01.yaml");
    let text = std::fs::read_to_string(&web).unwrap();
    assert!(text.contains("memory:"), "{text}");
    let broken: String = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("memory:") {
                "  memory: lots".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&web, broken).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(root())
        .arg("--git-path")
        .arg(dir.path())
        .args([
            "diff",
            "--replay",
            "fixtures/live/demo",
            "--output",
            "markdown",
        ])
        .output()
        .unwrap();
    let md = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2), "{md}");
    let home = &md[md.find("### home").unwrap()..];
    assert!(home.contains("⛔ **ABORTED**"), "{md}");
    // File and line, field, and the message `validate` prints.
    let row = home
        .lines()
        .find(|l| l.starts_with("| vm/home/web-01.yaml:"))
        .unwrap_or_else(|| panic!("no problem row for web-01.yaml: {md}"));
    let place = row.split(' ').nth(1).unwrap();
    let line = place.split(':').nth(1).unwrap();
    assert!(line.parse::<u32>().is_ok(), "{row}");
    assert!(
        row.contains("| spec.memory | invalid quantity \"lots\""),
        "{row}"
    );
    // The other cluster is still planned.
    assert!(md.contains("### edge"), "{md}");
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

/// The demo plans changes and has anomalies for a person: `--exit-code`
/// says the second (4), which CI tells apart from changes alone (3).
#[test]
fn exit_code_flag_reports_work_for_a_person_with_4() {
    let (code, _, _) = diff("text", &["--exit-code"]);
    assert_eq!(code, 4);
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

/// Runs its arguments with standard output on a new pseudo-terminal and
/// copies what they wrote to its own standard output; exits as they did.
const PTY_RUNNER: &str = r#"
import os, pty, subprocess, sys
master, slave = pty.openpty()
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.DEVNULL)
os.close(slave)
out = b""
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
code = child.wait()
sys.stdout.buffer.write(out)
sys.exit(code)
"#;

const DEMO_DIFF: [&str; 5] = [
    "--git-path",
    "fixtures/repos/demo",
    "diff",
    "--replay",
    "fixtures/live/demo",
];

/// The demo plan's standard output, through a terminal or a pipe, with
/// `NO_COLOR` set to `no_color` (or unset) and `extra` flags.
fn demo(terminal: bool, no_color: Option<&str>, extra: &[&str]) -> String {
    let bin = env!("CARGO_BIN_EXE_proxops");
    let mut cmd = if terminal {
        let mut c = Command::new("python3");
        c.args(["-c", PTY_RUNNER, bin]);
        c
    } else {
        Command::new(bin)
    };
    cmd.current_dir(root())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env_remove("NO_COLOR")
        .args(extra)
        .args(DEMO_DIFF);
    if let Some(v) = no_color {
        cmd.env("NO_COLOR", v);
    }
    let out = cmd.output().expect("proxops (under python3's pty) runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A terminal ends lines with CR LF.
    String::from_utf8(out.stdout).unwrap().replace("\r\n", "\n")
}

/// The text without its SGR escapes.
fn strip(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("\x1b[") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        let end = tail.find('m').expect("an SGR escape ends in m");
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    out
}

const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const RED: &str = "\x1b[31m";
const MAGENTA: &str = "\x1b[35m";

#[test]
fn a_terminal_gets_colour_by_kind_of_item() {
    let shown = demo(true, None, &[]);
    assert!(shown.contains(&format!("{GREEN}create")), "{shown:?}");
    assert!(shown.contains(&format!("{YELLOW}update")), "{shown:?}");
    assert!(shown.contains(&format!("{RED}prune")), "{shown:?}");
    assert!(shown.contains(&format!("{MAGENTA}data_loss")), "{shown:?}");
    // The words are those of the plain plan.
    assert_eq!(strip(&shown), demo(false, None, &[]));
}

#[test]
fn a_pipe_gets_no_colour() {
    let piped = demo(false, None, &[]);
    assert!(!piped.contains('\x1b'), "{piped:?}");
    assert!(piped.contains("=== will update (1) ==="), "{piped}");
}

#[test]
fn no_color_turns_colour_off_on_a_terminal() {
    let shown = demo(true, Some("1"), &[]);
    assert!(!shown.contains('\x1b'), "{shown:?}");
    assert!(shown.contains("=== will update (1) ==="), "{shown}");
    // An empty NO_COLOR is not set (no-color.org).
    assert!(demo(true, Some(""), &[]).contains(GREEN));
}

#[test]
fn color_always_colours_a_pipe_and_never_a_terminal_plain() {
    let piped = demo(false, None, &["--color", "always"]);
    assert!(piped.contains(GREEN) && piped.contains(RED), "{piped:?}");
    assert!(demo(false, Some("1"), &["--color", "always"]).contains(GREEN));
    let shown = demo(true, None, &["--color", "never"]);
    assert!(!shown.contains('\x1b'), "{shown:?}");
}

#[test]
fn a_wrong_color_value_is_invalid_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(root())
        .args(["--color", "rainbow"])
        .args(DEMO_DIFF)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid --color \"rainbow\""), "{stderr}");
    assert!(out.stdout.is_empty());
}
