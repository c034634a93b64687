//! Round trips over the shapes of real PVE config answers, plus property
//! tests: `parse(to_wire(parse(x))) == parse(x)` for every grammar.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use proxops_core::live::LiveConfig;
use proxops_core::wire::{
    Agent, Boot, Bytes, DnsList, Drive, EfiDisk, HostPci, LxcFeatures, LxcMount, LxcNet,
    LxcVolumeMount, PropertyString, QemuNet, SshKeys, TagSet, TpmState, WireValue,
};
use serde_json::json;

fn round_trip<T: WireValue + PartialEq + std::fmt::Debug>(key: &str, value: &str) {
    let a = T::parse_wire(value).unwrap_or_else(|e| panic!("{key}={value}: {e}"));
    let wire = a.to_wire();
    let b = T::parse_wire(&wire).unwrap_or_else(|e| panic!("{key}: re-parse of {wire:?}: {e}"));
    assert_eq!(a, b, "{key}: {value:?} -> {wire:?}");
}

/// Every key of a config answer with a modelled grammar round-trips.
fn check_config(data: serde_json::Value) -> usize {
    let cfg = LiveConfig::from_json(&data).unwrap();
    let mut checked = 0;
    for (k, v) in &cfg.values {
        let slot = |p: &str| {
            k.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        let lxc = cfg.get("hostname").is_some() || cfg.get("rootfs").is_some();
        match k {
            _ if slot("net") && lxc => round_trip::<LxcNet>(k, v),
            _ if slot("net") => round_trip::<QemuNet>(k, v),
            _ if slot("scsi") || slot("virtio") || slot("sata") || slot("ide") => {
                round_trip::<Drive>(k, v)
            }
            _ if slot("hostpci") => round_trip::<HostPci>(k, v),
            _ if slot("mp") => round_trip::<LxcMount>(k, v),
            "rootfs" => round_trip::<LxcVolumeMount>(k, v),
            "efidisk0" => round_trip::<EfiDisk>(k, v),
            "tpmstate0" => round_trip::<TpmState>(k, v),
            "features" => round_trip::<LxcFeatures>(k, v),
            "sshkeys" => round_trip::<SshKeys>(k, v),
            "tags" => round_trip::<TagSet>(k, v),
            "agent" => round_trip::<Agent>(k, v),
            "boot" => round_trip::<Boot>(k, v),
            "nameserver" | "searchdomain" => round_trip::<DnsList>(k, v),
            "smbios1" | "meta" | "ipconfig0" => round_trip::<PropertyString>(k, v),
            _ => continue,
        }
        checked += 1;
    }
    checked
}

#[test]
fn pve9_ovmf_config_round_trips() {
    // Shape of a PVE 9 qemu config (Perl key order, string memory).
    let n = check_config(
        json!({"smbios1":"uuid=42ecc256-a7c5-4d93-b630-0e7a06c051c2","cpu":"host","scsihw":"virtio-scsi-pci","bios":"ovmf","ostype":"l26","serial0":"socket",
        "net0":"virtio=bc:24:11:4e:8f:d1,bridge=vmbr0,firewall=1","meta":"creation-qemu=10.0.2,ctime=1754900283",
        "scsi0":"local-zfs:vm-111-disk-1,discard=on,size=160G,ssd=1","scsi1":"local-zfs:vm-111-cloudinit,media=cdrom",
        "vmgenid":"abac705c-31ed-4b75-8587-8c86d5c810c4","digest":"18389648fd69603dd93ab0c443e1f32267f6c436",
        "efidisk0":"local-zfs:vm-111-disk-0,efitype=4m,size=1M","machine":"q35","kvm":1,"onboot":1,
        "sshkeys":"ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y%2BTBx08F7zRdhBlKjk7aywMT",
        "memory":"4096","cores":4,"ipconfig0":"ip=10.100.1.174/24,gw=10.100.1.1,ip6=auto","boot":"order=scsi0"}),
    );
    assert_eq!(n, 9);
}

#[test]
fn pve7_config_round_trips() {
    let n = check_config(
        json!({"ostype":"l26","bios":"seabios","digest":"a2019681a11059dc5602d474c3443b907db213b7","onboot":0,
        "smbios1":"uuid=3ae878b3-a77e-4a4a-adc6-14ee88350d36,manufacturer=MTIz,product=MTIz,version=MTIz,serial=MTIz,sku=MTIz,family=MTIz,base64=1",
        "scsi0":"local-lvm:vm-107-disk-0,size=32G","sockets":1,"scsihw":"virtio-scsi-pci","boot":"order=net0;ide2;scsi0","cpu":"host",
        "meta":"creation-qemu=6.2.0,ctime=1673361689","ide2":"none,media=cdrom","kvm":1,"name":"k-test-c-3","hotplug":"network,disk,usb",
        "agent":"0","numa":1,"memory":8192,"net0":"virtio=A2:7B:45:48:9C:E5,bridge=vmbr0,tag=103","cores":8,"tablet":1,
        "vmgenid":"10e77c08-c74f-466e-9186-eb5f8da4079c"}),
    );
    assert_eq!(n, 7);
}

#[test]
fn lxc_config_round_trips() {
    let n = check_config(
        json!({"arch":"amd64","cores":2,"features":"fuse=1,mknod=1,nesting=1","hostname":"ct-01","memory":4096,"swap":512,
        "net0":"name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:2E:0C:59,ip=dhcp,type=veth",
        "rootfs":"vmstore:subvol-101-disk-0,size=30G","mp0":"/mnt/foo/bar,mp=/storage","mp1":"local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G",
        "tags":"tag1;tag2","nameserver":"1.1.1.1 9.9.9.9","searchdomain":"example.org","unprivileged":1,
        "lxc":[["lxc.apparmor.profile","unconfined"]],"digest":"0123456789abcdef0123456789abcdef01234567"}),
    );
    assert_eq!(n, 8);
}

#[test]
fn hostpci_and_tpm_shapes_round_trip() {
    let n = check_config(
        json!({"hostpci0":"0000:17:00.0,pcie=1,x-vga=1","hostpci1":"00:17.0,rombar=0","hostpci2":"mapping=gpu,pcie=1",
        "tpmstate0":"local-lvm:vm-100-disk-2,size=4M,version=v2.0","virtio0":"local-lvm:vm-100-disk-3,iothread=1,aio=native,size=10G",
        "sata0":"local:iso/debian.iso,media=cdrom,size=522284K","tags":"go-proxmox+cloud-init"}),
    );
    assert_eq!(n, 7);
}

proptest! {
    #[test]
    fn sizes_round_trip(n in 0u64..(1u64 << 50)) {
        let b = Bytes(n);
        prop_assert_eq!(Bytes::parse(&b.to_wire()).unwrap(), b);
    }

    #[test]
    fn gib_rendering_is_exact(n in 0u64..(1u64 << 45)) {
        let b = Bytes(n);
        prop_assert_eq!(Bytes::parse_gib(&b.to_gib_string()).unwrap(), b);
    }

    #[test]
    fn property_strings_round_trip_verbatim(tokens in prop::collection::vec("[a-z][a-z0-9_-]{0,6}(=[a-zA-Z0-9:/._;-]{0,8})?", 0..6)) {
        let s = tokens.join(",");
        let p = PropertyString::parse(&s).unwrap();
        prop_assert_eq!(p.to_wire(), s);
    }

    #[test]
    fn tag_sets_round_trip(tags in prop::collection::btree_set("[a-z0-9_][a-z0-9_+.-]{0,10}", 0..6)) {
        let joined = tags.iter().cloned().collect::<Vec<_>>().join(",");
        let t = TagSet::parse(&joined).unwrap();
        prop_assert_eq!(TagSet::parse(&t.to_wire()).unwrap(), t.clone());
        prop_assert_eq!(t.0.len(), tags.len());
    }

    #[test]
    fn ssh_key_comments_survive_encoding(comment in "[ -~]{0,20}") {
        let text = format!("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y+TBx {comment}");
        let keys = SshKeys::from_text(&text).unwrap();
        let wire = keys.to_wire();
        prop_assert!(wire.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)));
        prop_assert_eq!(SshKeys::parse(&wire).unwrap(), keys);
    }
}
