//! `sqlite:PATH`: the embedded durable store.
//!
//! Teams, keys, caps, the audit log and billing are read from SQLite on every call, so a
//! change made by another process (an admin command, a second server) is seen at once.
//! Usage records are stored as JSON rows, loaded into one [`TeamData`] per team and kept
//! current by [`Store::refresh`]: every write bumps a change counter (`meta.version`)
//! and stamps its rows and its team with it, so a reader only re-reads the rows of teams
//! that changed. WAL mode lets several processes share the file; `synchronous=FULL`
//! makes every acknowledged write durable. All work runs on the blocking pool.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{
    Connection, ErrorCode, OptionalExtension, Transaction, TransactionBehavior, params,
};
use usage_core::JsonPath;
use usage_core::eval::TeamData;
use usage_core::load::{Batch, Record, parse_record};
use usage_core::plan::{AgentPlan, AnalyticsPlan, CapAction, CapScope, Limits, UserPagePlan};
use usage_core::schema::records::{BILLING, GROUPS, RecordKind, USERS};
use usage_core::schema::{Permission, Plan};
use usage_core::time::Timestamp;
use usage_core::wire::{AgentAnalyticsResponse, AnalyticsResponse, UserPageAnalyticsResponse};

use super::{
    AuditEntry, Billing, BillingStore, CapStore, KeyInfo, KeyRecord, NewTeam, RecordStore,
    RecordStream, Store, StoreError, StoreResult, Team, TeamStore, answer, prepare,
};

/// The schema, one migration per element; applied in order, each once.
const MIGRATIONS: &[&str] = &[r#"
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO meta (key, value) VALUES ('version', 0);
CREATE TABLE teams (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created INTEGER NOT NULL,
    seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE keys (
    id TEXT PRIMARY KEY,
    team_id TEXT NOT NULL REFERENCES teams (id),
    name TEXT,
    hash BLOB NOT NULL UNIQUE,
    permissions TEXT NOT NULL,
    created INTEGER NOT NULL,
    revoked INTEGER
);
CREATE TABLE billing (
    team_id TEXT PRIMARY KEY REFERENCES teams (id),
    plan TEXT NOT NULL,
    num_seats INTEGER NOT NULL,
    prompt_credits_per_seat INTEGER NOT NULL,
    add_on_credits_available INTEGER NOT NULL,
    add_on_credits_used INTEGER NOT NULL,
    cycle_start INTEGER NOT NULL,
    cycle_end INTEGER NOT NULL
);
CREATE TABLE caps (
    team_id TEXT NOT NULL REFERENCES teams (id),
    scope_kind TEXT NOT NULL,
    scope_value TEXT NOT NULL,
    cap INTEGER NOT NULL,
    PRIMARY KEY (team_id, scope_kind, scope_value)
);
CREATE TABLE audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id TEXT NOT NULL,
    time INTEGER NOT NULL,
    key_id TEXT NOT NULL,
    scope_kind TEXT NOT NULL,
    scope_value TEXT NOT NULL,
    old INTEGER,
    new INTEGER
);
CREATE INDEX audit_team ON audit (team_id, id);
CREATE TABLE records (
    id INTEGER PRIMARY KEY,
    team_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    identity TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE UNIQUE INDEX records_identity ON records (team_id, kind, identity);
CREATE INDEX records_seq ON records (team_id, seq);
"#];

fn db_err(e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::CannotOpen
            | ErrorCode::SystemIoFailure
            | ErrorCode::DiskFull
            | ErrorCode::ReadOnly
            | ErrorCode::NotADatabase,
        ) => StoreError::Unavailable(e.to_string()),
        _ => StoreError::Internal(e.to_string()),
    }
}

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Internal("a lock was poisoned".into())
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

/// One team's records in memory and the change counter they reflect.
struct Cached {
    data: RwLock<TeamData>,
    seq: Mutex<i64>,
}

struct Inner {
    /// Writes and metadata reads.
    conn: Mutex<Option<Connection>>,
    /// Loading records into the cache.
    loader: Mutex<Option<Connection>>,
    cache: RwLock<HashMap<String, Arc<Cached>>>,
    seen_version: AtomicI64,
    applied_at_open: u32,
}

