//! `proxops completions bash|zsh|fish`: shell completion scripts, made from
//! the tables `--help` reads (`help::COMMANDS`, `args::GLOBAL_FLAGS`,
//! `args::COMMAND_FLAGS`), so a flag added there is completed everywhere.
//! Pure text out; the binary prints it.

use crate::args::{Command, Flag, Shell};
use crate::help::{self, COMMANDS, CommandHelp};

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    match shell {
        Shell::Bash => bash(),
        Shell::Zsh => zsh(),
        Shell::Fish => fish(),
    }
}

/// What a flag's value (or a positional argument) completes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// A flag that takes no value.
    None,
    Choices(&'static [&'static str]),
    Dir,
    File,
    /// Anything: a name, an address, a number.
    Free,
    /// A cluster of the repository: the directories under `clusters/` of
    /// `--git-path` (bash) or of the git work tree the shell is in.
    Cluster,
}

/// The directories under `clusters/` of `$root`, one a line: the cluster
/// names a repository declares (docs/repository-layout.md).
const SH_CLUSTERS: &str =
    "for d in \"$root\"/clusters/*/; do [ -d \"$d\" ] && basename \"$d\"; done";

impl Value {
    fn of(placeholder: Option<&str>, choices: &'static [&'static str]) -> Value {
        match placeholder {
            None => Value::None,
            Some(_) if !choices.is_empty() => Value::Choices(choices),
            Some("DIR") => Value::Dir,
            Some("FILE" | "PATH" | "PLAN") => Value::File,
            Some(_) => Value::Free,
        }
    }

    fn of_flag(f: &Flag) -> Value {
        if f.long == "--cluster" {
            return Value::Cluster;
        }
        Value::of(f.value, f.choices)
    }

    fn of_operand(h: &CommandHelp) -> Value {
        match h.operands {
            "" => Value::None,
            o if o.starts_with('-') => Value::None,
            o => Value::of(Some(o), h.operand_choices),
        }
    }
}

/// The first word of a command's name: what is typed before its flags
/// (`secrets` of `secrets check`).
fn word(c: Command) -> &'static str {
    let name = c.name();
    name.split(' ').next().unwrap_or(name)
}

/// The entries of the command flag `long`, each with the words of the
/// commands it belongs to: one entry for most flags, one per group of
/// commands where they take different values (`--output`: markdown is
/// `diff`'s and `show`'s only).
fn entries(long: &str) -> Vec<(Flag, Vec<&'static str>)> {
    let mut out: Vec<(Flag, Vec<&'static str>)> = Vec::new();
    for h in COMMANDS {
        for f in help::command_flags(h.command) {
            if f.long != long {
                continue;
            }
            match out.iter_mut().find(|(g, _)| g.help == f.help) {
                Some((_, words)) => words.push(word(h.command)),
                None => out.push((f, vec![word(h.command)])),
            }
        }
    }
    out
}

/// The flag's help up to its first `(` or `;`: a completion menu line.
fn short(help: &str) -> &str {
    help.split([';', '(']).next().unwrap_or(help).trim_end()
}

/// Every spelling of a flag: `-n --dry-run`.
fn spellings(f: &Flag) -> Vec<&'static str> {
    f.short.into_iter().chain([f.long]).collect()
}

/// The bash lines that find the command: the first word that is neither
/// a flag nor the value of one of the `valued` flags.
fn bash_command_word(valued: &str) -> String {
    format!(
        "    # The command: the first word that is neither a flag nor a flag's value.
    cmd=\"\"
    i=1
    while [ \"$i\" -lt \"$COMP_CWORD\" ]; do
        w=\"${{COMP_WORDS[i]}}\"
        case \"$w\" in
            {valued})
                i=$((i + 1)) ;;
            -*) ;;
            *)
                if [ -z \"$cmd\" ]; then
                    cmd=\"$w\"
                elif [ \"$cmd\" = secrets ] && [ \"$w\" = check ]; then
                    cmd=\"secrets check\"
                else
                    cmd=\"$cmd $w\"
                fi ;;
        esac
        i=$((i + 1))
    done
"
    )
}

