//! The plain-text plan of `proxops diff` and `proxops apply` (spec §16.3).

use std::fmt::Write as _;

use super::{
    ANOMALY_SECTIONS, Group, Palette, Role, anomaly_subject, cluster_summary, field_label,
    is_untagged, object_label, or_dash, total_line,
};
use crate::action::{Action, Anomaly, Change, Impact, Skipped};
use crate::plan::Plan;
use crate::report::PendingAction;

/// The plan as `proxops diff` prints it, without colour: per cluster a
/// `=== <cluster> ===` header, then `aborted: <reason>`, `no drift`, or the
/// sections of §16.3, one line per item and under each action one line per
/// field it changes; then the cluster's summary line. A `Plan:` line totals
/// every cluster. An empty slice renders as an empty string.
pub fn text(plans: &[Plan]) -> String {
    text_styled(plans, Palette::PLAIN)
}

/// [`text`] coloured by `palette`.
///
/// Under each action its field changes, one per line: `+ key  value` for a
/// key the action adds, `~ key  from → to` for one it changes, `- key
/// from` for one it removes; the key's manifest field beside it where that
/// is another name (`memory (spec.memory)`), secrets as `<secret>`, and
/// `← stop-start` (or `← reboot`) on the changes that give the action that
/// impact.
pub fn text_styled(plans: &[Plan], palette: Palette) -> String {
    text_with(plans, palette, false)
}

/// [`text_styled`], with PVE's form of each value beside the manifest's
/// where they differ (`2GiB (PVE: 2048)`) when `pve_form` (`--verbose`).
pub fn text_with(plans: &[Plan], palette: Palette, pve_form: bool) -> String {
    // What came from PVE or a repository is shown, never obeyed.
    let plans = super::printable_plans(plans);
    let mut sorted: Vec<&Plan> = plans.iter().collect();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));

    let mut out = String::new();
    if sorted.is_empty() {
        return out;
    }
    let r = Renderer { palette, pve_form };
    for (i, plan) in sorted.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        r.cluster(&mut out, plan);
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "{}",
        palette.paint(Role::Heading, &total_line(&sorted))
    );
    out
}

/// Width of the first column (op, `skip` or anomaly type). §16.3 says 12,
/// but `mark-template` (13) and `live_only_slot` (14) are longer; one width
/// that fits the longest keeps every line of every section aligned.
const FIRST_COLUMN: usize = 14;

/// Where a field change line starts: under the object column.
const CHANGE_INDENT: &str = "      ";

struct Renderer {
    palette: Palette,
    /// PVE's form of a value beside the manifest's (`--verbose`).
    pve_form: bool,
}

impl Renderer {
    fn cluster(&self, out: &mut String, plan: &Plan) {
        let _ = writeln!(
            out,
            "{}",
            self.palette
                .paint(Role::Heading, &format!("=== {} ===", plan.cluster))
        );
        if plan.is_aborted() {
            let reason = plan.abort_reason().unwrap_or("no reason recorded");
            let _ = writeln!(
                out,
                "{}",
                self.palette
                    .paint(Role::Anomaly, &format!("aborted: {}", one_line(reason)))
            );
            self.summary(out, plan);
            return;
        }
        if plan.is_empty() && plan.not_considered.is_empty() {
            out.push_str("no drift\n");
        } else if plan.is_empty() {
            out.push_str("no drift in the targeted objects\n");
        }

        for group in Group::ALL {
            let actions: Vec<&Action> = group.actions(plan).collect();
            self.section(out, group.title(), Role::of(group), &actions, |out, a| {
                self.action_line(out, a, Role::of(group))
            });
        }
        super::rollout_line(out, plan, "");
        let deferred: Vec<&Action> = plan.deferred.iter().collect();
        self.section(
            out,
            "deferred prunes (budget)",
            Role::Quiet,
            &deferred,
            |out, a| self.action_line(out, a, Role::Quiet),
        );

        let (waiting, skipped): (Vec<&Skipped>, Vec<&Skipped>) = plan
            .skipped
            .iter()
            .partition(|s| s.reason.is_pending_restart());
        self.section(
            out,
            "pending restart (PVE applies these at the next restart)",
            Role::Update,
            &waiting,
            skipped_line,
        );
        let (untagged, other): (Vec<&Skipped>, Vec<&Skipped>) =
            skipped.into_iter().partition(|s| is_untagged(s));
        self.section(
            out,
            "skipped (no proxops tag)",
            Role::Quiet,
            &untagged,
            skipped_line,
        );
        self.section(
            out,
            "skipped (other reasons)",
            Role::Quiet,
            &other,
            skipped_line,
        );

        for (anomaly_type, title) in ANOMALY_SECTIONS {
            let anomalies: Vec<&Anomaly> = plan
                .anomalies
                .iter()
                .filter(|a| a.anomaly_type() == anomaly_type)
                .collect();
            self.section(out, title, Role::Anomaly, &anomalies, |out, a| {
                self.anomaly_line(out, a)
            });
        }
        self.section(
            out,
            "not considered (--target)",
            Role::Quiet,
            &plan.not_considered,
            |out, o| {
                let _ = writeln!(out, "  {o}");
            },
        );
        self.summary(out, plan);
    }