/// The SQLite store.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

fn apply_migrations(conn: &mut Connection) -> StoreResult<u32> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS migrations (version INTEGER PRIMARY KEY, applied INTEGER NOT NULL)",
    )
    .map_err(db_err)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(db_err)?;
    let done: i64 = tx
        .query_row("SELECT COUNT(*) FROM migrations", [], |r| r.get(0))
        .map_err(db_err)?;
    let mut applied = 0;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(done as usize) {
        tx.execute_batch(sql).map_err(db_err)?;
        tx.execute(
            "INSERT INTO migrations (version, applied) VALUES (?1, ?2)",
            params![i as i64 + 1, Timestamp::now().0],
        )
        .map_err(db_err)?;
        applied += 1;
    }
    tx.commit().map_err(db_err)?;
    Ok(applied)
}

/// Bumps the change counter; returns the new version.
fn bump(tx: &Transaction<'_>) -> StoreResult<i64> {
    tx.query_row(
        "UPDATE meta SET value = value + 1 WHERE key = 'version' RETURNING value",
        [],
        |r| r.get(0),
    )
    .map_err(db_err)
}

fn team_exists(conn: &Connection, team: &str) -> StoreResult<()> {
    let found: Option<i64> = conn
        .query_row("SELECT 1 FROM teams WHERE id = ?1", [team], |r| r.get(0))
        .optional()
        .map_err(db_err)?;
    found
        .map(|_| ())
        .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))
}

fn decode_row(kind: &str, body: &str) -> StoreResult<(&'static RecordKind, Record)> {
    let k = RecordKind::by_name(kind)
        .ok_or_else(|| StoreError::Internal(format!("stored record of unknown kind `{kind}`")))?;
    let v: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| StoreError::Internal(format!("stored {kind} record is not JSON: {e}")))?;
    let r = parse_record(k, &v, &JsonPath::root()).map_err(|e| {
        StoreError::Internal(format!(
            "stored {kind} record does not parse: {}",
            e.first().map(ToString::to_string).unwrap_or_default()
        ))
    })?;
    Ok((k, r))
}

/// Reads the rows of a query (`kind`, `body`, `seq`) and hands them to `sink` in batches
/// of one kind (at most 50,000 records each); returns the largest `seq`.
fn read_rows(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    mut sink: impl FnMut(Batch),
) -> StoreResult<i64> {
    let mut rows = stmt.query(params).map_err(db_err)?;
    let mut max = 0i64;
    let mut pending: Option<Batch> = None;
    while let Some(row) = rows.next().map_err(db_err)? {
        let kind: String = row.get(0).map_err(db_err)?;
        let body: String = row.get(1).map_err(db_err)?;
        let seq: i64 = row.get(2).map_err(db_err)?;
        max = max.max(seq);
        let (k, r) = decode_row(&kind, &body)?;
        match &mut pending {
            Some(b) if std::ptr::eq(b.kind, k) && b.records.len() < 50_000 => b.records.push(r),
            _ => {
                if let Some(b) = pending.replace(Batch {
                    kind: k,
                    records: vec![r],
                }) {
                    sink(b);
                }
            }
        }
    }
    if let Some(b) = pending {
        sink(b);
    }
    Ok(max)
}

