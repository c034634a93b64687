//! The live snapshot: what one cluster's PVE looked like this cycle, as
//! plain values.
//!
//! The PVE adapter's reader builds it from recorded or live responses; the
//! planner compares it with desired state. Every collection is ordered
//! (BTreeMap, sorted Vec, [`ConfigValues`]), so the same responses give the
//! same snapshot.
//!
//! **Architecture Invariant:** a read that failed is kept as a
//! `ReadFailure`, never turned into absence. Absence drives creates and
//! prunes; a failed read must drive neither. This module does no I/O.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use crate::cluster::Owner;
pub use crate::names::GuestType;
use crate::names::{Kind, NodeName, StorageId, Vmid};
use crate::wire::{TagSet, Volid, WireError, WireValue, json_text, json_to_text, parse_memory_mib};

mod values;
pub use values::{ConfigTooLarge, ConfigValues, Iter as ConfigIter};

/// One read that did not give a usable answer.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct ReadFailure {
    /// The request, e.g. `GET /nodes/pve1/qemu/100/config`.
    pub what: String,
    /// Why: PVE's status and reason, a transport error, or a parse error.
    pub message: String,
}

impl std::fmt::Display for ReadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.message)
    }
}

/// A node's state from `/cluster/resources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum NodeState {
    Online,
    Offline,
    /// Any other status, or a node the scope names that PVE did not list.
    Unknown,
}

impl NodeState {
    pub fn from_status(status: Option<&str>) -> NodeState {
        match status {
            Some("online") => NodeState::Online,
            Some("offline") => NodeState::Offline,
            _ => NodeState::Unknown,
        }
    }
}

/// Live power, from `/cluster/resources` `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Power {
    Running,
    Stopped,
    /// Anything else or absent: no power action may be derived from it.
    Unknown,
}

impl Power {
    pub fn from_status(status: Option<&str>) -> Power {
        match status {
            Some("running") => Power::Running,
            Some("stopped") => Power::Stopped,
            _ => Power::Unknown,
        }
    }
}

/// A guest's config as PVE will have it, every value normalised to text
/// (numbers in decimal, booleans `1`/`0`, LXC's raw `lxc` pairs as
/// `key: value` lines).
///
/// `values` is the config with pending changes applied: what real PVE's
/// `GET …/config` returns (qemu-server `API2/Qemu.pm` `vm_config`) and what
/// the guest runs with after its next cold start. `pending` names the keys
/// PVE holds back for that start, with the value the running guest has now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveConfig {
    pub values: ConfigValues,
    /// PVE's config digest (kept out of `values`): opaque, sent back for
    /// optimistic locking.
    pub digest: Option<String>,
    /// Keys with a queued new value or a queued removal, each with its
    /// current value (`None`: the running guest has no such key). Empty when
    /// read from `/config`, which shows no pending state.
    pub pending: BTreeMap<String, Option<String>>,
}

impl LiveConfig {
    /// From the `data` object of a config response. `null` values are unset.
    pub fn from_json(data: &serde_json::Value) -> Result<LiveConfig, WireError> {
        let obj = data
            .as_object()
            .ok_or_else(|| not_json_of("config", data, "a JSON object of config keys"))?;
        LiveConfig::from_config_entries(obj.iter().map(|(k, v)| (k.as_str(), json_text(v))))
            .map_err(|_| too_large("config"))
    }

    /// [`LiveConfig::from_json`] of the config's keys, each value as
    /// [`json_text`] reads it (`None`: unset). Each key once.
    pub(crate) fn from_config_entries<'t, K: AsRef<str>>(
        entries: impl ExactSizeIterator<Item = (K, Option<Cow<'t, str>>)>,
    ) -> Result<LiveConfig, ConfigTooLarge> {
        let mut cfg = LiveConfig::default();
        let mut values = Vec::with_capacity(entries.len());
        for (k, text) in entries {
            let Some(text) = text else {
                continue;
            };
            if k.as_ref() == "digest" {
                cfg.digest = Some(text.into_owned());
            } else {
                values.push((k, text));
            }
        }
        cfg.values = ConfigValues::from_entries(values)?;
        Ok(cfg)
    }

