//! Saved plans against fakepve: `diff --out` then `apply --plan` performs
//! exactly the saved actions (the same writes as a plain apply on an
//! identical fresh PVE), and refuses with no write at all when a touched
//! guest changed on PVE since, when the repository moved to another
//! commit, or when the work tree was edited.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::path::{Path, PathBuf};

use live_support::*;
use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::transport::{Method, Request, Transport};
use serde_json::Value;

/// A demo repository under git, pointed at `pve`, its tree committed.
fn committed_demo(pve: &FakePve) -> Repo {
    let repo = Repo::demo_for(pve);
    repo.git(&["init", "-q", "-b", "main"]);
    repo.commit_all("demo");
    repo
}

/// `diff --out <plan file>`; the file's path and document.
fn save_plan(pve: &FakePve, repo: &Repo, dir: &Path) -> (PathBuf, Value) {
    let file = dir.join("plan.json");
    let run = proxops(pve, repo, &["diff", "--out", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.all());
    let text = std::fs::read_to_string(&file).unwrap();
    let secret = pve.token_value();
    assert!(!text.contains(secret.expose().rsplit('=').next().unwrap()));
    (file, serde_json::from_str(&text).unwrap())
}

/// The writes of a run as (method, path), in order.
fn write_paths(pve: &FakePve) -> Vec<(String, String)> {
    // Independent actions run at once: sorted, not in the order sent.
    let mut w = writes(pve);
    w.sort();
    w
}

/// `(op, kind, name)` of every action a run finished ok, from its progress
/// lines on stderr, sorted (independent actions run at once).
fn performed(stderr: &str) -> Vec<(String, String, String)> {
    let mut done = performed_in_order(stderr);
    done.sort();
    done
}

fn performed_in_order(stderr: &str) -> Vec<(String, String, String)> {
    // Progress lines: `<cluster> [i/n] <Kind>/<name>: <op> ok in …`.
    stderr
        .lines()
        .filter(|l| l.contains(" ok in "))
        .map(|l| {
            let mut words = l.split_whitespace().skip(2);
            let (kind, name) = words
                .next()
                .unwrap_or("")
                .trim_end_matches(':')
                .split_once('/')
                .unwrap_or(("", ""));
            let op = words.next().unwrap_or("").to_owned();
            (op, kind.to_owned(), name.to_owned())
        })
        .collect()
}

/// `(op, kind, name)` of every action of the saved plan, in order.
fn saved_actions(doc: &Value) -> Vec<(String, String, String)> {
    doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["actions"].as_array().unwrap())
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap().to_owned();
            (s("op"), s("kind"), s("name"))
        })
        .collect()
}

