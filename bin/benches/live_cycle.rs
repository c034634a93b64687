//! A converged cycle against fakepve with network latency
//! (`cargo bench -p proxops --bench live_cycle`): `PROXOPS_CYCLE_GUESTS`
//! VMs (200) on 4 nodes, every answer 20 ms late, read at each
//! `read-concurrency` of `PROXOPS_CYCLE_CONCURRENCY` (`1,2,4,8,16`);
//! `PROXOPS_CYCLE_LATENCY_MS` sets the latency.
//!
//! Prints per concurrency the requests one `proxops diff` sends, its wall
//! and CPU time (median of `PROXOPS_CYCLE_RUNS`, 5) and the ratio to the
//! bound requests × latency / concurrency: the time the reads take if
//! nothing but the network is waited for. It also measures what one
//! answer takes with nothing else in flight (fakepve's own work and the
//! machine's wake-ups on top of the latency it adds) and gives the ratio
//! to that bound too: what is left there is the cycle's own waiting.
//! Quick mode (CI): 20 guests,
//! concurrency 4, one run. Needs the test tools
//! (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::transport::{Request, Transport};
use serde_json::{Value, json};

const NODES: usize = 4;

fn seed(guests: usize) -> Value {
    let mut list = Vec::new();
    for i in 0..guests {
        let vmid = 1000 + i;
        list.push(json!({
            "vmid": vmid, "name": format!("vm-{vmid}"), "node": format!("pve{}", i % NODES + 1),
            "status": "running",
            "config": {
                "name": format!("vm-{vmid}"), "memory": "1024", "cpu": "host", "cores": 1,
                "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=8G"),
                "net0": format!("virtio=BC:24:11:{:02X}:{:02X}:{:02X},bridge=vmbr0", (i >> 16) & 255, (i >> 8) & 255, i & 255),
                "tags": "proxops"
            }
        }));
    }
    json!({"nodes": (1..=NODES).map(|n| format!("pve{n}")).collect::<Vec<_>>(), "guests": list})
}

fn repo(dir: &Path, pve: &FakePve, guests: usize, concurrency: usize) {
    let nodes: Vec<String> = (1..=NODES).map(|n| format!("pve{n}")).collect();
    support::write(
        dir,
        "clusters/bench/config.yaml",
        &format!(
            "pve:\n  clusters:\n    bench:\n      base-url: {}\n      nodes: [{}]\n      ca-file: {}\n      read-concurrency: {concurrency}\n",
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
                "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: pve{}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                i % NODES + 1
            ),
        );
        list.push_str(&format!("  - ../../vm/bench/vm-{vmid}.yaml\n"));
    }
    support::write(dir, "clusters/bench/resources.yaml", &list);
}

fn main() {
    let guests = support::env_usize("PROXOPS_CYCLE_GUESTS", 200, 20);
    let runs = support::env_usize("PROXOPS_CYCLE_RUNS", 5, 1);
    let sweep = support::env_list("PROXOPS_CYCLE_CONCURRENCY", "1,2,4,8,16", "4");
    let latency = support::env_usize("PROXOPS_CYCLE_LATENCY_MS", 20, 20) as f64 / 1e3;
    let pve = FakePve::start(&seed(guests)).expect("fakepve (run tools/install-test-tools.sh)");
    pve.settings(json!({"time_scale": 1.0})).unwrap();
    pve.call("slow_network", json!([latency]), json!({}))
        .unwrap();
    let answer = one_answer(&pve);
    println!(
        "converged cycle: {guests} guests on {NODES} nodes, {:.0} ms per answer ({:.2} ms measured with nothing else in flight), median of {runs}, load {}",
        latency * 1e3,
        answer.as_secs_f64() * 1e3,
        support::load()
    );
    for concurrency in sweep {
        let dir = tempfile::tempdir().unwrap();
        repo(dir.path(), &pve, guests, concurrency);
        let (mut walls, mut cpus) = (Vec::new(), Vec::new());
        let mut requests = 0;
        for _ in 0..runs {
            pve.forget_requests().unwrap();
            let mut cmd = Command::new(support::proxops());
            cmd.env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
                .arg("--git-path")
                .arg(dir.path())
                .arg("diff");
            let run = support::measure(&cmd);
            assert!(
                run.status == 0 && run.stdout.contains("no drift"),
                "{}{}",
                run.stdout,
                run.stderr
            );
            walls.push(run.wall);
            cpus.push(run.cpu());
            requests = pve.requests().unwrap().len();
        }
        let wall = support::median(walls);
        let bound = Duration::from_secs_f64(requests as f64 * latency / concurrency as f64);
        let measured = answer.as_secs_f64() * requests as f64 / concurrency as f64;
        println!(
            "read-concurrency {concurrency:>2}: {requests} requests, wall {} (CPU {}), bound requests x latency / concurrency {}: {:.2}x; at the measured answer {:.2}x",
            support::secs(wall),
            support::secs(support::median(cpus)),
            support::secs(bound),
            wall.as_secs_f64() / bound.as_secs_f64(),
            wall.as_secs_f64() / measured
        );
    }
}

/// What one answer takes with nothing else in flight, on a connection
/// already open: the median of 21 `GET /version` one after another.
fn one_answer(pve: &FakePve) -> Duration {
    let transport = LiveTransport::new(pve.live_config()).unwrap();
    let version = Request::get("/version");
    assert!(transport.call(&version).unwrap().is_success());
    let times = (0..21)
        .map(|_| {
            let started = std::time::Instant::now();
            assert!(transport.call(&version).unwrap().is_success());
            started.elapsed()
        })
        .collect();
    support::median(times)
}
