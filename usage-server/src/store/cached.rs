//! [`CachedMeta`]: a store in front of another that answers the per-request metadata reads
//! (keys by hash, teams, caps, billing) from memory, so an authenticated request does not
//! read the store file (issue 15, point 3).
//!
//! Freshness comes from the inner store's change counter ([`StoreOps::change_version`]),
//! which moves on every write of any process:
//!
//! - [`StoreOps::refresh`] (a running server's poller, every
//!   [`crate::http::Config::poll_interval`], 250 ms by default) reads the counter first;
//!   when it moved, every cache is dropped; then the inner store's own refresh runs.
//! - A cached answer is used only while the last successful counter check began less than
//!   `max_age` ([`MAX_AGE`], 1 s) ago. When nobody polls (a CLI command, an embedding that
//!   never refreshes), when polling fails or stalls, or when the store has no counter,
//!   every call reads through to the inner store, exactly as without the cache. So a
//!   change made by another process (a CLI `key revoke`, a cap, a `billing` import) is
//!   seen within `max_age`, typically within one poll interval.
//! - A write made through this store drops the caches it affects before it returns, so
//!   the process reads its own writes at once.
//! - A generation number makes invalidation race-free: an answer read from the inner
//!   store is cached only if no invalidation happened since the read began.
//!
//! Unknown keys are cached too (a flood of made-up keys must not read the file per
//! request), in a set of at most [`MAX_UNKNOWN_KEYS`] hashes that is emptied when full; the
//! other maps are bounded the same way.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use usage_core::credits::{Caps, Terms, UserCredits};
use usage_core::load::Batch;
use usage_core::plan::{AgentPlan, AnalyticsPlan, CapAction, CapScope, Limits, UserPagePlan};
use usage_core::schema::records::{BILLING, RecordKind};
use usage_core::time::Timestamp;
use usage_core::wire::{AgentAnalyticsResponse, AnalyticsResponse, UserPageAnalyticsResponse};

use super::webhooks::{Attempt, Delivery, Outgoing, Webhook, WebhookStore};
use super::{
    AuditEntry, Billing, BillingStore, CacheStats, CapStore, KeyInfo, KeyListing, KeyRecord,
    NewTeam, RecordStore, RecordStream, Store, StoreOps, StoreResult, Team, TeamStore, Token,
    UnreadableRow,
};
use crate::auth::rate::RateConfig;

/// How old the last change-counter check may be for cached answers to be used: the bound
/// on how late a change of another process is seen.
pub const MAX_AGE: Duration = Duration::from_secs(1);

/// At most this many unknown key hashes are remembered; the set is emptied when full.
pub const MAX_UNKNOWN_KEYS: usize = 4096;

/// At most this many entries in each of the other maps (keys, caps, billing); a map is
/// emptied when full. Real stores stay far below it; it only bounds memory.
pub const MAX_ENTRIES: usize = 65_536;

/// The cached answers.
#[derive(Default)]
struct Caches {
    /// Bumped by every invalidation; an answer read before a bump is not stored.
    generation: u64,
    keys: HashMap<[u8; 32], KeyInfo>,
    unknown: HashSet<[u8; 32]>,
    teams: Option<Vec<Team>>,
    caps: HashMap<(String, CapScope), Option<i64>>,
    /// Every cap of a team.
    team_caps: HashMap<String, Caps>,
    billing: HashMap<String, Billing>,
}

impl Caches {
    fn invalidate_all(&mut self) {
        let generation = self.generation + 1;
        *self = Caches {
            generation,
            ..Caches::default()
        };
    }
}

/// What a lookup found.
enum Lookup<T> {
    /// The cached answer.
    Hit(T),
    /// Not cached: read it, then store it if the generation is still this one.
    Miss(u64),
    /// The caches may not be used now: read through.
    Bypass,
}

/// Inserts into a bounded map, emptying it first when full.
fn bounded_insert<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>, k: K, v: V) {
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    map.insert(k, v);
}

/// A store that answers keys, teams, caps and billing from memory while the inner store's
/// change counter is polled; everything else is passed through.
pub struct CachedMeta {
    inner: Arc<dyn Store>,
    max_age: Duration,
    /// The origin of `checked`.
    base: Instant,
    /// Nanoseconds after `base`, plus one, of when the last successful counter check
    /// began; 0: never.
    checked: AtomicU64,
    /// The counter at the last check.
    seen: Mutex<Option<i64>>,
    closed: AtomicBool,
    caches: Mutex<Caches>,
    /// Metadata reads passed to the inner store (misses and read-throughs).
    inner_reads: AtomicU64,
}

