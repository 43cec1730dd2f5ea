//! Every error kind, mapped to its `usage_client::Error` variant with its status, code and
//! values: the server's answers (400, 401, 403, 404, 413, 429), queries refused before
//! sending, and what only a broken network or server gives (timeouts, transport errors,
//! undecodable answers), from fake servers.

use std::time::Duration;

use serde_json::json;
use usage::client::query::{autocomplete as ac, command as cmd};
use usage::client::{ApiError, Client, Error, RetryPolicy, Scope};
use usage::core::schema::{Permission, Plan};
use usage_server::auth::rate::RateConfig;
use usage_server::http::Config;

use crate::common::{Env, Fake, add_team, d, fast_config, make_key, response};

/// The service's error, asserting the variant, status and code; `details` only on 400.
fn api(e: Error, status: u16, code: &str) -> ApiError {
    let Error::Api(a) = e else {
        panic!("expected Error::Api({status} {code}), got {e:?}");
    };
    assert_eq!((a.status, a.code.as_str()), (status, code), "{a:?}");
    assert!(!a.message.is_empty());
    assert!(
        a.request_id
            .as_deref()
            .is_some_and(|r| r.starts_with("req_")),
        "{a:?}"
    );
    assert_eq!(!a.details.is_empty(), status == 400, "{a:?}");
    a
}

fn sum_query() -> usage::client::query::Query {
    ac::query()
        .select(ac::num_acceptances().sum())
        .build()
        .unwrap()
}

#[tokio::test]
async fn bad_arguments_are_400_with_every_detail() {
    let env = Env::seeded().await;
    let c = env.client();

    let e = c
        .set_usage_cap(Scope::Team, 1_000_000_001)
        .send()
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert_eq!(e.code(), Some("invalid_argument"));
    assert_eq!(
        e.violations(),
        [d("set_add_on_credit_cap", "invalid_value")]
    );
    let a = api(e, 400, "invalid_argument");
    assert!(a.details[0].message.contains("1000000001"), "{a:?}");

    // An empty group id means "not given" (proto3): no scope at all.
    let e = c
        .get_usage_config(Scope::Group(String::new()))
        .send()
        .await
        .unwrap_err();
    assert_eq!(e.violations(), [d("", "scope")]);
    api(e, 400, "invalid_argument");

    let e = c
        .agent_analytics()
        .lines()
        .group_name("eng")
        .emails(["ana@t.example"])
        .send()
        .await
        .unwrap_err();
    assert_eq!(e.violations(), [d("emails", "conflicting_fields")]);
    api(e, 400, "invalid_argument");

    let e = c
        .analytics()
        .query(sum_query())
        .start("2025-05-02T00:00:00Z".parse().unwrap())
        .end("2025-05-01T00:00:00Z".parse().unwrap())
        .send()
        .await
        .unwrap_err();
    assert_eq!(e.violations(), [d("end_timestamp", "invalid_value")]);
    api(e, 400, "invalid_argument");

    // Every violation of the first bad records, with its path; nothing is stored.
    let e = c
        .ingest("autocomplete")
        .records([
            json!({"api_key": "k", "hour": "2025-05-01T10:30:00Z", "language": "GO", "ide": "vscode",
                   "version": "1", "num_acceptances": -1, "num_lines_accepted": 0, "num_bytes_accepted": 0}),
            json!({"api_key": "k", "hour": "2025-05-01T10:00:00Z", "language": "GO", "ide": "vscode",
                   "version": "1", "num_acceptances": 1, "num_lines_accepted": 0}),
        ])
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        e.violations(),
        [
            d("records[0].hour", "invalid_value"),
            d("records[0].num_acceptances", "invalid_value"),
            d("records[1].num_bytes_accepted", "missing_field"),
        ]
    );
    api(e, 400, "invalid_argument");
    let e = c.ingest("clicks").send().await.unwrap_err();
    assert_eq!(e.violations(), [d("kind", "unknown_enum_value")]);
}

#[tokio::test]
async fn unknown_or_revoked_key_is_401() {
    let env = Env::seeded().await;
    let e = env
        .client_with("usk_0000000000000000")
        .team_credit_balance()
        .send()
        .await
        .unwrap_err();
    let a = api(e, 401, "unauthenticated");
    assert!(a.details.is_empty());
}

