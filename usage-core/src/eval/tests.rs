//! Hand-computed answers of the evaluator.

use super::*;
use crate::load::ingest;
use crate::wire::decode::decode;
use crate::wire::{
    AgentAnalyticsRequest, AnalyticsRequest, IngestRequest, UserPageAnalyticsRequest,
};
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

#[test]
fn a_later_record_of_a_batch_keeps_the_signup_time_an_earlier_one_gave() {
    let mut t = team();
    let req = IngestRequest {
        service_key: None,
        kind: Some("users".into()),
        records: vec![
            json!({"email": "n@x", "name": "N", "api_key": "kn", "signup_time": "2023-01-01T00:00:00Z"}),
            json!({"email": "n@x", "name": "N2", "api_key": "kn"}),
        ],
    };
    let batch = ingest(&req, &Limits::default()).unwrap();
    let batch = t.prepare(&batch, Timestamp(5_000_000)).unwrap();
    t.apply(&batch);
    assert_eq!(t.user("n@x").unwrap().text("name"), "N2");
    assert_eq!(
        t.user("n@x").unwrap().get("signup_time").as_time(),
        Timestamp::parse_rfc3339("2023-01-01T00:00:00Z")
    );
}

#[test]
fn prepare_copies_a_batch_only_to_fill_in_a_signup_time() {
    let t = team();
    let batch = |kind: &str, records: serde_json::Value| {
        let req = IngestRequest {
            service_key: None,
            kind: Some(kind.into()),
            records: records.as_array().unwrap().clone(),
        };
        ingest(&req, &Limits::default()).unwrap()
    };
    let usage = batch(
        "autocomplete",
        json!([ac("ka", "2025-05-01T10:00:00Z", "rust", "1", 3)]),
    );
    let prepared = t.prepare(&usage, Timestamp(0)).unwrap();
    assert!(matches!(prepared, Cow::Borrowed(b) if std::ptr::eq(b, &usage)));
    let groups = batch("groups", json!([{"group_id": "g9", "group_name": "new"}]));
    assert!(matches!(
        t.prepare(&groups, Timestamp(0)).unwrap(),
        Cow::Borrowed(_)
    ));
    let given = batch(
        "users",
        json!([{"email": "z@x", "name": "Z", "api_key": "kz", "signup_time": "2024-01-01T00:00:00Z"}]),
    );
    assert!(matches!(
        t.prepare(&given, Timestamp(0)).unwrap(),
        Cow::Borrowed(_)
    ));
    let missing = batch(
        "users",
        json!([{"email": "z@x", "name": "Z", "api_key": "kz", "signup_time": "2024-01-01T00:00:00Z"},
               {"email": "y@x", "name": "Y", "api_key": "ky"}]),
    );
    let prepared = t.prepare(&missing, Timestamp(7_500_000)).unwrap();
    let Cow::Owned(filled) = prepared else {
        panic!("a filled-in batch is a copy");
    };
    assert_eq!(filled.records[0], missing.records[0]);
    assert_eq!(
        filled.records[1].get("signup_time").as_time(),
        Some(Timestamp(7_000_000))
    );
    assert_eq!(missing.records[1].get("signup_time"), &FieldValue::Absent);
}

/// One query's items, as JSON.
fn items(team: &TeamData, query: serde_json::Value) -> serde_json::Value {
    run(team, json!({"query_requests": [query]}))["queryResults"][0]["responseItems"].clone()
}

fn user_page(team: &TeamData, body: serde_json::Value) -> serde_json::Value {
    let d = decode::<UserPageAnalyticsRequest>(body.to_string().as_bytes()).unwrap();
    let plan = crate::validate::with_decoded(&d, |r, _| crate::validate::user_page(r)).unwrap();
    serde_json::to_value(team.user_page(&plan).unwrap()).unwrap()
}

fn agent(team: &TeamData, body: serde_json::Value) -> serde_json::Value {
    let d = decode::<AgentAnalyticsRequest>(body.to_string().as_bytes()).unwrap();
    let plan =
        crate::validate::with_decoded(&d, |r, _| crate::validate::agent(r, &Limits::default()))
            .unwrap();
    serde_json::to_value(team.agent(&plan).unwrap()).unwrap()
}

