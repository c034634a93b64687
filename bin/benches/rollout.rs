//! A stop-start change rolled through the disruption budget
//! (`cargo bench -p proxops --bench rollout`).
//!
//! `PROXOPS_ROLLOUT_GUESTS` running VMs (20) on 4 nodes of fakepve, each
//! taking `PROXOPS_ROLLOUT_SHUTDOWN_MS` (1000) to shut down and
//! `PROXOPS_ROLLOUT_START_MS` (500) to start, get a memory change PVE
//! applies only with the guest stopped. `proxops apply` rolls it out once
//! per disruption budget K of `PROXOPS_ROLLOUT_BUDGETS` (`1,2,4,5`), with
//! room for every action at once otherwise. Prints, per K, the plan's
//! rollout line, the most guests down at once (from fakepve's request
//! log: between a guest's `status/shutdown` and its `status/start`), the
//! apply's wall time and its ratio to ⌈guests / K⌉ × (shutdown + write +
//! start), the write being a config write's measured round trip. Quick
//! mode (CI): 4 guests, 200 + 100 ms, budgets 1 and 2. Needs the test
//! tools (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use proxops_pve::fakepve::FakePve;
use proxops_pve::live::LiveTransport;
use proxops_pve::transport::{Method, Request, Transport};
use serde_json::{Value, json};

const NODES: usize = 4;
/// Real seconds per PVE second.
const TIME_SCALE: f64 = 0.01;

fn node(i: usize) -> String {
    format!("pve{}", i % NODES + 1)
}

fn seed(guests: usize) -> Value {
    let list: Vec<Value> = (0..guests)
        .map(|i| {
            let vmid = 1000 + i;
            json!({
                "vmid": vmid, "name": format!("vm-{vmid}"), "node": node(i), "status": "running",
                "config": {
                    "name": format!("vm-{vmid}"), "memory": "1024", "cpu": "host", "cores": 1,
                    "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=8G"),
                    "net0": format!("virtio=BC:24:11:00:{:02X}:{:02X},bridge=vmbr0", (i >> 8) & 255, i & 255),
                    "tags": "proxops"
                }
            })
        })
        .collect();
    json!({"nodes": (0..NODES).map(node).collect::<Vec<_>>(), "guests": list})
}

fn repo(dir: &Path, pve: &FakePve, guests: usize, budget: usize) {
    support::write(
        dir,
        "clusters/bench/config.yaml",
        &format!(
            "pve:\n  clusters:\n    bench:\n      base-url: {}\n      nodes: [{}]\n      ca-file: {}\n      tasks-per-node: {guests}\n      tasks-per-cluster: {guests}\n      disruption-budget: {budget}\n",
            pve.url(),
            (0..NODES).map(node).collect::<Vec<_>>().join(", "),
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
                "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                node(i)
            ),
        );
        list.push_str(&format!("  - ../../vm/bench/vm-{vmid}.yaml\n"));
    }
    support::write(dir, "clusters/bench/resources.yaml", &list);
}

/// The most guests between their `status/shutdown` and `status/start`.
fn most_down(requests: &[(String, String, String)]) -> usize {
    let mut down = std::collections::BTreeSet::new();
    let mut most = 0;
    for (m, p, _) in requests {
        if m != "POST" {
            continue;
        }
        if let Some(rest) = p.strip_suffix("/status/shutdown") {
            down.insert(rest.to_owned());
        } else if let Some(rest) = p.strip_suffix("/status/start") {
            down.remove(rest);
        }
        most = most.max(down.len());
    }
    most
}

/// A config write's round trip (its task ends within it on fakepve).
fn write_time(pve: &FakePve) -> Duration {
    let t = LiveTransport::new(pve.live_config()).unwrap();
    let path = format!("/nodes/{}/qemu/1000/config", node(0));
    let mut times = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let r = t
            .call(&Request::new(
                Method::Post,
                path.clone(),
                vec![("description".into(), "bench".into())],
            ))
            .unwrap();
        assert!(r.is_success(), "{r:?}");
        times.push(started.elapsed());
    }
    support::median(times)
}

fn main() {
    let guests = support::env_usize("PROXOPS_ROLLOUT_GUESTS", 20, 4);
    let shutdown_ms = support::env_usize("PROXOPS_ROLLOUT_SHUTDOWN_MS", 1000, 200);
    let start_ms = support::env_usize("PROXOPS_ROLLOUT_START_MS", 500, 100);
    let budgets = support::env_list("PROXOPS_ROLLOUT_BUDGETS", "1,2,4,5", "1,2");
    println!(
        "stop-start change of {guests} running VMs: shutdown {shutdown_ms} ms, start {start_ms} ms, load {}",
        support::load()
    );
    for budget in budgets {
        let pve = FakePve::start(&seed(guests)).expect("fakepve (run tools/install-test-tools.sh)");
        pve.settings(json!({"time_scale": TIME_SCALE})).unwrap();
        for i in 0..guests {
            pve.set_guest(
                (1000 + i) as u32,
                json!({
                    "shutdown_secs": shutdown_ms as f64 / 1e3 / TIME_SCALE,
                    "start_secs": start_ms as f64 / 1e3 / TIME_SCALE,
                }),
            )
            .unwrap();
        }
        let write = write_time(&pve);
        let dir = tempfile::tempdir().unwrap();
        repo(dir.path(), &pve, guests, budget);
        let run_proxops = |args: &[&str]| {
            let mut cmd = Command::new(support::proxops());
            cmd.env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
                .arg("--git-path")
                .arg(dir.path())
                .args(args);
            support::measure(&cmd)
        };
        let plan = run_proxops(&["diff"]);
        let line = plan
            .stdout
            .lines()
            .find(|l| l.starts_with("Rollout:"))
            .unwrap_or("(no rollout line)")
            .to_owned();
        pve.forget_requests().unwrap();
        let run = run_proxops(&["apply", "--yes"]);
        assert_eq!(run.status, 0, "{}{}", run.stdout, run.stderr);
        let most = most_down(&pve.requests().unwrap());
        assert!(
            most <= budget,
            "{most} guests down at once, budget {budget}"
        );
        let unit = Duration::from_millis((shutdown_ms + start_ms) as u64) + write;
        let bound = unit * guests.div_ceil(budget) as u32;
        println!("K = {budget}: {line}");
        println!(
            "       at most {most} down at once; wall {} against {} x {} = {}: {:.2}x",
            support::secs(run.wall),
            guests.div_ceil(budget),
            support::secs(unit),
            support::secs(bound),
            run.wall.as_secs_f64() / bound.as_secs_f64()
        );
    }
}
