//! A `usage-server` in this process on an ephemeral port (the server's own test harness,
//! `usage_server::testing`), a team loaded through the client's `Ingest`, and tiny fake
//! servers for the answers a correct server never gives. Only public APIs of the three
//! crates are used.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use usage::client::{Client, RetryPolicy};
use usage::core::schema::{Permission, Plan};
use usage_server::http::Config;
use usage_server::testing::{TestServer, TestStore};
pub use usage_server::testing::{add_team, fast_config, make_key};

/// A server (memory store) with one enterprise team (12 seats, 500 credits per seat) and
/// a key that has every permission; [`TestServer`]'s fields through `Deref`.
pub struct Env(TestServer);

impl std::ops::Deref for Env {
    type Target = TestServer;

    fn deref(&self) -> &TestServer {
        &self.0
    }
}

impl Env {
    /// An empty team on a server with `config`.
    pub async fn empty(config: Config) -> Env {
        Env(TestServer::start(TestStore::Memory, config, async |store| {
            add_team(store, "client-tests", Plan::Enterprise).await
        })
        .await)
    }

    /// The team of [`seed`], loaded through the client.
    pub async fn seeded() -> Env {
        let env = Env::empty(fast_config()).await;
        seed(&env.client()).await;
        env
    }

    /// A client with the all-permission key and no retries.
    pub fn client(&self) -> Client {
        self.client_with(&self.key)
    }

    /// A client with `key` and no retries.
    pub fn client_with(&self, key: &str) -> Client {
        Client::builder()
            .base_url(self.server.url())
            .service_key(key)
            .retry(RetryPolicy::none())
            .build()
            .unwrap()
    }

    /// A new key of the team.
    pub async fn key_with(&self, perms: &[Permission]) -> String {
        make_key(self.store.as_ref(), &self.team, perms).await
    }

