//! The plan as GitHub-flavoured Markdown for a pull-request comment.
//!
//! A reviewer's eye goes to the top of a table, so destructive rows (prune,
//! stop, stop-start) and blocked rows come first, each marked with an emoji
//! and a plain word so the mark survives a text-only view. Free text is
//! escaped so a reason or value can neither break the table nor inject
//! HTML (a raw `<secret>` would vanish as an unknown tag).

use std::fmt::Write as _;

use super::{Group, anomaly_subject, is_untagged, object_label, or_dash};
use crate::action::{Action, Anomaly, Impact, Skipped};
use crate::plan::Plan;

/// The plans as one Markdown comment: a title, an overall line, then a
/// `### <cluster>` part per cluster (sorted by name).
pub fn markdown(plans: &[Plan]) -> String {
    let mut sorted: Vec<&Plan> = plans.iter().collect();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));

    let mut out = String::from("## ProxOps plan\n\n");
    let aborted = sorted.iter().filter(|p| p.aborted).count();
    let converged = sorted.iter().filter(|p| p.is_empty()).count();
    let changing = sorted.len() - aborted - converged;
    let _ = writeln!(
        out,
        "{} {}: {changing} with changes, {converged} with no drift, {aborted} aborted",
        sorted.len(),
        plural(sorted.len(), "cluster", "clusters"),
    );
    for plan in sorted {
        out.push('\n');
        cluster(&mut out, plan);
    }
    out
}

fn cluster(out: &mut String, plan: &Plan) {
    let _ = writeln!(out, "### {}\n", cell(plan.cluster.as_str()));
    if plan.aborted {
        let reason = plan.abort_reason.as_deref().unwrap_or("no reason recorded");
        let _ = writeln!(
            out,
            "> ⛔ **ABORTED**: {}\n>\n> Nothing is done in this cluster this cycle.",
            cell(reason)
        );
        return;
    }
    if plan.is_empty() {
        out.push_str("✅ no drift\n");
        skipped(out, &plan.skipped);
        return;
    }

    summary(out, plan);
    super::rollout_line(out, plan, "\n");
    actions_table(out, plan);
    deferred_table(out, &plan.deferred);
    anomalies_table(out, &plan.anomalies);
    changes(out, plan);
    skipped(out, &plan.skipped);
}

fn summary(out: &mut String, plan: &Plan) {
    let n = |g: Group| g.actions(plan).count();
    let _ = writeln!(
        out,
        "**Summary:** {} create · {} update · {} power · {} prune · {} deferred · {} {} · {} skipped",
        n(Group::Create),
        n(Group::Update),
        n(Group::Power),
        n(Group::Prune),
        plan.deferred.len(),
        plan.anomalies.len(),
        plural(plan.anomalies.len(), "anomaly", "anomalies"),
        plan.skipped.len(),
    );
}

const ACTION_HEADER: &str =
    "| | Action | Object | Node | ID | Impact | Reason |\n|---|---|---|---|---|---|---|\n";

/// How a row is marked, in the order rows are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mark {
    Destructive,
    Blocked,
    Plain,
}

impl Mark {
    fn of(a: &Action) -> Mark {
        // A blocked action is not carried out, so it destroys nothing.
        if a.impact == Impact::Blocked {
            Mark::Blocked
        } else if a.is_destructive() {
            Mark::Destructive
        } else {
            Mark::Plain
        }
    }

    fn cell(self) -> &'static str {
        match self {
            Mark::Destructive => "⚠️ destructive",
            Mark::Blocked => "⛔ blocked",
            Mark::Plain => "",
        }
    }
}

fn actions_table(out: &mut String, plan: &Plan) {
    if plan.actions.is_empty() {
        return;
    }
    let mut rows: Vec<&Action> = plan.actions.iter().collect();
    // Stable: inside each mark the plan's execution order is kept.
    rows.sort_by_key(|a| Mark::of(a));
    out.push('\n');
    out.push_str(ACTION_HEADER);
    for a in rows {
        action_row(out, Mark::of(a).cell(), a);
    }
}

