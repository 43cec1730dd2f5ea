//! [`RecordStore`] on SQLite: users, groups and usage records stored as segments and a
//! log ([`segments`]), ingest and import, and queries answered from the team's
//! [`TeamData`] held by the team-data cache ([`Loader`]: how it reads a team and its
//! changes), which loads it on first use and catches it up with the writes since.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{Connection, Transaction, TransactionBehavior, params};
use usage_core::JsonPath;
use usage_core::credits::{Terms, UserCredits};
use usage_core::eval::TeamData;
use usage_core::eval::segment::SegmentBuilder;
use usage_core::load::{Batch, Record, parse_record};
use usage_core::plan::{AgentPlan, AnalyticsPlan, Limits, UserPagePlan};
use usage_core::schema::records::{BILLING, GROUPS, RecordKind, USERS};
use usage_core::time::Timestamp;
use usage_core::wire::{AgentAnalyticsResponse, AnalyticsResponse, UserPageAnalyticsResponse};

use super::billing::{read_billing, write_billing};
use super::segments::{self, Delta, Position};
use super::{Inner, SqliteStore, bump, db_err, team_exists};
use crate::store::shared::{Unreadable, ingested, stream, written_whole};
use crate::store::team_cache::{Held, TeamSource};
use crate::store::webhooks::moves_credits;
use crate::store::{
    Change, IMPORT_ACTOR, RecordStore, RecordStream, StoreResult, UnreadableRow, prepare,
};

/// A JSON row's record and its kind, or why it cannot be read.
type Decoded = Result<(&'static RecordKind, Record), String>;

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

/// Reads the JSON rows (`kind`, `body`, `seq`, `id`) of `team` in the layout before
/// segments (migration 1: converting a store, or the rows the conversion could not read)
/// and hands them to `sink` in batches of one kind (at most 50,000 records each); returns
/// the ids of the rows read. A row that cannot be read is left out and handed to
/// `unreadable` (contract section 11).
fn read_rows(
    stmt: &mut rusqlite::Statement<'_>,
    team: &str,
    mut unreadable: impl FnMut(UnreadableRow),
    mut sink: impl FnMut(Batch),
) -> StoreResult<Vec<i64>> {
    let mut rows = stmt.query([team]).map_err(db_err)?;
    let mut read = Vec::new();
    let mut pending: Option<Batch> = None;
    while let Some(row) = rows.next().map_err(db_err)? {
        let id: i64 = row.get(3).map_err(db_err)?;
        let (kind, decoded) = json_row(row)?;
        let (k, r) = match decoded {
            Ok(d) => d,
            Err(reason) => {
                unreadable(UnreadableRow {
                    team: team.to_string(),
                    kind,
                    row: format!("records id {id}"),
                    reason,
                });
                continue;
            }
        };
        read.push(id);
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
    Ok(read)
}

/// A JSON row (`kind`, `body`, `seq` in columns 0 to 2) as its kind's name (`?` when it is
/// no text) and its record, or why it cannot be read.
fn json_row(row: &rusqlite::Row<'_>) -> StoreResult<(String, Decoded)> {
    let kind = segments::cell::<String>(row, 0).map_err(db_err)?;
    let body = segments::cell::<String>(row, 1).map_err(db_err)?;
    let seq = segments::cell::<i64>(row, 2).map_err(db_err)?;
    let name = kind.as_deref().unwrap_or("?").to_string();
    let decoded = match (kind, body, seq) {
        (Ok(kind), Ok(body), Ok(_)) => decode_row(&kind, &body),
        (kind, body, seq) => Err([kind.err(), body.err(), seq.err()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ")),
    };
    Ok((name, decoded))
}

/// The query of a team's JSON rows for [`read_rows`], in the order they were written.
const JSON_ROWS: &str =
    "SELECT kind, body, seq, id FROM records WHERE team_id = ?1 ORDER BY seq, id";

/// Every row left in the layout before segments (contract section 11): after migration 2
/// converted the store, a row still in `records` is one it could not read (why is told),
/// or one it did not reach (a team that does not exist). Each is handed to `unreadable`.
pub(super) fn scan_left_behind(conn: &Connection, unreadable: &Unreadable) -> StoreResult<()> {
    let mut stmt = conn
        .prepare("SELECT kind, body, seq, id, team_id FROM records ORDER BY id")
        .map_err(db_err)?;
    let mut rows = stmt.query([]).map_err(db_err)?;
    while let Some(row) = rows.next().map_err(db_err)? {
        let id: i64 = row.get(3).map_err(db_err)?;
        let team = segments::cell::<String>(row, 4)
            .map_err(db_err)?
            .unwrap_or_else(|_| "?".into());
        let (kind, decoded) = json_row(row)?;
        let reason = match decoded {
            Err(reason) => reason,
            Ok(_) => "left in the layout before segments by its conversion (migration 2): \
                      its team does not exist"
                .to_string(),
        };
        unreadable.met(UnreadableRow {
            team,
            kind,
            row: format!("records id {id}"),
            reason,
        });
    }
    Ok(())
}

/// Migration 2's conversion: every team's readable JSON rows become its segments (based
/// at the team's change counter) and leave `records`; a row that cannot be read stays
/// there, reported by `usage-server check` (contract section 11).
pub(super) fn convert_json_rows(tx: &Transaction<'_>) -> StoreResult<()> {
    // A team whose row cannot be read keeps its JSON rows, reported by `check`.
    let teams: Vec<(String, i64)> = {
        let mut stmt = tx.prepare("SELECT id, seq FROM teams").map_err(db_err)?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    segments::cell::<String>(r, 0)?,
                    segments::cell::<i64>(r, 1)?,
                ))
            })
            .map_err(db_err)?;
        rows.filter_map(|r| match r {
            Ok((Ok(id), Ok(seq))) => Some(Ok((id, seq))),
            Ok(_) => None,
            Err(e) => Some(Err(e)),
        })
        .collect::<Result<_, _>>()
        .map_err(db_err)?
    };
    let mut stmt = tx.prepare(JSON_ROWS).map_err(db_err)?;
    let mut delete = tx
        .prepare("DELETE FROM records WHERE id = ?1")
        .map_err(db_err)?;
    for (team, seq) in teams {
        let mut data = TeamData::new();
        let read = read_rows(&mut stmt, &team, drop, |b| data.apply(&b))?;
        for kind in TeamData::segment_kinds() {
            if let Some(body) = data.segment(kind) {
                segments::put_segment(tx, &team, kind, seq, data.len(kind) as u64, &body)?;
            }
        }
        for id in read {
            delete.execute([id]).map_err(db_err)?;
        }
    }
    Ok(())
}