impl CachedMeta {
    /// Wraps `inner`; cached answers are used while the last counter check is younger
    /// than `max_age` ([`MAX_AGE`] in servers; nothing is cached before the first
    /// [`StoreOps::refresh`]).
    pub fn new(inner: Arc<dyn Store>, max_age: Duration) -> CachedMeta {
        CachedMeta {
            inner,
            max_age,
            base: Instant::now(),
            checked: AtomicU64::new(0),
            seen: Mutex::new(None),
            closed: AtomicBool::new(false),
            caches: Mutex::new(Caches::default()),
            inner_reads: AtomicU64::new(0),
        }
    }

    /// How many metadata reads (keys, teams, caps, billing) went to the inner store.
    pub fn inner_reads(&self) -> u64 {
        self.inner_reads.load(Ordering::Relaxed)
    }

    /// How many unknown key hashes are remembered now.
    pub fn unknown_keys_cached(&self) -> usize {
        self.lock().unknown.len()
    }

    fn lock(&self) -> MutexGuard<'_, Caches> {
        // A panic while holding the lock leaves at worst a partly filled map of correct
        // answers; keep going.
        self.caches.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn mark(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1) + 1
    }

    /// Whether cached answers may be used now.
    fn usable(&self) -> bool {
        if self.closed.load(Ordering::Acquire) {
            return false;
        }
        let checked = self.checked.load(Ordering::Acquire);
        checked != 0 && self.mark().saturating_sub(checked) < self.max_age.as_nanos() as u64
    }

    fn lookup<T>(&self, get: impl FnOnce(&Caches) -> Option<T>) -> Lookup<T> {
        if !self.usable() {
            return Lookup::Bypass;
        }
        let c = self.lock();
        match get(&c) {
            Some(v) => Lookup::Hit(v),
            None => Lookup::Miss(c.generation),
        }
    }

    /// A cached answer, else `load`'s, stored by `put` unless an invalidation came
    /// between.
    async fn cached<T: Clone>(
        &self,
        get: impl FnOnce(&Caches) -> Option<T>,
        load: impl Future<Output = StoreResult<T>>,
        put: impl FnOnce(&mut Caches, T),
    ) -> StoreResult<T> {
        let generation = match self.lookup(get) {
            Lookup::Hit(v) => return Ok(v),
            Lookup::Miss(g) => Some(g),
            Lookup::Bypass => None,
        };
        self.inner_reads.fetch_add(1, Ordering::Relaxed);
        let v = load.await?;
        if let Some(g) = generation {
            let mut c = self.lock();
            if c.generation == g {
                put(&mut c, v.clone());
            }
        }
        Ok(v)
    }

    /// Drops what `drop_some` clears, and makes in-flight reads not store their answers.
    fn invalidate(&self, drop_some: impl FnOnce(&mut Caches)) {
        let mut c = self.lock();
        c.generation += 1;
        drop_some(&mut c);
    }

    fn invalidate_all(&self) {
        self.lock().invalidate_all();
    }
}

/// Implements a store trait for [`CachedMeta`]: the methods written out in `impl`, and
/// those listed under `forward` passed to the inner store as they are. Under
/// `clippy::missing_trait_methods` a method a trait gains fails the build until it is
/// written or listed here, where a default body would silently answer instead of the
/// inner store.
macro_rules! delegate {
    (
        impl $trait:ident { $($own:tt)* }
        forward { $(async fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)* }
        $(forward sync { $(fn $sname:ident(&self) -> $sret:ty;)* })?
    ) => {
        #[async_trait]
        #[deny(clippy::missing_trait_methods)]
        impl $trait for CachedMeta {
            $($own)*
            $(
                async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    self.inner.$name($($arg),*).await
                }
            )*
            $($(
                fn $sname(&self) -> $sret {
                    self.inner.$sname()
                }
            )*)?
        }
    };
}

