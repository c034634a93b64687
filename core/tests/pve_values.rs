//! Values as PVE stores them: what ProxOps compares and writes matches what
//! PVE's own code does with a value, so a converged guest plans nothing and
//! a write never rewrites what the operator did not ask to change. Each
//! test names the Proxmox source file and function it follows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proxops_core::action::AnomalyType;
use proxops_core::diag::Diagnostic;
use proxops_core::drift::{CloudInitSecrets, Context, create_params, download_params};
use proxops_core::live::Power;
use proxops_core::repo::ClusterDesired;
use serde_json::json;

use support::fixture::{cluster, config, drift, keys, load_cluster, object, param, with};

/// A VM `vm1` (vmid 100) with `body` appended to its spec.
fn vm(body: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm1\nspec:\n  node: pve1\n  vmid: 100\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  disks:\n    - storage: local-lvm\n      size: 32GiB\n{body}"
    )
}

/// A container `ct1` (vmid 200) with `body` appended to its spec.
fn ct(body: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct1\nspec:\n  node: pve1\n  vmid: 200\n  template: debian-ct\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 8GiB\n{body}"
    )
}

const NIC: &str = "  networks:\n    - bridge: vmbr0\n";
const NIC_CT: &str =
    "  networks:\n    - bridge: vmbr0\n      iface: eth0\n      hwaddr: BC:24:11:AA:BB:CC\n";

fn vm_live(extra: serde_json::Value) -> serde_json::Value {
    with(
        json!({
            "name": "vm1", "memory": "2048", "cpu": "host", "cores": 2,
            "scsi0": "local-lvm:vm-100-disk-0,size=32G",
            "net0": "virtio=BC:24:11:4E:8F:D1,bridge=vmbr0",
            "tags": "proxops", "digest": "18389648fd69603dd93ab0c443e1f32267f6c436"
        }),
        extra,
    )
}

fn ct_live(extra: serde_json::Value) -> serde_json::Value {
    with(
        json!({
            "hostname": "ct1", "memory": 512, "swap": 512, "cores": 1, "arch": "amd64",
            "rootfs": "local-lvm:vm-200-disk-0,size=8G",
            "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC,type=veth",
            "tags": "proxops", "digest": "0123456789abcdef0123456789abcdef01234567"
        }),
        extra,
    )
}

/// The cluster `t` of `support::fixture` with `cluster_extra` in its
/// configuration, holding `docs`.
fn load(cluster_extra: &str, docs: &[&str]) -> Result<ClusterDesired, Vec<Diagnostic>> {
    load_cluster(cluster_extra, docs)
}

/// The messages of a refused repository.
fn refusal(cluster_extra: &str, doc: &str) -> String {
    match load(cluster_extra, &[doc]) {
        Ok(_) => panic!("accepted:\n{doc}"),
        Err(d) => d
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn create(c: &ClusterDesired, name: &str) -> Vec<(String, String)> {
    create_params(
        object(c, name),
        &Context {
            cluster: c,
            secrets: &CloudInitSecrets::default(),
        },
    )
    .unwrap()
    .to_wire()
}

fn get<'a>(p: &'a [(String, String)], key: &str) -> Option<&'a str> {
    p.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

// ------------------------------------------------------------ 1. tags

// pve-guest-common src/PVE/GuestHelpers.pm `get_unique_tags`: PVE splits
// tags on [,;\s], lower-cases them unless the datacenter's tag-style is
// case-sensitive, sorts, de-duplicates and joins them with `;`.
#[test]
fn upper_case_tags_are_refused_with_the_spelling_pve_would_store() {
    let msg = refusal("", &vm(&format!("{NIC}  tags: [Web, prod]\n")));
    assert!(msg.contains("spec.tags[0]"), "{msg}");
    assert!(msg.contains("\"web\""), "{msg}");
    assert!(!msg.contains("spec.tags[1]"), "{msg}");
    // A cluster that declares PVE's case-sensitive style keeps the case.
    assert!(
        load(
            "      tag-style: case-sensitive\n",
            &[&vm(&format!("{NIC}  tags: [Web]\n"))]
        )
        .is_ok()
    );
    let bad = refusal("      tag-style: Case\n", &vm(NIC));
    assert!(bad.contains("tag-style"), "{bad}");
}

// pve-guest-common src/PVE/GuestHelpers.pm `get_unique_tags`.
#[test]
fn tags_compare_as_pve_stores_them_under_the_clusters_tag_style() {
    let doc = vm(&format!("{NIC}  tags: [web, prod]\n"));
    let c = load("", &[&doc]).unwrap();
    // Mixed case and another order on PVE's side: the same set.
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(vm_live(json!({"tags": "Prod;Web;proxops"}))),
    );
    assert!(!keys(&d).contains(&"tags"), "{:?}", d.changes);
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(vm_live(json!({"tags": "proxops,web web"}))),
    );
    assert_eq!(param(&d, "tags"), Some("prod;proxops;web"));

    // Case-sensitive: `Web` and `web` are two tags on PVE.
    let doc = vm(&format!("{NIC}  tags: [Web]\n"));
    let c = load("      tag-style: case-sensitive\n", &[&doc]).unwrap();
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(vm_live(json!({"tags": "proxops;web"}))),
    );
    assert_eq!(param(&d, "tags"), Some("Web;proxops"));
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(vm_live(json!({"tags": "Web;proxops"}))),
    );
    assert!(!keys(&d).contains(&"tags"));
}

