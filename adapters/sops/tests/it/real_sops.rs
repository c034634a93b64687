//! Documents made at test time by the real sops 3.11.0 with keys made by the
//! real age-keygen: our decryption must agree with `sops decrypt` value for
//! value, and refuse what sops refuses, with the right error class. Every
//! secret value contains the marker `SECRETVAL` so the leak checks can grep.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;

use proxops_sops::{Identities, IdentitySources, SopsError, SopsFile, decrypt_str};

const MARKER: &str = "SECRETVAL";

const TYPES_DOC: &str = r#"# top comment SECRETVAL
cluster:
  name: lab-SECRETVAL
  nodes:
    - name: pve1
      port: 8006
      weight: 0.75
      enabled: true
      # inner comment
    - name: pve2
      port: 8007
      weight: 2.0
      enabled: false
  pools:
    - [rbd, cephfs]
    - fast
  empty_map: {}
  empty_list: []
empty_string: ""
nothing: null
tilde: ~
big: 123456789012
negative: -42
ratio: -0.125
exp: 1e3
octal: 0755
motd: |
  line one SECRETVAL
  line two
greeting: "grüß dich ✓ SECRETVAL"
quoted_number: "8006"
yes_is_a_string: yes
since: 2024-03-01
nested:
  deeper:
    deepest:
      token: tok-SECRETVAL
"#;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn ids(key_file: &Path) -> Identities {
    Identities::load(&IdentitySources {
        sops_age_key_file: Some(key_file.to_path_buf()),
        ..Default::default()
    })
    .unwrap()
}

/// Our decryption equals `sops decrypt --output-type json`.
fn check_agrees_with_sops(
    dir: &Path,
    encrypted: &str,
    key_file: &Path,
) -> proxops_sops::SecretDocument {
    let ours = SopsFile::parse(encrypted, "secrets.sops.yaml")
        .and_then(|f| f.decrypt(&ids(key_file)))
        .unwrap_or_else(|e| panic!("our decryption failed: {e}"));
    let theirs = common::sops_decrypt_json(dir, encrypted, key_file)
        .unwrap_or_else(|e| panic!("sops decrypt failed: {e}"));
    common::assert_matches_json(&ours, &theirs);
    ours
}

/// The error is of `class`, and neither its text nor its Debug form holds
/// a secret value.
fn check_refused(encrypted: &str, key_file: &Path, class: &str) -> SopsError {
    let err = SopsFile::parse(encrypted, "secrets.sops.yaml")
        .and_then(|f| f.decrypt(&ids(key_file)))
        .expect_err("decryption must fail");
    assert_eq!(err.class(), class, "{err}");
    assert_no_secret(&err.to_string());
    assert_no_secret(&format!("{err:?}"));
    err
}

fn assert_no_secret(text: &str) {
    assert!(!text.contains(MARKER), "a secret value leaked: {text}");
}

#[test]
fn nested_maps_lists_and_typed_values_match_sops() {
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let enc = common::sops_encrypt(dir.path(), TYPES_DOC, &[&recipient], &[], None);
    let doc = check_agrees_with_sops(dir.path(), &enc, &key);
    assert_eq!(
        doc.get_text("nested.deeper.deepest.token")
            .unwrap()
            .as_str(),
        "tok-SECRETVAL"
    );
    assert_eq!(
        doc.get_text("cluster.nodes[1].port").unwrap().as_str(),
        "8007"
    );
    assert_eq!(
        doc.get_text("cluster.pools[0][1]").unwrap().as_str(),
        "cephfs"
    );
    assert_eq!(doc.get_text("octal").unwrap().as_str(), "493");
    assert_eq!(
        doc.get_text("since").unwrap().as_str(),
        "2024-03-01T00:00:00Z"
    );
    let paths: Vec<String> = doc.leaves().map(|(p, _)| p).collect();
    assert!(
        paths.contains(&"cluster.nodes[0].weight".to_string()),
        "{paths:?}"
    );
    assert!(
        !paths.contains(&"nothing".to_string()),
        "null is not a leaf with text"
    );
    assert_no_secret(&format!("{doc:?}"));
}

