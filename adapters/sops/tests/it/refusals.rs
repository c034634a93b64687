//! Documents this reader refuses, each with its own error class and a
//! message that names the file (and the line or key path where there is one).
#![allow(clippy::unwrap_used)]

use crate::common;

use proxops_sops::{Identities, SopsFile};

const META: &str =
    "sops:\n    age: []\n    lastmodified: \"2026-11-29T15:40:23Z\"\n    mac: \"\"\n";

fn parse_class(text: &str) -> (String, String) {
    let err = SopsFile::parse(text, "secrets.sops.yaml").unwrap_err();
    (err.class().to_string(), err.to_string())
}

#[test]
fn invalid_yaml_is_malformed_with_its_line() {
    let (class, msg) = parse_class("a: b\nc: [unclosed\nd: e\n");
    assert_eq!(class, "malformed");
    assert!(msg.starts_with("secrets.sops.yaml line "), "{msg}");
}

#[test]
fn duplicate_and_non_string_keys_are_malformed() {
    assert_eq!(parse_class(&format!("a: 1\na: 2\n{META}")).0, "malformed");
    assert_eq!(parse_class(&format!("8006: x\n{META}")).0, "malformed");
}

#[test]
fn more_than_one_document_is_unsupported() {
    assert_eq!(parse_class(&format!("{META}---\na: b\n")).0, "unsupported");
}

#[test]
fn aliases_are_unsupported() {
    assert_eq!(
        parse_class(&format!("a: &x b\nc: *x\n{META}")).0,
        "unsupported"
    );
}

#[test]
fn two_crypt_rules_are_malformed_and_comment_rules_unsupported() {
    let two = format!("a: b\n{META}    encrypted_regex: x\n    unencrypted_suffix: _u\n");
    assert_eq!(parse_class(&two).0, "malformed");
    let comment = format!("a: b\n{META}    encrypted_comment_regex: x\n");
    assert_eq!(parse_class(&comment).0, "unsupported");
}

#[test]
fn a_list_root_is_malformed_and_a_scalar_or_empty_file_is_not_sops() {
    assert_eq!(parse_class("- a\n- b\n").0, "malformed");
    assert_eq!(parse_class("just text\n").0, "not-sops");
    assert_eq!(parse_class("").0, "not-sops");
    assert_eq!(parse_class("a: b\nnested:\n    sops: {}\n").0, "not-sops");
}

#[test]
fn shamir_key_groups_made_by_sops_are_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    let (_, r1) = common::keygen(dir.path(), "one");
    let (_, r2) = common::keygen(dir.path(), "two");
    let config = format!(
        "creation_rules:\n  - shamir_threshold: 2\n    key_groups:\n      - age: [{r1}]\n      - age: [{r2}]\n"
    );
    let enc = common::sops_encrypt(dir.path(), "a: SECRETVAL\n", &[], &[], Some(&config));
    assert!(enc.contains("key_groups"));
    let (class, msg) = parse_class(&enc);
    assert_eq!(class, "unsupported");
    assert!(msg.contains("Shamir"), "{msg}");
}

#[test]
fn a_hand_edited_plaintext_value_where_ciphertext_belongs_is_a_value_error() {
    let dir = tempfile::tempdir().unwrap();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let enc = common::sops_encrypt(
        dir.path(),
        "pve:\n    token: SECRETVAL\n",
        &[&recipient],
        &[],
        None,
    );
    let line = enc.lines().find(|l| l.contains("token: ENC[")).unwrap();
    let edited = enc.replace(line, "    token: hand-edited-SECRETVAL");
    let ids = Identities::from_text(&std::fs::read_to_string(&key).unwrap(), "key").unwrap();
    let err = SopsFile::parse(&edited, "s")
        .unwrap()
        .decrypt(&ids)
        .unwrap_err();
    assert_eq!(err.class(), "value-decrypt");
    let msg = err.to_string();
    assert!(
        msg.contains("pve.token") && !msg.contains("SECRETVAL"),
        "{msg}"
    );
}

#[test]
fn an_identity_line_that_is_not_a_key_is_refused_without_echoing_it() {
    let err = Identities::from_text(
        "# comment\nAGE-SECRET-KEY-1NOTAREALKEYSECRETVAL\n",
        "SOPS_AGE_KEY",
    )
    .unwrap_err();
    assert_eq!(err.class(), "invalid-identity");
    let msg = err.to_string();
    assert!(
        msg.contains("line 2") && !msg.contains("SECRETVAL"),
        "{msg}"
    );
}

#[test]
fn nesting_past_the_limit_is_malformed_before_the_tree_is_built() {
    // Building the tree recurses once per level; yaml-rust2 bounds only
    // flow nesting (at 255), not block nesting.
    let flow = format!("a: {}1{}\n{META}", "[".repeat(40), "]".repeat(40));
    let mut block = String::new();
    for d in 0..500 {
        block.push_str(&format!("{}k{d}:\n", " ".repeat(d)));
    }
    block.push_str(META);
    for deep in [flow, block] {
        let (class, msg) = parse_class(&deep);
        assert_eq!(class, "malformed");
        assert!(msg.contains("deeper than 32 levels"), "{msg}");
    }
    let at_limit = format!("a: {}1{}\n{META}", "[".repeat(30), "]".repeat(30));
    let at_limit = SopsFile::parse(&at_limit, "secrets.sops.yaml").err();
    assert!(
        at_limit
            .as_ref()
            .is_none_or(|e| !e.to_string().contains("deeper")),
        "{:?}",
        at_limit.map(|e| e.to_string())
    );
}

#[test]
fn a_file_over_the_size_cap_is_refused_naming_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("secrets.sops.yaml");
    let mut text = format!("a: b\n{META}");
    while text.len() <= proxops_sops::MAX_FILE_BYTES {
        text.push_str("# padding padding padding padding padding padding\n");
    }
    std::fs::write(&path, text).unwrap();
    let err = proxops_sops::decrypt_file(&path, &proxops_sops::IdentitySources::default())
        .err()
        .unwrap();
    assert_eq!(err.class(), "malformed");
    assert!(
        err.to_string().ends_with(
            "the file is larger than the 1 MiB size cap for a SOPS credentials file (1048576 bytes)"
        ),
        "{err}"
    );
}
