//! What the benchmarks share: the CSV of synthetic autocomplete records, and the six
//! queries of `shared/bench/QUERIES.md` as service requests. Included by the usage-core
//! bench (`eval`) and the usage-server bench (`postgres`).
#![allow(dead_code)]

use std::fs::File;
use std::io::{BufRead, BufReader};

use serde_json::Value;
use usage_core::eval::TeamData;
use usage_core::load::{Batch, FieldValue, Record};
use usage_core::plan::{AnalyticsPlan, Limits};
use usage_core::schema::records::AUTOCOMPLETE;
use usage_core::time::{Date, MICROS_PER_HOUR, Timestamp};
use usage_core::wire::AnalyticsRequest;
use usage_core::wire::decode::decode;

/// Parses the CSV's `YYYY-MM-DD HH:MM:SS` hour.
pub fn parse_hour(s: &str) -> Option<Timestamp> {
    let d = Date::parse(s.get(..10)?)?;
    let h: i64 = s.get(11..13)?.parse().ok()?;
    Some(Timestamp(d.start().0 + h * MICROS_PER_HOUR))
}

/// Records per batch: the most one `Ingest` request may carry (contract section 9).
pub const BATCH: usize = 10_000;

/// The CSV's records, in file order.
pub fn read_records(
    csv: &str,
) -> std::io::Result<impl Iterator<Item = std::io::Result<Record>> + use<>> {
    let mut reader = BufReader::with_capacity(1 << 20, File::open(csv)?);
    let mut header = String::new();
    reader.read_line(&mut header)?;
    Ok(reader.lines().map(|line| {
        let line = line?;
        let bad = || std::io::Error::other(format!("bad line: {line}"));
        let mut f = [""; 8];
        let mut parts = line.trim_end().split(',');
        for x in &mut f {
            *x = parts.next().ok_or_else(bad)?;
        }
        let hour = parse_hour(f[1]).ok_or_else(bad)?;
        let count = |s: &str| s.parse::<i64>().map(FieldValue::Count).map_err(|_| bad());
        Ok(Record::from_values(
            &AUTOCOMPLETE,
            vec![
                FieldValue::Text(f[0].to_string()),
                FieldValue::Time(hour),
                FieldValue::Text(f[2].to_string()),
                FieldValue::Text(f[3].to_string()),
                FieldValue::Text(f[4].to_string()),
                count(f[5])?,
                count(f[6])?,
                count(f[7])?,
            ],
        ))
    }))
}

/// Loads the CSV into `team` in batches, as `Ingest` would; the rows and the first day.
pub fn load(csv: &str, team: &mut TeamData) -> std::io::Result<(u64, Date)> {
    let mut batch = Vec::with_capacity(BATCH);
    let (mut rows, mut first) = (0u64, Date(i32::MAX));
    for r in read_records(csv)? {
        let r = r?;
        first = first.min(r.time().unwrap_or_default().date());
        batch.push(r);
        rows += 1;
        if batch.len() == BATCH {
            team.apply(&Batch {
                kind: &AUTOCOMPLETE,
                records: std::mem::take(&mut batch),
            });
        }
    }
    team.apply(&Batch {
        kind: &AUTOCOMPLETE,
        records: batch,
    });
    Ok((rows, first))
}

pub use usage_core::testing::bench::queries;

pub fn plan_of(body: &Value) -> AnalyticsPlan {
    let bytes = body.to_string();
    let decoded = decode::<AnalyticsRequest>(bytes.as_bytes()).expect("JSON kinds are right");
    usage_core::validate::analytics(&decoded.request, &Limits::default()).expect("a valid query")
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
