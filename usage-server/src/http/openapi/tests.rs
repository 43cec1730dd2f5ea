use serde_json::{Value, json};
use usage_core::schema::records::KINDS;
use usage_core::schema::{
    AgentMode, Agg, ChatIntent, CommandSource, FilterOp, IdeType, Permission, Plan, ProviderSource,
    SOURCES, Source, TeamStatus, Tool,
};
use usage_core::time::Timestamp;
use usage_core::wire::*;

use super::*;

/// `docs/openapi.json` is the generator's output; `UPDATE_DOCS=1` rewrites it.
#[test]
fn openapi_docs_are_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
    let want = serde_json::to_string_pretty(&document()).unwrap() + "\n";
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(path, &want).expect("write docs/openapi.json");
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        have == want,
        "docs/openapi.json is stale: run UPDATE_DOCS=1 cargo test -p usage-server --lib -- openapi_docs_are_current"
    );
}

/// Every `$ref` of `v`, with its JSON pointer resolved in `doc`.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                out.push(r);
            }
            m.values().for_each(|x| refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

fn resolve<'a>(doc: &'a Value, r: &str) -> Option<&'a Value> {
    doc.pointer(r.strip_prefix('#')?)
}

#[test]
fn openapi_has_every_operation_and_every_ref_resolves() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    for op in Op::ALL {
        let post = &doc["paths"][format!("/api/v1/{}", op.name())]["post"];
        assert_eq!(post["operationId"], op.name());
        assert!(post["requestBody"]["content"]["application/json"]["schema"].is_object());
        assert!(post["responses"]["200"].is_object());
        for code in ["400", "401", "403", "413", "415", "429", "503"] {
            assert!(post["responses"][code].is_object(), "{} {code}", op.name());
        }
    }
    use crate::http::metrics::Format;
    assert!(Format::Classic.content_type().starts_with(METRICS[0]));
    assert!(Format::OpenMetrics.content_type().starts_with(METRICS[1]));
    let analytics = &doc["paths"]["/api/v1/Analytics"]["post"]["responses"]["200"]["content"];
    for f in usage_core::wire::export::Format::ALL {
        let media = f.content_type().split(';').next().unwrap();
        assert!(analytics[media].is_object(), "{media}");
    }
    for path in ["/healthz", PATH, "/metrics"] {
        for m in ["get", "head"] {
            assert!(doc["paths"][path][m].is_object(), "{m} {path}");
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 50);
    for r in all {
        assert!(resolve(&doc, r).is_some(), "{r} does not resolve");
    }
    // operationIds are unique.
    let mut ids: Vec<String> = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|i| i.as_object().unwrap().values())
        .map(|o| o["operationId"].as_str().unwrap().to_string())
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n);
}

#[test]
fn openapi_names_every_identifier_and_field_of_the_tables() {
    let text = document().to_string();
    let quoted = |s: &str| text.contains(&format!("\"{s}\""));
    let lists: [&[&str]; 11] = [
        Source::IDENTIFIERS,
        Agg::IDENTIFIERS,
        FilterOp::IDENTIFIERS,
        ChatIntent::IDENTIFIERS,
        CommandSource::IDENTIFIERS,
        ProviderSource::IDENTIFIERS,
        AgentMode::IDENTIFIERS,
        IdeType::IDENTIFIERS,
        TeamStatus::IDENTIFIERS,
        Plan::IDENTIFIERS,
        Permission::IDENTIFIERS,
    ];
    for id in lists.iter().flat_map(|l| l.iter()).chain(Tool::IDENTIFIERS) {
        assert!(quoted(id), "{id}");
    }
    for r in usage_core::Rule::ALL {
        assert!(quoted(r.as_str()), "{r}");
    }
    let doc = document();
    for s in SOURCES {
        let q = &doc["components"]["schemas"][format!("Query_{}", s.source.as_str())];
        let sel = q["properties"]["selections"]["items"]["properties"]["field"].to_string();
        for f in s.fields.iter().filter(|f| f.select && !f.is_local_date()) {
            assert!(sel.contains(&format!("\"{}\"", f.name)), "{}", f.name);
        }
    }
    for k in KINDS {
        let r = &doc["components"]["schemas"][format!("Record_{}", k.name)]["properties"];
        for f in k.fields {
            assert!(r[f.name].is_object(), "{}.{}", k.name, f.name);
        }
    }
}

