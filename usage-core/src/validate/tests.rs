//! Request-shape rules of the spec and of contract sections 1, 2, 3, 5, 6, 8 and 9: every
//! rule and error row, each asserted with its exact path and rule and the key parts of
//! its message (the field, the value, the rule).
//!
//! Bodies go through the same two steps as the server: [`decode`] (kind errors, spellings,
//! "not given") and a validator via [`with_decoded`]. Field lists come from the schema
//! tables ([`Source::spec`]), never written out here.

use serde_json::{Value, json};

use super::*;
use crate::load::{self, Batch};
use crate::plan::{
    AnalyticsPlan, FilterPlan, FilterTest, FilterValue, QueryPlan, QueryShape, UserPagePlan,
};
use crate::schema::{Agg, Field, FilterOp, IdeType, Role, SOURCES, Source, ValueType};
use crate::time::Date;
use crate::wire::decode::{KindErrors, decode};
use crate::wire::{AnalyticsRequest, IngestRequest};

// ---------------------------------------------------------------------------------------
// Helpers

/// Reads a body as the server does: decode, then the validator with the decoder's
/// violations merged. Panics on a kind error (those have their own helper).
fn run<T: Request, P>(
    body: &str,
    validate: impl FnOnce(&T, &[&'static str]) -> Result<P, Violations>,
) -> Result<P, Violations> {
    let d = decode::<T>(body.as_bytes()).unwrap_or_else(|e| panic!("kind errors: {e}\n{body}"));
    with_decoded(&d, validate)
}

fn analytics_body(body: &str) -> Result<AnalyticsPlan, Violations> {
    run::<AnalyticsRequest, _>(body, |r, _| analytics(r, &Limits::default()))
}

fn agent_body(body: &str) -> Result<AgentPlan, Violations> {
    run::<AgentAnalyticsRequest, _>(body, |r, _| agent(r, &Limits::default()))
}

fn user_page_body(body: &str) -> Result<UserPagePlan, Violations> {
    run::<UserPageAnalyticsRequest, _>(body, |r, _| user_page(r))
}

fn get_config_body(body: &str) -> Result<CapScope, Violations> {
    run::<GetUsageConfigRequest, _>(body, get_usage_config)
}

fn config_body(body: &str) -> Result<(CapScope, CapAction), Violations> {
    run::<UsageConfigRequest, _>(body, usage_config)
}

fn ingest_body(body: &str) -> Result<Batch, Violations> {
    run::<IngestRequest, _>(body, |r, _| load::ingest(r, &Limits::default()))
}

/// A body with these query requests.
fn queries(qs: &[Value]) -> String {
    json!({ "service_key": "usk_test", "query_requests": qs }).to_string()
}

/// A body with one query request.
fn query(q: Value) -> String {
    queries(&[q])
}

/// The plan of a valid one-query body.
fn plan(q: Value) -> QueryPlan {
    let body = query(q);
    let mut p = analytics_body(&body)
        .unwrap_or_else(|e| panic!("expected valid, got {}\n{body}", show(&e)));
    assert_eq!(p.queries.len(), 1);
    p.queries.remove(0)
}

/// Every violation of an invalid body.
fn errors<P: std::fmt::Debug>(r: Result<P, Violations>) -> Vec<Violation> {
    match r {
        Ok(p) => panic!("expected violations, got a plan: {p:?}"),
        Err(v) => {
            assert_eq!(
                v.total(),
                v.len(),
                "every violation is kept below the limit"
            );
            v.into_vec()
        }
    }
}

fn show(v: &[Violation]) -> String {
    v.iter().map(|v| format!("\n  {v}")).collect()
}

/// `(path, rule)` of every violation, in the order reported.
fn paths(v: &[Violation]) -> Vec<(String, Rule)> {
    v.iter().map(|v| (v.path(), v.rule())).collect()
}

/// Asserts exactly one violation, at `path` with `rule`, whose message contains every
/// part of `parts`; returns it.
#[track_caller]
fn only<P: std::fmt::Debug>(
    r: Result<P, Violations>,
    path: &str,
    rule: Rule,
    parts: &[&str],
) -> Violation {
    let v = errors(r);
    assert_eq!(
        paths(&v),
        [(path.to_string(), rule)],
        "violations:{}",
        show(&v)
    );
    let v = v.into_iter().next().expect("one violation");
    for part in parts {
        assert!(
            v.message().contains(part),
            "message {:?} lacks {part:?}",
            v.message()
        );
    }
    v
}

/// The one violation of a one-query Analytics body.
#[track_caller]
fn only_q(q: Value, path: &str, rule: Rule, parts: &[&str]) -> Violation {
    only(analytics_body(&query(q)), path, rule, parts)
}

/// The kind errors of a body that stops before validation.
fn kind_errors<T: Request + std::fmt::Debug>(body: &str) -> Vec<(String, Rule)> {
    match decode::<T>(body.as_bytes()) {
        Err(KindErrors(v)) => paths(&v),
        Ok(d) => panic!("expected kind errors, got {:?}", d.request),
    }
}

fn sel(field: &str) -> Value {
    json!({ "field": field })
}

fn sel_agg(field: &str, agg: Agg) -> Value {
    json!({ "field": field, "aggregation_function": agg.as_str() })
}

fn filt(name: &str, op: FilterOp, value: &str) -> Value {
    json!({ "name": name, "filter": op.as_str(), "value": value })
}

fn group(field: &str, name: &str) -> Value {
    json!({ "field": field, "name": name })
}

fn q_user(selections: Value) -> Value {
    json!({ "data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": selections })
}

/// How a request writes a field of a table: its name, or `date UTC-8` for the
/// `date UTC±H[:MM]` family.
fn written(f: &Field) -> &'static str {
    if f.is_local_date() {
        "date UTC-8"
    } else {
        f.name
    }
}

/// The sources other than PCW (the ones that group).
fn grouping_sources() -> impl Iterator<Item = Source> {
    SOURCES.iter().filter(|s| s.groupable).map(|s| s.source)
}

/// A field of `source` that COUNT aggregates (every grouping source has `api_key`).
fn counted(source: Source) -> &'static str {
    source
        .spec()
        .fields
        .iter()
        .find(|f| f.role == Role::Dimension && f.aggs.contains(&Agg::Count))
        .map(|f| f.name)
        .expect("a countable dimension")
}

/// A group-by field of `source`.
fn groupable(source: Source) -> &'static str {
    source
        .spec()
        .fields
        .iter()
        .find(|f| f.group && !f.is_local_date())
        .map(|f| f.name)
        .expect("a group-by field")
}

fn ds(source: Source) -> &'static str {
    source.as_str()
}

// ---------------------------------------------------------------------------------------
// Rule 1: mixed_aggregation

#[test]
fn mixed_aggregation_at_selections() {
    let v = only_q(
        q_user(json!([sel_agg("api_key", Agg::Count), sel("language")])),
        "query_requests[0].selections",
        Rule::MixedAggregation,
        &["`count_api_key`", "`language`", "rule 1"],
    );
    assert_eq!(v.rule().as_str(), "mixed_aggregation");
}

#[test]
fn mixed_aggregation_with_group_by_reports_rule_1_only() {
    // Shape 2/3 mixed: rule 1, and no `ungrouped_field` for `version`.
    only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [sel_agg("num_acceptances", Agg::Sum), sel("version")],
            "aggregations": [group("language", "lang")],
        }),
        "query_requests[0].selections",
        Rule::MixedAggregation,
        &["`sum_num_acceptances`", "`version`"],
    );
}

#[test]
fn rule_1_holds_for_pcw_too() {
    // "Rule 1 holds for every query request": a PCW selection with a function beside one
    // without is rule 5 at the function and rule 1 at `selections`.
    let v = errors(analytics_body(&query(json!({
        "data_source": "QUERY_DATA_SOURCE_PCW_DATA",
        "selections": [sel_agg("percent_code_written", Agg::Sum), sel("user_bytes")],
    }))));
    assert_eq!(
        paths(&v),
        [
            (
                "query_requests[0].selections".to_string(),
                Rule::MixedAggregation
            ),
            (
                "query_requests[0].selections[0].aggregation_function".to_string(),
                Rule::InvalidAggregation
            ),
        ]
    );
}

#[test]
fn distinct_counts_as_aggregated_whatever_its_function() {
    for source in grouping_sources() {
        for d in source
            .spec()
            .fields
            .iter()
            .filter(|f| f.role == Role::Distinct)
        {
            // `distinct_*` without a function beside an unaggregated field: mixed.
            only_q(
                json!({"data_source": ds(source), "selections": [sel(d.name), sel(groupable(source))]}),
                "query_requests[0].selections",
                Rule::MixedAggregation,
                &[&format!("`{}`", d.name)],
            );
            // Beside an aggregated one: shape 1, one total.
            for agg in [None, Some(Agg::Unspecified), Some(Agg::Count)] {
                let mut s = sel(d.name);
                if let Some(a) = agg {
                    s["aggregation_function"] = json!(a.as_str());
                }
                let p = plan(json!({
                    "data_source": ds(source),
                    "selections": [s, sel_agg(counted(source), Agg::Count)],
                }));
                assert_eq!(p.shape, QueryShape::Total, "{source} {}", d.name);
                let want = match agg {
                    Some(Agg::Count) => format!("count_{}", d.name),
                    _ => d.name.to_string(),
                };
                assert_eq!(p.selections[0].alias, want);
            }
        }
    }
}

#[test]
fn unspecified_metric_beside_an_aggregate_is_mixed() {
    // Contract section 3: UNSPECIFIED is valid for metrics, and rule 1 rejects it in
    // shapes 1-3.
    only_q(
        q_user(json!([
            sel("num_acceptances"),
            sel_agg("api_key", Agg::Count)
        ])),
        "query_requests[0].selections",
        Rule::MixedAggregation,
        &["`num_acceptances`", "`count_api_key`"],
    );
    only_q(
        json!({"data_source": ds(Source::AgentData), "selections": [sel("metadata"), sel_agg("prompts_used", Agg::Sum)]}),
        "query_requests[0].selections",
        Rule::MixedAggregation,
        &["`metadata`", "`sum_prompts_used`"],
    );
}

#[test]
fn unresolved_selections_take_no_part_in_rule_1() {
    // An unknown field beside an unaggregated one: only `unknown_field`.
    only_q(
        q_user(json!([sel_agg("bogus", Agg::Count), sel("language")])),
        "query_requests[0].selections[0].field",
        Rule::UnknownField,
        &["`bogus`"],
    );
    // An unknown function: only `unknown_enum_value`.
    only_q(
        q_user(
            json!([{"field": "language", "aggregation_function": "QUERY_AGGREGATION_MEDIAN"}, sel("api_key")]),
        ),
        "query_requests[0].selections[0].aggregation_function",
        Rule::UnknownEnumValue,
        &["QUERY_AGGREGATION_MEDIAN"],
    );
}

#[test]
fn rule_1_holds_without_aggregations_and_all_or_none_pass() {
    let p = plan(q_user(json!([sel("language"), sel("num_acceptances")])));
    assert_eq!(p.shape, QueryShape::Raw);
    let p = plan(q_user(json!([
        sel_agg("num_acceptances", Agg::Avg),
        sel_agg("language", Agg::Count)
    ])));
    assert_eq!(p.shape, QueryShape::Total);
}

// ---------------------------------------------------------------------------------------
// Rule 2: distinct_in_aggregations

#[test]
fn distinct_in_aggregations_at_the_group_by_field() {
    let mut tested = 0;
    for source in grouping_sources() {
        for d in source
            .spec()
            .fields
            .iter()
            .filter(|f| f.role == Role::Distinct)
        {
            only_q(
                json!({
                    "data_source": ds(source),
                    "selections": [sel_agg(counted(source), Agg::Count)],
                    "aggregations": [group(groupable(source), "g"), group(d.name, "d")],
                }),
                "query_requests[0].aggregations[1].field",
                Rule::DistinctInAggregations,
                &[&format!("`{}`", d.name), "distinct_*", "rule 2"],
            );
            tested += 1;
        }
    }
    assert!(
        tested >= 5,
        "distinct fields of autocomplete and agent data"
    );
}

#[test]
fn distinct_group_by_disables_the_ungrouped_check() {
    // Shape 3 with a failed group-by: one mistake, one violation.
    only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [sel("language")],
            "aggregations": [group("distinct_users", "u")],
        }),
        "query_requests[0].aggregations[0].field",
        Rule::DistinctInAggregations,
        &["`distinct_users`"],
    );
}

// ---------------------------------------------------------------------------------------
// Rule 3: duplicate_alias

#[test]
fn duplicate_explicit_alias() {
    only_q(
        q_user(json!([{"field": "api_key", "name": "a"}, {"field": "language", "name": "a"}])),
        "query_requests[0].selections[1].name",
        Rule::DuplicateAlias,
        &["`a`", "rule 3", "query_requests[0].selections[0].name"],
    );
}

