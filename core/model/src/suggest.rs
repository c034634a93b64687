//! "Did you mean": the nearest valid spelling of something an operator got
//! wrong — a command, a flag, a flag's value, a kind, a manifest or
//! configuration field — so the CLI and the repository loader answer a typo
//! with one implementation.
//!
//! Nearness is the optimal-string-alignment edit distance (a swapped pair of
//! letters counts once, `memroy` → `memory`), ignoring ASCII case, and only
//! a candidate within about a third of the word's length is offered: a
//! far-fetched guess is worse than none. Field paths come from the serde
//! model itself (see [`field_paths`]), so a suggestion can never name a
//! field that does not exist. This module only computes; it never decides
//! whether input is valid.

use serde::de::value::{StrDeserializer, UnitDeserializer};
use serde::de::{DeserializeOwned, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// The candidate nearest to `word`, when one is near enough to be what was
/// meant. Ties go to the earlier candidate, so the answer is deterministic.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let w = word.to_ascii_lowercase();
    let limit = w.chars().count().div_ceil(3);
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        let d = strsim::osa_distance(&w, &c.to_ascii_lowercase());
        if d <= limit && d < c.chars().count() && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// [`nearest`], but a word that is another tool's name for one of ours
/// (`habits`: pairs of that word and ours, e.g. Terraform's `plan` for
/// `diff`) is answered with ours first.
pub fn nearest_or_habit<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    habits: &[(&str, &'a str)],
) -> Option<&'a str> {
    habits
        .iter()
        .find(|(theirs, _)| theirs.eq_ignore_ascii_case(word))
        .map(|(_, ours)| *ours)
        .or_else(|| nearest(word, candidates))
}

/// `did you mean "x"?`, when something is near `word`.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    nearest(word, candidates).map(|c| format!("did you mean {c:?}?"))
}

/// A key no document of type `T` has: serde names the valid ones when it
/// meets it.
const PROBE: &str = " probe ";

/// How deep [`field_paths`] looks; the manifests nest four levels.
const MAX_DEPTH: usize = 8;

/// Every field path of the document type `T` as serde reads it, in the
/// model's order: `spec.cpu.cores`, `spec.disks[].size` (`[]` stands for
/// any item of a list). Found by asking serde: a mapping holding only an
/// unknown key, placed at a path, is refused with the fields valid there
/// when the path is a struct. Maps and scalars are leaves.
pub fn field_paths<T: DeserializeOwned>() -> Vec<String> {
    let mut out = Vec::new();
    walk::<T>(&mut Vec::new(), &mut out);
    out
}

#[derive(Clone)]
enum Seg {
    Key(String),
    Item,
}

fn walk<T: DeserializeOwned>(at: &mut Vec<Seg>, out: &mut Vec<String>) {
    if at.len() > MAX_DEPTH {
        return;
    }
    let Some(fields) = fields_at::<T>(at) else {
        return;
    };
    for f in fields {
        at.push(Seg::Key(f));
        out.push(render(at));
        walk::<T>(at, out);
        // A list of structs: its items have fields of their own.
        at.push(Seg::Item);
        if fields_at::<T>(at).is_some() {
            walk::<T>(at, out);
        }
        at.pop();
        at.pop();
    }
}

/// The fields serde accepts at `at`, when `at` is a struct that refuses
/// unknown fields: the type is read from a [`Probe`] holding only the
/// unknown key at `at`, and serde hands the valid names to the error it
/// makes of it (`unknown_field`), typed.
fn fields_at<T: DeserializeOwned>(at: &[Seg]) -> Option<Vec<String>> {
    match T::deserialize(Probe { at }) {
        Err(Probed::Fields(fields)) => Some(fields),
        _ => None,
    }
}

/// How reading a [`Probe`] ended.
#[derive(Debug)]
enum Probed {
    /// The struct at the probe's end refused its key, naming its fields.
    Fields(Vec<String>),
    /// Anything else: no struct that refuses unknown fields is there.
    Other,
}

impl std::fmt::Display for Probed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("probe")
    }
}

impl std::error::Error for Probed {}

impl serde::de::Error for Probed {
    fn custom<M: std::fmt::Display>(_: M) -> Self {
        Probed::Other
    }
    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        if field == PROBE {
            Probed::Fields(expected.iter().map(|f| (*f).to_owned()).collect())
        } else {
            Probed::Other
        }
    }
}

/// A document that is nothing but the path `at`, ending in a mapping that
/// holds only the key `PROBE`: every map or struct on the way gets one
/// entry, every list one item.
struct Probe<'a> {
    at: &'a [Seg],
}

impl<'de> serde::Deserializer<'de> for Probe<'_> {
    type Error = Probed;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probed> {
        match self.at.split_first() {
            None => visitor.visit_map(OneEntry {
                key: Some(PROBE),
                value: None,
            }),
            Some((Seg::Key(k), rest)) => visitor.visit_map(OneEntry {
                key: Some(k),
                value: Some(Probe { at: rest }),
            }),
            Some((Seg::Item, rest)) => visitor.visit_seq(OneItem(Some(Probe { at: rest }))),
        }
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Probed> {
        visitor.visit_some(self)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Probed> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Probed> {
        Err(Probed::Other)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}

/// The one entry of a [`Probe`]'s mapping: `PROBE` (with no value) at the
/// end of the path, else the next key and the rest of the path.
struct OneEntry<'a> {
    key: Option<&'a str>,
    value: Option<Probe<'a>>,
}

impl<'de> MapAccess<'de> for OneEntry<'_> {
    type Error = Probed;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Probed> {
        match self.key.take() {
            Some(k) => seed.deserialize(StrDeserializer::new(k)).map(Some),
            None => Ok(None),
        }
    }
    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, Probed> {
        match self.value.take() {
            Some(p) => seed.deserialize(p),
            None => seed.deserialize(UnitDeserializer::new()),
        }
    }
}

