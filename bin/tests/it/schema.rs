//! The manifests' JSON Schema and `proxops explain`, against the outside
//! world: `proxops schema` prints the committed docs/schema/*.json (which
//! `UPDATE=1 cargo nextest run -p proxops-translate --test schema_gen`
//! regenerates without building the binary), a real JSON Schema
//! validator (check-jsonschema, from $PROXOPS_TOOLS_DIR, put there by
//! tools/install-test-tools.sh) must accept every demo manifest and refuse
//! the field-level mistakes among the invalid fixtures, and every field
//! docs/resources/*.md documents must be one `explain` knows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KINDS: &[&str] = &proxops_core::names::Kind::NAMES;

/// The kind directories manifests live under.
const KIND_DIRS: &[&str] = &proxops_core::names::Kind::DIRS;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn proxops(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proxops"))
        .args(args)
        .output()
        .unwrap()
}

/// The committed file of `kind` (`None`: the combined schema).
fn schema_file(kind: Option<&str>) -> PathBuf {
    let name = kind.map_or("proxops".to_owned(), str::to_ascii_lowercase);
    repo_root().join("docs/schema").join(format!("{name}.json"))
}

/// `proxops schema` prints what core generates into docs/schema (which
/// core/translate/tests/schema_gen.rs keeps fresh).
#[test]
fn proxops_schema_prints_the_committed_schemas() {
    for kind in KINDS.iter().map(|k| Some(*k)).chain([None]) {
        let out = proxops(&["schema"].into_iter().chain(kind).collect::<Vec<_>>());
        assert!(out.status.success(), "proxops schema {kind:?}: {out:?}");
        assert_eq!(
            std::fs::read(schema_file(kind)).unwrap(),
            out.stdout,
            "proxops schema {kind:?}"
        );
    }
}

#[test]
fn an_unknown_kind_is_an_input_error() {
    let out = proxops(&["schema", "Bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown kind \"Bogus\""));
}

// ------------------------------------------------------------ explain

