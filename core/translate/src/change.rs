//! The change vocabulary: what applying a change does to a running guest
//! ([`Impact`]), one field's change ([`Change`]), the PVE form of a write
//! ([`Params`], whose secret values are never rendered), where an action
//! lands ([`Target`]) and what ProxOps will not do for a person
//! ([`Anomaly`]). Values only; the translation (drift, create) builds them
//! and the plan carries them.

use std::fmt;

use serde::{Deserialize, Serialize};

use proxops_model::names::{Kind, NodeName, StorageId, Vmid};
use proxops_model::secret::Secret;

/// What applying an action does to the running guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Impact {
    /// Applied at once, no restart (or the guest is not running).
    Live,
    /// Written now; PVE keeps it pending until the guest restarts.
    Reboot,
    /// ProxOps writes (PVE holds the change pending on the running
    /// guest), then shuts the guest down and starts it again.
    StopStart,
    /// Not done: it would lose data or needs a person (an anomaly).
    Blocked,
}

impl Impact {
    pub fn as_str(self) -> &'static str {
        match self {
            Impact::Live => "live",
            Impact::Reboot => "reboot",
            Impact::StopStart => "stop-start",
            Impact::Blocked => "blocked",
        }
    }
}

/// [`Action::impact_word`] for an operation named as [`Op::as_str`] names
/// it (a stored plan keeps the name).
pub fn impact_word(op: &str, impact: Impact) -> &'static str {
    match (op, impact) {
        (_, Impact::Blocked) => impact.as_str(),
        ("stop", _) => "downtime",
        ("prune", _) => "destroys",
        _ => impact.as_str(),
    }
}

impl fmt::Display for Impact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One PVE key an action changes. `to: None` removes the key (`delete=`);
/// `from: None` means the key is absent on PVE. Secret values are shown as
/// `<secret>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Change {
    pub field: String,
    pub from: Option<String>,
    pub to: Option<String>,
    /// The manifest field that asks for the key (`spec.memory`), when one
    /// does; a reviewer reads the manifest, not PVE's key names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// What this change alone costs the running guest, after PVE's hotplug
    /// rules: the changes whose impact is the action's are what set it.
    /// `None` where the change has no impact of its own (a create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<Impact>,
}

impl Change {
    /// A change of `field` with no manifest path or impact of its own.
    pub fn new(field: impl Into<String>, from: Option<String>, to: Option<String>) -> Change {
        Change {
            field: field.into(),
            from,
            to,
            ..Change::default()
        }
    }

    /// Whether this change is one that sets `action_impact`: a restart
    /// (or a stop) that PVE cannot avoid for this very key.
    pub fn sets_impact(&self, action_impact: Impact) -> bool {
        matches!(action_impact, Impact::Reboot | Impact::StopStart)
            && self.impact == Some(action_impact)
    }
}

/// The text that stands for a secret value in every rendering.
pub const SECRET_PLACEHOLDER: &str = "<secret>";

/// A form value sent to PVE.
#[derive(Clone, PartialEq, Eq)]
pub enum ParamValue {
    Plain(String),
    Secret(Secret),
    /// A secret not held: its reference (`cloud-init.passwords.<name>`) as
    /// a saved plan keeps it. It must be resolved to a [`ParamValue::Secret`]
    /// before the action runs ([`crate::saved::resolve_secrets`]); until then
    /// it goes on the wire as nothing.
    SecretRef(String),
}

impl ParamValue {
    /// The value as it goes on the wire.
    pub fn expose(&self) -> &str {
        match self {
            ParamValue::Plain(s) => s,
            ParamValue::Secret(s) => s.expose(),
            ParamValue::SecretRef(_) => "",
        }
    }

    /// The value as it may be shown to a person.
    pub fn shown(&self) -> &str {
        match self {
            ParamValue::Plain(s) => s,
            ParamValue::Secret(_) | ParamValue::SecretRef(_) => SECRET_PLACEHOLDER,
        }
    }
}

