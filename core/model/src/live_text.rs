//! Guest configs read straight from an answer's JSON text.
//!
//! A 10,000-guest recording's config answers, each parsed into a
//! `serde_json::Value` tree and then read into a [`LiveConfig`], were the
//! longest stretch of a `diff --replay` after planning, and every tree
//! was garbage the moment its config was made. These readers take the
//! answer's body as text and give the [`LiveConfig`] the `Value` readers
//! give, or `None` for anything they do not read the same way: a number
//! that is not an integer, a list or object as a value, a member named
//! twice, no `data`. The caller then reads the answer through
//! [`LiveConfig::from_pending_json`] or [`LiveConfig::from_json`], which
//! accept or refuse it with the errors they always gave.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::live::{LiveConfig, PendingEntry};

impl LiveConfig {
    /// [`LiveConfig::from_pending_json`] of the `data` of a
    /// `GET …/pending` answer's body, given as JSON text.
    pub fn from_pending_body(body: &str) -> Option<LiveConfig> {
        let Envelope(entries) = serde_json::from_str::<Envelope<Vec<Entry>>>(body).ok()?;
        LiveConfig::from_pending_entries(entries.into_iter().map(|e| e.0))
            .ok()
            .flatten()
    }

    /// [`LiveConfig::from_json`] of the `data` of a `GET …/config`
    /// answer's body, given as JSON text.
    pub fn from_config_body(body: &str) -> Option<LiveConfig> {
        let Envelope(Keys(keys)) = serde_json::from_str::<Envelope<Keys>>(body).ok()?;
        // A JSON object keeps a key's last value; read here, a key named
        // twice is left to the `Value` reader.
        let mut names: Vec<&str> = keys.iter().map(|(k, _)| k.as_ref()).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w.first() == w.last()) {
            return None;
        }
        LiveConfig::from_config_entries(keys.into_iter().map(|(k, v)| (k, v.0))).ok()
    }
}

/// A body `{"data": …, …}`: its `data`, the other members skipped; a
/// body without `data`, or with it twice, is refused.
pub struct Envelope<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Envelope<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Members<T> {
            type Value = Envelope<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an answer's body")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<T>, A::Error> {
                let mut data = None;
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    if key == "data" {
                        if data.is_some() {
                            return Err(de::Error::duplicate_field("data"));
                        }
                        data = Some(map.next_value()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                data.map(Envelope)
                    .ok_or_else(|| de::Error::missing_field("data"))
            }
        }
        d.deserialize_map(Members(std::marker::PhantomData))
    }
}

/// A value as [`crate::wire::json_text`] reads a scalar: `null` none, a
/// boolean `1`/`0`, an integer in decimal, a string as it is (borrowed
/// from the body when it has no escapes). Anything else is refused
/// (`json_text` gives it a text of its own).
struct Text<'de>(Option<Cow<'de, str>>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Scalar;
        impl<'de> Visitor<'de> for Scalar {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("null, a boolean, an integer or a string")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Text<'de>, E> {
                Ok(Text(None))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Borrowed(if b { "1" } else { "0" }))))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(n.to_string()))))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(n.to_string()))))
            }
            fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Text<'de>, E> {
                Ok(Text(Some(Cow::Owned(s))))
            }
        }
        d.deserialize_any(Scalar)
    }
}

/// One entry of a `/pending` answer: an object whose `key`, `value`,
/// `pending` and `delete` are read as [`Text`], each at most once; other
/// members are skipped, as the `Value` reader skips them.
struct Entry<'de>(PendingEntry<'de>);

impl<'de> Deserialize<'de> for Entry<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Entry<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a pending entry")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry<'de>, A::Error> {
                let (mut key, mut value, mut pending, mut delete) = (None, None, None, None);
                while let Some(member) = map.next_key::<Cow<'de, str>>()? {
                    let slot: &mut Option<Option<Cow<'de, str>>> = match &*member {
                        "key" => &mut key,
                        "value" => &mut value,
                        "pending" => &mut pending,
                        "delete" => &mut delete,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    if slot.is_some() {
                        return Err(de::Error::custom("a member named twice"));
                    }
                    *slot = Some(map.next_value::<Text>()?.0);
                }
                let [key, value, pending, delete] =
                    [key, value, pending, delete].map(Option::flatten);
                Ok(Entry(PendingEntry {
                    key,
                    value,
                    pending,
                    delete,
                }))
            }
        }
        d.deserialize_map(Members)
    }
}

/// A config object's members in the order they came, each value as
/// [`Text`].
struct Keys<'de>(Vec<(Cow<'de, str>, Text<'de>)>);

impl<'de> Deserialize<'de> for Keys<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Keys<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a config object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys<'de>, A::Error> {
                let mut keys = Vec::with_capacity(map.size_hint().unwrap_or(32));
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    keys.push((key, map.next_value::<Text>()?));
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(Members)
    }
}
