//! Every row of the owned-key tables, as a property: for any desired value
//! of the row's field, a guest created from the create form and read back
//! from PVE shows no drift, and the manifest adopted from that guest (with
//! the ownership tag taken off) plans nothing but the tag claim.
//!
//! A new row without a generator here fails `every_row_has_a_generator`:
//! adding an owned key means adding its values below.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use proxops_core::adopt::{AdoptOptions, TEMPLATE_PLACEHOLDER, adopt};
use proxops_core::drift::{
    CloudInitSecrets, Context, guest_drift, lxc_owned_keys, qemu_owned_keys,
};
use proxops_core::names::ClusterName;
use proxops_core::secret::Secret;
use proxops_core::wire::TagSet;
use serde_json::{Value, json};

use support::{demo, fixture};

type Fields = Vec<(&'static str, Value)>;

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILnyd2niY8ht8KRea6M6y+TBx08F7zRdhBlKjk7aywMT ops@host";

fn bools() -> BoxedStrategy<Value> {
    any::<bool>().prop_map(Value::Bool).boxed()
}

fn one_of(items: &'static [&'static str]) -> BoxedStrategy<Value> {
    proptest::sample::select(items)
        .prop_map(|s| json!(s))
        .boxed()
}

fn field(path: &'static str, s: BoxedStrategy<Value>) -> BoxedStrategy<Fields> {
    s.prop_map(move |v| vec![(path, v)]).boxed()
}

