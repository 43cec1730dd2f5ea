//! `GET /metrics`: the server's counters in the Prometheus text format (OpenMetrics 1.0, as
//! encoded by the `prometheus-client` crate), for an operator's scraper.
//!
//! - `usage_http_requests_total{operation, status}`: answered requests. `operation` is the
//!   operation's name, `healthz`, `metrics`, `openapi`, `dashboard` (the dashboard's
//!   files) or `-` (any other path, so that made-up paths cannot grow the label set).
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
//!   `catch_up`, `eviction`) and the bytes it holds (none on the memory store, and
//!   without a budget).
//!
//! - `usage_queries{state}`: queries now `running` in a slot of the pool and `waiting` for
//!   one (their team's or the pool's; `http::gate`).
//! - `usage_v2_answers_total{source}`: answers of the v2 endpoints, `computed` or `kept`
//!   from an earlier page of the same request (`http::pages`).
//!
//! The endpoint is not authenticated by service keys (it names no team). `serve
//! --metrics-listen ADDR` moves it to an address of its own, off the API's listener.

use std::sync::atomic::Ordering;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::store::Store;

/// The content type of the answer.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Request {
    operation: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Operation {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Event {
    event: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct State {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Source {
    source: &'static str,
}

fn latency_histogram() -> Histogram {
    // 100 µs to about 13 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<Request, Counter>,
    latency: Family<Operation, Histogram, fn() -> Histogram>,
    rate_limited: Family<Operation, Counter>,
    ingested: Family<Kind, Counter>,
    store_records: Family<Kind, Gauge>,
    cache_events: Family<Event, Counter>,
    cache_bytes: Gauge,
    queries: Family<State, Gauge>,
    v2_answers: Family<Source, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every family registered, no sample yet.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("usage");
        let requests = Family::<Request, Counter>::default();
        let latency: Family<Operation, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency_histogram);
        let rate_limited = Family::<Operation, Counter>::default();
        let ingested = Family::<Kind, Counter>::default();
        let store_records = Family::<Kind, Gauge>::default();
        let cache_events = Family::<Event, Counter>::default();
        let cache_bytes = Gauge::default();
        let queries = Family::<State, Gauge>::default();
        let v2_answers = Family::<Source, Counter>::default();
        registry.register(
            "queries",
            "Queries running in a slot of the pool, and waiting for one",
            queries.clone(),
        );
        registry.register(
            "v2_answers",
            "Answers of the v2 endpoints: computed, or kept from an earlier page",
            v2_answers.clone(),
        );
        registry.register(
            "http_requests",
            "Requests answered, by operation and status",
            requests.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Time from reading a request to its answer, by operation",
            latency.clone(),
        );
        registry.register(
            "rate_limited",
            "Requests refused by the rate limit (429), by operation",
            rate_limited.clone(),
        );
        registry.register(
            "records_ingested",
            "Records accepted by Ingest, by kind",
            ingested.clone(),
        );
        registry.register(
            "store_records",
            "Records held by the store, by kind (PostgreSQL: the planner's estimate)",
            store_records.clone(),
        );
        registry.register(
            "cache_events",
            "The store's team-data cache: hits, pushdowns, loads, catch-ups, evictions",
            cache_events.clone(),
        );
        registry.register(
            "cache_bytes",
            "Bytes of team columns held by the PostgreSQL store's cache",
            cache_bytes.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            rate_limited,
            ingested,
            store_records,
            cache_events,
            cache_bytes,
            queries,
            v2_answers,
        }
    }

    /// A v2 answer, computed or kept from an earlier page.
    pub(crate) fn v2_answer(&self, kept: bool) {
        let source = if kept { "kept" } else { "computed" };
        self.v2_answers.get_or_create(&Source { source }).inc();
    }

    /// One answered request.
    pub fn request(&self, operation: &'static str, status: u16, seconds: f64) {
        self.requests
            .get_or_create(&Request { operation, status })
            .inc();
        self.latency
            .get_or_create(&Operation { operation })
            .observe(seconds);
        if status == 429 {
            self.rate_limited
                .get_or_create(&Operation { operation })
                .inc();
        }
    }

    /// Records of a kind accepted by `Ingest`.
    pub fn ingested(&self, kind: &'static str, n: u64) {
        self.ingested.get_or_create(&Kind { kind }).inc_by(n);
    }

    /// The text of a scrape, with the store's figures and the queries running and waiting
    /// (`queries`) read now.
    pub(crate) async fn render(&self, store: &dyn Store, queries: (u64, u64)) -> String {
        for (state, n) in [("running", queries.0), ("waiting", queries.1)] {
            self.queries
                .get_or_create(&State { state })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        match store.record_counts().await {
            Ok(counts) => {
                for (kind, n) in counts {
                    self.store_records
                        .get_or_create(&Kind { kind })
                        .set(i64::try_from(n).unwrap_or(i64::MAX));
                }
            }
            Err(e) => tracing::warn!(error = %e, "the store's record counts are unavailable"),
        }
        if let Some(c) = store.cache_stats() {
            for (event, n) in [
                ("hit", c.hits),
                ("pushdown", c.pushdowns),
                ("load", c.loads),
                ("catch_up", c.catch_ups),
                ("eviction", c.evictions),
            ] {
                // The store keeps the totals; the counter shows them as they are.
                self.cache_events
                    .get_or_create(&Event { event })
                    .inner()
                    .store(n, Ordering::Relaxed);
            }
            self.cache_bytes
                .set(i64::try_from(c.bytes).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
