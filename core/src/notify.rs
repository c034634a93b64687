//! Notifications: which changes a person is told about, what each kind of
//! target is sent, and when a message may go (rate limit, retry with
//! backoff).
//!
//! Owns three pure pieces, driven by the daemon's notifier thread:
//!
//! - [`Tracker`]: cluster reports in, [`Event`]s out — only on a change of
//!   state. It remembers, per cluster, what it has already said (each
//!   object's drift, failure, anomalies, hold; an abort), so the same drift
//!   seen every cycle is told once, a new or different one again, and
//!   "converged again" once after something was told.
//! - [`message`]: an event as a target of each [`TargetKind`] takes it.
//! - [`Outbox`]: one target's queue — at most [`BURST`] messages at once,
//!   then one per [`REFILL_SECS`]; a failed send is tried again after 1 s,
//!   2 s, 4 s … up to [`BACKOFF_MAX_SECS`], [`ATTEMPTS`] times in all.
//!
//! Call order: after planning a cluster (before executing), and again after
//! its cycle, hand its [`ClusterReport`] to [`Tracker::observe`]; queue each
//! event in the outbox of every target that wants it; ask
//! [`Outbox::next`] for what may go now, and tell it [`Outbox::sent`] or
//! [`Outbox::failed`]; sleep until [`Outbox::wake_at`].
//!
//! Must never: read a clock (`now` is an argument), hold a target's URL or
//! token (the sender adds them), or show a secret (field values arrive as
//! `<secret>` already).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;

use serde::Serialize;

use crate::exec::{ObjectState, Timestamp};
use crate::report::{ClusterReport, Hold, PendingAction};
use proxops_model::config::TargetKind;
use proxops_model::time::rfc3339;

/// What happened, as a person is told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A plan found objects that differ from the repository.
    DriftDetected,
    /// An action failed.
    ApplyFailed,
    /// The plan holds something ProxOps will not do alone.
    AnomalyRaised,
    /// An object is held back after a failed disruptive action.
    HeldBack,
    /// A cluster did nothing this cycle.
    ClusterAborted,
    /// Everything matches again, after one of the above.
    ConvergedAgain,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::DriftDetected => "drift_detected",
            EventKind::ApplyFailed => "apply_failed",
            EventKind::AnomalyRaised => "anomaly_raised",
            EventKind::HeldBack => "held_back",
            EventKind::ClusterAborted => "cluster_aborted",
            EventKind::ConvergedAgain => "converged_again",
        }
    }

    /// How loud: `info` for good news, `warning` for drift, `error` for
    /// what needs a person.
    pub fn severity(self) -> &'static str {
        match self {
            EventKind::ConvergedAgain => "info",
            EventKind::DriftDetected => "warning",
            _ => "error",
        }
    }

    fn headline(self) -> &'static str {
        match self {
            EventKind::DriftDetected => "drift detected",
            EventKind::ApplyFailed => "an action failed",
            EventKind::AnomalyRaised => "needs a person",
            EventKind::HeldBack => "held back",
            EventKind::ClusterAborted => "did nothing this cycle",
            EventKind::ConvergedAgain => "converged again",
        }
    }
}

/// One thing to tell, about one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    pub kind: EventKind,
    pub cluster: String,
    pub at: Timestamp,
    /// The objects concerned (none for an abort or "converged again").
    pub objects: Vec<EventObject>,
    /// Why the cluster aborted; empty otherwise.
    pub reason: String,
}

/// One object in an event: who, where, and what about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventObject {
    /// `Kind/name`.
    pub object: String,
    pub node: String,
    pub id: String,
    /// What differs, failed or holds it, on one line.
    pub detail: String,
}

impl Event {
    /// `home: drift detected on 2 objects`, `home: converged again`.
    pub fn summary(&self) -> String {
        match self.objects.len() {
            0 => format!("{}: {}", self.cluster, self.kind.headline()),
            1 => format!(
                "{}: {} on {}",
                self.cluster,
                self.kind.headline(),
                self.objects[0].object
            ),
            n => format!("{}: {} on {n} objects", self.cluster, self.kind.headline()),
        }
    }

