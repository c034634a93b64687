//! LXC config values: `netN`, `rootfs`, `mpN` (allocated and bind), and
//! `features`.

use super::WireError;
use super::propstr::{self, PropToken, PropertyString, Token, join_tokens, owned_pairs};
use super::qemu::{DriveVolume, MacAddr, decimal_text};
use super::scalar::{Bytes, parse_bool, write_bool};

fn opt_bool(key: &str, v: &str) -> Result<bool, WireError> {
    parse_bool(v).map_err(|e| e.for_key(key))
}

fn pair(key: &str, v: Option<impl AsRef<str>>) -> String {
    v.map(|v| format!("{key}={}", v.as_ref()))
        .unwrap_or_default()
}

fn pair_bool(key: &str, v: Option<bool>) -> String {
    pair(key, v.map(write_bool))
}

/// An LXC `netN`: `name=<iface>[,type=veth][,bridge=..][,tag=..][,hwaddr=..]
/// [,rate=..][,firewall=1][,ip=..][,gw=..]`. `name=` is required: PVE 9.2
/// rejects a value without a leading key [PROBE §20.14]. Written in that
/// token order; unmodelled tokens (`ip6`, `gw6`, `mtu`, …) follow verbatim.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LxcNet {
    pub name: String,
    pub net_type: Option<String>,
    pub bridge: Option<String>,
    pub tag: Option<u16>,
    pub hwaddr: Option<MacAddr>,
    pub rate: Option<String>,
    pub firewall: Option<bool>,
    pub ip: Option<String>,
    pub gw: Option<String>,
    pub extra: Vec<PropToken>,
}

impl LxcNet {
    pub fn new(name: &str) -> LxcNet {
        LxcNet {
            name: name.to_owned(),
            net_type: None,
            bridge: None,
            tag: None,
            hwaddr: None,
            rate: None,
            firewall: None,
            ip: None,
            gw: None,
            extra: Vec::new(),
        }
    }

    pub fn parse(s: &str) -> Result<LxcNet, WireError> {
        let p = PropertyString::parse(s).map_err(|e| e.for_key("netN"))?;
        let mut n = LxcNet::new("");
        let mut name = None;
        for t in p.into_tokens() {
            match &t {
                PropToken::Positional(_) => {
                    return Err(WireError::invalid(
                        "netN",
                        s,
                        "key=value tokens starting with name=<iface>",
                    ));
                }
                PropToken::Pair { key, value } => match key.as_str() {
                    "name" => name = Some(value.clone()),
                    "type" => n.net_type = Some(value.clone()),
                    "bridge" => n.bridge = Some(value.clone()),
                    "tag" => {
                        n.tag =
                            Some(value.parse().map_err(|_| {
                                WireError::invalid("netN", value, "tag=<VLAN 1-4094>")
                            })?)
                    }
                    "hwaddr" => {
                        n.hwaddr = Some(MacAddr::parse(value).map_err(|e| e.for_key("netN"))?)
                    }
                    "rate" => n.rate = Some(decimal_text("rate", value)?),
                    "firewall" => n.firewall = Some(opt_bool("firewall", value)?),
                    "ip" => n.ip = Some(value.clone()),
                    "gw" => n.gw = Some(value.clone()),
                    _ => n.extra.push(t),
                },
            }
        }
        n.name = name
            .filter(|x| !x.is_empty())
            .ok_or_else(|| WireError::missing("netN", "name=<iface>", s))?;
        Ok(n)
    }

    pub fn to_wire(&self) -> String {
        join_tokens(
            [
                format!("name={}", self.name),
                pair("type", self.net_type.as_ref()),
                pair("bridge", self.bridge.as_ref()),
                pair("tag", self.tag.map(|t| t.to_string())),
                pair("hwaddr", self.hwaddr.as_ref().map(MacAddr::to_wire)),
                pair("rate", self.rate.as_ref()),
                pair_bool("firewall", self.firewall),
                pair("ip", self.ip.as_ref()),
                pair("gw", self.gw.as_ref()),
            ]
            .into_iter()
            .chain(self.extra.iter().map(PropToken::to_wire)),
        )
    }
}

