//! Cost bounds and fairness (contract section 11, v5): the reproductions of issue 28's
//! findings, each over HTTP. What the HTTP layer does alike for every store (validation
//! before the store, the connection's timeouts) runs on the memory store; what a store
//! answers runs on every store.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use usage_core::schema::records;
use usage_server::http::{Config, Timeouts};

use crate::common::{Env, TestStore, fast_config, load};

/// An error answer's body stays small whatever the input (a few kilobytes).
const SMALL: usize = 8 << 10;

fn auto(key: &str, hour: i64, n: i64) -> Value {
    json!({"api_key": key, "language": "GO", "ide": "vscode", "version": "1",
           "num_acceptances": n, "num_lines_accepted": 0, "num_bytes_accepted": 0,
           "hour": usage_core::time::Timestamp(1_735_689_600_000_000 + hour * 3_600_000_000).to_rfc3339()})
}

/// A megabyte-long unknown name (a zone of a local date, a field, a filter name, an
/// Ingest record key, a request key) is refused with a small answer that echoes it cut
/// and suggests nothing: its cost does not grow with its length (a 1 MB zone name took
/// 20 s and answered 3 MB).
#[tokio::test]
async fn a_long_unknown_name_gets_a_small_answer_without_a_suggestion() {
    let env = Env::new(TestStore::Memory).await;
    let huge = "a".repeat(1_000_000);
    let q = |o: Value| json!({"query_requests": [o]});
    let ac = "QUERY_DATA_SOURCE_USER_DATA";
    let cases = [
        (
            "Analytics",
            q(json!({"data_source": ac, "selections": [{"field": format!("date {huge}")}]})),
        ),
        (
            "Analytics",
            q(
                json!({"data_source": ac, "selections": [{"field": "language"}],
            "filters": [{"name": format!("date {huge}"), "filter": "QUERY_FILTER_EQUAL", "value": "2025-01-01"}]}),
            ),
        ),
        (
            "Analytics",
            q(json!({"data_source": ac,
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
            "aggregations": [{"field": format!("date {huge}"), "name": "d"}]})),
        ),
        (
            "Analytics",
            q(json!({"data_source": ac, "selections": [{"field": huge}]})),
        ),
        (
            "Analytics",
            json!({"query_requests": [{"data_source": ac, "selections": [{"field": "language"}]}], huge.clone(): 1}),
        ),
        (
            "Ingest",
            json!({"kind": "groups", "records": [{"group_id": "g", "group_name": "n", huge.clone(): 1}]}),
        ),
    ];
    for (op, body) in cases {
        let r = env.post(op, body).await;
        let details = r.details();
        assert_eq!(
            details.len(),
            1,
            "{op}: {}",
            &r.text[..r.text.len().min(500)]
        );
        assert!(r.text.len() < SMALL, "{op}: {} bytes", r.text.len());
        assert!(r.text.contains('…'), "{op}: {}", r.text);
        assert!(!r.text.contains("did you mean"), "{op}: {}", r.text);
    }
    // The same mistake in a short name still gets its suggestion.
    let r = env
        .post(
            "Analytics",
            q(json!({"data_source": ac, "selections": [{"field": "date Europe/Pariss"}]})),
        )
        .await;
    assert!(
        r.text.contains("did you mean `date Europe/Paris`?"),
        "{}",
        r.text
    );
}

/// Values echoed before the key check are cut too: a 300 KB `Content-Type` (415), a long
/// path (404), an unrouted method on a long target (405).
#[tokio::test]
async fn echoes_before_the_key_are_cut() {
    let env = Env::new(TestStore::Memory).await;
    let long = "x".repeat(300_000);
    let r = env
        .raw("Analytics", Some(&format!("text/{long}")), "{}")
        .await;
    r.error(415, "unsupported_media_type");
    assert!(r.text.len() < SMALL, "{} bytes", r.text.len());
    assert!(r.text.contains('…'));
    let path = format!("/api/v1/{}", "y".repeat(30_000));
    let r = env.send(env.client.post(env.url(&path))).await;
    r.error(404, "not_found");
    assert!(r.text.len() < SMALL, "{} bytes", r.text.len());
    let mut s = tokio::net::TcpStream::connect(env.server.addr)
        .await
        .unwrap();
    let raw = format!(
        "FROB /{} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "z".repeat(30_000)
    );
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 405"), "{}", &text[..200]);
    assert!(out.len() < SMALL, "{} bytes", out.len());
}

