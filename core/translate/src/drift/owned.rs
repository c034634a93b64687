//! The PVE keys ProxOps owns, as data: one row per key (or per slot family)
//! with everything ProxOps knows about it — the manifest field, the desired
//! wire value, PVE's equivalence, the impact of a change on a running guest
//! and the adoption inverse. The create form, the drift and the adoption of
//! a guest are folds over its kind's table (`qemu::KEYS`, `lxc::KEYS`), so
//! the translations of one key cannot drift apart.
//!
//! A row is either a `Key` (one scalar PVE key) or a `Family` (a slot family
//! such as `netN` or the drive bus, and the few genuinely irregular pieces:
//! the CD drive's three states, clone identity clearing, LXC features),
//! which supplies its own create, drift and adopt functions behind the same
//! interface. Table order is create-form order.
//!
//! **Architecture Invariant:** a live key no row adopts is a gap (or PVE
//! bookkeeping): adoption's gap rule is "not in the table". This module does
//! no I/O.

use crate::change::{AnomalyType, Impact, ParamValue, Params};
use crate::inverse::GuestCx;
use proxops_model::hash::FnvMap;
use proxops_model::live::LiveConfig;
use proxops_model::repo::DesiredObject;
use proxops_model::wire::parse_bool;

use super::codec::{Absent, Doc, Scalar};
use super::{Acc, Context, DriftError};

/// What a row's desired value is computed from.
pub(crate) struct Input<'a, S> {
    pub obj: &'a DesiredObject,
    pub spec: &'a S,
    pub ctx: &'a Context<'a>,
}

impl<S> Input<'_, S> {
    /// An `Unsupported` error on `field` of this object.
    pub(crate) fn unsupported(&self, field: impl Into<String>, message: String) -> DriftError {
        DriftError::Unsupported {
            object: self.obj.r#ref.clone(),
            field: field.into(),
            message,
        }
    }
}

/// The form being built: a fresh guest's create form, or the config write
/// that follows a clone (no volume-bearing slot: the clone inherits those).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Create,
    Clone,
}

/// What drift does when a key differs.
#[derive(Clone, Copy)]
pub(crate) enum OnChange {
    /// Write the desired value (through `Key::write`).
    Write,
    /// A create-only key: report a `NeedsPerson` anomaly with this text
    /// (from the live and desired values), never write.
    Refuse(fn(Option<&str>, &str) -> String),
}

