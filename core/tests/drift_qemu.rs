//! VM drift and create forms: every [PROBE] fact the translation encodes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proxops_core::action::{AnomalyType, Impact, ParamValue};
use proxops_core::drift::{
    CloudInitSecrets, Context, DiskGrowth, clone_params, create_params, download_params,
};
use proxops_core::live::Power;
use proxops_core::secret::Secret;
use proxops_core::wire::Bytes;
use serde_json::json;

use support::fixture::{cluster, config, drift, drift_with, keys, object, param, with};

const KEY_A: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y+TBx08F7zRdhBlKjk7aywMT alice@laptop";
const KEY_B: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8tb3BzLWxhcHRvcC1rZXktZm9yLXByb3hvcHMh bob@desk";

/// A VM `vm1` (vmid 100) with `body` appended to its spec (2-space indent).
fn vm(body: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm1\nspec:\n  node: pve1\n  vmid: 100\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n{body}"
    )
}

const DISK: &str = "  disks:\n    - storage: local-lvm\n      size: 32GiB\n";
const NIC: &str = "  networks:\n    - bridge: vmbr0\n";

fn plain_vm() -> String {
    vm(&format!("{DISK}{NIC}"))
}

/// The live config of `plain_vm` as PVE reports it after create.
fn plain_live() -> serde_json::Value {
    json!({
        "name": "vm1", "memory": "2048", "cpu": "host", "cores": 2,
        "scsi0": "local-lvm:vm-100-disk-0,size=32G",
        "net0": "virtio=BC:24:11:4E:8F:D1,bridge=vmbr0",
        "tags": "proxops", "boot": "order=scsi0;net0", "meta": "creation-qemu=10.0.2,ctime=1",
        "smbios1": "uuid=42ecc256-a7c5-4d93-b630-0e7a06c051c2", "vmgenid": "abac705c-31ed-4b75-8587-8c86d5c810c4",
        "digest": "18389648fd69603dd93ab0c443e1f32267f6c436"
    })
}

fn create(doc: &str) -> Vec<(String, String)> {
    let c = cluster(&[doc]);
    let secrets = CloudInitSecrets::default();
    create_params(
        object(&c, "vm1"),
        &Context {
            cluster: &c,
            secrets: &secrets,
        },
    )
    .unwrap()
    .0
    .into_iter()
    .map(|(k, v)| (k, v.shown().to_owned()))
    .collect()
}

fn get<'a>(p: &'a [(String, String)], key: &str) -> Option<&'a str> {
    p.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

// ------------------------------------------------------------ create form

#[test]
fn start_flag_is_1_or_0_never_true() {
    assert_eq!(get(&create(&plain_vm()), "start"), Some("1"));
    assert_eq!(
        get(
            &create(&vm(&format!("  state: stopped\n{DISK}{NIC}"))),
            "start"
        ),
        Some("0")
    );
    let t = plain_vm().replace("kind: VM", "kind: TemplateVM");
    let c = cluster(&[&t]);
    let p = create_params(
        object(&c, "vm1"),
        &Context {
            cluster: &c,
            secrets: &CloudInitSecrets::default(),
        },
    )
    .unwrap();
    assert_eq!(p.get("start").unwrap().expose(), "0");
}

#[test]
fn create_form_order_and_values_of_a_plain_vm() {
    let p = create(&plain_vm());
    let ks: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        ks,
        [
            "vmid", "name", "memory", "cpu", "cores", "scsi0", "net0", "tags", "start"
        ]
    );
    assert_eq!(get(&p, "memory"), Some("2048"));
    assert_eq!(get(&p, "tags"), Some("proxops"));
}

#[test]
fn disk_create_size_is_gib_not_bytes() {
    let p = create(&vm(&format!(
        "  disks:\n    - storage: local-lvm\n      size: 512MiB\n    - storage: local-lvm\n      size: 8GiB\n{NIC}"
    )));
    assert_eq!(get(&p, "scsi0"), Some("local-lvm:0.5"));
    assert_eq!(get(&p, "scsi1"), Some("local-lvm:8"));
}

#[test]
fn image_disk_sends_size_zero_with_import_from() {
    let p = create(&vm(&format!(
        "  disks:\n    - storage: local-lvm\n      image: debian-cloud\n      interface: virtio0\n      discard: \"on\"\n{NIC}"
    )));
    assert_eq!(
        get(&p, "virtio0"),
        Some("local-lvm:0,import-from=local:import/debian-13.qcow2,discard=on")
    );
}

#[test]
fn disk_options_are_inline_tokens_and_ssd_false_pins_0() {
    let p = create(&vm(&format!(
        "  disks:\n    - storage: local-lvm\n      size: 8GiB\n      controller: virtio-scsi-single\n      iothread: true\n      ssd: false\n      aio: io_uring\n{NIC}"
    )));
    assert_eq!(
        get(&p, "scsi0"),
        Some("local-lvm:8,iothread=1,ssd=0,aio=io_uring")
    );
    assert_eq!(get(&p, "scsihw"), Some("virtio-scsi-single"));
    assert!(
        p.iter().all(|(k, _)| !k.contains('.')),
        "no separate <slot>.iothread parameter"
    );
}

#[test]
fn vm_nic_vlan_key_is_tag_and_unpinned_nic_sends_the_bare_model() {
    let p = create(&vm(&format!(
        "{DISK}  networks:\n    - bridge: vmbr0\n      vlan: 20\n      firewall: true\n      rate-limit: 12.5\n    - bridge: vmbr1\n      model: e1000\n      mac: BC:24:11:00:00:01\n"
    )));
    assert_eq!(
        get(&p, "net0"),
        Some("virtio,bridge=vmbr0,tag=20,rate=12.5,firewall=1")
    );
    assert_eq!(
        get(&p, "net1"),
        Some("e1000=BC:24:11:00:00:01,bridge=vmbr1")
    );
}

