//! The PostgreSQL schema: its migrations, applied at open under an advisory lock, and on a
//! database with the `citus` extension the calls that make every table a Citus table.

use usage_core::time::{MICROS_PER_DAY, MICROS_PER_HOUR, Timestamp};

use usage_core::schema::records::{KINDS, RecordField, RecordKind, RecordType};

use super::dialect;
use super::names::{
    CHANGE_SEQ, IDENTITY_KEY, META_CHANGES, READABLE, TEAM_CHANGES, has_table, primary_key, quote,
    table, time_keyed,
};
use super::{PgStore, pg_err};
use crate::store::StoreResult;
use std::sync::atomic::Ordering;

/// The table of the migrations applied, one row each.
const MIGRATIONS: &str = "schema_migrations";

/// The small tables every node holds whole (Citus reference tables): a key is found by its
/// hash before its team is known; the metadata counter; the migrations applied.
pub const REFERENCE_TABLES: &[&str] = &["teams", "keys", META_CHANGES, MIGRATIONS];

/// Every table whose primary key starts with `team_id` (Citus distributed tables,
/// co-located by `team_id`), the first one the others are co-located with.
pub fn team_tables() -> Vec<String> {
    let mut out: Vec<String> = ["billing", "caps", "audit", "rate_buckets", TEAM_CHANGES]
        .map(String::from)
        .to_vec();
    out.extend(super::webhooks::TABLES.map(String::from));
    out.extend(super::people::table_names().map(String::from));
    out.extend(KINDS.iter().filter(|k| has_table(k)).map(|k| table(k)));
    out
}

/// Each table of the store with the call that makes it a Citus table: the reference tables
/// first, then every team table co-located with the first (docs/citus.md shows them).
pub fn citus_statements() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = REFERENCE_TABLES
        .iter()
        .map(|t| {
            (
                t.to_string(),
                format!("SELECT create_reference_table('{t}');"),
            )
        })
        .collect();
    let teams = team_tables();
    for (i, t) in teams.iter().enumerate() {
        let call = if i == 0 {
            format!("SELECT create_distributed_table('{t}', 'team_id');")
        } else {
            format!(
                "SELECT create_distributed_table('{t}', 'team_id', colocate_with => '{}');",
                teams[0]
            )
        };
        out.push((t.clone(), call));
    }
    out
}

/// Whether the database has the `citus` extension.
async fn has_citus(c: &tokio_postgres::Transaction<'_>) -> StoreResult<bool> {
    Ok(c.query_one(
        "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')",
        &[],
    )
    .await
    .map_err(pg_err)?
    .get(0))
}

/// The live rows of each distributed table of the store on Citus, by table name: the sum
/// of its shards' counts on the workers (the coordinator holds no rows of them). An admin
/// read across teams, for `/metrics`.
pub(super) async fn citus_live_rows(
    c: &tokio_postgres::Client,
) -> StoreResult<std::collections::HashMap<String, i64>> {
    let mut out = std::collections::HashMap::new();
    for table in team_tables() {
        let n: i64 = c
            .query_one(
                "SELECT COALESCE(SUM(result::bigint), 0)::bigint FROM run_command_on_shards($1::text::regclass, \
                 $$SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = '%s'::regclass$$) WHERE success",
                &[&table],
            )
            .await
            .map_err(pg_err)?
            .get(0);
        out.insert(table, n);
    }
    Ok(out)
}

/// On a database with the `citus` extension, makes every table of the store that is not yet
/// a reference or distributed table one ([`citus_statements`]), in the migrations'
/// transaction: all of them on a new store, none once done, and the tables of a store
/// that was plain PostgreSQL when the extension came (Citus moves their rows into the
/// shards). Returns how many it made; on plain PostgreSQL, none.
async fn distribute(tx: &tokio_postgres::Transaction<'_>) -> StoreResult<usize> {
    if !has_citus(tx).await? {
        return Ok(0);
    }
    let mut made = 0;
    for (table, call) in citus_statements() {
        // A table Citus made a local table of its metadata (one that references a
        // reference table) is neither: it is distributed as well.
        let done: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass($1) \
                 AND (partmethod = 'h' OR repmodel = 't'))",
                &[&table],
            )
            .await
            .map_err(pg_err)?
            .get(0);
        if !done {
            tx.batch_execute(&call).await.map_err(pg_err)?;
            made += 1;
        }
    }
    Ok(made)
}

/// The advisory lock that serializes migrations across instances.
const MIGRATION_LOCK: i64 = 0x7573_6167_655f_6d67;

