//! The firewall as a manifest writes it: the cluster's options and rules,
//! its aliases, IP sets and security groups, and a guest's
//! `spec.firewall`. These are the shapes docs/resources/firewall.md
//! describes; the rules one document alone must follow are `check_*`
//! here, each error at its field path; what a manifest names across the
//! repository is checked by `crate::firewall_repo`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::grammar::{
    LogLevel, MAX_ALIAS_LEN, MAX_GROUP_LEN, MAX_IPSET_LEN, ip_or_cidr, is_object_name,
    stored_ipset_cidr,
};
use super::refs::Known;
use super::rule::{RawRule, Rule, RuleEnv};
use crate::diag::FieldError;

/// What a chain does with traffic no rule decided (`policy_in`,
/// `policy_out`: `ACCEPT`, `REJECT` or `DROP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Policy {
    Accept,
    Reject,
    Drop,
}

/// The forward chain's policy (`policy_forward`: `ACCEPT` or `DROP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum ForwardPolicy {
    Accept,
    Drop,
}

/// A port list as YAML may write it: `22` or `"80,443"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum PortText {
    Number(u32),
    Text(String),
}

impl PortText {
    fn text(&self) -> String {
        match self {
            PortText::Number(n) => n.to_string(),
            PortText::Text(s) => s.clone(),
        }
    }
}

/// One rule, by the field names of PVE's rules API.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RuleSpec {
    /// `in`, `out`, `forward` (cluster and security groups only) or
    /// `group` (the rules of a security group, named by `action`).
    #[schemars(extend("x-pve-key" = "type", "x-default" = "— (required)", "x-impact" = "live"))]
    #[serde(rename = "type")]
    pub rule_type: String,
    /// `ACCEPT`, `DROP` or `REJECT`; for `type: group`, the group's name.
    #[schemars(extend("x-pve-key" = "action", "x-default" = "— (required)", "x-impact" = "live"))]
    pub action: String,
    /// Absent: enabled (PVE's API would create it disabled; ProxOps
    /// always sends it).
    #[schemars(extend("x-pve-key" = "enable", "x-default" = "true", "x-impact" = "live"))]
    pub enable: Option<bool>,
    /// One of PVE's macros (`SSH`, `HTTPS`, …), any case.
    #[schemars(extend("x-pve-key" = "macro", "x-default" = "none", "x-impact" = "live"))]
    #[serde(rename = "macro")]
    pub macro_name: Option<String>,
    /// An interface: `netN` on a guest, any name on the cluster; not in a
    /// security group.
    #[schemars(extend("x-pve-key" = "iface", "x-default" = "none", "x-impact" = "live"))]
    pub iface: Option<String>,
    /// Addresses, a network, a range, `+ipset`, `+dc/ipset`,
    /// `+guest/ipset`, `alias`, `dc/alias` or `guest/alias`.
    #[schemars(extend("x-pve-key" = "source", "x-default" = "none", "x-impact" = "live"))]
    pub source: Option<String>,
    /// As `source`.
    #[schemars(extend("x-pve-key" = "dest", "x-default" = "none", "x-impact" = "live"))]
    pub dest: Option<String>,
    /// A protocol name or number of `/etc/protocols`, or `icmpv6`.
    #[schemars(extend("x-pve-key" = "proto", "x-default" = "none", "x-impact" = "live"))]
    pub proto: Option<String>,
    /// Ports, ranges (`8000:8100`) or service names, comma-separated;
    /// needs `proto`.
    #[schemars(extend("x-pve-key" = "dport", "x-default" = "none", "x-impact" = "live"))]
    pub dport: Option<PortText>,
    /// As `dport`.
    #[schemars(extend("x-pve-key" = "sport", "x-default" = "none", "x-impact" = "live"))]
    pub sport: Option<PortText>,
    /// A log level (`info`, `nolog`, …).
    #[schemars(extend("x-pve-key" = "log", "x-default" = "none", "x-impact" = "live"))]
    pub log: Option<LogLevel>,
    /// An ICMP type name, with `proto: icmp`, `icmpv6` or `ipv6-icmp`.
    #[schemars(extend("x-pve-key" = "icmp-type", "x-default" = "none", "x-impact" = "live"))]
    pub icmp_type: Option<String>,
    /// One line of free text, trimmed.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none", "x-impact" = "live"))]
    pub comment: Option<String>,
}

