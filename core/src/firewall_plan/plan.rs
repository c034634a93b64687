//! The firewall's actions: each cluster alias, IP set and security group
//! (owned through the marker in its comment), the cluster's options and
//! rule list (owned when its ClusterFirewall manifest exists), and each
//! guest's firewall (owned when its manifest declares `spec.firewall`),
//! planned from the manifests and what PVE holds. Every action is one
//! [`Work::Firewall`]: its calls in order, each with its digest
//! ([`super::calls`]). All of them are `live`: PVE applies a firewall
//! change without touching a guest (pve-firewall recompiles its rules).

use std::collections::BTreeMap;

use proxops_model::cluster::{Owner, mark};
use proxops_model::firewall::live::{LiveEntry, LiveList};
use proxops_model::firewall::spec::{IpSetSpec, RuleSpec, check_rules};
use proxops_model::firewall::{GuestFirewall, Rule, RuleEnv};
use proxops_model::live::{FirewallScope, FwRead, LiveFirewall, LiveSnapshot, ReadFailure};
use proxops_model::manifest::{ANNOTATION_ADOPTED_ID, Spec};
use proxops_model::names::{Kind, NodeName};
use proxops_model::repo::{ClusterDesired, DesiredObject};

use super::calls::{self, entry_line, object_call, rule_line};
use crate::action::{
    Action, Anomaly, AnomalyType, Change, FirewallCall, Impact, Op, Params, SkipReason, Skipped,
    Target, Work, WriteMethod,
};
use crate::plan::{Plan, Policy};
use proxops_model::wire::encode_segment;

const CLUSTER: &str = "/cluster/firewall";
const GROUPS: &str = "/cluster/firewall/groups";

/// The vmids whose firewall the reader reads for `desired`: `None` when
/// the repository declares no firewall for this cluster (nothing read).
pub fn read_scope(
    desired: &ClusterDesired,
) -> Option<std::collections::BTreeSet<proxops_model::names::Vmid>> {
    let guests: std::collections::BTreeSet<_> = desired
        .objects
        .values()
        .filter(|o| guest_firewall(&o.spec).is_some())
        .filter_map(|o| o.spec.guest_id().map(|(_, v)| v))
        .collect();
    let any = desired.objects.keys().any(|r| r.kind.is_firewall());
    (any || !guests.is_empty()).then_some(guests)
}

/// A guest manifest's `spec.firewall`.
pub fn guest_firewall(spec: &Spec) -> Option<&GuestFirewall> {
    match spec {
        Spec::Vm(v) | Spec::TemplateVm(v) => v.firewall.as_ref(),
        Spec::Lxc(l) | Spec::TemplateCt(l) => l.firewall.as_ref(),
        _ => None,
    }
}

/// Plans the firewall of one cluster into `plan`.
pub(crate) fn plan(
    plan: &mut Plan,
    desired: &ClusterDesired,
    live: &LiveSnapshot,
    policy: &Policy,
) {
    let Some(fw) = &live.firewall else {
        // Not read: a repository without any firewall, or a snapshot made
        // by hand. Nothing is planned, nothing pruned.
        return;
    };
    let mut p = Fw {
        plan,
        desired,
        policy,
        fw,
    };
    p.keyed(Kind::FirewallAlias, &fw.cluster.aliases);
    p.keyed(Kind::FirewallIPSet, &fw.cluster.ipsets);
    p.keyed(Kind::SecurityGroup, &fw.groups);
    p.cluster(fw);
    p.guests(live, fw);
}

struct Fw<'a> {
    plan: &'a mut Plan,
    desired: &'a ClusterDesired,
    policy: &'a Policy,
    fw: &'a LiveFirewall,
}

fn unreadable(f: &ReadFailure) -> SkipReason {
    SkipReason::ConfigUnreadable {
        message: format!("{}: {}", f.what, f.message),
    }
}

/// Where a cluster-level kind's objects are listed, and the key naming
/// each.
fn index(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::FirewallAlias => ("/cluster/firewall/aliases", "name"),
        Kind::FirewallIPSet => ("/cluster/firewall/ipset", "name"),
        _ => (GROUPS, "group"),
    }
}

/// The line of an indexed object as the plan expects to read it.
fn expect_line(e: &LiveEntry) -> Vec<String> {
    vec![entry_line(e)]
}

