//! What is held: the objects a failed disruptive action holds back, each
//! with its failure count, when it may be tried again and the manifest it
//! failed for. A plain value a plan carries; what a cycle teaches it and
//! how the planner applies it are `hold`'s.

use std::collections::BTreeMap;

use proxops_model::names::Ref;
use proxops_model::repo::DesiredObject;
use proxops_model::time::Timestamp;

/// One held object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// Disruptive actions that failed in a row.
    pub failures: u32,
    /// When it may be tried again.
    pub next_attempt: Timestamp,
    /// The last failure's action (`update`, `reboot`, …) and error.
    pub op: String,
    pub error: String,
    /// The manifest as it was at the last failure: a commit that changes
    /// it clears the hold.
    pub(crate) fingerprint: String,
}

/// One cluster's holds, by object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holds {
    pub(crate) held: BTreeMap<Ref, Hold>,
}

impl Holds {
    /// The hold in force for `obj` at `now`: recorded, not yet expired,
    /// and for the manifest as it is now.
    pub fn in_force(&self, obj: &DesiredObject, now: Timestamp) -> Option<&Hold> {
        self.held
            .get(&obj.r#ref)
            .filter(|h| h.next_attempt > now && h.fingerprint == fingerprint(obj))
    }

    /// Every object held, sorted (expired holds too: they keep their
    /// failure count until a success).
    pub fn iter(&self) -> impl Iterator<Item = (&Ref, &Hold)> {
        self.held.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

/// The manifest as a whole: labels, annotations and spec.
pub(crate) fn fingerprint(obj: &DesiredObject) -> String {
    // Serialising plain manifest structs cannot fail; an empty fingerprint
    // would only keep a hold until its backoff ends.
    serde_json::to_string(&(&obj.metadata, &obj.spec)).unwrap_or_default()
}
