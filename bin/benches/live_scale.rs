//! Live scale against fakepve (`cargo bench -p proxops --bench live_scale`):
//! 2,000 guests on 8 nodes, built by ProxOps itself.
//!
//! On an empty cluster (only nodes, storages and one container template
//! archive seeded), a generated repository of VMs created from scratch,
//! one TemplateVM per node with clones of it beside it, and LXC containers
//! is applied with `proxops apply` (time scale 0: every task has finished
//! when its POST answers). The bench prints the first apply's requests and
//! wall time, then checks a converged `proxops diff`: no drift, and no more
//! requests than the bound N + 2M + 3 (N guests, M nodes). With 20 ms added
//! to every response it then sweeps the read concurrency and prints each
//! converged cycle's wall time against the serial lower bound
//! (requests × latency).
//!
//! Sizes: `PROXOPS_SCALE_GUESTS` (2000), `PROXOPS_SCALE_NODES` (8),
//! `PROXOPS_SCALE_CONCURRENCY` (the sweep, `1,2,4,8,16`; empty skips it).
//! Needs the test tools (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use proxops_pve::fakepve::FakePve;
use serde_json::json;

const LATENCY: f64 = 0.020;
const CT_ARCHIVE: &str = "debian-13-standard_13.1-2_amd64.tar.zst";

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a count")),
        Err(_) => default,
    }
}

/// What the generated repository holds.
struct Estate {
    nodes: usize,
    /// One TemplateVM per node, vmid 9000 + node.
    templates: usize,
    clones: usize,
    containers: usize,
    vms: usize,
}

impl Estate {
    /// `guests` in all: one template per node, a tenth clones, a
    /// tenth containers, the rest VMs built from scratch.
    fn new(guests: usize, nodes: usize) -> Estate {
        assert!(guests >= nodes, "need at least one guest per node");
        let templates = nodes;
        let clones = (guests - templates) / 10;
        let containers = (guests - templates) / 10;
        Estate {
            nodes,
            templates,
            clones,
            containers,
            vms: guests - templates - clones - containers,
        }
    }

    fn guests(&self) -> usize {
        self.templates + self.clones + self.containers + self.vms
    }

    fn bound(&self) -> usize {
        self.guests() + 2 * self.nodes + 3
    }

    fn node(&self, i: usize) -> String {
        format!("pve{}", i % self.nodes + 1)
    }

    fn node_names(&self) -> Vec<String> {
        (1..=self.nodes).map(|n| format!("pve{n}")).collect()
    }
}

