//! `proxops man` and `proxops completions`, checked by the programs that
//! read them: `mandoc -T lint` (Debian package mandoc, installed by
//! tools/install-test-tools.sh) must have nothing to say about the man page,
//! `bash -n` must accept the bash script, and bash itself must complete what
//! `--help` lists. zsh and fish check their scripts only where installed;
//! otherwise those tests say so and pass.
//!
//! The flags are taken from `--help`, which is made from the same tables as
//! the man page and the scripts: a flag added there is checked here too.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn proxops(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "proxops {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A program on PATH or in $PROXOPS_TOOLS_DIR/bin.
fn find(program: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PROXOPS_TOOLS_DIR")
        .map(|d| vec![PathBuf::from(d).join("bin")])
        .unwrap_or_default();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter()
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A program the test cannot do without.
fn need(program: &str, package: &str) -> PathBuf {
    find(program).unwrap_or_else(|| {
        panic!("{program} not found: install the Debian package {package} (tools/install-test-tools.sh does)")
    })
}

fn run_with_stdin(program: &PathBuf, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn said(out: &Output) -> String {
    let mut s = String::from_utf8_lossy(&out.stdout).into_owned();
    s.push_str(&String::from_utf8_lossy(&out.stderr));
    s
}

/// The commands as `proxops --help` lists them (`secrets check` as typed).
fn commands() -> Vec<String> {
    let help = proxops(&["--help"]);
    let list = help
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .next()
        .unwrap();
    list.lines()
        .map(|l| {
            let l = l.trim_start();
            let end = l.find("   ").unwrap_or(l.len());
            l[..end].to_owned()
        })
        .collect()
}

/// Every `-x`/`--long` flag in a flag list of a help text: the words at the
/// start of its indented lines.
fn flags_in(help: &str, heading: &str) -> Vec<String> {
    let Some(list) = help.split(heading).nth(1) else {
        return Vec::new();
    };
    let list = list.split("\n\n").next().unwrap();
    let mut flags = Vec::new();
    for line in list.lines().filter(|l| l.starts_with("  -")) {
        for word in line.trim_start().split([',', ' ']) {
            if word.starts_with('-') {
                flags.push(word.to_owned());
            } else if !word.is_empty() {
                break;
            }
        }
    }
    flags
}

fn global_flags() -> Vec<String> {
    flags_in(&proxops(&["--help"]), "Global flags:\n")
}

fn command_flags(command: &str) -> Vec<String> {
    let mut args: Vec<&str> = command.split(' ').collect();
    args.push("--help");
    flags_in(&proxops(&args), "Flags:\n")
}

#[test]
fn help_lists_commands_and_flags() {
    // The parsing above must find something, or the tests below check nothing.
    let commands = commands();
    assert!(commands.contains(&"diff".to_owned()), "{commands:?}");
    assert!(
        commands.contains(&"secrets check".to_owned()),
        "{commands:?}"
    );
    assert!(global_flags().contains(&"--log-format".to_owned()));
    let diff = command_flags("diff");
    assert!(diff.contains(&"--output".to_owned()), "{diff:?}");
    assert!(command_flags("apply").contains(&"-y".to_owned()));
}

#[test]
fn the_man_page_has_no_warning_from_mandoc_lint() {
    let mandoc = need("mandoc", "mandoc");
    let page = proxops(&["man"]);
    let out = run_with_stdin(&mandoc, &["-T", "lint", "-W", "all"], &page);
    let said = said(&out);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "mandoc -T lint:\n{said}"
    );
    // The control: lint does report a broken page.
    let broken = page.replacen(".SH NAME", ".SH NAME\n.XX", 1);
    let out = run_with_stdin(&mandoc, &["-T", "lint", "-W", "all"], &broken);
    assert!(said_anything(&out), "mandoc -T lint noticed nothing");
}

fn said_anything(out: &Output) -> bool {
    !said(out).trim().is_empty()
}

#[test]
fn the_man_page_renders_every_command_and_flag() {
    let mandoc = need("mandoc", "mandoc");
    let out = run_with_stdin(
        &mandoc,
        &["-T", "ascii", "-O", "width=200"],
        &proxops(&["man"]),
    );
    assert!(out.status.success());
    // Plain text: drop the overstrike bold and underline.
    let raw = String::from_utf8(out.stdout).unwrap();
    let mut text = String::new();
    for c in raw.chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    let mut missing = Vec::new();
    for c in commands() {
        if !text.contains(&format!("proxops [GLOBAL FLAGS] {c}")) {
            missing.push(c.clone());
        }
        missing.extend(
            command_flags(&c)
                .into_iter()
                .filter(|f| !text.contains(f.as_str())),
        );
    }
    missing.extend(
        global_flags()
            .into_iter()
            .filter(|f| !text.contains(f.as_str())),
    );
    assert!(
        missing.is_empty(),
        "the man page lacks {missing:?}:\n{text}"
    );
}

#[test]
fn the_bash_completion_passes_bash_n() {
    let bash = need("bash", "bash");
    let script = proxops(&["completions", "bash"]);
    let out = run_with_stdin(&bash, &["-n"], &script);
    assert!(out.status.success(), "bash -n:\n{}", said(&out));
    // The control: bash -n does refuse a broken script.
    let out = run_with_stdin(&bash, &["-n"], &script.replacen("esac", "", 1));
    assert!(!out.status.success(), "bash -n accepted a broken script");
}

/// What bash completes for `line` (the word being completed last, possibly
/// empty), one candidate a line, sorted.
fn bash_completes(script: &str, words: &[&str]) -> Vec<String> {
    let bash = need("bash", "bash");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "{script}\nCOMP_WORDS=({})\nCOMP_CWORD={}\n_proxops\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        quoted.join(" "),
        words.len() - 1
    );
    let out = run_with_stdin(&bash, &["--norc", "--noprofile", "-s"], &program);
    assert!(out.status.success(), "{}", said(&out));
    let mut got: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    got.sort();
    got
}

