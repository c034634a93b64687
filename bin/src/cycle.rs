//! One pass over every selected cluster, sorted and isolated: a cluster
//! whose input is invalid or whose PVE read fails is reported and the
//! others go on.
//!
//! Owns the order of a cycle (spec §16.5, §22.6): credentials and TLS trust
//! for every selected cluster are resolved before any PVE request (a
//! credential problem ends the command with exit 2 and nothing read); then
//! per cluster: read, plan, and for `apply` execute, read back and re-plan.
//! It never decides what to do: planning is core's, requests the adapter's.
//!
//! **Architecture Invariant:** [`observe_all`] (`run --dry-run`) never
//! reaches the runner, and reads through a transport that refuses every
//! write: an observing process cannot write to PVE.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proxops_core::config::{AuthMethod, Config};
use proxops_core::diag::Diagnostic;
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::exec::{Execution, ObjectReport, Timestamp};
use proxops_core::live::LiveSnapshot;
use proxops_core::names::{ClusterName, Ref};
use proxops_core::plan::{self, AbortCause, Plan, Policy};
use proxops_core::repo::ClusterDesired;
use proxops_core::state;
use proxops_core::step::PowerPolicy;
use proxops_pve::auth::{CredentialError, Credentials};
use proxops_pve::identity::{self, PveIdentity};
use proxops_pve::live::{LiveConfig, LiveTransport, RequestLog};
use proxops_pve::reader::{self, ReadScope};
use proxops_pve::replay::ReplayTransport;
use proxops_pve::runner::{self, RunOptions};
use proxops_pve::tls::TlsTrust;
use proxops_pve::transport::{Request, Response, Transport, TransportError};
use proxops_sops::IdentitySources;

use crate::adopt::ReadOnly;
use crate::args::GlobalArgs;
use crate::context::{self, Env, Workspace};
use crate::creds;
use crate::exit::{Exit, Failure};
use crate::lock::{ClusterLock, Locking};
use crate::out;

/// The one PVE user that may change what PVE reserves for `root@pam`
/// (privileged containers' features, bind mounts, raw PCI addresses).
const ROOT_PAM: &str = "root@pam";

/// Where live state comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Recordings `<dir>/<cluster>.json`.
    Replay(PathBuf),
    /// The PVE API.
    Live,
}

pub struct ClusterPlan {
    pub plan: Plan,
    /// What the plan was made from (for commands that show live state).
    pub snapshot: Option<LiveSnapshot>,
}

pub struct PlanAll {
    pub plans: Vec<ClusterPlan>,
    /// Diagnostics of clusters refused for invalid input.
    pub invalid: Vec<Diagnostic>,
}

impl PlanAll {
    /// Prints the diagnostics of clusters refused for invalid input; the
    /// exit code planning alone earns: invalid input, then an aborted plan.
    pub fn exit(&self) -> Exit {
        let mut exit = Exit::Ok;
        if !self.invalid.is_empty() {
            let refs: Vec<&Diagnostic> = self.invalid.iter().collect();
            out::errors(&context::render_diagnostics(&refs));
            exit = exit.worst(Exit::Input);
        }
        if self.plans.iter().any(|p| p.plan.aborted) {
            exit = exit.worst(Exit::Runtime);
        }
        exit
    }
}

/// A boxed transport is a transport (so it can be wrapped, e.g. recorded).
pub struct Boxed(pub Box<dyn Transport>);

impl Transport for Boxed {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        self.0.call(request)
    }

    fn acting_as(&self) -> Option<String> {
        self.0.acting_as()
    }
}

/// One selected cluster, ready to be read.
pub struct Prepared<'w> {
    pub name: ClusterName,
    /// `Err`: the cluster does nothing this cycle, and why.
    pub ready: Result<Ready<'w>, Unready>,
}

/// Why a prepared cluster does nothing this cycle: the cause its cycle
/// counts as, and the reason a person reads (its `Display`).
#[derive(Debug, Clone)]
pub struct Unready {
    pub cause: AbortCause,
    pub reason: String,
    /// The input problems behind an invalid-input refusal, which the plan
    /// carries for a pull-request comment to show.
    pub diagnostics: Vec<Diagnostic>,
}

impl Unready {
    fn new(cause: AbortCause, reason: String) -> Unready {
        Unready {
            cause,
            reason,
            diagnostics: Vec::new(),
        }
    }

    fn because_of(mut self, diagnostics: &[Diagnostic]) -> Unready {
        self.diagnostics = diagnostics.to_vec();
        self
    }

