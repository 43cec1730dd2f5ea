//! Issue 14, point 1 (contract section 11, "Time range", "Text length", "What a store
//! accepted, it reads back"): values at the edges the validator accepts go through
//! `Ingest`, a restart and every operation that reads them, on every store, and come back
//! unchanged; values one step past each edge are `invalid_value` at their path and store
//! nothing.
//!
//! A case is a fresh team with records of every kind, generated field by field from the
//! schema tables: times at both ends of the range written in offsets from -14:00 to
//! +14:00 (odd minutes too) with fractions down to nanoseconds, dates at both ends, text of
//! exactly 1,024 bytes in characters of 1 to 4 bytes (combining marks, right-to-left text,
//! ZWJ sequences, noncharacters, control characters: everything but U+0000, which the
//! validator refuses), counts at 0, `-0` and `i64::MAX`, identity fields at full length.
//! Each answer is compared twice: byte for byte with the in-memory evaluator's answer over
//! the same records ([`TeamData`], [`Billing`]), and value by value with what was sent,
//! worked out here without the core (times formatted with chrono, sums in `i128`).
//!
//! A fixed case sweeps the offsets: both ends of the range written in every quarter-hour
//! offset from -14:00 to +14:00 and in odd minutes ([`every_offset_round_trips`]).
//!
//! The memory store cannot restart: `memory:` opened again is a new, empty store, so its
//! cases read back from the running server only. SQLite and PostgreSQL are read back
//! before and after being closed and opened again under a new server.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Mutex;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, Timelike};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use serde_json::{Map, Value, json};
use usage_core::JsonPath;
use usage_core::eval::{EvalError, TeamData};
use usage_core::load::{Batch, MAX_TEXT_BYTES, parse_record};
use usage_core::plan::{CapScope, Limits};
use usage_core::schema::records::{
    BILLING, GROUPS, KINDS, RecordField, RecordKind, RecordType, USERS,
};
use usage_core::schema::{Agg, Expr, Field, Plan, Role, SOURCES, SourceSpec, ValueType};
use usage_core::time::Timestamp;
use usage_core::validate;
use usage_core::wire::decode::{Decoded, Request, decode};
use usage_core::wire::{
    AgentAnalyticsRequest, AnalyticsRequest, GetUsageConfigRequest, UserPageAnalyticsRequest,
};
use usage_server::store::Billing;

use crate::common::{ALL, Reply, TestServer, TestStore, add_team, fast_config, make_key};

// ---------------------------------------------------------------------------------------
// The range and the forms of the contract, computed here (not with the core's constants).

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_HOUR: i64 = 3_600 * MICROS_PER_SECOND;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;
const NANOS_PER_MICRO: i128 = 1_000;

/// The earliest instant kept, 1970-01-01T00:00:00Z, in microseconds since the epoch.
const MIN_MICROS: i64 = 0;
/// The latest day kept, 9999-12-31, in days since the epoch.
fn max_day() -> i64 {
    let d = NaiveDate::from_ymd_opt(9999, 12, 31).unwrap();
    d.signed_duration_since(NaiveDate::from_ymd_opt(1970, 1, 1).unwrap())
        .num_days()
}
/// The latest instant a request's range may name, 9999-12-31T23:59:59.999999Z.
fn max_micros() -> i64 {
    (max_day() + 1) * MICROS_PER_DAY - 1
}
/// The latest time a record may hold, 9999-12-31T09:59:59.999999Z: its local date is at
/// most 9999-12-31 at every offset up to +14:00 (contract section 11, v5).
fn max_record_micros() -> i64 {
    max_micros() - 14 * MICROS_PER_HOUR
}
/// The latest hour start a record may hold, 9999-12-31T09:00:00Z.
fn max_hour() -> i64 {
    max_record_micros() - max_record_micros().rem_euclid(MICROS_PER_HOUR)
}

fn utc(micros: i64) -> (NaiveDateTime, i64) {
    let secs = micros.div_euclid(MICROS_PER_SECOND);
    let dt = DateTime::from_timestamp(secs, 0).unwrap().naive_utc();
    (dt, micros.rem_euclid(MICROS_PER_SECOND))
}

fn ymd_hms(dt: NaiveDateTime, sep: char) -> String {
    format!(
        "{:04}-{:02}-{:02}{sep}{:02}:{:02}:{:02}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}

/// A stored fraction: trailing zeros removed, nothing when zero (contract section 1).
fn fraction(micros: i64) -> String {
    if micros == 0 {
        String::new()
    } else {
        format!(".{}", format!("{micros:06}").trim_end_matches('0'))
    }
}

/// Section 1's output form: `2025-05-01T13:00:07.25Z`.
fn rfc3339(micros: i64) -> String {
    let (dt, frac) = utc(micros);
    format!("{}{}Z", ymd_hms(dt, 'T'), fraction(frac))
}

/// Section 3's form of `hour` and `timestamp` results: `2025-05-01 13:00:07.25 +0000 UTC`.
fn go_time(micros: i64) -> String {
    let (dt, frac) = utc(micros);
    format!("{}{} +0000 UTC", ymd_hms(dt, ' '), fraction(frac))
}

/// `YYYY-MM-DD` of a day since the epoch (`10000-01-01` past year 9999, as `{:04}` writes).
fn iso_date(day: i64) -> String {
    let d = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap() + chrono::Duration::days(day);
    format!("{:04}-{:02}-{:02}", d.year(), d.month(), d.day())
}

fn zone(offset: i32, zulu: bool) -> String {
    if offset == 0 && zulu {
        return "Z".into();
    }
    let sign = if offset < 0 { '-' } else { '+' };
    format!("{sign}{:02}:{:02}", offset.abs() / 60, offset.abs() % 60)
}

/// The instant `nanos` (since the epoch) written in RFC 3339 at `offset` minutes: with
/// nine fraction digits when `nine`, else the shortest fraction; `None` when the local
/// time has no four-digit year.
fn write_time(nanos: i128, offset: i32, nine: bool, zulu: bool) -> Option<String> {
    let local = nanos + i128::from(offset) * 60 * 1_000_000_000;
    let secs = i64::try_from(local.div_euclid(1_000_000_000)).ok()?;
    let sub = local.rem_euclid(1_000_000_000);
    let dt = DateTime::from_timestamp(secs, 0)?.naive_utc();
    if !(0..=9999).contains(&dt.year()) {
        return None;
    }
    let frac = if nine {
        format!(".{sub:09}")
    } else if sub == 0 {
        String::new()
    } else {
        format!(".{}", format!("{sub:09}").trim_end_matches('0'))
    };
    Some(format!("{}{frac}{}", ymd_hms(dt, 'T'), zone(offset, zulu)))
}

/// `date UTC±HH:MM`.
fn local_date_name(offset: i32) -> String {
    let sign = if offset < 0 { '-' } else { '+' };
    format!(
        "date UTC{sign}{:02}:{:02}",
        offset.abs() / 60,
        offset.abs() % 60
    )
}

// ---------------------------------------------------------------------------------------
// Values as sent, and what they mean.

/// What a sent value means, worked out by the generator (not by the core's parser).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Meant {
    Text(String),
    /// Microseconds since the epoch.
    Time(i64),
    /// Days since the epoch.
    Day(i64),
    Count(i64),
    Bool(bool),
    Groups(Vec<String>),
    /// A value past an edge: the record must be refused.
    Refused,
}

/// A value as sent and what it means.
#[derive(Debug, Clone)]
struct Sent {
    json: Value,
    meant: Meant,
}

/// JSON `-0` as a number: serde_json would write the float `-0.0`, so the body holds this
/// marker string, replaced by `-0` in the text sent. It holds U+0000, which no generated
/// text holds (the validator refuses it).
const MINUS_ZERO: &str = "\u{0}-0";

/// A record as sent: one optional value per field of its kind, in the kind's order.
#[derive(Clone)]
struct Rec {
    kind: &'static RecordKind,
    values: Vec<Option<Sent>>,
}

impl Rec {
    fn meant(&self, name: &str) -> Option<&Meant> {
        let i = self.kind.position(name).expect("a field of the kind");
        self.values[i].as_ref().map(|s| &s.meant)
    }

    fn text(&self, name: &str) -> &str {
        match self.meant(name) {
            Some(Meant::Text(s)) => s,
            other => panic!("{}.{name} is not text: {other:?}", self.kind.name),
        }
    }

    fn count(&self, name: &str) -> i64 {
        match self.meant(name) {
            Some(Meant::Count(n)) => *n,
            None => 0,
            other => panic!("{}.{name} is not a count: {other:?}", self.kind.name),
        }
    }

    /// The record's time in microseconds (a day is its start).
    fn time(&self) -> i64 {
        match self.meant(self.kind.time.expect("a kind with a time")) {
            Some(Meant::Time(t)) => *t,
            Some(Meant::Day(d)) => d * MICROS_PER_DAY,
            other => panic!("{} time: {other:?}", self.kind.name),
        }
    }

    fn json(&self) -> Value {
        let mut m = Map::new();
        for (f, v) in self.kind.fields.iter().zip(&self.values) {
            if let Some(v) = v {
                m.insert(f.name.to_string(), v.json.clone());
            }
        }
        Value::Object(m)
    }

    /// Its identity (section 8), from the meant values; an event without `id` is
    /// identified by all its values (its id is their hash).
    fn identity(&self) -> String {
        if self.kind.is_event() && self.meant("id").is_none() {
            return format!(
                "{:?}",
                self.values
                    .iter()
                    .map(|v| v.as_ref().map(|s| &s.meant))
                    .collect::<Vec<_>>()
            );
        }
        self.kind
            .identity
            .iter()
            .map(|n| format!("{:?}", self.meant(n)))
            .collect::<Vec<_>>()
            .join("|")
    }
}

/// A text value for messages: short ones whole, long ones by their length and start.
fn short(s: &str) -> String {
    if s.chars().count() <= 24 {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(12).collect();
        format!("<{} bytes: {head:?}…>", s.len())
    }
}

/// A JSON value for messages, long strings shortened.
fn abbrev(v: &Value) -> String {
    match v {
        Value::String(s) => short(s),
        Value::Array(a) => format!("[{}]", a.iter().map(abbrev).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", short(k), abbrev(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

impl fmt::Debug for Rec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.name, abbrev(&self.json()))
    }
}

// ---------------------------------------------------------------------------------------
// Strategies: values at the edges the validator accepts, and one step past them.

const CHARS_1: &[&str] = &[
    "a", "Z", "0", "9", " ", ".", "\"", "\\", "'", "%", "_", "\u{1}", "\u{1f}", "\u{7f}", "\t",
    "\n",
];
const CHARS_2: &[&str] = &[
    "é", "ß", "Ω", "\u{300}", "\u{301}", "א", "ع", "\u{80}", "\u{85}", "\u{9f}", "\u{a0}",
    "\u{5c1}",
];
const CHARS_3: &[&str] = &[
    "€", "中", "\u{200b}", "\u{200d}", "\u{200e}", "\u{202e}", "\u{2028}", "\u{2029}", "\u{fdd0}",
    "\u{fdef}", "\u{fffe}", "\u{ffff}", "\u{feff}", "\u{fffd}", "\u{e000}", "\u{fe0f}",
];
const CHARS_4: &[&str] = &[
    "𝄞",
    "😀",
    "👩",
    "💻",
    "\u{1f3fb}",
    "\u{10ffff}",
    "\u{1fffe}",
    "\u{e0001}",
    "\u{f0000}",
    "𠀀",
];
/// Sequences of several characters: ZWJ emoji, a combining accent, bidi overrides, jamo.
const SEQUENCES: &[&str] = &[
    "👩\u{200d}💻",
    "🏳\u{fe0f}\u{200d}🌈",
    "e\u{301}",
    "\u{202e}abc\u{202c}",
    "\u{1100}\u{1161}\u{11a8}",
    "\r\n",
    "ﷺ",
];
/// Short texts that SQL, JSON or a number parser might take for something else.
const LITERALS: &[&str] = &[
    "0",
    "007",
    "-0",
    "1e5",
    " ",
    "null",
    "NULL",
    "true",
    "'",
    "''",
    "\"",
    "\\",
    "%",
    "_",
    "a%b_c",
    "' OR '1'='1",
    "\u{feff}",
    "e\u{301}",
    "👩\u{200d}💻",
    ".",
    "..",
    "1.",
    ".1",
    "1.02",
    "1.2",
    "01.2",
    "99999999999999999999999999.1",
    "\u{1}",
    "\u{7f}",
];

fn chars_of(width: usize) -> &'static [&'static str] {
    [CHARS_1, CHARS_2, CHARS_3, CHARS_4][width - 1]
}

