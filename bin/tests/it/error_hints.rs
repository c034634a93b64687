//! The errors a new installation meets first say what went wrong and how
//! to fix it: an untrusted PVE certificate (what it presented and the two
//! ways to trust it), a token PVE refuses (401) or that lacks a privilege
//! (403), a malformed token (where it came from and the shape expected), and
//! no repository (where it looked and how to point at one, said once). Each
//! wording is pinned by an insta snapshot, with what varies from run to run
//! (addresses, fingerprints, temporary paths) replaced by placeholders.
//!
//! And no message anywhere shows Rust's Debug formatting: every error path
//! the suite can reach is run and its stderr searched for it.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::path::Path;
use std::process::Command;

use live_support::sops::{encrypt, tool};
use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::json;

/// `text` with each `(from, to)` replaced, longest `from` first so a URL
/// goes before the host inside it.
fn redact(text: &str, pairs: &[(&str, &str)]) -> String {
    let mut pairs: Vec<&(&str, &str)> = pairs.iter().filter(|(f, _)| !f.is_empty()).collect();
    pairs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    let mut out = text.to_owned();
    for (from, to) in pairs {
        out = out.replace(from, to);
    }
    out
}

/// The real binary in `cwd`, with no ProxOps variable from the test's own
/// environment, plus `env`.
fn bare(cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    cmd.current_dir(cwd);
    without_proxops_env(&mut cmd);
    for var in ["SOPS_AGE_KEY", "SOPS_AGE_KEY_FILE"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `proxops --git-path <repo> --cluster home <args>` with `token_value` as
/// `PROXOPS_PVE_TOKEN_VALUE` instead of the harness token.
fn with_token(pve: &FakePve, repo: &Repo, token_value: &str, args: &[&str]) -> Run {
    let out = command(pve, repo, args)
        .env("PROXOPS_PVE_TOKEN_VALUE", token_value)
        .output()
        .unwrap();
    finished(pve, out)
}

/// Points `home` at `pve` with no `ca-file`: the system trust store, as a
/// new installation starts.
fn trust_system_roots(repo: &Repo, pve: &FakePve) {
    repo.write(
        "clusters/home/config.yaml",
        &format!(
            "pve:\n  clusters:\n    home:\n      base-url: {}\n      nodes: [pve1, pve2]\n",
            pve.url()
        ),
    );
}

/// `text` with each elapsed time a progress line shows (` in 0.4s:`)
/// as ` in <ELAPSED>:`: how long fakepve took is not what is checked.
fn redact_elapsed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" in ") {
        let (before, after) = rest.split_at(at + " in ".len());
        out.push_str(before);
        let digits = after
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(after.len());
        if digits > 0 && after[digits..].starts_with("s:") {
            out.push_str("<ELAPSED>");
            rest = &after[digits + 1..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// What varies between runs against `pve` in `repo`.
fn redact_live(text: &str, pve: &FakePve, repo: &Repo) -> String {
    let host = pve.host().to_string();
    let root = repo.path().display().to_string();
    let text = redact_elapsed(text);
    redact(
        &text,
        &[
            (pve.url(), "https://<HOST>:8006"),
            (&host, "<HOST>"),
            (pve.fingerprint(), "<FINGERPRINT>"),
            (&root, "<REPO>"),
        ],
    )
}

#[test]
fn an_untrusted_certificate_names_what_was_presented_and_both_fixes() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    trust_system_roots(&repo, &pve);
    pve.forget_requests().unwrap();
    let run = proxops(&pve, &repo, &["diff"]);
    assert_eq!(run.code, 1, "{}", run.all());
    for needle in [
        "=== home ===",
        pve.fingerprint(),
        "ca-file: /etc/pve/pve-root-ca.pem",
        &format!("fingerprint: \"{}\"", pve.fingerprint()),
        "not signed by a CA in the system trust store",
    ] {
        assert!(run.all().contains(needle), "{needle}\n{}", run.all());
    }
    assert!(!run.all().contains("UnknownIssuer"), "{}", run.all());
    assert!(pve.requests().unwrap().is_empty(), "nothing was sent");
    insta::assert_snapshot!("tls_unknown_issuer", redact_live(&run.all(), &pve, &repo));

    // The fingerprint the message offers is one `fingerprint:` takes and
    // that opens the connection.
    let cfg = std::fs::read_to_string(repo.path().join("clusters/home/config.yaml")).unwrap();
    repo.write(
        "clusters/home/config.yaml",
        &format!("{cfg}      fingerprint: \"{}\"\n", pve.fingerprint()),
    );
    let pinned = proxops(&pve, &repo, &["diff"]);
    assert_eq!(pinned.code, 0, "{}", pinned.all());
}

#[test]
fn a_refused_token_names_its_id_and_what_may_be_wrong() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let wrong = "root@pam!proxops=00000000-0000-4000-8000-000000000000";
    let run = with_token(&pve, &repo, wrong, &["diff"]);
    assert_eq!(run.code, 1, "{}", run.all());
    for needle in [
        "=== home ===",
        "401",
        "API token root@pam!proxops",
        "secret",
        "realm",
        "privilege separation",
    ] {
        assert!(run.all().contains(needle), "{needle}\n{}", run.all());
    }
    assert!(!run.all().contains("00000000-0000-4000"), "{}", run.all());
    insta::assert_snapshot!("http_401", redact_live(&run.all(), &pve, &repo));
}

/// A fakepve whose token `audit@pve!ro` may read everything and change
/// nothing.
fn read_only_token(seed: serde_json::Value) -> (FakePve, String) {
    let secret = "7c1e7a0e-0000-4000-8000-000000000403";
    let mut seed = seed;
    seed["tokens"] = json!({"audit@pve!ro": secret});
    seed["users"] = json!({"audit@pve": "unused-password"});
    let pve = FakePve::start(&seed).unwrap();
    pve.call(
        "grant",
        json!(["audit@pve!ro", "/", "Sys.Audit"]),
        json!({}),
    )
    .unwrap();
    pve.call("grant", json!(["audit@pve!ro", "/", "VM.Audit"]), json!({}))
        .unwrap();
    pve.call(
        "grant",
        json!(["audit@pve!ro", "/", "Datastore.Audit"]),
        json!({}),
    )
    .unwrap();
    (pve, format!("audit@pve!ro={secret}"))
}

#[test]
fn a_missing_privilege_names_the_path_the_privilege_and_the_docs() {
    let (pve, token) = read_only_token(empty_seed());
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let run = with_token(&pve, &repo, &token, &["apply", "--yes"]);
    assert_eq!(run.code, 1, "{}", run.all());
    for needle in [
        "API token audit@pve!ro lacks the privilege",
        "docs/getting-started.md, section \"A least-privilege API token\"",
    ] {
        assert!(run.all().contains(needle), "{needle}\n{}", run.all());
    }
    assert!(
        std::fs::read_to_string(workspace_root().join("docs/getting-started.md"))
            .unwrap()
            .contains("## 6. A least-privilege API token"),
        "the section the hint names exists"
    );
    insta::assert_snapshot!("http_403", redact_live(&run.all(), &pve, &repo));
}

#[test]
fn a_malformed_token_from_the_environment_names_the_variable_and_the_shape() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    pve.forget_requests().unwrap();
    let run = with_token(&pve, &repo, "proxops-reconcile-0123456789abcdef", &["diff"]);
    assert_eq!(run.code, 2, "{}", run.all());
    for needle in [
        "cluster \"home\"",
        "PROXOPS_PVE_TOKEN_VALUE",
        "user@realm!tokenid=secret",
    ] {
        assert!(run.stderr.contains(needle), "{needle}\n{}", run.all());
    }
    assert!(!run.stderr.contains("0123456789abcdef"), "{}", run.all());
    assert!(pve.requests().unwrap().is_empty());
    insta::assert_snapshot!("token_malformed_env", redact_live(&run.stderr, &pve, &repo));
}

#[test]
fn a_malformed_token_from_sops_names_the_file_and_key_and_the_shape() {
    assert!(tool("sops").exists(), "sops is not installed");
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let keys = tempfile::tempdir().unwrap();
    // The whole token id pasted where only its last part belongs.
    let (cipher, key) = encrypt(
        keys.path(),
        "secrets:\n  pve-user: root@pam\n  pve-token-id: root@pam!proxops\n  pve-token: 7c1e7a0e-0000-4000-8000-00000000dead\n",
    );
    repo.write("clusters/home/secrets.sops.yaml", &cipher);
    let cfg = std::fs::read_to_string(repo.path().join("clusters/home/config.yaml")).unwrap();
    repo.write(
        "clusters/home/config.yaml",
        &format!(
            "{cfg}      secrets-file: secrets.sops.yaml\n      secrets:\n        pve:\n          user: pve-user\n          token-id: pve-token-id\n          token: pve-token\n"
        ),
    );
    pve.forget_requests().unwrap();
    let out = command(&pve, &repo, &["diff"])
        .env_remove("PROXOPS_PVE_TOKEN_VALUE")
        .env("SOPS_AGE_KEY_FILE", &key)
        .output()
        .unwrap();
    let run = finished(&pve, out);
    assert_eq!(run.code, 2, "{}", run.all());
    for needle in [
        "cluster \"home\"",
        "SOPS key \"secrets.pve-token-id\"",
        "secrets.sops.yaml",
        "user@realm!tokenid=secret",
    ] {
        assert!(run.stderr.contains(needle), "{needle}\n{}", run.all());
    }
    assert!(!run.stderr.contains("dead"), "{}", run.all());
    assert!(pve.requests().unwrap().is_empty());
    insta::assert_snapshot!(
        "token_malformed_sops",
        redact_live(&run.stderr, &pve, &repo)
    );
}

/// A directory with no `.git` at or above it, or `None` when the
/// temporary directory sits inside a work tree.
fn outside_any_repository() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    let inside = dir.path().ancestors().any(|d| d.join(".git").exists());
    (!inside).then_some(dir)
}