    /// The cluster's aborted plan.
    pub fn plan(&self, cluster: &ClusterName) -> Plan {
        Plan::aborted(cluster.clone(), self.cause, self.reason.clone())
            .with_diagnostics(self.diagnostics.clone())
    }
}

impl std::fmt::Display for Unready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

pub struct Ready<'w> {
    pub desired: &'w ClusterDesired,
    /// The cluster's PVE endpoint (what its lock is named by).
    pub base_url: String,
    pub policy: Policy,
    /// How its guests are powered off (`shutdown-timeout`,
    /// `force-stop-after-timeout`).
    pub power: PowerPolicy,
    /// How many actions run at once, how many guests may be down at once.
    pub limits: proxops_core::rollout::Limits,
    pub scope: ReadScope,
    pub transport: Box<dyn Transport>,
    pub secrets: CloudInitSecrets,
    /// The same transport when it talks to PVE: its request counts and
    /// breaker state feed `/metrics` and `/status` in `run`.
    pub live: Option<Arc<LiveTransport>>,
    /// `--target`: plan only these objects and what they depend on
    /// ([`proxops_core::target`]); `None` plans everything.
    pub targets: Option<BTreeSet<Ref>>,
}

/// A live transport shared between the session and whoever reads its
/// counters.
struct SharedLive(Arc<LiveTransport>);

impl Transport for SharedLive {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        self.0.call(request)
    }

    fn acting_as(&self) -> Option<String> {
        self.0.acting_as()
    }
}

/// Credentials that cannot be used: what is wrong, where the value came
/// from (a variable, a SOPS key in a file, a configuration key) and the
/// shape expected; never the value, except a user that came from
/// configuration or the environment.
fn credential_failure(
    cluster: &str,
    c: &creds::ClusterCredentials,
    e: &CredentialError,
) -> Failure {
    // A composed token value carries its own user and token id.
    let composed = c.auth == AuthMethod::Token && c.token_value.is_some();
    const COMPOSED: &str = "user@realm!tokenid=secret, e.g. proxops@pve!reconcile=<uuid>";
    let (origin, expected) = match e {
        _ if composed => (&c.origins.token_value, COMPOSED),
        CredentialError::NoRealm
        | CredentialError::MissingUser
        | CredentialError::InvalidCharacter("PVE user") => {
            (&c.origins.user, "user@realm, e.g. proxops@pve")
        }
        CredentialError::MissingTokenId | CredentialError::InvalidCharacter("API token id") => (
            &c.origins.token_id,
            "the tokenid part of user@realm!tokenid=secret alone, e.g. reconcile",
        ),
        CredentialError::MissingPassword => (&c.origins.password, "the user's password"),
        _ => (
            &c.origins.token,
            "the token secret alone: the UUID after '=' in user@realm!tokenid=secret",
        ),
    };
    let cluster = format!("credentials: cluster {cluster:?}: {origin}");
    match e {
        CredentialError::MalformedTokenValue => {
            Failure::input(format!("{cluster} is not of the form {COMPOSED}"))
        }
        CredentialError::NoRealm | CredentialError::InvalidCharacter("PVE user") if !composed => {
            Failure::input(format!(
                "{cluster}: {e} (the PVE user is {}); expected {expected}",
                c.user_shown()
            ))
        }
        _ => Failure::input(format!("{cluster}: {e}; expected {expected}")),
    }
}

/// One debug line per PVE request: method, path, status, result and
/// duration; never a body, a header or the query string.
fn log_request(r: &RequestLog) {
    use crate::log::Value;
    let mut fields = vec![
        ("method", Value::from(r.method.as_str())),
        ("path", Value::from(&r.path)),
    ];
    // No status when no answer came: the field is left out, not empty.
    if let Some(status) = r.status {
        fields.push(("status", status.into()));
    }
    fields.extend([
        ("result", r.result.as_str().into()),
        ("duration", crate::log::millis(r.duration)),
        ("attempt", r.attempt.into()),
    ]);
    crate::log::event(crate::log::Level::Debug, "pve.request", &fields);
}

/// Every selected cluster, credentials resolved, transports built.
pub struct Session<'w> {
    pub clusters: Vec<Prepared<'w>>,
    pub invalid: Vec<Diagnostic>,
}

impl Session<'_> {
    /// Plans of every ready cluster narrowed to `targets` (`--target`).
    pub fn narrow(&mut self, targets: Option<&BTreeSet<Ref>>) {
        for p in &mut self.clusters {
            if let Ok(r) = &mut p.ready {
                r.targets = targets.cloned();
            }
        }
    }
}

