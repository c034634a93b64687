//! qemu config values: `netN`, drives (`scsiN`/`virtioN`/`sataN`/`ideN`),
//! `efidisk0`, `tpmstate0`, `hostpciN`, and the volume ids inside them.

use super::WireError;
use super::propstr::{self, PropToken, PropertyString, Token, join_tokens, owned_pairs};
use super::scalar::{Bytes, parse_bool, write_bool};
use crate::names::StorageId;

/// A PVE volume id `<storage>:<volname>` (`local-lvm:vm-107-disk-0`,
/// `local:iso/debian.iso`, `VMStorage:100/vm-100-disk-0.qcow2`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Volid {
    pub storage: StorageId,
    pub volname: String,
}

impl Volid {
    pub fn parse(s: &str) -> Result<Volid, WireError> {
        let bad = || WireError::invalid("volume", s, "<storage>:<volume name>");
        let (storage, volname) = s.split_once(':').ok_or_else(bad)?;
        if volname.is_empty() || volname.contains(',') {
            return Err(bad());
        }
        let storage = StorageId::new(storage).map_err(|_| bad())?;
        Ok(Volid {
            storage,
            volname: volname.to_owned(),
        })
    }

    /// [`Volid::parse`] of `s` = `<storage>:<volname>` whose storage id
    /// the caller has read already: the same checks of the volume name,
    /// the same error.
    fn with_storage(s: &str, storage: StorageId, volname: &str) -> Result<Volid, WireError> {
        if volname.is_empty() || volname.contains(',') {
            return Err(WireError::invalid("volume", s, "<storage>:<volume name>"));
        }
        Ok(Volid {
            storage,
            volname: volname.to_owned(),
        })
    }

    /// `<storage>:<content>/<filename>`, e.g. an ISO's volume id.
    pub fn for_file(storage: StorageId, content: &str, filename: &str) -> Volid {
        Volid {
            storage,
            volname: format!("{content}/{filename}"),
        }
    }

    /// The file name of a volume id per the extraction rule: what follows
    /// `:<content>/`; otherwise the last path component; otherwise the
    /// whole volume id.
    pub fn file_name_of<'a>(volid: &'a str, content: &str) -> &'a str {
        if let Some((_, rest)) = volid.split_once(':') {
            if let Some(f) = rest.strip_prefix(content).and_then(|r| r.strip_prefix('/'))
                && !f.is_empty()
            {
                return f;
            }
            if let Some((_, last)) = rest.rsplit_once('/')
                && !last.is_empty()
            {
                return last;
            }
            if !rest.is_empty() {
                return rest;
            }
        }
        volid
    }

    pub fn to_wire(&self) -> String {
        propstr::concat(&[self.storage.as_str(), ":", &self.volname])
    }
}

/// A MAC address, read in either case and written as it was spelled. Two
/// spellings of one address are equal: PVE generates upper-case MACs
/// (pve-common `Tools.pm` `random_ether_addr`) and compares the text when
/// a NIC is updated, so a container's veth is re-created when the spelling
/// alone changes (pve-container `LXC.pm` `update_net`); a write therefore
/// keeps the live spelling of an unchanged address.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(into = "String")]
pub struct MacAddr {
    octets: [u8; 6],
    spelling: String,
}

/// Two characters of a MAC address as `u8::from_str_radix(_, 16)` reads
/// them: two hex digits, or a `+` sign and one.
fn hex_octet(hi: u8, lo: u8) -> Option<u8> {
    let digit = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    if hi == b'+' {
        return digit(lo);
    }
    Some(digit(hi)? * 16 + digit(lo)?)
}

impl MacAddr {
    pub fn parse(s: &str) -> Result<MacAddr, WireError> {
        let bad = || WireError::invalid("mac", s, "a MAC address like bc:24:11:4e:8f:d1");
        // Six two-character parts between five colons: 17 bytes, read in
        // place (every NIC of every guest is parsed each cycle).
        let spelling = propstr::trimmed(s);
        let b = spelling.as_bytes();
        if b.len() != 17 {
            return Err(bad());
        }
        let mut out = [0u8; 6];
        for (i, o) in out.iter_mut().enumerate() {
            if i > 0 && b[3 * i - 1] != b':' {
                return Err(bad());
            }
            *o = hex_octet(b[3 * i], b[3 * i + 1]).ok_or_else(bad)?;
        }
        Ok(MacAddr {
            octets: out,
            spelling: spelling.to_owned(),
        })
    }

    pub fn octets(&self) -> [u8; 6] {
        self.octets
    }

    /// The address as it was spelled (PVE's spelling for a live one).
    pub fn to_wire(&self) -> String {
        self.spelling.clone()
    }
}

impl From<MacAddr> for String {
    fn from(m: MacAddr) -> String {
        m.spelling
    }
}

impl PartialEq for MacAddr {
    fn eq(&self, other: &MacAddr) -> bool {
        self.octets == other.octets
    }
}

