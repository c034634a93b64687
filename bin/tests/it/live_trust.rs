//! What a repository may point ProxOps at, against fakepve: one PVE is
//! managed by one cluster config (URL spellings are compared in their
//! normalised form by `validate`, and two names no comparison can match are
//! caught at run time from what PVE says it is); a `secrets-file` is a file
//! inside the repository; plain http needs explicit consent and is warned
//! about every cycle; a value decrypted from SOPS never shows in an error;
//! and `adopt`/`record` never write through a symlink out of their folder.
//! Every refusal is checked against fakepve's request log: no write, and
//! where the refusal is an input error, no request at all.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use live_support::sops::encrypt;
use live_support::*;
use proxops_pve::fakepve::FakePve;
use proxops_pve::transport::Transport as _;
use serde_json::json;

/// Both clusters of the demo repository.
const ALL: &[&str] = &[];

/// Every `apply` of this file goes through here.
fn apply(pve: &FakePve, repo: &Repo, selection: &[&str]) -> Run {
    proxops_selecting(pve, repo, selection, &["apply", "--yes"])
}

/// Points the demo's `edge` cluster at `url`, trusting `pve`'s certificate
/// (which names both of its addresses).
fn point_edge_at(repo: &Repo, url: &str, pve: &FakePve) {
    repo.write(
        "clusters/edge/config.yaml",
        &format!(
            "pve:\n  clusters:\n    edge:\n      base-url: {url}\n      nodes: [pve1]\n      ca-file: {}\n",
            pve.ca_file().display()
        ),
    );
}

fn home_config(repo: &Repo) -> String {
    std::fs::read_to_string(repo.path().join("clusters/home/config.yaml")).unwrap()
}

#[test]
fn one_pve_spelled_two_ways_is_refused_before_any_request() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let url = pve.url().to_owned();
    let host = pve.host().to_string();
    let spellings = [
        format!("{url}/"),
        format!("{url}/api2/json"),
        format!("https://{host}.:8006"),
        format!("https://[::ffff:{host}]:8006"),
    ];
    for spelling in &spellings {
        point_edge_at(&repo, spelling, &pve);
        pve.forget_requests().unwrap();
        for run in [
            proxops_selecting(&pve, &repo, ALL, &["diff"]),
            apply(&pve, &repo, ALL),
            // Selecting one of the two changes nothing: the configuration
            // as a whole is invalid.
            apply(&pve, &repo, &["--cluster", "home"]),
        ] {
            assert_eq!(run.code, 2, "{spelling}\n{}", run.all());
            for needle in [
                "cluster \"home\"",
                "clusters/home/config.yaml",
                "cluster \"edge\"",
                "clusters/edge/config.yaml",
                "two clusters must never share an endpoint",
            ] {
                assert!(run.stderr.contains(needle), "{needle}\n{}", run.all());
            }
        }
        let requests = pve.requests().unwrap();
        assert!(requests.is_empty(), "{spelling}: {requests:?}");
    }

    // Case and a trailing dot of a host name.
    repo.write(
        "clusters/home/config.yaml",
        &home_config(&repo).replace(&url, "https://localhost:8006"),
    );
    point_edge_at(&repo, "https://LocalHost.:8006/", &pve);
    let run = apply(&pve, &repo, ALL);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("the endpoint localhost:8006"),
        "{}",
        run.all()
    );
    assert!(pve.requests().unwrap().is_empty());
}

/// The only requests: one `GET /cluster/status` per cluster and command.
fn only_identity_reads(pve: &FakePve) -> usize {
    let requests = pve.requests().unwrap();
    assert!(
        requests
            .iter()
            .all(|(m, p, _)| m == "GET" && p.ends_with("/cluster/status")),
        "{requests:?}"
    );
    requests.len()
}

#[test]
fn one_pve_behind_two_addresses_is_refused_at_run_time_before_any_write() {
    let pve = FakePve::start_on_two_addresses(&empty_seed()).unwrap();
    let also = pve.also_url().unwrap().to_owned();
    assert_ne!(also, pve.url());
    let repo = Repo::demo_for(&pve);
    point_edge_at(&repo, &also, &pve);
    let valid = proxops_selecting(&pve, &repo, ALL, &["validate"]);
    assert_eq!(valid.code, 0, "validate cannot see it: {}", valid.all());

    pve.forget_requests().unwrap();
    let runs = [
        proxops_selecting(&pve, &repo, ALL, &["diff"]),
        apply(&pve, &repo, ALL),
        proxops_selecting(&pve, &repo, ALL, &["status"]),
    ];
    for run in &runs {
        assert_eq!(run.code, 1, "{}", run.all());
        let text = run.all();
        for needle in [
            "the same PVE as cluster \"edge\"",
            "the same PVE as cluster \"home\"",
            "clusters/edge/config.yaml",
            &also,
        ] {
            assert!(text.contains(needle), "{needle}\n{text}");
        }
    }
    assert_eq!(only_identity_reads(&pve), 2 * runs.len());
}

