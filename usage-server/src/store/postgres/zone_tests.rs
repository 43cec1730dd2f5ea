//! Local dates in IANA time zones against an independent computation: PostgreSQL's own
//! time-zone code and database (`AT TIME ZONE` over `generate_series`, no table or
//! statement of ours), for every hour of 2024-2026 in zones on both hemispheres, with
//! half-hour and 45-minute offsets, negative DST (Dublin) and a change at midnight
//! (Beirut). Each answer is computed four ways that must agree with it: SQL pushdown,
//! the columnar cache, the in-memory evaluator (the engine's table of spans) and the
//! reference evaluator (jiff, zone by zone).

use usage_core::JsonPath;
use usage_core::eval::TeamData;
use usage_core::eval::reference::Model;
use usage_core::load::{Batch, parse_record};
use usage_core::plan::{AnalyticsPlan, Limits};
use usage_core::schema::records::AUTOCOMPLETE;
use usage_core::time::{Date, MICROS_PER_HOUR, Timestamp};
use usage_core::wire::decode::decode;
use usage_core::wire::{AnalyticsRequest, AnalyticsResponse};

use super::PgStore;
use super::tests::{Engine, Schema, new_team};
use crate::store::CacheConfig;
use crate::store::RecordStore;

const ZONES: &[&str] = &[
    "America/New_York",
    "Europe/Berlin",
    "Europe/Dublin",
    "Australia/Sydney",
    "America/St_Johns",
    "Pacific/Chatham",
    "Asia/Beirut",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
];

/// The first and last hour of the data.
const FROM: &str = "2024-01-01T00:00:00Z";
const TO: &str = "2026-12-31T23:00:00Z";

/// One autocomplete record per hour, `num_acceptances` 1, `num_lines_accepted` the hour
/// of the day (so sums tell hours apart).
fn hourly() -> Batch {
    let (from, to) = (
        Timestamp::parse_rfc3339(FROM).unwrap().0,
        Timestamp::parse_rfc3339(TO).unwrap().0,
    );
    let records = (from..=to)
        .step_by(MICROS_PER_HOUR as usize)
        .map(|t| {
            let r = serde_json::json!({
                "api_key": "k0",
                "hour": Timestamp(t).to_rfc3339(),
                "language": "rust",
                "ide": "vscode",
                "version": "1.0",
                "num_acceptances": 1,
                "num_lines_accepted": (t / MICROS_PER_HOUR) % 24,
                "num_bytes_accepted": 0,
            });
            parse_record(&AUTOCOMPLETE, &r, &JsonPath::root()).unwrap()
        })
        .collect();
    Batch {
        kind: &AUTOCOMPLETE,
        records,
    }
}

fn plan(query: serde_json::Value) -> AnalyticsPlan {
    let body = serde_json::json!({ "query_requests": [query] });
    let req = decode::<AnalyticsRequest>(body.to_string().as_bytes())
        .unwrap()
        .request;
    usage_core::validate::analytics(&req, &Limits::default()).unwrap()
}

/// `(local date, hours, sum of the hour of day)` rows of an answer grouped by date.
fn rows(a: &usage_core::wire::AnalyticsResponse) -> Vec<(String, i64, i64)> {
    a.query_results[0]
        .response_items
        .iter()
        .map(|item| {
            let get = |k: &str| item.item.get(k).unwrap_or_default();
            (
                get("d").to_string(),
                get("n").parse().unwrap(),
                get("h").parse().unwrap(),
            )
        })
        .collect()
}

/// The four computations of an answer: SQL pushdown, the columnar cache, the in-memory
/// evaluator and the reference evaluator.
struct FourWays<'a> {
    pushdown: &'a PgStore,
    cached: &'a PgStore,
    team: &'a str,
    model: &'a TeamData,
    reference: &'a Model,
}

impl FourWays<'_> {
    async fn answer(&self, plan: &AnalyticsPlan) -> [(&'static str, AnalyticsResponse); 4] {
        let limits = Limits::default();
        [
            (
                "pushdown",
                self.pushdown
                    .analytics(self.team, plan, &limits)
                    .await
                    .unwrap(),
            ),
            (
                "cache",
                self.cached
                    .analytics(self.team, plan, &limits)
                    .await
                    .unwrap(),
            ),
            ("evaluator", self.model.analytics(plan, &limits).unwrap()),
            (
                "reference",
                self.reference.analytics(plan, &limits).unwrap(),
            ),
        ]
    }
}

