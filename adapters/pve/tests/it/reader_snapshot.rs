//! The snapshot reader over replayed PVE answers shaped like real PVE
//! (string `memory`, `a;b` tags, Perl key order, string vmids).
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::sync::Mutex;

use proxops_core::live::{GuestType, LiveSnapshot, NodeState, Power};
use proxops_core::names::{Kind, NodeName, StorageId, Vmid};
use proxops_core::wire::{Drive, QemuNet};
use proxops_pve::reader::{ReadError, ReadScope, read_snapshot};
use proxops_pve::replay::ReplayTransport;
use proxops_pve::transport::{Request, Response, Transport, TransportError};
use serde_json::{Value, json};

fn node(s: &str) -> NodeName {
    NodeName::new(s).unwrap()
}

fn vmid(n: u64) -> Vmid {
    Vmid::new(n).unwrap()
}

fn ok(path: &str, data: Value) -> Value {
    json!({"method": "GET", "path": path, "query": "", "status": 200, "reason": "OK", "body": {"data": data}})
}

fn fail(path: &str, status: u16, reason: &str) -> Value {
    json!({"method": "GET", "path": path, "query": "", "status": status, "reason": reason, "body": {"data": null}})
}

fn replay(responses: Vec<Value>) -> ReplayTransport {
    let rec = json!({"format": "proxops-recording/v1", "cluster": "lab", "responses": responses});
    ReplayTransport::from_json(rec.to_string().as_bytes()).unwrap()
}

fn resources() -> Value {
    json!([
        {"maxdisk": 482713534464u64, "cpu": 0.0054917623564653, "node": "pve1", "type": "node", "id": "node/pve1", "status": "online", "level": ""},
        {"id": "node/pve2", "type": "node", "node": "pve2", "status": "offline"},
        {"netout": 545248946, "type": "qemu", "name": "web-01", "node": "pve1", "maxdisk": 34359738368u64, "vmid": 100, "status": "running", "template": 0, "id": "qemu/100", "tags": "proxops;web"},
        {"id": "qemu/101", "status": "stopped", "template": 1, "name": "tmpl", "type": "qemu", "vmid": 101, "node": "pve1"},
        {"type": "lxc", "vmid": "106", "node": "pve1", "name": "ct-01", "status": "stopped", "id": "lxc/106", "lock": "backup"},
        {"type": "qemu", "vmid": 200, "node": "pve2", "name": "far", "status": "running", "id": "qemu/200"},
        {"type": "storage", "id": "storage/pve1/local", "storage": "local", "node": "pve1", "content": "backup,vztmpl,iso", "status": "available"},
        {"type": "qemu", "name": "no-node", "vmid": 300},
        {"type": "sdn", "id": "sdn/pve1/localnetwork", "node": "pve1", "sdn": "localnetwork"}
    ])
}

fn qemu100() -> Value {
    json!({"smbios1": "uuid=42ecc256-a7c5-4d93-b630-0e7a06c051c2", "cpu": "host", "net0": "virtio=BC:24:11:4E:8F:D1,bridge=vmbr0,firewall=1",
        "scsi0": "local-zfs:vm-100-disk-1,discard=on,size=160G,ssd=1", "digest": "18389648fd69603dd93ab0c443e1f32267f6c436",
        "memory": "4096", "cores": 4, "onboot": 1, "tags": "proxops;web", "boot": "order=scsi0"})
}

/// A config as `GET …/pending` lists it with nothing pending: one entry
/// per scalar key with its `value`, the digest among them
/// (pve-guest-common `GuestHelpers.pm` `config_with_pending_array`, which
/// skips array values such as LXC's raw `lxc` keys).
fn as_pending(config: Value) -> Value {
    Value::Array(
        config
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| !v.is_array())
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect(),
    )
}

