//! Text a person reads on a terminal holds no control character it did not
//! mean: a live description with `ESC[8m` (conceal) must not hide the prune
//! section, the totals and the question that follow it.
//!
//! Owns [`printable`], the one escaping of text that came from PVE or a
//! repository (C0 and C1 control characters but line feed and tab, DEL,
//! and Unicode's bidirectional overrides and isolates, which reorder what
//! a terminal shows), and [`printable_plans`], a copy of plans with every
//! text field escaped, which the text and Markdown renderings draw from.
//! Escaped characters stay visible: `\x1b`, `\u{202e}`.
//!
//! Must never: change the plan that runs (the copy is for reading), or
//! escape what a person needs (line feeds of a multi-line message, tabs).

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::action::{Action, Anomaly, Change, SkipReason, Skipped, Target};
use crate::host::SelfGuest;
use crate::plan::Plan;
use crate::rollout::{GroupRollout, Rollout};
use proxops_model::diag::Diagnostic;

/// Whether a terminal would act on `c` rather than show it.
fn is_hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// `text` with every control character (but line feed and tab) and every
/// bidirectional control escaped as `\xNN` or `\u{NNNN}`, so a terminal
/// shows it instead of acting on it. Borrowed when there is none.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_hidden(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

fn clean(s: &mut String) {
    if let Cow::Owned(o) = printable(s) {
        *s = o;
    }
}

fn clean_opt(s: &mut Option<String>) {
    if let Some(s) = s {
        clean(s);
    }
}

/// Copies of `plans` whose every text field is [`printable`]: what the
/// text and Markdown renderings show. Each struct is taken apart field by
/// field, so a text field added to a plan is a compile error here until it
/// is escaped too.
pub fn printable_plans(plans: &[Plan]) -> Vec<Plan> {
    plans
        .iter()
        .map(|p| {
            let mut p = p.clone();
            let Plan {
                cluster: _,
                aborted: _,
                abort_reason,
                abort_cause: _,
                actions,
                skipped,
                deferred,
                anomalies,
                self_guests,
                diagnostics,
                rollout,
                not_considered,
            } = &mut p;
            clean_opt(abort_reason);
            actions.iter_mut().for_each(action);
            deferred.iter_mut().for_each(action);
            skipped.iter_mut().for_each(skip);
            anomalies.iter_mut().for_each(anomaly);
            self_guests.iter_mut().for_each(self_guest);
            diagnostics.iter_mut().for_each(diagnostic);
            rollout_text(rollout);
            not_considered.iter_mut().for_each(|o| clean(&mut o.name));
            p
        })
        .collect()
}

fn action(a: &mut Action) {
    let Action {
        op: _,
        kind: _,
        name,
        node: _,
        target,
        impact: _,
        changes,
        reason,
        level: _,
        deps: _,
        object: _,
        // Never rendered: what is sent stays byte for byte.
        work: _,
    } = a;
    clean(name);
    target_text(target);
    clean(reason);
    for c in changes {
        let Change {
            field,
            from,
            to,
            path,
            impact: _,
        } = c;
        clean(field);
        clean_opt(from);
        clean_opt(to);
        clean_opt(path);
    }
}

fn target_text(t: &mut Target) {
    match t {
        Target::Guest(_) => {}
        Target::File {
            storage: _,
            filename,
        } => clean(filename),
        Target::Cluster(id) => clean(id),
    }
}

fn skip(s: &mut Skipped) {
    let Skipped {
        kind: _,
        name,
        node: _,
        id,
        reason,
    } = s;
    clean(name);
    target_text(id);
    match reason {
        SkipReason::ConfigUnreadable { message } => clean(message),
        SkipReason::StorageUnreadable {
            message,
            storage: _,
            filename,
        } => {
            clean(message);
            clean(filename);
        }
        SkipReason::StorageNotRead { filename, .. } => clean(filename),
        SkipReason::Locked { lock } => clean(lock),
        SkipReason::BeingRemoved { id } => clean(id),
        SkipReason::PendingRestart { keys } => keys.iter_mut().for_each(clean),
        SkipReason::Paused { op } => clean(op),
        SkipReason::Held { op, error, .. } => {
            clean(op);
            clean(error);
        }
        SkipReason::Untagged { .. }
        | SkipReason::PruneProtected
        | SkipReason::NodeOffline { .. }
        | SkipReason::ArtifactNotPlaced { .. }
        | SkipReason::ArtifactUnknown { .. }
        | SkipReason::ArtifactRefused { .. }
        | SkipReason::CloneNeedsSharedStorage { .. }
        | SkipReason::CloneStorageUnknown { .. }
        | SkipReason::PowerUnknown => {}
    }
}

fn anomaly(a: &mut Anomaly) {
    let Anomaly {
        anomaly_type: _,
        kind: _,
        name,
        node: _,
        id,
        field,
        message,
    } = a;
    clean_opt(name);
    if let Some(t) = id {
        target_text(t);
    }
    clean_opt(field);
    clean(message);
}

fn self_guest(s: &mut SelfGuest) {
    let SelfGuest {
        node: _,
        vmid: _,
        name,
        matched,
    } = s;
    clean(name);
    clean(matched);
}

fn diagnostic(d: &mut Diagnostic) {
    let Diagnostic {
        file,
        line: _,
        column: _,
        field,
        message,
        hint,
        severity: _,
    } = d;
    clean(file);
    clean_opt(field);
    clean(message);
    if let Some(h) = hint
        && let Cow::Owned(o) = printable(h)
    {
        *h = o.into_boxed_str();
    }
}

fn rollout_text(r: &mut Rollout) {
    let Rollout {
        waves: _,
        disruptive: _,
        at_once: _,
        turns: _,
        groups,
        by_what,
    } = r;
    for g in groups {
        let GroupRollout {
            group,
            disruptive: _,
            at_once: _,
        } = g;
        clean(group);
    }
    for (what, _) in by_what {
        clean(what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_shown_not_obeyed() {
        assert_eq!(
            printable("plain text\tand\nlines"),
            "plain text\tand\nlines"
        );
        assert!(matches!(printable("plain"), Cow::Borrowed(_)));
        assert_eq!(printable("a\x1b[8mb"), "a\\x1b[8mb");
        assert_eq!(printable("over\rwrite"), "over\\x0dwrite");
        assert_eq!(printable("\u{9b}31m"), "\\x9b31m");
        assert_eq!(printable("x\u{7f}"), "x\\x7f");
        assert_eq!(printable("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(printable("é ünïcode"), "é ünïcode");
    }
}