/// An equivalence that sees the cluster: `(cluster, live, desired)`.
pub(crate) type SameIn = fn(&Context<'_>, Option<&str>, &str) -> bool;

/// One scalar PVE key a guest kind owns.
pub(crate) struct Key<S: 'static> {
    /// The PVE key.
    pub key: &'static str,
    /// The manifest field that owns it.
    pub field: &'static str,
    /// What changing it means for a running guest.
    pub impact: Impact,
    /// The wire value the manifest asks for; `None` when the manifest does
    /// not own the key (absent, or only owned when on).
    pub desired: fn(&Input<'_, S>) -> Result<Option<ParamValue>, DriftError>,
    /// PVE's equivalence: does the live value (absent = `None`) already
    /// satisfy the desired wire value?
    pub same: fn(Option<&str>, &str) -> bool,
    /// An equivalence that depends on the cluster (tags under its
    /// `tag-style`), used instead of `same` when set.
    pub same_in: Option<SameIn>,
    /// The value written over `live` (the live form when PVE's value carries
    /// tokens ProxOps does not own).
    pub write: fn(Option<&str>, ParamValue) -> ParamValue,
    pub on_change: OnChange,
    /// The inverse: the live value (taken from the guest context) into the
    /// manifest being built; unreadable values become gaps.
    pub adopt: fn(&mut GuestCx<'_>, &mut S),
}

impl<S> Key<S> {
    /// A key whose desired value is written as is when PVE's differs. The
    /// arguments in table order: PVE key, manifest field, impact, desired
    /// value, equivalence, adoption inverse.
    pub(crate) const fn new(
        key: &'static str,
        field: &'static str,
        impact: Impact,
        desired: fn(&Input<'_, S>) -> Result<Option<ParamValue>, DriftError>,
        same: fn(Option<&str>, &str) -> bool,
        adopt: fn(&mut GuestCx<'_>, &mut S),
    ) -> Key<S> {
        Key {
            key,
            field,
            impact,
            desired,
            same,
            same_in: None,
            write: write_desired,
            on_change: OnChange::Write,
            adopt,
        }
    }

    /// Writes `write(live, desired)` instead (a live form keeping tokens
    /// ProxOps does not own).
    pub(crate) const fn writing(self, write: fn(Option<&str>, ParamValue) -> ParamValue) -> Key<S> {
        Key { write, ..self }
    }

    /// Compares with `same_in` (which sees the cluster) instead of `same`.
    pub(crate) const fn comparing_in(self, same_in: SameIn) -> Key<S> {
        Key {
            same_in: Some(same_in),
            ..self
        }
    }

    /// A create-only key: a difference is an anomaly with this text.
    pub(crate) const fn refusing(self, message: fn(Option<&str>, &str) -> String) -> Key<S> {
        Key {
            on_change: OnChange::Refuse(message),
            ..self
        }
    }
}

/// What every guest spec has besides its own keys.
pub(crate) trait GuestSpec {
    fn pve_description(&self) -> Option<&String>;
    fn pve_description_mut(&mut self) -> &mut Option<String>;
    fn user_tags(&self) -> &[String];
    fn user_tags_mut(&mut self) -> &mut Vec<String>;
}

/// VMs and containers spell both fields the same way.
macro_rules! guest_spec {
    ($($t:ty),*) => {$(
        impl GuestSpec for $t {
            fn pve_description(&self) -> Option<&String> {
                self.pve_description.as_ref()
            }
            fn pve_description_mut(&mut self) -> &mut Option<String> {
                &mut self.pve_description
            }
            fn user_tags(&self) -> &[String] {
                &self.tags
            }
            fn user_tags_mut(&mut self) -> &mut Vec<String> {
                &mut self.tags
            }
        }
    )*};
}

guest_spec!(
    proxops_model::manifest::VmSpec,
    proxops_model::manifest::LxcSpec
);

/// `description`: user text, byte for byte.
pub(crate) const fn description<S: GuestSpec>(impact: Impact) -> Row<S> {
    Row::Key(Key::new(
        "description",
        "spec.pve-description",
        impact,
        |i| Ok(i.spec.pve_description().cloned().and_then(plain)),
        same_description,
        |cx, s| *s.pve_description_mut() = cx.take("description").map(str::to_owned),
    ))
}

/// `tags`: the user's tags plus the ownership tag (and `proxops-noprune`),
/// compared as PVE stores them under the cluster's `tag-style`.
pub(crate) const fn tags<S: GuestSpec>(impact: Impact) -> Row<S> {
    Row::Key(
        Key::<S>::new(
            "tags",
            "spec.tags",
            impact,
            |i: &Input<'_, S>| Ok(plain(super::desired_tags(i.obj, i.spec.user_tags())?)),
            same_tags,
            |cx, s| *s.user_tags_mut() = cx.tags(),
        )
        .comparing_in(|ctx, live, want| {
            same_tags_styled(live, want, ctx.cluster.tag_case_sensitive)
        }),
    )
}

/// A slot family or an irregular piece of logic behind the same interface.
pub(crate) struct Family<S: 'static> {
    /// The PVE keys it covers, as docs spell them (`netN`, `efidisk0`).
    pub keys: &'static str,
    pub field: &'static str,
    pub create: fn(&Input<'_, S>, Form, &mut Params) -> Result<(), DriftError>,
    pub drift: fn(&Input<'_, S>, &LiveConfig, &mut Acc) -> Result<(), DriftError>,
    /// `false` when the guest cannot be declared at all (an LXC without a
    /// readable storage-backed rootfs).
    pub adopt: fn(&mut GuestCx<'_>, &mut S) -> bool,
}

pub(crate) enum Row<S: 'static> {
    /// A scalar key read and written through its wire codec.
    Field(&'static dyn Scalar<S>),
    Key(Key<S>),
    Family(Family<S>),
}

impl<S> Row<S> {
    /// The manifest field (or fields) the row reads.
    fn field(&self) -> &'static str {
        match self {
            Row::Field(f) => f.path(),
            Row::Key(k) => k.field,
            Row::Family(f) => f.field,
        }
    }
}

/// The create (or post-clone) form: every row in table order.
pub(crate) fn create<S>(
    rows: &[Row<S>],
    input: &Input<'_, S>,
    form: Form,
    p: &mut Params,
) -> Result<(), DriftError> {
    for row in rows {
        match row {
            Row::Field(f) => {
                if let Some(v) = f.desired(input)? {
                    p.0.push((f.key().into(), v));
                }
            }
            Row::Key(k) => {
                if let Some(v) = (k.desired)(input)? {
                    p.0.push((k.key.into(), v));
                }
            }
            Row::Family(f) => (f.create)(input, form, p)?,
        }
    }
    Ok(())
}

/// Desired vs live for every row.
pub(crate) fn drift<S>(
    rows: &[Row<S>],
    input: &Input<'_, S>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    for row in rows {
        acc.at_row(row.field());
        match row {
            Row::Field(f) => f.drift(input, cfg, acc)?,
            Row::Key(k) => key_drift(k, input, cfg, acc)?,
            Row::Family(f) => (f.drift)(input, cfg, acc)?,
        }
    }
    acc.at_path(None);
    Ok(())
}

/// The one manifest field a row reads, `None` for a family that reads
/// several (`spec.mount-points, spec.bind-mounts`).
fn row_path<S>(row: &Row<S>) -> Option<&'static str> {
    single_field(row.field())
}

/// `field` when it names one manifest field, not a list of them.
pub(crate) fn single_field(field: &str) -> Option<&str> {
    (!field.contains([',', ' '])).then_some(field)
}

/// Which manifest field asks for each key of a create form built from a
/// table: the table's own keys and its families' key patterns, read once
/// (matching every key of every create against each family's documented
/// keys was a seventh of planning 10,000 guests).
pub(crate) struct KeyIndex {
    own: std::collections::BTreeMap<&'static str, &'static str>,
    /// Per family pattern (`scsi` of `scsiN`, `efidisk0`): whether it
    /// takes a slot number, the family's position and its one field.
    patterns: Vec<(&'static str, bool, usize, Option<&'static str>)>,
    /// The answer of `scan` for every key a create form names in
    /// practice (the own keys, every pattern with slots 0 to
    /// `SLOTS_KNOWN - 1`), read by one hash instead of a tree search and a
    /// scan of every pattern; any other key is scanned.
    known: FnvMap<Box<str>, Option<&'static str>>,
}

/// Slot numbers answered from `KeyIndex::known`: every slot of most
/// families; the higher slots of `mpN` and `unusedN` (to 255) are scanned.
const SLOTS_KNOWN: usize = 32;

impl KeyIndex {
    pub(crate) fn of<S>(rows: &[Row<S>]) -> KeyIndex {
        let mut own = std::collections::BTreeMap::new();
        let mut patterns = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            match row {
                // The first row owning a key is the one asked.
                Row::Field(f) => {
                    own.entry(f.key()).or_insert(f.path());
                }
                Row::Key(k) => {
                    own.entry(k.key).or_insert(k.field);
                }
                Row::Family(f) => {
                    // The note in brackets (`ide2/ide3 (CD drive)`) goes.
                    let keys = f.keys.split(" (").next().unwrap_or(f.keys);
                    for k in keys.split([',', '/']).map(str::trim) {
                        let (pattern, numbered) = match k.strip_suffix('N') {
                            Some(prefix) => (prefix, true),
                            None => (k, false),
                        };
                        patterns.push((pattern, numbered, i, row_path(row)));
                    }
                }
            }
        }
        let mut index = KeyIndex {
            own,
            patterns,
            known: std::collections::HashMap::default(),
        };
        let mut keys: Vec<String> = index.own.keys().map(|k| (*k).to_owned()).collect();
        for (pattern, numbered, _, _) in &index.patterns {
            if *numbered {
                keys.extend((0..SLOTS_KNOWN).map(|n| format!("{pattern}{n}")));
            } else {
                keys.push((*pattern).to_owned());
            }
        }
        let known = keys
            .into_iter()
            .map(|k| {
                let field = index.scan(&k);
                (k.into_boxed_str(), field)
            })
            .collect();
        index.known = known;
        index
    }

    /// The manifest field that asks for `key`: the one row owning it,
    /// `None` when no row or more than one could (`ide2` is the
    /// cloud-init drive, a CD drive or a disk).
    pub(crate) fn create_path(&self, key: &str) -> Option<&'static str> {
        match self.known.get(key) {
            Some(field) => *field,
            None => self.scan(key),
        }
    }

    /// `create_path` read from the rows: the own keys, then every pattern.
    pub(crate) fn scan(&self, key: &str) -> Option<&'static str> {
        if let Some(field) = self.own.get(key) {
            return Some(field);
        }
        let mut found = self.patterns.iter().filter(|(pattern, numbered, _, _)| {
            if *numbered {
                key.strip_prefix(pattern)
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            } else {
                key == *pattern
            }
        });
        let (_, _, family, path) = *found.next()?;
        if found.any(|(_, _, other, _)| *other != family) {
            return None;
        }
        path
    }
}