    /// From the `data` array of `GET …/pending`: one entry per key with
    /// `value` (current), `pending` (queued new value) and `delete` (queued
    /// removal: 1, or 2 for a forced one), and a `digest` entry carrying the
    /// config's digest (pve-guest-common `GuestHelpers.pm`
    /// `config_with_pending_array`, which walks every scalar key of the
    /// loaded config, `digest` included; `format_pending` skips it when
    /// printing).
    pub fn from_pending_json(data: &serde_json::Value) -> Result<LiveConfig, WireError> {
        let bad = |expected: &str| not_json_of("pending", data, expected);
        let items = data
            .as_array()
            .ok_or_else(|| bad("a JSON array of pending entries"))?;
        fn text<'v>(item: &'v serde_json::Value, member: &str) -> Option<Cow<'v, str>> {
            item.get(member).and_then(json_text)
        }
        let entries = items.iter().map(|item| PendingEntry {
            key: text(item, "key"),
            value: text(item, "value"),
            pending: text(item, "pending"),
            delete: text(item, "delete"),
        });
        match LiveConfig::from_pending_entries(entries) {
            Ok(Some(cfg)) => Ok(cfg),
            Ok(None) => Err(bad("entries with a key")),
            Err(_) => Err(too_large("pending")),
        }
    }

    /// [`LiveConfig::from_pending_json`] of its entries; `None` when one
    /// has no key.
    pub(crate) fn from_pending_entries<'t>(
        entries: impl ExactSizeIterator<Item = PendingEntry<'t>>,
    ) -> Result<Option<LiveConfig>, ConfigTooLarge> {
        let mut cfg = LiveConfig::default();
        let mut values = Vec::with_capacity(entries.len());
        for item in entries {
            let Some(key) = item.key else {
                return Ok(None);
            };
            let current = item.value;
            if key == "digest" {
                cfg.digest = current.map(Cow::into_owned);
                continue;
            }
            let queued = item.pending;
            let delete = item.delete.is_some_and(|d| d != "0");
            let held = delete || queued.as_ref().is_some_and(|q| Some(q) != current.as_ref());
            let will_be = if delete {
                None
            } else {
                queued.or_else(|| current.clone())
            };
            if held {
                cfg.pending
                    .insert(key.as_ref().to_owned(), current.map(Cow::into_owned));
            }
            if let Some(v) = will_be {
                values.push((key, v));
            }
        }
        cfg.values = ConfigValues::from_entries(values)?;
        Ok(Some(cfg))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key)
    }

    /// The value the running guest has now: the current value of a pending
    /// key, else the config's.
    pub fn current(&self, key: &str) -> Option<&str> {
        match self.pending.get(key) {
            Some(now) => now.as_deref(),
            None => self.get(key),
        }
    }

    /// The keys PVE holds pending, sorted.
    pub fn pending_keys(&self) -> Vec<&str> {
        self.pending.keys().map(String::as_str).collect()
    }

    /// Adds what `GET …/cloudinit` (qemu-server `API2/Qemu.pm`
    /// `cloudinit_pending`) lists as not yet seen by the guest: PVE 9.2
    /// fast-plugs cloud-init keys into the config (they never show in
    /// `/pending`) and regenerates the drive at the next start. An entry
    /// with `pending` (a changed or added key, `value` the one the guest
    /// saw) or `delete` is pending like any key held for a restart.
    pub fn add_cloudinit_pending(&mut self, data: &serde_json::Value) -> Result<(), WireError> {
        let items = data
            .as_array()
            .ok_or_else(|| not_json_of("cloudinit", data, "a JSON array of cloud-init entries"))?;
        for item in items {
            let Some(key) = item.get("key").and_then(json_to_text) else {
                continue;
            };
            let deleted = item
                .get("delete")
                .and_then(json_to_text)
                .is_some_and(|d| d != "0");
            if item.get("pending").is_some_and(|p| !p.is_null()) || deleted {
                let seen = item.get("value").and_then(json_to_text);
                self.pending.entry(key).or_insert(seen);
            }
        }
        Ok(())
    }

    /// A drive of this VM is its cloud-init drive (`…:vm-<id>-cloudinit`).
    pub fn has_cloudinit_drive(&self) -> bool {
        self.values.iter().any(|(k, v)| {
            ["ide", "sata", "scsi"].iter().any(|b| k.starts_with(b)) && v.contains("cloudinit")
        })
    }

    /// The value of `key` parsed with its wire grammar; `None` when absent.
    /// Errors name `key`.
    pub fn typed<T: WireValue>(&self, key: &str) -> Option<Result<T, WireError>> {
        self.get(key)
            .map(|v| T::parse_wire(v).map_err(|e| e.for_key(key)))
    }

    /// Keys `<prefix><N>` (e.g. `net0`, `scsi12`, `mp3`) in slot-number order.
    ///
    /// The keys starting with `prefix` sit together in the map's order:
    /// only that run is read, not the whole config.
    pub fn slots<'a>(&'a self, prefix: &'a str) -> Vec<(u32, &'a str, &'a str)> {
        let mut out: Vec<(u32, &str, &str)> = self.slots_unordered(prefix).collect();
        out.sort_by_key(|(n, _, _)| *n);
        out
    }

    /// [`LiveConfig::slots`] in the map's order (`net10` before `net2`),
    /// without collecting them: for a question any order answers.
    pub fn slots_unordered<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (u32, &'a str, &'a str)> + 'a {
        self.values.prefixed(prefix).filter_map(move |(k, v)| {
            let n = k.strip_prefix(prefix)?;
            if n.is_empty()
                || !n.bytes().all(|b| b.is_ascii_digit())
                || (n.len() > 1 && n.starts_with('0'))
            {
                return None;
            }
            Some((n.parse().ok()?, k, v))
        })
    }

    /// `memory` in MiB (number, numeric string, or `current=N`).
    pub fn memory_mib(&self) -> Option<Result<u64, WireError>> {
        self.get("memory")
            .map(|v| parse_memory_mib(v).map_err(|e| e.for_key("memory")))
    }

    /// A boolean key; absent → `None`.
    pub fn flag(&self, key: &str) -> Option<Result<bool, WireError>> {
        self.get(key)
            .map(|v| crate::wire::parse_bool(v).map_err(|e| e.for_key(key)))
    }

    /// A boolean key that is set and true; absent or unreadable is false.
    pub fn flag_on(&self, key: &str) -> bool {
        self.flag(key).is_some_and(|f| f.unwrap_or(false))
    }

    /// `template` in the config (`1`, `"1"`, `"true"`); absent = not a template.
    pub fn is_template(&self) -> Result<bool, WireError> {
        self.flag("template").unwrap_or(Ok(false))
    }

    pub fn tags(&self) -> Result<TagSet, WireError> {
        TagSet::parse(self.get("tags").unwrap_or("")).map_err(|e| e.for_key("tags"))
    }
}