/// The saved form of a secret value: `{"secret": "<reference>"}`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretRefDoc {
    secret: String,
}

impl Serialize for ParamValue {
    /// A plain value is a string; a reference is `{"secret": "<ref>"}`; a
    /// secret value refuses to be serialised.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ParamValue::Plain(v) => s.serialize_str(v),
            ParamValue::SecretRef(r) => SecretRefDoc { secret: r.clone() }.serialize(s),
            ParamValue::Secret(_) => Err(serde::ser::Error::custom(
                "a secret value is never serialised; save its reference instead",
            )),
        }
    }
}

impl<'de> Deserialize<'de> for ParamValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Doc {
            Plain(String),
            Ref(SecretRefDoc),
        }
        match Doc::deserialize(d).map_err(|_| {
            serde::de::Error::custom("expected a string or {\"secret\": \"<reference>\"}")
        })? {
            Doc::Plain(v) => Ok(ParamValue::Plain(v)),
            Doc::Ref(r) => Ok(ParamValue::SecretRef(r.secret)),
        }
    }
}

impl fmt::Debug for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.shown())
    }
}

/// An ordered list of PVE form values; saved as a list of `[key, value]`
/// pairs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Params(pub Vec<(String, ParamValue)>);

impl Params {
    pub fn new() -> Params {
        Params(Vec::new())
    }

    pub fn push(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.0.push((key.into(), ParamValue::Plain(value.into())));
    }

    pub fn push_secret(&mut self, key: impl Into<String>, value: Secret) {
        self.0.push((key.into(), ParamValue::Secret(value)));
    }

    pub fn get(&self, key: &str) -> Option<&ParamValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The first secret still held only as a reference: `(key, reference)`.
    pub fn unresolved_secret(&self) -> Option<(&str, &str)> {
        self.0.iter().find_map(|(k, v)| match v {
            ParamValue::SecretRef(r) => Some((k.as_str(), r.as_str())),
            _ => None,
        })
    }

    /// Every key as a change from absent, values shown as in plans.
    pub fn as_new_changes(&self) -> Vec<Change> {
        self.0
            .iter()
            .map(|(k, v)| Change::new(k.clone(), None, Some(v.shown().to_owned())))
            .collect()
    }

    /// `(key, value)` pairs for the wire, secrets exposed.
    pub fn to_wire(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect()
    }
}

/// Where an action lands: a guest id, a storage file, or the PVE id of a
/// cluster-level object (a pool id, a backup job id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Target {
    Guest(Vmid),
    File {
        storage: StorageId,
        filename: String,
    },
    Cluster(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Guest(v) => write!(f, "{v}"),
            Target::File { storage, filename } => write!(f, "{storage}:{filename}"),
            Target::Cluster(id) => f.write_str(id),
        }
    }
}

/// The class of an anomaly, as metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyType {
    /// A kind's manifests all vanished while tagged guests remain.
    EmptyDesired,
    /// A slot PVE has that the manifest does not declare.
    LiveOnlySlot,
    /// A change PVE would implement by re-creating a volume.
    DataLoss,
    /// A disk or mount point larger on PVE than in the manifest: PVE
    /// cannot shrink a volume (`resize_vm`: "shrinking disks is not
    /// supported"), so ProxOps never tries.
    Shrink,
    /// Needs a person: template vs guest, create-only options, …
    NeedsPerson,
}

impl AnomalyType {
    pub fn as_str(self) -> &'static str {
        match self {
            AnomalyType::EmptyDesired => "empty_desired",
            AnomalyType::LiveOnlySlot => "live_only_slot",
            AnomalyType::DataLoss => "data_loss",
            AnomalyType::Shrink => "shrink",
            AnomalyType::NeedsPerson => "needs_person",
        }
    }
}

