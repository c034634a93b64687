//! The status store over cycles and its renderings: snapshots of `/status`
//! and `/metrics` for a hand-built two-cluster store, determinism, counters
//! that move, `last_converged_at` carried across cycles, aborted clusters
//! keeping their last known records, and label escaping.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proxops_core::action::{AnomalyType, Change, Impact};
use proxops_core::exec::{ObjectReport, ObjectState};
use proxops_core::plan::AbortCause;
use proxops_core::report::{
    ActionKey, ActionResult, ClusterReport, CycleCounts, CycleReport, CycleResult, PendingAction,
    RunMode, StatusStore, escape_label_value, render_metrics, render_status_json,
};

const START: u64 = 1_798_675_200; // 2026-12-31T00:00:00Z

fn obj(kind: &str, name: &str, node: &str, id: &str, state: ObjectState) -> ObjectReport {
    ObjectReport {
        kind: kind.into(),
        name: name.into(),
        node: node.into(),
        id: id.into(),
        state,
        last_action: None,
        last_error: None,
        prune_reason: None,
        last_converged_at: None,
    }
}

fn key(kind: &str, action: &str, result: ActionResult) -> ActionKey {
    ActionKey {
        kind: kind.into(),
        action: action.into(),
        result,
    }
}

/// Cycle 1: `prod` creates a VM, fails an LXC update, prunes an old VM,
/// defers another prune and has a data-loss anomaly; `lab` cannot read PVE.
fn first_cycle() -> CycleReport {
    let mut web = obj("VM", "web", "pve1", "100", ObjectState::Converged);
    web.last_action = Some("create".into());
    web.last_converged_at = Some(START + 40);
    let mut db = obj("LXC", "db", "pve2", "200", ObjectState::Failed);
    db.last_action = Some("update".into());
    db.last_error =
        Some("PVE 500: can't lock file '/run/lock/lxc/pve-config-200.conf' - got timeout".into());
    let mut old = obj("VM", "old", "pve1", "300", ObjectState::Pruned);
    old.last_action = Some("prune".into());
    old.prune_reason = Some("tagged proxops-managed, no manifest".into());
    let mut iso = obj(
        "ISO",
        "debian",
        "pve1",
        "local:iso/debian-13.iso",
        ObjectState::Anomalous,
    );
    iso.last_error = Some("checksum differs; ProxOps never replaces a storage file".into());
    let prod = ClusterReport {
        name: "prod".into(),
        result: CycleResult::Ok,
        aborted: false,
        abort_reason: String::new(),
        counts: CycleCounts {
            objects: 4,
            actions_ok: 2,
            actions_error: 1,
            pruned: 1,
            prune_deferred: 1,
            skipped: 0,
            anomalies: 1,
        },
        objects: vec![web, db, old, iso],
        anomalies: BTreeMap::from([(AnomalyType::DataLoss, 1)]),
        actions: BTreeMap::from([
            (key("VM", "create", ActionResult::Ok), 1),
            (key("VM", "prune", ActionResult::Ok), 1),
            (key("LXC", "update", ActionResult::Error), 1),
        ]),
        prune_deferred: BTreeMap::from([("VM".to_owned(), 1)]),
        desired_stale: false,
        read_only: false,
        pve_read_at: Some(START + 10),
        pending: Vec::new(),
        self_guests: Vec::new(),
        planned: Vec::new(),
        object_anomalies: Vec::new(),
        manifests: BTreeMap::new(),
        holds: Vec::new(),
        elapsed_ms: 0,
    };
    let lab = ClusterReport::aborted(
        "lab",
        AbortCause::PveRead,
        "pve inventory read failed: connection refused",
    );
    CycleReport {
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        started_at: START,
        finished_at: START + 45,
        duration_ms: 45_000,
        complete: true,
        git_fetched_at: Some(START + 2),
        clusters: vec![lab, prod],
    }
}

