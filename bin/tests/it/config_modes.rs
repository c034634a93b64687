//! Which tree and which clusters a process reconciles (spec §2.3–§2.5),
//! on copies of fixtures/repos/per-cluster (two clusters, `lab` and
//! `prod`, and a proxops.yaml with a prune budget of 1):
//!
//! - `--config clusters/<c>/config.yaml` runs exactly that cluster, with
//!   proxops.yaml merged underneath: only that cluster's PVE sees a
//!   request, and proxops.yaml's budget applies unless the file sets one;
//! - `git.path` in a `--config` file: an absolute path, or `"."` for the
//!   work tree holding the file; none there fails closed;
//! - URL mode reconciles the clusters its file declares, and refuses a
//!   composition directory of any other;
//! - a cloud-init secret reference that does not resolve, or a SOPS file
//!   that does not decrypt, stops the cluster: nothing pruned, diff exits
//!   non-zero;
//! - a node outside the allowlist is `unknown_node`, not `parse_error`;
//! - `--prune-budget -1` means the configured budget.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use crate::git_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use live_support::{Run, copy_dir, empty_seed, seed_vm, sops, workspace_root};
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

/// A copy of fixtures/repos/per-cluster, a git work tree, and a HOME
/// (data dir, locks) of its own next to it.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(
            &workspace_root().join("fixtures/repos/per-cluster"),
            &dir.path().join("repo"),
        );
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("ops")).unwrap();
        let tree = Tree { dir };
        let out = Command::new("git")
            .args(["init", "-q"])
            .current_dir(tree.repo())
            .env("HOME", tree.home())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        tree
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// A directory outside any work tree, for an operator's files.
    fn ops(&self) -> PathBuf {
        self.dir.path().join("ops")
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.repo().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.path(rel), text).unwrap();
    }

    fn edit(&self, rel: &str, from: &str, to: &str) {
        let text = std::fs::read_to_string(self.path(rel)).unwrap();
        assert!(text.contains(from), "{rel}: {text}");
        self.write(rel, &text.replacen(from, to, 1));
    }

    /// Points cluster `name` at `pve`, with `extra` lines under its entry.
    fn point_at(&self, name: &str, pve: &FakePve, extra: &str) {
        self.write(
            &format!("clusters/{name}/config.yaml"),
            &format!(
                "pve:\n  clusters:\n    {name}:\n      base-url: {}\n      nodes: [pve1, pve2]\n      ca-file: {}\n{extra}",
                pve.url(),
                pve.ca_file().display()
            ),
        );
    }

    /// Runs proxops in `cwd` with `args`, the token of `pve` (if any) in
    /// the environment and nothing of the host's.
    fn proxops(
        &self,
        cwd: &Path,
        pve: Option<&FakePve>,
        env: &[(&str, &str)],
        args: &[&str],
    ) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
        cmd.current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("PROXOPS_TASK_POLL_MS", "20")
            .env("PROXOPS_PVE_RETRY_BASE_MS", "5")
            .envs(env.iter().copied())
            .args(args);
        if let Some(pve) = pve {
            cmd.env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose());
        }
        run_of(cmd.output().unwrap())
    }

    fn config_arg(&self, cluster: &str) -> String {
        self.path(&format!("clusters/{cluster}/config.yaml"))
            .display()
            .to_string()
    }
}

/// A PVE holding `orphans` proxops-tagged VMs no manifest declares
/// (vmids from `first`), all stopped.
fn pve_with_orphans(first: u32, orphans: u32) -> FakePve {
    let mut seed = empty_seed();
    seed["guests"] = Value::Array(
        (first..first + orphans)
            .map(|id| seed_vm(id, &format!("orphan-{id}"), Some("proxops"), false))
            .collect(),
    );
    FakePve::start(&seed).unwrap()
}

fn deletes(pve: &FakePve) -> Vec<String> {
    pve.requests()
        .unwrap()
        .into_iter()
        .filter(|(m, _, _)| m == "DELETE")
        .map(|(_, p, _)| p)
        .collect()
}

/// The count in a text plan's `=== <title> (<count>) ===` header; 0 when
/// the section is not there.
fn section_count(plan: &str, title: &str) -> usize {
    let head = format!("=== {title} (");
    plan.lines()
        .find_map(|l| l.strip_prefix(&head))
        .map(|rest| rest.trim_end_matches(") ===").parse().unwrap())
        .unwrap_or(0)
}