/// The generator of one qemu row: the manifest fields it sets.
fn qemu_values(key: &str) -> Option<BoxedStrategy<Fields>> {
    let disk = (1u64..64, any::<bool>(), proptest::option::of(one_of(&["on", "ignore"])), any::<bool>(), proptest::option::of(one_of(&["native", "threads", "io_uring"])))
        .prop_map(|(gib, iothread, discard, ssd, aio)| {
            let mut d = json!({"storage": "local-lvm", "size": format!("{gib}GiB"), "iothread": iothread, "ssd": ssd});
            if let Some(x) = discard { d["discard"] = x; }
            if let Some(x) = aio { d["aio"] = x; }
            d
        });
    Some(match key {
        "name" => field(
            "spec.pve-name",
            "[a-z][a-z0-9-]{0,20}[a-z0-9]"
                .prop_map(|s| json!(s))
                .boxed(),
        ),
        "memory" => field(
            "spec.memory",
            (1u64..256)
                .prop_map(|n| json!(format!("{}MiB", n * 64)))
                .boxed(),
        ),
        // A target up to the memory, 0 (ballooning off) included.
        "balloon" => (1u64..64, 0u64..=64)
            .prop_map(|(memory, balloon)| {
                let balloon = balloon.min(memory) * 64;
                vec![
                    ("spec.memory", json!(format!("{}MiB", memory * 64))),
                    ("spec.balloon", json!(format!("{balloon}MiB"))),
                ]
            })
            .boxed(),
        "cpu" => (
            one_of(&["host", "kvm64", "qemu64", "x86-64-v2-AES"]),
            any::<bool>(),
        )
            .prop_map(|(t, hidden)| {
                vec![("spec.cpu.type", t), ("spec.options.hidden", json!(hidden))]
            })
            .boxed(),
        "cores" => field("spec.cpu.cores", (1u32..64).prop_map(|n| json!(n)).boxed()),
        "cpulimit" => field(
            "spec.cpu.limit",
            (0u32..=512).prop_map(|n| json!(f64::from(n) / 4.0)).boxed(),
        ),
        "sockets" => field(
            "spec.hardware.sockets",
            (1u32..5).prop_map(|n| json!(n)).boxed(),
        ),
        "numa" => field("spec.hardware.numa", bools()),
        "machine" => field(
            "spec.hardware.machine",
            one_of(&["i440fx", "q35", "pc-q35-9.0", "pc-i440fx-8.1"]),
        ),
        "bios" => field("spec.hardware.bios", one_of(&["seabios", "ovmf"])),
        "vga" => field(
            "spec.hardware.display",
            one_of(&["std", "virtio", "qxl", "vmware", "serial0"]),
        ),
        "scsihw, scsiN, virtioN, sataN, ideN" => (
            proptest::collection::vec(disk, 1..4),
            one_of(&["virtio-scsi-single", "virtio-scsi-pci", "lsi", "megasas"]),
        )
            .prop_map(|(mut disks, controller)| {
                disks[0]["controller"] = controller;
                vec![("spec.disks", Value::Array(disks))]
            })
            .boxed(),
        "efidisk0, tpmstate0" => (
            proptest::option::of((
                proptest::option::of(one_of(&["2m", "4m"])),
                proptest::option::of(one_of(&["enabled", "disabled"])),
            )),
            proptest::option::of(one_of(&["v1.2", "v2.0"])),
        )
            .prop_map(|(efi, tpm)| {
                let mut f = Vec::new();
                if let Some((t, sb)) = efi {
                    let mut e = json!({"storage": "local-lvm"});
                    if let Some(t) = t {
                        e["template"] = t;
                    }
                    if let Some(sb) = sb {
                        // Secure Boot needs efitype 4m (qemu-server
                        // `QemuServer/OVMF.pm` `get_ovmf_files`).
                        if sb == "enabled" {
                            e["template"] = json!("4m");
                        }
                        e["secure-boot"] = sb;
                    }
                    f.push(("spec.hardware.bios", json!("ovmf")));
                    f.push(("spec.hardware.efi-disk", e));
                }
                if let Some(v) = tpm {
                    f.push((
                        "spec.hardware.tpm",
                        json!({"storage": "local-lvm", "version": v}),
                    ));
                }
                f
            })
            .boxed(),
        "serial0" => field("spec.hardware.serial0", one_of(&["socket", "/dev/ttyS0"])),
        "ide2 (cloud-init drive)" => field(
            "spec.hardware.cloud-init",
            Just(json!({"enabled": true, "storage": "local-lvm"})).boxed(),
        ),
        "ide2/ide3 (CD drive)" => (one_of(&["debian-iso", "none"]), any::<bool>())
            .prop_map(|(iso, ci)| {
                let mut f = vec![("spec.hardware.cdrom", json!({"iso": iso}))];
                if ci {
                    f.push((
                        "spec.hardware.cloud-init",
                        json!({"enabled": true, "storage": "local-lvm"}),
                    ));
                }
                f
            })
            .boxed(),
        "hostpciN" => proptest::collection::btree_map(
            0u16..16,
            (0u8..32, proptest::option::of(any::<bool>())),
            1..3,
        )
        .prop_map(|m| {
            let devs: Vec<Value> = m
                .into_iter()
                .map(|(slot, (bus, pcie))| {
                    let mut d = json!({"slot": slot, "device": format!("0000:{bus:02x}:00.0")});
                    if let Some(p) = pcie {
                        d["pcie"] = json!(p);
                    }
                    d
                })
                .collect();
            vec![
                ("spec.hardware.machine", json!("q35")),
                ("spec.hardware.pci-devices", Value::Array(devs)),
            ]
        })
        .boxed(),
        "netN" => proptest::collection::vec(
            (
                one_of(&["vmbr0", "vmbr1"]),
                one_of(&["virtio", "e1000"]),
                proptest::option::of(1u32..4094),
                proptest::option::of(1u32..1000),
                any::<bool>(),
            ),
            1..4,
        )
        .prop_map(|nics| {
            let nics: Vec<Value> = nics
                .into_iter()
                .map(|(bridge, model, vlan, rate, fw)| {
                    let mut n = json!({"bridge": bridge, "model": model, "firewall": fw});
                    if let Some(v) = vlan {
                        n["vlan"] = json!(v);
                    }
                    if let Some(r) = rate {
                        n["rate-limit"] = json!(r);
                    }
                    n
                })
                .collect();
            vec![("spec.networks", Value::Array(nics))]
        })
        .boxed(),
        "onboot" => field("spec.options.onboot", bools()),
        "startup" => field(
            "spec.options.startup",
            one_of(&["order=1", "order=2,up=30", "up=10"]),
        ),
        "protection" => field("spec.options.protection", bools()),
        "agent" => field("spec.options.agent", bools()),
        "acpi" => field("spec.options.acpi", bools()),
        "tablet" => field("spec.options.tablet", bools()),
        "hotplug" => field(
            "spec.options.hotplug",
            proptest::sample::subsequence(vec!["network", "disk", "cpu", "memory", "usb"], 1..5)
                .prop_map(|v| json!(v))
                .boxed(),
        ),
        "boot" => field(
            "spec.options.boot-order",
            proptest::sample::subsequence(vec!["scsi0", "net0", "ide2"], 1..3)
                .prop_shuffle()
                .prop_map(|v| json!(v))
                .boxed(),
        ),
        "ciuser" => field(
            "spec.cloud-init-data.ci-user",
            "[a-z][a-z0-9]{0,10}".prop_map(|s| json!(s)).boxed(),
        ),
        "sshkeys" => field("spec.cloud-init-data.ssh-keys", Just(json!([KEY])).boxed()),
        "cipassword" => field(
            "spec.cloud-init-data.ci-password-ref",
            Just(json!("cloud-init.passwords.root")).boxed(),
        ),
        "nameserver" => field(
            "spec.cloud-init-data.nameservers",
            proptest::sample::subsequence(vec!["10.0.0.53", "1.1.1.1", "2001:db8::53"], 1..3)
                .prop_map(|v| json!(v))
                .boxed(),
        ),
        "searchdomain" => field(
            "spec.cloud-init-data.search-domains",
            proptest::sample::subsequence(vec!["lan", "example.org"], 1..2)
                .prop_map(|v| json!(v))
                .boxed(),
        ),
        "ipconfigN" => proptest::collection::btree_map(0u32..4, (1u8..250, any::<bool>()), 1..3)
            .prop_map(|m| {
                let ips: Vec<Value> = m
                    .into_iter()
                    .map(|(nic, (host, gw))| {
                        let mut i = json!({"nic": nic, "ip": format!("10.0.{nic}.{host}/24")});
                        if gw {
                            i["gateway"] = json!(format!("10.0.{nic}.254"));
                        }
                        i
                    })
                    .collect();
                vec![("spec.cloud-init-data.ipconfigs", Value::Array(ips))]
            })
            .boxed(),
        // The clone identity rule: a clone of a template with identity keys.
        "ciuser, sshkeys, nameserver, searchdomain, cicustom, ipconfigN (clone)" => {
            field("spec.clone", Just(json!("golden")).boxed())
        }
        "description" => field(
            "spec.pve-description",
            "[ -~]{0,40}".prop_map(|s| json!(s)).boxed(),
        ),
        "tags" => field(
            "spec.tags",
            proptest::collection::btree_set("[a-z][a-z0-9]{0,8}", 0..4)
                .prop_map(|s| json!(s))
                .boxed(),
        ),
        _ => return None,
    })
}

