//! Which clusters a configuration runs, and how its layers merge, over
//! in-memory trees: a cluster-local `--config` file runs its own cluster
//! with `proxops.yaml` filling what it leaves unset; a URL-mode file runs
//! the clusters it declares; an allowlist violation alone is
//! `unknown_node`; an unresolved cloud-init reference is found before any
//! plan.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use proxops_core::config::{self, ConfigShape, ConfigSource, ConfigSources, Overrides};
use proxops_core::drift::{self, CloudInitSecrets};
use proxops_core::names::ClusterName;
use proxops_core::plan::AbortCause;
use proxops_core::repo::{self, Loaded, RepoInput};
use proxops_core::secret::Secret;
use proxops_core::units::Duration;

fn vm(name: &str, node: &str, vmid: u32, extra: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: {name}\nspec:\n  node: {node}\n  vmid: {vmid}\n  memory: 1GiB\n  cpu:\n    type: host\n    cores: 1\n  disks:\n    - storage: local-lvm\n      size: 8GiB\n  networks:\n    - bridge: vmbr0\n{extra}"
    )
}

fn cluster_file(name: &str) -> String {
    format!(
        "pve:\n  clusters:\n    {name}:\n      base-url: https://pve-{name}.example.org:8006\n      nodes: [pve1]\n"
    )
}

const PROCESS: &str = "log:\n  level: warn\nreconcile:\n  poll-interval: 45s\n  prune-budget: 1\nlisten: 127.0.0.1:9495\n";

/// Two clusters, `lab` and `prod`, each with one VM.
fn tree() -> BTreeMap<String, String> {
    let mut t = BTreeMap::new();
    t.insert("proxops.yaml".into(), PROCESS.into());
    for (c, id) in [("lab", 210), ("prod", 310)] {
        t.insert(format!("clusters/{c}/config.yaml"), cluster_file(c));
        t.insert(
            format!("clusters/{c}/resources.yaml"),
            format!("resources:\n  - ../../vm/{c}/app.yaml\n"),
        );
        t.insert(format!("vm/{c}/app.yaml"), vm("app", "pve1", id, ""));
    }
    t
}

fn load(
    tree: &BTreeMap<String, String>,
    explicit: Option<(&str, &str)>,
) -> Result<Loaded, Vec<String>> {
    let files: BTreeMap<String, Vec<u8>> = tree
        .iter()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    let dirs: BTreeSet<String> = tree
        .keys()
        .filter_map(|k| k.strip_prefix("clusters/"))
        .filter_map(|k| k.split_once('/').map(|(d, _)| d.to_owned()))
        .collect();
    repo::load(
        RepoInput {
            files: &files,
            cluster_dirs: &dirs,
        },
        explicit.map(|(name, text)| ConfigSource {
            name: name.into(),
            bytes: text.as_bytes(),
        }),
        &Overrides::default(),
    )
    .map_err(|d| d.iter().map(ToString::to_string).collect())
}

fn names(l: &Loaded) -> Vec<&str> {
    l.clusters.keys().map(ClusterName::as_str).collect()
}

#[test]
fn a_cluster_local_file_runs_its_cluster_with_proxops_yaml_underneath() {
    let mut t = tree();
    // Another cluster's broken files are another process's business.
    t.insert("clusters/prod/resources.yaml".into(), "resources: [".into());
    let lab = t["clusters/lab/config.yaml"].clone();
    let l = load(&t, Some(("clusters/lab/config.yaml", &lab))).unwrap();
    assert_eq!(names(&l), ["lab"]);
    assert!(l.clusters.values().all(Result::is_ok));
    assert_eq!(l.config.prune_budget, 1);
    assert_eq!(l.config.poll_interval, Duration::from_secs(45));
    assert_eq!(l.config.listen, "127.0.0.1:9495");
    assert_eq!(l.config.log_level, "warn");
    // Manifests only prod lists are not reported as unlisted.
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
}

#[test]
fn what_the_cluster_file_sets_wins_key_by_key() {
    let t = tree();
    let lab = format!(
        "reconcile:\n  prune-budget: 3\n{}",
        t["clusters/lab/config.yaml"]
    );
    let l = load(&t, Some(("clusters/lab/config.yaml", &lab))).unwrap();
    // Set to the built-in default, and still the file's.
    assert_eq!(l.config.prune_budget, 3);
    // Same section, a key the file does not set: proxops.yaml's.
    assert_eq!(l.config.poll_interval, Duration::from_secs(45));
}

