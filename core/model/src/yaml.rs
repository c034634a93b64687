//! Reading YAML documents into typed values with the field path and the
//! position of the first error, so a diagnostic can point at the line.

use serde::de::DeserializeOwned;

use crate::diag::parent;

/// Why a document did not deserialize: the field path (`spec.disks[1]`),
/// serde's message (which names what would be valid), and the position
/// when the YAML parser knows it (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocError {
    pub path: String,
    pub message: String,
    pub pos: Option<(usize, usize)>,
    /// The nearest valid field, for an unknown one (`did you mean …?`).
    pub hint: Option<String>,
}

/// Deserializes document `doc` (0-based) of a multi-document YAML text.
pub fn deserialize_document<T: DeserializeOwned>(text: &str, doc: usize) -> Result<T, DocError> {
    let Some(de) = serde_yaml::Deserializer::from_str(text).nth(doc) else {
        return Err(DocError {
            path: String::new(),
            message: format!("document {doc} not found"),
            pos: None,
            hint: None,
        });
    };
    serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
        let path = clean_path(&e.path().to_string());
        let inner = e.into_inner();
        let pos = inner.location().map(|l| (l.line(), l.column()));
        let message = strip_path_prefix(&clean_message(&inner.to_string(), pos), &path);
        let (path, message) = explain(path, message);
        let hint = unknown_field_hint::<T>(&path, &message);
        DocError {
            path,
            message,
            pos,
            hint,
        }
    })
}

/// True when document `doc` (0-based) of a YAML text reads as YAML at all,
/// whatever its shape: an error reading it into a type is then the type's.
pub fn is_yaml_document(text: &str, doc: usize) -> bool {
    deserialize_document::<serde_yaml::Value>(text, doc).is_ok()
}

/// What reading a document found beyond its first error.
#[derive(Debug)]
pub struct Remaining<T> {
    /// The further errors, in the order serde met them; without positions
    /// (a parsed value has none: the caller looks each path up).
    pub errors: Vec<DocError>,
    /// The paths taken out of the document, or filled in, to read on past
    /// an error: a rule's finding there only repeats that error.
    pub removed: Vec<String>,
    /// The document as it reads with those paths taken out, when it then
    /// reads at all: its own rules can still be checked.
    pub rest: Option<T>,
}

/// At most this many errors are collected from one document.
const MAX_ERRORS: usize = 100;

/// Stand-ins tried, in order, for a required field that is missing, so the
/// rest of the document can still be read: one of them reads as most
/// scalars, and an empty mapping or list as the rest.
fn fillers() -> [serde_yaml::Value; 5] {
    use serde_yaml::Value;
    [
        Value::Number(1.into()),
        Value::String("x".into()),
        Value::Bool(false),
        Value::Mapping(serde_yaml::Mapping::new()),
        Value::Sequence(Vec::new()),
    ]
}

/// Every error of a document after its `first`, so one run reports them
/// all. serde stops at the first error, so the entry it refused is taken
/// out of the parsed `value` (a missing required field is filled in with a
/// stand-in) and the document read again, until it reads or nothing more
/// can be done. A required field found missing because its entry was taken
/// out, or written under a misspelt name the hint already names, is a
/// consequence, not another error.
pub fn remaining_errors<T: DeserializeOwned>(
    value: &serde_yaml::Value,
    first: &DocError,
) -> Remaining<T> {
    let mut doc = value.clone();
    let mut out = Remaining {
        errors: Vec::new(),
        removed: Vec::new(),
        rest: None,
    };
    let mut meant: Vec<String> = hinted_path(first).into_iter().collect();
    let mut path = first.path.clone();
    // Each step takes something out or fills a gap for good; the bound
    // only guards against a model no finite number of steps reads.
    for _ in 0..MAX_ERRORS * 4 {
        if out.errors.len() >= MAX_ERRORS {
            break;
        }
        // A path the document does not hold is a required field missing.
        let stepped = if absent(&doc, &path) {
            fill::<T>(&mut doc, &path).or_else(|| remove_path(&mut doc, &parent(&path)))
        } else {
            remove_path(&mut doc, &path)
        };
        let Some(stepped) = stepped else { break };
        out.removed.push(stepped);
        let err = match serde_path_to_error::deserialize::<_, T>(doc.clone()) {
            Ok(t) => {
                out.rest = Some(t);
                break;
            }
            Err(e) => e,
        };
        let raw = clean_path(&err.path().to_string());
        let inner = err.into_inner();
        let cleaned = strip_path_prefix(&clean_message(&inner.to_string(), None), &raw);
        let message;
        (path, message) = explain(raw, cleaned);
        let consequence =
            absent(&doc, &path) && (out.removed.contains(&path) || meant.contains(&path));
        if consequence {
            continue;
        }
        let e = DocError {
            hint: unknown_field_hint::<T>(&path, &message),
            path: path.clone(),
            message: message.clone(),
            pos: None,
        };
        meant.extend(hinted_path(&e));
        out.errors.push(e);
    }
    out
}

