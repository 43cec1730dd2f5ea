//! [`RecordStore`] on PostgreSQL: ingest and import into the users, groups and record
//! tables, and queries pushed down to SQL.

use std::collections::HashMap;

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Transaction};
use futures_util::SinkExt;
use tokio_postgres::types::ToSql;
use usage_core::credits::{Terms, UserCredits};
use usage_core::eval::EvalError;
use usage_core::load::{Batch, Record};
use usage_core::plan::{AgentPlan, AnalyticsPlan, Limits, UserPagePlan};
use usage_core::schema::records::{self, RecordKind, RecordType};
use usage_core::time::Timestamp;
use usage_core::wire::{
    AgentAnalyticsResponse, AnalyticsResponse, QueryResult, UserPageAnalyticsResponse,
};

use super::copy::CopyRows;
use super::dialect::{identity_key_of, version_sort_key};
use super::{
    PgStore, boxed, cache, credits, names, people, pg_err, refs, rows, sql, stats, text_rows,
    unstorable, write,
};
use crate::store::shared::{ingested, stream, written_whole};
use crate::store::webhooks::moves_credits;
use crate::store::{
    Change, IMPORT_ACTOR, RecordStore, RecordStream, StoreError, StoreResult, prepare,
};

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

    /// Writes one round of usage records (each identity once, the later record kept, in
    /// primary-key order). When the team stores none of its identities (every round of a
    /// first import, or of new data), a binary `COPY` straight into the record table,
    /// PostgreSQL's batched insert; otherwise a `COPY` into the session's staging table,
    /// merged by one `UPDATE` of the stored rows it replaces and one `INSERT` of the rest.
    /// Returns whether it used the staging table (`staged`: a round of the write before it
    /// did); a write whose rounds all go straight in never touches it.
    async fn write_round(
        c: &Transaction<'_>,
        team: &str,
        kind: &'static RecordKind,
        round: Round,
        staged: bool,
    ) -> StoreResult<bool> {
        if !Self::stores_any(c, team, kind, &round).await? {
            Self::copy_rows(c, kind, &names::table(kind), round.rows).await?;
            return Ok(false);
        }
        let stage = write::stage_table(kind);
        // The write's first staged round makes sure the session has the table (empty: it
        // is emptied at commit); a later one empties it of the round before.
        let prepare = if staged {
            format!("TRUNCATE {stage}")
        } else {
            format!(
                "SET LOCAL client_min_messages = warning; {}",
                write::create_stage(kind)
            )
        };
        c.batch_execute(&prepare).await.map_err(pg_err)?;
        let (lo, hi) = round.span();
        Self::copy_rows(c, kind, &stage, round.rows).await?;
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&team];
        if names::time_keyed(kind) {
            params.extend([&lo as &(dyn ToSql + Sync), &hi]);
        }
        let update = write::merge_update(kind);
        let replaced = c.execute(update.as_str(), &params).await.map_err(pg_err)?;
        let insert = write::merge_insert(kind, replaced > 0);
        c.execute(insert.as_str(), &[]).await.map_err(pg_err)?;
        Ok(true)
    }

    /// Whether the team stores a row of any identity of `round`. For a kind keyed by time,
    /// first the span of the stored times within the round's (two reads of the primary
    /// key); only the round's rows in that span are looked up one by one, so a round of
    /// new times costs a handful of reads (in an import in time order, at most its first
    /// time meets the round before).
    pub(super) async fn stores_any(
        c: &impl GenericClient,
        team: &str,
        kind: &'static RecordKind,
        round: &Round,
    ) -> StoreResult<bool> {
        let probe = write::stored_any(kind);
        if !names::time_keyed(kind) {
            let keys: Vec<&[u8]> = round.keys.iter().map(|k| &k[..]).collect();
            let row = c
                .query_one(probe.as_str(), &[&team, &keys])
                .await
                .map_err(pg_err)?;
            return Ok(row.get(0));
        }
        let (lo, hi) = round.span();
        let row = c
            .query_one(write::stored_span(kind).as_str(), &[&team, &lo, &hi])
            .await
            .map_err(pg_err)?;
        let (Some(from), Some(to)) = (row.get::<_, Option<i64>>(0), row.get::<_, Option<i64>>(1))
        else {
            return Ok(false);
        };
        let start = round.times.partition_point(|&t| t < from);
        let end = round.times.partition_point(|&t| t <= to);
        if start == end {
            return Ok(false);
        }
        let times = &round.times[start..end];
        let keys: Vec<&[u8]> = round.keys[start..end].iter().map(|k| &k[..]).collect();
        let row = c
            .query_one(probe.as_str(), &[&team, &times, &keys])
            .await
            .map_err(pg_err)?;
        Ok(row.get(0))
    }

    /// A binary `COPY` of encoded rows ([`encode`]) into `table`: the record table of
    /// `kind` or its staging table.
    async fn copy_rows(
        c: &Transaction<'_>,
        kind: &'static RecordKind,
        table: &str,
        rows: Vec<u8>,
    ) -> StoreResult<()> {
        let sink = c
            .copy_in(write::copy_in(kind, table).as_str())
            .await
            .map_err(pg_err)?;
        futures_util::pin_mut!(sink);
        sink.send(bytes::Bytes::from(rows)).await.map_err(pg_err)?;
        sink.finish().await.map_err(pg_err)?;
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
                .batch_execute(&format!("ANALYZE {}", names::table(kind)))
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = done {
            tracing::warn!(table = names::table(kind), error = %e, "ANALYZE after an import failed");
        }
    }

    /// Writes records of one kind all-or-nothing in one transaction. `Ok(None)`: the
    /// stream had a bad record (nothing written).
    async fn write(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(pg_err)?;
        Self::team_exists(&tx, team).await?;
        // One writer of a team at a time: the rules of users, groups and billing read the
        // stored rows, change numbers commit in order, and a usage write's merge relies
        // on no other writer storing the team's rows meanwhile.
        tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&team])
            .await
            .map_err(pg_err)?;
        let n = if written_whole(kind) {
            let Some(n) = Self::write_whole(&tx, team, kind, records, key_id, now).await? else {
                tx.rollback().await.map_err(pg_err)?;
                return Ok(None);
            };
            n
        } else {
            let seq = cache::next_change(&tx, team, false).await?;
            let Some(n) = Self::write_usage(&tx, team, kind, records, seq).await? else {
                tx.rollback().await.map_err(pg_err)?;
                return Ok(None);
            };
            n
        };
        if moves_credits(kind) {
            super::webhooks::alert(&tx, team, now, None).await?;
        }
        let team_data = !std::ptr::eq(kind, &records::BILLING);
        if team_data {
            cache::notify(&tx, team).await?;
        }
        tx.commit().await.map_err(pg_err)?;
        if team_data {
            self.cache.changed(team);
        }
        Ok(Some(n))
    }

    /// Writes users, groups or billing records, read whole off the stream (their rules
    /// read the stored rows). `Ok(None)`: a bad record.
    async fn write_whole(
        tx: &Transaction<'_>,
        team: &str,
        kind: &'static RecordKind,
        mut records: RecordStream,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let chunk = tokio::task::spawn_blocking(move || {
            records
                .by_ref()
                .collect::<Result<Vec<Record>, ()>>()
                .inspect_err(|()| records.for_each(drop))
        })
        .await
        .map_err(|e| StoreError::Internal(format!("import task failed: {e}")))?;
        let Ok(chunk) = chunk else {
            return Ok(None);
        };
        let n = chunk.len() as u64;
        if n == 0 {
            return Ok(Some(0));
        }
        if std::ptr::eq(kind, &records::BILLING) {
            let old = Self::read_billing(tx, team, true).await?;
            let mut new = old;
            for r in &chunk {
                new.apply(r, now);
            }
            Self::write_billing(tx, team, &new).await?;
            if new != old {
                let change = Change::Billing { old, new };
                super::append_audit(tx, team, key_id, now, &change).await?;
            }
            tx.execute(names::BUMP_META, &[]).await.map_err(pg_err)?;
        } else {
            // Users and groups are team data: they take the team's next change number.
            cache::next_change(tx, team, true).await?;
            let stored = people::load(tx, team).await?;
            let batch = prepare(
                &stored,
                &Batch {
                    kind,
                    records: chunk,
                },
                now,
            )?;
            people::write(tx, team, kind, &batch.records).await?;
        }
        Ok(Some(n))
    }

    /// Writes usage records in rounds of [`ROUND`]: a blocking thread reads the stream and
    /// encodes each round's rows while the previous round is merged. `Ok(None)`: a bad
    /// record.
    async fn write_usage(
        tx: &Transaction<'_>,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        seq: i64,
    ) -> StoreResult<Option<u64>> {
        let (send, mut recv) = tokio::sync::mpsc::channel(1);
        let writer = team.to_string();
        let reader =
            tokio::task::spawn_blocking(move || stage_rounds(kind, &writer, seq, records, &send));
        let mut n = 0u64;
        let mut staged = false;
        while let Some(round) = recv.recv().await {
            let Some(round) = round else {
                return Ok(None);
            };
            n += round.records;
            staged |= Self::write_round(tx, team, kind, round, staged).await?;
        }
        reader
            .await
            .map_err(|e| StoreError::Internal(format!("import task failed: {e}")))?;
        Ok(Some(n))
    }
}

