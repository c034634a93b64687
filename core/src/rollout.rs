//! How a plan's actions may run at once: the limits on actions in flight
//! (per node, per cluster, downloads per storage), the disruption budget
//! (guests ProxOps makes unavailable at once, per cluster and per
//! disruption group), each action's prerequisites, and the summary a plan
//! rendering shows ("3 stop-start updates, 1 at a time").
//!
//! Values and pure functions only: the execution state machine
//! ([`crate::exec::Execution`]) applies them, the planner summarises them
//! into [`Rollout`], the configuration resolves them. No clock, no threads.
//!
//! **Architecture Invariant:** an action is handed out only after every
//! action it waits for ([`prerequisites`]) has ended; never two actions on
//! one guest or one storage file at once; a prune only after every other
//! action has ended, and prunes of a higher dependency level before those of
//! a lower one (a template outlives its clones).

use std::collections::BTreeMap;

use serde::Serialize;

pub use proxops_model::policy::{
    DEFAULT_DISRUPTION_BUDGET, DEFAULT_DOWNLOADS_PER_STORAGE, DEFAULT_TASKS_PER_CLUSTER,
    DEFAULT_TASKS_PER_NODE, DisruptionBudget, Limits,
};

use crate::action::{Action, Impact, Op, Target, Work};
use proxops_model::hash::{Fnv, FnvMap};
use proxops_model::names::NodeName;
use proxops_model::repo::ClusterDesired;

use proxops_model::manifest::ANNOTATION_DISRUPTION_GROUP as DISRUPTION_GROUP;

/// Whether an action makes a running guest unavailable while it runs.
pub fn is_disruptive(a: &Action) -> bool {
    match &a.work {
        Work::UpdateConfig { stop_first, .. } => *stop_first || a.impact == Impact::StopStart,
        Work::MarkTemplate { stop_first, .. } => *stop_first,
        Work::Reboot { .. } | Work::Stop { .. } => true,
        _ => false,
    }
}

/// The disruption group of the desired object an action serves: its
/// `proxops/disruption-group` annotation, else the label of that name.
pub fn disruption_group(desired: &ClusterDesired, a: &Action) -> Option<String> {
    let meta = &desired.get(a.object.as_ref()?)?.metadata;
    meta.annotations
        .get(DISRUPTION_GROUP)
        .or_else(|| meta.labels.get(DISRUPTION_GROUP))
        .map(|g| g.trim().to_owned())
        .filter(|g| !g.is_empty())
}

/// The storage a download lands on, per node: what
/// `downloads-per-storage` counts.
pub fn download_storage(a: &Action) -> Option<(&NodeName, &str)> {
    match &a.work {
        Work::Download { storage, .. } => Some((&a.node, storage.as_str())),
        _ => None,
    }
}

/// Why action `of` waits for action `on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// `on` serves an object `of` depends on: it must succeed, or `of` is
    /// deferred.
    Dependency,
    /// `on` is an earlier action on the same guest or file, or an earlier
    /// prune: it must end, however it ends.
    Order,
}

/// For each action of `actions` (in plan order), the earlier actions it
/// waits for. An action waits for the actions of each object it depends on
/// on its own node (on any node when that object has none there, as a
/// clone from a template on another node does), for the previous action
/// on the same guest or file; a prune for the prunes of the level above
/// its own (that every non-prune action has ended first is the execution
/// machine's own rule, not listed here).
pub fn prerequisites(actions: &[Action]) -> Vec<Vec<(usize, Wait)>> {
    let mut out: Vec<Vec<(usize, Wait)>> = Vec::with_capacity(actions.len());
    // Per object: (node, index) of its actions so far. Both maps are only
    // looked up, never listed, so they hash (ordered maps of thousands of
    // names were a twentieth of planning 10,000 guests).
    let mut by_object: FnvMap<&proxops_model::names::Ref, Vec<(&NodeName, usize)>> =
        FnvMap::with_capacity_and_hasher(actions.len(), Fnv);
    let mut last_on: FnvMap<(&NodeName, &Target), usize> =
        FnvMap::with_capacity_and_hasher(actions.len(), Fnv);
    let mut last_firewall: Option<usize> = None;
    // Prunes come last, by descending level: the prunes of the level
    // before the current one, and those of the current level.
    let mut previous_level: Vec<usize> = Vec::new();
    let mut this_level: Vec<usize> = Vec::new();
    for (i, a) in actions.iter().enumerate() {
        let mut waits: Vec<(usize, Wait)> = Vec::new();
        if a.op == Op::Prune {
            // Every non-prune action is waited for by the execution
            // machine itself (not listed: that would be quadratic).
            if this_level
                .first()
                .is_some_and(|&j| actions[j].level != a.level)
            {
                previous_level = std::mem::take(&mut this_level);
            }
            waits.extend(previous_level.iter().map(|&j| (j, Wait::Order)));
            this_level.push(i);
        } else {
            for dep in &a.deps {
                let Some(done) = by_object.get(dep) else {
                    continue;
                };
                let here: Vec<usize> = done
                    .iter()
                    .filter(|(n, _)| *n == &a.node)
                    .map(|(_, j)| *j)
                    .collect();
                let chosen = if here.is_empty() {
                    done.iter().map(|(_, j)| *j).collect()
                } else {
                    here
                };
                waits.extend(chosen.into_iter().map(|j| (j, Wait::Dependency)));
            }
        }
        if let Some(&j) = last_on.get(&(&a.node, &a.target))
            && !waits.iter().any(|(w, _)| *w == j)
        {
            waits.push((j, Wait::Order));
        }
        // The cluster's firewall objects share lists (its aliases, its IP
        // set and group indexes) whose digest each write checks: one
        // after another, or one write's digest is stale for the next.
        if a.kind.is_firewall() {
            if let Some(j) = last_firewall
                && !waits.iter().any(|(w, _)| *w == j)
            {
                waits.push((j, Wait::Order));
            }
            last_firewall = Some(i);
        }
        last_on.insert((&a.node, &a.target), i);
        if let Some(obj) = &a.object {
            by_object.entry(obj).or_default().push((&a.node, i));
        }
        waits.sort_unstable_by_key(|(j, _)| *j);
        out.push(waits);
    }
    out
}

