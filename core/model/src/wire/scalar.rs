//! Scalars inside PVE config values: sizes with binary suffixes, PVE's
//! boolean grammar, `memory`, `agent`, `boot`, and DNS lists.

use std::collections::BTreeSet;

use super::WireError;
use super::propstr::{PropToken, PropertyString, join_tokens};

const GIB: u128 = 1 << 30;

/// A size in bytes. PVE writes sizes as a number with a binary suffix
/// (`32G`, `1M`, `528K`, `1.5T`) or as plain bytes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

impl Bytes {
    /// `<decimal>[K|M|G|T|P]` (binary multiples, case-insensitive, an
    /// optional trailing `B`/`iB` tolerated); a fraction is allowed
    /// (`1.5T`). A fraction of a byte is rounded down.
    pub fn parse(s: &str) -> Result<Bytes, WireError> {
        let bad = || {
            WireError::invalid(
                "size",
                s,
                "a number with an optional K/M/G/T suffix, e.g. 32G",
            )
        };
        let t = super::propstr::trimmed(s);
        // Suffixes in any case, matched in place (every live disk's
        // `size=` is read each cycle); the number is digits and a point,
        // which have no case.
        let stem = strip_suffix_ascii_ci(t, "ib")
            .or_else(|| strip_suffix_ascii_ci(t, "b"))
            .unwrap_or(t);
        let unit = stem.as_bytes().last().map(u8::to_ascii_lowercase);
        let shift = match unit {
            Some(b'k') => 10,
            Some(b'm') => 20,
            Some(b'g') => 30,
            Some(b't') => 40,
            Some(b'p') => 50,
            _ => 0,
        };
        let num = if shift == 0 {
            stem
        } else {
            stem.get(..stem.len() - 1).unwrap_or("")
        };
        let v = scaled(num, shift).ok_or_else(bad)?;
        u64::try_from(v).map(Bytes).map_err(|_| bad())
    }

    /// Create-form size number in GiB (`50`, `0.5`): PVE reads the number
    /// after the storage id of an "allocate new volume" value as GiB
    /// (a byte count gave "Volume too large (8.00 EiB)" [PROBE]).
    pub fn parse_gib(s: &str) -> Result<Bytes, WireError> {
        let v = scaled(s.trim(), 30)
            .ok_or_else(|| WireError::invalid("size", s, "a number of GiB such as 32 or 0.5"))?;
        u64::try_from(v)
            .map(Bytes)
            .map_err(|_| WireError::invalid("size", s, "a number of GiB small enough for PVE"))
    }

    pub fn get(self) -> u64 {
        self.0
    }

    /// The exact size in GiB as a decimal (`50`, `0.5`, `0.00390625`): the
    /// create form's number.
    pub fn to_gib_string(self) -> String {
        let v = u128::from(self.0);
        let mut out = (v / GIB).to_string();
        let mut rem = v % GIB;
        if rem != 0 {
            out.push('.');
            // 2^30 divides 10^30, so this ends after at most 30 digits.
            while rem != 0 {
                rem *= 10;
                out.push(char::from(b'0' + (rem / GIB) as u8));
                rem %= GIB;
            }
        }
        out
    }

    /// PVE's own size spelling: the largest binary suffix that divides
    /// exactly (`32G`, `528K`), else plain bytes.
    pub fn to_wire(&self) -> String {
        let v = self.0;
        for (shift, suffix) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
            if v != 0 && v.is_multiple_of(1u64 << shift) {
                return format!("{}{suffix}", v >> shift);
            }
        }
        v.to_string()
    }
}

/// `<decimal> * 2^shift`, rounded down, computed exactly: `123`, `1.5`,
/// `.5`; at most 20 integer and 30 fraction digits (2^30 divides 10^30, so
/// every GiB amount in bytes has an exact decimal of that length).
/// `s` without `suffix` (ASCII, matched in any case).
fn strip_suffix_ascii_ci<'a>(s: &'a str, suffix: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(suffix.len())?;
    let (stem, end) = (s.get(..cut)?, s.get(cut..)?);
    end.eq_ignore_ascii_case(suffix).then_some(stem)
}

fn scaled(s: &str, shift: u32) -> Option<u128> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty()) || int.len() > 20 || frac.len() > 30 {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let i: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let f: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let digits = frac.len() as u32;
    let five = 5u128.pow(digits);
    // f * 2^shift / 10^digits without overflow: 10^digits = 2^digits * 5^digits.
    let frac_part = if shift >= digits {
        (f << (shift - digits)) / five
    } else {
        (f >> (digits - shift)) / five
    };
    i.checked_shl(shift)?.checked_add(frac_part)
}