#[test]
fn machine_i440fx_is_sent_as_pc() {
    let p = create(&vm(&format!(
        "{DISK}{NIC}  hardware:\n    machine: i440fx\n"
    )));
    assert_eq!(get(&p, "machine"), Some("pc"));
}

#[test]
fn cloud_init_takes_ide2_and_moves_the_cdrom_to_ide3() {
    let p = create(&vm(&format!(
        "{DISK}{NIC}  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n    cdrom:\n      iso: debian-iso\n"
    )));
    assert_eq!(get(&p, "ide2"), Some("local-lvm:cloudinit"));
    assert_eq!(get(&p, "ide3"), Some("local:iso/debian-13.iso,media=cdrom"));
    let p = create(&vm(&format!(
        "{DISK}{NIC}  hardware:\n    cdrom:\n      iso: none\n"
    )));
    assert_eq!(get(&p, "ide2"), Some("none,media=cdrom"));
}

#[test]
fn secure_boot_is_pre_enrolled_keys_never_a_secure_boot_token() {
    let p = create(&vm(&format!(
        "{DISK}{NIC}  hardware:\n    bios: ovmf\n    efi-disk:\n      storage: local-lvm\n      template: 4m\n      secure-boot: enabled\n    tpm:\n      storage: local-lvm\n"
    )));
    assert_eq!(
        get(&p, "efidisk0"),
        Some("local-lvm:1,efitype=4m,pre-enrolled-keys=1")
    );
    assert_eq!(get(&p, "tpmstate0"), Some("local-lvm:1,version=v2.0"));
    assert!(
        p.iter()
            .all(|(k, v)| !k.contains("secure") && !v.contains("secure-boot"))
    );
}

#[test]
fn hostpci_is_lower_cased_bdf_with_owned_pcie() {
    let p = create(&vm(&format!(
        "{DISK}{NIC}  hardware:\n    pci-devices:\n      - slot: 0\n        device: 0000:17:00.0\n        pcie: true\n      - slot: hostpci3\n        device: 0A:00.1\n"
    )));
    assert_eq!(get(&p, "hostpci0"), Some("0000:17:00.0,pcie=1"));
    assert_eq!(get(&p, "hostpci3"), Some("0a:00.1"));
}

#[test]
fn options_booleans_are_sent_in_both_states_and_absent_is_not_sent() {
    let p = create(&vm(&format!(
        "{DISK}{NIC}  options:\n    onboot: true\n    protection: false\n    agent: true\n    boot-order: [scsi0, net0]\n    hotplug: [disk, network]\n    startup: order=3\n"
    )));
    assert_eq!(get(&p, "onboot"), Some("1"));
    assert_eq!(get(&p, "protection"), Some("0"));
    assert_eq!(get(&p, "acpi"), None);
    assert_eq!(get(&p, "agent"), Some("1"));
    assert_eq!(get(&p, "boot"), Some("order=scsi0;net0"));
    assert_eq!(get(&p, "hotplug"), Some("disk,network"));
    assert_eq!(get(&p, "startup"), Some("order=3"));
}

#[test]
fn nested_virt_never_sends_an_invalid_key() {
    let p = create(&vm(&format!(
        "{DISK}{NIC}  options:\n    nested-virt: true\n    hidden: true\n"
    )));
    assert!(
        p.iter()
            .all(|(k, v)| k != "nestedvirt" && !v.contains("vmx") && !v.contains("svm"))
    );
    assert_eq!(get(&p, "cpu"), Some("host,hidden=1"));
}

#[test]
fn sshkeys_are_percent_encoded_on_create() {
    let p = create(&vm(&format!(
        "{DISK}{NIC}  cloud-init-data:\n    ci-user: ops\n    ssh-keys:\n      - {KEY_A}\n    nameservers: [1.1.1.1, 9.9.9.9]\n    ipconfigs:\n      - nic: 0\n        ip: 10.0.0.5/24\n        gateway: 10.0.0.1\n"
    )));
    let k = get(&p, "sshkeys").unwrap();
    assert!(
        k.starts_with("ssh-ed25519%20AAAA")
            && k.contains("%2B")
            && k.ends_with("%20alice%40laptop"),
        "{k}"
    );
    assert_eq!(get(&p, "nameserver"), Some("1.1.1.1 9.9.9.9"));
    assert_eq!(get(&p, "ipconfig0"), Some("ip=10.0.0.5/24,gw=10.0.0.1"));
}

fn password_vm() -> String {
    vm(&format!(
        "{DISK}{NIC}  cloud-init-data:\n    ci-password-ref: cloud-init.passwords.ops\n    ssh-key-refs: [cloud-init.ssh-keys.alice, cloud-init.ssh-keys.bob]\n"
    ))
}

fn secrets() -> CloudInitSecrets {
    let mut s = CloudInitSecrets::default();
    s.ssh_keys.insert("alice".into(), KEY_A.into());
    s.ssh_keys.insert("bob".into(), KEY_B.into());
    s.passwords
        .insert("ops".into(), Secret::new("hunter2-very-secret"));
    s
}

