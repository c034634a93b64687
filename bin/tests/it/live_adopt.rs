//! `proxops adopt` against fakepve: a cluster ProxOps built is adopted into
//! a fresh tree with GET requests only; the adopted manifests, once listed,
//! plan nothing; and `adopt --replay` of a recording writes the same files.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::collections::BTreeMap;
use std::path::Path;

use live_support::*;
use proxops_pve::fakepve::FakePve;

fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for d in KIND_DIRS {
        let dir = root.join(d).join("home");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            out.insert(
                format!("{d}/home/{}", e.file_name().to_string_lossy()),
                std::fs::read_to_string(e.path()).unwrap(),
            );
        }
    }
    out
}

/// The demo's `home` cluster without the guests whose disks come from a
/// disk image: fakepve ignores `import-from` and reports such a disk with
/// `size=0`, which no manifest can declare (real PVE reports the image's
/// size). That part of adoption is covered by core's simulator tests.
fn build(pve: &FakePve) -> Repo {
    let built = Repo::demo_for(pve);
    built.set_resources(&[
        "../../iso/base/debian-13-netinst.yaml",
        "../../ctt/base/debian-13-standard.yaml",
        "../../templatect/home/ct-base.yaml",
        "../../vm/home/db-01.yaml",
        "../../vm/base/monitoring.yaml",
        "../../lxc/home/dns-01.yaml",
    ]);
    built
}

#[test]
fn adopt_reads_only_and_the_adopted_manifests_plan_nothing() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let built = build(&pve);
    let applied = proxops(&pve, &built, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());

    let repo = empty_repo(&pve);
    pve.forget_requests().unwrap();
    let adopted = proxops(&pve, &repo, &["adopt"]);
    assert_eq!(adopted.code, 0, "{}", adopted.all());
    let requests = pve.requests().unwrap();
    assert!(!requests.is_empty());
    assert!(
        requests.iter().all(|(m, _, _)| m == "GET"),
        "adopt sent a write: {requests:?}"
    );

    let files = tree(repo.path());
    assert_eq!(files.len(), 6, "{files:#?}\n{}", adopted.all());
    assert!(
        adopted
            .stdout
            .contains("add to clusters/home/resources.yaml:"),
        "{}",
        adopted.all()
    );
    // Complete the INCOMPLETE container manifests: PVE does not keep the
    // template a container was made from, so a person names it.
    let ctt = files
        .keys()
        .find(|k| k.starts_with("ctt/"))
        .expect("the container template file is adopted");
    let ctt_name = files[ctt]
        .lines()
        .find_map(|l| l.trim().strip_prefix("name: "))
        .unwrap()
        .to_owned();
    for (rel, text) in &files {
        if text.contains(proxops_core::adopt::TEMPLATE_PLACEHOLDER) {
            repo.write(
                rel,
                &text.replace(proxops_core::adopt::TEMPLATE_PLACEHOLDER, &ctt_name),
            );
        }
    }
    let listed: Vec<String> = files.keys().map(|k| format!("../../{k}")).collect();
    repo.set_resources(&listed.iter().map(String::as_str).collect::<Vec<_>>());

    let valid = proxops(&pve, &repo, &["validate"]);
    assert_eq!(valid.code, 0, "{}", valid.all());
    let diff = proxops(&pve, &repo, &["diff"]);
    assert_eq!(diff.code, 0, "{}", diff.all());
    assert!(
        diff.stdout.contains("=== home ===\nno drift"),
        "{}",
        diff.all()
    );

    // A second adopt on unchanged PVE writes nothing new.
    let again = proxops(&pve, &repo, &["adopt"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(!again.stdout.contains("wrote "), "{}", again.all());
}

#[test]
fn adopt_from_a_recording_writes_the_same_files_as_live() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let built = build(&pve);
    assert_eq!(proxops(&pve, &built, &["apply", "--yes"]).code, 0);

    let live = empty_repo(&pve);
    let adopted = proxops(&pve, &live, &["adopt"]);
    assert_eq!(adopted.code, 0, "{}", adopted.all());

    let rec = tempfile::tempdir().unwrap();
    let recorded = proxops(
        &pve,
        &live,
        &["record", "--out", rec.path().to_str().unwrap()],
    );
    assert_eq!(recorded.code, 0, "{}", recorded.all());

    let offline = empty_repo(&pve);
    let replayed = proxops(
        &pve,
        &offline,
        &["adopt", "--replay", rec.path().to_str().unwrap()],
    );
    assert_eq!(replayed.code, 0, "{}", replayed.all());
    assert_eq!(tree(offline.path()), tree(live.path()));
}

#[test]
fn adopt_without_a_cluster_names_the_configured_ones() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args(["--git-path", "fixtures/repos/demo", "adopt"])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "adopt requires an explicit --cluster=<name>; configured clusters: [edge home]"
        ),
        "{err}"
    );
}
