//! The engine's semantics of values (contract section 3, Ordering, Filters and Values):
//! how values of a field compare, whether a value passes a filter, and AVG and
//! `percent_code_written` from exact sums. The columnar evaluator and the SQL stores use
//! these; the naive oracle of the tests (`eval::reference`) has its own, so that a bug here
//! shows as a difference. [`Value`] itself and its wire form are in [`super::answer`]
//! (re-exported here).

use std::cmp::Ordering;

pub use super::answer::Value;
use crate::plan::{FilterTest, FilterValue};
use crate::schema::{Expr, PCW_COLUMNS, PcwSums, ValueType};

impl Value {
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

/// The value of the PCW output `expr` ([`crate::schema::PCW_OUTPUTS`]) from `sums`, the sums
/// of [`PCW_COLUMNS`] over the matching records in that order (an absent column sums to 0);
/// `None` when `expr` is not a PCW output. Every evaluator of PCW queries computes its
/// answer here, from the sums it got its own way.
pub fn pcw_value(expr: Expr, sums: &[i128]) -> Option<Value> {
    let sum_of = |columns: &[&str]| -> i128 {
        columns
            .iter()
            .filter_map(|c| PCW_COLUMNS.iter().position(|p| p == c))
            .map(|i| sums.get(i).copied().unwrap_or(0))
            .sum()
    };
    Some(match expr.pcw_sums()? {
        PcwSums {
            numerator,
            denominator: None,
        } => Value::Int(sum_of(numerator)),
        PcwSums {
            numerator,
            denominator: Some(denominator),
        } => Value::Float(percent(sum_of(numerator), sum_of(denominator))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_and_percent() {
        assert_eq!(average(5, 2), Some(2.5));
        assert_eq!(average(0, 0), None);
        assert_eq!(percent(0, 0), 0.0);
        assert_eq!(percent(1, 4), 0.25);
    }
}
