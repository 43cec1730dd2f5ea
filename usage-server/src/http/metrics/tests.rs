use super::*;
use crate::store::memory::MemoryStore;

/// The `usage_*` text of `m` in `format`, without the process's figures (they change from
/// one run to the next) and with the version as `[version]`.
fn usage_text(m: &Metrics, format: Format) -> String {
    let families = m.families(CacheStats::default(), (0, 0));
    text::encode(&families, format).replace(env!("CARGO_PKG_VERSION"), "[version]")
}

/// The value of the sample line starting with `series ` in `text`.
fn value(text: &str, series: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(str::to_string)
}

#[test]
fn a_fresh_server_has_every_family_at_0() {
    insta::assert_snapshot!(
        "fresh_classic",
        usage_text(&Metrics::new(), Format::Classic)
    );
}

#[test]
fn every_operation_label_is_known_and_each_path_gets_one() {
    let labels: Vec<&str> = operations().map(|(l, _)| l).collect();
    let mut unique = labels.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), labels.len(), "{labels:?}");
    let paths: &[(Option<Op>, &str, &str)] = &[
        (Some(Op::Analytics), "/api/v1/Analytics", "Analytics"),
        (Some(Op::Ingest), "/api/v1/Ingest", "Ingest"),
        (None, "/api/v1/Nope", "-"),
        (None, "/healthz", "healthz"),
        (None, "/metrics", "metrics"),
        (None, "/openapi.json", "openapi"),
        (None, "/dashboard", "dashboard"),
        (None, "/", "dashboard"),
        (None, "/docs", "docs"),
        (None, "/api/v2/usage/daily", "v2/usage/daily"),
        (None, "/api/v2/users/activity", "v2/users/activity"),
        (None, "/api/v2/audit", "v2/audit"),
        (None, "/api/v2/credits/users", "v2/credits/users"),
        (None, "/api/v2/credits/users/ana@a", "v2/credits/user"),
        (None, "/api/v2/caps/preview", "v2/caps/preview"),
        (None, "/api/v2/webhooks", "v2/webhooks"),
        (None, "/api/v2/webhooks/wh_1", "v2/webhook"),
        (
            None,
            "/api/v2/webhooks/wh_1/deliveries",
            "v2/webhook/deliveries",
        ),
        (None, "/api/v2/webhooks/wh_1/test", "v2/webhook/test"),
        (None, "/api/v2/nothing", "-"),
        (None, "/no/such/path", "-"),
    ];
    let mut seen = Vec::new();
    for (op, path, want) in paths {
        let got = label(*op, path);
        assert_eq!(got, *want, "{path}");
        assert!(labels.contains(&got), "{got} is not in {labels:?}");
        seen.push(got);
    }
    // Every operation of the spec and every label above.
    for l in &labels {
        assert!(
            seen.contains(l) || Op::ALL.iter().any(|o| o.name() == *l),
            "{l}: no path here"
        );
    }
    let keyless: Vec<&str> = operations().filter(|(_, k)| !k).map(|(l, _)| l).collect();
    assert_eq!(keyless, KEYLESS);
}

#[test]
fn requests_move_their_series() {
    let m = Metrics::new();
    m.request("Analytics", 200, 0.00015);
    m.request("Analytics", 200, 20.0);
    m.request("Analytics", 429, 0.0001);
    m.request("-", 404, 0.001);
    m.ingested("autocomplete", 5);
    m.ingested("autocomplete", 2);
    m.v2_answer(true);
    let t = usage_text(&m, Format::Classic);
    let v = |s: &str| value(&t, s).unwrap_or_else(|| panic!("no {s} in\n{t}"));
    let requests = "usage_http_requests_total";
    assert_eq!(
        v(&format!(
            "{requests}{{operation=\"Analytics\",status=\"200\"}}"
        )),
        "2"
    );
    assert_eq!(
        v(&format!(
            "{requests}{{operation=\"Analytics\",status=\"429\"}}"
        )),
        "1"
    );
    assert_eq!(
        v(&format!("{requests}{{operation=\"-\",status=\"404\"}}")),
        "1"
    );
    assert_eq!(
        v(&format!(
            "{requests}{{operation=\"Ingest\",status=\"200\"}}"
        )),
        "0"
    );
    assert_eq!(v("usage_rate_limited_total{operation=\"Analytics\"}"), "1");
    assert_eq!(v("usage_rate_limited_total{operation=\"Ingest\"}"), "0");
    assert_eq!(
        value(&t, "usage_rate_limited_total{operation=\"healthz\"}"),
        None
    );
    assert_eq!(
        v("usage_records_ingested_total{kind=\"autocomplete\"}"),
        "7"
    );
    assert_eq!(v("usage_records_ingested_total{kind=\"billing\"}"), "0");
    assert_eq!(v("usage_v2_answers_total{source=\"kept\"}"), "1");
    assert_eq!(v("usage_v2_answers_total{source=\"computed\"}"), "0");
    // 0.0001 is in the first bucket (`le` is inclusive), 0.00015 in the second, 20 s
    // above every bound.
    let bucket = |le: &str| {
        v(&format!(
            "usage_http_request_duration_seconds_bucket{{operation=\"Analytics\",le=\"{le}\"}}"
        ))
    };
    assert_eq!(bucket("0.0001"), "1");
    assert_eq!(bucket("0.0002"), "2");
    assert_eq!(bucket("13.1072"), "2");
    assert_eq!(bucket("+Inf"), "3");
    let sum = v("usage_http_request_duration_seconds_sum{operation=\"Analytics\"}");
    assert!(
        (sum.parse::<f64>().unwrap() - 20.00025).abs() < 1e-9,
        "{sum}"
    );
    assert_eq!(
        v("usage_http_request_duration_seconds_count{operation=\"Analytics\"}"),
        "3"
    );
}

#[test]
fn the_bounds_double_from_100_microseconds() {
    assert_eq!(BOUNDS[0], 0.0001);
    assert_eq!(BOUNDS[17], 13.1072);
    assert!(BOUNDS.windows(2).all(|w| w[1] == w[0] * 2.0));
}

#[tokio::test]
async fn a_scrape_reads_the_store_the_slots_and_the_process() {
    let m = Metrics::new();
    let store = MemoryStore::new();
    let t = m.render(&store, (3, 1), Format::Classic).await;
    assert_eq!(
        value(&t, "usage_queries{state=\"running\"}").as_deref(),
        Some("3")
    );
    assert_eq!(
        value(&t, "usage_queries{state=\"waiting\"}").as_deref(),
        Some("1")
    );
    assert_eq!(
        value(&t, "usage_store_records{kind=\"users\"}").as_deref(),
        Some("0")
    );
    assert_eq!(value(&t, "usage_cache_bytes").as_deref(), Some("0"));
    assert_eq!(
        value(&t, "usage_cache_events_total{event=\"hit\"}").as_deref(),
        Some("0")
    );
    let version = format!(
        "usage_build_info{{version=\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(value(&t, &version).as_deref(), Some("1"));
    assert!(!t.contains("# EOF"));
    if cfg!(target_os = "linux") {
        for name in [
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            assert!(t.contains(&format!("\n# TYPE {name} ")), "{name}");
        }
    }
    let om = m.render(&store, (0, 0), Format::OpenMetrics).await;
    assert!(om.ends_with("\n# EOF\n"));
    assert!(om.contains("\n# TYPE usage_build info\n"));
    assert!(om.contains("\n# TYPE usage_http_requests counter\n"));
}
