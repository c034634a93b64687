//! Test harness: a fakepve server (the PVE API stand-in from the PyPI package
//! fakepve) in a child process, seeded from JSON, on its own loopback address.
//!
//! Owns starting `tools/fakepve/launcher.py` from the venv that
//! `tools/install-test-tools.sh` made, waiting for it to be ready, talking to
//! its control port (faults, settings, the log of what the client sent) and
//! stopping it by PID when dropped. Only built with the `fakepve` feature.
//!
//! **Architecture Invariant:** it listens on loopback only (127.x.y.z, one
//! address per server so parallel tests never share one) and leaves no
//! process behind: Drop kills the child, and the launcher also exits when
//! its stdin (held here) closes, should the test process die first.

use std::io::{BufRead, BufReader, Read};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use serde_json::{Value, json};

use crate::auth::{ApiToken, Credentials, Secret, TicketLogin};
use crate::breaker::BreakerPolicy;
use crate::live::{DEFAULT_TIMEOUT, LiveConfig};
use crate::retry::RetryPolicy;
use crate::tls::TlsTrust;

/// The API token user and id every harness seeds: `root@pam!proxops`.
pub const TOKEN_USER: &str = "root@pam";
pub const TOKEN_ID: &str = "proxops";
/// The password login user.
pub const LOGIN_USER: &str = "root@pam";

const PVE_PORT: u16 = 8006;
const CONTROL_PORT: u16 = 8007;
/// How long a launcher may take to print its ready line (a cold Python start
/// on a busy 2-core machine is a few seconds).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Addresses tried when one is taken (launcher exit status 3).
const ADDRESS_ATTEMPTS: u32 = 20;
const EXIT_ADDRESS_IN_USE: i32 = 3;

/// Why a fakepve server could not be started or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FakePveError {
    #[error("fakepve is not installed ({0} is missing): run tools/install-test-tools.sh")]
    ToolsMissing(PathBuf),
    #[error("fakepve did not start: {0}")]
    Start(String),
    #[error("fakepve control {what}: {message}")]
    Control { what: String, message: String },
}

/// A running fakepve server. Dropping it stops the process.
pub struct FakePve {
    child: Child,
    _stdin: Option<ChildStdin>,
    host: Ipv4Addr,
    url: String,
    /// The same server on a second loopback address (`start_on_two_addresses`).
    also_url: Option<String>,
    control: String,
    ca_file: PathBuf,
    fingerprint: String,
    token_secret: Secret,
    password: Secret,
    stderr: Arc<Mutex<String>>,
    agent: ureq::Agent,
    _state: tempfile::TempDir,
}

impl std::fmt::Debug for FakePve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakePve")
            .field("url", &self.url)
            .field("pid", &self.child.id())
            .finish_non_exhaustive()
    }
}

impl FakePve {
    /// Starts a server seeded with `seed` (see tools/fakepve/launcher.py for
    /// the keys: nodes, storages, files, tokens, users, guests, settings),
    /// plus the API token `root@pam!proxops` with a fresh secret. Tasks
    /// finish before their POST returns (time scale 0) unless the seed's
    /// settings say otherwise.
    pub fn start(seed: &Value) -> Result<FakePve, FakePveError> {
        FakePve::start_with_tools(&default_tools(), seed)
    }

    /// As `start`, serving the one fake PVE on two loopback addresses (see
    /// `also_url`): one PVE behind two names no URL comparison can match.
    pub fn start_on_two_addresses(seed: &Value) -> Result<FakePve, FakePveError> {
        FakePve::launch_with(&default_tools(), seed, true)
    }

    /// As `start`, with the test tools in `tools` (what
    /// `$PROXOPS_TOOLS_DIR` names) instead of the default.
    pub fn start_with_tools(tools: &Path, seed: &Value) -> Result<FakePve, FakePveError> {
        FakePve::launch_with(tools, seed, false)
    }

