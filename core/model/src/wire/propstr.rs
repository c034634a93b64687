//! The generic property string `[<default-key-value>,]k=v,k=v`: token order
//! and every token kept verbatim.

use super::WireError;

/// One comma-separated token: `key=value`, or a positional value (PVE's
/// default key, or a legacy bare flag such as LXC's `ro`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum PropToken {
    Positional(String),
    Pair { key: String, value: String },
}

impl PropToken {
    pub fn pair(key: &str, value: &str) -> PropToken {
        PropToken::Pair {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }

    pub fn key(&self) -> Option<&str> {
        match self {
            PropToken::Positional(_) => None,
            PropToken::Pair { key, .. } => Some(key),
        }
    }

    pub fn to_wire(&self) -> String {
        match self {
            PropToken::Positional(v) => v.clone(),
            PropToken::Pair { key, value } => format!("{key}={value}"),
        }
    }
}

/// A token as it stands in the text: what the typed parsers read, so only
/// the tokens they keep verbatim are copied (a drive's or NIC's tokens
/// were copied one by one for every guest of every plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Token<'a> {
    Positional(&'a str),
    Pair(&'a str, &'a str),
}

impl Token<'_> {
    pub(super) fn to_prop(self) -> PropToken {
        match self {
            Token::Positional(v) => PropToken::Positional(v.to_owned()),
            Token::Pair(k, v) => PropToken::pair(k, v),
        }
    }
}

/// The tokens of `s` as [`PropertyString::parse`] reads them: split on
/// `,`, each on its first `=`, trimmed, empty ones dropped; a pair
/// without a key is an error.
pub(super) fn tokens(s: &str) -> Result<Vec<Token<'_>>, WireError> {
    // One pass over the bytes, noting each token's first `=` on the way:
    // the same pieces as `split(',')` and `split_once('=')`, without a
    // searcher set up for each (every drive and NIC of every guest is read
    // each cycle). `,` and `=` are ASCII, so every cut is a char boundary.
    let b = s.as_bytes();
    let mut tokens = Vec::with_capacity(4);
    let (mut start, mut eq) = (0, None);
    for end in 0..=b.len() {
        match b.get(end) {
            Some(b'=') if eq.is_none() => eq = Some(end),
            Some(b',') | None => {
                let token = match eq {
                    Some(i) => {
                        let k = trimmed(s.get(start..i).unwrap_or(""));
                        let v = trimmed(s.get(i + 1..end).unwrap_or(""));
                        if k.is_empty() {
                            return Err(WireError::invalid(
                                "property string",
                                s,
                                "key=value tokens with a non-empty key",
                            ));
                        }
                        Token::Pair(k, v)
                    }
                    None => Token::Positional(trimmed(s.get(start..end).unwrap_or(""))),
                };
                if !matches!(token, Token::Positional("")) {
                    tokens.push(token);
                }
                (start, eq) = (end + 1, None);
            }
            Some(_) => {}
        }
    }
    Ok(tokens)
}

/// Hands every `key=value` token to `own`, which answers `Ok(false)` for
/// a key it does not model; those tokens and positional ones are returned
/// in order, to be kept verbatim.
pub(super) fn owned_pairs<'a>(
    tokens: impl IntoIterator<Item = Token<'a>>,
    mut own: impl FnMut(&str, &str) -> Result<bool, WireError>,
) -> Result<Vec<PropToken>, WireError> {
    let mut extra = Vec::new();
    for t in tokens {
        let owned = match t {
            Token::Pair(key, value) => own(key, value)?,
            Token::Positional(_) => false,
        };
        if !owned {
            extra.push(t.to_prop());
        }
    }
    Ok(extra)
}

/// A property string as PVE sent it: the ordered tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize)]
pub struct PropertyString {
    tokens: Vec<PropToken>,
}

impl PropertyString {
    /// Splits on `,`; a token splits on its first `=`. Empty tokens (`a,,b`,
    /// a trailing comma) carry nothing and are dropped. Values are never
    /// quoted in PVE's grammar, so a value cannot contain a comma.
    pub fn parse(s: &str) -> Result<PropertyString, WireError> {
        Ok(PropertyString {
            tokens: tokens(s)?.into_iter().map(Token::to_prop).collect(),
        })
    }

    pub fn from_tokens(tokens: Vec<PropToken>) -> PropertyString {
        PropertyString { tokens }
    }

    pub fn tokens(&self) -> &[PropToken] {
        &self.tokens
    }

    pub fn into_tokens(self) -> Vec<PropToken> {
        self.tokens
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The value of the first `key=` token.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.tokens.iter().find_map(|t| match t {
            PropToken::Pair { key: k, value } if k == key => Some(value.as_str()),
            _ => None,
        })
    }

    /// The leading positional token (PVE's default-key value), if any.
    pub fn positional(&self) -> Option<&str> {
        match self.tokens.first() {
            Some(PropToken::Positional(v)) => Some(v),
            _ => None,
        }
    }

    /// Replaces the first `key=` token in place, or appends one.
    pub fn set(&mut self, key: &str, value: &str) {
        for t in &mut self.tokens {
            if let PropToken::Pair { key: k, value: v } = t
                && k == key
            {
                *v = value.to_owned();
                return;
            }
        }
        self.tokens.push(PropToken::pair(key, value));
    }

    /// Removes every `key=` token; true when one was there.
    pub fn remove(&mut self, key: &str) -> bool {
        let before = self.tokens.len();
        self.tokens.retain(|t| t.key() != Some(key));
        before != self.tokens.len()
    }

