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
#[derive(Debug, Default, Clone)]
pub(crate) struct Position {
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
pub(crate) struct Delta {
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

/// A column of a stored row read as `T`, or why it cannot be: its storage class or its
/// value is wrong (a hand edit, an older version's bug; contract section 11). An error of
/// the database itself stays an error.
pub(super) fn cell<T: rusqlite::types::FromSql>(
    r: &rusqlite::Row<'_>,
    i: usize,
) -> rusqlite::Result<Result<T, String>> {
    let name = r.as_ref().column_name(i).unwrap_or("?").to_string();
    match r.get::<_, T>(i) {
        Ok(v) => Ok(Ok(v)),
        Err(rusqlite::Error::InvalidColumnType(_, _, ty)) => {
            Ok(Err(format!("`{name}` is stored as {ty}")))
        }
        Err(rusqlite::Error::FromSqlConversionFailure(_, ty, e)) => {
            Ok(Err(format!("`{name}` ({ty}) cannot be read: {e}")))
        }
        Err(rusqlite::Error::IntegralValueOutOfRange(_, v)) => {
            Ok(Err(format!("`{name}` {v} is out of range")))
        }
        Err(rusqlite::Error::Utf8Error(e)) => Ok(Err(format!("`{name}` is not UTF-8: {e}"))),
        Err(e) => Err(e),
    }
}

/// The columns of one stored part of a segment or log entry (its body is read apart).
struct Part {
    rowid: i64,
    kind: String,
    part: i64,
    seq: i64,
    rows: i64,
}

/// Reads the parts `sql` selects (`rowid, kind, part, seq, rows`, bound to `args`); a row
/// with a column that cannot be read is handed to `bad` with its rowid, its kind (as text
/// whatever its storage class), and the reason.
fn parts(
    tx: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
    mut bad: impl FnMut(i64, Option<String>, String),
) -> StoreResult<Vec<Part>> {
    let mut stmt = tx.prepare_cached(sql).map_err(db_err)?;
    let mut rows = stmt.query(args).map_err(db_err)?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(db_err)? {
        let rowid: i64 = r.get(0).map_err(db_err)?;
        let kind = cell::<String>(r, 1).map_err(db_err)?;
        let part = cell::<i64>(r, 2).map_err(db_err)?;
        let seq = cell::<i64>(r, 3).map_err(db_err)?;
        let n = cell::<i64>(r, 4).map_err(db_err)?;
        match (kind, part, seq, n) {
            (Ok(kind), Ok(part), Ok(seq), Ok(rows)) => out.push(Part {
                rowid,
                kind,
                part,
                seq,
                rows,
            }),
            (kind, part, seq, n) => {
                let reasons: Vec<String> = [
                    kind.as_ref().err(),
                    part.err().as_ref(),
                    seq.err().as_ref(),
                    n.err().as_ref(),
                ]
                .into_iter()
                .flatten()
                .cloned()
                .collect();
                let name = kind.ok().or_else(|| r.get_ref(1).ok().map(shown));
                bad(rowid, name, reasons.join("; "));
            }
        }
    }
    Ok(out)
}

/// The body of stored parts, read by rowid and joined in order; or why it cannot be read
/// (a part's body is not a blob).
fn body_of(tx: &Connection, table: &str, rowids: &[i64]) -> StoreResult<Result<Vec<u8>, String>> {
    let mut stmt = tx
        .prepare_cached(&format!("SELECT body FROM {table} WHERE rowid = ?1"))
        .map_err(db_err)?;
    let mut out = Vec::new();
    for id in rowids {
        let body = stmt
            .query_row([id], |r| cell::<Vec<u8>>(r, 0))
            .map_err(db_err)?;
        match body {
            Ok(b) => out.extend_from_slice(&b),
            Err(reason) => return Ok(Err(format!("{table} rowid {id}: {reason}"))),
        }
    }
    Ok(Ok(out))
}

/// Whether stored parts (sorted by part) are the parts `0..n` of one whole.
fn whole(parts: &[&Part]) -> Result<(), String> {
    if parts.iter().enumerate().all(|(i, p)| p.part == i as i64) {
        Ok(())
    } else {
        let have: Vec<String> = parts.iter().map(|p| p.part.to_string()).collect();
        Err(format!(
            "its parts are {}, not 0 to {}",
            have.join(", "),
            parts.len().saturating_sub(1)
        ))
    }
}

/// The team's change counter, `teams.seq`; when it cannot be read, the latest one its
/// segments and log show (the row is then handed to `bad`).
fn team_seq(tx: &Connection, team: &str, bad: impl FnOnce(String)) -> StoreResult<i64> {
    let seq = tx
        .query_row("SELECT seq FROM teams WHERE id = ?1", [team], |r| {
            cell::<i64>(r, 0)
        })
        .optional()
        .map_err(db_err)?
        .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))?;
    match seq {
        Ok(seq) => Ok(seq),
        Err(reason) => {
            bad(reason);
            tx.query_row(
                "SELECT max(coalesce((SELECT max(seq) FROM log WHERE team_id = ?1 AND typeof(seq) = 'integer'), -1),
                            coalesce((SELECT max(seq) FROM segments WHERE team_id = ?1 AND typeof(seq) = 'integer'), -1))",
                [team],
                |r| r.get(0),
            )
            .map_err(db_err)
        }
    }
}

