//! The PVE adapter: transports (live, recording, replay), the snapshot
//! reader, and the runner that drives core's execution state machine.
//!
//! **Architecture Invariant:** this crate turns PVE responses into core
//! values and core actions into requests. It makes no decision of its own:
//! what to create, update or prune is core's.

pub mod auth;
pub mod breaker;
mod connector;
#[cfg(feature = "fakepve")]
pub mod fakepve;
pub mod identity;
pub mod live;
pub mod localfile;
pub mod reader;
pub mod recording;
pub mod replay;
mod resolve;
pub mod retry;
pub mod runner;
#[cfg(feature = "fakepve")]
pub mod serial;
pub mod tls;
pub mod transport;
