//! `proxops run`: the daemon (spec §16.1, §17, §22.6). Serves `/healthz`,
//! `/metrics` and `/status` on `listen` and, every `poll-interval`, re-reads
//! the local tree (or fetches the remote branch in URL mode, through one
//! [`DesiredSource`] kept for the process) and runs one converge cycle per
//! selected cluster.
//!
//! Start-up order: configuration and the daemon's secrets, then the status
//! server (answering `starting`), then credentials, TLS trust and each
//! PVE's identity, then the loop. `/healthz` is 503 until every selected
//! cluster has completed a turn.
//!
//! Owns the loop, the status store it feeds and shutdown: SIGINT/SIGTERM
//! start no new action, let the action in flight finish (the runner bounds
//! it by `task-timeout`), stop the server and exit 0.
//!
//! `-n/--dry-run` makes it an observer: every cycle reads git and PVE,
//! plans, logs the plan and reports it (`dry_run` cycles, the pending
//! actions and their field changes in `/status` and `/metrics`), and never
//! writes: the cycle does not reach the runner and reads through a
//! transport that refuses writes ([`drive::observe_all`]). The mode is in
//! the first log line and in `/status` (`"mode": "observe"`).
//!
//! Must never: stop looping because one cycle or one cluster failed (an
//! invalid tree is an aborted `parse_error` cycle, a failing cluster is
//! that cluster's result), go on reconciling once the status server has
//! stopped serving (that ends the process with exit 1, for the service
//! manager to restart it), or log a request body, a header or a
//! credential.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proxops_core::config::{self, Config, ConfigSource, ConfigSources};
use proxops_core::cycle::CycleRecord;
use proxops_core::exec::Timestamp;
use proxops_core::notify::Event;
use proxops_core::plan::{AbortCause, Plan};
use proxops_core::render;
use proxops_core::repo::ClusterDesired;
use proxops_core::report::Delivery;
use proxops_core::report::{ClusterReport, CycleReport, CycleResult, RunMode, StatusStore};
use proxops_driver::cluster::Prepared;
use proxops_driver::cluster::{Session, Transports};
use proxops_driver::daemon::{self, Lanes, Memory, Notices, Pass, Reported, Wake};
use proxops_driver::drive::ApplyOptions;
use proxops_http::{
    Access, Dashboard, DeliveryObserver, GitHooks, Observer, ServerEvent, ServerLimits,
    ServerOptions, StatusServer, Target, store_source,
};
use proxops_pve::runner::unix_now;
use proxops_sops::IdentitySources;

use crate::apply::log_action;
use crate::args::{CommandArgs, GlobalArgs};
use crate::context::{self, Env, Workspace};
use crate::creds::{self, AccessCredential, TargetSecrets};
use crate::exit::{Exit, Failure};
use crate::gitsource::DesiredSource;
use crate::log::{self, Level};
use crate::prepare::{self, Source};

