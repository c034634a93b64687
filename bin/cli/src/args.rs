//! Command-line arguments, first stage: the flags exactly as given, with no
//! I/O (ripgrep's LowArgs). Resolving them against files and the
//! environment happens in `context`.

use std::ffi::OsString;
use std::path::PathBuf;

use proxops_model::suggest;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Init,
    Validate,
    Diff,
    Apply,
    Status,
    Run,
    Adopt,
    Show,
    Record,
    SecretsCheck,
    Schema,
    Explain,
    Completions,
    Man,
}

impl Command {
    pub fn name(self) -> &'static str {
        match self {
            Command::Init => "init",
            Command::Validate => "validate",
            Command::Diff => "diff",
            Command::Apply => "apply",
            Command::Status => "status",
            Command::Run => "run",
            Command::Adopt => "adopt",
            Command::Show => "show",
            Command::Record => "record",
            Command::SecretsCheck => "secrets check",
            Command::Schema => "schema",
            Command::Explain => "explain",
            Command::Completions => "completions",
            Command::Man => "man",
        }
    }

    /// Every command, in the order help lists them.
    pub const ALL: [Command; 14] = [
        Command::Init,
        Command::Validate,
        Command::Diff,
        Command::Apply,
        Command::Status,
        Command::Run,
        Command::Adopt,
        Command::Show,
        Command::Record,
        Command::SecretsCheck,
        Command::Schema,
        Command::Explain,
        Command::Completions,
        Command::Man,
    ];
}

