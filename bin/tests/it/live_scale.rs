//! The request bound of a converged live cycle at scale: 2,000 guests on
//! 8 nodes seeded straight into fakepve (applying them would take minutes),
//! one `proxops diff` with an API token and one with a password login, and
//! the exact requests each sent (tools/install-test-tools.sh).

#![allow(clippy::unwrap_used)]

use crate::live_support;

use std::collections::BTreeMap;
use std::time::Instant;

use live_support::*;
use proxops_pve::fakepve::FakePve;
use serde_json::{Value, json};

const GUESTS: usize = 2000;
const NODES: usize = 8;
const CT_ARCHIVE: &str = "debian-13-standard_13.1-2_amd64.tar.zst";

fn node(i: usize) -> String {
    format!("pve{}", i % NODES + 1)
}

fn mac(i: usize) -> String {
    format!(
        "BC:24:11:{:02X}:{:02X}:{:02X}",
        (i >> 16) & 255,
        (i >> 8) & 255,
        i & 255
    )
}

/// A tenth of the guests are containers, the rest VMs; each seeded with
/// the config PVE holds after ProxOps created it, so nothing drifts. The
/// container template archive sits on `local` (shared by every node in
/// fakepve), so each node's `local` listing is read once.
fn seed() -> Value {
    let mut guests = Vec::new();
    for i in 0..GUESTS {
        let vmid = 1000 + i;
        if i % 10 == 9 {
            guests.push(json!({
                "vmid": vmid, "type": "lxc", "name": format!("ct-{vmid}"), "node": node(i),
                "status": "running",
                "ostemplate": format!("local:vztmpl/{CT_ARCHIVE}"),
                "config": {
                    "hostname": format!("ct-{vmid}"), "memory": 512, "swap": 512, "cores": 1,
                    "rootfs": format!("local-lvm:vm-{vmid}-disk-0,size=4G"),
                    "net0": format!("name=eth0,bridge=vmbr0,hwaddr={},ip=dhcp,type=veth", mac(i)),
                    "unprivileged": 1, "ostype": "debian", "arch": "amd64", "tags": "proxops"
                }
            }));
        } else {
            guests.push(json!({
                "vmid": vmid, "name": format!("vm-{vmid}"), "node": node(i), "status": "running",
                "config": {
                    "name": format!("vm-{vmid}"), "memory": "1024", "cpu": "host", "cores": 1,
                    "scsi0": format!("local-lvm:vm-{vmid}-disk-0,size=8G"),
                    "net0": format!("virtio={},bridge=vmbr0", mac(i)),
                    "tags": "proxops"
                }
            }));
        }
    }
    json!({
        "nodes": (1..=NODES).map(|n| format!("pve{n}")).collect::<Vec<_>>(),
        "storages": {
            "local": {"type": "dir", "path": "/var/lib/vz",
                      "content": "iso,vztmpl,backup,import,snippets", "avail": 53687091200u64}
        },
        "files": [{"storage": "local", "name": CT_ARCHIVE, "size": 120000000, "content": "vztmpl"}],
        "guests": guests
    })
}

fn repo_for(pve: &FakePve) -> Repo {
    let repo = Repo {
        dir: tempfile::tempdir().unwrap(),
    };
    let nodes: Vec<String> = (1..=NODES).map(|n| format!("pve{n}")).collect();
    repo.write(
        "clusters/home/config.yaml",
        &format!(
            "pve:\n  clusters:\n    home:\n      base-url: {}\n      nodes: [{}]\n      ca-file: {}\n",
            pve.url(),
            nodes.join(", "),
            pve.ca_file().display()
        ),
    );
    let mut list = String::from("resources:\n");
    let mut add = |rel: String, text: String| {
        repo.write(&rel, &text);
        list.push_str(&format!("  - ../../{rel}\n"));
    };
    add(
        "ctt/home/debian-13-standard.yaml".into(),
        format!(
            "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: debian-13-standard\nspec:\n  nodes: [{}]\n  storage: local\n  filename: {CT_ARCHIVE}\n  url: http://download.proxmox.com/images/system/{CT_ARCHIVE}\n",
            nodes.join(", ")
        ),
    );
    for i in 0..GUESTS {
        let vmid = 1000 + i;
        if i % 10 == 9 {
            add(
                format!("lxc/home/ct-{vmid}.yaml"),
                format!(
                    "apiVersion: proxops/v1alpha1\nkind: LXC\nmetadata:\n  name: ct-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  template: debian-13-standard\n  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n    size: 4GiB\n  networks:\n    - bridge: vmbr0\n      ip: dhcp\n  options:\n    unprivileged: true\n",
                    node(i)
                ),
            );
        } else {
            add(
                format!("vm/home/vm-{vmid}.yaml"),
                format!(
                    "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm-{vmid}\nspec:\n  node: {}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n",
                    node(i)
                ),
            );
        }
    }
    repo.write("clusters/home/resources.yaml", &list);
    repo
}