/// PVE's boolean grammar: `1/0`, `yes/no`, `on/off`, `true/false`,
/// case-insensitive.
pub fn parse_bool(s: &str) -> Result<bool, WireError> {
    // Compared in place: every flag of every guest is read each cycle.
    let t = s.trim();
    let any = |words: [&str; 4]| words.iter().any(|w| t.eq_ignore_ascii_case(w));
    if any(["1", "yes", "on", "true"]) {
        Ok(true)
    } else if any(["0", "no", "off", "false"]) {
        Ok(false)
    } else {
        Err(WireError::invalid(
            "boolean",
            s,
            "1/0, yes/no, on/off or true/false",
        ))
    }
}

/// ProxOps always writes PVE booleans as `1`/`0`: PVE 9.2 rejects
/// `start=true` [PROBE §20.4].
pub fn write_bool(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// A config `memory` value in MiB: a number, a numeric string (PVE 8.4/9
/// send `"4096"`), or the property string `current=<MiB>[,…]`.
pub fn parse_memory_mib(s: &str) -> Result<u64, WireError> {
    let expected = "MiB as a whole number, or current=<MiB>";
    let t = super::propstr::trimmed(s);
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    let p = PropertyString::parse(t).map_err(|_| WireError::invalid("memory", s, expected))?;
    let v = p
        .get("current")
        .or_else(|| p.positional())
        .ok_or_else(|| WireError::invalid("memory", s, expected))?;
    v.parse::<u64>()
        .map_err(|_| WireError::invalid("memory", s, expected))
}

/// qemu `agent`: `1`, `0`, `enabled=1`, `1,fstrim_cloned_disks=1`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Agent {
    pub enabled: bool,
    /// Tokens other than the enable flag, verbatim and in order.
    pub extra: Vec<PropToken>,
}

impl Agent {
    pub fn parse(s: &str) -> Result<Agent, WireError> {
        let p = PropertyString::parse(s).map_err(|e| e.for_key("agent"))?;
        let mut enabled = None;
        let mut extra = Vec::new();
        for (i, t) in p.into_tokens().into_iter().enumerate() {
            match &t {
                PropToken::Positional(v) if i == 0 => {
                    enabled = Some(parse_bool(v).map_err(|e| e.for_key("agent"))?)
                }
                PropToken::Pair { key, value } if key == "enabled" => {
                    enabled = Some(parse_bool(value).map_err(|e| e.for_key("agent"))?)
                }
                _ => extra.push(t),
            }
        }
        let enabled = enabled.ok_or_else(|| WireError::missing("agent", "enabled flag", s))?;
        Ok(Agent { enabled, extra })
    }

    pub fn to_wire(&self) -> String {
        join_tokens(
            std::iter::once(write_bool(self.enabled).to_owned())
                .chain(self.extra.iter().map(PropToken::to_wire)),
        )
    }
}

/// qemu `boot`: `order=a;b;c`, or a legacy value (`c`, `cdn`) kept verbatim.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Boot {
    Order(Vec<String>),
    Legacy(String),
}

impl Boot {
    pub fn parse(s: &str) -> Result<Boot, WireError> {
        let t = s.trim();
        if let Some(rest) = t.strip_prefix("order=") {
            let order: Vec<String> = rest
                .split(';')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect();
            if order
                .iter()
                .any(|d| !d.bytes().all(|b| b.is_ascii_alphanumeric()))
            {
                return Err(WireError::invalid(
                    "boot",
                    s,
                    "order=<device>;<device>… with devices like scsi0, net0",
                ));
            }
            return Ok(Boot::Order(order));
        }
        if t.is_empty() || t.contains(',') || t.contains('=') {
            return Err(WireError::invalid(
                "boot",
                s,
                "order=<device>;<device>… or a legacy boot string",
            ));
        }
        Ok(Boot::Legacy(t.to_owned()))
    }

    pub fn to_wire(&self) -> String {
        match self {
            Boot::Order(o) => format!("order={}", o.join(";")),
            Boot::Legacy(s) => s.clone(),
        }
    }
}

/// `nameserver` / `searchdomain`: a list PVE reports space-separated and
/// ProxOps may have written comma-separated. Compared as a set.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DnsList {
    /// In first-seen order, without duplicates.
    pub entries: Vec<String>,
}