/// The shells `proxops completions` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl Shell {
    pub const NAMES: &[&str] = &["bash", "zsh", "fish"];

    pub fn parse(s: &str) -> Result<Shell, String> {
        match s {
            "bash" => Ok(Shell::Bash),
            "zsh" => Ok(Shell::Zsh),
            "fish" => Ok(Shell::Fish),
            other => Err(format!(
                "unknown shell {other:?}: use {}",
                Shell::NAMES.join(", ")
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Text,
    Json,
    Markdown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// `--color`: when the text plan is coloured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    Always,
    Never,
}

/// Global flags (spec §16.2): each overrides configuration only when given.
#[derive(Debug, Clone, Default)]
pub struct GlobalArgs {
    pub git_path: Option<PathBuf>,
    pub config: Option<PathBuf>,
    pub log_level: Option<String>,
    pub log_format: Option<LogFormat>,
    pub clusters: Vec<String>,
    pub listen: Option<String>,
    pub git_url: Option<String>,
    pub git_branch: Option<String>,
    pub git_poll_sec: Option<u64>,
    pub prune_budget: Option<i64>,
    pub pve_user: Option<String>,
    pub pve_auth: Option<String>,
    pub ca_file: Option<String>,
    pub color: ColorChoice,
}

/// Flags of the individual commands.
#[derive(Debug, Clone, Default)]
pub struct CommandArgs {
    pub replay: Option<PathBuf>,
    pub output: Option<Output>,
    pub exit_code: bool,
    pub dry_run: bool,
    pub diff: bool,
    pub out: Option<PathBuf>,
    pub adopt_secrets: bool,
    /// `apply --plan FILE`: execute a saved plan.
    pub plan: Option<PathBuf>,
    /// `apply -y/--yes`: apply without asking for confirmation.
    pub yes: bool,
    /// `run --once`: one turn per cluster, then exit.
    pub once: bool,
    /// `status --watch`: print again every poll interval.
    pub watch: bool,
    /// `explain --recursive`: the fields' fields too.
    pub recursive: bool,
    /// `diff`/`apply --verbose`: PVE's form of each value too.
    pub verbose: bool,
    pub file: Option<PathBuf>,
    /// `schema [KIND]`, `explain PATH`: what to print.
    pub topic: Option<String>,
    /// `completions SHELL`.
    pub shell: Option<Shell>,
    /// `--target KIND/NAME` (diff, apply), as given, in order.
    pub targets: Vec<String>,
    /// `adopt --vmid N`.
    pub vmid: Option<String>,
    /// `adopt --name NAME`.
    pub name: Option<String>,
}

/// A flag as `--help`, the man page and the shell completions show it: a
/// global flag as GLOBAL_FLAGS holds it, or a CommandFlag without its
/// commands.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    pub long: &'static str,
    pub short: Option<&'static str>,
    /// The value's placeholder, for flags that take one.
    pub value: Option<&'static str>,
    /// The values it takes, when they are a fixed set.
    pub choices: &'static [&'static str],
    /// What it does, for `--help`, the man page and completions.
    pub help: &'static str,
}

/// Every global flag, in the order `--help` lists them. `parse` reads each
/// one; a test keeps this table and `parse` in step.
pub const GLOBAL_FLAGS: &[Flag] = &[
    Flag {
        long: "--git-path",
        short: None,
        value: Some("DIR"),
        choices: &[],
        help: "The GitOps work tree (default: $PROXOPS_GIT_PATH, else the nearest directory at or above the working directory holding .git)",
    },
    Flag {
        long: "--config",
        short: None,
        value: Some("FILE"),
        choices: &[],
        help: "A single configuration file (default: $PROXOPS_CONFIG): a URL-mode file, or clusters/<name>/config.yaml to run that cluster alone",
    },
    Flag {
        long: "--cluster",
        short: None,
        value: Some("NAME"),
        choices: &[],
        help: "Only this cluster; repeat for several",
    },
    Flag {
        long: "--log-level",
        short: None,
        value: Some("LEVEL"),
        choices: LOG_LEVELS,
        help: "debug | info | warn | error",
    },
    Flag {
        long: "--log-format",
        short: None,
        value: Some("FORMAT"),
        choices: &["text", "json"],
        help: "text | json (one object a line, with an RFC 3339 ts)",
    },
    Flag {
        long: "--listen",
        short: None,
        value: Some("ADDR"),
        choices: &[],
        help: "HTTP bind address for `run` (default 127.0.0.1:9494)",
    },
    Flag {
        long: "--git-url",
        short: None,
        value: Some("URL"),
        choices: &[],
        help: "URL mode: fetch desired state from this remote",
    },
    Flag {
        long: "--git-branch",
        short: None,
        value: Some("BRANCH"),
        choices: &[],
        help: "Branch to reconcile in URL mode (default main)",
    },
    Flag {
        long: "--git-poll-sec",
        short: None,
        value: Some("N"),
        choices: &[],
        help: "Poll interval in seconds for `run`",
    },
    Flag {
        long: "--prune-budget",
        short: None,
        value: Some("N"),
        choices: &[],
        help: "Deletions per cluster per cycle; 0 = unlimited, -1 = configured",
    },
    Flag {
        long: "--pve-user",
        short: None,
        value: Some("USER"),
        choices: &[],
        help: "Bootstrap PVE user as user@realm (e.g. root@pam)",
    },
    Flag {
        long: "--pve-auth",
        short: None,
        value: Some("METHOD"),
        choices: &["token", "ticket"],
        help: "token | ticket",
    },
    Flag {
        long: "--ca-file",
        short: None,
        value: Some("FILE"),
        choices: &[],
        help: "PEM CA bundle trusted for PVE endpoints",
    },
    Flag {
        long: "--color",
        short: None,
        value: Some("WHEN"),
        choices: &["auto", "always", "never"],
        help: "Colour the text plan: auto (default: on a terminal, unless NO_COLOR is set), always or never",
    },
    Flag {
        long: "--help",
        short: Some("-h"),
        value: None,
        choices: &[],
        help: "Print help (also `proxops <command> --help`)",
    },
    Flag {
        long: "--version",
        short: Some("-V"),
        value: None,
        choices: &[],
        help: "Print the version",
    },
];

const LOG_LEVELS: &[&str] = &["debug", "info", "warn", "error"];

/// A flag of one or more commands (not a global flag).
#[derive(Debug, Clone, Copy)]
pub struct CommandFlag {
    /// What it does, for `--help`, the man page and completions.
    pub help: &'static str,
    /// The values it takes, when they are a fixed set.
    pub choices: &'static [&'static str],
    pub long: &'static str,
    pub short: Option<&'static str>,
    /// The value's placeholder, for flags that take one.
    pub value: Option<&'static str>,
    /// The commands that take it.
    pub commands: &'static [Command],
}

impl CommandFlag {
    fn shown(&self) -> String {
        let mut s = match self.short {
            Some(short) => format!("{short}/{}", self.long),
            None => self.long.to_owned(),
        };
        if let Some(v) = self.value {
            s.push(' ');
            s.push_str(v);
        }
        s
    }
}