/// The field a "did you mean" hint names.
fn hinted_path(e: &DocError) -> Option<String> {
    let h = e.hint.as_deref()?;
    Some(
        h.strip_prefix("did you mean ")?
            .strip_suffix('?')?
            .to_owned(),
    )
}

/// Fills the missing required field at `path` with the first stand-in
/// that reads there; the path, when one does.
fn fill<T: DeserializeOwned>(doc: &mut serde_yaml::Value, path: &str) -> Option<String> {
    let parent = parent(path);
    let key = path.strip_prefix(&parent)?.trim_start_matches('.');
    for filler in fillers() {
        let mut trial = doc.clone();
        let map = node_at(&mut trial, &parent).and_then(serde_yaml::Value::as_mapping_mut)?;
        map.insert(serde_yaml::Value::String(key.to_owned()), filler);
        let still_there = serde_path_to_error::deserialize::<_, T>(trial.clone())
            .err()
            .is_some_and(|e| {
                let p = clean_path(&e.path().to_string());
                p == path
                    || p.starts_with(&format!("{path}."))
                    || p.starts_with(&format!("{path}["))
            });
        if !still_there {
            *doc = trial;
            return Some(path.to_owned());
        }
    }
    None
}

/// The node at `path` (`spec.disks[1]`; the root for `""`). A key may hold
/// a dot (a label such as `app.kubernetes.io/name`): the longest key the
/// path goes on from is taken.
fn node_at<'a>(doc: &'a mut serde_yaml::Value, path: &str) -> Option<&'a mut serde_yaml::Value> {
    let mut node = doc;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('[') {
            let (index, tail) = after.split_once(']')?;
            node = node
                .as_sequence_mut()?
                .get_mut(index.parse::<usize>().ok()?)?;
            rest = tail.strip_prefix('.').unwrap_or(tail);
            continue;
        }
        let map = node.as_mapping_mut()?;
        let key = map
            .keys()
            .filter_map(serde_yaml::Value::as_str)
            .filter(|k| {
                rest.strip_prefix(*k)
                    .is_some_and(|t| t.is_empty() || t.starts_with(['.', '[']))
            })
            .max_by_key(|k| k.len())?
            .to_owned();
        let tail = &rest[key.len()..];
        rest = tail.strip_prefix('.').unwrap_or(tail);
        node = map.get_mut(key.as_str())?;
    }
    Some(node)
}

/// True when `doc` holds nothing at `path`: an error there is about a
/// field the document lacks, not one it gives.
fn absent(doc: &serde_yaml::Value, path: &str) -> bool {
    node_at(&mut doc.clone(), path).is_none()
}

/// Takes the entry at `path` (`spec.disks[1].size`) out of `doc` and says
/// which path it took out: an item of a list takes the whole list out, so
/// the indexes of later errors stay those of the file. `None` when there
/// is nothing to take out (the root, or a path not in the document).
fn remove_path(doc: &mut serde_yaml::Value, path: &str) -> Option<String> {
    if path.is_empty() {
        return None;
    }
    if path.ends_with(']') {
        return remove_path(doc, &parent(path));
    }
    let parent = parent(path);
    let key = path.strip_prefix(&parent)?.trim_start_matches('.');
    let map = node_at(doc, &parent)?.as_mapping_mut()?;
    // Shifting keeps the order of what follows, so errors stay in file order.
    map.shift_remove(key).map(|_| path.to_owned())
}

/// The hint for serde's "unknown field" message: the nearest field of the
/// document type `T` (`did you mean spec.cpu.cores?`).
fn unknown_field_hint<T: DeserializeOwned>(path: &str, message: &str) -> Option<String> {
    let key = message
        .strip_prefix("unknown field \"")?
        .split_once('"')
        .map(|(k, _)| k)?;
    crate::suggest::field_hint(path, key, &crate::suggest::field_paths::<T>())
}

