//! Where each cycle's desired state comes from (spec §2.5): the local work
//! tree, re-read every cycle, or in URL mode the head of `git.branch` fetched
//! into `<data-dir>/git-cache` every cycle.
//!
//! URL mode's fallback rule: a failed fetch serves the last good tree marked
//! `desired_stale`; with no good tree at all the cycle fails ("git sync
//! failed and no previous good tree") before anything is read from PVE. The
//! last good tree is the one this process fetched last, or, before its first
//! successful fetch, the branch the cache already holds from an earlier run
//! (so a one-shot `diff` after a good one keeps working while the remote is
//! down).
//!
//! It never writes outside the data dir (the cache and its
//! `git-cache.source` marker), never prints the git token, and never lets a
//! fetch error decide anything but staleness.

use std::path::{Path, PathBuf};

use proxops_core::config::{self, ConfigSource, ConfigSources, Overrides};
use proxops_core::repo::RepoInput;
use proxops_driver::files::expand_home;
use proxops_git::{GitError, GitSource, GitToken, RepoTree, UrlSource};
use proxops_sops::IdentitySources;

use crate::args::GlobalArgs;
use crate::context::{self, Env, Workspace};
use crate::creds;
use crate::exit::Failure;
use crate::log::{self, Level};

/// A desired-state source kept across cycles (the daemon holds one; a
/// one-shot command opens one and asks it once).
pub struct DesiredSource {
    mode: Mode,
}

enum Mode {
    Local,
    Url(Box<UrlMode>),
}

struct UrlMode {
    /// The process config (`--config`), re-read every cycle; `None` when
    /// `--git-url` alone switched to URL mode and the remote tree's own
    /// `proxops.yaml` is the process config.
    config: Option<PathBuf>,
    url: UrlSource,
    git: GitSource,
    cache_dir: PathBuf,
}

/// What the fetch needs, known before it.
struct PreFetch {
    url: String,
    branch: String,
    data_dir: String,
    token: Option<proxops_core::secret::Secret>,
    ca_file: Option<String>,
}

/// The built-in `data-dir` (spec §3.2).
const DEFAULT_DATA_DIR: &str = "~/.local/share/proxops";

impl DesiredSource {
    /// Decides the mode and, in URL mode, resolves the cache directory, the
    /// CA file and the git token (SOPS > `PROXOPS_GIT_TOKEN` > `git.token`;
    /// a conflict is exit 2). Does no network I/O.
    ///
    /// URL mode applies when `--git-url` is given, or when the `--config`
    /// file declares `git.url`; `--git-path`/`PROXOPS_GIT_PATH` always mean
    /// local mode (the explicit path wins, §2.4).
    pub fn open(g: &GlobalArgs, env: &Env) -> Result<DesiredSource, Failure> {
        if g.git_path.is_some() || env.git_path.is_some() {
            return Ok(DesiredSource { mode: Mode::Local });
        }
        let config_path = context::config_path(g, env);
        let explicit = match &config_path {
            Some(p) => Some(context::read_config(p)?),
            None if g.git_url.is_some() => None,
            None => return Ok(DesiredSource { mode: Mode::Local }),
        };
        let ov = context::overrides(g, env);
        let pre = match process_config(explicit.as_ref(), &ov) {
            Some(cfg) => {
                let Some(url) = cfg.git_url.clone() else {
                    return Ok(DesiredSource { mode: Mode::Local });
                };
                let token = creds::git_token(&cfg, None, &IdentitySources::from_process_env())?;
                PreFetch {
                    url,
                    branch: cfg.git_branch.clone(),
                    data_dir: cfg.data_dir.clone(),
                    token,
                    ca_file: cfg.git_ca_file.clone(),
                }
            }
            // `--git-url` alone: the process config is the remote tree's
            // own proxops.yaml, unknown before the fetch, so the fetch uses
            // the flags, PROXOPS_GIT_TOKEN and the built-in data dir.
            None if explicit.is_none() => PreFetch {
                url: g.git_url.clone().unwrap_or_default(),
                branch: g.git_branch.clone().unwrap_or_else(|| "main".to_owned()),
                data_dir: DEFAULT_DATA_DIR.to_owned(),
                token: env.git_token.clone(),
                ca_file: None,
            },
            // Not a loadable process config on its own: local mode reports
            // every problem with it.
            None => return Ok(DesiredSource { mode: Mode::Local }),
        };
        let config_dir = config_path
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let cache_dir = expand_home(&pre.data_dir).join("git-cache");
        let token = pre.token.and_then(|t| GitToken::new(t.expose().to_owned()));
        let mut source = UrlSource::open(&pre.url, &pre.branch, &cache_dir, token)
            .map_err(|e| Failure::input(format!("invalid configuration: git.url: {e}")))?;
        if let Some(ca) = &pre.ca_file {
            let ca = expand_home(ca);
            source = source.with_ca_file(if ca.is_absolute() {
                ca
            } else {
                config_dir.join(ca)
            });
        }
        Ok(DesiredSource {
            mode: Mode::Url(Box::new(UrlMode {
                config: config_path,
                url: source,
                git: GitSource::new(),
                cache_dir,
            })),
        })
    }

    /// `true` in URL mode.
    pub fn is_url(&self) -> bool {
        matches!(self.mode, Mode::Url(_))
    }

    /// The desired state for one cycle: the local tree re-read, or a fetch
    /// (falling back to the last good tree, marked stale). `Err` with exit 1
    /// when URL mode has no good tree at all; every cluster's cycle is then
    /// aborted and nothing may be read from PVE.
    pub fn next_cycle(&mut self, g: &GlobalArgs, env: &Env) -> Result<Workspace, Failure> {
        match &mut self.mode {
            Mode::Local => context::load_local(g, env),
            Mode::Url(u) => u.next_cycle(g, env),
        }
    }
}