/// The one item of a [`Probe`]'s list.
struct OneItem<'a>(Option<Probe<'a>>);

impl<'de> SeqAccess<'de> for OneItem<'_> {
    type Error = Probed;

    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, Probed> {
        self.0.take().map(|p| seed.deserialize(p)).transpose()
    }
}

fn render(at: &[Seg]) -> String {
    let mut s = String::new();
    for seg in at {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Item => s.push_str("[]"),
        }
    }
    s
}

/// A concrete path (`spec.disks[1].size`) in [`field_paths`]' form
/// (`spec.disks[].size`).
pub fn schema_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[]");
            }
            ']' => in_index = false,
            _ if in_index => {}
            _ => out.push(c),
        }
    }
    out
}

/// The hint for an unknown field `key` written at `path` (its concrete
/// path, `spec.disks[1].sise`), given every field path of the document:
/// the nearest field of the same mapping, else the same field where the
/// model has it (`spec.cores` → `spec.cpu.cores`), as a full path.
pub fn field_hint(path: &str, key: &str, known: &[String]) -> Option<String> {
    let parent = path
        .strip_suffix(key)
        .map(|p| p.trim_end_matches('.'))
        .unwrap_or("");
    let schema_parent = schema_path(parent);
    let last = |p: &str| {
        p.rsplit('.')
            .next()
            .unwrap_or(p)
            .trim_end_matches("[]")
            .to_owned()
    };
    let siblings: Vec<String> = known
        .iter()
        .filter(|p| parent_of(p) == schema_parent)
        .map(|p| last(p))
        .collect();
    let join = |parent: &str, k: &str| {
        if parent.is_empty() {
            k.to_owned()
        } else {
            format!("{parent}.{k}")
        }
    };
    if let Some(s) = nearest(key, siblings.iter().map(String::as_str)) {
        return Some(format!("did you mean {}?", join(parent, s)));
    }
    // Elsewhere in the model: the same name first, else a near one; below
    // the mapping it was written in first, then the shortest path.
    let rank = |p: &&String| {
        (
            !p.starts_with(&format!("{schema_parent}.")) && !schema_parent.is_empty(),
            p.matches('.').count(),
        )
    };
    let exact = known
        .iter()
        .filter(|p| last(p).eq_ignore_ascii_case(key))
        .min_by_key(rank);
    let found = exact.or_else(|| {
        let names: Vec<String> = known.iter().map(|p| last(p)).collect();
        let near = nearest(key, names.iter().map(String::as_str))?;
        known.iter().filter(|p| last(p) == near).min_by_key(rank)
    })?;
    Some(format!("did you mean {found}?"))
}

fn parent_of(schema: &str) -> String {
    let trimmed = schema.trim_end_matches("[]");
    match trimmed.rfind('.') {
        Some(i) => trimmed[..i].to_owned(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::manifest::{Document, LxcSpec, VmSpec};

    #[test]
    fn a_typo_finds_its_word_and_nonsense_finds_none() {
        let commands = ["validate", "diff", "apply", "status"];
        assert_eq!(nearest("valdate", commands), Some("validate"));
        assert_eq!(nearest("stauts", commands), Some("status"));
        assert_eq!(nearest("APPLY", commands), Some("apply"));
        assert_eq!(nearest("jsn", ["text", "json", "markdown"]), Some("json"));
        assert_eq!(nearest("frobnicate", commands), None);
        assert_eq!(nearest("x", ["json"]), None);
    }

    #[test]
    fn another_tools_word_is_answered_with_ours() {
        let habits = [("plan", "diff")];
        assert_eq!(
            nearest_or_habit("plan", ["diff", "apply"], &habits),
            Some("diff")
        );
        assert_eq!(
            nearest_or_habit("aply", ["diff", "apply"], &habits),
            Some("apply")
        );
    }

    #[test]
    fn field_paths_come_from_the_model() {
        let vm = field_paths::<Document<VmSpec>>();
        for p in [
            "apiVersion",
            "metadata.name",
            "spec.cpu.cores",
            "spec.disks[].size",
        ] {
            assert!(vm.iter().any(|k| k == p), "{p} missing from {vm:?}");
        }
        assert!(!vm.iter().any(|k| k.starts_with("spec.extra.")), "{vm:?}");
        let lxc = field_paths::<Document<LxcSpec>>();
        assert!(lxc.iter().any(|k| k == "spec.root.size"), "{lxc:?}");
    }

    #[test]
    fn an_unknown_field_is_answered_with_a_full_path() {
        let vm = field_paths::<Document<VmSpec>>();
        let hint = |path: &str, key: &str| field_hint(path, key, &vm);
        assert_eq!(
            hint("spec.memroy", "memroy").as_deref(),
            Some("did you mean spec.memory?")
        );
        assert_eq!(
            hint("spec.cores", "cores").as_deref(),
            Some("did you mean spec.cpu.cores?")
        );
        assert_eq!(
            hint("spec.disk", "disk").as_deref(),
            Some("did you mean spec.disks?")
        );
        assert_eq!(
            hint("spec.disks[1].sise", "sise").as_deref(),
            Some("did you mean spec.disks[1].size?")
        );
        assert_eq!(hint("spec.zzzzzzzz", "zzzzzzzz"), None);
    }

    #[test]
    fn schema_paths_forget_indexes() {
        assert_eq!(schema_path("spec.disks[12].size"), "spec.disks[].size");
    }
}
