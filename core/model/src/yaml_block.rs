//! A fast reader for the block YAML manifests are written in, giving the
//! same values serde_norway (libyaml) gives, or nothing.
//!
//! Parsing every manifest through libyaml and serde_norway's event loader
//! was most of a 10,000-guest `diff --replay` (about 270 instructions per
//! byte). Manifests use a small part of YAML: block mappings and sequences,
//! one-line plain and quoted scalars, one-line flow sequences and comments.
//! This module reads exactly that part, line by line, into the
//! `serde_yaml::Value` serde_norway would build, with serde_norway's own
//! resolution of plain scalars (YAML 1.2 core schema: `null`, `true`,
//! decimal integers, strings).
//!
//! **Must never:** return a value serde_norway would not return for the same
//! text. Anything outside the subset (anchors, tags, block scalars, flow
//! mappings, multi-line scalars, escapes, numbers other than plain decimal
//! integers, duplicate keys, tabs, unusual characters, anything libyaml
//! would refuse) makes [`documents`] answer `None`, and the caller reads the
//! text with serde_norway, which also gives errors their messages and
//! positions. The differential tests below hold the two readers to that.
//!
//! The reader builds a [`Node`] tree borrowing the text; typed manifests
//! are read straight from it ([`crate::yaml_node`]), and the
//! `serde_yaml::Value` serde_norway would build is made from it only where
//! a caller needs one.

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde_yaml::{Mapping, Number, Value};

/// A node of a document this reader read: a scalar resolved as
/// serde_norway resolves it (quoted text borrowed where it has no escape),
/// or a block. Keys are scalars, in the order written, each once.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Node<'a> {
    Null,
    Bool(bool),
    /// A plain decimal integer (the only numbers this reader takes).
    Int(u64),
    Str(Cow<'a, str>),
    Seq(Vec<Node<'a>>),
    Map(Vec<(Node<'a>, Node<'a>)>),
}

impl Node<'_> {
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Null)
    }

    /// The `serde_yaml::Value` serde_norway builds for the same text.
    pub fn to_value(&self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::Int(n) => Value::Number(Number::from(*n)),
            Node::Str(s) => Value::String(s.as_ref().to_owned()),
            Node::Seq(items) => Value::Sequence(items.iter().map(Node::to_value).collect()),
            Node::Map(entries) => {
                let mut map = Mapping::with_capacity(entries.len());
                for (k, v) in entries {
                    map.insert(k.to_value(), v.to_value());
                }
                Value::Mapping(map)
            }
        }
    }

    /// The value under the text key `key` of a mapping (as
    /// `serde_yaml::Value::get` with a `&str` finds it: text keys only).
    pub fn get(&self, key: &str) -> Option<&Self> {
        match self {
            Node::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Node::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }
}

/// Every document of `text`, as serde_norway would read it, when the text
/// stays inside the subset this module reads; `None` otherwise.
pub fn documents(text: &str) -> Option<Vec<Value>> {
    nodes(text).map(|docs| docs.iter().map(Node::to_value).collect())
}

/// Every document of `text` as a [`Node`] tree (`Node::Null` for an empty
/// one), when the text stays inside the subset this module reads; `None`
/// otherwise.
pub fn nodes(text: &str) -> Option<Vec<Node<'_>>> {
    if !plain_characters(text) {
        return None;
    }
    let mut docs: Vec<Vec<Line<'_>>> = Vec::new();
    let mut current: Option<Vec<Line<'_>>> = None;
    for raw in text.split('\n') {
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let content = &raw[indent..];
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if indent == 0 && (content.starts_with("---") || content.starts_with("...")) {
            if !is_document_start(content) {
                return None;
            }
            docs.extend(current.take());
            current = Some(Vec::new());
            continue;
        }
        if indent == 0 && content.starts_with('%') {
            return None;
        }
        current.get_or_insert_with(Vec::new).push(Line {
            indent,
            text: content,
        });
    }
    docs.extend(current);
    if docs.is_empty() {
        // Only comments or nothing: libyaml's count of documents for that
        // is serde_norway's to say.
        return None;
    }
    docs.into_iter().map(document).collect()
}

/// Deeper than this, the caller's reader decides (bounds::check limits
/// nesting anyway).
const MAX_DEPTH: usize = 64;

/// libyaml takes at most 1,024 characters from an implicit key's start to
/// its colon; this reader, counting bytes, stops a little short of that.
const MAX_KEY: usize = 1000;

