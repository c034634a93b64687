//! `proxops init`: the files of a new repository for one cluster — the
//! process settings, the cluster's configuration and composition, one
//! example manifest of every kind (each listed, so `validate` and a first
//! `diff` read them all), a `.gitignore` and a `.sops.yaml`.
//!
//! Must never: produce a repository `validate` refuses (a test validates
//! it), or a secret. Writes nothing itself: the binary does, into an empty
//! directory only.

use proxops_model::names::ClusterName;

/// Every file of the scaffold for `cluster`: (repository-relative path,
/// text), in the order they are written and reported.
pub fn scaffold(cluster: &ClusterName) -> Vec<(String, String)> {
    let c = cluster.as_str();
    let mut files = vec![
        ("proxops.yaml".to_owned(), PROXOPS_YAML.to_owned()),
        (
            format!("clusters/{c}/config.yaml"),
            CONFIG_YAML.replace("{cluster}", c),
        ),
    ];
    let mut resources = String::from(
        "# Every manifest this cluster reconciles, relative to this directory.\n\
         # A manifest that is not listed here is not read (validate warns).\n\
         resources:\n",
    );
    for (dir, name, text) in MANIFESTS {
        let path = format!("{dir}/{c}/{name}.yaml");
        resources.push_str(&format!("  - ../../{path}\n"));
        files.push((path, (*text).to_owned()));
    }
    files.push((format!("clusters/{c}/resources.yaml"), resources));
    files.push((".gitignore".to_owned(), GITIGNORE.to_owned()));
    files.push((".sops.yaml".to_owned(), SOPS_YAML.to_owned()));
    files
}

const PROXOPS_YAML: &str = "\
# Process-wide settings (docs/configuration.md). Each cluster is declared in
# clusters/<name>/config.yaml.
log:
  level: info
reconcile:
  poll-interval: 60s
  prune-budget: 3
listen: 127.0.0.1:9494
";

const CONFIG_YAML: &str = "\
# The cluster's PVE (docs/configuration.md). Credentials are never written
# here: PROXOPS_PVE_TOKEN / PROXOPS_PVE_TOKEN_VALUE, or a SOPS file named by
# secrets-file (docs/credentials.md).
pve:
  clusters:
    {cluster}:
      base-url: https://pve.example.org:8006
      nodes: [pve1]
";

const GITIGNORE: &str = "\
# Never commit an age private key or a decrypted secrets file.
age-key.txt
*.agekey
*.dec.yaml
# Saved plans (proxops diff --out) and recordings are artifacts, not desired state.
*.plan.json
recordings/
";

const SOPS_YAML: &str = "\
# sops encrypts each cluster's secrets file to these age recipients
# (docs/credentials.md). Replace the recipient with your own public key:
#   age-keygen -o age-key.txt && age-keygen -y age-key.txt
creation_rules:
  - path_regex: clusters/[^/]+/secrets\\.sops\\.yaml$
    age: age1replacewithyourownpublickeyxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
";