/// The generator of one LXC row.
fn lxc_values(key: &str) -> Option<BoxedStrategy<Fields>> {
    Some(match key {
        "hostname" => field("spec.dns.hostname", "[a-z][a-z0-9-]{0,20}[a-z0-9]".prop_map(|s| json!(s)).boxed()),
        "memory" => field("spec.memory", (1u64..256).prop_map(|n| json!(format!("{}MiB", n * 64))).boxed()),
        "swap" => field("spec.swap", (0u64..64).prop_map(|n| json!(format!("{}MiB", n * 128))).boxed()),
        "cores" => field("spec.cpu.cores", (1u32..64).prop_map(|n| json!(n)).boxed()),
        "rootfs" => field("spec.root", (1u64..64).prop_map(|g| json!({"storage": "local-lvm", "size": format!("{g}GiB")})).boxed()),
        "mpN" => (proptest::collection::vec((1u64..64, any::<bool>(), any::<bool>()), 0..3), proptest::collection::vec(any::<bool>(), 0..3))
            .prop_map(|(alloc, binds)| {
                let mps: Vec<Value> = alloc.iter().enumerate().map(|(i, (g, ro, backup))| json!({"storage": "local-lvm", "size": format!("{g}GiB"), "mount-point": format!("/data{i}"), "options": {"read-only": ro, "backup": backup}})).collect();
                let bms: Vec<Value> = binds.iter().enumerate().map(|(i, ro)| json!({"host-path": format!("/srv/share{i}"), "mount-point": format!("/mnt/share{i}"), "read-only": ro})).collect();
                vec![("spec.mount-points", Value::Array(mps)), ("spec.bind-mounts", Value::Array(bms))]
            })
            .boxed(),
        "netN" => proptest::collection::vec((one_of(&["vmbr0", "vmbr1"]), proptest::option::of(1u32..4094), any::<bool>(), any::<bool>()), 1..3)
            .prop_map(|nics| {
                let nics: Vec<Value> = nics.into_iter().enumerate().map(|(i, (bridge, tag, fw, ip))| {
                    let mut n = json!({"bridge": bridge, "iface": format!("eth{i}"), "firewall": fw});
                    if let Some(t) = tag { n["tag"] = json!(t); }
                    if ip { n["ip"] = json!(format!("10.1.{i}.5/24")); n["gw"] = json!(format!("10.1.{i}.1")); }
                    n
                }).collect();
                vec![("spec.networks", Value::Array(nics))]
            })
            .boxed(),
        "nameserver" => field("spec.dns.nameservers", proptest::sample::subsequence(vec!["10.0.0.53", "1.1.1.1"], 1..2).prop_map(|v| json!(v)).boxed()),
        "searchdomain" => field("spec.dns.domain", one_of(&["lan", "example.org"])),
        "arch" => field("spec.arch", one_of(&["amd64", "arm64"])),
        "unprivileged" => field("spec.options.unprivileged", bools()),
        "protection" => field("spec.options.protection", bools()),
        "onboot" => field("spec.options.onboot", bools()),
        "console" => field("spec.options.console", bools()),
        "features" => field("spec.options.nesting", bools()),
        "startup" => field("spec.options.startup", one_of(&["order=1", "order=2,up=30"])),
        "description" => field("spec.pve-description", "[ -~]{0,40}".prop_map(|s| json!(s)).boxed()),
        "tags" => field("spec.tags", proptest::collection::btree_set("[a-z][a-z0-9]{0,8}", 0..4).prop_map(|s| json!(s)).boxed()),
        _ => return None,
    })
}

