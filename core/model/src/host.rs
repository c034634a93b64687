//! The machine ProxOps runs on, as data: its network interfaces' MAC
//! addresses and, in a VM, its SMBIOS system UUID, and which live guest
//! shows one of them (the *self guest*). What the planner does about the
//! self guest is core's (`host::guard`).
//!
//! Must never: read the identity itself. The caller learns it and hands it
//! in; this module only compares it with what PVE reported.

use std::collections::BTreeSet;

use crate::live::{GuestType, LiveGuest};
use crate::wire::MacAddr;

/// What identifies the host this process runs on. Empty (the default)
/// matches no guest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostIdentity {
    macs: BTreeSet<[u8; 6]>,
    /// Lower-case, as `8-4-4-4-12` hex digits.
    smbios_uuid: Option<String>,
}

/// Why a text is not a MAC address or an SMBIOS UUID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct IdentityError(pub String);

impl HostIdentity {
    /// From MAC addresses (either case, `aa:bb:cc:dd:ee:ff`) and an SMBIOS
    /// UUID as the kernel or PVE spells it. All-zero MACs (no address, as
    /// `lo` shows) identify nothing and are left out.
    pub fn new<'a>(
        macs: impl IntoIterator<Item = &'a str>,
        smbios_uuid: Option<&str>,
    ) -> Result<HostIdentity, IdentityError> {
        let mut out = HostIdentity::default();
        for m in macs {
            let mac = MacAddr::parse(m).map_err(|_| {
                IdentityError(format!(
                    "{m:?} is not a MAC address: write six hex pairs, e.g. bc:24:11:4e:8f:d1"
                ))
            })?;
            if mac.octets() != [0; 6] {
                out.macs.insert(mac.octets());
            }
        }
        if let Some(u) = smbios_uuid {
            out.smbios_uuid = Some(parse_uuid(u).ok_or_else(|| {
                IdentityError(format!(
                    "{u:?} is not an SMBIOS UUID: write 8-4-4-4-12 hex digits, e.g. 3f1d0c2e-5b7a-4c1e-9d2f-0a1b2c3d4e5f"
                ))
            })?);
        }
        Ok(out)
    }

    /// Nothing is known about the host: no guest is the self guest.
    pub fn is_empty(&self) -> bool {
        self.macs.is_empty() && self.smbios_uuid.is_none()
    }

    /// The MACs, lower-case, sorted.
    pub fn macs(&self) -> Vec<String> {
        self.macs.iter().map(|o| format_mac(*o)).collect()
    }

    pub fn smbios_uuid(&self) -> Option<&str> {
        self.smbios_uuid.as_deref()
    }

    /// What makes `guest` the self guest, if anything: a NIC MAC (qemu
    /// `netN: <model>=<mac>` or `macaddr=`, LXC `netN: hwaddr=`, compared
    /// ignoring case) or, for a VM, `smbios1: uuid=`. A guest whose config
    /// could not be read matches nothing (it is not planned for anyway).
    pub fn matches(&self, guest: &LiveGuest) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let config = guest.config.as_ref().ok()?;
        for (_, key, value) in config.slots("net") {
            if let Some(mac) = value
                .split(',')
                .filter_map(|token| MacAddr::parse(token.rsplit('=').next()?).ok())
                .find(|m| self.macs.contains(&m.octets()))
            {
                return Some(format!("{key} MAC {}", format_mac(mac.octets())));
            }
        }
        if guest.guest_type == GuestType::Qemu
            && let Some(want) = &self.smbios_uuid
            && let Some(uuid) = config.get("smbios1").and_then(|s| {
                s.split(',')
                    .find_map(|t| t.trim().strip_prefix("uuid="))
                    .and_then(parse_uuid)
            })
            && &uuid == want
        {
            return Some(format!("smbios1 uuid {uuid}"));
        }
        None
    }
}

fn format_mac(o: [u8; 6]) -> String {
    o.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `8-4-4-4-12` hex digits, lower-cased; `None` for anything else.
fn parse_uuid(text: &str) -> Option<String> {
    let t = text.trim();
    let groups: Vec<&str> = t.split('-').collect();
    let shape = [8, 4, 4, 4, 12];
    (groups.len() == shape.len()
        && groups
            .iter()
            .zip(shape)
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit())))
    .then(|| t.to_ascii_lowercase())
}