/// Live transports kept from one cycle to the next by a long-running
/// process, so the write breaker and the ticket outlive a cycle. Keyed by
/// cluster, endpoint, TLS settings and a digest of the credentials: a
/// change of any of them builds a new transport.
///
/// Also what each cluster's PVE last said it is, so a cluster cycled on
/// its own (the daemon runs clusters in parallel) is still told apart from
/// the others. Shared between the daemon's cluster threads: each lock is
/// held for a map look-up only, never across a request.
#[derive(Default)]
pub struct Transports {
    live: Mutex<BTreeMap<String, Arc<LiveTransport>>>,
    identities: Mutex<BTreeMap<ClusterName, PveIdentity>>,
    /// The command writes to PVE: each cluster's PVE is claimed for it in
    /// the host's record ([`crate::claims`]), not only checked.
    writes: bool,
}

impl Transports {
    /// For a command that writes to PVE.
    pub fn writing() -> Transports {
        Transports {
            writes: true,
            ..Transports::default()
        }
    }
}

/// The key of a cluster's transport. Secrets enter only through a SHA-256
/// digest and the key is never shown.
fn transport_key(
    name: &str,
    base_url: &str,
    ca_file: Option<&str>,
    fingerprint: Option<&str>,
    insecure: bool,
    c: &creds::ClusterCredentials,
) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        c.auth.as_str(),
        c.user.as_deref().unwrap_or(""),
        c.token_id.as_deref().unwrap_or(""),
        c.token.as_ref().map(|s| s.expose()).unwrap_or(""),
        c.token_value.as_ref().map(|s| s.expose()).unwrap_or(""),
        c.password.as_ref().map(|s| s.expose()).unwrap_or(""),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let digest: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{name}|{base_url}|{}|{}|{insecure}|{digest}",
        ca_file.unwrap_or(""),
        fingerprint.unwrap_or("")
    )
}

/// Resolves credentials and TLS trust and builds a transport for every
/// selected cluster, before any PVE request. Invalid credentials or TLS
/// settings end the command (exit 2).
pub fn prepare<'w>(
    g: &GlobalArgs,
    env: &Env,
    ws: &'w Workspace,
    source: &Source,
) -> Result<Session<'w>, Failure> {
    prepare_reusing(g, env, ws, source, &Transports::default())
}

/// As [`prepare`], for a command that writes to PVE: each cluster's PVE is
/// claimed for it in the host's record ([`crate::claims`]).
pub fn prepare_writing<'w>(
    g: &GlobalArgs,
    env: &Env,
    ws: &'w Workspace,
    source: &Source,
) -> Result<Session<'w>, Failure> {
    prepare_reusing(g, env, ws, source, &Transports::writing())
}

