//! `proxops adopt --adopt-secrets` against fakepve with a SOPS file made by
//! the real sops and age-keygen (tools/install-test-tools.sh): live SSH keys
//! not yet in `cloud-init.ssh-keys` are added under their `adopted-<hex>`
//! names, the adopted manifests reference them in the same run, the real
//! `sops decrypt` reads the rewritten file with every old value intact, a
//! second run writes nothing, and PVE sees only GETs.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use live_support::sops::{encrypt, tool};
use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const PASSWORD: &str = "Ci-Passw0rd-7f3a9c";
const KEY_OPS_BLOB: &str = "AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y+TBx08F7zRdhBlKjk7aywMT";
const KEY_CI_BLOB: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIHRydXN0ZWQtY2kta2V5LWZvci10ZXN0cy1vbmx5LSEh";
const KEY_NEW_BLOB: &str = "AAAAB3NzaC1yc2EAAAADAQABAAAAQwBzdHJhbmdlci1rZXktbW9kdWx1cy1mb3ItdGhlLXRlc3RzdHJhbmdlci1rZXktbW9kdWx1cy1mb3ItdGhlLXRlc3Q=";

fn sops_cmd(dir: &Path) -> Command {
    let mut c = Command::new(tool("sops"));
    c.current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("SOPS_DISABLE_VERSION_CHECK", "1")
        .arg("--disable-version-check");
    c
}

/// The real `sops decrypt` of `file`.
fn sops_decrypt(file: &Path, key: &Path) -> String {
    let out = sops_cmd(file.parent().unwrap())
        .env("SOPS_AGE_KEY_FILE", key)
        .args(["decrypt", "--input-type", "yaml", "--output-type", "yaml"])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `adopted-` and the first 8 bytes of SHA-256("sshpki\0<type>\0<blob>").
fn adopted_name(key_type: &str, blob: &str) -> String {
    let d = Sha256::digest(format!("sshpki\0{key_type}\0{blob}").as_bytes());
    let hex: String = d[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("adopted-{hex}")
}

fn pve_sshkeys(lines: &[String]) -> String {
    proxops_core::wire::percent_encode(&lines.join("\n"))
}

fn vm(vmid: u64, name: &str, extra: Value) -> Value {
    let mut config = json!({
        "name": name, "memory": "1024", "cpu": "host", "cores": 1, "ostype": "l26",
        "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=8G"),
        "ide2": format!("local-lvm:vm-{vmid}-cloudinit,media=cdrom"),
        "net0": format!("virtio=BC:24:11:5A:60:{:02X},bridge=vmbr0", vmid % 256),
        "ipconfig0": "ip=10.0.70.10/24,gw=10.0.70.1",
        "meta": "creation-qemu=10.0.2,ctime=1764000000",
        "digest": format!("{vmid:040}"),
    });
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    json!({"type": "qemu", "vmid": vmid, "name": name, "node": "pve1",
           "status": "running", "config": config})
}

fn seed() -> Value {
    let ops = format!("ssh-ed25519 {KEY_OPS_BLOB} ops@host");
    let ci = format!("ssh-ed25519 {KEY_CI_BLOB} ci@runner");
    let new = format!("ssh-rsa {KEY_NEW_BLOB} someone@else");
    let new_other_comment = format!("ssh-rsa {KEY_NEW_BLOB} same-key@other-host");
    json!({
        "nodes": ["pve1", "pve2"],
        "guests": [
            vm(101, "known-key", json!({"ciuser": "ops", "sshkeys": pve_sshkeys(&[ops])})),
            vm(102, "two-new-keys", json!({"ciuser": "ci", "sshkeys": pve_sshkeys(&[ci, new])})),
            vm(103, "same-key-other-comment", json!({"sshkeys": pve_sshkeys(&[new_other_comment])})),
            vm(104, "with-password", json!({"ciuser": "root", "cipassword": "**********"})),
        ]
    })
}

struct Setup {
    pve: FakePve,
    repo: Repo,
    _keys: tempfile::TempDir,
    key: PathBuf,
    sops_file: PathBuf,
}

fn setup() -> Setup {
    // `main` holds the live ops key under another comment: the same key.
    setup_with(&format!(
        "secrets:\n  note: keep-me\ncloud-init:\n  passwords:\n    default: {PASSWORD}\n  ssh-keys:\n    main: ssh-ed25519 {KEY_OPS_BLOB} ops@laptop\nother:\n  - 1\n  - two\n"
    ))
}

fn setup_with(plain: &str) -> Setup {
    assert!(
        tool("sops").exists(),
        "sops is not installed: run tools/install-test-tools.sh"
    );
    let pve = FakePve::start(&seed()).unwrap();
    let repo = empty_repo(&pve);
    let keys = tempfile::tempdir().unwrap();
    let (cipher, key) = encrypt(keys.path(), plain);
    repo.write("clusters/home/secrets.sops.yaml", &cipher);
    let cfg = std::fs::read_to_string(repo.path().join("clusters/home/config.yaml")).unwrap();
    repo.write(
        "clusters/home/config.yaml",
        &format!("{cfg}      secrets-file: secrets.sops.yaml\n"),
    );
    let sops_file = repo.path().join("clusters/home/secrets.sops.yaml");
    Setup {
        pve,
        repo,
        _keys: keys,
        key,
        sops_file,
    }
}

fn run(s: &Setup, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(s.repo.path())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_PASSWORD")
        .env_remove("SOPS_AGE_KEY")
        .env("SOPS_AGE_KEY_FILE", &s.key)
        .env("PROXOPS_PVE_TOKEN_VALUE", s.pve.token_value().expose())
        .arg("--git-path")
        .arg(s.repo.path())
        .args(["--cluster", "home"])
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(PASSWORD), "password leaked:\n{text}");
    (out.status.code().unwrap_or(-1), text)
}

