//! Every selected cluster made ready for its cycle: credentials and TLS
//! trust resolved, the transport chosen (a replayed recording or the PVE
//! API, kept from one cycle to the next by a long-running process), the
//! policy its plans are made under. The cycles themselves are the
//! driver's ([`proxops_driver::drive`]).
//!
//! Owns the order before any cycle (spec §16.5, §22.6): credentials and
//! TLS trust for every selected cluster are resolved before any PVE
//! request (a credential problem ends the command with exit 2 and nothing
//! read); then which PVE each cluster leads to and what its credentials
//! may see are confirmed ([`proxops_driver::cluster`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use proxops_core::config::{AuthMethod, Config};
use proxops_core::diag::Diagnostic;
use proxops_core::drift::CloudInitSecrets;
use proxops_core::names::{ClusterName, Ref};
use proxops_core::plan::{AbortCause, Policy, ROOT_PAM};
use proxops_core::repo::ClusterDesired;
use proxops_driver::cluster::{
    Prepared, Ready, Session, SharedLive, Transports, Unready, confirm_distinct_pves,
    confirm_privileges,
};
use proxops_driver::drive::{self, PlanAll};
use proxops_driver::lock::Locking;
use proxops_pve::auth::{CredentialError, Credentials};
use proxops_pve::live::{LiveConfig, LiveTransport, RequestLog};
use proxops_pve::reader::ReadScope;
use proxops_pve::replay::ReplayTransport;
use proxops_pve::tls::TlsTrust;
use proxops_pve::transport::Transport;
use proxops_sops::IdentitySources;

use crate::args::GlobalArgs;
use crate::context::{self, Env, Workspace};
use crate::creds;
use crate::exit::{Exit, Failure};
use crate::out;

