//! Diagnostics: what is wrong with the input, where, and what would be valid.
//!
//! Errors about desired state are data, not `Err`: loading returns every
//! diagnostic it found so a person can fix them all at once. Each names the
//! repo-relative file, the line and column where the YAML has them, and the
//! field path (`spec.disks[1].size`).

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use yaml_rust2::parser::{Event, Parser};

/// One problem with the input.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    /// Repo-relative path (or the config file as given).
    pub file: String,
    /// 1-based line, when the YAML has one.
    pub line: Option<usize>,
    /// 1-based column, when the YAML has one.
    pub column: Option<usize>,
    /// Field path inside the document, e.g. `spec.disks[1].size`.
    #[serde(rename = "path")]
    pub field: Option<String>,
    pub message: String,
    /// What was probably meant (`did you mean spec.cpu.cores?`), when a
    /// near valid spelling exists.
    /// Boxed: a diagnostic travels in `Err`, and is kept small.
    pub hint: Option<Box<str>>,
    /// An error refuses the cluster; a warning refuses nothing.
    pub severity: Severity,
}

/// Whether a diagnostic refuses anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    #[default]
    Error,
    Warning,
}

impl Diagnostic {
    pub fn file(file: impl Into<String>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: file.into(),
            line: None,
            column: None,
            field: None,
            message: message.into(),
            hint: None,
            severity: Severity::Error,
        }
    }

    pub fn with_hint(mut self, hint: Option<String>) -> Diagnostic {
        self.hint = hint.map(String::into_boxed_str);
        self
    }

    /// The same finding, refusing nothing.
    pub fn warning(mut self) -> Diagnostic {
        self.severity = Severity::Warning;
        self
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Diagnostic {
        let f = field.into();
        self.field = (!f.is_empty()).then_some(f);
        self
    }

    pub fn at(mut self, pos: Option<(usize, usize)>) -> Diagnostic {
        if let Some((l, c)) = pos {
            self.line = Some(l);
            self.column = Some(c);
        }
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        f.write_str(": ")?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

/// Positions of every key and sequence item in a YAML text, per document,
/// keyed by field path (`metadata.name`, `spec.disks[1].size`).
///
/// The text is indexed on the first question, not when the index is made:
/// a valid repository asks none, and indexing every file up front cost as
/// much as parsing it.
#[derive(Debug, Default, Clone)]
pub struct YamlIndex {
    text: String,
    built: std::sync::OnceLock<Positions>,
}

#[derive(Debug, Default, Clone)]
struct Positions {
    docs: Vec<BTreeMap<String, (usize, usize)>>,
    /// Where a key appears a second time in the same mapping, per document.
    repeats: BTreeMap<(usize, String), (usize, usize)>,
}

enum Frame {
    Map { path: String, key: Option<String> },
    Seq { path: String, next: usize },
}

impl YamlIndex {
    /// The index of `text`, built when first asked; a syntax error just
    /// ends it early (the parser reports syntax errors with their own
    /// position).
    pub fn build(text: &str) -> YamlIndex {
        YamlIndex {
            text: text.to_owned(),
            built: std::sync::OnceLock::new(),
        }
    }

    fn positions(&self) -> &Positions {
        self.built.get_or_init(|| Positions::of(&self.text))
    }
}

impl Positions {
    fn of(text: &str) -> Positions {
        let mut docs: Vec<BTreeMap<String, (usize, usize)>> = Vec::new();
        let mut repeats: BTreeMap<(usize, String), (usize, usize)> = BTreeMap::new();
        let mut stack: Vec<Frame> = Vec::new();
        let mut parser = Parser::new_from_str(text);
        // yaml-rust2 marks a block collection where its first entry ends,
        // not where it starts; a sequence item that is a collection is
        // therefore placed at its first scalar.
        let mut pending_item: Option<String> = None;
        while let Ok((event, mark)) = parser.next_token() {
            // yaml-rust2 lines are 1-based, columns 0-based.
            let pos = (mark.line(), mark.col() + 1);
            match event {
                Event::StreamEnd => break,
                Event::DocumentStart => {
                    docs.push(BTreeMap::new());
                    stack.clear();
                    pending_item = None;
                }
                Event::Scalar(value, ..) => {
                    let doc_index = docs.len().saturating_sub(1);
                    let Some(doc) = docs.last_mut() else { continue };
                    if let Some(p) = pending_item.take() {
                        doc.entry(p).or_insert(pos);
                    }
                    match stack.last_mut() {
                        Some(Frame::Map { path, key }) => {
                            // A scalar with no pending key is a key; otherwise it is that key's value.
                            let is_value = key.take().is_some();
                            if !is_value {
                                let p = join(path, &value);
                                match doc.entry(p) {
                                    std::collections::btree_map::Entry::Occupied(e) => {
                                        repeats.entry((doc_index, e.key().clone())).or_insert(pos);
                                    }
                                    std::collections::btree_map::Entry::Vacant(e) => {
                                        e.insert(pos);
                                    }
                                }
                                *key = Some(value);
                            }
                        }
                        Some(Frame::Seq { path, next }) => {
                            doc.entry(format!("{path}[{next}]")).or_insert(pos);
                            *next += 1;
                        }
                        None => {}
                    }
                }
                Event::Alias(_) => {
                    if let Some(Frame::Map { key, .. }) = stack.last_mut() {
                        // An alias as a value completes the entry; as a key we
                        // cannot name it, so treat it the same way.
                        key.take();
                    } else if let Some(Frame::Seq { next, .. }) = stack.last_mut() {
                        *next += 1;
                    }
                }
                Event::MappingStart(..) | Event::SequenceStart(..) => {
                    let is_map = matches!(event, Event::MappingStart(..));
                    if docs.is_empty() {
                        continue;
                    }
                    let path = match stack.last_mut() {
                        Some(Frame::Map { path, key }) => match key.take() {
                            Some(k) => join(path, &k),
                            None => join(path, "?"),
                        },
                        Some(Frame::Seq { path, next }) => {
                            let p = format!("{path}[{next}]");
                            pending_item.get_or_insert_with(|| p.clone());
                            *next += 1;
                            p
                        }
                        None => {
                            pending_item.get_or_insert_with(String::new);
                            String::new()
                        }
                    };
                    stack.push(if is_map {
                        Frame::Map { path, key: None }
                    } else {
                        Frame::Seq { path, next: 0 }
                    });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                }
                _ => {}
            }
        }
        Positions { docs, repeats }
    }
}

impl YamlIndex {
    /// The position of `path` in document `doc`, or of its nearest ancestor
    /// that has one.
    pub fn locate(&self, doc: usize, path: &str) -> Option<(usize, usize)> {
        let map = self.positions().docs.get(doc)?;
        let mut p = path.to_owned();
        loop {
            if let Some(pos) = map.get(&p) {
                return Some(*pos);
            }
            if p.is_empty() {
                return None;
            }
            p = parent(&p);
        }
    }

    /// Where `path` is written a second time in its mapping (the first
    /// document that repeats it).
    pub fn repeated_key(&self, path: &str) -> Option<(usize, usize)> {
        self.positions()
            .repeats
            .iter()
            .find(|((_, p), _)| p == path)
            .map(|(_, pos)| *pos)
    }

    pub fn documents(&self) -> usize {
        self.positions().docs.len()
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// The path of what holds `path`: `spec.disks` for `spec.disks[1]`,
/// `spec` for `spec.memory`, `""` at the top.
pub(crate) fn parent(path: &str) -> String {
    if path.ends_with(']')
        && let Some(i) = path.rfind('[')
    {
        return path[..i].to_owned();
    }
    match path.rfind('.') {
        Some(i) => path[..i].to_owned(),
        None => String::new(),
    }
}

/// A field-level problem found by `validate`: the path below the document
/// root and a message that says what would be valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_finds_keys_and_items_per_document() {
        let text = "a: 1\nspec:\n  disks:\n    - size: 1\n    - size: 2\n---\nb:\n  c: x\n";
        let idx = YamlIndex::build(text);
        assert_eq!(idx.documents(), 2);
        assert_eq!(idx.locate(0, "a"), Some((1, 1)));
        assert_eq!(idx.locate(0, "spec.disks[1].size"), Some((5, 7)));
        assert_eq!(idx.locate(0, "spec.disks[1].nope"), Some((5, 7)));
        assert_eq!(idx.locate(1, "b.c"), Some((8, 3)));
        assert_eq!(idx.repeated_key("a"), None);
    }

    #[test]
    fn a_key_written_twice_is_found_at_its_second_place() {
        let idx = YamlIndex::build("spec:\n  cpu:\n    cores: 1\n    type: host\n    cores: 2\n");
        assert_eq!(idx.locate(0, "spec.cpu.cores"), Some((3, 5)));
        assert_eq!(idx.repeated_key("spec.cpu.cores"), Some((5, 5)));
    }

    #[test]
    fn display_names_file_line_field() {
        let d = Diagnostic::file("vm/base/a.yaml", "bad")
            .with_field("spec.memory")
            .at(Some((3, 5)));
        assert_eq!(d.to_string(), "vm/base/a.yaml:3:5: spec.memory: bad");
    }
}
