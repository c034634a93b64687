//! Plan renderings: the text `proxops diff` prints, the stable JSON document
//! (`proxops-plan/v1`, described in `docs/plan-json.md`) and the Markdown a
//! pull-request comment carries; and what an apply did (`results_text`,
//! `results_json`) and the `proxops status` table (`status_table`).
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
//! Colour is an argument ([`Palette`]), never detected here: whether the
//! reader is a terminal is the binary's question.

mod json;
mod markdown;
mod printable;
mod results;
mod status;
mod text;

pub use json::{JSON_FORMAT, json, json_with_warnings};
pub use markdown::markdown;
pub use markdown::{MARKDOWN_LIMIT, markdown_within};
pub use printable::{printable, printable_plans};
pub use results::{results_json, results_text};
pub use status::status_table;
pub use text::{action_text, text, text_styled, text_with};

use crate::action::{Action, Anomaly, AnomalyType, Op, Skipped};
use crate::plan::Plan;

/// `s` on one line: every run of white space (new lines included) one
/// space, for a table cell or a log field.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// How the text plan is coloured: plain, or with ANSI SGR escapes (each
/// kind of item its colour, headings bold). The caller decides, from a
/// terminal, `NO_COLOR` and `--color`; the plan's words are the same
/// either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Palette {
    ansi: bool,
}

impl Palette {
    /// No escapes: for pipes, files and tests.
    pub const PLAIN: Palette = Palette { ansi: false };
    /// ANSI colours, for a terminal.
    pub const ANSI: Palette = Palette { ansi: true };

    /// [`Palette::ANSI`] when `colour`, else [`Palette::PLAIN`].
    pub fn new(colour: bool) -> Palette {
        Palette { ansi: colour }
    }

    /// `text` in the colour of `role`, or as it is when plain.
    fn paint(self, role: Role, text: &str) -> String {
        if !self.ansi || text.is_empty() {
            return text.to_owned();
        }
        format!("\x1b[{}m{text}\x1b[0m", role.sgr())
    }
}

/// What a piece of the text plan is, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Heading,
    Create,
    Update,
    Power,
    Prune,
    Anomaly,
    /// Deferred and skipped items: nothing happens to them.
    Quiet,
    /// The change that sets an action's impact.
    Cost,
}

impl Role {
    /// SGR parameters: green, yellow, cyan, red, magenta; bold, dim.
    fn sgr(self) -> &'static str {
        match self {
            Role::Heading => "1",
            Role::Create => "32",
            Role::Update => "33",
            Role::Power => "36",
            Role::Prune => "31",
            Role::Anomaly => "35",
            Role::Quiet => "2",
            Role::Cost => "1;31",
        }
    }

    fn of(group: Group) -> Role {
        match group {
            Group::Create => Role::Create,
            Group::Update => Role::Update,
            Group::Power => Role::Power,
            Group::Prune => Role::Prune,
        }
    }
}

/// What a plan (or all of them) would do, counted for the summary lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    create: usize,
    update: usize,
    power: usize,
    prune: usize,
    deferred: usize,
    /// Skipped work ([`Plan::skipped_work`]).
    skipped: usize,
    restart: usize,
    anomalies: usize,
}

impl Totals {
    /// What `plan` would do; an aborted plan does nothing.
    fn of(plan: &Plan) -> Totals {
        if plan.is_aborted() {
            return Totals::default();
        }
        let n = |g: Group| g.actions(plan).count();
        Totals {
            create: n(Group::Create),
            update: n(Group::Update),
            power: n(Group::Power),
            prune: n(Group::Prune),
            deferred: plan.deferred.len(),
            skipped: plan.skipped_work(),
            restart: plan
                .skipped
                .iter()
                .filter(|s| s.reason.is_pending_restart())
                .count(),
            anomalies: plan.anomalies.len(),
        }
    }