/// VMs 100 and 101 answer `/pending`; container 106 only `/config` (a
/// recording made before ProxOps read `/pending`): it is read from there.
fn full() -> Vec<Value> {
    vec![
        ok("/cluster/resources", resources()),
        ok("/nodes/pve1/qemu/100/pending", as_pending(qemu100())),
        ok(
            "/nodes/pve1/qemu/101/pending",
            as_pending(
                json!({"memory": 8192, "template": 1, "digest": "a2019681a11059dc5602d474c3443b907db213b7", "ide2": "none,media=cdrom"}),
            ),
        ),
        ok(
            "/nodes/pve1/lxc/106/config",
            json!({"hostname": "ct-01", "memory": 512, "rootfs": "local-lvm:vm-106-disk-0,size=8G", "net0": "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth", "lxc": [["lxc.apparmor.profile", "unconfined"]]}),
        ),
        ok(
            "/nodes/pve1/storage/local/content",
            json!([
                {"ctime": "1700000000", "volid": "local:iso/debian-13.1.0-amd64-netinst.iso", "content": "iso", "format": "iso", "size": 663748608},
                {"volid": "local:vztmpl/debian-13-standard_13.6.1-1_amd64.tar.zst", "size": 1.2e8, "content": "vztmpl", "format": "tzst", "ctime": 1700000001}
            ]),
        ),
    ]
}

fn scope_with_storage() -> ReadScope {
    ReadScope {
        storages: BTreeSet::from([
            (node("pve1"), StorageId::new("local").unwrap()),
            (node("pve2"), StorageId::new("local").unwrap()),
        ]),
        ..ReadScope::default()
    }
}

/// Counts and logs calls to an inner transport.
struct Counting<T> {
    inner: T,
    calls: Mutex<Vec<String>>,
}

impl<T: Transport> Transport for Counting<T> {
    fn call(&self, r: &Request) -> Result<Response, TransportError> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("{} {}", r.method, r.path));
        self.inner.call(r)
    }
}

#[test]
fn snapshot_reads_nodes_guests_configs_and_storage() {
    let t = Counting {
        inner: replay(full()),
        calls: Mutex::new(vec![]),
    };
    let snap = read_snapshot(&t, &scope_with_storage()).unwrap();

    assert_eq!(snap.nodes.get(&node("pve1")), Some(&NodeState::Online));
    assert_eq!(snap.nodes.get(&node("pve2")), Some(&NodeState::Offline));
    assert_eq!(
        snap.guests.len(),
        4,
        "rows without node are ignored, sdn rows too"
    );

    let web = snap.guest(&node("pve1"), vmid(100)).unwrap();
    assert_eq!(
        (web.guest_type, web.power, web.template),
        (GuestType::Qemu, Power::Running, false)
    );
    assert_eq!(web.tags.to_wire(), "proxops;web");
    let cfg = web.config.as_ref().unwrap();
    assert_eq!(cfg.memory_mib().unwrap().unwrap(), 4096);
    assert_eq!(
        cfg.digest.as_deref(),
        Some("18389648fd69603dd93ab0c443e1f32267f6c436")
    );
    let nic: QemuNet = cfg.typed("net0").unwrap().unwrap();
    // Kept as PVE spells it (pve-common `Tools.pm` `random_ether_addr`).
    assert_eq!(nic.mac.unwrap().to_wire(), "BC:24:11:4E:8F:D1");
    let disk: Drive = cfg.typed("scsi0").unwrap().unwrap();
    assert_eq!(disk.size.unwrap().get(), 160 << 30);

    let tmpl = snap.guest(&node("pve1"), vmid(101)).unwrap();
    assert!(tmpl.template);
    assert!(tmpl.config.as_ref().unwrap().is_template().unwrap());

    let ct = snap.guest(&node("pve1"), vmid(106)).unwrap();
    assert_eq!(
        (ct.guest_type, ct.power, ct.lock.as_deref()),
        (GuestType::Lxc, Power::Stopped, Some("backup"))
    );
    assert_eq!(
        ct.config.as_ref().unwrap().get("lxc"),
        Some("lxc.apparmor.profile: unconfined")
    );

    let local = snap
        .storage_content(&node("pve1"), &StorageId::new("local").unwrap())
        .unwrap()
        .as_ref()
        .unwrap();
    assert!(local.has_file("iso", "debian-13.1.0-amd64-netinst.iso"));
    assert!(local.has_file("vztmpl", "debian-13-standard_13.6.1-1_amd64.tar.zst"));

    // 1 resources + 1 replication jobs + 4 cluster-level listings (pools,
    // backup jobs, HA resources, HA rules) + 3 `/pending` reads on the online
    // node (the container's is not recorded, so it is read through
    // `/config`: one more) + 1 storage on the online node + 1 VM list of
    // the node running VMs (QEMU's status: paused or not).
    let calls = t.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 1 + 1 + 4 + 3 + 1 + 1 + 1, "{calls:?}");
    assert!(calls.contains(&"GET /pools".to_owned()));
    assert!(calls.contains(&"GET /cluster/backup".to_owned()));
    assert!(calls.contains(&"GET /cluster/ha/resources".to_owned()));
    assert!(calls.contains(&"GET /cluster/ha/rules".to_owned()));
    assert!(calls.contains(&"GET /cluster/replication".to_owned()));
    assert!(calls.contains(&"GET /nodes/pve1/qemu".to_owned()));
    assert!(calls.contains(&"GET /nodes/pve1/qemu/100/pending".to_owned()));
    assert!(!calls.contains(&"GET /nodes/pve1/qemu/100/config".to_owned()));
    assert_eq!(calls[0], "GET /cluster/resources");
    assert!(
        calls.iter().all(|c| !c.contains("/content/")),
        "never the per-type content path"
    );
}

