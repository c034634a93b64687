//! The layers, checked: the pure crates form a stack (model ← translate ←
//! core), and inside each crate a module imports only modules declared
//! before it. A plain text scan of the sources and manifests, in the
//! manner of no_io.rs; lines starting with `//` are comments and ignored,
//! and so is test code (everything from a file's first top-level
//! `#[cfg(test)]` on).

#![allow(clippy::unwrap_used)]
// The check reads the crates' own sources from disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "support/source.rs"]
mod source;
use source::rust_files;
#[path = "support/code.rs"]
mod production;
use production::production_code as code;

/// Each pure crate: its directory (relative to core/), its name in paths,
/// and the ProxOps crates it may depend on.
const CRATES: &[(&str, &str, &[&str])] = &[
    ("model", "proxops_model", &[]),
    ("translate", "proxops_translate", &["proxops_model"]),
    (".", "proxops_core", &["proxops_model", "proxops_translate"]),
];

/// Each crate's top-level modules, bottom-up: a module may name (`crate::m`)
/// only modules before it. A module's own submodules and `super::` are free.
/// A new module must be placed here.
const ORDER: &[(&str, &[&str])] = &[
    (
        "model",
        &[
            "hash",
            "time",
            "secret",
            "names",
            "units",
            "diag",
            "suggest",
            "yaml_emit",
            "yaml_block",
            "yaml_node",
            "yaml",
            "bounds",
            "wire",
            "calendar",
            "policy",
            "extra",
            "schema_attrs",
            "cluster",
            "firewall",
            "manifest",
            "live",
            "live_text",
            "host",
            "config",
            "outcome",
            "desired",
            "firewall_repo",
            "graph",
            "repo",
        ],
    ),
    (
        "translate",
        &[
            "change",
            "cluster",
            "firewall_options",
            "inverse",
            "drift",
            "adopt",
            "refuse",
            "schema",
            "docgen",
        ],
    ),
    (
        ".",
        &[
            "action",
            "rollout",
            "holds",
            "plan",
            "host",
            "pve_error",
            "exec",
            "hold",
            "target",
            "state",
            "cluster",
            "firewall_plan",
            "step",
            "admit",
            "planner",
            "cycle",
            "report",
            "saved",
            "render",
            "audit",
            "notify",
            "dashboard",
            "scaffold",
        ],
    ),
];

/// Imports that run back up, each `(crate dir, module, module it names)`:
/// none. The list is exact: a new back-import fails the test unless it is
/// listed here, and so does an entry no longer needed (delete it).
const KNOWN_BACK_IMPORTS: &[(&str, &str, &str)] = &[];

fn core_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The top-level modules of this crate that `code` names: `crate::m…` and
/// each top-level entry of `use crate::{a, b::c, …}`.
fn crate_modules(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        // `proxops_crate::` or `my_crate::` is another path, not `crate::`.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(leading_ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
            out.insert(leading_ident(&item));
        } else {
            out.insert(leading_ident(rest));
        }
    }
    out.remove("");
    out
}

/// The ProxOps crates `code` names in a path (`proxops_x::…`); metric
/// names such as `proxops_cycles_total` in strings are no paths.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("proxops_") {
        if code[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue;
        }
        let ident = leading_ident(&code[i..]);
        if code[i + ident.len()..].starts_with("::") {
            out.insert(ident);
        }
    }
    out
}

fn leading_ident(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level module a file under `src` belongs to.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (name != "lib").then_some(name)
}

fn order_of(dir: &str) -> &'static [&'static str] {
    ORDER.iter().find(|(d, _)| *d == dir).unwrap().1
}

