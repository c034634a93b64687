//! `proxops apply`: one converge cycle per selected cluster (sorted,
//! isolated), then per-cluster results. `-n/--dry-run` plans only and
//! prints what `diff` prints; `--diff` adds each action's field changes.
//!
//! `--plan FILE` executes a saved plan instead of planning
//! ([`crate::saved`]).
//!
//! Exit 1 when any action failed or any cluster aborted (strict one-shot
//! semantics for runbooks and CI, spec §16.4).

use std::fmt::Write as _;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use proxops_core::action::Action;
use proxops_core::exec::{ActionState, Outcome};
use proxops_core::plan::Plan;
use proxops_core::render;
use proxops_pve::runner::RunOptions;
use serde_json::{Value, json};

use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env};
use crate::cycle::{self, ApplyOptions, ClusterCycle, Source};
use crate::exit::{Exit, Failure};
use crate::lock::Locking;
use crate::log::{self, Level};

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    if let Some(file) = &a.plan {
        return crate::saved::apply(g, a, env, file);
    }
    if a.dry_run && !a.diff {
        // Same pipeline and output as `diff`, executor gated off.
        return crate::diff::run(g, a, env);
    }
    let output = a.output.unwrap_or(Output::Text);
    if output == Output::Markdown {
        return Err(Failure::input("apply --output: use text or json"));
    }
    let ws = context::load_workspace(g, env)?;
    let source = match (&a.replay, a.dry_run) {
        (Some(dir), true) => Source::Replay(dir.clone()),
        (Some(_), false) => {
            return Err(Failure::input(
                "apply --replay needs --dry-run: a recording cannot be written to",
            ));
        }
        (None, _) => Source::Live,
    };
    if a.dry_run {
        // `--diff`: the plan with each action's field changes.
        let outcome = cycle::plan_all(g, env, &ws, &source)?;
        let plans: Vec<Plan> = outcome.plans.into_iter().map(|p| p.plan).collect();
        match output {
            Output::Json => print!("{}", render::json(&plans)),
            _ => print!("{}", render::text_with_changes(&plans)),
        }
        return Ok(if plans.iter().any(|p| p.aborted) {
            Exit::Runtime
        } else {
            Exit::Ok
        });
    }
    let session = cycle::prepare(g, env, &ws, &source)?;
    let stop_flag = stop_on_signals();
    let locking = Locking::new(&ws.loaded.config, "proxops apply");
    let opts = ApplyOptions {
        task_timeout: ws.loaded.config.task_timeout.as_std(),
        poll_interval: poll_interval(),
        stop: Some(&stop_flag),
        on_result: Some(&log_action),
        lock: Some(&locking),
    };
    let cycles = cycle::apply_all(&session, &opts);
    print_results(&cycles, output, a.diff);

    let mut exit = Exit::Ok;
    if !session.invalid.is_empty() {
        let refs: Vec<&proxops_core::diag::Diagnostic> = session.invalid.iter().collect();
        for line in context::render_diagnostics(&refs).lines() {
            eprintln!("error: {line}");
        }
        exit = exit.worst(Exit::Input);
    }
    Ok(exit.worst(cycles_exit(&cycles)))
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
pub(crate) fn cycles_exit(cycles: &[ClusterCycle]) -> Exit {
    if cycles
        .iter()
        .any(|c| c.plan.aborted || c.failed_actions() > 0)
    {
        Exit::Runtime
    } else {
        Exit::Ok
    }
}

