//! The plan as a JSON document, schema `proxops-plan/v1`
//! (`docs/plan-json.md`).
//!
//! The document is built from explicit structs below rather than from the
//! plan types' own `Serialize`, so a change to the plan types cannot rename
//! or drop a key that tools depend on. Within v1 keys may be added, never
//! renamed or removed. Keys appear in declaration order.

use serde::Serialize;

use crate::action::{Action, Anomaly, Change, Skipped, Target};
use crate::plan::Plan;
use proxops_model::diag::Diagnostic;

/// The value of the document's `format` key.
pub const JSON_FORMAT: &str = "proxops-plan/v1";

/// The plans as one pretty-printed `proxops-plan/v1` document, clusters
/// sorted by name, ending in a newline, with an empty `warnings` list.
pub fn json(plans: &[Plan]) -> String {
    json_with_warnings(plans, &[])
}

/// [`json`] with the repository's warnings (e.g. manifest files no
/// composition lists), sorted, in the document's `warnings` list.
pub fn json_with_warnings(plans: &[Plan], warnings: &[Diagnostic]) -> String {
    let mut sorted: Vec<&Plan> = plans.iter().collect();
    sorted.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    let mut warned: Vec<&Diagnostic> = warnings.iter().collect();
    warned.sort();
    warned.dedup();
    let doc = Document {
        format: JSON_FORMAT,
        clusters: sorted.into_iter().map(cluster).collect(),
        warnings: warned
            .into_iter()
            .map(|d| WarningDoc {
                file: &d.file,
                message: &d.message,
            })
            .collect(),
    };
    // Serialising these structs cannot fail: every key is a string and no
    // value is a map with non-string keys or a failing Serialize impl.
    let mut out = serde_json::to_string_pretty(&doc).unwrap_or_default();
    out.push('\n');
    out
}

#[derive(Serialize)]
struct Document<'a> {
    format: &'static str,
    clusters: Vec<ClusterDoc<'a>>,
    warnings: Vec<WarningDoc<'a>>,
}

/// Something about the repository a person should know that refuses
/// nothing.
#[derive(Serialize)]
struct WarningDoc<'a> {
    file: &'a str,
    message: &'a str,
}

#[derive(Serialize)]
struct ClusterDoc<'a> {
    name: &'a str,
    aborted: bool,
    abort_reason: Option<&'a str>,
    actions: Vec<ActionDoc<'a>>,
    skipped: Vec<SkippedDoc<'a>>,
    deferred: Vec<ActionDoc<'a>>,
    anomalies: Vec<AnomalyDoc<'a>>,
    rollout: RolloutDoc<'a>,
    /// Added within v1: what `--target` left out of the plan, as
    /// `{kind, name}`; absent when nothing was.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_considered: Vec<NotConsideredDoc<'a>>,
}

#[derive(Serialize)]
struct NotConsideredDoc<'a> {
    kind: &'static str,
    name: &'a str,
}

/// How the actions roll out: how many waves (actions of one wave may run
/// at once), how many guests are made unavailable, how many at a time.
#[derive(Serialize)]
struct RolloutDoc<'a> {
    waves: usize,
    disruptive: usize,
    at_once: usize,
    groups: Vec<GroupDoc<'a>>,
}

#[derive(Serialize)]
struct GroupDoc<'a> {
    group: &'a str,
    disruptive: usize,
    at_once: usize,
}

#[derive(Serialize)]
struct ActionDoc<'a> {
    /// The wave the action may start in (actions of one wave run at once,
    /// within the limits); absent for deferred actions, which do not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    wave: Option<usize>,
    action: &'static str,
    kind: &'static str,
    name: &'a str,
    node: &'a str,
    id: Id,
    impact: &'static str,
    reason: &'a str,
    changes: Vec<ChangeDoc<'a>>,
}

#[derive(Serialize)]
struct ChangeDoc<'a> {
    field: &'a str,
    from: Option<&'a str>,
    to: Option<&'a str>,
    /// Added within v1: the manifest field that asks for the change
    /// (`spec.memory`), `null` when none does.
    path: Option<&'a str>,
    /// Added within v1: what this change alone costs the running guest
    /// (`live`, `reboot`, `stop-start`), `null` where it has none (a
    /// create).
    impact: Option<&'static str>,
}