#[test]
fn no_repository_names_where_it_looked_and_how_to_point_at_one() {
    let Some(dir) = outside_any_repository() else {
        eprintln!("skipped: the temporary directory sits inside a git work tree");
        return;
    };
    let run = bare(dir.path(), &[], &["validate"]);
    assert_eq!(run.code, 2, "{}", run.all());
    let shown = redact(&run.stderr, &[(&dir.path().display().to_string(), "<DIR>")]);
    assert_eq!(
        shown.matches("no ProxOps GitOps repository found").count(),
        1,
        "{shown}"
    );
    for needle in ["<DIR>", "--git-path DIR", "--git-url URL"] {
        assert!(shown.contains(needle), "{needle}\n{shown}");
    }
    insta::assert_snapshot!("no_repository", shown);
}

#[test]
fn a_work_tree_without_proxops_configuration_is_not_a_proxops_repository() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join("README.md"), "some other project\n").unwrap();
    let run = bare(dir.path(), &[], &["validate"]);
    assert_eq!(run.code, 2, "{}", run.all());
    let shown = redact(&run.stderr, &[(&dir.path().display().to_string(), "<DIR>")]);
    assert!(!shown.contains("proxops.yaml: "), "{shown}");
    assert_eq!(
        shown.matches("no ProxOps GitOps repository found").count(),
        1,
        "{shown}"
    );
    insta::assert_snapshot!("no_configuration", shown);
}

