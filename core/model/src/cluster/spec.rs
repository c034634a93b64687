//! The manifests of cluster-level objects (`Pool`, `BackupJob`,
//! `HAResource`, `HARule`, `ReplicationJob`), as an
//! operator writes them, and the rules one document alone must follow.
//! References to other manifests (a backup job's guests and pool) are the
//! composition's ([`crate::graph`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::diag::FieldError;
use crate::names::{Kind, NodeName, Ref, ResourceName, StorageId};

/// A resource pool (`/pools`): a named group of guests that permissions
/// can be granted on. Guests join it with their own `spec.pool`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PoolSpec {
    /// The PVE pool id, when it is not `metadata.name`: letters, digits,
    /// `.`, `-` and `_`, starting with a letter (nested pools `a/b` are not
    /// managed yet).
    #[schemars(extend("x-pve-key" = "poolid", "x-default" = "metadata.name", "x-impact" = "create-only"))]
    pub id: Option<String>,
    /// Free text shown in PVE; ProxOps appends its ownership marker
    /// (` [proxops]`) when writing it.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none (only the marker)", "x-impact" = "live"))]
    pub comment: Option<String>,
}

/// A scheduled backup job (`/cluster/backup`, PVE's jobs.cfg).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct BackupJobSpec {
    /// The PVE job id, when it is not `metadata.name`: a letter, then
    /// letters, digits, `-` and `_` (2-50 characters).
    #[schemars(extend("x-pve-key" = "id", "x-default" = "metadata.name", "x-impact" = "create-only"))]
    pub id: Option<String>,
    /// When the job runs: a systemd-like calendar event as PVE reads it
    /// (`21:00`, `mon..fri 02:30`, `*/15`, `daily`).
    #[schemars(extend("x-pve-key" = "schedule", "x-default" = "— (required)", "x-impact" = "live"))]
    pub schedule: String,
    /// The backup storage (absent: PVE's default, `local`).
    #[schemars(extend("x-pve-key" = "storage", "x-default" = "not sent (PVE: local)", "x-impact" = "live"))]
    pub storage: Option<StorageId>,
    /// The guests to back up, by manifest name (`web-01`, or `LXC:dns`
    /// where the name is not unique among the guest kinds). Exactly one of
    /// `guests`, `pool` and `all`.
    #[schemars(extend("x-pve-key" = "vmid", "x-default" = "none", "x-impact" = "live"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guests: Vec<String>,
    /// Every guest of this Pool manifest.
    #[schemars(extend("x-pve-key" = "pool", "x-default" = "none", "x-impact" = "live"))]
    pub pool: Option<ResourceName>,
    /// Every guest of the cluster (less `exclude`).
    #[schemars(extend("x-pve-key" = "all", "x-default" = "false", "x-impact" = "live"))]
    pub all: Option<bool>,
    /// With `all`: guests left out, by manifest name.
    #[schemars(extend("x-pve-key" = "exclude", "x-default" = "none", "x-impact" = "live"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Run on this node only (absent: every node backs up its own guests).
    #[schemars(extend("x-pve-key" = "node", "x-default" = "every node", "x-impact" = "live"))]
    pub node: Option<NodeName>,
    /// `snapshot`, `suspend` or `stop`.
    #[schemars(extend("x-pve-key" = "mode", "x-default" = "snapshot", "x-impact" = "live"))]
    #[schemars(transform = crate::schema_attrs::one_of(BACKUP_MODES))]
    pub mode: Option<String>,
    /// `none`, `lzo`, `gzip` or `zstd`.
    #[schemars(extend("x-pve-key" = "compress", "x-default" = "none", "x-impact" = "live"))]
    #[schemars(transform = crate::schema_attrs::one_of(BACKUP_COMPRESSIONS))]
    pub compress: Option<String>,
    /// How many backups to keep: `keep-last`, `keep-hourly`, `keep-daily`,
    /// `keep-weekly`, `keep-monthly`, `keep-yearly` (each at least 1), or
    /// `keep-all: 1` alone (absent: the storage's retention).
    #[schemars(extend("x-pve-key" = "prune-backups", "x-default" = "the storage's", "x-impact" = "live"))]
    pub retention: Option<BTreeMap<String, u32>>,
    /// `auto`, `legacy-sendmail` or `notification-system`.
    #[schemars(extend("x-pve-key" = "notification-mode", "x-default" = "auto", "x-impact" = "live"))]
    #[schemars(transform = crate::schema_attrs::one_of(NOTIFICATION_MODES))]
    pub notification_mode: Option<String>,
    /// `false` keeps the job without running it.
    #[schemars(extend("x-pve-key" = "enabled", "x-default" = "true", "x-impact" = "live"))]
    pub enabled: Option<bool>,
    /// Run a run missed while the node was off as soon as it is up.
    #[schemars(extend("x-pve-key" = "repeat-missed", "x-default" = "false", "x-impact" = "live"))]
    pub repeat_missed: Option<bool>,
    /// Free text shown in PVE (at most 494 characters: PVE keeps 512 with
    /// ProxOps' ownership marker).
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none (only the marker)", "x-impact" = "live"))]
    pub comment: Option<String>,
}

