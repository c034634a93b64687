//! Every case of the shared fixture set (files made by the real sops 3.11.0)
//! decrypts to its `expected.json` or fails with its expected error class.
#![allow(clippy::unwrap_used)]

mod common;

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