#[test]
fn a_missing_git_path_directory_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-repo");
    let run = bare(
        dir.path(),
        &[],
        &["--git-path", missing.to_str().unwrap(), "validate"],
    );
    assert_eq!(run.code, 2, "{}", run.all());
    let shown = redact(&run.stderr, &[(&dir.path().display().to_string(), "<DIR>")]);
    assert_eq!(
        shown.matches("no ProxOps GitOps repository found").count(),
        1,
        "{shown}"
    );
    assert!(shown.contains("--git-path <DIR>/no-such-repo"), "{shown}");
    insta::assert_snapshot!("missing_git_path", shown);
}

/// Points `home` at `url` (a loopback port that is not PVE), trusting
/// `pve`'s certificate as before.
fn point_home_at_url(repo: &Repo, url: &str) {
    let path = repo.path().join("clusters/home/config.yaml");
    let cfg = std::fs::read_to_string(&path).unwrap();
    let base = cfg
        .lines()
        .find_map(|l| l.trim().strip_prefix("base-url: "))
        .unwrap()
        .to_owned();
    repo.write("clusters/home/config.yaml", &cfg.replace(&base, url));
}

/// `proxops diff` against `url`, redacted: the port varies.
fn diff_against(pve: &FakePve, repo: &Repo, url: &str, port: u16) -> (Run, String) {
    point_home_at_url(repo, url);
    let run = proxops(pve, repo, &["diff"]);
    let shown = redact(
        &run.all(),
        &[
            (&format!("127.0.0.1:{port}"), "127.0.0.1:<PORT>"),
            (&repo.path().display().to_string(), "<REPO>"),
        ],
    );
    (run, shown)
}

