//! The PVE keys the owned-key tables write for a guest, by name: every
//! one is structural in `spec.extra`. Generated from the tables by
//! `core/translate/tests/schema_gen.rs` (`UPDATE=1` rewrites it; do not edit), so
//! the model needs no translation.

use super::GuestType;

/// The plain keys of the qemu owned-key table, sorted.
pub const QEMU: &[&str] = &[
    "acpi",
    "agent",
    "balloon",
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
