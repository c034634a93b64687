//! Cluster-level objects translated to PVE: the keys a manifest owns, as
//! rows ([`rows`]), and the manifests adoption writes from what PVE lists
//! ([`adopt`]).

pub mod adopt;
pub mod rows;

pub use proxops_model::cluster::{Owner, mark, replication_identity, spec};
pub use proxops_model::live::{ClusterObjects, LiveObject, being_removed};
