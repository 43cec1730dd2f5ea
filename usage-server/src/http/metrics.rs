//! `GET /metrics`: the server's counters for an operator's scraper, in the Prometheus text
//! format 0.0.4, or OpenMetrics 1.0 when the scraper's `Accept` asks for it (`text`: one
//! model, both formats, the negotiation). docs/metrics.md lists every family.
//!
//! - `usage_http_requests_total{operation, status}`: answered requests. `operation` is
//!   `label`: the operation's name, `healthz`, `metrics`, `openapi`, `dashboard` (the
//!   dashboard's files), `docs` (the API reference's files), a v2 endpoint, or `-` (any
//!   other path, so that made-up paths
//!   cannot grow the label set). The request log's `op` is the same label.
//! - `usage_http_request_duration_seconds{operation}`: a histogram of the same requests'
//!   time from the first byte read to the answer.
//! - `usage_rate_limited_total{operation}`: requests refused with 429.
//! - `usage_records_ingested_total{kind}`: records accepted by `Ingest`.
//! - `usage_store_records{kind}`: records held per kind, read from the store at each
//!   scrape: the memory and SQLite stores count the teams they hold in memory (every team,
//!   once `serve` has started, within SQLite's cache budget), the PostgreSQL store gives
//!   its planner's live-row estimate.
//! - `usage_cache_events_total{event}` and `usage_cache_bytes`: the SQLite or PostgreSQL
//!   store's team-data cache (`hit`, `pushdown`: answered without it, `load`,
//!   `catch_up`, `eviction`) and the bytes it holds (0 on the memory store, and without a
//!   budget).
//! - `usage_queries{state}`: queries now `running` in a slot of the pool and `waiting` for
//!   one (their team's or the pool's; `http::gate`).
//! - `usage_v2_answers_total{source}`: answers of the v2 endpoints, `computed` or `kept`
//!   from an earlier page of the same request (`http::pages`).
//! - `usage_build_info{version}`: 1, with the server's version.
//! - `process_*`: the process's memory, CPU time, file descriptors and start time
//!   (`process`, Linux only).
//!
//! Every family with a closed label set has its series from the start, at 0: every
//! `operation` label (with status 200 for the requests, 404 for `-`; 429 counted only for
//! the endpoints that take a key), every record kind, cache event, query state and v2
//! source. The endpoint is not authenticated by service keys (it names no team). `serve
//! --metrics-listen ADDR` moves it to an address of its own, off the API's listener.

mod process;
mod text;

pub use text::Format;

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use usage_core::schema::records;

use self::process::Process;
use self::text::{Family, Series, Type, Value};
use super::{Op, dashboard, reference, v2};
use crate::store::{CacheStats, Store};

/// The latency histogram's upper bounds: 100 µs doubling to about 13 s.
const BOUNDS: [f64; 18] = {
    let mut b = [0.0001; 18];
    let mut i = 1;
    while i < b.len() {
        b[i] = b[i - 1] * 2.0;
        i += 1;
    }
    b
};

/// The `operation` labels of the paths that are not an endpoint taking a key.
const KEYLESS: [&str; 6] = ["healthz", "metrics", "openapi", "dashboard", "docs", "-"];

/// The `operation` label of a request in the metrics and the request log: a fixed set
/// ([`operations`]), whatever the path.
pub(super) fn label(op: Option<Op>, path: &str) -> &'static str {
    match (op, path) {
        (Some(op), _) => op.name(),
        (None, "/healthz") => "healthz",
        (None, "/metrics") => "metrics",
        (None, "/openapi.json") => "openapi",
        (None, p) if dashboard::asset(p).is_some() => "dashboard",
        (None, p) if reference::asset(p).is_some() => "docs",
        (None, p) => v2::label(p).unwrap_or("-"),
    }
}

/// Every `operation` label [`label`] gives, and whether its requests take a service key
/// (and so may be refused by the rate limit).
fn operations() -> impl Iterator<Item = (&'static str, bool)> {
    let keyed = Op::ALL
        .into_iter()
        .map(Op::name)
        .chain(v2::LABELS)
        .chain(v2::webhooks::LABELS);
    keyed
        .map(|l| (l, true))
        .chain(KEYLESS.into_iter().map(|l| (l, false)))
}

/// One operation's latencies: observations per bucket (the last: above every bound),
/// their sum.
#[derive(Clone)]
struct Latency {
    counts: [u64; BOUNDS.len() + 1],
    sum: f64,
}

impl Latency {
    fn observe(&mut self, seconds: f64) {
        let i = BOUNDS.partition_point(|b| *b < seconds);
        self.counts[i] += 1;
        self.sum += seconds;
    }

    fn value(&self) -> Value {
        Value::Histogram {
            bounds: &BOUNDS,
            counts: self.counts[..BOUNDS.len()].to_vec(),
            sum: self.sum,
            count: self.counts.iter().sum(),
        }
    }
}