    pub fn push(&mut self, token: PropToken) {
        self.tokens.push(token);
    }

    pub fn to_wire(&self) -> String {
        join_tokens(self.tokens.iter().map(PropToken::to_wire))
    }
}

pub(crate) fn join_tokens(parts: impl Iterator<Item = String>) -> String {
    // The non-empty parts joined by `,`, written into one string as they
    // come (not collected first).
    let mut out = String::new();
    for p in parts.filter(|p| !p.is_empty()) {
        if out.is_empty() {
            out = p;
        } else {
            out.push(',');
            out.push_str(&p);
        }
    }
    out
}

/// `key=value`, as `format!("{key}={value}")` spells it, without the
/// formatting machinery.
pub(crate) fn key_value(key: &str, value: &str) -> String {
    concat(&[key, "=", value])
}

/// The parts one after another in a string of their size.
pub(crate) fn concat(parts: &[&str]) -> String {
    let mut out = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.push_str(p);
    }
    out
}

/// `s.trim()`, answered at once when `s` starts and ends with a printable
/// ASCII character (neither is whitespace, so `trim` keeps `s` whole).
pub(crate) fn trimmed(s: &str) -> &str {
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if a.is_ascii_graphic() && z.is_ascii_graphic() => s,
        _ => s.trim(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The pieces splitting on `,` and then on the first `=` gave.
    fn by_split(s: &str) -> Option<Vec<Token<'_>>> {
        let mut out = Vec::new();
        for raw in s.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            match raw.split_once('=') {
                Some((k, _)) if k.trim().is_empty() => return None,
                Some((k, v)) => out.push(Token::Pair(k.trim(), v.trim())),
                None => out.push(Token::Positional(raw)),
            }
        }
        Some(out)
    }

    proptest::proptest! {
        /// The byte-wise reader gives the pieces splitting gave.
        #[test]
        fn tokens_are_what_splitting_finds(s in "[ \t\u{a0}\u{3000}\u{85}a-c=,é]{0,12}") {
            proptest::prop_assert_eq!(tokens(&s).ok(), by_split(&s));
        }
    }

    /// The byte-wise reader gives the pieces splitting on `,` and then on
    /// the first `=` gave.
    #[test]
    fn tokens_agree_with_splitting_on_separators() {
        for s in [
            "",
            ",",
            ",,a,,",
            "local-lvm:vm-100-disk-0,size=32G",
            " virtio = BC:24:11:00:00:01 , bridge=vmbr0,tag=5 ",
            "a=b=c,=x",
            "k=,=",
            "é,ü=ö,ß=,  ,x",
            "host,flags=+nested-virt;-pcid,hidden=1",
            "trailing=,",
            "\u{a0}x\u{a0}, y\t,\u{3000}=v,k=\u{2003}v\u{2003}",
            "\tk\t=\tv\t",
            "a\u{85},\u{85}b=c",
        ] {
            assert_eq!(tokens(s).ok(), by_split(s), "{s:?}");
        }
    }

    #[test]
    fn the_quick_forms_spell_what_their_plain_forms_spelled() {
        for s in [
            "", " ", "a", " a", "a ", "\u{a0}a", "a\u{a0}", "\u{3000}", "é", "é ", "x\ty", "~!",
        ] {
            assert_eq!(trimmed(s), s.trim(), "{s:?}");
        }
        assert_eq!(
            key_value("bridge", "vmbr0"),
            format!("{}={}", "bridge", "vmbr0")
        );
        assert_eq!(key_value("", ""), "=");
        assert_eq!(concat(&["local", ":", "vm-1"]), "local:vm-1");
        assert_eq!(concat(&[]), "");
        for parts in [
            vec![],
            vec![""],
            vec!["", "a", "", "b=1", ""],
            vec!["a"],
            vec!["a", "b", "c"],
        ] {
            let plain = parts
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(",");
            assert_eq!(
                join_tokens(parts.iter().map(|p| (*p).to_owned())),
                plain,
                "{parts:?}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn trimmed_is_trim(s in "[ \t\u{a0}\u{3000}\u{85}a-z~!=,é]{0,8}") {
            proptest::prop_assert_eq!(trimmed(&s), s.trim());
        }
    }

    #[test]
    fn token_order_and_unknown_tokens_survive_a_round_trip() {
        let s = "local-zfs:vm-111-disk-1,discard=on,size=160G,ssd=1,x-future=7";
        let p = PropertyString::parse(s).unwrap();
        assert_eq!(p.positional(), Some("local-zfs:vm-111-disk-1"));
        assert_eq!(p.get("size"), Some("160G"));
        assert_eq!(p.to_wire(), s);
    }

    #[test]
    fn set_replaces_in_place_and_appends_when_absent() {
        let mut p = PropertyString::parse("a=1,b=2").unwrap();
        p.set("a", "3");
        p.set("c", "4");
        assert_eq!(p.to_wire(), "a=3,b=2,c=4");
        assert!(p.remove("b"));
        assert_eq!(p.to_wire(), "a=3,c=4");
    }

    #[test]
    fn value_splits_on_the_first_equals_only() {
        let p = PropertyString::parse("order=scsi0;net0").unwrap();
        assert_eq!(p.get("order"), Some("scsi0;net0"));
        let p = PropertyString::parse("user=a=b").unwrap();
        assert_eq!(p.get("user"), Some("a=b"));
    }
}
