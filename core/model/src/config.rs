//! Process and cluster configuration (spec §3): the files as written, the
//! built-in defaults, the layering, and every validation rule — reported
//! together, never one at a time.
//!
//! Core sees configuration as bytes handed in by the caller; it reads no
//! file and no environment variable. Credentials found here are kept as
//! `Secret`s and are never printed.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::diag::{Diagnostic, YamlIndex};
use crate::names::{ClusterName, NodeName};
use crate::secret::Secret;
use crate::units::Duration;
use crate::yaml::{DocError, deserialize_document};

/// Default `reconcile.prune-budget`: at most this many deletions per cluster per cycle.
pub const DEFAULT_PRUNE_BUDGET: u32 = 3;
/// Default config-read concurrency per cluster (`reconcile.read-concurrency`).
/// Measured against fakepve with 20 ms per response (bench `live_cycle`,
/// docs/performance.md), a converged 200-guest cycle takes 4.46 s at 1,
/// 1.23 s at 4, 0.70 s at 8 and 0.37 s at 16. 8 takes the larger part of
/// that gain and no more: each read is proxied by the `base-url` node's
/// pveproxy to the guest's own node (`proxyto`), and only the reads of
/// its own guests run in one of its 3 workers, so 8 in flight stay within
/// what a cluster of 3 or more nodes serves at once; it is also the
/// runner's `tasks-per-cluster`. A 2,000-guest cluster reads in about 6 s
/// at 20 ms per request.
pub const DEFAULT_READ_CONCURRENCY: usize = 8;

/// Default `daemon.parallel-clusters`: clusters `proxops run` reads, plans
/// and applies at the same time. Each has its own PVE, so they do not
/// compete there; what they share is this host's CPU and the status store.
/// 4 keeps one slow or hung cluster (a task waiting out `task-timeout`)
/// from holding back the others' cycles, while a process with dozens of
/// clusters does not open dozens of connections at once.
pub const DEFAULT_PARALLEL_CLUSTERS: usize = 4;

/// Default `reconcile.lock-wait`: long enough for a cron `apply` to wait
/// out a daemon cycle that is only reading (a converged cycle of a few
/// hundred guests), short enough that a run started by hand says at once
/// who holds the cluster instead of seeming to hang.
pub const DEFAULT_LOCK_WAIT: Duration = Duration::from_secs(5);
/// `reconcile.shutdown-timeout`: see `step::PowerPolicy` in proxops-core.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(180);
/// `pve.retry.base` (§22.8): 1 s, 2 s, 4 s — a call that keeps failing
/// gives up after about 7 s, well inside a 30 s poll interval.
pub const DEFAULT_RETRY_BASE: Duration = Duration::from_secs(1);
pub const DEFAULT_RETRIES: u32 = 3;

/// A shutdown timeout as written: a duration of at least one second (PVE
/// takes whole seconds).
fn shutdown_timeout_value(text: &str) -> Result<Duration, String> {
    match Duration::parse(text) {
        Ok(d) if d.as_millis() >= 1000 => Ok(d),
        Ok(_) => Err(format!(
            "shutdown-timeout {text:?} must be at least 1s (PVE takes whole seconds)"
        )),
        Err(e) => Err(e.0),
    }
}

// ------------------------------------------------------------ file shapes

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigFile {
    #[serde(default)]
    pub log: Option<LogSection>,
    #[serde(default)]
    pub pve: Option<PveSection>,
    #[serde(default)]
    pub git: Option<GitSection>,
    #[serde(default)]
    pub reconcile: Option<ReconcileSection>,
    #[serde(default)]
    pub listen: Option<String>,
    #[serde(default)]
    pub data_dir: Option<String>,
    /// What identifies the host ProxOps runs on, for a host where it cannot
    /// be read from `/sys` (it then replaces detection).
    #[serde(default, rename = "self")]
    pub host: Option<SelfSection>,
    #[serde(default)]
    pub daemon: Option<DaemonSection>,
}

/// `self:`: the MACs and SMBIOS UUID of the host ProxOps runs on.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SelfSection {
    #[serde(default)]
    pub macs: Vec<String>,
    #[serde(default)]
    pub smbios_uuid: Option<String>,
}

/// `daemon:`: how `proxops run` schedules its clusters, and what its
/// status listener offers besides `/healthz`, `/metrics` and `/status`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DaemonSection {
    #[serde(default)]
    pub parallel_clusters: Option<i64>,
    /// `false` turns the dashboard off (its pages answer 404).
    #[serde(default)]
    pub dashboard: Option<bool>,
    /// The SOPS file holding the daemon's own secrets (access credential,
    /// webhook secret, notification URLs and tokens), relative to the
    /// declaring file and inside the repository.
    #[serde(default)]
    pub secrets_file: Option<String>,
    /// A credential every request but `/healthz` and `/hooks/git` must carry.
    #[serde(default)]
    pub access: Option<AccessSection>,
    /// `POST /hooks/git`: a forge's push starts a cycle at once.
    #[serde(default)]
    pub git_webhook: Option<GitWebhookSection>,
    /// Where to say when something needs a person.
    #[serde(default)]
    pub notify: Option<Vec<NotifySection>>,
}

/// `daemon.access`: SOPS keys of a bearer token, or of a basic-auth user
/// and password.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AccessSection {
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
}

/// `daemon.git-webhook`: the SOPS key of the secret the forges share.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GitWebhookSection {
    #[serde(default)]
    pub secret: Option<String>,
}

/// One `daemon.notify` entry.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NotifySection {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// SOPS key of the target's URL.
    #[serde(default)]
    pub url: Option<String>,
    /// SOPS key of the target's token, when it takes one.
    #[serde(default)]
    pub token: Option<String>,
    /// Only these clusters' events (default: every cluster's).
    #[serde(default)]
    pub clusters: Option<Vec<String>>,
}

/// The daemon's own settings, resolved (`daemon:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonConfig {
    /// Serve the dashboard (`daemon.dashboard`, default `true`).
    pub dashboard: bool,
    /// `daemon.secrets-file` as written, and the file that declared it.
    pub secrets_file: Option<String>,
    pub declared_in: String,
    pub access: Option<AccessRefs>,
    /// The SOPS key of the webhook secret; `None`: no `/hooks/git`.
    pub webhook_secret: Option<String>,
    pub notify: Vec<NotifyTarget>,
}

impl Default for DaemonConfig {
    fn default() -> DaemonConfig {
        DaemonConfig {
            dashboard: true,
            secrets_file: None,
            declared_in: String::new(),
            access: None,
            webhook_secret: None,
            notify: Vec::new(),
        }
    }
}

/// Which SOPS keys hold the access credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessRefs {
    Token(String),
    Basic { user: String, password: String },
}

/// The kinds of notification target (docs/operations.md says why these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TargetKind {
    /// A generic JSON `POST` (`proxops-event/v1`).
    Webhook,
    /// A Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat).
    Slack,
    /// An ntfy topic URL.
    Ntfy,
    /// A Gotify server (its application token).
    Gotify,
}

impl TargetKind {
    pub const ALL: [TargetKind; 4] = [
        TargetKind::Webhook,
        TargetKind::Slack,
        TargetKind::Ntfy,
        TargetKind::Gotify,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Webhook => "webhook",
            TargetKind::Slack => "slack",
            TargetKind::Ntfy => "ntfy",
            TargetKind::Gotify => "gotify",
        }
    }
}

/// One notification target: its name, kind, the SOPS keys of its URL and
/// token, and the clusters it hears about (empty: all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyTarget {
    pub name: String,
    pub kind: TargetKind,
    pub url: String,
    pub token: Option<String>,
    pub clusters: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LogSection {
    #[serde(default)]
    pub level: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PveSection {
    #[serde(default)]
    pub auth: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub token_id: Option<String>,
    #[serde(default)]
    pub token: Option<Secret>,
    #[serde(default)]
    pub token_value: Option<Secret>,
    #[serde(default)]
    pub password: Option<Secret>,
    #[serde(default)]
    pub ca_file: Option<String>,
    #[serde(default)]
    pub clusters: Option<BTreeMap<String, ClusterEntry>>,
    /// How a call PVE did not answer, or answered "busy", is tried again.
    #[serde(default)]
    pub retry: Option<RetrySection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RetrySection {
    #[serde(default)]
    pub base: Option<String>,
    #[serde(default)]
    pub retries: Option<i64>,
}

#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClusterEntry {
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub nodes: Vec<String>,
    #[serde(default)]
    pub secrets_file: Option<String>,
    #[serde(default)]
    pub secrets: Option<SecretRefs>,
    /// A PEM CA bundle trusted for this cluster only.
    #[serde(default)]
    pub ca_file: Option<String>,
    /// SHA-256 pin of the server certificate (`AA:BB:…`).
    #[serde(default)]
    pub fingerprint: Option<String>,
    /// Explicit opt-out of TLS verification: logged as a warning every cycle.
    #[serde(default)]
    pub insecure: Option<bool>,
    /// Explicit consent to a plain `http://` base-url (credentials cross the
    /// network in clear text): logged as a warning every cycle.
    #[serde(default)]
    pub allow_insecure_http: Option<bool>,
    /// Config reads in flight for this cluster.
    #[serde(default)]
    pub read_concurrency: Option<usize>,
    /// Explicit opt-out of the empty-desired guard: a guest kind with no
    /// manifest left may then have its tagged guests pruned (within the
    /// prune budget).
    #[serde(default)]
    pub allow_empty_prune: Option<bool>,
    /// Explicit opt-out of the firewall lock-out guard: a plan may leave
    /// the cluster firewall enabled, dropping incoming traffic, with no
    /// rule admitting PVE's management ports.
    #[serde(default)]
    pub allow_firewall_lockout: Option<bool>,
    /// This cluster's `reconcile.shutdown-timeout`.
    #[serde(default)]
    pub shutdown_timeout: Option<String>,
    /// This cluster's `reconcile.force-stop-after-timeout`.
    #[serde(default)]
    pub force_stop_after_timeout: Option<bool>,
    /// `spec.extra` keys this cluster lets through although they are
    /// host-level or never read back (exact keys: `dev0`, not `dev*`).
    #[serde(default)]
    pub allow_extra_keys: Vec<String>,
    /// This cluster's `reconcile.restart-policy`.
    #[serde(default)]
    pub restart_policy: Option<String>,
    /// This cluster's `reconcile.purge-ha-and-replicated`.
    #[serde(default)]
    pub purge_ha_and_replicated: Option<bool>,
    /// Actions in flight on one node (`tasks-per-node`).
    #[serde(default)]
    pub tasks_per_node: Option<i64>,
    /// Actions in flight in the cluster (`tasks-per-cluster`).
    #[serde(default)]
    pub tasks_per_cluster: Option<i64>,
    /// Downloads in flight to one storage of a node (`downloads-per-storage`).
    #[serde(default)]
    pub downloads_per_storage: Option<i64>,
    /// Guests made unavailable at once (`disruption-budget`).
    #[serde(default)]
    pub disruption_budget: Option<i64>,
    /// Guests of one disruption group made unavailable at once, for a
    /// group `disruption-groups` does not name.
    #[serde(default)]
    pub disruption_group_budget: Option<i64>,
    /// Named disruption groups' budgets (`{db: 1}`).
    #[serde(default)]
    pub disruption_groups: BTreeMap<String, i64>,
    /// The cluster's datacenter `tag-style`: `case-sensitive` when PVE keeps
    /// the case of tags (PVE's default lower-cases them).
    #[serde(default)]
    pub tag_style: Option<String>,
}

/// The closed `secrets:` reference block: which SOPS key holds which credential.
#[derive(Debug, Default, Deserialize, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SecretRefs {
    #[serde(default)]
    pub pve: Option<PveSecretRefs>,
    #[serde(default)]
    pub git: Option<GitSecretRefs>,
}