#[test]
fn proxops_yaml_adds_no_cluster_and_no_git_source_under_a_cluster_file() {
    let mut t = tree();
    t.insert(
        "proxops.yaml".into(),
        format!(
            "{PROCESS}git:\n  url: https://git.example.org/infra.git\npve:\n  auth: token\n  clusters:\n    extra:\n      base-url: https://pve-extra.example.org:8006\n"
        ),
    );
    let lab = t["clusters/lab/config.yaml"].clone();
    let l = load(&t, Some(("clusters/lab/config.yaml", &lab))).unwrap();
    assert_eq!(names(&l), ["lab"]);
    assert_eq!(l.config.git_url, None);
}

#[test]
fn a_bad_value_proxops_yaml_fills_in_names_proxops_yaml_and_its_line() {
    let mut t = tree();
    t.insert(
        "proxops.yaml".into(),
        PROCESS.replace("prune-budget: 1", "prune-budget: -2"),
    );
    let lab = t["clusters/lab/config.yaml"].clone();
    let errs = load(&t, Some(("clusters/lab/config.yaml", &lab)))
        .err()
        .unwrap();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("proxops.yaml:5:3: reconcile.prune-budget: "),
        "{errs:?}"
    );
}

#[test]
fn without_config_every_cluster_of_the_tree_runs() {
    let l = load(&tree(), None).unwrap();
    assert_eq!(names(&l), ["lab", "prod"]);
}

#[test]
fn url_mode_runs_the_declared_clusters_and_names_an_undeclared_composition() {
    let mut t = tree();
    for c in ["lab", "prod"] {
        t.remove(&format!("clusters/{c}/config.yaml"));
    }
    let both = "git:\n  url: https://git.example.org/infra.git\npve:\n  clusters:\n    lab:\n      base-url: https://a.example.org:8006\n    prod:\n      base-url: https://b.example.org:8006\n";
    let l = load(&t, Some(("/etc/proxops/proxops.yaml", both))).unwrap();
    assert_eq!(names(&l), ["lab", "prod"]);

    // The fetched tree's own cluster file declares nothing in URL mode.
    t.insert("clusters/prod/config.yaml".into(), cluster_file("prod"));
    let lab_only = "git:\n  url: https://git.example.org/infra.git\npve:\n  clusters:\n    lab:\n      base-url: https://a.example.org:8006\n";
    let errs = load(&t, Some(("/etc/proxops/proxops.yaml", lab_only)))
        .err()
        .unwrap();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("clusters/prod/: composition directory \"prod\" is not a cluster the URL-mode configuration declares: declare pve.clusters.prod in /etc/proxops/proxops.yaml"),
        "{errs:?}"
    );
}

#[test]
fn the_shape_of_a_config_file_decides_its_role() {
    let shape = |text: &str| {
        ConfigShape::of(&ConfigSource {
            name: "f.yaml".into(),
            bytes: text.as_bytes(),
        })
    };
    assert!(shape(&cluster_file("lab")).is_cluster_local());
    assert!(!shape(PROCESS).is_cluster_local());
    let url = shape(&format!(
        "git:\n  url: https://g.example.org/r.git\n{}",
        cluster_file("lab")
    ));
    assert!(url.git_url && !url.is_cluster_local());
    assert_eq!(
        shape("git:\n  path: \".\"\n").git_path.as_deref(),
        Some(".")
    );
    assert_eq!(shape("not: [valid"), ConfigShape::default());
}

#[test]
fn load_without_a_file_underneath_is_load_over_none() {
    let top = cluster_file("lab");
    let sources = ConfigSources {
        process: Some(ConfigSource {
            name: "clusters/lab/config.yaml".into(),
            bytes: top.as_bytes(),
        }),
        cluster_local: Vec::new(),
        process_is_explicit: true,
    };
    let a = config::load(&sources, &Overrides::default()).unwrap();
    assert_eq!(a.prune_budget, config::DEFAULT_PRUNE_BUDGET);
    let base = ConfigSource {
        name: "proxops.yaml".into(),
        bytes: PROCESS.as_bytes(),
    };
    let b = config::load_over(&sources, Some(&base), &Overrides::default()).unwrap();
    assert_eq!(b.prune_budget, 1);
}

