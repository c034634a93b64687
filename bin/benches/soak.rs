//! The daemon over a long run (`cargo bench -p proxops --bench soak`):
//! `proxops run` against a converged cluster of `PROXOPS_SOAK_GUESTS` VMs
//! (2000) on 8 nodes of fakepve, polling every second, until it has run
//! the last of `PROXOPS_SOAK_CYCLES` (`100,1000`) cycles; then SIGTERM.
//!
//! Every half second it reads the daemon's cycle count (`/metrics`), its
//! resident memory and threads (`/proc/<pid>/status`), its open file
//! descriptors (`/proc/<pid>/fd`) and its CPU time (`/proc/<pid>/stat`).
//! Prints, at each of the cycle counts, the resident memory, the most
//! threads and descriptors seen since the previous one, the lowest and
//! highest memory over the 10 cycles up to it (a sample falls anywhere in
//! a cycle), and the CPU time per cycle; then the memory after the last
//! count against the first.
//! Loopback only; stops by itself. Quick mode (CI): 50 guests, 5 and 20
//! cycles. Needs the test tools (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

const NODES: usize = 8;

fn seed(guests: usize) -> Value {
    let list: Vec<Value> = (0..guests)
        .map(|i| {
            let vmid = 1000 + i;
            json!({
                "vmid": vmid, "name": format!("vm-{vmid}"), "node": format!("pve{}", i % NODES + 1),
                "status": "running",
                "config": {
                    "name": format!("vm-{vmid}"), "memory": "1024", "cpu": "host", "cores": 1,
                    "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=8G"),
                    "net0": format!("virtio=BC:24:11:{:02X}:{:02X}:{:02X},bridge=vmbr0", (i >> 16) & 255, (i >> 8) & 255, i & 255),
                    "tags": "proxops"
                }
            })
        })
        .collect();
    json!({"nodes": (1..=NODES).map(|n| format!("pve{n}")).collect::<Vec<_>>(), "guests": list})
}

fn repo(dir: &Path, pve: &FakePve, guests: usize) {
    support::write(
        dir,
        "proxops.yaml",
        "listen: 127.0.0.1:0\nreconcile:\n  poll-interval: 1s\n",
    );
    support::write(
        dir,
        "clusters/bench/config.yaml",
        &format!(
            "pve:\n  clusters:\n    bench:\n      base-url: {}\n      nodes: [{}]\n      ca-file: {}\n",
            pve.url(),
            (1..=NODES)
                .map(|n| format!("pve{n}"))
                .collect::<Vec<_>>()
                .join(", "),
            pve.ca_file().display()
        ),
    );
    let mut list = String::from("resources:\n");
    for i in 0..guests {
        let vmid = 1000 + i;
        support::write(
            dir,
            &format!("vm/bench/vm-{vmid}.yaml"),
            &format!(
                "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: pve{}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                i % NODES + 1
            ),
        );
        list.push_str(&format!("  - ../../vm/bench/vm-{vmid}.yaml\n"));
    }
    support::write(dir, "clusters/bench/resources.yaml", &list);
}

