//! Input bounds: how large a repository file may be and how deeply its YAML
//! may nest, checked on the bytes before any YAML parser sees them.
//!
//! The YAML parsers' time grows with the square of the nesting depth: a
//! 320 KB file of nested `[[[…]]]` took a minute to parse, long enough to
//! stall the daemon past its health window. The nesting scan here is one
//! linear pass that counts flow brackets outside quoted scalars and
//! comments, and block indentation levels; a file deeper than
//! [`MAX_NESTING`] is refused before it is parsed. The scan errs towards
//! counting less on text it cannot classify, never more: a real manifest
//! nests 5–8 levels, far below the limit.
//!
//! Aliases are counted the same way before a parser builds values: an
//! alias stands for a copy of what its anchor names, so 250,000 aliases in
//! a 1 MB file made a document of hundreds of thousands of nodes (and
//! nested anchors make it grow exponentially). A file whose aliases add
//! more than [`MAX_ALIAS_NODES`] nodes is refused; counting is one pass
//! over the parser's events, and runs only once the nesting is known to be
//! bounded.
//!
//! Lines are broken where a YAML parser breaks them: line feed, carriage
//! return (alone or before a line feed), and the Unicode line breaks NEL,
//! LS and PS (YAML 1.1, as libyaml reads it). Nesting written across
//! carriage returns is nesting too.
//!
//! This module reads no file: adapters hand it bytes (and, where reading a
//! file costs memory, read at most [`READ_LIMIT`] bytes of it so an
//! oversized file is still seen as oversized here).

use crate::diag::Diagnostic;

/// Largest manifest (`vm/…`, `lxc/…`, …): a manifest is a few KiB; 1 MiB
/// leaves room for a long description or many SSH keys.
pub const MANIFEST_MAX_BYTES: usize = 1024 * 1024;
/// Largest composition (`clusters/<c>/resources.yaml`): one path per
/// manifest, 1 MiB lists well over 10,000 of them.
pub const COMPOSITION_MAX_BYTES: usize = 1024 * 1024;
/// Largest configuration file (`proxops.yaml`, `clusters/<c>/config.yaml`,
/// `--config`): a cluster entry is a dozen lines.
pub const CONFIG_MAX_BYTES: usize = 256 * 1024;
/// The most an adapter needs to read of any repository file: one byte over
/// the largest cap, so a longer file still measures as too large.
pub const READ_LIMIT: usize = MANIFEST_MAX_BYTES + 1;

/// Deepest nesting of collections (block indentation levels plus open flow
/// brackets) a file may have. A manifest's deepest field
/// (`spec.cloud-init-data.ipconfigs[0].ip`) sits at 5.
pub const MAX_NESTING: usize = 32;

/// The most nodes a file's aliases may add when expanded. A manifest that
/// uses anchors at all repeats a few small blocks; this is far above that
/// and far below what makes parsing slow.
pub const MAX_ALIAS_NODES: usize = 10_000;

/// What a file is to ProxOps, which decides its size cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    Manifest,
    Composition,
    Config,
}

impl FileRole {
    /// The size cap for this kind of file, in bytes.
    pub fn max_bytes(self) -> usize {
        match self {
            FileRole::Manifest => MANIFEST_MAX_BYTES,
            FileRole::Composition => COMPOSITION_MAX_BYTES,
            FileRole::Config => CONFIG_MAX_BYTES,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            FileRole::Manifest => "a manifest",
            FileRole::Composition => "a composition (resources.yaml)",
            FileRole::Config => "a configuration file",
        }
    }
}

/// Why a file was refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutOfBounds {
    /// Longer than its role's cap (`len` may be the length read, which
    /// adapters stop at [`READ_LIMIT`]).
    TooLarge { role: FileRole, len: usize },
    /// Nested deeper than [`MAX_NESTING`] at this 1-based line and column.
    TooDeep { line: usize, column: usize },
    /// Aliases that, expanded, add more than [`MAX_ALIAS_NODES`] nodes;
    /// the alias (1-based line, column) that crossed the limit.
    TooManyAliases { line: usize, column: usize },
}