#[derive(Serialize)]
struct SkippedDoc<'a> {
    kind: &'static str,
    name: Option<&'a str>,
    node: Option<&'a str>,
    id: Id,
    reason: String,
}

#[derive(Serialize)]
struct AnomalyDoc<'a> {
    #[serde(rename = "type")]
    anomaly_type: &'static str,
    kind: Option<&'static str>,
    name: Option<&'a str>,
    node: Option<&'a str>,
    id: Id,
    field: Option<&'a str>,
    message: &'a str,
}

/// A guest's vmid as a number, a storage file as `storage:filename`, or
/// `null` when the item has no target (a cluster-wide anomaly).
#[derive(Serialize)]
#[serde(untagged)]
enum Id {
    Vmid(u32),
    File(String),
    Null,
}

impl Id {
    fn of_target(t: &Target) -> Id {
        match t {
            Target::Guest(v) => Id::Vmid(v.get()),
            Target::File { .. } | Target::Cluster(_) => Id::File(t.to_string()),
        }
    }
}

fn non_empty(s: &str) -> Option<&str> {
    if s.is_empty() { None } else { Some(s) }
}

fn cluster(plan: &Plan) -> ClusterDoc<'_> {
    ClusterDoc {
        name: plan.cluster.as_str(),
        aborted: plan.aborted,
        abort_reason: plan.abort_reason.as_deref(),
        actions: plan
            .actions
            .iter()
            .enumerate()
            .map(|(i, a)| action(a, plan.rollout.waves.get(i).copied()))
            .collect(),
        skipped: plan.skipped.iter().map(skipped).collect(),
        deferred: plan.deferred.iter().map(|a| action(a, None)).collect(),
        anomalies: plan.anomalies.iter().map(anomaly).collect(),
        rollout: RolloutDoc {
            waves: plan.rollout.waves.iter().max().map_or(0, |w| w + 1),
            disruptive: plan.rollout.disruptive,
            at_once: plan.rollout.at_once,
            groups: plan
                .rollout
                .groups
                .iter()
                .map(|g| GroupDoc {
                    group: &g.group,
                    disruptive: g.disruptive,
                    at_once: g.at_once,
                })
                .collect(),
        },
        not_considered: plan
            .not_considered
            .iter()
            .map(|o| NotConsideredDoc {
                kind: o.kind.as_str(),
                name: &o.name,
            })
            .collect(),
    }
}

fn action(a: &Action, wave: Option<usize>) -> ActionDoc<'_> {
    ActionDoc {
        wave,
        action: a.op.as_str(),
        kind: a.kind.as_str(),
        name: &a.name,
        node: a.node.as_str(),
        id: Id::of_target(&a.target),
        impact: a.impact.as_str(),
        reason: &a.reason,
        changes: a.changes.iter().map(change).collect(),
    }
}

fn change(c: &Change) -> ChangeDoc<'_> {
    ChangeDoc {
        field: &c.field,
        from: c.from.as_deref(),
        to: c.to.as_deref(),
        path: c.path.as_deref(),
        impact: c.impact.map(crate::action::Impact::as_str),
    }
}

fn skipped(s: &Skipped) -> SkippedDoc<'_> {
    SkippedDoc {
        kind: s.kind.as_str(),
        name: non_empty(&s.name),
        node: non_empty(s.node.as_str()),
        id: Id::of_target(&s.id),
        reason: s.reason.to_string(),
    }
}

fn anomaly(a: &Anomaly) -> AnomalyDoc<'_> {
    AnomalyDoc {
        anomaly_type: a.anomaly_type.as_str(),
        kind: a.kind.map(|k| k.as_str()),
        name: a.name.as_deref().and_then(non_empty),
        node: a.node.as_ref().map(|n| n.as_str()),
        id: a.id.as_ref().map_or(Id::Null, Id::of_target),
        field: a.field.as_deref(),
        message: &a.message,
    }
}
