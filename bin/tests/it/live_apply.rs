//! `proxops apply`, `diff`, `status` and `record` end to end: the real
//! binary against a fakepve server (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::Value;

/// `diff --output json` of `home`: (actions, deferred, anomalies).
fn live_plan(pve: &FakePve, repo: &Repo) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let run = proxops(pve, repo, &["diff", "--output", "json"]);
    assert_eq!(run.code, 0, "{}", run.all());
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let home = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "home")
        .unwrap()
        .clone();
    let list = |k: &str| home[k].as_array().cloned().unwrap_or_default();
    (list("actions"), list("deferred"), list("anomalies"))
}

#[test]
fn apply_creates_the_demo_cluster_and_a_second_apply_writes_nothing() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);

    let first = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(first.code, 0, "{}", first.all());
    for what in [
        "DiskImage/debian-13-genericcloud",
        "CTTemplate/debian-13-standard",
        "ISO/debian-13-netinst",
        "TemplateVM/debian-13-cloud",
        "TemplateCT/ct-base",
        "VM/web-01",
        "VM/db-01",
        "VM/installer",
        "VM/monitoring",
        "LXC/dns-01",
    ] {
        assert!(
            first
                .stdout
                .lines()
                .any(|l| l.trim_start().starts_with("ok") && l.contains(what)),
            "{what}:\n{}",
            first.all()
        );
    }
    assert!(first.stdout.contains("10 ok, 0 failed"), "{}", first.all());
    let w = writes(&pve);
    assert!(
        w.contains(&(
            "POST".into(),
            "/api2/json/nodes/pve1/qemu/9000/template".into()
        )),
        "{w:?}"
    );
    assert!(
        w.contains(&(
            "POST".into(),
            "/api2/json/nodes/pve1/lxc/9100/template".into()
        )),
        "{w:?}"
    );
    assert!(
        w.contains(&(
            "POST".into(),
            "/api2/json/nodes/pve1/qemu/9000/clone".into()
        )),
        "{w:?}"
    );
    assert!(
        w.contains(&(
            "POST".into(),
            "/api2/json/nodes/pve1/qemu/101/status/start".into()
        )),
        "{w:?}"
    );

    pve.forget_requests().unwrap();
    let second = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(second.code, 0, "{}", second.all());
    assert_eq!(
        writes(&pve),
        Vec::<(String, String)>::new(),
        "{}",
        second.all()
    );

    let json_run = proxops(&pve, &repo, &["apply", "--yes", "--output", "json"]);
    assert_eq!(json_run.code, 0, "{}", json_run.all());
    let doc: Value = serde_json::from_str(&json_run.stdout).unwrap();
    assert_eq!(doc["plan"]["format"], "proxops-plan/v1");
    assert_eq!(doc["results"][0]["cluster"], "home");
    assert_eq!(doc["results"][0]["actions_error"], 0);

    let (actions, deferred, anomalies) = live_plan(&pve, &repo);
    assert!(
        actions.is_empty() && deferred.is_empty() && anomalies.is_empty(),
        "{actions:?} {deferred:?} {anomalies:?}"
    );
    let text = proxops(&pve, &repo, &["diff"]);
    assert_eq!(text.code, 0, "{}", text.all());
    assert!(
        text.stdout.contains("=== home ===\nno drift"),
        "{}",
        text.all()
    );
}

#[test]
fn record_then_replay_gives_the_live_plan_and_status_reports_convergence() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    // From empty: the plan creates everything.
    let live_before = proxops(&pve, &repo, &["diff", "--output", "json"]);
    assert_eq!(live_before.code, 0, "{}", live_before.all());

    let out = tempfile::tempdir().unwrap();
    let rec = proxops(
        &pve,
        &repo,
        &["record", "--out", out.path().to_str().unwrap()],
    );
    assert_eq!(rec.code, 0, "{}", rec.all());
    let recording = std::fs::read_to_string(out.path().join("home.json")).unwrap();
    let token = pve.token_value();
    let secret = token.expose().rsplit('=').next().unwrap();
    assert!(
        !recording.contains(secret),
        "the recording holds the token secret"
    );
    assert!(
        !recording.contains("PVEAPIToken"),
        "the recording holds an auth header"
    );
    let replayed = proxops(
        &pve,
        &repo,
        &[
            "diff",
            "--replay",
            out.path().to_str().unwrap(),
            "--output",
            "json",
        ],
    );
    assert_eq!(replayed.code, 0, "{}", replayed.all());
    assert_eq!(replayed.stdout, live_before.stdout);

    // After an apply, status sees every object converged.
    let applied = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(applied.code, 0, "{}", applied.all());
    let status = proxops(&pve, &repo, &["status", "--output", "json"]);
    assert_eq!(status.code, 0, "{}", status.all());
    let doc: Value = serde_json::from_str(&status.stdout).unwrap();
    let start = doc["process_start"].as_str().unwrap();
    assert!(
        start.len() == 20 && start.ends_with('Z') && start.as_bytes()[10] == b'T',
        "{start}"
    );
    assert_eq!(doc["last_cycle"]["aborted"], false);
    let objects = doc["objects"].as_array().unwrap();
    assert_eq!(objects.len(), 10, "{objects:#?}");
    for o in objects {
        assert_eq!(o["state"], "converged", "{o}");
        assert_eq!(o["cluster"], "home");
    }
    let table = proxops(&pve, &repo, &["status"]);
    assert_eq!(table.code, 0, "{}", table.all());
    assert!(
        table.stdout.contains("home: 10 objects: 10 converged"),
        "{}",
        table.all()
    );
}

