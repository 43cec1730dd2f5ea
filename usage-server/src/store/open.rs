//! Opening the store a `--store` value names: the one place outside the stores' own
//! folders that names a backend.

use std::sync::Arc;

use super::{CacheConfig, Store, cached, memory, postgres, sqlite};

/// Opens the store named by a `--store` value: `memory:`, `sqlite:PATH`, or a PostgreSQL
/// URL (`postgres://…` or `postgresql://…`).
///
/// # Errors
/// An unknown scheme, `sqlite:` without a path, or a store that cannot be opened (a file
/// that cannot be opened or migrated, a database that cannot be reached or migrated).
pub async fn open(spec: &str) -> Result<Arc<dyn Store>, String> {
    open_with(spec, CacheConfig::OFF).await
}

/// [`open`], with a team-data cache of the budget given (SQLite and PostgreSQL; the
/// memory store holds its teams in memory anyway).
///
/// # Errors
/// As [`open`].
pub async fn open_with(spec: &str, cache: CacheConfig) -> Result<Arc<dyn Store>, String> {
    if spec == "memory:" || spec == "memory" {
        return Ok(Arc::new(memory::MemoryStore::new()));
    }
    if let Some(path) = sqlite_path(spec) {
        let s = sqlite::SqliteStore::open_with(std::path::Path::new(path?), cache)
            .await
            .map_err(|e| format!("cannot open {spec}: {e}"))?;
        // Keys, teams, caps and billing from memory while the change counter is polled
        // (a running server's poller); without polling every call reads the file.
        return Ok(Arc::new(cached::CachedMeta::new(
            Arc::new(s),
            cached::MAX_AGE,
        )));
    }
    if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
        let s = postgres::PgStore::open_with(spec, cache)
            .await
            .map_err(|e| format!("cannot open the PostgreSQL store: {e}"))?;
        if cache.bytes == 0 {
            return Ok(Arc::new(s));
        }
        // A server with a cache keeps keys, teams, caps and billing in memory too, dropped
        // when the store's metadata counter moves (polled with the change feed's cadence).
        return Ok(Arc::new(cached::CachedMeta::new(
            Arc::new(s),
            cached::MAX_AGE,
        )));
    }
    Err(format!(
        "unknown store `{spec}`: use memory:, sqlite:PATH or postgres://…"
    ))
}

/// Opens the SQLite store a `--store` value names, holding no team in memory; `None`
/// when it names another store.
///
/// # Errors
/// `sqlite:` without a path, or a file that cannot be opened or migrated.
pub async fn open_sqlite(spec: &str) -> Option<Result<sqlite::SqliteStore, String>> {
    let path = match sqlite_path(spec)? {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    Some(
        sqlite::SqliteStore::open_with(std::path::Path::new(path), CacheConfig::OFF)
            .await
            .map_err(|e| format!("cannot open {spec}: {e}")),
    )
}

/// Why a command that does not create stores cannot open this one: `Some` when the value
/// names a SQLite file that does not exist (opening it would make an empty store). Only
/// `serve`, `migrate` and `team create` create a SQLite store; every other command asks
/// this first, so a misspelled path fails instead of reading an empty store.
pub fn missing_store(spec: &str) -> Option<String> {
    let path = sqlite_path(spec)?.ok()?;
    (!std::path::Path::new(path).exists())
        .then(|| format!("no store at {path} (create it with usage-server migrate)"))
}

/// The path of a `sqlite:` value; `None` when it names another store.
fn sqlite_path(spec: &str) -> Option<Result<&str, String>> {
    let path = spec.strip_prefix("sqlite:")?;
    let path = path.strip_prefix("//").unwrap_or(path);
    if path.is_empty() {
        return Some(Err("`sqlite:` needs a path, e.g. sqlite:usage.db".into()));
    }
    Some(Ok(path))
}
