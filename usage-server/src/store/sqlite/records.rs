//! [`RecordStore`] on SQLite: users, groups and usage records stored as JSON rows,
//! ingest and import, and queries answered from the team's cached [`TeamData`], which
//! is loaded on first use and caught up with the rows written since.

use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use rusqlite::{Connection, TransactionBehavior, params};
use usage_core::JsonPath;
use usage_core::eval::TeamData;
use usage_core::load::{Batch, Record, parse_record};
use usage_core::plan::{AgentPlan, AnalyticsPlan, Limits, UserPagePlan};
use usage_core::schema::records::{BILLING, RecordKind};
use usage_core::time::Timestamp;
use usage_core::wire::{AgentAnalyticsResponse, AnalyticsResponse, UserPageAnalyticsResponse};

use super::billing::{read_billing, write_billing};
use super::{Cached, Inner, SqliteStore, bump, db_err, team_exists};
use crate::store::shared::{Unreadable, ingested, poisoned, stream, written_whole};
use crate::store::{RecordStore, RecordStream, StoreResult, UnreadableRow, answer, prepare};

/// A stored row as a record, or why it cannot be read.
fn decode_row(kind: &str, body: &str) -> Result<(&'static RecordKind, Record), String> {
    let k = RecordKind::by_name(kind).ok_or_else(|| format!("unknown record kind `{kind}`"))?;
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let r = parse_record(k, &v, &JsonPath::root()).map_err(|e| {
        format!(
            "the body is no valid {kind} record: {}",
            e.first().map(ToString::to_string).unwrap_or_default()
        )
    })?;
    Ok((k, r))
}

/// Reads the rows of a query (`kind`, `body`, `seq`) of `team` and hands them to `sink` in
/// batches of one kind (at most 50,000 records each); returns the largest `seq`. A row
/// that cannot be read is left out and handed to `unreadable` (contract section 11).
fn read_rows(
    stmt: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    team: &str,
    mut unreadable: impl FnMut(UnreadableRow),
    mut sink: impl FnMut(Batch),
) -> StoreResult<i64> {
    let mut rows = stmt.query(params).map_err(db_err)?;
    let mut max = 0i64;
    let mut pending: Option<Batch> = None;
    while let Some(row) = rows.next().map_err(db_err)? {
        let seq: i64 = row.get(2).map_err(db_err)?;
        max = max.max(seq);
        let kind = row.get_ref(0).map_err(db_err)?;
        let body = row.get_ref(1).map_err(db_err)?;
        let decoded = match (kind.as_str(), body.as_str()) {
            (Ok(kind), Ok(body)) => decode_row(kind, body),
            _ => Err("the kind or body is not text".to_string()),
        };
        let (k, r) = match decoded {
            Ok(d) => d,
            Err(reason) => {
                unreadable(UnreadableRow {
                    team: team.to_string(),
                    kind: kind.as_str().unwrap_or("?").to_string(),
                    row: seq.to_string(),
                    reason,
                });
                continue;
            }
        };
        match &mut pending {
            Some(b) if std::ptr::eq(b.kind, k) && b.records.len() < 50_000 => b.records.push(r),
            _ => {
                if let Some(b) = pending.replace(Batch {
                    kind: k,
                    records: vec![r],
                }) {
                    sink(b);
                }
            }
        }
    }
    if let Some(b) = pending {
        sink(b);
    }
    Ok(max)
}

/// Every unreadable row of the store, team by team (a full scan; `usage-server check`).
pub(super) fn scan_unreadable(
    conn: &Connection,
    unreadable: &Unreadable,
) -> StoreResult<Vec<UnreadableRow>> {
    let teams: Vec<String> = {
        let mut stmt = conn
            .prepare("SELECT id FROM teams ORDER BY id")
            .map_err(db_err)?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(db_err)?;
        rows.collect::<Result<_, _>>().map_err(db_err)?
    };
    let mut found = Vec::new();
    let mut stmt = conn
        .prepare("SELECT kind, body, seq FROM records WHERE team_id = ?1 ORDER BY seq")
        .map_err(db_err)?;
    for team in &teams {
        read_rows(&mut stmt, [team], team, |r| found.push(r), drop)?;
    }
    for r in &found {
        unreadable.met(r.clone());
    }
    Ok(found)
}