fn key_drift<S>(
    k: &Key<S>,
    input: &Input<'_, S>,
    cfg: &LiveConfig,
    acc: &mut Acc,
) -> Result<(), DriftError> {
    let Some(want) = (k.desired)(input)? else {
        return Ok(());
    };
    let live = cfg.get(k.key);
    let same = match k.same_in {
        Some(same_in) => same_in(input.ctx, live, want.expose()),
        None => (k.same)(live, want.expose()),
    };
    if same {
        return Ok(());
    }
    match k.on_change {
        OnChange::Write => acc.set(k.key, live, (k.write)(live, want), k.impact),
        OnChange::Refuse(message) => acc.anomaly(
            AnomalyType::NeedsPerson,
            Some(k.key),
            message(live, want.expose()),
        ),
    }
    Ok(())
}

/// The inverse of every row into `spec`; `false` when a family says the
/// guest cannot be declared (every row still runs, so every key it read is
/// accounted for).
pub(crate) fn adopt<S>(rows: &[Row<S>], cx: &mut GuestCx<'_>, spec: &mut S) -> bool {
    let mut declarable = true;
    for row in rows {
        match row {
            Row::Field(f) => f.adopt(cx, spec),
            Row::Key(k) => (k.adopt)(cx, spec),
            Row::Family(f) => declarable &= (f.adopt)(cx, spec),
        }
    }
    declarable
}