impl RuleSpec {
    /// The manifest form of a checked rule, as adoption writes it: ports
    /// as text, `enable` only when off.
    pub fn from_rule(rule: &Rule) -> RuleSpec {
        let text = |v: Option<String>| v.map(PortText::Text);
        RuleSpec {
            rule_type: rule.head.pve_type().to_string(),
            action: rule.head.action().to_string(),
            enable: (!rule.enable).then_some(false),
            macro_name: rule.macro_name.clone(),
            iface: rule.iface.clone(),
            source: rule.source.as_ref().map(ToString::to_string),
            dest: rule.dest.as_ref().map(ToString::to_string),
            proto: rule.proto.as_ref().map(ToString::to_string),
            dport: text(rule.dport.as_ref().map(ToString::to_string)),
            sport: text(rule.sport.as_ref().map(ToString::to_string)),
            log: rule.log,
            icmp_type: rule.icmp_type.clone(),
            comment: rule.comment.clone(),
        }
    }

    pub(crate) fn raw(&self) -> RawRule {
        RawRule {
            rule_type: self.rule_type.clone(),
            action: self.action.clone(),
            enable: self.enable.unwrap_or(true),
            macro_name: self.macro_name.clone(),
            iface: self.iface.clone(),
            source: self.source.clone(),
            dest: self.dest.clone(),
            proto: self.proto.clone(),
            dport: self.dport.as_ref().map(PortText::text),
            sport: self.sport.as_ref().map(PortText::text),
            log: self.log.map(|l| l.as_str().to_string()),
            icmp_type: self.icmp_type.clone(),
            comment: self.comment.clone(),
        }
    }
}

/// `log_ratelimit` of the cluster's options.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LogRateLimit {
    /// Absent: PVE's default, on.
    #[schemars(extend("x-pve-key" = "log_ratelimit: enable", "x-default" = "true", "x-impact" = "live"))]
    pub enable: Option<bool>,
    /// `<n>/second|minute|hour|day` (PVE: `1/second`).
    #[schemars(extend("x-pve-key" = "log_ratelimit: rate", "x-default" = "1/second", "x-impact" = "live"))]
    pub rate: Option<String>,
    /// Packets logged before the rate applies (PVE: 5).
    #[schemars(extend("x-pve-key" = "log_ratelimit: burst", "x-default" = "5", "x-impact" = "live"))]
    pub burst: Option<u32>,
}

/// The cluster's firewall options (`/cluster/firewall/options`). An
/// absent field is not owned: PVE's value stays.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClusterOptions {
    /// The firewall on every node (PVE: off).
    #[schemars(extend("x-pve-key" = "enable", "x-default" = "not managed (PVE: off)", "x-impact" = "live"))]
    pub enable: Option<bool>,
    /// What incoming traffic no rule decided meets (PVE: `DROP`).
    #[schemars(extend("x-pve-key" = "policy_in", "x-default" = "not managed (PVE: DROP)", "x-impact" = "live"))]
    pub policy_in: Option<Policy>,
    /// What outgoing traffic no rule decided meets (PVE: `ACCEPT`).
    #[schemars(extend("x-pve-key" = "policy_out", "x-default" = "not managed (PVE: ACCEPT)", "x-impact" = "live"))]
    pub policy_out: Option<Policy>,
    /// What forwarded traffic no rule decided meets (PVE: `ACCEPT`).
    #[schemars(extend("x-pve-key" = "policy_forward", "x-default" = "not managed (PVE: ACCEPT)", "x-impact" = "live"))]
    pub policy_forward: Option<ForwardPolicy>,
    /// How many log lines the firewall writes; PVE replaces the whole
    /// value, so a field left out is PVE's default.
    #[schemars(extend("x-pve-key" = "log_ratelimit", "x-default" = "not managed (PVE: enable=1,rate=1/second,burst=5)", "x-impact" = "live"))]
    pub log_ratelimit: Option<LogRateLimit>,
    /// Bridge-level filtering (PVE: on).
    #[schemars(extend("x-pve-key" = "ebtables", "x-default" = "not managed (PVE: on)", "x-impact" = "live"))]
    pub ebtables: Option<bool>,
}

