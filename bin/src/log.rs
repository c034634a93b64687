//! Log lines on stderr: human-readable on a terminal, JSON lines with
//! `--log-format json`. Callers pass only what may be shown: never a body,
//! a header or a credential.
//!
//! A JSON line carries `ts` (RFC 3339 UTC with milliseconds, read from the
//! system clock when the line is written), `level`, `msg` and the event's
//! fields with their types: a count is a JSON number, a flag a JSON boolean.
//! Text lines carry no timestamp (the journal adds its own).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::args::LogFormat;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 0,
    Info = 1,
    Warn = 2,
    Error = 3,
}

impl Level {
    pub fn parse(s: &str) -> Level {
        match s {
            "debug" => Level::Debug,
            "warn" => Level::Warn,
            "error" => Level::Error,
            _ => Level::Info,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static JSON: AtomicU8 = AtomicU8::new(0);

/// Sets the threshold and the format (`None`: JSON when stderr is not a
/// terminal is NOT assumed; text unless asked).
pub fn init(level: Level, format: Option<LogFormat>) {
    LEVEL.store(level as u8, Ordering::Relaxed);
    JSON.store(u8::from(format == Some(LogFormat::Json)), Ordering::Relaxed);
}

/// Whether events at `level` are shown.
pub fn enabled(level: Level) -> bool {
    level as u8 >= LEVEL.load(Ordering::Relaxed)
}

/// Whether events are written as JSON lines (`--log-format json`).
pub fn json() -> bool {
    JSON.load(Ordering::Relaxed) == 1
}

/// The value of one field of an event. JSON keeps its type; text shows it
/// as `key=value`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'a> {
    Text(&'a str),
    Count(u64),
    Flag(bool),
    /// A duration in milliseconds: a number in JSON, `12ms` in text.
    Millis(u64),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(text: &'a str) -> Value<'a> {
        Value::Text(text)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(text: &'a String) -> Value<'a> {
        Value::Text(text.as_str())
    }
}

impl From<u64> for Value<'_> {
    fn from(n: u64) -> Self {
        Value::Count(n)
    }
}

impl From<u32> for Value<'_> {
    fn from(n: u32) -> Self {
        Value::Count(u64::from(n))
    }
}

impl From<u16> for Value<'_> {
    fn from(n: u16) -> Self {
        Value::Count(u64::from(n))
    }
}

impl From<usize> for Value<'_> {
    fn from(n: usize) -> Self {
        Value::Count(u64::try_from(n).unwrap_or(u64::MAX))
    }
}

impl From<bool> for Value<'_> {
    fn from(b: bool) -> Self {
        Value::Flag(b)
    }
}

impl Value<'_> {
    fn to_json(self) -> serde_json::Value {
        match self {
            Value::Text(t) => t.into(),
            Value::Count(n) | Value::Millis(n) => n.into(),
            Value::Flag(b) => b.into(),
        }
    }

    fn to_text(self) -> String {
        match self {
            Value::Text(t) => t.to_owned(),
            Value::Count(n) => n.to_string(),
            Value::Flag(b) => b.to_string(),
            Value::Millis(n) => format!("{n}ms"),
        }
    }
}

/// A duration as a [`Value::Millis`] field, saturating.
pub fn millis(d: std::time::Duration) -> Value<'static> {
    Value::Millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One log event: a message and `key=value` fields.
pub fn event(level: Level, message: &str, fields: &[(&str, Value<'_>)]) {
    if !enabled(level) {
        return;
    }
    let line = if json() {
        json_line(SystemTime::now(), level, message, fields)
    } else {
        let mut s = text_line(level, message, fields);
        if std::io::stderr().is_terminal() && level >= Level::Warn {
            s = format!("\x1b[1m{s}\x1b[0m");
        }
        s
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

fn json_line(now: SystemTime, level: Level, message: &str, fields: &[(&str, Value<'_>)]) -> String {
    let mut map = serde_json::Map::new();
    map.insert("ts".into(), timestamp(now).into());
    map.insert("level".into(), level.as_str().into());
    map.insert("msg".into(), message.into());
    for (k, v) in fields {
        // A duration's key says its unit: `duration_ms`, `elapsed_ms`.
        let key = match v {
            Value::Millis(_) => format!("{k}_ms"),
            _ => (*k).to_owned(),
        };
        map.insert(key, v.to_json());
    }
    serde_json::Value::Object(map).to_string()
}

fn text_line(level: Level, message: &str, fields: &[(&str, Value<'_>)]) -> String {
    // What a field holds may come from PVE or a repository: shown, never
    // obeyed by the terminal.
    let message = proxops_core::render::printable(message);
    let mut s = format!("{:<5} {message}", level.as_str());
    for (k, v) in fields {
        let v = proxops_core::render::printable(&v.to_text()).into_owned();
        if v.contains(char::is_whitespace) {
            // Quoted as a JSON string: one line, whatever the value holds.
            s.push_str(&format!(" {k}={}", serde_json::Value::from(v)));
        } else {
            s.push_str(&format!(" {k}={v}"));
        }
    }
    s
}

/// RFC 3339 UTC with milliseconds, `2026-12-01T20:39:29.123Z`. A clock
/// before 1970 is written as the epoch.
fn timestamp(now: SystemTime) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (y, m, d) = proxops_core::time::civil_from_days(secs / 86_400);
    let of_day = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamp_is_rfc3339_utc_with_milliseconds() {
        let at = |secs: u64, ms: u64| UNIX_EPOCH + Duration::from_millis(secs * 1000 + ms);
        assert_eq!(timestamp(at(0, 0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            timestamp(at(1_796_157_569, 123)),
            "2026-12-01T20:39:29.123Z"
        );
        assert_eq!(timestamp(at(951_782_400, 7)), "2000-02-29T00:00:00.007Z");
        assert_eq!(
            timestamp(UNIX_EPOCH - Duration::from_secs(1)),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn json_fields_keep_their_types() {
        let line = json_line(
            UNIX_EPOCH,
            Level::Info,
            "proxops.action",
            &[
                ("name", "web".into()),
                ("ok", true.into()),
                ("actions_ok", 3u64.into()),
                ("duration", millis(Duration::from_millis(1500))),
            ],
        );
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ts"], "1970-01-01T00:00:00.000Z");
        assert_eq!(v["level"], "info");
        assert_eq!(v["msg"], "proxops.action");
        assert_eq!(v["name"], "web");
        assert_eq!(v["ok"], serde_json::Value::Bool(true));
        assert_eq!(v["actions_ok"], serde_json::json!(3));
        assert_eq!(v["duration_ms"], serde_json::json!(1500));
        assert!(v.get("duration").is_none(), "{v}");
    }

    #[test]
    fn text_keeps_key_value_shape() {
        let line = text_line(
            Level::Warn,
            "proxops.cycle",
            &[
                ("cluster", "home".into()),
                ("actions_ok", 2u64.into()),
                ("desired_stale", true.into()),
                ("duration", Value::Millis(12)),
                ("reason", "two words".into()),
            ],
        );
        assert_eq!(
            line,
            "warn  proxops.cycle cluster=home actions_ok=2 desired_stale=true duration=12ms reason=\"two words\""
        );
    }
}
