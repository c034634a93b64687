//! Values that arrive as JSON numbers, strings, booleans or arrays depending
//! on endpoint and PVE version, normalised to text or typed scalars; and the
//! one encoding of a value placed in an API path segment.

use std::borrow::Cow;

use serde_json::Value;

use super::WireError;
use super::scalar::parse_bool;
use crate::names::Vmid;

/// A config value as text: strings verbatim, integers in decimal, floats
/// in shortest form, booleans as `1`/`0`; an array (LXC's raw `lxc` list of
/// `[key, value]` pairs) becomes one line per element, a pair as
/// `key: value`. `null` means "not set" and yields `None`.
pub fn json_to_text(v: &Value) -> Option<String> {
    json_text(v).map(Cow::into_owned)
}

/// [`json_to_text`], borrowing a string value rather than copying it: for
/// a reader that copies the text once, into where it is kept.
pub fn json_text(v: &Value) -> Option<Cow<'_, str>> {
    let text = match v {
        Value::Null => return None,
        Value::String(s) => return Some(Cow::Borrowed(s)),
        Value::Bool(b) => if *b { "1" } else { "0" }.to_owned(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (None, Some(i), _) => i.to_string(),
            (None, None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => {
                format!("{}", f as i64)
            }
            _ => n.to_string(),
        },
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::Array(pair) => pair
                    .iter()
                    .filter_map(json_to_text)
                    .collect::<Vec<_>>()
                    .join(": "),
                other => json_to_text(other).unwrap_or_default(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(_) => v.to_string(),
    };
    Some(Cow::Owned(text))
}

/// `vmid`: a number in /cluster/resources, a string in the LXC list.
pub fn json_vmid(v: &Value) -> Result<Vmid, WireError> {
    let bad = || WireError::invalid("vmid", &v.to_string(), "a guest id from 100 to 999999999");
    let n = match v {
        Value::Number(n) => n.as_u64().ok_or_else(bad)?,
        Value::String(s) => s.trim().parse::<u64>().map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    Vmid::new(n).map_err(|_| bad())
}

/// `template`: `1`, `"1"`, `"true"`, `true`; absent/`null` is not a template.
pub fn json_template_flag(v: Option<&Value>) -> Result<bool, WireError> {
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => {
            let text = json_to_text(other).unwrap_or_default();
            parse_bool(&text).map_err(|e| e.for_key("template"))
        }
    }
}

/// Percent-encodes one path segment (a node name, a storage id, a UPID).
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_and_bools_normalise_to_text() {
        assert_eq!(json_to_text(&json!(8192)).unwrap(), "8192");
        assert_eq!(json_to_text(&json!("4096")).unwrap(), "4096");
        assert_eq!(json_to_text(&json!(true)).unwrap(), "1");
        assert_eq!(json_to_text(&json!(0.5)).unwrap(), "0.5");
        assert_eq!(json_to_text(&json!(null)), None);
    }

    #[test]
    fn lxc_raw_pairs_become_lines() {
        let v = json!([["lxc.apparmor.profile", "unconfined"], ["lxc.cap.drop", ""]]);
        assert_eq!(
            json_to_text(&v).unwrap(),
            "lxc.apparmor.profile: unconfined\nlxc.cap.drop: "
        );
    }

    #[test]
    fn vmid_is_a_number_or_a_string() {
        assert_eq!(json_vmid(&json!(100)).unwrap().get(), 100);
        assert_eq!(json_vmid(&json!("106")).unwrap().get(), 106);
        assert!(json_vmid(&json!("abc")).is_err());
        assert!(json_vmid(&json!(5)).is_err());
    }

    #[test]
    fn template_flag_accepts_number_string_and_true() {
        assert!(json_template_flag(Some(&json!(1))).unwrap());
        assert!(json_template_flag(Some(&json!("1"))).unwrap());
        assert!(json_template_flag(Some(&json!("true"))).unwrap());
        assert!(!json_template_flag(Some(&json!(0))).unwrap());
        assert!(!json_template_flag(None).unwrap());
    }
}
