//! Which PVE an endpoint leads to, as PVE itself says: the cluster name and
//! the member nodes (name and address) of `GET /cluster/status`.
//!
//! Two `base-url`s can name one PVE in ways no comparison of URLs sees (two
//! DNS names, a name and an address, a reverse proxy); two cluster configs
//! on one PVE would each prune the other's guests. The caller reads every
//! cluster's identity before any write and refuses the ones that coincide.
//!
//! A clustered PVE reports one `type: cluster` row (its `name`) and one
//! `type: node` row per member; a standalone node reports only its own node
//! row (pve-wire.md §8). Two identities are the same PVE when their cluster
//! names agree (or both are standalone) and they share a member node: the
//! same name at the same address. Must never decide anything from a failed
//! read: that is an error for the caller to fail closed on.

use std::collections::BTreeSet;
use std::time::Duration;

use proxops_core::live::ReadFailure;

use crate::retry::refusal_hint;
use crate::transport::{Request, Response, Transport, TransportError};

const STATUS_PATH: &str = "/cluster/status";

/// Which PVE a base URL leads to: the value and its rules are core's.
pub use proxops_core::cycle::PveIdentity;

/// Reads `GET /cluster/status` through `transport`.
pub fn read_identity(transport: &dyn Transport) -> Result<PveIdentity, ReadFailure> {
    let request = Request::get(STATUS_PATH);
    let fail = |message: String| ReadFailure {
        what: format!("GET {STATUS_PATH}"),
        message,
    };
    let response = transport.call(&request).map_err(|e| fail(e.cause()))?;
    if !response.is_success() {
        let reason = response.reason.trim();
        let mut message = format!("HTTP {} {reason}", response.status);
        let acting_as = transport.acting_as();
        if let Some(hint) = refusal_hint(response.status, reason, acting_as.as_deref()) {
            message.push_str(&format!(". {hint}"));
        }
        return Err(fail(message));
    }
    PveIdentity::from_json(response.data()).map_err(fail)
}

/// The privileges these credentials hold on each of `paths`, in their
/// order, as PVE computes them (`GET /access/permissions?path=`: one entry,
/// the effective privileges on that very path, inherited ones included,
/// and for a token with privilege separation only what both it and its
/// user hold; pve-access-control `API2/AccessControl.pm` `permissions`).
/// Any user may read its own. At most `bound` requests in flight: the
/// reads do not depend on each other, so they take one round trip
/// instead of one each.
pub fn read_privileges(
    transport: &dyn Transport,
    paths: &[&str],
    bound: usize,
) -> Vec<Result<BTreeSet<String>, ReadFailure>> {
    let requests: Vec<Request> = paths
        .iter()
        .map(|path| {
            Request::new(
                crate::transport::Method::Get,
                PERMISSIONS_PATH,
                vec![("path".into(), (*path).to_owned())],
            )
        })
        .collect();
    let answers = crate::reader::run_bounded(transport, &requests, bound, Duration::ZERO);
    paths
        .iter()
        .zip(answers)
        .map(|(path, answer)| privileges_of(path, answer))
        .collect()
}

fn privileges_failure(path: &str, message: String) -> ReadFailure {
    ReadFailure {
        what: format!("GET {PERMISSIONS_PATH}?path={path}"),
        message,
    }
}

fn privileges_of(
    path: &str,
    answer: Option<Result<Response, TransportError>>,
) -> Result<BTreeSet<String>, ReadFailure> {
    let fail = |message: String| privileges_failure(path, message);
    let response = answer
        .ok_or_else(|| fail("read did not complete".into()))?
        .map_err(|e| fail(e.cause()))?;
    if !response.is_success() {
        return Err(fail(format!(
            "HTTP {} {}",
            response.status,
            response.reason.trim()
        )));
    }
    let data = response.data();
    let map = data
        .as_object()
        .ok_or_else(|| fail("expected a JSON object in data".to_owned()))?;
    Ok(map
        .get(path)
        .and_then(serde_json::Value::as_object)
        .map(|privs| privs.keys().cloned().collect())
        .unwrap_or_default())
}