#[tokio::test]
async fn missing_permission_or_plan_is_403() {
    let env = Env::seeded().await;
    let reader = env.client_with(&env.key_with(&[Permission::AnalyticsRead]).await);
    let e = reader.team_credit_balance().send().await.unwrap_err();
    let a = api(e, 403, "permission_denied");
    assert!(a.message.contains("`billing-read` (Billing Read)"), "{a:?}");
    let e = reader
        .set_usage_cap(Scope::Team, 1)
        .send()
        .await
        .unwrap_err();
    let a = api(e, 403, "permission_denied");
    assert!(
        a.message.contains("`billing-write` (Billing Write)"),
        "{a:?}"
    );
    // The reader may still run queries.
    assert_eq!(
        reader
            .analytics()
            .query(sum_query())
            .send()
            .await
            .unwrap()
            .len(),
        1
    );

    let teams_plan = add_team(env.store.as_ref(), "small", Plan::Teams).await;
    let key = make_key(env.store.as_ref(), &teams_plan, &[Permission::BillingRead]).await;
    let e = env
        .client_with(&key)
        .team_credit_balance()
        .send()
        .await
        .unwrap_err();
    let a = api(e, 403, "permission_denied");
    assert!(a.message.contains("enterprise"), "{a:?}");
}

#[tokio::test]
async fn unknown_names_and_paths_are_404() {
    let env = Env::seeded().await;
    let c = env.client();
    let e = c
        .analytics()
        .group_name("nope")
        .query(sum_query())
        .send()
        .await
        .unwrap_err();
    let a = api(e, 404, "not_found");
    assert!(a.message.contains("nope"), "{a:?}");
    let e = c
        .get_usage_config(Scope::User("nobody@t.example".into()))
        .send()
        .await
        .unwrap_err();
    api(e, 404, "not_found");
    let e = c
        .clear_usage_cap(Scope::Group("g-nope".into()))
        .send()
        .await
        .unwrap_err();
    api(e, 404, "not_found");
    let e = c
        .user_page_analytics()
        .group_name("nope")
        .send()
        .await
        .unwrap_err();
    api(e, 404, "not_found");

    // Another team's user is not found either (never 403).
    let other = add_team(env.store.as_ref(), "other", Plan::Enterprise).await;
    let key = make_key(env.store.as_ref(), &other, &[Permission::BillingRead]).await;
    let e = env
        .client_with(&key)
        .get_usage_config(Scope::User("ana@t.example".into()))
        .send()
        .await
        .unwrap_err();
    api(e, 404, "not_found");

    // A base URL with a path the server does not serve.
    let prefixed = Client::builder()
        .base_url(format!("{}/usage", env.server.url()))
        .service_key(&env.key)
        .retry(RetryPolicy::none())
        .build()
        .unwrap();
    let e = prefixed.team_credit_balance().send().await.unwrap_err();
    let a = api(e, 404, "not_found");
    assert!(
        a.message.contains("/usage/api/v1/GetTeamCreditBalance"),
        "{a:?}"
    );
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let env = Env::empty(Config {
        max_body_bytes: 300,
        max_ingest_bytes: 400,
        ..fast_config()
    })
    .await;
    let c = env.client();
    // Under the limit: answered.
    assert_eq!(
        c.analytics().query(sum_query()).send().await.unwrap().len(),
        1
    );
    let mut q = ac::query().select(ac::num_acceptances().sum());
    for i in 0..10 {
        q = q.filter(ac::api_key().eq(&format!("user-key-{i:04}")));
    }
    let e = c
        .analytics()
        .query(q.build().unwrap())
        .send()
        .await
        .unwrap_err();
    let a = api(e, 413, "payload_too_large");
    assert!(a.message.contains("300"), "{a:?}");
    let groups =
        (0..10).map(|i| json!({"group_id": format!("g-{i}"), "group_name": format!("group {i}")}));
    let e = c.ingest("groups").records(groups).send().await.unwrap_err();
    api(e, 413, "payload_too_large");
}

