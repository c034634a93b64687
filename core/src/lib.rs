//! ProxOps' planner core.
//!
//! This crate decides; it never acts. It compares each cluster's desired
//! state with PVE's live snapshot and produces an ordered, deterministic
//! plan with its safety rails applied; it runs the step protocol of each
//! action, keeps the objects' state, and renders plans and reports.
//!
//! It is also the façade of the pure crates below it: `proxops_core::names`,
//! `proxops_core::drift` and the other modules of proxops-model and
//! proxops-translate are re-exported here under their own names.
//!
//! **Architecture Invariant:** core does no I/O. It reads no files, opens no
//! sockets, reads no environment variables, spawns no processes, starts no
//! threads and reads no clock: time is always an argument. Same inputs, same
//! bytes out. The plan is core's: the crates below it describe and
//! translate, only core orders, gates and executes.
//!
//! Its modules form layers: each imports only the modules before it in the
//! order core/tests/layers.rs declares.

// Every function reads as one step of its module: at most 120 lines
// (clippy.toml), checked for the whole crate.
#![warn(clippy::too_many_lines)]

pub use proxops_model::{
    bounds, calendar, config, desired, diag, extra, firewall, graph, live, live_text, manifest,
    names, outcome, policy, repo, schema_attrs, secret, suggest, time, units, wire, yaml,
    yaml_block, yaml_emit, yaml_node,
};
pub use proxops_translate::{adopt, change, docgen, drift, firewall_options, refuse, schema};

pub mod action;
pub mod admit;
pub mod audit;
pub mod cluster;
pub mod cycle;
pub mod dashboard;
pub mod exec;
pub mod firewall_plan;
pub mod hold;
pub mod holds;
pub mod host;
pub mod notify;
pub mod plan;
pub mod planner;
pub mod pve_error;
pub mod render;
pub mod report;
pub mod rollout;
pub mod saved;
pub mod scaffold;
pub mod state;
pub mod step;
pub mod target;
