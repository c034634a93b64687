//! The pieces of a firewall rule, each checked the way pve-firewall checks
//! it (`src/PVE/Firewall.pm`): object names, address specifications,
//! port lists, protocols, ICMP types and log levels. Each checked value
//! keeps the text it was written as, so a rule renders back exactly.

use core::fmt;
use core::net::IpAddr;

use super::data::{ICMP_TYPES, ICMPV6_PROTOCOL, ICMPV6_TYPES, PROTOCOLS, SERVICES};

/// The longest alias and IP set name (`$max_alias_name_length`,
/// `$max_ipset_name_length`) and security group name
/// (`$max_group_name_length`) PVE accepts.
pub const MAX_ALIAS_LEN: usize = 64;
pub const MAX_IPSET_LEN: usize = 64;
pub const MAX_GROUP_LEN: usize = 18;

/// `[A-Za-z][A-Za-z0-9\-\_]+`: PVE's pattern for alias, IP set and
/// security group names (`$ip_alias_pattern`, `$ipset_name_pattern`,
/// `$security_group_name_pattern`), at least two characters.
pub fn is_object_name(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    first.is_ascii_alphabetic()
        && s.len() >= 2
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Where a reference looks its object up: `dc/` the cluster, `guest/` the
/// guest's own firewall, `sdn/` (IP sets only) an SDN object, none: the
/// guest's first, then the cluster's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RefScope {
    Any,
    Cluster,
    Guest,
    Sdn,
}

impl RefScope {
    pub fn prefix(self) -> &'static str {
        match self {
            RefScope::Any => "",
            RefScope::Cluster => "dc/",
            RefScope::Guest => "guest/",
            RefScope::Sdn => "sdn/",
        }
    }
}

/// Splits a scope prefix off; `sdn/` only where IP sets allow it.
fn scoped(s: &str, sdn: bool) -> (RefScope, &str) {
    if let Some(rest) = s.strip_prefix("dc/") {
        (RefScope::Cluster, rest)
    } else if let Some(rest) = s.strip_prefix("guest/") {
        (RefScope::Guest, rest)
    } else if let Some(rest) = s.strip_prefix("sdn/").filter(|_| sdn) {
        (RefScope::Sdn, rest)
    } else {
        (RefScope::Any, s)
    }
}

/// What a `source` or `dest` names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Address {
    /// `+name`, `+dc/name`, `+guest/name`, `+sdn/name`: an IP set.
    IpSet { scope: RefScope, name: String },
    /// `name`, `dc/name`, `guest/name`: an alias.
    Alias { scope: RefScope, name: String },
    /// Addresses, networks (`10.0.0.0/8`) or one range
    /// (`10.0.0.1-10.0.0.9`), all of one IP version.
    List { v6: bool },
}

/// A checked `source`/`dest` value, kept as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrSpec {
    text: String,
    what: Address,
}

