//! The impact of a change on a running guest follows PVE's hotplug rules
//! (pve-semantics §2), decided from the guest's own `hotplug` and `numa`:
//! one test per row, each citing where Proxmox's source decides it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proxops_core::action::Impact;
use proxops_core::live::Power;
use serde_json::{Value, json};

use support::fixture::{cluster, config, drift, keys};

/// VM `vm1` with `memory`, `cores` and `nics` (YAML list items).
fn vm(memory: &str, cores: u32, nics: &str, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm1\nspec:\n  node: pve1\n  vmid: 100\n  memory: {memory}\n  cpu:\n    type: host\n    cores: {cores}\n  disks:\n    - storage: local-lvm\n      size: 32GiB\n  networks:\n{nics}{extra}"
    )
}

const ONE_NIC: &str = "    - bridge: vmbr0\n";

/// The running VM's config: `plain` plus `extra` (null removes a key).
fn live_vm(extra: Value) -> Value {
    let mut base = json!({
        "name": "vm1", "memory": "2048", "cpu": "host", "cores": 2,
        "scsi0": "local-lvm:vm-100-disk-0,size=32G",
        "net0": "virtio=BC:24:11:4E:8F:D1,bridge=vmbr0",
        "tags": "proxops", "boot": "order=scsi0;net0",
        "digest": "18389648fd69603dd93ab0c443e1f32267f6c436"
    });
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

/// The impact of converging `doc` on a running guest with `live`.
fn impact(doc: &str, live: Value) -> (Impact, Vec<String>) {
    let c = cluster(&[doc]);
    let d = drift(&c, "vm1", Power::Running, &config(live));
    (d.impact, keys(&d).into_iter().map(str::to_owned).collect())
}

// QS `QemuServer.pm` `vmconfig_hotplug_pending`: `memory` goes through
// `QemuServer/Memory.pm` `qemu_memory_hotplug` only when `hotplug` has
// `memory`; that function dies unless `numa` is on.
#[test]
fn memory_is_live_only_with_memory_hotplug_and_numa() {
    let doc = vm("4GiB", 2, ONE_NIC, "");
    let with_both = live_vm(json!({"hotplug": "network,disk,usb,memory", "numa": 1}));
    assert_eq!(
        impact(&doc, with_both),
        (Impact::Live, vec!["memory".into()])
    );
    let no_numa = live_vm(json!({"hotplug": "network,disk,usb,memory"}));
    assert_eq!(impact(&doc, no_numa).0, Impact::StopStart);
    let default_hotplug = live_vm(json!({"numa": 1}));
    assert_eq!(impact(&doc, default_hotplug).0, Impact::StopStart);
}

// QS `QemuServer.pm` `vmconfig_hotplug_pending`: only `vcpus` is
// hot-plugged (`qemu_cpu_hotplug`, with `cpu` hotplug); `cores` has no
// branch there and stays pending, with or without `cpu` hotplug.
#[test]
fn cores_wait_for_a_restart_even_with_cpu_hotplug() {
    let doc = vm("2GiB", 4, ONE_NIC, "");
    let cpu = live_vm(json!({"hotplug": "network,disk,cpu"}));
    assert_eq!(impact(&doc, cpu).0, Impact::StopStart);
    assert_eq!(impact(&doc, live_vm(json!({}))).0, Impact::StopStart);
}

// QS `vmconfig_update_net`: bridge, tag, firewall, rate, trunks and
// link_down are re-applied to the running tap device, hotplug or not.
#[test]
fn a_nic_bridge_vlan_or_firewall_change_is_live_even_with_hotplug_off() {
    let doc = vm(
        "2GiB",
        2,
        "    - {bridge: vmbr1, vlan: 20, firewall: true}\n",
        "",
    );
    let off = live_vm(json!({"hotplug": "0"}));
    assert_eq!(impact(&doc, off), (Impact::Live, vec!["net0".into()]));
}

// QS `vmconfig_update_net`: a model (or MAC) change unplugs and re-plugs
// the device, which needs `network` hotplug.
#[test]
fn a_nic_model_change_is_live_only_with_network_hotplug() {
    let doc = vm("2GiB", 2, "    - {bridge: vmbr0, model: e1000}\n", "");
    assert_eq!(
        impact(&doc, live_vm(json!({}))),
        (Impact::Live, vec!["net0".into()])
    );
    let off = live_vm(json!({"hotplug": "disk"}));
    assert_eq!(impact(&doc, off).0, Impact::StopStart);
}

// QS `vmconfig_hotplug_pending` → `vm_deviceplug` for a new `netN`: only
// with `network` hotplug (the default `network,disk,usb` has it; `1` is
// that default, `0` nothing).
#[test]
fn a_new_nic_is_live_with_network_hotplug() {
    let doc = vm("2GiB", 2, "    - bridge: vmbr0\n    - bridge: vmbr1\n", "");
    assert_eq!(
        impact(&doc, live_vm(json!({"hotplug": "1"}))),
        (Impact::Live, vec!["net1".into()])
    );
    assert_eq!(
        impact(&doc, live_vm(json!({"hotplug": "0"}))).0,
        Impact::StopStart
    );
}

// QS `vmconfig_update_disk`: an existing CD-ROM drive gets its new medium
// through `change_medium`, live, even with hotplug off.
#[test]
fn a_cdrom_medium_change_is_live_even_with_hotplug_off() {
    let doc = vm(
        "2GiB",
        2,
        ONE_NIC,
        "  hardware:\n    cdrom:\n      iso: none\n",
    );
    let live = live_vm(json!({"hotplug": "0", "ide2": "local:iso/debian-13.iso,media=cdrom"}));
    assert_eq!(impact(&doc, live), (Impact::Live, vec!["ide2".into()]));
}

// QS `vmconfig_update_disk`: a new disk on scsi or virtio is hot-plugged
// with `disk` hotplug; ide and sata cannot be (they stay pending).
#[test]
fn a_new_scsi_disk_is_live_with_disk_hotplug_and_a_sata_disk_is_not() {
    let two = "  disks:\n    - storage: local-lvm\n      size: 32GiB\n    - storage: local-lvm\n      size: 8GiB\n";
    let doc = vm("2GiB", 2, ONE_NIC, "").replace(
        "  disks:\n    - storage: local-lvm\n      size: 32GiB\n",
        two,
    );
    let (i, k) = impact(&doc, live_vm(json!({})));
    assert_eq!((i, k), (Impact::Live, vec!["scsi1".into()]));
    assert_eq!(
        impact(&doc, live_vm(json!({"hotplug": "network"}))).0,
        Impact::StopStart
    );
    let sata = doc.replace(
        "      size: 8GiB\n",
        "      size: 8GiB\n      interface: sata0\n",
    );
    let (i, k) = impact(&sata, live_vm(json!({})));
    assert_eq!(k, vec!["sata0".to_owned()]);
    assert_eq!(i, Impact::StopStart);
}

// QS `vmconfig_hotplug_pending`: `vga`, `boot`, `agent` have no hot-plug
// branch: they wait for a restart, whatever `hotplug` holds.
#[test]
fn vga_waits_for_a_restart_with_every_hotplug_feature_on() {
    let doc = vm("2GiB", 2, ONE_NIC, "  hardware:\n    display: virtio\n");
    let all = live_vm(json!({"hotplug": "network,disk,usb,memory,cpu", "numa": 1}));
    assert_eq!(impact(&doc, all), (Impact::Reboot, vec!["vga".into()]));
}

/// Container `ct1`.
fn ct(body: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct1\nspec:\n  node: pve1\n  vmid: 200\n  template: debian-ct\n  memory: 1GiB\n  cpu:\n    cores: 2\n  root:\n    storage: local-lvm\n    size: 8GiB\n  networks:\n    - bridge: vmbr0\n      iface: eth0\n{body}"
    )
}