/// Exactly `target` bytes: `pieces` repeated while the next one fits, then `x`s (fewer
/// than 4, the widest piece's width, unless a sequence was cut).
fn fill(pieces: &[String], target: usize) -> String {
    let mut s = String::with_capacity(target);
    'outer: loop {
        for p in pieces {
            if s.len() + p.len() > target {
                break 'outer;
            }
            s.push_str(p);
        }
    }
    while s.len() < target {
        s.push('x');
    }
    s
}

fn any_piece() -> BoxedStrategy<String> {
    prop_oneof![
        select(CHARS_1),
        select(CHARS_2),
        select(CHARS_3),
        select(CHARS_4),
        select(SEQUENCES)
    ]
    .prop_map(String::from)
    .boxed()
}

/// What a long text repeats: characters of one width (1024 bytes of 1-, 2- or 4-byte
/// characters land on the limit exactly), or a mix; or enough random pieces to fill the
/// limit without repeating, which compress as little as text can (a store's index may
/// compress what it keeps).
fn pieces() -> BoxedStrategy<Vec<String>> {
    prop_oneof![
        (1..=4usize).prop_flat_map(|w| prop::collection::vec(
            select(chars_of(w)).prop_map(String::from),
            1..5
        )),
        prop::collection::vec(any_piece(), 1..10),
        (1..=4usize).prop_flat_map(|w| prop::collection::vec(scalar(w), MAX_TEXT_BYTES / w)),
        prop::collection::vec(
            prop_oneof![scalar(1), scalar(2), scalar(3), scalar(4), any_piece()],
            MAX_TEXT_BYTES
        ),
    ]
    .boxed()
}

/// Any character of `width` bytes in UTF-8 but U+0000 (which the validator refuses).
fn scalar(width: usize) -> BoxedStrategy<String> {
    let c = match width {
        1 => prop::char::range('\u{1}', '\u{7f}').boxed(),
        2 => prop::char::range('\u{80}', '\u{7ff}').boxed(),
        3 => prop_oneof![
            prop::char::range('\u{800}', '\u{d7ff}'),
            prop::char::range('\u{e000}', '\u{ffff}')
        ]
        .boxed(),
        _ => prop::char::range('\u{10000}', '\u{10ffff}').boxed(),
    };
    c.prop_map(String::from).boxed()
}

/// Text of exactly `target` bytes.
fn text_of(target: usize) -> BoxedStrategy<String> {
    pieces().prop_map(move |p| fill(&p, target)).boxed()
}

/// A text value the validator accepts: mostly at the length limit.
fn edge_text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => text_of(MAX_TEXT_BYTES),
        1 => prop::collection::vec(any_piece(), 1..4).prop_map(|p| p.concat()),
        1 => select(LITERALS).prop_map(String::from),
    ]
    .boxed()
}

/// A version (a text compared part by part): long digit runs, leading zeros, non-ASCII
/// digits, empty parts; often at the length limit.
fn version_text() -> BoxedStrategy<String> {
    let part = prop_oneof![
        "[0-9]{1,40}",
        Just("0000".to_string()),
        Just("١٢".to_string()),
        "[a-z]{1,3}",
        Just(String::new()),
    ];
    (prop::collection::vec(part, 1..6), any::<bool>())
        .prop_map(|(parts, full)| {
            let v = parts.join(".");
            if full || v.is_empty() {
                fill(&[v, ".".into()], MAX_TEXT_BYTES)
            } else {
                v
            }
        })
        .boxed()
}

/// One step past the length limit: up to 1,024 bytes, then one character of 1 to 4 bytes
/// that crosses it.
fn past_text() -> BoxedStrategy<String> {
    (1..=4usize)
        .prop_flat_map(|w| {
            (
                select(chars_of(w)),
                (MAX_TEXT_BYTES + 1 - w)..=MAX_TEXT_BYTES,
                pieces(),
            )
        })
        .prop_map(|(c, len, p)| {
            let mut s = fill(&p, len);
            s.push_str(c);
            assert!(s.len() > MAX_TEXT_BYTES);
            s
        })
        .boxed()
}

/// A UTC offset in minutes within -14:00 ..= +14:00: the ends, the odd ones, or any.
fn offset() -> BoxedStrategy<i32> {
    prop_oneof![
        select(&[-840, -780, -720, -570, -1, 0, 1, 330, 345, 525, 765, 840][..]),
        -840..=840i32,
    ]
    .boxed()
}

/// An instant given in nanoseconds, written at `offset` (or, when that local time is past
/// year 9999, at the offset's negative), meaning `micros`.
fn written(nanos: i128, micros: i64, offset: i32, nine: bool, zulu: bool) -> Sent {
    let text = write_time(nanos, offset, nine, zulu)
        .or_else(|| write_time(nanos, -offset.abs(), nine, zulu))
        .expect("writable at a negative offset");
    Sent {
        json: json!(text),
        meant: Meant::Time(micros),
    }
}

/// An hour start: the first and last of the range, their neighbours, any.
fn arb_hour() -> BoxedStrategy<Sent> {
    let last = max_hour();
    prop_oneof![
        Just(MIN_MICROS),
        Just(MIN_MICROS + MICROS_PER_HOUR),
        Just(last),
        Just(last - MICROS_PER_HOUR),
        (0..=last / MICROS_PER_HOUR).prop_map(|h| h * MICROS_PER_HOUR),
    ]
    .prop_flat_map(|t| (Just(t), offset(), any::<bool>(), any::<bool>()))
    .prop_map(|(t, off, nine, zulu)| written(i128::from(t) * NANOS_PER_MICRO, t, off, nine, zulu))
    .boxed()
}