#[test]
fn duplicate_default_aliases() {
    // Two default aliases.
    only_q(
        q_user(json!([
            sel_agg("num_acceptances", Agg::Sum),
            sel_agg("num_acceptances", Agg::Sum)
        ])),
        "query_requests[0].selections[1].name",
        Rule::DuplicateAlias,
        &["`sum_num_acceptances`"],
    );
    // An explicit alias equal to an earlier default one.
    only_q(
        q_user(json!([
            sel_agg("num_acceptances", Agg::Sum),
            {"field": "num_lines_accepted", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "sum_num_acceptances"}
        ])),
        "query_requests[0].selections[1].name",
        Rule::DuplicateAlias,
        &["`sum_num_acceptances`"],
    );
    // A default alias equal to an earlier explicit one.
    only_q(
        q_user(json!([
            {"field": "api_key", "name": "language"},
            sel("language")
        ])),
        "query_requests[0].selections[1].name",
        Rule::DuplicateAlias,
        &["`language`"],
    );
    // The same field with two functions: distinct default aliases.
    let p = plan(q_user(json!([
        sel_agg("num_acceptances", Agg::Sum),
        sel_agg("num_acceptances", Agg::Max)
    ])));
    let aliases: Vec<_> = p.selections.iter().map(|s| s.alias.as_str()).collect();
    assert_eq!(aliases, ["sum_num_acceptances", "max_num_acceptances"]);
}

#[test]
fn local_date_default_alias_is_the_name_as_written_in_lower_case() {
    let p = plan(q_user(json!([
        sel("date UTC-8"),
        sel("date UTC+5:30"),
        sel("date UTC+05:30")
    ])));
    let aliases: Vec<_> = p.selections.iter().map(|s| s.alias.as_str()).collect();
    assert_eq!(aliases, ["date utc-8", "date utc+5:30", "date utc+05:30"]);
    let p = plan(q_user(json!([sel_agg("date UTC-8", Agg::Count)])));
    assert_eq!(p.selections[0].alias, "count_date utc-8");
    only_q(
        q_user(json!([sel("date UTC-8"), {"field": "language", "name": "date utc-8"}])),
        "query_requests[0].selections[1].name",
        Rule::DuplicateAlias,
        &["`date utc-8`"],
    );
    // One field in all its spellings, but two different default aliases: no duplicate;
    // the same spelling twice is one.
    only_q(
        q_user(json!([sel("date UTC-8"), sel("date UTC-8")])),
        "query_requests[0].selections[1].name",
        Rule::DuplicateAlias,
        &["`date utc-8`"],
    );
}

#[test]
fn duplicate_alias_marks_every_later_occurrence() {
    let v = errors(analytics_body(&query(q_user(json!([
        {"field": "api_key", "name": "x"},
        {"field": "language", "name": "x"},
        {"field": "ide", "name": "y"},
        {"field": "version", "name": "x"},
        {"field": "hour", "name": "y"},
    ])))));
    assert_eq!(
        paths(&v),
        [
            (
                "query_requests[0].selections[1].name".into(),
                Rule::DuplicateAlias
            ),
            (
                "query_requests[0].selections[3].name".into(),
                Rule::DuplicateAlias
            ),
            (
                "query_requests[0].selections[4].name".into(),
                Rule::DuplicateAlias
            ),
        ]
    );
    assert!(v[1].message().contains("`x`"));
    assert!(v[2].message().contains("`y`"));
}

#[test]
fn duplicate_alias_selections_come_before_aggregations() {
    // The aggregation is the later occurrence, even when written first in the body.
    let body = r#"{"query_requests": [{
        "aggregations": [{"field": "language", "name": "sum_num_acceptances"}],
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
        "data_source": "QUERY_DATA_SOURCE_USER_DATA"
    }]}"#;
    only(
        analytics_body(body),
        "query_requests[0].aggregations[0].name",
        Rule::DuplicateAlias,
        &["`sum_num_acceptances`"],
    );
    // Shape 3: the selection's default alias is the field, so naming the group-by like
    // the field collides.
    only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [sel("language")],
            "aggregations": [group("language", "language")],
        }),
        "query_requests[0].aggregations[0].name",
        Rule::DuplicateAlias,
        &["`language`"],
    );
    // Between two aggregations: the second.
    only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [sel_agg("num_acceptances", Agg::Sum)],
            "aggregations": [group("language", "g"), group("ide", "g")],
        }),
        "query_requests[0].aggregations[1].name",
        Rule::DuplicateAlias,
        &["`g`"],
    );
}

#[test]
fn unresolved_selections_take_no_part_in_rule_3() {
    only_q(
        q_user(json!([{"field": "bogus", "name": "a"}, {"field": "api_key", "name": "a"}])),
        "query_requests[0].selections[0].field",
        Rule::UnknownField,
        &["`bogus`"],
    );
}

#[test]
fn aliases_are_compared_exactly() {
    let p = plan(q_user(json!([
        {"field": "api_key", "name": "A"},
        {"field": "language", "name": "a"}
    ])));
    assert_eq!(p.selections[1].alias, "a");
}

// ---------------------------------------------------------------------------------------
// Rule 5 and group-by roles: invalid_aggregation

#[test]
fn contract_example_message_of_rule_5() {
    only_q(
        q_user(json!([sel_agg("api_key", Agg::Sum)])),
        "query_requests[0].selections[0].aggregation_function",
        Rule::InvalidAggregation,
        &[
            "aggregation QUERY_AGGREGATION_SUM is not valid for field `api_key` of QUERY_DATA_SOURCE_USER_DATA (valid: UNSPECIFIED, COUNT)",
        ],
    );
}

#[test]
fn rule_5_for_every_field_and_function_of_every_table() {
    let (mut bad, mut good) = (0, 0);
    for spec in SOURCES {
        for f in spec.fields.iter().filter(|f| f.select) {
            for &agg in Agg::ALL {
                let q = json!({"data_source": ds(spec.source), "selections": [sel_agg(written(f), agg)]});
                if f.allows(agg) {
                    let p = plan(q);
                    assert_eq!(p.selections[0].agg, agg);
                    good += 1;
                } else {
                    only_q(
                        q,
                        "query_requests[0].selections[0].aggregation_function",
                        Rule::InvalidAggregation,
                        &[
                            agg.as_str(),
                            &format!("`{}`", written(f)),
                            spec.source.as_str(),
                            &f.valid_text(),
                        ],
                    );
                    bad += 1;
                }
            }
        }
    }
    assert!(bad > 100 && good > 60, "{bad} invalid, {good} valid pairs");
}

#[test]
fn unspecified_is_valid_for_every_field() {
    // Contract section 3: beyond the spec's tables, metrics and booleans included; in
    // shape 4 such a selection is the record's own value.
    for spec in SOURCES {
        let all: Vec<Value> = spec
            .fields
            .iter()
            .filter(|f| f.select && f.role != Role::Distinct)
            .map(|f| sel_agg(written(f), Agg::Unspecified))
            .collect();
        let p = plan(json!({"data_source": ds(spec.source), "selections": all}));
        let want = if spec.groupable {
            QueryShape::Raw
        } else {
            QueryShape::Pcw
        };
        assert_eq!(p.shape, want, "{}", spec.source);
    }
}

#[test]
fn group_by_on_a_metric_or_boolean() {
    let mut tested = 0;
    for source in grouping_sources() {
        for f in source
            .spec()
            .fields
            .iter()
            .filter(|f| f.role == Role::Metric)
        {
            let what = if f.ty == ValueType::Bool {
                "a boolean"
            } else {
                "a metric"
            };
            only_q(
                json!({
                    "data_source": ds(source),
                    "selections": [sel_agg(counted(source), Agg::Count)],
                    "aggregations": [group(f.name, "g")],
                }),
                "query_requests[0].aggregations[0].field",
                Rule::InvalidAggregation,
                &[&format!("`{}`", f.name), what, "group-by"],
            );
            tested += 1;
        }
    }
    // 3 autocomplete, 2 + 3 booleans chat, 6 + 1 boolean command, 3 agent.
    assert_eq!(tested, 18);
}

#[test]
fn any_group_by_on_pcw_is_invalid_aggregation_and_only_that() {
    let pcw = Source::PcwData.spec();
    let selections: Vec<Value> = pcw
        .fields
        .iter()
        .filter(|f| f.select)
        .map(|f| sel(f.name))
        .collect();
    // Every field of the table (one query), and an unknown field with a duplicate name,
    // a missing field, a missing name (another): each entry gives exactly one
    // invalid_aggregation.
    let every_field: Vec<Value> = pcw
        .fields
        .iter()
        .map(|f| group(f.name, &format!("g_{}", f.name)))
        .collect();
    let odd = vec![
        group("bogus", "percent_code_written"),
        json!({"name": "x"}),
        json!({"field": "language"}),
    ];
    let (n0, n1) = (every_field.len(), odd.len());
    let v = errors(analytics_body(&queries(&[
        json!({"data_source": ds(Source::PcwData), "selections": selections, "aggregations": every_field}),
        json!({"data_source": ds(Source::PcwData), "selections": [sel("user_bytes")], "aggregations": odd}),
    ])));
    let want: Vec<_> = (0..n0)
        .map(|k| format!("query_requests[0].aggregations[{k}].field"))
        .chain((0..n1).map(|k| format!("query_requests[1].aggregations[{k}].field")))
        .map(|p| (p, Rule::InvalidAggregation))
        .collect();
    assert_eq!(paths(&v), want, "{}", show(&v));
    assert!(v[0].message().contains("QUERY_DATA_SOURCE_PCW_DATA"));
    assert!(v[0].message().contains("no group-by fields"));
}

#[test]
fn pcw_answers_one_item_whatever_its_selections() {
    let p = plan(json!({
        "data_source": ds(Source::PcwData),
        "selections": [sel("percent_code_written"), sel_agg("user_bytes", Agg::Unspecified)],
        "filters": [filt("language", FilterOp::Equal, "GO"), filt("version", FilterOp::Ge, "1.2")],
    }));
    assert_eq!(p.shape, QueryShape::Pcw);
    assert_eq!(p.filters.len(), 2);
}

// ---------------------------------------------------------------------------------------
// unknown_field

#[test]
fn unknown_selection_field() {
    only_q(
        q_user(json!([sel("bogus")])),
        "query_requests[0].selections[0].field",
        Rule::UnknownField,
        &[
            "`bogus`",
            "QUERY_DATA_SOURCE_USER_DATA",
            "`num_acceptances`",
        ],
    );
    // A typo gets a suggestion.
    only_q(
        q_user(json!([sel("num_aceptances")])),
        "query_requests[0].selections[0].field",
        Rule::UnknownField,
        &["`num_aceptances`", "did you mean `num_acceptances`?"],
    );
}

#[test]
fn fields_of_other_sources_are_unknown() {
    // Each source's fields are exactly its table's: a name of another table that this
    // one lacks is unknown in every place.
    let mut tested = 0;
    for spec in SOURCES.iter().filter(|s| s.groupable) {
        for other in SOURCES {
            for f in other.fields.iter().filter(|f| !f.is_local_date()) {
                if spec.resolve(f.name).is_some() {
                    continue;
                }
                let q = json!({
                    "data_source": ds(spec.source),
                    "selections": [sel(f.name), sel_agg(counted(spec.source), Agg::Count)],
                    "filters": [filt(f.name, FilterOp::Equal, "1")],
                    "aggregations": [group(f.name, "g")],
                });
                let v = errors(analytics_body(&query(q)));
                assert_eq!(
                    paths(&v),
                    [
                        (
                            "query_requests[0].selections[0].field".into(),
                            Rule::UnknownField
                        ),
                        (
                            "query_requests[0].filters[0].name".into(),
                            Rule::UnknownField
                        ),
                        (
                            "query_requests[0].aggregations[0].field".into(),
                            Rule::UnknownField
                        ),
                    ],
                    "{} in {}: {}",
                    f.name,
                    spec.source,
                    show(&v)
                );
                assert!(
                    v.iter()
                        .all(|v| v.message().contains(&format!("`{}`", f.name)))
                );
                tested += 1;
            }
        }
    }
    assert!(tested > 40, "{tested}");
}

