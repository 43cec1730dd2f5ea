//! Records at rest: each team's records of each kind as one segment (the evaluator's
//! columns, compressed and checksummed: [`usage_core::eval::segment`]) plus a log of the
//! batches written since, each itself a small segment.
//!
//! - `segments (team_id, kind, part, seq, rows, body)`: a kind's segment, split into parts
//!   of at most [`PART_BYTES`]; `seq` is the team's change counter it folds in (its base).
//! - `log (team_id, seq, kind, part, rows, body)`: one entry per write, `seq` the change
//!   counter of the write.
//!
//! A reader that holds a team up to `seq = s` reads, in one snapshot, the segments with a
//! base above `s` (installed whole: another process compacted past what it holds) and the
//! log entries above `s` (replayed in order). Compaction writes a kind's segment from the
//! cached data at `s` and deletes exactly the log entries it folded, in one transaction,
//! and only when the stored segment is still the one the cache was built on; a kind with
//! an unreadable segment or entry is never compacted, so what cannot be read stays in
//! place (contract section 11).

use std::collections::{BTreeMap, HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use usage_core::eval::TeamData;
use usage_core::eval::segment::Segment;
use usage_core::schema::records::RecordKind;

use super::db_err;
use crate::store::shared::Unreadable;
use crate::store::{StoreError, StoreResult, UnreadableRow};

/// The largest part of a segment or log entry in one row (SQLite's blobs stop at 1 GB).
pub(super) const PART_BYTES: usize = 64 << 20;

/// A kind is compacted when its log holds at least this many entries…
const COMPACT_ENTRIES: usize = 64;
/// …or at least this many rows and a quarter of its segment's: every row is rewritten a
/// bounded number of times (the segment grows by a quarter between two rewrites).
const COMPACT_ROWS: u64 = 20_000;

/// What a team's cache knows of the stored state beyond its data.
#[derive(Debug, Default)]
pub(super) struct Position {
    /// The team's change counter (`teams.seq`) its data reflects.
    pub(super) seq: i64,
    /// Per kind: the base of the stored segment it was built on, and the segment's rows.
    base: HashMap<&'static str, (i64, u64)>,
    /// Per kind: the log entries applied since that segment (their seqs) and their rows.
    log: HashMap<&'static str, (Vec<i64>, u64)>,
    /// Kinds with a segment or log entry that cannot be read: never compacted.
    damaged: HashSet<&'static str>,
}

impl Position {
    /// The position of a cache that holds nothing yet.
    pub(super) fn new() -> Position {
        Position {
            seq: -1,
            ..Position::default()
        }
    }

    /// The kinds whose log is long enough to fold into a new segment.
    pub(super) fn to_compact(&self) -> Vec<&'static RecordKind> {
        TeamData::segment_kinds()
            .filter(|k| !self.damaged.contains(k.name))
            .filter(|k| {
                self.log.get(k.name).is_some_and(|(seqs, rows)| {
                    let seg = self.base.get(k.name).map_or(0, |b| b.1);
                    seqs.len() >= COMPACT_ENTRIES || (*rows >= COMPACT_ROWS && *rows >= seg / 4)
                })
            })
            .collect()
    }
}

/// A team's stored state newer than a cache's [`Position`], read in one snapshot.
pub(super) struct Delta {
    seq: i64,
    /// Segments to install: the kind, its base, its rows.
    install: Vec<(Segment, i64, u64)>,
    /// Segments whose base moved while the cache already holds what they fold in.
    rebased: Vec<(&'static RecordKind, i64, u64)>,
    /// Log entries to replay, in order.
    replay: Vec<(i64, Segment)>,
    damaged: Vec<&'static str>,
}

impl Delta {
    /// Applies the delta to a team's data and position.
    pub(super) fn apply(self, data: &mut TeamData, pos: &mut Position) {
        for (kind, base, rows) in self.rebased {
            pos.base.insert(kind.name, (base, rows));
            if let Some((seqs, n)) = pos.log.get_mut(kind.name) {
                seqs.retain(|&s| s > base);
                if seqs.is_empty() {
                    *n = 0;
                }
            }
        }
        for (seg, base, rows) in self.install {
            let k = seg.kind().name;
            pos.base.insert(k, (base, rows));
            pos.log.remove(k);
            data.install(seg);
        }
        for (seq, seg) in self.replay {
            let e = pos.log.entry(seg.kind().name).or_default();
            e.0.push(seq);
            e.1 += seg.rows() as u64;
            data.replay(seg);
        }
        pos.damaged.extend(self.damaged);
        pos.seq = pos.seq.max(self.seq);
    }

    /// Whether it changes nothing but the position.
    pub(super) fn is_empty(&self) -> bool {
        self.install.is_empty() && self.replay.is_empty()
    }
}

/// A kind of team data by its stored name.
fn kind_named(name: &str) -> Option<&'static RecordKind> {
    TeamData::segment_kinds().find(|k| k.name == name)
}

