//! The three plan renderings (text, JSON, Markdown): snapshots of a plan
//! set that holds every op, every impact, prunes, deferred prunes, skipped
//! objects, every anomaly type, an aborted cluster, a converged cluster and
//! a secret change; plus the contracts the snapshots cannot show alone.
#![allow(clippy::unwrap_used)]
// Reads docs/plan-json.md to check the documented schema.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use proxops_core::action::{
    Action, Anomaly, AnomalyType, Change, Impact, Op, Params, SECRET_PLACEHOLDER, SkipReason,
    Skipped, Target, Work,
};
use proxops_core::live::GuestType;
use proxops_core::names::{ClusterName, Kind, NodeName, StorageId, Vmid};
use proxops_core::plan::{AbortCause, Plan};
use proxops_core::render;
use proxops_core::render::Palette;
use proxops_core::rollout::{DisruptionBudget, Rollout};
use proxops_core::secret::Secret;

const SECRET_VALUE: &str = "hunter2-do-not-print";

fn change(field: &str, from: Option<&str>, to: Option<&str>) -> Change {
    Change::new(field, from.map(Into::into), to.map(Into::into))
}

/// An action on a guest. Renderings never read `work`, so every fixture
/// action carries the same harmless one unless a test needs another.
fn guest(
    op: Op,
    kind: Kind,
    name: &str,
    node: &str,
    vmid: u64,
    impact: Impact,
    reason: &str,
) -> Action {
    Action {
        op,
        kind,
        name: name.into(),
        node: NodeName::new(node).unwrap(),
        target: Target::Guest(Vmid::new(vmid).unwrap()),
        impact,
        changes: Vec::new(),
        reason: reason.into(),
        level: 0,
        deps: Vec::new(),
        object: None,
        work: Work::Start {
            guest_type: GuestType::Qemu,
            ha: None,
        },
    }
}

fn with_changes(mut a: Action, changes: Vec<Change>) -> Action {
    a.changes = changes;
    a
}

fn skipped(kind: Kind, name: &str, node: &str, id: Target, reason: SkipReason) -> Skipped {
    Skipped {
        kind,
        name: name.into(),
        node: NodeName::new(node).unwrap(),
        id,
        reason,
    }
}

fn vmid(id: u64) -> Target {
    Target::Guest(Vmid::new(id).unwrap())
}

fn untagged() -> SkipReason {
    SkipReason::Untagged { legacy: false }
}

fn anomaly(
    t: AnomalyType,
    kind: Option<Kind>,
    subject: Option<(&str, &str, u64)>,
    field: Option<&str>,
    message: &str,
) -> Anomaly {
    Anomaly {
        anomaly: t.into(),
        kind,
        name: subject.map(|(name, _, _)| name.into()),
        node: subject.map(|(_, node, _)| NodeName::new(node).unwrap()),
        id: subject.map(|(_, _, id)| Target::Guest(Vmid::new(id).unwrap())),
        field: field.map(Into::into),
        message: message.into(),
    }
}

const ORPHAN: &str = "present on PVE (proxops-tagged) but absent in git";