/// As [`prepare`], reusing (and remembering) live transports in `reuse`.
pub fn prepare_reusing<'w>(
    g: &GlobalArgs,
    _env: &Env,
    ws: &'w Workspace,
    source: &Source,
    reuse: &Transports,
) -> Result<Session<'w>, Failure> {
    let cfg = &ws.loaded.config;
    let sources = IdentitySources::from_process_env();
    let mut clusters = Vec::new();
    let mut invalid = Vec::new();
    'clusters: for (name, result) in &ws.loaded.clusters {
        if !context::selected(g, name.as_str()) {
            continue;
        }
        let desired = match result {
            Ok(d) => d,
            Err(diags) => {
                invalid.extend(diags.iter().cloned());
                let cause = ws.loaded.refusal_cause(name);
                let reason = if cause == AbortCause::UnknownNode {
                    format!(
                        "unknown node: a manifest names a node outside the cluster's node allowlist ({} problem(s) in the repository); nothing read or written",
                        diags.len()
                    )
                } else {
                    format!(
                        "invalid input: {} problem(s) in the repository; nothing read or written",
                        diags.len()
                    )
                };
                clusters.push(Prepared {
                    name: name.clone(),
                    ready: Err(Unready::new(cause, reason).because_of(diags)),
                });
                continue;
            }
        };
        let Some(cc) = cfg.clusters.get(name) else {
            continue;
        };
        let mut policy = Policy {
            prune_budget: cfg.prune_budget,
            nodes: cc.nodes.clone(),
            allow_empty_prune: cc.allow_empty_prune,
            restart_policy: cc.restart_policy,
            purge_ha_and_replicated: cc.purge_ha_and_replicated,
            host: crate::host::identity(cfg),
            disruption: cc.limits.disruption.clone(),
            // A replayed plan is made as the configuration would call PVE.
            root_pam: cfg.auth == AuthMethod::Ticket && cfg.user.as_deref() == Some(ROOT_PAM),
            // Holds are the daemon's (it sets them per cycle).
            holds: Default::default(),
            now: 0,
        };
        if cc.force_stop_after_timeout {
            crate::log::event(
                crate::log::Level::Warn,
                "force-stop-after-timeout is ON: a guest that does not shut down within its shutdown-timeout is stopped hard (status/stop, PVE's \"pulling the plug\")",
                &[("cluster", name.as_str().into())],
            );
        }
        if cc.allow_empty_prune {
            crate::log::event(
                crate::log::Level::Warn,
                "the empty-desired guard is OFF (allow-empty-prune: true): a guest kind with no manifest left is pruned within the budget; remove the key once the intended removal is done",
                &[("cluster", name.as_str().into())],
            );
        }
        let scope = ReadScope {
            allowlist: (!cc.nodes.is_empty()).then(|| cc.nodes.clone()),
            storages: desired.storage_pairs(),
            concurrency: cc.read_concurrency,
        };
        let (transport, secrets, live) = match source {
            Source::Replay(dir) => {
                let secrets = if cc.secrets_file.is_some() {
                    match creds::resolve(cfg, cc, ws.root.as_deref(), &sources) {
                        Ok(c) => c.cloud_init,
                        Err(f) => {
                            clusters.push(cloud_init_unreadable(name, cc, ws, f, &mut invalid)?);
                            continue;
                        }
                    }
                } else {
                    CloudInitSecrets::default()
                };
                let path = dir.join(format!("{name}.json"));
                match ReplayTransport::load(&path) {
                    Ok(t) => (Box::new(t) as Box<dyn Transport>, secrets, None),
                    Err(e) => {
                        clusters.push(Prepared {
                            name: name.clone(),
                            ready: Err(Unready::new(
                                AbortCause::Recording,
                                format!("cannot load recording {}: {e}", path.display()),
                            )),
                        });
                        continue;
                    }
                }
            }
            Source::Live => 'live: {
                let c = match creds::resolve(cfg, cc, ws.root.as_deref(), &sources) {
                    Ok(c) => c,
                    Err(f) => {
                        clusters.push(cloud_init_unreadable(name, cc, ws, f, &mut invalid)?);
                        continue 'clusters;
                    }
                };
                c.check(name.as_str())?;
                // An API token is never root@pam to PVE, whatever its user.
                policy.root_pam =
                    c.auth == AuthMethod::Ticket && c.user.as_deref() == Some(ROOT_PAM);
                let credentials = Credentials::from_settings(
                    c.auth,
                    c.user.as_deref(),
                    c.token_id.as_deref(),
                    c.token.as_ref(),
                    c.token_value.as_ref(),
                    c.password.as_ref(),
                )
                .map_err(|e| credential_failure(name.as_str(), &c, &e))?;
                let credentials = match &c.user_origin {
                    Some(origin) => credentials.with_user_shown_as(origin.clone()),
                    None => credentials,
                };
                let ca_file = cc
                    .ca_file
                    .as_deref()
                    .map(|f| relative_to_declaring_file(f, &cc.declared_in, ws.root.as_deref()))
                    .or_else(|| cfg.ca_file.clone());
                let tls = TlsTrust::from_settings(
                    ca_file.as_deref(),
                    cc.fingerprint.as_deref(),
                    cc.insecure,
                )
                .map_err(|e| {
                    Failure::input(format!(
                        "invalid configuration: cluster {:?}: TLS: {e}",
                        name.as_str()
                    ))
                })?;
                if cc.base_url.starts_with("http://") {
                    crate::log::event(
                        crate::log::Level::Warn,
                        "plain http to PVE (allow-insecure-http: true): the API token or password crosses the network in clear text; use https",
                        &[("cluster", name.as_str().into())],
                    );
                }
                let key = transport_key(
                    name.as_str(),
                    &cc.base_url,
                    ca_file.as_deref(),
                    cc.fingerprint.as_deref(),
                    cc.insecure,
                    &c,
                );
                let kept = reuse.live.lock().ok().and_then(|m| m.get(&key).cloned());
                if let Some(shared) = kept {
                    // A new cycle looks the endpoint up again, once.
                    shared.new_cycle();
                    break 'live (
                        Box::new(SharedLive(Arc::clone(&shared))) as Box<dyn Transport>,
                        c.cloud_init,
                        Some(shared),
                    );
                }
                if tls.is_insecure() {
                    crate::log::event(
                        crate::log::Level::Warn,
                        "TLS certificate checking is OFF (insecure: true): anyone on the path can read the credentials; pin a fingerprint or set a ca-file",
                        &[("cluster", name.as_str().into())],
                    );
                }
                let mut live = LiveConfig::new(cc.base_url.clone(), credentials, tls);
                live.retry.base = cfg.retry_base.as_std();
                live.retry.max_retries = cfg.retries;
                live.connections = cc.read_concurrency.max(cc.limits.per_cluster);
                let transport = LiveTransport::new(live)
                    .map_err(|e| {
                        Failure::input(format!(
                            "invalid configuration: cluster {:?}: {e}",
                            name.as_str()
                        ))
                    })?
                    .with_request_log(log_request);
                let shared = Arc::new(transport);
                if let Ok(mut live) = reuse.live.lock() {
                    live.retain(|k, _| !k.starts_with(&format!("{name}|")));
                    live.insert(key, Arc::clone(&shared));
                }
                (
                    Box::new(SharedLive(Arc::clone(&shared))) as Box<dyn Transport>,
                    c.cloud_init,
                    Some(shared),
                )
            }
        };
        if let Some(unready) = unresolved_secrets(desired, cc, &secrets, &mut invalid) {
            clusters.push(Prepared {
                name: name.clone(),
                ready: Err(unready),
            });
            continue;
        }
        clusters.push(Prepared {
            name: name.clone(),
            ready: Ok(Ready {
                desired,
                base_url: cc.base_url.clone(),
                policy,
                power: proxops_core::step::PowerPolicy::from_config(cc),
                limits: cc.limits.clone(),
                scope,
                transport,
                secrets,
                live,
                targets: None,
            }),
        });
    }
    if matches!(source, Source::Live) {
        confirm_distinct_pves(&mut clusters, cfg, reuse);
        confirm_privileges(&mut clusters);
    }
    Ok(Session { clusters, invalid })
}

