//! Credentials and cloud-init material from a cluster's SOPS file (made by
//! the real sops and age-keygen from tools/install-test-tools.sh), used
//! against fakepve: the token comes from SOPS, the cloud-init password and
//! SSH key reach PVE, and no secret value appears in any output or
//! recording, nor in a saved plan (which holds the password's reference and
//! gets the value again from SOPS at apply time).

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::path::PathBuf;
use std::process::Command;

use live_support::sops::{encrypt, tool};
use live_support::*;
use proxops_pve::fakepve::FakePve;

const PASSWORD: &str = "Ci-Passw0rd-7f3a9c";

/// An `apply` of [`SopsRepo`] created the template, its image and
/// web-01, showed the password as `<secret>`, and sent PVE the password
/// itself (fakepve masks it on read, as PVE does).
fn web_created_with_the_password(pve: &FakePve, code: Option<i32>, text: &str) {
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("3 ok, 0 failed"), "{text}");
    assert!(
        text.lines().any(|l| l.trim_start().starts_with("+ cipassword (spec.")
            && l.ends_with("  <secret>")),
        "{text}"
    );
    let sent = pve.requests().unwrap();
    let config_write = sent
        .iter()
        .find(|(m, p, _)| m == "POST" && p.ends_with("/qemu/101/config"))
        .unwrap();
    assert!(config_write.2.contains("cipassword="), "{config_write:?}");
}

/// Makes `cipher` the `home` cluster's SOPS file, the PVE user, token id
/// and token taken from it.
fn use_sops_file(repo: &Repo, cipher: &str) {
    repo.write("clusters/home/secrets.sops.yaml", cipher);
    let cfg = std::fs::read_to_string(repo.path().join("clusters/home/config.yaml")).unwrap();
    repo.write(
        "clusters/home/config.yaml",
        &format!(
            "{cfg}      secrets-file: secrets.sops.yaml\n      secrets:\n        pve:\n          user: pve-user\n          token-id: pve-token-id\n          token: pve-token\n"
        ),
    );
}

/// The demo's web-01 (cloned from its template) whose cloud-init password
/// and SSH key, and the PVE token, come from the cluster's SOPS file.
struct SopsRepo {
    repo: Repo,
    key: PathBuf,
    token_secret: String,
    _keys: tempfile::TempDir,
}

impl SopsRepo {
    fn new(pve: &FakePve) -> SopsRepo {
        if !tool("sops").exists() {
            panic!("sops is not installed: run tools/install-test-tools.sh");
        }
        let repo = Repo::demo_for(pve);
        repo.set_resources(&[
            "../../diskimage/base/debian-13-genericcloud.yaml",
            "../../templatevm/home/debian-13-cloud.yaml",
            "../../vm/home/web-01.yaml",
        ]);
        let token = pve.token_value();
        let token_secret = token.expose().rsplit('=').next().unwrap().to_owned();
        let keys = tempfile::tempdir().unwrap();
        let plain = format!(
            "secrets:\n  pve-user: root@pam\n  pve-token-id: proxops\n  pve-token: {token_secret}\ncloud-init:\n  passwords:\n    default: {PASSWORD}\n  ssh-keys:\n    main: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8tb3BzLWxhcHRvcC1rZXktZm9yLXByb3hvcHMh ops@laptop\n"
        );
        let (cipher, key) = encrypt(keys.path(), &plain);
        use_sops_file(&repo, &cipher);
        let web = std::fs::read_to_string(repo.path().join("vm/home/web-01.yaml")).unwrap();
        let web = web
            .replace(
                "    ssh-keys:\n      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8tb3BzLWxhcHRvcC1rZXktZm9yLXByb3hvcHMh ops@laptop\n",
                "    ssh-key-refs: [cloud-init.ssh-keys.main]\n    ci-password-ref: cloud-init.passwords.default\n",
            );
        assert!(web.contains("ci-password-ref"));
        repo.write("vm/home/web-01.yaml", &web);
        SopsRepo {
            repo,
            key,
            token_secret,
            _keys: keys,
        }
    }