    fn launch_with(tools: &Path, seed: &Value, two: bool) -> Result<FakePve, FakePveError> {
        let root = workspace_root();
        let python = tools.join("venv/bin/python");
        if !python.exists() {
            return Err(FakePveError::ToolsMissing(python));
        }
        let launcher = root.join("tools/fakepve/launcher.py");
        if !launcher.exists() {
            return Err(FakePveError::ToolsMissing(launcher));
        }

        let state = tempfile::Builder::new()
            .prefix("proxops-fakepve-")
            .tempdir()
            .map_err(|e| FakePveError::Start(format!("temporary directory: {e}")))?;
        let token_secret = Secret::new(random_uuid());
        let password = Secret::new(random_uuid());
        let seed_file = state.path().join("seed.json");
        let seed = with_token(seed, token_secret.expose())?;
        let seed = with_cluster_name(seed, &random_uuid()[..8]);
        std::fs::write(&seed_file, seed.to_string())
            .map_err(|e| FakePveError::Start(format!("{}: {e}", seed_file.display())))?;

        let mut last_error = String::new();
        for _ in 0..ADDRESS_ATTEMPTS {
            let host = next_loopback_address();
            let also = two.then(next_loopback_address);
            match launch(
                &python,
                &launcher,
                &seed_file,
                state.path(),
                host,
                also,
                &password,
            )? {
                Launched::Ready {
                    child,
                    stdin,
                    ready,
                    stderr,
                } => {
                    let field = |name: &str| {
                        ready
                            .get(name)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let agent = ureq::Agent::config_builder()
                        .http_status_as_error(false)
                        .proxy(None)
                        .timeout_global(Some(Duration::from_secs(60)))
                        .build()
                        .new_agent();
                    return Ok(FakePve {
                        child,
                        _stdin: Some(stdin),
                        host,
                        url: field("url"),
                        also_url: two.then(|| field("also_url")),
                        control: field("control"),
                        ca_file: PathBuf::from(field("cafile")),
                        fingerprint: field("fingerprint"),
                        token_secret,
                        password,
                        stderr,
                        agent,
                        _state: state,
                    });
                }
                Launched::AddressInUse(why) => last_error = why,
            }
        }
        Err(FakePveError::Start(format!(
            "no free loopback address after {ADDRESS_ATTEMPTS} tries: {last_error}"
        )))
    }

    /// `https://127.x.y.z:8006`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `https://127.x.y.z:8006` on the second address, when started with
    /// `start_on_two_addresses`.
    pub fn also_url(&self) -> Option<&str> {
        self.also_url.as_deref()
    }

    /// The loopback address it listens on.
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    /// The server's self-signed certificate (PEM), usable as the CA file.
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// SHA-256 of the server certificate, `AA:BB:…`.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The seeded API token `root@pam!proxops`.
    pub fn token(&self) -> ApiToken {
        // Parts are constants and a UUID, all valid token characters.
        ApiToken::new(TOKEN_USER, TOKEN_ID, self.token_secret.clone())
            .unwrap_or_else(|e| unreachable!("harness token is valid: {e}"))
    }

    /// The composed token value `root@pam!proxops=<secret>`.
    pub fn token_value(&self) -> Secret {
        Secret::new(format!(
            "{TOKEN_USER}!{TOKEN_ID}={}",
            self.token_secret.expose()
        ))
    }

    /// The password of `root@pam` (ticket login).
    pub fn password(&self) -> Secret {
        self.password.clone()
    }

    /// Ticket credentials for `root@pam`.
    pub fn ticket_login(&self) -> TicketLogin {
        TicketLogin::new(LOGIN_USER, self.password.clone())
            .unwrap_or_else(|e| unreachable!("harness login is valid: {e}"))
    }

    /// A live transport configuration for this server: token auth, its
    /// certificate as CA, and retries 1 ms apart so fault tests run fast.
    pub fn live_config(&self) -> LiveConfig {
        LiveConfig {
            base_url: self.url.clone(),
            credentials: Credentials::Token(self.token()),
            tls: TlsTrust::CaFile(self.ca_file.clone()),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy {
                base: Duration::from_millis(1),
                cap: Duration::from_millis(10),
                max_retries: 3,
            },
            breaker: BreakerPolicy::default(),
            connections: crate::live::DEFAULT_CONNECTIONS,
        }
    }

    /// Calls a FakePve method through the control port, e.g.
    /// `call("fail", json!(["POST", "/nodes/pve1/qemu"]), json!({"status": 500, "message": "boom", "times": 1}))`.
    /// Returns its result (as text, or null).
    pub fn call(&self, function: &str, args: Value, kwargs: Value) -> Result<Value, FakePveError> {
        let args = if args.is_null() { json!([]) } else { args };
        let kwargs = if kwargs.is_null() { json!({}) } else { kwargs };
        let answer = self.control(
            "POST",
            "/call",
            Some(json!({"fn": function, "args": args, "kwargs": kwargs})),
        )?;
        Ok(answer.get("result").cloned().unwrap_or(Value::Null))
    }

    /// Sets guest attributes (`shutdown_secs`, `start_error`, `lock`, …).
    pub fn set_guest(&self, vmid: u32, attrs: Value) -> Result<(), FakePveError> {
        self.control("POST", "/guest", Some(json!({"vmid": vmid, "set": attrs})))
            .map(drop)
    }

    /// Sets server settings (`time_scale`, `ticket_ttl`, `lock_wait`, `version`, …).
    pub fn settings(&self, settings: Value) -> Result<(), FakePveError> {
        self.control("POST", "/settings", Some(settings)).map(drop)
    }

    /// Drops every injected failure and network fault.
    pub fn clear(&self) -> Result<(), FakePveError> {
        self.control("POST", "/clear", None).map(drop)
    }

    /// What clients sent, oldest first: (method, full path without the query
    /// string, body with secrets replaced by `***`).
    pub fn requests(&self) -> Result<Vec<(String, String, String)>, FakePveError> {
        let answer = self.control("GET", "/requests", None)?;
        let rows = answer.as_array().cloned().unwrap_or_default();
        Ok(rows
            .iter()
            .map(|row| {
                let part = |i: usize| {
                    row.get(i)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                (part(0), part(1), part(2))
            })
            .collect())
    }

    /// Forgets the request log.
    pub fn forget_requests(&self) -> Result<(), FakePveError> {
        self.control("DELETE", "/requests", None).map(drop)
    }

    /// What the launcher wrote to stderr so far (for failure messages).
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    fn control(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, FakePveError> {
        let what = format!("{method} {path}");
        let fail = |message: String| FakePveError::Control {
            what: what.clone(),
            message,
        };
        let url = format!("{}{path}", self.control);
        let answer = match (method, body) {
            ("GET", _) => self.agent.get(&url).call(),
            ("DELETE", _) => self.agent.delete(&url).call(),
            (_, Some(body)) => self
                .agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(body.to_string().as_bytes()),
            (_, None) => self.agent.post(&url).send_empty(),
        };
        let mut answer = answer.map_err(|e| fail(e.to_string()))?;
        let status = answer.status().as_u16();
        let text = answer
            .body_mut()
            .read_to_string()
            .map_err(|e| fail(e.to_string()))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status != 200 {
            let message = value
                .get("error")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or(value.to_string());
            return Err(fail(format!("HTTP {status}: {message}")));
        }
        Ok(value)
    }
}

impl Drop for FakePve {
    fn drop(&mut self) {
        // Closing stdin alone would also stop it; kill makes it immediate.
        drop(self._stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

enum Launched {
    Ready {
        child: Child,
        stdin: ChildStdin,
        ready: Value,
        stderr: Arc<Mutex<String>>,
    },
    AddressInUse(String),
}

fn launch(
    python: &Path,
    launcher: &Path,
    seed_file: &Path,
    state: &Path,
    host: Ipv4Addr,
    also: Option<Ipv4Addr>,
    password: &Secret,
) -> Result<Launched, FakePveError> {
    let start_error = |what: String| FakePveError::Start(what);
    let mut command = Command::new(python);
    if let Some(also) = also {
        command
            .arg(launcher)
            .arg("--also-host")
            .arg(also.to_string());
    } else {
        command.arg(launcher);
    }
    let mut child = command
        .arg(seed_file)
        .arg("--host")
        .arg(host.to_string())
        .arg("--port")
        .arg(PVE_PORT.to_string())
        .arg("--control-port")
        .arg(CONTROL_PORT.to_string())
        .arg("--state-dir")
        .arg(state)
        .arg("--exit-with-stdin")
        .env("PROXOPS_FAKEPVE_PASSWORD", password.expose())
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| start_error(format!("{}: {e}", python.display())))?;
    let (Some(stdin), Some(stdout), Some(stderr_pipe)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(start_error("no pipes to the launcher".into()));
    };

    let stderr = Arc::new(Mutex::new(String::new()));
    let sink = stderr.clone();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr_pipe);
        let mut chunk = [0u8; 4096];
        while let Ok(n) = reader.read(&mut chunk) {
            if n == 0 {
                break;
            }
            if let Ok(mut text) = sink.lock() {
                text.push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        }
    });
    let (ready_tx, ready_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next();
        let _ = ready_tx.send(first);
        // Keep draining so the launcher never blocks on a full pipe.
        for _ in lines {}
    });

    let line = match ready_rx.recv_timeout(READY_TIMEOUT) {
        Ok(Some(Ok(line))) => line,
        Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            // stdout closed: the launcher exited; its status says why.
            let status = child.wait().ok().and_then(|s| s.code());
            std::thread::sleep(Duration::from_millis(50)); // let stderr drain
            let why = stderr
                .lock()
                .map(|s| s.trim().to_owned())
                .unwrap_or_default();
            if status == Some(EXIT_ADDRESS_IN_USE) {
                return Ok(Launched::AddressInUse(why));
            }
            let status =
                status.map_or_else(|| "killed by a signal".to_owned(), |c| format!("exit {c}"));
            return Err(start_error(format!("launcher exited ({status}): {why}")));
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            let _ = child.wait();
            let why = stderr
                .lock()
                .map(|s| s.trim().to_owned())
                .unwrap_or_default();
            return Err(start_error(format!(
                "no ready line within {READY_TIMEOUT:?}: {why}"
            )));
        }
    };
    match serde_json::from_str::<Value>(&line) {
        Ok(ready) if ready.get("url").is_some() && ready.get("control").is_some() => {
            Ok(Launched::Ready {
                child,
                stdin,
                ready,
                stderr,
            })
        }
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            Err(start_error(format!("unexpected ready line: {line}")))
        }
    }
}

