//! `proxops adopt` of a hand-built PVE estate ProxOps never touched: fakepve
//! is seeded with configs written exactly as PVE 9 reports them (qemu
//! `memory` as a string, `size=` on every disk, PVE-assigned MACs,
//! `vm-<id>-cloudinit` volumes, `;`-joined tags) and no guest carries the
//! ownership tag. Adoption must read with GETs only, and the adopted
//! manifests, once completed and listed, must plan nothing but the
//! ownership claim of each guest.
//!
//! Property strings are written as PVE prints them: the default key first,
//! then the other keys sorted (`discard=on,iothread=1,size=32G,ssd=1`); one
//! NIC has a lower-case MAC and one cloud-init volume a `size=`, as seen on
//! PVE 9.
//!
//! Where fakepve differs from PVE the seed says what PVE does:
//! - storages are cluster-wide in fakepve, so `local` lists the same files
//!   on both nodes (on PVE `local` is per node); the seed treats every
//!   file as present on both nodes, as a shared storage would be;
//! - fakepve lists a guest volume with the size of its config's `size=`
//!   and the cloud-init volume (no `size=` in the config) with size 0; PVE
//!   reports the allocated size. Adoption ignores the cloud-init volume.

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::collections::BTreeMap;
use std::path::Path;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

const KEY_OPS: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y+TBx08F7zRdhBlKjk7aywMT ops@host";
const KEY_CI: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRydXN0ZWQtY2kta2V5LWZvci10ZXN0cy1vbmx5LSEh ci@runner";

/// PVE's `sshkeys` encoding: percent-encoded, newline-separated lines.
fn pve_sshkeys(lines: &[&str]) -> String {
    proxops_core::wire::percent_encode(&lines.join("\n"))
}

/// The keys PVE adds to every qemu config it creates.
fn qemu_bookkeeping(vmid: u64) -> Value {
    json!({
        "meta": "creation-qemu=10.0.2,ctime=1764000000",
        "smbios1": format!("uuid=6e1a3c1e-0000-4000-8000-{vmid:012}"),
        "vmgenid": format!("0a7e4d2c-0000-4000-8000-{vmid:012}"),
        "digest": format!("{vmid:040}"),
    })
}

fn merged(base: Value, extra: Value) -> Value {
    let mut m = base.as_object().unwrap().clone();
    for (k, v) in extra.as_object().unwrap() {
        m.insert(k.clone(), v.clone());
    }
    Value::Object(m)
}

fn vm(node: &str, vmid: u64, status: &str, config: Value) -> Value {
    let name = config["name"].as_str().unwrap().to_owned();
    let template = config.get("template").is_some();
    json!({
        "type": "qemu", "vmid": vmid, "name": name, "node": node,
        "status": if template { "stopped" } else { status },
        "template": template,
        "config": merged(qemu_bookkeeping(vmid), config),
    })
}

fn ct(node: &str, vmid: u64, status: &str, config: Value) -> Value {
    let name = config["hostname"].as_str().unwrap().to_owned();
    let vmid_digest = format!("{vmid:040}");
    let template = config.get("template").is_some();
    json!({
        "type": "lxc", "vmid": vmid, "name": name, "node": node,
        "status": if template { "stopped" } else { status },
        "template": template,
        "config": merged(json!({"digest": vmid_digest, "arch": "amd64"}), config),
    })
}

