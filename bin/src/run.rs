//! `proxops run`: the daemon (spec §16.1, §17, §22.6). Serves `/healthz`,
//! `/metrics` and `/status` on `listen` and, every `poll-interval`, re-reads
//! the local tree (or fetches the remote branch in URL mode, through one
//! [`DesiredSource`] kept for the process) and runs one converge cycle per
//! selected cluster.
//!
//! Owns the loop, the status store it feeds and shutdown: SIGINT/SIGTERM
//! start no new action, let the action in flight finish (the runner bounds
//! it by `task-timeout`), stop the server and exit 0.
//!
//! Must never: stop looping because one cycle or one cluster failed (an
//! invalid tree is an aborted `parse_error` cycle, a failing cluster is
//! that cluster's result), exit non-zero after start-up, or log a request
//! body, a header or a credential.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proxops_core::config::{self, Config, ConfigSource, ConfigSources};
use proxops_core::report::{ClusterReport, CycleReport, StatusStore};
use proxops_http::{StatusServer, store_source};
use proxops_pve::live::LiveTransport;
use proxops_pve::runner::unix_now;

use crate::apply::{log_action, poll_interval};
use crate::args::GlobalArgs;
use crate::context::{self, Env, Workspace};
use crate::cycle::{self, ApplyOptions, Source, Transports};
use crate::exit::{Exit, Failure};
use crate::gitsource::DesiredSource;
use crate::log::{self, Level};

/// How often the pause between two cycles looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

pub fn run(g: &GlobalArgs, env: &Env) -> Result<Exit, Failure> {
    let process_start = unix_now();
    // Start-up: the configuration must load (it names `listen` and the
    // poll interval); later load failures are aborted cycles. In URL mode a
    // first fetch that fails is not a start-up failure: the daemon serves
    // and counts `not_ready` cycles until the remote answers (§22.6).
    let mut desired = DesiredSource::open(g, env)?;
    let (listen, poll, mut known_clusters, first) = match desired.next_cycle(g, env) {
        Ok(ws) => {
            // Credentials and TLS trust must be usable at start-up (exit 2
            // if not).
            cycle::prepare(g, env, &ws, &Source::Live)?;
            (
                ws.loaded.config.listen.clone(),
                ws.loaded.config.poll_interval.as_std(),
                cluster_names(g, &ws),
                Ok(ws),
            )
        }
        Err(f) if desired.is_url() && f.message.starts_with("git sync failed") => {
            let Some(cfg) = process_config(g, env) else {
                return Err(f);
            };
            let names = cfg
                .clusters
                .keys()
                .map(|k| k.as_str().to_owned())
                .filter(|n| context::selected(g, n))
                .collect();
            (cfg.listen, cfg.poll_interval.as_std(), names, Err(f))
        }
        Err(f) => return Err(f),
    };

    let store = Arc::new(Mutex::new(StatusStore::new(process_start)));
    let server = StatusServer::start(&listen, store_source(Arc::clone(&store), poll.as_secs()))
        .map_err(|e| Failure::runtime(e.to_string()))?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while the first is being honoured ends the
        // process at once (exit 1); the first only sets the flag.
        signal_hook::flag::register_conditional_shutdown(signal, 1, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)))
            .map_err(|e| Failure::runtime(format!("cannot handle signals: {e}")))?;
    }
    let addr = server.local_addr().to_string();
    let poll_text = format!("{}s", poll.as_secs_f64());
    log::event(
        Level::Info,
        "proxops.run started",
        &[("listen", &addr), ("poll_interval", &poll_text)],
    );

    let mut transports = Transports::default();
    let mut counted = Counted::default();
    let mut first = Some(first);
    while !stop.load(Ordering::SeqCst) {
        let tick = Instant::now();
        let loaded = match first.take() {
            Some(loaded) => loaded,
            None => desired.next_cycle(g, env),
        };
        let report = match loaded {
            Ok(ws) => {
                known_clusters = cluster_names(g, &ws);
                one_cycle(g, env, &ws, &stop, &store, &mut transports, &mut counted)
            }
            Err(f) => unloadable(&known_clusters, &f, &stop),
        };
        match store.lock() {
            Ok(mut s) => s.record_cycle(report),
            Err(_) => log::event(
                Level::Error,
                "status store unavailable; cycle not recorded",
                &[],
            ),
        }
        pause(&stop, poll.saturating_sub(tick.elapsed()));
    }
    log::event(Level::Info, "proxops.run stopping", &[("listen", &addr)]);
    server.shutdown();
    Ok(Exit::Ok)
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

