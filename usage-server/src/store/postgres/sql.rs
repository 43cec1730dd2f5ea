//! SQL generated from the schema tables: DDL of every record kind (the users and groups
//! tables come from `people.rs`), and one parameterized statement per validated query
//! (contract section 3), for engines behind a [`Dialect`]. Every table is keyed by `team_id` first and every statement is filtered
//! by it (Citus: distributed by team).

use std::fmt::Write;

use usage_core::plan::{FilterTest, FilterValue, QueryPlan, QueryShape, TimeRange};
use usage_core::schema::records::{KINDS, RecordField, RecordKind, RecordType};
use usage_core::schema::{Agg, Expr, FieldRef, FilterOp, PCW_COLUMNS, ValueType};
use usage_core::time::{MICROS_PER_DAY, MICROS_PER_HOUR};

use super::dialect::{Dialect, Types};

/// A statement parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// Text.
    Text(String),
    /// A 64-bit integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// An array of text.
    TextArray(Vec<String>),
    /// Bytes.
    Bytes(Vec<u8>),
}

/// A statement and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    /// The SQL text.
    pub sql: String,
    /// The parameters, `$1` first.
    pub params: Vec<Param>,
}

/// The table of a record kind.
pub fn table(kind: &RecordKind) -> String {
    format!("rec_{}", kind.name)
}

fn quote(ident: &str) -> String {
    format!("\"{ident}\"")
}

/// Whether a kind's records live in a generated record table (not users, groups, billing).
pub fn has_table(kind: &RecordKind) -> bool {
    kind.is_usage()
}

/// DDL of the record tables, the users/groups/membership tables and helper functions.
pub fn create_tables(d: &dyn Dialect) -> Vec<String> {
    let t = d.types();
    let mut out = d.functions();
    for kind in KINDS.iter().filter(|k| has_table(k)) {
        let mut cols = vec![format!("team_id {} NOT NULL", t.text)];
        for f in kind.fields {
            let ty = column_type(&t, f.ty);
            let null = if f.required || f.name == "id" {
                " NOT NULL"
            } else {
                ""
            };
            cols.push(format!("{} {ty}{null}", quote(f.name)));
        }
        if kind.field("version").is_some() {
            cols.push(format!(
                "version_key {} GENERATED ALWAYS AS ({}) STORED",
                t.bytes,
                d.version_key("\"version\"")
            ));
        }
        let pk: Vec<String> = std::iter::once("team_id".to_string())
            .chain(kind.identity.iter().map(|c| quote(c)))
            .collect();
        cols.push(format!("PRIMARY KEY ({})", pk.join(", ")));
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS {} (\n  {}\n)",
            table(kind),
            cols.join(",\n  ")
        ));
        let time = kind.time.expect("record tables have a time");
        out.push(format!(
            "CREATE INDEX IF NOT EXISTS {}_time ON {} (team_id, {})",
            table(kind),
            table(kind),
            quote(time)
        ));
        // Per-user activity (user statistics, group and e-mail restrictions).
        out.push(format!(
            "CREATE INDEX IF NOT EXISTS {}_user ON {} (team_id, api_key, {})",
            table(kind),
            table(kind),
            quote(time)
        ));
    }
    out.extend(super::people::create_tables(d));
    out
}

/// The column holding a record table's identity key ([`Dialect::identity_key`]); with
/// `team_id`, the table's primary key.
pub const IDENTITY_KEY: &str = "identity_key";

