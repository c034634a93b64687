//! `adopt --vmid N` / `adopt --name NAME` against fakepve: one guest's
//! manifest is written and nothing else (other guests stay unadopted), the
//! report names only that file; a guest a manifest already manages is left
//! alone; an unknown id or name, a doubtful name or both flags are exit 2
//! with nothing written. PVE sees GET requests only.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use proxops_pve::fakepve::FakePve;
use serde_json::json;

use crate::live_support::{KIND_DIRS, Repo, empty_repo, empty_seed, proxops, seed_vm};

/// Every manifest file under the kind directories, repo-relative, sorted.
fn manifests(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for d in KIND_DIRS {
        let Ok(clusters) = std::fs::read_dir(root.join(d)) else {
            continue;
        };
        for c in clusters {
            let c = c.unwrap();
            for f in std::fs::read_dir(c.path()).unwrap() {
                let f = f.unwrap();
                out.push(format!(
                    "{d}/{}/{}",
                    c.file_name().to_string_lossy(),
                    f.file_name().to_string_lossy()
                ));
            }
        }
    }
    out.sort();
    out
}

/// Three untagged guests, two of which share a name.
fn legacy_pve() -> FakePve {
    let mut seed = empty_seed();
    seed["guests"] = json!([
        seed_vm(300, "legacy-a", None, true),
        seed_vm(301, "legacy-b", None, false),
        seed_vm(302, "twin", None, false),
        seed_vm(303, "twin", None, false),
    ]);
    FakePve::start(&seed).unwrap()
}

fn only_gets(pve: &FakePve) {
    let requests = pve.requests().unwrap();
    assert!(
        requests.iter().all(|(m, _, _)| m == "GET"),
        "adopt sent a write: {requests:?}"
    );
}

#[test]
fn adopt_one_guest_by_vmid_or_name_writes_only_its_manifest() {
    let pve = legacy_pve();
    let repo = empty_repo(&pve);
    pve.forget_requests().unwrap();

    let by_id = proxops(&pve, &repo, &["adopt", "--vmid", "300"]);
    assert_eq!(by_id.code, 0, "{}", by_id.all());
    assert_eq!(manifests(repo.path()), ["vm/home/legacy-a.yaml"]);
    assert!(
        by_id.stdout.starts_with("wrote vm/home/legacy-a.yaml\n"),
        "{}",
        by_id.all()
    );
    assert!(!by_id.stdout.contains("legacy-b") && !by_id.stdout.contains("twin"));
    assert!(
        by_id
            .stdout
            .ends_with("add to clusters/home/resources.yaml:\n  - ../../vm/home/legacy-a.yaml\n"),
        "{}",
        by_id.all()
    );
    insta::assert_snapshot!("adopt_one_by_vmid", by_id.stdout);

    let by_name = proxops(&pve, &repo, &["adopt", "--name", "legacy-b"]);
    assert_eq!(by_name.code, 0, "{}", by_name.all());
    assert_eq!(
        manifests(repo.path()),
        ["vm/home/legacy-a.yaml", "vm/home/legacy-b.yaml"]
    );
    assert!(by_name.stdout.starts_with("wrote vm/home/legacy-b.yaml\n"));
    assert!(!by_name.stdout.contains("legacy-a"), "{}", by_name.all());
    only_gets(&pve);
}

#[test]
fn adopt_one_leaves_a_managed_guest_alone() {
    let pve = legacy_pve();
    let repo = empty_repo(&pve);
    let first = proxops(&pve, &repo, &["adopt", "--vmid", "300"]);
    assert_eq!(first.code, 0, "{}", first.all());
    repo.set_resources(&["../../vm/home/legacy-a.yaml"]);
    let before = std::fs::read_to_string(repo.path().join("vm/home/legacy-a.yaml")).unwrap();
    // The operator edits the adopted manifest; adopting again must keep it.
    let edited = format!("# kept by hand\n{before}");
    std::fs::write(repo.path().join("vm/home/legacy-a.yaml"), &edited).unwrap();

    for args in [["--vmid", "300"], ["--name", "legacy-a"]] {
        let again = proxops(&pve, &repo, &[&["adopt"][..], &args].concat());
        assert_eq!(again.code, 0, "{}", again.all());
        assert_eq!(
            again.stdout,
            "VM/legacy-a (vmid 300) is already managed by vm/home/legacy-a.yaml: nothing written\n"
        );
    }
    assert_eq!(
        std::fs::read_to_string(repo.path().join("vm/home/legacy-a.yaml")).unwrap(),
        edited
    );
}

#[test]
fn adopt_one_refuses_what_names_no_single_guest() {
    let pve = legacy_pve();
    let repo: Repo = empty_repo(&pve);
    let mut seen = Vec::new();
    for args in [
        &["--vmid", "999"][..],
        &["--vmid", "web"],
        &["--name", "legacy-c"],
        &["--name", "twin"],
        &["--vmid", "300", "--name", "legacy-a"],
    ] {
        let run = proxops(&pve, &repo, &[&["adopt"][..], args].concat());
        assert_eq!(run.code, 2, "{args:?}: {}", run.all());
        assert_eq!(run.stdout, "", "{args:?}");
        seen.push(format!("{}: {}", args.join(" "), run.stderr.trim_end()));
    }
    assert!(manifests(repo.path()).is_empty());
    insta::assert_snapshot!("adopt_one_refusals", seen.join("\n"));
}