/// An instant: the ends of the range and their neighbours, whole seconds, any; written
/// with nine fraction digits, the ones past the microsecond cut.
fn arb_instant() -> BoxedStrategy<Sent> {
    let max = max_record_micros();
    prop_oneof![
        Just(MIN_MICROS),
        Just(MIN_MICROS + 1),
        Just(max),
        Just(max - 1),
        Just(max - max % MICROS_PER_SECOND),
        Just(MIN_MICROS + 250_000),
        // A fraction with trailing zeros (`.25`, `.12`): printed without them.
        (MIN_MICROS..=max).prop_map(|t| t - t % 10_000),
        MIN_MICROS..=max,
    ]
    .prop_flat_map(|t| {
        (
            Just(t),
            0..NANOS_PER_MICRO,
            offset(),
            any::<bool>(),
            any::<bool>(),
        )
    })
    .prop_map(|(t, extra, off, nine, zulu)| {
        let nanos = i128::from(t) * NANOS_PER_MICRO + if nine { extra } else { 0 };
        written(nanos, t, off, nine, zulu)
    })
    .boxed()
}

fn arb_day() -> BoxedStrategy<Sent> {
    let max = max_day();
    prop_oneof![Just(0), Just(1), Just(max), Just(max - 1), 0..=max]
        .prop_map(|d| Sent {
            json: json!(iso_date(d)),
            meant: Meant::Day(d),
        })
        .boxed()
}

/// A count at 0 (`-0` as a number and as a string too) or `i64::MAX`, in every form.
fn arb_count() -> BoxedStrategy<Sent> {
    let max = i64::MAX;
    prop_oneof![
        Just((json!(0), 0)),
        Just((json!("0"), 0)),
        Just((json!("-0"), 0)),
        Just((json!(MINUS_ZERO), 0)),
        Just((json!("-000"), 0)),
        Just((json!(max), max)),
        Just((json!(max.to_string()), max)),
        Just((json!(format!("000{max}")), max)),
        Just((json!(max - 1), max - 1)),
        (0..=max).prop_map(|n| (json!(n.to_string()), n)),
        (0..1000i64).prop_map(|n| (json!(n), n)),
    ]
    .prop_map(|(json, n)| Sent {
        json,
        meant: Meant::Count(n),
    })
    .boxed()
}

fn text_sent(s: String) -> Sent {
    Sent {
        json: json!(s),
        meant: Meant::Text(s),
    }
}

/// The identities other records refer to: users' e-mails and api_keys, groups' ids and
/// names, each distinct.
#[derive(Debug, Clone)]
struct Pools {
    emails: Vec<String>,
    api_keys: Vec<String>,
    group_ids: Vec<String>,
    group_names: Vec<String>,
}

/// Makes every text of `v` distinct from the others and from `taken` (prefixing an index,
/// then cutting back to the limit at a character boundary).
fn distinct(v: &mut [String], taken: &mut HashSet<String>) {
    for (i, s) in v.iter_mut().enumerate() {
        while !taken.insert(s.clone()) {
            let mut t = format!("{i}~{s}");
            while t.len() > MAX_TEXT_BYTES {
                t.pop();
            }
            *s = t;
        }
    }
}

fn arb_pools() -> BoxedStrategy<Pools> {
    (1..=3usize, 1..=3usize)
        .prop_flat_map(|(users, groups)| {
            (
                prop::collection::vec(edge_text(), users),
                prop::collection::vec(edge_text(), users),
                prop::collection::vec(edge_text(), groups),
                prop::collection::vec(edge_text(), groups),
            )
        })
        .prop_map(
            |(mut emails, mut api_keys, mut group_ids, mut group_names)| {
                for v in [&mut emails, &mut api_keys, &mut group_ids, &mut group_names] {
                    distinct(v, &mut HashSet::new());
                }
                Pools {
                    emails,
                    api_keys,
                    group_ids,
                    group_names,
                }
            },
        )
        .boxed()
}

/// Whether a record field is a version (a data source reads it as one).
fn is_version(kind: &RecordKind, name: &str) -> bool {
    SOURCES.iter().any(|s| {
        s.record.name == kind.name
            && s.column_field(name)
                .is_some_and(|f| f.ty == ValueType::Version)
    })
}

/// A value for a field, by its type; `api_key` of usage records mostly names a user, a
/// user's `groups` the pool's groups.
fn arb_value(
    kind: &'static RecordKind,
    f: &'static RecordField,
    pools: &Pools,
) -> BoxedStrategy<Sent> {
    match f.ty {
        RecordType::Text if f.name == "api_key" => {
            prop_oneof![3 => select(pools.api_keys.clone()), 1 => edge_text()]
                .prop_map(text_sent)
                .boxed()
        }
        RecordType::Text if is_version(kind, f.name) => prop_oneof![edge_text(), version_text()]
            .prop_map(text_sent)
            .boxed(),
        RecordType::Text => edge_text().prop_map(text_sent).boxed(),
        RecordType::Hour => arb_hour(),
        RecordType::Timestamp => arb_instant(),
        RecordType::Day => arb_day(),
        RecordType::Count => arb_count(),
        RecordType::Bool => any::<bool>()
            .prop_map(|b| Sent {
                json: json!(b),
                meant: Meant::Bool(b),
            })
            .boxed(),
        RecordType::Enum(ids) => select(ids).prop_map(|s| text_sent(s.to_string())).boxed(),
        RecordType::GroupIds => {
            let n = pools.group_ids.len();
            (
                subsequence(pools.group_ids.clone(), 0..=n),
                prop::option::of(edge_text()),
            )
                .prop_map(|(mut ids, unknown)| {
                    // A group not loaded (yet): the user is a member once it is.
                    ids.extend(unknown.filter(|u| !u.is_empty()));
                    Sent {
                        json: json!(ids),
                        meant: Meant::Groups(ids),
                    }
                })
                .boxed()
        }
    }
}

/// A record of `kind`. Users take the e-mail and api_key of the pool's `slot`, groups its
/// id and name (`None`: new ones); users always have `signup_time` (its default is the
/// time of the write, which the evaluator's copy cannot know).
fn arb_record(kind: &'static RecordKind, pools: &Pools, slot: Option<usize>) -> BoxedStrategy<Rec> {
    let fields: Vec<BoxedStrategy<Option<Sent>>> = kind
        .fields
        .iter()
        .map(|f| {
            let pooled = |v: &[String]| -> Option<BoxedStrategy<Option<Sent>>> {
                slot.map(|i| Just(Some(text_sent(v[i].clone()))).boxed())
            };
            let own = match (kind.name, f.name) {
                ("users", "email") => pooled(&pools.emails),
                ("users", "api_key") => pooled(&pools.api_keys),
                ("groups", "group_id") => pooled(&pools.group_ids),
                ("groups", "group_name") => pooled(&pools.group_names),
                _ => None,
            };
            let fresh = matches!(
                (kind.name, f.name),
                ("users", "email" | "api_key") | ("groups", "group_id" | "group_name")
            );
            own.unwrap_or_else(|| {
                let value = if fresh {
                    edge_text().prop_map(text_sent).boxed()
                } else {
                    arb_value(kind, f, pools)
                };
                if f.required || f.name == "signup_time" {
                    value.prop_map(Some).boxed()
                } else {
                    prop::option::weighted(0.7, value).boxed()
                }
            })
        })
        .collect();
    fields
        .prop_map(move |values| {
            let mut r = Rec { kind, values };
            order_cycle(&mut r);
            r
        })
        .boxed()
}

/// A billing cycle ends after it starts: swaps the bounds, or drops an end equal to the
/// start.
fn order_cycle(r: &mut Rec) {
    let (Some(i), Some(j)) = (
        r.kind.position("billing_cycle_start"),
        r.kind.position("billing_cycle_end"),
    ) else {
        return;
    };
    let times = |r: &Rec| match (&r.values[i], &r.values[j]) {
        (
            Some(Sent {
                meant: Meant::Time(a),
                ..
            }),
            Some(Sent {
                meant: Meant::Time(b),
                ..
            }),
        ) => Some((*a, *b)),
        _ => None,
    };
    if let Some((start, end)) = times(r) {
        if start > end {
            r.values.swap(i, j);
        } else if start == end {
            r.values[j] = None;
        }
    }
}

/// Values one step past an edge of the type, as JSON; `None` for types without one.
fn past_value(ty: RecordType) -> Option<BoxedStrategy<Value>> {
    let max = max_record_micros();
    let last = max_hour();
    Some(match ty {
        RecordType::Text => past_text().prop_map(|s| json!(s)).boxed(),
        RecordType::GroupIds => past_text().prop_map(|s| json!(["g", s])).boxed(),
        RecordType::Hour => prop_oneof![
            // k hours past the last hour, at an offset that still writes it in year 9999.
            (1..=14i64)
                .prop_flat_map(|k| (Just(k), -840..=(59 - 60 * k as i32)))
                .prop_map(move |(k, off)| (last + k * MICROS_PER_HOUR, off)),
            (1..=14i64, offset()).prop_map(|(k, off)| (MIN_MICROS - k * MICROS_PER_HOUR, off)),
        ]
        .prop_flat_map(|(t, off)| (Just(t), Just(off), any::<bool>()))
        .prop_map(|(t, off, nine)| {
            json!(write_time(i128::from(t) * NANOS_PER_MICRO, off, nine, false).unwrap())
        })
        .boxed(),
        RecordType::Timestamp => prop_oneof![
            // One microsecond (and up to 999 ns more) past the end.
            (0..NANOS_PER_MICRO, -840..=-1i32)
                .prop_map(move |(extra, off)| (i128::from(max + 1) * NANOS_PER_MICRO + extra, off)),
            // 1 ns to 1 ms before the start: cut to microseconds, still before it.
            (1..=1_000_000i128, offset()).prop_map(|(n, off)| (-n, off)),
        ]
        .prop_map(|(nanos, off)| json!(write_time(nanos, off, true, false).unwrap()))
        .boxed(),
        RecordType::Day => select(&["1969-12-31", "10000-01-01", "0001-01-01"][..])
            .prop_map(|s| json!(s))
            .boxed(),
        RecordType::Count => select(vec![
            json!("9223372036854775808"),
            json!(9_223_372_036_854_775_808u64),
            json!(u64::MAX),
            json!(-1),
            json!("-1"),
            json!(i64::MIN),
        ])
        .boxed(),
        RecordType::Bool | RecordType::Enum(_) => return None,
    })
}

