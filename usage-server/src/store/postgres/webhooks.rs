//! [`WebhookStore`] on PostgreSQL, and the events of a write made in its transaction
//! ([`alert`]). Every statement is filtered by `team_id` (one shard group on Citus);
//! the delivery task finds the teams with webhooks in the `teams` reference table, whose
//! `webhooks` column counts them.

use std::collections::HashMap;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use usage_core::alerts::{DELIVERY_LOG, Known, MAX_WEBHOOKS};
use usage_core::time::Timestamp;

use super::{PgStore, credits, names, people, pg_err};
use crate::store::webhooks::{
    Attempt, Delivery, Outgoing, Webhook, WebhookStore, emit, events_text, subscription_from,
    thresholds_text, wants_credits,
};
use crate::store::{AuditEntry, Change, StoreResult, terms_of};

/// The tables of this file, each keyed by `team_id` first (distributed on Citus).
pub(super) const TABLES: [&str; 4] = [
    "webhooks",
    "webhook_fired",
    "webhook_access",
    "webhook_outbox",
];

/// The migration that makes them, and the count of a team's webhooks in `teams`.
pub(super) fn migration() -> String {
    [
        "CREATE TABLE IF NOT EXISTS webhooks (team_id TEXT NOT NULL, id TEXT NOT NULL, url TEXT NOT NULL, \
         events TEXT NOT NULL, thresholds TEXT NOT NULL, secret TEXT NOT NULL, created BIGINT NOT NULL, \
         PRIMARY KEY (team_id, id))",
        "CREATE TABLE IF NOT EXISTS webhook_fired (team_id TEXT NOT NULL, webhook_id TEXT NOT NULL, \
         email TEXT NOT NULL, cycle_start BIGINT NOT NULL, threshold BIGINT NOT NULL, \
         PRIMARY KEY (team_id, webhook_id, cycle_start, email, threshold))",
        "CREATE TABLE IF NOT EXISTS webhook_access (team_id TEXT NOT NULL, webhook_id TEXT NOT NULL, \
         email TEXT NOT NULL, has_access BOOLEAN NOT NULL, PRIMARY KEY (team_id, webhook_id, email))",
        "CREATE TABLE IF NOT EXISTS webhook_outbox (team_id TEXT NOT NULL, webhook_id TEXT NOT NULL, \
         event_id TEXT NOT NULL, seq BIGSERIAL, type TEXT NOT NULL, body TEXT NOT NULL, created BIGINT NOT NULL, \
         attempts BIGINT NOT NULL DEFAULT 0, next_attempt BIGINT, last_status BIGINT, last_error TEXT, \
         delivered BIGINT, PRIMARY KEY (team_id, webhook_id, event_id))",
        "CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox (team_id, next_attempt)",
        "ALTER TABLE teams ADD COLUMN IF NOT EXISTS webhooks INT NOT NULL DEFAULT 0",
    ]
    .join(";\n")
}

/// The team's webhooks, oldest first (`only`: that one alone).
async fn read_hooks(
    c: &impl GenericClient,
    team: &str,
    only: Option<&str>,
) -> StoreResult<Vec<Webhook>> {
    let rows = c
        .query(
            "SELECT id, url, events, thresholds, secret, created FROM webhooks \
             WHERE team_id = $1 AND ($2::text IS NULL OR id = $2) ORDER BY created, id",
            &[&team, &only],
        )
        .await
        .map_err(pg_err)?;
    Ok(rows
        .iter()
        .map(|r| Webhook {
            id: r.get(0),
            url: r.get(1),
            subscription: subscription_from(r.get(2), r.get(3)),
            secret: r.get(4),
            created: Timestamp(r.get(5)),
        })
        .collect())
}

/// What each webhook knows (the thresholds told in the cycle starting at `cycle`, the
/// access last told).
async fn read_known(
    c: &impl GenericClient,
    team: &str,
    cycle: Timestamp,
) -> StoreResult<HashMap<String, Known>> {
    let mut out: HashMap<String, Known> = HashMap::new();
    let rows = c
        .query(
            "SELECT webhook_id, email, threshold FROM webhook_fired WHERE team_id = $1 AND cycle_start = $2",
            &[&team, &cycle.0],
        )
        .await
        .map_err(pg_err)?;
    for r in rows {
        out.entry(r.get(0))
            .or_default()
            .fired
            .insert((r.get(1), cycle, r.get(2)));
    }
    let rows = c
        .query(
            "SELECT webhook_id, email, has_access FROM webhook_access WHERE team_id = $1",
            &[&team],
        )
        .await
        .map_err(pg_err)?;
    for r in rows {
        out.entry(r.get(0))
            .or_default()
            .access
            .insert(r.get(1), r.get(2));
    }
    Ok(out)
}

/// Makes and stores the events of a write to `team` in the write's transaction, after
/// the write (`audit`: the cap change it made). The team's writes are serialized here
/// (the lock a records write holds already), so two writes never tell the same thing.
pub(super) async fn alert(
    c: &impl GenericClient,
    team: &str,
    now: Timestamp,
    audit: Option<&AuditEntry>,
) -> StoreResult<()> {
    alert_hooks(c, team, now, audit, None).await
}

