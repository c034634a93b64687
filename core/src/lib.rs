//! ProxOps' planner core.
//!
//! This crate decides; it never acts. It turns repository files (handed in
//! as an in-memory map of repo-relative path → bytes) into typed desired
//! state, turns recorded PVE responses (handed in as parsed values) into a
//! live snapshot, compares them, and produces an ordered, deterministic plan
//! with its safety rails applied.
//!
//! **Architecture Invariant:** core does no I/O. It reads no files, opens no
//! sockets, reads no environment variables, spawns no processes, starts no
//! threads and reads no clock: time is always an argument. Same inputs, same
//! bytes out.

pub mod action;
pub mod admit;
pub mod adopt;
pub mod audit;
pub mod bounds;
pub mod calendar;
pub mod cluster;
pub mod config;
pub mod dashboard;
pub mod diag;
pub mod docgen;
pub mod drift;
pub mod exec;
pub mod extra;
pub mod graph;
pub mod hold;
pub mod host;
pub mod live;
pub mod manifest;
pub mod names;
pub mod notify;
mod owned_keys;
pub mod plan;
pub mod planner;
mod refuse;
pub mod render;
pub mod repo;
pub mod report;
pub mod rollout;
pub mod saved;
pub mod scaffold;
pub mod schema;
pub mod secret;
pub mod state;
pub mod step;
pub mod suggest;
pub mod target;
pub mod time;
pub mod units;
pub mod wire;
pub mod yaml;
pub mod yaml_block;