impl Inner {
    /// Reads the rows of `team` newer than the cached ones into the cache. Rows are read
    /// on the loader connection and parsed before the team's data is locked, so neither
    /// key lookups nor queries of the team wait for the parsing, and a query sees a write
    /// whole or not at all.
    pub(super) fn catch_up(&self, team: &str, cached: &Cached) -> StoreResult<()> {
        let mut seq = cached.seq.lock().map_err(poisoned)?;
        let mut batches = Vec::new();
        let max = self.with_loader(|conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT kind, body, seq FROM records WHERE team_id = ?1 AND seq > ?2 ORDER BY seq",
                )
                .map_err(db_err)?;
            read_rows(&mut stmt, params![team, *seq], team, |r| self.unreadable.met(r), |b| {
                batches.push(b)
            })
        })?;
        if !batches.is_empty() {
            let mut data = cached.data.write().map_err(poisoned)?;
            for b in &batches {
                data.apply(b);
            }
        }
        *seq = (*seq).max(max);
        Ok(())
    }

    /// The cached data of a team, loading it on first use.
    pub(super) fn cached(&self, team: &str) -> StoreResult<Arc<Cached>> {
        if let Some(c) = self.cache.read().map_err(poisoned)?.get(team) {
            return Ok(c.clone());
        }
        // Not shared yet: apply batch by batch, so the parsed rows never all sit in memory
        // beside the team's data.
        let mut data = TeamData::new();
        let seq = self.with_loader(|conn| {
            team_exists(conn, team)?;
            let mut stmt = conn
                .prepare_cached("SELECT kind, body, seq FROM records WHERE team_id = ?1")
                .map_err(db_err)?;
            self.apply_rows(&mut stmt, team, &mut data)
        })?;
        let c = Arc::new(Cached {
            data: RwLock::new(data),
            seq: Mutex::new(seq),
        });
        let mut cache = self.cache.write().map_err(poisoned)?;
        Ok(cache.entry(team.to_string()).or_insert(c).clone())
    }

    fn read<T>(&self, team: &str, f: impl FnOnce(&TeamData) -> StoreResult<T>) -> StoreResult<T> {
        let c = self.cached(team)?;
        let d = c.data.read().map_err(poisoned)?;
        f(&d)
    }

    /// The users and groups of a team, read from the store (for [`prepare`]).
    fn people(&self, conn: &Connection, team: &str) -> StoreResult<TeamData> {
        let mut data = TeamData::new();
        let mut stmt = conn
            .prepare_cached(
                "SELECT kind, body, seq FROM records WHERE team_id = ?1 AND kind IN ('users', 'groups') ORDER BY seq",
            )
            .map_err(db_err)?;
        self.apply_rows(&mut stmt, team, &mut data)?;
        Ok(data)
    }

    /// Applies the rows a statement (`?1` = `team`) selects to `data`, noting the ones
    /// that cannot be read; returns the largest `seq`.
    fn apply_rows(
        &self,
        stmt: &mut rusqlite::Statement<'_>,
        team: &str,
        data: &mut TeamData,
    ) -> StoreResult<i64> {
        read_rows(
            stmt,
            [team],
            team,
            |r| self.unreadable.met(r),
            |b| data.apply(&b),
        )
    }

    /// Writes records of one kind all-or-nothing. `Ok(None)`: the stream had a bad one.
    fn write(
        &self,
        team: &str,
        kind: &'static RecordKind,
        mut records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let mut guard = self.conn()?;
        let conn = guard.as_mut().expect("checked by conn()");
        team_exists(conn, team)?;
        if written_whole(kind) {
            let mut all = Vec::new();
            for r in records.by_ref() {
                match r {
                    Ok(r) => all.push(r),
                    Err(()) => {
                        records.for_each(drop);
                        return Ok(None);
                    }
                }
            }
            let n = all.len() as u64;
            if std::ptr::eq(kind, &BILLING) {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let mut b = read_billing(&tx, team)?;
                for r in &all {
                    b.apply(r, now);
                }
                write_billing(&tx, team, &b)?;
                bump(&tx)?;
                tx.commit().map_err(db_err)?;
                return Ok(Some(n));
            }
            let people = self.people(conn, team)?;
            let batch = prepare(&people, &Batch { kind, records: all }, now)?;
            records = stream(batch.records);
        }
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        let version = bump(&tx)?;
        let mut n = 0u64;
        let mut bad = false;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO records (team_id, kind, identity, seq, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(db_err)?;
            for r in records {
                match r {
                    Ok(_) if bad => {}
                    Ok(r) => {
                        let body = serde_json::Value::Object(r.to_json()).to_string();
                        stmt.execute(params![team, kind.name, r.identity(), version, body])
                            .map_err(db_err)?;
                        n += 1;
                    }
                    Err(()) => bad = true,
                }
            }
        }
        if bad {
            tx.rollback().map_err(db_err)?;
            return Ok(None);
        }
        tx.execute(
            "UPDATE teams SET seq = ?1 WHERE id = ?2",
            params![version, team],
        )
        .map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        drop(guard);
        let cached = self.cache.read().map_err(poisoned)?.get(team).cloned();
        if let Some(c) = cached {
            self.catch_up(team, &c)?;
        }
        Ok(Some(n))
    }
}

