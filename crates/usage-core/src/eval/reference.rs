//! The reference evaluator: a deliberately naive, row-by-row implementation of custom
//! queries written straight from the contract (section 3). It is the oracle the columnar
//! evaluator and the SQL stores are tested against; it is not meant to be fast.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap, HashSet};

use super::value::{Value, average, compare_filter, percent};
use crate::load::{FieldValue, Record};
use crate::plan::{FilterTest, QueryPlan, QueryShape, TimeRange};
use crate::schema::{Agg, Expr, FieldRef, ValueType};
use crate::time::Timestamp;
use crate::wire::{Item, QueryResult, ResponseItem};

/// What a query runs over: the records of its source and who they belong to.
pub struct Input<'a> {
    /// Every record of the query's source kind (one per identity).
    pub records: &'a [&'a Record],
    /// The e-mail of the user owning each api_key.
    pub email_of_key: &'a HashMap<String, String>,
    /// The api_keys a group restriction allows (`None`: every record counts).
    pub allowed_keys: Option<&'a HashSet<String>>,
    /// The request's range (PCW only).
    pub range: TimeRange,
}

/// The `metadata` value of the agent source: `{"email":"..."}` or `{}`.
pub fn metadata(email: Option<&str>) -> String {
    match email {
        Some(e) => {
            let mut m = serde_json::Map::new();
            m.insert("email".into(), serde_json::Value::String(e.to_string()));
            serde_json::Value::Object(m).to_string()
        }
        None => "{}".to_string(),
    }
}

/// The value of a per-record field (not of `distinct_*` or derived PCW fields).
pub fn field_value(rec: &Record, f: FieldRef, email_of_key: &HashMap<String, String>) -> Value {
    let time = || rec.time().unwrap_or_default();
    match f.field().expr {
        Expr::Column(c) => match rec.get(c) {
            FieldValue::Text(s) => Value::Text(s.clone()),
            FieldValue::Count(n) => Value::Int(i128::from(*n)),
            FieldValue::Bool(b) => Value::Bool(*b),
            FieldValue::Time(t) => Value::Time(*t),
            FieldValue::Day(d) => Value::Date(*d),
            FieldValue::Absent => match f.field().ty {
                ValueType::Int => Value::Int(0),
                _ => Value::Null,
            },
            FieldValue::Groups(_) => Value::Null,
        },
        Expr::Time => Value::Time(time()),
        Expr::UtcDate => Value::Date(time().date()),
        Expr::LocalDate => Value::Date(time().plus_minutes(f.offset_minutes()).date()),
        Expr::UserMetadata => Value::Text(metadata(
            email_of_key.get(rec.text("api_key")).map(String::as_str),
        )),
        _ => Value::Null,
    }
}

fn passes(rec: &Record, plan: &QueryPlan, input: &Input<'_>) -> bool {
    if let Some(allowed) = input.allowed_keys
        && !allowed.contains(rec.text("api_key"))
    {
        return false;
    }
    if plan.shape == QueryShape::Pcw && !input.range.contains(rec.time().unwrap_or_default()) {
        return false;
    }
    plan.filters.iter().all(|f| {
        let v = field_value(rec, f.field, input.email_of_key);
        let ty = f.field.field().ty;
        match &f.test {
            FilterTest::Compare(op, fv) => op.accepts(compare_filter(&v, fv, ty)),
            FilterTest::AnyOf(vals) => vals
                .iter()
                .any(|fv| compare_filter(&v, fv, ty) == Ordering::Equal),
        }
    })
}

/// The aggregate of a selection over a set of records.
fn aggregate(recs: &[&Record], f: FieldRef, agg: Agg, input: &Input<'_>) -> Value {
    let field = f.field();
    let distinct = |key: &dyn Fn(&Record) -> String| -> Value {
        let set: BTreeSet<String> = recs.iter().map(|r| key(r)).collect();
        Value::Int(set.len() as i128)
    };
    match field.expr {
        Expr::DistinctUsers => return distinct(&|r| r.text("api_key").to_string()),
        Expr::DistinctDeveloperDays => {
            return distinct(&|r| {
                format!(
                    "{}\u{0}{}",
                    r.text("api_key"),
                    r.time().unwrap_or_default().date().0
                )
            });
        }
        Expr::DistinctDeveloperHours => {
            return distinct(&|r| {
                format!(
                    "{}\u{0}{}",
                    r.text("api_key"),
                    r.time().unwrap_or_default().hour_start().0
                )
            });
        }
        _ => {}
    }
    let values: Vec<Value> = recs
        .iter()
        .map(|r| field_value(r, f, input.email_of_key))
        .collect();
    match agg {
        Agg::Count => Value::Int(recs.len() as i128),
        Agg::Sum => Value::Int(
            values
                .iter()
                .map(|v| match v {
                    Value::Int(n) => *n,
                    Value::Bool(b) => i128::from(*b),
                    _ => 0,
                })
                .sum(),
        ),
        Agg::Avg => {
            let sum: i128 = values
                .iter()
                .map(|v| if let Value::Int(n) = v { *n } else { 0 })
                .sum();
            average(sum, values.len() as u64).map_or(Value::Null, Value::Float)
        }
        Agg::Max => values
            .into_iter()
            .max_by(|a, b| a.cmp_as(b, field.ty))
            .unwrap_or(Value::Null),
        Agg::Min => values
            .into_iter()
            .min_by(|a, b| a.cmp_as(b, field.ty))
            .unwrap_or(Value::Null),
        Agg::Unspecified => Value::Null,
    }
}

