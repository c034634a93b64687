//! `/`: every cluster at a glance, the object table with its filters, and
//! the recent cycles.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::html::{self, badge, escape, object_href, segment, state_badge, state_look, when};
use super::{Filter, chart};
use crate::exec::{ObjectState, Timestamp};
use crate::report::{ClusterReport, CycleEntry, CycleResult, StatusStore, StoredObject, SyncState};
use proxops_model::names::Kind;

/// Object states from the one that most needs a person to the least.
const BY_URGENCY: [ObjectState; 9] = [
    ObjectState::Failed,
    ObjectState::Anomalous,
    ObjectState::Drift,
    ObjectState::PendingRestart,
    ObjectState::Skipped,
    ObjectState::InProgress,
    ObjectState::Desired,
    ObjectState::Converged,
    ObjectState::Pruned,
];

/// The `state` filter that lists every object not converged.
const ATTENTION: &str = "attention";

/// Rows of the cycle timeline.
const TIMELINE_ROWS: usize = 15;

pub(super) fn render(store: &StatusStore, now: Timestamp, filter: &Filter) -> String {
    let names = cluster_names(store);
    let mut body = String::new();
    clusters(&mut body, store, now, &names);
    targets(&mut body, store, now);
    objects(&mut body, store, filter, &names);
    cycles(&mut body, store, now, filter);
    html::page(store, now, &title(store, &names), &body)
}

/// Every cluster the store knows, from its cycles and its objects.
fn cluster_names(store: &StatusStore) -> Vec<String> {
    let mut names = store.cluster_names();
    names.extend(store.objects().map(|o| o.cluster.clone()));
    names.sort();
    names.dedup();
    names
}

/// "All 2 clusters converged", "1 of 2 clusters needs attention", …
fn title(store: &StatusStore, names: &[String]) -> String {
    let unsettled = names
        .iter()
        .filter(|n| store.sync(n) != SyncState::Converged)
        .count();
    match (names.len(), unsettled) {
        (0, _) => "Waiting for the first cycle".to_owned(),
        (1, 0) => "The cluster converged".to_owned(),
        (1, _) => "The cluster needs a look".to_owned(),
        (n, 0) => format!("All {n} clusters converged"),
        (n, u) => format!(
            "{u} of {n} clusters {}",
            if u == 1 {
                "needs a look"
            } else {
                "need a look"
            }
        ),
    }
}

fn clusters(out: &mut String, store: &StatusStore, now: Timestamp, names: &[String]) {
    out.push_str("<h2 id=\"clusters\">Clusters</h2>\n");
    if names.is_empty() {
        out.push_str("<p class=\"empty\">No cycle has finished yet.</p>\n");
        return;
    }
    out.push_str("<div class=\"clusters\">\n");
    let last: BTreeMap<&str, &ClusterReport> = store
        .last_cycle()
        .iter()
        .flat_map(|c| &c.clusters)
        .map(|c| (c.name.as_str(), c))
        .collect();
    let cycles: BTreeMap<&str, &CycleEntry> = store
        .cluster_cycles()
        .map(|e| (e.cluster.as_str(), e))
        .collect();
    for name in names {
        card(
            out,
            store,
            now,
            name,
            last.get(name.as_str()).copied(),
            cycles.get(name.as_str()).copied(),
        );
    }
    out.push_str("</div>\n");
}

fn card(
    out: &mut String,
    store: &StatusStore,
    now: Timestamp,
    name: &str,
    report: Option<&ClusterReport>,
    cycle: Option<&CycleEntry>,
) {
    let sync = store.sync(name);
    let _ = writeln!(
        out,
        "<article class=\"card sync-{}\" id=\"cluster-{}\" data-sync=\"{}\">\n<h2><a href=\"/?cluster={}\">{}</a> {}</h2>",
        sync.as_str(),
        escape(name),
        sync.as_str(),
        segment(name),
        escape(name),
        html::sync_badge(sync)
    );
    if let Some(r) = report.filter(|r| r.aborted) {
        let _ = writeln!(
            out,
            "<p class=\"why\">Did nothing: {}</p>",
            escape(&r.abort_reason)
        );
    }
    if let Some(since) = store.applying_since(name) {
        let _ = writeln!(out, "<p>Applying its plan since {}</p>", when(since, now));
    }
    if let Some(r) = report {
        warnings(out, r);
    }
    match cycle {
        Some(c) => {
            let _ = writeln!(
                out,
                "<p>Last cycle {}, took {}, result <code>{}</code></p>\n<p>Commit {}</p>",
                when(c.finished_at, now),
                html::took(c.took_ms),
                c.result.as_str(),
                html::commit(&c.commit)
            );
        }
        None => out.push_str("<p class=\"muted\">No cycle has finished yet.</p>\n"),
    }
    counts(out, store, name);
    out.push_str("</article>\n");
}

