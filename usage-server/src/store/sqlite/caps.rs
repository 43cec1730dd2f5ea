//! [`CapStore`] on SQLite: add-on credit caps and their audit log.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use usage_core::credits::Caps;
use usage_core::plan::{CapAction, CapScope};
use usage_core::time::Timestamp;

use super::{SqliteStore, bump, db_err, team_exists};
use crate::store::shared::{audit_change, scope_parts};
use crate::store::{AuditEntry, CapStore, Change, StoreResult};

/// The cap set at exactly this scope (its two columns, from [`scope_parts`]).
fn cap_at(conn: &Connection, team: &str, (k, v): (&str, &str)) -> StoreResult<Option<i64>> {
    conn.prepare_cached(
        "SELECT cap FROM caps WHERE team_id = ?1 AND scope_kind = ?2 AND scope_value = ?3",
    )
    .map_err(db_err)?
    .query_row(params![team, k, v], |r| r.get(0))
    .optional()
    .map_err(db_err)
}

#[async_trait]
impl CapStore for SqliteStore {
    async fn cap(&self, team: &str, scope: &CapScope) -> StoreResult<Option<i64>> {
        let (team, scope) = (team.to_string(), scope.clone());
        self.blocking(move |i| i.with_reader(|conn| cap_at(conn, &team, scope_parts(&scope))))
            .await
    }

    async fn caps(&self, team: &str) -> StoreResult<Caps> {
        let team = team.to_string();
        self.blocking(move |i| i.with_reader(|conn| super::read_caps(conn, &team)))
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
                let old = cap_at(&tx, &team, (k, v))?;
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
                let change = Change::Cap { scope, old, new };
                super::append_audit(&tx, &team, &key_id, now, &change)?;
                let entry = AuditEntry {
                    time: now,
                    key_id,
                    change,
                };
                super::webhooks::alert(i, &tx, &team, now, Some(&entry))?;
                bump(&tx)?;
                tx.commit().map_err(db_err)
            })
        })
        .await
    }

    async fn audit(&self, team: &str) -> StoreResult<Vec<AuditEntry>> {
        let team = team.to_string();
        self.blocking(move |i| {
            i.with_reader(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT time, key_id, scope_kind, scope_value, old, new FROM audit WHERE team_id = ?1 ORDER BY id",
                    )
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map([&team], |r| {
                        let kind: String = r.get(2)?;
                        Ok((r.get(0)?, r.get(1)?, kind, r.get(3)?, r.get(4)?, r.get(5)?))
                    })
                    .map_err(db_err)?;
                rows.map(|r| {
                    let (time, key_id, kind, value, old, new) = r.map_err(db_err)?;
                    Ok(AuditEntry {
                        time: Timestamp(time),
                        key_id,
                        change: audit_change(&kind, value, old, new)?,
                    })
                })
                .collect()
            })
        })
        .await
    }
}