fn open_conn(path: &Path) -> StoreResult<Connection> {
    let conn = Connection::open(path).map_err(db_err)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(db_err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(db_err)?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(db_err)?;
    // A 64 MiB page cache: a large import then rarely spills dirty pages early.
    conn.pragma_update(None, "cache_size", -65_536)
        .map_err(db_err)?;
    conn.set_prepared_statement_cache_capacity(32);
    Ok(conn)
}

impl Inner {
    fn conn(&self) -> StoreResult<MutexGuard<'_, Option<Connection>>> {
        let g = self.conn.lock().map_err(poisoned)?;
        if g.is_none() {
            return Err(StoreError::Unavailable("the store is closed".into()));
        }
        Ok(g)
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> StoreResult<T>) -> StoreResult<T> {
        let mut g = self.conn()?;
        let c = g.as_mut().expect("checked by conn()");
        f(c)
    }

    fn with_loader<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let g = self.loader.lock().map_err(poisoned)?;
        let conn = g
            .as_ref()
            .ok_or_else(|| StoreError::Unavailable("the store is closed".into()))?;
        f(conn)
    }

    /// Reads the rows of `team` newer than the cached ones into the cache. Rows are read
    /// on the loader connection and parsed before the team's data is locked, so neither
    /// key lookups nor queries of the team wait for the parsing, and a query sees a write
    /// whole or not at all.
    fn catch_up(&self, team: &str, cached: &Cached) -> StoreResult<()> {
        let mut seq = cached.seq.lock().map_err(poisoned)?;
        let mut batches = Vec::new();
        let max = self.with_loader(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT kind, body, seq FROM records WHERE team_id = ?1 AND seq > ?2 ORDER BY seq",
                )
                .map_err(db_err)?;
            read_rows(&mut stmt, params![team, *seq], |b| batches.push(b))
        })?;
        if !batches.is_empty() {
            let mut data = cached.data.write().map_err(poisoned)?;
            for b in &batches {
                data.apply(b);
            }
        }
        *seq = (*seq).max(max);
        Ok(())
    }

    /// The cached data of a team, loading it on first use.
    fn cached(&self, team: &str) -> StoreResult<Arc<Cached>> {
        if let Some(c) = self.cache.read().map_err(poisoned)?.get(team) {
            return Ok(c.clone());
        }
        // Not shared yet: apply batch by batch, so the parsed rows never all sit in memory
        // beside the team's data.
        let mut data = TeamData::new();
        let seq = self.with_loader(|conn| {
            team_exists(conn, team)?;
            let mut stmt = conn
                .prepare_cached("SELECT kind, body, seq FROM records WHERE team_id = ?1")
                .map_err(db_err)?;
            read_rows(&mut stmt, [team], |b| data.apply(&b))
        })?;
        let c = Arc::new(Cached {
            data: RwLock::new(data),
            seq: Mutex::new(seq),
        });
        let mut cache = self.cache.write().map_err(poisoned)?;
        Ok(cache.entry(team.to_string()).or_insert(c).clone())
    }

    fn read<T>(&self, team: &str, f: impl FnOnce(&TeamData) -> StoreResult<T>) -> StoreResult<T> {
        let c = self.cached(team)?;
        let d = c.data.read().map_err(poisoned)?;
        f(&d)
    }

    /// The users and groups of a team, read from the store (for [`prepare`]).
    fn people(conn: &Connection, team: &str) -> StoreResult<TeamData> {
        let mut data = TeamData::new();
        let mut stmt = conn
            .prepare_cached(
                "SELECT kind, body, seq FROM records WHERE team_id = ?1 AND kind IN ('users', 'groups') ORDER BY seq",
            )
            .map_err(db_err)?;
        read_rows(&mut stmt, [team], |b| data.apply(&b))?;
        Ok(data)
    }

    /// Writes records of one kind all-or-nothing. `Ok(None)`: the stream had a bad one.
    fn write(
        &self,
        team: &str,
        kind: &'static RecordKind,
        mut records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let mut guard = self.conn()?;
        let conn = guard.as_mut().expect("checked by conn()");
        team_exists(conn, team)?;
        let needs_all = std::ptr::eq(kind, &USERS)
            || std::ptr::eq(kind, &GROUPS)
            || std::ptr::eq(kind, &BILLING);
        if needs_all {
            let mut all = Vec::new();
            for r in records.by_ref() {
                match r {
                    Ok(r) => all.push(r),
                    Err(()) => {
                        records.for_each(drop);
                        return Ok(None);
                    }
                }
            }
            let n = all.len() as u64;
            if std::ptr::eq(kind, &BILLING) {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let mut b = read_billing(&tx, team)?;
                for r in &all {
                    b.apply(r, now);
                }
                write_billing(&tx, team, &b)?;
                bump(&tx)?;
                tx.commit().map_err(db_err)?;
                return Ok(Some(n));
            }
            let people = Self::people(conn, team)?;
            let batch = prepare(&people, &Batch { kind, records: all }, now)?;
            records = Box::new(batch.records.into_iter().map(Ok));
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let version = bump(&tx)?;
        let mut n = 0u64;
        let mut bad = false;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO records (team_id, kind, identity, seq, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(db_err)?;
            for r in records {
                match r {
                    Ok(_) if bad => {}
                    Ok(r) => {
                        let body = serde_json::Value::Object(r.to_json()).to_string();
                        stmt.execute(params![team, kind.name, r.identity(), version, body])
                            .map_err(db_err)?;
                        n += 1;
                    }
                    Err(()) => bad = true,
                }
            }
        }
        if bad {
            tx.rollback().map_err(db_err)?;
            return Ok(None);
        }
        tx.execute(
            "UPDATE teams SET seq = ?1 WHERE id = ?2",
            params![version, team],
        )
        .map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        drop(guard);
        let cached = self.cache.read().map_err(poisoned)?.get(team).cloned();
        if let Some(c) = cached {
            self.catch_up(team, &c)?;
        }
        Ok(Some(n))
    }
}

