//! Selection primitives of the columnar store: which rows of a [`Table`](super::store::Table)
//! a query or a statistic reads.
//!
//! A filter is compiled once per column into a [`Pred`]: on a dictionary column a
//! pass/fail flag per code ([`text_pred`]), on a count or a time a [`RangeSet`] of stored
//! values (a monotone key of the stored value, such as a date of an hour, is a range too:
//! [`key_range`]; the rows of a [`TimeRange`] are [`time_range_pred`]). [`select`]
//! intersects the range predicates of one column, then narrows a selection ([`Sel`]) by
//! each remaining predicate. [`scan`] reads a column over a selection. Custom queries
//! (`columnar`) and user and agent statistics (`stats`) both select rows this way;
//! [`Bitmap`] is the set of small integers both count distinct pairs with.

use super::store::{Column, Lane, Packed, with_packed};
use crate::plan::{FilterTest, FilterValue, TimeRange};
use crate::schema::{Expr, FieldRef, FilterOp};
use crate::time::MICROS_PER_DAY;
use crate::zone::{LocalZone, MAX_OFFSET_MICROS, Zone};

/// The rows a query reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sel {
    /// Rows `0..n`.
    All(usize),
    /// These rows, ascending.
    Rows(Vec<u32>),
}

impl Sel {
    /// The number of rows.
    pub(crate) fn len(&self) -> usize {
        match self {
            Sel::All(n) => *n,
            Sel::Rows(r) => r.len(),
        }
    }

    /// The `k`-th row.
    #[inline]
    pub(crate) fn row(&self, k: usize) -> usize {
        match self {
            Sel::All(_) => k,
            Sel::Rows(r) => r[k] as usize,
        }
    }
}

/// Calls `f(k, value)` with the value in `data` of the `k`-th selected row, for every `k`.
#[inline]
pub(crate) fn scan(data: &Packed, sel: &Sel, mut f: impl FnMut(usize, i64)) {
    with_packed!(data, v => match sel {
        Sel::All(n) => {
            for (k, &x) in v[..*n].iter().enumerate() {
                f(k, x.wide());
            }
        }
        Sel::Rows(rows) => {
            for (k, &r) in rows.iter().enumerate() {
                f(k, v[r as usize].wide());
            }
        }
    })
}

/// Keeps the selected rows whose value in `data` passes `test`.
fn restrict_by(data: &Packed, sel: Sel, test: impl Fn(i64) -> bool) -> Sel {
    with_packed!(data, v => match sel {
        Sel::All(n) => {
            let mut out = Vec::new();
            for (i, &x) in v[..n].iter().enumerate() {
                if test(x.wide()) {
                    out.push(i as u32);
                }
            }
            Sel::Rows(out)
        }
        Sel::Rows(mut rows) => {
            rows.retain(|&r| test(v[r as usize].wide()));
            Sel::Rows(rows)
        }
    })
}

/// Inclusive ranges of integers, sorted and disjoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeSet(Vec<(i64, i64)>);

impl RangeSet {
    pub(crate) fn full() -> RangeSet {
        RangeSet(vec![(i64::MIN, i64::MAX)])
    }

    pub(crate) fn empty() -> RangeSet {
        RangeSet(Vec::new())
    }

    /// `lo..=hi`, either end `None` for unbounded, clamped to `i64`.
    fn span(lo: Option<i128>, hi: Option<i128>) -> RangeSet {
        let clamp = |x: i128| x.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        let lo = lo.map_or(i64::MIN, clamp);
        let hi = hi.map_or(i64::MAX, clamp);
        if lo > hi {
            RangeSet::empty()
        } else {
            RangeSet(vec![(lo, hi)])
        }
    }

    /// The ranges, sorted and disjoint.
    pub(crate) fn ranges(&self) -> &[(i64, i64)] {
        &self.0
    }