/// A cluster with something in every section.
fn busy_plan() -> Plan {
    let mut download = guest(
        Op::Download,
        Kind::ISO,
        "debian-12",
        "pve1",
        100,
        Impact::Live,
        "",
    );
    download.target = Target::File {
        storage: StorageId::new("local").unwrap(),
        filename: "debian-12.iso".into(),
    };
    download.reason = "ISO/debian-12: not on pve1 storage local; will download".into();
    download.work = Work::Download {
        storage: StorageId::new("local").unwrap(),
        params: Params::new(),
    };

    let mut clone_config = Params::new();
    clone_config.push("memory", "4096");
    clone_config.push_secret("cipassword", Secret::new(SECRET_VALUE));
    let mut clone = with_changes(
        guest(
            Op::Clone,
            Kind::VM,
            "web-01",
            "pve1",
            101,
            Impact::Live,
            "VM/web-01: full-clone from TemplateVM debian-tmpl (vmid 9000)",
        ),
        vec![
            change("memory", None, Some("4096")),
            change("cipassword", None, Some(SECRET_PLACEHOLDER)),
            change("tags", None, Some("proxops;web")),
        ],
    );
    clone.work = Work::CloneGuest {
        source: Vmid::new(9000).unwrap(),
        source_node: NodeName::new("pve1").unwrap(),
        name: "web-01".into(),
        config: clone_config,
        delete: Vec::new(),
        start_after: true,
        pool: None,
    };

    let actions = vec![
        download,
        guest(
            Op::Create,
            Kind::TemplateVM,
            "debian-tmpl",
            "pve1",
            9000,
            Impact::Live,
            "TemplateVM/debian-tmpl: not on PVE; will create + mark as PVE template",
        ),
        with_changes(
            guest(
                Op::Create,
                Kind::LXC,
                "dns",
                "pve2",
                200,
                Impact::Live,
                "LXC/dns: not on PVE; will create",
            ),
            vec![
                change("hostname", None, Some("dns")),
                change("memory", None, Some("512")),
            ],
        ),
        clone,
        guest(
            Op::MarkTemplate,
            Kind::TemplateCT,
            "alpine-tmpl",
            "pve2",
            9100,
            Impact::Live,
            "TemplateCT/alpine-tmpl: present as a plain container; will mark as PVE template",
        ),
        with_changes(
            guest(
                Op::Update,
                Kind::VM,
                "db-01",
                "pve1",
                102,
                Impact::Reboot,
                "config drift",
            ),
            vec![
                change("memory", Some("2048"), Some("4096")),
                change("tags", Some("db"), Some("db;proxops")),
            ],
        ),
        with_changes(
            guest(
                Op::Update,
                Kind::VM,
                "app-01",
                "pve1",
                103,
                Impact::StopStart,
                "config drift (stop-required)",
            ),
            vec![change("machine", Some("pc-i440fx-9.2"), Some("q35"))],
        ),
        with_changes(
            guest(
                Op::Update,
                Kind::VM,
                "big-01",
                "pve2",
                104,
                Impact::Blocked,
                "disk change would re-create a volume",
            ),
            vec![change(
                "scsi0",
                Some("local-lvm:vm-104-disk-0,size=64G"),
                Some("local-lvm:vm-104-disk-0,size=32G"),
            )],
        ),
        with_changes(
            guest(
                Op::Update,
                Kind::VM,
                "notes",
                "pve1",
                105,
                Impact::Live,
                "config drift",
            ),
            vec![
                change(
                    "description",
                    Some("old"),
                    Some("line one\nline | two `code` <b>bold</b> & *more*"),
                ),
                change("net1", Some("virtio=BC:24:11:00:00:01,bridge=vmbr1"), None),
            ],
        ),
        guest(
            Op::Start,
            Kind::VM,
            "web-02",
            "pve2",
            106,
            Impact::Live,
            "power \"stopped\" -> \"running\"",
        ),
        guest(
            Op::Stop,
            Kind::VM,
            "batch-01",
            "pve2",
            107,
            Impact::Live,
            "power \"running\" -> \"stopped\"",
        ),
        guest(
            Op::Prune,
            Kind::VM,
            "legacy-01",
            "pve1",
            110,
            Impact::Live,
            ORPHAN,
        ),
    ];

    Plan {
        cluster: ClusterName::new("lab").unwrap(),
        abort: None,
        actions: actions.clone(),
        skipped: vec![
            skipped(Kind::VM, "hand-made", "pve1", vmid(120), untagged()),
            skipped(
                Kind::ISO,
                "ubuntu-24",
                "pve2",
                Target::File {
                    storage: StorageId::new("local").unwrap(),
                    filename: "ubuntu-24.iso".into(),
                },
                SkipReason::StorageUnreadable {
                    message: "storage content read failed".into(),
                    storage: StorageId::new("local").unwrap(),
                    filename: "ubuntu-24.iso".into(),
                },
            ),
            skipped(Kind::LXC, "old-ct", "pve2", vmid(121), untagged()),
        ],
        deferred: vec![
            guest(
                Op::Prune,
                Kind::VM,
                "legacy-02",
                "pve1",
                111,
                Impact::Live,
                ORPHAN,
            ),
            guest(
                Op::Prune,
                Kind::LXC,
                "legacy-ct",
                "pve2",
                210,
                Impact::Live,
                ORPHAN,
            ),
        ],
        anomalies: vec![
            anomaly(
                AnomalyType::LiveOnlySlot,
                Some(Kind::VM),
                Some(("db-01", "pve1", 102)),
                Some("net1"),
                "net1 exists on PVE but not in the manifest; ProxOps will not remove it",
            ),
            anomaly(
                AnomalyType::DataLoss,
                Some(Kind::VM),
                Some(("big-01", "pve2", 104)),
                Some("scsi0"),
                "shrinking scsi0 from 64G to 32G would re-create the volume",
            ),
            anomaly(
                AnomalyType::NeedsPerson,
                Some(Kind::VM),
                Some(("was-template", "pve1", 130)),
                None,
                "desired VM but live is a template; change the kind to TemplateVM or convert it by hand",
            ),
            anomaly(
                AnomalyType::EmptyDesired,
                None,
                None,
                None,
                "0 desired LXC but 5 proxops-tagged live objects (more than the per-cycle prune budget of 3): \
                 probable bad push; suppresses prunes for LXC this cycle",
            ),
        ],
        self_guests: Vec::new(),
        diagnostics: Vec::new(),
        rollout: Rollout::of(&actions, |_| None, &DisruptionBudget::default()),
        not_considered: Vec::new(),
    }
}

