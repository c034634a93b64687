//! Ownership and emptiness rails against a live (fakepve) cluster: a
//! manifest never takes over a guest without the `proxops` tag; an emptied
//! composition prunes nothing unless the cluster allows it; an emptied
//! listed file is refused; an unlisted manifest file is a warning; the
//! no-prune tag protects in any letter case; a renumbered manifest reports
//! the guest it left behind.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::Value;

fn seed(guests: Vec<Value>) -> Value {
    let mut seed = empty_seed();
    seed["guests"] = Value::Array(guests);
    seed
}

/// A plain VM manifest `vm/home/<name>.yaml` at `vmid` on pve1.
fn manifest(repo: &Repo, name: &str, vmid: u32) -> String {
    let rel = format!("vm/home/{name}.yaml");
    repo.write(
        &rel,
        &format!(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: pve1\n  vmid: {vmid}\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  disks:\n    - storage: local-lvm\n      size: 4GiB\n  networks:\n    - bridge: vmbr0\n"
        ),
    );
    format!("../../{rel}")
}

/// Sets `reconcile.prune-budget` in the repository's proxops.yaml.
fn set_budget(repo: &Repo, budget: u32) {
    let p = repo.path().join("proxops.yaml");
    let text: String = std::fs::read_to_string(&p)
        .unwrap()
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("prune-budget:") {
                format!("  prune-budget: {budget}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert!(
        text.contains(&format!("  prune-budget: {budget}\n")),
        "{text}"
    );
    std::fs::write(p, text).unwrap();
}

fn allow_empty_prune(repo: &Repo, pve: &FakePve) {
    repo.point_home_at(pve);
    let p = repo.path().join("clusters/home/config.yaml");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("      allow-empty-prune: true\n");
    std::fs::write(p, text).unwrap();
}

#[test]
fn apply_never_takes_over_an_untagged_guest_at_a_manifest_vmid() {
    let pve = FakePve::start(&seed(vec![
        seed_vm(300, "hand-made", Some("prod;web"), true),
        seed_vm(301, "legacy", Some("pveconform"), true),
    ]))
    .unwrap();
    let repo = Repo::demo_for(&pve);
    let a = manifest(&repo, "new-app", 300);
    let b = manifest(&repo, "new-tool", 301);
    repo.set_resources(&[&a, &b]);

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    let all = pve.requests().unwrap();
    assert!(
        all.iter().all(|(m, _, _)| m == "GET"),
        "a write reached PVE: {all:?}\n{}",
        run.all()
    );
    for (vmid, live, object) in [(300, "hand-made", "new-app"), (301, "legacy", "new-tool")] {
        let line = run
            .stdout
            .lines()
            .find(|l| l.contains(&format!("VM/{object}")) && l.contains("needs_person"))
            .unwrap_or_else(|| panic!("no anomaly for {object}:\n{}", run.all()));
        for part in [
            format!("vmid {vmid} is held by VM \"{live}\" on node pve1"),
            "carries no proxops tag".to_owned(),
            "proxops adopt".to_owned(),
        ] {
            assert!(line.contains(&part), "{part}: {line}");
        }
    }
    assert!(
        run.stdout.contains("only the old pveconform tag"),
        "{}",
        run.all()
    );

    // Nothing changed, so the next plan says the same and still writes nothing.
    pve.forget_requests().unwrap();
    let again = apply(&pve, &repo, &[]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(writes(&pve).is_empty(), "{}", again.all());
    assert!(
        again.stdout.contains("vmid 300 is held by"),
        "{}",
        again.all()
    );
}

#[test]
fn an_emptied_composition_prunes_nothing_until_the_cluster_allows_it() {
    let pve = FakePve::start(&seed(vec![
        seed_vm(302, "orphan-a", Some("proxops"), true),
        seed_vm(303, "orphan-b", Some("proxops;web"), false),
    ]))
    .unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&[]);

    for budget in [3, 0] {
        set_budget(&repo, budget);
        pve.forget_requests().unwrap();
        let run = apply(&pve, &repo, &[]);
        assert_eq!(run.code, 0, "{}", run.all());
        assert!(
            writes(&pve).is_empty(),
            "budget {budget}: {:?}",
            writes(&pve)
        );
        assert!(
            run.stdout
                .contains("0 desired VM but 2 proxops-tagged VM on PVE"),
            "{}",
            run.all()
        );
        assert!(
            run.stdout.contains("allow-empty-prune: true"),
            "{}",
            run.all()
        );
    }

    allow_empty_prune(&repo, &pve);
    set_budget(&repo, 1);
    pve.forget_requests().unwrap();
    let first = apply(&pve, &repo, &[]);
    assert_eq!(first.code, 0, "{}", first.all());
    assert_eq!(deletes(&pve), vec!["/api2/json/nodes/pve1/qemu/302"]);
    assert!(!first.stdout.contains("empty_desired"), "{}", first.all());
    assert!(
        first.stderr.contains("the empty-desired guard is OFF"),
        "a weakened rail is said every cycle: {}",
        first.all()
    );

    pve.forget_requests().unwrap();
    let second = apply(&pve, &repo, &[]);
    assert_eq!(second.code, 0, "{}", second.all());
    assert_eq!(deletes(&pve), vec!["/api2/json/nodes/pve1/qemu/303"]);
}

#[test]
fn an_emptied_listed_file_is_refused_before_any_pve_request() {
    let pve = FakePve::start(&seed(vec![seed_vm(300, "new-app", Some("proxops"), true)])).unwrap();
    let repo = Repo::demo_for(&pve);
    let a = manifest(&repo, "new-app", 300);
    repo.set_resources(&[&a]);
    repo.write("vm/home/new-app.yaml", "# emptied by a bad merge\n---\n");

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr
            .contains("error: vm/home/new-app.yaml: the file holds no manifest"),
        "{}",
        run.all()
    );
    assert!(writes(&pve).is_empty(), "{:?}", writes(&pve));

    let validate = proxops(&pve, &repo, &["validate"]);
    assert_eq!(validate.code, 2, "{}", validate.all());
    assert!(
        validate.stderr.contains("vm/home/new-app.yaml"),
        "{}",
        validate.all()
    );
}

