//! Command-line arguments, first stage: the flags exactly as given, with no
//! I/O (ripgrep's LowArgs). Resolving them against files and the
//! environment happens in `context`.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::exit::Failure;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Validate,
    Diff,
    Apply,
    Status,
    Run,
    Adopt,
    Record,
    SecretsCheck,
}

impl Command {
    pub fn name(self) -> &'static str {
        match self {
            Command::Validate => "validate",
            Command::Diff => "diff",
            Command::Apply => "apply",
            Command::Status => "status",
            Command::Run => "run",
            Command::Adopt => "adopt",
            Command::Record => "record",
            Command::SecretsCheck => "secrets check",
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
    /// `apply --plan FILE`: execute a saved plan.
    pub plan: Option<PathBuf>,
    pub adopt_secrets: bool,
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Parsed {
    Help(Option<Command>),
    Version,
    Run {
        command: Command,
        global: GlobalArgs,
        args: CommandArgs,
    },
}

fn parse_output(s: &str) -> Result<Output, String> {
    match s {
        "text" => Ok(Output::Text),
        "json" => Ok(Output::Json),
        "markdown" | "md" => Ok(Output::Markdown),
        other => Err(format!(
            "invalid --output {other:?}: use text, json or markdown"
        )),
    }
}

fn parse_log_format(s: &str) -> Result<LogFormat, String> {
    match s {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(format!("invalid --log-format {other:?}: use text or json")),
    }
}

fn usage(e: impl std::fmt::Display) -> Failure {
    Failure::input(format!("{e} (see proxops --help)"))
}

pub fn parse(raw: Vec<OsString>) -> Result<Parsed, Failure> {
    let mut p = pico_args::Arguments::from_vec(raw);
    let help = p.contains(["-h", "--help"]);
    if p.contains(["-V", "--version"]) {
        return Ok(Parsed::Version);
    }
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
    };
    if let Some(level) = &g.log_level
        && !["debug", "info", "warn", "error"].contains(&level.as_str())
    {
        return Err(usage(format!(
            "invalid --log-level {level:?}: use debug, info, warn or error"
        )));
    }
    if let Some(b) = g.prune_budget
        && b < 0
    {
        return Err(usage(format!(
            "invalid --prune-budget {b}: use 0 (unlimited) or more"
        )));
    }
    let a = CommandArgs {
        replay: p.opt_value_from_str("--replay").map_err(usage)?,
        output: p
            .opt_value_from_fn("--output", parse_output)
            .map_err(usage)?,
        exit_code: p.contains("--exit-code"),
        dry_run: p.contains(["-n", "--dry-run"]),
        diff: p.contains("--diff"),
        out: p.opt_value_from_str("--out").map_err(usage)?,
        plan: p.opt_value_from_str("--plan").map_err(usage)?,
        adopt_secrets: p.contains("--adopt-secrets"),
        file: None,
    };
    // Flags may also follow the command: parse the rest again for globals.
    let rest: Vec<String> = p
        .finish()
        .into_iter()
        .map(|s| {
            s.into_string()
                .map_err(|_| usage("arguments must be UTF-8"))
        })
        .collect::<Result<_, _>>()?;
    let Some((first, tail)) = rest.split_first() else {
        return Ok(Parsed::Help(None));
    };
    let (command, tail) = match first.as_str() {
        "validate" => (Command::Validate, tail),
        "diff" => (Command::Diff, tail),
        "apply" => (Command::Apply, tail),
        "status" => (Command::Status, tail),
        "run" => (Command::Run, tail),
        "adopt" => (Command::Adopt, tail),
        "record" => (Command::Record, tail),
        "secrets" => match tail.split_first() {
            Some((sub, t)) if sub == "check" => (Command::SecretsCheck, t),
            _ => return Err(usage("unknown command: use `proxops secrets check FILE`")),
        },
        "help" => {
            return Ok(Parsed::Help(tail.first().and_then(|c| command_by_name(c))));
        }
        other => return Err(usage(format!("unknown command {other:?}"))),
    };
    if help {
        return Ok(Parsed::Help(Some(command)));
    }
    let mut a = a;
    let mut positional = Vec::new();
    for t in tail {
        if t.starts_with('-') {
            return Err(usage(format!("unknown flag {t:?} for {}", command.name())));
        }
        positional.push(t.clone());
    }
    match (command, positional.as_slice()) {
        (Command::SecretsCheck, [file]) => a.file = Some(PathBuf::from(file)),
        (Command::SecretsCheck, _) => return Err(usage("usage: proxops secrets check FILE")),
        (_, []) => {}
        (c, [extra, ..]) => {
            return Err(usage(format!(
                "unexpected argument {extra:?} for {}",
                c.name()
            )));
        }
    }
    g.clusters.sort();
    g.clusters.dedup();
    Ok(Parsed::Run {
        command,
        global: g,
        args: a,
    })
}

fn command_by_name(name: &str) -> Option<Command> {
    Some(match name {
        "validate" => Command::Validate,
        "diff" => Command::Diff,
        "apply" => Command::Apply,
        "status" => Command::Status,
        "run" => Command::Run,
        "adopt" => Command::Adopt,
        "record" => Command::Record,
        "secrets" => Command::SecretsCheck,
        _ => return None,
    })
}
