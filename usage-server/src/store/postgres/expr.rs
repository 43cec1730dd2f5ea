//! What a generated statement is made of and how its result columns decode: shared by
//! the query generator ([`super::sql`]), the statistics ([`super::stats`]) and the row
//! decoding ([`super::rows`]). A leaf.

use usage_core::schema::{Expr, ValueType};

/// A statement parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// Text.
    Text(String),
    /// A 64-bit integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// An array of text.
    TextArray(Vec<String>),
    /// Bytes.
    Bytes(Vec<u8>),
}

/// A statement and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The SQL text.
    pub sql: String,
    /// The parameters, `$1` first.
    pub params: Vec<Param>,
}

/// How a result column becomes a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// A field's value of type `ty` (dates as day numbers, times as microseconds).
    Value(ValueType, bool),
    /// A count or sum: NULL is 0.
    Total,
    /// MIN or MAX of a metric: NULL is absent.
    Extreme,
    /// AVG: this column is the sum, the next one the count.
    Avg,
    /// The agent source's `metadata` from the user's e-mail (NULL: `{}`).
    Metadata,
    /// A PCW field computed from the three byte sums at the end of the row.
    Pcw(Expr),
}

/// One output: its alias and how its column(s) decode.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The alias.
    pub alias: String,
    /// The decoding.
    pub out: Out,
}