    /// The lines under the summary: the reason, then one per object (at
    /// most [`LISTED`], then how many more).
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.reason.is_empty() {
            out.push(self.reason.clone());
        }
        if self.kind == EventKind::ConvergedAgain {
            out.push("Every object matches the repository again.".to_owned());
        }
        for o in self.objects.iter().take(LISTED) {
            let place = [o.node.as_str(), o.id.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            out.push(format!("{} ({place}): {}", o.object, o.detail));
        }
        if self.objects.len() > LISTED {
            out.push(format!("… and {} more", self.objects.len() - LISTED));
        }
        out
    }
}

/// Objects listed by name in one message.
pub const LISTED: usize = 10;

// ---------------------------------------------------------------------------
// Tracker

/// What has been told about each cluster, so that only changes are told.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    clusters: BTreeMap<String, Told>,
}

#[derive(Debug, Clone, Default)]
struct Told {
    /// The result label of the abort last told.
    aborted: Option<&'static str>,
    /// Per object (`Kind/name`), what was told of it.
    drift: BTreeMap<String, String>,
    failed: BTreeMap<String, String>,
    anomalies: BTreeMap<String, BTreeSet<String>>,
    held: BTreeSet<String>,
    /// Something was told that "converged again" will close.
    open: bool,
}

impl Tracker {
    pub fn new() -> Tracker {
        Tracker::default()
    }

    /// The events `report` calls for, given what was told before; `at` is
    /// their time. A report made from a plan before it is executed tells
    /// drift; the cycle's report tells failures and convergence.
    pub fn observe(&mut self, report: &ClusterReport, at: Timestamp) -> Vec<Event> {
        let told = self.clusters.entry(report.name.clone()).or_default();
        let event = |kind, objects: Vec<EventObject>, reason: String| Event {
            kind,
            cluster: report.name.clone(),
            at,
            objects,
            reason,
        };
        if report.aborted {
            let label = report.result.as_str();
            if told.aborted == Some(label) {
                return Vec::new();
            }
            told.aborted = Some(label);
            told.open = true;
            return vec![event(
                EventKind::ClusterAborted,
                Vec::new(),
                report.abort_reason.clone(),
            )];
        }
        told.aborted = None;
        let seen = Seen::of(report);
        let mut events = Vec::new();
        for (kind, objects) in [
            (EventKind::DriftDetected, news(&mut told.drift, &seen.drift)),
            (EventKind::ApplyFailed, news(&mut told.failed, &seen.failed)),
            (
                EventKind::AnomalyRaised,
                news_sets(&mut told.anomalies, &seen.anomalies),
            ),
            (EventKind::HeldBack, news_keys(&mut told.held, &seen.held)),
        ] {
            if !objects.is_empty() {
                told.open = true;
                let listed = objects
                    .into_iter()
                    .map(|(key, detail)| seen.object(report, &key, detail))
                    .collect();
                events.push(event(kind, listed, String::new()));
            }
        }
        for key in &seen.settled {
            told.drift.remove(key);
            told.failed.remove(key);
            told.anomalies.remove(key);
            told.held.remove(key);
        }
        if seen.all_settled && told.open {
            told.open = false;
            events.push(event(EventKind::ConvergedAgain, Vec::new(), String::new()));
        }
        events
    }
}

/// What one report shows, per object (`Kind/name`).
#[derive(Default)]
struct Seen {
    drift: BTreeMap<String, String>,
    failed: BTreeMap<String, String>,
    anomalies: BTreeMap<String, BTreeSet<String>>,
    held: BTreeMap<String, String>,
    /// Objects that need nothing: what was told of them is forgotten.
    settled: Vec<String>,
    /// The whole cluster needs nothing.
    all_settled: bool,
}

