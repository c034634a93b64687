//! Adoption round trip (spec §15.5): a realistic cluster is adopted, the
//! manifests are listed in a composition and loaded like a real
//! repository, and the plan against the same cluster holds nothing but the
//! ownership-tag claim of every untagged guest.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proxops_core::action::{Op, Work};
use proxops_core::adopt::{
    AdoptError, AdoptOptions, Adoption, TEMPLATE_PLACEHOLDER, adopt, render_gaps, sanitize,
    storages_to_read,
};
use proxops_core::config::Overrides;
use proxops_core::drift::{CloudInitSecrets, Context};
use proxops_core::live::{
    GuestType, LiveConfig, LiveGuest, LiveSnapshot, NodeState, Power, ReadFailure, StorageContent,
};
use proxops_core::names::{ClusterName, NodeName, StorageId, Vmid};
use proxops_core::plan::{Plan, Policy};
use proxops_core::planner::plan;
use proxops_core::repo::{self, ClusterDesired, RepoInput};
use proxops_core::wire::{TagSet, percent_encode};
use serde_json::{Value, json};

const KEY_OPS: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y+TBx08F7zRdhBlKjk7aywMT ops@host";
const KEY_CI: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRydXN0ZWQtY2kta2V5LWZvci10ZXN0cy1vbmx5LSEh ci@runner";
const KEY_STRANGER: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAQwBzdHJhbmdlci1rZXktbW9kdWx1cy1mb3ItdGhlLXRlc3RzdHJhbmdlci1rZXktbW9kdWx1cy1mb3ItdGhlLXRlc3Q= someone@else";

fn node(n: &str) -> NodeName {
    NodeName::new(n).unwrap()
}

fn cluster() -> ClusterName {
    ClusterName::new("home").unwrap()
}

fn listing(v: Value) -> Result<StorageContent, ReadFailure> {
    Ok(StorageContent::from_json(&v).unwrap())
}

fn add(s: &mut LiveSnapshot, n: &str, gt: GuestType, vmid: u64, power: Power, cfg: Value) {
    let cfg = LiveConfig::from_json(&cfg).unwrap();
    let name = cfg
        .get("name")
        .or(cfg.get("hostname"))
        .unwrap_or("")
        .to_owned();
    let template = cfg.is_template().unwrap();
    let tags = cfg.tags().unwrap_or_else(|_| TagSet::default());
    s.guests.insert(
        (node(n), Vmid::new(vmid).unwrap()),
        LiveGuest {
            node: node(n),
            vmid: Vmid::new(vmid).unwrap(),
            guest_type: gt,
            name,
            template,
            power: if template { Power::Stopped } else { power },
            lock: None,
            ha_state: None,
            tags,
            config: Ok(cfg),
        },
    );
}

fn qm(s: &mut LiveSnapshot, n: &str, vmid: u64, power: Power, cfg: Value) {
    add(s, n, GuestType::Qemu, vmid, power, cfg);
}

fn ct(s: &mut LiveSnapshot, n: &str, vmid: u64, power: Power, cfg: Value) {
    add(s, n, GuestType::Lxc, vmid, power, cfg);
}

fn meta(vmid: u64) -> Value {
    json!({
        "meta": "creation-qemu=10.0.2,ctime=1764000000",
        "smbios1": format!("uuid=6e1a3c1e-0000-4000-8000-{vmid:012}"),
        "vmgenid": format!("0a7e4d2c-0000-4000-8000-{vmid:012}"),
        "ostype": "l26",
        "digest": format!("{vmid:040}"),
    })
}

fn with(base: Value, extra: Value) -> Value {
    let mut m = base.as_object().unwrap().clone();
    for (k, v) in extra.as_object().unwrap() {
        m.insert(k.clone(), v.clone());
    }
    Value::Object(m)
}