#[async_trait]
impl RecordStore for SqliteStore {
    async fn ingest(&self, team: &str, batch: Batch, now: Timestamp) -> StoreResult<u64> {
        let team = team.to_string();
        self.blocking(move |i| ingested(i.write(&team, batch.kind, stream(batch.records), now)?))
            .await
    }

    async fn import(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let team = team.to_string();
        self.blocking(move |i| i.write(&team, kind, records, now))
            .await
    }

    async fn analytics(
        &self,
        team: &str,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> StoreResult<AnalyticsResponse> {
        let (team, plan, limits) = (team.to_string(), plan.clone(), *limits);
        self.blocking(move |i| i.read(&team, |d| answer::analytics(d, &plan, &limits)))
            .await
    }

    async fn user_page(
        &self,
        team: &str,
        plan: &UserPagePlan,
    ) -> StoreResult<UserPageAnalyticsResponse> {
        let (team, plan) = (team.to_string(), plan.clone());
        self.blocking(move |i| i.read(&team, |d| answer::user_page(d, &plan)))
            .await
    }

    async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse> {
        let (team, plan) = (team.to_string(), plan.clone());
        self.blocking(move |i| i.read(&team, |d| answer::agent(d, &plan)))
            .await
    }

    async fn has_group_id(&self, team: &str, group_id: &str) -> StoreResult<bool> {
        let (team, g) = (team.to_string(), group_id.to_string());
        self.blocking(move |i| i.read(&team, |d| Ok(d.has_group_id(&g))))
            .await
    }

    async fn has_user(&self, team: &str, email: &str) -> StoreResult<bool> {
        let (team, e) = (team.to_string(), email.to_string());
        self.blocking(move |i| i.read(&team, |d| Ok(d.user(&e).is_some())))
            .await
    }

    async fn groups_of(&self, team: &str, email: &str) -> StoreResult<Vec<String>> {
        let (team, e) = (team.to_string(), email.to_string());
        self.blocking(move |i| i.read(&team, |d| Ok(d.groups_of(&e))))
            .await
    }
}
