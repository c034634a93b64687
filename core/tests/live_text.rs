//! Configs read straight from an answer's text are the configs the `Value`
//! readers make, or nothing (and the caller reads the `Value` way): over
//! every recorded config answer the project ships and over generated
//! answers with every kind of JSON value, repeated members and missing
//! keys. Answers of the usual shape must be read the fast way, or the
//! fast way would be dead weight.

#![allow(clippy::unwrap_used)]
// Reads the fixtures from disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/walk.rs"]
mod walk;

use proptest::prelude::*;
use proxops_core::live::LiveConfig;
use serde_json::Value;

/// The two readings of a `/pending` body agree, or the text one stands
/// aside. `Some(read)` when the text reader read it.
fn pending_agree(body: &str) -> Result<Option<LiveConfig>, String> {
    let fast = LiveConfig::from_pending_body(body);
    let Some(fast) = fast else {
        return Ok(None);
    };
    let value: Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let data = value.get("data").unwrap_or(&Value::Null);
    match LiveConfig::from_pending_json(data) {
        Ok(slow) if slow == fast => Ok(Some(fast)),
        other => Err(format!("{body}\ntext: {fast:?}\nvalue: {other:?}")),
    }
}

fn config_agree(body: &str) -> Result<Option<LiveConfig>, String> {
    let Some(fast) = LiveConfig::from_config_body(body) else {
        return Ok(None);
    };
    let value: Value = serde_json::from_str(body).map_err(|e| e.to_string())?;
    let data = value.get("data").unwrap_or(&Value::Null);
    match LiveConfig::from_json(data) {
        Ok(slow) if slow == fast => Ok(Some(fast)),
        other => Err(format!("{body}\ntext: {fast:?}\nvalue: {other:?}")),
    }
}

#[test]
fn every_shipped_config_answer_reads_the_same_and_the_fast_way() {
    let (mut pending, mut config) = (0, 0);
    for p in walk::files(&walk::fixtures("live")) {
        if p.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let doc: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        for r in doc["responses"].as_array().into_iter().flatten() {
            let (Some(path), Some(status)) = (r["path"].as_str(), r["status"].as_u64()) else {
                continue;
            };
            if !(200..300).contains(&status) {
                continue;
            }
            let body = r["body"].to_string();
            if path.ends_with("/pending") {
                let read = pending_agree(&body).unwrap();
                assert!(read.is_some(), "{}: {path} not read from text", p.display());
                pending += 1;
            } else if path.ends_with("/config") && path.contains("/nodes/") {
                let read = config_agree(&body).unwrap();
                assert!(read.is_some(), "{}: {path} not read from text", p.display());
                config += 1;
            }
        }
    }
    assert!(
        pending >= 1 && config >= 10,
        "{pending} pending, {config} config answers"
    );
}

/// Any JSON value a config answer might hold, and some it should not.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        Just(Value::from(2.0)),
        "[a-z0-9=,:. \\\\\"é\n-]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..2)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// An object's members as text, repeated names allowed.
fn object_text(members: &[(String, Value)]) -> String {
    let inner: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), v))
        .collect();
    format!("{{{}}}", inner.join(","))
}

fn member_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("key".to_owned()),
        Just("value".to_owned()),
        Just("pending".to_owned()),
        Just("delete".to_owned()),
        Just("digest".to_owned()),
        "[a-z]{1,6}[0-9]?",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_generated_pending_answer_reads_the_same_or_is_left_to_the_value_reader(
        entries in prop::collection::vec(
            prop::collection::vec((member_name(), json_value()), 0..5),
            0..6,
        ),
        around in prop::collection::vec(("[a-z]{1,5}", json_value()), 0..2),
    ) {
        let items: Vec<String> = entries.iter().map(|e| object_text(e)).collect();
        let mut members = around;
        members.push(("data".into(), Value::Null));
        let body = object_text(&members)
            .replace("\"data\":null", &format!("\"data\":[{}]", items.join(",")));
        prop_assert_eq!(pending_agree(&body).map(|_| ()), Ok(()));
    }

    #[test]
    fn a_generated_config_answer_reads_the_same_or_is_left_to_the_value_reader(
        members in prop::collection::vec((member_name(), json_value()), 0..8),
    ) {
        let body = format!("{{\"data\":{}}}", object_text(&members));
        prop_assert_eq!(config_agree(&body).map(|_| ()), Ok(()));
    }

    /// The usual shape (scalars, each member once) is read from text.
    #[test]
    fn the_usual_answers_are_read_from_text(
        keys in prop::collection::btree_map(
            "[a-z]{1,6}[0-9]?",
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                "[a-z0-9=,:. -]{0,12}".prop_map(Value::from),
            ],
            0..12,
        ),
        queued in any::<prop::sample::Index>(),
    ) {
        let members: Vec<(String, Value)> = keys.clone().into_iter().collect();
        let body = format!("{{\"data\":{}}}", object_text(&members));
        prop_assert!(config_agree(&body).unwrap().is_some(), "{}", body);
        let pick = if keys.is_empty() { None } else { Some(queued.index(keys.len())) };
        let items: Vec<String> = keys
            .iter()
            .enumerate()
            .map(|(i, (k, v))| {
                let mut e = vec![("key".to_owned(), Value::from(k.as_str())), ("value".to_owned(), v.clone())];
                if Some(i) == pick {
                    e.push(("pending".to_owned(), Value::from("new")));
                    e.push(("delete".to_owned(), Value::from(0)));
                }
                object_text(&e)
            })
            .collect();
        let body = format!("{{\"data\":[{}]}}", items.join(","));
        prop_assert!(pending_agree(&body).unwrap().is_some(), "{}", body);
    }
}

#[test]
fn what_the_value_reader_reads_differently_is_left_to_it() {
    for body in [
        r#"{"data":{"cores":2.5}}"#,
        r#"{"data":{"net0":["a","b"]}}"#,
        r#"{"data":{"cores":1,"cores":null}}"#,
        r#"{"data":{}, "data":{}}"#,
        r#"{"errors":{}}"#,
        r#"{"data":null}"#,
        r#"[1]"#,
    ] {
        assert!(LiveConfig::from_config_body(body).is_none(), "{body}");
    }
    for body in [
        r#"{"data":[{"key":"cores","value":2.5}]}"#,
        r#"{"data":[{"key":"cores","key":"memory"}]}"#,
        r#"{"data":[{"value":1}]}"#,
        r#"{"data":[1]}"#,
        r#"{"data":{}}"#,
    ] {
        assert!(LiveConfig::from_pending_body(body).is_none(), "{body}");
    }
}
