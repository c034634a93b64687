//! A first apply with actions at once against fakepve (`cargo bench -p
//! proxops --bench parallel_apply`): 200 guests on 4 nodes — one
//! TemplateVM per node with clones beside it, VMs booting an ISO that is
//! downloaded to every node, LXC containers from a container template that
//! is downloaded too — with task durations on (fakepve's time scale:
//! each download takes 0.5 s; fakepve's qemu and container tasks take no
//! time of their own) and 10 ms of latency added to every response.
//!
//! The same apply runs twice on fresh servers: one action at a time
//! (`tasks-per-node: 1`, `tasks-per-cluster: 1`), then with the default
//! limits. The serial run's per-action durations (its JSON log events)
//! give the bound the parallel run cannot beat: the longest of the
//! dependency chains (a download or template before its guests), each
//! node's work over `tasks-per-node`, and all the work over
//! `tasks-per-cluster`; plus the read before and the read-back after,
//! measured by `diff`. Prints serial and parallel wall time, the bound and
//! the parallel run's ratio to it. Needs the test tools
//! (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

const NODES: usize = 4;
const CLONES: usize = 120;
const CONTAINERS: usize = 40;
/// Guests booting the ISO; with the templates, 200 guests in all.
const ISO_VMS: usize = 200 - NODES - CLONES - CONTAINERS;
/// Real seconds per PVE second: a download (5 PVE s) takes 0.5 s.
const TIME_SCALE: f64 = 0.1;
/// PVE seconds added to every response (10 ms real).
const LATENCY: f64 = 0.1;
const PER_NODE: usize = proxops_core::rollout::DEFAULT_TASKS_PER_NODE;
const PER_CLUSTER: usize = proxops_core::rollout::DEFAULT_TASKS_PER_CLUSTER;
const CT_ARCHIVE: &str = "debian-13-standard_13.1-2_amd64.tar.zst";
const ISO: &str = "debian-13.1.0-amd64-netinst.iso";
const HEAD: &str = "apiVersion: proxops/v1alpha1\n";

fn node(i: usize) -> String {
    format!("pve{}", i % NODES + 1)
}

fn nodes() -> Vec<String> {
    (0..NODES).map(node).collect()
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The repository, and per guest the object it waits for (`Kind/name`).
fn repo(dir: &Path, pve: &FakePve, serial: bool) -> BTreeMap<String, String> {
    let mut cfg = format!(
        "pve:\n  clusters:\n    bench:\n      base-url: {}\n      nodes: [{}]\n      ca-file: {}\n",
        pve.url(),
        nodes().join(", "),
        pve.ca_file().display()
    );
    if serial {
        cfg.push_str(
            "      tasks-per-node: 1\n      tasks-per-cluster: 1\n      downloads-per-storage: 1\n",
        );
    }
    write(dir, "clusters/bench/config.yaml", &cfg);
    let mut deps = BTreeMap::new();
    let mut list = String::from("resources:\n");
    let mut add = |rel: String, text: String| {
        write(dir, &rel, &text);
        list.push_str(&format!("  - ../../{rel}\n"));
    };
    let all = nodes().join(", ");
    add(
        "ctt/bench/ct.yaml".into(),
        format!(
            "{HEAD}kind: CTTemplate\nmetadata:\n  name: ct\nspec:\n  nodes: [{all}]\n  storage: local\n  filename: {CT_ARCHIVE}\n  url: http://images.example.org/{CT_ARCHIVE}\n"
        ),
    );
    add(
        "iso/bench/netinst.yaml".into(),
        format!(
            "{HEAD}kind: ISO\nmetadata:\n  name: netinst\nspec:\n  nodes: [{all}]\n  storage: local\n  filename: {ISO}\n  url: http://images.example.org/{ISO}\n"
        ),
    );
    for t in 0..NODES {
        let vmid = 9000 + t;
        add(
            format!("templatevm/bench/tmpl-{vmid}.yaml"),
            format!(
                "{HEAD}kind: TemplateVM\nmetadata:\n  name: tmpl-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                node(t)
            ),
        );
    }
    for i in 0..CLONES {
        let vmid = 20000 + i;
        let t = i % NODES;
        deps.insert(
            format!("VM/clone-{vmid}"),
            format!("TemplateVM/tmpl-{}", 9000 + t),
        );
        add(
            format!("vm/bench/clone-{vmid}.yaml"),
            format!(
                "{HEAD}kind: VM\nmetadata:\n  name: clone-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  clone: tmpl-{}\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  networks:\n    - bridge: vmbr0\n",
                node(t),
                9000 + t
            ),
        );
    }
    for i in 0..ISO_VMS {
        let vmid = 10000 + i;
        deps.insert(format!("VM/vm-{vmid}"), "ISO/netinst".to_owned());
        add(
            format!("vm/bench/vm-{vmid}.yaml"),
            format!(
                "{HEAD}kind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n  hardware:\n    cdrom:\n      iso: netinst\n",
                node(i)
            ),
        );
    }
    for i in 0..CONTAINERS {
        let vmid = 30000 + i;
        deps.insert(format!("LXC/ct-{vmid}"), "CTTemplate/ct".to_owned());
        add(
            format!("lxc/bench/ct-{vmid}.yaml"),
            format!(
                "{HEAD}kind: LXC\nmetadata:\n  name: ct-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  template: ct\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n      ip: dhcp\n  options:\n    unprivileged: true\n",
                node(i)
            ),
        );
    }
    write(dir, "clusters/bench/resources.yaml", &list);
    deps
}

fn start_fake() -> FakePve {
    let seed = json!({
        "nodes": nodes(),
        "storages": {"local": {"type": "dir", "path": "/var/lib/vz",
                               "content": "iso,vztmpl,backup,import,snippets", "avail": 536870912000u64}},
        "guests": []
    });
    let pve = FakePve::start(&seed).expect("fakepve (run tools/install-test-tools.sh)");
    pve.settings(json!({"time_scale": TIME_SCALE})).unwrap();
    pve.call("slow_network", json!([LATENCY]), json!({}))
        .unwrap();
    pve
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

/// One performed action: `Kind/name`, node, seconds.
struct Done {
    object: String,
    node: String,
    secs: f64,
}

/// The `proxops.action` events of a `--log-format json` apply.
fn actions(out: &Output) -> Vec<Done> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["msg"] == "proxops.action")
        .map(|v| Done {
            object: format!(
                "{}/{}",
                v["kind"].as_str().unwrap(),
                v["name"].as_str().unwrap()
            ),
            node: v["node"].as_str().unwrap().to_owned(),
            secs: v["duration"]
                .as_str()
                .unwrap()
                .trim_end_matches('s')
                .parse()
                .unwrap(),
        })
        .collect()
}