// ------------------------------------------------------------ 2. MACs

// pve-common src/PVE/Tools.pm `random_ether_addr` generates upper case;
// pve-container src/PVE/LXC.pm `update_net` compares hwaddr as text and
// re-creates the veth when it differs; qemu-server
// src/PVE/API2/Qemu.pm `update_vm` keeps the MAC as written.
#[test]
fn a_mac_of_the_same_address_keeps_pves_spelling_in_every_write() {
    let doc =
        vm("  networks:\n    - bridge: vmbr0\n      mac: a2:7b:45:48:9c:e5\n      vlan: 104\n");
    let c = cluster(&[&doc]);
    let live = config(vm_live(
        json!({"net0": "virtio=A2:7B:45:48:9C:E5,bridge=vmbr0,tag=103"}),
    ));
    let d = drift(&c, "vm1", Power::Stopped, &live);
    assert_eq!(
        param(&d, "net0"),
        Some("virtio=A2:7B:45:48:9C:E5,bridge=vmbr0,tag=104")
    );
    // Same address, other spelling, nothing else changed: no write at all.
    let live = config(vm_live(
        json!({"net0": "virtio=A2:7B:45:48:9C:E5,bridge=vmbr0,tag=104"}),
    ));
    assert!(drift(&c, "vm1", Power::Stopped, &live).changes.is_empty());
    // Another address is written as the manifest spells it.
    let live = config(vm_live(
        json!({"net0": "virtio=A2:7B:45:48:9C:E6,bridge=vmbr0,tag=104"}),
    ));
    let d = drift(&c, "vm1", Power::Stopped, &live);
    assert_eq!(
        param(&d, "net0"),
        Some("virtio=a2:7b:45:48:9c:e5,bridge=vmbr0,tag=104")
    );

    let doc = ct(
        "  networks:\n    - bridge: vmbr0\n      iface: eth0\n      hwaddr: bc:24:11:aa:bb:cc\n      tag: 30\n",
    );
    let c = cluster(&[&doc]);
    let d = drift(&c, "ct1", Power::Running, &config(ct_live(json!({}))));
    assert_eq!(
        param(&d, "net0"),
        Some("name=eth0,type=veth,bridge=vmbr0,tag=30,hwaddr=BC:24:11:AA:BB:CC")
    );
}

// ------------------------------------------------------------ 3. unprivileged

// pve-container src/PVE/LXC/Config.pm (`unprivileged`, default 0) and
// src/PVE/API2/LXC.pm `create_vm`: PVE writes `unprivileged: 1` only when
// set, so an absent key is a privileged container.
#[test]
fn absent_unprivileged_is_a_privileged_container() {
    let live = config(ct_live(json!({})));
    let privileged = cluster(&[&ct(&format!("{NIC}  options:\n    unprivileged: false\n"))]);
    let d = drift(&privileged, "ct1", Power::Running, &live);
    assert!(d.changes.is_empty() && d.anomalies.is_empty(), "{d:?}");

    let unprivileged = cluster(&[&ct(&format!("{NIC}  options:\n    unprivileged: true\n"))]);
    let d = drift(&unprivileged, "ct1", Power::Running, &live);
    assert!(d.params.is_empty());
    assert_eq!(d.anomalies.len(), 1);
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::NeedsPerson);
    assert!(
        d.anomalies[0].message.contains("privileged on PVE"),
        "{}",
        d.anomalies[0].message
    );
    let live = config(ct_live(json!({"unprivileged": 1})));
    assert!(
        drift(&unprivileged, "ct1", Power::Running, &live)
            .anomalies
            .is_empty()
    );
}

