//! [`WebhookStore`] on SQLite, and the events of a write made in its transaction
//! ([`alert`]).

use std::collections::HashMap;

use async_trait::async_trait;
use rusqlite::{Connection, TransactionBehavior, params};
use usage_core::alerts::{DELIVERY_LOG, Known, MAX_WEBHOOKS};
use usage_core::eval::TeamData;
use usage_core::schema::records::{AGENT_RUNS, GROUPS, USERS};
use usage_core::time::Timestamp;

use super::billing::read_billing;

use super::segments::{self, Position};
use super::{Inner, SqliteStore, append_audit, db_err, team_exists};
use crate::store::webhooks::{
    Attempt, Delivery, Outgoing, Webhook, WebhookStore, emit, events_text, subscription_from,
    thresholds_text, wants_credits,
};
use crate::store::{AuditEntry, Change, StoreResult, terms_of};

/// The team's webhooks, oldest first (`only`: that one alone).
fn read_hooks(conn: &Connection, team: &str, only: Option<&str>) -> StoreResult<Vec<Webhook>> {
    let mut st = conn
        .prepare_cached(
            "SELECT id, url, events, thresholds, secret, created FROM webhooks \
             WHERE team_id = ?1 AND (?2 IS NULL OR id = ?2) ORDER BY created, id",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![team, only], |r| {
            Ok(Webhook {
                id: r.get(0)?,
                url: r.get(1)?,
                subscription: subscription_from(&r.get::<_, String>(2)?, &r.get::<_, String>(3)?),
                secret: r.get(4)?,
                created: Timestamp(r.get(5)?),
            })
        })
        .map_err(db_err)?;
    rows.map(|r| r.map_err(db_err)).collect()
}

/// What each webhook knows: the thresholds told in the cycle starting at `cycle`, and the
/// access last told.
fn read_known(
    conn: &Connection,
    team: &str,
    cycle: Timestamp,
) -> StoreResult<HashMap<String, Known>> {
    let mut out: HashMap<String, Known> = HashMap::new();
    let mut st = conn
        .prepare_cached(
            "SELECT webhook_id, email, threshold FROM webhook_fired WHERE team_id = ?1 AND cycle_start = ?2",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map(params![team, cycle.0], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?))
        })
        .map_err(db_err)?;
    for r in rows {
        let (hook, email, t) = r.map_err(db_err)?;
        out.entry(hook).or_default().fired.insert((email, cycle, t));
    }
    let mut st = conn
        .prepare_cached(
            "SELECT webhook_id, email, has_access FROM webhook_access WHERE team_id = ?1",
        )
        .map_err(db_err)?;
    let rows = st
        .query_map([team], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get(2)?))
        })
        .map_err(db_err)?;
    for r in rows {
        let (hook, email, access) = r.map_err(db_err)?;
        out.entry(hook).or_default().access.insert(email, access);
    }
    Ok(out)
}

/// Makes and stores the events of a write to `team`, in the write's transaction `conn`,
/// after the write (`audit`: the cap change it made). With `only`, the new webhook of
/// that id learns its baseline and nothing is told.
pub(super) fn alert(
    inner: &Inner,
    conn: &Connection,
    team: &str,
    now: Timestamp,
    audit: Option<&AuditEntry>,
) -> StoreResult<()> {
    alert_hooks(inner, conn, team, now, audit, None)
}

