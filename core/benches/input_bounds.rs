//! Validation time against input size, at 1× and 10× (`cargo bench -p
//! proxops-core --bench input_bounds`): many refused quantities in one
//! manifest, aliases within the limit, aliases past it (refused while
//! counting), and the nesting scan over lines broken by carriage returns.
//! Each prints the median of 9 runs at both sizes and their ratio; linear
//! work keeps the ratio near 10 (the quadratic steps these inputs once
//! went through gave 100 and more).

#![allow(clippy::unwrap_used, clippy::expect_used)]
// A benchmark times itself.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use proxops_core::bounds::{self, FileRole, MAX_NESTING};
use proxops_core::config::Overrides;
use proxops_core::repo::{self, RepoInput};

const CONFIG: &str = "pve:\n  clusters:\n    home:\n      base-url: https://pve.example.org:8006\n      nodes: [pve1]\n";
const HEAD: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: big\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n";

fn load(manifest: &str) {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/home/config.yaml".into(),
        CONFIG.as_bytes().to_vec(),
    );
    files.insert(
        "clusters/home/resources.yaml".into(),
        b"resources:\n  - ../../vm/home/big.yaml\n".to_vec(),
    );
    files.insert("vm/home/big.yaml".into(), manifest.as_bytes().to_vec());
    let dirs: BTreeSet<String> = ["home".to_owned()].into();
    let _ = repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    );
}

fn median(mut f: impl FnMut()) -> Duration {
    let mut t: Vec<Duration> = (0..9)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect();
    t.sort();
    t[4]
}

fn report(what: &str, small: impl Fn(), large: impl Fn()) {
    let (s, l) = (median(small), median(large));
    println!(
        "{what:<40} 1×: {:>9.2} ms  10×: {:>9.2} ms  ratio {:>5.1}",
        s.as_secs_f64() * 1e3,
        l.as_secs_f64() * 1e3,
        l.as_secs_f64() / s.as_secs_f64().max(1e-9)
    );
}

fn main() {
    let disks = |n: usize| {
        format!(
            "{HEAD}  disks:\n{}",
            "    - {storage: local-lvm, size: 32G}\n".repeat(n)
        )
    };
    let (a, b) = (disks(2_000), disks(20_000));
    report("refused quantities (2,000 disks)", || load(&a), || load(&b));

    let aliased = |n: usize| {
        format!(
            "{HEAD}  disks:\n    - {{storage: local-lvm, size: &s 32G}}\n{}",
            "    - {storage: local-lvm, size: *s}\n".repeat(n)
        )
    };
    let (a, b) = (aliased(900), aliased(9_000));
    report("aliases within the limit (900)", || load(&a), || load(&b));

    let past = |n: usize| {
        format!(
            "{HEAD}  disks: [&d {{storage: local-lvm, size: 32G}}{}]\n",
            ", *d".repeat(n)
        )
    };
    let (a, b) = (past(25_000), past(250_000));
    report("aliases past the limit (25,000)", || load(&a), || load(&b));

    let nests = |n: usize| -> Vec<u8> {
        let doc: String = (0..MAX_NESTING - 2)
            .map(|d| format!("{}k{d}:\r", " ".repeat(2 * d)))
            .collect();
        std::iter::repeat_n(doc, n)
            .collect::<Vec<_>>()
            .join("---\r")
            .into_bytes()
    };
    let (a, b) = (nests(20), nests(200));
    report(
        "nesting scan, CR line breaks (20 docs)",
        || {
            let _ = bounds::check(FileRole::Manifest, &a);
        },
        || {
            let _ = bounds::check(FileRole::Manifest, &b);
        },
    );
}
