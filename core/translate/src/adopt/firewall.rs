//! Adoption of PVE's firewall: the cluster's aliases, IP sets and security
//! groups (each a manifest; an unmarked one's carries
//! `proxops/adopted-id`, so its first apply is the claim alone), the
//! cluster's options and rules (a ClusterFirewall manifest), and a guest's
//! firewall (its manifest's `spec.firewall`). Options are adopted as PVE
//! holds them (an option PVE does not list stays unowned); a rule is
//! written in its manifest form ([`RuleSpec::from_rule`]).

use std::collections::BTreeMap;

use crate::change::Gap;
use crate::cluster::adopt::{Adopted, name_for};
use proxops_model::cluster::{Owner, mark};
use proxops_model::firewall::live::{LiveEntry, LiveList, LiveOptions};
use proxops_model::firewall::spec::{
    AliasSpec, ClusterFirewallSpec, ClusterOptions, ForwardPolicy, GuestFirewall, GuestOptions,
    IpSetEntry, IpSetSpec, LogRateLimit, Policy, RuleSpec, SecurityGroupSpec,
};
use proxops_model::firewall::{LogLevel, Rule};
use proxops_model::live::{FirewallScope, LiveFirewall};
use proxops_model::manifest::{ANNOTATION_ADOPTED_ID, ANNOTATION_PRUNE, Spec};
use proxops_model::names::{ClusterName, Kind, ResourceName};

fn annotations(comment: Option<&str>, id: &str) -> BTreeMap<String, String> {
    let mut a = BTreeMap::new();
    match Owner::of(comment) {
        Owner::Unmarked => {
            a.insert(ANNOTATION_ADOPTED_ID.to_owned(), id.to_owned());
        }
        Owner::Marked { noprune: true } => {
            a.insert(ANNOTATION_PRUNE.to_owned(), "disabled".to_owned());
        }
        Owner::Marked { noprune: false } => {}
    }
    a
}

fn rules(list: &[Rule]) -> Vec<RuleSpec> {
    list.iter().map(RuleSpec::from_rule).collect()
}

fn entries(list: &LiveList) -> Vec<IpSetEntry> {
    list.entries
        .iter()
        .map(|e| IpSetEntry {
            cidr: e.cidr.clone().unwrap_or_else(|| e.name.clone()),
            nomatch: e.nomatch,
            comment: e.comment.clone(),
        })
        .collect()
}

/// The manifest name and, when it differs, the PVE name to keep in
/// `spec.name`.
fn named(id: &str) -> Option<(ResourceName, Option<String>)> {
    let name = name_for(id)?;
    let own = (name.as_str() != id).then(|| id.to_owned());
    Some((name, own))
}

fn adopted(kind: Kind, e: &LiveEntry, name: ResourceName, spec: Spec) -> Adopted {
    Adopted {
        kind,
        annotations: annotations(e.comment.as_deref(), &e.name),
        name,
        spec: Ok(spec),
    }
}

/// The cluster's firewall objects as manifests; what cannot be read is
/// left out with a gap.
pub fn cluster(cluster: &ClusterName, fw: &LiveFirewall, gaps: &mut Vec<Gap>) -> Vec<Adopted> {
    let mut out = Vec::new();
    if let Ok(aliases) = &fw.cluster.aliases {
        for e in &aliases.entries {
            let Some((name, own)) = named(&e.name) else {
                continue;
            };
            let spec = AliasSpec {
                name: own,
                cidr: e.cidr.clone().unwrap_or_default(),
                comment: mark::text_of(e.comment.as_deref()),
            };
            out.push(adopted(
                Kind::FirewallAlias,
                e,
                name,
                Spec::FirewallAlias(spec),
            ));
        }
    }
    if let Ok(sets) = &fw.cluster.ipsets {
        for e in &sets.entries {
            let Some((name, own)) = named(&e.name) else {
                continue;
            };
            let Some(Ok(members)) = fw.cluster.entries.get(&e.name) else {
                gaps.push(gap(
                    Kind::FirewallIPSet,
                    &name,
                    &e.name,
                    "its entries could not be read",
                ));
                continue;
            };
            let spec = IpSetSpec {
                name: own,
                comment: mark::text_of(e.comment.as_deref()),
                entries: entries(members),
            };
            out.push(adopted(
                Kind::FirewallIPSet,
                e,
                name,
                Spec::FirewallIpSet(spec),
            ));
        }
    }
    if let Ok(groups) = &fw.groups {
        for e in &groups.entries {
            let Some((name, own)) = named(&e.name) else {
                continue;
            };
            let Some(Ok(list)) = fw.group_rules.get(&e.name) else {
                gaps.push(gap(
                    Kind::SecurityGroup,
                    &name,
                    &e.name,
                    "its rules could not be read",
                ));
                continue;
            };
            let spec = SecurityGroupSpec {
                name: own,
                comment: mark::text_of(e.comment.as_deref()),
                rules: rules(&list.rules),
            };
            out.push(adopted(
                Kind::SecurityGroup,
                e,
                name,
                Spec::SecurityGroup(spec),
            ));
        }
    }
    if let (Ok(options), Ok(list)) = (&fw.cluster.options, &fw.cluster.rules) {
        let spec = ClusterFirewallSpec {
            options: cluster_options(options, gaps),
            rules: rules(&list.rules),
        };
        if spec != ClusterFirewallSpec::default()
            && let Ok(name) = ResourceName::new(cluster.as_str())
        {
            out.push(Adopted {
                kind: Kind::ClusterFirewall,
                name,
                annotations: BTreeMap::new(),
                spec: Ok(Spec::ClusterFirewall(spec)),
            });
        }
    }
    out
}