fn sel(field: &str, agg: &str) -> serde_json::Value {
    json!({"field": field, "aggregation_function": format!("QUERY_AGGREGATION_{agg}")})
}

const USER_DATA: &str = "QUERY_DATA_SOURCE_USER_DATA";

/// Autocomplete records for distinct counts: ka twice in one hour (two versions), ka at
/// another hour of that day and on the next day, kb in ka's first hour, and one record of
/// a key no user has, with zero usage.
fn distinct_team() -> TeamData {
    let mut t = team();
    load(
        &mut t,
        "autocomplete",
        json!([
            ac("ka", "2025-05-01T03:00:00Z", "PYTHON", "1.9", 1),
            ac("ka", "2025-05-01T03:00:00Z", "PYTHON", "1.10", 2),
            ac("ka", "2025-05-01T13:00:00Z", "PYTHON", "1.02", 3),
            ac("ka", "2025-05-02T01:00:00Z", "GO", "1.2", 4),
            ac("kb", "2025-05-01T03:00:00Z", "PYTHON", "1.9", 5),
            ac("orphan", "2025-05-02T23:00:00Z", "PYTHON", "1.2", 0)
        ]),
    );
    t
}

#[test]
fn every_aggregation_of_a_metric_and_a_dimension() {
    let t = distinct_team();
    // The team's three records plus these six: acceptances 1,2,4 and 1,2,3,4,5,0. COUNT
    // of a dimension counts records.
    let got = items(
        &t,
        json!({"data_source": USER_DATA, "selections": [
            sel("num_acceptances", "SUM"), sel("num_acceptances", "AVG"),
            sel("num_acceptances", "MIN"), sel("num_acceptances", "MAX"),
            sel("api_key", "COUNT"), sel("version", "COUNT"), sel("date UTC-8", "COUNT")]}),
    );
    assert_eq!(
        got,
        json!([{"item": {"sum_num_acceptances": "22", "avg_num_acceptances": "2.4444444444444446",
            "min_num_acceptances": "0", "max_num_acceptances": "5", "count_api_key": "9",
            "count_version": "9", "count_date utc-8": "9"}}])
    );
}

#[test]
fn distinct_fields_in_total_and_by_group() {
    let t = distinct_team();
    let distinct = json!([
        {"field": "distinct_users"},
        sel("distinct_developer_days", "COUNT"),
        {"field": "distinct_developer_hours", "aggregation_function": "QUERY_AGGREGATION_UNSPECIFIED"}
    ]);
    // Keys ka, kb, orphan. Days: ka 05-01 and 05-02, kb 05-01 and 05-02, orphan 05-02.
    // Hours: ka 03 and 13 (05-01) and 01 (05-02), kb 03 (05-01) and 01 (05-02), orphan 23.
    assert_eq!(
        items(
            &t,
            json!({"data_source": USER_DATA, "selections": distinct})
        ),
        json!([{"item": {"distinct_users": "3", "count_distinct_developer_days": "5",
                         "distinct_developer_hours": "6"}}])
    );
    assert_eq!(
        items(
            &t,
            json!({"data_source": USER_DATA, "selections": distinct,
                   "aggregations": [{"field": "language", "name": "lang"}]})
        ),
        json!([
            {"item": {"distinct_users": "1", "count_distinct_developer_days": "2",
                      "distinct_developer_hours": "2", "lang": "GO"}},
            {"item": {"distinct_users": "3", "count_distinct_developer_days": "4",
                      "distinct_developer_hours": "5", "lang": "PYTHON"}}
        ])
    );
}