/// The counts, under one lock (held for an update or a copy, never across an `await`).
struct State {
    requests: BTreeMap<(&'static str, u16), u64>,
    latency: BTreeMap<&'static str, Latency>,
    rate_limited: BTreeMap<&'static str, u64>,
    ingested: BTreeMap<&'static str, u64>,
    /// The store's last answer (kept when a scrape cannot read it).
    store_records: BTreeMap<&'static str, u64>,
    v2_answers: BTreeMap<&'static str, u64>,
}

/// The server's metrics.
pub struct Metrics {
    state: Mutex<State>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every family with its series of closed label sets, at 0.
    pub fn new() -> Metrics {
        let zero = Latency {
            counts: [0; BOUNDS.len() + 1],
            sum: 0.0,
        };
        let state = State {
            requests: operations()
                .map(|(op, _)| ((op, if op == "-" { 404 } else { 200 }), 0))
                .collect(),
            latency: operations().map(|(op, _)| (op, zero.clone())).collect(),
            rate_limited: operations()
                .filter(|(_, keyed)| *keyed)
                .map(|(op, _)| (op, 0))
                .collect(),
            ingested: records::KINDS.iter().map(|k| (k.name, 0)).collect(),
            store_records: usage_core::eval::TeamData::segment_kinds()
                .map(|k| (k.name, 0))
                .collect(),
            v2_answers: [("computed", 0), ("kept", 0)].into(),
        };
        Metrics {
            state: Mutex::new(state),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A v2 answer, computed or kept from an earlier page.
    pub(crate) fn v2_answer(&self, kept: bool) {
        let source = if kept { "kept" } else { "computed" };
        *self.state().v2_answers.entry(source).or_default() += 1;
    }

    /// One answered request.
    pub fn request(&self, operation: &'static str, status: u16, seconds: f64) {
        let mut s = self.state();
        *s.requests.entry((operation, status)).or_default() += 1;
        s.latency
            .entry(operation)
            .or_insert_with(|| Latency {
                counts: [0; BOUNDS.len() + 1],
                sum: 0.0,
            })
            .observe(seconds);
        if status == 429 {
            *s.rate_limited.entry(operation).or_default() += 1;
        }
    }

    /// Records of a kind accepted by `Ingest`.
    pub fn ingested(&self, kind: &'static str, n: u64) {
        *self.state().ingested.entry(kind).or_default() += n;
    }

    /// The text of a scrape in `format`, with the store's figures, the queries running
    /// and waiting (`queries`) and the process's figures read now.
    pub(crate) async fn render(
        &self,
        store: &dyn Store,
        queries: (u64, u64),
        format: Format,
    ) -> String {
        let counts = store.record_counts().await;
        if let Err(e) = &counts {
            tracing::warn!(error = %e, "the store's record counts are unavailable");
        }
        if let Ok(counts) = counts {
            self.state().store_records.extend(counts);
        }
        let mut families = self.families(store.cache_stats().unwrap_or_default(), queries);
        families.extend(Process::read().families());
        text::encode(&families, format)
    }

    /// The families of `usage_*`, with the cache's figures and the queries given.
    fn families(&self, cache: CacheStats, queries: (u64, u64)) -> Vec<Family> {
        let s = self.state();
        let by = |key: &'static str, map: &BTreeMap<&'static str, u64>| -> Vec<Series> {
            map.iter()
                .map(|(v, n)| Series::new(vec![(key, v.to_string())], Value::Int(*n)))
                .collect()
        };
        let family = |name, help, ty, series| Family {
            name,
            help,
            ty,
            series,
        };
        let requests = s
            .requests
            .iter()
            .map(|((op, status), n)| {
                let labels = vec![
                    ("operation", op.to_string()),
                    ("status", status.to_string()),
                ];
                Series::new(labels, Value::Int(*n))
            })
            .collect();
        let latency = s
            .latency
            .iter()
            .map(|(op, l)| Series::new(vec![("operation", op.to_string())], l.value()))
            .collect();
        let cache_events = [
            ("hit", cache.hits),
            ("pushdown", cache.pushdowns),
            ("load", cache.loads),
            ("catch_up", cache.catch_ups),
            ("eviction", cache.evictions),
        ];
        let one = |labels: Vec<(&'static str, String)>, n| vec![Series::new(labels, Value::Int(n))];
        vec![
            family(
                "usage_http_requests",
                "Requests answered, by operation and status",
                Type::Counter,
                requests,
            ),
            family(
                "usage_http_request_duration_seconds",
                "Time from reading a request to its answer, by operation",
                Type::Histogram,
                latency,
            ),
            family(
                "usage_rate_limited",
                "Requests refused by the rate limit (429), by operation",
                Type::Counter,
                by("operation", &s.rate_limited),
            ),
            family(
                "usage_records_ingested",
                "Records accepted by Ingest, by kind",
                Type::Counter,
                by("kind", &s.ingested),
            ),
            family(
                "usage_store_records",
                "Records held by the store, by kind (PostgreSQL: the planner's estimate)",
                Type::Gauge,
                by("kind", &s.store_records),
            ),
            family(
                "usage_cache_events",
                "The store's team-data cache: hits, pushdowns, loads, catch-ups, evictions",
                Type::Counter,
                by("event", &cache_events.into_iter().collect()),
            ),
            family(
                "usage_cache_bytes",
                "Bytes of team columns held by the store's cache",
                Type::Gauge,
                one(vec![], cache.bytes),
            ),
            family(
                "usage_queries",
                "Queries running in a slot of the pool, and waiting for one",
                Type::Gauge,
                by(
                    "state",
                    &[("running", queries.0), ("waiting", queries.1)].into(),
                ),
            ),
            family(
                "usage_v2_answers",
                "Answers of the v2 endpoints: computed, or kept from an earlier page",
                Type::Counter,
                by("source", &s.v2_answers),
            ),
            family(
                "usage_build",
                "The server's version",
                Type::Info,
                one(vec![("version", env!("CARGO_PKG_VERSION").to_string())], 1),
            ),
        ]
    }
}

#[cfg(test)]
mod tests;
