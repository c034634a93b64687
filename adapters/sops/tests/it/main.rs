//! proxops-sops against files made by the real sops and age-keygen: one
//! test crate, one module per area. Run one area with
//! `cargo nextest run -p proxops-sops --test it real_sops::`.
//!
//! The tests share one process under `cargo test`: none changes the
//! process's environment, working directory or statics; each works in its
//! own temporary directory.

mod common;

mod encrypt_roundtrip;
mod fixture_set;
mod real_sops;
mod refusals;