/// The cluster's own rule list and options (one per cluster).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ClusterFirewallSpec {
    /// The cluster's firewall options; an absent one is not owned.
    #[schemars(extend("x-pve-key" = "/cluster/firewall/options", "x-default" = "not managed", "x-impact" = "live"))]
    #[serde(default)]
    pub options: ClusterOptions,
    /// The cluster's rule list, in order: the first rule that matches
    /// decides. A rule added by hand is drift.
    #[schemars(extend("x-pve-key" = "/cluster/firewall/rules", "x-default" = "no rules", "x-impact" = "live"))]
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
}

/// An alias: a name for an address or network.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct AliasSpec {
    /// The alias's name, when it is not `metadata.name` (on a guest:
    /// required). A letter, then letters, digits, `-` and `_`, at most 64
    /// characters; unique ignoring case.
    #[schemars(extend("x-pve-key" = "name", "x-default" = "metadata.name", "x-impact" = "live"))]
    pub name: Option<String>,
    /// An address or a network (`10.0.0.0/8`).
    #[schemars(extend("x-pve-key" = "cidr", "x-default" = "— (required)", "x-impact" = "live"))]
    pub cidr: String,
    /// Free text shown in PVE.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none", "x-impact" = "live"))]
    pub comment: Option<String>,
}

/// One entry of an IP set.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct IpSetEntry {
    /// An address, a network or an alias's name (`dc/name` for the
    /// cluster's).
    #[schemars(extend("x-pve-key" = "cidr", "x-default" = "— (required)", "x-impact" = "live"))]
    pub cidr: String,
    /// Excluded from the set rather than in it.
    #[schemars(extend("x-pve-key" = "nomatch", "x-default" = "false", "x-impact" = "live"))]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nomatch: bool,
    /// Free text shown in PVE.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none", "x-impact" = "live"))]
    pub comment: Option<String>,
}

/// An IP set: a named set of addresses and networks.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct IpSetSpec {
    /// The set's name, when it is not `metadata.name` (on a guest:
    /// required; `ipfilter-netN` is the set `ipfilter` admits on `netN`).
    /// A letter, then letters, digits, `-` and `_`, at most 64
    /// characters; PVE keeps it lower case.
    #[schemars(extend("x-pve-key" = "name", "x-default" = "metadata.name", "x-impact" = "live"))]
    pub name: Option<String>,
    /// Free text shown in PVE.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none", "x-impact" = "live"))]
    pub comment: Option<String>,
    /// The set's addresses, networks and aliases; an entry added by hand
    /// is drift.
    #[schemars(extend("x-pve-key" = "…/ipset/{name}", "x-default" = "no entries", "x-impact" = "live"))]
    #[serde(default)]
    pub entries: Vec<IpSetEntry>,
}

/// A security group: a named rule list that rules include with
/// `type: group`.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SecurityGroupSpec {
    /// The group's name, when it is not `metadata.name`: a letter, then
    /// letters, digits, `-` and `_`, at most 18 characters; PVE keeps it
    /// lower case.
    #[schemars(extend("x-pve-key" = "group", "x-default" = "metadata.name", "x-impact" = "live"))]
    pub name: Option<String>,
    /// Free text shown in PVE.
    #[schemars(extend("x-pve-key" = "comment", "x-default" = "none", "x-impact" = "live"))]
    pub comment: Option<String>,
    /// The group's rules, in order (no `group` rules, no `iface`); a rule
    /// added by hand is drift.
    #[schemars(extend("x-pve-key" = "/cluster/firewall/groups/{group}", "x-default" = "no rules", "x-impact" = "live"))]
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
}

