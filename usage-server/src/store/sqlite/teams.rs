//! [`TeamStore`] on SQLite: teams and their service keys.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use usage_core::time::Timestamp;

use super::billing::write_billing;
use super::{SqliteStore, bump, db_err, team_exists};
use crate::store::shared::{key_info, permissions_text};
use crate::store::{
    Billing, KeyInfo, KeyRecord, NewTeam, StoreError, StoreResult, Team, TeamStore,
};

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
            i.with_reader(|conn| {
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
                tx.execute(
                    "INSERT INTO keys (id, team_id, name, hash, permissions, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![key.key_id, key.team_id, key.name, &key.hash[..], permissions_text(&key.permissions), key.created.0],
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
            i.with_reader(|conn| {
                let row: Option<(String, String, Vec<u8>, String)> = conn
                    .prepare_cached(
                        "SELECT id, team_id, hash, permissions FROM keys WHERE hash = ?1 AND revoked IS NULL",
                    )
                    .map_err(db_err)?
                    .query_row([&hash[..]], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                    .optional()
                    .map_err(db_err)?;
                Ok(row.and_then(|(key_id, team_id, hash, perms)| {
                    key_info(key_id, team_id, hash, &perms)
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