/// How often the pause between two cycles looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let process_start = unix_now();
    let mode = if a.dry_run {
        RunMode::Observe
    } else {
        RunMode::Apply
    };
    announce(mode);
    // Start-up: the configuration must load (it names `listen` and the
    // poll interval); later load failures are aborted cycles. In URL mode a
    // first fetch that fails is not a start-up failure: the daemon serves
    // and counts `not_ready` cycles until the remote answers (§22.6).
    let mut desired = DesiredSource::open(g, env)?;
    let transports = Arc::new(match mode {
        RunMode::Apply => Transports::writing(),
        RunMode::Observe => Transports::default(),
    });
    let (config, root, mut known_clusters, first) = first_load(g, env, &mut desired)?;
    let (poll, parallel) = (config.poll_interval.as_std(), config.parallel_clusters);
    // The daemon's own secrets (access credential, webhook secret,
    // notification targets) are read once, at start-up: exit 2 if one is
    // missing.
    let secrets = creds::daemon_secrets(
        &config,
        root.as_deref(),
        &IdentitySources::from_process_env(),
    )?;
    let wake = Arc::new(Wake::default());

    let store = Arc::new(Mutex::new(new_store(
        process_start,
        mode,
        &known_clusters,
        &secrets,
    )));
    let notices = Arc::new(start_notices(&secrets.notify, &store)?);
    let stop = Arc::new(AtomicBool::new(false));
    let server = serve(&config, &secrets, (&store, &stop, &wake), mode)?;
    let addr = server.local_addr().to_string();
    // The server answers (`starting`) while credentials and TLS trust are
    // checked (exit 2 if unusable) and each PVE says which it is, before
    // the clusters go their own ways: a slow PVE no longer keeps the
    // process silent.
    if let Ok(ws) = &first
        && let Err(f) = prepare::prepare_reusing(g, env, ws, &Source::Live, &transports)
    {
        server.shutdown();
        return Err(f);
    }

    let shared = Shared {
        g: g.clone(),
        env: env.clone(),
        mode,
        stop: Arc::clone(&stop),
        store: Arc::clone(&store),
        transports,
        notices: Arc::clone(&notices),
        memory: Arc::new(Memory::default()),
    };
    let mut lanes = Lanes::new(log_panic);
    let mut first = Some(first);
    while !stop.load(Ordering::SeqCst) {
        lanes.reap();
        let now = Instant::now();
        if wake.take() {
            // A verified push: every cluster is due now (one still in its
            // cycle right after it), and the due ones start with a fresh
            // fetch. A burst of pushes is one wake.
            lanes.all_due(now);
            log::event(
                Level::Info,
                "proxops.run sync on push: fetching and starting a cycle now",
                &[],
            );
        }
        let busy = lanes.busy();
        // A configuration that names no cluster still loads every poll
        // interval, under the name its aborted cycles report.
        let wanted = if known_clusters.is_empty() {
            vec!["default".to_owned()]
        } else {
            known_clusters.clone()
        };
        if busy < parallel && wanted.iter().any(|n| lanes.is_due(n, now)) {
            let loaded = match first.take() {
                Some(loaded) => loaded,
                None => desired.next_cycle(g, env),
            };
            let free = parallel - busy;
            start_due(
                loaded,
                &shared,
                (&mut lanes, &mut known_clusters),
                wanted,
                (now, poll, free),
            );
        }
        // A cluster gone from the configuration keeps no schedule.
        let scheduled = if known_clusters.is_empty() {
            vec!["default".to_owned()]
        } else {
            known_clusters.clone()
        };
        lanes.retain(&scheduled);
        if a.once && lanes.turn_taken(&scheduled) {
            break;
        }
        daemon::pause(&stop, STOP_CHECK, STOP_CHECK);
    }
    wind_down(server, &mut lanes, &addr, a.once.then_some(&*store))
}

/// The first load: the configuration must load (it names `listen` and
/// the poll interval); in URL mode a first fetch that fails is not a
/// start-up failure: the daemon serves and counts `not_ready` cycles until
/// the remote answers (§22.6).
#[allow(clippy::type_complexity)] // read once, by `run`
fn first_load(
    g: &GlobalArgs,
    env: &Env,
    desired: &mut DesiredSource,
) -> Result<
    (
        Config,
        Option<std::path::PathBuf>,
        Vec<String>,
        Result<Workspace, Failure>,
    ),
    Failure,
> {
    Ok(match desired.next_cycle(g, env) {
        Ok(ws) => (
            ws.loaded.config.clone(),
            ws.root.clone(),
            cluster_names(g, &ws),
            Ok(ws),
        ),
        Err(f) if desired.is_url() && f.cause == Some(AbortCause::NotReady) => {
            let Some(cfg) = process_config(g, env) else {
                return Err(f);
            };
            let names = cfg
                .clusters
                .keys()
                .map(|k| k.as_str().to_owned())
                .filter(|n| context::selected(g, n))
                .collect();
            (cfg, None, names, Err(f))
        }
        Err(f) => return Err(f),
    })
}

