//! The team-data cache ([`TeamCache`]): the teams a store serves, held in memory as the
//! evaluator's columns ([`TeamData`]) within a memory budget, each at a position of the
//! store and caught up with the changes since. The SQLite and PostgreSQL stores share it;
//! each says how it reads a team and its changes ([`TeamSource`]).
//!
//! The server has three caches; this is the second:
//! - the *metadata cache* (`store/cached.rs`, `CachedMeta`): keys, teams, caps and billing;
//! - the *team-data cache* (this file): records, users and groups, as columns;
//! - the *page cache* (`http/pages.rs`): v2 answers kept for their next pages.
//!
//! How it works:
//! - **Load.** A team's first query starts a load, read whole in one snapshot. Queries
//!   that come while it runs wait for it where the store has no other way to answer
//!   ([`CacheConfig::wait_for_load`]); otherwise they are answered without the cache.
//! - **Catch-up.** A held team is told of changes ([`TeamCache::changed`]: a write
//!   through this process; [`TeamCache::notified`]: another process's, as the store
//!   learns of it) and reads only what changed since its position before its next query
//!   answers. Where the store cannot be sure it hears of every change (its
//!   [`TeamCache::set_trusted`] is off, or the team was last checked longer ago than the
//!   source's recheck interval) it checks before answering.
//! - **Budget.** [`CacheConfig::bytes`] bounds the columns held: the least recently used
//!   teams are dropped to make room; a team that alone exceeds it is answered without
//!   the cache.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use usage_core::eval::TeamData;

use super::shared::INLINE_ROWS;
use super::{CacheConfig, CacheStats, StoreError, StoreResult};

/// How a store reads a team's data and the changes since a position.
#[async_trait]
pub trait TeamSource: Send + Sync + 'static {
    /// What the held data reflects of the store (a change number, and what else the
    /// store needs to read the changes after it).
    type Position: Send + Sync + 'static;
    /// Changes read, ready to apply.
    type Changes: Send + 'static;

    /// Reads a team whole, in one snapshot; `None` when its columns outgrow `budget`
    /// bytes.
    async fn load(
        &self,
        team: &str,
        budget: usize,
    ) -> StoreResult<Option<(TeamData, Self::Position)>>;

    /// Reads, in one snapshot, what the team stores beyond `at`; `None` when nothing
    /// changed.
    async fn changes(&self, team: &str, at: &Self::Position) -> StoreResult<Option<Self::Changes>>;

    /// Whether applying `changes` moves the data (or only the position: then the data
    /// is not locked).
    fn moves_data(_changes: &Self::Changes) -> bool {
        true
    }

    /// Applies changes to the data and its position.
    fn apply(changes: Self::Changes, data: &mut TeamData, at: &mut Self::Position);
}

/// A team held in memory.
pub struct Held<P> {
    /// The team's data.
    pub data: RwLock<TeamData>,
    /// The position `data` is at; locked while catching up (one catch-up of a team at a
    /// time) and by whatever must keep the data from moving (SQLite's compaction).
    pub at: Arc<tokio::sync::Mutex<P>>,
    /// Changes told of (one more when just loaded, and whenever told may have missed
    /// some).
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

impl<P> Held<P> {
    fn stale(&self) -> bool {
        self.told.load(Ordering::SeqCst) != self.seen.load(Ordering::SeqCst)
    }

