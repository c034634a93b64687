//! Recording → replay round trip, and what a recording must never hold.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use proxops_core::names::{ClusterName, NodeName, StorageId};
use proxops_pve::reader::{ReadScope, read_snapshot};
use proxops_pve::recording::{Recording, RecordingTransport};
use proxops_pve::replay::ReplayTransport;
use proxops_pve::transport::{Method, Request, Response, Transport, TransportError};
use serde_json::json;

/// A stand-in PVE answering from code.
struct Scripted;

impl Transport for Scripted {
    fn call(&self, r: &Request) -> Result<Response, TransportError> {
        let ok = |data: serde_json::Value| {
            Ok(Response {
                status: 200,
                reason: "OK".into(),
                body: json!({"data": data}),
            })
        };
        match (r.method, r.path.as_str()) {
            (Method::Post, "/access/ticket") => {
                ok(json!({"ticket": "PVE:root@pam:SECRET", "CSRFPreventionToken": "SECRET"}))
            }
            (Method::Get, "/access/permissions") => ok(json!({"/": {"Sys.Audit": 1}})),
            (Method::Get, "/cluster/resources") => ok(json!([
                {"type": "node", "node": "pve1", "status": "online"},
                {"vmid": 100, "type": "qemu", "node": "pve1", "status": "running", "name": "a", "tags": "b;a"},
                {"vmid": "101", "type": "lxc", "node": "pve1", "status": "stopped", "name": "c"}
            ])),
            (
                Method::Get,
                "/cluster/replication"
                | "/pools"
                | "/cluster/backup"
                | "/cluster/ha/resources"
                | "/cluster/ha/rules",
            ) => ok(json!([])),
            (Method::Get, "/nodes/pve1/qemu") => ok(json!([
                {"vmid": 100, "status": "running", "qmpstatus": "running"}
            ])),
            (Method::Get, "/nodes/pve1/qemu/100/pending") => ok(json!([
                {"key": "memory", "value": "2048"}, {"key": "cores", "value": 2, "pending": 4},
                {"key": "digest", "value": "ab"}
            ])),
            (Method::Get, "/nodes/pve1/lxc/101/pending") => Ok(Response {
                status: 500,
                reason: "got timeout".into(),
                body: json!({"data": null}),
            }),
            (Method::Get, "/nodes/pve1/storage/local/content") => {
                ok(json!([{"volid": "local:iso/x.iso", "content": "iso", "size": 1}]))
            }
            (Method::Get, "/version") if !r.params.is_empty() => ok(json!({"version": "9.2"})),
            _ => Err(TransportError::Io {
                method: r.method,
                path: r.path.clone(),
                message: "no route".into(),
            }),
        }
    }
}

fn scope() -> ReadScope {
    ReadScope {
        storages: BTreeSet::from([(
            NodeName::new("pve1").unwrap(),
            StorageId::new("local").unwrap(),
        )]),
        ..ReadScope::default()
    }
}

#[test]
fn recording_then_replay_gives_the_same_snapshot() {
    let rec = RecordingTransport::new(ClusterName::new("lab").unwrap(), Scripted);
    let live = read_snapshot(&rec, &scope()).unwrap();
    let text = rec.to_json();
    let replayed = read_snapshot(
        &ReplayTransport::from_json(text.as_bytes()).unwrap(),
        &scope(),
    )
    .unwrap();
    assert_eq!(live, replayed);
    assert!(
        replayed
            .failures
            .iter()
            .any(|f| f.message.contains("got timeout")),
        "a recorded failure replays as a failure"
    );
}

#[test]
fn recording_is_sorted_pretty_and_stable() {
    let rec = RecordingTransport::new(ClusterName::new("lab").unwrap(), Scripted);
    read_snapshot(&rec, &scope()).unwrap();
    let a = rec.to_json();
    let parsed = Recording::from_json(a.as_bytes()).unwrap();
    let paths: Vec<&str> = parsed.responses.iter().map(|r| r.path.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    assert_eq!(parsed.to_json(), a, "re-serialising gives the same bytes");
    assert!(a.starts_with("{\n  \"format\": \"proxops-recording/v1\",\n  \"cluster\": \"lab\",\n"));
    assert!(a.contains("\"reason\": \"got timeout\""));
}

#[test]
fn a_recording_never_holds_tickets_or_access_answers() {
    let rec = RecordingTransport::new(ClusterName::new("lab").unwrap(), Scripted);
    rec.call(&Request::new(
        Method::Post,
        "/access/ticket",
        vec![("password".into(), "hunter2".into())],
    ))
    .unwrap();
    rec.call(&Request::get("/access/permissions")).unwrap();
    rec.call(&Request::get("/cluster/resources")).unwrap();
    let text = rec.to_json();
    assert!(!text.contains("SECRET") && !text.contains("hunter2") && !text.contains("/access"));
    assert_eq!(rec.into_recording().responses.len(), 1);
}

#[test]
fn query_is_recorded_in_send_order_and_must_match_on_replay() {
    let rec = RecordingTransport::new(ClusterName::new("lab").unwrap(), Scripted);
    let req = Request::new(
        Method::Get,
        "/version",
        vec![("b".into(), "x y".into()), ("a".into(), "1".into())],
    );
    rec.call(&req).unwrap();
    let r = rec.into_recording();
    assert_eq!(r.responses[0].query, "b=x%20y&a=1");
    let replay = ReplayTransport::from_recording(r);
    assert!(replay.call(&req).is_ok());
    let swapped = Request::new(
        Method::Get,
        "/version",
        vec![("a".into(), "1".into()), ("b".into(), "x y".into())],
    );
    assert!(matches!(
        replay.call(&swapped),
        Err(TransportError::NotRecorded { .. })
    ));
    assert!(matches!(
        replay.call(&Request::get("/version")),
        Err(TransportError::NotRecorded { .. })
    ));
}

#[test]
fn malformed_recordings_are_rejected_with_the_field_named() {
    for (bad, field) in [
        (
            json!({"format": "other/v9", "cluster": "lab", "responses": []}),
            "format",
        ),
        (
            json!({"format": "proxops-recording/v1", "cluster": "Bad Name", "responses": []}),
            "cluster",
        ),
        (
            json!({"format": "proxops-recording/v1", "cluster": "lab", "responses": [{"method": "GET", "path": "/x", "status": 200}]}),
            "responses[0].body",
        ),
        (
            json!({"format": "proxops-recording/v1", "cluster": "lab", "responses": [{"method": "FETCH", "path": "/x", "status": 200, "body": {}}]}),
            "responses[0].method",
        ),
    ] {
        let e = Recording::from_json(bad.to_string().as_bytes()).unwrap_err();
        assert!(e.to_string().contains(field), "{e}");
    }
    assert!(Recording::from_json(b"not json").is_err());
}