    fn sum<'a>(plans: impl IntoIterator<Item = &'a Plan>) -> Totals {
        plans.into_iter().fold(Totals::default(), |t, p| {
            let o = Totals::of(p);
            Totals {
                create: t.create + o.create,
                update: t.update + o.update,
                power: t.power + o.power,
                prune: t.prune + o.prune,
                deferred: t.deferred + o.deferred,
                skipped: t.skipped + o.skipped,
                restart: t.restart + o.restart,
                anomalies: t.anomalies + o.anomalies,
            }
        })
    }

    /// `4 to create, 1 to update, 3 to prune, 1 skipped, 2 need a person`:
    /// the counts that are not zero, or `no changes`.
    fn phrase(&self) -> String {
        let parts: Vec<String> = [
            (self.create, "to create", "to create"),
            (self.update, "to update", "to update"),
            (self.power, "power change", "power changes"),
            (self.prune, "to prune", "to prune"),
            (self.deferred, "prune deferred", "prunes deferred"),
            (self.skipped, "skipped", "skipped"),
            (self.restart, "waits for a restart", "wait for a restart"),
            (self.anomalies, "needs a person", "need a person"),
        ]
        .into_iter()
        .filter(|(n, _, _)| *n > 0)
        .map(|(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
        .collect();
        if parts.is_empty() {
            "no changes".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// One cluster's summary line: `lab: 4 to create, 1 to update`.
fn cluster_summary(plan: &Plan) -> String {
    if plan.is_aborted() {
        return format!("{}: aborted, nothing planned", plan.cluster);
    }
    format!("{}: {}", plan.cluster, Totals::of(plan).phrase())
}

/// The whole plan's total line: `Plan: 6 to create, … (2 clusters, 1
/// aborted)`. Aborted clusters count nothing, and are never said to have
/// no changes.
fn total_line(plans: &[&Plan]) -> String {
    let aborted = plans.iter().filter(|p| p.is_aborted()).count();
    let clusters = if plans.len() == 1 {
        "1 cluster".to_owned()
    } else {
        format!("{} clusters", plans.len())
    };
    let aborted = if aborted > 0 {
        format!(", {aborted} aborted")
    } else {
        String::new()
    };
    let totals = Totals::sum(plans.iter().copied());
    // "No changes" is a finding about a cluster that was read: one that
    // was not has no finding.
    let phrase = match plans.iter().filter(|p| p.is_aborted()).count() {
        0 => totals.phrase(),
        _ if totals != Totals::default() => totals.phrase(),
        n if n == plans.len() => "nothing planned, nothing read".to_owned(),
        _ => "no changes in the clusters read".to_owned(),
    };
    format!("Plan: {phrase} ({clusters}{aborted})")
}

/// The anomaly types in the order the renderings list them, each with a
/// heading that says what it holds.
const ANOMALY_SECTIONS: [(AnomalyType, &str); 5] = [
    (
        AnomalyType::DataLoss,
        "data loss refused (PVE would re-create a volume)",
    ),
    (
        AnomalyType::Shrink,
        "shrink refused (PVE cannot shrink a volume)",
    ),
    (AnomalyType::NeedsPerson, "needs a person"),
    (
        AnomalyType::LiveOnlySlot,
        "live-only slots (proxops will NOT auto-remove)",
    ),
    (
        AnomalyType::EmptyDesired,
        "prunes held (a kind has no manifest left)",
    ),
];

/// A change's PVE key, with the manifest field beside it where that is
/// another name: `memory (spec.memory)`.
fn field_label(c: &crate::action::Change) -> String {
    match &c.path {
        Some(p) if *p != c.field => format!("{} ({p})", c.field),
        _ => c.field.clone(),
    }
}

/// A change's value as the manifest would write it, for the human plans:
/// `memory` and `swap` are MiB to PVE (`2048`) and a size to the manifest
/// (`2GiB`); a new volume is `local-lvm:100,iothread=1` to PVE and `100GiB
/// on local-lvm, iothread=1` to a reader (an imported one `imported from
/// <volume> onto <storage>`); SSH keys are percent-encoded to PVE and
/// shown decoded, one key after another. Every other value, and any that
/// does not parse, is shown as PVE takes it; the JSON plan (and `diff
/// --verbose`, beside this form) always keeps PVE's form.
pub(crate) fn manifest_value(c: &crate::action::Change, value: &str) -> String {
    let in_mib = matches!(c.path.as_deref(), Some("spec.memory" | "spec.swap"));
    let volume = matches!(
        c.path.as_deref(),
        Some("spec.disks" | "spec.root" | "spec.mount-points")
    );
    match value.parse::<u64>() {
        Ok(mib) if in_mib && mib > 0 && mib % 1024 == 0 => format!("{}GiB", mib / 1024),
        Ok(mib) if in_mib => format!("{mib}MiB"),
        _ if volume => new_volume(value).unwrap_or_else(|| value.to_owned()),
        _ if c.field == "sshkeys" => proxops_model::wire::percent_decode(value)
            .map(|keys| {
                keys.lines()
                    .filter(|l| !l.trim().is_empty())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_else(|_| value.to_owned()),
        _ => value.to_owned(),
    }
}

/// `storage:GiB[,options]`, a volume PVE is to allocate, in a reader's
/// words; `None` for any other form (an existing volume, a CD-ROM).
fn new_volume(value: &str) -> Option<String> {
    let mut parts = value.split(',');
    let (storage, size) = parts.next()?.split_once(':')?;
    let gib: f64 = size.parse().ok()?;
    let mut from = None;
    let mut options = Vec::new();
    for part in parts {
        match part.split_once('=') {
            Some(("import-from", volume)) => from = Some(volume),
            Some(("media", _)) => return None,
            _ => options.push(part),
        }
    }
    let mut out = match from {
        Some(volume) => format!("imported from {volume} onto {storage}"),
        None if gib > 0.0 && gib.fract() == 0.0 => format!("{size}GiB on {storage}"),
        // PVE allocates fractions of a GiB (`0.5`): said in MiB.
        None if gib > 0.0 && (gib * 1024.0).fract() == 0.0 => {
            format!("{}MiB on {storage}", gib * 1024.0)
        }
        None => return None,
    };
    for option in options {
        out.push_str(", ");
        out.push_str(option);
    }
    Some(out)
}

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

#[cfg(test)]
mod tests {
    use super::manifest_value;
    use crate::action::Change;

    fn shown(field: &str, path: Option<&str>, value: &str) -> String {
        let mut c = Change::new(field, None, Some(value.to_owned()));
        c.path = path.map(str::to_owned);
        manifest_value(&c, value)
    }

    #[test]
    fn values_read_as_the_manifest_writes_them() {
        for (field, path, pve, reader) in [
            ("memory", Some("spec.memory"), "3072", "3GiB"),
            ("swap", Some("spec.swap"), "512", "512MiB"),
            (
                "scsi1",
                Some("spec.disks"),
                "local-lvm:100,iothread=1",
                "100GiB on local-lvm, iothread=1",
            ),
            (
                "virtio0",
                Some("spec.disks"),
                "local-lvm:0,import-from=local:import/debian.qcow2,discard=on",
                "imported from local:import/debian.qcow2 onto local-lvm, discard=on",
            ),
            (
                "rootfs",
                Some("spec.root"),
                "local-lvm:8",
                "8GiB on local-lvm",
            ),
            // An existing volume and a CD-ROM stay as PVE has them.
            (
                "scsi0",
                Some("spec.disks"),
                "local-lvm:vm-100-disk-0,size=32G",
                "local-lvm:vm-100-disk-0,size=32G",
            ),
            (
                "ide2",
                Some("spec.disks"),
                "local:iso/a.iso,media=cdrom",
                "local:iso/a.iso,media=cdrom",
            ),
            // Without a manifest path (an EFI disk's size is PVE's), as is.
            (
                "efidisk0",
                None,
                "local-lvm:1,efitype=4m",
                "local-lvm:1,efitype=4m",
            ),
            (
                "sshkeys",
                Some("spec.cloud-init.ssh-keys"),
                "ssh-ed25519%20AAAAC3Nz%20alice%40laptop%0Assh-ed25519%20AAAAC3Nz%20bob%0A",
                "ssh-ed25519 AAAAC3Nz alice@laptop, ssh-ed25519 AAAAC3Nz bob",
            ),
        ] {
            assert_eq!(shown(field, path, pve), reader, "{field} {pve}");
        }
    }
}