    /// A set of instants (microseconds) as the stored values `u` of a column in `unit`
    /// whose instant `u * unit` is in the set.
    pub(crate) fn to_units(&self, unit: i64) -> RangeSet {
        if unit == 1 {
            return self.clone();
        }
        self.0
            .iter()
            .map(|&(lo, hi)| {
                let open = |x: i64, end: i64| (x != end).then_some(i128::from(x));
                micros_to_units(open(lo, i64::MIN), open(hi, i64::MAX), unit)
            })
            .fold(RangeSet::empty(), RangeSet::union)
    }

    pub(crate) fn union(mut self, other: RangeSet) -> RangeSet {
        self.0.extend(other.0);
        self.0.sort_unstable();
        let mut out: Vec<(i64, i64)> = Vec::with_capacity(self.0.len());
        for (lo, hi) in self.0 {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        RangeSet(out)
    }

    fn complement(&self) -> RangeSet {
        let mut out = Vec::new();
        let mut next = Some(i64::MIN);
        for &(lo, hi) in &self.0 {
            if let Some(n) = next
                && lo > n
            {
                out.push((n, lo - 1));
            }
            next = hi.checked_add(1);
        }
        if let Some(n) = next {
            out.push((n, i64::MAX));
        }
        RangeSet(out)
    }

    fn intersect(&self, other: &RangeSet) -> RangeSet {
        let mut out = Vec::new();
        let (mut i, mut j) = (0, 0);
        while i < self.0.len() && j < other.0.len() {
            let (a, b) = (self.0[i], other.0[j]);
            let (lo, hi) = (a.0.max(b.0), a.1.min(b.1));
            if lo <= hi {
                out.push((lo, hi));
            }
            if a.1 < b.1 {
                i += 1;
            } else {
                j += 1;
            }
        }
        RangeSet(out)
    }

    fn is_full(&self) -> bool {
        self.0 == [(i64::MIN, i64::MAX)]
    }

    #[inline]
    fn contains(&self, x: i64) -> bool {
        self.0.iter().any(|&(lo, hi)| lo <= x && x <= hi)
    }
}

/// A compiled filter: which rows of one column pass.
pub(crate) enum Pred<'a> {
    /// Rows whose code `c` has `pass[c]`.
    Codes(&'a Packed, Vec<bool>),
    /// Rows whose value lies in the set.
    Ranges(&'a Packed, RangeSet),
    /// No row.
    Never,
}

impl Pred<'_> {
    /// `Some(true)` when every row passes, `Some(false)` when none does.
    fn trivial(&self) -> Option<bool> {
        match self {
            Pred::Codes(_, pass) if pass.iter().all(|p| *p) => Some(true),
            Pred::Codes(_, pass) if !pass.iter().any(|p| *p) => Some(false),
            Pred::Ranges(_, set) if set.is_full() => Some(true),
            Pred::Ranges(_, set) if set.0.is_empty() => Some(false),
            Pred::Never => Some(false),
            _ => None,
        }
    }

    fn restrict(&self, sel: Sel) -> Sel {
        match self {
            Pred::Codes(data, pass) => restrict_by(data, sel, |c| pass[c as usize]),
            Pred::Ranges(data, set) if set.0.len() == 1 => {
                let (lo, hi) = set.0[0];
                restrict_by(data, sel, |x| lo <= x && x <= hi)
            }
            Pred::Ranges(data, set) => restrict_by(data, sel, |x| set.contains(x)),
            Pred::Never => Sel::Rows(Vec::new()),
        }
    }
}

/// The rows of a table of `n` rows that pass every predicate. Range predicates on one
/// column are intersected first, so that each column is read once.
pub(crate) fn select(n: usize, preds: Vec<Pred<'_>>) -> Sel {
    let mut merged: Vec<Pred<'_>> = Vec::with_capacity(preds.len());
    for p in preds {
        if let Pred::Ranges(data, set) = &p
            && let Some(Pred::Ranges(_, prev)) = merged
                .iter_mut()
                .find(|m| matches!(m, Pred::Ranges(d, _) if std::ptr::eq(*d, *data)))
        {
            *prev = prev.intersect(set);
            continue;
        }
        merged.push(p);
    }
    let mut sel = Sel::All(n);
    for p in &merged {
        match p.trivial() {
            Some(true) => {}
            Some(false) => return Sel::Rows(Vec::new()),
            None => sel = p.restrict(sel),
        }
    }
    sel
}

/// The rows `start <= time < end` of a time column.
pub(crate) fn time_range_pred(col: &Column, range: TimeRange) -> Pred<'_> {
    let lo = range.start.map(|s| i128::from(s.0));
    let hi = range.end.map(|e| i128::from(e.0) - 1);
    Pred::Ranges(&col.data, micros_to_units(lo, hi, col.unit))
}