#[test]
fn cipassword_is_a_secret_param_and_key_refs_concatenate_in_order() {
    let doc = password_vm();
    let c = cluster(&[&doc]);
    let s = secrets();
    let p = create_params(
        object(&c, "vm1"),
        &Context {
            cluster: &c,
            secrets: &s,
        },
    )
    .unwrap();
    assert!(matches!(p.get("cipassword"), Some(ParamValue::Secret(_))));
    assert!(!format!("{p:?}").contains("hunter2"));
    let keys = proxops_core::wire::SshKeys::parse(p.get("sshkeys").unwrap().expose()).unwrap();
    assert_eq!(
        keys.keys
            .iter()
            .map(|k| k.comment.as_str())
            .collect::<Vec<_>>(),
        ["alice@laptop", "bob@desk"]
    );
}

#[test]
fn missing_secret_ref_is_an_error_naming_the_ref_never_a_value() {
    let doc = password_vm();
    let c = cluster(&[&doc]);
    let mut s = secrets();
    s.passwords.insert("ops".into(), Secret::new("  "));
    let e = create_params(
        object(&c, "vm1"),
        &Context {
            cluster: &c,
            secrets: &s,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cloud-init.passwords.ops"), "{e}");
    let mut s = secrets();
    s.ssh_keys.remove("bob");
    let e = create_params(
        object(&c, "vm1"),
        &Context {
            cluster: &c,
            secrets: &s,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cloud-init.ssh-keys.bob") && !e.contains("AAAA"),
        "{e}"
    );
}

const TEMPLATE: &str = "apiVersion: proxops/v1alpha1\nkind: TemplateVM\nmetadata:\n  name: tpl\nspec:\n  node: pve1\n  vmid: 9000\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  disks:\n    - storage: local-lvm\n      image: debian-cloud\n      controller: virtio-scsi-single\n  networks:\n    - bridge: vmbr0\n  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n  cloud-init-data:\n    ci-user: template\n    ipconfigs:\n      - nic: 0\n        ip: 10.0.0.9/24\n";

fn clone_vm(ci: &str) -> String {
    vm(&format!("  clone: tpl\n{NIC}{ci}"))
}

#[test]
fn clone_never_sends_start_disks_or_volume_slots() {
    let doc =
        clone_vm("  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n");
    let c = cluster(&[TEMPLATE, &doc]);
    let (source, name, p, _) = clone_params(
        object(&c, "vm1"),
        &Context {
            cluster: &c,
            secrets: &CloudInitSecrets::default(),
        },
    )
    .unwrap();
    assert_eq!(source.get(), 9000);
    assert_eq!(name, "vm1");
    for k in ["start", "scsi0", "scsihw", "ide2", "vmid"] {
        assert!(!p.contains(k), "{k} must not be sent on a clone");
    }
    assert_eq!(p.get("tags").unwrap().expose(), "proxops");
}

#[test]
fn clone_delete_list_is_disjoint_from_set_keys() {
    let doc = clone_vm(
        "  cloud-init-data:\n    ci-user: ops\n    ipconfigs:\n      - nic: 1\n        ip: 10.0.0.5/24\n",
    );
    let c = cluster(&[TEMPLATE, &doc]);
    let (_, _, p, delete) = clone_params(
        object(&c, "vm1"),
        &Context {
            cluster: &c,
            secrets: &CloudInitSecrets::default(),
        },
    )
    .unwrap();
    for k in &delete {
        assert!(!p.contains(k), "{k} is both set and deleted");
    }
    for k in [
        "sshkeys",
        "nameserver",
        "searchdomain",
        "cipassword",
        "cicustom",
        "ipconfig0",
        "ipconfig31",
    ] {
        assert!(delete.iter().any(|d| d == k), "{k} not cleared: {delete:?}");
    }
    assert!(!delete.iter().any(|d| d == "ciuser" || d == "ipconfig1"));
}

#[test]
fn download_uses_the_schema_spelling_checksum_algorithm() {
    let iso = "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata:\n  name: alpine\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: alpine.iso\n  url: https://example.org/alpine.iso\n  checksum:\n    algorithm: SHA256\n    value: 9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08\n";
    let c = cluster(&[iso]);
    let p = download_params(object(&c, "alpine")).to_wire();
    let ks: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        ks,
        [
            "content",
            "filename",
            "url",
            "checksum",
            "checksum-algorithm"
        ]
    );
    assert_eq!(p[0].1, "iso");
    assert_eq!(p[4].1, "sha256");
    assert_eq!(
        download_params(object(&c, "debian-cloud")).to_wire()[0].1,
        "import"
    );
    assert_eq!(
        download_params(object(&c, "debian-ct")).to_wire()[0].1,
        "vztmpl"
    );
}

// ------------------------------------------------------------ drift

#[test]
fn plain_vm_read_back_has_no_drift() {
    let c = cluster(&[&plain_vm()]);
    let d = drift(&c, "vm1", Power::Running, &config(plain_live()));
    assert!(d.changes.is_empty() && d.anomalies.is_empty(), "{d:#?}");
    assert_eq!(d.impact, Impact::Live);
}

#[test]
fn memory_as_number_or_string_is_the_same() {
    let c = cluster(&[&plain_vm()]);
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(plain_live(), json!({"memory": 2048}))),
    );
    assert!(d.changes.is_empty());
}