#[test]
fn identity_of_the_third_recipient_decrypts() {
    let dir = tmp();
    let (_, r1) = common::keygen(dir.path(), "one");
    let (_, r2) = common::keygen(dir.path(), "two");
    let (key3, r3) = common::keygen(dir.path(), "three");
    let enc = common::sops_encrypt(dir.path(), TYPES_DOC, &[&r1, &r2, &r3], &[], None);
    let file = SopsFile::parse(&enc, "x").unwrap();
    assert_eq!(file.recipients().len(), 3);
    check_agrees_with_sops(dir.path(), &enc, &key3);
}

#[test]
fn encrypted_regex_leaves_other_values_plaintext_but_in_the_mac() {
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let plain = "pve:\n  endpoint: https://pve:8006\n  port: 8006\n  timeout: 1.5\n  verify: true\n  token_secret: SECRETVAL-1\n  token:\n    nested: SECRETVAL-2\n    list: [a, b]\n";
    let enc = common::sops_encrypt(
        dir.path(),
        plain,
        &[&recipient],
        &["--encrypted-regex", "^(token_secret|token)$"],
        None,
    );
    assert!(enc.contains("endpoint: https://pve:8006"));
    check_agrees_with_sops(dir.path(), &enc, &key);
    // A plaintext value is covered by the MAC.
    let tampered = enc.replace("port: 8006", "port: 8007");
    check_refused(&tampered, &key, "mac-mismatch");
}

#[test]
fn custom_unencrypted_suffix_and_exotic_plaintext_scalars_verify() {
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let plain = "settings_plain:\n  mode: 0755\n  big: 1_000\n  exp: 1e3\n  inf: .inf\n  day: 2024-01-01\n  stamp: 2024-01-01T10:20:30.5+02:00\n  yes: yes\n  huge: 99999999999999999999\nsecret: SECRETVAL\n";
    let enc = common::sops_encrypt(
        dir.path(),
        plain,
        &[&recipient],
        &["--unencrypted-suffix", "_plain"],
        None,
    );
    assert!(enc.contains("unencrypted_suffix: _plain"));
    let file = SopsFile::parse(&enc, "x").unwrap();
    assert_eq!(
        file.rule(),
        &proxops_sops::CryptRule::UnencryptedSuffix("_plain".into())
    );
    assert!(!file.mac_only_encrypted());
    // JSON cannot hold +Inf, so compare only through our own reading here;
    // MAC verification proves the typing matches sops'.
    let doc = SopsFile::parse(&enc, "x")
        .unwrap()
        .decrypt(&ids(&key))
        .unwrap();
    assert_eq!(doc.get_text("settings_plain.mode").unwrap().as_str(), "493");
    assert_eq!(doc.get_text("secret").unwrap().as_str(), MARKER);
}

#[test]
fn plaintext_negative_zero_float_is_refused_as_sops_refuses_it() {
    // sops writes a plaintext -0.0 back as `-0`, which yaml.v3 then reads as
    // the int 0: sops' own MAC no longer matches. We agree with sops.
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let plain = "zero_plain: -0.0\nsecret: SECRETVAL\n";
    let enc = common::sops_encrypt(
        dir.path(),
        plain,
        &[&recipient],
        &["--unencrypted-suffix", "_plain"],
        None,
    );
    check_refused(&enc, &key, "mac-mismatch");
    assert!(common::sops_decrypt_json(dir.path(), &enc, &key).is_err());
}

#[test]
fn encrypted_suffix_and_unencrypted_regex_match_sops() {
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let plain = "a_secret: SECRETVAL\nb: visible\nc:\n  x_secret:\n    y: SECRETVAL-2\n";
    let enc = common::sops_encrypt(
        dir.path(),
        plain,
        &[&recipient],
        &["--encrypted-suffix", "_secret"],
        None,
    );
    check_agrees_with_sops(dir.path(), &enc, &key);
    let enc = common::sops_encrypt(
        dir.path(),
        plain,
        &[&recipient],
        &["--unencrypted-regex", "^b$"],
        None,
    );
    check_agrees_with_sops(dir.path(), &enc, &key);
}

#[test]
fn mac_only_encrypted_from_a_creation_rule_allows_editing_plaintext() {
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let config = format!(
        "creation_rules:\n  - age: {recipient}\n    encrypted_regex: \"^(password)$\"\n    mac_only_encrypted: true\n"
    );
    let plain = "user: admin@pve\nport: 8006\npassword: SECRETVAL\n";
    let enc = common::sops_encrypt(dir.path(), plain, &[], &[], Some(&config));
    assert!(enc.contains("mac_only_encrypted: true"));
    check_agrees_with_sops(dir.path(), &enc, &key);
    let edited = enc.replace("port: 8006", "port: 9000");
    let doc = check_agrees_with_sops(dir.path(), &edited, &key);
    assert_eq!(doc.get_text("port").unwrap().as_str(), "9000");
}

