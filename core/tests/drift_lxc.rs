//! LXC and TemplateCT create forms and drift: the [PROBE] facts of §8,
//! §9, §20 and §22.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use proxops_core::action::{AnomalyType, Impact};
use proxops_core::drift::{CloudInitSecrets, Context, DiskGrowth, create_params};
use proxops_core::live::Power;
use proxops_core::wire::Bytes;
use serde_json::json;

use support::fixture::{cluster, config, drift, keys, object, param, with};

fn ct(body: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct1\nspec:\n  node: pve1\n  vmid: 200\n  template: debian-ct\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 8GiB\n  networks:\n    - bridge: vmbr0\n      iface: eth0\n{body}"
    )
}

fn plain_live() -> serde_json::Value {
    json!({
        "hostname": "ct1", "memory": 512, "swap": 512, "cores": 1, "arch": "amd64", "ostype": "debian",
        "rootfs": "local-lvm:vm-200-disk-0,size=8G",
        "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC,type=veth",
        "tags": "proxops", "digest": "0123456789abcdef0123456789abcdef01234567"
    })
}

fn create(doc: &str) -> Result<Vec<(String, String)>, String> {
    let c = cluster(&[doc]);
    create_params(
        object(&c, "ct1"),
        &Context {
            cluster: &c,
            secrets: &CloudInitSecrets::default(),
        },
    )
    .map(|p| p.to_wire())
    .map_err(|e| e.to_string())
}

fn get<'a>(p: &'a [(String, String)], key: &str) -> Option<&'a str> {
    p.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn create_form_of_a_container() {
    let p = create(&ct("  swap: 256MiB\n  dns:\n    nameservers: [1.1.1.1, 9.9.9.9]\n    domain: home.arpa\n  options:\n    unprivileged: true\n    onboot: false\n    nesting: true\n  tags: [dns]\n")).unwrap();
    let ks: Vec<&str> = p.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        ks,
        [
            "vmid",
            "ostemplate",
            "hostname",
            "memory",
            "swap",
            "cores",
            "rootfs",
            "net0",
            "nameserver",
            "searchdomain",
            "unprivileged",
            "onboot",
            "features",
            "tags",
            "start"
        ]
    );
    assert_eq!(
        get(&p, "ostemplate"),
        Some("local:vztmpl/debian-13-standard.tar.zst")
    );
    assert_eq!(get(&p, "rootfs"), Some("local-lvm:8"));
    assert_eq!(get(&p, "onboot"), Some("0"));
    assert_eq!(get(&p, "start"), Some("1"));
    assert_eq!(get(&p, "tags"), Some("dns;proxops"));
}

#[test]
fn lxc_nic_value_starts_with_name() {
    let p = create(&ct("")).unwrap();
    assert_eq!(get(&p, "net0"), Some("name=eth0,bridge=vmbr0"));
    let doc = ct("").replace(
        "      iface: eth0\n",
        "      tag: 40\n      ip: 10.0.0.5/24\n      gw: 10.0.0.1\n      firewall: true\n",
    );
    let p = create(&doc).unwrap();
    assert_eq!(
        get(&p, "net0"),
        Some("name=net0,bridge=vmbr0,tag=40,firewall=1,ip=10.0.0.5/24,gw=10.0.0.1")
    );
}

#[test]
fn nesting_is_only_sent_through_features() {
    let p = create(&ct("  options:\n    nesting: false\n")).unwrap();
    assert_eq!(get(&p, "features"), Some("nesting=0"));
    assert!(get(&p, "nesting").is_none());
}

#[test]
fn keyctl_or_fuse_on_fails_create_naming_the_option() {
    let e = create(&ct("  options:\n    keyctl: true\n")).unwrap_err();
    assert!(e.contains("keyctl"), "{e}");
    let e = create(&ct("  options:\n    fuse: true\n")).unwrap_err();
    assert!(e.contains("fuse"), "{e}");
    // false is PVE's default: simply not sent.
    let p = create(&ct("  options:\n    keyctl: false\n")).unwrap();
    assert!(
        p.iter()
            .all(|(k, v)| k != "keyctl" && !v.contains("keyctl"))
    );
}

