//! Selection primitives of the columnar store: which rows of a [`Table`](super::store::Table)
//! a query or a statistic reads.
//!
//! A filter is compiled once per column into a [`Pred`]: on a dictionary column a
//! pass/fail flag per code ([`text_pred`]), on a count or a time a [`RangeSet`] of stored
//! values (a monotone key of the stored value, such as a date of an hour, is a range too:
//! [`crate::ranges::key_range`]; the rows of a [`TimeRange`] are [`time_range_pred`]). [`select`]
//! intersects the range predicates of one column, then narrows a selection ([`Sel`]) by
//! each remaining predicate. [`scan`] reads a column over a selection. Custom queries
//! (`columnar`) and user and agent statistics (`stats`) both select rows this way;
//! [`Bitmap`] is the set of small integers both count distinct pairs with.

use super::store::{Column, Lane, Packed, with_packed};
use crate::plan::TimeRange;
use crate::ranges::{RangeSet, micros_to_units};

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
            Pred::Ranges(_, set) if set.ranges().is_empty() => Some(false),
            Pred::Never => Some(false),
            _ => None,
        }
    }

    fn restrict(&self, sel: Sel) -> Sel {
        match self {
            Pred::Codes(data, pass) => restrict_by(data, sel, |c| pass[c as usize]),
            Pred::Ranges(data, set) if set.ranges().len() == 1 => {
                let (lo, hi) = set.ranges()[0];
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

/// The rows whose code in `col` is one of these texts.
pub(crate) fn text_pred<'a>(col: &'a Column, test: impl Fn(&str) -> bool) -> Pred<'a> {
    let pass = col
        .dict
        .as_ref()
        .map_or_else(Vec::new, |d| d.values().iter().map(|s| test(s)).collect());
    Pred::Codes(&col.data, pass)
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

    #[test]
    fn select_intersects_the_ranges_of_a_column_then_narrows() {
        let a = Packed::U8(vec![1, 5, 9, 5, 2]);
        let b = Packed::U8(vec![0, 1, 1, 0, 1]);
        let preds = vec![
            Pred::Ranges(&a, RangeSet::span(Some(2), Some(9))),
            Pred::Codes(&b, vec![false, true]),
            Pred::Ranges(&a, RangeSet::span(Some(0), Some(5))),
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
}