/// Records read per round of a usage write: enough that each round's statements are few
/// against its rows, few enough that the reader's round and the merged one fit in memory
/// beside the server's work. (Unit tests use small rounds, so that their writes span
/// several.)
pub(super) const ROUND: usize = if cfg!(test) { 64 } else { 50_000 };

/// One round of a usage write: its rows in binary `COPY` form (one per identity, the last
/// record of each, in primary-key order), how many records it read, and each row's time
/// (a kind keyed by time; none otherwise) and identity key, in row order.
pub(super) struct Round {
    rows: Vec<u8>,
    records: u64,
    times: Vec<i64>,
    keys: Vec<[u8; 32]>,
}

impl Round {
    /// The first and last time of a kind keyed by time (`(0, 0)` otherwise).
    fn span(&self) -> (i64, i64) {
        match (self.times.first(), self.times.last()) {
            (Some(&lo), Some(&hi)) => (lo, hi),
            _ => (0, 0),
        }
    }
}

/// Reads `records` in rounds and sends each encoded for `team` and change number `seq`,
/// then ends; a bad record sends `None` after the rest of the stream is read (its source
/// reports every bad record). Stops when the writer is gone.
fn stage_rounds(
    kind: &'static RecordKind,
    team: &str,
    seq: i64,
    mut records: RecordStream,
    send: &tokio::sync::mpsc::Sender<Option<Round>>,
) {
    loop {
        let mut round = Vec::with_capacity(ROUND.min(4096));
        while round.len() < ROUND {
            match records.next() {
                Some(Ok(r)) => round.push(r),
                Some(Err(())) => {
                    records.for_each(drop);
                    let _ = send.blocking_send(None);
                    return;
                }
                None => break,
            }
        }
        if round.is_empty() {
            return;
        }
        let last = round.len() < ROUND;
        if send
            .blocking_send(Some(encode(kind, team, seq, &round)))
            .is_err()
            || last
        {
            return;
        }
    }
}