/// The notification targets, when there are any: each sending or failing.
fn targets(out: &mut String, store: &StatusStore, now: Timestamp) {
    let targets: Vec<_> = store.targets().collect();
    if targets.is_empty() {
        return;
    }
    out.push_str("<h2 id=\"notifications\">Notifications</h2>\n<ul class=\"counts\">\n");
    for (name, t) in targets {
        let state = if t.failing {
            let since = t
                .last_failure_at
                .map(|at| format!(" {}", when(at, now)))
                .unwrap_or_default();
            format!(
                "{} {}{since}",
                badge("t-bad", "✗", &format!("{name} ({}) failing", t.kind)),
                escape(&t.last_error)
            )
        } else {
            badge(
                "t-ok",
                "✓",
                &format!("{name} ({}): {} sent", t.kind, t.sent),
            )
        };
        let _ = writeln!(out, "<li>{state}</li>");
    }
    out.push_str("</ul>\n");
}

/// A weakened state the cluster is in: planning from a stale tree, or
/// unable to write.
fn warnings(out: &mut String, r: &ClusterReport) {
    if r.desired_stale {
        let _ = writeln!(
            out,
            "<p>{} planned from the last good tree: the git fetch is failing</p>",
            badge("t-warn", "⚠", "stale")
        );
    }
    if r.read_only {
        let _ = writeln!(
            out,
            "<p>{} PVE refused too many writes; nothing is written until it recovers</p>",
            badge("t-bad", "⚠", "read-only")
        );
    }
}

/// The cluster's objects counted by state, each a link to the table
/// filtered on it.
fn counts(out: &mut String, store: &StatusStore, cluster: &str) {
    let mut by_state: BTreeMap<ObjectState, usize> = BTreeMap::new();
    for o in store.objects().filter(|o| o.cluster == cluster) {
        *by_state.entry(o.report.state).or_default() += 1;
    }
    if by_state.is_empty() {
        return;
    }
    out.push_str("<ul class=\"counts\">");
    for state in BY_URGENCY {
        let Some(n) = by_state.get(&state) else {
            continue;
        };
        let (tone, glyph, words) = state_look(state);
        let _ = write!(
            out,
            "<li><a href=\"/?cluster={}&amp;state={}#objects\">{}</a></li>",
            segment(cluster),
            state.as_str(),
            badge(tone, glyph, &format!("{n} {words}"))
        );
    }
    out.push_str("</ul>\n");
}

fn objects(out: &mut String, store: &StatusStore, filter: &Filter, names: &[String]) {
    out.push_str("<h2 id=\"objects\">Objects</h2>\n");
    filter_form(out, filter, names);
    let mut shown: Vec<&StoredObject> = store.objects().filter(|o| matches(o, filter)).collect();
    shown.sort_by_key(|o| urgency(o.report.state));
    if shown.is_empty() {
        let why = if store.objects().next().is_none() {
            "No object yet: the first cycle has not finished."
        } else {
            "No object matches these filters."
        };
        let _ = writeln!(out, "<p class=\"empty\">{why}</p>");
        return;
    }
    out.push_str(
        "<div class=\"scroll\"><table class=\"objects\">\n<thead><tr><th>State</th><th>Object</th><th>Cluster</th><th class=\"wide\">Node</th><th class=\"wide\">ID</th><th>Details</th></tr></thead>\n<tbody>\n",
    );
    for o in shown {
        let r = &o.report;
        let _ = writeln!(
            out,
            "<tr data-state=\"{}\"><td>{}</td><td><a href=\"{}\">{}/{}</a></td><td>{}</td><td class=\"wide\">{}</td><td class=\"wide num\">{}</td><td class=\"detail\">{}</td></tr>",
            r.state.as_str(),
            state_badge(r.state),
            object_href(&o.cluster, &r.kind, &r.name),
            escape(&r.kind),
            escape(&r.name),
            escape(&o.cluster),
            escape(&r.node),
            escape(&r.id),
            detail(o)
        );
    }
    out.push_str("</tbody></table></div>\n");
}

fn urgency(state: ObjectState) -> usize {
    BY_URGENCY
        .iter()
        .position(|s| *s == state)
        .unwrap_or(BY_URGENCY.len())
}

fn matches(o: &StoredObject, f: &Filter) -> bool {
    let state_ok = match f.state.as_deref() {
        None => true,
        Some(ATTENTION) => o.report.state != ObjectState::Converged,
        Some(s) => o.report.state.as_str() == s,
    };
    f.cluster.as_deref().is_none_or(|c| o.cluster == c)
        && f.kind.as_deref().is_none_or(|k| o.report.kind == k)
        && state_ok
}

