//! Lenient decoding of numbers in responses: a JSON number or a decimal string, with an
//! absent or `null` field read as zero (contract section 1).

use serde::Serializer;
use serde::de::{self, Deserializer, Visitor};
use std::fmt;

struct IntVisitor;

impl<'de> Visitor<'de> for IntVisitor {
    type Value = i64;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer as a JSON number or a decimal string")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::custom(format!("{v} is out of range")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        if v.fract() == 0.0 && v.abs() < 9.2e18 {
            Ok(v as i64)
        } else {
            Err(E::custom(format!("{v} is not an integer")))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
        if v.is_empty() {
            return Ok(0);
        }
        v.parse::<i64>()
            .map_err(|_| E::custom(format!("`{v}` is not a decimal integer")))
    }
    fn visit_unit<E: de::Error>(self) -> Result<i64, E> {
        Ok(0)
    }
    fn visit_none<E: de::Error>(self) -> Result<i64, E> {
        Ok(0)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<i64, D::Error> {
        d.deserialize_any(IntVisitor)
    }
}

/// Deserializes an integer given as a number or a decimal string; `null` is 0.
pub fn int<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    d.deserialize_any(IntVisitor)
}

/// Deserializes an optional integer given as a number or a decimal string; `null` is absent.
pub fn opt_int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    struct Opt;
    impl<'de> Visitor<'de> for Opt {
        type Value = Option<i64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an integer, a decimal string or null")
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(IntVisitor).map(Some)
        }
    }
    d.deserialize_option(Opt)
}

/// Serializes an integer as a decimal string (numbers in agent entries).
pub fn as_string<S: Serializer>(v: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Whether an integer is zero (fields omitted when zero).
pub fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// `#[serde(with = "lenient::string_int")]`: an integer written as a decimal string (the
/// contract's form of counts in agent answers) and read from a number or a string.
pub mod string_int {
    pub use super::{as_string as serialize, int as deserialize};
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct T {
        #[serde(default, deserialize_with = "super::int")]
        n: i64,
        #[serde(default, deserialize_with = "super::opt_int")]
        o: Option<i64>,
    }

    #[test]
    fn numbers_strings_and_absence() {
        let t: T = serde_json::from_str(r#"{"n":"42","o":7}"#).unwrap();
        assert_eq!(t, T { n: 42, o: Some(7) });
        let t: T = serde_json::from_str(r#"{"n":42,"o":"7"}"#).unwrap();
        assert_eq!(t, T { n: 42, o: Some(7) });
        let t: T = serde_json::from_str(r#"{}"#).unwrap();
        assert_eq!(t, T { n: 0, o: None });
        let t: T = serde_json::from_str(r#"{"n":null,"o":null}"#).unwrap();
        assert_eq!(t, T { n: 0, o: None });
        assert!(serde_json::from_str::<T>(r#"{"n":"4.5"}"#).is_err());
    }
}
