//! The columnar cache against the database and the in-memory evaluator: two instances on
//! one database over random interleavings of writes and reads, eviction under a tiny
//! budget, a team too large for it, and the conformance suite through the cache. (The
//! differential test of `tests.rs` compares cache, pushdown and evaluator over random
//! datasets and queries.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use usage_core::JsonPath;
use usage_core::eval::TeamData;
use usage_core::load::{Batch, parse_record};
use usage_core::plan::{AnalyticsPlan, Limits};
use usage_core::schema::records::AUTOCOMPLETE;
use usage_core::time::Timestamp;
use usage_core::wire::AnalyticsRequest;
use usage_core::wire::decode::decode;

use super::PgStore;
use super::cache::RECHECK;
use super::tests::{Schema, new_team};
use crate::store::CacheConfig;
use crate::store::RecordStore;
use crate::store::Store;

/// A cache that holds everything and lets queries wait for their team's first load.
const ALL: CacheConfig = CacheConfig {
    bytes: 1 << 30,
    wait_for_load: true,
};

/// xorshift64: the tests' random choices, from a seed printed on failure.
struct Rng(u64);

impl Rng {
    fn seeded() -> (Rng, u64) {
        let seed = std::env::var("CACHE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    | 1
            });
        (Rng(seed), seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// `n` autocomplete records over few identities (3 developers, 6 hours, 2 languages), so
/// that later records often replace earlier ones.
fn batch(rng: &mut Rng, n: usize) -> Batch {
    let records = (0..n)
        .map(|_| {
            let language = ["go", "rust"][rng.below(2) as usize];
            let r = serde_json::json!({
                "api_key": format!("k{}", rng.below(3)),
                "hour": format!("2025-03-01T{:02}:00:00Z", rng.below(6)),
                "language": language,
                "ide": "vscode",
                "version": "1.0",
                "num_acceptances": rng.below(50),
                "num_lines_accepted": rng.below(9),
                "num_bytes_accepted": rng.below(400),
            });
            parse_record(&AUTOCOMPLETE, &r, &JsonPath::root()).unwrap()
        })
        .collect();
    Batch {
        kind: &AUTOCOMPLETE,
        records,
    }
}

/// Sums and counts by developer and language: every record changes the answer.
fn plan() -> AnalyticsPlan {
    let body = serde_json::json!({"query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [
            {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "a"},
            {"field": "num_bytes_accepted", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "b"},
            {"field": "ide", "aggregation_function": "QUERY_AGGREGATION_COUNT", "name": "n"}],
        "aggregations": [{"field": "api_key", "name": "k"}, {"field": "language", "name": "l"}]}]});
    let req = decode::<AnalyticsRequest>(body.to_string().as_bytes())
        .unwrap()
        .request;
    usage_core::validate::analytics(&req, &Limits::default()).unwrap()
}

/// Ingests through `store` and applies the same batch to the model.
async fn write(store: &PgStore, team: &str, model: &mut TeamData, b: Batch, i: usize) {
    let now = Timestamp(1_746_000_000_000_000 + i as i64 * 1_000_000);
    let prepared = model.prepare(&b, now).unwrap().into_owned();
    model.apply(&prepared);
    store.ingest(team, b, now).await.unwrap();
}

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

/// Teams answer alike from a cache holding all of them, from one whose budget holds
/// about two (least recently used dropped) and from SQL alone, over random queries
/// across the teams with writes between them; then a budget below one team: every
/// query is pushed down, with the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_under_a_tiny_budget_keeps_the_answers() {
    let schema = Schema::new("evict").await;
    let sql = PgStore::open(&schema.url()).await.unwrap();
    let (mut rng, seed) = Rng::seeded();
    let mut teams = Vec::new();
    for t in 0..6 {
        let team = new_team(&sql).await;
        let mut model = TeamData::new();
        write(&sql, &team, &mut model, batch(&mut rng, 200 + t * 50), 0).await;
        teams.push((team, model));
    }
    let plan = plan();
    let limits = Limits::default();
    // One team's columns, as the cache counts them.
    let probe = PgStore::open_with(&schema.url(), ALL).await.unwrap();
    probe.analytics(&teams[0].0, &plan, &limits).await.unwrap();
    let one = probe.cache_stats().bytes as usize;
    assert!(one > 0);
    let tiny = PgStore::open_with(
        &schema.url(),
        CacheConfig {
            bytes: one * 5 / 2,
            wait_for_load: true,
        },
    )
    .await
    .unwrap();
    for step in 0..300 {
        let i = rng.below(teams.len() as u64) as usize;
        let (team, model) = &mut teams[i];
        let acked = if rng.below(5) == 0 {
            let via = if rng.below(2) == 0 { &tiny } else { &sql };
            write(via, team, model, batch(&mut rng, 5), step + 1).await;
            Some(Instant::now())
        } else {
            None
        };
        let want = model.analytics(&plan, &limits).unwrap();
        loop {
            let start = Instant::now();
            let got = tiny.analytics(team, &plan, &limits).await.unwrap();
            if got == want {
                break;
            }
            // A write through the other instance: read within RECHECK at the latest.
            let since = acked.map(|a| start.duration_since(a));
            assert!(
                since.is_some_and(|s| s < RECHECK),
                "seed {seed}, step {step}: {got:?} is not {want:?} ({since:?} after the write)"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            sql.analytics(team, &plan, &limits).await.unwrap(),
            want,
            "seed {seed}, step {step}"
        );
    }
    let stats = tiny.cache_stats();
    assert!(stats.evictions > 10, "seed {seed}: {stats:?}");
    assert!(stats.hits >= 300, "seed {seed}: {stats:?}");
    assert!(
        stats.bytes as usize <= one * 5 / 2,
        "seed {seed}: {stats:?} over the budget"
    );

    let none = PgStore::open_with(
        &schema.url(),
        CacheConfig {
            bytes: one / 4,
            wait_for_load: true,
        },
    )
    .await
    .unwrap();
    for (team, model) in &teams {
        for _ in 0..2 {
            assert_eq!(
                none.analytics(team, &plan, &limits).await.unwrap(),
                model.analytics(&plan, &limits).unwrap()
            );
        }
    }
    let stats = none.cache_stats();
    assert_eq!((stats.hits, stats.bytes), (0, 0), "{stats:?}");
    assert_eq!(stats.pushdowns, 12, "{stats:?}");
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