/// The stored values `u` with `lo <= u * unit <= hi`.
fn micros_to_units(lo: Option<i128>, hi: Option<i128>, unit: i64) -> RangeSet {
    let unit = i128::from(unit);
    RangeSet::span(
        lo.map(|l| -(-l).div_euclid(unit)),
        hi.map(|h| h.div_euclid(unit)),
    )
}

/// The rows whose code in `col` is one of these texts.
pub(crate) fn text_pred<'a>(col: &'a Column, test: impl Fn(&str) -> bool) -> Pred<'a> {
    let pass = col
        .dict
        .as_ref()
        .map_or_else(Vec::new, |d| d.values().iter().map(|s| test(s)).collect());
    Pred::Codes(&col.data, pass)
}

/// The instants (microseconds) at which a filter on a field computed from the record's
/// time passes: `hour` or `timestamp` against an instant (or a day, its UTC date), `date`,
/// `date UTC±H[:MM]` and `date <IANA zone>` against a day. `None` for other fields.
///
/// The evaluator reads it as ranges of the time column, and the PostgreSQL store writes
/// it as ranges of the time column in SQL (so an index on the time can serve it), both
/// from this one computation. A value of another type compares as less than any value
/// (as `compare_filter` does): a `Compare` keeps everything or nothing, an `EQUAL` of it
/// nothing.
pub(crate) fn instant_set(field: FieldRef, test: &FilterTest) -> Option<RangeSet> {
    let one = |op: FilterOp, v: &FilterValue| -> Option<RangeSet> {
        let day = MICROS_PER_DAY;
        match (field.field().expr, v) {
            (Expr::Time, FilterValue::Time(t)) => Some(key_range(op, t.0, 0, 1, 1)),
            (Expr::Time, FilterValue::TimeDate(d)) => {
                Some(key_range(op, i64::from(d.0), 0, day, 1))
            }
            (Expr::UtcDate, FilterValue::Date(d)) => Some(key_range(op, i64::from(d.0), 0, day, 1)),
            (Expr::LocalDate, FilterValue::Date(d)) => Some(match field.zone() {
                LocalZone::Fixed(m) => {
                    key_range(op, i64::from(d.0), i64::from(m) * 60_000_000, day, 1)
                }
                LocalZone::Iana(z) => zoned_day_range(op, i64::from(d.0), z),
            }),
            _ => None,
        }
    };
    if !matches!(
        field.field().expr,
        Expr::Time | Expr::UtcDate | Expr::LocalDate
    ) {
        return None;
    }
    Some(match test {
        FilterTest::Compare(op, v) => one(*op, v).unwrap_or_else(|| {
            if op.accepts(std::cmp::Ordering::Less) {
                RangeSet::full()
            } else {
                RangeSet::empty()
            }
        }),
        FilterTest::AnyOf(values) => values
            .iter()
            .filter_map(|v| one(FilterOp::Equal, v))
            .fold(RangeSet::empty(), RangeSet::union),
    })
}