/// A config response too large to hold ([`ConfigTooLarge`]); the response
/// itself is not shown, it is over 4 GiB.
fn too_large(key: &str) -> WireError {
    WireError::Invalid {
        key: key.into(),
        value: "(more than 4 GiB of keys and values)".into(),
        expected: "a config of at most 4 GiB".into(),
    }
}

/// `data` (shortened) is not the JSON `expected` for `key`.
fn not_json_of(key: &str, data: &serde_json::Value, expected: &str) -> WireError {
    WireError::Invalid {
        key: key.into(),
        value: truncate(&data.to_string()),
        expected: expected.into(),
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(120).collect()
}

/// One entry of a `GET …/pending` answer, each member as [`json_to_text`]
/// reads it (`None`: absent or `null`).
pub(crate) struct PendingEntry<'t> {
    pub key: Option<Cow<'t, str>>,
    pub value: Option<Cow<'t, str>>,
    pub pending: Option<Cow<'t, str>>,
    pub delete: Option<Cow<'t, str>>,
}

/// One guest from `/cluster/resources`, with its config read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveGuest {
    pub node: NodeName,
    pub vmid: Vmid,
    pub guest_type: GuestType,
    pub name: String,
    pub template: bool,
    pub power: Power,
    pub lock: Option<String>,
    /// `hastate` from `/cluster/resources`: present when the HA manager
    /// manages the guest (its power is then the HA manager's to change).
    pub ha_state: Option<String>,
    pub tags: TagSet,
    pub config: Result<LiveConfig, ReadFailure>,
}

/// Whether `tags` make a guest ProxOps': the ownership tag as ProxOps
/// writes it, `proxops`. Under a case-sensitive `tag-style`
/// (`case_sensitive`) `PROXOPS` or `Proxops` is a tag of its own, one
/// ProxOps never wrote, and owns nothing; under PVE's default style PVE
/// itself takes them for `proxops` (and stores every tag lower-cased).
/// Every decision that a guest may be written, stopped or pruned starts
/// here.
pub fn owns(tags: &TagSet, case_sensitive: bool) -> bool {
    if case_sensitive {
        tags.contains(crate::manifest::OWNERSHIP_TAG)
    } else {
        tags.has(crate::manifest::OWNERSHIP_TAG)
    }
}

