//! Property tests of request validation and of the wire model.
//!
//! - Every request of the schema-driven generator is accepted, also through JSON.
//! - One injected violation is reported alone, with its rule at its path.
//! - Every wire type round-trips through serde.
//! - camelCase and snake_case spellings of every request field read the same.
//!
//! Candidate fields come from the schema tables (`Source::spec().fields`) and the request
//! specs (`Request::SPEC`); nothing here lists fields by hand.

use proptest::prelude::*;
use proptest::sample::select;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use usage_core::ident::{Ident, WireEnum};
use usage_core::plan::{AnalyticsPlan, Limits, QueryShape};
use usage_core::schema::{
    AgentMode, Agg, Field, FilterOp, IdeType, Role, SOURCES, Source, TeamStatus, ValueType,
};
use usage_core::testing::query::build_query;
use usage_core::testing::{Choices, Pool, arb_analytics_request};
use usage_core::time::Timestamp;
use usage_core::validate;
use usage_core::wire::decode::{Decoded, Kind, ObjectSpec, Request, camel, decode};
use usage_core::wire::*;
use usage_core::{Rule, Violations};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Validates a request as sent and through its JSON form (serialize, decode,
/// `with_decoded`); both must agree.
fn validate_both(req: &AnalyticsRequest) -> Result<AnalyticsPlan, Vec<(String, Rule)>> {
    let direct = validate::analytics(req, &Limits::default());
    let body = serde_json::to_vec(req).expect("requests serialize");
    let d: Decoded<AnalyticsRequest> = decode(&body).expect("no kind errors");
    assert_eq!(&d.request, req, "decode(serialize(req)) == req");
    let via_json = validate::with_decoded(&d, |r, _| validate::analytics(r, &Limits::default()));
    let key = |r: Result<AnalyticsPlan, Violations>| {
        r.map_err(|v| v.iter().map(|v| (v.path(), v.rule())).collect::<Vec<_>>())
    };
    let (a, b) = (key(direct), key(via_json));
    assert_eq!(a, b, "direct and JSON validation disagree");
    a
}

fn aliases(plan: &AnalyticsPlan) -> Vec<Vec<String>> {
    plan.queries
        .iter()
        .map(|q| {
            q.selections
                .iter()
                .map(|s| s.alias.clone())
                .chain(q.group_by.iter().map(|g| g.alias.clone()))
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// (a) Generated requests are accepted

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn generated_requests_are_accepted(req in arb_analytics_request(Pool::default())) {
        let plan = match validate_both(&req) {
            Ok(p) => p,
            Err(v) => return Err(TestCaseError::fail(format!(
                "{v:?}\n{}", serde_json::to_string(&req).unwrap()))),
        };
        prop_assert_eq!(plan.queries.len(), req.query_requests.len());
        for (q, p) in req.query_requests.iter().zip(&plan.queries) {
            prop_assert_eq!(Some(p.source), q.data_source.as_ref().and_then(Ident::known));
            prop_assert_eq!(p.selections.len(), q.selections.len());
            prop_assert_eq!(p.group_by.len(), q.aggregations.len());
            let want = if p.source == Source::PcwData {
                vec![QueryShape::Pcw]
            } else if q.aggregations.is_empty() {
                vec![QueryShape::Total, QueryShape::Raw]
            } else {
                vec![QueryShape::Grouped, QueryShape::GroupValues]
            };
            prop_assert!(want.contains(&p.shape), "{:?}", p.shape);
            // Explicit aliases are kept as written.
            for (s, sp) in q.selections.iter().zip(&p.selections) {
                if let Some(n) = &s.name {
                    prop_assert_eq!(n, &sp.alias);
                }
            }
        }
        for a in aliases(&plan) {
            let mut sorted = a.clone();
            sorted.sort();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), a.len(), "aliases are unique: {:?}", a);
        }
        prop_assert_eq!(
            plan.range.start.map(Timestamp::to_rfc3339),
            req.start_timestamp.clone()
        );
    }
}

// ---------------------------------------------------------------------------------------
// (b) One injected violation is reported alone

#[derive(Debug, Clone, Copy)]
enum Mutation {
    MixedAggregation,
    DistinctInGroupBy,
    DuplicateAlias,
    InvalidAggregation,
    UnknownField,
    BadFilterValue,
}

const MUTATIONS: &[Mutation] = &[
    Mutation::MixedAggregation,
    Mutation::DistinctInGroupBy,
    Mutation::DuplicateAlias,
    Mutation::InvalidAggregation,
    Mutation::UnknownField,
    Mutation::BadFilterValue,
];

/// How a request writes a field of a table.
fn written(f: &Field) -> &'static str {
    if f.is_local_date() {
        "date UTC-8"
    } else {
        f.name
    }
}