#[test]
fn bash_completes_commands_their_flags_and_fixed_values() {
    let script = proxops(&["completions", "bash"]);
    let first_words: Vec<String> = commands()
        .iter()
        .map(|c| c.split(' ').next().unwrap().to_owned())
        .collect();
    let got = bash_completes(&script, &["proxops", ""]);
    for w in &first_words {
        assert!(got.contains(w), "`proxops <TAB>` lacks {w}: {got:?}");
    }
    let globals = global_flags();
    for c in commands() {
        let mut words: Vec<&str> = vec!["proxops", "--cluster", "home"];
        words.extend(c.split(' '));
        words.push("-");
        let got = bash_completes(&script, &words);
        for f in command_flags(&c).iter().chain(&globals) {
            assert!(got.contains(f), "`proxops {c} -<TAB>` lacks {f}: {got:?}");
        }
        // No flag of another command.
        for other in commands().iter().filter(|o| **o != c) {
            for f in command_flags(other) {
                if !command_flags(&c).contains(&f) {
                    assert!(
                        !got.contains(&f),
                        "`proxops {c} -<TAB>` offers {f} of {other}"
                    );
                }
            }
        }
    }
    assert_eq!(
        bash_completes(&script, &["proxops", "diff", "--output", ""]),
        ["json", "markdown", "text"]
    );
    assert_eq!(
        bash_completes(&script, &["proxops", "--log-format", "j"]),
        ["json"]
    );
    assert_eq!(
        bash_completes(&script, &["proxops", "completions", ""]),
        ["bash", "fish", "zsh"]
    );
    assert_eq!(
        bash_completes(&script, &["proxops", "secrets", ""]),
        ["check"]
    );
}

#[test]
fn bash_completes_paths_for_path_flags() {
    let script = proxops(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("recordings")).unwrap();
    std::fs::write(dir.path().join("plan.json"), "{}").unwrap();
    let base = dir.path().to_str().unwrap();
    let dirs = bash_completes(
        &script,
        &["proxops", "diff", "--replay", &format!("{base}/")],
    );
    assert_eq!(dirs, [format!("{base}/recordings")]);
    let files = bash_completes(
        &script,
        &["proxops", "apply", "--plan", &format!("{base}/p")],
    );
    assert_eq!(files, [format!("{base}/plan.json")]);
    let sops = bash_completes(
        &script,
        &["proxops", "secrets", "check", &format!("{base}/p")],
    );
    assert_eq!(sops, [format!("{base}/plan.json")]);
}

