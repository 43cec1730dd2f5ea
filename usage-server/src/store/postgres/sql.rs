//! The query generator: one parameterized statement per validated `Analytics` query
//! (contract section 3), from the schema tables, in the spellings of `dialect`. Every
//! statement is filtered by `team_id` (Citus: distributed by team, a router plan).

use std::fmt::Write;

use usage_core::plan::{FilterTest, FilterValue, QueryPlan, QueryShape, TimeRange};
use usage_core::ranges::instant_ranges;
use usage_core::schema::records::{self, RecordKind, RecordType};
use usage_core::schema::{Agg, Expr, FieldRef, FilterOp, PCW_COLUMNS, ValueType};
use usage_core::time::{MICROS_PER_DAY, MICROS_PER_HOUR};
use usage_core::zone::{LocalZone, Zone};

mod nested;

use super::dialect;
use super::expr::{Out, Output, Param, Statement};
use super::names::{READABLE, quote, table};

struct Gen {
    params: Vec<Param>,
    kind: &'static RecordKind,
    join_users: bool,
    /// The parameter of each IANA zone already named, so that a local date written twice
    /// (selected, grouped, ordered) is one expression to the GROUP BY.
    zones: Vec<(Zone, String)>,
}

impl Gen {
    fn new(plan: &QueryPlan) -> Gen {
        Gen {
            params: Vec::new(),
            kind: plan.source.spec().record,
            join_users: false,
            zones: Vec::new(),
        }
    }

    fn param(&mut self, p: Param) -> String {
        self.params.push(p);
        dialect::placeholder(self.params.len())
    }

    fn time_col(&self) -> String {
        format!("r.{}", quote(self.kind.time.expect("time")))
    }

    fn date_of(&self, time: &str) -> String {
        dialect::floor_div(time, MICROS_PER_DAY)
    }

    /// The UTC day or hour (`period`) of the record's time: a stored time is never
    /// negative (the service keeps 1970 on), so plain integer division is the floor.
    fn time_bucket(&self, period: i64) -> String {
        dialect::div_nonneg(&self.time_col(), period)
    }

    /// The value of a per-record field.
    fn expr(&mut self, f: FieldRef) -> String {
        match f.field().expr {
            Expr::Column(c) => match self.kind.field(c) {
                // An optional count defaults to 0 (`flex_credits_used`).
                Some(rf) if !rf.required && rf.ty == RecordType::Count => {
                    format!("COALESCE(r.{}, 0)", quote(c))
                }
                _ => format!("r.{}", quote(c)),
            },
            Expr::Time => self.time_col(),
            Expr::UtcDate => self.time_bucket(MICROS_PER_DAY),
            Expr::LocalDate => match f.zone() {
                LocalZone::Fixed(m) => {
                    let shifted = format!("{} + {}", self.time_col(), i64::from(m) * 60_000_000);
                    self.date_of(&shifted)
                }
                LocalZone::Iana(z) => {
                    let zone = match self.zones.iter().find(|(x, _)| *x == z) {
                        Some((_, p)) => p.clone(),
                        None => {
                            let p = self.param(Param::Text(z.name().to_string()));
                            self.zones.push((z, p.clone()));
                            p
                        }
                    };
                    dialect::zoned_date(&self.time_col(), &zone)
                }
            },
            Expr::UserMetadata => {
                self.join_users = true;
                "u.email".to_string()
            }
            other => unreachable!("{other:?} has no per-record value"),
        }
    }

    /// The sort key of a version field: the stored `version_key` column of the record's
    /// `version` (computed once at write), else the key function.
    fn version_key_of(&self, f: FieldRef, e: &str) -> String {
        match f.field().expr {
            Expr::Column("version") if self.kind.field("version").is_some() => {
                "r.version_key".to_string()
            }
            _ => dialect::version_key(e),
        }
    }

    /// The bytewise/typed sort expression of a field.
    fn order_expr(&mut self, f: FieldRef) -> String {
        let e = self.expr(f);
        self.order_of(f, &e)
    }

    /// The bytewise/typed sort expression of field `f` whose value is `e`.
    fn order_of(&self, f: FieldRef, e: &str) -> String {
        match f.field().ty {
            ValueType::Text | ValueType::Enum(_) | ValueType::Json => dialect::bytewise(e),
            ValueType::Version => self.version_key_of(f, e),
            _ => e.to_string(),
        }
    }