#[test]
fn a_closed_port_says_what_was_dialled_and_that_pve_listens_on_8006() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    // A port just freed: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (run, shown) = diff_against(&pve, &repo, &format!("https://127.0.0.1:{port}"), port);
    assert_eq!(run.code, 1, "{shown}");
    for needle in [
        "connection refused",
        "dialled 127.0.0.1:<PORT>",
        "port 8006",
        "after 4 attempts: connection refused",
    ] {
        assert!(shown.contains(needle), "{needle}\n{shown}");
    }
    assert!(!shown.contains("GET /cluster/status: GET"), "{shown}");
    insta::assert_snapshot!("connection_refused", shown);
}

#[test]
fn https_to_a_plain_http_port_says_the_server_answered_in_plain_text() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // What a plain HTTP server answers to a TLS ClientHello.
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut first = [0u8; 512];
            let _ = std::io::Read::read(&mut stream, &mut first);
            let _ = std::io::Write::write_all(
                &mut stream,
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let (run, shown) = diff_against(&pve, &repo, &format!("https://127.0.0.1:{port}"), port);
    assert_eq!(run.code, 1, "{shown}");
    assert!(shown.contains("answered in plain text, not TLS"), "{shown}");
    assert!(!shown.contains("InvalidContentType"), "{shown}");
    assert!(!shown.contains("GET /cluster/status: GET"), "{shown}");
    insta::assert_snapshot!("plain_http_port", shown);
}

#[test]
fn terraform_spellings_of_flags_get_ours() {
    let dir = tempfile::tempdir().unwrap();
    for (args, ours) in [
        (&["apply", "-auto-approve"][..], "did you mean \"--yes\"?"),
        (&["apply", "--auto-approve"][..], "did you mean \"--yes\"?"),
        (&["diff", "-out=plan.json"][..], "did you mean \"--out\"?"),
        (&["diff", "-exit-code"][..], "did you mean \"--exit-code\"?"),
    ] {
        let run = bare(dir.path(), &[], args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.all());
        assert!(run.stderr.contains(ours), "{args:?}: {}", run.stderr);
    }
    // `diff` never writes: no `--yes` to offer it.
    let run = bare(dir.path(), &[], &["diff", "-auto-approve"]);
    assert!(!run.stderr.contains("--yes\"?"), "{}", run.stderr);
}

/// Where `text` shows Rust's Debug formatting: `Name("…")`, `Name { `,
/// `Some(`, `None`, `Ok(`, `Err(`. Each finding is the line it is on.
fn debug_formatting(text: &str) -> Vec<String> {
    fn word_start(line: &str, at: usize) -> bool {
        line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_')
    }
    let mut found = Vec::new();
    for line in text.lines() {
        let mut hit = ["Some(", "Ok(", "Err("]
            .iter()
            .any(|p| line.match_indices(p).any(|(at, _)| word_start(line, at)));
        hit |= line.match_indices("None").any(|(at, _)| {
            word_start(line, at)
                && line[at + 4..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric())
        });
        // A capitalised identifier followed by `("` or ` { `.
        let bytes = line.as_bytes();
        for (at, c) in line.char_indices() {
            if !c.is_ascii_uppercase() || !word_start(line, at) {
                continue;
            }
            let end = at
                + line[at..]
                    .find(|c: char| !c.is_ascii_alphanumeric())
                    .unwrap_or(line.len() - at);
            if end - at >= 2 {
                let rest = &bytes[end..];
                hit |= rest.starts_with(b"(\"") || rest.starts_with(b" { ");
            }
        }
        if hit {
            found.push(line.to_owned());
        }
    }
    found
}

#[test]
fn the_debug_detector_finds_debug_and_passes_prose() {
    for debug in [
        "error: credentials: cluster ClusterName(\"lab\"): bad",
        "status Some(3)",
        "answer None here",
        "got Err(x)",
        "value Ok(1)",
        "config LiveConfig { memory: 1 }",
    ] {
        assert_eq!(debug_formatting(debug), vec![debug.to_owned()], "{debug}");
    }
    for prose in [
        "error: credentials: cluster \"lab\": the API token id is empty",
        "\"none\" for an empty drive; NoneSuch is a name",
        "Permission check failed (/vms/100, VM.Config.Memory)",
        "error: vm/home/a.yaml:3:5: spec.memory: use \"512MiB\"",
        "CN=Proxmox Virtual Environment, O=PVE Cluster Manager CA",
    ] {
        assert!(debug_formatting(prose).is_empty(), "{prose}");
    }
}

/// Fails with every message of `runs` that shows Debug formatting.
fn assert_no_debug(runs: &[(String, Run)]) {
    let mut bad = Vec::new();
    for (what, run) in runs {
        for line in debug_formatting(&format!("{}{}", run.stdout, run.stderr)) {
            bad.push(format!("{what}: {line}"));
        }
    }
    assert!(
        bad.is_empty(),
        "Debug formatting in messages:\n{}",
        bad.join("\n")
    );
}