impl AddrSpec {
    /// Reads an address the way `parse_address_list` (Firewall.pm) does,
    /// with the reference syntax `verify_rule` checks on top.
    pub fn parse(s: &str) -> Result<AddrSpec, String> {
        let what = if let Some(rest) = s.strip_prefix('+') {
            // parse_address_list: "ipset name too long"; verify_rule:
            // `^\+(guest/|dc/|sdn/)?(pattern)$`.
            if s.len() > MAX_IPSET_LEN + 1 {
                return Err("ipset name too long".into());
            }
            let (scope, name) = scoped(rest, true);
            if !is_object_name(name) {
                return Err(format!("invalid ipset name '{s}'"));
            }
            Address::IpSet {
                scope,
                name: name.to_string(),
            }
        } else if is_object_name(scoped(s, false).1) {
            if s.len() > MAX_ALIAS_LEN {
                return Err("alias name too long".into());
            }
            let (scope, name) = scoped(s, false);
            Address::Alias {
                scope,
                name: name.to_string(),
            }
        } else {
            Address::List {
                v6: address_list(s)?,
            }
        };
        Ok(AddrSpec {
            text: s.to_string(),
            what,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn what(&self) -> &Address {
        &self.what
    }

    /// The IP version the value fixes (an alias's depends on its CIDR).
    pub fn v6(&self) -> Option<bool> {
        match self.what {
            Address::List { v6 } => Some(v6),
            _ => None,
        }
    }
}

impl fmt::Display for AddrSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A comma-separated list of addresses, networks or one range; returns
/// whether it is IPv6. `parse_address_list`: "extraneous commas in list",
/// "detected mixed ipv4/ipv6 addresses", "you can't use a range in a list".
fn address_list(s: &str) -> Result<bool, String> {
    let items: Vec<&str> = s.split(',').collect();
    if items.iter().any(|i| i.is_empty()) {
        return Err("extraneous commas in list".into());
    }
    let mut version = None;
    let mut range = false;
    for item in &items {
        let (v6, is_range) = address(item)?;
        range |= is_range;
        if version.is_some_and(|v| v != v6) {
            return Err(format!(
                "detected mixed ipv4/ipv6 addresses in address list '{s}'"
            ));
        }
        version = Some(v6);
    }
    if range && items.len() > 1 {
        return Err("you can't use a range in a list".into());
    }
    Ok(version.unwrap_or(false))
}

/// An alias's or IP set entry's address: one address or `addr/len`
/// network, host bits allowed (`pve_verify_ip_or_cidr` clears them with
/// `clean_cidr` before Net::IP reads it); returns whether it is IPv6.
pub fn ip_or_cidr(s: &str) -> Result<bool, String> {
    let bad = || "value does not look like a valid IP address or CIDR network".to_string();
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, Some(digits::<u32>(l).ok_or_else(bad)?)),
        None => (s, None),
    };
    let addr = ip(addr).ok_or_else(bad)?;
    let width = if addr.is_ipv6() { 128 } else { 32 };
    if len.is_some_and(|l| l > width) {
        return Err(bad());
    }
    Ok(addr.is_ipv6())
}

/// An alias's address as PVE keeps it: `parse_alias` reads it through
/// `parse_ip_or_cidr`, which drops a `/32` (IPv4) or `/128` (IPv6).
pub fn stored_alias_cidr(s: &str) -> String {
    let v6 = s
        .split('/')
        .next()
        .and_then(ip)
        .is_some_and(|a| a.is_ipv6());
    let full = if v6 { "/128" } else { "/32" };
    s.strip_suffix(full).unwrap_or(s).to_string()
}

/// An IP set entry as PVE keeps it (`create_ip` in `API2/Firewall/IPSet.pm`):
/// a network's host bits cleared and its address compressed (`clean_cidr`),
/// then a `/32` or `/128` dropped (`parse_ip_or_cidr`); an alias's name and
/// a bare address as written.
pub fn stored_ipset_cidr(s: &str) -> String {
    let Some((addr, len)) = s.split_once('/') else {
        return s.to_string();
    };
    let (Some(addr), Some(len)) = (ip(addr), digits::<u32>(len)) else {
        return s.to_string();
    };
    let clean = match addr {
        IpAddr::V4(a) => {
            let bits = u32::from(a);
            let mask = u32::MAX.checked_shl(32u32.saturating_sub(len)).unwrap_or(0);
            core::net::Ipv4Addr::from(bits & mask).to_string()
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let mask = u128::MAX
                .checked_shl(128u32.saturating_sub(len))
                .unwrap_or(0);
            core::net::Ipv6Addr::from(bits & mask).to_string()
        }
    };
    stored_alias_cidr(&format!("{clean}/{len}"))
}

/// One address, `addr/len` network or `a-b` range, as Net::IP reads it
/// (it refuses a network with host bits set: "Invalid prefix").
fn address(s: &str) -> Result<(bool, bool), String> {
    let bad = || format!("invalid IP address: {s}");
    if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (ip(a).ok_or_else(bad)?, ip(b).ok_or_else(bad)?);
        if a.is_ipv6() != b.is_ipv6() || a > b {
            return Err(bad());
        }
        return Ok((a.is_ipv6(), true));
    }
    let Some((addr, len)) = s.split_once('/') else {
        return Ok((ip(s).ok_or_else(bad)?.is_ipv6(), false));
    };
    let addr = ip(addr).ok_or_else(bad)?;
    let len: u32 = digits(len).ok_or_else(bad)?;
    let bits = match addr {
        IpAddr::V4(a) => host_bits(u128::from(u32::from(a)), 32, len),
        IpAddr::V6(a) => host_bits(u128::from(a), 128, len),
    };
    match bits {
        Some(0) => Ok((addr.is_ipv6(), false)),
        _ => Err(bad()),
    }
}

