//! The columnar store: one [`Table`] per record kind of usage data.
//!
//! A table keeps one [`Column`] per field of its [`RecordKind`], in the kind's field order,
//! every column a vector of integers at the narrowest width that holds its values so far
//! ([`Packed`]):
//! - text and enum fields: codes into the column's own dictionary ([`Dict`]);
//! - times: integers in the column's unit (hours for `hour`, days for `day`, microseconds
//!   for `timestamp`; a column falls back to microseconds if a value is not a whole unit);
//! - counts: the counts; booleans: 0 or 1.
//!
//! Optional fields that were not given are marked in a bitmap, so that a stored record reads
//! back exactly as it was applied. An identity index ([`Slots`]: row numbers by a hash of
//! the identity columns, times hashed in microseconds so that a change of unit keeps it
//! valid) finds the row a record replaces (contract section 8): a replaced record is
//! overwritten in place, a new one appended; nothing is rebuilt but the index's slots
//! when it doubles.

use foldhash::fast::RandomState;
use std::hash::{BuildHasher, Hasher};

use crate::load::{FieldValue, Record};
use crate::schema::records::{FieldHandle, RecordField, RecordKind, RecordType};
use crate::time::{Date, MICROS_PER_DAY, MICROS_PER_HOUR, Timestamp};

/// Integers at the narrowest width that holds every value stored so far: counts, dictionary
/// codes and times all fit one of these; a wider value widens the whole vector once.
#[derive(Debug, Clone)]
pub(crate) enum Packed {
    /// Values in `0..=255`.
    U8(Vec<u8>),
    /// Values in `0..=65_535`.
    U16(Vec<u16>),
    /// Values in `0..=u32::MAX`.
    U32(Vec<u32>),
    /// Any value.
    I64(Vec<i64>),
}

/// An integer of one of the widths of [`Packed`].
pub(crate) trait Lane: Copy {
    /// The value as an `i64`.
    fn wide(self) -> i64;
}

macro_rules! lane {
    ($($t:ty),*) => {$(
        impl Lane for $t {
            #[inline]
            fn wide(self) -> i64 {
                i64::from(self)
            }
        }
    )*};
}
lane!(u8, u16, u32);

impl Lane for i64 {
    #[inline]
    fn wide(self) -> i64 {
        self
    }
}

/// Runs `$body` with `$v` bound to the slice of whichever width `$p` has: the one place
/// where the evaluator's loops are specialised per width.
macro_rules! with_packed {
    ($p:expr, $v:ident => $body:expr) => {
        match $p {
            $crate::eval::store::Packed::U8($v) => $body,
            $crate::eval::store::Packed::U16($v) => $body,
            $crate::eval::store::Packed::U32($v) => $body,
            $crate::eval::store::Packed::I64($v) => $body,
        }
    };
}
pub(crate) use with_packed;

impl Default for Packed {
    fn default() -> Packed {
        Packed::U8(Vec::new())
    }
}

impl Packed {
    #[inline]
    fn width_of(v: i64) -> u8 {
        if v < 0 || v > i64::from(u32::MAX) {
            3
        } else if v > i64::from(u16::MAX) {
            2
        } else if v > i64::from(u8::MAX) {
            1
        } else {
            0
        }
    }

    #[inline]
    fn width(&self) -> u8 {
        match self {
            Packed::U8(_) => 0,
            Packed::U16(_) => 1,
            Packed::U32(_) => 2,
            Packed::I64(_) => 3,
        }
    }

    /// Converts to the wider width `w`.
    #[cold]
    fn widen(&mut self, w: u8) {
        let old = std::mem::take(self);
        *self = with_packed!(&old, v => {
            let it = v.iter().map(|&x| x.wide());
            match w {
                1 => Packed::U16(it.map(|x| x as u16).collect()),
                2 => Packed::U32(it.map(|x| x as u32).collect()),
                _ => Packed::I64(it.collect()),
            }
        });
    }

    /// The number of values.
    pub(crate) fn len(&self) -> usize {
        with_packed!(self, v => v.len())
    }