/// What an anomaly is, finer than its [`AnomalyType`] where code branches
/// on it: a refusal to disrupt the guest ProxOps runs in counts as
/// `needs_person` in metrics, yet a saved plan's check finds it by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AnomalyKind {
    EmptyDesired,
    LiveOnlySlot,
    DataLoss,
    Shrink,
    NeedsPerson,
    /// A disruptive action on the guest ProxOps runs in, not planned.
    SelfGuest,
}

impl AnomalyKind {
    /// The class metrics and renderings name it by.
    pub fn class(self) -> AnomalyType {
        match self {
            AnomalyKind::EmptyDesired => AnomalyType::EmptyDesired,
            AnomalyKind::LiveOnlySlot => AnomalyType::LiveOnlySlot,
            AnomalyKind::DataLoss => AnomalyType::DataLoss,
            AnomalyKind::Shrink => AnomalyType::Shrink,
            AnomalyKind::NeedsPerson | AnomalyKind::SelfGuest => AnomalyType::NeedsPerson,
        }
    }
}

impl From<AnomalyType> for AnomalyKind {
    fn from(t: AnomalyType) -> AnomalyKind {
        match t {
            AnomalyType::EmptyDesired => AnomalyKind::EmptyDesired,
            AnomalyType::LiveOnlySlot => AnomalyKind::LiveOnlySlot,
            AnomalyType::DataLoss => AnomalyKind::DataLoss,
            AnomalyType::Shrink => AnomalyKind::Shrink,
            AnomalyType::NeedsPerson => AnomalyKind::NeedsPerson,
        }
    }
}

/// A non-destructive observation: ProxOps will not act on it.
///
/// Ordered as the renderings list it: by type, then kind, name, node and
/// id as they are shown, field and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anomaly {
    pub anomaly: AnomalyKind,
    /// `None` for a cluster-wide anomaly.
    pub kind: Option<Kind>,
    /// `None` for a kind-wide or cluster-wide anomaly (`empty_desired`).
    pub name: Option<String>,
    pub node: Option<NodeName>,
    pub id: Option<Target>,
    /// The PVE key concerned, when there is one.
    pub field: Option<String>,
    pub message: String,
}

impl Anomaly {
    /// The anomaly's class, as metrics and renderings name it.
    pub fn anomaly_type(&self) -> AnomalyType {
        self.anomaly.class()
    }

    /// The object the anomaly is about, `None` for a kind-wide or
    /// cluster-wide one (`empty_desired`).
    pub fn object(&self) -> Option<(Kind, &str)> {
        Some((self.kind?, self.name.as_deref()?))
    }

    /// The node and id as shown, `""` where the anomaly has none.
    pub fn node_and_id(&self) -> (&str, String) {
        (
            self.node.as_ref().map_or("", NodeName::as_str),
            self.id.as_ref().map(Target::to_string).unwrap_or_default(),
        )
    }

    /// What anomalies are ordered by before the id as shown.
    fn sort_head(&self) -> (AnomalyType, &str, &str, &str) {
        (
            self.anomaly_type(),
            self.kind.map_or("", Kind::as_str),
            self.name.as_deref().unwrap_or(""),
            self.node.as_ref().map_or("", NodeName::as_str),
        )
    }
}

impl PartialOrd for Anomaly {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Anomaly {
    /// Class, kind, name, node, the id as shown, field, message: the id's
    /// text is built only when everything before it ties.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.sort_head()
            .cmp(&other.sort_head())
            .then_with(|| self.node_and_id().1.cmp(&other.node_and_id().1))
            .then_with(|| (&self.field, &self.message).cmp(&(&other.field, &other.message)))
    }
}

/// One live value adoption did not carry into a manifest.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Gap {
    /// `Kind/metadata.name` of the manifest concerned.
    pub object: String,
    pub node: String,
    /// The vmid, or `<storage>:<filename>` for an artifact.
    pub id: String,
    /// The PVE key (or manifest field, e.g. `spec.url`).
    pub key: String,
    /// The live value; `<redacted>` for sensitive keys; `None` when there is
    /// nothing to show.
    pub value: Option<String>,
    pub note: String,
}
