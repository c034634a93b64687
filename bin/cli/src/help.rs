//! `--help` texts, built from the tables that the man page (`manpage`) and
//! the shell completions (`completions`) read as well: the flags from
//! `args::GLOBAL_FLAGS` and `args::COMMAND_FLAGS`, the commands from
//! [`COMMANDS`] here. docs/cli.md says the same; a test keeps them in step.

use crate::args::{COMMAND_FLAGS, Command, Flag, GLOBAL_FLAGS, Shell, flags_of};

/// A command as help, the man page and the completions describe it.
#[derive(Debug, Clone, Copy)]
pub struct CommandHelp {
    pub command: Command,
    /// One line, for the command list and the completions.
    pub summary: &'static str,
    /// What follows the command and its flags on the usage line: a required
    /// flag or a positional argument.
    pub operands: &'static str,
    /// The positional argument's fixed values, if it has them.
    pub operand_choices: &'static [&'static str],
    /// The description: plain text, one paragraph per blank-line-separated
    /// block, lines of at most 80 columns.
    pub about: &'static str,
}

impl Flag {
    /// `-n, --dry-run` or `--output FORMAT`.
    pub fn shown(&self) -> String {
        let mut s = match self.short {
            Some(short) => format!("{short}, {}", self.long),
            None => self.long.to_owned(),
        };
        if let Some(v) = self.value {
            s.push(' ');
            s.push_str(v);
        }
        s
    }

    /// How the usage line shows it: `[-y|--yes]`, `[--output text|json]`.
    fn usage(&self) -> String {
        let mut s = match self.short {
            Some(short) => format!("[{short}|{}", self.long),
            None => format!("[{}", self.long),
        };
        if !self.choices.is_empty() {
            s.push(' ');
            s.push_str(&self.choices.join("|"));
        } else if let Some(v) = self.value {
            s.push(' ');
            s.push_str(v);
        }
        s.push(']');
        s
    }
}

/// The manifest kinds as `schema` and `explain` take them (any case);
/// completed after those commands.
pub const KIND_WORDS: &[&str] = &proxops_model::names::Kind::WORDS;

/// The global flags, in help order.
pub fn global_flags() -> Vec<Flag> {
    GLOBAL_FLAGS.to_vec()
}

/// The flags of `command`, in help order.
pub fn command_flags(command: Command) -> Vec<Flag> {
    flags_of(command).into_iter().map(Flag::from).collect()
}

/// Every command flag once, in table order (a flag with an entry per
/// group of commands, `--output`, as its first entry).
pub fn all_command_flags() -> Vec<Flag> {
    COMMAND_FLAGS
        .iter()
        .enumerate()
        .filter(|(i, f)| !COMMAND_FLAGS[..*i].iter().any(|g| g.long == f.long))
        .map(|(_, f)| Flag::from(f))
        .collect()
}

/// The help entry of `command`.
pub fn of(command: Command) -> &'static CommandHelp {
    // Every command has an entry: `every_command_has_help` checks it.
    COMMANDS
        .iter()
        .find(|h| h.command == command)
        .unwrap_or(&COMMANDS[0])
}

/// The usage line of `command`, without the `Usage: ` prefix.
pub fn usage(command: Command) -> String {
    let h = of(command);
    let mut s = String::from("proxops [GLOBAL FLAGS] ");
    s.push_str(command.name());
    if !h.operands.is_empty() {
        s.push(' ');
        s.push_str(h.operands);
    }
    for f in command_flags(command) {
        s.push(' ');
        s.push_str(&f.usage());
    }
    s
}

pub const NAME: &str =
    "proxops — converge Proxmox VE clusters to a git repository of YAML manifests";

pub const SYNOPSIS: &str = "proxops [GLOBAL FLAGS] <COMMAND> [FLAGS]";

/// What the main help says after the flags, and the man page in its own
/// sections.
pub const FLAG_RULES: &str = "\
Each command takes only its own flags (see `proxops <command> --help`) and the
global flags; any other flag is an error (exit 2). An unknown command, flag
or value is answered with the nearest valid one (`did you mean \"validate\"?`;
`plan` is `diff` here). Without a command, this text goes to stderr and the
exit code is 2.";