#[derive(Debug, Default, Deserialize, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PveSecretRefs {
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub token_id: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
}

#[derive(Debug, Default, Deserialize, Clone, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GitSecretRefs {
    #[serde(default)]
    pub token: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GitSection {
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub branch: Option<String>,
    #[serde(default)]
    pub token: Option<Secret>,
    #[serde(default)]
    pub path: Option<String>,
    /// A PEM CA bundle trusted (instead of the system store) for an https
    /// `git.url`; relative to the declaring file's directory.
    #[serde(default)]
    pub ca_file: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ReconcileSection {
    #[serde(default)]
    pub poll_interval: Option<String>,
    #[serde(default)]
    pub task_timeout: Option<String>,
    #[serde(default)]
    pub prune_budget: Option<i64>,
    #[serde(default)]
    pub read_concurrency: Option<i64>,
    #[serde(default)]
    pub lock_wait: Option<String>,
    #[serde(default)]
    pub shutdown_timeout: Option<String>,
    #[serde(default)]
    pub force_stop_after_timeout: Option<bool>,
    #[serde(default)]
    pub restart_policy: Option<String>,
    #[serde(default)]
    pub purge_ha_and_replicated: Option<bool>,
    /// How long `run` holds back a guest whose disruptive action failed,
    /// after the first failure (`hold-after-failure`).
    #[serde(default)]
    pub hold_after_failure: Option<String>,
    /// The longest such hold (`hold-max`).
    #[serde(default)]
    pub hold_max: Option<String>,
    /// Actions in flight on one node (`tasks-per-node`).
    #[serde(default)]
    pub tasks_per_node: Option<i64>,
    /// Actions in flight in the cluster (`tasks-per-cluster`).
    #[serde(default)]
    pub tasks_per_cluster: Option<i64>,
    /// Downloads in flight to one storage of a node (`downloads-per-storage`).
    #[serde(default)]
    pub downloads_per_storage: Option<i64>,
    /// Guests made unavailable at once (`disruption-budget`).
    #[serde(default)]
    pub disruption_budget: Option<i64>,
    /// Guests of one disruption group made unavailable at once, for a
    /// group `disruption-groups` does not name.
    #[serde(default)]
    pub disruption_group_budget: Option<i64>,
    /// Named disruption groups' budgets (`{db: 1}`).
    #[serde(default)]
    pub disruption_groups: BTreeMap<String, i64>,
}

pub use crate::policy::RestartPolicy;

// ------------------------------------------------------------ resolved

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    Token,
    Ticket,
}

impl AuthMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMethod::Token => "token",
            AuthMethod::Ticket => "ticket",
        }
    }
}

/// The process configuration after layering and validation.
#[derive(Debug, Clone)]
pub struct Config {
    pub log_level: String,
    pub auth: AuthMethod,
    pub user: Option<String>,
    pub token_id: Option<String>,
    pub token: Option<Secret>,
    pub token_value: Option<Secret>,
    pub password: Option<Secret>,
    pub ca_file: Option<String>,
    pub clusters: BTreeMap<ClusterName, ClusterConfig>,
    pub git_url: Option<String>,
    pub git_branch: String,
    pub git_token: Option<Secret>,
    pub git_path: Option<String>,
    /// `git.ca-file` as written (the caller resolves `~` and relative paths).
    pub git_ca_file: Option<String>,
    pub poll_interval: Duration,
    pub task_timeout: Duration,
    /// 0 = unlimited.
    pub prune_budget: u32,
    pub read_concurrency: usize,
    /// How long `apply`, `run` and `adopt --adopt-secrets` wait for a
    /// cluster another ProxOps process holds before giving up on it.
    pub lock_wait: Duration,
    /// `reconcile.restart-policy` (default `never`).
    pub restart_policy: RestartPolicy,
    /// `reconcile.purge-ha-and-replicated` (default `false`).
    pub purge_ha_and_replicated: bool,
    /// `reconcile.hold-after-failure` and `reconcile.hold-max`: how `run`
    /// holds back a guest whose shutdown, reboot or stop-start write
    /// failed (default 5m, doubling, at most 1h).
    pub hold: crate::policy::Backoff,
    /// The first wait before a PVE call is tried again (`pve.retry.base`),
    /// doubling per retry.
    pub retry_base: Duration,
    /// Retries after the first attempt (`pve.retry.retries`).
    pub retries: u32,
    pub listen: String,
    pub data_dir: String,
    /// `self:`: the host's identity as configured; `None` = read it from
    /// the host.
    pub host: Option<crate::host::HostIdentity>,
    /// `daemon.parallel-clusters`: clusters `run` cycles at the same time.
    pub parallel_clusters: usize,
    /// The rest of `daemon:`: dashboard, access, webhook, notifications.
    pub daemon: DaemonConfig,
}

#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub name: ClusterName,
    pub base_url: String,
    /// The node allowlist; empty = no allowlist check.
    pub nodes: BTreeSet<NodeName>,
    /// As written, relative to `declared_in`'s directory.
    pub secrets_file: Option<String>,
    pub secrets: SecretRefs,
    pub ca_file: Option<String>,
    pub fingerprint: Option<String>,
    pub insecure: bool,
    pub read_concurrency: usize,
    /// `allow-empty-prune: true`: the empty-desired guard is off for this
    /// cluster (a weakened safety rail, named so a reviewer sees it).
    pub allow_empty_prune: bool,
    /// `allow-firewall-lockout: true`: the firewall lock-out guard is off
    /// for this cluster (a weakened safety rail, named in every plan it
    /// lets through).
    pub allow_firewall_lockout: bool,
    /// `allow-extra-keys`: `spec.extra` keys let through although they are
    /// host-level or never read back (see `crate::extra`).
    pub allow_extra_keys: BTreeSet<String>,
    /// Whether ProxOps restarts a guest waiting for a restart to take
    /// pending changes (`restart-policy`, else `reconcile.restart-policy`).
    pub restart_policy: RestartPolicy,
    /// `purge-ha-and-replicated`: prunes of HA-managed or replicated guests
    /// are sent with `purge=1` (a weakened rail, named so a reviewer sees it).
    pub purge_ha_and_replicated: bool,
    /// `tag-style: case-sensitive`: PVE keeps the case of tags (datacenter
    /// `tag-style` `case-sensitive=1`); otherwise PVE lower-cases them.
    pub tag_case_sensitive: bool,
    /// How long a graceful shutdown of one of its guests may take
    /// (`shutdown-timeout`, else `reconcile.shutdown-timeout`).
    pub shutdown_timeout: Duration,
    /// `force-stop-after-timeout: true`: a guest that did not shut down in
    /// time is stopped hard (`status/stop`, PVE's "pulling the plug"), a
    /// weakened safety rail named so a reviewer sees it.
    pub force_stop_after_timeout: bool,
    /// How many of its actions run at once, and how many guests ProxOps
    /// makes unavailable at once (`tasks-per-node`, `tasks-per-cluster`,
    /// `downloads-per-storage`, `disruption-budget`, `disruption-groups`,
    /// each over its `reconcile.` value).
    pub limits: crate::policy::Limits,
    /// The file that declared this cluster.
    pub declared_in: String,
}

impl ClusterConfig {
    pub fn allows(&self, node: &NodeName) -> bool {
        self.nodes.is_empty() || self.nodes.contains(node)
    }
}

/// Values given on the command line or through the environment; each is
/// applied only when set (spec §3.1 layers 4 and 5).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub log_level: Option<String>,
    pub listen: Option<String>,
    pub git_url: Option<String>,
    pub git_branch: Option<String>,
    pub poll_interval_secs: Option<u64>,
    pub prune_budget: Option<i64>,
    pub pve_user: Option<String>,
    pub pve_auth: Option<String>,
    pub ca_file: Option<String>,
    /// `PROXOPS_PVE_TOKEN_VALUE`
    pub env_token_value: Option<Secret>,
    /// `PROXOPS_PVE_TOKEN`
    pub env_token: Option<Secret>,
    /// `PROXOPS_PVE_PASSWORD`
    pub env_password: Option<Secret>,
    /// `PROXOPS_PVE_USER`
    pub env_user: Option<String>,
    /// `PROXOPS_GIT_TOKEN`
    pub env_git_token: Option<Secret>,
}

