//! [`TeamStore`] on PostgreSQL: teams and their service keys.

use async_trait::async_trait;
use usage_core::time::Timestamp;

use super::{PgStore, names, pg_err};
use crate::store::shared::{key_info, key_listing, permissions_of, permissions_text};
use crate::store::{
    Billing, Change, KeyInfo, KeyListing, KeyRecord, NewTeam, StoreError, StoreResult, Team,
    TeamStore,
};

#[async_trait]
impl TeamStore for PgStore {
    async fn create_team(&self, team: NewTeam, by: &str, now: Timestamp) -> StoreResult<Team> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        if team.unique_name {
            // One creation of a name at a time; the next sees the first's committed row.
            tx.execute(
                "SELECT pg_advisory_xact_lock(hashtext('team name ' || $1))",
                &[&team.name],
            )
            .await
            .map_err(pg_err)?;
            if let Some(r) = tx
                .query_opt(
                    "SELECT id FROM teams WHERE name = $1 ORDER BY created, id LIMIT 1",
                    &[&team.name],
                )
                .await
                .map_err(pg_err)?
            {
                return Err(StoreError::NameTaken {
                    name: team.name,
                    id: r.get(0),
                });
            }
        }
        let id = crate::auth::new_id("team");
        tx.execute(
            "INSERT INTO teams (id, name, created) VALUES ($1, $2, $3)",
            &[&id, &team.name, &now.0],
        )
        .await
        .map_err(pg_err)?;
        let b = Billing::new(team.plan, team.seats, team.credits_per_seat, now);
        Self::write_billing(&tx, &id, &b).await?;
        let change = Change::team_created(&id, &team.name, &b);
        super::append_audit(&tx, &id, by, now, &change).await?;
        tx.execute(names::BUMP_META, &[]).await.map_err(pg_err)?;
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

    async fn insert_key(&self, key: KeyRecord, by: &str) -> StoreResult<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, &key.team_id).await?;
        tx.execute(
            "INSERT INTO keys (id, team_id, name, hash, permissions, created) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&key.key_id, &key.team_id, &key.name, &&key.hash[..], &permissions_text(&key.permissions), &key.created.0],
        )
        .await
        .map_err(pg_err)?;
        let change = Change::key_created(&key);
        super::append_audit(&tx, &key.team_id, by, key.created, &change).await?;
        tx.execute(names::BUMP_META, &[]).await.map_err(pg_err)?;
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
        Ok(row.and_then(|r| key_info(r.get(0), r.get(1), r.get(2), r.get(3))))
    }

    async fn revoke_key(&self, key_id: &str, by: &str) -> StoreResult<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        // The row's lock orders concurrent revocations: one of them records it.
        let Some(row) = tx
            .query_opt(
                "SELECT team_id, name, permissions, revoked FROM keys WHERE id = $1 FOR UPDATE",
                &[&key_id],
            )
            .await
            .map_err(pg_err)?
        else {
            return Err(StoreError::UnknownKey(key_id.to_string()));
        };
        if row.get::<_, Option<i64>>(3).is_some() {
            return Ok(());
        }
        let team: String = row.get(0);
        let now = Timestamp::now();
        tx.execute(
            "UPDATE keys SET revoked = $1 WHERE id = $2",
            &[&now.0, &key_id],
        )
        .await
        .map_err(pg_err)?;
        let change = Change::key_revoked(key_id, row.get(1), &permissions_of(row.get(2)));
        super::append_audit(&tx, &team, by, now, &change).await?;
        tx.execute(names::BUMP_META, &[]).await.map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)
    }

    async fn keys(&self, team: &str) -> StoreResult<Vec<KeyListing>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT id, name, permissions, created, revoked FROM keys WHERE team_id = $1 ORDER BY created, id",
                &[&team],
            )
            .await
            .map_err(pg_err)?;
        Ok(rows
            .iter()
            .map(|r| key_listing(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
            .collect())
    }
}
