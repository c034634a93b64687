//! `proxops status`: a read-only cycle over every selected cluster, then a
//! per-cluster convergence table (text) or the `/status` document of spec
//! §17.3 (JSON). Writes nothing to PVE.
//!
//! An object is `converged` when the plan has nothing for it, `drift` when
//! it has an action, `skipped` when the planner skipped it, `anomalous`
//! when there is an anomaly about it. Timestamps are RFC 3339 UTC.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use proxops_core::exec::Timestamp;
use proxops_core::plan::Plan;
use proxops_core::repo::ClusterDesired;
use proxops_pve::runner::unix_now;
use serde_json::{Value, json};

use crate::args::{CommandArgs, GlobalArgs, Output};
use crate::context::{self, Env};
use crate::cycle::{self, Source};
use crate::exit::{Exit, Failure};
use crate::out;

/// One object's row.
struct Row {
    cluster: String,
    kind: String,
    name: String,
    node: String,
    id: String,
    state: &'static str,
    last_action: String,
    detail: String,
    prune_reason: String,
}

pub fn run(g: &GlobalArgs, a: &CommandArgs, env: &Env) -> Result<Exit, Failure> {
    let process_start = unix_now();
    let output = a.output.unwrap_or(Output::Text);
    if output == Output::Markdown {
        return Err(Failure::input("status --output: use text or json"));
    }
    let ws = context::load_workspace(g, env)?;
    let source = match &a.replay {
        Some(dir) => Source::Replay(dir.clone()),
        None => Source::Live,
    };
    let started_at = unix_now();
    let outcome = cycle::plan_all(g, env, &ws, &source)?;
    let finished_at = unix_now();

    let mut rows = Vec::new();
    for cp in &outcome.plans {
        let desired = ws
            .loaded
            .clusters
            .get(&cp.plan.cluster)
            .and_then(|r| r.as_ref().ok());
        rows.extend(cluster_rows(&cp.plan, desired));
    }
    let plans: Vec<&Plan> = outcome.plans.iter().map(|p| &p.plan).collect();
    match output {
        Output::Json => {
            let doc = document(
                &ws.commit,
                process_start,
                started_at,
                finished_at,
                &plans,
                &rows,
            );
            out::report_line(&serde_json::to_string_pretty(&doc).unwrap_or_default())?;
        }
        _ => out::report(&table(&plans, &rows))?,
    }
    let mut exit = Exit::Ok;
    if !outcome.invalid.is_empty() {
        let refs: Vec<&proxops_core::diag::Diagnostic> = outcome.invalid.iter().collect();
        out::errors(&context::render_diagnostics(&refs));
        exit = exit.worst(Exit::Input);
    }
    if plans.iter().any(|p| p.aborted) {
        exit = exit.worst(Exit::Runtime);
    }
    Ok(exit)
}

fn cluster_rows(plan: &Plan, desired: Option<&ClusterDesired>) -> Vec<Row> {
    let cluster = plan.cluster.to_string();
    let mut rows: BTreeMap<(String, String), Row> = BTreeMap::new();
    if plan.aborted {
        return Vec::new();
    }
    for obj in desired.map(|d| d.objects.values()).into_iter().flatten() {
        let (node, id) = match (obj.spec.guest_id(), obj.spec.artifact()) {
            (Some((n, v)), _) => (n.to_string(), v.to_string()),
            (None, Some(a)) => (
                a.all_nodes()
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                format!("{}:{}", a.storage, a.filename),
            ),
            _ => (String::new(), String::new()),
        };
        let key = (obj.r#ref.kind.to_string(), obj.r#ref.name.to_string());
        rows.insert(
            key.clone(),
            Row {
                cluster: cluster.clone(),
                kind: key.0,
                name: key.1,
                node,
                id,
                state: "converged",
                last_action: String::new(),
                detail: String::new(),
                prune_reason: String::new(),
            },
        );
    }
    for a in &plan.actions {
        let r = entry(
            &mut rows,
            &cluster,
            a.kind.as_str(),
            &a.name,
            a.node.as_str(),
            &a.target.to_string(),
        );
        if r.state == "converged" {
            r.state = "drift";
            r.last_action = a.op.as_str().to_owned();
            r.detail = a.reason.clone();
        }
        if a.object.is_none() {
            r.prune_reason = a.reason.clone();
        }
    }
    for a in &plan.deferred {
        let r = entry(
            &mut rows,
            &cluster,
            a.kind.as_str(),
            &a.name,
            a.node.as_str(),
            &a.target.to_string(),
        );
        r.state = "skipped";
        r.last_action = a.op.as_str().to_owned();
        r.detail = a.reason.clone();
        r.prune_reason = a.reason.clone();
    }
    for s in &plan.skipped {
        let r = entry(
            &mut rows,
            &cluster,
            s.kind.as_str(),
            &s.name,
            s.node.as_str(),
            &s.id.to_string(),
        );
        r.state = "skipped";
        r.detail = s.reason.to_string();
    }
    for an in &plan.anomalies {
        // A kind-wide anomaly (empty_desired) names no object.
        let Some((kind, name)) = an.object() else {
            continue;
        };
        let (node, id) = an.node_and_id();
        let r = entry(&mut rows, &cluster, kind.as_str(), name, node, &id);
        r.state = "anomalous";
        r.detail = an.message.clone();
    }
    rows.into_values().collect()
}

/// The row of `kind/name`, made on first use.
fn entry<'a>(
    rows: &'a mut BTreeMap<(String, String), Row>,
    cluster: &str,
    kind: &str,
    name: &str,
    node: &str,
    id: &str,
) -> &'a mut Row {
    rows.entry((kind.to_owned(), name.to_owned()))
        .or_insert_with(|| Row {
            cluster: cluster.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            node: node.to_owned(),
            id: id.to_owned(),
            state: "converged",
            last_action: String::new(),
            detail: String::new(),
            prune_reason: String::new(),
        })
}

