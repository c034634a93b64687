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

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use proxops_core::plan::Plan;
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
        let closed = |f: &Failure| f.message.is_empty();
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
        _ => out::report(&table(&store, &plans))?,
    }
    Ok((prepare::planned_exit(&outcome), poll))
}

/// One block per cluster: its objects' states, then a count by state and
/// the anomalies about the cluster as a whole.
fn table(store: &StatusStore, plans: &[&Plan]) -> String {
    let mut out = String::new();
    let clusters = store
        .last_cycle()
        .map(|c| c.clusters.as_slice())
        .unwrap_or_default();
    for (i, c) in clusters.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "=== {} ===", c.name);
        if c.aborted {
            let _ = writeln!(out, "aborted: {}", c.abort_reason);
            continue;
        }
        let mine: Vec<_> = store.objects().filter(|o| o.cluster == c.name).collect();
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        let mut rows: Vec<[String; COLUMNS]> = vec![HEADER.map(str::to_owned)];
        for o in &mine {
            let r = &o.report;
            // What stands between the object and convergence: its error,
            // else the reason of its first pending action.
            let detail = r
                .last_error
                .as_deref()
                .or_else(|| o.pending.first().map(|p| p.reason.as_str()))
                .unwrap_or("");
            rows.push([
                r.state.as_str().to_owned(),
                r.kind.clone(),
                r.name.clone(),
                r.node.clone(),
                r.id.clone(),
                detail.split_whitespace().collect::<Vec<_>>().join(" "),
            ]);
            *counts.entry(r.state.as_str()).or_default() += 1;
        }
        aligned(&mut out, &rows);
        let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let _ = writeln!(
            out,
            "{}: {} objects: {}",
            c.name,
            mine.len(),
            summary.join(", ")
        );
        for me in &c.self_guests {
            let _ = writeln!(
                out,
                "self: {} (vmid {} on node {}, matched by {}): ProxOps runs in this guest and never stops, restarts or prunes it",
                me.name, me.vmid, me.node, me.matched
            );
        }
        let whole = plans
            .iter()
            .filter(|p| p.cluster.as_str() == c.name)
            .flat_map(|p| &p.anomalies)
            .filter(|a| a.object().is_none());
        for a in whole {
            let _ = writeln!(out, "anomaly: {}", a.message);
        }
    }
    out
}

const COLUMNS: usize = 6;
const HEADER: [&str; COLUMNS] = ["STATE", "KIND", "NAME", "NODE", "ID", "DETAIL"];

/// The rows as columns as wide as their longest cell and two spaces
/// apart, so a long name never runs into the next column; the last column
/// is not padded.
fn aligned(out: &mut String, rows: &[[String; COLUMNS]]) {
    let mut widths = [0usize; COLUMNS];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in rows {
        let mut line = String::from("  ");
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < COLUMNS {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            } else {
                line.push_str(cell);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_longest_cell() {
        let long = "a-very-long-guest-name-that-overflows-any-fixed-column";
        let rows = [
            HEADER.map(str::to_owned),
            ["converged", "VM", long, "pve1", "101", ""].map(str::to_owned),
            [
                "drifted",
                "LXC",
                "dns",
                "pve-node-02",
                "20001",
                "config drift",
            ]
            .map(str::to_owned),
        ];
        let mut out = String::new();
        aligned(&mut out, &rows);
        let lines: Vec<&str> = out.lines().collect();
        // Every column starts at the same place on every line.
        let node_at = lines[0].find("NODE").unwrap();
        assert_eq!(lines[1].find("pve1"), Some(node_at));
        assert_eq!(lines[2].find("pve-node-02"), Some(node_at));
        assert_eq!(&lines[1][node_at - 2..node_at], "  ", "{out}");
        let detail_at = lines[0].find("DETAIL").unwrap();
        assert_eq!(lines[2].find("config drift"), Some(detail_at));
        // No trailing blanks when the last cell is empty.
        assert!(lines.iter().all(|l| !l.ends_with(' ')), "{out:?}");
    }
}
