//! Everything the generated SQL spells the PostgreSQL way, in one place: placeholders,
//! bytewise collation, integer division, local dates, the version sort key, the identity
//! key, the DDL types and array parameters. The generator (`sql.rs`, `expr.rs`) writes the
//! rest portably and calls these.

use usage_core::schema::records::RecordType;

/// The placeholder of parameter `n` (1-based).
pub fn placeholder(n: usize) -> String {
    format!("${n}")
}

/// A text value as a SQL literal, for the statements that take no parameters (`COPY`):
/// the escape-string form, whose meaning does not depend on
/// `standard_conforming_strings`. `None` for text holding U+0000, which SQL text cannot.
pub fn text_literal(s: &str) -> Option<String> {
    (!s.contains('\0')).then(|| format!("E'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")))
}

/// `expr` compared bytewise (UTF-8 byte order).
pub fn bytewise(expr: &str) -> String {
    format!("({expr}) COLLATE \"C\"")
}

/// The sort key of a version (contract section 3, Ordering), as a bytewise-comparable value.
pub fn version_key(expr: &str) -> String {
    format!("usage_version_key({expr})")
}

/// Floor division of a 64-bit integer by a positive constant, exact for negative values too.
pub fn floor_div(expr: &str, d: i64) -> String {
    format!("((({expr}) - (((({expr}) % {d}) + {d}) % {d})) / {d})")
}

/// Division of a 64-bit integer known not to be negative by a positive constant (where
/// floor and truncation agree: cheaper than [`floor_div`]).
pub fn div_nonneg(expr: &str, d: i64) -> String {
    format!("(({expr}) / {d})")
}

/// The local date, as days since 1970-01-01, of the instant `micros` (microseconds since
/// 1970, not negative) in the IANA time zone named by the text parameter `zone`.
pub fn zoned_date(micros: &str, zone: &str) -> String {
    // Whole seconds are exact through `to_timestamp` (a double), and a local midnight is a
    // whole second in every zone, so the fraction cannot change the date.
    format!(
        "(((to_timestamp(({micros}) / 1000000) AT TIME ZONE ({zone})::text)::date \
         - DATE '1970-01-01')::bigint)"
    )
}

/// `expr` equals any element of the text-array parameter `param`.
pub fn any_text(expr: &str, param: &str) -> String {
    format!("{expr} = ANY({param}::text[])")
}

/// Aggregates to text.
pub fn to_text(expr: &str) -> String {
    format!("({expr})::text")
}

/// The UTF-8 bytes of a text expression (compared bytewise, and able to meet a parameter
/// holding U+0000, which SQL text cannot).
pub fn bytes_of(expr: &str) -> String {
    format!("convert_to({expr}, 'UTF8')")
}

/// DDL types.
#[derive(Debug, Clone, Copy)]
pub struct Types {
    /// Text.
    pub text: &'static str,
    /// 64-bit integer.
    pub int: &'static str,
    /// Boolean.
    pub boolean: &'static str,
    /// Bytes.
    pub bytes: &'static str,
}

/// The DDL types of text, 64-bit integers, booleans and bytes.
pub const TYPES: Types = Types {
    text: "TEXT",
    int: "BIGINT",
    boolean: "BOOLEAN",
    bytes: "BYTEA",
};

/// The DDL type of a record field's column: times, days and counts are 64-bit integers
/// (microseconds; a day as the microsecond of its midnight).
pub fn column_type(ty: RecordType) -> &'static str {
    match ty {
        RecordType::Text | RecordType::Enum(_) | RecordType::GroupIds => TYPES.text,
        RecordType::Timestamp | RecordType::Hour | RecordType::Day | RecordType::Count => TYPES.int,
        RecordType::Bool => TYPES.boolean,
    }
}

