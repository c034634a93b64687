//! YAML out: the one way ProxOps writes a string scalar, in every YAML
//! file it writes (adopted manifests, SOPS files). A string is written
//! plain only when no YAML 1.1 or 1.2 reader could take it for anything
//! else (a number, a date, a boolean, null, an indicator), otherwise
//! double-quoted with escapes; either way it reads back as the very same
//! string. User text (descriptions, cloud-init values) keeps its letters:
//! only what YAML cannot hold raw in a double-quoted scalar is escaped.

/// Words a YAML 1.1 or 1.2 reader resolves to something other than a
/// string (compared in lower case).
const RESERVED: &[&str] = &[
    "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", "nan", ".nan", "inf", ".inf",
    "-.inf", "+.inf",
];

/// True when `s`, written plain, reads back as `s` itself: letters,
/// digits and `-_./+=:` only, starting with a letter or `/` (or a quantity
/// such as `2GiB`), never a reserved word, never ending in `:`.
pub fn is_plain_safe(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    let chars_ok = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '+' | '=' | ':'));
    if !chars_ok || s.ends_with(':') || RESERVED.contains(&s.to_ascii_lowercase().as_str()) {
        return false;
    }
    if first.is_ascii_alphabetic() || first == '/' {
        return true;
    }
    // A quantity such as `2GiB` or `0.5GiB`: digits, at most one dot, then
    // a unit that cannot start an exponent or a radix (`1e3`, `0x1F`).
    let unit_at = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (num, unit) = s.split_at(unit_at);
    first.is_ascii_digit()
        && !unit.is_empty()
        && unit.chars().all(|c| c.is_ascii_alphabetic())
        && !unit.starts_with(['e', 'E', 'x', 'X', 'o', 'O', 'b', 'B'])
        && num.split('.').count() <= 2
        && num
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A YAML double-quoted scalar. Escaped: `"`, `\`, line breaks and tabs by
/// name, and as `\uXXXX` every character YAML does not allow raw (C0 and
/// C1 controls, DEL, U+FFFE, U+FFFF) or a reader would take for a line
/// break or a byte-order mark (U+2028, U+2029, U+FEFF). Every other
/// character is written as is.
pub fn double_quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20
                || c as u32 == 0x7f
                || (0x80..0xa0).contains(&(c as u32))
                || matches!(c as u32, 0x2028 | 0x2029 | 0xfeff | 0xfffe | 0xffff) =>
            {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A string scalar: plain when unambiguous, else double-quoted.
pub fn string(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_owned()
    } else {
        double_quoted(s)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// `s` written as a mapping value and as a list item, read back by
    /// serde_norway.
    fn reads_back(s: &str) -> Result<(), TestCaseError> {
        let text = format!("k: {}\n", string(s));
        let back: BTreeMap<String, String> = serde_yaml::from_str(&text)
            .map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(&back["k"], s, "{:?}", text);
        let text = format!("- {}\n", string(s));
        let back: Vec<String> = serde_yaml::from_str(&text)
            .map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(&back[0], s, "{:?}", text);
        Ok(())
    }

    /// Strings a YAML reader may take for something else, and the pieces
    /// that make them.
    const TRICKY: &[&str] = &[
        "",
        " ",
        "yes",
        "No",
        "ON",
        "off",
        "y",
        "N",
        "null",
        "Null",
        "~",
        "true",
        "False",
        "nan",
        ".inf",
        "-.inf",
        "123",
        "-1",
        "+1",
        "1.5",
        "1e3",
        "1E5",
        "0x1F",
        "0o17",
        "0b101",
        "017",
        "1_000",
        "1:30",
        "2024-01-01",
        "2024-01-01T10:00:00Z",
        "2GiB",
        "0.5GiB",
        ":",
        "a:",
        "a: b",
        "#",
        "a #b",
        "-",
        "- a",
        "-x",
        "?",
        "? a",
        "*a",
        "&a",
        "!a",
        "!!str",
        "%a",
        "@a",
        "`a",
        "|",
        ">",
        "'",
        "\"",
        "'a'",
        "\"a\"",
        "[a]",
        "{a: 1}",
        ",",
        "<<",
        "=",
        "\n",
        "\t",
        "\r",
        "a\nb",
        "\u{85}",
        "\u{a0}",
        "\u{2028}",
        "\u{feff}",
        "\u{fffe}",
        "\u{ffff}",
        "é",
        "✓",
        "𝄞",
        "\\",
        "\\n",
        "\u{0}",
        "\u{7f}",
        "\u{1b}",
        "---",
        "...",
        "a b",
        " a",
        "a ",
    ];

    #[test]
    fn tricky_strings_read_back_verbatim() {
        for s in TRICKY {
            reads_back(s).unwrap();
        }
        assert_eq!(string("web-01"), "web-01");
        assert_eq!(string("a\"b"), "\"a\\\"b\"");
        assert_eq!(string("2GiB"), "2GiB");
        assert_eq!(string("0x1F"), "\"0x1F\"");
        assert_eq!(string("order=10"), "order=10");
        assert_eq!(string("é"), "\"é\"");
    }

    fn piece() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(TRICKY).prop_map(str::to_owned),
            any::<char>().prop_map(String::from),
            "[a-z0-9]{1,3}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn every_string_reads_back_as_itself(
            pieces in prop::collection::vec(piece(), 0..6),
        ) {
            reads_back(&pieces.concat())?;
        }

        #[test]
        fn any_text_reads_back_as_itself(s in any::<String>()) {
            reads_back(&s)?;
        }
    }
}
