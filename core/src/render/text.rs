//! The plain-text plan of `proxops diff` and `proxops apply` (spec §16.3).

use std::fmt::Write as _;

use super::{Group, anomaly_subject, is_untagged, object_label, or_dash};
use crate::action::{Action, Anomaly, Change, Skipped};
use crate::plan::Plan;

/// The plan as `proxops diff` prints it: per cluster a `=== <cluster> ===`
/// header, then `aborted: <reason>`, `no drift`, or the sections of §16.3,
/// one line per item. An empty slice renders as an empty string.
pub fn text(plans: &[Plan]) -> String {
    render(plans, false)
}

/// [`text`] with each action's field changes under its line
/// (`proxops apply --diff`): `      <field>: <from> -> <to>`, where a key
/// absent on PVE reads `(absent)` and a key to be deleted `(removed)`.
pub fn text_with_changes(plans: &[Plan]) -> String {
    render(plans, true)
}

/// Width of the first column (op, `skip` or anomaly type). §16.3 says 12,
/// but `mark-template` (13) and `live_only_slot` (14) are longer; one width
/// that fits the longest keeps every line of every section aligned.
const FIRST_COLUMN: usize = 14;

fn render(plans: &[Plan], with_changes: bool) -> String {
    let mut sorted: Vec<&Plan> = plans.iter().collect();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));

    let mut out = String::new();
    for (i, plan) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        cluster(&mut out, plan, with_changes);
    }
    out
}

fn cluster(out: &mut String, plan: &Plan, with_changes: bool) {
    let _ = writeln!(out, "=== {} ===", plan.cluster);
    if plan.aborted {
        let reason = plan.abort_reason.as_deref().unwrap_or("no reason recorded");
        let _ = writeln!(out, "aborted: {}", one_line(reason));
        return;
    }
    if plan.is_empty() {
        out.push_str("no drift\n");
    }

    for group in Group::ALL {
        let actions: Vec<&Action> = group.actions(plan).collect();
        section(out, group.title(), &actions, |out, a| {
            action_line(out, a, with_changes)
        });
    }
    super::rollout_line(out, plan, "");
    let deferred: Vec<&Action> = plan.deferred.iter().collect();
    section(out, "deferred prunes (budget)", &deferred, |out, a| {
        action_line(out, a, with_changes)
    });

    let (waiting, skipped): (Vec<&Skipped>, Vec<&Skipped>) = plan
        .skipped
        .iter()
        .partition(|s| s.reason.is_pending_restart());
    section(
        out,
        "pending restart (PVE applies these at the next restart)",
        &waiting,
        skipped_line,
    );
    let (untagged, other): (Vec<&Skipped>, Vec<&Skipped>) =
        skipped.into_iter().partition(|s| is_untagged(s));
    section(out, "skipped (no proxops tag)", &untagged, skipped_line);
    section(out, "skipped (other reasons)", &other, skipped_line);

    let anomalies: Vec<&Anomaly> = plan.anomalies.iter().collect();
    section(
        out,
        "anomalies (live-only slots proxops will NOT auto-remove)",
        &anomalies,
        anomaly_line,
    );
}

fn section<T>(out: &mut String, title: &str, items: &[T], mut line: impl FnMut(&mut String, &T)) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "=== {title} ({}) ===", items.len());
    for item in items {
        line(out, item);
    }
}

fn action_line(out: &mut String, a: &&Action, with_changes: bool) {
    let _ = writeln!(
        out,
        "  {:<w$} {:<24} {:<10} id={}  [{}] {}",
        a.op.as_str(),
        object_label(a.kind.as_str(), &a.name),
        a.node.as_str(),
        a.target,
        a.impact.as_str(),
        one_line(&a.reason),
        w = FIRST_COLUMN,
    );
    if with_changes {
        for c in &a.changes {
            change_line(out, c);
        }
    }
}

fn change_line(out: &mut String, c: &Change) {
    let from = c
        .from
        .as_deref()
        .map_or_else(|| "(absent)".to_owned(), one_line);
    let to =
        c.to.as_deref()
            .map_or_else(|| "(removed)".to_owned(), one_line);
    let _ = writeln!(out, "      {}: {from} -> {to}", one_line(&c.field));
}

fn skipped_line(out: &mut String, s: &&Skipped) {
    let _ = writeln!(
        out,
        "  {:<w$} {:<24} {:<10} id={}  {}",
        if s.reason.is_pending_restart() {
            "wait"
        } else {
            "skip"
        },
        object_label(s.kind.as_str(), &s.name),
        or_dash(s.node.as_str()),
        or_dash(&s.id.to_string()),
        one_line(&s.reason.to_string()),
        w = FIRST_COLUMN,
    );
}

fn anomaly_line(out: &mut String, a: &&Anomaly) {
    let field = match &a.field {
        Some(f) => format!("field={} ", one_line(f)),
        None => String::new(),
    };
    let (kind, name, node, id) = anomaly_subject(a);
    let _ = writeln!(
        out,
        "  {:<w$} {:<24} {:<10} id={}  {field}{}",
        a.anomaly_type.as_str(),
        object_label(kind, name),
        or_dash(node),
        or_dash(&id),
        one_line(&a.message),
        w = FIRST_COLUMN,
    );
}

/// Keeps one item on one line: a value or reason with line breaks (a
/// multi-line `description`) shows them as `\n`.
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}