/// A storage-backed `rootfs` or `mpN`: create `<storage>:<GiB>[,mp=..]`,
/// live `<storage>:<vol>,size=8G[,mp=..]`, with options `ro`, `backup`,
/// `acl`, `quota`, `shared`, `mountoptions`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LxcVolumeMount {
    pub volume: DriveVolume,
    pub size: Option<Bytes>,
    pub mp: Option<String>,
    pub ro: Option<bool>,
    pub backup: Option<bool>,
    pub acl: Option<bool>,
    pub quota: Option<bool>,
    pub shared: Option<bool>,
    pub mountoptions: Option<String>,
    pub extra: Vec<PropToken>,
}

impl LxcVolumeMount {
    pub fn new(volume: DriveVolume) -> LxcVolumeMount {
        LxcVolumeMount {
            volume,
            size: None,
            mp: None,
            ro: None,
            backup: None,
            acl: None,
            quota: None,
            shared: None,
            mountoptions: None,
            extra: Vec::new(),
        }
    }

    pub fn parse(s: &str) -> Result<LxcVolumeMount, WireError> {
        let p = propstr::tokens(s).map_err(|e| e.for_key("mpN"))?;
        let (head, rest) = split_volume(p);
        let head = head.ok_or_else(|| WireError::missing("mpN", "volume", s))?;
        if head.starts_with('/') {
            return Err(WireError::invalid(
                "mpN",
                s,
                "<storage>:<GiB> or <storage>:<volume>, not a host path",
            ));
        }
        let mut m = LxcVolumeMount::new(DriveVolume::parse(head).map_err(|e| e.for_key("mpN"))?);
        m.extra = owned_pairs(rest, |key, value| {
            match key {
                "size" => m.size = Some(Bytes::parse(value).map_err(|e| e.for_key("size"))?),
                "mp" => m.mp = Some(value.to_owned()),
                "ro" => m.ro = Some(opt_bool("ro", value)?),
                "backup" => m.backup = Some(opt_bool("backup", value)?),
                "acl" => m.acl = Some(opt_bool("acl", value)?),
                "quota" => m.quota = Some(opt_bool("quota", value)?),
                "shared" => m.shared = Some(opt_bool("shared", value)?),
                "mountoptions" => m.mountoptions = Some(value.to_owned()),
                _ => return Ok(false),
            }
            Ok(true)
        })?;
        Ok(m)
    }

    /// Volume, `size=` (live form), `mp=`, owned options, then every other
    /// live token untouched.
    pub fn to_wire(&self) -> String {
        join_tokens(
            [
                self.volume.to_wire(),
                pair("size", self.size.map(|b| b.to_wire())),
                pair("mp", self.mp.as_ref()),
                pair_bool("ro", self.ro),
                pair_bool("backup", self.backup),
                pair_bool("acl", self.acl),
                pair_bool("quota", self.quota),
                pair_bool("shared", self.shared),
                pair("mountoptions", self.mountoptions.as_ref()),
            ]
            .into_iter()
            .chain(self.extra.iter().map(PropToken::to_wire)),
        )
    }
}

/// A bind mount `mpN=/host/path,mp=/guest[,ro=0|1]`. On read the legacy
/// spellings are accepted too: a bare `ro` flag and `/host:/guest`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LxcBindMount {
    pub host_path: String,
    pub mp: Option<String>,
    pub ro: Option<bool>,
    pub extra: Vec<PropToken>,
}

impl LxcBindMount {
    pub fn parse(s: &str) -> Result<LxcBindMount, WireError> {
        let p = propstr::tokens(s).map_err(|e| e.for_key("mpN"))?;
        let (head, rest) = split_volume(p);
        let head = head.ok_or_else(|| WireError::missing("mpN", "host path", s))?;
        if !head.starts_with('/') {
            return Err(WireError::invalid("mpN", s, "an absolute host path"));
        }
        let (host_path, mut mp) = match head.split_once(':') {
            // Whitespace before the `:` is padding, as around any token:
            // `/a\x0c:/b` must not keep it, or the `mp=` form written back
            // would name another host path.
            Some((h, g)) if g.starts_with('/') => (h.trim_end().to_owned(), Some(g.to_owned())),
            _ => (head.to_owned(), None),
        };
        let mut b = LxcBindMount {
            host_path,
            mp: None,
            ro: None,
            extra: Vec::new(),
        };
        for t in rest {
            match t {
                Token::Pair("mp", value) => mp = Some(value.to_owned()),
                Token::Pair("ro", value) => b.ro = Some(opt_bool("ro", value)?),
                Token::Positional("ro") => b.ro = Some(true),
                _ => b.extra.push(t.to_prop()),
            }
        }
        b.mp = mp;
        Ok(b)
    }

