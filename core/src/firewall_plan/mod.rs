//! The firewall's planning decisions, pure: the PVE calls that turn a
//! live rule list into the desired one (`list`), and the guard against a
//! cluster firewall that would lock its operators out (`lockout`). They
//! take the model's checked rules (`proxops_model::firewall`) and decide;
//! the planner, the step protocol and the reader are not wired to them
//! yet (docs/resources/firewall.md).

pub mod keyed;
pub mod list;
pub mod lockout;