#[test]
fn local_date_offsets_out_of_range_or_misspelt_are_unknown() {
    for bad in [
        "date UTC+15",
        "date UTC-13",
        "date UTC-12:30",
        "date UTC+5:60",
        "date UTC+5:3",
        "date UTC8",
        "date utc-8",
        "date UTC+123",
        "date America/Nowhere",
        "date Mars/Olympus_Mons",
        "date America/New_York/",
    ] {
        only_q(
            q_user(json!([sel(bad)])),
            "query_requests[0].selections[0].field",
            Rule::UnknownField,
            &[&format!("`{bad}`")],
        );
        only_q(
            json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [sel("api_key")],
                   "filters": [filt(bad, FilterOp::Equal, "2025-05-01")]}),
            "query_requests[0].filters[0].name",
            Rule::UnknownField,
            &[&format!("`{bad}`")],
        );
        only_q(
            json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [sel_agg("api_key", Agg::Count)],
                   "aggregations": [group(bad, "d")]}),
            "query_requests[0].aggregations[0].field",
            Rule::UnknownField,
            &[&format!("`{bad}`")],
        );
    }
    for (good, name) in [
        ("date America/New_York", "date America/New_York"),
        ("date europe/berlin", "date Europe/Berlin"),
        ("date UTC", "date UTC"),
        ("date Etc/GMT+5", "date Etc/GMT+5"),
        ("date Asia/Kolkata", "date Asia/Kolkata"),
    ] {
        let p = plan(q_user(json!([sel(good)])));
        assert_eq!(p.selections[0].field.canonical_name(), name, "{good}");
        assert_eq!(p.selections[0].alias, good.to_lowercase());
    }
    for (good, minutes) in [
        ("date UTC+14", 840),
        ("date UTC-12", -720),
        ("date UTC-12:00", -720),
        ("date UTC+14:00", 840),
        ("date UTC+0", 0),
        ("date UTC-0", 0),
        ("date UTC+5:45", 345),
        ("date UTC+05", 300),
    ] {
        let p = plan(q_user(json!([sel(good)])));
        assert_eq!(
            p.selections[0].field.zone(),
            crate::zone::LocalZone::Fixed(minutes),
            "{good}"
        );
        assert_eq!(p.selections[0].alias, good.to_lowercase());
    }
    // Only the sources whose table lists `date UTC-x` have it.
    for spec in SOURCES {
        let has = spec.fields.iter().any(Field::is_local_date);
        let q = json!({"data_source": ds(spec.source), "selections": [sel("date UTC-8")]});
        if has {
            let p = plan(q);
            assert_eq!(p.selections[0].field.canonical_name(), "date UTC-08:00");
        } else {
            only_q(
                q,
                "query_requests[0].selections[0].field",
                Rule::UnknownField,
                &["`date UTC-8`"],
            );
        }
    }
}

#[test]
fn filters_on_fields_that_are_not_filter_fields() {
    // `distinct_*`, PCW metrics, the agent's `metadata`: every field of every table that
    // is not a filter field.
    let mut tested = 0;
    for spec in SOURCES {
        let keep = spec
            .fields
            .iter()
            .find(|f| f.select)
            .expect("a selectable field");
        for f in spec.fields.iter().filter(|f| !f.filter) {
            only_q(
                json!({"data_source": ds(spec.source), "selections": [sel(keep.name)],
                       "filters": [filt(f.name, FilterOp::Equal, "1")]}),
                "query_requests[0].filters[0].name",
                Rule::UnknownField,
                &[&format!("`{}`", f.name), "filter fields"],
            );
            tested += 1;
        }
    }
    // 3 + 6 + 1 + 2: autocomplete distinct, PCW metrics, metadata, agent distinct.
    assert_eq!(tested, 12);
}

#[test]
fn agent_metadata_is_select_only() {
    let agent = ds(Source::AgentData);
    let p = plan(json!({"data_source": agent, "selections": [sel("metadata"), sel("api_key")]}));
    assert_eq!(p.shape, QueryShape::Raw);
    only_q(
        json!({"data_source": agent, "selections": [sel_agg("api_key", Agg::Count)],
               "aggregations": [group("metadata", "m")]}),
        "query_requests[0].aggregations[0].field",
        Rule::UnknownField,
        &["`metadata`", "group-by fields"],
    );
    only_q(
        json!({"data_source": agent, "selections": [sel("api_key")],
               "filters": [filt("metadata", FilterOp::Equal, "{}")]}),
        "query_requests[0].filters[0].name",
        Rule::UnknownField,
        &["`metadata`"],
    );
    only_q(
        json!({"data_source": agent, "selections": [sel_agg("metadata", Agg::Count)]}),
        "query_requests[0].selections[0].aggregation_function",
        Rule::InvalidAggregation,
        &["`metadata`", "QUERY_AGGREGATION_COUNT"],
    );
}

#[test]
fn pcw_filter_only_fields_cannot_be_selected() {
    let pcw = Source::PcwData.spec();
    for f in pcw.fields.iter().filter(|f| !f.select) {
        only_q(
            json!({"data_source": ds(Source::PcwData), "selections": [sel(f.name)]}),
            "query_requests[0].selections[0].field",
            Rule::UnknownField,
            &[&format!("`{}`", f.name), "percent_code_written"],
        );
    }
    // The six that can.
    assert_eq!(pcw.fields.iter().filter(|f| f.select).count(), 6);
}

#[test]
fn request_fields_not_in_the_spec() {
    let v = errors(analytics_body(
        r#"{"serviceKy": "k", "query_requests": [{
            "data_sorce": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "api_key", "aggregation_functon": "QUERY_AGGREGATION_COUNT", "alias": "x"}],
            "agregations": []
        }]}"#,
    ));
    assert_eq!(
        paths(&v),
        [
            ("query_requests[0].data_source".into(), Rule::MissingField),
            (
                "query_requests[0].selections[0].aggregation_functon".into(),
                Rule::UnknownField
            ),
            (
                "query_requests[0].selections[0].alias".into(),
                Rule::UnknownField
            ),
            ("query_requests[0].data_sorce".into(), Rule::UnknownField),
            ("query_requests[0].agregations".into(), Rule::UnknownField),
            ("serviceKy".into(), Rule::UnknownField),
        ],
        "{}",
        show(&v)
    );
    let msg = |p: &str| {
        v.iter()
            .find(|v| v.path() == p)
            .map(|v| v.message().to_string())
            .unwrap()
    };
    assert!(msg("serviceKy").contains("did you mean `serviceKey`?"));
    assert!(msg("query_requests[0].data_sorce").contains("did you mean `data_source`?"));
    assert!(msg("query_requests[0].agregations").contains("did you mean `aggregations`?"));
    assert!(
        msg("query_requests[0].selections[0].aggregation_functon")
            .contains("did you mean `aggregation_function`?")
    );
    assert!(msg("query_requests[0].selections[0].alias").contains("unknown field `alias`"));
    assert!(
        msg("query_requests[0].selections[0].alias")
            .contains("known: field, name, aggregation_function")
    );
}

