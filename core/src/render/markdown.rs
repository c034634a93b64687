//! The plan as GitHub-flavoured Markdown for a pull-request comment.
//!
//! A reviewer's eye goes to the top of a table, so destructive rows (prune,
//! stop, stop-start) and blocked rows come first, each marked with an emoji
//! and a plain word so the mark survives a text-only view. Free text is
//! escaped so a reason or value can neither break the table nor inject
//! HTML (a raw `<secret>` would vanish as an unknown tag).
//!
//! Updates' field changes are shown open, the rest folded. A comment has a
//! size limit (GitHub refuses one over 65,536 characters), so a plan longer
//! than [`MARKDOWN_LIMIT`] first loses the folded field changes and then is
//! cut, with a note saying so; the totals come first and are never cut.

use std::fmt::Write as _;

use super::{Group, Totals, anomaly_subject, field_label, is_untagged, object_label, or_dash};
use crate::action::{Action, Anomaly, Impact, Skipped};
use crate::plan::Plan;

/// The most characters [`markdown`] writes: under GitHub's 65,536 for a
/// comment, with room for a CI job's own header.
pub const MARKDOWN_LIMIT: usize = 60_000;

/// The plans as one Markdown comment of at most [`MARKDOWN_LIMIT`]
/// characters: a title, an overall line, the totals, then a
/// `### <cluster>` part per cluster (sorted by name).
pub fn markdown(plans: &[Plan]) -> String {
    markdown_within(plans, MARKDOWN_LIMIT)
}

/// [`markdown`] within `limit` characters (at least enough for the title,
/// the totals and the note on what was cut).
pub fn markdown_within(plans: &[Plan], limit: usize) -> String {
    // What came from PVE or a repository is shown, never obeyed.
    let plans = super::printable_plans(plans);
    let mut sorted: Vec<&Plan> = plans.iter().collect();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));

    let mut head = String::from("## ProxOps plan\n\n");
    let aborted = sorted.iter().filter(|p| p.is_aborted()).count();
    let converged = sorted.iter().filter(|p| p.is_empty()).count();
    let changing = sorted.len() - aborted - converged;
    let _ = writeln!(
        head,
        "{} {}: {changing} with changes, {converged} with no drift, {aborted} aborted\n",
        sorted.len(),
        plural(sorted.len(), "cluster", "clusters"),
    );
    let _ = writeln!(head, "**{}**", cell(&super::total_line(&sorted)));

    let full = body(&sorted, Folded::Shown);
    if chars(&head) + chars(&full) <= limit {
        return head + &full;
    }
    let lean = body(&sorted, Folded::Left);
    if chars(&head) + chars(&lean) <= limit {
        return head + &lean;
    }
    let room = limit.saturating_sub(chars(&head));
    head + &cut(&lean, room)
}

/// Whether the folded field changes (creates, power, deferred) are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Folded {
    Shown,
    /// Left out for size: a line says where they are.
    Left,
}

fn body(plans: &[&Plan], folded: Folded) -> String {
    let mut out = String::new();
    for plan in plans {
        out.push('\n');
        cluster(&mut out, plan, folded);
    }
    out
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// What shows where the JSON plan is.
const JSON_HINT: &str = "run `proxops diff --output json` (the plan as JSON) for every item";

/// The first lines of `body` that fit in `room` characters with the note
/// on the cut; a `<details>` block left open is closed.
fn cut(body: &str, room: usize) -> String {
    let total = body.lines().count();
    let note_for = |shown: usize| {
        format!(
            "\n> ✂️ **Cut to fit a comment**: {shown} of {total} lines shown; the totals above count the whole plan. For the rest, {JSON_HINT}.\n"
        )
    };
    // The note's own length depends on the numbers in it; the largest it
    // can be is kept free.
    let reserve = chars(&note_for(total)) + chars("\n</details>\n");
    let mut out = String::new();
    let mut used = 0;
    let mut shown = 0;
    let mut open = 0usize;
    for line in body.lines() {
        let n = chars(line) + 1;
        if used + n + reserve > room {
            break;
        }
        out.push_str(line);
        out.push('\n');
        used += n;
        shown += 1;
        match line {
            "<details>" => open += 1,
            "</details>" => open = open.saturating_sub(1),
            _ => {}
        }
    }
    if open > 0 {
        out.push_str("\n</details>\n");
    }
    out.push_str(&note_for(shown));
    out
}

fn cluster(out: &mut String, plan: &Plan, folded: Folded) {
    let _ = writeln!(out, "### {}\n", cell(plan.cluster.as_str()));
    if plan.is_aborted() {
        let reason = plan.abort_reason().unwrap_or("no reason recorded");
        let _ = writeln!(
            out,
            "> ⛔ **ABORTED**: {}\n>\n> Nothing is done in this cluster this cycle.",
            cell(reason)
        );
        diagnostics(out, plan);
        return;
    }
    if plan.is_empty() {
        out.push_str("✅ no drift\n");
        skipped(out, &plan.skipped);
        not_considered(out, plan);
        return;
    }

    summary(out, plan);
    super::rollout_line(out, plan, "\n");
    actions_table(out, plan);
    update_changes(out, plan);
    deferred_table(out, &plan.deferred);
    anomalies_table(out, &plan.anomalies);
    folded_changes(out, plan, folded);
    skipped(out, &plan.skipped);
    not_considered(out, plan);
}

/// What `--target` left out, folded: one object per line.
fn not_considered(out: &mut String, plan: &Plan) {
    if plan.not_considered.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n<details>\n<summary>Not considered (--target): {}</summary>\n",
        plan.not_considered.len()
    );
    for o in &plan.not_considered {
        let _ = writeln!(out, "- {}", cell(&o.to_string()));
    }
    out.push_str("\n</details>\n");
}

