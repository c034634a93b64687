//! The PVE keys a cluster-level manifest owns, as rows: the key, the
//! manifest field, the desired wire value and what PVE holds when the
//! manifest leaves the field out. The create form, the drift and adoption
//! are folds over these rows ([`super::plan`], [`super::adopt`]).

use proxops_model::manifest::Spec;
use proxops_model::names::{Kind, Ref, ResourceName, Vmid};
use proxops_model::repo::{ClusterDesired, DesiredObject};

pub use proxops_model::cluster::spec::{GUEST_KINDS, parse_guest_ref};
pub use proxops_model::desired::{guest_ref, ha_sid, id_of, pool_id};

/// One owned key of one manifest.
#[derive(Debug, Clone)]
pub struct Row {
    pub key: &'static str,
    pub path: &'static str,
    /// The wire value the manifest asks for; `None`: the field is absent.
    pub want: Option<String>,
    /// With the field absent, the value PVE reads as its default (the
    /// object may hold it); any other live value is deleted (`delete=`).
    /// `None`: PVE must not hold the key at all.
    pub default: Option<&'static str>,
    /// PVE's equivalence of two wire values of this key.
    pub same: fn(&str, &str) -> bool,
    /// With the field absent, the key is not ProxOps' (never deleted).
    pub kept_when_absent: bool,
    /// PVE never changes it once created: a drift is a person's to
    /// resolve, never an update.
    pub fixed: bool,
    /// Sent with every update, changed or not (PVE requires it there).
    pub always_sent: bool,
}

impl Row {
    fn new(key: &'static str, path: &'static str, want: Option<String>) -> Row {
        Row {
            key,
            path,
            want,
            default: None,
            same: same_text,
            kept_when_absent: false,
            fixed: false,
            always_sent: false,
        }
    }

    fn fixed(mut self) -> Row {
        self.fixed = true;
        self
    }

    fn always_sent(mut self) -> Row {
        self.always_sent = true;
        self
    }

    fn kept_when_absent(mut self) -> Row {
        self.kept_when_absent = true;
        self
    }

    fn default(mut self, value: &'static str) -> Row {
        self.default = Some(value);
        self
    }

    fn same(mut self, f: fn(&str, &str) -> bool) -> Row {
        self.same = f;
        self
    }

    /// What must change: `Some(Some(v))` write `v`, `Some(None)` delete
    /// the key, `None` nothing.
    pub fn drift(&self, live: Option<&str>) -> Option<Option<&str>> {
        match (&self.want, live) {
            (Some(w), Some(l)) if (self.same)(w, l) => None,
            (Some(w), _) => Some(Some(w.as_str())),
            (None, _) if self.kept_when_absent => None,
            (None, None) => None,
            (None, Some(l)) if self.default.is_some_and(|d| (self.same)(d, l)) => None,
            (None, Some(_)) => Some(None),
        }
    }
}

fn same_text(a: &str, b: &str) -> bool {
    a == b
}

