//! Distinct counts by nested grouping: the statement of an aggregating query whose
//! distinct counts PostgreSQL answers by hashing, level by level, instead of sorting every
//! record for `COUNT(DISTINCT …)`.

use std::fmt::Write;

use usage_core::plan::{QueryPlan, QueryShape, TimeRange};
use usage_core::schema::Expr;
use usage_core::schema::records;
use usage_core::time::{MICROS_PER_DAY, MICROS_PER_HOUR};

use super::super::dialect;
use super::super::expr::{Out, Output, Statement};
use super::super::names::table;
use super::{Gen, USERS_JOIN, where_clause};

/// A distinct count of the schema, by the key it counts: a developer (`api_key`), a
/// developer and UTC day, a developer and UTC hour. Ordered coarse to fine: the key of each
/// determines the coarser ones' (an hour falls within one day).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Distinct {
    Users,
    Days,
    Hours,
}

/// The key columns of the nested statement, coarse to fine.
const KEY_COLUMNS: [&str; 3] = ["k_user", "k_day", "k_hour"];

impl Distinct {
    fn of(e: Expr) -> Option<Distinct> {
        match e {
            Expr::DistinctUsers => Some(Distinct::Users),
            Expr::DistinctDeveloperDays => Some(Distinct::Days),
            Expr::DistinctDeveloperHours => Some(Distinct::Hours),
            _ => None,
        }
    }

    /// The key columns that identify one counted value.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Distinct::Users => &["k_user"],
            Distinct::Days => &["k_user", "k_day"],
            Distinct::Hours => &["k_user", "k_hour"],
        }
    }

    /// The column holding the count in the nested statement.
    fn alias(self) -> &'static str {
        match self {
            Distinct::Users => "n_user",
            Distinct::Days => "n_day",
            Distinct::Hours => "n_hour",
        }
    }
}

/// The key columns of a set of distinct counts, coarse to fine.
fn key_columns(ds: &[Distinct]) -> Vec<&'static str> {
    KEY_COLUMNS
        .into_iter()
        .filter(|k| ds.iter().any(|d| d.keys().contains(k)))
        .collect()
}

/// The distinct counts of an aggregating query, fine to coarse, when it has any and they
/// can be answered by nested grouping ([`nested`]): their keys are never NULL (`api_key`
/// and the record's time are required), so counting groups counts what `COUNT(DISTINCT)`
/// counts.
pub(super) fn nested_distinct(plan: &QueryPlan) -> Option<Vec<Distinct>> {
    if !matches!(plan.shape, QueryShape::Total | QueryShape::Grouped) {
        return None;
    }
    let kind = plan.source.spec().record;
    let required =
        |name: Option<&str>| name.and_then(|n| kind.field(n)).is_some_and(|f| f.required);
    if !required(Some(records::API_KEY)) || !required(kind.time) {
        return None;
    }
    let mut used: Vec<Distinct> = plan
        .selections
        .iter()
        .filter_map(|s| Distinct::of(s.field.field().expr))
        .collect();
    used.sort();
    used.dedup();
    used.reverse();
    (!used.is_empty()).then_some(used)
}

/// Partial aggregates in column `col` combined by `f`: SUM, MIN, MAX, or COUNT, the sum of
/// partial counts, 0 over no rows as `COUNT` is (so that the rows are the flat statement's).
fn combine(f: &str, col: &str) -> String {
    match f {
        "COUNT" => format!("COALESCE(SUM({col}), 0)"),
        _ => format!("{f}({col})"),
    }
}

/// A selection of the nested statement: a distinct count, or partial aggregates (indices
/// into the partials, each with its combining function).
enum Part {
    Distinct(Distinct),
    Partials(Vec<usize>),
}