/// Every command-specific flag and the commands it means something to. A
/// flag given to any other command is refused: nothing on the command line
/// is silently ignored.
pub const COMMAND_FLAGS: &[CommandFlag] = &[
    CommandFlag {
        help: "Read PVE from the recordings DIR/<cluster>.json instead of the API",
        choices: &[],
        long: "--replay",
        short: None,
        value: Some("DIR"),
        commands: &[
            Command::Diff,
            Command::Apply,
            Command::Status,
            Command::Adopt,
        ],
    },
    // Two entries for one flag: markdown (a pull-request comment) is
    // `diff`'s and `show`'s only, and help, man page and completions offer
    // each command what it takes.
    CommandFlag {
        help: "text (default), json (stable schema, docs/plan-json.md) or markdown (a pull-request comment)",
        choices: &["text", "json", "markdown"],
        long: "--output",
        short: Some("-o"),
        value: Some("FORMAT"),
        commands: &[Command::Diff, Command::Show],
    },
    CommandFlag {
        help: "text (default) or json (stable schema, docs/plan-json.md; for validate the diagnostics)",
        choices: &["text", "json"],
        long: "--output",
        short: Some("-o"),
        value: Some("FORMAT"),
        commands: &[Command::Validate, Command::Apply, Command::Status],
    },
    CommandFlag {
        help: "Exit 4 when an anomaly needs a person or work was skipped this cycle; else 3 when any cluster has an action to take or a guest waiting for a restart to take changes PVE holds pending",
        choices: &[],
        long: "--exit-code",
        short: None,
        value: None,
        commands: &[Command::Diff],
    },
    CommandFlag {
        help: "Accepted and ignored: every output shows the field changes",
        choices: &[],
        long: "--diff",
        short: None,
        value: None,
        commands: &[Command::Diff, Command::Apply],
    },
    CommandFlag {
        help: "Give every selected cluster one turn, then exit (1 when a cluster aborted or an action failed): the daemon's cycle from cron or CI",
        choices: &[],
        long: "--once",
        short: None,
        value: None,
        commands: &[Command::Run],
    },
    CommandFlag {
        help: "Text plan: show PVE's form of each value beside the manifest's (2GiB (PVE: 2048))",
        choices: &[],
        long: "--verbose",
        short: Some("-v"),
        value: None,
        commands: &[Command::Diff, Command::Apply],
    },
    CommandFlag {
        help: "Also list the fields of each field, all the way down (kubectl explain --recursive)",
        choices: &[],
        long: "--recursive",
        short: Some("-r"),
        value: None,
        commands: &[Command::Explain],
    },
    CommandFlag {
        help: "Print the table again every reconcile.poll-interval until interrupted (on a terminal, in place)",
        choices: &[],
        long: "--watch",
        short: Some("-w"),
        value: None,
        commands: &[Command::Status],
    },
    CommandFlag {
        help: "Plan only and write nothing to PVE: apply asks nothing, run observes",
        choices: &[],
        long: "--dry-run",
        short: Some("-n"),
        value: None,
        commands: &[Command::Apply, Command::Run],
    },
    CommandFlag {
        help: "Plan only KIND/NAME (e.g. VM/web-01) and what it depends on; repeat for several; everything else is listed as not considered, and nothing is pruned",
        choices: &[],
        long: "--target",
        short: None,
        value: Some("KIND/NAME"),
        commands: &[Command::Diff, Command::Apply],
    },
    CommandFlag {
        help: "Apply without asking (scripts, CI)",
        choices: &[],
        long: "--yes",
        short: Some("-y"),
        value: None,
        commands: &[Command::Apply],
    },
    CommandFlag {
        help: "Execute exactly the actions saved by `diff --out FILE`, no re-plan (docs/saved-plans.md)",
        choices: &[],
        long: "--plan",
        short: None,
        value: Some("FILE"),
        commands: &[Command::Apply],
    },
    CommandFlag {
        help: "diff: also save the plan for `apply --plan`; record: the directory for the recordings",
        choices: &[],
        long: "--out",
        short: None,
        value: Some("PATH"),
        commands: &[Command::Diff, Command::Record],
    },
    CommandFlag {
        help: "Add live SSH keys the cluster's SOPS file lacks, as adopted-<hex> names, and reference them",
        choices: &[],
        long: "--adopt-secrets",
        short: None,
        value: None,
        commands: &[Command::Adopt],
    },
    CommandFlag {
        help: "Adopt only the guest with this vmid; a guest a manifest already manages is left alone",
        choices: &[],
        long: "--vmid",
        short: None,
        value: Some("N"),
        commands: &[Command::Adopt],
    },
    CommandFlag {
        help: "Adopt only the guest of this PVE name (refused when several carry it: use --vmid)",
        choices: &[],
        long: "--name",
        short: None,
        value: Some("NAME"),
        commands: &[Command::Adopt],
    },
];