// ------------------------------------------------------------ 4. cloud-init

// qemu-server src/PVE/API2/Qemu.pm `create_disks`: one cloud-init drive per
// VM, on any of ide/sata/scsi; a second is refused ("cloud-init drive is
// already attached at …"). Real PVE 9 configs put it on scsi1.
#[test]
fn the_cloud_init_drive_is_found_on_any_slot_and_never_added_twice() {
    let doc = vm(&format!(
        "{NIC}  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-zfs\n"
    ));
    let c = cluster(&[&doc]);
    for slot in ["scsi1", "ide0", "sata3", "ide2"] {
        let live = config(vm_live(
            json!({slot: "local-zfs:vm-100-cloudinit,media=cdrom"}),
        ));
        let d = drift(&c, "vm1", Power::Running, &live);
        assert!(
            d.changes.is_empty() && d.anomalies.is_empty(),
            "{slot}: {d:?}"
        );
    }
    // On another storage: reported at its own slot, no second drive.
    let live = config(vm_live(
        json!({"scsi1": "ceph:vm-100-cloudinit,media=cdrom"}),
    ));
    let d = drift(&c, "vm1", Power::Running, &live);
    assert!(d.params.is_empty(), "{:?}", d.params);
    assert_eq!(d.anomalies[0].field.as_deref(), Some("scsi1"));
    // None at all: created on ide2.
    let d = drift(&c, "vm1", Power::Stopped, &config(vm_live(json!({}))));
    assert_eq!(param(&d, "ide2"), Some("local-zfs:cloudinit"));
}

// ------------------------------------------------------------ 5. file names

// pve-storage src/PVE/Storage.pm `normalize_content_filename` (every
// character outside [a-zA-Z0-9_.-] becomes `_`) and the download-url
// extension checks (`ISO_EXT_RE_0`, `VZTMPL_EXT_RE_1`: no `.tgz`);
// qemu-server src/PVE/QemuServer/Drive.pm `efitype` (2m|4m).
#[test]
fn file_names_extensions_and_efitype_are_what_pve_accepts_as_written() {
    let iso = |f: &str| {
        format!(
            "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata:\n  name: img\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: \"{f}\"\n  url: https://example.org/x.iso\n"
        )
    };
    let msg = refusal("", &iso("debian+13(netinst).iso"));
    assert!(msg.contains("\"debian_13_netinst_.iso\""), "{msg}");
    assert!(load("", &[&iso("debian-13.1_netinst.iso")]).is_ok());

    let ctt = "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: alpine\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: alpine-3.20.tgz\n  url: https://example.org/alpine.tgz\n";
    let msg = refusal("", ctt);
    assert!(
        msg.contains("wrong extension") && !msg.contains(".tgz,"),
        "{msg}"
    );
    assert!(load("", &[&ctt.replace("alpine-3.20.tgz", "alpine-3.20.tar")]).is_ok());

    for bad in ["byos", "8m"] {
        let doc = vm(&format!(
            "{NIC}  hardware:\n    bios: ovmf\n    efi-disk:\n      storage: local-lvm\n      template: {bad}\n"
        ));
        let msg = refusal("", &doc);
        assert!(msg.contains("2m or 4m"), "{msg}");
    }
}

// ------------------------------------------------------------ 6. Secure Boot

// qemu-server src/PVE/QemuServer/OVMF.pm (`create_efidisk` picks the VARS
// template from pre-enrolled-keys only when the disk is created).
#[test]
fn secure_boot_change_on_an_existing_efi_disk_is_for_a_person() {
    let doc = vm(&format!(
        "{NIC}  hardware:\n    bios: ovmf\n    efi-disk:\n      storage: local-lvm\n      template: 4m\n      secure-boot: enabled\n"
    ));
    let c = cluster(&[&doc]);
    let live = config(vm_live(
        json!({"bios": "ovmf", "efidisk0": "local-lvm:vm-100-disk-1,efitype=4m,size=4M"}),
    ));
    let d = drift(&c, "vm1", Power::Running, &live);
    assert!(d.params.is_empty(), "{:?}", d.params);
    assert_eq!(d.anomalies.len(), 1);
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::NeedsPerson);
    let m = &d.anomalies[0].message;
    assert!(m.contains("enrol") && m.contains("efidisk0"), "{m}");
    // The create form still carries it.
    let p = create(&c, "vm1");
    assert!(get(&p, "efidisk0").unwrap().contains("pre-enrolled-keys=1"));
}