    fn summary(&self, out: &mut String, plan: &Plan) {
        let _ = writeln!(out, "{}", cluster_summary(plan));
    }

    fn section<T>(
        &self,
        out: &mut String,
        title: &str,
        role: Role,
        items: &[T],
        mut line: impl FnMut(&mut String, &T),
    ) {
        if items.is_empty() {
            return;
        }
        let heading = format!("=== {title} ({}) ===", items.len());
        let _ = writeln!(out, "{}", self.palette.paint(role, &heading));
        for item in items {
            line(out, item);
        }
    }

    fn action_line(&self, out: &mut String, a: &&Action, role: Role) {
        self.line_of(out, &ActionLine::of(a), role);
    }

    fn line_of(&self, out: &mut String, a: &ActionLine<'_>, role: Role) {
        let _ = writeln!(
            out,
            "  {} {:<24} {:<10} id={}  [{}] {}",
            self.palette
                .paint(role, &format!("{:<w$}", a.op, w = FIRST_COLUMN)),
            object_label(a.kind, a.name),
            a.node,
            a.id,
            crate::action::impact_word(a.op, a.impact),
            one_line(a.reason),
        );
        let labels: Vec<String> = a
            .changes
            .iter()
            .map(|c| one_line(&field_label(c)))
            .collect();
        let width = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        for (c, label) in a.changes.iter().zip(&labels) {
            self.change_line(out, a.impact, c, label, width);
        }
    }

    fn change_line(&self, out: &mut String, impact: Impact, c: &Change, label: &str, width: usize) {
        let shown = |v: &str| {
            let manifest = super::manifest_value(c, v);
            if self.pve_form && manifest != v {
                one_line(&format!("{manifest} (PVE: {v})"))
            } else {
                one_line(&manifest)
            }
        };
        let (sign, role, values) = match (&c.from, &c.to) {
            (None, Some(to)) => ('+', Role::Create, shown(to)),
            (Some(from), None) => ('-', Role::Prune, shown(from)),
            (None, None) => ('-', Role::Prune, String::new()),
            (Some(from), Some(to)) => (
                '~',
                Role::Update,
                format!("{} → {}", shown(from), shown(to)),
            ),
        };
        let cost = if c.sets_impact(impact) {
            format!(
                "  {}",
                self.palette
                    .paint(Role::Cost, &format!("← {}", impact.as_str()))
            )
        } else {
            String::new()
        };
        let line = format!(
            "{CHANGE_INDENT}{} {label:<width$}  {values}",
            self.palette.paint(role, &sign.to_string())
        );
        let line = if values.is_empty() {
            line.trim_end()
        } else {
            &line
        };
        let _ = writeln!(out, "{line}{cost}");
    }

    fn anomaly_line(&self, out: &mut String, a: &&Anomaly) {
        let field = match &a.field {
            Some(f) => format!("field={} ", one_line(f)),
            None => String::new(),
        };
        let (kind, name, node, id) = anomaly_subject(a);
        let _ = writeln!(
            out,
            "  {} {:<24} {:<10} id={}  {field}{}",
            self.palette.paint(
                Role::Anomaly,
                &format!("{:<w$}", a.anomaly_type().as_str(), w = FIRST_COLUMN)
            ),
            object_label(kind, name),
            or_dash(node),
            or_dash(&id),
            one_line(&a.message),
        );
    }
}

/// What the text plan prints of one action: the parts a planned
/// [`Action`] and an action kept in the status store ([`PendingAction`])
/// both have, so the two are worded by one function.
struct ActionLine<'a> {
    op: &'a str,
    kind: &'a str,
    name: &'a str,
    node: &'a str,
    id: String,
    impact: Impact,
    reason: &'a str,
    changes: &'a [Change],
}

impl<'a> ActionLine<'a> {
    fn of(a: &'a Action) -> ActionLine<'a> {
        ActionLine {
            op: a.op.as_str(),
            kind: a.kind.as_str(),
            name: &a.name,
            node: a.node.as_str(),
            id: a.target.to_string(),
            impact: a.impact,
            reason: &a.reason,
            changes: &a.changes,
        }
    }

    fn stored(a: &'a PendingAction) -> ActionLine<'a> {
        ActionLine {
            op: a.action,
            kind: &a.kind,
            name: &a.name,
            node: &a.node,
            id: a.id.clone(),
            impact: a.impact,
            reason: &a.reason,
            changes: &a.changes,
        }
    }
}

/// One action as the text plan words it, without colour: its line, then
/// one line per field it changes (`~ memory (spec.memory)  2048 → 4096  ←
/// stop-start`). The dashboard shows an object's actions with it, so they
/// read as `proxops diff` printed them.
pub fn action_text(a: &PendingAction) -> String {
    let mut out = String::new();
    Renderer {
        palette: Palette::PLAIN,
        pve_form: false,
    }
    .line_of(&mut out, &ActionLine::stored(a), Role::Quiet);
    out
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