/// Up to this many keys, a mapping's keys are compared one by one.
const SHORT_MAP: usize = 16;

/// A line with content: its indentation and what follows it.
#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    indent: usize,
    text: &'a str,
}

struct Reader<'a> {
    lines: Vec<Line<'a>>,
    at: usize,
}

fn document(lines: Vec<Line<'_>>) -> Option<Node<'_>> {
    let Some(first) = lines.first().copied() else {
        return Some(Node::Null);
    };
    if first.indent != 0 {
        return None;
    }
    let mut r = Reader { lines, at: 0 };
    let value = r.block(0, 0)?;
    // Everything must have been read: a line left over is one libyaml
    // would refuse or read differently.
    (r.at == r.lines.len()).then_some(value)
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<Line<'a>> {
        self.lines.get(self.at).copied()
    }

    /// The block node whose first line is the current one, at `indent`.
    fn block(&mut self, indent: usize, depth: usize) -> Option<Node<'a>> {
        if depth > MAX_DEPTH {
            return None;
        }
        let line = self.peek()?;
        if is_item(line.text) {
            self.sequence(indent, depth)
        } else {
            self.mapping(indent, depth)
        }
    }

    fn mapping(&mut self, indent: usize, depth: usize) -> Option<Node<'a>> {
        let mut map: Vec<(Node<'a>, Node<'a>)> = Vec::new();
        let mut seen: Option<BTreeSet<Node<'a>>> = None;
        while let Some(line) = self.peek().filter(|l| l.indent == indent) {
            if is_item(line.text) {
                return None;
            }
            let (key, rest) = split_key(line.text)?;
            self.at += 1;
            let value = if rest.is_empty() {
                self.nested(indent, depth)?
            } else {
                self.inline(rest, indent)?
            };
            // A key given twice is serde_norway's error to report. A long
            // mapping is checked through a set, a short one by looking.
            let repeated = if map.len() < SHORT_MAP {
                map.iter().any(|(k, _)| *k == key)
            } else {
                let seen = seen.get_or_insert_with(|| map.iter().map(|(k, _)| k.clone()).collect());
                !seen.insert(key.clone())
            };
            if repeated {
                return None;
            }
            map.push((key, value));
        }
        self.ends_at(indent).then_some(Node::Map(map))
    }

    fn sequence(&mut self, indent: usize, depth: usize) -> Option<Node<'a>> {
        let mut items = Vec::new();
        while let Some(line) = self
            .peek()
            .filter(|l| l.indent == indent && is_item(l.text))
        {
            let after = &line.text[1..];
            let gap = after.len() - after.trim_start_matches(' ').len();
            let rest = &after[gap..];
            if rest.is_empty() || rest.starts_with('#') {
                self.at += 1;
                items.push(self.nested_item(indent, depth)?);
            } else if is_item(rest) || split_key(rest).is_some() {
                // `- key: value` or `- - item`: a block whose first line
                // starts where `key` (or the inner `-`) does.
                let inner = indent + 1 + gap;
                self.lines[self.at] = Line {
                    indent: inner,
                    text: rest,
                };
                items.push(self.block(inner, depth + 1)?);
            } else {
                self.at += 1;
                items.push(self.inline(rest, indent)?);
            }
        }
        self.ends_at(indent).then_some(Node::Seq(items))
    }

    /// The value of `key:` with nothing after it: a block on the following
    /// lines (deeper, or a sequence at the key's own indentation), else null.
    fn nested(&mut self, indent: usize, depth: usize) -> Option<Node<'a>> {
        match self.peek() {
            Some(next) if next.indent > indent => self.block(next.indent, depth + 1),
            Some(next) if next.indent == indent && is_item(next.text) => {
                self.sequence(indent, depth + 1)
            }
            _ => Some(Node::Null),
        }
    }

    /// The item of a bare `-`: a deeper block, else null.
    fn nested_item(&mut self, indent: usize, depth: usize) -> Option<Node<'a>> {
        match self.peek() {
            Some(next) if next.indent > indent => self.block(next.indent, depth + 1),
            _ => Some(Node::Null),
        }
    }

    /// A value on its key's (or item's) line; a deeper line after it would
    /// continue a multi-line scalar or be an error, both left to libyaml.
    fn inline(&mut self, text: &'a str, indent: usize) -> Option<Node<'a>> {
        if self.peek().is_some_and(|l| l.indent > indent) {
            return None;
        }
        inline_value(text)
    }

    /// A block at `indent` ended where it should: at the end, or at a line
    /// that belongs to an enclosing block.
    fn ends_at(&self, indent: usize) -> bool {
        self.peek().is_none_or(|l| l.indent <= indent)
    }
}

