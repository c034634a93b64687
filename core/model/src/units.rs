//! Human quantities from manifests and configuration: byte sizes with units
//! (`8GiB`, `512MiB`, `0.5GiB`, `1G`) and Go-style durations (`30s`, `5m`).
//!
//! These are the manifest's grammar, not PVE's: PVE's own size tokens
//! (`size=32G`) live in `wire`.

use std::fmt;

use serde::{Deserialize, Serialize};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// A byte count parsed from a human quantity. Binary units `Ki/KiB … Pi/PiB`
/// (×1024ⁿ), decimal units `K/KB … P/PB` (×1000ⁿ), a bare number is bytes;
/// units are case-insensitive; a fraction is allowed when the result is a
/// whole number of bytes (`0.5GiB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Quantity(u64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuantityError(pub String);

impl Quantity {
    pub fn from_bytes(bytes: u64) -> Quantity {
        Quantity(bytes)
    }

    pub fn bytes(self) -> u64 {
        self.0
    }

    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let unit = unit.trim();
        let bad = || {
            QuantityError(format!(
                "invalid quantity {text:?}: use a number with a unit, e.g. \"512MiB\", \"8GiB\", \"0.5GiB\" (binary Ki/Mi/Gi/Ti/Pi, decimal K/M/G/T/P, bare number = bytes)"
            ))
        };
        if num.is_empty()
            || num.starts_with('.')
            || num.ends_with('.')
            || num.matches('.').count() > 1
        {
            return Err(bad());
        }
        let mult: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "ki" | "kib" => KIB,
            "mi" | "mib" => MIB,
            "gi" | "gib" => GIB,
            "ti" | "tib" => GIB * KIB,
            "pi" | "pib" => GIB * MIB,
            "k" | "kb" => 1000,
            "m" | "mb" => 1000_u64.pow(2),
            "g" | "gb" => 1000_u64.pow(3),
            "t" | "tb" => 1000_u64.pow(4),
            "p" | "pb" => 1000_u64.pow(5),
            _ => return Err(bad()),
        };
        let (int_part, frac_part) = match num.split_once('.') {
            Some((i, f)) => (i, f),
            None => (num, ""),
        };
        let int: u64 = int_part.parse().map_err(|_| bad())?;
        let mut total = int.checked_mul(mult).ok_or_else(|| too_large(text))?;
        if !frac_part.is_empty() {
            // Exact decimal arithmetic: frac / 10^len * mult must be whole.
            if frac_part.len() > 12 {
                return Err(bad());
            }
            let frac: u128 = frac_part.parse().map_err(|_| bad())?;
            let scale = 10_u128.pow(frac_part.len() as u32);
            let scaled = frac * mult as u128;
            if !scaled.is_multiple_of(scale) {
                return Err(QuantityError(format!(
                    "invalid quantity {text:?}: the fraction is not a whole number of bytes"
                )));
            }
            let add = u64::try_from(scaled / scale).map_err(|_| too_large(text))?;
            total = total.checked_add(add).ok_or_else(|| too_large(text))?;
        }
        Ok(Quantity(total))
    }

    /// Whole MiB, or `None` when the value is not a whole number of MiB.
    pub fn whole_mib(self) -> Option<u64> {
        self.0.is_multiple_of(MIB).then_some(self.0 / MIB)
    }

    /// GiB as PVE's volume-allocation syntax wants it (`50`, `0.5`).
    /// Trailing zeros trimmed; exact for every multiple of 1 KiB.
    pub fn gib_text(self) -> String {
        let whole = self.0 / GIB;
        let rem = self.0 % GIB;
        if rem == 0 {
            return whole.to_string();
        }
        // rem / 2^30 = rem * 5^30 / 10^30: exactly 30 decimal digits.
        let mut frac = format!("{:030}", (rem as u128) * 5_u128.pow(30));
        while frac.ends_with('0') {
            frac.pop();
        }
        format!("{whole}.{frac}")
    }
}

/// The unit PVE's API takes a size in: memory in MiB, volume sizes in GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireUnit {
    MiB,
    GiB,
}

impl WireUnit {
    fn bytes(self) -> u64 {
        match self {
            WireUnit::MiB => MIB,
            WireUnit::GiB => GIB,
        }
    }

    fn name(self) -> &'static str {
        match self {
            WireUnit::MiB => "MiB",
            WireUnit::GiB => "GiB",
        }
    }
}

