//! [`TeamStore`] on PostgreSQL: teams and their service keys.

use async_trait::async_trait;
use usage_core::time::Timestamp;

use super::{PgStore, names, pg_err};
use crate::store::shared::{key_info, permissions_text};
use crate::store::{
    Billing, KeyInfo, KeyRecord, NewTeam, StoreError, StoreResult, Team, TeamStore,
};

#[async_trait]
impl TeamStore for PgStore {
    async fn create_team(&self, team: NewTeam, now: Timestamp) -> StoreResult<Team> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        let id = crate::auth::new_id("team");
        tx.execute(
            "INSERT INTO teams (id, name, created) VALUES ($1, $2, $3)",
            &[&id, &team.name, &now.0],
        )
        .await
        .map_err(pg_err)?;
        let b = Billing::new(team.plan, team.seats, team.credits_per_seat, now);
        Self::write_billing(&tx, &id, &b).await?;
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

    async fn insert_key(&self, key: KeyRecord) -> StoreResult<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, &key.team_id).await?;
        tx.execute(
            "INSERT INTO keys (id, team_id, name, hash, permissions, created) VALUES ($1, $2, $3, $4, $5, $6)",
            &[&key.key_id, &key.team_id, &key.name, &&key.hash[..], &permissions_text(&key.permissions), &key.created.0],
        )
        .await
        .map_err(pg_err)?;
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

    async fn revoke_key(&self, key_id: &str) -> StoreResult<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        let n = tx
            .execute(
                "UPDATE keys SET revoked = COALESCE(revoked, $1) WHERE id = $2",
                &[&Timestamp::now().0, &key_id],
            )
            .await
            .map_err(pg_err)?;
        if n == 0 {
            return Err(StoreError::UnknownKey(key_id.to_string()));
        }
        tx.execute(names::BUMP_META, &[]).await.map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)
    }
}
