//! SQL generated from the schema tables: DDL of every record kind (the users and groups
//! tables come from `people.rs`), and one parameterized statement per validated query
//! (contract section 3), in the spellings of `dialect`. Every table is keyed by `team_id` first and every statement is filtered
//! by it (Citus: distributed by team).

use std::fmt::Write;

use usage_core::plan::{FilterTest, FilterValue, QueryPlan, QueryShape, TimeRange, instant_ranges};
use usage_core::schema::records::{KINDS, RecordField, RecordKind, RecordType};
use usage_core::schema::{Agg, Expr, FieldRef, FilterOp, PCW_COLUMNS, ValueType};
use usage_core::time::{MICROS_PER_DAY, MICROS_PER_HOUR};
use usage_core::zone::{LocalZone, Zone};

use super::dialect;

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
pub fn create_tables() -> Vec<String> {
    let t = dialect::TYPES;
    let mut out = dialect::version_key_functions();
    for kind in KINDS.iter().filter(|k| has_table(k)) {
        let mut cols = vec![format!("team_id {} NOT NULL", t.text)];
        for f in kind.fields {
            let ty = dialect::column_type(f.ty);
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
                dialect::version_key("\"version\"")
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
    out.extend(super::people::create_tables());
    out
}

/// The column holding a record table's identity key ([`dialect::identity_key`]); with
/// `team_id`, the table's primary key.
pub const IDENTITY_KEY: &str = "identity_key";

/// Migration 2: the primary key of every record table becomes `(team_id, identity_key)`,
/// a hash of the identity columns, in place of the identity columns themselves, whose
/// values together may exceed PostgreSQL's index row limit (about 2.7 KB; an identity
/// holds up to four 1,024-byte texts).
pub fn identity_key_migration() -> Vec<String> {
    let mut out = dialect::identity_functions();
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
            dialect::TYPES.bytes,
            dialect::identity_key(&cols)
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
fn field_readable(f: &RecordField) -> Option<String> {
    use usage_core::load::MAX_TEXT_BYTES;
    use usage_core::time::Timestamp;
    let c = quote(f.name);
    let test = match f.ty {
        RecordType::Text if f.required => {
            format!(
                "{} BETWEEN 1 AND {MAX_TEXT_BYTES}",
                dialect::byte_length(&c)
            )
        }
        RecordType::Text => format!("{} <= {MAX_TEXT_BYTES}", dialect::byte_length(&c)),
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
pub fn readable(kind: &RecordKind) -> String {
    let tests: Vec<String> = kind
        .fields
        .iter()
        .filter_map(field_readable)
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
pub fn field_tests(kind: &RecordKind) -> Vec<(&'static str, String)> {
    kind.fields
        .iter()
        .filter_map(|f| field_readable(f).map(|t| (f.name, t)))
        .collect()
}

/// Per record table: its kind, the fields with a readability test, and the statement
/// listing a team's (`$1`) unreadable rows: the identity key in hex, then per field
/// whether its value is readable.
pub fn unreadable_queries() -> Vec<(&'static str, Vec<&'static str>, String)> {
    KINDS
        .iter()
        .filter(|k| has_table(k))
        .map(|kind| {
            let tests = field_tests(kind);
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
pub fn readable_migration() -> Vec<String> {
    let mut out = Vec::new();
    for kind in KINDS.iter().filter(|k| has_table(k)) {
        let t = table(kind);
        out.push(format!(
            "ALTER TABLE {t} ADD COLUMN {READABLE} {} GENERATED ALWAYS AS (COALESCE({}, FALSE)) STORED NOT NULL",
            dialect::TYPES.boolean,
            readable(kind)
        ));
        out.push(format!(
            "CREATE INDEX IF NOT EXISTS {t}_unreadable ON {t} (team_id) WHERE NOT {READABLE}"
        ));
    }
    out
}

/// The column of a record table holding the team's change sequence number of the write
/// that last stored the row (migration 5), and the table of each team's last number.
pub const CHANGE_SEQ: &str = "change_seq";

/// The table of each team's change position: the number of its last write of team data
/// (`seq`) and of its last write of users or groups (`people_seq`).
pub const TEAM_CHANGES: &str = "team_changes";

/// Migration 5, the change feeds that keep instances' caches current: every record table
/// gets [`CHANGE_SEQ`] (0 for rows written before) and an index to read a team's rows
/// newer than a number; [`TEAM_CHANGES`] holds each team's last number, [`META_CHANGES`]
/// the metadata counter.
pub fn change_feed_migration() -> Vec<String> {
    let ty = dialect::TYPES;
    let mut out = Vec::new();
    for kind in KINDS.iter().filter(|k| has_table(k)) {
        let t = table(kind);
        out.push(format!(
            "ALTER TABLE {t} ADD COLUMN {CHANGE_SEQ} {} NOT NULL DEFAULT 0",
            ty.int
        ));
        out.push(format!(
            "CREATE INDEX IF NOT EXISTS {t}_{CHANGE_SEQ} ON {t} (team_id, {CHANGE_SEQ})"
        ));
    }
    out.push(format!(
        "CREATE TABLE IF NOT EXISTS {TEAM_CHANGES} (team_id {} PRIMARY KEY, seq {} NOT NULL, people_seq {} NOT NULL)",
        ty.text, ty.int, ty.int
    ));
    out.push(format!(
        "CREATE TABLE IF NOT EXISTS {META_CHANGES} (id INT PRIMARY KEY CHECK (id = 1), version {} NOT NULL)",
        ty.int
    ));
    out.push(format!(
        "INSERT INTO {META_CHANGES} (id, version) VALUES (1, 0) ON CONFLICT DO NOTHING"
    ));
    out
}

/// Whether a record table's primary key leads with its time column after `team_id`: the
/// kind's identity holds its time (every kind but those identified by an `id`), so the key
/// `(team_id, time, identity_key)` is as unique as `(team_id, identity_key)`, keeps a write
/// in time order on a few index pages, and serves the team's time ranges itself.
pub fn time_keyed(kind: &RecordKind) -> bool {
    kind.time.is_some_and(|t| kind.identity.contains(&t))
}

/// The columns of a record table's primary key (migration 6).
pub fn primary_key(kind: &RecordKind) -> Vec<String> {
    let mut key = vec!["team_id".to_string()];
    if time_keyed(kind) {
        key.push(quote(kind.time.expect("a time-keyed kind has a time")));
    }
    key.push(IDENTITY_KEY.to_string());
    key
}

/// Migration 6, writes at bulk speed (issue 16): the identity and version keys become plain
/// columns that writes compute ([`super::dialect::identity_key_of`],
/// [`super::dialect::version_sort_key`]; the values stored so far stay), a kind whose
/// identity holds its time is keyed `(team_id, time, identity_key)` in place of its own
/// time index, and the per-user index goes (the per-user statistics group one scan of the
/// range instead of looking users up one by one). Each index a row is written to costs a
/// write about as much as the row itself (BENCHMARKS.md, "Session 7").
pub fn bulk_write_migration() -> Vec<String> {
    let mut out = Vec::new();
    for kind in KINDS.iter().filter(|k| has_table(k)) {
        let t = table(kind);
        out.push(dialect::drop_generation(&t, IDENTITY_KEY));
        if kind.field("version").is_some() {
            out.push(dialect::drop_generation(&t, "version_key"));
        }
        if time_keyed(kind) {
            out.push(format!("ALTER TABLE {t} DROP CONSTRAINT {t}_pkey"));
            out.push(format!(
                "ALTER TABLE {t} ADD PRIMARY KEY ({})",
                primary_key(kind).join(", ")
            ));
            out.push(format!("DROP INDEX IF EXISTS {t}_time"));
        }
        out.push(format!("DROP INDEX IF EXISTS {t}_user"));
    }
    out
}

/// The columns a write supplies for a record of `kind`, in `COPY` order: the team, the
/// write's change number, the identity key, the version key when the kind has a version,
/// then the kind's fields. The staging table has the same columns, so one encoding of a
/// round serves a `COPY` into either.
pub fn written_columns(kind: &RecordKind) -> Vec<String> {
    let mut cols = vec![
        "team_id".to_string(),
        CHANGE_SEQ.to_string(),
        IDENTITY_KEY.to_string(),
    ];
    if kind.field("version").is_some() {
        cols.push("version_key".into());
    }
    cols.extend(kind.fields.iter().map(|f| quote(f.name)));
    cols
}

/// The binary `COPY` of a round's rows into `table` ([`table`] or [`stage_table`]).
pub fn copy_in(kind: &RecordKind, table: &str) -> String {
    format!(
        "COPY {table} ({}) FROM STDIN (FORMAT binary)",
        written_columns(kind).join(", ")
    )
}

/// The session's staging table of `kind`'s writes (a temporary table: no WAL, private to
/// the connection, emptied at commit).
pub fn stage_table(kind: &RecordKind) -> String {
    format!("stage_{}", kind.name)
}

/// The statement that creates the staging table of `kind` if the session has none.
pub fn create_stage(kind: &RecordKind) -> String {
    let t = dialect::TYPES;
    let mut cols = vec![
        format!("team_id {} NOT NULL", t.text),
        format!("{CHANGE_SEQ} {} NOT NULL", t.int),
        format!("{IDENTITY_KEY} {} NOT NULL", t.bytes),
    ];
    if kind.field("version").is_some() {
        cols.push(format!("version_key {}", t.bytes));
    }
    cols.extend(
        kind.fields
            .iter()
            .map(|f| format!("{} {}", quote(f.name), dialect::column_type(f.ty))),
    );
    format!(
        "CREATE TEMPORARY TABLE IF NOT EXISTS {} ({}) ON COMMIT DELETE ROWS",
        stage_table(kind),
        cols.join(", ")
    )
}

/// The span of times of the team's stored rows of a time-keyed `kind` within a round's
/// (`$1` the team, `$2` and `$3` the round's first and last time): `NULL`s when it has
/// none there. Two reads of the primary key.
pub fn stored_span(kind: &RecordKind) -> String {
    let time = quote(kind.time.expect("a time-keyed kind has a time"));
    format!(
        "SELECT min({time}), max({time}) FROM {} WHERE team_id = $1 AND {time} BETWEEN $2 AND $3",
        table(kind)
    )
}

/// Whether the team (`$1`) has a stored row of any of the given identities: for a
/// time-keyed `kind`, `$2` their times and `$3` their identity keys (arrays of the same
/// length, in step); otherwise `$2` the identity keys. One probe of the primary key each.
pub fn stored_any(kind: &RecordKind) -> String {
    let t = table(kind);
    let ty = dialect::TYPES;
    if time_keyed(kind) {
        let time = quote(kind.time.expect("a time-keyed kind has a time"));
        format!(
            "SELECT EXISTS (SELECT 1 FROM unnest($2::{}[], $3::{}[]) AS k(t, id) \
             JOIN {t} r ON r.team_id = $1 AND r.{time} = k.t AND r.{IDENTITY_KEY} = k.id)",
            ty.int, ty.bytes
        )
    } else {
        format!(
            "SELECT EXISTS (SELECT 1 FROM {t} WHERE team_id = $1 AND {IDENTITY_KEY} = ANY($2::{}[]))",
            ty.bytes
        )
    }
}

/// How a staged row meets the stored row of its identity (`$1` the team; for a kind keyed
/// by time, `$2` and `$3` the staged time range, so the join reads only the team's rows in
/// it).
fn staged_match(kind: &RecordKind) -> String {
    let id = format!("r.{IDENTITY_KEY} = s.{IDENTITY_KEY}");
    if time_keyed(kind) {
        let time = quote(kind.time.expect("a time-keyed kind has a time"));
        format!("r.team_id = $1 AND r.{time} BETWEEN $2 AND $3 AND r.{time} = s.{time} AND {id}")
    } else {
        format!("r.team_id = $1 AND {id}")
    }
}

/// The first statement of a staged merge: the update of the stored rows that staged records
/// replace (to the staged values and change number), `$1` the team (and, for a kind keyed
/// by time, `$2` and `$3` the staged time range, so the join reads only the team's rows in
/// it).
pub fn merge_update(kind: &RecordKind) -> String {
    let sets: Vec<String> = written_columns(kind)
        .into_iter()
        .filter(|c| {
            c != "team_id" && c != IDENTITY_KEY && !kind.identity.iter().any(|i| quote(i) == *c)
        })
        .map(|c| format!("{c} = s.{c}"))
        .collect();
    format!(
        "UPDATE {} r SET {} FROM {} s WHERE {}",
        table(kind),
        sets.join(", "),
        stage_table(kind),
        staged_match(kind)
    )
}

/// The second statement of a staged merge: the insert of the staged records not stored
/// (`anti`, with the parameters of [`merge_update`]), or of all of them (no parameters)
/// when the update replaced none: the staged identities are distinct and the team's writer
/// holds its lock, so none is stored. The primary key refuses a duplicate either way.
pub fn merge_insert(kind: &RecordKind, anti: bool) -> String {
    let cols = written_columns(kind);
    let from: Vec<String> = cols.iter().map(|c| format!("s.{c}")).collect();
    let mut insert = format!(
        "INSERT INTO {} ({}) SELECT {} FROM {} s",
        table(kind),
        cols.join(", "),
        from.join(", "),
        stage_table(kind),
    );
    if anti {
        insert.push_str(&format!(
            " WHERE NOT EXISTS (SELECT 1 FROM {} r WHERE {})",
            table(kind),
            staged_match(kind)
        ));
    }
    insert
}

/// The one-row table of the store's metadata counter (migration 5): bumped by every write
/// of teams, keys, caps and billing, so instances may cache those and drop them when it
/// moves ([`crate::store::cached::CachedMeta`]). Like `teams` and `keys`, it is no team's
/// (a Citus reference table); record writes never touch it.
pub const META_CHANGES: &str = "meta_changes";

/// The statement that bumps [`META_CHANGES`], in the transaction of a metadata write.
pub const BUMP_META: &str = "UPDATE meta_changes SET version = version + 1 WHERE id = 1";

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
/// (`nested`) where it applies, else by `COUNT(DISTINCT …)` ([`flat_query`]).
pub fn query(
    plan: &QueryPlan,
    team_id: &str,
    group_name: Option<&str>,
    range: TimeRange,
    limit: usize,
) -> (Statement, Vec<Output>) {
    match nested_distinct(plan) {
        Some(used) => {
            let mut g = Gen::new(plan);
            let team = g.param(Param::Text(team_id.to_string()));
            nested(g, plan, &team, group_name, range, limit, &used)
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
                .filter(|n| **n != "api_key" && Some(**n) != kind.time)
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

/// A distinct count of the schema, by the key it counts: a developer (`api_key`), a
/// developer and UTC day, a developer and UTC hour. Ordered coarse to fine: the key of each
/// determines the coarser ones' (an hour falls within one day).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Distinct {
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
fn nested_distinct(plan: &QueryPlan) -> Option<Vec<Distinct>> {
    if !matches!(plan.shape, QueryShape::Total | QueryShape::Grouped) {
        return None;
    }
    let kind = plan.source.spec().record;
    let required =
        |name: Option<&str>| name.and_then(|n| kind.field(n)).is_some_and(|f| f.required);
    if !required(Some("api_key")) || !required(kind.time) {
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
fn nested(
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
