//! `GET /metrics` read by real exposition-format parsers: `prometheus-parse` reads the
//! counters moving with the requests sent, by operation and status, and the store's
//! figures, on every store; `promtool check metrics` and both parsers of the Python
//! reference client (`prometheus_client`, tests/metrics/parse.py) read both formats of a
//! fresh server. Those two tools are needed: a missing one fails the test, naming how to
//! install it (.ci/run installs both).

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
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
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

/// The `operation` labels, in the order of the scrape (sorted): every operation, v2
/// endpoint and other endpoint, and `-`.
const OPERATIONS: [&str; 23] = [
    "-",
    "AgentAnalytics",
    "Analytics",
    "GetTeamCreditBalance",
    "GetUsageConfig",
    "Ingest",
    "UsageConfig",
    "UserPageAnalytics",
    "dashboard",
    "docs",
    "healthz",
    "metrics",
    "openapi",
    "v2/audit",
    "v2/caps/preview",
    "v2/credits/user",
    "v2/credits/users",
    "v2/usage/daily",
    "v2/users/activity",
    "v2/webhook",
    "v2/webhook/deliveries",
    "v2/webhook/test",
    "v2/webhooks",
];

/// What a tool printed, given `input` on stdin; a missing tool fails the test with how to
/// install it (never a skip).
fn tool(program: &str, args: &[&str], input: &str, install: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("`{program}` does not run ({e}); install it: {install}"));
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    out
}

/// A family as a `prometheus_client` parser reads it: (type, samples as (name, sorted
/// labels) -> value).
type Parsed = BTreeMap<String, (String, BTreeMap<(String, Vec<(String, String)>), f64>)>;

/// `text` read by `prometheus_client`'s `classic` or `openmetrics` parser
/// (tests/metrics/parse.py); a family name the parser gives twice fails.
fn parse_with_python(text: &str, parser: &str) -> Parsed {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/metrics/parse.py");
    let out = tool(
        "python3",
        &[script, parser],
        text,
        "apt-get install -y python3 python3-pip; \
         python3 -m pip install prometheus_client==0.26.0 (.ci/run does)",
    );
    assert!(
        out.status.success(),
        "the {parser} parser of prometheus_client: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let families: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut parsed = Parsed::new();
    for f in families {
        let mut samples = BTreeMap::new();
        for s in f["samples"].as_array().unwrap() {
            let mut labels: Vec<(String, String)> = s[1]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                .collect();
            labels.sort();
            let sample = (s[0].as_str().unwrap().to_string(), labels);
            assert!(samples.insert(sample, s[2].as_f64().unwrap()).is_none());
        }
        let name = f["name"].as_str().unwrap().to_string();
        let ty = f["type"].as_str().unwrap().to_string();
        assert!(
            parsed.insert(name.clone(), (ty, samples)).is_none(),
            "{parser}: the family {name} twice"
        );
    }
    parsed
}

/// The sample lines of `text` whose series name is `name`, read directly: (name, sorted
/// labels) -> value. Enough for the server's label values (no `"` or `,` in them).
fn lines_of(text: &str, name: &str) -> BTreeMap<(String, Vec<(String, String)>), f64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (n, labels) = series.split_once('{').unwrap_or((series, "}"));
        if n != name {
            continue;
        }
        let mut labels: Vec<(String, String)> = labels
            .strip_suffix('}')
            .unwrap()
            .split("\",")
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once("=\"").unwrap();
                (k.to_string(), v.trim_end_matches('"').to_string())
            })
            .collect();
        labels.sort();
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap(),
        };
        out.insert((n.to_string(), labels), value);
    }
    out
}

/// The families and their types as a parser reads them (`build` is the build family's
/// entry: `usage_build_info` gauge in the classic format, `usage_build` info in
/// OpenMetrics).
fn types(build: (&str, &str)) -> BTreeMap<String, String> {
    let mut t: BTreeMap<String, String> = [
        ("usage_http_requests", "counter"),
        ("usage_http_request_duration_seconds", "histogram"),
        ("usage_rate_limited", "counter"),
        ("usage_records_ingested", "counter"),
        ("usage_store_records", "gauge"),
        ("usage_cache_events", "counter"),
        ("usage_cache_bytes", "gauge"),
        ("usage_queries", "gauge"),
        ("usage_v2_answers", "counter"),
        build,
    ]
    .into_iter()
    .map(|(n, t)| (n.to_string(), t.to_string()))
    .collect();
    if cfg!(target_os = "linux") {
        for (n, ty) in [
            ("process_resident_memory_bytes", "gauge"),
            ("process_virtual_memory_bytes", "gauge"),
            ("process_cpu_seconds", "counter"),
            ("process_open_fds", "gauge"),
            ("process_max_fds", "gauge"),
            ("process_start_time_seconds", "gauge"),
        ] {
            t.insert(n.to_string(), ty.to_string());
        }
    }
    t
}

/// The value of a family's one unlabelled sample.
fn single(parsed: &Parsed, family: &str, sample: &str) -> f64 {
    parsed[family].1[&(sample.to_string(), vec![])]
}

/// The labels' values of `label` in a family's samples, and whether every sample is 0.
fn label_values(parsed: &Parsed, family: &str, label: &str) -> (Vec<String>, bool) {
    let samples = &parsed[family].1;
    let values: std::collections::BTreeSet<String> = samples
        .keys()
        .filter_map(|(_, l)| l.iter().find(|(k, _)| k == label).map(|(_, v)| v.clone()))
        .collect();
    (
        values.into_iter().collect(),
        samples.values().all(|v| *v == 0.0),
    )
}

