//! The documentation's runnable examples, run.
//!
//! Every fenced ```console block in `docs/**/*.md` and `README.md` is a
//! transcript: a line starting with `$ ` is a command, the lines after it
//! (up to the next `$ ` line or the end of the block) are its expected
//! output, stdout and stderr together. A line holding only `...` matches any
//! number of lines (none included); a line ending in `...` matches any line
//! starting with what precedes it (for a generated key). Each command must exit 0; an example
//! that shows a failure does so explicitly (`... || echo "exit $?"`).
//!
//! Each document runs in a fresh temporary copy of the repository tree
//! (`fixtures/`, `docs/`, `README.md`): its blocks in order, their commands
//! one after another with `sh -c` in that directory, so a walk-through may
//! build on its earlier commands (a key, then a file encrypted to it). The
//! first failing command of a document ends that document's run. `proxops` on `PATH` is the
//! binary this test was built with; `.tools/bin` (sops, age-keygen, put there
//! by tools/test.sh) is on `PATH` too. README's main command is written
//! `cargo run --release -p proxops -- …` for a reader who has not built yet;
//! the harness rewrites that prefix to the built `proxops`, which runs the
//! same code without a nested cargo build.
//!
//! Blocks written ```sh (they need a PVE, a token or a build) are not run.
//! This file also keeps the `--help` texts and docs/cli.md in step.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

const CARGO_RUN: &str = "cargo run --release -p proxops --";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// One `$ ` command of a console block, with its expected output.
#[derive(Debug)]
struct Step {
    doc: String,
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// A console block: its steps in order.
#[derive(Debug)]
struct Block {
    steps: Vec<Step>,
}

fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let root = repo_root();
    let mut out = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut out);
    out.sort();
    out
}

fn console_blocks(path: &Path) -> Vec<Block> {
    let root = repo_root();
    let doc = path
        .strip_prefix(&root)
        .unwrap_or(path)
        .display()
        .to_string();
    let text = std::fs::read_to_string(path).unwrap();
    let mut blocks = Vec::new();
    // The open block and the indentation of its fence (a block may sit in a
    // list item; its lines carry the same indentation).
    let mut current: Option<(Block, usize)> = None;
    for (i, raw) in text.lines().enumerate() {
        let indent = raw.len() - raw.trim_start().len();
        match &mut current {
            None => {
                if raw.trim() == "```console" {
                    current = Some((Block { steps: Vec::new() }, indent));
                }
            }
            Some((block, fence_indent)) => {
                let strip = indent.min(*fence_indent);
                let line = raw[strip..].trim_end();
                if raw.trim() == "```" {
                    blocks.push(current.take().unwrap().0);
                } else if let Some(cmd) = line.strip_prefix("$ ") {
                    block.steps.push(Step {
                        doc: doc.clone(),
                        line: i + 1,
                        command: cmd.to_owned(),
                        expected: Vec::new(),
                    });
                } else if let Some(step) = block.steps.last_mut() {
                    step.expected.push(line.to_owned());
                } else {
                    panic!(
                        "{doc}:{}: a console block must start with a `$ ` command line, found {line:?}",
                        i + 1
                    );
                }
            }
        }
    }
    assert!(current.is_none(), "{doc}: unterminated console block");
    blocks
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let src = e.path();
        let dst = to.join(e.file_name());
        if src.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A fresh copy of the parts of the repository the examples use.
fn fresh_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root();
    copy_tree(&root.join("fixtures"), &dir.path().join("fixtures"));
    copy_tree(&root.join("docs"), &dir.path().join("docs"));
    std::fs::copy(root.join("README.md"), dir.path().join("README.md")).unwrap();
    dir
}

fn search_path() -> OsString {
    let bin = Path::new(env!("CARGO_BIN_EXE_proxops")).parent().unwrap();
    let tools = repo_root().join(".tools/bin");
    let mut parts = vec![bin.to_path_buf(), tools];
    if let Some(p) = std::env::var_os("PATH") {
        parts.extend(std::env::split_paths(&p));
    }
    std::env::join_paths(parts).unwrap()
}

/// Runs one command line in `dir` and returns its merged output.
fn run_step(dir: &Path, step: &Step) -> String {
    // README's main command is written for a reader without a build; the
    // built binary runs the same code.
    let command = step.command.replace(CARGO_RUN, "proxops");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{{ {command}\n}} 2>&1"))
        .current_dir(dir)
        .env("PATH", search_path())
        // No identity or credential of the machine running the tests.
        .env("HOME", dir)
        // Byte order for `ls` and `sort`, whatever the machine's locale.
        .env("LC_ALL", "C")
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env_remove("SOPS_AGE_KEY")
        .env_remove("SOPS_AGE_KEY_FILE")
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env_remove("PROXOPS_PVE_TOKEN_VALUE")
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_USER")
        .env_remove("PROXOPS_PVE_PASSWORD")
        .env_remove("PROXOPS_GIT_TOKEN")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}:{}: `{}` exited with {}; output:\n{text}",
        step.doc,
        step.line,
        step.command,
        out.status
    );
    text
}

/// One line: exact, or a prefix when the expected line ends in `...`.
fn line_matches(expected: &str, actual: &str) -> bool {
    let actual = actual.trim_end();
    match expected.strip_suffix("...") {
        Some(prefix) => actual.starts_with(prefix),
        None => actual == expected,
    }
}

/// `expected` against `actual`, `...` matching any run of lines.
fn lines_match(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e == "..." => {
            (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..]))
        }
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, arest)| line_matches(e, a) && lines_match(rest, arest)),
    }
}

