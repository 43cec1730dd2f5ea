//! [`TeamStore`] on SQLite: teams and their service keys.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use usage_core::time::Timestamp;

use super::append_audit;
use super::billing::write_billing;
use super::{SqliteStore, bump, db_err, team_exists};
use crate::store::shared::{key_info, key_listing, permissions_of, permissions_text};
use crate::store::{
    Billing, Change, KeyInfo, KeyListing, KeyRecord, NewTeam, StoreError, StoreResult, Team,
    TeamStore,
};

#[async_trait]
impl TeamStore for SqliteStore {
    async fn create_team(&self, team: NewTeam, by: &str, now: Timestamp) -> StoreResult<Team> {
        let by = by.to_string();
        self.blocking(move |i| {
            i.with(|conn| {
                let id = crate::auth::new_id("team");
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                if team.unique_name
                    && let Some(id) = tx
                        .query_row(
                            "SELECT id FROM teams WHERE name = ?1 ORDER BY created, id LIMIT 1",
                            params![team.name],
                            |r| r.get::<_, String>(0),
                        )
                        .optional()
                        .map_err(db_err)?
                {
                    return Err(StoreError::NameTaken {
                        name: team.name,
                        id,
                    });
                }
                let v = bump(&tx)?;
                tx.execute(
                    "INSERT INTO teams (id, name, created, seq) VALUES (?1, ?2, ?3, ?4)",
                    params![id, team.name, now.0, v],
                )
                .map_err(db_err)?;
                let b = Billing::new(team.plan, team.seats, team.credits_per_seat, now);
                write_billing(&tx, &id, &b)?;
                let change = Change::team_created(&id, &team.name, &b);
                append_audit(&tx, &id, &by, now, &change)?;
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

    async fn insert_key(&self, key: KeyRecord, by: &str) -> StoreResult<()> {
        let by = by.to_string();
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
                append_audit(&tx, &key.team_id, &by, key.created, &Change::key_created(&key))?;
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

    async fn revoke_key(&self, key_id: &str, by: &str) -> StoreResult<()> {
        let (key_id, by) = (key_id.to_string(), by.to_string());
        self.blocking(move |i| {
            i.with(|conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let row: Option<(String, Option<String>, String, Option<i64>)> = tx
                    .query_row(
                        "SELECT team_id, name, permissions, revoked FROM keys WHERE id = ?1",
                        [&key_id],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                    )
                    .optional()
                    .map_err(db_err)?;
                let Some((team, name, perms, revoked)) = row else {
                    return Err(StoreError::UnknownKey(key_id));
                };
                if revoked.is_some() {
                    return Ok(());
                }
                let now = Timestamp::now();
                tx.execute(
                    "UPDATE keys SET revoked = ?1 WHERE id = ?2",
                    params![now.0, key_id],
                )
                .map_err(db_err)?;
                let change = Change::key_revoked(&key_id, name.as_deref(), &permissions_of(&perms));
                append_audit(&tx, &team, &by, now, &change)?;
                bump(&tx)?;
                tx.commit().map_err(db_err)
            })
        })
        .await
    }

    async fn keys(&self, team: &str) -> StoreResult<Vec<KeyListing>> {
        let team = team.to_string();
        self.blocking(move |i| {
            i.with_reader(|conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT id, name, permissions, created, revoked FROM keys WHERE team_id = ?1 ORDER BY created, id",
                    )
                    .map_err(db_err)?;
                let rows = stmt
                    .query_map([&team], |r| {
                        let perms: String = r.get(2)?;
                        Ok(key_listing(r.get(0)?, r.get(1)?, &perms, r.get(3)?, r.get(4)?))
                    })
                    .map_err(db_err)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(db_err)
            })
        })
        .await
    }
}