impl Eq for MacAddr {}

impl std::hash::Hash for MacAddr {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.octets.hash(state);
    }
}

impl PartialOrd for MacAddr {
    fn partial_cmp(&self, other: &MacAddr) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MacAddr {
    fn cmp(&self, other: &MacAddr) -> std::cmp::Ordering {
        self.octets.cmp(&other.octets)
    }
}

/// The volume part (first token) of a drive, EFI disk, TPM state, LXC
/// rootfs or allocated mount point.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum DriveVolume {
    /// `none`: an empty CD drive.
    None,
    /// Create form `<pool>:<GiB>` ("allocate a new volume"); also the
    /// `<pool>:0` of an image import.
    Create { storage: StorageId, size: Bytes },
    /// Cloud-init create form `<pool>:cloudinit`.
    CloudInitCreate { storage: StorageId },
    /// An existing volume (live form, ISO, cloud-init volume).
    Volume(Volid),
    /// Anything else (`cdrom`, a device path), kept verbatim.
    Other(String),
}

impl DriveVolume {
    pub fn parse(s: &str) -> Result<DriveVolume, WireError> {
        let t = propstr::trimmed(s);
        if t == "none" {
            return Ok(DriveVolume::None);
        }
        if t.is_empty() {
            return Err(WireError::invalid(
                "volume",
                s,
                "a volume, <pool>:<GiB> or none",
            ));
        }
        let Some((storage, rest)) = t.split_once(':') else {
            return Ok(DriveVolume::Other(t.to_owned()));
        };
        if t.starts_with('/') {
            return Ok(DriveVolume::Other(t.to_owned()));
        }
        let sid = StorageId::new(storage).map_err(|_| {
            WireError::invalid("volume", s, "<storage>:<volume> with a valid storage id")
        })?;
        if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return Ok(DriveVolume::Create {
                storage: sid,
                size: Bytes::parse_gib(rest)?,
            });
        }
        if rest == "cloudinit" {
            return Ok(DriveVolume::CloudInitCreate { storage: sid });
        }
        // `Volid::parse(t)` with the storage id already read.
        Volid::with_storage(t, sid, rest).map(DriveVolume::Volume)
    }

    /// The storage (pool) the volume is on, when it is on one.
    pub fn storage(&self) -> Option<&StorageId> {
        match self {
            DriveVolume::Create { storage, .. } | DriveVolume::CloudInitCreate { storage } => {
                Some(storage)
            }
            DriveVolume::Volume(v) => Some(&v.storage),
            DriveVolume::None | DriveVolume::Other(_) => None,
        }
    }

    /// True for a cloud-init volume: `vm-<id>-cloudinit` or the dir form
    /// `<id>/vm-<id>-cloudinit.qcow2`, or the `<pool>:cloudinit` create form.
    pub fn is_cloudinit(&self) -> bool {
        match self {
            DriveVolume::CloudInitCreate { .. } => true,
            DriveVolume::Volume(v) => {
                // The last `/`-separated part up to its first `.`, read
                // byte by byte (both separators are ASCII).
                let bytes = v.volname.as_bytes();
                let name = bytes
                    .iter()
                    .rposition(|b| *b == b'/')
                    .map_or(bytes, |i| bytes.get(i + 1..).unwrap_or_default());
                let stem = name
                    .iter()
                    .position(|b| *b == b'.')
                    .map_or(name, |i| name.get(..i).unwrap_or_default());
                stem.starts_with(b"vm-") && stem.ends_with(b"-cloudinit")
            }
            _ => false,
        }
    }

    pub fn to_wire(&self) -> String {
        match self {
            DriveVolume::None => "none".to_owned(),
            DriveVolume::Create { storage, size } => {
                propstr::concat(&[storage.as_str(), ":", &size.to_gib_string()])
            }
            DriveVolume::CloudInitCreate { storage } => {
                propstr::concat(&[storage.as_str(), ":cloudinit"])
            }
            DriveVolume::Volume(v) => v.to_wire(),
            DriveVolume::Other(s) => s.clone(),
        }
    }
}

/// Splits the head value (leading positional token, or one of `head_keys`)
/// from the other tokens.
fn split_head<'a>(
    mut tokens: Vec<Token<'a>>,
    head_keys: &[&str],
) -> (Option<&'a str>, Vec<Token<'a>>) {
    // The first token when positional, else the first head key whose
    // value has no `=` (a volume with `=` in it cannot be written back in
    // front: `a=` would read as a key, so it is kept as a token). Taken
    // out in place: the rest keep their order, and no second list is
    // built for every drive of every guest.
    let at = match tokens.first() {
        Some(Token::Positional(_)) => Some(0),
        _ => tokens.iter().position(|t| {
            matches!(t, Token::Pair(key, value) if head_keys.contains(key) && !value.contains('='))
        }),
    };
    let head = at.map(|i| match tokens.remove(i) {
        Token::Positional(v) | Token::Pair(_, v) => v,
    });
    (head, tokens)
}

