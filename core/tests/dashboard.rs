//! The dashboard pages rendered from a status store: snapshots of the
//! overview (plain and filtered), an object page and a missing page; the
//! object page words actions exactly as the text plan does; every outside
//! text is escaped; nothing is fetched from elsewhere; same store, same
//! bytes.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use proxops_core::action::{
    Action, AnomalyType, Change, Impact, Op, Params, SECRET_PLACEHOLDER, Target, Work,
};
use proxops_core::dashboard::{self, Html};
use proxops_core::exec::{ObjectReport, ObjectState};
use proxops_core::live::GuestType;
use proxops_core::names::{ClusterName, Kind, NodeName, Ref, ResourceName, Vmid};
use proxops_core::plan::{AbortCause, Plan};
use proxops_core::render;
use proxops_core::report::{
    ActionKey, ActionResult, AnomalyRecord, ClusterReport, CycleCounts, CycleReport, CycleResult,
    HeldObject, PendingAction, PlannedAction, StatusStore,
};

const START: u64 = 1_798_675_200;

fn obj(kind: &str, name: &str, id: &str, state: ObjectState) -> ObjectReport {
    ObjectReport {
        kind: kind.into(),
        name: name.into(),
        node: "pve1".into(),
        id: id.into(),
        state,
        last_action: None,
        last_error: None,
        prune_reason: None,
        last_converged_at: None,
    }
}

/// An update of `web-01`: memory 2048 → 4096 (stop-start), a secret
/// cloud-init password, and a description with markup in it.
fn update() -> Action {
    let change = |field: &str, from: &str, to: &str, path: &str, impact| Change {
        field: field.into(),
        from: Some(from.into()),
        to: Some(to.into()),
        path: Some(path.into()),
        impact: Some(impact),
    };
    Action {
        op: Op::Update,
        kind: Kind::VM,
        name: "web-01".into(),
        node: NodeName::new("pve1").unwrap(),
        target: Target::Guest(Vmid::new(101).unwrap()),
        impact: Impact::StopStart,
        changes: vec![
            change("memory", "2048", "4096", "spec.memory", Impact::StopStart),
            change(
                "cipassword",
                SECRET_PLACEHOLDER,
                SECRET_PLACEHOLDER,
                "spec.cloud-init.password",
                Impact::Live,
            ),
            change(
                "description",
                "old",
                "<script>alert(1)</script>",
                "spec.pve-description",
                Impact::Live,
            ),
        ],
        reason: "VM/web-01: config drift (stop-required)".into(),
        level: 0,
        deps: Vec::new(),
        object: Some(Ref {
            kind: Kind::VM,
            name: ResourceName::new("web-01").unwrap(),
        }),
        work: Work::CreateGuest {
            guest_type: GuestType::Qemu,
            params: Params::new(),
            mark_template: false,
        },
    }
}

/// Cycle: `home` observed drift on web-01 (planned, not done), db-01 is
/// converged, dns-01 has a data-loss anomaly and a hold; `edge` cannot
/// read PVE.
fn store() -> StatusStore {
    let mut web = obj("VM", "web-01", "101", ObjectState::Drift);
    web.last_action = Some("update".into());
    let mut db = obj("VM", "db-01", "102", ObjectState::Converged);
    db.last_converged_at = Some(START + 30);
    let mut dns = obj("LXC", "dns-01", "200", ObjectState::Anomalous);
    dns.last_error = Some("rootfs would be re-created: <data loss>".into());
    let pending = PendingAction::of(&update());
    let home = ClusterReport {
        name: "home".into(),
        result: CycleResult::DryRun,
        aborted: false,
        abort_reason: String::new(),
        counts: CycleCounts {
            objects: 3,
            anomalies: 1,
            ..CycleCounts::default()
        },
        objects: vec![web, db, dns],
        anomalies: BTreeMap::from([(AnomalyType::DataLoss, 1)]),
        actions: BTreeMap::from([(
            ActionKey {
                kind: "VM".into(),
                action: "update".into(),
                result: ActionResult::Skipped,
            },
            1,
        )]),
        prune_deferred: BTreeMap::new(),
        desired_stale: false,
        read_only: false,
        pve_read_at: Some(START + 20),
        pending: vec![pending.clone()],
        self_guests: Vec::new(),
        planned: vec![PlannedAction {
            action: pending,
            result: None,
        }],
        object_anomalies: vec![AnomalyRecord {
            kind: "LXC".into(),
            name: "dns-01".into(),
            anomaly_type: AnomalyType::DataLoss,
            field: Some("rootfs".into()),
            message: "rootfs would be re-created: <data loss>".into(),
        }],
        manifests: BTreeMap::from([
            ("VM/web-01".to_owned(), "vm/home/web-01.yaml".to_owned()),
            ("VM/db-01".to_owned(), "vm/home/db-01.yaml".to_owned()),
            ("LXC/dns-01".to_owned(), "lxc/home/dns-01.yaml".to_owned()),
        ]),
        holds: vec![HeldObject {
            kind: "LXC".into(),
            name: "dns-01".into(),
            op: "update".into(),
            failures: 1,
            next_attempt: START + 600,
            last_error: "shutdown timed out after 180 s".into(),
        }],
        elapsed_ms: 1250,
    };
    let mut s = StatusStore::new(START - 60);
    s.set_mode(proxops_core::report::RunMode::Observe);
    s.record_cycle(CycleReport {
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        started_at: START + 10,
        finished_at: START + 42,
        duration_ms: 32_000,
        complete: true,
        git_fetched_at: Some(START + 11),
        clusters: vec![
            home,
            ClusterReport::aborted(
                "edge",
                AbortCause::PveRead,
                "pve inventory read failed: connection refused",
            ),
        ],
    });
    s
}