#[test]
fn a_cluster_file_given_with_config_runs_that_cluster_alone_with_the_budget_of_proxops_yaml() {
    let tree = Tree::new();
    let lab = pve_with_orphans(401, 3);
    let prod = pve_with_orphans(501, 3);
    tree.point_at("lab", &lab, "");
    tree.point_at("prod", &prod, "");
    lab.forget_requests().unwrap();
    prod.forget_requests().unwrap();

    let run = tree.proxops(
        &tree.ops(),
        Some(&lab),
        &[],
        &["--config", &tree.config_arg("lab"), "apply", "--yes"],
    );
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(run.stdout.contains("=== lab ==="), "{}", run.all());
    assert!(!run.all().contains("prod"), "{}", run.all());
    // The other cluster's PVE was never asked anything.
    assert_eq!(prod.requests().unwrap(), Vec::new());
    assert!(!lab.requests().unwrap().is_empty());
    // proxops.yaml's prune budget (1), not the built-in 3.
    assert_eq!(deletes(&lab), vec!["/api2/json/nodes/pve1/qemu/401"]);
    assert_eq!(section_count(&run.stdout, "deferred prunes (budget)"), 2);
}

#[test]
fn what_the_cluster_file_sets_wins_over_proxops_yaml() {
    let tree = Tree::new();
    let lab = pve_with_orphans(401, 3);
    tree.point_at("lab", &lab, "");
    let config = tree.config_arg("lab");
    let diff =
        |tree: &Tree| tree.proxops(&tree.ops(), Some(&lab), &[], &["--config", &config, "diff"]);

    let run = diff(&tree);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        section_count(&run.stdout, "will delete (prune)"),
        1,
        "{}",
        run.all()
    );

    let text = std::fs::read_to_string(tree.path("clusters/lab/config.yaml")).unwrap();
    tree.write(
        "clusters/lab/config.yaml",
        &format!("reconcile:\n  prune-budget: 2\n{text}"),
    );
    let run = diff(&tree);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        section_count(&run.stdout, "will delete (prune)"),
        2,
        "{}",
        run.all()
    );
    assert_eq!(section_count(&run.stdout, "deferred prunes (budget)"), 1);
    // No cluster of proxops.yaml joins: it declares none here, and one it
    // declared would not either.
    tree.write(
        "proxops.yaml",
        &format!(
            "{}pve:\n  clusters:\n    extra:\n      base-url: https://pve-extra.example.org:8006\n",
            std::fs::read_to_string(
                workspace_root().join("fixtures/repos/per-cluster/proxops.yaml")
            )
            .unwrap()
        ),
    );
    let run = tree.proxops(&tree.ops(), None, &[], &["--config", &config, "validate"]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(run.stdout, "ok: 1 cluster, 1 object\n", "{}", run.all());
}

#[test]
fn a_bad_value_proxops_yaml_fills_in_is_reported_at_its_own_file_and_line() {
    let tree = Tree::new();
    tree.edit("proxops.yaml", "prune-budget: 1", "prune-budget: -4");
    let run = tree.proxops(
        &tree.ops(),
        None,
        &[],
        &["--config", &tree.config_arg("lab"), "validate"],
    );
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains(
            "proxops.yaml:7:3: reconcile.prune-budget: invalid configuration: prune-budget -4"
        ),
        "{}",
        run.all()
    );
}

#[test]
fn git_path_dot_is_the_work_tree_holding_the_file_and_fails_closed_outside_one() {
    let tree = Tree::new();
    // Inside the tree: "." is that tree, whatever the working directory.
    tree.edit(
        "clusters/lab/config.yaml",
        "pve:\n",
        "git:\n  path: \".\"\npve:\n",
    );
    let run = tree.proxops(
        &tree.ops(),
        None,
        &[],
        &["--config", &tree.config_arg("lab"), "validate"],
    );
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(run.stdout, "ok: 1 cluster, 1 object\n");

    // Outside any work tree, run from inside one: no fallback to the
    // working directory's tree.
    let outside = tree.ops().join("lab.yaml");
    std::fs::write(
        &outside,
        "git:\n  path: \".\"\npve:\n  clusters:\n    lab:\n      base-url: https://pve-lab.example.org:8006\n",
    )
    .unwrap();
    let run = tree.proxops(
        &tree.repo(),
        None,
        &[],
        &["--config", outside.to_str().unwrap(), "validate"],
    );
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("git.path: \".\" means the git work tree that contains this file, and no directory at or above it holds .git"),
        "{}",
        run.all()
    );
    assert!(run.stdout.is_empty(), "{}", run.all());
}

