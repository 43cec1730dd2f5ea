//! Webhooks (contract section 12): registration and its rules, the events writes make on
//! every store, where the server may send, and (on the real binary, with a receiver that
//! verifies each delivery with the `standardwebhooks` package of PyPI) retries, SIGKILL in
//! the middle of a delivery and the separation of teams.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use usage_server::http::Config;
use usage_server::testing::TestStore;
use usage_server::webhooks::Settings;

use crate::common::{Env, Reply, fast_config};
use crate::process::{Server, fixture, new_key, ok};

/// What the in-process receiver got: (path, webhook-id, body).
type Got = Arc<Mutex<Vec<(String, String, Value)>>>;

/// A receiver on loopback (warp): records every POST and answers 500 to the first
/// `fail` of them, 200 after.
async fn receiver(fail: usize) -> (String, Got) {
    use warp::Filter;
    let got: Got = Arc::default();
    let left = Arc::new(AtomicUsize::new(fail));
    let (g, l) = (got.clone(), left.clone());
    let route = warp::post()
        .and(warp::path::full())
        .and(warp::header::<String>("webhook-id"))
        .and(warp::body::json())
        .map(move |p: warp::path::FullPath, id: String, body: Value| {
            g.lock().unwrap().push((p.as_str().to_string(), id, body));
            let failing = l
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            let status = if failing {
                warp::http::StatusCode::INTERNAL_SERVER_ERROR
            } else {
                warp::http::StatusCode::OK
            };
            warp::reply::with_status("", status)
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(warp::serve(route).incoming(listener).run());
    (format!("http://{addr}"), got)
}

/// Deliveries go out at once, retries 100 ms apart.
fn quick(allow_private: bool) -> Config {
    Config {
        webhooks: Settings {
            allow_private,
            first_retry: Duration::from_millis(100),
            poll: Duration::from_millis(50),
        },
        ..fast_config()
    }
}

async fn call(
    env: &Env,
    method: reqwest::Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> Reply {
    let mut req = env
        .client
        .request(method, env.url(path))
        .header("authorization", format!("Bearer {key}"));
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    env.send(req).await
}

async fn register(env: &Env, key: &str, body: Value) -> Reply {
    call(
        env,
        reqwest::Method::POST,
        "/api/v2/webhooks",
        key,
        Some(body),
    )
    .await
}

/// Waits (at most 20 s) until `done` holds of what was received.
async fn wait_for(got: &Got, done: impl Fn(&[(String, String, Value)]) -> bool) {
    let from = Instant::now();
    loop {
        if done(&got.lock().unwrap()) {
            return;
        }
        assert!(
            from.elapsed() < Duration::from_secs(20),
            "still waiting; received: {:#?}",
            got.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The distinct events received, in order of first arrival: (type, email, threshold or
/// access).
fn events(got: &[(String, String, Value)]) -> Vec<(String, String, Value)> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for (_, id, b) in got {
        if seen.insert(id.clone(), ()).is_some() {
            continue;
        }
        let t = b["type"].as_str().unwrap().to_string();
        let (who, what) = match t.as_str() {
            "credits.threshold" => (b["data"]["email"].clone(), b["data"]["threshold"].clone()),
            "credits.access_changed" => {
                (b["data"]["email"].clone(), b["data"]["has_access"].clone())
            }
            _ => (b["data"]["scope"].clone(), b["data"]["new"].clone()),
        };
        out.push((t, who.as_str().unwrap_or_default().to_string(), what));
    }
    out
}

/// Each write makes the events section 12 names, once, on every store: a cap change
/// (`caps.changed`), runs reaching a threshold, runs taking a user over the cap (a
/// threshold and a loss of access), a cap raised (access back), a repeat write (nothing),
/// and a delivery answered 500 is retried with the same `webhook-id`.
async fn writes_make_their_events(kind: TestStore) {
    let env = Env::with_config(kind, quick(true)).await;
    let (base, got) = receiver(1).await;
    let r = register(
        &env,
        &env.key,
        json!({"url": format!("{base}/a"), "thresholds": [50, 100]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let hook = r.body["id"].as_str().unwrap().to_string();
    let user = json!({"email": "hooked@x.example", "name": "H", "api_key": "k-hooked"});
    env.post("Ingest", json!({"kind": "users", "records": [user]}))
        .await
        .ok();
    let cap = |n: i64| json!({"user_email": "hooked@x.example", "set_add_on_credit_cap": n});
    env.post("UsageConfig", cap(100)).await.ok();
    let run = |id: &str, flex: i64| {
        json!({"kind": "agent_runs", "records": [{"id": id, "api_key": "k-hooked",
            "timestamp": usage_core::time::Timestamp::now().to_rfc3339(), "ide_type": "editor",
            "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 1,
            "agent_id": "a", "prompts_used": 1, "flex_credits_used": flex}]})
    };
    env.post("Ingest", run("r1", 6_000)).await.ok();
    env.post("Ingest", run("r2", 5_000)).await.ok();
    env.post("Ingest", run("r2", 5_000)).await.ok();
    env.post("UsageConfig", cap(200)).await.ok();
    let expected = vec![
        (
            "caps.changed".into(),
            "user:hooked@x.example".into(),
            json!(100),
        ),
        (
            "credits.threshold".into(),
            "hooked@x.example".into(),
            json!(50),
        ),
        (
            "credits.threshold".into(),
            "hooked@x.example".into(),
            json!(100),
        ),
        (
            "credits.access_changed".into(),
            "hooked@x.example".into(),
            json!(false),
        ),
        (
            "caps.changed".into(),
            "user:hooked@x.example".into(),
            json!(200),
        ),
        (
            "credits.access_changed".into(),
            "hooked@x.example".into(),
            json!(true),
        ),
    ];
    wait_for(&got, |g| events(g).len() >= expected.len()).await;
    // A moment for a wrong extra event to arrive.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let g = got.lock().unwrap().clone();
    // One webhook's events are sent one after another, in the order made; the first,
    // answered 500, was sent again (same id, same body) after the others had gone.
    let mut told = events(&g);
    let retried = told.remove(0);
    told.push(retried);
    let mut in_order = expected.clone();
    in_order.rotate_left(1);
    assert!(told == expected || told == in_order, "{told:#?}");
    let again: Vec<_> = g.iter().filter(|(_, id, _)| *id == g[0].1).collect();
    assert_eq!(again.len(), 2);
    assert_eq!(again[0].2, again[1].2);
    assert_eq!(g.len(), expected.len() + 1);
    // The credits in an event are the user's after the write.
    let over = g
        .iter()
        .find(|(_, _, b)| b["data"]["threshold"] == 100)
        .unwrap();
    assert_eq!(over.2["data"]["add_on_credits_used"], "110.00");
    assert_eq!(over.2["data"]["percent_of_cap"], "110.0");
    assert_eq!(over.2["data"]["has_access"], false);
    let log = call(
        &env,
        reqwest::Method::GET,
        &format!("/api/v2/webhooks/{hook}/deliveries"),
        &env.key,
        None,
    )
    .await;
    let log = log.ok()["data"].as_array().unwrap().clone();
    assert_eq!(log.len(), expected.len());
    let first = log.last().unwrap();
    assert_eq!(first["type"], "caps.changed");
    assert_eq!(first["attempts"], 2);
    assert_eq!(first["last_status"], 200);
    assert_eq!(first["last_error"], Value::Null);
    assert_eq!(first["next_attempt"], Value::Null);
    assert!(log.iter().all(|d| d["delivered"].is_string()), "{log:?}");
}
on_every_store!(writes_make_their_events);

/// Registration: the fields and rules, the secret shown once, ten a team, listing,
/// deletion, the permissions of each endpoint.
#[tokio::test]
async fn registration_follows_its_rules() {
    let env = Env::with_config(TestStore::Memory, quick(false)).await;
    let url = "https://hooks.example.com/in";
    for (body, path, rule) in [
        (json!({}), "url", "missing_field"),
        (json!({"url": 5}), "url", "invalid_value"),
        (
            json!({"url": url, "events": ["credits.threshold", "nope"]}),
            "events[1]",
            "invalid_value",
        ),
        (json!({"url": url, "events": []}), "events", "invalid_value"),
        (
            json!({"url": url, "thresholds": [0]}),
            "thresholds[0]",
            "invalid_value",
        ),
        (
            json!({"url": url, "thresholds": [1001]}),
            "thresholds[0]",
            "invalid_value",
        ),
        (
            json!({"url": url, "thresholds": [1.5]}),
            "thresholds",
            "invalid_value",
        ),
        (
            json!({"url": url, "secret": "mine"}),
            "secret",
            "unknown_field",
        ),
        (json!([]), "(body)", "malformed_json"),
    ] {
        let r = register(&env, &env.key, body.clone()).await;
        assert_eq!(
            r.details(),
            vec![(path.to_string(), rule.to_string())],
            "{body}"
        );
    }
    let r = register(&env, &env.key, json!({"url": url})).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let secret = r.body["secret"].as_str().unwrap();
    assert!(
        secret.starts_with("whsec_") && secret.len() == 6 + 44,
        "{secret}"
    );
    assert_eq!(
        r.body["events"],
        json!([
            "credits.threshold",
            "credits.access_changed",
            "caps.changed"
        ])
    );
    assert_eq!(r.body["thresholds"], json!([80, 100]));
    let first = r.body["id"].as_str().unwrap().to_string();
    for i in 1..10 {
        let r = register(
            &env,
            &env.key,
            json!({"url": format!("{url}/{i}"), "thresholds": [90, 10, 90]}),
        )
        .await;
        assert_eq!(r.status, 201);
        assert_eq!(r.body["thresholds"], json!([10, 90]));
    }
    let r = register(&env, &env.key, json!({"url": url})).await;
    assert_eq!(
        r.details(),
        vec![("url".to_string(), "too_many".to_string())]
    );
    let list = call(
        &env,
        reqwest::Method::GET,
        "/api/v2/webhooks",
        &env.key,
        None,
    )
    .await;
    let list = list.ok()["data"].as_array().unwrap().clone();
    assert_eq!(list.len(), 10);
    assert_eq!(list[0]["id"], first.as_str());
    assert!(list.iter().all(|h| h.get("secret").is_none()), "{list:?}");
    let del = call(
        &env,
        reqwest::Method::DELETE,
        &format!("/api/v2/webhooks/{first}"),
        &env.key,
        None,
    )
    .await;
    assert_eq!((del.status, del.text.as_str()), (204, ""));
    let again = call(
        &env,
        reqwest::Method::DELETE,
        &format!("/api/v2/webhooks/{first}"),
        &env.key,
        None,
    )
    .await;
    again.error(404, "not_found");
    call(
        &env,
        reqwest::Method::GET,
        &format!("/api/v2/webhooks/{first}/deliveries"),
        &env.key,
        None,
    )
    .await
    .error(404, "not_found");
    call(
        &env,
        reqwest::Method::GET,
        "/api/v2/webhooks/x/y/z",
        &env.key,
        None,
    )
    .await
    .error(404, "not_found");
    call(
        &env,
        reqwest::Method::PUT,
        "/api/v2/webhooks",
        &env.key,
        None,
    )
    .await
    .error(405, "method_not_allowed");
    // A read key lists, and may not register, delete or test.
    let reader = env
        .key_with(&[usage_core::schema::Permission::BillingRead])
        .await;
    call(
        &env,
        reqwest::Method::GET,
        "/api/v2/webhooks",
        &reader,
        None,
    )
    .await
    .ok();
    register(&env, &reader, json!({"url": url}))
        .await
        .error(403, "permission_denied");
    let id = list[1]["id"].as_str().unwrap();
    call(
        &env,
        reqwest::Method::DELETE,
        &format!("/api/v2/webhooks/{id}"),
        &reader,
        None,
    )
    .await
    .error(403, "permission_denied");
    call(
        &env,
        reqwest::Method::POST,
        &format!("/api/v2/webhooks/{id}/test"),
        &reader,
        None,
    )
    .await
    .error(403, "permission_denied");
    call(
        &env,
        reqwest::Method::GET,
        "/api/v2/webhooks",
        "usk_nope",
        None,
    )
    .await
    .error(401, "unauthenticated");
}

/// Without `--webhook-allow-private`, the server never sends to loopback, private or
/// link-local addresses: literals are refused at registration (400 at `url`, naming the
/// rule), and a name that resolves to loopback fails each attempt, never requested.
#[tokio::test]
async fn private_addresses_are_never_requested() {
    let env = Env::with_config(TestStore::Memory, quick(false)).await;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    for (url, rule) in [
        (
            format!("http://127.0.0.1:{port}/"),
            "must be an `https` URL",
        ),
        (format!("https://127.0.0.1:{port}/"), "a loopback address"),
        (
            "https://169.254.169.254/latest/meta-data".into(),
            "a link-local address",
        ),
        ("https://10.0.0.1/".into(), "a private address"),
        (format!("https://[::1]:{port}/"), "a loopback address"),
    ] {
        let r = register(&env, &env.key, json!({"url": url})).await;
        assert_eq!(
            r.details(),
            vec![("url".to_string(), "invalid_value".to_string())],
            "{url}"
        );
        assert!(
            r.body["message"].as_str().unwrap().contains(rule),
            "{url}: {}",
            r.text
        );
    }
    // A name that resolves to loopback is taken, then refused at every attempt.
    let r = register(
        &env,
        &env.key,
        json!({"url": format!("https://localhost:{port}/hook")}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let id = r.body["id"].as_str().unwrap().to_string();
    let t = call(
        &env,
        reqwest::Method::POST,
        &format!("/api/v2/webhooks/{id}/test"),
        &env.key,
        None,
    )
    .await;
    let t = t.ok();
    assert_eq!(t["delivered"], false);
    assert_eq!(t["status"], Value::Null);
    let error = t["error"].as_str().unwrap();
    assert!(
        error.contains("refused: `localhost` resolves to") && error.contains("loopback"),
        "{error}"
    );
    // An event of a write fails its attempts the same way.
    env.post(
        "UsageConfig",
        json!({"team_level": true, "set_add_on_credit_cap": 7}),
    )
    .await
    .ok();
    let from = Instant::now();
    let entry = loop {
        let log = call(
            &env,
            reqwest::Method::GET,
            &format!("/api/v2/webhooks/{id}/deliveries"),
            &env.key,
            None,
        )
        .await;
        let log = log.ok()["data"].as_array().unwrap().clone();
        if let Some(e) = log.first().filter(|e| e["attempts"].as_i64() >= Some(2)) {
            break e.clone();
        }
        assert!(from.elapsed() < Duration::from_secs(20), "{log:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(entry["type"], "caps.changed");
    assert_eq!(entry["delivered"], Value::Null);
    assert!(
        entry["last_error"].as_str().unwrap().contains("loopback"),
        "{entry}"
    );
    assert!(entry["next_attempt"].is_string());
    assert!(
        listener.accept().is_err(),
        "the server connected to a loopback listener"
    );
}

/// The receiver of tests/webhooks/receiver.py.
struct Receiver {
    child: Child,
    base: String,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    fn start() -> Receiver {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/webhooks/receiver.py");
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut port = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut port)
            .unwrap();
        assert!(
            port.trim().parse::<u16>().is_ok(),
            "the receiver did not start (is the `standardwebhooks` package installed? \
             pip install standardwebhooks): {port:?}"
        );
        Receiver {
            child,
            base: format!("http://127.0.0.1:{}", port.trim()),
        }
    }

    async fn control(&self, path: &str, body: Value) {
        let r = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 204);
    }

    async fn log(&self) -> Vec<Value> {
        reqwest::get(format!("{}/_log", self.base))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Waits (at most 60 s) until `done` holds of the log.
    async fn until(&self, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let from = Instant::now();
        loop {
            let log = self.log().await;
            if done(&log) {
                return log;
            }
            assert!(
                from.elapsed() < Duration::from_secs(60),
                "{what}: not after 60 s; log: {log:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn bearer(
    s: &Server,
    method: reqwest::Method,
    path: &str,
    key: &str,
    body: Value,
) -> (u16, Value) {
    let r = reqwest::Client::new()
        .request(method, format!("{}{path}", s.base))
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let st = r.status().as_u16();
    (st, r.json().await.unwrap_or(Value::Null))
}

fn run(id: &str, key: &str, flex: i64) -> Value {
    json!({"id": id, "api_key": key, "timestamp": usage_core::time::Timestamp::now().to_rfc3339(),
        "ide_type": "editor", "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT",
        "messages_sent": 1, "agent_id": "a", "prompts_used": 1, "flex_credits_used": flex})
}

/// The distinct events of one path of the log, by `webhook-id`: (type, email, threshold).
fn distinct(log: &[Value], path: &str) -> Vec<(String, Value, Value)> {
    let mut seen = std::collections::BTreeSet::new();
    log.iter()
        .filter(|e| e["path"] == path && e["answered"] == 200)
        .filter(|e| seen.insert(e["id"].as_str().unwrap().to_string()))
        .map(|e| {
            let b = &e["body"];
            (
                b["type"].as_str().unwrap().to_string(),
                b["data"]["email"].clone(),
                b["data"]["threshold"].clone(),
            )
        })
        .collect()
}

/// The real binary on SQLite, two teams, a receiver that verifies every delivery with
/// `standardwebhooks`: a delivery answered 500 is retried; the server is SIGKILLed while
/// a delivery is held open, and after a restart every event is delivered, deduplicated
/// by `webhook-id` to exactly one per crossing; no team receives another's events.
#[tokio::test(flavor = "multi_thread")]
async fn deliveries_are_verified_retried_and_survive_sigkill() {
    let f = fixture();
    let team_b = ok(&f.store, &["team", "create", "--name", "B"])["team_id"]
        .as_str()
        .unwrap()
        .to_string();
    let key_b = new_key(&f.store, &team_b, "billing-read,billing-write,usage-write")["service_key"]
        .as_str()
        .unwrap()
        .to_string();
    let rx = Receiver::start();
    let flags = ["--webhook-allow-private"];
    let s = Server::start(&f.store, &flags, &f.log);
    let post = reqwest::Method::POST;
    let (st, a) = bearer(
        &s,
        post.clone(),
        "/api/v2/webhooks",
        &f.key,
        json!({"url": format!("{}/a", rx.base), "thresholds": [50, 100]}),
    )
    .await;
    assert_eq!(st, 201, "{a}");
    let (st, b) = bearer(
        &s,
        post.clone(),
        "/api/v2/webhooks",
        &key_b,
        json!({"url": format!("{}/b", rx.base), "thresholds": [50, 100]}),
    )
    .await;
    assert_eq!(st, 201, "{b}");
    rx.control("/_secrets", json!({"/a": a["secret"], "/b": b["secret"]}))
        .await;
    // A signed test delivery, verified by the receiver.
    let (st, t) = bearer(
        &s,
        post.clone(),
        &format!("/api/v2/webhooks/{}/test", a["id"].as_str().unwrap()),
        &f.key,
        json!({}),
    )
    .await;
    assert_eq!(
        (st, &t["delivered"], &t["status"]),
        (200, &json!(true), &json!(200)),
        "{t}"
    );
    rx.control("/_fail", json!({"n": 1})).await;
    for (key, email, api_key, cap) in [
        (&f.key, "ann@a.example", "k-ann", 100),
        (&key_b, "bob@b.example", "k-bob", 10),
    ] {
        let (st, v) = s
            .post(
                "Ingest",
                json!({"service_key": key, "kind": "users",
            "records": [{"email": email, "name": "N", "api_key": api_key}]}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        let (st, v) = s
            .post(
                "UsageConfig",
                json!({"service_key": key, "team_level": true, "set_add_on_credit_cap": cap}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
        let (st, v) = s
            .post(
                "Ingest",
                json!({"service_key": key, "kind": "agent_runs",
            "records": [run("r1", api_key, 6_000)]}),
            )
            .await;
        assert_eq!(st, 200, "{v}");
    }
    // Team A: caps.changed and the 50 % threshold; the first delivery was answered 500
    // and retried.
    rx.until("team A's first events", |log| {
        distinct(log, "/a").len() >= 3
    })
    .await;
    // Hold the next delivery open, and kill the server in the middle of it.
    rx.control("/_hold", json!({"n": 1, "seconds": 30})).await;
    let (st, v) = s
        .post(
            "Ingest",
            json!({"service_key": f.key, "kind": "agent_runs",
        "records": [run("r2", "k-ann", 5_000)]}),
        )
        .await;
    assert_eq!(st, 200, "{v}");
    rx.until("a held delivery", |log| {
        log.iter().any(|e| e["held"] == true)
    })
    .await;
    s.kill9();
    let s = Server::start(&f.store, &flags, &f.log);
    let held = rx
        .log()
        .await
        .into_iter()
        .find(|e| e["held"] == true)
        .unwrap();
    rx.until("the held event again after the restart", |log| {
        log.iter()
            .filter(|e| e["id"] == held["id"] && e["answered"] == 200)
            .count()
            >= 2
    })
    .await;
    let log = rx
        .until("every event of both teams", |log| {
            distinct(log, "/a").len() >= 5 && distinct(log, "/b").len() >= 4
        })
        .await;
    assert!(log.iter().all(|e| e["verified"] == true), "{log:#?}");
    assert!(
        log.iter().any(|e| e["answered"] == 500),
        "no 500 answered: {log:#?}"
    );
    let a_events = distinct(&log, "/a");
    let mut a_sorted = a_events.clone();
    a_sorted.sort_by_key(|e| format!("{e:?}"));
    let ann = json!("ann@a.example");
    let mut want = vec![
        ("caps.changed".to_string(), Value::Null, Value::Null),
        (
            "credits.access_changed".to_string(),
            ann.clone(),
            Value::Null,
        ),
        ("credits.threshold".to_string(), ann.clone(), json!(100)),
        ("credits.threshold".to_string(), ann.clone(), json!(50)),
        ("webhook.test".to_string(), Value::Null, Value::Null),
    ];
    want.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(a_sorted, want, "{log:#?}");
    // Team B's events went to B alone (A's secret would not verify them), and name B's users.
    let b_events = distinct(&log, "/b");
    assert_eq!(b_events.len(), 4, "{b_events:?}");
    assert!(
        b_events
            .iter()
            .all(|(_, e, _)| e.is_null() || *e == json!("bob@b.example"))
    );
    // The delivery log of A's webhook: every event delivered, the held one twice at least.
    let (st, d) = bearer(
        &s,
        reqwest::Method::GET,
        &format!("/api/v2/webhooks/{}/deliveries", a["id"].as_str().unwrap()),
        &f.key,
        json!({}),
    )
    .await;
    assert_eq!(st, 200);
    let d = d["data"].as_array().unwrap().clone();
    assert_eq!(d.len(), 4, "{d:?}");
    let from = Instant::now();
    loop {
        let (_, d) = bearer(
            &s,
            reqwest::Method::GET,
            &format!("/api/v2/webhooks/{}/deliveries", a["id"].as_str().unwrap()),
            &f.key,
            json!({}),
        )
        .await;
        let d = d["data"].as_array().unwrap().clone();
        if d.iter().all(|e| e["delivered"].is_string()) {
            break;
        }
        assert!(from.elapsed() < Duration::from_secs(30), "{d:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    s.kill9();
}

/// A claim holds a webhook's k-th event for k leases, and an attempt is recorded only
/// under the claim that made it: a process whose lease ran out (its events claimed again
/// elsewhere) changes nothing, on every store.
async fn a_stale_claim_records_nothing(kind: TestStore) {
    use usage_core::plan::{CapAction, CapScope};
    use usage_core::time::Timestamp;
    use usage_server::store::webhooks::Attempt;
    // The server's own delivery task never comes round during the test.
    let config = Config {
        webhooks: Settings {
            poll: Duration::from_secs(3600),
            ..Settings::default()
        },
        ..fast_config()
    };
    let env = Env::with_config(kind, config).await;
    let (store, team) = (env.store.as_ref(), env.team.as_str());
    let now = Timestamp::now();
    let hook = usage_server::webhooks::register(
        "https://hooks.example.com/in",
        Some(&["caps.changed".to_string()]),
        None,
        false,
        now,
    )
    .unwrap();
    assert!(
        store
            .add_webhook(team, hook.clone(), "-", now)
            .await
            .unwrap()
    );
    for cap in [5, 6] {
        store
            .change_cap(team, &CapScope::Team, CapAction::Set(cap), "t", now)
            .await
            .unwrap();
    }
    let sec = 1_000_000;
    let first = store
        .claim(team, now, Timestamp(now.0 + 15 * sec), 16)
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|o| o.lease).collect::<Vec<_>>(),
        vec![Timestamp(now.0 + 15 * sec), Timestamp(now.0 + 30 * sec)]
    );
    assert!(
        store
            .claim(team, now, Timestamp(now.0 + 15 * sec), 16)
            .await
            .unwrap()
            .is_empty()
    );
    // The first lease ran out: another process claims the first event again.
    let later = Timestamp(now.0 + 16 * sec);
    let second = store
        .claim(team, later, Timestamp(later.0 + 15 * sec), 16)
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].event_id, first[0].event_id);
    let delivered = |claimed| Attempt {
        claimed,
        status: Some(200),
        error: None,
        next: None,
    };
    store
        .attempted(
            team,
            &hook.id,
            &first[0].event_id,
            &delivered(first[0].lease),
            later,
        )
        .await
        .unwrap();
    let log = store.deliveries(team, &hook.id).await.unwrap();
    let entry = log
        .iter()
        .find(|d| d.event_id == first[0].event_id)
        .unwrap();
    assert_eq!((entry.attempts, entry.delivered), (0, None));
    store
        .attempted(
            team,
            &hook.id,
            &second[0].event_id,
            &delivered(second[0].lease),
            later,
        )
        .await
        .unwrap();
    let log = store.deliveries(team, &hook.id).await.unwrap();
    let entry = log
        .iter()
        .find(|d| d.event_id == first[0].event_id)
        .unwrap();
    assert_eq!(
        (entry.attempts, entry.delivered, entry.next_attempt),
        (1, Some(later), None)
    );
    // Registration and removal are in the team's audit log, with who made them.
    assert!(
        store
            .remove_webhook(team, &hook.id, "t2", later)
            .await
            .unwrap()
    );
    assert!(
        !store
            .remove_webhook(team, &hook.id, "t2", later)
            .await
            .unwrap()
    );
    let audit: Vec<(String, String, Value, Value)> = store
        .audit(team)
        .await
        .unwrap()
        .iter()
        .map(|e| e.to_json(None))
        .filter(|v| v["action"].as_str().unwrap().starts_with("webhook."))
        .map(|v| {
            (
                v["action"].as_str().unwrap().to_string(),
                v["key_id"].as_str().unwrap().to_string(),
                v["old"]["url"].clone(),
                v["new"]["url"].clone(),
            )
        })
        .collect();
    let url = json!("https://hooks.example.com/in");
    assert_eq!(
        audit,
        vec![
            ("webhook.add".into(), "-".into(), Value::Null, url.clone()),
            ("webhook.remove".into(), "t2".into(), url, Value::Null),
        ]
    );
}
on_every_store!(a_stale_claim_records_nothing);