/// The rows of a round for `team` and change number `seq`: each identity once, its last
/// record, with the identity and version keys the table stores, in the order of the
/// primary key (time, then identity key), so that the key's index is written page by
/// page. (Time, then the order read, kept the source's order within an hour, which makes
/// grouping queries 5-10% faster, but the import 17% slower: measured with
/// bench/postgres.sh, BENCHMARKS.md, "PostgreSQL store at scale", as of 6932a63.)
pub(super) fn encode(kind: &'static RecordKind, team: &str, seq: i64, round: &[Record]) -> Round {
    let keys: Vec<[u8; 32]> = round.iter().map(identity_key_of).collect();
    let mut last: HashMap<[u8; 32], usize> = HashMap::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        last.insert(*k, i);
    }
    let time = names::time_keyed(kind)
        .then(|| kind.time.and_then(|t| kind.position(t)))
        .flatten();
    let time_of = |i: usize| {
        time.and_then(|t| round[i].values()[t].as_time())
            .map_or(0, |t| t.0)
    };
    // (time, identity key, record): the identities are distinct, so the order is total.
    let kept: Vec<usize> = if last.len() < round.len() {
        last.into_values().collect()
    } else {
        (0..round.len()).collect()
    };
    let mut order: Vec<(i64, [u8; 32], usize)> =
        kept.into_iter().map(|i| (time_of(i), keys[i], i)).collect();
    order.sort_unstable();
    let version = kind.position("version");
    let width = write::written_columns(kind).len();
    let mut out = CopyRows::new();
    for &(_, _, i) in &order {
        out.row(width);
        out.text(Some(team));
        out.int(Some(seq));
        out.bytes(Some(&keys[i]));
        if let Some(v) = version {
            out.bytes(
                round[i].values()[v]
                    .as_text()
                    .map(version_sort_key)
                    .as_deref(),
            );
        }
        for (f, v) in kind.fields.iter().zip(round[i].values()) {
            match f.ty {
                RecordType::Text | RecordType::Enum(_) | RecordType::GroupIds => {
                    out.text(v.as_text());
                }
                RecordType::Hour | RecordType::Timestamp | RecordType::Day => {
                    out.int(v.as_time().map(|t| t.0));
                }
                RecordType::Count => out.int(v.as_count()),
                RecordType::Bool => out.boolean(v.as_bool()),
            }
        }
    }
    Round {
        rows: out.finish(),
        records: round.len() as u64,
        times: if time.is_some() {
            order.iter().map(|&(t, _, _)| t).collect()
        } else {
            Vec::new()
        },
        keys: order.iter().map(|&(_, k, _)| k).collect(),
    }
}

