//! Shared pieces of the live end-to-end tests: a fakepve server seeded for
//! the demo repository's `home` cluster, a per-test copy of the demo
//! repository pointed at it, and a runner for the real binary.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

pub mod browser;
pub mod daemon;
pub mod sops;
pub mod two_clusters;

/// The variables ProxOps reads its repository, configuration and
/// credentials from: a test's own environment must not leak into a run.
pub const PROXOPS_ENV: &[&str] = &[
    "PROXOPS_GIT_PATH",
    "PROXOPS_CONFIG",
    "PROXOPS_PVE_TOKEN_VALUE",
    "PROXOPS_PVE_TOKEN",
    "PROXOPS_PVE_PASSWORD",
    "PROXOPS_PVE_USER",
    "PROXOPS_GIT_TOKEN",
];

/// `cmd` without any of [`PROXOPS_ENV`].
pub fn without_proxops_env(cmd: &mut Command) -> &mut Command {
    for var in PROXOPS_ENV {
        cmd.env_remove(var);
    }
    cmd
}

/// The address `proxops run` bound, from its start-up log line
/// (`proxops.run started … listen=ADDR`), once that line is in `log`.
pub fn listen_address(log: &str) -> Option<&str> {
    log.lines()
        .find(|l| l.contains("proxops.run started"))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("listen=")))
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// An empty two-node cluster whose `local` storage also takes disk images
/// (`import`) and snippets, as the demo's DiskImage needs.
pub fn empty_seed() -> Value {
    json!({
        "nodes": ["pve1", "pve2"],
        "storages": {
            "local": {"type": "dir", "path": "/var/lib/vz",
                      "content": "iso,vztmpl,backup,import,snippets", "avail": 53687091200u64}
        },
        "guests": []
    })
}

/// A seed guest: a small qemu VM `vmid` on pve1, with `tags` when given.
pub fn seed_vm(vmid: u32, name: &str, tags: Option<&str>, running: bool) -> Value {
    let mut config = json!({
        "memory": 512, "cores": 1, "scsihw": "virtio-scsi-pci",
        "net0": format!("virtio=BC:24:11:00:{:02X}:{:02X},bridge=vmbr0", vmid / 256, vmid % 256),
        "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=1G"),
    });
    if let Some(t) = tags {
        config["tags"] = json!(t);
    }
    json!({"vmid": vmid, "name": name, "node": "pve1",
           "status": if running { "running" } else { "stopped" }, "config": config})
}

/// The folders that hold manifests, one per kind.
pub const KIND_DIRS: [&str; proxops_core::names::Kind::ALL.len()] = proxops_core::names::Kind::DIRS;

/// A copy of the demo pointed at `pve` with no manifests and an empty
/// composition: what an operator starts adoption from.
pub fn empty_repo(pve: &FakePve) -> Repo {
    let repo = Repo::demo_for(pve);
    for d in KIND_DIRS {
        let _ = std::fs::remove_dir_all(repo.path().join(d));
    }
    repo.set_resources(&[]);
    repo
}

