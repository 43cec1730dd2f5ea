//! Instants, dates and their wire forms.
//!
//! Every time the service handles is an instant in UTC with microsecond precision
//! ([`Timestamp`]) or a calendar date ([`Date`]). Inputs are cut to microseconds
//! (contract section 8); outputs use RFC 3339 with `Z` ([`Timestamp::to_rfc3339`]) except
//! `hour` and `timestamp` values in `Analytics` results, which use the hosted service's
//! Go-style form ([`Timestamp::to_go`]).

use std::fmt;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike, Utc};

/// Microseconds in one second.
pub const MICROS_PER_SECOND: i64 = 1_000_000;
/// Microseconds in one hour.
pub const MICROS_PER_HOUR: i64 = 3_600 * MICROS_PER_SECOND;
/// Microseconds in one day.
pub const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;

/// Why a text is not a time or date the service takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// Not in the expected form.
    #[error("is not in the expected form")]
    Syntax,
    /// Well formed, but outside 1970-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999Z once
    /// converted to UTC.
    #[error("is outside the range 1970-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999Z (in UTC)")]
    Range,
}

/// An instant in UTC, in microseconds since 1970-01-01T00:00:00Z.
///
/// `Debug` prints RFC 3339 (`Timestamp(2025-05-01T13:00:00Z)`), so snapshots read well.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

/// A calendar date, in days since 1970-01-01. `Debug` prints `Date(2025-05-01)`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Date(pub i32);

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.to_rfc3339())
    }
}

impl fmt::Debug for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Date({})", self.to_iso())
    }
}

impl Timestamp {
    /// The current time, cut to microseconds.
    pub fn now() -> Timestamp {
        Timestamp(Utc::now().timestamp_micros())
    }