/// An `Ingest` that must be refused: a valid new record and one with a value past an
/// edge, in either order.
#[derive(Clone)]
struct Refused {
    records: Vec<Rec>,
    bad: usize,
    field: &'static str,
}

impl fmt::Debug for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "records[{}].{} in {:?}",
            self.bad, self.field, self.records
        )
    }
}

fn arb_refused(pools: &Pools) -> BoxedStrategy<Refused> {
    let options: Vec<(&'static RecordKind, &'static RecordField)> = KINDS
        .iter()
        .flat_map(|k| k.fields.iter().map(move |f| (*k, f)))
        .filter(|(_, f)| past_value(f.ty).is_some())
        .collect();
    let pools = pools.clone();
    select(options)
        .prop_flat_map(move |(kind, f)| {
            (
                Just(f),
                arb_record(kind, &pools, None),
                arb_record(kind, &pools, None),
                past_value(f.ty).unwrap(),
                any::<bool>(),
            )
        })
        .prop_map(|(f, good, mut bad, value, first)| {
            let i = bad.kind.position(f.name).unwrap();
            bad.values[i] = Some(Sent {
                json: value,
                meant: Meant::Refused,
            });
            let (records, bad) = if first {
                (vec![bad, good], 0)
            } else {
                (vec![good, bad], 1)
            };
            Refused {
                records,
                bad,
                field: f.name,
            }
        })
        .boxed()
}

/// One case: a fresh team's records of every kind (in [`KINDS`] order), caps set on its
/// scopes, refused batches, and the offsets the reads use.
#[derive(Clone)]
struct Case {
    pools: Pools,
    batches: Vec<Vec<Rec>>,
    /// (scope: 0 team, 1 group, 2 user; pool index; cap).
    caps: Vec<(u8, usize, i64)>,
    refused: Vec<Refused>,
    /// The offset of the third `date UTC±HH:MM` read.
    date_offset: i32,
    /// The offset time filter values are written in.
    filter_offset: i32,
    /// Which record a filter takes its value from.
    pick: usize,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Case {{")?;
        for (k, b) in KINDS.iter().zip(&self.batches) {
            writeln!(f, "  {}: {b:?}", k.name)?;
        }
        writeln!(f, "  caps: {:?}", self.caps)?;
        writeln!(f, "  refused: {:?}", self.refused)?;
        write!(
            f,
            "  date_offset: {}, filter_offset: {}, pick: {} }}",
            self.date_offset, self.filter_offset, self.pick
        )
    }
}

fn arb_case() -> BoxedStrategy<Case> {
    arb_pools()
        .prop_flat_map(|pools| {
            let batches: Vec<BoxedStrategy<Vec<Rec>>> = KINDS
                .iter()
                .map(|k| -> BoxedStrategy<Vec<Rec>> {
                    match k.name {
                        "users" | "groups" => {
                            let n = if k.name == "users" {
                                pools.emails.len()
                            } else {
                                pools.group_ids.len()
                            };
                            let each: Vec<_> =
                                (0..n).map(|i| arb_record(k, &pools, Some(i))).collect();
                            // A later record with the first one's identity replaces it.
                            (each, prop::option::of(arb_record(k, &pools, Some(0))))
                                .prop_map(|(mut v, again)| {
                                    v.extend(again);
                                    v
                                })
                                .boxed()
                        }
                        "billing" => {
                            prop::collection::vec(arb_record(k, &pools, None), 0..=2).boxed()
                        }
                        _ => prop::collection::vec(arb_record(k, &pools, None), 1..=4).boxed(),
                    }
                })
                .collect();
            let cap = prop_oneof![Just(0i64), Just(1_000_000_000i64), 0..=1_000_000_000i64];
            (
                Just(pools.clone()),
                batches,
                prop::collection::vec((0..3u8, 0..3usize, cap), 0..4),
                prop::collection::vec(arb_refused(&pools), 1..=3),
                -720..=840i32,
                offset(),
                any::<usize>(),
            )
        })
        .prop_map(
            |(pools, batches, caps, mut refused, date_offset, filter_offset, pick)| {
                // Refused records take identities no accepted record has, so a stored one shows.
                let mut taken: HashSet<String> = pools
                    .emails
                    .iter()
                    .chain(&pools.api_keys)
                    .chain(&pools.group_ids)
                    .chain(&pools.group_names)
                    .cloned()
                    .collect();
                for r in &mut refused {
                    for rec in &mut r.records {
                        for name in ["email", "api_key", "group_id", "group_name"] {
                            if !matches!(rec.kind.name, "users" | "groups") {
                                continue;
                            }
                            if let Some(i) = rec.kind.position(name)
                                && let Some(Sent {
                                    meant: Meant::Text(s),
                                    ..
                                }) = &rec.values[i]
                            {
                                let mut v = [s.clone()];
                                distinct(&mut v, &mut taken);
                                let [s] = v;
                                rec.values[i] = Some(text_sent(s));
                            }
                        }
                    }
                }
                Case {
                    pools,
                    batches,
                    caps,
                    refused,
                    date_offset,
                    filter_offset,
                    pick,
                }
            },
        )
        .boxed()
}

// ---------------------------------------------------------------------------------------
// The evaluator's copy of the team, and the records as this file expects them stored.

/// The evaluator's copy of a case's team (its data, billing and caps), and the records as
/// this file expects them stored.
struct Oracle {
    data: TeamData,
    billing: Billing,
    caps: HashMap<CapScope, i64>,
    /// The records that must be stored, per kind (by name), a later one with an earlier
    /// one's identity in its place; worked out from the meant values.
    stored: BTreeMap<&'static str, Vec<Rec>>,
    /// Every `billing` record accepted, in order.
    billing_records: Vec<Rec>,
}

impl Oracle {
    fn new(created: Timestamp) -> Oracle {
        Oracle {
            data: TeamData::new(),
            billing: Billing::new(Plan::Enterprise, 12, 500, created),
            caps: HashMap::new(),
            stored: BTreeMap::new(),
            billing_records: Vec::new(),
        }
    }

