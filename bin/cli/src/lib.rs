//! ProxOps' command line as data and text: every command and flag
//! (`args`), the parse of a command line into them, and what is made from
//! the same tables — `--help` (`help`), the shell completion scripts
//! (`completions`) and the proxops(1) page (`manpage`).
//!
//! No I/O: the binary hands in the arguments and prints what comes back,
//! so a flag's spelling, its help and its completion are tested here
//! without building or running the binary.

// Every function reads as one step of its module: at most 120 lines
// (clippy.toml), checked for the whole crate.
#![warn(clippy::too_many_lines)]

pub mod args;
pub mod completions;
pub mod help;
pub mod manpage;