fn manifest(s: &Setup, name: &str) -> String {
    std::fs::read_to_string(s.repo.path().join(format!("vm/home/{name}.yaml"))).unwrap()
}

fn sidecars(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".proxops-tmp"))
        .collect()
}

#[test]
fn adopt_secrets_adds_the_new_live_keys_to_sops_and_the_manifests_reference_them() {
    let s = setup();
    let ci = adopted_name("ssh-ed25519", KEY_CI_BLOB);
    let new = adopted_name("ssh-rsa", KEY_NEW_BLOB);
    let before = std::fs::read(&s.sops_file).unwrap();

    s.pve.forget_requests().unwrap();
    let (code, text) = run(&s, &["adopt", "--adopt-secrets"]);
    assert_eq!(code, 0, "{text}");
    assert!(writes(&s.pve).is_empty(), "{:?}", writes(&s.pve));
    assert!(
        text.contains(&format!(
            "added cloud-init.ssh-keys.{ci} to secrets.sops.yaml"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "added cloud-init.ssh-keys.{new} to secrets.sops.yaml"
        )),
        "{text}"
    );
    assert_eq!(
        text.matches("added cloud-init.ssh-keys.").count(),
        2,
        "{text}"
    );

    let after = std::fs::read(&s.sops_file).unwrap();
    assert_ne!(before, after);
    let after_text = String::from_utf8(after.clone()).unwrap();
    assert!(!after_text.contains(KEY_CI_BLOB), "plaintext key on disk");
    assert!(!after_text.contains(PASSWORD), "plaintext password on disk");
    assert!(sidecars(s.sops_file.parent().unwrap()).is_empty());

    let plain = sops_decrypt(&s.sops_file, &s.key);
    assert_eq!(
        plain,
        format!(
            "secrets:\n    note: keep-me\ncloud-init:\n    passwords:\n        default: {PASSWORD}\n    ssh-keys:\n        main: ssh-ed25519 {KEY_OPS_BLOB} ops@laptop\n        {ci}: ssh-ed25519 {KEY_CI_BLOB} ci@runner\n        {new}: ssh-rsa {KEY_NEW_BLOB} someone@else\nother:\n    - 1\n    - two\n"
        ),
        "{plain}"
    );

    assert!(
        manifest(&s, "known-key").contains("ssh-key-refs:\n      - cloud-init.ssh-keys.main\n"),
        "{}",
        manifest(&s, "known-key")
    );
    let both = manifest(&s, "two-new-keys");
    assert!(both.contains("ssh-key-refs:"), "{both}");
    assert!(
        both.contains(&format!("cloud-init.ssh-keys.{ci}")),
        "{both}"
    );
    assert!(
        both.contains(&format!("cloud-init.ssh-keys.{new}")),
        "{both}"
    );
    let other = manifest(&s, "same-key-other-comment");
    assert!(
        other.contains(&format!(
            "ssh-key-refs:\n      - cloud-init.ssh-keys.{new}\n"
        )),
        "{other}"
    );
    let pw = manifest(&s, "with-password");
    assert!(
        !pw.contains("ci-password") && !pw.contains(PASSWORD),
        "{pw}"
    );
    assert!(text.contains("cipassword = \"<redacted>\""), "{text}");

    // Nothing new: the file is not rewritten and no manifest changes.
    s.pve.forget_requests().unwrap();
    let (code, text) = run(&s, &["adopt", "--adopt-secrets"]);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("added "), "{text}");
    assert!(!text.contains("wrote "), "{text}");
    assert_eq!(std::fs::read(&s.sops_file).unwrap(), after);
    assert!(writes(&s.pve).is_empty());

    // The listed manifests resolve their refs and plan only the claim.
    s.repo.set_resources(&[
        "../../vm/home/known-key.yaml",
        "../../vm/home/two-new-keys.yaml",
        "../../vm/home/same-key-other-comment.yaml",
    ]);
    let (code, text) = run(&s, &["diff", "--output", "json"]);
    assert_eq!(code, 0, "{text}");
    // The demo manifests this composition no longer lists are warned
    // about on stderr, which `run` appends.
    let json: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("warning: "))
        .collect();
    let doc: Value = serde_json::from_str(&json.join("\n")).unwrap();
    let home = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "home")
        .unwrap()
        .clone();
    let actions = home["actions"].as_array().cloned().unwrap_or_default();
    assert_eq!(actions.len(), 3, "{actions:#?}");
    for a in &actions {
        assert_eq!(a["action"], "update", "{a:#}");
        let changes = a["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "{a:#}");
        assert_eq!(changes[0]["field"], "tags", "{a:#}");
    }
    assert!(
        home["anomalies"].as_array().is_none_or(Vec::is_empty),
        "{home:#}"
    );
}

#[test]
fn a_failed_sops_write_leaves_the_file_and_the_tree_untouched() {
    let s = setup();
    let before = std::fs::read(&s.sops_file).unwrap();
    // Something in the sidecar's place makes the write fail.
    let sidecar = s.sops_file.with_file_name("secrets.sops.yaml.proxops-tmp");
    std::fs::create_dir(&sidecar).unwrap();
    let (code, text) = run(&s, &["adopt", "--adopt-secrets"]);
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("adopt: SOPS merge failed"), "{text}");
    assert_eq!(std::fs::read(&s.sops_file).unwrap(), before);
    assert!(!s.repo.path().join("vm").exists(), "{text}");
    assert!(writes(&s.pve).is_empty());
}

