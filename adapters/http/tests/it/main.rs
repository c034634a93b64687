//! proxops-http over real loopback sockets and checked by the real tools
//! that read what it serves: one test crate, one module per area. Run one
//! area with `cargo nextest run -p proxops-http --test it server::`.
//!
//! The tests share one process under `cargo test`: none changes the
//! process's environment, working directory or statics.

mod support;

mod hooks;
mod promtool;
mod server;
mod slow_clients;
mod systemd_unit;