#[test]
fn an_absolute_git_path_names_the_tree_and_a_relative_one_is_refused() {
    let tree = Tree::new();
    let outside = tree.ops().join("lab.yaml");
    let write = |path: &str| {
        std::fs::write(
            &outside,
            format!(
                "git:\n  path: {path}\npve:\n  clusters:\n    lab:\n      base-url: https://pve-lab.example.org:8006\n"
            ),
        )
        .unwrap();
    };
    write(tree.repo().to_str().unwrap());
    let validate = || {
        tree.proxops(
            Path::new("/"),
            None,
            &[],
            &["--config", outside.to_str().unwrap(), "validate"],
        )
    };
    let run = validate();
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(run.stdout, "ok: 1 cluster, 1 object\n");

    write("repo");
    let run = validate();
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("must be an absolute path"),
        "{}",
        run.all()
    );

    write(tree.ops().join("missing").to_str().unwrap());
    let run = validate();
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("is not a work tree ProxOps can read"),
        "{}",
        run.all()
    );
}

/// A bare remote holding the per-cluster tree, served over `file://`, and
/// an operator file declaring `clusters` inline.
fn url_config(s: &git_support::Scratch, clusters: &[&str]) -> PathBuf {
    let work = s.work_repo("work");
    copy_dir(&workspace_root().join("fixtures/repos/per-cluster"), &work);
    s.commit_all(&work, "per-cluster");
    let bare = s.bare_repo("srv/per-cluster.git");
    s.push(&work, &bare, "main");
    let ops = s.path().join("ops");
    std::fs::create_dir_all(&ops).unwrap();
    let mut text = format!(
        "git:\n  url: file://{}\ndata-dir: {}\npve:\n  clusters:\n",
        bare.display(),
        ops.join("data").display()
    );
    for c in clusters {
        text.push_str(&format!(
            "    {c}:\n      base-url: https://pve-{c}.url-mode.example.org:8006\n"
        ));
    }
    let path = ops.join("cfg.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn url_validate(s: &git_support::Scratch, cfg: &Path) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(s.path().join("ops"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", s.home())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .args(["--config", cfg.to_str().unwrap(), "validate"])
        .output()
        .unwrap();
    run_of(out)
}

fn run_of(out: std::process::Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn url_mode_runs_the_clusters_its_file_declares_and_refuses_a_composition_of_any_other() {
    let s = git_support::Scratch::new();
    let both = url_config(&s, &["lab", "prod"]);
    let run = url_validate(&s, &both);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "ok: 2 clusters, 2 objects\n");

    // The fetched tree's clusters/prod/config.yaml declares nothing here.
    let s2 = git_support::Scratch::new();
    let lab_only = url_config(&s2, &["lab"]);
    let run = url_validate(&s2, &lab_only);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("clusters/prod/: composition directory \"prod\" is not a cluster the URL-mode configuration declares"),
        "{}",
        run.all()
    );
    assert!(run.stdout.is_empty());
}

/// A manifest with a cloud-init password reference, for `lab`.
fn reference_a_password(tree: &Tree) {
    let text = std::fs::read_to_string(tree.path("vm/lab/app-01.yaml")).unwrap();
    tree.write(
        "vm/lab/app-01.yaml",
        &format!(
            "{text}  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n  cloud-init-data:\n    ci-user: ops\n    ci-password-ref: cloud-init.passwords.default\n"
        ),
    );
}

/// `lab` with a password reference, at a PVE with three orphans, and a
/// SOPS file holding `plain`; returns the age key file too.
fn with_cloud_init_secrets(plain: &str) -> (Tree, FakePve, PathBuf) {
    let tree = Tree::new();
    let lab = pve_with_orphans(401, 3);
    reference_a_password(&tree);
    let (cipher, key) = sops::encrypt(&tree.ops(), plain);
    tree.write("clusters/lab/secrets.sops.yaml", &cipher);
    tree.point_at("lab", &lab, "      secrets-file: secrets.sops.yaml\n");
    (tree, lab, key)
}

