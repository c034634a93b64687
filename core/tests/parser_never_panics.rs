//! Whatever bytes an operator commits, loading a repository never panics:
//! it either loads or returns diagnostics that each name a file and say
//! what is wrong. Two generators: YAML-ish noise dropped into any file of
//! the demo repository, and small edits (delete, duplicate, swap, retype,
//! unknown key, truncate) of the demo's own files. The same texts hold
//! the block-YAML reader (`yaml_block`) to serde_norway's reading, and the
//! manifests read straight from its tree (`yaml_node`) to those read from
//! serde_norway's values.

#![allow(clippy::unwrap_used)]
// Reads the demo fixtures and PROPTEST_CASES.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod support;
#[path = "support/typed.rs"]
mod typed;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use proptest::prelude::*;
use proxops_core::config::Overrides;
use proxops_core::diag::Diagnostic;
use proxops_core::repo::{self, RepoInput};
use proxops_core::{yaml, yaml_block};

type Tree = (BTreeMap<String, Vec<u8>>, BTreeSet<String>);

/// The demo repository as the git adapter would hand it over (read once).
fn demo() -> Tree {
    static DEMO: OnceLock<Tree> = OnceLock::new();
    DEMO.get_or_init(read_demo).clone()
}

fn read_demo() -> Tree {
    support::demo::files()
}

fn yaml_files(files: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    files
        .keys()
        .filter(|p| p.ends_with(".yaml"))
        .cloned()
        .collect()
}

fn check_diag(d: &Diagnostic) -> Result<(), TestCaseError> {
    prop_assert!(!d.file.is_empty(), "diagnostic without a file: {d:?}");
    prop_assert!(
        !d.message.trim().is_empty(),
        "diagnostic without a message: {d:?}"
    );
    Ok(())
}

/// Loads; any panic fails the property, and every diagnostic must be usable.
fn load_checked(
    files: &BTreeMap<String, Vec<u8>>,
    dirs: &BTreeSet<String>,
) -> Result<(), TestCaseError> {
    match repo::load(
        RepoInput {
            files,
            cluster_dirs: dirs,
        },
        None,
        &Overrides::default(),
    ) {
        Ok(loaded) => {
            for d in loaded.diagnostics() {
                check_diag(d)?;
            }
        }
        Err(diags) => {
            prop_assert!(!diags.is_empty(), "a refused repository must say why");
            for d in &diags {
                check_diag(d)?;
            }
        }
    }
    Ok(())
}

const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "spec",
    "node",
    "nodes",
    "vmid",
    "memory",
    "cpu",
    "cores",
    "type",
    "disks",
    "size",
    "image",
    "interface",
    "networks",
    "bridge",
    "vlan",
    "mac",
    "clone",
    "hardware",
    "cdrom",
    "iso",
    "template",
    "root",
    "storage",
    "bind-mounts",
    "host-path",
    "resources",
    "pve",
    "clusters",
    "home",
    "base-url",
    "auth",
    "reconcile",
    "poll-interval",
    "prune-budget",
    "log",
    "level",
    "annotations",
    "proxops/depends-on",
    "extra",
    "tags",
    "filename",
    "url",
    "checksum",
    "cloud-init-data",
    "ssh-keys",
    "ipconfigs",
    "x",
    "<<",
    "",
    "ключ",
];

const SCALARS: &[&str] = &[
    "proxops/v1alpha1",
    "VM",
    "LXC",
    "ISO",
    "TemplateVM",
    "pve1",
    "100",
    "-1",
    "0",
    "4294967296",
    "99999999999999999999999",
    "1.5",
    ".inf",
    ".nan",
    "-.inf",
    "~",
    "null",
    "true",
    "no",
    "1GiB",
    "0.5GiB",
    "1e400",
    "18446744073709551616PiB",
    "\"\"",
    "''",
    "\"unterminated",
    "'it''s'",
    "*a",
    "&a v",
    "!x v",
    "!!binary aGk=",
    "!!int x",
    "{}",
    "[]",
    "{a: 1, b: [1, {c: *a}]}",
    "[a, [b, [c]]]",
    "|",
    ">-",
    "? k",
    ": v",
    "@",
    "`",
    "%YAML 1.2",
    "\t",
    "VM:web-01,ISO:x",
    "../../vm/base/x.yaml",
    "https://h:99999/x",
    "10.0.0.1/33",
    "bc:24:11:00:00:zz",
    "ssh-ed25519 AAAA",
    "*",
];

/// One line of YAML-ish text.
fn yaml_line() -> impl Strategy<Value = String> {
    let key = prop::sample::select(KEYS);
    let scalar = prop::sample::select(SCALARS);
    let indent = (0usize..8).prop_map(|n| " ".repeat(n));
    prop_oneof![
        (indent.clone(), key.clone(), scalar.clone()).prop_map(|(i, k, v)| format!("{i}{k}: {v}")),
        (indent.clone(), key.clone()).prop_map(|(i, k)| format!("{i}{k}:")),
        (indent.clone(), scalar.clone()).prop_map(|(i, v)| format!("{i}- {v}")),
        (indent.clone(), key.clone(), scalar.clone())
            .prop_map(|(i, k, v)| format!("{i}- {k}: {v}")),
        (indent.clone(), key.clone(), scalar.clone())
            .prop_map(|(i, k, v)| format!("{i}&a {k}: {v}")),
        (indent.clone(), key.clone()).prop_map(|(i, k)| format!("{i}{k}: *a")),
        (indent.clone(), key.clone(), scalar.clone())
            .prop_map(|(i, k, v)| format!("{i}!x {k}: !y {v}")),
        Just("---".to_owned()),
        Just("...".to_owned()),
        Just("# comment".to_owned()),
        Just(String::new()),
        "\\PC{0,24}",
    ]
}

