//! Typed documents decoded straight from a tape.
//!
//! [`Decoder`] is a `serde` deserializer that behaves as the contracts' deserializer for a
//! borrowed `Value` ([`crate::contracts::StrictValue`]) does on the `Value` the strict reader
//! builds from the same text: the same visitor calls for every node (integers as `u64` when not
//! negative, else `i64`; objects in the byte order of their keys, as a `BTreeMap` holds them; a
//! struct only from an object; the same length checks after a sequence or map). So a document decodes here to the same value it does
//! there, or fails. Failures carry no message: a caller that has to report one decodes the
//! document the strict way, which names the path.

use super::{Kind, Tape};
use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};
use std::borrow::Cow;
use std::fmt;

/// A document that did not decode; decode it the strict way to learn why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failed;

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the document does not decode")
    }
}

impl std::error::Error for Failed {}

impl de::Error for Failed {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Failed
    }
}

/// Decodes node `at` of `tape` as `T`.
pub(crate) fn decode<'de, T: serde::Deserialize<'de>>(
    tape: &Tape<'de>,
    at: usize,
) -> Result<T, Failed> {
    T::deserialize(Decoder { tape, at })
}

/// A deserializer over one node.
#[derive(Clone, Copy)]
pub(crate) struct Decoder<'t, 'de> {
    tape: &'t Tape<'de>,
    at: usize,
}

impl<'t, 'de> Decoder<'t, 'de> {
    fn kind(&self) -> Result<Kind, Failed> {
        self.tape.node(self.at).map(|n| n.kind).ok_or(Failed)
    }

    fn visit_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        match self.tape.str_at(self.at).ok_or(Failed)? {
            Cow::Borrowed(s) => visitor.visit_borrowed_str(s),
            Cow::Owned(s) => visitor.visit_string(s),
        }
    }

    fn visit_number<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::Int => {
                let n = self.tape.int_at(self.at).ok_or(Failed)?;
                match u64::try_from(n) {
                    Ok(u) => visitor.visit_u64(u),
                    Err(_) => visitor.visit_i64(n),
                }
            }
            Kind::Float => visitor.visit_f64(self.tape.float_at(self.at).ok_or(Failed)?),
            _ => Err(Failed),
        }
    }

    fn visit_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        if self.kind()? != Kind::Array {
            return Err(Failed);
        }
        let mut seq = Seq {
            tape: self.tape,
            items: self.tape.children(self.at),
        };
        let v = visitor.visit_seq(&mut seq)?;
        if seq.items.len() == 0 {
            Ok(v)
        } else {
            Err(Failed)
        }
    }

    fn visit_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        if self.kind()? != Kind::Object {
            return Err(Failed);
        }
        let members = if self.tape.is_sorted(self.at) {
            Members::Document(self.tape.children(self.at))
        } else {
            Members::Sorted(self.tape.members_by_key(self.at).into_iter())
        };
        let mut map = Map {
            tape: self.tape,
            members,
            value: None,
        };
        let v = visitor.visit_map(&mut map)?;
        if map.members.left() == 0 {
            Ok(v)
        } else {
            Err(Failed)
        }
    }
}