/// A token both fakes of a test accept, so one environment serves both
/// clusters.
const SHARED_TOKEN: &str = "7c1e7a0e-0000-4000-8000-00000000beef";

#[test]
fn two_pves_are_told_apart_with_one_identity_read_each() {
    let mut seed = empty_seed();
    seed["tokens"] = json!({"root@pam!shared": SHARED_TOKEN});
    let home = FakePve::start(&seed).unwrap();
    let edge = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&home);
    point_edge_at(&repo, edge.url(), &edge);
    home.forget_requests().unwrap();
    edge.forget_requests().unwrap();
    let token = format!("root@pam!shared={SHARED_TOKEN}");
    let run = proxops_env(&repo, &[("PROXOPS_PVE_TOKEN_VALUE", &token)], &["diff"]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(!run.all().contains("the same PVE"), "{}", run.all());
    for pve in [&home, &edge] {
        let requests = pve.requests().unwrap();
        let status = requests
            .iter()
            .filter(|(_, p, _)| p.ends_with("/cluster/status"))
            .count();
        assert_eq!(status, 1, "{requests:?}");
        assert!(
            requests
                .iter()
                .any(|(_, p, _)| p.ends_with("/cluster/resources")),
            "{requests:?}"
        );
    }

    // One cluster alone is still asked which PVE it is (a PVE that does
    // not say writes nothing), once.
    home.forget_requests().unwrap();
    let run = proxops(&home, &repo, &["diff"]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert_eq!(
        home.requests()
            .unwrap()
            .iter()
            .filter(|(_, p, _)| p.ends_with("/cluster/status"))
            .count(),
        1
    );
}

/// `proxops --git-path <repo> <args>` with no credential in the
/// environment but `env`.
fn proxops_env(repo: &Repo, env: &[(&str, &str)], args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(repo.path())
        .env_remove("PROXOPS_PVE_TOKEN_VALUE")
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_PASSWORD")
        .env_remove("PROXOPS_PVE_USER")
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env_remove("SOPS_AGE_KEY")
        .env_remove("SOPS_AGE_KEY_FILE")
        .envs(env.iter().copied())
        .arg("--git-path")
        .arg(repo.path())
        .args(args)
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `proxops --git-path <repo> --cluster home <args>` with credentials from
/// the repository's SOPS file only (`key` is the age identity).
fn with_sops_key(repo: &Repo, key: &Path, args: &[&str]) -> Run {
    let key = key.to_str().unwrap();
    let all: Vec<&str> = ["--cluster", "home"].iter().chain(args).copied().collect();
    proxops_env(repo, &[("SOPS_AGE_KEY_FILE", key)], &all)
}

fn token_secret(pve: &FakePve) -> String {
    let value = pve.token_value();
    value.expose().rsplit('=').next().unwrap().to_owned()
}

/// `home`'s configuration with a SOPS file and references to its keys.
fn use_secrets(repo: &Repo, file: &str, refs: &str) {
    let cfg = home_config(repo);
    let cfg = cfg
        .lines()
        .take_while(|l| !l.contains("secrets"))
        .collect::<Vec<_>>()
        .join("\n");
    repo.write(
        "clusters/home/config.yaml",
        &format!("{cfg}\n      secrets-file: {file}\n      secrets:\n        pve:\n{refs}"),
    );
}

const TOKEN_REFS: &str =
    "          user: pve-user\n          token-id: pve-token-id\n          token: pve-token\n";

#[test]
fn a_secrets_file_outside_the_repository_exits_2_before_any_request() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let keys = tempfile::tempdir().unwrap();
    let (cipher, key) = encrypt(
        keys.path(),
        &format!(
            "secrets:\n  pve-user: root@pam\n  pve-token-id: proxops\n  pve-token: {}\n",
            token_secret(&pve)
        ),
    );
    let outside = tempfile::tempdir().unwrap();
    let stolen = outside.path().join("stolen.sops.yaml");
    std::fs::write(&stolen, &cipher).unwrap();
    let climb = format!(
        "../../../{}/stolen.sops.yaml",
        outside.path().file_name().unwrap().to_string_lossy()
    );
    assert!(repo.path().join("clusters/home").join(&climb).exists());
    let link = repo.path().join("clusters/home/linked.sops.yaml");
    std::os::unix::fs::symlink(&stolen, &link).unwrap();

    for file in [
        stolen.display().to_string(),
        climb,
        "linked.sops.yaml".into(),
    ] {
        use_secrets(&repo, &file, TOKEN_REFS);
        pve.forget_requests().unwrap();
        for args in [&["diff"][..], &["apply", "--yes"][..]] {
            let run = with_sops_key(&repo, &key, args);
            assert_eq!(run.code, 2, "{file}\n{}\n{}", home_config(&repo), run.all());
            assert!(
                run.stderr.contains("clusters/home/config.yaml")
                    && run.stderr.contains("pve.clusters.home.secrets-file"),
                "{}\n{}",
                home_config(&repo),
                run.all()
            );
        }
        assert!(pve.requests().unwrap().is_empty(), "{file}");
    }

    // The same file inside the repository is used: the refusal above is
    // about where it is, not what it holds.
    std::fs::remove_file(&link).unwrap();
    repo.write("clusters/home/secrets.sops.yaml", &cipher);
    use_secrets(&repo, "secrets.sops.yaml", TOKEN_REFS);
    let run = with_sops_key(&repo, &key, &["diff"]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(!pve.requests().unwrap().is_empty());
}

#[test]
fn a_sops_value_in_an_error_is_named_by_file_and_key_never_shown() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let keys = tempfile::tempdir().unwrap();
    let token = token_secret(&pve);
    let password = pve.password().expose().to_owned();
    let (cipher, key) = encrypt(
        keys.path(),
        &format!(
            "secrets:\n  pve-token-id: proxops\n  pve-token: {token}\n  pve-password: {password}\n"
        ),
    );
    repo.write("clusters/home/secrets.sops.yaml", &cipher);

    // The user reference points at the token: "the PVE user has no realm".
    use_secrets(
        &repo,
        "secrets.sops.yaml",
        "          user: pve-token\n          token-id: pve-token-id\n          token: pve-token\n",
    );
    pve.forget_requests().unwrap();
    let run = with_sops_key(&repo, &key, &["diff"]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(!run.all().contains(&token), "token shown:\n{}", run.all());
    assert!(
        run.stderr.contains("has no realm")
            && run.stderr.contains("SOPS key \"secrets.pve-token\"")
            && run.stderr.contains("secrets.sops.yaml"),
        "{}",
        run.all()
    );
    assert!(pve.requests().unwrap().is_empty());

    // A ticket login whose user reference points at the password: a user
    // without a realm, refused before any request (PVE's /access/ticket
    // does not assume @pam), and the message names the key, not the value.
    use_secrets(
        &repo,
        "secrets.sops.yaml",
        "          user: pve-password\n          password: pve-password\n",
    );
    pve.forget_requests().unwrap();
    let run = with_sops_key(&repo, &key, &["--pve-auth", "ticket", "diff"]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        !run.all().contains(&password),
        "password shown:\n{}",
        run.all()
    );
    assert!(
        run.stderr.contains("user@realm")
            && run.stderr.contains("SOPS key \"secrets.pve-password\""),
        "{}",
        run.all()
    );
    assert!(pve.requests().unwrap().is_empty());
}

#[test]
fn plain_http_is_refused_without_consent_and_warned_about_every_cycle() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let url = pve.url().to_owned();
    // Nothing listens on port 9 of the fake's own address.
    let http = format!("http://{}:9", pve.host());
    repo.write(
        "clusters/home/config.yaml",
        &home_config(&repo).replace(&url, &http),
    );
    pve.forget_requests().unwrap();
    let run = apply(&pve, &repo, &["--cluster", "home"]);
    assert_eq!(run.code, 2, "{}", run.all());
    assert!(
        run.stderr.contains("plain http") && run.stderr.contains("allow-insecure-http: true"),
        "{}",
        run.all()
    );
    assert!(pve.requests().unwrap().is_empty());

    repo.write(
        "clusters/home/config.yaml",
        &format!("{}      allow-insecure-http: true\n", home_config(&repo)),
    );
    let text = run_until(&pve, &repo, &["--cluster", "home"], "plain http to PVE", 3);
    // Start-up, then one per cycle: three means at least two cycles.
    assert!(text.matches("plain http to PVE").count() >= 3, "{text}");
    assert!(
        text.lines()
            .filter(|l| l.contains("plain http to PVE"))
            .all(|l| l.starts_with("warn") && l.contains("cluster=home")),
        "{text}"
    );
}

/// Runs `proxops run` (a cycle a second, with `pve`'s token) until its log
/// holds `needle` `times` times or a minute passed; stops it and returns
/// the log.
fn run_until(pve: &FakePve, repo: &Repo, selection: &[&str], needle: &str, times: usize) -> String {
    let logs = tempfile::tempdir().unwrap();
    let stderr_file = logs.path().join("stderr");
    let mut daemon = spawn_daemon(pve, repo, selection, &stderr_file);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut text = String::new();
    while Instant::now() < deadline && text.matches(needle).count() < times {
        std::thread::sleep(Duration::from_millis(100));
        text = std::fs::read_to_string(&stderr_file).unwrap_or_default();
    }
    let _ = daemon.kill();
    let _ = daemon.wait();
    text
}

#[test]
fn the_daemon_asks_every_cycle_and_refuses_one_pve_behind_two_addresses() {
    let pve = FakePve::start_on_two_addresses(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    point_edge_at(&repo, pve.also_url().unwrap(), &pve);
    pve.forget_requests().unwrap();
    // Each cycle logs one refusal per cluster: four are two cycles.
    let text = run_until(&pve, &repo, ALL, "the same PVE as cluster", 4);
    let refusals: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("the same PVE as cluster"))
        .collect();
    assert!(refusals.len() >= 4, "{text}");
    assert!(
        refusals
            .iter()
            .all(|l| l.starts_with("warn") && l.contains("proxops.cycle")),
        "{text}"
    );
    // Start-up and every cycle read each cluster's identity, nothing else.
    assert!(only_identity_reads(&pve) >= 6);
}

/// fakepve with one VM to adopt.
fn one_vm() -> serde_json::Value {
    let mut seed = empty_seed();
    seed["guests"] = json!([{
        "vmid": 100, "name": "web1", "status": "stopped",
        "config": {"memory": 2048, "cores": 2, "scsihw": "virtio-scsi-pci",
                   "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
                   "scsi0": "local-lvm:vm-100-disk-0,size=32G"}
    }]);
    seed
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn adopt_never_writes_through_a_symlink_out_of_the_work_tree() {
    let pve = FakePve::start(&one_vm()).unwrap();
    let repo = empty_repo(&pve);
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), repo.path().join("vm")).unwrap();

    pve.forget_requests().unwrap();
    let run = proxops(&pve, &repo, &["adopt"]);
    assert_ne!(run.code, 0, "{}", run.all());
    assert!(
        run.stderr.contains("symlink") && run.stderr.contains("outside"),
        "{}",
        run.all()
    );
    assert!(entries(outside.path()).is_empty(), "written outside");
    assert!(writes(&pve).is_empty());

    // The same adoption into a real directory writes the manifest.
    std::fs::remove_file(repo.path().join("vm")).unwrap();
    let run = proxops(&pve, &repo, &["adopt"]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(
        repo.path().join("vm/home/web1.yaml").exists(),
        "{}",
        run.all()
    );
}

#[test]
fn record_never_writes_through_a_symlink_out_of_its_folder() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let out = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, out.path().join("home.json")).unwrap();

    let run = proxops(
        &pve,
        &repo,
        &["record", "--out", out.path().to_str().unwrap()],
    );
    assert_ne!(run.code, 0, "{}", run.all());
    assert!(run.stderr.contains("symlink"), "{}", run.all());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(entries(outside.path()), vec![victim.clone()]);
    assert!(writes(&pve).is_empty());

    std::fs::remove_file(out.path().join("home.json")).unwrap();
    let run = proxops(
        &pve,
        &repo,
        &["record", "--out", out.path().to_str().unwrap()],
    );
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(out.path().join("home.json").is_file());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}