fn yaml_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::collection::vec(yaml_line(), 0..24).prop_map(|lines| lines.join("\n")),
        1 => "\\PC{0,200}",
        1 => prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    Retype(usize, &'static str),
    UnknownKey(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let i = 0usize..64;
    prop_oneof![
        i.clone().prop_map(Mutation::Delete),
        i.clone().prop_map(Mutation::Duplicate),
        (i.clone(), i.clone()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (i.clone(), prop::sample::select(SCALARS)).prop_map(|(a, v)| Mutation::Retype(a, v)),
        (i.clone(), 0usize..8).prop_map(|(a, n)| Mutation::UnknownKey(a, n)),
        (0usize..4096).prop_map(Mutation::Truncate),
    ]
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let n = lines.len().max(1);
    match *m {
        Mutation::Delete(i) if !lines.is_empty() => {
            lines.remove(i % n);
        }
        Mutation::Duplicate(i) if !lines.is_empty() => {
            let l = lines[i % n].clone();
            lines.insert(i % n, l);
        }
        Mutation::Swap(a, b) if !lines.is_empty() => lines.swap(a % n, b % n),
        Mutation::Retype(i, v) if !lines.is_empty() => {
            let l = &mut lines[i % n];
            *l = match l.split_once(": ") {
                Some((k, _)) => format!("{k}: {v}"),
                None => match l.split_once("- ") {
                    Some((k, _)) => format!("{k}- {v}"),
                    None => format!("{l} {v}"),
                },
            };
        }
        Mutation::UnknownKey(i, indent) => {
            let at = if lines.is_empty() {
                0
            } else {
                i % (lines.len() + 1)
            };
            lines.insert(at, format!("{}bogus-key: 1", " ".repeat(indent)));
        }
        Mutation::Truncate(k) => {
            let mut cut = k.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            return text[..cut].to_owned();
        }
        _ => {}
    }
    lines.join("\n") + "\n"
}

/// Where the block-YAML reader answers, it answers as serde_norway does
/// (in order: `Mapping`'s `==` ignores it).
fn same_reading(text: &str) -> Result<(), TestCaseError> {
    if let Some(fast) = yaml_block::documents(text) {
        let reference = yaml::serde_documents(text).map(|d| format!("{d:?}"));
        prop_assert_eq!(Ok(format!("{fast:?}")), reference, "{}", text);
    }
    if let Err(e) = typed::typed_readings_agree(text) {
        return Err(TestCaseError::fail(e));
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

proptest! {
    // PROPTEST_CASES raises the count for a longer hunt; 2,000 each keeps CI fast.
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_in_any_file_never_panics(which in any::<prop::sample::Index>(), text in yaml_text(), extra in any::<bool>()) {
        let (mut files, dirs) = demo();
        let targets = yaml_files(&files);
        let target = which.get(&targets).clone();
        same_reading(&text)?;
        files.insert(target, text.clone().into_bytes());
        if extra {
            // The same noise as one more manifest the home cluster lists.
            files.insert("vm/home/noise.yaml".into(), text.clone().into_bytes());
            let comp = files.get_mut("clusters/home/resources.yaml").unwrap();
            comp.extend_from_slice(b"  - ../../vm/home/noise.yaml\n");
        }
        load_checked(&files, &dirs)?;
    }

    #[test]
    fn edited_demo_files_load_or_explain(which in any::<prop::sample::Index>(), edits in prop::collection::vec(mutation(), 1..4)) {
        let (mut files, dirs) = demo();
        let targets = yaml_files(&files);
        let target = which.get(&targets).clone();
        let mut text = String::from_utf8(files[&target].clone()).unwrap();
        for m in &edits {
            text = apply(&text, m);
        }
        same_reading(&text)?;
        files.insert(target, text.into_bytes());
        load_checked(&files, &dirs)?;
    }
}

#[test]
fn the_unedited_demo_loads_without_diagnostics() {
    let (files, dirs) = demo();
    let loaded = repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    )
    .unwrap();
    assert!(
        loaded.diagnostics().is_empty(),
        "{:?}",
        loaded.diagnostics()
    );
    assert_eq!(loaded.object_count(), 14);
}

/// Every YAML file the project ships (the fixtures' manifests,
/// configurations and compositions) reads the same through the block-YAML
/// reader as through serde_norway, and the reader takes nearly all of them:
/// a repository's load is only fast if it does.
#[test]
fn every_fixture_reads_the_same_through_the_block_reader() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let mut stack = vec![root];
    let (mut read, mut total) = (0, 0);
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if !p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            total += 1;
            if let Some(fast) = yaml_block::documents(&text) {
                read += 1;
                let reference = yaml::serde_documents(&text).map(|d| format!("{d:?}"));
                assert_eq!(Ok(format!("{fast:?}")), reference, "{}", p.display());
            }
        }
    }
    assert!(total > 100, "found only {total} fixture files");
    assert!(
        read * 10 >= total * 8,
        "the block reader took only {read} of {total} fixture files"
    );
}
