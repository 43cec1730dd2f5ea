//! Snapshots of the wire: one example request and one example response per operation,
//! built from the typed wire structs, the error body, and the rendered message of one
//! violation per rule. Every example request is also read and validated as the server
//! would, so the snapshots show requests the service accepts.
//!
//! Update with `INSTA_UPDATE=always cargo test -p usage-core --test wire_snapshots`, then
//! review every changed `.snap` file against the contract before committing.

use insta::{assert_json_snapshot, assert_snapshot};

use usage_core::ident::Ident;
use usage_core::plan::{AgentSource, CapAction, CapScope, Limits, QueryShape};
use usage_core::schema::{AgentMode, Agg, FilterOp, IdeType, Source, TeamStatus};
use usage_core::time::Timestamp;
use usage_core::validate;
use usage_core::wire::decode::{KindErrors, Request, decode};
use usage_core::wire::*;
use usage_core::{Rule, Violations, load};

fn t(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).expect("an RFC 3339 example")
}

fn s(x: &str) -> Option<String> {
    Some(x.to_string())
}

/// Serializes a request and reads it back as the server does.
fn read<T: Request + serde::Serialize>(req: &T) -> T {
    let body = serde_json::to_vec(req).unwrap();
    let d = decode::<T>(&body).expect("no kind errors");
    assert!(d.violations.is_empty(), "{:?}", d.violations);
    d.request
}

// ---------------------------------------------------------------------------------------
// Analytics

fn analytics_request() -> AnalyticsRequest {
    AnalyticsRequest {
        service_key: s("usk_example"),
        group_name: s("eng"),
        start_timestamp: s("2025-05-01T00:00:00Z"),
        end_timestamp: s("2025-06-01T00:00:00Z"),
        query_requests: vec![
            QueryRequest {
                data_source: Some(Ident::Known(Source::UserData)),
                selections: vec![
                    Selection {
                        field: s("num_acceptances"),
                        name: None,
                        aggregation_function: Some(Ident::Known(Agg::Sum)),
                    },
                    Selection {
                        field: s("distinct_users"),
                        name: s("users"),
                        aggregation_function: Some(Ident::Known(Agg::Count)),
                    },
                ],
                filters: vec![
                    Filter {
                        name: s("date"),
                        filter: Some(Ident::Known(FilterOp::Ge)),
                        value: s("2025-05-01"),
                    },
                    Filter {
                        name: s("api_key"),
                        filter: Some(Ident::Known(FilterOp::Equal)),
                        value: s("k1"),
                    },
                    Filter {
                        name: s("api_key"),
                        filter: Some(Ident::Known(FilterOp::Equal)),
                        value: s("k2"),
                    },
                ],
                aggregations: vec![Aggregation {
                    field: s("language"),
                    name: s("lang"),
                }],
            },
            QueryRequest {
                data_source: Some(Ident::Known(Source::PcwData)),
                selections: vec![Selection {
                    field: s("percent_code_written"),
                    name: None,
                    aggregation_function: None,
                }],
                filters: vec![Filter {
                    name: s("language"),
                    filter: Some(Ident::Known(FilterOp::Equal)),
                    value: s("GO"),
                }],
                aggregations: vec![],
            },
        ],
    }
}

#[test]
fn analytics_request_snapshot() {
    let req = analytics_request();
    assert_json_snapshot!(req);
    let plan = validate::analytics(&read(&req), &Limits::default()).expect("valid");
    assert_eq!(plan.queries[0].shape, QueryShape::Grouped);
    assert_eq!(plan.queries[0].selections[0].alias, "sum_num_acceptances");
    assert_eq!(
        plan.queries[0].filters.len(),
        2,
        "the EQUALs are one IN list"
    );
    assert_eq!(plan.queries[1].shape, QueryShape::Pcw);
}