impl OutOfBounds {
    /// The operator's message: what was exceeded and the cap or depth.
    pub fn message(&self) -> String {
        match self {
            OutOfBounds::TooLarge { role, .. } => {
                let cap = role.max_bytes();
                format!(
                    "the file is larger than the {} size cap for {} ({cap} bytes): split it, or move what is not desired state out of the repository",
                    human_size(cap),
                    role.noun()
                )
            }
            OutOfBounds::TooDeep { .. } => format!(
                "the YAML nests deeper than {MAX_NESTING} levels (nested lists, mappings or flow brackets): no ProxOps file needs more; the file is refused before parsing"
            ),
            OutOfBounds::TooManyAliases { .. } => format!(
                "the YAML's aliases (*name) expand to more than {MAX_ALIAS_NODES} nodes: no ProxOps file needs that many copies; the file is refused before parsing"
            ),
        }
    }

    /// A diagnostic naming `file` (and, for depth, where the limit was crossed).
    pub fn diagnostic(&self, file: &str) -> Diagnostic {
        let d = Diagnostic::file(file, self.message());
        match self {
            OutOfBounds::TooLarge { .. } => d,
            OutOfBounds::TooDeep { line, column }
            | OutOfBounds::TooManyAliases { line, column } => d.at(Some((*line, *column))),
        }
    }
}

/// Checks a file's size against its role's cap, then its nesting depth.
pub fn check(role: FileRole, bytes: &[u8]) -> Result<(), OutOfBounds> {
    if bytes.len() > role.max_bytes() {
        return Err(OutOfBounds::TooLarge {
            role,
            len: bytes.len(),
        });
    }
    // The scan runs only where the cheap bound says it might find too
    // much (nearly never): its answer is the same either way.
    if nesting_bound(bytes) > MAX_NESTING
        && let Some((line, column)) = deepest_point(bytes, MAX_NESTING)
    {
        return Err(OutOfBounds::TooDeep { line, column });
    }
    // Without a `*` there is no alias; text that is not UTF-8 is refused
    // by the reader, unparsed.
    if bytes.contains(&b'*')
        && let Ok(text) = std::str::from_utf8(bytes)
        && let Some((line, column)) = alias_overflow(text, MAX_ALIAS_NODES)
    {
        return Err(OutOfBounds::TooManyAliases { line, column });
    }
    Ok(())
}