/// One configuration file handed in by the caller.
#[derive(Debug, Clone)]
pub struct ConfigSource<'a> {
    /// Repo-relative path (or the path as given with `--config`).
    pub name: String,
    pub bytes: &'a [u8],
}

/// Where the configuration comes from.
#[derive(Debug, Clone, Default)]
pub struct ConfigSources<'a> {
    /// `proxops.yaml` at the repository root, or the `--config` file.
    pub process: Option<ConfigSource<'a>>,
    /// `clusters/<name>/config.yaml`, with `<name>` from the directory.
    pub cluster_local: Vec<(String, ConfigSource<'a>)>,
    /// The process file came from `--config` (URL mode or legacy layout):
    /// its clusters win over cluster-local ones.
    pub process_is_explicit: bool,
}

fn parse_file(src: &ConfigSource<'_>, diags: &mut Vec<Diagnostic>) -> Option<ConfigFile> {
    if let Err(d) = crate::bounds::check_file(&src.name, crate::bounds::FileRole::Config, src.bytes)
    {
        diags.push(*d);
        return None;
    }
    let text = match std::str::from_utf8(src.bytes) {
        Ok(t) => t,
        Err(_) => {
            diags.push(Diagnostic::file(
                &src.name,
                "invalid configuration: the file is not UTF-8 text",
            ));
            return None;
        }
    };
    if text.trim().is_empty() {
        return Some(ConfigFile::default());
    }
    let index = YamlIndex::build(text);
    match deserialize_document::<ConfigFile>(text, 0) {
        Ok(f) => Some(f),
        Err(DocError {
            path,
            message,
            pos,
            hint,
        }) => {
            let pos = index
                .repeated_key(&path)
                .or(pos)
                .or_else(|| index.locate(0, &path));
            diags.push(
                Diagnostic::file(&src.name, format!("invalid configuration: {message}"))
                    .with_field(path)
                    .at(pos)
                    .with_hint(hint),
            );
            None
        }
    }
}

/// What a `--config` file declares that decides how it is used (spec
/// §2.4): a URL-mode process file (`git.url`), a cluster-local file (one
/// or more `pve.clusters` entries and no `git.url`), or a process file.
/// Read leniently: a file that does not parse has an empty shape, and
/// [`load`] reports what is wrong with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigShape {
    /// `git.url` is set.
    pub git_url: bool,
    /// `git.path` as written.
    pub git_path: Option<String>,
    /// The names under `pve.clusters`, sorted.
    pub clusters: Vec<String>,
}

impl ConfigShape {
    pub fn of(src: &ConfigSource<'_>) -> ConfigShape {
        let Some(file) = parse_file(src, &mut Vec::new()) else {
            return ConfigShape::default();
        };
        let git = file.git.unwrap_or_default();
        ConfigShape {
            git_url: non_empty(git.url).is_some(),
            git_path: non_empty(git.path),
            clusters: file
                .pve
                .and_then(|p| p.clusters)
                .map(|c| c.into_keys().collect())
                .unwrap_or_default(),
        }
    }

    /// A cluster-local file: the process runs exactly its clusters.
    pub fn is_cluster_local(&self) -> bool {
        !self.git_url && !self.clusters.is_empty()
    }
}

/// Loads, layers and validates the configuration. Every error is returned
/// at once.
pub fn load(sources: &ConfigSources<'_>, overrides: &Overrides) -> Result<Config, Vec<Diagnostic>> {
    load_over(sources, None, overrides)
}

/// As [`load`], with `underneath` (the tree's `proxops.yaml` under a
/// cluster-local `--config` file, spec §2.4) filling every setting the
/// process file does not set. Its `git` section and its clusters are left
/// out: the operator's file decides the git source and which clusters run.
pub fn load_over(
    sources: &ConfigSources<'_>,
    underneath: Option<&ConfigSource<'_>>,
    overrides: &Overrides,
) -> Result<Config, Vec<Diagnostic>> {
    let mut diags = Vec::new();
    // Positions of every key, per file, so a rule about a value can point at its line.
    let mut indexes: BTreeMap<String, YamlIndex> = BTreeMap::new();
    for src in sources
        .process
        .iter()
        .chain(underneath)
        .chain(sources.cluster_local.iter().map(|(_, s)| s))
    {
        if let Ok(text) = std::str::from_utf8(src.bytes) {
            indexes.insert(src.name.clone(), YamlIndex::build(text));
        }
    }
    let process = match &sources.process {
        Some(src) => parse_file(src, &mut diags).map(|f| (src.name.clone(), f)),
        None => Some(("proxops.yaml".to_owned(), ConfigFile::default())),
    };
    let process = match (process, underneath, &sources.process) {
        (Some((name, file)), Some(base), Some(top)) => {
            let merged = parse_file(base, &mut diags).and_then(|b| {
                if b.host.is_some() {
                    diags.push(self_in_repository(base, &indexes));
                }
                fill_from(top, base)
            });
            Some((name, merged.unwrap_or(file)))
        }
        (None, Some(base), _) => {
            parse_file(base, &mut diags);
            None
        }
        (process, _, _) => process,
    };
    let process_name = process.as_ref().map(|(n, _)| n.clone()).unwrap_or_default();
    let mut process = process.map(|(_, f)| f).unwrap_or_default();
    // The guest ProxOps runs in is the host's to say: a repository that
    // could set `self:` could turn the guard off for that guest.
    if !sources.process_is_explicit
        && process.host.is_some()
        && let Some(src) = &sources.process
    {
        diags.push(self_in_repository(src, &indexes));
        process.host = None;
    }

    // Cluster entries: name → (entry, declaring file).
    let mut clusters: BTreeMap<String, (ClusterEntry, String)> = BTreeMap::new();
    if let Some(pve) = &mut process.pve
        && let Some(c) = pve.clusters.take()
    {
        for (name, entry) in c {
            clusters.insert(name, (entry, process_name.clone()));
        }
    }
    for (dir_name, src) in &sources.cluster_local {
        cluster_local_entry(
            dir_name,
            src,
            sources.process_is_explicit,
            &mut clusters,
            &mut diags,
        );
    }

    let explicit_file = sources.process_is_explicit.then_some(process_name.as_str());
    check_trust(&clusters, explicit_file, &indexes, &mut diags);

    // A rejected cluster-local file has its own diagnostic; "no cluster is
    // configured" on top of it would only mislead.
    let any_cluster_local = !sources.cluster_local.is_empty();
    let cfg = Some(resolve(
        process,
        &process_name,
        clusters,
        overrides,
        &indexes,
        any_cluster_local,
        &mut diags,
    ));
    if let Some(base) = underneath {
        point_at_underneath(&mut diags, sources.process.as_ref(), base, &indexes);
    }
    match cfg {
        Some(cfg) if diags.is_empty() => Ok(cfg),
        _ => {
            diags.sort();
            diags.dedup();
            Err(diags)
        }
    }
}

/// A cluster-local `clusters/<dir>/config.yaml`: exactly one entry, named
/// as its folder, taken unless an explicit process file declares the
/// cluster already.
fn cluster_local_entry(
    dir_name: &str,
    src: &ConfigSource<'_>,
    process_is_explicit: bool,
    clusters: &mut BTreeMap<String, (ClusterEntry, String)>,
    diags: &mut Vec<Diagnostic>,
) {
    let Some(file) = parse_file(src, diags) else {
        return;
    };
    let declared: Vec<(String, ClusterEntry)> = file
        .pve
        .and_then(|p| p.clusters)
        .map(|c| c.into_iter().collect())
        .unwrap_or_default();
    let index = std::str::from_utf8(src.bytes)
        .map(YamlIndex::build)
        .unwrap_or_default();
    match declared.as_slice() {
        [(name, entry)] if name == dir_name => {
            let explicit_wins = process_is_explicit && clusters.contains_key(name);
            if !explicit_wins {
                clusters.insert(name.clone(), (entry.clone(), src.name.clone()));
            }
        }
        [(name, _)] => diags.push(
            Diagnostic::file(
                &src.name,
                format!(
                    "invalid configuration: the file declares cluster {name:?}, which does not match its directory name {dir_name:?}; the key under pve.clusters must equal the directory name"
                ),
            )
            .with_field(format!("pve.clusters.{name}"))
            .at(index.locate(0, &format!("pve.clusters.{name}"))),
        ),
        [] => diags.push(
            Diagnostic::file(
                &src.name,
                format!("invalid configuration: a cluster-local config must declare exactly one entry pve.clusters.{dir_name}"),
            )
            .with_field("pve.clusters")
            .at(index.locate(0, "pve.clusters")),
        ),
        _ => diags.push(
            Diagnostic::file(
                &src.name,
                format!(
                    "invalid configuration: a cluster-local config declares {} clusters; it must declare exactly one, pve.clusters.{dir_name}",
                    declared.len()
                ),
            )
            .with_field("pve.clusters")
            .at(index.locate(0, "pve.clusters")),
        ),
    }
}