// -----------------------------------------------------------------------------------------
// A small JSON Schema checker (the keywords the document uses, except `format` and
// `pattern`): enough to check that what the server sends and takes fits the document.

fn check(doc: &Value, schema: &Value, v: &Value, at: &str, errs: &mut Vec<String>) {
    let Some(s) = schema.as_object() else { return };
    let mut fail = |m: String| errs.push(format!("{at}: {m}"));
    if let Some(Value::String(r)) = s.get("$ref") {
        check(doc, resolve(doc, r).expect("ref resolves"), v, at, errs);
        return;
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            "array" => v.is_array(),
            "object" => v.is_object(),
            _ => false,
        });
        if !ok {
            fail(format!("{v} is not {t}"));
            return;
        }
    }
    if let Some(Value::Array(e)) = s.get("enum")
        && !e.contains(v)
    {
        fail(format!("{v} is not one of {}", Value::Array(e.clone())));
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        fail(format!("{v} is not {c}"));
    }
    if let (Some(min), Some(x)) = (s.get("minLength").and_then(Value::as_u64), v.as_str())
        && (x.chars().count() as u64) < min
    {
        fail(format!("{v} is too short"));
    }
    if let Some(a) = v.as_array() {
        if let Some(min) = s.get("minItems").and_then(Value::as_u64)
            && (a.len() as u64) < min
        {
            fail("too few items".into());
        }
        if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
            && (a.len() as u64) > max
        {
            fail("too many items".into());
        }
        if let Some(items) = s.get("items") {
            for (i, x) in a.iter().enumerate() {
                check(doc, items, x, &format!("{at}[{i}]"), errs);
            }
        }
    }
    if let Some(o) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(req)) = s.get("required") {
            for r in req {
                if !o.contains_key(r.as_str().unwrap()) {
                    errs.push(format!("{at}: {r} is required"));
                }
            }
        }
        if let Some(n) = s.get("minProperties").and_then(Value::as_u64)
            && (o.len() as u64) < n
        {
            errs.push(format!("{at}: too few properties"));
        }
        if let Some(n) = s.get("maxProperties").and_then(Value::as_u64)
            && (o.len() as u64) > n
        {
            errs.push(format!("{at}: too many properties"));
        }
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(p) => check(doc, p, x, &format!("{at}.{k}"), errs),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => errs.push(format!("{at}: unknown property {k}")),
                    Some(extra @ Value::Object(_)) => {
                        check(doc, extra, x, &format!("{at}.{k}"), errs)
                    }
                    _ => {}
                },
            }
        }
    }
    if let Some(Value::Array(all)) = s.get("allOf") {
        for sub in all {
            check(doc, sub, v, at, errs);
        }
    }
    let matching = |subs: &Vec<Value>| {
        subs.iter()
            .filter(|sub| {
                let mut e = Vec::new();
                check(doc, sub, v, at, &mut e);
                e.is_empty()
            })
            .count()
    };
    if let Some(Value::Array(any)) = s.get("anyOf")
        && matching(any) == 0
    {
        errs.push(format!("{at}: {v} matches no anyOf branch"));
    }
    if let Some(Value::Array(one)) = s.get("oneOf") {
        let n = matching(one);
        if n != 1 {
            errs.push(format!("{at}: {v} matches {n} oneOf branches"));
        }
    }
    if let Some(not) = s.get("not") {
        let mut e = Vec::new();
        check(doc, not, v, at, &mut e);
        if e.is_empty() {
            errs.push(format!("{at}: matches `not`"));
        }
    }
}

