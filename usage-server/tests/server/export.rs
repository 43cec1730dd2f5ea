//! Analytics answers exported as CSV and NDJSON (`Accept`), against the JSON answer of
//! the same request: random single-query requests over the seeded team, on every store;
//! CSV read back by a real RFC 4180 reader.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use usage_core::testing::{Pool, arb_analytics_request};
use usage_core::wire::Item;

use crate::common::{Env, TestStore};

async fn post_accept(env: &Env, accept: &str, body: &Value) -> (u16, String, String) {
    let mut body = body.clone();
    body["service_key"] = json!(env.key);
    let res = env
        .client
        .post(env.url("/api/v1/Analytics"))
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let ct = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, res.text().await.unwrap())
}

/// A text as a CSV export writes it (contract section 11, v5): a leading `'` when it starts
/// with a character a spreadsheet would run as a formula.
fn as_csv_cell(v: &str) -> String {
    if v.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{v}")
    } else {
        v.to_string()
    }
}

/// A header cell back to its alias ([`as_csv_cell`] undone).
fn unmarked(h: &str) -> String {
    match h.strip_prefix('\'') {
        Some(rest) if rest.starts_with(['=', '+', '-', '@', '\t', '\r']) => rest.to_string(),
        _ => h.to_string(),
    }
}

fn block<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// The JSON answer's items, the CSV rows and the NDJSON lines of random one-query
/// requests hold the same values: the CSV header names every alias of the JSON items (a
/// null, left out of a JSON item, is an empty cell), the NDJSON lines are the JSON items.
async fn exports_equal_the_json_answer(store: TestStore) {
    let env = Env::new(store).await;
    let mut runner = TestRunner::new(Config {
        cases: 60,
        failure_persistence: None,
        ..Config::default()
    });
    let nonempty = std::cell::Cell::new(0usize);
    runner
        .run(&arb_analytics_request(Pool::default()), |mut req| {
            req.query_requests.truncate(1);
            let body = serde_json::to_value(&req).unwrap();
            let (st, _, json_text) = block(post_accept(&env, "application/json", &body));
            let (cst, cct, csv_text) = block(post_accept(&env, "text/csv", &body));
            let (nst, nct, nd_text) = block(post_accept(&env, "application/x-ndjson", &body));
            prop_assert_eq!(cst, st, "{}", csv_text);
            prop_assert_eq!(nst, st, "{}", nd_text);
            if st != 200 {
                // Errors stay JSON error bodies, whatever was asked.
                prop_assert_eq!(&csv_text, &json_text);
                prop_assert_eq!(&nd_text, &json_text);
                return Ok(());
            }
            prop_assert_eq!(cct, "text/csv; charset=utf-8");
            prop_assert_eq!(nct, "application/x-ndjson");
            let answer: Value = serde_json::from_str(&json_text).unwrap();
            let items: Vec<Item> = answer["queryResults"][0]["responseItems"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| serde_json::from_value(i["item"].clone()).unwrap())
                .collect();
            nonempty.set(nonempty.get() + usize::from(!items.is_empty()));
            // CSV.
            let mut rd = csv::ReaderBuilder::new().from_reader(csv_text.as_bytes());
            let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
            let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
            prop_assert_eq!(rows.len(), items.len());
            // A header's alias and a cell's value as the JSON answer has them.
            let header: Vec<String> = header.iter().map(|h| unmarked(h)).collect();
            for (row, item) in rows.iter().zip(&items) {
                for k in item.keys() {
                    prop_assert!(header.iter().any(|h| h == k), "{} not in {:?}", k, header);
                }
                for (h, cell) in header.iter().zip(row.iter()) {
                    let want = item.get(h).map(as_csv_cell).unwrap_or_default();
                    prop_assert_eq!(want.as_str(), cell, "{}", h);
                }
            }
            // NDJSON.
            let lines: Vec<Item> = nd_text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            prop_assert_eq!(&lines, &items);
            prop_assert!(nd_text.is_empty() || nd_text.ends_with('\n'));
            Ok(())
        })
        .unwrap();
    assert!(
        nonempty.get() >= 10,
        "only {} answers had items",
        nonempty.get()
    );
}
on_every_store!(
    exports_equal_the_json_answer,
    flavor = "multi_thread",
    worker_threads = 2
);

