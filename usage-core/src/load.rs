//! Records that load data (contract section 8): parsing, event ids, batches.
//!
//! A [`Record`] is a parsed record of one [`RecordKind`], its values in the kind's field
//! order. [`parse_record`] checks one JSON object against its kind's table; [`ingest`]
//! validates a whole `Ingest` request (all-or-nothing, every violation of the first 20 bad
//! records).

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{JsonPath, Rule, UNKNOWN_KEY_RANK, Violation, Violations, echo, suggestion};
use crate::plan::Limits;
use crate::schema::records::{RecordKind, RecordType, kind_names};
use crate::time::{Date, TimeError, Timestamp};
use crate::validate::{finish, missing, too_many};
use crate::wire::IngestRequest;
use crate::wire::decode::{camel, read_int};
use crate::wire::specs::INGEST;

/// How many bad records an Ingest answer or an import lists.
pub const MAX_REPORTED_RECORDS: usize = 20;

/// A parsed value of a record field.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldValue {
    /// The field was not given (optional fields only).
    Absent,
    /// Text or an enum identifier.
    Text(String),
    /// An instant (`hour`, `timestamp`, `signup_time`, cycle bounds).
    Time(Timestamp),
    /// A day.
    Day(Date),
    /// A count.
    Count(i64),
    /// A boolean.
    Bool(bool),
    /// Group ids.
    Groups(Vec<String>),
}

impl FieldValue {
    /// The text, if this is text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            FieldValue::Text(s) => Some(s),
            _ => None,
        }
    }

    /// The count, if this is a count.
    pub fn as_count(&self) -> Option<i64> {
        match self {
            FieldValue::Count(n) => Some(*n),
            _ => None,
        }
    }

    /// The instant, if this is a time (a day is its start).
    pub fn as_time(&self) -> Option<Timestamp> {
        match self {
            FieldValue::Time(t) => Some(*t),
            FieldValue::Day(d) => Some(d.start()),
            _ => None,
        }
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            FieldValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The JSON form: times as RFC 3339 UTC, days as `YYYY-MM-DD`, counts as numbers.
    pub fn to_json(&self) -> Value {
        match self {
            FieldValue::Absent => Value::Null,
            FieldValue::Text(s) => Value::String(s.clone()),
            FieldValue::Time(t) => Value::String(t.to_rfc3339()),
            FieldValue::Day(d) => Value::String(d.to_iso()),
            FieldValue::Count(n) => Value::from(*n),
            FieldValue::Bool(b) => Value::Bool(*b),
            FieldValue::Groups(g) => Value::Array(g.iter().cloned().map(Value::String).collect()),
        }
    }
}

/// A parsed record: one value per field of its kind, in the kind's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    kind: &'static RecordKind,
    values: Vec<FieldValue>,
}

impl Record {
    /// A record from values in the kind's field order.
    ///
    /// # Panics
    /// When the number of values is not the number of the kind's fields.
    pub fn from_values(kind: &'static RecordKind, values: Vec<FieldValue>) -> Record {
        assert_eq!(values.len(), kind.fields.len(), "values of {}", kind.name);
        Record { kind, values }
    }

    /// The record's kind.
    pub fn kind(&self) -> &'static RecordKind {
        self.kind
    }

    /// The values, in the kind's field order.
    pub fn values(&self) -> &[FieldValue] {
        &self.values
    }

    /// The value of a field (`Absent` when the record does not give it).
    ///
    /// # Panics
    /// In debug builds (tests), when `name` is not a field of the record's kind: a
    /// misspelled name is a bug, not an absent value. Release builds answer `Absent`.
    pub fn get(&self, name: &str) -> &FieldValue {
        static ABSENT: FieldValue = FieldValue::Absent;
        let i = self.kind.position(name);
        debug_assert!(
            i.is_some(),
            "`{name}` is not a field of {} records",
            self.kind.name
        );
        i.map_or(&ABSENT, |i| &self.values[i])
    }

    /// The text of a field, or `""` (a field of the kind; see [`Record::get`]).
    pub fn text(&self, name: &str) -> &str {
        self.get(name).as_text().unwrap_or("")
    }

    /// The count of a field, or 0 (a field of the kind; see [`Record::get`]).
    pub fn count(&self, name: &str) -> i64 {
        self.get(name).as_count().unwrap_or(0)
    }

    /// The record's time, if its kind has one.
    pub fn time(&self) -> Option<Timestamp> {
        self.get(self.kind.time?).as_time()
    }

    /// The identity key: the values of the identity fields, joined unambiguously.
    pub fn identity(&self) -> String {
        let mut key = String::new();
        for name in self.kind.identity {
            let v = self.get(name);
            let part = match v {
                FieldValue::Text(s) => s.clone(),
                other => other.to_json().to_string(),
            };
            key.push_str(&part.len().to_string());
            key.push(':');
            key.push_str(&part);
        }
        key
    }

    /// The JSON object of the given fields (times RFC 3339 UTC, counts as numbers), in the
    /// kind's field order.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        for (f, v) in self.kind.fields.iter().zip(&self.values) {
            if *v != FieldValue::Absent {
                m.insert(f.name.to_string(), v.to_json());
            }
        }
        m
    }

    /// The canonical JSON of the given fields except `id`: keys sorted bytewise, no
    /// whitespace (contract section 8).
    pub fn canonical_json(&self) -> String {
        let mut pairs: Vec<(&str, Value)> = self
            .kind
            .fields
            .iter()
            .zip(&self.values)
            .filter(|(f, v)| f.name != "id" && **v != FieldValue::Absent)
            .map(|(f, v)| (f.name, v.to_json()))
            .collect();
        pairs.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut out = String::from("{");
        for (i, (k, v)) in pairs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&Value::String((*k).to_string()).to_string());
            out.push(':');
            out.push_str(&v.to_string());
        }
        out.push('}');
        out
    }
}

