//! [`BillingStore`] on SQLite, and the billing row read and written by team creation
//! and `billing` records.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::{SqliteStore, db_err};
use crate::store::shared::{billing_columns, billing_from_row, billing_row};
use crate::store::{Billing, BillingStore, StoreError, StoreResult};

pub(super) fn read_billing(conn: &Connection, team: &str) -> StoreResult<Billing> {
    conn.query_row(
        &format!(
            "SELECT {} FROM billing WHERE team_id = ?1",
            billing_columns().join(", ")
        ),
        [team],
        |r| {
            let plan: String = r.get(0)?;
            billing_from_row(&plan, |i| r.get(i))
        },
    )
    .optional()
    .map_err(db_err)?
    .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))
}

pub(super) fn write_billing(conn: &Connection, team: &str, b: &Billing) -> StoreResult<()> {
    let (plan, n) = billing_row(b);
    conn.execute(
        &format!(
            "INSERT OR REPLACE INTO billing (team_id, {}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            billing_columns().join(", ")
        ),
        params![team, plan, n[0], n[1], n[2], n[3], n[4], n[5]],
    )
    .map_err(db_err)?;
    Ok(())
}

#[async_trait]
impl BillingStore for SqliteStore {
    async fn billing(&self, team: &str) -> StoreResult<Billing> {
        let team = team.to_string();
        self.blocking(move |i| i.with_reader(|conn| read_billing(conn, &team)))
            .await
    }
}
