//! Reading the crates' own sources, for the tests that scan them
//! (`no_io.rs`, `layers.rs`, `no_message_decisions.rs`); `code.rs` keeps
//! the production part of one.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, in path order.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}