/// The manifests of `kind`, each with its PVE name.
fn objects(desired: &ClusterDesired, kind: Kind) -> Vec<(&DesiredObject, String)> {
    desired
        .objects
        .values()
        .filter(|o| o.r#ref.kind == kind)
        .filter_map(|o| Some((o, o.spec.firewall_name(&o.r#ref.name)?)))
        .collect()
}

impl Fw<'_> {
    fn skip(&mut self, kind: Kind, name: &str, id: &str, reason: SkipReason) {
        self.plan.skipped.push(Skipped {
            kind,
            name: name.to_owned(),
            node: NodeName::cluster_wide(),
            id: Target::Cluster(id.to_owned()),
            reason,
        });
    }

    fn anomaly(&mut self, t: AnomalyType, kind: Kind, name: Option<&str>, message: String) {
        self.plan.anomalies.push(Anomaly {
            anomaly: t.into(),
            kind: Some(kind),
            name: name.map(str::to_owned),
            node: None,
            id: name.map(|n| Target::Cluster(n.to_owned())),
            field: None,
            message,
        });
    }

    /// An alias, IP set or group kind: each manifest against its listed
    /// object (created, changed, claimed, or a person's when unmarked),
    /// then the marked objects no manifest names, pruned.
    fn keyed(&mut self, kind: Kind, index: &FwRead<LiveList>) {
        let mine = objects(self.desired, kind);
        let list = match index {
            Ok(l) => l,
            Err(f) => {
                let reason = unreadable(f);
                for (o, id) in &mine {
                    self.skip(kind, o.r#ref.name.as_str(), id, reason.clone());
                }
                return;
            }
        };
        for (obj, id) in &mine {
            let found = list.entries.iter().find(|e| same_name(kind, &e.name, id));
            match found {
                None => self.create(kind, obj, id),
                Some(l) if Owner::of(l.comment.as_deref()).is_marked() => {
                    self.update(kind, obj, l, false)
                }
                Some(l) if adopted(obj) == Some(l.name.as_str()) => self.update(kind, obj, l, true),
                Some(l) => {
                    let message = format!(
                        "{kind} {} already exists on PVE without the proxops marker in its comment: ProxOps never takes over an object it does not own (no update, no delete); give {} another name, or bring it under ProxOps with `proxops adopt`, the one way to claim it",
                        l.name, obj.r#ref
                    );
                    self.anomaly(
                        AnomalyType::NeedsPerson,
                        kind,
                        Some(obj.r#ref.name.as_str()),
                        message,
                    );
                }
            }
        }
        let wanted: Vec<&str> = mine.iter().map(|(_, id)| id.as_str()).collect();
        let prunes: Vec<Action> = list
            .entries
            .iter()
            .filter(|e| !wanted.iter().any(|w| same_name(kind, &e.name, w)))
            .filter(|e| Owner::of(e.comment.as_deref()) == (Owner::Marked { noprune: false }))
            .map(|e| self.prune(kind, e))
            .collect();
        for e in &list.entries {
            if Owner::of(e.comment.as_deref()) == (Owner::Marked { noprune: true })
                && !wanted.iter().any(|w| same_name(kind, &e.name, w))
            {
                self.skip(kind, &e.name, &e.name, SkipReason::PruneProtected);
            }
        }
        self.budget(kind, wanted.is_empty(), prunes);
    }

    fn create(&mut self, kind: Kind, obj: &DesiredObject, id: &str) {
        let (path, key) = index(kind);
        let comment = mark::marked(own_comment(&obj.spec), obj.metadata.prune_disabled());
        let mut form = Params::new();
        let mut changes = Vec::new();
        let mut calls = Vec::new();
        match &obj.spec {
            Spec::FirewallAlias(a) => {
                let cidr = proxops_model::firewall::grammar::stored_alias_cidr(&a.cidr);
                form.push("name", id);
                form.push("cidr", cidr.clone());
                form.push("comment", comment.clone());
                changes.push(added("cidr", "spec.cidr", cidr));
            }
            Spec::FirewallIpSet(_) | Spec::SecurityGroup(_) => {
                form.push(key, id);
                form.push("comment", comment.clone());
            }
            _ => return,
        }
        changes.push(added("comment", "spec.comment", comment));
        calls.push(FirewallCall {
            method: WriteMethod::Post,
            path: path.to_owned(),
            params: form,
            digest: None,
            read: None,
        });
        let empty = proxops_model::firewall::live::EMPTY_LIST_DIGEST;
        match &obj.spec {
            Spec::FirewallIpSet(s) => {
                let set = format!("{path}/{}", encode_segment(id));
                let want = desired_entries(s);
                changes.extend(entry_changes(&[], &want));
                calls.extend(calls::entry_calls(&set, "cidr", &[], &want, empty));
            }
            Spec::SecurityGroup(g) => {
                let want = rules_of(&g.rules, RuleEnv::Group);
                changes.extend(rule_changes("spec.rules", &[], &want));
                let rules = format!("{GROUPS}/{}", encode_segment(id));
                calls.extend(calls::rule_calls(&rules, &[], &want, empty));
            }
            _ => {}
        }
        let mut a = action(kind, Op::Create, obj, id, calls);
        a.changes = changes;
        a.reason = format!("{}: not on PVE; will create {kind} {id}", obj.r#ref);
        self.plan.actions.push(a);
    }

    /// A marked object's drift, or (`claim`) an adopted one's first
    /// write: the marker in its comment and nothing else.
    fn update(&mut self, kind: Kind, obj: &DesiredObject, live: &LiveEntry, claim: bool) {
        let (path, key) = index(kind);
        let id = live.name.as_str();
        let comment = if claim {
            mark::marked(
                mark::text_of(live.comment.as_deref()).as_deref(),
                obj.metadata.prune_disabled(),
            )
        } else {
            mark::marked(own_comment(&obj.spec), obj.metadata.prune_disabled())
        };
        let cidr = match &obj.spec {
            Spec::FirewallAlias(a) if !claim => {
                Some(proxops_model::firewall::grammar::stored_alias_cidr(&a.cidr))
            }
            _ => live.cidr.clone(),
        };
        let now = LiveEntry {
            name: live.name.clone(),
            cidr: cidr.clone(),
            nomatch: false,
            comment: Some(comment.clone()),
        };
        let mut changes = Vec::new();
        let mut calls = Vec::new();
        if now != *live {
            if live.comment.as_deref() != Some(comment.as_str()) {
                changes.push(changed(
                    "comment",
                    "spec.comment",
                    live.comment.clone(),
                    comment.clone(),
                ));
            }
            let mut form = Params::new();
            let (method, at) = if kind == Kind::FirewallAlias {
                if live.cidr != cidr {
                    changes.push(changed(
                        "cidr",
                        "spec.cidr",
                        live.cidr.clone(),
                        cidr.clone().unwrap_or_default(),
                    ));
                }
                form.push("cidr", cidr.unwrap_or_default());
                (WriteMethod::Put, format!("{path}/{}", encode_segment(id)))
            } else {
                // `rename` to its own name changes the comment only
                // (`IPSet.pm` and `Groups.pm` `create`).
                form.push(key, id);
                form.push("rename", id);
                (WriteMethod::Post, path.to_owned())
            };
            form.push("comment", comment);
            calls.push(object_call(
                (method, at, form),
                (path, key, id),
                expect_line(live),
                true,
            ));
        }
        if !claim {
            calls.extend(self.members(kind, obj, id, &mut changes));
        }
        if calls.is_empty() {
            return;
        }
        let mut a = action(kind, Op::Update, obj, id, calls);
        a.changes = changes;
        a.reason = if claim {
            format!(
                "{}: claim: adds the proxops marker to the comment only ({ANNOTATION_ADOPTED_ID}); other changes are planned once PVE holds the marker",
                obj.r#ref
            )
        } else {
            "config drift".into()
        };
        self.plan.actions.push(a);
    }

    /// An IP set's entries or a group's rules: the calls that make them
    /// the manifest's, their changes added to `changes`. An unreadable
    /// list plans nothing (never read as empty).
    fn members(
        &mut self,
        kind: Kind,
        obj: &DesiredObject,
        id: &str,
        changes: &mut Vec<Change>,
    ) -> Vec<FirewallCall> {
        let failed = match (&obj.spec, kind) {
            (Spec::FirewallIpSet(s), Kind::FirewallIPSet) => {
                match self.fw.cluster.entries.get(id).or_else(|| {
                    self.fw
                        .cluster
                        .entries
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(id))
                        .map(|(_, v)| v)
                }) {
                    Some(Ok(live)) => {
                        let want = desired_entries(s);
                        changes.extend(entry_changes(&live.entries, &want));
                        let path = format!("{}/{}", index(kind).0, encode_segment(id));
                        return calls::entry_calls(
                            &path,
                            "cidr",
                            &live.entries,
                            &want,
                            &live.digest,
                        );
                    }
                    Some(Err(f)) => Some(f.clone()),
                    None => None,
                }
            }
            (Spec::SecurityGroup(g), Kind::SecurityGroup) => match self.fw.group_rules.get(id) {
                Some(Ok(live)) => {
                    let want = rules_of(&g.rules, RuleEnv::Group);
                    changes.extend(rule_changes("spec.rules", &live.rules, &want));
                    let path = format!("{GROUPS}/{}", encode_segment(id));
                    return calls::rule_calls(&path, &live.rules, &want, &live.digest);
                }
                Some(Err(f)) => Some(f.clone()),
                None => None,
            },
            _ => None,
        };
        if let Some(f) = failed {
            self.skip(kind, obj.r#ref.name.as_str(), id, unreadable(&f));
        }
        Vec::new()
    }

    /// A marked object no manifest names: its entries or rules deleted
    /// (PVE refuses to delete a group or IP set that is not empty), then
    /// the object, after a read finds it still marked.
    fn prune(&self, kind: Kind, e: &LiveEntry) -> Action {
        let (path, key) = index(kind);
        let id = e.name.as_str();
        let mut calls = Vec::new();
        let mut changes = Vec::new();
        match kind {
            Kind::FirewallIPSet => {
                if let Some(Ok(live)) = self.fw.cluster.entries.get(id) {
                    changes.extend(entry_changes(&live.entries, &[]));
                    let set = format!("{path}/{}", encode_segment(id));
                    calls.extend(calls::entry_calls(
                        &set,
                        "cidr",
                        &live.entries,
                        &[],
                        &live.digest,
                    ));
                }
            }
            Kind::SecurityGroup => {
                if let Some(Ok(live)) = self.fw.group_rules.get(id) {
                    changes.extend(rule_changes("spec.rules", &live.rules, &[]));
                    let rules = format!("{GROUPS}/{}", encode_segment(id));
                    calls.extend(calls::rule_calls(&rules, &live.rules, &[], &live.digest));
                }
            }
            _ => {}
        }
        // An alias's delete takes the list's digest; an IP set's and a
        // group's take none (`IPSet.pm`, `Groups.pm` `delete`).
        let send = kind == Kind::FirewallAlias;
        let at = format!("{path}/{}", encode_segment(id));
        calls.push(object_call(
            (WriteMethod::Delete, at, Params::new()),
            (path, key, id),
            expect_line(e),
            send,
        ));
        Action {
            op: Op::Prune,
            kind,
            name: id.to_owned(),
            node: NodeName::cluster_wide(),
            target: Target::Cluster(id.to_owned()),
            impact: Impact::Live,
            changes,
            reason: "present on PVE (proxops marker) but absent in git".into(),
            level: crate::cluster::plan::prune_level(kind),
            deps: Vec::new(),
            object: None,
            work: Work::Firewall { calls },
        }
    }

    /// Prunes under the per-cycle budget and the empty-desired guard, as
    /// for every other cluster-level kind.
    fn budget(&mut self, kind: Kind, none_wanted: bool, prunes: Vec<Action>) {
        if prunes.is_empty() {
            return;
        }
        if none_wanted && !self.policy.allow_empty_prune {
            let cluster = self.desired.name.clone();
            self.anomaly(
                AnomalyType::EmptyDesired,
                kind,
                None,
                format!(
                    "0 desired {kind} but {} {kind} on PVE carry the proxops marker: a composition without any {kind} looks like a bad push, so none is pruned, whatever the prune budget; if removing every {kind} is intended, set allow-empty-prune: true for cluster {cluster} (clusters/{cluster}/config.yaml)",
                    prunes.len()
                ),
            );
            for mut a in prunes {
                a.reason =
                    format!("prune deferred: empty-desired guard (no {kind} manifest left in git)");
                self.plan.deferred.push(a);
            }
            return;
        }
        let budget = self.policy.prune_budget as usize;
        for (i, mut a) in prunes.into_iter().enumerate() {
            if budget > 0 && i >= budget {
                a.reason = format!("prune deferred: over the per-cycle prune budget of {budget}");
                self.plan.deferred.push(a);
            } else {
                self.plan.actions.push(a);
            }
        }
    }
}

fn same_name(kind: Kind, a: &str, b: &str) -> bool {
    match kind {
        // Aliases are looked up by `lc` (`verify_rule`); IP sets and
        // groups are kept lower case (`generic_fw_config_parser`).
        Kind::FirewallAlias | Kind::FirewallIPSet | Kind::SecurityGroup => {
            a.eq_ignore_ascii_case(b)
        }
        _ => a == b,
    }
}

fn adopted(obj: &DesiredObject) -> Option<&str> {
    obj.metadata
        .annotations
        .get(ANNOTATION_ADOPTED_ID)
        .map(|s| s.trim())
}

fn own_comment(spec: &Spec) -> Option<&str> {
    match spec {
        Spec::FirewallAlias(a) => a.comment.as_deref(),
        Spec::FirewallIpSet(s) => s.comment.as_deref(),
        Spec::SecurityGroup(g) => g.comment.as_deref(),
        _ => None,
    }
}

fn action(kind: Kind, op: Op, obj: &DesiredObject, id: &str, calls: Vec<FirewallCall>) -> Action {
    Action {
        op,
        kind,
        name: obj.r#ref.name.to_string(),
        node: NodeName::cluster_wide(),
        target: Target::Cluster(id.to_owned()),
        impact: Impact::Live,
        changes: Vec::new(),
        reason: String::new(),
        level: obj.level,
        deps: obj.deps.iter().cloned().collect(),
        object: Some(obj.r#ref.clone()),
        work: Work::Firewall { calls },
    }
}

fn added(key: &str, path: &str, to: String) -> Change {
    Change {
        path: Some(path.to_owned()),
        impact: Some(Impact::Live),
        ..Change::new(key, None, Some(to))
    }
}

fn changed(key: &str, path: &str, from: Option<String>, to: String) -> Change {
    Change {
        path: Some(path.to_owned()),
        impact: Some(Impact::Live),
        ..Change::new(key, from, Some(to))
    }
}

/// A manifest's rules, checked (validate refused any that are not).
fn rules_of(specs: &[RuleSpec], env: RuleEnv) -> Vec<Rule> {
    check_rules(specs, env, "").unwrap_or_default()
}

/// An IP set's entries as PVE keeps them.
fn desired_entries(s: &IpSetSpec) -> Vec<LiveEntry> {
    s.entries
        .iter()
        .map(|e| {
            let cidr = proxops_model::firewall::grammar::stored_ipset_cidr(&e.cidr);
            LiveEntry {
                name: cidr.clone(),
                cidr: Some(cidr),
                nomatch: e.nomatch,
                comment: e.comment.clone().filter(|c| !c.trim().is_empty()),
            }
        })
        .collect()
}

/// A rule list's change as one line per position that differs: the rule
/// there before and after.
fn rule_changes(path: &str, before: &[Rule], after: &[Rule]) -> Vec<Change> {
    let n = before.len().max(after.len());
    (0..n)
        .filter_map(|i| {
            let from = before.get(i).map(rule_line);
            let to = after.get(i).map(rule_line);
            (from != to).then(|| Change {
                path: Some(format!("{path}[{i}]")),
                impact: Some(Impact::Live),
                ..Change::new(format!("rules[{i}]"), from, to)
            })
        })
        .collect()
}

/// An entry list's change: each entry removed, added or changed.
fn entry_changes(before: &[LiveEntry], after: &[LiveEntry]) -> Vec<Change> {
    let mut out = Vec::new();
    let find =
        |l: &[LiveEntry], n: &str| l.iter().find(|e| e.name.eq_ignore_ascii_case(n)).cloned();
    for e in before {
        match find(after, &e.name) {
            None => out.push(Change::new(
                format!("entries[{}]", e.name),
                Some(entry_line(e)),
                None,
            )),
            Some(a) if a != *e => out.push(Change::new(
                format!("entries[{}]", e.name),
                Some(entry_line(e)),
                Some(entry_line(&a)),
            )),
            Some(_) => {}
        }
    }
    for a in after {
        if find(before, &a.name).is_none() {
            out.push(Change::new(
                format!("entries[{}]", a.name),
                None,
                Some(entry_line(a)),
            ));
        }
    }
    for c in &mut out {
        c.impact = Some(Impact::Live);
    }
    out
}

impl Fw<'_> {
    /// The cluster's options and rule list, when a ClusterFirewall
    /// manifest owns them; refused when they would lock operators out.
    fn cluster(&mut self, fw: &LiveFirewall) {
        let Some((obj, spec)) = self.desired.objects.values().find_map(|o| match &o.spec {
            Spec::ClusterFirewall(c) => Some((o, c)),
            _ => None,
        }) else {
            return;
        };
        let name = obj.r#ref.name.as_str();
        let (options, rules) = match (&fw.cluster.options, &fw.cluster.rules) {
            (Ok(o), Ok(r)) => (o, r),
            (Err(f), _) | (_, Err(f)) => {
                let reason = unreadable(f);
                return self.skip(Kind::ClusterFirewall, name, "cluster", reason);
            }
        };
        let want = rules_of(&spec.rules, RuleEnv::Cluster);
        let rows = crate::firewall_options::cluster_rows(&spec.options);
        let opt = option_call(
            &format!("{CLUSTER}/options"),
            &rows,
            options,
            "spec.options",
        );
        let mut changes = opt.1;
        changes.extend(rule_changes("spec.rules", &rules.rules, &want));
        let mut calls = calls::rule_calls(
            &format!("{CLUSTER}/rules"),
            &rules.rules,
            &want,
            &rules.digest,
        );
        calls.extend(opt.0);
        if calls.is_empty() {
            return;
        }
        let mut a = action(Kind::ClusterFirewall, Op::Update, obj, "cluster", calls);
        a.changes = changes;
        a.reason = "config drift".into();
        if let Some(l) = self.lockout(spec, options, &want) {
            if !self.policy.allow_firewall_lockout {
                let message = format!("{}: refused, nothing written: {l}", obj.r#ref);
                return self.anomaly(
                    AnomalyType::NeedsPerson,
                    Kind::ClusterFirewall,
                    Some(name),
                    message,
                );
            }
            let weakened =
                format!("the firewall lock-out guard is OFF (allow-firewall-lockout: true): {l}");
            a.reason = format!("config drift; {weakened}");
            self.plan.diagnostics.push(
                proxops_model::diag::Diagnostic::file(obj.file.clone(), weakened)
                    .with_field("spec")
                    .warning(),
            );
        }
        self.plan.actions.push(a);
    }

    /// The lock-out the cluster firewall would be in after this plan:
    /// its options as the manifest sets them (else as PVE holds them),
    /// its rules, and the groups the repository declares (else PVE's).
    fn lockout(
        &self,
        spec: &proxops_model::firewall::ClusterFirewallSpec,
        live: &proxops_model::firewall::live::LiveOptions,
        rules: &[Rule],
    ) -> Option<super::lockout::Lockout> {
        use proxops_model::firewall::spec::Policy as P;
        let enable = spec
            .options
            .enable
            .unwrap_or_else(|| live.values.get("enable").is_some_and(|v| v != "0"));
        let policy_in = spec.options.policy_in.unwrap_or_else(|| {
            match live.values.get("policy_in").map(String::as_str) {
                Some("ACCEPT") => P::Accept,
                Some("REJECT") => P::Reject,
                _ => P::Drop,
            }
        });
        let mut groups: BTreeMap<String, Vec<Rule>> = self
            .fw
            .group_rules
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_ref().ok()?.rules.clone())))
            .collect();
        for o in self.desired.objects.values() {
            if let (Spec::SecurityGroup(g), Some(n)) =
                (&o.spec, o.spec.firewall_name(&o.r#ref.name))
            {
                groups.insert(n, rules_of(&g.rules, RuleEnv::Group));
            }
        }
        super::lockout::lockout(&super::lockout::ClusterFirewall {
            enable,
            policy_in,
            rules,
            groups: &groups,
        })
    }

    /// Each guest whose manifest declares `spec.firewall`: its aliases
    /// and IP sets, then its rules, then its options, as one action.
    fn guests(&mut self, live: &LiveSnapshot, fw: &LiveFirewall) {
        let empty = FirewallScope::empty();
        let mine: Vec<(&DesiredObject, &GuestFirewall)> = self
            .desired
            .objects
            .values()
            .filter_map(|o| Some((o, guest_firewall(&o.spec)?)))
            .collect();
        for (obj, gf) in mine {
            let Some((node, vmid)) = obj.spec.guest_id() else {
                continue;
            };
            let scope = match live.guest_by_vmid(vmid) {
                // Created by this plan: PVE holds nothing of it yet.
                None => &empty,
                Some(g) if &g.node != node || !g.is_owned_in(self.desired.tag_case_sensitive) => {
                    // The guest's own planning tells why (another node,
                    // not ProxOps'): its firewall is left as it is.
                    continue;
                }
                Some(_) => match fw.guests.get(&vmid) {
                    Some(s) => s,
                    None => continue,
                },
            };
            if let Some(f) = scope.failures().first() {
                let reason = unreadable(f);
                self.plan.skipped.push(Skipped {
                    kind: obj.r#ref.kind,
                    name: obj.r#ref.name.to_string(),
                    node: node.clone(),
                    id: Target::Guest(vmid),
                    reason,
                });
                continue;
            }
            let base = format!(
                "/nodes/{}/{}/{vmid}/firewall",
                encode_segment(node.as_str()),
                obj.r#ref
                    .kind
                    .guest_type()
                    .map_or("qemu", |t| t.path_segment())
            );
            let (calls, changes) = guest_calls(&base, gf, scope);
            if calls.is_empty() {
                continue;
            }
            self.plan.actions.push(Action {
                op: Op::Update,
                kind: obj.r#ref.kind,
                name: obj.r#ref.name.to_string(),
                node: node.clone(),
                target: Target::Guest(vmid),
                impact: Impact::Live,
                changes,
                reason: "firewall drift".into(),
                level: obj.level,
                deps: obj.deps.iter().cloned().collect(),
                object: Some(obj.r#ref.clone()),
                work: Work::Firewall { calls },
            });
        }
    }
}

/// The options write: changed options with the digest read, and their
/// changes (paths below `path`).
fn option_call(
    at: &str,
    rows: &[crate::firewall_options::OptionRow],
    live: &proxops_model::firewall::live::LiveOptions,
    path: &str,
) -> (Vec<FirewallCall>, Vec<Change>) {
    let changes = crate::firewall_options::changes(rows, live);
    if changes.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let mut params = Params::new();
    for c in &changes {
        params.push(c.key, c.want.clone());
    }
    let shown = changes
        .iter()
        .map(|c| Change {
            path: Some(format!("{path}.{}", c.key.replace('_', "-"))),
            impact: Some(Impact::Live),
            ..Change::new(
                format!("options.{}", c.key),
                Some(c.live.clone()),
                Some(c.want.clone()),
            )
        })
        .collect();
    let call = FirewallCall {
        method: WriteMethod::Put,
        path: at.to_owned(),
        params,
        digest: Some(live.digest.clone()),
        read: None,
    };
    (vec![call], shown)
}

/// A guest's firewall calls: aliases, IP sets and their entries, rules,
/// options; IP sets no longer declared go last, once no rule names them.
fn guest_calls(
    base: &str,
    gf: &GuestFirewall,
    live: &FirewallScope,
) -> (Vec<FirewallCall>, Vec<Change>) {
    let (Ok(aliases), Ok(sets), Ok(rules), Ok(options)) =
        (&live.aliases, &live.ipsets, &live.rules, &live.options)
    else {
        return (Vec::new(), Vec::new());
    };
    let mut calls = Vec::new();
    let mut changes = Vec::new();
    let want_aliases: Vec<LiveEntry> = gf
        .aliases
        .iter()
        .map(|a| LiveEntry {
            name: a.name.clone().unwrap_or_default(),
            cidr: Some(proxops_model::firewall::grammar::stored_alias_cidr(&a.cidr)),
            nomatch: false,
            comment: a.comment.clone().filter(|c| !c.trim().is_empty()),
        })
        .collect();
    changes.extend(entry_changes(&aliases.entries, &want_aliases));
    calls.extend(calls::entry_calls(
        &format!("{base}/aliases"),
        "name",
        &aliases.entries,
        &want_aliases,
        &aliases.digest,
    ));
    let mut ipsets = GuestSets {
        index: format!("{base}/ipset"),
        calls,
        changes,
        gone: Vec::new(),
    };
    ipsets.plan(gf, sets, live);
    let GuestSets {
        mut calls,
        mut changes,
        gone,
        ..
    } = ipsets;
    let want_rules = rules_of(&gf.rules, RuleEnv::Guest);
    changes.extend(rule_changes(
        "spec.firewall.rules",
        &rules.rules,
        &want_rules,
    ));
    calls.extend(calls::rule_calls(
        &format!("{base}/rules"),
        &rules.rules,
        &want_rules,
        &rules.digest,
    ));
    let rows = crate::firewall_options::guest_rows(&gf.options);
    let opt = option_call(
        &format!("{base}/options"),
        &rows,
        options,
        "spec.firewall.options",
    );
    calls.extend(opt.0);
    changes.extend(opt.1);
    calls.extend(gone);
    (calls, changes)
}

/// A guest's IP sets being planned: the calls so far, their changes, and
/// the deletes of sets no longer declared (sent last).
struct GuestSets {
    index: String,
    calls: Vec<FirewallCall>,
    changes: Vec<Change>,
    gone: Vec<FirewallCall>,
}

impl GuestSets {
    fn plan(&mut self, gf: &GuestFirewall, sets: &LiveList, live: &FirewallScope) {
        let empty = proxops_model::firewall::live::EMPTY_LIST_DIGEST;
        for set in &gf.ipsets {
            let name = set.name.clone().unwrap_or_default();
            let want = desired_entries(set);
            let path = format!("{}/{}", self.index, encode_segment(&name));
            let comment = set.comment.clone().filter(|c| !c.trim().is_empty());
            let at = format!("spec.firewall.ipsets[{name}]");
            match sets
                .entries
                .iter()
                .find(|e| e.name.eq_ignore_ascii_case(&name))
            {
                None => {
                    let mut form = Params::new();
                    form.push("name", name.clone());
                    if let Some(c) = &comment {
                        form.push("comment", c.clone());
                    }
                    self.calls.push(FirewallCall {
                        method: WriteMethod::Post,
                        path: self.index.clone(),
                        params: form,
                        digest: None,
                        read: None,
                    });
                    self.changes
                        .push(live_change(&at, None, Some(name.clone())));
                    self.changes.extend(entry_changes(&[], &want));
                    self.calls
                        .extend(calls::entry_calls(&path, "cidr", &[], &want, empty));
                }
                Some(l) => {
                    if l.comment != comment {
                        let mut form = Params::new();
                        form.push("name", l.name.clone());
                        form.push("rename", l.name.clone());
                        form.push("comment", comment.clone().unwrap_or_default());
                        let write = (WriteMethod::Post, self.index.clone(), form);
                        let list = (self.index.as_str(), "name", l.name.as_str());
                        self.calls
                            .push(object_call(write, list, expect_line(l), true));
                        let to = comment.clone().unwrap_or_default();
                        self.changes.push(live_change(
                            &format!("{at}.comment"),
                            l.comment.clone(),
                            Some(to),
                        ));
                    }
                    if let Some(Ok(entries)) = live.entries.get(&l.name) {
                        self.changes.extend(entry_changes(&entries.entries, &want));
                        self.calls.extend(calls::entry_calls(
                            &path,
                            "cidr",
                            &entries.entries,
                            &want,
                            &entries.digest,
                        ));
                    }
                }
            }
        }
        for l in &sets.entries {
            let declared = gf.ipsets.iter().any(|s| {
                s.name
                    .as_deref()
                    .is_some_and(|n| n.eq_ignore_ascii_case(&l.name))
            });
            if declared {
                continue;
            }
            let path = format!("{}/{}", self.index, encode_segment(&l.name));
            if let Some(Ok(entries)) = live.entries.get(&l.name) {
                self.changes.extend(entry_changes(&entries.entries, &[]));
                self.gone.extend(calls::entry_calls(
                    &path,
                    "cidr",
                    &entries.entries,
                    &[],
                    &entries.digest,
                ));
            }
            let at = format!("spec.firewall.ipsets[{}]", l.name);
            self.changes
                .push(live_change(&at, Some(l.name.clone()), None));
            let list = (self.index.as_str(), "name", l.name.as_str());
            self.gone.push(object_call(
                (WriteMethod::Delete, path, Params::new()),
                list,
                expect_line(l),
                false,
            ));
        }
    }
}

fn live_change(field: &str, from: Option<String>, to: Option<String>) -> Change {
    Change {
        impact: Some(Impact::Live),
        ..Change::new(field, from, to)
    }
}

/// Why a firewall action may not run under `desired` and `policy`: it
/// must write only below its own scope (the cluster's firewall, or its
/// guest's), serve a manifest of its kind and name (a prune: an object no
/// manifest names), and land on an allowed node.
pub(crate) fn refusal(
    a: &Action,
    calls: &[FirewallCall],
    desired: &ClusterDesired,
    policy: &Policy,
) -> Result<(), String> {
    let base = match (&a.target, a.kind.is_firewall()) {
        (Target::Cluster(_), true) => CLUSTER.to_owned(),
        (Target::Guest(vmid), false) if a.kind.is_guest() => {
            if !policy.allows(&a.node) {
                return Err(format!("node {} is not in the cluster's nodes", a.node));
            }
            let seg = a.kind.guest_type().map_or("qemu", |t| t.path_segment());
            format!(
                "/nodes/{}/{seg}/{vmid}/firewall",
                encode_segment(a.node.as_str())
            )
        }
        _ => return Err(format!("{} cannot write a firewall", a.kind)),
    };
    let inside = |p: &str| p == base || p.starts_with(&format!("{base}/"));
    if let Some(c) = calls
        .iter()
        .find(|c| !inside(&c.path) || c.read.as_ref().is_some_and(|r| !inside(&r.list)))
    {
        return Err(format!("it writes {}, outside {base}", c.path));
    }
    match (&a.object, a.op) {
        (None, Op::Prune) if a.kind.is_firewall() => {
            let Target::Cluster(id) = &a.target else {
                return Err("a prune without its object's name".into());
            };
            match objects(desired, a.kind)
                .into_iter()
                .find(|(_, n)| same_name(a.kind, n, id))
            {
                Some((o, _)) => Err(format!("{id} is {}'s: it is never pruned", o.r#ref)),
                None => Ok(()),
            }
        }
        (None, _) => Err("only a prune may act without a manifest".into()),
        (Some(r), _) => {
            let obj = desired
                .get(r)
                .ok_or_else(|| format!("it serves {r}, which no manifest declares"))?;
            if a.kind != r.kind || a.name != r.name.as_str() {
                return Err(format!("it is named {}/{} but serves {r}", a.kind, a.name));
            }
            if a.kind.is_guest() {
                let declared = guest_firewall(&obj.spec).is_some();
                let here = obj
                    .spec
                    .guest_id()
                    .is_some_and(|(n, v)| n == &a.node && a.target == Target::Guest(v));
                if !declared || !here {
                    return Err(format!("{r} declares no firewall of guest {}", a.target));
                }
            }
            Ok(())
        }
    }
}
