//! YAML in and out. Reading keeps map order and each scalar's raw text and
//! style (plain or quoted), because the MAC depends on how yaml.v3 would type
//! a plain scalar; writing produces the 4-space block style sops writes.
//! This module never decrypts and never types a value by itself.

use proxops_model::yaml_emit;
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A parsed YAML node before any SOPS meaning is attached.
#[derive(Debug, Clone)]
pub(crate) enum RawNode {
    Map(Vec<(String, RawNode)>),
    List(Vec<RawNode>),
    Scalar(RawScalar),
}

#[derive(Debug, Clone)]
pub(crate) struct RawScalar {
    pub(crate) text: String,
    /// `true` for quoted or block scalars and `!!str`: always a string.
    pub(crate) quoted: bool,
    pub(crate) line: usize,
}

/// A YAML problem, with the 1-based line where it was found.
#[derive(Debug)]
pub(crate) struct YamlProblem {
    pub(crate) line: Option<usize>,
    pub(crate) message: String,
    pub(crate) unsupported: bool,
}

impl YamlProblem {
    fn malformed(mark: Marker, message: impl Into<String>) -> Self {
        YamlProblem {
            line: Some(mark.line()),
            message: message.into(),
            unsupported: false,
        }
    }
    fn unsupported(mark: Marker, message: impl Into<String>) -> Self {
        YamlProblem {
            line: Some(mark.line()),
            message: message.into(),
            unsupported: true,
        }
    }
}

/// Deepest nesting of collections a credentials file may have (the same
/// limit the repository loader applies to manifests).
const MAX_NESTING: usize = 32;

/// Parses a single-document YAML stream. `Ok(None)` for an empty stream.
pub(crate) fn parse_document(text: &str) -> Result<Option<RawNode>, YamlProblem> {
    let mut parser = Parser::new_from_str(text);
    let mut events = Vec::new();
    let mut depth = 0usize;
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| YamlProblem::malformed(*e.marker(), e.info().to_string()))?;
        // Stop at the first collection past the limit: reading on would
        // cost time with the square of the depth, and building the tree
        // recurses once per level.
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(YamlProblem::malformed(
                        mark,
                        format!(
                            "the YAML nests deeper than {MAX_NESTING} levels; a SOPS credentials file needs a handful"
                        ),
                    ));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
        let end = matches!(event, Event::StreamEnd);
        events.push((event, mark));
        if end {
            break;
        }
    }
    let mut cursor = Cursor { events, pos: 0 };
    let mut document = None;
    loop {
        let (event, mark) = cursor.next()?;
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => break,
            Event::DocumentStart => {
                if document.is_some() {
                    return Err(YamlProblem::unsupported(
                        mark,
                        "more than one YAML document in the file",
                    ));
                }
                let (first, first_mark) = cursor.next()?;
                document = Some(cursor.node(first, first_mark)?);
            }
            _ => return Err(YamlProblem::malformed(mark, "unexpected YAML event")),
        }
    }
    Ok(document)
}

struct Cursor {
    events: Vec<(Event, Marker)>,
    pos: usize,
}

impl Cursor {
    fn next(&mut self) -> Result<(Event, Marker), YamlProblem> {
        let item = self
            .events
            .get_mut(self.pos)
            .map(|(e, m)| (std::mem::replace(e, Event::Nothing), *m));
        self.pos += 1;
        item.ok_or_else(|| YamlProblem {
            line: None,
            message: "unexpected end of YAML".into(),
            unsupported: false,
        })
    }

