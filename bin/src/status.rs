//! `proxops status`: a read-only cycle over every selected cluster, then a
//! per-cluster convergence table (text) or the `/status` document (JSON).
//! Writes nothing to PVE.
//!
//! Holds no rules of its own: each object's state comes from core's
//! `state::object_states` (through `ClusterReport::from_cycle`), and the
//! JSON is core's `render_status_json`, the very renderer the daemon serves,
//! over a status store holding this one cycle. A read-only cycle is an
//! observing one: `mode` is `observe` and each cluster's `result` is
//! `dry_run`, as under `run --dry-run`.

use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use proxops_core::plan::Plan;
use proxops_core::render;
use proxops_core::report::{ClusterReport, CycleReport, RunMode, StatusStore, render_status_json};
use proxops_core::state;
use proxops_pve::runner::unix_now;

use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env};
use crate::exit::{Exit, Failure};
use crate::out;
use crate::prepare::{self, Source};

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let process_start = unix_now();
    let output = a.output.unwrap_or(Output::Text);
    if output == Output::Markdown {
        return Err(Failure::input("status --output: use text or json"));
    }
    if !a.watch {
        return once(g, a, env, process_start, output).map(|(exit, _)| exit);
    }
    watch(g, a, env, process_start, output)
}

/// `status --watch`: the table again every poll interval, until SIGINT or
/// SIGTERM (exit 0). On a terminal each table replaces the last; piped,
/// they follow one another. A cycle that fails is said and retried.
fn watch(
    g: &GlobalArgs,
    a: &CommandArgs,
    env: &Env,
    process_start: u64,
    output: Output,
) -> Result<Exit, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Failure::runtime(format!("cannot handle signals: {e}")))?;
    }
    let in_place = std::io::stdout().is_terminal();
    while !stop.load(Ordering::SeqCst) {
        // A reader gone (`| head`) ends the watch.
        let closed = |f: &Failure| f.stdout_closed;
        if in_place && let Err(f) = out::print_rendered("\x1b[H\x1b[2J") {
            return if closed(&f) { Ok(Exit::Ok) } else { Err(f) };
        }
        let poll = match once(g, a, env, process_start, output) {
            Ok((_, poll)) => poll,
            Err(f) if f.exit == Exit::Input => return Err(f),
            Err(f) => {
                crate::log::event(crate::log::Level::Error, &f.message, &[]);
                Duration::from_secs(30)
            }
        };
        let until = Instant::now() + poll;
        while !stop.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
        if !in_place
            && !stop.load(Ordering::SeqCst)
            && let Err(f) = out::print_rendered("\n")
        {
            return if closed(&f) { Ok(Exit::Ok) } else { Err(f) };
        }
    }
    Ok(Exit::Ok)
}

/// One read-only cycle and its table; with the poll interval the
/// configuration names, for `--watch`.
fn once(
    g: &GlobalArgs,
    a: &CommandArgs,
    env: &Env,
    process_start: u64,
    output: Output,
) -> Result<(Exit, Duration), Failure> {
    let ws = context::load_workspace(g, env)?;
    let poll = ws.loaded.config.poll_interval.as_std();
    let source = match &a.replay {
        Some(dir) => Source::Replay(dir.clone()),
        None => Source::Live,
    };
    let started_at = unix_now();
    let clock = std::time::Instant::now();
    let outcome = prepare::plan_all(g, env, &ws, &source, None)?;
    let finished_at = unix_now();

    let clusters = outcome
        .plans
        .iter()
        .map(|cp| {
            let desired = ws
                .loaded
                .clusters
                .get(&cp.plan.cluster)
                .and_then(|r| r.as_ref().ok());
            let objects = state::object_states(&cp.plan, None, None, desired, finished_at);
            ClusterReport::from_cycle(&cp.plan, None, objects, desired, true, finished_at)
        })
        .collect();
    let mut store = StatusStore::new(process_start);
    store.set_mode(RunMode::Observe);
    store.record_cycle(CycleReport {
        commit: ws.commit.clone().unwrap_or_default(),
        started_at,
        finished_at,
        duration_ms: crate::run::elapsed_ms(clock),
        complete: true,
        git_fetched_at: Some(started_at),
        clusters,
    });
    let plans: Vec<&Plan> = outcome.plans.iter().map(|p| &p.plan).collect();
    match output {
        Output::Json => out::report(&render_status_json(&store, finished_at))?,
        _ => out::report(&render::status_table(&store, &plans))?,
    }
    Ok((prepare::planned_exit(&outcome), poll))
}