/// A SOPS file that holds no credential of its cluster (its `secrets:`
/// block references none) carries cloud-init material only: one that does
/// not decrypt refuses that cluster as invalid input (`parse_error`), and
/// the other clusters go on. A SOPS file with the cluster's credentials
/// that does not decrypt ends the command (`Err`, exit 2), as every
/// credential problem does.
fn cloud_init_unreadable(
    name: &ClusterName,
    cc: &proxops_core::config::ClusterConfig,
    ws: &Workspace,
    failure: Failure,
    invalid: &mut Vec<Diagnostic>,
) -> Result<Prepared<'static>, Failure> {
    // A secrets-file the repository may not name stays a refusal of the
    // whole command, before any request.
    creds::secrets_path(cc, ws.root.as_deref())?;
    let refs = &cc.secrets;
    let holds_credentials = refs.pve.as_ref().is_some_and(|p| *p != Default::default())
        || refs.git.as_ref().is_some_and(|g| g.token.is_some());
    if holds_credentials {
        return Err(failure);
    }
    let message = format!(
        "cloud-init secrets unreadable, the cluster does nothing this cycle: {}",
        failure.message
    );
    let diagnostic = Diagnostic::file(&cc.declared_in, message.clone())
        .with_field(format!("pve.clusters.{}.secrets-file", name.as_str()));
    invalid.push(diagnostic.clone());
    Ok(Prepared {
        name: name.clone(),
        ready: Err(Unready::new(
            AbortCause::InvalidInput,
            format!("invalid input: {message}; nothing read or written"),
        )
        .because_of(&[diagnostic])),
    })
}

/// A cluster whose manifests reference cloud-init secrets its SOPS file
/// does not hold is refused for the cycle as invalid input (`parse_error`):
/// nothing read, nothing written, nothing pruned. The diagnostics join
/// `invalid`, so `diff` prints them and exits 2.
fn unresolved_secrets(
    desired: &ClusterDesired,
    cc: &proxops_core::config::ClusterConfig,
    secrets: &CloudInitSecrets,
    invalid: &mut Vec<Diagnostic>,
) -> Option<Unready> {
    let missing = match cc.secrets_file {
        None => proxops_core::drift::secrets_without_file(desired, cc.name.as_str()),
        Some(_) => proxops_core::drift::unresolved_secrets(desired, secrets),
    };
    if missing.is_empty() {
        return None;
    }
    let file = if cc.secrets_file.is_some() {
        "the cluster's SOPS file does not resolve"
    } else {
        "with no secrets-file to resolve them"
    };
    let reason = format!(
        "invalid input: {} cloud-init secret reference(s) {file} ({}); nothing read or written",
        missing.len(),
        missing
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    );
    let unready = Unready::new(AbortCause::InvalidInput, reason).because_of(&missing);
    invalid.extend(missing);
    Some(unready)
}