/// The host bits of `value` (a `width`-bit address) under a prefix of
/// `len`; None when the prefix is longer than the address.
fn host_bits(value: u128, width: u32, len: u32) -> Option<u128> {
    let host = width.checked_sub(len)?;
    let mask = if host >= 128 {
        u128::MAX
    } else {
        (1u128 << host) - 1
    };
    Some(value & mask)
}

fn ip(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

/// A decimal number (no sign, no spaces; at most 18 digits, so it fits).
fn digits<T: TryFrom<u64>>(s: &str) -> Option<T> {
    if s.is_empty() || s.len() > 18 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    T::try_from(s.parse::<u64>().ok()?).ok()
}

/// One element of a port list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortItem {
    /// `lo:hi` (or a single port, `lo == hi`).
    Range(u16, u16),
    /// An ICMP type name in a `dport` of an ICMP rule (PVE used to keep
    /// the ICMP type there).
    Icmp,
}

/// A checked `dport`/`sport` value, kept as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortSpec {
    text: String,
    items: Vec<PortItem>,
}

impl PortSpec {
    /// Reads a port list the way `parse_port_name_number_or_range`
    /// (Firewall.pm) does: numbers, `lo:hi` ranges and `/etc/services`
    /// names, comma-separated, at most 15 numbers (a range counts two);
    /// with `icmp` (a `dport` of an ICMP rule) an ICMP type name alone.
    pub fn parse(s: &str, icmp: bool) -> Result<PortSpec, String> {
        let parts: Vec<&str> = s.split(',').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err("extraneous commas in list".into());
        }
        let mut items = Vec::new();
        let mut count = 0;
        for part in parts {
            let item = port_item(part, icmp)?;
            count += match item {
                PortItem::Range(..) if part.contains(':') => 2,
                PortItem::Range(..) if part.bytes().all(|b| b.is_ascii_digit()) => 1,
                _ => 0,
            };
            items.push(item);
        }
        if items.contains(&PortItem::Icmp) && count > 0 {
            return Err("ICMP ports not allowed in port range".into());
        }
        if count > 15 {
            return Err("too many entries in port list (> 15 numbers)".into());
        }
        Ok(PortSpec {
            text: s.to_string(),
            items,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn items(&self) -> &[PortItem] {
        &self.items
    }

    /// Whether the list admits `port`.
    pub fn covers(&self, port: u16) -> bool {
        self.items
            .iter()
            .any(|i| matches!(*i, PortItem::Range(lo, hi) if lo <= port && port <= hi))
    }
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn port_item(part: &str, icmp: bool) -> Result<PortItem, String> {
    let number = |p: &str| -> Result<u16, String> {
        digits::<u16>(p).ok_or_else(|| format!("invalid port '{p}'"))
    };
    let all_digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if let Some((a, b)) = part
        .split_once(':')
        .filter(|(a, b)| all_digits(a) && all_digits(b))
    {
        let (lo, hi) = (number(a)?, number(b)?);
        if lo > hi {
            return Err(format!(
                "backwards range '{lo}:{hi}' not allowed, did you mean '{hi}:{lo}'?"
            ));
        }
        return Ok(PortItem::Range(lo, hi));
    }
    if all_digits(part) {
        let p = number(part)?;
        return Ok(PortItem::Range(p, p));
    }
    if icmp && (ICMP_TYPES.contains(&part) || ICMPV6_TYPES.contains(&part)) {
        return Ok(PortItem::Icmp);
    }
    match SERVICES.iter().find(|(name, _)| *name == part) {
        Some(&(_, port)) => Ok(PortItem::Range(port, port)),
        None => Err(format!("invalid port '{part}'")),
    }
}

/// A checked protocol: a name or number `/etc/protocols` lists, or
/// `icmpv6` (`pve_fw_verify_protocol_spec`, `get_etc_protocols`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Proto(String);

impl Proto {
    pub fn parse(s: &str) -> Result<Proto, String> {
        let known = s == ICMPV6_PROTOCOL
            || PROTOCOLS
                .iter()
                .any(|(name, n)| *name == s || n.to_string() == s);
        if known {
            Ok(Proto(s.to_string()))
        } else {
            Err(format!("unknown protocol '{s}'"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `$proto_is_icmp` (Firewall.pm): by name only, as PVE compares.
    pub fn is_icmp(&self) -> bool {
        matches!(self.0.as_str(), "icmp" | "icmpv6" | "ipv6-icmp")
    }

    /// The IP version the protocol fixes (`verify_rule`: icmp is IPv4,
    /// icmpv6 and ipv6-icmp IPv6).
    pub fn v6(&self) -> Option<bool> {
        match self.0.as_str() {
            "icmp" => Some(false),
            "icmpv6" | "ipv6-icmp" => Some(true),
            _ => None,
        }
    }

    /// TCP, by name or number.
    pub fn is_tcp(&self) -> bool {
        matches!(self.0.as_str(), "tcp" | "6")
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `icmp_type` is an ICMP type name for the rule's protocol
/// (`verify_rule`: icmp reads `$icmp_type_names`, icmpv6 and ipv6-icmp
/// `$icmpv6_type_names`).
pub fn icmp_type_ok(proto: &Proto, icmp_type: &str) -> bool {
    if proto.as_str() == "icmp" {
        ICMP_TYPES.contains(&icmp_type)
    } else {
        ICMPV6_TYPES.contains(&icmp_type)
    }
}

/// A log level (`pve-fw-loglevel`, Firewall.pm).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Emerg,
    Alert,
    Crit,
    Err,
    Warning,
    Notice,
    Info,
    Debug,
    Nolog,
}

impl LogLevel {
    pub const ALL: [LogLevel; 9] = [
        LogLevel::Emerg,
        LogLevel::Alert,
        LogLevel::Crit,
        LogLevel::Err,
        LogLevel::Warning,
        LogLevel::Notice,
        LogLevel::Info,
        LogLevel::Debug,
        LogLevel::Nolog,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Emerg => "emerg",
            LogLevel::Alert => "alert",
            LogLevel::Crit => "crit",
            LogLevel::Err => "err",
            LogLevel::Warning => "warning",
            LogLevel::Notice => "notice",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Nolog => "nolog",
        }
    }

    pub fn parse(s: &str) -> Result<LogLevel, String> {
        LogLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| format!("value '{s}' does not have a value in the enumeration"))
    }
}

/// A network interface name as `pve_verify_iface` (pve-common's
/// `PVE/JSONSchema.pm`) accepts it: `[a-z][a-z0-9_]{1,20}([:.]\d+)?`,
/// ignoring case.
pub fn is_iface(s: &str) -> bool {
    let (base, suffix) = match s.find([':', '.']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mut chars = base.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    first_ok
        && (2..=21).contains(&base.len())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && suffix.is_none_or(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// A guest's interface name: `net\d+` (`verify_rule` for vm and ct).
pub fn is_guest_iface(s: &str) -> bool {
    s.strip_prefix("net")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}
