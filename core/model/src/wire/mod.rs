//! PVE property-string grammar: parse and format the typed values ProxOps
//! reads from and writes to a guest's `/config`.
//!
//! Every type here has `parse(&str) -> Result<Self, WireError>` and a
//! `to_wire()` (also its `Display`) such that `parse(to_wire(parse(x)))`
//! equals `parse(x)`: formatting keeps PVE's meaning. Tokens a type does not
//! model are kept verbatim, in their order, so a live value rewritten by
//! drift still carries the PVE-owned tokens it did not touch.
//!
//! Values ProxOps writes are always in PVE's canonical spelling: booleans as
//! `1`/`0` (PVE 9.2 rejects `start=true` [PROBE]), MACs and PCI addresses
//! lower-cased, tags `;`-joined and sorted, `sshkeys` percent-encoded.
//!
//! **Architecture Invariant:** this module only converts text. It knows no
//! manifest, takes no decision about drift, and does no I/O.

// Each translation stays short enough to read whole (core/clippy.toml).
#![warn(clippy::too_many_lines)]

mod cloudinit;
mod json;
mod lxc;
mod propstr;
mod qemu;
mod scalar;
mod tags;

pub use cloudinit::{SshKey, SshKeyId, SshKeys, percent_decode, percent_encode};
pub use json::{encode_segment, json_template_flag, json_text, json_to_text, json_vmid};
pub use lxc::{LxcBindMount, LxcFeatures, LxcMount, LxcNet, LxcVolumeMount};
pub use propstr::{PropToken, PropertyString};
pub use qemu::{
    Aio, Bdf, Discard, Drive, DriveVolume, EfiDisk, HostPci, MacAddr, Media, PciDevice, QemuNet,
    TpmState, TpmVersion, Volid,
};
pub use scalar::{Agent, Boot, Bytes, DnsList, parse_bool, parse_memory_mib, write_bool};
pub use tags::{Tag, TagSet, join_tags};

/// Why a PVE value could not be read (or a value could not be written).
/// The text names the key and what PVE's grammar expects there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The value (or one token of it) is not in the grammar.
    #[error("{key}: invalid value {value:?}: expected {expected}")]
    Invalid {
        key: String,
        value: String,
        expected: String,
    },
    /// A token the grammar requires is absent.
    #[error("{key}: missing {token} in {value:?}")]
    Missing {
        key: String,
        token: String,
        value: String,
    },
}

impl WireError {
    pub(crate) fn invalid(key: &str, value: &str, expected: &str) -> WireError {
        WireError::Invalid {
            key: key.to_owned(),
            value: value.to_owned(),
            expected: expected.to_owned(),
        }
    }

    pub(crate) fn missing(key: &str, token: &str, value: &str) -> WireError {
        WireError::Missing {
            key: key.to_owned(),
            token: token.to_owned(),
            value: value.to_owned(),
        }
    }

    /// The same error, reported against the config key it was read from
    /// (`net0` instead of the grammar's generic `netN`).
    pub fn for_key(self, key: &str) -> WireError {
        match self {
            WireError::Invalid {
                value, expected, ..
            } => WireError::Invalid {
                key: key.to_owned(),
                value,
                expected,
            },
            WireError::Missing { token, value, .. } => WireError::Missing {
                key: key.to_owned(),
                token,
                value,
            },
        }
    }

    /// The key this error is reported against.
    pub fn key(&self) -> &str {
        match self {
            WireError::Invalid { key, .. } | WireError::Missing { key, .. } => key,
        }
    }
}

/// A value with a PVE wire form. Lets `LiveConfig` offer one typed accessor
/// for every grammar in this module.
pub trait WireValue: Sized {
    fn parse_wire(s: &str) -> Result<Self, WireError>;
    fn to_wire(&self) -> String;
}

macro_rules! wire_value {
    ($($t:ty),* $(,)?) => {$(
        impl WireValue for $t {
            fn parse_wire(s: &str) -> Result<Self, WireError> {
                <$t>::parse(s)
            }
            fn to_wire(&self) -> String {
                <$t>::to_wire(self)
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&<$t>::to_wire(self))
            }
        }
    )*};
}

wire_value!(
    PropertyString,
    QemuNet,
    Drive,
    EfiDisk,
    TpmState,
    HostPci,
    LxcNet,
    LxcMount,
    LxcVolumeMount,
    LxcFeatures,
    SshKeys,
    TagSet,
    Bytes,
    Agent,
    Boot,
    DnsList,
    Volid,
    MacAddr,
    Bdf,
);
