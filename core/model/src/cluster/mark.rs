//! Ownership of cluster-level objects: they carry no tags, so ProxOps
//! writes a marker at the end of the object's own `comment`, where an
//! operator sees it in the PVE GUI: `[proxops]`, or `[proxops noprune]`
//! for `proxops/prune: disabled` (which must outlive the manifest, as the
//! `proxops-noprune` tag does on a guest).
//!
//! A comment is marked only when it ends with exactly one of the two
//! tokens, in lower case: an operator who appends text after it demotes
//! the object to unmarked, the safe direction (an anomaly, never a
//! takeover).

/// The ownership marker.
pub const MARK: &str = "[proxops]";
/// The marker of an object that is never pruned.
pub const MARK_NOPRUNE: &str = "[proxops noprune]";
/// What both markers start with; a manifest's comment may not hold it.
pub const MARK_PREFIX: &str = "[proxops";
/// The longest marker with the blank before it: what a comment's PVE
/// limit loses to the marker.
pub const LONGEST_MARK: &str = " [proxops noprune]";

/// What a live comment says about ownership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// No marker: never updated or deleted.
    Unmarked,
    /// ProxOps' object; `noprune` keeps it when its manifest goes.
    Marked { noprune: bool },
}

impl Owner {
    pub fn of(comment: Option<&str>) -> Owner {
        let c = comment.unwrap_or("");
        if c.ends_with(MARK_NOPRUNE) {
            Owner::Marked { noprune: true }
        } else if c.ends_with(MARK) {
            Owner::Marked { noprune: false }
        } else {
            Owner::Unmarked
        }
    }

    pub fn is_marked(self) -> bool {
        matches!(self, Owner::Marked { .. })
    }
}

/// The comment as ProxOps writes it: the manifest's text, a blank and the
/// marker (the marker alone without text).
pub fn marked(comment: Option<&str>, noprune: bool) -> String {
    let mark = if noprune { MARK_NOPRUNE } else { MARK };
    match comment {
        Some(c) if !c.is_empty() => format!("{c} {mark}"),
        _ => mark.to_owned(),
    }
}

/// The operator's part of a live comment: the text before the marker
/// (`None` when only the marker or nothing is there).
pub fn text_of(comment: Option<&str>) -> Option<String> {
    let c = comment?;
    let text = c
        .strip_suffix(MARK_NOPRUNE)
        .or_else(|| c.strip_suffix(MARK))
        .unwrap_or(c)
        .trim_end();
    (!text.is_empty()).then(|| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_trailing_lower_case_token_marks() {
        assert_eq!(
            Owner::of(Some("web tier [proxops]")),
            Owner::Marked { noprune: false }
        );
        assert_eq!(
            Owner::of(Some("[proxops noprune]")),
            Owner::Marked { noprune: true }
        );
        assert_eq!(Owner::of(Some("[proxops] and more")), Owner::Unmarked);
        assert_eq!(Owner::of(Some("[ProxOps]")), Owner::Unmarked);
        assert_eq!(Owner::of(None), Owner::Unmarked);
    }

    #[test]
    fn marked_comments_read_back_as_written() {
        for (text, noprune) in [
            (Some("web tier"), false),
            (None, true),
            (Some("a\nb"), false),
        ] {
            let wire = marked(text, noprune);
            assert_eq!(Owner::of(Some(&wire)), Owner::Marked { noprune });
            assert_eq!(text_of(Some(&wire)).as_deref(), text);
        }
    }
}