fn opt_bool(key: &str, v: &str) -> Result<bool, WireError> {
    parse_bool(v).map_err(|e| e.for_key(key))
}

fn pair(key: &str, v: Option<impl AsRef<str>>) -> String {
    v.map(|v| propstr::key_value(key, v.as_ref()))
        .unwrap_or_default()
}

fn pair_bool(key: &str, v: Option<bool>) -> String {
    pair(key, v.map(write_bool))
}

fn extras(extra: &[PropToken]) -> impl Iterator<Item = String> + '_ {
    extra.iter().map(PropToken::to_wire)
}

/// `media=`: `cdrom` or `disk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Media {
    Cdrom,
    Disk,
}

impl Media {
    fn parse(s: &str) -> Result<Media, WireError> {
        match s {
            "cdrom" => Ok(Media::Cdrom),
            "disk" => Ok(Media::Disk),
            _ => Err(WireError::invalid("media", s, "cdrom or disk")),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Media::Cdrom => "cdrom",
            Media::Disk => "disk",
        }
    }
}

/// `discard=`: `on` or `ignore` (every bus [PROBE]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Discard {
    On,
    Ignore,
}

impl Discard {
    fn parse(s: &str) -> Result<Discard, WireError> {
        match s {
            "on" => Ok(Discard::On),
            "ignore" => Ok(Discard::Ignore),
            _ => Err(WireError::invalid("discard", s, "on or ignore")),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Discard::On => "on",
            Discard::Ignore => "ignore",
        }
    }
}

/// `aio=`: `native`, `threads` or `io_uring` (every bus [PROBE]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Aio {
    Native,
    Threads,
    IoUring,
}

impl Aio {
    fn parse(s: &str) -> Result<Aio, WireError> {
        match s {
            "native" => Ok(Aio::Native),
            "threads" => Ok(Aio::Threads),
            "io_uring" => Ok(Aio::IoUring),
            _ => Err(WireError::invalid("aio", s, "native, threads or io_uring")),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Aio::Native => "native",
            Aio::Threads => "threads",
            Aio::IoUring => "io_uring",
        }
    }
}

/// A qemu drive value (`scsiN`, `virtioN`, `sataN`, `ideN`):
/// create `<pool>:<GiB>[,opts]`, image `<pool>:0,import-from=<volid>`,
/// live `<pool>:<volname>[,opts],size=32G`, CD `<storage>:iso/<f>,media=cdrom`
/// or `none,media=cdrom`, cloud-init `<pool>:vm-<id>-cloudinit,media=cdrom`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Drive {
    pub volume: DriveVolume,
    pub import_from: Option<Volid>,
    pub media: Option<Media>,
    pub iothread: Option<bool>,
    pub discard: Option<Discard>,
    pub ssd: Option<bool>,
    pub aio: Option<Aio>,
    /// PVE's `size=` token (live form).
    pub size: Option<Bytes>,
    /// Tokens not modelled (`cache`, `format`, `backup`, …), verbatim, in order.
    pub extra: Vec<PropToken>,
}

impl Drive {
    /// A drive with only a volume; set the options you own.
    pub fn new(volume: DriveVolume) -> Drive {
        Drive {
            volume,
            import_from: None,
            media: None,
            iothread: None,
            discard: None,
            ssd: None,
            aio: None,
            size: None,
            extra: Vec::new(),
        }
    }

