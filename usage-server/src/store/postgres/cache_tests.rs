//! The columnar cache against the database and the in-memory evaluator: two instances on
//! one database over random interleavings of writes and reads, eviction under a tiny
//! budget, a team too large for it, and the conformance suite through the cache. (The
//! differential test of `tests.rs` compares cache, pushdown and evaluator over random
//! datasets and queries.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use usage_core::eval::TeamData;
use usage_core::plan::Limits;

use super::PgStore;
use super::cache::RECHECK;
use super::tests::{Schema, new_team};
use crate::store::CacheConfig;
use crate::store::RecordStore;
use crate::store::Store;
use crate::store::team_cache::tests::{Rng, batch, eviction_keeps_the_answers, plan, write};

/// A cache that holds everything and lets queries wait for their team's first load.
const ALL: CacheConfig = CacheConfig::ALL;

/// Two cached instances on one database, 1,000 random steps: a write through either, then
/// a read through either. Every answer is the state after some acknowledged write, never
/// older than one the same instance answered before; the writer reads its own write at
/// once; the other instance reads it in every read that starts [`RECHECK`] after the write
/// was acknowledged (whatever the notifications did).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_one_instance_is_read_on_the_other_within_a_second() {
    let schema = Schema::new("cache2").await;
    let stores = [
        PgStore::open_with(&schema.url(), ALL).await.unwrap(),
        PgStore::open_with(&schema.url(), ALL).await.unwrap(),
    ];
    let team = new_team(&stores[0]).await;
    let (mut rng, seed) = Rng::seeded();
    let plan = plan();
    let limits = Limits::default();
    let mut model = TeamData::new();
    // The answer after each acknowledged write (the first: no write yet).
    let mut states = vec![model.analytics(&plan, &limits).unwrap()];
    // The newest state each instance has answered.
    let mut seen = [0usize; 2];
    let (mut at_once, mut later, mut slowest) = (0, 0, Duration::ZERO);
    for step in 0..1_000 {
        let (w, r) = (rng.below(2) as usize, rng.below(2) as usize);
        let n = 1 + rng.below(3) as usize;
        write(&stores[w], &team, &mut model, batch(&mut rng, n), step).await;
        let acked = Instant::now();
        states.push(model.analytics(&plan, &limits).unwrap());
        let now = states.len() - 1;
        let read = |seen: &mut [usize; 2], got: &usage_core::wire::AnalyticsResponse| {
            let j = (seen[r]..=now)
                .rev()
                .find(|&j| states[j] == *got)
                .unwrap_or_else(|| {
                    panic!(
                        "seed {seed}, step {step}: instance {r} answered no state since its \
                         last ({} of {now}): {got:?}",
                        seen[r]
                    )
                });
            seen[r] = j;
            j
        };
        let got = stores[r].analytics(&team, &plan, &limits).await.unwrap();
        let j = read(&mut seen, &got);
        if w == r {
            assert_eq!(
                j, now,
                "seed {seed}, step {step}: the writer reads its write"
            );
        }
        if j == now {
            at_once += 1;
        } else {
            loop {
                let start = Instant::now();
                let got = stores[r].analytics(&team, &plan, &limits).await.unwrap();
                if read(&mut seen, &got) == now {
                    slowest = slowest.max(acked.elapsed());
                    break;
                }
                assert!(
                    start.duration_since(acked) < RECHECK,
                    "seed {seed}, step {step}: a read that started {:?} after the write missed it",
                    start.duration_since(acked)
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            later += 1;
        }
    }
    eprintln!(
        "seed {seed}: {at_once} reads current at once, {later} after waiting (slowest {slowest:?})"
    );
    for s in &stores {
        let stats = s.cache_stats();
        assert_eq!(stats.loads, 1, "{stats:?}");
        assert_eq!(stats.pushdowns, 0, "{stats:?}");
        assert!(stats.catch_ups > 0, "{stats:?}");
    }
}

/// Eviction under a tiny budget keeps the answers (the test the SQLite store runs too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_under_a_tiny_budget_keeps_the_answers() {
    let schema = Schema::new("evict").await;
    let url = schema.url();
    eviction_keeps_the_answers(
        |cache| {
            let url = url.clone();
            async move { Arc::new(PgStore::open_with(&url, cache).await.unwrap()) as Arc<dyn Store> }
        },
        RECHECK,
    )
    .await;
}

/// While a team's first load runs, a server's query is answered by SQL; once loaded, from
/// memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_during_the_first_load_are_pushed_down() {
    let schema = Schema::new("cold").await;
    let store = PgStore::open_with(
        &schema.url(),
        CacheConfig {
            bytes: 1 << 30,
            wait_for_load: false,
        },
    )
    .await
    .unwrap();
    let team = new_team(&store).await;
    let (mut rng, _) = Rng::seeded();
    let mut model = TeamData::new();
    write(&store, &team, &mut model, batch(&mut rng, 300), 0).await;
    let (plan, limits) = (plan(), Limits::default());
    let want = model.analytics(&plan, &limits).unwrap();
    assert_eq!(store.analytics(&team, &plan, &limits).await.unwrap(), want);
    assert_eq!(store.cache_stats().pushdowns, 1);
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.cache_stats().loads == 0 {
        assert!(Instant::now() < deadline, "the load never ended");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(store.analytics(&team, &plan, &limits).await.unwrap(), want);
    let stats = store.cache_stats();
    assert_eq!((stats.hits, stats.pushdowns, stats.loads), (1, 1, 1));
}

/// The store contract, answered through the cache.
#[tokio::test]
async fn conformance_through_the_cache() {
    let schemas = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = schemas.clone();
    crate::store::conformance::run_all(move || {
        let schemas = schemas.clone();
        async move {
            let s = Schema::new("cconf").await;
            let store = PgStore::open_with(&s.url(), ALL).await.unwrap();
            schemas.lock().unwrap().push(s);
            Arc::new(store) as Arc<dyn Store>
        }
    })
    .await;
    drop(keep);
}