/// Two clusters whose `base-url`s lead to one PVE in a way no comparison of
/// URLs sees (two DNS names, a name and an address, a proxy) would each
/// prune the other's guests. So PVE is asked which it is (`GET
/// /cluster/status`, one read per cluster per cycle, since names can move)
/// before the cluster's first inventory read and any write, and the
/// cluster is refused when:
///
/// - the answer does not say (fail closed: a cluster whose PVE is not
///   confirmed writes nothing; the next cycle asks again);
/// - another cluster of this process leads to the same PVE (`known` holds
///   what the other configured clusters' PVEs said when last asked: the
///   daemon cycles each cluster on its own);
/// - this host's record ([`crate::claims`]) has that PVE under another
///   cluster name, claimed by this process or another one. A writing
///   command claims it.
fn confirm_distinct_pves(clusters: &mut [Prepared<'_>], cfg: &Config, reuse: &Transports) {
    let known = &reuse.identities;
    let ready: Vec<usize> = (0..clusters.len())
        .filter(|&i| clusters[i].ready.is_ok())
        .collect();
    let elsewhere: Vec<(ClusterName, PveIdentity)> = known
        .lock()
        .map(|m| {
            m.iter()
                .filter(|(n, _)| {
                    cfg.clusters.contains_key(*n) && !clusters.iter().any(|p| &p.name == *n)
                })
                .map(|(n, id)| (n.clone(), id.clone()))
                .collect()
        })
        .unwrap_or_default();
    let mut identities: Vec<(usize, PveIdentity)> = Vec::new();
    for i in ready {
        let Ok(r) = &clusters[i].ready else { continue };
        match identity::read_identity(r.transport.as_ref()) {
            Ok(id) => identities.push((i, id)),
            Err(e) => {
                clusters[i].ready = Err(Unready::new(
                    AbortCause::PveUnidentified,
                    format!(
                        "{e}; so which PVE base-url leads to is not confirmed (it may be another cluster's): no inventory read, no write (asked again next cycle)"
                    ),
                ))
            }
        }
    }
    if let Ok(mut m) = known.lock() {
        for (i, id) in &identities {
            m.insert(clusters[*i].name.clone(), id.clone());
        }
    }
    let describe = |name: &ClusterName| match cfg.clusters.get(name) {
        Some(cc) => format!(
            "{:?} (base-url {:?} in {})",
            name.as_str(),
            cc.base_url,
            cc.declared_in
        ),
        None => format!("{:?}", name.as_str()),
    };
    let mut refused = Vec::new();
    for (a, id) in &identities {
        let others: Vec<String> = identities
            .iter()
            .filter(|(b, other)| b != a && id.same_pve(other))
            .map(|(b, _)| describe(&clusters[*b].name))
            .chain(
                elsewhere
                    .iter()
                    .filter(|(_, other)| id.same_pve(other))
                    .map(|(n, _)| describe(n)),
            )
            .collect();
        if !others.is_empty() {
            refused.push((
                *a,
                format!(
                    "cluster {} leads to {id}, the same PVE as cluster {}: two cluster configs must never manage one PVE (each would prune the other's guests); no inventory read, no write",
                    describe(&clusters[*a].name),
                    others.join(", ")
                ),
            ));
            continue;
        }
        let name = &clusters[*a].name;
        let reached = cfg
            .clusters
            .get(name)
            .map(|cc| (cc.base_url.as_str(), cc.declared_in.as_str()))
            .unwrap_or(("", ""));
        if let Err(e) = crate::claims::Claims::new(cfg).check(name, id, reached, reuse.writes) {
            refused.push((*a, format!("cluster {}: {e}", describe(name))));
        }
    }
    for (i, reason) in refused {
        clusters[i].ready = Err(Unready::new(AbortCause::SharedPve, reason));
    }
}

/// Each ready cluster's credentials can see what it manages
/// ([`proxops_core::audit::needed`]): PVE hides from an inventory read what
/// a token may not audit, and a plan made from that would create guests
/// that exist. A cluster missing a privilege, or whose privileges cannot
/// be read, does nothing this cycle, the privilege and path named.
fn confirm_privileges(clusters: &mut [Prepared<'_>]) {
    for p in clusters.iter_mut() {
        let Ok(r) = &p.ready else { continue };
        let storages = r.scope.storages.iter().map(|(_, s)| s);
        let mut missing = Vec::new();
        let mut unread = None;
        for need in proxops_core::audit::needed(storages) {
            match identity::read_privileges(r.transport.as_ref(), &need.path) {
                Ok(held) if held.contains(need.privilege) => {}
                Ok(_) => missing.push(need),
                Err(e) => {
                    unread = Some(e);
                    break;
                }
            }
        }
        let acting_as = r.transport.acting_as();
        let reason = match unread {
            Some(e) => Some(format!(
                "cannot read what these credentials may see: {e}; no inventory read, no write"
            )),
            None => proxops_core::audit::refusal(&missing, acting_as.as_deref()),
        };
        if let Some(reason) = reason {
            p.ready = Err(Unready::new(AbortCause::MissingPrivilege, reason));
        }
    }
}

/// A cluster-local file name: relative paths are relative to the file that
/// declared the cluster.
pub(crate) fn relative_to_declaring_file(
    file: &str,
    declared_in: &str,
    root: Option<&Path>,
) -> String {
    let p = Path::new(file);
    if p.is_absolute() {
        return file.to_owned();
    }
    creds::declaring_dir(declared_in, root)
        .join(p)
        .display()
        .to_string()
}

impl Ready<'_> {
    /// Reads the cluster and plans it.
    pub fn read_and_plan(&self, name: &ClusterName, transport: &dyn Transport) -> ClusterPlan {
        let snapshot = match reader::read_snapshot(transport, &self.scope) {
            Ok(s) => s,
            Err(e) => {
                return ClusterPlan {
                    plan: Plan::aborted(
                        name.clone(),
                        AbortCause::PveRead,
                        format!("pve inventory read failed: {e}"),
                    ),
                    snapshot: None,
                };
            }
        };
        let ctx = Context {
            cluster: self.desired,
            secrets: &self.secrets,
        };
        let mut plan = plan::plan(self.desired, &snapshot, &ctx, &self.policy);
        if let Some(targets) = &self.targets {
            proxops_core::target::restrict(
                &mut plan,
                self.desired,
                targets,
                &self.policy.disruption,
            );
        }
        ClusterPlan {
            plan,
            snapshot: Some(snapshot),
        }
    }
}

/// Reads and plans every selected cluster (diff, apply --dry-run, status).
pub fn plan_all(
    g: &GlobalArgs,
    env: &Env,
    ws: &Workspace,
    source: &Source,
    targets: Option<&BTreeSet<Ref>>,
) -> Result<PlanAll, Failure> {
    let mut session = prepare(g, env, ws, source)?;
    session.narrow(targets);
    let mut plans = Vec::new();
    for p in &session.clusters {
        plans.push(match &p.ready {
            Err(unready) => ClusterPlan {
                plan: unready.plan(&p.name),
                snapshot: None,
            },
            Ok(r) => r.read_and_plan(&p.name, r.transport.as_ref()),
        });
    }
    Ok(PlanAll {
        plans,
        invalid: session.invalid,
    })
}

/// What one cluster's converge cycle did.
pub struct ClusterCycle {
    pub name: ClusterName,
    pub plan: Plan,
    pub execution: Option<Execution>,
    /// The plan made from the read-back (`None` if nothing ran or the
    /// read-back failed).
    pub readback: Option<Plan>,
    pub objects: Vec<ObjectReport>,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// How long the cluster's cycle took (for logs; the timestamps are
    /// whole seconds).
    pub elapsed: Duration,
}

impl ClusterCycle {
    pub fn failed_actions(&self) -> usize {
        self.execution.as_ref().map(|e| e.counts().1).unwrap_or(0)
    }
}

/// How a converge cycle runs.
pub struct ApplyOptions<'a> {
    pub task_timeout: Duration,
    pub stop: Option<&'a AtomicBool>,
    pub on_result: Option<&'a runner::ActionObserver<'a>>,
    /// Take each cluster's lock before reading it (live writes); `None`
    /// for replays.
    pub lock: Option<&'a Locking>,
    /// Told the runner's progress, with the cluster it is about.
    pub on_progress: Option<&'a ClusterProgress<'a>>,
}

