//! SOPS files for the live tests, made by the real `sops` and `age-keygen`
//! from tools/install-test-tools.sh.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::workspace_root;

/// A test tool in `.tools/bin` (`PROXOPS_TOOLS_DIR/bin` when set).
pub fn tool(name: &str) -> PathBuf {
    std::env::var_os("PROXOPS_TOOLS_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".tools"))
        .join("bin")
        .join(name)
}

/// Encrypts `plain` for a fresh age key; returns (ciphertext, key file).
pub fn encrypt(dir: &Path, plain: &str) -> (String, PathBuf) {
    assert!(
        tool("sops").exists(),
        "sops is not installed: run tools/install-test-tools.sh"
    );
    let key = dir.join("age.txt");
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
    let recipient = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let input = dir.join("plain.yaml");
    std::fs::write(&input, plain).unwrap();
    let out = Command::new(tool("sops"))
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("SOPS_DISABLE_VERSION_CHECK", "1")
        .env("SOPS_AGE_RECIPIENTS", &recipient)
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
    std::fs::remove_file(&input).unwrap();
    (String::from_utf8(out.stdout).unwrap(), key)
}
