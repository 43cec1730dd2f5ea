//! Clients of the hosted service keep working unchanged (issue 10; contract sections 1, 3,
//! 4, 6 and 8): every request here is sent as their scripts and connectors send it, and
//! every answer is read the way they read it (`hour` split on spaces, `metadata` and the
//! `UsageConfig` body parsed as JSON, `signupTime` parsed as RFC 3339). Expected values are
//! worked out by hand from the records [`seed`] ingests.
//!
//! Every test runs on every store ([`on_every_store!`]), each in a fresh temp dir; a
//! PostgreSQL run gets a schema of its own, empty as the demo test needs.

use std::ops::Deref;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use usage_core::JsonPath;
use usage_core::load::{Batch, parse_record};
use usage_core::schema::Plan;
use usage_core::schema::records::{self, RecordKind};
use usage_core::time::Timestamp;
use usage_server::store::Store;

use crate::common::{Reply, TestServer, TestStore, add_team, d, fast_config};

/// A server in this process over one fresh store, with one team and a key of every
/// permission; its fields through [`Deref`].
pub struct Fx {
    t: TestServer,
    client: reqwest::Client,
}

impl Deref for Fx {
    type Target = TestServer;

    fn deref(&self) -> &TestServer {
        &self.t
    }
}

impl Fx {
    async fn start(kind: TestStore) -> Fx {
        Fx::open(kind, async |store| {
            add_team(store, "fidelity", Plan::Enterprise).await
        })
        .await
    }

    /// A server over a fresh store that the demo fills (`serve --demo`).
    async fn start_demo(kind: TestStore, now: Timestamp) -> Fx {
        Fx::open(kind, async |store| {
            usage_server::demo::ensure(store, now).await.unwrap()
        })
        .await
    }

    /// A fresh store of `kind`, the team `make_team` makes in it, a key of that team with
    /// every permission, and a server.
    async fn open(kind: TestStore, make_team: impl AsyncFnOnce(&dyn Store) -> String) -> Fx {
        Fx {
            t: TestServer::start(kind, fast_config(), make_team).await,
            client: reqwest::Client::new(),
        }
    }

    /// The same store closed and opened again, under a new server.
    async fn reopen(self) -> Fx {
        Fx {
            t: self.t.reopen(fast_config()).await,
            client: self.client,
        }
    }

    /// Stops the server, which closes the store.
    async fn stop(self) {
        self.t.server.shutdown().await;
    }

    /// POSTs `body` with the team's key as `service_key`, as the hosted service's
    /// clients do.
    async fn post(&self, op: &str, mut body: Value) -> Reply {
        body["service_key"] = json!(self.key);
        self.send_text(op, body.to_string()).await
    }

    async fn send_text(&self, op: &str, body: String) -> Reply {
        Reply::of(
            self.client
                .post(format!("{}/api/v1/{op}", self.server.url()))
                .header("Content-Type", "application/json")
                .body(body),
        )
        .await
    }

    async fn ingest(&self, kind: &str, records: Value) {
        let n = records.as_array().unwrap().len();
        let r = self
            .post("Ingest", json!({"kind": kind, "records": records}))
            .await;
        assert_eq!(r.ok(), &json!({"accepted": n}), "{kind}");
    }

    /// The whole `Analytics` answer to these query requests.
    async fn analytics(&self, queries: Value) -> Value {
        let r = self
            .post("Analytics", json!({"query_requests": queries}))
            .await;
        r.ok().clone()
    }

