//! The error rows of the contract and the order of the checks (section 2).

use serde_json::{Value, json};
use usage_core::schema::Permission;
use usage_server::auth::rate::RateConfig;
use usage_server::http::Config;

use crate::common::{Env, TestStore, d, fast_config};

on_every_store!(paths_and_methods);
async fn paths_and_methods(kind: TestStore) {
    let env = Env::new(kind).await;
    for path in [
        "/api/v1/analytics",
        "/api/v1/Analytics/",
        "/api/v2/Analytics",
        "/api/v1/",
        "/healthz/",
    ] {
        let r = env
            .send(
                env.client
                    .post(env.url(path))
                    .header("content-type", "application/json")
                    .body("{}"),
            )
            .await;
        r.error(404, "not_found");
    }
    // Unknown path beats a wrong method.
    env.send(env.client.get(env.url("/nope")))
        .await
        .error(404, "not_found");
    for m in [
        reqwest::Method::GET,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
        reqwest::Method::PATCH,
    ] {
        let r = env
            .send(env.client.request(m, env.url("/api/v1/UsageConfig")))
            .await;
        r.error(405, "method_not_allowed");
        assert_eq!(r.headers["allow"], "POST");
    }
    // `/healthz` and the dashboard's page (`/`, `/dashboard`) take GET and HEAD.
    for path in ["/healthz", "/", "/dashboard"] {
        let r = env.send(env.client.post(env.url(path))).await;
        r.error(405, "method_not_allowed");
        assert_eq!(r.headers["allow"], "GET, HEAD");
    }
    let r = env.send(env.client.get(env.url("/healthz"))).await;
    assert_eq!(r.ok(), &json!({"status": "ok", "unreadable_records": 0}));
    // A query string is ignored.
    let r = env
        .send(
            env.client
                .post(env.url("/api/v1/GetUsageConfig?x=1"))
                .header("content-type", "application/json")
                .body(json!({"service_key": env.key, "team_level": true}).to_string()),
        )
        .await;
    assert_eq!(r.ok(), &json!({}));
}