/// Whether `tags` keep a guest from being pruned: `proxops-noprune` in any
/// case (a protection errs towards protecting).
pub fn keeps(tags: &TagSet) -> bool {
    tags.has(crate::manifest::NO_PRUNE_TAG)
}

impl LiveGuest {
    /// Carries the ownership tag exactly as ProxOps writes it, `proxops`,
    /// whatever the tag-style.
    pub fn is_owned(&self) -> bool {
        owns(&self.tags, true)
    }

    /// Carries the ownership tag under the cluster's tag-style ([`owns`]).
    /// Only such a guest may be updated, stopped or pruned.
    pub fn is_owned_in(&self, case_sensitive: bool) -> bool {
        owns(&self.tags, case_sensitive)
    }

    /// Carries `proxops-noprune` (ignoring case): never pruned.
    pub fn is_prune_protected(&self) -> bool {
        keeps(&self.tags)
    }

    /// Carries the old `pveconform` tag (which confers no ownership).
    pub fn has_legacy_tag(&self) -> bool {
        self.tags.has(crate::manifest::LEGACY_TAG)
    }

    /// The guest's lock: from `/cluster/resources`, else from its config.
    pub fn lock(&self) -> Option<&str> {
        self.lock.as_deref().or_else(|| {
            self.config
                .as_ref()
                .ok()
                .and_then(|c| c.current("lock"))
                .filter(|l| !l.is_empty())
        })
    }

    /// `protection=1` in the config: PVE refuses to destroy the guest
    /// (qemu-server `API2/Qemu.pm` `destroy_vm`, `check_protection`).
    pub fn is_protected(&self) -> bool {
        self.config
            .as_ref()
            .ok()
            .and_then(|c| c.current("protection"))
            .is_some_and(|p| crate::wire::parse_bool(p).unwrap_or(false))
    }

    /// The HA resource id (`vm:100`, `ct:200`) of a guest whose power the
    /// HA manager owns: one with an HA state other than `ignored`
    /// (pve-ha-manager `HA/Config.pm` `$service_check_ha_state`: an
    /// ignored resource behaves as if it were not managed). `None`
    /// otherwise.
    pub fn ha_sid(&self) -> Option<String> {
        let state = self.ha_state.as_deref()?;
        (state != "ignored").then(|| {
            let kind = match self.guest_type {
                GuestType::Qemu => "vm",
                GuestType::Lxc => "ct",
            };
            format!("{kind}:{}", self.vmid)
        })
    }

    /// The PVE name, or `vmid-<id>` for a guest without one.
    pub fn display_name(&self) -> String {
        if self.name.is_empty() {
            format!("vmid-{}", self.vmid)
        } else {
            self.name.clone()
        }
    }
}

/// One entry of a bare `GET /nodes/{n}/storage/{s}/content` listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContentEntry {
    pub volid: String,
    pub content: String,
    pub format: Option<String>,
    pub size: Option<u64>,
}

impl ContentEntry {
    /// The file name per the extraction rule: what follows `:<content>/`,
    /// else the last path component, else the whole volume id.
    pub fn file_name(&self) -> &str {
        Volid::file_name_of(&self.volid, &self.content)
    }
}

/// A storage's content listing, in PVE's order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StorageContent {
    pub entries: Vec<ContentEntry>,
}

impl StorageContent {
    /// Parses the `data` array. `ctime` and other fields are ignored (their
    /// JSON type differs between builds); `size` may be an integer, a float
    /// or a numeric string.
    pub fn from_json(data: &serde_json::Value) -> Result<StorageContent, WireError> {
        let bad = |what: &str| not_json_of("storage content", data, what);
        let items = data
            .as_array()
            .ok_or_else(|| bad("a JSON array of content entries"))?;
        let mut entries = Vec::with_capacity(items.len());
        for item in items {
            let text = |k: &str| item.get(k).and_then(json_to_text);
            let volid = text("volid").ok_or_else(|| bad("entries with a volid"))?;
            let content = text("content").ok_or_else(|| bad("entries with a content type"))?;
            let size = match item.get("size") {
                None | Some(serde_json::Value::Null) => None,
                Some(v) => Some(json_size(v).ok_or_else(|| bad("a numeric size"))?),
            };
            entries.push(ContentEntry {
                volid,
                content,
                format: text("format"),
                size,
            });
        }
        Ok(StorageContent { entries })
    }