/// Where live state comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// Recordings `<dir>/<cluster>.json`.
    Replay(PathBuf),
    /// The PVE API.
    Live,
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
/// claimed for it in the host's record ([`proxops_driver::claims`]).
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
    for (name, result) in &ws.loaded.clusters {
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
        let host = proxops_driver::host::identity(cfg, tell_host_identity);
        let mut policy = Policy::from_config(cfg, cc, host);
        warn_risky(name, cc);
        let scope = ReadScope {
            allowlist: (!cc.nodes.is_empty()).then(|| cc.nodes.clone()),
            storages: desired.storage_pairs(),
            concurrency: cc.read_concurrency,
            firewall: proxops_core::firewall_plan::read_scope(desired),
        };
        let built = match source {
            Source::Replay(dir) => replay_transport(name, cc, ws, dir, &sources, &mut invalid)?,
            Source::Live => live_transport(name, cc, ws, &sources, reuse, &mut invalid)?,
        };
        let (transport, secrets, live) = match built {
            Built::Ready {
                transport,
                secrets,
                live,
                root_pam,
            } => {
                policy.root_pam = root_pam.unwrap_or(policy.root_pam);
                (transport, secrets, live)
            }
            Built::Refused(p) => {
                clusters.push(*p);
                continue;
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
                task_timeout: cfg.task_timeout.as_std(),
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
/// A cluster's transport and cloud-init secrets, or the refusal that
/// ends its cycle before any request.
enum Built {
    Ready {
        transport: Box<dyn Transport>,
        secrets: CloudInitSecrets,
        live: Option<Arc<LiveTransport>>,
        /// Whether the credentials are `root@pam`'s (`None`: as the
        /// configuration says).
        root_pam: Option<bool>,
    },
    Refused(Box<Prepared<'static>>),
}

/// Warns of the settings that give up a safety rail.
fn warn_risky(name: &ClusterName, cc: &proxops_core::config::ClusterConfig) {
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
    if cc.allow_firewall_lockout {
        crate::log::event(
            crate::log::Level::Warn,
            "the firewall lock-out guard is OFF (allow-firewall-lockout: true): a plan may close PVE's management ports to everyone; remove the key once the intended change is done",
            &[("cluster", name.as_str().into())],
        );
    }
}

/// A replayed recording as the cluster's transport.
fn replay_transport(
    name: &ClusterName,
    cc: &proxops_core::config::ClusterConfig,
    ws: &Workspace,
    dir: &Path,
    sources: &IdentitySources,
    invalid: &mut Vec<Diagnostic>,
) -> Result<Built, Failure> {
    let secrets = if cc.secrets_file.is_some() {
        match creds::resolve(&ws.loaded.config, cc, ws.root.as_deref(), sources) {
            Ok(c) => c.cloud_init,
            Err(f) => {
                return Ok(Built::Refused(Box::new(cloud_init_unreadable(
                    name, cc, ws, f, invalid,
                )?)));
            }
        }
    } else {
        CloudInitSecrets::default()
    };
    let path = dir.join(format!("{name}.json"));
    match ReplayTransport::load(&path) {
        Ok(t) => Ok(Built::Ready {
            transport: Box::new(t),
            secrets,
            live: None,
            root_pam: None,
        }),
        Err(e) => Ok(Built::Refused(Box::new(Prepared {
            name: name.clone(),
            ready: Err(Unready::new(
                AbortCause::Recording,
                format!("cannot load recording {}: {e}", path.display()),
            )),
        }))),
    }
}

/// The cluster's live transport: its credentials resolved and checked, its
/// TLS trust, and the transport kept from an earlier cycle when nothing of
/// them changed.
fn live_transport(
    name: &ClusterName,
    cc: &proxops_core::config::ClusterConfig,
    ws: &Workspace,
    sources: &IdentitySources,
    reuse: &Transports,
    invalid: &mut Vec<Diagnostic>,
) -> Result<Built, Failure> {
    let cfg = &ws.loaded.config;
    let c = match creds::resolve(cfg, cc, ws.root.as_deref(), sources) {
        Ok(c) => c,
        Err(f) => {
            return Ok(Built::Refused(Box::new(cloud_init_unreadable(
                name, cc, ws, f, invalid,
            )?)));
        }
    };
    c.check(name.as_str())?;
    // An API token is never root@pam to PVE, whatever its user.
    let root_pam = c.auth == AuthMethod::Ticket && c.user.as_deref() == Some(ROOT_PAM);
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
    let tls = TlsTrust::from_settings(ca_file.as_deref(), cc.fingerprint.as_deref(), cc.insecure)
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
    if let Some(shared) = reuse.kept(&key) {
        // A new cycle looks the endpoint up again, once.
        shared.new_cycle();
        return Ok(Built::Ready {
            transport: Box::new(SharedLive(Arc::clone(&shared))),
            secrets: c.cloud_init,
            live: Some(shared),
            root_pam: Some(root_pam),
        });
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
    reuse.keep(name, key, &shared);
    Ok(Built::Ready {
        transport: Box::new(SharedLive(Arc::clone(&shared))),
        secrets: c.cloud_init,
        live: Some(shared),
        root_pam: Some(root_pam),
    })
}

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
    Ok(drive::plan_all(session))
}

/// Prints the diagnostics of clusters refused for invalid input; the exit
/// code planning alone earns: invalid input, then an aborted plan.
pub fn planned_exit(outcome: &PlanAll) -> Exit {
    let mut exit = Exit::Ok;
    if !outcome.invalid.is_empty() {
        let refs: Vec<&Diagnostic> = outcome.invalid.iter().collect();
        out::errors(&context::render_diagnostics(&refs));
        exit = exit.worst(Exit::Input);
    }
    if outcome.plans.iter().any(|p| p.plan.is_aborted()) {
        exit = exit.worst(Exit::Runtime);
    }
    exit
}

/// The host identity read from `/sys`, logged when it changes.
fn tell_host_identity(macs: &str, smbios_uuid: &str) {
    crate::log::event(
        crate::log::Level::Debug,
        "proxops.self host identity read from /sys; a guest showing it is never stopped, restarted or pruned",
        &[("macs", macs.into()), ("smbios_uuid", smbios_uuid.into())],
    );
}

/// The cluster locks of `command`, a wait for one held elsewhere logged.
pub fn locking(cfg: &Config, command: &str) -> Locking {
    Locking::new(cfg, command).telling(tell_lock_wait)
}

fn tell_lock_wait(cluster: &str, holder: &str, wait: &str) {
    crate::log::event(
        crate::log::Level::Info,
        "cluster held by another proxops process; waiting",
        &[
            ("cluster", cluster.into()),
            ("holder", holder.into()),
            ("wait", wait.into()),
        ],
    );
}
