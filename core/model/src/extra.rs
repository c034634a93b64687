//! What `spec.extra` may pass to PVE: a bounded escape hatch for guest
//! settings ProxOps does not model, never a way around ProxOps' own rules.
//!
//! Every key `spec.extra` names is sent on every create and every drift
//! update, after the structured fields. Four classes of key are refused:
//!
//! - **API control parameters** (`delete`, `skiplock`, `digest`, …) and
//!   state PVE keeps for itself (`lock`, `vmstate`, …): they change what a
//!   request does, not what the guest is (`delete: scsi0` would detach a
//!   disk on every cycle). Never allowed.
//! - **Structural keys**: keys a structured field writes (`memory`,
//!   `netN`, `scsiN`, …). Two writers would fight over one key. Never
//!   allowed.
//! - **Keys PVE never reads back as written** (`vmgenid`, `password`, …):
//!   every cycle would see drift and write them again.
//! - **Host-level keys** (`hookscript`, `args`, raw `lxc.*`, `devN`,
//!   `usbN`, `unusedN`, …): they reach past the guest into the PVE node.
//!
//! - **Every other key** is refused too unless it is one ProxOps knows to
//!   stay inside the guest and read back as written (`VETTED_QEMU`,
//!   `VETTED_LXC`: `keyboard`, `balloon`, `timezone`, …): a key nobody
//!   vetted (`rng0`, `ivshmem`, `affinity`, …) is denied, not let through.
//!
//! The last three classes pass when the cluster's configuration lists the
//! exact key in `allow-extra-keys`. This module only classifies; it never
//! decides what PVE should do.

use std::collections::BTreeSet;

pub mod owned;

/// The kind of PVE guest a `spec.extra` belongs to.
pub use crate::names::GuestType;

/// Why a `spec.extra` key is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// An API control parameter or PVE-internal state: never allowed.
    Control(&'static str),
    /// Written by a structured field: never allowed.
    Structural,
    /// An LXC `mpN` whose source is a host path: a host bind mount, which
    /// `spec.bind-mounts` models (with its refused system roots).
    HostBindMount,
    /// PVE never reads the value back as written: allowed only by list.
    NeverEchoed(&'static str),
    /// Reaches into the PVE host: allowed only by list.
    HostLevel(&'static str),
    /// Not known to stay inside the guest and read back as written:
    /// allowed only by list.
    Unvetted,
}

impl Refusal {
    /// Whether `allow-extra-keys` can lift this refusal.
    pub fn allowable(self) -> bool {
        matches!(
            self,
            Refusal::NeverEchoed(_) | Refusal::HostLevel(_) | Refusal::Unvetted
        )
    }
}

/// The `allow-extra-keys` list of the cluster whose composition is being
/// validated, and where it is written (for the message).
#[derive(Debug, Clone, Copy)]
pub struct AllowList<'a> {
    pub keys: &'a BTreeSet<String>,
    /// The cluster's name.
    pub cluster: &'a str,
    /// The configuration file that declares the cluster.
    pub declared_in: &'a str,
    /// The cluster declares PVE's case-sensitive `tag-style`, so `validate`
    /// lets upper-case tags through.
    pub tag_case_sensitive: bool,
}

static NO_KEYS: BTreeSet<String> = BTreeSet::new();

impl AllowList<'static> {
    /// No cluster context (adoption checks a manifest on its own).
    pub fn none() -> AllowList<'static> {
        AllowList {
            keys: &NO_KEYS,
            cluster: "",
            declared_in: "",
            tag_case_sensitive: false,
        }
    }
}

impl AllowList<'_> {
    fn allows(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    /// Where to list a key, as an operator would write it.
    fn where_to_list(&self) -> String {
        if self.cluster.is_empty() {
            "the cluster's configuration lists it in allow-extra-keys".to_owned()
        } else {
            format!(
                "{} lists it in pve.clusters.{}.allow-extra-keys",
                self.declared_in, self.cluster
            )
        }
    }
}

