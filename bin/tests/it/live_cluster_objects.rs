//! Pools and backup jobs as code against a live (fakepve) cluster: they
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

/// The demo's monitoring VM in pool `web` and under HA, two pools and two
/// backup jobs.
fn estate(repo: &Repo) {
    let vm = std::fs::read_to_string(repo.path().join("vm/base/monitoring.yaml")).unwrap();
    repo.write("vm/base/monitoring.yaml", &format!("{vm}  pool: web\n"));
    repo.write("pool/home/web.yaml", POOL_WEB);
    repo.write("pool/home/db.yaml", POOL_DB);
    repo.write("backupjob/home/nightly.yaml", JOB_NIGHTLY);
    repo.write("backupjob/home/web-weekly.yaml", JOB_WEB);
    repo.write("haresource/home/monitoring.yaml", HA_MONITORING);
    repo.set_resources(&[
        "../../vm/base/monitoring.yaml",
        "../../pool/home/web.yaml",
        "../../pool/home/db.yaml",
        "../../backupjob/home/nightly.yaml",
        "../../backupjob/home/web-weekly.yaml",
        "../../haresource/home/monitoring.yaml",
    ]);
}

/// A call to the fake PVE's API, as a person or another tool makes it:
/// its `data`.
fn by_hand(pve: &FakePve, method: &str, path: &str, params: &[(&str, &str)]) -> Value {
    use proxops_pve::live::LiveTransport;
    use proxops_pve::transport::{Method, Request, Transport};
    let method = match method {
        "GET" => Method::Get,
        "PUT" => Method::Put,
        _ => Method::Post,
    };
    let params = params
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let hand = LiveTransport::new(pve.live_config()).unwrap();
    let r = hand
        .call(&Request::new(method, path.to_owned(), params))
        .unwrap();
    assert!(r.is_success(), "{method:?} {path}: {r:?}");
    r.data().clone()
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

fn list(plan: &Value, key: &str) -> Vec<Value> {
    plan[key].as_array().cloned().unwrap_or_default()
}

#[test]
fn pools_and_backup_jobs_converge_in_one_apply_then_plan_nothing_and_replay_offline() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    estate(&repo);

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
    assert!(
        list(&plan, "anomalies")
            .iter()
            .any(|a| a["type"] == "empty_desired" && a["kind"] == "BackupJob"),
        "{plan}"
    );

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
    let ha = at("DELETE", "/cluster/ha/resources/vm:150");
    let guest = at("DELETE", "/nodes/pve1/qemu/150");
    assert!(ha < guest, "{requests:?}");
    assert!(
        pve_get(&pve, "/cluster/ha/resources")
            .as_array()
            .unwrap()
            .is_empty()
    );
    let nothing = home_plan(&pve, &repo, &[]);
    assert!(list(&nothing, "actions").is_empty(), "{nothing}");
}
