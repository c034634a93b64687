//! The inverse of each owned key: a live value read back into the manifest
//! field it came from. Each row of the owned-key tables (`drift::qemu::KEYS`,
//! `drift::lxc::KEYS`) names its inverse here, and adoption folds the rows
//! backwards over one guest's `GuestCx`: the keys it consumed, its gaps and
//! what makes its manifest incomplete. Every value is chosen so the drift
//! of the result against the same config is empty, apart from the
//! ownership tag.
//!
//! Below drift in the layers: the rows name their inverses, and nothing
//! here reads a row.

pub(crate) mod lxc;
pub(crate) mod qemu;

use std::collections::{BTreeMap, BTreeSet};

use proxops_model::live::{LiveConfig, LiveGuest, LiveSnapshot};
use proxops_model::manifest;
use proxops_model::names::{Ref, ResourceName, StorageId};
use proxops_model::wire::{DnsList, Volid};

use crate::change::Gap;

/// What a gap value is replaced with for sensitive keys.
pub const REDACTED: &str = "<redacted>";

/// What every guest translation reads.
pub(crate) struct Shared<'a> {
    pub snapshot: &'a LiveSnapshot,
    /// ISO manifests by (storage, file name).
    pub isos: &'a BTreeMap<(StorageId, String), ResourceName>,
    /// SOPS key identity → the (smallest) name it is stored under.
    pub ssh_names: Option<BTreeMap<proxops_model::wire::SshKeyId, String>>,
}

/// An optional manifest section, created empty on first use (adoption
/// drops the sections that stay empty).
pub(crate) fn section<T: Default>(s: &mut Option<T>) -> &mut T {
    s.get_or_insert_with(Default::default)
}

/// One guest being adopted: which keys were consumed, its gaps and what
/// makes it incomplete.
pub(crate) struct GuestCx<'a> {
    pub shared: &'a Shared<'a>,
    pub guest: &'a LiveGuest,
    pub cfg: &'a LiveConfig,
    pub object: String,
    pub name: ResourceName,
    consumed: BTreeSet<String>,
    pub gaps: Vec<Gap>,
    pub incomplete: Vec<String>,
    pub annotations: BTreeMap<String, String>,
    pub cipassword: bool,
}

/// Keys PVE keeps for itself: never adopted, never a gap.
const BOOKKEEPING: &[&str] = &[
    "digest",
    "meta",
    "vmgenid",
    "smbios1",
    "uuid",
    "ostype",
    "ostemplate",
    "template",
    "lock",
    "parent",
    "snaptime",
    "vmstate",
    "runningmachine",
    "runningcpu",
    "pending",
];

/// Keys whose values never reach a report.
fn is_sensitive(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "sshkey",
        "password",
        "secret",
        "keyfile",
        "token",
        "cicustom",
        "ciupgrade",
    ]
    .iter()
    .any(|s| k.contains(s))
}