fn read_billing(conn: &Connection, team: &str) -> StoreResult<Billing> {
    conn.query_row(
        "SELECT plan, num_seats, prompt_credits_per_seat, add_on_credits_available, add_on_credits_used, cycle_start, cycle_end FROM billing WHERE team_id = ?1",
        [team],
        |r| {
            let plan: String = r.get(0)?;
            Ok(Billing {
                plan: plan.parse().unwrap_or(Plan::Pro),
                num_seats: r.get(1)?,
                prompt_credits_per_seat: r.get(2)?,
                add_on_credits_available: r.get(3)?,
                add_on_credits_used: r.get(4)?,
                cycle_start: Timestamp(r.get(5)?),
                cycle_end: Timestamp(r.get(6)?),
            })
        },
    )
    .optional()
    .map_err(db_err)?
    .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))
}

fn write_billing(conn: &Connection, team: &str, b: &Billing) -> StoreResult<()> {
    conn.execute(
        "INSERT OR REPLACE INTO billing (team_id, plan, num_seats, prompt_credits_per_seat, add_on_credits_available, add_on_credits_used, cycle_start, cycle_end) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            team,
            b.plan.as_str(),
            b.num_seats,
            b.prompt_credits_per_seat,
            b.add_on_credits_available,
            b.add_on_credits_used,
            b.cycle_start.0,
            b.cycle_end.0
        ],
    )
    .map_err(db_err)?;
    Ok(())
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies its migrations.
    ///
    /// # Errors
    /// When the file cannot be opened or migrated.
    pub async fn open(path: &Path) -> StoreResult<SqliteStore> {
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || {
            let mut conn = open_conn(&path)?;
            let applied = apply_migrations(&mut conn)?;
            let loader = open_conn(&path)?;
            Ok(SqliteStore {
                inner: Arc::new(Inner {
                    conn: Mutex::new(Some(conn)),
                    loader: Mutex::new(Some(loader)),
                    cache: RwLock::new(HashMap::new()),
                    seen_version: AtomicI64::new(-1),
                    applied_at_open: applied,
                }),
            })
        })
        .await
        .map_err(|e| StoreError::Internal(e.to_string()))?
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || f(&inner))
            .await
            .map_err(|e| StoreError::Internal(format!("store task failed: {e}")))?
    }
}

#[async_trait]
impl TeamStore for SqliteStore {
    async fn create_team(&self, team: NewTeam, now: Timestamp) -> StoreResult<Team> {
        self.blocking(move |i| {
            i.with(|conn| {
                let id = crate::auth::new_id("team");
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let v = bump(&tx)?;
                tx.execute(
                    "INSERT INTO teams (id, name, created, seq) VALUES (?1, ?2, ?3, ?4)",
                    params![id, team.name, now.0, v],
                )
                .map_err(db_err)?;
                let b = Billing::new(team.plan, team.seats, team.credits_per_seat, now);
                write_billing(&tx, &id, &b)?;
                tx.commit().map_err(db_err)?;
                Ok(Team {
                    id,
                    name: team.name,
                    created: now,
                })
            })
        })
        .await
    }