/// An empty cluster: nodes, the two default storages, and the container
/// template archive on `local` (fakepve's storages are shared by every
/// node, so one file serves all of them).
fn seed(estate: &Estate) -> serde_json::Value {
    json!({
        "nodes": estate.node_names(),
        "storages": {
            "local": {"type": "dir", "path": "/var/lib/vz",
                      "content": "iso,vztmpl,backup,import,snippets", "avail": 53687091200u64}
        },
        "files": [{"storage": "local", "name": CT_ARCHIVE, "size": 120000000, "content": "vztmpl"}],
        "guests": []
    })
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn cluster_config(dir: &Path, pve: &FakePve, estate: &Estate, concurrency: Option<usize>) {
    let mut text = format!(
        "pve:\n  clusters:\n    scale:\n      base-url: {}\n      nodes: [{}]\n      ca-file: {}\n",
        pve.url(),
        estate.node_names().join(", "),
        pve.ca_file().display()
    );
    if let Some(c) = concurrency {
        text.push_str(&format!("      read-concurrency: {c}\n"));
    }
    write(dir, "clusters/scale/config.yaml", &text);
}

const HEAD: &str = "apiVersion: proxops/v1alpha1\n";

fn repo(dir: &Path, pve: &FakePve, estate: &Estate) {
    cluster_config(dir, pve, estate, None);
    let mut list = String::from("resources:\n");
    let mut add = |rel: String, text: String| {
        write(dir, &rel, &text);
        list.push_str(&format!("  - ../../{rel}\n"));
    };
    add(
        "ctt/scale/debian-13-standard.yaml".into(),
        format!(
            "{HEAD}kind: CTTemplate\nmetadata:\n  name: debian-13-standard\nspec:\n  nodes: [{}]\n  storage: local\n  filename: {CT_ARCHIVE}\n  url: http://download.proxmox.com/images/system/{CT_ARCHIVE}\n",
            estate.node_names().join(", ")
        ),
    );
    for t in 0..estate.templates {
        let vmid = 9000 + t;
        add(
            format!("templatevm/scale/tmpl-{vmid}.yaml"),
            format!(
                "{HEAD}kind: TemplateVM\nmetadata:\n  name: tmpl-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                estate.node(t)
            ),
        );
    }
    for i in 0..estate.vms {
        let vmid = 10000 + i;
        add(
            format!("vm/scale/vm-{vmid}.yaml"),
            format!(
                "{HEAD}kind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                estate.node(i)
            ),
        );
    }
    for i in 0..estate.clones {
        let vmid = 20000 + i;
        // On its template's node: local-lvm is not shared, so PVE would
        // refuse a clone to another node onto it.
        let t = i % estate.templates;
        add(
            format!("vm/scale/clone-{vmid}.yaml"),
            format!(
                "{HEAD}kind: VM\nmetadata:\n  name: clone-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  clone: tmpl-{}\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  networks:\n    - bridge: vmbr0\n",
                estate.node(t),
                9000 + t
            ),
        );
    }
    for i in 0..estate.containers {
        let vmid = 30000 + i;
        add(
            format!("lxc/scale/ct-{vmid}.yaml"),
            format!(
                "{HEAD}kind: LXC\nmetadata:\n  name: ct-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  template: debian-13-standard\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n      ip: dhcp\n  options:\n    unprivileged: true\n",
                estate.node(i)
            ),
        );
    }
    write(dir, "clusters/scale/resources.yaml", &list);
}

fn proxops(pve: &FakePve, dir: &Path, args: &[&str]) -> (Output, Duration) {
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env("PROXOPS_PVE_TOKEN_VALUE", pve.token_value().expose())
        .arg("--git-path")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    (out, t.elapsed())
}

fn text(out: &Output) -> String {
    format!(
        "--- stdout\n{}--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Requests by method and path shape (node, id, storage and task ids
/// elided), most frequent first.
fn shapes(log: &[(String, String, String)]) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (method, path, _) in log {
        let shape: Vec<&str> = path
            .trim_start_matches("/api2/json")
            .split('/')
            .enumerate()
            .map(|(i, seg)| match (i, seg) {
                (2, _) if path.contains("/nodes/") => "{node}",
                (_, s) if s.parse::<u64>().is_ok() => "{id}",
                (_, s) if s.starts_with("UPID") => "{upid}",
                (_, s) => s,
            })
            .collect();
        *counts
            .entry(format!("{method} {}", shape.join("/")))
            .or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

/// One converged `diff`: (requests, wall). Panics on drift.
fn converged(pve: &FakePve, dir: &Path) -> (usize, Duration) {
    pve.forget_requests().unwrap();
    let (out, wall) = proxops(pve, dir, &["diff"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("no drift"),
        "{}",
        text(&out)
    );
    (pve.requests().unwrap().len(), wall)
}

fn main() {
    let estate = Estate::new(
        env_usize("PROXOPS_SCALE_GUESTS", 2000),
        env_usize("PROXOPS_SCALE_NODES", 8),
    );
    let sweep: Vec<usize> = std::env::var("PROXOPS_SCALE_CONCURRENCY")
        .unwrap_or_else(|_| "1,2,4,8,16".into())
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("PROXOPS_SCALE_CONCURRENCY: counts"))
        .collect();
    let (n, m) = (estate.guests(), estate.nodes);
    println!(
        "estate: {n} guests on {m} nodes ({} VMs from scratch, {} TemplateVMs, {} clones, {} LXC)",
        estate.vms, estate.templates, estate.clones, estate.containers
    );

    let pve = FakePve::start(&seed(&estate)).expect("fakepve (run tools/install-test-tools.sh)");
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path(), &pve, &estate);

    // First apply: everything is created.
    pve.forget_requests().unwrap();
    let (out, wall) = proxops(&pve, dir.path(), &["apply", "--yes"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let expect_ok = format!("{} ok, 0 failed", n);
    assert!(
        out.status.success() && stdout.contains(&expect_ok),
        "{}",
        text(&out)
    );
    let log = pve.requests().unwrap();
    let writes = log.iter().filter(|(m, _, _)| m != "GET").count();
    println!(
        "first apply: {n} guests created, {} requests ({writes} writes, {} reads), wall {:.1} s, {:.0} requests/s, serial lower bound at {:.0} ms latency {:.1} s",
        log.len(),
        log.len() - writes,
        wall.as_secs_f64(),
        log.len() as f64 / wall.as_secs_f64(),
        LATENCY * 1000.0,
        log.len() as f64 * LATENCY
    );
    for (shape, count) in shapes(&log) {
        println!("  {count:>6}  {shape}");
    }

    // Converged: a second apply writes nothing; diff reads within the bound.
    pve.forget_requests().unwrap();
    let (out, wall) = proxops(&pve, dir.path(), &["apply", "--yes"]);
    let log = pve.requests().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        log.iter().all(|(m, _, _)| m == "GET"),
        "a converged apply wrote: {:?}",
        log.iter()
            .filter(|(m, _, _)| m != "GET")
            .take(5)
            .collect::<Vec<_>>()
    );
    println!(
        "converged apply (no latency): {} requests, all reads, wall {:.2} s",
        log.len(),
        wall.as_secs_f64()
    );
    let (requests, wall) = converged(&pve, dir.path());
    println!(
        "converged diff (no latency): {requests} requests (bound N + 2M + 3 = {}), wall {:.2} s, {:.0} requests/s",
        estate.bound(),
        wall.as_secs_f64(),
        requests as f64 / wall.as_secs_f64()
    );
    assert!(
        requests <= estate.bound(),
        "{requests} > {}",
        estate.bound()
    );

    if sweep.is_empty() {
        return;
    }
    pve.settings(json!({"time_scale": 1.0})).unwrap();
    pve.call("slow_network", json!([LATENCY]), json!({}))
        .unwrap();
    println!(
        "converged diff with {:.0} ms per response, by read-concurrency (median of 3):",
        LATENCY * 1000.0
    );
    println!("| read-concurrency | requests | wall | serial lower bound | speed-up |");
    println!("|---|---|---|---|---|");
    for c in sweep {
        cluster_config(dir.path(), &pve, &estate, Some(c));
        let mut times = Vec::new();
        let mut requests = 0;
        for _ in 0..3 {
            let (r, wall) = converged(&pve, dir.path());
            requests = r;
            times.push(wall);
        }
        times.sort();
        let wall = times[1].as_secs_f64();
        let serial = requests as f64 * LATENCY;
        assert!(
            requests <= estate.bound(),
            "{requests} > {}",
            estate.bound()
        );
        println!(
            "| {c} | {requests} | {wall:.2} s | {serial:.1} s | {:.1}× |",
            serial / wall
        );
    }
}
