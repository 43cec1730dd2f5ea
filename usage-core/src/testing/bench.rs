//! The six benchmark queries of `../shared/bench/QUERIES.md` as request bodies: the
//! benchmarks run them, and the PostgreSQL store's tests check how Citus plans them.

use serde_json::{Value, json};

use crate::time::Date;

/// A `SUM` selection of `field` named `alias`.
fn sum(field: &str, alias: &str) -> Value {
    json!({"field": field, "aggregation_function": "QUERY_AGGREGATION_SUM", "name": alias})
}

/// The six queries, `D0` being `d0`: name, request body (without `service_key`), and the
/// aliases in the SQL's column order.
pub fn queries(d0: Date) -> Vec<(&'static str, Value, Vec<&'static str>)> {
    let d30 = Date(d0.0 + 30).to_iso();
    let d90 = Date(d0.0 + 90).to_iso();
    let q = |v: Value| json!({"query_requests": [v]});
    vec![
        (
            "Q1",
            q(
                json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
                sum("num_acceptances", "a"), sum("num_lines_accepted", "l"),
                sum("num_bytes_accepted", "b"), {"field": "distinct_users", "name": "u"}]}),
            ),
            vec!["a", "l", "b", "u"],
        ),
        (
            "Q2",
            q(
                json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
                sum("num_acceptances", "a"), sum("num_lines_accepted", "l"),
                sum("num_bytes_accepted", "b")],
                "aggregations": [{"field": "language", "name": "lang"}],
                "filters": [{"name": "date", "filter": "QUERY_FILTER_GE", "value": d30},
                            {"name": "date", "filter": "QUERY_FILTER_LE", "value": d90}]}),
            ),
            vec!["lang", "a", "l", "b"],
        ),
        (
            "Q3",
            q(
                json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
                sum("num_acceptances", "a"),
                {"field": "distinct_users", "aggregation_function": "QUERY_AGGREGATION_COUNT", "name": "u"}],
                "aggregations": [{"field": "date", "name": "d"}, {"field": "ide", "name": "ide"}]}),
            ),
            vec!["d", "ide", "a", "u"],
        ),
        (
            "Q4",
            q(
                json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
                sum("num_lines_accepted", "l"),
                {"field": "num_bytes_accepted", "aggregation_function": "QUERY_AGGREGATION_MAX", "name": "mb"},
                {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_AVG", "name": "avg"}],
                "aggregations": [{"field": "api_key", "name": "k"}],
                "filters": [{"name": "language", "filter": "QUERY_FILTER_EQUAL", "value": "PYTHON"}]}),
            ),
            vec!["k", "l", "mb", "avg"],
        ),
        (
            "Q5",
            q(
                json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
                {"field": "distinct_developer_days", "name": "dd"},
                {"field": "distinct_developer_hours", "name": "dh"}],
                "aggregations": [{"field": "ide", "name": "ide"}]}),
            ),
            vec!["ide", "dd", "dh"],
        ),
        (
            "Q6",
            q(
                json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
                sum("num_bytes_accepted", "b")],
                "aggregations": [{"field": "date UTC-8", "name": "d"}],
                "filters": [{"name": "version", "filter": "QUERY_FILTER_GE", "value": "1.10.0"}]}),
            ),
            vec!["d", "b"],
        ),
    ]
}