impl<'de> Deserializer<'de> for Decoder<'_, 'de> {
    type Error = Failed;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::Null => visitor.visit_unit(),
            Kind::True => visitor.visit_bool(true),
            Kind::False => visitor.visit_bool(false),
            Kind::Int | Kind::Float => self.visit_number(visitor),
            Kind::Str => self.visit_str(visitor),
            Kind::Array => self.visit_seq(visitor),
            Kind::Object => self.visit_map(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::True => visitor.visit_bool(true),
            Kind::False => visitor.visit_bool(false),
            _ => Err(Failed),
        }
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_number(visitor)
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::Str => self.visit_str(visitor),
            _ => Err(Failed),
        }
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::Str => self.visit_str(visitor),
            Kind::Array => self.visit_seq(visitor),
            _ => Err(Failed),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::Null => visitor.visit_unit(),
            _ => Err(Failed),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Failed> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Failed> {
        // `serde_json::value::RawValue` asks for its text this way; the strict path handles it.
        if name.starts_with("$serde_json") {
            return Err(Failed);
        }
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_seq(visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Failed> {
        self.visit_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Failed> {
        self.visit_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.visit_map(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::Object => self.visit_map(visitor),
            _ => Err(Failed),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Failed> {
        match self.kind()? {
            Kind::Str => visitor.visit_enum(Enum {
                tape: self.tape,
                variant: self.at,
                value: None,
            }),
            Kind::Object => {
                let mut members = self.tape.members(self.at);
                match (members.next(), members.next()) {
                    (Some((k, v)), None) => visitor.visit_enum(Enum {
                        tape: self.tape,
                        variant: k,
                        value: Some(v),
                    }),
                    _ => Err(Failed),
                }
            }
            _ => Err(Failed),
        }
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Failed> {
        visitor.visit_unit()
    }
}

struct Seq<'t, 'de> {
    tape: &'t Tape<'de>,
    items: super::Children<'t, 'de>,
}

impl<'de> SeqAccess<'de> for Seq<'_, 'de> {
    type Error = Failed;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Failed> {
        match self.items.next() {
            Some(c) => seed
                .deserialize(Decoder {
                    tape: self.tape,
                    at: c.value,
                })
                .map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Map<'t, 'de> {
    tape: &'t Tape<'de>,
    members: Members<'t, 'de>,
    value: Option<usize>,
}

/// An object's members in key order: as written when the keys are already sorted, else sorted.
enum Members<'t, 'de> {
    Document(super::Children<'t, 'de>),
    Sorted(std::vec::IntoIter<(usize, usize)>),
}

impl Members<'_, '_> {
    fn next(&mut self) -> Option<(usize, usize)> {
        match self {
            Self::Document(c) => c.next().and_then(|c| Some((c.key?, c.value))),
            Self::Sorted(m) => m.next(),
        }
    }

    fn left(&self) -> usize {
        match self {
            Self::Document(c) => c.len(),
            Self::Sorted(m) => m.len(),
        }
    }
}

/// A key as `serde_json` presents one: a string (keys are never read as numbers here; a
/// document that needs that fails and takes the strict path).
fn key<'de, T: DeserializeSeed<'de>>(
    tape: &Tape<'de>,
    at: usize,
    seed: T,
) -> Result<T::Value, Failed> {
    match tape.str_at(at).ok_or(Failed)? {
        Cow::Borrowed(s) => seed.deserialize(BorrowedStrDeserializer::<Failed>::new(s)),
        Cow::Owned(s) => seed.deserialize(StringDeserializer::<Failed>::new(s)),
    }
}

impl<'de> MapAccess<'de> for Map<'_, 'de> {
    type Error = Failed;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Failed> {
        match self.members.next() {
            Some((k, v)) => {
                self.value = Some(v);
                key(self.tape, k, seed).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Failed> {
        let at = self.value.take().ok_or(Failed)?;
        seed.deserialize(Decoder {
            tape: self.tape,
            at,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.members.left())
    }
}

/// An enum as `serde_json` reads one: a variant name, alone or with one value.
struct Enum<'t, 'de> {
    tape: &'t Tape<'de>,
    variant: usize,
    value: Option<usize>,
}

impl<'t, 'de> EnumAccess<'de> for Enum<'t, 'de> {
    type Error = Failed;
    type Variant = Variant<'t, 'de>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Variant<'t, 'de>), Failed> {
        let name = key(self.tape, self.variant, seed)?;
        Ok((
            name,
            Variant {
                tape: self.tape,
                value: self.value,
            },
        ))
    }
}

struct Variant<'t, 'de> {
    tape: &'t Tape<'de>,
    value: Option<usize>,
}

impl<'t, 'de> Variant<'t, 'de> {
    fn decoder(&self) -> Option<Decoder<'t, 'de>> {
        self.value.map(|at| Decoder {
            tape: self.tape,
            at,
        })
    }
}

impl<'de> VariantAccess<'de> for Variant<'_, 'de> {
    type Error = Failed;

    fn unit_variant(self) -> Result<(), Failed> {
        match self.decoder() {
            Some(d) => <() as serde::Deserialize>::deserialize(d),
            None => Ok(()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Failed> {
        seed.deserialize(self.decoder().ok_or(Failed)?)
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Failed> {
        self.decoder().ok_or(Failed)?.visit_seq(visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Failed> {
        self.decoder().ok_or(Failed)?.visit_map(visitor)
    }
}