/// Keys a VM's structured fields write that no row of the owned-key
/// tables owns (a collision would make two fields fight over one key).
/// Every key a row owns counts too (`owned::QEMU`, generated from the
/// table), so a key added there is refused here without a hand edit.
const QEMU_STRUCTURAL: &[&str] = &[
    "vmid",
    "cdrom",
    "efidisk0",
    "tpmstate0",
    "scsihw",
    "start",
    "template",
];
const QEMU_STRUCTURAL_PREFIXES: &[&str] = &[
    "scsi", "virtio", "sata", "ide", "net", "hostpci", "ipconfig",
];

const LXC_STRUCTURAL: &[&str] = &[
    "vmid",
    "ctid",
    "name",
    "ostemplate",
    "ostype",
    "nesting",
    "keyctl",
    "fuse",
    "start",
    "template",
];
const LXC_STRUCTURAL_PREFIXES: &[&str] = &["net", "mp"];

/// API control parameters of the config and create requests (qemu-server's
/// and pve-container's API schemas), and state PVE keeps for itself. The
/// text says what sending it on every write would do.
const CONTROL: &[(&str, &str)] = &[
    (
        "delete",
        "it removes the settings it names on every write (delete: scsi0 detaches the disk every cycle)",
    ),
    ("revert", "it discards pending changes on every write"),
    (
        "skiplock",
        "it overrides the guest's lock (a backup or migration in progress)",
    ),
    (
        "digest",
        "it pins every write to one config version, so later writes fail",
    ),
    (
        "force",
        "it forces volume removal on delete, or overwrites an existing guest on create",
    ),
    (
        "background_delay",
        "it changes how PVE answers the request, not the guest",
    ),
    ("node", "the node is the request's path, set by spec.node"),
    (
        "archive",
        "it restores the guest from a backup instead of creating it",
    ),
    ("restore", "it marks the create as a backup restore"),
    ("unique", "it belongs to a backup restore"),
    ("live-restore", "it belongs to a backup restore"),
    (
        "storage",
        "it is a create request's default storage, not a setting PVE stores",
    ),
    (
        "pool",
        "it is a create request's resource pool, not a setting PVE stores",
    ),
    (
        "bwlimit",
        "it is a request's I/O bandwidth limit, not a setting PVE stores",
    ),
    (
        "import-working-storage",
        "it is a create request's import scratch storage, not a setting PVE stores",
    ),
    (
        "ignore-unpack-errors",
        "it makes a container create ignore a damaged template",
    ),
    (
        "ha-managed",
        "it adds the guest to HA, which ProxOps does not manage",
    ),
    ("lock", "a lock set by hand blocks every later write"),
    ("parent", "it is snapshot state PVE keeps for itself"),
    ("snaptime", "it is snapshot state PVE keeps for itself"),
    ("vmstate", "it is hibernation state PVE keeps for itself"),
    ("runningmachine", "it is state PVE records for a running VM"),
    ("runningcpu", "it is state PVE records for a running VM"),
];

/// Keys whose written value PVE never reports back unchanged.
const QEMU_NEVER_ECHOED: &[(&str, &str)] = &[
    (
        "vmgenid",
        "\"1\" makes PVE generate a new generation id, and the config reports the generated UUID",
    ),
    (
        "smbios1",
        "PVE keeps the guest's generated uuid in it and may write its values base64-encoded",
    ),
];
const LXC_NEVER_ECHOED: &[(&str, &str)] = &[
    (
        "password",
        "the root password is set inside the container at create and never stored in its config",
    ),
    (
        "ssh-public-keys",
        "the keys are written into the container at create and never stored in its config",
    ),
];
/// A disk option PVE acts on once and replaces by the imported volume.
const IMPORT_FROM: &str =
    "import-from is a create-time disk option: PVE stores the imported volume, never the source";

