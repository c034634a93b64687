//! `proxops diff --replay` of generated clusters, as a whole process
//! (`cargo bench -p proxops --bench diff_replay`).
//!
//! tools/scale-fixture.py writes, per size in `PROXOPS_REPLAY_GUESTS`
//! (`1000,10000,20000`), a repository of that many guests over 8 nodes and
//! the recording of the cluster it describes (1% drifted, a few missing
//! and orphaned). Each round runs `diff --replay` once per size, in turn,
//! so the sizes see about the same load; `PROXOPS_REPLAY_RUNS` rounds (7).
//! Prints per size the median and best wall time, the median CPU time and
//! peak resident memory, and the ratio of the largest size to the one
//! before it. Quick mode (CI): 200 guests, one round.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn fixture(out: &Path, guests: usize) {
    let status = Command::new("python3")
        .arg(support::repo_root().join("tools/scale-fixture.py"))
        .args(["--guests", &guests.to_string(), "--nodes", "8", "--out"])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("python3");
    assert!(status.success(), "scale-fixture.py failed");
}

struct Size {
    guests: usize,
    walls: Vec<Duration>,
    cpus: Vec<Duration>,
    rss: Vec<u64>,
}

fn main() {
    let sizes = support::env_list("PROXOPS_REPLAY_GUESTS", "1000,10000,20000", "200");
    let runs = support::env_usize("PROXOPS_REPLAY_RUNS", 7, 1);
    let dir = tempfile::tempdir().unwrap();
    let mut results: Vec<Size> = sizes
        .iter()
        .map(|&guests| {
            fixture(&dir.path().join(guests.to_string()), guests);
            Size {
                guests,
                walls: Vec::new(),
                cpus: Vec::new(),
                rss: Vec::new(),
            }
        })
        .collect();
    for _ in 0..runs {
        for size in &mut results {
            let base = dir.path().join(size.guests.to_string());
            let mut cmd = Command::new(support::proxops());
            cmd.arg("--git-path")
                .arg(base.join("repo"))
                .arg("diff")
                .arg("--replay")
                .arg(base.join("live"));
            let run = support::measure(&cmd);
            assert!(
                run.status == 0 && run.stdout.contains("=== scale ==="),
                "{}{}",
                run.stdout,
                run.stderr
            );
            size.walls.push(run.wall);
            size.cpus.push(run.cpu());
            size.rss.push(run.max_rss_kib);
        }
    }
    println!(
        "diff --replay: median of {runs} rounds, load {}",
        support::load()
    );
    for size in &results {
        let best = size.walls.iter().min().copied().unwrap_or_default();
        println!(
            "{:>6} guests: wall {} (best {}), CPU {}, peak RSS {}",
            size.guests,
            support::secs(support::median(size.walls.clone())),
            support::secs(best),
            support::secs(support::median(size.cpus.clone())),
            support::mib(support::median_u64(size.rss.clone())),
        );
    }
    if let [.., a, b] = results.as_slice() {
        let ratio = |x: &[Duration], y: &[Duration]| {
            support::median(y.to_vec()).as_secs_f64() / support::median(x.to_vec()).as_secs_f64()
        };
        println!(
            "{} / {} guests: wall {:.2}x, CPU {:.2}x",
            b.guests,
            a.guests,
            ratio(&a.walls, &b.walls),
            ratio(&a.cpus, &b.cpus)
        );
    }
}
