//! The git adapter against real repositories made with git in temp dirs,
//! and real git servers (file://, git daemon, git http-backend over TLS) on
//! loopback.
#![allow(clippy::unwrap_used)]

#[path = "../support/mod.rs"]
mod support;

mod discovery;
mod local_tree;
mod url_mode;