/// The seed with the harness token added to `tokens`.
fn with_token(seed: &Value, secret: &str) -> Result<Value, FakePveError> {
    let mut seed = if seed.is_null() {
        json!({})
    } else {
        seed.clone()
    };
    let Some(map) = seed.as_object_mut() else {
        return Err(FakePveError::Start("the seed must be a JSON object".into()));
    };
    let tokens = map.entry("tokens").or_insert_with(|| json!({}));
    let Some(tokens) = tokens.as_object_mut() else {
        return Err(FakePveError::Start(
            "seed \"tokens\" must be an object".into(),
        ));
    };
    tokens.insert(
        format!("{TOKEN_USER}!{TOKEN_ID}"),
        Value::String(secret.to_owned()),
    );
    Ok(seed)
}

/// The seed with a cluster name of its own (unless it names one): two
/// fakes are two PVE clusters, which ProxOps tells apart by what
/// `GET /cluster/status` says (fakepve's default name is the same for all).
fn with_cluster_name(mut seed: Value, name: &str) -> Value {
    if let Some(map) = seed.as_object_mut() {
        let settings = map.entry("settings").or_insert_with(|| json!({}));
        if let Some(settings) = settings.as_object_mut() {
            settings
                .entry("cluster_name")
                .or_insert_with(|| Value::String(format!("fake-{name}")));
        }
    }
    seed
}

