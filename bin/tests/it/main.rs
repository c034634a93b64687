//! The `proxops` binary end to end: one test crate, one module per area.
//!
//! One crate links the binary's dependency graph once; a test binary per
//! file linked it forty-two times over, the slowest step of a CI build. Run
//! one area with `cargo nextest run -p proxops --test it live_power::`.
//!
//! nextest runs each test in a process of its own; `cargo test` runs them
//! all in one, on several threads. Both are correct because no test changes
//! what the others see: a test gives the commands it spawns their
//! environment and working directory (`Command::env`, `env_remove`,
//! `current_dir`) and never sets the process's own (`set_var` is `unsafe`,
//! which the workspace forbids; `set_current_dir` is refused by clippy.toml);
//! each fakepve, repository copy and data-dir is the test's own.

// The shared harnesses: the live tests' fakepve repository and runner, the
// git adapter's repositories and servers, and the core's PVE simulator.
#[path = "../../../adapters/git/tests/support/mod.rs"]
mod git_support;
mod live_support;
#[path = "../../../core/tests/support/sim.rs"]
mod sim;

mod cli_strict;
mod closed_stdout;
mod config_modes;
mod demo_plan;
mod docs_examples;
mod error_hints;
mod extra_keys;
mod fault_sweep;
mod first_hour;
mod idempotency;
mod init_scaffold;
mod input_bounds;
mod json_logs;
mod live_adopt;
mod live_adopt_estate;
mod live_adopt_one;
mod live_adopt_secrets;
mod live_apply;
mod live_apply_confirm;
mod live_cluster_objects;
mod live_daemon_start;
mod live_dashboard;
mod live_faults;
mod live_files;
mod live_firewall;
mod live_last_moment;
mod live_lock;
mod live_notify;
mod live_one_pve_one_name;
mod live_ownership;
mod live_parallel;
mod live_power;
mod live_prune;
mod live_push;
mod live_pve_semantics;
mod live_repository_attacks;
mod live_resize_clone;
mod live_run;
mod live_run_parallel;
mod live_saved_plan;
mod live_scale;
mod live_self_guest;
mod live_sops;
mod live_status_server;
mod live_trust;
mod live_write_faults;
mod man_and_completions;
mod pending_recording;
mod pve_real_replay;
mod pve_refusals;
mod scale_fixture;
mod schema;
mod secrets_check;
mod show_plan;
mod targeted_plan;
mod url_mode;
mod validate_invalid;
mod validate_report;
