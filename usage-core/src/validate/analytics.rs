//! Validation of `Analytics` requests: the spec's five query rules and contract section 3.

use std::collections::HashMap;

use super::{finish, missing, time_range, too_many, unknown_enum};
use crate::error::{JsonPath, Rule, Violation, Violations, echo, suggestion};
use crate::ident::Ident;
use crate::plan::{
    AnalyticsPlan, FilterPlan, FilterTest, FilterValue, GroupPlan, Limits, QueryPlan, QueryShape,
    SelectionPlan,
};
use crate::schema::{Agg, FieldRef, FilterOp, Role, Source, SourceSpec, ValueType};
use crate::time::{Date, TimeError, Timestamp};
use crate::wire::specs::{AGGREGATION, ANALYTICS, FILTER, QUERY, SELECTION};
use crate::wire::{AnalyticsRequest, Filter, QueryRequest};

/// Validates an `Analytics` request.
///
/// # Errors
/// Every violation of every query request, each with its JSON path and rule, in the order
/// of the request document.
pub fn analytics(req: &AnalyticsRequest, limits: &Limits) -> Result<AnalyticsPlan, Violations> {
    let mut v = Violations::new();
    let root = JsonPath::root();
    let range = time_range(
        req.start_timestamp.as_deref(),
        req.end_timestamp.as_deref(),
        &ANALYTICS,
        &mut v,
    );
    let qpath = ANALYTICS.path(&root, "query_requests");
    if req.query_requests.is_empty() {
        v.push(missing(qpath.clone(), ": give at least one query request"));
    } else if req.query_requests.len() > limits.query_requests {
        v.push(too_many(
            qpath.clone(),
            req.query_requests.len(),
            limits.query_requests,
        ));
    }
    // Past the limit, `too_many` stands for the rest: they are not checked.
    let queries: Vec<_> = req
        .query_requests
        .iter()
        .enumerate()
        .take(limits.query_requests)
        .filter_map(|(i, q)| query(q, &qpath.index(i), limits, &mut v))
        .collect();
    finish(v, || AnalyticsPlan {
        group_name: req.group_name.clone(),
        range,
        queries,
    })
}

/// The default alias: the field as written, in lower case, prefixed by the function.
pub fn default_alias(field: &str, agg: Agg) -> String {
    let field = field.to_lowercase();
    match agg {
        Agg::Unspecified => field,
        other => format!("{}_{field}", other.short()),
    }
}

