//! Test harness: real git repositories in temp dirs, and git servers on
//! loopback (git daemon, git http-backend behind a TLS CGI server) that stop
//! by PID when dropped. Every git child runs with a throwaway HOME and no
//! system or global config so the machine's git setup cannot leak in.
#![allow(dead_code, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// A scratch area: HOME for git children plus room for repositories.
pub struct Scratch {
    pub dir: TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Scratch { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// A `git` command isolated from the host's configuration.
    pub fn git(&self, cwd: &Path) -> Command {
        let mut cmd = Command::new("git");
        cmd.current_dir(cwd)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0");
        cmd
    }

    pub fn run_git(&self, cwd: &Path, args: &[&str]) -> String {
        let out = self.git(cwd).args(args).output().unwrap();
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// A new work tree at `rel` with branch `main` and a local identity.
    pub fn work_repo(&self, rel: &str) -> PathBuf {
        let dir = self.path().join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        self.run_git(&dir, &["init", "-q", "-b", "main"]);
        self.run_git(&dir, &["config", "user.name", "ProxOps Test"]);
        self.run_git(&dir, &["config", "user.email", "test@proxops.invalid"]);
        dir
    }

    /// A new bare repository at `rel` whose HEAD is `main`.
    pub fn bare_repo(&self, rel: &str) -> PathBuf {
        let dir = self.path().join(rel);
        std::fs::create_dir_all(&dir).unwrap();
        self.run_git(&dir, &["init", "-q", "--bare", "-b", "main"]);
        dir
    }

    /// Stages everything and commits; returns the new commit id.
    pub fn commit_all(&self, repo: &Path, message: &str) -> String {
        self.run_git(repo, &["add", "-A"]);
        self.run_git(repo, &["commit", "-q", "--allow-empty", "-m", message]);
        self.run_git(repo, &["rev-parse", "HEAD"])
    }

    pub fn push(&self, repo: &Path, bare: &Path, branch: &str) {
        self.run_git(
            repo,
            &["push", "-q", "--force", bare.to_str().unwrap(), branch],
        );
    }
}

pub fn write(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_until_accepting(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("server exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("server on port {port} did not accept within 10s");
}

/// A child process stopped (by its own PID) and reaped on drop.
pub struct ServerGuard {
    child: Child,
    pub port: u16,
}

impl ServerGuard {
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ServerGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `git daemon` serving every repository under `base` on 127.0.0.1.
pub fn git_daemon(scratch: &Scratch, base: &Path) -> ServerGuard {
    let port = free_port();
    // Run `git-daemon` itself: `git daemon` forks it as a child, and killing
    // the wrapper's PID would leave the real server running.
    let exec_path = scratch.run_git(base, &["--exec-path"]);
    let mut child = Command::new(Path::new(&exec_path).join("git-daemon"))
        .current_dir(base)
        .env_clear()
        .envs(
            scratch
                .git(base)
                .get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
        )
        .args([
            "--export-all",
            "--reuseaddr",
            "--informative-errors",
            &format!("--base-path={}", base.display()),
            "--listen=127.0.0.1",
            &format!("--port={port}"),
            base.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until_accepting(port, &mut child);
    ServerGuard { child, port }
}

/// A CA and a server certificate for 127.0.0.1 signed by it, made with the
/// `openssl` tool.
pub struct TestCerts {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn make_certs(dir: &Path) -> TestCerts {
    std::fs::create_dir_all(dir).unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca_args = vec!["req", "-x509"];
    ca_args.extend(ec);
    ca_args.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=proxops-test-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    openssl(&ca_args);
    let mut csr_args = vec!["req"];
    csr_args.extend(ec);
    csr_args.extend([
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(&csr_args);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "leaf.pem",
        "-days",
        "2",
        "-extfile",
        "leaf.ext",
    ]);
    TestCerts {
        ca: dir.join("ca.pem"),
        cert: dir.join("leaf.pem"),
        key: dir.join("leaf.key"),
    }
}

/// `git http-backend` behind TLS and Basic auth (user `git`, password
/// `token`) serving every repository under `root` on 127.0.0.1.
pub fn https_git_server(
    scratch: &Scratch,
    root: &Path,
    certs: &TestCerts,
    token: &str,
) -> ServerGuard {
    let port = free_port();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/https_git_server.py"
    );
    let mut child = Command::new("python3")
        .args([script, &port.to_string(), root.to_str().unwrap()])
        .arg(&certs.cert)
        .arg(&certs.key)
        .env("PROXOPS_TEST_GIT_HOME", scratch.home())
        .env("PROXOPS_TEST_GIT_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "READY", "https git server did not start");
    ServerGuard { child, port }
}