#[test]
fn template_ct_is_created_stopped_and_never_sends_ttys() {
    let doc = ct("  options:\n    ttys: 4\n").replace("kind: LXC", "kind: TemplateCT");
    let c = cluster(&[&doc]);
    let p = create_params(
        object(&c, "ct1"),
        &Context {
            cluster: &c,
            secrets: &CloudInitSecrets::default(),
        },
    )
    .unwrap();
    assert_eq!(p.get("start").unwrap().expose(), "0");
    assert!(!p.contains("ttys"));
}

#[test]
fn mount_points_allocated_then_bind_with_their_options() {
    let p = create(&ct("  mount-points:\n    - storage: local-lvm\n      size: 4GiB\n      mount-point: /data\n      options:\n        backup: true\n        read-only: false\n  bind-mounts:\n    - host-path: /srv/zones\n      mount-point: /zones\n      read-only: true\n")).unwrap();
    assert_eq!(get(&p, "mp0"), Some("local-lvm:4,mp=/data,ro=0,backup=1"));
    assert_eq!(get(&p, "mp1"), Some("/srv/zones,mp=/zones,ro=1"));
}

#[test]
fn plain_container_read_back_has_no_drift() {
    let c = cluster(&[&ct("")]);
    let d = drift(&c, "ct1", Power::Running, &config(plain_live()));
    assert!(d.changes.is_empty() && d.anomalies.is_empty(), "{d:#?}");
}

#[test]
fn running_container_takes_limits_and_nics_live_dns_at_restart_features_by_stop_start() {
    let c = cluster(&[&ct(
        "  dns:\n    hostname: web\n  options:\n    nesting: true\n",
    )]);
    let live = with(
        plain_live(),
        json!({"hostname": "web", "features": "nesting=1", "cores": 2, "memory": "256"}),
    );
    let d = drift(&c, "ct1", Power::Running, &config(live.clone()));
    assert_eq!(
        (keys(&d), d.impact),
        (vec!["cores", "memory"], Impact::Live)
    );
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(
            live.clone(),
            json!({"cores": 1, "memory": 512, "net0": "name=eth0,bridge=vmbr1,hwaddr=BC:24:11:AA:BB:CC"}),
        )),
    );
    assert_eq!((keys(&d), d.impact), (vec!["net0"], Impact::Live));
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(
            live.clone(),
            json!({"cores": 1, "memory": 512, "hostname": "old"}),
        )),
    );
    // pve-container `LXC/Config.pm` `vmconfig_hotplug_pending` writes the
    // hostname into the running container.
    assert_eq!((keys(&d), d.impact), (vec!["hostname"], Impact::Live));
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(
            live,
            json!({"cores": 1, "memory": 512, "features": "nesting=0"}),
        )),
    );
    assert_eq!((keys(&d), d.impact), (vec!["features"], Impact::StopStart));
}

#[test]
fn nic_rewrite_keeps_the_assigned_hwaddr_and_never_compares_type() {
    let c = cluster(&[&ct("")]);
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"net0": "name=eth0,bridge=vmbr9,hwaddr=BC:24:11:AA:BB:CC,type=veth,ip=dhcp"}),
        )),
    );
    assert_eq!(
        param(&d, "net0"),
        Some("name=eth0,type=veth,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC,ip=dhcp")
    );
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC,type=phys"}),
        )),
    );
    assert!(d.changes.is_empty());
}

// pve-container src/PVE/API2/LXC.pm `create_vm`: `unprivileged: 1` is
// stored only when set, so absent is privileged.
#[test]
fn unprivileged_absent_live_means_privileged_and_divergence_is_an_anomaly_without_write() {
    let c = cluster(&[&ct("  options:\n    unprivileged: true\n")]);
    assert!(
        drift(
            &c,
            "ct1",
            Power::Running,
            &config(with(plain_live(), json!({"unprivileged": 1})))
        )
        .anomalies
        .is_empty()
    );
    let d = drift(&c, "ct1", Power::Running, &config(plain_live()));
    assert!(d.params.is_empty());
    assert_eq!(
        (
            d.anomalies[0].anomaly_type(),
            d.anomalies[0].field.as_deref()
        ),
        (AnomalyType::NeedsPerson, Some("unprivileged"))
    );
}

