//! Typed values read straight from the block reader's [`Node`] tree, with
//! the very answers `serde_yaml::Value` (`crate::yaml::from_value`) gives.
//!
//! Building a `serde_yaml::Value` per manifest (a hashed, ordered map per
//! mapping, a `String` per scalar) and then reading the typed manifest
//! from it was most of composing a 10,000-guest repository. The tree the
//! block reader builds borrows its text; this module is a
//! `serde::Deserializer` over it, method for method the one serde_norway
//! implements for `&Value` (`value/de.rs`): a number reaches only number
//! fields (never a `String`), null reads as an empty list or mapping and
//! as `None`, an enum only from its variant's name, a key only as text.
//!
//! **Must never:** succeed where `from_value` fails, or give another value
//! where both succeed (the differential tests hold it to that). Its error
//! says nothing: on any failure the caller reads the document the old way,
//! which gives every error its message and position.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};

use crate::yaml_block::Node;

/// Reads `T` from a block-read document, or `None` where `from_value` on
/// the same document's `Value` would fail too (or might: the caller then
/// asks it).
pub fn from_node<T: DeserializeOwned>(node: &Node<'_>) -> Option<T> {
    T::deserialize(node).ok()
}

/// A refusal: the caller reads the document the old way, which says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not read from the block tree")
    }
}

impl std::error::Error for Refused {}

impl de::Error for Refused {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Refused
    }
}

type Result<T> = std::result::Result<T, Refused>;

fn items<'de, 'a, V: Visitor<'de>>(items: &'de [Node<'a>], visitor: V) -> Result<V::Value> {
    let mut access = Items { iter: items.iter() };
    let value = visitor.visit_seq(&mut access)?;
    // As serde_norway: a visitor that stops early is an error.
    if access.iter.len() == 0 {
        Ok(value)
    } else {
        Err(Refused)
    }
}

fn entries<'de, 'a, V: Visitor<'de>>(
    entries: &'de [(Node<'a>, Node<'a>)],
    visitor: V,
) -> Result<V::Value> {
    let mut access = Entries {
        iter: entries.iter(),
        value: None,
    };
    let value = visitor.visit_map(&mut access)?;
    if access.iter.len() == 0 {
        Ok(value)
    } else {
        Err(Refused)
    }
}

impl<'de, 'a> de::Deserializer<'de> for &'de Node<'a> {
    type Error = Refused;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Null => visitor.visit_unit(),
            Node::Bool(b) => visitor.visit_bool(*b),
            Node::Int(n) => visitor.visit_u64(*n),
            Node::Str(s) => visitor.visit_borrowed_str(s),
            Node::Seq(v) => items(v, visitor),
            Node::Map(m) => entries(m, visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Bool(b) => visitor.visit_bool(*b),
            _ => Err(Refused),
        }
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_i128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_u128<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.number(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Str(s) => visitor.visit_borrowed_str(s),
            _ => Err(Refused),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Str(s) => visitor.visit_borrowed_str(s),
            Node::Seq(v) => items(v, visitor),
            _ => Err(Refused),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Null => visitor.visit_unit(),
            _ => Err(Refused),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Seq(v) => items(v, visitor),
            Node::Null => items(&[], visitor),
            _ => Err(Refused),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Map(m) => entries(m, visitor),
            Node::Null => entries(&[], visitor),
            _ => Err(Refused),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        self.deserialize_map(visitor)
    }

    /// Only a variant's name, as serde_norway reads an untagged value: a
    /// mapping would be an enum only behind a YAML tag, which the block
    /// reader never reads.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value> {
        match self {
            Node::Str(tag) => visitor.visit_enum(Variant { tag }),
            _ => Err(Refused),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        visitor.visit_unit()
    }
}

impl<'de> Node<'_> {
    /// A number field takes only a number (a quoted `"5"` is text).
    fn number<V: Visitor<'de>>(&'de self, visitor: V) -> Result<V::Value> {
        match self {
            Node::Int(n) => visitor.visit_u64(*n),
            _ => Err(Refused),
        }
    }
}

struct Items<'de, 'a> {
    iter: std::slice::Iter<'de, Node<'a>>,
}

impl<'de, 'a> SeqAccess<'de> for Items<'de, 'a> {
    type Error = Refused;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        match self.iter.next() {
            Some(node) => seed.deserialize(node).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

struct Entries<'de, 'a> {
    iter: std::slice::Iter<'de, (Node<'a>, Node<'a>)>,
    value: Option<&'de Node<'a>>,
}

impl<'de, 'a> MapAccess<'de> for Entries<'de, 'a> {
    type Error = Refused;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        match self.iter.next() {
            Some((key, value)) => {
                self.value = Some(value);
                seed.deserialize(key).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        // serde asks for a value only after its key; refused, not a panic,
        // if it ever did otherwise.
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(Refused),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len())
    }
}

/// A unit variant named by text: serde_norway's `EnumRefDeserializer`
/// without a tagged value.
struct Variant<'de> {
    tag: &'de str,
}

impl<'de> EnumAccess<'de> for Variant<'de> {
    type Error = Refused;
    type Variant = UnitOnly;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, UnitOnly)> {
        let name = BorrowedStrDeserializer::<Refused>::new(self.tag);
        Ok((seed.deserialize(name)?, UnitOnly))
    }
}

struct UnitOnly;

impl<'de> VariantAccess<'de> for UnitOnly {
    type Error = Refused;

    fn unit_variant(self) -> Result<()> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value> {
        Err(Refused)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value> {
        Err(Refused)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value> {
        Err(Refused)
    }
}