/// One owned key or slot family, as the documentation lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedKey {
    /// The PVE key (`cores`) or family (`netN`).
    pub key: &'static str,
    /// The manifest field path.
    pub field: &'static str,
    /// The impact of a change on a running guest; `None` for a family,
    /// whose impact depends on the change.
    pub impact: Option<Impact>,
    /// What the schema and the docs say of a scalar row read through its
    /// codec (`None`: the manifest field's own attributes say it).
    pub doc: Option<Doc>,
    /// What an absent live key means, for such a row.
    pub absent: Option<Absent>,
}

pub(crate) fn listing<S>(rows: &[Row<S>]) -> Vec<OwnedKey> {
    rows.iter()
        .map(|row| match row {
            Row::Field(f) => OwnedKey {
                key: f.key(),
                field: f.path(),
                impact: Some(f.impact().table()),
                doc: Some(*f.doc()),
                absent: Some(*f.absent()),
            },
            Row::Key(k) => OwnedKey {
                key: k.key,
                field: k.field,
                impact: Some(k.impact),
                doc: None,
                absent: None,
            },
            Row::Family(f) => OwnedKey {
                key: f.keys,
                field: f.field,
                impact: None,
                doc: None,
                absent: None,
            },
        })
        .collect()
}

// ------------------------------------------------------------ equivalences

/// Byte-for-byte.
pub(crate) fn same_exact(live: Option<&str>, want: &str) -> bool {
    live == Some(want)
}

/// Equal once PVE's surrounding blanks are trimmed.
pub(crate) fn same_trimmed(live: Option<&str>, want: &str) -> bool {
    live.map(str::trim) == Some(want)
}