fn fits(doc: &Value, schema: &str, v: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    check(doc, &schema_ref(schema), v, "", &mut errs);
    errs
}

#[test]
fn openapi_checker_refuses_what_the_document_refuses() {
    let doc = document();
    for (schema, bad) in [
        ("AnalyticsRequest", json!({"query_requests": []})),
        ("AnalyticsRequest", json!({"nope": 1})),
        (
            "AnalyticsRequest",
            json!({"query_requests": [{"data_source": "QUERY_DATA_SOURCE_PCW_DATA", "selections": [{"field": "api_key"}]}]}),
        ),
        ("IngestRequest", json!({"kind": "nope", "records": []})),
        (
            "IngestRequest",
            json!({"kind": "groups", "records": [{"group_id": "g"}]}),
        ),
        ("UsageConfigResponse", json!({"a": 1})),
        (
            "GetUsageConfigRequest",
            json!({"team_level": true, "groupId": "g"}),
        ),
        ("GetUsageConfigRequest", json!({"team_level": false})),
        (
            "UsageConfigRequest",
            json!({"team_level": true, "clear_add_on_credit_cap": true, "set_add_on_credit_cap": 1}),
        ),
        (
            "AgentAnalyticsRequest",
            json!({"group_name": "g", "emails": ["a"], "query_requests": [{"agent_runs": {}}]}),
        ),
        (
            "AgentAnalyticsRequest",
            json!({"query_requests": [{"agent_runs": {}, "agentLines": {}}]}),
        ),
    ] {
        assert!(!fits(&doc, schema, &bad).is_empty(), "{schema}: {bad}");
    }
}

/// Requests the server answers 200, in both spellings, fit the document.
#[test]
fn openapi_takes_what_the_server_takes() {
    let doc = document();
    let cases = [
        (
            "AnalyticsRequest",
            json!({"service_key": "k", "group_name": null, "start_timestamp": "",
                "query_requests": [
                    {"data_source": "QUERY_DATA_SOURCE_USER_DATA",
                     "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
                                    {"field": "date UTC-8", "aggregation_function": "QUERY_AGGREGATION_COUNT", "name": "d"}],
                     "filters": [{"name": "date", "filter": "QUERY_FILTER_GE", "value": "2025-01-01"},
                                 {"name": "version", "filter": "QUERY_FILTER_EQUAL", "value": ""}],
                     "aggregations": [{"field": "language", "name": "lang"}]},
                    {"data_source": "QUERY_DATA_SOURCE_PCW_DATA",
                     "selections": [{"field": "percent_code_written"}], "aggregations": []},
                    {"data_source": "QUERY_DATA_SOURCE_AGENT_DATA",
                     "selections": [{"field": "metadata"}, {"field": "flex_credits_used"}]}]}),
        ),
        (
            "AnalyticsRequest",
            json!({"serviceKey": "k", "groupName": "g", "queryRequests": [
                {"dataSource": "QUERY_DATA_SOURCE_CHAT_DATA",
                 "selections": [{"field": "chat_accepted", "aggregationFunction": "QUERY_AGGREGATION_SUM"}],
                 "filters": [{"name": "latest_intent_type", "filter": "QUERY_FILTER_EQUAL", "value": "CHAT_INTENT_GENERIC"}]}]}),
        ),
        ("UserPageAnalyticsRequest", json!({"service_key": "k"})),
        (
            "UserPageAnalyticsRequest",
            json!({"serviceKey": "k", "startTimestamp": "2025-01-01T00:00:00Z", "endTimestamp": null}),
        ),
        (
            "AgentAnalyticsRequest",
            json!({"service_key": "k", "emails": ["a@b.c", ""], "ide_types": ["editor"],
                "query_requests": [{"agent_lines": {}}, {"agentRuns": {}}, {"agent_tool_usage": {}, "agent_runs": null}]}),
        ),
        (
            "GetUsageConfigRequest",
            json!({"service_key": "k", "team_level": false, "user_email": "a@b.c"}),
        ),
        (
            "UsageConfigRequest",
            json!({"serviceKey": "k", "teamLevel": true, "setAddOnCreditCap": "500"}),
        ),
        (
            "UsageConfigRequest",
            json!({"service_key": "k", "group_id": "g", "clear_add_on_credit_cap": true, "set_add_on_credit_cap": null}),
        ),
        ("GetTeamCreditBalanceRequest", json!({"service_key": "k"})),
        (
            "AnalyticsRequest",
            json!({"queryRequests": [{"dataSource": "QUERY_DATA_SOURCE_AGENT_DATA", "data_source": null,
                "selections": [{"field": "ide"}]}], "query_requests": []}),
        ),
        (
            "AgentAnalyticsRequest",
            json!({"queryRequests": [{"agentLines": {}}], "query_requests": null, "group_name": "", "emails": ["a"]}),
        ),
        ("GetTeamCreditBalanceRequest", json!({})),
        (
            "IngestRequest",
            json!({"service_key": "k", "kind": "users", "records": [
                {"email": "a@b.c", "name": "A", "apiKey": "x", "team_status": null, "groups": ["g"]}]}),
        ),
        (
            "IngestRequest",
            json!({"service_key": "k", "kind": "agent_runs", "records": [
                {"api_key": "x", "timestamp": "2025-05-01T13:00:00Z", "ide_type": "editor", "model": "m",
                 "mode": "UNKNOWN", "messages_sent": "3", "agent_id": "a", "prompts_used": 0}]}),
        ),
        (
            "IngestRequest",
            json!({"serviceKey": "k", "kind": "billing", "records": []}),
        ),
    ];
    for (schema, v) in cases {
        let e = fits(&doc, schema, &v);
        assert!(e.is_empty(), "{schema}: {v}: {e:?}");
    }
}

