//! proxops-pve against fakepve and replayed PVE answers: one test crate,
//! one module per area (one link of the crate's dependencies, not one per
//! file). Run one area with
//! `cargo nextest run -p proxops-pve --test it live_tls::`.
//!
//! The tests share one process under `cargo test`: none changes the
//! process's environment, working directory or statics, and each starts
//! its own fakepve on its own loopback address.

mod live_support;

mod live_auth;
mod live_connections;
mod live_harness;
mod live_retry;
mod live_tls;
mod reader_concurrency;
mod reader_recording;
mod reader_snapshot;
mod replay_text_reads;
mod runner_fakepve;
mod runner_firewall;
