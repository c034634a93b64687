//! Plan renderings: the text `proxops diff` prints, the stable JSON document
//! (`proxops-plan/v1`, described in `docs/plan-json.md`) and the Markdown a
//! pull-request comment carries.
//!
//! This module owns how a [`Plan`] looks to a person or a program and nothing
//! else: it never decides, sorts actions or filters them (the planner did
//! that), and it never renders a [`Work`](crate::action::Work) — the form
//! values there may hold secrets. What it prints comes from the plan's
//! `Change`s, reasons and identities only, where secrets already read
//! `<secret>`.
//!
//! Every function is pure: same plans in, same bytes out. Clusters are
//! rendered sorted by name; inside a cluster items keep the plan's order.

mod json;
mod markdown;
mod text;

pub use json::{JSON_FORMAT, json, json_with_warnings};
pub use markdown::markdown;
pub use text::{text, text_with_changes};

use crate::action::{Action, Anomaly, Op, Skipped};
use crate::plan::Plan;

/// The action groups every rendering shows, in the order they are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Create,
    Update,
    Power,
    Prune,
}

impl Group {
    const ALL: [Group; 4] = [Group::Create, Group::Update, Group::Power, Group::Prune];

    fn of(op: Op) -> Group {
        match op {
            Op::Create | Op::Clone | Op::Download | Op::MarkTemplate => Group::Create,
            Op::Update | Op::Resize => Group::Update,
            Op::Start | Op::Stop | Op::Reboot => Group::Power,
            Op::Prune => Group::Prune,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Group::Create => "will create",
            Group::Update => "will update",
            Group::Power => "power changes",
            Group::Prune => "will delete (prune)",
        }
    }

    fn actions(self, plan: &Plan) -> impl Iterator<Item = &Action> {
        plan.actions.iter().filter(move |a| Group::of(a.op) == self)
    }
}

/// The plan's rollout line ("Rollout: 3 stop-start updates (1 guest(s)
/// unavailable at once) …"), after `before`, when the plan makes any guest
/// unavailable; nothing otherwise.
fn rollout_line(out: &mut String, plan: &Plan, before: &str) {
    if let Some(line) = plan.rollout.line() {
        out.push_str(before);
        out.push_str(&line);
        out.push('\n');
    }
}

/// Whether a skipped entry is a live guest ProxOps does not own.
fn is_untagged(s: &Skipped) -> bool {
    s.reason.is_untagged()
}

/// An anomaly's kind, name, node and id as shown, `""` where it has none
/// (a kind-wide or cluster-wide anomaly).
fn anomaly_subject(a: &Anomaly) -> (&'static str, &str, &str, String) {
    let (node, id) = a.node_and_id();
    (
        a.kind.map_or("", |k| k.as_str()),
        a.name.as_deref().unwrap_or(""),
        node,
        id,
    )
}

/// `Kind/name`, or whichever half exists.
fn object_label(kind: &str, name: &str) -> String {
    match (kind.is_empty(), name.is_empty()) {
        (false, false) => format!("{kind}/{name}"),
        (false, true) => kind.to_owned(),
        (true, false) => name.to_owned(),
        (true, true) => "-".to_owned(),
    }
}

/// An empty identity part as `-`, so columns never collapse.
fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}