#[async_trait]
impl RecordStore for PgStore {
    async fn ingest_by(
        &self,
        team: &str,
        batch: Batch,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        ingested(
            self.write(team, batch.kind, stream(batch.records), key_id, now)
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
        let n = self.write(team, kind, records, IMPORT_ACTOR, now).await?;
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
            return h.read(move |d| Ok(d.analytics(&plan, &limits)?)).await;
        }
        let c = self.client().await?;
        if let Some(g) = &plan.group_name {
            Self::group_exists(&c, team, g).await?;
        }
        let mut results = Vec::with_capacity(plan.queries.len());
        // The limit is of the whole request: each query may add what the ones before left.
        let mut left = limits.result_items;
        let mut bytes_left = limits.result_bytes;
        for (i, q) in plan.queries.iter().enumerate() {
            let (st, outs) = sql::query(q, team, plan.group_name.as_deref(), plan.range, left);
            let rows = text_rows(&c, &st).await?;
            if rows.len() > left {
                return Err(StoreError::Eval(EvalError::TooManyItems {
                    query: i,
                    limit: limits.result_items,
                }));
            }
            left -= rows.len();
            let mut items = Vec::with_capacity(rows.len());
            for r in &rows {
                let it = rows::item(&outs, r)?;
                // Past the bytes of a whole answer: stop at the item that passes them.
                bytes_left = bytes_left
                    .checked_sub(usage_core::eval::answer::item_bytes(&it))
                    .ok_or(StoreError::Eval(EvalError::TooLarge {
                        query: i,
                        limit: limits.result_bytes,
                    }))?;
                items.push(it);
            }
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
            return h.read(move |d| Ok(d.user_page(&plan)?)).await;
        }
        let c = self.client().await?;
        if let Some(g) = &plan.group_name {
            Self::group_exists(&c, team, g).await?;
        }
        let st = stats::user_page(team, plan.group_name.as_deref(), plan.range);
        let params = boxed(&st.params);
        let rows = c
            .query(st.sql.as_str(), &refs(&params))
            .await
            .map_err(pg_err)?;
        let users = rows
            .iter()
            .map(stats::user_row)
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(UserPageAnalyticsResponse {
            user_table_stats: users,
            error: None,
        })
    }

    async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse> {
        if let Some(h) = self.cache.held(team).await? {
            let plan = plan.clone();
            return h.read(move |d| Ok(d.agent(&plan)?)).await;
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
        for (source, st) in stats::agent(team, plan) {
            let rows = text_rows(&c, &st).await?;
            results.push(stats::agent_result(source, &rows)?);
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

    async fn credits(&self, team: &str, terms: &Terms) -> StoreResult<Vec<UserCredits>> {
        if let Some(h) = self.cache.held(team).await? {
            let t = terms.clone();
            return h.read(move |d| Ok(d.credits(&t))).await;
        }
        let c = self.client().await?;
        let users = people::load(&c, team).await?;
        let spend = credits::spend(&c, team, terms.cycle, None).await?;
        Ok(users.credits_with(&spend, terms))
    }

    async fn credits_of(
        &self,
        team: &str,
        email: &str,
        terms: &Terms,
    ) -> StoreResult<Option<UserCredits>> {
        if let Some(h) = self.cache.held(team).await? {
            let (e, t) = (email.to_string(), terms.clone());
            return h.read(move |d| Ok(d.credits_of(&e, &t))).await;
        }
        if unstorable(email) {
            return Ok(None);
        }
        let c = self.client().await?;
        let users = people::load(&c, team).await?;
        let Some(key) = users.key_of_user(email) else {
            return Ok(None);
        };
        let spent = credits::spend(&c, team, terms.cycle, Some(key))
            .await?
            .remove(key)
            .unwrap_or_default();
        Ok(Some(terms.credits(email, &users.groups_of(email), spent)))
    }
}