#[test]
fn groups_order_versions_part_by_part_and_local_dates_cross_midnight() {
    let t = distinct_team();
    // Versions 1.9.0, 1.10.0 (team) and 1.9, 1.10, 1.02, 1.2: numeric parts by value, a
    // prefix first, and 1.02 before 1.2 bytewise.
    let got = items(
        &t,
        json!({"data_source": USER_DATA, "selections": [sel("num_acceptances", "SUM")],
               "aggregations": [{"field": "version", "name": "v"}]}),
    );
    let order: Vec<&str> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item"]["v"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["1.02", "1.2", "1.9", "1.9.0", "1.10", "1.10.0"]);
    // kb has 05-01T03:00Z (5) and 05-02T01:00Z (4): at +05:30 08:30 on 05-01 and 06:30
    // on 05-02; at -8 19:00 on 04-30 and 17:00 on 05-01.
    let by_offset = |name: &str| {
        items(
            &t,
            json!({"data_source": USER_DATA, "selections": [sel("num_acceptances", "SUM")],
                   "aggregations": [{"field": name, "name": "d"}],
                   "filters": [{"name": "api_key", "filter": "QUERY_FILTER_EQUAL", "value": "kb"}]}),
        )
    };
    assert_eq!(
        by_offset("date UTC+5:30"),
        json!([{"item": {"sum_num_acceptances": "5", "d": "2025-05-01"}},
               {"item": {"sum_num_acceptances": "4", "d": "2025-05-02"}}])
    );
    assert_eq!(
        by_offset("date UTC-8"),
        json!([{"item": {"sum_num_acceptances": "5", "d": "2025-04-30"}},
               {"item": {"sum_num_acceptances": "4", "d": "2025-05-01"}}])
    );
}

#[test]
fn group_values_shape_and_time_filters() {
    let t = distinct_team();
    // Shape 3: only the group values. `hour LE` a date keeps that whole UTC day.
    let got = items(
        &t,
        json!({"data_source": USER_DATA, "selections": [{"field": "language"}, {"field": "hour"}],
               "aggregations": [{"field": "hour", "name": "h"}, {"field": "language", "name": "l"}],
               "filters": [{"name": "hour", "filter": "QUERY_FILTER_LE", "value": "2025-05-01"},
                           {"name": "hour", "filter": "QUERY_FILTER_NOT_EQUAL",
                            "value": "2025-05-01 13:00:00 +0000 UTC"}]}),
    );
    assert_eq!(
        got,
        json!([
            {"item": {"language": "PYTHON", "hour": "2025-05-01 03:00:00 +0000 UTC",
                      "h": "2025-05-01 03:00:00 +0000 UTC", "l": "PYTHON"}}
        ])
    );
    // An instant inside an hour, at an offset: `hour GE 12:30Z` keeps the two records of
    // 13:00 on 05-01, the two of 01:00 and the one of 23:00 on 05-02.
    let got = items(
        &t,
        json!({"data_source": USER_DATA, "selections": [sel("hour", "COUNT")],
               "filters": [{"name": "hour", "filter": "QUERY_FILTER_GE", "value": "2025-05-01T18:00:00+05:30"}]}),
    );
    assert_eq!(got, json!([{"item": {"count_hour": "5"}}]));
}

fn chat(
    id: &str,
    key: &str,
    ts: &str,
    intent: &str,
    accepted: bool,
    loc: i64,
) -> serde_json::Value {
    json!({"id": id, "api_key": key, "timestamp": ts, "model_id": "m", "ide": "vscode",
           "version": "1.0", "latest_intent_type": intent, "num_chats_received": 1,
           "chat_accepted": accepted, "chat_inserted_at_cursor": false, "chat_applied": accepted,
           "chat_loc_used": loc})
}