/// The process file `top` with every key it does not set taken from
/// `base` (nested sections key by key; an empty value counts as not set),
/// leaving out `base`'s `git` section and `pve.clusters`. Both files have
/// parsed on their own, so the merge parses too; `None` only if it does not.
fn fill_from(top: &ConfigSource<'_>, base: &ConfigSource<'_>) -> Option<ConfigFile> {
    use serde_yaml::Value;
    fn value(src: &ConfigSource<'_>) -> Option<Value> {
        let text = std::str::from_utf8(src.bytes).ok()?;
        match crate::yaml::document_values(text).ok()?.into_iter().next() {
            None | Some(Value::Null) => Some(Value::Mapping(Default::default())),
            v => v,
        }
    }
    fn fill(top: &mut Value, base: &Value) {
        match (top, base) {
            (Value::Mapping(t), Value::Mapping(b)) => {
                for (k, bv) in b {
                    match t.get_mut(k) {
                        Some(tv) if !tv.is_null() => fill(tv, bv),
                        _ => {
                            t.insert(k.clone(), bv.clone());
                        }
                    }
                }
            }
            (t @ Value::Null, b) => *t = b.clone(),
            _ => {}
        }
    }
    let mut merged = value(top)?;
    let mut base = value(base)?;
    if let Value::Mapping(m) = &mut base {
        m.remove("git");
        m.remove("self");
        if let Some(Value::Mapping(pve)) = m.get_mut("pve") {
            pve.remove("clusters");
        }
    }
    fill(&mut merged, &base);
    crate::yaml::from_value(&merged)
}

/// `self:` in the repository's `proxops.yaml`: refused.
fn self_in_repository(src: &ConfigSource<'_>, indexes: &BTreeMap<String, YamlIndex>) -> Diagnostic {
    Diagnostic::file(
        &src.name,
        "invalid configuration: self: belongs in the host's own configuration (the --config file), never in the repository: a repository that names the guest ProxOps runs in could name another one and leave this one unguarded",
    )
    .with_field("self")
    .at(indexes.get(&src.name).and_then(|i| i.locate(0, "self")))
}