/// A guest the HA manager keeps running (`/cluster/ha/resources`); its
/// PVE id is the guest's, `vm:<vmid>` or `ct:<vmid>`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HaResourceSpec {
    /// The guest, by manifest name (`db-01`, or `LXC:dns` where the name is
    /// not unique among the guest kinds).
    #[schemars(extend("x-pve-key" = "sid", "x-default" = "— (required)", "x-impact" = "create-only"))]
    pub guest: String,
    /// The state the HA manager holds the guest in: `started`, `stopped`,
    /// `disabled` or `ignored`. Absent: not managed by ProxOps (PVE's
    /// default is `started`); the guest manifest's `spec.state` is what
    /// ProxOps asks the HA manager for when it powers the guest.
    #[schemars(extend("x-pve-key" = "state", "x-default" = "not managed (PVE: started)", "x-impact" = "live"))]
    #[schemars(transform = crate::schema_attrs::one_of(HA_STATES))]
    pub state: Option<String>,
    /// Restart attempts on the node before relocating.
    #[schemars(extend("x-pve-key" = "max_restart", "x-default" = "1", "x-impact" = "live"))]
    pub max_restart: Option<u32>,
    /// Relocation attempts after restarts failed.
    #[schemars(extend("x-pve-key" = "max_relocate", "x-default" = "1", "x-impact" = "live"))]
    pub max_relocate: Option<u32>,
    /// Move back to the preferred node when it is up again.
    #[schemars(extend("x-pve-key" = "failback", "x-default" = "true", "x-impact" = "live"))]
    pub failback: Option<bool>,
    /// Free text, one line (PVE refuses a line feed here), at most 4078
    /// characters; ProxOps appends ` [proxops]`.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none (only the marker)", "x-impact" = "live"))]
    pub comment: Option<String>,
}

/// A storage replication job (`/cluster/replication`, PVE's
/// replication.cfg): one guest's ZFS volumes copied to one other node on a
/// schedule. PVE names it `<vmid>-<n>` when it is created; ProxOps knows it
/// by its guest and target (PVE keeps one job per guest and target).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ReplicationJobSpec {
    /// The guest, by manifest name (`db-01`, or `LXC:dns` where the name is
    /// not unique among the guest kinds).
    #[schemars(extend("x-pve-key" = "id", "x-default" = "— (required)", "x-impact" = "create-only"))]
    pub guest: String,
    /// The node the guest's volumes are copied to; not the guest's own
    /// node (PVE never changes it once created).
    #[schemars(extend("x-pve-key" = "target", "x-default" = "— (required)", "x-impact" = "create-only"))]
    pub target: NodeName,
    /// When the job runs: a calendar event as PVE reads it (`*/15`,
    /// `mon..fri 02:30`, `hourly`).
    #[schemars(extend("x-pve-key" = "schedule", "x-default" = "*/15", "x-impact" = "live"))]
    pub schedule: Option<String>,
    /// Bandwidth limit in MB/s (at least 1; absent: unlimited).
    #[schemars(extend("x-pve-key" = "rate", "x-default" = "unlimited", "x-impact" = "live"))]
    pub rate: Option<f64>,
    /// `false` keeps the job without running it.
    #[schemars(extend("x-pve-key" = "disable", "x-default" = "true", "x-impact" = "live"))]
    pub enabled: Option<bool>,
    /// Free text shown in PVE, one line, at most 4078 characters; ProxOps
    /// appends ` [proxops]`.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none (only the marker)", "x-impact" = "live"))]
    pub comment: Option<String>,
}