impl<'a> GuestCx<'a> {
    pub fn new(
        shared: &'a Shared<'a>,
        guest: &'a LiveGuest,
        cfg: &'a LiveConfig,
        r: &Ref,
    ) -> GuestCx<'a> {
        GuestCx {
            shared,
            guest,
            cfg,
            object: r.to_string(),
            name: r.name.clone(),
            consumed: BTreeSet::new(),
            gaps: Vec::new(),
            incomplete: Vec::new(),
            annotations: BTreeMap::new(),
            cipassword: false,
        }
    }

    /// The live value of `key`, marking it adopted.
    pub fn take(&mut self, key: &str) -> Option<&'a str> {
        let v = self.cfg.get(key)?;
        self.consumed.insert(key.to_owned());
        Some(v)
    }

    /// Every `<prefix>N` key with its value, in slot order, marked handled
    /// (each is adopted or reported by the caller).
    pub fn take_slots(&mut self, prefix: &str) -> Vec<(u32, String, String)> {
        let out: Vec<(u32, String, String)> = self
            .cfg
            .slots(prefix)
            .into_iter()
            .map(|(n, k, v)| (n, k.to_owned(), v.to_owned()))
            .collect();
        for (_, k, _) in &out {
            self.consumed.insert(k.clone());
        }
        out
    }

    /// A gap on `key`, with its live value (redacted when sensitive).
    pub fn gap(&mut self, key: &str, value: Option<&str>, note: impl Into<String>) {
        self.consumed.insert(key.to_owned());
        let value = value.map(|v| {
            if is_sensitive(key) {
                REDACTED.to_owned()
            } else {
                v.to_owned()
            }
        });
        self.gaps.push(Gap {
            object: self.object.clone(),
            node: self.guest.node.to_string(),
            id: self.guest.vmid.to_string(),
            key: key.to_owned(),
            value,
            note: note.into(),
        });
    }

    /// A gap for the tokens of `key` that the model does not hold.
    pub fn token_gap(&mut self, key: &str, tokens: &[proxops_model::wire::PropToken], note: &str) {
        if tokens.is_empty() {
            return;
        }
        let text = tokens
            .iter()
            .map(proxops_model::wire::PropToken::to_wire)
            .collect::<Vec<_>>()
            .join(",");
        self.gap(key, Some(&text), note.to_owned());
    }

    /// The size PVE's storage listing gives `volid` on this guest's node.
    pub fn listed_size(&self, volid: &Volid) -> Option<u64> {
        match self
            .shared
            .snapshot
            .storage_content(&self.guest.node, &volid.storage)
        {
            Some(Ok(c)) => {
                let wire = volid.to_wire();
                c.entries
                    .iter()
                    .find(|e| e.volid == wire)
                    .and_then(|e| e.size)
            }
            _ => None,
        }
    }

    /// The guest's PVE name under `key` (`name` for a VM, `hostname` for a
    /// container), as an override only when it differs from
    /// `metadata.name`; `missing` is the gap's note when PVE has none.
    pub fn name_override(&mut self, key: &str, missing: String) -> Option<String> {
        match self.take(key) {
            Some(n) if n != self.name.as_str() => Some(n.to_owned()),
            Some(_) => None,
            None => {
                self.gap(key, None, missing);
                None
            }
        }
    }

    /// `nameserver` as a list of IP addresses; anything else is a gap.
    pub fn nameservers(&mut self) -> Option<Vec<String>> {
        let ns = self.take("nameserver")?;
        match DnsList::parse(ns) {
            Ok(l)
                if !l.entries.is_empty()
                    && l.entries
                        .iter()
                        .all(|e| e.parse::<core::net::IpAddr>().is_ok()) =>
            {
                Some(l.entries)
            }
            _ => {
                self.gap(
                    "nameserver",
                    Some(ns),
                    "not a list of IP addresses: left to PVE",
                );
                None
            }
        }
    }

    /// `startup` as PVE holds it; blank is a gap.
    pub fn startup(&mut self) -> Option<String> {
        let s = self.take("startup")?;
        if s.trim().is_empty() {
            self.gap("startup", Some(s), "empty: not adopted");
            None
        } else {
            Some(s.to_owned())
        }
    }

    /// Live tags without the ownership tags, lower-cased as PVE's default
    /// tag style stores them; `proxops-noprune` becomes the
    /// `proxops/prune: disabled` annotation that writes it back.
    pub fn tags(&mut self) -> Vec<String> {
        let Some(raw) = self.take("tags") else {
            return Vec::new();
        };
        let mut out = Vec::new();
        match proxops_model::wire::TagSet::parse(raw) {
            Ok(set) => {
                for t in set.iter() {
                    let t = t.as_str();
                    if t.eq_ignore_ascii_case(manifest::OWNERSHIP_TAG) {
                        continue;
                    }
                    if t.eq_ignore_ascii_case(manifest::NO_PRUNE_TAG) {
                        self.annotations
                            .insert(manifest::ANNOTATION_PRUNE.into(), "disabled".into());
                        continue;
                    }
                    // As PVE's default tag style stores them (pve-guest-common
                    // `GuestHelpers.pm` `get_unique_tags`): lower case, once.
                    let t = t.to_ascii_lowercase();
                    if !out.contains(&t) {
                        out.push(t);
                    }
                }
                out.sort();
            }
            Err(e) => self.gap(
                "tags",
                Some(raw),
                format!("unreadable tags ({e}): not adopted"),
            ),
        }
        out
    }

    /// Every live key neither adopted nor bookkeeping becomes a gap.
    pub fn finish(&mut self) {
        let rest: Vec<(String, String)> = self
            .cfg
            .values
            .iter()
            .filter(|(k, _)| !self.consumed.contains(*k) && !BOOKKEEPING.contains(k))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        for (k, v) in rest {
            if is_default_value(&k, &v) {
                continue;
            }
            let note = key_note(&k);
            self.gap(&k, Some(&v), note);
        }
    }
}

/// True when a key holds PVE's own default (adoption emits no defaults,
/// so such a key is no gap).
fn is_default_value(key: &str, value: &str) -> bool {
    matches!(
        (key, value.trim()),
        ("cpulimit", "0") | ("cpuunits", "1024" | "100")
    )
}

pub(crate) fn key_note(key: &str) -> String {
    let digits = |p: &str| {
        key.strip_prefix(p)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let n = match key {
        "args" => "raw QEMU arguments are not modelled; PVE keeps them",
        "kvm" => "the hardware-virtualisation switch is not modelled; PVE keeps it",
        "cpulimit" | "cpuunits" => {
            "CPU limit and weight are not modelled (cpu.units is never sent); PVE keeps them"
        }
        "cmode" | "tty" | "ttys" => {
            "the console mode and tty count are not modelled; PVE keeps them"
        }
        "lxc" => "raw lxc.* lines are not modelled; PVE keeps them",
        "cicustom" => "custom cloud-init snippets are never adopted; PVE keeps them",
        "ciupgrade" => "the cloud-init upgrade switch is never adopted; PVE keeps it",
        "cipassword" => {
            "the cloud-init password is never adopted (PVE reports only a mask); reference a SOPS password with ci-password-ref to own it"
        }
        "citype" => "the cloud-init format is not modelled; PVE keeps it",
        "hookscript" => "hook scripts are not modelled; PVE keeps them",
        "features" => {
            "container features other than nesting, keyctl and fuse are not modelled; PVE keeps them"
        }
        "template" => "the template flag is owned by the kind",
        _ if digits("unused") => {
            "a detached volume: not modelled, PVE keeps it; delete it by hand when unneeded"
        }
        _ if digits("usb") => "USB passthrough is not modelled; PVE keeps it",
        _ if digits("serial") || digits("parallel") => {
            "only serial0 is modelled; PVE keeps this port"
        }
        _ => "not modelled by ProxOps; PVE keeps it",
    };
    n.to_owned()
}