    /// The items of the only query of an `Analytics` request.
    async fn items(&self, query: Value) -> Vec<Value> {
        let v = self.analytics(json!([query])).await;
        let results = v["queryResults"].as_array().unwrap();
        assert_eq!(results.len(), 1, "{v}");
        results[0]["responseItems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["item"].clone())
            .collect()
    }

    /// `(path, rule)` of every violation of an `Analytics` request that must fail.
    async fn violations(&self, queries: Value) -> Vec<(String, String)> {
        self.post("Analytics", json!({"query_requests": queries}))
            .await
            .details()
    }

    async fn users(&self) -> Vec<Value> {
        let r = self.post("UserPageAnalytics", json!({})).await;
        r.ok()["userTableStats"].as_array().unwrap().clone()
    }
}

/// Runs `load`, then `check` with what `load` returned, on a fresh store of `kind`; a
/// durable store is then closed and opened again, under a new server, and `check` runs
/// again.
async fn on_store_reopened<T>(
    kind: TestStore,
    load: impl AsyncFn(&Fx) -> T,
    check: impl AsyncFn(&Fx, &T),
) {
    let mut fx = Fx::start(kind).await;
    let loaded = load(&fx).await;
    check(&fx, &loaded).await;
    if kind.durable() {
        fx = fx.reopen().await;
        check(&fx, &loaded).await;
    }
    fx.stop().await;
}

/// Runs `test` on a fresh store of `kind` after [`seed`]; a durable store is closed and
/// opened again in between, under a new server.
async fn on_seeded_store(kind: TestStore, test: impl AsyncFn(&Fx)) {
    let mut fx = Fx::start(kind).await;
    seed(&fx).await;
    if kind.durable() {
        fx = fx.reopen().await;
    }
    test(&fx).await;
    fx.stop().await;
}

/// Items as rows of strings, in the order of `aliases`; every item has exactly these keys,
/// in this order, and only string values (contract section 3, Values).
fn table(items: &[Value], aliases: &[&str]) -> Vec<Vec<String>> {
    items
        .iter()
        .map(|item| {
            let obj = item.as_object().unwrap();
            let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            assert_eq!(keys, aliases, "{item}");
            obj.values()
                .map(|v| v.as_str().unwrap_or_else(|| panic!("{item}")).to_string())
                .collect()
        })
        .collect()
}

/// Expected rows, each written as its values joined by `|`.
fn rows(expected: &[&str]) -> Vec<Vec<String>> {
    expected
        .iter()
        .map(|r| r.split('|').map(str::to_string).collect())
        .collect()
}

fn sel(fields: &[&str]) -> Value {
    Value::Array(fields.iter().map(|f| json!({"field": f})).collect())
}

fn filter(name: &str, op: &str, value: &str) -> Value {
    json!({"name": name, "filter": format!("QUERY_FILTER_{op}"), "value": value})
}

const AUTOCOMPLETE: &str = "QUERY_DATA_SOURCE_USER_DATA";
const CHAT: &str = "QUERY_DATA_SOURCE_CHAT_DATA";
const COMMAND: &str = "QUERY_DATA_SOURCE_COMMAND_DATA";
const PCW: &str = "QUERY_DATA_SOURCE_PCW_DATA";
const AGENT: &str = "QUERY_DATA_SOURCE_AGENT_DATA";

/// A user whose e-mail needs escaping in `metadata` (a quote) and is not ASCII.
const ZOE: &str = "zoë+\"x\"@f";

/// The team's records, each given in a form a loader may send (times at other offsets,
/// fractions, integers as strings, `flex_credits_used` left out).
async fn seed(fx: &Fx) {
    fx.ingest(
        "groups",
        json!([{"group_id": "g-eng", "group_name": "eng"}]),
    )
    .await;
    fx.ingest(
        "users",
        json!([
            {"email": "ana@f", "name": "Ana", "api_key": "k-ana", "groups": ["g-eng"],
             "signup_time": "2024-03-05T08:07:08.5+02:00"},
            {"email": "bob@f", "name": "Bob", "api_key": "k-bob", "groups": ["g-eng"]},
            {"email": "cy@f", "name": "Cy", "api_key": "k-cy"},
            {"email": ZOE, "name": "Zoë", "api_key": "k-zoe"}
        ]),
    )
    .await;
    let auto: Vec<Value> = [
        (
            "k-ana",
            "2025-05-01T13:00:00Z",
            "PYTHON",
            "vscode",
            "1.10.0",
            3,
        ),
        ("k-ana", "2025-05-01T13:00:00Z", "GO", "vscode", "1.10.0", 1),
        (
            "k-bob",
            "2025-05-01T18:30:00+05:30",
            "PYTHON",
            "jetbrains",
            "1.9.12",
            5,
        ),
        (
            "k-cy",
            "2025-05-02T23:00:00Z",
            "RUST",
            "vscode",
            "1.10.0",
            7,
        ),
        (
            "k-ana",
            "2025-05-31T23:00:00Z",
            "PYTHON",
            "vscode",
            "1.10.0",
            2,
        ),
        (
            "k-bob",
            "2025-06-01T00:00:00Z",
            "GO",
            "jetbrains",
            "1.9.12",
            4,
        ),
        (
            "k-orphan",
            "2025-05-01T14:00:00Z",
            "PYTHON",
            "vscode",
            "1.10.0",
            9,
        ),
        (
            "k-ana",
            "2025-04-30T23:00:00Z",
            "PYTHON",
            "vscode",
            "1.10.0",
            6,
        ),
    ]
    .iter()
    .map(|&(key, hour, lang, ide, version, n)| {
        json!({"api_key": key, "hour": hour, "language": lang, "ide": ide, "version": version,
               "num_acceptances": n, "num_lines_accepted": n * 2, "num_bytes_accepted": n * 10})
    })
    .collect();
    fx.ingest("autocomplete", Value::Array(auto)).await;
    fx.ingest(
        "chat",
        json!([
            {"id": "c-1", "api_key": "k-ana", "timestamp": "2025-05-01T09:15:00Z", "model_id": "m-a",
             "ide": "vscode", "version": "1.10.0", "latest_intent_type": "CHAT_INTENT_GENERIC",
             "num_chats_received": 2, "chat_accepted": true, "chat_inserted_at_cursor": false,
             "chat_applied": true, "chat_loc_used": 12},
            {"id": "c-0", "api_key": "k-ana", "timestamp": "2025-05-01T11:15:00+02:00", "model_id": "m-b",
             "ide": "jetbrains", "version": "1.9.12", "latest_intent_type": "CHAT_INTENT_FUNCTION_EXPLAIN",
             "num_chats_received": "1", "chat_accepted": false, "chat_inserted_at_cursor": false,
             "chat_applied": false, "chat_loc_used": 0},
            {"api_key": "k-bob", "timestamp": "2025-05-02T10:00:00.5Z", "model_id": "m-a",
             "ide": "vscode", "version": "1.9.12", "latest_intent_type": "CHAT_INTENT_GENERIC",
             "num_chats_received": 4, "chat_accepted": false, "chat_inserted_at_cursor": true,
             "chat_applied": false, "chat_loc_used": 7}
        ]),
    )
    .await;
    fx.ingest(
        "command",
        json!([
            {"id": "m-1", "api_key": "k-ana", "timestamp": "2025-05-01T13:00:07.25Z", "language": "PYTHON",
             "ide": "vscode", "version": "1.10.0", "command_source": "COMMAND_REQUEST_SOURCE_DEFAULT",
             "provider_source": "PROVIDER_SOURCE_COMMAND_GENERATE", "lines_added": 10, "lines_removed": 0,
             "bytes_added": 300, "bytes_removed": 0, "selection_lines": 0, "selection_bytes": 0, "accepted": true},
            {"id": "m-2", "api_key": "k-bob", "timestamp": "2025-05-01T18:30:07.250+05:30", "language": "GO",
             "ide": "jetbrains", "version": "1.9.12", "command_source": "COMMAND_REQUEST_SOURCE_RIGHT_CLICK_REFACTOR",
             "provider_source": "PROVIDER_SOURCE_COMMAND_EDIT", "lines_added": 4, "lines_removed": 2,
             "bytes_added": 120, "bytes_removed": 60, "selection_lines": 5, "selection_bytes": 150, "accepted": false},
            {"api_key": "k-ana", "timestamp": "2025-05-01T14:15:16.0000019Z", "language": "RUST",
             "ide": "vscode", "version": "1.10.0", "command_source": "COMMAND_REQUEST_SOURCE_PLAN",
             "provider_source": "PROVIDER_SOURCE_COMMAND_GENERATE", "lines_added": 1, "lines_removed": 1,
             "bytes_added": 10, "bytes_removed": 10, "selection_lines": 0, "selection_bytes": 0, "accepted": true},
            {"id": "m-4", "api_key": "k-cy", "timestamp": "2025-05-02T00:00:00Z", "language": "RUST",
             "ide": "vscode", "version": "1.10.0", "command_source": "COMMAND_REQUEST_SOURCE_DEFAULT",
             "provider_source": "PROVIDER_SOURCE_COMMAND_GENERATE", "lines_added": 2, "lines_removed": 0,
             "bytes_added": 20, "bytes_removed": 0, "selection_lines": 0, "selection_bytes": 0, "accepted": true}
        ]),
    )
    .await;
    fx.ingest(
        "pcw",
        json!([
            {"api_key": "k-ana", "hour": "2025-05-01T13:00:00Z", "language": "PYTHON", "ide": "vscode",
             "version": "1.10.0", "vendor_bytes_by_autocomplete": 30, "vendor_bytes_by_command": 10, "user_bytes": 60},
            {"api_key": "k-bob", "hour": "2025-05-02T10:00:00Z", "language": "GO", "ide": "jetbrains",
             "version": "1.9.12", "vendor_bytes_by_autocomplete": 20, "vendor_bytes_by_command": 0, "user_bytes": 80}
        ]),
    )
    .await;
    fx.ingest(
        "agent_runs",
        json!([
            {"id": "r1", "api_key": "k-ana", "timestamp": "2025-05-01T09:00:00Z", "ide_type": "editor",
             "model": "claude", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 3,
             "agent_id": "c1", "prompts_used": 200, "flex_credits_used": 150},
            {"id": "r2", "api_key": "k-ana", "timestamp": "2025-05-01T17:30:00.5Z", "ide_type": "plugin",
             "model": "gpt", "mode": "UNKNOWN", "messages_sent": 1, "agent_id": "c2", "prompts_used": 100},
            {"id": "r3", "api_key": "k-bob", "timestamp": "2025-05-02T08:00:00Z", "ide_type": "editor",
             "model": "claude", "mode": "CONVERSATIONAL_PLANNER_MODE_READ_ONLY", "messages_sent": 2,
             "agent_id": "c3", "prompts_used": 300, "flex_credits_used": "25"},
            {"id": "r4", "api_key": "k-orphan", "timestamp": "2025-05-02T10:00:00Z", "ide_type": "editor",
             "model": "claude", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 1,
             "agent_id": "c4", "prompts_used": 50, "flex_credits_used": 10},
            {"id": "r5", "api_key": "k-zoe", "timestamp": "2025-05-02T13:30:00+05:30", "ide_type": "plugin",
             "model": "gpt", "mode": "CONVERSATIONAL_PLANNER_MODE_NO_TOOL", "messages_sent": 5,
             "agent_id": "c5", "prompts_used": 0, "flex_credits_used": 0}
        ]),
    )
    .await;
}

const AUTO_FIELDS: [&str; 9] = [
    "api_key",
    "date",
    "hour",
    "language",
    "ide",
    "version",
    "num_acceptances",
    "num_lines_accepted",
    "num_bytes_accepted",
];

/// The raw-row autocomplete query of the hosted service's export scripts: every field by
/// its own name, a month of dates, one `api_key EQUAL` per wanted user.
fn autocomplete_export(keys: &[&str]) -> Value {
    let mut filters = vec![
        filter("date", "GE", "2025-05-01"),
        filter("date", "LE", "2025-05-31"),
    ];
    filters.extend(keys.iter().map(|k| filter("api_key", "EQUAL", k)));
    json!({
        "data_source": AUTOCOMPLETE,
        "selections": AUTO_FIELDS.iter().map(|f| json!({"field": f, "name": f})).collect::<Vec<_>>(),
        "filters": filters
    })
}

on_every_store!(raw_autocomplete_rows_for_one_two_and_three_users);
async fn raw_autocomplete_rows_for_one_two_and_three_users(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        let ana_go = "k-ana|2025-05-01|2025-05-01 13:00:00 +0000 UTC|GO|vscode|1.10.0|1|2|10";
        let ana_py = "k-ana|2025-05-01|2025-05-01 13:00:00 +0000 UTC|PYTHON|vscode|1.10.0|3|6|30";
        let bob = "k-bob|2025-05-01|2025-05-01 13:00:00 +0000 UTC|PYTHON|jetbrains|1.9.12|5|10|50";
        let cy = "k-cy|2025-05-02|2025-05-02 23:00:00 +0000 UTC|RUST|vscode|1.10.0|7|14|70";
        let ana_31 = "k-ana|2025-05-31|2025-05-31 23:00:00 +0000 UTC|PYTHON|vscode|1.10.0|2|4|20";
        let cases: [(&[&str], Vec<&str>); 3] = [
            (&["k-ana"], vec![ana_go, ana_py, ana_31]),
            (&["k-ana", "k-bob"], vec![ana_go, ana_py, bob, ana_31]),
            (
                &["k-cy", "k-ana", "k-bob"],
                vec![ana_go, ana_py, bob, cy, ana_31],
            ),
        ];
        for (keys, want) in cases {
            let items = fx.items(autocomplete_export(keys)).await;
            assert_eq!(table(&items, &AUTO_FIELDS), rows(&want), "{keys:?}");
            // The way the scripts read `hour`: date, time and zone split on spaces.
            for item in &items {
                let hour = item["hour"].as_str().unwrap();
                let parts: Vec<&str> = hour.split(' ').collect();
                assert_eq!(parts.len(), 4, "{hour}");
                assert_eq!(parts[0], item["date"], "{hour}");
                assert_eq!(parts[1].len(), 8, "{hour}");
                assert!(parts[1].ends_with(":00:00"), "{hour}");
                assert_eq!(&parts[2..], ["+0000", "UTC"], "{hour}");
            }
        }
        insta::assert_json_snapshot!(
            "raw_autocomplete",
            fx.analytics(json!([autocomplete_export(&["k-ana", "k-bob", "k-cy"])]))
                .await
        );
    })
    .await;
}