fn empty_plan(cluster: &str) -> Plan {
    Plan {
        cluster: ClusterName::new(cluster).unwrap(),
        abort: None,
        actions: Vec::new(),
        skipped: Vec::new(),
        deferred: Vec::new(),
        anomalies: Vec::new(),
        self_guests: Vec::new(),
        diagnostics: Vec::new(),
        rollout: Default::default(),
        not_considered: Vec::new(),
    }
}

/// Deliberately not in name order: renderings sort clusters.
fn plans() -> Vec<Plan> {
    vec![
        busy_plan(),
        Plan::aborted(
            ClusterName::new("prod").unwrap(),
            AbortCause::PveRead,
            "pve inventory read failed: GET /cluster/resources: connection refused",
        ),
        empty_plan("edge"),
    ]
}

fn all_renderings(plans: &[Plan]) -> [String; 4] {
    [
        render::text(plans),
        render::text_styled(plans, Palette::ANSI),
        render::json(plans),
        render::markdown(plans),
    ]
}

#[test]
fn text_shows_each_cluster_with_sections_in_order() {
    insta::assert_snapshot!(render::text(&plans()));
}

#[test]
fn text_lists_field_changes_with_their_manifest_path_and_what_forces_a_stop() {
    let mut plan = empty_plan("lab");
    let mut memory = change("memory", Some("2048"), Some("4096"));
    memory.path = Some("spec.memory".into());
    memory.impact = Some(Impact::StopStart);
    let mut tags = change("tags", Some("proxops"), Some("proxops;web"));
    tags.path = Some("spec.tags".into());
    tags.impact = Some(Impact::Live);
    let mut description = change("description", Some("old"), None);
    description.path = Some("spec.pve-description".into());
    description.impact = Some(Impact::Live);
    let mut vga = change("vga", None, Some("std"));
    vga.path = Some("vga".into());
    vga.impact = Some(Impact::Reboot);
    let mut update = guest(
        Op::Update,
        Kind::VM,
        "web-01",
        "pve1",
        101,
        Impact::StopStart,
        "VM/web-01: config drift (stop-required)",
    );
    update.changes = vec![description, memory, tags, vga];
    plan.actions.push(update);
    let text = render::text(&[plan]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[3..7],
        [
            "      - description (spec.pve-description)  old",
            "      ~ memory (spec.memory)                2GiB → 4GiB  ← stop-start",
            "      ~ tags (spec.tags)                    proxops → proxops;web",
            // A path that is the key itself is not repeated; a reboot-cost
            // change does not set a stop-start action's impact.
            "      + vga                                 std",
        ],
        "{text}"
    );
    assert_eq!(lines[7], "lab: 1 to update", "{text}");
}