#[test]
fn missing_credentials_fail_with_exit_2_before_any_request() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    pve.forget_requests().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(repo.path())
        .env_remove("PROXOPS_PVE_TOKEN_VALUE")
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_PASSWORD")
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .arg("--git-path")
        .arg(repo.path())
        .args(["--cluster", "home", "apply", "--yes"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("fails closed"));
    assert!(pve.requests().unwrap().is_empty());
}

#[test]
fn dry_run_prints_the_plan_and_writes_nothing() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    pve.forget_requests().unwrap();
    let run = proxops(&pve, &repo, &["apply", "--dry-run"]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(
        run.stdout.contains("=== will create (10) ==="),
        "{}",
        run.all()
    );
    assert!(writes(&pve).is_empty());
    // Field changes are part of the plan; `--diff` is accepted and adds
    // nothing.
    assert!(
        run.stdout.contains("      + memory (spec.memory)"),
        "{}",
        run.all()
    );
    let with_changes = proxops(&pve, &repo, &["apply", "-n", "--diff"]);
    assert_eq!(with_changes.code, 0);
    assert_eq!(with_changes.stdout, run.stdout);
    assert!(writes(&pve).is_empty());
}

#[test]
fn ticket_login_as_root_creates_the_whole_demo_including_the_bind_mount() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    // Restore dns-01's bind mount: only root@pam itself may set one.
    std::fs::copy(
        workspace_root().join("fixtures/repos/demo/lxc/home/dns-01.yaml"),
        repo.path().join("lxc/home/dns-01.yaml"),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
            .current_dir(repo.path())
            .env_remove("PROXOPS_PVE_TOKEN_VALUE")
            .env_remove("PROXOPS_PVE_TOKEN")
            .env_remove("PROXOPS_GIT_PATH")
            .env_remove("PROXOPS_CONFIG")
            .env("PROXOPS_PVE_USER", "root@pam")
            .env("PROXOPS_PVE_PASSWORD", pve.password().expose())
            .arg("--git-path")
            .arg(repo.path())
            .args(["--cluster", "home", "--pve-auth", "ticket"])
            .args(args)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        let password = pve.password();
        assert!(
            !stdout.contains(password.expose()) && !stderr.contains(password.expose()),
            "password leaked"
        );
        (out.status.code(), stdout, stderr)
    };
    let (code, stdout, stderr) = run(&["apply", "--yes"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("10 ok, 0 failed"), "{stdout}{stderr}");
    pve.forget_requests().unwrap();
    let (code, stdout, stderr) = run(&["apply", "--yes"]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let writes: Vec<_> = writes(&pve)
        .into_iter()
        .filter(|(_, p)| !p.ends_with("/access/ticket"))
        .collect();
    assert!(writes.is_empty(), "{writes:?}\n{stdout}");
}

#[test]
fn insecure_tls_works_and_warns_on_every_run() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../iso/base/debian-13-netinst.yaml"]);
    repo.write(
        "clusters/home/config.yaml",
        &format!("pve:\n  clusters:\n    home:\n      base-url: {}\n      nodes: [pve1, pve2]\n      insecure: true\n", pve.url()),
    );
    for _ in 0..2 {
        let run = proxops(&pve, &repo, &["apply", "--yes"]);
        assert_eq!(run.code, 0, "{}", run.all());
        assert!(
            run.stderr.contains("TLS certificate checking is OFF"),
            "{}",
            run.all()
        );
    }
    // Without insecure and without the CA, the handshake is refused and the
    // cluster aborts.
    repo.write(
        "clusters/home/config.yaml",
        &format!(
            "pve:\n  clusters:\n    home:\n      base-url: {}\n      nodes: [pve1, pve2]\n",
            pve.url()
        ),
    );
    let refused = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(refused.code, 1, "{}", refused.all());
    // The first request, which asks PVE which it is, is refused.
    assert!(
        refused.stdout.contains("aborted: GET /cluster/status") && refused.stdout.contains("TLS"),
        "{}",
        refused.all()
    );
}
