//! `proxops man`: the proxops(1) manual page in roff (man(7) macros), made
//! from the tables `--help` reads, so the two cannot say different things.
//! Pure text out; the binary prints it.

use crate::args::Flag;
use crate::help::{self, COMMANDS};

/// The date on the page's title line: the last change of its text. A
/// constant, not the build date, so the page is the same bytes on every
/// build.
const DATE: &str = "2026-12-01";

/// The whole page.
pub fn page() -> String {
    let mut s = format!(
        ".TH PROXOPS 1 {DATE} \"proxops {}\" \"User Commands\"\n",
        env!("CARGO_PKG_VERSION")
    );
    let description = help::NAME.split_once(" — ").map_or(help::NAME, |(_, d)| d);
    s.push_str(&format!(".SH NAME\nproxops \\- {}\n", text(description)));
    s.push_str(
        ".SH SYNOPSIS\n.B proxops\n[\\fIGLOBAL FLAGS\\fR] \\fICOMMAND\\fR [\\fIFLAGS\\fR]\n",
    );
    s.push_str(".SH DESCRIPTION\n");
    s.push_str(
        "ProxOps reads a git repository of YAML manifests and converges one or more\n\
         Proxmox VE clusters to it: it plans the changes, shows them, and applies\n\
         them on request or, as a daemon, every poll interval.\n",
    );
    s.push_str(".PP\n");
    s.push_str(&paragraphs(help::FLAG_RULES));
    s.push_str(".SH COMMANDS\n");
    for h in COMMANDS {
        s.push_str(&format!(".SS \"{}\"\n", text(&help::usage(h.command))));
        s.push_str(&paragraphs(h.about));
        flags(&mut s, &help::command_flags(h.command));
    }
    s.push_str(".SH GLOBAL FLAGS\n");
    flags(&mut s, &help::global_flags());
    s.push_str(".SH EXIT STATUS\n");
    s.push_str(&paragraphs(help::EXIT_CODES));
    s.push_str(".SH ENVIRONMENT\n");
    s.push_str(&paragraphs(help::CREDENTIALS));
    s.push_str(".PP\n");
    s.push_str(&paragraphs(
        "PROXOPS_GIT_PATH and PROXOPS_CONFIG stand for --git-path and --config;
SOPS_AGE_KEY and SOPS_AGE_KEY_FILE give the age identities for SOPS files.",
    ));
    s.push_str(".SH FILES\n");
    for (file, what) in FILES {
        s.push_str(&format!(".TP\n.I {file}\n{}", fill(&text(what))));
    }
    s.push_str(".SH SEE ALSO\n");
    s.push_str(&paragraphs(
        "The full documentation is in /usr/share/doc/proxops (from the Debian
package) or the docs directory of the source tree: getting-started.md, cli.md,
configuration.md, operations.md.",
    ));
    s
}

/// The files the packaged daemon uses.
const FILES: &[(&str, &str)] = &[
    (
        "/etc/proxops/proxops.env",
        "Credentials for the systemd unit, one KEY=value a line (mode 0640, root:proxops).",
    ),
    (
        "/usr/lib/systemd/system/proxops.service",
        "The systemd unit that runs `proxops run` in the checkout /srv/gitops.",
    ),
    (
        "/var/lib/proxops",
        "The daemon's state: the URL-mode git cache and the cluster locks.",
    ),
];

/// A list of flags as tagged paragraphs.
fn flags(s: &mut String, flags: &[Flag]) {
    for f in flags {
        let mut tag = f
            .short
            .map(|short| format!("\\fB{}\\fR, ", text(short)))
            .unwrap_or_default();
        tag.push_str(&format!("\\fB{}\\fR", text(f.long)));
        if let Some(v) = f.value {
            tag.push_str(&format!(" \\fI{}\\fR", text(v)));
        }
        s.push_str(&format!(".TP\n{tag}\n{}", fill(&text(f.help))));
    }
}

/// Plain text as roff paragraphs: a blank line starts a new one; the lines
/// are filled anew, as roff fills them anyway.
fn paragraphs(plain: &str) -> String {
    let mut s = String::new();
    for (i, block) in plain.split("\n\n").enumerate() {
        if i > 0 {
            s.push_str(".PP\n");
        }
        let joined: Vec<&str> = block.lines().collect();
        s.push_str(&fill(&text(&joined.join(" "))));
    }
    s
}

/// Escaped text in lines short enough for `mandoc -T lint` (80 bytes), none
/// of them starting with a control character.
fn fill(escaped: &str) -> String {
    let mut s = String::new();
    for line in help::wrap(escaped, 76) {
        if line.starts_with(['.', '\'']) {
            s.push_str("\\&");
        }
        s.push_str(&line);
        s.push('\n');
    }
    s
}

/// One line of plain text as roff: backslashes and leading dots escaped, a
/// dash that starts a flag a real minus, `code` in bold, non-ASCII spelled
/// as roff names its characters.
fn text(line: &str) -> String {
    let mut out = String::new();
    if line.starts_with(['.', '\'']) {
        out.push_str("\\&");
    }
    let mut bold = false;
    let mut prev = ' ';
    for c in line.chars() {
        match c {
            '\\' => out.push_str("\\e"),
            '-' if !prev.is_ascii_alphanumeric() => out.push_str("\\-"),
            '`' => {
                out.push_str(if bold { "\\fR" } else { "\\fB" });
                bold = !bold;
            }
            '—' => out.push_str("\\(em"),
            c if !c.is_ascii() => out.push_str(&format!("\\[u{:04X}]", u32::from(c))),
            c => out.push(c),
        }
        prev = c;
    }
    if bold {
        out.push_str("\\fR");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_and_command_is_on_the_page() {
        let page = page();
        let flags = help::global_flags()
            .into_iter()
            .chain(help::all_command_flags());
        for f in flags {
            for spelling in f.short.into_iter().chain([f.long]) {
                assert!(
                    page.contains(&format!("\\fB{}\\fR", text(spelling))),
                    "the man page lacks {spelling}"
                );
            }
        }
        for h in COMMANDS {
            assert!(
                page.contains(&format!(
                    ".SS \"proxops [GLOBAL FLAGS] {}",
                    h.command.name()
                )),
                "the man page lacks {}",
                h.command.name()
            );
        }
    }

    #[test]
    fn text_is_escaped_for_roff() {
        assert_eq!(text(".hidden"), "\\&.hidden");
        assert_eq!(text("a\\tb"), "a\\etb");
        assert_eq!(text("--out and read-only"), "\\-\\-out and read-only");
        assert_eq!(text("`ok: N`"), "\\fBok: N\\fR");
        assert_eq!(text("a — b"), "a \\(em b");
    }
}