/// The daemon's status address, from its start-up line.
fn address(stderr: &Path, child: &mut Child) -> SocketAddr {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(stderr).unwrap_or_default();
        if let Some(addr) = log
            .lines()
            .find(|l| l.contains("proxops.run started"))
            .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("listen=")))
        {
            return addr.parse().unwrap();
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "proxops run exited:\n{log}"
        );
        assert!(Instant::now() < deadline, "no start-up line:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Cycles the daemon has finished (`proxops_cycles_total`, every result).
fn cycles(addr: SocketAddr) -> u64 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .filter(|l| l.starts_with("proxops_cycles_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// One look at the process.
#[derive(Debug, Clone, Copy)]
struct Sample {
    cycles: u64,
    rss_kib: u64,
    threads: u64,
    fds: u64,
    /// utime + stime, clock ticks.
    cpu_ticks: u64,
}

fn sample(pid: u32, cycles: u64) -> Sample {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap()
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command's closing parenthesis: utime and stime are
    // the 14th and 15th of the line, the 12th and 13th after it.
    let after: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    let ticks = |i: usize| -> u64 { after[i].parse().unwrap() };
    Sample {
        cycles,
        rss_kib: field("VmRSS:"),
        threads: field("Threads:"),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .count() as u64,
        cpu_ticks: ticks(11) + ticks(12),
    }
}

fn main() {
    let guests = support::env_usize("PROXOPS_SOAK_GUESTS", 2000, 50);
    let marks = support::env_list("PROXOPS_SOAK_CYCLES", "100,1000", "5,20");
    let last = *marks.iter().max().unwrap() as u64;
    let pve = FakePve::start(&seed(guests)).expect("fakepve (run tools/install-test-tools.sh)");
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path(), &pve, guests);
    let logs = tempfile::tempdir().unwrap();
    let stderr = logs.path().join("stderr");
    let mut child = Command::new(support::proxops())
        .env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
        .arg("--git-path")
        .arg(dir.path())
        .arg("run")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let addr = address(&stderr, &mut child);
    println!(
        "proxops run: {guests} guests on {NODES} nodes, poll 1 s, until {last} cycles; load {}",
        support::load()
    );
    let started = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    loop {
        let n = cycles(addr);
        samples.push(sample(pid, n));
        assert!(
            child.try_wait().unwrap().is_none(),
            "proxops run exited:\n{}",
            std::fs::read_to_string(&stderr).unwrap_or_default()
        );
        if n >= last {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let elapsed = started.elapsed();
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
    let status = child.wait().unwrap();
    assert!(status.success(), "proxops run ended with {status}");
    let tick = 100.0; // USER_HZ on Linux.
    let mut previous: Option<Sample> = None;
    let mut reported = Vec::new();
    for &mark in &marks {
        let at = *samples
            .iter()
            .find(|s| s.cycles >= mark as u64)
            .unwrap_or(samples.last().unwrap());
        let since = previous.map_or(0, |p| p.cycles);
        let window = samples
            .iter()
            .filter(|s| s.cycles > since && s.cycles <= at.cycles);
        let (threads, fds) = window.fold((0, 0), |(t, f), s| (t.max(s.threads), f.max(s.fds)));
        let cpu = match previous {
            Some(p) if at.cycles > p.cycles => {
                (at.cpu_ticks - p.cpu_ticks) as f64 / tick / (at.cycles - p.cycles) as f64
            }
            _ => at.cpu_ticks as f64 / tick / at.cycles.max(1) as f64,
        };
        let (low, high) = rss_range(&samples, at.cycles);
        println!(
            "after {:>5} cycles: RSS {} (over the last {RANGE} cycles {} to {}), at most {threads} threads and {fds} open descriptors since cycle {since}, CPU {:.3} s per cycle",
            at.cycles,
            support::mib(at.rss_kib),
            support::mib(low),
            support::mib(high),
            cpu
        );
        reported.push((at, low, high));
        previous = Some(at);
    }
    if let (Some(first), Some(last)) = (reported.first(), reported.last()) {
        let pct = |a: u64, b: u64| (a as f64 / b as f64 - 1.0) * 100.0;
        println!(
            "RSS after {} cycles is {:+.1}% of after {} (lowest {:+.1}%, highest {:+.1}%); {:.0} s in all",
            last.0.cycles,
            pct(last.0.rss_kib, first.0.rss_kib),
            first.0.cycles,
            pct(last.1, first.1),
            pct(last.2, first.2),
            elapsed.as_secs_f64()
        );
    }
}

/// Cycles before a mark over which the lowest and highest RSS are taken:
/// one sample falls anywhere in a cycle (reading, planning or between
/// two), the lowest is what the daemon keeps between cycles, the highest
/// a cycle's peak.
const RANGE: u64 = 10;

/// The lowest and highest RSS (KiB) seen over the [`RANGE`] cycles up to
/// `mark`.
fn rss_range(samples: &[Sample], mark: u64) -> (u64, u64) {
    samples
        .iter()
        .filter(|s| s.cycles + RANGE > mark && s.cycles <= mark)
        .fold((u64::MAX, 0), |(lo, hi), s| {
            (lo.min(s.rss_kib), hi.max(s.rss_kib))
        })
}