async fn alert_hooks(
    c: &impl GenericClient,
    team: &str,
    now: Timestamp,
    audit: Option<&AuditEntry>,
    only: Option<&str>,
) -> StoreResult<()> {
    // The team's lock first (a records write holds it already): a webhook added or
    // removed meanwhile is then either seen whole or not at all.
    c.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&team])
        .await
        .map_err(pg_err)?;
    let hooks = read_hooks(c, team, only).await?;
    if hooks.is_empty() {
        return Ok(());
    }
    let terms = terms_of(
        super::read_caps(c, team).await?,
        &PgStore::read_billing(c, team, false).await?,
        now,
    );
    let mut known = read_known(c, team, terms.cycle.start).await?;
    let hooks: Vec<_> = hooks
        .into_iter()
        .map(|h| {
            let k = known.remove(&h.id).unwrap_or_default();
            (h, k)
        })
        .collect();
    let after = if wants_credits(hooks.iter().map(|(h, _)| h)) {
        let users = people::load(c, team).await?;
        let spend = credits::spend(c, team, terms.cycle, None).await?;
        Some(users.credits_with(&spend, &terms))
    } else {
        None
    };
    let out = emit(&hooks, after.as_deref(), audit, now, only.is_none());
    for (hook, email, cycle, t) in &out.fired {
        c.execute(
            "INSERT INTO webhook_fired (team_id, webhook_id, email, cycle_start, threshold) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[&team, hook, email, &cycle.0, t],
        )
        .await
        .map_err(pg_err)?;
    }
    for (hook, email, access) in &out.access {
        c.execute(
            "INSERT INTO webhook_access (team_id, webhook_id, email, has_access) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (team_id, webhook_id, email) DO UPDATE SET has_access = EXCLUDED.has_access",
            &[&team, hook, email, access],
        )
        .await
        .map_err(pg_err)?;
    }
    for e in &out.events {
        c.execute(
            "INSERT INTO webhook_outbox (team_id, webhook_id, event_id, type, body, created, next_attempt) \
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
            &[
                &team,
                &e.webhook_id,
                &e.event_id,
                &e.event_type.name(),
                &e.body,
                &now.0,
            ],
        )
        .await
        .map_err(pg_err)?;
    }
    Ok(())
}

/// Deletes a webhook's finished events (delivered or given up) older than its last
/// [`DELIVERY_LOG`]: `$3` is `DELIVERY_LOG - 1`, the offset of the oldest one kept. Both
/// parts name the team, so Citus routes it to the team's shard.
const PRUNE: &str = "DELETE FROM webhook_outbox WHERE team_id = $1 AND webhook_id = $2 AND next_attempt IS NULL \
     AND seq < (SELECT seq FROM webhook_outbox WHERE team_id = $1 AND webhook_id = $2 \
     ORDER BY seq DESC LIMIT 1 OFFSET $3)";