/// The least time any schedule within the limits needs for `done`: the
/// longest dependency chain, each node's work over the per-node limit, all
/// work over the cluster limit.
fn bound(done: &[Done], deps: &BTreeMap<String, String>) -> (f64, f64, f64) {
    let mut per_object: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    let mut per_node: BTreeMap<&str, f64> = BTreeMap::new();
    for d in done {
        *per_object.entry((&d.object, &d.node)).or_default() += d.secs;
        *per_node.entry(&d.node).or_default() += d.secs;
    }
    let chain = per_object
        .iter()
        .map(|((obj, node), own)| {
            let before = deps
                .get(*obj)
                .and_then(|dep| per_object.get(&(dep.as_str(), *node)))
                .copied()
                .unwrap_or(0.0);
            own + before
        })
        .fold(0.0, f64::max);
    let node = per_node
        .values()
        .fold(0.0, |m, w| f64::max(m, w / PER_NODE as f64));
    let cluster = per_node.values().sum::<f64>() / PER_CLUSTER as f64;
    (chain, node, cluster)
}

/// A fresh server, the repository, a `diff` of the empty cluster, the
/// apply, and a converged `diff`: (apply output, apply wall, reads wall).
fn run(serial: bool) -> (Output, Duration, Duration, BTreeMap<String, String>) {
    let pve = start_fake();
    let dir = tempfile::tempdir().unwrap();
    let deps = repo(dir.path(), &pve, serial);
    let (_, read_empty) = proxops(&pve, dir.path(), &["diff"]);
    let (out, wall) = proxops(
        &pve,
        dir.path(),
        &["--log-format", "json", "apply", "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let (conv, read_full) = proxops(&pve, dir.path(), &["diff", "--exit-code"]);
    assert!(conv.status.success(), "not converged:\n{}", text(&conv));
    (out, wall, read_empty + read_full, deps)
}

fn main() {
    let (serial_out, serial_wall, _, deps) = run(true);
    let done = actions(&serial_out);
    assert!(done.len() >= 200, "{} actions", done.len());
    let (parallel_out, parallel_wall, reads, _) = run(false);
    let (chain, node, cluster) = bound(&done, &deps);
    let exec_bound = chain.max(node).max(cluster);
    let total_bound = exec_bound + reads.as_secs_f64();
    let work: f64 = done.iter().map(|d| d.secs).sum();
    println!(
        "first apply, 200 guests on {NODES} nodes ({} actions, {:.1} s of action time serially; time scale {TIME_SCALE}, {:.0} ms latency per response):",
        done.len(),
        work,
        LATENCY * TIME_SCALE * 1000.0
    );
    println!(
        "  serial (1 at a time): {:.1} s; parallel ({PER_NODE} per node, {PER_CLUSTER} per cluster): {:.1} s ({:.1}x faster)",
        serial_wall.as_secs_f64(),
        parallel_wall.as_secs_f64(),
        serial_wall.as_secs_f64() / parallel_wall.as_secs_f64()
    );
    println!(
        "  bound {:.1} s = execution {:.1} s (chains {:.1} s, busiest node {:.1} s, cluster {:.1} s) + read and read-back {:.1} s; parallel is {:.2}x the bound",
        total_bound,
        exec_bound,
        chain,
        node,
        cluster,
        reads.as_secs_f64(),
        parallel_wall.as_secs_f64() / total_bound
    );
    let most = actions(&parallel_out).len();
    assert_eq!(most, done.len(), "the same actions ran");
}