#[test]
fn stopped_guest_takes_every_change_live_running_takes_the_largest_impact() {
    let c = cluster(&[&vm(&format!("{DISK}{NIC}  options:\n    agent: true\n"))]);
    let live = with(
        plain_live(),
        json!({"memory": "4096", "tags": "proxops;extra"}),
    );
    let d = drift(&c, "vm1", Power::Stopped, &config(live.clone()));
    assert_eq!(keys(&d), ["agent", "memory", "tags"]);
    assert_eq!(d.impact, Impact::Live);
    assert_eq!(
        drift(&c, "vm1", Power::Running, &config(live.clone())).impact,
        Impact::StopStart
    );
    assert_eq!(
        drift(&c, "vm1", Power::Unknown, &config(live.clone())).impact,
        Impact::StopStart
    );
    let only_agent = with(plain_live(), json!({"agent": "0"}));
    assert_eq!(
        drift(&c, "vm1", Power::Running, &config(only_agent)).impact,
        Impact::Reboot
    );
    let only_tags = with(
        plain_live(),
        json!({"agent": "enabled=1", "tags": "proxops;x"}),
    );
    let d = drift(&c, "vm1", Power::Running, &config(only_tags));
    assert_eq!((keys(&d), d.impact), (vec!["tags"], Impact::Live));
}

#[test]
fn tags_compare_as_a_set_with_the_ownership_tag_and_other_live_tags_are_removed() {
    let c = cluster(&[&vm(&format!("{DISK}{NIC}  tags: [web, prod]\n"))]);
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(plain_live(), json!({"tags": "web;proxops;prod"}))),
    );
    assert!(d.changes.is_empty());
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(plain_live(), json!({"tags": "prod,web"}))),
    );
    assert_eq!(param(&d, "tags"), Some("prod;proxops;web"));
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"tags": "pveconform;prod;proxops;web"}),
        )),
    );
    assert_eq!(param(&d, "tags"), Some("prod;proxops;web"));
}

#[test]
fn assigned_mac_is_never_drift_and_pinned_mac_compares_case_insensitively() {
    let c = cluster(&[&plain_vm()]);
    assert!(
        drift(&c, "vm1", Power::Running, &config(plain_live()))
            .changes
            .is_empty()
    );
    let pinned = vm(&format!(
        "{DISK}  networks:\n    - bridge: vmbr0\n      mac: bc:24:11:4e:8f:d1\n"
    ));
    let c = cluster(&[&pinned]);
    assert!(
        drift(&c, "vm1", Power::Running, &config(plain_live()))
            .changes
            .is_empty()
    );
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"net0": "virtio=BC:24:11:00:00:09,bridge=vmbr0"}),
        )),
    );
    assert_eq!(
        param(&d, "net0"),
        Some("virtio=bc:24:11:4e:8f:d1,bridge=vmbr0")
    );
}

#[test]
fn nic_rewrite_keeps_the_assigned_mac_and_unowned_tokens() {
    let doc = vm(&format!(
        "{DISK}  networks:\n    - bridge: vmbr1\n      vlan: 30\n"
    ));
    let c = cluster(&[&doc]);
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"net0": "virtio=BC:24:11:4E:8F:D1,bridge=vmbr0,firewall=1,mtu=9000"}),
        )),
    );
    assert_eq!(
        param(&d, "net0"),
        Some("virtio=BC:24:11:4E:8F:D1,bridge=vmbr1,tag=30,firewall=1,mtu=9000")
    );
    // qemu-server `vmconfig_update_net` re-applies bridge and tag to the
    // running tap device.
    assert_eq!(d.impact, Impact::Live);
}

#[test]
fn disk_pool_change_is_an_anomaly_not_a_write() {
    let doc = vm(&format!(
        "  disks:\n    - storage: ceph\n      size: 32GiB\n{NIC}"
    ));
    let c = cluster(&[&doc]);
    let d = drift(&c, "vm1", Power::Running, &config(plain_live()));
    assert!(d.params.is_empty(), "{d:#?}");
    assert_eq!(d.anomalies.len(), 1);
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::DataLoss);
    assert_eq!(d.anomalies[0].field.as_deref(), Some("scsi0"));
}

// qemu-server src/PVE/API2/Qemu.pm `resize_vm`: `PUT …/resize` takes
// `size` as `\+?\d+(\.\d+)?[KMGT]?` (binary units; without `+` an absolute
// size), grows the volume online and dies with "shrinking disks is not
// supported" when the new size is smaller.
#[test]
fn a_larger_disk_is_a_resize_to_the_absolute_size_not_a_config_write() {
    let doc = vm(&format!(
        "  disks:\n    - storage: local-lvm\n      size: 40GiB\n{NIC}"
    ));
    let c = cluster(&[&doc]);
    let d = drift(&c, "vm1", Power::Running, &config(plain_live()));
    assert!(d.params.is_empty() && d.anomalies.is_empty(), "{d:#?}");
    assert_eq!(
        d.grows,
        vec![DiskGrowth {
            disk: "scsi0".into(),
            from: Bytes(32 << 30),
            to: Bytes(40 << 30),
        }]
    );
    assert_eq!(d.grows[0].to.to_wire(), "40G");
    assert!(!d.is_empty());
    // A live report without a size token is compatible: nothing to grow.
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"scsi0": "local-lvm:vm-100-disk-0"}),
        )),
    );
    assert!(d.anomalies.is_empty() && d.params.is_empty() && d.grows.is_empty());
}

// Same source: PVE cannot shrink ("shrinking disks is not supported").
#[test]
fn a_smaller_disk_is_a_shrink_anomaly_never_an_action() {
    let doc = vm(&format!(
        "  disks:\n    - storage: local-lvm\n      size: 16GiB\n{NIC}"
    ));
    let c = cluster(&[&doc]);
    let d = drift(&c, "vm1", Power::Running, &config(plain_live()));
    assert!(d.params.is_empty() && d.grows.is_empty(), "{d:#?}");
    assert_eq!(d.anomalies.len(), 1);
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::Shrink);
    assert_eq!(d.anomalies[0].anomaly_type().as_str(), "shrink");
    assert_eq!(d.anomalies[0].field.as_deref(), Some("scsi0"));
    assert!(
        d.anomalies[0].message.contains("cannot shrink"),
        "{}",
        d.anomalies[0].message
    );
    assert!(!d.anomalies[0].message.contains("data loss"));
}