on_every_store!(
    size_then_media_type_then_json,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn size_then_media_type_then_json(kind: TestStore) {
    let env = Env::with_config(
        kind,
        Config {
            max_body_bytes: 64,
            max_ingest_bytes: 256,
            ..fast_config()
        },
    )
    .await;
    let big = format!(
        "{{\"service_key\": \"{}\", \"pad\": \"{}\"}}",
        env.key,
        "x".repeat(100)
    );
    // 413 before 415.
    env.raw("GetUsageConfig", Some("text/plain"), big.clone())
        .await
        .error(413, "payload_too_large");
    env.raw("GetUsageConfig", Some("application/json"), big.clone())
        .await
        .error(413, "payload_too_large");
    // Ingest has its own, larger limit.
    env.raw("Ingest", Some("text/plain"), big.clone())
        .await
        .error(415, "unsupported_media_type");
    // A chunked body over the limit is 413 too.
    {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(env.server.addr).unwrap();
        let mut req = String::from(
            "POST /api/v1/Ingest HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        );
        for _ in 0..3 {
            req.push_str(&format!("{:x}\r\n{big}\r\n", big.len()));
        }
        req.push_str("0\r\n\r\n");
        c.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 413"), "{out}");
        assert!(out.contains("\"code\":\"payload_too_large\""), "{out}");
    }
    // 415 before 400.
    env.raw("GetUsageConfig", None, "{")
        .await
        .error(415, "unsupported_media_type");
    env.raw("GetUsageConfig", Some("application/jsonx"), "{")
        .await
        .error(415, "unsupported_media_type");
    env.raw("GetUsageConfig", Some("text/json"), "{}")
        .await
        .error(415, "unsupported_media_type");
    // Media type compared case-insensitively, parameters ignored.
    let plain = Env::new(kind).await;
    let r = plain
        .raw(
            "GetUsageConfig",
            Some("Application/JSON; charset=utf-8"),
            json!({"service_key": plain.key, "team_level": true}).to_string(),
        )
        .await;
    assert_eq!(r.ok(), &json!({}));
    // Not JSON, not an object, too deep: 400 before the key.
    for body in ["{", "", "[1]", "\"x\"", "null"] {
        let r = env
            .raw("GetUsageConfig", Some("application/json"), body)
            .await;
        assert_eq!(r.details(), [d("", "malformed_json")], "{body:?}");
    }
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(64), "]".repeat(64));
    let r = plain
        .raw("GetUsageConfig", Some("application/json"), deep)
        .await;
    assert_eq!(r.details(), [d("", "too_many")]);
}

on_every_store!(kinds_before_key_before_rate_before_permission_before_validation_before_names);
async fn kinds_before_key_before_rate_before_permission_before_validation_before_names(
    kind: TestStore,
) {
    let env = Env::new(kind).await;
    // Wrong JSON kinds answer before an unknown key.
    let r = env
        .post_as(
            "usk_unknown",
            "Analytics",
            json!({"query_requests": "x", "group_name": 5}),
        )
        .await;
    assert_eq!(
        r.details(),
        [
            d("group_name", "invalid_value"),
            d("query_requests", "invalid_value")
        ]
    );
    // Unknown fields are validation: the key is checked first.
    env.post_as("usk_unknown", "Analytics", json!({"bogus": 1}))
        .await
        .error(401, "unauthenticated");
    // Missing key, key in neither place.
    env.raw(
        "GetUsageConfig",
        Some("application/json"),
        "{\"team_level\": true}",
    )
    .await
    .error(401, "unauthenticated");
    env.post_as("", "GetUsageConfig", json!({"team_level": true}))
        .await
        .error(401, "unauthenticated");
    // Permission before validation.
    let reader = env.key_with(&[Permission::TeamsRead]).await;
    let r = env.post_as(&reader, "Analytics", json!({"bogus": 1})).await;
    let m = r.error(403, "permission_denied")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(m.contains("`analytics-read` (Analytics Read)"), "{m}");
    // Validation before names.
    let r = env
        .post(
            "Analytics",
            json!({"group_name": "nope", "query_requests": []}),
        )
        .await;
    assert_eq!(r.details(), [d("query_requests", "missing_field")]);
    let r = env
        .post(
            "GetUsageConfig",
            json!({"group_id": "nope", "user_email": "x"}),
        )
        .await;
    assert_eq!(r.details(), [d("user_email", "scope")]);
    // Unknown fields with a suggestion; both spellings conflict.
    let r = env
        .post(
            "GetUsageConfig",
            json!({"team_level": true, "teamLevl": true}),
        )
        .await;
    assert_eq!(r.details(), [d("teamLevl", "unknown_field")]);
    assert!(
        r.body["details"][0]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean `teamLevel`?")
    );
    let r = env
        .post(
            "GetUsageConfig",
            json!({"team_level": true, "teamLevel": true}),
        )
        .await;
    assert_eq!(r.details(), [d("team_level", "conflicting_fields")]);
    // `service_key` wins over `serviceKey` and over the header.
    let body = json!({"service_key": env.key, "team_level": true});
    let r = env
        .send(
            env.client
                .post(env.url("/api/v1/GetUsageConfig"))
                .header("content-type", "application/json")
                .bearer_auth("usk_wrong")
                .body(body.to_string()),
        )
        .await;
    r.ok();
    let r = env
        .post_as(
            "usk_x",
            "GetUsageConfig",
            json!({"serviceKey": env.key, "team_level": true}),
        )
        .await;
    r.ok();
}

on_every_store!(unknown_and_revoked_keys_are_401);
async fn unknown_and_revoked_keys_are_401(kind: TestStore) {
    let env = Env::new(kind).await;
    let key = env.key_with(&[Permission::BillingRead]).await;
    env.post_as(&key, "GetUsageConfig", json!({"team_level": true}))
        .await
        .ok();
    let info = env
        .store
        .key_by_hash(&usage_server::auth::hash_key(&key))
        .await
        .unwrap()
        .unwrap();
    env.store.revoke_key(&info.key_id, "-").await.unwrap();
    let r = env
        .post_as(&key, "GetUsageConfig", json!({"team_level": true}))
        .await;
    assert!(
        r.error(401, "unauthenticated")["message"]
            .as_str()
            .unwrap()
            .contains("revoked")
    );
    // The key never appears in an answer.
    assert!(!r.text.contains(&key));
    env.post_as("usk_0000", "GetUsageConfig", json!({"team_level": true}))
        .await
        .error(401, "unauthenticated");
}

on_every_store!(rate_limit_is_per_key_with_retry_after);
async fn rate_limit_is_per_key_with_retry_after(kind: TestStore) {
    let env = Env::with_config(
        kind,
        Config {
            rate: RateConfig {
                per_minute: 1,
                burst: 2,
            },
            ..fast_config()
        },
    )
    .await;
    let other = env.key_with(&[Permission::BillingRead]).await;
    let body = json!({"team_level": true});
    env.post("GetUsageConfig", body.clone()).await.ok();
    env.post("GetUsageConfig", body.clone()).await.ok();
    let r = env.post("GetUsageConfig", body.clone()).await;
    r.error(429, "resource_exhausted");
    let secs: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&secs), "{secs}");
    // Rate comes after the key: an unknown key is still 401.
    env.post_as("usk_nope", "GetUsageConfig", body.clone())
        .await
        .error(401, "unauthenticated");
    // Rate comes before permission: the limited key gets 429 on any operation.
    env.post("Analytics", json!({}))
        .await
        .error(429, "resource_exhausted");
    // Another key has its own budget.
    env.post_as(&other, "GetUsageConfig", body).await.ok();
}