/// What the server sends fits the document: every response type, filled in.
#[test]
fn openapi_describes_what_the_server_sends() {
    let doc = document();
    let t = Timestamp::parse_rfc3339("2025-05-01T13:00:00Z").unwrap();
    let full_user = UserStats {
        name: "A".into(),
        email: "a@b.c".into(),
        last_update_time: Some(t),
        api_key: "k".into(),
        active_days: 3,
        disable_vendor: Some(true),
        last_autocomplete_usage_time: Some(t),
        last_chat_usage_time: Some(t),
        last_command_usage_time: Some(t),
        team_status: usage_core::Ident::Known(TeamStatus::Approved),
        signup_time: Some(t),
    };
    let cases: Vec<(&str, Value)> = vec![
        (
            "AnalyticsResponse",
            serde_json::to_value(AnalyticsResponse {
                query_results: vec![QueryResult {
                    response_items: vec![ResponseItem {
                        item: Item(vec![("sum_x".into(), "3".into())]),
                    }],
                }],
            })
            .unwrap(),
        ),
        (
            "UserPageAnalyticsResponse",
            serde_json::to_value(UserPageAnalyticsResponse {
                user_table_stats: vec![full_user],
                error: None,
            })
            .unwrap(),
        ),
        (
            "AgentAnalyticsResponse",
            serde_json::to_value(AgentAnalyticsResponse {
                query_results: vec![
                    AgentQueryResult {
                        agent_lines: Some(AgentLines {
                            agent_lines: vec![AgentLinesEntry {
                                day: t,
                                lines_suggested: 3,
                                lines_accepted: 2,
                            }],
                        }),
                        ..Default::default()
                    },
                    AgentQueryResult {
                        agent_runs: Some(AgentRuns {
                            agent_runs: vec![AgentRunEntry {
                                day: t,
                                model: "m".into(),
                                mode: usage_core::Ident::Known(AgentMode::Default),
                                messages_sent: 1,
                                agent_id: "a".into(),
                                prompts_used: 100,
                            }],
                        }),
                        ..Default::default()
                    },
                    AgentQueryResult {
                        agent_tool_usage: Some(AgentToolUsage {
                            agent_tool_usage: vec![AgentToolUsageEntry {
                                tool: "MCP_TOOL".into(),
                                count: 4,
                            }],
                        }),
                        ..Default::default()
                    },
                ],
            })
            .unwrap(),
        ),
        (
            "GetUsageConfigResponse",
            serde_json::to_value(GetUsageConfigResponse {
                add_on_credit_cap: Some(0),
            })
            .unwrap(),
        ),
        (
            "GetUsageConfigResponse",
            serde_json::to_value(GetUsageConfigResponse::default()).unwrap(),
        ),
        (
            "UsageConfigResponse",
            serde_json::to_value(UsageConfigResponse {}).unwrap(),
        ),
        (
            "GetTeamCreditBalanceResponse",
            serde_json::to_value(GetTeamCreditBalanceResponse {
                prompt_credits_per_seat: 500,
                num_seats: 12,
                add_on_credits_available: 0,
                add_on_credits_used: 0,
                billing_cycle_start: t,
                billing_cycle_end: t,
            })
            .unwrap(),
        ),
        (
            "IngestResponse",
            serde_json::to_value(IngestResponse { accepted: 2 }).unwrap(),
        ),
    ];
    for (schema, v) in cases {
        let e = fits(&doc, schema, &v);
        assert!(e.is_empty(), "{schema}: {v}: {e:?}");
        // And the schema names every key the wire type sends (no undocumented field).
        let props = doc["components"]["schemas"][schema]["properties"].clone();
        for (k, _) in v.as_object().unwrap() {
            assert!(props[k].is_object(), "{schema}.{k} is not documented");
        }
    }
    for code in Code::ALL {
        let mut e = crate::error::ApiError::new(*code, "m");
        if *code == Code::InvalidArgument {
            e = crate::error::ApiError::invalid(
                &usage_core::Violation::new(
                    usage_core::JsonPath::root(),
                    usage_core::Rule::MalformedJson,
                    "x",
                )
                .into(),
            );
        }
        let body = serde_json::to_value(e.body("rid")).unwrap();
        let schema =
            &doc["components"]["responses"][code.as_str()]["content"]["application/json"]["schema"];
        let mut errs = Vec::new();
        check(&doc, schema, &body, "", &mut errs);
        assert!(errs.is_empty(), "{code:?}: {body}: {errs:?}");
    }
}