/// A rule about a value the process file took from `base` names `base`
/// and the value's line there, not the process file.
fn point_at_underneath(
    diags: &mut [Diagnostic],
    top: Option<&ConfigSource<'_>>,
    base: &ConfigSource<'_>,
    indexes: &BTreeMap<String, YamlIndex>,
) {
    let Some(top) = top else { return };
    let set_in_top = |field: &str| {
        let text = std::str::from_utf8(top.bytes).unwrap_or("");
        let doc = crate::yaml::document_values(text)
            .ok()
            .and_then(|d| d.into_iter().next());
        let mut at = doc.as_ref();
        for key in field.split('.') {
            at = at.and_then(|v| v.get(key)).filter(|v| !v.is_null());
        }
        at.is_some()
    };
    for d in diags.iter_mut() {
        let Some(field) = d.field.clone() else {
            continue;
        };
        if d.file != top.name || set_in_top(&field) {
            continue;
        }
        if let Some(pos) = indexes.get(&base.name).and_then(|i| i.locate(0, &field)) {
            d.file = base.name.clone();
            d.line = Some(pos.0);
            d.column = Some(pos.1);
        }
    }
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

fn non_empty_secret(s: Option<Secret>) -> Option<Secret> {
    s.filter(|s| !s.is_empty())
}

fn resolve(
    file: ConfigFile,
    file_name: &str,
    clusters: BTreeMap<String, (ClusterEntry, String)>,
    ov: &Overrides,
    indexes: &BTreeMap<String, YamlIndex>,
    any_cluster_local: bool,
    diags: &mut Vec<Diagnostic>,
) -> Config {
    let locate = |file: &str, field: &str| indexes.get(file).and_then(|i| i.locate(0, field));
    let err = |field: &str, msg: String| {
        Diagnostic::file(file_name, format!("invalid configuration: {msg}"))
            .with_field(field)
            .at(locate(file_name, field))
    };
    let mut pve = file.pve.unwrap_or_default();
    let git = file.git.unwrap_or_default();
    let rec = file.reconcile.unwrap_or_default();
    let limits = resolve_limits(
        &crate::policy::Limits::default(),
        &LimitKeys::of_reconcile(&rec),
        &mut |field, msg| diags.push(err(&format!("reconcile.{field}"), msg)),
    );

    let log_level = ov
        .log_level
        .clone()
        .or_else(|| file.log.and_then(|l| l.level))
        .unwrap_or_else(|| "info".to_owned());
    if !["debug", "info", "warn", "error"].contains(&log_level.as_str()) {
        diags.push(err(
            "log.level",
            format!("log level {log_level:?} is not one of debug, info, warn, error"),
        ));
    }

    let login = resolve_login(ov, &mut pve, &err, diags);
    let source = resolve_git(ov, git, &err, diags);
    let retry = pve.retry.unwrap_or_default();
    let timing = resolve_timing(ov, &rec, &retry, &err, diags);
    let rules = resolve_rules(ov, &rec, &err, diags);
    let force_stop_after_timeout = rec.force_stop_after_timeout.unwrap_or(false);
    let purge_ha_and_replicated = rec.purge_ha_and_replicated.unwrap_or(false);
    let process = resolve_process(ov, file.listen, file.data_dir, file.host, &err, diags);
    let daemon_section = file.daemon.unwrap_or_default();
    let daemon = resolve_daemon(&daemon_section, file_name, &clusters, &mut |field, msg| {
        diags.push(err(field, msg));
    });
    let parallel_clusters = match daemon_section.parallel_clusters {
        Some(n) if (1..=64).contains(&n) => n as usize,
        Some(n) => {
            diags.push(err(
                "daemon.parallel-clusters",
                format!("parallel-clusters {n} must be 1-64"),
            ));
            DEFAULT_PARALLEL_CLUSTERS
        }
        None => DEFAULT_PARALLEL_CLUSTERS,
    };
    let ca_file = non_empty(ov.ca_file.clone()).or(non_empty(pve.ca_file));

    if clusters.is_empty() && !any_cluster_local {
        diags.push(err(
            "pve.clusters",
            "no cluster is configured: add clusters/<name>/config.yaml declaring pve.clusters.<name>".to_owned(),
        ));
    }
    let defaults = ClusterDefaults {
        read_concurrency: rules.read_concurrency,
        restart_policy: rules.restart_policy,
        shutdown_timeout: timing.shutdown_timeout,
        limits,
        purge_ha_and_replicated,
        force_stop_after_timeout,
    };
    let mut resolved = BTreeMap::new();
    for (name, (entry, declared_in)) in clusters {
        if let Some(c) = resolve_cluster(name, entry, declared_in, &defaults, indexes, diags) {
            resolved.insert(c.name.clone(), c);
        }
    }

    Config {
        log_level,
        auth: login.auth,
        user: login.user,
        token_id: non_empty(pve.token_id),
        token: login.token,
        token_value: login.token_value,
        password: login.password,
        ca_file,
        clusters: resolved,
        git_url: source.url,
        git_branch: source.branch,
        git_token: source.token,
        git_path: source.path,
        git_ca_file: source.ca_file,
        poll_interval: timing.poll_interval,
        task_timeout: timing.task_timeout,
        prune_budget: rules.prune_budget,
        read_concurrency: rules.read_concurrency,
        lock_wait: timing.lock_wait,
        restart_policy: rules.restart_policy,
        purge_ha_and_replicated,
        hold: rules.hold,
        retry_base: timing.retry_base,
        retries: timing.retries,
        listen: process.listen,
        data_dir: process.data_dir,
        host: process.host,
        parallel_clusters,
        daemon,
    }
}

/// `reconcile:`'s durations and `pve.retry`, each checked.
struct Timing {
    poll_interval: Duration,
    task_timeout: Duration,
    lock_wait: Duration,
    shutdown_timeout: Duration,
    retry_base: Duration,
    retries: u32,
}

fn resolve_timing(
    ov: &Overrides,
    rec: &ReconcileSection,
    retry: &RetrySection,
    err: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> Timing {
    let poll_interval = match (
        ov.poll_interval_secs.filter(|s| *s > 0),
        rec.poll_interval.as_ref(),
    ) {
        (Some(s), _) => Duration::from_secs(s),
        (None, Some(t)) => Duration::parse(t).unwrap_or_else(|e| {
            diags.push(err("reconcile.poll-interval", e.0));
            Duration::from_secs(30)
        }),
        (None, None) => Duration::from_secs(30),
    };
    if poll_interval.as_millis() == 0 {
        diags.push(err(
            "reconcile.poll-interval",
            "poll-interval must be greater than 0".to_owned(),
        ));
    }
    let task_timeout = match rec.task_timeout.as_ref() {
        Some(t) => Duration::parse(t).unwrap_or_else(|e| {
            diags.push(err("reconcile.task-timeout", e.0));
            Duration::from_secs(1800)
        }),
        None => Duration::from_secs(1800),
    };
    if task_timeout.as_millis() == 0 {
        diags.push(err(
            "reconcile.task-timeout",
            "task-timeout must be greater than 0".to_owned(),
        ));
    }
    let lock_wait = match rec.lock_wait.as_ref() {
        Some(t) => Duration::parse(t).unwrap_or_else(|e| {
            diags.push(err("reconcile.lock-wait", e.0));
            DEFAULT_LOCK_WAIT
        }),
        None => DEFAULT_LOCK_WAIT,
    };
    let shutdown_timeout = match rec.shutdown_timeout.as_ref() {
        Some(t) => shutdown_timeout_value(t).unwrap_or_else(|e| {
            diags.push(err("reconcile.shutdown-timeout", e));
            DEFAULT_SHUTDOWN_TIMEOUT
        }),
        None => DEFAULT_SHUTDOWN_TIMEOUT,
    };
    let retry_base = match retry.base.as_ref() {
        Some(t) => match Duration::parse(t) {
            Ok(d) if d.as_millis() > 0 && d <= Duration::from_secs(30) => d,
            Ok(_) => {
                diags.push(err(
                    "pve.retry.base",
                    format!("retry base {t:?} must be above 0 and at most 30s"),
                ));
                DEFAULT_RETRY_BASE
            }
            Err(e) => {
                diags.push(err("pve.retry.base", e.0));
                DEFAULT_RETRY_BASE
            }
        },
        None => DEFAULT_RETRY_BASE,
    };
    let retries = match retry.retries {
        Some(n) if (0..=10).contains(&n) => n as u32,
        Some(n) => {
            diags.push(err(
                "pve.retry.retries",
                format!("retries {n} must be 0-10"),
            ));
            DEFAULT_RETRIES
        }
        None => DEFAULT_RETRIES,
    };
    Timing {
        poll_interval,
        task_timeout,
        lock_wait,
        shutdown_timeout,
        retry_base,
        retries,
    }
}

/// `reconcile:`'s rules: the prune budget, the restart policy, how long a
/// guest is held after a failed disruptive action, and read concurrency.
struct Rules {
    prune_budget: u32,
    restart_policy: RestartPolicy,
    hold: crate::policy::Backoff,
    read_concurrency: usize,
}

fn resolve_rules(
    ov: &Overrides,
    rec: &ReconcileSection,
    err: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> Rules {
    let budget_raw = ov
        .prune_budget
        .filter(|b| *b >= 0)
        .or(rec.prune_budget)
        .unwrap_or(DEFAULT_PRUNE_BUDGET as i64);
    let prune_budget = if budget_raw < 0 || budget_raw > u32::MAX as i64 {
        diags.push(err(
            "reconcile.prune-budget",
            format!("prune-budget {budget_raw} must be 0 (unlimited) or more"),
        ));
        DEFAULT_PRUNE_BUDGET
    } else {
        budget_raw as u32
    };
    let restart_policy = match rec.restart_policy.as_deref().map(RestartPolicy::parse) {
        None => RestartPolicy::Never,
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            diags.push(err("reconcile.restart-policy", e));
            RestartPolicy::Never
        }
    };
    let mut hold_duration = |field: &str, text: Option<&String>, default| match text {
        None => default,
        Some(t) => match Duration::parse(t) {
            Ok(d) if d.as_millis() >= 1000 => d.as_std(),
            Ok(_) => {
                diags.push(err(field, format!("{t:?} must be at least 1s")));
                default
            }
            Err(e) => {
                diags.push(err(field, e.0));
                default
            }
        },
    };
    let mut hold = crate::policy::Backoff {
        first: hold_duration(
            "reconcile.hold-after-failure",
            rec.hold_after_failure.as_ref(),
            crate::policy::Backoff::DEFAULT_FIRST,
        ),
        max: hold_duration(
            "reconcile.hold-max",
            rec.hold_max.as_ref(),
            crate::policy::Backoff::DEFAULT_MAX,
        ),
    };
    if hold.max < hold.first {
        diags.push(err(
            "reconcile.hold-max",
            format!(
                "hold-max ({}s) must not be shorter than hold-after-failure ({}s)",
                hold.max.as_secs(),
                hold.first.as_secs()
            ),
        ));
        hold.max = hold.first;
    }
    let read_concurrency = match rec.read_concurrency {
        Some(n) if (1..=64).contains(&n) => n as usize,
        Some(n) => {
            diags.push(err(
                "reconcile.read-concurrency",
                format!("read-concurrency {n} must be 1-64"),
            ));
            DEFAULT_READ_CONCURRENCY
        }
        None => DEFAULT_READ_CONCURRENCY,
    };
    Rules {
        prune_budget,
        restart_policy,
        hold,
        read_concurrency,
    }
}

/// Who ProxOps is on PVE: the method, the user and the secrets, the
/// environment before the file.
struct Login {
    auth: AuthMethod,
    user: Option<String>,
    token: Option<Secret>,
    token_value: Option<Secret>,
    password: Option<Secret>,
}

fn resolve_login(
    ov: &Overrides,
    pve: &mut PveSection,
    err: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> Login {
    let auth_text = ov
        .pve_auth
        .clone()
        .or(pve.auth.take())
        .unwrap_or_else(|| "token".to_owned());
    let auth = match auth_text.as_str() {
        "token" => AuthMethod::Token,
        "ticket" => AuthMethod::Ticket,
        other => {
            diags.push(err(
                "pve.auth",
                format!("auth {other:?} is not one of token, ticket"),
            ));
            AuthMethod::Token
        }
    };

    let user = non_empty(ov.env_user.clone())
        .or(non_empty(ov.pve_user.clone()))
        .or(non_empty(pve.user.take()));
    let token = non_empty_secret(ov.env_token.clone()).or(non_empty_secret(pve.token.take()));
    let token_value =
        non_empty_secret(ov.env_token_value.clone()).or(non_empty_secret(pve.token_value.take()));
    let password =
        non_empty_secret(ov.env_password.clone()).or(non_empty_secret(pve.password.take()));
    if auth == AuthMethod::Token && password.is_some() && ov.env_password.is_none() {
        diags.push(err(
            "pve.password",
            "pve.password must be empty with auth: token (use auth: ticket for password login)"
                .to_owned(),
        ));
    }

    Login {
        auth,
        user,
        token,
        token_value,
        password,
    }
}

/// Where the repository comes from: `git:`, under the overrides.
struct GitSource {
    url: Option<String>,
    path: Option<String>,
    branch: String,
    token: Option<Secret>,
    ca_file: Option<String>,
}

fn resolve_git(
    ov: &Overrides,
    git: GitSection,
    err: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> GitSource {
    let git_url = non_empty(ov.git_url.clone()).or(non_empty(git.url));
    let git_path = if ov.git_url.is_some() {
        None
    } else {
        non_empty(git.path)
    };
    if git_url.is_some() && git_path.is_some() {
        diags.push(err(
            "git.url",
            "git.url and git.path are mutually exclusive: set one".to_owned(),
        ));
    }
    let git_branch = ov
        .git_branch
        .clone()
        .or(git.branch)
        .unwrap_or_else(|| "main".to_owned());
    if git_branch.trim().is_empty() {
        diags.push(err("git.branch", "git.branch must not be empty".to_owned()));
    }
    let git_token = non_empty_secret(ov.env_git_token.clone()).or(non_empty_secret(git.token));
    let git_ca_file = non_empty(git.ca_file);

    GitSource {
        url: git_url,
        path: git_path,
        branch: git_branch,
        token: git_token,
        ca_file: git_ca_file,
    }
}

/// The process' own settings: where it listens, where it keeps its data,
/// and how it knows the guest it runs in.
struct Process {
    listen: String,
    data_dir: String,
    host: Option<crate::host::HostIdentity>,
}

fn resolve_process(
    ov: &Overrides,
    listen: Option<String>,
    data_dir: Option<String>,
    host: Option<SelfSection>,
    err: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> Process {
    let listen = ov
        .listen
        .clone()
        .or(listen)
        .unwrap_or_else(|| "127.0.0.1:9494".to_owned());
    if listen
        .rsplit_once(':')
        .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
    {
        diags.push(err(
            "listen",
            format!("listen {listen:?} must be host:port, e.g. 127.0.0.1:9494"),
        ));
    }
    let data_dir = non_empty(data_dir).unwrap_or_else(|| "~/.local/share/proxops".to_owned());
    // Locks and the record of which cluster manages which PVE live there:
    // a relative path would put them wherever the process was started, so
    // two processes would not meet there.
    if !(data_dir.starts_with('/') || data_dir == "~" || data_dir.starts_with("~/")) {
        diags.push(err(
            "data-dir",
            format!(
                "data-dir {data_dir:?} must be an absolute path (or start with ~/): the cluster locks and the record of which cluster manages which PVE are kept there, and every process on this host must find the same ones"
            ),
        ));
    }
    let host = host.and_then(|h| {
        let mut bad = false;
        for (i, m) in h.macs.iter().enumerate() {
            if let Err(e) = crate::host::HostIdentity::new([m.as_str()], None) {
                diags.push(err(&format!("self.macs[{i}]"), e.0));
                bad = true;
            }
        }
        if let Some(u) = &h.smbios_uuid
            && let Err(e) = crate::host::HostIdentity::new(None, Some(u))
        {
            diags.push(err("self.smbios-uuid", e.0));
            bad = true;
        }
        if bad {
            return None;
        }
        crate::host::HostIdentity::new(h.macs.iter().map(String::as_str), h.smbios_uuid.as_deref())
            .ok()
    });
    Process {
        listen,
        data_dir,
        host,
    }
}

/// What a cluster's entry takes from the file's top level when it does
/// not say otherwise.
struct ClusterDefaults {
    read_concurrency: usize,
    restart_policy: RestartPolicy,
    shutdown_timeout: Duration,
    limits: crate::policy::Limits,
    purge_ha_and_replicated: bool,
    force_stop_after_timeout: bool,
}

/// One `pve.clusters.<name>` entry, every problem reported at its line in
/// the file that declares it; `None` when its name is not a cluster name.
fn resolve_cluster(
    name: String,
    entry: ClusterEntry,
    declared_in: String,
    defaults: &ClusterDefaults,
    indexes: &BTreeMap<String, YamlIndex>,
    diags: &mut Vec<Diagnostic>,
) -> Option<ClusterConfig> {
    let locate = |file: &str, field: &str| indexes.get(file).and_then(|i| i.locate(0, field));
    let cerr = |field: &str, msg: String| {
        let path = format!(
            "pve.clusters.{name}{}{field}",
            if field.is_empty() { "" } else { "." }
        );
        let pos = locate(&declared_in, &path);
        Diagnostic::file(
            &declared_in,
            format!("invalid configuration: cluster {name:?}: {msg}"),
        )
        .with_field(path)
        .at(pos)
    };
    let cname = match ClusterName::new(&name) {
        Ok(n) => Some(n),
        Err(e) => {
            diags.push(cerr("", e.0));
            None
        }
    };
    let base_url = entry.base_url.clone().unwrap_or_default();
    if base_url.trim().is_empty() {
        diags.push(cerr(
            "base-url",
            "base-url is required, e.g. https://pve1.example.org:8006".to_owned(),
        ));
    } else if let Err(e) = crate::manifest::check_url(&base_url) {
        diags.push(cerr("base-url", e));
    } else if let Err(e) = api_root(&base_url) {
        diags.push(cerr("base-url", e));
    }
    let nodes = allowlist(&entry.nodes, &cerr, diags);
    let rc = match entry.read_concurrency {
        Some(n) if (1..=64).contains(&n) => n,
        Some(n) => {
            diags.push(cerr(
                "read-concurrency",
                format!("read-concurrency {n} must be 1-64"),
            ));
            defaults.read_concurrency
        }
        None => defaults.read_concurrency,
    };
    check_secrets_and_fingerprint(&entry, &cerr, diags);
    let allow_extra_keys = extra_keys(&entry.allow_extra_keys, &cerr, diags);
    let cluster_restart = match entry.restart_policy.as_deref().map(RestartPolicy::parse) {
        None => defaults.restart_policy,
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            diags.push(cerr("restart-policy", e));
            defaults.restart_policy
        }
    };
    let tag_case_sensitive = tag_case_sensitive(entry.tag_style.as_deref(), &cerr, diags);
    let cluster_shutdown_timeout = match &entry.shutdown_timeout {
        Some(t) => shutdown_timeout_value(t).unwrap_or_else(|e| {
            diags.push(cerr("shutdown-timeout", e));
            defaults.shutdown_timeout
        }),
        None => defaults.shutdown_timeout,
    };
    let cluster_limits = resolve_limits(
        &defaults.limits,
        &LimitKeys::of_cluster(&entry),
        &mut |field, msg| diags.push(cerr(field, msg)),
    );
    let name = cname?;
    Some(ClusterConfig {
        name,
        base_url: api_root(&base_url).unwrap_or_else(|_| base_url.trim_end_matches('/').to_owned()),
        nodes,
        secrets_file: entry.secrets_file.clone(),
        secrets: entry.secrets.clone().unwrap_or_default(),
        ca_file: non_empty(entry.ca_file.clone()),
        fingerprint: entry.fingerprint.clone(),
        insecure: entry.insecure.unwrap_or(false),
        read_concurrency: rc,
        allow_empty_prune: entry.allow_empty_prune.unwrap_or(false),
        allow_firewall_lockout: entry.allow_firewall_lockout.unwrap_or(false),
        allow_extra_keys,
        restart_policy: cluster_restart,
        purge_ha_and_replicated: entry
            .purge_ha_and_replicated
            .unwrap_or(defaults.purge_ha_and_replicated),
        tag_case_sensitive,
        shutdown_timeout: cluster_shutdown_timeout,
        force_stop_after_timeout: entry
            .force_stop_after_timeout
            .unwrap_or(defaults.force_stop_after_timeout),
        limits: cluster_limits,
        declared_in,
    })
}

/// A cluster's `fingerprint:`, `secrets-file:` and `secrets:`, checked for
/// their form; the files themselves are read later.
fn check_secrets_and_fingerprint(
    entry: &ClusterEntry,
    cerr: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) {
    if let Some(fp) = &entry.fingerprint {
        let hex: String = fp.chars().filter(|c| *c != ':').collect();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            diags.push(cerr(
                "fingerprint",
                "fingerprint must be a SHA-256 certificate fingerprint: 32 hex pairs, e.g. AB:CD:…"
                    .to_owned(),
            ));
        }
    }
    if let Some(sf) = &entry.secrets_file
        && (sf.trim().is_empty() || sf.contains('\0'))
    {
        diags.push(cerr(
            "secrets-file",
            "secrets-file must be a path".to_owned(),
        ));
    }
    if entry.secrets.is_some() && entry.secrets_file.is_none() {
        diags.push(cerr(
            "secrets",
            "a secrets: block needs secrets-file: naming the SOPS file".to_owned(),
        ));
    }
}

/// A cluster's `tag-style:`: whether PVE compares tags case-sensitively.
fn tag_case_sensitive(
    style: Option<&str>,
    cerr: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> bool {
    match style {
        None | Some("lower-case") => false,
        Some("case-sensitive") => true,
        Some(other) => {
            diags.push(cerr(
                "tag-style",
                format!("invalid tag-style {other:?}: use \"lower-case\" (PVE's default) or \"case-sensitive\" (the datacenter's tag-style has case-sensitive=1)"),
            ));
            false
        }
    }
}

/// A cluster's `nodes:`, each a node name, none twice.
fn allowlist(
    listed: &[String],
    cerr: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> BTreeSet<NodeName> {
    let mut nodes = BTreeSet::new();
    for (i, n) in listed.iter().enumerate() {
        match NodeName::new(n.trim()) {
            Ok(node) => {
                if !nodes.insert(node) {
                    diags.push(cerr(
                        &format!("nodes[{i}]"),
                        format!("node {n:?} is listed twice"),
                    ));
                }
            }
            Err(e) => diags.push(cerr(&format!("nodes[{i}]"), e.0)),
        }
    }
    nodes
}

/// A cluster's `allow-extra-keys:`, each an exact PVE key, none twice.
fn extra_keys(
    listed: &[String],
    cerr: &dyn Fn(&str, String) -> Diagnostic,
    diags: &mut Vec<Diagnostic>,
) -> BTreeSet<String> {
    let mut allow_extra_keys = BTreeSet::new();
    for (i, k) in listed.iter().enumerate() {
        let well_formed = !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !well_formed {
            diags.push(cerr(
                &format!("allow-extra-keys[{i}]"),
                format!("{k:?} is not a PVE key: list exact keys of letters, digits, '-', '_' and '.' (dev0, not dev*)"),
            ));
        } else if !allow_extra_keys.insert(k.clone()) {
            diags.push(cerr(
                &format!("allow-extra-keys[{i}]"),
                format!("key {k:?} is listed twice"),
            ));
        }
    }
    allow_extra_keys
}

/// `daemon:` beyond `parallel-clusters`, every problem told through
/// `bad(field, message)`.
fn resolve_daemon(
    d: &DaemonSection,
    file_name: &str,
    clusters: &BTreeMap<String, (ClusterEntry, String)>,
    bad: &mut dyn FnMut(&str, String),
) -> DaemonConfig {
    let key = |field: &str, v: &Option<String>, bad: &mut dyn FnMut(&str, String)| match v
        .as_deref()
        .map(str::trim)
    {
        Some("") => {
            bad(
                field,
                format!("{field} is empty: name a key of the SOPS file"),
            );
            None
        }
        v => v.map(str::to_owned),
    };
    let access = d.access.as_ref().and_then(|a| {
        let token = key("daemon.access.token", &a.token, bad);
        let user = key("daemon.access.user", &a.user, bad);
        let password = key("daemon.access.password", &a.password, bad);
        match (token, user, password) {
            (Some(t), None, None) => Some(AccessRefs::Token(t)),
            (None, Some(user), Some(password)) => Some(AccessRefs::Basic { user, password }),
            _ => {
                bad(
                    "daemon.access",
                    "access takes either token (a bearer token) or user and password (basic auth), by their SOPS keys".to_owned(),
                );
                None
            }
        }
    });
    let webhook_secret = d.git_webhook.as_ref().and_then(|w| {
        let secret = key("daemon.git-webhook.secret", &w.secret, bad);
        if secret.is_none() && w.secret.is_none() {
            bad(
                "daemon.git-webhook.secret",
                "git-webhook needs secret: the SOPS key of the secret the forge signs with"
                    .to_owned(),
            );
        }
        secret
    });
    let notify = resolve_notify(d.notify.as_deref().unwrap_or_default(), clusters, bad);
    let secrets_file = d.secrets_file.clone().filter(|f| !f.trim().is_empty());
    if secrets_file.is_none()
        && (access.is_some() || webhook_secret.is_some() || !notify.is_empty())
    {
        bad(
            "daemon.secrets-file",
            "daemon.access, daemon.git-webhook and daemon.notify take their secrets from a SOPS file: set daemon.secrets-file".to_owned(),
        );
    }
    DaemonConfig {
        dashboard: d.dashboard.unwrap_or(true),
        secrets_file,
        declared_in: file_name.to_owned(),
        access,
        webhook_secret,
        notify,
    }
}

fn resolve_notify(
    entries: &[NotifySection],
    clusters: &BTreeMap<String, (ClusterEntry, String)>,
    bad: &mut dyn FnMut(&str, String),
) -> Vec<NotifyTarget> {
    let mut out: Vec<NotifyTarget> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let at = |field: &str| format!("daemon.notify[{i}].{field}");
        let name = e.name.clone().unwrap_or_default();
        if crate::names::ClusterName::new(&name).is_err() {
            bad(
                &at("name"),
                format!("notify target name {name:?} must be lower-case letters, digits and -"),
            );
            continue;
        }
        if out.iter().any(|t| t.name == name) {
            bad(
                &at("name"),
                format!("notify target {name:?} is named twice"),
            );
            continue;
        }
        let kinds: Vec<&str> = TargetKind::ALL.iter().map(|k| k.as_str()).collect();
        let kind_text = e.kind.clone().unwrap_or_default();
        let Some(kind) = TargetKind::ALL
            .into_iter()
            .find(|k| k.as_str() == kind_text)
        else {
            bad(
                &at("type"),
                format!(
                    "notify target {name:?}: type {kind_text:?} is not one of {}",
                    kinds.join(", ")
                ),
            );
            continue;
        };
        let Some(url) = e.url.clone().filter(|u| !u.trim().is_empty()) else {
            bad(
                &at("url"),
                format!("notify target {name:?} needs url: the SOPS key of its URL"),
            );
            continue;
        };
        let listed = e.clusters.clone().unwrap_or_default();
        for c in listed.iter().filter(|c| !clusters.contains_key(c.as_str())) {
            bad(
                &at("clusters"),
                format!("notify target {name:?} names cluster {c:?}, which is not configured"),
            );
        }
        out.push(NotifyTarget {
            name,
            kind,
            url,
            token: e.token.clone().filter(|t| !t.trim().is_empty()),
            clusters: listed,
        });
    }
    out
}

// ------------------------------------------------------------ limits

/// The limit keys of a `reconcile:` section or of one cluster's entry.
struct LimitKeys<'a> {
    tasks_per_node: Option<i64>,
    tasks_per_cluster: Option<i64>,
    downloads_per_storage: Option<i64>,
    disruption_budget: Option<i64>,
    disruption_group_budget: Option<i64>,
    disruption_groups: &'a BTreeMap<String, i64>,
}

impl LimitKeys<'_> {
    fn of_reconcile(r: &ReconcileSection) -> LimitKeys<'_> {
        LimitKeys {
            tasks_per_node: r.tasks_per_node,
            tasks_per_cluster: r.tasks_per_cluster,
            downloads_per_storage: r.downloads_per_storage,
            disruption_budget: r.disruption_budget,
            disruption_group_budget: r.disruption_group_budget,
            disruption_groups: &r.disruption_groups,
        }
    }

    fn of_cluster(c: &ClusterEntry) -> LimitKeys<'_> {
        LimitKeys {
            tasks_per_node: c.tasks_per_node,
            tasks_per_cluster: c.tasks_per_cluster,
            downloads_per_storage: c.downloads_per_storage,
            disruption_budget: c.disruption_budget,
            disruption_group_budget: c.disruption_group_budget,
            disruption_groups: &c.disruption_groups,
        }
    }
}