#[test]
fn keyctl_desired_on_live_off_is_an_anomaly_without_write() {
    let c = cluster(&[&ct("  options:\n    keyctl: true\n")]);
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(plain_live(), json!({"features": "nesting=1"}))),
    );
    assert!(d.params.is_empty());
    assert_eq!(d.anomalies.len(), 1);
    assert!(d.anomalies[0].message.contains("pct set 200"));
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"features": "keyctl=1,nesting=1"}),
        )),
    );
    assert!(d.anomalies.is_empty());
}

#[test]
fn nesting_change_keeps_the_other_live_feature_tokens() {
    let c = cluster(&[&ct("  options:\n    nesting: true\n")]);
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(plain_live(), json!({"features": "fuse=1,mknod=1"}))),
    );
    assert_eq!(param(&d, "features"), Some("nesting=1,fuse=1,mknod=1"));
    // Legacy top-level nesting counts as the live value.
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(plain_live(), json!({"nesting": 1}))),
    );
    assert!(d.changes.is_empty());
}

#[test]
fn rootfs_pool_change_is_an_anomaly_not_a_write() {
    let c = cluster(&[&ct("")]);
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({ "rootfs": "ceph:vm-200-disk-0,size=8G" }),
        )),
    );
    assert!(d.params.is_empty() && d.grows.is_empty());
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::DataLoss);
    // A report without a size token is compatible; the base- rename of a
    // template is not drift.
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"rootfs": "local-lvm:base-200-disk-0"}),
        )),
    );
    assert!(d.changes.is_empty() && d.anomalies.is_empty() && d.grows.is_empty());
}

// pve-container src/PVE/API2/LXC.pm `resize_vm`: `PUT …/resize` with
// `disk` (rootfs, mpN) and `size` (`\+?\d+(\.\d+)?[KMGT]?`, binary units,
// absolute without `+`) grows the volume, running or not.
#[test]
fn a_larger_rootfs_is_a_resize_not_a_config_write() {
    let c = cluster(&[&ct("")]);
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({ "rootfs": "local-lvm:vm-200-disk-0,size=4G" }),
        )),
    );
    assert!(d.params.is_empty() && d.anomalies.is_empty(), "{d:#?}");
    assert_eq!(
        d.grows,
        vec![DiskGrowth {
            disk: "rootfs".into(),
            from: Bytes(4 << 30),
            to: Bytes(8 << 30),
        }]
    );
}

// Same function: "unable to shrink disk size" — a `shrink` anomaly, never
// an action, and not called data loss.
#[test]
fn a_smaller_rootfs_is_a_shrink_anomaly() {
    let c = cluster(&[&ct("")]);
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({ "rootfs": "local-lvm:vm-200-disk-0,size=16G" }),
        )),
    );
    assert!(d.params.is_empty() && d.grows.is_empty());
    assert_eq!(d.anomalies.len(), 1);
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::Shrink);
    assert_eq!(d.anomalies[0].field.as_deref(), Some("rootfs"));
}

#[test]
fn mount_point_options_and_path_converge_via_the_live_form() {
    let c = cluster(&[&ct(
        "  mount-points:\n    - storage: local-lvm\n      size: 4GiB\n      mount-point: /data\n      options:\n        read-only: true\n        backup: false\n        mount-options: noatime\n",
    )]);
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"mp0": "local-lvm:vm-200-disk-1,mp=/old,size=4G,replicate=0"}),
        )),
    );
    assert_eq!(
        param(&d, "mp0"),
        Some(
            // `backup: false` against no `backup` token is no change: an
            // mpN without it is not backed up (pve-container
            // `mountpoint_backup_enabled`).
            "local-lvm:vm-200-disk-1,size=4G,mp=/data,ro=1,mountoptions=noatime,replicate=0"
        )
    );
    assert!(d.anomalies.is_empty());
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"mp0": "local-lvm:vm-200-disk-1,mp=/data,size=2G,ro=1,backup=0,mountoptions=noatime"}),
        )),
    );
    // pve-container `resize_vm` takes any mount point key (`disk=mp0`).
    assert!(d.params.is_empty() && d.anomalies.is_empty(), "{d:#?}");
    assert_eq!(
        d.grows,
        vec![DiskGrowth {
            disk: "mp0".into(),
            from: Bytes(2 << 30),
            to: Bytes(4 << 30),
        }]
    );
    let d = drift(&c, "ct1", Power::Stopped, &config(plain_live()));
    assert_eq!(
        param(&d, "mp0"),
        Some("local-lvm:4,mp=/data,ro=1,backup=0,mountoptions=noatime")
    );
}