    /// Takes an accepted batch: parsed from the very text sent, as the server parses it.
    fn ingest(&mut self, kind: &'static RecordKind, sent: &str, recs: &[Rec]) {
        let body: Value = usage_core::wire::decode::parse_json(sent.as_bytes()).unwrap();
        let records = body["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| parse_record(kind, v, &JsonPath::root()).unwrap())
            .collect();
        let batch = Batch { kind, records };
        let now = Timestamp::now();
        if kind == &BILLING {
            for r in &batch.records {
                self.billing.apply(r, now);
            }
            self.billing_records.extend(recs.iter().cloned());
            return;
        }
        let prepared = self.data.prepare(&batch, now).unwrap().into_owned();
        self.data.apply(&prepared);
        let stored = self.stored.entry(kind.name).or_default();
        let mut at: HashMap<String, usize> = stored
            .iter()
            .enumerate()
            .map(|(i, s)| (s.identity(), i))
            .collect();
        for r in recs {
            match at.get(&r.identity()) {
                Some(&i) => stored[i] = r.clone(),
                None => {
                    at.insert(r.identity(), stored.len());
                    stored.push(r.clone());
                }
            }
        }
    }

    fn stored(&self, kind: &RecordKind) -> &[Rec] {
        self.stored.get(kind.name).map_or(&[], Vec::as_slice)
    }

    /// The e-mail of the stored user with this api_key.
    fn email_of(&self, api_key: &str) -> Option<&str> {
        self.stored(&USERS)
            .iter()
            .find(|u| u.text("api_key") == api_key)
            .map(|u| u.text("email"))
    }

    /// The evaluator's answer to a read: status and body text.
    fn answer(&self, op: &str, body: &str, now: Timestamp) -> (u16, String) {
        fn decoded<T: Request>(body: &str) -> Decoded<T> {
            decode::<T>(body.as_bytes()).unwrap()
        }
        let limits = Limits::default();
        let out = |r: Result<String, EvalError>| match r {
            Ok(s) => (200, s),
            Err(EvalError::GroupNotFound(_)) => (404, String::new()),
            Err(e) => panic!("the evaluator: {e}"),
        };
        match op {
            "Analytics" => {
                let d = decoded::<AnalyticsRequest>(body);
                let plan =
                    validate::with_decoded(&d, |r, _| validate::analytics(r, &limits)).unwrap();
                out(self.data.analytics(&plan, &limits).map(|r| to_text(&r)))
            }
            "UserPageAnalytics" => {
                let d = decoded::<UserPageAnalyticsRequest>(body);
                let plan = validate::with_decoded(&d, |r, _| validate::user_page(r)).unwrap();
                out(self.data.user_page(&plan).map(|r| to_text(&r)))
            }
            "AgentAnalytics" => {
                let d = decoded::<AgentAnalyticsRequest>(body);
                let plan = validate::with_decoded(&d, |r, _| validate::agent(r, &limits)).unwrap();
                out(self.data.agent(&plan).map(|r| to_text(&r)))
            }
            "GetUsageConfig" => {
                let d = decoded::<GetUsageConfigRequest>(body);
                let scope = validate::with_decoded(&d, validate::get_usage_config).unwrap();
                let exists = match &scope {
                    CapScope::Team => true,
                    CapScope::Group(g) => self.data.has_group_id(g),
                    CapScope::User(e) => self.data.user(e).is_some(),
                };
                if !exists {
                    return (404, String::new());
                }
                let cap = self.caps.get(&scope);
                (
                    200,
                    cap.map_or("{}".to_string(), |c| format!("{{\"addOnCreditCap\":{c}}}")),
                )
            }
            "GetTeamCreditBalance" => {
                if self.billing.plan != Plan::Enterprise {
                    return (403, String::new());
                }
                (
                    200,
                    serde_json::to_string(&self.billing.response(now)).unwrap(),
                )
            }
            _ => unreachable!("{op}"),
        }
    }
}

/// An answer's JSON text, as the server writes it.
fn to_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap()
}

// ---------------------------------------------------------------------------------------
// Reads: every request that reads the records, and what each answer must hold.

/// A column of a data source: a field, with its offset for `date UTC±HH:MM`.
#[derive(Clone, Copy)]
struct Col {
    field: &'static Field,
    offset: i32,
}

impl Col {
    fn name(self) -> String {
        if self.field.is_local_date() {
            local_date_name(self.offset)
        } else {
            self.field.name.to_string()
        }
    }
}

/// The value of `col` for a stored record as section 3 prints it, worked out here.
fn col_value(o: &Oracle, col: Col, r: &Rec) -> String {
    let f = col.field;
    match f.expr {
        Expr::Column(c) => match (r.meant(c), f.ty) {
            (Some(Meant::Time(t)), ValueType::Hour | ValueType::Timestamp) => go_time(*t),
            (Some(Meant::Text(s)), _) => s.clone(),
            (Some(Meant::Count(n)), _) => n.to_string(),
            (None, ValueType::Int) => "0".into(),
            (Some(Meant::Bool(b)), _) => b.to_string(),
            (m, ty) => panic!("{}.{c} = {m:?} as {ty:?}", r.kind.name),
        },
        Expr::Time => go_time(r.time()),
        Expr::UtcDate => iso_date(r.time().div_euclid(MICROS_PER_DAY)),
        Expr::LocalDate => iso_date(
            (r.time() + i64::from(col.offset) * 60 * MICROS_PER_SECOND).div_euclid(MICROS_PER_DAY),
        ),
        Expr::UserMetadata => match o.email_of(r.text("api_key")) {
            Some(e) => serde_json::to_string(&json!({ "email": e })).unwrap(),
            None => "{}".into(),
        },
        other => panic!("{other:?} is not a value of one record"),
    }
}

/// The value a filter on `col` is given to match `r`: time fields in RFC 3339 at
/// `offset`, the others as printed.
fn filter_value(o: &Oracle, col: Col, r: &Rec, offset: i32) -> String {
    let micros = match (col.field.expr, col.field.ty) {
        (Expr::Time, _) => Some(r.time()),
        (Expr::Column(c), ValueType::Hour | ValueType::Timestamp) => match r.meant(c) {
            Some(Meant::Time(t)) => Some(*t),
            _ => None,
        },
        _ => None,
    };
    match micros {
        Some(t) => write_time(i128::from(t) * NANOS_PER_MICRO, offset, false, true)
            .or_else(|| write_time(i128::from(t) * NANOS_PER_MICRO, -offset.abs(), false, true))
            .unwrap(),
        None => col_value(o, col, r),
    }
}

/// What an `Analytics` query's items must be, besides the evaluator's answer.
#[derive(Clone)]
enum Expect {
    /// Only the evaluator's answer.
    Evaluator,
    /// One item per stored record (where `col` prints `value`), the columns' values as
    /// aliases `c0`, `c1`, …
    Rows {
        kind: &'static RecordKind,
        cols: Vec<Col>,
        only: Option<(Col, String)>,
    },
    /// PCW: one item, each output a sum over the stored records (where `col` prints `value`).
    Pcw {
        kind: &'static RecordKind,
        cols: Vec<Col>,
        only: Option<(Col, String)>,
    },
}

/// The `date UTC±HH:MM` offsets read: both ends, and the case's.
fn local_offsets(case: &Case) -> [i32; 3] {
    [-720, 840, case.date_offset]
}

/// Every column of a source, the local date once per offset.
fn columns(src: &SourceSpec, offsets: &[i32], pred: impl Fn(&Field) -> bool) -> Vec<Col> {
    let mut out = Vec::new();
    for field in src.fields.iter().filter(|f| pred(f)) {
        if field.is_local_date() {
            out.extend(offsets.iter().map(|&offset| Col { field, offset }));
        } else {
            out.push(Col { field, offset: 0 });
        }
    }
    out
}

fn selection(col: Col, agg: Agg, alias: &str) -> Value {
    json!({"field": col.name(), "name": alias, "aggregation_function": agg.as_str()})
}

fn raw_selections(cols: &[Col]) -> Value {
    cols.iter()
        .enumerate()
        .map(|(i, c)| selection(*c, Agg::Unspecified, &format!("c{i}")))
        .collect()
}

/// Every query of a source over the case's records: raw rows of every field, every
/// aggregation of every field, a group-by on each group field and on all of them, and an
/// EQUAL and an ordered filter on every filter field with a stored record's value.
fn queries(o: &Oracle, case: &Case, src: &'static SourceSpec) -> Vec<(Value, Expect)> {
    let ds = src.source.as_str();
    let stored = o.stored(src.record);
    let offsets = local_offsets(case);
    let mut out = Vec::new();
    let selectable = columns(src, &offsets, |f| f.select && f.role != Role::Distinct);
    if !src.groupable {
        // PCW: one item over the records, whatever its selections.
        out.push((
            json!({"data_source": ds, "selections": raw_selections(&selectable)}),
            Expect::Pcw {
                kind: src.record,
                cols: selectable.clone(),
                only: None,
            },
        ));
    } else {
        out.push((
            json!({"data_source": ds, "selections": raw_selections(&selectable)}),
            Expect::Rows {
                kind: src.record,
                cols: selectable.clone(),
                only: None,
            },
        ));
        let mut aggregated = Vec::new();
        for col in columns(src, &offsets, |f| f.select) {
            for agg in col.field.aggs.iter().copied() {
                if agg != Agg::Unspecified || col.field.role == Role::Distinct {
                    aggregated.push(selection(col, agg, &format!("a{}", aggregated.len())));
                }
            }
        }
        out.push((
            json!({"data_source": ds, "selections": aggregated}),
            Expect::Evaluator,
        ));
        let groups = columns(src, &offsets[2..], |f| f.group);
        let count = columns(src, &[], |f| {
            f.select && f.role != Role::Metric && f.aggs.contains(&Agg::Count)
        })[0];
        let mut measures = vec![selection(count, Agg::Count, "n")];
        for m in columns(src, &[], |f| f.role == Role::Metric && f.select) {
            for agg in [Agg::Sum, Agg::Max, Agg::Min, Agg::Avg] {
                if m.field.aggs.contains(&agg) {
                    measures.push(selection(m, agg, &format!("m{}", measures.len())));
                }
            }
        }
        for g in &groups {
            out.push((
                json!({"data_source": ds, "selections": measures,
                       "aggregations": [{"field": g.name(), "name": "g"}]}),
                Expect::Evaluator,
            ));
        }
        let all: Vec<Col> = groups.iter().copied().take(10).collect();
        out.push((
            json!({"data_source": ds,
                   "selections": all.iter().enumerate().map(|(i, c)| selection(*c, Agg::Unspecified, &format!("u{i}"))).collect::<Vec<_>>(),
                   "aggregations": all.iter().enumerate().map(|(i, c)| json!({"field": c.name(), "name": format!("g{i}")})).collect::<Vec<_>>()}),
            Expect::Evaluator,
        ));
    }
    if stored.is_empty() {
        return out;
    }
    let r = &stored[case.pick % stored.len()];
    for col in columns(src, &offsets[2..], |f| f.filter) {
        if col.field.is_local_date() {
            let day = (r.time() + i64::from(col.offset) * 60 * MICROS_PER_SECOND)
                .div_euclid(MICROS_PER_DAY);
            if !(0..=max_day()).contains(&day) {
                // A local date in 1969 or 10000: section 11 lets a filter value outside
                // the range be refused, and the validator does.
                continue;
            }
        }
        let value = filter_value(o, col, r, case.filter_offset);
        let printed = col_value(o, col, r);
        let only = Some((col, printed));
        let equal = json!({"data_source": ds, "selections": raw_selections(&selectable),
                           "filters": [{"name": col.name(), "filter": "QUERY_FILTER_EQUAL", "value": value}]});
        let expect = if src.groupable {
            Expect::Rows {
                kind: src.record,
                cols: selectable.clone(),
                only,
            }
        } else {
            Expect::Pcw {
                kind: src.record,
                cols: selectable.clone(),
                only,
            }
        };
        out.push((equal, expect));
        if col.field.ty != ValueType::Bool {
            for op in ["QUERY_FILTER_GE", "QUERY_FILTER_LESS_THAN"] {
                out.push((
                    json!({"data_source": ds, "selections": raw_selections(&selectable),
                           "filters": [{"name": col.name(), "filter": op, "value": value}]}),
                    Expect::Evaluator,
                ));
            }
        }
    }
    out
}

/// One read: an operation, its body, and what to check besides the evaluator's answer.
struct Read {
    op: &'static str,
    body: Value,
    what: String,
    check: Check,
}

/// What a read's answer must hold besides the evaluator's answer.
enum Check {
    Evaluator,
    Analytics(Vec<Expect>),
    Agent,
    Users,
    Members(String),
    Cap(Option<i64>),
    Balance,
}

fn reads(o: &Oracle, case: &Case, probes: &Probes) -> Vec<Read> {
    let mut out = Vec::new();
    let min = write_time(0, -840, false, false).unwrap();
    let max = rfc3339(max_micros());
    for src in SOURCES {
        let qs = queries(o, case, src);
        for (n, chunk) in qs.chunks(Limits::default().query_requests).enumerate() {
            let (bodies, expects): (Vec<Value>, Vec<Expect>) = chunk.iter().cloned().unzip();
            out.push(Read {
                op: "Analytics",
                body: json!({ "query_requests": bodies }),
                what: format!("{} queries, part {n}", src.source.as_str()),
                check: Check::Analytics(expects),
            });
        }
    }
    // PCW's request-level range at both ends of the range: every record is in it.
    let pcw = SOURCES.iter().find(|s| !s.groupable).unwrap();
    let cols = columns(pcw, &[], |f| f.select);
    out.push(Read {
        op: "Analytics",
        body: json!({"start_timestamp": min, "end_timestamp": max,
                     "query_requests": [{"data_source": pcw.source.as_str(), "selections": raw_selections(&cols)}]}),
        what: "PCW over the whole range".into(),
        check: Check::Analytics(vec![Expect::Pcw {
            kind: pcw.record,
            cols,
            only: None,
        }]),
    });
    let groups = o.stored(&GROUPS);
    for g in groups {
        let name = g.text("group_name");
        let raw: Vec<Value> = SOURCES
            .iter()
            .filter(|s| s.groupable)
            .map(|s| {
                let cols = columns(s, &local_offsets(case), |f| {
                    f.select && f.role != Role::Distinct
                });
                json!({"data_source": s.source.as_str(), "selections": raw_selections(&cols)})
            })
            .collect();
        out.push(Read {
            op: "Analytics",
            body: json!({"group_name": name, "query_requests": raw}),
            what: format!("raw rows of group {}", short(name)),
            check: Check::Evaluator,
        });
    }
    let agent_all = json!([{"agent_lines": {}}, {"agent_runs": {}}, {"agent_tool_usage": {}}]);
    out.push(Read {
        op: "AgentAnalytics",
        body: json!({ "query_requests": agent_all }),
        what: "every agent record".into(),
        check: Check::Agent,
    });
    for (what, extra) in [
        ("editor only", json!({"ide_types": ["editor"]})),
        (
            "the whole range",
            json!({"start_timestamp": min, "end_timestamp": max}),
        ),
        (
            "the pool's e-mails",
            json!({ "emails": case.pools.emails.iter().chain(&probes.emails).collect::<Vec<_>>() }),
        ),
    ] {
        let mut body = extra;
        body["query_requests"] = agent_all.clone();
        out.push(Read {
            op: "AgentAnalytics",
            body,
            what: what.into(),
            check: Check::Evaluator,
        });
    }
    out.push(Read {
        op: "UserPageAnalytics",
        body: json!({}),
        what: "every user".into(),
        check: Check::Users,
    });
    out.push(Read {
        op: "UserPageAnalytics",
        body: json!({"start_timestamp": min, "end_timestamp": max}),
        what: "the whole range".into(),
        check: Check::Evaluator,
    });
    for g in groups {
        let name = g.text("group_name");
        out.push(Read {
            op: "UserPageAnalytics",
            body: json!({ "group_name": name }),
            what: format!("group {}", short(name)),
            check: Check::Members(g.text("group_id").to_string()),
        });
        let mut body = json!({ "group_name": name });
        body["query_requests"] = agent_all.clone();
        out.push(Read {
            op: "AgentAnalytics",
            body,
            what: format!("group {}", short(name)),
            check: Check::Evaluator,
        });
    }
    let mut scopes = vec![(json!({"team_level": true}), CapScope::Team)];
    for id in case.pools.group_ids.iter().chain(&probes.group_ids) {
        scopes.push((json!({ "group_id": id }), CapScope::Group(id.clone())));
    }
    for e in case.pools.emails.iter().chain(&probes.emails) {
        scopes.push((json!({ "user_email": e }), CapScope::User(e.clone())));
    }
    for (body, scope) in scopes {
        out.push(Read {
            op: "GetUsageConfig",
            what: abbrev(&body),
            body,
            check: Check::Cap(o.caps.get(&scope).copied()),
        });
    }
    out.push(Read {
        op: "GetTeamCreditBalance",
        body: json!({}),
        what: "the balance".into(),
        check: Check::Balance,
    });
    out
}

/// Identities that only refused records had: reads of them must find nothing.
#[derive(Default)]
struct Probes {
    emails: Vec<String>,
    group_ids: Vec<String>,
}

// ---------------------------------------------------------------------------------------
// Checking answers.

/// The server of a case, with the team's key.
struct Http {
    client: reqwest::Client,
    url: String,
    key: String,
    store: &'static str,
}

impl Http {
    async fn post(&self, op: &str, mut body: Value) -> Reply {
        body["service_key"] = json!(self.key);
        self.send(op, body.to_string()).await
    }