const QEMU_HOST_LEVEL: &[(&str, &str)] = &[
    (
        "hookscript",
        "it runs a script from node storage as root on the PVE host at every start and stop",
    ),
    (
        "args",
        "it passes raw arguments to the QEMU process on the PVE host",
    ),
    (
        "rng0",
        "it feeds the guest from a host entropy source (/dev/hwrng, /dev/random)",
    ),
    ("ivshmem", "it maps host shared memory into the guest"),
    ("affinity", "it pins the guest's vCPUs to host CPUs"),
    ("hugepages", "it reserves host memory as huge pages"),
    (
        "keephugepages",
        "it keeps host huge pages reserved after the guest stops",
    ),
    (
        "cicustom",
        "it hands the guest cloud-init files from the node's snippets storage",
    ),
    ("amd-sev", "it asks the host CPU for memory encryption"),
    ("intel-tdx", "it asks the host CPU for a trust domain"),
    ("audio0", "it connects a host audio backend"),
];

/// Keys ProxOps knows to stay inside the guest and to read back as
/// written (qemu-server's config schema): everything else in a VM's
/// `spec.extra` needs `allow-extra-keys`. A key a row owns is refused as
/// structural first, whether listed here or not.
const VETTED_QEMU: &[&str] = &[
    "autostart",
    "balloon",
    "citype",
    "cpulimit",
    "cpuunits",
    "freeze",
    "keyboard",
    "kvm",
    "localtime",
    "migrate_downtime",
    "migrate_speed",
    "ostype",
    "reboot",
    "shares",
    "spice_enhancements",
    "startdate",
    "tdf",
    "vcpus",
    "watchdog",
];

/// The same for a container (pve-container's config schema).
const VETTED_LXC: &[&str] = &[
    "cmode", "cpulimit", "cpuunits", "debug", "ostype", "timezone", "tty",
];
const LXC_HOST_LEVEL: &[(&str, &str)] = &[(
    "hookscript",
    "it runs a script from node storage as root on the PVE host at every start and stop",
)];
const UNUSED: &str =
    "it names a volume detached from the guest; writing it attaches storage ProxOps does not track";

