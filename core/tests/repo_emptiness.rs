//! Emptiness is never silent in a repository: a listed file without a
//! document is an error naming it; a manifest file no composition lists is
//! a warning naming it, whatever it holds.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proxops_core::config::Overrides;
use proxops_core::repo::{self, Loaded, RepoInput};

const VM: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\nspec:\n  node: pve1\n  vmid: 100\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n";

fn load(extra: &[(&str, &str)]) -> Loaded {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/t/config.yaml".into(),
        b"pve:\n  clusters:\n    t:\n      base-url: https://pve.example.org:8006\n".to_vec(),
    );
    files.insert(
        "clusters/t/resources.yaml".into(),
        b"resources:\n  - ../../vm/t/web.yaml\n".to_vec(),
    );
    files.insert("vm/t/web.yaml".into(), VM.as_bytes().to_vec());
    for (path, text) in extra {
        files.insert((*path).into(), text.as_bytes().to_vec());
    }
    let dirs: BTreeSet<String> = ["t".to_owned()].into();
    repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    )
    .expect("configuration loads")
}

fn errors(l: &Loaded) -> Vec<String> {
    l.diagnostics().iter().map(|d| d.to_string()).collect()
}

#[test]
fn a_listed_file_without_a_document_is_an_error_naming_it() {
    for empty in ["", "\n", "# gone\n", "---\n", "# a\n---\n# b\n---\n", "~\n"] {
        let l = load(&[("vm/t/web.yaml", empty)]);
        let errs = errors(&l);
        assert_eq!(errs.len(), 1, "{empty:?}: {errs:?}");
        assert!(
            errs[0].starts_with("vm/t/web.yaml: the file holds no manifest"),
            "{empty:?}: {errs:?}"
        );
    }
}

#[test]
fn an_empty_document_beside_a_manifest_is_not_an_error() {
    let l = load(&[("vm/t/web.yaml", &format!("---\n{VM}---\n"))]);
    assert!(errors(&l).is_empty(), "{:?}", errors(&l));
    assert_eq!(l.object_count(), 1);
}

#[test]
fn unlisted_manifest_files_are_warnings_in_path_order_and_never_parsed() {
    let l = load(&[
        ("vm/base/zz.yml", "kind: [broken"),
        ("lxc/t/deep/nested/ct.yaml", ""),
        ("iso/base/notes.md", "not a manifest"),
        ("docs/vm.yaml", "outside every kind directory"),
    ]);
    assert!(errors(&l).is_empty(), "{:?}", errors(&l));
    let files: Vec<&str> = l.warnings.iter().map(|w| w.file.as_str()).collect();
    assert_eq!(files, ["lxc/t/deep/nested/ct.yaml", "vm/base/zz.yml"]);
    assert!(l.warnings.iter().all(|w| {
        w.message
            .contains("not listed in any clusters/<cluster>/resources.yaml")
    }));
}

#[test]
fn no_warning_is_guessed_when_a_composition_cannot_be_read() {
    let l = load(&[
        ("clusters/t/resources.yaml", "resources: {not: a list}\n"),
        ("vm/base/draft.yaml", "kind: VM\n"),
    ]);
    assert!(!errors(&l).is_empty());
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
}