pub const EXIT_CODES: &str = "\
Exit codes: 0 success; 1 failure at run time (PVE, git, a failed action, an
aborted cycle); 2 invalid input (usage, configuration, credentials, manifests:
nothing read from PVE, nothing written); 3 `diff --exit-code` found changes.";

pub const CREDENTIALS: &str = "\
Credentials are never accepted as flags: use PROXOPS_PVE_TOKEN_VALUE and friends,
or a SOPS file (docs/credentials.md).";

/// Every command, in the order help lists them.
pub const COMMANDS: &[CommandHelp] = &[
    CommandHelp {
        command: Command::Init,
        summary: "Start a repository for one cluster: configuration, one example per kind",
        operands: "[DIR] --cluster NAME",
        operand_choices: &[],
        about: "\
Write a new repository for the cluster --cluster names into DIR (default: the
working directory), which must be empty or not exist yet: proxops.yaml,
clusters/NAME/config.yaml (base-url and nodes to fill in),
clusters/NAME/resources.yaml listing one example manifest of every kind
but ReplicationJob, which needs ZFS storage and a second node, and the
firewall's kinds (FirewallAlias, FirewallIPSet, SecurityGroup,
ClusterFirewall), whose rules an operator writes for the cluster's own
networks (VM, TemplateVM, LXC, TemplateCT, ISO, CTTemplate, DiskImage,
Pool, BackupJob, HAResource, HARule), a .gitignore and a .sops.yaml. The result passes
`proxops validate`. Reads no PVE; a directory that holds anything exits 2
with nothing written. docs/getting-started.md tries it on fakepve.",
    },
    CommandHelp {
        command: Command::Validate,
        summary: "Parse and validate the repository; print `ok: N clusters, M objects`",
        operands: "",
        operand_choices: &[],
        about: "\
Parse and validate configuration, composition and every manifest of every
cluster. Prints `ok: N clusters, M objects`, or one diagnostic per line naming
file, line, column and field. Reads no PVE. Exit 0 when valid, 2 otherwise.
Every problem of a file is reported in one run, not only the first. An
unknown kind or field is answered with the nearest valid one, as a full path
(`did you mean spec.cpu.cores?`).
A manifest file under a kind directory that no resources.yaml lists is a
`warning:` line on stderr; warnings never change the exit code. So is a
decimal or bare size that is not whole in the unit PVE takes it in (GiB for
disks, MiB for memory): `size: 32G` is 29.80 GiB, while PVE's own 32G means
32GiB; the warning names the binary spelling to write.
--output json prints {\"diagnostics\": [{file, line, column, path, message,
hint, severity}], \"errors\": N, \"warnings\": N} on stdout (docs/cli.md).
A file over its size cap (1 MiB for a manifest or resources.yaml, 256 KiB for
a configuration file) or nested deeper than 32 levels is refused before it is
parsed. spec.extra keys are checked per cluster against the cluster's
allow-extra-keys (docs/configuration.md). Values are checked as PVE stores
them: an upper-case tag is refused with its lower-case spelling unless the
cluster declares tag-style: case-sensitive, and a storage file name PVE would
rewrite is refused with the name PVE would store.",
    },
    CommandHelp {
        command: Command::Diff,
        summary: "Plan every cluster and print the plan (reads PVE, or a recording with --replay)",
        operands: "",
        operand_choices: &[],
        about: "\
Plan every selected cluster and print the plan. Writes nothing to PVE.
The text plan lists under each action the fields it changes (`~ memory
(spec.memory)  2048 → 4096`, `+` added, `-` removed, secrets as <secret>),
marks the change that forces a restart (`← stop-start`), and ends each
cluster with a summary line and the plan with a `Plan:` total. Markdown stays
under 60,000 characters; a longer plan is cut, with a note, totals intact.
Unlisted manifest files are `warning:` lines on stderr (and `warnings` in json).
A larger disk size is a `resize` action (grown online); a smaller one is a
`shrink` anomaly, never done.
--out FILE saves the actions, the commit and what PVE showed of every object
they touch; no secret is written (docs/saved-plans.md).
--target KIND/NAME (repeatable) plans only those manifests and what they
depend on; the rest is listed as not considered and nothing is pruned. A
target no selected cluster declares exits 2, naming the nearest one.",
    },
    CommandHelp {
        command: Command::Apply,
        summary: "Show the plan, ask, then run one converge cycle per cluster",
        operands: "",
        operand_choices: &[],
        about: "\
Run one converge cycle per selected cluster: read live and plan every cluster,
print the plan (what diff prints), ask, then execute, read back and print the
results. On a terminal, type `yes` to go on; any other answer cancels (exit 1,
nothing written). With no terminal on standard input and no --yes, apply
refuses at once (exit 2, nothing read or written).
--dry-run prints what diff prints and exits as diff does.
Progress goes to stderr: a line when each action starts (its worker=N and how
many run at once), one when it ends (its time and PVE task UPIDs), and
`still running (Ns)` every 10 s of a task. Actions run at once within the
cluster's tasks-per-node (4), tasks-per-cluster (8) and downloads-per-storage
(2), dependencies first; at most disruption-budget (1) guests are down at once,
and per proxops/disruption-group its budget (disruption-groups).
A guest that must be off for an action is shut down (status/shutdown, waiting
reconcile.shutdown-timeout, default 180s); one that does not shut down in time
is left running, untouched, and the action fails, unless the cluster sets
force-stop-after-timeout: true (then status/stop, and the action goes on).

--output json prints the plan and the results in one document at the end;
when asking, the text plan is shown on stderr. A --plan FILE is refused
(exit 1, nothing written) when the commit, the files or any touched object
changed since it was saved; it is shown and asked like a plan, and with
--dry-run only checked. --target KIND/NAME applies only those manifests and
what they depend on, as diff --target plans them.

Each cluster is locked from its read to its read-back (<data-dir>/locks/);
one held by another proxops process is waited for up to reconcile.lock-wait
(default 5s), then aborted as `locked`, naming the holder.
Exit 1 when any action failed or any cluster aborted.",
    },
    CommandHelp {
        command: Command::Status,
        summary: "Per-cluster convergence table",
        operands: "",
        operand_choices: &[],
        about: "\
Run a read-only cycle and print each cluster's convergence table, with the
guest proxops itself runs in (`self:` lines; matched by this host's MACs or
SMBIOS UUID, or the configuration's `self:`). With --output json: the /status document, as an observing daemon serves it after
one cycle.",
    },
    CommandHelp {
        command: Command::Run,
        summary: "Daemon: converge every poll interval; serve /healthz, /metrics, /status",
        operands: "",
        operand_choices: &[],
        about: "\
Daemon: every reconcile.poll-interval (--git-poll-sec) re-read the repository
(a git fetch in URL mode) and run one cycle per cluster, up to
daemon.parallel-clusters (default 4) clusters at once, each on its own
schedule: a slow PVE delays only its own cluster; serve GET /healthz,
/metrics and /status on --listen (port 0 picks a free one; the start-up log
line names it). A cycle that fails (invalid tree, PVE unreachable) is
reported and the loop goes on; a cluster another proxops process holds
(its lock) is skipped that cycle as `locked`. --log-level debug logs every
PVE request.
Unattended by design: it asks nobody before writing.
The guest proxops runs in is never stopped, restarted or pruned
(docs/operations.md, \"Highly available\").
SIGINT/SIGTERM: finish the actions in flight, start no new one, exit 0.
If the status server stops serving: the same, then exit 1.

With --dry-run it observes only: it reads and plans every cycle, logs the
plan and serves the pending changes, and never writes to PVE. The first log
line and /status say \"mode\": observe or apply.",
    },
    CommandHelp {
        command: Command::Adopt,
        summary: "Write manifests for the live guests and files of one cluster (read-only)",
        operands: "--cluster NAME",
        operand_choices: &[],
        about: "\
Read one cluster (only GET requests) and write a manifest per live guest,
template and storage file under <kind>/<cluster>/. Prints the resources.yaml
lines to add, the gap report, INCOMPLETE and SKIPPED lists. Never writes
through a symlink that leads out of the work tree (refused, nothing written).
--replay DIR adopts from a recording instead of the API. --adopt-secrets
leaves PVE unchanged and takes the cluster's lock, as apply does.
--vmid N or --name NAME adopts one guest and reports only what it wrote; a
guest a manifest already manages is left alone.",
    },
    CommandHelp {
        command: Command::Show,
        summary: "Print a plan saved by `diff --out` for review (offline)",
        operands: "PLAN",
        operand_choices: &[],
        about: "\
Print the plan a `diff --out` saved, as diff printed it: text (the default),
markdown or json (docs/plan-json.md), under a line naming the commit it was
computed from. Reads the file alone: no repository, configuration,
credentials or PVE. Secrets show as <secret>; the file holds none.
A file that is not a saved plan of this version, or whose actions touch
objects it holds no observation of (edited or damaged), exits 2 and prints
no plan. Exit 0 otherwise, whatever the plan holds.",
    },
    CommandHelp {
        command: Command::Record,
        summary: "Save one cluster's PVE responses to <cluster>.json for offline diff",
        operands: "",
        operand_choices: &[],
        about: "\
Read every selected cluster as diff would and save the responses to
DIR/<cluster>.json (proxops-recording/v1), DIR given by --out. Never records
a credential, and never writes through a symlink that leads out of DIR.",
    },
    CommandHelp {
        command: Command::SecretsCheck,
        summary: "Decrypt and verify a SOPS file; print a fingerprint per value",
        operands: "FILE",
        operand_choices: &[],
        about: "\
Decrypt FILE with the age identities ProxOps would use (SOPS_AGE_KEY,
SOPS_AGE_KEY_FILE, the sops default key file) and verify its MAC. Prints one
line per value: <path>\\tsha256:<first 12 hex digits>. Never prints a value.
Exit 0 when it decrypts and the MAC holds; 2 otherwise, naming the error class.",
    },
    CommandHelp {
        command: Command::Schema,
        summary: "Print the JSON Schema of one manifest kind, or of every kind",
        operands: "[KIND]",
        operand_choices: KIND_WORDS,
        about: "\
Print the JSON Schema (draft 2020-12) of one manifest kind (VM, TemplateVM,
LXC, TemplateCT, ISO, CTTemplate, DiskImage, Pool, BackupJob, HAResource,
HARule, ReplicationJob, FirewallAlias, FirewallIPSet, SecurityGroup,
ClusterFirewall; any case), or without KIND one schema covering every
kind, chosen by `kind`.
Generated from the types the loader reads: each field carries its
description, `x-pve-key`, `x-default`, `x-impact` and the values and patterns the loader accepts. The same schemas
are in docs/schema/*.json, for editors (docs/getting-started.md). Rules that
span files (references, vmid collisions, the cluster's nodes) are validate's.
Reads no repository and no PVE. Exit 2 for an unknown kind.",
    },
    CommandHelp {
        command: Command::Explain,
        summary: "Explain a manifest field, e.g. `proxops explain vm.spec.memory`",
        operands: "<kind>[.<field path>]",
        operand_choices: KIND_WORDS,
        about: "\
Print what a manifest field means: its description, type, allowed values,
default, the PVE key it writes and the impact of a change on a running guest
(live, reboot, stop-start, or an anomaly for a person), e.g.
`proxops explain vm.spec.memory`, `proxops explain lxc.spec.root.size`. List
items are walked through (`vm.spec.disks.size`). Read from the same schema
`proxops schema` prints. Reads no repository and no PVE. An unknown kind or
field exits 2, naming the nearest valid path.",
    },
    CommandHelp {
        command: Command::Completions,
        summary: "Print the completion script for bash, zsh or fish",
        operands: "SHELL",
        operand_choices: Shell::NAMES,
        about: "\
Print a completion script for SHELL (bash, zsh or fish) on stdout: commands,
each command's flags, the fixed values of flags such as --output, and paths
for flags that take a file or directory. The Debian package installs all
three; by hand, see docs/operations.md.",
    },
    CommandHelp {
        command: Command::Man,
        summary: "Print the proxops(1) manual page (roff)",
        operands: "",
        operand_choices: &[],
        about: "\
Print the proxops(1) manual page in roff on stdout, made from the same text as
--help: `proxops man | man -l -` shows it.",
    },
];

/// `proxops --help`.
pub fn main() -> String {
    let mut s = format!("{NAME}\n\nUsage: {SYNOPSIS}\n\nCommands:\n");
    let width = COMMANDS
        .iter()
        .map(|h| h.command.name().len())
        .max()
        .unwrap_or(0)
        + 3;
    for h in COMMANDS {
        s.push_str(&format!("  {:<width$}{}\n", h.command.name(), h.summary));
    }
    s.push_str("\nGlobal flags:\n");
    flag_list(&mut s, &global_flags());
    for block in [FLAG_RULES, EXIT_CODES, CREDENTIALS] {
        s.push('\n');
        s.push_str(block);
        s.push('\n');
    }
    s
}

/// `proxops <command> --help`.
pub fn command(c: Command) -> String {
    let h = of(c);
    let mut s = format!("Usage: {}\n\n{}\n", usage(c), h.about);
    let flags = command_flags(c);
    if !flags.is_empty() {
        s.push_str("\nFlags:\n");
        flag_list(&mut s, &flags);
    }
    s
}

/// Two columns: the flag, then its help wrapped at 80 columns.
fn flag_list(s: &mut String, flags: &[Flag]) {
    const COLUMN: usize = 24;
    for f in flags {
        let shown = format!("  {}", f.shown());
        // A flag too wide for its column gets a line of its own.
        let mut first = if shown.len() + 2 > COLUMN {
            s.push_str(&shown);
            s.push('\n');
            String::new()
        } else {
            shown
        };
        for text in wrap(f.help, 80 - COLUMN) {
            s.push_str(&format!("{first:<COLUMN$}{text}\n"));
            first.clear();
        }
    }
}

/// `text` in lines of at most `width` characters, broken at spaces.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_help() {
        for c in Command::ALL {
            assert!(
                COMMANDS.iter().filter(|h| h.command == c).count() == 1,
                "{} has no help entry, or two",
                c.name()
            );
        }
        assert_eq!(COMMANDS.len(), Command::ALL.len());
    }

    #[test]
    fn every_flag_is_in_the_help_it_belongs_to() {
        let main = main();
        for f in global_flags() {
            assert!(main.contains(&f.shown()), "--help lacks {}", f.long);
        }
        for c in Command::ALL {
            let text = command(c);
            for f in command_flags(c) {
                assert!(
                    text.contains(&f.shown()),
                    "{} --help lacks {}",
                    c.name(),
                    f.long
                );
                assert!(
                    usage(c).contains(f.long),
                    "{} usage lacks {}",
                    c.name(),
                    f.long
                );
            }
            for f in all_command_flags() {
                if !flag_of(c, f.long) {
                    assert!(
                        !text.contains(&format!("  {}", f.shown())),
                        "{} --help lists {}",
                        c.name(),
                        f.long
                    );
                }
            }
        }
    }

    /// The three views of the same tables: a flag in COMMAND_FLAGS or
    /// GLOBAL_FLAGS is in --help, in the man page and in every completion
    /// script.
    #[test]
    fn every_table_flag_is_in_help_the_man_page_and_every_completion() {
        let page = crate::manpage::page();
        let scripts = [Shell::Bash, Shell::Zsh, Shell::Fish].map(crate::completions::script);
        let mut helps = vec![main()];
        helps.extend(Command::ALL.iter().map(|c| command(*c)));
        for f in global_flags().into_iter().chain(all_command_flags()) {
            assert!(
                helps.iter().any(|h| h.contains(&f.shown())),
                "no --help shows {}",
                f.long
            );
            let roff = format!("\\-\\-{}", f.long.trim_start_matches('-'));
            assert!(page.contains(&roff), "the man page lacks {}", f.long);
            let bare = f.long.trim_start_matches('-');
            for (shell, script) in ["bash", "zsh", "fish"].iter().zip(&scripts) {
                assert!(
                    script.contains(bare),
                    "the {shell} completion lacks {}",
                    f.long
                );
            }
        }
    }

    fn flag_of(c: Command, long: &str) -> bool {
        command_flags(c).iter().any(|f| f.long == long)
    }

    #[test]
    fn wrap_breaks_at_spaces_within_the_width() {
        assert_eq!(wrap("aa bb cc dd", 5), vec!["aa bb", "cc dd"]);
        assert_eq!(wrap("a verylongword b", 4), vec!["a", "verylongword", "b"]);
    }
}