#[test]
fn bind_host_path_change_is_an_anomaly_and_guest_path_converges() {
    let c = cluster(&[&ct(
        "  bind-mounts:\n    - host-path: /srv/zones\n      mount-point: /zones\n      read-only: true\n",
    )]);
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"mp0": "/srv/other,mp=/zones,ro=1"}),
        )),
    );
    assert!(d.params.is_empty() && d.anomalies[0].field.as_deref() == Some("mp0"));
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(plain_live(), json!({"mp0": "/srv/zones/,mp=/old,ro"}))),
    );
    assert_eq!(param(&d, "mp0"), Some("/srv/zones/,mp=/zones,ro=1"));
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(
            plain_live(),
            json!({"mp0": "local-lvm:vm-200-disk-1,mp=/zones"}),
        )),
    );
    assert!(d.params.is_empty() && d.anomalies[0].anomaly_type() == AnomalyType::NeedsPerson);
}

#[test]
fn live_only_mount_points_and_nics_are_anomalies_never_deleted() {
    let c = cluster(&[&ct("")]);
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"mp3": "local-lvm:vm-200-disk-3,mp=/x,size=1G", "mp4": "none", "net1": "name=eth1,bridge=vmbr1"}),
        )),
    );
    assert!(d.delete.is_empty() && d.params.is_empty());
    let fields: Vec<&str> = d
        .anomalies
        .iter()
        .map(|a| a.field.as_deref().unwrap())
        .collect();
    assert_eq!(fields, ["mp3", "net1"]);
}

#[test]
fn nameservers_written_with_commas_read_with_spaces_are_not_drift() {
    let c = cluster(&[&ct(
        "  dns:\n    nameservers: [1.1.1.1, 9.9.9.9]\n    domain: home.arpa\n",
    )]);
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"nameserver": "9.9.9.9 1.1.1.1", "searchdomain": "home.arpa"}),
        )),
    );
    assert!(d.changes.is_empty());
    let d = drift(
        &c,
        "ct1",
        Power::Running,
        &config(with(
            plain_live(),
            json!({"nameserver": "1.1.1.1,9.9.9.9", "searchdomain": "home.arpa"}),
        )),
    );
    assert!(d.changes.is_empty());
}

#[test]
fn boolean_options_absent_live_is_off() {
    let c = cluster(&[&ct(
        "  options:\n    protection: false\n    onboot: true\n    console: false\n",
    )]);
    let d = drift(&c, "ct1", Power::Running, &config(plain_live()));
    assert_eq!(keys(&d), ["onboot"]);
    assert_eq!(d.impact, Impact::Live);
}

#[test]
fn lxc_against_a_live_template_ct_is_an_anomaly_without_update() {
    let c = cluster(&[&ct("")]);
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(plain_live(), json!({"template": 1, "cores": 4}))),
    );
    assert!(d.is_empty());
    assert_eq!(d.anomalies[0].anomaly_type(), AnomalyType::NeedsPerson);
    let t = ct("").replace("kind: LXC", "kind: TemplateCT");
    let c = cluster(&[&t]);
    let d = drift(
        &c,
        "ct1",
        Power::Stopped,
        &config(with(plain_live(), json!({"template": 1, "cores": 4}))),
    );
    assert_eq!(keys(&d), ["cores"]);
}
