//! Log lines on stderr: human-readable on a terminal, JSON lines with
//! `--log-format json`. Callers pass only what may be shown: never a body,
//! a header or a credential.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU8, Ordering};

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

/// One log event: a message and `key=value` fields.
pub fn event(level: Level, message: &str, fields: &[(&str, &str)]) {
    if !enabled(level) {
        return;
    }
    let mut err = std::io::stderr().lock();
    let line = if json() {
        let mut map = serde_json::Map::new();
        map.insert("level".into(), level.as_str().into());
        map.insert("msg".into(), message.into());
        for (k, v) in fields {
            map.insert((*k).into(), (*v).into());
        }
        serde_json::Value::Object(map).to_string()
    } else {
        let mut s = format!("{:<5} {message}", level.as_str());
        for (k, v) in fields {
            if v.contains(char::is_whitespace) {
                s.push_str(&format!(" {k}={v:?}"));
            } else {
                s.push_str(&format!(" {k}={v}"));
            }
        }
        if std::io::stderr().is_terminal() && level >= Level::Warn {
            format!("\x1b[1m{s}\x1b[0m")
        } else {
            s
        }
    };
    let _ = writeln!(err, "{line}");
}
