//! Second stage of argument handling: resolve flags against the
//! environment and the filesystem — find the repository, read its files,
//! load configuration and desired state through core. Where the files come
//! from (a local tree or a fetched remote) is [`crate::gitsource`]'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proxops_core::config::{ConfigShape, ConfigSource, Overrides};
use proxops_core::diag::Diagnostic;
use proxops_core::repo::{self, Loaded, RepoInput};
use proxops_core::secret::Secret;

use crate::args::GlobalArgs;
use crate::exit::Failure;

/// What the environment contributes (read once at start-up).
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub git_path: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub token_value: Option<Secret>,
    pub token: Option<Secret>,
    pub password: Option<Secret>,
    pub user: Option<String>,
    pub git_token: Option<Secret>,
}

impl Env {
    pub fn read() -> Env {
        fn var(name: &str) -> Option<String> {
            std::env::var(name).ok().filter(|v| !v.trim().is_empty())
        }
        Env {
            git_path: var("PROXOPS_GIT_PATH").map(PathBuf::from),
            config: var("PROXOPS_CONFIG").map(PathBuf::from),
            token_value: var("PROXOPS_PVE_TOKEN_VALUE").map(Secret::new),
            token: var("PROXOPS_PVE_TOKEN").map(Secret::new),
            password: var("PROXOPS_PVE_PASSWORD").map(Secret::new),
            user: var("PROXOPS_PVE_USER"),
            git_token: var("PROXOPS_GIT_TOKEN").map(Secret::new),
        }
    }
}

/// The desired state this invocation works from.
pub struct Workspace {
    /// The work tree root, when there is one (local mode).
    pub root: Option<PathBuf>,
    pub commit: Option<String>,
    pub loaded: Loaded,
    /// URL mode: the latest fetch failed and `commit` is the last good tree
    /// (spec §2.5; gauge `proxops_desired_stale`). Always `false` locally.
    pub desired_stale: bool,
    /// Why the desired state is stale (the fetch error; never holds a token).
    pub stale_reason: Option<String>,
    /// [`tree_digest`] of the files the desired state was loaded from.
    pub tree: String,
}

