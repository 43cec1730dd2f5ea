//! The PostgreSQL store's source of the team-data cache (`store/team_cache.rs`, shared with
//! SQLite): how an instance reads a team and its changes, and the change feed that every
//! instance shares.
//!
//! - **Change feed.** Every write of team data takes the team's next change number
//!   (under the team's write lock, so numbers commit in order), stamps the
//!   rows it writes with it (`names::CHANGE_SEQ`) and sends `NOTIFY usage_changes, '<team>'`,
//!   delivered at commit.
//! - **Load.** In one `REPEATABLE READ` snapshot, the team's change position, its users
//!   and groups, then each record table by binary `COPY`, streamed in chunks to a
//!   blocking thread that fills the columns (no JSON, no row held twice). Queries that
//!   come while it runs, and teams that do not fit the budget, are pushed down to SQL.
//! - **Catch-up.** A held team is read again only from its change position on: the rows
//!   stamped with a newer number (and users and groups whole when they changed), applied
//!   like a batch. A notification tells the cache at once, which catches up in the
//!   background; while the listening connection is down every query checks first, and a
//!   team is checked anyway when it was last checked more than [`RECHECK`] ago.

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Pool, Transaction};
use futures_util::StreamExt;
use tokio_postgres::binary_copy::{BinaryCopyOutRow, BinaryCopyOutStream};
use tokio_postgres::types::Type;
use tokio_postgres::{AsyncMessage, IsolationLevel};
use usage_core::eval::TeamData;
use usage_core::eval::segment::{Segment, SegmentBuilder};
use usage_core::load::{Batch, Record};
use usage_core::schema::records::{self, RecordKind, RecordType};

use super::tls::Connector;
use super::{dialect, names, people, pg_err, pool_err, rows};
use crate::store::team_cache::{TeamCache, TeamSource};
use crate::store::{CacheConfig, StoreError, StoreResult};

/// The channel of change notifications; the payload is the team's id.
const CHANNEL: &str = "usage_changes";

/// Rows handed at once from the `COPY` reader to the thread that fills the columns.
const ROWS_PER_CHUNK: usize = 4096;

/// A held team is checked against the database before answering when it was last checked
/// longer ago than this, whatever the notifications said: a lost notification delays a
/// change by at most this much.
pub const RECHECK: Duration = Duration::from_millis(500);

/// How long the listener waits before connecting again after its connection failed.
const RECONNECT: Duration = Duration::from_millis(500);

/// A team's change position: the number of its last write of team data, and of its last
/// write of users or groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Position {
    seq: i64,
    people: i64,
}

/// Takes the team's next change number in a write's transaction (which holds the team's
/// write lock, so numbers commit in order); `people`: the write is of users or groups.
pub(super) async fn next_change(
    c: &impl GenericClient,
    team: &str,
    people: bool,
) -> StoreResult<i64> {
    let t = names::TEAM_CHANGES;
    let row = c
        .query_one(
            format!(
                "INSERT INTO {t} AS c (team_id, seq, people_seq) VALUES ($1, 1, CASE WHEN $2 THEN 1 ELSE 0 END) \
                 ON CONFLICT (team_id) DO UPDATE SET seq = c.seq + 1, \
                 people_seq = CASE WHEN $2 THEN c.seq + 1 ELSE c.people_seq END RETURNING seq"
            )
            .as_str(),
            &[&team, &people],
        )
        .await
        .map_err(pg_err)?;
    Ok(row.get(0))
}

/// Tells every instance, at commit, that the team changed.
pub(super) async fn notify(c: &impl GenericClient, team: &str) -> StoreResult<()> {
    c.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &team])
        .await
        .map_err(pg_err)?;
    Ok(())
}

/// The team's change position in the transaction's snapshot.
async fn position(c: &impl GenericClient, team: &str) -> StoreResult<Position> {
    let row = c
        .query_opt(
            format!(
                "SELECT seq, people_seq FROM {} WHERE team_id = $1",
                names::TEAM_CHANGES
            )
            .as_str(),
            &[&team],
        )
        .await
        .map_err(pg_err)?;
    Ok(row.map_or(Position::default(), |r| Position {
        seq: r.get(0),
        people: r.get(1),
    }))
}

/// The type of a record field's column in a binary `COPY`.
fn copy_type(ty: RecordType) -> Type {
    match ty {
        RecordType::Text | RecordType::Enum(_) | RecordType::GroupIds => Type::TEXT,
        RecordType::Hour | RecordType::Timestamp | RecordType::Day | RecordType::Count => {
            Type::INT8
        }
        RecordType::Bool => Type::BOOL,
    }
}