/// Cycle 2: `prod` converges the LXC; the VM needs nothing (converged, no
/// timestamp given); the pruned VM is gone; `lab` reads again.
fn second_cycle() -> CycleReport {
    let mut db = obj("LXC", "db", "pve2", "200", ObjectState::Converged);
    db.last_action = Some("update".into());
    db.last_converged_at = Some(START + 100);
    let web = obj("VM", "web", "pve1", "100", ObjectState::Converged);
    let mut iso = obj(
        "ISO",
        "debian",
        "pve1",
        "local:iso/debian-13.iso",
        ObjectState::Anomalous,
    );
    iso.last_error = Some("checksum differs; ProxOps never replaces a storage file".into());
    let prod = ClusterReport {
        name: "prod".into(),
        result: CycleResult::Ok,
        aborted: false,
        abort_reason: String::new(),
        counts: CycleCounts {
            objects: 3,
            actions_ok: 1,
            anomalies: 1,
            ..CycleCounts::default()
        },
        objects: vec![db, web, iso],
        anomalies: BTreeMap::from([(AnomalyType::DataLoss, 1)]),
        actions: BTreeMap::from([(key("LXC", "update", ActionResult::Ok), 1)]),
        prune_deferred: BTreeMap::new(),
        desired_stale: true,
        read_only: false,
        pve_read_at: Some(START + 95),
        pending: Vec::new(),
        self_guests: Vec::new(),
        planned: Vec::new(),
        object_anomalies: Vec::new(),
        manifests: BTreeMap::new(),
        holds: Vec::new(),
        elapsed_ms: 0,
    };
    let mut lab = ClusterReport::aborted("lab", AbortCause::PveRead, "");
    lab.result = CycleResult::DryRun;
    lab.aborted = false;
    lab.objects = vec![obj("VM", "scratch", "lab1", "900", ObjectState::Drift)];
    lab.pending = vec![PendingAction {
        kind: "VM".into(),
        name: "scratch".into(),
        node: "lab1".into(),
        id: "900".into(),
        action: "update",
        impact: Impact::Reboot,
        reason: "VM/scratch: config differs".into(),
        changes: vec![Change::new(
            "memory",
            Some("1024".into()),
            Some("2048".into()),
        )],
    }];
    lab.counts.objects = 1;
    lab.pve_read_at = Some(START + 92);
    CycleReport {
        commit: "89abcdef0123456789abcdef0123456789abcdef".into(),
        started_at: START + 90,
        finished_at: START + 102,
        duration_ms: 12_000,
        complete: true,
        git_fetched_at: None,
        clusters: vec![lab, prod],
    }
}

fn store_after_first() -> StatusStore {
    let mut s = StatusStore::new(START - 60);
    s.record_cycle(first_cycle());
    s.add_pve_requests(&[
        ("GET".into(), "ok".into(), 41),
        ("POST".into(), "ok".into(), 3),
        ("PUT".into(), "error".into(), 1),
    ]);
    s
}

#[test]
fn status_json_after_one_cycle() {
    insta::assert_snapshot!(render_status_json(&store_after_first(), START + 50));
}

#[test]
fn metrics_after_one_cycle() {
    insta::assert_snapshot!(render_metrics(&store_after_first(), START + 50));
}

#[test]
fn status_json_before_any_cycle_has_a_null_last_cycle_and_no_objects() {
    let s = StatusStore::new(START);
    let v: serde_json::Value = serde_json::from_str(&render_status_json(&s, START)).unwrap();
    assert_eq!(v["process_start"], "2026-12-31T00:00:00Z");
    assert!(v["last_cycle"].is_null());
    assert_eq!(v["objects"], serde_json::json!([]));
}