/// The keys of `guest`'s `spec.extra` no cluster may let through, by
/// name (structural keys, every key a structured field owns, API control
/// parameters), and the prefixes of the structural slot families.
pub fn never_allowed(guest: GuestType) -> (Vec<&'static str>, &'static [&'static str]) {
    let (structural, prefixes) = match guest {
        GuestType::Qemu => (QEMU_STRUCTURAL, QEMU_STRUCTURAL_PREFIXES),
        GuestType::Lxc => (LXC_STRUCTURAL, LXC_STRUCTURAL_PREFIXES),
    };
    let mut names: Vec<&'static str> = structural.to_vec();
    names.extend(owned::keys(guest));
    names.extend(CONTROL.iter().map(|(k, _)| *k));
    names.sort_unstable();
    names.dedup();
    (names, prefixes)
}

/// The keys of `guest`'s `spec.extra` refused as structural, by name
/// (sorted) and by prefix: what the docs list.
pub fn structural(guest: GuestType) -> (Vec<&'static str>, &'static [&'static str]) {
    let (structural, prefixes) = match guest {
        GuestType::Qemu => (QEMU_STRUCTURAL, QEMU_STRUCTURAL_PREFIXES),
        GuestType::Lxc => (LXC_STRUCTURAL, LXC_STRUCTURAL_PREFIXES),
    };
    let mut names: Vec<&'static str> = structural.to_vec();
    names.extend(
        owned::keys(guest)
            .iter()
            .filter(|k| !prefixes.iter().any(|p| k.starts_with(p))),
    );
    names.sort_unstable();
    names.dedup();
    (names, prefixes)
}

/// The keys `guest`'s `spec.extra` passes without `allow-extra-keys`: the
/// vetted ones no row owns (an owned key is structural).
pub fn vetted(guest: GuestType) -> Vec<&'static str> {
    let vetted = match guest {
        GuestType::Qemu => VETTED_QEMU,
        GuestType::Lxc => VETTED_LXC,
    };
    vetted
        .iter()
        .copied()
        .filter(|k| !owned::keys(guest).contains(k))
        .collect()
}

/// Classifies one `spec.extra` entry; `None` when it may pass as is.
pub fn refusal(guest: GuestType, key: &str, value: &str) -> Option<Refusal> {
    let (structural, prefixes) = match guest {
        GuestType::Qemu => (QEMU_STRUCTURAL, QEMU_STRUCTURAL_PREFIXES),
        GuestType::Lxc => (LXC_STRUCTURAL, LXC_STRUCTURAL_PREFIXES),
    };
    if guest == GuestType::Lxc && numbered(key, "mp") && value.trim_start().starts_with('/') {
        return Some(Refusal::HostBindMount);
    }
    if structural.contains(&key)
        || owned::keys(guest).contains(&key)
        || prefixes.iter().any(|p| key.starts_with(p))
    {
        return Some(Refusal::Structural);
    }
    if let Some((_, why)) = CONTROL.iter().find(|(k, _)| *k == key) {
        return Some(Refusal::Control(why));
    }
    let (never_echoed, host_level) = match guest {
        GuestType::Qemu => (QEMU_NEVER_ECHOED, QEMU_HOST_LEVEL),
        GuestType::Lxc => (LXC_NEVER_ECHOED, LXC_HOST_LEVEL),
    };
    if let Some((_, why)) = never_echoed.iter().find(|(k, _)| *k == key) {
        return Some(Refusal::NeverEchoed(why));
    }
    if key == "import-from"
        || value
            .split(',')
            .any(|t| t.trim().starts_with("import-from="))
    {
        return Some(Refusal::NeverEchoed(IMPORT_FROM));
    }
    if let Some((_, why)) = host_level.iter().find(|(k, _)| *k == key) {
        return Some(Refusal::HostLevel(why));
    }
    if numbered(key, "unused") {
        return Some(Refusal::HostLevel(UNUSED));
    }
    if guest == GuestType::Qemu && numbered(key, "numa") {
        return Some(Refusal::HostLevel(
            "it binds guest memory to host NUMA nodes",
        ));
    }
    match guest {
        GuestType::Qemu => {
            if numbered(key, "usb") {
                return Some(Refusal::HostLevel(
                    "it passes a host USB device through to the guest",
                ));
            }
            if numbered(key, "parallel") {
                return Some(Refusal::HostLevel(
                    "it passes a host parallel port through to the guest",
                ));
            }
            if numbered(key, "virtiofs") {
                return Some(Refusal::HostLevel(
                    "it shares a host directory with the guest",
                ));
            }
            if numbered(key, "serial") && value.trim_start().starts_with('/') {
                return Some(Refusal::HostLevel(
                    "it passes a host serial device through to the guest",
                ));
            }
        }
        GuestType::Lxc => {
            if numbered(key, "dev") {
                return Some(Refusal::HostLevel(
                    "it passes a host device node into the container",
                ));
            }
            if key == "lxc" || key.starts_with("lxc.") {
                return Some(Refusal::HostLevel(
                    "it is raw LXC configuration applied on the PVE host (lxc.mount.entry bind-mounts host paths past spec.bind-mounts' rules)",
                ));
            }
        }
    }
    let vetted = match guest {
        GuestType::Qemu => VETTED_QEMU,
        GuestType::Lxc => VETTED_LXC,
    };
    (!vetted.contains(&key)).then_some(Refusal::Unvetted)
}

/// The message for a refused key, or `None` when the allow list lifts it.
pub fn message(key: &str, refusal: Refusal, allow: &AllowList<'_>) -> Option<String> {
    let listed = allow.allows(key);
    let even_listed = if listed {
        format!(
            "; it stays refused although {} lists it in allow-extra-keys",
            if allow.declared_in.is_empty() {
                "the cluster's configuration"
            } else {
                allow.declared_in
            }
        )
    } else {
        String::new()
    };
    match refusal {
        Refusal::Control(why) => Some(format!(
            "key {key:?} is an API control parameter, not a guest setting: {why}{even_listed}"
        )),
        Refusal::Structural => Some(format!(
            "key {key:?} is written by a structured field; set that field instead of spec.extra{even_listed}"
        )),
        Refusal::HostBindMount => Some(format!(
            "key {key:?} is a host bind mount: declare it under spec.bind-mounts, which refuses system directories{even_listed}"
        )),
        _ if listed && refusal.allowable() => None,
        Refusal::NeverEchoed(why) => Some(format!(
            "key {key:?} never reads back as written ({why}), so every cycle would see drift and write it again; refused unless {}",
            allow.where_to_list()
        )),
        Refusal::HostLevel(why) => Some(format!(
            "key {key:?} is host-level: {why}; refused unless {}",
            allow.where_to_list()
        )),
        Refusal::Unvetted => Some(format!(
            "key {key:?} is not one ProxOps knows to stay inside the guest and read back as written; refused unless {}",
            allow.where_to_list()
        )),
    }
}

/// `prefix` followed by one or more digits (`dev0`, `usb12`).
fn numbered(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(guest: GuestType, key: &str, value: &str) -> Option<Refusal> {
        refusal(guest, key, value)
    }

    #[test]
    fn control_parameters_are_refused_for_both_kinds() {
        for key in [
            "delete",
            "skiplock",
            "digest",
            "force",
            "revert",
            "background_delay",
            "lock",
        ] {
            for guest in [GuestType::Qemu, GuestType::Lxc] {
                assert!(
                    matches!(class(guest, key, "x"), Some(Refusal::Control(_))),
                    "{key}"
                );
            }
        }
    }

    #[test]
    fn structural_keys_win_over_every_other_class() {
        assert_eq!(
            class(GuestType::Qemu, "memory", "1"),
            Some(Refusal::Structural)
        );
        assert_eq!(
            class(GuestType::Qemu, "scsi0", "x"),
            Some(Refusal::Structural)
        );
        assert_eq!(
            class(GuestType::Qemu, "hostpci0", "x"),
            Some(Refusal::Structural)
        );
        assert_eq!(
            class(GuestType::Lxc, "mp0", "local:8"),
            Some(Refusal::Structural)
        );
        assert_eq!(
            class(GuestType::Lxc, "mp1", "/srv/x,mp=/y"),
            Some(Refusal::HostBindMount)
        );
    }

    #[test]
    fn host_level_keys_depend_on_the_guest_type() {
        let host = |g, k, v| matches!(class(g, k, v), Some(Refusal::HostLevel(_)));
        assert!(host(GuestType::Qemu, "args", "-cpu host"));
        assert!(host(GuestType::Qemu, "usb0", "host=1-2"));
        assert!(host(GuestType::Qemu, "serial1", "/dev/ttyS0"));
        assert!(!host(GuestType::Qemu, "serial1", "socket"));
        assert!(host(GuestType::Lxc, "dev0", "/dev/ttyUSB0"));
        assert!(host(
            GuestType::Lxc,
            "lxc.mount.entry",
            "/srv x none bind 0 0"
        ));
        assert!(host(GuestType::Lxc, "unused0", "local:vm-1-disk-0"));
        assert!(!host(GuestType::Lxc, "device", "x"));
        assert_eq!(class(GuestType::Qemu, "keyboard", "de"), None);
        assert_eq!(class(GuestType::Lxc, "timezone", "host"), None);
    }

    #[test]
    fn the_allow_list_lifts_only_allowable_classes() {
        let keys: BTreeSet<String> = ["args", "delete"].iter().map(|s| s.to_string()).collect();
        let allow = AllowList {
            keys: &keys,
            cluster: "home",
            declared_in: "clusters/home/config.yaml",
            tag_case_sensitive: false,
        };
        let args = class(GuestType::Qemu, "args", "x");
        assert!(args.is_some_and(|r| message("args", r, &allow).is_none()));
        let delete = class(GuestType::Qemu, "delete", "scsi0");
        let text = delete
            .and_then(|r| message("delete", r, &allow))
            .unwrap_or_default();
        assert!(
            text.contains("stays refused although clusters/home/config.yaml"),
            "{text}"
        );
        let hook = class(GuestType::Qemu, "hookscript", "local:snippets/x");
        let text = hook
            .and_then(|r| message("hookscript", r, &allow))
            .unwrap_or_default();
        assert!(
            text.contains("pve.clusters.home.allow-extra-keys"),
            "{text}"
        );
    }
}