fn agg_of(s: &Selection) -> Agg {
    s.aggregation_function
        .as_ref()
        .and_then(Ident::known)
        .unwrap_or(Agg::Unspecified)
}

fn field_of(source: Source, s: &Selection) -> &'static Field {
    source
        .spec()
        .resolve(
            s.field
                .as_deref()
                .expect("generated selections have a field"),
        )
        .expect("generated fields resolve")
        .field()
}

fn is_aggregated(source: Source, s: &Selection) -> bool {
    agg_of(s) != Agg::Unspecified || field_of(source, s).role == Role::Distinct
}

fn alias_of(s: &Selection) -> String {
    s.name
        .clone()
        .unwrap_or_else(|| validate::default_alias_of(s.field.as_deref().unwrap(), agg_of(s)))
}

/// Names that no table field of `source` answers to in a place where `usable` holds, and
/// that the validator reports as `unknown_field` there: names of every table, the ones
/// of `source` that are not usable there (`distinct_*` in filters, PCW metrics, the
/// agent's `metadata`), and local dates out of range.
fn unknown_names(source: Source, usable: impl Fn(&Field) -> bool) -> Vec<&'static str> {
    let spec = source.spec();
    let mut out: Vec<&'static str> = SOURCES
        .iter()
        .flat_map(|s| s.fields.iter())
        .filter(|f| !f.is_local_date())
        .map(|f| f.name)
        .filter(|name| spec.resolve(name).is_none_or(|r| !usable(r.field())))
        .collect();
    out.extend(["date UTC+15", "date UTC-12:30", "bogus_field", "Api_Key"]);
    out.sort_unstable();
    out.dedup();
    out
}

/// A value that does not parse for a filter field of type `ty`, and the rule it breaks.
fn bad_value(ty: ValueType, c: &mut Choices) -> Option<(&'static str, Rule)> {
    let (values, rule): (&[&str], Rule) = match ty {
        ValueType::Date => (&["2025-02-30", "2025-5-1", "today"], Rule::InvalidValue),
        ValueType::Hour | ValueType::Timestamp => (
            &[
                "2025-05-01T13:00:00",
                "2025-05-01 13:00:00 +0100 CET",
                "noon",
            ],
            Rule::InvalidValue,
        ),
        ValueType::Int => (
            &["1.5", "1e3", "ten", "99999999999999999999"],
            Rule::InvalidValue,
        ),
        ValueType::Bool => (&["yes", "TRUE", "1"], Rule::InvalidValue),
        ValueType::Enum(_) => (&["NOPE", "unknown"], Rule::UnknownEnumValue),
        ValueType::Text | ValueType::Version | ValueType::Ratio | ValueType::Json => return None,
    };
    Some((*c.one(values), rule))
}

/// The sources a mutation can be injected into.
fn sources_for(m: Mutation) -> Vec<Source> {
    SOURCES
        .iter()
        .filter(|s| match m {
            Mutation::MixedAggregation => s.groupable,
            Mutation::DistinctInGroupBy => s.fields.iter().any(|f| f.role == Role::Distinct),
            Mutation::BadFilterValue => s
                .fields
                .iter()
                .any(|f| f.filter && bad_value(f.ty, &mut Choices::new(vec![])).is_some()),
            _ => true,
        })
        .map(|s| s.source)
        .collect()
}