/// A list (vmids, HA sids) compared as a set (PVE keeps the order it was
/// given).
fn same_set(a: &str, b: &str) -> bool {
    fn set(s: &str) -> Vec<&str> {
        let mut v: Vec<&str> = s.split([',', ' ', ';']).filter(|x| !x.is_empty()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
    set(a) == set(b)
}

/// An HA rule's `nodes`: pve-ha-manager `HA/Rules/NodeAffinity.pm`
/// `encode_value` sorts them by name and leaves out a priority of 0.
fn same_nodes(a: &str, b: &str) -> bool {
    encode_nodes(a.split(',')) == encode_nodes(b.split(','))
}

/// `node[:prio]` entries as PVE stores them: sorted by node, `:0` left out.
pub fn encode_nodes<'a>(entries: impl IntoIterator<Item = &'a str>) -> String {
    let mut nodes: Vec<(String, u32)> = entries
        .into_iter()
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            super::spec::parse_node_priority(e.trim())
                .map_or((e.trim().to_owned(), 0), |(n, p)| (n.to_string(), p))
        })
        .collect();
    nodes.sort();
    nodes
        .iter()
        .map(|(n, p)| {
            if *p == 0 {
                n.clone()
            } else {
                format!("{n}:{p}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `compress`: `1` is PVE's old spelling of `lzo`, `0` of none.
fn same_compress(a: &str, b: &str) -> bool {
    fn norm(s: &str) -> &str {
        match s {
            "1" => "lzo",
            "" => "0",
            other => other,
        }
    }
    norm(a) == norm(b)
}

/// One desired cluster-level object: its identity and its rows.
#[derive(Debug, Clone)]
pub struct Desired {
    /// Its PVE id, but a replication job's guest and target
    /// ([`super::identity`]): PVE names the job at create.
    pub id: String,
    pub rows: Vec<Row>,
    pub noprune: bool,
}

/// A rate in MB/s as PVE lists it: a number (`50`, `12.5`).
fn rate_text(rate: f64) -> String {
    if rate.fract() == 0.0 && rate.abs() < 1e15 {
        format!("{rate:.0}")
    } else {
        rate.to_string()
    }
}

/// Two rates of the same number (`50` and `50.0`).
fn same_number(a: &str, b: &str) -> bool {
    match (a.trim().parse::<f64>(), b.trim().parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}

/// A replication job's rows (pve-guest-common `ReplicationConfig.pm`):
/// `target` is fixed, `schedule` is `*/15` when absent, a `disable` PVE
/// drops when false is re-enabled by `delete=disable`.
fn replication_rows(j: &super::spec::ReplicationJobSpec, noprune: bool) -> Vec<Row> {
    vec![
        Row::new("target", "spec.target", Some(j.target.to_string())).fixed(),
        Row::new("schedule", "spec.schedule", j.schedule.clone()).default("*/15"),
        Row::new("rate", "spec.rate", j.rate.map(rate_text)).same(same_number),
        Row::new(
            "disable",
            "spec.enabled",
            (j.enabled == Some(false)).then(|| flag(true)),
        )
        .default("0"),
        Row::new(
            "comment",
            "spec.comment",
            Some(super::mark::marked(j.comment.as_deref(), noprune)),
        ),
    ]
}

/// The sids of the HAResource manifests an HA rule names, as PVE stores
/// them (`HA/Rules.pm` `encode_value`: sorted, comma-joined).
fn rule_sids(all: &ClusterDesired, names: &[ResourceName]) -> String {
    let mut sids: Vec<String> = names
        .iter()
        .filter_map(|name| {
            let r = Ref {
                kind: Kind::HAResource,
                name: name.clone(),
            };
            id_of(all.get(&r)?, &all.objects)
        })
        .collect();
    sids.sort();
    sids.dedup();
    sids.join(",")
}

/// An HA rule's rows. `type` and `resources` go with every update
/// (`API2/HA/Rules.pm` `update_rule`: `type` is required by the isolated
/// update schema, `resources` by pve-ha-manager before 5.2); a `disable`
/// PVE drops when false (`create_rule`/`update_rule`: `delete
/// $param->{disable} if !$param->{disable}`) is re-enabled by
/// `delete=disable`.
fn ha_rule_rows(r: &super::spec::HaRuleSpec, all: &ClusterDesired, noprune: bool) -> Vec<Row> {
    let node_affinity = r.r#type == "node-affinity";
    vec![
        Row::new("type", "spec.type", Some(r.r#type.clone()))
            .fixed()
            .always_sent(),
        Row::new(
            "resources",
            "spec.resources",
            Some(rule_sids(all, &r.resources)),
        )
        .same(same_set)
        .always_sent(),
        Row::new(
            "nodes",
            "spec.nodes",
            node_affinity.then(|| encode_nodes(r.nodes.iter().map(String::as_str))),
        )
        .same(same_nodes),
        Row::new("strict", "spec.strict", r.strict.filter(|s| *s).map(flag)).default("0"),
        Row::new("affinity", "spec.affinity", r.affinity.clone()),
        Row::new(
            "disable",
            "spec.enabled",
            (r.enabled == Some(false)).then(|| flag(true)),
        )
        .default("0"),
        Row::new(
            "comment",
            "spec.comment",
            Some(super::mark::marked(r.comment.as_deref(), noprune)),
        ),
    ]
}

fn vmids(all: &ClusterDesired, names: &[String]) -> Option<String> {
    if names.is_empty() {
        return None;
    }
    let mut ids: Vec<Vmid> = names
        .iter()
        .filter_map(|n| guest_ref(all, n))
        .filter_map(|r| all.get(&r)?.spec.guest_id().map(|(_, v)| v))
        .collect();
    ids.sort();
    ids.dedup();
    Some(
        ids.iter()
            .map(Vmid::to_string)
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn flag(b: bool) -> String {
    if b { "1" } else { "0" }.to_owned()
}

/// The rows of one cluster-level manifest, in create-form order.
pub fn desired(obj: &DesiredObject, all: &ClusterDesired) -> Option<Desired> {
    let noprune = obj.metadata.prune_disabled();
    let mut rows = Vec::new();
    match &obj.spec {
        Spec::Pool(p) => {
            rows.push(Row::new(
                "comment",
                "spec.comment",
                Some(super::mark::marked(p.comment.as_deref(), noprune)),
            ));
        }
        Spec::BackupJob(b) => {
            let pool = b.pool.as_ref().and_then(|name| {
                all.get(&Ref {
                    kind: Kind::Pool,
                    name: name.clone(),
                })
                .and_then(pool_id)
            });
            rows.extend([
                Row::new("schedule", "spec.schedule", Some(b.schedule.clone())),
                Row::new(
                    "storage",
                    "spec.storage",
                    b.storage.as_ref().map(ToString::to_string),
                ),
                Row::new("vmid", "spec.guests", vmids(all, &b.guests)).same(same_set),
                Row::new("pool", "spec.pool", pool),
                Row::new("all", "spec.all", b.all.filter(|a| *a).map(flag)).default("0"),
                Row::new("exclude", "spec.exclude", vmids(all, &b.exclude)).same(same_set),
                Row::new(
                    "node",
                    "spec.node",
                    b.node.as_ref().map(ToString::to_string),
                ),
                Row::new("mode", "spec.mode", b.mode.clone()).default("snapshot"),
                Row::new(
                    "compress",
                    "spec.compress",
                    b.compress
                        .as_deref()
                        .map(|c| if c == "none" { "0" } else { c }.to_owned()),
                )
                .default("0")
                .same(same_compress),
                Row::new(
                    "prune-backups",
                    "spec.retention",
                    b.retention.as_ref().map(|keep| {
                        keep.iter()
                            .map(|(k, v)| format!("{k}={v}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    }),
                ),
                Row::new(
                    "notification-mode",
                    "spec.notification-mode",
                    b.notification_mode.clone(),
                )
                .default("auto"),
                // Not deletable (pve-manager `API2/Backup.pm` update_job),
                // so always written.
                Row::new(
                    "enabled",
                    "spec.enabled",
                    Some(flag(b.enabled.unwrap_or(true))),
                ),
                Row::new(
                    "repeat-missed",
                    "spec.repeat-missed",
                    b.repeat_missed.map(flag),
                )
                .default("0"),
                Row::new(
                    "comment",
                    "spec.comment",
                    Some(super::mark::marked(b.comment.as_deref(), noprune)),
                ),
            ]);
        }
        Spec::HaResource(h) => {
            rows.extend([
                Row::new("state", "spec.state", h.state.clone()).kept_when_absent(),
                Row::new(
                    "max_restart",
                    "spec.max-restart",
                    h.max_restart.map(|n| n.to_string()),
                )
                .default("1"),
                Row::new(
                    "max_relocate",
                    "spec.max-relocate",
                    h.max_relocate.map(|n| n.to_string()),
                )
                .default("1"),
                Row::new("failback", "spec.failback", h.failback.map(flag)).default("1"),
                Row::new(
                    "comment",
                    "spec.comment",
                    Some(super::mark::marked(h.comment.as_deref(), noprune)),
                ),
            ]);
        }
        Spec::HaRule(r) => rows.extend(ha_rule_rows(r, all, noprune)),
        Spec::ReplicationJob(j) => rows.extend(replication_rows(j, noprune)),
        _ => return None,
    }
    Some(Desired {
        id: id_of(obj, &all.objects)?,
        rows,
        noprune,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_field_deletes_only_what_differs_from_pves_default() {
        let mode = Row::new("mode", "spec.mode", None).default("snapshot");
        assert_eq!(mode.drift(None), None);
        assert_eq!(mode.drift(Some("snapshot")), None);
        assert_eq!(mode.drift(Some("stop")), Some(None));
        let storage = Row::new("storage", "spec.storage", None);
        assert_eq!(storage.drift(Some("nfs")), Some(None));
    }

    /// pve-ha-manager `HA/Rules/NodeAffinity.pm` `encode_value`: nodes
    /// sorted by name, a priority of 0 left out.
    #[test]
    fn ha_rule_nodes_are_encoded_and_compared_as_pve_stores_them() {
        assert_eq!(
            encode_nodes(["pve2", "pve1:2", "pve3:0"]),
            "pve1:2,pve2,pve3"
        );
        assert!(same_nodes("pve2,pve1:2", "pve1:2,pve2:0"));
        assert!(!same_nodes("pve1:2,pve2", "pve1,pve2"));
        let disable = Row::new("disable", "spec.enabled", None).default("0");
        assert_eq!(disable.drift(Some("1")), Some(None));
    }

    #[test]
    fn replication_rates_compare_as_numbers() {
        let r = Row::new("rate", "spec.rate", Some(rate_text(50.0))).same(same_number);
        assert_eq!(r.want.as_deref(), Some("50"));
        assert_eq!(r.drift(Some("50.0")), None);
        assert_eq!(r.drift(Some("12.5")), Some(Some("50")));
        assert_eq!(rate_text(12.5), "12.5");
    }

    #[test]
    fn vmid_lists_compare_as_sets_and_compress_by_its_meaning() {
        let r = Row::new("vmid", "spec.guests", Some("100,101".into())).same(same_set);
        assert_eq!(r.drift(Some("101,100")), None);
        assert_eq!(r.drift(Some("100")), Some(Some("100,101")));
        let c = Row::new("compress", "spec.compress", Some("lzo".into())).same(same_compress);
        assert_eq!(c.drift(Some("1")), None);
    }
}