/// Starts a cycle of every due cluster (at most `free`) over a freshly
/// loaded workspace; a load that failed is every due cluster's aborted
/// cycle, and they are due again a poll interval later.
fn start_due(
    loaded: Result<Workspace, Failure>,
    shared: &Shared,
    (lanes, known_clusters): (&mut Lanes, &mut Vec<String>),
    wanted: Vec<String>,
    (now, poll, free): (Instant, Duration, usize),
) {
    match loaded {
        Ok(ws) => {
            *known_clusters = cluster_names(&shared.g, &ws);
            if let Ok(mut s) = shared.store.lock() {
                s.retain_clusters(known_clusters);
            }
            let ws = Arc::new(ws);
            let names = if known_clusters.is_empty() {
                vec!["default".to_owned()]
            } else {
                known_clusters.clone()
            };
            let due: Vec<String> = names
                .into_iter()
                .filter(|n| lanes.is_due(n, now))
                .take(free)
                .collect();
            for name in due {
                let cycle = shared.spawn(&name, Arc::clone(&ws));
                lanes.started(name, cycle, now + poll);
            }
        }
        Err(f) => {
            let due: Vec<String> = wanted
                .into_iter()
                .filter(|n| lanes.is_due(n, now))
                .collect();
            let report = unloadable(&due, &f, &shared.stop);
            shared.notices.after(&report);
            record(&shared.store, report);
            for name in due {
                lanes.skipped(name, now + poll);
            }
        }
    }
}

/// Starts the status server (and the signal handlers that stop the
/// daemon), and says where it listens.
fn serve(
    config: &Config,
    secrets: &creds::DaemonSecrets,
    (store, stop, wake): (&Arc<Mutex<StatusStore>>, &Arc<AtomicBool>, &Arc<Wake>),
    mode: RunMode,
) -> Result<StatusServer, Failure> {
    let dashboard = if config.daemon.dashboard {
        Dashboard::On
    } else {
        Dashboard::Off
    };
    let server = StatusServer::start_with(
        &config.listen,
        store_source(
            Arc::clone(store),
            config.poll_interval.as_std().as_secs(),
            dashboard,
        ),
        ServerOptions {
            limits: ServerLimits::default(),
            observer: Some(server_observer(Arc::clone(stop))),
            access: secrets.access.clone().map(|a| match a {
                AccessCredential::Bearer(token) => Access::Bearer(token),
                AccessCredential::Basic { user, password } => Access::Basic { user, password },
            }),
            hooks: secrets.webhook.clone().map(|secret| GitHooks {
                secret,
                on_push: {
                    let wake = Arc::clone(wake);
                    Arc::new(move |_| wake.push())
                },
            }),
        },
    )
    .map_err(|e| Failure::runtime(e.to_string()))?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while the first is being honoured ends the
        // process at once (exit 1); the first only sets the flag.
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(stop)))
            .map_err(|e| Failure::runtime(format!("cannot handle signals: {e}")))?;
    }
    let addr = server.local_addr().to_string();
    let poll_text = format!("{}s", config.poll_interval.as_std().as_secs_f64());
    log::event(
        Level::Info,
        "proxops.run started",
        &[
            ("listen", (&addr).into()),
            ("poll_interval", (&poll_text).into()),
            ("mode", mode.as_str().into()),
        ],
    );
    if !server.local_addr().ip().is_loopback() {
        log::event(
            Level::Warn,
            "the status server listens beyond loopback: /status and /metrics describe the clusters to anyone who can reach the port; firewall it to the scraper",
            &[("listen", (&addr).into())],
        );
    }
    Ok(server)
}

/// The daemon's status store before its first cycle.
fn new_store(
    process_start: Timestamp,
    mode: RunMode,
    known_clusters: &[String],
    secrets: &creds::DaemonSecrets,
) -> StatusStore {
    let mut new_store = StatusStore::new(process_start);
    new_store.set_mode(mode);
    // /healthz is 503 and /status says `starting` until each of these
    // clusters has completed a turn.
    new_store.retain_clusters(known_clusters);
    for t in &secrets.notify {
        new_store.add_target(&t.target.name, t.target.kind.as_str());
    }
    new_store
}

/// Says which mode the daemon runs in.
fn announce(mode: RunMode) {
    log::event(
        Level::Info,
        match mode {
            RunMode::Observe => {
                "proxops.run observe mode: plans are logged and served, nothing is written to PVE"
            }
            RunMode::Apply => "proxops.run apply mode: plans are executed",
        },
        &[("mode", mode.as_str().into())],
    );
}