impl Seen {
    fn of(r: &ClusterReport) -> Seen {
        let key = |kind: &str, name: &str| format!("{kind}/{name}");
        let mut seen = Seen::default();
        for p in &r.pending {
            let line = action_line(p);
            seen.drift
                .entry(key(&p.kind, &p.name))
                .and_modify(|d| {
                    d.push_str("; ");
                    d.push_str(&line);
                })
                .or_insert(line);
        }
        for o in &r.objects {
            let k = key(&o.kind, &o.name);
            let error = o.last_error.clone().unwrap_or_default();
            match o.state {
                ObjectState::Failed => {
                    seen.failed.insert(k.clone(), one_line(&error));
                }
                ObjectState::PendingRestart => {
                    seen.drift
                        .entry(k.clone())
                        .or_insert_with(|| one_line(&error));
                }
                _ => {}
            }
            let quiet = matches!(o.state, ObjectState::Converged | ObjectState::Pruned)
                && !seen.drift.contains_key(&k)
                && !r.holds.iter().any(|h| key(&h.kind, &h.name) == k);
            if quiet {
                seen.settled.push(k);
            }
        }
        for a in &r.object_anomalies {
            let text = match &a.field {
                Some(f) => format!("{} {f}: {}", a.anomaly_type.as_str(), a.message),
                None => format!("{}: {}", a.anomaly_type.as_str(), a.message),
            };
            seen.anomalies
                .entry(key(&a.kind, &a.name))
                .or_default()
                .insert(one_line(&text));
        }
        for held in &r.holds {
            let h = Hold::from(held);
            seen.held.insert(
                key(&held.kind, &held.name),
                format!(
                    "not tried again before {}: {}",
                    rfc3339(h.until),
                    one_line(&h.reason)
                ),
            );
        }
        seen.all_settled = r.pending.is_empty()
            && r.holds.is_empty()
            && r.object_anomalies.is_empty()
            && r.prune_deferred.is_empty()
            && r.objects
                .iter()
                .all(|o| matches!(o.state, ObjectState::Converged | ObjectState::Pruned));
        seen
    }

    /// The event line of object `key` with `detail`.
    fn object(&self, r: &ClusterReport, key: &str, detail: String) -> EventObject {
        let record = r
            .objects
            .iter()
            .find(|o| format!("{}/{}", o.kind, o.name) == key);
        let pending = r
            .pending
            .iter()
            .find(|p| format!("{}/{}", p.kind, p.name) == key);
        let (node, id) = match (record, pending) {
            (Some(o), _) => (o.node.clone(), o.id.clone()),
            (None, Some(p)) => (p.node.clone(), p.id.clone()),
            (None, None) => (String::new(), String::new()),
        };
        EventObject {
            object: key.to_owned(),
            node,
            id,
            detail,
        }
    }
}

/// The entries of `now` that are new or changed since `told`, recorded.
fn news(
    told: &mut BTreeMap<String, String>,
    now: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in now {
        if told.get(k) != Some(v) {
            told.insert(k.clone(), v.clone());
            out.push((k.clone(), v.clone()));
        }
    }
    out
}

/// The anomalies of `now` not told yet, per object, recorded.
fn news_sets(
    told: &mut BTreeMap<String, BTreeSet<String>>,
    now: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, set) in now {
        let had = told.entry(k.clone()).or_default();
        let fresh: Vec<String> = set.difference(had).cloned().collect();
        if !fresh.is_empty() {
            had.extend(fresh.iter().cloned());
            out.push((k.clone(), fresh.join("; ")));
        }
    }
    out
}