/// Injects one violation of `m` into a new valid query inserted into `req`; returns the
/// path and rule it must be reported with.
fn inject(req: &mut AnalyticsRequest, m: Mutation, pool: &Pool, c: &mut Choices) -> (String, Rule) {
    let source = *c.one(&sources_for(m));
    let spec = source.spec();
    let mut q = build_query(source, pool, c);
    let pos = c.pick(req.query_requests.len() + 1);
    let at = format!("query_requests[{pos}]");
    let fresh = "mutation_alias".to_string();
    let injected = match m {
        Mutation::MixedAggregation => {
            let all_aggregated = is_aggregated(source, &q.selections[0]);
            let candidates: Vec<&Field> = spec
                .fields
                .iter()
                .filter(|f| f.select)
                .filter(|f| {
                    if all_aggregated {
                        f.role != Role::Distinct
                    } else {
                        f.role == Role::Distinct || f.aggs.iter().any(|a| *a != Agg::Unspecified)
                    }
                })
                .collect();
            let f = *c.one(&candidates);
            let agg = if all_aggregated {
                *c.one(&[None, Some(Agg::Unspecified)])
            } else {
                let valid: Vec<Agg> = f
                    .aggs
                    .iter()
                    .copied()
                    .filter(|a| *a != Agg::Unspecified)
                    .collect();
                if f.role == Role::Distinct && c.one_in(2) {
                    None
                } else {
                    Some(*c.one(&valid))
                }
            };
            let j = c.pick(q.selections.len() + 1);
            q.selections.insert(
                j,
                Selection {
                    field: Some(written(f).to_string()),
                    name: Some(fresh),
                    aggregation_function: agg.map(Ident::Known),
                },
            );
            (format!("{at}.selections"), Rule::MixedAggregation)
        }
        Mutation::DistinctInGroupBy => {
            let distinct: Vec<&Field> = spec
                .fields
                .iter()
                .filter(|f| f.role == Role::Distinct)
                .collect();
            let f = *c.one(&distinct);
            q.aggregations.push(Aggregation {
                field: Some(f.name.to_string()),
                name: Some(fresh),
            });
            (
                format!("{at}.aggregations[{}].field", q.aggregations.len() - 1),
                Rule::DistinctInAggregations,
            )
        }
        Mutation::DuplicateAlias => {
            if !q.aggregations.is_empty() && c.one_in(2) {
                // An aggregation takes the alias of an earlier item (any selection, or an
                // aggregation before it).
                let k = c.pick(q.aggregations.len());
                let mut earlier: Vec<String> = q.selections.iter().map(alias_of).collect();
                earlier.extend(q.aggregations[..k].iter().map(|g| g.name.clone().unwrap()));
                q.aggregations[k].name = Some(c.one(&earlier).clone());
                (format!("{at}.aggregations[{k}].name"), Rule::DuplicateAlias)
            } else {
                // A selection repeated later: same field, function and alias.
                let j = c.pick(q.selections.len());
                let copy = q.selections[j].clone();
                let to = j + 1 + c.pick(q.selections.len() - j);
                q.selections.insert(to, copy);
                (format!("{at}.selections[{to}].name"), Rule::DuplicateAlias)
            }
        }
        Mutation::InvalidAggregation => {
            // Rule 5 on a selection whose aggregation status cannot change (or cannot
            // matter): an aggregated one or a lone one (rule 1 holds for PCW too).
            let n = q.selections.len();
            let rule5: Vec<(usize, Agg)> = q
                .selections
                .iter()
                .enumerate()
                .filter(|(_, s)| n == 1 || is_aggregated(source, s))
                .flat_map(|(j, s)| {
                    let f = field_of(source, s);
                    Agg::ALL
                        .iter()
                        .filter(move |a| !f.allows(**a))
                        .map(move |a| (j, *a))
                })
                .collect();
            let metrics: Vec<&Field> = spec
                .fields
                .iter()
                .filter(|f| f.role == Role::Metric)
                .collect();
            let variant = c.pick(2);
            if variant == 0 && !rule5.is_empty() {
                let (j, agg) = *c.one(&rule5);
                let alias = alias_of(&q.selections[j]);
                let s = &mut q.selections[j];
                s.aggregation_function = Some(Ident::Known(agg));
                s.name = Some(alias);
                (
                    format!("{at}.selections[{j}].aggregation_function"),
                    Rule::InvalidAggregation,
                )
            } else {
                // A group-by on a metric or boolean; on PCW, on any field at all, even with
                // a missing or duplicate name.
                let field = if spec.groupable {
                    Some(c.one(&metrics).name.to_string())
                } else {
                    let mut any: Vec<Option<&str>> =
                        spec.fields.iter().map(|f| Some(f.name)).collect();
                    any.extend([None, Some("bogus_field")]);
                    c.one(&any).map(str::to_string)
                };
                let name = if spec.groupable {
                    Some(fresh)
                } else {
                    c.one(&[None, Some(alias_of(&q.selections[0])), Some(fresh)])
                        .clone()
                };
                q.aggregations.push(Aggregation { field, name });
                (
                    format!("{at}.aggregations[{}].field", q.aggregations.len() - 1),
                    Rule::InvalidAggregation,
                )
            }
        }
        Mutation::UnknownField => match c.pick(3) {
            1 => {
                let names = unknown_names(source, |f| f.filter);
                let name = c.one(&names).to_string();
                let k = c.pick(q.filters.len() + 1);
                if k == q.filters.len() {
                    q.filters.push(Filter {
                        name: Some(name),
                        filter: Some(Ident::Known(*c.one(FilterOp::ALL))),
                        value: Some("x".into()),
                    });
                } else {
                    q.filters[k].name = Some(name);
                }
                (format!("{at}.filters[{k}].name"), Rule::UnknownField)
            }
            2 if !q.aggregations.is_empty() => {
                // Metrics and `distinct_*` have their own rules in group-by.
                let names = unknown_names(source, |f| f.group || f.role != Role::Dimension);
                let k = c.pick(q.aggregations.len());
                q.aggregations[k].field = Some(c.one(&names).to_string());
                (format!("{at}.aggregations[{k}].field"), Rule::UnknownField)
            }
            _ => {
                let names = unknown_names(source, |f| f.select);
                let j = c.pick(q.selections.len());
                q.selections[j].field = Some(c.one(&names).to_string());
                (format!("{at}.selections[{j}].field"), Rule::UnknownField)
            }
        },
        Mutation::BadFilterValue => {
            let typed: Vec<&Field> = spec
                .fields
                .iter()
                .filter(|f| f.filter && bad_value(f.ty, &mut Choices::new(vec![])).is_some())
                .collect();
            let existing: Vec<usize> = q
                .filters
                .iter()
                .enumerate()
                .filter(|(_, f)| {
                    spec.resolve(f.name.as_deref().unwrap())
                        .is_some_and(|r| typed.contains(&r.field()))
                })
                .map(|(k, _)| k)
                .collect();
            if !existing.is_empty() && c.one_in(2) {
                let k = *c.one(&existing);
                let f = spec
                    .resolve(q.filters[k].name.as_deref().unwrap())
                    .unwrap()
                    .field();
                let (value, rule) = bad_value(f.ty, c).unwrap();
                q.filters[k].value = Some(value.to_string());
                (format!("{at}.filters[{k}].value"), rule)
            } else {
                let f = *c.one(&typed);
                let op = if f.ty == ValueType::Bool {
                    *c.one(&[FilterOp::Equal, FilterOp::NotEqual])
                } else {
                    *c.one(FilterOp::ALL)
                };
                let (value, rule) = bad_value(f.ty, c).unwrap();
                let k = c.pick(q.filters.len() + 1);
                q.filters.insert(
                    k,
                    Filter {
                        name: Some(written(f).to_string()),
                        filter: Some(Ident::Known(op)),
                        value: Some(value.to_string()),
                    },
                );
                (format!("{at}.filters[{k}].value"), rule)
            }
        }
    };
    req.query_requests.insert(pos, q);
    injected
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn one_injected_violation_is_reported_alone(
        req in arb_analytics_request(Pool::default()),
        m in select(MUTATIONS),
        choices in proptest::collection::vec(any::<u32>(), 160),
    ) {
        let pool = Pool::default();
        let mut c = Choices::new(choices);
        let mut req = req;
        let (path, rule) = inject(&mut req, m, &pool, &mut c);
        let got = validate_both(&req).map(|_| ());
        prop_assert_eq!(
            got,
            Err(vec![(path, rule)]),
            "{:?} in {}",
            m,
            serde_json::to_string(&req).unwrap()
        );
    }
}