/// Stopping: waits for the cycles in flight, then ends the server; the
/// exit `run --once` earns from the last cycles (`once`, its store).
fn wind_down(
    server: StatusServer,
    lanes: &mut Lanes,
    addr: &str,
    once: Option<&Mutex<StatusStore>>,
) -> Result<Exit, Failure> {
    // Stopping: no cluster starts a cycle any more; the ones in flight
    // finish the action they are in (the runner sees the stop flag) and
    // are recorded.
    lanes.wait_all();
    if let Some(reason) = server.failure() {
        // Nothing answers /healthz any more: reconciling on unwatched would
        // hide it from every probe, so end and let systemd restart us.
        server.shutdown();
        return Err(Failure::runtime(format!(
            "status server stopped ({reason}); exiting so the service manager restarts proxops"
        )));
    }
    log::event(
        Level::Info,
        "proxops.run stopping",
        &[("listen", addr.into())],
    );
    server.shutdown();
    Ok(once.map_or(Exit::Ok, once_exit))
}

/// `run --once`'s exit: 1 when a cluster's turn aborted or an action
/// failed, as `apply` says it.
fn once_exit(store: &Mutex<StatusStore>) -> Exit {
    let Ok(store) = store.lock() else {
        return Exit::Runtime;
    };
    let failed = store
        .cluster_cycles()
        .any(|c| c.actions_error > 0 || !matches!(c.result, CycleResult::Ok | CycleResult::DryRun));
    if failed { Exit::Runtime } else { Exit::Ok }
}

/// Logs what the status server reports and, when its serving thread ends,
/// stops the loop as SIGTERM would: the action in flight finishes, then
/// the process exits 1 (see [`run`]).
fn server_observer(stop: Arc<AtomicBool>) -> Observer {
    Arc::new(move |event: &ServerEvent| match event {
        ServerEvent::AcceptFailing {
            error,
            out_of_resources,
            retry_in,
        } => {
            let retry = format!("{}ms", retry_in.as_millis());
            let message = if *out_of_resources {
                "status server: accept failed, out of file descriptors or memory; backing off and accepting again (raise LimitNOFILE if this repeats)"
            } else {
                "status server: accept failed; backing off and accepting again"
            };
            log::event(
                Level::Warn,
                message,
                &[
                    ("error", error.as_str().into()),
                    ("retry_in", (&retry).into()),
                ],
            );
        }
        ServerEvent::AcceptRecovered { failures } => {
            log::event(
                Level::Info,
                "status server: accepting again",
                &[("failed_accepts", (*failures).into())],
            );
        }
        ServerEvent::HookAccepted { forge, event, woke } => {
            log::event(
                Level::Info,
                if *woke {
                    "git webhook: verified push; syncing now"
                } else {
                    "git webhook: verified, not a push; nothing to do"
                },
                &[
                    ("forge", forge.as_str().into()),
                    ("event", event.as_str().into()),
                ],
            );
        }
        ServerEvent::HookRefused {
            forge,
            status,
            reason,
        } => {
            log::event(
                Level::Warn,
                "git webhook refused",
                &[
                    ("forge", forge.map_or("unknown", |f| f.as_str()).into()),
                    ("status", u64::from(*status).into()),
                    ("reason", reason.as_str().into()),
                ],
            );
        }
        ServerEvent::Ended { reason } => {
            log::event(
                Level::Error,
                "status server: serving thread ended; stopping after the action in flight",
                &[("reason", reason.as_str().into())],
            );
            stop.store(true, Ordering::SeqCst);
        }
        _ => {}
    })
}

/// The process configuration on its own (the `--config` file and the
/// flags, no tree): what a URL-mode daemon listens with before its first
/// good fetch. `None` when it does not load.
fn process_config(g: &GlobalArgs, env: &Env) -> Option<Config> {
    let explicit = match context::config_path(g, env) {
        Some(p) => Some(context::read_config(&p).ok()?),
        None => None,
    };
    let sources = ConfigSources {
        process: explicit.as_ref().map(|(name, bytes)| ConfigSource {
            name: name.clone(),
            bytes,
        }),
        cluster_local: Vec::new(),
        process_is_explicit: explicit.is_some(),
    };
    config::load(&sources, &context::overrides(g, env)).ok()
}

/// The selected clusters of a loaded workspace, sorted.
fn cluster_names(g: &GlobalArgs, ws: &Workspace) -> Vec<String> {
    ws.loaded
        .clusters
        .keys()
        .map(|k| k.as_str().to_owned())
        .filter(|n| context::selected(g, n))
        .collect()
}

