//! Disk growth and clones across nodes, end to end: the real binary against
//! a fakepve server (tools/install-test-tools.sh).
//!
//! What PVE does, from Proxmox's source:
//! - qemu-server `src/PVE/API2/Qemu.pm` `resize_vm` and pve-container
//!   `src/PVE/API2/LXC.pm` `resize_vm`: `PUT …/resize` with `disk` and
//!   `size` (`\+?\d+(\.\d+)?[KMGT]?`, binary units, absolute without `+`)
//!   answers a task UPID and grows the volume online; a smaller size fails
//!   ("shrinking disks is not supported" / "unable to shrink disk size").
//! - qemu-server `src/PVE/API2/Qemu.pm` `clone_vm`: with `target=<node>`
//!   every volume of the source must be on shared storage, else "can't
//!   clone VM to node '<n>' (VM uses local storage)".
//!
//! fakepve 0.5.0 models the container resize; the launcher adds the qemu
//! one (tools/fakepve/launcher.py `LauncherPve`). fakepve clones to another
//! node from local storage without complaint, so the refusal seen here is
//! ProxOps' own.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::json;

const CT_TEMPLATE: &str = "apiVersion: proxops/v1alpha1
kind: CTTemplate
metadata:
  name: debian-13-standard
spec:
  nodes: [pve1]
  storage: local
  filename: debian-13-standard_13.1-2_amd64.tar.zst
  url: http://download.proxmox.com/images/system/debian-13-standard_13.1-2_amd64.tar.zst
";

fn vm(name: &str, node: &str, vmid: u32, disk: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1
kind: VM
metadata:
  name: {name}
spec:
  node: {node}
  vmid: {vmid}
  state: stopped
  memory: 512MiB
  cpu:
    type: host
    cores: 1
  disks:
    - storage: local-lvm
      size: {disk}
  networks:
    - bridge: vmbr0
"
    )
}

fn ct(root: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1
kind: LXC
metadata:
  name: grow-ct
spec:
  node: pve1
  vmid: 210
  template: debian-13-standard
  state: stopped
  memory: 512MiB
  cpu:
    cores: 1
  root:
    storage: local-lvm
    size: {root}
  networks:
    - bridge: vmbr0
      iface: eth0
      ip: dhcp
"
    )
}

fn template(storage: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1
kind: TemplateVM
metadata:
  name: tmpl
spec:
  node: pve1
  vmid: 9000
  memory: 512MiB
  cpu:
    type: host
    cores: 1
  disks:
    - storage: {storage}
      size: 2GiB
  networks:
    - bridge: vmbr0
"
    )
}

const CLONE_ON_PVE2: &str = "apiVersion: proxops/v1alpha1
kind: VM
metadata:
  name: far
spec:
  node: pve2
  vmid: 120
  clone: tmpl
  state: stopped
  memory: 512MiB
  cpu:
    type: host
    cores: 1
";

/// `diff` of `home` converged: exit 0 and "no drift".
fn assert_converged(pve: &FakePve, repo: &Repo) {
    let diff = proxops(pve, repo, &["diff"]);
    assert_eq!(diff.code, 0, "{}", diff.all());
    assert!(
        diff.stdout.contains("=== home ===\nno drift"),
        "{}",
        diff.all()
    );
}

/// The body fakepve recorded for `method path`.
fn body_of(pve: &FakePve, method: &str, path: &str) -> Option<String> {
    pve.requests()
        .unwrap()
        .into_iter()
        .find(|(m, p, _)| m == method && p == path)
        .map(|(_, _, b)| b)
}

#[test]
fn a_grown_vm_disk_and_container_rootfs_are_resized_and_converge() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = empty_repo(&pve);
    repo.write("ctt/home/debian-13-standard.yaml", CT_TEMPLATE);
    repo.write("vm/home/grow-vm.yaml", &vm("grow-vm", "pve1", 110, "4GiB"));
    repo.write("lxc/home/grow-ct.yaml", &ct("4GiB"));
    repo.set_resources(&[
        "../../ctt/home/debian-13-standard.yaml",
        "../../vm/home/grow-vm.yaml",
        "../../lxc/home/grow-ct.yaml",
    ]);
    let first = apply(&pve, &repo, &[]);
    assert_eq!(first.code, 0, "{}", first.all());
    assert_converged(&pve, &repo);

    repo.write("vm/home/grow-vm.yaml", &vm("grow-vm", "pve1", 110, "6GiB"));
    repo.write("lxc/home/grow-ct.yaml", &ct("5GiB"));
    let plan = proxops(&pve, &repo, &["diff"]);
    assert!(
        plan.stdout.contains("resize") && plan.stdout.contains("grow scsi0 from 4G to 6G"),
        "{}",
        plan.all()
    );
    assert!(
        plan.stdout.contains("grow rootfs from 4G to 5G"),
        "{}",
        plan.all()
    );

    pve.forget_requests().unwrap();
    let grow = apply(&pve, &repo, &[]);
    assert_eq!(grow.code, 0, "{}", grow.all());
    let vm_resize = "/api2/json/nodes/pve1/qemu/110/resize";
    let ct_resize = "/api2/json/nodes/pve1/lxc/210/resize";
    // One PUT per disk, the new size absolute in PVE's spelling; nothing
    // else written (no config write carries a size, nothing is stopped).
    // The two guests are independent, so their resizes run at once, in
    // either order.
    let mut sent = writes(&pve);
    sent.sort();
    assert_eq!(
        sent,
        vec![
            ("PUT".to_owned(), ct_resize.to_owned()),
            ("PUT".to_owned(), vm_resize.to_owned()),
        ],
        "{}",
        grow.all()
    );
    let vm_body = body_of(&pve, "PUT", vm_resize).unwrap();
    assert!(
        vm_body.contains("disk=scsi0") && vm_body.contains("size=6G"),
        "{vm_body}"
    );
    let ct_body = body_of(&pve, "PUT", ct_resize).unwrap();
    assert!(
        ct_body.contains("disk=rootfs") && ct_body.contains("size=5G"),
        "{ct_body}"
    );
    assert_converged(&pve, &repo);
}

