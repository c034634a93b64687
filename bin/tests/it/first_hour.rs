//! What a new operator meets in the first hour, against fakepve: `validate`
//! is the gate before `diff` (whatever `diff` refuses before its first
//! request, `validate` refuses too, with the same exit code and no PVE
//! request), and a `base-url` written as other PVE tools write it works.
//! The messages are pinned by insta snapshots.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;

/// `home`'s config.yaml pointed at `pve`, with `extra` lines added to the
/// cluster (each indented under it).
fn home_config(pve: &FakePve, ca_file: &str, extra: &[&str]) -> String {
    let mut text = format!(
        "pve:\n  clusters:\n    home:\n      base-url: {}\n      nodes: [pve1, pve2]\n      ca-file: {ca_file}\n",
        pve.url()
    );
    for line in extra {
        text.push_str(&format!("      {line}\n"));
    }
    text
}

/// Runs `validate` then `diff` on the repository as it is: both refuse
/// with exit 2, and PVE saw no request. Returns what each printed.
fn refused_by_both(pve: &FakePve, repo: &Repo) -> String {
    pve.forget_requests().unwrap();
    let validate = proxops(pve, repo, &["validate"]);
    assert_eq!(validate.code, 2, "validate: {}", validate.all());
    let diff = proxops(pve, repo, &["diff"]);
    assert_eq!(diff.code, 2, "diff: {}", diff.all());
    assert!(
        pve.requests().unwrap().is_empty(),
        "nothing is asked of PVE: {:?}",
        pve.requests().unwrap()
    );
    assert!(validate.stdout.is_empty());
    let shown = format!(
        "$ proxops validate\n{}$ proxops diff\n{}{}",
        validate.stderr, diff.stdout, diff.stderr
    );
    // Where the test's copy of the repository is changes every run.
    let real = repo.path().canonicalize().unwrap();
    shown
        .replace(&real.display().to_string(), "<repo>")
        .replace(&repo.path().display().to_string(), "<repo>")
}

#[test]
fn a_ca_file_that_is_not_there_is_refused_by_validate_as_by_diff() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.write(
        "clusters/home/config.yaml",
        &home_config(&pve, "pve-root-ca.pem", &[]),
    );
    insta::assert_snapshot!(refused_by_both(&pve, &repo));
}

#[test]
fn a_secrets_file_that_is_not_there_is_refused_by_validate_as_by_diff() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let ca = pve.ca_file().display().to_string();
    repo.write(
        "clusters/home/config.yaml",
        &home_config(&pve, &ca, &["secrets-file: secrets.sops.yaml"]),
    );
    insta::assert_snapshot!(refused_by_both(&pve, &repo));
}

#[test]
fn ssh_key_refs_without_a_secrets_file_are_refused_naming_the_missing_key() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let web = repo.path().join("vm/home/web-01.yaml");
    let text = std::fs::read_to_string(&web).unwrap();
    let inline = "    ssh-keys:\n      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8tb3BzLWxhcHRvcC1rZXktZm9yLXByb3hvcHMh ops@laptop\n";
    assert!(text.contains(inline));
    std::fs::write(
        &web,
        text.replace(inline, "    ssh-key-refs: [cloud-init.ssh-keys.ops]\n"),
    )
    .unwrap();
    let shown = refused_by_both(&pve, &repo);
    // Both name the key the cluster lacks, not the SOPS file's content.
    let (validate, diff) = shown.split_once("$ proxops diff").unwrap();
    assert!(validate.contains("has no secrets-file"), "{shown}");
    assert!(diff.contains("has no secrets-file"), "{shown}");
    insta::assert_snapshot!(shown);
}

#[test]
fn a_base_url_ending_in_the_api_root_is_taken_and_reaches_pve() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let ca = pve.ca_file().display().to_string();
    let config =
        home_config(&pve, &ca, &[]).replacen(pve.url(), &format!("{}/api2/json/", pve.url()), 1);
    repo.write("clusters/home/config.yaml", &config);
    let validate = proxops(&pve, &repo, &["validate"]);
    assert_eq!(validate.code, 0, "{}", validate.all());
    let diff = proxops(&pve, &repo, &["diff"]);
    assert_eq!(diff.code, 0, "{}", diff.all());
    assert!(
        pve.requests()
            .unwrap()
            .iter()
            .all(|(_, path, _)| path.starts_with("/api2/json/") && !path.contains("json/api2")),
        "{:?}",
        pve.requests().unwrap()
    );
}