impl From<&CommandFlag> for Flag {
    fn from(f: &CommandFlag) -> Flag {
        Flag {
            long: f.long,
            short: f.short,
            value: f.value,
            choices: f.choices,
            help: f.help,
        }
    }
}

/// The flags `command` takes, as an error message shows them.
pub fn flags_of(command: Command) -> Vec<&'static CommandFlag> {
    COMMAND_FLAGS
        .iter()
        .filter(|f| f.commands.contains(&command))
        .collect()
}

fn takes(command: Command) -> String {
    let own: Vec<String> = flags_of(command).iter().map(|f| f.shown()).collect();
    if own.is_empty() {
        format!(
            "{} takes no flags of its own, only the global flags",
            command.name()
        )
    } else {
        format!(
            "{} takes {} and the global flags",
            command.name(),
            own.join(", ")
        )
    }
}

#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Parsed {
    Help(Option<Command>),
    Version,
    /// No command given.
    Usage,
    Run {
        command: Command,
        global: GlobalArgs,
        args: CommandArgs,
    },
}

/// `--output`'s value, one of `choices` (those of the command's entry).
fn parse_output(s: &str, choices: &[&str]) -> Result<Output, String> {
    let (output, name) = match s {
        "text" => (Some(Output::Text), "text"),
        "json" => (Some(Output::Json), "json"),
        "markdown" | "md" => (Some(Output::Markdown), "markdown"),
        other => (None, other),
    };
    let allowed = match choices {
        [one, two] => format!("{one} or {two}"),
        [first, second, third] => format!("{first}, {second} or {third}"),
        many => many.join(", "),
    };
    match output {
        Some(o) if choices.contains(&name) => Ok(o),
        // Only `diff` and `show` take markdown: a pull-request comment is
        // of a plan.
        Some(_) => Err(format!(
            "--output {name} is for diff and show only (a pull-request comment): use {allowed}"
        )),
        None => Err(with_hint(
            format!("invalid --output {s:?}: use {allowed}"),
            suggest::did_you_mean(s, choices.iter().copied()),
        )),
    }
}

fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(with_hint(
            format!("invalid --log-format {other:?}: use text or json"),
            suggest::did_you_mean(other, ["text", "json"]),
        )),
    }
}

fn parse_color(s: &str) -> Result<ColorChoice, String> {
    match s {
        "auto" => Ok(ColorChoice::Auto),
        "always" => Ok(ColorChoice::Always),
        "never" => Ok(ColorChoice::Never),
        other => Err(format!(
            "invalid --color {other:?}: use auto, always or never"
        )),
    }
}

/// `message; did you mean …?`, or the message alone without a hint.
fn with_hint(message: String, hint: Option<String>) -> String {
    match hint {
        Some(h) => format!("{message}; {h}"),
        None => message,
    }
}

/// Commands by what other tools call them: a habit from Terraform,
/// Kubernetes tooling or a linter gets ProxOps' word for it.
const COMMAND_HABITS: &[(&str, &str)] =
    &[("plan", "diff"), ("import", "adopt"), ("lint", "validate")];

/// The words a command line may start with: every command's first word,
/// and `help`.
fn command_words() -> impl Iterator<Item = &'static str> {
    Command::ALL
        .iter()
        .map(|c| c.name().split(' ').next().unwrap_or_default())
        .chain(["help"])
}

/// Other tools' names for our flags, without their dashes (Terraform's
/// `-auto-approve` for `--yes`).
const FLAG_HABITS: &[(&str, &str)] = &[("auto-approve", "--yes")];