/// A boolean key; absent (or unreadable) = `default`.
pub(crate) fn flag(live: Option<&str>, default: bool) -> bool {
    match live.map(parse_bool) {
        Some(Ok(b)) => b,
        _ => default,
    }
}

/// A boolean PVE defaults to off.
pub(crate) fn same_flag_off_by_default(live: Option<&str>, want: &str) -> bool {
    Ok(flag(live, false)) == parse_bool(want)
}

/// The same tag set under PVE's default `tag-style` (order, duplicates and
/// case do not matter).
pub(crate) fn same_tags(live: Option<&str>, want: &str) -> bool {
    same_tags_styled(live, want, false)
}

/// The same tag set as PVE stores it (pve-guest-common `GuestHelpers.pm`
/// `get_unique_tags`): sorted and de-duplicated, and lower-cased unless the
/// datacenter's `tag-style` is case-sensitive.
pub(crate) fn same_tags_styled(live: Option<&str>, want: &str, case_sensitive: bool) -> bool {
    // The same text reads as the same set: a converged guest's tags are
    // not parsed twice.
    if live == Some(want) {
        return true;
    }
    let stored = |s: &str| {
        proxops_model::wire::TagSet::parse(s)
            .ok()
            .map(|t| t.as_pve_stores(case_sensitive))
    };
    stored(live.unwrap_or("")) == stored(want)
}

/// A description: PVE adds or drops surrounding blank lines; absent = empty.
pub(crate) fn same_description(live: Option<&str>, want: &str) -> bool {
    live.unwrap_or("").trim() == want.trim()
}

/// The same set of DNS entries, in any order or separator.
pub(crate) fn same_dns_set(live: Option<&str>, want: &str) -> bool {
    use proxops_model::wire::DnsList;
    let set = |l: DnsList| {
        l.set()
            .into_iter()
            .map(str::to_owned)
            .collect::<std::collections::BTreeSet<_>>()
    };
    live.and_then(|l| DnsList::parse(l).ok()).map(set) == DnsList::parse(want).ok().map(set)
}

/// The desired value as it is.
pub(crate) fn write_desired(_live: Option<&str>, want: ParamValue) -> ParamValue {
    want
}

// ------------------------------------------------------------ desired values

/// A plain wire value.
pub(crate) fn plain(v: impl Into<String>) -> Option<ParamValue> {
    Some(ParamValue::Plain(v.into()))
}

/// A text field, trimmed; blank = not owned.
pub(crate) fn text(v: Option<&String>) -> Option<ParamValue> {
    v.map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .and_then(plain)
}

/// A boolean owned in both states.
pub(crate) fn either(v: Option<bool>) -> Option<ParamValue> {
    v.map(|b| ParamValue::Plain(proxops_model::wire::write_bool(b).into()))
}

#[cfg(test)]
mod tests {
    use super::KeyIndex;
    use proptest::prelude::*;

    fn indexes() -> [KeyIndex; 2] {
        [
            KeyIndex::of(crate::drift::qemu::KEYS),
            KeyIndex::of(crate::drift::lxc::KEYS),
        ]
    }

    #[test]
    fn the_known_answers_are_the_scans() {
        for index in indexes() {
            assert!(!index.known.is_empty());
            for (key, field) in &index.known {
                assert_eq!(*field, index.scan(key), "{key}");
            }
            // The keys past the known slots, and near misses, are scanned.
            for (pattern, _, _, _) in &index.patterns {
                for tail in ["31", "32", "255", "256", "", "x", "0x", "00", "01"] {
                    let key = format!("{pattern}{tail}");
                    assert_eq!(index.create_path(&key), index.scan(&key), "{key}");
                }
            }
        }
        let [qemu, lxc] = indexes();
        assert_eq!(qemu.create_path("memory"), Some("spec.memory"));
        assert_eq!(qemu.create_path("net0"), qemu.scan("net0"));
        assert!(qemu.create_path("net0").is_some());
        assert_eq!(lxc.create_path("mp40"), lxc.scan("mp40"));
    }

    proptest! {
        #[test]
        fn create_path_is_the_scan(key in "[a-z]{0,8}[0-9]{0,3}") {
            for index in indexes() {
                prop_assert_eq!(index.create_path(&key), index.scan(&key));
            }
        }
    }
}