impl DnsList {
    pub fn parse(s: &str) -> Result<DnsList, WireError> {
        let mut entries: Vec<String> = Vec::new();
        for e in s
            .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .filter(|e| !e.is_empty())
        {
            if !e
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'_'))
            {
                return Err(WireError::invalid(
                    "dns list",
                    s,
                    "addresses or domains separated by spaces or commas",
                ));
            }
            if !entries.iter().any(|x| x == e) {
                entries.push(e.to_owned());
            }
        }
        Ok(DnsList { entries })
    }

    pub fn set(&self) -> BTreeSet<&str> {
        self.entries.iter().map(String::as_str).collect()
    }

    /// Space-separated, PVE's own spelling; accepted by qemu and lxc alike.
    pub fn to_wire(&self) -> String {
        self.entries.join(" ")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn binary_suffix_sizes_become_bytes() {
        assert_eq!(Bytes::parse("32G").unwrap().get(), 32 << 30);
        assert_eq!(Bytes::parse("1M").unwrap().get(), 1 << 20);
        assert_eq!(Bytes::parse("528K").unwrap().get(), 528 << 10);
        assert_eq!(Bytes::parse("1.5T").unwrap().get(), 3 << 39);
        assert_eq!(Bytes::parse("4096").unwrap().get(), 4096);
        assert_eq!(Bytes::parse("522284K").unwrap().to_wire(), "522284K");
        assert!(Bytes::parse("12X").is_err());
        assert!(Bytes::parse("").is_err());
    }

    #[test]
    fn create_form_size_is_gib_and_may_be_fractional() {
        assert_eq!(Bytes::parse_gib("0.5").unwrap().get(), 512 << 20);
        assert_eq!(Bytes::parse_gib("50").unwrap().to_gib_string(), "50");
        assert_eq!(Bytes(512 << 20).to_gib_string(), "0.5");
        assert_eq!(Bytes(4 << 20).to_gib_string(), "0.00390625");
    }

    #[test]
    fn disk_create_size_is_never_a_byte_count() {
        // 8589934592 as a create number is 8 EiB to PVE [PROBE §20.29].
        assert_eq!(Bytes(8 << 30).to_gib_string(), "8");
    }

    #[test]
    fn pve_booleans_read_every_spelling_and_write_1_or_0() {
        for t in ["1", "yes", "ON", "True"] {
            assert!(parse_bool(t).unwrap());
        }
        for f in ["0", "No", "off", "FALSE"] {
            assert!(!parse_bool(f).unwrap());
        }
        assert!(parse_bool("2").is_err());
    }

    #[test]
    fn start_flag_is_written_as_1_not_true() {
        assert_eq!(write_bool(true), "1");
        assert_eq!(write_bool(false), "0");
    }

    #[test]
    fn memory_arrives_as_number_text_or_current_property() {
        assert_eq!(parse_memory_mib("4096").unwrap(), 4096);
        assert_eq!(parse_memory_mib("current=2048").unwrap(), 2048);
        assert!(parse_memory_mib("lots").is_err());
    }

    #[test]
    fn agent_forms_seen_on_real_pve() {
        assert!(!Agent::parse("0").unwrap().enabled);
        assert!(Agent::parse("enabled=1").unwrap().enabled);
        let a = Agent::parse("1,fstrim_cloned_disks=1").unwrap();
        assert!(a.enabled);
        assert_eq!(a.to_wire(), "1,fstrim_cloned_disks=1");
    }

    #[test]
    fn boot_order_and_legacy_forms() {
        let b = Boot::parse("order=net0;ide2;scsi0").unwrap();
        assert_eq!(
            b,
            Boot::Order(vec!["net0".into(), "ide2".into(), "scsi0".into()])
        );
        assert_eq!(b.to_wire(), "order=net0;ide2;scsi0");
        assert_eq!(Boot::parse("c").unwrap(), Boot::Legacy("c".into()));
    }

    #[test]
    fn nameservers_split_on_space_or_comma_and_compare_as_a_set() {
        let a = DnsList::parse("1.1.1.1 8.8.8.8").unwrap();
        let b = DnsList::parse("8.8.8.8,1.1.1.1,8.8.8.8").unwrap();
        assert_eq!(a.set(), b.set());
        assert_eq!(b.to_wire(), "8.8.8.8 1.1.1.1");
    }
}