// ------------------------------------------------------------ 7. "off" is owned

// qemu-server src/PVE/QemuServer.pm `$confdesc` (`protection`, `onboot`,
// `agent`, `acpi`, `tablet`) and src/PVE/QemuServer/Network.pm (`tag`,
// `rate`, `firewall`): PVE takes `0` as a value like any other.
#[test]
fn explicit_false_and_zero_are_owned_and_absent_is_not() {
    let doc = vm(
        "  networks:\n    - bridge: vmbr0\n      vlan: 0\n      rate-limit: 0\n      firewall: false\n  options:\n    protection: false\n    agent: false\n    acpi: false\n",
    );
    let c = cluster(&[&doc]);
    let live = config(vm_live(json!({
        "protection": 1, "agent": "1,fstrim_cloned_disks=1",
        "net0": "virtio=BC:24:11:4E:8F:D1,bridge=vmbr0,firewall=1,rate=12.5,tag=20"
    })));
    let d = drift(&c, "vm1", Power::Stopped, &live);
    assert_eq!(param(&d, "protection"), Some("0"));
    assert_eq!(param(&d, "agent"), Some("0,fstrim_cloned_disks=1"));
    assert_eq!(param(&d, "acpi"), Some("0"));
    assert_eq!(
        param(&d, "net0"),
        Some("virtio=BC:24:11:4E:8F:D1,bridge=vmbr0")
    );

    // The same values left out: PVE keeps all of them.
    let c = cluster(&[&vm(NIC)]);
    let d = drift(&c, "vm1", Power::Stopped, &live);
    assert!(d.changes.is_empty(), "{:?}", d.changes);

    // Off on PVE already: nothing to write.
    let c = cluster(&[&doc]);
    let off = config(vm_live(json!({"protection": 0, "acpi": 0})));
    assert!(drift(&c, "vm1", Power::Stopped, &off).changes.is_empty());

    let doc = ct(
        "  networks:\n    - bridge: vmbr0\n      iface: eth0\n      tag: 0\n      firewall: false\n  options:\n    protection: false\n",
    );
    let c = cluster(&[&doc]);
    let live = config(ct_live(json!({
        "protection": 1,
        "net0": "name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:AA:BB:CC,tag=40,type=veth"
    })));
    let d = drift(&c, "ct1", Power::Running, &live);
    assert_eq!(param(&d, "protection"), Some("0"));
    assert_eq!(
        param(&d, "net0"),
        Some("name=eth0,type=veth,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC")
    );
}

// ------------------------------------------------------------ 10. smaller

// qemu-server src/PVE/QemuServer/CPUConfig.pm (qemu-server >= 9.1): the
// `+nested-virt` flag works on any CPU type.
#[test]
fn nested_virt_is_the_nested_virt_flag_on_any_cpu_type() {
    let doc = vm(&format!("{NIC}  options:\n    nested-virt: true\n"))
        .replace("type: host", "type: x86-64-v2-AES");
    let c = cluster(&[&doc]);
    let p = create(&c, "vm1");
    assert_eq!(get(&p, "cpu"), Some("x86-64-v2-AES,flags=+nested-virt"));
    let live = config(vm_live(json!({"cpu": "x86-64-v2-AES,flags=+aes"})));
    let d = drift(&c, "vm1", Power::Stopped, &live);
    assert_eq!(
        param(&d, "cpu"),
        Some("x86-64-v2-AES,flags=+aes;+nested-virt")
    );
    let live = config(vm_live(
        json!({"cpu": "x86-64-v2-AES,flags=+nested-virt;+aes"}),
    ));
    assert!(drift(&c, "vm1", Power::Stopped, &live).changes.is_empty());
}

// qemu-server src/PVE/QemuServer/Network.pm `tap_rate_limit`: the rate is
// rate × 1024 × 1024 bytes per second, so MB/s.
#[test]
fn nic_rate_is_megabytes_per_second_in_messages() {
    let msg = refusal(
        "",
        &vm("  networks:\n    - bridge: vmbr0\n      rate-limit: -1\n"),
    );
    assert!(msg.contains("MB/s") && !msg.contains("MBit"), "{msg}");
}

