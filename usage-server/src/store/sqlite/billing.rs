//! [`BillingStore`] on SQLite, and the billing row read and written by team creation
//! and `billing` records.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use usage_core::schema::Plan;
use usage_core::time::Timestamp;

use super::{SqliteStore, db_err};
use crate::store::{Billing, BillingStore, StoreError, StoreResult};

pub(super) fn read_billing(conn: &Connection, team: &str) -> StoreResult<Billing> {
    conn.query_row(
        "SELECT plan, num_seats, prompt_credits_per_seat, add_on_credits_available, add_on_credits_used, cycle_start, cycle_end FROM billing WHERE team_id = ?1",
        [team],
        |r| {
            let plan: String = r.get(0)?;
            Ok(Billing {
                plan: plan.parse().unwrap_or(Plan::Pro),
                num_seats: r.get(1)?,
                prompt_credits_per_seat: r.get(2)?,
                add_on_credits_available: r.get(3)?,
                add_on_credits_used: r.get(4)?,
                cycle_start: Timestamp(r.get(5)?),
                cycle_end: Timestamp(r.get(6)?),
            })
        },
    )
    .optional()
    .map_err(db_err)?
    .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))
}

pub(super) fn write_billing(conn: &Connection, team: &str, b: &Billing) -> StoreResult<()> {
    conn.execute(
        "INSERT OR REPLACE INTO billing (team_id, plan, num_seats, prompt_credits_per_seat, add_on_credits_available, add_on_credits_used, cycle_start, cycle_end) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            team,
            b.plan.as_str(),
            b.num_seats,
            b.prompt_credits_per_seat,
            b.add_on_credits_available,
            b.add_on_credits_used,
            b.cycle_start.0,
            b.cycle_end.0
        ],
    )
    .map_err(db_err)?;
    Ok(())
}

#[async_trait]
impl BillingStore for SqliteStore {
    async fn billing(&self, team: &str) -> StoreResult<Billing> {
        let team = team.to_string();
        self.blocking(move |i| i.with(|conn| read_billing(conn, &team)))
            .await
    }
}
