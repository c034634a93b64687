//! The PVE keys the owned-key tables write for a guest, by name: every
//! one is structural in `spec.extra`. A copy of the tables' plain keys
//! (a family's listing such as `netN` is not a key), kept here so the
//! model needs no translation; `core/tests/extra_keys.rs` fails when it
//! differs from the tables.

use super::GuestType;

/// The plain keys of the qemu owned-key table, sorted.
pub const QEMU: &[&str] = &[
    "acpi",
    "agent",
    "bios",
    "boot",
    "cipassword",
    "ciuser",
    "cores",
    "cpu",
    "cpulimit",
    "description",
    "hostpciN",
    "hotplug",
    "ipconfigN",
    "machine",
    "memory",
    "name",
    "nameserver",
    "netN",
    "numa",
    "onboot",
    "protection",
    "searchdomain",
    "serial0",
    "sockets",
    "sshkeys",
    "startup",
    "tablet",
    "tags",
    "vga",
];

/// The plain keys of the LXC owned-key table, sorted.
pub const LXC: &[&str] = &[
    "arch",
    "console",
    "cores",
    "description",
    "features",
    "hostname",
    "memory",
    "mpN",
    "nameserver",
    "netN",
    "onboot",
    "protection",
    "rootfs",
    "searchdomain",
    "startup",
    "swap",
    "tags",
    "unprivileged",
];

/// The owned keys of `guest`'s table.
pub fn keys(guest: GuestType) -> &'static [&'static str] {
    match guest {
        GuestType::Qemu => QEMU,
        GuestType::Lxc => LXC,
    }
}
