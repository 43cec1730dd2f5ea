//! [`BillingStore`] on PostgreSQL, and the billing row read and written by team creation
//! and `billing` records.

use std::convert::Infallible;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;

use super::{PgStore, pg_err};
use crate::store::shared::{billing_columns, billing_from_row, billing_row};
use crate::store::{Billing, BillingStore, StoreError, StoreResult};

impl PgStore {
    pub(super) async fn read_billing(
        c: &impl GenericClient,
        team: &str,
        lock: bool,
    ) -> StoreResult<Billing> {
        let q = format!(
            "SELECT {} FROM billing WHERE team_id = $1{}",
            billing_columns().join(", "),
            if lock { " FOR UPDATE" } else { "" }
        );
        let row = c.query_opt(q.as_str(), &[&team]).await.map_err(pg_err)?;
        let r = row.ok_or_else(|| StoreError::UnknownTeam(team.to_string()))?;
        let plan: String = r.get(0);
        let Ok(b) = billing_from_row(&plan, |i| Ok::<i64, Infallible>(r.get(i)));
        Ok(b)
    }

    pub(super) async fn write_billing(
        c: &impl GenericClient,
        team: &str,
        b: &Billing,
    ) -> StoreResult<()> {
        let updates: Vec<String> = billing_columns()
            .iter()
            .map(|c| format!("{c} = EXCLUDED.{c}"))
            .collect();
        let q = format!(
            "INSERT INTO billing (team_id, {}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (team_id) DO UPDATE SET {}",
            billing_columns().join(", "),
            updates.join(", ")
        );
        let (plan, n) = billing_row(b);
        c.execute(
            q.as_str(),
            &[&team, &plan, &n[0], &n[1], &n[2], &n[3], &n[4], &n[5]],
        )
        .await
        .map_err(pg_err)?;
        Ok(())
    }
}

#[async_trait]
impl BillingStore for PgStore {
    async fn billing(&self, team: &str) -> StoreResult<Billing> {
        let c = self.client().await?;
        Self::read_billing(&c, team, false).await
    }
}