#[test]
fn wrong_key_is_no_matching_identity_and_lists_recipients() {
    let dir = tmp();
    let (_, recipient) = common::keygen(dir.path(), "right");
    let (wrong, _) = common::keygen(dir.path(), "wrong");
    let enc = common::sops_encrypt(dir.path(), TYPES_DOC, &[&recipient], &[], None);
    let err = check_refused(&enc, &wrong, "no-matching-identity");
    assert!(err.to_string().contains(&recipient));
    assert!(common::sops_decrypt_json(dir.path(), &enc, &wrong).is_err());
}

#[test]
fn tampered_values_and_mac_are_refused_like_sops_refuses_them() {
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let enc = common::sops_encrypt(dir.path(), TYPES_DOC, &[&recipient], &[], None);

    // Rollback splice: an older ciphertext of the same path under the same
    // data key passes GCM; only the MAC catches it.
    let path = dir.path().join("s.sops.yaml");
    std::fs::write(&path, &enc).unwrap();
    let out = common::sops(dir.path())
        .env("SOPS_AGE_KEY_FILE", &key)
        .args(["set", "--input-type", "yaml", "--output-type", "yaml"])
        .arg(&path)
        .arg(r#"["nested"]["deeper"]["deepest"]["token"]"#)
        .arg(r#""new-SECRETVAL""#)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let newer = std::fs::read_to_string(&path).unwrap();
    let token_line = |doc: &str| {
        doc.lines()
            .find(|l| l.trim_start().starts_with("token:"))
            .unwrap()
            .to_string()
    };
    let spliced = newer.replace(&token_line(&newer), &token_line(&enc));
    let err = check_refused(&spliced, &key, "mac-mismatch");
    assert!(matches!(
        err,
        SopsError::MacMismatch {
            kind: proxops_sops::MacFailure::Mismatch,
            ..
        }
    ));
    assert!(common::sops_decrypt_json(dir.path(), &spliced, &key).is_err());

    // One character of the encrypted MAC changed.
    let mac_line = enc
        .lines()
        .find(|l| l.trim_start().starts_with("mac: ENC["))
        .unwrap();
    let tampered_mac = enc.replace(mac_line, &flip_data_char(mac_line));
    let err = check_refused(&tampered_mac, &key, "mac-mismatch");
    assert!(matches!(
        err,
        SopsError::MacMismatch {
            kind: proxops_sops::MacFailure::Undecryptable,
            ..
        }
    ));

    // One character of a value's ciphertext changed.
    let line = token_line(&enc);
    let tampered_value = enc.replace(&line, &flip_data_char(&line));
    let err = check_refused(&tampered_value, &key, "value-decrypt");
    assert!(
        err.to_string().contains("nested.deeper.deepest.token"),
        "{err}"
    );

    // A changed lastmodified makes the MAC undecryptable.
    let lm = enc.lines().find(|l| l.contains("lastmodified:")).unwrap();
    let moved = enc.replace(lm, "    lastmodified: \"2001-01-01T00:00:00Z\"");
    check_refused(&moved, &key, "mac-mismatch");
}

/// Changes the first base64 character after `data:`.
fn flip_data_char(line: &str) -> String {
    let at = line.find("data:").unwrap() + 5;
    let mut bytes = line.as_bytes().to_vec();
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

#[test]
fn plaintext_file_is_refused_as_not_sops() {
    let err = decrypt_str(
        "secrets:\n  token: SECRETVAL\n",
        "plain.yaml",
        &IdentitySources::default(),
    )
    .unwrap_err();
    assert_eq!(err.class(), "not-sops");
    assert_no_secret(&err.to_string());
}

#[test]
fn public_recipient_in_key_file_is_named_as_such() {
    let dir = tmp();
    let (_, recipient) = common::keygen(dir.path(), "key");
    let enc = common::sops_encrypt(dir.path(), TYPES_DOC, &[&recipient], &[], None);
    let pub_file = dir.path().join("key.pub");
    std::fs::write(&pub_file, format!("{recipient}\n")).unwrap();
    let err = decrypt_str(
        &enc,
        "secrets.sops.yaml",
        &IdentitySources {
            sops_age_key_file: Some(pub_file),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.class(), "invalid-identity");
    assert!(
        err.to_string()
            .contains("this is a public age recipient, not an identity"),
        "{err}"
    );
}

#[test]
fn no_identity_anywhere_is_no_identity() {
    let dir = tmp();
    let (_, recipient) = common::keygen(dir.path(), "key");
    let enc = common::sops_encrypt(dir.path(), TYPES_DOC, &[&recipient], &[], None);
    let err = decrypt_str(
        &enc,
        "secrets.sops.yaml",
        &IdentitySources {
            home: Some(dir.path().join("empty-home")),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(err.class(), "no-identity");
    assert!(err.to_string().contains("sops/age/keys.txt"), "{err}");
}

#[test]
fn identities_come_from_inline_key_and_default_key_file() {
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let enc = common::sops_encrypt(dir.path(), TYPES_DOC, &[&recipient], &[], None);
    let key_text = std::fs::read_to_string(&key).unwrap();

    // SOPS_AGE_KEY with several lines (comments and the identity).
    let doc = decrypt_str(
        &enc,
        "s",
        &IdentitySources {
            sops_age_key: Some(key_text.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        doc.get_text("cluster.name").unwrap().as_str(),
        "lab-SECRETVAL"
    );

    // $XDG_CONFIG_HOME/sops/age/keys.txt
    let xdg = dir.path().join("xdg");
    std::fs::create_dir_all(xdg.join("sops/age")).unwrap();
    std::fs::write(xdg.join("sops/age/keys.txt"), &key_text).unwrap();
    let sources = IdentitySources {
        xdg_config_home: Some(xdg),
        home: Some(dir.path().join("nohome")),
        ..Default::default()
    };
    assert!(decrypt_str(&enc, "s", &sources).is_ok());
    assert!(!format!("{sources:?}").contains("AGE-SECRET-KEY"));
    let inline = IdentitySources {
        sops_age_key: Some(key_text),
        ..Default::default()
    };
    assert!(!format!("{inline:?}").contains("AGE-SECRET-KEY"));
}

#[test]
fn adding_a_value_and_reencrypting_with_the_files_own_settings_keeps_it_readable_by_sops() {
    // The adopt flow: decrypt, add a key, re-encrypt to the same recipients
    // with the same rule; sops must read the result.
    let dir = tmp();
    let (key, recipient) = common::keygen(dir.path(), "key");
    let config = format!(
        "creation_rules:\n  - age: {recipient}\n    encrypted_regex: \"^(secrets|cloud-init)$\"\n    mac_only_encrypted: true\n"
    );
    let plain = "secrets:\n  proxops-token: SECRETVAL\ncloud-init:\n  ssh-keys:\n    main: ssh-ed25519 AAAA ops@host\nnote: plain\n";
    let enc = common::sops_encrypt(dir.path(), plain, &[], &[], Some(&config));
    let file = SopsFile::parse(&enc, "secrets.sops.yaml").unwrap();
    let mut doc = file.decrypt(&ids(&key)).unwrap();
    let Some((_, proxops_sops::SecretNode::Map(cloud_init))) = doc
        .entries_mut()
        .iter_mut()
        .find(|(k, _)| k == "cloud-init")
    else {
        panic!("cloud-init block missing")
    };
    let Some((_, proxops_sops::SecretNode::Map(ssh_keys))) =
        cloud_init.iter_mut().find(|(k, _)| k == "ssh-keys")
    else {
        panic!("ssh-keys block missing")
    };
    ssh_keys.push((
        "adopted-0011223344556677".into(),
        proxops_sops::SecretNode::Leaf(proxops_sops::SecretValue::str("ssh-ed25519 BBBB x")),
    ));
    let again = proxops_sops::encrypt(
        &doc,
        &proxops_sops::EncryptOptions {
            recipients: file.recipients(),
            rule: file.rule().clone(),
            mac_only_encrypted: file.mac_only_encrypted(),
            lastmodified: "2026-11-29T16:00:00Z".into(),
        },
    )
    .unwrap();
    assert!(again.contains("note: plain"));
    assert!(!again.contains(MARKER));
    let theirs = common::sops_decrypt_json(dir.path(), &again, &key).unwrap();
    common::assert_matches_json(&doc, &theirs);
    assert_eq!(
        theirs["cloud-init"]["ssh-keys"]["adopted-0011223344556677"],
        "ssh-ed25519 BBBB x"
    );
}