#[test]
fn the_zsh_completion_passes_zsh_n_where_zsh_is_installed() {
    let Some(zsh) = find("zsh") else {
        println!("skipped: zsh is not installed");
        return;
    };
    let out = run_with_stdin(&zsh, &["-n"], &proxops(&["completions", "zsh"]));
    assert!(out.status.success(), "zsh -n:\n{}", said(&out));
}

#[test]
fn the_fish_completion_passes_fish_no_execute_where_fish_is_installed() {
    let Some(fish) = find("fish") else {
        println!("skipped: fish is not installed");
        return;
    };
    let out = run_with_stdin(&fish, &["--no-execute"], &proxops(&["completions", "fish"]));
    assert!(out.status.success(), "fish --no-execute:\n{}", said(&out));
}

#[test]
fn every_flag_of_help_is_in_every_completion_script() {
    let mut flags = global_flags();
    for c in commands() {
        flags.extend(command_flags(&c));
    }
    for shell in ["bash", "zsh", "fish"] {
        let script = proxops(&["completions", shell]);
        for f in &flags {
            let found = if shell == "fish" {
                let (opt, bare) = match f.strip_prefix("--") {
                    Some(long) => ("-l", long),
                    None => ("-s", f.trim_start_matches('-')),
                };
                script.contains(&format!(" {opt} {bare} "))
            } else {
                script.contains(f.as_str())
            };
            assert!(found, "the {shell} completion lacks {f}");
        }
    }
}

/// The man page's section of `command`: from its heading to the next.
fn man_section(page: &str, command: &str) -> String {
    let heading = format!(".SS \"proxops [GLOBAL FLAGS] {command} ");
    let start = page.find(&heading).unwrap();
    let rest = &page[start + heading.len()..];
    rest[..rest.find(".SS ").unwrap_or(rest.len())].to_owned()
}

#[test]
fn help_and_man_page_offer_markdown_only_where_it_is_taken() {
    let man = proxops(&["man"]);
    for (command, takes_markdown) in [
        ("diff", true),
        ("show", true),
        ("status", false),
        ("apply", false),
        ("validate", false),
    ] {
        let help = proxops(&[command, "--help"]);
        assert_eq!(help.contains("markdown"), takes_markdown, "{help}");
        let section = man_section(&man, command);
        assert_eq!(section.contains("markdown"), takes_markdown, "{section}");
        let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
            .args([command, "-o", "markdown", "--help-not-reached"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr.contains("for diff and show only"),
            !takes_markdown,
            "{command}: {stderr}"
        );
    }
}

#[test]
fn bash_completes_output_after_o_cluster_names_and_kinds() {
    let script = proxops(&["completions", "bash"]);
    assert_eq!(
        bash_completes(&script, &["proxops", "diff", "-o", ""]),
        ["json", "markdown", "text"]
    );
    // markdown is offered only where it is taken.
    assert_eq!(
        bash_completes(&script, &["proxops", "status", "--output", ""]),
        ["json", "text"]
    );
    assert_eq!(
        bash_completes(&script, &["proxops", "validate", "-o", ""]),
        ["json", "text"]
    );
    let repo = tempfile::tempdir().unwrap();
    for name in ["home", "edge"] {
        std::fs::create_dir_all(repo.path().join("clusters").join(name)).unwrap();
    }
    let root = repo.path().to_str().unwrap();
    assert_eq!(
        bash_completes(
            &script,
            &["proxops", "--git-path", root, "diff", "--cluster", ""]
        ),
        ["edge", "home"]
    );
    assert_eq!(
        bash_completes(&script, &["proxops", "--git-path", root, "--cluster", "h"]),
        ["home"]
    );
    let kinds = bash_completes(&script, &["proxops", "explain", ""]);
    assert!(
        kinds.contains(&"vm".to_owned()) && kinds.contains(&"replicationjob".to_owned()),
        "{kinds:?}"
    );
    assert_eq!(
        bash_completes(&script, &["proxops", "schema", "te"]),
        ["templatect", "templatevm"]
    );
}
