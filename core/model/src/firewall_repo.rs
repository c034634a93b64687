//! The firewall's rules across the manifests of one cluster: one
//! ClusterFirewall, each alias, IP set and security group named once as
//! PVE names it, and every object a rule or an IP set entry names held by
//! the repository. PVE's own objects outside it (`+sdn/…`) are accepted;
//! any other object a rule names must be adopted first. What a manifest
//! names is also an edge of the composition's graph (`Spec::firewall_refs`).

use std::collections::BTreeMap;

use crate::desired::{DesiredObject, object_diag};
use crate::diag::{Diagnostic, YamlIndex};
use crate::firewall::Known;
use crate::firewall::grammar::{RefScope, is_object_name};
use crate::firewall::rule::Rule;
use crate::firewall::spec::{GuestFirewall, IpSetSpec, RuleSpec};
use crate::manifest::Spec;
use crate::names::{Kind, Ref};

/// Every firewall check across `objects` (one cluster's composition).
pub(crate) fn check(
    objects: &BTreeMap<Ref, DesiredObject>,
    indexes: &BTreeMap<String, YamlIndex>,
    diags: &mut Vec<Diagnostic>,
) {
    let mut cluster_firewall: Option<&DesiredObject> = None;
    // (kind, name as PVE compares it) → the manifest that has it.
    let mut names: BTreeMap<(Kind, String), &Ref> = BTreeMap::new();
    let mut known = Known::default();
    for (r, o) in objects {
        if let Spec::ClusterFirewall(_) = &o.spec {
            match cluster_firewall {
                Some(prev) => diags.push(object_diag(
                    o,
                    indexes,
                    "kind",
                    format!(
                        "a second ClusterFirewall: {} ({}) is this cluster's already, and a cluster has one firewall rule list and one set of options",
                        prev.r#ref, prev.file
                    ),
                )),
                None => cluster_firewall = Some(o),
            }
        }
        let Some(name) = o.spec.firewall_name(&r.name) else {
            continue;
        };
        // Aliases are looked up ignoring case, IP sets and groups are
        // kept lower case: either way two names differing in case are one.
        let pve = name.to_ascii_lowercase();
        if let Some(prev) = names.insert((r.kind, pve.clone()), r) {
            diags.push(object_diag(
                o,
                indexes,
                name_field(&o.spec),
                format!(
                    "{} '{name}' is already {prev}'s: {}",
                    what(r.kind),
                    case_rule(r.kind)
                ),
            ));
        }
        match r.kind {
            Kind::FirewallAlias => known.cluster_aliases.insert(pve),
            Kind::FirewallIPSet => known.cluster_ipsets.insert(pve),
            Kind::SecurityGroup => known.groups.insert(pve),
            _ => false,
        };
    }
    for o in objects.values() {
        for (field, message) in missing(&o.spec, &known) {
            diags.push(object_diag(o, indexes, &field, message));
        }
    }
}

/// The field that gives a firewall object its name.
fn name_field(spec: &Spec) -> &'static str {
    let named = match spec {
        Spec::FirewallAlias(a) => a.name.is_some(),
        Spec::FirewallIpSet(s) => s.name.is_some(),
        Spec::SecurityGroup(g) => g.name.is_some(),
        _ => false,
    };
    if named { "spec.name" } else { "metadata.name" }
}

fn what(kind: Kind) -> &'static str {
    match kind {
        Kind::FirewallAlias => "alias",
        Kind::FirewallIPSet => "IP set",
        _ => "security group",
    }
}

fn case_rule(kind: Kind) -> &'static str {
    match kind {
        Kind::FirewallAlias => "PVE compares alias names ignoring case",
        Kind::FirewallIPSet => "PVE keeps IP set names lower case",
        _ => "PVE keeps security group names lower case",
    }
}

/// The references of one manifest that name nothing, each with its field
/// path and PVE's words. `cluster` holds the repository's cluster objects;
/// a guest's own aliases and IP sets are added for its rules and entries.
fn missing(spec: &Spec, cluster: &Known) -> Vec<(String, String)> {
    match spec {
        Spec::SecurityGroup(g) => rules_missing(&g.rules, "spec.rules", cluster),
        Spec::ClusterFirewall(c) => rules_missing(&c.rules, "spec.rules", cluster),
        Spec::FirewallIpSet(s) => entries_missing(s, "spec", cluster),
        Spec::Vm(v) | Spec::TemplateVm(v) => guest_missing(v.firewall.as_ref(), cluster),
        Spec::Lxc(l) | Spec::TemplateCt(l) => guest_missing(l.firewall.as_ref(), cluster),
        _ => Vec::new(),
    }
}

fn guest_missing(fw: Option<&GuestFirewall>, cluster: &Known) -> Vec<(String, String)> {
    let Some(fw) = fw else {
        return Vec::new();
    };
    let own = fw.own();
    let known = Known {
        guest_aliases: own.guest_aliases,
        guest_ipsets: own.guest_ipsets,
        ..cluster.clone()
    };
    let mut out = rules_missing(&fw.rules, "spec.firewall.rules", &known);
    for (i, set) in fw.ipsets.iter().enumerate() {
        out.extend(entries_missing(
            set,
            &format!("spec.firewall.ipsets[{i}]"),
            &known,
        ));
    }
    out
}

/// The rules of `rules` (at `path`) that name an object `known` lacks.
/// A rule that does not read is reported by the one-document checks.
fn rules_missing(rules: &[RuleSpec], path: &str, known: &Known) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, spec) in rules.iter().enumerate() {
        let Ok(rule) = Rule::from_raw(&spec.raw()) else {
            continue;
        };
        out.extend(
            known
                .missing(&rule)
                .into_iter()
                .map(|e| (format!("{path}[{i}].{}", e.field), e.message)),
        );
    }
    out
}

/// The entries of `set` (at `path`) that name an alias `known` lacks
/// (`dc/x` the cluster's, `guest/x` the guest's, `x` either), as
/// pve-firewall's `resolve_alias` words it.
fn entries_missing(set: &IpSetSpec, path: &str, known: &Known) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, entry) in set.entries.iter().enumerate() {
        let cidr = entry.cidr.as_str();
        let (scope, name) = if let Some(n) = cidr.strip_prefix("dc/") {
            (RefScope::Cluster, n)
        } else if let Some(n) = cidr.strip_prefix("guest/") {
            (RefScope::Guest, n)
        } else {
            (RefScope::Any, cidr)
        };
        if is_object_name(name) && !known.has_alias(scope, name) {
            out.push((
                format!("{path}.entries[{i}].cidr"),
                format!("no such alias '{cidr}'"),
            ));
        }
    }
    out
}