delegate! {
    impl TeamStore {
        async fn create_team(&self, team: NewTeam, by: &str, now: Timestamp) -> StoreResult<Team> {
            let r = self.inner.create_team(team, by, now).await;
            self.invalidate(|c| c.teams = None);
            r
        }

        async fn teams(&self) -> StoreResult<Vec<Team>> {
            self.cached(
                |c| c.teams.clone(),
                self.inner.teams(),
                |c, v| c.teams = Some(v),
            )
            .await
        }

        async fn insert_key(&self, key: KeyRecord, by: &str) -> StoreResult<()> {
            let hash = key.hash;
            let r = self.inner.insert_key(key, by).await;
            self.invalidate(|c| {
                c.unknown.remove(&hash);
            });
            r
        }

        async fn key_by_hash(&self, hash: &[u8; 32]) -> StoreResult<Option<KeyInfo>> {
            let hash = *hash;
            self.cached(
                |c| match c.keys.get(&hash) {
                    Some(k) => Some(Some(k.clone())),
                    None => c.unknown.contains(&hash).then_some(None),
                },
                self.inner.key_by_hash(&hash),
                |c, v| match v {
                    Some(k) => bounded_insert(&mut c.keys, hash, k),
                    None => {
                        if c.unknown.len() >= MAX_UNKNOWN_KEYS {
                            c.unknown.clear();
                        }
                        c.unknown.insert(hash);
                    }
                },
            )
            .await
        }

        async fn revoke_key(&self, key_id: &str, by: &str) -> StoreResult<()> {
            let r = self.inner.revoke_key(key_id, by).await;
            self.invalidate(|c| c.keys.retain(|_, k| k.key_id != key_id));
            r
        }
    }
    forward {
        async fn keys(&self, team: &str) -> StoreResult<Vec<KeyListing>>;
    }
}

delegate! {
    impl RecordStore {
        async fn ingest_by(
            &self,
            team: &str,
            batch: Batch,
            key_id: &str,
            now: Timestamp,
        ) -> StoreResult<u64> {
            let billing = std::ptr::eq(batch.kind, &BILLING);
            let r = self.inner.ingest_by(team, batch, key_id, now).await;
            if billing {
                self.invalidate(|c| {
                    c.billing.remove(team);
                });
            }
            r
        }

        async fn import(
            &self,
            team: &str,
            kind: &'static RecordKind,
            records: RecordStream,
            now: Timestamp,
        ) -> StoreResult<Option<u64>> {
            let r = self.inner.import(team, kind, records, now).await;
            if std::ptr::eq(kind, &BILLING) {
                self.invalidate(|c| {
                    c.billing.remove(team);
                });
            }
            r
        }

        async fn ingest(&self, team: &str, batch: Batch, now: Timestamp) -> StoreResult<u64> {
            self.ingest_by(team, batch, "-", now).await
        }
    }
    forward {
        async fn analytics(&self, team: &str, plan: &AnalyticsPlan, limits: &Limits) -> StoreResult<AnalyticsResponse>;
        async fn user_page(&self, team: &str, plan: &UserPagePlan) -> StoreResult<UserPageAnalyticsResponse>;
        async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse>;
        async fn has_group_id(&self, team: &str, group_id: &str) -> StoreResult<bool>;
        async fn has_user(&self, team: &str, email: &str) -> StoreResult<bool>;
        async fn groups_of(&self, team: &str, email: &str) -> StoreResult<Vec<String>>;
        async fn credits(&self, team: &str, terms: &Terms) -> StoreResult<Vec<UserCredits>>;
        async fn credits_of(&self, team: &str, email: &str, terms: &Terms) -> StoreResult<Option<UserCredits>>;
    }
}

delegate! {
    impl CapStore {
        async fn cap(&self, team: &str, scope: &CapScope) -> StoreResult<Option<i64>> {
            let k = (team.to_string(), scope.clone());
            self.cached(
                |c| c.caps.get(&k).copied(),
                self.inner.cap(team, scope),
                |c, v| bounded_insert(&mut c.caps, k.clone(), v),
            )
            .await
        }

        async fn change_cap(
            &self,
            team: &str,
            scope: &CapScope,
            action: CapAction,
            key_id: &str,
            now: Timestamp,
        ) -> StoreResult<()> {
            let r = self
                .inner
                .change_cap(team, scope, action, key_id, now)
                .await;
            self.invalidate(|c| {
                c.caps.remove(&(team.to_string(), scope.clone()));
                c.team_caps.remove(team);
            });
            r
        }

        async fn caps(&self, team: &str) -> StoreResult<Caps> {
            self.cached(
                |c| c.team_caps.get(team).cloned(),
                self.inner.caps(team),
                |c, v| bounded_insert(&mut c.team_caps, team.to_string(), v),
            )
            .await
        }
    }
    forward {
        async fn audit(&self, team: &str) -> StoreResult<Vec<AuditEntry>>;
    }
}