#[test]
fn booleans_sum_trues_and_raw_events_order_by_time_key_and_id() {
    let mut t = team();
    load(
        &mut t,
        "chat",
        json!([
            chat(
                "e3",
                "kb",
                "2025-05-01T10:00:00.25Z",
                "CHAT_INTENT_GENERIC",
                true,
                7
            ),
            chat(
                "e2",
                "ka",
                "2025-05-01T10:00:00.25Z",
                "CHAT_INTENT_GENERIC",
                false,
                0
            ),
            chat(
                "e1",
                "ka",
                "2025-05-01T10:00:00.25Z",
                "CHAT_INTENT_FUNCTION_EXPLAIN",
                true,
                5
            ),
            chat(
                "e0",
                "ka",
                "2025-05-01T09:00:00Z",
                "CHAT_INTENT_GENERIC",
                false,
                1
            )
        ]),
    );
    let got = items(
        &t,
        json!({"data_source": "QUERY_DATA_SOURCE_CHAT_DATA", "selections": [
            sel("chat_accepted", "SUM"), sel("chat_accepted", "COUNT"), sel("chat_loc_used", "MAX")],
            "aggregations": [{"field": "latest_intent_type", "name": "intent"}]}),
    );
    assert_eq!(
        got,
        json!([
            {"item": {"sum_chat_accepted": "1", "count_chat_accepted": "1", "max_chat_loc_used": "5",
                      "intent": "CHAT_INTENT_FUNCTION_EXPLAIN"}},
            {"item": {"sum_chat_accepted": "1", "count_chat_accepted": "3", "max_chat_loc_used": "7",
                      "intent": "CHAT_INTENT_GENERIC"}}
        ])
    );
    // Shape 4: by time, then api_key, then id; the fraction is printed as stored.
    let got = items(
        &t,
        json!({"data_source": "QUERY_DATA_SOURCE_CHAT_DATA", "selections": [
            {"field": "date"}, {"field": "api_key"}, {"field": "chat_accepted"}, {"field": "chat_loc_used"}]}),
    );
    let rows: Vec<String> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let i = &i["item"];
            format!(
                "{} {} {} {}",
                i["date"], i["api_key"], i["chat_accepted"], i["chat_loc_used"]
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            r#""2025-05-01" "ka" "false" "1""#,
            r#""2025-05-01" "ka" "true" "5""#,
            r#""2025-05-01" "ka" "false" "0""#,
            r#""2025-05-01" "kb" "true" "7""#
        ]
    );
    let stamp = items(
        &t,
        json!({"data_source": "QUERY_DATA_SOURCE_COMMAND_DATA", "selections": [{"field": "timestamp"}]}),
    );
    assert_eq!(stamp, json!([]));
}

#[test]
fn empty_input_gives_zero_counts_and_sums_and_no_avg_min_max() {
    let t = team();
    let got = items(
        &t,
        json!({"data_source": USER_DATA, "selections": [
            sel("api_key", "COUNT"), sel("num_acceptances", "SUM"),
            sel("num_acceptances", "AVG"), sel("num_acceptances", "MIN"),
            sel("num_acceptances", "MAX"), {"field": "distinct_users"}],
            "filters": [{"name": "language", "filter": "QUERY_FILTER_EQUAL", "value": "COBOL"}]}),
    );
    assert_eq!(
        got,
        json!([{"item": {"count_api_key": "0", "sum_num_acceptances": "0", "distinct_users": "0"}}])
    );
    // Grouped and raw shapes have no items at all.
    let grouped = items(
        &t,
        json!({"data_source": USER_DATA, "selections": [sel("num_acceptances", "SUM")],
               "aggregations": [{"field": "ide", "name": "ide"}],
               "filters": [{"name": "language", "filter": "QUERY_FILTER_EQUAL", "value": "COBOL"}]}),
    );
    assert_eq!(grouped, json!([]));
}

#[test]
fn sums_are_exact_beyond_64_bits() {
    let mut t = TeamData::new();
    let big = i64::MAX;
    load(
        &mut t,
        "autocomplete",
        json!([
            {"api_key": "k", "hour": "2025-05-01T00:00:00Z", "language": "GO", "ide": "i", "version": "1",
             "num_acceptances": big, "num_lines_accepted": 0, "num_bytes_accepted": 0},
            {"api_key": "k", "hour": "2025-05-01T01:00:00Z", "language": "GO", "ide": "i", "version": "1",
             "num_acceptances": big, "num_lines_accepted": 0, "num_bytes_accepted": 0}
        ]),
    );
    let got = items(
        &t,
        json!({"data_source": USER_DATA, "selections": [
            sel("num_acceptances", "SUM"), sel("num_acceptances", "AVG")]}),
    );
    // AVG is the exact sum as f64 over the count as f64, printed shortest (2^63).
    assert_eq!(
        got,
        json!([{"item": {"sum_num_acceptances": "18446744073709551614",
                         "avg_num_acceptances": "9223372036854776000"}}])
    );
}

