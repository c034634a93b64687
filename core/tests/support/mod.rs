//! Test support shared by the core's integration tests.
#![allow(dead_code)]

pub mod demo;
pub mod fixture;
pub mod sim;