#[async_trait]
impl WebhookStore for PgStore {
    async fn add_webhook(
        &self,
        team: &str,
        hook: Webhook,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, team).await?;
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&team])
            .await
            .map_err(pg_err)?;
        let n: i64 = tx
            .query_one("SELECT COUNT(*) FROM webhooks WHERE team_id = $1", &[&team])
            .await
            .map_err(pg_err)?
            .get(0);
        if n as usize >= MAX_WEBHOOKS {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO webhooks (team_id, id, url, events, thresholds, secret, created) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &team,
                &hook.id,
                &hook.url,
                &events_text(&hook.subscription),
                &thresholds_text(&hook.subscription),
                &hook.secret,
                &hook.created.0,
            ],
        )
        .await
        .map_err(pg_err)?;
        tx.execute(
            "UPDATE teams SET webhooks = $2 WHERE id = $1",
            &[&team, &(n as i32 + 1)],
        )
        .await
        .map_err(pg_err)?;
        alert_hooks(&tx, team, now, None, Some(&hook.id)).await?;
        super::append_audit(&tx, team, by, now, &Change::webhook(&hook, true)).await?;
        tx.execute(names::BUMP_META, &[]).await.map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)?;
        Ok(true)
    }

    async fn webhooks(&self, team: &str) -> StoreResult<Vec<Webhook>> {
        let c = self.client().await?;
        Self::team_exists(&c, team).await?;
        read_hooks(&c, team, None).await
    }

    async fn remove_webhook(
        &self,
        team: &str,
        id: &str,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, team).await?;
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&team])
            .await
            .map_err(pg_err)?;
        let Some(hook) = read_hooks(&tx, team, Some(id)).await?.pop() else {
            return Ok(false);
        };
        tx.execute(
            "DELETE FROM webhooks WHERE team_id = $1 AND id = $2",
            &[&team, &id],
        )
        .await
        .map_err(pg_err)?;
        super::append_audit(&tx, team, by, now, &Change::webhook(&hook, false)).await?;
        for table in &TABLES[1..] {
            tx.execute(
                format!("DELETE FROM {table} WHERE team_id = $1 AND webhook_id = $2").as_str(),
                &[&team, &id],
            )
            .await
            .map_err(pg_err)?;
        }
        let left: i64 = tx
            .query_one("SELECT COUNT(*) FROM webhooks WHERE team_id = $1", &[&team])
            .await
            .map_err(pg_err)?
            .get(0);
        tx.execute(
            "UPDATE teams SET webhooks = $2 WHERE id = $1",
            &[&team, &(left as i32)],
        )
        .await
        .map_err(pg_err)?;
        tx.execute(names::BUMP_META, &[]).await.map_err(pg_err)?;
        tx.commit().await.map_err(pg_err)?;
        Ok(true)
    }

    async fn deliveries(&self, team: &str, id: &str) -> StoreResult<Vec<Delivery>> {
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT event_id, type, created, attempts, last_status, last_error, next_attempt, delivered \
                 FROM webhook_outbox WHERE team_id = $1 AND webhook_id = $2 ORDER BY seq DESC LIMIT $3",
                &[&team, &id, &(DELIVERY_LOG as i64)],
            )
            .await
            .map_err(pg_err)?;
        Ok(rows
            .iter()
            .map(|r| Delivery {
                event_id: r.get(0),
                event_type: r.get(1),
                created: Timestamp(r.get(2)),
                attempts: r.get(3),
                last_status: r.get(4),
                last_error: r.get(5),
                next_attempt: r.get::<_, Option<i64>>(6).map(Timestamp),
                delivered: r.get::<_, Option<i64>>(7).map(Timestamp),
            })
            .collect())
    }

    async fn alerting_teams(&self) -> StoreResult<Vec<String>> {
        let c = self.client().await?;
        let rows = c
            .query("SELECT id FROM teams WHERE webhooks > 0 ORDER BY id", &[])
            .await
            .map_err(pg_err)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    async fn claim(
        &self,
        team: &str,
        now: Timestamp,
        lease: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<Outgoing>> {
        let c = self.client().await?;
        // One statement: rows another instance claims at the same time are skipped.
        let rows = c
            .query(
                "WITH due AS (SELECT webhook_id, event_id, seq FROM webhook_outbox \
                   WHERE team_id = $1 AND next_attempt <= $2 ORDER BY seq LIMIT $4 FOR UPDATE SKIP LOCKED), \
                 turns AS (SELECT webhook_id, event_id, \
                   row_number() OVER (PARTITION BY webhook_id ORDER BY seq) AS turn FROM due) \
                 UPDATE webhook_outbox o SET next_attempt = $2 + turns.turn * ($3 - $2) FROM turns \
                 WHERE o.team_id = $1 AND o.webhook_id = turns.webhook_id AND o.event_id = turns.event_id \
                 RETURNING o.webhook_id, o.event_id, o.body, o.attempts, o.created, o.seq, o.next_attempt",
                &[&team, &now.0, &lease.0, &(limit as i64)],
            )
            .await
            .map_err(pg_err)?;
        let hooks: HashMap<String, Webhook> = read_hooks(&c, team, None)
            .await?
            .into_iter()
            .map(|h| (h.id.clone(), h))
            .collect();
        let mut out: Vec<(i64, Outgoing)> = rows
            .iter()
            .filter_map(|r| {
                let h = hooks.get(r.get::<_, &str>(0))?;
                Some((
                    r.get(5),
                    Outgoing {
                        team: team.to_string(),
                        webhook_id: h.id.clone(),
                        event_id: r.get(1),
                        url: h.url.clone(),
                        secret: h.secret.clone(),
                        body: r.get(2),
                        attempts: r.get(3),
                        created: Timestamp(r.get(4)),
                        lease: Timestamp(r.get(6)),
                    },
                ))
            })
            .collect();
        out.sort_by_key(|(seq, _)| *seq);
        Ok(out.into_iter().map(|(_, o)| o).collect())
    }

    async fn attempted(
        &self,
        team: &str,
        webhook_id: &str,
        event_id: &str,
        attempt: &Attempt,
        now: Timestamp,
    ) -> StoreResult<()> {
        let c = self.client().await?;
        let delivered = attempt.error.is_none().then_some(now.0);
        c.execute(
            "UPDATE webhook_outbox SET attempts = attempts + 1, last_status = $4, last_error = $5, \
             next_attempt = $6, delivered = $7 WHERE team_id = $1 AND webhook_id = $2 AND event_id = $3 \
             AND next_attempt = $8",
            &[
                &team,
                &webhook_id,
                &event_id,
                &attempt.status,
                &attempt.error,
                &attempt.next.map(|t| t.0),
                &delivered,
                &attempt.claimed.0,
            ],
        )
        .await
        .map_err(pg_err)?;
        if attempt.next.is_none() {
            c.execute(PRUNE, &[&team, &webhook_id, &(DELIVERY_LOG as i64 - 1)])
                .await
                .map_err(pg_err)?;
        }
        Ok(())
    }
}