/// `$PROXOPS_TOOLS_DIR`, else the workspace's `.tools`.
fn default_tools() -> PathBuf {
    std::env::var_os("PROXOPS_TOOLS_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools"))
}

/// The workspace root, from this crate's manifest directory (adapters/pve).
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A loopback address no other harness in this or a concurrent test process
/// is likely to use: 127.x.y.z from the process id and a counter (x ≥ 1, so
/// 127.0.0.0/16 with its usual services is left alone). A collision only
/// costs a retry: the launcher exits 3 and the next address is tried.
fn next_loopback_address() -> Ipv4Addr {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let v = u64::from(std::process::id())
        .wrapping_mul(1024)
        .wrapping_add(u64::from(n));
    let z = 1 + (v % 254) as u8;
    let rest = v / 254;
    let y = (rest % 256) as u8;
    let x = 1 + ((rest / 256) % 254) as u8;
    Ipv4Addr::new(127, x, y, z)
}

/// A version-4-shaped UUID from the standard library's per-process random
/// hash keys (no cryptographic claim; it only has to be unguessable enough
/// that tests never pass with a wrong secret by accident).
fn random_uuid() -> String {
    use std::hash::{BuildHasher, RandomState};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let state = RandomState::new();
    let a = state.hash_one((n, 1u8, std::process::id()));
    let b = state.hash_one((n, 2u8, std::time::SystemTime::now()));
    let bytes: Vec<u8> = a.to_be_bytes().into_iter().chain(b.to_be_bytes()).collect();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn loopback_addresses_are_loopback_and_distinct() {
        let a = next_loopback_address();
        let b = next_loopback_address();
        assert!(a.is_loopback() && b.is_loopback());
        assert_ne!(a, b);
        assert_ne!(a.octets()[1], 0);
        assert!(a.octets()[3] != 0 && a.octets()[3] != 255);
    }

    #[test]
    fn uuids_are_uuid_shaped_and_differ() {
        let a = random_uuid();
        assert_eq!(a.len(), 36);
        assert_eq!(a.matches('-').count(), 4);
        assert_ne!(a, random_uuid());
    }

    #[test]
    fn missing_tools_say_how_to_install_them() {
        let empty = tempfile::tempdir().unwrap();
        let err = FakePve::start_with_tools(empty.path(), &json!({})).unwrap_err();
        assert!(matches!(err, FakePveError::ToolsMissing(_)));
        assert!(
            err.to_string().contains("run tools/install-test-tools.sh"),
            "{err}"
        );
    }

    #[test]
    fn seed_gets_the_harness_token_beside_its_own() {
        let seed = json!({"tokens": {"alice@pve!ro": "x"}});
        let out = with_token(&seed, "s").unwrap();
        assert_eq!(out["tokens"]["alice@pve!ro"], "x");
        assert_eq!(out["tokens"]["root@pam!proxops"], "s");
        assert!(with_token(&json!([]), "s").is_err());
    }
}