const PERMISSIONS_PATH: &str = "/access/permissions";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn identity(data: serde_json::Value) -> PveIdentity {
        PveIdentity::from_json(&data).unwrap()
    }

    /// The shape of a real four-node cluster (fixtures/pve-real
    /// cluster-status, trimmed).
    fn four_nodes() -> serde_json::Value {
        json!([
            {"type": "cluster", "version": 4, "quorate": 1, "name": "clustername", "id": "cluster", "nodes": 4},
            {"name": "node2", "nodeid": 2, "id": "node/node2", "online": 1, "type": "node", "ip": "192.168.1.2", "local": 0, "level": ""},
            {"name": "node3", "nodeid": 3, "type": "node", "ip": "192.168.1.3", "local": 0, "id": "node/node3", "online": 1, "level": ""},
            {"name": "node1", "nodeid": 1, "online": 1, "id": "node/node1", "local": 1, "ip": "192.168.1.1", "type": "node", "level": ""},
            {"nodeid": 4, "name": "node4", "level": "", "local": 0, "type": "node", "ip": "192.168.1.4", "online": 1, "id": "node/node4"}
        ])
    }

    #[test]
    fn a_cluster_is_its_name_and_members() {
        let id = identity(four_nodes());
        assert_eq!(id.cluster.as_deref(), Some("clustername"));
        assert_eq!(id.nodes.len(), 4);
        assert!(id.nodes.contains(&("node1".into(), "192.168.1.1".into())));
        assert_eq!(
            id.to_string(),
            "PVE cluster \"clustername\" (nodes node1 192.168.1.1, node2 192.168.1.2, node3 192.168.1.3, node4 192.168.1.4)"
        );
    }

    #[test]
    fn the_same_cluster_seen_from_another_member_is_the_same_pve() {
        let a = identity(four_nodes());
        // Another node answers: its own row says local 1, the rest is equal.
        let mut rows = four_nodes();
        rows[1]["local"] = json!(1);
        rows[3]["local"] = json!(0);
        rows[2]["online"] = json!(0);
        assert!(a.same_pve(&identity(rows)));
    }

    #[test]
    fn clusters_with_other_names_or_no_common_member_differ() {
        let a = identity(four_nodes());
        let mut renamed = four_nodes();
        renamed[0]["name"] = json!("other");
        assert!(!a.same_pve(&identity(renamed)));
        let standalone = identity(json!([
            {"type": "node", "name": "node1", "ip": "192.168.1.1", "nodeid": 0, "local": 1, "online": 1}
        ]));
        assert!(!a.same_pve(&standalone));
        let moved = identity(json!([
            {"type": "node", "name": "node1", "ip": "10.0.0.1", "nodeid": 0, "local": 1, "online": 1}
        ]));
        assert!(!standalone.same_pve(&moved));
        assert!(standalone.same_pve(&standalone.clone()));
        assert_eq!(
            standalone.to_string(),
            "standalone PVE node node1 192.168.1.1"
        );
    }

    /// Answers `/access/permissions` only once `want` reads have started
    /// (or, noted, after a while without), and counts how many were in
    /// flight at once.
    struct AllAtOnce {
        want: usize,
        /// In flight, and started in all.
        counts: std::sync::Mutex<(usize, usize)>,
        cv: std::sync::Condvar,
        alone: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    impl Transport for AllAtOnce {
        fn call(&self, r: &Request) -> Result<crate::transport::Response, TransportError> {
            use std::sync::atomic::Ordering::SeqCst;
            let mut c = self.counts.lock().unwrap();
            c.0 += 1;
            c.1 += 1;
            self.most.fetch_max(c.0, SeqCst);
            self.cv.notify_all();
            let (mut c, waited) = self
                .cv
                .wait_timeout_while(c, std::time::Duration::from_secs(5), |c| c.1 < self.want)
                .unwrap();
            if waited.timed_out() {
                self.alone.fetch_add(1, SeqCst);
            }
            c.0 -= 1;
            let path = r
                .params
                .first()
                .map(|(_, v)| v.as_str())
                .unwrap_or_default();
            Ok(crate::transport::Response {
                status: 200,
                reason: "OK".into(),
                body: json!({"data": {path: {"VM.Audit": 1}}}),
            })
        }
    }

    fn all_at_once(want: usize) -> AllAtOnce {
        AllAtOnce {
            want,
            counts: Default::default(),
            cv: Default::default(),
            alone: Default::default(),
            most: Default::default(),
        }
    }

    #[test]
    fn privileges_on_several_paths_are_read_at_once_within_the_bound() {
        use std::sync::atomic::Ordering::SeqCst;
        let t = all_at_once(3);
        let held = read_privileges(&t, &["/vms", "/nodes", "/storage/local"], 8);
        assert_eq!(t.alone.load(SeqCst), 0, "the reads went one at a time");
        assert_eq!(t.most.load(SeqCst), 3);
        let held: Vec<BTreeSet<String>> = held.into_iter().map(Result::unwrap).collect();
        assert!(held.iter().all(|h| h.contains("VM.Audit")), "{held:?}");
        // Bound 1: one at a time.
        let t = all_at_once(1);
        assert_eq!(read_privileges(&t, &["/vms", "/nodes"], 1).len(), 2);
        assert_eq!(t.most.load(SeqCst), 1);
    }

    #[test]
    fn an_answer_without_nodes_tells_nothing() {
        assert!(PveIdentity::from_json(&json!([])).is_err());
        assert!(PveIdentity::from_json(&json!({"data": 1})).is_err());
        assert!(PveIdentity::from_json(&json!([{"type": "cluster", "name": "c"}])).is_err());
    }
}