impl UrlMode {
    fn next_cycle(&mut self, g: &GlobalArgs, env: &Env) -> Result<Workspace, Failure> {
        let explicit = match &self.config {
            Some(p) => Some(context::read_config(p)?),
            None => None,
        };
        let desired = if self.git.last_good().is_none() {
            let fetched = self
                .url
                .fetch()
                .and_then(|o| self.url.read_tree(&o.commit).map(|t| (o.commit, t)));
            if fetched.is_err()
                && let Some(cached) = cached_branch(&self.url, &self.cache_dir)
            {
                // An earlier run's good fetch: served, marked stale.
                let _ = self.git.record(Ok(cached));
            }
            self.git.record(fetched)
        } else {
            self.git.refresh(&mut self.url)
        };
        let desired = desired.map_err(|e| {
            let cause = match e {
                GitError::NeverFetched { last_error } => last_error.to_string(),
                other => other.to_string(),
            };
            Failure::not_ready(format!(
                "git sync failed and no previous good tree: {cause}; every cluster's cycle is aborted and nothing was read from PVE"
            ))
        })?;
        let stale_reason = desired.stale.as_ref().map(ToString::to_string);
        let commit = desired.commit.to_owned();
        if stale_reason.is_none() {
            remember_source(&self.url, &self.cache_dir);
        }
        if let Some(reason) = &stale_reason {
            log::event(
                Level::Warn,
                "git sync failed: planning from the last good tree (desired_stale)",
                &[("commit", (&commit).into()), ("error", reason.into())],
            );
        }
        let loaded = context::load_tree(
            g,
            env,
            RepoInput {
                files: &desired.tree.files,
                cluster_dirs: &desired.tree.cluster_dirs,
            },
            explicit.as_ref().map(|(n, b)| (n.as_str(), b.as_slice())),
        )?;
        let tree = context::tree_digest(
            &desired.tree.files,
            explicit.as_ref().map(|(_, b)| b.as_slice()),
        );
        let explicit_name = explicit.as_ref().map(|(n, _)| n.as_str());
        if let Some(cc) =
            loaded.config.clusters.values().find(|cc| {
                cc.secrets_file.is_some() && Some(cc.declared_in.as_str()) != explicit_name
            })
        {
            // Its secrets-file is a path in the remote tree, not on this
            // host: reading a local file of that name would be wrong.
            return Err(Failure::input(format!(
                "invalid configuration: cluster {:?}: in URL mode a secrets-file declared in the remote tree ({}) is not supported; declare the cluster, its secrets-file and its secrets block inline in the --config file",
                cc.name.as_str(),
                cc.declared_in
            )));
        }
        Ok(Workspace {
            root: None,
            commit: Some(commit),
            loaded,
            desired_stale: stale_reason.is_some(),
            stale_reason,
            tree,
        })
    }
}

/// The process config alone (no tree yet), to learn the git source;
/// `None` when it does not load.
fn process_config(explicit: Option<&(String, Vec<u8>)>, ov: &Overrides) -> Option<config::Config> {
    let sources = ConfigSources {
        process: explicit.map(|(name, bytes)| ConfigSource {
            name: name.clone(),
            bytes,
        }),
        cluster_local: Vec::new(),
        process_is_explicit: explicit.is_some(),
    };
    config::load(&sources, ov).ok()
}

/// `<data-dir>/git-cache.source`: the URL and branch of the cache's last
/// good fetch (never a token: URLs with a password are refused at `open`).
fn source_marker(cache_dir: &Path) -> PathBuf {
    cache_dir.with_extension("source")
}

fn source_text(url: &UrlSource) -> String {
    format!("{}\n{}\n", url.url(), url.branch())
}

/// Records which source the cache's good tree came from. Best effort: a
/// missing or unwritable marker only disables the cache fallback.
fn remember_source(url: &UrlSource, cache_dir: &Path) {
    let marker = source_marker(cache_dir);
    let text = source_text(url);
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(text.as_str()) {
        let _ = std::fs::write(&marker, text);
    }
}

/// The commit and tree of `origin/<branch>` as the cache holds it from an
/// earlier good fetch of this same URL and branch, if it holds one that
/// reads. A cache last filled from another source is never served.
fn cached_branch(url: &UrlSource, cache_dir: &Path) -> Option<(String, RepoTree)> {
    let marker = std::fs::read_to_string(source_marker(cache_dir)).ok()?;
    if marker != source_text(url) {
        return None;
    }
    let name = format!("refs/remotes/origin/{}", url.branch());
    let loose = std::fs::read_to_string(cache_dir.join(&name)).ok();
    let commit = loose
        .map(|s| s.trim().to_owned())
        .or_else(|| {
            let packed = std::fs::read_to_string(cache_dir.join("packed-refs")).ok()?;
            packed.lines().find_map(|l| {
                let (id, r) = l.split_once(' ')?;
                (r.trim() == name).then(|| id.to_owned())
            })
        })
        .filter(|c| matches!(c.len(), 40 | 64) && c.bytes().all(|b| b.is_ascii_hexdigit()))?;
    let tree = url.read_tree(&commit).ok()?;
    Some((commit, tree))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_tilde_prefix_means_the_home_directory() {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        if let Some(h) = home {
            assert_eq!(expand_home("~/x/y"), h.join("x/y"));
            assert_eq!(expand_home("~"), h);
        }
        assert_eq!(expand_home("/a/~/b"), PathBuf::from("/a/~/b"));
        assert_eq!(expand_home("rel"), PathBuf::from("rel"));
    }
}