// pve-container src/PVE/LXC/Config.pm `$confdesc` `arch`: amd64, i386,
// arm64, armhf, riscv32, riscv64.
#[test]
fn lxc_arch_is_spelled_as_pve_spells_it() {
    let ok = cluster(&[&ct(&format!("{NIC}  arch: i386\n"))]);
    let p = create(&ok, "ct1");
    assert_eq!(get(&p, "arch"), Some("i386"));
    let msg = refusal("", &ct(&format!("{NIC}  arch: i686\n")));
    assert!(msg.contains("\"i386\""), "{msg}");
}

// pve-storage src/PVE/API2/Storage/Status.pm `download_url`
// (`verify-certificates`, `compression` from `KNOWN_COMPRESSION_FORMATS`,
// decompression for ISO content only).
#[test]
fn download_url_verify_certificates_and_compression_are_settable() {
    let iso = "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata:\n  name: img\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: debian.iso\n  url: https://example.org/debian.iso.zst\n  verify-certificates: false\n  compression: zst\n";
    let c = load("", &[iso]).unwrap();
    let p = download_params(object(&c, "img")).to_wire();
    assert_eq!(get(&p, "verify-certificates"), Some("0"));
    assert_eq!(get(&p, "compression"), Some("zst"));
    let msg = refusal("", &iso.replace("compression: zst", "compression: xz"));
    assert!(msg.contains("spec.compression"), "{msg}");
    let ctt = "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: alpine\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: alpine.tar.zst\n  url: https://example.org/alpine.tar.zst\n  compression: gz\n";
    let msg = refusal("", ctt);
    assert!(msg.contains("ISO files only"), "{msg}");
}

// ------------------------------------------------------------ 8. as PVE reads them

// pve-container src/PVE/LXC/Config.pm `mountpoint_backup_enabled`: rootfs
// is always backed up, an `mpN` only with `backup=1` (the schema gives the
// option no default); vzdump excludes the rest.
#[test]
fn a_mount_point_without_backup_is_not_backed_up() {
    let mp = |opts: &str| {
        ct(&format!(
            "  mount-points:\n    - storage: local-lvm\n      size: 4GiB\n      mount-point: /srv{opts}\n{NIC_CT}"
        ))
    };
    let live = config(ct_live(
        json!({"mp0": "local-lvm:vm-200-disk-1,mp=/srv,size=4G"}),
    ));
    let c = cluster(&[&mp("\n      options:\n        backup: true")]);
    let d = drift(&c, "ct1", Power::Running, &live);
    assert_eq!(keys(&d), ["mp0"]);
    assert!(param(&d, "mp0").unwrap().contains("backup=1"));
    let c = cluster(&[&mp("\n      options:\n        backup: false")]);
    assert!(drift(&c, "ct1", Power::Running, &live).is_empty());
}

// pve-container src/PVE/LXC.pm `verify_searchdomain_list`: the list is
// split on commas, semicolons and spaces and stored space-separated.
#[test]
fn search_domains_compare_and_are_written_space_separated() {
    let doc = ct(&format!(
        "  dns:\n    domain: example.org,lab.example.org\n{NIC_CT}"
    ));
    let c = cluster(&[&doc]);
    let live = config(ct_live(
        json!({"searchdomain": "example.org lab.example.org"}),
    ));
    assert!(drift(&c, "ct1", Power::Running, &live).is_empty());
    let live = config(ct_live(json!({"searchdomain": "example.org"})));
    let d = drift(&c, "ct1", Power::Running, &live);
    assert_eq!(
        param(&d, "searchdomain"),
        Some("example.org lab.example.org")
    );
}