fn pcw(hour: &str, auto: i64, cmd: i64, user: i64) -> serde_json::Value {
    json!({"api_key": "ka", "hour": hour, "language": "GO", "ide": "vscode", "version": "1",
           "vendor_bytes_by_autocomplete": auto, "vendor_bytes_by_command": cmd, "user_bytes": user})
}

#[test]
fn pcw_sums_and_ratio_within_the_range() {
    let mut t = team();
    load(
        &mut t,
        "pcw",
        json!([
            pcw("2025-05-01T10:00:00Z", 30, 10, 60),
            pcw("2025-05-01T11:00:00Z", 0, 0, 0),
            pcw("2025-05-02T10:00:00Z", 100, 0, 0)
        ]),
    );
    let query = json!({"data_source": "QUERY_DATA_SOURCE_PCW_DATA", "selections": [
        {"field": "percent_code_written"}, {"field": "vendor_bytes"}, {"field": "user_bytes"},
        {"field": "total_bytes"}, {"field": "vendor_bytes_by_autocomplete"},
        {"field": "vendor_bytes_by_command"}]});
    let at = |start: Option<&str>, end: Option<&str>| {
        let mut body = json!({"query_requests": [query.clone()]});
        if let Some(s) = start {
            body["start_timestamp"] = json!(s);
        }
        if let Some(e) = end {
            body["end_timestamp"] = json!(e);
        }
        run(&t, body)["queryResults"][0]["responseItems"][0]["item"].clone()
    };
    let item = |p: &str, v: &str, u: &str, tot: &str, a: &str, c: &str| {
        json!({"percent_code_written": p, "vendor_bytes": v, "user_bytes": u,
               "total_bytes": tot, "vendor_bytes_by_autocomplete": a, "vendor_bytes_by_command": c})
    };
    assert_eq!(at(None, None), item("0.7", "140", "60", "200", "130", "10"));
    // start <= hour < end.
    assert_eq!(
        at(Some("2025-05-01T10:00:00Z"), Some("2025-05-01T11:00:00Z")),
        item("0.4", "40", "60", "100", "30", "10")
    );
    // Zero totals: the ratio is "0".
    assert_eq!(
        at(Some("2025-05-01T11:00:00Z"), Some("2025-05-01T12:00:00Z")),
        item("0", "0", "0", "0", "0", "0")
    );
    assert_eq!(
        at(Some("2025-05-02T00:00:00Z"), None),
        item("1", "100", "0", "100", "100", "0")
    );
    // Other sources ignore the range.
    let mut body = json!({"start_timestamp": "2030-01-01T00:00:00Z", "query_requests": [
        {"data_source": USER_DATA, "selections": [sel("num_acceptances", "SUM")]}]});
    body["query_requests"][0]["selections"][0]["name"] = json!("s");
    assert_eq!(
        run(&t, body)["queryResults"][0]["responseItems"][0]["item"],
        json!({"s": "7"})
    );
}

