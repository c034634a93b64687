//! Adoption of cluster-level objects: live pools, backup jobs, HA
//! resources, HA rules and replication jobs back into
//! manifests, the inverse of [`super::rows`]. An unmarked object's manifest
//! carries `proxops/adopted-id`, so its first apply is the claim alone
//! (the marker added to its comment); a key no field holds is a gap.

use std::collections::BTreeMap;

use crate::change::Gap;
use proxops_model::manifest::{ANNOTATION_ADOPTED_ID, ANNOTATION_PRUNE, Spec};
use proxops_model::names::{Kind, NodeName, ResourceName, StorageId, Vmid};

use super::mark;
use super::spec::{BackupJobSpec, HaResourceSpec, HaRuleSpec, PoolSpec, ReplicationJobSpec};
use super::{LiveObject, Owner};

/// One adopted object: its manifest's name, annotations and spec, or why
/// it cannot be declared.
pub struct Adopted {
    pub kind: Kind,
    pub name: ResourceName,
    pub annotations: BTreeMap<String, String>,
    pub spec: Result<Spec, String>,
}

/// A manifest name for a PVE id: lower case, anything else than letters
/// and digits a single `-` (`Backup_Nightly` → `backup-nightly`).
pub fn name_for(id: &str) -> Option<ResourceName> {
    let mut out = String::new();
    for c in id.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let trimmed: String = out.trim_end_matches('-').chars().take(63).collect();
    ResourceName::new(trimmed.trim_end_matches('-')).ok()
}

fn annotations(o: &LiveObject, id: &str) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    match o.owner() {
        Owner::Unmarked => {
            a.insert(ANNOTATION_ADOPTED_ID.to_owned(), id.to_owned());
        }
        Owner::Marked { noprune: true } => {
            a.insert(ANNOTATION_PRUNE.to_owned(), "disabled".to_owned());
        }
        Owner::Marked { noprune: false } => {}
    }
    a
}

/// Every listed object of the cluster-level kinds. `guests` names each
/// adoptable guest by vmid (the names adopt gives the guests).
pub fn adopt(
    listings: &super::ClusterObjects,
    guests: &BTreeMap<Vmid, ResourceName>,
    gaps: &mut Vec<Gap>,
) -> Vec<Adopted> {
    let mut out = Vec::new();
    let mut pool_names: BTreeMap<String, ResourceName> = BTreeMap::new();
    if let Ok(pools) = listings.listing(Kind::Pool) {
        for (id, o) in pools {
            let Some(name) = name_for(id) else { continue };
            pool_names.insert(id.clone(), name.clone());
            let spec = PoolSpec {
                id: (name.as_str() != id).then(|| id.clone()),
                comment: mark::text_of(o.get("comment")),
            };
            out.push(Adopted {
                kind: Kind::Pool,
                annotations: annotations(o, id),
                name,
                spec: Ok(Spec::Pool(spec)),
            });
        }
    }
    if let Ok(resources) = listings.listing(Kind::HAResource) {
        for (sid, o) in resources {
            let guest = sid
                .split_once(':')
                .and_then(|(_, n)| Vmid::new(n.parse().ok()?).ok())
                .and_then(|v| guests.get(&v));
            let Some(name) = guest.cloned() else { continue };
            let num = |k: &str| o.get(k).and_then(|v| v.parse::<u32>().ok());
            let spec = HaResourceSpec {
                guest: name.to_string(),
                state: o.get("state").map(str::to_owned),
                max_restart: num("max_restart"),
                max_relocate: num("max_relocate"),
                failback: o.get("failback").map(|v| v == "1"),
                comment: mark::text_of(o.get("comment")),
            };
            for (k, v) in &o.values {
                if k == "group" {
                    gaps.push(Gap {
                        object: format!("HAResource/{name}"),
                        node: String::new(),
                        id: sid.clone(),
                        key: k.clone(),
                        value: Some(v.clone()),
                        note: "an HA group (PVE 8): ProxOps manages PVE 9's HA rules, not groups; kept on PVE".into(),
                    });
                }
            }
            out.push(Adopted {
                kind: Kind::HAResource,
                annotations: annotations(o, sid),
                name,
                spec: Ok(Spec::HaResource(spec)),
            });
        }
    }
    if let Ok(jobs) = listings.listing(Kind::BackupJob) {
        for (id, o) in jobs {
            let Some(name) = name_for(id) else { continue };
            let spec = backup_job(id, o, guests, &pool_names, gaps, &name);
            out.push(Adopted {
                kind: Kind::BackupJob,
                annotations: annotations(o, id),
                name,
                spec: spec.map(Spec::BackupJob),
            });
        }
    }
    out.extend(ha_rules(listings, guests, gaps));
    out.extend(replication_jobs(listings, guests, gaps));
    out
}