/// An aborted cluster's input problems, where they are and what is wrong.
fn diagnostics(out: &mut String, plan: &Plan) {
    if plan.diagnostics.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n**Problems ({})**: fix these and push again.\n",
        plan.diagnostics.len()
    );
    out.push_str("| File | Field | Problem |\n|---|---|---|\n");
    for d in &plan.diagnostics {
        let place = match (d.line, d.column) {
            (Some(l), Some(c)) => format!("{}:{l}:{c}", d.file),
            (Some(l), None) => format!("{}:{l}", d.file),
            _ => d.file.clone(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            cell(&place),
            cell(d.field.as_deref().unwrap_or("-")),
            cell(&d.message),
        );
    }
}

fn summary(out: &mut String, plan: &Plan) {
    let t = Totals::of(plan);
    let _ = writeln!(
        out,
        "**Summary:** {} create · {} update · {} power · {} prune · {} deferred · {} {} · {} skipped",
        t.create,
        t.update,
        t.power,
        t.prune,
        t.deferred,
        t.anomalies,
        plural(t.anomalies, "anomaly", "anomalies"),
        t.skipped,
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
        a.impact_word(),
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
            a.anomaly_type().as_str(),
            cell(&object_label(kind, name)),
            cell(or_dash(node)),
            cell(or_dash(&id)),
            cell(a.field.as_deref().unwrap_or("-")),
            cell(&a.message),
        );
    }
}

/// The updates' field changes, open: what a reviewer checks first.
fn update_changes(out: &mut String, plan: &Plan) {
    let updates: Vec<&Action> = Group::Update
        .actions(plan)
        .filter(|a| !a.changes.is_empty())
        .collect();
    if updates.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n**Field changes of updates ({})**\n", updates.len());
    changes_table(out, &updates);
}

/// Every other action's field changes (creates, power, deferred), folded;
/// or, when they are left out for size, a line saying where they are.
fn folded_changes(out: &mut String, plan: &Plan, folded: Folded) {
    let rest = folded_actions(plan);
    if rest.is_empty() {
        return;
    }
    let what = format!(
        "Field changes of creates and other actions ({} {})",
        rest.len(),
        plural(rest.len(), "action", "actions"),
    );
    match folded {
        Folded::Shown => {
            let _ = writeln!(out, "\n<details>\n<summary>{what}</summary>\n");
            changes_table(out, &rest);
            out.push_str("\n</details>\n");
        }
        Folded::Left => {
            let _ = writeln!(out, "\n{what}: left out to fit a comment; {JSON_HINT}.");
        }
    }
}

fn folded_actions(plan: &Plan) -> Vec<&Action> {
    plan.actions
        .iter()
        .filter(|a| Group::of(a.op) != Group::Update)
        .chain(&plan.deferred)
        .filter(|a| !a.changes.is_empty())
        .collect()
}

/// One row per changed field: the PVE key with its manifest field, from,
/// to, and `⚠️ stop-start` (or `reboot`) on the changes that set the
/// action's impact.
fn changes_table(out: &mut String, actions: &[&Action]) {
    out.push_str("| Object | Action | Field | From | To | Impact |\n|---|---|---|---|---|---|\n");
    for a in actions {
        let object = cell(&object_label(a.kind.as_str(), &a.name));
        for c in &a.changes {
            let cost = if c.sets_impact(a.impact) {
                format!("⚠️ {}", a.impact.as_str())
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "| {object} | {} | {} | {} | {} | {cost} |",
                a.op.as_str(),
                cell(&field_label(c)),
                c.from.as_deref().map_or_else(
                    || "*(absent)*".to_owned(),
                    |v| cell(&super::manifest_value(c, v))
                ),
                c.to.as_deref().map_or_else(
                    || "*(removed)*".to_owned(),
                    |v| cell(&super::manifest_value(c, v))
                ),
            );
        }
    }
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
