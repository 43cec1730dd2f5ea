//! `sqlite:PATH`: the embedded durable store.
//!
//! Teams, keys, caps, the audit log and billing are read from SQLite on every call, so a
//! change made by another process (an admin command, a second server) is seen at once;
//! `store::open` puts the cache of `store/cached.rs` in front, which answers keys, teams,
//! caps and billing from memory between two checks of the change counter.
//! Records are stored in the evaluator's columnar form, as one segment per team and kind
//! plus a log of the writes since (`segments.rs`); the team-data cache
//! (`store/team_cache.rs`, within the budget of [`CacheConfig`]) holds them as one `TeamData`
//! per team, told of this process's writes and, by [`StoreOps::refresh`], of other
//! processes': every write bumps a change counter (`meta.version`) and stamps its log
//! entry and its team with it, so a reader only reads what changed, and long logs are
//! folded into new segments in the background. A team the cache does not hold (no
//! budget: the CLI's commands; or a team over it) is read for the one query. WAL mode
//! lets several processes share the file; `synchronous=FULL` makes every acknowledged
//! write durable. All work runs on the blocking pool.
//!
//! One file per concern, mirroring the store traits (and named as in the PostgreSQL
//! store): `schema.rs` (migrations), `teams.rs` (teams and keys), `caps.rs` (caps and the
//! audit log), `billing.rs`, `records.rs` (ingest, import, and queries over the cached
//! records) and `webhooks.rs` (webhooks, their outbox, and the events a write makes in
//! its transaction). This file holds the store, its connections and the [`StoreOps`] impl.

mod billing;
mod caps;
mod records;
mod schema;
mod segments;
mod teams;
#[cfg(test)]
mod tests;
mod webhooks;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode, OptionalExtension, Transaction};

use super::shared::{Unreadable, audit_columns, closed, poisoned};
use super::team_cache::{TeamCache, TeamSource};
use super::{CacheConfig, CacheStats, Change, StoreError, StoreOps, StoreResult, UnreadableRow};
use records::Loader;
use schema::apply_migrations;

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

struct Inner {
    /// Writes and metadata reads.
    conn: Mutex<Option<Connection>>,
    /// Loading records into the cache.
    loader: Mutex<Option<Connection>>,
    /// Reads of keys, teams, caps, billing and the change version. In WAL mode they never
    /// wait for a writer, so a long write of another process (a CLI `import`) that the
    /// write connection waits on holds up only writes, never authentication or reads.
    reader: Mutex<Option<Connection>>,
    seen_version: AtomicI64,
    /// Whether a compaction runs in the background.
    compacting: AtomicBool,
    /// Whether [`StoreOps::refresh`] starts compactions (on unless turned off).
    auto_compact: AtomicBool,
    applied_at_open: u32,
    /// The rows met that cannot be read (contract section 11).
    unreadable: Unreadable,
}

/// The SQLite store.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
    /// The teams held in memory.
    cache: Arc<TeamCache<Loader>>,
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

/// Creates the database file readable by its owner only (contract section 11) when it
/// does not exist yet; SQLite gives its WAL and shared-memory files the database file's
/// mode.
fn create_private(path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::Unavailable(format!(
            "cannot create the database file {}: {e}",
            path.display()
        ))),
    }
}