on_every_store!(request_ids_are_echoed_or_made);
async fn request_ids_are_echoed_or_made(kind: TestStore) {
    let env = Env::new(kind).await;
    let req = |id: &str| {
        env.client
            .post(env.url("/api/v1/Nope"))
            .header("x-request-id", id)
    };
    let r = env.send(req("abc.DEF_1:2-3")).await;
    assert_eq!(r.headers["x-request-id"], "abc.DEF_1:2-3");
    assert_eq!(r.error(404, "not_found")["requestId"], "abc.DEF_1:2-3");
    for bad in ["has space", &"a".repeat(129), "ünï"] {
        let r = env.send(req(bad)).await;
        let made = r.headers["x-request-id"].to_str().unwrap().to_string();
        assert_ne!(made, bad);
        assert!(made.starts_with("req_"));
        assert_eq!(r.error(404, "not_found")["requestId"], made.as_str());
    }
    let a = env.send(env.client.get(env.url("/healthz"))).await;
    let b = env.send(env.client.get(env.url("/healthz"))).await;
    assert_ne!(a.headers["x-request-id"], b.headers["x-request-id"]);
}

on_every_store!(a_store_that_is_down_answers_503);
async fn a_store_that_is_down_answers_503(kind: TestStore) {
    let env = Env::new(kind).await;
    env.store.close().await.unwrap();
    let r = env.send(env.client.get(env.url("/healthz"))).await;
    r.error(503, "unavailable");
    assert_eq!(r.headers["retry-after"], "1");
    let r = env
        .post("GetUsageConfig", json!({"team_level": true}))
        .await;
    r.error(503, "unavailable");
    assert!(r.headers.contains_key("retry-after"));
    // Checks before the store still answer as usual.
    env.raw("GetUsageConfig", Some("text/plain"), "{}")
        .await
        .error(415, "unsupported_media_type");
}

on_every_store!(graceful_shutdown_finishes_and_stops_accepting);
async fn graceful_shutdown_finishes_and_stops_accepting(kind: TestStore) {
    let env = Env::new(kind).await;
    let url = env.url("/healthz");
    env.server.shutdown().await;
    assert!(reqwest::get(url).await.is_err());
}