/// A stored segment or log entry of the kind named `name`, or why it cannot be read.
fn decode_as(body: &[u8], name: &str) -> Result<Segment, String> {
    match Segment::decode(body) {
        Ok(seg) if seg.kind().name == name => Ok(seg),
        Ok(seg) => Err(format!("it holds {} records", seg.kind().name)),
        Err(e) => Err(e.to_string()),
    }
}

/// Joins the parts of stored rows `(key, part, body)` ordered by key then part.
fn joined<K: Ord + Clone>(
    rows: impl Iterator<Item = rusqlite::Result<(K, i64, Vec<u8>)>>,
) -> StoreResult<BTreeMap<K, Vec<u8>>> {
    let mut out: BTreeMap<K, Vec<u8>> = BTreeMap::new();
    for r in rows {
        let (k, _, body) = r.map_err(db_err)?;
        match out.get_mut(&k) {
            Some(b) => b.extend_from_slice(&body),
            None => {
                out.insert(k, body);
            }
        }
    }
    Ok(out)
}

/// Reads what `team` stores beyond `pos` (all of it for a new position) in one snapshot.
/// Parts that cannot be read are handed to `unreadable` and left out.
pub(super) fn read_delta(
    conn: &Connection,
    team: &str,
    pos: &Position,
    kinds: Option<&[&'static RecordKind]>,
    unreadable: &Unreadable,
) -> StoreResult<Delta> {
    // One snapshot: a transaction of its own, or the caller's.
    let own = if conn.is_autocommit() {
        Some(conn.unchecked_transaction().map_err(db_err)?)
    } else {
        None
    };
    let tx = conn;
    let seq: i64 = tx
        .query_row("SELECT seq FROM teams WHERE id = ?1", [team], |r| r.get(0))
        .optional()
        .map_err(db_err)?
        .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))?;
    let wanted = |name: &str| kinds.is_none_or(|ks| ks.iter().any(|k| k.name == name));
    let mut d = Delta {
        seq,
        install: Vec::new(),
        rebased: Vec::new(),
        replay: Vec::new(),
        damaged: Vec::new(),
    };
    let note = |kind: &str, row: String, reason: String, d: &mut Delta| {
        unreadable.met(UnreadableRow {
            team: team.to_string(),
            kind: kind.to_string(),
            row,
            reason,
        });
        if let Some(k) = kind_named(kind) {
            d.damaged.push(k.name);
        }
    };
    // Segment heads first: which kinds moved, and by how much.
    let heads: Vec<(String, i64, i64)> = {
        let mut stmt = tx
            .prepare_cached("SELECT kind, seq, rows FROM segments WHERE team_id = ?1 AND part = 0")
            .map_err(db_err)?;
        let rows = stmt
            .query_map([team], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(db_err)?;
        rows.collect::<Result<_, _>>().map_err(db_err)?
    };
    for (name, base, rows) in heads {
        let Some(kind) = kind_named(&name).filter(|k| wanted(k.name)) else {
            if kind_named(&name).is_none() {
                note(
                    &name,
                    "segment".into(),
                    format!("unknown record kind `{name}`"),
                    &mut d,
                );
            }
            continue;
        };
        if pos.base.get(kind.name).is_some_and(|b| b.0 == base) {
            continue;
        }
        if base <= pos.seq {
            d.rebased.push((kind, base, rows as u64));
            continue;
        }
        let body = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT kind, part, body FROM segments WHERE team_id = ?1 AND kind = ?2 ORDER BY part",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map([team, kind.name], |r| {
                    Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?))
                })
                .map_err(db_err)?;
            joined(rows)?.into_values().next().unwrap_or_default()
        };
        match decode_as(&body, kind.name) {
            Ok(seg) => d.install.push((seg, base, rows as u64)),
            Err(reason) => note(kind.name, "segment".into(), reason, &mut d),
        }
    }
    let entries = {
        let mut stmt = tx
            .prepare_cached(
                "SELECT seq, kind, part, body FROM log WHERE team_id = ?1 AND seq > ?2 ORDER BY seq, part",
            )
            .map_err(db_err)?;
        let rows = stmt
            .query_map(params![team, pos.seq], |r| {
                Ok((
                    (r.get::<_, i64>(0)?, r.get::<_, String>(1)?),
                    r.get(2)?,
                    r.get(3)?,
                ))
            })
            .map_err(db_err)?;
        joined(rows)?
    };
    for ((seq, name), body) in entries {
        if !kind_named(&name).is_none_or(|k| wanted(k.name)) {
            continue;
        }
        match decode_as(&body, &name) {
            Ok(seg) => d.replay.push((seq, seg)),
            Err(reason) => note(&name, format!("log {seq}"), reason, &mut d),
        }
    }
    if let Some(own) = own {
        own.finish().map_err(db_err)?;
    }
    Ok(d)
}