    /// The value at `i`.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> i64 {
        with_packed!(self, v => v[i].wide())
    }

    /// Appends a value.
    #[inline]
    pub(crate) fn push(&mut self, x: i64) {
        let w = Packed::width_of(x);
        if w > self.width() {
            self.widen(w);
        }
        match self {
            Packed::U8(v) => v.push(x as u8),
            Packed::U16(v) => v.push(x as u16),
            Packed::U32(v) => v.push(x as u32),
            Packed::I64(v) => v.push(x),
        }
    }

    /// Overwrites the value at `i`.
    pub(crate) fn set(&mut self, i: usize, x: i64) {
        let w = Packed::width_of(x);
        if w > self.width() {
            self.widen(w);
        }
        match self {
            Packed::U8(v) => v[i] = x as u8,
            Packed::U16(v) => v[i] = x as u16,
            Packed::U32(v) => v[i] = x as u32,
            Packed::I64(v) => v[i] = x,
        }
    }

    /// Bytes held on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        with_packed!(self, v => v.capacity() * std::mem::size_of_val(&v.first().copied().unwrap_or_default()))
    }
}

/// An open-addressing hash table of the entries `0..len` (row numbers or dictionary
/// codes) whose keys live elsewhere: callers give the hash of a key and how to compare an
/// entry with it. A slot holds an entry with the low 32 bits of its hash, so a probe is
/// one memory access and reads the key only when those bits match, and growing moves the
/// slots without hashing any key again (linear probing, at most 7/8 full).
#[derive(Debug, Clone, Default)]
pub(crate) struct Slots {
    /// 0 for an empty slot, else `hash << 32 | (entry + 1)`.
    slots: Vec<u64>,
    len: u32,
}

impl Slots {
    /// The entry whose key `eq` accepts, among those with this hash.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let h = hash as u32;
        let mut i = h as usize & mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            let entry = (s as u32).wrapping_sub(1);
            if (s >> 32) as u32 == h && eq(entry) {
                return Some(entry);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds the next entry, `len`, whose key (of this hash) is not in the table.
    pub(crate) fn insert_next(&mut self, hash: u64) -> u32 {
        let entry = self.len;
        assert!(entry < u32::MAX - 1, "fewer than 2^32 - 2 entries");
        if (entry as usize + 1) * 8 > self.slots.len() * 7 {
            let cap = (self.slots.len() * 2).max(16);
            let old = std::mem::replace(&mut self.slots, vec![0; cap]);
            for s in old.into_iter().filter(|&s| s != 0) {
                self.place(s);
            }
        }
        self.place((hash & 0xFFFF_FFFF) << 32 | u64::from(entry + 1));
        self.len += 1;
        entry
    }

    fn place(&mut self, slot: u64) {
        let mask = self.slots.len() - 1;
        let mut i = (slot >> 32) as usize & mask;
        while self.slots[i] != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
    }

    fn heap_bytes(&self) -> usize {
        self.slots.capacity() * 8
    }
}

/// The distinct values of one text column; a value's code is its position.
#[derive(Debug, Clone, Default)]
pub(crate) struct Dict {
    values: Vec<Box<str>>,
    slots: Slots,
    state: RandomState,
}

impl Dict {
    /// A dictionary of these values (codes by position), as a segment holds it; the hash
    /// slots are built on the first [`Dict::intern`].
    pub(crate) fn from_values(values: Vec<Box<str>>) -> Dict {
        Dict {
            values,
            slots: Slots::default(),
            state: RandomState::default(),
        }
    }

    /// The code of `s`, adding it if new.
    pub(crate) fn intern(&mut self, s: &str) -> u32 {
        if self.slots.len as usize != self.values.len() {
            self.build_slots();
        }
        let h = self.state.hash_one(s);
        let values = &self.values;
        if let Some(c) = self.slots.find(h, |c| &*values[c as usize] == s) {
            return c;
        }
        self.values.push(s.into());
        self.slots.insert_next(h)
    }

    /// Hashes every value into fresh slots (a dictionary read from a segment).
    #[cold]
    fn build_slots(&mut self) {
        let mut slots = Slots::default();
        for v in &self.values {
            slots.insert_next(self.state.hash_one(&**v));
        }
        self.slots = slots;
    }

    /// The value of a code.
    #[inline]
    pub(crate) fn value(&self, code: i64) -> &str {
        &self.values[code as usize]
    }

