//! Resident memory of a first apply by the actions it runs at once
//! (`cargo bench -p proxops --bench apply_memory`).
//!
//! `PROXOPS_MEMORY_GUESTS` VMs (200) built from scratch on 4 nodes of a
//! fresh fakepve, every answer 10 ms late so the runner's workers really
//! are in flight together, applied once per `tasks-per-cluster` of
//! `PROXOPS_MEMORY_WORKERS` (`1,8,32`; `tasks-per-node` the same). Prints
//! each apply's wall time and peak resident memory, and the memory each
//! worker beyond the first adds. Quick mode (CI): 24 VMs, 1 and 8 workers.
//! Needs the test tools (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Command;

use proxops_pve::fakepve::FakePve;
use serde_json::json;

const NODES: usize = 4;
/// PVE seconds added to every answer (10 ms real at time scale 0.1).
const LATENCY: f64 = 0.1;
const TIME_SCALE: f64 = 0.1;

fn repo(dir: &Path, pve: &FakePve, guests: usize, workers: usize) {
    let nodes: Vec<String> = (1..=NODES).map(|n| format!("pve{n}")).collect();
    support::write(
        dir,
        "clusters/bench/config.yaml",
        &format!(
            "pve:\n  clusters:\n    bench:\n      base-url: {}\n      nodes: [{}]\n      ca-file: {}\n      tasks-per-node: {workers}\n      tasks-per-cluster: {workers}\n",
            pve.url(),
            nodes.join(", "),
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
                "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: pve{}\n  vmid: {vmid}\n  state: stopped\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                i % NODES + 1
            ),
        );
        list.push_str(&format!("  - ../../vm/bench/vm-{vmid}.yaml\n"));
    }
    support::write(dir, "clusters/bench/resources.yaml", &list);
}

fn main() {
    let guests = support::env_usize("PROXOPS_MEMORY_GUESTS", 200, 24);
    let sweep = support::env_list("PROXOPS_MEMORY_WORKERS", "1,8,32", "1,8");
    println!(
        "first apply of {guests} VMs on {NODES} nodes, 10 ms per answer, load {}",
        support::load()
    );
    let mut points = Vec::new();
    for workers in sweep {
        let seed = json!({"nodes": (1..=NODES).map(|n| format!("pve{n}")).collect::<Vec<_>>(), "guests": []});
        let pve = FakePve::start(&seed).expect("fakepve (run tools/install-test-tools.sh)");
        pve.settings(json!({"time_scale": TIME_SCALE})).unwrap();
        pve.call("slow_network", json!([LATENCY]), json!({}))
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        repo(dir.path(), &pve, guests, workers);
        let mut cmd = Command::new(support::proxops());
        cmd.env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
            .arg("--git-path")
            .arg(dir.path())
            .args(["apply", "--yes"]);
        let run = support::measure(&cmd);
        assert_eq!(run.status, 0, "{}{}", run.stdout, run.stderr);
        println!(
            "{workers:>3} at once: wall {}, CPU {}, peak RSS {}",
            support::secs(run.wall),
            support::secs(run.cpu()),
            support::mib(run.max_rss_kib)
        );
        points.push((workers, run.max_rss_kib));
    }
    if let (Some(&(w0, r0)), Some(&(w1, r1))) = (points.first(), points.last())
        && w1 > w0
    {
        let per = (r1 as f64 - r0 as f64) / (w1 - w0) as f64;
        println!(
            "each worker beyond {w0}: {:.2} MiB ({} to {w1} at once)",
            per / 1024.0,
            w0
        );
    }
}