/// A stored row of `kind` (its fields' columns in order) as a record.
fn record(kind: &'static RecordKind, row: &BinaryCopyOutRow) -> Result<Record, String> {
    let values = kind
        .fields
        .iter()
        .enumerate()
        .map(|(i, f)| rows::field_value(f.ty, row, i))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("a stored {} row does not read back: {e}", kind.name))?;
    Ok(Record::from_values(kind, values))
}

/// The team's readable rows of `kind` (those newer than change number `after`, if given)
/// by binary `COPY`, as a segment built on a blocking thread while the rows stream in;
/// `None` when its columns outgrew `budget` bytes (the rest of the rows are read and
/// dropped, leaving the connection clean).
async fn copy_kind(
    tx: &Transaction<'_>,
    team: &str,
    kind: &'static RecordKind,
    after: Option<i64>,
    budget: usize,
) -> StoreResult<Option<Segment>> {
    let cols: Vec<String> = kind
        .fields
        .iter()
        .map(|f| format!("\"{}\"", f.name))
        .collect();
    let newer = after.map_or(String::new(), |a| {
        format!(" AND {} > {a}", names::CHANGE_SEQ)
    });
    // COPY takes no parameters: the team is a literal, so that Citus routes the statement
    // to the team's shard (a setting read by `current_setting` is the coordinator's).
    let team = dialect::text_literal(team)
        .ok_or_else(|| StoreError::Internal("a team id holds U+0000".into()))?;
    let statement = format!(
        "COPY (SELECT {} FROM {} WHERE team_id = {team} AND {}{newer}) \
         TO STDOUT (FORMAT binary)",
        cols.join(", "),
        names::table(kind),
        names::READABLE
    );
    let types: Vec<Type> = kind.fields.iter().map(|f| copy_type(f.ty)).collect();
    let stream = tx.copy_out(statement.as_str()).await.map_err(pg_err)?;
    let rows = BinaryCopyOutStream::new(stream, &types);
    futures_util::pin_mut!(rows);
    let (send, mut recv) = tokio::sync::mpsc::channel::<Vec<BinaryCopyOutRow>>(4);
    let build = tokio::task::spawn_blocking(move || -> Result<Option<Segment>, String> {
        let mut b = SegmentBuilder::new(kind);
        while let Some(chunk) = recv.blocking_recv() {
            for row in &chunk {
                b.push(record(kind, row)?);
            }
            if b.heap_bytes() > budget {
                return Ok(None);
            }
        }
        Ok(Some(b.into_segment()))
    });
    let mut chunk = Vec::with_capacity(ROWS_PER_CHUNK);
    let mut building = true;
    while let Some(row) = rows.next().await {
        let row = row.map_err(pg_err)?;
        if !building {
            continue;
        }
        chunk.push(row);
        if chunk.len() == ROWS_PER_CHUNK {
            let full = std::mem::replace(&mut chunk, Vec::with_capacity(ROWS_PER_CHUNK));
            building = send.send(full).await.is_ok();
        }
    }
    if building && !chunk.is_empty() {
        let _ = send.send(chunk).await;
    }
    drop(send);
    build
        .await
        .map_err(|e| StoreError::Internal(format!("a cache load task failed: {e}")))?
        .map_err(StoreError::Internal)
}

/// A read-only `REPEATABLE READ` transaction: one snapshot for a position and its rows.
async fn snapshot<'a>(c: &'a mut deadpool_postgres::Object) -> StoreResult<Transaction<'a>> {
    c.build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(pg_err)
}

/// How an instance reads teams from the database.
pub(crate) struct PgSource {
    pool: Pool,
}

/// What changed of a team since a position: its users and groups (whole, when they
/// changed) and the newer rows of each record table.
pub(crate) struct Changes {
    now: Position,
    people: Option<TeamData>,
    segments: Vec<Segment>,
}

#[async_trait]
impl TeamSource for PgSource {
    type Position = Position;
    type Changes = Changes;

