//! What an apply did, for a person (`results_text`) and a program
//! (`results_json`: the plan and each cluster's results in one document):
//! every action's outcome, each cluster's counts and object states, and
//! whether it was read back.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::action::Action;
use crate::cycle::CycleRecord;
use crate::exec::{ActionState, Outcome};
use crate::plan::Plan;

use super::one_line;

/// `--output json` of `apply`: the plans (as [`super::json`] renders them)
/// and each cluster's results, pretty-printed, with a closing newline.
pub fn results_json(cycles: &[CycleRecord], plans: &[Plan]) -> String {
    let plan_doc: Value = serde_json::from_str(&super::json(plans)).unwrap_or(Value::Null);
    let doc = json!({
        "plan": plan_doc,
        "results": cycles.iter().map(cluster_json).collect::<Vec<_>>(),
    });
    format!(
        "{}\n",
        serde_json::to_string_pretty(&doc).unwrap_or_default()
    )
}

/// One line per action: `ok`, `failed` (with PVE's message), `deferred`;
/// a count per cluster, and a closing line that counts everything done.
pub fn results_text(cycles: &[CycleRecord]) -> String {
    let mut out = String::new();
    let (mut all_ok, mut all_failed, mut all_deferred, mut aborted) = (0, 0, 0, 0);
    for c in cycles {
        let _ = writeln!(out, "\n=== {} results ===", c.name);
        if c.plan.is_aborted() {
            aborted += 1;
            let _ = writeln!(
                out,
                "aborted: {}",
                c.plan.abort_reason().unwrap_or("no reason recorded")
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
        all_ok += ok;
        all_failed += failed;
        all_deferred += deferred;
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
    let _ = writeln!(
        out,
        "\napplied: {all_ok} action(s) ok, {all_failed} failed, {all_deferred} deferred; {} cluster{}, {aborted} aborted",
        cycles.len(),
        if cycles.len() == 1 { "" } else { "s" }
    );
    out
}

fn state_words(state: &ActionState) -> (&'static str, Option<String>) {
    match state {
        ActionState::Done { outcome: Outcome::Succeeded, .. } => ("ok", None),
        ActionState::Done { outcome: outcome @ Outcome::Failed { error, .. }, .. } => {
            ("failed", Some(if outcome.is_transient() { format!("{error} (transient; retried next cycle)") } else { error.clone() }))
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

fn cluster_json(c: &CycleRecord) -> Value {
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
        "aborted": c.plan.is_aborted(),
        "abort_reason": c.plan.abort_reason().map(str::to_owned).unwrap_or_default(),
        "actions_ok": ok,
        "actions_error": failed,
        "started_at": proxops_model::time::rfc3339(c.started_at),
        "finished_at": proxops_model::time::rfc3339(c.finished_at),
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