    async fn teams(&self) -> StoreResult<Vec<Team>> {
        self.blocking(|i| {
            i.with(|conn| {
                let mut stmt = conn
                    .prepare_cached("SELECT id, name, created FROM teams ORDER BY created, id")
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map([], |r| {
                        Ok(Team {
                            id: r.get(0)?,
                            name: r.get(1)?,
                            created: Timestamp(r.get(2)?),
                        })
                    })
                    .map_err(db_err)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
            })
        })
        .await
    }

    async fn insert_key(&self, key: KeyRecord) -> StoreResult<()> {
        self.blocking(move |i| {
            i.with(|conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                team_exists(&tx, &key.team_id)?;
                let perms: Vec<&str> = key.permissions.iter().map(|p| p.as_str()).collect();
                tx.execute(
                    "INSERT INTO keys (id, team_id, name, hash, permissions, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![key.key_id, key.team_id, key.name, &key.hash[..], perms.join(","), key.created.0],
                )
                .map_err(db_err)?;
                bump(&tx)?;
                tx.commit().map_err(db_err)
            })
        })
        .await
    }

    async fn key_by_hash(&self, hash: &[u8; 32]) -> StoreResult<Option<KeyInfo>> {
        let hash = *hash;
        self.blocking(move |i| {
            i.with(|conn| {
                let row: Option<(String, String, Vec<u8>, String)> = conn
                    .prepare_cached(
                        "SELECT id, team_id, hash, permissions FROM keys WHERE hash = ?1 AND revoked IS NULL",
                    )
                    .map_err(db_err)?
                    .query_row([&hash[..]], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                    .optional()
                    .map_err(db_err)?;
                Ok(row.and_then(|(key_id, team_id, h, perms)| {
                    let hash: [u8; 32] = h.try_into().ok()?;
                    Some(KeyInfo {
                        key_id,
                        team_id,
                        hash,
                        permissions: perms
                            .split(',')
                            .filter_map(|p| p.parse::<Permission>().ok())
                            .collect(),
                    })
                }))
            })
        })
        .await
    }

    async fn revoke_key(&self, key_id: &str) -> StoreResult<()> {
        let key_id = key_id.to_string();
        self.blocking(move |i| {
            i.with(|conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let n = tx
                    .execute(
                        "UPDATE keys SET revoked = COALESCE(revoked, ?1) WHERE id = ?2",
                        params![Timestamp::now().0, key_id],
                    )
                    .map_err(db_err)?;
                if n == 0 {
                    return Err(StoreError::UnknownKey(key_id));
                }
                bump(&tx)?;
                tx.commit().map_err(db_err)
            })
        })
        .await
    }
}

#[async_trait]
impl RecordStore for SqliteStore {
    async fn ingest(&self, team: &str, batch: Batch, now: Timestamp) -> StoreResult<u64> {
        let team = team.to_string();
        self.blocking(move |i| {
            let kind = batch.kind;
            let n = i.write(
                &team,
                kind,
                Box::new(batch.records.into_iter().map(Ok)),
                now,
            )?;
            n.ok_or_else(|| StoreError::Internal("a validated batch was refused".into()))
        })
        .await
    }

    async fn import(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let team = team.to_string();
        self.blocking(move |i| i.write(&team, kind, records, now))
            .await
    }