#[test]
fn every_mutation_has_sources() {
    for m in MUTATIONS {
        assert!(!sources_for(*m).is_empty(), "{m:?}");
    }
    assert_eq!(
        sources_for(Mutation::DistinctInGroupBy),
        [Source::UserData, Source::AgentData]
    );
    assert!(!sources_for(Mutation::MixedAggregation).contains(&Source::PcwData));
    assert!(!sources_for(Mutation::BadFilterValue).contains(&Source::PcwData));
}

// ---------------------------------------------------------------------------------------
// (c) Every wire type round-trips through serde

fn text() -> impl Strategy<Value = String> {
    // ASCII, a few non-ASCII letters, quotes and escapes.
    "[a-zA-Z0-9 _@.:\"\\\\é日-]{0,10}"
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text())
}

/// A known identifier, or one this version does not know.
fn ident<T: WireEnum>() -> impl Strategy<Value = Ident<T>> {
    prop_oneof![
        select(T::ALL).prop_map(Ident::Known),
        // No identifier of any enumeration starts with `X`.
        "X[A-Z_]{0,12}".prop_map(Ident::Unknown),
    ]
}

fn timestamp() -> impl Strategy<Value = Timestamp> {
    // 1900-01-01 to 2200-01-01, any microsecond.
    (-2_208_988_800_000_000i64..7_258_118_400_000_000i64).prop_map(Timestamp)
}