/// A copy of a fixture repository whose cluster `home` talks to `pve`.
pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    /// Copies fixtures/repos/demo and points `home` at the fakepve server
    /// (its base URL and its certificate as the cluster's CA file).
    pub fn demo_for(pve: &FakePve) -> Repo {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&workspace_root().join("fixtures/repos/demo"), dir.path());
        let repo = Repo { dir };
        repo.point_home_at(pve);
        repo.drop_bind_mounts();
        repo.keep_data_inside();
        repo
    }

    /// Points `data-dir` (cluster locks, caches) into the copy, under a
    /// name the repository reader never looks at, instead of the real
    /// HOME; and retries PVE calls after 5 ms instead of 1 s, since the
    /// faults these tests inject are on purpose.
    pub fn keep_data_inside(&self) {
        let p = self.path().join("proxops.yaml");
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str(&format!("data-dir: {}\n", self.data_dir().display()));
        text.push_str("pve:\n  retry:\n    base: 5ms\n");
        std::fs::write(p, text).unwrap();
    }

    /// The `data-dir` [`Repo::keep_data_inside`] sets.
    pub fn data_dir(&self) -> PathBuf {
        self.path().join(".proxops-data")
    }

    /// Sets `reconcile.lock-wait`.
    pub fn set_lock_wait(&self, wait: &str) {
        self.set_reconcile("lock-wait", wait);
    }

    /// Sets `reconcile.<key>` (the demo's `proxops.yaml` has a
    /// `reconcile:` section).
    pub fn set_reconcile(&self, key: &str, value: &str) {
        let path = self.path().join("proxops.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\nreconcile:\n"), "{text}");
        let text = text.replace(
            "\nreconcile:\n",
            &format!("\nreconcile:\n  {key}: {value}\n"),
        );
        std::fs::write(path, text).unwrap();
    }

    /// Takes the lock of the cluster at `pve` in this repository's
    /// data-dir, as a long `apply` by this test process would, and writes
    /// the holder line proxops writes. Held until the file is dropped.
    pub fn hold_cluster_lock(&self, pve: &FakePve) -> std::fs::File {
        use std::io::Write as _;
        let locks = self.data_dir().join("locks");
        std::fs::create_dir_all(&locks).unwrap();
        let name = pve.url().trim_start_matches("https://").replace(':', "_") + ".lock";
        let mut held = std::fs::File::create(locks.join(name)).unwrap();
        held.lock().unwrap();
        writeln!(
            held,
            r#"{{"pid":{},"command":"proxops apply","cluster":"home","since":"2026-12-01T15:00:00Z"}}"#,
            std::process::id()
        )
        .unwrap();
        held
    }

    /// PVE lets only `root@pam` itself (a ticket login, not an API token)
    /// set a bind mount ("Only root can pass arbitrary filesystem paths",
    /// which fakepve reproduces); the token-driven tests leave dns-01's bind
    /// mount out.
    pub fn drop_bind_mounts(&self) {
        let p = self.path().join("lxc/home/dns-01.yaml");
        let text = std::fs::read_to_string(&p).unwrap();
        let mut out = String::new();
        let mut skipping = false;
        for line in text.lines() {
            if line.starts_with("  bind-mounts:") {
                skipping = true;
                continue;
            }
            if skipping && line.starts_with("    ") {
                continue;
            }
            skipping = false;
            out.push_str(line);
            out.push('\n');
        }
        std::fs::write(p, out).unwrap();
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn point_home_at(&self, pve: &FakePve) {
        let cfg = format!(
            "pve:\n  clusters:\n    home:\n      base-url: {}\n      nodes: [pve1, pve2]\n      ca-file: {}\n",
            pve.url(),
            pve.ca_file().display()
        );
        std::fs::write(self.path().join("clusters/home/config.yaml"), cfg).unwrap();
    }

    /// Replaces the `home` composition with these resource paths.
    pub fn set_resources(&self, resources: &[&str]) {
        let mut text = String::from("resources:\n");
        for r in resources {
            text.push_str(&format!("  - {r}\n"));
        }
        if resources.is_empty() {
            text = "resources: []\n".into();
        }
        std::fs::write(self.path().join("clusters/home/resources.yaml"), text).unwrap();
    }

    /// Sets the monitoring VM's (150, pve1) `pve-description`: a hot
    /// (live) config change once the VM exists.
    pub fn set_monitoring_description(&self, text: &str) {
        let p = self.path().join("vm/base/monitoring.yaml");
        let body = std::fs::read_to_string(&p).unwrap();
        let body: String = body
            .lines()
            .filter(|l| !l.contains("pve-description"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(p, format!("{body}  pve-description: {text}\n")).unwrap();
    }

    /// Runs git in the repository, isolated from the host's configuration.
    pub fn git(&self, args: &[&str]) {
        let out = Command::new("git")
            .current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .args([
                "-c",
                "user.name=ProxOps Test",
                "-c",
                "user.email=test@example.org",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Commits everything in the work tree.
    pub fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
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

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Run {
    /// A finished process's exit code and output (UTF-8 or the test fails).
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }
}

impl Run {
    pub fn all(&self) -> String {
        format!("--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// Runs the binary in `dir` (also its HOME) with none of [`PROXOPS_ENV`]
/// and no PVE: for commands that read files only.
pub fn offline(dir: &Path, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    Run::from(
        without_proxops_env(&mut cmd)
            .current_dir(dir)
            .env("HOME", dir)
            .args(args)
            .output()
            .unwrap(),
    )
}

/// Runs `proxops --git-path <repo> --cluster home <args>` with the harness
/// token in the environment.
pub fn proxops(pve: &FakePve, repo: &Repo, args: &[&str]) -> Run {
    proxops_selecting(pve, repo, &["--cluster", "home"], args)
}

/// As [`proxops`], with `selection` (e.g. `[]` for every cluster) instead
/// of `--cluster home`.
pub fn proxops_selecting(pve: &FakePve, repo: &Repo, selection: &[&str], args: &[&str]) -> Run {
    let out = command_selecting(pve, repo, selection, args)
        .output()
        .unwrap();
    finished(pve, out)
}

/// The command [`proxops`] runs, to spawn it instead.
pub fn command(pve: &FakePve, repo: &Repo, args: &[&str]) -> Command {
    command_selecting(pve, repo, &["--cluster", "home"], args)
}

fn command_selecting(pve: &FakePve, repo: &Repo, selection: &[&str], args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    cmd.current_dir(repo.path())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_PASSWORD")
        .env_remove("PROXOPS_PVE_USER")
        .env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
        .arg("--git-path")
        .arg(repo.path())
        .args(selection)
        .args(args);
    cmd
}

/// [`command`] run on a pseudo-terminal by util-linux `script` (so
/// `apply` asks its question), its stdin, stdout and stderr piped.
pub fn on_a_pty(pve: &FakePve, repo: &Repo, args: &[&str]) -> Command {
    let c = command(pve, repo, args);
    let quote = |s: &std::ffi::OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
    let mut line = quote(c.get_program());
    for arg in c.get_args() {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    let mut script = Command::new("script");
    script
        .args(["--quiet", "--return", "--command", &line, "/dev/null"])
        .current_dir(repo.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => script.env(k, v),
            None => script.env_remove(k),
        };
    }
    script
}

/// `proxops run` (a cycle a second, `selection` before the command, with
/// `pve`'s token) writing its log to `log`; stopped by the caller.
pub fn spawn_daemon(
    pve: &FakePve,
    repo: &Repo,
    selection: &[&str],
    log: &Path,
) -> std::process::Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    without_proxops_env(&mut cmd)
        .current_dir(repo.path())
        .env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
        .arg("--git-path")
        .arg(repo.path())
        .args(selection)
        .args(["--git-poll-sec", "1", "--listen", "127.0.0.1:0", "run"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// What a finished [`command`] did; fails the test if it printed the token.
pub fn finished(pve: &FakePve, out: std::process::Output) -> Run {
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    let secret = pve.token_value();
    let token_secret = secret.expose().rsplit('=').next().unwrap().to_owned();
    assert!(
        !run.stdout.contains(&token_secret) && !run.stderr.contains(&token_secret),
        "token leaked:\n{}",
        run.all()
    );
    run
}

/// `proxops … apply <args>`: every live test's apply goes through here, so
/// a flag every apply needs is added in one place.
pub fn apply(pve: &FakePve, repo: &Repo, args: &[&str]) -> Run {
    let mut all = vec!["apply", "--yes"];
    all.extend_from_slice(args);
    proxops(pve, repo, &all)
}

/// The answers of the `home` cluster's reads, from a fresh `proxops record`
/// (the `responses` of its proxops-recording/v1 file).
pub fn recorded_home(pve: &FakePve, repo: &Repo) -> Vec<Value> {
    let out = tempfile::tempdir().unwrap();
    let rec = proxops(
        pve,
        repo,
        &["record", "--out", out.path().to_str().unwrap()],
    );
    assert_eq!(rec.code, 0, "{}", rec.all());
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("home.json")).unwrap())
            .unwrap();
    doc["responses"].as_array().unwrap().clone()
}

/// Someone edits guest `vmid` on pve1 through the API, as a person would
/// in PVE's web UI: `PUT …/config` with `key=value`.
pub fn edit_by_hand(pve: &FakePve, vmid: u32, key: &str, value: &str) {
    use proxops_pve::live::LiveTransport;
    use proxops_pve::transport::{Method, Request, Transport};
    let hand = LiveTransport::new(pve.live_config()).unwrap();
    let put = hand
        .call(&Request::new(
            Method::Put,
            format!("/nodes/pve1/qemu/{vmid}/config"),
            vec![(key.into(), value.into())],
        ))
        .unwrap();
    assert!(put.is_success(), "{put:?}");
}

/// Writes (method, path) the fakepve server saw since the last `forget`.
pub fn writes(pve: &FakePve) -> Vec<(String, String)> {
    pve.requests()
        .unwrap()
        .into_iter()
        .filter(|(m, _, _)| m != "GET")
        .map(|(m, p, _)| (m, p))
        .collect()
}

/// The paths of the DELETE requests fakepve saw since the last `forget`.
pub fn deletes(pve: &FakePve) -> Vec<String> {
    writes(pve)
        .into_iter()
        .filter(|(m, _)| m == "DELETE")
        .map(|(_, p)| p)
        .collect()
}

/// A call to the fake PVE's API, as a person or another tool makes it:
/// its `data`.
pub fn by_hand(pve: &FakePve, method: &str, path: &str, params: &[(&str, &str)]) -> Value {
    use proxops_pve::live::LiveTransport;
    use proxops_pve::transport::{Method, Request, Transport};
    let method = match method {
        "GET" => Method::Get,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        _ => Method::Post,
    };
    let params = params
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let hand = LiveTransport::new(pve.live_config()).unwrap();
    let r = hand
        .call(&Request::new(method, path.to_owned(), params))
        .unwrap();
    assert!(r.is_success(), "{method:?} {path}: {r:?}");
    r.data().clone()
}
