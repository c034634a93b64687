//! Saved plans (`diff --out`, `apply --plan`): a plan together with what it
//! was computed from, so that exactly the reviewed actions run, or none.
//!
//! Owns the versioned JSON document ([`SavedPlan`], `format`
//! `proxops-saved-plan`, `version` 1), what a plan observed of every object its
//! actions touch ([`observe`]: a guest's config `digest`, a storage file's
//! presence, or absence), the comparison of that with a fresh read
//! ([`check`]), and the secret rule: a secret value is saved as its SOPS
//! reference ([`ParamValue::SecretRef`]) and resolved again from SOPS
//! before the actions run ([`resolve_secrets`]).
//!
//! Must never: write or accept a secret value in the document (serialising
//! a [`ParamValue::Secret`] is an error), re-plan, add or drop an action, or
//! do I/O (the binary reads and writes the file). Same plan and snapshot,
//! same bytes out.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::action::{Action, ParamValue, Params, Target, Work};
use crate::plan::Plan;
use proxops_model::live::LiveSnapshot;
use proxops_model::manifest::Spec;
use proxops_model::names::{ClusterName, NodeName, StorageId, Vmid};
use proxops_model::repo::ClusterDesired;
use proxops_translate::drift::CloudInitSecrets;

/// The `format` of a saved plan document.
pub const FORMAT: &str = "proxops-saved-plan";
/// The `version` this build writes and reads. Version 2: a shutdown, stop,
/// reboot, conversion or prune carries the config digest it must still
/// find, and a plan runs only when it is the one the planner makes again.
pub const VERSION: u32 = 2;

/// The prefix of a cloud-init password reference (spec §22.5).
const PASSWORD_REF: &str = "cloud-init.passwords.";

/// A saved plan: what `diff --out` writes and `apply --plan` executes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedPlan {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`] for this build.
    pub version: u32,
    /// The git commit (HEAD) of the repository the plan was computed from.
    pub commit: String,
    /// A digest of the desired-state files as read (uncommitted edits
    /// included), so an edited work tree on the same commit is told apart.
    pub tree: String,
    /// The planned clusters, sorted by name.
    pub clusters: Vec<SavedCluster>,
}

/// One cluster of a saved plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SavedCluster {
    pub cluster: ClusterName,
    /// What PVE showed of every object an action touches, sorted.
    pub observed: Vec<Observed>,
    /// The actions, in execution order, secrets as references.
    pub actions: Vec<Action>,
}

/// One object an action touches, and what was seen of it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observed {
    pub object: Touched,
    pub seen: Seen,
}

/// An object an action touches: a guest (ids are cluster-wide) or a file
/// in a node's storage.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Touched {
    Guest(Vmid),
    File {
        node: NodeName,
        storage: StorageId,
        /// The content type the file is listed under (`iso`, `vztmpl`, `import`).
        content: String,
        filename: String,
    },
    /// A cluster-level object (a pool, a backup job) by its PVE id.
    Cluster {
        kind: proxops_model::names::Kind,
        id: String,
    },
}

/// What was seen of a touched object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Seen {
    /// Not there.
    Absent,
    /// A storage file that is there.
    Present,
    /// A guest, on `node`, whose config carried `digest`.
    Guest {
        node: NodeName,
        digest: Option<String>,
    },
    /// A cluster-level object with every key PVE listed (these carry no
    /// digest of their own: any change of any key is a change).
    Object(std::collections::BTreeMap<String, String>),
    /// It could not be read: never taken as absence.
    Unreadable(String),
}

impl fmt::Display for Touched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Touched::Guest(v) => write!(f, "guest {v}"),
            Touched::File {
                node,
                storage,
                filename,
                ..
            } => write!(f, "file {storage}:{filename} on {node}"),
            Touched::Cluster { kind, id } => write!(f, "{kind} {id}"),
        }
    }
}