const CHAT_FIELDS: [&str; 12] = [
    "api_key",
    "model_id",
    "date",
    "date UTC+14",
    "ide",
    "version",
    "latest_intent_type",
    "num_chats_received",
    "chat_accepted",
    "chat_inserted_at_cursor",
    "chat_applied",
    "chat_loc_used",
];

on_every_store!(raw_chat_rows_carry_booleans_and_metrics);
async fn raw_chat_rows_carry_booleans_and_metrics(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        let query = json!({"data_source": CHAT, "selections": sel(&CHAT_FIELDS)});
        let items = fx.items(query.clone()).await;
        let aliases: Vec<String> = CHAT_FIELDS.iter().map(|f| f.to_lowercase()).collect();
        let aliases: Vec<&str> = aliases.iter().map(String::as_str).collect();
        // By time (the source has no time field), then api_key, then id: c-0 and c-1 tie
        // on both (09:15Z, the first given at +02:00).
        assert_eq!(
            table(&items, &aliases),
            rows(&["k-ana|m-b|2025-05-01|2025-05-01|jetbrains|1.9.12|CHAT_INTENT_FUNCTION_EXPLAIN|1|false|false|false|0", "k-ana|m-a|2025-05-01|2025-05-01|vscode|1.10.0|CHAT_INTENT_GENERIC|2|true|false|true|12", "k-bob|m-a|2025-05-02|2025-05-03|vscode|1.9.12|CHAT_INTENT_GENERIC|4|false|true|false|7"])
        );
        insta::assert_json_snapshot!("raw_chat", fx.analytics(json!([query])).await);
    })
    .await;
}

const COMMAND_FIELDS: [&str; 11] = [
    "api_key",
    "timestamp",
    "date",
    "language",
    "lines_added",
    "lines_removed",
    "bytes_added",
    "bytes_removed",
    "selection_lines",
    "selection_bytes",
    "accepted",
];

on_every_store!(raw_command_rows_carry_byte_and_line_metrics);
async fn raw_command_rows_carry_byte_and_line_metrics(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        let query = json!({"data_source": COMMAND, "selections": sel(&COMMAND_FIELDS),
            "filters": [filter("date", "GE", "2025-05-01"), filter("date", "LE", "2025-05-31")]});
        let items = fx.items(query.clone()).await;
        assert_eq!(
            table(&items, &COMMAND_FIELDS),
            rows(&[
                "k-ana|2025-05-01 13:00:07.25 +0000 UTC|2025-05-01|PYTHON|10|0|300|0|0|0|true",
                "k-bob|2025-05-01 13:00:07.25 +0000 UTC|2025-05-01|GO|4|2|120|60|5|150|false",
                "k-ana|2025-05-01 14:15:16.000001 +0000 UTC|2025-05-01|RUST|1|1|10|10|0|0|true",
                "k-cy|2025-05-02 00:00:00 +0000 UTC|2025-05-02|RUST|2|0|20|0|0|0|true"
            ])
        );
        // Split on spaces: the time keeps its fraction, the zone is `+0000 UTC`.
        let times: Vec<Vec<&str>> = items
            .iter()
            .map(|i| i["timestamp"].as_str().unwrap().split(' ').collect())
            .collect();
        assert_eq!(
            times[0],
            ["2025-05-01", "13:00:07.25", "+0000", "UTC"],
            "{items:?}"
        );
        assert_eq!(times[2][1], "14:15:16.000001");
        insta::assert_json_snapshot!("raw_command", fx.analytics(json!([query])).await);
    })
    .await;
}