fn alert_hooks(
    inner: &Inner,
    conn: &Connection,
    team: &str,
    now: Timestamp,
    audit: Option<&AuditEntry>,
    only: Option<&str>,
) -> StoreResult<()> {
    let hooks = read_hooks(conn, team, only)?;
    if hooks.is_empty() {
        return Ok(());
    }
    let terms = terms_of(
        super::read_caps(conn, team)?,
        &read_billing(conn, team)?,
        now,
    );
    let mut known = read_known(conn, team, terms.cycle.start)?;
    let hooks: Vec<(Webhook, Known)> = hooks
        .into_iter()
        .map(|h| {
            let k = known.remove(&h.id).unwrap_or_default();
            (h, k)
        })
        .collect();
    let after = if wants_credits(hooks.iter().map(|(h, _)| h)) {
        // The users, groups and runs the write left, read in its transaction.
        let mut data = TeamData::new();
        segments::read_delta(
            conn,
            team,
            &Position::new(),
            Some(&[&USERS, &GROUPS, &AGENT_RUNS]),
            &inner.unreadable,
        )?
        .apply(&mut data, &mut Position::new());
        Some(data.credits(&terms))
    } else {
        None
    };
    let out = emit(&hooks, after.as_deref(), audit, now, only.is_none());
    for (hook, email, cycle, t) in &out.fired {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO webhook_fired (team_id, webhook_id, email, cycle_start, threshold) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(db_err)?
        .execute(params![team, hook, email, cycle.0, t])
        .map_err(db_err)?;
    }
    for (hook, email, access) in &out.access {
        conn.prepare_cached(
            "INSERT OR REPLACE INTO webhook_access (team_id, webhook_id, email, has_access) VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(db_err)?
        .execute(params![team, hook, email, access])
        .map_err(db_err)?;
    }
    for e in &out.events {
        conn.prepare_cached(
            "INSERT INTO webhook_outbox (team_id, webhook_id, event_id, type, body, created, next_attempt) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        )
        .map_err(db_err)?
        .execute(params![
            team,
            e.webhook_id,
            e.event_id,
            e.event_type.name(),
            e.body,
            now.0
        ])
        .map_err(db_err)?;
    }
    Ok(())
}

/// Deletes a webhook's finished events (delivered or given up) older than its last
/// [`DELIVERY_LOG`]: `?3` is `DELIVERY_LOG - 1`, the offset of the oldest one kept.
const PRUNE: &str = "DELETE FROM webhook_outbox WHERE team_id = ?1 AND webhook_id = ?2 AND next_attempt IS NULL \
     AND rowid < (SELECT rowid FROM webhook_outbox WHERE team_id = ?1 AND webhook_id = ?2 \
     ORDER BY rowid DESC LIMIT 1 OFFSET ?3)";

#[async_trait]
impl WebhookStore for SqliteStore {
    async fn add_webhook(
        &self,
        team: &str,
        hook: Webhook,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (team, by) = (team.to_string(), by.to_string());
        self.blocking(move |i| {
            i.with(|conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                team_exists(&tx, &team)?;
                let n: i64 = tx
                    .query_row(
                        "SELECT COUNT(*) FROM webhooks WHERE team_id = ?1",
                        [&team],
                        |r| r.get(0),
                    )
                    .map_err(db_err)?;
                if n as usize >= MAX_WEBHOOKS {
                    return Ok(false);
                }
                tx.execute(
                    "INSERT INTO webhooks (team_id, id, url, events, thresholds, secret, created) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        team,
                        hook.id,
                        hook.url,
                        events_text(&hook.subscription),
                        thresholds_text(&hook.subscription),
                        hook.secret,
                        hook.created.0
                    ],
                )
                .map_err(db_err)?;
                alert_hooks(i, &tx, &team, now, None, Some(&hook.id))?;
                append_audit(&tx, &team, &by, now, &Change::webhook(&hook, true))?;
                tx.commit().map_err(db_err)?;
                Ok(true)
            })
        })
        .await
    }

    async fn webhooks(&self, team: &str) -> StoreResult<Vec<Webhook>> {
        let team = team.to_string();
        self.blocking(move |i| {
            i.with_reader(|conn| {
                team_exists(conn, &team)?;
                read_hooks(conn, &team, None)
            })
        })
        .await
    }

    async fn remove_webhook(
        &self,
        team: &str,
        id: &str,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let (team, id, by) = (team.to_string(), id.to_string(), by.to_string());
        self.blocking(move |i| {
            i.with(|conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                team_exists(&tx, &team)?;
                let Some(hook) = read_hooks(&tx, &team, Some(&id))?.pop() else {
                    return Ok(false);
                };
                append_audit(&tx, &team, &by, now, &Change::webhook(&hook, false))?;
                tx.execute(
                    "DELETE FROM webhooks WHERE team_id = ?1 AND id = ?2",
                    params![team, id],
                )
                .map_err(db_err)?;
                for table in ["webhook_fired", "webhook_access", "webhook_outbox"] {
                    tx.execute(
                        &format!("DELETE FROM {table} WHERE team_id = ?1 AND webhook_id = ?2"),
                        params![team, id],
                    )
                    .map_err(db_err)?;
                }
                tx.commit().map_err(db_err)?;
                Ok(true)
            })
        })
        .await
    }

    async fn deliveries(&self, team: &str, id: &str) -> StoreResult<Vec<Delivery>> {
        let (team, id) = (team.to_string(), id.to_string());
        self.blocking(move |i| {
            i.with_reader(|conn| {
                let mut st = conn
                    .prepare_cached(
                        "SELECT event_id, type, created, attempts, last_status, last_error, next_attempt, delivered \
                         FROM webhook_outbox WHERE team_id = ?1 AND webhook_id = ?2 ORDER BY rowid DESC LIMIT ?3",
                    )
                    .map_err(db_err)?;
                let rows = st
                    .query_map(params![team, id, DELIVERY_LOG as i64], |r| {
                        Ok(Delivery {
                            event_id: r.get(0)?,
                            event_type: r.get(1)?,
                            created: Timestamp(r.get(2)?),
                            attempts: r.get(3)?,
                            last_status: r.get(4)?,
                            last_error: r.get(5)?,
                            next_attempt: r.get::<_, Option<i64>>(6)?.map(Timestamp),
                            delivered: r.get::<_, Option<i64>>(7)?.map(Timestamp),
                        })
                    })
                    .map_err(db_err)?;
                rows.map(|r| r.map_err(db_err)).collect()
            })
        })
        .await
    }

    async fn alerting_teams(&self) -> StoreResult<Vec<String>> {
        self.blocking(move |i| {
            i.with_reader(|conn| {
                let mut st = conn
                    .prepare_cached(
                        "SELECT DISTINCT team_id FROM webhook_outbox WHERE next_attempt IS NOT NULL ORDER BY team_id",
                    )
                    .map_err(db_err)?;
                let rows = st.query_map([], |r| r.get(0)).map_err(db_err)?;
                rows.map(|r| r.map_err(db_err)).collect()
            })
        })
        .await
    }

    async fn claim(
        &self,
        team: &str,
        now: Timestamp,
        lease: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<Outgoing>> {
        let team = team.to_string();
        self.blocking(move |i| {
            i.with(|conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let due: Vec<Outgoing> = {
                    let mut st = tx
                        .prepare_cached(
                            "SELECT o.webhook_id, o.event_id, h.url, h.secret, o.body, o.attempts, o.created \
                             FROM webhook_outbox o JOIN webhooks h ON h.team_id = o.team_id AND h.id = o.webhook_id \
                             WHERE o.team_id = ?1 AND o.next_attempt <= ?2 ORDER BY o.rowid LIMIT ?3",
                        )
                        .map_err(db_err)?;
                    let rows = st
                        .query_map(params![team, now.0, limit as i64], |r| {
                            Ok(Outgoing {
                                team: team.clone(),
                                webhook_id: r.get(0)?,
                                event_id: r.get(1)?,
                                url: r.get(2)?,
                                secret: r.get(3)?,
                                body: r.get(4)?,
                                attempts: r.get(5)?,
                                created: Timestamp(r.get(6)?),
                                lease,
                            })
                        })
                        .map_err(db_err)?;
                    rows.collect::<Result<_, _>>().map_err(db_err)?
                };
                let mut due = due;
                let mut turns: HashMap<String, i64> = HashMap::new();
                for o in &mut due {
                    let turn = turns.entry(o.webhook_id.clone()).or_insert(0);
                    *turn += 1;
                    o.lease = Timestamp(now.0 + *turn * (lease.0 - now.0));
                    tx.execute(
                        "UPDATE webhook_outbox SET next_attempt = ?4 WHERE team_id = ?1 AND webhook_id = ?2 AND event_id = ?3",
                        params![team, o.webhook_id, o.event_id, o.lease.0],
                    )
                    .map_err(db_err)?;
                }
                tx.commit().map_err(db_err)?;
                Ok(due)
            })
        })
        .await
    }

    async fn attempted(
        &self,
        team: &str,
        webhook_id: &str,
        event_id: &str,
        attempt: &Attempt,
        now: Timestamp,
    ) -> StoreResult<()> {
        let (team, webhook_id, event_id, attempt) = (
            team.to_string(),
            webhook_id.to_string(),
            event_id.to_string(),
            attempt.clone(),
        );
        self.blocking(move |i| {
            i.with(|conn| {
                let delivered = attempt.error.is_none().then_some(now.0);
                conn.execute(
                    "UPDATE webhook_outbox SET attempts = attempts + 1, last_status = ?4, last_error = ?5, \
                     next_attempt = ?6, delivered = ?7 WHERE team_id = ?1 AND webhook_id = ?2 AND event_id = ?3 \
                     AND next_attempt = ?8",
                    params![
                        team,
                        webhook_id,
                        event_id,
                        attempt.status,
                        attempt.error,
                        attempt.next.map(|t| t.0),
                        delivered,
                        attempt.claimed.0
                    ],
                )
                .map_err(db_err)?;
                if attempt.next.is_none() {
                    conn.execute(PRUNE, params![team, webhook_id, DELIVERY_LOG as i64 - 1])
                        .map_err(db_err)?;
                }
                Ok(())
            })
        })
        .await
    }
}