    /// POSTs `body` (with the all-permission key) as raw JSON; the status and the body.
    pub async fn raw(&self, op: &str, mut body: Value) -> (u16, Value) {
        body["service_key"] = json!(self.key);
        let res = reqwest::Client::new()
            .post(format!("{}/api/v1/{op}", self.server.url()))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let bytes = res.bytes().await.unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

/// `(path, rule)` pairs, as [`usage::client::Error::violations`] gives them.
pub fn d(path: &str, rule: &str) -> (String, String) {
    (path.to_string(), rule.to_string())
}

/// The test team, loaded with `Ingest` (so every record kind goes through the client).
///
/// Groups `eng` (g-eng: ana, bob) and `ops` (g-ops: bob, cy); cy is pending and disabled.
/// Hand-computed answers are in the tests next to each query.
pub async fn seed(c: &Client) {
    let load = |kind: &'static str, records: Value| async move {
        let records = records.as_array().unwrap().clone();
        let n = records.len() as i64;
        assert_eq!(c.ingest(kind).records(records).send().await.unwrap(), n);
    };
    load(
        "groups",
        json!([
            {"group_id": "g-eng", "group_name": "eng"},
            {"group_id": "g-ops", "group_name": "ops"}
        ]),
    )
    .await;
    load("users", json!([
        {"email": "ana@t.example", "name": "Ana", "api_key": "k-ana", "groups": ["g-eng"], "signup_time": "2025-01-01T00:00:00Z"},
        {"email": "bob@t.example", "name": "Bob", "api_key": "k-bob", "groups": ["g-eng", "g-ops"], "signup_time": "2025-01-02T00:00:00Z"},
        {"email": "cy@t.example", "name": "Cy", "api_key": "k-cy", "groups": ["g-ops"],
         "team_status": "USER_TEAM_STATUS_PENDING", "disable_vendor": true, "signup_time": "2025-01-03T00:00:00Z"}
    ]))
    .await;
    let auto = |k: &str, hour: &str, lang: &str, ide: &str, version: &str, n: i64| {
        json!({"api_key": k, "hour": hour, "language": lang, "ide": ide, "version": version,
               "num_acceptances": n, "num_lines_accepted": n * 2, "num_bytes_accepted": n * 10})
    };
    load(
        "autocomplete",
        json!([
            auto(
                "k-ana",
                "2025-05-01T10:00:00Z",
                "PYTHON",
                "vscode",
                "1.10.0",
                3
            ),
            auto("k-ana", "2025-05-02T10:00:00Z", "GO", "vscode", "1.9.12", 4),
            auto(
                "k-bob",
                "2025-05-01T11:00:00Z",
                "PYTHON",
                "jetbrains",
                "1.10.0",
                5
            ),
            auto(
                "k-cy",
                "2025-05-03T09:00:00Z",
                "RUST",
                "vscode",
                "1.11.0",
                7
            )
        ]),
    )
    .await;
    load("chat", json!([
        {"id": "c1", "api_key": "k-ana", "timestamp": "2025-05-01T12:00:00Z", "model_id": "model-a", "ide": "vscode",
         "version": "1.10.0", "latest_intent_type": "CHAT_INTENT_GENERIC", "num_chats_received": 2,
         "chat_accepted": true, "chat_inserted_at_cursor": false, "chat_applied": true, "chat_loc_used": 10},
        {"id": "c2", "api_key": "k-bob", "timestamp": "2025-05-01T13:30:00Z", "model_id": "model-b", "ide": "jetbrains",
         "version": "1.10.0", "latest_intent_type": "CHAT_INTENT_FUNCTION_EXPLAIN", "num_chats_received": 1,
         "chat_accepted": false, "chat_inserted_at_cursor": true, "chat_applied": false, "chat_loc_used": 0},
        {"id": "c3", "api_key": "k-ana", "timestamp": "2025-05-02T09:00:00Z", "model_id": "model-a", "ide": "vscode",
         "version": "1.10.0", "latest_intent_type": "CHAT_INTENT_GENERIC", "num_chats_received": 3,
         "chat_accepted": true, "chat_inserted_at_cursor": true, "chat_applied": false, "chat_loc_used": 5}
    ]))
    .await;
    load("command", json!([
        {"id": "m1", "api_key": "k-ana", "timestamp": "2025-05-01T10:15:00Z", "language": "PYTHON", "ide": "vscode",
         "version": "1.10.0", "command_source": "COMMAND_REQUEST_SOURCE_DEFAULT",
         "provider_source": "PROVIDER_SOURCE_COMMAND_GENERATE", "lines_added": 10, "lines_removed": 0,
         "bytes_added": 200, "bytes_removed": 0, "selection_lines": 0, "selection_bytes": 0, "accepted": true},
        {"id": "m2", "api_key": "k-bob", "timestamp": "2025-05-01T11:45:30.25Z", "language": "GO", "ide": "jetbrains",
         "version": "1.10.0", "command_source": "COMMAND_REQUEST_SOURCE_RIGHT_CLICK_REFACTOR",
         "provider_source": "PROVIDER_SOURCE_COMMAND_EDIT", "lines_added": 4, "lines_removed": 6,
         "bytes_added": 80, "bytes_removed": 120, "selection_lines": 6, "selection_bytes": 120, "accepted": false},
        {"id": "m3", "api_key": "k-cy", "timestamp": "2025-05-02T08:00:00Z", "language": "PYTHON", "ide": "vscode",
         "version": "1.11.0", "command_source": "COMMAND_REQUEST_SOURCE_DEFAULT",
         "provider_source": "PROVIDER_SOURCE_COMMAND_EDIT", "lines_added": 2, "lines_removed": 1,
         "bytes_added": 40, "bytes_removed": 20, "selection_lines": 3, "selection_bytes": 60, "accepted": true}
    ]))
    .await;
    load("pcw", json!([
        {"api_key": "k-ana", "hour": "2025-05-01T10:00:00Z", "language": "PYTHON", "ide": "vscode", "version": "1.10.0",
         "vendor_bytes_by_autocomplete": 300, "vendor_bytes_by_command": 100, "user_bytes": 600},
        {"api_key": "k-bob", "hour": "2025-05-02T11:00:00Z", "language": "GO", "ide": "jetbrains", "version": "1.10.0",
         "vendor_bytes_by_autocomplete": 100, "vendor_bytes_by_command": 0, "user_bytes": 900}
    ]))
    .await;
    load("agent_lines", json!([
        {"api_key": "k-ana", "day": "2025-05-01", "ide_type": "editor", "lines_suggested": 10, "lines_accepted": 4},
        {"api_key": "k-bob", "day": "2025-05-01", "ide_type": "plugin", "lines_suggested": 5, "lines_accepted": 0},
        {"api_key": "k-cy", "day": "2025-05-02", "ide_type": "editor", "lines_suggested": 7, "lines_accepted": 7}
    ]))
    .await;
    load("agent_runs", json!([
        {"id": "r1", "api_key": "k-ana", "timestamp": "2025-05-01T12:00:00Z", "ide_type": "editor", "model": "model-a",
         "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 3, "agent_id": "conv-1", "prompts_used": 200},
        {"id": "r2", "api_key": "k-bob", "timestamp": "2025-05-02T08:00:00Z", "ide_type": "plugin", "model": "model-b",
         "mode": "UNKNOWN", "messages_sent": 1, "agent_id": "conv-2", "prompts_used": 0},
        {"id": "r3", "api_key": "k-ana", "timestamp": "2025-05-02T09:00:00Z", "ide_type": "editor", "model": "model-b",
         "mode": "CONVERSATIONAL_PLANNER_MODE_READ_ONLY", "messages_sent": 2, "agent_id": "conv-3",
         "prompts_used": "150", "flex_credits_used": 50}
    ]))
    .await;
    load("agent_tool_usage", json!([
        {"api_key": "k-ana", "day": "2025-05-01", "ide_type": "editor", "tool": "VIEW_FILE", "count": 4},
        {"api_key": "k-bob", "day": "2025-05-01", "ide_type": "plugin", "tool": "VIEW_FILE", "count": 2},
        {"api_key": "k-bob", "day": "2025-05-01", "ide_type": "plugin", "tool": "GREP_SEARCH", "count": 9}
    ]))
    .await;
    load(
        "billing",
        json!([{"add_on_credits_available": 1000, "add_on_credits_used": 250}]),
    )
    .await;
}

/// A fake HTTP/1.1 server: answers request `n` (0-based) with `answer(n)` (a whole
/// response, headers and body) and closes the connection. Counts the requests.
pub struct Fake {
    pub url: String,
    pub requests: Arc<AtomicUsize>,
}

impl Fake {
    pub async fn start(answer: impl Fn(usize) -> String + Send + Sync + 'static) -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let count = requests.clone();
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let count = count.clone();
                let answer = answer.clone();
                tokio::spawn(async move {
                    if read_request(&mut sock).await.is_none() {
                        return;
                    }
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    let _ = sock.write_all(answer(n).as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Fake { url, requests }
    }

    /// A server that reads each request, writes `prefix` (maybe nothing, maybe headers and
    /// half a body) and then holds the connection open without another byte.
    pub async fn stalling(prefix: &'static str) -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(AtomicUsize::new(0));
        let count = requests.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let count = count.clone();
                tokio::spawn(async move {
                    if read_request(&mut sock).await.is_some() {
                        count.fetch_add(1, Ordering::SeqCst);
                        let _ = sock.write_all(prefix.as_bytes()).await;
                        std::future::pending::<()>().await;
                    }
                });
            }
        });
        Fake { url, requests }
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// Reads one request (headers, then `Content-Length` bytes of body).
async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(buf[head_end..].to_vec())
}

/// An HTTP/1.1 response with a JSON body.
pub fn response(status: &str, extra_headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra_headers}\r\n{body}",
        body.len()
    )
}
