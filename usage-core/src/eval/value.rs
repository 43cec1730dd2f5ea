//! Typed values of query fields: comparison by type and the wire form (contract section 3,
//! Ordering and Values). Shared by every evaluator and store, so that all agree.

use std::cmp::Ordering;

use crate::plan::{FilterTest, FilterValue};
use crate::schema::ValueType;
use crate::time::{Date, Timestamp};

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

    /// Compares two values of a field of type `ty` (contract section 3, Ordering).
    pub fn cmp_as(&self, other: &Value, ty: ValueType) -> Ordering {
        match (self, other) {
            (Value::Text(a), Value::Text(b)) if ty == ValueType::Version => {
                crate::version::compare(a, b)
            }
            _ => self.cmp_plain(other),
        }
    }

    fn cmp_plain(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::Float(a), Value::Float(b)) => a.total_cmp(b),
            (Value::Date(a), Value::Date(b)) => a.cmp(b),
            (Value::Time(a), Value::Time(b)) => a.cmp(b),
            (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (a, b) => a.rank().cmp(&b.rank()),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Int(_) => 1,
            Value::Float(_) => 2,
            Value::Date(_) => 3,
            Value::Time(_) => 4,
            Value::Text(_) => 5,
            Value::Bool(_) => 6,
        }
    }
}

/// Prints a float as the shortest decimal that round-trips, never with an exponent
/// (Rust's `{}` for `f64`): `2.5`, `3`, `0.1234567`.
pub fn format_float(f: f64) -> String {
    format!("{f}")
}

/// AVG as the contract defines it: the exact sum as `f64` divided by the count as `f64`.
pub fn average(sum: i128, count: u64) -> Option<f64> {
    (count > 0).then(|| sum as f64 / count as f64)
}

/// `percent_code_written` from the exact byte sums: `vendor / (vendor + user)`, 0 when the
/// total is 0.
pub fn percent(vendor: i128, total: i128) -> f64 {
    if total == 0 {
        0.0
    } else {
        vendor as f64 / total as f64
    }
}

/// Whether a record value passes a filter value under ordering `ty` and `test`
/// (`ord` = record value compared to the filter value).
pub fn compare_filter(record: &Value, filter: &FilterValue, ty: ValueType) -> Ordering {
    match (record, filter) {
        (Value::Time(t), FilterValue::TimeDate(d)) => t.date().cmp(d),
        (Value::Time(t), FilterValue::Time(f)) => t.cmp(f),
        (Value::Date(d), FilterValue::Date(f)) => d.cmp(f),
        (Value::Int(n), FilterValue::Int(f)) => n.cmp(&i128::from(*f)),
        (Value::Bool(b), FilterValue::Bool(f)) => b.cmp(f),
        (Value::Text(s), FilterValue::Text(f)) => {
            if ty == ValueType::Version {
                crate::version::compare(s, f)
            } else {
                s.as_bytes().cmp(f.as_bytes())
            }
        }
        // Types never mix in a validated plan; order them deterministically anyway.
        _ => Ordering::Less,
    }
}

/// Whether a record's value passes a filter test: an operator and a value, or several
/// `EQUAL` values of which any may match (an IN list).
pub fn passes(record: &Value, test: &FilterTest, ty: ValueType) -> bool {
    match test {
        FilterTest::Compare(op, fv) => op.accepts(compare_filter(record, fv, ty)),
        FilterTest::AnyOf(vals) => vals
            .iter()
            .any(|fv| compare_filter(record, fv, ty) == Ordering::Equal),
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
    fn average_and_percent() {
        assert_eq!(average(5, 2), Some(2.5));
        assert_eq!(average(0, 0), None);
        assert_eq!(percent(0, 0), 0.0);
        assert_eq!(percent(1, 4), 0.25);
    }
}
