//! `proxops secrets check`: files made at test time by the real sops and
//! age-keygen (installed by tools/install-test-tools.sh) are verified and
//! fingerprinted without printing a value; failures exit 2 with their class.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const TOKEN: &str = "7c1e7a0e-dead-4000-8000-00000000beef";
const GIT: &str = "glpat-Secret-Value-123";

fn tool(name: &str) -> PathBuf {
    let dir = std::env::var_os("PROXOPS_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.tools"));
    let p = dir.join("bin").join(name);
    assert!(
        p.exists(),
        "{} is missing: run tools/install-test-tools.sh",
        p.display()
    );
    p
}

fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let out = Command::new(tool("age-keygen"))
        .arg("-o")
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = Command::new(tool("age-keygen"))
        .arg("-y")
        .arg(&key)
        .output()
        .unwrap();
    (
        key,
        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
    )
}

fn encrypt(dir: &Path, recipient: &str, plain: &str) -> PathBuf {
    let input = dir.join("secrets.yaml");
    std::fs::write(&input, plain).unwrap();
    let out = Command::new(tool("sops"))
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("SOPS_AGE_RECIPIENTS", recipient)
        .args([
            "--disable-version-check",
            "encrypt",
            "--input-type",
            "yaml",
            "--output-type",
            "yaml",
        ])
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join("secrets.sops.yaml");
    std::fs::write(&path, &out.stdout).unwrap();
    std::fs::remove_file(&input).unwrap();
    path
}

fn check(file: &Path, key: Option<&Path>, home: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    cmd.env_clear()
        .env("HOME", home)
        .args(["secrets", "check"])
        .arg(file);
    if let Some(k) = key {
        cmd.env("SOPS_AGE_KEY_FILE", k);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const PLAIN: &str = "secrets:\n  proxops-user: root@pam\n  proxops-token: 7c1e7a0e-dead-4000-8000-00000000beef\nclusters:\n  dr:\n    tokens:\n      - name: a\n        secret: one\n      - name: b\n        secret: glpat-Secret-Value-123\n";

#[test]
fn prints_one_fingerprint_per_value_and_never_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let (key, recipient) = keygen(dir.path(), "age.txt");
    let file = encrypt(dir.path(), &recipient, PLAIN);
    let out = check(&file, Some(&key), dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines
            .iter()
            .map(|l| l.split('\t').next().unwrap())
            .collect::<Vec<_>>(),
        vec![
            "secrets.proxops-user",
            "secrets.proxops-token",
            "clusters.dr.tokens[0].name",
            "clusters.dr.tokens[0].secret",
            "clusters.dr.tokens[1].name",
            "clusters.dr.tokens[1].secret"
        ]
    );
    use sha2::Digest;
    let want: String = sha2::Sha256::digest(TOKEN.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    assert!(
        stdout.contains(&format!("secrets.proxops-token\tsha256:{want}\n")),
        "{stdout}"
    );
    for secret in [TOKEN, GIT, "root@pam", "one"] {
        assert!(!text(&out).contains(secret), "a value leaked: {secret}");
    }
}

#[test]
fn the_wrong_key_exits_2_naming_the_class() {
    let dir = tempfile::tempdir().unwrap();
    let (_, recipient) = keygen(dir.path(), "age.txt");
    let (other, _) = keygen(dir.path(), "other.txt");
    let file = encrypt(dir.path(), &recipient, PLAIN);
    let out = check(&file, Some(&other), dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("no-matching-identity"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains(TOKEN));
}

#[test]
fn no_identity_anywhere_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let (_, recipient) = keygen(dir.path(), "age.txt");
    let file = encrypt(dir.path(), &recipient, PLAIN);
    let out = check(&file, None, dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("no-identity"), "{}", text(&out));
}

#[test]
fn a_tampered_value_fails_the_mac() {
    let dir = tempfile::tempdir().unwrap();
    let (key, recipient) = keygen(dir.path(), "age.txt");
    let file = encrypt(dir.path(), &recipient, PLAIN);
    // Swap two encrypted values: each still decrypts under its own AAD only
    // if paths match, so swap within one list (same AAD `clusters:dr:tokens:secret:`).
    let body = std::fs::read_to_string(&file).unwrap();
    let secrets: Vec<&str> = body
        .lines()
        .filter(|l| l.trim_start().starts_with("secret: ENC["))
        .collect();
    assert_eq!(secrets.len(), 2);
    let swapped = body
        .replacen(secrets[0], "@@A@@", 1)
        .replacen(secrets[1], secrets[0], 1)
        .replacen("@@A@@", secrets[1], 1);
    std::fs::write(&file, swapped).unwrap();
    let out = check(&file, Some(&key), dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("mac-mismatch"), "{}", text(&out));
}

#[test]
fn a_plaintext_file_is_not_sops() {
    let dir = tempfile::tempdir().unwrap();
    let (key, _) = keygen(dir.path(), "age.txt");
    let file = dir.path().join("plain.yaml");
    std::fs::write(&file, PLAIN).unwrap();
    let out = check(&file, Some(&key), dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("not-sops"), "{}", text(&out));
    assert!(!text(&out).contains(TOKEN));
}
