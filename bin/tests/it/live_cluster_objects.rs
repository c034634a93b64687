//! Pools, backup jobs, HA resources, HA rules and replication jobs as code
//! against a live (fakepve) cluster: they
//! converge in one apply, plan nothing after, diff the same from a
//! recording; objects without ProxOps' marker are never written until
//! adopted; the empty-desired guard and the prune budget hold per kind; a
//! pool with members left is an anomaly, never a failed DELETE.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

const POOL_WEB: &str = "apiVersion: proxops/v1alpha1
kind: Pool
metadata:
  name: web
spec:
  comment: Web tier
";

const POOL_DB: &str = "apiVersion: proxops/v1alpha1
kind: Pool
metadata:
  name: db
spec:
  id: Databases
";

const JOB_NIGHTLY: &str = "apiVersion: proxops/v1alpha1
kind: BackupJob
metadata:
  name: nightly
spec:
  schedule: \"mon..fri 21:00\"
  storage: local
  guests: [monitoring]
  mode: snapshot
  compress: zstd
  retention: {keep-last: 3, keep-daily: 7}
  comment: Weeknights
";

const JOB_WEB: &str = "apiVersion: proxops/v1alpha1
kind: BackupJob
metadata:
  name: web-weekly
spec:
  schedule: \"sun 03:00\"
  storage: local
  pool: web
  enabled: false
";

const HA_MONITORING: &str = "apiVersion: proxops/v1alpha1
kind: HAResource
metadata:
  name: monitoring
spec:
  guest: monitoring
  max-restart: 2
  comment: Keep it up
";

/// pve-ha-manager `API2/HA/Rules.pm` `create_rule`: the resources must be
/// HA-managed already and the nodes must exist; `HA/Rules/NodeAffinity.pm`
/// `encode_value` lists the nodes sorted with their priority.
const HA_RULE: &str = "apiVersion: proxops/v1alpha1
kind: HARule
metadata:
  name: monitoring-on-pve1
spec:
  type: node-affinity
  resources: [monitoring]
  nodes: [pve2, \"pve1:2\"]
  comment: Prefer pve1
";

/// pve-manager `API2/ReplicationConfig.pm` `create`: the guest must have a
/// replicatable volume (ZFS pool storage, "No replicatable volumes
/// found") and the target another node than the guest's ("Source and
/// target must not be identical").
const REPL_PVE2: &str = "apiVersion: proxops/v1alpha1
kind: ReplicationJob
metadata:
  name: monitoring-to-pve2
spec:
  guest: monitoring
  target: pve2
  schedule: \"*/30\"
  rate: 50
  comment: Standby copy
";

const REPL_PVE3: &str = "apiVersion: proxops/v1alpha1
kind: ReplicationJob
metadata:
  name: monitoring-to-pve3
spec:
  guest: monitoring
  target: pve3
";

/// The empty seed with a ZFS pool storage (the only kind PVE replicates,
/// pve-storage `ZFSPoolPlugin.pm` `volume_has_feature` `replicate`) and a
/// third node.
fn zfs_seed() -> Value {
    let mut seed = empty_seed();
    seed["nodes"] = json!(["pve1", "pve2", "pve3"]);
    seed["storages"]["local-zfs"] = json!({"type": "zfspool", "pool": "rpool/data",
        "content": "images,rootdir", "avail": 536870912000u64});
    seed
}

/// The estate with the monitoring VM's disk on ZFS and `jobs` replication
/// job manifests (file name, text) listed after the rest.
fn estate_replicated(repo: &Repo, jobs: &[(&str, &str)]) {
    estate(repo);
    let vm = std::fs::read_to_string(repo.path().join("vm/base/monitoring.yaml")).unwrap();
    repo.write(
        "vm/base/monitoring.yaml",
        &vm.replace("storage: local-lvm", "storage: local-zfs"),
    );
    let mut resources = ESTATE.to_vec();
    let paths: Vec<String> = jobs
        .iter()
        .map(|(file, text)| {
            repo.write(&format!("replicationjob/home/{file}"), text);
            format!("../../replicationjob/home/{file}")
        })
        .collect();
    resources.extend(paths.iter().map(String::as_str));
    repo.set_resources(&resources);
}

const ESTATE: [&str; 7] = [
    "../../vm/base/monitoring.yaml",
    "../../pool/home/web.yaml",
    "../../pool/home/db.yaml",
    "../../backupjob/home/nightly.yaml",
    "../../backupjob/home/web-weekly.yaml",
    "../../haresource/home/monitoring.yaml",
    "../../harule/home/monitoring-on-pve1.yaml",
];

/// The demo's monitoring VM in pool `web` and under HA with a node-affinity
/// rule, two pools and two backup jobs.
fn estate(repo: &Repo) {
    let vm = std::fs::read_to_string(repo.path().join("vm/base/monitoring.yaml")).unwrap();
    repo.write("vm/base/monitoring.yaml", &format!("{vm}  pool: web\n"));
    repo.write("pool/home/web.yaml", POOL_WEB);
    repo.write("pool/home/db.yaml", POOL_DB);
    repo.write("backupjob/home/nightly.yaml", JOB_NIGHTLY);
    repo.write("backupjob/home/web-weekly.yaml", JOB_WEB);
    repo.write("haresource/home/monitoring.yaml", HA_MONITORING);
    repo.write("harule/home/monitoring-on-pve1.yaml", HA_RULE);
    repo.set_resources(&ESTATE);
}

fn pve_get(pve: &FakePve, path: &str) -> Value {
    by_hand(pve, "GET", path, &[])
}

fn home_plan(pve: &FakePve, repo: &Repo, extra: &[&str]) -> Value {
    let mut args = vec!["diff", "--output", "json"];
    args.extend_from_slice(extra);
    let run = proxops(pve, repo, &args);
    assert_eq!(run.code, 0, "{}", run.all());
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "home")
        .unwrap()
        .clone()
}