/// The keys a ReplicationJob manifest holds; any other listed key is a gap.
const REPLICATION_KEYS: &[&str] = &[
    "target", "schedule", "rate", "disable", "comment",
    // Listed by PVE (pve-guest-common `ReplicationConfig.pm`
    // `parse_config`), never a setting of the manifest: the id's parts,
    // the plugin type and the guest's node at create.
    "guest", "jobnum", "type", "source",
];

/// Every replication job of an adopted guest, named `<guest>-to-<target>`,
/// but a job PVE is removing (`remove_job`).
fn replication_jobs(
    listings: &super::ClusterObjects,
    guests: &BTreeMap<Vmid, ResourceName>,
    gaps: &mut Vec<Gap>,
) -> Vec<Adopted> {
    let Ok(jobs) = listings.listing(Kind::ReplicationJob) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (id, o) in jobs.iter().filter(|(_, o)| !super::being_removed(o)) {
        let guest = o
            .get("guest")
            .and_then(|g| Vmid::new(g.parse().ok()?).ok())
            .and_then(|v| guests.get(&v));
        let (Some(guest), Some(target)) = (guest, o.get("target")) else {
            continue;
        };
        let Some(name) = name_for(&format!("{guest}-to-{target}")) else {
            continue;
        };
        unmodelled(Kind::ReplicationJob, &name, o, REPLICATION_KEYS, gaps);
        let spec = NodeName::new(target)
            .map_err(|e| format!("target {target:?}: {e}"))
            .and_then(|target| {
                Ok(ReplicationJobSpec {
                    guest: guest.to_string(),
                    target,
                    schedule: o.get("schedule").map(str::to_owned),
                    rate: match o.get("rate") {
                        Some(r) => Some(
                            r.parse()
                                .map_err(|_| format!("rate {r:?} is not a number"))?,
                        ),
                        None => None,
                    },
                    enabled: (o.get("disable") == Some("1")).then_some(false),
                    comment: mark::text_of(o.get("comment")),
                })
            });
        out.push(Adopted {
            kind: Kind::ReplicationJob,
            annotations: annotations(o, id),
            spec: spec.map(Spec::ReplicationJob),
            name,
        });
    }
    out
}

/// The keys an HARule manifest holds; any other listed key is a gap.
const HA_RULE_KEYS: &[&str] = &[
    "type",
    "resources",
    "nodes",
    "strict",
    "affinity",
    "disable",
    "comment",
    // Listed by PVE (`API2/HA/Rules.pm` `$get_api_ha_rule`), never a setting.
    "digest",
    "order",
    "errors",
];

fn ha_rules(
    listings: &super::ClusterObjects,
    guests: &BTreeMap<Vmid, ResourceName>,
    gaps: &mut Vec<Gap>,
) -> Vec<Adopted> {
    let Ok(rules) = listings.listing(Kind::HARule) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (id, o) in rules {
        let Some(name) = name_for(id) else { continue };
        unmodelled(Kind::HARule, &name, o, HA_RULE_KEYS, gaps);
        out.push(Adopted {
            kind: Kind::HARule,
            annotations: annotations(o, id),
            spec: ha_rule(id, o, guests, &name).map(Spec::HaRule),
            name,
        });
    }
    out
}