/// `sha256:<hex>` over the desired-state files (each path and its bytes,
/// in path order) and the `--config` file's bytes: tells apart two trees of
/// one commit, e.g. a work tree with uncommitted edits. Secrets stay
/// encrypted in these bytes (SOPS files are read as they are on disk).
pub fn tree_digest(files: &BTreeMap<String, Vec<u8>>, explicit: Option<&[u8]>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (path, bytes) in files {
        h.update((path.len() as u64).to_be_bytes());
        h.update(path.as_bytes());
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(bytes);
    }
    if let Some(bytes) = explicit {
        h.update(b"--config");
        h.update((bytes.len() as u64).to_be_bytes());
        h.update(bytes);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

pub fn overrides(g: &GlobalArgs, env: &Env) -> Overrides {
    Overrides {
        log_level: g.log_level.clone(),
        listen: g.listen.clone(),
        git_url: g.git_url.clone(),
        git_branch: g.git_branch.clone(),
        poll_interval_secs: g.git_poll_sec,
        prune_budget: g.prune_budget,
        pve_user: g.pve_user.clone(),
        pve_auth: g.pve_auth.clone(),
        ca_file: g.ca_file.clone(),
        env_token_value: env.token_value.clone(),
        env_token: env.token.clone(),
        env_password: env.password.clone(),
        env_user: env.user.clone(),
        env_git_token: env.git_token.clone(),
    }
}

/// Renders diagnostics one per line (main prefixes each with `error: `).
pub fn render_diagnostics(diags: &[&Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints the repository's warnings on stderr, one `warning: ` line each
/// (they refuse nothing, so they never change the exit code).
pub fn print_warnings(loaded: &Loaded) {
    for w in &loaded.warnings {
        crate::out::eprint(&format!("warning: {w}\n"));
    }
}

/// Finds the work tree: `--git-path`, else `PROXOPS_GIT_PATH` (each names
/// the root itself), else the nearest `.git` at or above the working
/// directory.
pub fn find_root(g: &GlobalArgs, env: &Env) -> Result<proxops_git::RepoRoot, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::input(format!("cannot read the working directory: {e}")))?;
    let (explicit, named) = match (&g.git_path, &env.git_path) {
        (Some(p), _) => (Some(p), "--git-path"),
        (None, Some(p)) => (Some(p), "PROXOPS_GIT_PATH"),
        (None, None) => (None, ""),
    };
    match explicit {
        Some(p) => proxops_git::RepoRoot::explicit(&cwd.join(p)).map_err(|e| {
            let why = match e {
                proxops_git::GitError::StartDir { source, .. } => source.to_string(),
                other => other.to_string(),
            };
            Failure::input(format!(
                "no ProxOps GitOps repository found: {named} {} cannot be used ({why}); {POINT_AT_A_REPOSITORY}",
                p.display()
            ))
        }),
        None => proxops_git::discover(&cwd)
            .map_err(|e| Failure::input(format!("{e}; {POINT_AT_A_REPOSITORY}"))),
    }
}

/// How to tell ProxOps where its repository is, for every "not found".
pub const POINT_AT_A_REPOSITORY: &str = "run proxops inside a clone of the repository, point at its work tree with --git-path DIR (or PROXOPS_GIT_PATH), or fetch it with --git-url URL";

/// Reads the tree and loads configuration and every cluster's desired state:
/// the local tree, or in URL mode (§2.5) a fetch into `<data-dir>/git-cache`
/// and the fetched commit. One-shot: a long-running caller keeps a
/// [`crate::gitsource::DesiredSource`] instead, so a later failed fetch can
/// fall back to the last good tree of the same process.
pub fn load_workspace(g: &GlobalArgs, env: &Env) -> Result<Workspace, Failure> {
    crate::gitsource::DesiredSource::open(g, env)?.next_cycle(g, env)
}

/// The `--config` file in effect (`PROXOPS_CONFIG` only when no
/// `--git-path` is given).
pub fn config_path(g: &GlobalArgs, env: &Env) -> Option<PathBuf> {
    g.config.clone().or_else(|| {
        if g.git_path.is_some() {
            None
        } else {
            env.config.clone()
        }
    })
}

/// The `--config` file's name and bytes. The name is the file's absolute
/// path: relative paths it declares (`secrets-file`, `ca-file`) resolve
/// from its own directory, never from the repository's, where a committer
/// could plant a file of the same name (inside the work tree it is named as
/// the tree names it instead, below).
pub fn read_config(path: &Path) -> Result<(String, Vec<u8>), Failure> {
    let bytes = proxops_git::read_bounded(path)
        .map_err(|e| Failure::input(format!("cannot read --config {}: {e}", path.display())))?;
    let name = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    Ok((name.display().to_string(), bytes))
}

/// Local mode: the work tree is the desired state, uncommitted edits
/// included; nothing is fetched.
pub fn load_local(g: &GlobalArgs, env: &Env) -> Result<Workspace, Failure> {
    let config_path = config_path(g, env);
    let explicit_bytes = match &config_path {
        Some(p) => Some(read_config(p)?),
        None => None,
    };
    let root = match (&config_path, &explicit_bytes, &g.git_path, &env.git_path) {
        (Some(p), Some((name, bytes)), None, None) => {
            let shape = ConfigShape::of(&ConfigSource {
                name: name.clone(),
                bytes,
            });
            match shape.git_path.as_deref() {
                Some(git_path) => Some(git_path_root(p, git_path)?),
                // A --config without a work tree around it still works.
                None => config_root(p)
                    .or_else(|| find_root(g, env).ok().map(|r| r.path().to_path_buf())),
            }
        }
        _ => Some(find_root(g, env)?.path().to_path_buf()),
    };
    // Inside the work tree, the --config file is named as the tree names
    // it (`clusters/<name>/config.yaml`): its relative paths (secrets-file,
    // ca-file) resolve from its own directory there, whatever the working
    // directory.
    let explicit_bytes = match (explicit_bytes, &config_path, &root) {
        (Some((name, bytes)), Some(p), Some(r)) => {
            (repo_relative(p, r).unwrap_or(name), bytes).into()
        }
        (explicit, _, _) => explicit,
    };
    let (files, cluster_dirs, commit) = match &root {
        Some(r) => {
            let rr =
                proxops_git::RepoRoot::explicit(r).map_err(|e| Failure::input(e.to_string()))?;
            let tree = proxops_git::read_tree_with(&rr, &TwoThreads)
                .map_err(|e| Failure::runtime(e.to_string()))?;
            let commit = if rr.is_git() {
                proxops_git::head_commit(&rr).ok().flatten()
            } else {
                None
            };
            (tree.files, tree.cluster_dirs, commit)
        }
        None => (BTreeMap::new(), BTreeSet::new(), None),
    };
    if let Some(r) = &root
        && explicit_bytes.is_none()
        && !holds_configuration(&files)
    {
        return Err(Failure::input(format!(
            "no ProxOps GitOps repository found at {}: it holds neither proxops.yaml nor clusters/<name>/config.yaml; {POINT_AT_A_REPOSITORY}, or start one there with clusters/<name>/config.yaml (docs/getting-started.md)",
            r.display()
        )));
    }
    let loaded = load_tree(
        g,
        env,
        RepoInput {
            files: &files,
            cluster_dirs: &cluster_dirs,
        },
        explicit_bytes
            .as_ref()
            .map(|(n, b)| (n.as_str(), b.as_slice())),
    )?;
    let tree = tree_digest(&files, explicit_bytes.as_ref().map(|(_, b)| b.as_slice()));
    Ok(Workspace {
        root,
        commit,
        loaded,
        desired_stale: false,
        stale_reason: None,
        tree,
    })
}

/// Runs the repository's file reads and each cluster's manifest readings
/// on the calling thread and, where there is a second core, one more,
/// each taking the next job not yet taken; their results are taken in
/// order, so the result is the one a single thread gives. Two, because
/// reading and composing the repository is about half of a 10,000-guest
/// diff and the machines this runs on have few cores to spare (each
/// thread's heap costs memory: docs/performance.md).
struct TwoThreads;

impl repo::FanOut for TwoThreads {
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let next = AtomicUsize::new(0);
        let work = || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                job(i);
            }
        };
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        std::thread::scope(|s| {
            // Without a second thread every job runs on this one.
            if cores > 1 && n > 1 {
                let _ = std::thread::Builder::new().spawn_scoped(s, work);
            }
            work();
        });
    }
}

