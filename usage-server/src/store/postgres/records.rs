//! [`RecordStore`] on PostgreSQL: ingest and import into the users, groups and record
//! tables, and queries pushed down to SQL.

use std::collections::HashMap;

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use usage_core::eval::EvalError;
use usage_core::load::{Batch, FieldValue, Record};
use usage_core::plan::{AgentPlan, AnalyticsPlan, Limits, UserPagePlan};
use usage_core::schema::records::{self, RecordKind, RecordType};
use usage_core::time::Timestamp;
use usage_core::wire::{
    AgentAnalyticsResponse, AnalyticsResponse, QueryResult, UserPageAnalyticsResponse,
};

use super::dialect::Postgres;
use super::{PgStore, cache, people, pg_err, refs, rows, sql, stats, text_rows, unstorable};
use crate::store::shared::{ingested, stream, written_whole};
use crate::store::{RecordStore, RecordStream, StoreError, StoreResult, answer, prepare};

/// Records written per statement by imports and ingests.
const CHUNK: usize = 2_000;

fn decode_err(e: rows::DecodeError) -> StoreError {
    StoreError::Internal(format!("PostgreSQL answer: {}", e.0))
}

/// An import of at least this many records refreshes the table's planner statistics.
const ANALYZE_AFTER: u64 = 10_000;

impl PgStore {
    /// Whether `sql` (`$1` the team, `$2` a name) finds a row; a name holding U+0000 finds
    /// none.
    async fn found(&self, sql: &str, team: &str, name: &str) -> StoreResult<bool> {
        if unstorable(name) {
            return Ok(false);
        }
        let c = self.client().await?;
        let r = c.query_opt(sql, &[&team, &name]).await.map_err(pg_err)?;
        Ok(r.is_some())
    }

    async fn group_exists(c: &impl GenericClient, team: &str, name: &str) -> StoreResult<()> {
        if unstorable(name) {
            return Err(StoreError::Eval(EvalError::GroupNotFound(name.to_string())));
        }
        match c
            .query_opt(
                "SELECT 1 FROM groups WHERE team_id = $1 AND group_name = $2",
                &[&team, &name],
            )
            .await
            .map_err(pg_err)?
        {
            Some(_) => Ok(()),
            None => Err(StoreError::Eval(EvalError::GroupNotFound(name.to_string()))),
        }
    }

    /// Upserts usage records of one kind; a later record with an earlier one's identity
    /// wins (within the chunk by deduplication, across chunks by the upsert).
    async fn write_usage(
        c: &impl GenericClient,
        team: &str,
        kind: &'static RecordKind,
        chunk: &[Record],
        seq: i64,
    ) -> StoreResult<()> {
        if chunk.is_empty() {
            return Ok(());
        }
        let mut last: HashMap<String, usize> = HashMap::with_capacity(chunk.len());
        for (i, r) in chunk.iter().enumerate() {
            last.insert(r.identity(), i);
        }
        let mut keep: Vec<usize> = last.into_values().collect();
        keep.sort_unstable();
        let mut cols: Vec<Box<dyn ToSql + Sync + Send>> =
            vec![Box::new(team.to_string()), Box::new(seq)];
        let mut casts = Vec::new();
        for (j, f) in kind.fields.iter().enumerate() {
            let values = keep.iter().map(|&i| &chunk[i].values()[j]);
            let (b, cast): (Box<dyn ToSql + Sync + Send>, &str) = match f.ty {
                RecordType::Text | RecordType::Enum(_) | RecordType::GroupIds => (
                    Box::new(
                        values
                            .map(|v| v.as_text().map(str::to_string))
                            .collect::<Vec<Option<String>>>(),
                    ),
                    "text[]",
                ),
                RecordType::Hour | RecordType::Timestamp | RecordType::Day => (
                    Box::new(
                        values
                            .map(|v| v.as_time().map(|t| t.0))
                            .collect::<Vec<Option<i64>>>(),
                    ),
                    "bigint[]",
                ),
                RecordType::Count => (
                    Box::new(
                        values
                            .map(FieldValue::as_count)
                            .collect::<Vec<Option<i64>>>(),
                    ),
                    "bigint[]",
                ),
                RecordType::Bool => (
                    Box::new(
                        values
                            .map(FieldValue::as_bool)
                            .collect::<Vec<Option<bool>>>(),
                    ),
                    "boolean[]",
                ),
            };
            cols.push(b);
            casts.push(format!("${}::{cast}", j + 3));
        }
        let names: Vec<String> = kind
            .fields
            .iter()
            .map(|f| format!("\"{}\"", f.name))
            .collect();
        // A replaced row takes the write's change number, so caches read it again.
        let updates: Vec<String> = kind
            .fields
            .iter()
            .filter(|f| !kind.identity.contains(&f.name))
            .map(|f| format!("\"{0}\" = EXCLUDED.\"{0}\"", f.name))
            .chain([format!("{0} = EXCLUDED.{0}", sql::CHANGE_SEQ)])
            .collect();
        let statement = format!(
            "INSERT INTO {} (team_id, {}, {}) SELECT $1, $2, * FROM UNNEST({}) ON CONFLICT (team_id, {}) DO UPDATE SET {}",
            sql::table(kind),
            sql::CHANGE_SEQ,
            names.join(", "),
            casts.join(", "),
            sql::IDENTITY_KEY,
            updates.join(", ")
        );
        c.execute(statement.as_str(), &refs(&cols))
            .await
            .map_err(pg_err)?;
        Ok(())
    }