fn check_step(dir: &Path, step: &Step) -> Result<(), String> {
    let output = run_step(dir, step);
    let mut actual: Vec<&str> = output.lines().collect();
    while actual.last().is_some_and(|l| l.trim().is_empty()) {
        actual.pop();
    }
    let mut expected = step.expected.clone();
    while expected.last().is_some_and(|l| l.trim().is_empty()) {
        expected.pop();
    }
    if lines_match(&expected, &actual) {
        Ok(())
    } else {
        Err(format!(
            "{}:{}: `{}` printed something else.\n--- expected\n{}\n--- actual\n{}\n",
            step.doc,
            step.line,
            step.command,
            expected.join("\n"),
            actual.join("\n")
        ))
    }
}

#[test]
fn every_console_example_in_the_docs_prints_what_the_docs_say() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for doc in markdown_files() {
        let dir = fresh_tree();
        let steps = console_blocks(&doc).into_iter().flat_map(|b| b.steps);
        for step in steps {
            ran += 1;
            if let Err(e) = check_step(dir.path(), &step) {
                failures.push(e);
                break;
            }
        }
    }
    assert!(ran > 0, "no console example found");
    assert!(
        failures.is_empty(),
        "{} of the documented examples failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn getting_started_reaches_the_first_offline_diff() {
    let doc = repo_root().join("docs/getting-started.md");
    let steps: Vec<Step> = console_blocks(&doc)
        .into_iter()
        .flat_map(|b| b.steps)
        .collect();
    let diff_at = steps
        .iter()
        .position(|s| s.command.contains(" diff ") && s.command.contains("--replay"))
        .expect("docs/getting-started.md shows an offline diff");
    // One working copy for the whole walk-through, as a reader has.
    let dir = fresh_tree();
    for step in &steps[..diff_at] {
        check_step(dir.path(), step).unwrap_or_else(|e| panic!("{e}"));
    }
    let diff = &steps[diff_at];
    check_step(dir.path(), diff).unwrap_or_else(|e| panic!("{e}"));
    let output = run_step(dir.path(), diff);
    assert!(output.contains("=== home ==="), "{output}");
    assert!(output.contains("=== edge ==="), "{output}");
    assert!(
        output.contains("[stop-start]"),
        "the first diff shows an impact: {output}"
    );
}

const COMMANDS: &[&str] = &[
    "init",
    "validate",
    "diff",
    "apply",
    "status",
    "run",
    "adopt",
    "record",
    "secrets check",
    "schema",
    "explain",
    "show",
];

fn help_of(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "proxops {} --help exited with {}",
        args.join(" "),
        out.status
    );
    String::from_utf8(out.stdout).unwrap()
}

fn long_flags(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i + 2 < bytes.len() {
        let starts = bytes[i] == b'-'
            && bytes[i + 1] == b'-'
            && bytes[i + 2].is_ascii_lowercase()
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'-'));
        if starts {
            let end = text[i + 2..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .map_or(text.len(), |n| i + 2 + n);
            out.push(text[i..end].to_owned());
            i = end;
        } else {
            i += 1;
        }
    }
    out.extend(short_flags(text));
    out.sort();
    out.dedup();
    out
}

/// `-n`, `-h`, `-V`: a dash and one letter, standing alone.
fn short_flags(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    for i in 0..chars.len().saturating_sub(1) {
        let before_ok = i == 0 || matches!(chars[i - 1], ' ' | '[' | '|' | ',' | '\n');
        let after_ok = chars
            .get(i + 2)
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == '-'));
        if chars[i] == '-' && chars[i + 1].is_ascii_alphabetic() && before_ok && after_ok {
            out.push(format!("-{}", chars[i + 1]));
        }
    }
    out
}

/// `flag` occurs in `text` as a whole flag (not as the start of a longer one).
fn names_flag(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        text[i + flag.len()..]
            .chars()
            .next()
            .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
    })
}

#[test]
fn every_help_exits_0_and_every_flag_it_names_is_in_cli_md() {
    let cli = std::fs::read_to_string(repo_root().join("docs/cli.md")).unwrap();
    let mut missing = Vec::new();
    let mut helps = vec![(String::new(), help_of(&[]))];
    for c in COMMANDS {
        let args: Vec<&str> = c.split(' ').collect();
        helps.push(((*c).to_owned(), help_of(&args)));
    }
    for (cmd, help) in &helps {
        for flag in long_flags(help) {
            if !names_flag(&cli, &flag) {
                missing.push(format!("proxops {cmd} --help names {flag}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/cli.md does not mention:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_console_parser_reads_commands_output_and_ellipsis() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("x.md");
    std::fs::write(
        &md,
        "text\n```console\n$ echo a\na\n...\n$ true\n```\n```sh\n$ not run\n```\n- item\n\n  ```console\n  $ echo b\n    b\n  ```\n",
    )
    .unwrap();
    let blocks = console_blocks(&md);
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].steps.len(), 2);
    assert_eq!(blocks[1].steps[0].command, "echo b");
    assert_eq!(blocks[1].steps[0].expected, vec!["  b"]);
    assert_eq!(blocks[0].steps[0].line, 3);
    assert_eq!(blocks[0].steps[0].expected, vec!["a", "..."]);
    assert!(lines_match(
        &["a".into(), "...".into(), "z".into()],
        &["a", "b", "c", "z"]
    ));
    assert!(lines_match(&["a".into(), "...".into()], &["a"]));
    assert!(lines_match(&["key: ...".into()], &["key: age1xyz"]));
    assert!(!lines_match(&["key: ...".into()], &["other"]));
    assert!(!lines_match(&["a".into()], &["a", "b"]));
    assert_eq!(
        long_flags("  -n, --dry-run  x [-V|--out] a-b"),
        vec!["--dry-run", "--out", "-V", "-n"]
    );
}