impl fmt::Display for Seen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Seen::Absent => f.write_str("absent"),
            Seen::Present => f.write_str("present"),
            Seen::Guest { node, digest } => write!(
                f,
                "on {node} with config digest {}",
                digest.as_deref().unwrap_or("(none)")
            ),
            Seen::Object(values) => write!(
                f,
                "present ({})",
                values
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Seen::Unreadable(why) => write!(f, "unreadable ({why})"),
        }
    }
}

/// A touched object that is no longer as the plan saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub cluster: ClusterName,
    pub object: Touched,
    pub then: Seen,
    pub now: Seen,
}

impl fmt::Display for Moved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cluster {}: {} changed since the plan was saved: then {}, now {}",
            self.cluster, self.object, self.then, self.now
        )
    }
}

/// Why a plan cannot be saved, read or made runnable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SavedPlanError {
    #[error("not a saved plan: line {line}, column {column}: {path}: {message}")]
    Invalid {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("not a saved plan: format is {found:?}, expected {FORMAT:?}")]
    Format { found: String },
    #[error(
        "saved plan version {found} is not supported by this build (it reads version {VERSION})"
    )]
    Version { found: u64 },
    #[error(
        "cluster {cluster}: {action} carries a secret ({key}) that has no SOPS reference; a plan holding it cannot be saved"
    )]
    UnreferencedSecret {
        cluster: ClusterName,
        action: String,
        key: String,
    },
    #[error(
        "cluster {cluster}: {action}: secret reference {reference:?} ({key}) does not resolve in the cluster's SOPS file"
    )]
    UnresolvedSecret {
        cluster: ClusterName,
        action: String,
        key: String,
        reference: String,
    },
    #[error("cannot write the saved plan: {0}")]
    Serialise(String),
}

