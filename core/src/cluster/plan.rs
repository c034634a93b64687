//! Planning of cluster-level objects, once for every kind: create what
//! PVE lacks, update what drifted on objects ProxOps owns (marked), claim
//! the object `adopt` wrote a manifest for, refuse the rest as anomalies,
//! and prune marked objects without a manifest under the kind's own prune
//! budget and empty-desired guard. Plus the pool membership a guest
//! manifest declares (`spec.pool`).

use std::collections::BTreeMap;

use crate::action::{
    Action, Anomaly, AnomalyType, Change, Impact, Op, Params, SkipReason, Skipped, Target,
};
use crate::plan::{Plan, Policy};
use proxops_model::live::LiveSnapshot;
use proxops_model::manifest::{ANNOTATION_ADOPTED_ID, Spec};
use proxops_model::names::{Kind, NodeName, Ref};
use proxops_model::repo::{ClusterDesired, DesiredObject};

use super::rows::{self, Desired};
use super::{Endpoints, LiveObject, Owner};

/// The prune level of a kind: prunes run from the highest level down, and
/// guests are pruned at levels 1 (non-templates) and 0 (templates). A
/// backup job goes before the guests it names; a pool after its members
/// (it is pruned only once it has none).
pub(crate) fn prune_level(kind: Kind) -> u32 {
    match kind {
        // A group before the IP sets and aliases its rules name, an IP
        // set before the aliases its entries name (pve-firewall refuses
        // nothing here, but a rule naming a deleted set stops matching).
        Kind::SecurityGroup => 7,
        Kind::FirewallIPSet => 6,
        Kind::FirewallAlias => 5,
        // One per cluster, never deleted.
        Kind::ClusterFirewall => 0,
        // Before the guest it copies: PVE destroys a guest with a
        // replication job only with purge.
        Kind::BackupJob | Kind::ReplicationJob => 2,
        // Before its guest: PVE destroys a guest under HA only with purge.
        Kind::HAResource => 3,
        // Before the HA resources it names: PVE keeps a rule naming a
        // resource deleted with purge=0.
        Kind::HARule => 4,
        Kind::Pool => 0,
        // Not cluster-level: planned by the planner, not here.
        Kind::VM
        | Kind::TemplateVM
        | Kind::LXC
        | Kind::TemplateCT
        | Kind::ISO
        | Kind::CTTemplate
        | Kind::DiskImage => 0,
    }
}

/// Plans every cluster-level kind into `plan`.
pub(crate) fn plan(
    plan: &mut Plan,
    desired: &ClusterDesired,
    live: &LiveSnapshot,
    policy: &Policy,
) {
    for ep in super::KINDS {
        KindPlanner {
            ep,
            desired,
            live,
            plan: &mut *plan,
        }
        .run(policy);
    }
    memberships(plan, desired, live);
}

struct KindPlanner<'a> {
    ep: Endpoints,
    desired: &'a ClusterDesired,
    live: &'a LiveSnapshot,
    plan: &'a mut Plan,
}

