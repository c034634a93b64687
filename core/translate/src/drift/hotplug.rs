//! Which changes PVE applies to a running guest at once, and which it keeps
//! pending until the guest restarts: the impact of each change, decided
//! from the guest's own `hotplug` and `numa` values as PVE decides it.
//!
//! A scalar row decides its own impact (`codec::ImpactRule`: `memory`
//! live with `memory` hotplug and NUMA, `tablet` with `usb` hotplug,
//! `hotplug` itself unless its old or new value names `memory` or `cpu`).
//! This module lowers
//! the impact of the slot families and of `spec.extra` keys to `Live` where
//! PVE hot-applies the change:
//!
//! - qemu (qemu-server `QemuServer.pm` `vmconfig_hotplug_pending`,
//!   `vmconfig_update_net`, `vmconfig_update_disk`): a NIC's bridge, tag,
//!   trunks, firewall, rate, link_down always; any other NIC change, a new
//!   NIC or a removed one with `network` hotplug; a CD-ROM medium always
//!   (`change_medium`); a new scsi/virtio disk with `disk` hotplug
//!   (ide/sata stay pending); `vcpus` (a `spec.extra` key) with `cpu`
//!   hotplug (`qemu_cpu_hotplug`). `cores` is not in that list: a changed
//!   core count always waits for a restart.
//! - LXC (pve-container `LXC/Config.pm` `vmconfig_hotplug_pending`, `LXC.pm`
//!   `update_net`): `netN`, a new `mpN` (the cgroup limits `cores`,
//!   `memory`, `swap` are `Live` in the table).
//!
//! `hotplug` and `numa` are read as the running guest has them (their
//! current value, not a pending one). This module does no I/O.

use std::collections::{BTreeMap, BTreeSet};

use crate::change::Impact;
use proxops_model::live::{GuestType, LiveConfig};
use proxops_model::wire::{PropToken, PropertyString};

/// What a running guest can take live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hotplug {
    guest_type: GuestType,
    /// `hotplug` as a set (`network`, `disk`, `usb`, `memory`, `cpu`, …);
    /// `None` for PVE's default (`1`, or no key), `DEFAULT_FEATURES`.
    features: Option<BTreeSet<String>>,
    numa: bool,
}

/// NIC options qemu-server changes on a running VM even with hotplug off
/// (`vmconfig_update_net`: bridge, tag, firewall, rate, trunks, link_down
/// are re-applied to the tap device).
const NIC_LIVE_OPTIONS: &[&str] = &["bridge", "tag", "trunks", "firewall", "rate", "link_down"];

impl Hotplug {
    /// From the guest's config as it runs now.
    pub(crate) fn of(guest_type: GuestType, cfg: &LiveConfig) -> Hotplug {
        Hotplug {
            guest_type,
            features: match cfg.current("hotplug") {
                None => None,
                Some(v) if v.trim() == "1" => None,
                v => Some(super::qemu::hotplug_set(v)),
            },
            numa: cfg
                .current("numa")
                .is_some_and(|n| proxops_model::wire::parse_bool(n).unwrap_or(false)),
        }
    }

    /// Whether the guest's `hotplug` has `feature`.
    pub(crate) fn has(&self, feature: &str) -> bool {
        match &self.features {
            None => super::qemu::DEFAULT_HOTPLUG.contains(&feature),
            Some(set) => set.contains(feature),
        }
    }

    /// Whether the guest runs with NUMA on.
    pub(crate) fn numa(&self) -> bool {
        self.numa
    }

    /// The impact of changing `key` from `from` to `to` (`None`: absent)
    /// on the running guest; `table` is what it costs when not live.
    pub(crate) fn impact(
        &self,
        key: &str,
        from: Option<&str>,
        to: Option<&str>,
        table: Impact,
    ) -> Impact {
        if table == Impact::Live || self.is_live(key, from, to) {
            Impact::Live
        } else {
            table
        }
    }

    fn is_live(&self, key: &str, from: Option<&str>, to: Option<&str>) -> bool {
        match self.guest_type {
            GuestType::Qemu => self.qemu_live(key, from, to),
            GuestType::Lxc => lxc_live(key, from),
        }
    }

    fn qemu_live(&self, key: &str, from: Option<&str>, to: Option<&str>) -> bool {
        let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
        let slot = family.len() < key.len();
        match (family, slot) {
            // Only `vcpus` is hot-plugged; `cores` falls through to pending.
            ("vcpus", false) => self.has("cpu"),
            ("net", true) => match (from, to) {
                (Some(old), Some(new)) => {
                    changed_options(old, new)
                        .iter()
                        .all(|o| NIC_LIVE_OPTIONS.contains(&o.as_str()))
                        || self.has("network")
                }
                _ => self.has("network"),
            },
            ("ide" | "sata" | "scsi" | "virtio", true) => match (from, to) {
                (Some(old), Some(new)) => is_cdrom(old) && is_cdrom(new),
                (None, Some(new)) => {
                    matches!(family, "scsi" | "virtio") && !is_cdrom(new) && self.has("disk")
                }
                _ => false,
            },
            _ => false,
        }
    }
}

/// pve-container `vmconfig_hotplug_pending`: cgroup limits and NICs are
/// changed on the running container; a mount point only when it is new
/// (an existing one, `features`, DNS and the rest wait for a restart).
fn lxc_live(key: &str, from: Option<&str>) -> bool {
    let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
    let slot = family.len() < key.len();
    match (family, slot) {
        ("net", true) => true,
        ("mp", true) => from.is_none(),
        _ => false,
    }
}

/// `media=cdrom` (or the `none`/`cdrom` volume of an empty CD drive).
fn is_cdrom(v: &str) -> bool {
    options(v).get("media").is_some_and(|m| m == "cdrom")
}

/// A property string as option → value; a leading positional value is
/// under `""`.
fn options(v: &str) -> BTreeMap<String, String> {
    let Ok(p) = PropertyString::parse(v) else {
        return BTreeMap::new();
    };
    p.into_tokens()
        .into_iter()
        .map(|t| match t {
            PropToken::Positional(v) => (String::new(), v),
            PropToken::Pair { key, value } => (key, value),
        })
        .collect()
}

/// The options whose values differ between two property strings (a MAC
/// in either case is the same address).
fn changed_options(old: &str, new: &str) -> Vec<String> {
    let (a, b) = (options(old), options(new));
    let same = |x: Option<&String>, y: Option<&String>| match (x, y) {
        (Some(x), Some(y)) => x.eq_ignore_ascii_case(y) && (x == y || x.contains(':')),
        (x, y) => x == y,
    };
    a.keys()
        .chain(b.keys())
        .filter(|k| !same(a.get(*k), b.get(*k)))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}