#[test]
fn a_base_url_with_another_path_is_refused_by_validate() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let ca = pve.ca_file().display().to_string();
    let config = home_config(&pve, &ca, &[]).replacen(pve.url(), &format!("{}/pve", pve.url()), 1);
    repo.write("clusters/home/config.yaml", &config);
    let shown = refused_by_both(&pve, &repo).replace(pve.url(), "https://PVE");
    insta::assert_snapshot!(shown);
}

/// Replaces `from` with `to` in one file of the repository.
fn edit(repo: &Repo, file: &str, from: &str, to: &str) {
    let path = repo.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{file} has no {from:?}");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

/// The lines of a text plan that speak of `names`, and its summary.
fn plan_lines(stdout: &str, names: &[&str]) -> String {
    stdout
        .lines()
        .filter(|l| names.iter().any(|n| l.contains(n)) || l.starts_with("Plan:"))
        .map(|l| format!("{}\n", l.trim_end()))
        .collect()
}

#[test]
fn an_iso_on_a_storage_without_iso_content_is_refused_at_plan_time() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    edit(
        &repo,
        "iso/base/debian-13-netinst.yaml",
        "storage: local\n",
        "storage: local-lvm\n",
    );
    let diff = proxops(&pve, &repo, &["diff", "--exit-code"]);
    let shown = plan_lines(&diff.stdout, &["debian-13-netinst", "installer"]);
    // No download is planned: PVE would refuse it seconds into the apply.
    assert!(
        !diff
            .stdout
            .lines()
            .any(|l| l.trim_start().starts_with("download") && l.contains("ISO/")),
        "{}",
        diff.all()
    );
    insta::assert_snapshot!(format!("exit {}\n{shown}", diff.code));
    pve.forget_requests().unwrap();
    let apply = apply(&pve, &repo, &[]);
    // The apply tries no download to local-lvm, and says what waits.
    assert!(
        !writes(&pve)
            .iter()
            .any(|(_, p)| p.contains("/storage/local-lvm/download-url")),
        "{}",
        apply.all()
    );
    assert!(
        apply.all().contains("not configured for iso content"),
        "{}",
        apply.all()
    );
}

#[test]
fn a_guest_whose_iso_is_not_declared_on_its_node_is_refused_at_plan_time() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    edit(&repo, "vm/home/installer.yaml", "node: pve1", "node: pve2");
    let diff = proxops(&pve, &repo, &["diff", "--exit-code"]);
    let shown = plan_lines(&diff.stdout, &["installer"]);
    insta::assert_snapshot!(format!("exit {}\n{shown}", diff.code));
}

#[test]
fn exit_codes_tell_converged_changes_and_a_person_apart() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let code = |repo: &Repo| proxops(&pve, repo, &["diff", "--exit-code"]);
    let changes = code(&repo);
    assert_eq!(changes.code, 3, "{}", changes.all());
    assert_eq!(apply(&pve, &repo, &[]).code, 0);
    let converged = code(&repo);
    assert_eq!(converged.code, 0, "{}", converged.all());
    assert!(converged.stdout.contains("Plan: no changes (1 cluster)"));
    // A backup holds the guest's lock while its manifest changes: the
    // change is skipped this cycle, counted, and a person is told.
    pve.set_guest(150, serde_json::json!({"lock": "backup"}))
        .unwrap();
    edit(
        &repo,
        "vm/base/monitoring.yaml",
        "memory: 1GiB",
        "memory: 2GiB",
    );
    let locked = code(&repo);
    assert_eq!(locked.code, 4, "{}", locked.all());
    insta::assert_snapshot!(plan_lines(&locked.stdout, &["monitoring"]));
}

#[test]
fn a_cluster_that_was_not_read_is_never_said_to_have_no_changes() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    // Every inventory read answers 500 (retries included).
    pve.call(
        "fail",
        serde_json::json!(["GET", "/cluster/resources"]),
        serde_json::json!({"status": 500, "message": "boom: inventory unreadable"}),
    )
    .unwrap();
    let diff = proxops(&pve, &repo, &["diff", "--exit-code"]);
    assert_eq!(diff.code, 1, "{}", diff.all());
    assert!(!diff.stdout.contains("no changes"), "{}", diff.all());
    assert!(
        diff.stdout
            .contains("Plan: nothing planned, nothing read (1 cluster, 1 aborted)"),
        "{}",
        diff.all()
    );
}
