//! Cluster-level objects as manifests describe them: pools, backup jobs,
//! HA resources, HA rules and replication jobs ([`spec`]), and the marker
//! ProxOps writes in their `comment` to own them ([`mark`]).

pub mod mark;
pub mod spec;

pub use mark::Owner;

/// A replication job's identity from its guest's vmid and its target.
pub fn replication_identity(vmid: impl std::fmt::Display, target: &str) -> String {
    format!("{vmid}->{target}")
}