/// The statement of an aggregating query with distinct counts (`used`, fine to coarse), as
/// nested grouping that PostgreSQL answers by hashing instead of sorting every record for
/// `COUNT(DISTINCT …)`. The innermost level groups the records by the query's groups and
/// the keys of every count, with partial aggregates of the other selections; each next
/// level groups by the keys of the coarser counts only, counts the rows below (one per
/// value of the finer key: the distinct count within the group) and combines the partials
/// (SUM, MIN, MAX) and the finer counts (SUM: the coarser keys partition the finer ones);
/// the last level groups by the query's groups alone.
pub(super) fn nested(
    mut g: Gen,
    plan: &QueryPlan,
    team: &str,
    group_name: Option<&str>,
    range: TimeRange,
    limit: usize,
    used: &[Distinct],
) -> (Statement, Vec<Output>) {
    let mut outs: Vec<Output> = Vec::new();
    // Selections, as parts.
    let mut partials: Vec<(String, &'static str)> = Vec::new();
    let mut parts: Vec<Part> = Vec::new();
    for s in &plan.selections {
        let (out, part) = match Distinct::of(s.field.field().expr) {
            Some(k) => (Out::Total, Part::Distinct(k)),
            None => {
                let (out, ps) = g.plain_aggregate(s.field, s.agg);
                let first = partials.len();
                partials.extend(ps);
                (out, Part::Partials((first..partials.len()).collect()))
            }
        };
        parts.push(part);
        outs.push(Output {
            alias: s.alias.clone(),
            out,
        });
    }
    // The groups as `g0`, `g1`, ..., with their value columns and sort keys over those.
    let mut groups: Vec<String> = Vec::new();
    let mut values: Vec<String> = Vec::new();
    let mut order: Vec<String> = Vec::new();
    for gb in &plan.group_by {
        let e = g.expr(gb.field);
        let alias = format!("g{}", groups.len());
        groups.push(e);
        values.push(dialect::to_text(&alias));
        outs.push(Output {
            alias: gb.alias.clone(),
            out: g.value_out(gb.field),
        });
        let o = g.order_of(gb.field, &alias);
        if o == "r.version_key" {
            // The stored key orders the groups; it depends on `version` alone.
            order.push(format!("g{}", groups.len()));
            groups.push(o);
        } else {
            order.push(o);
        }
    }
    let group_aliases: Vec<String> = (0..groups.len()).map(|i| format!("g{i}")).collect();
    let (k_day, k_hour) = (
        g.time_bucket(MICROS_PER_DAY),
        g.time_bucket(MICROS_PER_HOUR),
    );
    let key_expr = |k: &str| match k {
        // Keys compare bytewise: a locale collation is not needed.
        "k_user" => dialect::bytewise("r.api_key"),
        "k_day" => k_day.clone(),
        _ => k_hour.clone(),
    };

    // The innermost level, over the records.
    let wh = where_clause(&mut g, plan, team, group_name, range);
    let mut sel: Vec<String> = Vec::new();
    let mut by: Vec<String> = groups.clone();
    for (e, a) in groups.iter().zip(&group_aliases) {
        sel.push(format!("{e} AS {a}"));
    }
    for k in key_columns(used) {
        let e = key_expr(k);
        sel.push(format!("{e} AS {k}"));
        by.push(e);
    }
    for (i, (a, _)) in partials.iter().enumerate() {
        sel.push(format!("{a} AS p{i}"));
    }
    let mut sql = format!(
        "SELECT {} FROM {} r{} WHERE {} GROUP BY {}",
        sel.join(", "),
        table(g.kind),
        if g.join_users { USERS_JOIN } else { "" },
        wh.join(" AND "),
        by.join(", ")
    );

    // One level per distinct count, fine to coarse.
    for (j, k) in used.iter().enumerate() {
        let coarser = &used[j + 1..];
        let mut sel: Vec<String> = Vec::new();
        let mut by: Vec<String> = group_aliases.clone();
        if coarser.is_empty() {
            // The last level: the answer's columns.
            for part in &parts {
                match part {
                    Part::Distinct(x) if x == k => sel.push(dialect::to_text("COUNT(*)")),
                    Part::Distinct(x) => sel.push(dialect::to_text(&combine("COUNT", x.alias()))),
                    Part::Partials(ps) => {
                        for &i in ps {
                            sel.push(dialect::to_text(&combine(partials[i].1, &format!("p{i}"))));
                        }
                    }
                }
            }
            sel.extend(values.iter().cloned());
            // Named apart from the group columns, which ORDER BY names (an unnamed
            // `(g0)::text` would be named `g0`, and ORDER BY `g0` would sort the text).
            for (i, c) in sel.iter_mut().enumerate() {
                let _ = write!(c, " AS c{i}");
            }
        } else {
            sel.extend(group_aliases.iter().cloned());
            for c in key_columns(coarser) {
                sel.push(c.to_string());
                by.push(c.to_string());
            }
            for (i, (_, f)) in partials.iter().enumerate() {
                sel.push(format!("{} AS p{i}", combine(f, &format!("p{i}"))));
            }
            for done in &used[..j] {
                sel.push(format!(
                    "{} AS {}",
                    combine("COUNT", done.alias()),
                    done.alias()
                ));
            }
            sel.push(format!("COUNT(*) AS {}", k.alias()));
        }
        sql = format!("SELECT {} FROM ({sql}) s{j}", sel.join(", "));
        if !by.is_empty() {
            let _ = write!(sql, " GROUP BY {}", by.join(", "));
        }
    }
    if !order.is_empty() {
        let _ = write!(sql, " ORDER BY {}", order.join(", "));
    }
    if plan.shape == QueryShape::Grouped {
        let _ = write!(sql, " LIMIT {}", limit.saturating_add(1));
    }
    (
        Statement {
            sql,
            params: g.params,
        },
        outs,
    )
}
