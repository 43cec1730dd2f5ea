//! Decoding result rows of generated statements into response items, with the same value
//! rendering as the in-memory evaluator.

use usage_core::eval::answer::metadata;
use usage_core::eval::value::{Value, average, percent};
use usage_core::schema::{Expr, ValueType};
use usage_core::time::{Date, Timestamp};
use usage_core::wire::{Item, ResponseItem};

use super::sql::{Out, Output};

/// A decoding failure: the engine returned something the statement cannot produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

fn int(s: &str) -> Result<i128, DecodeError> {
    s.parse::<i128>()
        .map_err(|_| DecodeError(format!("`{s}` is not an integer")))
}

fn value(ty: ValueType, s: &str) -> Result<Value, DecodeError> {
    Ok(match ty {
        ValueType::Date => Value::Date(Date(int(s)? as i32)),
        ValueType::Hour | ValueType::Timestamp => Value::Time(Timestamp(int(s)? as i64)),
        ValueType::Int | ValueType::Ratio => Value::Int(int(s)?),
        ValueType::Bool => Value::Bool(matches!(s, "true" | "t")),
        ValueType::Text | ValueType::Enum(_) | ValueType::Version | ValueType::Json => {
            Value::Text(s.to_string())
        }
    })
}

/// One result row (every column as text, NULL as `None`) into an item.
///
/// # Errors
/// A column that does not decode for its output.
pub fn item(outs: &[Output], row: &[Option<String>]) -> Result<ResponseItem, DecodeError> {
    let mut col = 0;
    let mut next = || -> Option<&str> {
        let v = row.get(col).and_then(|v| v.as_deref());
        col += 1;
        v
    };
    let pcw_sums = |row: &[Option<String>]| -> Result<(i128, i128, i128), DecodeError> {
        let n = row.len();
        let get = |i: usize| row[i].as_deref().map_or(Ok(0), int);
        Ok((get(n - 3)?, get(n - 2)?, get(n - 1)?))
    };
    let mut pairs = Vec::with_capacity(outs.len());
    for o in outs {
        let v = match &o.out {
            Out::Value(ty, nullable_int) => match next() {
                Some(s) => value(*ty, s)?,
                None if *nullable_int => Value::Int(0),
                None => Value::Null,
            },
            Out::Total => Value::Int(next().map_or(Ok(0), int)?),
            Out::Extreme => next().map_or(Ok(Value::Null), |s| int(s).map(Value::Int))?,
            Out::Avg => {
                let sum = next().map_or(Ok(0), int)?;
                let count = next().map_or(Ok(0), int)?;
                average(sum, count as u64).map_or(Value::Null, Value::Float)
            }
            Out::Metadata => Value::Text(metadata(next())),
            Out::Pcw(expr) => {
                let (auto, cmd, user) = pcw_sums(row)?;
                let vendor = auto + cmd;
                match expr {
                    Expr::PcwPercent => Value::Float(percent(vendor, vendor + user)),
                    Expr::PcwVendorBytes => Value::Int(vendor),
                    Expr::PcwTotalBytes => Value::Int(vendor + user),
                    Expr::Column("user_bytes") => Value::Int(user),
                    Expr::Column("vendor_bytes_by_autocomplete") => Value::Int(auto),
                    Expr::Column("vendor_bytes_by_command") => Value::Int(cmd),
                    other => return Err(DecodeError(format!("{other:?} is not a PCW field"))),
                }
            }
        };
        if let Some(s) = v.render() {
            pairs.push((o.alias.clone(), s));
        }
    }
    Ok(ResponseItem { item: Item(pairs) })
}