    /// Parses RFC 3339 with any offset (`2025-05-01T13:00:00+02:00`), cutting the
    /// fraction to microseconds.
    ///
    /// # Example
    /// ```
    /// use usage_core::time::Timestamp;
    /// let t = Timestamp::parse_rfc3339("2025-05-01T15:00:00.1234567+02:00").unwrap();
    /// assert_eq!(t.to_rfc3339(), "2025-05-01T13:00:00.123456Z");
    /// ```
    pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
        Timestamp::read_rfc3339(s).ok()
    }

    /// Parses RFC 3339 like [`Timestamp::parse_rfc3339`], telling a text that is no time
    /// from a time outside the range the service keeps ([`Timestamp::MIN`] ..=
    /// [`Timestamp::MAX`] once converted to UTC, contract section 11).
    ///
    /// # Errors
    /// [`TimeError::Syntax`] or [`TimeError::Range`].
    ///
    /// # Example
    /// ```
    /// use usage_core::time::{TimeError, Timestamp};
    /// assert_eq!(Timestamp::read_rfc3339("9999-12-31T23:00:00-14:00"), Err(TimeError::Range));
    /// assert_eq!(Timestamp::read_rfc3339("yesterday"), Err(TimeError::Syntax));
    /// ```
    pub fn read_rfc3339(s: &str) -> Result<Timestamp, TimeError> {
        Timestamp::parse_rfc3339_unbounded(s)
            .ok_or(TimeError::Syntax)?
            .in_range()
    }

    /// Parses RFC 3339 without the range check: for reading answers, which a client takes
    /// as sent. Inputs the service keeps go through [`Timestamp::read_rfc3339`].
    pub fn parse_rfc3339_unbounded(s: &str) -> Option<Timestamp> {
        let t = DateTime::parse_from_rfc3339(s).ok()?;
        Some(Timestamp(t.timestamp_micros()))
    }

    /// The earliest instant the service keeps: 1970-01-01T00:00:00Z.
    pub const MIN: Timestamp = Timestamp(0);
    /// The latest instant the service keeps: 9999-12-31T23:59:59.999999Z.
    pub const MAX: Timestamp = Timestamp((Date::MAX.0 as i64 + 1) * MICROS_PER_DAY - 1);
    /// The latest time a record may hold: 9999-12-31T09:59:59.999999Z, so that its local
    /// date at any offset (up to +14:00) or zone is at most 9999-12-31 (contract section 11).
    pub const RECORD_MAX: Timestamp = Timestamp(Timestamp::MAX.0 - 14 * MICROS_PER_HOUR);

    /// This instant, if it lies within [`Timestamp::MIN`] ..= [`Timestamp::MAX`].
    ///
    /// # Errors
    /// [`TimeError::Range`] outside.
    pub fn in_range(self) -> Result<Timestamp, TimeError> {
        if (Timestamp::MIN..=Timestamp::MAX).contains(&self) {
            Ok(self)
        } else {
            Err(TimeError::Range)
        }
    }

    /// Parses the Go-style result form `2025-05-01 13:00:00 +0000 UTC` (with an optional
    /// fraction after the seconds); the zone must be exactly `+0000 UTC`.
    pub fn parse_go(s: &str) -> Option<Timestamp> {
        let rest = s.strip_suffix(" +0000 UTC")?;
        if rest.len() < 19 || rest.as_bytes()[10] != b' ' {
            return None;
        }
        let (date, time) = (&rest[..10], &rest[11..]);
        let d = Date::parse(date)?;
        let (hms, frac) = match time.split_once('.') {
            Some((hms, frac)) => (hms, Some(frac)),
            None => (time, None),
        };
        let b = hms.as_bytes();
        if b.len() != 8 || b[2] != b':' || b[5] != b':' {
            return None;
        }
        let num = |x: &[u8]| -> Option<i64> {
            if x.iter().all(u8::is_ascii_digit) {
                Some(x.iter().fold(0i64, |a, c| a * 10 + i64::from(c - b'0')))
            } else {
                None
            }
        };
        let (h, m, sec) = (num(&b[0..2])?, num(&b[3..5])?, num(&b[6..8])?);
        if h > 23 || m > 59 || sec > 59 {
            return None;
        }
        let mut micros = 0i64;
        if let Some(frac) = frac {
            if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|c| c.is_ascii_digit()) {
                return None;
            }
            for (i, c) in frac.bytes().take(6).enumerate() {
                micros += i64::from(c - b'0') * 10i64.pow(5 - i as u32);
            }
        }
        Timestamp(
            d.start().0
                + h * MICROS_PER_HOUR
                + m * 60 * MICROS_PER_SECOND
                + sec * MICROS_PER_SECOND
                + micros,
        )
        .in_range()
        .ok()
    }

    /// The UTC date of this instant.
    pub fn date(self) -> Date {
        Date(self.0.div_euclid(MICROS_PER_DAY) as i32)
    }

    /// The start of the hour containing this instant.
    pub fn hour_start(self) -> Timestamp {
        Timestamp(self.0 - self.0.rem_euclid(MICROS_PER_HOUR))
    }

    /// Whether this instant is the start of an hour.
    pub fn is_hour_start(self) -> bool {
        self.0.rem_euclid(MICROS_PER_HOUR) == 0
    }

    /// This instant moved by `minutes`.
    pub fn plus_minutes(self, minutes: i32) -> Timestamp {
        Timestamp(self.0 + i64::from(minutes) * 60 * MICROS_PER_SECOND)
    }

    /// Cuts to whole seconds.
    pub fn whole_seconds(self) -> Timestamp {
        Timestamp(self.0 - self.0.rem_euclid(MICROS_PER_SECOND))
    }

    fn parts(self) -> Option<(NaiveDateTime, u32)> {
        let secs = self.0.div_euclid(MICROS_PER_SECOND);
        let micros = self.0.rem_euclid(MICROS_PER_SECOND) as u32;
        let dt = DateTime::<Utc>::from_timestamp(secs, 0)?.naive_utc();
        Some((dt, micros))
    }

    fn write_parts(self, out: &mut String, sep: char) {
        use fmt::Write;
        match self.parts() {
            Some((dt, micros)) => {
                let _ = write!(
                    out,
                    "{:04}-{:02}-{:02}{}{:02}:{:02}:{:02}",
                    dt.year(),
                    dt.month(),
                    dt.day(),
                    sep,
                    dt.hour(),
                    dt.minute(),
                    dt.second()
                );
                if micros != 0 {
                    let frac = format!("{micros:06}");
                    out.push('.');
                    out.push_str(frac.trim_end_matches('0'));
                }
            }
            None => {
                let _ = write!(out, "{}", self.0);
            }
        }
    }

    /// RFC 3339 in UTC with `Z`: whole seconds, or the stored fraction with trailing zeros
    /// removed (`2025-05-01T13:00:07.25Z`).
    pub fn to_rfc3339(self) -> String {
        let mut s = String::with_capacity(27);
        self.write_parts(&mut s, 'T');
        s.push('Z');
        s
    }

    /// The hosted service's form of `hour` and `timestamp` values in `Analytics` results:
    /// `2025-05-01 13:00:07.25 +0000 UTC`.
    ///
    /// # Example
    /// ```
    /// use usage_core::time::Timestamp;
    /// let t = Timestamp::parse_rfc3339("2025-05-01T13:00:00Z").unwrap();
    /// assert_eq!(t.to_go(), "2025-05-01 13:00:00 +0000 UTC");
    /// ```
    pub fn to_go(self) -> String {
        let mut s = String::with_capacity(36);
        self.write_parts(&mut s, ' ');
        s.push_str(" +0000 UTC");
        s
    }

    /// Adds calendar months, clamping the day to the target month's last day.
    pub fn add_months(self, months: i32) -> Option<Timestamp> {
        let (dt, micros) = self.parts()?;
        let total = dt.year() * 12 + dt.month0() as i32 + months;
        let (y, m0) = (total.div_euclid(12), total.rem_euclid(12) as u32);
        let last = last_day_of_month(y, m0 + 1)?;
        let day = dt.day().min(last);
        let date = NaiveDate::from_ymd_opt(y, m0 + 1, day)?;
        let ndt = date.and_time(dt.time());
        Some(Timestamp(
            ndt.and_utc().timestamp() * MICROS_PER_SECOND + i64::from(micros),
        ))
    }
}