#[test]
fn each_crate_depends_only_on_the_crates_below_it() {
    let mut bad = Vec::new();
    for (dir, name, allowed) in CRATES {
        let root = core_dir().join(dir);
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        let mut section = "";
        for line in manifest.lines() {
            let l = line.trim();
            if l.starts_with('[') {
                section = l;
                continue;
            }
            let dep = l.split(['=', ' ', '.']).next().unwrap_or("");
            if section == "[dependencies]" && dep.starts_with("proxops") {
                let as_path = dep.replace('-', "_");
                if !allowed.contains(&as_path.as_str()) {
                    bad.push(format!("{dir}/Cargo.toml: {name} depends on {dep}"));
                }
            }
        }
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        for f in &files {
            let code = code(&std::fs::read_to_string(f).unwrap());
            for word in crate_paths(&code) {
                if !allowed.contains(&word.as_str()) {
                    bad.push(format!("{}: {name} names {word}", f.display()));
                }
            }
        }
    }
    bad.sort();
    bad.dedup();
    assert!(
        bad.is_empty(),
        "a pure crate may use only the crates below it:\n{}",
        bad.join("\n")
    );
}

#[test]
fn modules_import_only_modules_declared_before_them() {
    let mut bad = Vec::new();
    let mut seen_exceptions = BTreeSet::new();
    for (dir, _, _) in CRATES {
        let order = order_of(dir);
        let src = core_dir().join(dir).join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let on_disk: BTreeSet<String> = files.iter().filter_map(|f| module_of(&src, f)).collect();
        for m in &on_disk {
            if !order.contains(&m.as_str()) {
                bad.push(format!(
                    "{dir}: module {m} is not placed in layers.rs' ORDER"
                ));
            }
        }
        for m in order.iter().filter(|m| !on_disk.contains(**m)) {
            bad.push(format!("{dir}: ORDER names {m}, which is not on disk"));
        }
        for f in &files {
            let Some(m) = module_of(&src, f) else {
                continue;
            };
            let Some(pos) = order.iter().position(|o| *o == m) else {
                continue;
            };
            let code = code(&std::fs::read_to_string(f).unwrap());
            for used in crate_modules(&code) {
                let Some(upos) = order.iter().position(|o| *o == used) else {
                    continue;
                };
                if upos <= pos {
                    continue;
                }
                if KNOWN_BACK_IMPORTS.contains(&(*dir, m.as_str(), used.as_str())) {
                    seen_exceptions.insert((dir.to_string(), m.clone(), used.clone()));
                    continue;
                }
                bad.push(format!(
                    "{}: {m} imports crate::{used}, declared after it",
                    f.strip_prefix(core_dir()).unwrap_or(f).display()
                ));
            }
        }
    }
    for (dir, m, used) in KNOWN_BACK_IMPORTS {
        if !seen_exceptions.contains(&(dir.to_string(), m.to_string(), used.to_string())) {
            bad.push(format!(
                "{dir}: {m} no longer imports {used}: remove it from KNOWN_BACK_IMPORTS"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "each module imports only the modules before it:\n{}",
        bad.join("\n")
    );
}

#[test]
fn every_pure_crate_carries_cores_io_lints() {
    let core = std::fs::read_to_string(core_dir().join("clippy.toml")).unwrap();
    for (dir, _, _) in CRATES {
        let own = std::fs::read_to_string(core_dir().join(dir).join("clippy.toml")).unwrap();
        assert_eq!(
            own, core,
            "{dir}/clippy.toml must be a copy of core/clippy.toml"
        );
    }
}

#[test]
fn the_scan_sees_back_imports_and_skips_comments_and_tests() {
    let found = crate_modules(&code(
        "use crate::names::Kind;\nuse crate::{diag::Diagnostic, yaml};\n\
         // crate::repo in a comment\nlet x = proxops_crate::y;\n\
         fn f() { crate::plan::Plan::new() }\n#[cfg(test)]\nmod tests { use crate::exec; }\n",
    ));
    let want: BTreeSet<String> = ["names", "diag", "yaml", "plan"].map(String::from).into();
    assert_eq!(found, want);
    let paths = crate_paths("use proxops_model::names;\nlet m = \"proxops_cycles_total\";");
    assert_eq!(paths, BTreeSet::from(["proxops_model".to_owned()]));
}
