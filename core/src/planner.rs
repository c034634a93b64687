//! The planner proper: fills a `Plan` from desired state and a live
//! snapshot. The rails it keeps are listed in `plan`'s module docs.

use std::collections::{BTreeMap, BTreeSet};

use crate::action::{
    Action, Anomaly, AnomalyKind, AnomalyType, Change, Impact, Op, SkipReason, Skipped, Target,
    Work,
};
use crate::plan::{AbortCause, Plan, Policy};
use proxops_model::config::RestartPolicy;
use proxops_model::hash::{Fnv, FnvMap};
use proxops_model::live::{GuestType, LiveConfig, LiveGuest, LiveSnapshot, NodeState, Power};
use proxops_model::manifest::{PowerState, Spec};
use proxops_model::names::{Kind, NodeName, Ref, ResourceName, Vmid};
use proxops_model::repo::{ClusterDesired, DesiredObject};
use proxops_translate::drift::{self, Context, Drift};

/// Said of a config write PVE's answer gave no digest for: it goes
/// without optimistic concurrency (real PVE lists the digest in
/// `/pending`, pve-guest-common `GuestHelpers.pm`
/// `config_with_pending_array`).
const NO_DIGEST: &str = "; sent without a digest (PVE's answer carried none), so an edit made on PVE in between is not detected";

/// The guest family a kind belongs to: PVE names are claimed per family (a
/// TemplateVM's guest is a plain VM until it is marked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Family {
    Qemu,
    Lxc,
}

impl Family {
    fn of_type(t: GuestType) -> Family {
        match t {
            GuestType::Qemu => Family::Qemu,
            GuestType::Lxc => Family::Lxc,
        }
    }
}

fn guest_type_of(kind: Kind) -> GuestType {
    if kind.is_lxc() {
        GuestType::Lxc
    } else {
        GuestType::Qemu
    }
}

/// An action on a live guest of `obj`, with no changes and no reason yet.
fn on_guest(obj: &DesiredObject, live: &LiveGuest, op: Op, impact: Impact, work: Work) -> Action {
    Action {
        op,
        kind: obj.r#ref.kind,
        name: obj.r#ref.name.as_str().to_owned(),
        node: live.node.clone(),
        target: Target::Guest(live.vmid),
        impact,
        changes: Vec::new(),
        reason: String::new(),
        level: obj.level,
        deps: obj.deps.iter().cloned().collect(),
        object: Some(obj.r#ref.clone()),
        work,
    }
}

fn live_kind(g: &LiveGuest) -> Kind {
    match (g.guest_type, g.template) {
        (GuestType::Qemu, false) => Kind::VM,
        (GuestType::Qemu, true) => Kind::TemplateVM,
        (GuestType::Lxc, false) => Kind::LXC,
        (GuestType::Lxc, true) => Kind::TemplateCT,
    }
}

/// Whether a manifest may act on the live guest at its vmid: the guest
/// carries the ownership tag, or the manifest is the one `adopt` wrote for
/// this very vmid (its first update adds the tag: the claim).
fn may_act_on(obj: &DesiredObject, live: &LiveGuest, case_sensitive: bool) -> bool {
    claims(obj, live, live.is_owned_in(case_sensitive))
}

/// [`may_act_on`], the guest's ownership tag already read (`owned`): a
/// tagged guest, or the one the manifest adopted by its vmid.
fn claims(obj: &DesiredObject, live: &LiveGuest, owned: bool) -> bool {
    owned || obj.metadata.adopted_vmid() == Some(live.vmid)
}

fn desired_power(spec: &Spec) -> Option<PowerState> {
    match spec {
        Spec::Vm(v) => Some(v.state.unwrap_or(PowerState::Started)),
        Spec::Lxc(l) => Some(l.state.unwrap_or(PowerState::Started)),
        _ => None,
    }
}

struct Builder<'a> {
    desired: &'a ClusterDesired,
    live: &'a LiveSnapshot,
    ctx: &'a Context<'a>,
    plan: Plan,
    /// Artifacts whose download this plan schedules, per node.
    downloads: BTreeSet<(Ref, NodeName)>,
    /// Artifacts (and nodes) whose download PVE would refuse: the guests
    /// that need them wait, naming why.
    refused_downloads: BTreeSet<(Ref, NodeName)>,
    /// Live guests by vmid (ids are unique across a PVE cluster).
    by_vmid: BTreeMap<Vmid, &'a LiveGuest>,
    nodes: NodeStates<'a>,
    policy: &'a Policy,
}

/// `LiveSnapshot::node_state` by a hash of the node's name, read for
/// every guest: the ordered map compared names byte by byte at each
/// level (3% of planning 10,000 guests).
struct NodeStates<'a>(FnvMap<&'a str, NodeState>);