/// Sets `path` (`spec.a.b`) in `doc`, creating the maps on the way.
fn set(doc: &mut Value, path: &str, v: Value) {
    let mut at = doc;
    let parts: Vec<&str> = path.split('.').collect();
    for p in &parts[..parts.len() - 1] {
        at = at
            .as_object_mut()
            .unwrap()
            .entry(*p)
            .or_insert_with(|| json!({}));
    }
    at[parts[parts.len() - 1]] = v;
}

/// A manifest as YAML: block mappings, JSON-spelled values (valid YAML).
fn to_yaml(v: &Value, indent: usize, out: &mut String) {
    for (k, v) in v.as_object().unwrap() {
        out.push_str(&" ".repeat(indent));
        match v {
            Value::Object(_) => {
                out.push_str(&format!("{k}:\n"));
                to_yaml(v, indent + 2, out);
            }
            _ => out.push_str(&format!("{k}: {v}\n")),
        }
    }
}

fn manifest(kind: &str, name: &str, spec: &Value) -> String {
    let mut s =
        format!("apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n");
    to_yaml(spec, 2, &mut s);
    s
}

fn vm_spec() -> Value {
    json!({
        "node": "pve1", "vmid": 100, "memory": "2GiB",
        "cpu": {"type": "host", "cores": 2},
        "disks": [{"storage": "local-lvm", "size": "8GiB"}],
        "networks": [{"bridge": "vmbr0"}],
    })
}

fn ct_spec() -> Value {
    json!({
        "node": "pve1", "vmid": 200, "template": "debian-ct", "memory": "512MiB",
        "cpu": {"cores": 1},
        "root": {"storage": "local-lvm", "size": "8GiB"},
        "networks": [{"bridge": "vmbr0"}],
    })
}

/// The manifests one case declares: the guest with the row's fields, and
/// for a clone its template (which declares cloud-init identity).
fn manifests(kind: &str, fields: &Fields) -> Vec<String> {
    let mut spec = if kind == "VM" { vm_spec() } else { ct_spec() };
    let mut out = Vec::new();
    for (path, v) in fields {
        if *path == "spec.clone" {
            let mut t = vm_spec();
            t["vmid"] = json!(9000);
            set(
                &mut t,
                "cloud-init-data",
                json!({"ci-user": "golden", "nameservers": ["10.0.0.53"], "ipconfigs": [{"nic": 0, "ip": "10.0.0.9/24"}]}),
            );
            set(
                &mut t,
                "hardware.cloud-init",
                json!({"enabled": true, "storage": "local-lvm"}),
            );
            out.push(manifest("TemplateVM", "golden", &t));
            let o = spec.as_object_mut().unwrap();
            o.remove("disks");
        }
        set(&mut spec, path.strip_prefix("spec.").unwrap(), v.clone());
    }
    out.push(manifest(kind, "guest", &spec));
    out
}

fn secrets() -> CloudInitSecrets {
    CloudInitSecrets {
        ssh_keys: BTreeMap::new(),
        passwords: [("root".to_owned(), Secret::new("hunter2-not-real"))].into(),
    }
}

