//! The clusters of one pass, ready to be read or refused: what a cycle of
//! each needs (desired state, policy, transport, read scope) and the
//! checks that come before any cluster's inventory read: which PVE each
//! `base-url` leads to, and whether the credentials may see what the
//! cluster manages.
//!
//! Credentials, TLS trust and the choice of transport are the binary's: it
//! builds a [`Session`] of [`Prepared`] clusters and hands it here.
//!
//! **Architecture Invariant:** a cluster refused here ([`Unready`]) is
//! never read or written this cycle; its plan is the refusal.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proxops_core::config::Config;
use proxops_core::cycle::{Known, shared_pve, unidentified};
use proxops_core::diag::Diagnostic;
use proxops_core::drift::CloudInitSecrets;
use proxops_core::names::{ClusterName, Ref};
use proxops_core::plan::{Abort, AbortCause, Plan, Policy};
use proxops_core::repo::ClusterDesired;
use proxops_core::rollout::Limits;
use proxops_core::step::PowerPolicy;
use proxops_pve::identity::{self, PveIdentity};
use proxops_pve::live::LiveTransport;
use proxops_pve::reader::ReadScope;
use proxops_pve::transport::{Request, Response, Transport, TransportError};

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
    pub fn new(cause: AbortCause, reason: String) -> Unready {
        Unready {
            cause,
            reason,
            diagnostics: Vec::new(),
        }
    }

    /// The refusal of core's cycle machine, as a prepared cluster's.
    fn from_abort(abort: Abort) -> Unready {
        Unready::new(abort.cause, abort.reason)
    }

    pub fn because_of(mut self, diagnostics: &[Diagnostic]) -> Unready {
        self.diagnostics = diagnostics.to_vec();
        self
    }

    /// The refusal as core's cycle machine takes it.
    pub fn abort(&self) -> Abort {
        Abort::new(self.cause, self.reason.clone())
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
    pub limits: Limits,
    /// Longest wait for one PVE task (`reconcile.task-timeout`).
    pub task_timeout: Duration,
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

/// A boxed transport is a transport (so it can be wrapped, e.g. recorded).
pub struct Boxed(pub Box<dyn Transport>);

impl Transport for Boxed {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        self.0.call(request)
    }

    fn acting_as(&self) -> Option<String> {
        self.0.acting_as()
    }

    fn is_local(&self) -> bool {
        self.0.is_local()
    }

    fn recorded_body(&self, request: &Request) -> Option<(u16, &str)> {
        self.0.recorded_body(request)
    }
}

/// A live transport shared between the session and whoever reads its
/// counters.
pub struct SharedLive(pub Arc<LiveTransport>);

impl Transport for SharedLive {
    fn call(&self, request: &Request) -> Result<Response, TransportError> {
        self.0.call(request)
    }

    fn acting_as(&self) -> Option<String> {
        self.0.acting_as()
    }
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
/// a string the binary makes from the cluster, endpoint, TLS settings and
/// a digest of the credentials: a change of any of them builds a new
/// transport.
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

    /// The live transport kept under `key`, if any.
    pub fn kept(&self, key: &str) -> Option<Arc<LiveTransport>> {
        self.live.lock().ok().and_then(|m| m.get(key).cloned())
    }

    /// Keeps `transport` under `key`, forgetting the cluster's earlier ones
    /// (keys start with `<cluster>|`).
    pub fn keep(&self, cluster: &ClusterName, key: String, transport: &Arc<LiveTransport>) {
        if let Ok(mut live) = self.live.lock() {
            live.retain(|k, _| !k.starts_with(&format!("{cluster}|")));
            live.insert(key, Arc::clone(transport));
        }
    }
}

/// Two clusters whose `base-url`s lead to one PVE in a way no comparison of
/// URLs sees (two DNS names, a name and an address, a proxy) would each
/// prune the other's guests. So PVE is asked which it is (`GET
/// /cluster/status`, one read per cluster per cycle, since names can move)
/// before the cluster's first inventory read and any write, and the
/// cluster is refused by core's rules ([`proxops_core::cycle`]) when:
///
/// - the answer does not say (fail closed: a cluster whose PVE is not
///   confirmed writes nothing; the next cycle asks again);
/// - another cluster of this process leads to the same PVE (`reuse` holds
///   what the other configured clusters' PVEs said when last asked: the
///   daemon cycles each cluster on its own);
/// - this host's record ([`crate::claims`]) has that PVE under another
///   cluster name, claimed by this process or another one. A writing
///   command claims it.
///
/// Every cluster's PVE is asked before any is compared, so this runs for
/// the whole session, before the clusters' cycles.
pub fn confirm_distinct_pves(clusters: &mut [Prepared<'_>], cfg: &Config, reuse: &Transports) {
    let known = &reuse.identities;
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
    let identities = read_identities(clusters);
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
        let others: Vec<Known> = identities
            .iter()
            .filter(|(b, _)| b != a)
            .map(|(b, other)| (&clusters[*b].name, other))
            .chain(elsewhere.iter().map(|(n, other)| (n, other)))
            .map(|(n, other)| Known {
                described: describe(n),
                identity: other.clone(),
            })
            .collect();
        let name = &clusters[*a].name;
        if let Some(abort) = shared_pve(&describe(name), id, &others) {
            refused.push((*a, abort));
            continue;
        }
        let reached = cfg
            .clusters
            .get(name)
            .map(|cc| (cc.base_url.as_str(), cc.declared_in.as_str()))
            .unwrap_or(("", ""));
        if let Err(e) = crate::claims::Claims::new(cfg).check(name, id, reached, reuse.writes) {
            let reason = format!("cluster {}: {e}", describe(name));
            refused.push((*a, Abort::new(AbortCause::SharedPve, reason)));
        }
    }
    for (i, abort) in refused {
        clusters[i].ready = Err(Unready::from_abort(abort));
    }
}

/// Asks each ready cluster's PVE which it is; a cluster whose PVE does not
/// say is refused ([`unidentified`]).
fn read_identities(clusters: &mut [Prepared<'_>]) -> Vec<(usize, PveIdentity)> {
    let mut identities = Vec::new();
    for (i, p) in clusters.iter_mut().enumerate() {
        let Ok(r) = &p.ready else { continue };
        match identity::read_identity(r.transport.as_ref()) {
            Ok(id) => identities.push((i, id)),
            Err(e) => p.ready = Err(Unready::from_abort(unidentified(&e.to_string()))),
        }
    }
    identities
}

/// Each ready cluster's credentials can see what it manages
/// ([`proxops_core::audit::needed`]): PVE hides from an inventory read what
/// a token may not audit, and a plan made from that would create guests
/// that exist. A cluster missing a privilege, or whose privileges cannot
/// be read, does nothing this cycle, the privilege and path named.
pub fn confirm_privileges(clusters: &mut [Prepared<'_>]) {
    for p in clusters.iter_mut() {
        let Ok(r) = &p.ready else { continue };
        let storages = r.scope.storages.iter().map(|(_, s)| s);
        let needed = proxops_core::audit::needed(storages);
        let paths: Vec<&str> = needed.iter().map(|n| n.path.as_str()).collect();
        let held = identity::read_privileges(r.transport.as_ref(), &paths, r.scope.concurrency);
        let mut missing = Vec::new();
        let mut unread = None;
        for (need, held) in needed.into_iter().zip(held) {
            match held {
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
