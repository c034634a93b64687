//! Shared pieces of the live end-to-end tests: a fakepve server seeded for
//! the demo repository's `home` cluster, a per-test copy of the demo
//! repository pointed at it, and a runner for the real binary.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

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
        repo
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

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
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

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn all(&self) -> String {
        format!("--- stdout\n{}--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// `proxops --git-path <repo> --cluster home <args>` with the harness
/// token in the environment, not yet started.
pub fn command(pve: &FakePve, repo: &Repo, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_proxops"));
    c.current_dir(repo.path())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_PASSWORD")
        .env_remove("PROXOPS_PVE_USER")
        .env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
        .env("PROXOPS_TASK_POLL_MS", "20")
        .env("PROXOPS_PVE_RETRY_BASE_MS", "5")
        .arg("--git-path")
        .arg(repo.path())
        .args(["--cluster", "home"])
        .args(args);
    c
}

/// Runs `proxops --git-path <repo> --cluster home <args>` with the harness
/// token in the environment.
pub fn proxops(pve: &FakePve, repo: &Repo, args: &[&str]) -> Run {
    let out = command(pve, repo, args).output().unwrap();
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

/// Writes (method, path) the fakepve server saw since the last `forget`.
pub fn writes(pve: &FakePve) -> Vec<(String, String)> {
    pve.requests()
        .unwrap()
        .into_iter()
        .filter(|(m, _, _)| m != "GET")
        .map(|(m, p, _)| (m, p))
        .collect()
}