delegate! {
    impl WebhookStore {}
    forward {
        async fn add_webhook(&self, team: &str, hook: Webhook, by: &str, now: Timestamp) -> StoreResult<bool>;
        async fn webhooks(&self, team: &str) -> StoreResult<Vec<Webhook>>;
        async fn remove_webhook(&self, team: &str, id: &str, by: &str, now: Timestamp) -> StoreResult<bool>;
        async fn deliveries(&self, team: &str, id: &str) -> StoreResult<Vec<Delivery>>;
        async fn alerting_teams(&self) -> StoreResult<Vec<String>>;
        async fn claim(&self, team: &str, now: Timestamp, lease: Timestamp, limit: usize) -> StoreResult<Vec<Outgoing>>;
        async fn attempted(&self, team: &str, webhook_id: &str, event_id: &str, attempt: &Attempt, now: Timestamp) -> StoreResult<()>;
    }
}

delegate! {
    impl BillingStore {
        async fn billing(&self, team: &str) -> StoreResult<Billing> {
            self.cached(
                |c| c.billing.get(team).copied(),
                self.inner.billing(team),
                |c, v| bounded_insert(&mut c.billing, team.to_string(), v),
            )
            .await
        }
    }
    forward {}
}

delegate! {
    impl StoreOps {
        async fn migrate(&self) -> StoreResult<u32> {
            let r = self.inner.migrate().await;
            self.invalidate_all();
            r
        }

        /// Checks the change counter (dropping every cache when it moved), then refreshes
        /// the inner store.
        async fn refresh(&self) -> StoreResult<()> {
            let began = self.mark();
            let checked = match self.inner.change_version().await {
                Ok(Some(v)) => {
                    let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                    if *seen != Some(v) {
                        self.invalidate_all();
                        *seen = Some(v);
                    }
                    drop(seen);
                    self.checked.fetch_max(began, Ordering::AcqRel);
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            let refreshed = self.inner.refresh().await;
            checked.and(refreshed)
        }

        async fn close(&self) -> StoreResult<()> {
            self.closed.store(true, Ordering::Release);
            self.invalidate_all();
            self.inner.close().await
        }
    }
    forward {
        async fn health(&self) -> StoreResult<()>;
        async fn preload(&self) -> StoreResult<()>;
        async fn unreadable_rows(&self) -> StoreResult<Vec<UnreadableRow>>;
        async fn take_token(&self, team: &str, key_id: &str, rate: RateConfig) -> StoreResult<Token>;
        async fn record_counts(&self) -> StoreResult<Vec<(&'static str, u64)>>;
        async fn change_version(&self) -> StoreResult<Option<i64>>;
        async fn team_version(&self, team: &str) -> StoreResult<Option<i64>>;
    }
    forward sync {
        fn unreadable_count(&self) -> u64;
        fn cache_stats(&self) -> Option<CacheStats>;
    }
}

#[cfg(test)]
mod tests {
    use usage_core::JsonPath;
    use usage_core::load::parse_record;
    use usage_core::schema::{Permission, Plan};

    use super::*;
    use crate::store::StoreError;
    use crate::store::sqlite::SqliteStore;

    /// Long enough that no test depends on the machine's speed.
    const LONG: Duration = Duration::from_secs(3600);

    async fn sqlite(path: &std::path::Path) -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(path).await.unwrap())
    }

    async fn team(s: &dyn Store) -> String {
        crate::store::conformance::team(s, "t", Plan::Enterprise).await
    }

    async fn key(s: &dyn Store, team: &str, id: &str) -> [u8; 32] {
        let hash = crate::auth::hash_key(id);
        s.insert_key(
            KeyRecord {
                key_id: id.into(),
                team_id: team.into(),
                name: None,
                hash,
                permissions: vec![Permission::AnalyticsRead],
                created: Timestamp::now(),
            },
            "-",
        )
        .await
        .unwrap();
        hash
    }

    #[tokio::test]
    async fn conformance_through_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let n = std::sync::atomic::AtomicUsize::new(0);
        let dir_path = dir.path().to_path_buf();
        super::super::conformance::run_all(|| {
            let p = dir_path.join(format!("c{}.db", n.fetch_add(1, Ordering::Relaxed)));
            async move {
                let s = CachedMeta::new(sqlite(&p).await, LONG);
                // Cached answers in use from the start: only own writes invalidate.
                s.refresh().await.unwrap();
                Arc::new(s) as Arc<dyn Store>
            }
        })
        .await;
    }

    #[tokio::test]
    async fn another_process_revocation_is_seen_at_the_next_version_check() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("shared.db");
        another_process_changes(sqlite(&p).await, sqlite(&p).await).await;
    }

    /// The same with two PostgreSQL store instances on one database, whose counter moves
    /// with metadata writes only.
    #[tokio::test]
    async fn another_instance_revocation_is_seen_at_the_next_version_check_on_postgres() {
        let url = crate::testing::fresh_postgres();
        let open = || async { crate::store::open(&url).await.unwrap() };
        another_process_changes(open().await, open().await).await;
    }

    /// A key, a cap and billing changed by `admin` (another process or instance on the
    /// same store) are answered from `server`'s cache until its next counter check, then
    /// read anew.
    async fn another_process_changes(server: Arc<dyn Store>, admin: Arc<dyn Store>) {
        let server = CachedMeta::new(server, LONG);
        let t = team(admin.as_ref()).await;
        let hash = key(admin.as_ref(), &t, "key_a").await;
        server.refresh().await.unwrap();
        assert_eq!(server.inner_reads(), 0);
        let found = server.key_by_hash(&hash).await.unwrap().unwrap();
        assert_eq!(
            (found.key_id.as_str(), found.team_id.as_str()),
            ("key_a", t.as_str())
        );
        assert_eq!(server.inner_reads(), 1);
        // Cached: the second and third lookups do not read the file.
        for _ in 0..2 {
            assert_eq!(
                server.key_by_hash(&hash).await.unwrap().unwrap().key_id,
                "key_a"
            );
        }
        assert_eq!(server.inner_reads(), 1);
        admin.revoke_key("key_a", "-").await.unwrap();
        // Until the counter is checked the cache answers (the poller checks it every
        // 250 ms, and answers older than `max_age` are never used)...
        assert!(server.key_by_hash(&hash).await.unwrap().is_some());
        assert_eq!(server.inner_reads(), 1);
        // ...and the next check drops it.
        server.refresh().await.unwrap();
        assert_eq!(server.key_by_hash(&hash).await.unwrap(), None);
        assert_eq!(server.inner_reads(), 2);
        // A cap and a billing import of the other process likewise.
        assert_eq!(server.cap(&t, &CapScope::Team).await.unwrap(), None);
        let credits = server.billing(&t).await.unwrap().add_on_credits_available;
        admin
            .change_cap(
                &t,
                &CapScope::Team,
                CapAction::Set(70),
                "key_a",
                Timestamp::now(),
            )
            .await
            .unwrap();
        let rec = parse_record(
            &BILLING,
            &serde_json::json!({"add_on_credits_available": credits + 5}),
            &JsonPath::root(),
        )
        .unwrap();
        admin
            .import(
                &t,
                &BILLING,
                Box::new(std::iter::once(Ok(rec))),
                Timestamp::now(),
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(server.cap(&t, &CapScope::Team).await.unwrap(), None);
        assert_eq!(
            server.billing(&t).await.unwrap().add_on_credits_available,
            credits
        );
        server.refresh().await.unwrap();
        assert_eq!(server.cap(&t, &CapScope::Team).await.unwrap(), Some(70));
        assert_eq!(
            server.billing(&t).await.unwrap().add_on_credits_available,
            credits + 5
        );
        // Unchanged counter: the next check keeps the caches.
        let reads = server.inner_reads();
        server.refresh().await.unwrap();
        assert_eq!(server.cap(&t, &CapScope::Team).await.unwrap(), Some(70));
        assert_eq!(server.inner_reads(), reads);
    }

    #[tokio::test]
    async fn own_writes_are_read_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let s = CachedMeta::new(sqlite(&dir.path().join("own.db")).await, LONG);
        s.refresh().await.unwrap();
        assert!(s.teams().await.unwrap().is_empty());
        let t = team(&s).await;
        assert_eq!(s.teams().await.unwrap().len(), 1);
        // An unknown key remembered as unknown is found once inserted.
        let hash = crate::auth::hash_key("key_b");
        assert_eq!(s.key_by_hash(&hash).await.unwrap(), None);
        assert_eq!(s.key_by_hash(&hash).await.unwrap(), None);
        let reads = s.inner_reads();
        key(&s, &t, "key_b").await;
        assert_eq!(s.key_by_hash(&hash).await.unwrap().unwrap().key_id, "key_b");
        assert_eq!(s.key_by_hash(&hash).await.unwrap().unwrap().key_id, "key_b");
        assert_eq!(s.inner_reads(), reads + 1);
        s.revoke_key("key_b", "-").await.unwrap();
        assert_eq!(s.key_by_hash(&hash).await.unwrap(), None);
        let user = CapScope::User("a@x".into());
        assert_eq!(s.cap(&t, &CapScope::Team).await.unwrap(), None);
        assert_eq!(s.cap(&t, &user).await.unwrap(), None);
        s.change_cap(
            &t,
            &CapScope::Team,
            CapAction::Set(40),
            "key_b",
            Timestamp::now(),
        )
        .await
        .unwrap();
        assert_eq!(s.cap(&t, &CapScope::Team).await.unwrap(), Some(40));
        s.change_cap(
            &t,
            &CapScope::Team,
            CapAction::Clear,
            "key_b",
            Timestamp::now(),
        )
        .await
        .unwrap();
        assert_eq!(s.cap(&t, &CapScope::Team).await.unwrap(), None);
        let before = s.billing(&t).await.unwrap().add_on_credits_available;
        let rec = parse_record(
            &BILLING,
            &serde_json::json!({"add_on_credits_available": before + 9}),
            &JsonPath::root(),
        )
        .unwrap();
        s.ingest(
            &t,
            Batch {
                kind: &BILLING,
                records: vec![rec],
            },
            Timestamp::now(),
        )
        .await
        .unwrap();
        assert_eq!(
            s.billing(&t).await.unwrap().add_on_credits_available,
            before + 9
        );
    }

    #[tokio::test]
    async fn unknown_keys_are_cached_within_a_bound() {
        let dir = tempfile::tempdir().unwrap();
        let s = CachedMeta::new(sqlite(&dir.path().join("neg.db")).await, LONG);
        s.refresh().await.unwrap();
        let h = |i: usize| crate::auth::hash_key(&format!("usk_unknown_{i}"));
        assert_eq!(s.key_by_hash(&h(0)).await.unwrap(), None);
        assert_eq!(s.key_by_hash(&h(0)).await.unwrap(), None);
        assert_eq!((s.inner_reads(), s.unknown_keys_cached()), (1, 1));
        for i in 1..MAX_UNKNOWN_KEYS {
            s.key_by_hash(&h(i)).await.unwrap();
        }
        assert_eq!(s.unknown_keys_cached(), MAX_UNKNOWN_KEYS);
        // One more empties the set and starts over: memory stays bounded.
        s.key_by_hash(&h(MAX_UNKNOWN_KEYS)).await.unwrap();
        assert_eq!(s.unknown_keys_cached(), 1);
        assert_eq!(s.inner_reads(), MAX_UNKNOWN_KEYS as u64 + 1);
    }

    #[tokio::test]
    async fn without_a_recent_version_check_every_read_goes_through() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("through.db");
        // Never refreshed (a CLI command): nothing is cached.
        let s = CachedMeta::new(sqlite(&p).await, LONG);
        let t = team(&s).await;
        let hash = key(&s, &t, "key_c").await;
        for _ in 0..3 {
            assert!(s.key_by_hash(&hash).await.unwrap().is_some());
        }
        assert_eq!(s.inner_reads(), 3);
        // Checked, but answers may be no older than zero: nothing is cached either.
        let s = CachedMeta::new(sqlite(&p).await, Duration::ZERO);
        s.refresh().await.unwrap();
        for _ in 0..3 {
            assert!(s.key_by_hash(&hash).await.unwrap().is_some());
        }
        assert_eq!(s.inner_reads(), 3);
        // A store without a change counter is never cached.
        let m = CachedMeta::new(Arc::new(crate::store::memory::MemoryStore::new()), LONG);
        m.refresh().await.unwrap();
        assert_eq!(m.change_version().await.unwrap(), None);
        let t = team(&m).await;
        let hash = key(&m, &t, "key_d").await;
        m.key_by_hash(&hash).await.unwrap();
        m.key_by_hash(&hash).await.unwrap();
        assert_eq!(m.inner_reads(), 2);
        // Closed: the cache does not answer for the closed store.
        let s = CachedMeta::new(sqlite(&p).await, LONG);
        s.refresh().await.unwrap();
        assert!(s.key_by_hash(&hash).await.unwrap().is_none());
        s.close().await.unwrap();
        assert!(matches!(
            s.key_by_hash(&hash).await,
            Err(StoreError::Unavailable(_))
        ));
    }
}
