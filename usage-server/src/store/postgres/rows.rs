//! Decoding result rows of generated statements into response items, with the same value
//! rendering as the in-memory evaluator, and stored rows back into record values.

use usage_core::eval::answer::metadata;
use usage_core::eval::value::{Value, average, pcw_value};
use usage_core::schema::{PCW_COLUMNS, ValueType};

use tokio_postgres::Row;
use tokio_postgres::binary_copy::BinaryCopyOutRow;
use tokio_postgres::row::RowIndex;
use tokio_postgres::types::FromSql;
use usage_core::load::FieldValue;
use usage_core::schema::records::RecordType;
use usage_core::time::{Date, Timestamp};
use usage_core::wire::{Item, ResponseItem};

use super::expr::{Out, Output};
use crate::store::StoreError;

/// A decoding failure: the engine returned something the statement cannot produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl From<tokio_postgres::Error> for DecodeError {
    fn from(e: tokio_postgres::Error) -> Self {
        DecodeError(e.to_string())
    }
}

impl From<DecodeError> for StoreError {
    fn from(e: DecodeError) -> Self {
        StoreError::Internal(format!("PostgreSQL answer: {}", e.0))
    }
}

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
    // A PCW query ends its row with the sums of PCW_COLUMNS, in that order.
    let pcw_sums = |row: &[Option<String>]| -> Result<Vec<i128>, DecodeError> {
        let first = row.len().checked_sub(PCW_COLUMNS.len()).ok_or_else(|| {
            DecodeError(format!("a PCW row of {} columns has no sums", row.len()))
        })?;
        row[first..]
            .iter()
            .map(|v| v.as_deref().map_or(Ok(0), int))
            .collect()
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
            Out::Pcw(expr) => pcw_value(*expr, &pcw_sums(row)?)
                .ok_or_else(|| DecodeError(format!("{expr:?} is not a PCW field")))?,
        };
        if let Some(s) = v.render() {
            pairs.push((o.alias.clone(), s));
        }
    }
    Ok(ResponseItem { item: Item(pairs) })
}

/// A stored row whose cells are read by index `I`: a query's row (by name or position) or
/// a row of a binary `COPY` (by position).
pub trait Cells<I> {
    /// The cell at `i` as a `T`.
    ///
    /// # Errors
    /// No such cell, or one of another type.
    fn cell<'a, T: FromSql<'a>>(&'a self, i: I) -> Result<T, tokio_postgres::Error>;
}

impl<I: RowIndex + std::fmt::Display> Cells<I> for Row {
    fn cell<'a, T: FromSql<'a>>(&'a self, i: I) -> Result<T, tokio_postgres::Error> {
        self.try_get(i)
    }
}

impl Cells<usize> for BinaryCopyOutRow {
    fn cell<'a, T: FromSql<'a>>(&'a self, i: usize) -> Result<T, tokio_postgres::Error> {
        self.try_get(i)
    }
}

/// The value of a record field of type `ty` stored in cell `i`, as the store wrote it
/// (`sql::column_type`): NULL is absent; times and days are microseconds.
///
/// # Errors
/// No such cell, or one of another type.
pub fn field_value<I, C: Cells<I>>(
    ty: RecordType,
    row: &C,
    i: I,
) -> Result<FieldValue, tokio_postgres::Error> {
    Ok(match ty {
        RecordType::Text | RecordType::Enum(_) => row
            .cell::<Option<String>>(i)?
            .map_or(FieldValue::Absent, FieldValue::Text),
        RecordType::Hour | RecordType::Timestamp => row
            .cell::<Option<i64>>(i)?
            .map_or(FieldValue::Absent, |t| FieldValue::Time(Timestamp(t))),
        RecordType::Day => row
            .cell::<Option<i64>>(i)?
            .map_or(FieldValue::Absent, |t| FieldValue::Day(Timestamp(t).date())),
        RecordType::Count => row
            .cell::<Option<i64>>(i)?
            .map_or(FieldValue::Absent, FieldValue::Count),
        RecordType::Bool => row
            .cell::<Option<bool>>(i)?
            .map_or(FieldValue::Absent, FieldValue::Bool),
        RecordType::GroupIds => FieldValue::Groups(row.cell(i)?),
    })
}