fn deferred_table(out: &mut String, deferred: &[Action]) {
    if deferred.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n**Deferred prunes ({})**: held back by the prune budget or the empty-desired guard; \
         nothing happens to them this cycle.\n",
        deferred.len()
    );
    out.push_str(ACTION_HEADER);
    for a in deferred {
        action_row(out, "⏸️ deferred", a);
    }
}

fn action_row(out: &mut String, mark: &str, a: &Action) {
    let _ = writeln!(
        out,
        "| {mark} | {} | {} | {} | {} | {} | {} |",
        a.op.as_str(),
        cell(&object_label(a.kind.as_str(), &a.name)),
        cell(a.node.as_str()),
        cell(&a.target.to_string()),
        a.impact.as_str(),
        cell(&a.reason),
    );
}

fn anomalies_table(out: &mut String, anomalies: &[Anomaly]) {
    if anomalies.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n**Anomalies ({})**: ProxOps does not act on these; a person should look.\n",
        anomalies.len()
    );
    out.push_str("| Type | Object | Node | ID | Field | Message |\n|---|---|---|---|---|---|\n");
    for a in anomalies {
        let (kind, name, node, id) = anomaly_subject(a);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            a.anomaly_type.as_str(),
            cell(&object_label(kind, name)),
            cell(or_dash(node)),
            cell(or_dash(&id)),
            cell(a.field.as_deref().unwrap_or("-")),
            cell(&a.message),
        );
    }
}

fn changes(out: &mut String, plan: &Plan) {
    let with_changes: Vec<&Action> = plan
        .actions
        .iter()
        .chain(&plan.deferred)
        .filter(|a| !a.changes.is_empty())
        .collect();
    if with_changes.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n<details>\n<summary>Field changes ({} {})</summary>\n",
        with_changes.len(),
        plural(with_changes.len(), "action", "actions"),
    );
    out.push_str("| Object | Action | Field | From | To |\n|---|---|---|---|---|\n");
    for a in with_changes {
        let object = cell(&object_label(a.kind.as_str(), &a.name));
        for c in &a.changes {
            let _ = writeln!(
                out,
                "| {object} | {} | {} | {} | {} |",
                a.op.as_str(),
                cell(&c.field),
                c.from
                    .as_deref()
                    .map_or_else(|| "*(absent)*".to_owned(), cell),
                c.to.as_deref()
                    .map_or_else(|| "*(removed)*".to_owned(), cell),
            );
        }
    }
    out.push_str("\n</details>\n");
}

fn skipped(out: &mut String, skipped: &[Skipped]) {
    if skipped.is_empty() {
        return;
    }
    let untagged = skipped.iter().filter(|s| is_untagged(s)).count();
    let _ = writeln!(
        out,
        "\n<details>\n<summary>Skipped ({}, {untagged} without the proxops tag)</summary>\n",
        skipped.len()
    );
    out.push_str("| Object | Node | ID | Reason |\n|---|---|---|---|\n");
    // Untagged guests first, as in the text plan.
    let (first, rest): (Vec<&Skipped>, Vec<&Skipped>) =
        skipped.iter().partition(|s| is_untagged(s));
    for s in first.into_iter().chain(rest) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            cell(&object_label(s.kind.as_str(), &s.name)),
            cell(or_dash(s.node.as_str())),
            cell(or_dash(&s.id.to_string())),
            cell(&s.reason.to_string()),
        );
    }
    out.push_str("\n</details>\n");
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 { one } else { many }
}

/// Text made safe for a table cell (and a blockquote line): it cannot end
/// the cell, open a code span, start an HTML tag, emphasise or strike
/// through, or break the row. `>` is left alone: it only means something
/// at the start of a line, and a cell never starts one.
fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '|' => out.push_str("\\|"),
            '`' => out.push_str("\\`"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '*' => out.push_str("\\*"),
            '~' => out.push_str("\\~"),
            '\n' => out.push_str("<br>"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}