/// Users a (records on 05-01 and 05-03 to 05-07), b (vendor access disabled, lines on
/// 05-05 and tools on 05-07) and c (pending, in no group, no records).
fn stats_team() -> TeamData {
    let mut t = TeamData::new();
    load(
        &mut t,
        "groups",
        json!([{"group_id": "g1", "group_name": "eng"}]),
    );
    load(
        &mut t,
        "users",
        json!([
            {"email": "b@x", "name": "B", "api_key": "kb", "disable_vendor": true, "groups": ["g1"]},
            {"email": "a@x", "name": "A", "api_key": "ka", "disable_vendor": false, "groups": ["g1"],
             "signup_time": "2025-01-01T00:00:00Z"},
            {"email": "c@x", "name": "C", "api_key": "kc", "team_status": "USER_TEAM_STATUS_PENDING"}
        ]),
    );
    load(
        &mut t,
        "autocomplete",
        json!([ac("ka", "2025-05-01T03:00:00Z", "GO", "1", 0)]),
    );
    load(
        &mut t,
        "chat",
        json!([chat(
            "c1",
            "ka",
            "2025-05-03T10:00:05.5Z",
            "CHAT_INTENT_GENERIC",
            false,
            0
        )]),
    );
    load(
        &mut t,
        "command",
        json!([{"api_key": "ka", "timestamp": "2025-05-04T08:00:00Z", "language": "GO", "ide": "vscode",
                "version": "1", "command_source": "COMMAND_REQUEST_SOURCE_DEFAULT",
                "provider_source": "PROVIDER_SOURCE_COMMAND_EDIT", "lines_added": 0, "lines_removed": 0,
                "bytes_added": 0, "bytes_removed": 0, "selection_lines": 0, "selection_bytes": 0,
                "accepted": false}]),
    );
    load(
        &mut t,
        "agent_lines",
        json!([
            {"api_key": "ka", "day": "2025-05-05", "ide_type": "editor", "lines_suggested": 10, "lines_accepted": 0},
            {"api_key": "kb", "day": "2025-05-05", "ide_type": "plugin", "lines_suggested": 5, "lines_accepted": 0},
            {"api_key": "ka", "day": "2025-05-06", "ide_type": "editor", "lines_suggested": 3, "lines_accepted": 2}
        ]),
    );
    let run = |id: &str, key: &str, ts: &str, agent: &str, ide: &str, prompts: i64| {
        json!({"id": id, "api_key": key, "timestamp": ts, "ide_type": ide, "model": "m",
               "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 2, "agent_id": agent,
               "prompts_used": prompts})
    };
    load(
        &mut t,
        "agent_runs",
        json!([
            run("r1", "ka", "2025-05-06T12:00:00Z", "conv-b", "editor", 0),
            run("r2", "ka", "2025-05-06T12:00:00Z", "conv-a", "editor", 150),
            run(
                "r3",
                "orphan",
                "2025-05-06T09:00:00Z",
                "conv-c",
                "plugin",
                100
            )
        ]),
    );
    let tool = |key: &str, tool: &str, n: i64| json!({"api_key": key, "day": "2025-05-07", "ide_type": "editor", "tool": tool, "count": n});
    load(
        &mut t,
        "agent_tool_usage",
        json!([
            tool("ka", "VIEW_FILE", 8),
            tool("ka", "CODE_ACTION", 5),
            tool("kb", "CODE_ACTION", 3),
            tool("ka", "FIND", 2),
            tool("ka", "GREP_SEARCH", 0)
        ]),
    );
    t
}

