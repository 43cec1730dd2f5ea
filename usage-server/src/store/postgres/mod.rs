//! The PostgreSQL store (`postgres://…`): every trait on one database that several server
//! instances share, with queries pushed down to SQL.
//!
//! - Tables: one per record kind, and the users, groups and memberships tables, generated
//!   from usage-core's record tables (`schema::create_tables`), plus teams, keys, billing,
//!   caps and the audit log. Every team-owned table is keyed by `team_id` first and every
//!   statement filters by it (ready for Citus, distributed by team; `teams` and `keys` are
//!   small lookup tables that Citus would hold as reference tables).
//! - Queries: each validated plan becomes one parameterized statement per query
//!   (`sql::query`, `stats.rs`); rows are rendered by the same value code as the
//!   in-memory evaluator, so both stores answer alike to the last digit.
//! - Writes run in transactions and are acknowledged after commit. Versioned migrations
//!   run at open under an advisory lock, so instances starting together apply them once.
//! - A server instance answers the teams it serves from the team-data cache shared with
//!   SQLite, which reads them as [`cache`] says, kept current from a change feed in the
//!   database: a write through one instance is
//!   read by every other within a second (the contract allows five). Without a cache
//!   (the CLI's commands, `serve --cache-bytes 0`) every query is pushed down.
//!
//! SQL that differs between engines lives in `dialect.rs`, as plain functions.
//!
//! One file per concern, mirroring the store traits (and named as in the SQLite store):
//! `schema.rs` (the generated DDL and the migrations), `teams.rs` (teams and keys),
//! `caps.rs` (caps and the audit log), `billing.rs` and `records.rs` (ingest, import and
//! queries). The SQL is generated beside them: `write.rs` (COPY, staging and merge of
//! record writes; `copy.rs` encodes the rows), `sql.rs` (the query generator), `stats.rs`
//! (user page and agent statistics), `people.rs` (the users and groups tables, and it
//! runs their SQL). `names.rs` and `expr.rs` are leaves the others share: the tables and
//! columns several files name, and what a statement is made of; `rows.rs` decodes.
//! `tls.rs` reads the URL's `sslmode` and `sslrootcert` and makes the TLS connector of the
//! pool and the cache's listener. This file holds the store, its pool, the error mapping
//! and the [`StoreOps`] impl.

mod billing;
pub mod cache;
#[cfg(test)]
mod cache_tests;
mod caps;
#[cfg(test)]
mod citus_tests;
mod copy;
mod credits;
mod dialect;
mod expr;
mod names;
mod people;
mod rate;
mod records;
mod rows;
mod schema;
mod sql;
mod stats;
mod teams;
#[cfg(test)]
pub(crate) mod tests;
pub mod tls;
#[cfg(test)]
mod tls_tests;
mod webhooks;
mod write;
#[cfg(test)]
mod zone_tests;

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::types::ToSql;

use super::shared::{Unreadable, audit_columns, closed};
use super::{
    CacheConfig, CacheStats, Change, StoreError, StoreOps, StoreResult, Token, UnreadableRow,
};
use expr::{Param, Statement};

fn pg_err(e: tokio_postgres::Error) -> StoreError {
    match e.as_db_error() {
        // The server answered: a statement or constraint failed, which is a bug here.
        Some(db) => StoreError::Internal(format!(
            "PostgreSQL: {} ({})",
            db.message(),
            db.code().code()
        )),
        // No answer: the connection is down or closed.
        None => StoreError::Unavailable(format!("PostgreSQL: {}", with_causes(&e))),
    }
}

fn pool_err(e: deadpool_postgres::PoolError) -> StoreError {
    StoreError::Unavailable(format!("PostgreSQL pool: {}", with_causes(&e)))
}

/// An error and its causes, `: `-separated: tokio-postgres's own text leaves the cause out
/// ("error performing TLS handshake", "error connecting to server", "db error"). A cause
/// whose text is already there is not repeated.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text = format!("{text}: {s}");
        }
        cause = c.source();
    }
    text
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

/// The PostgreSQL store.
pub struct PgStore {
    pool: Pool,
    /// The teams held in memory.
    cache: cache::Cache,
    closed: AtomicBool,
    applied_at_open: u32,
    /// Whether the database has the `citus` extension (its tables are Citus tables):
    /// found by the migrations.
    citus: AtomicBool,
    /// The unreadable rows found by the last scan (contract section 11).
    unreadable: Unreadable,
    /// The shared rate buckets' tokens this instance holds ([`rate`]).
    leases: rate::Leases,
}

/// Settings of every store session, each unless the store URL's `options` set it.
/// Analytics groups whole tables (distinct counts, GROUP BY), and PostgreSQL's planner
/// guesses a grouping by several columns at a tenth of the rows (a million groups for a
/// 10M-row team grouped by day, IDE and user, where there are 289 thousand):
/// - `work_mem`: memory to sort and hash without spilling;
/// - `hash_mem_multiplier`: 4x `work_mem` for hash tables (256 MiB), so that the planner
///   hashes such a grouping in memory (90 MiB) instead of sorting 650 MiB on disk: Q3 of
///   the benchmark at 10M rows 6.2 s -> 3.2 s (as of 6932a63, BENCHMARKS.md,
///   "PostgreSQL store at scale"). A cap, not an allocation: a grouping takes what its
///   groups need.
pub const SESSION_SETTINGS: [(&str, &str); 2] =
    [("work_mem", "64MB"), ("hash_mem_multiplier", "4")];

