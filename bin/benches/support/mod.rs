//! What the whole-process benches share: their sizes from the environment
//! (and a quick mode for CI), the binary under test, and running it with
//! its wall time, CPU time and peak resident memory measured.
//!
//! `PROXOPS_BENCH_QUICK=1` makes every bench small and short: CI runs the
//! benches that way, to keep them working, and asserts no timing.
//! `PROXOPS_BENCH_BIN=/path/to/proxops` measures another build of the
//! binary (the numbers before a change, say) with the same bench.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Whether the benches run in their quick mode.
pub fn quick() -> bool {
    std::env::var("PROXOPS_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A count from the environment, or `full` (`quick` in quick mode).
pub fn env_usize(name: &str, full: usize, quick_value: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a count")),
        Err(_) if quick() => quick_value,
        Err(_) => full,
    }
}

/// A comma-separated list of counts from the environment.
pub fn env_list(name: &str, full: &str, quick_value: &str) -> Vec<usize> {
    let text =
        std::env::var(name).unwrap_or_else(|_| if quick() { quick_value } else { full }.to_owned());
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("{name}: {s:?} is not a count"))
        })
        .collect()
}

/// The `proxops` binary the bench measures.
pub fn proxops() -> PathBuf {
    std::env::var_os("PROXOPS_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_proxops")))
}

/// The repository's root (for tools/).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One run of a process, measured by the kernel's accounting of it.
#[derive(Debug, Clone)]
pub struct Run {
    pub status: i32,
    pub wall: Duration,
    pub user: Duration,
    pub sys: Duration,
    /// Peak resident set, KiB (`getrusage` of the waited-for child).
    pub max_rss_kib: u64,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn cpu(&self) -> Duration {
        self.user + self.sys
    }
}

/// Python's `os.wait4`, which hands back the resource usage of exactly
/// the child waited for: the one way to read a child's peak RSS and CPU
/// time without unsafe code here (python3 is already a test tool:
/// fakepve, the scale fixture). Not `RUSAGE_CHILDREN`: it would also count
/// whatever the python3 launcher ran before (pyenv's shims do).
const MEASURE: &str = r#"
import json, os, subprocess, sys, time
out, err = sys.argv[1], sys.argv[2]
with open(out, "wb") as o, open(err, "wb") as e:
    t = time.monotonic()
    p = subprocess.Popen(sys.argv[3:], stdout=o, stderr=e)
    _, status, r = os.wait4(p.pid, 0)
    wall = time.monotonic() - t
code = os.waitstatus_to_exitcode(status)
print(json.dumps({"status": code, "wall": wall, "user": r.ru_utime,
                  "sys": r.ru_stime, "maxrss": r.ru_maxrss}))
"#;

/// Runs `cmd` (its environment and arguments as set) to the end, measured.
pub fn measure(cmd: &Command) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut py = Command::new("python3");
    py.arg("-c").arg(MEASURE).arg(&out).arg(&err);
    py.arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => py.env(k, v),
            None => py.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        py.current_dir(d);
    }
    let o = py.output().expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let secs = |k: &str| Duration::from_secs_f64(v[k].as_f64().unwrap());
    Run {
        status: v["status"].as_i64().unwrap() as i32,
        wall: secs("wall"),
        user: secs("user"),
        sys: secs("sys"),
        max_rss_kib: v["maxrss"].as_u64().unwrap(),
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
    }
}

/// The median of some durations (the upper one of an even count).
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median of some counts.
pub fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Writes `text` to `dir/rel`, creating directories.
pub fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The machine's load average (1, 5, 15 minutes), for the record.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Seconds with milliseconds.
pub fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// KiB as MiB.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}