/// Every team's id and change counter (`None` when it cannot be read: the team's reads then
/// note it). A team row whose id cannot be read is handed to `unreadable` and left out.
pub(super) fn team_rows(
    conn: &Connection,
    unreadable: &Unreadable,
) -> StoreResult<Vec<(String, Option<i64>)>> {
    let mut stmt = conn
        .prepare_cached("SELECT rowid, id, seq FROM teams ORDER BY id")
        .map_err(db_err)?;
    let mut rows = stmt.query([]).map_err(db_err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(db_err)? {
        let rowid: i64 = r.get(0).map_err(db_err)?;
        match segments::cell::<String>(r, 1).map_err(db_err)? {
            Ok(id) => out.push((id, segments::cell::<i64>(r, 2).map_err(db_err)?.ok())),
            Err(reason) => unreadable.met(UnreadableRow {
                team: "?".into(),
                kind: "team".into(),
                row: format!("teams rowid {rowid}"),
                reason,
            }),
        }
    }
    Ok(out)
}

/// The ids of every team whose row reads ([`team_rows`]).
fn team_ids(conn: &Connection, unreadable: &Unreadable) -> StoreResult<Vec<String>> {
    Ok(team_rows(conn, unreadable)?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// Every unreadable segment, log entry and row of the store, team by team (a full read;
/// `usage-server check`). Rows of the JSON layout left in `records` by the conversion to
/// segments are the ones that could not be read then.
pub(super) fn scan_unreadable(
    conn: &Connection,
    unreadable: &Unreadable,
) -> StoreResult<Vec<UnreadableRow>> {
    let found = Unreadable::default();
    for team in team_ids(conn, &found)? {
        segments::scan_team(conn, &team, &found)?;
    }
    segments::scan_orphans(conn, &found)?;
    scan_left_behind(conn, &found)?;
    let found = found.rows();
    for r in &found {
        unreadable.met(r.clone());
    }
    Ok(found)
}

/// How the team-data cache reads a SQLite team: its segments and log on the loader
/// connection, decoded before the team's data is locked, so neither key lookups nor
/// queries of the team wait for the decoding, and a query sees a write whole or not at
/// all.
pub(crate) struct Loader {
    inner: Arc<Inner>,
}

impl Loader {
    pub(super) fn new(inner: Arc<Inner>) -> Loader {
        Loader { inner }
    }

    /// Reads what `team` stores beyond `pos` (all of it for a new position).
    async fn delta(&self, team: &str, pos: Option<&Position>) -> StoreResult<(Delta, Position)> {
        let inner = self.inner.clone();
        let team = team.to_string();
        let base = pos.map_or_else(Position::new, Position::clone);
        tokio::task::spawn_blocking(move || {
            let delta = inner.with_loader(|conn| {
                segments::read_delta(conn, &team, &base, None, &inner.unreadable)
            })?;
            Ok((delta, base))
        })
        .await
        .map_err(|e| crate::store::StoreError::Internal(format!("a store task failed: {e}")))?
    }
}

#[async_trait]
impl TeamSource for Loader {
    type Position = Position;
    type Changes = Delta;

    async fn load(&self, team: &str, budget: usize) -> StoreResult<Option<(TeamData, Position)>> {
        let (delta, mut pos) = self.delta(team, None).await?;
        let mut data = TeamData::new();
        delta.apply(&mut data, &mut pos);
        Ok((data.usage_heap_bytes() <= budget).then_some((data, pos)))
    }

    async fn changes(&self, team: &str, at: &Position) -> StoreResult<Option<Delta>> {
        Ok(Some(self.delta(team, Some(at)).await?.0))
    }

    fn moves_data(changes: &Delta) -> bool {
        !changes.is_empty()
    }

    fn apply(changes: Delta, data: &mut TeamData, at: &mut Position) {
        changes.apply(data, at);
    }
}

/// Whether a held team has a log long enough to compact. Never waits: a team whose
/// position is locked (being caught up or folded) is skipped.
pub(super) fn wants_compaction(teams: &[(String, Arc<Held<Position>>)]) -> bool {
    teams
        .iter()
        .any(|(_, h)| h.at.try_lock().is_ok_and(|p| !p.to_compact().is_empty()))
}

impl Inner {
    /// Folds the long logs of a held team into new segments (see [`segments`]). The
    /// team's position stays locked meanwhile, so its data cannot move under the fold.
    fn compact(&self, team: &str, held: &Held<Position>) -> StoreResult<usize> {
        let mut pos = held.at.blocking_lock();
        let mut done = 0;
        for kind in pos.to_compact() {
            let (fold, body) = {
                let data = held.data.read().map_err(crate::store::shared::poisoned)?;
                (pos.fold(kind, data.len(kind)), data.segment(kind))
            };
            let stored = self.with(|conn| {
                let tx = conn
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(db_err)?;
                let stored = segments::store_fold(&tx, team, &fold, body.as_deref())?;
                tx.commit().map_err(db_err)?;
                Ok(stored)
            })?;
            if stored {
                pos.folded(&fold);
                done += 1;
            }
        }
        Ok(done)
    }

    /// Compacts every held team whose log is long enough; returns the kinds folded.
    pub(super) fn compact_all(
        &self,
        teams: &[(String, Arc<Held<Position>>)],
    ) -> StoreResult<usize> {
        let mut done = 0;
        for (team, h) in teams {
            match self.compact(team, h) {
                Ok(n) => done += n,
                Err(e) => {
                    tracing::warn!(team = %team, error = %e, "compaction failed; the log stays as it is")
                }
            }
        }
        Ok(done)
    }

    /// Writes records of one kind all-or-nothing. `Ok(None)`: the stream had a bad one.
    ///
    /// Usage records are taken into a segment's columns before the store is locked (a
    /// long import holds no lock while it parses), then written in one short transaction:
    /// as the kind's first segment when the team holds none of the kind, else as a log
    /// entry. `users` and `groups` are checked against the stored ones inside that
    /// transaction.
    fn write(
        &self,
        team: &str,
        kind: &'static RecordKind,
        mut records: RecordStream,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let mut builder = SegmentBuilder::new(kind);
        let mut whole = Vec::new();
        let mut n = 0u64;
        for r in records.by_ref() {
            match r {
                Ok(r) if written_whole(kind) => whole.push(r),
                Ok(r) => builder.push(r),
                Err(()) => {
                    records.for_each(drop);
                    return Ok(None);
                }
            }
            n += 1;
        }
        let mut guard = self.conn()?;
        let conn = guard.as_mut().expect("checked by conn()");
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err)?;
        team_exists(&tx, team)?;
        if std::ptr::eq(kind, &BILLING) {
            let old = read_billing(&tx, team)?;
            let mut new = old;
            for r in &whole {
                new.apply(r, now);
            }
            write_billing(&tx, team, &new)?;
            if new != old {
                let change = Change::Billing { old, new };
                super::append_audit(&tx, team, key_id, now, &change)?;
            }
            super::webhooks::alert(self, &tx, team, now, None)?;
            bump(&tx)?;
            tx.commit().map_err(db_err)?;
            return Ok(Some(n));
        }
        if written_whole(kind) {
            let mut people = TeamData::new();
            let people_kinds = [&USERS, &GROUPS];
            segments::read_delta(
                &tx,
                team,
                &Position::new(),
                Some(&people_kinds),
                &self.unreadable,
            )?
            .apply(&mut people, &mut Position::new());
            for r in prepare(
                &people,
                &Batch {
                    kind,
                    records: whole,
                },
                now,
            )?
            .records
            {
                builder.push(r);
            }
        }
        let version = bump(&tx)?;
        let rows = builder.rows() as u64;
        if rows > 0 {
            let body = builder.finish();
            if segments::holds(&tx, team, kind)? {
                segments::put_log(&tx, team, kind, version, rows, &body)?;
            } else {
                segments::put_segment(&tx, team, kind, version, rows, &body)?;
            }
        }
        tx.execute(
            "UPDATE teams SET seq = ?1 WHERE id = ?2",
            params![version, team],
        )
        .map_err(db_err)?;
        if moves_credits(kind) {
            super::webhooks::alert(self, &tx, team, now, None)?;
        }
        tx.commit().map_err(db_err)?;
        Ok(Some(n))
    }
}

#[async_trait]
impl RecordStore for SqliteStore {
    async fn ingest_by(
        &self,
        team: &str,
        batch: Batch,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let (t, key_id) = (team.to_string(), key_id.to_string());
        let n = self
            .blocking(move |i| i.write(&t, batch.kind, stream(batch.records), &key_id, now))
            .await;
        self.cache.changed(team);
        ingested(n?)
    }

    async fn import(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let t = team.to_string();
        let n = self
            .blocking(move |i| i.write(&t, kind, records, IMPORT_ACTOR, now))
            .await;
        self.cache.changed(team);
        n
    }

    async fn analytics(
        &self,
        team: &str,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> StoreResult<AnalyticsResponse> {
        let (plan, limits) = (plan.clone(), *limits);
        self.read_team(team, move |d| Ok(d.analytics(&plan, &limits)?))
            .await
    }

    async fn user_page(
        &self,
        team: &str,
        plan: &UserPagePlan,
    ) -> StoreResult<UserPageAnalyticsResponse> {
        let plan = plan.clone();
        self.read_team(team, move |d| Ok(d.user_page(&plan)?)).await
    }

    async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse> {
        let plan = plan.clone();
        self.read_team(team, move |d| Ok(d.agent(&plan)?)).await
    }

    async fn has_group_id(&self, team: &str, group_id: &str) -> StoreResult<bool> {
        let g = group_id.to_string();
        self.read_team(team, move |d| Ok(d.has_group_id(&g))).await
    }

    async fn has_user(&self, team: &str, email: &str) -> StoreResult<bool> {
        let e = email.to_string();
        self.read_team(team, move |d| Ok(d.user(&e).is_some()))
            .await
    }

    async fn groups_of(&self, team: &str, email: &str) -> StoreResult<Vec<String>> {
        let e = email.to_string();
        self.read_team(team, move |d| Ok(d.groups_of(&e))).await
    }

    async fn credits(&self, team: &str, terms: &Terms) -> StoreResult<Vec<UserCredits>> {
        let t = terms.clone();
        self.read_team(team, move |d| Ok(d.credits(&t))).await
    }

    async fn credits_of(
        &self,
        team: &str,
        email: &str,
        terms: &Terms,
    ) -> StoreResult<Option<UserCredits>> {
        let (e, t) = (email.to_string(), terms.clone());
        self.read_team(team, move |d| Ok(d.credits_of(&e, &t)))
            .await
    }
}

impl SqliteStore {
    /// Answers `f` from the team's data: held by the cache, or read for this query when
    /// the cache does not hold it.
    async fn read_team<T: Send + 'static>(
        &self,
        team: &str,
        f: impl FnOnce(&TeamData) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        if let Some(h) = self.cache.held(team).await? {
            return h.read(f).await;
        }
        let (data, _) = self
            .cache
            .source()
            .load(team, usize::MAX)
            .await?
            .expect("no budget to exceed");
        tokio::task::spawn_blocking(move || f(&data))
            .await
            .map_err(|e| crate::store::StoreError::Internal(format!("a query task failed: {e}")))?
    }
}