    fn node(&mut self, event: Event, mark: Marker) -> Result<RawNode, YamlProblem> {
        match event {
            Event::Scalar(text, style, _anchor, tag) => {
                let forced_str = check_tag(tag.as_ref(), mark)?;
                Ok(RawNode::Scalar(RawScalar {
                    text,
                    quoted: forced_str || style != TScalarStyle::Plain,
                    line: mark.line(),
                }))
            }
            Event::SequenceStart(_, tag) => {
                check_collection_tag(tag.as_ref(), mark)?;
                let mut items = Vec::new();
                loop {
                    let (event, mark) = self.next()?;
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    items.push(self.node(event, mark)?);
                }
                Ok(RawNode::List(items))
            }
            Event::MappingStart(_, tag) => {
                check_collection_tag(tag.as_ref(), mark)?;
                let mut entries: Vec<(String, RawNode)> = Vec::new();
                loop {
                    let (event, key_mark) = self.next()?;
                    if matches!(event, Event::MappingEnd) {
                        break;
                    }
                    let key = match self.node(event, key_mark)? {
                        RawNode::Scalar(s) => key_text(s, key_mark)?,
                        _ => {
                            return Err(YamlProblem::malformed(
                                key_mark,
                                "map key is not a string",
                            ));
                        }
                    };
                    if entries.iter().any(|(k, _)| *k == key) {
                        return Err(YamlProblem::malformed(
                            key_mark,
                            format!("duplicate map key `{key}`"),
                        ));
                    }
                    let (event, mark) = self.next()?;
                    let value = self.node(event, mark)?;
                    entries.push((key, value));
                }
                Ok(RawNode::Map(entries))
            }
            Event::Alias(_) => Err(YamlProblem::unsupported(
                mark,
                "YAML aliases (`*name`) are not supported",
            )),
            _ => Err(YamlProblem::malformed(mark, "unexpected YAML event")),
        }
    }
}

/// sops refuses non-string keys ("Tree contains a non-string key").
fn key_text(key: RawScalar, mark: Marker) -> Result<String, YamlProblem> {
    if !key.quoted {
        match crate::resolve::resolve_plain(&key.text) {
            Ok(crate::resolve::Resolved::Str) => {}
            _ => {
                return Err(YamlProblem::malformed(
                    mark,
                    format!("map key `{}` is not a string", key.text),
                ));
            }
        }
    }
    Ok(key.text)
}

fn is_core_tag(tag: &Tag, name: &str) -> bool {
    (tag.handle == "tag:yaml.org,2002:" || tag.handle == "!!") && tag.suffix == name
}

/// Returns `true` when the tag forces a string; refuses every other tag.
fn check_tag(tag: Option<&Tag>, mark: Marker) -> Result<bool, YamlProblem> {
    match tag {
        None => Ok(false),
        Some(t) if is_core_tag(t, "str") => Ok(true),
        Some(t) => Err(YamlProblem::unsupported(
            mark,
            format!("YAML tag `{}{}` is not supported", t.handle, t.suffix),
        )),
    }
}

fn check_collection_tag(tag: Option<&Tag>, mark: Marker) -> Result<(), YamlProblem> {
    match tag {
        None => Ok(()),
        Some(t) if is_core_tag(t, "map") || is_core_tag(t, "seq") => Ok(()),
        Some(t) => Err(YamlProblem::unsupported(
            mark,
            format!("YAML tag `{}{}` is not supported", t.handle, t.suffix),
        )),
    }
}

/// A node to write: the output side of [`RawNode`], with each scalar already
/// rendered as YAML source text.
pub(crate) enum OutNode {
    Map(Vec<(String, OutNode)>),
    List(Vec<OutNode>),
    /// Source text written as is (already quoted if needed).
    Scalar(String),
    /// A literal block scalar (`|`), used for the age armor.
    Literal(String),
}

/// Writes a top-level map in sops' 4-space block style.
pub(crate) fn emit(entries: &[(String, OutNode)]) -> String {
    let mut out = String::new();
    emit_map(entries, 0, false, &mut out);
    out
}