fn vec_of<S: Strategy>(s: S, max: usize) -> impl Strategy<Value = Vec<S::Value>> {
    proptest::collection::vec(s, 0..=max)
}

fn arb_selection() -> impl Strategy<Value = Selection> {
    (opt_text(), opt_text(), proptest::option::of(ident::<Agg>())).prop_map(
        |(field, name, aggregation_function)| Selection {
            field,
            name,
            aggregation_function,
        },
    )
}

fn arb_filter() -> impl Strategy<Value = Filter> {
    (
        opt_text(),
        proptest::option::of(ident::<FilterOp>()),
        opt_text(),
    )
        .prop_map(|(name, filter, value)| Filter {
            name,
            filter,
            value,
        })
}

fn arb_aggregation() -> impl Strategy<Value = Aggregation> {
    (opt_text(), opt_text()).prop_map(|(field, name)| Aggregation { field, name })
}

fn arb_query() -> impl Strategy<Value = QueryRequest> {
    (
        proptest::option::of(ident::<Source>()),
        vec_of(arb_selection(), 3),
        vec_of(arb_filter(), 3),
        vec_of(arb_aggregation(), 2),
    )
        .prop_map(
            |(data_source, selections, filters, aggregations)| QueryRequest {
                data_source,
                selections,
                filters,
                aggregations,
            },
        )
}

fn arb_analytics() -> impl Strategy<Value = AnalyticsRequest> {
    (
        opt_text(),
        opt_text(),
        opt_text(),
        opt_text(),
        vec_of(arb_query(), 3),
    )
        .prop_map(
            |(service_key, group_name, start_timestamp, end_timestamp, query_requests)| {
                AnalyticsRequest {
                    service_key,
                    group_name,
                    start_timestamp,
                    end_timestamp,
                    query_requests,
                }
            },
        )
}

fn arb_user_page() -> impl Strategy<Value = UserPageAnalyticsRequest> {
    (opt_text(), opt_text(), opt_text(), opt_text()).prop_map(
        |(service_key, group_name, start_timestamp, end_timestamp)| UserPageAnalyticsRequest {
            service_key,
            group_name,
            start_timestamp,
            end_timestamp,
        },
    )
}

fn arb_agent_query() -> impl Strategy<Value = AgentQueryRequest> {
    let marker = || proptest::option::of(Just(Empty {}));
    (marker(), marker(), marker()).prop_map(|(agent_lines, agent_runs, agent_tool_usage)| {
        AgentQueryRequest {
            agent_lines,
            agent_runs,
            agent_tool_usage,
        }
    })
}

fn arb_agent() -> impl Strategy<Value = AgentAnalyticsRequest> {
    (
        (opt_text(), opt_text(), opt_text(), opt_text()),
        vec_of(text(), 3),
        vec_of(ident::<IdeType>(), 3),
        vec_of(arb_agent_query(), 3),
    )
        .prop_map(
            |(
                (service_key, group_name, start_timestamp, end_timestamp),
                emails,
                ide_types,
                query_requests,
            )| {
                AgentAnalyticsRequest {
                    service_key,
                    group_name,
                    start_timestamp,
                    end_timestamp,
                    emails,
                    ide_types,
                    query_requests,
                }
            },
        )
}

