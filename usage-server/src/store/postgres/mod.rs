//! The PostgreSQL store (`postgres://…`): every trait on one database that several server
//! instances share, with queries pushed down to SQL.
//!
//! - Tables: one per record kind, generated from usage-core's record tables
//!   ([`sql::create_tables`]), plus users, groups, memberships, teams, keys, billing, caps
//!   and the audit log. Every team-owned table is keyed by `team_id` first and every
//!   statement filters by it (ready for Citus, distributed by team; `teams` and `keys` are
//!   small lookup tables that Citus would hold as reference tables).
//! - Queries: each validated plan becomes one parameterized statement per query
//!   ([`sql::query`], [`stats`]); rows are rendered by the same value code as the
//!   in-memory evaluator, so both stores answer alike to the last digit.
//! - Writes run in transactions and are acknowledged after commit. Versioned migrations
//!   run at open under an advisory lock, so instances starting together apply them once.
//! - Nothing is cached: a write through one instance is seen by every other at once.
//!
//! SQL that differs between engines lives in [`dialect`].

pub mod dialect;
pub mod rows;
pub mod sql;
pub mod stats;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;
use usage_core::eval::{EvalError, TeamData};
use usage_core::load::{Batch, FieldValue, Record};
use usage_core::plan::{AgentPlan, AnalyticsPlan, CapAction, CapScope, Limits, UserPagePlan};
use usage_core::schema::records::{self, RecordKind, RecordType};
use usage_core::schema::{Permission, Plan};
use usage_core::time::Timestamp;
use usage_core::wire::{
    AgentAnalyticsResponse, AnalyticsResponse, QueryResult, UserPageAnalyticsResponse,
};

use super::{
    AuditEntry, Billing, BillingStore, CapStore, KeyInfo, KeyRecord, NewTeam, RecordStore,
    RecordStream, Store, StoreError, StoreResult, Team, TeamStore, prepare,
};
use dialect::Postgres;
use sql::{Param, Statement};

/// Records written per statement by imports and ingests.
const CHUNK: usize = 2_000;
/// The advisory lock that serializes migrations across instances.
const MIGRATION_LOCK: i64 = 0x7573_6167_655f_6d67;

fn migrations() -> Vec<String> {
    let mut first = sql::create_tables(&Postgres);
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
    vec![first.join(";\n")]
}

fn pg_err(e: tokio_postgres::Error) -> StoreError {
    match e.as_db_error() {
        // The server answered: a statement or constraint failed, which is a bug here.
        Some(db) => StoreError::Internal(format!(
            "PostgreSQL: {} ({})",
            db.message(),
            db.code().code()
        )),
        // No answer: the connection is down or closed.
        None => StoreError::Unavailable(format!("PostgreSQL: {e}")),
    }
}

fn pool_err(e: deadpool_postgres::PoolError) -> StoreError {
    StoreError::Unavailable(format!("PostgreSQL pool: {e}"))
}

fn boxed(params: &[Param]) -> Vec<Box<dyn ToSql + Sync + Send>> {
    params
        .iter()
        .map(|p| -> Box<dyn ToSql + Sync + Send> {
            match p {
                Param::Text(s) => Box::new(s.clone()),
                Param::Int(n) => Box::new(*n),
                Param::Bool(b) => Box::new(*b),
                Param::TextArray(v) => Box::new(v.clone()),
                Param::Bytes(v) => Box::new(v.clone()),
            }
        })
        .collect()
}