impl<'a> NodeStates<'a> {
    fn of(live: &'a LiveSnapshot) -> NodeStates<'a> {
        NodeStates(live.nodes.iter().map(|(n, s)| (n.as_str(), *s)).collect())
    }

    /// As `LiveSnapshot::node_state`: a node PVE did not list is unknown.
    fn get(&self, node: &NodeName) -> NodeState {
        self.0
            .get(node.as_str())
            .copied()
            .unwrap_or(NodeState::Unknown)
    }
}

/// Plans one cluster. `live` must come from a read that succeeded as a
/// whole (a failed `/cluster/resources` read aborts the cluster instead).
pub fn plan(
    desired: &ClusterDesired,
    live: &LiveSnapshot,
    ctx: &Context<'_>,
    policy: &Policy,
) -> Plan {
    // Fail closed: a guest config that could not be read on a node that is
    // up means this cluster's picture of PVE is incomplete, so the cluster
    // does nothing this cycle (no create, update or prune on a partial
    // read). Guests on an offline node are a different matter: nothing can
    // be done there anyway, and the other nodes go on.
    let nodes = NodeStates::of(live);
    let unreadable: Vec<&proxops_model::live::ReadFailure> = live
        .guests
        .values()
        .filter(|g| policy.allows(&g.node) && nodes.get(&g.node) == NodeState::Online)
        .filter_map(|g| g.config.as_ref().err())
        .collect();
    if let Some(first) = unreadable.first() {
        return Plan::aborted(
            desired.name.clone(),
            AbortCause::PveRead,
            format!(
                "pve inventory read failed: {}: {} ({} guest config(s) unreadable); nothing is planned for this cluster this cycle",
                first.what,
                first.message,
                unreadable.len()
            ),
        );
    }
    let mut b = Builder {
        desired,
        live,
        ctx,
        plan: Plan {
            cluster: desired.name.clone(),
            abort: None,
            // Sized once: growing a vector of thousands of actions copies
            // it over and over, which dominated large plans.
            actions: Vec::with_capacity(desired.objects.len() + live.guests.len()),
            skipped: Vec::new(),
            deferred: Vec::new(),
            anomalies: Vec::new(),
            self_guests: Vec::new(),
            diagnostics: Vec::new(),
            rollout: Default::default(),
            not_considered: Vec::new(),
        },
        downloads: BTreeSet::new(),
        refused_downloads: BTreeSet::new(),
        by_vmid: live.guests.values().map(|g| (g.vmid, g)).collect(),
        nodes,
        policy,
    };
    // Artifacts first: guests check whether their prerequisites are present
    // or about to be downloaded.
    for obj in desired
        .objects
        .values()
        .filter(|o| o.r#ref.kind.is_artifact())
    {
        b.artifact(obj);
    }
    for obj in desired.objects.values().filter(|o| o.r#ref.kind.is_guest()) {
        b.guest(obj);
    }
    b.prunes(policy);
    let mut plan = b.plan;
    crate::cluster::plan::plan(&mut plan, desired, live, policy);
    crate::firewall_plan::plan::plan(&mut plan, desired, live, policy);
    crate::host::guard(&mut plan, live, &policy.host);
    crate::hold::guard(&mut plan, desired, &policy.holds, policy.now);
    paused_guard(&mut plan, live);
    sort_actions(&mut plan.actions);
    plan.deferred
        .sort_by(|a, b| (&a.node, &a.target).cmp(&(&b.node, &b.target)));
    plan.skipped.sort();
    plan.skipped.dedup();
    plan.anomalies.sort();
    plan.anomalies.dedup();
    plan.rollout = crate::rollout::Rollout::of(
        &plan.actions,
        |a| crate::rollout::disruption_group(desired, a),
        &policy.disruption,
    );
    plan
}

/// A paused VM (QEMU `paused`, `prelaunch`, `suspended`) refuses shutdown
/// and reboot (qemu-server `API2/Qemu.pm` `vm_shutdown`, `vm_reboot`: "VM
/// is paused - cannot shutdown"): each of its disruptive actions becomes a
/// skipped entry saying so; a write PVE applies live still goes.
fn paused_guard(plan: &mut Plan, live: &LiveSnapshot) {
    if live.paused.is_empty() {
        return;
    }
    let (held, kept): (Vec<Action>, Vec<Action>) = std::mem::take(&mut plan.actions)
        .into_iter()
        .partition(|a| {
            matches!(a.target, Target::Guest(v) if live.paused.contains(&v))
                && (crate::rollout::is_disruptive(a)
                    || matches!(
                        a.work,
                        Work::Delete {
                            stop_first: true,
                            ..
                        }
                    ))
        });
    plan.actions = kept;
    for a in held {
        plan.skipped.push(Skipped {
            kind: a.kind,
            name: a.name.clone(),
            node: a.node.clone(),
            id: a.target.clone(),
            reason: SkipReason::Paused {
                op: a.op.as_str().to_owned(),
            },
        });
    }
}

/// Deterministic order (§13.7): creates before prunes; by dependency level,
/// action rank, node, target; prunes in reverse dependency order.
pub fn sort_actions(actions: &mut [crate::action::Action]) {
    // Their positions are sorted, then each action moved once: an action
    // is large, and a sort moving actions moved each many times.
    // The order is (tier, level, rank, node, target, name). The first four
    // are read once per action into two numbers: the node as its place
    // among the plan's node names, which orders as the names do, so most
    // comparisons never compare text.
    let mut nodes: Vec<&NodeName> = actions.iter().map(|a| &a.node).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let keys: Vec<(u64, usize)> = actions
        .iter()
        .map(|a| {
            let prune = a.op == Op::Prune;
            let level = if prune { u32::MAX - a.level } else { a.level };
            // Always found: `nodes` holds every action's node.
            let node = nodes.binary_search(&&a.node).unwrap_or(0);
            (
                (u64::from(prune) << 40) | (u64::from(level) << 8) | u64::from(a.op.rank()),
                node,
            )
        })
        .collect();
    let mut order: Vec<usize> = (0..actions.len()).collect();
    order.sort_by(|&i, &j| {
        let (a, b) = (&actions[i], &actions[j]);
        keys[i]
            .cmp(&keys[j])
            .then_with(|| (&a.target, &a.name).cmp(&(&b.target, &b.name)))
    });
    permute(actions, order);
}

/// Puts the item at `order[k]` at position `k`, following each cycle of
/// the permutation with swaps.
fn permute<T>(items: &mut [T], mut order: Vec<usize>) {
    for i in 0..order.len() {
        let mut j = i;
        while order[j] != i {
            let next = order[j];
            items.swap(j, next);
            order[j] = j;
            j = next;
        }
        order[j] = j;
    }
}

/// What a config update planned for the rest of a guest's actions.
struct Updated {
    /// A stop for `state: stopped` is part of the update.
    power_done: bool,
    /// The update's changes take a reboot to apply.
    reboot_after: bool,
    /// The update stops the guest (applying what is pending).
    stops: bool,
}

/// A guest's kind, name, node and id as actions name them.
fn guest_names<'o>(
    obj: &'o DesiredObject,
    live: &'o LiveGuest,
) -> (Kind, &'o str, &'o NodeName, Vmid, Vmid) {
    (
        obj.r#ref.kind,
        obj.r#ref.name.as_str(),
        &live.node,
        live.vmid,
        live.vmid,
    )
}

impl<'a> Builder<'a> {
    /// What desired state claims: every vmid cluster-wide (ids are unique
    /// across a PVE cluster, so a migrated guest is still ours) and every
    /// PVE name of its family, with the object that claims it.
    /// The names are borrowed and hashed: only looked up, never listed.
    #[allow(clippy::type_complexity)] // two sets, read once by `prunes`
    fn claimed(&self) -> (BTreeSet<Vmid>, FnvMap<(Family, &'a str), (&'a Ref, Vmid)>) {
        let mut claimed_ids = BTreeSet::new();
        let mut claimed_names: FnvMap<(Family, &'a str), (&'a Ref, Vmid)> =
            FnvMap::with_capacity_and_hasher(self.desired.objects.len(), Fnv);
        for o in self.desired.objects.values() {
            if let Some((_, vmid)) = o.spec.guest_id() {
                claimed_ids.insert(vmid);
                let fam = if o.r#ref.kind.is_lxc() {
                    Family::Lxc
                } else {
                    Family::Qemu
                };
                let pve_name = match &o.spec {
                    Spec::Vm(v) | Spec::TemplateVm(v) => v
                        .pve_name
                        .as_deref()
                        .unwrap_or_else(|| o.r#ref.name.as_str()),
                    Spec::Lxc(l) | Spec::TemplateCt(l) => l
                        .dns
                        .as_ref()
                        .and_then(|d| d.hostname.as_deref())
                        .unwrap_or_else(|| o.r#ref.name.as_str()),
                    _ => continue,
                };
                claimed_names
                    .entry((fam, pve_name))
                    .or_insert((&o.r#ref, vmid));
            }
        }
        (claimed_ids, claimed_names)
    }

    /// The live guest at `vmid` on `node`, found by its id (the snapshot's
    /// own look-up clones the node's name for its key): a snapshot's guests
    /// are keyed by their own node and id, so no guest with that id is no
    /// guest there. The snapshot is asked when the id's guest (the last,
    /// should PVE list an id twice) is on another node.
    fn live_guest(&self, node: &NodeName, vmid: Vmid) -> Option<&'a LiveGuest> {
        match self.by_vmid.get(&vmid) {
            Some(g) if g.node == *node => Some(*g),
            Some(_) => self.live.guest(node, vmid),
            None => None,
        }
    }

    /// The live guest at `vmid`, its config and whether it carries the
    /// ownership tag, when the manifest may act on it; otherwise what stands in the way is recorded (a skip, an
    /// anomaly, or a create when PVE holds no guest there) and `None`.
    fn admitted(
        &mut self,
        obj: &DesiredObject,
        node: &NodeName,
        vmid: Vmid,
    ) -> Option<(&'a LiveGuest, &'a LiveConfig, bool)> {
        let kind = obj.r#ref.kind;
        let name = obj.r#ref.name.as_str();
        let id = vmid;
        if self.nodes.get(node) != NodeState::Online {
            self.skip(
                kind,
                name,
                node,
                Target::Guest(id),
                SkipReason::NodeOffline { node: node.clone() },
            );
            return None;
        }
        let Some(live) = self.live_guest(node, vmid) else {
            if let Some(elsewhere) = self.by_vmid.get(&vmid).copied() {
                if !may_act_on(obj, elsewhere, self.desired.tag_case_sensitive) {
                    self.not_owned(obj, node, elsewhere);
                    return None;
                }
                self.anomaly(AnomalyType::NeedsPerson, (kind, name, node, id),
                    None,
                    format!(
                        "vmid {vmid} exists on node {} (\"{}\"), not on {node}: migrate it back or change spec.node; ProxOps will not create a second guest",
                        elsewhere.node, elsewhere.name
                    ),
                );
                return None;
            }
            self.create(obj, node);
            return None;
        };
        // The ownership tag read once, for every check below and the
        // caller's.
        let owned = live.is_owned_in(self.desired.tag_case_sensitive);
        if !claims(obj, live, owned) {
            self.not_owned(obj, node, live);
            return None;
        }
        let config = match &live.config {
            Ok(c) => c,
            Err(f) => {
                self.skip(
                    kind,
                    name,
                    node,
                    Target::Guest(id),
                    SkipReason::ConfigUnreadable {
                        message: f.message.clone(),
                    },
                );
                return None;
            }
        };
        if live.guest_type != guest_type_of(kind) {
            self.anomaly(AnomalyType::NeedsPerson, (kind, name, node, id),
                None,
                format!("vmid {vmid} on PVE is a {} but the manifest is a {kind}: change the manifest's kind or remove the guest by hand", live_kind(live)),
            );
            return None;
        }
        if live.template && !kind.is_template() {
            let (demote, want) = if kind.is_lxc() {
                ("TemplateCT", "LXC")
            } else {
                ("TemplateVM", "VM")
            };
            self.anomaly(AnomalyType::NeedsPerson, (kind, name, node, id),
                Some("template".into()),
                format!("PVE holds a template at vmid {vmid} but the manifest is a {want}: PVE cannot turn a template back into a guest; change the kind to {demote} or recreate it by hand"),
            );
            return None;
        }
        if owned && let Some(lock) = live.lock() {
            // PVE refuses config changes and power actions on a locked
            // guest ("VM is locked (backup)": qemu-server `QemuConfig.pm`
            // `check_lock`); trying every cycle only fails.
            self.skip(
                kind,
                name,
                node,
                Target::Guest(id),
                SkipReason::Locked {
                    lock: lock.to_owned(),
                },
            );
            return None;
        }
        if live.power == Power::Unknown && !live.template {
            self.skip(
                kind,
                name,
                node,
                Target::Guest(id),
                SkipReason::PowerUnknown,
            );
            return None;
        }
        Some((live, config, owned))
    }
}

impl Builder<'_> {
    fn skip(&mut self, kind: Kind, name: &str, node: &NodeName, id: Target, reason: SkipReason) {
        self.plan.skipped.push(Skipped {
            kind,
            name: name.to_owned(),
            node: node.clone(),
            id,
            reason,
        });
    }

    fn anomaly(
        &mut self,
        t: AnomalyType,
        (kind, name, node, id): (Kind, &str, &NodeName, Vmid),
        field: Option<String>,
        message: String,
    ) {
        self.plan.anomalies.push(Anomaly {
            anomaly: t.into(),
            kind: Some(kind),
            name: Some(name.to_owned()),
            node: Some(node.clone()),
            id: Some(Target::Guest(id)),
            field,
            message,
        });
    }

    /// A manifest's vmid is held by a guest ProxOps does not own: nothing
    /// is written, stopped, updated or created for it.
    fn not_owned(&mut self, obj: &DesiredObject, node: &NodeName, live: &LiveGuest) {
        let tagged = if live.has_legacy_tag() {
            "carries no proxops tag (only the old pveconform tag)"
        } else {
            "carries no proxops tag"
        };
        self.anomaly(
            AnomalyType::NeedsPerson,
            (obj.r#ref.kind, obj.r#ref.name.as_str(), node, live.vmid),
            None,
            // Joined from its parts without `format!`: one message per
            // guest a manifest collides with, every plan.
            [
                "vmid ",
                &live.vmid.to_string(),
                " is held by ",
                live_kind(live).as_str(),
                " \"",
                &live.display_name(),
                "\" on node ",
                live.node.as_str(),
                ", which ",
                tagged,
                ": ProxOps never takes over a guest it does not own (no stop, update or create); give ",
                obj.r#ref.kind.as_str(),
                "/",
                obj.r#ref.name.as_str(),
                " a free vmid, or bring the guest under ProxOps with `proxops adopt`, the one way to claim it",
            ]
            .concat(),
        );
    }

    /// The first cycle of an adopted guest (its manifest names this vmid in
    /// `proxops/adopted-vmid`) that does not carry the tag yet: one live
    /// write that adds the tag to the guest's own tags, the claim, and
    /// nothing else: no other key, no stop, no power change. Only the
    /// manifest `adopt` wrote for this very guest claims it: one that
    /// differs from the guest in anything but the ownership tag (another
    /// name, other tags, more memory: a hand-written claim) is an anomaly,
    /// and nothing is written. An annotation can so never stop,
    /// reconfigure or rename a guest ProxOps does not own.
    fn claim(
        &mut self,
        obj: &DesiredObject,
        live: &LiveGuest,
        digest: Option<String>,
        d: &drift::Drift,
    ) {
        let mut kept = live.tags.clone();
        if let Ok(tag) = proxops_model::wire::Tag::new(proxops_model::manifest::OWNERSHIP_TAG) {
            kept.insert(tag);
        }
        let case_sensitive = self.desired.tag_case_sensitive;
        let kept = kept.as_pve_stores(case_sensitive);
        let wanted = d
            .params
            .get("tags")
            .and_then(|t| proxops_model::wire::TagSet::parse(t.expose()).ok())
            .map(|t| t.as_pve_stores(case_sensitive));
        // What adopt wrote differs from the guest only where adopt said so
        // (a gap): never its PVE name, never its tags, never in a way that
        // takes a running guest down once it is ProxOps'.
        let running = live.power == Power::Running;
        let mut differ: Vec<&str> = d
            .changes
            .iter()
            .filter(|c| {
                matches!(c.field.as_str(), "name" | "hostname")
                    || (running && c.field != "tags" && c.impact != Some(Impact::Live))
            })
            .map(|c| c.field.as_str())
            .collect();
        if wanted.as_ref().is_some_and(|w| *w != kept) {
            differ.push("tags");
        }
        let Some(change) = d.changes.iter().find(|c| c.field == "tags") else {
            return;
        };
        if let Some(first) = differ.first() {
            self.anomaly(
                AnomalyType::NeedsPerson,
                (obj.r#ref.kind, obj.r#ref.name.as_str(), &live.node, live.vmid),
                Some((*first).to_owned()),
                format!(
                    "{} names vmid {} in {}, but it is not that guest as `proxops adopt` wrote it ({} differ{}: a rename, other tags, or a change that would take the running guest down): ProxOps claims an untagged guest only with the manifest adopt wrote for it, keeping its tags; nothing is written. Run `proxops adopt` for vmid {} again, or remove the annotation",
                    obj.r#ref,
                    live.vmid,
                    proxops_model::manifest::ANNOTATION_ADOPTED_VMID,
                    differ.join(", "),
                    if differ.len() == 1 { "s" } else { "" },
                    live.vmid
                ),
            );
            return;
        }
        let mut params = crate::action::Params::new();
        params.push("tags", kept.to_wire());
        self.plan.actions.push(Action {
            changes: vec![Change {
                to: Some(kept.to_wire()),
                ..change.clone()
            }],
            reason: {
                let mut reason = format!(
                    "{}: claim: adds the proxops tag to the guest's own tags (proxops/adopted-vmid)",
                    obj.r#ref
                );
                if digest.as_deref().is_none_or(str::is_empty) {
                    reason.push_str(NO_DIGEST);
                }
                reason
            },
            ..on_guest(
                obj,
                live,
                Op::Update,
                Impact::Live,
                Work::UpdateConfig {
                    guest_type: live.guest_type,
                    params,
                    delete: Vec::new(),
                    digest,
                    stop_first: false,
                    restart_after: false,
                    ha: None,
                },
            )
        });
    }

    fn artifact(&mut self, obj: &DesiredObject) {
        let Some(spec) = obj.spec.artifact() else {
            return;
        };
        let kind = obj.r#ref.kind;
        let content = kind.content_type().unwrap_or("iso");
        for node in spec.all_nodes() {
            let target = Target::File {
                storage: spec.storage.clone(),
                filename: spec.filename.clone(),
            };
            let id = target.clone();
            match self.live.storage_content(&node, &spec.storage) {
                Some(Ok(c)) if c.has_file(content, &spec.filename) => {}
                Some(Ok(_)) if !self.storage_takes(&spec.storage, content) => {
                    self.refuse_download(obj, &node, content, target);
                }
                Some(Ok(_)) => {
                    let params = drift::download_params(obj);
                    let changes = params.as_new_changes();
                    self.downloads.insert((obj.r#ref.clone(), node.clone()));
                    self.plan.actions.push(Action {
                        op: Op::Download,
                        kind,
                        name: obj.r#ref.name.as_str().to_owned(),
                        node: node.clone(),
                        target,
                        impact: Impact::Live,
                        changes,
                        reason: format!(
                            "{}: not in storage {} on {node}; will download",
                            obj.r#ref, spec.storage
                        ),
                        level: obj.level,
                        deps: obj.deps.iter().cloned().collect(),
                        object: Some(obj.r#ref.clone()),
                        work: Work::Download {
                            storage: spec.storage.clone(),
                            params,
                        },
                    });
                }
                Some(Err(f)) => self.skip(
                    kind,
                    obj.r#ref.name.as_str(),
                    &node,
                    id,
                    SkipReason::StorageUnreadable {
                        message: f.message.clone(),
                        storage: spec.storage.clone(),
                        filename: spec.filename.clone(),
                    },
                ),
                None => self.skip(
                    kind,
                    obj.r#ref.name.as_str(),
                    &node,
                    id,
                    SkipReason::StorageNotRead {
                        node: node.clone(),
                        storage: spec.storage.clone(),
                        filename: spec.filename.clone(),
                    },
                ),
            }
        }
    }

    /// Whether the artifact `dep` is declared on `node` (its `spec.nodes`):
    /// one that is not is never downloaded there by ProxOps.
    fn declared_on(&self, dep: &Ref, node: &NodeName) -> bool {
        self.desired
            .get(dep)
            .and_then(|o| o.spec.artifact())
            .is_none_or(|a| a.all_nodes().contains(node))
    }

    /// Whether `storage` may hold files of `content` type, as far as this
    /// cycle's read says (a storage it did not list is not judged).
    fn storage_takes(&self, storage: &proxops_model::names::StorageId, content: &str) -> bool {
        self.live
            .storage_contents
            .get(storage)
            .is_none_or(|types| types.contains(content))
    }

    /// A download PVE refuses, planned as a `needs_person` anomaly instead:
    /// `download-url` dies with "storage '…' is not configured for
    /// content-type '…'" unless the storage's `content` holds the type
    /// (pve-storage `PVE/API2/Storage/Status.pm`, `download_url`), which
    /// `/cluster/resources` lists for each storage.
    fn refuse_download(
        &mut self,
        obj: &DesiredObject,
        node: &NodeName,
        content: &str,
        target: Target,
    ) {
        let Some(spec) = obj.spec.artifact() else {
            return;
        };
        let storage = &spec.storage;
        let configured = self.live.storage_contents.get(storage);
        let configured = configured.map(|t| t.iter().cloned().collect::<Vec<_>>().join(","));
        let configured = configured.unwrap_or_default();
        self.refused_downloads
            .insert((obj.r#ref.clone(), node.clone()));
        self.plan.anomalies.push(Anomaly {
            anomaly: AnomalyKind::NeedsPerson,
            kind: Some(obj.r#ref.kind),
            name: Some(obj.r#ref.name.as_str().to_owned()),
            node: Some(node.clone()),
            id: Some(target),
            field: None,
            message: format!(
                "{}: storage {storage} on {node} is not configured for {content} content (its content: {configured}), so PVE refuses the download: set spec.storage to a storage with {content} content, or add {content} to {storage}'s content; guests that need it wait",
                obj.r#ref
            ),
        });
    }

    /// Whether an artifact prerequisite is on `node` or will be downloaded
    /// there earlier in this plan; `Err` says why not.
    fn artifact_ready(&self, dep: &Ref, node: &NodeName) -> Result<(), SkipReason> {
        let Some(obj) = self.desired.get(dep) else {
            return Ok(());
        };
        let Some(spec) = obj.spec.artifact() else {
            return Ok(());
        };
        if self.downloads.contains(&(dep.clone(), node.clone())) {
            return Ok(());
        }
        if self
            .refused_downloads
            .contains(&(dep.clone(), node.clone()))
        {
            return Err(SkipReason::ArtifactRefused {
                artifact: dep.clone(),
                node: node.clone(),
            });
        }
        let content = dep.kind.content_type().unwrap_or("iso");
        match self.live.storage_content(node, &spec.storage) {
            Some(Ok(c)) if c.has_file(content, &spec.filename) => Ok(()),
            Some(Ok(_)) => Err(SkipReason::ArtifactNotPlaced {
                artifact: dep.clone(),
                node: node.clone(),
            }),
            Some(Err(_)) | None => Err(SkipReason::ArtifactUnknown {
                artifact: dep.clone(),
                node: node.clone(),
            }),
        }
    }

    fn guest(&mut self, obj: &DesiredObject) {
        let Some((node, vmid)) = obj.spec.guest_id() else {
            return;
        };
        let Some((live, config, owned)) = self.admitted(obj, node, vmid) else {
            return;
        };
        let (kind, name) = (obj.r#ref.kind, obj.r#ref.name.as_str());
        match drift::guest_drift(obj, self.ctx, live, config) {
            Err(e) => {
                self.anomaly(
                    AnomalyType::NeedsPerson,
                    (kind, name, node, vmid),
                    None,
                    e.to_string(),
                );
            }
            Ok(d) if !owned => {
                self.plan.anomalies.extend(d.anomalies.iter().cloned());
                self.claim(obj, live, config.digest.clone(), &d);
            }
            Ok(d) => {
                self.plan.anomalies.extend(d.anomalies.iter().cloned());
                self.owned_guest(obj, live, config, &d);
            }
        }
    }

    /// An owned guest with its drift: the config update, a restart for
    /// what PVE holds pending, grown disks, template marking and power.
    fn owned_guest(
        &mut self,
        obj: &DesiredObject,
        live: &LiveGuest,
        config: &LiveConfig,
        d: &Drift,
    ) {
        let (kind, name, node, vmid, id) = guest_names(obj, live);
        let running = live.power == Power::Running;
        let want_power = desired_power(&obj.spec);
        let deps: Vec<Ref> = obj.deps.iter().cloned().collect();
        let mut refusals = proxops_translate::refuse::update(live, config, d, self.policy.root_pam);
        if kind.is_template() && !live.template {
            refusals.extend(proxops_translate::refuse::mark_template(live, config));
        }
        if self.refused(obj, live, refusals) {
            return;
        }
        // The HA manager owns the power of a guest it manages
        // (not `ignored`): power goes through it.
        let ha = live.ha_sid();
        let Some(Updated {
            power_done,
            reboot_after,
            stops,
        }) = self.config_update(obj, live, config, d, ha.clone())
        else {
            return;
        };
        let restart = obj
            .metadata
            .restart_policy()
            .unwrap_or(self.policy.restart_policy);
        // A stop (planned, or for `state: stopped`) applies what PVE
        // holds pending; a template never runs.
        let pending = config.pending_keys();
        if running
            && !stops
            && !kind.is_template()
            && want_power != Some(PowerState::Stopped)
            && (reboot_after || !pending.is_empty())
        {
            match restart {
                RestartPolicy::Reboot => {
                    self.reboot(obj, live, config, (d, ha.clone()), deps.clone());
                }
                RestartPolicy::Never if d.changes.is_empty() => {
                    self.skip(
                        kind,
                        name,
                        node,
                        Target::Guest(id),
                        SkipReason::PendingRestart {
                            keys: pending.iter().map(|k| (*k).to_owned()).collect(),
                        },
                    );
                }
                RestartPolicy::Never => {}
            }
        }
        self.grow(obj, live, config, &d.grows);
        if kind.is_template() && !live.template {
            if running && ha.is_some() {
                self.ha_anomaly(obj, live, "marking it a template (a stop first)");
                return;
            }
            self.mark_template(obj, live, config, d);
            return;
        }
        if kind.is_template() || power_done {
            return;
        }
        let power = match (want_power, live.power) {
            (Some(PowerState::Started), Power::Stopped) => Some((Op::Start, "stopped", "running")),
            (Some(PowerState::Stopped), Power::Running) => Some((Op::Stop, "running", "stopped")),
            _ => None,
        };
        if let Some((op, from, to)) = power {
            self.plan.actions.push(Action {
                op,
                kind,
                name: name.to_owned(),
                node: node.clone(),
                target: Target::Guest(vmid),
                impact: Impact::Live,
                changes: vec![Change::new("status", Some(from.into()), Some(to.into()))],
                reason: format!("{}: power \"{from}\" -> \"{to}\"", obj.r#ref),
                level: obj.level,
                deps,
                object: Some(obj.r#ref.clone()),
                work: if op == Op::Start {
                    Work::Start {
                        guest_type: live.guest_type,
                        ha,
                    }
                } else {
                    Work::Stop {
                        guest_type: live.guest_type,
                        ha,
                        digest: seen_digest(config, d),
                    }
                },
            });
        }
    }

    /// Marks a plain guest a template (stopping it first when it runs).
    fn mark_template(
        &mut self,
        obj: &DesiredObject,
        live: &LiveGuest,
        config: &LiveConfig,
        d: &Drift,
    ) {
        let (kind, name, node, vmid, _) = guest_names(obj, live);
        let running = live.power == Power::Running;
        let deps: Vec<Ref> = obj.deps.iter().cloned().collect();
        self.plan.actions.push(Action {
            op: Op::MarkTemplate,
            kind,
            name: name.to_owned(),
            node: node.clone(),
            target: Target::Guest(vmid),
            impact: if running {
                Impact::StopStart
            } else {
                Impact::Live
            },
            changes: vec![Change::new("template", Some("0".into()), Some("1".into()))],
            reason: format!(
                "{}: PVE guest is not a template yet; will mark it",
                obj.r#ref
            ),
            level: obj.level,
            deps,
            object: Some(obj.r#ref.clone()),
            work: Work::MarkTemplate {
                guest_type: live.guest_type,
                stop_first: running,
                digest: seen_digest(config, d),
            },
        });
    }

    /// The config update a drift calls for (stopping first when PVE applies
    /// it only at a restart, or for `state: stopped`); `None` when it is
    /// refused as an anomaly and the guest gets nothing else.
    fn config_update(
        &mut self,
        obj: &DesiredObject,
        live: &LiveGuest,
        config: &LiveConfig,
        d: &Drift,
        ha: Option<String>,
    ) -> Option<Updated> {
        let (kind, name, node, vmid, _) = guest_names(obj, live);
        let running = live.power == Power::Running;
        let want_power = desired_power(&obj.spec);
        let deps: Vec<Ref> = obj.deps.iter().cloned().collect();
        let mut power_done = false;
        let mut reboot_after = false;
        let mut stops = false;
        if !d.changes.is_empty() {
            let stop_for_state = running && want_power == Some(PowerState::Stopped);
            let stop_first = running
                && (d.impact == Impact::StopStart
                    || stop_for_state
                    || (kind.is_template() && !live.template));
            if stop_first && ha.is_some() && kind.is_template() && !live.template {
                self.ha_anomaly(obj, live, "marking it a template (a stop first)");
                return None;
            }
            reboot_after = running && d.impact == Impact::Reboot && !stop_first;
            stops = stop_first;
            let restart_after = stop_first && want_power == Some(PowerState::Started);
            let impact = if stop_first {
                Impact::StopStart
            } else {
                d.impact
            };
            power_done = stop_for_state;
            let mut reason = format!("{}: config drift", obj.r#ref);
            if impact == Impact::StopStart {
                reason.push_str(" (stop-required)");
            }
            if config.digest.as_deref().is_none_or(str::is_empty) {
                reason.push_str(NO_DIGEST);
            }
            self.plan.actions.push(Action {
                op: Op::Update,
                kind,
                name: name.to_owned(),
                node: node.clone(),
                target: Target::Guest(vmid),
                impact,
                changes: d.changes.clone(),
                reason,
                level: obj.level,
                deps: deps.clone(),
                object: Some(obj.r#ref.clone()),
                work: Work::UpdateConfig {
                    guest_type: live.guest_type,
                    params: d.params.clone(),
                    delete: d.delete.clone(),
                    digest: config.digest.clone(),
                    stop_first,
                    restart_after,
                    ha: ha.clone().filter(|_| stop_first),
                },
            });
        }
        Some(Updated {
            power_done,
            reboot_after,
            stops,
        })
    }

    /// Making a running HA-managed guest a template: the HA manager would
    /// stop it, then own the power of a template. ProxOps leaves that to a
    /// person: nothing is done, an anomaly says why.
    fn ha_anomaly(&mut self, obj: &DesiredObject, live: &LiveGuest, what: &str) {
        let state = live.ha_state.as_deref().unwrap_or("");
        self.anomaly(
            AnomalyType::NeedsPerson,
            (obj.r#ref.kind, obj.r#ref.name.as_str(), &live.node, live.vmid),
            None,
            format!(
                "{what} is needed, but vmid {} is HA-managed (hastate {state}): ProxOps does not make a template of a guest the HA manager runs; take the guest out of HA (ha-manager remove), then the next cycle converts it",
                live.vmid
            ),
        );
    }

    /// `status/reboot` for a running guest whose changes PVE holds pending
    /// (or will, once this plan's update is written): the restart applies
    /// them (qemu-server `API2/Qemu.pm` `vm_reboot`).
    fn reboot(
        &mut self,
        obj: &DesiredObject,
        live: &LiveGuest,
        config: &proxops_model::live::LiveConfig,
        (d, ha): (&drift::Drift, Option<String>),
        deps: Vec<Ref>,
    ) {
        let mut changes: Vec<Change> = config
            .pending
            .iter()
            .map(|(k, now)| Change::new(k.clone(), now.clone(), config.get(k).map(str::to_owned)))
            .collect();
        for c in &d.changes {
            if !changes.iter().any(|p| p.field == c.field) {
                changes.push(c.clone());
            }
        }
        changes.sort();
        let keys: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
        self.plan.actions.push(Action {
            reason: format!(
                "{}: pending restart: {} take effect at the next restart (restart-policy reboot)",
                obj.r#ref,
                keys.join(", ")
            ),
            changes,
            deps,
            ..on_guest(
                obj,
                live,
                Op::Reboot,
                Impact::Reboot,
                Work::Reboot {
                    guest_type: live.guest_type,
                    ha,
                    digest: seen_digest(config, d),
                },
            )
        });
    }

    /// PVE would refuse what the object needs ([`proxops_translate::refuse`]): one
    /// `needs_person` anomaly per refusal, and `true` when there is one,
    /// for the caller to plan nothing more for the object.
    fn refused(
        &mut self,
        obj: &DesiredObject,
        live: &LiveGuest,
        refusals: impl IntoIterator<Item = proxops_translate::refuse::Refusal>,
    ) -> bool {
        let mut any = false;
        for r in refusals {
            any = true;
            self.anomaly(
                AnomalyType::NeedsPerson,
                (
                    obj.r#ref.kind,
                    obj.r#ref.name.as_str(),
                    &live.node,
                    live.vmid,
                ),
                r.field,
                r.message,
            );
        }
        any
    }

    /// One `resize` action per volume to grow: PVE grows a disk or mount
    /// point online (qemu-server and pve-container `resize_vm`), so the
    /// impact is live whatever the guest's power. A grow PVE would refuse
    /// is an anomaly instead.
    fn grow(
        &mut self,
        obj: &DesiredObject,
        live: &LiveGuest,
        config: &proxops_model::live::LiveConfig,
        grows: &[drift::DiskGrowth],
    ) {
        for g in grows {
            let refusal = proxops_translate::refuse::grow(live, config, g, self.live);
            if self.refused(obj, live, refusal) {
                continue;
            }
            self.plan.actions.push(Action {
                changes: vec![Change::new(
                    format!("{}.size", g.disk),
                    Some(g.from.to_wire()),
                    Some(g.to.to_wire()),
                )],
                reason: format!(
                    "{}: grow {} from {} to {}",
                    obj.r#ref,
                    g.disk,
                    g.from.to_wire(),
                    g.to.to_wire()
                ),
                ..on_guest(
                    obj,
                    live,
                    Op::Resize,
                    Impact::Live,
                    Work::Resize {
                        guest_type: live.guest_type,
                        disk: g.disk.clone(),
                        size: g.to,
                    },
                )
            });
        }
    }

    /// Where a clone's template is: its live node when PVE has it (ids are
    /// cluster-wide), else the node its manifest puts it on (it is created
    /// earlier in this plan), else the clone's own node.
    fn node_of_source(&self, obj: &DesiredObject, source: Vmid, node: &NodeName) -> NodeName {
        if let Some(live) = self.by_vmid.get(&source) {
            return live.node.clone();
        }
        obj.deps
            .iter()
            .filter(|d| d.kind == Kind::TemplateVM)
            .filter_map(|d| self.desired.objects.get(d)?.spec.guest_id())
            .find(|(_, vmid)| *vmid == source)
            .map_or_else(|| node.clone(), |(n, _)| n.clone())
    }

    /// A clone on another node than its template's: PVE copies the
    /// template's volumes there only from storage every node sees
    /// (qemu-server `API2/Qemu.pm` `clone_vm` with `target`, through
    /// `$check_storage_access_clone`: "can't clone VM to node '<n>' (VM
    /// uses local storage)"). Every volume counts — disks, CD image,
    /// cloud-init drive, EFI and TPM state — and each must be on a storage
    /// `/cluster/resources` lists as shared. A refusal concerns this VM
    /// alone.
    fn clone_across_nodes(
        &self,
        obj: &DesiredObject,
        source: Vmid,
        source_node: &NodeName,
    ) -> Result<(), SkipReason> {
        let unknown = || SkipReason::CloneStorageUnknown {
            template: source,
            template_node: source_node.clone(),
        };
        let volumes: Vec<String> = if let Some(live) = self.by_vmid.get(&source) {
            let cfg = live.config.as_ref().map_err(|_| unknown())?;
            cfg.values
                .iter()
                .filter(|(k, _)| is_volume_key(k))
                .map(|(_, v)| v.to_owned())
                .collect()
        } else {
            // Created earlier in this plan: its create form says where
            // its volumes go.
            let template = obj
                .deps
                .iter()
                .filter(|d| d.kind == Kind::TemplateVM)
                .filter_map(|d| self.desired.objects.get(d))
                .find(|t| t.spec.guest_id().is_some_and(|(_, v)| v == source))
                .ok_or_else(unknown)?;
            let params = drift::create_params(template, self.ctx).map_err(|_| unknown())?;
            params
                .0
                .iter()
                .filter(|(k, _)| is_volume_key(k))
                .map(|(_, v)| v.expose().to_owned())
                .collect()
        };
        match volumes
            .iter()
            .filter_map(|v| volume_storage(v))
            .find(|s| !self.live.is_shared(s))
        {
            Some(storage) => Err(SkipReason::CloneNeedsSharedStorage {
                template: source,
                template_node: source_node.clone(),
                storage,
            }),
            None => Ok(()),
        }
    }

    fn create(&mut self, obj: &DesiredObject, node: &NodeName) {
        let kind = obj.r#ref.kind;
        let name = obj.r#ref.name.as_str().to_owned();
        let Some((_, vmid)) = obj.spec.guest_id() else {
            return;
        };
        let id = vmid;
        if !self.artifacts_placed(obj, node) {
            return;
        }
        let deps: Vec<Ref> = obj.deps.iter().cloned().collect();
        let clone_of = obj.spec.vm().and_then(|v| v.clone.clone());
        let start_after = desired_power(&obj.spec) == Some(PowerState::Started);
        let extra = obj
            .spec
            .vm()
            .map(|v| &v.extra)
            .or(obj.spec.lxc().map(|c| &c.extra));
        let with_paths =
            |changes| drift::with_create_paths(kind, extra.unwrap_or(&BTreeMap::new()), changes);
        let built = if clone_of.is_some() {
            drift::clone_params(obj, self.ctx).map(|(source, pve_name, config, delete)| {
                // A clone joins its pool with the clone request, as a
                // create does (qemu-server `clone_vm`: `pool`).
                let pool = crate::cluster::plan::guest_pool(obj, self.desired);
                let mut shown = config.clone();
                if let Some(pool) = &pool {
                    shown.push("pool", pool.clone());
                }
                let changes = with_paths(shown.as_new_changes());
                (
                    Op::Clone,
                    changes,
                    Work::CloneGuest {
                        source_node: self.node_of_source(obj, source, node),
                        source,
                        name: pve_name,
                        config,
                        delete,
                        start_after,
                        pool,
                    },
                )
            })
        } else {
            drift::create_params(obj, self.ctx).map(|mut params| {
                // A guest joins its pool at create (qemu-server and
                // pve-container `create_vm`: `pool`).
                if let Some(pool) = crate::cluster::plan::guest_pool(obj, self.desired) {
                    params.push("pool", pool);
                }
                let changes = with_paths(params.as_new_changes());
                (
                    Op::Create,
                    changes,
                    Work::CreateGuest {
                        guest_type: guest_type_of(kind),
                        params,
                        mark_template: kind.is_template(),
                    },
                )
            })
        };
        match built {
            Err(e) => self.anomaly(
                AnomalyType::NeedsPerson,
                (kind, &name, node, id),
                None,
                format!("cannot create: {e}"),
            ),
            Ok((op, changes, work)) => {
                if let Work::CreateGuest {
                    guest_type, params, ..
                } = &work
                {
                    let refusals = proxops_translate::refuse::create(*guest_type, params);
                    if !refusals.is_empty() {
                        for r in refusals {
                            self.anomaly(
                                AnomalyType::NeedsPerson,
                                (kind, &name, node, id),
                                r.field,
                                format!("cannot create: {}", r.message),
                            );
                        }
                        return;
                    }
                }
                if let Work::CloneGuest {
                    source,
                    source_node,
                    ..
                } = &work
                    && source_node != node
                    && let Err(why) = self.clone_across_nodes(obj, *source, source_node)
                {
                    self.skip(kind, &name, node, Target::Guest(id), why);
                    return;
                }
                let reason = self.create_reason(obj, clone_of.as_ref());
                self.plan.actions.push(Action {
                    op,
                    kind,
                    name,
                    node: node.clone(),
                    target: Target::Guest(vmid),
                    impact: Impact::Live,
                    changes,
                    reason,
                    level: obj.level,
                    deps,
                    object: Some(obj.r#ref.clone()),
                    work,
                });
            }
        }
    }

    /// Whether the artifacts `obj` needs are on `node` (or about to be);
    /// if not, the skip or anomaly that says why it is not created.
    fn artifacts_placed(&mut self, obj: &DesiredObject, node: &NodeName) -> bool {
        let kind = obj.r#ref.kind;
        let name = obj.r#ref.name.as_str();
        let Some((_, id)) = obj.spec.guest_id() else {
            return false;
        };
        for dep in obj.deps.iter().filter(|d| d.kind.is_artifact()) {
            match self.artifact_ready(dep, node) {
                Ok(()) => {}
                // Not declared on the node: no cycle would ever place it
                // there, so waiting for it is not an answer.
                Err(_) if !self.declared_on(dep, node) => {
                    let message = format!(
                        "{}: needs {dep} on node {node}, where the repository does not place it: add {node} to {dep}'s spec.nodes, or put the guest on a node it lists; not created until then",
                        obj.r#ref
                    );
                    self.anomaly(
                        AnomalyType::NeedsPerson,
                        (kind, name, node, id),
                        None,
                        message,
                    );
                    return false;
                }
                Err(why) => {
                    self.skip(kind, name, node, Target::Guest(id), why);
                    return false;
                }
            }
        }
        true
    }

    /// Why a guest is created, naming the template a clone is made from.
    fn create_reason(&self, obj: &DesiredObject, clone_of: Option<&ResourceName>) -> String {
        match (clone_of, obj.r#ref.kind.is_template()) {
            (Some(src), _) => {
                let src_id = self
                    .desired
                    .get(&Ref {
                        kind: Kind::TemplateVM,
                        name: src.clone(),
                    })
                    .and_then(|o| o.spec.guest_id().map(|(_, v)| v.to_string()))
                    .unwrap_or_default();
                format!(
                    "{}: not on PVE; will full-clone from TemplateVM {src} (vmid {src_id})",
                    obj.r#ref
                )
            }
            (None, true) => format!(
                "{}: not on PVE; will create + mark as PVE template",
                obj.r#ref
            ),
            (None, false) => format!("{}: not on PVE; will create", obj.r#ref),
        }
    }

    fn prunes(&mut self, policy: &Policy) {
        let (claimed_ids, claimed_names) = self.claimed();
        let mut candidates: BTreeMap<Kind, Vec<&LiveGuest>> = BTreeMap::new();
        for g in self.live.guests.values() {
            if claimed_ids.contains(&g.vmid) {
                continue;
            }
            if let Some(kind) = self.prune_candidate(g, policy, &claimed_names) {
                candidates.entry(kind).or_default().push(g);
            }
        }
        self.guarded_prunes(candidates, policy);
    }

    /// A live guest no manifest claims: its kind when it may be pruned,
    /// or `None` with the skip or anomaly that says why not.
    fn prune_candidate(
        &mut self,
        g: &LiveGuest,
        policy: &Policy,
        claimed_names: &FnvMap<(Family, &str), (&Ref, Vmid)>,
    ) -> Option<Kind> {
        if !policy.allows(&g.node)
            || self.nodes.get(&g.node) != NodeState::Online
            || g.config.is_err()
        {
            // Never prune what we could not read.
            return None;
        }
        let kind = live_kind(g);
        let display = g.display_name();
        if !g.is_owned_in(self.desired.tag_case_sensitive) {
            let reason = SkipReason::Untagged {
                legacy: g.has_legacy_tag(),
            };
            self.skip(kind, &display, &g.node, Target::Guest(g.vmid), reason);
            return None;
        }
        let fam = Family::of_type(g.guest_type);
        if let Some((r, vmid)) = (!g.name.is_empty())
            .then(|| claimed_names.get(&(fam, g.name.as_str())))
            .flatten()
        {
            // Kept, as a guest whose manifest only changed its vmid may
            // still be the one that serves; but never silently.
            self.anomaly(
                AnomalyType::NeedsPerson,
                (kind, &display, &g.node, g.vmid),
                None,
                format!(
                    "proxops-tagged guest \"{display}\" (vmid {} on node {}) has the PVE name of {r}, whose manifest now says vmid {vmid}: a renumbered manifest leaves the old guest behind; ProxOps neither updates nor prunes it: delete it by hand once vmid {vmid} serves, or set {r}'s spec.vmid back to {}",
                    g.vmid, g.node, g.vmid
                ),
            );
            return None;
        }
        if g.is_prune_protected() {
            self.skip(
                kind,
                &display,
                &g.node,
                Target::Guest(g.vmid),
                SkipReason::PruneProtected,
            );
            return None;
        }
        if let Some(why) = self.refused_prune(g, policy) {
            if let Some(a) = self.after_its_replication_jobs(g, policy) {
                self.plan.deferred.push(a);
                return None;
            }
            self.anomaly(
                AnomalyType::NeedsPerson,
                (kind, &display, &g.node, g.vmid),
                None,
                why,
            );
            return None;
        }
        if let Some(matched) = policy.host.matches(g) {
            // Refused before the budget: a prune that can never happen
            // must not hold back the others.
            let a = self.prune_action(g, "present on PVE (proxops-tagged) but absent in git");
            let me = crate::host::SelfGuest {
                node: g.node.clone(),
                vmid: g.vmid,
                name: display.clone(),
                matched,
            };
            self.plan.anomalies.push(crate::host::refusal(&a, &me));
            return None;
        }
        if let Some(lock) = g.lock() {
            self.skip(
                kind,
                &display,
                &g.node,
                Target::Guest(g.vmid),
                SkipReason::Locked {
                    lock: lock.to_owned(),
                },
            );
            return None;
        }
        Some(kind)
    }

    /// The empty-desired guard, then the budget: which candidates are
    /// pruned this cycle and which are deferred.
    fn guarded_prunes(&mut self, candidates: BTreeMap<Kind, Vec<&LiveGuest>>, policy: &Policy) {
        // The empty-desired guard, per kind: a kind with no manifest left
        // while PVE holds tagged guests of it looks like a bad push (an
        // emptied composition or file), so none of them is pruned, whatever
        // the budget, unless the cluster explicitly allows it.
        let budget = policy.prune_budget as usize;
        let mut kept: Vec<&LiveGuest> = Vec::new();
        for (kind, list) in candidates {
            if self.desired.count(kind) > 0 || policy.allow_empty_prune {
                kept.extend(list);
                continue;
            }
            self.plan.anomalies.push(Anomaly {
                anomaly: AnomalyKind::EmptyDesired,
                kind: Some(kind),
                name: None,
                node: None,
                id: None,
                field: None,
                message: format!(
                    "0 desired {kind} but {} proxops-tagged {kind} on PVE: a composition without any {kind} looks like a bad push, so none is pruned, whatever the prune budget; if removing every {kind} is intended, set allow-empty-prune: true for cluster {} (clusters/{}/config.yaml)",
                    list.len(),
                    self.desired.name,
                    self.desired.name
                ),
            });
            for g in list {
                let a = self.prune_action(
                    g,
                    &format!(
                        "prune deferred: empty-desired guard (no {kind} manifest left in git)"
                    ),
                );
                self.plan.deferred.push(a);
            }
        }
        kept.sort_by_key(|g| (g.node.clone(), g.vmid));
        for (i, g) in kept.into_iter().enumerate() {
            if budget > 0 && i >= budget {
                let a = self.prune_action(
                    g,
                    &format!("prune deferred: over the per-cycle prune budget of {budget}"),
                );
                self.plan.deferred.push(a);
            } else {
                let a = self.prune_action(g, "present on PVE (proxops-tagged) but absent in git");
                self.plan.actions.push(a);
            }
        }
    }

    /// Why PVE would refuse to delete `g`, so ProxOps must not even stop
    /// it: `protection=1` (qemu-server `API2/Qemu.pm` `destroy_vm`:
    /// `check_protection`, "can't remove VM … - protection mode enabled"),
    /// or an HA-managed guest without the cluster's consent to `purge`
    /// ("used in HA resources and purge parameter not set"), or an
    /// HA-managed guest that runs (stopping it is the HA manager's job).
    fn refused_prune(&self, g: &LiveGuest, policy: &Policy) -> Option<String> {
        if g.is_protected() {
            return Some(format!(
                "proxops-tagged guest \"{}\" (vmid {}) is absent in git but has protection=1: PVE refuses to destroy it, so ProxOps neither stops nor deletes it; clear protection on PVE to let it be pruned, or restore its manifest",
                g.display_name(),
                g.vmid
            ));
        }
        if !policy.purge_ha_and_replicated
            && let Some(why) = self.replicated(g)
        {
            return Some(why);
        }
        let state = g.ha_state.as_deref()?;
        if crate::cluster::plan::ha_resource_goes_first(self.desired, self.live, policy, g) {
            // Its HA resource is ProxOps' and pruned in this plan, before
            // it (a higher prune level): then it is a plain guest.
            return None;
        }
        if !policy.purge_ha_and_replicated {
            return Some(format!(
                "proxops-tagged guest \"{}\" (vmid {}) is absent in git but HA-managed (hastate {state}): PVE deletes an HA resource only with purge; remove it from HA by hand, or set purge-ha-and-replicated: true for this cluster",
                g.display_name(),
                g.vmid
            ));
        }
        (g.power != Power::Stopped).then(|| format!(
            "proxops-tagged guest \"{}\" (vmid {}) is absent in git and HA-managed (hastate {state}) and not stopped: ProxOps does not drive HA power, so it is not stopped for the prune; stop it through ha-manager, the next cycle deletes it with purge",
            g.display_name(),
            g.vmid
        ))
    }

    /// The deferred prune of a guest whose replication jobs are all going
    /// ([`crate::cluster::plan::replication_goes_first`]): pruned in a
    /// later cycle, once PVE has removed them.
    fn after_its_replication_jobs(&self, g: &LiveGuest, policy: &Policy) -> Option<Action> {
        if g.is_protected() || policy.purge_ha_and_replicated {
            return None;
        }
        let jobs =
            crate::cluster::plan::replication_goes_first(self.desired, self.live, policy, g.vmid)?;
        Some(self.prune_action(
            g,
            &format!(
                "prune deferred: PVE is removing its replication job(s) {} (ProxOps' own, deleted this cycle or before) and destroys a guest with jobs only with purge; it is pruned once they are gone",
                jobs.join(", ")
            ),
        ))
    }

    /// A guest with replication jobs, or whose jobs could not be read:
    /// PVE destroys it only with `purge` (qemu-server `API2/Qemu.pm`
    /// `destroy_vm`, pve-container `API2/LXC.pm` `destroy_vm`:
    /// `check_for_existing_jobs`, "There is a replication job …"). Said at
    /// plan time, so it is never stopped for a delete that fails.
    fn replicated(&self, g: &LiveGuest) -> Option<String> {
        let name = g.display_name();
        match self.live.replication.of(g.vmid) {
            Ok([]) => None,
            Ok(jobs) => Some(format!(
                "proxops-tagged guest \"{name}\" (vmid {}) is absent in git but has replication job(s) {}: PVE refuses to destroy a replicated guest without purge (\"There is a replication job …\"), so ProxOps neither stops nor deletes it; remove the jobs by hand, or set purge-ha-and-replicated: true for this cluster",
                g.vmid,
                jobs.join(", ")
            )),
            Err(f) => Some(format!(
                "proxops-tagged guest \"{name}\" (vmid {}) is absent in git, but the replication jobs could not be read ({f}): PVE refuses to destroy a replicated guest without purge, so ProxOps neither stops nor deletes it this cycle",
                g.vmid
            )),
        }
    }

    fn prune_action(&self, g: &LiveGuest, reason: &str) -> Action {
        Action {
            op: Op::Prune,
            kind: live_kind(g),
            name: g.display_name(),
            node: g.node.clone(),
            target: Target::Guest(g.vmid),
            impact: Impact::Live,
            changes: Vec::new(),
            reason: reason.to_owned(),
            // Templates are pruned after the guests that may be their clones.
            level: u32::from(!g.template),
            deps: Vec::new(),
            object: None,
            work: Work::Delete {
                guest_type: g.guest_type,
                stop_first: g.power == Power::Running,
                purge: self.policy.purge_ha_and_replicated
                    && (g.ha_state.is_some() || self.live.replication.of(g.vmid) != Ok(&[][..])),
                digest: g.config.as_ref().ok().and_then(|c| c.digest.clone()),
            },
        }
    }
}

/// The config digest a power-off or a template conversion of a guest must
/// still find before it acts: the one the plan read, when no earlier action
/// of this plan writes the guest's config (an update, a resize); else
/// `None`, and only its tags, protection and lock are compared then.
fn seen_digest(config: &proxops_model::live::LiveConfig, d: &drift::Drift) -> Option<String> {
    (d.changes.is_empty() && d.grows.is_empty())
        .then(|| config.digest.clone())
        .flatten()
}

/// A qemu config key that holds a volume (PVE's `foreach_volume`: the
/// drive buses, `efidisk0`, `tpmstate0`).
fn is_volume_key(key: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return true;
    }
    ["ide", "sata", "scsi", "virtio"].iter().any(|bus| {
        key.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The storage a drive value's volume is on (`local-lvm:vm-9000-disk-0,…`,
/// the create form `ceph:8`, `file=…`); `None` for no volume (`none`, a
/// host CD drive `cdrom`) or a host path, which names no storage.
fn volume_storage(value: &str) -> Option<proxops_model::names::StorageId> {
    let first = value.split(',').next()?.trim();
    let volume = first.strip_prefix("file=").unwrap_or(first);
    let (storage, _) = volume.split_once(':')?;
    proxops_model::names::StorageId::new(storage).ok()
}