/// The lowercase hex SHA-256 of a string.
pub fn sha256_hex(s: &str) -> String {
    let digest = Sha256::digest(s.as_bytes());
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Parses one record of `kind` from a JSON value; `at` is the record's path.
///
/// Events without `id` get the hash of their canonical JSON as id.
///
/// # Errors
/// The violations of the record, in the order they are found (unknown fields first, then
/// the fields in the kind's order): unknown fields, missing required fields, values that
/// do not parse for their type. At most [`MAX_DETAILS`] are listed, the first ones found.
///
/// [`MAX_DETAILS`]: crate::error::MAX_DETAILS
pub fn parse_record(
    kind: &'static RecordKind,
    value: &Value,
    at: &JsonPath,
) -> Result<Record, Vec<Violation>> {
    let mut found = Vec::new();
    check_record(kind, value, at, &mut |v| {
        if found.len() < crate::error::MAX_DETAILS {
            found.push(v);
        }
    })
    .ok_or(found)
}

/// A JSON object as a record is read from it: its keys, and the value of a key.
trait Fields {
    fn keys(&self) -> impl Iterator<Item = &str>;
    fn get(&self, key: &str) -> Option<&Value>;
}

impl Fields for Map<String, Value> {
    fn keys(&self) -> impl Iterator<Item = &str> {
        Map::keys(self).map(String::as_str)
    }
    fn get(&self, key: &str) -> Option<&Value> {
        Map::get(self, key)
    }
}

/// A JSON object's members in text order, keys borrowed from the text where they hold no
/// escape: what a record line needs, without the map of a [`Value`] tree.
struct Pairs<'a>(Vec<(std::borrow::Cow<'a, str>, Value)>);

impl<'de> serde::Deserialize<'de> for Pairs<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Pairs<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Pairs<'de>, A::Error> {
                let mut out = Vec::with_capacity(m.size_hint().unwrap_or(8));
                while let Some(k) = m.next_key::<std::borrow::Cow<'de, str>>()? {
                    out.push((k, m.next_value()?));
                }
                Ok(Pairs(out))
            }
        }
        d.deserialize_map(V)
    }
}

impl Fields for Pairs<'_> {
    fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
    }
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// [`parse_record`] of a record's JSON text, without building a [`Value`] tree for the
/// object: the import's path, where parsing is most of the work. The answer is the one
/// [`parse_record`] gives for the parsed text; `None` when the text is not a JSON object
/// with distinct keys (parse it as a [`Value`] then, for the exact error or for the last
/// of two equal keys).
///
/// # Errors
/// As [`parse_record`].
pub fn parse_record_text(
    kind: &'static RecordKind,
    text: &str,
    at: &JsonPath,
) -> Option<Result<Record, Vec<Violation>>> {
    let text = crate::wire::decode::integer_zeros(text.as_bytes());
    let pairs: Pairs<'_> = serde_json::from_slice(&text).ok()?;
    let mut keys: Vec<&str> = pairs.0.iter().map(|(k, _)| &**k).collect();
    keys.sort_unstable();
    if keys.windows(2).any(|w| w[0] == w[1]) {
        return None;
    }
    let mut found = Vec::new();
    Some(
        check_fields(kind, &pairs, at, &mut |v| {
            if found.len() < crate::error::MAX_DETAILS {
                found.push(v);
            }
        })
        .ok_or(found),
    )
}

/// Each record kind's field names in lowerCamelCase (contract section 1: the
/// lowerCamelCase spelling of every request field is accepted too), made once.
fn camels(kind: &RecordKind) -> &'static [String] {
    static CAMELS: std::sync::OnceLock<Vec<(&'static str, Vec<String>)>> =
        std::sync::OnceLock::new();
    let all = CAMELS.get_or_init(|| {
        crate::schema::records::KINDS
            .iter()
            .map(|k| (k.name, k.fields.iter().map(|f| camel(f.name)).collect()))
            .collect()
    });
    all.iter()
        .find(|(name, _)| *name == kind.name)
        .map_or(&[], |(_, c)| c.as_slice())
}

