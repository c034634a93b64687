//! Everything generated from the owned-key tables and the manifest types
//! is checked in, and checked here (rust-analyzer's sourcegen pattern):
//! the JSON Schema files in docs/schema, the owned-key tables of
//! docs/resources/vm.md and lxc.md, and core/model/src/extra/owned.rs, the key
//! lists `spec.extra` refuses as owned. A stale file fails its test;
//! `UPDATE=1 cargo nextest run -p proxops-translate --test schema_gen` rewrites
//! them (no binary is built).
#![allow(clippy::unwrap_used, clippy::expect_used)]
// A test reads and (with UPDATE=1) writes the checked-in files; the
// library it checks does no I/O.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};

use proxops_model::names::Kind;
use proxops_translate::docgen;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn update() -> bool {
    ["UPDATE", "UPDATE_SCHEMA"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|v| v == "1"))
}

/// Compares (or, with `UPDATE=1`, writes) one generated file; the path
/// relative to the repository when stale.
fn check(relative: &str, want: &str) -> Option<String> {
    let path = repo_root().join(relative);
    if update() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, want).unwrap();
        return None;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    (have != want).then(|| relative.to_owned())
}

fn assert_fresh(stale: Vec<String>) {
    assert!(
        stale.is_empty(),
        "stale generated files (regenerate with UPDATE=1 cargo nextest run -p proxops-translate --test schema_gen): {stale:?}"
    );
}

/// The schema and the docs read `spec.extra`'s key lists from the
/// compiled core/model/src/extra/owned.rs: generated from a stale copy, they
/// would be stale too.
fn owned_keys_compiled() {
    let have = std::fs::read_to_string(repo_root().join("core/model/src/extra/owned.rs")).unwrap();
    assert!(
        have == docgen::owned_keys_source(),
        "core/model/src/extra/owned.rs is stale, so the schema and docs built from it would be: regenerate it, then run again (UPDATE=1 cargo nextest run -p proxops-translate --test schema_gen, twice)"
    );
}

#[test]
fn docs_schema_is_generated() {
    owned_keys_compiled();
    let stale = docgen::schema_files()
        .into_iter()
        .filter_map(|(name, text)| check(&format!("docs/schema/{name}"), &text))
        .collect();
    assert_fresh(stale);
}

#[test]
fn extra_owned_key_lists_are_generated() {
    assert_fresh(
        check(
            "core/model/src/extra/owned.rs",
            &docgen::owned_keys_source(),
        )
        .into_iter()
        .collect(),
    );
}

#[test]
fn a_splice_keeps_the_text_around_the_markers() {
    let doc = format!("a\n{}\nold\n{}\nb\n", docgen::BEGIN, docgen::END);
    assert_eq!(
        docgen::splice(&doc, "new\n").unwrap(),
        format!("a\n{}\nnew\n{}\nb\n", docgen::BEGIN, docgen::END)
    );
    assert_eq!(docgen::splice("no markers", "x"), None);
}

/// The owned-key tables of vm.md and lxc.md and the `spec.extra` key
/// lists of the docs (one test: one page is written once).
#[test]
fn docs_tables_and_key_lists_are_generated() {
    owned_keys_compiled();
    let mut stale = Vec::new();
    for (page, kind) in [
        ("docs/resources/vm.md", Some(Kind::VM)),
        ("docs/resources/lxc.md", Some(Kind::LXC)),
        ("docs/configuration.md", None),
    ] {
        let mut doc = std::fs::read_to_string(repo_root().join(page)).unwrap();
        if let Some(kind) = kind {
            doc = docgen::splice(&doc, &docgen::owned_keys_table(kind))
                .unwrap_or_else(|| panic!("{page} lacks the {} markers", docgen::BEGIN));
        }
        for (name, text) in docgen::key_lists() {
            if let Some(spliced) = docgen::splice_named(&doc, name, &text) {
                doc = spliced;
            }
        }
        stale.extend(check(page, &doc));
    }
    assert_fresh(stale);
}