#[test]
fn offline_node_keeps_failures_and_sends_no_request_there() {
    let snap = read_snapshot(&replay(full()), &scope_with_storage()).unwrap();
    let far = snap.guest(&node("pve2"), vmid(200)).unwrap();
    let failure = far.config.as_ref().unwrap_err();
    assert_eq!(failure.what, "GET /nodes/pve2/qemu/200/pending");
    assert!(failure.message.contains("offline"));
    assert_eq!(far.power, Power::Running, "resource status still reported");
    let st = snap
        .storage_content(&node("pve2"), &StorageId::new("local").unwrap())
        .unwrap();
    assert!(st.is_err());
    assert_eq!(snap.failures.len(), 2);
}

#[test]
fn a_failed_config_read_stays_a_failure() {
    let mut r = full();
    r[1] = fail("/nodes/pve1/qemu/100/pending", 500, "proxy loop detected");
    r[4] = fail(
        "/nodes/pve1/storage/local/content",
        500,
        "unable to activate storage",
    );
    let snap = read_snapshot(&replay(r), &scope_with_storage()).unwrap();
    let web = snap.guest(&node("pve1"), vmid(100)).unwrap();
    assert!(
        web.config
            .as_ref()
            .unwrap_err()
            .message
            .contains("500 proxy loop detected")
    );
    let st = snap
        .storage_content(&node("pve1"), &StorageId::new("local").unwrap())
        .unwrap();
    assert!(
        st.as_ref()
            .unwrap_err()
            .message
            .contains("unable to activate storage")
    );
    assert!(
        snap.failures
            .iter()
            .any(|f| f.what == "GET /nodes/pve1/qemu/100/pending")
    );
}

#[test]
fn node_unreachable_595_is_a_failure_not_absence() {
    let mut r = full();
    r[2] = fail("/nodes/pve1/qemu/101/pending", 595, "Connection refused");
    let snap = read_snapshot(&replay(r), &ReadScope::default()).unwrap();
    assert!(
        snap.guest(&node("pve1"), vmid(101))
            .unwrap()
            .config
            .is_err()
    );
}

#[test]
fn a_guest_whose_config_does_not_exist_vanished_and_is_dropped() {
    let mut r = full();
    r[2] = fail(
        "/nodes/pve1/qemu/101/pending",
        500,
        "Configuration file 'nodes/pve1/qemu-server/101.conf' does not exist",
    );
    let snap = read_snapshot(&replay(r), &ReadScope::default()).unwrap();
    assert!(snap.guest(&node("pve1"), vmid(101)).is_none());
    assert!(snap.guest(&node("pve1"), vmid(100)).is_some());
}

#[test]
fn a_request_missing_from_the_recording_fails_closed() {
    let mut r = full();
    r.remove(3); // lxc 106 config
    let t = replay(r);
    let err = t
        .call(&Request::get("/nodes/pve1/lxc/106/config"))
        .unwrap_err();
    assert!(matches!(err, TransportError::NotRecorded { .. }));
    let snap = read_snapshot(&t, &ReadScope::default()).unwrap();
    let ct = snap.guest(&node("pve1"), vmid(106)).unwrap();
    assert!(
        ct.config
            .as_ref()
            .unwrap_err()
            .message
            .contains("not in the recording")
    );
}