/// The `case "$prev"` arm of a flag with a fixed set of values: the set
/// of the command typed, where commands take different ones.
fn bash_choices(f: &Flag) -> String {
    let reply = |choices: &[&str]| {
        format!(
            "mapfile -t COMPREPLY < <(compgen -W \"{}\" -- \"$cur\")",
            choices.join(" ")
        )
    };
    let label = spellings(f).join("|");
    let groups = entries(f.long);
    if groups.len() < 2 {
        return format!(
            "        {label})\n            {}\n            return 0 ;;\n",
            reply(f.choices)
        );
    }
    let mut s = format!("        {label})\n            case \"${{cmd%% *}}\" in\n");
    for (g, words) in &groups {
        s.push_str(&format!(
            "                {}) {} ;;\n",
            words.join("|"),
            reply(g.choices)
        ));
    }
    s.push_str(&format!(
        "                *) {} ;;\n            esac\n            return 0 ;;\n",
        reply(f.choices)
    ));
    s
}

fn bash() -> String {
    let globals = help::global_flags();
    let mut all_flags = globals.clone();
    all_flags.extend(help::all_command_flags());
    let mut s = bash_head();
    s.push_str(&bash_command_word(&bash_valued(&all_flags)));
    s.push_str(&bash_value_cases(&all_flags));
    s.push_str(&bash_command_cases(&globals));
    s.push_str(
        "        *)
            return 0 ;;
    esac
    if [ \"${#COMPREPLY[@]}\" -eq 0 ]; then
        mapfile -t COMPREPLY < <(compgen -W \"$flags $global\" -- \"$cur\")
    fi
    return 0
}

complete -F _proxops proxops
",
    );
    s
}

/// The spellings of the flags whose value completes as `v`, as one bash
/// `case` pattern (`--git-path|--replay`).
fn flag_names(flags: &[Flag], v: Value) -> String {
    let mut n: Vec<&str> = flags
        .iter()
        .filter(|f| Value::of_flag(f) == v)
        .flat_map(spellings)
        .collect();
    n.dedup();
    n.join("|")
}

/// The script up to the command word: the cluster lister and the start of
/// the completion function.
fn bash_head() -> String {
    format!(
        "# bash completion for proxops                             -*- shell-script -*-
# Generated by `proxops completions bash` from the tables of `proxops --help`.

# The clusters of the repository: of --git-path, else of the work tree.
_proxops_clusters() {{
    local root=\"\" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        [ \"${{COMP_WORDS[i]}}\" = --git-path ] && root=\"${{COMP_WORDS[i+1]}}\"
    done
    [ -n \"$root\" ] || root=\"$(git rev-parse --show-toplevel 2>/dev/null || pwd)\"
    {SH_CLUSTERS}
}}

_proxops() {{
    local cur prev cmd i w
    cur=\"${{COMP_WORDS[COMP_CWORD]}}\"
    prev=\"\"
    if [ \"$COMP_CWORD\" -gt 0 ]; then
        prev=\"${{COMP_WORDS[COMP_CWORD-1]}}\"
    fi
    COMPREPLY=()

",
    )
}

/// Every flag that takes a value, as one `case` pattern: the word after one
/// is its value, never the command.
fn bash_valued(all_flags: &[Flag]) -> String {
    let names = |v| flag_names(all_flags, v);
    [
        names(Value::Dir),
        names(Value::File),
        names(Value::Free),
        names(Value::Cluster),
    ]
    .into_iter()
    .chain(all_flags.iter().filter_map(|f| match Value::of_flag(f) {
        Value::Choices(_) => Some(spellings(f).join("|")),
        _ => None,
    }))
    .filter(|n| !n.is_empty())
    .collect::<Vec<_>>()
    .join("|")
}

/// `case "$prev"`: a flag's value, from a fixed set, a path, or nothing.
fn bash_value_cases(all_flags: &[Flag]) -> String {
    let names = |v| flag_names(all_flags, v);
    let mut s = String::new();
    s.push_str("\n    # A flag's value: a fixed set, a path, or nothing to offer.\n    case \"$prev\" in\n");
    for f in all_flags {
        if let Value::Choices(_) = Value::of_flag(f) {
            s.push_str(&bash_choices(f));
        }
    }
    let clusters = names(Value::Cluster);
    s.push_str(&format!(
        "        {clusters})\n            mapfile -t COMPREPLY < <(compgen -W \"$(_proxops_clusters)\" -- \"$cur\")\n            return 0 ;;\n"
    ));
    let dirs = names(Value::Dir);
    if !dirs.is_empty() {
        s.push_str(&format!(
            "        {dirs})\n            compopt -o filenames 2>/dev/null\n            mapfile -t COMPREPLY < <(compgen -d -- \"$cur\")\n            return 0 ;;\n"
        ));
    }
    let files = names(Value::File);
    if !files.is_empty() {
        s.push_str(&format!(
            "        {files})\n            compopt -o filenames 2>/dev/null\n            mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n            return 0 ;;\n"
        ));
    }
    let free = names(Value::Free);
    if !free.is_empty() {
        s.push_str(&format!("        {free})\n            return 0 ;;\n"));
    }
    s
}

/// `case "$cmd"`: no command yet (the commands, or the global flags), then
/// each command's flags and operand.
fn bash_command_cases(globals: &[Flag]) -> String {
    let global_words: Vec<&str> = globals.iter().flat_map(spellings).collect();
    let command_words: Vec<&str> = COMMANDS.iter().map(|h| word(h.command)).collect();
    let mut s = String::new();
    s.push_str(&format!(
        "    esac

    local global=\"{}\"
    local flags=\"\"
    case \"$cmd\" in
        \"\")
            if [[ \"$cur\" == -* ]]; then
                mapfile -t COMPREPLY < <(compgen -W \"$global\" -- \"$cur\")
            else
                mapfile -t COMPREPLY < <(compgen -W \"{}\" -- \"$cur\")
            fi
            return 0 ;;
        secrets)
            mapfile -t COMPREPLY < <(compgen -W \"check\" -- \"$cur\")
            return 0 ;;
",
        global_words.join(" "),
        command_words.join(" ")
    ));
    for h in COMMANDS {
        let flags: Vec<&str> = help::command_flags(h.command)
            .iter()
            .flat_map(spellings)
            .collect();
        s.push_str(&format!(
            "        \"{}\")\n            flags=\"{}\"",
            h.command.name(),
            flags.join(" ")
        ));
        match Value::of_operand(h) {
            Value::Choices(c) => {
                s.push_str(&format!(
                    "\n            [[ \"$cur\" == -* ]] || mapfile -t COMPREPLY < <(compgen -W \"{}\" -- \"$cur\")",
                    c.join(" ")
                ));
            }
            Value::File => s.push_str(
                "\n            [[ \"$cur\" == -* ]] || { compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -f -- \"$cur\"); }",
            ),
            Value::Dir => s.push_str(
                "\n            [[ \"$cur\" == -* ]] || { compopt -o filenames 2>/dev/null; mapfile -t COMPREPLY < <(compgen -d -- \"$cur\"); }",
            ),
            Value::None | Value::Free | Value::Cluster => {}
        }
        s.push_str(" ;;\n");
    }
    s
}

/// `text` inside single quotes, for zsh.
fn zsh_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A zsh `_arguments` spec of one flag.
fn zsh_spec(f: &Flag) -> String {
    let desc = short(f.help).replace('[', "(").replace(']', ")");
    let action = match Value::of_flag(f) {
        Value::None => String::new(),
        Value::Choices(c) => format!(":{}:({})", f.value.unwrap_or("VALUE"), c.join(" ")),
        Value::Dir => format!(":{}:_files -/", f.value.unwrap_or("DIR")),
        Value::File => format!(":{}:_files", f.value.unwrap_or("FILE")),
        Value::Free => format!(":{}: ", f.value.unwrap_or("VALUE")),
        Value::Cluster => format!(":{}:_proxops_clusters", f.value.unwrap_or("NAME")),
    };
    let eq = if f.value.is_some() { "=" } else { "" };
    match f.short {
        Some(short) => format!(
            "'({short} {long})'{{{short},{long}}}{}",
            zsh_quoted(&format!("{eq}[{desc}]{action}")),
            long = f.long
        ),
        None => zsh_quoted(&format!("{}{eq}[{desc}]{action}", f.long)),
    }
}

fn zsh() -> String {
    let mut s = String::from(
        "#compdef proxops
# zsh completion for proxops.
# Generated by `proxops completions zsh` from the tables of `proxops --help`.

# The clusters of the repository the shell is in.
_proxops_clusters() {
    local root
    local -a names
    root=\"$(git rev-parse --show-toplevel 2>/dev/null || pwd)\"
    names=( ${(f)\"$(",
    );
    s.push_str(SH_CLUSTERS);
    s.push_str(
        ")\"} )
    compadd -a names
}

_proxops() {
    local curcontext=\"$curcontext\" state line ret=1
    local -a global commands
    global=(
",
    );
    for f in help::global_flags() {
        s.push_str(&format!("        {}\n", zsh_spec(&f)));
    }
    s.push_str("    )\n    commands=(\n");
    for h in COMMANDS {
        s.push_str(&format!(
            "        {}\n",
            zsh_quoted(&format!("{}:{}", word(h.command), h.summary))
        ));
    }
    s.push_str(
        "    )
    _arguments -C -s $global '1: :->command' '*:: :->args' && ret=0
    case $state in
        command)
            _describe -t commands 'proxops command' commands && ret=0 ;;
        args)
            case $line[1] in
                secrets)
                    _arguments -s $global '1:subcommand:(check)' '2:FILE:_files' && ret=0 ;;
",
    );
    for h in COMMANDS {
        if h.command == Command::SecretsCheck {
            continue;
        }
        let mut specs: Vec<String> = help::command_flags(h.command)
            .iter()
            .map(zsh_spec)
            .collect();
        match Value::of_operand(h) {
            Value::Choices(c) => {
                specs.push(zsh_quoted(&format!("1:{}:({})", h.operands, c.join(" "))))
            }
            Value::File => specs.push(zsh_quoted(&format!("1:{}:_files", h.operands))),
            Value::Dir => specs.push(zsh_quoted(&format!("1:{}:_files -/", h.operands))),
            Value::None | Value::Free | Value::Cluster => {}
        }
        s.push_str(&format!(
            "                {})\n                    _arguments -s $global {} && ret=0 ;;\n",
            word(h.command),
            specs.join(" \\\n                        ")
        ));
    }
    s.push_str(
        "            esac ;;
    esac
    return ret
}

_proxops \"$@\"
",
    );
    s
}

/// `text` inside single quotes, for fish.
fn fish_quoted(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A fish `complete` line of one flag, given when `condition` holds.
fn fish_flag(f: &Flag, condition: Option<&str>) -> String {
    let mut s = String::from("complete -c proxops");
    if let Some(c) = condition {
        s.push_str(&format!(" -n {}", fish_quoted(c)));
    }
    if let Some(short) = f.short {
        s.push_str(&format!(" -s {}", short.trim_start_matches('-')));
    }
    s.push_str(&format!(" -l {}", f.long.trim_start_matches('-')));
    match Value::of_flag(f) {
        Value::None => {}
        Value::Choices(c) => s.push_str(&format!(" -x -a {}", fish_quoted(&c.join(" ")))),
        Value::Dir => s.push_str(" -x -a '(__fish_complete_directories)'"),
        Value::File => s.push_str(" -r -F"),
        Value::Free => s.push_str(" -x"),
        Value::Cluster => s.push_str(" -x -a '(__proxops_clusters)'"),
    }
    s.push_str(&format!(" -d {}\n", fish_quoted(short(f.help))));
    s
}

fn fish() -> String {
    let mut s = String::from(
        "# fish completion for proxops.
# Generated by `proxops completions fish` from the tables of `proxops --help`.

complete -c proxops -f

# The clusters of the repository the shell is in.
function __proxops_clusters
    set -l root (git rev-parse --show-toplevel 2>/dev/null; or pwd)
    for d in $root/clusters/*/
        basename $d
    end
end

# Commands
",
    );
    for h in COMMANDS {
        s.push_str(&format!(
            "complete -c proxops -n __fish_use_subcommand -a {} -d {}\n",
            word(h.command),
            fish_quoted(h.summary)
        ));
    }
    s.push_str(
        "complete -c proxops -n '__fish_seen_subcommand_from secrets; and not __fish_seen_subcommand_from check' -a check -d 'Decrypt and verify a SOPS file'\n",
    );
    s.push_str("\n# Global flags\n");
    for f in help::global_flags() {
        s.push_str(&fish_flag(&f, None));
    }
    s.push_str("\n# Command flags\n");
    for f in help::all_command_flags() {
        for (g, owners) in entries(f.long) {
            let condition = format!("__fish_seen_subcommand_from {}", owners.join(" "));
            s.push_str(&fish_flag(&g, Some(&condition)));
        }
    }
    s.push_str("\n# Positional arguments\n");
    for h in COMMANDS {
        let condition = match h.command {
            Command::SecretsCheck => "__fish_seen_subcommand_from check".to_owned(),
            c => format!("__fish_seen_subcommand_from {}", word(c)),
        };
        let what = match Value::of_operand(h) {
            Value::Choices(c) => format!("-x -a {}", fish_quoted(&c.join(" "))),
            Value::File => "-F".to_owned(),
            Value::Dir => "-x -a '(__fish_complete_directories)'".to_owned(),
            Value::None | Value::Free | Value::Cluster => continue,
        };
        s.push_str(&format!(
            "complete -c proxops -n {} {what}\n",
            fish_quoted(&condition)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_and_command_is_in_every_script() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let text = script(shell);
            let flags = help::global_flags()
                .into_iter()
                .chain(help::all_command_flags());
            for f in flags {
                for spelling in spellings(&f) {
                    let bare = spelling.trim_start_matches('-');
                    let found = match shell {
                        Shell::Fish if spelling.starts_with("--") => {
                            text.contains(&format!(" -l {bare} "))
                        }
                        Shell::Fish => text.contains(&format!(" -s {bare} ")),
                        _ => text.contains(spelling),
                    };
                    assert!(found, "{shell:?} completion lacks {spelling}");
                }
            }
            for h in COMMANDS {
                assert!(
                    text.contains(word(h.command)),
                    "{shell:?} completion lacks {}",
                    h.command.name()
                );
            }
        }
    }

    #[test]
    fn fixed_values_and_paths_are_completed() {
        let bash = bash();
        assert!(bash.contains("compgen -W \"text json markdown\""), "{bash}");
        assert!(bash.contains("compgen -W \"bash zsh fish\""), "{bash}");
        let zsh = zsh();
        assert!(
            zsh.contains("--replay=[Read PVE from the recordings"),
            "{zsh}"
        );
        assert!(zsh.contains(":DIR:_files -/"), "{zsh}");
        let fish = fish();
        assert!(
            fish.contains("-l output -x -a 'text json markdown'"),
            "{fish}"
        );
        // Each command is offered the formats it takes.
        assert!(
            fish.contains(
                "-n '__fish_seen_subcommand_from validate apply status' -s o -l output -x -a 'text json' "
            ),
            "{fish}"
        );
        assert!(
            fish.contains("-n '__fish_seen_subcommand_from diff show' -s o -l output -x -a 'text json markdown' "),
            "{fish}"
        );
        assert!(fish.contains("-l plan -r -F"), "{fish}");
    }
}
