//! [`ConfigValues`]: a guest config's keys and values, held compactly.
//!
//! A 10,000-guest snapshot holds 10,000 configs of about 16 keys each,
//! the largest thing it keeps. As a `BTreeMap<String, String>` every entry
//! cost a B-tree slot and two heap strings: about 2.1 KB a guest, more
//! than the JSON text the configs were read from. Here one `String` holds
//! every key and value back to back, in key order, and one `Vec` says
//! where each key lies in it: two allocations a config, each sized once.
//!
//! It answers exactly as the `BTreeMap<String, String>` it replaces did:
//! the same entries in the same order (keys compared byte-wise, as `str`
//! compares), the same serialisation (a map in key order), and of a key
//! given twice the last value. Reads are binary searches; writes move the
//! text after the entry they touch, which suits their callers (tests and
//! the in-memory PVE model).
//!
//! Offsets are `u32`: a config of more than 4 GiB of text is refused
//! ([`ConfigTooLarge`]), never truncated.

use std::fmt;
use std::iter::FusedIterator;

use serde::{Serialize, Serializer};

/// A config whose keys and values come to more than `u32::MAX` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a guest config of more than 4 GiB of keys and values")]
pub struct ConfigTooLarge;

/// A guest config's keys and values, sorted by key, each key once.
///
/// **Invariant:** `text` is each entry's key then its value, the entries
/// in key order and nothing else, and `keys[i]` is where entry `i`'s key
/// lies in it. The form is canonical, so two maps are equal exactly when
/// they hold the same entries (what the derived `PartialEq` compares).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConfigValues {
    text: String,
    /// Per entry, in key order. Entry `i`'s value runs from its key's end
    /// to where entry `i + 1` starts (the last one's to the end of `text`).
    keys: Vec<KeySpan>,
}

/// Where one key lies in [`ConfigValues::text`]: `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeySpan {
    start: u32,
    end: u32,
}

impl ConfigValues {
    pub fn new() -> ConfigValues {
        ConfigValues::default()
    }

    /// From entries in any order; of a key given twice the last value
    /// stays, as repeated inserts would keep it. The text is allocated
    /// once, at its final size.
    pub fn from_entries<K, V>(mut entries: Vec<(K, V)>) -> Result<ConfigValues, ConfigTooLarge>
    where
        K: AsRef<str>,
        V: AsRef<str>,
    {
        // A stable sort: the values of one key keep their given order, so
        // the last given is the last of its run.
        entries.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let last_of_each_key = |i: usize, key: &str| {
            entries
                .get(i + 1)
                .is_none_or(|(next, _)| next.as_ref() != key)
        };
        let mut total = 0usize;
        let mut count = 0usize;
        for (i, (k, v)) in entries.iter().enumerate() {
            if last_of_each_key(i, k.as_ref()) {
                total = total
                    .saturating_add(k.as_ref().len())
                    .saturating_add(v.as_ref().len());
                count += 1;
            }
        }
        offset(total)?;
        let mut out = ConfigValues {
            text: String::with_capacity(total),
            keys: Vec::with_capacity(count),
        };
        for (i, (k, v)) in entries.iter().enumerate() {
            if last_of_each_key(i, k.as_ref()) {
                out.push_last(k.as_ref(), v.as_ref())?;
            }
        }
        Ok(out)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        let i = self.search(key).ok()?;
        Some(self.value_at(i))
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.search(key).is_ok()
    }