on_every_store!(a_400_lists_at_most_100_details_before_and_after_the_key);
async fn a_400_lists_at_most_100_details_before_and_after_the_key(kind: TestStore) {
    let env = Env::new(kind).await;
    // 500 wrong-kind selections and no key: kinds answer before the key check.
    let wrong: Vec<Value> = (0..500).map(|_| json!(5)).collect();
    let body = json!({"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": wrong}]});
    let r = env
        .raw("Analytics", Some("application/json"), body.to_string())
        .await;
    let details = r.details();
    assert_eq!(details.len(), 100);
    assert_eq!(
        details[0],
        d("query_requests[0].selections[0]", "invalid_value")
    );
    assert_eq!(
        details[99],
        d("query_requests[0].selections[99]", "invalid_value")
    );
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid request: 500 violations, the first 100 listed; "),
        "{}",
        r.text
    );
    // After the key: 300 unknown fields of a valid key's request.
    let mut body = json!({"team_level": true});
    for i in 0..300 {
        body[format!("bogus_{i:03}")] = json!(1);
    }
    let r = env.post("GetUsageConfig", body).await;
    let details = r.details();
    assert_eq!(details.len(), 100);
    assert!(details.iter().all(|(_, rule)| rule == "unknown_field"));
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid request: 300 violations, the first 100 listed; "),
        "{}",
        r.text
    );
    assert!(r.text.len() < 32 * 1024, "{} bytes", r.text.len());
}

on_every_store!(a_megabyte_of_wrong_kinds_without_a_key_gets_a_small_400);
async fn a_megabyte_of_wrong_kinds_without_a_key_gets_a_small_400(kind: TestStore) {
    let env = Env::new(kind).await;
    // 500,000 wrong-kind selections, no key: the body limit's worth (1 MiB) of kind errors.
    let ones = vec!["1"; 500_000].join(",");
    let body = format!(
        r#"{{"query_requests":[{{"data_source":"QUERY_DATA_SOURCE_USER_DATA","selections":[{ones}]}}]}}"#
    );
    assert!(
        body.len() > 999_000 && body.len() <= 1 << 20,
        "{}",
        body.len()
    );
    let r = env.raw("Analytics", Some("application/json"), body).await;
    let details = r.details();
    assert_eq!(details.len(), 100);
    assert_eq!(
        details[0],
        d("query_requests[0].selections[0]", "invalid_value")
    );
    assert_eq!(
        details[99],
        d("query_requests[0].selections[99]", "invalid_value")
    );
    assert_eq!(
        r.body["message"],
        "invalid request: 500000 violations, the first 100 listed; the first: \
         query_requests[0].selections[0]: invalid_value: \
         `query_requests[0].selections[0]` must be a JSON object, not a number"
    );
    assert!(r.text.len() < 64 * 1024, "{} bytes", r.text.len());
}

on_every_store!(a_json_minus_zero_cap_is_zero);
async fn a_json_minus_zero_cap_is_zero(kind: TestStore) {
    let env = Env::new(kind).await;
    let r = env
        .raw(
            "UsageConfig",
            Some("application/json"),
            format!(
                r#"{{"service_key": "{}", "team_level": true, "set_add_on_credit_cap": -0}}"#,
                env.key
            ),
        )
        .await;
    assert_eq!(r.ok(), &json!({}));
    let r = env
        .post("GetUsageConfig", json!({"team_level": true}))
        .await;
    assert_eq!(r.ok(), &json!({"addOnCreditCap": 0}));
    // Contract section 11 (v5): `-0.0` and `-0e0` are a fraction and an exponent, like
    // `0.0`, wherever an integer is read; `"-0"` is 0 like `-0`.
    for bad in ["-0.0", "-0e0", "-0E0", "0.0", "-0.0e0"] {
        let r = env
            .raw(
                "UsageConfig",
                Some("application/json"),
                format!(
                    r#"{{"service_key": "{}", "team_level": true, "set_add_on_credit_cap": {bad}}}"#,
                    env.key
                ),
            )
            .await;
        assert_eq!(
            r.details(),
            [d("set_add_on_credit_cap", "invalid_value")],
            "{bad}"
        );
        let r = env
            .raw(
                "Ingest",
                Some("application/json"),
                format!(
                    r#"{{"service_key": "{}", "kind": "billing", "records": [{{"num_seats": {bad}}}]}}"#,
                    env.key
                ),
            )
            .await;
        assert_eq!(
            r.details(),
            [d("records[0].num_seats", "invalid_value")],
            "{bad}"
        );
    }
    let r = env
        .raw(
            "Ingest",
            Some("application/json"),
            format!(
                r#"{{"service_key": "{}", "kind": "billing", "records": [{{"num_seats": -0, "add_on_credits_used": "-0"}}]}}"#,
                env.key
            ),
        )
        .await;
    assert_eq!(r.ok(), &json!({"accepted": 1}));
}
