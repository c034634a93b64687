//! Changes PVE refuses whatever the guest's state, refused at plan time:
//! each is a `needs_person` anomaly naming PVE's rule, and the guest gets
//! no action at all (no write, no shutdown, no restart).
//!
//! The same holds for a paused VM's shutdown, and for a guest whose status
//! is unknown; and a cloud-init change the guest has not seen is read from
//! `…/cloudinit` as waiting for a restart.
//!
//! Each case starts from the recording of real PVE shapes
//! (fixtures/live/pve-real) and its matching repository, edits one of them
//! (or both) to the shape PVE refuses, and reads the JSON plan `diff`
//! prints from the replay. The API token (the repository's default
//! authentication) is never `root@pam`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The pve-real repository and recording in a temporary directory, to be
/// edited by a case.
struct Case {
    dir: tempfile::TempDir,
    recording: Value,
}

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(
            &root().join("fixtures/repos/pve-real"),
            &dir.path().join("repo"),
        );
        let text =
            std::fs::read_to_string(root().join("fixtures/live/pve-real/real.json")).unwrap();
        Case {
            dir,
            recording: serde_json::from_str(&text).unwrap(),
        }
    }

    /// The recorded answer to `GET path`.
    fn answer(&mut self, path: &str) -> &mut Value {
        self.recording["responses"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|r| r["path"] == path && r["method"] == "GET")
            .unwrap_or_else(|| panic!("no recorded answer to {path}"))
    }

    /// Sets `key` in a recorded guest config.
    fn set_config(&mut self, path: &str, key: &str, value: Value) {
        self.answer(path)["body"]["data"][key] = value;
    }

    /// Sets `key` on the guest's `/cluster/resources` row.
    fn set_resource(&mut self, vmid: u64, key: &str, value: Value) {
        let rows = self.answer("/cluster/resources")["body"]["data"]
            .as_array_mut()
            .unwrap();
        let row = rows.iter_mut().find(|r| r["vmid"] == vmid).unwrap();
        row[key] = value;
    }

    /// Replaces `from` with `to` in a manifest of the repository.
    fn edit_manifest(&self, rel: &str, from: &str, to: &str) {
        let path = self.dir.path().join("repo").join(rel);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{rel} has no {from:?}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    }

    /// The configuration says ProxOps logs in as root@pam (a ticket).
    fn as_root_pam(&self) {
        let path = self.dir.path().join("repo/proxops.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            format!("{text}pve:\n  auth: ticket\n  user: root@pam\n"),
        )
        .unwrap();
    }

    /// Back to the repository's API token.
    fn as_token(&self) {
        std::fs::copy(
            root().join("fixtures/repos/pve-real/proxops.yaml"),
            self.dir.path().join("repo/proxops.yaml"),
        )
        .unwrap();
    }

    /// Makes the k-test-c-3 manifest a TemplateVM (its own folder, listed
    /// as such in the cluster's resources).
    fn k8s_as_template(&self) {
        let repo = self.dir.path().join("repo");
        std::fs::create_dir_all(repo.join("templatevm/real")).unwrap();
        std::fs::rename(repo.join(K8S_MANIFEST), repo.join(K8S_TEMPLATE)).unwrap();
        self.edit_manifest(K8S_TEMPLATE, "kind: VM", "kind: TemplateVM");
        self.edit_manifest(
            "clusters/real/resources.yaml",
            "../../vm/real/k-test-c-3.yaml",
            "../../templatevm/real/k-test-c-3.yaml",
        );
    }

    /// The recorded `GET path` answer with `query`.
    fn answer_with_query(&mut self, path: &str, query: &str) -> &mut Value {
        self.recording["responses"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|r| r["path"] == path && r["query"] == query)
            .unwrap_or_else(|| panic!("no recorded answer to {path}?{query}"))
    }

    /// `proxops --cluster real diff <flags> --replay` over the edited
    /// repository and recording.
    fn diff(&self, flags: &[&str]) -> std::process::Output {
        let rec = self.dir.path().join("rec");
        std::fs::create_dir_all(&rec).unwrap();
        std::fs::write(rec.join("real.json"), self.recording.to_string()).unwrap();
        Command::new(env!("CARGO_BIN_EXE_proxops"))
            .current_dir(root())
            .env_remove("PROXOPS_GIT_PATH")
            .env_remove("PROXOPS_CONFIG")
            .arg("--git-path")
            .arg(self.dir.path().join("repo"))
            .args(["--cluster", "real", "diff"])
            .args(flags)
            .arg("--replay")
            .arg(&rec)
            .output()
            .unwrap()
    }

    /// `diff --replay` text output and exit code (with `--exit-code`).
    fn diff_text(&self) -> (i32, String) {
        let out = self.diff(&["--exit-code"]);
        let text = String::from_utf8(out.stdout).unwrap() + &String::from_utf8_lossy(&out.stderr);
        (out.status.code().unwrap_or(-1), text)
    }

    /// `diff --replay --output json` over the edited repository and
    /// recording: the `real` cluster's plan.
    fn plan(&self) -> Value {
        let out = self.diff(&["--output", "json"]);
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_str(&stdout).unwrap();
        v["clusters"][0].clone()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// The plan refuses: no action at all, and a `needs_person` anomaly on
/// `name`'s `field` whose message says `rule`.
fn assert_refused(plan: &Value, name: &str, field: &str, rule: &str) {
    assert_eq!(plan["actions"], json!([]), "{plan:#}");
    let found = plan["anomalies"].as_array().unwrap().iter().any(|a| {
        a["type"] == "needs_person"
            && a["name"] == name
            && a["field"] == field
            && a["message"].as_str().unwrap().contains(rule)
    });
    assert!(
        found,
        "no anomaly on {name} {field} saying {rule:?}: {plan:#}"
    );
}

/// Without the refused detail the same edit plans an action: what the
/// refusal takes away.
fn assert_planned(plan: &Value, name: &str) {
    let acts = plan["actions"].as_array().unwrap();
    assert!(acts.iter().any(|a| a["name"] == name), "{plan:#}");
}

const CT: &str = "/nodes/pve/lxc/200/config";
const CT_MANIFEST: &str = "lxc/real/dns-real.yaml";
const K8S: &str = "/nodes/pve/qemu/107/config";
const K8S_MANIFEST: &str = "vm/real/k-test-c-3.yaml";
const K8S_TEMPLATE: &str = "templatevm/real/k-test-c-3.yaml";

#[test]
fn the_unedited_case_plans_nothing() {
    let plan = Case::new().plan();
    assert_eq!(plan["actions"], json!([]), "{plan:#}");
    assert_eq!(plan["anomalies"], json!([]), "{plan:#}");
}

#[test]
fn a_new_mount_point_on_a_protected_container_is_refused() {
    // pve-container `LXC/Config.pm` `update_pct_config`: every rootfs/mpN
    // in a write goes through `check_protection`.
    let mut case = Case::new();
    case.edit_manifest(
        CT_MANIFEST,
        "  networks:",
        "  mount-points:\n    - storage: local-lvm\n      size: 4GiB\n      mount-point: /srv\n  networks:",
    );
    assert_planned(&case.plan(), "dns-real");
    case.set_config(CT, "protection", json!(1));
    assert_refused(&case.plan(), "dns-real", "mp0", "protection mode enabled");
}

#[test]
fn a_changed_mount_option_on_a_protected_container_is_refused() {
    let mut case = Case::new();
    case.set_config(CT, "protection", json!(1));
    case.set_config(CT, "mp0", json!("local-lvm:vm-200-disk-1,mp=/srv,size=4G"));
    case.edit_manifest(
        CT_MANIFEST,
        "  networks:",
        "  mount-points:\n    - storage: local-lvm\n      size: 4GiB\n      mount-point: /srv\n      options:\n        read-only: true\n  networks:",
    );
    assert_refused(&case.plan(), "dns-real", "mp0", "protection mode enabled");
}

#[test]
fn features_of_a_privileged_container_are_refused_to_an_api_token() {
    // pve-container `LXC.pm` `check_ct_modify_config_perm`: "changing
    // feature flags for privileged container is only allowed for
    // root@pam"; the recorded container has no `unprivileged` key.
    let case = Case::new();
    case.edit_manifest(
        CT_MANIFEST,
        "    unprivileged: false",
        "    unprivileged: false\n    nesting: true",
    );
    case.as_root_pam();
    assert_planned(&case.plan(), "dns-real");
    case.as_token();
    assert_refused(
        &case.plan(),
        "dns-real",
        "features",
        "only allowed for root@pam",
    );
}

#[test]
fn a_bind_mount_is_refused_to_an_api_token() {
    // pve-container `LXC.pm` `check_ct_modify_config_perm`: "mount point
    // type bind is only allowed for root@pam".
    let case = Case::new();
    case.edit_manifest(
        CT_MANIFEST,
        "  networks:",
        "  bind-mounts:\n    - host-path: /srv/shared\n      mount-point: /shared\n  networks:",
    );
    case.as_root_pam();
    assert_planned(&case.plan(), "dns-real");
    case.as_token();
    assert_refused(&case.plan(), "dns-real", "mp0", "type bind is only allowed");
}

#[test]
fn memory_below_the_live_balloon_is_refused() {
    // qemu-server `API2/Qemu.pm` `$update_vm_api` `$load_and_check_config`:
    // "balloon value too large (must be smaller than assigned memory)".
    let mut case = Case::new();
    case.edit_manifest(K8S_MANIFEST, "memory: 8GiB", "memory: 4GiB");
    assert_planned(&case.plan(), "k-test-c-3");
    case.set_config(K8S, "balloon", json!(6144));
    assert_refused(
        &case.plan(),
        "k-test-c-3",
        "memory",
        "balloon value too large",
    );
}

#[test]
fn a_boot_order_naming_a_missing_device_is_refused() {
    // qemu-server `API2/Qemu.pm` `$update_vm_api`: "invalid bootorder:
    // device '…' does not exist". VM 107 has scsi0, ide2 and net0.
    let case = Case::new();
    case.edit_manifest(
        K8S_MANIFEST,
        "    tablet: true",
        "    tablet: true\n    boot-order: [scsi0, virtio1]",
    );
    assert_refused(&case.plan(), "k-test-c-3", "boot", "invalid bootorder");
}

#[test]
fn a_template_conversion_of_a_vm_with_snapshots_is_refused() {
    // qemu-server `API2/Qemu.pm` `template`: "unable to create template,
    // because VM contains snapshots"; `parent` names the snapshot the
    // current state descends from (pve-guest-common `AbstractConfig.pm`).
    let mut case = Case::new();
    case.k8s_as_template();
    assert_planned(&case.plan(), "k-test-c-3");
    case.set_config(K8S, "parent", json!("before-upgrade"));
    assert_refused(
        &case.plan(),
        "k-test-c-3",
        "template",
        "because VM contains snapshots",
    );
}

#[test]
fn a_resize_of_a_templates_base_volume_on_dir_storage_is_refused() {
    // pve-storage `Plugin.pm` `create_base`: a base volume on file storage
    // is made immutable (chmod 0444, chattr +i).
    let mut case = Case::new();
    case.set_resource(107, "template", json!(1));
    case.set_resource(107, "status", json!("stopped"));
    case.set_config(K8S, "template", json!(1));
    case.set_config(
        K8S,
        "scsi0",
        json!("local:107/base-107-disk-0.qcow2,size=32G"),
    );
    case.k8s_as_template();
    case.edit_manifest(
        K8S_TEMPLATE,
        "    - storage: local-lvm\n      size: 32GiB",
        "    - storage: local\n      size: 40GiB",
    );
    assert_refused(&case.plan(), "k-test-c-3", "scsi0", "made immutable");
}

#[test]
fn a_quota_on_an_unprivileged_containers_mount_point_is_refused() {
    // pve-container `API2/LXC/Status.pm` `vm_start`: "Quotas are not
    // supported by unprivileged containers" (the write itself succeeds).
    let mut case = Case::new();
    case.edit_manifest(
        CT_MANIFEST,
        "  networks:",
        "  mount-points:\n    - storage: local-lvm\n      size: 4GiB\n      mount-point: /srv\n      options:\n        quota: true\n  networks:",
    );
    assert_planned(&case.plan(), "dns-real");
    case.set_config(CT, "unprivileged", json!(1));
    case.edit_manifest(CT_MANIFEST, "unprivileged: false", "unprivileged: true");
    assert_refused(
        &case.plan(),
        "dns-real",
        "mp0",
        "Quotas are not supported by unprivileged containers",
    );
}

/// The plan skips `name` with a reason that says `why`, and plans nothing.
fn assert_skipped(plan: &Value, name: &str, why: &str) {
    assert_eq!(plan["actions"], json!([]), "{plan:#}");
    let found = plan["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == name && s["reason"].as_str().unwrap().contains(why));
    assert!(found, "{name} not skipped for {why:?}: {plan:#}");
}

#[test]
fn a_paused_vm_gets_no_shutdown() {
    // qemu-server `API2/Qemu.pm` `vm_shutdown`: "VM is paused - cannot
    // shutdown"; `/cluster/resources` still says running, QEMU's status
    // (`qmpstatus`, `GET /nodes/{n}/qemu?full=1`) says paused.
    let mut case = Case::new();
    case.edit_manifest(K8S_MANIFEST, "cores: 8", "cores: 4");
    assert_planned(&case.plan(), "k-test-c-3");
    let list = case.answer_with_query("/nodes/pve/qemu", "full=1");
    let vm = list["body"]["data"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|v| v["vmid"] == 107)
        .unwrap();
    vm["qmpstatus"] = json!("paused");
    assert_skipped(&case.plan(), "k-test-c-3", "VM is paused - cannot shutdown");
}

#[test]
fn a_guest_whose_status_is_unknown_is_planned_neither_running_nor_stopped() {
    // pve-manager `API2Tools.pm` `extract_vm_stats`: `unknown` until the
    // node's pvestatd has sent the guest's status.
    let mut case = Case::new();
    case.edit_manifest(K8S_MANIFEST, "cores: 8", "cores: 4");
    case.set_resource(107, "status", json!("unknown"));
    assert_skipped(&case.plan(), "k-test-c-3", "status as unknown");
}

#[test]
fn a_cloud_init_change_the_vm_has_not_seen_waits_for_a_restart() {
    // PVE 9.2 fast-plugs cloud-init keys: `/config` (and `/pending`) show
    // the new value at once, and qemu-server `cloudinit_pending` lists what
    // the drive, regenerated at the next start, will change.
    let mut case = Case::new();
    let (code, text) = case.diff_text();
    assert_eq!(code, 0, "{text}");
    let answer = case.answer("/nodes/pve/qemu/111/cloudinit");
    answer["body"]["data"][0] = json!({
        "key": "ipconfig0",
        "value": "ip=10.100.1.170/24,gw=10.100.1.1,ip6=auto",
        "pending": "ip=10.100.1.174/24,gw=10.100.1.1,ip6=auto"
    });
    let (code, text) = case.diff_text();
    assert_eq!(code, 3, "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("VM/ovmf-cloud"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("pending restart") && line.contains("ipconfig0"),
        "{text}"
    );
}
