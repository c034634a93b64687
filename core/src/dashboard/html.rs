//! The pieces every dashboard page is made of: escaping, links, the page
//! frame, state badges and times.
//!
//! Every text that came from outside (a name, an error, a field value)
//! goes through [`escape`]; every path segment through [`segment`]. A
//! state is said in words and a glyph, never by colour alone.

use std::fmt::Write as _;

use crate::exec::{ObjectState, Timestamp};
use crate::report::{RunMode, StatusStore, SyncState};
use proxops_model::time::rfc3339;

use super::{REFRESH_SECS, STYLE};

/// `s` safe in HTML text and in a quoted attribute.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// `s` as one path segment or query value: unreserved characters as they
/// are, every other byte percent-encoded.
pub(crate) fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The link to an object's page.
pub(crate) fn object_href(cluster: &str, kind: &str, name: &str) -> String {
    format!(
        "/objects/{}/{}/{}",
        segment(cluster),
        segment(kind),
        segment(name)
    )
}

/// A whole page: head (embedded style, refresh script, no external
/// resource), the top bar, `body`, the footer.
pub(crate) fn page(store: &StatusStore, now: Timestamp, title: &str, body: &str) -> String {
    let mode = match store.mode() {
        RunMode::Apply => {
            r#"<span class="badge t-info"><span class="glyph" aria-hidden="true">▶</span>apply mode</span>"#
        }
        RunMode::Observe => {
            r#"<span class="badge t-quiet"><span class="glyph" aria-hidden="true">◉</span>observe mode: nothing is written to PVE</span>"#
        }
    };
    format!(
        r#"<!doctype html>
<html lang="en" data-refresh="{REFRESH_SECS}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta name="referrer" content="no-referrer">
<title>{title} · ProxOps</title>
<noscript><meta http-equiv="refresh" content="{REFRESH_SECS}"></noscript>
<style>{STYLE}</style>
</head>
<body>
<header class="top"><a class="brand" href="/">ProxOps</a>{mode}<span class="meta">as of {at} · refreshes every {REFRESH_SECS} s</span></header>
<main>
{body}</main>
<footer>ProxOps dashboard · the same data as <a href="/status">/status</a> and <a href="/metrics">/metrics</a></footer>
<script>{script}</script>
</body>
</html>
"#,
        title = escape(title),
        at = time_tag(now),
        script = super::SCRIPT,
    )
}

/// A `<time>` element: `2026-12-31 00:00:45 UTC`.
pub(crate) fn time_tag(at: Timestamp) -> String {
    let iso = rfc3339(at);
    format!(
        r#"<time datetime="{iso}">{} UTC</time>"#,
        iso.trim_end_matches('Z').replacen('T', " ", 1)
    )
}

/// A time and how long ago it was.
pub(crate) fn when(at: Timestamp, now: Timestamp) -> String {
    format!(
        r#"{} <span class="ago">({} ago)</span>"#,
        time_tag(at),
        span(now.saturating_sub(at))
    )
}

/// A time still to come and how far off it is (`due now` once passed).
pub(crate) fn until(at: Timestamp, now: Timestamp) -> String {
    let left = at.saturating_sub(now);
    let off = if left == 0 {
        "due now".to_owned()
    } else {
        format!("in {}", span(left))
    };
    format!(r#"{} <span class="ago">({off})</span>"#, time_tag(at))
}

/// How long a cycle took: `40 ms`, `12.5 s`, then as [`span`] says it.
pub(crate) fn took(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{}.{} s", ms / 1000, ms % 1000 / 100)
    } else {
        span(ms / 1000)
    }
}

/// A duration as a person reads it: `45 s`, `3 min`, `2 h 5 min`, `4 d`.
pub(crate) fn span(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s < 86_400 => match (s / 3600, s % 3600 / 60) {
            (h, 0) => format!("{h} h"),
            (h, m) => format!("{h} h {m} min"),
        },
        s => format!("{} d", s / 86_400),
    }
}

/// How an object state looks: its tone, glyph and words.
pub(crate) fn state_look(state: ObjectState) -> (&'static str, &'static str, &'static str) {
    match state {
        ObjectState::Converged => ("t-ok", "✓", "converged"),
        ObjectState::Drift => ("t-warn", "~", "drift"),
        ObjectState::InProgress => ("t-info", "…", "in progress"),
        ObjectState::Desired => ("t-info", "○", "desired"),
        ObjectState::Failed => ("t-bad", "✗", "failed"),
        ObjectState::Anomalous => ("t-bad", "!", "needs a person"),
        ObjectState::Skipped => ("t-quiet", "»", "skipped"),
        ObjectState::PendingRestart => ("t-warn", "↻", "waiting for a restart"),
        ObjectState::Pruned => ("t-quiet", "⊘", "pruned"),
    }
}

/// The badge of an object state.
pub(crate) fn state_badge(state: ObjectState) -> String {
    let (tone, glyph, words) = state_look(state);
    badge(tone, glyph, words)
}

/// The badge of a cluster's sync state.
pub(crate) fn sync_badge(sync: SyncState) -> String {
    let (tone, glyph) = match sync {
        SyncState::Converged => ("t-ok", "✓"),
        SyncState::Drifting => ("t-warn", "~"),
        SyncState::Applying => ("t-info", "▶"),
        SyncState::Aborted => ("t-bad", "✗"),
        SyncState::Waiting => ("t-quiet", "…"),
    };
    badge(tone, glyph, sync.as_str())
}

pub(crate) fn badge(tone: &str, glyph: &str, words: &str) -> String {
    format!(
        r#"<span class="badge {tone}"><span class="glyph" aria-hidden="true">{glyph}</span>{}</span>"#,
        escape(words)
    )
}

/// The first 12 characters of a commit id, in `<code>`; a dash for none.
pub(crate) fn commit(id: &str) -> String {
    if id.is_empty() {
        return "—".to_owned();
    }
    format!(
        r#"<code title="{}">{}</code>"#,
        escape(id),
        escape(&id.chars().take(12).collect::<String>())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped_and_control_characters_shown() {
        assert_eq!(
            escape(r#"<b a="1">&'x'</b>"#),
            "&lt;b a=&quot;1&quot;&gt;&amp;&#39;x&#39;&lt;/b&gt;"
        );
        assert_eq!(escape("a\u{1b}[8mb"), "a\\u{1b}[8mb");
    }

    #[test]
    fn path_segments_encode_everything_but_unreserved_characters() {
        assert_eq!(segment("web-01.x_~"), "web-01.x_~");
        assert_eq!(segment("a/b c?&é"), "a%2Fb%20c%3F%26%C3%A9");
        assert_eq!(
            object_href("home", "VM", "web-01"),
            "/objects/home/VM/web-01"
        );
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(took(412), "412 ms");
        assert_eq!(took(1250), "1.2 s");
        assert_eq!(took(12_560), "12.5 s");
        assert_eq!(took(180_000), "3 min");
        assert_eq!(span(45), "45 s");
        assert_eq!(span(119), "119 s");
        assert_eq!(span(180), "3 min");
        assert_eq!(span(7200), "2 h");
        assert_eq!(span(7500), "2 h 5 min");
        assert_eq!(span(4 * 86_400 + 5), "4 d");
    }
}
