//! The SQLite schema: its migrations, applied in order, each once, each in one
//! transaction with the conversion of the stored data it needs.

use rusqlite::{Connection, Transaction, TransactionBehavior, params};
use usage_core::time::Timestamp;

use super::db_err;
use crate::store::StoreResult;

/// One step of the schema: its DDL, then a conversion of the data in the same transaction.
pub(super) struct Migration {
    /// The DDL.
    pub(super) sql: &'static str,
    /// Converts what the earlier layout stored.
    pub(super) convert: Option<fn(&Transaction<'_>) -> StoreResult<()>>,
}

/// The schema, one migration per element; applied in order, each once.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        sql: V1,
        convert: None,
    },
    Migration {
        sql: V2,
        convert: Some(super::records::convert_json_rows),
    },
    Migration {
        sql: V3,
        convert: None,
    },
];

/// Migration 1: records as one JSON row each (kept: rows it cannot convert stay there).
const V1: &str = r#"
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
"#;

/// Migration 2: records as segments and a log of the writes since (see `segments.rs`).
/// Converting moves every readable JSON row into its team's segments.
const V2: &str = r#"
CREATE TABLE segments (
    team_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    part INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (team_id, kind, part)
);
CREATE TABLE log (
    team_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    part INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (team_id, seq, part)
);
"#;

/// Migration 3: webhooks, what each knows of the team's users, and their outbox
/// (contract section 12; `store/webhooks.rs`).
const V3: &str = r#"
CREATE TABLE webhooks (
    team_id TEXT NOT NULL,
    id TEXT NOT NULL,
    url TEXT NOT NULL,
    events TEXT NOT NULL,
    thresholds TEXT NOT NULL,
    secret TEXT NOT NULL,
    created INTEGER NOT NULL,
    PRIMARY KEY (team_id, id)
);
CREATE TABLE webhook_fired (
    team_id TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    email TEXT NOT NULL,
    cycle_start INTEGER NOT NULL,
    threshold INTEGER NOT NULL,
    PRIMARY KEY (team_id, webhook_id, cycle_start, email, threshold)
);
CREATE TABLE webhook_access (
    team_id TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    email TEXT NOT NULL,
    has_access INTEGER NOT NULL,
    PRIMARY KEY (team_id, webhook_id, email)
);
CREATE TABLE webhook_outbox (
    team_id TEXT NOT NULL,
    webhook_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    created INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt INTEGER,
    last_status INTEGER,
    last_error TEXT,
    delivered INTEGER,
    PRIMARY KEY (team_id, webhook_id, event_id)
);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt) WHERE next_attempt IS NOT NULL;
CREATE INDEX webhook_outbox_log ON webhook_outbox (team_id, webhook_id);
"#;

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
    for (i, m) in MIGRATIONS.iter().enumerate().skip(done as usize) {
        tx.execute_batch(m.sql).map_err(db_err)?;
        if let Some(convert) = m.convert {
            convert(&tx)?;
        }
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