/// Splits a YAML text into its documents and reports which are empty
/// (a bare `---` or a comment-only document), or the syntax error.
pub fn document_count(text: &str) -> Result<Vec<bool>, DocError> {
    Ok(document_values(text)?
        .iter()
        .map(serde_yaml::Value::is_null)
        .collect())
}

/// Deserializes a document already parsed into a value. This is the fast
/// path: parsing a multi-document text once and reading each document from
/// its value keeps loading linear in the number of documents. It gives no
/// position, so callers that need one for an error re-read the document from
/// the text with `deserialize_document` (errors are rare; input is not).
pub fn from_value<T: DeserializeOwned>(value: &serde_yaml::Value) -> Option<T> {
    T::deserialize(value).ok()
}

/// Every document of a YAML text as a value (`Null` for an empty one), or
/// the syntax error. Manifests in the block YAML they are usually written
/// in are read by [`crate::yaml_block`], several times faster; anything
/// else (and every error) by serde_norway.
pub fn document_values(text: &str) -> Result<Vec<serde_yaml::Value>, DocError> {
    match crate::yaml_block::documents(text) {
        Some(docs) => Ok(docs),
        None => serde_documents(text),
    }
}

/// [`document_values`] as serde_norway reads them: the reference the
/// faster reader is held to.
pub fn serde_documents(text: &str) -> Result<Vec<serde_yaml::Value>, DocError> {
    let mut out = Vec::new();
    for de in serde_yaml::Deserializer::from_str(text) {
        match serde_yaml::Value::deserialize_from(de) {
            Ok(v) => out.push(v),
            Err(e) => {
                let pos = e.location().map(|l| (l.line(), l.column()));
                let (path, message) = split_path_prefix(&clean_message(&e.to_string(), pos));
                let path = clean_path(&path);
                let (path, message) = explain(path, message);
                return Err(DocError {
                    path,
                    message,
                    pos,
                    hint: None,
                });
            }
        }
    }
    Ok(out)
}