/// The agent-source query of the hosted service's credit-monitoring scripts.
fn agent_credits(filters: Value) -> Value {
    json!({"data_source": AGENT,
        "selections": sel(&["api_key", "date", "prompts_used", "flex_credits_used", "model", "metadata"]),
        "filters": filters})
}

on_every_store!(raw_agent_rows_carry_credits_and_the_users_email);
async fn raw_agent_rows_carry_credits_and_the_users_email(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        let fields = [
            "api_key",
            "date",
            "prompts_used",
            "flex_credits_used",
            "model",
            "metadata",
        ];
        let items = fx.items(agent_credits(json!([]))).await;
        // r3 and r5 tie on time (08:00Z, r5 given at +05:30): k-bob before k-zoe.
        let zoe = format!(r#"k-zoe|2025-05-02|0|0|gpt|{{"email":"{}"}}"#, ZOE.replace('"', "\\\""));
        assert_eq!(
            table(&items, &fields),
            rows(&[
                r#"k-ana|2025-05-01|200|150|claude|{"email":"ana@f"}"#,
                r#"k-ana|2025-05-01|100|0|gpt|{"email":"ana@f"}"#,
                r#"k-bob|2025-05-02|300|25|claude|{"email":"bob@f"}"#,
                &zoe,
                "k-orphan|2025-05-02|50|10|claude|{}",
            ])
        );
        // The scripts parse `metadata` as JSON and read the e-mail from it.
        let emails: Vec<Option<String>> = items
            .iter()
            .map(|i| {
                let meta: Value = serde_json::from_str(i["metadata"].as_str().unwrap()).unwrap();
                assert!(meta.is_object(), "{meta}");
                meta.get("email").map(|e| e.as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(
            emails,
            [
                Some("ana@f".to_string()),
                Some("ana@f".to_string()),
                Some("bob@f".to_string()),
                Some(ZOE.to_string()),
                None
            ]
        );
        // One EQUAL per wanted user, a date range, and the run's timestamp in Go form.
        let query = json!({"data_source": AGENT,
            "selections": sel(&["api_key", "timestamp", "prompts_used", "flex_credits_used", "model", "metadata"]),
            "filters": [filter("date", "GE", "2025-05-01"), filter("date", "LE", "2025-05-01"),
                        filter("api_key", "EQUAL", "k-ana"), filter("api_key", "EQUAL", "k-zoe")]});
        let items = fx.items(query.clone()).await;
        assert_eq!(
            table(
                &items,
                &[
                    "api_key",
                    "timestamp",
                    "prompts_used",
                    "flex_credits_used",
                    "model",
                    "metadata"
                ]
            ),
            rows(&[r#"k-ana|2025-05-01 09:00:00 +0000 UTC|200|150|claude|{"email":"ana@f"}"#, r#"k-ana|2025-05-01 17:30:00.5 +0000 UTC|100|0|gpt|{"email":"ana@f"}"#])
        );
        insta::assert_json_snapshot!(
            "raw_agent",
            fx.analytics(json!([agent_credits(json!([]))])).await
        );
    })
    .await;
}

on_every_store!(grouped_agent_credits_by_date_and_model);
async fn grouped_agent_credits_by_date_and_model(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        let sums = json!([
            {"field": "prompts_used", "aggregation_function": "QUERY_AGGREGATION_SUM"},
            {"field": "flex_credits_used", "aggregation_function": "QUERY_AGGREGATION_SUM"}
        ]);
        let by = |groups: &[&str]| {
            json!({"data_source": AGENT, "selections": sums,
                "filters": [filter("date", "GE", "2025-05-01"), filter("date", "LE", "2025-05-31")],
                "aggregations": groups.iter().map(|g| json!({"field": g, "name": g})).collect::<Vec<_>>()})
        };
        let queries = json!([by(&["date"]), by(&["model"]), by(&["date", "model"])]);
        let v = fx.analytics(queries.clone()).await;
        let result = |q: usize| -> Vec<Value> {
            v["queryResults"][q]["responseItems"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["item"].clone())
                .collect()
        };
        let sum_keys = ["sum_prompts_used", "sum_flex_credits_used"];
        assert_eq!(
            table(&result(0), &[sum_keys[0], sum_keys[1], "date"]),
            rows(&["300|150|2025-05-01", "350|35|2025-05-02"])
        );
        assert_eq!(
            table(&result(1), &[sum_keys[0], sum_keys[1], "model"]),
            rows(&["550|185|claude", "100|0|gpt"])
        );
        assert_eq!(
            table(&result(2), &[sum_keys[0], sum_keys[1], "date", "model"]),
            rows(&["200|150|2025-05-01|claude", "100|0|2025-05-01|gpt", "350|35|2025-05-02|claude", "0|0|2025-05-02|gpt"])
        );
        // Restricted to a group: members' runs only (the orphan run and Zoë drop out).
        let r = fx
            .post(
                "Analytics",
                json!({"group_name": "eng", "query_requests": [by(&["date"])]}),
            )
            .await;
        let items: Vec<Value> = r.ok()["queryResults"][0]["responseItems"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["item"].clone())
            .collect();
        assert_eq!(
            table(&items, &[sum_keys[0], sum_keys[1], "date"]),
            rows(&["300|150|2025-05-01", "300|25|2025-05-02"])
        );
        insta::assert_json_snapshot!("grouped_agent", v);
    })
    .await;
}

on_every_store!(time_values_in_results_and_filters);
async fn time_values_in_results_and_filters(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        let auto = |filters: Value| {
            json!({"data_source": AUTOCOMPLETE,
                "selections": sel(&["api_key", "hour", "num_acceptances"]), "filters": filters})
        };
        let hours = async |filters: Value| {
            table(
                &fx.items(auto(filters)).await,
                &["api_key", "hour", "num_acceptances"],
            )
        };
        let h = |t: &str| format!("2025-{t}:00:00 +0000 UTC");
        let row = |k: &str, t: &str, n: &str| vec![k.to_string(), h(t), n.to_string()];
        // The result form and RFC 3339 at +05:30 (14:00Z) as bounds.
        assert_eq!(
            hours(json!([
                filter("hour", "GE", "2025-05-01 13:00:00 +0000 UTC"),
                filter("hour", "LESS_THAN", "2025-05-01T19:30:00+05:30")
            ]))
            .await,
            [
                row("k-ana", "05-01 13", "1"),
                row("k-ana", "05-01 13", "3"),
                row("k-bob", "05-01 13", "5")
            ]
        );
        // `YYYY-MM-DD` compares the record's UTC date: LE keeps the whole 31st.
        assert_eq!(
            hours(json!([
                filter("hour", "GE", "2025-05-31"),
                filter("hour", "LE", "2025-05-31")
            ]))
            .await,
            [row("k-ana", "05-31 23", "2")]
        );
        assert_eq!(
            hours(json!([filter("hour", "GREATER_THAN", "2025-05-31")])).await,
            [row("k-bob", "06-01 00", "4")]
        );
        assert_eq!(
            hours(json!([filter("hour", "LESS_THAN", "2025-05-01")])).await,
            [row("k-ana", "04-30 23", "6")]
        );
        // EQUAL in each form, several of them an IN list.
        assert_eq!(
            hours(json!([
                filter("hour", "EQUAL", "2025-05-02 23:00:00 +0000 UTC"),
                filter("hour", "EQUAL", "2025-06-01T05:30:00+05:30"),
                filter("hour", "EQUAL", "2025-05-01")
            ]))
            .await,
            [
                row("k-ana", "05-01 13", "1"),
                row("k-ana", "05-01 13", "3"),
                row("k-bob", "05-01 13", "5"),
                row("k-orphan", "05-01 14", "9"),
                row("k-cy", "05-02 23", "7"),
                row("k-bob", "06-01 00", "4")
            ]
        );
        // Command timestamps with a fraction, matched in the result form and at +05:30.
        let stamps = async |filters: Value| -> Vec<Vec<String>> {
            let q = json!({"data_source": COMMAND,
                "selections": sel(&["timestamp", "api_key"]), "filters": filters});
            table(&fx.items(q).await, &["timestamp", "api_key"])
        };
        let at = |t: &str, k: &str| vec![format!("2025-{t} +0000 UTC"), k.to_string()];
        for same in [
            "2025-05-01 13:00:07.25 +0000 UTC",
            "2025-05-01 13:00:07.250 +0000 UTC",
            "2025-05-01T18:30:07.25+05:30",
            "2025-05-01T13:00:07.25Z",
        ] {
            assert_eq!(
                stamps(json!([filter("timestamp", "EQUAL", same)])).await,
                [at("05-01 13:00:07.25", "k-ana"), at("05-01 13:00:07.25", "k-bob")],
                "{same}"
            );
        }
        assert_eq!(
            stamps(json!([filter(
                "timestamp",
                "GREATER_THAN",
                "2025-05-01 13:00:07.25 +0000 UTC"
            )]))
            .await,
            [
                at("05-01 14:15:16.000001", "k-ana"),
                at("05-02 00:00:00", "k-cy")
            ]
        );
        assert_eq!(
            stamps(json!([filter("timestamp", "LE", "2025-05-01")])).await.len(),
            3
        );
        // Group-by values take the result form too.
        let q = json!({"data_source": COMMAND,
            "selections": [{"field": "lines_added", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
            "aggregations": [{"field": "timestamp", "name": "t"}]});
        assert_eq!(
            table(&fx.items(q).await, &["sum_lines_added", "t"]),
            rows(&["14|2025-05-01 13:00:07.25 +0000 UTC", "1|2025-05-01 14:15:16.000001 +0000 UTC", "2|2025-05-02 00:00:00 +0000 UTC"])
        );
        let q = json!({"data_source": AUTOCOMPLETE, "selections": sel(&["hour"]),
            "filters": [filter("api_key", "EQUAL", "k-ana")],
            "aggregations": [{"field": "hour", "name": "hour_group"}]});
        assert_eq!(
            table(&fx.items(q).await, &["hour", "hour_group"]),
            rows(&["2025-04-30 23:00:00 +0000 UTC|2025-04-30 23:00:00 +0000 UTC", "2025-05-01 13:00:00 +0000 UTC|2025-05-01 13:00:00 +0000 UTC", "2025-05-31 23:00:00 +0000 UTC|2025-05-31 23:00:00 +0000 UTC"])
        );
        let q = json!({"data_source": AGENT,
            "selections": [{"field": "prompts_used", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
            "filters": [filter("timestamp", "GE", "2025-05-01T23:00:00-09:00")],
            "aggregations": [{"field": "timestamp", "name": "t"}]});
        assert_eq!(
            table(&fx.items(q).await, &["sum_prompts_used", "t"]),
            // r3 and r5 share 08:00Z: one group.
            rows(&["300|2025-05-02 08:00:00 +0000 UTC", "50|2025-05-02 10:00:00 +0000 UTC"])
        );
        // Zones other than `+0000 UTC`, or none, are not time values.
        for (i, bad) in [
            "2025-05-01 13:00:00 +0100 CET",
            "2025-05-01 13:00:00",
            "2025-05-01T13:00:00",
            "2025/05/01",
        ]
        .iter()
        .enumerate()
        {
            let r = fx
                .post(
                    "Analytics",
                    json!({"query_requests": [auto(json!([filter("api_key", "EQUAL", "k-ana"), filter("hour", "GE", bad)]))]}),
                )
                .await;
            assert_eq!(
                r.details(),
                [d("query_requests[0].filters[1].value", "invalid_value")],
                "{i}: {bad}"
            );
        }
        // Every other time stays RFC 3339 with `Z`.
        let users = fx.users().await;
        let ana = &users[0];
        assert_eq!(ana["email"], "ana@f");
        for (field, want) in [
            ("lastAutocompleteUsageTime", "2025-05-31T23:00:00Z"),
            ("lastChatUsageTime", "2025-05-01T17:30:00.5Z"),
            ("lastCommandUsageTime", "2025-05-01T14:15:16.000001Z"),
            ("lastUpdateTime", "2025-05-31T23:00:00Z"),
            ("signupTime", "2024-03-05T06:07:08.5Z"),
        ] {
            assert_eq!(ana[field], want, "{field}");
        }
        let bob = &users[1];
        assert_eq!(
            (
                &bob["lastAutocompleteUsageTime"],
                &bob["lastChatUsageTime"],
                &bob["lastCommandUsageTime"],
                &bob["activeDays"]
            ),
            (
                &json!("2025-06-01T00:00:00Z"),
                &json!("2025-05-02T10:00:00.5Z"),
                &json!("2025-05-01T13:00:07.25Z"),
                &json!(3)
            )
        );
        let r = fx
            .post(
                "AgentAnalytics",
                json!({"emails": ["ana@f"], "query_requests": [{"agent_runs": {}}]}),
            )
            .await;
        let days: Vec<&str> = r.ok()["queryResults"][0]["agentRuns"]["agentRuns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["day"].as_str().unwrap())
            .collect();
        assert_eq!(days, ["2025-05-01T00:00:00Z", "2025-05-01T00:00:00Z"]);
        let r = fx.post("GetTeamCreditBalance", json!({})).await;
        for f in ["billingCycleStart", "billingCycleEnd"] {
            let t = r.ok()[f].as_str().unwrap();
            assert!(t.ends_with("T00:00:00Z"), "{f}: {t}");
        }
    })
    .await;
}

on_every_store!(several_equal_filters_on_one_field_are_an_in_list);
async fn several_equal_filters_on_one_field_are_an_in_list(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        // Each autocomplete record has its own num_acceptances: (api_key, n) names it.
        let got = async |filters: Value| -> Vec<(String, String)> {
            let q = json!({"data_source": AUTOCOMPLETE,
                "selections": sel(&["api_key", "num_acceptances"]), "filters": filters});
            table(&fx.items(q).await, &["api_key", "num_acceptances"])
                .into_iter()
                .map(|r| (r[0].clone(), r[1].clone()))
                .collect()
        };
        let want = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let cases = [
            // An IN list, AND another field.
            (
                json!([
                    filter("api_key", "EQUAL", "k-ana"),
                    filter("language", "EQUAL", "PYTHON"),
                    filter("api_key", "EQUAL", "k-bob")
                ]),
                want(&[("k-ana", "6"), ("k-ana", "3"), ("k-bob", "5"), ("k-ana", "2")]),
            ),
            // Other operators on the same field still combine with AND.
            (
                json!([
                    filter("api_key", "EQUAL", "k-ana"),
                    filter("api_key", "EQUAL", "k-bob"),
                    filter("api_key", "NOT_EQUAL", "k-ana")
                ]),
                want(&[("k-bob", "5"), ("k-bob", "4")]),
            ),
            (
                json!([
                    filter("api_key", "EQUAL", "k-ana"),
                    filter("api_key", "EQUAL", "k-bob"),
                    filter("api_key", "GE", "k-b")
                ]),
                want(&[("k-bob", "5"), ("k-bob", "4")]),
            ),
            (
                json!([
                    filter("api_key", "NOT_EQUAL", "k-ana"),
                    filter("api_key", "NOT_EQUAL", "k-bob")
                ]),
                want(&[("k-orphan", "9"), ("k-cy", "7")]),
            ),
            // Two IN lists on two fields.
            (
                json!([
                    filter("api_key", "EQUAL", "k-ana"),
                    filter("api_key", "EQUAL", "k-cy"),
                    filter("language", "EQUAL", "GO"),
                    filter("language", "EQUAL", "RUST")
                ]),
                want(&[("k-ana", "1"), ("k-cy", "7")]),
            ),
            // A value nobody has matches nothing, the others still match.
            (
                json!([
                    filter("api_key", "EQUAL", "k-nobody"),
                    filter("api_key", "EQUAL", "k-cy")
                ]),
                want(&[("k-cy", "7")]),
            ),
            // One field in two spellings: `date UTC+5:30` is `date UTC+05:30`.
            (
                json!([
                    filter("date UTC+5:30", "EQUAL", "2025-05-03"),
                    filter("date UTC+05:30", "EQUAL", "2025-06-01")
                ]),
                want(&[("k-cy", "7"), ("k-ana", "2"), ("k-bob", "4")]),
            ),
        ];
        for (i, (filters, expected)) in cases.into_iter().enumerate() {
            assert_eq!(got(filters).await, expected, "case {i}");
        }
        // Aggregated, as in the compatibility page.
        let q = json!({"data_source": AUTOCOMPLETE,
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
            "filters": [filter("api_key", "EQUAL", "k-ana"), filter("api_key", "EQUAL", "k-bob"),
                        filter("api_key", "EQUAL", "k-cy")],
            "aggregations": [{"field": "api_key", "name": "user"}]});
        assert_eq!(
            table(&fx.items(q).await, &["sum_num_acceptances", "user"]),
            rows(&["12|k-ana", "9|k-bob", "7|k-cy"])
        );
        // Booleans and the agent source too.
        let q = json!({"data_source": CHAT, "selections": sel(&["chat_accepted"]),
            "filters": [filter("chat_accepted", "EQUAL", "true"), filter("chat_accepted", "EQUAL", "false")]});
        assert_eq!(fx.items(q).await.len(), 3);
        let q = json!({"data_source": AGENT, "selections": sel(&["agent_id"]),
            "filters": [filter("model", "EQUAL", "gpt"), filter("model", "EQUAL", "claude"),
                        filter("api_key", "EQUAL", "k-orphan"), filter("api_key", "EQUAL", "k-zoe")]});
        assert_eq!(
            table(&fx.items(q).await, &["agent_id"]),
            rows(&["c5", "c4"])
        );
    })
    .await;
}

on_every_store!(aggregated_shapes_still_reject_unaggregated_metrics);
async fn aggregated_shapes_still_reject_unaggregated_metrics(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        let sum = |f: &str| json!({"field": f, "aggregation_function": "QUERY_AGGREGATION_SUM"});
        let unspecified =
            |f: &str| json!({"field": f, "aggregation_function": "QUERY_AGGREGATION_UNSPECIFIED"});
        let group = |f: &str, name: &str| json!([{"field": f, "name": name}]);
        let mixed = vec![d("query_requests[0].selections", "mixed_aggregation")];
        let cases = [
            // Shape 1: a metric, a boolean, the agent's metrics and metadata beside a SUM.
            (
                json!({"data_source": AUTOCOMPLETE,
                    "selections": [sum("num_acceptances"), {"field": "num_lines_accepted"}]}),
                mixed.clone(),
            ),
            (
                json!({"data_source": CHAT,
                    "selections": [sum("chat_accepted"), unspecified("chat_applied")]}),
                mixed.clone(),
            ),
            (
                json!({"data_source": AGENT,
                    "selections": [sum("prompts_used"), {"field": "flex_credits_used"}, {"field": "metadata"}]}),
                mixed.clone(),
            ),
            // `distinct_*` counts as aggregated.
            (
                json!({"data_source": AUTOCOMPLETE, "selections": sel(&["api_key", "distinct_users"])}),
                mixed.clone(),
            ),
            // Shape 2.
            (
                json!({"data_source": COMMAND,
                    "selections": [sum("bytes_added"), {"field": "bytes_removed"}],
                    "aggregations": group("language", "language")}),
                mixed.clone(),
            ),
            // Shape 3: not a group-by field.
            (
                json!({"data_source": AUTOCOMPLETE,
                    "selections": sel(&["api_key", "num_acceptances"]),
                    "aggregations": group("api_key", "user")}),
                vec![d(
                    "query_requests[0].selections[1].field",
                    "ungrouped_field",
                )],
            ),
            (
                json!({"data_source": COMMAND, "selections": [unspecified("accepted")],
                    "aggregations": group("api_key", "user")}),
                vec![d(
                    "query_requests[0].selections[0].field",
                    "ungrouped_field",
                )],
            ),
            (
                json!({"data_source": AGENT,
                    "selections": sel(&["model", "flex_credits_used", "metadata"]),
                    "aggregations": group("model", "m")}),
                vec![
                    d("query_requests[0].selections[1].field", "ungrouped_field"),
                    d("query_requests[0].selections[2].field", "ungrouped_field"),
                ],
            ),
            // `metadata`: UNSPECIFIED only; not a filter or group-by field.
            (
                json!({"data_source": AGENT,
                    "selections": [{"field": "metadata", "aggregation_function": "QUERY_AGGREGATION_COUNT"}]}),
                vec![d(
                    "query_requests[0].selections[0].aggregation_function",
                    "invalid_aggregation",
                )],
            ),
            (
                json!({"data_source": AGENT, "selections": sel(&["api_key"]),
                    "filters": [filter("metadata", "EQUAL", "{}")]}),
                vec![d("query_requests[0].filters[0].name", "unknown_field")],
            ),
            (
                json!({"data_source": AGENT, "selections": [sum("prompts_used")],
                    "aggregations": group("metadata", "meta")}),
                vec![d("query_requests[0].aggregations[0].field", "unknown_field")],
            ),
            // A metric is not a group-by field.
            (
                json!({"data_source": AGENT, "selections": [sum("prompts_used")],
                    "aggregations": group("flex_credits_used", "f")}),
                vec![d(
                    "query_requests[0].aggregations[0].field",
                    "invalid_aggregation",
                )],
            ),
        ];
        for (i, (query, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                fx.violations(json!([query])).await,
                expected,
                "case {i}: {query}"
            );
        }
        // A valid raw-row query does not save the request: every violation, in order.
        let raw = agent_credits(json!([]));
        let bad = json!({"data_source": AUTOCOMPLETE,
            "selections": sel(&["api_key", "num_acceptances"]),
            "aggregations": group("api_key", "user")});
        assert_eq!(
            fx.violations(json!([raw, bad, raw])).await,
            [d("query_requests[1].selections[1].field", "ungrouped_field")]
        );
        // PCW keeps its single item, whatever its selections and filters.
        let pcw = |filters: Value| {
            json!({"data_source": PCW, "selections": sel(&["percent_code_written", "vendor_bytes",
                "user_bytes", "total_bytes", "vendor_bytes_by_autocomplete", "vendor_bytes_by_command"]),
                "filters": filters})
        };
        let keys = [
            "percent_code_written",
            "vendor_bytes",
            "user_bytes",
            "total_bytes",
            "vendor_bytes_by_autocomplete",
            "vendor_bytes_by_command",
        ];
        assert_eq!(
            table(&fx.items(pcw(json!([]))).await, &keys),
            rows(&["0.3|60|140|200|50|10"])
        );
        assert_eq!(
            table(
                &fx.items(pcw(json!([
                    filter("language", "EQUAL", "PYTHON"),
                    filter("language", "EQUAL", "GO")
                ])))
                .await,
                &keys
            ),
            rows(&["0.3|60|140|200|50|10"])
        );
        assert_eq!(
            table(
                &fx.items(pcw(json!([filter("language", "EQUAL", "PYTHON")])))
                    .await,
                &keys
            ),
            rows(&["0.4|40|60|100|30|10"])
        );
        assert_eq!(
            table(
                &fx.items(pcw(json!([filter("language", "EQUAL", "ZIG")])))
                    .await,
                &keys
            ),
            rows(&["0|0|0|0|0|0"])
        );
    })
    .await;
}

on_every_store!(usage_config_answers_an_empty_json_message);
async fn usage_config_answers_an_empty_json_message(kind: TestStore) {
    on_seeded_store(kind, async |fx| {
        let cases = [
            (json!({"team_level": true}), json!(500)),
            (json!({"group_id": "g-eng"}), json!(0)),
            (json!({"user_email": ZOE}), json!("1000000000")),
        ];
        for (scope, cap) in cases {
            let mut set = scope.clone();
            set["set_add_on_credit_cap"] = cap.clone();
            let mut clear = scope.clone();
            clear["clear_add_on_credit_cap"] = json!(true);
            let cap = cap
                .as_i64()
                .unwrap_or_else(|| cap.as_str().unwrap().parse().unwrap());
            for (body, after) in [
                (set, json!({"addOnCreditCap": cap})),
                (clear.clone(), json!({})),
                (clear, json!({})),
            ] {
                let r = fx.post("UsageConfig", body.clone()).await;
                assert_eq!(r.status, 200, "{body}: {}", r.text);
                assert_eq!(
                    r.headers.get("content-type").and_then(|v| v.to_str().ok()),
                    Some("application/json"),
                    "{body}"
                );
                // The clients parse the body as JSON.
                let parsed: Value = serde_json::from_str(&r.text)
                    .unwrap_or_else(|e| panic!("{body}: {e}: {:?}", r.text));
                assert_eq!(parsed, json!({}), "{body}");
                assert_eq!(r.text, "{}");
                let got = fx.post("GetUsageConfig", scope.clone()).await;
                assert_eq!(got.ok(), &after, "{body}");
            }
        }
        let caps = fx
            .store
            .audit(&fx.team)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| matches!(e.change, usage_server::store::Change::Cap { .. }))
            .count();
        assert_eq!(caps, 9);
    })
    .await;
}