fn live_ct(extra: Value) -> Value {
    let mut base = json!({
        "hostname": "ct1", "memory": 1024, "swap": 512, "cores": 2, "arch": "amd64", "ostype": "debian",
        "rootfs": "local-lvm:vm-200-disk-0,size=8G", "unprivileged": 1,
        "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,type=veth",
        "tags": "proxops", "digest": "aa"
    });
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

fn ct_impact(doc: &str, live: Value) -> (Impact, Vec<String>) {
    let c = cluster(&[doc]);
    let d = drift(&c, "ct1", Power::Running, &config(live));
    (d.impact, keys(&d).into_iter().map(str::to_owned).collect())
}

// PC `LXC/Config.pm` `vmconfig_hotplug_pending`: `cores`, `memory` and
// `swap` are cgroup limits changed on the running container.
#[test]
fn container_cores_and_memory_are_live() {
    let doc = ct("");
    let (i, k) = ct_impact(&doc, live_ct(json!({"memory": 512, "cores": 1})));
    assert_eq!(
        (i, k),
        (Impact::Live, vec!["cores".into(), "memory".into()])
    );
}

// PC `vmconfig_hotplug_pending` → `LXC.pm` `update_net`: a NIC change is
// applied to the running container's veth.
#[test]
fn a_container_nic_change_is_live() {
    let live =
        live_ct(json!({"net0": "name=eth0,bridge=vmbr9,hwaddr=BC:24:11:00:00:01,type=veth"}));
    assert_eq!(
        ct_impact(&ct(""), live),
        (Impact::Live, vec!["net0".into()])
    );
}

// PC `vmconfig_hotplug_pending`: a new `mpN` is hot-plugged
// (`add_unused_volume`/mount in the running container); an existing mount
// point's options wait for a restart.
#[test]
fn a_new_mount_point_is_live_and_an_existing_one_waits() {
    let doc = ct("  mount-points:\n    - {storage: local-lvm, size: 4GiB, mount-point: /srv}\n");
    let (i, k) = ct_impact(&doc, live_ct(json!({})));
    assert_eq!((i, k), (Impact::Live, vec!["mp0".into()]));
    let moved = live_ct(json!({"mp0": "local-lvm:vm-200-disk-1,mp=/data,size=4G"}));
    let (i, k) = ct_impact(&doc, moved);
    assert_eq!(k, vec!["mp0".to_owned()]);
    assert_eq!(i, Impact::StopStart);
}

// PC `vmconfig_hotplug_pending`: `nameserver` has no hot-plug branch; it
// is written to the pending section.
#[test]
fn a_container_nameserver_change_waits_for_a_restart() {
    let doc = ct("  dns:\n    nameservers: [10.0.0.53]\n");
    let (i, k) = ct_impact(&doc, live_ct(json!({})));
    assert_eq!((i, k), (Impact::Reboot, vec!["nameserver".into()]));
}

// QS `QemuServer.pm` `vmconfig_hotplug_pending`: a new `balloon` target is
// applied to the running VM (`mon_cmd balloon`), whatever its hotplug;
// turning the balloon device on or off dies with "skip" ("enable/disable
// ballooning device is not hotpluggable") and stays pending.
#[test]
fn a_balloon_target_is_live_and_turning_ballooning_on_or_off_is_not() {
    let doc = vm("4GiB", 2, ONE_NIC, "  balloon: 1GiB\n");
    let from = |b: Value| live_vm(json!({"memory": "4096", "hotplug": "0", "balloon": b}));
    assert_eq!(
        impact(&doc, from(json!("2048"))),
        (Impact::Live, vec!["balloon".into()])
    );
    assert_eq!(
        impact(&doc, from(json!("0"))),
        (Impact::StopStart, vec!["balloon".into()])
    );
    let off = vm("4GiB", 2, ONE_NIC, "  balloon: 0\n");
    assert_eq!(
        impact(&off, from(json!("2048"))),
        (Impact::StopStart, vec!["balloon".into()])
    );
    assert_eq!(impact(&off, from(json!("0"))), (Impact::Live, vec![]));
}

// QS `QemuServer.pm` `config_to_command`: without `balloon` the balloon
// device is on with `memory` as its target, so a target equal to the
// memory is already met; any other is written.
#[test]
fn an_absent_balloon_is_the_memory() {
    let same = vm("4GiB", 2, ONE_NIC, "  balloon: 4GiB\n");
    let absent = live_vm(json!({"memory": "4096", "balloon": null}));
    assert_eq!(impact(&same, absent.clone()), (Impact::Live, vec![]));
    let lower = vm("4GiB", 2, ONE_NIC, "  balloon: 2GiB\n");
    assert_eq!(
        impact(&lower, absent),
        (Impact::Live, vec!["balloon".into()])
    );
    // Not declared, a live target is left alone.
    let undeclared = vm("4GiB", 2, ONE_NIC, "");
    let set = live_vm(json!({"memory": "4096", "balloon": "1024"}));
    assert_eq!(impact(&undeclared, set), (Impact::Live, vec![]));
}

// QS `API2/Qemu.pm` `update_vm_api`: "balloon value too large (must be
// smaller than assigned memory)"; `validate` refuses it first, at the
// field's line.
#[test]
fn a_balloon_above_memory_is_refused_at_its_line() {
    let doc = vm("2GiB", 2, ONE_NIC, "  balloon: 3GiB\n");
    let diags = support::fixture::load_cluster("", &[&doc]).unwrap_err();
    let d = diags
        .iter()
        .find(|d| d.field.as_deref() == Some("spec.balloon"))
        .unwrap_or_else(|| panic!("{diags:#?}"));
    assert_eq!(d.file, "vm/t/vm1.yaml");
    assert_eq!(d.line, Some(17));
    assert!(
        d.message.contains("balloon 3GiB is above memory 2GiB"),
        "{}",
        d.message
    );
}
