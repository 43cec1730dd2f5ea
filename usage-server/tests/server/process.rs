//! Tests of the real binary: durability across SIGKILL, graceful SIGTERM, `serve --demo`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::hotpath::until;

pub const BIN: &str = env!("CARGO_BIN_EXE_usage-server");

pub fn cmd(store: &str) -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("USAGE_STORE").arg("--store").arg(store);
    c
}

/// Runs an admin command; returns (exit code, stdout, stderr).
pub fn admin(store: &str, args: &[&str]) -> (i32, String, String) {
    let out = cmd(store).args(args).stdin(Stdio::null()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// An admin command that must succeed; its stdout as JSON.
pub fn ok(store: &str, args: &[&str]) -> Value {
    let (code, out, err) = admin(store, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// A new key of `team` with `permissions` (comma-separated), made by the CLI: its
/// `key_id` and `service_key`.
pub fn new_key(store: &str, team: &str, permissions: &str) -> Value {
    ok(
        store,
        &[
            "key",
            "create",
            "--team",
            team,
            "--permissions",
            permissions,
        ],
    )
}

pub struct Server {
    pub child: Child,
    pub line: Value,
    pub base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Never leave a server behind, also when a test fails.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    pub fn start(store: &str, extra: &[&str], log: &Path) -> Server {
        let mut child = cmd(store)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let line: Value = serde_json::from_str(&first).unwrap_or_else(|e| {
            panic!(
                "{e}: {first:?}; log: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        });
        let base = format!("http://{}", line["listen"].as_str().unwrap());
        Server { child, line, base }
    }

    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    pub fn sigterm(&self) {
        let pid = self.child.id() as i32;
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    }

    pub async fn post(&self, op: &str, body: Value) -> (u16, Value) {
        let res = reqwest::Client::new()
            .post(format!("{}/api/v1/{op}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }
}

pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub store: String,
    pub team: String,
    pub key: String,
    pub log: PathBuf,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("u.db").display());
    fixture_on(dir, store)
}

/// A team and a key of every permission, made by the CLI on `store`.
pub fn fixture_on(dir: tempfile::TempDir, store: String) -> Fixture {
    let team = ok(&store, &["team", "create", "--name", "T", "--seats", "3"])["team_id"]
        .as_str()
        .unwrap()
        .to_string();
    let key = new_key(
        &store,
        &team,
        "analytics-read,teams-read,billing-read,billing-write,usage-write",
    )["service_key"]
        .as_str()
        .unwrap()
        .to_string();
    let log = dir.path().join("server.log");
    Fixture {
        _dir: dir,
        store,
        team,
        key,
        log,
    }
}

#[tokio::test]
async fn acknowledged_caps_survive_sigkill() {
    let f = fixture();
    let mut expected = None;
    for round in 0..20i64 {
        let s = Server::start(&f.store, &[], &f.log);
        if let Some(prev) = expected {
            let (st, body) = s
                .post(
                    "GetUsageConfig",
                    json!({"service_key": f.key, "team_level": true}),
                )
                .await;
            assert_eq!(
                (st, body),
                (200, json!({"addOnCreditCap": prev})),
                "round {round}"
            );
        }
        let value = round * 7919 % 1000;
        let (st, body) = s
            .post(
                "UsageConfig",
                json!({"service_key": f.key, "team_level": true, "set_add_on_credit_cap": value}),
            )
            .await;
        assert_eq!((st, body), (200, json!({})));
        s.kill9();
        expected = Some(value);
    }
    let audit: Vec<Value> = ok_lines(&f.store, &["audit", "--team", &f.team])
        .into_iter()
        .filter(|e| e["action"] == "cap.change")
        .collect();
    assert_eq!(audit.len(), 20);
    assert_eq!(audit[19]["new"], json!(expected.unwrap()));
}

fn ok_lines(store: &str, args: &[&str]) -> Vec<Value> {
    let (code, out, err) = admin(store, args);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn acknowledged_ingest_survives_sigkill() {
    let f = fixture();
    let s = Server::start(&f.store, &[], &f.log);
    let records: Vec<Value> = (0..500)
        .map(|i| json!({"api_key": format!("k{}", i % 17), "hour": format!("2025-05-{:02}T{:02}:00:00Z", 1 + i / 24, i % 24),
                        "language": "GO", "ide": "vscode", "version": "1", "num_acceptances": i,
                        "num_lines_accepted": 1, "num_bytes_accepted": 1}))
        .collect();
    let (st, body) = s
        .post(
            "Ingest",
            json!({"service_key": f.key, "kind": "autocomplete", "records": records}),
        )
        .await;
    assert_eq!((st, body), (200, json!({"accepted": 500})));
    s.kill9();
    let s = Server::start(&f.store, &[], &f.log);
    let (st, body) = s
        .post("Analytics", json!({"service_key": f.key, "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
                           {"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_COUNT"}]}]}))
        .await;
    assert_eq!(st, 200, "{body}");
    let item = &body["queryResults"][0]["responseItems"][0]["item"];
    assert_eq!(
        item["sum_num_acceptances"],
        (0..500).sum::<i64>().to_string()
    );
    assert_eq!(item["count_api_key"], "500");
    s.kill9();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_accepted_requests_and_exits_zero() {
    let f = fixture();
    let mut s = Server::start(
        &f.store,
        &["--rate-per-minute", "1000000", "--rate-burst", "100000"],
        &f.log,
    );
    let addr = s.line["listen"].as_str().unwrap().to_string();
    let body = json!({"service_key": f.key, "team_level": true}).to_string();
    let request = format!(
        "POST /api/v1/GetUsageConfig HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    // Connections that the server has accepted, each with a request half sent.
    let mut conns = Vec::new();
    for _ in 0..3 {
        let mut c = TcpStream::connect(&addr).unwrap();
        c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 512];
        let n = c.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        c.write_all(request.as_bytes()).unwrap();
        c.write_all(&body.as_bytes()[..10]).unwrap();
        conns.push(c);
    }
    // Load from other clients, on fresh connections, until the server is gone.
    let load: Vec<_> = (0..4)
        .map(|_| {
            let (base, key) = (s.base.clone(), f.key.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::builder()
                    .pool_max_idle_per_host(0)
                    .build()
                    .unwrap();
                let (mut answered, mut refused) = (0u32, 0u32);
                while refused < 3 {
                    let res = client
                        .post(format!("{base}/api/v1/GetUsageConfig"))
                        .header("content-type", "application/json")
                        .body(json!({"service_key": key, "team_level": true}).to_string())
                        .send()
                        .await;
                    match res {
                        // Every answer is a full 200, during the drain too.
                        Ok(r) => {
                            assert_eq!(r.status(), 200);
                            assert_eq!(r.text().await.unwrap(), "{}");
                            answered += 1;
                        }
                        Err(_) => refused += 1,
                    }
                }
                answered
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    s.sigterm();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for mut c in conns {
        c.write_all(&body.as_bytes()[10..]).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.ends_with("{}"), "{out}");
    }
    let status = s.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut answered = 0;
    for t in load {
        answered += t.await.unwrap();
    }
    assert!(answered > 0);
    // Nothing listens any more.
    assert!(TcpStream::connect(&addr).is_err());
    let log = std::fs::read_to_string(&f.log).unwrap();
    assert!(!log.contains(&f.key), "the key was logged");
}

#[tokio::test]
async fn serve_demo_prints_a_working_curl_command() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("demo.db").display());
    let log = dir.path().join("log");
    let s = Server::start(&store, &["--demo"], &log);
    let curl = s.line["curl"].as_str().unwrap().to_string();
    let key = s.line["service_key"].as_str().unwrap().to_string();
    assert!(key.starts_with("usk_") && curl.contains(&key));
    // Beside it, the dashboard's address (without the key: the page asks for it).
    assert_eq!(s.line["dashboard"], format!("{}/dashboard", s.base));
    let page = reqwest::get(s.line["dashboard"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("<title>Usage dashboard</title>")
    );
    let mut fields: Vec<&str> = s
        .line
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["curl", "dashboard", "listen", "service_key", "team_id"]
    );
    assert!(s.line["team_id"].as_str().unwrap().starts_with("team_"));
    // Run the printed command's request: its URL and its -d body.
    let url = curl
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_string();
    let body = curl
        .split("-d '")
        .nth(1)
        .unwrap()
        .trim_end_matches('\'')
        .to_string();
    let res = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let v: Value = res.json().await.unwrap();
    assert_eq!(
        v["queryResults"][0]["responseItems"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    s.kill9();
    // A second start keeps the data and prints a fresh key.
    let s2 = Server::start(&store, &["--demo"], &log);
    let key2 = s2.line["service_key"].as_str().unwrap();
    assert_ne!(key2, key);
    let (st, v2) = s2
        .post(
            "Analytics",
            serde_json::from_str(&usage_server::demo::curl_body(key2)).unwrap(),
        )
        .await;
    assert_eq!(st, 200);
    assert_eq!(v2, v);
    s2.kill9();
}

#[tokio::test]
async fn two_servers_share_one_sqlite_store() {
    let f = fixture();
    let a = Server::start(&f.store, &[], &f.log);
    let b = Server::start(&f.store, &[], &f.log);
    let (st, _) = a
        .post(
            "UsageConfig",
            json!({"service_key": f.key, "team_level": true, "set_add_on_credit_cap": 321}),
        )
        .await;
    assert_eq!(st, 200);
    // Caps are read from the store: the other server answers at once.
    let (st, v) = b
        .post(
            "GetUsageConfig",
            json!({"service_key": f.key, "team_level": true}),
        )
        .await;
    assert_eq!((st, v), (200, json!({"addOnCreditCap": 321})));
    let (st, _) = a
        .post("Ingest", json!({"service_key": f.key, "kind": "groups", "records": [{"group_id": "g9", "group_name": "nine"}]}))
        .await;
    assert_eq!(st, 200);
    // Records reach the other server's cache by polling; bounded retries.
    let mut status = 0;
    for _ in 0..100 {
        let (st, _) = b
            .post(
                "GetUsageConfig",
                json!({"service_key": f.key, "group_id": "g9"}),
            )
            .await;
        status = st;
        if st == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, 200);
    a.kill9();
    b.kill9();
}

#[tokio::test]
async fn two_servers_share_one_postgres_database() {
    two_servers_share_one_database(usage_server::testing::fresh_postgres()).await;
}

/// The same on the Citus cluster: the servers meet on the coordinator.
#[tokio::test]
async fn two_servers_share_one_citus_database() {
    two_servers_share_one_database(usage_server::testing::fresh_citus()).await;
}

async fn two_servers_share_one_database(store: String) {
    // `migrate` on a fresh database applies the migrations once (eight: the last makes the
    // webhooks' tables).
    assert_eq!(ok(&store, &["migrate"]), json!({"migrations_applied": 8}));
    assert_eq!(ok(&store, &["migrate"]), json!({"migrations_applied": 0}));
    let f = fixture_on(tempfile::tempdir().unwrap(), store);
    let a = Server::start(&f.store, &[], &f.log);
    let b = Server::start(&f.store, &[], &f.log);
    // A cap set through one is read through the other.
    let (st, v) = a
        .post(
            "UsageConfig",
            json!({"service_key": f.key, "team_level": true, "set_add_on_credit_cap": 777}),
        )
        .await;
    assert_eq!((st, v), (200, json!({})));
    let (st, v) = b
        .post(
            "GetUsageConfig",
            json!({"service_key": f.key, "team_level": true}),
        )
        .await;
    assert_eq!((st, v), (200, json!({"addOnCreditCap": 777})));
    // Records ingested through one are read through the other within a second (each
    // caches the team's columns and metadata, kept current by the database's change feed;
    // `until` allows the contract's 5 s).
    let rec = |key: &str, hour: &str, n: i64| {
        json!({"api_key": key, "hour": hour, "language": "GO", "ide": "vscode", "version": "1.10.0",
               "num_acceptances": n, "num_lines_accepted": n, "num_bytes_accepted": n})
    };
    let (st, v) = a
        .post(
            "Ingest",
            json!({"service_key": f.key, "kind": "autocomplete", "records": [
                rec("k1", "2025-05-01T10:00:00Z", 4), rec("k2", "2025-05-01T11:00:00Z", 5)]}),
        )
        .await;
    assert_eq!((st, v), (200, json!({"accepted": 2})));
    let want = json!({"queryResults": [{"responseItems": [{"item": {"sum_num_acceptances": "9", "distinct_users": "2"}}]}]});
    until(
        &b,
        "Analytics",
        json!({"service_key": f.key, "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
                           {"field": "distinct_users"}]}]}),
        |st, v| st == 200 && *v == want,
    )
    .await;
    // A key revoked by the CLI is refused by both at once.
    let made = new_key(&f.store, &f.team, "billing-read");
    let (key_id, key) = (
        made["key_id"].as_str().unwrap(),
        made["service_key"].as_str().unwrap(),
    );
    let read = json!({"service_key": key, "team_level": true});
    assert_eq!(
        a.post("GetUsageConfig", read.clone()).await,
        (200, json!({"addOnCreditCap": 777}))
    );
    ok(&f.store, &["key", "revoke", "--key-id", key_id]);
    for server in [&a, &b] {
        until(server, "GetUsageConfig", read.clone(), |st, v| {
            (st, v["code"].as_str()) == (401, Some("unauthenticated"))
        })
        .await;
    }
    a.kill9();
    b.kill9();
}

/// Contract section 11: rows corrupted by hand in the store never stop the server nor
/// touch another team. The server starts, logs each at ERROR with its team, answers
/// without them, counts them in `/healthz`; `check` lists them and exits 1.
async fn unreadable_rows_are_left_out_counted_and_listed(
    f: Fixture,
    corrupt: impl AsyncFnOnce(&str, &str),
) -> Vec<String> {
    let other = ok(&f.store, &["team", "create", "--name", "Other"])["team_id"]
        .as_str()
        .unwrap()
        .to_string();
    let other_key = new_key(&f.store, &other, "analytics-read,usage-write")["service_key"]
        .as_str()
        .unwrap()
        .to_string();
    let rec = |key: &str, n: i64| {
        json!({"api_key": key, "hour": "2025-05-01T10:00:00Z", "language": "GO", "ide": "vscode",
               "version": "1.0", "num_acceptances": n, "num_lines_accepted": n, "num_bytes_accepted": n})
    };
    let sum = |key: &str| {
        json!({"service_key": key, "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}]}]})
    };
    let s = Server::start(&f.store, &[], &f.log);
    // One write per record: the SQLite store keeps a write whole (one segment or log
    // entry), so each can be made unreadable on its own.
    for (key, record) in [
        (&f.key, rec("k1", 1)),
        (&f.key, rec("k2", 20)),
        (&f.key, rec("k3", 300)),
        (&other_key, rec("k1", 4000)),
    ] {
        let (st, _) = s
            .post(
                "Ingest",
                json!({"service_key": key, "kind": "autocomplete", "records": [record]}),
            )
            .await;
        assert_eq!(st, 200);
    }
    s.kill9();
    corrupt(&f.store, &f.team).await;

    let s = Server::start(&f.store, &[], &f.log);
    let health: Value = reqwest::get(format!("{}/healthz", s.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health, json!({"status": "ok", "unreadable_records": 2}));
    let (st, v) = s.post("Analytics", sum(&f.key)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"],
        "20"
    );
    let (st, v) = s.post("Analytics", sum(&other_key)).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"],
        "4000"
    );
    // The team still takes writes.
    let (st, _) = s
        .post(
            "Ingest",
            json!({"service_key": f.key, "kind": "autocomplete", "records": [rec("k4", 5000)]}),
        )
        .await;
    assert_eq!(st, 200);
    let (_, v) = s.post("Analytics", sum(&f.key)).await;
    assert_eq!(
        v["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"],
        "5020"
    );
    drop(s);
    let log = std::fs::read_to_string(&f.log).unwrap();
    let errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("ERROR") && l.contains("cannot be read"))
        .collect();
    assert_eq!(errors.len(), 2, "{log}");
    assert!(errors.iter().all(|l| l.contains(&f.team)), "{errors:?}");

    let (code, out, err) = admin(&f.store, &["check"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("2 stored rows cannot be read"), "{err}");
    let rows: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{out}");
    for r in &rows {
        assert_eq!(r["team"], f.team.as_str());
        assert_eq!(r["kind"], "autocomplete");
        assert!(!r["row"].as_str().unwrap().is_empty());
    }
    // The rows stay in place.
    let (code, _, _) = admin(&f.store, &["check"]);
    assert_eq!(code, 1);
    let mut reasons: Vec<String> = rows
        .iter()
        .map(|r| r["reason"].as_str().unwrap().to_string())
        .collect();
    reasons.sort();
    reasons
}

#[tokio::test]
async fn unreadable_sqlite_rows_are_left_out_counted_and_listed() {
    let f = fixture();
    let reasons = unreadable_rows_are_left_out_counted_and_listed(f, async |store: &str, team: &str| {
        use usage_core::load::{FieldValue, Record};
        use usage_core::schema::records::AUTOCOMPLETE;
        use usage_core::time::Timestamp;
        let path = store.strip_prefix("sqlite:").unwrap();
        let c = rusqlite::Connection::open(path).unwrap();
        // k1's write is the kind's segment: year 10000 in its hour column, under a checksum
        // that matches (a hand edit, or a bug of a writer).
        let text = |s: &str| FieldValue::Text(s.into());
        let year_10000 = Record::from_values(
            &AUTOCOMPLETE,
            vec![
                text("k1"),
                FieldValue::Time(Timestamp(Timestamp::MAX.0 + 1)),
                text("GO"),
                text("vscode"),
                text("1.0"),
                FieldValue::Count(1),
                FieldValue::Count(1),
                FieldValue::Count(1),
            ],
        );
        let body = usage_core::eval::segment::encode_batch(&usage_core::load::Batch {
            kind: &AUTOCOMPLETE,
            records: vec![year_10000],
        });
        let n = c
            .execute(
                "UPDATE segments SET body = ?2 WHERE team_id = ?1 AND kind = 'autocomplete'",
                rusqlite::params![team, body],
            )
            .unwrap();
        assert_eq!(n, 1);
        // k3's write is the last log entry: bytes that are no segment at all.
        let n = c
            .execute(
                "UPDATE log SET body = x'00' WHERE team_id = ?1 AND seq = (SELECT MAX(seq) FROM log WHERE team_id = ?1)",
                [team],
            )
            .unwrap();
        assert_eq!(n, 1);
    })
    .await;
    assert_eq!(
        reasons,
        [
            "the segment is malformed: autocomplete.hour row 0 holds a time out of range",
            "the segment's checksum does not match its bytes"
        ]
    );
    let (code, out, _) = admin(&fixture().store, &["check"]);
    assert_eq!((code, out.as_str()), (0, ""), "a sound store checks clean");
}

/// The two rows of issue 28 that made `serve` exit 1 for every team: a segment whose
/// `body` is stored as TEXT and a log entry whose `seq` is `'abc'` (wrong storage types,
/// not wrong bytes).
#[tokio::test]
async fn sqlite_rows_of_the_wrong_storage_type_are_left_out_counted_and_listed() {
    let f = fixture();
    let reasons = unreadable_rows_are_left_out_counted_and_listed(f, async |store: &str, team: &str| {
        let path = store.strip_prefix("sqlite:").unwrap();
        let c = rusqlite::Connection::open(path).unwrap();
        let n = c
            .execute(
                "UPDATE segments SET body = 'not a blob' WHERE team_id = ?1 AND kind = 'autocomplete'",
                [team],
            )
            .unwrap();
        assert_eq!(n, 1);
        let n = c
            .execute(
                "UPDATE log SET seq = 'abc' WHERE team_id = ?1 AND seq = (SELECT MAX(seq) FROM log WHERE team_id = ?1)",
                [team],
            )
            .unwrap();
        assert_eq!(n, 1);
    })
    .await;
    // The segment's reason names its part's row (the body is read apart); the log row's
    // names the column.
    assert_eq!(
        reasons,
        [
            "`seq` is stored as Text",
            "segments rowid 1: `body` is stored as Text"
        ]
    );
}

#[tokio::test]
async fn unreadable_postgres_rows_are_left_out_counted_and_listed() {
    unreadable_postgres_rows(usage_server::testing::fresh_postgres()).await;
}

/// The same on the Citus cluster: the rows are edited on the team's worker through the
/// coordinator.
#[tokio::test]
async fn unreadable_citus_rows_are_left_out_counted_and_listed() {
    unreadable_postgres_rows(usage_server::testing::fresh_citus()).await;
}

async fn unreadable_postgres_rows(store: String) {
    let f = fixture_on(tempfile::tempdir().unwrap(), store);
    let reasons = unreadable_rows_are_left_out_counted_and_listed(f, async |store: &str, team: &str| {
        let (c, conn) = tokio_postgres::connect(store, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        // Year 10000 in UTC, and a language of 1,025 bytes.
        let n = c
            .execute(
                "UPDATE rec_autocomplete SET hour = 253402300800000000 WHERE team_id = $1 AND api_key = 'k1'",
                &[&team],
            )
            .await
            .unwrap();
        assert_eq!(n, 1);
        let n = c
            .execute(
                "UPDATE rec_autocomplete SET language = repeat('x', 1025) WHERE team_id = $1 AND api_key = 'k3'",
                &[&team],
            )
            .await
            .unwrap();
        assert_eq!(n, 1);
    })
    .await;
    assert_eq!(
        reasons,
        [
            "outside what the validator accepts: hour",
            "outside what the validator accepts: language"
        ]
    );
}

/// Two servers on one PostgreSQL database give a key its rate limit once (section 9):
/// a burst of 3 is 3 answers across both, then 429 with `Retry-After` from either.
#[tokio::test]
async fn two_postgres_servers_share_one_rate_limit() {
    two_servers_share_one_rate_limit(usage_server::testing::fresh_postgres()).await;
}

/// The same on the Citus cluster: the bucket is a row of a distributed table.
#[tokio::test]
async fn two_citus_servers_share_one_rate_limit() {
    two_servers_share_one_rate_limit(usage_server::testing::fresh_citus()).await;
}

async fn two_servers_share_one_rate_limit(store: String) {
    let f = fixture_on(tempfile::tempdir().unwrap(), store);
    let limits = ["--rate-burst", "3", "--rate-per-minute", "1"];
    let a = Server::start(&f.store, &limits, &f.log);
    let b = Server::start(&f.store, &limits, &f.log);
    let read = json!({"service_key": f.key, "team_level": true});
    let mut statuses = Vec::new();
    for s in [&a, &b, &a, &b, &a, &b] {
        statuses.push(s.post("GetUsageConfig", read.clone()).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429]);
    let r = reqwest::Client::new()
        .post(format!("{}/api/v1/GetUsageConfig", b.base))
        .json(&read)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
}