#[test]
fn adopt_secrets_needs_a_secrets_file() {
    let pve = FakePve::start(&seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    let out = proxops(&pve, &repo, &["adopt", "--adopt-secrets"]);
    assert_eq!(out.code, 2, "{}", out.all());
    assert!(
        out.stderr.contains("declares no secrets-file"),
        "{}",
        out.all()
    );
    assert!(writes(&pve).is_empty());
}

#[test]
fn a_sops_file_without_a_cloud_init_block_gets_one() {
    let s = setup_with("secrets:\n  note: keep-me\n");
    let (code, text) = run(&s, &["adopt", "--adopt-secrets"]);
    assert_eq!(code, 0, "{text}");
    let ops = adopted_name("ssh-ed25519", KEY_OPS_BLOB);
    let ci = adopted_name("ssh-ed25519", KEY_CI_BLOB);
    let new = adopted_name("ssh-rsa", KEY_NEW_BLOB);
    let mut names = [
        (ops.clone(), format!("ssh-ed25519 {KEY_OPS_BLOB} ops@host")),
        (ci, format!("ssh-ed25519 {KEY_CI_BLOB} ci@runner")),
        (new, format!("ssh-rsa {KEY_NEW_BLOB} someone@else")),
    ];
    names.sort();
    let block: String = names
        .iter()
        .map(|(n, l)| format!("        {n}: {l}\n"))
        .collect();
    assert_eq!(
        sops_decrypt(&s.sops_file, &s.key),
        format!("secrets:\n    note: keep-me\ncloud-init:\n    ssh-keys:\n{block}")
    );
    assert!(
        manifest(&s, "known-key").contains(&format!("- cloud-init.ssh-keys.{ops}\n")),
        "{}",
        manifest(&s, "known-key")
    );
}

#[test]
fn adopt_secrets_gives_up_on_a_held_cluster_and_leaves_the_sops_file_alone() {
    let s = setup();
    s.repo.set_lock_wait("0s");
    let before = std::fs::read(&s.sops_file).unwrap();
    let held = s.repo.hold_cluster_lock(&s.pve);
    s.pve.forget_requests().unwrap();

    let (code, text) = run(&s, &["adopt", "--adopt-secrets"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(&format!(
            "error: adopt: locked: cluster home is held by another proxops process (pid {}, proxops apply, since ",
            std::process::id()
        )),
        "{text}"
    );
    assert_eq!(std::fs::read(&s.sops_file).unwrap(), before);
    assert!(!s.repo.path().join("vm/home").exists(), "{text}");
    // Only which PVE this is and what the token may see: no inventory read.
    assert!(
        s.pve.requests().unwrap().iter().all(|(m, p, _)| m == "GET"
            && (p.ends_with("/cluster/status") || p.ends_with("/access/permissions"))),
        "read while locked"
    );

    drop(held);
    let (code, text) = run(&s, &["adopt", "--adopt-secrets"]);
    assert_eq!(code, 0, "{text}");
    assert_ne!(std::fs::read(&s.sops_file).unwrap(), before);
}