/// One case: create → no drift; adopt (untagged) → only the tag claim.
fn check(kind: &str, fields: &Fields) -> Result<(), TestCaseError> {
    let docs = manifests(kind, fields);
    let refs: Vec<&str> = docs.iter().map(String::as_str).collect();
    let c = fixture::cluster(&refs);
    let secrets = secrets();
    let ctx = Context {
        cluster: &c,
        secrets: &secrets,
    };
    let mut snap = demo::created(&c, &ctx);
    for o in demo::in_order(&c) {
        let Some((node, vmid)) = o.spec.guest_id() else {
            continue;
        };
        let live = snap.guest(node, vmid).unwrap();
        let d = guest_drift(o, &ctx, live, live.config.as_ref().unwrap()).unwrap();
        prop_assert!(
            d.is_empty() && d.anomalies.is_empty(),
            "{} after create: {:#?}\n{:#?}",
            o.r#ref,
            d,
            live.config
        );
    }

    // The same guests as ProxOps would find them unmanaged.
    for g in snap.guests.values_mut() {
        let cfg = g.config.as_mut().unwrap();
        let mut tags = cfg.tags().unwrap();
        tags.0.retain(|t| t.as_str() != "proxops");
        if tags.is_empty() {
            cfg.values.remove("tags");
        } else {
            cfg.values.insert("tags".into(), tags.to_wire()).unwrap();
        }
        g.tags = tags;
    }
    let a = adopt(
        &ClusterName::new("t").unwrap(),
        &snap,
        &AdoptOptions::default(),
    )
    .unwrap();
    // Everything ProxOps wrote is adopted: no gap but the password PVE masks.
    let gaps: Vec<_> = a
        .gaps
        .iter()
        .filter(|g| g.key != "cipassword" && !g.key.starts_with("spec."))
        .collect();
    prop_assert!(gaps.is_empty(), "gaps: {:#?}", gaps);
    // Adopted guests refer to the adopted ISO by its own name; the test
    // cluster declares the same file as `debian-iso`.
    let iso_names: Vec<String> = a
        .files
        .keys()
        .filter_map(|p| {
            p.strip_prefix("iso/t/")?
                .strip_suffix(".yaml")
                .map(str::to_owned)
        })
        .collect();
    let adopted: Vec<String> = a
        .files
        .iter()
        .filter(|(p, _)| {
            ["vm/", "templatevm/", "lxc/"]
                .iter()
                .any(|d| p.starts_with(d))
        })
        .map(|(_, t)| {
            let mut t = t.replace(TEMPLATE_PLACEHOLDER, "debian-ct");
            for n in &iso_names {
                t = t.replace(&format!("iso: {n}\n"), "iso: debian-iso\n");
            }
            t
        })
        .collect();
    prop_assert_eq!(
        adopted.len(),
        docs.len(),
        "{:#?}",
        a.files.keys().collect::<Vec<_>>()
    );
    let refs: Vec<&str> = adopted.iter().map(String::as_str).collect();
    let c2 = fixture::cluster(&refs);
    let ctx2 = Context {
        cluster: &c2,
        secrets: &secrets,
    };
    for o in c2.objects.values() {
        let Some((node, vmid)) = o.spec.guest_id() else {
            continue;
        };
        let live = snap.guest(node, vmid).unwrap();
        let d = guest_drift(o, &ctx2, live, live.config.as_ref().unwrap()).unwrap();
        let fields: Vec<&str> = d.changes.iter().map(|c| c.field.as_str()).collect();
        prop_assert_eq!(
            fields,
            vec!["tags"],
            "{} adopted: {:#?}\n{}",
            o.r#ref,
            d,
            adopted.join("---\n")
        );
        let to = TagSet::parse(d.changes[0].to.as_deref().unwrap()).unwrap();
        prop_assert!(to.contains("proxops") && d.anomalies.is_empty(), "{:#?}", d);
    }
    Ok(())
}

fn run(kind: &str, key: &str, strategy: BoxedStrategy<Fields>) {
    let mut runner = TestRunner::new(Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    });
    if let Err(e) = runner.run(&strategy, |fields| check(kind, &fields)) {
        panic!("{kind} row {key}: {e}");
    }
}

#[test]
fn every_row_has_a_generator() {
    let missing: Vec<String> = qemu_owned_keys()
        .iter()
        .filter(|k| qemu_values(k.key).is_none())
        .map(|k| format!("VM {}", k.key))
        .chain(
            lxc_owned_keys()
                .iter()
                .filter(|k| lxc_values(k.key).is_none())
                .map(|k| format!("LXC {}", k.key)),
        )
        .collect();
    assert!(missing.is_empty(), "rows without a generator: {missing:?}");
}

#[test]
fn every_qemu_row_creates_without_drift_and_adopts_to_the_tag_claim_only() {
    for k in qemu_owned_keys() {
        if let Some(s) = qemu_values(k.key) {
            run("VM", k.key, s);
        }
    }
}

#[test]
fn every_lxc_row_creates_without_drift_and_adopts_to_the_tag_claim_only() {
    for k in lxc_owned_keys() {
        if let Some(s) = lxc_values(k.key) {
            run("LXC", k.key, s);
        }
    }
}