#[tokio::test]
async fn invalid_queries_are_refused_before_sending_as_the_server_would() {
    let env = Env::seeded().await;
    let cases = [
        (
            ac::query()
                .select(ac::num_acceptances().sum())
                .select(ac::language().select()),
            vec![d("query_requests[0].selections", "mixed_aggregation")],
        ),
        (
            // A default alias counts: two `sum_num_acceptances`.
            ac::query()
                .select(ac::num_acceptances().sum())
                .select(ac::num_lines_accepted().sum().alias("x"))
                .select(ac::num_acceptances().sum())
                .group_by(ac::language().group_by("x")),
            vec![
                d("query_requests[0].selections[2].name", "duplicate_alias"),
                d("query_requests[0].aggregations[0].name", "duplicate_alias"),
            ],
        ),
        (
            ac::query()
                .select(ac::language().select())
                .select(ac::ide().select())
                .group_by(ac::language().group_by("language")),
            vec![
                d("query_requests[0].selections[1].field", "ungrouped_field"),
                d("query_requests[0].aggregations[0].name", "duplicate_alias"),
            ],
        ),
        (
            ac::query(),
            vec![d("query_requests[0].selections", "missing_field")],
        ),
    ];
    for (q, want) in cases {
        let wire = q.to_request();
        let e: Error = q.build().unwrap_err().into();
        assert!(matches!(e, Error::InvalidQuery(_)), "{e:?}");
        assert_eq!(e.violations(), want);
        assert_eq!(e.status(), None);
        // The server answers the same request with the same violations.
        let (status, body) = env
            .raw("Analytics", json!({"query_requests": [wire]}))
            .await;
        assert_eq!(status, 400, "{body}");
        let server: Vec<_> = body["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| d(v["path"].as_str().unwrap(), v["rule"].as_str().unwrap()))
            .collect();
        assert_eq!(server, want);
    }
    let e = cmd::query()
        .select(cmd::command_source().count())
        .filter(cmd::command_source().eq("COMMAND_REQUEST_SOURCE_VOICE"))
        .build()
        .unwrap_err();
    assert_eq!(
        e.violations()[0].path(),
        "query_requests[0].filters[0].value"
    );
    assert_eq!(e.violations()[0].rule().as_str(), "unknown_enum_value");
}

/// A server that allows one request a second per key (burst 1).
async fn limited(per_minute: u32) -> Env {
    Env::empty(Config {
        rate: RateConfig {
            per_minute,
            burst: 1,
        },
        ..Config::default()
    })
    .await
}

#[tokio::test]
async fn rate_limited_without_retries() {
    let env = limited(60).await;
    let c = env.client();
    c.team_credit_balance().send().await.unwrap();
    let e = c.team_credit_balance().send().await.unwrap_err();
    assert!(e.is_rate_limited(), "{e:?}");
    assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(e.status(), Some(429));
    assert_eq!(e.code(), Some("resource_exhausted"));
    assert_eq!(
        e.to_string(),
        format!(
            "rate limited (429 resource_exhausted), retry after 1s: {}",
            e.api().unwrap().message
        )
    );
    let Error::RateLimited(error) = e else {
        unreachable!()
    };
    assert_eq!(error.retry_after, Some(Duration::from_secs(1)));
    assert!(error.details.is_empty());
    assert!(error.request_id.is_some());
}

#[tokio::test]
async fn rate_limited_then_retried_after_retry_after() {
    let env = limited(60).await;
    // Empty the key's bucket; the refused call proves it is empty.
    let plain = env.client();
    plain.team_credit_balance().send().await.unwrap();
    assert!(
        plain
            .team_credit_balance()
            .send()
            .await
            .unwrap_err()
            .is_rate_limited()
    );
    let patient = Client::builder()
        .base_url(env.server.url())
        .service_key(&env.key)
        .retry(RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        })
        .build()
        .unwrap();
    // 429 with `Retry-After: 1`, a wait, then the answer.
    let b = patient.team_credit_balance().send().await.unwrap();
    assert_eq!(b.num_seats, 12);
}

#[tokio::test]
async fn a_retry_after_over_the_policy_ends_the_retries() {
    // No refill at all: the server asks for 60 s.
    let env = limited(0).await;
    let c = Client::builder()
        .base_url(env.server.url())
        .service_key(&env.key)
        .retry(RetryPolicy {
            max_attempts: 5,
            max_retry_after: Duration::from_secs(5),
            ..RetryPolicy::default()
        })
        .build()
        .unwrap();
    c.team_credit_balance().send().await.unwrap();
    let e = c.team_credit_balance().send().await.unwrap_err();
    assert!(e.is_rate_limited(), "{e:?}");
    assert_eq!(e.retry_after(), Some(Duration::from_secs(60)));
}