/// The binary spelling an operator most likely meant by a decimal or bare
/// quantity: PVE itself writes `32G` for 32 GiB, so `32G` and `32GB` mean
/// `32GiB`; a bare number means the unit PVE takes the value in (`4096`
/// memory is `4096MiB`). `None` for a binary unit, or text that is no
/// quantity at all.
pub fn binary_spelling(text: &str, wire: WireUnit) -> Option<String> {
    let t = text.trim();
    // Zero is zero in every unit: nothing else was meant.
    Quantity::parse(t).ok().filter(|q| q.bytes() > 0)?;
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => Some(format!("{num}{}", wire.name())),
        u @ ("k" | "kb" | "m" | "mb" | "g" | "gb" | "t" | "tb" | "p" | "pb") => {
            let letter = u[..1].to_ascii_uppercase();
            Some(format!("{num}{letter}iB"))
        }
        _ => None,
    }
}

/// A decimal or bare quantity that does not come out whole in the unit
/// PVE takes it in: what it comes to, and what to write instead
/// (`32G is 29.80 GiB; PVE's 32G means 32GiB: write 32GiB`). It is the
/// manifest's grammar and stays valid; the surprise is worth a warning.
pub fn surprise(text: &str, wire: WireUnit) -> Option<String> {
    let t = text.trim();
    let q = Quantity::parse(t).ok()?;
    // Whole in PVE's unit (nearly every quantity): no surprise, and no
    // spelling to work out.
    if q.bytes().is_multiple_of(wire.bytes()) {
        return None;
    }
    let meant = binary_spelling(t, wire)?;
    let came = q.bytes() as f64 / wire.bytes() as f64;
    let unit = wire.name();
    let pve = meant.trim_end_matches("iB");
    Some(if t.bytes().all(|b| b.is_ascii_digit()) {
        format!("{t} is {t} bytes ({came:.2} {unit}): a bare number counts bytes; write {meant}")
    } else {
        format!("{t} is {came:.2} {unit}; PVE's {pve} means {meant}: write {meant}")
    })
}

fn too_large(text: &str) -> QuantityError {
    QuantityError(format!("invalid quantity {text:?}: too large"))
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, size) in [
            ("PiB", GIB * MIB),
            ("TiB", GIB * KIB),
            ("GiB", GIB),
            ("MiB", MIB),
            ("KiB", KIB),
        ] {
            if b >= size && b.is_multiple_of(size) {
                return write!(f, "{}{unit}", b / size);
            }
        }
        write!(f, "{b}")
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Judged once the value is read, so an error points where serde
        // puts a refused value, not inside it.
        match d.deserialize_any(RawQuantity)? {
            Raw::Bytes(n) => Ok(Quantity(n)),
            Raw::Text(s) => Quantity::parse(&s).map_err(serde::de::Error::custom),
            Raw::Neither => Err(serde::de::Error::custom(
                "invalid value: use a whole number (0 or more) or a text value",
            )),
        }
    }
}

/// What a size was written as.
enum Raw {
    Bytes(u64),
    Text(String),
    /// Neither a whole number (0 or more) nor a text.
    Neither,
}

/// Reads any value into a [`Raw`], consuming it whole.
struct RawQuantity;

impl<'de> serde::de::Visitor<'de> for RawQuantity {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number (0 or more) or a text value")
    }
    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Raw, E> {
        Ok(Raw::Bytes(n))
    }
    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Raw, E> {
        Ok(u64::try_from(n).map_or(Raw::Neither, Raw::Bytes))
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Raw, E> {
        Ok(Raw::Text(s.to_owned()))
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Raw, E> {
        Ok(Raw::Neither)
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<Raw, E> {
        Ok(Raw::Neither)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Neither)
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Neither)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(Raw::Neither)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Raw::Neither)
    }
}

/// What `Deserialize` takes: a whole number of bytes, or the text `parse`
/// reads (a number, an optional fraction, an optional unit of any case).
/// The fraction's "whole number of bytes" rule is the loader's alone.
impl schemars::JsonSchema for Quantity {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Quantity".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A byte size: a number with a unit, e.g. \"512MiB\", \"8GiB\", \"0.5GiB\" (binary Ki/Mi/Gi/Ti/Pi, decimal K/M/G/T/P, case-insensitive, an optional trailing B), or a whole number of bytes.",
            "oneOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": QUANTITY_PATTERN}
            ]
        })
    }
}

/// The text `Quantity::parse` accepts, as a regular expression.
pub const QUANTITY_PATTERN: &str = r"^\s*[0-9]+(\.[0-9]+)?\s*([bB]|[kKmMgGtTpP][iI]?[bB]?)?\s*$";

/// A Go-style duration (`90s`, `5m`, `1h30m`, `500ms`), kept in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Duration(u64);

impl Duration {
    pub fn from_millis(ms: u64) -> Duration {
        Duration(ms)
    }