    /// True when an entry of `content_type` (`iso`, `vztmpl`, `import`) has
    /// exactly `filename` (case-sensitive).
    pub fn has_file(&self, content_type: &str, filename: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.content == content_type && e.file_name() == filename)
    }
}

fn json_size(v: &serde_json::Value) -> Option<u64> {
    match v {
        serde_json::Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        serde_json::Value::String(s) => s
            .trim()
            .parse::<u64>()
            .ok()
            .or_else(|| s.trim().parse::<f64>().ok().map(|f| f as u64)),
        _ => None,
    }
}

/// One cluster's live state this cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LiveSnapshot {
    pub nodes: BTreeMap<NodeName, NodeState>,
    #[serde(serialize_with = "guests_as_list")]
    pub guests: BTreeMap<(NodeName, Vmid), LiveGuest>,
    #[serde(serialize_with = "storage_as_list")]
    pub storage: BTreeMap<(NodeName, StorageId), Result<StorageContent, ReadFailure>>,
    /// Every failure of this read (also the ones held by a guest or a
    /// storage entry), sorted.
    pub failures: Vec<ReadFailure>,
    /// The storages `/cluster/resources` lists, with their `shared` flag
    /// (storage.cfg's `shared`, one value per storage whichever node lists
    /// it). Only a storage listed here as shared may hold the volumes of a
    /// template cloned to another node.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub shared_storage: BTreeMap<StorageId, bool>,
    /// The storages `/cluster/resources` lists, with their `plugintype`
    /// (`dir`, `lvmthin`, `zfspool`, `nfs`, …): a template's base volume
    /// on file storage cannot be resized.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub storage_types: BTreeMap<StorageId, String>,
    /// The content types each storage is configured for (storage.cfg's
    /// `content`, which `/cluster/resources` lists per node): PVE refuses
    /// to download a file to a storage not configured for its content
    /// type. A storage not listed here is not known, and not judged.
    #[serde(skip)]
    pub storage_contents: BTreeMap<StorageId, std::collections::BTreeSet<String>>,
    /// The cluster's replication jobs by guest, from one
    /// `GET /cluster/replication` per cycle: PVE refuses to destroy a
    /// replicated guest without `purge`.
    #[serde(skip_serializing_if = "Replication::is_empty")]
    pub replication: Replication,
    /// Running VMs QEMU reports paused (`qmpstatus` `paused`, `prelaunch`
    /// or `suspended` in `GET /nodes/{n}/qemu?full=1`, qemu-server
    /// `QemuServer.pm` `vmstatus`): `/cluster/resources` says `running`,
    /// but PVE refuses to shut them down or reboot them ("VM is paused -
    /// cannot shutdown", `API2/Qemu.pm` `vm_shutdown`, `vm_reboot`).
    #[serde(skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub paused: std::collections::BTreeSet<Vmid>,
    /// Pools and backup jobs, and each guest's pool.
    pub cluster: ClusterObjects,
    /// PVE's firewall, read when the repository declares any of it for
    /// this cluster (`None`: not read this cycle).
    #[serde(skip)]
    pub firewall: Option<LiveFirewall>,
}

/// One answer of the firewall's API, or why it is unknown (never taken as
/// an empty list).
pub type FwRead<T> = Result<T, ReadFailure>;

/// A firewall scope's lists: the cluster's (`/cluster/firewall`) or a
/// guest's (`/nodes/{node}/{type}/{vmid}/firewall`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirewallScope {
    pub options: FwRead<crate::firewall::live::LiveOptions>,
    pub rules: FwRead<crate::firewall::live::LiveRules>,
    pub aliases: FwRead<crate::firewall::live::LiveList>,
    /// The IP sets by name and comment (`GET …/ipset`).
    pub ipsets: FwRead<crate::firewall::live::LiveList>,
    /// Each listed IP set's entries (`GET …/ipset/{name}`).
    pub entries: BTreeMap<String, FwRead<crate::firewall::live::LiveList>>,
}