fn parse_rfc3339(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s)
        .unwrap_or_else(|e| panic!("{s}: {e}"))
        .with_timezone(&Utc)
}

/// `signupTime` of every user, parsed as the clients parse it.
async fn signups(fx: &Fx) -> Vec<(String, DateTime<Utc>, String)> {
    fx.users()
        .await
        .iter()
        .map(|u| {
            let text = u["signupTime"]
                .as_str()
                .unwrap_or_else(|| panic!("no signupTime: {u}"));
            (
                u["email"].as_str().unwrap().to_string(),
                parse_rfc3339(text),
                text.to_string(),
            )
        })
        .collect()
}

fn batch(kind: &'static RecordKind, rows: Value) -> Batch {
    Batch {
        kind,
        records: rows
            .as_array()
            .unwrap()
            .iter()
            .map(|v| parse_record(kind, v, &JsonPath::root()).unwrap())
            .collect(),
    }
}

on_every_store!(signup_time_in_every_user_entry);
async fn signup_time_in_every_user_entry(kind: TestStore) {
    let load = async |fx: &Fx| {
        // A user first stored long ago (as an earlier import would have).
        let long_ago = Timestamp::parse_rfc3339("2020-01-01T00:00:00.75Z").unwrap();
        fx.store
            .ingest(
                &fx.team,
                batch(
                    &records::USERS,
                    json!([{"email": "old@f", "name": "Old", "api_key": "k-old"}]),
                ),
                long_ago,
            )
            .await
            .unwrap();
        let before = Utc::now();
        seed(fx).await;
        let after = Utc::now();
        let first = signups(fx).await;
        let emails: Vec<&str> = first.iter().map(|(e, _, _)| e.as_str()).collect();
        assert_eq!(emails, ["ana@f", "bob@f", "cy@f", "old@f", ZOE]);
        assert_eq!(first[0].2, "2024-03-05T06:07:08.5Z");
        assert_eq!(first[3].2, "2020-01-01T00:00:00Z");
        // Without `signup_time`: the time the user was first stored, in whole seconds.
        let floor = before.timestamp();
        for (email, t, text) in [&first[1], &first[2], &first[4]] {
            assert!(
                floor <= t.timestamp() && *t <= after,
                "{email}: {text} not in [{before}, {after}]"
            );
            assert_eq!(t.timestamp_subsec_nanos(), 0, "{email}: {text}");
            assert!(text.ends_with('Z') && !text.contains('.'), "{text}");
        }

        // Replaced without `signup_time`, through Ingest: every value is kept.
        fx.ingest(
            "users",
            json!([
                {"email": "old@f", "name": "Old Again", "api_key": "k-old"},
                {"email": "bob@f", "name": "Bob Again", "api_key": "k-bob", "groups": ["g-eng"]},
                {"email": "ana@f", "name": "Ana Again", "api_key": "k-ana", "groups": ["g-eng"]}
            ]),
        )
        .await;
        assert_eq!(signups(fx).await, first);
        assert_eq!(fx.users().await[3]["name"], "Old Again");
        // ... and through import.
        let again = batch(
            &records::USERS,
            json!([
                {"email": "cy@f", "name": "Cy Again", "api_key": "k-cy"},
                {"email": "old@f", "name": "Old Again", "api_key": "k-old"}
            ]),
        );
        let n = fx
            .store
            .import(
                &fx.team,
                &records::USERS,
                Box::new(again.records.into_iter().map(Ok)),
                Timestamp::now(),
            )
            .await
            .unwrap();
        assert_eq!(n, Some(2));
        assert_eq!(signups(fx).await, first);
        assert_eq!(fx.users().await[2]["name"], "Cy Again");

        // A record with `signup_time` sets it.
        fx.ingest(
            "users",
            json!([{"email": "cy@f", "name": "Cy", "api_key": "k-cy",
                    "signup_time": "2025-02-03T04:05:06-01:00"}]),
        )
        .await;
        let now = signups(fx).await;
        assert_eq!(now[2].2, "2025-02-03T05:05:06Z");
        assert_eq!(now[2].1, parse_rfc3339("2025-02-03T05:05:06Z"));
        // Within one batch, a later record without `signup_time` keeps what the earlier
        // one gave, as when the two are loaded one after the other.
        fx.ingest(
            "users",
            json!([
                {"email": "new@f", "name": "New", "api_key": "k-new", "signup_time": "2023-01-01T00:00:00Z"},
                {"email": "new@f", "name": "New Again", "api_key": "k-new"}
            ]),
        )
        .await;
        let now = signups(fx).await;
        let new = now.iter().find(|(e, _, _)| e == "new@f").unwrap();
        assert_eq!(new.2, "2023-01-01T00:00:00Z");
        now
    };
    on_store_reopened(kind, load, async |fx, loaded| {
        assert_eq!(&signups(fx).await, loaded);
    })
    .await;
}