#[test]
fn colour_is_a_parameter_and_changes_no_word() {
    let plans = plans();
    let plain = render::text(&plans);
    let coloured = render::text_styled(&plans, Palette::ANSI);
    assert!(!plain.contains('\x1b'));
    assert!(coloured.contains("\x1b[32mcreate"), "{coloured}");
    assert!(coloured.contains("\x1b[31mprune"), "{coloured}");
    let mut stripped = String::new();
    let mut rest = coloured.as_str();
    while let Some(i) = rest.find("\x1b[") {
        stripped.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        rest = &tail[tail.find('m').unwrap() + 1..];
    }
    stripped.push_str(rest);
    assert_eq!(stripped, plain);
    assert_eq!(render::text_styled(&plans, Palette::PLAIN), plain);
}

#[test]
fn json_document_in_the_documented_schema() {
    insta::assert_snapshot!(render::json(&plans()));
}

#[test]
fn markdown_comment_puts_destructive_and_blocked_rows_first() {
    insta::assert_snapshot!(render::markdown(&plans()));
}

/// A skipped entry is listed as untagged by its reason's kind, not its
/// wording: PVE's message for an unreadable config may say anything.
#[test]
fn a_skip_is_untagged_by_its_reason_not_by_its_wording() {
    let mut plan = empty_plan("quiet");
    plan.skipped.push(skipped(
        Kind::VM,
        "unreadable",
        "pve1",
        vmid(130),
        SkipReason::ConfigUnreadable {
            message: "live object without proxops tag".into(),
        },
    ));
    plan.skipped.push(skipped(
        Kind::VM,
        "hand-made",
        "pve1",
        vmid(120),
        SkipReason::Untagged { legacy: true },
    ));
    let text = render::text(&[plan.clone()]);
    let untagged = text
        .split("=== skipped (other reasons) (1) ===")
        .next()
        .unwrap();
    assert!(
        untagged.contains("=== skipped (no proxops tag) (1) ===")
            && untagged.contains("VM/hand-made")
            && !untagged.contains("VM/unreadable"),
        "{text}"
    );
    let md = render::markdown(&[plan]);
    assert!(
        md.contains("Skipped (2, 1 without the proxops tag)"),
        "{md}"
    );
}

#[test]
fn converged_cluster_with_untagged_guests_reads_no_drift_and_lists_them() {
    let mut plan = empty_plan("quiet");
    plan.skipped.push(skipped(
        Kind::VM,
        "hand-made",
        "pve1",
        vmid(120),
        untagged(),
    ));
    let plans = [plan];
    insta::assert_snapshot!(
        "converged_with_skipped",
        format!(
            "{}\n---\n{}",
            render::text(&plans),
            render::markdown(&plans)
        )
    );
}

#[test]
fn no_clusters_render_as_empty_text() {
    assert_eq!(render::text(&[]), "");
    assert_eq!(render::text_styled(&[], Palette::ANSI), "");
}

#[test]
fn empty_plan_reads_no_drift() {
    let plans = [empty_plan("edge")];
    assert_eq!(
        render::text(&plans),
        "=== edge ===\nno drift\nedge: no changes\n\nPlan: no changes (1 cluster)\n"
    );
    assert!(render::markdown(&plans).contains("no drift"));
}

#[test]
fn aborted_cluster_shows_only_its_reason() {
    let mut plan = busy_plan();
    plan.abort = Some(proxops_core::plan::Abort::new(
        proxops_core::plan::AbortCause::InvalidInput,
        "manifest parse error: vm/web.yaml:3:1: unknown field",
    ));
    let text = render::text(&[plan]);
    assert_eq!(
        text,
        "=== lab ===\naborted: manifest parse error: vm/web.yaml:3:1: unknown field\n\
         lab: aborted, nothing planned\n\nPlan: nothing planned, nothing read (1 cluster, 1 aborted)\n"
    );
}

#[test]
fn rendering_twice_gives_identical_bytes() {
    assert_eq!(all_renderings(&plans()), all_renderings(&plans()));
}

#[test]
fn cluster_order_does_not_depend_on_input_order() {
    let mut reversed = plans();
    reversed.reverse();
    assert_eq!(all_renderings(&plans()), all_renderings(&reversed));
}