#[test]
fn user_statistics_count_active_days_in_the_range_and_omit_what_is_absent() {
    let t = stats_team();
    let got = user_page(&t, json!({}));
    assert_eq!(
        got,
        json!({"userTableStats": [
            {"name": "A", "email": "a@x", "lastUpdateTime": "2025-05-06T12:00:00Z", "apiKey": "ka",
             "activeDays": 6, "lastAutocompleteUsageTime": "2025-05-01T03:00:00Z",
             "lastChatUsageTime": "2025-05-06T12:00:00Z", "lastCommandUsageTime": "2025-05-04T08:00:00Z",
             "teamStatus": "USER_TEAM_STATUS_APPROVED", "signupTime": "2025-01-01T00:00:00Z"},
            {"name": "B", "email": "b@x", "apiKey": "kb", "activeDays": 2, "disableVendor": true,
             "teamStatus": "USER_TEAM_STATUS_APPROVED", "signupTime": "1970-01-01T00:00:00Z"},
            {"name": "C", "email": "c@x", "apiKey": "kc", "activeDays": 0,
             "teamStatus": "USER_TEAM_STATUS_PENDING", "signupTime": "1970-01-01T00:00:00Z"}
        ]})
    );
    // [05-03, 05-06): the chat (05-03T10:00:05.5), the command (05-04) and the lines of
    // 05-05 (a day counts from its 00:00:00Z) for a; b's lines of 05-05.
    let got = user_page(
        &t,
        json!({"group_name": "eng", "start_timestamp": "2025-05-03T00:00:00Z",
               "end_timestamp": "2025-05-06T00:00:00Z"}),
    );
    let days: Vec<(&str, i64)> = got["userTableStats"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["email"].as_str().unwrap(),
                u["activeDays"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(days, [("a@x", 3), ("b@x", 1)]);
    // The last usage times stay all-time.
    assert_eq!(
        got["userTableStats"][0]["lastChatUsageTime"],
        "2025-05-06T12:00:00Z"
    );
}

#[test]
fn agent_statistics_order_and_omit_zeros() {
    let t = stats_team();
    let queries = json!([{"agent_lines": {}}, {"agent_runs": {}}, {"agent_tool_usage": {}}]);
    let got = agent(&t, json!({"query_requests": queries}));
    assert_eq!(
        got,
        json!({"queryResults": [
            {"agentLines": {"agentLines": [
                {"day": "2025-05-05T00:00:00Z", "linesSuggested": "15"},
                {"day": "2025-05-06T00:00:00Z", "linesSuggested": "3", "linesAccepted": "2"}]}},
            {"agentRuns": {"agentRuns": [
                {"day": "2025-05-06T00:00:00Z", "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT",
                 "messagesSent": "2", "agentId": "conv-c", "promptsUsed": "100"},
                {"day": "2025-05-06T00:00:00Z", "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT",
                 "messagesSent": "2", "agentId": "conv-a", "promptsUsed": "150"},
                {"day": "2025-05-06T00:00:00Z", "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT",
                 "messagesSent": "2", "agentId": "conv-b"}]}},
            {"agentToolUsage": {"agentToolUsage": [
                {"tool": "CODE_ACTION", "count": "8"}, {"tool": "VIEW_FILE", "count": "8"},
                {"tool": "FIND", "count": "2"}, {"tool": "GREP_SEARCH", "count": "0"}]}}
        ]})
    );
    // Restricted to b (and a stranger), plugin only: b's lines; no runs, no tools.
    let got = agent(
        &t,
        json!({"emails": ["b@x", "nobody@x"], "ide_types": ["plugin"], "query_requests": queries}),
    );
    assert_eq!(
        got,
        json!({"queryResults": [
            {"agentLines": {"agentLines": [{"day": "2025-05-05T00:00:00Z", "linesSuggested": "5"}]}},
            {"agentRuns": {"agentRuns": []}},
            {"agentToolUsage": {"agentToolUsage": []}}
        ]})
    );
    // The orphan run counts without a restriction only; a range keeps start <= time < end.
    let got = agent(
        &t,
        json!({"start_timestamp": "2025-05-06T09:00:00Z", "end_timestamp": "2025-05-06T12:00:00Z",
               "query_requests": [{"agent_runs": {}}]}),
    );
    assert_eq!(
        got["queryResults"][0]["agentRuns"]["agentRuns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["agentId"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["conv-c"]
    );
}

#[test]
fn replaced_records_keep_their_row_and_read_back_as_stored() {
    let mut t = team();
    assert_eq!(t.len(&records::AUTOCOMPLETE), 3);
    load(
        &mut t,
        "autocomplete",
        json!([ac("ka", "2025-05-01T13:00:00Z", "GO", "1.10.0", 9)]),
    );
    assert_eq!(t.len(&records::AUTOCOMPLETE), 3);
    let counts: Vec<i64> = t
        .records(&records::AUTOCOMPLETE)
        .map(|r| r.count("num_acceptances"))
        .collect();
    assert_eq!(counts, [1, 9, 4]);
    // An optional count not given reads back absent (and counts as 0).
    load(
        &mut t,
        "agent_runs",
        json!([{"id": "r", "api_key": "ka", "timestamp": "2025-05-01T00:00:00Z", "ide_type": "editor",
                "model": "m", "mode": "UNKNOWN", "messages_sent": 1, "agent_id": "a", "prompts_used": 0}]),
    );
    let run = t.records(&records::AGENT_RUNS).next().unwrap().clone();
    assert_eq!(run.get("flex_credits_used"), &FieldValue::Absent);
    assert!(!t.is_empty());
    assert!(TeamData::new().is_empty());
}

/// The item bound is of the whole request: the queries' answers together, in order; the
/// query that passes it is named, also when it is a group-by that stops early.
#[test]
fn the_item_bound_is_of_the_whole_request() {
    let t = team();
    let limits = |n| Limits {
        result_items: n,
        ..Limits::default()
    };
    let raw = json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA",
                     "selections": [{"field": "language"}]});
    let by_hour = json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA",
                         "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
                         "aggregations": [{"field": "hour", "name": "h"}]});
    let total = json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA",
                       "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}]});
    let answer = |queries: serde_json::Value, n: usize| {
        let body = json!({ "query_requests": queries });
        let d = decode::<AnalyticsRequest>(body.to_string().as_bytes()).unwrap();
        let plan = crate::validate::with_decoded(&d, |r, _| {
            crate::validate::analytics(r, &Limits::default())
        })
        .unwrap();
        t.analytics(&plan, &limits(n)).map(|r| {
            r.query_results
                .iter()
                .map(|q| q.response_items.len())
                .collect::<Vec<_>>()
        })
    };
    let too_many = |query, limit| Err(EvalError::TooManyItems { query, limit });
    // 3 raw rows, 3 groups, 1 total: 7 items in all.
    let all = json!([raw, by_hour, total]);
    assert_eq!(answer(all.clone(), 7), Ok(vec![3, 3, 1]));
    assert_eq!(answer(all.clone(), 6), too_many(2, 6));
    assert_eq!(answer(all.clone(), 5), too_many(1, 5));
    assert_eq!(answer(all.clone(), 3), too_many(1, 3));
    assert_eq!(answer(all, 2), too_many(0, 2));
    // The same query twice counts twice.
    assert_eq!(answer(json!([raw, raw]), 5), too_many(1, 5));
    assert_eq!(answer(json!([by_hour, by_hour]), 6), Ok(vec![3, 3]));
    let e = answer(json!([by_hour, by_hour]), 5).unwrap_err();
    assert_eq!(
        e.violation().unwrap().path(),
        "query_requests[1]",
        "{}",
        e.violation().unwrap().message()
    );
    assert!(e.to_string().contains("more than 5 items"), "{e}");
}