fn quick_retries(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(1),
    }
}

fn fake_client(url: &str, policy: RetryPolicy) -> Client {
    Client::builder()
        .base_url(url)
        .service_key("usk_fake")
        .retry(policy)
        .build()
        .unwrap()
}

const RATE_LIMITED: &str = r#"{"error":"slow down","code":"resource_exhausted","message":"slow down","requestId":"req_fake"}"#;

#[tokio::test]
async fn retries_stop_after_max_attempts() {
    let fake =
        Fake::start(|_| response("429 Too Many Requests", "retry-after: 0\r\n", RATE_LIMITED))
            .await;
    let e = fake_client(&fake.url, quick_retries(3))
        .team_credit_balance()
        .send()
        .await
        .unwrap_err();
    assert_eq!(fake.requests(), 3);
    assert!(e.is_rate_limited(), "{e:?}");
    assert_eq!(e.retry_after(), Some(Duration::ZERO));
    assert_eq!(e.request_id(), Some("req_fake"));
    assert_eq!(e.api().unwrap().message, "slow down");
}

#[tokio::test]
async fn retries_429_and_503_then_succeed() {
    let fake = Fake::start(|n| match n {
        0 => response("429 Too Many Requests", "", RATE_LIMITED),
        1 => response(
            "503 Service Unavailable",
            "retry-after: 0\r\n",
            r#"{"code":"unavailable","message":"shutting down"}"#,
        ),
        _ => response("200 OK", "", r#"{"addOnCreditCap":"42"}"#),
    })
    .await;
    let cap = fake_client(&fake.url, quick_retries(3))
        .get_usage_config(Scope::Team)
        .send()
        .await
        .unwrap();
    // A cap given as a decimal string reads as a number.
    assert_eq!(cap, Some(42));
    assert_eq!(fake.requests(), 3);

    let unavailable = Fake::start(|_| {
        response(
            "503 Service Unavailable",
            "retry-after: 0\r\n",
            r#"{"error":"storage down","code":"unavailable","message":"storage down","requestId":"req_x"}"#,
        )
    })
    .await;
    let e = fake_client(&unavailable.url, quick_retries(2))
        .team_credit_balance()
        .send()
        .await
        .unwrap_err();
    assert_eq!(unavailable.requests(), 2);
    // `Retry-After` of a 503 is kept, as for a 429.
    assert_eq!(e.retry_after(), Some(Duration::ZERO));
    assert!(!e.is_rate_limited());
    let Error::Api(a) = e else { panic!("{e:?}") };
    assert_eq!((a.status, a.code.as_str()), (503, "unavailable"));
    assert_eq!(a.message, "storage down");
}

#[tokio::test]
async fn other_errors_are_not_retried() {
    let fake = Fake::start(|_| response("502 Bad Gateway", "", "<html>bad gateway</html>")).await;
    let e = fake_client(&fake.url, quick_retries(3))
        .team_credit_balance()
        .send()
        .await
        .unwrap_err();
    assert_eq!(fake.requests(), 1);
    let Error::Api(a) = e else { panic!("{e:?}") };
    assert_eq!(a.status, 502);
    assert_eq!(a.code, "");
    assert_eq!(a.message, "<html>bad gateway</html>");
}

#[tokio::test]
async fn a_server_that_stops_answering_times_out() {
    let silent = Fake::stalling("").await;
    let half_body = Fake::stalling(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"numSeats\": ",
    )
    .await;
    for fake in [silent, half_body] {
        let c = Client::builder()
            .base_url(&fake.url)
            .service_key("usk_fake")
            .timeout(Duration::from_millis(200))
            .retry(quick_retries(3))
            .build()
            .unwrap();
        let e = c.team_credit_balance().send().await.unwrap_err();
        assert!(e.is_timeout(), "{e:?}");
        assert!(matches!(e, Error::Timeout(_)), "{e:?}");
        assert_eq!(e.status(), None);
        // A timeout is not retried: the server may have acted on the request.
        assert_eq!(fake.requests(), 1);
    }
}

#[tokio::test]
async fn nothing_listening_is_a_transport_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for policy in [RetryPolicy::none(), quick_retries(3)] {
        let e = fake_client(&format!("http://127.0.0.1:{port}"), policy)
            .team_credit_balance()
            .send()
            .await
            .unwrap_err();
        assert!(matches!(e, Error::Transport(_)), "{e:?}");
        assert!(!e.is_timeout());
        assert_eq!(e.api(), None);
    }
    // A connection closed halfway through the body.
    let cut = Fake::start(|_| {
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"numSeats\": "
            .to_string()
    })
    .await;
    let e = fake_client(&cut.url, quick_retries(3))
        .team_credit_balance()
        .send()
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Transport(_)), "{e:?}");
    assert_eq!(cut.requests(), 1);
}