#[test]
fn unreadable_cluster_resources_aborts_the_cluster() {
    let t = replay(vec![fail(
        "/cluster/resources",
        500,
        "cluster not ready - no quorum?",
    )]);
    let err = read_snapshot(&t, &ReadScope::default()).unwrap_err();
    let ReadError::ClusterResources(f) = err else {
        panic!("unexpected error")
    };
    assert!(f.message.contains("no quorum"));
    assert!(read_snapshot(&replay(vec![]), &ReadScope::default()).is_err());
}

#[test]
fn allowlist_ignores_other_nodes_and_marks_unlisted_nodes_unknown() {
    let scope = ReadScope {
        allowlist: Some(BTreeSet::from([node("pve2"), node("pve9")])),
        storages: BTreeSet::from([(node("pve1"), StorageId::new("local").unwrap())]),
        concurrency: 2,
        firewall: None,
    };
    let t = Counting {
        inner: replay(full()),
        calls: Mutex::new(vec![]),
    };
    let snap = read_snapshot(&t, &scope).unwrap();
    assert!(!snap.nodes.contains_key(&node("pve1")));
    assert_eq!(snap.nodes.get(&node("pve9")), Some(&NodeState::Unknown));
    assert_eq!(
        snap.guests
            .keys()
            .map(|(n, v)| (n.as_str().to_owned(), v.get()))
            .collect::<Vec<_>>(),
        vec![("pve2".to_owned(), 200)]
    );
    assert!(
        snap.storage_content(&node("pve1"), &StorageId::new("local").unwrap())
            .unwrap()
            .is_err()
    );
    assert_eq!(
        *t.calls.lock().unwrap(),
        [
            "GET /cluster/resources",
            "GET /pools",
            "GET /cluster/backup",
            "GET /cluster/ha/resources",
            "GET /cluster/ha/rules",
            "GET /cluster/replication"
        ],
        "only the cluster-wide reads: pve2 is offline"
    );
}

#[test]
fn snapshot_is_deterministic_and_serialises() {
    let a = read_snapshot(&replay(full()), &scope_with_storage()).unwrap();
    let b = read_snapshot(
        &replay(full()),
        &ReadScope {
            concurrency: 1,
            ..scope_with_storage()
        },
    )
    .unwrap();
    assert_eq!(a, b);
    let ja = serde_json::to_string(&a).unwrap();
    assert_eq!(ja, serde_json::to_string(&b).unwrap());
    assert!(ja.contains("\"guests\":[{"));
}

