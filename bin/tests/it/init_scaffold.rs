//! `proxops init [DIR] --cluster NAME`: the scaffold passes `validate`, a
//! directory that holds anything is refused with nothing written, and the
//! scaffold pointed at fakepve plans and applies every example (what
//! docs/getting-started.md walks through).

#![allow(clippy::unwrap_used)]

use proxops_pve::fakepve::FakePve;

use crate::live_support::{self, Repo, empty_seed, offline};

#[test]
fn init_writes_a_repository_that_validates() {
    let dir = tempfile::tempdir().unwrap();
    let init = offline(dir.path(), &["init", "repo", "--cluster", "lab"]);
    assert_eq!(init.code, 0, "{}", init.all());
    insta::assert_snapshot!("init_report", init.stdout);
    let repo = dir.path().join("repo");
    for f in [
        ".gitignore",
        ".sops.yaml",
        "proxops.yaml",
        "clusters/lab/config.yaml",
    ] {
        assert!(repo.join(f).is_file(), "{f}");
    }
    insta::assert_snapshot!(
        "init_resources",
        std::fs::read_to_string(repo.join("clusters/lab/resources.yaml")).unwrap()
    );
    let valid = offline(dir.path(), &["--git-path", "repo", "validate"]);
    assert_eq!(valid.code, 0, "{}", valid.all());
    assert_eq!(valid.stdout, "ok: 1 cluster, 11 objects\n");
    assert_eq!(valid.stderr, "", "no warning: every manifest is listed");

    // In the working directory by default; an empty directory is fine.
    let here = dir.path().join("here");
    std::fs::create_dir(&here).unwrap();
    let init = offline(&here, &["--cluster", "lab", "init"]);
    assert_eq!(init.code, 0, "{}", init.all());
    assert!(here.join("clusters/lab/resources.yaml").is_file());
}

#[test]
fn init_refuses_a_non_empty_directory_and_a_missing_cluster() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine\n").unwrap();
    let mut seen = Vec::new();
    for args in [
        &["init", "--cluster", "lab"][..],
        &["init", "."],
        &["init", "new", "--cluster", "lab", "--cluster", "edge"],
        &["init", "new", "--cluster", "Not A Name"],
    ] {
        let run = offline(dir.path(), args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.all());
        seen.push(format!("{}: {}", args.join(" "), run.stderr.trim_end()));
    }
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "nothing written beside notes.txt");
    insta::assert_snapshot!("init_refusals", seen.join("\n"));
}

#[test]
fn the_scaffold_plans_and_applies_on_fakepve() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let init = offline(dir.path(), &["init", ".", "--cluster", "home"]);
    assert_eq!(init.code, 0, "{}", init.all());
    let repo = Repo { dir };
    repo.point_home_at(&pve);
    repo.keep_data_inside();

    let plan = live_support::proxops(&pve, &repo, &["diff"]);
    assert_eq!(plan.code, 0, "{}", plan.all());
    assert!(
        plan.stdout.ends_with("Plan: 11 to create (1 cluster)\n"),
        "{}",
        plan.all()
    );
    let applied = live_support::apply(&pve, &repo, &[]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    assert!(
        applied.stdout.contains("home: 11 ok, 0 failed"),
        "{}",
        applied.all()
    );
    // The cloned VM joins its pool with the clone request itself
    // (qemu-server `PVE/API2/Qemu.pm` `clone_vm`: `pool`), after the pool
    // is created, so one apply converges.
    let requests = pve.requests().unwrap();
    let pool_at = requests
        .iter()
        .position(|(m, p, _)| m == "POST" && p.ends_with("/pools"))
        .unwrap();
    let clone_at = requests
        .iter()
        .position(|(m, p, _)| m == "POST" && p.ends_with("/clone"))
        .unwrap();
    assert!(pool_at < clone_at, "{requests:?}");
    assert!(
        requests[clone_at].2.contains("pool=web"),
        "{:?}",
        requests[clone_at]
    );
    let again = live_support::proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(again.code, 0, "{}", again.all());
}
