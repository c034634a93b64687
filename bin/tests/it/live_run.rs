//! `proxops run` against fakepve: the daemon serves `/healthz`, `/metrics`
//! (checked by the real `promtool check metrics`) and `/status`, converges
//! the cluster every poll interval, reports an injected fault as a failed
//! object and an error action, recovers once the fault is cleared, counts
//! an unloadable tree as a `parse_error` cycle and keeps going, and exits 0
//! on SIGTERM — with the token nowhere in what it serves or prints. With
//! `--dry-run` it observes: it plans and serves the pending changes every
//! cycle and sends PVE no write at all.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

/// Everything in this test finishes well within this.
const DEADLINE: Duration = Duration::from_secs(60);

/// The daemon child; killed if the test ends before it exited.
struct Daemon {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
    _logs: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Daemon {
    fn start(pve: &FakePve, repo: &Repo) -> Daemon {
        Daemon::start_with(pve, repo, &[])
    }

    /// As [`Daemon::start`], with `extra` flags (e.g. `--dry-run`).
    fn start_with(pve: &FakePve, repo: &Repo, extra: &[&str]) -> Daemon {
        let git_path = repo.path().to_str().unwrap().to_owned();
        let mut args = vec!["--git-path", &git_path, "--cluster", "home"];
        args.extend_from_slice(extra);
        Daemon::spawn(
            repo.path(),
            &[("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())],
            &args,
        )
    }

    /// `proxops <args> --git-poll-sec 1 --listen 127.0.0.1:0 --log-level
    /// debug run` in `cwd` with `env`, output to files.
    fn spawn(cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> Daemon {
        let logs = tempfile::tempdir().unwrap();
        let stdout = logs.path().join("stdout");
        let stderr = logs.path().join("stderr");
        let child = Command::new(env!("CARGO_BIN_EXE_proxops"))
            .current_dir(cwd)
            .env_remove("PROXOPS_GIT_PATH")
            .env_remove("PROXOPS_CONFIG")
            .env_remove("PROXOPS_PVE_TOKEN")
            .env_remove("PROXOPS_PVE_PASSWORD")
            .env_remove("PROXOPS_PVE_USER")
            .env_remove("PROXOPS_PVE_TOKEN_VALUE")
            .env_remove("PROXOPS_GIT_TOKEN")
            .envs(env.iter().copied())
            .args(args)
            .args(["--git-poll-sec", "1"])
            .args(["--listen", "127.0.0.1:0", "--log-level", "debug"])
            .arg("run")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Daemon {
            child,
            stdout,
            stderr,
            _logs: logs,
        }
    }

    /// Sends SIGTERM and waits for the exit status.
    fn terminate(&mut self, deadline: Instant) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(&pid)
            .status()
            .unwrap();
        assert!(sent.success());
        self.exited(deadline)
    }

    /// Waits for the process to end by itself.
    fn exited(&mut self, deadline: Instant) -> std::process::ExitStatus {
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "still running:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    /// The address the server bound, from the start-up log line.
    fn address(&mut self, deadline: Instant) -> String {
        loop {
            let log = self.stderr();
            if let Some(addr) = live_support::listen_address(&log) {
                return addr.to_owned();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("proxops run exited early ({status}):\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "no start-up line in time:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// One HTTP/1.0 GET: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, body.to_owned())
}

/// Polls `path` until `done(status, body)` holds; returns that body.
fn wait_for(
    addr: &str,
    path: &str,
    deadline: Instant,
    what: &str,
    done: impl Fn(u16, &str) -> bool,
) -> String {
    loop {
        let (status, body) = get(addr, path);
        if done(status, &body) {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not reached in time; last {path} answer {status}:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn monitoring_state(status_body: &str) -> Option<String> {
    let doc: Value = serde_json::from_str(status_body).ok()?;
    doc["objects"]
        .as_array()?
        .iter()
        .find(|o| o["kind"] == "VM" && o["name"] == "monitoring")
        .and_then(|o| o["state"].as_str().map(str::to_owned))
}

/// The value of the first series line that starts with `series` and has
/// every label in `labels`, 0 when there is none.
fn sample(metrics: &str, family: &str, labels: &[&str]) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(family) && !l.starts_with('#'))
        .filter(|l| labels.iter().all(|lab| l.contains(lab)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn tool(name: &str, debian_package: &str) -> PathBuf {
    let tools = std::env::var_os("PROXOPS_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools"));
    let candidate = tools.join("bin").join(name);
    if candidate.is_file() {
        return candidate;
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "{name} not found (looked in {} and PATH): run tools/install-test-tools.sh \
         (it installs the Debian package {debian_package}) and try again",
        candidate.display()
    );
}

fn promtool_check(text: &str) -> (bool, String) {
    let mut child = Command::new(tool("promtool", "prometheus"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

#[test]
fn the_daemon_converges_reports_a_fault_recovers_and_stops_cleanly_on_sigterm() {
    let started = Instant::now();
    let deadline = started + DEADLINE;
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    repo.set_monitoring_description("metrics");

    let mut daemon = Daemon::start(&pve, &repo);
    let addr = daemon.address(deadline);
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");

    // Before the first cycle has finished the daemon is not healthy; then it is.
    let (first, body) = get(&addr, "/healthz");
    assert_eq!(first, 503, "{body}");
    wait_for(&addr, "/healthz", deadline, "healthy", |s, _| s == 200);

    // The desired VM is created and converged.
    wait_for(&addr, "/status", deadline, "converged", |_, b| {
        monitoring_state(b).as_deref() == Some("converged")
    });

    // Metrics pass promtool and the ok-cycle counter grows between scrapes.
    let (code, one) = get(&addr, "/metrics");
    assert_eq!(code, 200);
    let (ok, said) = promtool_check(&one);
    assert!(
        ok,
        "promtool check metrics failed:\n{said}\n--- metrics ---\n{one}"
    );
    let ok_cycles = r#"result="ok""#;
    let before = sample(&one, "proxops_cycles_total", &[ok_cycles]);
    assert!(before >= 1, "{one}");
    let gets = [r#"method="GET""#, r#"result="success""#];
    let gets_before = sample(&one, "proxops_pve_requests_total", &gets);
    assert!(gets_before > 0, "{one}");
    let two = wait_for(&addr, "/metrics", deadline, "cycles counted", |_, b| {
        sample(b, "proxops_cycles_total", &[ok_cycles]) > before
    });
    // Every cycle reads the inventory; the request counter follows.
    assert!(
        sample(&two, "proxops_pve_requests_total", &gets) > gets_before,
        "{two}"
    );

    // A change PVE refuses (a locked guest is skipped before any write,
    // so the refusal is injected on the write itself): the object fails,
    // the action is counted as an error, and the loop keeps going.
    pve.call(
        "fail",
        json!(["POST", "/nodes/pve1/qemu/150/config"]),
        json!({"status": 500, "message": "refused: storage busy"}),
    )
    .unwrap();
    repo.set_monitoring_description("metrics-v2");
    let failed = wait_for(&addr, "/status", deadline, "failed", |_, b| {
        monitoring_state(b).as_deref() == Some("failed")
    });
    assert!(failed.contains("storage busy"), "{failed}");
    let errors = wait_for(&addr, "/metrics", deadline, "error counted", |_, b| {
        sample(
            b,
            "proxops_actions_total",
            &[r#"kind="VM""#, r#"result="error""#],
        ) > 0
    });
    let (ok, said) = promtool_check(&errors);
    assert!(
        ok,
        "promtool check metrics failed:\n{said}\n--- metrics ---\n{errors}"
    );

    // Cleared: the next cycle applies the change and converges again.
    pve.clear().unwrap();
    let recovered = wait_for(&addr, "/status", deadline, "recovered", |_, b| {
        monitoring_state(b).as_deref() == Some("converged")
    });
    let (_, metrics) = get(&addr, "/metrics");

    // A tree that does not load is an aborted `parse_error` cycle; the loop
    // goes on and picks up the repaired tree.
    let manifest = repo.path().join("vm/base/monitoring.yaml");
    let good = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, "kind: VM\nspec: [unclosed\n").unwrap();
    let parse_error = r#"result="parse_error""#;
    wait_for(
        &addr,
        "/metrics",
        deadline,
        "parse_error counted",
        |_, b| sample(b, "proxops_cycles_total", &[parse_error]) > 0,
    );
    assert!(
        daemon.stderr().contains("proxops.invalid_input"),
        "{}",
        daemon.stderr()
    );
    let (_, aborted) = get(&addr, "/status");
    let doc: Value = serde_json::from_str(&aborted).unwrap();
    assert_eq!(doc["last_cycle"]["aborted"], true, "{aborted}");
    // The aborted cluster keeps its last known records.
    assert_eq!(monitoring_state(&aborted).as_deref(), Some("converged"));
    std::fs::write(&manifest, good).unwrap();
    let (_, now) = get(&addr, "/metrics");
    let ok_so_far = sample(&now, "proxops_cycles_total", &[ok_cycles]);
    wait_for(&addr, "/metrics", deadline, "ok again", |_, b| {
        sample(b, "proxops_cycles_total", &[ok_cycles]) > ok_so_far
    });

    // Transports live across cycles: counted once, never more often than
    // the requests logged so far.
    let (_, counted) = get(&addr, "/metrics");
    let logged = daemon
        .stderr()
        .lines()
        .filter(|l| l.contains("pve.request"))
        .count() as u64;
    let total = sample(&counted, "proxops_pve_requests_total", &[]);
    assert!(
        total > 0 && total <= logged,
        "{total} counted, {logged} logged"
    );

    // SIGTERM: exit 0.
    let status = daemon.terminate(deadline);
    let stderr = daemon.stderr();
    let stdout = daemon.stdout();
    assert_eq!(status.code(), Some(0), "{stderr}");

    // One info line per cycle and cluster, debug lines per PVE request.
    assert!(
        stderr.lines().any(|l| l.contains("proxops.cycle")
            && l.contains("cluster=home")
            && l.contains("result=ok")),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("pve.request") && l.contains("path=/cluster/resources")),
        "{stderr}"
    );

    // The token is nowhere.
    let secret = pve.token_value();
    let token_secret = secret.expose().rsplit('=').next().unwrap().to_owned();
    for (what, text) in [
        ("/status", &recovered),
        ("/metrics", &metrics),
        ("stdout", &stdout),
        ("stderr", &stderr),
    ] {
        assert!(!text.contains(&token_secret), "token leaked in {what}");
    }
    eprintln!("live_run took {:?}", started.elapsed());
}

#[test]
fn a_url_mode_daemon_whose_remote_never_answered_serves_not_ready_cycles_and_touches_no_pve() {
    let deadline = Instant::now() + DEADLINE;
    let ops = tempfile::tempdir().unwrap();
    // A PVE endpoint that would see any request: it must see none.
    let pve = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    pve.set_nonblocking(true).unwrap();
    let port = pve.local_addr().unwrap().port();
    let cfg = ops.path().join("proxops.yaml");
    std::fs::write(
        &cfg,
        format!(
            "git:\n  url: file://{}\ndata-dir: {}\npve:\n  clusters:\n    edge:\n      base-url: https://127.0.0.1:{port}\n",
            ops.path().join("missing.git").display(),
            ops.path().join("data").display()
        ),
    )
    .unwrap();
    let token = "root@pam!ci=5f0c9a1e-0000-4000-8000-00000000beef";
    let mut daemon = Daemon::spawn(
        ops.path(),
        &[
            ("PROXOPS_PVE_TOKEN_VALUE", token),
            ("HOME", ops.path().to_str().unwrap()),
        ],
        &["--config", cfg.to_str().unwrap()],
    );
    let addr = daemon.address(deadline);
    let not_ready = r#"result="not_ready""#;
    let metrics = wait_for(&addr, "/metrics", deadline, "not_ready cycles", |_, b| {
        sample(b, "proxops_cycles_total", &[not_ready]) >= 2
    });
    let (ok, said) = promtool_check(&metrics);
    assert!(
        ok,
        "promtool check metrics failed:\n{said}\n--- metrics ---\n{metrics}"
    );
    assert_eq!(sample(&metrics, "proxops_pve_requests_total", &[]), 0);
    let (_, status) = get(&addr, "/status");
    let doc: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(doc["last_cycle"]["aborted"], true, "{status}");
    let reason = doc["last_cycle"]["abort_reason"].as_str().unwrap();
    assert!(
        reason.starts_with("edge: git sync failed and no previous good tree"),
        "{status}"
    );
    assert!(
        matches!(pve.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "PVE was contacted"
    );

    let exit = daemon.terminate(deadline);
    let stderr = daemon.stderr();
    assert_eq!(exit.code(), Some(0), "{stderr}");
    let secret = token.rsplit('=').next().unwrap();
    for text in [&metrics, &status, &stderr, &daemon.stdout()] {
        assert!(!text.contains(secret), "token leaked");
    }
}

#[test]
fn sigterm_lets_the_action_in_flight_finish_and_starts_no_other() {
    let deadline = Instant::now() + DEADLINE;
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let twin = std::fs::read_to_string(repo.path().join("vm/base/monitoring.yaml"))
        .unwrap()
        .replace("name: monitoring", "name: monitoring-b")
        .replace("vmid: 150", "vmid: 151");
    repo.write("vm/base/monitoring-b.yaml", &twin);
    repo.set_resources(&[
        "../../vm/base/monitoring.yaml",
        "../../vm/base/monitoring-b.yaml",
    ]);
    let created = proxops(&pve, &repo, &["apply", "--yes"]);
    assert_eq!(created.code, 0, "{}", created.all());

    // Both VMs stopped behind ProxOps' back; a start now takes 2 s. Both
    // are on pve1: one task per node there, so one start waits behind the
    // other.
    repo.set_reconcile("tasks-per-node", "1");
    pve.settings(json!({"time_scale": 0.1})).unwrap();
    for vmid in [150, 151] {
        pve.set_guest(vmid, json!({"status": "stopped", "start_secs": 20}))
            .unwrap();
    }
    pve.forget_requests().unwrap();

    let mut daemon = Daemon::start(&pve, &repo);
    let started_log = |d: &Daemon| {
        d.stderr()
            .lines()
            .any(|l| l.contains("pve.request method=POST") && l.contains("/status/start"))
    };
    while !started_log(&daemon) {
        assert!(
            Instant::now() < deadline,
            "no start request:\n{}",
            daemon.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let exit = daemon.terminate(deadline);
    let stderr = daemon.stderr();
    assert_eq!(exit.code(), Some(0), "{stderr}");

    // The start in flight was waited for and succeeded; the other never began.
    let starts: Vec<_> = writes(&pve)
        .into_iter()
        .filter(|(m, p)| m == "POST" && p.ends_with("/status/start"))
        .collect();
    assert_eq!(starts.len(), 1, "{starts:?}\n{stderr}");
    let done: Vec<_> = stderr
        .lines()
        .filter(|l| l.contains("proxops.action") && l.contains("what=start"))
        .collect();
    assert_eq!(done.len(), 1, "{stderr}");
    assert!(done[0].contains("ok=true"), "{stderr}");
    assert!(stderr.contains("proxops.run stopping"), "{stderr}");
}

/// The `/status` object record of `VM/<name>`.
fn vm_record(status_body: &str, name: &str) -> Value {
    let doc: Value = serde_json::from_str(status_body).unwrap();
    doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "VM" && o["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

/// fakepve with the monitoring VM applied, and a repository that has
/// since changed its description and added a second VM: one converged
/// object, one update and one create pending.
fn drifted_monitoring() -> (FakePve, Repo) {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    repo.set_monitoring_description("metrics");
    let created = apply(&pve, &repo, &[]);
    assert_eq!(created.code, 0, "{}", created.all());

    // Drift: the running VM's description changed, and a second VM is new.
    repo.set_monitoring_description("observed");
    let twin = std::fs::read_to_string(repo.path().join("vm/base/monitoring.yaml"))
        .unwrap()
        .replace("name: monitoring", "name: monitoring-b")
        .replace("vmid: 150", "vmid: 151");
    repo.write("vm/base/monitoring-b.yaml", &twin);
    repo.set_resources(&[
        "../../vm/base/monitoring.yaml",
        "../../vm/base/monitoring-b.yaml",
    ]);
    (pve, repo)
}

#[test]
fn an_observing_daemon_serves_the_pending_changes_for_three_cycles_and_writes_nothing() {
    let deadline = Instant::now() + DEADLINE;
    let (pve, repo) = drifted_monitoring();
    pve.forget_requests().unwrap();

    let mut daemon = Daemon::start_with(&pve, &repo, &["--dry-run"]);
    let addr = daemon.address(deadline);
    let first_line = daemon.stderr().lines().next().unwrap_or("").to_owned();
    assert!(first_line.contains("mode=observe"), "{first_line}");

    // Scraped while it runs: three dry-run cycles, each planning the same.
    let dry = r#"result="dry_run""#;
    let mut scrapes = Vec::new();
    for n in 1..=3 {
        let metrics = wait_for(&addr, "/metrics", deadline, "dry-run cycle", |_, b| {
            sample(b, "proxops_cycles_total", &[dry]) >= n
        });
        let (_, status) = get(&addr, "/status");
        scrapes.push((metrics, status));
    }
    for (metrics, status) in &scrapes {
        let (ok, said) = promtool_check(metrics);
        assert!(
            ok,
            "promtool check metrics failed:\n{said}\n--- metrics ---\n{metrics}"
        );
        let pending = |action: &str| {
            sample(
                metrics,
                "proxops_pending_actions",
                &[r#"cluster="home""#, &format!("action=\"{action}\"")],
            )
        };
        assert_eq!(
            (pending("create"), pending("update"), pending("prune")),
            (1, 1, 0),
            "{metrics}"
        );
        assert_eq!(sample(metrics, "proxops_observe_only", &[]), 1, "{metrics}");
        assert_eq!(
            sample(metrics, "proxops_cycles_total", &[r#"result="ok""#]),
            0,
            "{metrics}"
        );

        let doc: Value = serde_json::from_str(status).unwrap();
        assert_eq!(doc["mode"], "observe", "{status}");
        let monitoring = vm_record(status, "monitoring");
        assert_eq!(monitoring["state"], "drift", "{status}");
        assert_eq!(monitoring["pending"][0]["action"], "update", "{status}");
        let change = &monitoring["pending"][0]["changes"][0];
        assert_eq!(change["field"], "description", "{status}");
        assert_eq!(change["from"], "metrics", "{status}");
        assert_eq!(change["to"], "observed", "{status}");
        let twin = vm_record(status, "monitoring-b");
        assert_eq!(twin["state"], "drift", "{status}");
        assert_eq!(twin["pending"][0]["action"], "create", "{status}");
        assert_eq!(
            doc["clusters"][0]["pending_actions"]["create"], 1,
            "{status}"
        );
        assert_eq!(doc["clusters"][0]["result"], "dry_run", "{status}");
    }

    let exit = daemon.terminate(deadline);
    let stderr = daemon.stderr();
    assert_eq!(exit.code(), Some(0), "{stderr}");

    // PVE saw reads only: no POST, PUT or DELETE (a token needs no login).
    assert_eq!(writes(&pve), Vec::<(String, String)>::new(), "{stderr}");
    assert!(
        pve.requests()
            .unwrap()
            .iter()
            .any(|(m, p, _)| m == "GET" && p.contains("/cluster/resources")),
        "PVE was never read"
    );
    // The plan is logged, field changes included.
    assert!(
        stderr.lines().any(|l| l.contains("proxops.planned")
            && l.contains("name=monitoring ")
            && l.contains("what=update")
            && l.contains("description: metrics -> observed")),
        "{stderr}"
    );
    assert!(!stderr.contains("proxops.action"), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.contains("proxops.run started") && l.contains("mode=observe")),
        "{stderr}"
    );
}

/// `doc` with every RFC 3339 timestamp string replaced by `<time>`, every
/// cycle's duration by 0 and the cycle history cut to its last cycle: two
/// processes that read the same PVE differ in when, how long and how
/// often, not in what.
fn without_times(doc: &mut Value) {
    if let Some(cycles) = doc.get_mut("recent_cycles").and_then(Value::as_array_mut) {
        let last = cycles.len().saturating_sub(1);
        cycles.drain(..last);
    }
    match doc {
        Value::String(s) if s.len() == 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T' => {
            *s = "<time>".to_owned();
        }
        Value::Array(items) => items.iter_mut().for_each(without_times),
        Value::Object(fields) => {
            if let Some(took) = fields.get_mut("took_ms") {
                *took = Value::from(0);
            }
            fields.values_mut().for_each(without_times);
        }
        _ => {}
    }
}

#[test]
fn status_output_json_is_the_document_an_observing_daemon_serves() {
    let deadline = Instant::now() + DEADLINE;
    let (pve, repo) = drifted_monitoring();

    let status = proxops(&pve, &repo, &["status", "--output", "json"]);
    assert_eq!(status.code, 0, "{}", status.all());

    let mut daemon = Daemon::start_with(&pve, &repo, &["--dry-run"]);
    let addr = daemon.address(deadline);
    wait_for(&addr, "/metrics", deadline, "dry-run cycle", |_, b| {
        sample(b, "proxops_cycles_total", &[r#"result="dry_run""#]) >= 1
    });
    let (code, served) = get(&addr, "/status");
    assert_eq!(code, 200, "{served}");
    let exit = daemon.terminate(deadline);
    assert_eq!(exit.code(), Some(0), "{}", daemon.stderr());

    let mut printed: Value = serde_json::from_str(&status.stdout).unwrap();
    let mut served: Value = serde_json::from_str(&served).unwrap();
    assert_eq!(vm_record(&status.stdout, "monitoring")["state"], "drift");
    assert_eq!(vm_record(&status.stdout, "monitoring-b")["state"], "drift");
    without_times(&mut printed);
    without_times(&mut served);
    assert_eq!(
        printed, served,
        "proxops status --output json:\n{printed:#}\n/status:\n{served:#}"
    );
}

/// Seconds since the Unix epoch of an RFC 3339 UTC time
/// (`2026-12-01T15:00:00Z`), as `/status` writes them.
fn epoch_secs(t: &str) -> i64 {
    let n = |a: usize, b: usize| t[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19)
}

/// The home cluster's holds in a `/status` body.
fn holds(status_body: &str) -> Vec<Value> {
    let doc: Value = serde_json::from_str(status_body).unwrap_or_default();
    doc["clusters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == "home")
        .flat_map(|c| c["holds"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// A daemon polling every second over the monitoring VM alone (the repo
/// set up by `configure` too), once it has created it and converged; and
/// its status address.
fn monitoring_converged(
    deadline: Instant,
    configure: impl Fn(&Repo),
) -> (FakePve, Repo, Daemon, String) {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    configure(&repo);
    let mut daemon = Daemon::start(&pve, &repo);
    let addr = daemon.address(deadline);
    wait_for(&addr, "/status", deadline, "converged", |_, b| {
        monitoring_state(b).as_deref() == Some("converged")
    });
    (pve, repo, daemon, addr)
}

/// Forgets the requests so far, asks for more memory than the monitoring
/// VM has (a stop-start change: it cannot hot-plug memory), and waits for
/// `/status` to show it held: that body and the hold.
fn more_memory_until_held(
    pve: &FakePve,
    repo: &Repo,
    addr: &str,
    deadline: Instant,
) -> (String, Value) {
    pve.forget_requests().unwrap();
    let manifest = repo.path().join("vm/base/monitoring.yaml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("memory: 1GiB", "memory: 2GiB")).unwrap();
    let status = wait_for(addr, "/status", deadline, "held", |_, b| {
        !holds(b).is_empty()
    });
    let held = holds(&status)[0].clone();
    (status, held)
}

#[test]
fn a_refused_stop_start_write_holds_the_guest_instead_of_retrying_every_poll() {
    // Polling every second, the daemon meets a stop-start change (memory,
    // which the VM cannot hot-plug) whose config write fakepve refuses.
    // It writes before it stops, so the refusal costs no shutdown, and
    // the guest is held for the backoff (5 minutes): no second write, and
    // no shutdown at all, in the minute watched from the change on;
    // /status shows the hold and its next attempt, /metrics counts it.
    const WATCHED: Duration = Duration::from_secs(60);
    let deadline = Instant::now() + DEADLINE + WATCHED;
    let (pve, repo, mut daemon, addr) = monitoring_converged(deadline, |_| {});

    pve.call(
        "fail",
        json!(["POST", "/nodes/pve1/qemu/150/config"]),
        json!({"status": 500, "message": "unable to write config: storage busy"}),
    )
    .unwrap();
    let changed = Instant::now();
    let (status, held) = more_memory_until_held(&pve, &repo, &addr, deadline);
    assert_eq!(held["kind"], "VM", "{status}");
    assert_eq!(held["name"], "monitoring", "{status}");
    assert_eq!(held["action"], "update", "{status}");
    assert_eq!(held["failures"], 1, "{status}");
    assert!(
        held["last_error"]
            .as_str()
            .unwrap()
            .contains("storage busy"),
        "{status}"
    );
    let doc: Value = serde_json::from_str(&status).unwrap();
    let failed_at = epoch_secs(doc["last_cycle"]["finished_at"].as_str().unwrap());
    let next = epoch_secs(held["next_attempt"].as_str().unwrap());
    assert!(
        next - failed_at >= 5 * 60 - 2,
        "the next attempt comes after the 5-minute backoff: {status}"
    );

    // Cycles go on (one a second) and plan the change as held.
    let (_, metrics) = get(&addr, "/metrics");
    assert_eq!(
        sample(&metrics, "proxops_objects_held", &[r#"cluster="home""#]),
        1,
        "{metrics}"
    );
    let to_150 = |sent: &[(String, String, String)], suffix: &str| {
        sent.iter()
            .filter(|(m, p, _)| m == "POST" && p.ends_with(&format!("/qemu/150{suffix}")))
            .count()
    };
    let powers = ["/status/shutdown", "/status/stop", "/status/reboot"];
    // The one attempt: its write (with the transport's own retries of a
    // 500 within the call), and no shutdown.
    let sent = pve.requests().unwrap();
    assert!(to_150(&sent, "/config") >= 1, "{sent:?}");
    let shutdowns = |sent: &[_]| powers.iter().map(|p| to_150(sent, p)).sum::<usize>();
    assert_eq!(
        shutdowns(&sent),
        0,
        "a refused write costs no shutdown: {sent:?}"
    );

    pve.forget_requests().unwrap();
    let cycles = |m: &str| sample(m, "proxops_cycles_total", &[r#"result="ok""#]);
    let before = cycles(&metrics);
    std::thread::sleep(WATCHED.saturating_sub(changed.elapsed()));
    let (_, metrics) = get(&addr, "/metrics");
    assert!(cycles(&metrics) >= before + 20, "{metrics}");
    let sent = pve.requests().unwrap();
    assert_eq!(
        to_150(&sent, "/config"),
        0,
        "held: no second write: {sent:?}"
    );
    assert_eq!(shutdowns(&sent), 0, "held: no shutdown: {sent:?}");
    let (_, status) = get(&addr, "/status");
    let o = serde_json::from_str::<Value>(&status).unwrap()["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "monitoring")
        .cloned()
        .unwrap();
    assert_eq!(o["state"], "skipped", "{status}");
    assert!(
        o["last_error"]
            .as_str()
            .unwrap()
            .starts_with("held: its update failed 1 time(s)"),
        "{status}"
    );
    assert!(daemon.terminate(deadline).success());
}

#[test]
fn a_guest_that_does_not_shut_down_is_shut_down_once_not_every_poll() {
    // The write goes through (PVE holds the memory change pending), the
    // guest ignores the shutdown (PVE's task ends "got timeout"), PVE
    // reads back that it still runs. Under restart-policy reboot the next
    // cycles would reboot it for the pending change, poll after poll: the
    // hold allows one shutdown, then nothing for the backoff.
    const WATCHED: Duration = Duration::from_secs(8);
    let deadline = Instant::now() + DEADLINE;
    let (pve, repo, mut daemon, addr) = monitoring_converged(deadline, |repo| {
        repo.set_reconcile("restart-policy", "reboot");
    });
    pve.set_guest(150, json!({"shutdown_secs": 100_000}))
        .unwrap();
    let (status, held) = more_memory_until_held(&pve, &repo, &addr, deadline);
    let error = held["last_error"].as_str().unwrap();
    assert!(
        error.contains("did not shut down") && error.contains("PVE reports it running"),
        "{status}"
    );
    std::thread::sleep(WATCHED);
    let sent = pve.requests().unwrap();
    let count = |suffix: &str| {
        sent.iter()
            .filter(|(m, p, _)| m == "POST" && p.ends_with(&format!("/qemu/150{suffix}")))
            .count()
    };
    assert_eq!(count("/status/shutdown"), 1, "{sent:?}");
    assert_eq!(
        count("/status/reboot") + count("/status/stop"),
        0,
        "{sent:?}"
    );
    assert_eq!(count("/config"), 1, "{sent:?}");
    assert!(daemon.terminate(deadline).success());
}

#[test]
fn run_once_gives_the_cluster_one_turn_and_exits_with_its_outcome() {
    let deadline = Instant::now() + DEADLINE;
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    repo.set_monitoring_description("metrics");

    let mut daemon = Daemon::start_with(&pve, &repo, &["--once"]);
    let status = daemon.exited(deadline);
    assert_eq!(status.code(), Some(0), "{}", daemon.stderr());
    assert_eq!(
        daemon.stderr().matches("proxops.cycle ").count(),
        1,
        "{}",
        daemon.stderr()
    );
    assert!(
        writes(&pve)
            .iter()
            .any(|(m, p)| m == "POST" && p == "/api2/json/nodes/pve1/qemu"),
        "{:?}",
        writes(&pve)
    );

    // A turn whose action PVE refuses ends in exit 1, as apply's would.
    pve.call(
        "fail",
        json!(["POST", "/nodes/pve1/qemu/150/config"]),
        json!({"status": 500, "message": "refused: storage busy"}),
    )
    .unwrap();
    repo.set_monitoring_description("metrics-v2");
    let mut daemon = Daemon::start_with(&pve, &repo, &["--once"]);
    let status = daemon.exited(deadline);
    assert_eq!(status.code(), Some(1), "{}", daemon.stderr());
    assert!(
        daemon.stderr().contains("storage busy"),
        "{}",
        daemon.stderr()
    );
}

#[test]
fn status_watch_prints_the_table_again_every_poll_interval_until_interrupted() {
    let deadline = Instant::now() + DEADLINE;
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let config = repo.path().join("proxops.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("poll-interval: 60s"), "{text}");
    std::fs::write(
        &config,
        text.replace("poll-interval: 60s", "poll-interval: 1s"),
    )
    .unwrap();

    let mut child = command(&pve, &repo, &["status", "--watch"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut tables = 0;
    while tables < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("a second table within the deadline");
        if line == "=== home ===" {
            tables += 1;
        }
    }
    let sent = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