/// Loads configuration and desired state from a tree's files (the
/// `explicit` process config, when given, as `--config`), and checks the
/// `--cluster` filter against the configured clusters.
pub fn load_tree(
    g: &GlobalArgs,
    env: &Env,
    input: RepoInput<'_>,
    explicit: Option<(&str, &[u8])>,
) -> Result<Loaded, Failure> {
    let explicit = explicit.map(|(name, bytes)| ConfigSource {
        name: name.to_owned(),
        bytes,
    });
    let ov = overrides(g, env);
    let loaded = repo::load_with(input, explicit, &ov, &TwoThreads).map_err(|d| {
        let refs: Vec<&Diagnostic> = d.iter().collect();
        Failure {
            diagnostics: d.clone(),
            ..Failure::input(render_diagnostics(&refs))
        }
    })?;
    for c in &g.clusters {
        if !loaded.clusters.keys().any(|k| k.as_str() == c) {
            return Err(Failure::input(format!(
                "--cluster {c:?} is not a configured cluster (known: {})",
                loaded
                    .clusters
                    .keys()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(loaded)
}

/// The work tree a `--config` file's `git.path` names (spec §2.4): an
/// absolute path as it is, `"."` the work tree that contains the file.
/// Fails closed (exit 2, saying why) when there is no such tree: the
/// process never falls back to whatever tree the working directory is in.
fn git_path_root(config: &Path, git_path: &str) -> Result<PathBuf, Failure> {
    let refuse = |why: String| {
        Failure::input(format!(
            "invalid configuration: {}: git.path: {git_path:?} {why}",
            config.display()
        ))
    };
    if git_path == "." {
        return config_root(config).ok_or_else(|| {
            refuse(
                "means the git work tree that contains this file, and no directory at or above it holds .git: move the file into the work tree, or set git.path to the work tree's absolute path".to_owned(),
            )
        });
    }
    let path = Path::new(git_path);
    if !path.is_absolute() {
        return Err(refuse(
            "must be an absolute path, or \".\" for the work tree that contains this file"
                .to_owned(),
        ));
    }
    proxops_git::RepoRoot::explicit(path)
        .map(|r| r.path().to_path_buf())
        .map_err(|e| refuse(format!("is not a work tree ProxOps can read: {e}")))
}

/// Whether a tree has any ProxOps configuration file: without one it is
/// some other repository, and every message about a missing cluster would
/// name a `proxops.yaml` that is not there.
fn holds_configuration(files: &BTreeMap<String, Vec<u8>>) -> bool {
    files.keys().any(|path| {
        path == "proxops.yaml"
            || path
                .strip_prefix("clusters/")
                .and_then(|rest| rest.split_once('/'))
                .is_some_and(|(_, file)| file == "config.yaml")
    })
}

/// `config`'s path relative to the work tree `root`, when it is inside it.
fn repo_relative(config: &Path, root: &Path) -> Option<String> {
    let abs = std::fs::canonicalize(config).ok()?;
    let root = std::fs::canonicalize(root).ok()?;
    let rel = abs.strip_prefix(&root).ok()?.to_str()?.to_owned();
    (!rel.is_empty()).then_some(rel)
}

/// The work tree that holds a `--config` file, if any.
fn config_root(config: &Path) -> Option<PathBuf> {
    let abs = std::fs::canonicalize(config).ok()?;
    abs.parent()?
        .ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// Whether a cluster passes the `--cluster` filter.
pub fn selected(g: &GlobalArgs, name: &str) -> bool {
    g.clusters.is_empty() || g.clusters.iter().any(|c| c == name)
}