fn explain(path: &str) -> String {
    let out = proxops(&["explain", path]);
    assert!(out.status.success(), "explain {path}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn explain_vm_memory() {
    insta::assert_snapshot!(explain("vm.spec.memory"));
}

#[test]
fn explain_lxc_root_size() {
    insta::assert_snapshot!(explain("lxc.spec.root.size"));
}

#[test]
fn explain_an_unknown_field_names_the_nearest_path_and_exits_2() {
    let out = proxops(&["explain", "vm.spec.cpu.corse"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean spec.cpu.cores?"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn explain_recursive_lists_every_field_below() {
    let out = proxops(&["explain", "--recursive", "lxc.spec.mount-points"]);
    assert!(out.status.success(), "{out:?}");
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
}

/// Every field a docs/resources table lists, as `explain` paths. A cell
/// names one field in full (`spec.memory`, `networks[].ip`, `storage` in a
/// section about one list) and may add siblings (`` `root.storage`,
/// `root.size` ``, `` … `read-only` / `backup` ``).
fn documented_fields(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in doc.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            section = h.trim().to_owned();
            continue;
        }
        let Some(cell) = line.strip_prefix("| `") else {
            continue;
        };
        let cell = cell.split(" |").next().unwrap_or_default();
        let quoted = format!("`{cell}");
        let names: Vec<&str> = quoted.split('`').skip(1).step_by(2).collect();
        let Some((first, siblings)) = names.split_first() else {
            continue;
        };
        let full = |name: &str| {
            let name = name.replace("[]", "").replace(".<key>", "");
            match () {
                _ if name.starts_with("spec.") || name.starts_with("metadata.") => name,
                _ if section == "Disks" && !name.contains('.') => format!("spec.disks.{name}"),
                _ if section == "Network" && !name.contains('.') => {
                    format!("spec.networks.{name}")
                }
                _ => format!("spec.{name}"),
            }
        };
        let first = full(first);
        let parent = first
            .rsplit_once('.')
            .map(|(p, _)| p.to_owned())
            .unwrap_or_default();
        out.push(first);
        for s in siblings {
            // `gw` after `networks[].ip` and `.size` after
            // `mount-points[].storage` are siblings; `root.size` after
            // `root.storage` is written in full.
            if let Some(rel) = s.strip_prefix('.') {
                out.push(format!("{parent}.{rel}"));
            } else if s.contains('.') {
                out.push(full(s));
            } else {
                out.push(format!("{parent}.{s}"));
            }
        }
    }
    out
}

#[test]
fn every_documented_field_is_in_the_schema() {
    let mut missing = Vec::new();
    let mut seen = 0;
    for (doc, kind) in [
        ("vm", "vm"),
        ("lxc", "lxc"),
        ("iso", "iso"),
        ("cttemplate", "cttemplate"),
        ("diskimage", "diskimage"),
        ("pool", "pool"),
        ("backupjob", "backupjob"),
        ("haresource", "haresource"),
        ("harule", "harule"),
        ("replicationjob", "replicationjob"),
        ("firewallalias", "firewallalias"),
        ("firewallipset", "firewallipset"),
        ("securitygroup", "securitygroup"),
        ("clusterfirewall", "clusterfirewall"),
    ] {
        let text =
            std::fs::read_to_string(repo_root().join(format!("docs/resources/{doc}.md"))).unwrap();
        for field in documented_fields(&text) {
            // An annotation key is a map key: `explain` takes the rest.
            let field = field.replace('"', "");
            seen += 1;
            let out = proxops(&["explain", &format!("{kind}.{field}")]);
            if !out.status.success() {
                missing.push(format!(
                    "{doc}.md: {field}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    assert!(seen > 120, "only {seen} documented fields found");
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

// ------------------------------------------------- a real validator

/// `check-jsonschema`: `$PROXOPS_TOOLS_DIR/bin`, else the workspace's
/// `.tools/bin`.
fn check_jsonschema() -> PathBuf {
    let tools = std::env::var_os("PROXOPS_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".tools"));
    let bin = tools.join("bin/check-jsonschema");
    assert!(
        bin.exists(),
        "{} is missing: run tools/install-test-tools.sh (it installs the PyPI package check-jsonschema into $PROXOPS_TOOLS_DIR/venv)",
        bin.display()
    );
    bin
}

/// Every manifest file under the kind directories of `repo`.
fn manifest_files(repo: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in KIND_DIRS {
        let Ok(subdirs) = std::fs::read_dir(repo.join(dir)) else {
            continue;
        };
        for sub in subdirs.flatten() {
            for f in std::fs::read_dir(sub.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let p = f.path();
                if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
                    out.push(p);
                }
            }
        }
    }
    out.sort();
    out
}

/// Writes each document of each file as JSON into `dir`, read by the
/// loader's own YAML reader (so the validator sees the values ProxOps
/// sees); a file the reader refuses is returned as an error.
fn as_json(files: &[PathBuf], dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| e.to_string())?;
        let docs = proxops_core::yaml::document_values(&text)
            .map_err(|e| format!("{}: {}", f.display(), e.message))?;
        for (i, doc) in docs.iter().enumerate().filter(|(_, d)| !d.is_null()) {
            let json = serde_json::to_value(doc).map_err(|e| e.to_string())?;
            let name = format!(
                "{}-{}-{i}.json",
                out.len(),
                f.file_stem().unwrap().to_string_lossy()
            );
            let path = dir.join(name);
            std::fs::write(&path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
            out.push(path);
        }
    }
    Ok(out)
}

/// check-jsonschema's verdict per instance file: the error messages of the
/// ones that failed (every instance in one run).
fn validate(schema: &Path, instances: &[PathBuf]) -> BTreeMap<PathBuf, Vec<String>> {
    if instances.is_empty() {
        return BTreeMap::new();
    }
    let out = Command::new(check_jsonschema())
        .arg("--schemafile")
        .arg(schema)
        .args(["--output-format", "json"])
        .args(instances)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("check-jsonschema said {e}: {out:?}"));
    assert!(
        report["parse_errors"].as_array().is_none_or(Vec::is_empty),
        "{report}"
    );
    let mut failed: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for e in report["errors"].as_array().into_iter().flatten() {
        failed
            .entry(PathBuf::from(e["filename"].as_str().unwrap()))
            .or_default()
            .push(format!("{}: {}", e["path"], e["message"]));
    }
    assert_eq!(
        out.status.success(),
        failed.is_empty(),
        "exit status and report disagree: {out:?}"
    );
    failed
}

#[test]
fn the_schemas_are_valid_draft_2020_12() {
    let mut files: Vec<PathBuf> = KINDS.iter().map(|k| schema_file(Some(k))).collect();
    files.push(schema_file(None));
    let out = Command::new(check_jsonschema())
        .arg("--check-metaschema")
        .args(&files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn every_demo_manifest_is_valid_against_the_schemas() {
    let tmp = tempfile::tempdir().unwrap();
    let files = manifest_files(&repo_root().join("fixtures/repos/demo"));
    assert!(files.len() >= 10, "{files:?}");
    let instances = as_json(&files, tmp.path()).unwrap();
    let failed = validate(&schema_file(None), &instances);
    assert!(failed.is_empty(), "{failed:#?}");
    // And each against its own kind's schema.
    for kind in KINDS {
        let own: Vec<PathBuf> = instances
            .iter()
            .filter(|p| {
                let v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
                v["kind"] == *kind
            })
            .cloned()
            .collect();
        let failed = validate(&schema_file(Some(kind)), &own);
        assert!(failed.is_empty(), "{kind}: {failed:#?}");
    }
}

/// The invalid manifest fixtures the schema does not refuse, and why: a
/// schema sees one document, so rules across files, rules between fields of
/// one document and the cluster's configuration are the loader's alone.
const SCHEMA_CANNOT_CATCH: &[(&str, &str)] = &[
    (
        "34-manifest-kind-wrong-dir",
        "the file's directory is not in the document",
    ),
    (
        "38-manifest-memory-not-whole-mib",
        "\"2GB\" is a valid size; whole MiB is arithmetic on it",
    ),
    (
        "40-manifest-duplicate-vmid-vm-lxc",
        "a collision across files",
    ),
    ("41-manifest-duplicate-ref", "a collision across files"),
    (
        "42-manifest-node-outside-allowlist",
        "the cluster's node list is configuration",
    ),
    (
        "43-manifest-unknown-reference",
        "a reference to another file",
    ),
    (
        "44-manifest-reference-wrong-kind",
        "a reference to another file",
    ),
    ("45-manifest-dependency-cycle", "a cycle across files"),
    ("46-manifest-clone-with-disks", "a rule between two fields"),
    (
        "48-manifest-started-templatevm",
        "TemplateVM shares the VM spec; state: started is valid there",
    ),
    (
        "49-manifest-ssh-keys-star-mixed",
        "a rule between list items",
    ),
    ("50-manifest-ssh-keys-and-refs", "a rule between two fields"),
    (
        "51-manifest-bind-mount-system-root",
        "an absolute path, refused by a list of host paths",
    ),
    ("52-manifest-ssd-on-virtio", "a rule between two fields"),
    (
        "53-manifest-duplicate-disk-interface",
        "uniqueness of a field across list items",
    ),
    (
        "57-manifest-checksum-length",
        "the length depends on the algorithm field",
    ),
    (
        "71-manifest-bind-mount-slot-collision",
        "uniqueness across two lists",
    ),
    (
        "74-manifest-empty-listed-file",
        "the file holds no document to validate",
    ),
    (
        "81-manifest-extra-host-level-key",
        "the cluster's allow-extra-keys may let it through",
    ),
    (
        "82-manifest-extra-never-echoed",
        "the cluster's allow-extra-keys may let it through",
    ),
    (
        "83-manifest-extra-raw-lxc-key",
        "the cluster's allow-extra-keys may let it through",
    ),
    (
        "84-manifest-extra-device-passthrough",
        "the cluster's allow-extra-keys may let it through",
    ),
    (
        "88-manifest-shutdown-timeout-too-short",
        "a valid duration; \"at least 1s\" is arithmetic on it",
    ),
    (
        "96-manifest-ssh-key-refs-without-secrets-file",
        "whether a secrets-file exists is the cluster's configuration",
    ),
];

/// Fixtures the loader's YAML reader refuses before any schema applies.
const NOT_YAML: &[&str] = &["64-manifest-yaml-syntax-error", "72-manifest-duplicate-key"];

#[test]
fn field_level_mistakes_among_the_invalid_fixtures_fail_the_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let root = repo_root().join("fixtures/repos/invalid");
    let mut fixtures: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.split('-').nth(1) == Some("manifest"))
        .collect();
    fixtures.sort();
    let mut instances: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut unreadable = BTreeSet::new();
    for (i, name) in fixtures.iter().enumerate() {
        let dir = tmp.path().join(i.to_string());
        std::fs::create_dir(&dir).unwrap();
        match as_json(&manifest_files(&root.join(name)), &dir) {
            Ok(files) => instances.extend(files.into_iter().map(|f| (f, name.clone()))),
            Err(_) => {
                unreadable.insert(name.clone());
            }
        }
    }
    let files: Vec<PathBuf> = instances.keys().cloned().collect();
    let failed = validate(&repo_root().join("docs/schema/proxops.json"), &files);
    let refused: BTreeSet<&String> = failed
        .keys()
        .map(|f| {
            instances
                .get(f)
                .or_else(|| {
                    instances
                        .iter()
                        .find(|(p, _)| f.ends_with(p.strip_prefix(tmp.path()).unwrap()))
                        .map(|(_, n)| n)
                })
                .unwrap()
        })
        .collect();
    let cannot: BTreeSet<&str> = SCHEMA_CANNOT_CATCH.iter().map(|(n, _)| *n).collect();
    let mut wrong = Vec::new();
    for name in &fixtures {
        let expect_unreadable = NOT_YAML.contains(&name.as_str());
        if expect_unreadable != unreadable.contains(name) {
            wrong.push(format!(
                "{name}: YAML reader refused it: {}",
                !expect_unreadable
            ));
            continue;
        }
        if expect_unreadable {
            continue;
        }
        let expect_refused = !cannot.contains(name.as_str());
        if expect_refused != refused.contains(name) {
            wrong.push(format!(
                "{name}: schema refused it: {}, expected {expect_refused}",
                refused.contains(name)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Only the broken manifests fail: the fixtures' good files stay valid.
    for (file, errors) in &failed {
        let name = &instances[file];
        assert!(!cannot.contains(name.as_str()), "{name}: {errors:?}");
    }
}