    fn tell(&self) {
        self.told.fetch_add(1, Ordering::SeqCst);
    }
}

impl<P: Send + Sync + 'static> Held<P> {
    /// Runs `f` over the team's data: on this thread when the team is small and not
    /// being written (see [`INLINE_ROWS`]), else on the blocking pool.
    pub async fn read<T: Send + 'static>(
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

enum Slot<P> {
    /// The first load runs; the receiver turns true when it ends.
    Loading(tokio::sync::watch::Receiver<bool>),
    Ready(Arc<Held<P>>),
    /// The team alone exceeds the budget.
    TooBig,
}

impl<P> Clone for Slot<P> {
    fn clone(&self) -> Self {
        match self {
            Slot::Loading(rx) => Slot::Loading(rx.clone()),
            Slot::Ready(h) => Slot::Ready(h.clone()),
            Slot::TooBig => Slot::TooBig,
        }
    }
}

/// The team-data cache of one store instance.
pub struct TeamCache<S: TeamSource> {
    source: S,
    config: CacheConfig,
    /// A held team is checked against the store before answering when it was last
    /// checked longer ago than this, whatever it was told (`None`: never).
    recheck: Option<Duration>,
    slots: Mutex<HashMap<String, Slot<S::Position>>>,
    /// The clock of uses.
    tick: AtomicU64,
    began: Instant,
    /// Whether every change reaches [`TeamCache::changed`] or [`TeamCache::notified`]:
    /// only then may a team that was told of none answer without asking the store.
    trusted: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
    loads: AtomicU64,
    catch_ups: AtomicU64,
    evictions: AtomicU64,
}

/// The heap bytes a team's data is counted as.
fn weight(d: &TeamData) -> u64 {
    d.usage_heap_bytes() as u64
}

impl<S: TeamSource> TeamCache<S> {
    /// A cache over `source`, holding up to `config.bytes` of columns (0: holds nothing);
    /// `recheck`: see [`TeamCache::set_trusted`]; `trusted`: whether every change is told
    /// from the start.
    pub fn new(
        source: S,
        config: CacheConfig,
        recheck: Option<Duration>,
        trusted: bool,
    ) -> Arc<TeamCache<S>> {
        Arc::new(TeamCache {
            source,
            config,
            recheck,
            slots: Mutex::new(HashMap::new()),
            tick: AtomicU64::new(0),
            began: Instant::now(),
            trusted: AtomicBool::new(trusted),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            loads: AtomicU64::new(0),
            catch_ups: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        })
    }

    /// How the store reads teams.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The budget in bytes (0: no cache).
    pub fn budget(&self) -> usize {
        self.config.bytes
    }

    /// Whether every change is told ([`TeamCache::changed`], [`TeamCache::notified`]);
    /// while it is not, a held team checks for changes before each query. Turning it on
    /// makes every held team check once (it may have missed changes meanwhile).
    pub fn set_trusted(&self, on: bool) {
        if on {
            self.all_stale();
        }
        self.trusted.store(on, Ordering::Release);
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot<S::Position>>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn millis(&self) -> u64 {
        self.began.elapsed().as_millis() as u64
    }

    fn next_tick(&self) -> u64 {
        self.tick.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            pushdowns: self.misses.load(Ordering::Relaxed),
            loads: self.loads.load(Ordering::Relaxed),
            catch_ups: self.catch_ups.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            bytes: self.held_bytes(&self.slots()),
        }
    }

    fn held_bytes(&self, slots: &HashMap<String, Slot<S::Position>>) -> u64 {
        slots
            .values()
            .map(|s| match s {
                Slot::Ready(h) => h.bytes.load(Ordering::Relaxed),
                _ => 0,
            })
            .sum()
    }

    /// Every team held now.
    pub fn held_teams(&self) -> Vec<(String, Arc<Held<S::Position>>)> {
        self.slots()
            .iter()
            .filter_map(|(t, s)| match s {
                Slot::Ready(h) => Some((t.clone(), h.clone())),
                _ => None,
            })
            .collect()
    }

    /// Drops every team (the store closes).
    pub fn clear(&self) {
        self.slots().clear();
    }

