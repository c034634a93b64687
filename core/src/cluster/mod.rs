//! Cluster-level objects: pools (`/pools`), backup jobs
//! (`/cluster/backup`), HA resources (`/cluster/ha/resources`), HA rules
//! (`/cluster/ha/rules`, PVE 9) and replication jobs
//! (`/cluster/replication`). They
//! have no node, no vmid and no tags: ProxOps owns the ones whose
//! `comment` ends with its marker ([`mark`]).
//!
//! Each kind is data: where PVE lists it and how it is written
//! ([`Endpoints`]), and the rows of PVE keys a manifest owns
//! ([`rows`]: key, manifest field, desired wire value, what an absent field
//! means). Reading, planning (create, drift, the claim of an adopted
//! object, prunes under the budget and the empty-desired guard) and
//! adoption are written once over those rows ([`plan`], [`adopt`]).

pub(crate) mod plan;

pub use proxops_model::cluster::{Owner, mark, replication_identity, spec};
pub use proxops_model::live::{ClusterObjects, Listing, LiveObject, being_removed};
pub use proxops_translate::cluster::{adopt, rows};

use std::collections::BTreeMap;

use proxops_model::names::Kind;
use proxops_model::wire::{WireError, json_to_text};

use crate::action::{Params, Work, WriteMethod};

/// Where PVE keeps one cluster-level kind and how it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoints {
    pub kind: Kind,
    /// The listing (`GET`) and the create (`POST`).
    pub collection: &'static str,
    /// The key that names an object in the listing and the create form.
    pub id_key: &'static str,
    /// Updates and deletes go to `{collection}/{id}`; else to the
    /// collection with `{id_key}=` in the form (pve-manager `API2/Pool.pm`:
    /// `PUT/DELETE /pools` since PVE 8.1, `/pools/{poolid}` being
    /// deprecated, without nested pools).
    pub item_in_path: bool,
    /// What a delete sends besides the id.
    pub delete_form: &'static [(&'static str, &'static str)],
    /// What a create sends besides the id and the manifest's rows.
    pub create_form: &'static [(&'static str, &'static str)],
    /// The PVE version that brought the endpoint, when an older one the
    /// project meets lacks it (answers 501): then the kind is
    /// unsupported there, not unreadable.
    pub since: Option<&'static str>,
}

pub const POOL: Endpoints = Endpoints {
    kind: Kind::Pool,
    collection: "/pools",
    id_key: "poolid",
    item_in_path: false,
    delete_form: &[],
    create_form: &[],
    since: None,
};

pub const BACKUP_JOB: Endpoints = Endpoints {
    kind: Kind::BackupJob,
    collection: "/cluster/backup",
    id_key: "id",
    item_in_path: true,
    delete_form: &[],
    create_form: &[],
    since: None,
};

/// `DELETE …/{sid}` with `purge=0`: PVE's default (`purge=1`,
/// pve-ha-manager `API2/HA/Resources.pm` `delete`) also edits every HA rule
/// naming the resource, objects ProxOps may not own.
pub const HA_RESOURCE: Endpoints = Endpoints {
    kind: Kind::HAResource,
    collection: "/cluster/ha/resources",
    id_key: "sid",
    item_in_path: true,
    delete_form: &[("purge", "0")],
    create_form: &[],
    since: None,
};

/// PVE 9's HA rules (pve-ha-manager 5, `API2/HA/Rules.pm`); a PVE 8 has
/// HA groups instead, which ProxOps does not manage.
pub const HA_RULE: Endpoints = Endpoints {
    kind: Kind::HARule,
    collection: "/cluster/ha/rules",
    id_key: "rule",
    item_in_path: true,
    delete_form: &[],
    create_form: &[],
    since: Some("PVE 9 (pve-ha-manager 5)"),
};

/// Storage replication jobs (pve-manager `API2/ReplicationConfig.pm`). The
/// client names a new job `<vmid>-<n>` and gives its plugin type (`local`,
/// the one pve-guest-common `ReplicationConfig.pm` registers); a `DELETE`
/// only marks the job (`remove_job`), the replication runner removes it.
pub const REPLICATION_JOB: Endpoints = Endpoints {
    kind: Kind::ReplicationJob,
    collection: "/cluster/replication",
    id_key: "id",
    item_in_path: true,
    delete_form: &[],
    create_form: &[("type", "local")],
    since: None,
};