/// The largest value any limit takes: more workers than this would only
/// queue on pveproxy.
const MAX_LIMIT: i64 = 64;

/// `keys` over `base`; a value outside 1-64 (or a group name that is not
/// a plain name) is reported through `bad(field, message)` and the base
/// value kept.
fn resolve_limits(
    base: &crate::policy::Limits,
    keys: &LimitKeys<'_>,
    bad: &mut dyn FnMut(&str, String),
) -> crate::policy::Limits {
    let mut limits = crate::policy::Limits {
        per_node: limit("tasks-per-node", keys.tasks_per_node, base.per_node, bad),
        per_cluster: limit(
            "tasks-per-cluster",
            keys.tasks_per_cluster,
            base.per_cluster,
            bad,
        ),
        downloads_per_storage: limit(
            "downloads-per-storage",
            keys.downloads_per_storage,
            base.downloads_per_storage,
            bad,
        ),
        disruption: crate::policy::DisruptionBudget {
            cluster: limit(
                "disruption-budget",
                keys.disruption_budget,
                base.disruption.cluster,
                bad,
            ),
            group_default: limit(
                "disruption-group-budget",
                keys.disruption_group_budget,
                base.disruption.group_default,
                bad,
            ),
            groups: base.disruption.groups.clone(),
        },
    };
    for (name, n) in keys.disruption_groups {
        let field = format!("disruption-groups.{name}");
        let plain = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !plain {
            bad(
                &field,
                format!(
                    "disruption group {name:?} must be a name of letters, digits, '-', '_' and '.'"
                ),
            );
            continue;
        }
        let budget = limit(&field, Some(*n), 1, bad);
        limits.disruption.groups.insert(name.clone(), budget);
    }
    limits
}