    fn filter_value(&mut self, f: FieldRef, v: &FilterValue) -> (String, String) {
        let e = self.expr(f);
        match v {
            FilterValue::Date(d) => (e, self.param(Param::Int(i64::from(d.0)))),
            FilterValue::Time(t) => (e, self.param(Param::Int(t.0))),
            FilterValue::TimeDate(d) => (self.date_of(&e), self.param(Param::Int(i64::from(d.0)))),
            FilterValue::Int(n) => (e, self.param(Param::Int(*n))),
            FilterValue::Bool(b) => (e, self.param(Param::Bool(*b))),
            FilterValue::Text(s) => (e, self.param(Param::Text(s.clone()))),
        }
    }

    fn compare(&mut self, f: FieldRef, op: FilterOp, v: &FilterValue) -> String {
        let sym = match op {
            FilterOp::Equal => "=",
            FilterOp::NotEqual => "<>",
            FilterOp::GreaterThan => ">",
            FilterOp::LessThan => "<",
            FilterOp::Ge => ">=",
            FilterOp::Le => "<=",
        };
        if let FilterValue::Text(s) = v {
            let version = f.field().ty == ValueType::Version && op.is_ordered();
            if version || s.contains('\0') {
                // Compare bytes: the version key computed here, or the value's UTF-8 bytes
                // (SQL text cannot hold U+0000).
                let e = self.expr(f);
                let (lhs, bytes) = if version {
                    (
                        self.version_key_of(f, &e),
                        super::dialect::version_sort_key(s),
                    )
                } else {
                    (dialect::bytes_of(&e), s.as_bytes().to_vec())
                };
                let p = self.param(Param::Bytes(bytes));
                return format!("{lhs} {sym} {p}");
            }
        }
        let (e, p) = self.filter_value(f, v);
        if !op.is_ordered() {
            return format!("{e} {sym} {p}");
        }
        match (f.field().ty, v) {
            (ValueType::Text | ValueType::Enum(_), _) => {
                format!("{} {sym} {}", dialect::bytewise(&e), dialect::bytewise(&p))
            }
            _ => format!("{e} {sym} {p}"),
        }
    }

    fn filter(&mut self, f: FieldRef, test: &FilterTest) -> String {
        // The record's time and its dates: ranges of the time column, which the
        // `(team_id, time)` index serves and no per-row date arithmetic is needed for.
        if let Some(ranges) = instant_ranges(f, test) {
            return self.time_ranges(&ranges);
        }
        match test {
            FilterTest::Compare(op, v) => self.compare(f, *op, v),
            FilterTest::AnyOf(values) => {
                if values.len() > 1
                    && values
                        .iter()
                        .all(|v| matches!(v, FilterValue::Text(s) if !s.contains('\0')))
                {
                    let e = self.expr(f);
                    let texts = values
                        .iter()
                        .map(|v| match v {
                            FilterValue::Text(s) => s.clone(),
                            _ => unreachable!("checked"),
                        })
                        .collect();
                    let p = self.param(Param::TextArray(texts));
                    return dialect::any_text(&e, &p);
                }
                let parts: Vec<String> = values
                    .iter()
                    .map(|v| self.compare(f, FilterOp::Equal, v))
                    .collect();
                format!("({})", parts.join(" OR "))
            }
        }
    }

    /// The rows whose time lies in one of `ranges` (inclusive microseconds, `i64::MIN` and
    /// `i64::MAX` for open ends; [`instant_ranges`]).
    fn time_ranges(&mut self, ranges: &[(i64, i64)]) -> String {
        let tc = self.time_col();
        let parts: Vec<String> = ranges
            .iter()
            .map(|&(lo, hi)| {
                let mut c = Vec::new();
                if lo != i64::MIN {
                    c.push(format!("{tc} >= {}", self.param(Param::Int(lo))));
                }
                if hi != i64::MAX {
                    c.push(format!("{tc} <= {}", self.param(Param::Int(hi))));
                }
                if c.is_empty() {
                    "TRUE".to_string()
                } else {
                    c.join(" AND ")
                }
            })
            .collect();
        match parts.len() {
            0 => "FALSE".to_string(),
            1 => parts.into_iter().next().unwrap_or_default(),
            _ => format!("({})", parts.join(" OR ")),
        }
    }

