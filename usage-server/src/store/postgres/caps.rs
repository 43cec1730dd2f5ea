//! [`CapStore`] on PostgreSQL: add-on credit caps and their audit log.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use usage_core::credits::Caps;
use usage_core::plan::{CapAction, CapScope};
use usage_core::time::Timestamp;

use super::{PgStore, names, pg_err, unstorable};
use crate::store::shared::{audit_change, scope_parts};
use crate::store::{AuditEntry, CapStore, Change, StoreError, StoreResult};

/// The cap set at exactly this scope (its two columns, from [`scope_parts`]).
async fn cap_at(
    c: &impl GenericClient,
    team: &str,
    (k, v): (&str, &str),
) -> StoreResult<Option<i64>> {
    let r = c
        .query_opt(
            "SELECT cap FROM caps WHERE team_id = $1 AND scope_kind = $2 AND scope_value = $3",
            &[&team, &k, &v],
        )
        .await
        .map_err(pg_err)?;
    Ok(r.map(|r| r.get(0)))
}

#[async_trait]
impl CapStore for PgStore {
    async fn cap(&self, team: &str, scope: &CapScope) -> StoreResult<Option<i64>> {
        let (k, v) = scope_parts(scope);
        if unstorable(v) {
            return Ok(None);
        }
        let c = self.client().await?;
        cap_at(&c, team, (k, v)).await
    }

    async fn caps(&self, team: &str) -> StoreResult<Caps> {
        let c = self.client().await?;
        super::read_caps(&c, team).await
    }

    async fn change_cap(
        &self,
        team: &str,
        scope: &CapScope,
        action: CapAction,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, team).await?;
        let (k, v) = scope_parts(scope);
        if unstorable(v) {
            return Err(StoreError::Internal(format!(
                "a cap scope holds U+0000: {}",
                scope.label()
            )));
        }
        // Changes of one scope are serialized, so the audit log's `old` is exact.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1 || '/' || $2 || '/' || $3))",
            &[&team, &k, &v],
        )
        .await
        .map_err(pg_err)?;
        let old = cap_at(&tx, team, (k, v)).await?;
        let new = match action {
            CapAction::Set(n) => {
                tx.execute(
                    "INSERT INTO caps (team_id, scope_kind, scope_value, cap) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (team_id, scope_kind, scope_value) DO UPDATE SET cap = EXCLUDED.cap",
                    &[&team, &k, &v, &n],
                )
                .await
                .map_err(pg_err)?;
                Some(n)
            }
            CapAction::Clear => {
                tx.execute(
                    "DELETE FROM caps WHERE team_id = $1 AND scope_kind = $2 AND scope_value = $3",
                    &[&team, &k, &v],
                )
                .await
                .map_err(pg_err)?;
                None
            }
        };
        let change = Change::Cap {
            scope: scope.clone(),
            old,
            new,
        };
        super::append_audit(&tx, team, key_id, now, &change).await?;
        let entry = AuditEntry {
            time: now,
            key_id: key_id.to_string(),
            change,
        };
        super::webhooks::alert(&tx, team, now, Some(&entry)).await?;
        tx.execute(names::BUMP_META, &[]).await.map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)
    }

    async fn audit(&self, team: &str) -> StoreResult<Vec<AuditEntry>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT time, key_id, scope_kind, scope_value, old, new FROM audit WHERE team_id = $1 ORDER BY id",
                &[&team],
            )
            .await
            .map_err(pg_err)?;
        rows.iter()
            .map(|r| {
                Ok(AuditEntry {
                    time: Timestamp(r.get(0)),
                    key_id: r.get(1),
                    change: audit_change(r.get::<_, &str>(2), r.get(3), r.get(4), r.get(5))?,
                })
            })
            .collect()
    }
}