/// A guest's firewall options (`…/firewall/options`). Absent: not owned.
#[serde_with::skip_serializing_none]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GuestOptions {
    /// The guest's firewall (PVE: off); the NIC's own `firewall` flag
    /// must also be on.
    #[schemars(extend("x-pve-key" = "enable", "x-default" = "not managed (PVE: off)", "x-impact" = "live"))]
    pub enable: Option<bool>,
    /// What incoming traffic no rule decided meets (PVE: `DROP`).
    #[schemars(extend("x-pve-key" = "policy_in", "x-default" = "not managed (PVE: DROP)", "x-impact" = "live"))]
    pub policy_in: Option<Policy>,
    /// What outgoing traffic no rule decided meets (PVE: `ACCEPT`).
    #[schemars(extend("x-pve-key" = "policy_out", "x-default" = "not managed (PVE: ACCEPT)", "x-impact" = "live"))]
    pub policy_out: Option<Policy>,
    /// Admit DHCP (PVE: off).
    #[schemars(extend("x-pve-key" = "dhcp", "x-default" = "not managed (PVE: off)", "x-impact" = "live"))]
    pub dhcp: Option<bool>,
    /// Admit only the addresses of `ipfilter-netN` (PVE: off).
    #[schemars(extend("x-pve-key" = "ipfilter", "x-default" = "not managed (PVE: off)", "x-impact" = "live"))]
    pub ipfilter: Option<bool>,
    /// Admit only the NIC's own MAC (PVE: on).
    #[schemars(extend("x-pve-key" = "macfilter", "x-default" = "not managed (PVE: on)", "x-impact" = "live"))]
    pub macfilter: Option<bool>,
    /// Admit neighbour discovery (PVE: on).
    #[schemars(extend("x-pve-key" = "ndp", "x-default" = "not managed (PVE: on)", "x-impact" = "live"))]
    pub ndp: Option<bool>,
    /// Admit router advertisements from the guest (PVE: off).
    #[schemars(extend("x-pve-key" = "radv", "x-default" = "not managed (PVE: off)", "x-impact" = "live"))]
    pub radv: Option<bool>,
    /// The log level of incoming traffic the policy decides (PVE:
    /// `nolog`).
    #[schemars(extend("x-pve-key" = "log_level_in", "x-default" = "not managed (PVE: nolog)", "x-impact" = "live"))]
    pub log_level_in: Option<LogLevel>,
    /// The log level of outgoing traffic the policy decides (PVE:
    /// `nolog`).
    #[schemars(extend("x-pve-key" = "log_level_out", "x-default" = "not managed (PVE: nolog)", "x-impact" = "live"))]
    pub log_level_out: Option<LogLevel>,
}

/// A guest's `spec.firewall`: declaring it makes the guest's rule list,
/// options, aliases and IP sets ProxOps'.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GuestFirewall {
    /// The guest's firewall options; an absent one is not owned.
    #[schemars(extend("x-pve-key" = "…/firewall/options", "x-default" = "not managed", "x-impact" = "live"))]
    #[serde(default)]
    pub options: GuestOptions,
    /// The guest's rule list, in order: the first rule that matches
    /// decides. A rule added by hand is drift.
    #[schemars(extend("x-pve-key" = "…/firewall/rules", "x-default" = "no rules", "x-impact" = "live"))]
    #[serde(default)]
    pub rules: Vec<RuleSpec>,
    /// The guest's own aliases (`name` required), which its rules name
    /// as `guest/name` or plainly.
    #[schemars(extend("x-pve-key" = "…/firewall/aliases", "x-default" = "no aliases", "x-impact" = "live"))]
    #[serde(default)]
    pub aliases: Vec<AliasSpec>,
    /// The guest's own IP sets (`name` required), which its rules name as
    /// `+guest/name` or `+name`.
    #[schemars(extend("x-pve-key" = "…/firewall/ipset", "x-default" = "no IP sets", "x-impact" = "live"))]
    #[serde(default)]
    pub ipsets: Vec<IpSetSpec>,
}