#[test]
fn a_smaller_disk_is_a_shrink_anomaly_and_nothing_is_written() {
    let pve = FakePve::start(&empty_seed()).unwrap();
    let repo = empty_repo(&pve);
    repo.write("vm/home/grow-vm.yaml", &vm("grow-vm", "pve1", 110, "4GiB"));
    repo.set_resources(&["../../vm/home/grow-vm.yaml"]);
    let first = apply(&pve, &repo, &[]);
    assert_eq!(first.code, 0, "{}", first.all());

    repo.write("vm/home/grow-vm.yaml", &vm("grow-vm", "pve1", 110, "2GiB"));
    pve.forget_requests().unwrap();
    let again = apply(&pve, &repo, &[]);
    assert!(
        again
            .stdout
            .lines()
            .any(|l| l.trim_start().starts_with("shrink") && l.contains("scsi0")),
        "{}",
        again.all()
    );
    assert!(!again.all().contains("data_loss"), "{}", again.all());
    assert_eq!(writes(&pve), Vec::new(), "{}", again.all());
}

/// An empty two-node cluster with a storage every node sees.
fn seed_with_shared_storage() -> serde_json::Value {
    let mut seed = empty_seed();
    seed["storages"]["shared"] = json!({
        "type": "dir", "path": "/mnt/pve/shared", "content": "images,rootdir", "shared": 1
    });
    seed
}

#[test]
fn a_vm_on_another_node_than_its_template_on_shared_storage_is_cloned_with_target() {
    let pve = FakePve::start(&seed_with_shared_storage()).unwrap();
    let repo = empty_repo(&pve);
    repo.write("templatevm/home/tmpl.yaml", &template("shared"));
    repo.write("vm/home/far.yaml", CLONE_ON_PVE2);
    repo.set_resources(&["../../templatevm/home/tmpl.yaml", "../../vm/home/far.yaml"]);

    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    let clone = body_of(&pve, "POST", "/api2/json/nodes/pve1/qemu/9000/clone")
        .unwrap_or_else(|| panic!("no clone request:\n{}", run.all()));
    assert!(clone.contains("target=pve2"), "{clone}");
    assert!(clone.contains("newid=120"), "{clone}");
    assert_converged(&pve, &repo);
}

#[test]
fn a_vm_whose_template_is_on_local_storage_of_another_node_is_refused_alone() {
    let pve = FakePve::start(&seed_with_shared_storage()).unwrap();
    let repo = empty_repo(&pve);
    repo.write("templatevm/home/tmpl.yaml", &template("local-lvm"));
    repo.write("vm/home/far.yaml", CLONE_ON_PVE2);
    repo.write("vm/home/near.yaml", &vm("near", "pve1", 111, "1GiB"));
    repo.set_resources(&[
        "../../templatevm/home/tmpl.yaml",
        "../../vm/home/far.yaml",
        "../../vm/home/near.yaml",
    ]);

    let run = apply(&pve, &repo, &[]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("VM/far") && l.contains("clone refused")),
        "{}",
        run.all()
    );
    let w = writes(&pve);
    assert!(
        !w.iter().any(|(_, p)| p.ends_with("/clone")),
        "no clone may be sent: {w:?}"
    );
    assert!(
        w.contains(&("POST".into(), "/api2/json/nodes/pve1/qemu".into())),
        "{w:?}"
    );

    // The rest of the cluster converges; the refused VM stays refused.
    pve.forget_requests().unwrap();
    let again = proxops(&pve, &repo, &["diff", "--output", "json"]);
    assert_eq!(again.code, 0, "{}", again.all());
    let doc: serde_json::Value = serde_json::from_str(&again.stdout).unwrap();
    let home = &doc["clusters"][0];
    assert_eq!(home["name"], "home");
    assert_eq!(home["actions"], json!([]), "{}", again.stdout);
    let skipped = home["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{}", again.stdout);
    assert_eq!(skipped[0]["name"], "far");
    assert_eq!(writes(&pve), Vec::new());
}