/// Every cluster-level kind, in the order they are read and planned.
pub const KINDS: [Endpoints; 5] = [POOL, BACKUP_JOB, HA_RESOURCE, HA_RULE, REPLICATION_JOB];

pub fn endpoints(kind: Kind) -> Option<Endpoints> {
    KINDS.into_iter().find(|e| e.kind == kind)
}

impl Endpoints {
    pub fn create(&self, id: &str, form: Params) -> Work {
        let mut params = Params::new();
        params.push(self.id_key, id);
        for (k, v) in self.create_form {
            params.push(*k, *v);
        }
        params.0.extend(form.0);
        Work::ClusterWrite {
            method: WriteMethod::Post,
            path: self.collection.to_owned(),
            params,
        }
    }

    fn at(&self, method: WriteMethod, id: &str, form: Params) -> Work {
        if self.item_in_path {
            Work::ClusterWrite {
                method,
                path: format!("{}/{}", self.collection, crate::step::encode_segment(id)),
                params: form,
            }
        } else {
            let mut params = Params::new();
            params.push(self.id_key, id);
            params.0.extend(form.0);
            Work::ClusterWrite {
                method,
                path: self.collection.to_owned(),
                params,
            }
        }
    }

    pub fn update(&self, id: &str, form: Params) -> Work {
        self.at(WriteMethod::Put, id, form)
    }

    pub fn delete(&self, id: &str) -> Work {
        let mut form = Params::new();
        for (k, v) in self.delete_form {
            form.push(*k, *v);
        }
        self.at(WriteMethod::Delete, id, form)
    }

    /// The listing's `data` array, by id.
    pub fn parse(
        &self,
        data: &serde_json::Value,
    ) -> Result<BTreeMap<String, LiveObject>, WireError> {
        let bad = || WireError::Invalid {
            key: self.collection.to_owned(),
            value: data.to_string().chars().take(120).collect(),
            expected: format!("a JSON array of objects with {:?}", self.id_key),
        };
        let mut out = BTreeMap::new();
        for item in data.as_array().ok_or_else(bad)? {
            let obj = item.as_object().ok_or_else(bad)?;
            let id = obj
                .get(self.id_key)
                .and_then(json_to_text)
                .ok_or_else(bad)?;
            let values = obj
                .iter()
                .filter(|(k, _)| k.as_str() != self.id_key)
                .filter_map(|(k, v)| Some((k.clone(), value_text(v)?)))
                .collect();
            out.insert(id.clone(), LiveObject { id, values });
        }
        Ok(out)
    }
}

/// The identity ProxOps owns of a listed object: its PVE id, but for a
/// replication job its guest and target (`<vmid>-><target>`): PVE picks
/// the job's id at create and keeps one job per guest and target
/// (pve-guest-common `ReplicationConfig.pm` `write_config`: "replication
/// job for guest … to target … already exists").
pub fn identity(kind: Kind, o: &LiveObject) -> String {
    match (kind, o.get("guest"), o.get("target")) {
        (Kind::ReplicationJob, Some(guest), Some(target)) => replication_identity(guest, target),
        _ => o.id.clone(),
    }
}

/// The id of a new object PVE does not name itself: for a replication job,
/// `<vmid>-<n>` with the lowest `n` no listed job of the guest holds (jobs
/// being removed included: `API2/ReplicationConfig.pm` `create`, "replication
/// job '…' already exists"), and ids `taken` by other creates of the plan.
pub fn new_id(kind: Kind, identity: &str, taken: impl Fn(&str) -> bool) -> String {
    if kind != Kind::ReplicationJob {
        return identity.to_owned();
    }
    let vmid = identity.split_once("->").map_or(identity, |(v, _)| v);
    (0u32..)
        .map(|n| format!("{vmid}-{n}"))
        .find(|id| !taken(id))
        .unwrap_or_else(|| format!("{vmid}-0"))
}