// The cloud-init drive and a CD drive are not disks: `resize_vm` dies with
// "you can't resize a cdrom", and a manifest disk over one is for a person.
#[test]
fn a_cd_drive_in_a_disk_slot_is_never_resized() {
    let doc = vm(&format!(
        "  disks:\n    - storage: local-lvm\n      size: 40GiB\n{NIC}"
    ));
    let c = cluster(&[&doc]);
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"scsi0": "local-lvm:vm-100-cloudinit,media=cdrom,size=4M"}),
        )),
    );
    assert!(d.grows.is_empty() && d.params.is_empty(), "{d:#?}");
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::NeedsPerson);
}

// A grow and an option change together: the option goes through the live
// form in the config write, the size through `resize` alone.
#[test]
fn a_grow_keeps_the_option_write_on_the_live_form() {
    let doc = vm(&format!(
        "  disks:\n    - storage: local-lvm\n      size: 40GiB\n      discard: \"on\"\n{NIC}"
    ));
    let c = cluster(&[&doc]);
    let d = drift(&c, "vm1", Power::Stopped, &config(plain_live()));
    assert_eq!(
        param(&d, "scsi0"),
        Some("local-lvm:vm-100-disk-0,discard=on,size=32G")
    );
    assert_eq!(d.grows.len(), 1);
}

#[test]
fn disk_options_converge_via_the_live_form_keeping_volume_size_and_unknown_tokens() {
    let doc = vm(&format!(
        "  disks:\n    - storage: local-lvm\n      size: 32GiB\n      iothread: true\n      discard: \"on\"\n      ssd: true\n      aio: native\n{NIC}"
    ));
    let c = cluster(&[&doc]);
    let d = drift(
        &c,
        "vm1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"scsi0": "local-lvm:vm-100-disk-0,backup=0,size=32G"}),
        )),
    );
    assert_eq!(
        param(&d, "scsi0"),
        Some("local-lvm:vm-100-disk-0,iothread=1,discard=on,ssd=1,aio=native,backup=0,size=32G")
    );
    assert!(d.anomalies.is_empty());
}

#[test]
fn empty_owned_disk_slot_takes_the_create_form() {
    let doc = vm(&format!(
        "  disks:\n    - storage: local-lvm\n      size: 32GiB\n    - storage: local-lvm\n      size: 4GiB\n      iothread: true\n{NIC}"
    ));
    let c = cluster(&[&doc]);
    let d = drift(&c, "vm1", Power::Stopped, &config(plain_live()));
    assert_eq!(keys(&d), ["scsi1"]);
    assert_eq!(param(&d, "scsi1"), Some("local-lvm:4,iothread=1"));
}

#[test]
fn image_disk_compares_the_pool_only() {
    let doc = vm(&format!(
        "  disks:\n    - storage: local-lvm\n      image: debian-cloud\n{NIC}"
    ));
    let c = cluster(&[&doc]);
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"scsi0": "local-lvm:vm-100-disk-0,size=3G"}),
        )),
    );
    assert!(d.changes.is_empty() && d.anomalies.is_empty(), "{d:#?}");
}

#[test]
fn live_only_slots_are_anomalies_never_deleted() {
    let c = cluster(&[&plain_vm()]);
    let live = with(
        plain_live(),
        json!({
            "scsi1": "local-lvm:vm-100-disk-1,size=8G", "net1": "virtio=BC:24:11:00:00:01,bridge=vmbr1",
            "hostpci0": "0000:17:00.0", "ide2": "none,media=cdrom", "ide0": "local:iso/x.iso,media=cdrom",
            "scsi5": "local-lvm:vm-100-cloudinit,media=cdrom"
        }),
    );
    let d = drift(&c, "vm1", Power::Running, &config(live));
    assert!(d.delete.is_empty() && d.params.is_empty());
    let fields: Vec<&str> = d
        .anomalies
        .iter()
        .map(|a| a.field.as_deref().unwrap())
        .collect();
    assert_eq!(fields, ["hostpci0", "net1", "scsi1", "scsi5"]);
    assert!(
        d.anomalies
            .iter()
            .all(|a| a.anomaly_type() == AnomalyType::LiveOnlySlot)
    );
}

#[test]
fn cdrom_is_three_state_and_pve_size_token_is_not_drift() {
    let attach = cluster(&[&vm(&format!(
        "{DISK}{NIC}  hardware:\n    cdrom:\n      iso: debian-iso\n"
    ))]);
    let d = drift(
        &attach,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"ide2": "local:iso/debian-13.iso,media=cdrom,size=522284K"}),
        )),
    );
    assert!(d.changes.is_empty(), "{d:#?}");
    let d = drift(
        &attach,
        "vm1",
        Power::Running,
        &config(with(plain_live(), json!({"ide2": "none,media=cdrom"}))),
    );
    assert_eq!(
        param(&d, "ide2"),
        Some("local:iso/debian-13.iso,media=cdrom")
    );
    // qemu-server `vmconfig_update_disk` swaps a CD-ROM's medium live
    // (`change_medium`).
    assert_eq!(d.impact, Impact::Live);
    let detach = cluster(&[&vm(&format!(
        "{DISK}{NIC}  hardware:\n    cdrom:\n      iso: none\n"
    ))]);
    let d = drift(
        &detach,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"ide2": "local:iso/debian-13.iso,media=cdrom,size=5M"}),
        )),
    );
    assert_eq!(param(&d, "ide2"), Some("none,media=cdrom"));
    assert!(
        drift(
            &detach,
            "vm1",
            Power::Running,
            &config(with(plain_live(), json!({"ide2": "none,media=cdrom"})))
        )
        .changes
        .is_empty()
    );
    // Not owned: whatever is there stays.
    let c = cluster(&[&plain_vm()]);
    assert!(
        drift(
            &c,
            "vm1",
            Power::Running,
            &config(with(
                plain_live(),
                json!({"ide2": "local:iso/other.iso,media=cdrom"})
            ))
        )
        .changes
        .is_empty()
    );
}