#[test]
fn status_json_has_exactly_the_documented_fields_in_order() {
    let text = render_status_json(&store_after_first(), START + 50);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys = |o: &serde_json::Value| o.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(&v),
        [
            "mode",
            "state",
            "starting",
            "process_start",
            "last_cycle",
            "objects",
            "clusters",
            "recent_cycles",
            "notifications"
        ]
    );
    assert_eq!(
        keys(&v["last_cycle"]),
        [
            "commit",
            "started_at",
            "finished_at",
            "objects",
            "actions_ok",
            "actions_error",
            "pruned",
            "prune_deferred",
            "skipped",
            "anomalies",
            "desired_stale",
            "read_only",
            "aborted",
            "abort_reason"
        ]
    );
    for o in v["objects"].as_array().unwrap() {
        assert_eq!(
            keys(o),
            [
                "cluster",
                "kind",
                "name",
                "node",
                "id",
                "state",
                "last_action",
                "last_error",
                "last_converged_at",
                "prune_reason",
                "updated_at",
                "pending",
                "manifest",
                "planned_at",
                "planned",
                "anomalies"
            ]
        );
    }
    assert_eq!(
        v["last_cycle"]["abort_reason"],
        "lab: pve inventory read failed: connection refused"
    );
    assert_eq!(v["objects"][3]["id"], 100, "guest ids are numbers");
    assert_eq!(
        v["objects"][0]["id"], "local:iso/debian-13.iso",
        "storage files are strings"
    );
}

#[test]
fn renderings_are_deterministic_whatever_the_order_of_input() {
    let a = store_after_first();
    let mut cycle = first_cycle();
    cycle.clusters.reverse();
    for c in &mut cycle.clusters {
        c.objects.reverse();
    }
    let mut b = StatusStore::new(START - 60);
    b.record_cycle(cycle);
    b.add_pve_requests(&[
        ("PUT".into(), "error".into(), 1),
        ("POST".into(), "ok".into(), 3),
        ("GET".into(), "ok".into(), 41),
    ]);
    assert_eq!(
        render_metrics(&a, START + 50),
        render_metrics(&b, START + 50)
    );
    let strip_clusters = |s: String| {
        let mut v: serde_json::Value = serde_json::from_str(&s).unwrap();
        v.as_object_mut().unwrap().remove("clusters");
        v
    };
    // Objects are sorted by key; only the additive per-cluster list keeps cycle order.
    assert_eq!(
        strip_clusters(render_status_json(&a, START + 50)),
        strip_clusters(render_status_json(&b, START + 50))
    );
    assert_eq!(
        render_status_json(&a, START + 50),
        render_status_json(&a.clone(), START + 50)
    );
}

#[test]
fn status_json_after_a_second_cycle() {
    let mut s = store_after_first();
    s.record_cycle(second_cycle());
    insta::assert_snapshot!(render_status_json(&s, START + 110));
}

#[test]
fn last_converged_at_is_kept_when_an_object_stops_converging_and_set_when_it_converges_without_an_action()
 {
    let mut s = store_after_first();
    let mut second = second_cycle();
    // prod/VM/web drifts in cycle 2: its earlier convergence time stays.
    second.clusters[1].objects[1].state = ObjectState::Drift;
    s.record_cycle(second);
    let web = s.object("prod", "VM", "web").unwrap();
    assert_eq!(web.report.last_converged_at, Some(START + 40));
    assert_eq!(web.updated_at, START + 102);

    let mut s = store_after_first();
    s.record_cycle(second_cycle());
    // Converged without an action and without a timestamp: the cycle's end.
    assert_eq!(
        s.object("prod", "VM", "web")
            .unwrap()
            .report
            .last_converged_at,
        Some(START + 102)
    );
    assert_eq!(
        s.object("prod", "LXC", "db")
            .unwrap()
            .report
            .last_converged_at,
        Some(START + 100)
    );
    assert!(
        s.object("prod", "VM", "old").is_none(),
        "a pruned object shows once, then leaves the store"
    );
}

#[test]
fn an_aborted_cluster_keeps_its_last_known_records() {
    let mut s = store_after_first();
    s.record_cycle(second_cycle());
    let mut third = second_cycle();
    third.started_at = START + 200;
    third.finished_at = START + 210;
    third.clusters[0] = ClusterReport::aborted(
        "lab",
        AbortCause::NotReady,
        "git sync failed and no previous good tree",
    );
    s.record_cycle(third);
    let scratch = s.object("lab", "VM", "scratch").unwrap();
    assert_eq!(scratch.updated_at, START + 102);
    assert_eq!(s.cycles_total(CycleResult::NotReady), 1);
}

