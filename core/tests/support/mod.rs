//! Test support shared by the core's integration tests.
#![allow(dead_code)]
// demo.rs reads the demo repository from fixtures/.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

pub mod demo;
pub mod fixture;
pub mod sim;
pub mod sim_pve;