    /// Every entry, in key order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            map: self,
            front: 0,
            back: self.len(),
        }
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.iter().map(|(_, v)| v)
    }

    /// The entries whose key starts with `prefix`, in key order. They sit
    /// together in the order (a key from `prefix` on that does not start
    /// with it sorts after every key that does): two binary searches find
    /// them, no other key is read.
    pub fn prefixed(&self, prefix: &str) -> Iter<'_> {
        let prefix = prefix.as_bytes();
        let front = self.keys.partition_point(|s| self.key_bytes(*s) < prefix);
        let run = self.keys.get(front..).map_or(0, |rest| {
            rest.partition_point(|s| self.key_bytes(*s).starts_with(prefix))
        });
        Iter {
            map: self,
            front,
            back: front + run,
        }
    }

    /// Sets `key` to `value`; the value it had, if any.
    pub fn insert(&mut self, key: String, value: String) -> Result<Option<String>, ConfigTooLarge> {
        match self.search(&key) {
            Ok(i) => {
                let (start, end) = self.value_range(i);
                let old_len = end - start;
                offset(self.text.len() - old_len + value.len())?;
                let old = self.value_at(i).to_owned();
                self.text.replace_range(start..end, &value);
                self.shift(i + 1, old_len, value.len());
                Ok(Some(old))
            }
            Err(i) => {
                let added = key.len() + value.len();
                offset(self.text.len().saturating_add(added))?;
                let start = self.start_of(i);
                let span = KeySpan {
                    start: offset(start)?,
                    end: offset(start + key.len())?,
                };
                self.text.insert_str(start, &value);
                self.text.insert_str(start, &key);
                self.shift(i, 0, added);
                self.keys.insert(i, span);
                Ok(None)
            }
        }
    }

    /// Removes `key`; the value it had, if any.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.search(key).ok()?;
        let start = self.start_of(i);
        let (_, end) = self.value_range(i);
        let old = self.value_at(i).to_owned();
        self.text.replace_range(start..end, "");
        self.keys.remove(i);
        self.shift(i, end - start, 0);
        Some(old)
    }

    /// Inserts each entry in turn: of a key given twice the last value
    /// stays.
    pub fn extend<I>(&mut self, entries: I) -> Result<(), ConfigTooLarge>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        for (k, v) in entries {
            self.insert(k, v)?;
        }
        Ok(())
    }

    /// Appends an entry whose key sorts after every key held.
    fn push_last(&mut self, key: &str, value: &str) -> Result<(), ConfigTooLarge> {
        let start = offset(self.text.len())?;
        self.text.push_str(key);
        let end = offset(self.text.len())?;
        self.text.push_str(value);
        offset(self.text.len())?;
        self.keys.push(KeySpan { start, end });
        Ok(())
    }

    /// Entry `key`'s index, or where it would go.
    fn search(&self, key: &str) -> Result<usize, usize> {
        let key = key.as_bytes();
        self.keys.binary_search_by(|s| self.key_bytes(*s).cmp(key))
    }

    /// A key as bytes, for comparing: `str` orders by its bytes, and bytes
    /// need no check that the span lies on char boundaries.
    fn key_bytes(&self, s: KeySpan) -> &[u8] {
        self.text
            .as_bytes()
            .get(s.start as usize..s.end as usize)
            .unwrap_or_default()
    }

    fn span(&self, s: KeySpan) -> &str {
        // Spans lie on char boundaries inside `text` (the invariant): the
        // fallback is never taken.
        self.text
            .get(s.start as usize..s.end as usize)
            .unwrap_or("")
    }

    fn start_of(&self, i: usize) -> usize {
        self.keys
            .get(i)
            .map_or(self.text.len(), |s| s.start as usize)
    }

    fn value_range(&self, i: usize) -> (usize, usize) {
        let start = self.keys.get(i).map_or(self.text.len(), |s| s.end as usize);
        (start, self.start_of(i + 1))
    }

    fn entry(&self, i: usize) -> (&str, &str) {
        let key = self.keys.get(i).map_or("", |s| self.span(*s));
        (key, self.value_at(i))
    }

    fn value_at(&self, i: usize) -> &str {
        let (start, end) = self.value_range(i);
        self.text.get(start..end).unwrap_or("")
    }

    /// Moves the keys from entry `from` on by `added - removed` bytes,
    /// after the text before them lost `removed` bytes and gained `added`.
    fn shift(&mut self, from: usize, removed: usize, added: usize) {
        // Both amounts are parts of a text that fits in `u32` (checked
        // by the caller before it changed the text), and every moved key
        // lay after the removed bytes: no step leaves `0..=u32::MAX`.
        let (removed, added) = (removed as u32, added as u32);
        for s in self.keys.iter_mut().skip(from) {
            s.start = s.start - removed + added;
            s.end = s.end - removed + added;
        }
    }
}

/// An offset into the text, refused past `u32::MAX`.
fn offset(n: usize) -> Result<u32, ConfigTooLarge> {
    u32::try_from(n).map_err(|_| ConfigTooLarge)
}