    pub fn to_wire(&self) -> String {
        join_tokens(
            [
                self.host_path.clone(),
                pair("mp", self.mp.as_ref()),
                pair_bool("ro", self.ro),
            ]
            .into_iter()
            .chain(self.extra.iter().map(PropToken::to_wire)),
        )
    }
}

/// An LXC `mpN`, classified by its first token: a `<storage>:` volume is
/// allocated, a leading `/` is a bind mount.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum LxcMount {
    Allocated(LxcVolumeMount),
    Bind(LxcBindMount),
}

impl LxcMount {
    pub fn parse(s: &str) -> Result<LxcMount, WireError> {
        let p = propstr::tokens(s).map_err(|e| e.for_key("mpN"))?;
        let (head, _) = split_volume(p);
        match head {
            Some(h) if h.starts_with('/') => LxcBindMount::parse(s).map(LxcMount::Bind),
            _ => LxcVolumeMount::parse(s).map(LxcMount::Allocated),
        }
    }

    pub fn to_wire(&self) -> String {
        match self {
            LxcMount::Allocated(m) => m.to_wire(),
            LxcMount::Bind(b) => b.to_wire(),
        }
    }
}

fn split_volume(tokens: Vec<Token<'_>>) -> (Option<&str>, Vec<Token<'_>>) {
    let mut head = None;
    let mut rest = Vec::with_capacity(tokens.len());
    for (i, t) in tokens.into_iter().enumerate() {
        match t {
            Token::Positional(v) if i == 0 => head = Some(v),
            // As for QEMU drives: a volume with `=` in it would not read
            // back as the leading value, so it is not taken as the volume.
            Token::Pair(key, value)
                if key == "volume" && head.is_none() && !value.contains('=') =>
            {
                head = Some(value)
            }
            other => rest.push(other),
        }
    }
    (head, rest)
}

/// LXC `features`: `nesting=1,keyctl=1,fuse=1,mknod=1`; other tokens
/// (`mount=nfs;cifs`, `force_rw_sys`) kept verbatim. Only `nesting` is
/// settable through the API; `keyctl`/`fuse` are read-only there [PROBE §20.11].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct LxcFeatures {
    pub nesting: Option<bool>,
    pub keyctl: Option<bool>,
    pub fuse: Option<bool>,
    pub mknod: Option<bool>,
    pub extra: Vec<PropToken>,
}

impl LxcFeatures {
    pub fn parse(s: &str) -> Result<LxcFeatures, WireError> {
        let p = PropertyString::parse(s).map_err(|e| e.for_key("features"))?;
        let mut f = LxcFeatures::default();
        for t in p.into_tokens() {
            match &t {
                PropToken::Pair { key, value } => match key.as_str() {
                    "nesting" => f.nesting = Some(opt_bool("features", value)?),
                    "keyctl" => f.keyctl = Some(opt_bool("features", value)?),
                    "fuse" => f.fuse = Some(opt_bool("features", value)?),
                    "mknod" => f.mknod = Some(opt_bool("features", value)?),
                    _ => f.extra.push(t),
                },
                PropToken::Positional(_) => {
                    return Err(WireError::invalid(
                        "features",
                        s,
                        "key=value tokens such as nesting=1",
                    ));
                }
            }
        }
        Ok(f)
    }

