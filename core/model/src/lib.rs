//! ProxOps' model: what the repository says and what PVE holds, as typed
//! values.
//!
//! Names and their grammars, units, time, diagnostics, YAML, the PVE wire
//! grammar, manifests, configuration, the live snapshot's types, and the
//! loading of a repository (handed in as an in-memory map of path → bytes)
//! into each cluster's desired state.
//!
//! **Architecture Invariant:** the model knows no PVE translation. It never
//! decides which PVE key a manifest field becomes, what a change does to a
//! running guest, or what to do about a difference; those are the
//! translate and core crates'. Like every crate under core/, it does no
//! I/O: no files, sockets, environment, processes, threads or clock.
//!
//! Its modules form layers: each imports only the modules before it in the
//! order core/tests/layers.rs declares.

// Every function reads as one step of its module: at most 120 lines
// (clippy.toml), checked for the whole crate.
#![warn(clippy::too_many_lines)]

pub mod bounds;
pub mod calendar;
pub mod cluster;
pub mod config;
pub mod desired;
pub mod diag;
pub mod extra;
pub mod firewall;
pub mod firewall_repo;
pub mod graph;
pub mod hash;
pub mod host;
pub mod live;
pub mod live_text;
pub mod manifest;
pub mod names;
pub mod outcome;
pub mod policy;
pub mod repo;
pub mod schema_attrs;
pub mod secret;
pub mod suggest;
pub mod time;
pub mod units;
pub mod wire;
pub mod yaml;
pub mod yaml_block;
pub mod yaml_emit;
pub mod yaml_node;
