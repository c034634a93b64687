//! PVE's firewall as values: a rule and its one-line form
//! (`IN ACCEPT -source +dc/mgmt -p tcp -dport 22`), the pieces it is made
//! of, checked as pve-firewall checks them, and the vocabularies PVE reads
//! them against. What the planner does with a rule list is core's
//! (`proxops_core::firewall`); this module only describes.

pub mod data;
pub mod grammar;
pub mod live;
pub mod refs;
pub mod rule;
pub mod spec;

pub use grammar::{AddrSpec, Address, LogLevel, PortItem, PortSpec, Proto, RefScope};
pub use refs::Known;
pub use rule::{Direction, Head, RawRule, Rule, RuleEnv, RuleError, Verdict};
pub use spec::{
    AliasSpec, ClusterFirewallSpec, ClusterOptions, GuestFirewall, GuestOptions, IpSetEntry,
    IpSetSpec, RuleSpec, SecurityGroupSpec,
};