fn is_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// `---` alone or followed by a comment.
fn is_document_start(content: &str) -> bool {
    match content.strip_prefix("---") {
        Some(rest) => {
            let rest = rest.trim_start_matches(' ');
            rest.is_empty() || (rest.starts_with('#') && rest.len() < content.len() - 3)
        }
        None => false,
    }
}

/// Characters libyaml reads as printable and this reader as nothing
/// special: no tab, no carriage return, no control character, no byte
/// order mark, no line or paragraph separator, no NEL.
fn plain_characters(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes
        .iter()
        .all(|&b| b == b'\n' || (0x20..0x7f).contains(&b))
    {
        return true;
    }
    text.chars().all(|c| match c {
        '\n' | ' '..='~' => true,
        '\u{a0}'..='\u{d7ff}' => !matches!(c, '\u{2028}' | '\u{2029}'),
        '\u{e000}'..='\u{fffd}' => c != '\u{feff}',
        '\u{10000}'..='\u{10ffff}' => true,
        _ => false,
    })
}

/// Splits `key: rest` (or `key:`): the key as a value and what follows the
/// colon, spaces and a trailing comment taken off. `None` when the line is
/// not a one-line key this reader takes.
fn split_key(text: &str) -> Option<(Node<'_>, &str)> {
    let (key, after) = match text.as_bytes().first()? {
        b'"' | b'\'' => {
            let (scalar, len) = quoted(text)?;
            let after = text[len..].trim_start_matches(' ').strip_prefix(':')?;
            // libyaml's limit runs from the key's first character to its
            // colon, spaces before the colon included.
            if text.len() - after.len() > MAX_KEY {
                return None;
            }
            (Node::Str(scalar), after)
        }
        _ => {
            let colon = key_colon(text)?;
            let key = text[..colon].trim_end_matches(' ');
            if key.is_empty()
                || colon >= MAX_KEY
                || key == "<<"
                || starts_with_indicator(key)
                || comment_start(key).is_some()
            {
                return None;
            }
            (resolve(key)?, &text[colon + 1..])
        }
    };
    if !(after.is_empty() || after.starts_with(' ')) {
        return None;
    }
    let rest = after.trim_start_matches(' ');
    let rest = if rest.starts_with('#') { "" } else { rest };
    Some((key, rest))
}

/// Where the first `: ` (or a final `:`) is: the end of a plain key.
fn key_colon(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    bytes
        .iter()
        .enumerate()
        .find_map(|(i, &b)| (b == b':' && bytes.get(i + 1).is_none_or(|&n| n == b' ')).then_some(i))
}

/// A character that cannot start a plain scalar in block context (or
/// starts something this reader leaves to libyaml).
fn starts_with_indicator(text: &str) -> bool {
    // Every indicator is ASCII: the first byte says (a character searcher
    // set up per scalar cost more than the rest of reading it).
    const INDICATORS: &[u8] = b"-?:,[]{}#&*!|>'\"%@`";
    text.as_bytes()
        .first()
        .is_some_and(|b| INDICATORS.contains(b))
}

/// Where the first ` #` (a comment after a space) starts.
fn comment_start(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 1;
    while let Some(i) = bytes.get(from..)?.iter().position(|&b| b == b'#') {
        let hash = from + i;
        if bytes[hash - 1] == b' ' {
            return Some(hash - 1);
        }
        from = hash + 1;
    }
    None
}

/// A value written on one line after `key: ` or `- `.
fn inline_value(text: &str) -> Option<Node<'_>> {
    match text.as_bytes().first()? {
        b'"' | b'\'' => {
            let (scalar, len) = quoted(text)?;
            only_comment(&text[len..]).then_some(Node::Str(scalar))
        }
        b'[' => flow_sequence(text),
        b'{' => {
            let rest = text.strip_prefix("{}")?;
            only_comment(rest).then(|| Node::Map(Vec::new()))
        }
        b'-' if text.len() > 1 && !text.starts_with("- ") => plain(text),
        _ if starts_with_indicator(text) => None,
        _ => plain(text),
    }
}

