//! A converged cycle against fakepve with network latency
//! (`cargo bench -p proxops --bench live_cycle`): 500 guests on 4 nodes,
//! each response delayed by 20 ms. Prints the requests one cycle sends, its
//! wall time, and the serial lower bound (requests × latency) the bounded
//! read concurrency beats. Needs the test tools (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

const GUESTS: usize = 500;
const NODES: usize = 4;
const LATENCY: f64 = 0.020;

fn seed() -> Value {
    let mut guests = Vec::new();
    for i in 0..GUESTS {
        let vmid = 1000 + i;
        guests.push(json!({
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
    json!({"nodes": (1..=NODES).map(|n| format!("pve{n}")).collect::<Vec<_>>(), "guests": guests})
}

fn repo(dir: &Path, pve: &FakePve) {
    let w = |rel: &str, text: String| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let nodes: Vec<String> = (1..=NODES).map(|n| format!("pve{n}")).collect();
    w(
        "clusters/bench/config.yaml",
        format!(
            "pve:\n  clusters:\n    bench:\n      base-url: {}\n      nodes: [{}]\n      ca-file: {}\n",
            pve.url(),
            nodes.join(", "),
            pve.ca_file().display()
        ),
    );
    let mut list = String::from("resources:\n");
    for i in 0..GUESTS {
        let vmid = 1000 + i;
        w(
            &format!("vm/bench/vm-{vmid}.yaml"),
            format!(
                "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: pve{}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                i % NODES + 1
            ),
        );
        list.push_str(&format!("  - ../../vm/bench/vm-{vmid}.yaml\n"));
    }
    w("clusters/bench/resources.yaml", list);
}

fn main() {
    let pve = FakePve::start(&seed()).expect("fakepve (run tools/install-test-tools.sh)");
    pve.settings(json!({"time_scale": 1.0})).unwrap();
    pve.call("slow_network", json!([LATENCY]), json!({}))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path(), &pve);
    let mut times = Vec::new();
    let mut requests = 0;
    for _ in 0..3 {
        pve.forget_requests().unwrap();
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
            .env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
            .arg("--git-path")
            .arg(dir.path())
            .arg("diff")
            .output()
            .unwrap();
        times.push(t.elapsed());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("no drift"),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        requests = pve.requests().unwrap().len();
    }
    times.sort();
    let wall = times[1];
    let serial = Duration::from_secs_f64(requests as f64 * LATENCY);
    println!(
        "converged cycle: {GUESTS} guests on {NODES} nodes, {requests} requests (bound N + 2M + 3 = {}), wall {:.2} s (median of 3), serial lower bound {:.2} s ({:.1}x faster)",
        GUESTS + 2 * NODES + 3,
        wall.as_secs_f64(),
        serial.as_secs_f64(),
        serial.as_secs_f64() / wall.as_secs_f64()
    );
}