/// The byte bound: the aliases and values of the whole answer, counted item by item; the
/// query whose item passes it is named.
#[test]
fn the_byte_bound_is_of_the_whole_request_and_counts_aliases_and_values() {
    let t = team();
    let body = json!({"query_requests": [
        {"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [{"field": "language"}]},
        {"data_source": "QUERY_DATA_SOURCE_USER_DATA",
         "selections": [{"field": "language", "name": "a_long_alias"}]}
    ]});
    let d = decode::<AnalyticsRequest>(body.to_string().as_bytes()).unwrap();
    let plan =
        crate::validate::with_decoded(&d, |r, _| crate::validate::analytics(r, &Limits::default()))
            .unwrap();
    let at = |bytes| {
        t.analytics(
            &plan,
            &Limits {
                result_bytes: bytes,
                ..Limits::default()
            },
        )
    };
    // `language` + PYTHON, GO, PYTHON: 8 * 3 + 6 + 2 + 6 = 38 bytes; then `a_long_alias`
    // (12) with the same values: 12 * 3 + 14 = 50 more.
    assert!(at(88).is_ok());
    assert_eq!(
        at(87),
        Err(EvalError::TooLarge {
            query: 1,
            limit: 87
        })
    );
    assert_eq!(
        at(37),
        Err(EvalError::TooLarge {
            query: 0,
            limit: 37
        })
    );
    let e = at(0).unwrap_err();
    assert_eq!(e.violation().unwrap().path(), "query_requests[0]");
    assert_eq!(e.violation().unwrap().rule(), crate::Rule::TooMany);
}