fn arb_get_usage_config() -> impl Strategy<Value = GetUsageConfigRequest> {
    (
        opt_text(),
        proptest::option::of(any::<bool>()),
        opt_text(),
        opt_text(),
    )
        .prop_map(
            |(service_key, team_level, group_id, user_email)| GetUsageConfigRequest {
                service_key,
                team_level,
                group_id,
                user_email,
            },
        )
}

fn arb_usage_config() -> impl Strategy<Value = UsageConfigRequest> {
    (
        opt_text(),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<i64>()),
        proptest::option::of(any::<bool>()),
        opt_text(),
        opt_text(),
    )
        .prop_map(
            |(
                service_key,
                clear_add_on_credit_cap,
                set_add_on_credit_cap,
                team_level,
                group_id,
                user_email,
            )| {
                UsageConfigRequest {
                    service_key,
                    clear_add_on_credit_cap,
                    set_add_on_credit_cap,
                    team_level,
                    group_id,
                    user_email,
                }
            },
        )
}

fn arb_balance_request() -> impl Strategy<Value = GetTeamCreditBalanceRequest> {
    opt_text().prop_map(|service_key| GetTeamCreditBalanceRequest { service_key })
}

/// A record-like JSON object: text, integer, boolean and null values, arrays of text.
fn arb_record() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        text().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
        vec_of(text(), 2).prop_map(Value::from),
    ];
    proptest::collection::btree_map("[a-z_]{1,8}", leaf, 0..5)
        .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>()))
}

fn arb_ingest() -> impl Strategy<Value = IngestRequest> {
    (opt_text(), opt_text(), vec_of(arb_record(), 3)).prop_map(|(service_key, kind, records)| {
        IngestRequest {
            service_key,
            kind,
            records,
        }
    })
}

fn arb_item() -> impl Strategy<Value = Item> {
    vec_of((text(), text()), 4).prop_map(|pairs| {
        let mut seen = std::collections::HashSet::new();
        Item(
            pairs
                .into_iter()
                .filter(|(k, _)| seen.insert(k.clone()))
                .collect(),
        )
    })
}

fn arb_analytics_response() -> impl Strategy<Value = AnalyticsResponse> {
    vec_of(
        vec_of(arb_item().prop_map(|item| ResponseItem { item }), 3)
            .prop_map(|response_items| QueryResult { response_items }),
        3,
    )
    .prop_map(|query_results| AnalyticsResponse { query_results })
}

fn arb_user_stats() -> impl Strategy<Value = UserStats> {
    let t = || proptest::option::of(timestamp());
    (
        (text(), text(), t(), text(), any::<i64>()),
        (
            proptest::option::of(any::<bool>()),
            t(),
            t(),
            t(),
            ident::<TeamStatus>(),
            t(),
        ),
    )
        .prop_map(
            |(
                (name, email, last_update_time, api_key, active_days),
                (
                    disable_vendor,
                    last_autocomplete_usage_time,
                    last_chat_usage_time,
                    last_command_usage_time,
                    team_status,
                    signup_time,
                ),
            )| UserStats {
                name,
                email,
                last_update_time,
                api_key,
                active_days,
                disable_vendor,
                last_autocomplete_usage_time,
                last_chat_usage_time,
                last_command_usage_time,
                team_status,
                signup_time,
            },
        )
}

fn arb_user_page_response() -> impl Strategy<Value = UserPageAnalyticsResponse> {
    (vec_of(arb_user_stats(), 3), opt_text()).prop_map(|(user_table_stats, error)| {
        UserPageAnalyticsResponse {
            user_table_stats,
            error,
        }
    })
}