fn table(plans: &[&Plan], rows: &[Row]) -> String {
    let mut out = String::new();
    for (i, plan) in plans.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "=== {} ===", plan.cluster);
        if plan.aborted {
            let _ = writeln!(
                out,
                "aborted: {}",
                plan.abort_reason.as_deref().unwrap_or("no reason recorded")
            );
            continue;
        }
        let _ = writeln!(
            out,
            "  {:<11}{:<12}{:<28}{:<10}{:<12}DETAIL",
            "STATE", "KIND", "NAME", "NODE", "ID"
        );
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| r.cluster == plan.cluster.as_str())
            .collect();
        for r in &mine {
            let _ = writeln!(
                out,
                "  {:<11}{:<12}{:<28}{:<10}{:<12}{}",
                r.state,
                r.kind,
                r.name,
                r.node,
                r.id,
                r.detail.split_whitespace().collect::<Vec<_>>().join(" ")
            );
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &mine {
            *counts.entry(r.state).or_default() += 1;
        }
        let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        let anomaly = plan
            .anomalies
            .iter()
            .filter(|a| a.object().is_none())
            .map(|a| a.message.clone())
            .collect::<Vec<_>>();
        let _ = writeln!(
            out,
            "{}: {} objects: {}",
            plan.cluster,
            mine.len(),
            summary.join(", ")
        );
        for m in anomaly {
            let _ = writeln!(out, "anomaly: {m}");
        }
    }
    out
}

fn document(
    commit: &Option<String>,
    process_start: Timestamp,
    started_at: Timestamp,
    finished_at: Timestamp,
    plans: &[&Plan],
    rows: &[Row],
) -> Value {
    let aborted: Vec<String> = plans
        .iter()
        .filter(|p| p.aborted)
        .map(|p| format!("{}: {}", p.cluster, p.abort_reason.as_deref().unwrap_or("")))
        .collect();
    let updated = rfc3339(finished_at);
    json!({
        "process_start": rfc3339(process_start),
        "last_cycle": {
            "commit": commit.clone().unwrap_or_default(),
            "started_at": rfc3339(started_at),
            "finished_at": updated,
            "objects": rows.len(),
            "actions_ok": 0,
            "actions_error": 0,
            "pruned": 0,
            "prune_deferred": plans.iter().map(|p| p.deferred.len()).sum::<usize>(),
            "skipped": plans.iter().map(|p| p.skipped.len()).sum::<usize>(),
            "anomalies": plans.iter().map(|p| p.anomalies.len()).sum::<usize>(),
            "desired_stale": false,
            "read_only": false,
            "aborted": !aborted.is_empty(),
            "abort_reason": aborted.join("; "),
        },
        "clusters": plans.iter().map(|p| json!({
            "cluster": p.cluster.as_str(),
            "aborted": p.aborted,
            "abort_reason": p.abort_reason.clone().unwrap_or_default(),
            "actions": p.actions.len(),
        })).collect::<Vec<_>>(),
        "objects": rows.iter().map(|r| json!({
            "cluster": r.cluster,
            "kind": r.kind,
            "name": r.name,
            "node": r.node,
            "id": r.id,
            "state": r.state,
            "last_action": r.last_action,
            "last_error": if r.state == "converged" { String::new() } else { r.detail.clone() },
            "last_converged_at": if r.state == "converged" { updated.clone() } else { String::new() },
            "prune_reason": r.prune_reason,
            "updated_at": updated,
        })).collect::<Vec<_>>(),
    })
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic
/// Gregorian calendar).
pub fn rfc3339(t: Timestamp) -> String {
    let days = (t / 86_400) as i64;
    let secs = t % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_764_430_245), "2025-11-29T15:30:45Z");
    }
}