/// Where (1-based line, column) the nodes `text`'s aliases add when
/// expanded first exceed `limit`, or `None`. One pass over the parser's
/// events: each anchored node's expanded size is kept (saturating, so
/// anchors of anchors cannot overflow it), and each alias adds its
/// anchor's. Text the parser refuses is left to the reader to report.
pub fn alias_overflow(text: &str, limit: usize) -> Option<(usize, usize)> {
    use yaml_rust2::parser::{Event, Parser};
    let mut sizes: Vec<usize> = Vec::new();
    // Per open collection: its anchor and the nodes it holds so far.
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut added = 0usize;
    let mut parser = Parser::new_from_str(text);
    let count = |open: &mut Vec<(usize, usize)>, n: usize| {
        if let Some(top) = open.last_mut() {
            top.1 = top.1.saturating_add(n);
        }
    };
    let anchor = |sizes: &mut Vec<usize>, id: usize, n: usize| {
        if id > 0 {
            if sizes.len() <= id {
                sizes.resize(id + 1, 0);
            }
            sizes[id] = n;
        }
    };
    while let Ok((event, mark)) = parser.next_token() {
        match event {
            Event::StreamEnd => break,
            Event::Scalar(_, _, id, _) => {
                anchor(&mut sizes, id, 1);
                count(&mut open, 1);
            }
            Event::SequenceStart(id, _) | Event::MappingStart(id, _) => open.push((id, 1)),
            Event::SequenceEnd | Event::MappingEnd => {
                if let Some((id, n)) = open.pop() {
                    anchor(&mut sizes, id, n);
                    count(&mut open, n);
                }
            }
            Event::Alias(id) => {
                let n = sizes.get(id).copied().unwrap_or(1).max(1);
                added = added.saturating_add(n);
                count(&mut open, n);
                if added > limit {
                    return Some((mark.line(), mark.col() + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// A bound on any nesting [`deepest_point`] can find, from one cheap pass:
/// its stack of block levels holds increasing columns, each a line's
/// indentation or a compact entry's (`- - x`), so no more than the distinct
/// such columns in the file; its flow depth is no more than the file's
/// `[` and `{`. Nearly every file is far below the limit this way, and its
/// character-by-character scan (a seventh of loading 10,000 manifests) is
/// skipped. `usize::MAX` when a column is beyond what is counted here.
fn nesting_bound(bytes: &[u8]) -> usize {
    let brackets = bytes.iter().filter(|b| matches!(b, b'[' | b'{')).count();
    let mut columns: u128 = 0;
    for line in yaml_lines(bytes) {
        let mut i = line.iter().take_while(|b| **b == b' ').count();
        let mut mark = |col: usize| -> bool {
            if col >= 128 {
                return false;
            }
            columns |= 1 << col;
            true
        };
        if !mark(i) {
            return usize::MAX;
        }
        while i + 1 < line.len()
            && matches!(line[i], b'-' | b'?' | b':')
            && matches!(line[i + 1], b' ' | b'\t')
        {
            i += 2;
            while i < line.len() && line[i] == b' ' {
                i += 1;
            }
            if !mark(i) {
                return usize::MAX;
            }
        }
    }
    columns.count_ones() as usize + brackets
}

/// `check` as a diagnostic naming `file` (boxed: a diagnostic is large and
/// this `Err` is rare).
pub fn check_file(file: &str, role: FileRole, bytes: &[u8]) -> Result<(), Box<Diagnostic>> {
    check(role, bytes).map_err(|e| Box::new(e.diagnostic(file)))
}

fn human_size(bytes: usize) -> String {
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

/// The first position (1-based line, column) where nesting exceeds `limit`,
/// or `None`. One pass over the bytes, no allocation beyond the indentation
/// stack (bounded by `limit`).
fn deepest_point(bytes: &[u8], limit: usize) -> Option<(usize, usize)> {
    let mut scan = Scan {
        flow: 0,
        quote: None,
        indents: Vec::new(),
        block_scalar: None,
    };
    for (i, line) in yaml_lines(bytes).enumerate() {
        if let Some(col) = scan.line(line, limit) {
            return Some((i + 1, col + 1));
        }
    }
    None
}

/// The lines of `bytes` as a YAML parser breaks them: at LF, CR LF, CR,
/// and the UTF-8 of NEL (U+0085), LS (U+2028) and PS (U+2029). One pass.
fn yaml_lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(bytes);
    std::iter::from_fn(move || {
        let text = rest?;
        let mut i = 0;
        while i < text.len() {
            let brk = match text[i] {
                b'\n' => 1,
                b'\r' if text.get(i + 1) == Some(&b'\n') => 2,
                b'\r' => 1,
                0xC2 if text.get(i + 1) == Some(&0x85) => 2,
                0xE2 if text.get(i + 1) == Some(&0x80)
                    && matches!(text.get(i + 2), Some(0xA8 | 0xA9)) =>
                {
                    3
                }
                _ => 0,
            };
            if brk > 0 {
                rest = Some(&text[i + brk..]);
                return Some(&text[..i]);
            }
            i += 1;
        }
        rest = None;
        Some(text)
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    Single,
    Double,
}

struct Scan {
    /// Open flow brackets (`[`, `{`).
    flow: usize,
    /// Inside a quoted scalar that continues past the end of a line.
    quote: Option<Quote>,
    /// Indentation columns of the open block collections, increasing.
    indents: Vec<usize>,
    /// Inside a block scalar (`|`, `>`) introduced at this indentation: its
    /// lines are text, not structure.
    block_scalar: Option<usize>,
}

impl Scan {
    /// Scans one line; the 0-based column where the limit is crossed.
    fn line(&mut self, line: &[u8], limit: usize) -> Option<usize> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let indent = line.iter().take_while(|b| **b == b' ').count();
        let blank = line[indent..].is_empty() || line[indent..].starts_with(b"#");
        if let Some(owner) = self.block_scalar {
            if blank || indent > owner {
                return None;
            }
            self.block_scalar = None;
        }
        let mut i = 0;
        if self.quote.is_none() && self.flow == 0 {
            if blank {
                return None;
            }
            let marker = (line.starts_with(b"---") || line.starts_with(b"..."))
                && matches!(line.get(3), None | Some(b' ') | Some(b'\t'));
            if marker {
                self.indents.clear();
            }
            while self.indents.last().is_some_and(|top| *top > indent) {
                self.indents.pop();
            }
            if self.indents.last().is_none_or(|top| *top < indent) {
                self.indents.push(indent);
            }
            // A document may start on its marker's line (`--- [a]`).
            i = if marker { 3 } else { indent };
            // Compact nested block entries (`- - x`, `? - x`, `: - x`) open a level each.
            while i + 1 < line.len()
                && matches!(line[i], b'-' | b'?' | b':')
                && matches!(line[i + 1], b' ' | b'\t')
            {
                i += 2;
                while i < line.len() && line[i] == b' ' {
                    i += 1;
                }
                if i < line.len() && line[i] != b'#' {
                    self.indents.push(i);
                }
            }
            if self.indents.len() > limit {
                return Some(i.min(line.len()));
            }
        }
        let owner = self.indents.last().copied().unwrap_or(0);
        self.scan_tokens(line, i, limit, owner)
    }

    /// Walks a line's characters from `start`, tracking quotes, comments
    /// and flow brackets.
    fn scan_tokens(
        &mut self,
        line: &[u8],
        start: usize,
        limit: usize,
        owner: usize,
    ) -> Option<usize> {
        let depth = |s: &Scan| s.indents.len() + s.flow;
        // Whether the next character starts a scalar (where a quote or, in
        // block context, a bracket opens something rather than being text).
        let mut at_start = self.quote.is_none();
        let mut i = start;
        while i < line.len() {
            let b = line[i];
            match self.quote {
                Some(Quote::Single) => {
                    if b == b'\'' {
                        if line.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            self.quote = None;
                            at_start = false;
                        }
                    }
                }
                Some(Quote::Double) => {
                    if b == b'\\' {
                        i += 1;
                    } else if b == b'"' {
                        self.quote = None;
                        at_start = false;
                    }
                }
                None => match b {
                    b' ' | b'\t' => {}
                    b'#' if i == 0 || matches!(line[i - 1], b' ' | b'\t') => return None,
                    b'\'' | b'"' if at_start => {
                        self.quote = Some(if b == b'\'' {
                            Quote::Single
                        } else {
                            Quote::Double
                        });
                    }
                    b'[' | b'{' if at_start || self.flow > 0 => {
                        self.flow += 1;
                        if depth(self) > limit {
                            return Some(i);
                        }
                        at_start = true;
                        i += 1;
                        continue;
                    }
                    b']' | b'}' if self.flow > 0 => {
                        self.flow -= 1;
                        at_start = false;
                    }
                    b',' if self.flow > 0 => at_start = true,
                    b':' if self.flow > 0
                        || matches!(line.get(i + 1), None | Some(b' ') | Some(b'\t')) =>
                    {
                        at_start = true;
                    }
                    // A tag or an anchor comes before the value it names:
                    // what follows it still starts that value.
                    b'!' | b'&' if at_start => {
                        while i < line.len() && !matches!(line[i], b' ' | b'\t') {
                            i += 1;
                        }
                        continue;
                    }
                    b'|' | b'>' if at_start && self.flow == 0 => {
                        // A block scalar header: the lines below, indented
                        // deeper than the entry that owns it, are text.
                        let rest = &line[i + 1..];
                        let header_ok = rest
                            .iter()
                            .take_while(|c| **c != b'#')
                            .all(|c| matches!(c, b'+' | b'-' | b'0'..=b'9' | b' ' | b'\t'));
                        if header_ok {
                            self.block_scalar = Some(owner);
                            return None;
                        }
                        at_start = false;
                    }
                    _ => at_start = false,
                },
            }
            i += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str) -> bool {
        deepest_point(text.as_bytes(), MAX_NESTING).is_none()
    }

    /// Wherever the cheap bound lets a file through, the scan would too.
    #[test]
    fn the_nesting_bound_is_never_below_what_the_scan_finds() {
        use proptest::prelude::*;
        let piece = prop::sample::select(vec![
            "a: ", "- ", "- - ", "? ", ": ", "[", "]", "{", "}", "'", "\"", "#", "|", ">", "x",
            " ", "  ", "\n", "\t", ",", "--- ", "&a ", "!t ", "\r", "\r\n", "\u{85}", "\u{2028}",
            "\u{2029}",
        ]);
        proptest!(|(pieces in prop::collection::vec(piece, 0..200), limit in 1usize..12)| {
            let text: String = pieces.concat();
            let bound = nesting_bound(text.as_bytes());
            if bound <= limit {
                prop_assert!(deepest_point(text.as_bytes(), limit).is_none(), "{:?}", text);
            }
        });
        assert_eq!(nesting_bound(b"a:\n  b:\n    - [c, {d: e}]\n"), 6);
    }

    #[test]
    fn a_real_manifest_passes() {
        let text = "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: web\n  annotations:\n    proxops/depends-on: \"ISO:a\"\nspec:\n  node: pve1\n  vmid: 100\n  memory: 4GiB\n  cpu: {type: host, cores: 2, flags: [\"+aes\"]}\n  disks:\n    - storage: local-lvm\n      size: 32GiB\n  cloud-init-data:\n    ssh-keys:\n      - ssh-ed25519 AAAA ops@laptop # [not a bracket\n    ipconfigs:\n      - nic: 0\n        ip: 10.0.0.5/24\n  pve-description: |\n    text with [[[[ brackets {{{{ and 'quotes\n      and \"more\n  tags: [web, 'it''s', \"a]b\"]\n";
        assert!(depth_ok(text));
        assert!(check(FileRole::Manifest, text.as_bytes()).is_ok());
    }

    #[test]
    fn brackets_and_quotes_inside_plain_scalars_are_text() {
        let line = "a: it's [one\nb: x{y\nc: [ok]\n";
        let text: String = std::iter::repeat_n(line, 200).collect();
        assert!(depth_ok(&text));
    }

    #[test]
    fn deep_flow_nesting_is_refused_at_the_bracket_that_crosses_the_limit() {
        let text = format!("a: {}1{}\n", "[".repeat(40), "]".repeat(40));
        // Root mapping (1) + 31 brackets = 32; the 32nd bracket crosses.
        assert_eq!(deepest_point(text.as_bytes(), MAX_NESTING), Some((1, 35)));
        let ok = format!("a: {}1{}\n", "[".repeat(31), "]".repeat(31));
        assert!(depth_ok(&ok));
    }

    #[test]
    fn flow_nesting_across_lines_counts() {
        let text = format!("a:\n{}\n", "  [\n".repeat(40));
        assert!(!depth_ok(&text));
    }

    #[test]
    fn deep_block_nesting_is_refused() {
        let mut text = String::new();
        for d in 0..40 {
            text.push_str(&" ".repeat(d));
            text.push_str(&format!("k{d}:\n"));
        }
        let at = deepest_point(text.as_bytes(), MAX_NESTING);
        assert_eq!(at.map(|(l, _)| l), Some(33));
        let compact = format!("a:\n  {}x\n", "- ".repeat(40));
        assert!(!depth_ok(&compact));
    }

    #[test]
    fn quoted_scalars_hide_brackets_even_across_lines() {
        let text = format!(
            "a: \"{}\n  {}\"\nb: '{}'\n",
            "[".repeat(50),
            "{".repeat(50),
            "[".repeat(50)
        );
        assert!(depth_ok(&text));
    }

    #[test]
    fn a_fake_quote_inside_a_plain_scalar_does_not_hide_nesting() {
        let text = format!("a: x'\nb: {}\n", "[".repeat(40));
        assert!(!depth_ok(&text));
    }

    #[test]
    fn tags_anchors_and_document_markers_do_not_hide_nesting() {
        let deep = "[".repeat(40);
        for text in [
            format!("a: &x {deep}\n"),
            format!("a: !!seq {deep}\n"),
            format!("--- {deep}\n"),
            format!("? {deep}\n"),
            format!("- - {deep}\n"),
        ] {
            assert!(!depth_ok(&text), "{text}");
        }
    }

    #[test]
    fn documents_start_from_the_root_again() {
        let doc = "a:\n  b:\n    c:\n      d: 1\n";
        let text = std::iter::repeat_n(doc, 50)
            .collect::<Vec<_>>()
            .join("---\n");
        assert!(depth_ok(&text));
    }

    #[test]
    fn every_yaml_line_break_breaks_a_line_for_the_nesting_scan() {
        for brk in ["\n", "\r\n", "\r", "\u{85}", "\u{2028}", "\u{2029}"] {
            let mut text = String::new();
            for d in 0..40 {
                text.push_str(&" ".repeat(d));
                text.push_str(&format!("k{d}:{brk}"));
            }
            assert_eq!(
                deepest_point(text.as_bytes(), MAX_NESTING).map(|(l, _)| l),
                Some(33),
                "{brk:?}"
            );
        }
        let lines: Vec<&[u8]> = yaml_lines(b"a\r\nb\rc\nd").collect();
        assert_eq!(lines, [&b"a"[..], b"b", b"c", b"d"]);
    }

    #[test]
    fn aliases_are_counted_as_the_nodes_they_stand_for() {
        let few = "a: &x [1, 2, 3]\nb: *x\nc: *x\n";
        // Each alias stands for the sequence and its three items.
        assert_eq!(alias_overflow(few, 8), None);
        assert_eq!(alias_overflow(few, 7), Some((3, 4)));
        // Anchors of anchors multiply: the sizes saturate, the count stops
        // at the limit.
        let mut laughs = String::from("a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n");
        let mut prev = 'a';
        for c in 'b'..='j' {
            laughs.push_str(&format!(
                "{c}: &{c} [{}]\n",
                vec![format!("*{prev}"); 10].join(", ")
            ));
            prev = c;
        }
        assert!(alias_overflow(&laughs, MAX_ALIAS_NODES).is_some());
        assert!(check(FileRole::Manifest, laughs.as_bytes()).is_err());
        assert!(check(FileRole::Manifest, few.as_bytes()).is_ok());
    }

    #[test]
    fn the_size_cap_is_named() {
        let big = vec![b'#'; CONFIG_MAX_BYTES + 1];
        let e = check(FileRole::Config, &big).err();
        let message = e.as_ref().map(OutOfBounds::message).unwrap_or_default();
        assert!(message.contains("256 KiB"), "{message}");
        assert!(message.contains("262144 bytes"), "{message}");
        assert!(check(FileRole::Config, &big[..CONFIG_MAX_BYTES]).is_ok());
    }
}
