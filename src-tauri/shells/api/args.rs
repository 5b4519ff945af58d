//! An operation's arguments, read from the one JSON object both transports hand over: the page's `invoke(name,
//! args)` in the desktop window, and over HTTP the request's body with its path and query parameters folded in.
//!
//! Path and query parameters arrive as text (`/api/dead-letters/12`, `?http_status=422`), so a number or a yes/no
//! argument is also read from text that spells one; everything else is read as serde reads JSON. An error names
//! the argument at fault (`range: invalid type…`), on both transports alike.

use serde::de::{self, DeserializeOwned, IntoDeserializer, Unexpected, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Value};

use super::error::ApiError;

/// The arguments of `operation` as `T`; `null` (no arguments) reads as an empty object.
pub fn parse<T: DeserializeOwned>(operation: &str, args: Value) -> Result<T, ApiError> {
    let args = if args.is_null() { Value::Object(Map::new()) } else { args };
    serde_path_to_error::deserialize(Text(args)).map_err(|e| {
        let at = e.path().to_string();
        let why = e.into_inner();
        ApiError::BadRequest(if at == "." {
            format!("the arguments of `{operation}` are not valid: {why}")
        } else {
            format!("the argument `{at}` of `{operation}` is not valid: {why}")
        })
    })
}

/// A JSON value whose strings may stand for numbers and booleans (see the module's documentation).
struct Text(Value);

impl Text {
    fn parsed<'de, V: Visitor<'de>, N: std::str::FromStr>(
        self,
        visitor: V,
        visit: impl FnOnce(V, N) -> Result<V::Value, serde_json::Error>,
    ) -> Result<V::Value, serde_json::Error> {
        match self.0 {
            Value::String(s) => match s.trim().parse::<N>() {
                Ok(n) => visit(visitor, n),
                Err(_) => Err(de::Error::invalid_type(Unexpected::Str(&s), &visitor)),
            },
            other => de::Deserializer::deserialize_any(Text(other), visitor),
        }
    }
}

impl<'de> de::Deserializer<'de> for Text {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Fields { entries: map.into_iter(), value: None }),
            Value::Array(items) => visitor.visit_seq(Items(items.into_iter())),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, b: bool| v.visit_bool(b))
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: i64| v.visit_i64(n))
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: i64| v.visit_i64(n))
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: i64| v.visit_i64(n))
    }
    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: i64| v.visit_i64(n))
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: u64| v.visit_u64(n))
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: u64| v.visit_u64(n))
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: u64| v.visit_u64(n))
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: u64| v.visit_u64(n))
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: f64| v.visit_f64(n))
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.parsed(visitor, |v, n: f64| v.visit_f64(n))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(Text(other)),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit(visitor)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, Self::Error> {
        self.0.deserialize_unit_struct(name, visitor)
    }

    forward_to_deserialize_any! {
        i128 u128 char str string bytes byte_buf seq tuple tuple_struct map struct identifier ignored_any
    }
}

/// An object's fields, each value read as [`Text`].
struct Fields {
    entries: serde_json::map::IntoIter,
    value: Option<Value>,
}

impl<'de> de::MapAccess<'de> for Fields {
    type Error = serde_json::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        let Some((key, value)) = self.entries.next() else { return Ok(None) };
        self.value = Some(value);
        seed.deserialize(key.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Self::Error> {
        seed.deserialize(Text(self.value.take().unwrap_or(Value::Null)))
    }
}

/// An array's items, each read as [`Text`].
struct Items(std::vec::IntoIter<Value>);

impl<'de> de::SeqAccess<'de> for Items {
    type Error = serde_json::Error;

    fn next_element_seed<T: de::DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Self::Error> {
        self.0.next().map(|v| seed.deserialize(Text(v))).transpose()
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::parse;
    use crate::features::dlq::DeadLetterFilter;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Args {
        id: i64,
        name: String,
        paused: Option<bool>,
    }

    #[test]
    fn numbers_and_booleans_are_read_from_text_as_from_json() {
        let typed: Args = parse("x", json!({"id": 12, "name": "crm", "paused": true})).unwrap();
        let text: Args = parse("x", json!({"id": "12", "name": "crm", "paused": "true"})).unwrap();
        assert_eq!(typed, text);
        assert_eq!(typed, Args { id: 12, name: "crm".into(), paused: Some(true) });
        // A name that looks like a number stays a name.
        let named: Args = parse("x", json!({"id": "1", "name": "12"})).unwrap();
        assert_eq!((named.name.as_str(), named.paused), ("12", None));
    }

    #[test]
    fn a_query_string_reads_as_a_filter() {
        let f: DeadLetterFilter =
            parse("dead_letters", json!({"class": "permanent_data", "http_status": "422", "limit": "50"})).unwrap();
        assert_eq!(
            (f.class.map(|c| c.as_str()), f.http_status, f.limit),
            (Some("permanent_data"), Some(422), Some(50))
        );
        assert_eq!(parse::<DeadLetterFilter>("dead_letters", serde_json::Value::Null).unwrap(), Default::default());
    }

    #[test]
    fn an_error_names_the_argument_at_fault() {
        let e = parse::<Args>("op", json!({"id": "twelve", "name": "crm"})).unwrap_err();
        assert_eq!(e.code(), "bad_request");
        assert!(
            e.to_string().starts_with("the argument `id` of `op` is not valid: invalid type: string \"twelve\""),
            "{e}"
        );
        let e = parse::<DeadLetterFilter>("dead_letters", json!({"class": "bogus"})).unwrap_err();
        assert!(e.to_string().contains("`class`"), "{e}");
        let e = parse::<Args>("op", json!({"name": "crm"})).unwrap_err();
        assert!(e.to_string().contains("missing field `id`"), "{e}");
    }
}