/// The holds of `now` not told yet, recorded.
fn news_keys(told: &mut BTreeSet<String>, now: &BTreeMap<String, String>) -> Vec<(String, String)> {
    now.iter()
        .filter(|(k, _)| told.insert((*k).clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One pending action on one line: `update [stop-start]: memory 2048 →
/// 4096, cores 1 → 2`.
fn action_line(p: &PendingAction) -> String {
    let changes: Vec<String> = p
        .changes
        .iter()
        .map(|c| {
            let v = |s: &Option<String>| s.as_deref().map_or("(unset)".to_owned(), short);
            format!("{} {} → {}", c.field, v(&c.from), v(&c.to))
        })
        .collect();
    let mut line = format!("{} [{}]", p.action, p.impact.as_str());
    if !changes.is_empty() {
        let _ = write!(line, ": {}", changes.join(", "));
    }
    line
}

/// A value cut to 60 characters on one line.
fn short(s: &str) -> String {
    let one = one_line(s);
    if one.chars().count() > 60 {
        format!("{}…", one.chars().take(59).collect::<String>())
    } else {
        one
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------------------
// Messages

/// What to send a target: how, and the body. The sender adds the target's
/// URL and, where it takes one, its token ([`Message::token_header`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Appended to the target's URL (`/message` for Gotify).
    pub path: &'static str,
    pub content_type: &'static str,
    /// Header fields beyond the content type.
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    /// The header that carries the target's token, and its prefix.
    pub token_header: (&'static str, &'static str),
}

/// The event as a target of `kind` takes it.
pub fn message(kind: TargetKind, e: &Event) -> Message {
    match kind {
        TargetKind::Webhook => Message {
            path: "",
            content_type: "application/json",
            headers: Vec::new(),
            body: json(&WebhookDoc::of(e)),
            token_header: ("Authorization", "Bearer "),
        },
        TargetKind::Slack => Message {
            path: "",
            content_type: "application/json",
            headers: Vec::new(),
            body: json(&serde_json::json!({ "text": slack_text(e) })),
            token_header: ("Authorization", "Bearer "),
        },
        TargetKind::Ntfy => Message {
            path: "",
            content_type: "text/plain; charset=utf-8",
            headers: vec![
                ("Title", format!("ProxOps {}", e.summary())),
                ("Priority", ntfy_priority(e.kind).to_owned()),
                ("Tags", ntfy_tag(e.kind).to_owned()),
            ],
            body: e.lines().join("\n"),
            token_header: ("Authorization", "Bearer "),
        },
        TargetKind::Gotify => Message {
            path: "/message",
            content_type: "application/json",
            headers: Vec::new(),
            body: json(&serde_json::json!({
                "title": format!("ProxOps {}", e.summary()),
                "message": e.lines().join("\n"),
                "priority": gotify_priority(e.kind),
            })),
            token_header: ("X-Gotify-Key", ""),
        },
    }
}

/// The generic webhook's document: `proxops-event/v1`.
#[derive(Serialize)]
struct WebhookDoc<'a> {
    format: &'static str,
    event: &'static str,
    severity: &'static str,
    cluster: &'a str,
    at: String,
    summary: String,
    reason: &'a str,
    objects: &'a [EventObject],
}

impl<'a> WebhookDoc<'a> {
    fn of(e: &'a Event) -> WebhookDoc<'a> {
        WebhookDoc {
            format: "proxops-event/v1",
            event: e.kind.as_str(),
            severity: e.kind.severity(),
            cluster: &e.cluster,
            at: rfc3339(e.at),
            summary: e.summary(),
            reason: &e.reason,
            objects: &e.objects,
        }
    }
}

fn json<T: Serialize>(doc: &T) -> String {
    // Plain structs of strings and numbers always serialise.
    serde_json::to_string(doc).unwrap_or_default()
}

/// Slack's `mrkdwn`: the summary in bold, then a bullet per line, with
/// `&`, `<` and `>` escaped as Slack asks.
fn slack_text(e: &Event) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mark = match e.kind.severity() {
        "info" => ":white_check_mark:",
        "warning" => ":warning:",
        _ => ":rotating_light:",
    };
    let mut text = format!("{mark} *ProxOps {}*", esc(&e.summary()));
    for line in e.lines() {
        let _ = write!(text, "\n• {}", esc(&line));
    }
    text
}

fn ntfy_priority(kind: EventKind) -> &'static str {
    match kind.severity() {
        "info" => "2",
        "warning" => "3",
        _ => "4",
    }
}

fn ntfy_tag(kind: EventKind) -> &'static str {
    match kind.severity() {
        "info" => "white_check_mark",
        "warning" => "warning",
        _ => "rotating_light",
    }
}

fn gotify_priority(kind: EventKind) -> u8 {
    match kind.severity() {
        "info" => 2,
        "warning" => 5,
        _ => 8,
    }
}

// ---------------------------------------------------------------------------
// Outbox

/// Messages a target may take at once before the rate limit applies.
pub const BURST: u32 = 6;
/// Seconds after which one more message may go (10 a minute at most).
pub const REFILL_SECS: u64 = 6;
/// The first wait after a failed send, doubled per failure up to
/// [`BACKOFF_MAX_SECS`] (1 s, 2 s, 4 s … 5 min: a receiver that restarts
/// is reached within seconds; one that is down is not hammered).
pub const BACKOFF_FIRST_SECS: u64 = 1;
pub const BACKOFF_MAX_SECS: u64 = 300;
/// Sends of one message before it is given up (about 8 min of trying).
pub const ATTEMPTS: u32 = 9;
/// Messages a target keeps waiting; beyond, the oldest is dropped.
pub const QUEUE: usize = 100;

/// One message waiting for its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queued {
    pub event: Event,
    /// Sends tried so far.
    pub attempts: u32,
    /// Not before this time.
    pub not_before: Timestamp,
}

