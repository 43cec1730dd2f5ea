//! The per-instance columnar cache of the PostgreSQL store: each server instance keeps the
//! teams it serves as [`TeamData`] (the in-memory evaluator's columns) and answers their
//! queries from memory, kept current from a change feed that every instance shares.
//!
//! - **Change feed.** Every write of team data takes the team's next change number
//!   (under the team's write lock, so numbers commit in order), stamps the
//!   rows it writes with it (`names::CHANGE_SEQ`) and sends `NOTIFY usage_changes, '<team>'`,
//!   delivered at commit.
//! - **Load.** A team's first query starts a load: in one `REPEATABLE READ` snapshot, the
//!   team's change position, its users and groups, then each record table by binary `COPY`,
//!   streamed in chunks to a blocking thread that fills the columns (no JSON, no row held
//!   twice). Queries that come while it runs, and teams that do not fit the budget, are
//!   pushed down to SQL as without a cache.
//! - **Catch-up.** A held team is read again only from its change position on: the rows
//!   stamped with a newer number (and users and groups whole when they changed), applied
//!   like a batch. A team is caught up before it answers when it was told of a change (a
//!   notification, or a write through this instance), when no notification can be trusted
//!   (the listening connection is down) or when it was last checked more than
//!   [`RECHECK`] ago; a notification also starts a catch-up at once in the background.
//! - **Budget.** [`CacheConfig::bytes`] bounds the columns held: the least recently used
//!   teams are dropped to make room; a team that alone exceeds it stays on SQL.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

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
use crate::store::shared::INLINE_ROWS;
use crate::store::{CacheConfig, CacheStats, StoreError, StoreResult};

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
struct Position {
    seq: i64,
    people: i64,
}

/// A team held in memory.
pub(super) struct Held {
    data: RwLock<TeamData>,
    /// The change position `data` is at; locked while catching up, so catch-ups of a team
    /// run one at a time.
    at: tokio::sync::Mutex<Position>,
    /// Changes told of (notifications, writes through this instance; one more when just
    /// loaded and when the listener reconnected, as it may have missed some).
    told: AtomicU64,
    /// The value of `told` when the last finished catch-up began: the team is stale while
    /// the two differ.
    seen: AtomicU64,
    /// A background catch-up runs.
    prefetching: AtomicBool,
    /// When the last finished catch-up began (milliseconds since the cache began): the
    /// data holds every change acknowledged before then.
    checked: AtomicU64,
    /// The cache's clock at its last use (least recently used goes first).
    used: AtomicU64,
    /// Heap bytes of its columns.
    bytes: AtomicU64,
}

impl Held {
    fn stale(&self) -> bool {
        self.told.load(Ordering::SeqCst) != self.seen.load(Ordering::SeqCst)
    }

    fn tell(&self) {
        self.told.fetch_add(1, Ordering::SeqCst);
    }

    /// Runs `f` over the team's data: on this thread when the team is small (see
    /// [`INLINE_ROWS`]), else on the blocking pool.
    pub(super) async fn read<T: Send + 'static>(
        self: Arc<Self>,
        f: impl FnOnce(&TeamData) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        if let Ok(d) = self.data.try_read()
            && d.usage_rows() <= INLINE_ROWS
        {
            return f(&d);
        }
        tokio::task::spawn_blocking(move || {
            f(&self.data.read().unwrap_or_else(PoisonError::into_inner))
        })
        .await
        .map_err(|e| StoreError::Internal(format!("a query task failed: {e}")))?
    }
}

#[derive(Clone)]
enum Slot {
    /// The first load runs; the receiver turns true when it ends.
    Loading(tokio::sync::watch::Receiver<bool>),
    Ready(Arc<Held>),
    /// The team alone exceeds the budget: answered by SQL.
    TooBig,
}

/// The cache of one store instance.
pub(super) struct Cache {
    config: CacheConfig,
    pool: Pool,
    slots: Mutex<HashMap<String, Slot>>,
    /// The clock of uses.
    tick: AtomicU64,
    began: Instant,
    /// Whether the listener is connected and listening: only then may a team that was told
    /// of no change answer without asking the database.
    listening: AtomicBool,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
    hits: AtomicU64,
    pushdowns: AtomicU64,
    loads: AtomicU64,
    catch_ups: AtomicU64,
    evictions: AtomicU64,
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.stop();
    }
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

/// The heap bytes a team's data is counted as.
fn weight(d: &TeamData) -> u64 {
    d.usage_heap_bytes() as u64
}

