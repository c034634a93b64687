//! `proxops validate` over every broken repository under
//! fixtures/repos/invalid/: each is refused with exit code 2 and one
//! `error: <file>[:<line>:<col>]: [<field>: ]<message>` line per problem
//! on stderr, naming the file, the field and the line an operator must fix.
//! The exact wording of every case is pinned by an insta snapshot.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::live_support;

use std::path::{Path, PathBuf};

use live_support::workspace_root as workspace;
use std::process::{Command, Output};

fn proxops(cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    cmd.current_dir(cwd).args(args);
    live_support::without_proxops_env(&mut cmd);
    cmd.output().unwrap()
}

/// Rules about a whole directory, a missing file or a document that has no
/// fields to point at. For these the diagnostic names the file (or
/// directory) but cannot name a field, and has no line where noted.
const NO_FIELD: &[(&str, &str)] = &[
    (
        "19-comp-cluster-dir-without-resources",
        "the fault is a directory missing its files",
    ),
    (
        "20-comp-configured-cluster-without-resources",
        "the fault is a file that does not exist",
    ),
    (
        "21-comp-dir-not-configured",
        "the fault is a directory no config declares",
    ),
    (
        "28-comp-legacy-flat-layout",
        "the fault is where the file sits, not what it says",
    ),
    (
        "64-manifest-yaml-syntax-error",
        "a file that does not parse has no fields yet; the line is given",
    ),
    (
        "65-manifest-bad-document-among-good",
        "the whole document is the wrong shape (a list); the line is given",
    ),
    (
        "74-manifest-empty-listed-file",
        "the file holds no document, so no field",
    ),
    (
        "87-manifest-nesting-too-deep",
        "the file is refused before it is parsed, so it has no fields yet; the line is given",
    ),
];
const NO_LINE: &[(&str, &str)] = &[
    (
        "19-comp-cluster-dir-without-resources",
        "a directory has no lines",
    ),
    (
        "20-comp-configured-cluster-without-resources",
        "the file does not exist",
    ),
    ("21-comp-dir-not-configured", "a directory has no lines"),
    ("28-comp-legacy-flat-layout", "the whole file is misplaced"),
    (
        "74-manifest-empty-listed-file",
        "the fault is that the file has nothing on any line",
    ),
];

fn excepted(list: &[(&str, &str)], case: &str) -> bool {
    list.iter().any(|(c, _)| *c == case)
}

/// One parsed `error:` line.
#[derive(Debug)]
struct Line<'a> {
    file: &'a str,
    line: Option<usize>,
    field: Option<&'a str>,
    message: &'a str,
}

fn parse_line(text: &str) -> Option<Line<'_>> {
    let rest = text.strip_prefix("error: ")?;
    let (head, tail) = rest.split_once(": ")?;
    let mut parts = head.split(':');
    let file = parts.next()?;
    let line = parts
        .next()
        .map(|l| l.parse::<usize>().ok())
        .unwrap_or(None);
    // A field is one token (no spaces) before the next ": ".
    let (field, message) = match tail.split_once(": ") {
        Some((f, m)) if !f.is_empty() && !f.contains(char::is_whitespace) => (Some(f), m),
        _ => (None, tail),
    };
    Some(Line {
        file,
        line,
        field,
        message,
    })
}

fn cases() -> Vec<PathBuf> {
    let dir = workspace().join("fixtures/repos/invalid");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_invalid_repository_is_refused_with_file_field_and_line() {
    let cases = cases();
    assert!(
        cases.len() >= 45,
        "expected at least 45 invalid repositories, found {}",
        cases.len()
    );
    for (list, what) in [(NO_FIELD, "NO_FIELD"), (NO_LINE, "NO_LINE")] {
        for (c, _) in list {
            assert!(
                cases.iter().any(|p| p.ends_with(c)),
                "{what} names {c}, which is not a case"
            );
        }
    }
    for case in &cases {
        let name = case.file_name().unwrap().to_str().unwrap();
        let description = std::fs::read_to_string(case.join("CASE.md")).unwrap_or_default();
        assert_eq!(
            description.trim().lines().count(),
            1,
            "{name}: CASE.md must be one line saying which rule breaks"
        );

        let out = proxops(
            &workspace(),
            &["--git-path", case.to_str().unwrap(), "validate"],
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name}: exit code\nstdout: {stdout}\nstderr: {stderr}"
        );
        assert!(
            stdout.is_empty(),
            "{name}: nothing on stdout when refused, got {stdout:?}"
        );
        assert!(!stderr.trim().is_empty(), "{name}: stderr must say why");

        assert!(
            stderr.lines().any(|l| l.starts_with("error: ")),
            "{name}: at least one error line: {stderr}"
        );
        for text in stderr.lines() {
            // A case whose broken listing leaves a manifest unlisted also
            // warns about that file; it must exist too.
            if let Some(file) = text
                .strip_prefix("warning: ")
                .and_then(|w| w.split_once(": "))
                .map(|(f, _)| f)
            {
                assert!(
                    case.join(file).is_file(),
                    "{name}: a warning names a file of the repository: {text:?}"
                );
                continue;
            }
            let line = parse_line(text)
                .unwrap_or_else(|| panic!("{name}: not an `error: <file>: …` line: {text:?}"));
            assert!(
                !line.file.is_empty() && !line.file.starts_with('/'),
                "{name}: a repo-relative file: {text:?}"
            );
            let named = case.join(line.file);
            assert!(
                named.exists() || named.parent().is_some_and(Path::exists),
                "{name}: the file named must be in the repository (or, when missing, its directory): {text:?}"
            );
            assert!(
                !line.message.trim().is_empty(),
                "{name}: empty message: {text:?}"
            );
            if !excepted(NO_FIELD, name) {
                assert!(
                    line.field.is_some(),
                    "{name}: the diagnostic must name a field: {text:?}"
                );
            }
            if !excepted(NO_LINE, name) {
                assert!(
                    line.line.is_some_and(|l| l > 0),
                    "{name}: the diagnostic must give a line: {text:?}"
                );
            }
        }
        insta::with_settings!({ description => description.trim(), omit_expression => true }, {
            insta::assert_snapshot!(name, stderr);
        });
    }
}

#[test]
fn the_demo_repository_validates() {
    let out = proxops(
        &workspace(),
        &["--git-path", "fixtures/repos/demo", "validate"],
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "ok: 2 clusters, 14 objects\n"
    );
    assert!(stderr.is_empty(), "{stderr}");
}

#[test]
fn without_a_repository_validate_says_so_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let ancestors_have_git = dir.path().ancestors().any(|d| d.join(".git").exists());
    if ancestors_have_git {
        eprintln!("skipped: the temporary directory sits inside a git work tree");
        return;
    }
    let out = proxops(dir.path(), &["validate"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains("no ProxOps GitOps repository found"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn the_line_parser_splits_file_line_field_and_message() {
    let l = parse_line("error: vm/home/a.yaml:3:5: spec.memory: memory is 5 bytes").unwrap();
    assert_eq!(
        (l.file, l.line, l.field, l.message),
        (
            "vm/home/a.yaml",
            Some(3),
            Some("spec.memory"),
            "memory is 5 bytes"
        )
    );
    let l =
        parse_line("error: clusters/lab/: cluster directory clusters/lab/ has no resources.yaml")
            .unwrap();
    assert_eq!((l.file, l.line, l.field), ("clusters/lab/", None, None));
}