fn open_conn(path: &Path) -> StoreResult<Connection> {
    create_private(path)?;
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
            return Err(closed());
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
        let conn = g.as_ref().ok_or_else(closed)?;
        f(conn)
    }

    /// Runs a read-only statement on the reader connection.
    fn with_reader<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let g = self.reader.lock().map_err(poisoned)?;
        let conn = g.as_ref().ok_or_else(closed)?;
        f(conn)
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies its migrations; the
    /// store holds every team it reads in memory ([`CacheConfig::ALL`]).
    ///
    /// # Errors
    /// When the file cannot be opened or migrated.
    pub async fn open(path: &Path) -> StoreResult<SqliteStore> {
        SqliteStore::open_with(path, CacheConfig::ALL).await
    }

    /// [`SqliteStore::open`], holding teams in memory within `cache`'s budget (0: none;
    /// each query reads its team). Queries always wait for their team's load: the store
    /// has no other way to answer one that is quicker.
    ///
    /// # Errors
    /// As [`SqliteStore::open`].
    pub async fn open_with(path: &Path, cache: CacheConfig) -> StoreResult<SqliteStore> {
        let path = path.to_path_buf();
        let inner = tokio::task::spawn_blocking(move || {
            let mut conn = open_conn(&path)?;
            let applied = apply_migrations(&mut conn)?;
            let loader = open_conn(&path)?;
            let reader = open_conn(&path)?;
            Ok::<_, StoreError>(Arc::new(Inner {
                conn: Mutex::new(Some(conn)),
                loader: Mutex::new(Some(loader)),
                reader: Mutex::new(Some(reader)),
                seen_version: AtomicI64::new(-1),
                compacting: AtomicBool::new(false),
                auto_compact: AtomicBool::new(true),
                applied_at_open: applied,
                unreadable: Unreadable::default(),
            }))
        })
        .await
        .map_err(|e| StoreError::Internal(e.to_string()))??;
        let config = CacheConfig {
            wait_for_load: true,
            ..cache
        };
        // Every write of this process tells the cache; other processes' are found by
        // `refresh`.
        let cache = TeamCache::new(Loader::new(inner.clone()), config, None, true);
        Ok(SqliteStore { inner, cache })
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
impl StoreOps for SqliteStore {
    async fn health(&self) -> StoreResult<()> {
        self.blocking(|i| {
            i.with_reader(|conn| {
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
        let refreshed = self.catch_up_all().await;
        self.compact_in_background().await;
        refreshed
    }

    /// Reads every team (the cache holds those that fit, and the rows that cannot be
    /// read are noted), and notes the rows no team's data holds (only a scan finds
    /// them): rows of no team, and those the conversion to segments left behind.
    async fn preload(&self) -> StoreResult<()> {
        self.refresh().await?;
        let teams = self
            .blocking(|i| i.with_reader(|conn| records::team_rows(conn, &i.unreadable)))
            .await?;
        for (team, _) in teams {
            if self.cache.held(&team).await?.is_none() {
                self.cache.source().load(&team, usize::MAX).await?;
            }
        }
        self.blocking(|i| {
            i.with_reader(|conn| {
                segments::scan_orphans(conn, &i.unreadable)?;
                records::scan_left_behind(conn, &i.unreadable)
            })
        })
        .await
    }

    async fn unreadable_rows(&self) -> StoreResult<Vec<UnreadableRow>> {
        self.blocking(|i| i.with_reader(|conn| records::scan_unreadable(conn, &i.unreadable)))
            .await
    }

    fn unreadable_count(&self) -> u64 {
        self.inner.unreadable.count()
    }

    /// The records of the teams held in memory (every team, within the budget).
    async fn record_counts(&self) -> StoreResult<Vec<(&'static str, u64)>> {
        let teams = self.cache.held_teams();
        Ok(super::shared::count_records(
            teams.iter().map(|(_, h)| &h.data),
        ))
    }

    fn cache_stats(&self) -> Option<CacheStats> {
        (self.cache.budget() > 0).then(|| self.cache.stats())
    }

    async fn close(&self) -> StoreResult<()> {
        self.blocking(|i| {
            for slot in [&i.reader, &i.loader, &i.conn] {
                let conn = slot.lock().map_err(poisoned)?.take();
                if let Some(c) = conn {
                    c.close().map_err(|(_, e)| db_err(e))?;
                }
            }
            Ok(())
        })
        .await?;
        self.cache.clear();
        Ok(())
    }

    async fn change_version(&self) -> StoreResult<Option<i64>> {
        self.blocking(|i| {
            i.with_reader(|conn| {
                conn.query_row("SELECT value FROM meta WHERE key = 'version'", [], |r| {
                    r.get(0)
                })
                .map(Some)
                .map_err(db_err)
            })
        })
        .await
    }
}

impl SqliteStore {
    /// Folds long logs into new segments on the blocking pool, one compaction at a time;
    /// a failure is logged and the log stays as it is.
    async fn compact_in_background(&self) {
        let inner = self.inner.clone();
        let teams = self.cache.held_teams();
        // The checks never wait for a lock (a team being caught up or folded is looked at
        // next time).
        if !inner.auto_compact.load(Ordering::Acquire)
            || inner.compacting.load(Ordering::Acquire)
            || !records::wants_compaction(&teams)
            || inner.compacting.swap(true, Ordering::AcqRel)
        {
            return;
        }
        tokio::task::spawn_blocking(move || {
            if let Err(e) = inner.compact_all(&teams) {
                tracing::warn!(error = %e, "compaction failed; the log stays as it is");
            }
            inner.compacting.store(false, Ordering::Release);
        });
    }

    /// Writes a consistent copy of the whole store to `to`, a file that must not exist or
    /// be empty, while other processes keep reading and writing (`VACUUM INTO` on a read
    /// snapshot); the copy is private to its owner like the store. Returns its size.
    ///
    /// # Errors
    /// When `to` exists and is not empty, or cannot be written.
    pub async fn backup(&self, to: &Path) -> StoreResult<u64> {
        let to = to.to_path_buf();
        self.blocking(move |i| {
            create_private(&to)?;
            let target = to.to_str().ok_or_else(|| {
                StoreError::Unavailable(format!("{} is no UTF-8 path", to.display()))
            })?;
            i.with_reader(|conn| conn.execute("VACUUM INTO ?1", [target]).map_err(db_err))?;
            std::fs::metadata(&to)
                .map(|m| m.len())
                .map_err(|e| StoreError::Unavailable(format!("{}: {e}", to.display())))
        })
        .await
    }

    /// Turns the compactions that [`StoreOps::refresh`] starts in the background on or off
    /// (on by default): a process that only reads, or a test that compacts by hand.
    pub fn set_auto_compact(&self, on: bool) {
        self.inner.auto_compact.store(on, Ordering::Release);
    }

    /// Folds every long log into a new segment now (tests and `usage-server compact`).
    ///
    /// # Errors
    /// When the store cannot be read or written.
    pub async fn compact(&self) -> StoreResult<usize> {
        let teams = self.cache.held_teams();
        self.blocking(move |i| i.compact_all(&teams)).await
    }

    /// Catches every held team up with the writes of other processes.
    async fn catch_up_all(&self) -> StoreResult<()> {
        let seen = self.inner.seen_version.load(Ordering::Acquire);
        // A team whose change counter cannot be read is read again each time (its reads
        // note the row once).
        let found = self
            .blocking(move |i| {
                let version: i64 = i.with_reader(|conn| {
                    conn.query_row("SELECT value FROM meta WHERE key = 'version'", [], |r| {
                        r.get(0)
                    })
                    .map_err(db_err)
                })?;
                if version == seen {
                    return Ok(None);
                }
                let teams: std::collections::HashMap<String, i64> = i
                    .with_reader(|conn| records::team_rows(conn, &i.unreadable))?
                    .into_iter()
                    .map(|(id, seq)| (id, seq.unwrap_or(i64::MAX)))
                    .collect();
                Ok(Some((version, teams)))
            })
            .await?;
        let Some((version, seqs)) = found else {
            return Ok(());
        };
        // A team that fails to catch up never holds back the teams after it; it is tried
        // again at the next refresh.
        let mut failed = None;
        for (team, h) in self.cache.held_teams() {
            let Some(&seq) = seqs.get(&team) else {
                continue;
            };
            if h.at.lock().await.seq < seq
                && let Err(e) = self.cache.catch_up(&team, &h).await
            {
                tracing::error!(team = %team, error = %e, "the team's new rows could not be read");
                failed = Some(e);
            }
        }
        match failed {
            Some(e) => Err(e),
            None => {
                self.inner.seen_version.store(version, Ordering::Release);
                Ok(())
            }
        }
    }
}

/// Every cap of the team (caps.rs answers them; webhooks.rs reads them in a write's
/// transaction).
fn read_caps(conn: &Connection, team: &str) -> StoreResult<usage_core::credits::Caps> {
    let mut st = conn
        .prepare_cached("SELECT scope_kind, scope_value, cap FROM caps WHERE team_id = ?1")
        .map_err(db_err)?;
    let rows = st
        .query_map([team], |r| {
            Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(db_err)?;
    let mut entries = Vec::new();
    for row in rows {
        let (kind, value, cap) = row.map_err(db_err)?;
        entries.push((crate::store::shared::scope_from(&kind, value), cap));
    }
    Ok(usage_core::credits::Caps::from_entries(entries))
}

/// Appends an entry to the team's audit log, in the caller's transaction.
pub(crate) fn append_audit(
    conn: &Connection,
    team: &str,
    key_id: &str,
    now: usage_core::time::Timestamp,
    change: &Change,
) -> StoreResult<()> {
    let (k, v, old, new) = audit_columns(change);
    conn.execute(
        "INSERT INTO audit (team_id, time, key_id, scope_kind, scope_value, old, new) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        rusqlite::params![team, now.0, key_id, k, v, old, new],
    )
    .map_err(db_err)?;
    Ok(())
}