/// One limit: `value` when it is 1-64, else `base` and a diagnostic.
fn limit(field: &str, value: Option<i64>, base: usize, bad: &mut dyn FnMut(&str, String)) -> usize {
    match value {
        None => base,
        Some(n) if (1..=MAX_LIMIT).contains(&n) => n as usize,
        Some(n) => {
            bad(field, format!("{field} {n} must be 1-{MAX_LIMIT}"));
            base
        }
    }
}

// ------------------------------------------------------------ trust rules

/// Where a `base-url` connects: the host, lower-case, without a trailing
/// dot (an IP address in its canonical form, an IPv4-mapped IPv6 address
/// as IPv4) and the port, as written or the scheme's default (443 for
/// https, 80 for http — what the client dials). Scheme, user info and path
/// do not count: `http://h:8006` and `https://H.:8006/api2/json` reach the
/// same listener.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    /// `None` when `url` is not an `http(s)://host[:port]…` URL.
    pub fn parse(url: &str) -> Option<Endpoint> {
        let url = url.trim();
        let scheme_end = url.find("://")?;
        let default_port = match url[..scheme_end].to_ascii_lowercase().as_str() {
            "https" => 443,
            "http" => 80,
            _ => return None,
        };
        let rest = &url[scheme_end + 3..];
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let (host, port) = match authority.strip_prefix('[') {
            Some(inner) => {
                let (ip, after) = inner.split_once(']')?;
                let ip: core::net::Ipv6Addr = ip.parse().ok()?;
                let host = match ip.to_ipv4_mapped() {
                    Some(v4) => v4.to_string(),
                    None => format!("[{ip}]"),
                };
                (host, after.strip_prefix(':'))
            }
            None => {
                let (host, port) = match authority.split_once(':') {
                    Some((h, p)) => (h, Some(p)),
                    None => (authority, None),
                };
                let host = host.trim_end_matches('.').to_ascii_lowercase();
                let host = match host.parse::<core::net::Ipv4Addr>() {
                    Ok(ip) => ip.to_string(),
                    Err(_) => host,
                };
                (host, port)
            }
        };
        if host.is_empty() {
            return None;
        }
        let port = match port {
            None | Some("") => default_port,
            Some(p) => p.parse().ok()?,
        };
        Some(Endpoint { host, port })
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// The rules that keep a repository from pointing ProxOps at more than it
/// should: one endpoint per cluster (compared as [`Endpoint`]s, not as
/// strings), no plain `http://` without `allow-insecure-http: true`, and a
/// `secrets-file` that names a file inside the repository (never an
/// absolute path, never `..` above the root). `explicit_file` is the
/// `--config` file, which is the operator's and not the repository's: its
/// `secrets-file` paths are only refused when absolute (the caller checks
/// where they lead on disk).
fn check_trust(
    clusters: &BTreeMap<String, (ClusterEntry, String)>,
    explicit_file: Option<&str>,
    indexes: &BTreeMap<String, YamlIndex>,
    diags: &mut Vec<Diagnostic>,
) {
    let mut endpoints: BTreeMap<Endpoint, (&str, &str, &str)> = BTreeMap::new();
    for (name, (entry, declared_in)) in clusters {
        let err = |field: &str, msg: String| {
            let path = format!("pve.clusters.{name}.{field}");
            let pos = indexes.get(declared_in).and_then(|i| i.locate(0, &path));
            Diagnostic::file(
                declared_in,
                format!("invalid configuration: cluster {name:?}: {msg}"),
            )
            .with_field(path)
            .at(pos)
        };
        let url = entry.base_url.as_deref().unwrap_or("").trim();
        if crate::manifest::check_url(url).is_ok()
            && let Some(endpoint) = Endpoint::parse(url)
        {
            if let Some((other, other_url, other_file)) = endpoints.get(&endpoint) {
                diags.push(err(
                    "base-url",
                    format!(
                        "base-url {url:?} reaches the endpoint {endpoint} that cluster {other:?} also uses (base-url {other_url:?} in {other_file}): two clusters must never share an endpoint (one could prune the other's guests)"
                    ),
                ));
            } else {
                endpoints.insert(endpoint, (name, url, declared_in));
            }
            if url.starts_with("http://") && entry.allow_insecure_http != Some(true) {
                diags.push(err(
                    "base-url",
                    format!(
                        "base-url {url:?} is plain http: the API token or password would cross the network in clear text; use https, or set allow-insecure-http: true for this cluster to accept that risk"
                    ),
                ));
            }
        }
        let Some(file) = entry.secrets_file.as_deref() else {
            continue;
        };
        if file.starts_with('/') {
            diags.push(err(
                "secrets-file",
                format!(
                    "secrets-file {file:?} is an absolute path: name a file inside the repository, relative to this file's directory"
                ),
            ));
        } else if Some(declared_in.as_str()) != explicit_file {
            let dir = declared_in.rsplit_once('/').map_or("", |(d, _)| d);
            if !stays_inside(dir, file) {
                diags.push(err(
                    "secrets-file",
                    format!(
                        "secrets-file {file:?} leads out of the repository: name a file inside it, relative to this file's directory"
                    ),
                ));
            }
        }
    }
}

/// Whether the relative path `rel`, taken from the repository directory
/// `dir`, stays inside the repository (no `..` above its root).
fn stays_inside(dir: &str, rel: &str) -> bool {
    let mut depth = dir
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .count();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            _ => depth += 1,
        }
    }
    true
}