/// A progress observer that also hears which cluster is meant.
pub type ClusterProgress<'a> = dyn Fn(&ClusterName, &runner::Progress<'_>) + Sync + 'a;

/// One cluster read and planned: the first half of its converge cycle.
pub struct PlannedCluster {
    pub plan: Plan,
    started_at: Timestamp,
    clock: Instant,
    /// Held from before the read to after the read-back: whoever has the
    /// cluster next plans from what this cycle left.
    _lock: Option<ClusterLock>,
}

/// Takes the cluster's lock (when `lock` is given), then reads and plans
/// it. An invalid, unreadable or held cluster gets an aborted plan.
pub fn plan_cluster(p: &Prepared<'_>, lock: Option<&Locking>) -> PlannedCluster {
    let started_at = runner::unix_now();
    let clock = Instant::now();
    let (plan, held) = match &p.ready {
        Err(unready) => (unready.plan(&p.name), None),
        Ok(r) => match lock.map(|l| l.acquire(&p.name, &r.base_url)).transpose() {
            Err(e) => (
                Plan::aborted(p.name.clone(), e.cause(), e.to_string()),
                None,
            ),
            Ok(held) => (r.read_and_plan(&p.name, r.transport.as_ref()).plan, held),
        },
    };
    PlannedCluster {
        plan,
        started_at,
        clock,
        _lock: held,
    }
}