/// The entries of a [`ConfigValues`] (or of one run of it), in key order.
#[derive(Clone)]
pub struct Iter<'a> {
    map: &'a ConfigValues,
    front: usize,
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);

    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.map.entry(self.front - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.map.entry(self.back)
        })
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl FusedIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a ConfigValues {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// As a map, the way `BTreeMap`'s `Debug` shows one.
impl fmt::Debug for ConfigValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// As a map in key order, exactly as the `BTreeMap<String, String>` did.
impl Serialize for ConfigValues {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;
    use std::ops::Bound;

    use proptest::prelude::*;

    use super::*;

    /// Keys that are prefixes of each other (`net`, `net1`, `net10`),
    /// sort next to a prefix's run (`ne`, `neu`, `net-`), are empty, or
    /// are not ASCII (`é` sorts after every ASCII key, `\u{10ffff}` last).
    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "",
                "n",
                "ne",
                "neu",
                "net",
                "net-",
                "net0",
                "net1",
                "net10",
                "net2",
                "netx",
                "mp",
                "mp0",
                "é",
                "éa",
                "e\u{301}",
                "z",
                "\u{10ffff}",
                "a\u{0}",
                "A",
                "scsi0",
            ])
            .prop_map(str::to_owned),
            "[a-cn-t\u{e9}\u{10ffff}0-2]{0,4}",
        ]
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec!["", "0", "x", "é", "virtio,bridge=vmbr0"])
                .prop_map(str::to_owned),
            "\\PC{0,6}",
        ]
    }

    fn entries() -> impl Strategy<Value = Vec<(String, String)>> {
        prop::collection::vec((key(), value()), 0..24)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(String, String),
        Remove(String),
        Extend(Vec<(String, String)>),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (key(), value()).prop_map(|(k, v)| Op::Insert(k, v)),
            2 => key().prop_map(Op::Remove),
            1 => prop::collection::vec((key(), value()), 0..4).prop_map(Op::Extend),
        ]
    }

    /// `m` answers every question as `want` does.
    fn check_same(m: &ConfigValues, want: &BTreeMap<String, String>, probes: &[String]) {
        let got: Vec<(&str, &str)> = m.iter().collect();
        let expected: Vec<(&str, &str)> =
            want.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, expected);
        let backwards: Vec<(&str, &str)> = m.iter().rev().collect();
        assert_eq!(
            backwards,
            expected.iter().rev().copied().collect::<Vec<_>>()
        );
        assert_eq!(m.iter().len(), want.len());
        assert_eq!((m.len(), m.is_empty()), (want.len(), want.is_empty()));
        assert!(m.keys().eq(want.keys().map(String::as_str)));
        assert!(m.values().eq(want.values().map(String::as_str)));
        let mut looped = Vec::new();
        for (k, v) in m {
            looped.push((k, v));
        }
        assert_eq!(looped, expected);
        for p in probes.iter().chain(want.keys()) {
            assert_eq!(m.get(p), want.get(p).map(String::as_str), "get {p:?}");
            assert_eq!(m.contains_key(p), want.contains_key(p));
            let run: Vec<(&str, &str)> = want
                .range::<str, _>((Bound::Included(p.as_str()), Bound::Unbounded))
                .take_while(|(k, _)| k.starts_with(p.as_str()))
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            assert_eq!(m.prefixed(p).collect::<Vec<_>>(), run, "prefix {p:?}");
            assert_eq!(m.prefixed(p).len(), run.len());
        }
        assert_eq!(
            serde_json::to_string(m).unwrap(),
            serde_json::to_string(want).unwrap()
        );
        assert_eq!(
            serde_yaml::to_string(m).unwrap(),
            serde_yaml::to_string(want).unwrap()
        );
        assert_eq!(format!("{m:?}"), format!("{want:?}"));
        assert_eq!(format!("{m:#?}"), format!("{want:#?}"));
        // Canonical: rebuilt from its entries it is the same value.
        let rebuilt = ConfigValues::from_entries(want.clone().into_iter().collect()).unwrap();
        assert_eq!(m, &rebuilt);
    }

    fn probes() -> Vec<String> {
        [
            "",
            "n",
            "ne",
            "net",
            "net1",
            "net10",
            "nf",
            "é",
            "z",
            "\u{10ffff}",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn built_from_entries_it_is_the_btree_map_they_build(es in entries()) {
            let m = ConfigValues::from_entries(es.clone()).unwrap();
            let want: BTreeMap<String, String> = es.into_iter().collect();
            check_same(&m, &want, &probes());
        }

        #[test]
        fn edits_leave_it_as_they_leave_a_btree_map(
            es in entries(),
            ops in prop::collection::vec(op(), 0..16),
        ) {
            let mut m = ConfigValues::from_entries(es.clone()).unwrap();
            let mut want: BTreeMap<String, String> = es.into_iter().collect();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        let had = want.insert(k.clone(), v.clone());
                        prop_assert_eq!(m.insert(k, v).unwrap(), had);
                    }
                    Op::Remove(k) => prop_assert_eq!(m.remove(&k), want.remove(&k)),
                    Op::Extend(more) => {
                        want.extend(more.clone());
                        m.extend(more).unwrap();
                    }
                }
                check_same(&m, &want, &probes());
            }
        }

        #[test]
        fn equal_exactly_when_the_entries_are(a in entries(), b in entries()) {
            let (ma, mb) = (
                ConfigValues::from_entries(a.clone()).unwrap(),
                ConfigValues::from_entries(b.clone()).unwrap(),
            );
            let (wa, wb): (BTreeMap<_, _>, BTreeMap<_, _>) =
                (a.into_iter().collect(), b.into_iter().collect());
            prop_assert_eq!(ma == mb, wa == wb);
        }
    }

    #[test]
    fn a_key_given_twice_keeps_its_last_value() {
        let m =
            ConfigValues::from_entries(vec![("net1", "a"), ("net0", "b"), ("net1", "c")]).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), [("net0", "b"), ("net1", "c")]);
    }

    #[test]
    fn offsets_past_u32_are_refused() {
        assert_eq!(offset(u32::MAX as usize), Ok(u32::MAX));
        assert_eq!(offset(u32::MAX as usize + 1), Err(ConfigTooLarge));
    }
}