on_every_store!(the_item_bound_is_of_the_whole_request);
/// `--max-result-items` bounds the items of a whole request, its queries together: the
/// query that passes it is named (twenty 100k-row queries held 2.6 GB).
async fn the_item_bound_is_of_the_whole_request(kind: TestStore) {
    let mut config = fast_config();
    config.limits.result_items = 50;
    let env = Env::with_config(kind, config).await;
    let rows: Vec<Value> = (0..30).map(|h| auto("k-bound", h, h)).collect();
    load(
        env.store.as_ref(),
        &env.team,
        &records::AUTOCOMPLETE,
        Value::Array(rows),
    )
    .await;
    let filter = json!([{"name": "api_key", "filter": "QUERY_FILTER_EQUAL", "value": "k-bound"}]);
    let raw = json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA",
                     "selections": [{"field": "num_acceptances"}], "filters": filter});
    let by_hour = json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA",
                         "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
                         "aggregations": [{"field": "hour", "name": "h"}], "filters": filter});
    let ok = env
        .post("Analytics", json!({"query_requests": [raw]}))
        .await;
    assert_eq!(
        ok.ok()["queryResults"][0]["responseItems"]
            .as_array()
            .unwrap()
            .len(),
        30
    );
    for (queries, at) in [
        (json!([raw, raw]), "query_requests[1]"),
        (json!([by_hour, raw]), "query_requests[1]"),
        (json!([raw, by_hour]), "query_requests[1]"),
        (json!([raw, raw, raw]), "query_requests[1]"),
    ] {
        let r = env
            .post("Analytics", json!({"query_requests": queries}))
            .await;
        assert_eq!(
            r.details(),
            [crate::common::d(at, "too_many")],
            "{}",
            r.text
        );
        assert!(r.text.contains("more than 50 items"), "{}", r.text);
    }
}

/// Reads a chunked HTTP answer from `s` at about `rate` bytes a second (a tenth of it
/// every 100 ms); its head and body.
async fn read_slowly(s: &mut tokio::net::TcpStream, rate: usize) -> (String, Vec<u8>) {
    let step = Duration::from_millis(100);
    let quota = rate / 10;
    let mut raw = Vec::new();
    let mut buf = vec![0u8; quota];
    'reading: loop {
        let mut got = 0;
        while got < quota {
            let n = tokio::time::timeout(Duration::from_secs(120), s.read(&mut buf[..quota - got]))
                .await
                .expect("the server goes on sending")
                .unwrap();
            if n == 0 {
                break 'reading;
            }
            raw.extend_from_slice(&buf[..n]);
            got += n;
            if raw.ends_with(b"\r\n0\r\n\r\n") {
                break 'reading;
            }
        }
        tokio::time::sleep(step).await;
    }
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    // The chunked body, decoded; a body cut short leaves its last chunk incomplete.
    let mut body = Vec::new();
    let mut rest = &raw[split + 4..];
    loop {
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            panic!("the body was cut short after {} bytes", body.len());
        };
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap(), 16).unwrap();
        rest = &rest[eol + 2..];
        if size == 0 {
            break;
        }
        assert!(
            rest.len() >= size + 2,
            "the body was cut short after {} bytes",
            body.len() + rest.len()
        );
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
    (head, body)
}

/// Sends an export of the slow reader's rows selecting `fields` on a connection with a
/// small receive buffer (so the server waits on the reader), reads it at `rate` bytes a
/// second; its CSV lines.
async fn slow_export(env: &Env, fields: &[&str], rate: usize) -> Vec<String> {
    let selections: Vec<Value> = fields.iter().map(|f| json!({"field": f})).collect();
    let body = json!({"service_key": env.key, "query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": selections,
        "filters": [{"name": "api_key", "filter": "QUERY_FILTER_EQUAL", "value": SLOW_KEY}]}]})
    .to_string();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(env.server.addr).await.unwrap();
    let req = format!(
        "POST /api/v1/Analytics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: text/csv\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let (head, csv) = read_slowly(&mut s, rate).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    String::from_utf8(csv)
        .unwrap()
        .split_terminator("\r\n")
        .map(str::to_string)
        .collect()
}

const SLOW_KEY: &str = "k-a-slow-reader-with-a-key-of-forty-byte";