    async fn analytics(
        &self,
        team: &str,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> StoreResult<AnalyticsResponse> {
        let (team, plan, limits) = (team.to_string(), plan.clone(), *limits);
        self.blocking(move |i| i.read(&team, |d| answer::analytics(d, &plan, &limits)))
            .await
    }

    async fn user_page(
        &self,
        team: &str,
        plan: &UserPagePlan,
    ) -> StoreResult<UserPageAnalyticsResponse> {
        let (team, plan) = (team.to_string(), plan.clone());
        self.blocking(move |i| i.read(&team, |d| answer::user_page(d, &plan)))
            .await
    }

    async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse> {
        let (team, plan) = (team.to_string(), plan.clone());
        self.blocking(move |i| i.read(&team, |d| answer::agent(d, &plan)))
            .await
    }

    async fn has_group_id(&self, team: &str, group_id: &str) -> StoreResult<bool> {
        let (team, g) = (team.to_string(), group_id.to_string());
        self.blocking(move |i| i.read(&team, |d| Ok(d.has_group_id(&g))))
            .await
    }

    async fn has_user(&self, team: &str, email: &str) -> StoreResult<bool> {
        let (team, e) = (team.to_string(), email.to_string());
        self.blocking(move |i| i.read(&team, |d| Ok(d.user(&e).is_some())))
            .await
    }

    async fn groups_of(&self, team: &str, email: &str) -> StoreResult<Vec<String>> {
        let (team, e) = (team.to_string(), email.to_string());
        self.blocking(move |i| i.read(&team, |d| Ok(d.groups_of(&e))))
            .await
    }
}

#[async_trait]
impl CapStore for SqliteStore {
    async fn cap(&self, team: &str, scope: &CapScope) -> StoreResult<Option<i64>> {
        let (team, scope) = (team.to_string(), scope.clone());
        self.blocking(move |i| {
            i.with(|conn| {
                let (k, v) = scope_parts(&scope);
                conn.prepare_cached(
                    "SELECT cap FROM caps WHERE team_id = ?1 AND scope_kind = ?2 AND scope_value = ?3",
                )
                .map_err(db_err)?
                .query_row(params![team, k, v], |r| r.get(0))
                .optional()
                .map_err(db_err)
            })
        })
        .await
    }

    async fn change_cap(
        &self,
        team: &str,
        scope: &CapScope,
        action: CapAction,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        let (team, scope, key_id) = (team.to_string(), scope.clone(), key_id.to_string());
        self.blocking(move |i| {
            i.with(|conn| {
                let (k, v) = scope_parts(&scope);
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                team_exists(&tx, &team)?;
                let old: Option<i64> = tx
                    .query_row(
                        "SELECT cap FROM caps WHERE team_id = ?1 AND scope_kind = ?2 AND scope_value = ?3",
                        params![team, k, v],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(db_err)?;
                let new = match action {
                    CapAction::Set(n) => {
                        tx.execute(
                            "INSERT OR REPLACE INTO caps (team_id, scope_kind, scope_value, cap) VALUES (?1, ?2, ?3, ?4)",
                            params![team, k, v, n],
                        )
                        .map_err(db_err)?;
                        Some(n)
                    }
                    CapAction::Clear => {
                        tx.execute(
                            "DELETE FROM caps WHERE team_id = ?1 AND scope_kind = ?2 AND scope_value = ?3",
                            params![team, k, v],
                        )
                        .map_err(db_err)?;
                        None
                    }
                };
                tx.execute(
                    "INSERT INTO audit (team_id, time, key_id, scope_kind, scope_value, old, new) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![team, now.0, key_id, k, v, old, new],
                )
                .map_err(db_err)?;
                bump(&tx)?;
                tx.commit().map_err(db_err)
            })
        })
        .await
    }

    async fn audit(&self, team: &str) -> StoreResult<Vec<AuditEntry>> {
        let team = team.to_string();
        self.blocking(move |i| {
            i.with(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT time, key_id, scope_kind, scope_value, old, new FROM audit WHERE team_id = ?1 ORDER BY id",
                    )
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map([&team], |r| {
                        let kind: String = r.get(2)?;
                        Ok(AuditEntry {
                            time: Timestamp(r.get(0)?),
                            key_id: r.get(1)?,
                            scope: scope_from(&kind, r.get(3)?),
                            old: r.get(4)?,
                            new: r.get(5)?,
                        })
                    })
                    .map_err(db_err)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
            })
        })
        .await
    }
}