/// A PVE 9 HA rule (`/cluster/ha/rules`): where the HA manager may run a
/// set of HA resources (`node-affinity`), or whether they run together or
/// apart (`resource-affinity`).
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HaRuleSpec {
    /// The PVE rule id, when it is not `metadata.name`: a letter, then
    /// letters, digits, `-` and `_`.
    #[schemars(extend("x-pve-key" = "rule", "x-default" = "metadata.name", "x-impact" = "create-only"))]
    pub id: Option<String>,
    /// `node-affinity` or `resource-affinity` (PVE never changes a rule's
    /// type).
    #[schemars(extend("x-pve-key" = "type", "x-default" = "— (required)", "x-impact" = "create-only"))]
    #[schemars(transform = crate::schema_attrs::one_of(HA_RULE_TYPES))]
    pub r#type: String,
    /// The HA resources the rule holds, by HAResource manifest name.
    #[schemars(extend("x-pve-key" = "resources", "x-default" = "— (required)", "x-impact" = "live"))]
    pub resources: Vec<ResourceName>,
    /// node-affinity: the nodes the resources may run on, each `node` or
    /// `node:priority` (higher first; absent priority is 0).
    #[schemars(extend("x-pve-key" = "nodes", "x-default" = "— (required for node-affinity)", "x-impact" = "live"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// node-affinity: `true` runs the resources only on `nodes`, never
    /// elsewhere.
    #[schemars(extend("x-pve-key" = "strict", "x-default" = "false", "x-impact" = "live"))]
    pub strict: Option<bool>,
    /// resource-affinity: `positive` (together) or `negative` (apart).
    #[schemars(extend("x-pve-key" = "affinity", "x-default" = "— (required for resource-affinity)", "x-impact" = "live"))]
    #[schemars(transform = crate::schema_attrs::one_of(HA_AFFINITIES))]
    pub affinity: Option<String>,
    /// `false` keeps the rule without the HA manager applying it.
    #[schemars(extend("x-pve-key" = "disable", "x-default" = "true", "x-impact" = "live"))]
    pub enabled: Option<bool>,
    /// Free text shown in PVE, at most 4078 characters; ProxOps appends
    /// ` [proxops]`.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none (only the marker)", "x-impact" = "live"))]
    pub comment: Option<String>,
}

/// pve-ha-manager `HA/Rules/NodeAffinity.pm` and `ResourceAffinity.pm`
/// `type`.
pub const HA_RULE_TYPES: &[&str] = &["node-affinity", "resource-affinity"];
/// `ResourceAffinity.pm` `affinity`.
pub const HA_AFFINITIES: &[&str] = &["positive", "negative"];

/// pve-ha-manager `HA/Resources.pm` `$resource_state_schema`.
pub const HA_STATES: &[&str] = &["started", "stopped", "disabled", "ignored"];

/// pve-manager `PVE/VZDump.pm` `$confdesc`: `mode`.
pub const BACKUP_MODES: &[&str] = &["snapshot", "suspend", "stop"];
/// `compress` (`1` is PVE's old spelling of `lzo`).
pub const BACKUP_COMPRESSIONS: &[&str] = &["none", "lzo", "gzip", "zstd"];
/// `notification-mode`.
pub const NOTIFICATION_MODES: &[&str] = &["auto", "legacy-sendmail", "notification-system"];
/// pve-storage `PVE/Storage/Plugin.pm` `$prune_backups_format`.
pub const RETENTION_KEYS: &[&str] = &[
    "keep-all",
    "keep-last",
    "keep-hourly",
    "keep-daily",
    "keep-weekly",
    "keep-monthly",
    "keep-yearly",
];

/// pve-access-control `PVE/AccessControl.pm` `verify_poolname` (one
/// level: nested pools are not managed) and `API2/Pool.pm`
/// `create_pool`'s "pool name must start with a letter".
pub fn check_pool_id(id: &str) -> Result<(), String> {
    let ok = id.starts_with(|c: char| c.is_ascii_alphabetic())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid pool id {id:?}: use a letter, then letters, digits, '.', '-' and '_' (PVE's pool names; nested pools are not managed)"
        ))
    }
}