/// How a plan's changes roll out, for renderings: which actions could run
/// at once (waves) and how many guests are made unavailable, how many at a
/// time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rollout {
    /// Per action (plan order): the wave it can start in. Actions of one
    /// wave wait for nothing of that wave, so they may run at once, within
    /// the limits.
    pub waves: Vec<usize>,
    /// Actions that make a guest unavailable while they run.
    pub disruptive: usize,
    /// How many of them run at once at most (the cluster's budget, or
    /// fewer when there are fewer).
    pub at_once: usize,
    /// How many turns the disruption budget makes them take: the fewest
    /// rounds in which every disruptive action runs, no round beyond the
    /// cluster's budget or a group's (20 updates at a budget of 1 are 20
    /// turns, whatever their dependency waves).
    pub turns: usize,
    /// Per disruption group: its disruptive actions and its budget.
    pub groups: Vec<GroupRollout>,
    /// Disruptive actions per operation, e.g. `("stop-start update", 3)`.
    pub by_what: Vec<(String, usize)>,
}

/// One disruption group's share of a rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupRollout {
    pub group: String,
    pub disruptive: usize,
    pub at_once: usize,
}

impl Rollout {
    /// The rollout of `actions` (in plan order) under `budget`, `group`
    /// naming each action's disruption group ([`disruption_group`]).
    pub fn of(
        actions: &[Action],
        group: impl Fn(&Action) -> Option<String>,
        budget: &DisruptionBudget,
    ) -> Rollout {
        let prereqs = prerequisites(actions);
        let mut waves = Vec::with_capacity(actions.len());
        // The first wave a prune may take: after every other action.
        let mut after_others = 0;
        for (a, waits) in actions.iter().zip(&prereqs) {
            let earliest = if a.op == Op::Prune { after_others } else { 0 };
            let w = waits
                .iter()
                .map(|(j, _)| waves.get(*j).copied().unwrap_or(0) + 1)
                .fold(earliest, usize::max);
            if a.op != Op::Prune {
                after_others = after_others.max(w + 1);
            }
            waves.push(w);
        }
        let mut groups: BTreeMap<String, usize> = BTreeMap::new();
        let mut by_what: BTreeMap<String, usize> = BTreeMap::new();
        let mut disruptive = 0;
        for a in actions.iter().filter(|a| is_disruptive(a)) {
            disruptive += 1;
            *by_what.entry(disruptive_what(a)).or_default() += 1;
            if let Some(g) = group(a) {
                *groups.entry(g).or_default() += 1;
            }
        }
        // Ungrouped guests count against the cluster's budget only; a
        // group's against its own too.
        let ungrouped = disruptive - groups.values().sum::<usize>();
        let grouped: usize = groups.iter().map(|(g, n)| budget.of_group(g).min(*n)).sum();
        // Each round runs at most the cluster's budget, and of a group at
        // most its own: every round bound is needed, and (a flow over the
        // rounds shows) enough.
        let cluster = budget.cluster.max(1);
        let turns = groups
            .iter()
            .map(|(g, n)| n.div_ceil(budget.of_group(g).min(cluster)))
            .chain([disruptive.div_ceil(cluster)])
            .max()
            .unwrap_or(0);
        Rollout {
            waves,
            disruptive,
            turns,
            at_once: cluster.min(ungrouped + grouped),
            groups: groups
                .into_iter()
                .map(|(group, n)| GroupRollout {
                    at_once: budget.of_group(&group).min(budget.cluster.max(1)).min(n),
                    group,
                    disruptive: n,
                })
                .collect(),
            by_what: by_what.into_iter().collect(),
        }
    }

    /// One line for the text and Markdown renderings, `None` when nothing
    /// in the plan makes a guest unavailable: "Rollout: 3 stop-start
    /// updates (1 guest(s) unavailable at once: 3 turns), in 1 dependency
    /// wave(s); group db: 3, 1 at a time."
    pub fn line(&self) -> Option<String> {
        if self.disruptive == 0 {
            return None;
        }
        let what: Vec<String> = self
            .by_what
            .iter()
            .map(|(w, n)| format!("{n} {w}{}", if *n == 1 { "" } else { "s" }))
            .collect();
        let mut line = format!(
            "Rollout: {} ({} guest(s) unavailable at once: {} turn{}), in {} dependency wave(s)",
            what.join(", "),
            self.at_once,
            self.turns,
            if self.turns == 1 { "" } else { "s" },
            self.waves.iter().max().map_or(0, |w| w + 1),
        );
        for g in &self.groups {
            line.push_str(&format!(
                "; group {}: {}, {} at a time",
                g.group, g.disruptive, g.at_once
            ));
        }
        line.push('.');
        Some(line)
    }
}

/// How a disruptive action is named in a rollout summary.
fn disruptive_what(a: &Action) -> String {
    match a.op {
        Op::Update => "stop-start update".to_owned(),
        Op::MarkTemplate => "template conversion".to_owned(),
        Op::Reboot => "reboot".to_owned(),
        Op::Stop => "stop".to_owned(),
        other => other.as_str().to_owned(),
    }
}
