//! ProxOps' translation between manifests and PVE's keys.
//!
//! The change vocabulary (impact, field changes, PVE forms, anomalies),
//! the owned-key tables and what they fold into (the create form, the
//! drift, adoption's manifests), the hotplug rules, the refusals of
//! writes PVE would reject, the cluster-level objects' rows, and the JSON
//! schema of the manifest kinds.
//!
//! **Architecture Invariant:** translate knows no plan. It says what PVE
//! holds differs from a manifest and what writing it would do; it never
//! orders, gates, schedules or executes anything (that is core's). It
//! depends on proxops-model only, and does no I/O.
//!
//! Its modules form layers: each imports only the modules before it in the
//! order core/tests/layers.rs declares.

// Every function reads as one step of its module: at most 120 lines
// (clippy.toml), checked for the whole crate.
#![warn(clippy::too_many_lines)]

pub mod adopt;
pub mod change;
pub mod cluster;
pub mod docgen;
pub mod drift;
pub mod firewall_options;
mod inverse;
pub mod refuse;
pub mod schema;