/// Checks a rule list of `env`: every rule as PVE's `verify_rule` checks
/// it, errors at `{path}[i].{field}`. Returns the checked rules, in order,
/// when there is no error.
pub fn check_rules(
    rules: &[RuleSpec],
    env: RuleEnv,
    path: &str,
) -> Result<Vec<Rule>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut out = Vec::new();
    for (i, spec) in rules.iter().enumerate() {
        let at = |field: &str| format!("{path}[{i}].{field}");
        match Rule::from_raw(&spec.raw()) {
            Ok(rule) => {
                let env_errors = rule.check_env(env);
                errors.extend(
                    env_errors
                        .iter()
                        .map(|e| FieldError::new(at(e.field), &e.message)),
                );
                out.push(rule);
            }
            Err(rule_errors) => {
                errors.extend(
                    rule_errors
                        .iter()
                        .map(|e| FieldError::new(at(e.field), &e.message)),
                );
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// An alias, IP set or group name: PVE's pattern and length limit.
fn check_name(name: &str, max: usize, what: &str, path: String, errors: &mut Vec<FieldError>) {
    // An absent name is reported where it is missing.
    if !name.is_empty() && !is_object_name(name) || name.len() > max {
        errors.push(FieldError::new(
            path,
            format!(
                "{what} '{name}' is not a valid name: a letter, then letters, digits, '-' and '_' \
                 (2 to {max} characters)"
            ),
        ));
    }
}

/// An alias (`name` being the effective name) at `path`.
pub fn check_alias(name: &str, alias: &AliasSpec, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check_name(
        name,
        MAX_ALIAS_LEN,
        "alias",
        format!("{path}.name"),
        &mut errors,
    );
    if let Err(e) = ip_or_cidr(&alias.cidr) {
        errors.push(FieldError::new(format!("{path}.cidr"), e));
    }
    errors
}

/// An IP set at `path`: its name, and each entry an address, a network
/// or an alias's name (`IPorCIDRorAlias`), none twice (PVE ignores a
/// repeated entry: `$format_ipsets`).
pub fn check_ipset(name: &str, set: &IpSetSpec, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check_name(
        name,
        MAX_IPSET_LEN,
        "IP set",
        format!("{path}.name"),
        &mut errors,
    );
    // Entries are compared as PVE stores them: 10.0.0.1/8 is 10.0.0.0/8.
    let mut seen = BTreeSet::new();
    for (i, entry) in set.entries.iter().enumerate() {
        let at = format!("{path}.entries[{i}].cidr");
        let cidr = entry.cidr.as_str();
        let alias = cidr
            .strip_prefix("dc/")
            .or_else(|| cidr.strip_prefix("guest/"))
            .unwrap_or(cidr);
        if !is_object_name(alias)
            && let Err(e) = ip_or_cidr(cidr)
        {
            errors.push(FieldError::new(at.clone(), e));
        }
        // create_ip: "a zero prefix is not allowed in ipset entries".
        if cidr
            .rsplit_once('/')
            .is_some_and(|(_, l)| !l.is_empty() && l.bytes().all(|b| b == b'0'))
        {
            errors.push(FieldError::new(
                at.clone(),
                "a zero prefix is not allowed in ipset entries",
            ));
        }
        if !seen.insert(stored_ipset_cidr(cidr)) {
            errors.push(FieldError::new(
                at,
                format!("'{cidr}' is already in the set"),
            ));
        }
    }
    errors
}

/// A security group at `path`: its name and its rules (no `group` rules,
/// no interfaces).
pub fn check_group(name: &str, group: &SecurityGroupSpec, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check_name(
        name,
        MAX_GROUP_LEN,
        "security group",
        format!("{path}.name"),
        &mut errors,
    );
    if let Err(e) = check_rules(&group.rules, RuleEnv::Group, &format!("{path}.rules")) {
        errors.extend(e);
    }
    errors
}

/// A guest's `spec.firewall` at `path`: rules, aliases and IP sets, the
/// guest's names unique.
pub fn check_guest(fw: &GuestFirewall, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Err(e) = check_rules(&fw.rules, RuleEnv::Guest, &format!("{path}.rules")) {
        errors.extend(e);
    }
    let mut names = BTreeSet::new();
    for (i, alias) in fw.aliases.iter().enumerate() {
        let at = format!("{path}.aliases[{i}]");
        let name = named(alias.name.as_deref(), &at, &mut errors);
        errors.extend(check_alias(name, alias, &at));
        // verify_rule looks aliases up by lc(): two that differ in case
        // are one.
        if !name.is_empty() && !names.insert(name.to_ascii_lowercase()) {
            errors.push(FieldError::new(
                format!("{at}.name"),
                format!("alias '{name}' twice"),
            ));
        }
    }
    let mut sets = BTreeSet::new();
    for (i, set) in fw.ipsets.iter().enumerate() {
        let at = format!("{path}.ipsets[{i}]");
        let name = named(set.name.as_deref(), &at, &mut errors);
        errors.extend(check_ipset(name, set, &at));
        if !name.is_empty() && !sets.insert(name.to_ascii_lowercase()) {
            errors.push(FieldError::new(
                format!("{at}.name"),
                format!("IP set '{name}' twice"),
            ));
        }
    }
    errors
}

fn named<'a>(name: Option<&'a str>, at: &str, errors: &mut Vec<FieldError>) -> &'a str {
    name.unwrap_or_else(|| {
        errors.push(FieldError::new(
            format!("{at}.name"),
            "a guest's aliases and IP sets need a name",
        ));
        ""
    })
}

/// An object of the cluster's firewall a manifest names: the kind, its
/// PVE name, and the field that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRef {
    pub kind: crate::names::Kind,
    pub name: String,
    pub field: String,
}