#[test]
fn an_unlisted_manifest_file_is_a_warning_in_validate_and_diff() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    // Broken on purpose: an unlisted file is named, never parsed.
    repo.write("vm/home/draft.yaml", "kind: VM\nspec: [unclosed\n");
    repo.write("lxc/base/idea.yml", "");
    let warning = |file: &str| {
        format!("warning: {file}: not listed in any clusters/<cluster>/resources.yaml")
    };

    let validate = proxops(&pve, &repo, &["validate"]);
    assert_eq!(validate.code, 0, "{}", validate.all());
    let warned: Vec<&str> = validate
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .collect();
    assert_eq!(warned.len(), 2, "{}", validate.all());
    assert!(
        warned[0].starts_with(&warning("lxc/base/idea.yml")),
        "{warned:?}"
    );
    assert!(
        warned[1].starts_with(&warning("vm/home/draft.yaml")),
        "{warned:?}"
    );

    let text = proxops(&pve, &repo, &["diff"]);
    assert_eq!(text.code, 0, "{}", text.all());
    assert!(
        text.stderr.contains(&warning("vm/home/draft.yaml")),
        "{}",
        text.all()
    );

    let json = proxops(&pve, &repo, &["diff", "--output", "json"]);
    assert_eq!(json.code, 0, "{}", json.all());
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    let files: Vec<&str> = doc["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["file"].as_str().unwrap())
        .collect();
    assert_eq!(files, ["lxc/base/idea.yml", "vm/home/draft.yaml"]);
}

#[test]
fn a_mixed_case_noprune_tag_protects_an_orphan() {
    let pve = FakePve::start(&seed(vec![
        seed_vm(302, "keep-me", Some("Proxops;Proxops-NoPrune"), true),
        seed_vm(303, "orphan", Some("PROXOPS"), false),
    ]))
    .unwrap();
    let repo = Repo::demo_for(&pve);
    let a = manifest(&repo, "new-app", 310);
    repo.set_resources(&[&a]);

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    // The upper-case ownership tag owns 303; the mixed-case no-prune tag
    // keeps 302.
    assert_eq!(
        deletes(&pve),
        vec!["/api2/json/nodes/pve1/qemu/303"],
        "{}",
        run.all()
    );
    assert!(
        writes(&pve).iter().all(|(_, p)| !p.contains("/302")),
        "{:?}",
        writes(&pve)
    );
    assert!(run.stdout.contains("keep-me"), "{}", run.all());
    assert!(run.stdout.contains("never pruned"), "{}", run.all());
}

#[test]
fn a_renumbered_manifest_reports_the_guest_it_left_behind() {
    let pve = FakePve::start(&seed(vec![seed_vm(300, "new-app", Some("proxops"), true)])).unwrap();
    let repo = Repo::demo_for(&pve);
    // new-app was at 300; its manifest now says 310.
    let a = manifest(&repo, "new-app", 310);
    repo.set_resources(&[&a]);

    let diff = proxops(&pve, &repo, &["diff"]);
    assert_eq!(diff.code, 0, "{}", diff.all());
    let line = diff
        .stdout
        .lines()
        .find(|l| l.contains("id=300"))
        .unwrap_or_else(|| panic!("the guest at 300 is not reported:\n{}", diff.all()));
    assert!(line.contains("needs_person"), "{line}");
    assert!(
        line.contains("renumbered manifest leaves the old guest"),
        "{line}"
    );
    assert!(
        line.contains("VM/new-app") && line.contains("vmid 310"),
        "{line}"
    );
    assert!(!diff.stdout.contains("will delete"), "{}", diff.all());
}

#[test]
fn a_hand_written_claim_of_an_untagged_guest_under_another_name_writes_nothing() {
    // payroll (500) is not ProxOps': tagged prod and finance, no proxops.
    let pve = FakePve::start(&seed(vec![seed_vm(
        500,
        "payroll",
        Some("finance;prod"),
        true,
    )]))
    .unwrap();
    let repo = Repo::demo_for(&pve);
    // The attack: a manifest of another name and shape that names the
    // guest's vmid in proxops/adopted-vmid, the annotation adopt writes.
    let rel = manifest(&repo, "takeover", 500);
    let p = repo.path().join(rel.trim_start_matches("../../"));
    let text = std::fs::read_to_string(&p).unwrap().replace(
        "  name: takeover\n",
        "  name: takeover\n  annotations:\n    proxops/adopted-vmid: \"500\"\n",
    );
    std::fs::write(&p, text).unwrap();
    repo.set_resources(&[&rel]);

    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &[]);
    assert!(
        run.stdout
            .contains("names vmid 500 in proxops/adopted-vmid, but it is not that guest as `proxops adopt` wrote it"),
        "{}",
        run.all()
    );
    assert!(run.stdout.contains("nothing is written"), "{}", run.all());
    assert_eq!(
        writes(&pve),
        Vec::<(String, String)>::new(),
        "{}",
        run.all()
    );
    // A second cycle finds it just as it was.
    let again = apply(&pve, &repo, &[]);
    assert!(writes(&pve).is_empty(), "{}", again.all());
}