/// What every cluster's cycle thread shares with the loop.
struct Shared {
    g: GlobalArgs,
    env: Env,
    mode: RunMode,
    stop: Arc<AtomicBool>,
    store: Arc<Mutex<StatusStore>>,
    transports: Arc<Transports>,
    notices: Arc<Notices>,
    /// The daemon's memory across cycles (holds, request counts).
    memory: Arc<Memory>,
}

impl Shared {
    /// Starts one cycle of cluster `name` over `ws` on a thread of its own;
    /// it records its report in the status store when done.
    fn spawn(&self, name: &str, ws: Arc<Workspace>) -> std::thread::JoinHandle<()> {
        let mut g = self.g.clone();
        g.clusters = vec![name.to_owned()];
        let env = self.env.clone();
        let mode = self.mode;
        let stop = Arc::clone(&self.stop);
        let store = Arc::clone(&self.store);
        let transports = Arc::clone(&self.transports);
        let notices = Arc::clone(&self.notices);
        let memory = Arc::clone(&self.memory);
        std::thread::spawn(move || {
            let ctx = CycleContext {
                mode,
                stop: &stop,
                store: &store,
                transports: &transports,
                notices: &notices,
                memory: &memory,
            };
            let report = one_cycle(&g, &env, &ws, &ctx);
            notices.after(&report);
            record(&store, report);
        })
    }
}

/// Puts a cycle's report in the status store.
fn record(store: &Mutex<StatusStore>, report: CycleReport) {
    match store.lock() {
        Ok(mut s) => s.record_cycle(report),
        Err(_) => log::event(
            Level::Error,
            "status store unavailable; cycle not recorded",
            &[],
        ),
    }
}

/// What one cluster's cycle thread shares with the loop and reads and
/// updates of the daemon's memory.
struct CycleContext<'a> {
    mode: RunMode,
    stop: &'a AtomicBool,
    store: &'a Mutex<StatusStore>,
    transports: &'a Transports,
    notices: &'a Notices,
    memory: &'a Memory,
}

/// One converge cycle (or, observing, one planning cycle) over a freshly
/// loaded workspace.
fn one_cycle(g: &GlobalArgs, env: &Env, ws: &Workspace, ctx: &CycleContext<'_>) -> CycleReport {
    let CycleContext {
        mode,
        stop,
        store,
        transports,
        notices,
        memory,
        ..
    } = *ctx;
    let started_at = unix_now();
    let clock = Instant::now();
    let mut session = match prepare::prepare_reusing(g, env, ws, &Source::Live, transports) {
        Ok(s) => s,
        Err(f) => return credentials_refused(g, ws, &f, (started_at, clock), stop),
    };
    // Per cycle, not for the process: a cron `apply` can take a cluster
    // between two cycles, and a cycle that finds one held skips it
    // (`locked`) and tries again next time.
    let locking = prepare::locking(&ws.loaded.config, "proxops run");
    let opts = ApplyOptions {
        stop: Some(stop),
        on_result: Some(&log_action),
        lock: Some(&locking),
        on_progress: None,
    };
    // Invalid manifests: the clusters abort (parse_error); say why.
    for d in &session.invalid {
        let text = render::one_line(&d.to_string());
        log::event(
            Level::Error,
            "proxops.invalid_input",
            &[("diagnostic", text.as_str().into())],
        );
    }
    // The holds of the last cycles, judged at this cycle's start.
    memory.prime(&mut session, started_at);
    let planned = |p: &Prepared<'_>, plan: &Plan| {
        // Drift is told before it is applied.
        notices.planned(plan, desired_of(ws, p.name.as_str()));
        if !plan.is_aborted()
            && !plan.actions.is_empty()
            && let Ok(mut s) = store.lock()
        {
            s.set_applying(p.name.as_str(), unix_now());
        }
    };
    let pass = Pass {
        mode,
        opts,
        planned: &planned,
        observed: &observed,
    };
    let cycles = daemon::converge(&session, &pass);
    let clusters = reports(cycles, ws, &session, ctx);
    CycleReport {
        commit: ws.commit.clone().unwrap_or_default(),
        started_at,
        finished_at: unix_now(),
        duration_ms: elapsed_ms(clock),
        complete: !stop.load(Ordering::SeqCst),
        git_fetched_at: (!ws.desired_stale).then_some(started_at),
        clusters,
    }
}