/// [`parse_record`], handing each violation to `report` as it is found; `None` when there
/// was one.
fn check_record(
    kind: &'static RecordKind,
    value: &Value,
    at: &JsonPath,
    report: &mut dyn FnMut(Violation),
) -> Option<Record> {
    let Some(obj) = value.as_object() else {
        let msg = format!("a {} record must be a JSON object", kind.name);
        report(Violation::new(at.clone(), Rule::InvalidValue, msg));
        return None;
    };
    check_fields(kind, obj, at, report)
}

/// [`check_record`] of an object's members.
fn check_fields(
    kind: &'static RecordKind,
    obj: &impl Fields,
    at: &JsonPath,
    report: &mut dyn FnMut(Violation),
) -> Option<Record> {
    let mut bad = false;
    let mut push = |v: Violation| {
        bad = true;
        report(v);
    };
    let mut unknown_rank = UNKNOWN_KEY_RANK;
    let camels = camels(kind);
    for key in obj.keys() {
        if kind.field(key).is_none() && !camels.iter().any(|c| c == key) {
            let names: Vec<_> = kind.fields.iter().map(|f| f.name).collect();
            let msg = format!(
                "unknown field `{}` of a {} record (fields: {}){}",
                echo(key),
                kind.name,
                names.join(", "),
                suggestion(key, names.iter().copied())
            );
            push(Violation::new(
                at.key(echo(key).into_owned(), unknown_rank),
                Rule::UnknownField,
                msg,
            ));
            unknown_rank += 1;
        }
    }
    let mut values = Vec::with_capacity(kind.fields.len());
    for (rank, f) in kind.fields.iter().enumerate() {
        let path = at.key(f.name, rank as u32);
        let snake = obj.get(f.name).filter(|x| !x.is_null());
        let camel_value = obj
            .get(&camels[rank])
            .filter(|x| !x.is_null() && camels[rank] != f.name);
        if let (Some(_), Some(_)) = (snake, camel_value) {
            let msg = format!(
                "`{}` and `{}` are two spellings of one field; give only one",
                f.name, camels[rank]
            );
            push(Violation::new(path.clone(), Rule::ConflictingFields, msg));
        }
        let given = snake.or(camel_value);
        let parsed = match given {
            None => {
                if f.required {
                    push(missing(path, &format!(" in a {} record", kind.name)));
                }
                FieldValue::Absent
            }
            Some(x) => match parse_field(f.ty, f.required, x) {
                Ok(p) => p,
                Err((rule, msg)) => {
                    let msg = format!("`{}`: {msg}", f.name);
                    push(Violation::new(path, rule, msg));
                    FieldValue::Absent
                }
            },
        };
        values.push(parsed);
    }
    if let (Some(i), Some(j)) = (
        kind.position("billing_cycle_start"),
        kind.position("billing_cycle_end"),
    ) && let (Some(start), Some(end)) = (values[i].as_time(), values[j].as_time())
        && end <= start
    {
        let msg = format!("`billing_cycle_end` {end} is not after `billing_cycle_start` {start}");
        push(Violation::new(
            at.key("billing_cycle_end", j as u32),
            Rule::InvalidValue,
            msg,
        ));
    }
    if bad {
        return None;
    }
    let mut record = Record { kind, values };
    if kind.is_event() && record.get("id") == &FieldValue::Absent {
        let id = sha256_hex(&record.canonical_json());
        let i = kind.position("id").expect("events have an id field");
        record.values[i] = FieldValue::Text(id);
    }
    Some(record)
}

/// The longest text value a record may hold, in bytes of UTF-8 (contract section 11): every
/// store keeps and indexes what one store accepts.
pub const MAX_TEXT_BYTES: usize = 1024;

/// The one rule for every text value of a record: no U+0000 (SQL text cannot hold it;
/// refusing it for every store keeps their answers alike) and at most [`MAX_TEXT_BYTES`].
fn storable_text(s: &str) -> Result<&str, (Rule, String)> {
    if s.contains('\0') {
        return Err((
            Rule::InvalidValue,
            "must not contain the character U+0000".into(),
        ));
    }
    if s.len() > MAX_TEXT_BYTES {
        return Err((
            Rule::InvalidValue,
            format!(
                "is {} bytes long; a text value is at most {MAX_TEXT_BYTES} bytes of UTF-8",
                s.len()
            ),
        ));
    }
    Ok(s)
}

/// The message of a time or date that does not parse or lies outside the kept range.
fn time_error(s: &str, e: TimeError, form: &str) -> (Rule, String) {
    let shown = echo(s);
    match e {
        TimeError::Syntax => (Rule::InvalidValue, format!("\"{shown}\" is not {form}")),
        TimeError::Range => (Rule::InvalidValue, format!("\"{shown}\" {e}")),
    }
}

