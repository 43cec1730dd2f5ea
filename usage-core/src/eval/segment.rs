//! Segments: a team's records of one kind as bytes at rest, in the evaluator's own
//! columnar form, so that a durable store opens a team by copying columns instead of
//! parsing one JSON row per record.
//!
//! A segment is
//!
//! ```text
//! "USEG" | format: u16 | kind: u8 length + name | body | crc32 of all before: u32
//! ```
//!
//! (integers little-endian). The body of a usage kind ([`records::USAGE`]) is its rows
//! (`u64`) and one entry per field of the kind, in its order: the field's name, the unit of
//! a time column (`i64`), the width of the packed values (`u8`: 1, 2, 4 or 8 bytes), the
//! dictionary of a text or enum column (count, then each value's length and bytes), the
//! bitmap of absent values (words, then each `u64`) and the values, LZ4-compressed; a time
//! column's values are stored as differences from the row before, which the rows' time
//! order turns into runs of small numbers. The body of `users` and `groups` is their
//! records as one LZ4-compressed JSON array (a few thousand records at most, with the
//! `groups` lists that columns do not hold).
//!
//! Reading one back checks the checksum first, then every value against the rules a
//! record passes when it is ingested (text length and U+0000, time range and whole hours,
//! counts >= 0, enum identifiers, dictionary codes), column by column: a segment that
//! fails is refused whole with a [`SegmentError`], never half-applied and never a panic.
//! [`FORMAT`] is the version written; a reader refuses a version it does not know.

use super::TeamData;
use super::store::{Column, Dict, Packed, Table};
use crate::error::JsonPath;
use crate::load::{Batch, MAX_TEXT_BYTES, Record, parse_record};
use crate::schema::records::{self, RecordKind, RecordType};
use crate::time::{MICROS_PER_HOUR, Timestamp};

/// The segment format this version writes and reads.
pub const FORMAT: u16 = 1;

const MAGIC: &[u8; 4] = b"USEG";

/// Why stored bytes are no segment this version can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SegmentError {
    /// The bytes were changed since they were written (or were never a segment).
    #[error("the segment's checksum does not match its bytes")]
    Checksum,
    /// A format this version does not read (written by a newer version).
    #[error("segment format {0} is not known to this version (it reads format {FORMAT})")]
    Format(u16),
    /// The checksum matches but the content breaks a rule: a bug of the writer or a hand
    /// edit that also fixed the checksum.
    #[error("the segment is malformed: {0}")]
    Malformed(String),
}

fn bad(msg: impl Into<String>) -> SegmentError {
    SegmentError::Malformed(msg.into())
}

/// Little-endian writing into a growing buffer.
struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, x: u8) {
        self.0.push(x);
    }
    fn u16(&mut self, x: u16) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn u32(&mut self, x: u32) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn name(&mut self, s: &str) {
        let b = s.as_bytes();
        self.u8(u8::try_from(b.len()).expect("field and kind names are short"));
        self.0.extend_from_slice(b);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn compressed(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.bytes(&lz4_flex::block::compress(b));
    }
}

/// Bounds-checked little-endian reading.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SegmentError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| bad("it ends early"))?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], SegmentError> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }
    fn u8(&mut self) -> Result<u8, SegmentError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, SegmentError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, SegmentError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, SegmentError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn len(&mut self) -> Result<usize, SegmentError> {
        usize::try_from(self.u64()?).map_err(|_| bad("a length is out of range"))
    }
    fn name(&mut self) -> Result<&'a str, SegmentError> {
        let n = self.u8()? as usize;
        std::str::from_utf8(self.take(n)?).map_err(|_| bad("a name is not UTF-8"))
    }
    fn bytes(&mut self) -> Result<&'a [u8], SegmentError> {
        let n = self.len()?;
        self.take(n)
    }
    fn compressed(&mut self) -> Result<Vec<u8>, SegmentError> {
        let n = self.len()?;
        let packed = self.bytes()?;
        // LZ4 expands at most 255-fold: a larger length is a lie, not an allocation to try.
        if n / 255 > packed.len() + 16 {
            return Err(bad("a compressed block claims an impossible size"));
        }
        let out = lz4_flex::block::decompress(packed, n)
            .map_err(|e| bad(format!("a compressed block does not decompress: {e}")))?;
        if out.len() != n {
            return Err(bad("a compressed block has the wrong size"));
        }
        Ok(out)
    }
}

