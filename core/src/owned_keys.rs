//! Generated from the owned-key tables by `core/tests/schema_gen.rs`
//! (`UPDATE=1` rewrites it); do not edit. The PVE keys a guest kind's
//! rows own, which `spec.extra` refuses as structural.

/// The keys a VM's rows own.
pub(crate) const QEMU: &[&str] = &[
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

/// The keys a container's rows own.
pub(crate) const LXC: &[&str] = &[
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
