//! Reading YAML documents into typed values with the field path and the
//! position of the first error, so a diagnostic can point at the line.

use serde::de::DeserializeOwned;

/// Why a document did not deserialize: the field path (`spec.disks[1]`),
/// serde's message (which names what would be valid), and the position
/// when the YAML parser knows it (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocError {
    pub path: String,
    pub message: String,
    pub pos: Option<(usize, usize)>,
}

/// Deserializes document `doc` (0-based) of a multi-document YAML text.
pub fn deserialize_document<T: DeserializeOwned>(text: &str, doc: usize) -> Result<T, DocError> {
    let Some(de) = serde_yaml::Deserializer::from_str(text).nth(doc) else {
        return Err(DocError { path: String::new(), message: format!("document {doc} not found"), pos: None });
    };
    serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
        let path = clean_path(&e.path().to_string());
        let inner = e.into_inner();
        let pos = inner.location().map(|l| (l.line(), l.column()));
        DocError { path, message: clean_message(&inner.to_string()), pos }
    })
}

/// Splits a YAML text into its documents and reports which are empty
/// (a bare `---` or a comment-only document), or the syntax error.
pub fn document_count(text: &str) -> Result<Vec<bool>, DocError> {
    let mut out = Vec::new();
    for de in serde_yaml::Deserializer::from_str(text) {
        match serde_yaml::Value::deserialize_from(de) {
            Ok(v) => out.push(v.is_null()),
            Err(e) => {
                let pos = e.location().map(|l| (l.line(), l.column()));
                return Err(DocError { path: String::new(), message: clean_message(&e.to_string()), pos });
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

fn clean_path(p: &str) -> String {
    if p == "." { String::new() } else { p.to_owned() }
}

/// serde_yaml appends " at line N column M" and sometimes prefixes the
/// path; both are shown separately in a diagnostic.
fn clean_message(m: &str) -> String {
    let mut m = m.trim().to_owned();
    if let Some(i) = m.rfind(" at line ") {
        let tail = &m[i + 9..];
        if tail.split(" column ").all(|p| p.trim().chars().all(|c| c.is_ascii_digit())) {
            m.truncate(i);
        }
    }
    m.replace('`', "\"")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
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
    fn unknown_fields_name_the_valid_ones() {
        let e = deserialize_document::<T>("a: 1\nb: []\nc: 2\n", 0).err();
        assert!(e.is_some_and(|e| e.message.contains("unknown field \"c\"") && e.message.contains("\"a\"")));
    }

    #[test]
    fn second_document_is_reachable() {
        let text = "a: 1\nb: []\n---\na: 2\nb: []\n";
        assert_eq!(deserialize_document::<T>(text, 1).map(|t| t.a).ok(), Some(2));
        assert_eq!(document_count(text).ok().map(|v| v.len()), Some(2));
    }
}