#[test]
fn no_error_message_shows_rust_debug_formatting() {
    let mut runs: Vec<(String, Run)> = Vec::new();
    let root = workspace_root();
    let demo = root.join("fixtures/repos/demo");
    let demo_path = demo.to_str().unwrap();

    // Usage errors.
    for args in [
        &[][..],
        &["frobnicate"],
        &["--bogus", "validate"],
        &["validate", "extra"],
        &["diff", "--output", "yaml"],
        &["--log-format", "xml", "validate"],
        &["--log-level", "loud", "validate"],
        &["--git-poll-sec", "soon", "validate"],
        &["--prune-budget", "many", "validate"],
        &["secrets", "check"],
        &["secrets", "check", "/no/such/file.sops.yaml"],
        &["--git-path", demo_path, "--cluster", "nosuch", "validate"],
        &["--config", "/no/such/proxops.yaml", "validate"],
    ] {
        let run = bare(&root, &[], args);
        assert_ne!(run.code, 0, "{args:?}\n{}", run.all());
        runs.push((format!("proxops {}", args.join(" ")), run));
    }

    // Every broken repository through validate.
    let mut cases: Vec<_> = std::fs::read_dir(root.join("fixtures/repos/invalid"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() > 50, "{cases:?}");
    for case in cases {
        let run = bare(
            &root,
            &[],
            &["--git-path", case.to_str().unwrap(), "validate"],
        );
        assert_eq!(run.code, 2, "{}\n{}", case.display(), run.all());
        runs.push((case.display().to_string(), run));
    }

    // No repository, a missing --git-path, a work tree that is not ProxOps'.
    let empty = tempfile::tempdir().unwrap();
    runs.push((
        "no repository".into(),
        bare(empty.path(), &[], &["validate"]),
    ));
    runs.push((
        "missing --git-path".into(),
        bare(&root, &[], &["--git-path", "/no/such/dir", "diff"]),
    ));
    std::fs::create_dir(empty.path().join(".git")).unwrap();
    runs.push(("not ProxOps".into(), bare(empty.path(), &[], &["validate"])));

    // Credentials: none, malformed, a user without a realm; and a PVE that
    // does not answer (nothing listens on the discard port of 127.0.0.1).
    let copy = tempfile::tempdir().unwrap();
    copy_dir(&demo, copy.path());
    std::fs::write(
        copy.path().join("clusters/home/config.yaml"),
        "pve:\n  clusters:\n    home:\n      base-url: https://127.0.0.1:9\n      nodes: [pve1, pve2]\n",
    )
    .unwrap();
    let at = [
        "--git-path",
        copy.path().to_str().unwrap(),
        "--cluster",
        "home",
    ];
    for (what, env) in [
        ("no credentials", vec![]),
        (
            "malformed token",
            vec![("PROXOPS_PVE_TOKEN_VALUE", "just-a-secret")],
        ),
        (
            "token id without user",
            vec![("PROXOPS_PVE_TOKEN_VALUE", "!id=abc")],
        ),
        (
            "user without realm",
            vec![("PROXOPS_PVE_USER", "root"), ("PROXOPS_PVE_TOKEN", "abc")],
        ),
        (
            "unreachable",
            vec![("PROXOPS_PVE_TOKEN_VALUE", "root@pam!ci=abc")],
        ),
    ] {
        let args: Vec<&str> = at.iter().copied().chain(["diff"]).collect();
        let run = bare(&root, &env, &args);
        assert_ne!(run.code, 0, "{what}\n{}", run.all());
        runs.push((what.to_owned(), run));
    }

    // TLS, 401 and 403 from a real server.
    let (pve, token) = read_only_token(empty_seed());
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    runs.push((
        "403".into(),
        with_token(&pve, &repo, &token, &["apply", "--yes"]),
    ));
    runs.push((
        "401".into(),
        with_token(
            &pve,
            &repo,
            "root@pam!proxops=00000000-0000-4000-8000-000000000000",
            &["diff"],
        ),
    ));
    trust_system_roots(&repo, &pve);
    runs.push(("TLS".into(), proxops(&pve, &repo, &["diff"])));
    for (what, run) in &runs[runs.len() - 3..] {
        assert_ne!(run.code, 0, "{what}\n{}", run.all());
    }

    assert_no_debug(&runs);
}