fn emit_map(entries: &[(String, OutNode)], indent: usize, inline_first: bool, out: &mut String) {
    for (i, (key, value)) in entries.iter().enumerate() {
        if !(inline_first && i == 0) {
            push_indent(out, indent);
        }
        out.push_str(&key_source(key));
        out.push(':');
        match value {
            OutNode::Map(m) if !m.is_empty() => {
                out.push('\n');
                emit_map(m, indent + 4, false, out);
            }
            OutNode::List(l) if !l.is_empty() => {
                out.push('\n');
                emit_list(l, indent + 4, false, out);
            }
            other => {
                out.push(' ');
                emit_inline(other, indent, out);
            }
        }
    }
}

fn emit_list(items: &[OutNode], indent: usize, inline_first: bool, out: &mut String) {
    for (i, item) in items.iter().enumerate() {
        if !(inline_first && i == 0) {
            push_indent(out, indent);
        }
        out.push_str("- ");
        match item {
            OutNode::Map(m) if !m.is_empty() => emit_map(m, indent + 2, true, out),
            OutNode::List(l) if !l.is_empty() => emit_list(l, indent + 2, true, out),
            other => emit_inline(other, indent, out),
        }
    }
}

/// Scalars and empty collections, after `key: ` or `- `.
fn emit_inline(node: &OutNode, indent: usize, out: &mut String) {
    match node {
        OutNode::Map(_) => out.push_str("{}\n"),
        OutNode::List(_) => out.push_str("[]\n"),
        OutNode::Scalar(s) => {
            out.push_str(s);
            out.push('\n');
        }
        OutNode::Literal(text) => {
            out.push_str("|\n");
            for line in text.lines() {
                push_indent(out, indent + 4);
                out.push_str(line);
                out.push('\n');
            }
        }
    }
}

fn push_indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn key_source(key: &str) -> String {
    string(key)
}

/// A string that reads back as the same string when written unquoted:
/// plain for every YAML reader (`yaml_emit::is_plain_safe`) and typed a
/// string by yaml.v3's resolution, which the MAC depends on.
fn is_plain_safe(s: &str) -> bool {
    yaml_emit::is_plain_safe(s)
        && matches!(
            crate::resolve::resolve_plain(s),
            Ok(crate::resolve::Resolved::Str)
        )
}

/// A string scalar: plain when [`is_plain_safe`], else double-quoted.
pub(crate) fn string(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_owned()
    } else {
        yaml_emit::double_quoted(s)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reading_keeps_map_order_and_scalar_style() {
        let doc = parse_document("b: 1\na: \"2\"\nc:\n    - x\n")
            .unwrap()
            .unwrap();
        let RawNode::Map(entries) = doc else { panic!() };
        let keys: Vec<_> = entries.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "c"]);
        let RawNode::Scalar(a) = &entries[1].1 else {
            panic!()
        };
        assert!(a.quoted);
        assert_eq!(a.line, 2);
    }

    /// `s` as sops' reader takes it back: the same text, and a string.
    fn reads_back(s: &str) -> Result<(), proptest::test_runner::TestCaseError> {
        let text = format!("k: {}\n", string(s));
        let Ok(Some(RawNode::Map(entries))) = parse_document(&text) else {
            return Err(proptest::test_runner::TestCaseError::fail(text));
        };
        let RawNode::Scalar(v) = &entries[0].1 else {
            panic!("{text}")
        };
        proptest::prop_assert_eq!(&v.text, s, "{:?}", text);
        let typed = crate::resolve::resolve_plain(&v.text);
        proptest::prop_assert!(
            v.quoted || matches!(typed, Ok(crate::resolve::Resolved::Str)),
            "{:?}",
            text
        );
        Ok(())
    }

    #[test]
    fn strings_read_back_unchanged() {
        for s in [
            "tab\there \"q\" back\\slash\nnew ü ✓ 𝄞 \u{1}",
            "user@pam",
            "_x",
            "1abc",
            "0777",
            "yes",
            "2024-01-01",
            "a=b",
            "",
        ] {
            reads_back(s).unwrap();
        }
    }

    proptest::proptest! {
        #[test]
        fn any_string_reads_back_unchanged(s in proptest::prelude::any::<String>()) {
            reads_back(&s)?;
        }
    }
}