    fn aggregate(&mut self, f: FieldRef, agg: Agg, cols: &mut Vec<String>) -> Out {
        let field = f.field();
        match field.expr {
            Expr::DistinctUsers => {
                // Distinct keys compare bytewise: a locale collation is slower and not needed.
                let key = dialect::bytewise("r.api_key");
                cols.push(dialect::to_text(&format!("COUNT(DISTINCT {key})")));
                return Out::Total;
            }
            Expr::DistinctDeveloperDays => {
                let day = self.time_bucket(MICROS_PER_DAY);
                let key = dialect::bytewise("r.api_key");
                cols.push(dialect::to_text(&format!("COUNT(DISTINCT ({key}, {day}))")));
                return Out::Total;
            }
            Expr::DistinctDeveloperHours => {
                let hour = self.time_bucket(MICROS_PER_HOUR);
                let key = dialect::bytewise("r.api_key");
                cols.push(dialect::to_text(&format!(
                    "COUNT(DISTINCT ({key}, {hour}))"
                )));
                return Out::Total;
            }
            _ => {}
        }
        let (out, parts) = self.plain_aggregate(f, agg);
        cols.extend(parts.iter().map(|(a, _)| dialect::to_text(a)));
        out
    }

    /// A selection's aggregate other than a distinct count, as its parts: per result
    /// column, the aggregate over records and how partial aggregates of the same combine
    /// ([`combine`]: SUM, MIN, MAX, or COUNT for counts).
    fn plain_aggregate(&mut self, f: FieldRef, agg: Agg) -> (Out, Vec<(String, &'static str)>) {
        let field = f.field();
        if agg == Agg::Count {
            // No value is read: nothing of the field (nor a parameter of it) is written.
            return (Out::Total, vec![("COUNT(*)".into(), "COUNT")]);
        }
        let e = self.expr(f);
        let summand = if field.ty == ValueType::Bool {
            format!("CASE WHEN {e} THEN 1 ELSE 0 END")
        } else {
            format!("COALESCE({e}, 0)")
        };
        match agg {
            Agg::Count => unreachable!("answered above"),
            Agg::Sum => (Out::Total, vec![(format!("SUM({summand})"), "SUM")]),
            Agg::Avg => (
                Out::Avg,
                vec![
                    (format!("SUM({summand})"), "SUM"),
                    ("COUNT(*)".into(), "COUNT"),
                ],
            ),
            Agg::Max => (Out::Extreme, vec![(format!("MAX({summand})"), "MAX")]),
            Agg::Min => (Out::Extreme, vec![(format!("MIN({summand})"), "MIN")]),
            Agg::Unspecified => unreachable!("an aggregated selection has a function"),
        }
    }

    fn value_col(&mut self, f: FieldRef, cols: &mut Vec<String>) -> Out {
        let e = self.expr(f);
        cols.push(dialect::to_text(&e));
        self.value_out(f)
    }

    /// How the value column of field `f` decodes.
    fn value_out(&self, f: FieldRef) -> Out {
        let field = f.field();
        if field.expr == Expr::UserMetadata {
            Out::Metadata
        } else {
            let ty = match field.expr {
                Expr::UtcDate | Expr::LocalDate => ValueType::Date,
                _ => field.ty,
            };
            Out::Value(
                ty,
                field.ty == ValueType::Int
                    && matches!(field.expr, Expr::Column(c) if self.kind.field(c).is_some_and(|rf| !rf.required)),
            )
        }
    }
}

/// The statement answering one validated query, and how to decode its rows. `limit` is
/// the result limit: the statement returns at most `limit + 1` rows, so that the caller
/// can tell an answer over the limit. Distinct counts are answered by nested grouping
/// ([`nested`]) where it applies, else by `COUNT(DISTINCT …)` ([`flat_query`]).
pub fn query(
    plan: &QueryPlan,
    team_id: &str,
    group_name: Option<&str>,
    range: TimeRange,
    limit: usize,
) -> (Statement, Vec<Output>) {
    match nested::nested_distinct(plan) {
        Some(used) => {
            let mut g = Gen::new(plan);
            let team = g.param(Param::Text(team_id.to_string()));
            nested::nested(g, plan, &team, group_name, range, limit, &used)
        }
        None => flat_query(plan, team_id, group_name, range, limit),
    }
}

/// [`query`] as one level of aggregation over the records: distinct counts by
/// `COUNT(DISTINCT …)`.
pub fn flat_query(
    plan: &QueryPlan,
    team_id: &str,
    group_name: Option<&str>,
    range: TimeRange,
    limit: usize,
) -> (Statement, Vec<Output>) {
    let kind = plan.source.spec().record;
    let mut g = Gen::new(plan);
    let team = g.param(Param::Text(team_id.to_string()));
    let mut cols: Vec<String> = Vec::new();
    let mut outs: Vec<Output> = Vec::new();
    let mut group_exprs: Vec<String> = Vec::new();
    let mut order: Vec<String> = Vec::new();

    match plan.shape {
        QueryShape::Pcw => {
            for s in &plan.selections {
                outs.push(Output {
                    alias: s.alias.clone(),
                    out: Out::Pcw(s.field.field().expr),
                });
            }
            // The sums every PCW output is made of, in the order `rows::item` reads them.
            for c in PCW_COLUMNS {
                cols.push(dialect::to_text(&format!("SUM(r.{})", quote(c))));
            }
        }
        QueryShape::Total => {
            for s in &plan.selections {
                let out = g.aggregate(s.field, s.agg, &mut cols);
                outs.push(Output {
                    alias: s.alias.clone(),
                    out,
                });
            }
        }
        QueryShape::Grouped | QueryShape::GroupValues => {
            // Selections first (aggregates, or the group value of their field), then the
            // group values; GROUP BY the group expressions.
            let mut sel_cols = Vec::new();
            for s in &plan.selections {
                let out = if plan.shape == QueryShape::Grouped {
                    g.aggregate(s.field, s.agg, &mut sel_cols)
                } else {
                    g.value_col(s.field, &mut sel_cols)
                };
                outs.push(Output {
                    alias: s.alias.clone(),
                    out,
                });
            }
            cols.extend(sel_cols);
            for gb in &plan.group_by {
                let e = g.expr(gb.field);
                group_exprs.push(e);
                let out = g.value_col(gb.field, &mut cols);
                outs.push(Output {
                    alias: gb.alias.clone(),
                    out,
                });
                let o = g.order_expr(gb.field);
                if o == "r.version_key" {
                    // The stored key orders the groups; it depends on `version` alone.
                    group_exprs.push(o.clone());
                }
                order.push(o);
            }
        }
        QueryShape::Raw => {
            for s in &plan.selections {
                let out = g.value_col(s.field, &mut cols);
                outs.push(Output {
                    alias: s.alias.clone(),
                    out,
                });
            }
            order.push(g.time_col());
            order.push(dialect::bytewise("r.api_key"));
            for name in kind
                .identity
                .iter()
                .filter(|n| **n != records::API_KEY && Some(**n) != kind.time)
            {
                let col = format!("r.{}", quote(name));
                order.push(if *name == "version" {
                    dialect::version_key(&col)
                } else {
                    dialect::bytewise(&col)
                });
            }
        }
    }

    let wh = where_clause(&mut g, plan, &team, group_name, range);
    let mut sql = String::new();
    let _ = write!(sql, "SELECT {} FROM {} r", cols.join(", "), table(kind));
    if g.join_users {
        sql.push_str(USERS_JOIN);
    }
    let _ = write!(sql, " WHERE {}", wh.join(" AND "));
    if !group_exprs.is_empty() {
        let _ = write!(sql, " GROUP BY {}", group_exprs.join(", "));
    }
    if !order.is_empty() {
        let _ = write!(sql, " ORDER BY {}", order.join(", "));
    }
    if matches!(
        plan.shape,
        QueryShape::Raw | QueryShape::Grouped | QueryShape::GroupValues
    ) {
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

/// The join of a record to its user (the agent source's `metadata`).
const USERS_JOIN: &str = " LEFT JOIN users u ON u.team_id = r.team_id AND u.api_key = r.api_key";

/// The conditions of a query's WHERE clause, over the record `r`: the team, readable rows,
/// the group restriction, a PCW query's time range and the filters.
fn where_clause(
    g: &mut Gen,
    plan: &QueryPlan,
    team: &str,
    group_name: Option<&str>,
    range: TimeRange,
) -> Vec<String> {
    let mut wh = vec![format!("r.team_id = {team}"), format!("r.{READABLE}")];
    if let Some(name) = group_name {
        let p = g.param(Param::Text(name.to_string()));
        wh.push(format!(
            "r.api_key IN (SELECT u2.api_key FROM users u2 JOIN user_groups m ON m.team_id = u2.team_id AND m.email = u2.email \
             JOIN groups g ON g.team_id = m.team_id AND g.group_id = m.group_id WHERE u2.team_id = {team} AND g.group_name = {p})"
        ));
    }
    if plan.shape == QueryShape::Pcw {
        let tc = g.time_col();
        if let Some(s) = range.start {
            let p = g.param(Param::Int(s.0));
            wh.push(format!("{tc} >= {p}"));
        }
        if let Some(e) = range.end {
            let p = g.param(Param::Int(e.0));
            wh.push(format!("{tc} < {p}"));
        }
    }
    for f in &plan.filters {
        let c = g.filter(f.field, &f.test);
        wh.push(c);
    }
    wh
}
