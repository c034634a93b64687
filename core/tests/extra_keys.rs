//! `spec.extra` is a bounded escape hatch: control parameters and
//! structural keys are refused everywhere; host-level keys and keys PVE
//! never reads back pass only where the cluster's configuration lists them
//! in `allow-extra-keys`, judged per cluster a manifest is composed into.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proxops_core::config::Overrides;
use proxops_core::diag::Diagnostic;
use proxops_core::names::ClusterName;
use proxops_core::repo::{self, ClusterDesired, RepoInput};

const APP: &str = "vm/base/app.yaml";

fn vm_with_extra(extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: app\nspec:\n  node: pve1\n  vmid: 100\n  memory: 2GiB\n  cpu:\n    type: host\n    cores: 2\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n  extra:\n{extra}"
    )
}

/// Two clusters, `lab` and `prod`, both composing vm/base/app.yaml; `lab`
/// lists `lab_allow` in allow-extra-keys.
fn load(manifest: &str, lab_allow: &str) -> Clusters {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (c, allow, port) in [("lab", lab_allow, 8006), ("prod", "", 8007)] {
        let allow = if allow.is_empty() {
            String::new()
        } else {
            format!("      allow-extra-keys: [{allow}]\n")
        };
        files.insert(
            format!("clusters/{c}/config.yaml"),
            format!("pve:\n  clusters:\n    {c}:\n      base-url: https://{c}.example.org:{port}\n      nodes: [pve1]\n{allow}").into_bytes(),
        );
        files.insert(
            format!("clusters/{c}/resources.yaml"),
            b"resources:\n  - ../../vm/base/app.yaml\n".to_vec(),
        );
    }
    files.insert(APP.into(), manifest.as_bytes().to_vec());
    load_files(&files)
}

type Clusters = BTreeMap<ClusterName, Result<ClusterDesired, Vec<Diagnostic>>>;

/// Loads a repository whose cluster directories are those of its files.
fn load_files(files: &BTreeMap<String, Vec<u8>>) -> Clusters {
    let dirs: BTreeSet<String> = files
        .keys()
        .filter_map(|p| p.strip_prefix("clusters/")?.split_once('/'))
        .map(|(d, _)| d.to_owned())
        .collect();
    let input = RepoInput {
        files,
        cluster_dirs: &dirs,
    };
    match repo::load(input, None, &Overrides::default()) {
        Ok(l) => l.clusters,
        Err(d) => panic!("configuration refused: {d:#?}"),
    }
}

fn cluster<'a>(loaded: &'a Clusters, name: &str) -> &'a Result<ClusterDesired, Vec<Diagnostic>> {
    &loaded[&ClusterName::new(name).unwrap()]
}

fn only_error(r: &Result<ClusterDesired, Vec<Diagnostic>>) -> &Diagnostic {
    match r {
        Err(d) if d.len() == 1 => &d[0],
        other => panic!("expected one diagnostic, got {other:#?}"),
    }
}

#[test]
fn a_host_level_key_passes_only_in_the_cluster_that_lists_it() {
    let loaded = load(&vm_with_extra("    args: -cpu host,+invtsc\n"), "args");
    let lab = cluster(&loaded, "lab").as_ref().expect("lab allows args");
    let app = lab.objects.values().next().unwrap();
    let vm = app.spec.vm().unwrap();
    assert_eq!(
        vm.extra.get("args").map(String::as_str),
        Some("-cpu host,+invtsc")
    );

    let d = only_error(cluster(&loaded, "prod"));
    assert_eq!(d.file, APP);
    assert_eq!(d.field.as_deref(), Some("spec.extra.args"));
    assert_eq!(d.line, Some(18));
    assert!(d.message.contains("host-level"), "{d}");
    assert!(
        d.message
            .contains("clusters/prod/config.yaml lists it in pve.clusters.prod.allow-extra-keys"),
        "{d}"
    );
}

#[test]
fn a_control_parameter_stays_refused_even_when_listed() {
    let loaded = load(&vm_with_extra("    delete: scsi0\n"), "delete");
    for c in ["lab", "prod"] {
        let d = only_error(cluster(&loaded, c));
        assert_eq!(d.field.as_deref(), Some("spec.extra.delete"), "{c}");
        assert!(d.message.contains("API control parameter"), "{d}");
    }
    let lab = only_error(cluster(&loaded, "lab"));
    assert!(
        lab.message
            .contains("stays refused although clusters/lab/config.yaml lists it"),
        "{lab}"
    );
}