/// Whether PostgreSQL startup `options` (`-c name=value`, `-cname=value` or
/// `--name=value`, space-separated) set the setting `name` (not merely one whose name ends
/// in it, as `maintenance_work_mem` does in `work_mem`).
fn sets(options: &str, name: &str) -> bool {
    let mut words = options.split_whitespace();
    while let Some(w) = words.next() {
        let setting = match w {
            "-c" => words.next().unwrap_or_default(),
            w => w
                .strip_prefix("-c")
                .or_else(|| w.strip_prefix("--"))
                .unwrap_or_default(),
        };
        if setting.split('=').next() == Some(name) {
            return true;
        }
    }
    false
}

impl PgStore {
    /// Connects to `url` (`postgres://user@host:port/db`, optionally with
    /// `?options=-csearch_path%3Dschema`) and applies the migrations. TLS as libpq does it,
    /// from the URL's `sslmode` (`prefer` when absent) and `sslrootcert` ([`tls`]). No
    /// cache: every query is pushed down to SQL.
    ///
    /// # Errors
    /// When the URL does not parse, the root certificates cannot be read, or the database
    /// cannot be reached (a server certificate that does not pass included), or migrated.
    pub async fn open(url: &str) -> StoreResult<PgStore> {
        PgStore::open_with(url, CacheConfig::OFF).await
    }

    /// [`PgStore::open`] with a team-data cache of the teams it serves ([`cache`]).
    ///
    /// # Errors
    /// As [`PgStore::open`].
    pub async fn open_with(url: &str, cache: CacheConfig) -> StoreResult<PgStore> {
        let (mut s, tls) = PgStore::connect(url, cache)?;
        s.applied_at_open = match s.apply_migrations().await {
            Ok(n) => n,
            // Which checks the server's certificate failed is worth saying.
            Err(StoreError::Unavailable(e)) if tls.verifies() => {
                return Err(StoreError::Unavailable(format!("{e} ({tls})")));
            }
            Err(e) => return Err(e),
        };
        Ok(s)
    }

    /// The store at `url` migrated as on plain PostgreSQL, its tables left local on a
    /// Citus coordinator: a store made before the extension came.
    #[cfg(test)]
    pub(super) async fn open_undistributed(url: &str) -> StoreResult<PgStore> {
        let (mut s, _) = PgStore::connect(url, CacheConfig::OFF)?;
        s.applied_at_open = s.migrate_schema(false).await?;
        Ok(s)
    }

    /// The store's pool of connections to `url`, with the session settings and the TLS
    /// the URL asks for (returned too); nothing is sent to the database yet.
    fn connect(url: &str, cache: CacheConfig) -> StoreResult<(PgStore, tls::Tls)> {
        let url_err = |e: String| StoreError::Unavailable(format!("PostgreSQL URL: {e}"));
        let (url, tls) = tls::split_url(url).map_err(url_err)?;
        let mut cfg =
            tokio_postgres::Config::from_str(&url).map_err(|e| url_err(with_causes(&e)))?;
        let tls = tls.unwrap_or_else(|| tls::Tls::of_config(&cfg));
        tls.apply(&mut cfg);
        let connector = tls
            .connector()
            .map_err(|e| StoreError::Unavailable(format!("PostgreSQL TLS: {e}")))?;
        let mut options = cfg.get_options().unwrap_or_default().to_string();
        for (name, value) in SESSION_SETTINGS {
            if !sets(&options, name) {
                options = format!("{options} -c {name}={value}").trim().to_string();
            }
        }
        cfg.options(&options);
        let mgr = Manager::from_config(
            cfg.clone(),
            connector.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(mgr)
            .max_size(8)
            .build()
            .map_err(|e| StoreError::Internal(format!("PostgreSQL pool: {e}")))?;
        let store = PgStore {
            cache: cache::Cache::new(cache, pool.clone(), &cfg, connector),
            pool,
            closed: AtomicBool::new(false),
            applied_at_open: 0,
            citus: AtomicBool::new(false),
            unreadable: Unreadable::default(),
            leases: rate::Leases::default(),
        };
        Ok((store, tls))
    }

    async fn client(&self) -> StoreResult<deadpool_postgres::Object> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        self.pool.get().await.map_err(pool_err)
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
}

#[async_trait]
impl StoreOps for PgStore {
    async fn health(&self) -> StoreResult<()> {
        let c = self.client().await?;
        c.query_one("SELECT 1", &[]).await.map_err(pg_err)?;
        Ok(())
    }

    async fn migrate(&self) -> StoreResult<u32> {
        Ok(self.applied_at_open + self.apply_migrations().await?)
    }