#[test]
fn a_node_outside_the_allowlist_alone_is_unknown_node() {
    let mut t = tree();
    t.insert("vm/lab/app.yaml".into(), vm("app", "pve9", 210, ""));
    let l = load(&t, None).unwrap();
    let lab = ClusterName::new("lab").unwrap();
    let prod = ClusterName::new("prod").unwrap();
    assert!(l.clusters[&lab].is_err());
    assert_eq!(l.refusal_cause(&lab), AbortCause::UnknownNode);
    assert!(l.clusters[&prod].is_ok());

    // With another problem beside it, the cluster's input is invalid.
    t.insert(
        "vm/lab/app.yaml".into(),
        vm("app", "pve9", 210, "").replace("memory: 1GiB", "memory: lots"),
    );
    t.insert(
        "clusters/lab/resources.yaml".into(),
        "resources:\n  - ../../vm/lab/app.yaml\n  - ../../vm/lab/db.yaml\n".into(),
    );
    t.insert("vm/lab/db.yaml".into(), vm("db", "pve9", 211, ""));
    let l = load(&t, None).unwrap();
    assert_eq!(l.refusal_cause(&lab), AbortCause::InvalidInput);

    // A problem of another kind alone is invalid input too.
    let mut t = tree();
    t.insert(
        "vm/lab/app.yaml".into(),
        vm("app", "pve1", 210, "").replace("memory: 1GiB", "memory: lots"),
    );
    let l = load(&t, None).unwrap();
    assert_eq!(l.refusal_cause(&lab), AbortCause::InvalidInput);
}

/// A VM `app` in cluster `lab` referencing two SOPS keys and a password.
fn repo_with_cloud_init_refs() -> BTreeMap<String, String> {
    let mut t = tree();
    t.insert(
        "vm/lab/app.yaml".into(),
        vm(
            "app",
            "pve1",
            210,
            "  hardware:\n    cloud-init:\n      enabled: true\n      storage: local-lvm\n  cloud-init-data:\n    ssh-key-refs: [cloud-init.ssh-keys.main, cloud-init.ssh-keys.spare]\n    ci-password-ref: cloud-init.passwords.default\n",
        ),
    );
    t
}

#[test]
fn every_cloud_init_reference_the_secrets_lack_is_named_without_a_value() {
    let t = repo_with_cloud_init_refs();
    let l = load(&t, None).unwrap();
    let lab = l.clusters[&ClusterName::new("lab").unwrap()]
        .as_ref()
        .unwrap();
    let mut secrets = CloudInitSecrets::default();
    secrets.ssh_keys.insert(
        "main".into(),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGRlbW8tb3BzLWxhcHRvcC1rZXktZm9yLXByb3hvcHMh ops@host"
            .into(),
    );
    secrets
        .passwords
        .insert("default".into(), Secret::new("pa55-Word-7"));
    let missing: Vec<String> = drift::unresolved_secrets(lab, &secrets)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        missing,
        [
            "vm/lab/app.yaml: spec.cloud-init-data.ssh-key-refs[1]: VM/app: secret \"cloud-init.ssh-keys.spare\" is missing or empty in the cluster's SOPS file (cloud-init section): the cluster does nothing this cycle"
        ]
    );
    secrets.passwords.insert("default".into(), Secret::new(""));
    secrets.ssh_keys.insert(
        "spare".into(),
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRydXN0ZWQtY2kta2V5LWZvci10ZXN0cy1vbmx5LSEh ops@host"
            .into(),
    );
    let missing = drift::unresolved_secrets(lab, &secrets);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert_eq!(
        missing[0].field.as_deref(),
        Some("spec.cloud-init-data.ci-password-ref")
    );
    assert!(!format!("{missing:?}").contains("ops@host"));
    secrets
        .passwords
        .insert("default".into(), Secret::new("pa55-Word-7"));
    assert!(drift::unresolved_secrets(lab, &secrets).is_empty());
}

#[test]
fn a_sops_ssh_key_pve_could_not_read_refuses_the_cluster() {
    // qemu-server `API2/Qemu.pm` `$check_sshkeys`: PVE reads each key with
    // `ssh-keygen -l` and refuses the whole write for one it cannot read,
    // which left a clone with its template's config.
    let t = repo_with_cloud_init_refs();
    let l = load(&t, None).unwrap();
    let lab = l.clusters[&ClusterName::new("lab").unwrap()]
        .as_ref()
        .unwrap();
    let mut secrets = CloudInitSecrets::default();
    for name in ["main", "spare"] {
        secrets.ssh_keys.insert(
            name.into(),
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFQ0bU9pZ3l0c1Z0a2VlcG1lc2VjcmV0cGxlYXNl ops@host"
                .into(),
        );
    }
    secrets
        .passwords
        .insert("default".into(), Secret::new("pa55-Word-7"));
    let refused = drift::unresolved_secrets(lab, &secrets);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0]
            .to_string()
            .contains("not a public key PVE reads")
    );
}