/// The stored values `u` of a column in `unit` for which the key
/// `floor((u * unit + a) / m)` passes `op` against `c` (a monotone key: a range of `u`).
pub(crate) fn key_range(op: FilterOp, c: i64, a: i64, m: i64, unit: i64) -> RangeSet {
    if op == FilterOp::NotEqual {
        return key_range(FilterOp::Equal, c, a, m, unit).complement();
    }
    let (lo, hi) = key_bounds(op, c, a, m);
    micros_to_units(lo, hi, unit)
}

/// The instants (inclusive bounds, `None` unbounded) whose key `floor((t + a) / m)` passes
/// `op` (not `NotEqual`) against `c`.
fn key_bounds(op: FilterOp, c: i64, a: i64, m: i64) -> (Option<i128>, Option<i128>) {
    let (c, a, m) = (i128::from(c), i128::from(a), i128::from(m));
    // The smallest instant whose key is at least `c`.
    let lower = |c: i128| c * m - a;
    match op {
        FilterOp::Ge => (Some(lower(c)), None),
        FilterOp::GreaterThan => (Some(lower(c + 1)), None),
        FilterOp::LessThan => (None, Some(lower(c) - 1)),
        FilterOp::Le => (None, Some(lower(c + 1) - 1)),
        FilterOp::Equal => (Some(lower(c)), Some(lower(c + 1) - 1)),
        FilterOp::NotEqual => unreachable!("the complement of Equal"),
    }
}

/// The instants (microseconds) whose local date in `zone` (the date of the instant plus
/// the zone's offset at that instant) passes `op` against day `c`.
///
/// The local date is not monotone in the instant (a zone may fall back across midnight),
/// so the set is built span by span of constant offset. Within
/// [`MAX_OFFSET_MICROS`] of day `c` the spans decide; further out every instant's local
/// date is plainly before or after `c`.
fn zoned_day_range(op: FilterOp, c: i64, zone: Zone) -> RangeSet {
    if op == FilterOp::NotEqual {
        return zoned_day_range(FilterOp::Equal, c, zone).complement();
    }
    let (w0, w1) = (
        c.saturating_mul(MICROS_PER_DAY)
            .saturating_sub(2 * MAX_OFFSET_MICROS),
        (c.saturating_add(1))
            .saturating_mul(MICROS_PER_DAY)
            .saturating_add(2 * MAX_OFFSET_MICROS),
    );
    let mut set = match op {
        FilterOp::LessThan | FilterOp::Le => RangeSet::span(None, Some(i128::from(w0) - 1)),
        FilterOp::GreaterThan | FilterOp::Ge => RangeSet::span(Some(i128::from(w1)), None),
        _ => RangeSet::empty(),
    };
    for (s, e, o) in zone.spans(w0, w1) {
        let (lo, hi) = key_bounds(op, c, o, MICROS_PER_DAY);
        let lo = lo.map_or(i128::from(s), |lo| lo.max(i128::from(s)));
        let hi = hi.map_or(i128::from(e) - 1, |hi| hi.min(i128::from(e) - 1));
        if lo <= hi {
            set = set.union(RangeSet::span(Some(lo), Some(hi)));
        }
    }
    set
}

/// A set of the integers below a bound.
pub(crate) struct Bitmap(Vec<u64>);

impl Bitmap {
    /// An empty set of integers below `bits`.
    pub(crate) fn new(bits: u64) -> Bitmap {
        Bitmap(vec![0; bits.div_ceil(64) as usize])
    }

    /// Adds `i`; whether it was new.
    #[inline]
    pub(crate) fn insert(&mut self, i: u64) -> bool {
        let (w, b) = (&mut self.0[(i / 64) as usize], 1u64 << (i % 64));
        let new = *w & b == 0;
        *w |= b;
        new
    }

