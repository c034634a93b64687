//! The fakepve harness itself: what a seed can hold, the control port, and
//! that the request log never shows a secret.
#![allow(clippy::unwrap_used)]

use crate::live_support;

use live_support::Probe;
use proxops_pve::auth::{Credentials, Secret, TicketLogin};
use proxops_pve::fakepve::FakePve;
use proxops_pve::transport::{Method, Request, Transport};
use serde_json::{Value, json};

fn full_seed() -> Value {
    json!({
        "nodes": ["pve2"],
        "storages": {
            "local": {"type": "dir", "path": "/var/lib/vz", "content": "iso,vztmpl,backup,import",
                      "avail": 53687091200u64}
        },
        "files": [
            {"storage": "local", "name": "debian-13.iso", "size": 700000000},
            {"storage": "local", "name": "debian-12-standard_12.7-1_amd64.tar.zst", "size": 120000000,
             "content": "vztmpl"}
        ],
        "users": {"alice@pve": "alice-password-1"},
        "guests": [
            {"vmid": 100, "name": "web1", "status": "running",
             "config": {"memory": 2048, "scsi0": "local-lvm:vm-100-disk-0,size=32G"},
             "attrs": {"shutdown_secs": 90}},
            {"vmid": 9000, "name": "debian-tmpl", "template": true,
             "config": {"memory": 1024, "scsi0": "local-lvm:base-9000-disk-0,size=8G", "template": 1}},
            {"vmid": 200, "type": "lxc", "name": "ct1", "node": "pve2",
             "ostemplate": "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst",
             "config": {"hostname": "ct1", "rootfs": "local-lvm:vm-200-disk-0,size=8G"}}
        ],
        "settings": {"version": "9.2.0"}
    })
}

#[test]
fn a_seed_holds_nodes_storages_files_users_guest_kinds_and_settings() {
    let fake = FakePve::start(&full_seed()).unwrap();
    let probe = Probe::plain(fake.live_config());
    let t = &probe.transport;

    assert_eq!(
        t.call(&Request::get("/version")).unwrap().data()["version"],
        "9.2.0"
    );
    let nodes = t.call(&Request::get("/nodes")).unwrap();
    let names: Vec<_> = nodes
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"pve1") && names.contains(&"pve2"),
        "{names:?}"
    );

    let vms = t
        .call(&Request::new(
            Method::Get,
            "/cluster/resources",
            vec![("type".into(), "vm".into())],
        ))
        .unwrap();
    let rows = vms.data().as_array().unwrap();
    let row = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap().clone();
    assert_eq!(row("qemu/9000")["template"], 1);
    assert_eq!(row("lxc/200")["node"], "pve2");
    assert_eq!(row("qemu/100")["status"], "running");

    let content = t
        .call(&Request::get("/nodes/pve1/storage/local/content"))
        .unwrap();
    let volids: Vec<_> = content
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["volid"].as_str().unwrap())
        .collect();
    assert!(volids.contains(&"local:iso/debian-13.iso"), "{volids:?}");
    assert!(
        volids.contains(&"local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst"),
        "{volids:?}"
    );

    // The seeded extra user can log in.
    let mut config = fake.live_config();
    config.credentials = Credentials::Ticket(
        TicketLogin::new("alice@pve", Secret::new("alice-password-1")).unwrap(),
    );
    let alice = Probe::plain(config);
    assert_eq!(
        alice
            .transport
            .call(&Request::get("/version"))
            .unwrap()
            .status,
        200
    );
}

#[test]
fn control_port_sets_guest_attributes_and_settings_and_refuses_unknown_ones() {
    let fake = FakePve::start(&full_seed()).unwrap();
    fake.set_guest(
        100,
        json!({"start_error": "start failed: QEMU exited with code 1"}),
    )
    .unwrap();
    fake.settings(json!({"version": "9.2.1"})).unwrap();
    let probe = Probe::plain(fake.live_config());
    assert_eq!(
        probe
            .transport
            .call(&Request::get("/version"))
            .unwrap()
            .data()["version"],
        "9.2.1"
    );

    let err = fake.settings(json!({"no_such_knob": 1})).unwrap_err();
    assert!(
        err.to_string().contains("unknown settings: no_such_knob"),
        "{err}"
    );
    let err = fake.call("requests", Value::Null, Value::Null).unwrap_err();
    assert!(err.to_string().contains("not callable"), "{err}");
    let err = fake
        .set_guest(555, json!({"start_error": "x"}))
        .unwrap_err();
    assert!(err.to_string().contains("no guest 555"), "{err}");
}

#[test]
fn the_request_log_redacts_passwords_and_can_be_forgotten() {
    let fake = FakePve::start(&full_seed()).unwrap();
    let mut config = fake.live_config();
    config.credentials = Credentials::Ticket(fake.ticket_login());
    let probe = Probe::plain(config);
    probe.transport.call(&Request::get("/version")).unwrap();
    let requests = fake.requests().unwrap();
    let login = requests
        .iter()
        .find(|(m, p, _)| m == "POST" && p.ends_with("/access/ticket"))
        .unwrap();
    assert_eq!(login.2, "username=root%40pam&password=***");
    let everything = format!("{requests:?}");
    assert!(!everything.contains(fake.password().expose()));
    assert!(!everything.contains(fake.token_value().expose()));

    fake.forget_requests().unwrap();
    assert!(fake.requests().unwrap().is_empty());
}

#[test]
fn two_servers_run_side_by_side_on_their_own_addresses() {
    let a = FakePve::start(&json!({})).unwrap();
    let b = FakePve::start(&json!({})).unwrap();
    assert_ne!(a.host(), b.host());
    assert!(a.host().is_loopback() && b.host().is_loopback());
    assert_ne!(a.fingerprint(), b.fingerprint());
    assert_ne!(a.token_value(), b.token_value());
}