fn parse_field(ty: RecordType, required: bool, x: &Value) -> Result<FieldValue, (Rule, String)> {
    let kind_err = |what: &str| {
        (
            Rule::InvalidValue,
            format!("expected {what}, got {}", crate::wire::decode::kind_name(x)),
        )
    };
    let text = || -> Result<&str, (Rule, String)> {
        match x {
            Value::String(s) if s.is_empty() && required => {
                Err((Rule::MissingField, "is required; got \"\"".into()))
            }
            Value::String(s) => storable_text(s),
            _ => Err(kind_err("a string")),
        }
    };
    match ty {
        RecordType::Text => Ok(FieldValue::Text(text()?.to_string())),
        RecordType::Timestamp | RecordType::Hour => {
            let s = text()?;
            let t = Timestamp::read_rfc3339(s)
                .map_err(|e| time_error(s, e, "an RFC 3339 timestamp"))?;
            if t > Timestamp::RECORD_MAX {
                return Err((
                    Rule::InvalidValue,
                    format!(
                        "\"{}\" is after {}, the last time a record may hold (its local date is \
                         at most 9999-12-31 at every offset)",
                        crate::error::echo(s),
                        Timestamp::RECORD_MAX.to_rfc3339()
                    ),
                ));
            }
            if ty == RecordType::Hour && !t.is_hour_start() {
                return Err((
                    Rule::InvalidValue,
                    format!(
                        "\"{}\" is not the start of an hour (minutes and seconds must be 0 in UTC)",
                        echo(s)
                    ),
                ));
            }
            Ok(FieldValue::Time(t))
        }
        RecordType::Day => {
            let s = text()?;
            Date::read(s)
                .map(FieldValue::Day)
                .map_err(|e| time_error(s, e, "a day YYYY-MM-DD"))
        }
        RecordType::Count => match x {
            Value::Number(_) | Value::String(_) => {
                let n = read_int(x).map_err(|m| (Rule::InvalidValue, m))?;
                if n < 0 {
                    return Err((
                        Rule::InvalidValue,
                        format!("{n} is negative; counts are integers >= 0"),
                    ));
                }
                Ok(FieldValue::Count(n))
            }
            _ => Err(kind_err("an integer (a number or a decimal string)")),
        },
        RecordType::Bool => match x {
            Value::Bool(b) => Ok(FieldValue::Bool(*b)),
            _ => Err(kind_err("a boolean")),
        },
        RecordType::Enum(ids) => {
            let s = text()?;
            if ids.contains(&s) {
                Ok(FieldValue::Text(s.to_string()))
            } else {
                Err((
                    Rule::UnknownEnumValue,
                    format!(
                        "unknown value `{}` (allowed: {}){}",
                        echo(s),
                        ids.join(", "),
                        suggestion(s, ids.iter().copied())
                    ),
                ))
            }
        }
        RecordType::GroupIds => match x {
            Value::Array(a) => {
                let mut out = Vec::with_capacity(a.len());
                for e in a {
                    match e {
                        Value::String(s) if !s.is_empty() => {
                            out.push(storable_text(s)?.to_string())
                        }
                        _ => return Err(kind_err("an array of non-empty group ids")),
                    }
                }
                Ok(FieldValue::Groups(out))
            }
            _ => Err(kind_err("an array of group ids")),
        },
    }
}

/// A validated batch of records of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The kind.
    pub kind: &'static RecordKind,
    /// The records, in the order sent (later ones win on equal identity).
    pub records: Vec<Record>,
}