/// `got` equals `want`; otherwise fails naming the first local date that differs.
fn same_rows(got: &[(String, i64, i64)], want: &[(String, i64, i64)], what: &str) {
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "{what}: row {i} of {} is {:?}, PostgreSQL says {:?} (of {})",
            got.len(),
            got.get(i),
            want.get(i),
            want.len()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_dates_in_iana_zones_match_postgresql_across_dst() {
    local_dates_match_postgresql(Engine::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_dates_in_iana_zones_match_postgresql_across_dst_on_citus() {
    local_dates_match_postgresql(Engine::Citus).await;
}

async fn local_dates_match_postgresql(engine: Engine) {
    let schema = Schema::on(engine, "zones").await;
    let pushdown = PgStore::open(&schema.url()).await.unwrap();
    let cached = PgStore::open_with(
        &schema.url(),
        CacheConfig {
            bytes: 1 << 30,
            wait_for_load: true,
        },
    )
    .await
    .unwrap();
    let team = new_team(&pushdown).await;
    let now = Timestamp::parse_rfc3339("2027-01-01T00:00:00Z").unwrap();
    let data = hourly();
    let hours = data.records.len();
    assert_eq!(hours, 3 * 365 * 24 + 24, "2024 is a leap year");
    let mut model = TeamData::new();
    let prepared = model.prepare(&data, now).unwrap().into_owned();
    model.apply(&prepared);
    let mut reference = Model::new();
    reference.apply(&data);
    pushdown.ingest(&team, data, now).await.unwrap();

    let db = schema.client().await;
    let ways = FourWays {
        pushdown: &pushdown,
        cached: &cached,
        team: &team,
        model: &model,
        reference: &reference,
    };
    for zone in ZONES {
        // PostgreSQL's answer: every hour of the span, by local date.
        let expected: Vec<(String, i64, i64)> = db
            .query(
                "SELECT to_char((h AT TIME ZONE $1)::date, 'YYYY-MM-DD'), count(*), \
                 sum(extract(hour FROM h AT TIME ZONE 'UTC')::bigint)::bigint \
                 FROM generate_series($2::text::timestamptz, $3::text::timestamptz, interval '1 hour') h \
                 GROUP BY 1 ORDER BY 1",
                &[zone, &FROM, &TO],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect();
        // Four calendar years of local dates (the first and last may be cut by the
        // offset), every hour counted once.
        assert!((1096..=1098).contains(&expected.len()), "{zone}");
        assert_eq!(
            expected.iter().map(|r| r.1).sum::<i64>(),
            hours as i64,
            "{zone}"
        );
        // Days of 23 and 25 hours where the zone keeps daylight saving time.
        let short = expected.iter().filter(|r| r.1 == 23).count();
        if !["Asia/Kolkata"].contains(zone) {
            assert!(short >= 2, "{zone}: {short} days of 23 hours");
        }

        let by_date = plan(serde_json::json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [
                {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "n"},
                {"field": "num_lines_accepted", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "h"}],
            "aggregations": [{"field": format!("date {zone}"), "name": "d"}]}));
        let answers = ways.answer(&by_date).await;
        for (how, a) in &answers {
            same_rows(&rows(a), &expected, &format!("{zone}: {how}"));
        }

        // Filters on the local date, around every change of offset: each operator against
        // PostgreSQL's count of the hours it keeps.
        let days: Vec<String> = expected
            .iter()
            .filter(|r| r.1 != 24)
            .map(|r| r.0.clone())
            .collect();
        for day in days.iter().take(4) {
            let d = Date::parse(day).unwrap();
            for (op, sym) in [
                ("QUERY_FILTER_EQUAL", "="),
                ("QUERY_FILTER_NOT_EQUAL", "<>"),
                ("QUERY_FILTER_GREATER_THAN", ">"),
                ("QUERY_FILTER_LESS_THAN", "<"),
                ("QUERY_FILTER_GE", ">="),
                ("QUERY_FILTER_LE", "<="),
            ] {
                let want: i64 = db
                    .query_one(
                        &format!(
                            "SELECT count(*) FROM generate_series($2::text::timestamptz, \
                             $3::text::timestamptz, interval '1 hour') h \
                             WHERE (h AT TIME ZONE $1)::date {sym} $4::text::date"
                        ),
                        &[zone, &FROM, &TO, &day],
                    )
                    .await
                    .unwrap()
                    .get(0);
                let filtered = plan(serde_json::json!({
                    "data_source": "QUERY_DATA_SOURCE_USER_DATA",
                    "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "n"}],
                    "filters": [{"name": format!("date {zone}"), "filter": op, "value": d.to_iso()}]}));
                let answers = ways.answer(&filtered).await;
                for (how, a) in &answers {
                    let items = &a.query_results[0].response_items;
                    let got = items
                        .first()
                        .and_then(|i| i.item.get("n"))
                        .filter(|n| !n.is_empty())
                        .map_or(0, |n| n.parse::<i64>().unwrap());
                    assert_eq!(got, want, "{zone}: date {sym} {day}: {how}");
                }
            }
        }
    }
    let stats = cached.cache_stats();
    assert_eq!(stats.loads, 1, "{stats:?}");
}
