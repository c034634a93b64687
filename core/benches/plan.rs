//! Planning speed at 1,000 / 10,000 / 20,000 guests (`cargo bench -p proxops-core`).
//!
//! A plain harness (no extra crate): each size is planned several times,
//! the sizes taking turns, and the median wall time is printed, with its
//! inputs cached from the plan before (warm) and with the caches emptied
//! first (cold). `PROXOPS_BENCH_QUICK=1` (CI) takes 1,000 guests through
//! three turns. The fixture is half converged guests,
//! a quarter drifted, an eighth missing and an eighth tagged orphans, spread
//! over 8 nodes, so every planner path is exercised.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// A benchmark times itself and reads its filter argument.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use proxops_core::config::Overrides;
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::live::{GuestType, LiveConfig, LiveGuest, LiveSnapshot, NodeState, Power};
use proxops_core::names::{NodeName, Vmid};
use proxops_core::plan::Policy;
use proxops_core::planner::plan;
use proxops_core::repo::{self, ClusterDesired, RepoInput};
use proxops_core::wire::TagSet;

/// The allocator of the `proxops` binary, so the planner is timed as it
/// runs there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const NODES: usize = 8;

fn desired(n: usize) -> ClusterDesired {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/big/config.yaml".into(),
        b"pve:\n  clusters:\n    big:\n      base-url: https://big.example.org:8006\n".to_vec(),
    );
    let mut list = String::from("resources:\n");
    for i in 0..n {
        let vmid = 1000 + i;
        let node = format!("pve{}", i % NODES + 1);
        let path = format!("vm/big/vm-{vmid}.yaml");
        files.insert(path.clone(), format!(
            "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: {node}\n  vmid: {vmid}\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  disks:\n    - storage: local-lvm\n      size: 32GiB\n  networks:\n    - bridge: vmbr0\n  tags: [bench]\n"
        ).into_bytes());
        list.push_str(&format!("  - ../../{path}\n"));
    }
    files.insert("clusters/big/resources.yaml".into(), list.into_bytes());
    let dirs: BTreeSet<String> = ["big".to_owned()].into();
    let loaded = repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    )
    .unwrap();
    loaded.clusters.into_values().next().unwrap().unwrap()
}

fn live(n: usize) -> LiveSnapshot {
    let mut s = LiveSnapshot::default();
    for k in 1..=NODES {
        s.nodes.insert(
            NodeName::new(&format!("pve{k}")).unwrap(),
            NodeState::Online,
        );
    }
    for i in 0..n {
        let vmid = 1000 + i;
        let node = NodeName::new(&format!("pve{}", i % NODES + 1)).unwrap();
        let (present, memory, tags) = match i % 8 {
            0..=3 => (true, "2048", "bench;proxops"),
            4 | 5 => (true, "1024", "bench"),
            6 => (false, "", ""),
            _ => (true, "2048", "bench;proxops"),
        };
        if !present {
            continue;
        }
        // The last eighth are orphans: a different id range, tagged.
        let vmid = if i % 8 == 7 { 500_000 + i } else { vmid };
        let config = LiveConfig::from_json(&serde_json::json!({
            "name": format!("vm-{vmid}"), "memory": memory, "cpu": "host", "cores": 2,
            "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=32G"),
            "net0": format!("virtio=BC:24:11:{:02X}:{:02X}:{:02X},bridge=vmbr0", (i >> 16) & 255, (i >> 8) & 255, i & 255),
            "tags": tags, "digest": "0123456789abcdef0123456789abcdef01234567",
        }))
        .unwrap();
        let v = Vmid::new(vmid as u64).unwrap();
        s.guests.insert(
            (node.clone(), v),
            LiveGuest {
                node,
                vmid: v,
                guest_type: GuestType::Qemu,
                name: format!("vm-{vmid}"),
                template: false,
                power: Power::Running,
                lock: None,
                ha_state: None,
                tags: TagSet::parse(tags).unwrap(),
                config: Ok(config),
            },
        );
    }
    s
}

/// The time this thread has spent on a CPU (the kernel's schedstat, in
/// nanoseconds): on a shared machine this moves far less than wall time,
/// which also counts the time other work held the CPU. The kernel brings
/// the figure up to date at its scheduler ticks (every few milliseconds)
/// and whenever it schedules; yielding first makes it schedule, so the
/// reading is exact to microseconds (a tick behind, 0 or 4 ms, without)
/// and can be taken around one plan.
fn on_cpu() -> std::time::Duration {
    std::thread::yield_now();
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    std::time::Duration::from_nanos(ns)
}