/// Migration 2: the primary key of every record table becomes `(team_id, identity_key)`,
/// a hash of the identity columns, in place of the identity columns themselves, whose
/// values together may exceed PostgreSQL's index row limit (about 2.7 KB; an identity
/// holds up to four 1,024-byte texts).
pub fn identity_key_migration(d: &dyn Dialect) -> Vec<String> {
    let mut out = d.identity_functions();
    for kind in KINDS.iter().filter(|k| has_table(k)) {
        let cols: Vec<(String, bool)> = kind
            .identity
            .iter()
            .map(|name| {
                let f = kind.field(name).expect("identity fields are fields");
                (
                    quote(name),
                    matches!(f.ty, RecordType::Text | RecordType::Enum(_)),
                )
            })
            .collect();
        let t = table(kind);
        out.push(format!(
            "ALTER TABLE {t} ADD COLUMN {IDENTITY_KEY} {} GENERATED ALWAYS AS ({}) STORED NOT NULL",
            d.types().bytes,
            d.identity_key(&cols)
        ));
        out.push(format!("ALTER TABLE {t} DROP CONSTRAINT {t}_pkey"));
        out.push(format!(
            "ALTER TABLE {t} ADD PRIMARY KEY (team_id, {IDENTITY_KEY})"
        ));
    }
    out
}

/// The generated column that says whether a stored row holds only values the validator
/// accepts ([`readable`]); queries read only such rows (contract section 11).
pub const READABLE: &str = "readable";

/// Whether the column of field `f` holds a value the validator accepts, in SQL: the same
/// rules as `usage_core::load` (text length and non-empty required text, the kept time
/// range, whole hours, counts >= 0, enum identifiers), from the same constants and the
/// same schema table, so a row written through the validator is always readable.
fn field_readable(d: &dyn Dialect, f: &RecordField) -> Option<String> {
    use usage_core::load::MAX_TEXT_BYTES;
    use usage_core::time::Timestamp;
    let c = quote(f.name);
    let test = match f.ty {
        RecordType::Text if f.required => {
            format!("{} BETWEEN 1 AND {MAX_TEXT_BYTES}", d.byte_length(&c))
        }
        RecordType::Text => format!("{} <= {MAX_TEXT_BYTES}", d.byte_length(&c)),
        RecordType::Timestamp => {
            format!("{c} BETWEEN {} AND {}", Timestamp::MIN.0, Timestamp::MAX.0)
        }
        RecordType::Hour => format!(
            "{c} BETWEEN {} AND {} AND {c} % {MICROS_PER_HOUR} = 0",
            Timestamp::MIN.0,
            Timestamp::MAX.0
        ),
        // Days are stored as the microsecond of their midnight (UTC).
        RecordType::Day => format!(
            "{c} BETWEEN {} AND {} AND {c} % {MICROS_PER_DAY} = 0",
            Timestamp::MIN.0,
            Timestamp::MAX.0
        ),
        RecordType::Count => format!("{c} >= 0"),
        RecordType::Enum(ids) => {
            let ids: Vec<String> = ids.iter().map(|i| format!("'{i}'")).collect();
            format!("{c} IN ({})", ids.join(", "))
        }
        RecordType::Bool | RecordType::GroupIds => return None,
    };
    Some(if f.required {
        test
    } else {
        format!("({c} IS NULL OR {test})")
    })
}

/// The readability test of a record kind's row: every field's, joined.
pub fn readable(d: &dyn Dialect, kind: &RecordKind) -> String {
    let tests: Vec<String> = kind
        .fields
        .iter()
        .filter_map(|f| field_readable(d, f))
        .map(|t| format!("({t})"))
        .collect();
    if tests.is_empty() {
        "TRUE".into()
    } else {
        tests.join(" AND ")
    }
}

/// The fields of a kind each with its readability test: what `check` reports as the
/// reason a row cannot be read.
pub fn field_tests(d: &dyn Dialect, kind: &RecordKind) -> Vec<(&'static str, String)> {
    kind.fields
        .iter()
        .filter_map(|f| field_readable(d, f).map(|t| (f.name, t)))
        .collect()
}