pub(super) fn migrations() -> Vec<String> {
    let mut first = create_tables();
    first.push(
        "CREATE TABLE IF NOT EXISTS teams (id TEXT PRIMARY KEY, name TEXT NOT NULL, created BIGINT NOT NULL)".into(),
    );
    first.push(
        "CREATE TABLE IF NOT EXISTS keys (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams (id), name TEXT, \
         hash BYTEA NOT NULL UNIQUE, permissions TEXT NOT NULL, created BIGINT NOT NULL, revoked BIGINT)"
            .into(),
    );
    first.push(
        "CREATE TABLE IF NOT EXISTS billing (team_id TEXT PRIMARY KEY, plan TEXT NOT NULL, num_seats BIGINT NOT NULL, \
         prompt_credits_per_seat BIGINT NOT NULL, add_on_credits_available BIGINT NOT NULL, \
         add_on_credits_used BIGINT NOT NULL, cycle_start BIGINT NOT NULL, cycle_end BIGINT NOT NULL)"
            .into(),
    );
    first.push(
        "CREATE TABLE IF NOT EXISTS caps (team_id TEXT NOT NULL, scope_kind TEXT NOT NULL, scope_value TEXT NOT NULL, \
         cap BIGINT NOT NULL, PRIMARY KEY (team_id, scope_kind, scope_value))"
            .into(),
    );
    first.push(
        "CREATE TABLE IF NOT EXISTS audit (team_id TEXT NOT NULL, id BIGSERIAL, time BIGINT NOT NULL, key_id TEXT NOT NULL, \
         scope_kind TEXT NOT NULL, scope_value TEXT NOT NULL, old BIGINT, new BIGINT, PRIMARY KEY (team_id, id))"
            .into(),
    );
    vec![
        first.join(";\n"),
        identity_key_migration().join(";\n"),
        readable_migration().join(";\n"),
        // One rate limit per key across every instance (section 9): the token buckets.
        "CREATE TABLE IF NOT EXISTS rate_buckets (team_id TEXT NOT NULL, key_id TEXT NOT NULL, \
         tokens DOUBLE PRECISION NOT NULL, at BIGINT NOT NULL, granted BOOLEAN NOT NULL, \
         PRIMARY KEY (team_id, key_id))"
            .into(),
        // The change feed of the instances' columnar caches.
        change_feed_migration().join(";\n"),
        bulk_write_migration().join(";\n"),
        // Leases of the rate buckets (rate.rs): how many tokens the last statement took.
        "ALTER TABLE rate_buckets ADD COLUMN IF NOT EXISTS taken DOUBLE PRECISION NOT NULL DEFAULT 0"
            .into(),
        // Webhooks, what they know and their outbox (contract section 12).
        super::webhooks::migration(),
    ]
}

impl PgStore {
    /// Applies the migrations not applied yet, then on Citus makes every table a Citus
    /// table ([`distribute`]); returns how many migrations it applied.
    pub(super) async fn apply_migrations(&self) -> StoreResult<u32> {
        self.migrate_schema(true).await
    }

    /// [`PgStore::apply_migrations`], distributing the tables on Citus when `distribute`.
    pub(super) async fn migrate_schema(&self, distribute_tables: bool) -> StoreResult<u32> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); \
             CREATE TABLE IF NOT EXISTS {MIGRATIONS} (version INT PRIMARY KEY, applied BIGINT NOT NULL)"
        ))
        .await
        .map_err(pg_err)?;
        let done: i64 = tx
            .query_one(format!("SELECT COUNT(*) FROM {MIGRATIONS}").as_str(), &[])
            .await
            .map_err(pg_err)?
            .get(0);
        let mut applied = 0;
        for (i, m) in migrations().iter().enumerate().skip(done as usize) {
            tx.batch_execute(m).await.map_err(pg_err)?;
            tx.execute(
                format!("INSERT INTO {MIGRATIONS} (version, applied) VALUES ($1, $2)").as_str(),
                &[&(i as i32 + 1), &Timestamp::now().0],
            )
            .await
            .map_err(pg_err)?;
            applied += 1;
        }
        let citus = has_citus(&tx).await?;
        self.citus
            .store(citus && distribute_tables, Ordering::Relaxed);
        let made = if distribute_tables {
            distribute(&tx).await?
        } else {
            0
        };
        if made > 0 {
            tracing::info!(tables = made, "made the store's tables Citus tables");
        }
        tx.commit().await.map_err(pg_err)?;
        Ok(applied)
    }
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

/// Migration 6, writes at bulk speed (issue 16): the identity and version keys become plain
/// columns that writes compute ([`super::dialect::identity_key_of`],
/// [`super::dialect::version_sort_key`]; the values stored so far stay), a kind whose
/// identity holds its time is keyed `(team_id, time, identity_key)` in place of its own
/// time index, and the per-user index goes (the per-user statistics group one scan of the
/// range instead of looking users up one by one). Each index a row is written to costs a
/// write about as much as the row itself (as of 3906a7d, BENCHMARKS.md, "PostgreSQL
/// store at scale").
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
