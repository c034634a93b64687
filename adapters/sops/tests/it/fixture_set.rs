//! Every case of the shared fixture set (files made by the real sops 3.11.0)
//! decrypts to its `expected.json` or fails with its expected error class.
#![allow(clippy::unwrap_used)]

use crate::common;

use proxops_sops::{Identities, SopsFile};

/// The error class a negative case expects, read from its `case.md`.
fn expected_class(case_md: &str) -> Option<&'static str> {
    if case_md.contains("expected: ok") {
        None
    } else if case_md.contains("no matching identity") {
        Some("no-matching-identity")
    } else if case_md.contains("value decryption failure") {
        Some("value-decrypt")
    } else if case_md.contains("MAC") {
        Some("mac-mismatch")
    } else {
        panic!("case.md states no outcome this test knows: {case_md}")
    }
}

#[test]
fn every_shared_fixture_decrypts_or_fails_as_its_case_says() {
    let dir = common::fixtures_dir();
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("shared fixtures not found at {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 10, "expected at least 10 fixture cases");
    for case in cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let case_md = std::fs::read_to_string(case.join("case.md")).unwrap();
        let key = std::fs::read_to_string(case.join("key.txt")).unwrap();
        let text = std::fs::read_to_string(case.join("secrets.sops.yaml")).unwrap();
        let ids = Identities::from_text(&key, "key.txt").unwrap();
        let result = SopsFile::parse(&text, &name).and_then(|f| f.decrypt(&ids));
        match expected_class(&case_md) {
            None => {
                let doc = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                let expected: serde_json::Value = serde_json::from_str(
                    &std::fs::read_to_string(case.join("expected.json")).unwrap(),
                )
                .unwrap();
                common::assert_matches_json(&doc, &expected);
                assert_debug_hides_every_value(&doc, &name);
            }
            Some(class) => {
                let err = result.expect_err(&name);
                assert_eq!(err.class(), class, "{name}: {err}");
            }
        }
    }
}

#[test]
fn tampered_value_is_refused_as_a_mac_mismatch_not_an_undecryptable_mac() {
    let case = common::fixtures_dir().join("08-tampered-value");
    let ids = Identities::from_text(
        &std::fs::read_to_string(case.join("key.txt")).unwrap(),
        "key.txt",
    )
    .unwrap();
    let text = std::fs::read_to_string(case.join("secrets.sops.yaml")).unwrap();
    let err = SopsFile::parse(&text, "08")
        .unwrap()
        .decrypt(&ids)
        .unwrap_err();
    assert!(matches!(
        err,
        proxops_sops::SopsError::MacMismatch {
            kind: proxops_sops::MacFailure::Mismatch,
            ..
        }
    ));
}

#[test]
fn tampered_ciphertext_error_names_the_key_path() {
    let case = common::fixtures_dir().join("10-tampered-ciphertext");
    let ids = Identities::from_text(
        &std::fs::read_to_string(case.join("key.txt")).unwrap(),
        "key.txt",
    )
    .unwrap();
    let text = std::fs::read_to_string(case.join("secrets.sops.yaml")).unwrap();
    let err = SopsFile::parse(&text, "secrets.sops.yaml")
        .unwrap()
        .decrypt(&ids)
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("pve.token_secret"), "{msg}");
    assert!(msg.contains("secrets.sops.yaml"), "{msg}");
}

/// No decrypted value (of 3 characters or more, so short numbers like `2`
/// do not match structure text) shows in `Debug` output.
fn assert_debug_hides_every_value(doc: &proxops_sops::SecretDocument, name: &str) {
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
    let case = common::fixtures_dir().join("01-proxops-credentials");
    let ids = Identities::from_text(
        &std::fs::read_to_string(case.join("key.txt")).unwrap(),
        "key.txt",
    )
    .unwrap();
    let text = std::fs::read_to_string(case.join("secrets.sops.yaml")).unwrap();
    let doc = SopsFile::parse(&text, "01").unwrap().decrypt(&ids).unwrap();
    let lm = text.lines().find(|l| l.contains("lastmodified:")).unwrap();
    let broken = text.replace(lm, "    lastmodified: \"2000-01-01T00:00:00Z\"");
    let err = SopsFile::parse(&broken, "01")
        .unwrap()
        .decrypt(&ids)
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