fn item(pairs: impl IntoIterator<Item = (String, Value)>) -> ResponseItem {
    ResponseItem {
        item: Item(
            pairs
                .into_iter()
                .filter_map(|(k, v)| v.render().map(|s| (k, s)))
                .collect(),
        ),
    }
}

/// The order of raw rows: time, `api_key`, the other identity fields in their order, `id`.
fn raw_order(a: &Record, b: &Record) -> Ordering {
    let kind = a.kind();
    let mut o = a.time().cmp(&b.time()).then_with(|| {
        a.text("api_key")
            .as_bytes()
            .cmp(b.text("api_key").as_bytes())
    });
    for name in kind
        .identity
        .iter()
        .filter(|n| **n != "api_key" && Some(**n) != kind.time)
    {
        if o != Ordering::Equal {
            return o;
        }
        let (x, y) = (a.text(name), b.text(name));
        o = if *name == "version" {
            crate::version::compare(x, y)
        } else {
            x.as_bytes().cmp(y.as_bytes())
        };
    }
    o
}

/// Evaluates one validated query. The caller applies the result-size limit.
pub fn evaluate(plan: &QueryPlan, input: &Input<'_>) -> QueryResult {
    let mut recs: Vec<&Record> = input
        .records
        .iter()
        .copied()
        .filter(|r| passes(r, plan, input))
        .collect();
    let items =
        match plan.shape {
            QueryShape::Pcw => {
                let sum = |c: &str| -> i128 { recs.iter().map(|r| i128::from(r.count(c))).sum() };
                let (auto, cmd, user) = (
                    sum("vendor_bytes_by_autocomplete"),
                    sum("vendor_bytes_by_command"),
                    sum("user_bytes"),
                );
                let vendor = auto + cmd;
                let total = vendor + user;
                vec![item(plan.selections.iter().map(|s| {
                    let v = match s.field.field().expr {
                        Expr::PcwPercent => Value::Float(percent(vendor, total)),
                        Expr::PcwVendorBytes => Value::Int(vendor),
                        Expr::PcwTotalBytes => Value::Int(total),
                        Expr::Column("user_bytes") => Value::Int(user),
                        Expr::Column("vendor_bytes_by_autocomplete") => Value::Int(auto),
                        Expr::Column("vendor_bytes_by_command") => Value::Int(cmd),
                        _ => Value::Null,
                    };
                    (s.alias.clone(), v)
                }))]
            }
            QueryShape::Total => {
                vec![item(plan.selections.iter().map(|s| {
                    (s.alias.clone(), aggregate(&recs, s.field, s.agg, input))
                }))]
            }
            QueryShape::Raw => {
                recs.sort_by(|a, b| raw_order(a, b));
                recs.iter()
                    .map(|r| {
                        item(plan.selections.iter().map(|s| {
                            (s.alias.clone(), field_value(r, s.field, input.email_of_key))
                        }))
                    })
                    .collect()
            }
            QueryShape::Grouped | QueryShape::GroupValues => {
                let mut groups: Vec<(Vec<Value>, Vec<&Record>)> = Vec::new();
                for r in recs {
                    let key: Vec<Value> = plan
                        .group_by
                        .iter()
                        .map(|g| field_value(r, g.field, input.email_of_key))
                        .collect();
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, members)) => members.push(r),
                        None => groups.push((key, vec![r])),
                    }
                }
                groups.sort_by(|(a, _), (b, _)| {
                    plan.group_by
                        .iter()
                        .zip(a.iter().zip(b))
                        .map(|(g, (x, y))| x.cmp_as(y, g.field.field().ty))
                        .find(|o| *o != Ordering::Equal)
                        .unwrap_or(Ordering::Equal)
                });
                groups
                    .iter()
                    .map(|(key, members)| {
                        let sels = plan.selections.iter().map(|s| {
                            let v = if plan.shape == QueryShape::GroupValues {
                                let g = plan
                                    .group_by
                                    .iter()
                                    .position(|g| g.field == s.field)
                                    .unwrap_or(0);
                                key[g].clone()
                            } else {
                                aggregate(members, s.field, s.agg, input)
                            };
                            (s.alias.clone(), v)
                        });
                        let grp = plan
                            .group_by
                            .iter()
                            .zip(key)
                            .map(|(g, v)| (g.alias.clone(), v.clone()));
                        item(sels.chain(grp).collect::<Vec<_>>())
                    })
                    .collect()
            }
        };
    QueryResult {
        response_items: items,
    }
}

/// Latest of two optional instants.
pub(crate) fn latest(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    a.max(b)
}