/// Whether the PVE id `id` can name the object of `identity`: the same
/// id, or for a replication job an id of the same guest.
pub fn serves(kind: Kind, identity: &str, id: &str) -> bool {
    if kind != Kind::ReplicationJob {
        return identity == id;
    }
    let vmid = identity.split_once("->").map_or("", |(v, _)| v);
    id.split_once('-')
        .is_some_and(|(v, n)| v == vmid && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A listed value as text: booleans as `1`/`0`, property-string objects
/// (`"prune-backups": {"keep-last": "4"}`, pve-guest-common
/// `VZDump/JobBase.pm` decodes them for the answer) as sorted
/// `key=value` pairs.
fn value_text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_owned()),
        serde_json::Value::Object(m) => {
            let mut pairs: Vec<String> = m
                .iter()
                .filter_map(|(k, v)| Some(format!("{k}={}", value_text(v)?)))
                .collect();
            // PVE's order is its parser's; the rows compare sorted pairs.
            pairs.sort();
            Some(pairs.join(","))
        }
        serde_json::Value::Null => None,
        other => json_to_text(other),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// pve-ha-manager `API2/HA/Resources.pm` `delete`: `purge` defaults to
    /// 1 and then edits every HA rule naming the resource.
    #[test]
    fn an_ha_resource_is_deleted_without_purging_rules() {
        let Work::ClusterWrite {
            method,
            path,
            params,
        } = HA_RESOURCE.delete("vm:100")
        else {
            panic!("a cluster write");
        };
        assert_eq!(method, WriteMethod::Delete);
        assert_eq!(path, "/cluster/ha/resources/vm%3A100");
        assert_eq!(params.to_wire(), vec![("purge".to_owned(), "0".to_owned())]);
    }

    /// pve-manager `API2/ReplicationConfig.pm` `create`: the client names
    /// the job; the lowest free number of the guest is taken, jobs being
    /// removed included.
    #[test]
    fn a_new_replication_job_takes_the_lowest_free_number_of_its_guest() {
        let data = serde_json::json!([
            {"id": "150-0", "guest": 150, "target": "pve3", "remove_job": "full"},
            {"id": "150-2", "guest": 150, "target": "pve4"},
            {"id": "151-1", "guest": 151, "target": "pve2"}
        ]);
        let l = REPLICATION_JOB.parse(&data).unwrap();
        let taken = |id: &str| l.contains_key(id);
        assert_eq!(new_id(Kind::ReplicationJob, "150->pve2", taken), "150-1");
        assert_eq!(new_id(Kind::ReplicationJob, "151->pve3", taken), "151-0");
        let also = |id: &str| l.contains_key(id) || id == "150-1";
        assert_eq!(new_id(Kind::ReplicationJob, "150->pve5", also), "150-3");
        assert_eq!(identity(Kind::ReplicationJob, &l["150-2"]), "150->pve4");
        assert!(being_removed(&l["150-0"]));
        assert!(serves(Kind::ReplicationJob, "150->pve2", "150-7"));
        assert!(!serves(Kind::ReplicationJob, "150->pve2", "1500-7"));
        let Work::ClusterWrite { params, .. } = REPLICATION_JOB.create("150-1", Params::new())
        else {
            panic!("a cluster write");
        };
        assert_eq!(params.to_wire()[1], ("type".to_owned(), "local".to_owned()));
    }

    #[test]
    fn pools_are_written_through_the_collection_with_their_id() {
        let Work::ClusterWrite { path, params, .. } = POOL.update("web", Params::new()) else {
            panic!("a cluster write");
        };
        assert_eq!(path, "/pools");
        assert_eq!(
            params.to_wire(),
            vec![("poolid".to_owned(), "web".to_owned())]
        );
    }

    #[test]
    fn listings_read_property_strings_and_booleans_as_text() {
        let data = serde_json::json!([
            {"id": "nightly", "enabled": 1, "prune-backups": {"keep-last": "3", "keep-daily": "7"}, "all": true}
        ]);
        let l = BACKUP_JOB.parse(&data).unwrap();
        let o = &l["nightly"];
        assert_eq!(o.get("prune-backups"), Some("keep-daily=7,keep-last=3"));
        assert_eq!(o.get("all"), Some("1"));
        assert_eq!(o.get("enabled"), Some("1"));
    }
}
