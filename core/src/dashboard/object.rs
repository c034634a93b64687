//! `/objects/<cluster>/<kind>/<name>`: one object, with what the last
//! plans said about it in the text plan's own words.

use std::fmt::Write as _;

use super::html::{self, badge, escape, segment, state_badge, when};
use crate::exec::{ObjectState, Timestamp};
use crate::render::action_text;
use crate::report::{ActionResult, PlannedAction, StatusStore, StoredObject};

pub(super) fn render(store: &StatusStore, now: Timestamp, o: &StoredObject) -> String {
    let r = &o.report;
    let label = format!("{}/{}", r.kind, r.name);
    let mut out = format!(
        "<p class=\"crumbs\"><a href=\"/\">Overview</a> › <a href=\"/?cluster={}#objects\">{}</a> › {}</p>\n<h1>{} {}</h1>\n",
        segment(&o.cluster),
        escape(&o.cluster),
        escape(&r.kind),
        escape(&label),
        state_badge(r.state)
    );
    if let Some(h) = &o.hold {
        let _ = writeln!(
            out,
            "<p class=\"banner\" id=\"hold\">{} Not tried again before {}: {}</p>",
            badge("t-warn", "⏸", "held back"),
            html::until(h.until, now),
            escape(&h.reason)
        );
    }
    facts(&mut out, store, now, o);
    pending(&mut out, o);
    planned(&mut out, now, o);
    anomalies(&mut out, o);
    html::page(store, now, &label, &out)
}

fn facts(out: &mut String, store: &StatusStore, now: Timestamp, o: &StoredObject) {
    let r = &o.report;
    let dash = |s: &str| {
        if s.is_empty() {
            "—".to_owned()
        } else {
            escape(s)
        }
    };
    let manifest = match &o.manifest {
        Some(m) => format!("<code>{}</code>", escape(m)),
        None => "none: this object is on PVE only".to_owned(),
    };
    let _ = writeln!(
        out,
        "<dl class=\"facts\">\n<dt>Cluster</dt><dd>{} {}</dd>\n<dt>Manifest</dt><dd>{manifest}</dd>\n<dt>Node</dt><dd>{}</dd>\n<dt>ID</dt><dd>{}</dd>\n<dt>State</dt><dd>{}</dd>\n<dt>Last action</dt><dd>{}</dd>",
        escape(&o.cluster),
        html::sync_badge(store.sync(&o.cluster)),
        dash(&r.node),
        dash(&r.id),
        state_badge(r.state),
        dash(r.last_action.as_deref().unwrap_or("")),
    );
    if let Some(e) = r.last_error.as_deref().filter(|e| !e.is_empty()) {
        let label = match r.state {
            ObjectState::PendingRestart => "Waiting for",
            ObjectState::Skipped => "Why",
            ObjectState::Anomalous => "Needs a person",
            _ => "Last error",
        };
        let _ = writeln!(out, "<dt>{label}</dt><dd>{}</dd>", escape(e));
    }
    if let Some(p) = r.prune_reason.as_deref().filter(|p| !p.is_empty()) {
        let _ = writeln!(out, "<dt>Prune</dt><dd>{}</dd>", escape(p));
    }
    let converged = r.last_converged_at.map_or_else(
        || "not since this process started".to_owned(),
        |t| when(t, now),
    );
    let _ = writeln!(
        out,
        "<dt>Last converged</dt><dd>{converged}</dd>\n<dt>Updated</dt><dd>{}</dd>\n</dl>",
        when(o.updated_at, now)
    );
}

fn pending(out: &mut String, o: &StoredObject) {
    let _ = writeln!(out, "<h2 id=\"pending\">To do ({})</h2>", o.pending.len());
    if o.pending.is_empty() {
        out.push_str(
            "<p class=\"empty\">Nothing: the last cycle left nothing planned for it.</p>\n",
        );
        return;
    }
    out.push_str("<p class=\"muted\">What the last cycle planned and did not do, as <code>proxops diff</code> prints it.</p>\n");
    for p in &o.pending {
        let _ = writeln!(out, "<pre class=\"plan\">{}</pre>", escape(&action_text(p)));
    }
}

fn planned(out: &mut String, now: Timestamp, o: &StoredObject) {
    out.push_str("<h2 id=\"planned\">Last planned</h2>\n");
    let Some(at) = o.planned_at else {
        out.push_str(
            "<p class=\"empty\">No plan has had an action for it since this process started.</p>\n",
        );
        return;
    };
    let _ = writeln!(
        out,
        "<p class=\"muted\">In the cycle that finished {}.</p>",
        when(at, now)
    );
    let only_planned = o.planned.iter().all(|p| p.result.is_none());
    if only_planned && o.planned.iter().map(|p| &p.action).eq(o.pending.iter()) {
        out.push_str("<p>The actions under <a href=\"#pending\">To do</a>: this process only observes, and executes nothing.</p>\n");
        return;
    }
    for p in &o.planned {
        let _ = writeln!(
            out,
            "<div class=\"action\">{}<pre class=\"plan\">{}</pre></div>",
            result_badge(p),
            escape(&action_text(&p.action))
        );
    }
}

fn result_badge(p: &PlannedAction) -> String {
    match p.result {
        Some(ActionResult::Ok) => badge("t-ok", "✓", "done"),
        Some(ActionResult::Error) => badge("t-bad", "✗", "failed"),
        Some(ActionResult::Skipped) => badge("t-quiet", "»", "not run"),
        None => badge("t-quiet", "○", "planned only (observe mode)"),
    }
}

fn anomalies(out: &mut String, o: &StoredObject) {
    if o.anomalies.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h2 id=\"anomalies\">Needs a person ({})</h2>\n<ul>",
        o.anomalies.len()
    );
    for a in &o.anomalies {
        let field = a
            .field
            .as_deref()
            .map(|f| format!(" <code>{}</code>", escape(f)))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "<li>{}{field}: {}</li>",
            badge("t-bad", "!", a.anomaly_type.as_str()),
            escape(&a.message)
        );
    }
    out.push_str("</ul>\n");
}
