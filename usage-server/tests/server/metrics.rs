//! `GET /metrics` read by a real exposition-format parser (`prometheus-parse`): the
//! counters move with the requests sent, by operation and status, and the store's
//! figures are there, on every store.

use std::collections::BTreeMap;

use serde_json::json;
use usage_server::auth::rate::RateConfig;
use usage_server::http::Config;

use crate::common::{Env, TestStore, fast_config};

/// The samples of a scrape: (name, sorted labels) -> value (histograms: their `_count`
/// and `_sum` as samples of those names).
pub(crate) fn scrape(text: &str) -> BTreeMap<(String, Vec<(String, String)>), f64> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("a valid exposition");
    let mut out = BTreeMap::new();
    for s in parsed.samples {
        let mut labels: Vec<(String, String)> = s
            .labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.sort();
        let (name, value) = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => (s.metric, v),
            prometheus_parse::Value::Histogram(buckets) => {
                // The `+Inf` bucket is the count.
                let count = buckets.iter().map(|b| b.count).fold(0.0, f64::max);
                (format!("{}_count", s.metric), count)
            }
            prometheus_parse::Value::Summary(_) => continue,
        };
        out.insert((name, labels), value);
    }
    out
}

fn key(name: &str, labels: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
    let mut l: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    (name.to_string(), l)
}

async fn metrics(env: &Env) -> (u16, String, String) {
    let res = env.client.get(env.url("/metrics")).send().await.unwrap();
    let status = res.status().as_u16();
    let ct = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, res.text().await.unwrap())
}

async fn counters_move_with_requests(store: TestStore) {
    let env = Env::with_config(
        store,
        Config {
            rate: RateConfig {
                per_minute: 1,
                burst: 4,
            },
            ..fast_config()
        },
    )
    .await;
    let q = json!({"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "a"}]}]});
    // A first query: the SQLite store counts the teams it holds in memory, every team once
    // a server has started (`serve` loads them all), here the team once it is read.
    assert_eq!(env.post("Analytics", q.clone()).await.status, 200);
    let (st, ct, before) = metrics(&env).await;
    assert_eq!(st, 200);
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let before = scrape(&before);
    // The seeded team's records are counted per kind (PostgreSQL's estimate may still be
    // 0 this soon after the seed: the figure is there, its value lags).
    let seeded = before[&key("usage_store_records", &[("kind", "autocomplete")])];
    if !store.is_postgres() {
        assert!(seeded >= 1.0, "{before:?}");
    }

    let rec = json!({"api_key": "metrics-key", "hour": "2025-03-01T10:00:00Z", "language": "go",
        "ide": "vscode", "version": "1.0", "num_acceptances": 1, "num_lines_accepted": 1,
        "num_bytes_accepted": 1});
    let two = json!({"kind": "autocomplete", "records": [rec,
        {"api_key": "metrics-key", "hour": "2025-03-01T11:00:00Z", "language": "go",
         "ide": "vscode", "version": "1.0", "num_acceptances": 2, "num_lines_accepted": 1,
         "num_bytes_accepted": 1}]});
    let r = env.post("Ingest", two).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // The burst of 4 is spent by the two requests above and two more: the fifth is refused.
    assert_eq!(env.post("Analytics", q.clone()).await.status, 200);
    assert_eq!(env.post("Analytics", q.clone()).await.status, 200);
    assert_eq!(env.post("Analytics", q).await.status, 429);
    let nowhere = env
        .client
        .get(env.url("/no/such/path"))
        .send()
        .await
        .unwrap();
    assert_eq!(nowhere.status().as_u16(), 404);

    let (_, _, after) = metrics(&env).await;
    let after = scrape(&after);
    let moved = |name: &str, labels: &[(&str, &str)]| {
        let k = key(name, labels);
        after.get(&k).copied().unwrap_or(0.0) - before.get(&k).copied().unwrap_or(0.0)
    };
    let requests = "usage_http_requests_total";
    assert_eq!(
        moved(requests, &[("operation", "Analytics"), ("status", "200")]),
        2.0
    );
    assert_eq!(
        moved(requests, &[("operation", "Analytics"), ("status", "429")]),
        1.0
    );
    assert_eq!(
        moved(requests, &[("operation", "Ingest"), ("status", "200")]),
        1.0
    );
    assert_eq!(
        moved(requests, &[("operation", "-"), ("status", "404")]),
        1.0
    );
    // The first scrape itself was answered before the second one.
    assert_eq!(
        moved(requests, &[("operation", "metrics"), ("status", "200")]),
        1.0
    );
    assert_eq!(
        moved("usage_rate_limited_total", &[("operation", "Analytics")]),
        1.0
    );
    assert_eq!(
        moved("usage_records_ingested_total", &[("kind", "autocomplete")]),
        2.0
    );
    assert_eq!(
        moved(
            "usage_http_request_duration_seconds_count",
            &[("operation", "Analytics")]
        ),
        3.0
    );
    // PostgreSQL's figure is the planner's estimate, which its statistics collector
    // updates some time after a write; the others count what they hold.
    if !store.is_postgres() {
        assert_eq!(
            moved("usage_store_records", &[("kind", "autocomplete")]),
            2.0
        );
    }
}
on_every_store!(counters_move_with_requests);

/// `serve --metrics-listen`: the metrics on their own address, not on the API's.
#[tokio::test]
async fn metrics_on_their_own_listener() {
    let store = usage_server::store::open("memory:").await.unwrap();
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let m = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (api_addr, m_addr) = (api.local_addr().unwrap(), m.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(usage_server::http::serve_with(
        store,
        fast_config(),
        api,
        Some(m),
        async move {
            let _ = stopped.await;
        },
    ));
    let client = reqwest::Client::new();
    let get = |addr: std::net::SocketAddr, path: &str| {
        let req = client.get(format!("http://{addr}{path}"));
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (st, text) = get(m_addr, "/metrics").await;
    assert_eq!(st, 200);
    assert!(!scrape(&text).is_empty());
    assert_eq!(get(m_addr, "/healthz").await.0, 404);
    assert_eq!(get(api_addr, "/metrics").await.0, 404);
    assert_eq!(get(api_addr, "/healthz").await.0, 200);
    let _ = stop.send(());
    task.await.unwrap();
}