/// The endpoint a `base-url` names, as requests are built from it:
/// scheme, host and port, without a trailing `/`. The API root
/// `/api2/json` that other PVE tools have people write (and that
/// ProxOps adds itself) is accepted and dropped; any other path, a query
/// or a fragment is refused, since no request would go where it says.
pub fn api_root(base_url: &str) -> Result<String, String> {
    let trimmed = base_url.trim().trim_end_matches('/');
    let root = trimmed
        .strip_suffix("/api2/json")
        .unwrap_or(trimmed)
        .trim_end_matches('/');
    let after_scheme = root.split_once("://").map_or(root, |(_, rest)| rest);
    match after_scheme.find(['/', '?', '#']) {
        None => Ok(root.to_owned()),
        Some(at) => Err(format!(
            "base-url {base_url:?} has more than scheme, host and port ({:?}): give only those, e.g. https://pve1.example.org:8006 (ProxOps adds /api2/json itself)",
            &after_scheme[at..]
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_base_url_may_end_in_the_api_root_and_may_have_no_other_path() {
        for ok in [
            "https://pve1:8006",
            "https://pve1:8006/",
            "https://pve1:8006/api2/json",
            "https://pve1:8006/api2/json/",
        ] {
            assert_eq!(api_root(ok).as_deref(), Ok("https://pve1:8006"), "{ok}");
        }
        for bad in [
            "https://pve1:8006/pve",
            "https://pve1:8006/pve/api2/json",
            "https://pve1:8006/?x=1",
            "https://pve1:8006#top",
        ] {
            assert!(api_root(bad).is_err(), "{bad}");
        }
    }

    fn endpoint(url: &str) -> String {
        Endpoint::parse(url).unwrap().to_string()
    }

    #[test]
    fn spellings_of_one_endpoint_compare_equal() {
        for url in [
            "https://pve.example.org:8006",
            "https://pve.example.org:8006/",
            "https://pve.example.org:8006/api2/json",
            "https://PVE.Example.ORG:8006",
            "https://pve.example.org.:8006",
            "http://pve.example.org:8006",
            "https://root@pve.example.org:8006",
        ] {
            assert_eq!(endpoint(url), "pve.example.org:8006", "{url}");
        }
    }

    #[test]
    fn the_port_defaults_to_what_the_scheme_dials() {
        assert_eq!(endpoint("https://pve"), "pve:443");
        assert_eq!(endpoint("https://pve:"), "pve:443");
        assert_eq!(endpoint("http://pve/"), "pve:80");
        assert_ne!(endpoint("https://pve"), endpoint("https://pve:8006"));
    }

    #[test]
    fn ip_addresses_compare_in_canonical_form() {
        assert_eq!(endpoint("https://[0:0:0:0:0:0:0:1]:8006"), "[::1]:8006");
        assert_eq!(
            endpoint("https://[::ffff:127.1.2.3]:8006"),
            "127.1.2.3:8006"
        );
        assert_eq!(endpoint("https://127.1.2.3:8006"), "127.1.2.3:8006");
    }

    #[test]
    fn not_an_endpoint() {
        for url in [
            "ftp://pve:8006",
            "https://:8006",
            "https://pve:99999",
            "pve:8006",
        ] {
            assert!(Endpoint::parse(url).is_none(), "{url}");
        }
    }

    #[test]
    fn secrets_paths_stay_inside_the_repository() {
        assert!(stays_inside("clusters/home", "secrets.sops.yaml"));
        assert!(stays_inside("clusters/home", "../../secrets.sops.yaml"));
        assert!(stays_inside("clusters/home", "./a/../b.yaml"));
        assert!(!stays_inside("clusters/home", "../../../secrets.sops.yaml"));
        assert!(!stays_inside("", "../x.yaml"));
        assert!(!stays_inside("clusters/home", "a/../../../../x.yaml"));
    }

    fn load_clusters(files: &[(&str, &str)]) -> Result<Config, Vec<Diagnostic>> {
        let cluster_local = files
            .iter()
            .map(|(dir, text)| {
                (
                    (*dir).to_owned(),
                    ConfigSource {
                        name: format!("clusters/{dir}/config.yaml"),
                        bytes: text.as_bytes(),
                    },
                )
            })
            .collect();
        let ov = Overrides {
            env_token_value: Some(Secret::new("root@pam!ci=x")),
            ..Overrides::default()
        };
        load(
            &ConfigSources {
                process: None,
                cluster_local,
                process_is_explicit: false,
            },
            &ov,
        )
    }

    fn messages(r: Result<Config, Vec<Diagnostic>>) -> String {
        r.err()
            .unwrap()
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn two_clusters_on_one_endpoint_are_refused_naming_both() {
        let text = messages(load_clusters(&[
            (
                "a",
                "pve:\n  clusters:\n    a:\n      base-url: https://pve1.example.org:8006/\n",
            ),
            (
                "b",
                "pve:\n  clusters:\n    b:\n      base-url: https://PVE1.example.org.:8006/api2/json\n",
            ),
        ]));
        assert!(text.contains("clusters/b/config.yaml:4:7"), "{text}");
        assert!(text.contains("cluster \"b\""), "{text}");
        assert!(text.contains("cluster \"a\""), "{text}");
        assert!(text.contains("clusters/a/config.yaml"), "{text}");
        assert!(text.contains("pve1.example.org:8006"), "{text}");
    }

    #[test]
    fn plain_http_needs_explicit_consent() {
        let refused = messages(load_clusters(&[(
            "a",
            "pve:\n  clusters:\n    a:\n      base-url: http://pve1.example.org:8006\n",
        )]));
        assert!(refused.contains("allow-insecure-http: true"), "{refused}");
        assert!(refused.contains("clear text"), "{refused}");
        assert!(
            load_clusters(&[(
                "a",
                "pve:\n  clusters:\n    a:\n      base-url: http://pve1.example.org:8006\n      allow-insecure-http: true\n",
            )])
            .is_ok()
        );
    }

    #[test]
    fn a_secrets_file_outside_the_repository_is_refused() {
        for (file, why) in [
            ("/etc/proxops/secrets.sops.yaml", "absolute path"),
            ("../../../secrets.sops.yaml", "leads out of the repository"),
        ] {
            let text = messages(load_clusters(&[(
                "a",
                &format!(
                    "pve:\n  clusters:\n    a:\n      base-url: https://pve1.example.org:8006\n      secrets-file: {file}\n"
                ),
            )]));
            assert!(text.contains(why), "{text}");
            assert!(
                text.contains("clusters/a/config.yaml:5:7: pve.clusters.a.secrets-file"),
                "{text}"
            );
        }
        assert!(
            load_clusters(&[(
                "a",
                "pve:\n  clusters:\n    a:\n      base-url: https://pve1.example.org:8006\n      secrets-file: ../../shared.sops.yaml\n",
            )])
            .is_ok()
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod lock_wait_tests {
    use super::*;

    fn load_process(text: &str) -> Result<Config, Vec<Diagnostic>> {
        let text = format!(
            "{text}pve:\n  clusters:\n    home:\n      base-url: https://pve1.example.org:8006\n"
        );
        let sources = ConfigSources {
            process: Some(ConfigSource {
                name: "proxops.yaml".into(),
                bytes: text.as_bytes(),
            }),
            cluster_local: Vec::new(),
            process_is_explicit: false,
        };
        load(&sources, &Overrides::default())
    }

    #[test]
    fn lock_wait_defaults_to_five_seconds_and_takes_a_duration() {
        assert_eq!(load_process("").unwrap().lock_wait, Duration::from_secs(5));
        let cfg = load_process("reconcile:\n  lock-wait: 1m30s\n").unwrap();
        assert_eq!(cfg.lock_wait, Duration::from_secs(90));
        let cfg = load_process("reconcile:\n  lock-wait: 0s\n").unwrap();
        assert_eq!(cfg.lock_wait, Duration::from_secs(0));
    }

    #[test]
    fn a_lock_wait_that_is_not_a_duration_names_its_field_and_line() {
        let diags = load_process("log:\n  level: info\nreconcile:\n  lock-wait: soon\n")
            .err()
            .unwrap();
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert_eq!(diags[0].field.as_deref(), Some("reconcile.lock-wait"));
        assert_eq!(diags[0].line, Some(4), "{diags:?}");
        assert!(
            diags[0].message.contains("invalid duration \"soon\""),
            "{diags:?}"
        );
    }

    #[test]
    fn the_daemon_section_resolves_access_webhook_and_targets_by_sops_key() {
        let cfg = load_process("").unwrap();
        assert_eq!(
            cfg.daemon,
            DaemonConfig {
                declared_in: "proxops.yaml".into(),
                ..DaemonConfig::default()
            }
        );
        assert!(cfg.daemon.dashboard);
        let cfg = load_process(
            "daemon:\n  dashboard: false\n  secrets-file: daemon.sops.yaml\n  access:\n    token: dash\n  git-webhook:\n    secret: hook\n  notify:\n    - name: ops\n      type: slack\n      url: ops-url\n      clusters: [home]\n    - name: phone\n      type: ntfy\n      url: ntfy-url\n      token: ntfy-token\n",
        )
        .unwrap();
        let d = &cfg.daemon;
        assert!(!d.dashboard);
        assert_eq!(d.secrets_file.as_deref(), Some("daemon.sops.yaml"));
        assert_eq!(d.access, Some(AccessRefs::Token("dash".into())));
        assert_eq!(d.webhook_secret.as_deref(), Some("hook"));
        assert_eq!(d.notify.len(), 2);
        assert_eq!(
            (d.notify[0].kind, d.notify[0].clusters.as_slice()),
            (TargetKind::Slack, &["home".to_owned()][..])
        );
        assert_eq!(d.notify[1].token.as_deref(), Some("ntfy-token"));
    }

    #[test]
    fn daemon_section_mistakes_are_each_named_with_their_field() {
        let diags = load_process(
            "daemon:\n  access:\n    token: a\n    user: b\n  git-webhook: {}\n  notify:\n    - name: ops\n      type: teams\n      url: u\n    - name: ops2\n      type: webhook\n    - name: ops3\n      type: gotify\n      url: u\n      clusters: [nowhere]\n",
        )
        .err()
        .unwrap();
        let fields: Vec<&str> = diags.iter().filter_map(|d| d.field.as_deref()).collect();
        for field in [
            "daemon.access",
            "daemon.git-webhook.secret",
            "daemon.notify[0].type",
            "daemon.notify[1].url",
            "daemon.notify[2].clusters",
            "daemon.secrets-file",
        ] {
            assert!(fields.contains(&field), "{field}: {diags:?}");
        }
        let text: Vec<String> = diags.iter().map(|d| d.message.clone()).collect();
        assert!(
            text.iter()
                .any(|m| m.contains("type \"teams\" is not one of webhook, slack, ntfy, gotify")),
            "{text:?}"
        );
    }
}