/// The manifest `proxops adopt` writes at `path` of an empty repository,
/// holding each of `lines`.
fn adopted_manifest(pve: &FakePve, path: &str, lines: &[&str]) -> String {
    let adopted_repo = empty_repo(pve);
    let adopted = proxops(pve, &adopted_repo, &["adopt"]);
    assert_eq!(adopted.code, 0, "{}", adopted.all());
    let text = std::fs::read_to_string(adopted_repo.path().join(path)).unwrap();
    for line in lines {
        assert!(text.contains(line), "{line}: {text}");
    }
    text
}

/// A plan without actions whose one entry of `list_key` says `text` in
/// its `field`.
fn nothing_but(plan: &Value, (list_key, field): (&str, &str), text: &str) {
    assert!(list(plan, "actions").is_empty(), "{plan}");
    let entries = list(plan, list_key);
    assert_eq!(entries.len(), 1, "{plan}");
    assert!(entries[0][field].as_str().unwrap().contains(text), "{plan}");
}

fn list(plan: &Value, key: &str) -> Vec<Value> {
    plan[key].as_array().cloned().unwrap_or_default()
}

#[test]
fn cluster_objects_converge_in_one_apply_then_plan_nothing_and_replay_offline() {
    let pve = FakePve::start(&zfs_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate_replicated(&repo, &[("monitoring-to-pve2.yaml", REPL_PVE2)]);

    let applied = apply(&pve, &repo, &[]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    // The pool is created before the VM that joins it at create.
    let requests = pve.requests().unwrap();
    let pool_at = requests
        .iter()
        .position(|(m, p, b)| m == "POST" && p.ends_with("/pools") && b.contains("web"))
        .unwrap();
    let vm_at = requests
        .iter()
        .position(|(m, p, _)| m == "POST" && p.ends_with("/nodes/pve1/qemu"))
        .unwrap();
    assert!(pool_at < vm_at, "{requests:?}");
    assert!(requests[vm_at].2.contains("pool"), "{:?}", requests[vm_at]);

    let pools = pve_get(&pve, "/pools");
    let comments: Vec<(String, String)> = pools
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["poolid"].as_str().unwrap().to_owned(),
                p["comment"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        comments,
        vec![
            ("Databases".to_owned(), "[proxops]".to_owned()),
            ("web".to_owned(), "Web tier [proxops]".to_owned()),
        ]
    );
    let members = by_hand(&pve, "GET", "/pools", &[("poolid", "web")]);
    assert_eq!(members[0]["members"][0]["vmid"], 150, "{members}");
    let jobs = pve_get(&pve, "/cluster/backup");
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    let nightly = jobs.iter().find(|j| j["id"] == "nightly").unwrap();
    assert_eq!(nightly["vmid"], "150");
    assert_eq!(nightly["comment"], "Weeknights [proxops]");
    assert_eq!(nightly["prune-backups"]["keep-daily"], "7");
    let weekly = jobs.iter().find(|j| j["id"] == "web-weekly").unwrap();
    assert_eq!(weekly["pool"], "web");
    assert_eq!(weekly["enabled"], 0);
    let ha = pve_get(&pve, "/cluster/ha/resources");
    assert_eq!(ha[0]["sid"], "vm:150", "{ha}");
    assert_eq!(ha[0]["comment"], "Keep it up [proxops]", "{ha}");
    assert_eq!(
        ha[0]["max_restart"].to_string().trim_matches('"'),
        "2",
        "{ha}"
    );

    // The rule is written after the resource it names (PVE refuses an
    // unmanaged resource: `API2/HA/Rules.pm` `$assert_valid_resources_param`).
    let rules = pve_get(&pve, "/cluster/ha/rules");
    assert_eq!(rules[0]["rule"], "monitoring-on-pve1", "{rules}");
    assert_eq!(rules[0]["resources"], "vm:150", "{rules}");
    assert_eq!(rules[0]["nodes"], "pve1:2,pve2", "{rules}");
    assert_eq!(rules[0]["comment"], "Prefer pve1 [proxops]", "{rules}");
    let requests = pve.requests().unwrap();
    let post = |path: &str| {
        requests
            .iter()
            .position(|(m, p, _)| m == "POST" && p.ends_with(path))
            .unwrap()
    };
    assert!(post("/cluster/ha/resources") < post("/cluster/ha/rules"));

    // The replication job after its guest, named by ProxOps `<vmid>-<n>`
    // with the lowest free n (the client names it: pve-manager
    // `API2/ReplicationConfig.pm` `create`), of plugin type `local`.
    assert!(post("/nodes/pve1/qemu") < post("/cluster/replication"));
    let repl = &requests[post("/cluster/replication")].2;
    assert!(
        repl.contains("id=150-0") && repl.contains("type=local"),
        "{repl}"
    );
    let jobs = pve_get(&pve, "/cluster/replication");
    assert_eq!(jobs.as_array().unwrap().len(), 1, "{jobs}");
    assert_eq!(jobs[0]["id"], "150-0", "{jobs}");
    assert_eq!(jobs[0]["target"], "pve2", "{jobs}");
    assert_eq!(jobs[0]["schedule"], "*/30", "{jobs}");
    assert_eq!(
        jobs[0]["rate"].to_string().trim_matches('"'),
        "50",
        "{jobs}"
    );
    assert_eq!(jobs[0]["comment"], "Standby copy [proxops]", "{jobs}");

    // Nothing left to do.
    let again = proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(again.code, 0, "{}", again.all());
    let plan = home_plan(&pve, &repo, &[]);
    assert!(list(&plan, "actions").is_empty(), "{plan}");
    assert!(list(&plan, "anomalies").is_empty(), "{plan}");

    // The same repository diffs offline from a recording.
    let out = tempfile::tempdir().unwrap();
    let rec = proxops(
        &pve,
        &repo,
        &["record", "--out", out.path().to_str().unwrap()],
    );
    assert_eq!(rec.code, 0, "{}", rec.all());
    let replayed = home_plan(&pve, &repo, &["--replay", out.path().to_str().unwrap()]);
    assert_eq!(replayed, plan);

    // adopt writes the rule back with its resources by manifest name.
    let rule = adopted_manifest(
        &pve,
        "harule/home/monitoring-on-pve1.yaml",
        &[
            "type: node-affinity",
            "- monitoring",
            "pve1:2",
            "Prefer pve1",
        ],
    );
    assert!(!rule.contains("adopted-id"), "{rule}");

    // Drift on an owned field is planned per field, live.
    by_hand(
        &pve,
        "PUT",
        "/cluster/backup/nightly",
        &[("schedule", "22:00")],
    );
    let drift = proxops(&pve, &repo, &["diff"]);
    assert!(
        drift.stdout.contains("schedule") && drift.stdout.contains("22:00 → mon..fri 21:00"),
        "{}",
        drift.all()
    );
}

#[test]
fn unmarked_objects_are_anomalies_never_written_then_adopted_and_claimed() {
    let mut seed = empty_seed();
    seed["pools"] = json!({"web": {"comment": "made by hand"}});
    seed["backup_jobs"] = json!([
        {"id": "nightly", "schedule": "21:00", "all": 1, "storage": "local", "compress": "zstd"}
    ]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.write("pool/home/web.yaml", POOL_WEB);
    repo.write(
        "backupjob/home/nightly.yaml",
        "apiVersion: proxops/v1alpha1\nkind: BackupJob\nmetadata:\n  name: nightly\nspec:\n  schedule: \"22:00\"\n  all: true\n",
    );
    repo.set_resources(&[
        "../../pool/home/web.yaml",
        "../../backupjob/home/nightly.yaml",
    ]);

    let plan = home_plan(&pve, &repo, &[]);
    assert!(list(&plan, "actions").is_empty(), "{plan}");
    let anomalies = list(&plan, "anomalies");
    assert_eq!(anomalies.len(), 2, "{plan}");
    assert!(
        anomalies.iter().all(|a| a["message"]
            .as_str()
            .unwrap()
            .contains("without the proxops marker")),
        "{plan}"
    );
    pve.forget_requests().unwrap();
    let applied = apply(&pve, &repo, &[]);
    assert!(writes(&pve).is_empty(), "{}", applied.all());

    // adopt writes their manifests; the next diff plans only the claims.
    let adopted_repo = empty_repo(&pve);
    let adopted = proxops(&pve, &adopted_repo, &["adopt"]);
    assert_eq!(adopted.code, 0, "{}", adopted.all());
    let job =
        std::fs::read_to_string(adopted_repo.path().join("backupjob/home/nightly.yaml")).unwrap();
    assert!(job.contains("proxops/adopted-id: nightly"), "{job}");
    assert!(
        job.contains("compress: zstd") && job.contains("all: true"),
        "{job}"
    );
    let pool = std::fs::read_to_string(adopted_repo.path().join("pool/home/web.yaml")).unwrap();
    assert!(pool.contains("comment: \"made by hand\""), "{pool}");
    adopted_repo.set_resources(&[
        "../../pool/home/web.yaml",
        "../../backupjob/home/nightly.yaml",
    ]);
    let plan = home_plan(&pve, &adopted_repo, &[]);
    let actions = list(&plan, "actions");
    assert_eq!(actions.len(), 2, "{plan}");
    for a in &actions {
        let changes = a["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "{a}");
        assert_eq!(changes[0]["field"], "comment", "{a}");
    }
    assert!(list(&plan, "anomalies").is_empty(), "{plan}");
    let claimed = apply(&pve, &adopted_repo, &[]);
    assert_eq!(claimed.code, 0, "{}", claimed.all());
    let again = home_plan(&pve, &adopted_repo, &[]);
    assert!(list(&again, "actions").is_empty(), "{again}");
}

#[test]
fn empty_desired_holds_backup_job_prunes_one_removed_job_is_pruned() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    assert_eq!(apply(&pve, &repo, &[]).code, 0);

    // Every BackupJob manifest gone: nothing pruned, one anomaly.
    repo.set_resources(&[
        "../../vm/base/monitoring.yaml",
        "../../pool/home/web.yaml",
        "../../pool/home/db.yaml",
    ]);
    pve.forget_requests().unwrap();
    let held = apply(&pve, &repo, &[]);
    assert!(deletes(&pve).is_empty(), "{}", held.all());
    assert!(
        held.stdout.contains("empty-desired guard"),
        "{}",
        held.all()
    );
    let plan = home_plan(&pve, &repo, &[]);
    // Each kind has its own guard: the HA rule and resource are held too.
    for kind in ["BackupJob", "HARule", "HAResource"] {
        assert!(
            list(&plan, "anomalies")
                .iter()
                .any(|a| a["type"] == "empty_desired" && a["kind"] == kind),
            "{kind}: {plan}"
        );
    }

    // One removed: pruned (within the budget).
    repo.set_resources(&[
        "../../vm/base/monitoring.yaml",
        "../../pool/home/web.yaml",
        "../../pool/home/db.yaml",
        "../../backupjob/home/nightly.yaml",
    ]);
    pve.forget_requests().unwrap();
    let pruned = apply(&pve, &repo, &[]);
    assert_eq!(pruned.code, 0, "{}", pruned.all());
    assert_eq!(
        deletes(&pve),
        vec!["/api2/json/cluster/backup/web-weekly"],
        "{}",
        pruned.all()
    );
}

#[test]
fn a_pool_with_members_left_is_an_anomaly_not_a_failed_delete() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    assert_eq!(apply(&pve, &repo, &[]).code, 0);

    // Pool web goes from git while the monitoring VM (kept, spec.pool
    // dropped) is still in it.
    let vm = std::fs::read_to_string(repo.path().join("vm/base/monitoring.yaml")).unwrap();
    repo.write("vm/base/monitoring.yaml", &vm.replace("  pool: web\n", ""));
    repo.write(
        "backupjob/home/web-weekly.yaml",
        &JOB_WEB.replace("  pool: web\n", "  all: true\n"),
    );
    repo.set_resources(&[
        "../../vm/base/monitoring.yaml",
        "../../pool/home/db.yaml",
        "../../backupjob/home/nightly.yaml",
        "../../backupjob/home/web-weekly.yaml",
    ]);
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert!(
        !deletes(&pve).iter().any(|d| d.contains("/pools")),
        "{}",
        run.all()
    );
    let plan = home_plan(&pve, &repo, &[]);
    let anomaly = list(&plan, "anomalies")
        .into_iter()
        .find(|a| a["kind"] == "Pool")
        .unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(anomaly["type"], "needs_person");
    assert!(
        anomaly["message"].as_str().unwrap().contains("VM 150"),
        "{anomaly}"
    );
}

#[test]
fn a_pruned_guest_under_ha_loses_its_ha_resource_first() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    assert_eq!(apply(&pve, &repo, &[]).code, 0);

    // The VM, its HA resource and the job naming it leave git; the push is
    // meant to remove every VM and HA resource.
    let cfg = repo.path().join("clusters/home/config.yaml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("      allow-empty-prune: true\n");
    std::fs::write(&cfg, text).unwrap();
    repo.set_resources(&[
        "../../pool/home/web.yaml",
        "../../pool/home/db.yaml",
        "../../backupjob/home/web-weekly.yaml",
    ]);
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    let requests = pve.requests().unwrap();
    let at = |m: &str, p: &str| {
        requests
            .iter()
            .position(|(rm, rp, _)| rm == m && rp.contains(p))
            .unwrap_or_else(|| panic!("no {m} {p}: {requests:?}\n{}", run.all()))
    };
    let rule = at("DELETE", "/cluster/ha/rules/monitoring-on-pve1");
    let ha = at("DELETE", "/cluster/ha/resources/vm:150");
    let guest = at("DELETE", "/nodes/pve1/qemu/150");
    // The rule first: with purge=0 PVE keeps a rule naming a deleted
    // resource (pve-ha-manager `API2/HA/Resources.pm` `delete`).
    assert!(rule < ha && ha < guest, "{requests:?}");
    assert!(
        pve_get(&pve, "/cluster/ha/resources")
            .as_array()
            .unwrap()
            .is_empty()
    );
    let nothing = home_plan(&pve, &repo, &[]);
    assert!(list(&nothing, "actions").is_empty(), "{nothing}");
}

/// The estate applied on a fresh fakepve.
fn converged() -> (FakePve, Repo) {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);
    assert_eq!(apply(&pve, &repo, &[]).code, 0);
    (pve, repo)
}

/// The HA rule changed by hand (PVE requires its `type` in every update).
fn edit_rule(pve: &FakePve, params: &[(&str, &str)]) {
    let mut all = vec![("type", "node-affinity")];
    all.extend_from_slice(params);
    by_hand(pve, "PUT", "/cluster/ha/rules/monitoring-on-pve1", &all);
}

/// A rule changed by hand is planned back per field: its nodes, and a
/// disabled rule re-enabled with `delete=disable` (pve-ha-manager
/// `API2/HA/Rules.pm` `update_rule` drops a false `disable`), sending
/// `type` and `resources` with every update (`update_rule`'s isolated
/// schema requires `type`).
#[test]
fn a_changed_ha_rule_is_planned_back_per_field() {
    let (pve, repo) = converged();
    edit_rule(&pve, &[("nodes", "pve2"), ("disable", "1")]);
    let plan = home_plan(&pve, &repo, &[]);
    let actions = list(&plan, "actions");
    assert_eq!(actions.len(), 1, "{plan}");
    let fields: Vec<&str> = actions[0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["nodes", "disable"], "{plan}");
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    let requests = pve.requests().unwrap();
    let (_, _, body) = requests
        .iter()
        .find(|(m, p, _)| m == "PUT" && p.ends_with("/cluster/ha/rules/monitoring-on-pve1"))
        .unwrap_or_else(|| panic!("{requests:?}"));
    for sent in ["delete", "disable", "node-affinity", "vm"] {
        assert!(body.contains(sent), "{sent}: {body}");
    }
    let rules = pve_get(&pve, "/cluster/ha/rules");
    assert_eq!(rules[0]["nodes"], "pve1:2,pve2", "{rules}");
    assert!(rules[0].get("disable").is_none(), "{rules}");
    let again = home_plan(&pve, &repo, &[]);
    assert!(list(&again, "actions").is_empty(), "{again}");
}

/// A recording of the converged estate with its `/cluster/ha/rules`
/// answer changed by `edit`, and the plan replayed from it.
fn replayed_with_rules(edit: impl Fn(&mut Value)) -> Value {
    let (pve, repo) = converged();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let rec = proxops(&pve, &repo, &["record", "--out", dir]);
    assert_eq!(rec.code, 0, "{}", rec.all());
    let file = out.path().join("home.json");
    let mut recording: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let rules = recording["responses"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["path"] == "/cluster/ha/rules")
        .unwrap();
    edit(rules);
    std::fs::write(&file, serde_json::to_vec(&recording).unwrap()).unwrap();
    home_plan(&pve, &repo, &["--replay", dir])
}

/// PVE 8 has no `/cluster/ha/rules` (pve-ha-manager 5.0 brought it, PVE
/// 9; an unknown API path is a 501, pve-http-server `AnyEvent.pm`
/// `handle_api2_request`): each HARule manifest is a person's, nothing of
/// the kind is written or pruned, HA resources still converge.
#[test]
fn a_pve_without_ha_rules_makes_each_ha_rule_an_anomaly() {
    let plan = replayed_with_rules(|r| {
        r["status"] = json!(501);
        r["reason"] = json!("Method 'GET /cluster/ha/rules' not implemented");
        r["body"] = json!({"data": null});
    });
    assert!(list(&plan, "actions").is_empty(), "{plan}");
    let anomalies = list(&plan, "anomalies");
    assert_eq!(anomalies.len(), 1, "{plan}");
    assert_eq!(anomalies[0]["kind"], "HARule", "{plan}");
    assert!(
        anomalies[0]["message"]
            .as_str()
            .unwrap()
            .contains("needs PVE 9"),
        "{plan}"
    );
}

/// `API2/HA/Rules.pm` `update_rule` refuses another `type` ("unexpected
/// property 'type'"): a rule of the other type under the manifest's id is
/// an anomaly, never an update PVE refuses.
#[test]
fn an_ha_rule_of_another_type_is_an_anomaly() {
    let plan = replayed_with_rules(|r| {
        r["body"]["data"][0]["type"] = json!("resource-affinity");
    });
    assert!(list(&plan, "actions").is_empty(), "{plan}");
    let anomalies = list(&plan, "anomalies");
    assert_eq!(anomalies.len(), 1, "{plan}");
    assert!(
        anomalies[0]["message"]
            .as_str()
            .unwrap()
            .contains("PVE never changes it"),
        "{plan}"
    );
}

/// A rule whose marker someone removed is an anomaly, never written;
/// `adopt` writes it with `proxops/adopted-id` and the claim writes only
/// the marker, with `type` and `resources` as PVE holds them
/// (pve-ha-manager `API2/HA/Rules.pm` `update_rule` requires `type`).
#[test]
fn an_unmarked_ha_rule_is_adopted_and_claimed_alone() {
    let (pve, repo) = converged();
    edit_rule(&pve, &[("comment", "made by hand"), ("strict", "1")]);
    let plan = home_plan(&pve, &repo, &[]);
    assert!(list(&plan, "actions").is_empty(), "{plan}");
    let anomalies = list(&plan, "anomalies");
    assert_eq!(anomalies.len(), 1, "{plan}");
    assert_eq!(anomalies[0]["kind"], "HARule", "{plan}");

    let adopted_repo = empty_repo(&pve);
    assert_eq!(proxops(&pve, &adopted_repo, &["adopt"]).code, 0);
    let rule = std::fs::read_to_string(
        adopted_repo
            .path()
            .join("harule/home/monitoring-on-pve1.yaml"),
    )
    .unwrap();
    assert!(
        rule.contains("proxops/adopted-id: monitoring-on-pve1") && rule.contains("strict: true"),
        "{rule}"
    );
    // The adopted rule, with the manifest changed after adoption: only the
    // marker is claimed this cycle.
    repo.write(
        "harule/home/monitoring-on-pve1.yaml",
        &rule.replace("strict: true", "strict: false"),
    );
    let plan = home_plan(&pve, &repo, &[]);
    let actions = list(&plan, "actions");
    assert_eq!(actions.len(), 1, "{plan}");
    let changes = actions[0]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{plan}");
    assert_eq!(changes[0]["field"], "comment", "{plan}");
    let claimed = apply(&pve, &repo, &[]);
    assert_eq!(claimed.code, 0, "{}", claimed.all());
    let rules = pve_get(&pve, "/cluster/ha/rules");
    assert_eq!(rules[0]["comment"], "made by hand [proxops]", "{rules}");
    assert_eq!(
        rules[0]["strict"].to_string().trim_matches('"'),
        "1",
        "{rules}"
    );
    // Then the rest of the drift.
    assert_eq!(apply(&pve, &repo, &[]).code, 0);
    let rules = pve_get(&pve, "/cluster/ha/rules");
    assert!(
        rules[0].get("strict").is_none() || rules[0]["strict"] == 0,
        "{rules}"
    );
    let again = home_plan(&pve, &repo, &[]);
    assert!(list(&again, "actions").is_empty(), "{again}");
}

/// A replication job is ProxOps' by guest and target, whatever id PVE
/// holds it under: drift on its rate and schedule is planned back per
/// field on the live id; a job without the marker to the same target is
/// an anomaly until adopted, then claimed alone; a job removed from git
/// is pruned within the budget, and a job PVE is removing (`remove_job`,
/// pve-manager `API2/ReplicationConfig.pm` `delete` only marks it) is
/// not planned again.
#[test]
fn a_replication_job_is_known_by_guest_and_target_drifted_adopted_and_pruned() {
    let mut seed = zfs_seed();
    // The replication runner removes a marked job 30 s after the delete.
    seed["settings"] = json!({"repl_lag": 30});
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    let both = [
        ("monitoring-to-pve2.yaml", REPL_PVE2),
        ("monitoring-to-pve3.yaml", REPL_PVE3),
    ];
    estate_replicated(&repo, &both);
    let cfg = repo.path().join("clusters/home/config.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("[pve1, pve2]", "[pve1, pve2, pve3]")).unwrap();
    let applied = apply(&pve, &repo, &[]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    let ids: Vec<(Value, Value)> = pve_get(&pve, "/cluster/replication")
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["id"].clone(), j["target"].clone()))
        .collect();
    assert_eq!(
        ids,
        vec![
            (json!("150-0"), json!("pve2")),
            (json!("150-1"), json!("pve3"))
        ]
    );

    // Drift by hand on rate and schedule: one update of 150-0, per field.
    by_hand(
        &pve,
        "PUT",
        "/cluster/replication/150-0",
        &[("rate", "10"), ("schedule", "*/5")],
    );
    let plan = home_plan(&pve, &repo, &[]);
    let actions = list(&plan, "actions");
    assert_eq!(actions.len(), 1, "{plan}");
    assert_eq!(actions[0]["kind"], "ReplicationJob", "{plan}");
    assert_eq!(actions[0]["action"], "update", "{plan}");
    assert_eq!(actions[0]["id"], "150-0", "{plan}");
    let fields: Vec<(Value, Value, Value)> = actions[0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["field"].clone(), c["to"].clone(), c["impact"].clone()))
        .collect();
    assert_eq!(
        fields,
        vec![
            (json!("schedule"), json!("*/30"), json!("live")),
            (json!("rate"), json!("50"), json!("live")),
        ],
        "{plan}"
    );
    pve.forget_requests().unwrap();
    assert_eq!(apply(&pve, &repo, &[]).code, 0);
    assert_eq!(
        writes(&pve),
        vec![(
            "PUT".to_owned(),
            "/api2/json/cluster/replication/150-0".to_owned()
        )]
    );
    assert!(list(&home_plan(&pve, &repo, &[]), "actions").is_empty());

    // The pve3 job replaced by hand with one without the marker (`force`
    // drops the entry at once): an anomaly, never written.
    by_hand(
        &pve,
        "DELETE",
        "/cluster/replication/150-1",
        &[("force", "1")],
    );
    by_hand(
        &pve,
        "POST",
        "/cluster/replication",
        &[
            ("id", "150-7"),
            ("type", "local"),
            ("target", "pve3"),
            ("comment", "by hand"),
        ],
    );
    let plan = home_plan(&pve, &repo, &[]);
    nothing_but(
        &plan,
        ("anomalies", "message"),
        "150-7 already exists on PVE without the proxops marker",
    );

    // adopt writes its manifest; the next diff plans the claim alone.
    let job = adopted_manifest(
        &pve,
        "replicationjob/home/monitoring-to-pve3.yaml",
        &[
            "proxops/adopted-id: \"150-7\"",
            "guest: monitoring",
            "target: pve3",
            "by hand",
        ],
    );
    repo.write("replicationjob/home/monitoring-to-pve3.yaml", &job);
    let plan = home_plan(&pve, &repo, &[]);
    let actions = list(&plan, "actions");
    assert_eq!(actions.len(), 1, "{plan}");
    assert_eq!(actions[0]["id"], "150-7", "{plan}");
    let changes = actions[0]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{plan}");
    assert_eq!(changes[0]["field"], "comment", "{plan}");
    assert_eq!(apply(&pve, &repo, &[]).code, 0);
    assert!(list(&home_plan(&pve, &repo, &[]), "actions").is_empty());

    // The pve2 job leaves git: pruned (budget 3), and while PVE removes it
    // (`remove_job`) it is not planned again.
    let mut kept = ESTATE.to_vec();
    kept.push("../../replicationjob/home/monitoring-to-pve3.yaml");
    repo.set_resources(&kept);
    pve.forget_requests().unwrap();
    let pruned = apply(&pve, &repo, &[]);
    assert_eq!(pruned.code, 0, "{}", pruned.all());
    assert_eq!(
        deletes(&pve),
        vec!["/api2/json/cluster/replication/150-0"],
        "{}",
        pruned.all()
    );
    let jobs = pve_get(&pve, "/cluster/replication");
    assert_eq!(jobs[0]["id"], "150-0", "{jobs}");
    assert_eq!(jobs[0]["remove_job"], "full", "{jobs}");
    let after = home_plan(&pve, &repo, &[]);
    assert!(list(&after, "actions").is_empty(), "{after}");
    assert!(list(&after, "anomalies").is_empty(), "{after}");

    // Back in git while PVE still removes it: PVE would refuse a second
    // job to pve2 (pve-guest-common `ReplicationConfig.pm` `write_config`),
    // so the create waits.
    kept.push("../../replicationjob/home/monitoring-to-pve2.yaml");
    repo.set_resources(&kept);
    let back = home_plan(&pve, &repo, &[]);
    nothing_but(&back, ("skipped", "reason"), "PVE is still removing 150-0");
}

