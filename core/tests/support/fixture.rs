//! Small in-memory repositories and live guests for drift tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proxops_core::config::Overrides;
use proxops_core::diag::Diagnostic;
use proxops_core::drift::{CloudInitSecrets, Context, Drift, guest_drift};
use proxops_core::live::{GuestType, LiveConfig, LiveGuest, Power};
use proxops_core::names::{NodeName, Vmid};
use proxops_core::repo::{self, ClusterDesired, DesiredObject, RepoInput};

/// The artifacts every test cluster has: an ISO `debian-iso`, a DiskImage
/// `debian-cloud` and a CTTemplate `debian-ct`, all on `local`.
const ARTIFACTS: &[&str] = &[
    "apiVersion: proxops/v1alpha1\nkind: ISO\nmetadata:\n  name: debian-iso\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: debian-13.iso\n  url: https://example.org/debian-13.iso\n",
    "apiVersion: proxops/v1alpha1\nkind: DiskImage\nmetadata:\n  name: debian-cloud\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: debian-13.qcow2\n  url: https://example.org/debian-13.qcow2\n",
    "apiVersion: proxops/v1alpha1\nkind: CTTemplate\nmetadata:\n  name: debian-ct\nspec:\n  nodes: [pve1]\n  storage: local\n  filename: debian-13-standard.tar.zst\n  url: https://example.org/debian-13-standard.tar.zst\n",
];

fn field<'a>(doc: &'a str, key: &str) -> &'a str {
    doc.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .map(str::trim)
        .expect("manifest without kind/name")
}

/// One cluster `t` on node `pve1` holding the artifacts plus `manifests`
/// (full YAML documents), loaded and validated like a real repository.
pub fn cluster(manifests: &[&str]) -> ClusterDesired {
    match load_cluster("", manifests) {
        Ok(c) => c,
        Err(d) => panic!("cluster refused: {d:#?}"),
    }
}

/// `cluster`, with `config_extra` (lines indented for the cluster entry,
/// e.g. `"      tag-style: case-sensitive\n"`) in its configuration; the
/// diagnostics when the repository is refused.
pub fn load_cluster(
    config_extra: &str,
    manifests: &[&str],
) -> Result<ClusterDesired, Vec<Diagnostic>> {
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    files.insert(
        "clusters/t/config.yaml".into(),
        format!("pve:\n  clusters:\n    t:\n      base-url: https://pve.example.org:8006\n      nodes: [pve1]\n{config_extra}").into_bytes(),
    );
    let mut listed = Vec::new();
    for doc in ARTIFACTS.iter().chain(manifests) {
        let kind = field(doc, "kind:").to_ascii_lowercase();
        let dir = match kind.as_str() {
            "cttemplate" => "ctt".to_owned(),
            k => k.to_owned(),
        };
        let path = format!("{dir}/t/{}.yaml", field(doc, "name:"));
        listed.push(format!("  - ../../{path}\n"));
        files.insert(path, doc.as_bytes().to_vec());
    }
    files.insert(
        "clusters/t/resources.yaml".into(),
        format!("resources:\n{}", listed.concat()).into_bytes(),
    );
    load_files(&files)
}

/// The one cluster `t` of a repository given as its files.
pub fn load_files(files: &BTreeMap<String, Vec<u8>>) -> Result<ClusterDesired, Vec<Diagnostic>> {
    let dirs: BTreeSet<String> = ["t".to_owned()].into();
    let loaded = repo::load(
        RepoInput {
            files,
            cluster_dirs: &dirs,
        },
        None,
        &Overrides::default(),
    )?;
    loaded.clusters.into_values().next().unwrap()
}

/// `base` with the keys of `extra` set (a `null` removes the key).
pub fn with(mut base: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    for (k, v) in extra.as_object().unwrap() {
        if v.is_null() {
            base.as_object_mut().unwrap().remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

pub fn object<'a>(c: &'a ClusterDesired, name: &str) -> &'a DesiredObject {
    c.objects
        .values()
        .find(|o| o.metadata.name.as_str() == name)
        .unwrap_or_else(|| panic!("no object {name}"))
}

/// A live config from a JSON object, as the PVE reader would build it.
pub fn config(json: serde_json::Value) -> LiveConfig {
    LiveConfig::from_json(&json).unwrap()
}

pub fn live(guest_type: GuestType, vmid: u64, power: Power, cfg: &LiveConfig) -> LiveGuest {
    LiveGuest {
        node: NodeName::new("pve1").unwrap(),
        vmid: Vmid::new(vmid).unwrap(),
        guest_type,
        name: cfg
            .get("name")
            .or(cfg.get("hostname"))
            .unwrap_or("")
            .to_owned(),
        template: cfg.is_template().unwrap_or(false),
        power,
        lock: None,
        ha_state: None,
        tags: cfg.tags().unwrap_or_default(),
        config: Ok(cfg.clone()),
    }
}

/// Drift of object `name` against `cfg` with the given power and secrets.
pub fn drift_with(
    c: &ClusterDesired,
    secrets: &CloudInitSecrets,
    name: &str,
    power: Power,
    cfg: &LiveConfig,
) -> Drift {
    let o = object(c, name);
    let gt = if o.r#ref.kind.is_qemu() {
        GuestType::Qemu
    } else {
        GuestType::Lxc
    };
    let (_, vmid) = o.spec.guest_id().unwrap();
    let g = live(gt, u64::from(vmid.get()), power, cfg);
    guest_drift(
        o,
        &Context {
            cluster: c,
            secrets,
        },
        &g,
        cfg,
    )
    .unwrap()
}

pub fn drift(c: &ClusterDesired, name: &str, power: Power, cfg: &LiveConfig) -> Drift {
    drift_with(c, &CloudInitSecrets::default(), name, power, cfg)
}

/// The changed keys of a drift, in order.
pub fn keys(d: &Drift) -> Vec<&str> {
    d.changes.iter().map(|c| c.field.as_str()).collect()
}

pub fn param<'a>(d: &'a Drift, key: &str) -> Option<&'a str> {
    d.params.get(key).map(|v| v.expose())
}