/// A cycle whose credentials or TLS settings are unusable: every cluster
/// aborts, nothing read.
fn credentials_refused(
    g: &GlobalArgs,
    ws: &Workspace,
    f: &Failure,
    (started_at, clock): (Timestamp, Instant),
    stop: &AtomicBool,
) -> CycleReport {
    let reason = format!(
        "credentials or TLS settings unusable: {}",
        render::one_line(&f.message)
    );
    let finished_at = unix_now();
    let clusters: Vec<ClusterReport> = cluster_names(g, ws)
        .into_iter()
        .map(|n| ClusterReport::aborted(n, AbortCause::Credentials, reason.clone()))
        .collect();
    for c in &clusters {
        log_cluster(c, Duration::ZERO, None);
    }
    CycleReport {
        commit: ws.commit.clone().unwrap_or_default(),
        started_at,
        finished_at,
        duration_ms: elapsed_ms(clock),
        complete: !stop.load(Ordering::SeqCst),
        git_fetched_at: (!ws.desired_stale).then_some(started_at),
        clusters,
    }
}

/// Each cluster's cycle as the store records it (holds remembered, PVE
/// requests counted), logged.
fn reports(
    cycles: Vec<CycleRecord>,
    ws: &Workspace,
    session: &Session<'_>,
    ctx: &CycleContext<'_>,
) -> Vec<ClusterReport> {
    let (reported, requests) = ctx.memory.reports(
        cycles,
        session,
        |name| desired_of(ws, name),
        (ctx.mode, &ws.loaded.config.hold),
    );
    let mut clusters = Vec::new();
    for Reported {
        mut report,
        elapsed,
    } in reported
    {
        report.desired_stale = ws.desired_stale;
        log_cluster(&report, elapsed, ws.stale_reason.as_deref());
        clusters.push(report);
    }
    if let Ok(mut s) = ctx.store.lock() {
        s.add_pve_requests(&requests);
    }
    clusters
}

/// A cluster's desired state in `ws`, when it loaded.
fn desired_of<'w>(ws: &'w Workspace, name: &str) -> Option<&'w ClusterDesired> {
    ws.loaded
        .clusters
        .iter()
        .find(|(n, _)| n.as_str() == name)
        .and_then(|(_, r)| r.as_ref().ok())
}

/// Observing: a write the read-only transport refused (a bug), and each
/// plan, logged.
fn observed(refused: u64, cycles: &[CycleRecord]) {
    if refused > 0 {
        log::event(
            Level::Error,
            "proxops.run observe mode refused a write to PVE (a bug; nothing was sent)",
            &[("refused", refused.into())],
        );
    }
    for c in cycles {
        log_plan(&c.plan);
    }
}

/// A cluster's cycle thread ended in a panic.
fn log_panic() {
    log::event(
        Level::Error,
        "a cluster's cycle ended in a panic (a bug); the cluster is tried again next poll interval",
        &[],
    );
}

/// The notifier for `targets`, telling `store` and the log what becomes
/// of each message.
fn start_notices(
    targets: &[TargetSecrets],
    store: &Arc<Mutex<StatusStore>>,
) -> Result<Notices, Failure> {
    let targets = targets
        .iter()
        .map(|t| Target {
            name: t.target.name.clone(),
            kind: t.target.kind,
            url: t.url.clone(),
            token: t.token.clone(),
            clusters: t.target.clusters.clone(),
        })
        .collect();
    let store = Arc::clone(store);
    let observer: DeliveryObserver = Arc::new(move |target, event, delivery, queued| {
        log_delivery(target, event, delivery);
        if let Ok(mut s) = store.lock() {
            s.record_delivery(target, delivery, queued, unix_now());
        }
    });
    Notices::start(targets, observer).map_err(Failure::runtime)
}

