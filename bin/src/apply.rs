//! `proxops apply`: one converge cycle per selected cluster (sorted,
//! isolated), shown before it is done. Every cluster is read and planned
//! first; the plan is printed (what `diff` prints, field changes
//! included; `--diff` is accepted and changes nothing); on a terminal the
//! user confirms it by typing `yes` (`-y/--yes` skips the question; with
//! no terminal and no `--yes` apply refuses before reading anything);
//! then the plans are executed with a progress line per action on stderr,
//! and the results printed.
//! `-n/--dry-run` plans only.
//!
//! `--plan FILE` executes a saved plan instead of planning
//! ([`crate::saved`]), shown and confirmed the same way.
//!
//! Exit 1 when any action failed or any cluster aborted (strict one-shot
//! semantics for runbooks and CI, spec §16.4).

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal};
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use proxops_core::action::Action;
use proxops_core::cycle::CycleRecord;
use proxops_core::exec::Outcome;
use proxops_core::names::ClusterName;
use proxops_core::plan::Plan;
use proxops_core::render;
use proxops_driver::drive::{self, ApplyOptions, PlannedCluster};
use proxops_pve::runner::Progress;

use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env};
use crate::exit::{Exit, Failure};
use crate::log::{self, Level};
use crate::out;
use crate::prepare::{self, Source};

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let output = a.output.unwrap_or(Output::Text);
    if output == Output::Markdown {
        return Err(Failure::input("apply --output: use text or json"));
    }
    if let Some(file) = &a.plan {
        if !a.targets.is_empty() {
            return Err(Failure::input(
                "apply --plan runs a saved plan whole: --target does not apply",
            ));
        }
        let ask = !a.dry_run && needs_confirmation(a)?;
        return crate::saved::apply(g, a, env, file, ask);
    }
    if a.dry_run {
        // Same pipeline and output as `diff`, executor gated off.
        return crate::diff::run(g, a, env);
    }
    if a.replay.is_some() {
        return Err(Failure::input(
            "apply --replay needs --dry-run: a recording cannot be written to",
        ));
    }
    let source = Source::Live;
    let ask = needs_confirmation(a)?;
    let ws = context::load_workspace(g, env)?;
    let targets = crate::diff::targets(g, a, &ws)?;
    let mut session = prepare::prepare_writing(g, env, &ws, &source)?;
    session.narrow(targets.as_ref());
    // Each cluster's lock is taken before its read and held until its
    // read-back, across the question: what was shown is what runs.
    let locking = prepare::locking(&ws.loaded.config, "proxops apply");
    let planned: Vec<PlannedCluster> = session
        .clusters
        .iter()
        .map(|p| drive::plan_cluster(p, Some(&locking)))
        .collect();
    let plans: Vec<Plan> = planned.iter().map(|p| p.plan.clone()).collect();
    show_and_confirm(g, &plans, output, ask, a.verbose)?;

    let cycles = execute_shown(&plans, |opts| {
        session
            .clusters
            .iter()
            .zip(planned)
            .map(|(p, planned)| drive::execute_cluster(p, planned, opts))
            .collect()
    });
    print_results(&cycles, &plans, output)?;

    let mut exit = Exit::Ok;
    if !session.invalid.is_empty() {
        let refs: Vec<&proxops_core::diag::Diagnostic> = session.invalid.iter().collect();
        out::errors(&context::render_diagnostics(&refs));
        exit = exit.worst(Exit::Input);
    }
    Ok(exit.worst(cycles_exit(&cycles)))
}

/// Whether to ask before executing: not with `--yes`; and with no terminal
/// to ask on, a refusal before anything is read (nobody could answer).
fn needs_confirmation(a: &CommandArgs) -> Result<bool, Failure> {
    let ask = !a.yes;
    if ask && !std::io::stdin().is_terminal() {
        return Err(Failure::input(
            "apply needs confirmation and standard input is not a terminal: \
             pass --yes (-y) to apply without asking (or --dry-run to only plan); \
             nothing was read or written",
        ));
    }
    Ok(ask)
}

/// Prints the plans about to be executed (what `diff` prints), then asks
/// when `ask` and there is anything to do.
pub(crate) fn show_and_confirm(
    g: &GlobalArgs,
    plans: &[Plan],
    output: Output,
    ask: bool,
    verbose: bool,
) -> Result<(), Failure> {
    let shown =
        |terminal: bool| render::text_with(plans, crate::diff::palette(g, terminal), verbose);
    match output {
        Output::Json if ask => out::eprint_rendered(&shown(std::io::stderr().is_terminal())),
        Output::Json => {}
        _ => {
            let shown = shown(std::io::stdout().is_terminal());
            // A plan nobody could see is not applied.
            out::print_rendered_line(&shown).map_err(|f| {
                if f.stdout_closed {
                    Failure::runtime(
                        "standard output was closed before the plan was shown; nothing was written",
                    )
                } else {
                    f
                }
            })?;
        }
    }
    let total: usize = plans.iter().map(|p| p.actions.len()).sum();
    if ask && total > 0 {
        confirm(plans, total)?;
    }
    Ok(())
}