/// The object's one line of explanation: its hold, its error, or what is
/// pending for it.
fn detail(o: &StoredObject) -> String {
    if let Some(h) = &o.hold {
        return format!("held back: {}", escape(&cut(&h.reason)));
    }
    if let Some(e) = o.report.last_error.as_deref().filter(|e| !e.is_empty()) {
        return escape(&cut(e));
    }
    match o.pending.first() {
        Some(p) => {
            let fields: Vec<&str> = p.changes.iter().map(|c| c.field.as_str()).collect();
            let more = if o.pending.len() > 1 {
                format!(" (+{} more)", o.pending.len() - 1)
            } else {
                String::new()
            };
            format!(
                "<code>{}</code> [{}] {}{more}",
                p.action,
                crate::action::impact_word(p.action, p.impact),
                escape(&fields.join(", "))
            )
        }
        None => String::new(),
    }
}

/// At most 160 characters of a text, on one line.
fn cut(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.chars().count() > 160 {
        format!("{}…", one.chars().take(159).collect::<String>())
    } else {
        one
    }
}

fn filter_form(out: &mut String, filter: &Filter, names: &[String]) {
    out.push_str("<form class=\"filters\" method=\"get\" action=\"/#objects\">\n");
    let clusters: Vec<(String, String)> = names.iter().map(|n| (n.clone(), n.clone())).collect();
    select(
        out,
        "cluster",
        "Cluster",
        &clusters,
        filter.cluster.as_deref(),
    );
    let kinds: Vec<(String, String)> = Kind::ALL
        .iter()
        .map(|k| (k.as_str().to_owned(), k.as_str().to_owned()))
        .collect();
    select(out, "kind", "Kind", &kinds, filter.kind.as_deref());
    let mut states = vec![(ATTENTION.to_owned(), "needs attention".to_owned())];
    states.extend(
        BY_URGENCY
            .iter()
            .map(|s| (s.as_str().to_owned(), state_look(*s).2.to_owned())),
    );
    select(out, "state", "State", &states, filter.state.as_deref());
    out.push_str(
        "<button type=\"submit\">Filter</button> <a href=\"/#objects\">clear</a>\n</form>\n",
    );
    if *filter != Filter::default() {
        let _ = writeln!(
            out,
            "<p class=\"muted\">Showing objects where {}.</p>",
            describe(filter)
        );
    }
}

fn describe(f: &Filter) -> String {
    let parts: Vec<String> = [
        ("cluster", f.cluster.as_deref()),
        ("kind", f.kind.as_deref()),
        ("state", f.state.as_deref()),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k} is <strong>{}</strong>", escape(v))))
    .collect();
    parts.join(" and ")
}

fn select(
    out: &mut String,
    name: &str,
    label: &str,
    options: &[(String, String)],
    chosen: Option<&str>,
) {
    let _ = write!(
        out,
        "<label>{label}<select name=\"{name}\"><option value=\"\">all</option>"
    );
    for (value, words) in options {
        let selected = if chosen == Some(value.as_str()) {
            " selected"
        } else {
            ""
        };
        let _ = write!(
            out,
            "<option value=\"{}\"{selected}>{}</option>",
            escape(value),
            escape(words)
        );
    }
    out.push_str("</select></label>\n");
}

fn cycles(out: &mut String, store: &StatusStore, now: Timestamp, filter: &Filter) {
    out.push_str("<h2 id=\"cycles\">Recent cycles</h2>\n");
    let entries: Vec<&CycleEntry> = store
        .recent_cycles()
        .filter(|e| filter.cluster.as_deref().is_none_or(|c| e.cluster == c))
        .collect();
    if entries.is_empty() {
        out.push_str("<p class=\"empty\">No cycle has finished yet.</p>\n");
        return;
    }
    out.push_str(&chart::cycles(&entries));
    out.push_str(
        "<div class=\"scroll\"><table class=\"cycles\">\n<thead><tr><th>Finished</th><th>Cluster</th><th>Took</th><th>Result</th><th>Actions</th><th>Not converged</th><th class=\"wide\">Commit</th></tr></thead>\n<tbody>\n",
    );
    for e in entries.iter().rev().take(TIMELINE_ROWS) {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{} done, {} failed</td><td class=\"num\">{}</td><td class=\"wide\">{}</td></tr>",
            when(e.finished_at, now),
            escape(&e.cluster),
            html::took(e.took_ms),
            result_badge(e),
            e.actions_ok,
            e.actions_error,
            e.unconverged,
            html::commit(&e.commit)
        );
    }
    out.push_str("</tbody></table></div>\n");
}

/// A cycle's result: good, a failed action, or the cluster did nothing.
fn result_badge(e: &CycleEntry) -> String {
    let words = e.result.as_str().replace('_', " ");
    match e.result {
        CycleResult::Ok | CycleResult::DryRun if e.actions_error == 0 => badge("t-ok", "✓", &words),
        CycleResult::Ok | CycleResult::DryRun => badge("t-bad", "✗", &format!("{words}, failures")),
        _ => badge("t-bad", "✗", &words),
    }
}