#[test]
fn terminal_escapes_from_pve_are_shown_never_obeyed() {
    // A live description that, printed raw, conceals everything after it:
    // the prune section, the totals and the question.
    let mut seed = empty_seed();
    let mut vm = live_support::seed_vm(150, "monitoring", Some("proxops"), true);
    vm["config"]["description"] = json!("metrics\u{1b}[8m\u{202e}");
    seed["guests"] = json!([
        vm,
        live_support::seed_vm(160, "old", Some("proxops"), false)
    ]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    repo.set_monitoring_description("reviewed");
    for args in [
        &["--color", "always", "diff"][..],
        &["diff", "--output", "markdown"][..],
        &["--color", "always", "apply", "--yes", "--dry-run"][..],
    ] {
        let run = proxops(&pve, &repo, args);
        let text = run.all();
        assert!(!text.contains("\u{1b}[8m"), "{args:?}: {text:?}");
        assert!(!text.contains('\u{202e}'), "{args:?}: {text:?}");
        if !args.contains(&"markdown") {
            assert!(
                text.contains("metrics\\x1b[8m\\u{202e}"),
                "{args:?}: {text}"
            );
        }
        assert!(text.contains("old"), "the prune is shown: {text}");
    }
    let run = proxops(&pve, &repo, &["--color", "always", "diff"]);
    // The colours ProxOps itself chose are still there.
    assert!(run.stdout.contains("\u{1b}[1m"), "{:?}", run.stdout);
    assert!(run.stdout.contains("Plan: "), "{}", run.stdout);
}

/// The secret of the separated token `proxops@pve!reconcile`.
const SEPARATED: &str = "7c1e7a0e-0000-4000-8000-00000000a0d1";

#[test]
fn a_token_that_cannot_audit_the_guests_is_refused_naming_the_privilege_and_path() {
    // The operator granted the user and, for the token (privilege
    // separation), nodes and storage: the second ACL line for /vms is
    // missing, so PVE hides every guest from the token.
    let mut seed = empty_seed();
    seed["guests"] = json!([live_support::seed_vm(
        150,
        "monitoring",
        Some("proxops"),
        true
    )]);
    seed["tokens"] = json!({"proxops@pve!reconcile": SEPARATED});
    seed["users"] = json!({"proxops@pve": "unused-password"});
    let all = [
        "VM.Audit",
        "VM.Allocate",
        "VM.Config.Options",
        "VM.PowerMgmt",
        "Sys.Audit",
        "Datastore.Audit",
        "Datastore.AllocateSpace",
    ];
    seed["acl"] = json!([
        ["proxops@pve", "/", all],
        ["proxops@pve!reconcile", "/nodes", ["Sys.Audit"]],
        [
            "proxops@pve!reconcile",
            "/storage",
            ["Datastore.Audit", "Datastore.AllocateSpace"]
        ],
    ]);
    seed["privsep"] = json!(["proxops@pve!reconcile"]);
    let pve = FakePve::start(&seed).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let token = format!("proxops@pve!reconcile={SEPARATED}");

    // The attack as it was: the token's inventory lacks guest 150, which
    // PVE holds, so a plan would create it again.
    let api = proxops_pve::auth::ApiToken::new(
        "proxops@pve",
        "reconcile",
        proxops_pve::auth::Secret::new(SEPARATED),
    )
    .unwrap();
    let mut cfg = pve.live_config();
    cfg.credentials = proxops_pve::auth::Credentials::Token(api);
    let seen = proxops_pve::live::LiveTransport::new(cfg)
        .unwrap()
        .call(&proxops_pve::transport::Request::new(
            proxops_pve::transport::Method::Get,
            "/cluster/resources",
            vec![("type".into(), "vm".into())],
        ))
        .unwrap();
    assert_eq!(
        seen.data(),
        &json!([]),
        "PVE hides the guest from the token"
    );

    pve.forget_requests().unwrap();
    for args in [
        &["--cluster", "home", "diff"][..],
        &["--cluster", "home", "apply", "--yes"][..],
    ] {
        let run = proxops_env(&repo, &[("PROXOPS_PVE_TOKEN_VALUE", &token)], args);
        assert_eq!(run.code, 1, "{}", run.all());
        for needle in [
            "proxops@pve!reconcile cannot audit what this cluster manages",
            "missing VM.Audit on /vms",
            "no inventory read, no write",
            "--tokens 'proxops@pve!reconcile'",
        ] {
            assert!(run.all().contains(needle), "{needle}\n{}", run.all());
        }
    }
    let requests = pve.requests().unwrap();
    assert!(
        requests
            .iter()
            .all(|(m, p, _)| m == "GET" && !p.ends_with("/cluster/resources")),
        "no inventory read, no write: {requests:?}"
    );

    // The second ACL line: the token sees the guest, and the plan is true.
    pve.call(
        "grant",
        json!(["proxops@pve!reconcile", "/vms", "VM.Audit"]),
        json!({}),
    )
    .unwrap();
    let run = proxops_env(
        &repo,
        &[("PROXOPS_PVE_TOKEN_VALUE", &token)],
        &["--cluster", "home", "diff"],
    );
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(!run.stdout.contains("will create"), "{}", run.all());
}