/// One live rule as a manifest: its resources by the names adopt gives
/// their HA resources (their guests' names).
fn ha_rule(
    id: &str,
    o: &LiveObject,
    guests: &BTreeMap<Vmid, ResourceName>,
    name: &ResourceName,
) -> Result<HaRuleSpec, String> {
    let mut resources = Vec::new();
    for sid in o
        .get("resources")
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let guest = sid
            .split_once(':')
            .and_then(|(_, n)| Vmid::new(n.parse().ok()?).ok())
            .and_then(|v| guests.get(&v));
        match guest {
            Some(g) => resources.push(g.clone()),
            None => {
                return Err(format!(
                    "it names HA resource {sid}, whose guest is not adopted with it"
                ));
            }
        }
    }
    let nodes = o
        .get("nodes")
        .map(|n| {
            n.split(',')
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(HaRuleSpec {
        id: (name.as_str() != id).then(|| id.to_owned()),
        r#type: o.get("type").unwrap_or("").to_owned(),
        resources,
        nodes,
        strict: o.get("strict").map(|v| v == "1").filter(|s| *s),
        affinity: o.get("affinity").map(str::to_owned),
        enabled: o.get("disable").filter(|v| *v == "1").map(|_| false),
        comment: mark::text_of(o.get("comment")),
    })
}

/// The keys a BackupJob manifest holds; any other listed key is a gap.
const BACKUP_KEYS: &[&str] = &[
    "schedule",
    "storage",
    "vmid",
    "pool",
    "all",
    "exclude",
    "node",
    "mode",
    "compress",
    "prune-backups",
    "notification-mode",
    "enabled",
    "repeat-missed",
    "comment",
    // Listed by PVE, never a setting.
    "type",
    "next-run",
    "digest",
];

/// Every listed key of `o` no field of its kind holds, as a gap.
fn unmodelled(kind: Kind, name: &ResourceName, o: &LiveObject, keys: &[&str], gaps: &mut Vec<Gap>) {
    for (k, v) in &o.values {
        if !keys.contains(&k.as_str()) {
            gaps.push(Gap {
                object: format!("{kind}/{name}"),
                node: String::new(),
                id: o.id.clone(),
                key: k.clone(),
                value: Some(v.clone()),
                note: format!("not a {kind} field: kept on PVE as it is, never compared"),
            });
        }
    }
}

fn names_of(
    text: Option<&str>,
    guests: &BTreeMap<Vmid, ResourceName>,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for item in text
        .unwrap_or("")
        .split([',', ' ', ';'])
        .filter(|s| !s.is_empty())
    {
        let name = item
            .parse::<u64>()
            .ok()
            .and_then(|n| Vmid::new(n).ok())
            .and_then(|v| guests.get(&v));
        match name {
            Some(n) => out.push(n.to_string()),
            None => {
                return Err(format!(
                    "it names guest {item}, which is not adopted with it (not on PVE, or outside the node allowlist)"
                ));
            }
        }
    }
    Ok(out)
}

fn backup_job(
    id: &str,
    o: &LiveObject,
    guests: &BTreeMap<Vmid, ResourceName>,
    pools: &BTreeMap<String, ResourceName>,
    gaps: &mut Vec<Gap>,
    name: &ResourceName,
) -> Result<BackupJobSpec, String> {
    unmodelled(Kind::BackupJob, name, o, BACKUP_KEYS, gaps);
    let schedule = o.get("schedule").ok_or(
        "it has no schedule (a job from the legacy vzdump.cron: give it one in PVE first)",
    )?;
    let pool = match o.get("pool") {
        Some(p) => Some(
            pools
                .get(p)
                .cloned()
                .ok_or_else(|| format!("it names pool {p}, which is not adopted with it"))?,
        ),
        None => None,
    };
    let retention = match o.get("prune-backups") {
        None => None,
        Some(text) => Some(
            text.split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| {
                    Ok((
                        k.to_owned(),
                        v.parse::<u32>().map_err(|_| {
                            format!("prune-backups {text:?} is not a list of numbers")
                        })?,
                    ))
                })
                .collect::<Result<BTreeMap<_, _>, String>>()?,
        ),
    };
    let flag = |k: &str| o.get(k).map(|v| v == "1");
    Ok(BackupJobSpec {
        id: (name.as_str() != id).then(|| id.to_owned()),
        schedule: schedule.to_owned(),
        storage: o.get("storage").and_then(|s| StorageId::new(s).ok()),
        guests: names_of(o.get("vmid"), guests)?,
        pool,
        all: flag("all").filter(|a| *a),
        exclude: names_of(o.get("exclude"), guests)?,
        node: o.get("node").and_then(|n| NodeName::new(n).ok()),
        mode: o.get("mode").map(str::to_owned),
        compress: o.get("compress").map(|c| {
            match c {
                "0" => "none",
                "1" => "lzo",
                other => other,
            }
            .to_owned()
        }),
        retention,
        notification_mode: o.get("notification-mode").map(str::to_owned),
        enabled: flag("enabled").filter(|e| !*e),
        repeat_missed: flag("repeat-missed").filter(|r| *r),
        comment: mark::text_of(o.get("comment")),
    })
}

#[cfg(test)]
mod tests {
    use super::name_for;

    #[test]
    fn ids_become_manifest_names() {
        assert_eq!(
            name_for("Backup_Nightly").map(|n| n.to_string()),
            Some("backup-nightly".into())
        );
        assert_eq!(name_for("web").map(|n| n.to_string()), Some("web".into()));
        assert_eq!(name_for("__"), None);
    }
}