// qemu-server src/PVE/QemuServer/OVMF.pm `get_ovmf_files`: on x86_64 only
// `efitype=4m` selects the Secure Boot firmware and the VARS with the keys
// (absent is 2m); the type is fixed when the EFI disk is created.
#[test]
fn secure_boot_needs_efitype_4m_and_an_efitype_difference_is_reported() {
    let doc = |t: &str| {
        vm(&format!(
            "{NIC}  hardware:\n    bios: ovmf\n    efi-disk:\n      storage: local-lvm\n{t}      secure-boot: enabled\n"
        ))
    };
    let msg = refusal("", &doc(""));
    assert!(msg.contains("Secure Boot needs template: 4m"), "{msg}");
    assert!(refusal("", &doc("      template: 2m\n")).contains("needs template: 4m"));
    assert!(load("", &[&doc("      template: 4m\n")]).is_ok());

    let c = cluster(&[&doc("      template: 4m\n")]);
    let live = config(vm_live(json!({
        "bios": "ovmf", "efidisk0": "local-lvm:vm-100-disk-1,pre-enrolled-keys=1,size=4M"
    })));
    let d = drift(&c, "vm1", Power::Running, &live);
    assert!(d.params.is_empty(), "{:?}", d.params);
    assert!(
        d.anomalies.iter().any(|a| a
            .message
            .contains("efitype 2m on PVE but the manifest asks for 4m")),
        "{:?}",
        d.anomalies
    );
}

// qemu-server src/PVE/QemuServer.pm `vmconfig_hotplug_pending`: `tablet`
// is plugged and unplugged with usb hotplug; `hotplug` itself applies at
// once unless the old or new value names memory or cpu.
#[test]
fn tablet_and_hotplug_apply_live_as_pve_plugs_them() {
    let impact = |body: &str, live: serde_json::Value| {
        let c = cluster(&[&vm(&format!("{NIC}{body}"))]);
        let d = drift(&c, "vm1", Power::Running, &config(vm_live(live)));
        d.impact
    };
    use proxops_core::action::Impact;
    let tablet = "  options:\n    tablet: false\n";
    assert_eq!(impact(tablet, json!({"tablet": 1})), Impact::Live);
    assert_eq!(
        impact(tablet, json!({"tablet": 1, "hotplug": "network,disk"})),
        Impact::Reboot
    );
    let hot = |v: &str| format!("  options:\n    hotplug: [{v}]\n");
    assert_eq!(impact(&hot("network, disk"), json!({})), Impact::Live);
    assert_eq!(
        impact(&hot("network, disk, memory"), json!({})),
        Impact::Reboot
    );
    assert_eq!(
        impact(&hot("network"), json!({"hotplug": "network,cpu"})),
        Impact::Reboot
    );
}

// qemu-server src/PVE/QemuServer/Cloudinit.pm reads `ip=dhcp` (the API's
// `ipconfigN` format documents it): valid, with no gateway.
#[test]
fn an_ipconfig_with_dhcp_is_valid_and_written_as_pve_stores_it() {
    let doc = vm(&format!(
        "{NIC}  cloud-init-data:\n    ipconfigs:\n      - nic: 0\n        ip: dhcp\n"
    ));
    let c = load("", &[&doc]).unwrap();
    assert_eq!(get(&create(&c, "vm1"), "ipconfig0"), Some("ip=dhcp"));
    let with_gw = doc.replace("ip: dhcp\n", "ip: dhcp\n        gateway: 10.0.0.1\n");
    assert!(refusal("", &with_gw).contains("gateway comes from DHCP"));
}

// qemu-server src/PVE/API2/Qemu.pm `$check_sshkeys` →
// pve-common `Tools.pm` `validate_ssh_public_keys` runs `ssh-keygen -l`: a
// key whose blob does not parse refuses the whole write (500 "SSH public
// key validation error").
#[test]
fn an_ssh_key_pve_could_not_read_is_refused_by_validate() {
    let doc = |key: &str| {
        vm(&format!(
            "{NIC}  cloud-init-data:\n    ssh-keys:\n      - {key}\n"
        ))
    };
    let good = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8tb3BzLWxhcHRvcC1rZXktZm9yLXByb3hvcHMh ops@laptop";
    assert!(load("", &[&doc(good)]).is_ok());
    // Cut short by a copy and paste: 29 of the key's 32 bytes.
    let truncated =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ0bU9pZ3l0c1Z0a2VlcG1lc2VjcmV0cGxlYXNl ops@laptop";
    let msg = refusal("", &doc(truncated));
    assert!(
        msg.contains("PVE would refuse") && msg.contains("ssh-keys[0]"),
        "{msg}"
    );
    // A blob of another type than the line says.
    let swapped = good.replacen("ssh-ed25519", "ssh-rsa", 1);
    assert!(refusal("", &doc(&swapped)).contains("not a ssh-rsa key"));
}
