//! The firewall's options, desired against live: which PVE key each
//! manifest option becomes, PVE's value when the key is absent, and the
//! changes with the form that writes them. An option the manifest leaves
//! out is not owned and never compared. Defaults are pve-firewall's
//! (`$cluster_option_properties`, `$vm_option_properties` and
//! `$default_log_level` in `src/PVE/Firewall.pm`).

use std::collections::BTreeMap;

use proxops_model::firewall::LogLevel;
use proxops_model::firewall::live::LiveOptions;
use proxops_model::firewall::spec::{
    ClusterOptions, ForwardPolicy, GuestOptions, LogRateLimit, Policy,
};

/// One owned option: its PVE key, the value PVE acts on when the key is
/// absent, and the desired value as PVE writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionRow {
    pub key: &'static str,
    pub default: String,
    pub want: String,
}

/// An option whose live value differs from the manifest's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionChange {
    pub key: &'static str,
    /// What PVE holds, or its default when the key is absent.
    pub live: String,
    pub want: String,
}

fn flag(b: bool) -> String {
    u8::from(b).to_string()
}

fn policy(p: Policy) -> String {
    match p {
        Policy::Accept => "ACCEPT",
        Policy::Reject => "REJECT",
        Policy::Drop => "DROP",
    }
    .to_string()
}

fn forward(p: ForwardPolicy) -> String {
    match p {
        ForwardPolicy::Accept => "ACCEPT",
        ForwardPolicy::Drop => "DROP",
    }
    .to_string()
}

fn level(l: LogLevel) -> String {
    l.as_str().to_string()
}

/// Rows for the options the manifest sets, from `(key, default, want)`.
fn rows(table: Vec<(&'static str, &str, Option<String>)>) -> Vec<OptionRow> {
    table
        .into_iter()
        .filter_map(|(key, default, want)| {
            want.map(|want| OptionRow {
                key,
                default: default.to_string(),
                want,
            })
        })
        .collect()
}

/// The cluster's owned options (`/cluster/firewall/options`).
pub fn cluster_rows(o: &ClusterOptions) -> Vec<OptionRow> {
    rows(vec![
        ("enable", "0", o.enable.map(flag)),
        ("policy_in", "DROP", o.policy_in.map(policy)),
        ("policy_out", "ACCEPT", o.policy_out.map(policy)),
        ("policy_forward", "ACCEPT", o.policy_forward.map(forward)),
        (
            "log_ratelimit",
            RATELIMIT_DEFAULT,
            o.log_ratelimit.as_ref().map(ratelimit),
        ),
        ("ebtables", "1", o.ebtables.map(flag)),
    ])
}

/// A guest's owned options (`…/{vmid}/firewall/options`).
pub fn guest_rows(o: &GuestOptions) -> Vec<OptionRow> {
    rows(vec![
        ("enable", "0", o.enable.map(flag)),
        ("policy_in", "DROP", o.policy_in.map(policy)),
        ("policy_out", "ACCEPT", o.policy_out.map(policy)),
        ("dhcp", "0", o.dhcp.map(flag)),
        ("ipfilter", "0", o.ipfilter.map(flag)),
        ("macfilter", "1", o.macfilter.map(flag)),
        ("ndp", "1", o.ndp.map(flag)),
        ("radv", "0", o.radv.map(flag)),
        ("log_level_in", "nolog", o.log_level_in.map(level)),
        ("log_level_out", "nolog", o.log_level_out.map(level)),
    ])
}

/// `log_ratelimit`'s defaults: `enable` (its default key) 1, `rate`
/// 1/second, `burst` 5.
const RATELIMIT_DEFAULT: &str = "enable=1,rate=1/second,burst=5";

/// The desired `log_ratelimit`, PVE's defaults for what it leaves out
/// (PVE replaces the whole value).
fn ratelimit(r: &LogRateLimit) -> String {
    format!(
        "enable={},rate={},burst={}",
        u8::from(r.enable.unwrap_or(true)),
        r.rate.as_deref().unwrap_or("1/second"),
        r.burst.unwrap_or(5)
    )
}

/// A `log_ratelimit` value as PVE reads it: a bare first value is
/// `enable` (`default_key`), absent parts take their defaults.
fn ratelimit_parts(value: &str) -> BTreeMap<String, String> {
    let mut parts: BTreeMap<String, String> =
        [("enable", "1"), ("rate", "1/second"), ("burst", "5")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    for (i, part) in value.split(',').filter(|p| !p.is_empty()).enumerate() {
        match part.split_once('=') {
            Some((k, v)) => parts.insert(k.trim().to_string(), v.trim().to_string()),
            None if i == 0 => parts.insert("enable".to_string(), part.trim().to_string()),
            None => None,
        };
    }
    parts
}

/// Whether PVE would act the same on both values of `key`.
fn same(key: &str, live: &str, want: &str) -> bool {
    match key {
        "log_ratelimit" => ratelimit_parts(live) == ratelimit_parts(want),
        _ => live == want,
    }
}

/// The options whose live value (or PVE's default) is not the desired one.
pub fn changes(rows: &[OptionRow], live: &LiveOptions) -> Vec<OptionChange> {
    rows.iter()
        .filter_map(|row| {
            let have = live.values.get(row.key).unwrap_or(&row.default);
            (!same(row.key, have, &row.want)).then(|| OptionChange {
                key: row.key,
                live: have.clone(),
                want: row.want.clone(),
            })
        })
        .collect()
}

/// The `PUT …/firewall/options` form of the changes, with the digest the
/// options were read with (PVE refuses a changed object:
/// `assert_if_modified` in `API2/Firewall/Cluster.pm` and `VM.pm`).
pub fn form(changes: &[OptionChange], digest: &str) -> Vec<(&'static str, String)> {
    let mut form: Vec<(&'static str, String)> =
        changes.iter().map(|c| (c.key, c.want.clone())).collect();
    form.push(("digest", digest.to_string()));
    form
}