fn action(ep: Endpoints, op: Op, name: &str, id: &str, obj: Option<&DesiredObject>) -> Action {
    Action {
        op,
        kind: ep.kind,
        name: name.to_owned(),
        node: NodeName::cluster_wide(),
        target: Target::Cluster(id.to_owned()),
        impact: Impact::Live,
        changes: Vec::new(),
        reason: String::new(),
        level: obj.map_or(prune_level(ep.kind), |o| o.level),
        deps: obj
            .map(|o| o.deps.iter().cloned().collect())
            .unwrap_or_default(),
        object: obj.map(|o| o.r#ref.clone()),
        work: ep.delete(id),
    }
}

impl KindPlanner<'_> {
    fn anomaly(&mut self, t: AnomalyType, name: Option<&str>, id: Option<&str>, message: String) {
        self.plan.anomalies.push(Anomaly {
            anomaly: t.into(),
            kind: Some(self.ep.kind),
            name: name.map(str::to_owned),
            node: None,
            id: id.map(|i| Target::Cluster(i.to_owned())),
            field: None,
            message,
        });
    }

    /// A manifest's object that needs a person: no action for it.
    fn needs_person(&mut self, obj: &DesiredObject, id: &str, message: String) {
        self.anomaly(
            AnomalyType::NeedsPerson,
            Some(obj.r#ref.name.as_str()),
            Some(id),
            message,
        );
    }

    fn skip(&mut self, name: &str, id: &str, reason: SkipReason) {
        self.plan.skipped.push(Skipped {
            kind: self.ep.kind,
            name: name.to_owned(),
            node: NodeName::cluster_wide(),
            id: Target::Cluster(id.to_owned()),
            reason,
        });
    }

    fn run(mut self, policy: &Policy) {
        let kind = self.ep.kind;
        let mine: Vec<(&DesiredObject, Desired)> = self
            .desired
            .objects
            .values()
            .filter(|o| o.r#ref.kind == kind)
            .filter_map(|o| Some((o, rows::desired(o, self.desired)?)))
            .collect();
        if self.live.cluster.unsupported.contains(&kind) {
            self.unsupported(&mine);
            return;
        }
        let listing = match self.live.cluster.listing(kind) {
            Ok(l) => l,
            Err(failure) => {
                // Never absence: nothing of this kind is created or pruned.
                let message = format!("{}: {}", failure.what, failure.message);
                for (o, d) in &mine {
                    let reason = SkipReason::ConfigUnreadable {
                        message: message.clone(),
                    };
                    self.skip(o.r#ref.name.as_str(), &d.id, reason);
                }
                return;
            }
        };
        // By identity; a job PVE is removing is not there to plan.
        let kind_identity = |l: &LiveObject| super::identity(kind, l);
        let present: BTreeMap<String, &LiveObject> = listing
            .values()
            .filter(|l| !super::being_removed(l))
            .map(|l| (kind_identity(l), l))
            .collect();
        for (obj, d) in &mine {
            if let Some(why) = self.unknown_node(obj) {
                self.needs_person(obj, &d.id, why);
                continue;
            }
            match present.get(&d.id) {
                None => self.create(obj, d, listing),
                Some(l) if l.owner().is_marked() => self.update(obj, d, l),
                Some(l) if adopted_id(obj) == Some(l.id.as_str()) => self.claim(obj, d, l),
                Some(l) => self.not_owned(obj, &l.id),
            }
        }
        let wanted: Vec<&str> = mine.iter().map(|(_, d)| d.id.as_str()).collect();
        self.prunes(listing, &wanted, policy);
    }

    /// A kind this PVE has no endpoint for: every manifest of it is a
    /// person's (`/cluster/ha/rules` exists from pve-ha-manager 5, PVE 9).
    fn unsupported(&mut self, mine: &[(&DesiredObject, Desired)]) {
        for (o, d) in mine {
            let message = format!(
                "{} {} needs {}: this PVE has no {}; ProxOps does not manage PVE 8 HA groups",
                self.ep.kind,
                d.id,
                self.ep.since.unwrap_or("a newer PVE"),
                self.ep.collection
            );
            self.needs_person(o, &d.id, message);
        }
    }

    /// An HA rule naming a node PVE does not list (the cluster lists no
    /// node allowlist, so validate could not tell): PVE refuses it
    /// (`API2/HA/Rules.pm` `$assert_valid_nodes_param`: "cannot use
    /// non-existent node(s)").
    fn unknown_node(&self, obj: &DesiredObject) -> Option<String> {
        if self.live.nodes.is_empty() {
            return None;
        }
        if let Spec::ReplicationJob(j) = &obj.spec {
            // `API2/ReplicationConfig.pm` `create`: "Target '…' does not exist."
            return (!self.live.nodes.contains_key(&j.target)).then(|| {
                format!(
                    "{} replicates to node {} that PVE does not list: PVE refuses it (\"Target '{}' does not exist.\")",
                    obj.r#ref, j.target, j.target
                )
            });
        }
        if !matches!(obj.spec, Spec::HaRule(_)) {
            return None;
        }
        let missing: Vec<String> = obj
            .spec
            .nodes()
            .into_iter()
            .filter(|n| !self.live.nodes.contains_key(n))
            .map(|n| n.to_string())
            .collect();
        (!missing.is_empty()).then(|| {
            format!(
                "{} names node(s) {} that PVE does not list: PVE refuses an HA rule with non-existent nodes",
                obj.r#ref,
                missing.join(", ")
            )
        })
    }

    fn create(&mut self, obj: &DesiredObject, d: &Desired, listing: &BTreeMap<String, LiveObject>) {
        let kind = self.ep.kind;
        if let Some(old) = listing
            .values()
            .find(|l| super::being_removed(l) && super::identity(kind, l) == d.id)
        {
            // `ReplicationConfig.pm` `write_config` counts it until the
            // runner has removed it: a create now would be refused.
            let reason = SkipReason::BeingRemoved { id: old.id.clone() };
            self.skip(obj.r#ref.name.as_str(), &old.id, reason);
            return;
        }
        if let Some(why) = self.on_target(obj) {
            self.needs_person(obj, &d.id, why);
            return;
        }
        // Two new jobs of one guest in this plan take two numbers.
        let planned: Vec<String> = self
            .plan
            .actions
            .iter()
            .filter(|a| a.kind == kind && a.op == Op::Create)
            .filter_map(|a| match &a.target {
                Target::Cluster(id) => Some(id.clone()),
                _ => None,
            })
            .collect();
        let id = super::new_id(kind, &d.id, |id| {
            listing.contains_key(id) || planned.iter().any(|p| p == id)
        });
        let mut form = Params::new();
        for row in &d.rows {
            if let Some(w) = &row.want {
                form.push(row.key, w.clone());
            }
        }
        let mut a = action(self.ep, Op::Create, obj.r#ref.name.as_str(), &id, Some(obj));
        a.changes = d
            .rows
            .iter()
            .filter_map(|r| Some(new_change(r.key, r.path, r.want.clone()?)))
            .collect();
        a.reason = format!(
            "{}: not on PVE; will create {} {id}",
            obj.r#ref, self.ep.id_key
        );
        a.work = self.ep.create(&id, form);
        self.plan.actions.push(a);
    }

    fn update(&mut self, obj: &DesiredObject, d: &Desired, live: &LiveObject) {
        let mut form = Params::new();
        let mut delete = Vec::new();
        let mut changes = Vec::new();
        for row in &d.rows {
            let from = live.get(row.key);
            match row.drift(from) {
                None => {}
                Some(Some(to)) => {
                    form.push(row.key, to);
                    changes.push(change(row.key, row.path, from, Some(to)));
                }
                Some(None) => {
                    delete.push(row.key);
                    changes.push(change(row.key, row.path, from, None));
                }
            }
        }
        if changes.is_empty() {
            return;
        }
        if let Some(row) = d
            .rows
            .iter()
            .find(|r| r.fixed && r.drift(live.get(r.key)).is_some())
        {
            let message = format!(
                "{} {} on PVE has {} {:?}, the manifest {:?}: PVE never changes it; delete the object by hand or give {} another id",
                self.ep.id_key,
                live.id,
                row.key,
                live.get(row.key).unwrap_or(""),
                row.want.as_deref().unwrap_or(""),
                obj.r#ref
            );
            self.needs_person(obj, &live.id, message);
            return;
        }
        for row in d.rows.iter().filter(|r| r.always_sent) {
            if let Some(w) = &row.want
                && !form.0.iter().any(|(k, _)| k == row.key)
            {
                form.push(row.key, w.clone());
            }
        }
        if !delete.is_empty() {
            form.push("delete", delete.join(","));
        }
        let mut a = action(
            self.ep,
            Op::Update,
            obj.r#ref.name.as_str(),
            &live.id,
            Some(obj),
        );
        a.changes = changes;
        a.reason = "config drift".into();
        a.work = self.ep.update(&live.id, form);
        self.plan.actions.push(a);
    }

    /// The first cycle of an adopted object: one write that puts the
    /// marker in its comment and nothing else; the rest of its drift is
    /// planned once PVE holds the marker.
    fn claim(&mut self, obj: &DesiredObject, d: &Desired, live: &LiveObject) {
        let Some(row) = d.rows.iter().find(|r| r.key == "comment") else {
            return;
        };
        let Some(to) = row.want.as_deref() else {
            return;
        };
        let others = d
            .rows
            .iter()
            .filter(|r| r.key != "comment" && r.drift(live.get(r.key)).is_some())
            .count();
        let mut form = Params::new();
        form.push("comment", to);
        // What PVE requires in every update goes as PVE holds it, so the
        // claim changes nothing else.
        for row in d.rows.iter().filter(|r| r.always_sent) {
            if let Some(l) = live.get(row.key) {
                form.push(row.key, l);
            }
        }
        let mut a = action(
            self.ep,
            Op::Update,
            obj.r#ref.name.as_str(),
            &live.id,
            Some(obj),
        );
        a.changes = vec![change("comment", row.path, live.get("comment"), Some(to))];
        a.reason = format!(
            "{}: claim: adds the proxops marker to the comment only ({ANNOTATION_ADOPTED_ID})",
            obj.r#ref
        );
        if others > 0 {
            a.reason.push_str(&format!(
                "; {others} other change(s) are planned once PVE holds the marker"
            ));
        }
        a.work = self.ep.update(&live.id, form);
        self.plan.actions.push(a);
    }

    fn not_owned(&mut self, obj: &DesiredObject, id: &str) {
        let message = format!(
            "{} {id} already exists on PVE without the proxops marker in its comment: ProxOps never takes over an object it does not own (no update, no delete); give {} another id, or bring it under ProxOps with `proxops adopt`, the one way to claim it",
            self.ep.id_key, obj.r#ref
        );
        self.needs_person(obj, id, message);
    }

    fn prunes(&mut self, listing: &BTreeMap<String, LiveObject>, wanted: &[&str], policy: &Policy) {
        let kind = self.ep.kind;
        let mut candidates = Vec::new();
        for (id, l) in listing {
            if wanted.contains(&super::identity(kind, l).as_str()) || super::being_removed(l) {
                continue;
            }
            match l.owner() {
                Owner::Unmarked => continue,
                Owner::Marked { noprune: true } => {
                    self.skip(id, id, SkipReason::PruneProtected);
                    continue;
                }
                Owner::Marked { noprune: false } => {}
            }
            if let Some(why) = self.refused_prune(id, l, wanted) {
                self.anomaly(AnomalyType::NeedsPerson, Some(id), Some(id), why);
                continue;
            }
            candidates.push(id.as_str());
        }
        if candidates.is_empty() {
            return;
        }
        if wanted.is_empty() && !policy.allow_empty_prune {
            self.anomaly(
                AnomalyType::EmptyDesired,
                None,
                None,
                format!(
                    "0 desired {kind} but {} {kind} on PVE carry the proxops marker: a composition without any {kind} looks like a bad push, so none is pruned, whatever the prune budget; if removing every {kind} is intended, set allow-empty-prune: true for cluster {} (clusters/{}/config.yaml)",
                    candidates.len(),
                    self.desired.name,
                    self.desired.name
                ),
            );
            for id in candidates {
                let reason =
                    format!("prune deferred: empty-desired guard (no {kind} manifest left in git)");
                self.plan.deferred.push(self.prune(id, reason));
            }
            return;
        }
        let budget = policy.prune_budget as usize;
        for (i, id) in candidates.into_iter().enumerate() {
            if budget > 0 && i >= budget {
                let reason = format!("prune deferred: over the per-cycle prune budget of {budget}");
                self.plan.deferred.push(self.prune(id, reason));
            } else {
                let a = self.prune(
                    id,
                    "present on PVE (proxops marker) but absent in git".into(),
                );
                self.plan.actions.push(a);
            }
        }
    }

    fn prune(&self, id: &str, reason: String) -> Action {
        let mut a = action(self.ep, Op::Prune, id, id, None);
        a.reason = reason;
        a
    }

    /// Why PVE would refuse the delete: a pool with members left
    /// (pve-manager `API2/Pool.pm` `delete_pool`: "pool 'x' is not empty
    /// (contains VM 100)"). Guests pruned in this same plan still count:
    /// the pool goes in the cycle after them.
    fn refused_prune(&self, id: &str, l: &LiveObject, wanted: &[&str]) -> Option<String> {
        if self.ep.kind == Kind::ReplicationJob {
            return self.swapped(l, wanted);
        }
        if self.ep.kind != Kind::Pool {
            return None;
        }
        let members = self.live.cluster.members(id);
        if members.is_empty() {
            return None;
        }
        let list: Vec<String> = members.iter().map(|v| format!("VM {v}")).collect();
        Some(format!(
            "pool {id} carries the proxops marker and has no manifest, but PVE still lists members ({}): PVE refuses to delete a pool that is not empty, so ProxOps does not try; it is pruned once the members are gone (a guest pruned this cycle leaves it), or move them to another pool",
            list.join(", ")
        ))
    }
}

impl KindPlanner<'_> {
    /// A replication job's guest (its vmid as listed) and the node it runs on.
    fn guest_node<'l>(&self, l: &'l LiveObject) -> Option<(&'l str, &NodeName)> {
        let guest = l.get("guest")?;
        let vmid = proxops_model::names::Vmid::new(guest.parse().ok()?).ok()?;
        Some((guest, &self.live.guest_by_vmid(vmid)?.node))
    }

    /// The guest of a replication job now runs on the node a manifest
    /// replicates it to: PVE swapped the job's target and source when it
    /// moved (pve-guest-common `ReplicationConfig.pm`
    /// `switch_replication_job_target`, on an HA relocation); the job is a
    /// person's to sort out, never pruned (its delete removes the copies).
    fn swapped(&self, l: &LiveObject, wanted: &[&str]) -> Option<String> {
        let (guest, node) = self.guest_node(l)?;
        let moved = wanted.contains(&super::replication_identity(guest, node.as_str()).as_str());
        moved.then(|| {
            format!(
                "replication job {} of guest {guest} carries the proxops marker and has no manifest, but the guest now runs on {node}, which a manifest replicates it to: PVE swaps a job's target when its guest moves (HA relocation), so ProxOps does not delete it; move the guest back, or delete the job by hand",
                l.id
            )
        })
    }

    /// A new job to the node its guest runs on: PVE refuses it ("Source
    /// and target must not be identical", pve-manager
    /// `API2/ReplicationConfig.pm` `create`).
    fn on_target(&self, obj: &DesiredObject) -> Option<String> {
        let Spec::ReplicationJob(j) = &obj.spec else {
            return None;
        };
        let (_, vmid) = self
            .desired
            .get(&rows::guest_ref(self.desired, &j.guest)?)?
            .spec
            .guest_id()?;
        let g = self.live.guest_by_vmid(vmid)?;
        (g.node == j.target).then(|| {
            format!(
                "{}: guest {vmid} runs on node {}, the job's target (moved there, HA relocation?): PVE refuses a job to the guest's own node; nothing written",
                obj.r#ref, g.node
            )
        })
    }
}

fn adopted_id(obj: &DesiredObject) -> Option<&str> {
    obj.metadata
        .annotations
        .get(ANNOTATION_ADOPTED_ID)
        .map(|s| s.trim())
}

fn new_change(key: &str, path: &str, to: String) -> Change {
    Change {
        path: Some(path.to_owned()),
        impact: Some(Impact::Live),
        ..Change::new(key, None, Some(to))
    }
}

fn change(key: &str, path: &str, from: Option<&str>, to: Option<&str>) -> Change {
    Change {
        path: Some(path.to_owned()),
        impact: Some(Impact::Live),
        ..Change::new(key, from.map(str::to_owned), to.map(str::to_owned))
    }
}

/// The PVE pool id a guest manifest's `spec.pool` names.
pub(crate) fn guest_pool(obj: &DesiredObject, all: &ClusterDesired) -> Option<String> {
    let name = match &obj.spec {
        Spec::Vm(v) | Spec::TemplateVm(v) => v.pool.as_ref(),
        Spec::Lxc(l) | Spec::TemplateCt(l) => l.pool.as_ref(),
        _ => None,
    }?;
    all.get(&Ref {
        kind: Kind::Pool,
        name: name.clone(),
    })
    .and_then(rows::pool_id)
}

/// A guest that exists and is ProxOps' but is not in the pool its
/// manifest names: `PUT /pools poolid=… vms=<vmid> allow-move=1`
/// (pve-manager `API2/Pool.pm` `update_pool`: a guest in another pool moves
/// only with `allow-move`). An absent `spec.pool` owns nothing.
fn memberships(plan: &mut Plan, desired: &ClusterDesired, live: &LiveSnapshot) {
    for obj in desired.objects.values().filter(|o| o.r#ref.kind.is_guest()) {
        let (Some(pool), Some((_, vmid))) = (guest_pool(obj, desired), obj.spec.guest_id()) else {
            continue;
        };
        let Some(g) = live.guest_by_vmid(vmid) else {
            continue;
        };
        let now = live.cluster.guest_pools.get(&vmid);
        if now.map(String::as_str) == Some(pool.as_str())
            || !(g.is_owned() || obj.metadata.adopted_vmid() == Some(vmid))
        {
            continue;
        }
        let mut form = Params::new();
        form.push("poolid", pool.clone());
        form.push("vms", vmid.to_string());
        form.push("allow-move", "1");
        plan.actions.push(Action {
            op: Op::Update,
            kind: obj.r#ref.kind,
            name: obj.r#ref.name.as_str().to_owned(),
            node: g.node.clone(),
            target: Target::Guest(vmid),
            impact: Impact::Live,
            changes: vec![change(
                "pool",
                "spec.pool",
                now.map(String::as_str),
                Some(&pool),
            )],
            reason: format!("{}: joins pool {pool}", obj.r#ref),
            level: obj.level,
            deps: obj.deps.iter().cloned().collect(),
            object: Some(obj.r#ref.clone()),
            work: crate::action::Work::ClusterWrite {
                method: crate::action::WriteMethod::Put,
                path: "/pools".into(),
                params: form,
            },
        });
    }
}

/// The planner's rules for an action on a cluster-level object, applied
/// again just before it runs ([`crate::admit`]): it goes to its kind's
/// endpoints, cluster-wide; a create or update serves its manifest's PVE
/// id and sends only that manifest's rows; a prune deletes an id no
/// manifest of the kind has.
pub(crate) fn refusal(a: &Action, desired: &ClusterDesired) -> Result<(), String> {
    let ep = super::endpoints(a.kind)
        .ok_or_else(|| format!("{} is not a cluster-level kind", a.kind))?;
    let Target::Cluster(id) = &a.target else {
        return Err(format!("{} {} is not a cluster-level id", a.kind, a.target));
    };
    if !a.node.is_cluster_wide() {
        return Err(format!(
            "{} objects are cluster-wide, not on node {}",
            a.kind, a.node
        ));
    }
    let expected = match (a.op, &a.object) {
        (Op::Prune, None) => {
            if let Some(o) = desired.objects.values().find(|o| {
                o.r#ref.kind == a.kind
                    && rows::id_of(o, &desired.objects).as_deref() == Some(id.as_str())
            }) {
                return Err(format!(
                    "{} {id} is {}'s: it is never pruned",
                    a.kind, o.r#ref
                ));
            }
            ep.delete(id)
        }
        (Op::Create | Op::Update, Some(r)) => {
            let obj = desired
                .get(r)
                .ok_or_else(|| format!("it serves {r}, which no manifest declares"))?;
            let d = rows::desired(obj, desired)
                .ok_or_else(|| format!("{r} is not a cluster-level manifest"))?;
            if a.kind != r.kind || a.name != r.name.as_str() || !super::serves(a.kind, &d.id, id) {
                return Err(format!(
                    "it is {} {} {id} but serves {r} (id {})",
                    a.op, a.kind, d.id
                ));
            }
            return sends_rows(a, ep, id, &d, a.op == Op::Create);
        }
        _ => return Err(format!("{} does not fit a {} object", a.op, a.kind)),
    };
    if a.work == expected {
        Ok(())
    } else {
        Err(format!("it is not the delete of {} {id}", a.kind))
    }
}

/// The action writes its object at its kind's endpoint, with only the
/// keys of the manifest's rows (and `delete=` of such keys).
fn sends_rows(
    a: &Action,
    ep: Endpoints,
    id: &str,
    d: &Desired,
    create: bool,
) -> Result<(), String> {
    let crate::action::Work::ClusterWrite { params, .. } = &a.work else {
        return Err("it is not a write of a cluster-level object".to_owned());
    };
    let expected = if create {
        ep.create(id, Params::new())
    } else {
        ep.update(id, Params::new())
    };
    let (
        crate::action::Work::ClusterWrite { method, path, .. },
        crate::action::Work::ClusterWrite {
            method: m, path: p, ..
        },
    ) = (&a.work, &expected)
    else {
        return Err("it is not a write of a cluster-level object".to_owned());
    };
    if method != m || path != p {
        return Err(format!("it is not the write of {} {id}", a.kind));
    }
    let owned = |k: &str| d.rows.iter().any(|r| r.key == k);
    for (key, value) in &params.0 {
        let ok = match key.as_str() {
            k if k == ep.id_key => value.expose() == id,
            k if create
                && ep
                    .create_form
                    .iter()
                    .any(|(f, v)| *f == k && value.expose() == *v) =>
            {
                true
            }
            "delete" => value.expose().split(',').all(owned),
            k => owned(k),
        };
        if !ok {
            return Err(format!(
                "it sends {key}, which no field of its manifest writes"
            ));
        }
    }
    Ok(())
}

/// A guest's pool membership write: `PUT /pools` of the pool its
/// manifest's `spec.pool` names, with its own vmid.
pub(crate) fn membership_refusal(
    a: &Action,
    obj: &DesiredObject,
    desired: &ClusterDesired,
) -> Result<(), String> {
    let (Some(pool), Some((node, vmid))) = (guest_pool(obj, desired), obj.spec.guest_id()) else {
        return Err(format!("{} declares no spec.pool", obj.r#ref));
    };
    let mut form = Params::new();
    form.push("poolid", pool);
    form.push("vms", vmid.to_string());
    form.push("allow-move", "1");
    let expected = crate::action::Work::ClusterWrite {
        method: crate::action::WriteMethod::Put,
        path: "/pools".into(),
        params: form,
    };
    if a.op == Op::Update
        && a.work == expected
        && a.target == Target::Guest(vmid)
        && &a.node == node
    {
        Ok(())
    } else {
        Err(format!("it is not {}'s move into its spec.pool", obj.r#ref))
    }
}

/// Whether the HA resource of the live guest `g` is pruned in this plan
/// (ProxOps' marker, no manifest, not `noprune`, not held by the
/// empty-desired guard), so the guest's own prune runs after it as a plain
/// guest's: PVE destroys a guest under HA only with `purge` (qemu-server
/// `API2/Qemu.pm` `destroy_vm`: "unable to remove VM … - used in HA
/// resources and purge parameter not set").
pub(crate) fn ha_resource_goes_first(
    desired: &ClusterDesired,
    live: &LiveSnapshot,
    policy: &Policy,
    g: &proxops_model::live::LiveGuest,
) -> bool {
    let kind = if g.guest_type == proxops_model::live::GuestType::Lxc {
        Kind::LXC
    } else {
        Kind::VM
    };
    let sid = rows::ha_sid(kind, g.vmid);
    let Ok(listing) = live.cluster.listing(Kind::HAResource) else {
        return false;
    };
    let marked = listing
        .get(&sid)
        .is_some_and(|o| o.owner() == Owner::Marked { noprune: false });
    let manifests: Vec<String> = desired
        .objects
        .values()
        .filter(|o| o.r#ref.kind == Kind::HAResource)
        .filter_map(|o| rows::id_of(o, &desired.objects))
        .collect();
    marked && !manifests.contains(&sid) && (!manifests.is_empty() || policy.allow_empty_prune)
}

/// The replication jobs of the live guest `vmid` when every one of them is
/// going: PVE is removing it (`remove_job`), or it is ProxOps' (marker,
/// not `noprune`), has no manifest and is pruned in this plan (not held by
/// the empty-desired guard). PVE destroys a guest with a listed job only
/// with `purge` (pve-guest-common `ReplicationConfig.pm`
/// `check_for_existing_jobs`) and removes a deleted job in the background,
/// so the guest's prune waits for a later cycle instead of being a
/// person's. `None`: no jobs, a job that stays, or the jobs are unknown.
pub(crate) fn replication_goes_first(
    desired: &ClusterDesired,
    live: &LiveSnapshot,
    policy: &Policy,
    vmid: proxops_model::names::Vmid,
) -> Option<Vec<String>> {
    let listing = live.cluster.listing(Kind::ReplicationJob).ok()?;
    let wanted: Vec<String> = desired
        .objects
        .values()
        .filter(|o| o.r#ref.kind == Kind::ReplicationJob)
        .filter_map(|o| rows::id_of(o, &desired.objects))
        .collect();
    let guarded = wanted.is_empty() && !policy.allow_empty_prune;
    let guest = vmid.to_string();
    let jobs: Vec<&LiveObject> = listing
        .values()
        .filter(|l| l.get("guest") == Some(guest.as_str()))
        .collect();
    let going = |l: &LiveObject| {
        super::being_removed(l)
            || (l.owner() == (Owner::Marked { noprune: false })
                && !guarded
                && !wanted.contains(&super::identity(Kind::ReplicationJob, l)))
    };
    (!jobs.is_empty() && jobs.iter().all(|l| going(l)))
        .then(|| jobs.iter().map(|l| l.id.clone()).collect())
}