#[test]
fn cloud_init_drive_is_written_only_into_an_empty_slot() {
    let c = cluster(&[&vm(&format!(
        "{DISK}{NIC}  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n"
    ))]);
    let d = drift(&c, "vm1", Power::Stopped, &config(plain_live()));
    assert_eq!(param(&d, "ide2"), Some("local-lvm:cloudinit"));
    let d = drift(
        &c,
        "vm1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"ide2": "local-lvm:vm-100-cloudinit,media=cdrom,size=4M"}),
        )),
    );
    assert!(d.changes.is_empty() && d.anomalies.is_empty());
    let d = drift(
        &c,
        "vm1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"ide2": "ceph:vm-100-cloudinit,media=cdrom"}),
        )),
    );
    assert!(d.params.is_empty());
    assert_eq!(d.anomalies[0].field.as_deref(), Some("ide2"));
    // ide2 holding a CD drive while no cloud-init drive exists: a person.
    let d = drift(
        &c,
        "vm1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"ide2": "local:iso/debian.iso,media=cdrom"}),
        )),
    );
    assert!(d.params.is_empty());
    assert_eq!(d.anomalies[0].field.as_deref(), Some("ide2"));
}

#[test]
fn efidisk_pre_enrolled_keys_change_is_for_a_person_and_size_clamp_is_not_drift() {
    let c = cluster(&[&vm(&format!(
        "{DISK}{NIC}  hardware:\n    bios: ovmf\n    efi-disk:\n      storage: local-lvm\n      size: 1MiB\n      secure-boot: disabled\n"
    ))]);
    let base = with(plain_live(), json!({"bios": "ovmf"}));
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            base.clone(),
            json!({"efidisk0": "local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=1,ms-cert=2023,size=4M"}),
        )),
    );
    assert!(d.params.is_empty(), "{:?}", d.params);
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::NeedsPerson);
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            base.clone(),
            json!({"efidisk0": "local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=0,size=4M"}),
        )),
    );
    assert!(d.changes.is_empty());
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            base,
            json!({"efidisk0": "ceph:vm-100-disk-1,efitype=4m,size=4M"}),
        )),
    );
    assert!(d.params.is_empty() && d.anomalies[0].anomaly_type() == AnomalyType::DataLoss);
}

#[test]
fn hostpci_compares_bdf_and_owned_pcie_and_keeps_unowned_tokens_on_rewrite() {
    let c = cluster(&[&vm(&format!(
        "{DISK}{NIC}  hardware:\n    pci-devices:\n      - slot: 0\n        device: 0000:17:00.0\n        pcie: true\n"
    ))]);
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"hostpci0": "0000:17:00.0,pcie=1,x-vga=1,rombar=0"}),
        )),
    );
    assert!(d.changes.is_empty(), "a PVE-side token alone is not drift");
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"hostpci0": "0000:18:00.0,x-vga=1"}),
        )),
    );
    assert_eq!(param(&d, "hostpci0"), Some("0000:17:00.0,pcie=1,x-vga=1"));
    assert_eq!(d.impact, Impact::StopStart);
}

#[test]
fn cipassword_mask_is_never_rewritten() {
    let c = cluster(&[&password_vm()]);
    let s = secrets();
    let keys_wire = proxops_core::wire::SshKeys::from_text(&format!("{KEY_B}\n{KEY_A}"))
        .unwrap()
        .to_wire();
    let d = drift_with(
        &c,
        &s,
        "vm1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"cipassword": "**********", "sshkeys": keys_wire}),
        )),
    );
    assert!(d.changes.is_empty(), "{d:#?}");
}

#[test]
fn cipassword_is_written_once_when_absent_and_shown_as_secret() {
    let c = cluster(&[&password_vm()]);
    let s = secrets();
    let d = drift_with(&c, &s, "vm1", Power::Running, &config(plain_live()));
    assert!(matches!(
        d.params.get("cipassword"),
        Some(ParamValue::Secret(_))
    ));
    let ch = d.changes.iter().find(|c| c.field == "cipassword").unwrap();
    assert_eq!(ch.to.as_deref(), Some("<secret>"));
    assert!(!format!("{d:?}").contains("hunter2"));
    assert_eq!(d.impact, Impact::Reboot);
}

#[test]
fn sshkeys_compare_as_decoded_key_sets_and_star_leaves_them_to_pve() {
    let c = cluster(&[&vm(&format!(
        "{DISK}{NIC}  cloud-init-data:\n    ssh-keys:\n      - {KEY_A}\n      - {KEY_B}\n"
    ))]);
    let renamed = proxops_core::wire::SshKeys::from_text(&format!(
        "{}\n{}",
        KEY_B.replace("bob@desk", "other"),
        KEY_A
    ))
    .unwrap()
    .to_wire();
    assert!(
        drift(
            &c,
            "vm1",
            Power::Running,
            &config(with(plain_live(), json!({"sshkeys": renamed})))
        )
        .changes
        .is_empty()
    );
    let one = proxops_core::wire::SshKeys::from_text(KEY_A)
        .unwrap()
        .to_wire();
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(plain_live(), json!({"sshkeys": one}))),
    );
    assert_eq!(keys(&d), ["sshkeys"]);
    let star = cluster(&[&vm(&format!(
        "{DISK}{NIC}  cloud-init-data:\n    ssh-keys: [\"*\"]\n"
    ))]);
    assert!(
        drift(
            &star,
            "vm1",
            Power::Running,
            &config(with(plain_live(), json!({"sshkeys": "anything"})))
        )
        .changes
        .is_empty()
    );
}