/// The cluster objects `rules` (at `path`) name: security groups, and the
/// IP sets and aliases a reference finds at cluster level (`dc/`, or
/// unscoped when `own` — the guest's own IP sets and aliases, lower case —
/// does not hold the name). Rules that do not read name nothing.
pub fn rule_refs(rules: &[RuleSpec], path: &str, own: &Known) -> Vec<ClusterRef> {
    use super::grammar::{Address, RefScope};
    use crate::names::Kind;
    let mut out = Vec::new();
    for (i, spec) in rules.iter().enumerate() {
        let Ok(rule) = Rule::from_raw(&spec.raw()) else {
            continue;
        };
        if let super::rule::Head::Group(name) = &rule.head {
            out.push(ClusterRef {
                kind: Kind::SecurityGroup,
                name: name.clone(),
                field: format!("{path}[{i}].action"),
            });
        }
        for (field, addr) in [("source", &rule.source), ("dest", &rule.dest)] {
            let Some(addr) = addr else { continue };
            let (kind, scope, name, mine) = match addr.what() {
                Address::IpSet { scope, name } => (
                    Kind::FirewallIPSet,
                    *scope,
                    name,
                    own.guest_ipsets.contains(&name.to_ascii_lowercase()),
                ),
                Address::Alias { scope, name } => (
                    Kind::FirewallAlias,
                    *scope,
                    name,
                    own.guest_aliases.contains(&name.to_ascii_lowercase()),
                ),
                Address::List { .. } => continue,
            };
            let cluster = match scope {
                RefScope::Cluster => true,
                RefScope::Any => !mine,
                RefScope::Guest | RefScope::Sdn => false,
            };
            if cluster {
                out.push(ClusterRef {
                    kind,
                    name: name.clone(),
                    field: format!("{path}[{i}].{field}"),
                });
            }
        }
    }
    out
}

/// The aliases an IP set's entries name (`dc/name` or a bare name; an
/// entry of a guest's set that names one of `own`'s aliases is the
/// guest's).
pub fn entry_refs(set: &IpSetSpec, path: &str, own: &Known) -> Vec<ClusterRef> {
    set.entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let (scoped, name) = match e.cidr.strip_prefix("dc/") {
                Some(n) => (true, n),
                None => (false, e.cidr.as_str()),
            };
            let cluster = is_object_name(name)
                && (scoped || !own.guest_aliases.contains(&name.to_ascii_lowercase()));
            cluster.then(|| ClusterRef {
                kind: crate::names::Kind::FirewallAlias,
                name: name.to_string(),
                field: format!("{path}.entries[{i}].cidr"),
            })
        })
        .collect()
}

impl GuestFirewall {
    /// The guest's own aliases and IP sets, lower case, as references
    /// look them up.
    pub fn own(&self) -> Known {
        Known {
            guest_aliases: self
                .aliases
                .iter()
                .filter_map(|a| a.name.as_ref().map(|n| n.to_ascii_lowercase()))
                .collect(),
            guest_ipsets: self
                .ipsets
                .iter()
                .filter_map(|s| s.name.as_ref().map(|n| n.to_ascii_lowercase()))
                .collect(),
            ..Known::default()
        }
    }

    /// Every cluster object the guest's firewall names.
    pub fn cluster_refs(&self, path: &str) -> Vec<ClusterRef> {
        let own = self.own();
        let mut out = rule_refs(&self.rules, &format!("{path}.rules"), &own);
        for (i, set) in self.ipsets.iter().enumerate() {
            out.extend(entry_refs(set, &format!("{path}.ipsets[{i}]"), &own));
        }
        out
    }
}
