//! The scale fixture generator (tools/scale-fixture.py): its repository and
//! recording plan exactly the drift it put in, and the same arguments give
//! the same bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn generate(out: &Path, extra: &[&str]) {
    generate_guests(out, 60, extra);
}

fn generate_guests(out: &Path, guests: u32, extra: &[&str]) {
    let o = Command::new("python3")
        .arg(root().join("tools/scale-fixture.py"))
        .args(["--guests", &guests.to_string(), "--nodes", "3", "--out"])
        .arg(out)
        .args(extra)
        .output()
        .expect("python3 runs tools/scale-fixture.py");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Every file under `dir`, relative path → bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn diff(out: &Path, output: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .arg("--git-path")
        .arg(out.join("repo"))
        .arg("diff")
        .arg("--replay")
        .arg(out.join("live"))
        .args(["--output", output])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    String::from_utf8(o.stdout).unwrap()
}

/// `Kind/name` of every action of one type, sorted.
fn names(actions: &[Value], types: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = actions
        .iter()
        .filter(|a| types.contains(&a["action"].as_str().unwrap()))
        .map(|a| {
            format!(
                "{}/{}",
                a["kind"].as_str().unwrap(),
                a["name"].as_str().unwrap()
            )
        })
        .collect();
    v.sort();
    v
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_plan_holds_exactly_the_drift_the_generator_put_in() {
    let dir = tempfile::tempdir().unwrap();
    generate(
        dir.path(),
        &["--drift-percent", "10", "--missing", "3", "--orphans", "4"],
    );
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("expected.json")).unwrap()).unwrap();
    assert_eq!(strings(&expected["update"]).len(), 6);
    assert_eq!(strings(&expected["create"]).len(), 3);
    assert_eq!(strings(&expected["prune"]).len(), 4);

    let plan: Value = serde_json::from_str(&diff(dir.path(), "json")).unwrap();
    let cluster = &plan["clusters"][0];
    assert_eq!(cluster["name"], "scale");
    assert_eq!(cluster["aborted"], false);
    let actions = cluster["actions"].as_array().unwrap();
    assert_eq!(names(actions, &["update"]), strings(&expected["update"]));
    assert_eq!(
        names(actions, &["create", "clone"]),
        strings(&expected["create"])
    );
    assert_eq!(names(actions, &["prune"]), strings(&expected["prune"]));
    // Nothing else: the converged guests, templates and artifacts plan no
    // action, nothing is deferred, skipped or anomalous.
    assert_eq!(actions.len(), 6 + 3 + 4, "{actions:#?}");
    for key in ["skipped", "deferred", "anomalies"] {
        assert_eq!(cluster[key].as_array().map(Vec::len), Some(0), "{key}");
    }
    // Each update changes exactly one field: memory, cores or tags.
    for a in actions.iter().filter(|a| a["action"] == "update") {
        let changes = a["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "{a:#}");
        assert!(
            ["memory", "cores", "tags"].contains(&changes[0]["field"].as_str().unwrap()),
            "{a:#}"
        );
    }

    let text = diff(dir.path(), "text");
    assert!(text.contains("=== will update (6) ==="), "{text}");
    assert!(text.contains("=== will create (3) ==="), "{text}");
    assert!(text.contains("=== will delete (prune) (4) ==="), "{text}");
}

#[test]
fn a_fixture_without_drift_plans_nothing() {
    let dir = tempfile::tempdir().unwrap();
    generate(
        dir.path(),
        &["--drift-percent", "0", "--missing", "0", "--orphans", "0"],
    );
    assert_eq!(
        diff(dir.path(), "text"),
        "=== scale ===\nno drift\nscale: no changes\n\nPlan: no changes (1 cluster)\n"
    );
}

#[test]
fn the_markdown_of_2000_guests_fits_a_comment_with_its_totals() {
    let dir = tempfile::tempdir().unwrap();
    generate_guests(
        dir.path(),
        2000,
        &[
            "--drift-percent",
            "40",
            "--missing",
            "300",
            "--orphans",
            "2",
        ],
    );
    let expected: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("expected.json")).unwrap()).unwrap();
    let (create, update, prune) = (
        strings(&expected["create"]).len(),
        strings(&expected["update"]).len(),
        strings(&expected["prune"]).len(),
    );
    assert_eq!((create, prune), (300, 2));
    assert!(update > 500, "{update} updates: too few to need a cut");
    // The plan holds nothing else the totals would count.
    let plan: Value = serde_json::from_str(&diff(dir.path(), "json")).unwrap();
    let cluster = &plan["clusters"][0];
    assert_eq!(
        cluster["actions"].as_array().unwrap().len(),
        create + update + prune
    );
    for key in ["deferred", "anomalies"] {
        assert_eq!(cluster[key].as_array().map(Vec::len), Some(0), "{key}");
    }

    let md = diff(dir.path(), "markdown");
    let chars = md.chars().count();
    assert!(chars < 60_000, "{chars} characters");
    let totals =
        format!("**Plan: {create} to create, {update} to update, {prune} to prune (1 cluster)**");
    assert!(
        md.lines().any(|l| l == totals),
        "no {totals:?} in {}",
        &md[..500]
    );
    assert!(md.contains("**Summary:** 300 create"), "{}", &md[..1000]);
    // Cut, and saying so and where the rest is.
    let note = md.lines().last().unwrap();
    assert!(note.contains("Cut to fit a comment"), "{note}");
    assert!(note.contains("proxops diff --output json"), "{note}");
    // A table row is never cut in half.
    assert!(
        md.lines()
            .filter(|l| l.starts_with('|'))
            .all(|l| l.ends_with('|'))
    );
}

#[test]
fn the_same_arguments_give_the_same_bytes() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    generate(a.path(), &[]);
    generate(b.path(), &[]);
    let (ta, tb) = (tree(a.path()), tree(b.path()));
    assert!(ta.contains_key("live/scale.json"));
    assert!(ta.contains_key("repo/clusters/scale/resources.yaml"));
    assert_eq!(ta.keys().collect::<Vec<_>>(), tb.keys().collect::<Vec<_>>());
    for (k, v) in &ta {
        assert!(tb[k] == *v, "{k} differs between two runs");
    }
}