/// A plain scalar on one line, up to a comment.
fn plain(text: &str) -> Option<Node<'_>> {
    let end = comment_start(text).unwrap_or(text.len());
    let scalar = text[..end].trim_end_matches(' ');
    if key_colon(scalar).is_some() {
        // `a: b: c`: libyaml refuses a mapping there.
        return None;
    }
    resolve(scalar)
}

/// Nothing but spaces and perhaps a comment.
fn only_comment(rest: &str) -> bool {
    let trimmed = rest.trim_start_matches(' ');
    trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < rest.len())
}

/// A single- or double-quoted scalar at the start of `text`, and the bytes
/// it takes. Double quotes only without escapes.
fn quoted(text: &str) -> Option<(Cow<'_, str>, usize)> {
    let quote = *text.as_bytes().first()?;
    let body = &text[1..];
    if quote == b'"' {
        let end = body.find(['"', '\\'])?;
        if body.as_bytes()[end] == b'\\' {
            return None;
        }
        return Some((Cow::Borrowed(&body[..end]), end + 2));
    }
    let end = body.find('\'')?;
    if !body[end + 1..].starts_with('\'') {
        // No quote written twice: the text as it stands.
        return Some((Cow::Borrowed(&body[..end]), end + 2));
    }
    let mut out = String::new();
    let mut rest = body;
    loop {
        let end = rest.find('\'')?;
        out.push_str(&rest[..end]);
        if rest[end + 1..].starts_with('\'') {
            out.push('\'');
            rest = &rest[end + 2..];
        } else {
            let taken = text.len() - rest.len() + end + 1;
            return Some((Cow::Owned(out), taken));
        }
    }
}

/// `[a, "b", 'c']` on one line: plain items without flow indicators,
/// colons or comments, or quoted items.
fn flow_sequence(text: &str) -> Option<Node<'_>> {
    let close = text.find(']')?;
    if !only_comment(&text[close + 1..]) {
        return None;
    }
    let inner = &text[1..close];
    if inner.trim_start_matches(' ').is_empty() {
        return Some(Node::Seq(Vec::new()));
    }
    inner
        .split(',')
        .map(|item| {
            let item = item.trim_matches(' ');
            match item.as_bytes().first()? {
                b'"' | b'\'' => {
                    let (scalar, len) = quoted(item)?;
                    (len == item.len()).then_some(Node::Str(scalar))
                }
                _ if starts_with_indicator(item) || item.contains(['[', '{', '}', '#', ':']) => {
                    None
                }
                _ => resolve(item),
            }
        })
        .collect::<Option<Vec<Node<'_>>>>()
        .map(Node::Seq)
}

/// What serde_norway makes of a plain scalar, when it is sure to be null, a
/// boolean, a plain decimal integer or a string; `None` for anything that
/// could read as another kind of number (signs, floats, hexadecimal, …).
fn resolve(scalar: &str) -> Option<Node<'_>> {
    let Some(&first) = scalar.as_bytes().first() else {
        return Some(Node::Null);
    };
    // Only a short scalar starting so can be a null or a boolean: most
    // scalars are told apart by their first byte.
    if scalar.len() <= 5 && matches!(first, b'~' | b'n' | b'N' | b't' | b'T' | b'f' | b'F') {
        match scalar {
            "~" | "null" | "Null" | "NULL" => return Some(Node::Null),
            "true" | "True" | "TRUE" => return Some(Node::Bool(true)),
            "false" | "False" | "FALSE" => return Some(Node::Bool(false)),
            _ => {}
        }
    }
    if scalar.bytes().all(|b| b.is_ascii_digit()) {
        // Leading zeros make a string (YAML 1.2); beyond u64, let
        // serde_norway decide.
        if first == b'0' && scalar.len() > 1 {
            return Some(Node::Str(Cow::Borrowed(scalar)));
        }
        return scalar.parse::<u64>().ok().map(Node::Int);
    }
    if (first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'.')) && could_be_number(scalar) {
        return None;
    }
    Some(Node::Str(Cow::Borrowed(scalar)))
}

