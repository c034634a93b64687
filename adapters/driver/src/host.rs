//! What identifies the machine this process runs on, read once at
//! start-up: the MAC address of every network interface
//! (`/sys/class/net/*/address`, without `lo` and all-zero addresses) and,
//! in a VM, the SMBIOS system UUID (`/sys/class/dmi/id/product_uuid`, which
//! PVE sets from the guest's `smbios1: uuid=`). The planner is handed it
//! so it never stops, restarts or prunes the guest ProxOps runs in.
//!
//! `self:` in the host's configuration (the `--config` file, never the
//! repository's `proxops.yaml`) replaces detection, for a host where
//! `/sys` does not tell (the UUID file is readable by root only, and a
//! container has none).
//!
//! Must never: fail a command because something is unreadable — an
//! identity that cannot be read is left out, and said once.

use std::path::Path;
use std::sync::Mutex;

use proxops_core::config::Config;
use proxops_core::host::HostIdentity;

/// Told the identity read from `/sys` when it differs from the last one
/// read: its MAC addresses (comma-separated) and SMBIOS UUID (or empty).
pub type OnChange = fn(macs: &str, smbios_uuid: &str);

/// The host's identity: `self:` when the host's configuration sets it,
/// else what `/sys` says, read again every time it is asked (every cycle:
/// an interface can come or change its MAC), told to `on_change` when it
/// changes.
pub fn identity(cfg: &Config, on_change: OnChange) -> HostIdentity {
    if let Some(configured) = &cfg.host {
        return configured.clone();
    }
    static LAST: Mutex<Option<HostIdentity>> = Mutex::new(None);
    let found = detect(Path::new("/sys"));
    if let Ok(mut last) = LAST.lock()
        && last.as_ref() != Some(&found)
    {
        let macs = found.macs().join(",");
        on_change(&macs, found.smbios_uuid().unwrap_or(""));
        *last = Some(found.clone());
    }
    found
}

/// Reads the identity below `sys` (normally `/sys`).
fn detect(sys: &Path) -> HostIdentity {
    let mut macs = Vec::new();
    if let Ok(entries) = std::fs::read_dir(sys.join("class/net")) {
        for e in entries.flatten() {
            if e.file_name() == "lo" {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(e.path().join("address")) {
                let mac = text.trim().to_owned();
                // A tunnel or a bond slave may show anything but a MAC;
                // such an interface identifies nothing.
                if HostIdentity::new([mac.as_str()], None).is_ok() {
                    macs.push(mac);
                }
            }
        }
    }
    let uuid = std::fs::read_to_string(sys.join("class/dmi/id/product_uuid"))
        .ok()
        .map(|u| u.trim().to_owned())
        .filter(|u| HostIdentity::new(None, Some(u)).is_ok());
    HostIdentity::new(macs.iter().map(String::as_str), uuid.as_deref()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn interfaces_and_the_smbios_uuid_are_read_without_lo_and_zero_macs() {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path();
        write(sys, "class/net/lo/address", "00:00:00:00:00:00\n");
        write(sys, "class/net/eth0/address", "BC:24:11:4E:8F:D1\n");
        write(sys, "class/net/dummy0/address", "00:00:00:00:00:00\n");
        write(sys, "class/net/tun0/address", "\n");
        write(
            sys,
            "class/dmi/id/product_uuid",
            "3F1D0C2E-5B7A-4C1E-9D2F-0A1B2C3D4E5F\n",
        );
        let id = detect(sys);
        assert_eq!(id.macs(), vec!["bc:24:11:4e:8f:d1"]);
        assert_eq!(
            id.smbios_uuid(),
            Some("3f1d0c2e-5b7a-4c1e-9d2f-0a1b2c3d4e5f")
        );
    }

    #[test]
    fn an_unreadable_sys_gives_an_empty_identity() {
        let dir = tempfile::tempdir().unwrap();
        assert!(detect(&dir.path().join("absent")).is_empty());
    }
}
