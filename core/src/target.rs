//! `--target KIND/NAME`: a plan narrowed to some objects and what they
//! depend on (the dependency graph of [`proxops_model::graph`], as each
//! [`DesiredObject::deps`] holds it), everything else listed as not
//! considered.
//!
//! Owns reading the targets against the desired state ([`resolve`], with
//! the nearest name for one that matches nothing), their closure under
//! prerequisites ([`closure`]) and the narrowing of a made plan
//! ([`restrict`]).
//!
//! Must never: keep a prune (a target names a manifest; a guest without one
//! is never a target, so nothing is pruned in a targeted plan), keep an
//! action of an object outside the closure, or drop one inside it; do I/O.

use std::collections::BTreeSet;

use crate::action::Action;
pub use crate::plan::NotConsidered;
use crate::plan::Plan;
use proxops_model::names::{Kind, Ref};
use proxops_model::repo::ClusterDesired;

/// The targets `given` (`KIND/NAME`, the kind in any case) as references
/// to manifests some cluster of `clusters` declares. Every target that
/// names none is an error line, with the nearest `Kind/name` there is.
pub fn resolve<'a>(
    given: &[String],
    clusters: impl IntoIterator<Item = &'a ClusterDesired> + Clone,
) -> Result<BTreeSet<Ref>, Vec<String>> {
    let known: BTreeSet<String> = clusters
        .clone()
        .into_iter()
        .flat_map(|c| c.objects.keys().map(ToString::to_string))
        .collect();
    let mut out = BTreeSet::new();
    let mut errors = Vec::new();
    for text in given {
        let parsed = text.split_once('/').and_then(|(kind, name)| {
            let kind = Kind::ALL
                .into_iter()
                .find(|k| k.as_str().eq_ignore_ascii_case(kind))?;
            let name = proxops_model::names::ResourceName::new(name).ok()?;
            Some(Ref { kind, name })
        });
        match parsed {
            Some(r) if known.contains(&r.to_string()) => {
                out.insert(r);
            }
            _ => {
                // A bare name (`web-01`) is answered with the objects of
                // that name, whatever their kind.
                let named: Vec<&str> = known
                    .iter()
                    .filter(|k| k.split_once('/').is_some_and(|(_, n)| n == text))
                    .map(String::as_str)
                    .collect();
                let hint = match named.as_slice() {
                    [] => {
                        proxops_model::suggest::did_you_mean(text, known.iter().map(String::as_str))
                    }
                    [one] => Some(format!("did you mean {one:?}?")),
                    many => Some(format!("did you mean one of {}?", many.join(", "))),
                }
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
                let what = if text.contains('/') {
                    "no selected cluster has a manifest of that kind and name"
                } else {
                    "not KIND/NAME (e.g. VM/web-01)"
                };
                errors.push(format!("--target {text:?}: {what}{hint}"));
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// `targets` that `desired` declares and everything they need first,
/// transitively.
pub fn closure(desired: &ClusterDesired, targets: &BTreeSet<Ref>) -> BTreeSet<Ref> {
    let mut keep = BTreeSet::new();
    let mut todo: Vec<&Ref> = targets
        .iter()
        .filter(|r| desired.objects.contains_key(*r))
        .collect();
    while let Some(r) = todo.pop() {
        if !keep.insert(r.clone()) {
            continue;
        }
        if let Some(o) = desired.get(r) {
            todo.extend(o.deps.iter().filter(|d| !keep.contains(*d)));
        }
    }
    keep
}

/// Narrows `plan` to the [`closure`] of `targets` in `desired`: its
/// actions, deferred prunes, skipped items and anomalies about objects
/// outside it are dropped, and every object dropped (or declared and
/// outside it) is listed in [`Plan::not_considered`]. Anomalies about the
/// cluster as a whole stay. The rollout is made again for what is left.
pub fn restrict(
    plan: &mut Plan,
    desired: &ClusterDesired,
    targets: &BTreeSet<Ref>,
    budget: &crate::rollout::DisruptionBudget,
) {
    if plan.aborted {
        return;
    }
    let keep = closure(desired, targets);
    let inside = |kind: Kind, name: &str| {
        keep.iter()
            .any(|r| r.kind == kind && r.name.as_str() == name)
    };
    let mut outside: BTreeSet<NotConsidered> = desired
        .objects
        .keys()
        .filter(|r| !keep.contains(*r))
        .map(|r| NotConsidered {
            kind: r.kind,
            name: r.name.as_str().to_owned(),
        })
        .collect();
    let mut note = |kind: Kind, name: &str| {
        outside.insert(NotConsidered {
            kind,
            name: name.to_owned(),
        });
    };
    let serves = |a: &Action| a.object.as_ref().is_some_and(|o| keep.contains(o));
    for list in [&mut plan.actions, &mut plan.deferred] {
        list.retain(|a| {
            let kept = serves(a);
            if !kept {
                note(a.kind, &a.name);
            }
            kept
        });
    }
    plan.skipped.retain(|s| {
        let kept = inside(s.kind, &s.name);
        if !kept {
            note(s.kind, &s.name);
        }
        kept
    });
    plan.anomalies.retain(|an| match (an.kind, &an.name) {
        (Some(kind), Some(name)) => {
            let kept = inside(kind, name);
            if !kept {
                note(kind, name);
            }
            kept
        }
        _ => true,
    });
    plan.not_considered = outside.into_iter().collect();
    plan.rollout = crate::rollout::Rollout::of(
        &plan.actions,
        |a| crate::rollout::disruption_group(desired, a),
        budget,
    );
}