#[tokio::test]
async fn undecodable_answers_are_decode_errors() {
    let fake = Fake::start(|n| match n {
        0 => response("200 OK", "", r#"{"queryResults": [{"responseItems": ["#),
        1 => response(
            "200 OK",
            "",
            r#"{"queryResults": [{"responseItems": [{"item": 5}]}]}"#,
        ),
        2 => response("200 OK", "", r#"{"numSeats": "twelve"}"#),
        _ => response("200 OK", "", "<html>welcome</html>"),
    })
    .await;
    let c = fake_client(&fake.url, RetryPolicy::none());
    let e = c.analytics().query(sum_query()).send().await.unwrap_err();
    let Error::Decode {
        status,
        path,
        message,
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(
        (*status, path.as_str()),
        (200, "queryResults[0].responseItems")
    );
    assert!(message.contains("EOF"), "{message}");

    let e = c.analytics().query(sum_query()).send().await.unwrap_err();
    let Error::Decode { path, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(path, "queryResults[0].responseItems[0].item");

    let e = c.team_credit_balance().send().await.unwrap_err();
    let Error::Decode { path, message, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(path, "numSeats");
    assert!(message.contains("twelve"), "{message}");

    let e = c.team_credit_balance().send().await.unwrap_err();
    let Error::Decode { status, path, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!((*status, path.as_str()), (200, "."));
    assert_eq!(fake.requests(), 4);
}

#[tokio::test]
async fn values_of_the_wrong_type_are_decode_errors() {
    let env = Env::seeded().await;
    let res = env
        .client()
        .analytics()
        .query(
            ac::query()
                .select(ac::language().count())
                .group_by(ac::language().group_by("lang"))
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let row = res.rows(0).next().unwrap();
    assert_eq!(row.get_u64("count_language").unwrap(), 1);
    let e = row.get_u64("lang").unwrap_err();
    let Error::Decode {
        status,
        path,
        message,
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!((*status, path.as_str()), (200, "lang"));
    assert_eq!(message, "`GO` is not an unsigned integer");
    assert!(matches!(row.get_date("lang"), Err(Error::Decode { .. })));
}

#[tokio::test]
async fn clients_that_cannot_be_built() {
    let build = |b: usage::client::ClientBuilder| match b.build() {
        Err(Error::Build(m)) => m,
        other => panic!("{other:?}"),
    };
    let ok = || {
        Client::builder()
            .base_url("http://127.0.0.1:1")
            .service_key("k")
    };
    assert_eq!(
        build(Client::builder().service_key("k")),
        "no base URL: call .base_url(\"http://host:port\")"
    );
    assert_eq!(
        build(Client::builder().base_url("http://127.0.0.1:1")),
        "no service key: call .service_key(..)"
    );
    assert_eq!(
        build(ok().service_key("")),
        "no service key: call .service_key(..)"
    );
    assert!(build(ok().base_url("127.0.0.1:8080")).contains("127.0.0.1:8080"));
    assert_eq!(
        build(ok().base_url("ftp://h")),
        "base URL `ftp://h` must be an http or https URL"
    );
    assert_eq!(
        build(ok().retry(RetryPolicy {
            max_attempts: 0,
            ..RetryPolicy::default()
        })),
        "retry policy: max_attempts must be at least 1"
    );
    // A call that cannot be made is refused before sending.
    let e = ok().build().unwrap().analytics().send().await.unwrap_err();
    let Error::Build(m) = e else { panic!("{e:?}") };
    assert_eq!(m, "an Analytics call needs at least one .query(..)");
}
