//! The team-data cache on its own (a source in memory: when it asks the store) and the
//! helpers the stores' cache tests share: random batches, a query every record changes,
//! and eviction under a tiny budget, run on SQLite and PostgreSQL alike.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use usage_core::JsonPath;
use usage_core::eval::TeamData;
use usage_core::load::{Batch, parse_record};
use usage_core::plan::{AnalyticsPlan, Limits};
use usage_core::schema::Plan;
use usage_core::schema::records::AUTOCOMPLETE;
use usage_core::time::Timestamp;
use usage_core::wire::AnalyticsRequest;
use usage_core::wire::decode::decode;

use super::{TeamCache, TeamSource};
use crate::store::{CacheConfig, NewTeam, Store, StoreResult};

/// xorshift64: the tests' random choices, from a seed printed on failure.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// A generator seeded from `CACHE_SEED`, else the clock; returns the seed too.
    pub(crate) fn seeded() -> (Rng, u64) {
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

    /// A number below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// `n` autocomplete records over few identities (3 developers, 6 hours, 2 languages), so
/// that later records often replace earlier ones.
pub(crate) fn batch(rng: &mut Rng, n: usize) -> Batch {
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
pub(crate) fn plan() -> AnalyticsPlan {
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
pub(crate) async fn write(store: &dyn Store, team: &str, model: &mut TeamData, b: Batch, i: usize) {
    let now = Timestamp(1_746_000_000_000_000 + i as i64 * 1_000_000);
    let prepared = model.prepare(&b, now).unwrap().into_owned();
    model.apply(&prepared);
    store.ingest(team, b, now).await.unwrap();
}

/// A new team of `store`; returns its id.
async fn new_team(store: &dyn Store) -> String {
    let team = NewTeam {
        name: "t".into(),
        plan: Plan::Enterprise,
        seats: 1,
        credits_per_seat: 1,
        unique_name: false,
    };
    store.create_team(team, "-", Timestamp(0)).await.unwrap().id
}

/// Teams answer alike from a cache holding all of them, from one whose budget holds
/// about two (least recently used dropped) and from a store without a cache, over
/// random queries across the teams with writes through either instance between them;
/// then a budget below one team: every query is answered without the cache, with the
/// same answers. `open` opens an instance of one store with the cache given; a write
/// through the other instance is read within `within` of a refresh.
pub(crate) async fn eviction_keeps_the_answers<F, Fut>(open: F, within: Duration)
where
    F: Fn(CacheConfig) -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let plain = open(CacheConfig::OFF).await;
    let (mut rng, seed) = Rng::seeded();
    let mut teams = Vec::new();
    for t in 0..6 {
        let team = new_team(&*plain).await;
        let mut model = TeamData::new();
        write(&*plain, &team, &mut model, batch(&mut rng, 200 + t * 50), 0).await;
        teams.push((team, model));
    }
    let plan = plan();
    let limits = Limits::default();
    // One team's columns, as the cache counts them.
    let probe = open(CacheConfig::ALL).await;
    probe.analytics(&teams[0].0, &plan, &limits).await.unwrap();
    let one = probe.cache_stats().unwrap().bytes as usize;
    assert!(one > 0);
    let budget = one * 5 / 2;
    let tiny = open(CacheConfig {
        bytes: budget,
        wait_for_load: true,
    })
    .await;
    for step in 0..300 {
        let i = rng.below(teams.len() as u64) as usize;
        let (team, model) = &mut teams[i];
        let acked = if rng.below(5) == 0 {
            let via = if rng.below(2) == 0 { &tiny } else { &plain };
            write(&**via, team, model, batch(&mut rng, 5), step + 1).await;
            tiny.refresh().await.unwrap();
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
            let since = acked.map(|a| start.duration_since(a));
            assert!(
                since.is_some_and(|s| s < within),
                "seed {seed}, step {step}: {got:?} is not {want:?} ({since:?} after the write)"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            plain.analytics(team, &plan, &limits).await.unwrap(),
            want,
            "seed {seed}, step {step}"
        );
    }
    let stats = tiny.cache_stats().unwrap();
    assert!(stats.evictions > 10, "seed {seed}: {stats:?}");
    assert!(stats.hits >= 300, "seed {seed}: {stats:?}");
    assert!(
        stats.bytes as usize <= budget,
        "seed {seed}: {stats:?} over the budget"
    );

    let none = open(CacheConfig {
        bytes: one / 4,
        wait_for_load: true,
    })
    .await;
    for (team, model) in &teams {
        for _ in 0..2 {
            assert_eq!(
                none.analytics(team, &plan, &limits).await.unwrap(),
                model.analytics(&plan, &limits).unwrap()
            );
        }
    }
    let stats = none.cache_stats().unwrap();
    assert_eq!((stats.hits, stats.bytes), (0, 0), "{stats:?}");
    assert_eq!(stats.pushdowns, 12, "{stats:?}");
    for s in [plain, probe, tiny, none] {
        s.close().await.unwrap();
    }
}

/// A source in memory: each team's batches, its position the number applied; counts the
/// times the cache asked for changes.
#[derive(Default)]
struct Fake {
    batches: std::sync::Mutex<std::collections::HashMap<String, Vec<Batch>>>,
    asked: AtomicU64,
}

impl Fake {
    fn push(&self, team: &str, b: Batch) {
        let mut all = self.batches.lock().unwrap();
        all.entry(team.to_string()).or_default().push(b);
    }
}

#[async_trait]
impl TeamSource for Fake {
    type Position = usize;
    type Changes = (usize, Vec<Batch>);

    async fn load(&self, team: &str, budget: usize) -> StoreResult<Option<(TeamData, usize)>> {
        let all = self.batches.lock().unwrap();
        let batches = all.get(team).cloned().unwrap_or_default();
        let mut d = TeamData::new();
        for b in &batches {
            d.apply(b);
        }
        Ok((d.usage_heap_bytes() <= budget).then_some((d, batches.len())))
    }

    async fn changes(&self, team: &str, at: &usize) -> StoreResult<Option<(usize, Vec<Batch>)>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let all = self.batches.lock().unwrap();
        let batches = all.get(team).cloned().unwrap_or_default();
        Ok((batches.len() > *at).then(|| (batches.len(), batches[*at..].to_vec())))
    }

    fn apply(changes: (usize, Vec<Batch>), data: &mut TeamData, at: &mut usize) {
        for b in &changes.1 {
            data.apply(b);
        }
        *at = changes.0;
    }
}

/// The rows a held team answers with.
async fn rows(cache: &Arc<TeamCache<Fake>>, team: &str) -> usize {
    let held = cache.held(team).await.unwrap().expect("held");
    held.read(|d| Ok(d.usage_rows())).await.unwrap()
}

#[tokio::test]
async fn a_trusted_cache_asks_the_store_only_when_told() {
    let cache = TeamCache::new(Fake::default(), CacheConfig::ALL, None, true);
    let (mut rng, _) = Rng::seeded();
    cache.source().push("t", batch(&mut rng, 1));
    assert_eq!(rows(&cache, "t").await, 1);
    // Just loaded: checked once, as a change may have come during the load.
    assert_eq!(cache.source().asked.load(Ordering::SeqCst), 1);
    assert_eq!(rows(&cache, "t").await, 1);
    assert_eq!(cache.source().asked.load(Ordering::SeqCst), 1);
    // A change nobody told of is not seen…
    let mut b = batch(&mut rng, 1);
    b.records[0] = parse_record(
        &AUTOCOMPLETE,
        &serde_json::json!({"api_key": "other", "hour": "2025-03-02T00:00:00Z",
            "language": "go", "ide": "vscode", "version": "1.0", "num_acceptances": 1,
            "num_lines_accepted": 1, "num_bytes_accepted": 1}),
        &JsonPath::root(),
    )
    .unwrap();
    cache.source().push("t", b);
    assert_eq!(rows(&cache, "t").await, 1);
    // …until told: then read once.
    cache.changed("t");
    assert_eq!(rows(&cache, "t").await, 2);
    assert_eq!(rows(&cache, "t").await, 2);
    assert_eq!(cache.source().asked.load(Ordering::SeqCst), 2);
    let stats = cache.stats();
    assert_eq!(
        (stats.hits, stats.loads, stats.catch_ups, stats.pushdowns),
        (5, 1, 1, 0)
    );
}

#[tokio::test]
async fn an_untrusted_cache_asks_before_every_answer_and_a_recheck_after_its_interval() {
    let untrusted = TeamCache::new(Fake::default(), CacheConfig::ALL, None, false);
    for _ in 0..3 {
        assert_eq!(rows(&untrusted, "t").await, 0);
    }
    assert_eq!(untrusted.source().asked.load(Ordering::SeqCst), 3);
    untrusted.set_trusted(true);
    for _ in 0..3 {
        assert_eq!(rows(&untrusted, "t").await, 0);
    }
    // Trusted again: one check for what may have been missed, then none.
    assert_eq!(untrusted.source().asked.load(Ordering::SeqCst), 4);

    let recheck = Duration::from_millis(30);
    let cache = TeamCache::new(Fake::default(), CacheConfig::ALL, Some(recheck), true);
    rows(&cache, "t").await;
    rows(&cache, "t").await;
    let before = cache.source().asked.load(Ordering::SeqCst);
    tokio::time::sleep(recheck * 2).await;
    rows(&cache, "t").await;
    assert_eq!(cache.source().asked.load(Ordering::SeqCst), before + 1);
}

#[tokio::test]
async fn no_budget_holds_nothing_and_a_team_over_it_is_answered_without_the_cache() {
    let (mut rng, _) = Rng::seeded();
    let off = TeamCache::new(Fake::default(), CacheConfig::OFF, None, true);
    off.source().push("t", batch(&mut rng, 3));
    assert!(off.held("t").await.unwrap().is_none());
    assert_eq!(off.stats(), crate::store::CacheStats::default());

    // A budget that holds a team of one record.
    let source = Fake::default();
    source.push("small", batch(&mut rng, 1));
    source.push("big", batch(&mut rng, 50));
    let (one, _) = source.load("small", usize::MAX).await.unwrap().unwrap();
    let budget = CacheConfig {
        bytes: one.usage_heap_bytes(),
        wait_for_load: true,
    };
    let cache = TeamCache::new(source, budget, None, true);
    for _ in 0..2 {
        assert!(cache.held("big").await.unwrap().is_none());
    }
    assert_eq!(rows(&cache, "small").await, 1);
    let stats = cache.stats();
    assert_eq!(
        (stats.loads, stats.pushdowns, stats.hits, stats.bytes),
        (1, 2, 1, one.usage_heap_bytes() as u64)
    );
}
