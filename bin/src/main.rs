//! The `proxops` binary: argument parsing, configuration, choosing
//! adapters, printing and exit codes. It holds no reconcile logic: planning
//! is core's, PVE and git I/O are the adapters'.

mod adopt;
mod apply;
mod args;
mod claims;
mod completions;
mod confined;
mod context;
mod creds;
mod cycle;
mod diff;
mod exit;
mod files;
mod gitsource;
mod help;
mod host;
mod init;
mod lock;
mod log;
mod manpage;
mod out;
mod record;
mod run;
mod saved;
mod schema;
mod show;
mod status;
mod validate;

use std::process::ExitCode;

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
    let result = match args::parse(raw) {
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
        Command::Completions => completions::run(args.shell),
        Command::Man => manpage::run(),
    }
}