    pub fn parse(s: &str) -> Result<Drive, WireError> {
        let p = propstr::tokens(s).map_err(|e| e.for_key("drive"))?;
        let (head, rest) = split_head(p, &["file"]);
        let head = head.ok_or_else(|| WireError::missing("drive", "volume", s))?;
        let mut d = Drive::new(DriveVolume::parse(head).map_err(|e| e.for_key("drive"))?);
        d.extra = owned_pairs(rest, |key, value| {
            match key {
                "import-from" => {
                    d.import_from = Some(Volid::parse(value).map_err(|e| e.for_key("import-from"))?)
                }
                "media" => d.media = Some(Media::parse(value)?),
                "iothread" => d.iothread = Some(opt_bool("iothread", value)?),
                "discard" => d.discard = Some(Discard::parse(value)?),
                "ssd" => d.ssd = Some(opt_bool("ssd", value)?),
                "aio" => d.aio = Some(Aio::parse(value)?),
                "size" => d.size = Some(Bytes::parse(value).map_err(|e| e.for_key("size"))?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(d)
    }

    pub fn is_cdrom(&self) -> bool {
        self.media == Some(Media::Cdrom)
    }

    /// A cloud-init drive: a `*-cloudinit` volume (PVE's name), or any
    /// allocated volume attached as `media=cdrom` that is not an ISO file —
    /// PVE puts nothing else there, and builds that name the volume
    /// `vm-<id>-disk-<n>` (fakepve does) are still recognised (spec §15.2).
    pub fn is_cloudinit(&self) -> bool {
        self.volume.is_cloudinit()
            || (self.is_cdrom()
                && matches!(&self.volume, DriveVolume::Volume(v) if !v.volname.starts_with("iso/")))
    }

    /// The ISO file name when the drive holds `<storage>:iso/<file>`.
    pub fn iso_file(&self) -> Option<&str> {
        match &self.volume {
            DriveVolume::Volume(v) => v.volname.strip_prefix("iso/"),
            _ => None,
        }
    }

    /// Volume, `import-from`, `media`, owned options, unmodelled tokens,
    /// then `size=` last (PVE's live form).
    pub fn to_wire(&self) -> String {
        join_tokens(
            [
                self.volume.to_wire(),
                pair("import-from", self.import_from.as_ref().map(Volid::to_wire)),
                pair("media", self.media.map(Media::as_str)),
                pair_bool("iothread", self.iothread),
                pair("discard", self.discard.map(Discard::as_str)),
                pair_bool("ssd", self.ssd),
                pair("aio", self.aio.map(Aio::as_str)),
            ]
            .into_iter()
            .chain(extras(&self.extra))
            .chain(std::iter::once(pair(
                "size",
                self.size.map(|b| b.to_wire()),
            ))),
        )
    }
}

/// A qemu `netN`: `<model>[=<mac>],bridge=..,tag=..,rate=..,firewall=1`.
/// PVE 9.2 rejects `vlan=`; the VLAN key is `tag` [PROBE §20.28].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QemuNet {
    pub model: String,
    pub mac: Option<MacAddr>,
    pub bridge: Option<String>,
    pub tag: Option<u16>,
    /// MB/s (megabytes per second; qemu-server `Network.pm`
    /// `tap_rate_limit`) as PVE wrote it (may be fractional).
    pub rate: Option<String>,
    pub firewall: Option<bool>,
    pub extra: Vec<PropToken>,
}

const QEMU_NET_KEYS: &[&str] = &[
    "bridge",
    "tag",
    "rate",
    "firewall",
    "link_down",
    "mtu",
    "queues",
    "trunks",
    "macaddr",
    "model",
];

impl QemuNet {
    pub fn new(model: &str, bridge: &str) -> QemuNet {
        QemuNet {
            model: model.to_owned(),
            mac: None,
            bridge: Some(bridge.to_owned()),
            tag: None,
            rate: None,
            firewall: None,
            extra: Vec::new(),
        }
    }

    pub fn parse(s: &str) -> Result<QemuNet, WireError> {
        let p = propstr::tokens(s).map_err(|e| e.for_key("netN"))?;
        let mut model = None;
        let mut mac = None;
        let mut n = QemuNet::new("", "");
        n.bridge = None;
        for (i, t) in p.into_iter().enumerate() {
            match t {
                Token::Positional(m) if i == 0 => model = Some(m.to_owned()),
                Token::Pair(key, value) if i == 0 && !QEMU_NET_KEYS.contains(&key) => {
                    model = Some(key.to_owned());
                    if !value.is_empty() {
                        mac = Some(MacAddr::parse(value).map_err(|e| e.for_key("netN"))?);
                    }
                }
                Token::Pair(key, value) => match key {
                    "model" => model = Some(value.to_owned()),
                    "macaddr" => mac = Some(MacAddr::parse(value).map_err(|e| e.for_key("netN"))?),
                    "bridge" => n.bridge = Some(value.to_owned()),
                    "tag" => {
                        n.tag =
                            Some(value.parse().map_err(|_| {
                                WireError::invalid("netN", value, "tag=<VLAN 1-4094>")
                            })?)
                    }
                    "rate" => n.rate = Some(decimal_text("rate", value)?),
                    "firewall" => n.firewall = Some(opt_bool("firewall", value)?),
                    _ => n.extra.push(t.to_prop()),
                },
                Token::Positional(_) => n.extra.push(t.to_prop()),
            }
        }
        let model = model.ok_or_else(|| WireError::missing("netN", "model", s))?;
        if model.is_empty()
            || !model
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(WireError::invalid(
                "netN",
                s,
                "a NIC model such as virtio or e1000 first",
            ));
        }
        n.model = model;
        n.mac = mac;
        Ok(n)
    }

    pub fn to_wire(&self) -> String {
        let head = match &self.mac {
            Some(m) => propstr::key_value(&self.model, &m.spelling),
            None => self.model.clone(),
        };
        join_tokens(
            [
                head,
                pair("bridge", self.bridge.as_ref()),
                pair("tag", self.tag.map(|t| t.to_string())),
                pair("rate", self.rate.as_ref()),
                pair_bool("firewall", self.firewall),
            ]
            .into_iter()
            .chain(extras(&self.extra)),
        )
    }
}

pub(crate) fn decimal_text(key: &str, v: &str) -> Result<String, WireError> {
    let ok = !v.is_empty()
        && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && v.bytes().filter(|b| *b == b'.').count() <= 1
        && v != ".";
    if ok {
        Ok(v.to_owned())
    } else {
        Err(WireError::invalid(key, v, "a non-negative number"))
    }
}

/// `efidisk0=<volume>[,efitype=..][,pre-enrolled-keys=0|1][,ms-cert=..][,size=..]`.
/// `ms-cert` is PVE-owned: kept verbatim so a live-form rewrite does not
/// drop it [PROBE §20.24].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EfiDisk {
    pub volume: DriveVolume,
    pub efitype: Option<String>,
    pub pre_enrolled_keys: Option<bool>,
    pub ms_cert: Option<String>,
    pub size: Option<Bytes>,
    pub extra: Vec<PropToken>,
}

impl EfiDisk {
    pub fn parse(s: &str) -> Result<EfiDisk, WireError> {
        let p = propstr::tokens(s).map_err(|e| e.for_key("efidisk0"))?;
        let (head, rest) = split_head(p, &["file"]);
        let head = head.ok_or_else(|| WireError::missing("efidisk0", "volume", s))?;
        let mut d = EfiDisk {
            volume: DriveVolume::parse(head).map_err(|e| e.for_key("efidisk0"))?,
            efitype: None,
            pre_enrolled_keys: None,
            ms_cert: None,
            size: None,
            extra: Vec::new(),
        };
        d.extra = owned_pairs(rest, |key, value| {
            match key {
                "efitype" => d.efitype = Some(value.to_owned()),
                "pre-enrolled-keys" => {
                    d.pre_enrolled_keys = Some(opt_bool("pre-enrolled-keys", value)?)
                }
                "ms-cert" => d.ms_cert = Some(value.to_owned()),
                "size" => d.size = Some(Bytes::parse(value).map_err(|e| e.for_key("size"))?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(d)
    }

    pub fn to_wire(&self) -> String {
        join_tokens(
            [
                self.volume.to_wire(),
                pair("efitype", self.efitype.as_ref()),
                pair_bool("pre-enrolled-keys", self.pre_enrolled_keys),
                pair("ms-cert", self.ms_cert.as_ref()),
            ]
            .into_iter()
            .chain(extras(&self.extra))
            .chain(std::iter::once(pair(
                "size",
                self.size.map(|b| b.to_wire()),
            ))),
        )
    }
}

/// TPM version: `v1.2` or `v2.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum TpmVersion {
    V1_2,
    V2_0,
}

impl TpmVersion {
    pub fn parse(s: &str) -> Result<TpmVersion, WireError> {
        match s {
            "v1.2" => Ok(TpmVersion::V1_2),
            "v2.0" => Ok(TpmVersion::V2_0),
            _ => Err(WireError::invalid(
                "tpmstate0",
                s,
                "version=v1.2 or version=v2.0",
            )),
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            TpmVersion::V1_2 => "v1.2",
            TpmVersion::V2_0 => "v2.0",
        }
    }
}

/// The TPM state volume. The spec calls the VM key `tpm0` in places, but
/// PVE's real config key is `tpmstate0`: ProxOps reads and writes
/// `tpmstate0=<volume>[,version=v1.2|v2.0][,size=..]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TpmState {
    pub volume: DriveVolume,
    pub version: Option<TpmVersion>,
    pub size: Option<Bytes>,
    pub extra: Vec<PropToken>,
}

impl TpmState {
    /// PVE's config key for the TPM state volume.
    pub const KEY: &'static str = "tpmstate0";

    pub fn parse(s: &str) -> Result<TpmState, WireError> {
        let p = propstr::tokens(s).map_err(|e| e.for_key(Self::KEY))?;
        let (head, rest) = split_head(p, &["file"]);
        let head = head.ok_or_else(|| WireError::missing(Self::KEY, "volume", s))?;
        let mut d = TpmState {
            volume: DriveVolume::parse(head).map_err(|e| e.for_key(Self::KEY))?,
            version: None,
            size: None,
            extra: Vec::new(),
        };
        d.extra = owned_pairs(rest, |key, value| {
            match key {
                "version" => d.version = Some(TpmVersion::parse(value)?),
                "size" => d.size = Some(Bytes::parse(value).map_err(|e| e.for_key("size"))?),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(d)
    }

    pub fn to_wire(&self) -> String {
        join_tokens(
            [
                self.volume.to_wire(),
                pair("version", self.version.map(TpmVersion::as_str)),
            ]
            .into_iter()
            .chain(extras(&self.extra))
            .chain(std::iter::once(pair(
                "size",
                self.size.map(|b| b.to_wire()),
            ))),
        )
    }
}

/// A PCI address in PVE's grammar: `[<domain>:]<bus>:<dev>[.<fn>]`
/// (`0000:17:00`, `0000:17:00.0`, `00:17.0`, `00000:17:00`), lower-cased.
/// Deliberately as wide as PVE 9.2's own grammar [PROBE §6.4.2]: the domain
/// is optional (the original tool required one and refused `00:17.0`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Bdf(String);

impl Bdf {
    pub fn parse(s: &str) -> Result<Bdf, WireError> {
        let l = s.trim().to_ascii_lowercase();
        let hex = |p: &str, lens: std::ops::RangeInclusive<usize>| {
            lens.contains(&p.len()) && p.bytes().all(|b| b.is_ascii_hexdigit())
        };
        let (main, func) = match l.split_once('.') {
            Some((m, f)) => (m, Some(f)),
            None => (l.as_str(), None),
        };
        let parts: Vec<&str> = main.split(':').collect();
        let ok_main = match parts.as_slice() {
            [dom, bus, dev] => hex(dom, 4..=5) && hex(bus, 2..=2) && hex(dev, 2..=2),
            [bus, dev] => hex(bus, 2..=2) && hex(dev, 2..=2),
            _ => false,
        };
        let ok_fn = func.is_none_or(|f| f.len() == 1 && matches!(f.as_bytes()[0], b'0'..=b'7'));
        if ok_main && ok_fn {
            Ok(Bdf(l))
        } else {
            Err(WireError::invalid(
                "hostpciN",
                s,
                "a PCI address like 0000:17:00.0 (hex; function 0-7)",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn to_wire(&self) -> String {
        self.0.clone()
    }
}

/// What a `hostpciN` passes through: host address(es) or a PCI mapping.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum PciDevice {
    /// One or more `;`-separated addresses.
    Host(Vec<Bdf>),
    /// `mapping=<name>`.
    Mapping(String),
}

/// `hostpciN=<bdf>[,pcie=0|1]`. `x-vga`, `rombar`, `mdev` and other tokens
/// are not modelled and kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HostPci {
    pub device: PciDevice,
    pub pcie: Option<bool>,
    pub extra: Vec<PropToken>,
}

impl HostPci {
    pub fn parse(s: &str) -> Result<HostPci, WireError> {
        let p = PropertyString::parse(s).map_err(|e| e.for_key("hostpciN"))?;
        let mut device = None;
        let mut pcie = None;
        let mut extra = Vec::new();
        for (i, t) in p.into_tokens().into_iter().enumerate() {
            match &t {
                PropToken::Positional(v) if i == 0 => {
                    device = Some(PciDevice::Host(parse_bdfs(v)?))
                }
                PropToken::Pair { key, value } if key == "host" && device.is_none() => {
                    device = Some(PciDevice::Host(parse_bdfs(value)?))
                }
                PropToken::Pair { key, value } if key == "mapping" && device.is_none() => {
                    device = Some(PciDevice::Mapping(value.clone()))
                }
                PropToken::Pair { key, value } if key == "pcie" => {
                    pcie = Some(opt_bool("pcie", value)?)
                }
                _ => extra.push(t),
            }
        }
        let device = device.ok_or_else(|| WireError::missing("hostpciN", "PCI address", s))?;
        Ok(HostPci {
            device,
            pcie,
            extra,
        })
    }

    pub fn to_wire(&self) -> String {
        let head = match &self.device {
            PciDevice::Host(b) => b.iter().map(Bdf::as_str).collect::<Vec<_>>().join(";"),
            PciDevice::Mapping(m) => format!("mapping={m}"),
        };
        join_tokens(
            [head, pair_bool("pcie", self.pcie)]
                .into_iter()
                .chain(extras(&self.extra)),
        )
    }
}

fn parse_bdfs(v: &str) -> Result<Vec<Bdf>, WireError> {
    v.split(';').map(Bdf::parse).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn round_trip<T: std::fmt::Debug + PartialEq>(
        s: &str,
        parse: fn(&str) -> Result<T, WireError>,
        fmt: fn(&T) -> String,
    ) {
        let a = parse(s).unwrap();
        let b = parse(&fmt(&a)).unwrap();
        assert_eq!(a, b, "{s}");
    }

    #[test]
    fn real_drive_values_round_trip() {
        for s in [
            "local-zfs:vm-111-disk-1,discard=on,size=160G,ssd=1",
            "local-zfs:vm-111-cloudinit,media=cdrom",
            "ceph-pool-nvme-01:vm-555-disk-0,discard=on,size=50G,ssd=1",
            "local-lvm:vm-107-disk-0,size=32G",
            "none,media=cdrom",
            "VMStorage:100/vm-100-disk-0.qcow2,cache=writeback,size=8G",
            "local-lvm:0,import-from=local:import/debian-13-genericcloud-amd64.qcow2",
            "local-lvm:0.5,iothread=1,aio=io_uring",
        ] {
            round_trip(s, Drive::parse, Drive::to_wire);
        }
    }

    #[test]
    fn live_drive_keeps_pve_order_for_known_tokens() {
        let d = Drive::parse("local-zfs:vm-111-disk-1,discard=on,size=160G,ssd=1").unwrap();
        assert_eq!(
            d.to_wire(),
            "local-zfs:vm-111-disk-1,discard=on,ssd=1,size=160G"
        );
        assert_eq!(d.size, Some(Bytes(160 << 30)));
        assert_eq!(d.volume.storage().unwrap().as_str(), "local-zfs");
    }

    #[test]
    fn create_form_size_is_gib_including_fractions() {
        let d = Drive::parse("local-lvm:0.5").unwrap();
        assert_eq!(
            d.volume,
            DriveVolume::Create {
                storage: StorageId::new("local-lvm").unwrap(),
                size: Bytes(512 << 20)
            }
        );
        assert_eq!(d.to_wire(), "local-lvm:0.5");
    }

    #[test]
    fn import_from_requires_size_token_zero() {
        let d = Drive::parse("local-lvm:0,import-from=local:import/x.qcow2").unwrap();
        assert!(matches!(
            d.volume,
            DriveVolume::Create { size: Bytes(0), .. }
        ));
        assert_eq!(d.import_from.unwrap().volname, "import/x.qcow2");
    }

    #[test]
    fn cdrom_and_cloudinit_forms_are_recognised() {
        let cd = Drive::parse("local:iso/debian-13.1.0-amd64-netinst.iso,media=cdrom,size=522284K")
            .unwrap();
        assert!(cd.is_cdrom());
        assert_eq!(cd.iso_file(), Some("debian-13.1.0-amd64-netinst.iso"));
        assert_eq!(
            Drive::parse("none,media=cdrom").unwrap().volume,
            DriveVolume::None
        );
        assert!(
            Drive::parse("local-zfs:vm-111-cloudinit,media=cdrom")
                .unwrap()
                .is_cloudinit()
        );
        assert!(
            Drive::parse("local:111/vm-111-cloudinit.qcow2,media=cdrom,size=4K")
                .unwrap()
                .is_cloudinit()
        );
        assert!(
            Drive::parse("local-lvm:cloudinit,size=4M")
                .unwrap()
                .is_cloudinit()
        );
        assert!(
            !Drive::parse("local-lvm:vm-111-disk-0")
                .unwrap()
                .is_cloudinit()
        );
    }

    #[test]
    fn unknown_drive_tokens_are_kept_verbatim() {
        let d = Drive::parse("local-lvm:vm-1-disk-0,backup=0,cache=none,size=8G").unwrap();
        assert_eq!(
            d.to_wire(),
            "local-lvm:vm-1-disk-0,backup=0,cache=none,size=8G"
        );
    }

    #[test]
    fn iothread_is_an_inline_token() {
        let mut d = Drive::new(DriveVolume::parse("local-lvm:32").unwrap());
        d.iothread = Some(true);
        assert_eq!(d.to_wire(), "local-lvm:32,iothread=1");
    }

    #[test]
    fn qemu_net_reads_mac_in_either_case_and_keeps_its_spelling() {
        // pve-common src/PVE/Tools.pm `random_ether_addr` generates upper
        // case; the address compares equal in either spelling, and is
        // written back as PVE spelled it.
        let n = QemuNet::parse("virtio=A2:7B:45:48:9C:E5,bridge=vmbr0,tag=103").unwrap();
        assert_eq!(n.model, "virtio");
        assert_eq!(n.mac, Some(MacAddr::parse("a2:7b:45:48:9c:e5").unwrap()));
        assert_eq!(n.tag, Some(103));
        assert_eq!(n.to_wire(), "virtio=A2:7B:45:48:9C:E5,bridge=vmbr0,tag=103");
        let n = QemuNet::parse("virtio=bc:24:11:4e:8f:d1,bridge=vmbr0,firewall=1").unwrap();
        assert_eq!(n.firewall, Some(true));
        round_trip(
            "virtio=bc:24:11:4e:8f:d1,bridge=vmbr0,firewall=1,mtu=1400,queues=4",
            QemuNet::parse,
            QemuNet::to_wire,
        );
    }

    /// What the address reader accepted when it split on `:` and read
    /// each part with `u8::from_str_radix`: the in-place reader agrees.
    #[test]
    fn mac_reader_agrees_with_splitting_on_colons() {
        fn by_parts(s: &str) -> Option<[u8; 6]> {
            let mut out = [0u8; 6];
            let mut parts = s.trim().split(':');
            for o in &mut out {
                let p = parts.next()?;
                if p.len() != 2 {
                    return None;
                }
                *o = u8::from_str_radix(p, 16).ok()?;
            }
            parts.next().is_none().then_some(out)
        }
        let mut cases = vec![
            "bc:24:11:4e:8f:d1",
            " BC:24:11:4E:8F:D1\n",
            "+a:+0:11:4e:8f:d1",
            "-a:00:11:4e:8f:d1",
            "++:00:11:4e:8f:d1",
            "bc:24:11:4e:8f",
            "bc:24:11:4e:8f:d1:00",
            "bc:24:11:4e:8f:d1:",
            "bc-24-11-4e-8f-d1",
            "bc:24:11:4e:8f:dg",
            "bc:24:11:4e:8f::d",
            "b:c24:11:4e:8f:d1",
            "é:24:11:4e:8f:d1x",
            "éé:24:11:4e:8f:d1",
            "",
        ];
        let spelled: Vec<String> = (0u16..=255)
            .map(|b| format!("{b:02x}:{b:02X}:00:ff:+{}:0{}", b % 10, b % 16))
            .collect();
        cases.extend(spelled.iter().map(String::as_str));
        for s in cases {
            assert_eq!(
                MacAddr::parse(s).ok().map(|m| m.octets()),
                by_parts(s),
                "{s:?}"
            );
        }
    }

    #[test]
    fn vm_nic_vlan_key_is_tag_never_vlan() {
        let mut n = QemuNet::new("virtio", "vmbr0");
        n.tag = Some(103);
        assert_eq!(n.to_wire(), "virtio,bridge=vmbr0,tag=103");
        assert!(!n.to_wire().contains("vlan"));
    }

    #[test]
    fn unpinned_nic_sends_the_bare_model() {
        let mut n = QemuNet::new("virtio", "vmbr0");
        n.tag = Some(20);
        n.rate = Some("12.5".into());
        n.firewall = Some(true);
        assert_eq!(
            n.to_wire(),
            "virtio,bridge=vmbr0,tag=20,rate=12.5,firewall=1"
        );
        assert_eq!(QemuNet::parse("e1000,bridge=vmbr1").unwrap().mac, None);
    }

    #[test]
    fn efidisk_keeps_ms_cert_verbatim() {
        let e = EfiDisk::parse(
            "local-lvm:vm-100-disk-0,efitype=4m,ms-cert=2023w,pre-enrolled-keys=1,size=4M",
        )
        .unwrap();
        assert_eq!(e.ms_cert.as_deref(), Some("2023w"));
        assert_eq!(e.pre_enrolled_keys, Some(true));
        assert_eq!(
            e.to_wire(),
            "local-lvm:vm-100-disk-0,efitype=4m,pre-enrolled-keys=1,ms-cert=2023w,size=4M"
        );
        round_trip(
            "local-zfs:vm-111-disk-0,efitype=4m,size=1M",
            EfiDisk::parse,
            EfiDisk::to_wire,
        );
    }

    #[test]
    fn tpmstate_is_the_wire_key_and_version_is_typed() {
        assert_eq!(TpmState::KEY, "tpmstate0");
        let t = TpmState::parse("local-lvm:vm-100-disk-1,size=4M,version=v2.0").unwrap();
        assert_eq!(t.version, Some(TpmVersion::V2_0));
        assert_eq!(t.to_wire(), "local-lvm:vm-100-disk-1,version=v2.0,size=4M");
        assert!(TpmState::parse("local-lvm:1,version=v3").is_err());
    }

    #[test]
    fn hostpci_accepts_pve_bdf_forms_and_lower_cases() {
        for (i, o) in [
            ("0000:17:00", "0000:17:00"),
            ("0000:17:00.0", "0000:17:00.0"),
            ("00:17.0", "00:17.0"),
            ("00000:17:00", "00000:17:00"),
            ("1234:01:00.1", "1234:01:00.1"),
            ("0000:AF:00.0", "0000:af:00.0"),
        ] {
            assert_eq!(HostPci::parse(i).unwrap().to_wire(), o);
        }
        for bad in ["0000:zz:00", "0000:17:00.8", "17", ""] {
            assert!(HostPci::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostpci_pcie_is_0_or_1_and_pve_side_tokens_are_kept() {
        let h = HostPci::parse("0000:17:00.0,pcie=1,x-vga=1,rombar=0").unwrap();
        assert_eq!(h.pcie, Some(true));
        assert_eq!(h.to_wire(), "0000:17:00.0,pcie=1,x-vga=1,rombar=0");
        assert!(HostPci::parse("0000:17:00.0,pcie=2").is_err());
        let m = HostPci::parse("mapping=gpu0,pcie=1").unwrap();
        assert_eq!(m.device, PciDevice::Mapping("gpu0".into()));
        round_trip(
            "host=0000:17:00.0;0000:17:00.1,mdev=nvidia-63",
            HostPci::parse,
            HostPci::to_wire,
        );
    }

    #[test]
    fn file_name_extraction_follows_content_then_last_component() {
        assert_eq!(
            Volid::file_name_of("local:iso/debian.iso", "iso"),
            "debian.iso"
        );
        assert_eq!(
            Volid::file_name_of("local:vztmpl/debian-13.tar.zst", "vztmpl"),
            "debian-13.tar.zst"
        );
        assert_eq!(
            Volid::file_name_of("nfs:100/vm-100-disk-0.qcow2", "images"),
            "vm-100-disk-0.qcow2"
        );
        assert_eq!(
            Volid::file_name_of("local-lvm:vm-100-disk-0", "images"),
            "vm-100-disk-0"
        );
        assert_eq!(Volid::file_name_of("weird", "iso"), "weird");
    }
}