#[test]
fn secret_value_never_appears_in_any_rendering() {
    let plans = plans();
    // The fixture does carry the secret, in the clone's work.
    assert!(plans[0].actions.iter().any(|a| match &a.work {
        Work::CloneGuest { config, .. } => config.to_wire().iter().any(|(_, v)| v == SECRET_VALUE),
        _ => false,
    }));
    for out in all_renderings(&plans) {
        assert!(!out.contains(SECRET_VALUE), "secret leaked into:\n{out}");
        assert!(!out.contains("hunter2"));
    }
    // Shown as the placeholder (escaped as HTML text in Markdown).
    assert!(render::text(&plans).contains("+ cipassword  <secret>"));
    assert!(render::json(&plans).contains("\"to\": \"<secret>\""));
    assert!(render::markdown(&plans).contains("&lt;secret>"));
}

fn keys(v: &serde_json::Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn json_warnings_name_each_file_once_in_sorted_order() {
    use proxops_core::diag::Diagnostic;
    let warnings = [
        Diagnostic::file("vm/lab/zz.yaml", "not listed"),
        Diagnostic::file("lxc/base/a.yml", "not listed"),
        Diagnostic::file("vm/lab/zz.yaml", "not listed"),
    ];
    let text = render::json_with_warnings(&plans(), &warnings);
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        doc["warnings"],
        serde_json::json!([
            {"file": "lxc/base/a.yml", "message": "not listed"},
            {"file": "vm/lab/zz.yaml", "message": "not listed"}
        ])
    );
    let mut reversed = warnings.clone();
    reversed.reverse();
    assert_eq!(text, render::json_with_warnings(&plans(), &reversed));
}

#[test]
fn json_parses_back_with_exactly_the_documented_keys() {
    let doc: serde_json::Value = serde_json::from_str(&render::json(&plans())).unwrap();
    assert_eq!(keys(&doc), ["format", "clusters", "warnings"]);
    assert_eq!(doc["warnings"], serde_json::json!([]));
    assert_eq!(doc["format"], render::JSON_FORMAT);
    assert_eq!(render::JSON_FORMAT, "proxops-plan/v1");

    let clusters = doc["clusters"].as_array().unwrap();
    let names: Vec<&str> = clusters
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["edge", "lab", "prod"]);
    for c in clusters {
        assert_eq!(
            keys(c),
            [
                "name",
                "aborted",
                "abort_reason",
                "actions",
                "skipped",
                "deferred",
                "anomalies",
                "rollout"
            ]
        );
        assert_eq!(
            keys(&c["rollout"]),
            ["waves", "disruptive", "at_once", "groups"]
        );
    }

    let [edge, lab, prod] = [&clusters[0], &clusters[1], &clusters[2]];
    assert_eq!(edge["aborted"], false);
    assert!(edge["abort_reason"].is_null());
    assert_eq!(prod["aborted"], true);
    assert!(
        prod["abort_reason"]
            .as_str()
            .unwrap()
            .starts_with("pve inventory read failed")
    );

    let action_keys = [
        "action", "kind", "name", "node", "id", "impact", "reason", "changes",
    ];
    // Planned actions say their wave; deferred ones do not run.
    let planned_keys: Vec<&str> = std::iter::once("wave").chain(action_keys).collect();
    for a in lab["actions"].as_array().unwrap() {
        assert_eq!(keys(a), planned_keys);
    }
    for a in lab["actions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(lab["deferred"].as_array().unwrap())
    {
        if a.get("wave").is_none() {
            assert_eq!(keys(a), action_keys);
        }
        for c in a["changes"].as_array().unwrap() {
            assert_eq!(keys(c), ["field", "from", "to", "path", "impact"]);
        }
    }
    for s in lab["skipped"].as_array().unwrap() {
        assert_eq!(keys(s), ["kind", "name", "node", "id", "reason"]);
    }
    for a in lab["anomalies"].as_array().unwrap() {
        assert_eq!(
            keys(a),
            ["type", "kind", "name", "node", "id", "field", "message"]
        );
    }

    // Values: enums as documented, ids typed by target.
    let actions = lab["actions"].as_array().unwrap();
    let ops: Vec<&str> = actions
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "download",
            "create",
            "create",
            "clone",
            "mark-template",
            "update",
            "update",
            "update",
            "update",
            "start",
            "stop",
            "prune"
        ]
    );
    assert_eq!(actions[0]["id"], "local:debian-12.iso");
    assert_eq!(actions[1]["id"], 9000);
    assert_eq!(actions[6]["impact"], "stop-start");
    assert_eq!(actions[7]["impact"], "blocked");
    let removed = &actions[8]["changes"][1];
    assert_eq!(removed["field"], "net1");
    assert!(removed["to"].is_null());
    let added = &actions[3]["changes"][0];
    assert!(added["from"].is_null());

    let skipped = lab["skipped"].as_array().unwrap();
    assert_eq!(skipped[0]["id"], 120);
    assert_eq!(skipped[1]["id"], "local:ubuntu-24.iso");

    let anomalies = lab["anomalies"].as_array().unwrap();
    let types: Vec<&str> = anomalies
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "live_only_slot",
            "data_loss",
            "needs_person",
            "empty_desired"
        ]
    );
    assert_eq!(anomalies[0]["field"], "net1");
    assert!(anomalies[2]["field"].is_null());
    let guard = &anomalies[3];
    assert!(
        guard["kind"].is_null()
            && guard["name"].is_null()
            && guard["node"].is_null()
            && guard["id"].is_null()
    );
}