impl FirewallScope {
    /// A scope PVE holds nothing of (a guest not created yet): every list
    /// empty, with the digest of an empty list.
    pub fn empty() -> FirewallScope {
        use crate::firewall::live::{EMPTY_LIST_DIGEST, LiveList, LiveOptions, LiveRules};
        FirewallScope {
            options: Ok(LiveOptions {
                digest: EMPTY_LIST_DIGEST.to_owned(),
                values: BTreeMap::new(),
            }),
            rules: Ok(LiveRules {
                digest: EMPTY_LIST_DIGEST.to_owned(),
                rules: Vec::new(),
            }),
            aliases: Ok(LiveList {
                digest: EMPTY_LIST_DIGEST.to_owned(),
                entries: Vec::new(),
            }),
            ipsets: Ok(LiveList {
                digest: EMPTY_LIST_DIGEST.to_owned(),
                entries: Vec::new(),
            }),
            entries: BTreeMap::new(),
        }
    }

    /// Every failure of this scope's reads.
    pub fn failures(&self) -> Vec<&ReadFailure> {
        let mut out: Vec<&ReadFailure> = [
            self.options.as_ref().err(),
            self.rules.as_ref().err(),
            self.aliases.as_ref().err(),
            self.ipsets.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .collect();
        out.extend(self.entries.values().filter_map(|e| e.as_ref().err()));
        out
    }
}

/// PVE's firewall this cycle: the cluster's scope, its security groups,
/// and the scope of each guest whose manifest declares `spec.firewall`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFirewall {
    pub cluster: FirewallScope,
    /// The groups by name and comment (`GET /cluster/firewall/groups`).
    pub groups: FwRead<crate::firewall::live::LiveList>,
    /// Each listed group's rules.
    pub group_rules: BTreeMap<String, FwRead<crate::firewall::live::LiveRules>>,
    pub guests: BTreeMap<Vmid, FirewallScope>,
}

/// What `/cluster/replication` said: each replicated guest's job ids, or
/// why it could not be read (never taken as "no jobs").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Replication {
    Jobs(BTreeMap<Vmid, Vec<String>>),
    Unreadable(ReadFailure),
}

impl Default for Replication {
    fn default() -> Replication {
        Replication::Jobs(BTreeMap::new())
    }
}

impl Replication {
    /// From the `data` array: `{"id": "100-0", "guest": 100, …}` per job
    /// (pve-guest-common `ReplicationConfig.pm`).
    pub fn from_json(data: &serde_json::Value) -> Result<Replication, WireError> {
        let bad = |expected: &str| not_json_of("replication", data, expected);
        let items = data
            .as_array()
            .ok_or_else(|| bad("a JSON array of replication jobs"))?;
        let mut jobs: BTreeMap<Vmid, Vec<String>> = BTreeMap::new();
        for item in items {
            let guest = item
                .get("guest")
                .ok_or_else(|| bad("jobs with a guest"))
                .and_then(|g| crate::wire::json_vmid(g).map_err(|_| bad("a guest vmid")))?;
            let id = item.get("id").and_then(json_to_text).unwrap_or_default();
            jobs.entry(guest).or_default().push(id);
        }
        for ids in jobs.values_mut() {
            ids.sort();
        }
        Ok(Replication::Jobs(jobs))
    }

    /// From the `/cluster/replication` listing of the ReplicationJob kind
    /// (every listed job, those PVE is removing included: they still keep
    /// their guest from being destroyed without purge).
    pub fn of_listing(listing: &Listing) -> Replication {
        let l = match listing {
            Ok(l) => l,
            Err(f) => return Replication::Unreadable(f.clone()),
        };
        let mut jobs: BTreeMap<Vmid, Vec<String>> = BTreeMap::new();
        for (id, o) in l {
            let guest = o
                .get("guest")
                .and_then(|g| Vmid::new(g.parse().ok()?).ok())
                .or_else(|| Vmid::new(id.split('-').next()?.parse().ok()?).ok());
            if let Some(g) = guest {
                jobs.entry(g).or_default().push(id.clone());
            }
        }
        Replication::Jobs(jobs)
    }

    fn is_empty(&self) -> bool {
        matches!(self, Replication::Jobs(j) if j.is_empty())
    }