/// pve-common `PVE/JSONSchema.pm` `pve_verify_configid`:
/// `^[a-z][a-z0-9_-]+$`, any case.
fn is_configid(id: &str) -> bool {
    id.len() >= 2
        && id.starts_with(|c: char| c.is_ascii_alphabetic())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// A configuration id, and `pve-backup-jobid`'s 50
/// characters (pve-manager `API2/Backup.pm`).
pub fn check_job_id(id: &str) -> Result<(), String> {
    if id.len() <= 50 && is_configid(id) {
        Ok(())
    } else {
        Err(format!(
            "invalid job id {id:?}: use 2-50 characters, a letter then letters, digits, '-' and '_' (PVE's configuration ids)"
        ))
    }
}

/// PVE keeps a comment of these objects without surrounding blanks
/// (section-config values are trimmed on read), and ProxOps' marker ends
/// it: a comment that starts or ends with a blank, or holds the marker's
/// own text, would never read back as written.
fn check_comment(comment: Option<&str>, max: usize, errs: &mut Vec<FieldError>) {
    let Some(c) = comment else { return };
    let path = "spec.comment";
    if c.trim() != c || c.is_empty() {
        errs.push(FieldError::new(
            path,
            "a comment may not be empty or start or end with a blank: PVE trims it, so it would never read back as written",
        ));
    }
    if c.contains(crate::cluster::mark::MARK_PREFIX) {
        errs.push(FieldError::new(
            path,
            format!(
                "a comment may not hold {:?}: ProxOps writes its ownership marker there itself",
                crate::cluster::mark::MARK_PREFIX
            ),
        ));
    }
    if c.chars().count() > max {
        errs.push(FieldError::new(
            path,
            format!("a comment of {} characters is too long: PVE keeps {} with ProxOps' marker, so at most {max}", c.chars().count(), max + crate::cluster::mark::LONGEST_MARK.len()),
        ));
    }
}

/// The id checked where it comes from: `spec.id`, else `metadata.name`.
fn check_id(
    name: &ResourceName,
    id: Option<&String>,
    check: fn(&str) -> Result<(), String>,
    errs: &mut Vec<FieldError>,
) {
    let (path, id) = match id {
        Some(id) => ("spec.id", id.as_str()),
        None => ("metadata.name", name.as_str()),
    };
    if let Err(e) = check(id) {
        let hint = if path == "metadata.name" {
            "; set spec.id to the PVE id"
        } else {
            ""
        };
        errs.push(FieldError::new(path, format!("{e}{hint}")));
    }
}

pub(crate) fn validate_pool(name: &ResourceName, s: &PoolSpec, errs: &mut Vec<FieldError>) {
    check_id(name, s.id.as_ref(), check_pool_id, errs);
    check_comment(s.comment.as_deref(), usize::MAX / 2, errs);
}

pub(crate) fn validate_backup_job(
    name: &ResourceName,
    s: &BackupJobSpec,
    errs: &mut Vec<FieldError>,
) {
    check_id(name, s.id.as_ref(), check_job_id, errs);
    check_schedule(&s.schedule, errs);
    let selections = usize::from(!s.guests.is_empty())
        + usize::from(s.pool.is_some())
        + usize::from(s.all == Some(true));
    if selections != 1 {
        errs.push(FieldError::new(
            "spec",
            "a backup job selects its guests with exactly one of spec.guests, spec.pool and spec.all: true",
        ));
    }
    for (list, path) in [(&s.guests, "spec.guests"), (&s.exclude, "spec.exclude")] {
        for (i, text) in list.iter().enumerate() {
            if parse_guest_ref(text, |_| true).is_none() {
                errs.push(FieldError::new(
                    format!("{path}[{i}]"),
                    format!("invalid guest reference {text:?}: use a guest manifest's name (web-01) or Kind:name (LXC:dns) with Kind one of VM, LXC, TemplateVM, TemplateCT"),
                ));
            }
        }
    }
    if !s.exclude.is_empty() && s.all != Some(true) {
        errs.push(FieldError::new(
            "spec.exclude",
            "spec.exclude only applies with spec.all: true (PVE ignores it otherwise)",
        ));
    }
    one_of("spec.mode", s.mode.as_deref(), BACKUP_MODES, errs);
    one_of(
        "spec.compress",
        s.compress.as_deref(),
        BACKUP_COMPRESSIONS,
        errs,
    );
    one_of(
        "spec.notification-mode",
        s.notification_mode.as_deref(),
        NOTIFICATION_MODES,
        errs,
    );
    if let Some(keep) = &s.retention {
        check_retention(keep, errs);
    }
    check_comment(
        s.comment.as_deref(),
        512 - crate::cluster::mark::LONGEST_MARK.len(),
        errs,
    );
}

/// pve-common `PVE/CalendarEvent.pm` `pve_verify_calendar_event` (the
/// grammar in [`crate::calendar`]) and the 128 characters of a job's
/// `schedule` (pve-guest-common `ReplicationConfig.pm`, pve-manager
/// `API2/Backup.pm`).
fn check_schedule(schedule: &str, errs: &mut Vec<FieldError>) {
    if schedule.trim() != schedule {
        errs.push(FieldError::new(
            "spec.schedule",
            "a schedule may not start or end with a blank",
        ));
    } else if schedule.len() > 128 {
        errs.push(FieldError::new(
            "spec.schedule",
            "a schedule is at most 128 characters (PVE's pve-calendar-event)",
        ));
    } else if let Err(e) = crate::calendar::check(schedule) {
        errs.push(FieldError::new(
            "spec.schedule",
            format!("invalid schedule {schedule:?}: PVE refuses it ({e}); use a calendar event such as \"21:00\", \"mon..fri 02:30\" or \"*/15\""),
        ));
    }
}

fn one_of(path: &str, value: Option<&str>, allowed: &[&str], errs: &mut Vec<FieldError>) {
    if let Some(v) = value
        && !allowed.contains(&v)
    {
        errs.push(FieldError::new(
            path,
            format!("invalid value {v:?}: use one of {}", allowed.join(", ")),
        ));
    }
}

/// pve-storage `Plugin.pm` `validate_prune_backups`: `keep-all` alone;
/// PVE turns a retention of only zeros into `keep-all`, so each keep is at
/// least 1.
fn check_retention(keep: &BTreeMap<String, u32>, errs: &mut Vec<FieldError>) {
    let path = "spec.retention";
    for (k, v) in keep {
        if !RETENTION_KEYS.contains(&k.as_str()) {
            errs.push(FieldError::new(
                format!("{path}.{k}"),
                format!("unknown retention {k:?}: use {}", RETENTION_KEYS.join(", ")),
            ));
        } else if k == "keep-all" && *v != 1 {
            errs.push(FieldError::new(
                format!("{path}.{k}"),
                "keep-all is 1 (keep every backup); leave it out otherwise",
            ));
        } else if *v == 0 {
            errs.push(FieldError::new(
                format!("{path}.{k}"),
                "keep at least 1 (PVE reads a retention of zeros as keep-all)",
            ));
        }
    }
    if keep.contains_key("keep-all") && keep.len() > 1 {
        errs.push(FieldError::new(
            path,
            "keep-all cannot be set together with other options (PVE refuses it)",
        ));
    }
    if keep.is_empty() {
        errs.push(FieldError::new(
            path,
            "an empty retention: leave spec.retention out to use the storage's",
        ));
    }
}

pub(crate) fn validate_ha_resource(s: &HaResourceSpec, errs: &mut Vec<FieldError>) {
    if parse_guest_ref(&s.guest, |_| true).is_none() {
        errs.push(FieldError::new(
            "spec.guest",
            format!("invalid guest reference {:?}: use a guest manifest's name (db-01) or Kind:name (LXC:dns)", s.guest),
        ));
    }
    one_of("spec.state", s.state.as_deref(), HA_STATES, errs);
    one_line_comment(s.comment.as_deref(), "an HA resource's", errs);
    check_comment(
        s.comment.as_deref(),
        4096 - crate::cluster::mark::LONGEST_MARK.len(),
        errs,
    );
}

/// pve-guest-common `ReplicationConfig.pm` `$defaultData`: `rate` a number
/// of at least 1, `comment` at most 4096 characters, `schedule` a
/// `pve-calendar-event`.
pub(crate) fn validate_replication_job(s: &ReplicationJobSpec, errs: &mut Vec<FieldError>) {
    if parse_guest_ref(&s.guest, |_| true).is_none() {
        errs.push(FieldError::new(
            "spec.guest",
            format!("invalid guest reference {:?}: use a guest manifest's name (db-01) or Kind:name (LXC:dns)", s.guest),
        ));
    }
    if let Some(schedule) = &s.schedule {
        check_schedule(schedule, errs);
    }
    if let Some(rate) = s.rate
        && !(rate.is_finite() && rate >= 1.0)
    {
        errs.push(FieldError::new(
            "spec.rate",
            format!("invalid rate {rate}: PVE takes at least 1 (MB/s); leave it out for no limit"),
        ));
    }
    one_line_comment(s.comment.as_deref(), "a replication job's", errs);
    check_comment(
        s.comment.as_deref(),
        4096 - crate::cluster::mark::LONGEST_MARK.len(),
        errs,
    );
}

/// pve-common `SectionConfig.pm` `check_value`: "property contains a line
/// feed".
fn one_line_comment(comment: Option<&str>, whose: &str, errs: &mut Vec<FieldError>) {
    if comment.is_some_and(|c| c.contains(['\n', '\r'])) {
        errs.push(FieldError::new(
            "spec.comment",
            format!("{whose} comment is one line: PVE refuses a line feed (\"property contains a line feed\")"),
        ));
    }
}

/// One `nodes` entry of a node-affinity rule: pve-ha-manager `HA/Tools.pm`
/// `parse_node_priority` (`node[:priority]`, the priority a non-negative
/// integer, 0 when absent).
pub fn parse_node_priority(text: &str) -> Option<(NodeName, u32)> {
    let (node, prio) = match text.split_once(':') {
        Some((n, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            (n, p.parse().ok()?)
        }
        Some(_) => return None,
        None => (text, 0),
    };
    Some((NodeName::new(node).ok()?, prio))
}

pub(crate) fn validate_ha_rule(name: &ResourceName, s: &HaRuleSpec, errs: &mut Vec<FieldError>) {
    check_id(name, s.id.as_ref(), check_rule_id, errs);
    one_of("spec.type", Some(&s.r#type), HA_RULE_TYPES, errs);
    one_of("spec.affinity", s.affinity.as_deref(), HA_AFFINITIES, errs);
    if s.resources.is_empty() {
        // `API2/HA/Rules.pm` `$assert_valid_resources_param`.
        errs.push(FieldError::new(
            "spec.resources",
            "an HA rule holds at least one HA resource (PVE refuses \"no resources were specified\")",
        ));
    }
    let mut seen = Vec::new();
    for (i, text) in s.nodes.iter().enumerate() {
        match parse_node_priority(text) {
            None => errs.push(FieldError::new(
                format!("spec.nodes[{i}]"),
                format!("invalid node {text:?}: use a node name, or node:priority with a whole number (pve1:2)"),
            )),
            Some((n, _)) if seen.contains(&n) => errs.push(FieldError::new(
                format!("spec.nodes[{i}]"),
                format!("node {n} is listed twice"),
            )),
            Some((n, _)) => seen.push(n),
        }
    }
    match s.r#type.as_str() {
        "node-affinity" => node_affinity_fields(s, errs),
        "resource-affinity" => resource_affinity_fields(s, errs),
        _ => {}
    }
    check_comment(
        s.comment.as_deref(),
        4096 - crate::cluster::mark::LONGEST_MARK.len(),
        errs,
    );
}

fn node_affinity_fields(s: &HaRuleSpec, errs: &mut Vec<FieldError>) {
    if s.nodes.is_empty() {
        errs.push(FieldError::new(
            "spec.nodes",
            "a node-affinity rule lists the nodes its resources may run on (PVE requires nodes)",
        ));
    }
    if s.affinity.is_some() {
        errs.push(FieldError::new(
            "spec.affinity",
            "affinity belongs to resource-affinity rules; a node-affinity rule lists spec.nodes",
        ));
    }
}

/// `HA/Rules/ResourceAffinity.pm` `check_resource_affinity_resources_count`:
/// "rule is ineffective as there are less than two resources".
fn resource_affinity_fields(s: &HaRuleSpec, errs: &mut Vec<FieldError>) {
    if s.affinity.is_none() {
        errs.push(FieldError::new(
            "spec.affinity",
            "a resource-affinity rule says positive (together) or negative (apart)",
        ));
    }
    if !s.nodes.is_empty() || s.strict.is_some() {
        errs.push(FieldError::new(
            if s.nodes.is_empty() {
                "spec.strict"
            } else {
                "spec.nodes"
            },
            "nodes and strict belong to node-affinity rules",
        ));
    }
    if s.resources.len() < 2 {
        errs.push(FieldError::new(
            "spec.resources",
            "a resource-affinity rule needs at least two HA resources (PVE: \"rule is ineffective as there are less than two resources\")",
        ));
    }
}

/// pve-common `PVE/JSONSchema.pm` `pve_verify_configid`
/// (`^[a-z][a-z0-9_-]+$`, any case): an HA rule's id (`API2/HA/Rules.pm`).
pub fn check_rule_id(id: &str) -> Result<(), String> {
    if is_configid(id) {
        Ok(())
    } else {
        Err(format!(
            "invalid rule id {id:?}: use 2 or more characters, a letter then letters, digits, '-' and '_' (PVE's configuration ids)"
        ))
    }
}

/// The guest kinds a bare guest name is looked up in, in this order.
pub const GUEST_KINDS: [Kind; 4] = [Kind::VM, Kind::LXC, Kind::TemplateVM, Kind::TemplateCT];

/// A guest reference (`Kind:name`, or a bare name looked up among
/// [`GUEST_KINDS`]) over any set of manifests (`exists`).
pub fn parse_guest_ref(text: &str, exists: impl Fn(&Ref) -> bool) -> Option<Ref> {
    if let Some((kind, name)) = text.split_once(':') {
        let kind = Kind::parse(kind.trim()).filter(|k| k.is_guest())?;
        let name = ResourceName::new(name.trim()).ok()?;
        return Some(Ref { kind, name });
    }
    let name = ResourceName::new(text.trim()).ok()?;
    GUEST_KINDS
        .into_iter()
        .map(|kind| Ref {
            kind,
            name: name.clone(),
        })
        .find(|r| exists(r))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rule(kind: &str, resources: &[&str], nodes: &[&str]) -> HaRuleSpec {
        HaRuleSpec {
            id: None,
            r#type: kind.to_owned(),
            resources: resources
                .iter()
                .filter_map(|r| ResourceName::new(r).ok())
                .collect(),
            nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
            strict: None,
            affinity: None,
            enabled: None,
            comment: None,
        }
    }

    fn paths(s: &HaRuleSpec) -> Vec<String> {
        let mut errs = Vec::new();
        validate_ha_rule(&ResourceName::new("r1").unwrap(), s, &mut errs);
        errs.into_iter().map(|e| e.path).collect()
    }

    /// pve-ha-manager `HA/Tools.pm` `parse_node_priority`.
    #[test]
    fn node_entries_read_as_pve_reads_them() {
        assert_eq!(
            parse_node_priority("pve1:2").map(|(n, p)| (n.to_string(), p)),
            Some(("pve1".to_owned(), 2))
        );
        assert_eq!(parse_node_priority("pve2").map(|(_, p)| p), Some(0));
        assert!(parse_node_priority("pve1:").is_none());
        assert!(parse_node_priority("pve1:-1").is_none());
    }

    /// `HA/Rules/ResourceAffinity.pm`
    /// `check_resource_affinity_resources_count`, and the fields of each
    /// rule type (`NodeAffinity.pm`/`ResourceAffinity.pm` `options`).
    #[test]
    fn each_rule_type_takes_its_own_fields() {
        assert!(paths(&rule("node-affinity", &["db"], &["pve1:2", "pve2"])).is_empty());
        assert_eq!(paths(&rule("node-affinity", &["db"], &[])), ["spec.nodes"]);
        assert_eq!(
            paths(&rule("node-affinity", &["db"], &["pve1", "pve1:3"])),
            ["spec.nodes[1]"]
        );
        let mut apart = rule("resource-affinity", &["db"], &[]);
        apart.affinity = Some("negative".into());
        assert_eq!(paths(&apart), ["spec.resources"]);
        let mut together = rule("resource-affinity", &["db", "web"], &["pve1"]);
        together.affinity = None;
        assert_eq!(paths(&together), ["spec.affinity", "spec.nodes"]);
    }
}