#[test]
fn markdown_cells_cannot_break_the_table() {
    let md = render::markdown(&plans());
    let row = md.lines().find(|l| l.contains("| description |")).unwrap();
    assert!(row.contains(r"line one<br>line \| two \`code\` &lt;b>bold&lt;/b> &amp; \*more\*"));
    // Six columns (object, action, field, from, to, impact): seven
    // unescaped pipes.
    let unescaped = row
        .match_indices('|')
        .filter(|(i, _)| *i == 0 || &row[i - 1..*i] != "\\")
        .count();
    assert_eq!(unescaped, 7);
}

#[test]
fn markdown_lists_destructive_then_blocked_rows_before_the_rest() {
    let md = render::markdown(&plans());
    let rows: Vec<(String, String)> = md
        .lines()
        .skip_while(|l| !l.starts_with("| | Action |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            (
                cells[0].trim_start_matches('|').trim().to_owned(),
                format!("{} {}", cells[1], cells[2]),
            )
        })
        .collect();
    let marked: Vec<(&str, &str)> = rows
        .iter()
        .filter(|(m, _)| !m.is_empty())
        .map(|(m, o)| (m.as_str(), o.as_str()))
        .collect();
    assert_eq!(
        marked,
        [
            ("⚠️ destructive", "update VM/app-01"),
            ("⚠️ destructive", "stop VM/batch-01"),
            ("⚠️ destructive", "prune VM/legacy-01"),
            ("⛔ blocked", "update VM/big-01"),
        ]
    );
    // The marked rows come first; the other eight follow in plan order.
    assert!(rows[..4].iter().all(|(m, _)| !m.is_empty()));
    assert_eq!(rows.len(), 12);
    assert_eq!(rows[4].1, "download ISO/debian-12");
    assert_eq!(rows[11].1, "start VM/web-02");
}

#[test]
fn text_lines_carry_impact_on_every_action() {
    let text = render::text(&plans());
    for line in text
        .lines()
        .filter(|l| l.contains(" id=") && !l.contains("skip ") && !l.contains('_'))
    {
        assert!(
            [
                "[live]",
                "[reboot]",
                "[stop-start]",
                "[blocked]",
                "[downtime]",
                "[destroys]"
            ]
            .iter()
            .any(|i| line.contains(i)),
            "no impact on {line:?}"
        );
    }
}

/// A stop is downtime and a prune destroys: neither is shown as `live`,
/// in text or in the pull-request comment.
#[test]
fn a_stop_is_downtime_and_a_prune_destroys() {
    let text = render::text(&plans());
    let markdown = render::markdown(&plans());
    for (op, word) in [("stop", "downtime"), ("prune", "destroys")] {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.trim_start().starts_with(&format!("{op} ")))
            .collect();
        assert!(!lines.is_empty(), "the fixture plans a {op}");
        for line in lines {
            assert!(line.contains(&format!("[{word}]")), "{line}");
        }
        let rows: Vec<&str> = markdown
            .lines()
            .filter(|l| l.contains(&format!("| {op} |")))
            .collect();
        assert!(!rows.is_empty(), "the fixture plans a {op}");
        for row in rows {
            assert!(row.contains(&format!("| {word} |")), "{row}");
        }
    }
}