/// Prints the plans the cycles executed and what each action did.
pub(crate) fn print_results(cycles: &[ClusterCycle], output: Output, diff: bool) {
    let plans: Vec<Plan> = cycles.iter().map(|c| c.plan.clone()).collect();
    match output {
        Output::Json => {
            let plan_doc: Value =
                serde_json::from_str(&render::json(&plans)).unwrap_or(Value::Null);
            let doc = json!({
                "plan": plan_doc,
                "results": cycles.iter().map(cluster_json).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        _ => {
            let text = if diff {
                render::text_with_changes(&plans)
            } else {
                render::text(&plans)
            };
            print!("{text}");
            if !text.ends_with('\n') {
                println!();
            }
            print!("{}", results_text(cycles));
        }
    }
}

/// One `proxops.action` log event per performed action (spec §14.3).
pub(crate) fn log_action(action: &Action, outcome: &Outcome) {
    let (level, ok, err) = match outcome {
        Outcome::Succeeded => (Level::Info, "true", String::new()),
        Outcome::Failed { error, .. } => (Level::Warn, "false", one_line(error)),
        Outcome::ChangedUnderUs => (
            Level::Warn,
            "false",
            "changed on PVE between read and write".to_owned(),
        ),
    };
    let id = action.target.to_string();
    log::event(
        level,
        "proxops.action",
        &[
            ("kind", action.kind.as_str()),
            ("name", &action.name),
            ("id", &id),
            ("node", action.node.as_str()),
            ("what", action.op.as_str()),
            ("ok", ok),
            ("err", &err),
            ("reason", &action.reason),
        ],
    );
}

/// The pause between two task status reads: 2 s (spec §14.2), or
/// `PROXOPS_TASK_POLL_MS` for test rigs whose tasks finish at once.
pub(crate) fn poll_interval() -> Duration {
    std::env::var("PROXOPS_TASK_POLL_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(RunOptions::DEFAULT_POLL_INTERVAL)
}

/// One line per action: `ok`, `failed` (with PVE's message), `deferred`.
fn results_text(cycles: &[ClusterCycle]) -> String {
    let mut out = String::new();
    for c in cycles {
        let _ = writeln!(out, "\n=== {} results ===", c.name);
        if c.plan.aborted {
            let _ = writeln!(
                out,
                "aborted: {}",
                c.plan
                    .abort_reason
                    .as_deref()
                    .unwrap_or("no reason recorded")
            );
            continue;
        }
        let Some(exec) = &c.execution else {
            let _ = writeln!(out, "nothing to do");
            continue;
        };
        for (action, state) in exec.actions().iter().zip(exec.states()) {
            let (word, detail) = state_words(state);
            let _ = write!(
                out,
                "  {word:<9}{:<14}{:<32} {:<10} id={}",
                action.op.as_str(),
                format!("{}/{}", action.kind, action.name),
                action.node.as_str(),
                action.target
            );
            if let Some(d) = detail {
                let _ = write!(out, "  {}", one_line(&d));
            }
            out.push('\n');
        }
        let (ok, failed) = exec.counts();
        let deferred = exec
            .states()
            .iter()
            .filter(|s| matches!(s, ActionState::Deferred { .. }))
            .count();
        let converged = c
            .objects
            .iter()
            .filter(|o| o.state.as_str() == "converged")
            .count();
        let pruned = c
            .objects
            .iter()
            .filter(|o| o.state.as_str() == "pruned")
            .count();
        let readback = if c.readback.is_some() {
            "read back"
        } else {
            "read-back FAILED"
        };
        let _ = writeln!(
            out,
            "{}: {ok} ok, {failed} failed, {deferred} deferred; {converged} converged, {pruned} pruned ({readback})",
            c.name
        );
    }
    out
}

fn state_words(state: &ActionState) -> (&'static str, Option<String>) {
    match state {
        ActionState::Done { outcome: Outcome::Succeeded, .. } => ("ok", None),
        ActionState::Done { outcome: Outcome::Failed { error, transient }, .. } => {
            ("failed", Some(if *transient { format!("{error} (transient; retried next cycle)") } else { error.clone() }))
        }
        ActionState::Done { outcome: Outcome::ChangedUnderUs, .. } => (
            "failed",
            Some("changed on PVE between read and write (digest mismatch); nothing overwritten, re-planned next cycle".into()),
        ),
        ActionState::Deferred { reason } => ("deferred", Some(reason.clone())),
        ActionState::Pending => ("pending", None),
        ActionState::InProgress { .. } => ("running", None),
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn action_json(action: &Action, state: &ActionState) -> Value {
    let (word, detail) = state_words(state);
    json!({
        "op": action.op.as_str(),
        "kind": action.kind.as_str(),
        "name": action.name,
        "node": action.node.as_str(),
        "id": action.target.to_string(),
        "result": word,
        "error": detail,
    })
}

fn cluster_json(c: &ClusterCycle) -> Value {
    let actions: Vec<Value> = c
        .execution
        .as_ref()
        .map(|e| {
            e.actions()
                .iter()
                .zip(e.states())
                .map(|(a, s)| action_json(a, s))
                .collect()
        })
        .unwrap_or_default();
    let (ok, failed) = c.execution.as_ref().map(|e| e.counts()).unwrap_or((0, 0));
    json!({
        "cluster": c.name.as_str(),
        "aborted": c.plan.aborted,
        "abort_reason": c.plan.abort_reason.clone().unwrap_or_default(),
        "actions_ok": ok,
        "actions_error": failed,
        "started_at": crate::status::rfc3339(c.started_at),
        "finished_at": crate::status::rfc3339(c.finished_at),
        "read_back": c.readback.is_some(),
        "actions": actions,
        "objects": c.objects.iter().map(|o| json!({
            "kind": o.kind, "name": o.name, "node": o.node, "id": o.id,
            "state": o.state.as_str(),
            "last_action": o.last_action.clone().unwrap_or_default(),
            "last_error": o.last_error.clone().unwrap_or_default(),
        })).collect::<Vec<_>>(),
    })
}