    /// Refreshes the planner's statistics of a record table after a bulk import. Without
    /// them, right after loading a million rows (before autovacuum's next round, up to a
    /// minute later) PostgreSQL plans for a handful of rows: a sort spilled to disk and no
    /// parallel scan, Q2 of the benchmark 306 ms instead of 116 ms. Table-wide, as
    /// PostgreSQL keeps statistics (on Citus it runs on every shard). A failure is logged:
    /// the import has committed and answers stay right, only slower until autovacuum.
    async fn analyze(&self, kind: &'static RecordKind) {
        let done = match self.client().await {
            Ok(c) => c
                .batch_execute(&format!("ANALYZE {}", sql::table(kind)))
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = done {
            tracing::warn!(table = sql::table(kind), error = %e, "ANALYZE after an import failed");
        }
    }

    /// Writes records of one kind all-or-nothing in one transaction. `Ok(None)`: the
    /// stream had a bad record (nothing written).
    async fn write(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, team).await?;
        // One writer of a team's users, groups and billing at a time: their rules read
        // the stored rows.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&team])
            .await
            .map_err(pg_err)?;
        let whole = written_whole(kind);
        // Team data takes the team's next change number (billing is no team data).
        let seq = if std::ptr::eq(kind, &records::BILLING) {
            None
        } else {
            Some(cache::next_change(&tx, team, whole).await?)
        };
        let mut stream = Some(records);
        let mut n = 0u64;
        loop {
            // Pull the next chunk off the (blocking) stream on the blocking pool.
            let take = if whole { usize::MAX } else { CHUNK };
            let mut it = stream
                .take()
                .expect("the stream is put back after every chunk");
            let (it, chunk, bad) = tokio::task::spawn_blocking(move || {
                let mut chunk = Vec::new();
                let mut bad = false;
                while chunk.len() < take {
                    match it.next() {
                        Some(Ok(r)) => chunk.push(r),
                        Some(Err(())) => {
                            bad = true;
                            it.by_ref().for_each(drop);
                            break;
                        }
                        None => break,
                    }
                }
                (it, chunk, bad)
            })
            .await
            .map_err(|e| StoreError::Internal(format!("import task failed: {e}")))?;
            if bad {
                tx.rollback().await.map_err(pg_err)?;
                return Ok(None);
            }
            if chunk.is_empty() {
                break;
            }
            n += chunk.len() as u64;
            if std::ptr::eq(kind, &records::BILLING) {
                let mut b = Self::read_billing(&tx, team, true).await?;
                for r in &chunk {
                    b.apply(r, now);
                }
                Self::write_billing(&tx, team, &b).await?;
                tx.execute(sql::BUMP_META, &[]).await.map_err(pg_err)?;
            } else if whole {
                let stored = people::load(&tx, team).await?;
                let batch = prepare(
                    &stored,
                    &Batch {
                        kind,
                        records: chunk,
                    },
                    now,
                )?;
                people::write(&tx, team, kind, &batch.records).await?;
            } else {
                Self::write_usage(&tx, team, kind, &chunk, seq.unwrap_or_default()).await?;
            }
            stream = Some(it);
            if whole {
                break;
            }
        }
        if seq.is_some() {
            cache::notify(&tx, team).await?;
        }
        tx.commit().await.map_err(pg_err)?;
        if seq.is_some() {
            self.cache.changed(team);
        }
        Ok(Some(n))
    }
}