/// Whether serde_norway might read `scalar` (starting with a digit, a sign
/// or a dot) as a number of some kind: any text Rust reads as a float,
/// with or without its sign, the `.inf`/`.nan` spellings and the `0x`,
/// `0o`, `0b` prefixes.
fn could_be_number(scalar: &str) -> bool {
    let unsigned = scalar.strip_prefix(['+', '-']).unwrap_or(scalar);
    unsigned.starts_with("0x")
        || unsigned.starts_with("0o")
        || unsigned.starts_with("0b")
        || unsigned.eq_ignore_ascii_case(".inf")
        || unsigned.eq_ignore_ascii_case(".nan")
        || scalar.parse::<f64>().is_ok()
        || (unsigned.len() < scalar.len() && unsigned.parse::<f64>().is_ok())
        || unsigned.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// serde_norway's reading, as comparable text (a mapping's order
    /// included: `Mapping`'s `==` ignores it).
    fn reference(text: &str) -> Option<String> {
        crate::yaml::serde_documents(text)
            .ok()
            .map(|d| format!("{d:?}"))
    }

    /// Where the fast reader answers, it answers as serde_norway does, and
    /// values read from its tree are those read from serde_norway's value.
    fn agrees(text: &str) -> Result<(), TestCaseError> {
        if let Some(fast) = documents(text) {
            prop_assert_eq!(Some(format!("{fast:?}")), reference(text), "{}", text);
        }
        for node in nodes(text).unwrap_or_default() {
            typed_agree::<Value>(&node, text)?;
            typed_agree::<std::collections::BTreeMap<String, String>>(&node, text)?;
            typed_agree::<std::collections::BTreeMap<String, Option<u32>>>(&node, text)?;
            typed_agree::<Vec<Option<String>>>(&node, text)?;
            typed_agree::<Vec<Vec<bool>>>(&node, text)?;
            typed_agree::<Option<(String, u64)>>(&node, text)?;
            typed_agree::<crate::units::Quantity>(&node, text)?;
        }
        Ok(())
    }

    fn typed_agree<T: serde::de::DeserializeOwned + std::fmt::Debug>(
        node: &Node<'_>,
        text: &str,
    ) -> Result<(), TestCaseError> {
        let fast = crate::yaml_node::from_node::<T>(node).map(|t| format!("{t:?}"));
        let old = crate::yaml::from_value::<T>(&node.to_value()).map(|t| format!("{t:?}"));
        prop_assert_eq!(fast, old, "{}", text);
        Ok(())
    }

    fn read(text: &str) -> Vec<Value> {
        let fast = documents(text);
        assert!(fast.is_some(), "the subset reader refused:\n{text}");
        let fast = fast.unwrap_or_default();
        assert_eq!(Some(format!("{fast:?}")), reference(text), "{text}");
        fast
    }

    #[test]
    fn a_manifest_reads_as_serde_norway_reads_it() {
        let docs = read(
            "# a VM\napiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web-01\n  labels:\n    app.kubernetes.io/name: web # comment\n  annotations: {}\nspec:\n  node: pve1\n  vmid: 101\n  memory: 2GiB\n  onboot: true\n  balloon: ~\n  cpu:\n    cores: 2\n  disks:\n    - storage: local-lvm\n      size: 32GiB\n    -   storage: 'it''s'\n        size: \"8G\"\n  networks:\n  - bridge: vmbr0\n    firewall: false\n  tags: [web, 'prod', \"x y\"]\n  extra: []\n  cloud-init-data:\n    ssh-keys:\n      - ssh-ed25519 AAAA ops@laptop\n      -\n        nested: 1\n      -\n    nameservers: [10.0.20.1]\n    ip: 10.30.26.42/16\n    url: http://x:8006/a?b=1&c=2#frag\n    zero: 007\n---\n---\nkind: LXC\n",
        );
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[1], Value::Null);
    }

    #[test]
    fn what_it_does_not_read_is_left_to_serde_norway() {
        for text in [
            "a: &x 1\nb: *x\n",
            "a: !tag 1\n",
            "a: |\n  text\n",
            "a: >\n  text\n",
            "a: long\n  continued\n",
            "a: 1.5\n",
            "a: -3\n",
            "a: 0x1F\n",
            "a: .inf\n",
            "a: .5\n",
            "a: -.Inf\n",
            "a: 1e5\n",
            "a: \"esc\\n\"\n",
            "a: {b: 1}\n",
            "a: [b, [c]]\n",
            "a: 1\na: 2\n",
            "a:\tb\n",
            "a: b\r\n",
            "a: b: c\n",
            "? a\n: b\n",
            "  a: 1\n",
            "a: 1\n  b: 2\n",
            "%YAML 1.2\n---\na: 1\n",
            "a: 1\n...\n",
            "# only a comment\n",
            "",
            "a: 184467440737095516160\n",
            "plain scalar\n",
        ] {
            assert_eq!(documents(text), None, "{text:?}");
        }
    }

    /// Texts at the edges of the subset: where the reader answers, it
    /// answers as serde_norway does.
    #[test]
    fn edge_texts_read_as_serde_norway_reads_them() {
        let long = "k".repeat(1020);
        let texts = [
            format!("\"{long}\": 1\n"),
            format!("'{long}': 1\n"),
            format!("'{}': 1\n", "k".repeat(990)),
            format!("a{}: 1\n", " ".repeat(1100)),
            format!("a{}: 1\n", " ".repeat(990)),
            format!("{}: 1\n", "é".repeat(600)),
            format!("a: {}\n", "v".repeat(5000)),
            "a: 1\n---\n".to_owned(),
            "---\n".to_owned(),
            "---\n# c\n".to_owned(),
            "--- # c\na: 1\n".to_owned(),
            "a: 1\n--- \nb: 2\n".to_owned(),
            "a:\n- x\nb: 1\n".to_owned(),
            "- a:\n  - x\n  b: 1\n".to_owned(),
            "- - a\n  - b\n- c\n".to_owned(),
            "a: 'x' # c\n".to_owned(),
            "a: \"\"\nb: ''\n".to_owned(),
            "'': 1\n".to_owned(),
            "~: 1\nnull: 2\n".to_owned(),
            "a: [a b, 'c,d']\n".to_owned(),
            "a: [a\"b, c'd]\n".to_owned(),
            "a: b]\nc: d}\ne: f, g\n".to_owned(),
            "a:   \n  # c\n  b: 1\n".to_owned(),
            "a: \u{a0}b\n".to_owned(),
            "a\u{a0}: b\n".to_owned(),
            "a: b\u{a0}\n".to_owned(),
            "a: x\n  # c\n".to_owned(),
            "a: x\n # c\n  y\n".to_owned(),
            "a: -\n".to_owned(),
            "a: --\n".to_owned(),
            "a: =\n".to_owned(),
            "a: <<\n".to_owned(),
            "a: 1_000\n".to_owned(),
            "a: 0\nb: 00\nc: 0.\n".to_owned(),
            "x:y: 1\n".to_owned(),
            "k#: v\n".to_owned(),
            "a: b#c\n".to_owned(),
            "a:\n  -\n  - b\n".to_owned(),
            "a:\n  - b\n - c\n".to_owned(),
            "a: 1\n\n\n   \nb: 2".to_owned(),
            "a: 1 \nb:  2  # x  \n".to_owned(),
        ];
        let mut read = 0;
        for text in &texts {
            if let Some(fast) = documents(text) {
                read += 1;
                assert_eq!(Some(format!("{fast:?}")), reference(text), "{text:?}");
            }
        }
        // Most of them are inside the subset: the comparison is not empty.
        assert!(
            read * 3 > texts.len() * 2,
            "only {read} of {} read",
            texts.len()
        );
    }

    /// Scalars meant to sit on the edge of every rule above.
    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            2 => prop::sample::select(vec![
                "", "~", "null", "Null", "nULL", "true", "TRUE", "tRue", "false", "yes", "no",
                "on", "0", "00", "01", "007", "1", "42", "-1", "+1", "-0", "+0", "1.5", "1.",
                ".5", "1e5", "1E5", "1_000", "0x1F", "0o17", "0b101", "-0x1", "+0x1", ".inf",
                "-.inf", ".NaN", "nan", "inf", "infinity", "-inf", "1:2", "10.0.20.1",
                "10.30.26.42/16", "../../vm/a.yaml", "./x", ".5", "..", ".inF", "32GiB", "2G", "512MiB", "a b", "a  b", "a #b", "a#b",
                "a # b", "http://x:1/y", "a: b", "a:", ":a", "-a", "- a", "--", "---", "...",
                "'q'", "'it''s'", "\"d\"", "\"a\\tb\"", "[a, b]", "[]", "{}", "[a,b]",
                "[ a , b ]", "[a, 1, 'x y']", "[a:b]", "{a: 1}", "&a", "*a", "!t x", "|", ">",
                "%x", "@x", "`x", "?x", "? x", "<<", "é", "ü a", "18446744073709551615",
                "18446744073709551616", "99999999999999999999999", "1 2", "x ", " x",
            ])
            .prop_map(str::to_owned),
            4 => "[a-z][a-z0-9./-]{0,8}",
            2 => "[1-9][0-9]{0,5}",
            1 => "[a-z0-9.:/# -]{0,8}",
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            1 => prop::sample::select(vec![
                "a", "b", "name", "a.b/c", "1", "01", "true", "null", "'q'", "\"d\"", "a b",
                "-a", "<<", "x:y", "k#", "~", "a  ", "'q' ", "é", "a: b", "",
            ])
            .prop_map(str::to_owned),
            3 => "[a-z][a-z-]{0,6}",
        ]
    }

    /// A node, as lines with their indentation: a scalar or a block.
    fn node(depth: u32) -> BoxedStrategy<Vec<(usize, String)>> {
        let leaf = scalar().prop_map(|s| vec![(0usize, s)]).boxed();
        if depth == 0 {
            return leaf;
        }
        prop_oneof![1 => leaf, 4 => block(depth)].boxed()
    }

    /// A block mapping or sequence.
    fn block(depth: u32) -> BoxedStrategy<Vec<(usize, String)>> {
        let entry = (key(), node(depth - 1), 0usize..3, any::<bool>());
        let mapping = prop::collection::vec(entry, 1..4)
            .prop_map(|entries| {
                let mut lines = Vec::new();
                for (k, value, extra, compact) in entries {
                    if value.len() == 1 && value[0].0 == 0 && !value[0].1.starts_with("- ") {
                        lines.push((0, format!("{k}: {}", value[0].1)));
                    } else {
                        lines.push((0, format!("{k}:")));
                        let step = if compact && value[0].1.starts_with("- ") {
                            0
                        } else {
                            2 + extra
                        };
                        lines.extend(value.into_iter().map(|(i, l)| (i + step, l)));
                    }
                }
                lines
            })
            .boxed();
        let item = (node(depth - 1), 0usize..3);
        let sequence = prop::collection::vec(item, 1..4)
            .prop_map(|items| {
                let mut lines = Vec::new();
                for (value, gap) in items {
                    let pad = " ".repeat(gap);
                    let mut value = value.into_iter();
                    if let Some((i, first)) = value.next() {
                        lines.push((i, format!("-{pad} {first}")));
                        lines.extend(value.map(|(i, l)| (i + 2 + gap, l)));
                    }
                }
                lines
            })
            .boxed();
        prop_oneof![mapping, sequence].boxed()
    }

    fn text(docs: Vec<Vec<(usize, String)>>, markers: Vec<bool>, comments: bool) -> String {
        let mut out = String::new();
        for (n, (doc, marker)) in docs.into_iter().zip(markers).enumerate() {
            if marker || n > 0 {
                out.push_str("---\n");
            }
            for (i, line) in doc {
                out.push_str(&" ".repeat(i));
                out.push_str(&line);
                out.push('\n');
                if comments {
                    out.push_str(&" ".repeat(i + 1));
                    out.push_str("# note\n\n");
                }
            }
        }
        out
    }

    /// The differential test means something only if the fast reader
    /// answers for a good share of what it is given.
    #[test]
    fn the_generated_documents_mostly_stay_inside_the_subset() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let strategy = prop::collection::vec(block(3), 1..3);
        let (mut read, mut total) = (0, 0);
        for _ in 0..500 {
            let Ok(tree) = strategy.new_tree(&mut runner) else {
                continue;
            };
            total += 1;
            let text = text(tree.current(), vec![false; 3], false);
            read += usize::from(documents(&text).is_some());
        }
        assert!(
            read * 4 > total,
            "only {read} of {total} read by the subset reader"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn it_never_disagrees_with_serde_norway(
            docs in prop::collection::vec(prop_oneof![node(3), block(3)], 1..3),
            markers in prop::collection::vec(any::<bool>(), 3),
            comments in any::<bool>(),
        ) {
            agrees(&text(docs, markers, comments))?;
        }

        #[test]
        fn scalars_resolve_as_serde_norway_resolves_them(s in scalar(), k in key()) {
            agrees(&format!("{k}: {s}\n"))?;
            agrees(&format!("- {s}\n"))?;
            agrees(&format!("a: [{s}, x]\n"))?;
        }
    }
}
