#!/usr/bin/env python3
"""Writes a large, deterministic ProxOps fixture: a repository of N guests
over M nodes and the recording of the one PVE cluster it describes, so
`proxops diff --replay` can be measured at any scale.

    python3 tools/scale-fixture.py --guests 10000 --nodes 8 --out /tmp/scale
    proxops --git-path /tmp/scale/repo diff --replay /tmp/scale/live

Output:
  OUT/repo/                 a git-path work tree (proxops.yaml, clusters/<c>/,
                            one manifest file per object under <kind>/<c>/
                            and the shared artifacts under <kind>/base/)
  OUT/live/<c>.json         a proxops-recording/v1 answering every read the
                            diff makes: /cluster/resources, each guest's
                            config, each node's storage content
  OUT/expected.json         what the plan must show (counts and names)

The cluster holds, besides the N guests, one TemplateVM per node (the clone
source of the cloud-init VMs) and one TemplateCT, and the artifacts they
need (an ISO, a CTTemplate and a DiskImage, present on every node).
Guest i (0-based) has vmid 10000 + i and sits on node pve(i mod M + 1).
Every 5th guest is an LXC container; of the VMs, every 3rd is a full clone
of its node's template with cloud-init data, the rest have their own disks.

Most guests are converged. A deterministic share differs:
  --drift-percent P   P% of the guests (default 1) are drifted on PVE, in
                      turn: memory, cores, tags (an update each);
  --missing K         K guests (default max(1, N/500)) are absent on PVE
                      (a create each);
  --orphans K         K proxops-tagged guests on PVE have no manifest
                      (default max(1, N/1000)); the repository sets
                      reconcile.prune-budget to 0 (unlimited), so each is
                      a prune.
Which guests drift or are missing is spread evenly over the vmids.

The same arguments always give the same bytes (no clock, no randomness).
Python 3.11, standard library only.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8tb3BzLWxhcHRvcC1rZXktZm9yLXByb3hvcHMh ops@laptop"
SSH_KEY_ENCODED = (
    "ssh-ed25519%20AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8tb3BzLWxhcHRvcC1rZXktZm9yLXByb3hvcHMh%20ops%40laptop"
)
ISO_FILE = "debian-13.1.0-amd64-netinst.iso"
CTT_FILE = "debian-13-standard_13.1-2_amd64.tar.zst"
IMG_FILE = "debian-13-genericcloud-amd64.qcow2"
GUEST_BASE = 10000
ORPHAN_BASE = 900000
ROLES = ["web", "app", "db", "cache", "queue", "worker", "ci", "mon"]


def node_name(i):
    return "pve{0}".format(i + 1)


def digest(seed):
    return hashlib.sha1(seed.encode()).hexdigest()


def mac(prefix, n):
    return "BC:24:{0:02X}:{1:02X}:{2:02X}:{3:02X}".format(prefix, (n >> 16) & 255, (n >> 8) & 255, n & 255)


def get(path, data):
    return {"method": "GET", "path": path, "query": "", "status": 200, "reason": "OK", "body": {"data": data}}


def node_row(node):
    return {"id": "node/" + node, "type": "node", "node": node, "status": "online",
            "maxcpu": 64, "maxmem": 549755813888, "level": "", "cgroup-mode": 2}


def storage_row(node, storage, content, plugin):
    return {"id": "storage/{0}/{1}".format(node, storage), "type": "storage", "node": node,
            "storage": storage, "status": "available", "content": content, "plugintype": plugin,
            "shared": 0, "disk": 1073741824, "maxdisk": 4398046511104}


def guest_row(kind, node, vmid, name, status, tags, template=0, maxmem=2147483648):
    return {"id": "{0}/{1}".format(kind, vmid), "type": kind, "node": node, "vmid": vmid,
            "name": name, "status": status, "template": template, "maxmem": maxmem,
            "maxcpu": 2, "cpu": 0.0123 if status == "running" else 0,
            "uptime": 86400 if status == "running" else 0, "tags": tags}


def with_digest(kind, vmid, config):
    config["digest"] = digest("{0}-{1}-{2}".format(kind, vmid, sorted(config.items())))
    return config


def qemu_base(vmid):
    return {"meta": "creation-qemu=10.0.2,ctime=1764000000",
            "smbios1": "uuid=6e1a3c1e-0000-4000-8000-{0:012d}".format(vmid),
            "vmgenid": "0a7e4d2c-0000-4000-8000-{0:012d}".format(vmid),
            "ostype": "l26"}


def tags_text(tags):
    return ";".join(sorted(set(tags) | {"proxops"}))


class Guest:
    """One desired guest and what PVE holds for it."""

    def __init__(self, i, nodes):
        self.i = i
        self.vmid = GUEST_BASE + i
        self.node = node_name(i % nodes)
        self.role = ROLES[(i // nodes) % len(ROLES)]
        if i % 5 == 4:
            self.kind = "LXC"
            self.name = "ct-{0}-{1:05d}".format(self.role, i)
        elif i % 3 == 0:
            self.kind = "clone"
            self.name = "vm-{0}-{1:05d}".format(self.role, i)
        else:
            self.kind = "VM"
            self.name = "vm-{0}-{1:05d}".format(self.role, i)
        self.memory_mib = [512, 1024, 2048, 4096][i % 4]
        self.cores = 1 + (i // 4) % 4
        self.disk_gib = [8, 16, 32][i % 3]
        self.tags = [self.role] + (["prod"] if i % 2 == 0 else ["staging"])
        self.ip_host = i % 250 + 2
        self.ip_net = (i // 250) % 250
        self.stopped = i % 17 == 16

    @property
    def manifest_kind(self):
        return "LXC" if self.kind == "LXC" else "VM"

    @property
    def rel(self):
        return "{0}/{{cluster}}/{1}.yaml".format(self.manifest_kind.lower(), self.name)

    def manifest(self, template_name):
        head = ["apiVersion: proxops/v1alpha1", "kind: " + self.manifest_kind, "metadata:",
                "  name: " + self.name, "  labels:", "    role: " + self.role, "spec:",
                "  node: " + self.node, "  vmid: {0}".format(self.vmid)]
        if self.stopped:
            head.append("  state: stopped")
        if self.kind == "LXC":
            body = ["  template: debian-13-standard",
                    "  memory: {0}MiB".format(self.memory_mib),
                    "  swap: 512MiB",
                    "  cpu:", "    cores: {0}".format(self.cores),
                    "  root:", "    storage: local-lvm", "    size: {0}GiB".format(self.disk_gib),
                    "  networks:", "    - bridge: vmbr0", "      iface: eth0",
                    "      ip: 10.{0}.{1}.{2}/16".format(20 + self.ip_net // 250, self.ip_net, self.ip_host),
                    "      gw: 10.{0}.0.1".format(20 + self.ip_net // 250),
                    "  dns:", "    hostname: " + self.name,
                    "  options:", "    unprivileged: true", "    onboot: true"]
        elif self.kind == "clone":
            body = ["  clone: " + template_name,
                    "  memory: {0}MiB".format(self.memory_mib),
                    "  cpu:", "    type: x86-64-v2-AES", "    cores: {0}".format(self.cores),
                    "  networks:", "    - bridge: vmbr0", "      vlan: 20", "      firewall: true",
                    "  cloud-init-data:", "    ci-user: ops", "    ssh-keys:", "      - " + SSH_KEY,
                    "    nameservers: [10.0.20.1]", "    search-domains: [scale.arpa]",
                    "    ipconfigs:", "      - nic: 0",
                    "        ip: 10.{0}.{1}.{2}/16".format(30 + self.ip_net // 250, self.ip_net, self.ip_host),
                    "        gateway: 10.{0}.0.1".format(30 + self.ip_net // 250),
                    "  options:", "    onboot: true", "    agent: true",
                    "  pve-description: " + self.role + " guest " + self.name]
        else:
            body = ["  memory: {0}MiB".format(self.memory_mib),
                    "  cpu:", "    type: host", "    cores: {0}".format(self.cores),
                    "  disks:", "    - storage: local-lvm", "      size: {0}GiB".format(self.disk_gib),
                    "      controller: virtio-scsi-single", "      iothread: true",
                    "  networks:", "    - bridge: vmbr0",
                    "  options:", "    onboot: true"]
        body.append("  tags: [{0}]".format(", ".join(self.tags)))
        return "\n".join(head + body) + "\n"

    def live(self, drift):
        """(resources row, config path, config) as PVE reports the guest."""
        memory, cores, tags = self.memory_mib, self.cores, tags_text(self.tags)
        if drift == "memory":
            memory = memory * 2
        elif drift == "cores":
            cores = cores + 1
        elif drift == "tags":
            tags = tags_text(self.tags[:1])
        status = "stopped" if self.stopped else "running"
        if self.kind == "LXC":
            net = 20 + self.ip_net // 250
            config = {"ostype": "debian", "arch": "amd64", "hostname": self.name,
                      "memory": memory, "swap": 512, "cores": cores,
                      "rootfs": "local-lvm:vm-{0}-disk-0,size={1}G".format(self.vmid, self.disk_gib),
                      "net0": "name=eth0,bridge=vmbr0,gw=10.{0}.0.1,hwaddr={1},ip=10.{0}.{2}.{3}/16,type=veth".format(
                          net, mac(0x12, self.i), self.ip_net, self.ip_host),
                      "unprivileged": 1, "onboot": 1, "tags": tags}
            config = with_digest("lxc", self.vmid, config)
            row = guest_row("lxc", self.node, self.vmid, self.name, status, tags,
                            maxmem=memory * 1048576)
            return row, "/nodes/{0}/lxc/{1}/config".format(self.node, self.vmid), config
        config = qemu_base(self.vmid)
        if self.kind == "clone":
            net = 30 + self.ip_net // 250
            config.update({
                "name": self.name, "memory": str(memory), "cpu": "x86-64-v2-AES", "cores": cores,
                "scsihw": "virtio-scsi-single",
                "scsi0": "local-lvm:vm-{0}-disk-0,discard=on,iothread=1,size=3G".format(self.vmid),
                "net0": "virtio={0},bridge=vmbr0,firewall=1,tag=20".format(mac(0x11, self.i)),
                "serial0": "socket", "vga": "serial0",
                "ide2": "local-lvm:vm-{0}-cloudinit,media=cdrom".format(self.vmid),
                "agent": "1", "boot": "order=scsi0;ide2;net0",
                "ciuser": "ops", "sshkeys": SSH_KEY_ENCODED, "nameserver": "10.0.20.1",
                "searchdomain": "scale.arpa",
                "ipconfig0": "ip=10.{0}.{1}.{2}/16,gw=10.{0}.0.1".format(net, self.ip_net, self.ip_host),
                "onboot": 1, "description": self.role + " guest " + self.name + "\n", "tags": tags})
        else:
            config.update({
                "name": self.name, "memory": str(memory), "cpu": "host", "cores": cores,
                "scsihw": "virtio-scsi-single",
                "scsi0": "local-lvm:vm-{0}-disk-0,iothread=1,size={1}G".format(self.vmid, self.disk_gib),
                "net0": "virtio={0},bridge=vmbr0".format(mac(0x10, self.i)),
                "boot": "order=scsi0;net0", "onboot": 1, "tags": tags})
        config = with_digest("qemu", self.vmid, config)
        row = guest_row("qemu", self.node, self.vmid, self.name, status, tags,
                        maxmem=memory * 1048576)
        return row, "/nodes/{0}/qemu/{1}/config".format(self.node, self.vmid), config


def spread(count, total, offset):
    """`count` distinct indexes in 0..total, evenly spread, shifted by `offset`."""
    if count <= 0 or total <= 0:
        return []
    count = min(count, total)
    return sorted({(k * total // count + offset) % total for k in range(count)})


ARTIFACTS = [
    ("iso", "ISO", "debian-13-netinst", ISO_FILE,
     "https://cdimage.debian.org/debian-cd/current/amd64/iso-cd/" + ISO_FILE),
    ("ctt", "CTTemplate", "debian-13-standard", CTT_FILE,
     "http://download.proxmox.com/images/system/" + CTT_FILE),
    ("diskimage", "DiskImage", "debian-13-genericcloud", IMG_FILE,
     "https://cloud.debian.org/images/cloud/trixie/latest/" + IMG_FILE),
]


def generate(guests, nodes, drift_percent, missing, orphans, cluster):
    """Returns (files: {relative path: text}, recording dict, expected dict)."""
    node_names = [node_name(n) for n in range(nodes)]
    files = {}
    files["proxops.yaml"] = ("# Generated by tools/scale-fixture.py.\nreconcile:\n"
                             "  prune-budget: 0\n")
    files["clusters/{0}/config.yaml".format(cluster)] = (
        "pve:\n  clusters:\n    {0}:\n      base-url: https://pve-{0}.example.org:8006\n"
        "      nodes: [{1}]\n".format(cluster, ", ".join(node_names)))
    listed = []
    node_list = "[{0}]".format(", ".join(node_names))
    for directory, kind, name, filename, url in ARTIFACTS:
        rel = "{0}/base/{1}.yaml".format(directory, name)
        files[rel] = ("apiVersion: proxops/v1alpha1\nkind: {0}\nmetadata:\n  name: {1}\nspec:\n"
                      "  nodes: {2}\n  storage: local\n  filename: {3}\n  url: {4}\n").format(
                          kind, name, node_list, filename, url)
        listed.append(rel)

    responses = []
    rows = [node_row(n) for n in node_names]
    for n in node_names:
        rows.append(storage_row(n, "local", "iso,vztmpl,backup,import", "dir"))
        rows.append(storage_row(n, "local-lvm", "images,rootdir", "lvmthin"))
        responses.append(get("/nodes/{0}/storage/local/content".format(n), [
            {"volid": "local:iso/" + ISO_FILE, "content": "iso", "format": "iso",
             "size": 784334848, "ctime": 1764000000},
            {"volid": "local:vztmpl/" + CTT_FILE, "content": "vztmpl", "format": "tzst",
             "size": 126829056, "ctime": 1764000000},
            {"volid": "local:import/" + IMG_FILE, "content": "import", "format": "qcow2",
             "size": 343932928, "ctime": 1764000000},
        ]))

    # One TemplateVM per node (clone source), one TemplateCT on the first node.
    for n, node in enumerate(node_names):
        vmid = 9000 + n
        name = "debian-13-cloud-" + node
        rel = "templatevm/{0}/{1}.yaml".format(cluster, name)
        files[rel] = ("apiVersion: proxops/v1alpha1\nkind: TemplateVM\nmetadata:\n  name: {0}\n"
                      "spec:\n  node: {1}\n  vmid: {2}\n  memory: 2GiB\n  cpu:\n"
                      "    type: x86-64-v2-AES\n    cores: 2\n  disks:\n    - storage: local-lvm\n"
                      "      image: debian-13-genericcloud\n      controller: virtio-scsi-single\n"
                      "      iothread: true\n      discard: \"on\"\n  networks:\n    - bridge: vmbr0\n"
                      "  hardware:\n    serial0: socket\n    display: serial0\n    cloud-init:\n"
                      "      enabled: true\n      storage: local-lvm\n  options:\n    agent: true\n"
                      "  tags: [template, debian]\n").format(name, node, vmid)
        listed.append(rel)
        tags = "debian;proxops;template"
        rows.append(guest_row("qemu", node, vmid, name, "stopped", tags, template=1))
        config = qemu_base(vmid)
        config.update({
            "name": name, "memory": "2048", "cpu": "x86-64-v2-AES", "cores": 2,
            "scsihw": "virtio-scsi-single",
            "scsi0": "local-lvm:base-{0}-disk-0,discard=on,iothread=1,size=3G".format(vmid),
            "net0": "virtio={0},bridge=vmbr0".format(mac(0x09, n)), "serial0": "socket",
            "vga": "serial0", "ide2": "local-lvm:vm-{0}-cloudinit,media=cdrom".format(vmid),
            "agent": "1", "boot": "order=scsi0;ide2;net0", "template": 1, "tags": tags})
        responses.append(get("/nodes/{0}/qemu/{1}/config".format(node, vmid),
                             with_digest("qemu", vmid, config)))
    ct_node = node_names[0]
    rel = "templatect/{0}/ct-base.yaml".format(cluster)
    files[rel] = ("apiVersion: proxops/v1alpha1\nkind: TemplateCT\nmetadata:\n  name: ct-base\n"
                  "spec:\n  node: {0}\n  vmid: 9100\n  template: debian-13-standard\n"
                  "  memory: 512MiB\n  cpu:\n    cores: 1\n  root:\n    storage: local-lvm\n"
                  "    size: 4GiB\n  networks:\n    - bridge: vmbr0\n      ip: dhcp\n"
                  "  options:\n    unprivileged: true\n").format(ct_node)
    listed.append(rel)
    rows.append(guest_row("lxc", ct_node, 9100, "ct-base", "stopped", "proxops", template=1))
    responses.append(get("/nodes/{0}/lxc/9100/config".format(ct_node), with_digest("lxc", 9100, {
        "ostype": "debian", "arch": "amd64", "hostname": "ct-base", "memory": 512, "swap": 512,
        "cores": 1, "rootfs": "local-lvm:base-9100-disk-0,size=4G",
        "net0": "name=net0,bridge=vmbr0,hwaddr={0},ip=dhcp,type=veth".format(mac(0x08, 0)),
        "unprivileged": 1, "template": 1, "tags": "proxops"})))

    drift_count = (guests * drift_percent + 50) // 100 if drift_percent > 0 else 0
    missing_set = set(spread(missing, guests, 0))
    candidates = [i for i in range(guests) if i not in missing_set]
    drifted = {}
    for k, j in enumerate(spread(drift_count, len(candidates), 3)):
        drifted[candidates[j]] = ["memory", "cores", "tags"][k % 3]

    expected = {"guests": guests, "nodes": nodes, "cluster": cluster,
                "update": [], "create": [], "prune": []}
    for i in range(guests):
        g = Guest(i, nodes)
        template = "debian-13-cloud-" + g.node
        rel = g.rel.format(cluster=cluster)
        files[rel] = g.manifest(template)
        listed.append(rel)
        if i in missing_set:
            expected["create"].append("{0}/{1}".format(g.manifest_kind, g.name))
            continue
        row, path, config = g.live(drifted.get(i))
        rows.append(row)
        responses.append(get(path, config))
        if i in drifted:
            expected["update"].append("{0}/{1}".format(g.manifest_kind, g.name))

    for k in range(orphans):
        vmid = ORPHAN_BASE + k
        node = node_names[k % nodes]
        name = "old-{0:05d}".format(k)
        kind = "lxc" if k % 2 else "qemu"
        rows.append(guest_row(kind, node, vmid, name, "stopped", "proxops"))
        if kind == "lxc":
            config = {"ostype": "debian", "arch": "amd64", "hostname": name, "memory": 512,
                      "cores": 1, "rootfs": "local-lvm:vm-{0}-disk-0,size=8G".format(vmid),
                      "net0": "name=eth0,bridge=vmbr0,hwaddr={0},ip=dhcp,type=veth".format(
                          mac(0x20, k)), "tags": "proxops"}
        else:
            config = qemu_base(vmid)
            config.update({"name": name, "memory": "1024", "cpu": "host", "cores": 1,
                           "scsi0": "local-lvm:vm-{0}-disk-0,size=8G".format(vmid),
                           "net0": "virtio={0},bridge=vmbr0".format(mac(0x21, k)),
                           "tags": "proxops"})
        responses.append(get("/nodes/{0}/{1}/{2}/config".format(node, kind, vmid),
                             with_digest(kind, vmid, config)))
        expected["prune"].append("{0}/{1}".format("LXC" if kind == "lxc" else "VM", name))

    responses.append(get("/cluster/resources", rows))
    files["clusters/{0}/resources.yaml".format(cluster)] = (
        "# Generated by tools/scale-fixture.py: every manifest this cluster reconciles.\n"
        "resources:\n" + "".join("  - ../../{0}\n".format(r) for r in listed))
    responses.sort(key=lambda r: (r["path"], r["query"], r["method"]))
    recording = {"format": "proxops-recording/v1", "cluster": cluster, "responses": responses}
    for key in ("update", "create", "prune"):
        expected[key].sort()
    return files, recording, expected


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--guests", type=int, required=True, help="desired guests (VMs and containers)")
    p.add_argument("--nodes", type=int, required=True, help="PVE nodes")
    p.add_argument("--out", required=True, help="output directory (replaced)")
    p.add_argument("--drift-percent", type=int, default=1,
                   help="percent of guests drifted on PVE (default 1)")
    p.add_argument("--missing", type=int, default=None,
                   help="guests absent on PVE (default max(1, guests/500))")
    p.add_argument("--orphans", type=int, default=None,
                   help="tagged guests without a manifest (default max(1, guests/1000))")
    p.add_argument("--cluster", default="scale", help="cluster name (default scale)")
    a = p.parse_args(argv)
    if a.guests < 1 or a.guests > 80000:
        p.error("--guests must be between 1 and 80000")
    if a.nodes < 1 or a.nodes > 99:
        p.error("--nodes must be between 1 and 99")
    if not 0 <= a.drift_percent <= 100:
        p.error("--drift-percent must be between 0 and 100")
    missing = max(1, a.guests // 500) if a.missing is None else a.missing
    orphans = max(1, a.guests // 1000) if a.orphans is None else a.orphans
    if missing < 0 or missing > a.guests or orphans < 0:
        p.error("--missing must be between 0 and --guests, --orphans at least 0")

    files, recording, expected = generate(a.guests, a.nodes, a.drift_percent, missing, orphans,
                                          a.cluster)
    repo = os.path.join(a.out, "repo")
    live = os.path.join(a.out, "live")
    for d in (repo, live):
        if os.path.isdir(d):
            shutil.rmtree(d)
    for rel, text in sorted(files.items()):
        path = os.path.join(repo, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
    os.makedirs(live, exist_ok=True)
    with open(os.path.join(live, a.cluster + ".json"), "w", encoding="utf-8", newline="\n") as fh:
        json.dump(recording, fh, indent=2, sort_keys=True)
        fh.write("\n")
    with open(os.path.join(a.out, "expected.json"), "w", encoding="utf-8", newline="\n") as fh:
        json.dump(expected, fh, indent=2, sort_keys=True)
        fh.write("\n")
    print("{0} guests on {1} nodes: {2} files, {3} updates, {4} creates, {5} prunes expected".format(
        a.guests, a.nodes, len(files), len(expected["update"]), len(expected["create"]),
        len(expected["prune"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
