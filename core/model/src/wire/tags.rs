//! `tags`: a set of PVE tags, read split on `;`, `,` and spaces, written
//! `;`-joined and sorted.

use std::collections::BTreeSet;

use super::WireError;

/// One PVE tag: PVE's `pve-tag` grammar, a letter, digit or `_` followed by
/// letters, digits and `-_+.` (`go-proxmox+cloud-init` is one tag).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Tag(String);

impl Tag {
    pub fn new(s: &str) -> Result<Tag, WireError> {
        Tag::check(s).map(|()| Tag(s.to_owned()))
    }

    /// Whether `s` is a tag, with [`Tag::new`]'s error when it is not;
    /// nothing is copied.
    pub fn check(s: &str) -> Result<(), WireError> {
        let b = s.as_bytes();
        let ok = !b.is_empty()
            && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'+' | b'.'));
        if ok {
            Ok(())
        } else {
            Err(WireError::invalid(
                "tags",
                s,
                "a tag of letters, digits and -_+. (not starting with -, + or .)",
            ))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The tags of a guest, as a set: order and duplicates never matter.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct TagSet(pub BTreeSet<Tag>);

impl TagSet {
    /// PVE writes `a;b`; its input side also accepts `,` and spaces.
    pub fn parse(s: &str) -> Result<TagSet, WireError> {
        s.split(|c: char| c == ';' || c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(Tag::new)
            .collect::<Result<BTreeSet<_>, _>>()
            .map(TagSet)
    }

    pub fn contains(&self, tag: &str) -> bool {
        self.0.iter().any(|t| t.as_str() == tag)
    }

    /// Whether the set holds `tag` as PVE compares tags: ASCII
    /// case-insensitively (PVE's default `tag-style`), so `Proxops` is the
    /// ownership tag and `Proxops-NoPrune` protects. Every safety decision
    /// about a guest's tags goes through here.
    pub fn has(&self, tag: &str) -> bool {
        self.0.iter().any(|t| t.as_str().eq_ignore_ascii_case(tag))
    }

    pub fn insert(&mut self, tag: Tag) -> bool {
        self.0.insert(tag)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Tag> {
        self.0.iter()
    }

    /// The set as PVE stores it (pve-guest-common `GuestHelpers.pm`
    /// `get_unique_tags`): each tag lower-cased unless the datacenter's
    /// `tag-style` is case-sensitive, duplicates dropped.
    pub fn as_pve_stores(&self, case_sensitive: bool) -> TagSet {
        if case_sensitive {
            return self.clone();
        }
        TagSet(
            self.0
                .iter()
                .map(|t| Tag(t.0.to_ascii_lowercase()))
                .collect(),
        )
    }

    /// Sorted, `;`-joined: PVE's own storage form.
    pub fn to_wire(&self) -> String {
        join_tags(self.0.iter().map(Tag::as_str))
    }
}

/// Tags in the order given, `;`-joined: [`TagSet::to_wire`] of sorted,
/// distinct tags.
pub fn join_tags<'a>(tags: impl Iterator<Item = &'a str> + Clone) -> String {
    let len = tags.clone().map(|t| t.len() + 1).sum::<usize>();
    let mut out = String::with_capacity(len);
    for (i, t) in tags.enumerate() {
        if i > 0 {
            out.push(';');
        }
        out.push_str(t);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tags_read_any_separator_and_write_sorted_semicolons() {
        let t = TagSet::parse("red;blue, green proxops;blue").unwrap();
        assert_eq!(t.to_wire(), "blue;green;proxops;red");
    }

    #[test]
    fn plus_and_dot_stay_inside_one_tag() {
        let t = TagSet::parse("go-proxmox+cloud-init").unwrap();
        assert_eq!(t.0.len(), 1);
        assert!(t.contains("go-proxmox+cloud-init"));
    }

    #[test]
    fn tag_characters_follow_pve_grammar() {
        assert!(Tag::new("a_b-c.d+e").is_ok());
        for bad in ["", "-a", "a/b", "a b", "ä", "a=b"] {
            assert!(Tag::new(bad).is_err(), "{bad}");
        }
        assert!(TagSet::parse("ok;bad/tag").is_err());
    }

    #[test]
    fn has_matches_as_pve_does_ignoring_ascii_case() {
        let t = TagSet::parse("Proxops;PROXOPS-NoPrune;web").unwrap();
        assert!(t.has("proxops") && t.has("proxops-noprune") && t.has("WEB"));
        assert!(!t.contains("proxops"));
        assert!(!t.has("proxop") && !t.has("pveconform"));
    }

    // pve-guest-common src/PVE/GuestHelpers.pm `get_unique_tags`: split on
    // `[,;\s]`, lower-cased unless tag-style is case-sensitive, sorted,
    // de-duplicated, joined with `;`.
    #[test]
    fn stored_form_lower_cases_and_dedups_unless_case_sensitive() {
        let t = TagSet::parse("Web;prod web,PROD").unwrap();
        assert_eq!(t.as_pve_stores(false).to_wire(), "prod;web");
        assert_eq!(t.as_pve_stores(true).to_wire(), "PROD;Web;prod;web");
    }

    #[test]
    fn empty_tags_value_is_the_empty_set() {
        assert!(TagSet::parse("").unwrap().is_empty());
        assert!(TagSet::parse(" ; ").unwrap().is_empty());
    }
}