/// Every object in the example of `docs/plan-json.md` has exactly the keys,
/// in the order, that the renderer writes: the documentation cannot drift
/// from the code unnoticed.
#[test]
fn documented_example_has_the_rendered_keys() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/plan-json.md"))
        .unwrap();
    let example = doc
        .split("```json\n")
        .nth(1)
        .unwrap()
        .split("```")
        .next()
        .unwrap();
    let documented: serde_json::Value = serde_json::from_str(example).unwrap();
    let rendered: serde_json::Value = serde_json::from_str(&render::json(&plans())).unwrap();

    let lab = |v: &serde_json::Value| {
        v["clusters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "lab")
            .cloned()
            .unwrap()
    };
    let (doc_lab, out_lab) = (lab(&documented), lab(&rendered));
    assert_eq!(keys(&documented), keys(&rendered));
    assert_eq!(keys(&doc_lab), keys(&out_lab));
    for list in ["actions", "skipped", "deferred", "anomalies"] {
        let first = |c: &serde_json::Value| c[list][0].clone();
        assert_eq!(keys(&first(&doc_lab)), keys(&first(&out_lab)), "{list}");
    }
    assert_eq!(
        keys(&doc_lab["actions"][1]["changes"][0]),
        keys(&out_lab["actions"][3]["changes"][0])
    );
}

/// A grown disk and a refused shrink, as the planner makes them (qemu-server
/// and pve-container `resize_vm`: PVE grows online, never shrinks).
fn resize_plan() -> Plan {
    let mut grow = with_changes(
        guest(
            Op::Resize,
            Kind::VM,
            "db-01",
            "pve1",
            102,
            Impact::Live,
            "VM/db-01: grow scsi0 from 32G to 40G",
        ),
        vec![change("scsi0.size", Some("32G"), Some("40G"))],
    );
    grow.work = Work::Resize {
        guest_type: GuestType::Qemu,
        disk: "scsi0".into(),
        size: proxops_core::wire::Bytes(40 << 30),
    };
    let mut plan = empty_plan("lab");
    plan.actions.push(grow);
    plan.anomalies.push(anomaly(
        AnomalyType::Shrink,
        Some(Kind::LXC),
        Some(("dns", "pve2", 200)),
        Some("rootfs"),
        "rootfs is 16G on PVE but the manifest asks for 8G: PVE cannot shrink a volume",
    ));
    plan
}

#[test]
fn a_resize_is_an_update_and_a_shrink_an_anomaly_in_every_rendering() {
    let plans = [resize_plan()];
    let [text, _, json, markdown] = all_renderings(&plans);
    assert!(text.contains("=== will update (1) ==="), "{text}");
    insta::assert_snapshot!("resize_text", text);
    insta::assert_snapshot!("resize_json", json);
    insta::assert_snapshot!("resize_markdown", markdown);
}

#[test]
fn markdown_over_its_limit_leaves_folded_changes_out_then_cuts_keeping_the_totals() {
    let plans = plans();
    let full = render::markdown(&plans);
    let totals = full
        .lines()
        .find(|l| l.starts_with("**Plan: "))
        .unwrap()
        .to_owned();
    let size = |s: &str| s.chars().count();
    assert!(full.contains("<summary>Field changes of creates"));

    // Just too small for the folded changes: they go, the rest stays.
    let lean = render::markdown_within(&plans, size(&full) - 1);
    assert!(size(&lean) < size(&full));
    assert!(
        !lean.contains("<summary>Field changes of creates"),
        "{lean}"
    );
    assert!(lean.contains("left out to fit a comment"), "{lean}");
    assert!(lean.contains("**Field changes of updates (4)**"), "{lean}");
    assert!(!lean.contains("Cut to fit a comment"), "{lean}");

    // Far too small: cut at a line, with the note, the totals intact.
    let limit = 2_500;
    let cut = render::markdown_within(&plans, limit);
    assert!(size(&cut) <= limit, "{} > {limit}", size(&cut));
    assert!(cut.lines().any(|l| l == totals), "{cut}");
    let note = cut.lines().last().unwrap();
    assert!(note.starts_with("> ✂️ **Cut to fit a comment**"), "{note}");
    assert!(note.contains("proxops diff --output json"), "{note}");
    assert_eq!(
        cut.matches("<details>").count(),
        cut.matches("</details>").count(),
        "{cut}"
    );
}