impl Cache {
    /// A cache over `pool`; with a budget, it listens for changes on a connection of its
    /// own made from `listen` with the pool's TLS connector `tls`.
    pub(super) fn new(
        config: CacheConfig,
        pool: Pool,
        listen: &tokio_postgres::Config,
        tls: Connector,
    ) -> Arc<Cache> {
        let cache = Arc::new(Cache {
            config,
            pool,
            slots: Mutex::new(HashMap::new()),
            tick: AtomicU64::new(0),
            began: Instant::now(),
            listening: AtomicBool::new(false),
            listener: Mutex::new(None),
            hits: AtomicU64::new(0),
            pushdowns: AtomicU64::new(0),
            loads: AtomicU64::new(0),
            catch_ups: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        });
        if config.bytes > 0 {
            let task = tokio::spawn(listen_for_changes(
                Arc::downgrade(&cache),
                listen.clone(),
                tls,
            ));
            *cache
                .listener
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(task);
        }
        cache
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
        self.listening.store(false, Ordering::Release);
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn millis(&self) -> u64 {
        self.began.elapsed().as_millis() as u64
    }

    /// The budget in bytes (0: no cache).
    pub(super) fn budget(&self) -> usize {
        self.config.bytes
    }

    /// What the cache has done so far.
    pub(super) fn stats(&self) -> CacheStats {
        let bytes = self
            .slots()
            .values()
            .map(|s| match s {
                Slot::Ready(h) => h.bytes.load(Ordering::Relaxed),
                _ => 0,
            })
            .sum();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            pushdowns: self.pushdowns.load(Ordering::Relaxed),
            loads: self.loads.load(Ordering::Relaxed),
            catch_ups: self.catch_ups.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            bytes,
        }
    }

    /// The team's data, current, to answer from; `None`: answer by SQL (no cache, the
    /// first load runs, or the team does not fit). A team not held yet starts loading.
    pub(super) async fn held(self: &Arc<Self>, team: &str) -> StoreResult<Option<Arc<Held>>> {
        if self.config.bytes == 0 {
            return Ok(None);
        }
        // A failed load leaves no slot; a waiting query tries again once, then is pushed
        // down.
        for _ in 0..2 {
            let slot = {
                let mut slots = self.slots();
                match slots.get(team) {
                    Some(s) => s.clone(),
                    None => {
                        let (done, rx) = tokio::sync::watch::channel(false);
                        slots.insert(team.to_string(), Slot::Loading(rx.clone()));
                        let me = self.clone();
                        let team = team.to_string();
                        tokio::spawn(async move {
                            me.load(&team).await;
                            let _ = done.send(true);
                        });
                        Slot::Loading(rx)
                    }
                }
            };
            match slot {
                Slot::Ready(h) => {
                    h.used.store(
                        self.tick.fetch_add(1, Ordering::Relaxed) + 1,
                        Ordering::Relaxed,
                    );
                    let unchecked = self
                        .millis()
                        .saturating_sub(h.checked.load(Ordering::Acquire))
                        > RECHECK.as_millis() as u64;
                    if h.stale() || !self.listening.load(Ordering::Acquire) || unchecked {
                        self.catch_up(team, &h).await?;
                    }
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(Some(h));
                }
                Slot::TooBig => break,
                Slot::Loading(mut rx) => {
                    if !self.config.wait_for_load {
                        break;
                    }
                    let _ = rx.wait_for(|done| *done).await;
                }
            }
        }
        self.pushdowns.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    }

    /// Loads a team and puts it in its slot (or marks it too large, or clears the slot
    /// when the load failed, so that a later query tries again).
    async fn load(&self, team: &str) {
        let began = Instant::now();
        let loaded = self.read_team(team).await;
        let mut slots = self.slots();
        match loaded {
            Ok(Some((data, at))) => {
                tracing::info!(
                    team,
                    rows = data.usage_rows(),
                    bytes = weight(&data),
                    seconds = began.elapsed().as_secs_f64(),
                    "a team is loaded into the cache"
                );
                let held = Arc::new(Held {
                    bytes: AtomicU64::new(weight(&data)),
                    data: RwLock::new(data),
                    at: tokio::sync::Mutex::new(at),
                    // Changes that came while loading may have been missed: check first.
                    told: AtomicU64::new(1),
                    seen: AtomicU64::new(0),
                    prefetching: AtomicBool::new(false),
                    checked: AtomicU64::new(self.millis()),
                    used: AtomicU64::new(self.tick.fetch_add(1, Ordering::Relaxed) + 1),
                });
                slots.insert(team.to_string(), Slot::Ready(held));
                self.loads.fetch_add(1, Ordering::Relaxed);
                self.keep_to_budget(&mut slots, team);
            }
            Ok(None) => {
                tracing::info!(
                    team,
                    budget = self.config.bytes,
                    "a team exceeds the cache's budget: its queries are answered in SQL"
                );
                slots.insert(team.to_string(), Slot::TooBig);
            }
            Err(e) => {
                tracing::warn!(team, error = %e, "loading a team into the cache failed");
                slots.remove(team);
            }
        }
    }

