//! Two fakepve servers that accept one API token, so one
//! `PROXOPS_PVE_TOKEN_VALUE` serves two clusters of one daemon: `home` on
//! the first and `lab` on the second.

use std::process::Command;

use proxops_pve::fakepve::FakePve;
use serde_json::json;

use super::daemon::Daemon;
use super::{Repo, empty_repo, empty_seed, without_proxops_env};

const TOKEN_ID: &str = "root@pam!both";
const TOKEN_SECRET: &str = "5b0c6a0e-0000-4000-8000-00000000b07a";

/// A fakepve that accepts the shared token.
pub fn fake() -> FakePve {
    let mut seed = empty_seed();
    seed["tokens"] = json!({ TOKEN_ID: TOKEN_SECRET });
    FakePve::start(&seed).unwrap()
}

/// An empty repository with `home` on `home` and `lab` on `lab` (the
/// demo's `edge`, which names a host beyond loopback, removed).
pub fn repo(home: &FakePve, lab: &FakePve) -> Repo {
    let repo = empty_repo(home);
    std::fs::remove_dir_all(repo.path().join("clusters/edge")).unwrap();
    repo.write(
        "clusters/lab/config.yaml",
        &format!(
            "pve:\n  clusters:\n    lab:\n      base-url: {}\n      nodes: [pve1, pve2]\n      ca-file: {}\n",
            lab.url(),
            lab.ca_file().display()
        ),
    );
    repo.write("clusters/lab/resources.yaml", "resources: []\n");
    repo
}

/// `proxops run` over `repo`, one cycle a second, the shared token in its
/// environment.
pub fn start(repo: &Repo) -> Daemon {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    without_proxops_env(&mut cmd)
        .current_dir(repo.path())
        .env(
            "PROXOPS_PVE_TOKEN_VALUE",
            format!("{TOKEN_ID}={TOKEN_SECRET}"),
        )
        .arg("--git-path")
        .arg(repo.path())
        .args(["--git-poll-sec", "1", "--listen", "127.0.0.1:0", "run"]);
    Daemon::spawn(cmd)
}