    pub fn to_wire(&self) -> String {
        join_tokens(
            [
                pair_bool("nesting", self.nesting),
                pair_bool("keyctl", self.keyctl),
                pair_bool("fuse", self.fuse),
                pair_bool("mknod", self.mknod),
            ]
            .into_iter()
            .chain(self.extra.iter().map(PropToken::to_wire)),
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lxc_nic_requires_name_first_and_writes_documented_order() {
        // The hwaddr keeps PVE's spelling (pve-container src/PVE/LXC.pm
        // `update_net` compares it as text).
        let n = LxcNet::parse(
            "name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:AA:BB:CC,ip=dhcp,type=veth",
        )
        .unwrap();
        assert_eq!(n.name, "eth0");
        assert_eq!(
            n.to_wire(),
            "name=eth0,type=veth,bridge=vmbr0,hwaddr=BC:24:11:AA:BB:CC,firewall=1,ip=dhcp"
        );
        assert!(LxcNet::parse("veth,bridge=vmbr0").is_err());
        assert!(LxcNet::parse("bridge=vmbr0").is_err());
    }

    #[test]
    fn lxc_nic_static_ip_and_unknown_tokens_round_trip() {
        let s =
            "name=eth0,bridge=vmbr0,tag=20,rate=10,ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto,mtu=1450";
        let n = LxcNet::parse(s).unwrap();
        assert_eq!(n.tag, Some(20));
        assert_eq!(n.gw.as_deref(), Some("10.0.0.1"));
        assert_eq!(LxcNet::parse(&n.to_wire()).unwrap(), n);
        assert!(n.to_wire().ends_with("ip6=auto,mtu=1450"));
    }

    #[test]
    fn rootfs_live_and_create_forms() {
        let r = LxcVolumeMount::parse("vmstore:subvol-101-disk-0,size=30G").unwrap();
        assert_eq!(r.size, Some(Bytes(30 << 30)));
        assert_eq!(r.to_wire(), "vmstore:subvol-101-disk-0,size=30G");
        let c = LxcVolumeMount::parse("local-lvm:8").unwrap();
        assert!(matches!(c.volume, DriveVolume::Create { size: Bytes(s), .. } if s == 8 << 30));
    }

    #[test]
    fn allocated_mount_point_live_form_keeps_options_and_unknown_tokens() {
        let s = "local-lvm:vm-200-disk-1,mp=/data,size=8G,backup=1,ro=0,replicate=0";
        let m = LxcMount::parse(s).unwrap();
        let LxcMount::Allocated(a) = &m else {
            panic!("allocated")
        };
        assert_eq!(a.mp.as_deref(), Some("/data"));
        assert_eq!(a.backup, Some(true));
        assert_eq!(
            m.to_wire(),
            "local-lvm:vm-200-disk-1,size=8G,mp=/data,ro=0,backup=1,replicate=0"
        );
        assert_eq!(LxcMount::parse(&m.to_wire()).unwrap(), m);
    }

    #[test]
    fn bind_mount_forms_including_legacy_spellings() {
        let b = LxcMount::parse("/mnt/foo/bar,mp=/storage").unwrap();
        assert_eq!(
            b,
            LxcMount::Bind(LxcBindMount {
                host_path: "/mnt/foo/bar".into(),
                mp: Some("/storage".into()),
                ro: None,
                extra: vec![]
            })
        );
        let LxcMount::Bind(l) = LxcMount::parse("/srv/data:/data,ro").unwrap() else {
            panic!("bind")
        };
        assert_eq!(
            (l.host_path.as_str(), l.mp.as_deref(), l.ro),
            ("/srv/data", Some("/data"), Some(true))
        );
        assert_eq!(l.to_wire(), "/srv/data,mp=/data,ro=1");
    }

    #[test]
    fn features_read_all_flags_and_keep_others() {
        let f = LxcFeatures::parse("fuse=1,mknod=1,nesting=1,mount=nfs;cifs").unwrap();
        assert_eq!(
            (f.nesting, f.keyctl, f.fuse, f.mknod),
            (Some(true), None, Some(true), Some(true))
        );
        assert_eq!(f.to_wire(), "nesting=1,fuse=1,mknod=1,mount=nfs;cifs");
    }

    #[test]
    fn nesting_is_written_inside_features() {
        let f = LxcFeatures {
            nesting: Some(true),
            ..Default::default()
        };
        assert_eq!(f.to_wire(), "nesting=1");
    }
}