#[test]
fn unknown_fields_of_every_operation() {
    only(
        user_page_body(r#"{"service_key": "k", "groupNam": "eng"}"#),
        "groupNam",
        Rule::UnknownField,
        &["`groupNam`", "did you mean `groupName`?"],
    );
    only(
        agent_body(r#"{"query_requests": [{"agent_lines": {"x": 1}}]}"#),
        "query_requests[0].agent_lines.x",
        Rule::UnknownField,
        &["`x`", "takes no fields"],
    );
    only(
        agent_body(r#"{"query_requests": [{"agent_lines": {}, "agent_line": {}}]}"#),
        "query_requests[0].agent_line",
        Rule::UnknownField,
        &["did you mean `agent_lines`?"],
    );
    only(
        get_config_body(r#"{"team_level": true, "team": true}"#),
        "team",
        Rule::UnknownField,
        &["`team`"],
    );
    only(
        config_body(r#"{"team_level": true, "clear_add_on_credit_cap": true, "set_cap": 5}"#),
        "set_cap",
        Rule::UnknownField,
        &["`set_cap`"],
    );
    only(
        ingest_body(r#"{"kind": "groups", "records": [], "record": []}"#),
        "record",
        Rule::UnknownField,
        &["did you mean `records`?"],
    );
    let d = decode::<crate::wire::GetTeamCreditBalanceRequest>(br#"{"service_key":"k","x":1}"#)
        .unwrap();
    assert_eq!(paths(&d.violations), [("x".into(), Rule::UnknownField)]);
}

// ---------------------------------------------------------------------------------------
// unknown_data_source

#[test]
fn unknown_data_source_reports_nothing_else_for_that_query() {
    let v = only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER",
            "selections": [sel_agg("bogus", Agg::Sum), sel("language"), sel("language")],
            "filters": [filt("hour", FilterOp::Ge, "yesterday"), {"name": "x"}],
            "aggregations": [group("distinct_users", "d"), {"field": "num_acceptances"}],
        }),
        "query_requests[0].data_source",
        Rule::UnknownDataSource,
        &[
            "`QUERY_DATA_SOURCE_USER`",
            "QUERY_DATA_SOURCE_USER_DATA, QUERY_DATA_SOURCE_CHAT_DATA",
            "QUERY_DATA_SOURCE_AGENT_DATA",
            "did you mean `QUERY_DATA_SOURCE_USER_DATA`?",
        ],
    );
    assert_eq!(v.rule().as_str(), "unknown_data_source");
    // Identifiers are exact.
    only_q(
        json!({"data_source": "query_data_source_user_data", "selections": []}),
        "query_requests[0].data_source",
        Rule::UnknownDataSource,
        &["`query_data_source_user_data`"],
    );
    // A missing data source likewise reports only itself.
    only_q(
        json!({"selections": [sel("bogus")], "aggregations": [group("x", "x")]}),
        "query_requests[0].data_source",
        Rule::MissingField,
        &["query_requests[0].data_source", "required"],
    );
    // Other queries of the request are still checked.
    let v = errors(analytics_body(&queries(&[
        json!({"data_source": "NOPE", "selections": [sel("bogus")]}),
        q_user(json!([sel("bogus")])),
    ])));
    assert_eq!(
        paths(&v),
        [
            (
                "query_requests[0].data_source".into(),
                Rule::UnknownDataSource
            ),
            (
                "query_requests[1].selections[0].field".into(),
                Rule::UnknownField
            ),
        ]
    );
}

#[test]
fn every_source_identifier_is_known() {
    for s in Source::ALL {
        let p = plan(json!({"data_source": s.as_str(), "selections": [sel_agg(
            s.spec().fields.iter().find(|f| f.select).unwrap().name, Agg::Unspecified)]}));
        assert_eq!(p.source, *s);
    }
}

// ---------------------------------------------------------------------------------------
// missing_field

#[test]
fn missing_query_requests() {
    for body in [
        r#"{"service_key": "k"}"#,
        r#"{"query_requests": []}"#,
        r#"{"query_requests": null}"#,
        r#"{"queryRequests": []}"#,
    ] {
        only(
            analytics_body(body),
            "query_requests",
            Rule::MissingField,
            &["`query_requests` is required"],
        );
    }
}

#[test]
fn missing_fields_of_a_query() {
    for ds_value in [json!(null), json!("")] {
        only_q(
            json!({"data_source": ds_value, "selections": [sel("api_key")]}),
            "query_requests[0].data_source",
            Rule::MissingField,
            &["query_requests[0].data_source"],
        );
    }
    only(
        analytics_body(r#"{"query_requests": [{}]}"#),
        "query_requests[0].data_source",
        Rule::MissingField,
        &[],
    );
    for selections in [json!(null), json!([])] {
        only_q(
            json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": selections}),
            "query_requests[0].selections",
            Rule::MissingField,
            &["query_requests[0].selections", "at least one selection"],
        );
    }
    only_q(
        json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA"}),
        "query_requests[0].selections",
        Rule::MissingField,
        &[],
    );
}

#[test]
fn missing_fields_of_selections_filters_and_aggregations() {
    for s in [
        json!({}),
        json!({"field": ""}),
        json!({"field": null, "name": "x"}),
    ] {
        only_q(
            q_user(json!([s])),
            "query_requests[0].selections[0].field",
            Rule::MissingField,
            &["query_requests[0].selections[0].field"],
        );
    }
    let base = |filters: Value| json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [sel("api_key")], "filters": filters});
    only_q(
        base(json!([{"filter": "QUERY_FILTER_EQUAL", "value": "x"}])),
        "query_requests[0].filters[0].name",
        Rule::MissingField,
        &[],
    );
    only_q(
        base(json!([{"name": "api_key", "filter": "", "value": "x"}])),
        "query_requests[0].filters[0].filter",
        Rule::MissingField,
        &["query_requests[0].filters[0].filter"],
    );
    only_q(
        base(json!([{"name": "api_key", "filter": "QUERY_FILTER_EQUAL"}])),
        "query_requests[0].filters[0].value",
        Rule::MissingField,
        &[],
    );
    // Every required field of a filter at once, in the filter's field order.
    let v = errors(analytics_body(&query(base(json!([{}])))));
    assert_eq!(
        paths(&v),
        [
            (
                "query_requests[0].filters[0].name".into(),
                Rule::MissingField
            ),
            (
                "query_requests[0].filters[0].filter".into(),
                Rule::MissingField
            ),
            (
                "query_requests[0].filters[0].value".into(),
                Rule::MissingField
            ),
        ]
    );
    let grouped = |aggs: Value| json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [sel_agg("api_key", Agg::Count)], "aggregations": aggs});
    only_q(
        grouped(json!([{"name": "g"}])),
        "query_requests[0].aggregations[0].field",
        Rule::MissingField,
        &[],
    );
    only_q(
        grouped(json!([{"field": "language"}])),
        "query_requests[0].aggregations[0].name",
        Rule::MissingField,
        &["query_requests[0].aggregations[0].name", "alias"],
    );
    only_q(
        grouped(json!([{"field": "language", "name": ""}])),
        "query_requests[0].aggregations[0].name",
        Rule::MissingField,
        &[],
    );
}

#[test]
fn empty_filter_values() {
    // `""` is a value for text (and version) fields, `missing_field` for every other type.
    for spec in SOURCES {
        let keep = spec.fields.iter().find(|f| f.select).unwrap();
        for f in spec.fields.iter().filter(|f| f.filter) {
            let q = json!({"data_source": ds(spec.source), "selections": [sel(keep.name)],
                           "filters": [filt(written(f), FilterOp::Equal, "")]});
            if matches!(f.ty, ValueType::Text | ValueType::Version) {
                let p = plan(q);
                assert_eq!(
                    p.filters[0].test,
                    FilterTest::AnyOf(vec![FilterValue::Text(String::new())])
                );
            } else {
                only_q(
                    q,
                    "query_requests[0].filters[0].value",
                    Rule::MissingField,
                    &[&format!("`{}`", written(f))],
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// invalid_value

/// A one-filter query on `name` of `source`.
fn filter_q(source: Source, name: &str, op: FilterOp, value: &str) -> Value {
    let keep = source.spec().fields.iter().find(|f| f.select).unwrap();
    json!({"data_source": ds(source), "selections": [sel(keep.name)], "filters": [filt(name, op, value)]})
}

/// Values that do not parse for a type (never `""`, which is `missing_field`).
fn bad_values(ty: ValueType) -> &'static [&'static str] {
    match ty {
        ValueType::Date => &[
            "2025-02-30",
            "2025-5-1",
            "05/01/2025",
            "2025-05-01T00:00:00Z",
            "today",
        ],
        ValueType::Hour | ValueType::Timestamp => &[
            "2025-05-01T13:00:00",
            "2025-05-01 13:00:00 +0100 CET",
            "2025-05-01 13:00:00 UTC",
            "2025-05-01T25:00:00Z",
            "2025-5-1",
            "yesterday",
        ],
        ValueType::Int => &[
            "1.5",
            "1e3",
            "ten",
            "99999999999999999999",
            " 1",
            "+1",
            "0x10",
        ],
        ValueType::Bool => &["yes", "TRUE", "1", "True"],
        _ => &[],
    }
}

#[test]
fn filter_values_that_do_not_parse_for_their_type() {
    let mut tested = 0;
    for spec in SOURCES {
        for f in spec.fields.iter().filter(|f| f.filter) {
            for bad in bad_values(f.ty) {
                only_q(
                    filter_q(spec.source, written(f), FilterOp::Equal, bad),
                    "query_requests[0].filters[0].value",
                    Rule::InvalidValue,
                    &[
                        &format!("`{bad}`"),
                        &format!("`{}`", written(f)),
                        "expected",
                    ],
                );
                tested += 1;
            }
        }
    }
    assert!(tested > 100, "{tested}");
}

#[test]
fn request_timestamps() {
    only(
        analytics_body(&json!({"start_timestamp": "2025-05-01", "query_requests": [q_user(json!([sel("api_key")]))]}).to_string()),
        "start_timestamp",
        Rule::InvalidValue,
        &["`start_timestamp`", "\"2025-05-01\"", "RFC 3339"],
    );
    only(
        analytics_body(&json!({"end_timestamp": "2025-05-01T00:00:00", "query_requests": [q_user(json!([sel("api_key")]))]}).to_string()),
        "end_timestamp",
        Rule::InvalidValue,
        &["`end_timestamp`", "\"2025-05-01T00:00:00\""],
    );
    // start after end: at `end_timestamp`, also when the range is not used (no PCW).
    only(
        analytics_body(
            &json!({
                "start_timestamp": "2025-05-02T00:00:00Z",
                "end_timestamp": "2025-05-01T21:00:00-02:00",
                "query_requests": [q_user(json!([sel("api_key")]))],
            })
            .to_string(),
        ),
        "end_timestamp",
        Rule::InvalidValue,
        &["`end_timestamp` 2025-05-01T23:00:00Z is before `start_timestamp` 2025-05-02T00:00:00Z"],
    );
    // Equal ends are an empty range, not an error; either end may be absent.
    let p = analytics_body(
        &json!({
            "start_timestamp": "2025-05-01T02:00:00+02:00",
            "end_timestamp": "2025-05-01T00:00:00Z",
            "query_requests": [q_user(json!([sel("api_key")]))],
        })
        .to_string(),
    )
    .unwrap();
    assert_eq!(p.range.start, p.range.end);
    assert_eq!(p.range.start.unwrap().to_rfc3339(), "2025-05-01T00:00:00Z");
    let p = analytics_body(
        &json!({
            "end_timestamp": "2025-05-01T00:00:00.5Z",
            "query_requests": [q_user(json!([sel("api_key")]))],
        })
        .to_string(),
    )
    .unwrap();
    assert_eq!(p.range.start, None);
    assert_eq!(p.range.end.unwrap().to_rfc3339(), "2025-05-01T00:00:00.5Z");
}

#[test]
fn time_range_rules_hold_in_every_operation() {
    let range =
        r#""start_timestamp": "2025-05-02T00:00:00Z", "end_timestamp": "2025-05-01T00:00:00Z""#;
    only(
        user_page_body(&format!("{{{range}}}")),
        "end_timestamp",
        Rule::InvalidValue,
        &["before"],
    );
    only(
        agent_body(&format!(
            r#"{{{range}, "query_requests": [{{"agent_runs": {{}}}}]}}"#
        )),
        "end_timestamp",
        Rule::InvalidValue,
        &["before"],
    );
    let v = errors(user_page_body(
        r#"{"start_timestamp": "May 1", "end_timestamp": "2025-13-01T00:00:00Z"}"#,
    ));
    assert_eq!(
        paths(&v),
        [
            ("start_timestamp".into(), Rule::InvalidValue),
            ("end_timestamp".into(), Rule::InvalidValue)
        ]
    );
    assert!(v[0].message().contains("\"May 1\""));
}

#[test]
fn cap_values() {
    for (cap, want) in [
        ("0", 0),
        ("\"0\"", 0),
        ("1000000000", 1_000_000_000),
        ("\"500\"", 500),
    ] {
        let body = format!(r#"{{"team_level": true, "set_add_on_credit_cap": {cap}}}"#);
        assert_eq!(
            config_body(&body).unwrap(),
            (CapScope::Team, CapAction::Set(want))
        );
    }
    for (cap, shown) in [("-1", "-1"), ("1000000001", "1000000001"), ("\"-5\"", "-5")] {
        let body = format!(r#"{{"team_level": true, "set_add_on_credit_cap": {cap}}}"#);
        only(
            config_body(&body),
            "set_add_on_credit_cap",
            Rule::InvalidValue,
            &[
                &format!("`set_add_on_credit_cap` {shown} is out of range"),
                "0 to 1000000000",
            ],
        );
    }
    for cap in [
        "\"\"",
        "1.5",
        "1e3",
        "\"1.0\"",
        "\"12abc\"",
        "9223372036854775808",
        "\" 5\"",
    ] {
        let body = format!(r#"{{"team_level": true, "set_add_on_credit_cap": {cap}}}"#);
        only(
            config_body(&body),
            "set_add_on_credit_cap",
            Rule::InvalidValue,
            &["set_add_on_credit_cap"],
        );
    }
}

#[test]
fn wrong_json_kinds_stop_before_validation() {
    // Contract section 2: the kind only; every such problem is listed, in document order.
    assert_eq!(
        kind_errors::<AnalyticsRequest>(
            r#"{"query_requests": [{"selections": [{"field": 5}], "filters": {}}], "group_name": ["g"]}"#
        ),
        [
            ("group_name".into(), Rule::InvalidValue),
            (
                "query_requests[0].selections[0].field".into(),
                Rule::InvalidValue
            ),
            ("query_requests[0].filters".into(), Rule::InvalidValue),
        ]
    );
    assert_eq!(
        kind_errors::<GetUsageConfigRequest>(r#"{"team_level": "true"}"#),
        [("team_level".into(), Rule::InvalidValue)]
    );
    assert_eq!(
        kind_errors::<UsageConfigRequest>(r#"{"set_add_on_credit_cap": true, "group_id": 7}"#),
        [
            ("set_add_on_credit_cap".into(), Rule::InvalidValue),
            ("group_id".into(), Rule::InvalidValue)
        ]
    );
    assert_eq!(
        kind_errors::<AgentAnalyticsRequest>(
            r#"{"emails": "a@b.c", "ide_types": [1], "query_requests": [{"agent_runs": []}]}"#
        ),
        [
            ("emails".into(), Rule::InvalidValue),
            ("ide_types[0]".into(), Rule::InvalidValue),
            ("query_requests[0].agent_runs".into(), Rule::InvalidValue),
        ]
    );
    assert_eq!(
        kind_errors::<IngestRequest>(r#"{"kind": "groups", "records": [1, null, {}]}"#),
        [
            ("records[0]".into(), Rule::InvalidValue),
            ("records[1]".into(), Rule::InvalidValue)
        ]
    );
    // The message names the path and both kinds.
    let Err(KindErrors(v)) = decode::<AnalyticsRequest>(br#"{"query_requests": "all"}"#) else {
        panic!("a kind error");
    };
    assert_eq!(
        v[0].message(),
        "`query_requests` must be an array, not a string"
    );
}

// ---------------------------------------------------------------------------------------
// unknown_enum_value

#[test]
fn unknown_aggregation_function_and_filter_operator() {
    only_q(
        q_user(json!([{"field": "num_acceptances", "aggregation_function": "SUM"}])),
        "query_requests[0].selections[0].aggregation_function",
        Rule::UnknownEnumValue,
        &[
            "unknown aggregation function `SUM`",
            &Agg::IDENTIFIERS.join(", "),
        ],
    );
    only_q(
        json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [sel("api_key")],
               "filters": [{"name": "language", "filter": "QUERY_FILTER_LIKE", "value": "GO"}]}),
        "query_requests[0].filters[0].filter",
        Rule::UnknownEnumValue,
        &[
            "unknown filter operator `QUERY_FILTER_LIKE`",
            &FilterOp::IDENTIFIERS.join(", "),
        ],
    );
}

#[test]
fn closed_enum_filter_values() {
    let mut tested = 0;
    for spec in SOURCES {
        for f in spec.fields.iter().filter(|f| f.filter) {
            let ValueType::Enum(ids) = f.ty else { continue };
            for op in FilterOp::ALL {
                for id in ids {
                    let p = plan(filter_q(spec.source, f.name, *op, id));
                    let want = FilterValue::Text(id.to_string());
                    let test = if *op == FilterOp::Equal {
                        FilterTest::AnyOf(vec![want])
                    } else {
                        FilterTest::Compare(*op, want)
                    };
                    assert_eq!(p.filters[0].test, test);
                }
            }
            let lower = ids[0].to_ascii_lowercase();
            for bad in ["NOPE", lower.as_str()] {
                only_q(
                    filter_q(spec.source, f.name, FilterOp::Equal, bad),
                    "query_requests[0].filters[0].value",
                    Rule::UnknownEnumValue,
                    &[
                        &format!("unknown value `{bad}` for `{}`", f.name),
                        &ids.join(", "),
                    ],
                );
            }
            tested += 1;
        }
    }
    // latest_intent_type, command_source, provider_source, the agent's mode.
    assert_eq!(tested, 4);
}

#[test]
fn unknown_ide_types() {
    let v = only(
        agent_body(
            r#"{"ide_types": ["editor", "vscode"], "query_requests": [{"agent_lines": {}}]}"#,
        ),
        "ide_types[1]",
        Rule::UnknownEnumValue,
        &["unknown IDE type `vscode`", "editor, plugin"],
    );
    assert_eq!(v.rule().as_str(), "unknown_enum_value");
    let v = errors(agent_body(
        r#"{"ideTypes": ["", "Editor", "plugin"], "query_requests": [{"agent_lines": {}}]}"#,
    ));
    assert_eq!(
        paths(&v),
        [
            ("ide_types[0]".into(), Rule::UnknownEnumValue),
            ("ide_types[1]".into(), Rule::UnknownEnumValue)
        ]
    );
}

#[test]
fn unknown_ingest_kind() {
    only(
        ingest_body(r#"{"kind": "autocompletes", "records": [{"x": 1}]}"#),
        "kind",
        Rule::UnknownEnumValue,
        &[
            "unknown record kind `autocompletes`",
            "did you mean `autocomplete`?",
        ],
    );
    only(
        ingest_body(r#"{"kind": "", "records": []}"#),
        "kind",
        Rule::MissingField,
        &["`kind` is required", "groups, users, autocomplete"],
    );
}

// ---------------------------------------------------------------------------------------
// invalid_operator

#[test]
fn ordered_operators_on_booleans() {
    let mut tested = 0;
    for spec in SOURCES {
        for f in spec
            .fields
            .iter()
            .filter(|f| f.filter && f.ty == ValueType::Bool)
        {
            for op in FilterOp::ALL {
                let q = filter_q(spec.source, f.name, *op, "true");
                if op.is_ordered() {
                    only_q(
                        q,
                        "query_requests[0].filters[0].filter",
                        Rule::InvalidOperator,
                        &[
                            op.as_str(),
                            &format!("`{}`", f.name),
                            "QUERY_FILTER_EQUAL and QUERY_FILTER_NOT_EQUAL",
                        ],
                    );
                    tested += 1;
                } else {
                    let p = plan(q);
                    let test = if *op == FilterOp::Equal {
                        FilterTest::AnyOf(vec![FilterValue::Bool(true)])
                    } else {
                        FilterTest::Compare(*op, FilterValue::Bool(true))
                    };
                    assert_eq!(p.filters[0].test, test);
                }
            }
        }
    }
    // 4 booleans (3 chat, 1 command) x 4 ordered operators.
    assert_eq!(tested, 16);
}

#[test]
fn ordered_operators_on_every_other_type_are_fine() {
    for spec in SOURCES {
        for f in spec
            .fields
            .iter()
            .filter(|f| f.filter && f.ty != ValueType::Bool)
        {
            let value = match f.ty {
                ValueType::Date => "2025-05-01",
                ValueType::Hour | ValueType::Timestamp => "2025-05-01T13:00:00Z",
                ValueType::Int => "3",
                ValueType::Enum(ids) => ids[0],
                _ => "x",
            };
            for op in FilterOp::ALL {
                let p = plan(filter_q(spec.source, written(f), *op, value));
                assert_eq!(p.filters.len(), 1);
                assert_eq!(p.filters[0].field.field(), f);
                match &p.filters[0].test {
                    FilterTest::AnyOf(v) => assert_eq!((*op, v.len()), (FilterOp::Equal, 1)),
                    FilterTest::Compare(o, _) => assert_eq!(o, op),
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// ungrouped_field

#[test]
fn shape_3_selections_must_be_group_by_fields() {
    only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [sel("language"), sel("ide")],
            "aggregations": [group("language", "lang")],
        }),
        "query_requests[0].selections[1].field",
        Rule::UngroupedField,
        &["`ide`", "not a group-by field"],
    );
}

#[test]
fn every_ungrouped_selection_is_reported() {
    let v = errors(analytics_body(&query(json!({
        "data_source": "QUERY_DATA_SOURCE_COMMAND_DATA",
        "selections": [sel("ide"), sel("language"), sel("lines_added"), sel("accepted")],
        "aggregations": [group("language", "lang")],
    }))));
    assert_eq!(
        paths(&v),
        [
            (
                "query_requests[0].selections[0].field".into(),
                Rule::UngroupedField
            ),
            (
                "query_requests[0].selections[2].field".into(),
                Rule::UngroupedField
            ),
            (
                "query_requests[0].selections[3].field".into(),
                Rule::UngroupedField
            ),
        ]
    );
    assert!(v[1].message().contains("`lines_added`"));
}

#[test]
fn shape_3_with_every_spelling_of_a_local_date() {
    let p = plan(json!({
        "data_source": "QUERY_DATA_SOURCE_CHAT_DATA",
        "selections": [sel("date UTC+5:30"), sel("date UTC+05:30")],
        "aggregations": [group("date UTC+05:30", "d")],
    }));
    assert_eq!(p.shape, QueryShape::GroupValues);
    assert_eq!(p.selections[0].field, p.group_by[0].field);
    // Another offset is another field.
    only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_CHAT_DATA",
            "selections": [sel("date UTC-8")],
            "aggregations": [group("date UTC-7", "d")],
        }),
        "query_requests[0].selections[0].field",
        Rule::UngroupedField,
        &["`date UTC-8`"],
    );
}

#[test]
fn group_by_without_a_name_is_still_a_group_by_field() {
    // The aggregation's own `missing_field` is the one mistake: the selection of its
    // field is grouped.
    only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [sel("language")],
            "aggregations": [{"field": "language"}],
        }),
        "query_requests[0].aggregations[0].name",
        Rule::MissingField,
        &[],
    );
}

#[test]
fn unresolved_selections_take_no_part_in_ungrouped_field() {
    only_q(
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [sel("language"), sel("bogus")],
            "aggregations": [group("language", "lang")],
        }),
        "query_requests[0].selections[1].field",
        Rule::UnknownField,
        &["`bogus`"],
    );
}

// ---------------------------------------------------------------------------------------
// conflicting_fields

#[test]
fn both_spellings_of_a_field() {
    // Top level, in either body order: the path is the snake_case one.
    for body in [
        r#"{"service_key": "a", "serviceKey": "b", "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [{"field": "api_key"}]}]}"#,
        r#"{"serviceKey": "b", "service_key": "a", "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [{"field": "api_key"}]}]}"#,
    ] {
        only(
            analytics_body(body),
            "service_key",
            Rule::ConflictingFields,
            &["`serviceKey` and `service_key` are two spellings of one field"],
        );
    }
    // Nested: each pair once, at the snake_case path.
    let v = errors(analytics_body(
        r#"{"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA", "dataSource": "QUERY_DATA_SOURCE_CHAT_DATA",
            "selections": [{"aggregationFunction": "QUERY_AGGREGATION_COUNT", "field": "api_key", "aggregation_function": "QUERY_AGGREGATION_COUNT"}]}]}"#,
    ));
    assert_eq!(
        paths(&v),
        [
            (
                "query_requests[0].data_source".into(),
                Rule::ConflictingFields
            ),
            (
                "query_requests[0].selections[0].aggregation_function".into(),
                Rule::ConflictingFields
            ),
        ]
    );
    assert!(v[0].message().contains("`dataSource`"));
    assert!(v[1].message().contains("`aggregationFunction`"));
}

#[test]
fn both_spellings_of_every_multi_word_field() {
    // Every field of every request object whose two spellings differ, derived from the
    // request specs.
    use crate::wire::decode::Kind;
    fn check<T: Request + std::fmt::Debug>(op: &str) -> usize {
        let mut n = 0;
        for f in T::SPEC.fields {
            let camel = crate::wire::decode::camel(f.name);
            if camel == f.name {
                continue;
            }
            let value = match f.kind {
                Kind::Bool => json!(true),
                Kind::Int => json!(5),
                Kind::Array(Kind::Object(_)) => json!([{}]),
                Kind::Array(_) => json!(["editor"]),
                _ => json!("v"),
            };
            let body = json!({ f.name: value, camel.clone(): value }).to_string();
            let d = decode::<T>(body.as_bytes()).unwrap();
            assert_eq!(
                paths(&d.violations),
                [(f.name.to_string(), Rule::ConflictingFields)],
                "{op}.{}",
                f.name
            );
            assert!(d.violations[0].message().contains(&format!("`{camel}`")));
            // `[]`, `""`, `false`, `null`: not given, so no conflict.
            let not_given = match f.kind {
                Kind::Bool => json!(false),
                Kind::Int => json!(null),
                Kind::Array(_) => json!([]),
                _ => json!(""),
            };
            let body = json!({ f.name: not_given, camel.clone(): value }).to_string();
            let d = decode::<T>(body.as_bytes()).unwrap();
            assert!(
                d.violations.is_empty(),
                "{op}.{}: {}",
                f.name,
                show(&d.violations)
            );
            n += 1;
        }
        n
    }
    let n = check::<AnalyticsRequest>("Analytics")
        + check::<UserPageAnalyticsRequest>("UserPageAnalytics")
        + check::<AgentAnalyticsRequest>("AgentAnalytics")
        + check::<GetUsageConfigRequest>("GetUsageConfig")
        + check::<UsageConfigRequest>("UsageConfig")
        + check::<crate::wire::GetTeamCreditBalanceRequest>("GetTeamCreditBalance")
        + check::<IngestRequest>("Ingest");
    assert_eq!(n, 5 + 4 + 6 + 4 + 6 + 1 + 1);
}

#[test]
fn a_not_given_spelling_does_not_conflict() {
    let p = analytics_body(
        r#"{"group_name": "", "groupName": "eng", "query_requests": null, "queryRequests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [{"field": "api_key"}]}]}"#,
    )
    .unwrap();
    assert_eq!(p.group_name.as_deref(), Some("eng"));
    assert_eq!(p.queries.len(), 1);
    assert_eq!(
        get_config_body(r#"{"teamLevel": false, "team_level": true}"#).unwrap(),
        CapScope::Team
    );
    // `set_add_on_credit_cap` has explicit presence: `0` is given, `null` is not.
    assert_eq!(
        config_body(
            r#"{"team_level": true, "set_add_on_credit_cap": 0, "setAddOnCreditCap": null}"#
        )
        .unwrap(),
        (CapScope::Team, CapAction::Set(0))
    );
    only(
        config_body(r#"{"team_level": true, "set_add_on_credit_cap": 0, "setAddOnCreditCap": 0}"#),
        "set_add_on_credit_cap",
        Rule::ConflictingFields,
        &["`setAddOnCreditCap`"],
    );
}

#[test]
fn group_name_with_emails() {
    only(
        agent_body(
            r#"{"group_name": "eng", "emails": ["a@b.c"], "query_requests": [{"agent_runs": {}}]}"#,
        ),
        "emails",
        Rule::ConflictingFields,
        &["`emails`", "`group_name`"],
    );
    // Either one alone, or with the other "not given", is fine.
    let p = agent_body(
        r#"{"group_name": "eng", "emails": [], "query_requests": [{"agent_runs": {}}]}"#,
    )
    .unwrap();
    assert_eq!((p.group_name.as_deref(), p.emails), (Some("eng"), None));
    for body in [
        r#"{"group_name": "", "emails": ["a@b.c"], "query_requests": [{"agent_runs": {}}]}"#,
        r#"{"groupName": null, "emails": ["a@b.c"], "query_requests": [{"agent_runs": {}}]}"#,
    ] {
        let p = agent_body(body).unwrap();
        assert_eq!(p.group_name, None);
        assert_eq!(p.emails, Some(vec!["a@b.c".to_string()]));
    }
}

#[test]
fn agent_query_with_two_or_three_sources() {
    only(
        agent_body(
            r#"{"query_requests": [{"agent_lines": {}}, {"agent_runs": {}, "agentToolUsage": {}}]}"#,
        ),
        "query_requests[1]",
        Rule::ConflictingFields,
        &[
            "`agent_runs` and `agent_tool_usage`",
            "exactly one data source",
        ],
    );
    only(
        agent_body(
            r#"{"query_requests": [{"agent_lines": {}, "agent_runs": {}, "agent_tool_usage": {}}]}"#,
        ),
        "query_requests[0]",
        Rule::ConflictingFields,
        &["`agent_lines` and `agent_runs` and `agent_tool_usage`"],
    );
    // Both spellings of one source key are one source, given twice.
    only(
        agent_body(r#"{"query_requests": [{"agent_lines": {}, "agentLines": {}}]}"#),
        "query_requests[0].agent_lines",
        Rule::ConflictingFields,
        &["`agentLines`"],
    );
}

// ---------------------------------------------------------------------------------------
// scope / action

#[test]
fn no_scope_is_reported_at_the_body() {
    for body in [
        r#"{}"#,
        r#"{"service_key": "k", "team_level": false, "group_id": "", "user_email": null}"#,
    ] {
        let v = only(
            get_config_body(body),
            "",
            Rule::Scope,
            &[
                "`team_level: true`, `group_id`, `user_email`",
                "none was given",
            ],
        );
        assert_eq!(v.rule().as_str(), "scope");
    }
}

#[test]
fn extra_scopes_are_reported_in_body_key_order() {
    only(
        get_config_body(r#"{"team_level": true, "group_id": "g"}"#),
        "group_id",
        Rule::Scope,
        &["`group_id` is a second scope after `team_level`"],
    );
    only(
        get_config_body(r#"{"user_email": "a@b.c", "team_level": true}"#),
        "team_level",
        Rule::Scope,
        &["`team_level` is a second scope after `user_email`"],
    );
    only(
        get_config_body(r#"{"groupId": "g", "userEmail": "a@b.c"}"#),
        "user_email",
        Rule::Scope,
        &["after `group_id`"],
    );
    // All three: one detail per extra one, the second and the third of the body.
    let v = errors(get_config_body(
        r#"{"user_email": "a@b.c", "group_id": "g", "team_level": true}"#,
    ));
    let mut got = paths(&v);
    got.sort();
    assert_eq!(
        got,
        [
            ("group_id".into(), Rule::Scope),
            ("team_level".into(), Rule::Scope)
        ]
    );
    assert!(v.iter().all(|v| v.message().contains("after `user_email`")));
}

#[test]
fn each_scope_alone() {
    assert_eq!(
        get_config_body(r#"{"team_level": true}"#).unwrap(),
        CapScope::Team
    );
    assert_eq!(
        get_config_body(r#"{"group_id": "g1"}"#).unwrap(),
        CapScope::Group("g1".into())
    );
    assert_eq!(
        get_config_body(r#"{"team_level": false, "user_email": "a@b.c"}"#).unwrap(),
        CapScope::User("a@b.c".into())
    );
}

#[test]
fn usage_config_actions() {
    assert_eq!(
        config_body(r#"{"group_id": "g", "clear_add_on_credit_cap": true}"#).unwrap(),
        (CapScope::Group("g".into()), CapAction::Clear)
    );
    assert_eq!(
        config_body(
            r#"{"user_email": "u", "clear_add_on_credit_cap": false, "set_add_on_credit_cap": 7}"#
        )
        .unwrap(),
        (CapScope::User("u".into()), CapAction::Set(7))
    );
    only(
        config_body(r#"{"team_level": true, "clear_add_on_credit_cap": false}"#),
        "",
        Rule::Action,
        &[
            "`clear_add_on_credit_cap: true`, `set_add_on_credit_cap`",
            "none was given",
        ],
    );
    only(
        config_body(
            r#"{"team_level": true, "set_add_on_credit_cap": 0, "clear_add_on_credit_cap": true}"#,
        ),
        "clear_add_on_credit_cap",
        Rule::Action,
        &["`clear_add_on_credit_cap` is a second action after `set_add_on_credit_cap`"],
    );
    only(
        config_body(
            r#"{"team_level": true, "clearAddOnCreditCap": true, "setAddOnCreditCap": "3"}"#,
        ),
        "set_add_on_credit_cap",
        Rule::Action,
        &["after `clear_add_on_credit_cap`"],
    );
    // No action and no scope: both at the body.
    let v = errors(config_body(r#"{"service_key": "k"}"#));
    assert_eq!(
        paths(&v),
        [("".into(), Rule::Action), ("".into(), Rule::Scope)]
    );
    // Two actions and two scopes, with a cap out of range.
    let v = errors(config_body(
        r#"{"group_id": "g", "set_add_on_credit_cap": -3, "user_email": "u", "clear_add_on_credit_cap": true}"#,
    ));
    assert_eq!(
        paths(&v),
        [
            ("clear_add_on_credit_cap".into(), Rule::Action),
            ("set_add_on_credit_cap".into(), Rule::InvalidValue),
            ("user_email".into(), Rule::Scope),
        ]
    );
}

// ---------------------------------------------------------------------------------------
// too_many (contract section 9)

/// `n` valid selections with unique aliases.
fn selections(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_COUNT", "name": format!("c{i}")}))
        .collect()
}

#[test]
fn query_request_limit() {
    let limits = Limits::default();
    let q = q_user(json!([sel("api_key")]));
    let p = analytics_body(&queries(&vec![q.clone(); limits.query_requests])).unwrap();
    assert_eq!(p.queries.len(), 20);
    only(
        analytics_body(&queries(&vec![q; limits.query_requests + 1])),
        "query_requests",
        Rule::TooMany,
        &["`query_requests` has 21 elements; at most 20 are allowed"],
    );
}

#[test]
fn selection_filter_and_aggregation_limits() {
    let limits = Limits::default();
    let at = |n_sel: usize, n_filt: usize, n_agg: usize| {
        json!({
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": selections(n_sel),
            "filters": (0..n_filt).map(|i| filt("api_key", FilterOp::Equal, &format!("k{i}"))).collect::<Vec<_>>(),
            "aggregations": (0..n_agg).map(|i| group("language", &format!("g{i}"))).collect::<Vec<_>>(),
        })
    };
    let p = plan(at(limits.selections, limits.filters, limits.aggregations));
    assert_eq!(p.selections.len(), 100);
    assert_eq!(p.group_by.len(), 10);
    // The 100 EQUAL filters on one field are one IN list.
    assert!(
        matches!(&p.filters[..], [FilterPlan { test: FilterTest::AnyOf(v), .. }] if v.len() == 100)
    );
    only_q(
        at(101, 1, 1),
        "query_requests[0].selections",
        Rule::TooMany,
        &["101 elements; at most 100"],
    );
    only_q(
        at(1, 101, 1),
        "query_requests[0].filters",
        Rule::TooMany,
        &["101 elements; at most 100"],
    );
    only_q(
        at(1, 1, 11),
        "query_requests[0].aggregations",
        Rule::TooMany,
        &["11 elements; at most 10"],
    );
    // Limits are flags: they can be lowered (or raised).
    let small = Limits {
        selections: 2,
        ..Limits::default()
    };
    let d = decode::<AnalyticsRequest>(query(at(3, 0, 0)).as_bytes()).unwrap();
    let v = analytics(&d.request, &small).unwrap_err();
    assert_eq!(
        paths(&v),
        [("query_requests[0].selections".into(), Rule::TooMany)]
    );
}

#[test]
fn email_and_agent_query_limits() {
    let limits = Limits::default();
    let body = |n: usize, q: usize| {
        json!({
            "emails": (0..n).map(|i| format!("u{i}@x")).collect::<Vec<_>>(),
            "query_requests": vec![json!({"agent_lines": {}}); q],
        })
        .to_string()
    };
    let p = agent_body(&body(limits.emails, limits.query_requests)).unwrap();
    assert_eq!(p.emails.as_ref().map(Vec::len), Some(10_000));
    assert_eq!(p.queries.len(), 20);
    only(
        agent_body(&body(limits.emails + 1, 1)),
        "emails",
        Rule::TooMany,
        &["10001 elements; at most 10000"],
    );
    only(
        agent_body(&body(1, limits.query_requests + 1)),
        "query_requests",
        Rule::TooMany,
        &["21 elements; at most 20"],
    );
}

#[test]
fn ingest_record_limit() {
    let limits = Limits::default();
    let body = |n: usize| {
        json!({
            "kind": "groups",
            "records": (0..n).map(|i| json!({"group_id": format!("g{i}"), "group_name": format!("n{i}")})).collect::<Vec<_>>(),
        })
        .to_string()
    };
    assert_eq!(
        ingest_body(&body(limits.ingest_records))
            .unwrap()
            .records
            .len(),
        10_000
    );
    only(
        ingest_body(&body(limits.ingest_records + 1)),
        "records",
        Rule::TooMany,
        &["10001 elements; at most 10000"],
    );
}

#[test]
fn nesting_over_64_levels_is_too_many_at_the_body() {
    // The body's object is level 1: `{"x": [` * 63 is 64 levels.
    let nested = |levels: usize| {
        format!(
            "{{\"query_requests\": [{}], \"x\": {}{}}}",
            r#"{"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [{"field": "api_key"}]}"#,
            "[".repeat(levels - 1),
            "]".repeat(levels - 1)
        )
    };
    // 64 levels: read, and `x` is an unknown field.
    only(
        analytics_body(&nested(64)),
        "x",
        Rule::UnknownField,
        &["`x`"],
    );
    for levels in [65, 1000] {
        assert_eq!(
            kind_errors::<AnalyticsRequest>(&nested(levels)),
            [(String::new(), Rule::TooMany)]
        );
    }
    let Err(KindErrors(v)) = decode::<UsageConfigRequest>(nested(65).as_bytes()) else {
        panic!("too deep");
    };
    assert!(v[0].message().contains("at most 64"), "{}", v[0].message());
    // Brackets inside strings do not count.
    let s = format!(r#"{{"service_key": "{}"}}"#, "[".repeat(100));
    let d = decode::<UsageConfigRequest>(s.as_bytes()).unwrap();
    assert_eq!(d.request.service_key, Some("[".repeat(100)));
}

// ---------------------------------------------------------------------------------------
// malformed_json

#[test]
fn malformed_json_at_the_body() {
    for (body, part) in [
        ("", "not valid JSON"),
        ("{", "not valid JSON"),
        (r#"{"a": 1,}"#, "not valid JSON"),
        ("{'a': 1}", "not valid JSON"),
        (r#"{"a": 1} x"#, "not valid JSON"),
        ("[]", "must be a JSON object, not an array"),
        ("null", "must be a JSON object, not null"),
        ("42", "must be a JSON object, not a number"),
        (r#""s""#, "must be a JSON object, not a string"),
    ] {
        for r in [
            decode::<AnalyticsRequest>(body.as_bytes()).map(|_| ()),
            decode::<IngestRequest>(body.as_bytes()).map(|_| ()),
            decode::<UsageConfigRequest>(body.as_bytes()).map(|_| ()),
        ] {
            let KindErrors(v) = r.unwrap_err();
            assert_eq!(paths(&v), [(String::new(), Rule::MalformedJson)], "{body}");
            assert!(v[0].message().contains(part), "{body}: {}", v[0].message());
            assert_eq!(
                v[0].to_string(),
                format!("(body): malformed_json: {}", v[0].message())
            );
        }
    }
}

#[test]
fn a_key_repeated_in_one_object_counts_its_last_occurrence() {
    let p = analytics_body(
        r#"{"group_name": "a", "group_name": "b", "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [{"field": "api_key"}]}]}"#,
    )
    .unwrap();
    assert_eq!(p.group_name.as_deref(), Some("b"));
}

// ---------------------------------------------------------------------------------------
// "Not given" (contract section 1, proto3 rules)

#[test]
fn not_given_scalars() {
    // `false`, `""`, `null` for an optional scalar mean "not given".
    let p = analytics_body(
        r#"{"service_key": "k", "group_name": "", "start_timestamp": null, "end_timestamp": "",
            "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
              "selections": [{"field": "language", "name": "", "aggregation_function": null},
                             {"field": "ide", "name": null, "aggregation_function": ""}],
              "filters": null, "aggregations": []}]}"#,
    )
    .unwrap();
    assert_eq!(p.group_name, None);
    assert_eq!(p.range, Default::default());
    let q = &p.queries[0];
    assert_eq!(q.shape, QueryShape::Raw);
    assert!(q.filters.is_empty() && q.group_by.is_empty());
    let aliases: Vec<_> = q
        .selections
        .iter()
        .map(|s| (s.alias.as_str(), s.agg))
        .collect();
    assert_eq!(
        aliases,
        [("language", Agg::Unspecified), ("ide", Agg::Unspecified)]
    );
    // The contract's example: exactly one scope.
    assert_eq!(
        get_config_body(r#"{"team_level": false, "user_email": "a@b.c"}"#).unwrap(),
        CapScope::User("a@b.c".into())
    );
    // `""` and `null` scopes are not scopes.
    assert_eq!(
        config_body(r#"{"group_id": "", "user_email": null, "team_level": true, "set_add_on_credit_cap": 1}"#)
            .unwrap(),
        (CapScope::Team, CapAction::Set(1))
    );
}

#[test]
fn set_cap_has_explicit_presence() {
    // `0` sets a cap of 0 (a number or a decimal string); `null` or absence is not given;
    // `""` is invalid.
    for zero in ["0", "\"0\""] {
        assert_eq!(
            config_body(&format!(
                r#"{{"user_email": "u", "set_add_on_credit_cap": {zero}}}"#
            ))
            .unwrap(),
            (CapScope::User("u".into()), CapAction::Set(0))
        );
    }
    only(
        config_body(r#"{"user_email": "u", "set_add_on_credit_cap": null}"#),
        "",
        Rule::Action,
        &[],
    );
    // `""` is invalid_value, and still counts as the action given (no second violation).
    only(
        config_body(r#"{"user_email": "u", "set_add_on_credit_cap": ""}"#),
        "set_add_on_credit_cap",
        Rule::InvalidValue,
        &["\"\" is not a decimal integer"],
    );
}

#[test]
fn not_given_arrays_and_objects() {
    // `[]` and `null`: a required array is missing, an optional one selects everything.
    let p = agent_body(
        r#"{"emails": [], "ide_types": null, "query_requests": [{"agent_tool_usage": {}}]}"#,
    )
    .unwrap();
    assert_eq!(p.emails, None);
    assert_eq!(p.ide_types, IdeType::ALL);
    let p =
        agent_body(r#"{"ide_types": [], "query_requests": [{"agent_tool_usage": {}}]}"#).unwrap();
    assert_eq!(p.ide_types, [IdeType::Editor, IdeType::Plugin]);
    for qs in ["[]", "null"] {
        only(
            agent_body(&format!(r#"{{"query_requests": {qs}}}"#)),
            "query_requests",
            Rule::MissingField,
            &["agent_lines"],
        );
    }
    // An agent query object's source key holds `{}`, which is a value there; an object
    // with no source key (or only `null` ones) is missing its source, at the object.
    for q in ["{}", r#"{"agent_lines": null}"#, r#"{"agentRuns": null}"#] {
        only(
            agent_body(&format!(
                r#"{{"query_requests": [{{"agent_runs": {{}}}}, {q}]}}"#
            )),
            "query_requests[1]",
            Rule::MissingField,
            &[
                "`query_requests[1]` is required",
                "exactly one data source key",
            ],
        );
    }
    // `records: []` is accepted; an absent `records` too.
    for body in [
        r#"{"kind": "users", "records": []}"#,
        r#"{"kind": "users"}"#,
    ] {
        let b = ingest_body(body).unwrap();
        assert_eq!(b.kind.name, "users");
        assert!(b.records.is_empty());
    }
    // `emails: [""]` is one e-mail that matches nobody, not "not given".
    let p = agent_body(r#"{"emails": [""], "query_requests": [{"agent_lines": {}}]}"#).unwrap();
    assert_eq!(p.emails, Some(vec![String::new()]));
}

// ---------------------------------------------------------------------------------------
// camelCase spellings

#[test]
fn camel_case_bodies_read_as_snake_case_ones() {
    let snake = r#"{"service_key": "k", "group_name": "eng", "start_timestamp": "2025-05-01T00:00:00Z", "end_timestamp": "2025-06-01T00:00:00Z",
        "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "n"}],
            "filters": [{"name": "language", "filter": "QUERY_FILTER_EQUAL", "value": "GO"}],
            "aggregations": [{"field": "date", "name": "d"}]}]}"#;
    let camel = r#"{"serviceKey": "k", "groupName": "eng", "startTimestamp": "2025-05-01T00:00:00Z", "endTimestamp": "2025-06-01T00:00:00Z",
        "queryRequests": [{"dataSource": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregationFunction": "QUERY_AGGREGATION_SUM", "name": "n"}],
            "filters": [{"name": "language", "filter": "QUERY_FILTER_EQUAL", "value": "GO"}],
            "aggregations": [{"field": "date", "name": "d"}]}]}"#;
    let a = decode::<AnalyticsRequest>(snake.as_bytes()).unwrap();
    let b = decode::<AnalyticsRequest>(camel.as_bytes()).unwrap();
    assert_eq!(a.request, b.request);
    assert_eq!(a.given_order, b.given_order);
    assert_eq!(
        analytics_body(snake).unwrap(),
        analytics_body(camel).unwrap()
    );

    let p = agent_body(
        r#"{"serviceKey": "k", "ideTypes": ["plugin"], "startTimestamp": "2025-05-01T00:00:00Z",
            "queryRequests": [{"agentLines": {}}, {"agentRuns": {}}, {"agentToolUsage": {}}]}"#,
    )
    .unwrap();
    assert_eq!(p.ide_types, [IdeType::Plugin]);
    assert_eq!(
        p.queries,
        [
            AgentSource::Lines,
            AgentSource::Runs,
            AgentSource::ToolUsage
        ]
    );
    assert_eq!(
        config_body(r#"{"serviceKey": "k", "groupId": "g", "setAddOnCreditCap": 9}"#).unwrap(),
        (CapScope::Group("g".into()), CapAction::Set(9))
    );
    assert_eq!(
        config_body(r#"{"userEmail": "u", "clearAddOnCreditCap": true}"#).unwrap(),
        (CapScope::User("u".into()), CapAction::Clear)
    );
    assert_eq!(
        get_config_body(r#"{"teamLevel": true}"#).unwrap(),
        CapScope::Team
    );
    let p =
        user_page_body(r#"{"groupName": "eng", "endTimestamp": "2025-05-01T00:00:00Z"}"#).unwrap();
    assert_eq!(p.group_name.as_deref(), Some("eng"));
    assert!(p.range.end.is_some());
}

#[test]
fn paths_use_snake_case_names_whatever_the_spelling() {
    only(
        analytics_body(
            r#"{"queryRequests": [{"dataSource": "QUERY_DATA_SOURCE_USER_DATA",
                "selections": [{"field": "api_key", "aggregationFunction": "QUERY_AGGREGATION_SUM"}]}]}"#,
        ),
        "query_requests[0].selections[0].aggregation_function",
        Rule::InvalidAggregation,
        &[],
    );
    only(
        agent_body(r#"{"ideTypes": ["vim"], "queryRequests": [{"agentLines": {}}]}"#),
        "ide_types[0]",
        Rule::UnknownEnumValue,
        &["`vim`"],
    );
}

// ---------------------------------------------------------------------------------------
// Filters: IN lists and value forms (contract section 3, Filters)

#[test]
fn several_equal_filters_on_one_field_are_an_in_list() {
    let p = plan(json!({
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [sel_agg("num_acceptances", Agg::Sum)],
        "filters": [
            filt("api_key", FilterOp::Equal, "k1"),
            filt("language", FilterOp::Equal, "GO"),
            filt("api_key", FilterOp::NotEqual, "k9"),
            filt("api_key", FilterOp::Equal, "k2"),
            filt("date UTC+5:30", FilterOp::Equal, "2025-05-01"),
            filt("api_key", FilterOp::Equal, "k3"),
            filt("date UTC+05:30", FilterOp::Equal, "2025-05-02"),
            filt("date UTC+05:30", FilterOp::Ge, "2025-04-01"),
        ],
    }));
    let spec = Source::UserData.spec();
    let text = |s: &str| FilterValue::Text(s.to_string());
    let day = |s: &str| FilterValue::Date(Date::parse(s).unwrap());
    let local = spec.resolve("date UTC+05:30").unwrap();
    assert_eq!(
        p.filters,
        [
            FilterPlan {
                field: spec.resolve("api_key").unwrap(),
                test: FilterTest::AnyOf(vec![text("k1"), text("k2"), text("k3")]),
            },
            FilterPlan {
                field: spec.resolve("language").unwrap(),
                test: FilterTest::AnyOf(vec![text("GO")]),
            },
            FilterPlan {
                field: spec.resolve("api_key").unwrap(),
                test: FilterTest::Compare(FilterOp::NotEqual, text("k9")),
            },
            FilterPlan {
                field: local,
                test: FilterTest::AnyOf(vec![day("2025-05-01"), day("2025-05-02")]),
            },
            FilterPlan {
                field: local,
                test: FilterTest::Compare(FilterOp::Ge, day("2025-04-01")),
            },
        ]
    );
    // Another offset is another field.
    let p = plan(json!({
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [sel("api_key")],
        "filters": [filt("date UTC+5", FilterOp::Equal, "2025-05-01"), filt("date UTC+5:30", FilterOp::Equal, "2025-05-01")],
    }));
    assert_eq!(p.filters.len(), 2);
}

#[test]
fn hour_and_timestamp_filter_value_forms() {
    let at = |s: &str| FilterValue::Time(crate::time::Timestamp::parse_rfc3339(s).unwrap());
    for (field, source) in [
        ("hour", Source::UserData),
        ("timestamp", Source::CommandData),
        ("timestamp", Source::AgentData),
    ] {
        for (value, want) in [
            ("2025-05-01T13:00:00Z", at("2025-05-01T13:00:00Z")),
            ("2025-05-01T15:00:00+02:00", at("2025-05-01T13:00:00Z")),
            ("2025-05-01T08:30:00-04:30", at("2025-05-01T13:00:00Z")),
            (
                "2025-05-01T13:00:00.250+00:00",
                at("2025-05-01T13:00:00.25Z"),
            ),
            ("2025-05-01 13:00:00 +0000 UTC", at("2025-05-01T13:00:00Z")),
            (
                "2025-05-01 13:00:07.25 +0000 UTC",
                at("2025-05-01T13:00:07.25Z"),
            ),
            (
                "2025-05-31",
                FilterValue::TimeDate(Date::parse("2025-05-31").unwrap()),
            ),
        ] {
            let p = plan(filter_q(source, field, FilterOp::Le, value));
            assert_eq!(
                p.filters[0].test,
                FilterTest::Compare(FilterOp::Le, want),
                "{field} {value}"
            );
        }
    }
}

#[test]
fn other_filter_value_types() {
    let one = |source: Source, name: &str, value: &str| -> FilterValue {
        let p = plan(filter_q(source, name, FilterOp::Equal, value));
        match &p.filters[0].test {
            FilterTest::AnyOf(v) => v[0].clone(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        one(Source::UserData, "date", "2025-05-01"),
        FilterValue::Date(Date::parse("2025-05-01").unwrap())
    );
    assert_eq!(
        one(Source::UserData, "num_acceptances", "-3"),
        FilterValue::Int(-3)
    );
    assert_eq!(
        one(Source::UserData, "num_acceptances", "0042"),
        FilterValue::Int(42)
    );
    assert_eq!(
        one(Source::ChatData, "chat_applied", "false"),
        FilterValue::Bool(false)
    );
    assert_eq!(
        one(Source::CommandData, "accepted", "true"),
        FilterValue::Bool(true)
    );
    // Text is any text, compared exactly: no case folding, no trimming.
    assert_eq!(
        one(Source::UserData, "language", " Go "),
        FilterValue::Text(" Go ".into())
    );
    assert_eq!(
        one(Source::UserData, "version", "1.10.x"),
        FilterValue::Text("1.10.x".into())
    );
    assert_eq!(
        one(Source::AgentData, "mode", "UNKNOWN"),
        FilterValue::Text("UNKNOWN".into())
    );
}

// ---------------------------------------------------------------------------------------
// Every violation, in document order

#[test]
fn three_independent_violations_in_document_order() {
    // Written in the body in reverse order: the details follow the document's structure
    // (top-level fields in the spec's order, queries by index, a query's selections
    // before its filters before its aggregations).
    let body = r#"{
        "query_requests": [{
            "aggregations": [{"field": "distinct_users", "name": "u"}],
            "filters": [{"name": "chat_accepted", "filter": "QUERY_FILTER_EQUAL", "value": "true"}],
            "selections": [{"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
            "data_source": "QUERY_DATA_SOURCE_USER_DATA"
        }],
        "start_timestamp": "yesterday"
    }"#;
    let v = errors(analytics_body(body));
    assert_eq!(
        paths(&v),
        [
            ("start_timestamp".into(), Rule::InvalidValue),
            (
                "query_requests[0].selections[0].aggregation_function".into(),
                Rule::InvalidAggregation
            ),
            (
                "query_requests[0].filters[0].name".into(),
                Rule::UnknownField
            ),
            (
                "query_requests[0].aggregations[0].field".into(),
                Rule::DistinctInAggregations
            ),
        ],
        "{}",
        show(&v)
    );
}

#[test]
fn violations_of_several_queries_and_the_decoder_merge_in_document_order() {
    let body = json!({
        "query_requests": [
            q_user(json!([sel("x"), {"field": "api_key", "bogus": 1}])),
            {"data_source": "QUERY_DATA_SOURCE_CHAT_DATA", "selections": [sel_agg("chat_loc_used", Agg::Count)]},
            {"data_source": "QUERY_DATA_SOURCE_PCW_DATA", "selections": [sel("percent_code_written")],
             "filters": [filt("percent_code_written", FilterOp::Ge, "0.5")]},
        ],
        "end_timestamp": "2020-01-01T00:00:00Z",
        "start_timestamp": "2021-01-01T00:00:00Z",
        "service_key": "k",
        "serviceKey": "k",
    });
    let v = errors(analytics_body(&body.to_string()));
    assert_eq!(
        paths(&v),
        [
            ("service_key".into(), Rule::ConflictingFields),
            ("end_timestamp".into(), Rule::InvalidValue),
            (
                "query_requests[0].selections[0].field".into(),
                Rule::UnknownField
            ),
            (
                "query_requests[0].selections[1].bogus".into(),
                Rule::UnknownField
            ),
            (
                "query_requests[1].selections[0].aggregation_function".into(),
                Rule::InvalidAggregation
            ),
            (
                "query_requests[2].filters[0].name".into(),
                Rule::UnknownField
            ),
        ],
        "{}",
        show(&v)
    );
}

// ---------------------------------------------------------------------------------------
// The other operations

#[test]
fn user_page_plans() {
    let p = user_page_body(
        r#"{"service_key": "k", "group_name": "eng", "start_timestamp": "2025-05-01T00:00:00+02:00"}"#,
    )
    .unwrap();
    assert_eq!(
        p,
        UserPagePlan {
            group_name: Some("eng".into()),
            range: TimeRange {
                start: crate::time::Timestamp::parse_rfc3339("2025-04-30T22:00:00Z"),
                end: None,
            },
        }
    );
    assert_eq!(
        user_page_body("{}").unwrap(),
        UserPagePlan {
            group_name: None,
            range: TimeRange::default()
        }
    );
}

#[test]
fn agent_plans() {
    let p = agent_body(
        r#"{"service_key": "k", "emails": ["b@x", "a@x", "b@x"], "ide_types": ["plugin", "plugin"],
            "start_timestamp": "2025-05-01T00:00:00Z", "end_timestamp": "2025-05-02T00:00:00Z",
            "query_requests": [{"agent_runs": {}}, {"agent_runs": {}}, {"agent_lines": {}}]}"#,
    )
    .unwrap();
    assert_eq!(
        p,
        AgentPlan {
            group_name: None,
            emails: Some(vec!["b@x".into(), "a@x".into(), "b@x".into()]),
            ide_types: vec![IdeType::Plugin],
            range: TimeRange {
                start: crate::time::Timestamp::parse_rfc3339("2025-05-01T00:00:00Z"),
                end: crate::time::Timestamp::parse_rfc3339("2025-05-02T00:00:00Z"),
            },
            queries: vec![AgentSource::Runs, AgentSource::Runs, AgentSource::Lines],
        }
    );
    // Every violation of an agent request at once, in document order.
    let v = errors(agent_body(
        r#"{"query_requests": [{}, {"agent_lines": {}, "agent_runs": {}}], "ide_types": ["ide"],
            "emails": ["a"], "group_name": "g", "end_timestamp": "x"}"#,
    ));
    assert_eq!(
        paths(&v),
        [
            ("end_timestamp".into(), Rule::InvalidValue),
            ("emails".into(), Rule::ConflictingFields),
            ("ide_types[0]".into(), Rule::UnknownEnumValue),
            ("query_requests[0]".into(), Rule::MissingField),
            ("query_requests[1]".into(), Rule::ConflictingFields),
        ],
        "{}",
        show(&v)
    );
}

#[test]
fn ingest_batches() {
    let b = ingest_body(
        r#"{"service_key": "k", "kind": "agent_runs", "records": [
            {"api_key": "k1", "timestamp": "2025-05-01T13:00:00Z", "ide_type": "editor", "model": "m",
             "mode": "UNKNOWN", "messages_sent": "3", "agent_id": "a1", "prompts_used": 100}
        ]}"#,
    )
    .unwrap();
    assert_eq!(b.kind.name, "agent_runs");
    assert_eq!(b.records.len(), 1);
    assert_eq!(b.records[0].count("messages_sent"), 3);
    assert_eq!(b.records[0].text("id").len(), 64);

    let v = errors(ingest_body(
        r#"{"kind": "agent_runs", "records": [
            {"api_key": "k1", "timestamp": "2025-05-01T13:00:00Z", "ide_type": "vim", "model": "m",
             "mode": "FAST", "messages_sent": 1.5, "agent_id": "", "prompts_used": -1, "tools": 3},
            {"api_key": "k1", "timestamp": "2025-05-01T13:00:00Z", "ide_type": "editor", "model": "m",
             "mode": "UNKNOWN", "messages_sent": 1, "agent_id": "a", "prompts_used": 1}
        ]}"#,
    ));
    assert_eq!(
        paths(&v),
        [
            ("records[0].ide_type".into(), Rule::UnknownEnumValue),
            ("records[0].mode".into(), Rule::UnknownEnumValue),
            ("records[0].messages_sent".into(), Rule::InvalidValue),
            ("records[0].agent_id".into(), Rule::MissingField),
            ("records[0].prompts_used".into(), Rule::InvalidValue),
            ("records[0].tools".into(), Rule::UnknownField),
        ],
        "{}",
        show(&v)
    );
    let msg = |p: &str| {
        v.iter()
            .find(|v| v.path() == p)
            .unwrap()
            .message()
            .to_string()
    };
    assert!(msg("records[0].mode").contains("unknown value `FAST`"));
    assert!(msg("records[0].mode").contains("CONVERSATIONAL_PLANNER_MODE_DEFAULT"));
    assert!(msg("records[0].prompts_used").contains("-1 is negative"));
    assert!(msg("records[0].messages_sent").contains("1.5"));

    // An `hour` that is not the start of a UTC hour.
    only(
        ingest_body(
            r#"{"kind": "pcw", "records": [{"api_key": "k", "hour": "2025-05-01T13:30:00Z", "language": "GO",
                "ide": "i", "version": "1", "vendor_bytes_by_autocomplete": 1, "vendor_bytes_by_command": 2, "user_bytes": 3}]}"#,
        ),
        "records[0].hour",
        Rule::InvalidValue,
        &["not the start of an hour"],
    );
    // Missing `kind`: the records cannot be read, so only the kind is reported.
    only(
        ingest_body(r#"{"records": [{"bogus": 1}]}"#),
        "kind",
        Rule::MissingField,
        &[],
    );
}

#[test]
fn violation_display_and_detail() {
    let v = only_q(
        q_user(json!([sel_agg("api_key", Agg::Sum)])),
        "query_requests[0].selections[0].aggregation_function",
        Rule::InvalidAggregation,
        &[],
    );
    assert_eq!(
        v.to_string(),
        format!(
            "query_requests[0].selections[0].aggregation_function: invalid_aggregation: {}",
            v.message()
        )
    );
    let d = crate::wire::ErrorDetail::from(&v);
    assert_eq!(
        d.path,
        "query_requests[0].selections[0].aggregation_function"
    );
    assert_eq!(d.rule, "invalid_aggregation");
    assert_eq!(d.message, v.message());
    for r in Rule::ALL {
        assert_eq!(Rule::from_identifier(r.as_str()), Some(*r));
    }
}

// ---------------------------------------------------------------------------------------
// Readings recorded in docs/decisions.md

#[test]
fn a_repeated_key_takes_its_last_value_at_its_first_position() {
    // serde_json keeps a repeated key where it first occurred and its last value: the
    // scope given first in the body is `team_level`, so `user_email` is the extra one.
    only(
        get_config_body(r#"{"team_level": false, "user_email": "u", "team_level": true}"#),
        "user_email",
        Rule::Scope,
        &["after `team_level`"],
    );
}

#[test]
fn extra_scopes_and_actions_sort_in_document_order() {
    // The extra ones are chosen by the body's key order; the details then follow the
    // document order of every other violation (the spec's field order).
    let v = errors(config_body(
        r#"{"user_email": "u", "group_id": "g", "team_level": true, "clear_add_on_credit_cap": true, "set_add_on_credit_cap": 1}"#,
    ));
    assert_eq!(
        paths(&v),
        [
            ("set_add_on_credit_cap".into(), Rule::Action),
            ("team_level".into(), Rule::Scope),
            ("group_id".into(), Rule::Scope),
        ]
    );
}

#[test]
fn an_ordered_operator_and_a_bad_value_on_a_boolean_are_two_violations() {
    let v = errors(analytics_body(&query(filter_q(
        Source::CommandData,
        "accepted",
        FilterOp::Ge,
        "yes",
    ))));
    assert_eq!(
        paths(&v),
        [
            (
                "query_requests[0].filters[0].filter".into(),
                Rule::InvalidOperator
            ),
            (
                "query_requests[0].filters[0].value".into(),
                Rule::InvalidValue
            ),
        ]
    );
}

#[test]
fn limits_of_a_query_without_a_known_source_are_not_checked() {
    // "Reports nothing else for its selections, filters and aggregations": their limits
    // need no source, but are theirs too.
    let many: Vec<Value> = (0..101).map(|_| sel("api_key")).collect();
    only_q(
        json!({"data_source": "NOPE", "selections": many}),
        "query_requests[0].data_source",
        Rule::UnknownDataSource,
        &[],
    );
}

/// Contract section 11: the period and time filter values outside the kept range are
/// `invalid_value`, naming the range; its ends are accepted.
#[test]
fn times_outside_the_kept_range() {
    for (start, end) in [
        ("9999-12-31T23:00:00-14:00", "9999-12-31T23:59:59.999999Z"),
        ("1969-12-31T23:59:59.999999Z", "2025-01-01T00:00:00Z"),
    ] {
        let body = json!({"start_timestamp": start, "end_timestamp": end}).to_string();
        only(
            user_page_body(&body),
            "start_timestamp",
            Rule::InvalidValue,
            &["is outside the range", "9999-12-31T23:59:59.999999Z"],
        );
    }
    let ends = json!({
        "start_timestamp": "1970-01-01T14:00:00+14:00",
        "end_timestamp": "9999-12-31T09:59:59.999999-14:00"
    })
    .to_string();
    let plan = user_page_body(&ends).expect("the range ends are valid");
    assert_eq!(plan.range.start, Some(crate::time::Timestamp::MIN));
    assert_eq!(plan.range.end, Some(crate::time::Timestamp::MAX));
    // A user-data query with one filter.
    let filtered = |f: Value| {
        let mut q = q_user(json!([sel("num_acceptances")]));
        q["filters"] = json!([f]);
        q
    };
    only_q(
        filtered(filt("date", FilterOp::Ge, "1969-12-31")),
        "query_requests[0].filters[0].value",
        Rule::InvalidValue,
        &["1970-01-01 ..= 9999-12-31"],
    );
    only_q(
        filtered(filt("hour", FilterOp::Ge, "9999-12-31T23:00:00-14:00")),
        "query_requests[0].filters[0].value",
        Rule::InvalidValue,
        &["within 1970-01-01T00:00:00Z"],
    );
}

/// Contract section 11 (cost bounds): a name or value of any length is echoed cut to 256
/// bytes (marked `…`), in messages and in paths, and a name over 64 bytes gets no "did you
/// mean"; so each detail stays small whatever the input. Every place a client's text is
/// looked up or echoed, with a megabyte of it.
#[test]
fn long_names_and_values_are_echoed_cut_and_get_no_suggestion() {
    let huge = "a".repeat(1 << 20);
    let q = |o: Value| queries(&[o]);
    let ac = "QUERY_DATA_SOURCE_USER_DATA";
    let sum = "QUERY_AGGREGATION_SUM";
    let analytics_cases = [
        q(json!({"data_source": ac, "selections": [{"field": format!("date {huge}")}]})),
        q(json!({"data_source": ac, "selections": [{"field": huge}]})),
        q(
            json!({"data_source": ac, "selections": [{"field": "num_acceptances", "aggregation_function": sum}],
                "aggregations": [{"field": format!("date {huge}"), "name": "d"}]}),
        ),
        q(
            json!({"data_source": ac, "selections": [{"field": "language"}],
                "filters": [{"name": format!("date {huge}"), "filter": "QUERY_FILTER_EQUAL", "value": "x"}]}),
        ),
        q(
            json!({"data_source": ac, "selections": [{"field": "language"}],
                "filters": [{"name": "date", "filter": "QUERY_FILTER_EQUAL", "value": huge}]}),
        ),
        q(
            json!({"data_source": ac, "selections": [{"field": "language"}],
                "filters": [{"name": "language", "filter": huge, "value": "x"}]}),
        ),
        q(json!({"data_source": huge, "selections": [{"field": "language"}]})),
        q(
            json!({"data_source": ac, "selections": [{"field": "language", "aggregation_function": huge}]}),
        ),
        q(
            json!({"data_source": ac, "selections": [{"field": "language", "name": huge},
                {"field": "ide", "name": huge}]}),
        ),
        q(
            json!({"data_source": ac, "selections": [{"field": "language", "name": huge},
                {"field": "num_acceptances", "aggregation_function": sum}]}),
        ),
        q(json!({"data_source": ac, "selections": [{"field": "language"}], huge.clone(): 1})),
        json!({"service_key": "k", huge.clone(): 1}).to_string(),
        json!({"service_key": "k", "query_requests": [{"data_source": ac,
            "selections": [{"field": "language"}]}], "start_timestamp": huge})
        .to_string(),
    ];
    let mut checked = 0;
    let check = |v: &Violations, body: &str| {
        assert!(!v.is_empty(), "{}", &body[..200]);
        for x in v.iter() {
            let (path, msg) = (x.path(), x.message());
            assert!(msg.len() <= 2048, "{} bytes: {}", msg.len(), &msg[..300]);
            assert!(path.len() <= 300, "{} bytes of path", path.len());
            assert!(!msg.contains("did you mean"), "{msg}");
        }
        assert!(
            v.iter().any(|x| x.message().contains('…')),
            "nothing echoed: {}",
            show(v)
        );
    };
    for body in &analytics_cases {
        let v = analytics_body(body).unwrap_err();
        check(&v, body);
        checked += 1;
    }
    let ingest_cases = [
        json!({"kind": huge, "records": [{}]}),
        json!({"kind": "groups", "records": [{"group_id": "g", "group_name": "n", huge.clone(): 1}]}),
        json!({"kind": "autocomplete", "records": [{"api_key": "k", "hour": "2025-05-01T00:00:00Z",
            "language": huge, "ide": "vscode", "version": "1", "num_acceptances": 1,
            "num_lines_accepted": 1, "num_bytes_accepted": 1}]}),
        json!({"kind": "autocomplete", "records": [{"api_key": "k", "hour": format!("2025-05-01T00:00:00.{}Z", "1".repeat(1 << 20)),
            "language": "GO", "ide": "vscode", "version": "1", "num_acceptances": format!("1{huge}"),
            "num_lines_accepted": 1, "num_bytes_accepted": 1}]}),
    ];
    for body in ingest_cases {
        let body = body.to_string();
        let v = ingest_body(&body).unwrap_err();
        // A text over 1,024 bytes is refused by its length, not echoed: no `…` needed.
        for x in v.iter() {
            assert!(x.message().len() <= 2048, "{}", &x.message()[..300]);
            assert!(x.path().len() <= 300);
            assert!(!x.message().contains("did you mean"), "{}", x.message());
        }
        checked += 1;
    }
    assert_eq!(checked, 17);
    // The same names at most 64 bytes long still get their suggestion.
    let v = analytics_body(&q(
        json!({"data_source": ac, "selections": [{"field": "date America/New_Yrok"}]}),
    ))
    .unwrap_err();
    assert!(
        v[0].message()
            .contains("did you mean `date America/New_York`?"),
        "{}",
        v[0].message()
    );
}

/// Contract section 11 (cost bounds): past a list's limit, its `too_many` stands for the
/// rest, which is not checked; past the 100 details kept, no message (nor its "did you
/// mean") is made. So a body of thousands of mistyped zone names costs what 100 cost.
#[test]
fn past_the_limits_nothing_more_is_checked_or_spelled_out() {
    let limits = Limits::default();
    let typo = json!({"field": "date Europe/Pariss"});
    let selections: Vec<Value> = vec![typo.clone(); limits.selections + 50];
    let q = json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": selections});
    let v = analytics_body(&queries(std::slice::from_ref(&q))).unwrap_err();
    // The list's too_many, then its first 100 selections.
    assert_eq!(v.total(), 1 + limits.selections);
    assert_eq!(v[0].rule(), Rule::TooMany);
    assert_eq!(v[0].path(), "query_requests[0].selections");
    assert!(v[1].message().contains("did you mean `date Europe/Paris`?"));
    // Every query up to the limit, no more.
    let many = vec![q; limits.query_requests + 5];
    let v = analytics_body(&queries(&many)).unwrap_err();
    assert_eq!(
        v.total(),
        1 + limits.query_requests * (1 + limits.selections)
    );
    assert_eq!(v.len(), crate::error::MAX_DETAILS);
    assert!(v.iter().all(|x| x.path().starts_with("query_requests")));
}