/// The value of `series` in a metrics text, as written.
fn sample(text: &str, series: &str) -> String {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(series)
                .and_then(|r| r.strip_prefix(' '))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no series {series} in\n{text}"))
}

#[test]
fn counters_move_with_a_second_cycle_and_gauges_follow_the_last() {
    let mut s = store_after_first();
    let before = render_metrics(&s, START + 50);
    s.record_cycle(second_cycle());
    s.add_pve_requests(&[("GET".into(), "ok".into(), 9)]);
    let after = render_metrics(&s, START + 110);
    assert_eq!(sample(&before, r#"proxops_cycles_total{result="ok"}"#), "1");
    assert_eq!(sample(&after, r#"proxops_cycles_total{result="ok"}"#), "2");
    assert_eq!(
        sample(&after, r#"proxops_cycles_total{result="dry_run"}"#),
        "1"
    );
    assert!(!before.contains(r#"proxops_actions_total{kind="LXC",action="update",result="ok"}"#));
    assert_eq!(
        sample(
            &after,
            r#"proxops_actions_total{kind="LXC",action="update",result="ok"}"#
        ),
        "1"
    );
    assert_eq!(
        sample(
            &after,
            r#"proxops_actions_total{kind="LXC",action="update",result="error"}"#
        ),
        "1"
    );
    assert_eq!(
        sample(&before, r#"proxops_anomalies_total{type="data_loss"}"#),
        "1"
    );
    assert_eq!(
        sample(&after, r#"proxops_anomalies_total{type="data_loss"}"#),
        "2"
    );
    assert_eq!(
        sample(
            &after,
            r#"proxops_pve_requests_total{method="GET",result="ok"}"#
        ),
        "50"
    );
    assert_eq!(
        sample(&after, r#"proxops_cycle_duration_seconds_count"#),
        "2"
    );
    assert_eq!(
        sample(&after, r#"proxops_cycle_duration_seconds_sum"#),
        "57.000"
    );
    assert_eq!(sample(&before, "proxops_desired_stale"), "0");
    assert_eq!(sample(&after, "proxops_desired_stale"), "1");
    // No fetch in cycle 2: the age counts from the fetch in cycle 1.
    assert_eq!(sample(&after, "proxops_git_last_fetch_age_seconds"), "108");
    assert_eq!(sample(&after, "proxops_pve_last_read_age_seconds"), "15");
    assert_eq!(
        sample(&after, r#"proxops_objects{kind="VM",state="pruned"}"#),
        "0"
    );
    assert_eq!(
        sample(&before, r#"proxops_objects{kind="VM",state="pruned"}"#),
        "1"
    );
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape_label_value(r#"a\b"c"#), r#"a\\b\"c"#);
    assert_eq!(escape_label_value("two\nlines"), "two\\nlines");
    assert_eq!(escape_label_value("plain VM"), "plain VM");
    assert_eq!(escape_label_value("line\n"), "line\\n");
}

/// The store after the second cycle, whose `lab` cluster was a dry run with
/// one pending update.
fn store_after_second() -> StatusStore {
    let mut s = StatusStore::new(START - 60);
    s.record_cycle(first_cycle());
    s.record_cycle(second_cycle());
    s
}

#[test]
fn a_dry_run_cluster_shows_its_pending_actions_in_status_and_metrics() {
    let s = store_after_second();
    let v: serde_json::Value = serde_json::from_str(&render_status_json(&s, START + 110)).unwrap();
    assert_eq!(v["mode"], "apply");
    let scratch = v["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "scratch")
        .unwrap();
    assert_eq!(scratch["pending"][0]["action"], "update");
    assert_eq!(scratch["pending"][0]["impact"], "reboot");
    assert_eq!(scratch["pending"][0]["changes"][0]["field"], "memory");
    assert_eq!(scratch["pending"][0]["changes"][0]["to"], "2048");
    let web = v["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "web")
        .unwrap();
    assert_eq!(web["pending"], serde_json::json!([]));
    assert_eq!(v["clusters"][0]["name"], "lab");
    assert_eq!(v["clusters"][0]["pending_actions"]["update"], 1);
    assert_eq!(v["clusters"][0]["pending_actions"]["create"], 0);

    let m = render_metrics(&s, START + 110);
    assert!(
        m.contains("proxops_pending_actions{cluster=\"lab\",action=\"update\"} 1\n"),
        "{m}"
    );
    assert!(
        m.contains("proxops_pending_actions{cluster=\"prod\",action=\"update\"} 0\n"),
        "{m}"
    );
    assert!(
        m.contains("proxops_plan_anomalies{cluster=\"prod\",type=\"data_loss\"} 1\n"),
        "{m}"
    );
    assert!(m.contains("proxops_observe_only 0\n"), "{m}");
}

#[test]
fn an_observing_store_says_so_in_status_and_metrics() {
    let mut s = store_after_second();
    s.set_mode(RunMode::Observe);
    let v: serde_json::Value = serde_json::from_str(&render_status_json(&s, START + 110)).unwrap();
    assert_eq!(v["mode"], "observe");
    assert!(render_metrics(&s, START + 110).contains("proxops_observe_only 1\n"));
}

#[test]
fn an_aborted_cluster_has_no_pending_series() {
    let m = render_metrics(&store_after_first(), START + 50);
    assert!(
        !m.contains("proxops_pending_actions{cluster=\"lab\""),
        "{m}"
    );
    assert!(m.contains("proxops_pending_actions{cluster=\"prod\",action=\"create\"} 0\n"));
}

/// A cycle of cluster `name` alone, finished at `START + at`.
fn one_cluster_cycle(name: &str, at: u64) -> CycleReport {
    CycleReport {
        commit: "c0ffee".into(),
        started_at: START + at - 1,
        finished_at: START + at,
        duration_ms: 1_000,
        complete: true,
        git_fetched_at: Some(START + at - 1),
        clusters: vec![ClusterReport::aborted(name, AbortCause::PveRead, "down")],
    }
}

#[test]
fn clusters_cycled_on_their_own_keep_each_last_report_and_the_stalest_ages_healthz() {
    let mut store = StatusStore::new(START);
    store.record_cycle(one_cluster_cycle("lab", 10));
    for at in [20, 30, 40] {
        store.record_cycle(one_cluster_cycle("home", at));
    }
    let names: Vec<&str> = store
        .last_cycle()
        .unwrap()
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["home", "lab"]);
    // lab last finished at +10: the full cycle is that old, however often
    // home cycles.
    assert_eq!(store.last_full_cycle_finished_at(), Some(START + 10));
    store.retain_clusters(&["home".to_owned()]);
    assert_eq!(store.last_cycle().unwrap().clusters.len(), 1);
    store.record_cycle(one_cluster_cycle("home", 50));
    assert_eq!(store.last_full_cycle_finished_at(), Some(START + 50));
}

#[test]
fn sub_second_cycles_add_their_milliseconds_to_the_duration_sum() {
    let mut s = StatusStore::new(START);
    for ms in [250, 400] {
        let mut c = one_cluster_cycle("home", 10);
        // Both within one wall-clock second: the timestamps alone say 0 s.
        c.finished_at = c.started_at;
        c.duration_ms = ms;
        s.record_cycle(c);
    }
    let text = render_metrics(&s, START + 20);
    assert_eq!(sample(&text, "proxops_cycle_duration_seconds_sum"), "0.650");
    assert_eq!(sample(&text, "proxops_cycle_duration_seconds_count"), "2");
    assert_eq!(
        sample(&text, r#"proxops_cycle_duration_seconds_bucket{le="1"}"#),
        "2"
    );
}