#[async_trait]
impl BillingStore for SqliteStore {
    async fn billing(&self, team: &str) -> StoreResult<Billing> {
        let team = team.to_string();
        self.blocking(move |i| i.with(|conn| read_billing(conn, &team)))
            .await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn health(&self) -> StoreResult<()> {
        self.blocking(|i| {
            i.with(|conn| {
                conn.query_row("SELECT value FROM meta WHERE key = 'version'", [], |r| {
                    r.get::<_, i64>(0)
                })
                .map(|_| ())
                .map_err(db_err)
            })
        })
        .await
    }

    async fn migrate(&self) -> StoreResult<u32> {
        self.blocking(|i| {
            let more = i.with(apply_migrations)?;
            Ok(i.applied_at_open + more)
        })
        .await
    }

    async fn refresh(&self) -> StoreResult<()> {
        self.blocking(|i| {
            let version: i64 = i.with(|conn| {
                conn.query_row("SELECT value FROM meta WHERE key = 'version'", [], |r| {
                    r.get(0)
                })
                .map_err(db_err)
            })?;
            if version == i.seen_version.load(Ordering::Acquire) {
                return Ok(());
            }
            let teams: Vec<(String, i64)> = i.with(|conn| {
                let mut stmt = conn
                    .prepare_cached("SELECT id, seq FROM teams")
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .map_err(db_err)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
            })?;
            for (team, seq) in teams {
                let cached = i.cache.read().map_err(poisoned)?.get(&team).cloned();
                match cached {
                    Some(c) => {
                        if *c.seq.lock().map_err(poisoned)? < seq {
                            i.catch_up(&team, &c)?;
                        }
                    }
                    None => {
                        i.cached(&team)?;
                    }
                }
            }
            i.seen_version.store(version, Ordering::Release);
            Ok(())
        })
        .await
    }

    async fn preload(&self) -> StoreResult<()> {
        self.refresh().await
    }

    async fn close(&self) -> StoreResult<()> {
        self.blocking(|i| {
            for slot in [&i.loader, &i.conn] {
                let conn = slot.lock().map_err(poisoned)?.take();
                if let Some(c) = conn {
                    c.close().map_err(|(_, e)| db_err(e))?;
                }
            }
            i.cache.write().map_err(poisoned)?.clear();
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn migrations_apply_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.db");
        let s = SqliteStore::open(&p).await.unwrap();
        assert_eq!(s.migrate().await.unwrap(), MIGRATIONS.len() as u32);
        s.close().await.unwrap();
        let s = SqliteStore::open(&p).await.unwrap();
        assert_eq!(s.migrate().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn conformance() {
        let dir = tempfile::tempdir().unwrap();
        let n = std::sync::atomic::AtomicUsize::new(0);
        let dir_path = dir.path().to_path_buf();
        super::super::conformance::run_all(|| {
            let p = dir_path.join(format!("c{}.db", n.fetch_add(1, Ordering::Relaxed)));
            async move { Arc::new(SqliteStore::open(&p).await.unwrap()) as Arc<dyn Store> }
        })
        .await;
    }

    #[tokio::test]
    async fn another_process_sees_writes_after_refresh() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("shared.db");
        let server = SqliteStore::open(&p).await.unwrap();
        let admin = SqliteStore::open(&p).await.unwrap();
        let t = admin
            .create_team(
                NewTeam {
                    name: "t".into(),
                    plan: Plan::Enterprise,
                    seats: 1,
                    credits_per_seat: 1,
                },
                Timestamp::now(),
            )
            .await
            .unwrap();
        server.preload().await.unwrap();
        assert!(!server.has_group_id(&t.id, "g").await.unwrap());
        let rec = parse_record(
            &GROUPS,
            &serde_json::json!({"group_id": "g", "group_name": "G"}),
            &JsonPath::root(),
        )
        .unwrap();
        admin
            .import(
                &t.id,
                &GROUPS,
                Box::new(std::iter::once(Ok(rec))),
                Timestamp::now(),
            )
            .await
            .unwrap();
        // The cached team is stale until the change counter is polled.
        assert!(!server.has_group_id(&t.id, "g").await.unwrap());
        server.refresh().await.unwrap();
        assert!(server.has_group_id(&t.id, "g").await.unwrap());
    }
}
