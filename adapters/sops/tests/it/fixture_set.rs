//! Every case of the repository's SOPS fixture set (`fixtures/sops`: files
//! the real sops 3.11.0 wrote, made by `tools/make-sops-fixtures.sh`),
//! read with the set's test key, decrypts to its `expected.json` or is
//! refused the way `cases.txt` says the real sops refuses it.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use crate::common;

use proxops_sops::{Identities, MacFailure, SecretDocument, SopsError, SopsFile};

/// `cases.txt`: (folder, outcome) per case, in the file's order.
fn cases() -> Vec<(String, String)> {
    read("cases.txt")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut words = l.split_whitespace();
            let name = words.next().unwrap().to_string();
            let outcome = words
                .next()
                .unwrap_or_else(|| panic!("cases.txt: no outcome for {name}"));
            (name, outcome.to_string())
        })
        .collect()
}

/// A file of the set, by its path inside `fixtures/sops`.
fn read(path: &str) -> String {
    let full = common::fixtures_dir().join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The set's test key (`test-key.txt`, public, protects nothing).
fn test_key() -> Identities {
    Identities::from_text(&read("test-key.txt"), "test-key.txt").unwrap()
}

/// A case's `secrets.sops.yaml` and what reading it with the test key
/// gives; `label` names the file in errors.
fn decrypt_case(case: &str, label: &str) -> (String, Result<SecretDocument, SopsError>) {
    let text = read(&format!("{case}/secrets.sops.yaml"));
    let result = SopsFile::parse(&text, label).and_then(|f| f.decrypt(&test_key()));
    (text, result)
}

#[test]
fn every_fixture_decrypts_or_fails_as_its_case_says() {
    let cases = cases();
    let folders: BTreeSet<String> = std::fs::read_dir(common::fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        cases
            .iter()
            .map(|(n, _)| n.clone())
            .collect::<BTreeSet<_>>(),
        folders,
        "cases.txt lists every case folder and no other"
    );
    assert_eq!(
        cases
            .iter()
            .map(|(_, o)| o.as_str())
            .collect::<BTreeSet<_>>(),
        BTreeSet::from([
            "mac-mismatch",
            "mac-undecryptable",
            "no-matching-identity",
            "ok",
            "value-decrypt"
        ]),
        "every outcome has a case"
    );
    for (name, outcome) in &cases {
        let (_, result) = decrypt_case(name, name);
        match outcome.as_str() {
            "ok" => {
                let doc = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                let expected: serde_json::Value =
                    serde_json::from_str(&read(&format!("{name}/expected.json"))).unwrap();
                common::assert_matches_json(&doc, &expected);
                assert_debug_hides_every_value(&doc, name);
            }
            "mac-mismatch" | "mac-undecryptable" => {
                let want = if outcome == "mac-mismatch" {
                    MacFailure::Mismatch
                } else {
                    MacFailure::Undecryptable
                };
                let err = result.expect_err(name);
                assert!(
                    matches!(&err, SopsError::MacMismatch { kind, .. } if *kind == want),
                    "{name}: {err}"
                );
            }
            class => {
                let err = result.expect_err(name);
                assert_eq!(err.class(), class, "{name}: {err}");
            }
        }
    }
}

#[test]
fn tampered_value_is_refused_as_a_mac_mismatch_not_an_undecryptable_mac() {
    // An older ciphertext of the same value under the same data key passes
    // AES-GCM: only the MAC tells.
    let err = decrypt_case("08-rolled-back-value", "08").1.unwrap_err();
    assert!(matches!(
        err,
        SopsError::MacMismatch {
            kind: MacFailure::Mismatch,
            ..
        }
    ));
}

#[test]
fn tampered_ciphertext_error_names_the_key_path() {
    let err = decrypt_case("10-tampered-ciphertext", "secrets.sops.yaml")
        .1
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("secrets.pve-token"), "{msg}");
    assert!(msg.contains("secrets.sops.yaml"), "{msg}");
}

/// No decrypted value (of 3 characters or more, so short numbers like `2`
/// do not match structure text) shows in `Debug` output.
fn assert_debug_hides_every_value(doc: &SecretDocument, name: &str) {
    // Keys are not secret and may contain a value's text; nodes' Debug
    // (which never prints keys) is what must stay redacted.
    let nodes: Vec<_> = doc.entries().iter().map(|(_, n)| n).collect();
    let debug = format!("{doc:?} {nodes:?}");
    let mut checked = 0;
    for (path, text) in doc.leaves() {
        if text.len() >= 3 {
            checked += 1;
            assert!(
                !debug.contains(text.as_str()),
                "{name}: Debug output shows the value at {path}"
            );
        }
    }
    assert!(checked > 0 || doc.entries().is_empty());
    assert!(debug.contains("<redacted>"));
}

#[test]
fn errors_never_show_a_plaintext_value() {
    // A fixture decrypts with the right key; the same file with the MAC
    // broken must fail without echoing any of the values just seen.
    let (text, result) = decrypt_case("01-credentials", "01");
    let doc = result.unwrap();
    let lm = text.lines().find(|l| l.contains("lastmodified:")).unwrap();
    let broken = text.replace(lm, "    lastmodified: \"2000-01-01T00:00:00Z\"");
    let err = SopsFile::parse(&broken, "01")
        .unwrap()
        .decrypt(&test_key())
        .unwrap_err();
    let shown = format!("{err} {err:?}");
    for (path, value) in doc.leaves() {
        if value.len() >= 3 {
            assert!(
                !shown.contains(value.as_str()),
                "error shows the value at {path}"
            );
        }
    }
}