    /// The replication jobs of `vmid` (empty: none), or why that is
    /// unknown.
    pub fn of(&self, vmid: Vmid) -> Result<&[String], &ReadFailure> {
        match self {
            Replication::Jobs(j) => Ok(j.get(&vmid).map_or(&[][..], Vec::as_slice)),
            Replication::Unreadable(f) => Err(f),
        }
    }
}

impl LiveSnapshot {
    pub fn guest(&self, node: &NodeName, vmid: Vmid) -> Option<&LiveGuest> {
        self.guests.get(&(node.clone(), vmid))
    }

    /// The guest with `vmid` on any node (PVE ids are cluster-wide).
    pub fn guest_by_vmid(&self, vmid: Vmid) -> Option<&LiveGuest> {
        self.guests.values().find(|g| g.vmid == vmid)
    }

    pub fn node_state(&self, node: &NodeName) -> NodeState {
        self.nodes.get(node).copied().unwrap_or(NodeState::Unknown)
    }

    /// True only when `/cluster/resources` listed `storage` as shared.
    pub fn is_shared(&self, storage: &StorageId) -> bool {
        self.shared_storage.get(storage).copied().unwrap_or(false)
    }

    /// The plugin type `/cluster/resources` gave `storage`, if listed.
    pub fn storage_type(&self, storage: &StorageId) -> Option<&str> {
        self.storage_types.get(storage).map(String::as_str)
    }

    /// `None` when the pair was not read this cycle.
    pub fn storage_content(
        &self,
        node: &NodeName,
        storage: &StorageId,
    ) -> Option<&Result<StorageContent, ReadFailure>> {
        self.storage.get(&(node.clone(), storage.clone()))
    }
}

fn guests_as_list<S: Serializer>(
    m: &BTreeMap<(NodeName, Vmid), LiveGuest>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(m.len()))?;
    for g in m.values() {
        seq.serialize_element(g)?;
    }
    seq.end()
}

#[derive(Serialize)]
struct StorageRow<'a> {
    node: &'a NodeName,
    storage: &'a StorageId,
    content: &'a Result<StorageContent, ReadFailure>,
}

#[allow(clippy::type_complexity)]
fn storage_as_list<S: Serializer>(
    m: &BTreeMap<(NodeName, StorageId), Result<StorageContent, ReadFailure>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(m.len()))?;
    for ((node, storage), content) in m {
        seq.serialize_element(&StorageRow {
            node,
            storage,
            content,
        })?;
    }
    seq.end()
}

/// One live cluster-level object: every key PVE listed, as text
/// (numbers and booleans as PVE's `1`/`0`, property-string objects as
/// `key=value` pairs sorted by key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveObject {
    pub id: String,
    pub values: BTreeMap<String, String>,
}

impl LiveObject {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    pub fn owner(&self) -> Owner {
        Owner::of(self.get("comment"))
    }
}

/// One kind's listing this cycle, by PVE id, or why it is unknown (never
/// taken as "none").
pub type Listing = Result<BTreeMap<String, LiveObject>, ReadFailure>;

/// What PVE holds of the cluster-level kinds this cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClusterObjects {
    /// Per cluster-level kind. A kind missing here was not asked for
    /// (a snapshot built by hand): read as no objects.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub listings: BTreeMap<Kind, Listing>,
    /// Each guest's pool, from the `pool` of its `/cluster/resources` row
    /// (pve-manager `API2/Cluster.pm` `resources`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub guest_pools: BTreeMap<Vmid, String>,
    /// Kinds this PVE has no endpoint for (a PVE 8 answers
    /// `/cluster/ha/rules` with 501): listed as none, planned as anomalies.
    #[serde(skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub unsupported: std::collections::BTreeSet<Kind>,
}

impl ClusterObjects {
    pub fn listing(&self, kind: Kind) -> Result<&BTreeMap<String, LiveObject>, &ReadFailure> {
        static NONE: BTreeMap<String, LiveObject> = BTreeMap::new();
        match self.listings.get(&kind) {
            Some(Ok(m)) => Ok(m),
            Some(Err(f)) => Err(f),
            None => Ok(&NONE),
        }
    }

    /// The guests PVE lists in pool `id`.
    pub fn members(&self, id: &str) -> Vec<Vmid> {
        self.guest_pools
            .iter()
            .filter(|(_, p)| p.as_str() == id)
            .map(|(v, _)| *v)
            .collect()
    }
}

