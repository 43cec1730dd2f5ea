//! [`BillingStore`] on PostgreSQL, and the billing row read and written by team creation
//! and `billing` records.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use usage_core::schema::Plan;
use usage_core::time::Timestamp;

use super::{PgStore, pg_err};
use crate::store::{Billing, BillingStore, StoreError, StoreResult};

impl PgStore {
    pub(super) async fn read_billing(
        c: &impl GenericClient,
        team: &str,
        lock: bool,
    ) -> StoreResult<Billing> {
        let q = format!(
            "SELECT plan, num_seats, prompt_credits_per_seat, add_on_credits_available, add_on_credits_used, cycle_start, cycle_end \
             FROM billing WHERE team_id = $1{}",
            if lock { " FOR UPDATE" } else { "" }
        );
        let row = c.query_opt(q.as_str(), &[&team]).await.map_err(pg_err)?;
        let r = row.ok_or_else(|| StoreError::UnknownTeam(team.to_string()))?;
        Ok(Billing {
            plan: r.get::<_, String>(0).parse().unwrap_or(Plan::Pro),
            num_seats: r.get(1),
            prompt_credits_per_seat: r.get(2),
            add_on_credits_available: r.get(3),
            add_on_credits_used: r.get(4),
            cycle_start: Timestamp(r.get(5)),
            cycle_end: Timestamp(r.get(6)),
        })
    }

    pub(super) async fn write_billing(
        c: &impl GenericClient,
        team: &str,
        b: &Billing,
    ) -> StoreResult<()> {
        c.execute(
            "INSERT INTO billing (team_id, plan, num_seats, prompt_credits_per_seat, add_on_credits_available, \
             add_on_credits_used, cycle_start, cycle_end) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (team_id) DO UPDATE SET plan = EXCLUDED.plan, num_seats = EXCLUDED.num_seats, \
             prompt_credits_per_seat = EXCLUDED.prompt_credits_per_seat, add_on_credits_available = EXCLUDED.add_on_credits_available, \
             add_on_credits_used = EXCLUDED.add_on_credits_used, cycle_start = EXCLUDED.cycle_start, cycle_end = EXCLUDED.cycle_end",
            &[
                &team,
                &b.plan.as_str(),
                &b.num_seats,
                &b.prompt_credits_per_seat,
                &b.add_on_credits_available,
                &b.add_on_credits_used,
                &b.cycle_start.0,
                &b.cycle_end.0,
            ],
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
