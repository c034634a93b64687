//! No decision is taken from an error message's words in the pure crates'
//! production code: a message is for a person, and its wording may change
//! with a dependency or a PVE release. What a failure is travels as a type
//! (`PveError`, a document's own shape, a visitor's own error). A plain
//! text scan in the manner of no_io.rs; comments and test code (from a
//! file's first top-level `#[cfg(test)]` on) are not read.

#![allow(clippy::unwrap_used)]
// The check reads the crates' own sources from disk.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeSet;
use std::path::Path;

#[path = "support/source.rs"]
mod source;
use source::rust_files;
#[path = "support/code.rs"]
mod production;
use production::production_code;

/// A message's text tested for words.
const PATTERNS: &[&str] = &[
    "message.contains(",
    "message.starts_with(",
    "message.ends_with(",
    "message.to_lowercase().contains(",
    "msg.contains(",
    "msg.starts_with(",
    ".to_string().contains(",
    ".to_string().starts_with(",
    ".to_string().ends_with(",
];

/// The files allowed to read a message's words, each with why. The list
/// is exact: an entry no longer needed fails too (delete it).
const READERS: &[(&str, &str)] = &[(
    "src/step.rs",
    "PVE answers in text only: classify turns it into PveError, once",
)];

/// The pure crates' source directories, relative to core/.
const PURE: &[&str] = &["src", "model/src", "translate/src"];

fn hits(code: &str) -> Vec<(usize, &'static str)> {
    let mut out = Vec::new();
    for (i, line) in code.lines().enumerate() {
        for p in PATTERNS {
            if line.contains(p) {
                out.push((i + 1, *p));
            }
        }
    }
    out
}

#[test]
fn no_production_code_decides_on_a_messages_words() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut bad = Vec::new();
    let mut readers_seen = BTreeSet::new();
    for dir in PURE {
        let mut files = Vec::new();
        rust_files(&core.join(dir), &mut files);
        assert!(files.len() > 5, "expected the sources under core/{dir}");
        for f in &files {
            let rel = f.strip_prefix(core).unwrap().display().to_string();
            let code = production_code(&std::fs::read_to_string(f).unwrap());
            for (line, p) in hits(&code) {
                if READERS.iter().any(|(r, _)| *r == rel) {
                    readers_seen.insert(rel.clone());
                    continue;
                }
                bad.push(format!("core/{rel}:{line}: {p}"));
            }
        }
    }
    for (r, _) in READERS {
        if !readers_seen.contains(*r) {
            bad.push(format!("core/{r} reads no message: remove it from READERS"));
        }
    }
    assert!(
        bad.is_empty(),
        "a decision taken from a message's words (make it a type):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scan_sees_message_tests_and_skips_comments_and_tests() {
    let code = production_code(
        "if e.message.contains(\"did not match\") {}\n\
         // if message.starts_with(\"x\") in a comment\n\
         let k = err.to_string().contains(\"gone\");\n\
         let fine = name.starts_with(\"pc-\");\n\
         #[cfg(test)]\nmod tests { fn t() { assert!(msg.contains(\"x\")); } }\n",
    );
    let found: Vec<usize> = hits(&code).iter().map(|(l, _)| *l).collect();
    assert_eq!(found, [1, 3]);
}
