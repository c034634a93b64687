//! A closed standard output (`| head -1`, `less` quit early) ends a command
//! quietly with exit 0: nothing on stderr, no panic. Real pipes: the binary
//! is spawned, one line read (or none), the pipe closed, the process waited
//! for.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

const REPO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/repos/demo");
const REPLAY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/live/demo");

/// Spawns `proxops args`, reads `lines` lines of its stdout, closes the
/// pipe and waits: (exit code, the lines read, all of stderr).
fn read_then_close(args: &[&str], lines: usize) -> (Option<i32>, Vec<String>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env_remove("RUST_BACKTRACE")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut read = Vec::new();
    for _ in 0..lines {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        read.push(line);
    }
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code(), read, stderr)
}

fn diff() -> [&'static str; 5] {
    ["--git-path", REPO, "diff", "--replay", REPLAY]
}

fn status_json() -> [&'static str; 7] {
    [
        "--git-path",
        REPO,
        "status",
        "--replay",
        REPLAY,
        "--output",
        "json",
    ]
}

#[test]
fn diff_piped_to_head_exits_0_with_nothing_on_stderr() {
    let (code, read, stderr) = read_then_close(&diff(), 1);
    assert_eq!(read, ["=== edge ===\n"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn status_json_piped_to_head_exits_0_with_nothing_on_stderr() {
    let (code, read, stderr) = read_then_close(&status_json(), 1);
    assert_eq!(read, ["{\n"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stderr, "");
}

/// A reader that leaves before the first byte: every write the command makes
/// meets a closed pipe (one line read above may leave the output already
/// written into the pipe's buffer).
#[test]
fn a_pipe_closed_before_anything_is_written_ends_every_printing_command_quietly() {
    let cases: Vec<Vec<&str>> = vec![
        diff().to_vec(),
        status_json().to_vec(),
        vec!["--git-path", REPO, "status", "--replay", REPLAY],
        vec![
            "--git-path",
            REPO,
            "diff",
            "--replay",
            REPLAY,
            "--output",
            "json",
        ],
        vec!["--git-path", REPO, "validate"],
        vec!["--help"],
        vec!["diff", "--help"],
        vec!["--version"],
    ];
    for args in cases {
        let (code, _, stderr) = read_then_close(&args, 0);
        assert_eq!(code, Some(0), "proxops {}: {stderr}", args.join(" "));
        assert_eq!(stderr, "", "proxops {}", args.join(" "));
    }
}

/// A closed pipe ends the printing, not the verdict: `diff --exit-code |
/// head -1` still exits 4 when the demo's plan has anomalies for a person
/// (3 when only changes), as a script with `pipefail` expects.
#[test]
fn a_closed_pipe_keeps_the_exit_code_the_plan_earned() {
    let mut args = diff().to_vec();
    args.push("--exit-code");
    for lines in [0, 1] {
        let (code, _, stderr) = read_then_close(&args, lines);
        assert_eq!(code, Some(4), "{stderr}");
        assert_eq!(stderr, "");
    }
}