const NOW: u64 = START + 50;

fn page(path: &str, query: &str) -> Html {
    dashboard::render(&store(), NOW, path, query)
}

/// What a snapshot holds: the page's `<main>`, without the frame every
/// page shares (its style and script are checked on their own).
fn main_of(body: &str) -> &str {
    let start = body.find("<main>").unwrap();
    let end = body.find("</main>").unwrap() + "</main>".len();
    &body[start..end]
}

#[test]
fn overview() {
    let p = page("/", "");
    assert_eq!(p.status, 200);
    insta::assert_snapshot!(main_of(&p.body));
}

#[test]
fn overview_filtered_to_objects_that_need_attention() {
    let p = page("/", "cluster=home&state=attention");
    assert_eq!(p.status, 200);
    assert!(p.body.contains("/objects/home/VM/web-01"), "{}", p.body);
    assert!(p.body.contains("/objects/home/LXC/dns-01"), "{}", p.body);
    assert!(
        !p.body.contains("/objects/home/VM/db-01"),
        "a converged object is not listed"
    );
    insta::assert_snapshot!(main_of(&p.body));
}

#[test]
fn object_page() {
    let p = page("/objects/home/VM/web-01", "");
    assert_eq!(p.status, 200);
    insta::assert_snapshot!(main_of(&p.body));
}

#[test]
fn object_page_with_a_hold_and_an_anomaly() {
    let p = page("/objects/home/LXC/dns-01", "");
    assert_eq!(p.status, 200);
    assert!(p.body.contains("held back"), "{}", p.body);
    assert!(p.body.contains("(in 9 min)"), "{}", p.body);
    assert!(
        p.body.contains("shutdown timed out after 180 s"),
        "{}",
        p.body
    );
    assert!(
        p.body
            .contains("rootfs would be re-created: &lt;data loss&gt;"),
        "{}",
        p.body
    );
}

#[test]
fn a_missing_object_or_page_is_404() {
    let p = page("/objects/home/VM/nope", "");
    assert_eq!(p.status, 404);
    assert!(p.body.contains("No object VM/nope in cluster home"));
    assert_eq!(page("/favicon.ico", "").status, 404);
}

#[test]
fn the_object_page_words_the_action_exactly_as_the_text_plan() {
    let mut plan = Plan::aborted(ClusterName::new("home").unwrap(), AbortCause::PveRead, "");
    plan.abort = None;
    plan.actions = vec![update()];
    let text = render::text(&[plan]);
    let shown = render::action_text(&PendingAction::of(&update()));
    assert!(text.contains(&shown), "{shown}\n---\n{text}");
    assert!(
        shown.contains("~ memory (spec.memory)") && shown.contains("2GiB → 4GiB  ← stop-start"),
        "{shown}"
    );
    let body = page("/objects/home/VM/web-01", "").body;
    let escaped = shown
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    assert!(body.contains(&escaped), "{body}");
}

#[test]
fn outside_text_is_escaped_and_secrets_stay_placeholders() {
    for path in ["/", "/objects/home/VM/web-01", "/objects/home/LXC/dns-01"] {
        let body = page(path, "").body;
        assert!(!body.contains("<script>alert"), "{path}");
        assert!(!body.contains("<data loss>"), "{path}");
    }
    let body = page("/objects/home/VM/web-01", "").body;
    assert!(body.contains("&lt;secret&gt;"), "{body}");
    assert!(body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn nothing_is_fetched_from_anywhere_else() {
    for path in ["/", "/objects/home/VM/web-01", "/nope"] {
        let body = page(path, "").body;
        assert!(!body.contains("src="), "{path}: an external resource");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path}"
        );
        assert!(!body.contains("<link"), "{path}");
        assert_eq!(body.matches("<script>").count(), 1, "{path}: one script");
        assert!(body.contains(dashboard::SCRIPT) && body.contains(dashboard::STYLE));
    }
}

#[test]
fn same_store_and_time_give_the_same_bytes() {
    assert_eq!(page("/", "").body, page("/", "").body);
    assert_eq!(
        page("/objects/home/VM/web-01", "").body,
        page("/objects/home/VM/web-01", "").body
    );
}

#[test]
fn states_are_told_in_words_not_colour_alone() {
    let body = page("/", "").body;
    for words in [
        "drifting",
        "aborted",
        "needs a person",
        "converged",
        "Did nothing: pve inventory read failed",
    ] {
        assert!(body.contains(words), "{words}");
    }
}

#[test]
fn one_cluster_is_the_cluster_not_1_clusters() {
    let mut s = StatusStore::new(START - 60);
    s.record_cycle(CycleReport {
        commit: "c0ffee".into(),
        started_at: START,
        finished_at: START + 1,
        duration_ms: 1_000,
        complete: true,
        git_fetched_at: Some(START),
        clusters: vec![ClusterReport::aborted(
            "edge",
            AbortCause::PveRead,
            "pve inventory read failed: connection refused",
        )],
    });
    let body = dashboard::render(&s, NOW, "/", "").body;
    assert!(body.contains("The cluster needs a look"), "{body}");
    assert!(!body.contains("1 clusters"), "{body}");
}