/// One answer body from the repository's `fixtures/pve-shapes`: made-up
/// content in the shape of captured PVE answers (its README says which
/// shape each file follows, after the wire-format notes in pve-wire.md).
fn pve_shaped(name: &str) -> Value {
    let path = format!(
        "{}/../../fixtures/pve-shapes/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_slice(&text).unwrap()
}

/// The snapshot of a recording that answers `/cluster/resources` with
/// `body` and nothing else.
fn snapshot_of_resources(body: Value) -> LiveSnapshot {
    let answer = json!({"method": "GET", "path": "/cluster/resources", "query": "", "status": 200, "body": body});
    read_snapshot(&replay(vec![answer]), &ReadScope::default()).unwrap()
}

#[test]
fn real_cluster_resources_answer_reads_nodes_guests_and_tags() {
    let snap = snapshot_of_resources(pve_shaped("cluster-resources.json"));
    // Three node rows, four guest rows; the eight storage rows are neither.
    assert_eq!(
        snap.nodes.keys().map(NodeName::as_str).collect::<Vec<_>>(),
        ["alder", "birch", "cedar"]
    );
    assert!(snap.nodes.values().all(|s| *s == NodeState::Online));
    assert_eq!(
        snap.guests
            .keys()
            .map(|(n, v)| (n.as_str(), v.get()))
            .collect::<Vec<_>>(),
        [
            ("alder", 111),
            ("alder", 112),
            ("birch", 110),
            ("cedar", 130)
        ]
    );
    let template = snap.guest(&node("alder"), vmid(111)).unwrap();
    assert!(template.template);
    assert_eq!(template.power, Power::Stopped);
    assert!(template.tags.is_empty(), "no `tags` key: no tags");
    // `+`, `-` and `.` are inside one tag; only `;` separates tags.
    let tagged = snap.guest(&node("alder"), vmid(112)).unwrap();
    assert_eq!(tagged.tags.iter().count(), 1);
    assert_eq!(tagged.tags.to_wire(), "ci-runner+v1.2");
    assert!(!tagged.template);
    let running = snap.guest(&node("birch"), vmid(110)).unwrap();
    assert_eq!(running.power, Power::Running);
    assert_eq!(running.name, "gitea");
    assert_eq!(
        snap.guest(&node("cedar"), vmid(130)).unwrap().name,
        "VM 130"
    );
    // The storage rows' `shared` and `plugintype` are kept per storage.
    let id = |s: &str| StorageId::new(s).unwrap();
    assert!(snap.is_shared(&id("nfs-isos")));
    assert!(!snap.is_shared(&id("local-zfs")));
    assert_eq!(snap.storage_type(&id("local-zfs")), Some("zfspool"));
    assert_eq!(snap.storage_type(&id("nfs-isos")), Some("nfs"));
    // No config was recorded: every guest's config is a failure, none is absent.
    assert!(snap.guests.values().all(|g| {
        g.config
            .as_ref()
            .is_err_and(|f| f.message.contains("not in the recording"))
    }));
    assert_eq!(snap.failures.len(), snap.guests.len());
}

#[test]
fn real_trimmed_resources_split_tags_on_semicolons() {
    let snap = snapshot_of_resources(pve_shaped("cluster-resources-vm-trimmed.json"));
    let g = snap.guest(&node("elm"), vmid(301)).unwrap();
    assert_eq!(
        g.tags.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        ["amber", "teal"]
    );
    assert_eq!(g.power, Power::Unknown, "no status in the row");
    let template = snap.guest(&node("elm"), vmid(302)).unwrap();
    assert!(template.template);
    assert_eq!(template.tags.to_wire(), "amber");
    assert!(snap.guest(&node("elm"), vmid(300)).unwrap().tags.is_empty());
    assert_eq!(
        snap.node_state(&node("elm")),
        NodeState::Unknown,
        "no node row"
    );
}

#[test]
fn pending_values_are_what_pve_will_have_and_the_pending_keys_are_named() {
    // qemu-server `API2/Qemu.pm` `vm_pending` (through pve-guest-common
    // `config_with_pending_array`): `value` is what the guest runs with,
    // `pending` the queued value, `delete` a queued removal (2: forced).
    let mut r = full();
    r[1] = ok(
        "/nodes/pve1/qemu/100/pending",
        json!([
            {"key": "memory", "value": "4096", "pending": "8192"},
            {"key": "cores", "value": 4},
            {"key": "vga", "pending": "virtio"},
            {"key": "agent", "value": "1", "delete": 1},
            {"key": "tablet", "value": 1, "delete": 2},
            {"key": "onboot", "value": 1, "pending": 1},
            {"key": "digest", "value": "18389648fd69603dd93ab0c443e1f32267f6c436"}
        ]),
    );
    let snap = read_snapshot(&replay(r), &ReadScope::default()).unwrap();
    let cfg = snap
        .guest(&node("pve1"), vmid(100))
        .unwrap()
        .config
        .as_ref()
        .unwrap();
    assert_eq!(cfg.get("memory"), Some("8192"));
    assert_eq!(cfg.current("memory"), Some("4096"));
    assert_eq!(cfg.get("vga"), Some("virtio"));
    assert_eq!(cfg.current("vga"), None);
    assert_eq!(cfg.get("agent"), None);
    assert_eq!(cfg.current("agent"), Some("1"));
    assert_eq!(cfg.get("cores"), Some("4"));
    assert_eq!(cfg.get("onboot"), Some("1"));
    assert_eq!(
        cfg.pending_keys(),
        vec!["agent", "memory", "tablet", "vga"],
        "a queued value equal to the current one changes nothing"
    );
    assert_eq!(
        cfg.digest.as_deref(),
        Some("18389648fd69603dd93ab0c443e1f32267f6c436")
    );
    assert!(cfg.get("digest").is_none());
}

#[test]
fn a_server_without_pending_is_read_through_config() {
    // An older PVE or a proxy answering 501 (or 404 for the path): the
    // config is read instead, with nothing pending.
    let mut r = full();
    r[1] = fail(
        "/nodes/pve1/qemu/100/pending",
        501,
        "Method not implemented",
    );
    r.push(ok("/nodes/pve1/qemu/100/config", qemu100()));
    let snap = read_snapshot(&replay(r), &ReadScope::default()).unwrap();
    let cfg = snap
        .guest(&node("pve1"), vmid(100))
        .unwrap()
        .config
        .as_ref()
        .unwrap();
    assert_eq!(cfg.memory_mib().unwrap().unwrap(), 4096);
    assert!(cfg.pending.is_empty());
    assert!(cfg.digest.is_some());
}

// pve-manager src/PVE/API2Tools.pm `extract_storage_stats`: every storage
// row of /cluster/resources carries storage.cfg's `shared` (0 or 1), the
// flag qemu-server `clone_vm` checks before cloning to another node.
#[test]
fn storage_rows_say_which_storages_are_shared_without_another_request() {
    let mut rows = resources();
    let list = rows.as_array_mut().unwrap();
    list.push(json!({"type": "storage", "id": "storage/pve1/ceph", "storage": "ceph", "node": "pve1", "shared": 1, "plugintype": "rbd"}));
    list.push(json!({"type": "storage", "id": "storage/pve2/ceph", "storage": "ceph", "node": "pve2", "shared": 1, "plugintype": "rbd"}));
    list.push(json!({"type": "storage", "id": "storage/pve1/local-lvm", "storage": "local-lvm", "node": "pve1", "shared": 0, "plugintype": "lvmthin"}));
    let mut answers = full();
    answers[0] = ok("/cluster/resources", rows);
    let t = Counting {
        inner: replay(answers),
        calls: Mutex::new(vec![]),
    };
    let snap = read_snapshot(&t, &scope_with_storage()).unwrap();
    let id = |s: &str| StorageId::new(s).unwrap();
    assert!(snap.is_shared(&id("ceph")));
    assert!(!snap.is_shared(&id("local-lvm")));
    // A row without the flag (older PVE) and an unlisted storage are not
    // known to be shared.
    assert!(!snap.is_shared(&id("local")));
    assert!(!snap.is_shared(&id("nfs")));
    let baseline = Counting {
        inner: replay(full()),
        calls: Mutex::new(vec![]),
    };
    read_snapshot(&baseline, &scope_with_storage()).unwrap();
    assert_eq!(
        t.calls.lock().unwrap().len(),
        baseline.calls.lock().unwrap().len(),
        "no request beyond the ones the snapshot always makes"
    );
}

/// A PVE 8 has no `/cluster/ha/rules` (pve-ha-manager 5.0, PVE 9, brought
/// it; pve-http-server `AnyEvent.pm` answers an unknown API path with
/// 501): HA rules are unsupported there, not unreadable; any other failure
/// stays a failure.
#[test]
fn a_pve_without_ha_rules_reads_them_as_unsupported() {
    let mut responses = full();
    responses.push(fail(
        "/cluster/ha/rules",
        501,
        "Method 'GET /cluster/ha/rules' not implemented",
    ));
    let snap = read_snapshot(&replay(responses), &scope_with_storage()).unwrap();
    assert!(snap.cluster.unsupported.contains(&Kind::HARule));
    assert_eq!(snap.cluster.listing(Kind::HARule).unwrap().len(), 0);
    assert!(
        !snap.failures.iter().any(|f| f.what.contains("ha/rules")),
        "{:?}",
        snap.failures
    );

    let mut responses = full();
    responses.push(fail("/cluster/ha/rules", 500, "got timeout"));
    let snap = read_snapshot(&replay(responses), &scope_with_storage()).unwrap();
    assert!(snap.cluster.unsupported.is_empty());
    assert!(snap.cluster.listing(Kind::HARule).is_err());
}
