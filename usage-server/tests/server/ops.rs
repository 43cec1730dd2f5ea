//! Every operation: answers with specific values, and every error row of the spec.

use serde_json::json;
use usage_core::time::Timestamp;

use crate::common::{Env, TestStore, d};

fn by_language(group: Option<&str>) -> serde_json::Value {
    let mut b = json!({"query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
        "aggregations": [{"field": "language", "name": "lang"}]
    }]});
    if let Some(g) = group {
        b["group_name"] = json!(g);
    }
    b
}

on_every_store!(analytics_answers_grouped_values_in_order);
async fn analytics_answers_grouped_values_in_order(kind: TestStore) {
    let env = Env::new(kind).await;
    let r = env.post("Analytics", by_language(None)).await;
    assert_eq!(
        r.ok().to_string(),
        r#"{"queryResults":[{"responseItems":[{"item":{"sum_num_acceptances":"4","lang":"GO"}},{"item":{"sum_num_acceptances":"8","lang":"PYTHON"}},{"item":{"sum_num_acceptances":"7","lang":"RUST"}}]}]}"#
    );
    let r = env.post("Analytics", by_language(Some("ops"))).await;
    assert_eq!(
        r.ok()["queryResults"][0]["responseItems"],
        json!([{"item": {"sum_num_acceptances": "5", "lang": "PYTHON"}}, {"item": {"sum_num_acceptances": "7", "lang": "RUST"}}])
    );
    // camelCase spellings and the key in the Authorization header.
    let body = json!({"queryRequests": [{"dataSource": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregationFunction": "QUERY_AGGREGATION_MAX"}]}]});
    let r = env
        .send(
            env.client
                .post(env.url("/api/v1/Analytics"))
                .header("content-type", "application/json")
                .bearer_auth(&env.key)
                .body(body.to_string()),
        )
        .await;
    assert_eq!(
        r.ok()["queryResults"][0]["responseItems"][0]["item"]["max_num_acceptances"],
        "7"
    );
}

on_every_store!(analytics_rule_violations_list_every_detail);
async fn analytics_rule_violations_list_every_detail(kind: TestStore) {
    let env = Env::new(kind).await;
    let r = env
        .post("Analytics", json!({"query_requests": [
            {"data_source": "QUERY_DATA_SOURCE_USER_DATA",
             "selections": [
                {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
                {"field": "language"}]},
            {"data_source": "QUERY_DATA_SOURCE_USER_DATA",
             "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "x"}],
             "aggregations": [{"field": "distinct_users", "name": "x"}]},
            {"data_source": "QUERY_DATA_SOURCE_USER_DATA",
             "selections": [{"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_SUM"}]}
        ]}))
        .await;
    assert_eq!(
        r.details(),
        [
            d("query_requests[0].selections", "mixed_aggregation"),
            d(
                "query_requests[1].aggregations[0].field",
                "distinct_in_aggregations"
            ),
            d("query_requests[1].aggregations[0].name", "duplicate_alias"),
            d(
                "query_requests[2].selections[0].aggregation_function",
                "invalid_aggregation"
            ),
        ]
    );
    // An unknown group is 404 after validation.
    let r = env.post("Analytics", by_language(Some("nope"))).await;
    r.error(404, "not_found");
    // A query over the result limit is too_many at the query.
    let env = Env::with_config(
        kind,
        usage_server::http::Config {
            limits: usage_core::plan::Limits {
                result_items: 2,
                ..Default::default()
            },
            ..crate::common::fast_config()
        },
    )
    .await;
    let r = env.post("Analytics", by_language(None)).await;
    assert_eq!(r.details(), [d("query_requests[0]", "too_many")]);
}

on_every_store!(user_page_lists_every_user_and_errors_carry_error);
async fn user_page_lists_every_user_and_errors_carry_error(kind: TestStore) {
    let env = Env::new(kind).await;
    let r = env.post("UserPageAnalytics", json!({})).await;
    let users = r.ok()["userTableStats"].as_array().unwrap().clone();
    let emails: Vec<_> = users.iter().map(|u| u["email"].as_str().unwrap()).collect();
    assert_eq!(emails, ["ana@a", "bob@a", "cy@a"]);
    assert_eq!(
        users[0],
        json!({"name": "Ana", "email": "ana@a", "lastUpdateTime": "2025-05-02T10:00:00Z", "apiKey": "k-ana",
               "activeDays": 2, "lastAutocompleteUsageTime": "2025-05-02T10:00:00Z",
               "lastChatUsageTime": "2025-05-01T12:00:00Z", "teamStatus": "USER_TEAM_STATUS_APPROVED",
               "signupTime": "2025-01-01T00:00:00Z"})
    );
    assert_eq!(users[2]["disableVendor"], true);
    assert_eq!(users[2]["teamStatus"], "USER_TEAM_STATUS_PENDING");
    assert!(users[0].get("disableVendor").is_none());
    let r = env
        .post("UserPageAnalytics", json!({"group_name": "ops", "start_timestamp": "2025-05-02T00:00:00Z", "end_timestamp": "2025-05-03T00:00:00Z"}))
        .await;
    let days: Vec<_> = r.ok()["userTableStats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["email"].as_str().unwrap().to_string(),
                u["activeDays"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(days, [("bob@a".to_string(), 1), ("cy@a".to_string(), 1)]);
    // Invalid timestamp format: 400 with `error`.
    let r = env
        .post("UserPageAnalytics", json!({"start_timestamp": "yesterday"}))
        .await;
    assert_eq!(r.details(), [d("start_timestamp", "invalid_value")]);
    assert!(
        r.body["error"]
            .as_str()
            .unwrap()
            .contains("start_timestamp")
    );
    let r = env
        .post("UserPageAnalytics", json!({"start_timestamp": "2025-05-03T00:00:00Z", "end_timestamp": "2025-05-02T00:00:00Z"}))
        .await;
    assert_eq!(r.details(), [d("end_timestamp", "invalid_value")]);
    // Group not found: 404 with `error`.
    let r = env
        .post("UserPageAnalytics", json!({"group_name": "nope"}))
        .await;
    assert!(
        r.error(404, "not_found")["error"]
            .as_str()
            .unwrap()
            .contains("nope")
    );
}

on_every_store!(agent_analytics_answers_each_source);
async fn agent_analytics_answers_each_source(kind: TestStore) {
    let env = Env::new(kind).await;
    let r = env
        .post("AgentAnalytics", json!({"query_requests": [{"agent_lines": {}}, {"agent_runs": {}}, {"agent_tool_usage": {}}]}))
        .await;
    assert_eq!(
        r.ok()["queryResults"],
        json!([
            {"agentLines": {"agentLines": [
                {"day": "2025-05-01T00:00:00Z", "linesSuggested": "15", "linesAccepted": "4"},
                {"day": "2025-05-02T00:00:00Z", "linesSuggested": "7", "linesAccepted": "7"}]}},
            {"agentRuns": {"agentRuns": [
                {"day": "2025-05-01T00:00:00Z", "model": "m1", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT",
                 "messagesSent": "3", "agentId": "c1", "promptsUsed": "200"},
                {"day": "2025-05-02T00:00:00Z", "model": "m2", "mode": "UNKNOWN", "messagesSent": "1", "agentId": "c2"}]}},
            {"agentToolUsage": {"agentToolUsage": [
                {"tool": "GREP_SEARCH", "count": "9"}, {"tool": "VIEW_FILE", "count": "6"}]}}
        ])
    );
    let r = env
        .post("AgentAnalytics", json!({"emails": ["bob@a", "nobody@a"], "ide_types": ["plugin"], "query_requests": [{"agent_tool_usage": {}}, {"agent_lines": {}}]}))
        .await;
    assert_eq!(
        r.ok()["queryResults"],
        json!([
            {"agentToolUsage": {"agentToolUsage": [{"tool": "GREP_SEARCH", "count": "9"}, {"tool": "VIEW_FILE", "count": "2"}]}},
            {"agentLines": {"agentLines": [{"day": "2025-05-01T00:00:00Z", "linesSuggested": "5"}]}}
        ])
    );
    // group_name with emails is not allowed.
    let r = env
        .post("AgentAnalytics", json!({"group_name": "eng", "emails": ["ana@a"], "query_requests": [{"agent_runs": {}}]}))
        .await;
    assert_eq!(r.details(), [d("emails", "conflicting_fields")]);
    let r = env
        .post("AgentAnalytics", json!({"ide_types": ["web"], "query_requests": [{"agent_runs": {}, "agent_lines": {}}, {}]}))
        .await;
    assert_eq!(
        r.details(),
        [
            d("ide_types[0]", "unknown_enum_value"),
            d("query_requests[0]", "conflicting_fields"),
            d("query_requests[1]", "missing_field"),
        ]
    );
    let r = env
        .post(
            "AgentAnalytics",
            json!({"group_name": "nope", "query_requests": [{"agent_runs": {}}]}),
        )
        .await;
    r.error(404, "not_found");
}

on_every_store!(caps_set_read_clear_and_scope_errors);
async fn caps_set_read_clear_and_scope_errors(kind: TestStore) {
    let env = Env::new(kind).await;
    assert_eq!(
        env.post("GetUsageConfig", json!({"team_level": true}))
            .await
            .ok(),
        &json!({})
    );
    for (scope, value) in [
        (json!({"team_level": true}), 100),
        (json!({"group_id": "g-eng"}), 0),
        (json!({"user_email": "ana@a"}), 1_000_000_000),
    ] {
        let mut set = scope.clone();
        set["set_add_on_credit_cap"] = json!(value);
        let r = env.post("UsageConfig", set).await;
        assert_eq!(r.ok(), &json!({}));
        assert_eq!(r.text, "{}");
        let r = env.post("GetUsageConfig", scope.clone()).await;
        assert_eq!(r.ok(), &json!({"addOnCreditCap": value}));
    }
    // Exactly that scope: the group has no cap of its own.
    assert_eq!(
        env.post("GetUsageConfig", json!({"group_id": "g-ops"}))
            .await
            .ok(),
        &json!({})
    );
    // Decimal strings and camelCase; false/"" mean not given.
    let r = env
        .post("UsageConfig", json!({"setAddOnCreditCap": "7", "team_level": false, "userEmail": "bob@a", "group_id": ""}))
        .await;
    r.ok();
    assert_eq!(
        env.post("GetUsageConfig", json!({"user_email": "bob@a"}))
            .await
            .ok(),
        &json!({"addOnCreditCap": 7})
    );
    // Clear, twice (clearing an unset cap succeeds).
    for _ in 0..2 {
        let r = env
            .post(
                "UsageConfig",
                json!({"clear_add_on_credit_cap": true, "user_email": "bob@a"}),
            )
            .await;
        assert_eq!(r.ok(), &json!({}));
    }
    assert_eq!(
        env.post("GetUsageConfig", json!({"user_email": "bob@a"}))
            .await
            .ok(),
        &json!({})
    );
    // The audit log holds every change.
    let log = env.store.audit(&env.team).await.unwrap();
    let got: Vec<_> = log
        .iter()
        .filter_map(|e| match &e.change {
            usage_server::store::Change::Cap { scope, old, new } => {
                Some((scope.label(), *old, *new))
            }
            // The team's creation and its keys.
            usage_server::store::Change::Admin { .. } => None,
            other => panic!("not a cap change: {other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            ("team".to_string(), None, Some(100)),
            ("group:g-eng".to_string(), None, Some(0)),
            ("user:ana@a".to_string(), None, Some(1_000_000_000)),
            ("user:bob@a".to_string(), None, Some(7)),
            ("user:bob@a".to_string(), Some(7), None),
            ("user:bob@a".to_string(), None, None),
        ]
    );
    // Scope errors.
    let r = env.post("GetUsageConfig", json!({})).await;
    assert_eq!(r.details(), [d("", "scope")]);
    let r = env
        .post(
            "GetUsageConfig",
            json!({"user_email": "ana@a", "team_level": true, "group_id": "g-eng"}),
        )
        .await;
    assert_eq!(
        r.details(),
        [d("team_level", "scope"), d("group_id", "scope")]
    );
    let r = env
        .post("UsageConfig", json!({"set_add_on_credit_cap": 1}))
        .await;
    assert_eq!(r.details(), [d("", "scope")]);
    let r = env
        .post(
            "UsageConfig",
            json!({"group_id": "g-eng", "user_email": "ana@a", "set_add_on_credit_cap": 1}),
        )
        .await;
    assert_eq!(r.details(), [d("user_email", "scope")]);
    // Action errors.
    let r = env.post("UsageConfig", json!({"team_level": true})).await;
    assert_eq!(r.details(), [d("", "action")]);
    let r = env.post("UsageConfig", json!({"team_level": true, "set_add_on_credit_cap": 1, "clear_add_on_credit_cap": true})).await;
    assert_eq!(r.details(), [d("clear_add_on_credit_cap", "action")]);
    for bad in [json!(-1), json!(1_000_000_001), json!(1.5), json!("")] {
        let r = env
            .post(
                "UsageConfig",
                json!({"team_level": true, "set_add_on_credit_cap": bad}),
            )
            .await;
        assert_eq!(
            r.details(),
            [d("set_add_on_credit_cap", "invalid_value")],
            "{bad}"
        );
    }
    // Unknown group id or e-mail: 404.
    for op in ["GetUsageConfig", "UsageConfig"] {
        let mut body = json!({"group_id": "g-nope"});
        if op == "UsageConfig" {
            body["set_add_on_credit_cap"] = json!(1);
        }
        let r = env.post(op, body).await;
        assert!(
            r.error(404, "not_found")["message"]
                .as_str()
                .unwrap()
                .contains("g-nope")
        );
        let mut body = json!({"user_email": "ANA@a"});
        if op == "UsageConfig" {
            body["clear_add_on_credit_cap"] = json!(true);
        }
        env.post(op, body).await.error(404, "not_found");
    }
    // Nothing more was audited: the six cap changes, beside the team's creation and key.
    let caps = env
        .store
        .audit(&env.team)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.change, usage_server::store::Change::Cap { .. }))
        .count();
    assert_eq!(caps, 6);
}

on_every_store!(credit_balance_needs_the_enterprise_plan);
async fn credit_balance_needs_the_enterprise_plan(kind: TestStore) {
    let env = Env::new(kind).await;
    let r = env.post("GetTeamCreditBalance", json!({})).await;
    let b = r.ok();
    let today = Timestamp::now().date().start().to_rfc3339();
    assert_eq!(b["promptCreditsPerSeat"], 500);
    assert_eq!(b["numSeats"], 12);
    assert_eq!(b["addOnCreditsAvailable"], 0);
    assert_eq!(b["addOnCreditsUsed"], 0);
    assert_eq!(b["billingCycleStart"], today);
    assert_eq!(b.as_object().unwrap().len(), 6);
    // Billing records change only their fields; a past cycle rolls forward.
    let r = env
        .post("Ingest", json!({"kind": "billing", "records": [{"add_on_credits_used": 30, "add_on_credits_available": 90,
            "billing_cycle_start": "2020-01-15T00:00:00Z", "billing_cycle_end": "2020-02-15T00:00:00Z"}]}))
        .await;
    assert_eq!(r.ok(), &json!({"accepted": 1}));
    let b = env
        .post("GetTeamCreditBalance", json!({}))
        .await
        .ok()
        .clone();
    assert_eq!(
        (
            b["numSeats"].as_i64(),
            b["addOnCreditsAvailable"].as_i64(),
            b["addOnCreditsUsed"].as_i64()
        ),
        (Some(12), Some(90), Some(0))
    );
    let start = Timestamp::parse_rfc3339(b["billingCycleStart"].as_str().unwrap()).unwrap();
    let end = Timestamp::parse_rfc3339(b["billingCycleEnd"].as_str().unwrap()).unwrap();
    let now = Timestamp::now();
    assert!(start <= now && now < end, "{b}");
    assert!(
        b["billingCycleStart"]
            .as_str()
            .unwrap()
            .ends_with("-15T00:00:00Z"),
        "{b}"
    );
    // A team on another plan: 403 naming the plan.
    let other =
        crate::common::add_team(env.store.as_ref(), "P", usage_core::schema::Plan::Pro).await;
    let key = crate::common::make_key(env.store.as_ref(), &other, &crate::common::ALL).await;
    let r = env.post_as(&key, "GetTeamCreditBalance", json!({})).await;
    let msg = r.error(403, "permission_denied")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("`enterprise`") && msg.contains("`pro`"),
        "{msg}"
    );
    // The plan check comes before validation.
    env.post_as(&key, "GetTeamCreditBalance", json!({"bogus": 1}))
        .await
        .error(403, "permission_denied");
    let r = env.post("GetTeamCreditBalance", json!({"bogus": 1})).await;
    assert_eq!(r.details(), [d("bogus", "unknown_field")]);
}

on_every_store!(ingest_loads_records_all_or_nothing);
async fn ingest_loads_records_all_or_nothing(kind: TestStore) {
    let env = Env::new(kind).await;
    let rec = |k: &str, n: i64| {
        json!({"api_key": k, "hour": "2025-06-01T10:00:00Z", "language": "ZIG", "ide": "vscode",
                                       "version": "1", "num_acceptances": n, "num_lines_accepted": 0, "num_bytes_accepted": 0})
    };
    let r = env
        .post("Ingest", json!({"kind": "autocomplete", "records": [rec("k-ana", 1), {"api_key": "k-bob"}, rec("k-bob", -1)]}))
        .await;
    let details = r.details();
    assert_eq!(details[0], d("records[1].hour", "missing_field"));
    assert_eq!(
        details.last().unwrap(),
        &d("records[2].num_acceptances", "invalid_value")
    );
    let zig = json!({"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
        "filters": [{"name": "language", "filter": "QUERY_FILTER_EQUAL", "value": "ZIG"}]}]});
    let sum = |r: &crate::common::Reply| {
        r.ok()["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"].clone()
    };
    assert_eq!(sum(&env.post("Analytics", zig.clone()).await), "0");
    let r = env.post("Ingest", json!({"kind": "autocomplete", "records": [rec("k-ana", 1), rec("k-bob", 2), rec("k-ana", 5)]})).await;
    assert_eq!(r.ok(), &json!({"accepted": 3}));
    assert_eq!(sum(&env.post("Analytics", zig.clone()).await), "7");
    assert_eq!(
        env.post("Ingest", json!({"kind": "chat", "records": []}))
            .await
            .ok(),
        &json!({"accepted": 0})
    );
    let r = env
        .post("Ingest", json!({"kind": "autocompletes", "records": []}))
        .await;
    assert_eq!(r.details(), [d("kind", "unknown_enum_value")]);
    // A user taking another user's api_key is refused.
    let r = env.post("Ingest", json!({"kind": "users", "records": [{"email": "new@a", "name": "N", "api_key": "k-ana"}]})).await;
    assert_eq!(r.details(), [d("records[0].api_key", "invalid_value")]);
    // Too many records.
    let env2 = Env::with_config(
        kind,
        usage_server::http::Config {
            limits: usage_core::plan::Limits {
                ingest_records: 2,
                ..Default::default()
            },
            ..crate::common::fast_config()
        },
    )
    .await;
    let r = env2
        .post(
            "Ingest",
            json!({"kind": "autocomplete", "records": [rec("a", 1), rec("b", 1), rec("c", 1)]}),
        )
        .await;
    assert_eq!(r.details(), [d("records", "too_many")]);
}

on_every_store!(demo_data_answers_the_printed_curl_query);
async fn demo_data_answers_the_printed_curl_query(kind: TestStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = usage_server::store::open(&kind.fresh_spec(dir.path()))
        .await
        .unwrap();
    let team = usage_server::demo::ensure(store.as_ref(), Timestamp::now())
        .await
        .unwrap();
    // A second call finds the demo team instead of filling again.
    assert_eq!(
        usage_server::demo::ensure(store.as_ref(), Timestamp::now())
            .await
            .unwrap(),
        team
    );
    let key = crate::common::make_key(store.as_ref(), &team, &crate::common::ALL).await;
    let server = usage_server::http::spawn(
        store.clone(),
        crate::common::fast_config(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let res = client
        .post(format!("{}/api/v1/Analytics", server.url()))
        .header("content-type", "application/json")
        .body(usage_server::demo::curl_body(&key))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let v: serde_json::Value = res.json().await.unwrap();
    let langs: Vec<_> = v["queryResults"][0]["responseItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item"]["language"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        langs,
        [
            "CPP",
            "GO",
            "JAVA",
            "KOTLIN",
            "PYTHON",
            "RUST",
            "SQL",
            "TYPESCRIPT"
        ]
    );
    let users = client
        .post(format!("{}/api/v1/UserPageAnalytics", server.url()))
        .header("content-type", "application/json")
        .body(json!({"service_key": key, "group_name": "engineering"}).to_string())
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert!(users["userTableStats"].as_array().unwrap().len() >= 40);
    let bal = client
        .post(format!("{}/api/v1/GetTeamCreditBalance", server.url()))
        .header("content-type", "application/json")
        .body(json!({"service_key": key}).to_string())
        .send()
        .await
        .unwrap()
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(bal["addOnCreditsUsed"], 2500);
    server.shutdown().await;
}