/// Statements that install the version sort key's function (`usage_version_key`).
pub fn version_key_functions() -> Vec<String> {
    // The sort key of a version: per part, a numeric part is 0x01, its digit count (leading
    // zeros stripped) as 4 hex digits and the digits; a text part is 0x02, its bytes and
    // 0x00 (text holds no NUL). The end of the parts is 0x00, so a prefix sorts first; the
    // whole string follows, so versions equal part by part (`1.02`, `1.2`) order bytewise.
    // Comparing keys bytewise is the contract's order.
    vec![r#"CREATE OR REPLACE FUNCTION usage_version_key(v TEXT) RETURNS BYTEA
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
DECLARE
  part TEXT;
  digits TEXT;
  key BYTEA := ''::bytea;
BEGIN
  FOREACH part IN ARRAY (CASE WHEN v = '' THEN ARRAY[''] ELSE string_to_array(v, '.') END) LOOP
    IF part ~ '^[0-9]+$' THEN
      digits := ltrim(part, '0');
      key := key || '\x01'::bytea || convert_to(lpad(to_hex(length(digits)), 4, '0'), 'UTF8') || convert_to(digits, 'UTF8');
    ELSE
      key := key || '\x02'::bytea || convert_to(part, 'UTF8') || '\x00'::bytea;
    END IF;
  END LOOP;
  RETURN key || '\x00'::bytea || convert_to(v, 'UTF8');
END
$fn$"#
        .to_string()]
}

/// The key of a record's identity: one fixed-size value computed from the identity columns
/// (`(expression, is_text)`), so that an index on it stays within the engine's index row
/// limit whatever the values (contract section 11: every store keeps and indexes what one
/// store accepts). Text is length-prefixed, so distinct identities have distinct keys.
pub fn identity_key(cols: &[(String, bool)]) -> String {
    let parts: Vec<String> = cols
        .iter()
        .map(|(c, text)| {
            if *text {
                format!("length({c})::text || ':' || {c}")
            } else {
                format!("({c})::text")
            }
        })
        .collect();
    format!("usage_identity_key({})", parts.join(" || '|' || "))
}

/// The length in bytes of a text expression's UTF-8.
pub fn byte_length(expr: &str) -> String {
    format!("octet_length({expr})")
}

/// Statements that install what [`identity_key`] calls.
pub fn identity_functions() -> Vec<String> {
    // `convert_to` is only STABLE (it names an encoding), but the database's encoding never
    // changes under its data, so the SHA-256 of the UTF-8 bytes is immutable.
    vec![
        "CREATE OR REPLACE FUNCTION usage_identity_key(v TEXT) RETURNS BYTEA \
         LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$ SELECT sha256(convert_to(v, 'UTF8')) $fn$"
            .to_string(),
    ]
}

/// The statement that turns generated column `column` of `table` into a plain one, keeping
/// its values.
pub fn drop_generation(table: &str, column: &str) -> String {
    format!("ALTER TABLE {table} ALTER COLUMN {column} DROP EXPRESSION")
}

/// The version sort key that `usage_version_key` computes in the database, computed here
/// for filter values (which may hold characters SQL text cannot), byte for byte the same.
pub fn version_sort_key(v: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(v.len() * 2 + 8);
    for part in v.split('.') {
        if !part.is_empty() && part.bytes().all(|c| c.is_ascii_digit()) {
            let digits = part.trim_start_matches('0');
            key.push(1);
            key.extend_from_slice(format!("{:04x}", digits.len()).as_bytes());
            key.extend_from_slice(digits.as_bytes());
        } else {
            key.push(2);
            key.extend_from_slice(part.as_bytes());
            key.push(0);
        }
    }
    key.push(0);
    key.extend_from_slice(v.as_bytes());
    key
}

/// The identity key of a usage record, as [`identity_key`] (with
/// `usage_identity_key`) computes it in the database for the same row, byte for byte: the
/// SHA-256 of the identity columns' text joined by `|`, a text column as its length in
/// characters, `:` and the text, any other as its decimal SQL text. Writes compute it here
/// and store it (no per-row SQL function on the write path).
pub fn identity_key_of(record: &usage_core::load::Record) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    use std::fmt::Write as _;
    use usage_core::load::FieldValue;
    let kind = record.kind();
    let mut text = String::with_capacity(64);
    for (i, name) in kind.identity.iter().enumerate() {
        if i > 0 {
            text.push('|');
        }
        // Writing into a String cannot fail.
        let _ = match record.get(name) {
            FieldValue::Text(s) => write!(text, "{}:{s}", s.chars().count()),
            FieldValue::Time(t) => write!(text, "{}", t.0),
            FieldValue::Day(d) => write!(text, "{}", d.start().0),
            FieldValue::Count(n) => write!(text, "{n}"),
            FieldValue::Bool(b) => write!(text, "{b}"),
            // Identity fields are required scalars (a stored NULL has no key either).
            FieldValue::Absent | FieldValue::Groups(_) => Ok(()),
        };
    }
    Sha256::digest(text.as_bytes()).into()
}