fn gap(kind: Kind, name: &ResourceName, id: &str, note: &str) -> Gap {
    Gap {
        object: format!("{kind}/{name}"),
        node: String::new(),
        id: id.to_owned(),
        key: String::new(),
        value: None,
        note: format!("{note}; not adopted"),
    }
}

fn flag(o: &LiveOptions, key: &str) -> Option<bool> {
    o.values.get(key).map(|v| v != "0")
}

fn policy(o: &LiveOptions, key: &str) -> Option<Policy> {
    match o.values.get(key)?.as_str() {
        "ACCEPT" => Some(Policy::Accept),
        "REJECT" => Some(Policy::Reject),
        "DROP" => Some(Policy::Drop),
        _ => None,
    }
}

fn level(o: &LiveOptions, key: &str) -> Option<LogLevel> {
    LogLevel::parse(o.values.get(key)?).ok()
}

/// `log_ratelimit` as PVE lists it (`enable=1,rate=1/second,burst=5`).
fn ratelimit(text: &str) -> LogRateLimit {
    let mut out = LogRateLimit {
        enable: None,
        rate: None,
        burst: None,
    };
    for part in text.split(',') {
        match part.split_once('=').unwrap_or(("enable", part)) {
            ("enable", v) => out.enable = Some(v != "0"),
            ("rate", v) => out.rate = Some(v.to_owned()),
            ("burst", v) => out.burst = v.parse().ok(),
            _ => {}
        }
    }
    out
}

fn cluster_options(o: &LiveOptions, gaps: &mut Vec<Gap>) -> ClusterOptions {
    const KNOWN: [&str; 6] = [
        "enable",
        "policy_in",
        "policy_out",
        "policy_forward",
        "log_ratelimit",
        "ebtables",
    ];
    for (k, v) in o
        .values
        .iter()
        .filter(|(k, _)| !KNOWN.contains(&k.as_str()))
    {
        gaps.push(Gap {
            object: "ClusterFirewall".into(),
            node: String::new(),
            id: "cluster".into(),
            key: k.clone(),
            value: Some(v.clone()),
            note: "an option ProxOps does not manage; kept on PVE".into(),
        });
    }
    ClusterOptions {
        enable: flag(o, "enable"),
        policy_in: policy(o, "policy_in"),
        policy_out: policy(o, "policy_out"),
        policy_forward: match o.values.get("policy_forward").map(String::as_str) {
            Some("ACCEPT") => Some(ForwardPolicy::Accept),
            Some("DROP") => Some(ForwardPolicy::Drop),
            _ => None,
        },
        log_ratelimit: o.values.get("log_ratelimit").map(|t| ratelimit(t)),
        ebtables: flag(o, "ebtables"),
    }
}

/// A guest's firewall as its manifest's `spec.firewall`; `None` when PVE
/// holds nothing of it (or not all of it could be read).
pub fn guest(scope: &FirewallScope) -> Option<GuestFirewall> {
    let (Ok(o), Ok(list), Ok(aliases), Ok(sets)) =
        (&scope.options, &scope.rules, &scope.aliases, &scope.ipsets)
    else {
        return None;
    };
    let mut ipsets = Vec::new();
    for e in &sets.entries {
        let Some(Ok(members)) = scope.entries.get(&e.name) else {
            return None;
        };
        ipsets.push(IpSetSpec {
            name: Some(e.name.clone()),
            comment: e.comment.clone(),
            entries: entries(members),
        });
    }
    let fw = GuestFirewall {
        options: GuestOptions {
            enable: flag(o, "enable"),
            policy_in: policy(o, "policy_in"),
            policy_out: policy(o, "policy_out"),
            dhcp: flag(o, "dhcp"),
            ipfilter: flag(o, "ipfilter"),
            macfilter: flag(o, "macfilter"),
            ndp: flag(o, "ndp"),
            radv: flag(o, "radv"),
            log_level_in: level(o, "log_level_in"),
            log_level_out: level(o, "log_level_out"),
        },
        rules: rules(&list.rules),
        aliases: aliases
            .entries
            .iter()
            .map(|e| AliasSpec {
                name: Some(e.name.clone()),
                cidr: e.cidr.clone().unwrap_or_default(),
                comment: e.comment.clone(),
            })
            .collect(),
        ipsets,
    };
    (fw != GuestFirewall::default()).then_some(fw)
}
