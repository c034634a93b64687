//! Scalar typing and rendering exactly as sops 3.11 (Go, yaml.v3) does it.
//! The MAC hashes each plaintext leaf as Go renders the value yaml.v3 typed,
//! so this module decides what an unquoted YAML scalar is (null, bool, int,
//! float, timestamp, string) and how Go prints it. It must never guess: a
//! form it cannot type exactly the way yaml.v3 does is refused.

/// What an unquoted (plain) YAML scalar resolves to under yaml.v3.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// Canonical RFC 3339 text (Go `time.Time.MarshalText`).
    Time(String),
    Str,
}

/// Types a plain scalar as yaml.v3 does. `Err` names a form that yaml.v3
/// accepts but this crate does not reproduce (unsigned ints above `i64`,
/// unusual timestamps, merge keys).
pub(crate) fn resolve_plain(text: &str) -> Result<Resolved, String> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Resolved::Null),
        "true" | "True" | "TRUE" => return Ok(Resolved::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Resolved::Bool(false)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Ok(Resolved::Float(f64::INFINITY));
        }
        "-.inf" | "-.Inf" | "-.INF" => return Ok(Resolved::Float(f64::NEG_INFINITY)),
        ".nan" | ".NaN" | ".NAN" => return Ok(Resolved::Float(f64::NAN)),
        "<<" => return Err("YAML merge keys (`<<`) are not supported".into()),
        _ => {}
    }
    let first = text.as_bytes()[0];
    if first == b'.' {
        return Ok(if is_yaml_float(text) {
            text.parse::<f64>().map_or(Resolved::Str, Resolved::Float)
        } else {
            Resolved::Str
        });
    }
    if !(first.is_ascii_digit() || first == b'+' || first == b'-') {
        return Ok(Resolved::Str);
    }
    if looks_like_timestamp(text) {
        return parse_timestamp(text)
            .map(Resolved::Time)
            .ok_or_else(|| "a plaintext value looks like a YAML timestamp in a form this reader does not type; quote it".into());
    }
    let plain: String = text.chars().filter(|c| *c != '_').collect();
    if let Some(i) = go_parse_int_base0(&plain) {
        return Ok(Resolved::Int(i));
    }
    if !plain.starts_with(['+', '-']) && go_parse_uint_base0(&plain).is_some() {
        return Err("a plaintext integer above the signed 64-bit range is not supported".into());
    }
    if is_yaml_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
    {
        return Ok(Resolved::Float(f));
    }
    Ok(Resolved::Str)
}

/// Go `strconv.FormatFloat(f, 'f', -1, 64)`: shortest digits, never an
/// exponent.
pub(crate) fn go_float(f: f64) -> String {
    // Rust's Display for f64 is also shortest-round-trip without exponent.
    non_finite(f, ["NaN", "+Inf", "-Inf"]).unwrap_or_else(|| format!("{f}"))
}

/// The word for NaN, +infinity or -infinity, in that order; `None` for a
/// finite `f`.
pub(crate) fn non_finite(f: f64, [nan, inf, neg_inf]: [&str; 3]) -> Option<String> {
    if f.is_nan() {
        Some(nan.into())
    } else if f == f64::INFINITY {
        Some(inf.into())
    } else if f == f64::NEG_INFINITY {
        Some(neg_inf.into())
    } else {
        None
    }
}