    async fn send(&self, op: &str, text: String) -> Reply {
        Reply::of(
            self.client
                .post(format!("{}/api/v1/{op}", self.url))
                .header("content-type", "application/json")
                .body(text),
        )
        .await
    }
}

/// Where two texts first differ, with some context.
fn first_difference(got: &str, want: &str) -> String {
    let at = got
        .char_indices()
        .zip(want.chars())
        .find(|((_, a), b)| a != b)
        .map_or(got.len().min(want.len()), |((i, _), _)| i);
    let around = |s: &str| -> String {
        let mut start = at.saturating_sub(120).min(s.len());
        while !s.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = (at + 120).min(s.len());
        while !s.is_char_boundary(end) {
            end += 1;
        }
        format!("{:?}", &s[start..end])
    };
    format!(
        "first difference at byte {at} (lengths {} and {}):\n  got:  {}\n  want: {}",
        got.len(),
        want.len(),
        around(got),
        around(want)
    )
}

/// Items of one query as rows of (alias, value).
fn items(result: &Value) -> Vec<Vec<(String, String)>> {
    result["responseItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            i["item"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect()
        })
        .collect()
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn rows_text(rows: &[Vec<(String, String)>]) -> String {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|(k, v)| format!("{k}={}", short(v)))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n    ")
}

/// PCW's outputs over `recs`, each from the sums the schema names for it.
fn pcw_value(field: &Field, recs: &[&Rec]) -> String {
    let sums = field.expr.pcw_sums().expect("a PCW output");
    let sum = |cols: &[&str]| -> i128 {
        recs.iter()
            .map(|r| cols.iter().map(|c| i128::from(r.count(c))).sum::<i128>())
            .sum()
    };
    match sums.denominator {
        None => sum(sums.numerator).to_string(),
        Some(den) => {
            let d = sum(den);
            if d == 0 {
                "0".into()
            } else {
                format!("{}", sum(sums.numerator) as f64 / d as f64)
            }
        }
    }
}

fn check_analytics(o: &Oracle, expect: &Expect, got: &Value) -> Result<(), String> {
    match expect {
        Expect::Evaluator => Ok(()),
        Expect::Rows { kind, cols, only } => {
            let want: Vec<Vec<(String, String)>> = o
                .stored(kind)
                .iter()
                .filter(|r| only.as_ref().is_none_or(|(c, v)| col_value(o, *c, r) == *v))
                .map(|r| {
                    cols.iter()
                        .enumerate()
                        .map(|(i, c)| (format!("c{i}"), col_value(o, *c, r)))
                        .collect()
                })
                .collect();
            let got = items(got);
            if sorted(got.clone()) == sorted(want.clone()) {
                Ok(())
            } else {
                Err(format!(
                    "rows\n  got:\n    {}\n  want (any order):\n    {}",
                    rows_text(&got),
                    rows_text(&want)
                ))
            }
        }
        Expect::Pcw { kind, cols, only } => {
            let recs: Vec<&Rec> = o
                .stored(kind)
                .iter()
                .filter(|r| only.as_ref().is_none_or(|(c, v)| col_value(o, *c, r) == *v))
                .collect();
            let want = vec![
                cols.iter()
                    .enumerate()
                    .map(|(i, c)| (format!("c{i}"), pcw_value(c.field, &recs)))
                    .collect::<Vec<_>>(),
            ];
            let got = items(got);
            if got == want {
                Ok(())
            } else {
                Err(format!(
                    "PCW sums\n  got:  {}\n  want: {}",
                    rows_text(&got),
                    rows_text(&want)
                ))
            }
        }
    }
}

