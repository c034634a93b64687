//! The configuration of graceful power and of PVE call retries: defaults,
//! the per-cluster overrides, and refusals that name their field.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use proxops_core::config::{Config, ConfigSource, ConfigSources, Overrides, load};
use proxops_core::diag::Diagnostic;
use proxops_core::names::ClusterName;
use proxops_core::step::PowerPolicy;

const HOME: &str = "    home:\n      base-url: https://pve1.example.org:8006\n";

/// `proxops.yaml` with `reconcile` and `pve` bodies (without the cluster,
/// which is added) loaded as the process file.
fn load_process(reconcile: &str, pve: &str, home_extra: &str) -> Result<Config, Vec<Diagnostic>> {
    let text = format!(
        "reconcile:\n  prune-budget: 3\n{reconcile}pve:\n{pve}  clusters:\n{HOME}{home_extra}"
    );
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

fn home(cfg: &Config) -> &proxops_core::config::ClusterConfig {
    cfg.clusters
        .get(&ClusterName::new("home").unwrap())
        .unwrap()
}

fn refused(reconcile: &str, pve: &str, home_extra: &str) -> Diagnostic {
    let diags = load_process(reconcile, pve, home_extra).err().unwrap();
    assert_eq!(diags.len(), 1, "{diags:?}");
    diags.into_iter().next().unwrap()
}

#[test]
fn guests_shut_down_within_180s_and_are_never_stopped_hard_by_default() {
    let cfg = load_process("", "", "").unwrap();
    let power = PowerPolicy::from_config(home(&cfg));
    assert_eq!(power.shutdown_timeout, Duration::from_secs(180));
    assert!(!power.force_stop_after_timeout);
    assert_eq!(cfg.retry_base.as_std(), Duration::from_secs(1));
    assert_eq!(cfg.retries, 3);
}

#[test]
fn a_cluster_overrides_the_process_wide_power_settings() {
    let cfg = load_process(
        "  shutdown-timeout: 5m\n  force-stop-after-timeout: true\n",
        "",
        "      shutdown-timeout: 90s\n      force-stop-after-timeout: false\n",
    )
    .unwrap();
    let power = PowerPolicy::from_config(home(&cfg));
    assert_eq!(power.shutdown_timeout, Duration::from_secs(90));
    assert!(!power.force_stop_after_timeout);
    let cfg = load_process(
        "  shutdown-timeout: 5m\n  force-stop-after-timeout: true\n",
        "",
        "",
    )
    .unwrap();
    let power = PowerPolicy::from_config(home(&cfg));
    assert_eq!(power.shutdown_timeout, Duration::from_secs(300));
    assert!(power.force_stop_after_timeout);
}

#[test]
fn a_shutdown_timeout_under_a_second_or_not_a_duration_is_refused_with_its_field() {
    let d = refused("  shutdown-timeout: 500ms\n", "", "");
    assert_eq!(d.field.as_deref(), Some("reconcile.shutdown-timeout"));
    assert!(d.message.contains("at least 1s"), "{d:?}");
    let d = refused("", "", "      shutdown-timeout: soon\n");
    assert_eq!(
        d.field.as_deref(),
        Some("pve.clusters.home.shutdown-timeout")
    );
    assert!(d.message.contains("invalid duration \"soon\""), "{d:?}");
}

#[test]
fn pve_retry_takes_a_base_and_a_count_within_bounds() {
    let cfg = load_process("", "  retry:\n    base: 5ms\n    retries: 1\n", "").unwrap();
    assert_eq!(cfg.retry_base.as_std(), Duration::from_millis(5));
    assert_eq!(cfg.retries, 1);
    let d = refused("", "  retry:\n    base: 0s\n", "");
    assert_eq!(d.field.as_deref(), Some("pve.retry.base"));
    let d = refused("", "  retry:\n    base: 1m\n", "");
    assert_eq!(d.field.as_deref(), Some("pve.retry.base"));
    let d = refused("", "  retry:\n    retries: 11\n", "");
    assert_eq!(d.field.as_deref(), Some("pve.retry.retries"));
    let d = load_process("", "  retry:\n    attempts: 3\n", "")
        .err()
        .unwrap();
    assert!(
        d.iter()
            .any(|d| d.field.as_deref() == Some("pve.retry.attempts")
                && d.message.contains("unknown field \"attempts\"")),
        "{d:?}"
    );
}

#[test]
fn a_failed_restart_holds_the_guest_5m_doubling_to_1h_by_default() {
    let cfg = load_process("", "", "").unwrap();
    assert_eq!(cfg.hold.first, Duration::from_secs(300));
    assert_eq!(cfg.hold.max, Duration::from_secs(3600));
    let cfg = load_process("  hold-after-failure: 2m\n  hold-max: 30m\n", "", "").unwrap();
    assert_eq!(cfg.hold.first, Duration::from_secs(120));
    assert_eq!(cfg.hold.max, Duration::from_secs(1800));
}

#[test]
fn hold_settings_are_refused_by_field() {
    let d = refused("  hold-after-failure: 0s\n", "", "");
    assert_eq!(
        d.field.as_deref(),
        Some("reconcile.hold-after-failure"),
        "{d}"
    );
    let d = refused("  hold-after-failure: 10m\n  hold-max: 5m\n", "", "");
    assert_eq!(d.field.as_deref(), Some("reconcile.hold-max"), "{d}");
    assert!(d.to_string().contains("must not be shorter"), "{d}");
    let d = refused("  hold-max: soon\n", "", "");
    assert_eq!(d.field.as_deref(), Some("reconcile.hold-max"), "{d}");
}