/// Twice the build machine's last-level cache (32 MiB): written through
/// before a cold plan, it leaves none of the plan's inputs cached.
const EVICT_BYTES: usize = 64 << 20;

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let quick = std::env::var("PROXOPS_BENCH_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let sizes: &[usize] = if quick {
        &[1_000]
    } else {
        &[1_000, 10_000, 20_000]
    };
    let secrets = CloudInitSecrets::default();
    let policy = Policy::default();
    let mut sized: Vec<Sized> = sizes
        .iter()
        .filter(|n| {
            filter
                .as_ref()
                .is_none_or(|f| n.to_string().contains(f.as_str()))
        })
        .map(|&n| Sized {
            n,
            desired: desired(n),
            live: live(n),
            runs: match (quick, n >= 10_000) {
                (true, _) => 3,
                (false, true) => 11,
                (false, false) => 21,
            },
            warm: Vec::new(),
            cold: Vec::new(),
            cpu: Duration::ZERO,
            actions: 0,
        })
        .collect();
    let mut evict = vec![0u8; EVICT_BYTES];
    // The sizes take turns, in alternating order: on a shared machine the
    // load drifts over the seconds a size takes, and timing one size after
    // the other put that drift into their ratio (2.19 and 2.31 median in
    // two runs minutes apart). Each turn plans a size three times: after
    // the caches were emptied (cold), then twice more, the last timed
    // (warm: what fits of its inputs is cached from the plan before).
    let rounds = sized.iter().map(|s| s.runs).max().unwrap_or(0);
    for round in 0..rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..sized.len()).collect()
        } else {
            (0..sized.len()).rev().collect()
        };
        for i in order {
            let s = &mut sized[i];
            if s.warm.len() < s.runs {
                for (k, byte) in evict.iter_mut().enumerate().step_by(64) {
                    *byte = byte.wrapping_add(k as u8);
                }
                std::hint::black_box(&evict);
                let cold = s.plan_once(&secrets, &policy);
                s.cold.push(cold);
                s.plan_once(&secrets, &policy);
                let warm = s.plan_once(&secrets, &policy);
                s.warm.push(warm);
            }
        }
    }
    for s in &mut sized {
        s.warm.sort();
        s.cold.sort();
        println!(
            "plan {:>6} guests: median {:>8.2} ms  (min {:.2} ms, mean on CPU {:.2} ms, {} runs, {} actions); cold caches: median {:.2} ms",
            s.n,
            ms(s.median()),
            ms(s.warm[0]),
            ms(s.cpu) / (3 * s.runs) as f64,
            s.runs,
            s.actions,
            ms(s.cold[s.cold.len() / 2]),
        );
    }
    let at = |n: usize| sized.iter().find(|s| s.n == n);
    if let (Some(s10), Some(s20)) = (at(10_000), at(20_000)) {
        // The best run is the one least disturbed by other work on the
        // machine; both are printed.
        println!(
            "ratio 20k/10k: median {:.2}, best {:.2}; cold caches: median {:.2}",
            ms(s20.median()) / ms(s10.median()),
            ms(s20.warm[0]) / ms(s10.warm[0]),
            ms(s20.cold[s20.cold.len() / 2]) / ms(s10.cold[s10.cold.len() / 2]),
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One size's fixture and what its plans measured.
struct Sized {
    n: usize,
    desired: ClusterDesired,
    live: LiveSnapshot,
    runs: usize,
    /// Planned right after a plan of the same size.
    warm: Vec<Duration>,
    /// Planned after the caches were emptied.
    cold: Vec<Duration>,
    /// On CPU over all its plans, their drops included.
    cpu: Duration,
    actions: usize,
}

impl Sized {
    /// The median warm plan (sorted).
    fn median(&self) -> Duration {
        self.warm[self.warm.len() / 2]
    }

    /// One plan: its wall time (the drop of the plan not included).
    fn plan_once(&mut self, secrets: &CloudInitSecrets, policy: &Policy) -> Duration {
        let ctx = Context {
            cluster: &self.desired,
            secrets,
        };
        let cpu_before = on_cpu();
        let t = Instant::now();
        let p = plan(&self.desired, &self.live, &ctx, policy);
        let took = t.elapsed();
        self.actions = p.actions.len();
        drop(p);
        self.cpu += on_cpu().saturating_sub(cpu_before);
        took
    }
}