/// A guest moved to the node its job replicated to (an HA relocation):
/// PVE swapped the job's target and source (pve-guest-common
/// `ReplicationConfig.pm` `switch_replication_job_target`). The manifest's
/// job is not created (pve-manager `API2/ReplicationConfig.pm` `create`:
/// "Source and target must not be identical") and the swapped job, marked
/// and without a manifest of its guest and target, is not pruned: both
/// are anomalies, nothing is written.
#[test]
fn a_job_swapped_by_a_moved_guest_is_neither_recreated_nor_pruned() {
    let mut seed = zfs_seed();
    let mut vm = seed_vm(150, "monitoring", Some("proxops"), false);
    vm["node"] = json!("pve2");
    vm["config"]["scsi0"] = json!("local-zfs:vm-150-disk-0,size=20G");
    seed["guests"] = json!([vm]);
    seed["replication"] = json!([
        {"id": "150-0", "type": "local", "target": "pve1", "source": "pve2", "comment": "[proxops]"}
    ]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    let vm = std::fs::read_to_string(repo.path().join("vm/base/monitoring.yaml")).unwrap();
    repo.write(
        "vm/base/monitoring.yaml",
        &vm.replace("storage: local-lvm", "storage: local-zfs"),
    );
    repo.write("replicationjob/home/monitoring-to-pve2.yaml", REPL_PVE2);
    repo.set_resources(&[
        "../../vm/base/monitoring.yaml",
        "../../replicationjob/home/monitoring-to-pve2.yaml",
    ]);

    let plan = home_plan(&pve, &repo, &[]);
    assert!(
        !list(&plan, "actions")
            .iter()
            .any(|a| a["kind"] == "ReplicationJob"),
        "{plan}"
    );
    let messages: Vec<String> = list(&plan, "anomalies")
        .iter()
        .filter(|a| a["kind"] == "ReplicationJob")
        .map(|a| a["message"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(messages.len(), 2, "{plan}");
    assert!(
        messages
            .iter()
            .any(|m| m.contains("runs on node pve2, the job's target")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("150-0") && m.contains("PVE swaps a job's target")),
        "{messages:?}"
    );
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert!(
        !writes(&pve)
            .iter()
            .any(|(_, p)| p.contains("/cluster/replication")),
        "{}",
        run.all()
    );
}

/// The VM and its replication job leave git together: the job is deleted
/// first and the guest's prune waits (deferred, not a person's anomaly)
/// while PVE removes the job in the background (pve-manager
/// `API2/ReplicationConfig.pm` `delete` marks it; a guest with a listed
/// job is destroyed only with purge, pve-guest-common
/// `ReplicationConfig.pm` `check_for_existing_jobs`); once it is gone,
/// the next cycle deletes the guest.
#[test]
fn a_pruned_guest_goes_after_its_replication_job() {
    let mut seed = zfs_seed();
    // The replication runner removes a marked job 2 s after the delete.
    seed["settings"] = json!({"repl_lag": 2});
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    estate_replicated(&repo, &[("monitoring-to-pve2.yaml", REPL_PVE2)]);
    assert_eq!(apply(&pve, &repo, &[]).code, 0);

    let cfg = repo.path().join("clusters/home/config.yaml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("      allow-empty-prune: true\n");
    std::fs::write(&cfg, text).unwrap();
    repo.set_resources(&["../../pool/home/web.yaml", "../../pool/home/db.yaml"]);
    pve.forget_requests().unwrap();
    let first = apply(&pve, &repo, &[]);
    assert_eq!(first.code, 0, "{}", first.all());
    let deleted = deletes(&pve);
    assert!(
        deleted.contains(&"/api2/json/cluster/replication/150-0".to_owned()),
        "{}",
        first.all()
    );
    assert!(
        !deleted.iter().any(|d| d.contains("/qemu/150")),
        "{}",
        first.all()
    );

    // Until the runner has removed the job, the guest's prune is
    // deferred, never an anomaly.
    let mut plan = home_plan(&pve, &repo, &[]);
    assert!(list(&plan, "anomalies").is_empty(), "{plan}");
    assert_eq!(list(&plan, "deferred").len(), 1, "{plan}");
    for _ in 0..60 {
        if pve_get(&pve, "/cluster/replication")
            .as_array()
            .unwrap()
            .is_empty()
        {
            break;
        }
        assert!(
            list(&plan, "deferred").iter().any(|a| a["reason"]
                .as_str()
                .unwrap()
                .contains("removing its replication job(s) 150-0")),
            "{plan}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
        plan = home_plan(&pve, &repo, &[]);
    }
    pve.forget_requests().unwrap();
    let second = apply(&pve, &repo, &[]);
    assert_eq!(second.code, 0, "{}", second.all());
    assert!(
        deletes(&pve)
            .iter()
            .any(|d| d.ends_with("/nodes/pve1/qemu/150")),
        "{}",
        second.all()
    );
}
