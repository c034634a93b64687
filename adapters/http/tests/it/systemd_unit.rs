//! `dist/proxops.service` checked by the real `systemd-analyze` (Debian
//! package systemd): `verify` must pass without a single message, and the
//! offline security review must rate it well.
//!
//! `verify` insists that ExecStart's program exists, and the proxops binary
//! is not built by this crate's tests: the unit is copied to a temp dir with
//! `/usr/bin/proxops` replaced by `/bin/true`; nothing else changes.

#![allow(clippy::unwrap_used)]

use crate::support;

use std::path::Path;
use std::process::Command;

use support::{tool, workspace_root};

const SHIPPED_EXEC_START: &str = "ExecStart=/usr/bin/proxops run";

fn shipped_unit() -> String {
    std::fs::read_to_string(workspace_root().join("dist/proxops.service")).unwrap()
}

/// Writes `text` as `proxops.service` in `dir` with ExecStart on `/bin/true`.
fn checkable(dir: &Path, text: &str) -> std::path::PathBuf {
    assert!(
        text.lines().any(|l| l == SHIPPED_EXEC_START),
        "the unit no longer says {SHIPPED_EXEC_START:?}"
    );
    let path = dir.join("proxops.service");
    std::fs::write(
        &path,
        text.replace(SHIPPED_EXEC_START, "ExecStart=/bin/true run"),
    )
    .unwrap();
    path
}

/// Runs `systemd-analyze <args> <unit>`; returns (success, everything it said).
fn analyze(args: &[&str], unit: &Path) -> (bool, String) {
    let out = Command::new(tool("systemd-analyze", "systemd"))
        .args(args)
        .arg(unit)
        .output()
        .unwrap();
    let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), said)
}

#[test]
fn the_shipped_unit_passes_systemd_analyze_verify_silently() {
    let dir = tempfile::tempdir().unwrap();
    let unit = checkable(dir.path(), &shipped_unit());
    let (ok, said) = analyze(&["verify"], &unit);
    assert!(ok, "systemd-analyze verify failed:\n{said}");
    assert_eq!(
        said.trim(),
        "",
        "systemd-analyze verify had something to say:\n{said}"
    );
}

#[test]
fn verify_really_checks_a_misspelt_directive_is_reported() {
    // The control: verify exits 0 on an unknown key and only says so, which
    // is why the test above demands silence.
    let dir = tempfile::tempdir().unwrap();
    let unit = checkable(
        dir.path(),
        &shipped_unit().replace("NoNewPrivileges=yes", "NoNewPrivilegs=yes"),
    );
    let (_, said) = analyze(&["verify"], &unit);
    assert!(
        said.contains("Unknown key"),
        "verify did not notice: {said}"
    );
}

#[test]
fn the_offline_security_review_rates_the_unit_ok() {
    let dir = tempfile::tempdir().unwrap();
    let unit = checkable(dir.path(), &shipped_unit());
    let (ok, said) = analyze(&["security", "--offline=yes", "--no-pager"], &unit);
    assert!(ok, "systemd-analyze security failed:\n{said}");
    let level: f64 = said
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for proxops.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no exposure level in:\n{said}"))
        .parse()
        .unwrap();
    assert!(
        level <= 2.0,
        "exposure {level} (of 10) is worse than the 2.0 this unit is held to:\n{said}"
    );
}

#[test]
fn the_unit_keeps_its_required_settings() {
    let text = shipped_unit();
    for line in [
        "User=proxops",
        "WorkingDirectory=/srv/gitops",
        SHIPPED_EXEC_START,
        "Restart=on-failure",
        "LimitNOFILE=4096",
        "After=network-online.target",
        "Wants=network-online.target",
        "EnvironmentFile=-/etc/proxops/proxops.env",
        "StateDirectory=proxops",
        "ReadWritePaths=/var/lib/proxops",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=read-only",
        "PrivateTmp=yes",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "SystemCallFilter=@system-service",
        "CapabilityBoundingSet=",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "dist/proxops.service lacks {line:?}"
        );
    }
    assert!(
        !text.lines().any(|l| l.starts_with("Environment=PROXOPS_")),
        "credentials belong in the EnvironmentFile"
    );
}
