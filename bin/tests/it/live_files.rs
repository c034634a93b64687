//! Files someone else prepared, against fakepve: a committed `ca-file`
//! that is a symlink to `/dev/zero`, a plan file that never ends, a
//! symlink or a FIFO planted at `diff --out`'s temporary name, a lock file
//! that is a symlink, a relative `data-dir`. Each is refused (or stepped
//! around) at once: nothing read without a cap, nothing written through a
//! link, nothing hung, nothing written to PVE.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};

use live_support::*;
use proxops_pve::fakepve::FakePve;

/// Runs `args` and checks it ended within 20 s (a read of `/dev/zero` or
/// an open of a FIFO would not).
fn promptly(pve: &FakePve, repo: &Repo, args: &[&str]) -> Run {
    let started = Instant::now();
    let run = proxops(pve, repo, args);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}: {}",
        started.elapsed(),
        run.all()
    );
    run
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[test]
fn a_committed_ca_file_that_links_to_dev_zero_is_refused_at_once() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    symlink("/dev/zero", repo.path().join("clusters/home/ca.pem")).unwrap();
    repo.write(
        "clusters/home/config.yaml",
        &format!(
            "pve:\n  clusters:\n    home:\n      base-url: {}\n      nodes: [pve1, pve2]\n      ca-file: ca.pem\n",
            pve.url()
        ),
    );
    pve.forget_requests().unwrap();
    let run = promptly(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(run.stderr.contains("not a regular file"), "{}", run.all());
    assert!(run.stderr.contains("ca.pem"), "{}", run.all());
    assert_eq!(pve.requests().unwrap(), Vec::new());
}

#[test]
fn a_plan_file_that_never_ends_is_refused_with_nothing_read_from_pve() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.git(&["init", "-q", "-b", "main"]);
    repo.commit_all("demo");
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("plan.json");
    symlink("/dev/zero", &zero).unwrap();
    let fifo = dir.path().join("fifo.json");
    mkfifo(&fifo);
    pve.forget_requests().unwrap();
    for plan in [&zero, &fifo] {
        let run = promptly(
            &pve,
            &repo,
            &["apply", "--yes", "--plan", plan.to_str().unwrap()],
        );
        assert_eq!(run.code, 2, "{}", run.all());
        assert!(run.stderr.contains("cannot read --plan"), "{}", run.all());
    }
    assert_eq!(pve.requests().unwrap(), Vec::new());
}

#[test]
fn diff_out_never_writes_through_what_was_planted_at_its_temporary_name() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.git(&["init", "-q", "-b", "main"]);
    repo.commit_all("demo");
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("authorized_keys");
    std::fs::write(&victim, "keep\n").unwrap();
    let plan = dir.path().join("plan.json");
    symlink(&victim, dir.path().join("plan.json.proxops-tmp")).unwrap();
    let run = promptly(&pve, &repo, &["diff", "--out", plan.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    assert!(
        std::fs::read_to_string(&plan)
            .unwrap()
            .contains("proxops-saved-plan")
    );

    let other = dir.path().join("other.json");
    mkfifo(&dir.path().join("other.json.proxops-tmp"));
    let run = promptly(&pve, &repo, &["diff", "--out", other.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(other.is_file());
}

#[test]
fn a_lock_file_that_is_a_symlink_is_not_opened_and_nothing_is_written() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let locks = repo.data_dir().join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    let victim = repo.path().join("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    let name = pve.url().trim_start_matches("https://").replace(':', "_") + ".lock";
    symlink(&victim, locks.join(name)).unwrap();
    pve.forget_requests().unwrap();
    let run = promptly(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(run.code, 1, "{}", run.all());
    assert!(run.all().contains("symbolic link"), "{}", run.all());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    assert!(writes(&pve).is_empty());
}

#[test]
fn a_relative_data_dir_is_refused() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let p = repo.path().join("proxops.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("data-dir:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&p, format!("{text}data-dir: state\n")).unwrap();
    pve.forget_requests().unwrap();
    let run = promptly(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("proxops.yaml") && run.stderr.contains("data-dir"),
        "{}",
        run.all()
    );
    assert!(
        run.stderr.contains("must be an absolute path"),
        "{}",
        run.all()
    );
    assert_eq!(pve.requests().unwrap(), Vec::new());
}

#[test]
fn a_relative_config_path_resolves_its_files_beside_it_not_in_the_repository() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../iso/base/debian-13-netinst.yaml"]);
    // The host's configuration, in its own folder, names a CA file beside
    // it by a relative path.
    let host = tempfile::tempdir().unwrap();
    std::fs::copy(pve.ca_file(), host.path().join("ca.pem")).unwrap();
    std::fs::write(
        host.path().join("proxops.yaml"),
        format!(
            "pve:\n  clusters:\n    home:\n      base-url: {}\n      nodes: [pve1, pve2]\n      ca-file: ca.pem\n",
            pve.url()
        ),
    )
    .unwrap();
    // The attack: a file of that name committed where the repository's
    // files resolve (here one that is no certificate at all).
    repo.write(
        "ca.pem",
        "-----BEGIN CERTIFICATE-----\nplanted\n-----END CERTIFICATE-----\n",
    );
    repo.write("clusters/home/ca.pem", "planted\n");
    let out = command(&pve, &repo, &["--config", "proxops.yaml", "diff"])
        .current_dir(host.path())
        .output()
        .unwrap();
    let run = finished(&pve, out);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(!run.all().contains("planted"), "{}", run.all());
    assert!(run.stdout.contains("debian-13-netinst"), "{}", run.all());
}
