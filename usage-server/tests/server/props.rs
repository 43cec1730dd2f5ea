//! Arbitrary JSON values and arbitrary bytes to every operation: never a 5xx, never a
//! panic, always the contract's error body (or a 200 where the input happens to be valid).

use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::common::{Env, TestStore};

struct Shared {
    rt: tokio::runtime::Runtime,
    env: Env,
}

/// One server per store, shared by the cases of both properties on that store.
fn shared(kind: TestStore) -> &'static Shared {
    static SHARED: [OnceLock<Shared>; TestStore::EVERY.len()] =
        [const { OnceLock::new() }; TestStore::EVERY.len()];
    SHARED[kind as usize].get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let env = rt.block_on(Env::new(kind));
        Shared { rt, env }
    })
}

const OPS: [&str; 7] = [
    "Analytics",
    "UserPageAnalytics",
    "AgentAnalytics",
    "GetUsageConfig",
    "UsageConfig",
    "GetTeamCreditBalance",
    "Ingest",
];

const KEYS: &[&str] = &[
    "service_key",
    "serviceKey",
    "group_name",
    "start_timestamp",
    "end_timestamp",
    "query_requests",
    "queryRequests",
    "data_source",
    "selections",
    "filters",
    "aggregations",
    "field",
    "name",
    "aggregation_function",
    "filter",
    "value",
    "emails",
    "ide_types",
    "agent_lines",
    "agent_runs",
    "agent_tool_usage",
    "team_level",
    "group_id",
    "user_email",
    "set_add_on_credit_cap",
    "clear_add_on_credit_cap",
    "kind",
    "records",
    "api_key",
    "hour",
    "zzz",
];

const WORDS: &[&str] = &[
    "QUERY_DATA_SOURCE_USER_DATA",
    "QUERY_DATA_SOURCE_PCW_DATA",
    "QUERY_AGGREGATION_SUM",
    "QUERY_AGGREGATION_COUNT",
    "QUERY_FILTER_GE",
    "num_acceptances",
    "api_key",
    "language",
    "date UTC-8",
    "distinct_users",
    "eng",
    "g-eng",
    "ana@a",
    "editor",
    "plugin",
    "autocomplete",
    "groups",
    "2025-05-01",
    "2025-05-01T00:00:00Z",
    "500",
    "-1",
    "",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(WORDS).prop_map(|s| Value::String(s.to_string())),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

fn check(s: &Shared, op: &str, body: Vec<u8>) -> Result<(), TestCaseError> {
    let r = s.rt.block_on(s.env.raw(op, Some("application/json"), body));
    prop_assert!(r.status < 500, "{op}: {} {}", r.status, r.text);
    if r.status != 200 {
        let b = &r.body;
        prop_assert!(b["code"].is_string(), "{op}: {}", r.text);
        prop_assert_eq!(&b["error"], &b["message"]);
        prop_assert_eq!(
            b["requestId"].as_str(),
            r.headers["x-request-id"].to_str().ok()
        );
        prop_assert_eq!(b.get("details").is_some(), r.status == 400, "{}", r.text);
        if let Some(details) = b["details"].as_array() {
            prop_assert!(!details.is_empty());
            for d in details {
                prop_assert!(
                    d["path"].is_string() && d["rule"].is_string() && d["message"].is_string()
                );
                prop_assert!(
                    usage_core::Rule::from_identifier(d["rule"].as_str().unwrap_or("")).is_some(),
                    "{d}"
                );
            }
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 192,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

on_every_store!(sync arbitrary_json_never_fails_the_server);
fn arbitrary_json_never_fails_the_server(kind: TestStore) {
    let s = shared(kind);
    proptest!(config(), |(op in prop::sample::select(&OPS[..]), mut v in json_value(), with_key in any::<bool>())| {
        if with_key && let Value::Object(m) = &mut v {
            m.insert("service_key".into(), Value::String(s.env.key.clone()));
        }
        check(s, op, serde_json::to_vec(&v).unwrap())?;
    });
}

on_every_store!(sync arbitrary_bytes_never_fail_the_server);
fn arbitrary_bytes_never_fail_the_server(kind: TestStore) {
    let s = shared(kind);
    proptest!(config(), |(op in prop::sample::select(&OPS[..]), bytes in prop::collection::vec(any::<u8>(), 0..200))| {
        check(s, op, bytes)?;
    });
}
