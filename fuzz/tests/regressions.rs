#![allow(clippy::unwrap_used)]

//! Replays every saved input through its fuzz target: the crashes fuzzing
//! found (kept so they stay fixed) and the seed corpora. Runs in the normal
//! test suite; libFuzzer is not needed.

use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(kind: &str, target: &str) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(kind)
        .join(target);
    let files = inputs(&dir);
    for file in &files {
        let data = std::fs::read(file).unwrap();
        eprintln!("{target}: {}", file.display());
        assert!(proxops_fuzz::run(target, &data), "unknown target {target}");
    }
    files.len()
}

fn check(target: &str) {
    let seeds = replay("seeds", target);
    let regressions = replay("regressions", target);
    assert!(regressions > 0, "no regression input for {target}");
    assert!(seeds > 0, "no seed for {target}");
}

#[test]
fn manifest_inputs_never_panic() {
    check("manifest");
}

#[test]
fn propstr_inputs_never_panic() {
    check("propstr");
}

#[test]
fn pve_response_inputs_never_panic() {
    check("pve_response");
}

#[test]
fn sops_inputs_never_panic() {
    check("sops");
}

#[test]
fn every_target_has_an_entry_point_seeds_and_regressions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for t in proxops_fuzz::TARGETS {
        for p in [
            root.join("fuzz_targets").join(format!("{t}.rs")),
            root.join("seeds").join(t),
            root.join("regressions").join(t),
        ] {
            assert!(p.exists(), "{} is missing", p.display());
        }
    }
}

/// The SOPS seeds must reach value decryption and the MAC check, or the
/// fuzzer would only ever exercise the key unwrap.
#[test]
fn sops_seeds_decrypt_with_the_fuzzing_identity() {
    let ids = proxops_sops::Identities::from_text(proxops_fuzz::FUZZ_IDENTITY, "fuzz").unwrap();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/sops");
    let mut decrypted = 0;
    for file in inputs(&dir) {
        let text = std::fs::read_to_string(&file).unwrap();
        if let Ok(f) = proxops_sops::SopsFile::parse(&text, "seed") {
            f.decrypt(&ids).unwrap();
            decrypted += 1;
        }
    }
    assert!(decrypted >= 3, "only {decrypted} SOPS seeds decrypt");
}

/// The repository seeds must load without a diagnostic, or the fuzzer would
/// start from refusals only.
#[test]
fn whole_repo_manifest_seed_loads_cleanly() {
    let data =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/manifest/whole-repo"))
            .unwrap();
    let loaded = proxops_fuzz::load_repo(&data).unwrap();
    assert!(
        loaded.diagnostics().is_empty(),
        "{:?}",
        loaded.diagnostics()
    );
    assert_eq!(loaded.object_count(), 3);
}
