//! The limits on actions in flight and the disruption budget: defaults,
//! the per-cluster overrides, and refusals that name their field and line.

#![allow(clippy::unwrap_used)]

use proxops_core::config::{Config, ConfigSource, ConfigSources, Overrides, load};
use proxops_core::diag::Diagnostic;
use proxops_core::names::ClusterName;
use proxops_core::rollout;

const HOME: &str = "    home:\n      base-url: https://pve1.example.org:8006\n";

/// `proxops.yaml` with a `reconcile` body and extra keys for `home`.
fn load_process(reconcile: &str, home_extra: &str) -> Result<Config, Vec<Diagnostic>> {
    let text =
        format!("reconcile:\n  prune-budget: 3\n{reconcile}pve:\n  clusters:\n{HOME}{home_extra}");
    let sources = ConfigSources {
        process: Some(ConfigSource {
            name: "proxops.yaml".into(),
            bytes: text.as_bytes(),
        }),
        cluster_local: Vec::new(),
        process_is_explicit: false,
    };
    load(&sources, &Overrides::default())
}

fn home(cfg: &Config) -> &rollout::Limits {
    &cfg.clusters
        .get(&ClusterName::new("home").unwrap())
        .unwrap()
        .limits
}

#[test]
fn by_default_four_per_node_eight_per_cluster_two_downloads_and_one_guest_down() {
    let cfg = load_process("", "").unwrap();
    let l = home(&cfg);
    assert_eq!(
        (l.per_node, l.per_cluster, l.downloads_per_storage),
        (4, 8, 2)
    );
    assert_eq!(l.disruption.cluster, 1);
    assert_eq!(l.disruption.of_group("db"), 1);
}

#[test]
fn a_cluster_overrides_reconcile_and_adds_to_its_groups() {
    let cfg = load_process(
        "  tasks-per-node: 2\n  disruption-budget: 3\n  disruption-groups: {db: 1, web: 2}\n",
        "      tasks-per-node: 6\n      disruption-groups: {web: 3}\n",
    )
    .unwrap();
    let l = home(&cfg);
    assert_eq!(l.per_node, 6);
    assert_eq!(l.disruption.cluster, 3);
    assert_eq!(l.disruption.of_group("db"), 1);
    assert_eq!(l.disruption.of_group("web"), 3);
}

#[test]
fn a_limit_of_zero_is_refused_naming_the_field_and_line() {
    let diags = load_process("  tasks-per-node: 0\n", "").err().unwrap();
    assert_eq!(diags.len(), 1, "{diags:?}");
    let d = &diags[0];
    assert_eq!(d.field.as_deref(), Some("reconcile.tasks-per-node"));
    assert_eq!(d.line, Some(3));
    assert!(d.message.contains("tasks-per-node 0 must be 1-64"), "{d}");
}

#[test]
fn a_clusters_bad_group_budget_is_refused_naming_the_cluster() {
    let diags = load_process("", "      disruption-groups: {db: 0}\n")
        .err()
        .unwrap();
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(
        diags[0].message.contains("cluster \"home\"")
            && diags[0]
                .message
                .contains("disruption-groups.db 0 must be 1-64"),
        "{}",
        diags[0]
    );
}
