//! Every flag means what it says: a command refuses the flags of the other
//! commands (exit 2, naming the flags it takes), and `proxops` without a
//! command is a usage error. No PVE, no repository: these end at parsing.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Output};

/// The command-specific flags, with a value for those that take one.
const FLAGS: &[(&str, Option<&str>)] = &[
    ("--replay", Some("rec")),
    ("--output", Some("json")),
    ("-o", Some("json")),
    ("--exit-code", None),
    ("--diff", None),
    ("--dry-run", None),
    ("-n", None),
    ("--yes", None),
    ("-y", None),
    ("--plan", Some("plan.json")),
    ("--out", Some("out")),
    ("--adopt-secrets", None),
];

/// Each command, how it is invoked, and the flags it takes as its refusal
/// names them.
const COMMANDS: &[(&str, &[&str], &[&str])] = &[
    ("validate", &["validate"], &["-o/--output FORMAT"]),
    (
        "diff",
        &["diff"],
        &[
            "--replay DIR",
            "--output FORMAT",
            "--exit-code",
            "--diff",
            "--out PATH",
        ],
    ),
    (
        "apply",
        &["apply"],
        &[
            "--replay DIR",
            "--output FORMAT",
            "--diff",
            "-n/--dry-run",
            "-y/--yes",
            "--plan FILE",
        ],
    ),
    ("status", &["status"], &["--replay DIR", "--output FORMAT"]),
    ("run", &["run"], &["-n/--dry-run"]),
    ("adopt", &["adopt"], &["--replay DIR", "--adopt-secrets"]),
    ("record", &["record"], &["--out PATH"]),
    ("secrets check", &["secrets", "check", "file.yaml"], &[]),
];

fn proxops(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(dir.path())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .args(args)
        .output()
        .unwrap()
}

/// `-n` stands for `--dry-run`, `-y` for `--yes`, `-o` for `--output`.
fn long(flag: &str) -> &str {
    match flag {
        "-n" => "--dry-run",
        "-y" => "--yes",
        "-o" => "--output",
        f => f,
    }
}

fn takes(own: &[&str], flag: &str) -> bool {
    let flag = long(flag);
    own.iter()
        .any(|f| f.split([' ', '/']).any(|part| part == flag))
}

#[test]
fn every_command_refuses_every_flag_of_another_command_naming_its_own() {
    let mut failures = Vec::new();
    let mut refused = 0;
    for (name, invocation, own) in COMMANDS {
        for (flag, value) in FLAGS {
            if takes(own, flag) {
                continue;
            }
            // After the command and before it: a flag's place does not matter.
            for before in [false, true] {
                let mut args: Vec<&str> = Vec::new();
                let mut given = vec![*flag];
                given.extend(value.iter());
                if before {
                    args.extend(&given);
                    args.extend(invocation.iter());
                } else {
                    args.extend(invocation.iter());
                    args.extend(&given);
                }
                let out = proxops(&args);
                let stderr = String::from_utf8_lossy(&out.stderr);
                let names_own = if own.is_empty() {
                    stderr.contains(&format!("{name} takes no flags of its own"))
                } else {
                    own.iter().all(|f| stderr.contains(f))
                };
                let ok = out.status.code() == Some(2)
                    && out.stdout.is_empty()
                    && stderr.contains(&format!("{name} does not take {}", long(flag)))
                    && names_own;
                if !ok {
                    failures.push(format!(
                        "proxops {}: exit {:?}\n{stderr}",
                        args.join(" "),
                        out.status.code()
                    ));
                }
                refused += 1;
            }
        }
    }
    assert!(refused > 100, "only {refused} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn an_unknown_flag_is_refused_naming_the_flags_the_command_takes() {
    let out = proxops(&["status", "--bogus"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown flag \"--bogus\" for status")
            && stderr.contains("status takes --replay DIR, -o/--output FORMAT"),
        "{stderr}"
    );
}

#[test]
fn a_value_flag_given_twice_is_refused() {
    let out = proxops(&["diff", "--output", "json", "--output", "text"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--output is given more than once"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_diff_flag_is_accepted_with_every_output_and_changes_nothing() {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/repos/demo");
    let replay = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/live/demo");
    for output in ["text", "json", "markdown"] {
        let plain = proxops(&[
            "--git-path",
            repo,
            "diff",
            "--replay",
            replay,
            "--output",
            output,
        ]);
        let flagged = proxops(&[
            "--git-path",
            repo,
            "diff",
            "--replay",
            replay,
            "--output",
            output,
            "--diff",
        ]);
        assert_eq!(plain.status.code(), Some(0), "{output}");
        assert_eq!(flagged.status.code(), Some(0), "{output}");
        assert_eq!(plain.stdout, flagged.stdout, "{output}");
    }
}

#[test]
fn the_text_plan_shows_each_actions_field_changes() {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/repos/demo");
    let replay = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/live/demo");
    let plain = proxops(&["--git-path", repo, "diff", "--replay", replay]);
    assert_eq!(plain.status.code(), Some(0));
    let plain = String::from_utf8(plain.stdout).unwrap();
    assert!(plain.contains("      + memory (spec.memory)"), "{plain}");
}

#[test]
fn no_command_prints_usage_on_stderr_and_exits_2() {
    for args in [&[][..], &["--git-path", "."][..]] {
        let out = proxops(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("Usage: proxops [GLOBAL FLAGS] <COMMAND> [FLAGS]"),
            "{stderr}"
        );
        assert!(stderr.contains("error: no command given"), "{stderr}");
    }
    // Asked for, the help is output: stdout, exit 0.
    let help = proxops(&["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: proxops"));
}