/// An unknown field's violation at `path` (built only if it would be kept: its "did you
/// mean" is the costly part of a message).
fn unknown_field(
    v: &mut Violations,
    path: JsonPath,
    spec: &SourceSpec,
    name: &str,
    what: &str,
    candidates: Vec<&'static str>,
) {
    if !v.would_keep(&path) {
        v.count();
        return;
    }
    let local_date = candidates.contains(&"date UTC-8");
    let hint = match name.strip_prefix("date ") {
        // A local date with a zone that is not one: name the forms, and the nearest zone.
        Some(zone) if local_date => {
            let near = suggestion(zone, crate::zone::Zone::names())
                .replace("did you mean `", "did you mean `date ");
            format!(
                "; a local date is `date UTC±H[:MM]` (−12:00 to +14:00) or `date <IANA time zone>` \
                 (`date America/New_York`){near}"
            )
        }
        _ => suggestion(name, candidates.iter().copied()),
    };
    let msg = format!(
        "unknown field `{}`: {what} of {} are {}{hint}",
        echo(name),
        spec.source,
        candidates
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    v.push(Violation::new(path, Rule::UnknownField, msg));
}

struct Sel {
    index: usize,
    plan: SelectionPlan,
}

fn query(
    q: &QueryRequest,
    at: &JsonPath,
    limits: &Limits,
    v: &mut Violations,
) -> Option<QueryPlan> {
    let ds_path = QUERY.path(at, "data_source");
    let source = match &q.data_source {
        None => {
            v.push(missing(
                ds_path,
                ": one of the data sources (e.g. QUERY_DATA_SOURCE_USER_DATA)",
            ));
            return None;
        }
        Some(Ident::Unknown(s)) => {
            let msg = format!(
                "unknown data source `{}` (allowed: {}){}",
                echo(s),
                Source::IDENTIFIERS.join(", "),
                suggestion(s, Source::IDENTIFIERS.iter().copied())
            );
            v.push(Violation::new(ds_path, Rule::UnknownDataSource, msg));
            return None;
        }
        Some(Ident::Known(s)) => *s,
    };
    let spec = source.spec();
    let before = v.total();

    // Selections.
    let spath = QUERY.path(at, "selections");
    if q.selections.is_empty() {
        v.push(missing(spath.clone(), ": give at least one selection"));
    } else if q.selections.len() > limits.selections {
        v.push(too_many(
            spath.clone(),
            q.selections.len(),
            limits.selections,
        ));
    }
    let mut sels: Vec<Sel> = Vec::new();
    // Past the limit, the list's `too_many` stands for the rest: they are not checked.
    for (j, s) in q.selections.iter().enumerate().take(limits.selections) {
        let p = spath.index(j);
        let fpath = SELECTION.path(&p, "field");
        let apath = SELECTION.path(&p, "aggregation_function");
        let field = match s.field.as_deref() {
            None => {
                v.push(missing(fpath, ": the field to select"));
                None
            }
            Some(name) => match spec.resolve(name).filter(|f| f.field().select) {
                Some(f) => Some((name, f)),
                None => {
                    unknown_field(v, fpath, spec, name, "the fields", spec.names(|f| f.select));
                    None
                }
            },
        };
        let agg = match &s.aggregation_function {
            None => Some(Agg::Unspecified),
            Some(Ident::Known(a)) => Some(*a),
            Some(Ident::Unknown(x)) => {
                v.push(unknown_enum::<Agg>(apath.clone(), x));
                None
            }
        };
        let (Some((name, field)), Some(agg)) = (field, agg) else {
            continue;
        };
        if !field.field().allows(agg) {
            let msg = format!(
                "aggregation {agg} is not valid for field `{name}` of {source} (valid: {})",
                field.field().valid_text()
            );
            v.push(Violation::new(apath, Rule::InvalidAggregation, msg));
        }
        let alias = s.name.clone().unwrap_or_else(|| default_alias(name, agg));
        sels.push(Sel {
            index: j,
            plan: SelectionPlan { alias, field, agg },
        });
    }

    // Filters.
    let fpath = QUERY.path(at, "filters");
    if q.filters.len() > limits.filters {
        v.push(too_many(fpath.clone(), q.filters.len(), limits.filters));
    }
    let mut filters: Vec<FilterPlan> = Vec::new();
    let mut equal_at: HashMap<FieldRef, usize> = HashMap::new();
    for (k, f) in q.filters.iter().enumerate().take(limits.filters) {
        let Some((field, op, value)) = filter(f, &fpath.index(k), spec, v) else {
            continue;
        };
        if op == FilterOp::Equal {
            if let Some(&i) = equal_at.get(&field) {
                if let FilterTest::AnyOf(values) = &mut filters[i].test {
                    values.push(value);
                }
                continue;
            }
            equal_at.insert(field, filters.len());
            filters.push(FilterPlan {
                field,
                test: FilterTest::AnyOf(vec![value]),
            });
        } else {
            filters.push(FilterPlan {
                field,
                test: FilterTest::Compare(op, value),
            });
        }
    }

    // Aggregations (group-by).
    let gpath = QUERY.path(at, "aggregations");
    if q.aggregations.len() > limits.aggregations {
        v.push(too_many(
            gpath.clone(),
            q.aggregations.len(),
            limits.aggregations,
        ));
    }
    let mut groups: Vec<(usize, GroupPlan)> = Vec::new();
    // Every resolved group-by field, named or not: a group-by whose only mistake is its
    // missing `name` still groups its field (shape 3 checks against these).
    let mut group_fields: Vec<FieldRef> = Vec::new();
    let mut all_groups_resolved = true;
    for (k, g) in q.aggregations.iter().enumerate().take(limits.aggregations) {
        let p = gpath.index(k);
        let fpath = AGGREGATION.path(&p, "field");
        if !spec.groupable {
            let msg = format!(
                "{source} has no group-by fields: a PCW query always answers one item over all matching records; remove `aggregations`"
            );
            v.push(Violation::new(fpath, Rule::InvalidAggregation, msg));
            all_groups_resolved = false;
            continue;
        }
        let name = g.name.clone();
        if name.is_none() {
            v.push(missing(
                AGGREGATION.path(&p, "name"),
                ": the alias of the group-by value",
            ));
        }
        let Some(written) = g.field.as_deref() else {
            v.push(missing(fpath, ": the field to group by"));
            all_groups_resolved = false;
            continue;
        };
        let resolved = spec.resolve(written);
        match resolved.map(|f| (f, f.field())) {
            Some((f, field)) if field.group => {
                group_fields.push(f);
                if let Some(alias) = name {
                    groups.push((k, GroupPlan { alias, field: f }));
                }
            }
            Some((_, field)) if field.role == Role::Distinct => {
                all_groups_resolved = false;
                let msg = format!(
                    "`{written}` cannot be a group-by field: `distinct_*` fields are not allowed in aggregations (rule 2)"
                );
                v.push(Violation::new(fpath, Rule::DistinctInAggregations, msg));
            }
            Some((_, field)) if field.role == Role::Metric && field.select => {
                all_groups_resolved = false;
                let what = if field.ty == ValueType::Bool {
                    "a boolean"
                } else {
                    "a metric"
                };
                let msg = format!(
                    "`{written}` is {what} of {source} and cannot be a group-by field; aggregate it in a selection instead"
                );
                v.push(Violation::new(fpath, Rule::InvalidAggregation, msg));
            }
            _ => {
                all_groups_resolved = false;
                unknown_field(
                    v,
                    fpath,
                    spec,
                    written,
                    "the group-by fields",
                    spec.names(|f| f.group),
                );
            }
        }
    }

    // Rule 1 holds for every query request, PCW included (contract section 3, Shapes).
    let is_aggregated =
        |s: &SelectionPlan| s.agg != Agg::Unspecified || s.field.field().role == Role::Distinct;
    let n_agg = sels.iter().filter(|s| is_aggregated(&s.plan)).count();
    if n_agg > 0 && n_agg < sels.len() {
        let aliases = |aggregated: bool| {
            sels.iter()
                .filter(|s| is_aggregated(&s.plan) == aggregated)
                .map(|s| format!("`{}`", echo(&s.plan.alias)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let msg = format!(
            "selections must all carry an aggregation function or none (rule 1): {} aggregated, {} not",
            aliases(true),
            aliases(false)
        );
        v.push(Violation::new(spath.clone(), Rule::MixedAggregation, msg));
    }
    let shape = match (
        source == Source::PcwData,
        n_agg > 0,
        q.aggregations.is_empty(),
    ) {
        (true, _, _) => QueryShape::Pcw,
        (false, true, true) => QueryShape::Total,
        (false, true, false) => QueryShape::Grouped,
        (false, false, true) => QueryShape::Raw,
        (false, false, false) => QueryShape::GroupValues,
    };

    // Shape 3: every selection must be a group-by field.
    if shape == QueryShape::GroupValues && all_groups_resolved {
        for s in &sels {
            if !group_fields.contains(&s.plan.field) {
                let fp = SELECTION.path(&spath.index(s.index), "field");
                let msg = format!(
                    "`{}` is selected without an aggregation function but is not a group-by field; add it to `aggregations` or aggregate it",
                    echo(q.selections[s.index].field.as_deref().unwrap_or_default())
                );
                v.push(Violation::new(fp, Rule::UngroupedField, msg));
            }
        }
    }

    // Rule 3: aliases are unique (selections first, then aggregations).
    let mut seen: HashMap<&str, String> = HashMap::new();
    let sel_aliases = sels
        .iter()
        .map(|s| (&s.plan.alias, SELECTION.path(&spath.index(s.index), "name")));
    let group_aliases = if spec.groupable {
        q.aggregations
            .iter()
            .enumerate()
            .filter_map(|(k, g)| {
                g.name
                    .as_ref()
                    .map(|n| (n, AGGREGATION.path(&gpath.index(k), "name")))
            })
            .collect()
    } else {
        Vec::new()
    };
    for (alias, path) in sel_aliases.chain(group_aliases) {
        match seen.get(alias.as_str()) {
            Some(first) => {
                let msg = format!(
                    "alias `{}` is used more than once (rule 3; first at `{first}`)",
                    echo(alias)
                );
                v.push(Violation::new(path, Rule::DuplicateAlias, msg));
            }
            None => {
                seen.insert(alias, path.to_string());
            }
        }
    }

    if v.total() > before {
        return None;
    }
    Some(QueryPlan {
        source,
        shape,
        selections: sels.into_iter().map(|s| s.plan).collect(),
        filters,
        group_by: groups.into_iter().map(|(_, g)| g).collect(),
    })
}

/// Resolves one filter; `None` when it has a violation (reported).
fn filter(
    f: &Filter,
    at: &JsonPath,
    spec: &SourceSpec,
    v: &mut Violations,
) -> Option<(FieldRef, FilterOp, FilterValue)> {
    let npath = FILTER.path(at, "name");
    let opath = FILTER.path(at, "filter");
    let vpath = FILTER.path(at, "value");
    let before = v.total();
    let field = match f.name.as_deref() {
        None => {
            v.push(missing(npath, ": the field to filter on"));
            None
        }
        Some(name) => match spec.resolve(name).filter(|r| r.field().filter) {
            Some(r) => Some((name, r)),
            None => {
                unknown_field(
                    v,
                    npath,
                    spec,
                    name,
                    "the filter fields",
                    spec.names(|f| f.filter),
                );
                None
            }
        },
    };
    let op = match &f.filter {
        None => {
            v.push(missing(
                opath.clone(),
                ": the comparison (e.g. QUERY_FILTER_EQUAL)",
            ));
            None
        }
        Some(Ident::Unknown(x)) => {
            v.push(unknown_enum::<FilterOp>(opath.clone(), x));
            None
        }
        Some(Ident::Known(op)) => Some(*op),
    };
    let value = match (&f.value, field) {
        (None, _) => {
            v.push(missing(vpath, ": the comparison value, as a string"));
            None
        }
        (Some(_), None) => None,
        (Some(s), Some((name, r))) => parse_value(s, name, r, vpath, v),
    };
    if let (Some((name, r)), Some(op)) = (field, op)
        && r.field().ty == ValueType::Bool
        && op.is_ordered()
    {
        let msg = format!(
            "{op} is not allowed on the boolean field `{name}`: only QUERY_FILTER_EQUAL and QUERY_FILTER_NOT_EQUAL"
        );
        v.push(Violation::new(opath, Rule::InvalidOperator, msg));
    }
    if v.total() > before {
        return None;
    }
    Some((field?.1, op?, value?))
}

fn parse_value(
    s: &str,
    name: &str,
    r: FieldRef,
    path: JsonPath,
    v: &mut Violations,
) -> Option<FilterValue> {
    let ty = r.field().ty;
    let text_like = matches!(ty, ValueType::Text | ValueType::Version);
    if s.is_empty() && !text_like {
        v.push(missing(
            path,
            &format!(": a value for `{name}` (only text fields take an empty value)"),
        ));
        return None;
    }
    let bad = |v: &mut Violations, expected: &str| {
        let msg = format!(
            "`{}` is not a valid value for `{name}`: expected {expected}",
            echo(s)
        );
        v.push(Violation::new(path.clone(), Rule::InvalidValue, msg));
        None
    };
    match ty {
        ValueType::Date => match Date::read(s) {
            Ok(d) => Some(FilterValue::Date(d)),
            Err(TimeError::Range) => bad(v, "a date within 1970-01-01 ..= 9999-12-31"),
            Err(TimeError::Syntax) => bad(v, "a date YYYY-MM-DD"),
        },
        ValueType::Hour | ValueType::Timestamp => {
            if let Some(t) = Timestamp::parse_rfc3339(s).or_else(|| Timestamp::parse_go(s)) {
                Some(FilterValue::Time(t))
            } else if let Some(d) = Date::parse(s) {
                Some(FilterValue::TimeDate(d))
            } else if Timestamp::parse_rfc3339_unbounded(s).is_some()
                || Date::parse_unbounded(s).is_some()
            {
                bad(
                    v,
                    "a time within 1970-01-01T00:00:00Z ..= 9999-12-31T23:59:59.999999Z (in UTC)",
                )
            } else {
                bad(
                    v,
                    "an RFC 3339 time, `2025-05-01 13:00:00 +0000 UTC`, or a date YYYY-MM-DD",
                )
            }
        }
        ValueType::Text | ValueType::Version | ValueType::Json => {
            Some(FilterValue::Text(s.to_string()))
        }
        ValueType::Enum(ids) => {
            if ids.contains(&s) {
                Some(FilterValue::Text(s.to_string()))
            } else {
                let msg = format!(
                    "unknown value `{}` for `{name}` (allowed: {}){}",
                    echo(s),
                    ids.join(", "),
                    suggestion(s, ids.iter().copied())
                );
                v.push(Violation::new(path, Rule::UnknownEnumValue, msg));
                None
            }
        }
        ValueType::Int | ValueType::Ratio => {
            match crate::wire::decode::read_int(&serde_json::Value::String(s.to_string())) {
                Ok(n) => Some(FilterValue::Int(n)),
                Err(_) => bad(v, "a decimal integer"),
            }
        }
        ValueType::Bool => match s {
            "true" => Some(FilterValue::Bool(true)),
            "false" => Some(FilterValue::Bool(false)),
            _ => bad(v, "`true` or `false`"),
        },
    }
}