#[test]
fn a_cloud_init_secret_the_sops_file_lacks_stops_the_cluster_and_prunes_nothing() {
    let (tree, lab, key) =
        with_cloud_init_secrets("cloud-init:\n  passwords:\n    other: s3cret-Other-9\n");
    let key = key.to_str().unwrap().to_owned();
    let env = [("SOPS_AGE_KEY_FILE", key.as_str())];
    let config = tree.config_arg("lab");

    let diff = tree.proxops(
        &tree.ops(),
        Some(&lab),
        &env,
        &["--config", &config, "diff", "--exit-code"],
    );
    assert_eq!(diff.code, 2, "{}", diff.all());
    assert!(
        diff.stderr.contains(
            "vm/lab/app-01.yaml: spec.cloud-init-data.ci-password-ref: VM/app-01: secret \"cloud-init.passwords.default\" is missing or empty"
        ),
        "{}",
        diff.all()
    );
    assert!(!diff.all().contains("s3cret-Other-9"));

    lab.forget_requests().unwrap();
    let apply = tree.proxops(
        &tree.ops(),
        Some(&lab),
        &env,
        &["--config", &config, "apply", "--yes"],
    );
    assert_ne!(apply.code, 0, "{}", apply.all());
    assert_eq!(deletes(&lab), Vec::<String>::new(), "{}", apply.all());
    assert_eq!(lab.requests().unwrap(), Vec::new(), "{}", apply.all());

    let status = tree.proxops(
        &tree.ops(),
        Some(&lab),
        &env,
        &["--config", &config, "status", "--output", "json"],
    );
    let doc: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(doc["clusters"][0]["result"], json!("parse_error"), "{doc}");

    // With the secret there, the same cluster plans its prune.
    let keys = tempfile::tempdir().unwrap();
    let (cipher, key) = sops::encrypt(
        keys.path(),
        "cloud-init:\n  passwords:\n    default: s3cret-Default-9\n",
    );
    tree.write("clusters/lab/secrets.sops.yaml", &cipher);
    let key = key.to_str().unwrap().to_owned();
    let diff = tree.proxops(
        &tree.ops(),
        Some(&lab),
        &[("SOPS_AGE_KEY_FILE", key.as_str())],
        &["--config", &config, "diff", "--exit-code"],
    );
    assert_eq!(diff.code, 3, "{}", diff.all());
    assert_eq!(
        section_count(&diff.stdout, "will delete (prune)"),
        1,
        "{}",
        diff.all()
    );
}

#[test]
fn a_sops_file_this_host_cannot_decrypt_stops_before_any_request() {
    let (tree, lab, _key) =
        with_cloud_init_secrets("cloud-init:\n  passwords:\n    default: s3cret-Default-9\n");
    // An identity, but not the one the file is encrypted to.
    let other = tempfile::tempdir().unwrap();
    let (_, wrong_key) = sops::encrypt(other.path(), "x: y\n");
    let wrong_key = wrong_key.to_str().unwrap().to_owned();
    lab.forget_requests().unwrap();
    let config = tree.config_arg("lab");
    for args in [&["diff", "--exit-code"][..], &["apply", "--yes"][..]] {
        let mut all = vec!["--config", config.as_str()];
        all.extend_from_slice(args);
        let run = tree.proxops(
            &tree.ops(),
            Some(&lab),
            &[("SOPS_AGE_KEY_FILE", wrong_key.as_str())],
            &all,
        );
        assert_eq!(run.code, 2, "{}", run.all());
        assert!(run.stderr.contains("cannot decrypt"), "{}", run.all());
        assert!(run.stderr.contains("no-matching-identity"), "{}", run.all());
    }
    assert_eq!(lab.requests().unwrap(), Vec::new());
}

#[test]
fn a_node_outside_the_allowlist_is_unknown_node_not_parse_error() {
    let tree = Tree::new();
    let status = |tree: &Tree| {
        let args = [
            "--git-path",
            ".",
            "--cluster",
            "lab",
            "status",
            "--output",
            "json",
        ];
        let run = tree.proxops(&tree.repo(), None, &[], &args);
        let doc: Value = serde_json::from_str(&run.stdout).unwrap();
        (run, doc)
    };
    tree.edit("vm/lab/app-01.yaml", "node: pve1", "node: pve9");
    let (run, doc) = status(&tree);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains(
            "vm/lab/app-01.yaml:6:3: spec.node: node pve9 is not in this cluster's node allowlist"
        ),
        "{}",
        run.all()
    );
    assert_eq!(doc["clusters"][0]["name"], json!("lab"), "{doc}");
    assert_eq!(doc["clusters"][0]["result"], json!("unknown_node"), "{doc}");

    // Any other invalid input stays parse_error.
    tree.edit("vm/lab/app-01.yaml", "node: pve9", "node: pve1");
    tree.edit("vm/lab/app-01.yaml", "memory: 1GiB", "memory: lots");
    let (_, doc) = status(&tree);
    assert_eq!(doc["clusters"][0]["result"], json!("parse_error"), "{doc}");
}

#[test]
fn prune_budget_minus_one_is_the_configured_budget_and_other_negatives_are_refused() {
    let tree = Tree::new();
    let lab = pve_with_orphans(401, 3);
    tree.point_at("lab", &lab, "");
    let config = tree.config_arg("lab");
    let diff = |budget: &str| {
        tree.proxops(
            &tree.ops(),
            Some(&lab),
            &[],
            &["--config", &config, "--prune-budget", budget, "diff"],
        )
    };
    let run = diff("-1");
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        section_count(&run.stdout, "will delete (prune)"),
        1,
        "{}",
        run.all()
    );
    let run = diff("2");
    assert_eq!(
        section_count(&run.stdout, "will delete (prune)"),
        2,
        "{}",
        run.all()
    );
    let run = diff("-2");
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("invalid --prune-budget -2"),
        "{}",
        run.all()
    );
}