/// sops renders booleans Title-cased (inherited from the Python sops).
pub(crate) fn go_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Go `strconv.Atoi`.
pub(crate) fn go_atoi(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

/// Go `strconv.ParseFloat(s, 64)` for the forms sops writes and a few more.
pub(crate) fn go_parse_float(s: &str) -> Option<f64> {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let negative = s.starts_with('-');
    let lower = unsigned.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Some(if negative {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if lower == "nan" {
        return (unsigned.len() == s.len()).then_some(f64::NAN);
    }
    if unsigned.is_empty()
        || !unsigned
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
    {
        return None;
    }
    s.parse::<f64>().ok()
}

/// Go `strconv.ParseBool`.
pub(crate) fn go_parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// yaml.v3's float pattern `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go `strconv.ParseInt(s, 0, 64)`.
fn go_parse_int_base0(s: &str) -> Option<i64> {
    let (negative, unsigned) = match s.as_bytes().first()? {
        b'+' => (false, &s[1..]),
        b'-' => (true, &s[1..]),
        _ => (false, s),
    };
    let magnitude = go_parse_uint_base0(unsigned)?;
    if negative {
        if magnitude <= i64::MAX as u64 + 1 {
            Some((magnitude as i64).wrapping_neg())
        } else {
            None
        }
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Go `strconv.ParseUint(s, 0, 64)` (no sign).
fn go_parse_uint_base0(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let b = s.as_bytes();
    let (radix, digits) = if b[0] == b'0' {
        match b.get(1).map(u8::to_ascii_lowercase) {
            Some(b'b') if b.len() >= 3 => (2, &s[2..]),
            Some(b'o') if b.len() >= 3 => (8, &s[2..]),
            Some(b'x') if b.len() >= 3 => (16, &s[2..]),
            _ => (8, &s[1..]),
        }
    } else {
        (10, s)
    };
    if digits.is_empty() {
        return (radix == 8).then_some(0);
    }
    if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// yaml.v3 only tries a timestamp when the scalar starts with exactly four
/// digits and a dash.
fn looks_like_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 4 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
}

/// Parses the yaml.v3 timestamp forms `2006-1-2`, `2006-1-2T15:4:5[.n]Z07:00`
/// (also with `t`) and `2006-1-2 15:4:5[.n]` (UTC), returning Go's
/// `MarshalText` rendering.
pub(crate) fn parse_timestamp(s: &str) -> Option<String> {
    let (year, rest) = (s.get(..4)?, s.get(5..)?);
    let year: u32 = year.parse().ok()?;
    let (month, rest) = take_num(rest, 1, 2)?;
    let rest = rest.strip_prefix('-')?;
    let (day, rest) = take_num(rest, 1, 2)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    let date = format!("{year:04}-{month:02}-{day:02}");
    if rest.is_empty() {
        return Some(format!("{date}T00:00:00Z"));
    }
    let (zoned, rest) = if let Some(r) = rest.strip_prefix(['T', 't']) {
        (true, r)
    } else if let Some(r) = rest.strip_prefix(' ') {
        (false, r)
    } else {
        return None;
    };
    let (hour, rest) = take_num(rest, 1, 2)?;
    let (minute, rest) = take_num(rest.strip_prefix(':')?, 1, 2)?;
    let (second, mut rest) = take_num(rest.strip_prefix(':')?, 1, 2)?;
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut fraction = String::new();
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 || n > 9 {
            return None;
        }
        fraction = r[..n].trim_end_matches('0').to_string();
        rest = &r[n..];
    }
    let fraction = if fraction.is_empty() {
        String::new()
    } else {
        format!(".{fraction}")
    };
    let zone = if !zoned {
        if !rest.is_empty() {
            return None;
        }
        "Z".to_string()
    } else if rest == "Z" {
        "Z".to_string()
    } else {
        let sign = rest.get(..1)?;
        if sign != "+" && sign != "-" {
            return None;
        }
        let (zh, r) = take_num(&rest[1..], 2, 2)?;
        let (zm, r) = take_num(r.strip_prefix(':')?, 2, 2)?;
        if !r.is_empty() || zh > 23 || zm > 59 {
            return None;
        }
        if zh == 0 && zm == 0 {
            "Z".to_string()
        } else {
            format!("{sign}{zh:02}:{zm:02}")
        }
    };
    Some(format!(
        "{date}T{hour:02}:{minute:02}:{second:02}{fraction}{zone}"
    ))
}

fn take_num(s: &str, min: usize, max: usize) -> Option<(u32, &str)> {
    let n = s.bytes().take(max).take_while(u8::is_ascii_digit).count();
    if n < min {
        return None;
    }
    Some((s[..n].parse().ok()?, &s[n..]))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn plain_scalars_type_as_yaml_v3_does() {
        let cases: &[(&str, Resolved)] = &[
            ("8006", Resolved::Int(8006)),
            ("+12", Resolved::Int(12)),
            ("1_000", Resolved::Int(1000)),
            ("0755", Resolved::Int(493)),
            ("0o17", Resolved::Int(15)),
            ("0b101", Resolved::Int(5)),
            ("0x1F", Resolved::Int(31)),
            ("-42", Resolved::Int(-42)),
            ("1.50", Resolved::Float(1.5)),
            ("1e3", Resolved::Float(1000.0)),
            ("99999999999999999999", Resolved::Float(1e20)),
            ("true", Resolved::Bool(true)),
            ("FALSE", Resolved::Bool(false)),
            ("yes", Resolved::Str),
            ("off", Resolved::Str),
            ("~", Resolved::Null),
            ("2024-01-01", Resolved::Time("2024-01-01T00:00:00Z".into())),
            (
                "2024-01-01 10:20:30",
                Resolved::Time("2024-01-01T10:20:30Z".into()),
            ),
            (
                "2024-01-01T10:20:30.5+02:00",
                Resolved::Time("2024-01-01T10:20:30.5+02:00".into()),
            ),
            ("https://pve:8006", Resolved::Str),
            ("1.2.3", Resolved::Str),
        ];
        for (text, want) in cases {
            assert_eq!(&resolve_plain(text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn floats_render_as_go_formatfloat() {
        assert_eq!(go_float(2.0), "2");
        assert_eq!(go_float(1e21), "1000000000000000000000");
        assert_eq!(go_float(-0.0), "-0");
        assert_eq!(go_float(0.000001), "0.000001");
        assert_eq!(go_float(f64::INFINITY), "+Inf");
        assert_eq!(go_float(f64::NAN), "NaN");
    }
}
