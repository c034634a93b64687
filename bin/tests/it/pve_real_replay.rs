//! The real binary against a recording of values as real PVE stores them
//! (fixtures/live/pve-real, built from published captures of PVE answers):
//! the cloud-init drive on `scsi1` (qemu-server `API2/Qemu.pm`
//! `create_disks`), MACs PVE generated upper case (pve-common `Tools.pm`
//! `random_ether_addr`), a container without `unprivileged` (pve-container
//! `API2/LXC.pm`: absent = privileged), tags in mixed case on PVE's side
//! (pve-guest-common `GuestHelpers.pm` `get_unique_tags`). The matching
//! repository plans nothing; adopting the same guests and diffing plans
//! only the ownership tag.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn proxops(repo: &Path, args: &[&str]) -> Out {
    let out = Command::new(env!("CARGO_BIN_EXE_proxops"))
        .current_dir(root())
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .arg("--git-path")
        .arg(repo)
        .args(["--cluster", "real"])
        .args(args)
        .output()
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

#[test]
fn the_matching_repository_plans_nothing_against_real_pve_values() {
    let out = proxops(
        &root().join("fixtures/repos/pve-real"),
        &["diff", "--replay", "fixtures/live/pve-real", "--exit-code"],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("=== real ===\nno drift"),
        "{}",
        out.stdout
    );
}

/// The recording with the `proxops` tag taken off every guest: guests
/// built by hand, as adoption finds them.
fn untagged_recording(dir: &Path) {
    let text = std::fs::read_to_string(root().join("fixtures/live/pve-real/real.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if k == "tags"
                        && let Some(t) = x.as_str()
                    {
                        let kept: Vec<&str> = t.split(';').filter(|t| *t != "proxops").collect();
                        *x = serde_json::Value::String(kept.join(";"));
                    } else {
                        strip(x);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    std::fs::write(
        dir.join("real.json"),
        serde_json::to_string_pretty(&v).unwrap(),
    )
    .unwrap();
}

fn files_under(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir.join(rel)) else {
        return;
    };
    for e in entries {
        let e = e.unwrap();
        let name = format!("{rel}/{}", e.file_name().to_string_lossy());
        if e.file_type().unwrap().is_dir() {
            files_under(dir, &name, out);
        } else {
            out.push(name);
        }
    }
}

#[test]
fn adopting_the_real_values_then_diffing_plans_only_the_ownership_tag() {
    let repo = tempfile::tempdir().unwrap();
    let src = root().join("fixtures/repos/pve-real");
    std::fs::create_dir_all(repo.path().join("clusters/real")).unwrap();
    std::fs::copy(src.join("proxops.yaml"), repo.path().join("proxops.yaml")).unwrap();
    std::fs::copy(
        src.join("clusters/real/config.yaml"),
        repo.path().join("clusters/real/config.yaml"),
    )
    .unwrap();
    std::fs::write(
        repo.path().join("clusters/real/resources.yaml"),
        "resources: []\n",
    )
    .unwrap();
    let rec = tempfile::tempdir().unwrap();
    untagged_recording(rec.path());
    let recording = rec.path().to_str().unwrap();

    let adopted = proxops(repo.path(), &["adopt", "--replay", recording]);
    assert_eq!(adopted.code, 0, "{}\n{}", adopted.stdout, adopted.stderr);
    let mut files = Vec::new();
    for d in ["vm", "lxc", "ctt", "iso"] {
        files_under(repo.path(), d, &mut files);
    }
    files.sort();
    assert_eq!(files.len(), 4, "{files:?}\n{}", adopted.stdout);
    let read = |rel: &str| std::fs::read_to_string(repo.path().join(rel)).unwrap();
    let ctt = files.iter().find(|f| f.starts_with("ctt/")).unwrap();
    let ctt_name = read(ctt)
        .lines()
        .find_map(|l| l.trim().strip_prefix("name: ").map(str::to_owned))
        .unwrap();
    for f in &files {
        let text = read(f);
        if f.starts_with("lxc/") {
            // Absent on PVE means privileged: adoption says so.
            assert!(text.contains("unprivileged: false"), "{text}");
            assert!(text.contains("- dns\n") || text.contains("[dns]"), "{text}");
        }
        if f.contains("ovmf-cloud") {
            // The cloud-init drive on scsi1 is adopted; tags lower-cased.
            assert!(text.contains("cloud-init:"), "{text}");
            assert!(!text.contains("Prod") && text.contains("prod"), "{text}");
        }
        if text.contains(proxops_core::adopt::TEMPLATE_PLACEHOLDER) {
            std::fs::write(
                repo.path().join(f),
                text.replace(proxops_core::adopt::TEMPLATE_PLACEHOLDER, &ctt_name),
            )
            .unwrap();
        }
    }
    let mut list = String::from("resources:\n");
    for f in &files {
        list.push_str(&format!("  - ../../{f}\n"));
    }
    std::fs::write(repo.path().join("clusters/real/resources.yaml"), list).unwrap();

    let valid = proxops(repo.path(), &["validate"]);
    assert_eq!(valid.code, 0, "{}", valid.stderr);
    let diff = proxops(
        repo.path(),
        &["diff", "--replay", recording, "--output", "json"],
    );
    assert_eq!(diff.code, 0, "{}", diff.stderr);
    let plan: serde_json::Value = serde_json::from_str(&diff.stdout).unwrap();
    let cluster = &plan["clusters"][0];
    let actions = cluster["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 3, "{:#}", cluster);
    for a in actions {
        let changes = a["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "{a:#}");
        assert_eq!(changes[0]["field"], "tags", "{a:#}");
        assert!(
            changes[0]["to"].as_str().unwrap().contains("proxops"),
            "{a:#}"
        );
    }
    assert!(
        cluster["anomalies"].as_array().is_none_or(|a| a.is_empty()),
        "{:#}",
        cluster["anomalies"]
    );

    // Against PVE once it holds the tag (the original recording): nothing.
    let tagged = proxops(
        repo.path(),
        &["diff", "--replay", "fixtures/live/pve-real", "--exit-code"],
    );
    assert_eq!(tagged.code, 0, "{}\n{}", tagged.stdout, tagged.stderr);
}