fn arb_agent_result() -> impl Strategy<Value = AgentQueryResult> {
    let lines = vec_of(
        (timestamp(), any::<i64>(), any::<i64>()).prop_map(
            |(day, lines_suggested, lines_accepted)| AgentLinesEntry {
                day,
                lines_suggested,
                lines_accepted,
            },
        ),
        3,
    )
    .prop_map(|agent_lines| AgentLines { agent_lines });
    let runs = vec_of(
        (
            timestamp(),
            text(),
            ident::<AgentMode>(),
            any::<i64>(),
            text(),
            any::<i64>(),
        )
            .prop_map(
                |(day, model, mode, messages_sent, agent_id, prompts_used)| AgentRunEntry {
                    day,
                    model,
                    mode,
                    messages_sent,
                    agent_id,
                    prompts_used,
                },
            ),
        3,
    )
    .prop_map(|agent_runs| AgentRuns { agent_runs });
    let tools = vec_of(
        (text(), any::<i64>()).prop_map(|(tool, count)| AgentToolUsageEntry { tool, count }),
        3,
    )
    .prop_map(|agent_tool_usage| AgentToolUsage { agent_tool_usage });
    (
        proptest::option::of(lines),
        proptest::option::of(runs),
        proptest::option::of(tools),
    )
        .prop_map(
            |(agent_lines, agent_runs, agent_tool_usage)| AgentQueryResult {
                agent_lines,
                agent_runs,
                agent_tool_usage,
            },
        )
}

fn arb_agent_response() -> impl Strategy<Value = AgentAnalyticsResponse> {
    vec_of(arb_agent_result(), 3).prop_map(|query_results| AgentAnalyticsResponse { query_results })
}

fn arb_balance() -> impl Strategy<Value = GetTeamCreditBalanceResponse> {
    (
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        timestamp(),
        timestamp(),
    )
        .prop_map(
            |(
                prompt_credits_per_seat,
                num_seats,
                add_on_credits_available,
                add_on_credits_used,
                billing_cycle_start,
                billing_cycle_end,
            )| GetTeamCreditBalanceResponse {
                prompt_credits_per_seat,
                num_seats,
                add_on_credits_available,
                add_on_credits_used,
                billing_cycle_start,
                billing_cycle_end,
            },
        )
}

fn arb_error_body() -> impl Strategy<Value = ErrorBody> {
    let detail =
        (text(), select(Rule::ALL), text()).prop_map(|(path, rule, message)| ErrorDetail {
            path,
            rule: rule.as_str().to_string(),
            message,
        });
    (
        text(),
        "[a-z_]{1,20}",
        proptest::option::of(vec_of(detail, 3)),
        text(),
    )
        .prop_map(|(message, code, details, request_id)| ErrorBody {
            error: message.clone(),
            code,
            message,
            details,
            request_id,
        })
}

fn round_trips<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    x: &T,
) -> Result<(), TestCaseError> {
    let s = serde_json::to_string(x).expect("serializes");
    let back: T = serde_json::from_str(&s).map_err(|e| TestCaseError::fail(format!("{e}: {s}")))?;
    prop_assert_eq!(&back, x, "{}", s);
    // And through a `Value`, as a client that inspects the JSON would.
    let v = serde_json::to_value(x).expect("serializes");
    let back: T = serde_json::from_value(v).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, x);
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn requests_round_trip(
        a in arb_analytics(),
        u in arb_user_page(),
        g in arb_agent(),
        gc in arb_get_usage_config(),
        c in arb_usage_config(),
        b in arb_balance_request(),
        i in arb_ingest(),
    ) {
        round_trips(&a)?;
        round_trips(&u)?;
        round_trips(&g)?;
        round_trips(&gc)?;
        round_trips(&c)?;
        round_trips(&b)?;
        round_trips(&i)?;
    }

    #[test]
    fn responses_round_trip(
        a in arb_analytics_response(),
        u in arb_user_page_response(),
        g in arb_agent_response(),
        cap in proptest::option::of(any::<i64>()),
        b in arb_balance(),
        n in any::<i64>(),
        e in arb_error_body(),
    ) {
        round_trips(&a)?;
        round_trips(&u)?;
        round_trips(&g)?;
        round_trips(&GetUsageConfigResponse { add_on_credit_cap: cap })?;
        round_trips(&UsageConfigResponse {})?;
        round_trips(&b)?;
        round_trips(&IngestResponse { accepted: n })?;
        round_trips(&e)?;
    }
}

// ---------------------------------------------------------------------------------------
// (d) camelCase and snake_case spellings decode to the same value

