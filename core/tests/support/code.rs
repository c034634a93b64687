//! The production part of a source, for the scans that leave test code
//! alone (`layers.rs`, `no_message_decisions.rs`).

/// A source's production code: comments dropped, and everything from the
/// first top-level `#[cfg(test)]` on.
pub fn production_code(text: &str) -> String {
    let end = text.find("\n#[cfg(test)]").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}