/// Per record table: its kind, the fields with a readability test, and the statement
/// listing a team's (`$1`) unreadable rows: the identity key in hex, then per field
/// whether its value is readable.
pub fn unreadable_queries(d: &dyn Dialect) -> Vec<(&'static str, Vec<&'static str>, String)> {
    KINDS
        .iter()
        .filter(|k| has_table(k))
        .map(|kind| {
            let tests = field_tests(d, kind);
            let cols: Vec<String> = tests
                .iter()
                .map(|(_, t)| format!("COALESCE({t}, FALSE)"))
                .collect();
            (
                kind.name,
                tests.iter().map(|(f, _)| *f).collect(),
                format!(
                    "SELECT encode({IDENTITY_KEY}, 'hex'), {} FROM {} WHERE team_id = $1 AND NOT {READABLE} \
                     ORDER BY {IDENTITY_KEY}",
                    cols.join(", "),
                    table(kind)
                ),
            )
        })
        .collect()
}

/// Migration 3: every record table gets the generated column [`READABLE`] and a partial
/// index of its unreadable rows, so queries leave such rows out and `check` finds them
/// without a scan (contract section 11).
pub fn readable_migration(d: &dyn Dialect) -> Vec<String> {
    let mut out = Vec::new();
    for kind in KINDS.iter().filter(|k| has_table(k)) {
        let t = table(kind);
        out.push(format!(
            "ALTER TABLE {t} ADD COLUMN {READABLE} {} GENERATED ALWAYS AS (COALESCE({}, FALSE)) STORED NOT NULL",
            d.types().boolean,
            readable(d, kind)
        ));
        out.push(format!(
            "CREATE INDEX IF NOT EXISTS {t}_unreadable ON {t} (team_id) WHERE NOT {READABLE}"
        ));
    }
    out
}

/// The DDL type of a record field's column.
pub fn column_type(t: &Types, ty: RecordType) -> &'static str {
    match ty {
        RecordType::Text | RecordType::Enum(_) => t.text,
        RecordType::Hour | RecordType::Timestamp | RecordType::Day | RecordType::Count => t.int,
        RecordType::Bool => t.boolean,
        RecordType::GroupIds => t.text,
    }
}

/// How a result column becomes a value.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// A field's value of type `ty` (dates as day numbers, times as microseconds).
    Value(ValueType, bool),
    /// A count or sum: NULL is 0.
    Total,
    /// MIN or MAX of a metric: NULL is absent.
    Extreme,
    /// AVG: this column is the sum, the next one the count.
    Avg,
    /// The agent source's `metadata` from the user's e-mail (NULL: `{}`).
    Metadata,
    /// A PCW field computed from the three byte sums at the end of the row.
    Pcw(Expr),
}

/// One output: its alias and how its column(s) decode.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// The alias.
    pub alias: String,
    /// The decoding.
    pub out: Out,
}

struct Gen<'a> {
    d: &'a dyn Dialect,
    params: Vec<Param>,
    kind: &'static RecordKind,
    join_users: bool,
}