#[test]
fn a_structural_key_stays_refused_even_when_listed() {
    let loaded = load(&vm_with_extra("    net1: virtio,bridge=vmbr1\n"), "net1");
    let d = only_error(cluster(&loaded, "lab"));
    assert_eq!(d.field.as_deref(), Some("spec.extra.net1"));
    assert!(d.message.contains("written by a structured field"), "{d}");
}

#[test]
fn a_never_echoed_key_passes_only_where_listed() {
    let loaded = load(&vm_with_extra("    vmgenid: \"1\"\n"), "vmgenid");
    assert!(cluster(&loaded, "lab").is_ok());
    let d = only_error(cluster(&loaded, "prod"));
    assert!(d.message.contains("never reads back as written"), "{d}");
}

#[test]
fn a_key_prefix_is_not_an_allow_list_entry() {
    let lxc = "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: app\nspec:\n  node: pve1\n  vmid: 100\n  template: debian-ct\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 8GiB\n  networks:\n    - bridge: vmbr0\n  extra:\n    dev0: /dev/ttyUSB0\n    dev1: /dev/ttyUSB1\n";
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert("clusters/lab/config.yaml".into(), b"pve:\n  clusters:\n    lab:\n      base-url: https://lab.example.org:8006\n      allow-extra-keys: [dev0]\n".to_vec());
    files.insert(
        "clusters/lab/resources.yaml".into(),
        b"resources:\n  - ../../lxc/base/app.yaml\n  - ../../ctt/base/debian-ct.yaml\n".to_vec(),
    );
    files.insert("lxc/base/app.yaml".into(), lxc.as_bytes().to_vec());
    files.insert("ctt/base/debian-ct.yaml".into(), b"apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: debian-ct\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: debian-13-standard.tar.zst\n  url: https://example.org/debian-13-standard.tar.zst\n".to_vec());
    let loaded = load_files(&files);
    let d = only_error(&loaded[&ClusterName::new("lab").unwrap()]);
    assert_eq!(d.field.as_deref(), Some("spec.extra.dev1"));
}

/// The model's copy of the owned keys (`extra::owned`, which decides
/// what is structural in `spec.extra`) is the owned-key tables' plain keys:
/// a key added to a table is refused in `spec.extra` at once.
#[test]
fn the_models_owned_key_lists_are_the_tables_plain_keys() {
    use proxops_core::drift::{OwnedKey, lxc_owned_keys, qemu_owned_keys};
    use proxops_core::extra::{GuestType, owned};
    // A family's `key` is a listing ("netN", "scsihw, scsiN, …"), not a key.
    let plain = |table: Vec<OwnedKey>| -> Vec<&'static str> {
        let mut keys: Vec<&'static str> = table
            .iter()
            .map(|o| o.key)
            .filter(|k| k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    };
    let qemu = plain(qemu_owned_keys());
    let lxc = plain(lxc_owned_keys());
    assert_eq!(
        owned::keys(GuestType::Qemu),
        qemu.as_slice(),
        "core/model/src/extra/owned.rs QEMU must be {qemu:?}"
    );
    assert_eq!(
        owned::keys(GuestType::Lxc),
        lxc.as_slice(),
        "core/model/src/extra/owned.rs LXC must be {lxc:?}"
    );
}

/// Every scalar key of the owned-key tables is structural in `spec.extra`
/// (a key owned only through the table, not the hand list, included).
#[test]
fn every_scalar_key_of_the_owned_key_tables_is_structural() {
    use proxops_core::drift::{lxc_owned_keys, qemu_owned_keys};
    use proxops_core::extra::{GuestType, Refusal, refusal};
    for (guest, owned) in [
        (GuestType::Qemu, qemu_owned_keys()),
        (GuestType::Lxc, lxc_owned_keys()),
    ] {
        for o in owned.iter().filter(|o| o.impact.is_some()) {
            assert_eq!(
                refusal(guest, o.key, "1"),
                Some(Refusal::Structural),
                "{guest:?} {}",
                o.key
            );
        }
    }
    assert_eq!(
        refusal(GuestType::Qemu, "cpulimit", "2"),
        Some(Refusal::Structural)
    );
}
