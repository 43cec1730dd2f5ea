//! Time-range compilation: the instants at which a filter on the record's time or one of
//! its dates passes, as sorted, disjoint ranges (`RangeSet`), and those ranges as stored
//! values of a column in its unit. The evaluator ([`crate::eval`]) and the PostgreSQL
//! store's SQL both read filters on times from here, so a date in any zone selects the
//! same rows in both.

use crate::plan::{FilterTest, FilterValue};
use crate::schema::{Expr, FieldRef, FilterOp};
use crate::time::MICROS_PER_DAY;
use crate::zone::{LocalZone, MAX_OFFSET_MICROS, Zone};

/// For a filter on the record's time or one of its dates (`hour`, `timestamp`, `date`,
/// `date UTC±H[:MM]`, `date <IANA zone>`): the instants that pass, in microseconds, as
/// inclusive ranges, sorted and disjoint, `i64::MIN` and `i64::MAX` standing for open ends.
/// `None` for a filter on any other field. The evaluator and the SQL stores compile such
/// filters to ranges of the time column from this one computation.
///
/// ```
/// use usage_core::plan::{FilterTest, FilterValue};
/// use usage_core::ranges::instant_ranges;
/// use usage_core::schema::{FilterOp, Source};
/// use usage_core::time::{Date, Timestamp};
///
/// let ny = Source::UserData.spec().resolve("date America/New_York").unwrap();
/// let day = Date::parse("2026-03-08").unwrap();
/// let r = instant_ranges(ny, &FilterTest::Compare(FilterOp::Equal, FilterValue::Date(day)));
/// // 8 March 2026 in New York: 05:00 UTC to 04:00 UTC the next day (23 hours).
/// let start = Timestamp::parse_rfc3339("2026-03-08T05:00:00Z").unwrap().0;
/// let end = Timestamp::parse_rfc3339("2026-03-09T04:00:00Z").unwrap().0;
/// assert_eq!(r, Some(vec![(start, end - 1)]));
/// ```
pub fn instant_ranges(field: FieldRef, test: &FilterTest) -> Option<Vec<(i64, i64)>> {
    instant_set(field, test).map(|s| s.ranges().to_vec())
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
    pub(crate) fn span(lo: Option<i128>, hi: Option<i128>) -> RangeSet {
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

    pub(crate) fn complement(&self) -> RangeSet {
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

    pub(crate) fn intersect(&self, other: &RangeSet) -> RangeSet {
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

    pub(crate) fn is_full(&self) -> bool {
        self.0 == [(i64::MIN, i64::MAX)]
    }

    #[inline]
    pub(crate) fn contains(&self, x: i64) -> bool {
        self.0.iter().any(|&(lo, hi)| lo <= x && x <= hi)
    }
}

/// The stored values `u` with `lo <= u * unit <= hi`.
pub(crate) fn micros_to_units(lo: Option<i128>, hi: Option<i128>, unit: i64) -> RangeSet {
    let unit = i128::from(unit);
    RangeSet::span(
        lo.map(|l| -(-l).div_euclid(unit)),
        hi.map(|h| h.div_euclid(unit)),
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::MICROS_PER_HOUR;

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