/// Respells the keys of a request body: each spec field as its snake_case or its
/// lowerCamelCase name, as `camel_at` decides, walking nested request objects by their
/// specs (records of `Ingest` are data, not request fields, and keep their keys).
fn respell(v: &Value, spec: &ObjectSpec, camel_at: &mut impl FnMut() -> bool) -> Value {
    let Value::Object(m) = v else {
        return v.clone();
    };
    let mut out = Map::new();
    for (k, x) in m {
        let Some(f) = spec.fields.iter().find(|f| f.name == k) else {
            out.insert(k.clone(), x.clone());
            continue;
        };
        let x = match (&f.kind, x) {
            (Kind::Object(s) | Kind::Marker(s), _) => respell(x, s, camel_at),
            (Kind::Array(Kind::Object(s)), Value::Array(a)) => {
                Value::Array(a.iter().map(|e| respell(e, s, camel_at)).collect())
            }
            _ => x.clone(),
        };
        let key = if camel_at() { camel(f.name) } else { k.clone() };
        out.insert(key, x);
    }
    Value::Object(out)
}

/// Both spellings of `req` (all camelCase, and a random mix) decode like snake_case.
fn spellings_agree<T>(req: &T, mix: &[bool]) -> Result<(), TestCaseError>
where
    T: Request + Serialize + PartialEq + std::fmt::Debug,
{
    let snake = serde_json::to_value(req).expect("serializes");
    let all_camel = respell(&snake, T::SPEC, &mut || true);
    let mut i = 0;
    let mixed = respell(&snake, T::SPEC, &mut || {
        i += 1;
        mix[i % mix.len()]
    });
    let read = |v: &Value| -> Result<Decoded<T>, TestCaseError> {
        decode::<T>(v.to_string().as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))
    };
    let base = read(&snake)?;
    // Nothing of the generated requests is unknown or given twice.
    prop_assert!(base.violations.is_empty(), "{:?}", base.violations);
    for other in [&all_camel, &mixed] {
        let d = read(other)?;
        prop_assert_eq!(&d.request, &base.request, "{}", other);
        prop_assert_eq!(&d.given_order, &base.given_order);
        prop_assert!(d.violations.is_empty(), "{:?}", d.violations);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn camel_and_snake_case_read_the_same(
        mix in proptest::collection::vec(any::<bool>(), 1..16),
        a in arb_analytics(),
        u in arb_user_page(),
        g in arb_agent(),
        gc in arb_get_usage_config(),
        c in arb_usage_config(),
        b in arb_balance_request(),
        i in arb_ingest(),
    ) {
        spellings_agree(&a, &mix)?;
        spellings_agree(&u, &mix)?;
        spellings_agree(&g, &mix)?;
        spellings_agree(&gc, &mix)?;
        spellings_agree(&c, &mix)?;
        spellings_agree(&b, &mix)?;
        spellings_agree(&i, &mix)?;
    }

    #[test]
    fn generated_valid_requests_read_the_same_in_either_spelling(
        mix in proptest::collection::vec(any::<bool>(), 1..16),
        req in arb_analytics_request(Pool::default()),
    ) {
        spellings_agree(&req, &mix)?;
        let camel_body = respell(&serde_json::to_value(&req).unwrap(), AnalyticsRequest::SPEC, &mut || true);
        let d = decode::<AnalyticsRequest>(camel_body.to_string().as_bytes()).unwrap();
        prop_assert_eq!(&d.request, &req);
        let plan = validate::with_decoded(&d, |r, _| validate::analytics(r, &Limits::default()));
        prop_assert_eq!(plan, validate::analytics(&req, &Limits::default()));
    }
}

#[test]
fn every_request_field_has_a_distinct_camel_spelling_or_is_one_word() {
    // The respelling above covers every field: the specs' fields with two spellings.
    fn count(spec: &ObjectSpec) -> usize {
        spec.fields
            .iter()
            .map(|f| {
                let own = usize::from(camel(f.name) != f.name);
                own + match &f.kind {
                    Kind::Object(s) | Kind::Marker(s) => count(s),
                    Kind::Array(Kind::Object(s)) => count(s),
                    _ => 0,
                }
            })
            .sum()
    }
    assert_eq!(count(AnalyticsRequest::SPEC), 5 + 1 + 1); // + data_source, aggregation_function
    assert_eq!(count(AgentAnalyticsRequest::SPEC), 6 + 3);
    assert_eq!(count(UsageConfigRequest::SPEC), 6);
}
