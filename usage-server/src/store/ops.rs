//! What a server does with a store besides answering requests ([`StoreOps`]): migrations,
//! health, picking up other processes' changes, the shared rate buckets, scans for
//! unreadable rows, figures for `/metrics`, and closing. Every type here is the same for
//! every store: the HTTP layer and the CLI never name a backend's own.

use std::time::Duration;

use async_trait::async_trait;

use super::{StoreResult, UnreadableRow};
use crate::auth::rate::RateConfig;

/// The answer of [`StoreOps::take_token`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    /// The store keeps no rate buckets: each process limits its own requests.
    NotShared,
    /// A token of the key's shared bucket was taken: the request may go on.
    Granted,
    /// The key's shared bucket is empty: a token is free after this wait.
    Wait(Duration),
}

/// How much memory a store may give to the teams' data it holds for queries (the
/// team-data cache of the SQLite and PostgreSQL stores; the memory store holds every team
/// anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// The budget, in bytes, of the teams' columns held; 0 turns the cache off (every
    /// query is pushed down to SQL on PostgreSQL, reads its team on SQLite).
    pub bytes: usize,
    /// Whether a query waits for its team's first load (tests; always on SQLite).
    /// Otherwise, as a server runs, PostgreSQL pushes queries down to SQL while the load
    /// runs.
    pub wait_for_load: bool,
}

impl CacheConfig {
    /// No cache (the store of the CLI's commands): every query is pushed down to SQL, or
    /// reads its team.
    pub const OFF: CacheConfig = CacheConfig {
        bytes: 0,
        wait_for_load: false,
    };

    /// Every team read is held, and queries wait for their team's load (tests,
    /// embedding).
    pub const ALL: CacheConfig = CacheConfig {
        bytes: usize::MAX,
        wait_for_load: true,
    };

    /// The default budget of `serve`: a quarter of the machine's memory (`MemTotal` of
    /// `/proc/meminfo`), or 1 GiB where that cannot be read.
    pub fn default_bytes() -> usize {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
            })
            .map_or(1 << 30, |kib| kib * 1024 / 4)
    }
}

/// What a store's cache of teams' data has done since the store opened (`/metrics`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    /// Queries answered from memory.
    pub hits: u64,
    /// Queries answered without the cache (team loading or too large): pushed down to SQL
    /// on PostgreSQL, from a read of the team for the one query on SQLite.
    pub pushdowns: u64,
    /// Teams loaded.
    pub loads: u64,
    /// Catch-ups that read changes.
    pub catch_ups: u64,
    /// Teams dropped to keep to the budget.
    pub evictions: u64,
    /// Bytes of columns held now.
    pub bytes: u64,
}

/// The operational side of a store. `health`, `migrate` and `close` are required; every
/// other method has the answer of a store without the feature.
#[async_trait]
pub trait StoreOps: Send + Sync {
    /// Whether the store answers (`/healthz`).
    async fn health(&self) -> StoreResult<()>;
    /// Applies the schema migrations not applied yet; returns how many it applied.
    async fn migrate(&self) -> StoreResult<u32>;
    /// Picks up changes other processes made (admin commands on a shared store).
    async fn refresh(&self) -> StoreResult<()> {
        Ok(())
    }
    /// The store's change counter: a number that moves whenever any process writes to the
    /// store, read without touching the data. `None` (the default): the store has no
    /// cheap counter, so nothing may cache its answers ([`super::cached::CachedMeta`] then
    /// reads through).
    async fn change_version(&self) -> StoreResult<Option<i64>> {
        Ok(None)
    }
    /// A number that moves with every write of one team's records, users and groups, by
    /// any process, where [`StoreOps::change_version`] does not (PostgreSQL's counts the
    /// metadata only). `None` (the default): the change counter moves with them too.
    /// Together they say whether an answer computed earlier still holds (`v2` pages).
    async fn team_version(&self, _team: &str) -> StoreResult<Option<i64>> {
        Ok(None)
    }
    /// Loads every team's data into memory where the store caches it, and learns of the
    /// stored rows that cannot be read ([`StoreOps::unreadable_count`]).
    async fn preload(&self) -> StoreResult<()> {
        Ok(())
    }
    /// Every stored record row that cannot be read (contract section 11), found by a scan
    /// of the whole store, team by team (`usage-server check`). Such rows stay in place;
    /// queries answer without them.
    async fn unreadable_rows(&self) -> StoreResult<Vec<UnreadableRow>> {
        Ok(Vec::new())
    }
    /// How many unreadable rows this process knows of: those met since it opened the
    /// store (every team is read at [`StoreOps::preload`]) and by a scan (`/healthz`).
    fn unreadable_count(&self) -> u64 {
        0
    }
    /// Takes one token of a key's rate bucket shared by every server instance of the
    /// store (section 9: one limit per key however many instances serve it).
    /// [`Token::NotShared`] (the default): the store has no shared buckets.
    async fn take_token(
        &self,
        _team: &str,
        _key_id: &str,
        _rate: RateConfig,
    ) -> StoreResult<Token> {
        Ok(Token::NotShared)
    }
    /// Records held per kind (users, groups and every usage kind), for `GET /metrics`:
    /// exact where the store holds its teams in memory, an estimate where it does not
    /// (PostgreSQL). Empty when the store cannot tell.
    async fn record_counts(&self) -> StoreResult<Vec<(&'static str, u64)>> {
        Ok(Vec::new())
    }
    /// What the store's team-data cache has done, where it has one with a budget (SQLite
    /// and PostgreSQL).
    fn cache_stats(&self) -> Option<CacheStats> {
        None
    }
    /// Flushes and closes the store; later calls fail with
    /// [`super::StoreError::Unavailable`].
    async fn close(&self) -> StoreResult<()>;
}