/// An export of two queries is refused with the field and the rule; JSON still answers.
#[tokio::test]
async fn an_export_holds_one_query() {
    let env = Env::new(TestStore::Memory).await;
    let q = json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}]});
    let body = json!({"query_requests": [q.clone(), q]});
    let (st, ct, text) = post_accept(&env, "text/csv", &body).await;
    assert_eq!((st, ct.as_str()), (400, "application/json"));
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["details"][0]["path"], "query_requests", "{v}");
    assert_eq!(v["details"][0]["rule"], "too_many", "{v}");
    assert!(
        v["message"].as_str().unwrap().contains("exactly one query"),
        "{v}"
    );
    let (st, ct, _) = post_accept(&env, "application/json, text/csv", &body).await;
    assert_eq!((st, ct.as_str()), (200, "application/json"));
}

/// An export is streamed: sent with `Transfer-Encoding: chunked` as its lines are encoded
/// (no `Content-Length`), every line there; the JSON answer keeps its length.
#[tokio::test]
async fn exports_are_streamed_in_chunks() {
    let env = Env::new(TestStore::Memory).await;
    let records: Vec<Value> = (0..3_000)
        .map(|i| {
            json!({"api_key": format!("k-stream-{}", i % 7), "language": "GO", "ide": "vscode",
                   "version": "1.0", "num_acceptances": i, "num_lines_accepted": 1,
                   "num_bytes_accepted": 1,
                   "hour": usage_core::time::Timestamp(1_735_689_600_000_000 + i * 3_600_000_000).to_rfc3339()})
        })
        .collect();
    crate::common::load(
        env.store.as_ref(),
        &env.team,
        &usage_core::schema::records::AUTOCOMPLETE,
        Value::Array(records),
    )
    .await;
    let mut body = json!({"service_key": env.key, "query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "api_key"}, {"field": "hour"}, {"field": "num_acceptances"}],
        "filters": [{"name": "date", "filter": "QUERY_FILTER_LE", "value": "2025-12-31"}]}]});
    let send = |accept: &'static str, body: Value| {
        env.client
            .post(env.url("/api/v1/Analytics"))
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.to_string())
            .send()
    };
    let res = send("text/csv", body.clone()).await.unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(
        res.headers()
            .get("transfer-encoding")
            .map(|v| v.to_str().unwrap()),
        Some("chunked")
    );
    assert!(res.headers().get("content-length").is_none());
    let text = res.text().await.unwrap();
    // 2025: the 3,000 hours from 1 January, and the seeded team's 4 in May.
    let lines: Vec<&str> = text.split_terminator("\r\n").collect();
    assert_eq!(lines.len(), 1 + 3_000 + 4, "{}", &text[..200]);
    assert_eq!(lines[0], "api_key,hour,num_acceptances");
    assert!(text.len() > 4 * 16_384, "{}", text.len());
    body["query_requests"][0]["selections"] = json!([{"field": "api_key"}]);
    let res = send("application/json", body).await.unwrap();
    assert!(res.headers().get("content-length").is_some());
}

on_every_store!(formula_cells_are_marked_in_csv_only);
/// Contract section 11 (v5): a text a spreadsheet would run as a formula
/// (`=HYPERLINK(...)` in a language) is written with a leading `'` in a CSV export;
/// NDJSON and JSON keep it as stored.
async fn formula_cells_are_marked_in_csv_only(kind: TestStore) {
    let env = Env::new(kind).await;
    let langs = [
        "=HYPERLINK(\"http://x.example\",\"open\")",
        "+1",
        "-x",
        "@y",
        "\tz",
        "ok",
    ];
    let records: Vec<Value> = langs
        .iter()
        .enumerate()
        .map(|(i, l)| {
            json!({"api_key": "k-formula", "language": l, "ide": "vscode", "version": "1",
                   "num_acceptances": 1, "num_lines_accepted": 1, "num_bytes_accepted": 1,
                   "hour": usage_core::time::Timestamp(1_735_689_600_000_000 + i as i64 * 3_600_000_000).to_rfc3339()})
        })
        .collect();
    crate::common::load(
        env.store.as_ref(),
        &env.team,
        &usage_core::schema::records::AUTOCOMPLETE,
        Value::Array(records),
    )
    .await;
    let body = json!({"service_key": env.key, "query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "language", "name": "=lang"}],
        "filters": [{"name": "api_key", "filter": "QUERY_FILTER_EQUAL", "value": "k-formula"}]}]});
    let (st, _, csv) = post_accept(&env, "text/csv", &body).await;
    assert_eq!(st, 200, "{csv}");
    assert_eq!(
        csv,
        "'=lang\r\n\"'=HYPERLINK(\"\"http://x.example\"\",\"\"open\"\")\"\r\n'+1\r\n'-x\r\n'@y\r\n'\tz\r\nok\r\n"
    );
    let (_, _, nd) = post_accept(&env, "application/x-ndjson", &body).await;
    let first: Value = serde_json::from_str(nd.lines().next().unwrap()).unwrap();
    assert_eq!(first["=lang"], langs[0]);
}