trait DeserializeFrom: Sized {
    fn deserialize_from(de: serde_yaml::Deserializer<'_>) -> Result<Self, serde_yaml::Error>;
}

impl DeserializeFrom for serde_yaml::Value {
    fn deserialize_from(de: serde_yaml::Deserializer<'_>) -> Result<Self, serde_yaml::Error> {
        <serde_yaml::Value as serde::Deserialize>::deserialize(de)
    }
}

/// `?` stands for a key serde could not name (a complex key); the field
/// shown is then its parent.
fn clean_path(p: &str) -> String {
    if p == "." {
        return String::new();
    }
    match p.find('?') {
        Some(i) => p[..i].trim_end_matches('.').to_owned(),
        None => p.to_owned(),
    }
}

/// serde_yaml appends " at line N column M" (shown separately in a
/// diagnostic) and names Rust types; both are rewritten for an operator.
fn clean_message(m: &str, pos: Option<(usize, usize)>) -> String {
    let mut m = m.trim().to_owned();
    match pos {
        Some((l, c)) => m = m.replacen(&format!(" at line {l} column {c}"), "", 1),
        None => {
            if let Some(i) = m.rfind(" at line ") {
                let tail = &m[i + 9..];
                if tail
                    .split(" column ")
                    .all(|p| p.trim().chars().all(|c| c.is_ascii_digit()))
                {
                    m.truncate(i);
                }
            }
        }
    }
    let mut m = m.replace('`', "\"");
    for (rust, plain) in [
        ("u8", "a whole number"),
        ("u16", "a whole number"),
        ("u32", "a whole number"),
        ("u64", "a whole number"),
        ("usize", "a whole number"),
        ("i8", "a whole number"),
        ("i16", "a whole number"),
        ("i32", "a whole number"),
        ("i64", "a whole number"),
        ("f32", "a number"),
        ("f64", "a number"),
    ] {
        let from = format!("expected {rust}");
        if m.ends_with(&from) || m.contains(&format!("{from},")) {
            m = m.replace(&from, &format!("expected {plain}"));
        }
    }
    if let Some(i) = m.find("expected struct ") {
        let end = m[i + 16..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .map_or(m.len(), |e| i + 16 + e);
        m.replace_range(i..end, "expected a mapping");
    }
    m
}

/// A syntax-level message may start with the path of the mapping it was
/// reading (`spec.cpu: duplicate entry …`); split it off as the field.
fn split_path_prefix(m: &str) -> (String, String) {
    match m.split_once(": ") {
        Some((head, rest))
            if !head.is_empty()
                && !head.contains(char::is_whitespace)
                && !head.contains('"')
                && head.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            (head.to_owned(), rest.to_owned())
        }
        _ => (String::new(), m.to_owned()),
    }
}

/// Fields read under a second spelling (`#[serde(alias)]`): the name,
/// then the alias.
const FIELD_ALIASES: &[(&str, &str)] = &[("gateway", "gw")];

/// The few serde_norway messages reworded for an operator. serde's error
/// carries no kind, only its text and a position, so its words are read
/// here and nowhere else, and only to choose the words shown: no step of
/// reading a document depends on them (`remaining_errors` looks at the
/// document itself).
enum Said {
    /// A key given twice in one mapping (or a field and its alias).
    Duplicate(String),
    /// A required field the mapping lacks.
    Missing(String),
    /// An integer beyond 64 bits, which no field holds.
    TooLarge(String),
    Other,
}

impl Said {
    fn of(message: &str) -> Said {
        // `<prefix>"<quoted>"<tail>`, backticks already made quotes.
        let quoted = |prefix: &str| -> Option<(String, &str)> {
            let rest = message.strip_prefix(prefix)?.strip_prefix('"')?;
            rest.split_once('"').map(|(k, tail)| (k.to_owned(), tail))
        };
        if let Some((key, _)) =
            quoted("duplicate entry with key ").or_else(|| quoted("duplicate field "))
        {
            return Said::Duplicate(key);
        }
        if let Some((key, _)) = quoted("missing field ") {
            return Said::Missing(key);
        }
        match quoted("invalid type: integer ") {
            Some((n, tail)) if tail.strip_prefix(" as u128").is_some() => Said::TooLarge(n),
            _ => Said::Other,
        }
    }
}

/// Rewrites the messages an operator meets most often into what to do:
/// a repeated key names the key as the field; a number too large for any
/// field says so instead of naming a Rust type.
fn explain(path: String, message: String) -> (String, String) {
    let field = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match Said::of(&message) {
        // serde calls a field given under its name and under an alias a
        // duplicate: say that the two spellings are one field.
        Said::Duplicate(key) => match FIELD_ALIASES.iter().find(|(name, _)| *name == key) {
            Some((_, alias)) => (
                field(&key),
                format!(
                    "both {key:?} and {alias:?} are given: they are one field (PVE's {alias:?} is read as {key:?}); keep only {key:?}"
                ),
            ),
            None => (
                field(&key),
                format!("duplicate key {key:?}: a key may appear only once in a mapping"),
            ),
        },
        Said::Missing(key) => (field(&key), format!("missing required field {key:?}")),
        Said::TooLarge(n) => (path, format!("number {n} is too large")),
        Said::Other => (path, message),
    }
}

/// serde_yaml prefixes some messages with the path of the value being read
/// (`spec.cpu.cores: invalid type …`); the diagnostic shows the field on
/// its own, so the prefix is dropped when it is (a parent of) that path.
fn strip_path_prefix(m: &str, path: &str) -> String {
    if let Some((head, rest)) = m.split_once(": ")
        && !head.is_empty()
        && !head.contains(char::is_whitespace)
        && path.starts_with(head)
        && matches!(
            path.as_bytes().get(head.len()),
            None | Some(b'.') | Some(b'[')
        )
    {
        return rest.to_owned();
    }
    m.to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct T {
        a: u32,
        b: Vec<BTreeMap<String, u32>>,
    }

    #[test]
    fn errors_carry_path_and_position() {
        let text = "a: 1\nb:\n  - x: 1\n  - y: nope\n";
        let e = deserialize_document::<T>(text, 0).err();
        let e = e.as_ref();
        assert_eq!(e.map(|e| e.path.as_str()), Some("b[1].y"));
        assert_eq!(e.and_then(|e| e.pos), Some((4, 8)));
        assert!(e.is_some_and(|e| !e.message.contains("at line")), "{e:?}");
    }

    #[test]
    fn a_repeated_key_is_named_as_the_field() {
        let e = document_count("a: 1\nb:\n  c: 1\n  c: 2\n").err();
        let e = e.as_ref();
        assert_eq!(e.map(|e| e.path.as_str()), Some("b.c"));
        assert!(
            e.is_some_and(|e| e.message.starts_with("duplicate key \"c\"")),
            "{e:?}"
        );
        let e = deserialize_document::<T>("a: 1\na: 2\nb: []\n", 0).err();
        assert_eq!(e.map(|e| e.path), Some("a".to_owned()));
    }

    #[test]
    fn a_missing_field_is_named_as_the_field() {
        let e = deserialize_document::<T>("b: []\n", 0).err();
        let e = e.as_ref();
        assert_eq!(e.map(|e| e.path.as_str()), Some("a"));
        assert_eq!(
            e.map(|e| e.message.as_str()),
            Some("missing required field \"a\"")
        );
    }

    #[test]
    fn messages_drop_the_path_prefix_and_rust_type_names() {
        let e = deserialize_document::<T>("a: many\nb: []\n", 0).err();
        assert_eq!(
            e.map(|e| e.message),
            Some("invalid type: string \"many\", expected a whole number".to_owned())
        );
        let e = deserialize_document::<T>("- 1\n", 0).err();
        assert!(e.is_some_and(|e| e.message.contains("expected a mapping")));
    }

    #[test]
    fn unknown_fields_name_the_valid_ones() {
        let e = deserialize_document::<T>("a: 1\nb: []\nc: 2\n", 0).err();
        assert!(e.is_some_and(
            |e| e.message.contains("unknown field \"c\"") && e.message.contains("\"a\"")
        ));
    }

    #[test]
    fn every_error_of_a_document_is_found_not_only_the_first() {
        let text = "a: many\nb:\n  - x: 1\n  - x: nope\nc: 2\n";
        let Err(first) = deserialize_document::<T>(text, 0) else {
            panic!("the document reads");
        };
        assert_eq!(first.path, "a");
        let values = document_values(text).unwrap_or_default();
        let more = remaining_errors::<T>(&values[0], &first);
        let paths: Vec<&str> = more.errors.iter().map(|e| e.path.as_str()).collect();
        // `a`, taken out to read on, is not missing a second time.
        assert_eq!(paths, ["b[1].x", "c"]);
        assert!(more.errors[1].message.starts_with("unknown field \"c\""));
        assert!(more.rest.is_some(), "the rest of the document reads");
        assert_eq!(more.removed, ["a", "b[1].x", "c", "a"]);
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sized {
        size: crate::units::Quantity,
        name: Option<String>,
        count: Option<u32>,
    }

    fn first_error(text: &str) -> (String, String) {
        let e = deserialize_document::<Sized>(text, 0)
            .map(|s| (s.size, s.name, s.count))
            .unwrap_err();
        (e.path, e.message)
    }

    #[test]
    fn a_size_that_is_neither_a_number_nor_text_says_what_it_takes() {
        let want = "invalid value: use a whole number (0 or more) or a text value";
        for v in ["-5", "1.5", "true", "[1]", "{a: 1}", "~"] {
            let (path, message) = first_error(&format!("size: {v}\n"));
            assert_eq!((path.as_str(), message.as_str()), ("size", want), "{v}");
            // Read on past a first error, from the parsed value.
            let text = format!("count: many\nsize: {v}\n");
            let first = deserialize_document::<Sized>(&text, 0).unwrap_err();
            let value = document_values(&text).unwrap();
            let more = remaining_errors::<Sized>(&value[0], &first);
            let found: Vec<(&str, &str)> = more
                .errors
                .iter()
                .map(|e| (e.path.as_str(), e.message.as_str()))
                .collect();
            assert_eq!(found, [("size", want)], "{v}");
        }
        let (_, message) = first_error("size: lots\n");
        assert!(message.contains("lots"), "{message}");
        assert!(deserialize_document::<Sized>("size: 5\n", 0).is_ok());
        assert!(deserialize_document::<Sized>("size: 5GiB\n", 0).is_ok());
    }

    #[test]
    fn a_number_too_large_for_any_field_says_so() {
        let big = "123456789012345678901234";
        let (path, message) = first_error(&format!("size: {big}\n"));
        assert_eq!(
            (path.as_str(), message),
            ("size", format!("number {big} is too large"))
        );
        let (path, message) = first_error(&format!("size: 1\ncount: {big}\n"));
        assert_eq!(
            (path.as_str(), message),
            ("count", format!("number {big} is too large"))
        );
    }

    #[test]
    fn second_document_is_reachable() {
        let text = "a: 1\nb: []\n---\na: 2\nb:\n  - x: 3\n";
        let second = deserialize_document::<T>(text, 1).map(|t| (t.a, t.b));
        assert_eq!(
            second.ok(),
            Some((2, vec![BTreeMap::from([("x".to_owned(), 3)])]))
        );
        assert_eq!(document_count(text).ok().map(|v| v.len()), Some(2));
    }
}
