//! A fault sweep over the writes of a first apply: the demo's `home`
//! cluster is created on an empty fakepve once to learn every write it
//! sends, then, on a fresh server each time, that apply runs again with
//! exactly one of those writes answered by a PVE error for the whole cycle
//! (so retries do not hide it).
//!
//! What must hold for every failed write: no panic, the failure is reported
//! with PVE's words and exit 1, the next apply (fault gone) finishes the
//! work, the one after writes nothing, and the cluster ends with the same
//! guests and volumes as the run without a fault — nothing lost, nothing
//! made twice.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::collections::BTreeSet;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::json;

const API_PREFIX: &str = "/api2/json";

/// Every guest as (type, vmid, node, template) and every volume in the
/// storage listings a plan reads, from a fresh recording.
fn estate(pve: &FakePve, repo: &Repo) -> BTreeSet<String> {
    let mut estate = BTreeSet::new();
    for r in recorded_home(pve, repo) {
        let path = r["path"].as_str().unwrap();
        let data = r["body"]["data"].as_array();
        if path == "/cluster/resources" {
            for g in data.unwrap() {
                if matches!(g["type"].as_str(), Some("qemu" | "lxc")) {
                    estate.insert(format!(
                        "{} {} on {} template={}",
                        g["type"], g["vmid"], g["node"], g["template"]
                    ));
                }
            }
        } else if path.ends_with("/content") {
            for v in data.unwrap() {
                estate.insert(format!("{path}: {}", v["volid"]));
            }
        }
    }
    estate
}

#[test]
fn each_write_of_a_first_apply_failing_once_loses_nothing() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let first = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(first.code, 0, "{}", first.all());
    let mut sweep: Vec<(String, String)> = Vec::new();
    for (method, path) in writes(&pve) {
        let path = path.strip_prefix(API_PREFIX).unwrap_or(&path).to_owned();
        if !sweep.contains(&(method.clone(), path.clone())) {
            sweep.push((method, path));
        }
    }
    let intact = estate(&pve, &repo);
    assert!(sweep.len() >= 8, "{sweep:?}");
    drop(pve);

    for (method, path) in &sweep {
        let what = format!("{method} {path}");
        let pve = FakePve::start(&empty_seed()).unwrap();
        let repo = Repo::demo_for(&pve);
        pve.call(
            "fail",
            json!([method, path]),
            json!({"status": 500, "message": "injected failure", "times": 1000}),
        )
        .unwrap();
        let faulted = proxops(&pve, &repo, &["apply", "--yes"]);
        assert!(
            !faulted.all().contains("panicked"),
            "{what}: {}",
            faulted.all()
        );
        assert_eq!(faulted.code, 1, "{what}: {}", faulted.all());
        assert!(
            faulted.all().contains("injected failure"),
            "{what}: PVE's words are not shown:\n{}",
            faulted.all()
        );
        pve.clear().unwrap();
        let caught_up = proxops(&pve, &repo, &["apply", "--yes"]);
        assert_eq!(caught_up.code, 0, "{what}: {}", caught_up.all());
        pve.forget_requests().unwrap();
        let again = proxops(&pve, &repo, &["apply", "--yes"]);
        assert_eq!(again.code, 0, "{what}: {}", again.all());
        assert!(writes(&pve).is_empty(), "{what}: {}", again.all());
        assert_eq!(estate(&pve, &repo), intact, "{what}");
    }
}
