//! Writing to standard output and standard error without panicking.
//!
//! Rust ignores SIGPIPE, so a write to a pipe whose reader has gone
//! (`proxops diff | head -1`, `less` quit early) returns `BrokenPipe`;
//! `print!` would panic on it. Here a closed standard output becomes
//! [`Failure::stdout_closed`]: the command stops printing and the process
//! ends quietly with exit 0, or, through [`report`], goes on to the exit
//! code its work earned (`diff --exit-code | head -1` exits 3). Writes to standard error never fail a command
//! (there is nowhere left to report it).
//!
//! Everything written here is escaped first ([`proxops_core::render::printable`]):
//! a value from PVE or a repository (a guest's description, a name in an
//! error) can never move the cursor, hide text or recolour a terminal.
//! Only a plan rendering core already escaped, which carries the colours
//! of `--color`, goes out as it is ([`print_rendered`]).

use std::io::{ErrorKind, Write};

use proxops_core::render::printable;

use crate::exit::Failure;

/// Writes `text` to standard output and flushes it, so it is out before
/// whatever the command does next (and before anything on stderr).
pub fn print(text: &str) -> Result<(), Failure> {
    print_rendered(&printable(text))
}

/// [`print`] of a plan rendering core escaped itself (it carries the
/// colours `--color` asked for): written as it is.
pub fn print_rendered(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| match e.kind() {
            ErrorKind::BrokenPipe => Failure::stdout_closed(),
            _ => Failure::runtime(format!("cannot write to standard output: {e}")),
        })
}

/// [`print`] with a newline after `text` unless it ends in one.
pub fn print_line(text: &str) -> Result<(), Failure> {
    if text.ends_with('\n') {
        print(text)
    } else {
        print(&format!("{text}\n"))
    }
}

/// [`print_rendered`] with a newline after `text` unless it ends in one.
pub fn print_rendered_line(text: &str) -> Result<(), Failure> {
    if text.ends_with('\n') {
        print_rendered(text)
    } else {
        print_rendered(&format!("{text}\n"))
    }
}

/// [`print`] for output that reports work already done (files written,
/// actions performed): a closed standard output is no longer worth ending
/// the command for, so the command's own exit code stands.
pub fn report(text: &str) -> Result<(), Failure> {
    match print(text) {
        Err(f) if f.stdout_closed => Ok(()),
        other => other,
    }
}

/// A line of a rendering core escaped itself (a coloured plan,
/// JSON, Markdown): written as it is.
pub fn report_rendered_line(text: &str) -> Result<(), Failure> {
    let text = if text.ends_with('\n') {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(format!("{text}\n"))
    };
    match print_rendered(&text) {
        Err(f) if f.stdout_closed => Ok(()),
        other => other,
    }
}

/// Writes `text` to standard error; a closed or failing stderr is ignored.
pub fn eprint(text: &str) {
    eprint_rendered(&printable(text));
}

/// [`eprint`] of a plan rendering core escaped itself.
pub fn eprint_rendered(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
}

/// Each line of `text` on standard error as `error: <line>`.
pub fn errors(text: &str) {
    let mut all = String::new();
    for line in text.lines() {
        all.push_str("error: ");
        all.push_str(line);
        all.push('\n');
    }
    eprint(&all);
}
