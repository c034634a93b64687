//! The `proxops` binary: argument parsing, configuration, choosing
//! adapters, printing and exit codes. It holds no reconcile logic: planning
//! is core's, PVE and git I/O are the adapters'.

// Every function reads as one step of its module: at most 120 lines
// (clippy.toml), checked for the whole crate.
#![warn(clippy::too_many_lines)]

mod adopt;
mod apply;
mod confined;
mod context;
mod creds;
mod diff;
mod exit;
mod gitsource;
mod init;
mod log;
mod out;
mod prepare;
mod record;
mod run;
mod saved;
mod schema;
mod show;
mod status;
mod validate;

use std::process::ExitCode;

// The command line's words live in their own crate (no I/O, tested without
// the binary); here they are read as if they were this crate's modules.
use proxops_cli::{args, completions, help, manpage};

/// Loading a large repository and recording makes millions of small
/// allocations (YAML and JSON trees); glibc's allocator spent a third of a
/// 10,000-guest `diff --replay` in malloc and free. Its version and
/// settings (no transparent huge pages) are in the workspace Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use args::{Command, Parsed};
use exit::{Exit, Failure};

fn main() -> ExitCode {
    let raw: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let result = match args::parse(raw).map_err(|u| Failure::input(u.0)) {
        Ok(Parsed::Help(None)) => out::print(&help::main()).map(|()| Exit::Ok),
        Ok(Parsed::Help(Some(c))) => out::print(&help::command(c)).map(|()| Exit::Ok),
        Ok(Parsed::Version) => {
            out::print_line(&format!("proxops {}", env!("CARGO_PKG_VERSION"))).map(|()| Exit::Ok)
        }
        Ok(Parsed::Usage) => {
            // No command: a usage error, so the help goes to stderr.
            out::eprint(&help::main());
            out::eprint("error: no command given (see proxops --help)\n");
            Ok(Exit::Input)
        }
        Ok(Parsed::Run {
            command,
            global,
            args,
        }) => dispatch(command, &global, &args),
        Err(f) => Err(f),
    };
    match result {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(Failure { exit, message, .. }) => {
            out::errors(&message);
            ExitCode::from(exit.code())
        }
    }
}

fn dispatch(
    command: Command,
    global: &args::GlobalArgs,
    args: &args::CommandArgs,
) -> Result<Exit, Failure> {
    let env = context::Env::read();
    log::init(
        log::Level::parse(global.log_level.as_deref().unwrap_or("info")),
        global.log_format,
    );
    match command {
        Command::Validate => validate::run(global, args, &env),
        Command::Diff => diff::run(global, args, &env),
        Command::Apply => apply::run(global, args, &env),
        Command::Status => status::run(global, args, &env),
        Command::Record => record::run(global, args, &env),
        Command::Run => run::run(global, args, &env),
        Command::SecretsCheck => match &args.file {
            Some(f) => creds::check(f),
            None => Err(Failure::input("usage: proxops secrets check FILE")),
        },
        Command::Adopt => adopt::run(global, args, &env),
        Command::Show => show::run(global, args),
        Command::Init => init::run(global, args),
        Command::Schema => schema::print(args.topic.as_deref()),
        Command::Explain => {
            schema::explain(args.topic.as_deref().unwrap_or_default(), args.recursive)
        }
        Command::Completions => match args.shell {
            Some(shell) => out::print(&completions::script(shell)).map(|()| Exit::Ok),
            None => Err(Failure::input("usage: proxops completions bash|zsh|fish")),
        },
        Command::Man => out::print(&manpage::page()).map(|()| Exit::Ok),
    }
}