/// Two nodes, 28 guests: VMs with cloud-init, ISOs, OVMF/TPM, every disk
/// bus, VLAN/rate/firewall NICs and PCI passthrough; containers with
/// allocated and bind mounts and static addresses; templates of both
/// kinds; running and stopped guests on both nodes.
pub fn estate_seed() -> Value {
    let ops = pve_sshkeys(&[KEY_OPS]);
    let both = pve_sshkeys(&[KEY_OPS, KEY_CI]);
    let guests = vec![
        // --- qemu on pve1
        vm(
            "pve1",
            101,
            "running",
            json!({
                "name": "web-01", "memory": "2048", "cpu": "x86-64-v2-AES", "cores": 2, "sockets": 1,
                "ostype": "l26", "scsihw": "virtio-scsi-single", "machine": "q35",
                "scsi0": "local-lvm:vm-101-disk-0,discard=on,iothread=1,size=32G,ssd=1",
                "ide2": "local-lvm:vm-101-cloudinit,media=cdrom,size=4M",
                "ide3": "local:iso/debian-13.1.0-amd64-netinst.iso,media=cdrom,size=765952K",
                "net0": "virtio=BC:24:11:5A:20:01,bridge=vmbr0,firewall=1,tag=20",
                "agent": "1", "boot": "order=scsi0;ide2;net0", "onboot": 1,
                "ciuser": "ops", "sshkeys": ops, "ipconfig0": "ip=10.0.20.11/24,gw=10.0.20.1",
                "nameserver": "10.0.20.1 1.1.1.1", "searchdomain": "home.arpa",
                "description": "Public web front end\n\n  - nginx: 1.26\n  - owner: \"ops\" <ops@example.org>\n",
                "tags": "frontend;web",
            }),
        ),
        vm(
            "pve1",
            102,
            "running",
            json!({
                "name": "db-01", "memory": "8192", "cpu": "host", "cores": 4, "ostype": "l26",
                "bios": "ovmf", "machine": "pc-q35-9.2+pve1", "scsihw": "virtio-scsi-single",
                "efidisk0": "local-lvm:vm-102-disk-0,efitype=4m,ms-cert=2023w,pre-enrolled-keys=1,size=4M",
                "tpmstate0": "local-lvm:vm-102-disk-1,size=4M,version=v2.0",
                "virtio0": "local-lvm:vm-102-disk-2,iothread=1,size=64G",
                "virtio1": "local-zfs:vm-102-disk-0,discard=on,size=200G",
                "sata0": "local-lvm:vm-102-disk-3,discard=on,size=1T,ssd=1",
                "net0": "e1000=BC:24:11:5A:21:01,bridge=vmbr0,rate=12.5",
                "boot": "order=virtio0;net0",
                "tags": "db",
            }),
        ),
        vm(
            "pve1",
            103,
            "stopped",
            json!({
                "name": "gpu-box", "memory": "16384", "cpu": "host", "cores": 8, "numa": 1, "sockets": 2,
                "ostype": "l26", "bios": "ovmf", "machine": "q35",
                "efidisk0": "local-lvm:vm-103-disk-0,efitype=4m,size=4M",
                "scsihw": "virtio-scsi-pci",
                "scsi0": "local-lvm:vm-103-disk-1,size=100G",
                "hostpci0": "0000:17:00.0,pcie=1,x-vga=1", "hostpci1": "00:1f.3",
                "net0": "virtio=BC:24:11:5A:22:01,bridge=vmbr0,tag=30",
                "net1": "vmxnet3=BC:24:11:5A:22:02,bridge=vmbr1",
                "vga": "none",
            }),
        ),
        vm(
            "pve1",
            104,
            "stopped",
            json!({
                "name": "installer", "memory": "1024", "cpu": "kvm64", "cores": 1, "bios": "seabios",
                "ostype": "l26",
                "ide2": "local:iso/debian-13.1.0-amd64-netinst.iso,media=cdrom,size=765952K",
                "sata0": "local-lvm:vm-104-disk-0,size=16G",
                "net0": "rtl8139=BC:24:11:5A:23:01,bridge=vmbr0",
                "serial0": "socket", "vga": "serial0", "boot": "order=ide2;sata0",
            }),
        ),
        vm(
            "pve1",
            105,
            "running",
            json!({
                "name": "empty-cd", "memory": "512", "cpu": "host", "cores": 1, "ostype": "l26",
                "ide2": "none,media=cdrom", "scsi0": "local-lvm:vm-105-disk-0,size=8G",
                "net0": "virtio=BC:24:11:5A:24:01,bridge=vmbr0",
            }),
        ),
        vm(
            "pve1",
            106,
            "running",
            json!({
                "name": "app.example.com", "memory": "4096", "cpu": "host", "cores": 2, "ostype": "l26",
                "scsi0": "local-lvm:vm-106-disk-0,backup=0,cache=writeback,size=40G",
                "net0": "virtio=BC:24:11:5A:26:01,bridge=vmbr0,mtu=1400",
                "acpi": 1, "tablet": 0,
            }),
        ),
        vm(
            "pve1",
            107,
            "running",
            json!({
                "name": "keys-both", "memory": "1024", "cpu": "host", "cores": 1, "ostype": "l26",
                "scsi0": "local-lvm:vm-107-disk-0,size=8G",
                "ide2": "local-lvm:vm-107-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:5A:27:01,bridge=vmbr0",
                "ciuser": "deploy", "sshkeys": both, "ipconfig0": "ip=10.0.30.8/24,gw=10.0.30.1,ip6=auto",
            }),
        ),
        vm(
            "pve1",
            108,
            "running",
            json!({
                "name": "with-password", "memory": "1024", "cpu": "host", "cores": 1, "ostype": "l26",
                "scsi0": "local-lvm:vm-108-disk-0,size=8G",
                "ide2": "local-lvm:vm-108-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:5A:29:01,bridge=vmbr0",
                "ciuser": "root", "cipassword": "**********", "ipconfig0": "ip=dhcp",
            }),
        ),
        vm(
            "pve1",
            109,
            "running",
            json!({
                "name": "protected", "memory": "2048", "cpu": "host", "cores": 2, "ostype": "l26",
                "scsi0": "local-lvm:vm-109-disk-0,size=20G",
                "net0": "virtio=BC:24:11:5A:2C:01,bridge=vmbr0",
                "protection": 1, "startup": "order=2,up=30", "onboot": 0,
            }),
        ),
        vm(
            "pve1",
            110,
            "running",
            json!({
                "name": "tuned", "memory": "4096", "cpu": "host", "cores": 2, "ostype": "l26",
                "args": "-device intel-iommu", "balloon": 1024, "cpuunits": 1024,
                "scsi0": "local-lvm:vm-110-disk-0,size=20G",
                "net0": "virtio=BC:24:11:5A:2D:01,bridge=vmbr0",
                "tags": "tuned",
            }),
        ),
        vm(
            "pve1",
            111,
            "stopped",
            json!({
                "name": "sata-only", "memory": "2048", "cpu": "host", "cores": 2, "ostype": "other",
                "sata0": "local-lvm:vm-111-disk-0,size=10G",
                "sata1": "local-zfs:vm-111-disk-0,size=50G,ssd=1",
                "net0": "e1000e=BC:24:11:5A:2E:01,bridge=vmbr0,firewall=1,rate=25,tag=111",
            }),
        ),
        vm(
            "pve1",
            9000,
            "stopped",
            json!({
                "name": "debian-13-cloud", "template": 1, "memory": "2048", "cpu": "x86-64-v2-AES", "cores": 2,
                "ostype": "l26", "scsihw": "virtio-scsi-single",
                "scsi0": "local-lvm:base-9000-disk-0,discard=on,iothread=1,size=3G",
                "ide2": "local-lvm:vm-9000-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:5A:10:01,bridge=vmbr0",
                "serial0": "socket", "vga": "serial0", "agent": "1", "boot": "order=scsi0;ide2;net0",
                "ciuser": "debian", "ipconfig0": "ip=dhcp",
                "tags": "debian;template",
            }),
        ),
        // --- qemu on pve2
        vm(
            "pve2",
            120,
            "running",
            json!({
                "name": "legacy-app", "memory": "4096", "cpu": "host", "cores": 2, "ostype": "l26",
                "scsi0": "local-lvm:vm-120-disk-0,size=40G",
                "net0": "virtio=BC:24:11:5A:40:01,bridge=vmbr0",
                "tags": "legacy",
            }),
        ),
        vm(
            "pve2",
            121,
            "running",
            json!({
                "name": "multi-nic", "memory": "2048", "cpu": "host", "cores": 2, "ostype": "l26",
                "scsi0": "local-lvm:vm-121-disk-0,size=16G",
                "net0": "virtio=BC:24:11:5A:41:01,bridge=vmbr0",
                "net2": "virtio=BC:24:11:5A:41:03,bridge=vmbr2,firewall=0,rate=100,tag=200",
            }),
        ),
        vm(
            "pve2",
            122,
            "stopped",
            json!({
                "name": "win-11", "memory": "8192", "cpu": "host", "cores": 4, "ostype": "win11",
                "bios": "ovmf", "machine": "pc-q35-9.0",
                "efidisk0": "local-lvm:vm-122-disk-0,efitype=4m,pre-enrolled-keys=0,size=4M",
                "tpmstate0": "local-lvm:vm-122-disk-1,size=4M,version=v2.0",
                "sata0": "local-lvm:vm-122-disk-2,size=128G",
                "ide2": "nfs-iso:iso/virtio-win-0.1.271.iso,media=cdrom,size=736016K",
                "net0": "e1000e=BC:24:11:5A:42:01,bridge=vmbr0",
                "tablet": 1, "vga": "std",
            }),
        ),
        vm(
            "pve2",
            123,
            "running",
            json!({
                "name": "ci-runner", "memory": "4096", "cpu": "host", "cores": 4, "ostype": "l26",
                "scsihw": "virtio-scsi-single",
                "scsi0": "local-zfs:vm-123-disk-0,discard=on,iothread=1,size=64G,ssd=1",
                "scsi1": "local-zfs:vm-123-disk-1,iothread=1,size=200G",
                "ide2": "local-lvm:vm-123-cloudinit,media=cdrom",
                "ide3": "nfs-iso:iso/ubuntu-24.04.1-live-server-amd64.iso,media=cdrom,size=2708862K",
                "net0": "virtio=BC:24:11:5A:44:01,bridge=vmbr0,firewall=1,tag=50",
                "ciuser": "runner", "sshkeys": pve_sshkeys(&[KEY_CI]),
                "ipconfig0": "ip=10.0.50.20/24,gw=10.0.50.1",
                "tags": "ci;linux",
            }),
        ),
        vm(
            "pve2",
            124,
            "stopped",
            json!({
                "name": "virtio-blk", "memory": "1024", "cpu": "host", "cores": 1, "ostype": "l26",
                "virtio0": "local-lvm:vm-124-disk-0,discard=on,size=12G",
                "virtio1": "local-lvm:vm-124-disk-1,iothread=1,size=2G",
                "net0": "virtio=bc:24:11:5a:45:01,bridge=vmbr0,rate=5",
            }),
        ),
        vm(
            "pve2",
            9001,
            "stopped",
            json!({
                "name": "ubuntu-24-04", "template": 1, "memory": "2048", "cpu": "host", "cores": 2,
                "ostype": "l26", "bios": "ovmf", "machine": "q35",
                "efidisk0": "local-lvm:base-9001-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M",
                "scsi0": "local-lvm:base-9001-disk-1,size=8G",
                "net0": "virtio=BC:24:11:5A:43:01,bridge=vmbr0,rate=50",
            }),
        ),
        // --- containers on pve1
        ct(
            "pve1",
            201,
            "running",
            json!({
                "hostname": "dns-01", "cores": 1, "memory": 512, "swap": 256, "ostype": "debian",
                "rootfs": "local-lvm:vm-201-disk-0,size=8G",
                "mp0": "local-lvm:vm-201-disk-1,backup=1,mp=/var/lib/unbound,size=4G",
                "mp1": "/srv/dns-zones,mp=/etc/zones,ro=1",
                "net0": "name=eth0,bridge=vmbr0,gw=10.0.20.1,hwaddr=BC:24:11:5A:30:01,ip=10.0.20.53/24,type=veth",
                "net1": "name=eth1,bridge=vmbr0,hwaddr=BC:24:11:5A:30:02,ip=10.0.40.53/24,tag=40,type=veth",
                "nameserver": "1.1.1.1 9.9.9.9", "searchdomain": "home.arpa",
                "features": "nesting=1", "onboot": 1, "unprivileged": 1,
                "description": "Recursive resolver\n",
                "tags": "dns",
            }),
        ),
        ct(
            "pve1",
            202,
            "stopped",
            json!({
                "hostname": "privileged", "cores": 2, "memory": 1024, "swap": 512, "ostype": "debian",
                "rootfs": "local-lvm:vm-202-disk-0,size=16G",
                "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:32:01,ip=dhcp,type=veth",
                "unprivileged": 0, "features": "fuse=1,keyctl=1,nesting=1", "protection": 1,
                "startup": "order=1",
            }),
        ),
        ct(
            "pve1",
            203,
            "running",
            json!({
                "hostname": "proxy", "cores": 1, "memory": 256, "swap": 256, "ostype": "alpine",
                "rootfs": "local-zfs:subvol-203-disk-0,size=2G",
                "net0": "name=eth0,bridge=vmbr0,firewall=1,gw=10.0.60.1,hwaddr=BC:24:11:5A:33:01,ip=10.0.60.4/24,rate=50,type=veth",
                "unprivileged": 1, "tags": "edge;proxy",
            }),
        ),
        ct(
            "pve1",
            204,
            "running",
            json!({
                "hostname": "mqtt", "cores": 1, "memory": 512, "swap": 0, "ostype": "debian",
                "rootfs": "local-lvm:vm-204-disk-0,size=4G",
                "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:36:01,ip=dhcp,type=veth",
                "unprivileged": 1, "onboot": 1,
            }),
        ),
        ct(
            "pve1",
            9100,
            "stopped",
            json!({
                "hostname": "ct-base", "template": 1, "cores": 1, "memory": 512, "swap": 512, "ostype": "debian",
                "rootfs": "local-lvm:base-9100-disk-0,size=4G",
                "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:11:01,ip=dhcp,type=veth",
                "unprivileged": 1,
            }),
        ),
        // --- containers on pve2
        ct(
            "pve2",
            205,
            "running",
            json!({
                "hostname": "files", "cores": 2, "memory": 2048, "swap": 512, "ostype": "debian",
                "rootfs": "local-lvm:vm-205-disk-0,size=8G",
                "mp0": "/mnt/tank/media,mp=/media",
                "mp2": "local-lvm:vm-205-disk-1,mp=/srv/data,size=100G",
                "net0": "name=eth0,bridge=vmbr0,gw=10.0.20.1,hwaddr=BC:24:11:5A:34:01,ip=10.0.20.60/24,type=veth",
                "net1": "name=eth1,bridge=vmbr1,hwaddr=BC:24:11:5A:34:02,ip=192.168.77.60/24,tag=77,type=veth",
                "unprivileged": 1, "tags": "nas;storage",
            }),
        ),
        ct(
            "pve2",
            206,
            "stopped",
            json!({
                "hostname": "builder", "cores": 4, "memory": 4096, "swap": 0, "ostype": "ubuntu",
                "rootfs": "local-lvm:vm-206-disk-0,size=32G",
                "net0": "name=eth0,bridge=vmbr1,hwaddr=BC:24:11:5A:35:01,ip=dhcp,tag=60,type=veth",
                "unprivileged": 1,
            }),
        ),
        ct(
            "pve2",
            207,
            "running",
            json!({
                "hostname": "monitor", "cores": 2, "memory": 1024, "swap": 512, "ostype": "debian",
                "rootfs": "local-lvm:vm-207-disk-0,size=10G",
                "mp0": "local-lvm:vm-207-disk-1,mp=/var/lib/prometheus,size=20G",
                "net0": "name=eth0,bridge=vmbr0,gw=10.0.20.1,hwaddr=BC:24:11:5A:37:01,ip=10.0.20.70/24,type=veth",
                "unprivileged": 1, "tags": "monitoring",
            }),
        ),
        ct(
            "pve2",
            9101,
            "stopped",
            json!({
                "hostname": "alpine-base", "template": 1, "cores": 1, "memory": 256, "swap": 256, "ostype": "alpine",
                "rootfs": "local-lvm:base-9101-disk-0,size=1G",
                "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:12:01,ip=dhcp,type=veth",
                "unprivileged": 1,
            }),
        ),
    ];
    json!({
        "nodes": ["pve1", "pve2"],
        "storages": {
            "local": {"type": "dir", "path": "/var/lib/vz",
                      "content": "iso,vztmpl,backup,snippets", "avail": 53687091200u64},
            "local-zfs": {"type": "zfspool", "pool": "rpool/data", "content": "images,rootdir",
                          "avail": 536870912000u64},
            "nfs-iso": {"type": "nfs", "path": "/mnt/pve/nfs-iso", "content": "iso",
                        "avail": 107374182400u64}
        },
        "files": [
            {"storage": "local", "name": "debian-13.1.0-amd64-netinst.iso", "size": 784334848, "content": "iso"},
            {"storage": "local", "name": "debian-13-standard_13.1-2_amd64.tar.zst", "size": 126829056, "content": "vztmpl"},
            {"storage": "local", "name": "alpine-3.22-default_20250617_amd64.tar.xz", "size": 3145728, "content": "vztmpl"},
            {"storage": "nfs-iso", "name": "ubuntu-24.04.1-live-server-amd64.iso", "size": 2773874688u64, "content": "iso"},
            {"storage": "nfs-iso", "name": "virtio-win-0.1.271.iso", "size": 753680384, "content": "iso"}
        ],
        "guests": guests,
    })
}

fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for d in KIND_DIRS {
        let dir = root.join(d).join("home");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            out.insert(
                format!("{d}/home/{}", e.file_name().to_string_lossy()),
                std::fs::read_to_string(e.path()).unwrap(),
            );
        }
    }
    out
}

/// `diff --output json` of `home`: (actions, deferred, anomalies).
fn live_plan(pve: &FakePve, repo: &Repo) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    let run = proxops(pve, repo, &["diff", "--output", "json"]);
    assert_eq!(run.code, 0, "{}", run.all());
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let home = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "home")
        .unwrap()
        .clone();
    let list = |k: &str| home[k].as_array().cloned().unwrap_or_default();
    (list("actions"), list("deferred"), list("anomalies"))
}

/// The gap report and everything after it in adopt's output.
fn report_text(stdout: &str) -> String {
    stdout
        .lines()
        .filter(|l| !l.starts_with("wrote ") && !l.starts_with("kept "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Names an adopted CTTemplate in every INCOMPLETE container manifest,
/// as an operator would, and lists every adopted file.
fn complete_and_list(repo: &Repo, files: &BTreeMap<String, String>) {
    let ctt = files
        .keys()
        .find(|k| k.starts_with("ctt/home/debian-13-standard"))
        .unwrap_or_else(|| panic!("the debian container template is adopted: {files:#?}"));
    let ctt_name = files[ctt]
        .lines()
        .find_map(|l| l.trim().strip_prefix("name: "))
        .unwrap()
        .to_owned();
    for (rel, text) in files {
        if text.contains(proxops_core::adopt::TEMPLATE_PLACEHOLDER) {
            repo.write(
                rel,
                &text.replace(proxops_core::adopt::TEMPLATE_PLACEHOLDER, &ctt_name),
            );
        }
    }
    let listed: Vec<String> = files.keys().map(|k| format!("../../{k}")).collect();
    repo.set_resources(&listed.iter().map(String::as_str).collect::<Vec<_>>());
}

#[test]
fn an_estate_proxops_never_touched_adopts_into_manifests_that_plan_only_the_ownership_claim() {
    let seed = estate_seed();
    let guest_count = seed["guests"].as_array().unwrap().len();
    assert!(guest_count >= 25);
    let pve = FakePve::start(&seed).unwrap();
    let repo = empty_repo(&pve);

    pve.forget_requests().unwrap();
    let adopted = proxops(&pve, &repo, &["adopt"]);
    assert_eq!(adopted.code, 0, "{}", adopted.all());
    let requests = pve.requests().unwrap();
    assert!(!requests.is_empty());
    assert!(
        requests.iter().all(|(m, _, _)| m == "GET"),
        "adopt sent a write: {requests:?}"
    );

    let files = tree(repo.path());
    let guests = files
        .keys()
        .filter(|k| !k.starts_with("iso/") && !k.starts_with("ctt/"))
        .count();
    assert_eq!(guests, guest_count, "{files:#?}\n{}", adopted.all());
    // 3 ISOs and 2 container templates, each one manifest for both nodes.
    assert_eq!(files.len(), guest_count + 5, "{files:#?}");
    assert!(
        adopted
            .stdout
            .contains("add to clusters/home/resources.yaml:"),
        "{}",
        adopted.all()
    );
    insta::assert_snapshot!("estate_adopt_report", report_text(&adopted.stdout));
    for (snap, rel) in [
        ("estate_vm_cloud_init", "vm/home/web-01.yaml"),
        ("estate_vm_ovmf", "vm/home/db-01.yaml"),
        ("estate_lxc_mounts", "lxc/home/dns-01.yaml"),
        ("estate_templatevm", "templatevm/home/debian-13-cloud.yaml"),
        ("estate_templatect", "templatect/home/ct-base.yaml"),
    ] {
        let text = files
            .get(rel)
            .unwrap_or_else(|| panic!("{rel} not adopted: {:#?}", files.keys()));
        insta::assert_snapshot!(snap, text);
    }

    complete_and_list(&repo, &files);
    let valid = proxops(&pve, &repo, &["validate"]);
    assert_eq!(valid.code, 0, "{}", valid.all());

    let (actions, deferred, anomalies) = live_plan(&pve, &repo);
    assert!(deferred.is_empty(), "{deferred:#?}");
    assert!(anomalies.is_empty(), "{anomalies:#?}");
    assert_eq!(actions.len(), guest_count, "{actions:#?}");
    let mut claimed = std::collections::BTreeSet::new();
    for a in &actions {
        assert_eq!(a["action"], "update", "{a:#}");
        let changes = a["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "{a:#}");
        assert_eq!(changes[0]["field"], "tags", "{a:#}");
        let to = changes[0]["to"].as_str().unwrap();
        assert!(to.split(';').any(|t| t == "proxops"), "{a:#}");
        assert!(claimed.insert(a["id"].to_string()), "two actions for {a:#}");
    }

    // Unchanged PVE: a second adopt writes nothing (the completed files
    // are kept, never overwritten).
    pve.forget_requests().unwrap();
    let again = proxops(&pve, &repo, &["adopt"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(!again.stdout.contains("wrote "), "{}", again.all());
    assert!(writes(&pve).is_empty());
}

#[test]
fn adopting_a_recording_of_the_estate_writes_byte_identical_files() {
    let pve = FakePve::start(&estate_seed()).unwrap();
    let live = empty_repo(&pve);
    let adopted = proxops(&pve, &live, &["adopt"]);
    assert_eq!(adopted.code, 0, "{}", adopted.all());

    let rec = tempfile::tempdir().unwrap();
    let recorded = proxops(
        &pve,
        &live,
        &["record", "--out", rec.path().to_str().unwrap()],
    );
    assert_eq!(recorded.code, 0, "{}", recorded.all());

    let offline = empty_repo(&pve);
    let replayed = proxops(
        &pve,
        &offline,
        &["adopt", "--replay", rec.path().to_str().unwrap()],
    );
    assert_eq!(replayed.code, 0, "{}", replayed.all());
    let (a, b) = (tree(live.path()), tree(offline.path()));
    assert_eq!(a.len(), b.len());
    for (rel, text) in &a {
        assert_eq!(
            b.get(rel).map(String::as_bytes),
            Some(text.as_bytes()),
            "{rel}"
        );
    }
    assert_eq!(adopted.stdout, replayed.stdout);
}