/// What became of a failed send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Tried again at this time.
    At(Timestamp),
    /// Given up: it failed [`ATTEMPTS`] times, or the target refused it
    /// in a way a repeat cannot change.
    GaveUp,
}

/// One target's queue, rate limit and retries.
#[derive(Debug, Clone)]
pub struct Outbox {
    queue: VecDeque<Queued>,
    tokens: u32,
    refilled_at: Timestamp,
    /// Held by [`Outbox::next`] until told how the send went.
    in_flight: Option<Queued>,
}

impl Outbox {
    pub fn new(now: Timestamp) -> Outbox {
        Outbox {
            queue: VecDeque::new(),
            tokens: BURST,
            refilled_at: now,
            in_flight: None,
        }
    }

    /// Queues `event`; the event dropped to make room, if any.
    pub fn push(&mut self, event: Event, now: Timestamp) -> Option<Event> {
        let dropped = (self.queue.len() >= QUEUE)
            .then(|| self.queue.pop_front().map(|q| q.event))
            .flatten();
        self.queue.push_back(Queued {
            event,
            attempts: 0,
            not_before: now,
        });
        dropped
    }

    /// The message to send now, if one is due and the rate limit allows;
    /// the outbox holds it until [`Outbox::sent`] or [`Outbox::failed`].
    pub fn next(&mut self, now: Timestamp) -> Option<&Queued> {
        if self.in_flight.is_some() {
            return None;
        }
        self.refill(now);
        if self.tokens == 0 || self.queue.front().is_none_or(|q| q.not_before > now) {
            return None;
        }
        self.tokens -= 1;
        self.in_flight = self.queue.pop_front();
        self.in_flight.as_ref()
    }

    /// The message from [`Outbox::next`] went through.
    pub fn sent(&mut self) -> Option<Queued> {
        self.in_flight.take()
    }

    /// The message from [`Outbox::next`] failed at `now`; `retryable`
    /// unless the target refused it for good (a 4xx but 429).
    pub fn failed(&mut self, now: Timestamp, retryable: bool) -> Retry {
        let Some(mut q) = self.in_flight.take() else {
            return Retry::GaveUp;
        };
        q.attempts += 1;
        if !retryable || q.attempts >= ATTEMPTS {
            return Retry::GaveUp;
        }
        let wait = (BACKOFF_FIRST_SECS << (q.attempts - 1).min(16)).min(BACKOFF_MAX_SECS);
        q.not_before = now + wait;
        let at = q.not_before;
        // Order is kept: the retry goes first, and what came after waits.
        self.queue.push_front(q);
        Retry::At(at)
    }

    /// When something may go next (`None`: nothing waits).
    pub fn wake_at(&self, now: Timestamp) -> Option<Timestamp> {
        let due = self.queue.front()?.not_before;
        let allowed = if self.tokens > 0 {
            now
        } else {
            self.refilled_at + REFILL_SECS
        };
        Some(due.max(allowed))
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.queue.len() + usize::from(self.in_flight.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn refill(&mut self, now: Timestamp) {
        let periods = now.saturating_sub(self.refilled_at) / REFILL_SECS;
        if periods > 0 {
            self.tokens = self
                .tokens
                .saturating_add(u32::try_from(periods).unwrap_or(u32::MAX))
                .min(BURST);
            self.refilled_at += periods * REFILL_SECS;
        }
    }
}
