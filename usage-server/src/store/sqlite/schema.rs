//! The SQLite schema: its migrations, applied in order, each once.

use rusqlite::{Connection, TransactionBehavior, params};
use usage_core::time::Timestamp;

use super::db_err;
use crate::store::StoreResult;

/// The schema, one migration per element; applied in order, each once.
pub(super) const MIGRATIONS: &[&str] = &[r#"
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

pub(super) fn apply_migrations(conn: &mut Connection) -> StoreResult<u32> {
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