/// Executes the plans just shown (`run` does, with the options given):
/// progress lines on stderr, SIGINT/SIGTERM let the action in flight
/// finish and start nothing new. The clusters' locks are already held.
pub(crate) fn execute_shown(
    plans: &[Plan],
    run: impl FnOnce(&ApplyOptions<'_>) -> Vec<CycleRecord>,
) -> Vec<CycleRecord> {
    let stop_flag = stop_on_signals();
    let lines = ProgressLines::new(plans);
    let on_progress = |cluster: &ClusterName, event: &Progress<'_>| lines.tell(cluster, event);
    let opts = ApplyOptions {
        stop: Some(&stop_flag),
        on_progress: Some(&on_progress),
        ..ApplyOptions::default()
    };
    run(&opts)
}

/// SIGINT/SIGTERM: the action in flight finishes, nothing new starts.
pub(crate) fn stop_on_signals() -> std::sync::Arc<AtomicBool> {
    let stop_flag = std::sync::Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register(signal, stop_flag.clone());
    }
    stop_flag
}

/// Exit 1 when any cluster aborted or any action failed.
pub(crate) fn cycles_exit(cycles: &[CycleRecord]) -> Exit {
    if cycles
        .iter()
        .any(|c| c.plan.is_aborted() || c.failed_actions() > 0)
    {
        Exit::Runtime
    } else {
        Exit::Ok
    }
}

/// What each action did: the results text, or with `--output json` one
/// document holding the plan and the results.
pub(crate) fn print_results(
    cycles: &[CycleRecord],
    plans: &[Plan],
    output: Output,
) -> Result<(), Failure> {
    match output {
        Output::Json => out::report(&render::results_json(cycles, plans)),
        _ => out::report(&render::results_text(cycles)),
    }
}

/// Asks on the terminal, as `terraform apply` does: only `yes` goes on.
pub(crate) fn confirm(plans: &[Plan], total: usize) -> Result<(), Failure> {
    let clusters: Vec<&str> = plans
        .iter()
        .filter(|p| !p.actions.is_empty())
        .map(|p| p.cluster.as_str())
        .collect();
    out::eprint(&format!(
        "\nApply {total} action(s) to {}? Only 'yes' goes on: ",
        clusters.join(", ")
    ));
    let mut answer = String::new();
    // End of input or an unreadable terminal is a "no".
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if answer.trim() == "yes" {
        Ok(())
    } else {
        Err(Failure::runtime(
            "apply cancelled: nothing was written to PVE",
        ))
    }
}

/// A "still running" line every this many seconds of one PVE task.
const STILL_RUNNING_EVERY: u64 = 10;

/// The "still running" mark (in whole seconds) due after `elapsed` when
/// `reported` was the last one shown for this task: every 10 s, each once.
fn still_running_due(elapsed: Duration, reported: u64) -> Option<u64> {
    let mark = elapsed.as_secs() / STILL_RUNNING_EVERY * STILL_RUNNING_EVERY;
    (mark > reported).then_some(mark)
}

/// Progress lines on stderr, one when an action starts, one when it ends,
/// and one every 10 s while one of its PVE tasks runs. Plain lines (no
/// colour, no cursor movement) so a terminal and a log file read the same;
/// with `--log-format json` they are JSON log events instead.
pub(crate) struct ProgressLines {
    /// Actions per cluster, for `[i/n]`.
    totals: BTreeMap<ClusterName, usize>,
    /// Per worker: the task last told about and the last "still running"
    /// mark shown (several tasks run at once, one per worker).
    waiting: Mutex<BTreeMap<usize, (String, u64)>>,
}

impl ProgressLines {
    pub(crate) fn new(plans: &[Plan]) -> ProgressLines {
        ProgressLines {
            totals: plans
                .iter()
                .map(|p| (p.cluster.clone(), p.actions.len()))
                .collect(),
            waiting: Mutex::new(BTreeMap::new()),
        }
    }