/// What every scraper reads: the classic format by default (`promtool check metrics`
/// finds no problem, and `prometheus_client`'s classic parser reads each family once,
/// typed, with every sample of the text), OpenMetrics when asked for (its strict parser
/// reads it), and on a fresh server every family with a closed label set is there at 0.
async fn scrapers_read_every_family(store: TestStore) {
    let env = Env::new(store).await;
    let get = |accept: Option<&'static str>| {
        let mut req = env.client.get(env.url("/metrics"));
        if let Some(a) = accept {
            req = req.header("accept", a);
        }
        async move {
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 200);
            let h = |n: &str| res.headers()[n].to_str().unwrap().to_string();
            let (ct, vary) = (h("content-type"), h("vary"));
            (ct, vary, res.text().await.unwrap())
        }
    };
    // reqwest's default `Accept: */*`, as curl's.
    let (ct, vary, classic) = get(None).await;
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
    assert_eq!(vary, "accept");
    let (ct, _, om) = get(Some("application/openmetrics-text; version=1.0.0")).await;
    assert_eq!(
        ct,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    let (ct, _, _) = get(Some("application/openmetrics-text;q=0, text/plain;q=0.5")).await;
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");

    // promtool lints the classic format (its parser reads no other): no problem found.
    let lint = tool(
        "promtool",
        &["check", "metrics"],
        &classic,
        "apt-get install -y prometheus (Debian's package; .ci/run does)",
    );
    assert!(
        lint.status.success() && lint.stdout.is_empty() && lint.stderr.is_empty(),
        "promtool check metrics: {}{}\n{classic}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );
    assert!(!classic.contains("# EOF") && !classic.contains("_created"));
    assert!(om.ends_with("\n# EOF\n"), "{om}");

    for (text, parser, build) in [
        (&classic, "classic", ("usage_build_info", "gauge")),
        (&om, "openmetrics", ("usage_build", "info")),
    ] {
        let parsed = parse_with_python(text, parser);
        let got: BTreeMap<String, String> = parsed
            .iter()
            .map(|(n, (t, _))| (n.clone(), t.clone()))
            .collect();
        assert_eq!(got, types(build), "{parser}");
        // The request counter is one family holding every request sample of the text.
        let requests = &parsed["usage_http_requests"].1;
        let in_text = lines_of(text, "usage_http_requests_total");
        assert_eq!(requests, &in_text, "{parser}");
        assert!(in_text.len() >= OPERATIONS.len(), "{parser}");
        // Every sample line of the text is in a family of the parser's.
        let lines = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        let samples: usize = parsed.values().map(|(_, s)| s.len()).sum();
        assert_eq!(samples, lines, "{parser}");
        let version = env!("CARGO_PKG_VERSION").to_string();
        assert_eq!(
            parsed[build.0].1[&(
                "usage_build_info".to_string(),
                vec![("version".to_string(), version)]
            )],
            1.0
        );
        if cfg!(target_os = "linux") {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            let started = single(
                &parsed,
                "process_start_time_seconds",
                "process_start_time_seconds",
            );
            // This process: the server runs in the test's.
            assert!(
                started <= now + 1.0 && started > now - 86_400.0,
                "{started}"
            );
            let rss = "process_resident_memory_bytes";
            assert!(single(&parsed, rss, rss) > 1e6);
            let fds = "process_open_fds";
            assert!(single(&parsed, fds, fds) >= 3.0);
            let cpu = single(&parsed, "process_cpu_seconds", "process_cpu_seconds_total");
            assert!(cpu >= 0.0);
        }

        // A fresh server: every series of a closed label set is there, at 0 where nothing
        // counted yet.
        let (ops, _) = label_values(&parsed, "usage_http_requests", "operation");
        assert_eq!(ops, OPERATIONS, "{parser}");
        let (limited, zero) = label_values(&parsed, "usage_rate_limited", "operation");
        let keyed: Vec<&str> = OPERATIONS
            .into_iter()
            .filter(|o| !["-", "dashboard", "docs", "healthz", "metrics", "openapi"].contains(o))
            .collect();
        assert_eq!(
            (limited, zero),
            (keyed.iter().map(|s| s.to_string()).collect(), true)
        );
        let (kinds, zero) = label_values(&parsed, "usage_records_ingested", "kind");
        assert_eq!(kinds.len(), 10, "{kinds:?}");
        assert!(zero);
        let (kinds, _) = label_values(&parsed, "usage_store_records", "kind");
        assert_eq!(kinds.len(), 9, "{kinds:?}");
        let (events, zero) = label_values(&parsed, "usage_cache_events", "event");
        assert_eq!(events, ["catch_up", "eviction", "hit", "load", "pushdown"]);
        // The memory store has no cache.
        assert!(zero || !matches!(store, TestStore::Memory));
        let (sources, zero) = label_values(&parsed, "usage_v2_answers", "source");
        assert_eq!(
            (sources, zero),
            (vec!["computed".into(), "kept".into()], true)
        );
        let (states, _) = label_values(&parsed, "usage_queries", "state");
        assert_eq!(states, ["running", "waiting"]);
        let (ops, zero) = label_values(&parsed, "usage_http_request_duration_seconds", "operation");
        assert_eq!(ops, OPERATIONS, "{parser}");
        // Only the scrapes before this one were observed.
        let metrics = |status: &str| {
            requests[&(
                "usage_http_requests_total".to_string(),
                vec![
                    ("operation".to_string(), "metrics".to_string()),
                    ("status".to_string(), status.to_string()),
                ],
            )]
        };
        let earlier = if parser == "classic" { 0.0 } else { 1.0 };
        assert_eq!(metrics("200"), earlier, "{parser}");
        assert_eq!(requests.values().sum::<f64>(), earlier, "{parser}");
        assert_eq!(zero, parser == "classic");
    }
}
on_every_store!(scrapers_read_every_family);