fn last_day_of_month(y: i32, m: u32) -> Option<u32> {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    Some(NaiveDate::from_ymd_opt(ny, nm, 1)?.pred_opt()?.day())
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Timestamp::parse_rfc3339_unbounded(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not an RFC 3339 timestamp")))
    }
}

impl Date {
    /// Parses exactly `YYYY-MM-DD`.
    ///
    /// # Example
    /// ```
    /// use usage_core::time::Date;
    /// assert_eq!(Date::parse("1970-01-02"), Some(Date(1)));
    /// assert_eq!(Date::parse("1970-1-2"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Date> {
        Date::read(s).ok()
    }

    /// The earliest date the service keeps: 1970-01-01.
    pub const MIN: Date = Date(0);
    /// The latest date the service keeps: 9999-12-31.
    pub const MAX: Date = Date(2_932_896);

    /// Parses `YYYY-MM-DD` like [`Date::parse`], telling a text that is no date from a date
    /// outside [`Date::MIN`] ..= [`Date::MAX`] (contract section 11).
    ///
    /// # Errors
    /// [`TimeError::Syntax`] or [`TimeError::Range`].
    pub fn read(s: &str) -> Result<Date, TimeError> {
        let d = Date::parse_unbounded(s).ok_or(TimeError::Syntax)?;
        if (Date::MIN..=Date::MAX).contains(&d) {
            Ok(d)
        } else {
            Err(TimeError::Range)
        }
    }

    /// Parses `YYYY-MM-DD` without the range check: for reading answers (see
    /// [`Timestamp::parse_rfc3339_unbounded`]).
    pub fn parse_unbounded(s: &str) -> Option<Date> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let digits = |r: std::ops::Range<usize>| -> Option<u32> {
            b[r].iter().try_fold(0u32, |a, c| {
                c.is_ascii_digit().then(|| a * 10 + u32::from(c - b'0'))
            })
        };
        let (y, m, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
        let date = NaiveDate::from_ymd_opt(y as i32, m, d)?;
        Some(Date(
            date.signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1)?)
                .num_days() as i32,
        ))
    }

    /// The instant this date starts at (00:00:00Z).
    pub fn start(self) -> Timestamp {
        Timestamp(i64::from(self.0) * MICROS_PER_DAY)
    }

    /// `YYYY-MM-DD`.
    pub fn to_iso(self) -> String {
        let Some((dt, _)) = self.start().parts() else {
            return self.0.to_string();
        };
        format!("{:04}-{:02}-{:02}", dt.year(), dt.month(), dt.day())
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_iso())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_output_trims_fraction() {
        let t = Timestamp::parse_rfc3339("2025-05-01T13:00:07.250Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2025-05-01T13:00:07.25Z");
        assert_eq!(t.to_go(), "2025-05-01 13:00:07.25 +0000 UTC");
        let t = Timestamp::parse_rfc3339("2025-05-01T13:00:07Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2025-05-01T13:00:07Z");
    }

    #[test]
    fn input_is_cut_to_micros() {
        let t = Timestamp::parse_rfc3339("2025-05-01T13:00:07.9999999Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2025-05-01T13:00:07.999999Z");
    }

    #[test]
    fn offsets_convert_to_utc() {
        let t = Timestamp::parse_rfc3339("2025-05-01T13:30:00+05:30").unwrap();
        assert_eq!(t.to_rfc3339(), "2025-05-01T08:00:00Z");
        assert!(t.is_hour_start());
    }

    #[test]
    fn go_form_round_trips() {
        for s in [
            "2025-05-01 13:00:00 +0000 UTC",
            "1970-01-01 00:00:00.5 +0000 UTC",
        ] {
            assert_eq!(Timestamp::parse_go(s).unwrap().to_go(), s);
        }
        assert_eq!(Timestamp::parse_go("2025-05-01 13:00:00 +0100 CET"), None);
        assert_eq!(Timestamp::parse_go("2025-05-01 25:00:00 +0000 UTC"), None);
    }

    #[test]
    fn range_ends_in_every_offset() {
        assert_eq!(Timestamp::MAX.to_rfc3339(), "9999-12-31T23:59:59.999999Z");
        assert_eq!(
            Timestamp::RECORD_MAX.to_rfc3339(),
            "9999-12-31T09:59:59.999999Z"
        );
        assert_eq!(
            Timestamp::RECORD_MAX.plus_minutes(14 * 60).date(),
            Date::MAX
        );
        assert_eq!(Date::MAX.to_iso(), "9999-12-31");
        assert_eq!(Date::MAX.start().date(), Date::MAX);
        for offset_min in (-14 * 60..=14 * 60i32).step_by(15) {
            let sign = if offset_min < 0 { '-' } else { '+' };
            let off = format!(
                "{sign}{:02}:{:02}",
                offset_min.abs() / 60,
                offset_min.abs() % 60
            );
            // The last and first instants of the range, written in this offset.
            let last = Timestamp::MAX.plus_minutes(offset_min);
            let first = Timestamp::MIN.plus_minutes(offset_min);
            let local = |t: Timestamp| t.to_rfc3339().trim_end_matches('Z').to_string();
            let at_last = format!("{}{off}", local(last));
            let at_first = format!("{}{off}", local(first));
            // (A positive offset writes the range's end in year 10000: not RFC 3339.)
            if last.date() <= Date::MAX {
                assert_eq!(
                    Timestamp::read_rfc3339(&at_last),
                    Ok(Timestamp::MAX),
                    "{at_last}"
                );
            }
            {
                assert_eq!(
                    Timestamp::read_rfc3339(&at_first),
                    Ok(Timestamp::MIN),
                    "{at_first}"
                );
            }
            // One microsecond past either end is refused whatever the offset.
            let past_last = format!("{}{off}", local(Timestamp(last.0 + 1)));
            let before_first = format!("{}{off}", local(Timestamp(first.0 - 1)));
            for s in [past_last, before_first] {
                if Timestamp::read_rfc3339(&s) != Err(TimeError::Syntax) {
                    assert_eq!(Timestamp::read_rfc3339(&s), Err(TimeError::Range), "{s}");
                }
            }
        }
        assert_eq!(
            Timestamp::read_rfc3339("9999-12-31T23:00:00-14:00"),
            Err(TimeError::Range)
        );
        assert_eq!(
            Timestamp::read_rfc3339("1970-01-01T13:59:59.999999+14:00"),
            Err(TimeError::Range)
        );
        assert_eq!(
            Timestamp::read_rfc3339("1970-01-01T14:00:00+14:00"),
            Ok(Timestamp::MIN)
        );
        assert_eq!(
            Timestamp::read_rfc3339("not a time"),
            Err(TimeError::Syntax)
        );
        assert_eq!(Date::read("1969-12-31"), Err(TimeError::Range));
        assert_eq!(Date::read("1970-01-01"), Ok(Date::MIN));
        assert_eq!(Date::read("9999-12-31"), Ok(Date::MAX));
        assert_eq!(Date::read("1970-13-01"), Err(TimeError::Syntax));
        assert_eq!(Timestamp::parse_go("1969-12-31 23:59:59 +0000 UTC"), None);
        assert_eq!(
            Timestamp::parse_go("9999-12-31 23:59:59.999999 +0000 UTC"),
            Some(Timestamp::MAX)
        );
    }

    #[test]
    fn dates() {
        assert_eq!(Date::parse("2025-05-01").unwrap().to_iso(), "2025-05-01");
        assert_eq!(Date::parse("2025-02-30"), None);
        // Instants before the range still have a date (they are never stored).
        assert_eq!(Timestamp(-MICROS_PER_HOUR).date().to_iso(), "1969-12-31");
    }

    #[test]
    fn months_clamp() {
        let t = Timestamp::parse_rfc3339("2025-01-31T00:00:00Z").unwrap();
        assert_eq!(
            t.add_months(1).unwrap().to_rfc3339(),
            "2025-02-28T00:00:00Z"
        );
        assert_eq!(
            t.add_months(13).unwrap().to_rfc3339(),
            "2026-02-28T00:00:00Z"
        );
    }
}