fn envelope(kind: &RecordKind, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    w.0.extend_from_slice(MAGIC);
    w.u16(FORMAT);
    w.name(kind.name);
    body(&mut w);
    let crc = crc32fast::hash(&w.0);
    w.u32(crc);
    w.0
}

/// Checks the envelope; returns the kind and a reader of the body.
fn open(bytes: &[u8]) -> Result<(&'static RecordKind, Reader<'_>), SegmentError> {
    if bytes.len() < MAGIC.len() + 2 + 4 || &bytes[..4] != MAGIC {
        return Err(SegmentError::Checksum);
    }
    let (content, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(content).to_le_bytes() != crc {
        return Err(SegmentError::Checksum);
    }
    let mut r = Reader {
        bytes: content,
        at: 4,
    };
    let format = r.u16()?;
    if format != FORMAT {
        return Err(SegmentError::Format(format));
    }
    let name = r.name()?;
    let kind = TeamData::segment_kinds()
        .find(|k| k.name == name)
        .ok_or_else(|| bad(format!("`{name}` is no kind of team data")))?;
    Ok((kind, r))
}

/// Packed values as little-endian bytes, time columns as differences from the row before.
fn values_bytes(p: &Packed, delta: bool) -> (u8, Vec<u8>) {
    macro_rules! put {
        ($v:expr, $t:ty) => {{
            let mut out = Vec::with_capacity($v.len() * size_of::<$t>());
            let mut prev: $t = 0;
            for &x in $v.iter() {
                let y = if delta { x.wrapping_sub(prev) } else { x };
                prev = x;
                out.extend_from_slice(&y.to_le_bytes());
            }
            out
        }};
    }
    match p {
        Packed::U8(v) => (1, put!(v, u8)),
        Packed::U16(v) => (2, put!(v, u16)),
        Packed::U32(v) => (4, put!(v, u32)),
        Packed::I64(v) => (8, put!(v, i64)),
    }
}

/// The inverse of [`values_bytes`].
fn packed_from(width: u8, bytes: &[u8], rows: usize, delta: bool) -> Result<Packed, SegmentError> {
    macro_rules! get {
        ($t:ty, $variant:ident) => {{
            const W: usize = size_of::<$t>();
            if bytes.len() != rows.checked_mul(W).ok_or_else(|| bad("too many rows"))? {
                return Err(bad("a column's values do not match its rows"));
            }
            let mut prev: $t = 0;
            let v: Vec<$t> = bytes
                .chunks_exact(W)
                .map(|c| {
                    let y = <$t>::from_le_bytes(c.try_into().expect("chunks of W"));
                    let x = if delta { prev.wrapping_add(y) } else { y };
                    prev = x;
                    x
                })
                .collect();
            Packed::$variant(v)
        }};
    }
    Ok(match width {
        1 => get!(u8, U8),
        2 => get!(u16, U16),
        4 => get!(u32, U32),
        8 => get!(i64, I64),
        w => return Err(bad(format!("unknown value width {w}"))),
    })
}

fn encode_table(t: &Table) -> Vec<u8> {
    envelope(t.kind, |w| {
        w.u64(t.len() as u64);
        w.u16(t.columns.len() as u16);
        for c in &t.columns {
            w.name(c.field.name);
            w.u64(c.unit as u64);
            let (width, values) = values_bytes(&c.data, c.is_time());
            w.u8(width);
            if let Some(d) = &c.dict {
                let mut text = Vec::new();
                for v in d.values() {
                    text.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    text.extend_from_slice(v.as_bytes());
                }
                w.u64(d.values().len() as u64);
                w.compressed(&text);
            }
            let absent = c.absent_words();
            w.u64(absent.len() as u64);
            for &word in absent {
                w.u64(word);
            }
            w.compressed(&values);
        }
    })
}

/// Checks a text value of a record field (the ingest rules) as a segment holds it.
fn check_text(kind: &RecordKind, name: &str, ty: RecordType, s: &str) -> Result<(), SegmentError> {
    let what = |why: &str| bad(format!("a value of {}.{name} {why}", kind.name));
    if s.len() > MAX_TEXT_BYTES {
        return Err(what("is longer than 1024 bytes"));
    }
    if s.contains('\0') {
        return Err(what("contains U+0000"));
    }
    if let RecordType::Enum(ids) = ty
        && !ids.contains(&s)
    {
        return Err(what(&format!("is no identifier of the enum: \"{s}\"")));
    }
    Ok(())
}

fn decode_column(
    kind: &'static RecordKind,
    field: &'static crate::schema::records::RecordField,
    rows: usize,
    r: &mut Reader<'_>,
) -> Result<Column, SegmentError> {
    let name = r.name()?;
    if name != field.name {
        return Err(bad(format!(
            "column `{name}` stands where {}.{} belongs",
            kind.name, field.name
        )));
    }
    let unit = r.u64()? as i64;
    let expected_unit = match field.ty {
        RecordType::Hour => MICROS_PER_HOUR,
        RecordType::Day => crate::time::MICROS_PER_DAY,
        _ => 1,
    };
    if unit != 1 && unit != expected_unit {
        return Err(bad(format!("{}.{name} has unit {unit}", kind.name)));
    }
    let width = r.u8()?;
    let dict = match field.ty {
        RecordType::Text | RecordType::Enum(_) => {
            let count = r.len()?;
            let text = r.compressed()?;
            let mut t = Reader {
                bytes: &text,
                at: 0,
            };
            let mut values = Vec::with_capacity(count.min(text.len() / 4));
            for _ in 0..count {
                let n = t.u32()? as usize;
                let s = std::str::from_utf8(t.take(n)?)
                    .map_err(|_| bad(format!("a value of {}.{name} is not UTF-8", kind.name)))?;
                check_text(kind, name, field.ty, s)?;
                values.push(Box::<str>::from(s));
            }
            if t.at != text.len() {
                return Err(bad(format!(
                    "{}.{name}'s dictionary has bytes after its values",
                    kind.name
                )));
            }
            Some(Dict::from_values(values))
        }
        _ => None,
    };
    let words = r.len()?;
    if words > rows.div_ceil(64) {
        return Err(bad(format!(
            "{}.{name}'s absent bitmap is longer than its rows",
            kind.name
        )));
    }
    let absent = (0..words).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
    let is_time = matches!(
        field.ty,
        RecordType::Hour | RecordType::Timestamp | RecordType::Day
    );
    let data = packed_from(width, &r.compressed()?, rows, is_time)?;
    let column = Column::from_parts(field, data, dict, unit, absent);
    check_values(kind, &column, rows)?;
    Ok(column)
}

/// Every present value of a column against the rules a record passes at ingest.
fn check_values(kind: &RecordKind, c: &Column, rows: usize) -> Result<(), SegmentError> {
    let f = c.field;
    let what = |why: String| bad(format!("{}.{} {why}", kind.name, f.name));
    if f.required && c.absent_words().iter().any(|&w| w != 0) {
        return Err(what("is required but a row has no value".into()));
    }
    let present = (0..rows).filter(|&r| !c.is_absent(r));
    match f.ty {
        RecordType::Text | RecordType::Enum(_) => {
            let n = c.dict.as_ref().map_or(0, |d| d.values().len()) as i64;
            for r in present {
                let code = c.data.get(r);
                if !(0..n).contains(&code) {
                    return Err(what(format!(
                        "row {r} has code {code} of a {n}-value dictionary"
                    )));
                }
                if f.required && c.text(r).is_empty() {
                    return Err(what(format!("is required but row {r} holds \"\"")));
                }
            }
        }
        RecordType::Hour | RecordType::Timestamp | RecordType::Day => {
            for r in present {
                let m = c.data.get(r).checked_mul(c.unit);
                let ok = m.is_some_and(|m| {
                    (Timestamp::MIN.0..=Timestamp::MAX.0).contains(&m)
                        && (f.ty != RecordType::Hour || m % MICROS_PER_HOUR == 0)
                        && (f.ty != RecordType::Day || m % crate::time::MICROS_PER_DAY == 0)
                });
                if !ok {
                    return Err(what(format!("row {r} holds a time out of range")));
                }
            }
        }
        RecordType::Count => {
            if let Packed::I64(v) = &c.data
                && let Some(r) = v.iter().position(|&x| x < 0)
            {
                return Err(what(format!("row {r} holds a negative count")));
            }
        }
        RecordType::Bool => {
            if let Some(r) = (0..rows).find(|&r| !(0..=1).contains(&c.data.get(r))) {
                return Err(what(format!("row {r} holds a boolean other than 0 or 1")));
            }
        }
        RecordType::GroupIds => {}
    }
    Ok(())
}

fn decode_table(kind: &'static RecordKind, mut r: Reader<'_>) -> Result<Table, SegmentError> {
    let rows = r.len()?;
    if u32::try_from(rows).is_err() {
        return Err(bad("more rows than a table holds"));
    }
    let n = r.u16()? as usize;
    if n != kind.fields.len() {
        return Err(bad(format!(
            "{n} columns where {} has {}",
            kind.name,
            kind.fields.len()
        )));
    }
    let columns = kind
        .fields
        .iter()
        .map(|f| decode_column(kind, f, rows, &mut r))
        .collect::<Result<Vec<_>, _>>()?;
    if r.at != r.bytes.len() {
        return Err(bad("bytes after the last column"));
    }
    Ok(Table::from_columns(kind, columns, rows))
}

fn encode_people(kind: &'static RecordKind, records: &[&Record]) -> Vec<u8> {
    envelope(kind, |w| {
        let json = serde_json::Value::Array(
            records
                .iter()
                .map(|r| serde_json::Value::Object(r.to_json()))
                .collect(),
        );
        w.compressed(json.to_string().as_bytes());
    })
}

fn decode_people(
    kind: &'static RecordKind,
    mut r: Reader<'_>,
) -> Result<Vec<Record>, SegmentError> {
    let json = r.compressed()?;
    if r.at != r.bytes.len() {
        return Err(bad("bytes after the records"));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| bad(format!("the records are not JSON: {e}")))?;
    let items = v
        .as_array()
        .ok_or_else(|| bad("the records are no JSON array"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, x)| {
            parse_record(kind, x, &JsonPath::root()).map_err(|e| {
                bad(format!(
                    "record {i} is no valid {} record: {}",
                    kind.name,
                    e.first().map(ToString::to_string).unwrap_or_default()
                ))
            })
        })
        .collect()
}

/// The records of one kind taken in as a segment: a stream of any length is held in
/// columns, not as records, until [`SegmentBuilder::finish`] writes it.
pub struct SegmentBuilder {
    kind: &'static RecordKind,
    content: Content,
}

impl SegmentBuilder {
    /// An empty segment of `kind` (a kind of team data: [`TeamData::segment_kinds`]).
    pub fn new(kind: &'static RecordKind) -> SegmentBuilder {
        let content = if TeamData::table_index(kind).is_some() {
            Content::Table(Table::new(kind))
        } else {
            Content::People(Vec::new())
        };
        SegmentBuilder { kind, content }
    }

    /// Adds a record of the builder's kind: it replaces an earlier one with its identity,
    /// as [`TeamData::apply`] would.
    pub fn push(&mut self, r: Record) {
        debug_assert!(std::ptr::eq(r.kind(), self.kind));
        match &mut self.content {
            Content::Table(t) => t.upsert(&r),
            Content::People(v) => v.push(r),
        }
    }

    /// The rows held (records of one identity count once for usage kinds).
    pub fn rows(&self) -> usize {
        self.content.rows()
    }

    /// Bytes held on the heap by the builder's columns (records of users and groups are
    /// not counted), for a caller that keeps to a memory budget.
    pub fn heap_bytes(&self) -> usize {
        match &self.content {
            Content::Table(t) => t.heap_bytes(),
            Content::People(_) => 0,
        }
    }

    /// The records taken in as a segment ready to install or replay, without writing it:
    /// a store that reads rows from elsewhere (the PostgreSQL store's cache) builds its
    /// columns this way.
    pub fn into_segment(self) -> Segment {
        Segment {
            kind: self.kind,
            content: self.content,
        }
    }

    /// The segment's bytes.
    pub fn finish(self) -> Vec<u8> {
        match &self.content {
            Content::Table(t) => encode_table(t),
            Content::People(v) => encode_people(self.kind, &v.iter().collect::<Vec<_>>()),
        }
    }
}

enum Content {
    Table(Table),
    People(Vec<Record>),
}

impl Content {
    fn rows(&self) -> usize {
        match self {
            Content::Table(t) => t.len(),
            Content::People(v) => v.len(),
        }
    }
}

/// A segment read and checked, ready to be installed in a team's data or replayed onto it.
pub struct Segment {
    kind: &'static RecordKind,
    content: Content,
}

impl Segment {
    /// Reads and checks a segment (see the [module](self) for what is checked).
    ///
    /// # Errors
    /// A [`SegmentError`] when the bytes are not a whole, valid segment of team data.
    pub fn decode(bytes: &[u8]) -> Result<Segment, SegmentError> {
        let (kind, r) = open(bytes)?;
        let content = if TeamData::table_index(kind).is_some() {
            Content::Table(decode_table(kind, r)?)
        } else {
            Content::People(decode_people(kind, r)?)
        };
        Ok(Segment { kind, content })
    }

    /// The kind of its records.
    pub fn kind(&self) -> &'static RecordKind {
        self.kind
    }

    /// How many records it holds.
    pub fn rows(&self) -> usize {
        self.content.rows()
    }

    /// Its records, in row order.
    pub fn into_batch(self) -> Batch {
        let records = match self.content {
            Content::Table(t) => (0..t.len()).map(|row| t.record(row)).collect(),
            Content::People(v) => v,
        };
        Batch {
            kind: self.kind,
            records,
        }
    }
}