    /// How many of `range` are in the set.
    pub(crate) fn count(&self, range: std::ops::Range<u64>) -> u64 {
        range
            .filter(|i| self.0[(i / 64) as usize] & (1 << (i % 64)) != 0)
            .count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{MICROS_PER_DAY, MICROS_PER_HOUR};

    #[test]
    fn select_intersects_the_ranges_of_a_column_then_narrows() {
        let a = Packed::U8(vec![1, 5, 9, 5, 2]);
        let b = Packed::U8(vec![0, 1, 1, 0, 1]);
        let preds = vec![
            Pred::Ranges(&a, RangeSet(vec![(2, 9)])),
            Pred::Codes(&b, vec![false, true]),
            Pred::Ranges(&a, RangeSet(vec![(0, 5)])),
        ];
        assert_eq!(select(5, preds), Sel::Rows(vec![1, 4]));
        // Predicates every row passes leave the selection whole; one no row passes empties it.
        let all = vec![
            Pred::Ranges(&a, RangeSet::full()),
            Pred::Codes(&b, vec![true, true]),
        ];
        assert_eq!(select(5, all), Sel::All(5));
        let none = vec![Pred::Codes(&b, vec![true, true]), Pred::Never];
        assert_eq!(select(5, none), Sel::Rows(Vec::new()));
    }

    #[test]
    fn scan_reads_the_selected_rows_in_order() {
        let data = Packed::U16(vec![10, 20, 30, 40]);
        let mut seen = Vec::new();
        scan(&data, &Sel::Rows(vec![1, 3]), |k, v| seen.push((k, v)));
        assert_eq!(seen, [(0, 20), (1, 40)]);
        let sel = Sel::All(3);
        assert_eq!((sel.len(), sel.row(2)), (3, 2));
    }

    #[test]
    fn bitmaps_count_new_members() {
        let mut b = Bitmap::new(130);
        assert!(b.insert(0));
        assert!(b.insert(129));
        assert!(!b.insert(129));
        assert!(b.insert(64));
        assert_eq!(b.count(0..130), 3);
        assert_eq!(b.count(1..129), 1);
    }

    #[test]
    fn range_sets() {
        let a = RangeSet(vec![(0, 5), (10, 20)]);
        assert_eq!(
            a.complement(),
            RangeSet(vec![(i64::MIN, -1), (6, 9), (21, i64::MAX)])
        );
        assert_eq!(a.complement().complement(), a);
        assert_eq!(
            a.intersect(&RangeSet(vec![(3, 12)])),
            RangeSet(vec![(3, 5), (10, 12)])
        );
        assert_eq!(
            RangeSet(vec![(0, 1)]).union(RangeSet(vec![(2, 4), (9, 9)])),
            RangeSet(vec![(0, 4), (9, 9)])
        );
        assert!(RangeSet::full().complement().0.is_empty());
    }

    #[test]
    fn date_filters_on_hours_are_ranges_of_hours() {
        // date UTC-8 >= day 1 on hours: instants from day 1 08:00Z on.
        let r = key_range(
            FilterOp::Ge,
            1,
            -8 * 3_600_000_000,
            MICROS_PER_DAY,
            MICROS_PER_HOUR,
        );
        assert_eq!(r, RangeSet(vec![(32, i64::MAX)]));
        // hour LE 1970-01-02 (a date): hours up to 47.
        let r = key_range(FilterOp::Le, 1, 0, MICROS_PER_DAY, MICROS_PER_HOUR);
        assert_eq!(r, RangeSet(vec![(i64::MIN, 47)]));
        // timestamp > an instant inside an hour, on hour units: the next hour on.
        let r = key_range(
            FilterOp::GreaterThan,
            MICROS_PER_HOUR + 5,
            0,
            1,
            MICROS_PER_HOUR,
        );
        assert_eq!(r, RangeSet(vec![(2, i64::MAX)]));
        let r = key_range(FilterOp::NotEqual, 3, 0, 1, 1);
        assert_eq!(r, RangeSet(vec![(i64::MIN, 2), (4, i64::MAX)]));
    }
}
