//! The block reader's typed reading (`yaml_node::from_node`) held to the
//! reading it replaces (`yaml::from_value` of the same document's
//! `serde_yaml::Value`): for every document of a text and every type a
//! manifest (or a part of one) is read as, both refuse it, or both read
//! the same value.

use std::collections::BTreeMap;
use std::fmt::Debug;

use proxops_core::cluster::spec::{
    BackupJobSpec, HaResourceSpec, HaRuleSpec, PoolSpec, ReplicationJobSpec,
};
use proxops_core::firewall::{AliasSpec, ClusterFirewallSpec, IpSetSpec, SecurityGroupSpec};
use proxops_core::manifest::{ArtifactSpec, Document, LxcSpec, Metadata, VmSpec};
use proxops_core::units::Quantity;
use proxops_core::yaml_block::{self, Node};
use proxops_core::{yaml, yaml_node};
use serde::de::DeserializeOwned;

/// Both readings of `node` as `T`, as comparable text.
fn same<T: DeserializeOwned + Debug>(node: &Node<'_>) -> Result<bool, String> {
    let fast = yaml_node::from_node::<T>(node).map(|t| format!("{t:?}"));
    let old = yaml::from_value::<T>(&node.to_value()).map(|t| format!("{t:?}"));
    if fast == old {
        Ok(fast.is_some())
    } else {
        Err(format!(
            "{}: the block tree read {fast:?}, the value {old:?}",
            std::any::type_name::<T>()
        ))
    }
}

/// Every document of `text` the block reader reads, read as each kind's
/// manifest and as the values those are made of, the fast way and the old
/// way; how many typed readings succeeded (both ways), or the first
/// disagreement.
pub fn typed_readings_agree(text: &str) -> Result<usize, String> {
    let Some(docs) = yaml_block::nodes(text) else {
        return Ok(0);
    };
    let mut read = 0;
    for node in &docs {
        let checks = [
            same::<Document<VmSpec>>,
            same::<Document<LxcSpec>>,
            same::<Document<ArtifactSpec>>,
            same::<Document<PoolSpec>>,
            same::<Document<BackupJobSpec>>,
            same::<Document<HaResourceSpec>>,
            same::<Document<HaRuleSpec>>,
            same::<Document<ReplicationJobSpec>>,
            same::<Document<AliasSpec>>,
            same::<Document<IpSetSpec>>,
            same::<Document<SecurityGroupSpec>>,
            same::<Document<ClusterFirewallSpec>>,
            same::<Metadata>,
            same::<VmSpec>,
            same::<LxcSpec>,
            same::<serde_yaml::Value>,
            same::<BTreeMap<String, String>>,
            same::<BTreeMap<String, Option<Quantity>>>,
            same::<Vec<Option<String>>>,
            same::<Option<Vec<u64>>>,
            same::<(String, bool)>,
        ];
        for check in checks {
            read += usize::from(check(node).map_err(|e| format!("{e}\n--- text:\n{text}"))?);
        }
        for name in ["spec", "metadata"] {
            if let Some(part) = node.get(name) {
                read += usize::from(same::<VmSpec>(part)?);
                read += usize::from(same::<LxcSpec>(part)?);
                read += usize::from(same::<Metadata>(part)?);
            }
        }
    }
    Ok(read)
}