#[test]
fn nameservers_and_search_domains_compare_as_sets_and_ipconfig_keeps_ip6() {
    let c = cluster(&[&vm(&format!(
        "{DISK}{NIC}  cloud-init-data:\n    nameservers: [1.1.1.1, 9.9.9.9]\n    search-domains: [a.example, b.example]\n    ipconfigs:\n      - nic: 0\n        ip: 10.0.0.5/24\n        gateway: 10.0.0.1\n"
    ))]);
    let live = with(
        plain_live(),
        json!({"nameserver": "9.9.9.9 1.1.1.1", "searchdomain": "b.example a.example", "ipconfig0": "ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto"}),
    );
    assert!(
        drift(&c, "vm1", Power::Running, &config(live.clone()))
            .changes
            .is_empty()
    );
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(
            live,
            json!({"ipconfig0": "ip=10.0.0.6/24,gw=10.0.0.1,ip6=auto"}),
        )),
    );
    assert_eq!(
        param(&d, "ipconfig0"),
        Some("ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto")
    );
}

#[test]
fn vm_against_a_live_template_is_an_anomaly_without_update() {
    let c = cluster(&[&vm(&format!("{DISK}{NIC}  tags: [x]\n"))]);
    let d = drift(
        &c,
        "vm1",
        Power::Stopped,
        &config(with(plain_live(), json!({"template": 1, "memory": "1"}))),
    );
    assert!(d.is_empty());
    assert_eq!(d.anomalies.len(), 1);
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::NeedsPerson);
}

#[test]
fn clone_backed_vm_clears_undeclared_identity_but_never_cipassword() {
    let doc = clone_vm("  cloud-init-data:\n    ci-user: ops\n");
    let c = cluster(&[TEMPLATE, &doc]);
    let live = with(
        plain_live(),
        json!({
            "scsi0": "local-lvm:vm-100-disk-0,size=3G", "scsihw": "virtio-scsi-single", "ide2": "local-lvm:vm-100-cloudinit,media=cdrom",
            "ciuser": "template", "ipconfig0": "ip=10.0.0.9/24", "cipassword": "**********", "cicustom": "user=local:snippets/x.yaml"
        }),
    );
    let d = drift(&c, "vm1", Power::Running, &config(live));
    assert_eq!(d.delete, ["cicustom", "ipconfig0"]);
    assert_eq!(param(&d, "ciuser"), Some("ops"));
    assert!(
        d.anomalies.is_empty(),
        "template disks are not live-only slots: {:#?}",
        d.anomalies
    );
    for k in &d.delete {
        assert!(!d.params.contains(k));
    }
}

#[test]
fn description_is_compared_trimmed() {
    let c = cluster(&[&vm(&format!("{DISK}{NIC}  pve-description: hello\n"))]);
    assert!(
        drift(
            &c,
            "vm1",
            Power::Running,
            &config(with(plain_live(), json!({"description": "hello\n"})))
        )
        .changes
        .is_empty()
    );
}

// ------------------------------------------------------------ real samples

/// `qemu-config-ovmf-pve9` (a real PVE 9 config) against the manifest that
/// describes it: only the missing name and ownership tag drift; the
/// cloud-init volume on scsi1 is PVE's (live-only anomaly).
#[test]
fn real_pve9_ovmf_config_shape() {
    let doc = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm111\nspec:\n  node: pve1\n  vmid: 111\n  memory: 4GiB\n  cpu:\n    type: host\n    cores: 4\n  disks:\n    - storage: local-zfs\n      size: 160GiB\n      controller: virtio-scsi-pci\n      discard: \"on\"\n      ssd: true\n  networks:\n    - bridge: vmbr0\n      firewall: true\n  hardware:\n    machine: q35\n    bios: ovmf\n    serial0: socket\n    efi-disk:\n      storage: local-zfs\n      template: 4m\n  options:\n    onboot: true\n    boot-order: [scsi0]\n  cloud-init-data:\n    ssh-keys:\n      - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y+TBx08F7zRdhBlKjk7aywMT\n    ipconfigs:\n      - nic: 0\n        ip: 10.100.1.174/24\n        gateway: 10.100.1.1\n";
    let live = json!({"smbios1":"uuid=42ecc256-a7c5-4d93-b630-0e7a06c051c2","cpu":"host","scsihw":"virtio-scsi-pci","bios":"ovmf","ostype":"l26","serial0":"socket","net0":"virtio=bc:24:11:4e:8f:d1,bridge=vmbr0,firewall=1","meta":"creation-qemu=10.0.2,ctime=1754900283","scsi0":"local-zfs:vm-111-disk-1,discard=on,size=160G,ssd=1","scsi1":"local-zfs:vm-111-cloudinit,media=cdrom","vmgenid":"abac705c-31ed-4b75-8587-8c86d5c810c4","digest":"18389648fd69603dd93ab0c443e1f32267f6c436","efidisk0":"local-zfs:vm-111-disk-0,efitype=4m,size=1M","machine":"q35","kvm":1,"onboot":1,"sshkeys":"ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y%2BTBx08F7zRdhBlKjk7aywMT","memory":"4096","cores":4,"ipconfig0":"ip=10.100.1.174/24,gw=10.100.1.1,ip6=auto","boot":"order=scsi0"});
    let c = cluster(&[doc]);
    let d = drift(&c, "vm111", Power::Running, &config(live));
    assert_eq!(keys(&d), ["name", "tags"]);
    assert_eq!(d.impact, Impact::Live);
    assert_eq!(d.anomalies.len(), 1);
    assert_eq!(
        (
            d.anomalies[0].anomaly_type(),
            d.anomalies[0].field.as_deref()
        ),
        (AnomalyType::LiveOnlySlot, Some("scsi1"))
    );
}

