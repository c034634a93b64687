//! The YAML text of an adopted manifest: 2-space indentation, block
//! sequences indented under their key, fields in the manifest structs'
//! declaration order, each string as `yaml_emit::string` writes it: plain
//! only when no YAML reader could take it for anything else, otherwise
//! double-quoted with escapes, so user text such as a description survives
//! byte for byte.

use serde::Serialize;
use serde_yaml::Value;

use proxops_model::units::Quantity;
use proxops_model::yaml_emit::string;

/// Keys whose integer value is a byte count: written as a quantity
/// (`2GiB`) rather than a bare number of bytes.
const QUANTITY_KEYS: &[&str] = &["memory", "size", "swap"];

/// The document as YAML text, ending in a newline.
pub(crate) fn to_yaml<T: Serialize>(doc: &T) -> Result<String, String> {
    let mut value = serde_yaml::to_value(doc).map_err(|e| e.to_string())?;
    quantities(&mut value);
    let mut out = String::new();
    match &value {
        Value::Mapping(m) => write_map(m, 0, &mut out),
        other => return Err(format!("a manifest must be a mapping, not {other:?}")),
    }
    Ok(out)
}

fn quantities(v: &mut Value) {
    match v {
        Value::Mapping(m) => {
            for (k, child) in m.iter_mut() {
                let is_quantity = k.as_str().is_some_and(|k| QUANTITY_KEYS.contains(&k));
                if is_quantity && let Some(n) = child.as_u64() {
                    *child = Value::String(Quantity::from_bytes(n).to_string());
                } else {
                    quantities(child);
                }
            }
        }
        Value::Sequence(s) => s.iter_mut().for_each(quantities),
        _ => {}
    }
}

fn pad(indent: usize) -> String {
    " ".repeat(indent)
}

fn write_map(m: &serde_yaml::Mapping, indent: usize, out: &mut String) {
    for (k, v) in m {
        let key = scalar(k);
        match v {
            Value::Mapping(inner) if !inner.is_empty() => {
                out.push_str(&format!("{}{key}:\n", pad(indent)));
                write_map(inner, indent + 2, out);
            }
            Value::Sequence(inner) if !inner.is_empty() => {
                out.push_str(&format!("{}{key}:\n", pad(indent)));
                write_seq(inner, indent + 2, out);
            }
            other => {
                let text = scalar(other);
                let line = format!("{}{key}: {text}", pad(indent));
                if line.chars().count() <= MAX_LINE {
                    out.push_str(&line);
                    out.push('\n');
                } else if text.starts_with('"') {
                    out.push_str(&format!("{}{key}:\n", pad(indent)));
                    fold_quoted(&text, indent + 2, out);
                } else {
                    // One long word: alone on its line, yamllint accepts it.
                    out.push_str(&format!(
                        "{}{key}:\n{}{text}\n",
                        pad(indent),
                        pad(indent + 2)
                    ));
                }
            }
        }
    }
}

/// yamllint's default line length.
const MAX_LINE: usize = 80;

/// Writes a double-quoted scalar over several lines of at most
/// `MAX_LINE` columns, each but the last ending in an escaped line break
/// (`\`), which YAML removes without adding anything: the value stays
/// byte for byte. A line never starts with a space (YAML would strip it)
/// and an escape sequence is never split.
fn fold_quoted(quoted: &str, indent: usize, out: &mut String) {
    let inner = &quoted[1..quoted.len() - 1];
    let mut tokens: Vec<String> = Vec::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let mut t = String::from(c);
            if let Some(e) = chars.next() {
                t.push(e);
                if e == 'u' {
                    t.extend(chars.by_ref().take(4));
                }
            }
            tokens.push(t);
        } else {
            tokens.push(c.to_string());
        }
    }
    let width = MAX_LINE.saturating_sub(indent + 1).max(16);
    let len = |ts: &[String]| ts.iter().map(|t| t.chars().count()).sum::<usize>();
    let mut cur: Vec<String> = vec!["\"".to_owned()];
    let mut first = true;
    for t in tokens {
        cur.push(t);
        if len(&cur) <= width {
            continue;
        }
        // Break before the last non-space token that keeps the line
        // within the width (and leaves content on it).
        let min_k = if first { 2 } else { 1 };
        // Prefer a word boundary (after a space or an escaped newline).
        let mut acc = 0;
        let mut best = None;
        let mut boundary = None;
        for (k, x) in cur.iter().enumerate() {
            if k >= min_k && x != " " && acc <= width {
                best = Some(k);
                if cur[k - 1] == " " || cur[k - 1] == "\\n" {
                    boundary = Some(k);
                }
            }
            acc += x.chars().count();
        }
        let best = boundary.or(best);
        if let Some(k) = best {
            let rest = cur.split_off(k);
            out.push_str(&pad(indent));
            out.push_str(&cur.concat());
            out.push_str("\\\n");
            cur = rest;
            first = false;
        }
    }
    out.push_str(&pad(indent));
    out.push_str(&cur.concat());
    out.push_str("\"\n");
}

fn write_seq(s: &[Value], indent: usize, out: &mut String) {
    for item in s {
        let mut body = String::new();
        match item {
            Value::Mapping(inner) if !inner.is_empty() => write_map(inner, indent + 2, &mut body),
            Value::Sequence(inner) if !inner.is_empty() => write_seq(inner, indent + 2, &mut body),
            other => {
                out.push_str(&format!("{}- {}\n", pad(indent), scalar(other)));
                continue;
            }
        }
        // The first line's indentation becomes the dash.
        out.push_str(&pad(indent));
        out.push_str("- ");
        out.push_str(&body[indent + 2..]);
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                if f.fract() == 0.0 && f.abs() < 1e15 {
                    format!("{}", f as i64)
                } else {
                    format!("{f}")
                }
            } else {
                n.to_string()
            }
        }
        Value::String(s) => string(s),
        Value::Mapping(m) if m.is_empty() => "{}".to_owned(),
        Value::Sequence(s) if s.is_empty() => "[]".to_owned(),
        // Not produced by the manifest structs; kept readable anyway.
        other => string(&format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Doc {
        name: String,
        spec: Spec,
    }

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Spec {
        description: String,
        url: String,
        items: Vec<Item>,
    }

    #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
    struct Item {
        text: String,
    }

    #[test]
    fn long_values_fold_within_80_columns_and_read_back_verbatim() {
        let long = "Owner: \"ops\" <ops@example.org>\n\n  A  very long   description with  double  spaces, tabs\tand escapes \u{2028} that goes on and on well past eighty columns of text, twice over, and then some more.   ";
        let doc = Doc {
            name: "x".into(),
            spec: Spec {
                description: long.into(),
                url: format!("https://placeholder.invalid/local/{}.iso", "a".repeat(90)),
                items: vec![Item {
                    text: long.repeat(2),
                }],
            },
        };
        let text = to_yaml(&doc).unwrap();
        for l in text.lines() {
            let words = l.trim_start().trim_start_matches("- ");
            assert!(
                l.chars().count() <= MAX_LINE || !words.contains(' '),
                "{l:?} in\n{text}"
            );
            assert!(!l.ends_with(' '), "trailing space: {l:?}");
        }
        let back: Doc = serde_yaml::from_str(&text).unwrap();
        assert_eq!(back, doc, "{text}");
    }
}