on_every_store!(flex_credits_through_ingest_and_import);
async fn flex_credits_through_ingest_and_import(kind: TestStore) {
    let flex = async |fx: &Fx| -> Vec<Vec<String>> {
        let q = json!({"data_source": AGENT,
            "selections": sel(&["agent_id", "flex_credits_used"]),
            "filters": [filter("api_key", "EQUAL", "k-ana"), filter("api_key", "EQUAL", "k-cy")]});
        table(&fx.items(q).await, &["agent_id", "flex_credits_used"])
    };
    let load = async |fx: &Fx| {
        seed(fx).await;
        assert_eq!(flex(fx).await, rows(&["c1|150", "c2|0"]));
        // Import: r2 again with flex credits, and a new run without them.
        let jsonl = [
            r#"{"id": "r2", "api_key": "k-ana", "timestamp": "2025-05-01T17:30:00.5Z", "ide_type": "plugin", "model": "gpt", "mode": "UNKNOWN", "messages_sent": 1, "agent_id": "c2", "prompts_used": 100, "flex_credits_used": "40"}"#,
            r#"{"id": "r6", "api_key": "k-cy", "timestamp": "2025-05-03T00:00:00Z", "ide_type": "editor", "model": "gpt", "mode": "UNKNOWN", "messages_sent": 1, "agent_id": "c6", "prompts_used": 7}"#,
        ];
        let parsed: Vec<_> = jsonl
            .iter()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                Ok(parse_record(&records::AGENT_RUNS, &v, &JsonPath::root()).unwrap())
            })
            .collect();
        let n = fx
            .store
            .import(
                &fx.team,
                &records::AGENT_RUNS,
                Box::new(parsed.into_iter()),
                Timestamp::now(),
            )
            .await
            .unwrap();
        assert_eq!(n, Some(2));

        // A negative or fractional value is refused like any count.
        let r = fx
            .post(
                "Ingest",
                json!({"kind": "agent_runs", "records": [{"id": "r9", "api_key": "k-cy",
                    "timestamp": "2025-05-03T00:00:00Z", "ide_type": "editor", "model": "gpt",
                    "mode": "UNKNOWN", "messages_sent": 1, "agent_id": "c9", "prompts_used": 7,
                    "flex_credits_used": -1}]}),
            )
            .await;
        assert_eq!(
            r.details(),
            [d("records[0].flex_credits_used", "invalid_value")]
        );
    };
    on_store_reopened(kind, load, async |fx, ()| {
        assert_eq!(flex(fx).await, rows(&["c1|150", "c2|40", "c6|0"]));
    })
    .await;
}