/// The nearest flag to an unknown one (`--ouput=json` → `--output`): the
/// command's own flags and the global flags. Terraform's single-dash long
/// flags (`-out=plan`, `-auto-approve`) are read as their double-dash form.
fn flag_hint(given: &str, command: Option<Command>) -> Option<String> {
    let name = given.split_once('=').map_or(given, |(n, _)| n);
    let name = match name.strip_prefix('-') {
        Some(rest) if rest.len() > 1 && !rest.starts_with('-') => format!("--{rest}"),
        _ => name.to_owned(),
    };
    let known: Vec<&str> = COMMAND_FLAGS
        .iter()
        .filter(|f| command.is_none_or(|c| f.commands.contains(&c)))
        .map(|f| f.long)
        .chain(GLOBAL_FLAGS.iter().map(|f| f.long))
        .collect();
    let habit = FLAG_HABITS
        .iter()
        .find(|(theirs, ours)| {
            name.trim_start_matches('-').eq_ignore_ascii_case(theirs) && known.contains(ours)
        })
        .map(|(_, ours)| *ours);
    habit
        .or_else(|| suggest::nearest(&name, known.iter().copied()))
        .map(|c| format!("did you mean {c:?}?"))
}

/// A command line that cannot be read: the message says what and where to
/// look (`proxops --help`); the binary exits 2 with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn usage(e: impl std::fmt::Display) -> Usage {
    Usage(format!("{e} (see proxops --help)"))
}

pub fn parse(raw: Vec<OsString>) -> Result<Parsed, Usage> {
    let mut p = pico_args::Arguments::from_vec(raw);
    let help = p.contains(["-h", "--help"]);
    if p.contains(["-V", "--version"]) {
        return Ok(Parsed::Version);
    }
    let mut global = global_args(&mut p)?;
    let given = take_command_flags(&mut p)?;
    let rest: Vec<String> = p
        .finish()
        .into_iter()
        .map(|s| {
            s.into_string()
                .map_err(|_| usage("arguments must be UTF-8"))
        })
        .collect::<Result<_, _>>()?;
    let Some((first, tail)) = rest.split_first() else {
        return Ok(if help {
            Parsed::Help(None)
        } else {
            Parsed::Usage
        });
    };
    let (command, tail) = match command_word(first, tail)? {
        Word::Command(command, tail) => (command, tail),
        Word::Help(topic) => return Ok(Parsed::Help(topic)),
    };
    if help {
        return Ok(Parsed::Help(Some(command)));
    }
    let mut args = CommandArgs::default();
    for (flag, value) in given {
        set(&mut args, owned_flag(command, flag)?, value)?;
    }
    operands(command, tail, &mut args)?;
    global.clusters.sort();
    global.clusters.dedup();
    Ok(Parsed::Run {
        command,
        global,
        args,
    })
}

/// The global flags, wherever they stand on the command line.
fn global_args(p: &mut pico_args::Arguments) -> Result<GlobalArgs, Usage> {
    let mut g = GlobalArgs {
        git_path: p.opt_value_from_str("--git-path").map_err(usage)?,
        config: p.opt_value_from_str("--config").map_err(usage)?,
        log_level: p.opt_value_from_str("--log-level").map_err(usage)?,
        log_format: p
            .opt_value_from_fn("--log-format", parse_log_format)
            .map_err(usage)?,
        clusters: p.values_from_str("--cluster").map_err(usage)?,
        listen: p.opt_value_from_str("--listen").map_err(usage)?,
        git_url: p.opt_value_from_str("--git-url").map_err(usage)?,
        git_branch: p.opt_value_from_str("--git-branch").map_err(usage)?,
        git_poll_sec: p.opt_value_from_str("--git-poll-sec").map_err(usage)?,
        prune_budget: p.opt_value_from_str("--prune-budget").map_err(usage)?,
        pve_user: p.opt_value_from_str("--pve-user").map_err(usage)?,
        pve_auth: p.opt_value_from_str("--pve-auth").map_err(usage)?,
        ca_file: p.opt_value_from_str("--ca-file").map_err(usage)?,
        color: p
            .opt_value_from_fn("--color", parse_color)
            .map_err(usage)?
            .unwrap_or_default(),
    };
    if let Some(level) = &g.log_level
        && !LOG_LEVELS.contains(&level.as_str())
    {
        return Err(usage(with_hint(
            format!("invalid --log-level {level:?}: use debug, info, warn or error"),
            suggest::did_you_mean(level, ["debug", "info", "warn", "error"]),
        )));
    }
    // `-1` is how the original spelled "the configured value": accepted,
    // and the same as leaving the flag out.
    if g.prune_budget == Some(-1) {
        g.prune_budget = None;
    }
    if let Some(b) = g.prune_budget
        && b < 0
    {
        return Err(usage(format!(
            "invalid --prune-budget {b}: use 0 (unlimited) or more, or -1 for the configured value"
        )));
    }
    Ok(g)
}