    /// The values, by code.
    pub(crate) fn values(&self) -> &[Box<str>] {
        &self.values
    }

    fn heap_bytes(&self) -> usize {
        self.values.capacity() * std::mem::size_of::<Box<str>>()
            + self.values.iter().map(|s| s.len()).sum::<usize>()
            + self.slots.heap_bytes()
    }
}

/// One field of a table.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    /// The record field stored here.
    pub(crate) field: &'static RecordField,
    /// The values: codes, time units, counts, 0/1.
    pub(crate) data: Packed,
    /// The dictionary of a text or enum field.
    pub(crate) dict: Option<Dict>,
    /// Microseconds per stored unit of a time field (1 for other fields).
    pub(crate) unit: i64,
    /// Rows whose (optional) value was not given, as a bitmap; empty while there is none.
    absent: Vec<u64>,
}

impl Column {
    fn new(field: &'static RecordField) -> Column {
        let (dict, unit) = match field.ty {
            RecordType::Text | RecordType::Enum(_) => (Some(Dict::default()), 1),
            RecordType::Hour => (None, MICROS_PER_HOUR),
            RecordType::Day => (None, MICROS_PER_DAY),
            _ => (None, 1),
        };
        Column {
            field,
            data: Packed::default(),
            dict,
            unit,
            absent: Vec::new(),
        }
    }

    /// A column of these parts, as a segment holds them.
    pub(crate) fn from_parts(
        field: &'static RecordField,
        data: Packed,
        dict: Option<Dict>,
        unit: i64,
        absent: Vec<u64>,
    ) -> Column {
        Column {
            field,
            data,
            dict,
            unit,
            absent,
        }
    }

    /// The bitmap of the rows whose value was not given (may be shorter than the rows).
    pub(crate) fn absent_words(&self) -> &[u64] {
        &self.absent
    }

    /// Whether a time column's values are instants (`hour`, `timestamp`), not days.
    pub(crate) fn is_time(&self) -> bool {
        matches!(
            self.field.ty,
            RecordType::Hour | RecordType::Timestamp | RecordType::Day
        )
    }

    /// The stored integer of a value, or `None` when absent (or of a type this field does
    /// not take, which a parsed record never has).
    fn encode(&mut self, v: &FieldValue) -> Option<i64> {
        let is_time = self.is_time();
        match (v, &mut self.dict) {
            (FieldValue::Text(s), Some(d)) => Some(i64::from(d.intern(s))),
            (FieldValue::Count(n), None) => Some(*n),
            (FieldValue::Bool(b), None) => Some(i64::from(*b)),
            (FieldValue::Time(_) | FieldValue::Day(_), None) if is_time => {
                let t = v.as_time().unwrap_or_default().0;
                if t % self.unit != 0 {
                    self.rescale_to_micros();
                }
                Some(t / self.unit)
            }
            _ => None,
        }
    }

    /// Stores every time in microseconds from now on (a value that is not a whole unit).
    fn rescale_to_micros(&mut self) {
        let unit = self.unit;
        let mut data = Packed::default();
        for i in 0..self.data.len() {
            data.push(self.data.get(i) * unit);
        }
        self.data = data;
        self.unit = 1;
    }

    /// The value at `row` in microseconds, for time columns.
    #[inline]
    pub(crate) fn micros(&self, row: usize) -> i64 {
        self.data.get(row) * self.unit
    }

    /// The text at `row` of a text or enum column (`""` when not given).
    pub(crate) fn text(&self, row: usize) -> &str {
        match &self.dict {
            Some(d) if !self.is_absent(row) => d.value(self.data.get(row)),
            _ => "",
        }
    }

    /// Whether the value at `row` was not given.
    pub(crate) fn is_absent(&self, row: usize) -> bool {
        self.absent
            .get(row / 64)
            .is_some_and(|w| w & (1 << (row % 64)) != 0)
    }

    fn mark_absent(&mut self, row: usize, absent: bool) {
        if !absent && self.absent.len() <= row / 64 {
            return;
        }
        if self.absent.len() <= row / 64 {
            self.absent.resize(row / 64 + 1, 0);
        }
        if absent {
            self.absent[row / 64] |= 1 << (row % 64);
        } else {
            self.absent[row / 64] &= !(1 << (row % 64));
        }
    }

