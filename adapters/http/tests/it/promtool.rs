//! The metrics exposition checked by the real `promtool check metrics`
//! (Debian package prometheus, installed by tools/install-test-tools.sh),
//! and counters that move between two scrapes.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::io::Write;
use std::process::{Command, Stdio};

use proxops_core::report::render_metrics;
use support::{START, store, tool};

/// Runs `promtool check metrics` on `text`; returns (success, output).
fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new(tool("promtool", "prometheus"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
        .parse()
        .unwrap()
}

#[test]
fn promtool_accepts_the_metrics_of_a_realistic_store_without_a_lint_finding() {
    let text = render_metrics(&store(), START + 20);
    let (ok, said) = promtool_check(&text);
    assert!(
        ok,
        "promtool check metrics failed:\n{said}\n--- metrics ---\n{text}"
    );
    assert_eq!(said.trim(), "", "promtool had something to say:\n{said}");
}

#[test]
fn promtool_accepts_the_metrics_of_a_fresh_process() {
    let text = render_metrics(&proxops_core::report::StatusStore::new(START), START);
    let (ok, said) = promtool_check(&text);
    assert!(
        ok,
        "promtool check metrics failed:\n{said}\n--- metrics ---\n{text}"
    );
}

#[test]
fn promtool_really_checks_a_counter_without_total_is_rejected() {
    // The control: the check above would be worthless if promtool passed anything.
    let bad = "# HELP proxops_cycles Cycles.\n# TYPE proxops_cycles counter\nproxops_cycles 1\n";
    let (ok, said) = promtool_check(bad);
    assert!(!ok, "promtool accepted a counter without _total: {said}");
}

#[test]
fn counters_move_between_two_scrapes_after_a_second_cycle() {
    let mut s = store();
    let first = render_metrics(&s, START + 20);
    s.record_cycle(support::cycle(START + 30));
    s.add_pve_requests(&[("GET".into(), "ok".into(), 12)]);
    let second = render_metrics(&s, START + 50);
    assert!(promtool_check(&second).0);

    let moved = [
        (r#"proxops_cycles_total{result="ok"}"#, 1, 2),
        (r#"proxops_cycles_total{result="pve_read_error"}"#, 1, 2),
        (
            r#"proxops_actions_total{kind="VM",action="create",result="ok"}"#,
            1,
            2,
        ),
        (
            r#"proxops_actions_total{kind="LXC",action="update",result="error"}"#,
            1,
            2,
        ),
        (r#"proxops_prune_deferred_total{kind="VM"}"#, 1, 2),
        (r#"proxops_anomalies_total{type="live_only_slot"}"#, 1, 2),
        (
            r#"proxops_pve_requests_total{method="GET",result="ok"}"#,
            40,
            52,
        ),
        ("proxops_cycle_duration_seconds_count", 1, 2),
    ];
    for (series, before, after) in moved {
        assert_eq!(
            (sample(&first, series), sample(&second, series)),
            (before, after),
            "{series}"
        );
    }
    // Gauges follow the last cycle rather than adding up.
    assert_eq!(
        sample(&second, r#"proxops_objects{kind="VM",state="converged"}"#),
        1
    );
    assert_eq!(sample(&second, "proxops_pve_last_read_age_seconds"), 17);
}

#[test]
fn promtool_accepts_a_fractional_duration_sum() {
    let mut s = store();
    let mut quick = support::cycle(START + 30);
    quick.duration_ms = 250;
    s.record_cycle(quick);
    let text = render_metrics(&s, START + 50);
    assert!(
        text.contains("proxops_cycle_duration_seconds_sum 12.250\n"),
        "{text}"
    );
    let (ok, said) = promtool_check(&text);
    assert!(ok, "{said}\n{text}");
}

/// The alert rules of docs/operations.md: the YAML block that starts with
/// `groups:`.
fn documented_rules() -> String {
    let doc =
        std::fs::read_to_string(support::workspace_root().join("docs/operations.md")).unwrap();
    let mut blocks = doc
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap());
    blocks
        .find(|b| b.starts_with("groups:"))
        .expect("docs/operations.md has no ```yaml block starting with groups:")
        .to_owned()
}

#[test]
fn the_documented_alert_rules_pass_promtool_check_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxops-rules.yaml");
    std::fs::write(&path, documented_rules()).unwrap();
    let out = Command::new(tool("promtool", "prometheus"))
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check rules failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_documented_alert_rules_name_only_metrics_we_export() {
    let exported = render_metrics(&store(), START);
    let rules = documented_rules();
    let mut names: Vec<&str> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("proxops_"))
        .collect();
    names.sort_unstable();
    names.dedup();
    assert!(!names.is_empty());
    for name in names {
        assert!(
            exported.contains(&format!("# TYPE {name} ")),
            "the rules use {name}, which /metrics does not export"
        );
    }
}