    /// The team's data, current, to answer from; `None`: answer without the cache (it
    /// holds nothing, the first load runs and queries do not wait for it, or the team
    /// does not fit). A team not held yet starts loading.
    ///
    /// # Errors
    /// When a held team's changes cannot be read.
    pub async fn held(self: &Arc<Self>, team: &str) -> StoreResult<Option<Arc<Held<S::Position>>>> {
        if self.config.bytes == 0 {
            return Ok(None);
        }
        // A failed load leaves no slot; a waiting query tries again once, then is
        // answered without the cache.
        for _ in 0..2 {
            match self.slot(team) {
                Slot::Ready(h) => {
                    h.used.store(self.next_tick(), Ordering::Relaxed);
                    if h.stale() || self.must_check(&h) {
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
        self.misses.fetch_add(1, Ordering::Relaxed);
        Ok(None)
    }

    /// The team's slot, starting its load when it has none.
    fn slot(self: &Arc<Self>, team: &str) -> Slot<S::Position> {
        let mut slots = self.slots();
        if let Some(s) = slots.get(team) {
            return s.clone();
        }
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

    /// Whether a team told of no change must still ask the store.
    fn must_check(&self, h: &Held<S::Position>) -> bool {
        !self.trusted.load(Ordering::Acquire)
            || self.recheck.is_some_and(|r| {
                self.millis()
                    .saturating_sub(h.checked.load(Ordering::Acquire))
                    > r.as_millis() as u64
            })
    }

    /// Loads a team and puts it in its slot (or marks it too large, or clears the slot
    /// when the load failed, so that a later query tries again).
    async fn load(&self, team: &str) {
        let began = Instant::now();
        let loaded = self.source.load(team, self.config.bytes).await;
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
                    at: Arc::new(tokio::sync::Mutex::new(at)),
                    // Changes that came while loading may have been missed: check first.
                    told: AtomicU64::new(1),
                    seen: AtomicU64::new(0),
                    prefetching: AtomicBool::new(false),
                    checked: AtomicU64::new(self.millis()),
                    used: AtomicU64::new(self.next_tick()),
                });
                slots.insert(team.to_string(), Slot::Ready(held));
                self.loads.fetch_add(1, Ordering::Relaxed);
                self.keep_to_budget(&mut slots, team);
            }
            Ok(None) => {
                tracing::info!(
                    team,
                    budget = self.config.bytes,
                    "a team exceeds the cache's budget: its queries are answered without it"
                );
                slots.insert(team.to_string(), Slot::TooBig);
            }
            Err(e) => {
                tracing::warn!(team, error = %e, "loading a team into the cache failed");
                slots.remove(team);
            }
        }
    }

    /// Reads what changed since the team's position and applies it.
    ///
    /// # Errors
    /// When the changes cannot be read.
    pub async fn catch_up(&self, team: &str, h: &Arc<Held<S::Position>>) -> StoreResult<()> {
        let mut at = h.at.clone().lock_owned().await;
        // What was told of and acknowledged before the snapshot below is read now; a
        // change told of from here on leaves the team stale for the next catch-up.
        let told = h.told.load(Ordering::SeqCst);
        let began = self.millis();
        if let Some(changes) = self.source.changes(team, &at).await? {
            let held = h.clone();
            let moved = S::moves_data(&changes);
            let (bytes, back) = tokio::task::spawn_blocking(move || {
                let mut at = at;
                if moved {
                    let mut d = held.data.write().unwrap_or_else(PoisonError::into_inner);
                    S::apply(changes, &mut d, &mut at);
                    (Some(weight(&d)), at)
                } else {
                    S::apply(changes, &mut TeamData::new(), &mut at);
                    (None, at)
                }
            })
            .await
            .map_err(|e| StoreError::Internal(format!("a cache catch-up task failed: {e}")))?;
            at = back;
            if let Some(b) = bytes {
                h.bytes.store(b, Ordering::Relaxed);
                self.catch_ups.fetch_add(1, Ordering::Relaxed);
            }
        }
        h.checked.store(began, Ordering::Release);
        h.seen.store(told, Ordering::SeqCst);
        drop(at);
        let mut slots = self.slots();
        if matches!(slots.get(team), Some(Slot::Ready(x)) if Arc::ptr_eq(x, h)) {
            self.keep_to_budget(&mut slots, team);
        }
        Ok(())
    }

    /// Drops the least recently used teams (other than `keep`) until the held columns fit
    /// the budget; `keep` alone over it is marked too large.
    fn keep_to_budget(&self, slots: &mut HashMap<String, Slot<S::Position>>, keep: &str) {
        while self.held_bytes(slots) > self.config.bytes as u64 {
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

    /// A write through this process committed: the team answers it from its next query.
    pub fn changed(&self, team: &str) {
        if let Some(Slot::Ready(h)) = self.slots().get(team) {
            h.tell();
        }
    }

    /// Another process changed the team: it is stale, and a catch-up starts in the
    /// background (one at a time), so that its next query finds the change read.
    pub fn notified(self: &Arc<Self>, team: &str) {
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

    /// Every held team may have missed a change.
    pub fn all_stale(&self) {
        for s in self.slots().values() {
            if let Slot::Ready(h) = s {
                h.tell();
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