/// (kind directory, `metadata.name`, manifest) of each example.
const MANIFESTS: &[(&str, &str, &str)] = &[
    (
        "iso",
        "debian-13-netinst",
        "\
# An installer ISO, downloaded to the node's storage (docs/resources/iso.md).
apiVersion: proxops/v1alpha1
kind: ISO
metadata:
  name: debian-13-netinst
spec:
  nodes: [pve1]
  storage: local
  filename: debian-13.1.0-amd64-netinst.iso
  url: https://cdimage.debian.org/debian-cd/current/amd64/iso-cd/debian-13.1.0-amd64-netinst.iso
",
    ),
    (
        "ctt",
        "debian-13-standard",
        "\
# A container template for LXC guests (docs/resources/cttemplate.md).
apiVersion: proxops/v1alpha1
kind: CTTemplate
metadata:
  name: debian-13-standard
spec:
  nodes: [pve1]
  storage: local
  filename: debian-13-standard_13.1-2_amd64.tar.zst
  url: http://download.proxmox.com/images/system/debian-13-standard_13.1-2_amd64.tar.zst
",
    ),
    (
        "diskimage",
        "debian-13-genericcloud",
        "\
# A cloud image VM disks are imported from (docs/resources/diskimage.md).
apiVersion: proxops/v1alpha1
kind: DiskImage
metadata:
  name: debian-13-genericcloud
spec:
  nodes: [pve1]
  storage: local
  filename: debian-13-genericcloud-amd64.qcow2
  url: https://cloud.debian.org/images/cloud/trixie/latest/debian-13-genericcloud-amd64.qcow2
",
    ),
    (
        "templatevm",
        "debian-13-cloud",
        "\
# A VM template built from the cloud image (docs/resources/templatevm.md).
apiVersion: proxops/v1alpha1
kind: TemplateVM
metadata:
  name: debian-13-cloud
spec:
  node: pve1
  vmid: 9000
  memory: 2GiB
  cpu:
    type: x86-64-v2-AES
    cores: 2
  disks:
    - storage: local-lvm
      image: debian-13-genericcloud
  networks:
    - bridge: vmbr0
  hardware:
    cloud-init:
      enabled: true
      storage: local-lvm
",
    ),
    (
        "vm",
        "web-01",
        "\
# A VM cloned from the template (docs/resources/vm.md).
apiVersion: proxops/v1alpha1
kind: VM
metadata:
  name: web-01
spec:
  node: pve1
  vmid: 101
  clone: debian-13-cloud
  pool: web
  memory: 2GiB
  cpu:
    type: x86-64-v2-AES
    cores: 2
  networks:
    - bridge: vmbr0
  cloud-init-data:
    ci-user: ops
    ipconfigs:
      - nic: 0
        ip: dhcp
  tags: [web]
",
    ),
    (
        "templatect",
        "ct-base",
        "\
# A container template guest (docs/resources/templatect.md).
apiVersion: proxops/v1alpha1
kind: TemplateCT
metadata:
  name: ct-base
spec:
  node: pve1
  vmid: 9100
  template: debian-13-standard
  memory: 512MiB
  cpu:
    cores: 1
  root:
    storage: local-lvm
    size: 4GiB
  networks:
    - bridge: vmbr0
      ip: dhcp
  options:
    unprivileged: true
",
    ),
    (
        "lxc",
        "dns-01",
        "\
# A container (docs/resources/lxc.md).
apiVersion: proxops/v1alpha1
kind: LXC
metadata:
  name: dns-01
spec:
  node: pve1
  vmid: 201
  template: debian-13-standard
  memory: 512MiB
  cpu:
    cores: 1
  root:
    storage: local-lvm
    size: 8GiB
  networks:
    - bridge: vmbr0
      ip: dhcp
  dns:
    hostname: dns-01
  options:
    unprivileged: true
",
    ),
    (
        "pool",
        "web",
        "\
# A resource pool; a guest joins it with spec.pool: web (docs/resources/pool.md).
apiVersion: proxops/v1alpha1
kind: Pool
metadata:
  name: web
spec:
  comment: Web tier
",
    ),
    (
        "backupjob",
        "nightly",
        "\
# A backup job of two guests (docs/resources/backupjob.md).
apiVersion: proxops/v1alpha1
kind: BackupJob
metadata:
  name: nightly
spec:
  schedule: \"mon..fri 21:00\"
  storage: local
  guests: [web-01, \"LXC:dns-01\"]
  mode: snapshot
  retention: {keep-last: 3}
",
    ),
    (
        "haresource",
        "web-01-ha",
        "\
# web-01 under the HA manager (docs/resources/haresource.md).
apiVersion: proxops/v1alpha1
kind: HAResource
metadata:
  name: web-01-ha
spec:
  guest: web-01
  max-restart: 2
",
    ),
    (
        "harule",
        "web-on-pve1",
        "\
# Where the HA manager runs web-01: on pve1 (docs/resources/harule.md).
# A replication job (docs/resources/replicationjob.md) needs a guest on
# ZFS storage and a second node, so it is not among these examples.
apiVersion: proxops/v1alpha1
kind: HARule
metadata:
  name: web-on-pve1
spec:
  type: node-affinity
  resources: [web-01-ha]
  nodes: [pve1]
",
    ),
];