/// Every object `actions` touch and what `live` shows of it, sorted and
/// without duplicates: the guest an action targets, the template a clone
/// copies, the storage file a download writes.
pub fn observe(actions: &[Action], live: &LiveSnapshot) -> Vec<Observed> {
    let mut out: Vec<Observed> = touched(actions)
        .into_iter()
        .map(|object| Observed {
            seen: seen(&object, live),
            object,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The touched objects of `saved` that `live` no longer shows as they
/// were. A touched object that cannot be read now counts as moved.
pub fn check(cluster: &ClusterName, saved: &[Observed], live: &LiveSnapshot) -> Vec<Moved> {
    saved
        .iter()
        .filter_map(|o| {
            let now = seen(&o.object, live);
            (now != o.seen || matches!(now, Seen::Unreadable(_))).then(|| Moved {
                cluster: cluster.clone(),
                object: o.object.clone(),
                then: o.seen.clone(),
                now,
            })
        })
        .collect()
}

/// The objects `actions` touch that `observed` says nothing of: a plan
/// file whose actions reach past what it recorded (edited by hand, or
/// damaged) cannot be checked against PVE, so it is refused.
pub fn unobserved(actions: &[Action], observed: &[Observed]) -> Vec<Touched> {
    let mut out: Vec<Touched> = touched(actions)
        .into_iter()
        .filter(|t| !observed.iter().any(|o| &o.object == t))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What makes `doc` unfit to review or run, read from the file alone: an
/// action that touches an object the file has no observation of (an
/// edited or damaged file), a cluster named twice. One line per problem;
/// empty when the document is whole.
pub fn damage(doc: &SavedPlan) -> Vec<String> {
    let mut out = Vec::new();
    for (i, c) in doc.clusters.iter().enumerate() {
        if doc.clusters[..i].iter().any(|o| o.cluster == c.cluster) {
            out.push(format!("cluster {} appears twice", c.cluster));
        }
        out.extend(unrecorded(c));
    }
    out
}

/// Why `c`'s actions cannot be checked against PVE: they touch objects it
/// has no observation of.
fn unrecorded(c: &SavedCluster) -> Option<String> {
    let missing = unobserved(&c.actions, &c.observed);
    if missing.is_empty() {
        return None;
    }
    let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
    Some(format!(
        "cluster {}: the plan's actions touch {} that it has no record of (an edited or damaged plan file)",
        c.cluster,
        names.join(", ")
    ))
}

/// How the saved `actions` differ from `fresh`, the ones the planner makes
/// now of the same commit and the PVE just read (made savable by
/// [`SavedCluster::new`], secrets as references): one line per action the
/// file holds that the planner does not make, makes otherwise, or per
/// action it makes that the file lacks. Empty when they are the same,
/// action for action, parameter for parameter, in the same order: the
/// only plan `apply --plan` runs.
pub fn divergence(saved: &[Action], fresh: &[Action]) -> Vec<String> {
    if saved == fresh {
        return Vec::new();
    }
    let same_subject = |a: &Action, b: &Action| {
        (a.op, a.kind, &a.name, &a.node, &a.target) == (b.op, b.kind, &b.name, &b.node, &b.target)
    };
    let mut out = Vec::new();
    for a in saved.iter().filter(|a| !fresh.contains(a)) {
        out.push(if fresh.iter().any(|f| same_subject(f, a)) {
            format!(
                "{}: the file's action differs from the one the planner makes now (its parameters, changes or order)",
                label(a)
            )
        } else {
            format!("{}: the planner does not make this action now", label(a))
        });
    }
    for f in fresh
        .iter()
        .filter(|f| !saved.contains(f) && !saved.iter().any(|a| same_subject(a, f)))
    {
        out.push(format!(
            "{}: the planner makes this action now and the file lacks it",
            label(f)
        ));
    }
    if out.is_empty() {
        out.push(format!(
            "the file holds {} action(s) in another order than the planner's {}",
            saved.len(),
            fresh.len()
        ));
    }
    out
}

/// Whether `saved` may run now, given `now` — the plan the planner makes
/// of the same commit's `desired` and the `live` state just read, under
/// the cluster's `policy` — and if so the plan to run: exactly the saved
/// actions. Refused, with every reason, when the actions reach past what
/// the file observed, a touched object moved, an action would take down
/// the guest this process runs in, the actions are not the planner's
/// ([`divergence`]), or one breaks a planner rule ([`crate::admit`]).
pub fn admit(
    saved: &SavedCluster,
    now: &Plan,
    desired: &ClusterDesired,
    live: &LiveSnapshot,
    policy: &crate::plan::Policy,
) -> Result<Plan, Vec<String>> {
    let cluster = &saved.cluster;
    if now.is_aborted() {
        return Err(vec![format!(
            "cluster {cluster}: {}",
            now.abort_reason().unwrap_or("the cluster aborted")
        )]);
    }
    let plan = saved.plan();
    if let Some(why) = unrecorded(saved) {
        return Err(vec![why]);
    }
    let moved = check(cluster, &saved.observed, live);
    if !moved.is_empty() {
        return Err(moved.iter().map(ToString::to_string).collect());
    }
    // Saved on another host, the plan may stop the guest this process
    // runs in: all or nothing, so the whole plan is refused.
    let mut guarded = plan.clone();
    crate::host::guard(&mut guarded, live, &policy.host);
    if guarded.actions.len() != plan.actions.len() {
        return Err(guarded
            .anomalies
            .iter()
            .filter(|an| an.anomaly == crate::action::AnomalyKind::SelfGuest)
            .map(|an| format!("cluster {cluster}: {}", an.message))
            .collect());
    }
    let fresh = SavedCluster::new(now, desired, live).map_err(|e| vec![e.to_string()])?;
    let diverged = divergence(&saved.actions, &fresh.actions);
    if !diverged.is_empty() {
        return Err(vec![format!(
            "cluster {cluster}: the plan is not the one the planner makes of this commit and PVE now: {}",
            diverged.join("; ")
        )]);
    }
    let mut checked = plan.clone();
    if crate::admit::guard(&mut checked, desired, policy) > 0 {
        return Err(checked
            .anomalies
            .iter()
            .map(|an| format!("cluster {cluster}: {}", an.message))
            .collect());
    }
    Ok(plan)
}

fn touched(actions: &[Action]) -> Vec<Touched> {
    let mut out = Vec::new();
    for a in actions {
        match &a.target {
            Target::Guest(v) => out.push(Touched::Guest(*v)),
            Target::File { storage, filename } => out.push(Touched::File {
                node: a.node.clone(),
                storage: storage.clone(),
                content: a.kind.content_type().unwrap_or("iso").to_owned(),
                filename: filename.clone(),
            }),
            Target::Cluster(id) => out.push(Touched::Cluster {
                kind: a.kind,
                id: id.clone(),
            }),
        }
        if let Work::CloneGuest { source, .. } = &a.work {
            out.push(Touched::Guest(*source));
        }
    }
    out
}

fn seen(object: &Touched, live: &LiveSnapshot) -> Seen {
    match object {
        Touched::Guest(vmid) => match live.guest_by_vmid(*vmid) {
            None => Seen::Absent,
            Some(g) => match &g.config {
                // Without a digest two reads cannot be told apart: never
                // equal, as an unreadable object is never unchanged.
                Ok(c) if c.digest.as_deref().is_none_or(str::is_empty) => {
                    Seen::Unreadable(format!(
                        "PVE's answer for guest {vmid} on {} carried no config digest, so a change since cannot be seen",
                        g.node
                    ))
                }
                Ok(c) => Seen::Guest {
                    node: g.node.clone(),
                    digest: c.digest.clone(),
                },
                Err(f) => Seen::Unreadable(f.to_string()),
            },
        },
        Touched::File {
            node,
            storage,
            content,
            filename,
        } => match live.storage_content(node, storage) {
            Some(Ok(c)) if c.has_file(content, filename) => Seen::Present,
            Some(Ok(_)) => Seen::Absent,
            Some(Err(f)) => Seen::Unreadable(f.to_string()),
            None => Seen::Unreadable(format!("storage {storage} on {node} was not read")),
        },
        Touched::Cluster { kind, id } => match live.cluster.listing(*kind) {
            Ok(l) => l
                .get(id)
                .map_or(Seen::Absent, |o| Seen::Object(o.values.clone())),
            Err(f) => Seen::Unreadable(f.to_string()),
        },
    }
}

impl SavedCluster {
    /// One cluster's plan made savable: its actions with every secret value
    /// replaced by its SOPS reference, and what `live` shows of every
    /// object they touch. A secret without a reference refuses the save.
    pub fn new(
        plan: &Plan,
        desired: &ClusterDesired,
        live: &LiveSnapshot,
    ) -> Result<SavedCluster, SavedPlanError> {
        let mut actions = plan.actions.clone();
        for a in &mut actions {
            let label = label(a);
            let object = a.object.clone();
            let Some(params) = params_mut(&mut a.work) else {
                continue;
            };
            for (key, value) in &mut params.0 {
                if !matches!(value, ParamValue::Secret(_)) {
                    continue;
                }
                let reference = object
                    .as_ref()
                    .and_then(|r| desired.get(r))
                    .and_then(|o| secret_reference(&o.spec, key))
                    .ok_or_else(|| SavedPlanError::UnreferencedSecret {
                        cluster: plan.cluster.clone(),
                        action: label.clone(),
                        key: key.clone(),
                    })?;
                *value = ParamValue::SecretRef(reference);
            }
        }
        Ok(SavedCluster {
            cluster: plan.cluster.clone(),
            observed: observe(&actions, live),
            actions,
        })
    }

    /// The plan to execute: exactly the saved actions, nothing skipped,
    /// deferred or anomalous (those were for the reviewer).
    pub fn plan(&self) -> Plan {
        Plan {
            cluster: self.cluster.clone(),
            abort: None,
            actions: self.actions.clone(),
            skipped: Vec::new(),
            deferred: Vec::new(),
            anomalies: Vec::new(),
            self_guests: Vec::new(),
            diagnostics: Vec::new(),
            rollout: Default::default(),
            not_considered: Vec::new(),
        }
    }
}

/// Replaces every secret reference in `actions` with its value from the
/// cluster's SOPS material. A reference that does not resolve is an error
/// and nothing may run.
pub fn resolve_secrets(
    cluster: &ClusterName,
    actions: &mut [Action],
    secrets: &CloudInitSecrets,
) -> Result<(), SavedPlanError> {
    for a in actions {
        let label = label(a);
        let Some(params) = params_mut(&mut a.work) else {
            continue;
        };
        for (key, value) in &mut params.0 {
            let ParamValue::SecretRef(reference) = value else {
                continue;
            };
            let secret = reference
                .strip_prefix(PASSWORD_REF)
                .and_then(|name| secrets.passwords.get(name))
                .filter(|s| !s.is_empty())
                .ok_or_else(|| SavedPlanError::UnresolvedSecret {
                    cluster: cluster.clone(),
                    action: label.clone(),
                    key: key.clone(),
                    reference: reference.clone(),
                })?;
            *value = ParamValue::Secret(secret.clone());
        }
    }
    Ok(())
}

/// The SOPS reference behind a secret form value: today only a VM's
/// `cipassword`, from `spec.cloud-init-data.ci-password-ref`.
fn secret_reference(spec: &Spec, key: &str) -> Option<String> {
    match (spec, key) {
        (Spec::Vm(vm) | Spec::TemplateVm(vm), "cipassword") => vm
            .cloud_init_data
            .as_ref()
            .and_then(|ci| ci.ci_password_ref.clone()),
        _ => None,
    }
}

/// The form values of a piece of work, if it has any.
fn params_mut(work: &mut Work) -> Option<&mut Params> {
    match work {
        Work::CreateGuest { params, .. }
        | Work::Download { params, .. }
        | Work::UpdateConfig { params, .. } => Some(params),
        Work::CloneGuest { config, .. } => Some(config),
        Work::ClusterWrite { params, .. } => Some(params),
        Work::Start { .. }
        | Work::Stop { .. }
        | Work::Reboot { .. }
        | Work::MarkTemplate { .. }
        | Work::Delete { .. }
        | Work::Resize { .. }
        | Work::Firewall { .. } => None,
    }
}

fn label(a: &Action) -> String {
    format!("{} {}/{} (id {})", a.op, a.kind, a.name, a.target)
}

/// Only `format` and `version`, read first so another version gets a clear
/// answer rather than a field error.
#[derive(Deserialize)]
struct Header {
    format: Option<String>,
    version: Option<u64>,
}

impl SavedPlan {
    /// A saved plan of `clusters` computed from `commit` and `tree`.
    pub fn new(commit: String, tree: String, mut clusters: Vec<SavedCluster>) -> SavedPlan {
        clusters.sort_by(|a, b| a.cluster.cmp(&b.cluster));
        SavedPlan {
            format: FORMAT.to_owned(),
            version: VERSION,
            commit,
            tree,
            clusters,
        }
    }

    /// The document: pretty JSON ending in a newline. Fails (rather than
    /// write it) if any action still holds a secret value.
    pub fn to_json(&self) -> Result<String, SavedPlanError> {
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| SavedPlanError::Serialise(e.to_string()))?;
        text.push('\n');
        Ok(text)
    }

    /// Reads a document: the right `format` and `version`, every field
    /// known and valid; errors name line, column and field path.
    pub fn from_json(text: &str) -> Result<SavedPlan, SavedPlanError> {
        let invalid = |e: serde_json::Error, path: String| SavedPlanError::Invalid {
            path,
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
        };
        let header: Header =
            serde_json::from_str(text).map_err(|e| invalid(e, "(document)".into()))?;
        match header.format.as_deref() {
            Some(FORMAT) => {}
            other => {
                return Err(SavedPlanError::Format {
                    found: other.unwrap_or("(missing)").to_owned(),
                });
            }
        }
        match header.version {
            Some(v) if v == u64::from(VERSION) => {}
            other => {
                return Err(SavedPlanError::Version {
                    found: other.unwrap_or(0),
                });
            }
        }
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            invalid(e.into_inner(), path)
        })
    }
}

/// serde_json appends ` at line L column C`; the error names them itself.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}