#[test]
fn analytics_response_snapshot() {
    let item = |pairs: &[(&str, &str)]| ResponseItem {
        item: Item(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
    };
    let resp = AnalyticsResponse {
        query_results: vec![
            QueryResult {
                response_items: vec![
                    item(&[
                        ("sum_num_acceptances", "12"),
                        ("users", "2"),
                        ("lang", "GO"),
                    ]),
                    item(&[
                        ("sum_num_acceptances", "30"),
                        ("users", "1"),
                        ("lang", "PYTHON"),
                    ]),
                ],
            },
            QueryResult {
                response_items: vec![item(&[("percent_code_written", "0.25")])],
            },
            QueryResult {
                response_items: vec![],
            },
        ],
    };
    assert_json_snapshot!(resp);
}

// ---------------------------------------------------------------------------------------
// UserPageAnalytics

#[test]
fn user_page_request_snapshot() {
    let req = UserPageAnalyticsRequest {
        service_key: s("usk_example"),
        group_name: s("eng"),
        start_timestamp: s("2025-05-01T00:00:00Z"),
        end_timestamp: s("2025-06-01T00:00:00Z"),
    };
    assert_json_snapshot!(req);
    let plan = validate::user_page(&read(&req)).expect("valid");
    assert_eq!(plan.group_name.as_deref(), Some("eng"));
    assert_eq!(plan.range.end, Some(t("2025-06-01T00:00:00Z")));
}

#[test]
fn user_page_response_snapshot() {
    let resp = UserPageAnalyticsResponse {
        user_table_stats: vec![
            UserStats {
                name: "Ada".into(),
                email: "ada@example.com".into(),
                last_update_time: Some(t("2025-05-20T09:00:00.25Z")),
                api_key: "k1".into(),
                active_days: 12,
                disable_vendor: None,
                last_autocomplete_usage_time: Some(t("2025-05-20T09:00:00.25Z")),
                last_chat_usage_time: Some(t("2025-05-19T17:30:00Z")),
                last_command_usage_time: Some(t("2025-05-18T08:00:00Z")),
                team_status: Ident::Known(TeamStatus::Approved),
                signup_time: Some(t("2025-01-02T03:04:05Z")),
            },
            UserStats {
                name: "Bob".into(),
                email: "bob@example.com".into(),
                last_update_time: None,
                api_key: "k2".into(),
                active_days: 0,
                disable_vendor: Some(true),
                last_autocomplete_usage_time: None,
                last_chat_usage_time: None,
                last_command_usage_time: None,
                team_status: Ident::Known(TeamStatus::Pending),
                signup_time: Some(t("2025-04-30T00:00:00Z")),
            },
        ],
        error: None,
    };
    assert_json_snapshot!(resp);
}

// ---------------------------------------------------------------------------------------
// AgentAnalytics

#[test]
fn agent_request_snapshot() {
    let req = AgentAnalyticsRequest {
        service_key: s("usk_example"),
        group_name: None,
        start_timestamp: s("2025-05-01T00:00:00Z"),
        end_timestamp: s("2025-05-08T00:00:00Z"),
        emails: vec!["ada@example.com".into(), "bob@example.com".into()],
        ide_types: vec![Ident::Known(IdeType::Editor)],
        query_requests: vec![
            AgentQueryRequest {
                agent_lines: Some(Empty {}),
                ..Default::default()
            },
            AgentQueryRequest {
                agent_runs: Some(Empty {}),
                ..Default::default()
            },
            AgentQueryRequest {
                agent_tool_usage: Some(Empty {}),
                ..Default::default()
            },
        ],
    };
    assert_json_snapshot!(req);
    let plan = validate::agent(&read(&req), &Limits::default()).expect("valid");
    assert_eq!(
        plan.queries,
        [
            AgentSource::Lines,
            AgentSource::Runs,
            AgentSource::ToolUsage
        ]
    );
    assert_eq!(plan.ide_types, [IdeType::Editor]);
}

#[test]
fn agent_response_snapshot() {
    let resp = AgentAnalyticsResponse {
        query_results: vec![
            AgentQueryResult {
                agent_lines: Some(AgentLines {
                    agent_lines: vec![
                        AgentLinesEntry {
                            day: t("2025-05-01T00:00:00Z"),
                            lines_suggested: 120,
                            lines_accepted: 45,
                        },
                        AgentLinesEntry {
                            day: t("2025-05-02T00:00:00Z"),
                            lines_suggested: 7,
                            lines_accepted: 0,
                        },
                    ],
                }),
                ..Default::default()
            },
            AgentQueryResult {
                agent_runs: Some(AgentRuns {
                    agent_runs: vec![
                        AgentRunEntry {
                            day: t("2025-05-01T00:00:00Z"),
                            model: "claude".into(),
                            mode: Ident::Known(AgentMode::Default),
                            messages_sent: 4,
                            agent_id: "c1".into(),
                            prompts_used: 250,
                        },
                        AgentRunEntry {
                            day: t("2025-05-01T00:00:00Z"),
                            model: "gpt".into(),
                            mode: Ident::Known(AgentMode::Unknown),
                            messages_sent: 1,
                            agent_id: "c2".into(),
                            prompts_used: 0,
                        },
                    ],
                }),
                ..Default::default()
            },
            AgentQueryResult {
                agent_tool_usage: Some(AgentToolUsage {
                    agent_tool_usage: vec![
                        AgentToolUsageEntry {
                            tool: "VIEW_FILE".into(),
                            count: 31,
                        },
                        AgentToolUsageEntry {
                            tool: "CODE_ACTION".into(),
                            count: 9,
                        },
                    ],
                }),
                ..Default::default()
            },
        ],
    };
    assert_json_snapshot!(resp);
}

// ---------------------------------------------------------------------------------------
// Caps and balance

#[test]
fn get_usage_config_snapshots() {
    let req = GetUsageConfigRequest {
        service_key: s("usk_example"),
        team_level: None,
        group_id: None,
        user_email: s("ada@example.com"),
    };
    assert_json_snapshot!("get_usage_config_request", req);
    let body = serde_json::to_vec(&req).unwrap();
    let d = decode::<GetUsageConfigRequest>(&body).unwrap();
    assert_eq!(
        validate::get_usage_config(&d.request, &d.given_order),
        Ok(CapScope::User("ada@example.com".into()))
    );
    assert_json_snapshot!(
        "get_usage_config_response",
        GetUsageConfigResponse {
            add_on_credit_cap: Some(500)
        }
    );
    assert_json_snapshot!(
        "get_usage_config_response_no_cap",
        GetUsageConfigResponse {
            add_on_credit_cap: None
        }
    );
}

#[test]
fn usage_config_snapshots() {
    let req = UsageConfigRequest {
        service_key: s("usk_example"),
        clear_add_on_credit_cap: None,
        set_add_on_credit_cap: Some(0),
        team_level: None,
        group_id: s("g-eng"),
        user_email: None,
    };
    assert_json_snapshot!("usage_config_request", req);
    let body = serde_json::to_vec(&req).unwrap();
    let d = decode::<UsageConfigRequest>(&body).unwrap();
    assert_eq!(
        validate::usage_config(&d.request, &d.given_order),
        Ok((CapScope::Group("g-eng".into()), CapAction::Set(0)))
    );
    assert_json_snapshot!("usage_config_response", UsageConfigResponse {});
}

#[test]
fn team_credit_balance_snapshots() {
    let req = GetTeamCreditBalanceRequest {
        service_key: s("usk_example"),
    };
    assert_json_snapshot!("get_team_credit_balance_request", read(&req));
    assert_json_snapshot!(
        "get_team_credit_balance_response",
        GetTeamCreditBalanceResponse {
            prompt_credits_per_seat: 500,
            num_seats: 25,
            add_on_credits_available: 1000,
            add_on_credits_used: 120,
            billing_cycle_start: t("2025-05-15T00:00:00Z"),
            billing_cycle_end: t("2025-06-15T00:00:00Z"),
        }
    );
}

// ---------------------------------------------------------------------------------------
// Ingest (extension)

#[test]
fn ingest_snapshots() {
    let req = IngestRequest {
        service_key: s("usk_example"),
        kind: s("autocomplete"),
        records: vec![serde_json::json!({
            "api_key": "k1",
            "hour": "2025-05-01T13:00:00Z",
            "language": "GO",
            "ide": "vscode",
            "version": "1.10.0",
            "num_acceptances": 5,
            "num_lines_accepted": 12,
            "num_bytes_accepted": "340"
        })],
    };
    assert_json_snapshot!("ingest_request", req);
    let batch = load::ingest(&read(&req), &Limits::default()).expect("valid");
    assert_eq!(batch.records[0].count("num_bytes_accepted"), 340);
    assert_json_snapshot!("ingest_response", IngestResponse { accepted: 1 });
}

// ---------------------------------------------------------------------------------------
// Errors

/// Every violation of an Analytics body, decoder's included.
fn analytics_violations(body: &str) -> Violations {
    let d = decode::<AnalyticsRequest>(body.as_bytes()).expect("no kind errors");
    validate::with_decoded(&d, |r, _| validate::analytics(r, &Limits::default()))
        .expect_err("violations")
}

#[test]
fn error_body_snapshots() {
    let v = analytics_violations(
        r#"{"service_key": "usk_example", "query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [
                {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
                {"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_SUM"}
            ],
            "aggregations": [{"field": "distinct_users", "name": "u"}]
        }]}"#,
    );
    let message = format!("the request has {} invalid fields", v.len());
    assert_json_snapshot!(
        "error_body_400",
        ErrorBody {
            error: message.clone(),
            code: "invalid_argument".into(),
            message,
            details: Some(v.iter().map(ErrorDetail::from).collect()),
            request_id: "req-0001".into(),
        }
    );
    let message = "the key lacks the permission analytics-read (Analytics Read)".to_string();
    assert_json_snapshot!(
        "error_body_403",
        ErrorBody {
            error: message.clone(),
            code: "permission_denied".into(),
            message,
            details: None,
            request_id: "req-0002".into(),
        }
    );
}