    /// The value at `row` as a record field value.
    fn field_value(&self, row: usize) -> FieldValue {
        if self.is_absent(row) {
            return FieldValue::Absent;
        }
        let x = self.data.get(row);
        match self.field.ty {
            RecordType::Text | RecordType::Enum(_) => {
                FieldValue::Text(self.dict.as_ref().map_or("", |d| d.value(x)).to_string())
            }
            RecordType::Hour | RecordType::Timestamp => FieldValue::Time(Timestamp(x * self.unit)),
            RecordType::Day => {
                FieldValue::Day(Date((x * self.unit).div_euclid(MICROS_PER_DAY) as i32))
            }
            RecordType::Count => FieldValue::Count(x),
            RecordType::Bool => FieldValue::Bool(x != 0),
            RecordType::GroupIds => FieldValue::Absent,
        }
    }

    fn heap_bytes(&self) -> usize {
        self.data.heap_bytes()
            + self.dict.as_ref().map_or(0, Dict::heap_bytes)
            + self.absent.capacity() * 8
    }
}

/// The records of one kind, column by column, one row per identity.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    /// The kind stored.
    pub(crate) kind: &'static RecordKind,
    /// One column per field of the kind, in its order.
    pub(crate) columns: Vec<Column>,
    /// The positions of the identity fields.
    identity: Vec<usize>,
    /// Identity -> row.
    index: Slots,
    state: RandomState,
    rows: usize,
    /// The position of the time field.
    pub(crate) time: Option<usize>,
    /// The smallest and largest time (microseconds) ever stored: bounds of every row's time.
    pub(crate) time_bounds: Option<(i64, i64)>,
    /// The encoded values of the record being applied (kept to avoid an allocation a row).
    scratch: Vec<Option<i64>>,
}

impl Table {
    /// An empty table of `kind`.
    pub(crate) fn new(kind: &'static RecordKind) -> Table {
        let identity = kind
            .identity
            .iter()
            .map(|n| kind.position(n).expect("identity fields are fields"))
            .collect();
        Table {
            kind,
            columns: kind.fields.iter().map(Column::new).collect(),
            identity,
            index: Slots::default(),
            state: RandomState::default(),
            rows: 0,
            time: kind.time.and_then(|t| kind.position(t)),
            time_bounds: None,
            scratch: Vec::new(),
        }
    }

    /// A table of these columns (one per field of `kind`, in its order, each `rows` long),
    /// as a segment holds it. The identity index is built on the first
    /// [`Table::upsert`], so a team that is only read never hashes its identities.
    pub(crate) fn from_columns(
        kind: &'static RecordKind,
        columns: Vec<Column>,
        rows: usize,
    ) -> Table {
        let mut t = Table::new(kind);
        debug_assert_eq!(columns.len(), t.columns.len());
        t.columns = columns;
        t.rows = rows;
        t.time_bounds = t.time_column().and_then(|c| {
            (0..rows).map(|r| c.micros(r)).fold(None, |b, m| match b {
                Some((lo, hi)) => Some((m.min(lo), m.max(hi))),
                None => Some((m, m)),
            })
        });
        t
    }

    /// The number of rows.
    pub(crate) fn len(&self) -> usize {
        self.rows
    }

    /// The hash of a row's identity from its stored values (times in microseconds).
    fn identity_hash(&self, value: impl Fn(usize) -> i64) -> u64 {
        let mut h = self.state.build_hasher();
        for &c in &self.identity {
            h.write_i64(value(c) * self.columns[c].unit);
        }
        h.finish()
    }

    /// Indexes every row by its identity (a table read from a segment).
    #[cold]
    fn build_index(&mut self) {
        let mut index = Slots::default();
        for row in 0..self.rows {
            index.insert_next(self.identity_hash(|c| self.columns[c].data.get(row)));
        }
        self.index = index;
    }

    /// The column of a field, by name: for a field several kinds share (`api_key`), where
    /// the kind is not known until run time.
    pub(crate) fn column(&self, name: &str) -> Option<&Column> {
        self.kind.position(name).map(|i| &self.columns[i])
    }

