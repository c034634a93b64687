//! `--log-format json`: every log line is one JSON object with an RFC 3339
//! UTC timestamp, and counts, flags and durations keep their JSON types.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::Value;

/// Whether `ts` is `YYYY-MM-DDTHH:MM:SS.mmmZ` with each part in range.
fn is_rfc3339_utc_millis(ts: &str) -> bool {
    let b = ts.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = ts.get(range)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    b.len() == 24
        && (b[4], b[7], b[10], b[13], b[16], b[19], b[23])
            == (b'-', b'-', b'T', b':', b':', b'.', b'Z')
        && digits(0..4).is_some_and(|y| y >= 2020)
        && digits(5..7).is_some_and(|m| (1..=12).contains(&m))
        && digits(8..10).is_some_and(|d| (1..=31).contains(&d))
        && digits(11..13).is_some_and(|h| h < 24)
        && digits(14..16).is_some_and(|m| m < 60)
        && digits(17..19).is_some_and(|s| s < 61)
        && digits(20..23).is_some()
}

#[test]
fn the_timestamp_check_accepts_only_the_documented_form() {
    assert!(is_rfc3339_utc_millis("2026-12-01T20:39:29.123Z"));
    for bad in [
        "2026-12-01T20:39:29Z",
        "2026-12-01 20:39:29.123Z",
        "2026-13-01T20:39:29.123Z",
        "2026-12-01T20:39:29.123+00:00",
        "",
    ] {
        assert!(!is_rfc3339_utc_millis(bad), "{bad}");
    }
}

#[test]
fn json_log_lines_carry_a_timestamp_and_typed_fields() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let before = std::time::SystemTime::now();
    let run = proxops(
        &pve,
        &repo,
        &[
            "--log-format",
            "json",
            "--log-level",
            "debug",
            "apply",
            "--yes",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.all());
    let lines: Vec<Value> = run
        .stderr
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!lines.is_empty(), "{}", run.all());

    let year = 1970
        + before
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            / 31_556_952;
    for line in &lines {
        let ts = line["ts"]
            .as_str()
            .unwrap_or_else(|| panic!("no ts: {line}"));
        assert!(is_rfc3339_utc_millis(ts), "{ts}");
        assert!(ts.starts_with(&year.to_string()), "{ts} is not this year's");
        assert!(
            line["level"].is_string() && line["msg"].is_string(),
            "{line}"
        );
    }

    let with_msg =
        |msg: &str| -> Vec<&Value> { lines.iter().filter(|l| l["msg"] == msg).collect() };
    let requests = with_msg("pve.request");
    assert!(!requests.is_empty(), "{}", run.all());
    for r in &requests {
        assert!(r["status"].is_u64(), "{r}");
        assert!(r["attempt"].is_u64(), "{r}");
        assert!(r["duration_ms"].is_u64(), "{r}");
        assert!(r.get("duration").is_none(), "the unit is in the key: {r}");
        assert!(r["path"].is_string(), "{r}");
    }
    let actions = with_msg("proxops.action");
    assert!(!actions.is_empty(), "{}", run.all());
    for a in &actions {
        assert_eq!(a["ok"], Value::Bool(true), "{a}");
        assert!(a["duration_ms"].is_u64(), "{a}");
    }
}

#[test]
fn text_log_lines_keep_their_key_value_shape() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&[]);
    let run = proxops(&pve, &repo, &["--log-level", "debug", "diff"]);
    assert_eq!(run.code, 0, "{}", run.all());
    let request = run
        .stderr
        .lines()
        .find(|l| l.starts_with("debug pve.request "))
        .unwrap_or_else(|| panic!("{}", run.all()));
    assert!(
        request.contains(" status=200 result=success duration=") && request.ends_with(" attempt=0"),
        "{request}"
    );
    assert!(!request.contains("\"ts\""), "{request}");
}
