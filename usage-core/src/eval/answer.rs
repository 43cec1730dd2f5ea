//! The form of answers: the values a query answers with, their wire form, result items and
//! the agent source's `metadata` (contract section 3, Values).
//!
//! Shared on purpose by everything that answers a query (the columnar evaluator, the
//! naive oracle it is tested against and the SQL stores), so that all print the same
//! value the same way. Nothing here decides *which* value an answer holds: selection,
//! grouping, ordering and arithmetic belong to each evaluator, so that the oracle does not
//! share a bug of the engine.

use crate::time::{Date, Timestamp};
use crate::wire::{Item, ResponseItem};

/// A value of a field or an aggregate.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value (AVG, MIN, MAX over no records): the alias is absent.
    Null,
    /// An integer (exact sums fit i128).
    Int(i128),
    /// A floating point result (AVG, `percent_code_written`).
    Float(f64),
    /// A date.
    Date(Date),
    /// An instant (`hour`, `timestamp`).
    Time(Timestamp),
    /// Text, an enum identifier, a version or JSON text.
    Text(String),
    /// A boolean.
    Bool(bool),
}

impl Value {
    /// The wire form of the value: decimal integers, shortest round-trip floats, dates
    /// `YYYY-MM-DD`, times in the hosted service's form, booleans `true`/`false`.
    /// `None` for [`Value::Null`].
    pub fn render(&self) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::Int(n) => n.to_string(),
            Value::Float(f) => format_float(*f),
            Value::Date(d) => d.to_iso(),
            Value::Time(t) => t.to_go(),
            Value::Text(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
        })
    }
}

/// Prints a float as the shortest decimal that round-trips, never with an exponent
/// (Rust's `{}` for `f64`): `2.5`, `3`, `0.1234567`.
pub fn format_float(f: f64) -> String {
    format!("{f}")
}

/// A result item of these aliases and values, in this order; `Null` values are left out.
pub fn item(pairs: impl IntoIterator<Item = (String, Value)>) -> ResponseItem {
    ResponseItem {
        item: Item(
            pairs
                .into_iter()
                .filter_map(|(k, v)| v.render().map(|s| (k, s)))
                .collect(),
        ),
    }
}

/// The bytes an item counts toward [`Limits::result_bytes`](crate::plan::Limits): the
/// lengths of its aliases and values.
pub fn item_bytes(item: &ResponseItem) -> usize {
    item.item.0.iter().map(|(k, v)| k.len() + v.len()).sum()
}

/// The bytes of a query's answer, as [`item_bytes`] counts them.
pub fn result_bytes(result: &crate::wire::QueryResult) -> usize {
    result.response_items.iter().map(item_bytes).sum()
}

/// The `metadata` value of the agent source: `{"email":"..."}` of the user owning the
/// record's `api_key`, or `{}` without one (no whitespace, JSON escapes).
pub fn metadata(email: Option<&str>) -> String {
    match email {
        Some(e) => {
            let mut m = serde_json::Map::new();
            m.insert(
                crate::schema::records::users::EMAIL.name().into(),
                serde_json::Value::String(e.to_string()),
            );
            serde_json::Value::Object(m).to_string()
        }
        None => "{}".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_forms() {
        assert_eq!(format_float(2.5), "2.5");
        assert_eq!(format_float(3.0), "3");
        assert_eq!(format_float(0.1234567), "0.1234567");
        assert_eq!(format_float(1e21), "1000000000000000000000");
        assert_eq!(format_float(1.0 / 3.0), "0.3333333333333333");
        assert_eq!(format_float(1e-7), "0.0000001");
    }

    #[test]
    fn items_leave_nulls_out_and_keep_order() {
        let i = item([
            ("b".to_string(), Value::Int(-3)),
            ("a".to_string(), Value::Null),
            ("c".to_string(), Value::Bool(true)),
            ("d".to_string(), Value::Date(Date(1))),
        ]);
        assert_eq!(
            i.item.0,
            [
                ("b".to_string(), "-3".to_string()),
                ("c".to_string(), "true".to_string()),
                ("d".to_string(), "1970-01-02".to_string()),
            ]
        );
    }

    #[test]
    fn metadata_escapes_and_defaults() {
        assert_eq!(metadata(None), "{}");
        assert_eq!(metadata(Some("a@x")), r#"{"email":"a@x"}"#);
        assert_eq!(metadata(Some("q\"\\@x")), r#"{"email":"q\"\\@x"}"#);
    }
}