    pub const fn from_secs(s: u64) -> Duration {
        Duration(s.saturating_mul(1000))
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.0)
    }

    pub fn parse(text: &str) -> Result<Duration, QuantityError> {
        let bad = || {
            QuantityError(format!(
                "invalid duration {text:?}: use a number with a unit, e.g. \"30s\", \"5m\", \"1h30m\", \"500ms\""
            ))
        };
        let t = text.trim();
        if t.is_empty() {
            return Err(bad());
        }
        if t == "0" {
            return Ok(Duration(0));
        }
        let mut total: u64 = 0;
        let mut rest = t;
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                return Err(bad());
            }
            let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            let mult = match &rest[..unit_len] {
                "ms" => 1,
                "s" => 1000,
                "m" => 60_000,
                "h" => 3_600_000,
                _ => return Err(bad()),
            };
            rest = &rest[unit_len..];
            total = n
                .checked_mul(mult)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(bad)?;
        }
        Ok(Duration(total))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0;
        if ms.is_multiple_of(3_600_000) && ms > 0 {
            write!(f, "{}h", ms / 3_600_000)
        } else if ms.is_multiple_of(60_000) && ms > 0 {
            write!(f, "{}m", ms / 60_000)
        } else if ms.is_multiple_of(1000) {
            write!(f, "{}s", ms / 1000)
        } else {
            write!(f, "{ms}ms")
        }
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Duration::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn binary_and_decimal_units() {
        assert_eq!(Quantity::parse("8GiB").unwrap().bytes(), 8 * GIB);
        assert_eq!(Quantity::parse("8gi").unwrap().bytes(), 8 * GIB);
        assert_eq!(Quantity::parse("1G").unwrap().bytes(), 1_000_000_000);
        assert_eq!(Quantity::parse("512").unwrap().bytes(), 512);
        assert_eq!(Quantity::parse("0.5GiB").unwrap().bytes(), GIB / 2);
    }

    #[test]
    fn bad_quantities_say_what_is_valid() {
        for bad in ["", "GiB", "8 bananas", "1.2.3G", "-1G", ".5G", "0.1B"] {
            let e = Quantity::parse(bad).unwrap_err();
            assert!(e.0.contains("invalid quantity"), "{bad}: {e}");
        }
    }

    #[test]
    fn memory_must_be_whole_mib() {
        assert_eq!(Quantity::parse("8GiB").unwrap().whole_mib(), Some(8192));
        assert_eq!(Quantity::parse("1000").unwrap().whole_mib(), None);
    }

    #[test]
    fn gib_text_for_pve_allocation() {
        assert_eq!(Quantity::parse("50GiB").unwrap().gib_text(), "50");
        assert_eq!(Quantity::parse("0.5GiB").unwrap().gib_text(), "0.5");
        assert_eq!(Quantity::parse("4MiB").unwrap().gib_text(), "0.00390625");
    }

    #[test]
    fn decimal_and_bare_sizes_name_their_binary_spelling() {
        assert_eq!(
            binary_spelling("32G", WireUnit::GiB).as_deref(),
            Some("32GiB")
        );
        assert_eq!(
            binary_spelling("1.5gb", WireUnit::GiB).as_deref(),
            Some("1.5GiB")
        );
        assert_eq!(
            binary_spelling("4096", WireUnit::MiB).as_deref(),
            Some("4096MiB")
        );
        assert_eq!(binary_spelling("32GiB", WireUnit::GiB), None);
        assert_eq!(binary_spelling("lots", WireUnit::GiB), None);
    }

    #[test]
    fn a_size_that_is_not_whole_on_the_wire_is_a_surprise() {
        assert_eq!(
            surprise("32G", WireUnit::GiB).as_deref(),
            Some("32G is 29.80 GiB; PVE's 32G means 32GiB: write 32GiB")
        );
        assert_eq!(
            surprise("4096", WireUnit::GiB).as_deref(),
            Some("4096 is 4096 bytes (0.00 GiB): a bare number counts bytes; write 4096GiB")
        );
        // Whole in the wire unit, or written in binary units: no surprise.
        assert_eq!(surprise("32GiB", WireUnit::GiB), None);
        assert_eq!(surprise("1073741824", WireUnit::GiB), None);
        assert_eq!(surprise("1048576K", WireUnit::MiB), None);
        assert_eq!(surprise("0.5GiB", WireUnit::GiB), None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(Duration::parse("30s").unwrap().as_millis(), 30_000);
        assert_eq!(Duration::parse("1h30m").unwrap().as_millis(), 5_400_000);
        assert_eq!(Duration::parse("500ms").unwrap().as_millis(), 500);
        assert!(Duration::parse("30").is_err());
        assert!(Duration::parse("1d").is_err());
        assert_eq!(Duration::parse("30m").unwrap().to_string(), "30m");
    }
}
