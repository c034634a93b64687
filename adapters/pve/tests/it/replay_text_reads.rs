//! A recording read from its text (the inventory's rows cut to the members
//! the reader reads, configs read without `Value` trees) gives the
//! snapshot the same recording gives read into `Value` trees: over every
//! recording the project ships and over generated inventories with every
//! kind of row and member.
#![allow(clippy::unwrap_used)]
// Reads the fixtures from disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use proptest::prelude::*;
use proxops_core::live::LiveSnapshot;
use proxops_pve::reader::{ROW_MEMBERS, ReadScope, read_snapshot};
use proxops_pve::recording::Recording;
use proxops_pve::replay::ReplayTransport;
use serde_json::{Value, json};

/// The snapshot read from the recording's text and from its trees, which
/// must agree (a failed read as its error's text).
fn both_ways(recording: &[u8]) -> (Result<LiveSnapshot, String>, Result<LiveSnapshot, String>) {
    let scope = ReadScope {
        concurrency: 4,
        ..ReadScope::default()
    };
    let text = ReplayTransport::from_json(recording).unwrap();
    let trees = ReplayTransport::from_recording(Recording::from_json(recording).unwrap());
    let read = |t: &ReplayTransport| read_snapshot(t, &scope).map_err(|e| e.to_string());
    (read(&text), read(&trees))
}

#[test]
fn every_shipped_recording_reads_the_same_from_text() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut stack = vec![root];
    let mut read = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            if p.extension().is_none_or(|e| e != "json") || Recording::from_json(&bytes).is_err() {
                continue;
            }
            let (text, trees) = both_ways(&bytes);
            assert_eq!(text, trees, "{}", p.display());
            read += 1;
        }
    }
    assert!(read >= 4, "only {read} recordings");
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (0u64..2_000).prop_map(Value::from),
        (-5i64..5).prop_map(Value::from),
        (-1e3f64..1e3).prop_map(Value::from),
        prop_oneof![
            Just("node"),
            Just("qemu"),
            Just("lxc"),
            Just("storage"),
            Just("pve1"),
            Just("online"),
            Just("running"),
            Just("1"),
            Just("0"),
            Just("a;b"),
            Just("105"),
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(1, 4, 2, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..2).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,2}", inner, 0..2)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn member() -> impl Strategy<Value = String> {
    let mut names: Vec<&str> = ROW_MEMBERS.to_vec();
    names.extend(["cpu", "maxmem", "id"]);
    prop_oneof![
        prop::sample::select(names).prop_map(str::to_owned),
        "[a-z]{1,4}",
    ]
}

/// A row as JSON text: an object (members may repeat) or any other value.
fn row() -> impl Strategy<Value = String> {
    let guest = (
        prop::sample::select(vec!["qemu", "lxc"]),
        prop::sample::select(vec!["pve1", "pve2"]),
        100u64..110,
        prop::collection::vec((member(), json_value()), 0..4),
    )
        .prop_map(|(kind, node, id, extra)| {
            let mut members = vec![
                format!("\"type\":\"{kind}\""),
                format!("\"node\":\"{node}\""),
                format!("\"vmid\":{id}"),
            ];
            members.extend(
                extra
                    .iter()
                    .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str()))),
            );
            format!("{{{}}}", members.join(","))
        });
    let any_object = prop::collection::vec((member(), json_value()), 0..6).prop_map(|m| {
        let members: Vec<String> = m
            .iter()
            .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str())))
            .collect();
        format!("{{{}}}", members.join(","))
    });
    prop_oneof![
        4 => guest,
        2 => any_object,
        1 => json_value().prop_map(|v| v.to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_generated_inventory_reads_the_same_from_text(
        rows in prop::collection::vec(row(), 0..8),
        status in prop::sample::select(vec![200u16, 200, 200, 500]),
    ) {
        let nodes = r#"{"type":"node","node":"pve1","status":"online"},{"type":"node","node":"pve2","status":"online"}"#;
        let inventory = format!(r#"{{"data":[{nodes}{}{}]}}"#, if rows.is_empty() { "" } else { "," }, rows.join(","));
        let mut responses = vec![json!({
            "method": "GET", "path": "/cluster/resources", "query": "", "status": status,
            "reason": "OK", "body": serde_json::from_str::<Value>(&inventory).unwrap(),
        })];
        for node in ["pve1", "pve2"] {
            for kind in ["qemu", "lxc"] {
                for id in 100..110 {
                    responses.push(json!({
                        "method": "GET", "path": format!("/nodes/{node}/{kind}/{id}/config"),
                        "query": "", "status": 200, "reason": "OK",
                        "body": {"data": {"name": format!("g{id}"), "cores": id % 3, "onboot": id % 2 == 0}},
                    }));
                }
            }
        }
        let recording = json!({"format": "proxops-recording/v1", "cluster": "lab", "responses": responses});
        // The inventory as generated, not as serde_json would print it
        // again: members named twice stay named twice.
        let text = recording
            .to_string()
            .replacen(&serde_json::from_str::<Value>(&inventory).unwrap().to_string(), &inventory, 1);
        prop_assert!(text.contains(&inventory), "the inventory stands as generated");
        let (fast, trees) = both_ways(text.as_bytes());
        prop_assert_eq!(fast, trees);
    }
}