/// A listed object PVE is removing: a replication job marked with
/// `remove_job` (pve-manager `API2/ReplicationConfig.pm` `delete`) stays
/// listed until the replication runner has cleaned up; it is neither
/// updated nor deleted again, and no other job to its target can be
/// created meanwhile.
pub fn being_removed(o: &LiveObject) -> bool {
    o.get("remove_job").is_some()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::QemuNet;
    use serde_json::json;

    #[test]
    fn config_values_normalise_to_text_and_digest_is_kept_apart() {
        let cfg = LiveConfig::from_json(&json!({
            "memory": "4096", "cores": 4, "kvm": 1, "digest": "18389648fd69603dd93ab0c443e1f32267f6c436",
            "net0": "virtio=bc:24:11:4e:8f:d1,bridge=vmbr0,firewall=1", "net2": "e1000,bridge=vmbr1",
            "lxc": [["lxc.apparmor.profile", "unconfined"]], "description": null
        }))
        .unwrap();
        assert_eq!(cfg.get("cores"), Some("4"));
        assert_eq!(cfg.memory_mib().unwrap().unwrap(), 4096);
        assert_eq!(
            cfg.digest.as_deref(),
            Some("18389648fd69603dd93ab0c443e1f32267f6c436")
        );
        assert!(cfg.get("digest").is_none() && cfg.get("description").is_none());
        assert_eq!(cfg.get("lxc"), Some("lxc.apparmor.profile: unconfined"));
        let nets: Vec<_> = cfg
            .slots("net")
            .into_iter()
            .map(|(n, k, _)| (n, k))
            .collect();
        assert_eq!(nets, vec![(0, "net0"), (2, "net2")]);
        let n: QemuNet = cfg.typed("net0").unwrap().unwrap();
        assert_eq!(n.bridge.as_deref(), Some("vmbr0"));
    }

    #[test]
    fn typed_errors_name_the_config_key() {
        let cfg = LiveConfig::from_json(&json!({"net1": "virtio=zz,bridge=vmbr0"})).unwrap();
        let e = cfg.typed::<QemuNet>("net1").unwrap().unwrap_err();
        assert_eq!(e.key(), "net1");
    }

    #[test]
    fn power_comes_from_resource_status() {
        assert_eq!(Power::from_status(Some("running")), Power::Running);
        assert_eq!(Power::from_status(Some("stopped")), Power::Stopped);
        assert_eq!(Power::from_status(Some("paused")), Power::Unknown);
        assert_eq!(Power::from_status(None), Power::Unknown);
    }

    #[test]
    fn storage_presence_matches_content_type_and_extracted_file_name() {
        let c = StorageContent::from_json(&json!([
            {"volid": "local:iso/debian-13.1.0-amd64-netinst.iso", "content": "iso", "format": "iso", "size": 1, "ctime": "x"},
            {"volid": "local:vztmpl/debian-13-standard_13.6.1-1_amd64.tar.zst", "content": "vztmpl", "size": 1.2e8},
            {"volid": "local:import/debian-13-genericcloud-amd64.qcow2", "content": "import", "format": "qcow2", "size": "3221225472"}
        ]))
        .unwrap();
        assert!(c.has_file("iso", "debian-13.1.0-amd64-netinst.iso"));
        assert!(!c.has_file("vztmpl", "debian-13.1.0-amd64-netinst.iso"));
        assert!(c.has_file("vztmpl", "debian-13-standard_13.6.1-1_amd64.tar.zst"));
        assert!(c.has_file("import", "debian-13-genericcloud-amd64.qcow2"));
        assert!(!c.has_file("iso", "DEBIAN-13.1.0-amd64-netinst.iso"));
        assert_eq!(c.entries[2].size, Some(3221225472));
    }

    #[test]
    fn snapshot_serialises_maps_with_compound_keys_as_lists() {
        let mut s = LiveSnapshot::default();
        let node = NodeName::new("pve1").unwrap();
        s.nodes.insert(node.clone(), NodeState::Online);
        s.storage.insert(
            (node.clone(), StorageId::new("local").unwrap()),
            Err(ReadFailure {
                what: "GET /nodes/pve1/storage/local/content".into(),
                message: "500".into(),
            }),
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["storage"][0]["node"], "pve1");
        assert_eq!(v["storage"][0]["content"]["Err"]["message"], "500");
    }
}