/// A CSV export read slowly arrives whole: the idle clock counts time without progress in
/// either direction, not time since the answer's head (an export of 6.9 MB read at
/// 60 KB/s was cut after 60 s, mid-row, without its last chunk). The idle timeout is 1 s
/// here, and every read outlasts it many times:
/// - 100,000 rows read at 20 KB/s (about 25 s);
/// - 100,000 rows of 9 MB read at 1 MB/s (about 10 s), more than the kernel's buffers
///   hold, which the idle clock of the head cut after a second.
#[tokio::test]
async fn a_slow_reader_gets_the_whole_export() {
    let env = Env::with_config(
        TestStore::Memory,
        Config {
            timeouts: Timeouts {
                idle: Duration::from_secs(1),
                ..Timeouts::default()
            },
            ..fast_config()
        },
    )
    .await;
    let rows: Vec<Value> = (0..100_000).map(|h| auto(SLOW_KEY, h, h % 1000)).collect();
    for chunk in rows.chunks(10_000) {
        load(
            env.store.as_ref(),
            &env.team,
            &records::AUTOCOMPLETE,
            Value::Array(chunk.to_vec()),
        )
        .await;
    }
    let lines = slow_export(&env, &["num_acceptances"], 20_000).await;
    assert_eq!(lines.len(), 1 + 100_000);
    assert_eq!(lines[0], "num_acceptances");
    assert_eq!(lines[100_000], "999");
    let sum: i64 = lines[1..].iter().map(|l| l.parse::<i64>().unwrap()).sum();
    assert_eq!(sum, 100 * (0..1000).sum::<i64>());
    let wide = [
        "api_key",
        "hour",
        "language",
        "ide",
        "version",
        "num_acceptances",
    ];
    let lines = slow_export(&env, &wide, 1 << 20).await;
    assert_eq!(lines.len(), 1 + 100_000);
    assert!(lines.iter().map(String::len).sum::<usize>() > 8 << 20);
    assert_eq!(
        lines[100_000],
        format!("{SLOW_KEY},2036-05-29 15:00:00 +0000 UTC,GO,vscode,1,999")
    );
}

/// The v2 answer is computed once for all its pages, and anew after a write of the team
/// (the stores with a change counter: SQLite and PostgreSQL, on Citus too).
#[tokio::test]
async fn v2_pages_are_computed_once_per_answer_sqlite() {
    v2_pages_are_computed_once_per_answer(TestStore::Sqlite).await;
}

#[tokio::test]
async fn v2_pages_are_computed_once_per_answer_postgres() {
    v2_pages_are_computed_once_per_answer(TestStore::Postgres).await;
}

#[tokio::test]
async fn v2_pages_are_computed_once_per_answer_citus() {
    v2_pages_are_computed_once_per_answer(TestStore::Citus).await;
}

async fn v2_pages_are_computed_once_per_answer(kind: TestStore) {
    let env = Env::new(kind).await;
    let answers = |env: &Env| {
        let req = env.client.get(env.url("/metrics"));
        async move {
            let text = req.send().await.unwrap().text().await.unwrap();
            let m = crate::metrics::scrape(&text);
            let n = |source: &str| {
                m.get(&(
                    "usage_v2_answers_total".to_string(),
                    vec![("source".to_string(), source.to_string())],
                ))
                .copied()
                .unwrap_or(0.0)
            };
            (n("computed"), n("kept"))
        }
    };
    let page = |cursor: Option<String>| {
        let mut path = "/api/v2/users/activity?start=2025-05-01&end=2025-05-31&limit=1".to_string();
        if let Some(c) = cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        env.client
            .get(env.url(&path))
            .header("authorization", format!("Bearer {}", env.key))
            .send()
    };
    let mut cursor = None;
    let mut emails = Vec::new();
    loop {
        let v: Value = page(cursor).await.unwrap().json().await.unwrap();
        emails.push(v["data"][0]["email"].as_str().unwrap().to_string());
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(emails, ["ana@a", "bob@a", "cy@a"]);
    assert_eq!(answers(&env).await, (1.0, 2.0));
    // A write of the team: the next page is computed anew, and shows it.
    load(
        env.store.as_ref(),
        &env.team,
        &records::USERS,
        json!([{"email": "dee@a", "name": "Dee", "api_key": "k-dee"}]),
    )
    .await;
    let v: Value = page(None).await.unwrap().json().await.unwrap();
    assert_eq!(v["data"][0]["email"], "ana@a");
    assert_eq!(answers(&env).await, (2.0, 2.0));
}

on_every_store!(v2_days_at_the_ends_of_the_range);
/// A v2 error names the parameter the client sent, and the range's ends are answered
/// (`end=9999-12-31` asked for an `end_timestamp` in year 10000).
async fn v2_days_at_the_ends_of_the_range(kind: TestStore) {
    let env = Env::new(kind).await;
    for q in [
        "start=2025-05-01&end=9999-12-31",
        "start=1970-01-01&end=2025-05-31&tz=UTC%2B14",
        "start=1970-01-01&end=9999-12-31&tz=UTC-12",
        "start=1970-01-01&end=9999-12-31&tz=Pacific/Kiritimati",
    ] {
        for path in ["/api/v2/users/activity", "/api/v2/usage/daily"] {
            let res = env
                .client
                .get(env.url(&format!("{path}?{q}")))
                .header("authorization", format!("Bearer {}", env.key))
                .send()
                .await
                .unwrap();
            let status = res.status().as_u16();
            let v: Value = res.json().await.unwrap();
            assert_eq!(status, 200, "{path}?{q}: {v}");
            let n = v["data"].as_array().unwrap().len();
            assert!(n > 0, "{path}?{q}: {v}");
        }
    }
}
