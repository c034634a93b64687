//! Input bounds through the real binary: a nested or oversized file is
//! refused by name with exit 2, quickly, whether it is a manifest, a
//! cluster configuration or the `--config` file.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const CONFIG: &str = "pve:\n  clusters:\n    home:\n      base-url: https://pve.example.org:8006\n      nodes: [pve1]\n";
const HEAD: &str = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: NAME\nspec:\n  node: pve1\n  vmid: VMID\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n";

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A repository with cluster `home` listing these manifests.
fn repo(manifests: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "clusters/home/config.yaml", CONFIG);
    let mut listed = String::from("resources:\n");
    for (path, text) in manifests {
        listed.push_str(&format!("  - ../../{path}\n"));
        write(dir.path(), path, text);
    }
    write(dir.path(), "clusters/home/resources.yaml", &listed);
    dir
}

fn proxops(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_proxops"));
    for var in [
        "PROXOPS_GIT_PATH",
        "PROXOPS_CONFIG",
        "PROXOPS_PVE_TOKEN_VALUE",
        "PROXOPS_PVE_TOKEN",
        "PROXOPS_PVE_PASSWORD",
    ] {
        cmd.env_remove(var);
    }
    cmd.args(args).output().unwrap()
}

fn validate(root: &Path) -> (i32, String) {
    let out = proxops(&["--git-path", root.to_str().unwrap(), "validate"]);
    assert!(out.stdout.is_empty() || out.status.success());
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn a_320_kb_nest_and_a_deep_block_nest_are_refused_with_exit_2_in_under_a_second() {
    let head = HEAD.replace("NAME", "flow").replace("VMID", "100");
    let depth = (320 * 1024 - head.len()) / 2;
    let flow = format!("{head}  tags: {}{}\n", "[".repeat(depth), "]".repeat(depth));
    let mut block = HEAD.replace("NAME", "block").replace("VMID", "101");
    block.push_str("  hardware:\n");
    for d in 0..100 {
        block.push_str(&format!("{}k{d}:\n", " ".repeat(4 + d)));
    }
    let dir = repo(&[("vm/home/flow.yaml", flow), ("vm/home/block.yaml", block)]);

    let started = Instant::now();
    let (code, stderr) = validate(dir.path());
    let elapsed = started.elapsed();
    assert_eq!(code, 2, "{stderr}");
    // The parse this replaces took about a minute; the whole process takes
    // milliseconds, so a second leaves room for a loaded machine.
    assert!(elapsed < Duration::from_secs(1), "took {elapsed:?}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("error: vm/home/block.yaml:43:"),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with("error: vm/home/flow.yaml:12:39: "),
        "{stderr}"
    );
    assert!(
        lines.iter().all(|l| l.contains("deeper than 32 levels")),
        "{stderr}"
    );
}

#[test]
fn a_manifest_over_the_size_cap_is_refused_naming_the_cap() {
    let mut big = HEAD.replace("NAME", "big").replace("VMID", "100");
    while big.len() <= 1024 * 1024 {
        big.push_str("# padding padding padding padding padding padding padding\n");
    }
    let dir = repo(&[("vm/home/big.yaml", big)]);
    let (code, stderr) = validate(dir.path());
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(
        stderr,
        "error: vm/home/big.yaml: the file is larger than the 1 MiB size cap for a manifest (1048576 bytes): split it, or move what is not desired state out of the repository\n"
    );
}

#[test]
fn a_config_file_over_the_size_cap_is_refused_naming_the_cap() {
    let dir = repo(&[]);
    let mut config = CONFIG.to_owned();
    while config.len() <= 256 * 1024 {
        config.push_str("# padding padding padding padding padding padding padding\n");
    }
    let explicit = dir.path().join("proxops.yaml");
    std::fs::write(&explicit, &config).unwrap();
    let out = proxops(&["--config", explicit.to_str().unwrap(), "validate"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("proxops.yaml: the file is larger than the 256 KiB size cap for a configuration file (262144 bytes)"),
        "{stderr}"
    );
}