impl Gen<'_> {
    fn param(&mut self, p: Param) -> String {
        self.params.push(p);
        self.d.placeholder(self.params.len())
    }

    fn time_col(&self) -> String {
        format!("r.{}", quote(self.kind.time.expect("time")))
    }

    fn date_of(&self, time: &str) -> String {
        self.d.floor_div(time, MICROS_PER_DAY)
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
            Expr::UtcDate => self.date_of(&self.time_col()),
            Expr::LocalDate => {
                let shifted = format!(
                    "{} + {}",
                    self.time_col(),
                    i64::from(f.offset_minutes()) * 60_000_000
                );
                self.date_of(&shifted)
            }
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
            _ => self.d.version_key(e),
        }
    }

    /// The bytewise/typed sort expression of a field.
    fn order_expr(&mut self, f: FieldRef) -> String {
        let e = self.expr(f);
        match f.field().ty {
            ValueType::Text | ValueType::Enum(_) | ValueType::Json => self.d.bytewise(&e),
            ValueType::Version => self.version_key_of(f, &e),
            _ => e,
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
                    (self.d.bytes_of(&e), s.as_bytes().to_vec())
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
                format!("{} {sym} {}", self.d.bytewise(&e), self.d.bytewise(&p))
            }
            _ => format!("{e} {sym} {p}"),
        }
    }

    fn filter(&mut self, f: FieldRef, test: &FilterTest) -> String {
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
                    return self.d.any_text(&e, &p);
                }
                let parts: Vec<String> = values
                    .iter()
                    .map(|v| self.compare(f, FilterOp::Equal, v))
                    .collect();
                format!("({})", parts.join(" OR "))
            }
        }
    }

    fn aggregate(&mut self, f: FieldRef, agg: Agg, cols: &mut Vec<String>) -> Out {
        let field = f.field();
        let t = |d: &dyn Dialect, e: &str| d.to_text(e);
        match field.expr {
            Expr::DistinctUsers => {
                // Distinct keys compare bytewise: a locale collation is slower and not needed.
                let key = self.d.bytewise("r.api_key");
                cols.push(t(self.d, &format!("COUNT(DISTINCT {key})")));
                return Out::Total;
            }
            Expr::DistinctDeveloperDays => {
                let day = self.date_of(&self.time_col());
                let key = self.d.bytewise("r.api_key");
                cols.push(t(self.d, &format!("COUNT(DISTINCT ({key}, {day}))")));
                return Out::Total;
            }
            Expr::DistinctDeveloperHours => {
                let hour = self.d.floor_div(&self.time_col(), MICROS_PER_HOUR);
                let key = self.d.bytewise("r.api_key");
                cols.push(t(self.d, &format!("COUNT(DISTINCT ({key}, {hour}))")));
                return Out::Total;
            }
            _ => {}
        }
        let e = self.expr(f);
        let summand = if field.ty == ValueType::Bool {
            format!("CASE WHEN {e} THEN 1 ELSE 0 END")
        } else {
            format!("COALESCE({e}, 0)")
        };
        match agg {
            Agg::Count => {
                cols.push(t(self.d, "COUNT(*)"));
                Out::Total
            }
            Agg::Sum => {
                cols.push(t(self.d, &format!("SUM({summand})")));
                Out::Total
            }
            Agg::Avg => {
                cols.push(t(self.d, &format!("SUM({summand})")));
                cols.push(t(self.d, "COUNT(*)"));
                Out::Avg
            }
            Agg::Max => {
                cols.push(t(self.d, &format!("MAX({summand})")));
                Out::Extreme
            }
            Agg::Min => {
                cols.push(t(self.d, &format!("MIN({summand})")));
                Out::Extreme
            }
            Agg::Unspecified => unreachable!("an aggregated selection has a function"),
        }
    }

    fn value_col(&mut self, f: FieldRef, cols: &mut Vec<String>) -> Out {
        let field = f.field();
        let e = self.expr(f);
        cols.push(self.d.to_text(&e));
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
/// can tell an answer over the limit.
pub fn query(
    d: &dyn Dialect,
    plan: &QueryPlan,
    team_id: &str,
    group_name: Option<&str>,
    range: TimeRange,
    limit: usize,
) -> (Statement, Vec<Output>) {
    let kind = plan.source.spec().record;
    let mut g = Gen {
        d,
        params: Vec::new(),
        kind,
        join_users: false,
    };
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
                cols.push(d.to_text(&format!("SUM(r.{})", quote(c))));
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
            order.push(d.bytewise("r.api_key"));
            for name in kind
                .identity
                .iter()
                .filter(|n| **n != "api_key" && Some(**n) != kind.time)
            {
                let col = format!("r.{}", quote(name));
                order.push(if *name == "version" {
                    d.version_key(&col)
                } else {
                    d.bytewise(&col)
                });
            }
        }
    }

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

    let mut sql = String::new();
    let _ = write!(sql, "SELECT {} FROM {} r", cols.join(", "), table(kind));
    if g.join_users {
        sql.push_str(" LEFT JOIN users u ON u.team_id = r.team_id AND u.api_key = r.api_key");
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