    pub(crate) fn tell(&self, cluster: &ClusterName, event: &Progress<'_>) {
        if !log::enabled(Level::Info) {
            return;
        }
        let (Progress::Started {
            index,
            action,
            worker,
            ..
        }
        | Progress::Phase {
            index,
            action,
            worker,
            ..
        }
        | Progress::TaskRunning {
            index,
            action,
            worker,
            ..
        }
        | Progress::Finished {
            index,
            action,
            worker,
            ..
        }) = *event;
        let id = action.target.to_string();
        let mut fields = vec![
            ("worker", log::Value::from(worker)),
            ("cluster", log::Value::from(cluster.as_str())),
            ("kind", action.kind.as_str().into()),
            ("name", action.name.as_str().into()),
            ("id", id.as_str().into()),
            ("node", action.node.as_str().into()),
            ("what", action.op.as_str().into()),
        ];
        let total = self.totals.get(cluster).copied().unwrap_or(0);
        // The guest first, as a person scans for it: `home [2/5] VM/web-01:`.
        let label = format!(
            "{cluster} [{}/{total}] {}/{}:",
            index + 1,
            action.kind,
            action.name,
        );
        let text = match *event {
            Progress::Started { running, .. } => {
                fields.push(("running", running.into()));
                (
                    "proxops.action.started",
                    format!(
                        "{label} {} on {} (id {id}, worker {worker}, {running} running)",
                        action.op.as_str(),
                        action.node.as_str()
                    ),
                )
            }
            Progress::Phase { doing, .. } => {
                fields.push(("doing", doing.into()));
                ("proxops.action.phase", format!("{label} {doing}\u{2026}"))
            }
            Progress::TaskRunning {
                upid,
                doing,
                elapsed,
                worker,
                ..
            } => {
                let Some(mark) = self.still_running(worker, upid, elapsed) else {
                    return;
                };
                fields.extend([
                    ("elapsed", log::Value::Millis(mark.saturating_mul(1000))),
                    ("doing", doing.into()),
                    ("upid", upid.into()),
                ]);
                (
                    "proxops.action.running",
                    format!("{label} {doing}\u{2026} {mark}s"),
                )
            }
            Progress::Finished {
                outcome,
                elapsed,
                upids,
                ..
            } => {
                self.finished(&label, action, outcome, elapsed, upids, &fields);
                return;
            }
        };
        let (message, line) = text;
        if log::json() {
            log::event(Level::Info, message, &fields);
        } else {
            out::eprint(&format!("{line}\n"));
        }
    }

    /// The "still running" mark due for `worker`'s task `upid`, if one is.
    fn still_running(&self, worker: usize, upid: &str, elapsed: Duration) -> Option<u64> {
        let mut all = self.waiting.lock().ok()?;
        let waiting = all.entry(worker).or_default();
        if waiting.0 != upid {
            *waiting = (upid.to_owned(), 0);
        }
        let mark = still_running_due(elapsed, waiting.1)?;
        waiting.1 = mark;
        Some(mark)
    }

    /// The action's final line: `ok in 3.1s` or `FAILED in 0.3s: why`;
    /// the UPIDs go to the JSON event only.
    fn finished(
        &self,
        label: &str,
        action: &Action,
        outcome: &Outcome,
        elapsed: Duration,
        upids: &[String],
        fields: &[(&str, log::Value<'_>)],
    ) {
        let (level, err) = match outcome {
            Outcome::Succeeded => (Level::Info, String::new()),
            Outcome::Failed { error, .. } => (Level::Warn, render::one_line(error)),
            Outcome::ChangedUnderUs => (
                Level::Warn,
                "changed on PVE between read and write".to_owned(),
            ),
        };
        if log::json() {
            let tasks = upids.join(",");
            let mut all = fields.to_vec();
            all.extend([
                ("ok", err.is_empty().into()),
                ("err", err.as_str().into()),
                ("duration", log::millis(elapsed)),
                ("upid", tasks.as_str().into()),
                ("reason", action.reason.as_str().into()),
            ]);
            log::event(level, "proxops.action", &all);
            return;
        }
        let took = format!("{:.1}s", elapsed.as_secs_f64());
        let line = if err.is_empty() {
            format!("{label} {} ok in {took}\n", action.op.as_str())
        } else {
            format!("{label} {} FAILED in {took}: {err}\n", action.op.as_str())
        };
        out::eprint(&line);
    }
}

/// One `proxops.action` log event per performed action (spec §14.3),
/// naming the worker that ran it.
pub(crate) fn log_action(action: &Action, outcome: &Outcome, worker: usize) {
    let (level, ok, err) = match outcome {
        Outcome::Succeeded => (Level::Info, true, String::new()),
        Outcome::Failed { error, .. } => (Level::Warn, false, render::one_line(error)),
        Outcome::ChangedUnderUs => (
            Level::Warn,
            false,
            "changed on PVE between read and write".to_owned(),
        ),
    };
    let id = action.target.to_string();
    log::event(
        level,
        "proxops.action",
        &[
            ("worker", worker.into()),
            ("kind", action.kind.as_str().into()),
            ("name", (&action.name).into()),
            ("id", (&id).into()),
            ("node", action.node.as_str().into()),
            ("what", action.op.as_str().into()),
            ("ok", ok.into()),
            ("err", (&err).into()),
            ("reason", (&action.reason).into()),
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn still_running_is_due_every_10_seconds_of_a_task_each_once() {
        let due =
            |secs: f64, reported: u64| still_running_due(Duration::from_secs_f64(secs), reported);
        assert_eq!(due(0.5, 0), None);
        assert_eq!(due(9.9, 0), None);
        assert_eq!(due(10.0, 0), Some(10));
        assert_eq!(due(10.4, 10), None);
        assert_eq!(due(19.9, 10), None);
        assert_eq!(due(20.1, 10), Some(20));
        // A poll that came late shows the mark it reached, once.
        assert_eq!(due(41.0, 20), Some(40));
    }
}