#[test]
fn one_rendered_violation_per_rule() {
    let analytics = |q: &str| analytics_violations(&format!(r#"{{"query_requests": [{q}]}}"#));
    let kinds = |body: &str| match decode::<AnalyticsRequest>(body.as_bytes()) {
        Err(KindErrors(v)) => v,
        Ok(_) => panic!("a kind error"),
    };
    let usage_config = |body: &str| {
        let d = decode::<UsageConfigRequest>(body.as_bytes()).unwrap();
        validate::with_decoded(&d, validate::usage_config).expect_err("violations")
    };
    let agent = |body: &str| {
        let d = decode::<AgentAnalyticsRequest>(body.as_bytes()).unwrap();
        validate::with_decoded(&d, |r, _| validate::agent(r, &Limits::default()))
            .expect_err("violations")
    };
    let user = r#""data_source": "QUERY_DATA_SOURCE_USER_DATA""#;
    let cases: Vec<Violations> = vec![
        analytics(&format!(
            r#"{{{user}, "selections": [{{"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_COUNT"}}, {{"field": "language"}}]}}"#
        )),
        analytics(&format!(
            r#"{{{user}, "selections": [{{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}}], "aggregations": [{{"field": "distinct_users", "name": "u"}}]}}"#
        )),
        analytics(&format!(
            r#"{{{user}, "selections": [{{"field": "date UTC-8"}}, {{"field": "language", "name": "date utc-8"}}]}}"#
        )),
        analytics(&format!(
            r#"{{{user}, "selections": [{{"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_SUM"}}]}}"#
        )),
        analytics(&format!(
            r#"{{{user}, "selections": [{{"field": "num_aceptances"}}]}}"#
        )),
        analytics(
            r#"{"data_source": "QUERY_DATA_SOURCE_USER", "selections": [{"field": "api_key"}]}"#,
        ),
        analytics(&format!(r#"{{{user}, "selections": []}}"#)),
        analytics(&format!(
            r#"{{{user}, "selections": [{{"field": "api_key"}}], "filters": [{{"name": "date", "filter": "QUERY_FILTER_GE", "value": "2025-02-30"}}]}}"#
        )),
        analytics(&format!(
            r#"{{{user}, "selections": [{{"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_MEDIAN"}}]}}"#
        )),
        analytics(
            r#"{"data_source": "QUERY_DATA_SOURCE_COMMAND_DATA", "selections": [{"field": "api_key"}], "filters": [{"name": "accepted", "filter": "QUERY_FILTER_GE", "value": "true"}]}"#,
        ),
        analytics(&format!(
            r#"{{{user}, "selections": [{{"field": "ide"}}], "aggregations": [{{"field": "language", "name": "lang"}}]}}"#
        )),
        agent(
            r#"{"group_name": "eng", "emails": ["ada@example.com"], "query_requests": [{"agent_lines": {}}]}"#,
        ),
        usage_config(
            r#"{"team_level": true, "user_email": "ada@example.com", "clear_add_on_credit_cap": true}"#,
        ),
        usage_config(
            r#"{"team_level": true, "set_add_on_credit_cap": 5, "clear_add_on_credit_cap": true}"#,
        ),
        analytics_violations(&format!(
            r#"{{"query_requests": [{}]}}"#,
            vec![format!(r#"{{{user}, "selections": [{{"field": "api_key"}}]}}"#); 21].join(", ")
        )),
        kinds("[1, 2]"),
    ];
    let mut rendered = Vec::new();
    let mut rules = Vec::new();
    for v in &cases {
        assert_eq!(v.len(), 1, "one violation each: {v:?}");
        rendered.push(v[0].to_string());
        rules.push(v[0].rule());
    }
    rules.sort();
    assert_eq!(rules, Rule::ALL, "one case per rule");
    assert_snapshot!("violation_messages", rendered.join("\n"));
}