fn refs(b: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
    b.iter()
        .map(|b| b.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// Runs a generated statement; every column comes back as text (or NULL).
async fn text_rows(
    c: &impl GenericClient,
    st: &Statement,
) -> StoreResult<Vec<Vec<Option<String>>>> {
    let b = boxed(&st.params);
    let rows = c.query(st.sql.as_str(), &refs(&b)).await.map_err(pg_err)?;
    rows.iter()
        .map(|r| {
            (0..r.len())
                .map(|j| r.try_get::<_, Option<String>>(j).map_err(pg_err))
                .collect()
        })
        .collect()
}

/// Whether a name holds U+0000: SQL text cannot, so no stored name equals it (records
/// with it are refused when loaded) and it is not sent to the database.
fn unstorable(s: &str) -> bool {
    s.contains('\0')
}

fn decode_err(e: rows::DecodeError) -> StoreError {
    StoreError::Internal(format!("PostgreSQL answer: {}", e.0))
}

fn scope_parts(s: &CapScope) -> (&'static str, &str) {
    match s {
        CapScope::Team => ("team", ""),
        CapScope::Group(g) => ("group", g),
        CapScope::User(u) => ("user", u),
    }
}

fn scope_from(kind: &str, value: String) -> CapScope {
    match kind {
        "group" => CapScope::Group(value),
        "user" => CapScope::User(value),
        _ => CapScope::Team,
    }
}

/// The PostgreSQL store.
pub struct PgStore {
    pool: Pool,
    closed: AtomicBool,
    applied_at_open: u32,
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`, optionally with
    /// `?options=-csearch_path%3Dschema`) and applies the migrations. TLS is off.
    ///
    /// # Errors
    /// When the URL does not parse or the database cannot be reached or migrated.
    pub async fn open(url: &str) -> StoreResult<PgStore> {
        let mut cfg = tokio_postgres::Config::from_str(url)
            .map_err(|e| StoreError::Unavailable(format!("PostgreSQL URL: {e}")))?;
        // Analytics sorts and hashes whole tables (COUNT DISTINCT, GROUP BY): give each
        // session enough memory to do it without spilling, unless the URL sets it.
        let options = cfg.get_options().unwrap_or_default().to_string();
        if !options.contains("work_mem") {
            cfg.options(format!("{options} -c work_mem=64MB").trim());
        }
        let mgr = Manager::from_config(
            cfg,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(8)
            .build()
            .map_err(|e| StoreError::Internal(format!("PostgreSQL pool: {e}")))?;
        let mut s = PgStore {
            pool,
            closed: AtomicBool::new(false),
            applied_at_open: 0,
        };
        s.applied_at_open = s.apply_migrations().await?;
        Ok(s)
    }

    async fn client(&self) -> StoreResult<deadpool_postgres::Object> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Unavailable("the store is closed".into()));
        }
        self.pool.get().await.map_err(pool_err)
    }

    async fn apply_migrations(&self) -> StoreResult<u32> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); \
             CREATE TABLE IF NOT EXISTS schema_migrations (version INT PRIMARY KEY, applied BIGINT NOT NULL)"
        ))
        .await
        .map_err(pg_err)?;
        let done: i64 = tx
            .query_one("SELECT COUNT(*) FROM schema_migrations", &[])
            .await
            .map_err(pg_err)?
            .get(0);
        let mut applied = 0;
        for (i, m) in migrations().iter().enumerate().skip(done as usize) {
            tx.batch_execute(m).await.map_err(pg_err)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied) VALUES ($1, $2)",
                &[&(i as i32 + 1), &Timestamp::now().0],
            )
            .await
            .map_err(pg_err)?;
            applied += 1;
        }
        tx.commit().await.map_err(pg_err)?;
        Ok(applied)
    }

    async fn team_exists(c: &impl GenericClient, team: &str) -> StoreResult<()> {
        match c
            .query_opt("SELECT 1 FROM teams WHERE id = $1", &[&team])
            .await
            .map_err(pg_err)?
        {
            Some(_) => Ok(()),
            None => Err(StoreError::UnknownTeam(team.to_string())),
        }
    }

    async fn group_exists(c: &impl GenericClient, team: &str, name: &str) -> StoreResult<()> {
        if unstorable(name) {
            return Err(StoreError::Eval(EvalError::GroupNotFound(name.to_string())));
        }
        match c
            .query_opt(
                "SELECT 1 FROM groups WHERE team_id = $1 AND group_name = $2",
                &[&team, &name],
            )
            .await
            .map_err(pg_err)?
        {
            Some(_) => Ok(()),
            None => Err(StoreError::Eval(EvalError::GroupNotFound(name.to_string()))),
        }
    }

    /// The team's users and groups as records, for the checks of section 8.
    async fn people(c: &impl GenericClient, team: &str) -> StoreResult<TeamData> {
        let mut data = TeamData::new();
        let groups = c
            .query(
                "SELECT group_id, group_name FROM groups WHERE team_id = $1",
                &[&team],
            )
            .await
            .map_err(pg_err)?
            .iter()
            .map(|r| {
                let text = |i: usize| FieldValue::Text(r.get::<_, String>(i));
                Record::from_values(&records::GROUPS, vec![text(0), text(1)])
            })
            .collect();
        data.apply(&Batch {
            kind: &records::GROUPS,
            records: groups,
        });
        let users = c
            .query(
                "SELECT u.email, u.name, u.api_key, u.team_status, u.disable_vendor, u.signup_time, \
                 ARRAY(SELECT m.group_id FROM user_groups m WHERE m.team_id = u.team_id AND m.email = u.email ORDER BY m.group_id) \
                 FROM users u WHERE u.team_id = $1",
                &[&team],
            )
            .await
            .map_err(pg_err)?
            .iter()
            .map(|r| {
                let opt_text = |v: Option<String>| v.map_or(FieldValue::Absent, FieldValue::Text);
                Record::from_values(
                    &records::USERS,
                    vec![
                        FieldValue::Text(r.get(0)),
                        FieldValue::Text(r.get(1)),
                        FieldValue::Text(r.get(2)),
                        opt_text(r.get(3)),
                        r.get::<_, Option<bool>>(4).map_or(FieldValue::Absent, FieldValue::Bool),
                        FieldValue::Groups(r.get(6)),
                        FieldValue::Time(Timestamp(r.get(5))),
                    ],
                )
            })
            .collect();
        data.apply(&Batch {
            kind: &records::USERS,
            records: users,
        });
        Ok(data)
    }

    async fn read_billing(c: &impl GenericClient, team: &str, lock: bool) -> StoreResult<Billing> {
        let q = format!(
            "SELECT plan, num_seats, prompt_credits_per_seat, add_on_credits_available, add_on_credits_used, cycle_start, cycle_end \
             FROM billing WHERE team_id = $1{}",
            if lock { " FOR UPDATE" } else { "" }
        );
        let row = c.query_opt(q.as_str(), &[&team]).await.map_err(pg_err)?;
        let r = row.ok_or_else(|| StoreError::UnknownTeam(team.to_string()))?;
        Ok(Billing {
            plan: r.get::<_, String>(0).parse().unwrap_or(Plan::Pro),
            num_seats: r.get(1),
            prompt_credits_per_seat: r.get(2),
            add_on_credits_available: r.get(3),
            add_on_credits_used: r.get(4),
            cycle_start: Timestamp(r.get(5)),
            cycle_end: Timestamp(r.get(6)),
        })
    }

    async fn write_billing(c: &impl GenericClient, team: &str, b: &Billing) -> StoreResult<()> {
        c.execute(
            "INSERT INTO billing (team_id, plan, num_seats, prompt_credits_per_seat, add_on_credits_available, \
             add_on_credits_used, cycle_start, cycle_end) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (team_id) DO UPDATE SET plan = EXCLUDED.plan, num_seats = EXCLUDED.num_seats, \
             prompt_credits_per_seat = EXCLUDED.prompt_credits_per_seat, add_on_credits_available = EXCLUDED.add_on_credits_available, \
             add_on_credits_used = EXCLUDED.add_on_credits_used, cycle_start = EXCLUDED.cycle_start, cycle_end = EXCLUDED.cycle_end",
            &[
                &team,
                &b.plan.as_str(),
                &b.num_seats,
                &b.prompt_credits_per_seat,
                &b.add_on_credits_available,
                &b.add_on_credits_used,
                &b.cycle_start.0,
                &b.cycle_end.0,
            ],
        )
        .await
        .map_err(pg_err)?;
        Ok(())
    }

    /// Upserts users one by one (few, and their memberships with them).
    async fn write_users(c: &impl GenericClient, team: &str, users: &[Record]) -> StoreResult<()> {
        for u in users {
            let groups = match u.get("groups") {
                FieldValue::Groups(g) => g.clone(),
                _ => Vec::new(),
            };
            c.execute(
                "INSERT INTO users (team_id, email, name, api_key, team_status, disable_vendor, signup_time) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (team_id, email) DO UPDATE SET name = EXCLUDED.name, \
                 api_key = EXCLUDED.api_key, team_status = EXCLUDED.team_status, disable_vendor = EXCLUDED.disable_vendor, \
                 signup_time = EXCLUDED.signup_time",
                &[
                    &team,
                    &u.text("email"),
                    &u.text("name"),
                    &u.text("api_key"),
                    &u.get("team_status").as_text(),
                    &u.get("disable_vendor").as_bool(),
                    &u.get("signup_time").as_time().unwrap_or_default().0,
                ],
            )
            .await
            .map_err(pg_err)?;
            c.execute(
                "DELETE FROM user_groups WHERE team_id = $1 AND email = $2",
                &[&team, &u.text("email")],
            )
            .await
            .map_err(pg_err)?;
            c.execute(
                "INSERT INTO user_groups (team_id, email, group_id) SELECT $1, $2, g FROM UNNEST($3::text[]) g ON CONFLICT DO NOTHING",
                &[&team, &u.text("email"), &groups],
            )
            .await
            .map_err(pg_err)?;
        }
        Ok(())
    }

    async fn write_groups(
        c: &impl GenericClient,
        team: &str,
        groups: &[Record],
    ) -> StoreResult<()> {
        for g in groups {
            c.execute(
                "INSERT INTO groups (team_id, group_id, group_name) VALUES ($1, $2, $3) \
                 ON CONFLICT (team_id, group_id) DO UPDATE SET group_name = EXCLUDED.group_name",
                &[&team, &g.text("group_id"), &g.text("group_name")],
            )
            .await
            .map_err(pg_err)?;
        }
        Ok(())
    }

    /// Upserts usage records of one kind; a later record with an earlier one's identity
    /// wins (within the chunk by deduplication, across chunks by the upsert).
    async fn write_usage(
        c: &impl GenericClient,
        team: &str,
        kind: &'static RecordKind,
        chunk: &[Record],
    ) -> StoreResult<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        let mut last: HashMap<String, usize> = HashMap::with_capacity(chunk.len());
        for (i, r) in chunk.iter().enumerate() {
            last.insert(r.identity(), i);
        }
        let mut keep: Vec<usize> = last.into_values().collect();
        keep.sort_unstable();
        let mut cols: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(team.to_string())];
        let mut casts = Vec::new();
        for (j, f) in kind.fields.iter().enumerate() {
            let values = keep.iter().map(|&i| &chunk[i].values()[j]);
            let (b, cast): (Box<dyn ToSql + Sync + Send>, &str) = match f.ty {
                RecordType::Text | RecordType::Enum(_) | RecordType::GroupIds => (
                    Box::new(
                        values
                            .map(|v| v.as_text().map(str::to_string))
                            .collect::<Vec<Option<String>>>(),
                    ),
                    "text[]",
                ),
                RecordType::Hour | RecordType::Timestamp | RecordType::Day => (
                    Box::new(
                        values
                            .map(|v| v.as_time().map(|t| t.0))
                            .collect::<Vec<Option<i64>>>(),
                    ),
                    "bigint[]",
                ),
                RecordType::Count => (
                    Box::new(
                        values
                            .map(FieldValue::as_count)
                            .collect::<Vec<Option<i64>>>(),
                    ),
                    "bigint[]",
                ),
                RecordType::Bool => (
                    Box::new(
                        values
                            .map(FieldValue::as_bool)
                            .collect::<Vec<Option<bool>>>(),
                    ),
                    "boolean[]",
                ),
            };
            cols.push(b);
            casts.push(format!("${}::{cast}", j + 2));
        }
        let names: Vec<String> = kind
            .fields
            .iter()
            .map(|f| format!("\"{}\"", f.name))
            .collect();
        let identity: Vec<String> = kind.identity.iter().map(|n| format!("\"{n}\"")).collect();
        let updates: Vec<String> = kind
            .fields
            .iter()
            .filter(|f| !kind.identity.contains(&f.name))
            .map(|f| format!("\"{0}\" = EXCLUDED.\"{0}\"", f.name))
            .collect();
        let statement = format!(
            "INSERT INTO {} (team_id, {}) SELECT $1, * FROM UNNEST({}) ON CONFLICT (team_id, {}) DO {}",
            sql::table(kind),
            names.join(", "),
            casts.join(", "),
            identity.join(", "),
            if updates.is_empty() {
                "NOTHING".to_string()
            } else {
                format!("UPDATE SET {}", updates.join(", "))
            }
        );
        c.execute(statement.as_str(), &refs(&cols))
            .await
            .map_err(pg_err)?;
        Ok(())
    }

    /// Writes records of one kind all-or-nothing in one transaction. `Ok(None)`: the
    /// stream had a bad record (nothing written).
    async fn write(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, team).await?;
        // One writer of a team's users, groups and billing at a time: their rules read
        // the stored rows.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&team])
            .await
            .map_err(pg_err)?;
        let mut stream = Some(records);
        let mut n = 0u64;
        let whole = std::ptr::eq(kind, &records::USERS)
            || std::ptr::eq(kind, &records::GROUPS)
            || std::ptr::eq(kind, &records::BILLING);
        loop {
            // Pull the next chunk off the (blocking) stream on the blocking pool.
            let take = if whole { usize::MAX } else { CHUNK };
            let mut it = stream
                .take()
                .expect("the stream is put back after every chunk");
            let (it, chunk, bad) = tokio::task::spawn_blocking(move || {
                let mut chunk = Vec::new();
                let mut bad = false;
                while chunk.len() < take {
                    match it.next() {
                        Some(Ok(r)) => chunk.push(r),
                        Some(Err(())) => {
                            bad = true;
                            it.by_ref().for_each(drop);
                            break;
                        }
                        None => break,
                    }
                }
                (it, chunk, bad)
            })
            .await
            .map_err(|e| StoreError::Internal(format!("import task failed: {e}")))?;
            if bad {
                tx.rollback().await.map_err(pg_err)?;
                return Ok(None);
            }
            if chunk.is_empty() {
                break;
            }
            n += chunk.len() as u64;
            if std::ptr::eq(kind, &records::BILLING) {
                let mut b = Self::read_billing(&tx, team, true).await?;
                for r in &chunk {
                    b.apply(r, now);
                }
                Self::write_billing(&tx, team, &b).await?;
            } else if whole {
                let people = Self::people(&tx, team).await?;
                let batch = prepare(
                    &people,
                    &Batch {
                        kind,
                        records: chunk,
                    },
                    now,
                )?;
                if std::ptr::eq(kind, &records::USERS) {
                    Self::write_users(&tx, team, &batch.records).await?;
                } else {
                    Self::write_groups(&tx, team, &batch.records).await?;
                }
            } else {
                Self::write_usage(&tx, team, kind, &chunk).await?;
            }
            stream = Some(it);
            if whole {
                break;
            }
        }
        tx.commit().await.map_err(pg_err)?;
        Ok(Some(n))
    }
}

#[async_trait]
impl TeamStore for PgStore {
    async fn create_team(&self, team: NewTeam, now: Timestamp) -> StoreResult<Team> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        let id = crate::auth::new_id("team");
        tx.execute(
            "INSERT INTO teams (id, name, created) VALUES ($1, $2, $3)",
            &[&id, &team.name, &now.0],
        )
        .await
        .map_err(pg_err)?;
        let b = Billing::new(team.plan, team.seats, team.credits_per_seat, now);
        Self::write_billing(&tx, &id, &b).await?;
        tx.commit().await.map_err(pg_err)?;
        Ok(Team {
            id,
            name: team.name,
            created: now,
        })
    }

    async fn teams(&self) -> StoreResult<Vec<Team>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT id, name, created FROM teams ORDER BY created, id",
                &[],
            )
            .await
            .map_err(pg_err)?;
        Ok(rows
            .iter()
            .map(|r| Team {
                id: r.get(0),
                name: r.get(1),
                created: Timestamp(r.get(2)),
            })
            .collect())
    }

    async fn insert_key(&self, key: KeyRecord) -> StoreResult<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, &key.team_id).await?;
        let perms: Vec<&str> = key.permissions.iter().map(|p| p.as_str()).collect();
        tx.execute(
            "INSERT INTO keys (id, team_id, name, hash, permissions, created) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&key.key_id, &key.team_id, &key.name, &&key.hash[..], &perms.join(","), &key.created.0],
        )
        .await
        .map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)
    }

    async fn key_by_hash(&self, hash: &[u8; 32]) -> StoreResult<Option<KeyInfo>> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                "SELECT id, team_id, hash, permissions FROM keys WHERE hash = $1 AND revoked IS NULL",
                &[&&hash[..]],
            )
            .await
            .map_err(pg_err)?;
        Ok(row.and_then(|r| {
            let h: Vec<u8> = r.get(2);
            Some(KeyInfo {
                key_id: r.get(0),
                team_id: r.get(1),
                hash: h.try_into().ok()?,
                permissions: r
                    .get::<_, String>(3)
                    .split(',')
                    .filter_map(|p| p.parse::<Permission>().ok())
                    .collect(),
            })
        }))
    }

    async fn revoke_key(&self, key_id: &str) -> StoreResult<()> {
        let c = self.client().await?;
        let n = c
            .execute(
                "UPDATE keys SET revoked = COALESCE(revoked, $1) WHERE id = $2",
                &[&Timestamp::now().0, &key_id],
            )
            .await
            .map_err(pg_err)?;
        if n == 0 {
            return Err(StoreError::UnknownKey(key_id.to_string()));
        }
        Ok(())
    }
}

#[async_trait]
impl RecordStore for PgStore {
    async fn ingest(&self, team: &str, batch: Batch, now: Timestamp) -> StoreResult<u64> {
        let kind = batch.kind;
        self.write(team, kind, Box::new(batch.records.into_iter().map(Ok)), now)
            .await?
            .ok_or_else(|| StoreError::Internal("a validated batch was refused".into()))
    }

    async fn import(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        self.write(team, kind, records, now).await
    }

    async fn analytics(
        &self,
        team: &str,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> StoreResult<AnalyticsResponse> {
        let c = self.client().await?;
        if let Some(g) = &plan.group_name {
            Self::group_exists(&c, team, g).await?;
        }
        let mut results = Vec::with_capacity(plan.queries.len());
        for (i, q) in plan.queries.iter().enumerate() {
            let (st, outs) = sql::query(
                &Postgres,
                q,
                team,
                plan.group_name.as_deref(),
                plan.range,
                limits.result_items,
            );
            let rows = text_rows(&c, &st).await?;
            if rows.len() > limits.result_items {
                return Err(StoreError::Eval(EvalError::TooManyItems {
                    query: i,
                    limit: limits.result_items,
                }));
            }
            let items = rows
                .iter()
                .map(|r| rows::item(&outs, r))
                .collect::<Result<Vec<_>, _>>()
                .map_err(decode_err)?;
            results.push(QueryResult {
                response_items: items,
            });
        }
        Ok(AnalyticsResponse {
            query_results: results,
        })
    }

    async fn user_page(
        &self,
        team: &str,
        plan: &UserPagePlan,
    ) -> StoreResult<UserPageAnalyticsResponse> {
        let c = self.client().await?;
        if let Some(g) = &plan.group_name {
            Self::group_exists(&c, team, g).await?;
        }
        let rows = text_rows(
            &c,
            &stats::user_page(&Postgres, team, plan.group_name.as_deref(), plan.range),
        )
        .await?;
        let users = rows
            .iter()
            .map(|r| stats::user_row(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(decode_err)?;
        Ok(UserPageAnalyticsResponse {
            user_table_stats: users,
            error: None,
        })
    }

    async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse> {
        let c = self.client().await?;
        // An e-mail holding U+0000 matches nobody (and cannot be sent).
        let mut plan = plan.clone();
        if let Some(emails) = &mut plan.emails {
            emails.retain(|e| !unstorable(e));
        }
        let plan = &plan;
        if let Some(g) = &plan.group_name {
            Self::group_exists(&c, team, g).await?;
        }
        let mut results = Vec::with_capacity(plan.queries.len());
        for (source, st) in stats::agent(&Postgres, team, plan) {
            let rows = text_rows(&c, &st).await?;
            results.push(stats::agent_result(source, &rows).map_err(decode_err)?);
        }
        Ok(AgentAnalyticsResponse {
            query_results: results,
        })
    }

    async fn has_group_id(&self, team: &str, group_id: &str) -> StoreResult<bool> {
        if unstorable(group_id) {
            return Ok(false);
        }
        let c = self.client().await?;
        let r = c
            .query_opt(
                "SELECT 1 FROM groups WHERE team_id = $1 AND group_id = $2",
                &[&team, &group_id],
            )
            .await
            .map_err(pg_err)?;
        Ok(r.is_some())
    }

    async fn has_user(&self, team: &str, email: &str) -> StoreResult<bool> {
        if unstorable(email) {
            return Ok(false);
        }
        let c = self.client().await?;
        let r = c
            .query_opt(
                "SELECT 1 FROM users WHERE team_id = $1 AND email = $2",
                &[&team, &email],
            )
            .await
            .map_err(pg_err)?;
        Ok(r.is_some())
    }

    async fn groups_of(&self, team: &str, email: &str) -> StoreResult<Vec<String>> {
        if unstorable(email) {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT m.group_id FROM user_groups m JOIN groups g ON g.team_id = m.team_id AND g.group_id = m.group_id \
                 WHERE m.team_id = $1 AND m.email = $2 ORDER BY m.group_id COLLATE \"C\"",
                &[&team, &email],
            )
            .await
            .map_err(pg_err)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}

#[async_trait]
impl CapStore for PgStore {
    async fn cap(&self, team: &str, scope: &CapScope) -> StoreResult<Option<i64>> {
        let (k, v) = scope_parts(scope);
        if unstorable(v) {
            return Ok(None);
        }
        let c = self.client().await?;
        let r = c
            .query_opt(
                "SELECT cap FROM caps WHERE team_id = $1 AND scope_kind = $2 AND scope_value = $3",
                &[&team, &k, &v],
            )
            .await
            .map_err(pg_err)?;
        Ok(r.map(|r| r.get(0)))
    }

    async fn change_cap(
        &self,
        team: &str,
        scope: &CapScope,
        action: CapAction,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, team).await?;
        let (k, v) = scope_parts(scope);
        if unstorable(v) {
            return Err(StoreError::Internal(format!(
                "a cap scope holds U+0000: {}",
                scope.label()
            )));
        }
        // Changes of one scope are serialized, so the audit log's `old` is exact.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1 || '/' || $2 || '/' || $3))",
            &[&team, &k, &v],
        )
        .await
        .map_err(pg_err)?;
        let old: Option<i64> = tx
            .query_opt(
                "SELECT cap FROM caps WHERE team_id = $1 AND scope_kind = $2 AND scope_value = $3",
                &[&team, &k, &v],
            )
            .await
            .map_err(pg_err)?
            .map(|r| r.get(0));
        let new = match action {
            CapAction::Set(n) => {
                tx.execute(
                    "INSERT INTO caps (team_id, scope_kind, scope_value, cap) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (team_id, scope_kind, scope_value) DO UPDATE SET cap = EXCLUDED.cap",
                    &[&team, &k, &v, &n],
                )
                .await
                .map_err(pg_err)?;
                Some(n)
            }
            CapAction::Clear => {
                tx.execute(
                    "DELETE FROM caps WHERE team_id = $1 AND scope_kind = $2 AND scope_value = $3",
                    &[&team, &k, &v],
                )
                .await
                .map_err(pg_err)?;
                None
            }
        };
        tx.execute(
            "INSERT INTO audit (team_id, time, key_id, scope_kind, scope_value, old, new) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[&team, &now.0, &key_id, &k, &v, &old, &new],
        )
        .await
        .map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)
    }

    async fn audit(&self, team: &str) -> StoreResult<Vec<AuditEntry>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT time, key_id, scope_kind, scope_value, old, new FROM audit WHERE team_id = $1 ORDER BY id",
                &[&team],
            )
            .await
            .map_err(pg_err)?;
        Ok(rows
            .iter()
            .map(|r| AuditEntry {
                time: Timestamp(r.get(0)),
                key_id: r.get(1),
                scope: scope_from(r.get::<_, &str>(2), r.get(3)),
                old: r.get(4),
                new: r.get(5),
            })
            .collect())
    }
}

#[async_trait]
impl BillingStore for PgStore {
    async fn billing(&self, team: &str) -> StoreResult<Billing> {
        let c = self.client().await?;
        Self::read_billing(&c, team, false).await
    }
}

#[async_trait]
impl Store for PgStore {
    async fn health(&self) -> StoreResult<()> {
        let c = self.client().await?;
        c.query_one("SELECT 1", &[]).await.map_err(pg_err)?;
        Ok(())
    }

    async fn migrate(&self) -> StoreResult<u32> {
        Ok(self.applied_at_open + self.apply_migrations().await?)
    }

    async fn close(&self) -> StoreResult<()> {
        self.closed.store(true, Ordering::Release);
        self.pool.close();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
