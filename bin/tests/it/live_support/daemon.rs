//! `proxops run` as a child process for the live tests: its logs in files,
//! its status address from its start-up line, plain HTTP/1.1 requests to
//! it, and a kill when the test ends.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The daemon child; killed if the test ends before it exited.
pub struct Daemon {
    pub child: Child,
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

/// One answer: status, header fields (names lower-cased), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Daemon {
    /// Spawns `cmd` (a `proxops … run`), its output to files.
    pub fn spawn(mut cmd: Command) -> Daemon {
        let logs = tempfile::tempdir().unwrap();
        let stderr = logs.path().join("stderr");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Daemon {
            child,
            stderr,
            _logs: logs,
        }
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits (until `deadline`) for a log line containing `text`.
    pub fn wait_for_log(&mut self, text: &str, deadline: Instant) -> String {
        loop {
            let log = self.stderr();
            if let Some(line) = log.lines().find(|l| l.contains(text)) {
                return line.to_owned();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("proxops run exited ({status}) before logging {text:?}:\n{log}");
            }
            assert!(Instant::now() < deadline, "no {text:?} in time:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits (until `deadline`) for the exit status.
    pub fn terminate(&mut self, deadline: Instant) -> std::process::ExitStatus {
        let sent = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success());
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "no exit:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The status server's address, from the start-up line.
    pub fn address(&mut self, deadline: Instant) -> SocketAddr {
        let line = self.wait_for_log("proxops.run started", deadline);
        super::listen_address(&line).unwrap().parse().unwrap()
    }

    /// Polls `path` until `done(answer)` holds; returns that answer.
    pub fn wait_for(
        &mut self,
        addr: SocketAddr,
        path: &str,
        deadline: Instant,
        what: &str,
        done: impl Fn(&Answer) -> bool,
    ) -> Answer {
        loop {
            let a = request(addr, "GET", path, &[], b"");
            if done(&a) {
                return a;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("proxops run exited ({status}):\n{}", self.stderr());
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not reached in time; last {path} answer {}:\n{}\n--- log\n{}",
                a.status,
                a.body,
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One request with `headers` and `body`; the whole answer.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    s.write_all(&bytes).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

pub fn get(addr: SocketAddr, path: &str) -> Answer {
    request(addr, "GET", path, &[], b"")
}
