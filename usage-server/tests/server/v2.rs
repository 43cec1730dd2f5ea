//! The GET endpoints (`/api/v2/...`): pages that see every row once while records are
//! ingested, `ETag` and `304`, the audit log over HTTP, bearer-only keys, and errors that
//! name the parameter, on every store.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use usage_core::plan::{CapAction, CapScope};
use usage_core::schema::Permission;
use usage_core::schema::records;
use usage_core::time::Timestamp;

use crate::common::{Env, TestStore, load};

/// A GET with the bearer key; (status, headers, body as JSON or Null).
async fn get(
    env: &Env,
    key: Option<&str>,
    path_and_query: &str,
    if_none_match: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = env.client.get(env.url(path_and_query));
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    if let Some(t) = if_none_match {
        req = req.header("if-none-match", t);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let text = res.text().await.unwrap();
    (
        status,
        headers,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

/// An autocomplete record of developer `k` on day `d` (March 2025) in `lang`.
fn auto(k: &str, d: u32, lang: &str, n: i64) -> Value {
    json!({"api_key": k, "hour": format!("2025-03-{d:02}T10:00:00Z"), "language": lang,
           "ide": "vscode", "version": "1.0", "num_acceptances": n, "num_lines_accepted": n,
           "num_bytes_accepted": n})
}

/// Pages through `usage/daily` by language, `limit` rows a page, while another task
/// ingests records: new days and languages, and new counts for rows already there. Every
/// (day, language) that existed before the first page is seen exactly once, and keys only
/// grow from page to page.
async fn paging_sees_every_row_once_while_ingesting(store: TestStore) {
    let env = Env::new(store).await;
    let langs = ["C", "GO", "JAVA", "PYTHON", "RUST"];
    let mut first = Vec::new();
    for d in 1..=20 {
        for (i, l) in langs.iter().enumerate() {
            if !(d as usize + i).is_multiple_of(3) {
                first.push(auto("k-ana", d, l, 1 + i64::from(d)));
            }
        }
    }
    load(
        env.store.as_ref(),
        &env.team,
        &records::AUTOCOMPLETE,
        Value::Array(first.clone()),
    )
    .await;
    let before: BTreeSet<(String, String)> = first
        .iter()
        .map(|r| {
            (
                r["hour"].as_str().unwrap()[..10].to_string(),
                r["language"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let path = "/api/v2/usage/daily?start=2025-03-01&end=2025-03-31&group_by=language";
    for limit in [1, 3, 7, 50] {
        let store = env.store.clone();
        let team = env.team.clone();
        // Ingest while paging: days 21.. (after every existing key), days 1..20 again
        // (rows that exist get new counts, missing languages appear before the cursor).
        let writer = tokio::spawn(async move {
            for round in 0..15u32 {
                let d = if round % 2 == 0 {
                    21 + round % 10
                } else {
                    1 + round
                };
                let recs = json!([auto("k-bob", d, "KOTLIN", 5), auto("k-ana", d, "GO", 9)]);
                load(store.as_ref(), &team, &records::AUTOCOMPLETE, recs).await;
                tokio::task::yield_now().await;
            }
        });
        let mut seen: Vec<(String, String)> = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let q = match &cursor {
                Some(c) => format!("{path}&limit={limit}&cursor={c}"),
                None => format!("{path}&limit={limit}"),
            };
            let (st, _, v) = get(&env, Some(&env.key), &q, None).await;
            assert_eq!(st, 200, "{v}");
            let rows = v["data"].as_array().unwrap();
            assert!(rows.len() <= limit, "{v}");
            for r in rows {
                seen.push((
                    r["date"].as_str().unwrap().to_string(),
                    r["language"].as_str().unwrap().to_string(),
                ));
                // Sums are strings, as in the Analytics answer.
                assert!(r["num_acceptances"].is_string(), "{r}");
            }
            match v["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        writer.await.unwrap();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "keys repeat or go back: {seen:?}"
        );
        let seen: BTreeSet<(String, String)> = seen.into_iter().collect();
        let missing: Vec<_> = before.difference(&seen).collect();
        assert!(missing.is_empty(), "limit {limit}: never seen: {missing:?}");
    }
}
on_every_store!(
    paging_sees_every_row_once_while_ingesting,
    flavor = "multi_thread",
    worker_threads = 2
);

/// The same answer has the same `ETag`, and `If-None-Match` with it is answered `304`
/// without a body; a write that changes the answer changes the tag.
async fn etag_and_not_modified(store: TestStore) {
    let env = Env::new(store).await;
    let path = "/api/v2/usage/daily?start=2025-05-01&end=2025-05-31";
    let (st, h, v) = get(&env, Some(&env.key), path, None).await;
    assert_eq!(st, 200, "{v}");
    assert!(!v["data"].as_array().unwrap().is_empty(), "{v}");
    let tag = h["etag"].to_str().unwrap().to_string();
    assert!(tag.starts_with('"') && tag.ends_with('"'), "{tag}");
    let (st, h2, body) = get(&env, Some(&env.key), path, Some(&tag)).await;
    assert_eq!((st, &body), (304, &Value::Null));
    assert_eq!(h2["etag"].to_str().unwrap(), tag);
    let (st, _, _) = get(&env, Some(&env.key), path, Some("\"other\"")).await;
    assert_eq!(st, 200);
    load(
        env.store.as_ref(),
        &env.team,
        &records::AUTOCOMPLETE,
        json!([{"api_key": "k-ana", "hour": "2025-05-09T10:00:00Z", "language": "GO",
            "ide": "vscode", "version": "1.0", "num_acceptances": 1, "num_lines_accepted": 1,
            "num_bytes_accepted": 1}]),
    )
    .await;
    // Another instance's caches may take up to a second; this server wrote through its
    // own store, so the change is read at once.
    let (st, h3, _) = get(&env, Some(&env.key), path, Some(&tag)).await;
    assert_eq!(st, 200);
    assert_ne!(h3["etag"].to_str().unwrap(), tag);
}
on_every_store!(etag_and_not_modified);

/// The cap audit log over HTTP, two entries a page, equals the store's log; it needs
/// `billing-read`, and a key only by `Authorization: Bearer`.
async fn audit_log_pages(store: TestStore) {
    let env = Env::new(store).await;
    for (i, cap) in [10, 20, 30, 40, 50].into_iter().enumerate() {
        let scope = if i % 2 == 0 {
            CapScope::Team
        } else {
            CapScope::User("ana@a".into())
        };
        env.store
            .change_cap(
                &env.team,
                &scope,
                CapAction::Set(cap),
                "key_t",
                Timestamp::now(),
            )
            .await
            .unwrap();
    }
    let mut got = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let q = match &cursor {
            Some(c) => format!("/api/v2/audit?limit=2&cursor={c}"),
            None => "/api/v2/audit?limit=2".to_string(),
        };
        let (st, _, v) = get(&env, Some(&env.key), &q, None).await;
        assert_eq!(st, 200, "{v}");
        got.extend(v["entries"].as_array().unwrap().iter().cloned());
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let want: Vec<Value> = usage_server::store::audit_log(env.store.as_ref(), &env.team)
        .await
        .unwrap();
    assert_eq!(got, want);
    // The team's creation and its key come first; then the caps, with their fields.
    assert_eq!(got[0]["action"], "team.create");
    let caps: Vec<&Value> = got.iter().filter(|e| e["action"] == "cap.change").collect();
    assert_eq!(caps.len(), 5);
    assert_eq!(caps[2]["old"], 10);
    assert_eq!(caps[2]["new"], 30);
    assert_eq!(caps[2]["scope"], "team");
    assert_eq!(caps[2]["key_id"], "key_t");
    // Permission and key.
    let analytics_only = env.key_with(&[Permission::AnalyticsRead]).await;
    let (st, _, v) = get(&env, Some(&analytics_only), "/api/v2/audit", None).await;
    assert_eq!(
        (st, v["code"].as_str()),
        (403, Some("permission_denied")),
        "{v}"
    );
    let (st, _, v) = get(&env, None, "/api/v2/audit", None).await;
    assert_eq!(
        (st, v["code"].as_str()),
        (401, Some("unauthenticated")),
        "{v}"
    );
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer"),
        "{v}"
    );
}
on_every_store!(audit_log_pages);

/// `users/activity`, one user a page, is the `UserPageAnalytics` answer of the period.
async fn user_activity_pages(store: TestStore) {
    let env = Env::new(store).await;
    let mut got = Vec::new();
    let mut cursor: Option<String> = None;
    let path = "/api/v2/users/activity?start=2025-05-01&end=2025-05-31";
    loop {
        let q = match &cursor {
            Some(c) => format!("{path}&limit=1&cursor={c}"),
            None => format!("{path}&limit=1"),
        };
        let (st, _, v) = get(&env, Some(&env.key), &q, None).await;
        assert_eq!(st, 200, "{v}");
        got.extend(v["data"].as_array().unwrap().iter().cloned());
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let r = env
        .post(
            "UserPageAnalytics",
            json!({"start_timestamp": "2025-05-01T00:00:00Z", "end_timestamp": "2025-06-01T00:00:00Z"}),
        )
        .await;
    let want = r.ok()["userTableStats"].as_array().unwrap().clone();
    assert_eq!(got, want);
    assert_eq!(got.len(), 3);
}
on_every_store!(user_activity_pages);

/// `tz` shifts the days: an offset written with an unescaped `+` (read as a space) means
/// the same as `%2B`, and the days are the `date UTC±H` field's.
#[tokio::test]
async fn tz_offsets_shift_the_days() {
    let env = Env::new(TestStore::Memory).await;
    // 23:00 UTC on 2025-03-01 is 2025-03-02 at UTC+8.
    let late = json!([{"api_key": "k-ana", "hour": "2025-03-01T23:00:00Z", "language": "GO",
        "ide": "vscode", "version": "1.0", "num_acceptances": 4, "num_lines_accepted": 1,
        "num_bytes_accepted": 1}]);
    load(env.store.as_ref(), &env.team, &records::AUTOCOMPLETE, late).await;
    let days = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["date"].as_str().unwrap().to_string())
            .collect()
    };
    let base = "/api/v2/usage/daily?start=2025-03-01&end=2025-03-02";
    let (_, _, utc) = get(&env, Some(&env.key), base, None).await;
    assert_eq!(days(&utc), ["2025-03-01"], "{utc}");
    for tz in ["UTC%2B8", "UTC+8", "UTC%2B08:00"] {
        let (st, _, v) = get(&env, Some(&env.key), &format!("{base}&tz={tz}"), None).await;
        assert_eq!(st, 200, "{tz}: {v}");
        assert_eq!(days(&v), ["2025-03-02"], "{tz}: {v}");
    }
}

/// `tz` takes IANA zones, daylight saving time applied per instant, on every store: in
/// New York the days of March and November 2025 start at 05:00 UTC before the change
/// and at 04:00 UTC after it, where `UTC-5` keeps 05:00. `users/activity` asks for the
/// zone's local days (a day of 25 hours in New York on 2 November).
async fn iana_zones_follow_dst(store: TestStore) {
    let env = Env::new(store).await;
    let rec = |hour: &str, n: i64| {
        json!({"api_key": "k-ana", "hour": hour, "language": "GO", "ide": "vscode",
               "version": "1.0", "num_acceptances": n, "num_lines_accepted": 1,
               "num_bytes_accepted": 1})
    };
    let data = json!([
        // 23:00 on 8 March (EST) and 00:00 on the 9th (EST, DST starts at 07:00 UTC).
        rec("2025-03-09T04:00:00Z", 1),
        rec("2025-03-09T05:00:00Z", 2),
        // 23:00 on 1 November (EDT) and 00:00 on the 2nd (EDT, ends at 06:00 UTC).
        rec("2025-11-02T03:00:00Z", 4),
        rec("2025-11-02T04:00:00Z", 8),
    ]);
    load(env.store.as_ref(), &env.team, &records::AUTOCOMPLETE, data).await;
    let rows = |v: &Value| -> Vec<(String, String)> {
        v["data"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|r| {
                (
                    r["date"].as_str().unwrap().to_string(),
                    r["num_acceptances"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // March and November (the test data of every Env holds days in May).
    let ranges = [
        "/api/v2/usage/daily?start=2025-03-01&end=2025-03-31",
        "/api/v2/usage/daily?start=2025-11-01&end=2025-11-30",
    ];
    let cases: [(&str, &[(&str, &str)]); 4] = [
        (
            "America/New_York",
            &[
                ("2025-03-08", "1"),
                ("2025-03-09", "2"),
                ("2025-11-01", "4"),
                ("2025-11-02", "8"),
            ],
        ),
        // Any case; the answer is the same.
        (
            "america/new_york",
            &[
                ("2025-03-08", "1"),
                ("2025-03-09", "2"),
                ("2025-11-01", "4"),
                ("2025-11-02", "8"),
            ],
        ),
        (
            "UTC-5",
            &[
                ("2025-03-08", "1"),
                ("2025-03-09", "2"),
                ("2025-11-01", "12"),
            ],
        ),
        (
            "Europe/Berlin",
            &[("2025-03-09", "3"), ("2025-11-02", "12")],
        ),
    ];
    for (tz, want) in cases {
        let mut got = Vec::new();
        for base in ranges {
            let (st, _, v) = get(&env, Some(&env.key), &format!("{base}&tz={tz}"), None).await;
            assert_eq!(st, 200, "{tz}: {v}");
            got.extend(rows(&v));
        }
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(d, n)| (d.to_string(), n.to_string()))
            .collect();
        assert_eq!(got, want, "{tz}");
    }

    // A local day in New York: 2 November runs from 04:00 UTC to 05:00 UTC the next day
    // (25 hours); in UTC from midnight to midnight.
    let mut answers = Vec::new();
    for (tz, start, end) in [
        (
            "America/New_York",
            "2025-11-02T04:00:00Z",
            "2025-11-03T05:00:00Z",
        ),
        ("UTC", "2025-11-02T00:00:00Z", "2025-11-03T00:00:00Z"),
        (
            "Pacific/Honolulu",
            "2025-11-02T10:00:00Z",
            "2025-11-03T10:00:00Z",
        ),
    ] {
        let (st, _, v) = get(
            &env,
            Some(&env.key),
            &format!("/api/v2/users/activity?start=2025-11-02&end=2025-11-02&tz={tz}"),
            None,
        )
        .await;
        assert_eq!(st, 200, "{tz}: {v}");
        let r = env
            .post(
                "UserPageAnalytics",
                json!({"start_timestamp": start, "end_timestamp": end}),
            )
            .await;
        let want = r.ok()["userTableStats"].as_array().unwrap().clone();
        assert_eq!(v["data"].as_array().unwrap(), &want, "{tz}");
        answers.push(want);
    }
    // Ana was active on 2 November in New York and in UTC, not in Honolulu (UTC-10).
    let ana_days: Vec<i64> = answers
        .iter()
        .map(|a| {
            a.iter()
                .find(|u| u["apiKey"] == "k-ana")
                .and_then(|u| u["activeDays"].as_i64())
                .unwrap_or(0)
        })
        .collect();
    assert_eq!(ana_days, [1, 1, 0]);
}
on_every_store!(iana_zones_follow_dst);

/// Bad parameters are 400s naming the parameter and the rule; other methods 405; unknown
/// paths 404.
#[tokio::test]
async fn bad_parameters_name_the_parameter() {
    let env = Env::new(TestStore::Memory).await;
    let cases = [
        (
            "/api/v2/usage/daily?end=2025-05-01",
            "start",
            "missing_field",
        ),
        (
            "/api/v2/usage/daily?start=2025-5-1&end=2025-05-01",
            "start",
            "invalid_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-02&end=2025-05-01",
            "end",
            "invalid_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&group_by=team",
            "group_by",
            "unknown_enum_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&source=pcw",
            "source",
            "unknown_enum_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&tz=Mars",
            "tz",
            "invalid_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&tz=America/Nowhere",
            "tz",
            "invalid_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&tz=UTC%2B15",
            "tz",
            "invalid_value",
        ),
        (
            "/api/v2/users/activity?start=2025-05-01&end=2025-05-02&tz=Europe/Nowhere",
            "tz",
            "invalid_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&limit=0",
            "limit",
            "invalid_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&limit=1001",
            "limit",
            "invalid_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&cursor=abc",
            "cursor",
            "invalid_value",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&end=2025-05-02&bogus=1",
            "bogus",
            "unknown_field",
        ),
        (
            "/api/v2/usage/daily?start=2025-05-01&start=2025-05-01&end=2025-05-02",
            "start",
            "conflicting_fields",
        ),
        ("/api/v2/audit?limit=x", "limit", "invalid_value"),
    ];
    for (q, param, rule) in cases {
        let (st, _, v) = get(&env, Some(&env.key), q, None).await;
        assert_eq!(st, 400, "{q}: {v}");
        assert_eq!(v["details"][0]["path"], param, "{q}: {v}");
        assert_eq!(v["details"][0]["rule"], rule, "{q}: {v}");
    }
    // A cursor of other parameters.
    let (_, _, v) = get(
        &env,
        Some(&env.key),
        "/api/v2/usage/daily?start=2025-05-01&end=2025-05-31&limit=1",
        None,
    )
    .await;
    let c = v["next_cursor"].as_str().unwrap().to_string();
    let (st, _, v) = get(
        &env,
        Some(&env.key),
        &format!("/api/v2/usage/daily?start=2025-05-02&end=2025-05-31&cursor={c}"),
        None,
    )
    .await;
    assert_eq!(
        (st, v["details"][0]["path"].as_str()),
        (400, Some("cursor")),
        "{v}"
    );
    let res = env
        .client
        .post(env.url("/api/v2/audit"))
        .header("authorization", format!("Bearer {}", env.key))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 405);
    assert_eq!(res.headers()["allow"], "GET, HEAD");
    let (st, _, _) = get(&env, Some(&env.key), "/api/v2/nothing", None).await;
    assert_eq!(st, 404);
}