/// Every command's flags, taken out wherever they stand; whether the
/// command takes them is decided once the command is known.
fn take_command_flags(
    p: &mut pico_args::Arguments,
) -> Result<Vec<(&'static CommandFlag, Option<OsString>)>, Usage> {
    let mut given = Vec::new();
    for (i, flag) in COMMAND_FLAGS.iter().enumerate() {
        // A flag with an entry per group of commands is taken out once.
        if COMMAND_FLAGS[..i].iter().any(|f| f.long == flag.long) {
            continue;
        }
        let keys: pico_args::Keys = match flag.short {
            Some(short) => [short, flag.long].into(),
            None => flag.long.into(),
        };
        if flag.value.is_some() {
            let values: Vec<String> = p.values_from_str(keys).map_err(usage)?;
            given.extend(values.into_iter().map(|v| (flag, Some(OsString::from(v)))));
        } else {
            while p.contains(keys) {
                given.push((flag, None));
            }
        }
    }
    Ok(given)
}

/// What the first word left on the command line asks for.
enum Word<'a> {
    Command(Command, &'a [String]),
    /// `help [COMMAND]`.
    Help(Option<Command>),
}

fn command_word<'a>(first: &str, tail: &'a [String]) -> Result<Word<'a>, Usage> {
    let command = match first {
        "init" => Command::Init,
        "validate" => Command::Validate,
        "diff" => Command::Diff,
        "apply" => Command::Apply,
        "status" => Command::Status,
        "run" => Command::Run,
        "adopt" => Command::Adopt,
        "show" => Command::Show,
        "record" => Command::Record,
        "completions" => Command::Completions,
        "man" => Command::Man,
        "secrets" => {
            return match tail.split_first() {
                Some((sub, t)) if sub == "check" => Ok(Word::Command(Command::SecretsCheck, t)),
                _ => Err(usage("unknown command: use `proxops secrets check FILE`")),
            };
        }
        "schema" => Command::Schema,
        "explain" => Command::Explain,
        "help" => {
            return Ok(Word::Help(tail.first().and_then(|c| command_by_name(c))));
        }
        other if other.starts_with('-') => {
            return Err(usage(with_hint(
                format!("unknown flag {other:?}"),
                flag_hint(other, None),
            )));
        }
        other => {
            let hint = suggest::nearest_or_habit(other, command_words(), COMMAND_HABITS)
                .map(|c| format!("did you mean {c:?}?"));
            return Err(usage(with_hint(format!("unknown command {other:?}"), hint)));
        }
    };
    Ok(Word::Command(command, tail))
}

/// `flag`'s entry for `command`, or why `command` does not take it.
fn owned_flag(command: Command, flag: &CommandFlag) -> Result<&'static CommandFlag, Usage> {
    let entries = || COMMAND_FLAGS.iter().filter(|f| f.long == flag.long);
    entries()
        .find(|f| f.commands.contains(&command))
        .ok_or_else(|| {
            let owners: Vec<&str> = entries()
                .flat_map(|f| f.commands)
                .map(|c| c.name())
                .collect();
            usage(format!(
                "{} does not take {} (a flag of {}); {}",
                command.name(),
                flag.long,
                owners.join(", "),
                takes(command)
            ))
        })
}