/// Milliseconds since `clock`, saturating.
pub(crate) fn elapsed_ms(clock: Instant) -> u64 {
    u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// A cycle whose repository could not be loaded: every cluster known from
/// the last good load aborts (invalid input is `parse_error`, a git sync
/// without any good tree `not_ready`); nothing is read from or written to
/// PVE.
fn unloadable(known: &[String], f: &Failure, stop: &AtomicBool) -> CycleReport {
    let now = unix_now();
    let message = render::one_line(&f.message);
    let (cause, reason) = if let Some(cause) = f.cause {
        // `not_ready`: URL mode without any good tree.
        (cause, message)
    } else if f.exit == Exit::Input {
        (
            AbortCause::InvalidInput,
            format!("invalid input: {message}"),
        )
    } else {
        (
            AbortCause::RepositoryUnreadable,
            format!("repository unreadable: {message}"),
        )
    };
    log::event(
        Level::Error,
        "proxops.load failed; nothing read or written this cycle",
        &[("reason", (&reason).into())],
    );
    let names: Vec<String> = if known.is_empty() {
        vec!["default".to_owned()]
    } else {
        known.to_vec()
    };
    let clusters: Vec<ClusterReport> = names
        .into_iter()
        .map(|n| ClusterReport::aborted(n, cause, reason.clone()))
        .collect();
    for c in &clusters {
        log_cluster(c, Duration::ZERO, None);
    }
    CycleReport {
        commit: String::new(),
        started_at: now,
        finished_at: now,
        duration_ms: 0,
        complete: !stop.load(Ordering::SeqCst),
        git_fetched_at: None,
        clusters,
    }
}

/// Observing: one info line per planned action and per anomaly, with the
/// field changes (secrets shown as `<secret>`, as every rendering does).
fn log_plan(plan: &Plan) {
    let cluster = plan.cluster.as_str();
    for a in &plan.actions {
        let id = a.target.to_string();
        let changes = a
            .changes
            .iter()
            .map(|c| {
                format!(
                    "{}: {} -> {}",
                    c.field,
                    c.from.as_deref().unwrap_or("(unset)"),
                    c.to.as_deref().unwrap_or("(unset)")
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        log::event(
            Level::Info,
            "proxops.planned",
            &[
                ("cluster", cluster.into()),
                ("kind", a.kind.as_str().into()),
                ("name", (&a.name).into()),
                ("id", (&id).into()),
                ("node", a.node.as_str().into()),
                ("what", a.op.as_str().into()),
                ("impact", a.impact.as_str().into()),
                ("reason", (&a.reason).into()),
                ("changes", (&render::one_line(&changes)).into()),
            ],
        );
    }
    for an in &plan.anomalies {
        let (_, id) = an.node_and_id();
        log::event(
            Level::Warn,
            "proxops.anomaly",
            &[
                ("cluster", cluster.into()),
                ("type", an.anomaly_type().as_str().into()),
                ("kind", an.kind.map_or("", |k| k.as_str()).into()),
                ("name", an.name.as_deref().unwrap_or("").into()),
                ("id", (&id).into()),
                ("message", (&render::one_line(&an.message)).into()),
            ],
        );
    }
}

/// One info line per cluster per cycle (warn when it aborted).
fn log_cluster(c: &ClusterReport, elapsed: Duration, stale_reason: Option<&str>) {
    let mut fields = vec![
        ("cluster", log::Value::from(c.name.as_str())),
        ("result", c.result.as_str().into()),
        ("actions_ok", c.counts.actions_ok.into()),
        ("actions_error", c.counts.actions_error.into()),
        ("duration", log::millis(elapsed)),
    ];
    if c.aborted {
        fields.push(("reason", c.abort_reason.as_str().into()));
    }
    if let Some(why) = stale_reason {
        // Planned from the last good tree: the fetch error, token-free.
        fields.push(("desired_stale", true.into()));
        fields.push(("stale_reason", why.into()));
    }
    let level = if c.aborted { Level::Warn } else { Level::Info };
    log::event(level, "proxops.cycle", &fields);
}

/// One line per notification attempt; the target by name only.
fn log_delivery(target: &str, event: &Event, delivery: &Delivery) {
    let mut fields = vec![
        ("target", log::Value::from(target)),
        ("event", event.kind.as_str().into()),
        ("cluster", event.cluster.as_str().into()),
    ];
    let (level, message) = match delivery {
        Delivery::Sent => (Level::Info, "notification sent"),
        Delivery::Failed { error, gave_up } => {
            fields.push(("error", error.as_str().into()));
            if *gave_up {
                (Level::Warn, "notification failed; given up")
            } else {
                (Level::Warn, "notification failed; trying again later")
            }
        }
        Delivery::Dropped => (
            Level::Warn,
            "notification dropped: the target's queue is full",
        ),
    };
    log::event(level, message, &fields);
}
