//! Hand-computed answers of the evaluator.

use super::*;
use crate::load::ingest;
use crate::wire::decode::decode;
use crate::wire::{AnalyticsRequest, IngestRequest};
use serde_json::json;

fn load(team: &mut TeamData, kind: &str, records: serde_json::Value) {
    let req = IngestRequest {
        service_key: None,
        kind: Some(kind.into()),
        records: records.as_array().unwrap().clone(),
    };
    let batch = ingest(&req, &Limits::default()).unwrap();
    let batch = team.prepare(&batch, Timestamp(0)).unwrap();
    team.apply(&batch);
}

fn run(team: &TeamData, body: serde_json::Value) -> serde_json::Value {
    let d = decode::<AnalyticsRequest>(body.to_string().as_bytes()).unwrap();
    let plan =
        crate::validate::with_decoded(&d, |r, _| crate::validate::analytics(r, &Limits::default()))
            .unwrap();
    serde_json::to_value(team.analytics(&plan, &Limits::default()).unwrap()).unwrap()
}

fn ac(key: &str, hour: &str, lang: &str, version: &str, n: i64) -> serde_json::Value {
    json!({"api_key": key, "hour": hour, "language": lang, "ide": "vscode", "version": version,
           "num_acceptances": n, "num_lines_accepted": n * 2, "num_bytes_accepted": n * 10})
}

fn team() -> TeamData {
    let mut t = TeamData::new();
    load(
        &mut t,
        "groups",
        json!([{"group_id": "g1", "group_name": "eng"}]),
    );
    load(
        &mut t,
        "users",
        json!([{"email": "a@x", "name": "A", "api_key": "ka", "groups": ["g1"]},
               {"email": "b@x", "name": "B", "api_key": "kb"}]),
    );
    load(
        &mut t,
        "autocomplete",
        json!([
            ac("ka", "2025-05-01T03:00:00Z", "PYTHON", "1.9.0", 1),
            ac("ka", "2025-05-01T13:00:00Z", "GO", "1.10.0", 2),
            ac("kb", "2025-05-02T01:00:00Z", "PYTHON", "1.10.0", 4)
        ]),
    );
    t
}

#[test]
fn totals_groups_and_raw_rows() {
    let t = team();
    let got = run(
        &t,
        json!({"query_requests": [
            {"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
                {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
                {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_AVG", "name": "avg"},
                {"field": "distinct_users"}]},
            {"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
                {"field": "num_bytes_accepted", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
             "aggregations": [{"field": "date UTC-8", "name": "d"}],
             "filters": [{"name": "version", "filter": "QUERY_FILTER_GE", "value": "1.10.0"}]},
            {"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [{"field": "hour"}, {"field": "num_acceptances"}],
             "filters": [{"name": "api_key", "filter": "QUERY_FILTER_EQUAL", "value": "ka"},
                         {"name": "api_key", "filter": "QUERY_FILTER_EQUAL", "value": "kb"}]}
        ]}),
    );
    assert_eq!(
        got,
        json!({"queryResults": [
            {"responseItems": [{"item": {"sum_num_acceptances": "7", "avg": "2.3333333333333335", "distinct_users": "2"}}]},
            {"responseItems": [
                {"item": {"sum_num_bytes_accepted": "60", "d": "2025-05-01"}}]},
            {"responseItems": [
                {"item": {"hour": "2025-05-01 03:00:00 +0000 UTC", "num_acceptances": "1"}},
                {"item": {"hour": "2025-05-01 13:00:00 +0000 UTC", "num_acceptances": "2"}},
                {"item": {"hour": "2025-05-02 01:00:00 +0000 UTC", "num_acceptances": "4"}}]}
        ]})
    );
}

#[test]
fn group_restriction_and_unknown_group() {
    let t = team();
    let body = json!({"group_name": "eng", "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
                       {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_MAX"}]}]});
    assert_eq!(
        run(&t, body),
        json!({"queryResults": [{"responseItems": [{"item": {"sum_num_acceptances": "3", "max_num_acceptances": "2"}}]}]})
    );
    let d = decode::<AnalyticsRequest>(br#"{"group_name":"nope","query_requests":[{"data_source":"QUERY_DATA_SOURCE_USER_DATA","selections":[{"field":"distinct_users"}]}]}"#).unwrap();
    let plan = crate::validate::analytics(&d.request, &Limits::default()).unwrap();
    assert_eq!(
        t.analytics(&plan, &Limits::default()),
        Err(EvalError::GroupNotFound("nope".into()))
    );
}

#[test]
fn empty_input_counts_zero_and_omits_avg() {
    let t = TeamData::new();
    let got = run(
        &t,
        json!({"query_requests": [{"data_source": "QUERY_DATA_SOURCE_CHAT_DATA", "selections": [
            {"field": "num_chats_received", "aggregation_function": "QUERY_AGGREGATION_SUM"},
            {"field": "chat_accepted", "aggregation_function": "QUERY_AGGREGATION_COUNT"},
            {"field": "chat_loc_used", "aggregation_function": "QUERY_AGGREGATION_AVG"}]}]}),
    );
    assert_eq!(
        got,
        json!({"queryResults": [{"responseItems": [{"item": {"sum_num_chats_received": "0", "count_chat_accepted": "0"}}]}]})
    );
}

#[test]
fn users_keep_their_signup_time_and_keys_stay_unique() {
    let mut t = team();
    let first = t.user("a@x").unwrap().get("signup_time").as_time();
    assert_eq!(first, Some(Timestamp(0)));
    let req = IngestRequest {
        service_key: None,
        kind: Some("users".into()),
        records: vec![
            json!({"email": "a@x", "name": "A2", "api_key": "ka"}),
            json!({"email": "c@x", "name": "C", "api_key": "kb"}),
        ],
    };
    let batch = ingest(&req, &Limits::default()).unwrap();
    let err = t.prepare(&batch, Timestamp(5_000_000)).unwrap_err();
    assert_eq!(err.len(), 1);
    assert_eq!(err[0].path(), "records[1].api_key");
    let batch = ingest(
        &IngestRequest {
            records: req.records[..1].to_vec(),
            ..req
        },
        &Limits::default(),
    )
    .unwrap();
    let batch = t.prepare(&batch, Timestamp(5_000_000)).unwrap();
    t.apply(&batch);
    assert_eq!(t.user("a@x").unwrap().text("name"), "A2");
    assert_eq!(
        t.user("a@x").unwrap().get("signup_time").as_time(),
        Some(Timestamp(0))
    );
}