/// `GET /openapi.json` (and HEAD) answers the document without a key; other methods 405.
#[tokio::test]
async fn openapi_is_served_without_a_key() {
    let store = std::sync::Arc::new(crate::store::memory::MemoryStore::new());
    let server = crate::http::spawn(
        store,
        crate::http::Config::default(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let url = format!("{}{PATH}", server.url());
    let c = reqwest::Client::new();
    let r = c.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/json");
    assert!(r.headers().contains_key("x-request-id"));
    assert_eq!(r.json::<Value>().await.unwrap(), document());
    let r = c.head(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.bytes().await.unwrap().is_empty());
    for m in [reqwest::Method::POST, reqwest::Method::DELETE] {
        let r = c.request(m, &url).send().await.unwrap();
        assert_eq!(r.status(), 405);
        assert_eq!(r.headers()["allow"], "GET, HEAD");
        assert_eq!(
            r.json::<Value>().await.unwrap()["code"],
            "method_not_allowed"
        );
    }
    server.shutdown().await;
}

/// docs/openapi.md's table of every path's statuses is the document's; `UPDATE_DOCS=1`
/// rewrites it.
#[test]
fn openapi_md_is_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.md");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let (begin, end) = statuses::MARKERS;
    let block = format!("{begin}{}{end}", statuses::table(&document()));
    let (a, b) = (text.find(begin), text.find(end));
    let current = match (a, b) {
        (Some(a), Some(b)) => &text[a..b + end.len()],
        _ => "",
    };
    if current != block && std::env::var_os("UPDATE_DOCS").is_some() {
        let (a, b) = (a.expect("begin marker"), b.expect("end marker"));
        let updated = format!("{}{block}{}", &text[..a], &text[b + end.len()..]);
        std::fs::write(path, updated).expect("write docs/openapi.md");
        return;
    }
    assert_eq!(
        current, block,
        "docs/openapi.md is stale: run UPDATE_DOCS=1 cargo test -p usage-server --lib -- openapi_md_is_current"
    );
    // One row per operation; users/activity answers 404 for an unknown group.
    let ops = doc_operations(&document());
    // The two markers, the header and its rule, and a row per operation.
    assert_eq!(block.lines().count(), 4 + ops);
    let activity = block
        .lines()
        .find(|l| l.starts_with("| `/api/v2/users/activity` | GET |"))
        .expect("users/activity's row");
    assert!(activity.contains("| 200 OK, 304 Not Modified, 400 `invalid_argument`"));
    assert!(activity.contains("404 `not_found`"), "{activity}");
}

/// The number of operations (path and method) of `doc`.
fn doc_operations(doc: &Value) -> usize {
    doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|i| i.as_object().unwrap().len())
        .sum()
}