fn saturated(n: i128) -> String {
    n.min(i128::from(i64::MAX)).to_string()
}

/// AgentAnalytics over every record, worked out here: lines per UTC day, one entry per
/// run, counts per tool (sums shown up to `i64::MAX`).
fn check_agent(o: &Oracle, got: &Value) -> Result<(), String> {
    let kind = |name: &str| KINDS.iter().find(|k| k.name == name).unwrap();
    let mut days: BTreeMap<i64, (i128, i128)> = BTreeMap::new();
    for r in o.stored(kind("agent_lines")) {
        let e = days.entry(r.time()).or_default();
        e.0 += i128::from(r.count("lines_suggested"));
        e.1 += i128::from(r.count("lines_accepted"));
    }
    let lines: Vec<Value> = days
        .iter()
        .map(|(day, (s, a))| {
            let mut e = json!({"day": rfc3339(*day), "linesSuggested": saturated(*s)});
            if *a != 0 {
                e["linesAccepted"] = json!(saturated(*a));
            }
            e
        })
        .collect();
    let runs: Vec<String> = o
        .stored(kind("agent_runs"))
        .iter()
        .map(|r| {
            let day = r.time() - r.time().rem_euclid(MICROS_PER_DAY);
            let mut e = json!({"day": rfc3339(day), "model": r.text("model"), "mode": r.text("mode"),
                               "messagesSent": r.count("messages_sent").to_string(), "agentId": r.text("agent_id")});
            if r.count("prompts_used") != 0 {
                e["promptsUsed"] = json!(r.count("prompts_used").to_string());
            }
            e.to_string()
        })
        .collect();
    let mut tools: BTreeMap<String, i128> = BTreeMap::new();
    for r in o.stored(kind("agent_tool_usage")) {
        *tools.entry(r.text("tool").to_string()).or_default() += i128::from(r.count("count"));
    }
    let tools: Vec<String> = tools
        .iter()
        .map(|(t, n)| json!({"tool": t, "count": saturated(*n)}).to_string())
        .collect();
    let results = &got["queryResults"];
    let got_lines = &results[0]["agentLines"]["agentLines"];
    let as_strings =
        |v: &Value| -> Vec<String> { v.as_array().unwrap().iter().map(Value::to_string).collect() };
    let mut problems = Vec::new();
    if *got_lines != json!(lines) {
        problems.push(format!(
            "agentLines: got {}, want {}",
            abbrev(got_lines),
            abbrev(&json!(lines))
        ));
    }
    let got_runs = as_strings(&results[1]["agentRuns"]["agentRuns"]);
    if sorted(got_runs.clone()) != sorted(runs.clone()) {
        problems.push(format!(
            "agentRuns: got {got_runs:?}, want (any order) {runs:?}"
        ));
    }
    let got_tools = as_strings(&results[2]["agentToolUsage"]["agentToolUsage"]);
    if sorted(got_tools.clone()) != sorted(tools.clone()) {
        problems.push(format!(
            "agentToolUsage: got {got_tools:?}, want (any order) {tools:?}"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// Each stored user's own fields, as sent.
fn check_users(o: &Oracle, got: &Value) -> Result<(), String> {
    let got = got["userTableStats"].as_array().unwrap();
    let mut want: Vec<&Rec> = o.stored(&USERS).iter().collect();
    want.sort_by(|a, b| a.text("email").as_bytes().cmp(b.text("email").as_bytes()));
    if got.len() != want.len() {
        return Err(format!("{} users, want {}", got.len(), want.len()));
    }
    for (g, u) in got.iter().zip(want) {
        let mut w = json!({
            "name": u.text("name"),
            "email": u.text("email"),
            "apiKey": u.text("api_key"),
            "teamStatus": u.meant("team_status").map_or("USER_TEAM_STATUS_APPROVED".to_string(), |_| u.text("team_status").to_string()),
        });
        if let Some(Meant::Time(t)) = u.meant("signup_time") {
            w["signupTime"] = json!(rfc3339(*t));
        }
        if u.meant("disable_vendor") == Some(&Meant::Bool(true)) {
            w["disableVendor"] = json!(true);
        }
        let mut keys: Vec<&str> = w.as_object().unwrap().keys().map(String::as_str).collect();
        keys.push("disableVendor");
        let mine: Map<String, Value> = keys
            .into_iter()
            .filter_map(|k| g.get(k).map(|v| (k.to_string(), v.clone())))
            .collect();
        if Value::Object(mine.clone()) != w {
            return Err(format!(
                "user: got {}, want {}",
                abbrev(&Value::Object(mine)),
                abbrev(&w)
            ));
        }
    }
    Ok(())
}

/// The members of a group: the stored users whose `groups` name its id.
fn check_members(o: &Oracle, group_id: &str, got: &Value) -> Result<(), String> {
    let got: Vec<&str> = got["userTableStats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["email"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = o
        .stored(&USERS)
        .iter()
        .filter(|u| matches!(u.meant("groups"), Some(Meant::Groups(g)) if g.iter().any(|x| x == group_id)))
        .map(|u| u.text("email"))
        .collect();
    if sorted(got.clone()) == sorted(want.clone()) {
        Ok(())
    } else {
        Err(format!(
            "members: got {:?}, want {:?}",
            got.iter().map(|s| short(s)).collect::<Vec<_>>(),
            want.iter().map(|s| short(s)).collect::<Vec<_>>()
        ))
    }
}

/// The balance from the billing records as sent, where no cycle rolled: every record set
/// the cycle, and the last cycle has not ended.
fn check_balance(o: &Oracle, status: u16, got: &Value, now: i64) -> Result<(), String> {
    let recs = &o.billing_records;
    let all_cycles = recs.iter().all(|r| {
        r.meant("billing_cycle_start").is_some() && r.meant("billing_cycle_end").is_some()
    });
    if recs.is_empty() || !all_cycles {
        return Ok(());
    }
    let last = |name: &str| recs.iter().rev().find_map(|r| r.meant(name).cloned());
    let count = |name: &str, default: i64| match last(name) {
        Some(Meant::Count(n)) => n,
        _ => default,
    };
    let time = |name: &str| match last(name) {
        Some(Meant::Time(t)) => t,
        m => panic!("{name}: {m:?}"),
    };
    let (start, end) = (time("billing_cycle_start"), time("billing_cycle_end"));
    let plan = match last("plan") {
        Some(Meant::Text(p)) => p,
        _ => "enterprise".into(),
    };
    if plan != "enterprise" {
        return if status == 403 {
            Ok(())
        } else {
            Err(format!("plan {plan}: got {status}, want 403"))
        };
    }
    if now >= end {
        return Ok(());
    }
    let want = json!({
        "promptCreditsPerSeat": count("prompt_credits_per_seat", 500),
        "numSeats": count("num_seats", 12),
        "addOnCreditsAvailable": count("add_on_credits_available", 0),
        "addOnCreditsUsed": count("add_on_credits_used", 0),
        "billingCycleStart": rfc3339(start),
        "billingCycleEnd": rfc3339(end),
    });
    if status == 200 && *got == want {
        Ok(())
    } else {
        Err(format!("balance: got {status} {got}, want {want}"))
    }
}

/// Sends every read and checks each answer against the evaluator and against the values
/// sent; `when` names the moment in failure messages.
async fn check_reads(http: &Http, o: &Oracle, case: &Case, probes: &Probes, when: &str) {
    for read in reads(o, case, probes) {
        let mut body = read.body.clone();
        body["service_key"] = json!(http.key);
        let text = body.to_string();
        let before = Timestamp::now();
        let r = http.send(read.op, text.clone()).await;
        let after = Timestamp::now();
        let place = format!("{} {when}: {} ({})", http.store, read.op, read.what);
        let (status, want) = o.answer(read.op, &text, before);
        assert_eq!(
            r.status,
            status,
            "{place}: status; body {}",
            abbrev(&r.body)
        );
        if status != 200 {
            continue;
        }
        // The balance depends on now: the evaluator's answer from before or after.
        assert!(
            r.text == want || r.text == o.answer(read.op, &text, after).1,
            "{place}: the answer is not the evaluator's; {}",
            first_difference(&r.text, &want)
        );
        let direct = match &read.check {
            Check::Evaluator => Ok(()),
            Check::Analytics(expects) => {
                let results = r.body["queryResults"].as_array().unwrap();
                expects
                    .iter()
                    .zip(results)
                    .enumerate()
                    .try_for_each(|(i, (e, got))| {
                        check_analytics(o, e, got).map_err(|m| format!("query {i}: {m}"))
                    })
            }
            Check::Agent => check_agent(o, &r.body),
            Check::Users => check_users(o, &r.body),
            Check::Members(id) => check_members(o, id, &r.body),
            Check::Cap(cap) => {
                let want = cap.map_or(json!({}), |c| json!({ "addOnCreditCap": c }));
                if r.body == want {
                    Ok(())
                } else {
                    Err(format!("cap: got {}, want {want}", r.text))
                }
            }
            Check::Balance => check_balance(o, r.status, &r.body, before.0),
        };
        if let Err(m) = direct {
            panic!("{place}: a value did not come back as sent: {m}");
        }
    }
}

/// The body of an `Ingest` of `recs`, as sent (with `-0` written as a JSON number).
fn ingest_text(kind: &RecordKind, recs: &[Rec], key: &str) -> String {
    let body = json!({
        "service_key": key,
        "kind": kind.name,
        "records": recs.iter().map(Rec::json).collect::<Vec<_>>(),
    });
    let marker = serde_json::to_string(MINUS_ZERO).unwrap();
    body.to_string().replace(&marker, "-0")
}

/// One case on the server of `t`: a fresh team, its records ingested, caps set, refused
/// batches sent, then every read before and (for a durable store) after a restart.
async fn run_case(mut t: TestServer, kind: TestStore, case: &Case) -> TestServer {
    let team = add_team(t.store.as_ref(), "roundtrip", Plan::Enterprise).await;
    let key = make_key(t.store.as_ref(), &team, &ALL).await;
    let created = t
        .store
        .teams()
        .await
        .unwrap()
        .into_iter()
        .find(|x| x.id == team)
        .unwrap()
        .created;
    let mut oracle = Oracle::new(created);
    let mut http = Http {
        client: reqwest::Client::new(),
        url: t.server.url(),
        key,
        store: kind.name(),
    };
    for (k, recs) in KINDS.iter().zip(&case.batches) {
        if recs.is_empty() {
            continue;
        }
        let text = ingest_text(k, recs, &http.key);
        let r = http.send("Ingest", text.clone()).await;
        assert!(
            r.status == 200 && r.body == json!({"accepted": recs.len()}),
            "{}: Ingest of {} records {recs:?}: {} {}",
            kind.name(),
            k.name,
            r.status,
            abbrev(&r.body)
        );
        oracle.ingest(k, &text, recs);
    }
    for &(which, i, cap) in &case.caps {
        let (body, scope) = match which {
            0 => (json!({"team_level": true}), CapScope::Team),
            1 => {
                let id = &case.pools.group_ids[i % case.pools.group_ids.len()];
                (json!({ "group_id": id }), CapScope::Group(id.clone()))
            }
            _ => {
                let e = &case.pools.emails[i % case.pools.emails.len()];
                (json!({ "user_email": e }), CapScope::User(e.clone()))
            }
        };
        let mut body = body;
        body["set_add_on_credit_cap"] = json!(cap);
        let r = http.post("UsageConfig", body.clone()).await;
        assert_eq!(
            r.status,
            200,
            "{}: UsageConfig {}: {}",
            kind.name(),
            abbrev(&body),
            r.text
        );
        oracle.caps.insert(scope, cap);
    }
    let mut probes = Probes::default();
    for refused in &case.refused {
        let k = refused.records[0].kind;
        let text = ingest_text(k, &refused.records, &http.key);
        let r = http.send("Ingest", text).await;
        let want = vec![(
            format!("records[{}].{}", refused.bad, refused.field),
            "invalid_value".to_string(),
        )];
        assert!(
            r.status == 400 && r.body["code"] == "invalid_argument" && r.details() == want,
            "{}: Ingest of {refused:?}: {} {}; want 400 with details {want:?}",
            kind.name(),
            r.status,
            abbrev(&r.body)
        );
        for rec in &refused.records {
            let (name, into) = match k.name {
                "users" => ("email", &mut probes.emails),
                "groups" => ("group_id", &mut probes.group_ids),
                _ => continue,
            };
            if let Some(Meant::Text(s)) = rec.meant(name) {
                into.push(s.clone());
            }
        }
    }
    check_reads(&http, &oracle, case, &probes, "before the restart").await;
    // `memory:` opened again is a new, empty store: only the durable stores restart.
    if kind.durable() {
        t = t.reopen(fast_config()).await;
        http.url = t.server.url();
        check_reads(&http, &oracle, case, &probes, "after the restart").await;
    }
    t
}

fn runner_config() -> RunnerConfig {
    RunnerConfig {
        cases: 32,
        max_shrink_iters: 16,
        failure_persistence: None,
        ..RunnerConfig::default()
    }
}

on_every_store!(sync edge_values_round_trip);
/// The property on one store: one server for all cases (a case whose check panics leaves
/// none, and the next one starts afresh).
fn edge_values_round_trip(kind: TestStore) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let start = || {
        rt.block_on(TestServer::start(kind, fast_config(), async |store| {
            add_team(store, "other", Plan::Enterprise).await
        }))
    };
    let slot: Mutex<Option<TestServer>> = Mutex::new(None);
    let mut runner = TestRunner::new(runner_config());
    let result = runner.run(&arb_case(), |case| {
        let t = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        let t = t.unwrap_or_else(&start);
        let t = rt.block_on(run_case(t, kind, &case));
        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(t);
        Ok(())
    });
    if let Some(t) = slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
        rt.block_on(t.server.shutdown());
    }
    if let Err(e) = result {
        panic!("{}: {e}", kind.name());
    }
}

/// The offsets of the sweep: every quarter hour from -14:00 to +14:00 (every offset in
/// use, `+05:45` and `+12:45` among them) and odd minutes.
fn sweep_offsets() -> Vec<i32> {
    let mut v: Vec<i32> = (-56..=56).map(|q| q * 15).collect();
    v.extend([-839, -1, 1, 344, 839]);
    v
}

/// A case whose records of every kind with an hour or a timestamp hold both ends of the
/// range written in every offset of [`sweep_offsets`] (the last hour and instant only where
/// the offset can write them before year 10000, else at the negative offset), one record
/// per end and offset: events by their `id`, the others by a text identity field. The
/// other values are drawn from the strategies with a fixed seed.
fn sweep_case() -> Case {
    let mut runner = TestRunner::deterministic();
    let mut case = arb_case().new_tree(&mut runner).unwrap().current();
    for (kind, batch) in KINDS.iter().copied().zip(&mut case.batches) {
        let Some(time) = kind.time.and_then(|t| kind.field(t)) else {
            continue;
        };
        let ends: [(i128, i64); 2] = match time.ty {
            RecordType::Hour => [
                (0, MIN_MICROS),
                (i128::from(max_hour()) * NANOS_PER_MICRO, max_hour()),
            ],
            RecordType::Timestamp => [
                (0, MIN_MICROS),
                (
                    i128::from(max_record_micros()) * NANOS_PER_MICRO + 999,
                    max_record_micros(),
                ),
            ],
            _ => continue,
        };
        let label = if kind.is_event() {
            "id"
        } else {
            kind.identity
                .iter()
                .copied()
                .find(|n| {
                    *n != "api_key" && kind.field(n).is_some_and(|f| f.ty == RecordType::Text)
                })
                .expect("a text identity field")
        };
        let base = arb_record(kind, &case.pools, None)
            .new_tree(&mut runner)
            .unwrap()
            .current();
        batch.clear();
        for off in sweep_offsets() {
            for (i, (nanos, micros)) in ends.iter().enumerate() {
                let mut r = base.clone();
                let t = kind.position(time.name).unwrap();
                r.values[t] = Some(written(
                    *nanos,
                    *micros,
                    off,
                    time.ty == RecordType::Timestamp,
                    false,
                ));
                let l = kind.position(label).unwrap();
                r.values[l] = Some(text_sent(format!("{}@{}", zone(off, false), i)));
                batch.push(r);
            }
        }
    }
    case
}

on_every_store!(sync every_offset_round_trips);
/// Both ends of the range in every offset ([`sweep_case`]), read back before and after a
/// restart like a case of [`edge_values_round_trip`].
fn every_offset_round_trips(kind: TestStore) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let t = rt.block_on(TestServer::start(kind, fast_config(), async |store| {
        add_team(store, "other", Plan::Enterprise).await
    }));
    let t = rt.block_on(run_case(t, kind, &sweep_case()));
    rt.block_on(t.server.shutdown());
}

/// This file's own forms against the contract's examples and the range's ends, so the
/// values expected above do not lean on the core's formatting.
#[test]
fn the_forms_this_file_expects() {
    let t = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().timestamp_micros();
    assert_eq!(
        go_time(t("2025-05-01T13:00:07.25Z")),
        "2025-05-01 13:00:07.25 +0000 UTC"
    );
    assert_eq!(
        rfc3339(t("2025-05-01T13:00:07.250Z")),
        "2025-05-01T13:00:07.25Z"
    );
    assert_eq!(rfc3339(max_micros()), "9999-12-31T23:59:59.999999Z");
    assert_eq!(rfc3339(max_record_micros()), "9999-12-31T09:59:59.999999Z");
    assert_eq!(go_time(max_hour()), "9999-12-31 09:00:00 +0000 UTC");
    assert_eq!(rfc3339(MIN_MICROS), "1970-01-01T00:00:00Z");
    assert_eq!(iso_date(max_day()), "9999-12-31");
    assert_eq!(iso_date(max_day() + 1), "10000-01-01");
    assert_eq!(iso_date(-1), "1969-12-31");
    assert_eq!(
        write_time(0, -840, false, false).unwrap(),
        "1969-12-31T10:00:00-14:00"
    );
    assert_eq!(
        write_time(i128::from(max_micros()) * 1000 + 999, -345, true, false).unwrap(),
        "9999-12-31T18:14:59.999999999-05:45"
    );
    assert_eq!(
        write_time(i128::from(max_micros()) * 1000, 1, false, true),
        None
    );
    assert_eq!(
        write_time(0, 0, true, true).unwrap(),
        "1970-01-01T00:00:00.000000000Z"
    );
    let text = fill(&["𝄞".to_string(), "é".to_string()], MAX_TEXT_BYTES);
    assert_eq!((text.len(), text.chars().count()), (1024, 341));
}