    /// A team's data and change position, read in one snapshot; `None` when it does not
    /// fit the budget.
    async fn read_team(&self, team: &str) -> StoreResult<Option<(TeamData, Position)>> {
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = snapshot(&mut c).await?;
        let at = position(&tx, team).await?;
        let mut data = people::load(&tx, team).await?;
        for kind in records::USAGE
            .iter()
            .copied()
            .filter(|k| names::has_table(k))
        {
            let room = self.config.bytes.saturating_sub(data.usage_heap_bytes());
            match copy_kind(&tx, team, kind, None, room).await? {
                Some(seg) if seg.rows() > 0 => data.install(seg),
                Some(_) => {}
                None => return Ok(None),
            }
        }
        tx.commit().await.map_err(pg_err)?;
        Ok(Some((data, at)))
    }

    /// Reads what changed since the team's position and applies it.
    async fn catch_up(&self, team: &str, h: &Arc<Held>) -> StoreResult<()> {
        let mut at = h.at.lock().await;
        // What was told of and acknowledged before the snapshot below is read now; a change
        // told of from here on leaves the team stale for the next catch-up.
        let told = h.told.load(Ordering::SeqCst);
        let began = self.millis();
        let mut c = self.pool.get().await.map_err(pool_err)?;
        let tx = snapshot(&mut c).await?;
        let now = position(&tx, team).await?;
        if now == *at {
            tx.commit().await.map_err(pg_err)?;
            h.checked.store(began, Ordering::Release);
            h.seen.store(told, Ordering::SeqCst);
            return Ok(());
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
        let held = h.clone();
        let bytes = tokio::task::spawn_blocking(move || {
            let mut d = held.data.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(p) = people {
                // Users and groups are never deleted: the stored ones replace the held.
                for kind in [&records::GROUPS, &records::USERS] {
                    d.apply(&Batch {
                        kind,
                        records: p.records(kind).cloned().collect(),
                    });
                }
            }
            for seg in segments {
                d.replay(seg);
            }
            weight(&d)
        })
        .await
        .map_err(|e| StoreError::Internal(format!("a cache catch-up task failed: {e}")))?;
        *at = now;
        h.bytes.store(bytes, Ordering::Relaxed);
        h.checked.store(began, Ordering::Release);
        h.seen.store(told, Ordering::SeqCst);
        self.catch_ups.fetch_add(1, Ordering::Relaxed);
        drop(at);
        let mut slots = self.slots();
        if matches!(slots.get(team), Some(Slot::Ready(x)) if Arc::ptr_eq(x, h)) {
            self.keep_to_budget(&mut slots, team);
        }
        Ok(())
    }

    /// Drops the least recently used teams (other than `keep`) until the held columns fit
    /// the budget; `keep` alone over it is marked too large.
    fn keep_to_budget(&self, slots: &mut HashMap<String, Slot>, keep: &str) {
        loop {
            let total: u64 = slots
                .values()
                .map(|s| match s {
                    Slot::Ready(h) => h.bytes.load(Ordering::Relaxed),
                    _ => 0,
                })
                .sum();
            if total <= self.config.bytes as u64 {
                return;
            }
            let victim = slots
                .iter()
                .filter_map(|(t, s)| match s {
                    Slot::Ready(h) if t != keep => {
                        Some((h.used.load(Ordering::Relaxed), t.clone()))
                    }
                    _ => None,
                })
                .min();
            self.evictions.fetch_add(1, Ordering::Relaxed);
            match victim {
                Some((_, t)) => {
                    slots.remove(&t);
                }
                None => {
                    slots.insert(keep.to_string(), Slot::TooBig);
                    return;
                }
            }
        }
    }

    /// A write through this instance committed: the team answers it from its next query.
    pub(super) fn changed(&self, team: &str) {
        if let Some(Slot::Ready(h)) = self.slots().get(team) {
            h.tell();
        }
    }

    /// A notification named the team: it is stale, and a catch-up starts in the background
    /// (one at a time), so that its next query finds the change read.
    fn notified(self: &Arc<Self>, team: &str) {
        let Some(Slot::Ready(h)) = self.slots().get(team).cloned() else {
            return;
        };
        h.tell();
        if h.prefetching.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        let team = team.to_string();
        tokio::spawn(async move {
            while h.stale() {
                if let Err(e) = me.catch_up(&team, &h).await {
                    tracing::warn!(team, error = %e, "catching up with a change failed");
                    break;
                }
            }
            h.prefetching.store(false, Ordering::Release);
        });
    }

    /// Every held team may have missed a notification.
    fn all_stale(&self) {
        for s in self.slots().values() {
            if let Slot::Ready(h) = s {
                h.tell();
            }
        }
    }
}

/// Listens for change notifications on a connection of its own (TLS as the pool's),
/// reconnecting when it drops; stops when the cache is gone.
async fn listen_for_changes(cache: Weak<Cache>, config: tokio_postgres::Config, tls: Connector) {
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
                c.listening.store(true, Ordering::Release);
                c.all_stale();
                drop(c);
                while let Some(team) = teams.recv().await {
                    let Some(c) = cache.upgrade() else { return };
                    c.notified(&team);
                }
                let Some(c) = cache.upgrade() else { return };
                c.listening.store(false, Ordering::Release);
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
