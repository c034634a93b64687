//! The driver: runs core's cluster cycle ([`proxops_core::cycle`]) against
//! PVE for every command, with the I/O the pure crates may not do: worker
//! threads and clocks ([`drive`]), the clusters of one pass and the checks
//! before any inventory read ([`cluster`]), the daemon's schedule, memory
//! and notifications ([`daemon`]), the cluster lock ([`lock`]),
//! this host's record of which PVE is managed as which cluster
//! ([`claims`]), a transport that refuses writes ([`readonly`]), the
//! files these keep in the data directory ([`files`]) and what identifies
//! the host the process runs on, for the self-guest guard ([`host`]).
//!
//! The binary keeps arguments, configuration files, credentials, the
//! choice of transports and printing; the adapters below keep PVE's wire
//! ([`proxops_pve`]).

// Every function reads as one step of its module: at most 120 lines
// (clippy.toml), checked for the whole crate.
#![warn(clippy::too_many_lines)]

pub mod claims;
pub mod cluster;
pub mod daemon;
pub mod drive;
pub mod files;
pub mod host;
pub mod lock;
pub mod readonly;