    /// Finds the unreadable rows at start (served queries leave them out in SQL).
    async fn preload(&self) -> StoreResult<()> {
        self.unreadable_rows().await.map(drop)
    }

    async fn unreadable_rows(&self) -> StoreResult<Vec<UnreadableRow>> {
        let c = self.client().await?;
        let teams: Vec<String> = c
            .query("SELECT id FROM teams ORDER BY id", &[])
            .await
            .map_err(pg_err)?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let statements: Vec<(&str, Vec<&str>, String)> = schema::unreadable_queries();
        let mut found = Vec::new();
        for team in &teams {
            for (kind, fields, statement) in &statements {
                for row in c.query(statement.as_str(), &[team]).await.map_err(pg_err)? {
                    let failing: Vec<&str> = fields
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !row.get::<_, bool>(i + 1))
                        .map(|(_, f)| *f)
                        .collect();
                    found.push(UnreadableRow {
                        team: team.clone(),
                        kind: (*kind).to_string(),
                        row: row.get(0),
                        reason: format!(
                            "outside what the validator accepts: {}",
                            failing.join(", ")
                        ),
                    });
                }
            }
        }
        for r in &found {
            self.unreadable.met(r.clone());
        }
        Ok(found)
    }

    fn unreadable_count(&self) -> u64 {
        self.unreadable.count()
    }

    /// The metadata counter (`names::META_CHANGES`): it moves with every write of teams,
    /// keys, caps and billing, not with record writes (the columnar cache follows those).
    async fn change_version(&self) -> StoreResult<Option<i64>> {
        let c = self.client().await?;
        let row = c
            .query_one(
                format!("SELECT version FROM {} WHERE id = 1", names::META_CHANGES).as_str(),
                &[],
            )
            .await
            .map_err(pg_err)?;
        Ok(Some(row.get(0)))
    }

    /// The team's change number (`names::TEAM_CHANGES`): it moves with every write of the
    /// team's records, users and groups.
    async fn team_version(&self, team: &str) -> StoreResult<Option<i64>> {
        let c = self.client().await?;
        let row = c
            .query_opt(
                format!("SELECT seq FROM {} WHERE team_id = $1", names::TEAM_CHANGES).as_str(),
                &[&team],
            )
            .await
            .map_err(pg_err)?;
        Ok(Some(row.map_or(0, |r| r.get(0))))
    }

    /// One token of the key's bucket in `rate_buckets`, from a lease this instance holds
    /// when it has one (`rate.rs`: leases).
    async fn take_token(
        &self,
        team: &str,
        key_id: &str,
        rate: crate::auth::rate::RateConfig,
    ) -> StoreResult<Token> {
        rate::take(&self.leases, team, key_id, rate, || self.client()).await
    }

    /// The planner's live-row estimates of the tables (`pg_stat_user_tables`): a count
    /// of every team's rows would read them all.
    async fn record_counts(&self) -> StoreResult<Vec<(&'static str, u64)>> {
        let c = self.client().await?;
        let live: std::collections::HashMap<String, i64> = if self.citus.load(Ordering::Relaxed) {
            schema::citus_live_rows(&c).await?
        } else {
            c.query(
                "SELECT relname::text, n_live_tup FROM pg_stat_user_tables WHERE schemaname = current_schema()",
                &[],
            )
            .await
            .map_err(pg_err)?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
        };
        Ok(usage_core::eval::TeamData::segment_kinds()
            .map(|k| {
                let table = if names::has_table(k) {
                    names::table(k)
                } else {
                    k.name.to_string()
                };
                (k.name, live.get(&table).copied().unwrap_or(0).max(0) as u64)
            })
            .collect())
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        (self.cache.budget() > 0).then(|| self.cache.stats())
    }

    async fn close(&self) -> StoreResult<()> {
        self.closed.store(true, Ordering::Release);
        self.cache.stop();
        self.pool.close();
        Ok(())
    }
}

impl PgStore {
    /// What the team-data cache has done since the store opened.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }
}

/// Every cap of the team (caps.rs answers them; webhooks.rs reads them in a write's
/// transaction).
async fn read_caps(c: &impl GenericClient, team: &str) -> StoreResult<usage_core::credits::Caps> {
    let rows = c
        .query(
            "SELECT scope_kind, scope_value, cap FROM caps WHERE team_id = $1",
            &[&team],
        )
        .await
        .map_err(pg_err)?;
    Ok(usage_core::credits::Caps::from_entries(rows.iter().map(
        |r| {
            (
                crate::store::shared::scope_from(r.get::<_, &str>(0), r.get(1)),
                r.get(2),
            )
        },
    )))
}

/// Appends an entry to the team's audit log, in the caller's transaction.
pub(crate) async fn append_audit(
    c: &impl GenericClient,
    team: &str,
    key_id: &str,
    now: usage_core::time::Timestamp,
    change: &Change,
) -> StoreResult<()> {
    let (k, v, old, new) = audit_columns(change);
    c.execute(
        "INSERT INTO audit (team_id, time, key_id, scope_kind, scope_value, old, new) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        &[&team, &now.0, &key_id, &k, &v, &old, &new],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}
