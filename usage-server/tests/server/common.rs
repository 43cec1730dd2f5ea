//! A server in this process on an ephemeral port, over a fresh store of the kind each test
//! names, with a seeded team ([`Env`]); [`on_every_store!`] runs a test on every store.
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::{Value, json};
use usage_core::JsonPath;
use usage_core::load::{Batch, parse_record};
use usage_core::schema::records::{self, RecordKind};
use usage_core::schema::{Permission, Plan};
use usage_core::time::Timestamp;
use usage_server::http::{Config, Handle};
use usage_server::store::Store;
pub use usage_server::testing::{ALL, TestServer, TestStore, add_team, fast_config, make_key};

/// Declares one test per store for the test function `$name(store: TestStore)` (async
/// unless `sync`): `$name::memory`, `$name::sqlite`, `$name::postgres` and `$name::citus`
/// (the PostgreSQL store on a Citus cluster), so a failure
/// names its store. Arguments after the name go to `#[tokio::test(...)]`.
macro_rules! on_every_store {
    (sync $name:ident) => {
        mod $name {
            use usage_server::testing::TestStore;

            #[test]
            fn memory() {
                super::$name(TestStore::Memory)
            }

            #[test]
            fn sqlite() {
                super::$name(TestStore::Sqlite)
            }

            #[test]
            fn postgres() {
                super::$name(TestStore::Postgres)
            }

            #[test]
            fn citus() {
                super::$name(TestStore::Citus)
            }
        }
    };
    ($name:ident $(, $($arg:tt)+)?) => {
        mod $name {
            use usage_server::testing::TestStore;

            #[tokio::test$(($($arg)+))?]
            async fn memory() {
                super::$name(TestStore::Memory).await
            }

            #[tokio::test$(($($arg)+))?]
            async fn sqlite() {
                super::$name(TestStore::Sqlite).await
            }

            #[tokio::test$(($($arg)+))?]
            async fn postgres() {
                super::$name(TestStore::Postgres).await
            }

            #[tokio::test$(($($arg)+))?]
            async fn citus() {
                super::$name(TestStore::Citus).await
            }
        }
    };
}

pub struct Env {
    pub server: Handle,
    pub store: Arc<dyn Store>,
    pub client: reqwest::Client,
    /// Team A, seeded.
    pub team: String,
    /// A key of team A with every permission.
    pub key: String,
    /// Holds a SQLite store's file.
    _dir: tempfile::TempDir,
}

pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    /// Sends `req`; the answer, its body parsed as JSON (`Null` when it is not JSON).
    pub async fn of(req: reqwest::RequestBuilder) -> Reply {
        let res = req.send().await.unwrap();
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let text = res.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply {
            status,
            headers,
            body,
            text,
        }
    }

    /// Asserts the contract's error body and returns it.
    pub fn error(&self, status: u16, code: &str) -> &Value {
        assert_eq!(self.status, status, "body: {}", self.text);
        let b = &self.body;
        assert_eq!(b["code"], code, "body: {}", self.text);
        assert!(
            b["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{}",
            self.text
        );
        assert_eq!(b["error"], b["message"], "{}", self.text);
        let rid = self.headers["x-request-id"].to_str().unwrap();
        assert_eq!(b["requestId"], rid);
        assert_eq!(b.get("details").is_some(), status == 400, "{}", self.text);
        assert_eq!(self.headers["content-type"], "application/json");
        b
    }

    /// `(path, rule)` of every detail of a 400.
    pub fn details(&self) -> Vec<(String, String)> {
        self.error(400, "invalid_argument");
        self.body["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                assert!(d["message"].as_str().is_some_and(|m| !m.is_empty()));
                (
                    d["path"].as_str().unwrap().to_string(),
                    d["rule"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    pub fn ok(&self) -> &Value {
        assert_eq!(self.status, 200, "body: {}", self.text);
        assert_eq!(self.headers["content-type"], "application/json");
        &self.body
    }
}

pub fn d(path: &str, rule: &str) -> (String, String) {
    (path.to_string(), rule.to_string())
}

pub async fn load(store: &dyn Store, team: &str, kind: &'static RecordKind, rows: Value) {
    let records = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|v| parse_record(kind, v, &JsonPath::root()).unwrap())
        .collect();
    store
        .ingest(team, Batch { kind, records }, Timestamp::now())
        .await
        .unwrap();
}

/// Team A: groups `eng` (g-eng) and `ops` (g-ops); ana@a (eng), bob@a (eng, ops),
/// cy@a (pending, ops); autocomplete, chat, agent records.
pub async fn seed(store: &dyn Store, team: &str) {
    load(
        store,
        team,
        &records::GROUPS,
        json!([
            {"group_id": "g-eng", "group_name": "eng"},
            {"group_id": "g-ops", "group_name": "ops"}
        ]),
    )
    .await;
    load(store, team, &records::USERS, json!([
        {"email": "ana@a", "name": "Ana", "api_key": "k-ana", "groups": ["g-eng"], "signup_time": "2025-01-01T00:00:00Z"},
        {"email": "bob@a", "name": "Bob", "api_key": "k-bob", "groups": ["g-eng", "g-ops"], "signup_time": "2025-01-02T00:00:00Z"},
        {"email": "cy@a", "name": "Cy", "api_key": "k-cy", "groups": ["g-ops"], "team_status": "USER_TEAM_STATUS_PENDING", "disable_vendor": true, "signup_time": "2025-01-03T00:00:00Z"}
    ]))
    .await;
    let auto = |k: &str, hour: &str, lang: &str, n: i64| {
        json!({"api_key": k, "hour": hour, "language": lang, "ide": "vscode", "version": "1.10.0",
               "num_acceptances": n, "num_lines_accepted": n * 2, "num_bytes_accepted": n * 10})
    };
    load(
        store,
        team,
        &records::AUTOCOMPLETE,
        json!([
            auto("k-ana", "2025-05-01T10:00:00Z", "PYTHON", 3),
            auto("k-ana", "2025-05-02T10:00:00Z", "GO", 4),
            auto("k-bob", "2025-05-01T11:00:00Z", "PYTHON", 5),
            auto("k-cy", "2025-05-03T09:00:00Z", "RUST", 7)
        ]),
    )
    .await;
    load(store, team, &records::AGENT_LINES, json!([
        {"api_key": "k-ana", "day": "2025-05-01", "ide_type": "editor", "lines_suggested": 10, "lines_accepted": 4},
        {"api_key": "k-bob", "day": "2025-05-01", "ide_type": "plugin", "lines_suggested": 5, "lines_accepted": 0},
        {"api_key": "k-cy", "day": "2025-05-02", "ide_type": "editor", "lines_suggested": 7, "lines_accepted": 7}
    ]))
    .await;
    load(store, team, &records::AGENT_RUNS, json!([
        {"id": "r1", "api_key": "k-ana", "timestamp": "2025-05-01T12:00:00Z", "ide_type": "editor", "model": "m1",
         "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 3, "agent_id": "c1", "prompts_used": 200},
        {"id": "r2", "api_key": "k-bob", "timestamp": "2025-05-02T08:00:00Z", "ide_type": "plugin", "model": "m2",
         "mode": "UNKNOWN", "messages_sent": 1, "agent_id": "c2", "prompts_used": 0}
    ]))
    .await;
    load(store, team, &records::AGENT_TOOL_USAGE, json!([
        {"api_key": "k-ana", "day": "2025-05-01", "ide_type": "editor", "tool": "VIEW_FILE", "count": 4},
        {"api_key": "k-bob", "day": "2025-05-01", "ide_type": "plugin", "tool": "VIEW_FILE", "count": 2},
        {"api_key": "k-bob", "day": "2025-05-01", "ide_type": "plugin", "tool": "GREP_SEARCH", "count": 9}
    ]))
    .await;
}

impl Env {
    /// A server over a fresh store of `kind` with `config`, team A [`seed`]ed in it.
    pub async fn with_config(kind: TestStore, config: Config) -> Env {
        let TestServer {
            store,
            server,
            team,
            key,
            dir,
            ..
        } = TestServer::start(kind, config, async |store| {
            let team = add_team(store, "A", Plan::Enterprise).await;
            seed(store, &team).await;
            team
        })
        .await;
        Env {
            server,
            store,
            client: reqwest::Client::new(),
            team,
            key,
            _dir: dir,
        }
    }

    /// [`Env::with_config`] with [`fast_config`].
    pub async fn new(kind: TestStore) -> Env {
        Env::with_config(kind, fast_config()).await
    }

    pub async fn key_with(&self, perms: &[Permission]) -> String {
        make_key(self.store.as_ref(), &self.team, perms).await
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Reply {
        Reply::of(req).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url())
    }

    pub async fn raw(
        &self,
        op: &str,
        content_type: Option<&str>,
        body: impl Into<reqwest::Body>,
    ) -> Reply {
        let mut req = self
            .client
            .post(self.url(&format!("/api/v1/{op}")))
            .body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        self.send(req).await
    }

    /// POSTs `body` with the key given (as `service_key`), unless the body has one.
    pub async fn post_as(&self, key: &str, op: &str, mut body: Value) -> Reply {
        if body.get("service_key").is_none() && body.get("serviceKey").is_none() {
            body["service_key"] = json!(key);
        }
        self.raw(op, Some("application/json"), body.to_string())
            .await
    }

    pub async fn post(&self, op: &str, body: Value) -> Reply {
        self.post_as(&self.key, op, body).await
    }
}

/// A valid request of every operation of the spec (and Ingest) for team A's data.
pub fn valid_requests() -> Vec<(&'static str, Value)> {
    vec![
        (
            "Analytics",
            json!({"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}]}]}),
        ),
        ("UserPageAnalytics", json!({})),
        (
            "AgentAnalytics",
            json!({"query_requests": [{"agent_lines": {}}]}),
        ),
        ("GetUsageConfig", json!({"team_level": true})),
        (
            "UsageConfig",
            json!({"team_level": true, "set_add_on_credit_cap": 10}),
        ),
        ("GetTeamCreditBalance", json!({})),
        (
            "Ingest",
            json!({"kind": "groups", "records": [{"group_id": "g-new", "group_name": "new"}]}),
        ),
    ]
}