/// The command's operands: what is left once every flag was taken out.
fn operands(command: Command, tail: &[String], a: &mut CommandArgs) -> Result<(), Usage> {
    let mut positional = Vec::new();
    for t in tail {
        if t.starts_with('-') {
            // The hint first: the list of the command's flags is long.
            let hint = flag_hint(t, Some(command))
                .map(|h| format!(" ({h})"))
                .unwrap_or_default();
            return Err(usage(format!(
                "unknown flag {t:?} for {}{hint}; {}",
                command.name(),
                takes(command)
            )));
        }
        positional.push(t.clone());
    }
    match (command, positional.as_slice()) {
        (Command::SecretsCheck, [file]) | (Command::Show, [file]) | (Command::Init, [file]) => {
            a.file = Some(PathBuf::from(file));
        }
        (Command::Show, _) => {
            return Err(usage(
                "usage: proxops show PLAN (a file `diff --out` saved)",
            ));
        }
        (Command::SecretsCheck, _) => return Err(usage("usage: proxops secrets check FILE")),
        (Command::Schema, [kind]) | (Command::Explain, [kind]) => a.topic = Some(kind.clone()),
        (Command::Explain, _) => {
            return Err(usage(
                "usage: proxops explain <kind>[.<field path>], e.g. vm.spec.memory",
            ));
        }
        (Command::Completions, [shell]) => a.shell = Some(Shell::parse(shell).map_err(usage)?),
        (Command::Completions, _) => {
            return Err(usage(format!(
                "usage: proxops completions {}",
                Shell::NAMES.join("|")
            )));
        }
        (_, []) => {}
        (c, [extra, ..]) => {
            return Err(usage(format!(
                "unexpected argument {extra:?} for {}",
                c.name()
            )));
        }
    }
    Ok(())
}

/// Records one given flag; a flag that takes a value may be given once.
fn set(a: &mut CommandArgs, flag: &CommandFlag, value: Option<OsString>) -> Result<(), Usage> {
    fn once<T>(slot: &mut Option<T>, flag: &CommandFlag, v: T) -> Result<(), Usage> {
        if slot.is_some() {
            return Err(usage(format!("{} is given more than once", flag.long)));
        }
        *slot = Some(v);
        Ok(())
    }
    let path = || value.clone().map(PathBuf::from).unwrap_or_default();
    match flag.long {
        "--replay" => once(&mut a.replay, flag, path())?,
        "--out" => once(&mut a.out, flag, path())?,
        "--plan" => once(&mut a.plan, flag, path())?,
        "--output" => {
            let text = value.clone().unwrap_or_default();
            let text = text
                .to_str()
                .ok_or_else(|| usage("--output must be UTF-8"))?;
            once(
                &mut a.output,
                flag,
                parse_output(text, flag.choices).map_err(usage)?,
            )?
        }
        "--target" => a.targets.push(
            value
                .clone()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
        ),
        "--vmid" | "--name" => {
            let text = value
                .clone()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let slot = if flag.long == "--vmid" {
                &mut a.vmid
            } else {
                &mut a.name
            };
            once(slot, flag, text)?;
        }
        "--exit-code" => a.exit_code = true,
        "--diff" => a.diff = true,
        "--dry-run" => a.dry_run = true,
        "--once" => a.once = true,
        "--watch" => a.watch = true,
        "--recursive" => a.recursive = true,
        "--verbose" => a.verbose = true,
        "--yes" => a.yes = true,
        "--adopt-secrets" => a.adopt_secrets = true,
        // COMMAND_FLAGS and this match are kept in step by a test.
        other => return Err(usage(format!("unknown flag {other:?}"))),
    }
    Ok(())
}