    /// The column of a field of the table's kind, by its handle (no name is looked up, and
    /// a misspelt field does not compile).
    ///
    /// # Panics
    /// When the handle is of another kind: a bug of the caller.
    pub(crate) fn col(&self, f: FieldHandle) -> &Column {
        assert!(
            std::ptr::eq(f.kind, self.kind),
            "a handle of {} read on a table of {}",
            f.kind.name,
            self.kind.name
        );
        &self.columns[f.index]
    }

    /// The time column.
    pub(crate) fn time_column(&self) -> Option<&Column> {
        self.time.map(|i| &self.columns[i])
    }

    /// Stores a record: it replaces the row with its identity, else it is appended.
    pub(crate) fn upsert(&mut self, rec: &Record) {
        debug_assert!(std::ptr::eq(rec.kind(), self.kind));
        if self.index.len as usize != self.rows {
            self.build_index();
        }
        let mut vals = std::mem::take(&mut self.scratch);
        vals.clear();
        for (col, v) in self.columns.iter_mut().zip(rec.values()) {
            vals.push(col.encode(v));
        }
        let hash = self.identity_hash(|c| vals[c].unwrap_or(0));
        let found = self.index.find(hash, |row| {
            self.identity
                .iter()
                .all(|&c| self.columns[c].data.get(row as usize) == vals[c].unwrap_or(0))
        });
        let row = match found {
            Some(row) => {
                let row = row as usize;
                for (col, v) in self.columns.iter_mut().zip(&vals) {
                    col.data.set(row, v.unwrap_or(0));
                    col.mark_absent(row, v.is_none());
                }
                row
            }
            None => {
                let row = self.index.insert_next(hash) as usize;
                for (col, v) in self.columns.iter_mut().zip(&vals) {
                    col.data.push(v.unwrap_or(0));
                    col.mark_absent(row, v.is_none());
                }
                self.rows += 1;
                row
            }
        };
        if let Some(t) = self.time {
            let m = self.columns[t].micros(row);
            self.time_bounds = Some(match self.time_bounds {
                Some((lo, hi)) => (lo.min(m), hi.max(m)),
                None => (m, m),
            });
        }
        self.scratch = vals;
    }

    /// The record stored at `row`.
    pub(crate) fn record(&self, row: usize) -> Record {
        Record::from_values(
            self.kind,
            self.columns.iter().map(|c| c.field_value(row)).collect(),
        )
    }

    /// Bytes held on the heap by the table.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.columns.iter().map(Column::heap_bytes).sum::<usize>()
            + self.columns.capacity() * std::mem::size_of::<Column>()
            + self.index.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_widens_and_keeps_values() {
        let mut p = Packed::default();
        for x in [1, 300, 70_000, 5_000_000_000, -3] {
            p.push(x);
        }
        assert!(matches!(p, Packed::I64(_)));
        assert_eq!(
            (0..p.len()).map(|i| p.get(i)).collect::<Vec<_>>(),
            [1, 300, 70_000, 5_000_000_000, -3]
        );
        let mut q = Packed::default();
        q.push(7);
        q.set(0, 256);
        assert!(matches!(q, Packed::U16(_)));
        assert_eq!(q.get(0), 256);
    }

    #[test]
    fn dictionary_codes_are_stable() {
        let mut d = Dict::default();
        let codes: Vec<u32> = (0..1000)
            .map(|i| d.intern(&format!("v{}", i % 700)))
            .collect();
        assert_eq!(d.values().len(), 700);
        assert_eq!(codes[3], codes[703]);
        assert_eq!(d.intern("v5"), codes[5]);
        assert_eq!(d.values().len(), 700);
        assert_eq!(d.value(i64::from(codes[42])), "v42");
    }

    #[test]
    fn times_that_are_not_whole_units_fall_back_to_micros() {
        let f: &'static RecordField = &crate::schema::records::AUTOCOMPLETE.fields[1];
        let mut c = Column::new(f);
        assert_eq!(
            c.encode(&FieldValue::Time(Timestamp(2 * MICROS_PER_HOUR))),
            Some(2)
        );
        assert_eq!(c.unit, MICROS_PER_HOUR);
        c.data.push(2);
        assert_eq!(c.encode(&FieldValue::Time(Timestamp(7))), Some(7));
        assert_eq!(c.unit, 1);
        assert_eq!(c.micros(0), 2 * MICROS_PER_HOUR);
    }
}
