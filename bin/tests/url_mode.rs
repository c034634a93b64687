//! URL mode end to end (spec §2.4, §2.5, §4.3): a `--config` file outside
//! any checkout declares `git.url` and the clusters inline; the demo
//! repository (without its clusters' config.yaml) is served by real git on
//! loopback over `file://`, `git://` (git daemon) and https with token auth
//! (git http-backend behind TLS); PVE is the demo recordings. The plan must
//! match the local-mode plan of the demo, follow pushes, survive a remote
//! that goes away (stale, from the cache), and a first fetch that fails must
//! end the command before any PVE request. The token appears in no output.

#![allow(clippy::unwrap_used)]

#[path = "../../adapters/git/tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use support::{Scratch, TestCerts, free_port, git_daemon, make_certs, write};

const TOKEN: &str = "gIt-T0ken-9d41c7e2";

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

const CLUSTERS: &str = "pve:
  clusters:
    edge:
      base-url: https://pve-edge.example.org:8006
      nodes: [pve1]
    home:
      base-url: https://pve-home.example.org:8006
      nodes: [pve1, pve2]
";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

/// A remote holding the demo repository, an operator directory outside any
/// checkout (the config file, the data dir) and a throwaway HOME.
struct Rig {
    s: Scratch,
    work: PathBuf,
    /// `<scratch>/srv/demo.git`
    bare: PathBuf,
}

impl Rig {
    fn new() -> Rig {
        let s = Scratch::new();
        let work = s.work_repo("work");
        copy_demo(&workspace_root().join("fixtures/repos/demo"), &work, "");
        s.commit_all(&work, "demo");
        let bare = s.bare_repo("srv/demo.git");
        s.push(&work, &bare, "main");
        std::fs::create_dir_all(s.path().join("ops")).unwrap();
        Rig { s, work, bare }
    }

    fn ops(&self) -> PathBuf {
        self.s.path().join("ops")
    }

    fn file_url(&self) -> String {
        format!("file://{}", self.bare.display())
    }