    async fn load(&self, team: &str, budget: usize) -> StoreResult<Option<(TeamData, Position)>> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = snapshot(&mut c).await?;
        let at = position(&tx, team).await?;
        let mut data = people::load(&tx, team).await?;
        for kind in records::USAGE
            .iter()
            .copied()
            .filter(|k| names::has_table(k))
        {
            let room = budget.saturating_sub(data.usage_heap_bytes());
            match copy_kind(&tx, team, kind, None, room).await? {
                Some(seg) if seg.rows() > 0 => data.install(seg),
                Some(_) => {}
                None => return Ok(None),
            }
        }
        tx.commit().await.map_err(pg_err)?;
        Ok(Some((data, at)))
    }

    async fn changes(&self, team: &str, at: &Position) -> StoreResult<Option<Changes>> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = snapshot(&mut c).await?;
        let now = position(&tx, team).await?;
        if now == *at {
            tx.commit().await.map_err(pg_err)?;
            return Ok(None);
        }
        let people = if now.people > at.people {
            Some(people::load(&tx, team).await?)
        } else {
            None
        };
        let mut segments = Vec::new();
        if now.seq > at.seq {
            for kind in records::USAGE
                .iter()
                .copied()
                .filter(|k| names::has_table(k))
            {
                if let Some(seg) = copy_kind(&tx, team, kind, Some(at.seq), usize::MAX).await?
                    && seg.rows() > 0
                {
                    segments.push(seg);
                }
            }
        }
        tx.commit().await.map_err(pg_err)?;
        Ok(Some(Changes {
            now,
            people,
            segments,
        }))
    }

    fn apply(changes: Changes, data: &mut TeamData, at: &mut Position) {
        if let Some(p) = changes.people {
            // Users and groups are never deleted: the stored ones replace the held.
            for kind in [&records::GROUPS, &records::USERS] {
                data.apply(&Batch {
                    kind,
                    records: p.records(kind).cloned().collect(),
                });
            }
        }
        for seg in changes.segments {
            data.replay(seg);
        }
        *at = changes.now;
    }
}

/// The team-data cache of one store instance, and the task that listens for the change
/// feed (stopped when the cache goes).
pub(super) struct Cache {
    teams: Arc<TeamCache<PgSource>>,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::ops::Deref for Cache {
    type Target = Arc<TeamCache<PgSource>>;

    fn deref(&self) -> &Self::Target {
        &self.teams
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Cache {
    /// A cache over `pool`; with a budget, it listens for changes on a connection of its
    /// own made from `listen` with the pool's TLS connector `tls`. Until the listener
    /// listens, every query checks for changes first.
    pub(super) fn new(
        config: CacheConfig,
        pool: Pool,
        listen: &tokio_postgres::Config,
        tls: Connector,
    ) -> Cache {
        let teams = TeamCache::new(PgSource { pool }, config, Some(RECHECK), false);
        let listener = (config.bytes > 0).then(|| {
            tokio::spawn(listen_for_changes(
                Arc::downgrade(&teams),
                listen.clone(),
                tls,
            ))
        });
        Cache {
            teams,
            listener: Mutex::new(listener),
        }
    }

    /// Stops listening (the store closes).
    pub(super) fn stop(&self) {
        if let Some(l) = self
            .listener
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            l.abort();
        }
        self.teams.set_trusted(false);
    }
}

/// Listens for change notifications on a connection of its own (TLS as the pool's),
/// reconnecting when it drops; stops when the cache is gone.
async fn listen_for_changes(
    cache: Weak<TeamCache<PgSource>>,
    config: tokio_postgres::Config,
    tls: Connector,
) {
    loop {
        if let Ok((client, mut conn)) = config.connect(tls.clone()).await {
            let (send, mut teams) = tokio::sync::mpsc::unbounded_channel::<String>();
            let driver = tokio::spawn(async move {
                let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
                while let Some(m) = messages.next().await {
                    match m {
                        Ok(AsyncMessage::Notification(n)) => {
                            if send.send(n.payload().to_string()).is_err() {
                                break;
                            }
                        }
                        Ok(_) => {}
                        Err(_) => break,
                    }
                }
            });
            if client
                .batch_execute(&format!("LISTEN {CHANNEL}"))
                .await
                .is_ok()
            {
                let Some(c) = cache.upgrade() else { return };
                c.set_trusted(true);
                drop(c);
                while let Some(team) = teams.recv().await {
                    let Some(c) = cache.upgrade() else { return };
                    c.notified(&team);
                }
                let Some(c) = cache.upgrade() else { return };
                c.set_trusted(false);
                tracing::warn!("the change listener lost its connection; reconnecting");
            }
            driver.abort();
        }
        if cache.strong_count() == 0 {
            return;
        }
        tokio::time::sleep(RECONNECT).await;
    }
}
