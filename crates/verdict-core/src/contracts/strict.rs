//! A `serde` deserializer over a borrowed [`Value`] that reads a struct only from an object.
//!
//! `serde_json`'s own deserializer for a `Value` also fills a struct from an array, taking its
//! elements as the fields in declaration order, so `["src/lib.rs"]` would read as a finding's
//! location. Every document's schema says object, and PostgreSQL's checks hold bodies to the
//! schema; reading the same way everywhere keeps both backends, the Gate's two readers and the
//! schema in agreement, and keeps one logical document from having two encodings and two
//! digests. Everything else behaves as `serde_json` does: the same visitor calls for every
//! node, the same errors.
//!
//! ```
//! use verdict_core::contracts::{Location, StrictValue};
//! use serde::Deserialize;
//!
//! let object = serde_json::json!({"resource": "diff"});
//! assert!(Location::deserialize(StrictValue(&object)).is_ok());
//! let array = serde_json::json!(["diff"]);
//! assert!(Location::deserialize(StrictValue(&array)).is_err());
//! // serde_json's own reader takes the array.
//! assert!(Location::deserialize(&array).is_ok());
//! ```

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, Unexpected, VariantAccess,
    Visitor,
};
use serde_json::{Error, Value};

/// Deserializes the value it holds; a struct only from an object (see the module).
#[derive(Debug, Clone, Copy)]
pub struct StrictValue<'a>(pub &'a Value);

fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => Unexpected::Unsigned(u),
            (None, Some(i), _) => Unexpected::Signed(i),
            (None, None, Some(f)) => Unexpected::Float(f),
            (None, None, None) => Unexpected::Other("number"),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

impl<'de> IntoDeserializer<'de, Error> for StrictValue<'de> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for StrictValue<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else if let Some(f) = n.as_f64() {
                    visitor.visit_f64(f)
                } else {
                    Err(de::Error::invalid_type(unexpected(self.0), &visitor))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(a) => {
                let mut seq = SeqDeserializer::new(a.iter().map(StrictValue));
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Value::Object(m) => {
                let mut map = MapDeserializer::new(m.iter().map(|(k, v)| (Key(k), StrictValue(v))));
                let out = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(_) => self.deserialize_any(visitor),
            other => Err(de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(_) => self.deserialize_any(visitor),
            other => Err(de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) => visitor.visit_enum(Enum {
                variant: s,
                value: None,
            }),
            Value::Object(m) => {
                let mut members = m.iter();
                match (members.next(), members.next()) {
                    (Some((k, v)), None) => visitor.visit_enum(Enum {
                        variant: k,
                        value: Some(v),
                    }),
                    _ => Err(de::Error::invalid_value(
                        Unexpected::Map,
                        &"a map with a single key",
                    )),
                }
            }
            other => Err(de::Error::invalid_type(unexpected(other), &"string or map")),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct identifier
    }
}

/// An object's key: a borrowed string.
struct Key<'de>(&'de str);

impl<'de> IntoDeserializer<'de, Error> for Key<'de> {
    type Deserializer = de::value::BorrowedStrDeserializer<'de, Error>;
    fn into_deserializer(self) -> Self::Deserializer {
        de::value::BorrowedStrDeserializer::new(self.0)
    }
}

/// An enum read from a string (a unit variant) or a one-member object.
struct Enum<'de> {
    variant: &'de str,
    value: Option<&'de Value>,
}

impl<'de> EnumAccess<'de> for Enum<'de> {
    type Error = Error;
    type Variant = Variant<'de>;
    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, Self::Variant), Error> {
        let v = seed.deserialize(de::value::BorrowedStrDeserializer::<Error>::new(
            self.variant,
        ))?;
        Ok((v, Variant(self.value)))
    }
}

struct Variant<'de>(Option<&'de Value>);

impl<'de> VariantAccess<'de> for Variant<'de> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.0 {
            None | Some(Value::Null) => Ok(()),
            Some(other) => Err(de::Error::invalid_type(unexpected(other), &"unit variant")),
        }
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, Error> {
        match self.0 {
            Some(v) => seed.deserialize(StrictValue(v)),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Some(v @ Value::Array(_)) => StrictValue(v).deserialize_any(visitor),
            Some(other) => Err(de::Error::invalid_type(unexpected(other), &"tuple variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Some(v @ Value::Object(_)) => StrictValue(v).deserialize_any(visitor),
            Some(other) => Err(de::Error::invalid_type(
                unexpected(other),
                &"struct variant",
            )),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}
