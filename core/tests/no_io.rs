//! The Architecture Invariant, checked: the pure crates do no I/O. No file
//! under core/src, core/model/src or core/translate/src may name the filesystem, the network, the environment,
//! processes, threads or the clock. (A plain text scan; lines starting
//! with `//` are comments and ignored.)

#![allow(clippy::unwrap_used)]
// The check reads core's own sources from disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;

#[path = "support/source.rs"]
mod source;
use source::rust_files;

const FORBIDDEN: &[&str] = &[
    "std::fs",
    "std::net",
    "std::env",
    "std::process",
    "SystemTime",
    "Instant::now",
    "std::thread",
];

/// The pure crates' source directories, relative to core/.
const PURE: &[&str] = &["src", "model/src", "translate/src"];

#[test]
fn core_sources_name_no_io_clock_or_process_api() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut hits = Vec::new();
    for dir in PURE {
        let src = core.join(dir);
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        assert!(
            files.len() > 5,
            "expected the crate's sources under {}",
            src.display()
        );
        for f in &files {
            let text = std::fs::read_to_string(f).unwrap();
            for (i, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for word in FORBIDDEN {
                    if line.contains(word) {
                        let rel = f.strip_prefix(core).unwrap_or(f);
                        hits.push(format!(
                            "core/{}:{}: {word}: {}",
                            rel.display(),
                            i + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "core must do no I/O (time and bytes are arguments); found:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_scan_sees_a_forbidden_name_and_skips_comments() {
    let flagged = |line: &str| {
        !line.trim_start().starts_with("//") && FORBIDDEN.iter().any(|w| line.contains(w))
    };
    assert!(flagged("use std::fs::read;"));
    assert!(flagged("    let t = std::time::Instant::now();"));
    assert!(!flagged("    // std::fs is the adapters' business"));
    assert!(!flagged("use core::net::IpAddr;"));
}