/// One converge cycle over a freshly loaded workspace.
fn one_cycle(
    g: &GlobalArgs,
    env: &Env,
    ws: &Workspace,
    stop: &AtomicBool,
    store: &Mutex<StatusStore>,
    transports: &mut Transports,
    counted: &mut Counted,
) -> CycleReport {
    let started_at = unix_now();
    let session = match cycle::prepare_reusing(g, env, ws, &Source::Live, transports) {
        Ok(s) => s,
        Err(f) => {
            let reason = format!(
                "credentials or TLS settings unusable: {}",
                one_line(&f.message)
            );
            let finished_at = unix_now();
            let clusters: Vec<ClusterReport> = cluster_names(g, ws)
                .into_iter()
                .map(|n| ClusterReport::aborted(n, reason.clone()))
                .collect();
            for c in &clusters {
                log_cluster(c, Duration::ZERO, None);
            }
            return CycleReport {
                commit: ws.commit.clone().unwrap_or_default(),
                started_at,
                finished_at,
                complete: !stop.load(Ordering::SeqCst),
                git_fetched_at: (!ws.desired_stale).then_some(started_at),
                clusters,
            };
        }
    };
    let opts = ApplyOptions {
        task_timeout: ws.loaded.config.task_timeout.as_std(),
        poll_interval: poll_interval(),
        stop: Some(stop),
        on_result: Some(&log_action),
        on_progress: None,
    };
    // Invalid manifests: the clusters abort (parse_error); say why.
    for d in &session.invalid {
        let text = one_line(&d.to_string());
        log::event(
            Level::Error,
            "proxops.invalid_input",
            &[("diagnostic", text.as_str())],
        );
    }
    let cycles = cycle::apply_all(&session, &opts);
    let mut clusters = Vec::new();
    let mut requests = Vec::new();
    for c in cycles {
        let desired = ws
            .loaded
            .clusters
            .get(&c.name)
            .and_then(|r| r.as_ref().ok());
        let mut report = ClusterReport::from_cycle(
            &c.plan,
            c.execution.as_ref(),
            c.objects,
            desired,
            false,
            c.finished_at,
        );
        report.desired_stale = ws.desired_stale;
        log_cluster(&report, c.elapsed, ws.stale_reason.as_deref());
        let live = session
            .clusters
            .iter()
            .find(|p| p.name == c.name)
            .and_then(|p| p.ready.as_ref().ok())
            .and_then(|r| r.live.as_ref());
        if let Some(live) = live {
            report.read_only = live.is_read_only();
            requests.extend(counted.delta(report.name.as_str(), live));
        }
        clusters.push(report);
    }
    if let Ok(mut s) = store.lock() {
        s.add_pve_requests(&requests);
    }
    CycleReport {
        commit: ws.commit.clone().unwrap_or_default(),
        started_at,
        finished_at: unix_now(),
        complete: !stop.load(Ordering::SeqCst),
        git_fetched_at: (!ws.desired_stale).then_some(started_at),
        clusters,
    }
}

/// A cycle whose repository could not be loaded: every cluster known from
/// the last good load aborts (invalid input is `parse_error`, a git sync
/// without any good tree `not_ready`); nothing is read from or written to
/// PVE.
fn unloadable(known: &[String], f: &Failure, stop: &AtomicBool) -> CycleReport {
    let now = unix_now();
    let message = one_line(&f.message);
    let reason = if message.starts_with("git sync failed") {
        // `not_ready`: URL mode without any good tree.
        message
    } else if f.exit == Exit::Input {
        format!("invalid input: {message}")
    } else {
        format!("repository unreadable: {message}")
    };
    log::event(
        Level::Error,
        "proxops.load failed; nothing read or written this cycle",
        &[("reason", &reason)],
    );
    let names: Vec<String> = if known.is_empty() {
        vec!["default".to_owned()]
    } else {
        known.to_vec()
    };
    let clusters: Vec<ClusterReport> = names
        .into_iter()
        .map(|n| ClusterReport::aborted(n, reason.clone()))
        .collect();
    for c in &clusters {
        log_cluster(c, Duration::ZERO, None);
    }
    CycleReport {
        commit: String::new(),
        started_at: now,
        finished_at: now,
        complete: !stop.load(Ordering::SeqCst),
        git_fetched_at: None,
        clusters,
    }
}

/// One info line per cluster per cycle (warn when it aborted).
fn log_cluster(c: &ClusterReport, elapsed: Duration, stale_reason: Option<&str>) {
    let ok = c.counts.actions_ok.to_string();
    let err = c.counts.actions_error.to_string();
    let duration = format!("{}ms", elapsed.as_millis());
    let mut fields = vec![
        ("cluster", c.name.as_str()),
        ("result", c.result.as_str()),
        ("actions_ok", ok.as_str()),
        ("actions_error", err.as_str()),
        ("duration", duration.as_str()),
    ];
    if c.aborted {
        fields.push(("reason", c.abort_reason.as_str()));
    }
    if let Some(why) = stale_reason {
        // Planned from the last good tree: the fetch error, token-free.
        fields.push(("desired_stale", "true"));
        fields.push(("stale_reason", why));
    }
    let level = if c.aborted { Level::Warn } else { Level::Info };
    log::event(level, "proxops.cycle", &fields);
}

/// The request counts each cluster's transport had at the end of the last
/// cycle: transports live across cycles (their counts are running totals)
/// until a configuration change replaces them (counts start again).
#[derive(Default)]
struct Counted {
    last: BTreeMap<String, (Arc<LiveTransport>, RequestTotals)>,
}

/// Requests by `(method, result)`.
type RequestTotals = BTreeMap<(String, String), u64>;

impl Counted {
    /// `(method, result, count)` added since the last call for `cluster`.
    fn delta(&mut self, cluster: &str, live: &Arc<LiveTransport>) -> Vec<(String, String, u64)> {
        let now: RequestTotals = live
            .request_counts()
            .into_iter()
            .map(|rc| {
                (
                    (rc.method.as_str().to_owned(), rc.result.as_str().to_owned()),
                    rc.count,
                )
            })
            .collect();
        let before = match self.last.get(cluster) {
            Some((t, counts)) if Arc::ptr_eq(t, live) => counts.clone(),
            _ => BTreeMap::new(),
        };
        let out = now
            .iter()
            .filter_map(|(k, n)| {
                let d = n.saturating_sub(before.get(k).copied().unwrap_or(0));
                (d > 0).then(|| (k.0.clone(), k.1.clone(), d))
            })
            .collect();
        self.last
            .insert(cluster.to_owned(), (Arc::clone(live), now));
        out
    }
}

/// Waits `d`, returning early once `stop` is set.
fn pause(stop: &AtomicBool, d: Duration) {
    let until = Instant::now() + d;
    while !stop.load(Ordering::SeqCst) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(STOP_CHECK));
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