fn command_by_name(name: &str) -> Option<Command> {
    Some(match name {
        "init" => Command::Init,
        "validate" => Command::Validate,
        "diff" => Command::Diff,
        "apply" => Command::Apply,
        "status" => Command::Status,
        "run" => Command::Run,
        "adopt" => Command::Adopt,
        "show" => Command::Show,
        "record" => Command::Record,
        "secrets" => Command::SecretsCheck,
        "schema" => Command::Schema,
        "explain" => Command::Explain,
        "completions" => Command::Completions,
        "man" => Command::Man,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Parsed, Usage> {
        parse(args.iter().map(OsString::from).collect())
    }

    #[test]
    fn every_command_flag_is_recorded() {
        for flag in COMMAND_FLAGS {
            let mut a = CommandArgs::default();
            let value = flag.value.map(|_| OsString::from("json"));
            assert!(set(&mut a, flag, value).is_ok(), "{}", flag.long);
        }
    }

    #[test]
    fn each_command_gets_the_flags_it_takes() {
        let Ok(Parsed::Run { command, args, .. }) =
            parse_args(&["-y", "apply", "--plan", "saved.json", "--diff"])
        else {
            panic!("apply with its own flags is refused");
        };
        assert_eq!(command, Command::Apply);
        assert!(args.yes && args.diff);
        assert_eq!(args.plan, Some(PathBuf::from("saved.json")));
        let Ok(Parsed::Run { args, .. }) = parse_args(&["diff", "--out=plan.json"]) else {
            panic!("diff --out is refused");
        };
        assert_eq!(args.out, Some(PathBuf::from("plan.json")));
        let Ok(Parsed::Run { args, .. }) = parse_args(&["run", "-n"]) else {
            panic!("run -n is refused");
        };
        assert!(args.dry_run);
    }

    #[test]
    fn a_flag_of_another_command_is_an_input_error() {
        let Err(f) = parse_args(&["record", "--out", "x", "--yes"]) else {
            panic!("record --yes is accepted");
        };
        assert!(f.0.contains("record does not take --yes (a flag of apply)"));
        assert!(f.0.contains("record takes --out PATH and the global flags"));
    }

    /// `parse` reads global flags by name; the table `--help`, the man page
    /// and the completions show must name the same flags.
    #[test]
    fn every_flag_parse_reads_is_in_a_table() {
        let source = include_str!("args.rs");
        let code = &source[..source.find("#[cfg(test)]").unwrap_or(source.len())];
        let mut missing = Vec::new();
        for quoted in code.split('"').skip(1).step_by(2) {
            let is_flag = quoted.len() > 2
                && quoted.starts_with("--")
                && quoted[2..]
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '-');
            let known = GLOBAL_FLAGS.iter().any(|f| f.long == quoted)
                || COMMAND_FLAGS.iter().any(|f| f.long == quoted);
            if is_flag && !known {
                missing.push(quoted);
            }
        }
        assert!(
            missing.is_empty(),
            "not in GLOBAL_FLAGS or COMMAND_FLAGS: {missing:?}"
        );
    }

    #[test]
    fn every_command_is_parsed_by_its_name() {
        for c in Command::ALL {
            let mut args: Vec<&str> = c.name().split(' ').collect();
            if c == Command::SecretsCheck || c == Command::Show {
                args.push("f.yaml");
            }
            if c == Command::Completions {
                args.push("bash");
            }
            if c == Command::Explain {
                args.push("vm.spec.memory");
            }
            let Ok(Parsed::Run { command, .. }) = parse_args(&args) else {
                panic!("{} is not parsed", c.name());
            };
            assert_eq!(command, c);
            let mut help: Vec<&str> = c.name().split(' ').collect();
            help.push("--help");
            assert!(matches!(
                parse_args(&help),
                Ok(Parsed::Help(Some(h))) if h == c
            ));
        }
    }

    #[test]
    fn completions_takes_one_known_shell() {
        let Ok(Parsed::Run { args, .. }) = parse_args(&["completions", "fish"]) else {
            panic!("completions fish is refused");
        };
        assert_eq!(args.shell, Some(Shell::Fish));
        for bad in [
            &["completions"][..],
            &["completions", "tcsh"],
            &["completions", "bash", "zsh"],
        ] {
            let Err(f) = parse_args(bad) else {
                panic!("{bad:?} is accepted");
            };
            assert!(f.0.ends_with("(see proxops --help)"), "{f}");
        }
    }

    #[test]
    fn color_is_a_global_flag_of_three_values() {
        let Ok(Parsed::Run { global, .. }) = parse_args(&["--color", "always", "diff"]) else {
            panic!("--color always is refused");
        };
        assert_eq!(global.color, ColorChoice::Always);
        let Ok(Parsed::Run { global, .. }) = parse_args(&["status", "--color=never"]) else {
            panic!("--color=never after the command is refused");
        };
        assert_eq!(global.color, ColorChoice::Never);
        let Ok(Parsed::Run { global, .. }) = parse_args(&["diff"]) else {
            panic!("diff is refused");
        };
        assert_eq!(global.color, ColorChoice::Auto);
        let Err(f) = parse_args(&["--color", "sometimes", "diff"]) else {
            panic!("--color sometimes is accepted");
        };
        assert!(f.0.contains("use auto, always or never"), "{}", f.0);
    }

    #[test]
    fn no_command_is_usage_and_help_alone_is_help() {
        assert!(matches!(parse_args(&[]), Ok(Parsed::Usage)));
        assert!(matches!(
            parse_args(&["--cluster", "home"]),
            Ok(Parsed::Usage)
        ));
        assert!(matches!(parse_args(&["--help"]), Ok(Parsed::Help(None))));
    }
}