/// `qemu-config-pve7`: numeric memory, `agent: "0"`, an upper-case pinned
/// MAC with `tag=103`, an empty CD drive nobody owns.
#[test]
fn real_pve7_config_shape() {
    let doc = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: k-test-c-3\nspec:\n  node: pve1\n  vmid: 107\n  memory: 8GiB\n  cpu:\n    type: host\n    cores: 8\n  disks:\n    - storage: local-lvm\n      size: 32GiB\n      controller: virtio-scsi-pci\n  networks:\n    - bridge: vmbr0\n      mac: a2:7b:45:48:9c:e5\n      vlan: 103\n  hardware:\n    sockets: 1\n    numa: true\n  options:\n    agent: true\n    tablet: true\n    hotplug: [usb, disk, network]\n    boot-order: [net0, ide2, scsi0]\n  tags: [k8s]\n";
    let live = json!({"ostype":"l26","bios":"seabios","digest":"a2019681a11059dc5602d474c3443b907db213b7","onboot":0,"smbios1":"uuid=3ae878b3-a77e-4a4a-adc6-14ee88350d36,manufacturer=MTIz,product=MTIz,version=MTIz,serial=MTIz,sku=MTIz,family=MTIz,base64=1","scsi0":"local-lvm:vm-107-disk-0,size=32G","sockets":1,"scsihw":"virtio-scsi-pci","boot":"order=net0;ide2;scsi0","cpu":"host","meta":"creation-qemu=6.2.0,ctime=1673361689","ide2":"none,media=cdrom","kvm":1,"name":"k-test-c-3","hotplug":"network,disk,usb","agent":"0","numa":1,"memory":8192,"net0":"virtio=A2:7B:45:48:9C:E5,bridge=vmbr0,tag=103","cores":8,"tablet":1,"vmgenid":"10e77c08-c74f-466e-9186-eb5f8da4079c"});
    let c = cluster(&[doc]);
    let d = drift(&c, "k-test-c-3", Power::Running, &config(live));
    assert_eq!(keys(&d), ["agent", "tags"]);
    assert_eq!(param(&d, "agent"), Some("1"));
    assert_eq!(param(&d, "tags"), Some("k8s;proxops"));
    assert_eq!(d.impact, Impact::Reboot);
    assert!(d.anomalies.is_empty());
}

#[test]
fn secrets_never_show_in_debug_output() {
    let s = secrets();
    let shown = format!("{s:?}");
    assert!(
        shown.contains("ops") && !shown.contains("hunter2"),
        "{shown}"
    );
}

#[test]
fn extra_keys_pass_through_and_drift_verbatim() {
    let c = cluster(&[&vm(&format!("{DISK}{NIC}  extra:\n    keyboard: de\n"))]);
    let p = create(&vm(&format!("{DISK}{NIC}  extra:\n    keyboard: de\n")));
    assert_eq!(
        p.last().map(|(k, v)| (k.as_str(), v.as_str())),
        Some(("keyboard", "de"))
    );
    let d = drift(
        &c,
        "vm1",
        Power::Running,
        &config(with(plain_live(), json!({"keyboard": "en-us"}))),
    );
    assert_eq!((keys(&d), d.impact), (vec!["keyboard"], Impact::Reboot));
    assert!(
        drift(
            &c,
            "vm1",
            Power::Running,
            &config(with(plain_live(), json!({"keyboard": "de"})))
        )
        .changes
        .is_empty()
    );
}

#[test]
fn cpu_limit_is_cpulimit_compared_as_a_number_and_applied_live() {
    let doc =
        vm(&format!("{DISK}{NIC}")).replace("    cores: 2\n", "    cores: 2\n    limit: 1.5\n");
    assert_eq!(get(&create(&doc), "cpulimit"), Some("1.5"));
    let c = cluster(&[&doc]);
    // PVE may spell it with a trailing zero: the same number is no drift.
    let same = config(with(plain_live(), json!({"cpulimit": "1.50"})));
    assert!(drift(&c, "vm1", Power::Running, &same).is_empty());
    // Absent is PVE's 0 (unlimited): set, and a running VM takes it live.
    let d = drift(&c, "vm1", Power::Running, &config(plain_live()));
    assert_eq!(keys(&d), ["cpulimit"]);
    assert_eq!(param(&d, "cpulimit"), Some("1.5"));
    assert_eq!(d.impact, Impact::Live);
    // Not declared: whatever PVE holds stays.
    let c = cluster(&[&plain_vm()]);
    let tuned = config(with(plain_live(), json!({"cpulimit": "2"})));
    assert!(drift(&c, "vm1", Power::Running, &tuned).is_empty());
}

#[test]
fn cpu_limit_beyond_128_host_cpus_is_refused_by_validation() {
    let doc =
        vm(&format!("{DISK}{NIC}")).replace("    cores: 2\n", "    cores: 2\n    limit: 129\n");
    let refused = std::panic::catch_unwind(|| cluster(&[&doc]));
    assert!(refused.is_err(), "a cpu limit of 129 was accepted");
}