/// A two-node home cluster (pve1, pve2) plus a node outside the allowlist.
fn snapshot() -> LiveSnapshot {
    let mut s = LiveSnapshot::default();
    for n in ["pve1", "pve2", "pve3"] {
        s.nodes.insert(node(n), NodeState::Online);
    }
    let st = |x: &str| StorageId::new(x).unwrap();
    s.storage.insert(
        (node("pve1"), st("local")),
        listing(json!([
            {"volid": "local:iso/debian-13.1.0-amd64-netinst.iso", "content": "iso", "format": "iso", "size": 784334848, "ctime": 1764000000},
            {"volid": "local:iso/Rescue Disk.iso", "content": "iso", "format": "iso", "size": 1048576, "ctime": "1764000000"},
            {"volid": "local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst", "content": "vztmpl", "format": "tzst", "size": 126829056},
            {"volid": "local:vztmpl/alpine-3.22-default_20250617_amd64.tar.xz", "content": "vztmpl", "format": "txz", "size": 3145728},
            {"volid": "local:import/debian-13-genericcloud-amd64.qcow2", "content": "import", "format": "qcow2", "size": 3221225472u64},
            {"volid": "local:backup/vzdump-qemu-101-2026_11_01-00_00_00.vma.zst", "content": "backup", "format": "vma.zst", "size": 1000}
        ])),
    );
    s.storage.insert(
        (node("pve2"), st("local")),
        listing(json!([
            {"volid": "local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst", "content": "vztmpl", "format": "tzst", "size": 126829056}
        ])),
    );
    for n in ["pve1", "pve2"] {
        s.storage.insert(
            (node(n), st("nfs-iso")),
            listing(json!([
                {"volid": "nfs-iso:iso/ubuntu-24.04.1-live-server-amd64.iso", "content": "iso", "format": "iso", "size": 2773874688u64},
                {"volid": "nfs-iso:iso/virtio-win-0.1.271.iso", "content": "iso", "format": "iso", "size": 753680384}
            ])),
        );
    }
    s.storage.insert(
        (node("pve1"), st("local-lvm")),
        listing(json!([
            {"volid": "local-lvm:vm-112-disk-0", "content": "images", "format": "raw", "size": 34359738368u64},
            {"volid": "local-lvm:vm-202-disk-0", "content": "rootdir", "format": "raw", "size": 4294967296u64}
        ])),
    );
    s.storage
        .insert((node("pve2"), st("local-lvm")), listing(json!([])));
    s.storage
        .insert((node("pve1"), st("local-zfs")), listing(json!([])));

    let ssh_ops = percent_encode(KEY_OPS);
    let ssh_both = percent_encode(&format!("{KEY_OPS}\n{KEY_CI}"));
    let ssh_mixed = percent_encode(&format!("{KEY_CI}\n{KEY_STRANGER}"));

    // --- VMs on pve1
    qm(
        &mut s,
        "pve1",
        101,
        Power::Running,
        with(
            meta(101),
            json!({
                "name": "web-01", "memory": "2048", "cpu": "x86-64-v2-AES", "cores": 2, "sockets": 1,
                "scsihw": "virtio-scsi-single", "machine": "q35",
                "scsi0": "local-lvm:vm-101-disk-0,discard=on,iothread=1,ssd=1,size=32G",
                "ide2": "local-lvm:vm-101-cloudinit,media=cdrom",
                "ide3": "nfs-iso:iso/ubuntu-24.04.1-live-server-amd64.iso,media=cdrom,size=2708862K",
                "net0": "virtio=BC:24:11:5A:20:01,bridge=vmbr0,firewall=1,tag=20",
                "agent": "1", "boot": "order=scsi0;ide2;net0", "onboot": 1,
                "ciuser": "ops", "sshkeys": ssh_ops, "ipconfig0": "ip=10.0.20.11/24,gw=10.0.20.1",
                "nameserver": "10.0.20.1 1.1.1.1", "searchdomain": "home.arpa",
                "description": "Public web front end\n\n  - nginx: 1.26\n  - owner: \"ops\" <ops@example.org>\n",
                "tags": "web;frontend",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        102,
        Power::Running,
        with(
            meta(102),
            json!({
                "name": "db-01", "memory": "8192", "cpu": "host", "cores": 4,
                "bios": "ovmf", "machine": "pc-q35-9.2+pve1",
                "efidisk0": "local-lvm:vm-102-disk-0,efitype=4m,ms-cert=2023w,pre-enrolled-keys=1,size=4M",
                "tpmstate0": "local-lvm:vm-102-disk-1,size=4M,version=v2.0",
                "virtio0": "local-lvm:vm-102-disk-2,iothread=1,size=64G",
                "virtio1": "local-zfs:vm-102-disk-0,aio=io_uring,discard=on,size=200G",
                "sata0": "local-lvm:vm-102-disk-3,discard=on,ssd=1,size=1T",
                "net0": "e1000=BC:24:11:5A:21:01,bridge=vmbr0,rate=12.5",
                "tags": "db;proxops",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        103,
        Power::Stopped,
        with(
            meta(103),
            json!({
                "name": "gpu-box", "memory": "16384", "cpu": "host", "cores": 8, "numa": 1, "sockets": 2,
                "bios": "ovmf", "machine": "q35",
                "efidisk0": "local-lvm:vm-103-disk-0,efitype=4m,size=4M",
                "scsihw": "virtio-scsi-pci",
                "scsi0": "local-lvm:vm-103-disk-1,size=100G",
                "hostpci0": "0000:17:00.0,pcie=1,x-vga=1", "hostpci1": "00:1f.3",
                "net0": "virtio=BC:24:11:5A:22:01,bridge=vmbr0,tag=30",
                "net1": "vmxnet3=BC:24:11:5A:22:02,bridge=vmbr1",
                "vga": "none",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        104,
        Power::Stopped,
        with(
            meta(104),
            json!({
                "name": "installer", "memory": "1024", "cpu": "kvm64", "cores": 1, "bios": "seabios",
                "ide2": "local:iso/debian-13.1.0-amd64-netinst.iso,media=cdrom,size=765952K",
                "sata0": "local-lvm:vm-104-disk-0,size=16G",
                "net0": "rtl8139=BC:24:11:5A:23:01,bridge=vmbr0",
                "serial0": "socket", "vga": "serial0", "boot": "order=ide2;sata0",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        105,
        Power::Running,
        with(
            meta(105),
            json!({
                "name": "empty-cd", "memory": "512", "cpu": "host", "cores": 1,
                "ide2": "none,media=cdrom", "scsi0": "local-lvm:vm-105-disk-0,size=8G",
                "net0": "virtio=BC:24:11:5A:24:01,bridge=vmbr0", "tags": "proxops",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        106,
        Power::Running,
        with(
            meta(106),
            json!({
                "name": "Web-01", "memory": "2048", "cpu": "host", "cores": 2,
                "scsi0": "local-lvm:vm-106-disk-0,size=32G",
                "net0": "virtio=BC:24:11:5A:25:01,bridge=vmbr0",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        107,
        Power::Running,
        with(
            meta(107),
            json!({
                "name": "app.example.com", "memory": "4096", "cpu": "host,hidden=1,flags=+aes", "cores": 2,
                "scsi0": "local-lvm:vm-107-disk-0,cache=writeback,backup=0,size=40G",
                "net0": "virtio=BC:24:11:5A:26:01,bridge=vmbr0,mtu=1400",
                "hotplug": "network,disk,cpu,memory", "acpi": 1, "tablet": 0,
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        108,
        Power::Running,
        with(
            meta(108),
            json!({
                "name": "keys-all", "memory": "1024", "cpu": "host", "cores": 1,
                "scsi0": "local-lvm:vm-108-disk-0,size=8G", "ide2": "local-lvm:vm-108-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:5A:27:01,bridge=vmbr0",
                "ciuser": "deploy", "sshkeys": ssh_both, "ipconfig0": "ip=10.0.30.8/24,gw=10.0.30.1,ip6=auto",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        109,
        Power::Running,
        with(
            meta(109),
            json!({
                "name": "keys-mixed", "memory": "1024", "cpu": "host", "cores": 1,
                "scsi0": "local-lvm:vm-109-disk-0,size=8G", "ide2": "local-lvm:vm-109-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:5A:28:01,bridge=vmbr0",
                "sshkeys": ssh_mixed, "ipconfig0": "ip=dhcp",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        110,
        Power::Running,
        with(
            meta(110),
            json!({
                "name": "with-password", "memory": "1024", "cpu": "host", "cores": 1,
                "scsi0": "local-lvm:vm-110-disk-0,size=8G", "ide2": "local-lvm:vm-110-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:5A:29:01,bridge=vmbr0",
                "ciuser": "root", "cipassword": "**********", "cicustom": "user=local:snippets/user-110.yaml",
                "tags": "proxops",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        112,
        Power::Running,
        with(
            meta(112),
            json!({
                "name": "sizeless", "memory": "2048", "cpu": "host", "cores": 2,
                "scsi0": "local-lvm:vm-112-disk-0,iothread=1", "scsihw": "virtio-scsi-single",
                "net0": "virtio=BC:24:11:5A:2B:01,bridge=vmbr0",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        113,
        Power::Running,
        with(
            meta(113),
            json!({
                "name": "protected", "memory": "2048", "cpu": "host", "cores": 2,
                "scsi0": "local-lvm:vm-113-disk-0,size=20G",
                "net0": "virtio=BC:24:11:5A:2C:01,bridge=vmbr0",
                "protection": 1, "startup": "order=2,up=30", "onboot": 0,
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        114,
        Power::Running,
        with(
            meta(114),
            json!({
                "name": "tuned", "memory": "4096", "cpu": "host", "cores": 2, "kvm": 1,
                "args": "-device intel-iommu", "balloon": 1024, "cpuunits": 1024, "cpulimit": 2,
                "scsi0": "local-lvm:vm-114-disk-0,size=20G", "unused0": "local-lvm:vm-114-disk-1",
                "net0": "virtio=BC:24:11:5A:2D:01,bridge=vmbr0", "tags": "proxops;tuned",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        131,
        Power::Running,
        with(
            meta(131),
            json!({
                "name": "rescue", "memory": "1024", "cpu": "host", "cores": 1,
                "ide2": "local:iso/Rescue Disk.iso,media=cdrom,size=1M",
                "scsi0": "local-lvm:vm-131-disk-0,size=8G",
                "net0": "virtio=BC:24:11:5A:2E:01,bridge=vmbr0",
            }),
        ),
    );
    qm(
        &mut s,
        "pve1",
        9000,
        Power::Stopped,
        with(
            meta(9000),
            json!({
                "name": "debian-13-cloud", "template": 1, "memory": "2048", "cpu": "x86-64-v2-AES", "cores": 2,
                "scsihw": "virtio-scsi-single",
                "scsi0": "local-lvm:base-9000-disk-0,discard=on,iothread=1,size=3G",
                "ide2": "local-lvm:vm-9000-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:5A:10:01,bridge=vmbr0",
                "serial0": "socket", "vga": "serial0", "agent": "1", "boot": "order=scsi0;ide2;net0",
                "tags": "debian;proxops;template",
            }),
        ),
    );

    // --- VMs on pve2
    qm(
        &mut s,
        "pve2",
        120,
        Power::Running,
        with(
            meta(120),
            json!({
                "name": "legacy-app", "memory": "4096", "cpu": "host", "cores": 2,
                "scsi0": "local-lvm:vm-120-disk-0,size=40G",
                "net0": "virtio=BC:24:11:5A:40:01,bridge=vmbr0",
                "tags": "proxops-noprune;pveconform",
            }),
        ),
    );
    qm(
        &mut s,
        "pve2",
        121,
        Power::Running,
        with(
            meta(121),
            json!({
                "name": "multi-nic", "memory": "2048", "cpu": "host", "cores": 2,
                "scsi0": "local-lvm:vm-121-disk-0,size=16G",
                "net0": "virtio=BC:24:11:5A:41:01,bridge=vmbr0",
                "net2": "virtio=BC:24:11:5A:41:03,bridge=vmbr2,tag=200,rate=100,firewall=0",
                "tags": "proxops",
            }),
        ),
    );
    qm(
        &mut s,
        "pve2",
        122,
        Power::Stopped,
        with(
            meta(122),
            json!({
                "name": "win-11", "memory": "8192", "cpu": "host", "cores": 4, "ostype": "win11",
                "bios": "ovmf", "machine": "pc-q35-9.0",
                "efidisk0": "local-lvm:vm-122-disk-0,efitype=4m,pre-enrolled-keys=0,size=4M",
                "tpmstate0": "local-lvm:vm-122-disk-1,size=4M",
                "sata0": "local-lvm:vm-122-disk-2,size=128G",
                "ide2": "nfs-iso:iso/virtio-win-0.1.271.iso,media=cdrom,size=736016K",
                "net0": "e1000e=BC:24:11:5A:42:01,bridge=vmbr0",
                "tablet": 1, "vga": "std",
            }),
        ),
    );
    qm(
        &mut s,
        "pve2",
        9001,
        Power::Stopped,
        with(
            meta(9001),
            json!({
                "name": "ubuntu-24-04", "template": "1", "memory": "2048", "cpu": "host", "cores": 2,
                "scsi0": "local-lvm:base-9001-disk-0,size=8G",
                "net0": "virtio=BC:24:11:5A:43:01,bridge=vmbr0,rate=50",
            }),
        ),
    );

    // --- containers
    ct(
        &mut s,
        "pve1",
        201,
        Power::Running,
        json!({
            "hostname": "dns-01", "arch": "amd64", "cores": 1, "memory": 512, "swap": 256, "ostype": "debian",
            "digest": "98ec2a3e28a20eeccfdff3f170c380feef924350",
            "rootfs": "local-lvm:vm-201-disk-0,size=8G",
            "mp0": "local-lvm:vm-201-disk-1,mp=/var/lib/unbound,backup=1,size=4G",
            "mp1": "/srv/dns-zones,mp=/etc/zones,ro=1",
            "net0": "name=eth0,bridge=vmbr0,gw=10.0.20.1,hwaddr=BC:24:11:5A:30:01,ip=10.0.20.53/24,type=veth",
            "net1": "name=eth1,bridge=vmbr0,hwaddr=BC:24:11:5A:30:02,ip=10.0.40.53/24,tag=40,type=veth",
            "nameserver": "1.1.1.1 9.9.9.9", "searchdomain": "home.arpa",
            "features": "nesting=1", "onboot": 1, "unprivileged": 1,
            "description": "Recursive resolver\n",
            "tags": "dns",
        }),
    );
    ct(
        &mut s,
        "pve1",
        202,
        Power::Running,
        json!({
            "hostname": "sizeless-ct", "cores": 1, "memory": 256, "ostype": "alpine",
            "rootfs": "local-lvm:vm-202-disk-0",
            "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:31:01,ip=dhcp,type=veth",
        }),
    );
    ct(
        &mut s,
        "pve1",
        203,
        Power::Stopped,
        json!({
            "hostname": "privileged", "cores": 2, "memory": 1024, "ostype": "debian",
            "rootfs": "local-lvm:vm-203-disk-0,size=16G",
            "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:32:01,ip=dhcp,type=veth",
            "unprivileged": 0, "features": "keyctl=1,nesting=1,fuse=1", "console": 0, "protection": 1,
            "startup": "order=1", "tags": "proxops",
        }),
    );
    ct(
        &mut s,
        "pve1",
        204,
        Power::Running,
        json!({
            "hostname": "raw-lxc", "cores": 1, "memory": 512, "ostype": "debian",
            "rootfs": "local-lvm:vm-204-disk-0,size=4G,acl=1",
            "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:33:01,ip=10.0.50.4/24,gw=10.0.50.1,rate=50,firewall=1,ip6=auto,type=veth",
            "lxc": [["lxc.apparmor.profile", "unconfined"], ["lxc.cgroup2.devices.allow", "a"]],
            "cmode": "shell", "tty": 2, "cpulimit": 0,
        }),
    );
    ct(
        &mut s,
        "pve2",
        205,
        Power::Running,
        json!({
            "hostname": "files", "cores": 2, "memory": 2048, "ostype": "debian",
            "rootfs": "local-lvm:vm-205-disk-0,size=8G",
            "mp0": "/mnt/tank/media,mp=/media",
            "mp2": "local-lvm:vm-205-disk-1,mp=/srv/data,size=100G,acl=1,quota=1,mountoptions=noatime",
            "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:5A:34:01,ip=10.0.20.60/24,gw=10.0.20.1,type=veth",
            "tags": "proxops;storage",
        }),
    );
    ct(
        &mut s,
        "pve2",
        206,
        Power::Stopped,
        json!({
            "hostname": "arm-builder", "arch": "arm64", "cores": 4, "memory": 4096, "ostype": "debian",
            "rootfs": "local-lvm:vm-206-disk-0,size=32G",
            "net0": "name=wired0,bridge=vmbr1,hwaddr=BC:24:11:5A:35:01,ip=dhcp,type=veth,tag=60",
        }),
    );
    ct(
        &mut s,
        "pve1",
        9100,
        Power::Stopped,
        json!({
            "hostname": "ct-base", "template": 1, "cores": 1, "memory": 512, "swap": 512, "ostype": "debian",
            "rootfs": "local-lvm:base-9100-disk-0,size=4G",
            "net0": "name=net0,bridge=vmbr0,hwaddr=BC:24:11:5A:11:01,ip=dhcp,type=veth",
            "unprivileged": 1, "tags": "proxops",
        }),
    );

    // --- outside the allowlist
    qm(
        &mut s,
        "pve3",
        300,
        Power::Running,
        with(
            meta(300),
            json!({
                "name": "elsewhere", "memory": "1024", "cpu": "host", "cores": 1,
                "scsi0": "local-lvm:vm-300-disk-0,size=8G", "net0": "virtio=BC:24:11:5A:50:01,bridge=vmbr0",
            }),
        ),
    );
    s
}

fn sops_keys() -> BTreeMap<String, String> {
    [
        ("ops".to_owned(), KEY_OPS.to_owned()),
        (
            "ci".to_owned(),
            KEY_CI.replace("ci@runner", "ci@other-comment"),
        ),
    ]
    .into()
}

fn options() -> AdoptOptions {
    AdoptOptions {
        nodes: [node("pve1"), node("pve2")].into(),
        sops_ssh_keys: Some(sops_keys()),
    }
}

fn adopted() -> Adoption {
    adopt(&cluster(), &snapshot(), &options()).unwrap()
}

/// The operator's completion of an INCOMPLETE LXC: name the CTTemplate.
fn complete(text: &str) -> String {
    let out = text
        .lines()
        .map(|l| {
            if l.starts_with("  template: ") {
                "  template: debian-13-standard-13-1-2-amd64".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    format!("{out}\n")
}

/// Loads the adopted files (INCOMPLETE ones completed) as a repository.
fn load(a: &Adoption) -> ClusterDesired {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/home/config.yaml".into(),
        b"pve:\n  clusters:\n    home:\n      base-url: https://pve.example.org:8006\n      nodes: [pve1, pve2]\n".to_vec(),
    );
    let mut lines = a.resources_lines.clone();
    for (path, text) in &a.files {
        if text.contains(TEMPLATE_PLACEHOLDER) {
            files.insert(path.clone(), complete(text).into_bytes());
            lines.push(format!("  - ../../{path}"));
        } else {
            files.insert(path.clone(), text.clone().into_bytes());
        }
    }
    files.insert(
        "clusters/home/resources.yaml".into(),
        format!("resources:\n{}\n", lines.join("\n")).into_bytes(),
    );
    let dirs: BTreeSet<String> = ["home".to_owned()].into();
    let loaded = repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    )
    .unwrap_or_else(|d| panic!("{d:#?}"));
    loaded
        .clusters
        .into_values()
        .next()
        .unwrap()
        .unwrap_or_else(|d| panic!("{d:#?}"))
}

fn plan_of(c: &ClusterDesired, s: &LiveSnapshot) -> Plan {
    let secrets = CloudInitSecrets {
        ssh_keys: sops_keys(),
        passwords: BTreeMap::new(),
    };
    plan(
        c,
        s,
        &Context {
            cluster: c,
            secrets: &secrets,
        },
        &Policy {
            prune_budget: 3,
            nodes: [node("pve1"), node("pve2")].into(),
            allow_empty_prune: false,
            ..Default::default()
        },
    )
}

#[test]
fn adopted_cluster_plans_only_the_ownership_claim_of_untagged_guests() {
    let snap = snapshot();
    let a = adopted();
    let guests = snap
        .guests
        .values()
        .filter(|g| g.node.as_str() != "pve3")
        .count();
    assert!(guests >= 25, "{guests} guests");
    let desired = load(&a);
    assert_eq!(
        desired
            .objects
            .values()
            .filter(|o| o.r#ref.kind.is_guest())
            .count(),
        guests
    );

    let p = plan_of(&desired, &snap);
    assert!(p.anomalies.is_empty(), "{:#?}", p.anomalies);
    assert!(p.skipped.is_empty(), "{:#?}", p.skipped);
    assert!(p.deferred.is_empty(), "{:#?}", p.deferred);
    let mut claimed = BTreeSet::new();
    for act in &p.actions {
        assert_eq!(act.op, Op::Update, "{act:#?}");
        let fields: Vec<&str> = act.changes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["tags"], "{act:#?}");
        let Work::UpdateConfig { params, delete, .. } = &act.work else {
            panic!("{act:#?}")
        };
        assert!(delete.is_empty());
        assert!(
            params
                .get("tags")
                .unwrap()
                .expose()
                .split(';')
                .any(|t| t == "proxops")
        );
        claimed.insert(act.target.to_string());
    }
    let untagged: BTreeSet<String> = snap
        .guests
        .values()
        .filter(|g| g.node.as_str() != "pve3" && !g.tags.contains("proxops"))
        .map(|g| g.vmid.to_string())
        .collect();
    assert_eq!(claimed, untagged);
    assert!(!untagged.is_empty() && untagged.len() < guests);
}

#[test]
fn every_manifest_validates_and_only_containers_are_incomplete() {
    let a = adopted();
    for line in &a.incomplete {
        assert!(
            line.starts_with("lxc/home/") || line.starts_with("templatect/home/"),
            "{line}"
        );
        assert!(
            line.contains("spec.template") || line.contains("proxops tag"),
            "{line}"
        );
    }
    let incomplete_files: BTreeSet<&str> = a
        .incomplete
        .iter()
        .map(|l| l.split(':').next().unwrap())
        .collect();
    let containers: BTreeSet<&str> = a
        .files
        .keys()
        .filter(|p| p.starts_with("lxc/") || p.starts_with("templatect/"))
        .map(String::as_str)
        .collect();
    assert_eq!(incomplete_files, containers);
    // 2-space YAML within yamllint's 80 columns (a lone long word aside).
    for (path, text) in &a.files {
        for l in text.lines() {
            let word = l.trim_start().trim_start_matches("- ");
            assert!(
                l.chars().count() <= 80 || !word.contains(' '),
                "{path}: {l:?}"
            );
            assert!(!l.ends_with(' ') && !l.contains('\t'), "{path}: {l:?}");
            assert_eq!((l.len() - l.trim_start().len()) % 2, 0, "{path}: {l:?}");
        }
    }
    // Listed lines cover exactly the complete files.
    assert_eq!(a.resources_lines.len(), a.files.len() - containers.len());
    assert!(
        a.resources_lines
            .iter()
            .all(|l| l.starts_with("  - ../../") && l.ends_with(".yaml"))
    );
}

#[test]
fn adoption_is_byte_identical_on_unchanged_input() {
    assert_eq!(adopted(), adopted());
    assert_eq!(render_gaps(&adopted()), render_gaps(&adopted()));
}

#[test]
fn names_are_sanitised_and_collisions_take_the_vmid() {
    let a = adopted();
    assert!(a.files.contains_key("vm/home/web-01.yaml"));
    assert!(a.files["vm/home/web-01-106.yaml"].contains("pve-name: Web-01\n"));
    assert!(a.files["vm/home/app-example-com.yaml"].contains("pve-name: app.example.com\n"));
    assert!(a.files.contains_key("templatevm/home/debian-13-cloud.yaml"));
    assert!(a.files.contains_key("templatect/home/ct-base.yaml"));
    assert_eq!(sanitize("  My__VM--01 ", 63), "my-vm-01");
    assert_eq!(sanitize("éé", 63), "");
}

#[test]
fn storage_files_become_one_manifest_per_file_listing_every_node() {
    let a = adopted();
    let ctt = &a.files["ctt/home/debian-13-standard-13-1-2-amd64.yaml"];
    assert!(ctt.contains("  nodes:\n    - pve1\n    - pve2\n"), "{ctt}");
    assert!(
        ctt.contains(
            "url: https://placeholder.invalid/local/debian-13-standard_13.1-2_amd64.tar.zst"
        ),
        "{ctt}"
    );
    assert!(
        a.files
            .contains_key("iso/home/ubuntu-24-04-1-live-server-amd64.yaml")
    );
    assert!(
        !a.files.keys().any(|p| p.starts_with("diskimage/")),
        "import content is never adopted"
    );
    let url_gaps = a.gaps.iter().filter(|g| g.key == "spec.url").count();
    assert_eq!(
        url_gaps,
        a.files
            .keys()
            .filter(|p| p.starts_with("iso/") || p.starts_with("ctt/"))
            .count()
    );
}

#[test]
fn a_file_no_manifest_can_declare_is_a_gap_and_its_cd_drive_stays_pves() {
    let a = adopted();
    assert!(
        a.gaps
            .iter()
            .any(|g| g.key == "spec.filename" && g.value.as_deref() == Some("Rescue Disk.iso")),
        "{:#?}",
        a.gaps
    );
    assert!(
        a.gaps
            .iter()
            .any(|g| g.object == "VM/rescue" && g.key == "ide2"),
        "{:#?}",
        a.gaps
    );
    assert!(!a.files["vm/home/rescue.yaml"].contains("cdrom"));
    assert!(!a.files.keys().any(|p| p.contains("rescue-disk")));
}

#[test]
fn sensitive_values_never_reach_the_report_or_the_manifests() {
    let a = adopted();
    let report = render_gaps(&a);
    assert!(report.contains("cipassword = \"<redacted>\""), "{report}");
    assert!(report.contains("cicustom = \"<redacted>\""), "{report}");
    assert!(!report.contains("**********") && !report.contains("snippets/user-110"));
    for text in a.files.values() {
        assert!(
            !text.contains("AAAAC3NzaC1lZDI1NTE5") && !text.contains("**********"),
            "{text}"
        );
        assert!(
            !text.to_ascii_lowercase().contains("bc:24:11"),
            "MACs are never pinned: {text}"
        );
    }
    assert_eq!(a.cipassword_guests, ["VM/with-password"]);
}

#[test]
fn ssh_keys_become_refs_only_when_every_key_is_in_sops() {
    let a = adopted();
    assert!(a.files["vm/home/keys-all.yaml"].contains(
        "    ssh-key-refs:\n      - cloud-init.ssh-keys.ops\n      - cloud-init.ssh-keys.ci\n"
    ));
    assert!(a.files["vm/home/keys-mixed.yaml"].contains("    ssh-keys:\n      - \"*\"\n"));
    let without = adopt(
        &cluster(),
        &snapshot(),
        &AdoptOptions {
            nodes: options().nodes,
            sops_ssh_keys: None,
        },
    )
    .unwrap();
    assert!(without.files["vm/home/keys-all.yaml"].contains("    ssh-keys:\n      - \"*\"\n"));
}

#[test]
fn description_survives_byte_for_byte() {
    let a = adopted();
    let desired = load(&a);
    let web = desired
        .objects
        .values()
        .find(|o| o.metadata.name.as_str() == "web-01")
        .unwrap();
    let want = "Public web front end\n\n  - nginx: 1.26\n  - owner: \"ops\" <ops@example.org>\n";
    assert_eq!(
        web.spec.vm().unwrap().pve_description.as_deref(),
        Some(want)
    );
}

#[test]
fn guests_outside_the_allowlist_are_skipped_by_name() {
    let a = adopted();
    assert_eq!(
        a.skipped,
        ["pve3 300 elsewhere: node pve3 is outside the cluster's node allowlist"]
    );
    assert!(!a.files.keys().any(|p| p.contains("elsewhere")));
}

#[test]
fn a_failed_read_adopts_nothing() {
    let mut s = snapshot();
    let key = (node("pve1"), Vmid::new(101).unwrap());
    let f = ReadFailure {
        what: "GET /nodes/pve1/qemu/101/config".into(),
        message: "HTTP 500".into(),
    };
    s.guests.get_mut(&key).unwrap().config = Err(f.clone());
    s.failures.push(f);
    let e = adopt(&cluster(), &s, &options()).unwrap_err();
    assert!(
        matches!(e, AdoptError::Unreadable(ref v) if v.len() == 1),
        "{e}"
    );
    assert!(e.to_string().contains("GET /nodes/pve1/qemu/101/config"));
}

// qemu-server src/PVE/API2/Qemu.pm `create_disks`: one cloud-init drive
// per VM, on any of ide/sata/scsi. Adoption takes it from its live slot and
// the plan keeps it there (no second drive on ide2).
#[test]
fn cloud_init_outside_ide2_is_adopted_and_stays_on_its_slot() {
    let mut s = LiveSnapshot::default();
    s.nodes.insert(node("pve1"), NodeState::Online);
    qm(
        &mut s,
        "pve1",
        150,
        Power::Running,
        with(
            meta(150),
            json!({
                "name": "sata-ci", "memory": "1024", "cpu": "host", "cores": 1,
                "scsi0": "local-lvm:vm-150-disk-0,size=8G", "sata1": "local-lvm:vm-150-cloudinit,media=cdrom",
                "net0": "virtio=BC:24:11:5A:60:01,bridge=vmbr0", "tags": "proxops",
            }),
        ),
    );
    let a = adopt(&cluster(), &s, &AdoptOptions::default()).unwrap();
    assert!(!a.gaps.iter().any(|g| g.key == "sata1"), "{:#?}", a.gaps);
    let file = &a.files["vm/home/sata-ci.yaml"];
    assert!(
        file.contains("cloud-init:") && !file.contains("sata1"),
        "{file}"
    );
    let desired = load(&a);
    let p = plan_of(&desired, &s);
    assert!(p.actions.is_empty(), "{:#?}", p.actions);
    assert!(p.anomalies.is_empty(), "{:#?}", p.anomalies);
}

#[test]
fn storages_to_read_keeps_active_storages_with_adoptable_content() {
    let data = json!([
        {"storage": "local", "content": "iso,vztmpl,backup", "active": 1, "enabled": 1, "type": "dir"},
        {"storage": "local-lvm", "content": "images,rootdir", "active": 1, "type": "lvmthin"},
        {"storage": "backups", "content": "backup", "active": 1},
        {"storage": "offline-nfs", "content": "iso", "active": 0},
        {"storage": "disabled", "content": "images", "enabled": 0}
    ]);
    let got = storages_to_read(&node("pve1"), &data).unwrap();
    let names: Vec<&str> = got.iter().map(|s| s.as_str()).collect();
    assert_eq!(names, ["local", "local-lvm"]);
    assert!(storages_to_read(&node("pve1"), &json!({"x": 1})).is_err());
}

#[test]
fn snapshots_of_adopted_manifests() {
    let a = adopted();
    for path in [
        "vm/home/web-01.yaml",
        "vm/home/db-01.yaml",
        "vm/home/gpu-box.yaml",
        "lxc/home/dns-01.yaml",
        "lxc/home/files.yaml",
        "iso/home/ubuntu-24-04-1-live-server-amd64.yaml",
    ] {
        let name = path.replace(['/', '.'], "_");
        insta::assert_snapshot!(name, a.files[path]);
    }
}

#[test]
fn snapshot_of_the_gap_report() {
    let a = adopted();
    insta::assert_snapshot!(render_gaps(&a));
}

#[test]
fn live_ssh_keys_lists_each_key_once_for_a_secrets_merge() {
    let keys = proxops_core::adopt::live_ssh_keys(&snapshot(), &options());
    assert_eq!(keys.len(), 3, "{keys:#?}");
    assert!(keys.iter().any(|k| k == KEY_STRANGER));
    let one_name_two_keys = AdoptOptions {
        nodes: options().nodes,
        sops_ssh_keys: Some([("both".to_owned(), format!("{KEY_OPS}\n{KEY_CI}"))].into()),
    };
    let a = adopt(&cluster(), &snapshot(), &one_name_two_keys).unwrap();
    assert!(
        a.files["vm/home/keys-all.yaml"].contains("    ssh-keys:\n      - \"*\"\n"),
        "a multi-key SOPS entry is never a ref"
    );
}

#[test]
fn unknown_volume_sizes_are_gaps_and_make_the_manifest_incomplete() {
    let mut s = LiveSnapshot::default();
    s.nodes.insert(node("pve1"), NodeState::Online);
    qm(
        &mut s,
        "pve1",
        160,
        Power::Running,
        with(
            meta(160),
            json!({
                "name": "no-size", "memory": "1024", "cpu": "host", "cores": 1,
                "scsi0": "local-lvm:vm-160-disk-0", "net0": "virtio=BC:24:11:5A:61:01,bridge=vmbr0",
            }),
        ),
    );
    ct(
        &mut s,
        "pve1",
        161,
        Power::Running,
        json!({
            "hostname": "no-size-ct", "cores": 1, "memory": 256,
            "rootfs": "local-lvm:vm-161-disk-0", "mp0": "local-lvm:vm-161-disk-1,mp=/data",
            "net0": "name=eth0,bridge=vmbr0,ip=dhcp",
        }),
    );
    let a = adopt(&cluster(), &s, &AdoptOptions::default()).unwrap();
    assert!(
        a.gaps
            .iter()
            .any(|g| g.object == "VM/no-size" && g.key == "scsi0"),
        "{:#?}",
        a.gaps
    );
    assert!(a.gaps.iter().any(|g| g.object == "LXC/no-size-ct"
        && g.key == "rootfs"
        && g.note.contains("volume sizes unknown")));
    assert!(
        a.gaps
            .iter()
            .any(|g| g.object == "LXC/no-size-ct" && g.key == "mp0")
    );
    assert!(
        a.incomplete
            .iter()
            .any(|l| l.starts_with("vm/home/no-size.yaml: spec.disks[0].size")),
        "{:#?}",
        a.incomplete
    );
    assert!(
        a.incomplete
            .iter()
            .any(|l| l.starts_with("lxc/home/no-size-ct.yaml: spec.root.size")),
        "{:#?}",
        a.incomplete
    );
    assert!(a.resources_lines.is_empty(), "{:#?}", a.resources_lines);
    // Still written, for the operator to complete.
    assert!(
        a.files.contains_key("vm/home/no-size.yaml")
            && a.files.contains_key("lxc/home/no-size-ct.yaml")
    );
}

#[test]
fn an_empty_cluster_adopts_nothing() {
    let mut s = LiveSnapshot::default();
    s.nodes.insert(node("pve1"), NodeState::Online);
    let a = adopt(&cluster(), &s, &AdoptOptions::default()).unwrap();
    assert!(a.is_empty());
    assert_eq!(render_gaps(&a), "gaps: none\n");
}