    /// Writes `ops/cfg.yaml`: the git source, the data dir, the clusters.
    fn config(&self, url: &str, git_extra: &str) -> PathBuf {
        let path = self.ops().join("cfg.yaml");
        let text = format!(
            "git:\n  url: {url}\n{git_extra}data-dir: {}\n{CLUSTERS}",
            self.ops().join("data").display()
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// `proxops --config cfg diff --replay <demo recordings>`, run in the
    /// operator directory with a hermetic environment.
    fn diff(&self, cfg: &Path, env: &[(&str, &str)]) -> Run {
        let replay = workspace_root().join("fixtures/live/demo");
        self.proxops(
            &[
                "--config",
                cfg.to_str().unwrap(),
                "diff",
                "--replay",
                replay.to_str().unwrap(),
            ],
            env,
        )
    }

    fn proxops(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
            .current_dir(self.ops())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.s.home())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .envs(env.iter().copied())
            .args(args)
            .output()
            .unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    /// Moves VM/installer (planned for creation) to another VMID in the
    /// work tree, commits and pushes: the plan shows the new id.
    fn push_change(&self) {
        let path = self.work.join("vm/home/installer.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let changed = text.replace("vmid: 102", "vmid: 112");
        assert_ne!(text, changed);
        write(&self.work, "vm/home/installer.yaml", &changed);
        self.s.commit_all(&self.work, "installer moves to 112");
        self.s.push(&self.work, &self.bare, "main");
    }

    fn head(&self) -> String {
        self.s.run_git(&self.work, &["rev-parse", "HEAD"])
    }
}

/// Copies the demo tree, leaving out the clusters' config.yaml (URL mode
/// declares the clusters in the operator's config file).
fn copy_demo(from: &Path, to: &Path, rel: &str) {
    for entry in std::fs::read_dir(from.join(rel)).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(to.join(&child)).unwrap();
            copy_demo(from, to, &child);
        } else if !(child.starts_with("clusters/") && name == "config.yaml") {
            std::fs::copy(entry.path(), to.join(&child)).unwrap();
        }
    }
}

/// The demo planned in local mode (the reference plan).
fn local_plan() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(workspace_root())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .args([
            "--git-path",
            "fixtures/repos/demo",
            "diff",
            "--replay",
            "fixtures/live/demo",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn assert_ok(run: &Run) {
    assert_eq!(
        run.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
}

#[test]
fn a_file_url_plans_like_local_mode_and_follows_a_push() {
    let rig = Rig::new();
    let cfg = rig.config(&rig.file_url(), "");
    let first = rig.diff(&cfg, &[]);
    assert_ok(&first);
    assert_eq!(first.stdout, local_plan());
    assert!(!first.stderr.contains("desired_stale"), "{}", first.stderr);
    assert!(rig.ops().join("data/git-cache/HEAD").exists());

    rig.push_change();
    let second = rig.diff(&cfg, &[]);
    assert_ok(&second);
    assert_ne!(second.stdout, first.stdout);
    assert!(second.stdout.contains("id=112"), "{}", second.stdout);
    assert!(
        !second.stderr.contains("desired_stale"),
        "{}",
        second.stderr
    );
}

#[test]
fn a_remote_gone_after_a_good_fetch_plans_from_the_cached_tree_marked_stale() {
    let rig = Rig::new();
    let cfg = rig.config(&rig.file_url(), "");
    rig.push_change();
    let good = rig.diff(&cfg, &[]);
    assert_ok(&good);

    std::fs::rename(&rig.bare, rig.s.path().join("srv/moved.git")).unwrap();
    let stale = rig.diff(&cfg, &[]);
    assert_ok(&stale);
    assert_eq!(stale.stdout, good.stdout);
    assert!(stale.stderr.contains("desired_stale"), "{}", stale.stderr);
    assert!(stale.stderr.contains(&rig.head()), "{}", stale.stderr);

    // The cache came from another URL: it is no good tree for this one.
    let other = rig.config(
        &format!("file://{}", rig.s.path().join("srv/other.git").display()),
        "",
    );
    let refused = rig.diff(&other, &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("git sync failed and no previous good tree"),
        "{}",
        refused.stderr
    );
}

#[test]
fn a_first_fetch_that_fails_exits_1_before_any_pve_request() {
    let rig = Rig::new();
    let cfg_path = rig.ops().join("cfg.yaml");
    // A PVE endpoint that would see any request: it must see none.
    let pve = TcpListener::bind("127.0.0.1:0").unwrap();
    pve.set_nonblocking(true).unwrap();
    let port = pve.local_addr().unwrap().port();
    let missing = rig.s.path().join("srv/missing.git");
    std::fs::write(
        &cfg_path,
        format!(
            "git:\n  url: file://{}\ndata-dir: {}\npve:\n  clusters:\n    edge:\n      base-url: https://127.0.0.1:{port}\n",
            missing.display(),
            rig.ops().join("data").display()
        ),
    )
    .unwrap();
    let run = rig.proxops(
        &["--config", cfg_path.to_str().unwrap(), "diff"],
        &[(
            "PROXOPS_PVE_TOKEN_VALUE",
            "root@pam!ci=00000000-0000-0000-0000-000000000000",
        )],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("git sync failed and no previous good tree"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        matches!(pve.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "PVE was contacted"
    );
}

#[test]
fn a_git_daemon_url_plans_and_goes_stale_when_the_daemon_stops() {
    let rig = Rig::new();
    let mut daemon = git_daemon(&rig.s, &rig.s.path().join("srv"));
    let cfg = rig.config(&format!("git://127.0.0.1:{}/demo.git", daemon.port), "");
    let first = rig.diff(&cfg, &[]);
    assert_ok(&first);
    assert_eq!(first.stdout, local_plan());

    daemon.stop();
    let stale = rig.diff(&cfg, &[]);
    assert_ok(&stale);
    assert_eq!(stale.stdout, first.stdout);
    assert!(stale.stderr.contains("desired_stale"), "{}", stale.stderr);
}

/// `git http-backend` behind TLS and Basic auth (user `git`, password
/// [`TOKEN`]), the git adapter's test server; stopped by PID on drop.
struct Https {
    child: Child,
    port: u16,
}

impl Drop for Https {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn https_server(rig: &Rig, certs: &TestCerts) -> Https {
    let port = free_port();
    let script = workspace_root().join("adapters/git/tests/support/https_git_server.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(port.to_string())
        .arg(rig.s.path().join("srv"))
        .arg(&certs.cert)
        .arg(&certs.key)
        .env("PROXOPS_TEST_GIT_HOME", rig.s.home())
        .env("PROXOPS_TEST_GIT_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Https { child, port };
    assert_eq!(line.trim(), "READY", "https git server did not start");
    server
}

fn assert_no_token(run: &Run) {
    assert!(!run.stdout.contains(TOKEN), "{}", run.stdout);
    assert!(!run.stderr.contains(TOKEN), "{}", run.stderr);
}

#[test]
fn https_with_a_token_from_the_environment_plans_and_never_shows_the_token() {
    let rig = Rig::new();
    let certs = make_certs(&rig.s.path().join("certs"));
    let server = https_server(&rig, &certs);
    let url = format!("https://127.0.0.1:{}/demo.git", server.port);
    // The YAML token is wrong: PROXOPS_GIT_TOKEN outranks it.
    let cfg = rig.config(
        &url,
        &format!(
            "  token: wrong-yaml-token\n  ca-file: {}\n",
            certs.ca.display()
        ),
    );
    let run = rig.diff(&cfg, &[("PROXOPS_GIT_TOKEN", TOKEN)]);
    assert_ok(&run);
    assert_eq!(run.stdout, local_plan());
    assert_no_token(&run);

    rig.push_change();
    let pushed = rig.diff(&cfg, &[("PROXOPS_GIT_TOKEN", TOKEN)]);
    assert_ok(&pushed);
    assert_ne!(pushed.stdout, run.stdout);
    assert_no_token(&pushed);

    drop(server);
    let stale = rig.diff(&cfg, &[("PROXOPS_GIT_TOKEN", TOKEN)]);
    assert_ok(&stale);
    assert_eq!(stale.stdout, pushed.stdout);
    assert!(stale.stderr.contains("desired_stale"), "{}", stale.stderr);
    assert_no_token(&stale);
    assert_no_file_holds(&rig.ops().join("data"), TOKEN.as_bytes());
}

/// No file under `dir` (the data dir: cache, marker) contains `needle`.
fn assert_no_file_holds(dir: &Path, needle: &[u8]) {
    let mut seen = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                seen += 1;
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(needle.len()).any(|w| w == needle),
                    "{} holds the token",
                    path.display()
                );
            }
        }
    }
    assert!(seen > 0, "nothing under {}", dir.display());
}

#[test]
fn https_with_the_token_in_yaml_only_and_a_wrong_token_fails_without_showing_either() {
    let rig = Rig::new();
    let certs = make_certs(&rig.s.path().join("certs"));
    let server = https_server(&rig, &certs);
    let url = format!("https://127.0.0.1:{}/demo.git", server.port);
    let ca = format!("  ca-file: {}\n", certs.ca.display());

    let cfg = rig.config(&url, &format!("  token: {TOKEN}\n{ca}"));
    let run = rig.diff(&cfg, &[]);
    assert_ok(&run);
    assert_eq!(run.stdout, local_plan());
    assert_no_token(&run);

    // A fresh cache and a wrong token: the first fetch fails.
    let wrong = "wrong-t0ken-4411";
    std::fs::remove_dir_all(rig.ops().join("data")).unwrap();
    let cfg = rig.config(&url, &format!("  token: {wrong}\n{ca}"));
    let refused = rig.diff(&cfg, &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("git sync failed"),
        "{}",
        refused.stderr
    );
    assert_no_token(&refused);
    assert!(!refused.stderr.contains(wrong), "{}", refused.stderr);
    drop(server);
}

/// A test tool: in `$PROXOPS_TOOLS_DIR/bin`, else the checkout's `.tools/bin`.
fn tool(name: &str) -> PathBuf {
    std::env::var_os("PROXOPS_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools"))
        .join("bin")
        .join(name)
}

/// A fresh age key in `dir`; returns (key file, recipient).
fn age_key(dir: &Path) -> (PathBuf, String) {
    let key = dir.join("age.txt");
    let out = Command::new(tool("age-keygen"))
        .arg("-o")
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = Command::new(tool("age-keygen"))
        .arg("-y")
        .arg(&key)
        .output()
        .unwrap();
    (
        key,
        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
    )
}

/// Writes `dir/<name>`: `plain` encrypted by sops for `recipient`.
fn sops_file(dir: &Path, name: &str, recipient: &str, plain: &str) {
    let input = dir.join(format!("{name}.plain.yaml"));
    std::fs::write(&input, plain).unwrap();
    let out = Command::new(tool("sops"))
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("SOPS_DISABLE_VERSION_CHECK", "1")
        .env("SOPS_AGE_RECIPIENTS", recipient)
        .args([
            "--disable-version-check",
            "encrypt",
            "--input-type",
            "yaml",
            "--output-type",
            "yaml",
        ])
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(&input).unwrap();
    std::fs::write(dir.join(name), out.stdout).unwrap();
}

/// The config with each cluster taking its git token from its own SOPS file
/// (relative to the config file's directory).
fn sops_config(rig: &Rig, url: &str, ca: &Path) -> PathBuf {
    let path = rig.ops().join("cfg.yaml");
    let text = format!(
        "git:
  url: {url}
  token: wrong-yaml-token
  ca-file: {}
data-dir: {}
pve:
  clusters:
    edge:
      base-url: https://pve-edge.example.org:8006
      nodes: [pve1]
      secrets-file: edge.sops.yaml
      secrets:
        git:
          token: git-token
    home:
      base-url: https://pve-home.example.org:8006
      nodes: [pve1, pve2]
      secrets-file: home.sops.yaml
      secrets:
        git:
          token: git-token
",
        ca.display(),
        rig.ops().join("data").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_sops_git_token_outranks_the_environment_and_yaml_and_two_different_ones_conflict() {
    let rig = Rig::new();
    let certs = make_certs(&rig.s.path().join("certs"));
    let server = https_server(&rig, &certs);
    let url = format!("https://127.0.0.1:{}/demo.git", server.port);
    let keys = rig.s.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (key, recipient) = age_key(&keys);
    let key = key.to_str().unwrap().to_owned();
    let plain = format!("secrets:\n  git-token: {TOKEN}\n");
    sops_file(&rig.ops(), "edge.sops.yaml", &recipient, &plain);
    sops_file(&rig.ops(), "home.sops.yaml", &recipient, &plain);
    let cfg = sops_config(&rig, &url, &certs.ca);
    let env = [
        ("SOPS_AGE_KEY_FILE", key.as_str()),
        ("PROXOPS_GIT_TOKEN", "wrong-env-token"),
    ];

    // Both clusters resolve the same token: it is the one used.
    let run = rig.diff(&cfg, &env);
    assert_ok(&run);
    assert_eq!(run.stdout, local_plan());
    assert_no_token(&run);

    // home's SOPS file now holds another token: fail closed, exit 2,
    // nothing fetched or read.
    let other = "other-g1t-token-55";
    sops_file(
        &rig.ops(),
        "home.sops.yaml",
        &recipient,
        &format!("secrets:\n  git-token: {other}\n"),
    );
    let conflict = rig.diff(&cfg, &env);
    assert_eq!(conflict.code, 2, "{}", conflict.stderr);
    assert!(
        conflict.stderr.contains("git token conflict"),
        "{}",
        conflict.stderr
    );
    assert!(conflict.stdout.is_empty(), "{}", conflict.stdout);
    assert_no_token(&conflict);
    assert!(!conflict.stderr.contains(other), "{}", conflict.stderr);
    drop(server);
}

#[test]
fn git_url_alone_takes_the_configuration_from_the_remote_tree() {
    let rig = Rig::new();
    // A remote holding the whole demo, clusters' config.yaml included.
    let full = rig.s.work_repo("full");
    copy_demo(&workspace_root().join("fixtures/repos/demo"), &full, "");
    for c in ["edge", "home"] {
        std::fs::copy(
            workspace_root().join(format!("fixtures/repos/demo/clusters/{c}/config.yaml")),
            full.join(format!("clusters/{c}/config.yaml")),
        )
        .unwrap();
    }
    rig.s.commit_all(&full, "full demo");
    let bare = rig.s.bare_repo("srv/full.git");
    rig.s.push(&full, &bare, "main");

    let replay = workspace_root().join("fixtures/live/demo");
    let url = format!("file://{}", bare.display());
    let run = rig.proxops(
        &[
            "--git-url",
            &url,
            "diff",
            "--replay",
            replay.to_str().unwrap(),
        ],
        &[],
    );
    assert_ok(&run);
    assert_eq!(run.stdout, local_plan());
    // A SOPS file named by the remote tree is refused, not looked up on
    // this host.
    let edge = full.join("clusters/edge/config.yaml");
    let text = std::fs::read_to_string(&edge).unwrap();
    std::fs::write(&edge, format!("{text}      secrets-file: edge.sops.yaml\n")).unwrap();
    rig.s.commit_all(&full, "edge takes a secrets file");
    rig.s.push(&full, &bare, "main");
    let refused = rig.proxops(
        &[
            "--git-url",
            &url,
            "diff",
            "--replay",
            replay.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("secrets-file declared in the remote tree"),
        "{}",
        refused.stderr
    );
    // No data-dir configured: the default one under HOME holds the cache.
    assert!(
        rig.s
            .home()
            .join(".local/share/proxops/git-cache/HEAD")
            .exists()
    );
}