/// Every schema (object) of `v`, with the JSON pointer it is at, not through `$ref`s.
fn schemas_in<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(m) => {
            out.push((at.clone(), v));
            for (k, x) in m {
                schemas_in(x, format!("{at}/{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                schemas_in(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// What openapi-python-client 0.29 cannot read (issue 31), which the document avoids
/// while staying as exact: an array without `items`, a boolean or number `const`, an
/// `allOf` of a schema that is not an object, an error response that narrows
/// `ErrorBody`'s `code` enum with a `const`, and an inline object under both spellings of
/// a field (the two would be two generated classes of one name). The Python client's own
/// test (tests/server/openapi_client.rs) generates and runs a client.
#[test]
fn openapi_avoids_what_generators_cannot_read() {
    let doc = document();
    let mut all = Vec::new();
    schemas_in(&doc, String::new(), &mut all);
    let is_array =
        |t: &Value| t == "array" || t.as_array().is_some_and(|a| a.contains(&json!("array")));
    for (at, s) in &all {
        if s.get("type").is_some_and(is_array) {
            assert!(s.get("items").is_some(), "{at}: an array without `items`");
        }
        if let Some(c) = s.get("const") {
            assert!(c.is_string(), "{at}: a `const` that is not a string: {c}");
        }
        for member in s
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let target = match member.get("$ref").and_then(Value::as_str) {
                Some(r) => resolve(&doc, r).expect("resolves"),
                None => member,
            };
            let t = target.get("type");
            assert!(
                t.is_none() || t == Some(&json!("object")),
                "{at}: `allOf` of a {t:?}"
            );
        }
        // Both spellings of a field: no inline object model under either.
        if let Some(Value::Object(props)) = s.get("properties") {
            for (name, p) in props {
                let c = usage_core::wire::decode::camel(name);
                if c == *name || !props.contains_key(&c) {
                    continue;
                }
                let mut inner = Vec::new();
                schemas_in(p, String::new(), &mut inner);
                for (i, x) in inner {
                    assert!(
                        x.get("properties").is_none(),
                        "{at}/properties/{name}{i}: an inline object under two spellings"
                    );
                }
            }
        }
    }
    for code in Code::ALL {
        let r = &doc["components"]["responses"][code.as_str()];
        let schema = &r["content"]["application/json"]["schema"]["$ref"];
        assert_eq!(
            schema,
            &json!(format!("#/components/schemas/Error_{}", code.as_str()))
        );
        let s = &doc["components"]["schemas"][format!("Error_{}", code.as_str())];
        assert_eq!(s["properties"]["code"]["const"], code.as_str());
        assert_eq!(
            s["properties"]["details"].is_object(),
            *code == Code::InvalidArgument,
            "{code:?}"
        );
    }
}