/// Every curl command of `docs/compatibility.md` as (operation, body), the body as the
/// shell builds it from its single-quoted pieces and `$KEY`.
fn compatibility_page_curls(key: &str) -> Vec<(String, String)> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/compatibility.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for (at, _) in doc.match_indices("\ncurl ") {
        let cmd = &doc[at + 1..];
        let url = cmd.find("$BASE/api/v1/").expect("a curl to $BASE") + "$BASE/api/v1/".len();
        let op: String = cmd[url..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let mut s = &cmd[cmd.find("-d '").expect("a body") + 3..];
        let mut body = String::new();
        loop {
            if let Some(quoted) = s.strip_prefix('\'') {
                let end = quoted.find('\'').expect("a closing quote");
                body.push_str(&quoted[..end]);
                s = &quoted[end + 1..];
            } else if let Some(rest) = s.strip_prefix("$KEY") {
                body.push_str(key);
                s = rest;
            } else {
                break;
            }
        }
        out.push((op, body));
    }
    out
}

on_every_store!(demo_data_and_the_compatibility_page);
async fn demo_data_and_the_compatibility_page(kind: TestStore) {
    let now = Timestamp::now();
    let fx = Fx::start_demo(kind, now).await;
    // The demo's runs carry flex credits: their sum over the demo's records.
    let want: i64 = usage_server::demo::records(now)
        .iter()
        .filter(|b| b.kind.name == "agent_runs")
        .flat_map(|b| &b.records)
        .map(|r| r.count("flex_credits_used"))
        .sum();
    assert!(want > 0);
    let q = json!({"data_source": AGENT,
        "selections": [{"field": "flex_credits_used", "aggregation_function": "QUERY_AGGREGATION_SUM"}]});
    assert_eq!(
        table(&fx.items(q).await, &["sum_flex_credits_used"]),
        [vec![want.to_string()]]
    );
    // Every curl of the compatibility page answers, with data.
    let curls = compatibility_page_curls(&fx.key);
    assert_eq!(curls.len(), 7, "{curls:?}");
    for (op, body) in curls {
        let parsed: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        let r = fx.send_text(&op, parsed.to_string()).await;
        let v = r.ok();
        match op.as_str() {
            "Analytics" => {
                for q in v["queryResults"].as_array().unwrap() {
                    assert!(!q["responseItems"].as_array().unwrap().is_empty(), "{body}");
                }
            }
            "UserPageAnalytics" => {
                let users = v["userTableStats"].as_array().unwrap();
                assert!(users.iter().all(|u| u["signupTime"].is_string()), "{v}");
            }
            "UsageConfig" => assert_eq!(v, &json!({})),
            other => panic!("a curl of {other}"),
        }
    }
    fx.stop().await;
}
