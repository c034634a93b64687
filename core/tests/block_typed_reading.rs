//! Manifests read straight from the block reader's tree give what reading
//! them from serde_norway's `Value` gave: over every YAML file the project
//! ships, over small edits of them, and over generated manifests whose
//! scalars sit on the edges of YAML's resolution (quoted numbers, nulls,
//! booleans, large integers, names of enum variants).

#![allow(clippy::unwrap_used)]
// Reads the fixtures from disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

#[path = "support/typed.rs"]
mod typed;
#[path = "support/walk.rs"]
mod walk;

use proptest::prelude::*;
use typed::typed_readings_agree;

/// Every `.yaml`/`.yml` file under `fixtures/` and this crate's tests.
fn shipped_yaml() -> Vec<(String, String)> {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut out: Vec<(String, String)> = [walk::fixtures(""), tests]
        .iter()
        .flat_map(|root| walk::files(root))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .filter_map(|p| Some((p.display().to_string(), std::fs::read_to_string(&p).ok()?)))
        .collect();
    out.sort();
    out
}

#[test]
fn every_shipped_yaml_file_reads_the_same_from_the_block_tree() {
    let files = shipped_yaml();
    let mut read = 0;
    for (path, text) in &files {
        read += typed_readings_agree(text).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    assert!(files.len() > 100, "found only {} files", files.len());
    // Most manifests read as their kind: the comparison is not only of
    // refusals.
    assert!(read > files.len(), "only {read} typed readings succeeded");
}

/// A manifest's lines, each a candidate for an edit.
fn manifests() -> &'static [String] {
    static TEXTS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    TEXTS.get_or_init(|| {
        shipped_yaml()
            .into_iter()
            .filter(|(p, t)| !p.contains("/live/") && t.contains("apiVersion"))
            .map(|(_, t)| t)
            .collect()
    })
}

/// Scalars on the edges of what a field takes.
const SCALARS: &[&str] = &[
    "~",
    "null",
    "",
    "true",
    "false",
    "True",
    "0",
    "1",
    "100",
    "007",
    "-1",
    "1.5",
    "18446744073709551615",
    "18446744073709551616",
    "\"100\"",
    "'100'",
    "\"true\"",
    "'~'",
    "\"\"",
    "[]",
    "{}",
    "[a, 1]",
    "[1, 2]",
    "x",
    "'it''s'",
    "2GiB",
    "32G",
    "4096",
    "VM",
    "LXC",
    "ACCEPT",
    "accept",
    "DROP",
    "in",
    "out",
    "pve1",
    "vmbr0",
    "local-lvm",
    "web-01",
    "Web_01",
    "proxops/v1alpha1",
    "virtio",
    "scsi0",
    "hostpci1",
    "0000:17:00.0",
    "10.0.0.1/24",
    "- a",
];

/// Replaces the value on line `i` (or the item) with `v`, or adds a key.
fn edit(text: &str, i: usize, v: &str, add: Option<&str>) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    if lines.is_empty() {
        return text.to_owned();
    }
    let at = i % lines.len();
    let line = &lines[at];
    let indent = line.len() - line.trim_start().len();
    match add {
        Some(key) => lines.insert(at, format!("{}{key}: {v}", " ".repeat(indent))),
        None => {
            lines[at] = match line.split_once(": ") {
                Some((k, _)) => format!("{k}: {v}"),
                None => match line.split_once("- ") {
                    Some((k, _)) => format!("{k}- {v}"),
                    None => format!("{line} {v}"),
                },
            };
        }
    }
    lines.join("\n") + "\n"
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn edited_manifests_read_the_same_from_the_block_tree(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec(
            (0usize..200, prop::sample::select(SCALARS), prop::option::weighted(0.2, prop::sample::select(vec!["node", "vmid", "memory", "size", "tags", "onboot", "x", "name", "labels", "policy-in", "enable"]))),
            1..4,
        ),
    ) {
        let mut text = which.get::<String>(manifests()).clone();
        for (i, v, add) in &edits {
            text = edit(&text, *i, v, *add);
        }
        prop_assert!(typed_readings_agree(&text).is_ok(), "{:?}", typed_readings_agree(&text));
    }
}

#[test]
fn the_edits_keep_most_manifests_readable() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = (
        any::<prop::sample::Index>(),
        0usize..200,
        prop::sample::select(SCALARS),
    );
    let (mut read, mut total) = (0, 0);
    for _ in 0..300 {
        let (which, i, v) = strategy.new_tree(&mut runner).unwrap().current();
        let text = edit(which.get::<String>(manifests()), i, v, None);
        total += 1;
        read += usize::from(typed_readings_agree(&text).unwrap() > 0);
    }
    assert!(
        read * 2 > total,
        "only {read} of {total} edited texts read as anything"
    );
}