/// Validates an `Ingest` request: the kind, the record limit, and each record.
///
/// # Errors
/// Every violation: `kind` missing or unknown, too many records, and every violation of
/// the first [`MAX_REPORTED_RECORDS`] bad records (paths `records[i].field`).
pub fn ingest(req: &IngestRequest, limits: &Limits) -> Result<Batch, Violations> {
    let mut v = Violations::new();
    let root = JsonPath::root();
    let kpath = INGEST.path(&root, "kind");
    let rpath = INGEST.path(&root, "records");
    let kind = match req.kind.as_deref() {
        None => {
            v.push(missing(
                kpath,
                &format!(": one of {}", kind_names().join(", ")),
            ));
            None
        }
        Some(k) => match RecordKind::by_name(k) {
            Some(kind) => Some(kind),
            None => {
                let names = kind_names();
                let msg = format!(
                    "`kind`: unknown record kind `{}` (allowed: {}){}",
                    echo(k),
                    names.join(", "),
                    suggestion(k, names.iter().copied())
                );
                v.push(Violation::new(kpath, Rule::UnknownEnumValue, msg));
                None
            }
        },
    };
    if req.records.len() > limits.ingest_records {
        v.push(too_many(
            rpath.clone(),
            req.records.len(),
            limits.ingest_records,
        ));
    }
    let mut records = Vec::with_capacity(req.records.len());
    if let Some(kind) = kind {
        let mut bad = 0;
        for (i, r) in req.records.iter().enumerate() {
            // Every violation of the first bad records, kept in document order.
            let reported = bad < MAX_REPORTED_RECORDS;
            let rec = check_record(kind, r, &rpath.index(i), &mut |e| {
                if reported {
                    v.push(e);
                }
            });
            match rec {
                Some(rec) => records.push(rec),
                None => bad += 1,
            }
        }
    }
    finish(v, || Batch {
        kind: kind.expect("a kind when there is no violation"),
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::records::{AGENT_RUNS, AUTOCOMPLETE, CHAT, KINDS, RecordType, USERS};
    use serde_json::json;

    /// A valid record of `kind` built from its table: every field given, times increasing
    /// in field order (so a cycle's end follows its start).
    fn valid_record(kind: &RecordKind) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        for (i, f) in kind.fields.iter().enumerate() {
            let v = match f.ty {
                RecordType::Text => json!(format!("{}-value", f.name)),
                RecordType::Hour | RecordType::Timestamp => {
                    json!(format!("2025-05-01T{:02}:00:00Z", i % 24))
                }
                RecordType::Day => json!("2025-05-01"),
                RecordType::Count => json!(1),
                RecordType::Bool => json!(true),
                RecordType::Enum(ids) => json!(ids[0]),
                RecordType::GroupIds => json!(["g1"]),
            };
            m.insert(f.name.to_string(), v);
        }
        m
    }

    fn parse_with(
        kind: &'static RecordKind,
        field: &str,
        v: Value,
    ) -> Result<Record, Vec<Violation>> {
        let mut m = valid_record(kind);
        // A billing cycle ends after it starts: give the other bound the range's end.
        match field {
            "billing_cycle_start" => m.insert(
                "billing_cycle_end".into(),
                json!(Timestamp::RECORD_MAX.to_rfc3339()),
            ),
            "billing_cycle_end" => m.insert(
                "billing_cycle_start".into(),
                json!(Timestamp::MIN.to_rfc3339()),
            ),
            _ => None,
        };
        m.insert(field.to_string(), v);
        parse_record(kind, &Value::Object(m), &JsonPath::root())
    }

    /// Text of exactly `bytes` bytes of UTF-8 in characters of 1 to 4 bytes.
    fn text_of(bytes: usize) -> String {
        let mut s = String::new();
        for c in ['€', 'é', '𝄞', 'ß', '\u{200d}'].iter().cycle() {
            if s.len() + c.len_utf8() > bytes {
                break;
            }
            s.push(*c);
        }
        while s.len() < bytes {
            s.push('a');
        }
        s
    }

    /// Every record kind at the edges of section 11: text at the length limit in
    /// multi-byte characters, times at both ends of the range in every offset, counts
    /// at `i64::MAX`; one step past each edge is `invalid_value` at the field.
    #[test]
    fn every_kind_at_the_edges() {
        let offsets: Vec<i32> = (-14 * 60..=14 * 60).step_by(30).collect();
        for kind in KINDS.iter().copied() {
            let base = parse_record(kind, &Value::Object(valid_record(kind)), &JsonPath::root());
            assert!(base.is_ok(), "{}: {:?}", kind.name, base.err());
            for f in kind.fields {
                let refused = |v: Value| {
                    let got = parse_with(kind, f.name, v.clone()).map(|_| ()).unwrap_err();
                    assert!(
                        got.iter()
                            .any(|x| x.path() == f.name && x.rule() == Rule::InvalidValue),
                        "{}.{} = {v}: {got:?}",
                        kind.name,
                        f.name
                    );
                };
                match f.ty {
                    RecordType::Text => {
                        let edge = text_of(MAX_TEXT_BYTES);
                        assert_eq!(edge.len(), MAX_TEXT_BYTES);
                        let r = parse_with(kind, f.name, json!(edge)).unwrap();
                        assert_eq!(r.get(f.name), &FieldValue::Text(edge.clone()));
                        refused(json!(text_of(MAX_TEXT_BYTES + 1)));
                        refused(json!(format!("{}\u{0}", "a")));
                    }
                    RecordType::Hour | RecordType::Timestamp => {
                        let last = if f.ty == RecordType::Hour {
                            Timestamp::RECORD_MAX.hour_start()
                        } else {
                            Timestamp::RECORD_MAX
                        };
                        for &off in &offsets {
                            let sign = if off < 0 { '-' } else { '+' };
                            let zone = format!("{sign}{:02}:{:02}", off.abs() / 60, off.abs() % 60);
                            let local = |t: Timestamp| {
                                let s = t.plus_minutes(off).to_rfc3339();
                                format!("{}{zone}", s.trim_end_matches('Z'))
                            };
                            for t in [Timestamp::MIN, last] {
                                if t.plus_minutes(off).date() > Date::MAX {
                                    continue; // not writable in RFC 3339 (year 10000)
                                }
                                let no_cycle = (f.name == "billing_cycle_start" && t == last)
                                    || (f.name == "billing_cycle_end" && t == Timestamp::MIN);
                                if no_cycle {
                                    continue; // an end must follow the start
                                }
                                let r = parse_with(kind, f.name, json!(local(t))).unwrap();
                                assert_eq!(r.get(f.name), &FieldValue::Time(t), "{}", local(t));
                            }
                            let step = if f.ty == RecordType::Hour { 60 } else { 0 };
                            let past = Timestamp(last.0 + 1).plus_minutes(step);
                            let before = Timestamp(Timestamp::MIN.0 - 1).plus_minutes(-step);
                            for t in [past, before] {
                                if t.plus_minutes(off).date() <= Date::MAX {
                                    refused(json!(local(t)));
                                }
                            }
                        }
                        refused(json!("9999-12-31T23:00:00-14:00"));
                        refused(json!("1969-12-31T23:00:00Z"));
                    }
                    RecordType::Day => {
                        for (d, s) in [(Date::MIN, "1970-01-01"), (Date::MAX, "9999-12-31")] {
                            let r = parse_with(kind, f.name, json!(s)).unwrap();
                            assert_eq!(r.get(f.name), &FieldValue::Day(d));
                        }
                        refused(json!("1969-12-31"));
                        refused(json!("10000-01-01"));
                    }
                    RecordType::Count => {
                        for (v, n) in [(json!(i64::MAX), i64::MAX), (json!("-0"), 0), (json!(0), 0)]
                        {
                            let r = parse_with(kind, f.name, v).unwrap();
                            assert_eq!(r.get(f.name), &FieldValue::Count(n));
                        }
                        let minus_zero: Value = crate::wire::decode::parse_json(b"-0").unwrap();
                        let r = parse_with(kind, f.name, minus_zero).unwrap();
                        assert_eq!(r.get(f.name), &FieldValue::Count(0));
                        refused(json!("9223372036854775808"));
                        refused(json!(-1));
                    }
                    RecordType::GroupIds => {
                        let edge = text_of(MAX_TEXT_BYTES);
                        let r = parse_with(kind, f.name, json!([edge.clone()])).unwrap();
                        assert_eq!(r.get(f.name), &FieldValue::Groups(vec![edge]));
                        refused(json!([text_of(MAX_TEXT_BYTES + 1)]));
                    }
                    RecordType::Bool | RecordType::Enum(_) => {}
                }
            }
        }
    }

    fn paths(r: Result<Record, Vec<Violation>>) -> Vec<(String, &'static str)> {
        r.unwrap_err()
            .iter()
            .map(|v| (v.path(), v.rule().as_str()))
            .collect()
    }

    #[test]
    fn autocomplete_record() {
        let r = parse_record(
            &AUTOCOMPLETE,
            &json!({"api_key":"k","hour":"2025-05-01T13:30:00+05:30","language":"PYTHON","ide":"vscode","version":"1.2.0",
                    "num_acceptances":"5","num_lines_accepted":6,"num_bytes_accepted":7}),
            &JsonPath::root(),
        )
        .unwrap();
        assert_eq!(r.time().unwrap().to_rfc3339(), "2025-05-01T08:00:00Z");
        assert_eq!(r.count("num_acceptances"), 5);
    }

    #[test]
    fn absent_optional_fields_read_as_absent() {
        let r = parse_record(
            &USERS,
            &json!({"email": "a@x", "name": "A", "api_key": "k"}),
            &JsonPath::root(),
        )
        .unwrap();
        assert_eq!(r.get("signup_time"), &FieldValue::Absent);
        assert_eq!(r.text("team_status"), "");
        assert_eq!(r.text("api_key"), "k");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "`num_acceptance` is not a field of autocomplete records")]
    fn misspelled_field_names_are_bugs() {
        let r = parse_record(
            &AUTOCOMPLETE,
            &json!({"api_key":"k","hour":"2025-05-01T13:00:00Z","language":"P","ide":"v","version":"1",
                    "num_acceptances":5,"num_lines_accepted":6,"num_bytes_accepted":7}),
            &JsonPath::root(),
        )
        .unwrap();
        r.count("num_acceptance");
    }

    #[test]
    fn record_violations() {
        let at = JsonPath::root().key("records", 2).index(3);
        let got = paths(parse_record(
            &AUTOCOMPLETE,
            &json!({"api_key":"","hour":"2025-05-01T13:30:00Z","language":"PYTHON","ide":5,"version":"1",
                    "num_acceptances":-1,"num_lines_accepted":1.5,"bogus":1}),
            &at,
        ));
        assert_eq!(
            got,
            [
                ("records[3].bogus".to_string(), "unknown_field"),
                ("records[3].api_key".to_string(), "missing_field"),
                ("records[3].hour".to_string(), "invalid_value"),
                ("records[3].ide".to_string(), "invalid_value"),
                ("records[3].num_acceptances".to_string(), "invalid_value"),
                ("records[3].num_lines_accepted".to_string(), "invalid_value"),
                ("records[3].num_bytes_accepted".to_string(), "missing_field"),
            ]
        );
    }

    #[test]
    fn event_id_is_hash_of_canonical_json() {
        let body = json!({"api_key":"k","timestamp":"2025-05-01T13:00:00.500+00:00","ide_type":"editor","model":"m",
                          "mode":"UNKNOWN","messages_sent":"3","agent_id":"a","prompts_used":100});
        let r = parse_record(&AGENT_RUNS, &body, &JsonPath::root()).unwrap();
        let canon = r.canonical_json();
        assert_eq!(
            canon,
            r#"{"agent_id":"a","api_key":"k","ide_type":"editor","messages_sent":3,"mode":"UNKNOWN","model":"m","prompts_used":100,"timestamp":"2025-05-01T13:00:00.5Z"}"#
        );
        assert_eq!(r.text("id"), sha256_hex(&canon));
        assert_eq!(r.text("id").len(), 64);
        // The same event with the integer as a number hashes the same.
        let mut body2 = body.clone();
        body2["messages_sent"] = json!(3);
        assert_eq!(
            parse_record(&AGENT_RUNS, &body2, &JsonPath::root())
                .unwrap()
                .text("id"),
            r.text("id")
        );
    }

    #[test]
    fn explicit_id_is_kept() {
        let r = parse_record(
            &CHAT,
            &json!({"id":"e1","api_key":"k","timestamp":"2025-05-01T13:00:00Z","model_id":"m","ide":"i","version":"1",
                    "latest_intent_type":"CHAT_INTENT_GENERIC","num_chats_received":1,"chat_accepted":true,
                    "chat_inserted_at_cursor":false,"chat_applied":false,"chat_loc_used":0}),
            &JsonPath::root(),
        )
        .unwrap();
        assert_eq!(r.text("id"), "e1");
        assert_eq!(r.identity(), "2:e1");
    }

    #[test]
    fn camel_case_record_fields_are_read_too() {
        let snake = json!({"api_key":"k","hour":"2025-05-01T13:00:00Z","language":"GO","ide":"vscode","version":"1",
                           "num_acceptances":1,"num_lines_accepted":2,"num_bytes_accepted":3});
        let camel = json!({"apiKey":"k","hour":"2025-05-01T13:00:00Z","language":"GO","ide":"vscode","version":"1",
                           "numAcceptances":1,"numLinesAccepted":2,"numBytesAccepted":3});
        let a = parse_record(&AUTOCOMPLETE, &snake, &JsonPath::root()).unwrap();
        assert_eq!(
            parse_record(&AUTOCOMPLETE, &camel, &JsonPath::root()).unwrap(),
            a
        );
        let mut both = snake.clone();
        both["apiKey"] = json!("other");
        assert_eq!(
            paths(parse_record(&AUTOCOMPLETE, &both, &JsonPath::root())),
            [("api_key".to_string(), "conflicting_fields")]
        );
        // Event ids hash snake_case keys whatever the spelling sent.
        let run = |v: serde_json::Value| {
            parse_record(&AGENT_RUNS, &v, &JsonPath::root())
                .unwrap()
                .text("id")
                .to_string()
        };
        assert_eq!(
            run(
                json!({"api_key":"k","timestamp":"2025-05-01T13:00:00Z","ide_type":"editor","model":"m","mode":"UNKNOWN",
                       "messages_sent":1,"agent_id":"a","prompts_used":0})
            ),
            run(
                json!({"apiKey":"k","timestamp":"2025-05-01T13:00:00Z","ideType":"editor","model":"m","mode":"UNKNOWN",
                       "messagesSent":1,"agentId":"a","promptsUsed":0})
            )
        );
    }

    #[test]
    fn a_billing_cycle_must_end_after_it_starts() {
        let r = parse_record(
            &crate::schema::records::BILLING,
            &json!({"billing_cycle_start":"2026-11-10T00:00:00Z","billing_cycle_end":"2026-11-01T00:00:00Z"}),
            &JsonPath::root(),
        );
        assert_eq!(
            paths(r),
            [("billing_cycle_end".to_string(), "invalid_value")]
        );
    }

    #[test]
    fn text_may_not_hold_nul() {
        let got = paths(parse_record(
            &USERS,
            &json!({"email":"a\0b","name":"A","api_key":"k","groups":["g\0"]}),
            &JsonPath::root(),
        ));
        assert_eq!(
            got,
            [
                ("email".to_string(), "invalid_value"),
                ("groups".to_string(), "invalid_value")
            ]
        );
    }

    #[test]
    fn users_defaults_and_enums() {
        let r = parse_record(
            &USERS,
            &json!({"email":"a@b","name":"A","api_key":"k"}),
            &JsonPath::root(),
        )
        .unwrap();
        assert_eq!(r.get("team_status"), &FieldValue::Absent);
        let got = paths(parse_record(
            &USERS,
            &json!({"email":"a@b","name":"A","api_key":"k","team_status":"APPROVED","groups":["g",""]}),
            &JsonPath::root(),
        ));
        assert_eq!(
            got,
            [
                ("team_status".to_string(), "unknown_enum_value"),
                ("groups".to_string(), "invalid_value")
            ]
        );
    }

    #[test]
    fn ingest_reports_kind_and_first_twenty_bad_records() {
        let req = IngestRequest {
            service_key: None,
            kind: Some("autocomplet".into()),
            records: vec![],
        };
        let e = ingest(&req, &Limits::default()).unwrap_err();
        assert_eq!(e[0].rule(), Rule::UnknownEnumValue);
        assert!(
            e[0].message().contains("did you mean `autocomplete`?"),
            "{}",
            e[0].message()
        );
        let req = IngestRequest {
            service_key: None,
            kind: Some("groups".into()),
            records: vec![json!({}); 25],
        };
        let e = ingest(&req, &Limits::default()).unwrap_err();
        assert_eq!(e.len(), 40);
        assert_eq!(e.last().unwrap().path(), "records[19].group_name");
        let req = IngestRequest {
            service_key: None,
            kind: Some("groups".into()),
            records: vec![],
        };
        assert_eq!(ingest(&req, &Limits::default()).unwrap().records.len(), 0);
    }

    /// An Ingest body through the decoder and the validator, as the server reads it.
    fn ingest_body(body: &str) -> Violations {
        let d = crate::wire::decode::decode::<IngestRequest>(body.as_bytes()).expect("kinds");
        crate::validate::with_decoded(&d, |r, _| ingest(r, &Limits::default()))
            .expect_err("violations")
    }

    #[test]
    fn ingest_keeps_the_first_hundred_violations_of_the_first_twenty_bad_records() {
        // 9,000 empty autocomplete records miss 8 fields each: the first 20 bad records
        // make 160 violations, the first 100 in document order kept.
        let body = format!(
            r#"{{"kind": "autocomplete", "records": [{}]}}"#,
            vec!["{}"; 9_000].join(",")
        );
        let e = ingest_body(&body);
        assert_eq!(e.total(), 20 * 8);
        assert_eq!(e.len(), 100);
        assert_eq!(e[0].path(), "records[0].api_key");
        assert_eq!(e[99].path(), "records[12].ide");
        assert!(e.iter().all(|v| v.rule() == Rule::MissingField));

        // One record with 100,000 unknown fields: its missing fields come first in
        // document order, then the unknown ones in body order; every one counted.
        let keys: Vec<String> = (0..100_000).map(|i| format!(r#""k{i}":1"#)).collect();
        let body = format!(
            r#"{{"kind": "autocomplete", "records": [{{{}}}]}}"#,
            keys.join(",")
        );
        let e = ingest_body(&body);
        assert_eq!(e.total(), 100_000 + 8);
        assert_eq!(e.len(), 100);
        assert_eq!(e[7].path(), "records[0].num_bytes_accepted");
        assert_eq!(e[8].path(), "records[0].k0");
        assert_eq!(e[99].path(), "records[0].k91");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]

        /// The import's text path answers exactly like `parse_record` of the parsed text:
        /// generated records, and the same with a field dropped, an unknown or camelCase
        /// key, a value of another JSON type, or a key given twice.
        #[test]
        fn the_text_path_answers_like_the_tree(
            data in crate::testing::data::arb_dataset(crate::testing::Pool::default()),
            pick in proptest::prelude::any::<usize>(),
            change in 0usize..7,
            other in proptest::prop_oneof![
                proptest::prelude::Just(json!(null)), proptest::prelude::Just(json!(-1)),
                proptest::prelude::Just(json!("")), proptest::prelude::Just(json!("x\u{0}y")),
                proptest::prelude::Just(json!([1])), proptest::prelude::Just(json!({"a": 1})),
                proptest::prelude::Just(json!(true)), proptest::prelude::Just(json!(1.5)),
                proptest::prelude::Just(json!("2025-05-01T10:00:00Z")),
            ],
        ) {
            let all: Vec<(&'static RecordKind, &Value)> = data
                .batches
                .iter()
                .flat_map(|(k, recs)| recs.iter().map(move |r| (*k, r)))
                .collect();
            proptest::prop_assume!(!all.is_empty());
            let (kind, rec) = all[pick % all.len()];
            let mut obj = rec.as_object().cloned().unwrap_or_default();
            let was_empty = obj.is_empty();
            let key = obj.keys().nth(pick % obj.len().max(1)).cloned().unwrap_or_default();
            let mut text = match change {
                0 => Value::Object(obj).to_string(),
                1 => {
                    obj.remove(&key);
                    Value::Object(obj).to_string()
                }
                2 => {
                    obj.insert("bogus_field".into(), other);
                    Value::Object(obj).to_string()
                }
                3 => {
                    let v = obj.remove(&key).unwrap_or(other);
                    obj.insert(crate::wire::decode::camel(&key), v);
                    Value::Object(obj).to_string()
                }
                4 => {
                    obj.insert(key, other);
                    Value::Object(obj).to_string()
                }
                5 => other.to_string(),
                _ => {
                    let t = Value::Object(obj.clone()).to_string();
                    format!("{},\"{key}\":{other}}}", &t[..t.len() - 1])
                }
            };
            if change == 6 && was_empty {
                text = "{}".into();
            }
            let tree = serde_json::from_str::<Value>(&text)
                .map(|v| parse_record(kind, &v, &JsonPath::root()))
                .map_err(|e| e.to_string());
            match parse_record_text(kind, &text, &JsonPath::root()) {
                Some(fast) => proptest::prop_assert_eq!(Ok(fast), tree, "{}", text),
                None => proptest::prop_assert!(
                    change >= 5 || tree.is_err(),
                    "the text path declined {}", text
                ),
            }
        }
    }
}