/// Writes `body` as the rows of one segment or log entry, part by part.
fn put_parts(
    tx: &Transaction<'_>,
    sql: &str,
    body: &[u8],
    mut bind: impl FnMut(&mut rusqlite::CachedStatement<'_>, i64, &[u8]) -> rusqlite::Result<usize>,
) -> StoreResult<()> {
    let mut stmt = tx.prepare_cached(sql).map_err(db_err)?;
    for (part, chunk) in body.chunks(PART_BYTES).enumerate() {
        bind(&mut stmt, part as i64, chunk).map_err(db_err)?;
    }
    Ok(())
}

/// Stores a kind's segment of a team with base `seq`, replacing the stored one.
pub(super) fn put_segment(
    tx: &Transaction<'_>,
    team: &str,
    kind: &RecordKind,
    seq: i64,
    rows: u64,
    body: &[u8],
) -> StoreResult<()> {
    tx.execute(
        "DELETE FROM segments WHERE team_id = ?1 AND kind = ?2",
        params![team, kind.name],
    )
    .map_err(db_err)?;
    put_parts(
        tx,
        "INSERT INTO segments (team_id, kind, part, seq, rows, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        body,
        |s, part, chunk| s.execute(params![team, kind.name, part, seq, rows as i64, chunk]),
    )
}

/// Appends a log entry of a team's write `seq`.
pub(super) fn put_log(
    tx: &Transaction<'_>,
    team: &str,
    kind: &RecordKind,
    seq: i64,
    rows: u64,
    body: &[u8],
) -> StoreResult<()> {
    put_parts(
        tx,
        "INSERT INTO log (team_id, seq, kind, part, rows, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        body,
        |s, part, chunk| s.execute(params![team, seq, kind.name, part, rows as i64, chunk]),
    )
}

/// Whether the team stores anything of `kind`.
pub(super) fn holds(tx: &Transaction<'_>, team: &str, kind: &RecordKind) -> StoreResult<bool> {
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM segments WHERE team_id = ?1 AND kind = ?2)
             OR EXISTS (SELECT 1 FROM log WHERE team_id = ?1 AND kind = ?2)",
        params![team, kind.name],
        |r| r.get(0),
    )
    .map_err(db_err)
}

/// What a compaction of one kind folds: the base it replaces, the log entries it folds.
pub(super) struct Fold {
    kind: &'static RecordKind,
    old_base: Option<i64>,
    seqs: Vec<i64>,
    seq: i64,
    rows: u64,
}

impl Position {
    /// What compacting `kind` at this position folds.
    pub(super) fn fold(&self, kind: &'static RecordKind, rows: usize) -> Fold {
        Fold {
            kind,
            old_base: self.base.get(kind.name).map(|b| b.0),
            seqs: self
                .log
                .get(kind.name)
                .map(|l| l.0.clone())
                .unwrap_or_default(),
            seq: self.seq,
            rows: rows as u64,
        }
    }

    /// Notes a compaction that was stored.
    pub(super) fn folded(&mut self, f: &Fold) {
        self.base.insert(f.kind.name, (f.seq, f.rows));
        if let Some((seqs, n)) = self.log.get_mut(f.kind.name) {
            seqs.retain(|s| !f.seqs.contains(s));
            if seqs.is_empty() {
                *n = 0;
            }
        }
    }
}

/// Stores a compaction: the new segment replaces the one it was built on and the folded
/// log entries go, in one transaction. `Ok(false)` when another process compacted the
/// kind first (nothing is written; the next refresh picks theirs up).
pub(super) fn store_fold(
    tx: &Transaction<'_>,
    team: &str,
    f: &Fold,
    body: Option<&[u8]>,
) -> StoreResult<bool> {
    let base: Option<i64> = tx
        .query_row(
            "SELECT seq FROM segments WHERE team_id = ?1 AND kind = ?2 AND part = 0",
            params![team, f.kind.name],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)?;
    if base != f.old_base {
        return Ok(false);
    }
    match body {
        Some(b) => put_segment(tx, team, f.kind, f.seq, f.rows, b)?,
        None => {
            tx.execute(
                "DELETE FROM segments WHERE team_id = ?1 AND kind = ?2",
                params![team, f.kind.name],
            )
            .map_err(db_err)?;
        }
    }
    let mut stmt = tx
        .prepare_cached("DELETE FROM log WHERE team_id = ?1 AND seq = ?2 AND kind = ?3")
        .map_err(db_err)?;
    for s in &f.seqs {
        stmt.execute(params![team, s, f.kind.name])
            .map_err(db_err)?;
    }
    Ok(true)
}

/// Every segment and log entry of a team that cannot be read (a full read; `check`).
pub(super) fn scan_team(conn: &Connection, team: &str, unreadable: &Unreadable) -> StoreResult<()> {
    read_delta(conn, team, &Position::new(), None, unreadable).map(drop)
}
