//! The PostgreSQL schema: its migrations, applied at open under an advisory lock.

use usage_core::time::Timestamp;

use super::{PgStore, pg_err, sql};
use crate::store::StoreResult;

/// The small lookup tables every node may hold whole (Citus reference tables): a key is
/// found by its hash before its team is known. (The table lists and the Citus statements
/// feed docs/citus.md and the test of the schema's keys; the store itself never needs them.)
#[cfg(test)]
pub const REFERENCE_TABLES: &[&str] = &["teams", "keys", sql::META_CHANGES];

/// Every table whose primary key starts with `team_id` (Citus distributed tables,
/// co-located by `team_id`), the first one the others are co-located with.
#[cfg(test)]
pub fn team_tables() -> Vec<String> {
    let mut out: Vec<String> = [
        "billing",
        "caps",
        "audit",
        "rate_buckets",
        sql::TEAM_CHANGES,
    ]
    .map(String::from)
    .to_vec();
    out.extend(super::people::table_names().map(String::from));
    out.extend(
        usage_core::schema::records::KINDS
            .iter()
            .filter(|k| sql::has_table(k))
            .map(|k| sql::table(k)),
    );
    out
}

/// The statements that distribute the schema on Citus, after the store's migrations ran
/// on the coordinator: the reference tables, then every team table co-located with the
/// first. `schema_migrations` stays a local table of the coordinator.
#[cfg(test)]
pub fn citus_statements() -> Vec<String> {
    let mut out: Vec<String> = REFERENCE_TABLES
        .iter()
        .map(|t| format!("SELECT create_reference_table('{t}');"))
        .collect();
    let teams = team_tables();
    for (i, t) in teams.iter().enumerate() {
        out.push(if i == 0 {
            format!("SELECT create_distributed_table('{t}', 'team_id');")
        } else {
            format!(
                "SELECT create_distributed_table('{t}', 'team_id', colocate_with => '{}');",
                teams[0]
            )
        });
    }
    out
}

/// The advisory lock that serializes migrations across instances.
const MIGRATION_LOCK: i64 = 0x7573_6167_655f_6d67;

pub(super) fn migrations() -> Vec<String> {
    let mut first = sql::create_tables();
    first.push(
        "CREATE TABLE IF NOT EXISTS teams (id TEXT PRIMARY KEY, name TEXT NOT NULL, created BIGINT NOT NULL)".into(),
    );
    first.push(
        "CREATE TABLE IF NOT EXISTS keys (id TEXT PRIMARY KEY, team_id TEXT NOT NULL REFERENCES teams (id), name TEXT, \
         hash BYTEA NOT NULL UNIQUE, permissions TEXT NOT NULL, created BIGINT NOT NULL, revoked BIGINT)"
            .into(),
    );
    first.push(
        "CREATE TABLE IF NOT EXISTS billing (team_id TEXT PRIMARY KEY, plan TEXT NOT NULL, num_seats BIGINT NOT NULL, \
         prompt_credits_per_seat BIGINT NOT NULL, add_on_credits_available BIGINT NOT NULL, \
         add_on_credits_used BIGINT NOT NULL, cycle_start BIGINT NOT NULL, cycle_end BIGINT NOT NULL)"
            .into(),
    );
    first.push(
        "CREATE TABLE IF NOT EXISTS caps (team_id TEXT NOT NULL, scope_kind TEXT NOT NULL, scope_value TEXT NOT NULL, \
         cap BIGINT NOT NULL, PRIMARY KEY (team_id, scope_kind, scope_value))"
            .into(),
    );
    first.push(
        "CREATE TABLE IF NOT EXISTS audit (team_id TEXT NOT NULL, id BIGSERIAL, time BIGINT NOT NULL, key_id TEXT NOT NULL, \
         scope_kind TEXT NOT NULL, scope_value TEXT NOT NULL, old BIGINT, new BIGINT, PRIMARY KEY (team_id, id))"
            .into(),
    );
    vec![
        first.join(";\n"),
        sql::identity_key_migration().join(";\n"),
        sql::readable_migration().join(";\n"),
        // One rate limit per key across every instance (section 9): the token buckets.
        "CREATE TABLE IF NOT EXISTS rate_buckets (team_id TEXT NOT NULL, key_id TEXT NOT NULL, \
         tokens DOUBLE PRECISION NOT NULL, at BIGINT NOT NULL, granted BOOLEAN NOT NULL, \
         PRIMARY KEY (team_id, key_id))"
            .into(),
        // The change feed of the instances' columnar caches.
        sql::change_feed_migration().join(";\n"),
        sql::bulk_write_migration().join(";\n"),
    ]
}

impl PgStore {
    pub(super) async fn apply_migrations(&self) -> StoreResult<u32> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        tx.batch_execute(&format!(
            "SELECT pg_advisory_xact_lock({MIGRATION_LOCK}); \
             CREATE TABLE IF NOT EXISTS schema_migrations (version INT PRIMARY KEY, applied BIGINT NOT NULL)"
        ))
        .await
        .map_err(pg_err)?;
        let done: i64 = tx
            .query_one("SELECT COUNT(*) FROM schema_migrations", &[])
            .await
            .map_err(pg_err)?
            .get(0);
        let mut applied = 0;
        for (i, m) in migrations().iter().enumerate().skip(done as usize) {
            tx.batch_execute(m).await.map_err(pg_err)?;
            tx.execute(
                "INSERT INTO schema_migrations (version, applied) VALUES ($1, $2)",
                &[&(i as i32 + 1), &Timestamp::now().0],
            )
            .await
            .map_err(pg_err)?;
            applied += 1;
        }
        tx.commit().await.map_err(pg_err)?;
        Ok(applied)
    }
}