#[test]
fn a_converged_cycle_of_2000_guests_on_8_nodes_stays_within_the_request_bound() {
    let started = Instant::now();
    let pve = FakePve::start(&seed()).unwrap();
    let repo = repo_for(&pve);
    pve.forget_requests().unwrap();

    let run = proxops(&pve, &repo, &["diff"]);
    assert_eq!(run.code, 0, "{}", run.all());
    assert!(run.stdout.contains("no drift"), "{}", run.all());

    // One inventory read, one listing per cluster-level kind (pools,
    // backup jobs, HA resources and rules, replication jobs: K), one config
    // read per guest, one content listing per node for the template
    // archive and one VM list per node (QEMU's status of its running VMs):
    // N + 2M + 1 + K, inside N + 2M + 2 + K.
    let requests = pve.requests().unwrap();
    let mut by_shape: BTreeMap<String, usize> = BTreeMap::new();
    for (method, path, _) in &requests {
        // The per-guest read is `/pending` (config, pending values and
        // digest in one answer).
        let shape = if path.ends_with("/pending") {
            if path.contains("/lxc/") {
                "lxc config"
            } else {
                "qemu config"
            }
        } else if path.ends_with("/content") {
            "storage content"
        } else {
            path.as_str()
        };
        *by_shape.entry(format!("{method} {shape}")).or_default() += 1;
    }
    // Before the inventory: which PVE this is (one read) and what the
    // token may see (VM.Audit on /vms, Sys.Audit on /nodes, Datastore.Audit
    // on the one storage read).
    let checks = 1 + 3;
    // One listing per cluster-level kind (the replication jobs are one).
    let kinds = proxops_core::cluster::KINDS.len();
    let bound = GUESTS + 2 * NODES + 2 + kinds + checks;
    assert_eq!(by_shape["GET /api2/json/cluster/status"], 1);
    assert_eq!(by_shape["GET /api2/json/access/permissions"], 3);
    assert_eq!(
        requests.len(),
        GUESTS + 2 * NODES + 1 + kinds + checks,
        "{by_shape:#?}"
    );
    assert!(requests.len() <= bound);
    assert_eq!(by_shape["GET qemu config"], GUESTS - GUESTS / 10);
    assert_eq!(by_shape["GET lxc config"], GUESTS / 10);
    assert_eq!(by_shape["GET storage content"], NODES);

    // A password login adds its one ticket request, still inside the bound.
    pve.forget_requests().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_proxops"))
        .env_remove("PROXOPS_GIT_PATH")
        .env_remove("PROXOPS_CONFIG")
        .env_remove("PROXOPS_PVE_TOKEN")
        .env_remove("PROXOPS_PVE_TOKEN_VALUE")
        .env("PROXOPS_PVE_USER", proxops_pve::fakepve::LOGIN_USER)
        .env("PROXOPS_PVE_PASSWORD", pve.password().expose())
        .arg("--git-path")
        .arg(repo.path())
        .args(["--pve-auth", "ticket", "--cluster", "home", "diff"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("no drift"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ticket = pve.requests().unwrap();
    assert_eq!(ticket.len(), GUESTS + 2 * NODES + 2 + kinds + checks);
    assert_eq!(
        ticket
            .iter()
            .filter(|(m, p, _)| m == "POST" && p.ends_with("/access/ticket"))
            .count(),
        1
    );
    assert!(ticket.len() <= bound);
    eprintln!(
        "{} requests with a token, {} with a password login, for {GUESTS} guests on {NODES} nodes (bound {bound}), {:.1} s with start-up",
        requests.len(),
        ticket.len(),
        started.elapsed().as_secs_f64()
    );
}