/// Executes the plan `plan_cluster` made for `p`, then reads back and
/// re-plans; the cluster's lock is let go after the read-back. An aborted
/// or empty plan performs nothing.
pub fn execute_cluster(
    p: &Prepared<'_>,
    planned: PlannedCluster,
    opts: &ApplyOptions<'_>,
) -> ClusterCycle {
    let PlannedCluster {
        plan,
        started_at,
        clock,
        _lock,
    } = planned;
    match &p.ready {
        Ok(ready) if !plan.aborted && !plan.actions.is_empty() => {
            execute_plan(ready, plan, opts, started_at, clock)
        }
        _ => ClusterCycle::planned_only(plan, started_at, clock),
    }
}

/// Executes `plan` (made from a read of this cluster, or saved), reads back
/// and re-plans.
pub fn execute_plan(
    ready: &Ready<'_>,
    mut plan: Plan,
    opts: &ApplyOptions<'_>,
    started_at: Timestamp,
    clock: Instant,
) -> ClusterCycle {
    // The planner's rules once more, whatever made the plan: an action
    // that breaks one becomes an anomaly and is never sent.
    proxops_core::admit::guard(&mut plan, ready.desired, &ready.policy);
    let now = runner::unix_now;
    let name = &plan.cluster;
    let progress = opts
        .on_progress
        .map(|f| move |event: &runner::Progress<'_>| f(name, event));
    let run = RunOptions {
        task_timeout: opts.task_timeout,
        power: ready.power,
        desired: Some(ready.desired),
        limits: ready.limits.clone(),
        now: &now,
        stop: opts.stop,
        on_result: opts.on_result,
        on_progress: progress
            .as_ref()
            .map(|f| f as &runner::ProgressObserver<'_>),
    };
    let execution = runner::execute(ready.transport.as_ref(), &plan, &run);
    let again = ready.read_and_plan(&plan.cluster, ready.transport.as_ref());
    let readback = (!again.plan.aborted).then_some(again.plan);
    let objects = state::object_states(&plan, Some(&execution), readback.as_ref(), None, now());
    ClusterCycle {
        name: plan.cluster.clone(),
        plan,
        execution: Some(execution),
        readback,
        objects,
        started_at,
        finished_at: now(),
        elapsed: clock.elapsed(),
    }
}

impl ClusterCycle {
    /// A cluster whose cycle ended with its plan: nothing executed.
    fn planned_only(plan: Plan, started_at: Timestamp, clock: Instant) -> ClusterCycle {
        ClusterCycle {
            name: plan.cluster.clone(),
            plan,
            execution: None,
            readback: None,
            objects: Vec::new(),
            started_at,
            finished_at: runner::unix_now(),
            elapsed: clock.elapsed(),
        }
    }
}

/// One observing cycle per selected cluster (`run --dry-run`): read and
/// plan, nothing else. Reads go through [`ReadOnly`], which refuses any
/// write; the runner is never called. Returns the cycles and the number of
/// writes refused (0 unless there is a bug).
pub fn observe_all(session: &Session<'_>) -> (Vec<ClusterCycle>, u64) {
    let mut out = Vec::new();
    let mut refused = 0;
    for p in &session.clusters {
        let started_at = runner::unix_now();
        let clock = Instant::now();
        let plan = match &p.ready {
            Err(unready) => unready.plan(&p.name),
            Ok(ready) => {
                let guard = ReadOnly::new(ready.transport.as_ref());
                let planned = ready.read_and_plan(&p.name, &guard);
                refused += guard.refused();
                planned.plan
            }
        };
        out.push(ClusterCycle::planned_only(plan, started_at, clock));
    }
    (out, refused)
}