#[test]
fn apply_plan_performs_the_saved_actions_and_the_same_writes_as_a_plain_apply() {
    let planned_pve = FakePve::start(&empty_seed()).unwrap();
    let repo = committed_demo(&planned_pve);
    let out = tempfile::tempdir().unwrap();
    let (file, doc) = save_plan(&planned_pve, &repo, out.path());
    assert_eq!(doc["format"], "proxops-saved-plan");
    assert_eq!(doc["version"], 2);
    assert_eq!(doc["commit"].as_str().unwrap().len(), 40);
    let mut expected = saved_actions(&doc);
    expected.sort();
    assert!(expected.len() > 5, "{doc:#}");
    // What the plan saw of every touched object: on an empty PVE, absence.
    let observed = doc["clusters"][0]["observed"].as_array().unwrap();
    assert!(!observed.is_empty());
    assert!(observed.iter().all(|o| o["seen"] == "absent"), "{doc:#}");

    // Saving the same plan again gives the same bytes.
    let again = out.path().join("again.json");
    let second = proxops(
        &planned_pve,
        &repo,
        &["diff", "--out", again.to_str().unwrap()],
    );
    assert_eq!(second.code, 0, "{}", second.all());
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&again).unwrap()
    );

    planned_pve.forget_requests().unwrap();
    let run = apply(&planned_pve, &repo, &["--plan", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(performed(&run.stderr), expected, "{}", run.all());
    let from_plan = write_paths(&planned_pve);

    // The same repository applied the ordinary way on an identical PVE.
    let plain_pve = FakePve::start(&empty_seed()).unwrap();
    let plain_repo = Repo::demo_for(&plain_pve);
    plain_pve.forget_requests().unwrap();
    let plain = apply(&plain_pve, &plain_repo, &[]);
    assert_eq!(plain.code, 0, "{}", plain.all());
    assert_eq!(from_plan, write_paths(&plain_pve));
    assert_eq!(performed(&plain.stderr), expected);

    // Converged: nothing left to do.
    let diff = proxops(&planned_pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(diff.code, 0, "{}", diff.all());
}

/// The monitoring VM alone, created and converged; then a description
/// change committed: the plan is one update of guest 150.
fn one_update_planned(pve: &FakePve, out: &Path) -> (Repo, PathBuf) {
    let repo = Repo::demo_for(pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    repo.git(&["init", "-q", "-b", "main"]);
    repo.commit_all("monitoring");
    let created = apply(pve, &repo, &[]);
    assert_eq!(created.code, 0, "{}", created.all());
    repo.set_monitoring_description("reviewed");
    repo.commit_all("describe monitoring");
    let (file, doc) = save_plan(pve, &repo, out);
    assert_eq!(
        saved_actions(&doc),
        [("update".into(), "VM".into(), "monitoring".into())]
    );
    let seen = &doc["clusters"][0]["observed"][0];
    assert_eq!(seen["object"]["guest"], 150, "{doc:#}");
    assert!(
        seen["seen"]["guest"]["digest"].as_str().is_some(),
        "{doc:#}"
    );
    (repo, file)
}

#[test]
fn a_guest_edited_on_pve_after_the_plan_was_saved_refuses_the_plan_with_no_write() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let (repo, file) = one_update_planned(&pve, out.path());
    let plan = file.to_str().unwrap();

    // Checked only: it still applies, and nothing is written.
    pve.forget_requests().unwrap();
    let checked = apply(&pve, &repo, &["--plan", plan, "--dry-run"]);
    assert_eq!(checked.code, 0, "{}", checked.all());
    assert!(
        checked.stdout.contains("nothing written (dry run)"),
        "{}",
        checked.all()
    );
    assert_eq!(writes(&pve), Vec::<(String, String)>::new());

    // Someone edits the guest through the API.
    let hand = LiveTransport::new(pve.live_config()).unwrap();
    let put = hand
        .call(&Request::new(
            Method::Put,
            "/nodes/pve1/qemu/150/config",
            vec![("description".into(), "edited by hand".into())],
        ))
        .unwrap();
    assert!(put.is_success(), "{put:?}");

    pve.forget_requests().unwrap();
    let checked = apply(&pve, &repo, &["--plan", plan, "--dry-run"]);
    assert_eq!(checked.code, 1, "{}", checked.all());
    let refused = apply(&pve, &repo, &["--plan", plan]);
    assert_eq!(refused.code, 1, "{}", refused.all());
    assert!(
        refused
            .stderr
            .contains("apply --plan refused, nothing was written")
            && refused
                .stderr
                .contains("guest 150 changed since the plan was saved"),
        "{}",
        refused.all()
    );
    assert_eq!(writes(&pve), Vec::<(String, String)>::new());
    assert!(!pve.requests().unwrap().is_empty(), "PVE was not even read");

    // A fresh plan from the same commit sees the edit and goes through.
    let again = out.path().join("again");
    std::fs::create_dir(&again).unwrap();
    let (fresh, _) = save_plan(&pve, &repo, &again);
    let applied = apply(&pve, &repo, &["--plan", fresh.to_str().unwrap()]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert_eq!(
        performed(&applied.stderr),
        [("update".into(), "VM".into(), "monitoring".into())]
    );
}

#[test]
fn a_plan_from_another_commit_or_an_edited_work_tree_is_refused_with_no_write() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let (repo, file) = one_update_planned(&pve, out.path());
    let plan = file.to_str().unwrap();

    // An uncommitted edit: same commit, other files.
    repo.set_monitoring_description("not reviewed");
    pve.forget_requests().unwrap();
    let dirty = apply(&pve, &repo, &["--plan", plan]);
    assert_eq!(dirty.code, 1, "{}", dirty.all());
    assert!(
        dirty.stderr.contains("desired-state files differ"),
        "{}",
        dirty.all()
    );

    // Committed: another commit.
    repo.commit_all("another description");
    let moved = apply(&pve, &repo, &["--plan", plan]);
    assert_eq!(moved.code, 1, "{}", moved.all());
    assert!(
        moved.stderr.contains("the plan was computed from commit"),
        "{}",
        moved.all()
    );
    // Refused before credentials were even used: PVE saw nothing at all.
    assert_eq!(pve.requests().unwrap(), Vec::new());
}

#[test]
fn a_file_that_is_not_a_saved_plan_is_invalid_input_and_reaches_no_pve() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = committed_demo(&pve);
    let out = tempfile::tempdir().unwrap();
    let bad = out.path().join("plan.json");
    std::fs::write(
        &bad,
        "{\"format\": \"proxops-saved-plan\", \"version\": 7}\n",
    )
    .unwrap();
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &["--plan", bad.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(run.stderr.contains("version 7"), "{}", run.all());
    assert_eq!(pve.requests().unwrap(), Vec::new());
}

#[test]
fn diff_out_without_a_commit_saves_nothing() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.git(&["init", "-q", "-b", "main"]);
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("plan.json");
    let run = proxops(&pve, &repo, &["diff", "--out", file.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(run.stderr.contains("no commit"), "{}", run.all());
    assert!(!file.exists());
}

/// The saved plan file, edited as `edit` says, written back.
fn edit_plan(file: &Path, edit: impl FnOnce(&mut Value)) {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(file, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
}

#[test]
fn an_edited_plan_file_that_prunes_an_untagged_guest_is_refused_with_no_write() {
    // Guest 555 is not ProxOps': it carries no proxops tag.
    let mut seed = empty_seed();
    seed["guests"] = serde_json::json!([seed_vm(555, "payroll", Some("prod"), true)]);
    let pve = FakePve::start(&seed).unwrap();
    let out = tempfile::tempdir().unwrap();
    let (repo, file) = one_update_planned(&pve, out.path());
    let plan = file.to_str().unwrap();

    // The attack: a delete action for 555 and an `observed` entry with its
    // digest as PVE shows it now, so every check the file carries passes.
    let hand = LiveTransport::new(pve.live_config()).unwrap();
    let config = hand
        .call(&Request::get("/nodes/pve1/qemu/555/config"))
        .unwrap();
    let digest = config.data()["digest"].as_str().unwrap().to_owned();
    edit_plan(&file, |doc| {
        let c = &mut doc["clusters"][0];
        c["observed"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({
                "object": {"guest": 555},
                "seen": {"guest": {"node": "pve1", "digest": digest}}
            }));
        c["actions"].as_array_mut().unwrap().push(serde_json::json!({
            "op": "prune", "kind": "VM", "name": "payroll", "node": "pve1",
            "target": {"guest": 555}, "impact": "live", "changes": [],
            "reason": "present on PVE (proxops-tagged) but absent in git",
            "level": 1, "deps": [], "object": null,
            "work": {"type": "delete", "guest_type": "Qemu", "stop_first": true, "digest": digest}
        }));
    });
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &["--plan", plan]);
    assert_eq!(run.code, 1, "{}", run.all());
    for needle in [
        "apply --plan refused, nothing was written",
        "the plan is not the one the planner makes of this commit and PVE now",
        "prune VM/payroll (id 555): the planner does not make this action now",
    ] {
        assert!(run.stderr.contains(needle), "{needle}\n{}", run.all());
    }
    assert_eq!(writes(&pve), Vec::<(String, String)>::new());
    let still = hand
        .call(&Request::get("/nodes/pve1/qemu/555/status/current"))
        .unwrap();
    assert_eq!(still.data()["status"], "running");
}

#[test]
fn a_hookscript_or_a_disk_removal_added_to_a_reviewed_update_is_refused_with_no_write() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let (repo, file) = one_update_planned(&pve, out.path());
    let reviewed = std::fs::read_to_string(&file).unwrap();
    for (what, edit) in [
        (
            "hookscript",
            Box::new(|doc: &mut Value| {
                doc["clusters"][0]["actions"][0]["work"]["params"]
                    .as_array_mut()
                    .unwrap()
                    .push(serde_json::json!(["hookscript", "local:snippets/own.sh"]));
            }) as Box<dyn Fn(&mut Value)>,
        ),
        (
            "delete=scsi0",
            Box::new(|doc: &mut Value| {
                doc["clusters"][0]["actions"][0]["work"]["delete"] = serde_json::json!(["scsi0"]);
            }),
        ),
    ] {
        std::fs::write(&file, &reviewed).unwrap();
        edit_plan(&file, edit);
        pve.forget_requests().unwrap();
        let run = apply(&pve, &repo, &["--plan", file.to_str().unwrap()]);
        assert_eq!(run.code, 1, "{what}: {}", run.all());
        assert!(
            run.stderr.contains(
                "update VM/monitoring (id 150): the file's action differs from the one the planner makes now"
            ),
            "{what}: {}",
            run.all()
        );
        assert_eq!(writes(&pve), Vec::<(String, String)>::new(), "{what}");
    }
    // The file as reviewed still applies.
    std::fs::write(&file, &reviewed).unwrap();
    let run = apply(&pve, &repo, &["--plan", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.all());
}
