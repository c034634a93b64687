//! A repository's manifests read through any [`FanOut`] give what reading
//! them one after another gives: every object, error, warning and
//! position, whatever order and threads the files were read in. Checked
//! over every repository under `fixtures/repos` (valid and refused ones)
//! and over generated repositories whose files clash with each other.

#![allow(clippy::unwrap_used)]
// Reads the fixtures from disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "support/walk.rs"]
mod walk;

use proptest::prelude::*;
use proxops_core::config::Overrides;
use proxops_core::repo::{self, FanOut, InOrder, RepoInput};

/// Last file first.
struct Reversed;

impl FanOut for Reversed {
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        (0..n).rev().for_each(job);
    }
}

/// Three threads, each taking the next file not yet taken.
struct Threads;

impl FanOut for Threads {
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        let next = AtomicUsize::new(0);
        let work = || {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                job(i);
            }
        };
        std::thread::scope(|s| {
            s.spawn(work);
            s.spawn(work);
            work();
        });
    }
}

/// The order a seed shuffles `0..n` into.
struct Shuffled(u64);

impl FanOut for Shuffled {
    fn run(&self, n: usize, job: &(dyn Fn(usize) + Sync)) {
        let mut order: Vec<usize> = (0..n).collect();
        let mut state = self.0 | 1;
        for i in (1..order.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            order.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let ran = Mutex::new(Vec::new());
        for i in order {
            job(i);
            ran.lock().unwrap().push(i);
        }
        assert_eq!(ran.into_inner().unwrap().len(), n);
    }
}

/// Everything a load found, as text: `Loaded` and `Diagnostic` show every
/// field they hold.
fn loaded(files: &BTreeMap<String, Vec<u8>>, fan_out: &dyn FanOut) -> String {
    let dirs: BTreeSet<String> = files
        .keys()
        .filter_map(|f| f.strip_prefix("clusters/")?.split_once('/'))
        .map(|(dir, _)| dir.to_owned())
        .collect();
    let input = RepoInput {
        files,
        cluster_dirs: &dirs,
    };
    format!(
        "{:#?}",
        repo::load_with(input, None, &Overrides::default(), fan_out)
    )
}

fn agree(files: &BTreeMap<String, Vec<u8>>) -> Result<(), String> {
    let want = loaded(files, &InOrder);
    for (name, fan_out) in [
        ("reversed", &Reversed as &dyn FanOut),
        ("threads", &Threads),
        ("shuffled", &Shuffled(0x9e37_79b9_7f4a_7c15)),
    ] {
        if loaded(files, fan_out) != want {
            return Err(format!("read {name}, the repository loads differently"));
        }
    }
    Ok(())
}

/// Every file under `dir`, by its `/`-separated path relative to `dir`.
fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    walk::files(dir)
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(dir).unwrap().to_str().unwrap();
            (rel.replace('\\', "/"), std::fs::read(&p).unwrap())
        })
        .collect()
}

#[test]
fn every_fixture_repository_loads_the_same_whatever_order_its_files_are_read_in() {
    // A repository is the folder that holds `proxops.yaml` or `clusters/`.
    let root = walk::fixtures("repos");
    let repos: BTreeSet<PathBuf> = walk::files(&root)
        .iter()
        .filter_map(|p| {
            // The file's folder first, up to the fixtures' root.
            let up: Vec<&Path> = p.ancestors().skip(1).take_while(|a| *a != root).collect();
            let above_clusters = up
                .iter()
                .position(|a| a.file_name().is_some_and(|n| n == "clusters"))
                .and_then(|i| up.get(i + 1));
            let of_config = p
                .file_name()
                .is_some_and(|n| n == "proxops.yaml")
                .then(|| up.first())
                .flatten();
            above_clusters.or(of_config).map(|dir| dir.to_path_buf())
        })
        .collect();
    for dir in &repos {
        agree(&files_of(dir)).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    let repos = repos.len();
    assert!(repos >= 100, "only {repos} repositories found");
}

/// A VM manifest named `name`, broken in one of a few ways.
fn vm(name: &str, flaw: u8) -> String {
    let body = format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: pve1\n  vmid: {}\n  cores: 2\n  memory: 2048\n",
        100 + name.len()
    );
    match flaw {
        0 => body,
        1 => body.replace("cores: 2", "cores: two"),
        2 => body.replace("node: pve1", "node: elsewhere"),
        3 => format!("{body}  unknown-key: 1\n"),
        _ => body.replace("apiVersion: proxops/v1alpha1\n", ""),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Files that define the same objects, in one file or across files,
    /// with errors in several of them: the same objects win, the same
    /// errors come in the same order, naming the same files and lines.
    #[test]
    fn clashing_files_load_the_same_whatever_order_they_are_read_in(
        files in prop::collection::vec(
            prop::collection::vec(("[a-c]{1,2}", 0u8..5), 1..4),
            1..8,
        )
    ) {
        let mut repo: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        repo.insert(
            "clusters/t/config.yaml".into(),
            b"pve:\n  clusters:\n    t:\n      base-url: https://pve.example.org:8006\n      nodes: [pve1]\n".to_vec(),
        );
        let mut listed = String::from("resources:\n");
        for (i, docs) in files.iter().enumerate() {
            let text: Vec<String> = docs.iter().map(|(name, flaw)| vm(name, *flaw)).collect();
            let path = format!("vm/t/f{i}.yaml");
            listed.push_str(&format!("  - ../../{path}\n"));
            repo.insert(path, text.join("---\n").into_bytes());
        }
        repo.insert("clusters/t/resources.yaml".into(), listed.into_bytes());
        prop_assert_eq!(agree(&repo), Ok(()));
    }
}