    /// `proxops --git-path <repo> --cluster home <args>` with the age key
    /// and no credential in the environment: (exit code, stdout and
    /// stderr), which hold neither the password nor the token.
    fn run(&self, args: &[&str]) -> (Option<i32>, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
            .current_dir(self.repo.path())
            .env_remove("PROXOPS_PVE_TOKEN_VALUE")
            .env_remove("PROXOPS_PVE_TOKEN")
            .env_remove("PROXOPS_PVE_PASSWORD")
            .env_remove("PROXOPS_GIT_PATH")
            .env_remove("PROXOPS_CONFIG")
            .env_remove("SOPS_AGE_KEY")
            .env("SOPS_AGE_KEY_FILE", &self.key)
            .arg("--git-path")
            .arg(self.repo.path())
            .args(["--cluster", "home"])
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains(PASSWORD),
            "cloud-init password leaked:\n{text}"
        );
        assert!(!text.contains(&self.token_secret), "token leaked:\n{text}");
        (out.status.code(), text)
    }
}

#[test]
fn sops_credentials_and_cloud_init_secrets_reach_pve_and_nowhere_else() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let sops = SopsRepo::new(&pve);
    let token_secret = sops.token_secret.clone();
    let run = |args: &[&str]| sops.run(args);

    let (code, text) = run(&["apply", "--yes", "--diff"]);
    web_created_with_the_password(&pve, code, &text);

    pve.forget_requests().unwrap();
    let (code, text) = run(&["apply", "--yes"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(writes(&pve).is_empty(), "{text}\n{:?}", writes(&pve));

    let out = tempfile::tempdir().unwrap();
    let (code, text) = run(&["record", "--out", out.path().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{text}");
    let recording = std::fs::read_to_string(out.path().join("home.json")).unwrap();
    let at = recording
        .find(PASSWORD)
        .map(|i| recording[i.saturating_sub(200)..i + 40].to_owned());
    assert!(!recording.contains(&token_secret), "token in the recording");
    assert!(at.is_none(), "password in the recording: {at:?}");
    // Replay decrypts the same SOPS file for the cloud-init refs.
    let (code, text) = run(&["diff", "--replay", out.path().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("will update"), "{text}");
}

#[test]
fn the_wrong_age_key_exits_2_before_any_pve_request() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = Repo::demo_for(&pve);
    repo.set_resources(&["../../vm/base/monitoring.yaml"]);
    let token = pve.token_value();
    let token_secret = token.expose().rsplit('=').next().unwrap().to_owned();
    let keys = tempfile::tempdir().unwrap();
    let plain = format!(
        "secrets:\n  pve-user: root@pam\n  pve-token-id: proxops\n  pve-token: {token_secret}\n"
    );
    let (cipher, _right_key) = encrypt(keys.path(), &plain);
    use_sops_file(&repo, &cipher);
    let other = keys.path().join("other.txt");
    let made = Command::new(tool("age-keygen"))
        .arg("-o")
        .arg(&other)
        .output()
        .unwrap();
    assert!(made.status.success());

    pve.forget_requests().unwrap();
    for args in [&["apply", "--yes"][..], &["diff"][..]] {
        let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
            .current_dir(repo.path())
            .env_remove("PROXOPS_PVE_TOKEN_VALUE")
            .env_remove("SOPS_AGE_KEY")
            .env_remove("PROXOPS_GIT_PATH")
            .env("SOPS_AGE_KEY_FILE", &other)
            .arg("--git-path")
            .arg(repo.path())
            .args(["--cluster", "home"])
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains("no-matching-identity"), "{text}");
        assert!(!text.contains(&token_secret), "token leaked:\n{text}");
    }
    assert_eq!(
        pve.requests().unwrap(),
        Vec::new(),
        "a PVE request was sent"
    );
}

#[test]
fn a_saved_plan_holds_the_password_reference_and_apply_plan_sends_the_value() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let sops = SopsRepo::new(&pve);
    sops.repo.git(&["init", "-q", "-b", "main"]);
    sops.repo.commit_all("web-01 with SOPS secrets");
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("plan.json");
    let plan = file.to_str().unwrap();

    let (code, text) = sops.run(&["diff", "--out", plan]);
    assert_eq!(code, Some(0), "{text}");
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(!saved.contains(PASSWORD), "password in the saved plan");
    assert!(
        !saved.contains(&sops.token_secret),
        "token in the saved plan"
    );
    assert!(
        saved.contains(r#""secret": "cloud-init.passwords.default""#),
        "{saved}"
    );

    // The value itself reached PVE, resolved from SOPS at apply time.
    let (code, text) = sops.run(&["apply", "--yes", "--diff", "--plan", plan]);
    web_created_with_the_password(&pve, code, &text);
}