#[async_trait]
impl RecordStore for PgStore {
    async fn ingest(&self, team: &str, batch: Batch, now: Timestamp) -> StoreResult<u64> {
        ingested(
            self.write(team, batch.kind, stream(batch.records), now)
                .await?,
        )
    }

    async fn import(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let n = self.write(team, kind, records, now).await?;
        if n.is_some_and(|n| n >= ANALYZE_AFTER) && !written_whole(kind) {
            self.analyze(kind).await;
        }
        Ok(n)
    }

    async fn analytics(
        &self,
        team: &str,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> StoreResult<AnalyticsResponse> {
        if let Some(h) = self.cache.held(team).await? {
            let (plan, limits) = (plan.clone(), *limits);
            return h.read(move |d| answer::analytics(d, &plan, &limits)).await;
        }
        let c = self.client().await?;
        if let Some(g) = &plan.group_name {
            Self::group_exists(&c, team, g).await?;
        }
        let mut results = Vec::with_capacity(plan.queries.len());
        for (i, q) in plan.queries.iter().enumerate() {
            let (st, outs) = sql::query(
                &Postgres,
                q,
                team,
                plan.group_name.as_deref(),
                plan.range,
                limits.result_items,
            );
            let rows = text_rows(&c, &st).await?;
            if rows.len() > limits.result_items {
                return Err(StoreError::Eval(EvalError::TooManyItems {
                    query: i,
                    limit: limits.result_items,
                }));
            }
            let items = rows
                .iter()
                .map(|r| rows::item(&outs, r))
                .collect::<Result<Vec<_>, _>>()
                .map_err(decode_err)?;
            results.push(QueryResult {
                response_items: items,
            });
        }
        Ok(AnalyticsResponse {
            query_results: results,
        })
    }

    async fn user_page(
        &self,
        team: &str,
        plan: &UserPagePlan,
    ) -> StoreResult<UserPageAnalyticsResponse> {
        if let Some(h) = self.cache.held(team).await? {
            let plan = plan.clone();
            return h.read(move |d| answer::user_page(d, &plan)).await;
        }
        let c = self.client().await?;
        if let Some(g) = &plan.group_name {
            Self::group_exists(&c, team, g).await?;
        }
        let rows = text_rows(
            &c,
            &stats::user_page(&Postgres, team, plan.group_name.as_deref(), plan.range),
        )
        .await?;
        let users = rows
            .iter()
            .map(|r| stats::user_row(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(decode_err)?;
        Ok(UserPageAnalyticsResponse {
            user_table_stats: users,
            error: None,
        })
    }

    async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse> {
        if let Some(h) = self.cache.held(team).await? {
            let plan = plan.clone();
            return h.read(move |d| answer::agent(d, &plan)).await;
        }
        let c = self.client().await?;
        // An e-mail holding U+0000 matches nobody (and cannot be sent).
        let mut plan = plan.clone();
        if let Some(emails) = &mut plan.emails {
            emails.retain(|e| !unstorable(e));
        }
        let plan = &plan;
        if let Some(g) = &plan.group_name {
            Self::group_exists(&c, team, g).await?;
        }
        let mut results = Vec::with_capacity(plan.queries.len());
        for (source, st) in stats::agent(&Postgres, team, plan) {
            let rows = text_rows(&c, &st).await?;
            results.push(stats::agent_result(source, &rows).map_err(decode_err)?);
        }
        Ok(AgentAnalyticsResponse {
            query_results: results,
        })
    }

    async fn has_group_id(&self, team: &str, group_id: &str) -> StoreResult<bool> {
        self.found(
            "SELECT 1 FROM groups WHERE team_id = $1 AND group_id = $2",
            team,
            group_id,
        )
        .await
    }

    async fn has_user(&self, team: &str, email: &str) -> StoreResult<bool> {
        self.found(
            "SELECT 1 FROM users WHERE team_id = $1 AND email = $2",
            team,
            email,
        )
        .await
    }

    async fn groups_of(&self, team: &str, email: &str) -> StoreResult<Vec<String>> {
        if unstorable(email) {
            return Ok(Vec::new());
        }
        let c = self.client().await?;
        let rows = c
            .query(
                "SELECT m.group_id FROM user_groups m JOIN groups g ON g.team_id = m.team_id AND g.group_id = m.group_id \
                 WHERE m.team_id = $1 AND m.email = $2 ORDER BY m.group_id COLLATE \"C\"",
                &[&team, &email],
            )
            .await
            .map_err(pg_err)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }
}