/// Reads what `team` stores beyond `pos` (all of it for a new position) in one snapshot.
/// What cannot be read is handed to `unreadable` and left out, whatever is wrong with it
/// (contract section 11): a body that does not decode (a segment or entry as a whole), a
/// column whose storage class or value is wrong, parts that do not make a whole, an
/// unknown kind, a `teams.seq` that is no integer (then the latest stored one is used).
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
    let met = |kind: &str, row: String, reason: String| {
        unreadable.met(UnreadableRow {
            team: team.to_string(),
            kind: kind.to_string(),
            row,
            reason,
        });
    };
    let seq = team_seq(tx, team, |reason| met("team", "teams".into(), reason))?;
    let wanted = |name: &str| kinds.is_none_or(|ks| ks.iter().any(|k| k.name == name));
    let mut d = Delta {
        seq,
        install: Vec::new(),
        rebased: Vec::new(),
        replay: Vec::new(),
        damaged: Vec::new(),
    };
    let note = |kind: &str, row: String, reason: String, d: &mut Delta| {
        met(kind, row, reason);
        if let Some(k) = kind_named(kind) {
            d.damaged.push(k.name);
        }
    };
    // Every segment part of the team, without its body: which kinds moved, and by how
    // much. A kind with a part that cannot be read is left out whole.
    let mut broken: HashSet<String> = HashSet::new();
    let mut bad_rows: Vec<(Option<String>, String, String)> = Vec::new();
    let seg_parts = parts(
        tx,
        "SELECT rowid, kind, part, seq, rows FROM segments WHERE team_id = ?1",
        [team],
        |rowid, kind, reason| bad_rows.push((kind, format!("segments rowid {rowid}"), reason)),
    )?;
    for (kind, row, reason) in bad_rows.drain(..) {
        let name = kind.unwrap_or_else(|| "?".into());
        note(&name, row, reason, &mut d);
        broken.insert(name);
    }
    let mut by_kind: BTreeMap<&str, Vec<&Part>> = BTreeMap::new();
    for p in &seg_parts {
        by_kind.entry(p.kind.as_str()).or_default().push(p);
    }
    for (name, mut ps) in by_kind {
        ps.sort_by_key(|p| p.part);
        let Some(kind) = kind_named(name) else {
            note(
                name,
                "segment".into(),
                format!("unknown record kind `{name}`"),
                &mut d,
            );
            continue;
        };
        if broken.contains(name) || !wanted(kind.name) {
            continue;
        }
        if let Err(reason) = whole(&ps) {
            note(name, "segment".into(), reason, &mut d);
            continue;
        }
        let (base, rows) = (ps[0].seq, ps[0].rows);
        if pos.base.get(kind.name).is_some_and(|b| b.0 == base) {
            continue;
        }
        if base <= pos.seq {
            d.rebased.push((kind, base, rows as u64));
            continue;
        }
        let ids: Vec<i64> = ps.iter().map(|p| p.rowid).collect();
        match body_of(tx, "segments", &ids)?.and_then(|b| decode_as(&b, kind.name)) {
            Ok(seg) => d.install.push((seg, base, rows as u64)),
            Err(reason) => note(kind.name, "segment".into(), reason, &mut d),
        }
    }
    // The log entries after the position, in order; a row that cannot be read is left
    // out, and with it its entry. (A `seq` that is no integer sorts after every integer,
    // so such a row is always among those read.)
    let log_parts = parts(
        tx,
        "SELECT rowid, kind, part, seq, rows FROM log WHERE team_id = ?1 AND seq > ?2",
        params![team, pos.seq],
        |rowid, kind, reason| bad_rows.push((kind, format!("log rowid {rowid}"), reason)),
    )?;
    for (kind, row, reason) in bad_rows.drain(..) {
        note(kind.as_deref().unwrap_or("?"), row, reason, &mut d);
    }
    let mut by_entry: BTreeMap<(i64, &str), Vec<&Part>> = BTreeMap::new();
    for p in &log_parts {
        by_entry
            .entry((p.seq, p.kind.as_str()))
            .or_default()
            .push(p);
    }
    for ((seq, name), mut ps) in by_entry {
        if !kind_named(name).is_none_or(|k| wanted(k.name)) {
            continue;
        }
        ps.sort_by_key(|p| p.part);
        let body = match whole(&ps) {
            Ok(()) => body_of(tx, "log", &ps.iter().map(|p| p.rowid).collect::<Vec<_>>())?,
            Err(reason) => Err(reason),
        };
        match body.and_then(|b| decode_as(&b, name)) {
            Ok(seg) => d.replay.push((seq, seg)),
            Err(reason) => note(name, format!("log {seq}"), reason, &mut d),
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

/// A stored value as text for a message: text as it is, a blob as UTF-8 (lossy), a
/// number as written.
fn shown(v: rusqlite::types::ValueRef<'_>) -> String {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(n) => n.to_string(),
        ValueRef::Real(f) => f.to_string(),
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into_owned(),
    }
}

/// Every segment and log row that belongs to no team: its `team_id` is not stored as
/// text, or names no team (a hand edit). A team's reads never meet them, so only this
/// scan does; each is handed to `unreadable` under the team its `team_id` spells.
pub(super) fn scan_orphans(conn: &Connection, unreadable: &Unreadable) -> StoreResult<()> {
    for table in ["segments", "log"] {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT rowid, team_id, typeof(team_id), kind FROM {table} \
                 WHERE typeof(team_id) <> 'text' \
                    OR team_id NOT IN (SELECT id FROM teams WHERE typeof(id) = 'text') \
                 ORDER BY rowid"
            ))
            .map_err(db_err)?;
        let mut rows = stmt.query([]).map_err(db_err)?;
        while let Some(r) = rows.next().map_err(db_err)? {
            let rowid: i64 = r.get(0).map_err(db_err)?;
            let team = shown(r.get_ref(1).map_err(db_err)?);
            let ty: String = r.get(2).map_err(db_err)?;
            let kind = shown(r.get_ref(3).map_err(db_err)?);
            let reason = if ty == "text" {
                format!("its team `{team}` does not exist")
            } else {
                format!("`team_id` is stored as {ty}")
            };
            unreadable.met(UnreadableRow {
                team,
                kind,
                row: format!("{table} rowid {rowid}"),
                reason,
            });
        }
    }
    Ok(())
}

/// Every segment and log entry of a team that cannot be read (a full read; `check`).
pub(super) fn scan_team(conn: &Connection, team: &str, unreadable: &Unreadable) -> StoreResult<()> {
    read_delta(conn, team, &Position::new(), None, unreadable).map(drop)
}