/// A batch of records as one segment (a store's log entry).
pub fn encode_batch(batch: &Batch) -> Vec<u8> {
    let mut b = SegmentBuilder::new(batch.kind);
    for r in &batch.records {
        b.push(r.clone());
    }
    b.finish()
}

/// The records of a segment, in row order ([`TeamData::apply`] them to replay it).
///
/// # Errors
/// A [`SegmentError`] when the bytes are not a whole, valid segment of team data.
pub fn decode_batch(bytes: &[u8]) -> Result<Batch, SegmentError> {
    Segment::decode(bytes).map(Segment::into_batch)
}

impl TeamData {
    /// The kinds of team data a segment holds: `users`, `groups` and every usage kind.
    pub fn segment_kinds() -> impl Iterator<Item = &'static RecordKind> {
        [&records::USERS, &records::GROUPS]
            .into_iter()
            .chain(records::USAGE.iter().copied())
    }

    /// The team's records of `kind` as one segment (see the [module](self) for the
    /// format); `None` when the team holds none.
    pub fn segment(&self, kind: &'static RecordKind) -> Option<Vec<u8>> {
        if let Some(i) = TeamData::table_index(kind) {
            let t = &self.tables[i];
            return (t.len() > 0).then(|| encode_table(t));
        }
        let map = match kind.name {
            "users" => &self.users,
            "groups" => &self.groups,
            _ => return None,
        };
        (!map.is_empty()).then(|| encode_people(kind, &map.values().collect::<Vec<_>>()))
    }

    /// Replaces the team's records of the segment's kind with the segment's. The columns
    /// are taken as they are: no record is made and no identity hashed until the kind is
    /// next written.
    pub fn install(&mut self, seg: Segment) {
        match seg.content {
            Content::Table(t) => {
                let i = TeamData::table_index(seg.kind).expect("a table's kind is a usage kind");
                self.tables[i] = t;
                self.table_changed(i);
            }
            Content::People(records) => {
                match seg.kind.name {
                    "users" => self.users.clear(),
                    _ => self.groups.clear(),
                }
                self.apply(&Batch {
                    kind: seg.kind,
                    records,
                });
            }
        }
    }

    /// Applies a segment's records as a batch (a store's log entry replayed). Onto a kind
    /// the team holds nothing of, the segment's columns are installed as they are, which
    /// is the same and costs no record at all.
    pub fn replay(&mut self, seg: Segment) {
        if self.len(seg.kind) == 0 && TeamData::table_index(seg.kind).is_some() {
            return self.install(seg);
        }
        self.apply(&seg.into_batch());
    }

    /// Replaces the team's records of a segment's kind with the segment's; returns the
    /// kind.
    ///
    /// # Errors
    /// A [`SegmentError`] (the team's data is then unchanged).
    pub fn load_segment(&mut self, bytes: &[u8]) -> Result<&'static RecordKind, SegmentError> {
        let seg = Segment::decode(bytes)?;
        let kind = seg.kind;
        self.install(seg);
        Ok(kind)
    }
}

#[cfg(test)]
mod tests;
