//! What the credentials of a cluster must be able to see for a plan to
//! tell the truth. PVE filters what it lists by privilege: a token without
//! `VM.Audit` on a guest's path does not see it in `/cluster/resources`
//! (pve-manager `PVE/API2/Cluster.pm` `resources`), so ProxOps would plan
//! to create a guest that exists, and could never tell which guests are
//! its own. A token with privilege separation holds only what both it and
//! its user were granted (pve-access-control `PVE/RPCEnvironment.pm`
//! `permissions`): a user's ACL line alone is not enough.
//!
//! Owns the list of (path, privilege) pairs a cluster needs before its
//! inventory is read, and the refusal that names the missing ones. Reads
//! nothing itself: the caller asks PVE (`GET /access/permissions?path=`).

use std::collections::BTreeSet;

use proxops_model::names::StorageId;

/// One privilege a cluster's credentials must hold, where, and why.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Needed {
    pub path: String,
    pub privilege: &'static str,
    pub why: &'static str,
}

/// What reading a cluster needs: `VM.Audit` on `/vms` (every guest, so
/// none is taken for absent), `Sys.Audit` on `/nodes` (which nodes are
/// online), `Datastore.Audit` on each storage whose content is read.
pub fn needed<'a>(storages: impl IntoIterator<Item = &'a StorageId>) -> Vec<Needed> {
    let mut out = vec![
        Needed {
            path: "/vms".into(),
            privilege: "VM.Audit",
            why: "PVE lists only the guests a token may audit: without it, existing guests look absent and are planned as creates, and tagged ones are never seen",
        },
        Needed {
            path: "/nodes".into(),
            privilege: "Sys.Audit",
            why: "which nodes are online is read from PVE's node list",
        },
    ];
    let storages: BTreeSet<&StorageId> = storages.into_iter().collect();
    for s in storages {
        out.push(Needed {
            path: format!("/storage/{s}"),
            privilege: "Datastore.Audit",
            why: "the storage's content is read to know which files are there",
        });
    }
    out
}

/// The refusal when `missing` is not empty: each privilege and path, and
/// how to grant them to `acting_as`.
pub fn refusal(missing: &[Needed], acting_as: Option<&str>) -> Option<String> {
    let first = missing.first()?;
    let list: Vec<String> = missing
        .iter()
        .map(|n| format!("{} on {} ({})", n.privilege, n.path, n.why))
        .collect();
    let who = acting_as.unwrap_or("these credentials");
    // `API token user@realm!id` or `user user@realm`: the id is the last word.
    let id = acting_as.and_then(|a| a.split_whitespace().last());
    let grant = match id {
        Some(a) if a.contains('!') => format!(
            "pveum acl modify {} --tokens '{a}' --roles PVEAuditor (a token with privilege separation needs its own ACL line besides its user's)",
            first.path
        ),
        Some(a) => format!(
            "pveum acl modify {} --users '{a}' --roles PVEAuditor",
            first.path
        ),
        None => format!("grant PVEAuditor on {}", first.path),
    };
    Some(format!(
        "{who} cannot audit what this cluster manages: missing {}; no inventory read, no write. Grant it, e.g. {grant}",
        list.join("; ")
    ))
}
