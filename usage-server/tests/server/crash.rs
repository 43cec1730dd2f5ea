//! Kill -9 tests of the embedded store, and of the PostgreSQL store on Citus (the server
//! killed): SIGKILL during `import`, during
//! `Ingest`, and during compaction, 20 rounds each at random moments. After every kill the
//! store must open (`check` exits 0 and prints nothing), a server started on it must hold
//! every acknowledged write and every write in flight whole or not at all, and after the
//! last round its answers must equal, byte for byte, those of a fresh store loaded with
//! the same records by one `import`.
//!
//! Every write is told apart in the answers: the records a write adds carry a `version`
//! of their own (grouped by in one query), and its replacements of earlier records change
//! the sums grouped by language and by api_key. So a write half applied, lost, or applied
//! twice shows. The records and the planned kill times come from a seed printed at the
//! start of each test (`CRASH_SEED=N` repeats them; the scheduling of the processes
//! varies from run to run).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rusqlite::OptionalExtension;
use serde_json::{Value, json};
use usage_core::time::{MICROS_PER_HOUR, Timestamp};

use crate::process::{Fixture, Server, admin, cmd, fixture, fixture_on, ok};

const ROUNDS: usize = 20;

/// No rate limit gets in the way of the senders.
const FAST: [&str; 4] = ["--rate-per-minute", "100000000", "--rate-burst", "1000000"];

/// A compaction starts when a kind's log holds this many entries (`segments.rs`).
const COMPACT_ENTRIES: usize = 64;

/// A seeded generator, so that a failing run can be repeated.
struct Rng(usage_core::rng::SplitMix64);

impl Rng {
    fn seeded(test: &str) -> (Rng, u64) {
        let seed = std::env::var("CRASH_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{test}: seed {seed} (CRASH_SEED={seed} repeats the run)");
        (Rng(usage_core::rng::SplitMix64::new(seed)), seed)
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.0.below(hi - lo + 1)
    }

    fn index(&mut self, len: usize) -> usize {
        self.range(0, len as u64 - 1) as usize
    }

    fn fork(&mut self) -> Rng {
        Rng(usage_core::rng::SplitMix64::new(self.0.next_u64()))
    }
}

const LANGUAGES: [&str; 5] = ["GO", "RUST", "PYTHON", "JAVA", "TYPESCRIPT"];
const IDES: [&str; 3] = ["vscode", "jetbrains", "vim"];
/// Distinct hours the records spread over (from 2025-01-01).
const HOURS: u64 = 8_000;

/// An autocomplete record's identity, as small numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Id {
    user: u32,
    hour: u32,
    lang: u8,
    ide: u8,
    /// The write that first stored the identity.
    ver: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Vals {
    a: i64,
    l: i64,
    b: i64,
}

type Rec = (Id, Vals);

fn vals(rng: &mut Rng) -> Vals {
    Vals {
        a: rng.range(0, 1_000) as i64,
        l: rng.range(0, 5_000) as i64,
        b: rng.range(0, 100_000) as i64,
    }
}

fn api_key(id: &Id) -> String {
    format!("u{}", id.user)
}

fn version(id: &Id) -> String {
    format!("1.{}", id.ver)
}

fn record(r: &Rec) -> Value {
    let (id, v) = r;
    let start = Timestamp::parse_rfc3339("2025-01-01T00:00:00Z").unwrap();
    let hour = Timestamp(start.0 + i64::from(id.hour) * MICROS_PER_HOUR).to_rfc3339();
    json!({"api_key": api_key(id), "hour": hour, "language": LANGUAGES[usize::from(id.lang)],
           "ide": IDES[usize::from(id.ide)], "version": version(id), "num_acceptances": v.a,
           "num_lines_accepted": v.l, "num_bytes_accepted": v.b})
}

/// `n` records of identities new to the store (they carry version `ver`, which no other
/// write uses), of `users` api keys.
fn new_records(rng: &mut Rng, n: usize, ver: u32, users: u64) -> Vec<Rec> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let id = Id {
            user: rng.range(0, users - 1) as u32,
            hour: rng.range(0, HOURS - 1) as u32,
            lang: rng.index(LANGUAGES.len()) as u8,
            ide: rng.index(IDES.len()) as u8,
            ver,
        };
        if seen.insert(id) {
            out.push((id, vals(rng)));
        }
    }
    out
}

/// Up to `n` records replacing distinct identities of `owned` with new values.
fn replacing(rng: &mut Rng, owned: &[Id], n: usize) -> Vec<Rec> {
    if owned.is_empty() {
        return Vec::new();
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for _ in 0..n {
        let id = owned[rng.index(owned.len())];
        if seen.insert(id) {
            out.push((id, vals(rng)));
        }
    }
    out
}

/// The three grouped queries, as the test computes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Answers {
    /// Sum of num_acceptances, sum of num_lines_accepted, count.
    by_language: BTreeMap<String, [i64; 3]>,
    /// Sum of num_bytes_accepted, count.
    by_user: BTreeMap<String, [i64; 2]>,
    /// Sum of num_lines_accepted, count.
    by_version: BTreeMap<String, [i64; 2]>,
}

fn bump<const N: usize>(m: &mut BTreeMap<String, [i64; N]>, key: String, add: [i64; N]) {
    let e = m.entry(key.clone()).or_insert([0; N]);
    for (x, y) in e.iter_mut().zip(add) {
        *x += y;
    }
    if e[N - 1] == 0 {
        m.remove(&key);
    }
}

impl Answers {
    fn add(&mut self, id: &Id, v: &Vals, sign: i64) {
        bump(
            &mut self.by_language,
            LANGUAGES[usize::from(id.lang)].to_string(),
            [sign * v.a, sign * v.l, sign],
        );
        bump(&mut self.by_user, api_key(id), [sign * v.b, sign]);
        bump(&mut self.by_version, version(id), [sign * v.l, sign]);
    }

    /// The groups where `self` and `other` differ, at most 10 per query.
    fn diff(&self, other: &Answers) -> String {
        fn one<const N: usize>(
            name: &str,
            a: &BTreeMap<String, [i64; N]>,
            b: &BTreeMap<String, [i64; N]>,
            out: &mut String,
        ) {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).take(10) {
                out.push_str(&format!(
                    "\n  {name} {k}: stored {:?}, expected {:?}",
                    a.get(k),
                    b.get(k)
                ));
            }
        }
        let mut out = String::new();
        one("language", &self.by_language, &other.by_language, &mut out);
        one("api_key", &self.by_user, &other.by_user, &mut out);
        one("version", &self.by_version, &other.by_version, &mut out);
        out
    }
}

/// What the store must hold: the records by identity, after every write applied.
#[derive(Default)]
struct Model {
    map: HashMap<Id, Vals>,
}

impl Model {
    fn apply(&mut self, recs: &[Rec]) {
        for (id, v) in recs {
            self.map.insert(*id, *v);
        }
    }

    fn answers(&self) -> Answers {
        let mut a = Answers::default();
        for (id, v) in &self.map {
            a.add(id, v, 1);
        }
        a
    }

    /// The answers after `writes` on top of the model, whose answers are `base`; the
    /// writes must touch distinct identities (each its own, and none of another's).
    fn with(&self, base: &Answers, writes: &[&[Rec]]) -> Answers {
        let mut a = base.clone();
        for (id, v) in writes.iter().flat_map(|w| w.iter()) {
            if let Some(old) = self.map.get(id) {
                a.add(id, old, -1);
            }
            a.add(id, v, 1);
        }
        a
    }

    fn jsonl(&self) -> String {
        let mut out = String::new();
        for (id, v) in &self.map {
            out.push_str(&record(&(*id, *v)).to_string());
            out.push('\n');
        }
        out
    }
}

fn jsonl(recs: &[Rec]) -> String {
    let mut out = String::new();
    for r in recs {
        out.push_str(&record(r).to_string());
        out.push('\n');
    }
    out
}

fn queries(key: &str) -> Value {
    let q = |selections: Value, field: &str, name: &str| {
        json!({"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": selections,
               "aggregations": [{"field": field, "name": name}]})
    };
    let sum = |f: &str| json!({"field": f, "aggregation_function": "QUERY_AGGREGATION_SUM"});
    let count = json!({"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_COUNT"});
    json!({"service_key": key, "query_requests": [
        q(json!([sum("num_acceptances"), sum("num_lines_accepted"), count]), "language", "lang"),
        q(json!([sum("num_bytes_accepted"), count]), "api_key", "user"),
        q(json!([sum("num_lines_accepted"), count]), "version", "ver"),
    ]})
}

/// A server's answers to [`queries`]: parsed, and the body as sent.
async fn ask(server: &Server, key: &str) -> (Answers, String) {
    let res = reqwest::Client::new()
        .post(format!("{}/api/v1/Analytics", server.base))
        .header("content-type", "application/json")
        .body(queries(key).to_string())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v["queryResults"].as_array().map(Vec::len),
        Some(3),
        "{text}"
    );
    fn groups<const N: usize>(
        v: &Value,
        q: usize,
        name: &str,
        fields: [&str; N],
    ) -> BTreeMap<String, [i64; N]> {
        // A query that matches nothing may leave its items out.
        let items = &v["queryResults"][q]["responseItems"];
        items
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|it| {
                let item = &it["item"];
                let value = |f: &str| -> i64 {
                    item[f]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                        .unwrap_or_else(|| panic!("{f} of {item}"))
                };
                (item[name].as_str().unwrap().to_string(), fields.map(value))
            })
            .collect()
    }
    let answers = Answers {
        by_language: groups(
            &v,
            0,
            "lang",
            [
                "sum_num_acceptances",
                "sum_num_lines_accepted",
                "count_api_key",
            ],
        ),
        by_user: groups(&v, 1, "user", ["sum_num_bytes_accepted", "count_api_key"]),
        by_version: groups(&v, 2, "ver", ["sum_num_lines_accepted", "count_api_key"]),
    };
    (answers, text)
}

/// `check` after a kill: the store opens and has no unreadable part.
fn check_clean(store: &str, ctx: &str) {
    let (code, out, err) = admin(store, &["check"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "", ""),
        "{ctx}: `check` after the kill"
    );
}

fn import_args<'a>(f: &'a Fixture, file: &'a Path) -> [&'a str; 6] {
    [
        "import",
        "--team",
        &f.team,
        "--kind",
        "autocomplete",
        file.to_str().unwrap(),
    ]
}

/// The answers of a fresh store loaded with the model's records by one `import`.
async fn fresh_load(model: &Model) -> String {
    let f = fixture();
    let file = f.log.with_file_name("all.jsonl");
    std::fs::write(&file, model.jsonl()).unwrap();
    let done = ok(&f.store, &import_args(&f, &file));
    assert_eq!(
        done,
        json!({"kind": "autocomplete", "records": model.map.len()})
    );
    let s = Server::start(&f.store, &FAST, &f.log);
    let (answers, body) = ask(&s, &f.key).await;
    assert_eq!(answers, model.answers());
    s.kill9();
    body
}

/// After the last round: the crashed store answers exactly as a fresh load of the same
/// records does, byte for byte.
async fn same_as_fresh_load(server: &Server, key: &str, model: &Model, seed: u64) {
    let (answers, body) = ask(server, key).await;
    assert_eq!(answers, model.answers(), "seed {seed}");
    let fresh = fresh_load(model).await;
    assert_eq!(
        body, fresh,
        "seed {seed}: the crashed store against a fresh load"
    );
}

/// A team and a key on a fresh PostgreSQL store on the Citus cluster.
fn citus_fixture() -> Fixture {
    fixture_on(
        tempfile::tempdir().unwrap(),
        usage_server::testing::fresh_citus(),
    )
}

#[tokio::test]
async fn kill9_during_import_applies_the_whole_file_or_nothing() {
    kill9_during_import(fixture, 100_000).await;
}

/// The same on the PostgreSQL store on Citus (the server killed, not the database), with
/// smaller files.
#[tokio::test]
async fn kill9_during_import_on_citus_applies_the_whole_file_or_nothing() {
    kill9_during_import(citus_fixture, 20_000).await;
}

async fn kill9_during_import(fixture: fn() -> Fixture, lines: usize) {
    const USERS: u64 = 200;
    let (mut rng, seed) = Rng::seeded("kill9_during_import");
    let f = fixture();
    let dir = f.log.parent().unwrap().to_path_buf();

    // How long an import of this size takes here, into a scratch store; then the last
    // import that ran to its end (the machine's load changes as other tests run).
    let mut duration = {
        let scratch = fixture();
        let file = dir.join("measure.jsonl");
        std::fs::write(&file, jsonl(&new_records(&mut rng, lines, 0, USERS))).unwrap();
        let t = Instant::now();
        ok(&scratch.store, &import_args(&scratch, &file));
        t.elapsed()
    };
    eprintln!("an import of {lines} lines takes {duration:?}");

    let mut model = Model::default();
    let mut ids: Vec<Id> = Vec::new();
    let (mut finished, mut killed_applied, mut killed_absent) = (0, 0, 0);
    for round in 0..ROUNDS {
        let ctx = format!("seed {seed}, round {round}");
        let ver = round as u32 + 1;
        let mut recs = replacing(&mut rng, &ids, lines / 4);
        let fresh = new_records(&mut rng, lines - recs.len(), ver, USERS);
        recs.extend(fresh.iter().copied());
        let file = dir.join(format!("round{round}.jsonl"));
        std::fs::write(&file, jsonl(&recs)).unwrap();
        let before = model.answers();
        let after = model.with(&before, &[&recs]);

        // Until a file was applied, every second round runs to its end: later rounds then
        // write log entries on top of the kind's segment.
        // Otherwise the kill comes at a random moment of the import's run, in every
        // second round near its end, where it writes.
        let ms = duration.as_millis() as u64;
        let kill_at = if ids.is_empty() && round % 2 == 1 {
            None
        } else if round % 2 == 0 {
            Some(Duration::from_millis(rng.range(0, ms * 12 / 10)))
        } else {
            Some(Duration::from_millis(rng.range(ms * 7 / 10, ms * 12 / 10)))
        };
        let mut child: Child = cmd(&f.store)
            .args(import_args(&f, &file))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("import.log")).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let exited = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if kill_at.is_some_and(|at| started.elapsed() >= at) {
                child.kill().unwrap();
                let status = child.wait().unwrap();
                // It may have ended just before the signal.
                break status.code().map(|_| status);
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        eprintln!(
            "round {round}: kill planned at {kill_at:?}, {} after {:?}",
            if exited.is_some() { "ended" } else { "killed" },
            started.elapsed()
        );
        if let Some(status) = exited {
            duration = started.elapsed();
            assert!(
                status.success(),
                "{ctx}: import failed: {}",
                std::fs::read_to_string(dir.join("import.log")).unwrap_or_default()
            );
        }

        check_clean(&f.store, &ctx);
        let s = Server::start(&f.store, &FAST, &f.log);
        let (stored, _) = ask(&s, &f.key).await;
        if stored == after {
            model.apply(&recs);
            ids.extend(fresh.iter().map(|r| r.0));
            if exited.is_some() {
                finished += 1;
            } else {
                killed_applied += 1;
            }
        } else {
            assert!(
                exited.is_none(),
                "{ctx}: an import that exited 0 is not stored whole:{}",
                stored.diff(&after)
            );
            assert!(
                stored == before,
                "{ctx}: the store holds neither the state before the import nor the one after it; against the state before:{}\nagainst the state after:{}",
                stored.diff(&before),
                stored.diff(&after)
            );
            killed_absent += 1;
        }
        s.kill9();
    }
    eprintln!(
        "kill9_during_import: {finished} imports finished before the kill, {killed_applied} killed after their commit, {killed_absent} killed before it"
    );
    assert_eq!(finished + killed_applied + killed_absent, ROUNDS);
    assert!(!ids.is_empty(), "seed {seed}: no import was ever applied");

    let s = Server::start(&f.store, &FAST, &f.log);
    same_as_fresh_load(&s, &f.key, &model, seed).await;
    s.kill9();
}

/// One `Ingest` batch a sender sent.
struct Sent {
    sender: usize,
    recs: Vec<Rec>,
    /// The identities it added.
    fresh: Vec<Id>,
}

/// The state of an Ingest crash test between rounds.
struct Ingests {
    f: Fixture,
    seed: u64,
    model: Model,
    /// Per sender: the identities it may replace (its own and those it was given), so
    /// that no two batches in flight at once touch one identity.
    owned: Vec<Vec<Id>>,
    next_ver: Arc<AtomicU32>,
    /// Batches in flight at a kill, and how many of them were stored.
    in_flight: usize,
    in_flight_stored: usize,
}

/// What one sender saw: the batches answered 200, in order, and the one in flight when the
/// server died (none when the server was killed before it sent anything).
type Sender = tokio::task::JoinHandle<(Vec<Sent>, Option<Sent>)>;

const SENDERS: usize = 4;
const INGEST_USERS: u64 = 40;

impl Ingests {
    fn new(test: &str, fixture: fn() -> Fixture) -> (Ingests, Rng) {
        let (rng, seed) = Rng::seeded(test);
        let ingests = Ingests {
            f: fixture(),
            seed,
            model: Model::default(),
            owned: vec![Vec::new(); SENDERS],
            next_ver: Arc::new(AtomicU32::new(1)),
            in_flight: 0,
            in_flight_stored: 0,
        };
        (ingests, rng)
    }

    /// `n` senders that post batches of `sizes` records back to back until the server
    /// is gone; `acked` counts the batches answered 200.
    fn senders(
        &self,
        s: &Server,
        n: usize,
        sizes: (u64, u64),
        acked: &Arc<AtomicUsize>,
        rng: &mut Rng,
    ) -> Vec<Sender> {
        (0..n)
            .map(|sender| {
                let url = format!("{}/api/v1/Ingest", s.base);
                let key = self.f.key.clone();
                let mut owned = self.owned[sender].clone();
                let mut rng = rng.fork();
                let next_ver = self.next_ver.clone();
                let acked = acked.clone();
                tokio::spawn(async move {
                    let client = reqwest::Client::new();
                    let mut done = Vec::new();
                    loop {
                        let size = rng.range(sizes.0, sizes.1) as usize;
                        let ver = next_ver.fetch_add(1, Ordering::Relaxed);
                        let replaced = rng.range(0, size as u64 / 4) as usize;
                        let mut recs = replacing(&mut rng, &owned, replaced);
                        let fresh = new_records(&mut rng, size - recs.len(), ver, INGEST_USERS);
                        recs.extend(fresh.iter().copied());
                        let body = json!({"service_key": key, "kind": "autocomplete",
                                          "records": recs.iter().map(record).collect::<Vec<_>>()});
                        let sent = Sent {
                            sender,
                            fresh: fresh.iter().map(|r| r.0).collect(),
                            recs,
                        };
                        let res = client
                            .post(&url)
                            .header("content-type", "application/json")
                            .body(body.to_string())
                            .send()
                            .await;
                        let answer = match res {
                            Ok(r) => {
                                let status = r.status().as_u16();
                                r.text().await.ok().map(|t| (status, t))
                            }
                            Err(_) => None,
                        };
                        match answer {
                            Some((200, text)) => {
                                let v: Value = serde_json::from_str(&text).unwrap();
                                assert_eq!(v, json!({"accepted": sent.recs.len()}));
                                owned.extend(sent.fresh.iter().copied());
                                acked.fetch_add(1, Ordering::SeqCst);
                                done.push(sent);
                            }
                            Some((status, text)) => panic!("Ingest answered {status}: {text}"),
                            None => return (done, Some(sent)),
                        }
                    }
                })
            })
            .collect()
    }

    /// After a kill: `check` is clean, and a server started on the store holds every
    /// acknowledged batch and each batch in flight whole or not at all. Returns the
    /// server and the number of writes the round committed.
    async fn verify(&mut self, round: usize, senders: Vec<Sender>) -> (Server, usize) {
        let ctx = format!("seed {}, round {round}", self.seed);
        let (mut acked, mut in_flight) = (Vec::new(), Vec::new());
        for t in senders {
            let (done, flying) = t.await.unwrap();
            acked.extend(done);
            in_flight.extend(flying);
        }
        check_clean(&self.f.store, &ctx);
        let s = Server::start(&self.f.store, &FAST, &self.f.log);
        let (stored, _) = ask(&s, &self.f.key).await;
        // The acknowledged batches of one sender in order; those of different senders
        // touch different identities.
        for b in &acked {
            self.model.apply(&b.recs);
            self.owned[b.sender].extend(b.fresh.iter().copied());
        }
        let base = self.model.answers();
        let present: Vec<u32> = (0..1u32 << in_flight.len())
            .filter(|mask| {
                let chosen: Vec<&[Rec]> = in_flight
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, b)| b.recs.as_slice())
                    .collect();
                self.model.with(&base, &chosen) == stored
            })
            .collect();
        assert!(
            present.len() == 1,
            "{ctx}: {} batches acknowledged, {} in flight; the store holds no combination of the acknowledged batches with the ones in flight whole or absent ({} match); against the acknowledged ones alone:{}",
            acked.len(),
            in_flight.len(),
            present.len(),
            stored.diff(&base)
        );
        let mut committed = acked.len();
        self.in_flight += in_flight.len();
        for (i, b) in in_flight.iter().enumerate() {
            if present[0] & (1 << i) != 0 {
                self.model.apply(&b.recs);
                self.owned[b.sender].extend(b.fresh.iter().copied());
                committed += 1;
                self.in_flight_stored += 1;
            }
        }
        (s, committed)
    }
}

#[tokio::test]
async fn kill9_during_ingest_keeps_every_acknowledged_batch_whole() {
    kill9_during_ingest(fixture).await;
}

/// The same on the PostgreSQL store on Citus (the server killed, not the database).
#[tokio::test]
async fn kill9_during_ingest_on_citus_keeps_every_acknowledged_batch_whole() {
    kill9_during_ingest(citus_fixture).await;
}

async fn kill9_during_ingest(fixture: fn() -> Fixture) {
    let (mut t, mut rng) = Ingests::new("kill9_during_ingest", fixture);
    let mut senders = Vec::new();
    let mut writes = 0;
    for round in 0..ROUNDS {
        let (s, committed) = t.verify(round, senders).await;
        writes += committed;
        let n = rng.range(1, SENDERS as u64) as usize;
        let acked = Arc::new(AtomicUsize::new(0));
        senders = t.senders(&s, n, (50, 500), &acked, &mut rng);
        tokio::time::sleep(Duration::from_millis(rng.range(0, 1_500))).await;
        s.kill9();
    }
    let (s, committed) = t.verify(ROUNDS, senders).await;
    writes += committed;
    eprintln!(
        "kill9_during_ingest: {writes} batches stored, {} records; of {} batches in flight at a kill, {} were stored",
        t.model.map.len(),
        t.in_flight,
        t.in_flight_stored
    );
    assert!(writes > 0, "seed {}: no batch was ever stored", t.seed);
    same_as_fresh_load(&s, &t.f.key, &t.model, t.seed).await;
    s.kill9();
}

/// The team's stored log entries of autocomplete records, and the base of its segment.
fn stored_log(store: &str, team: &str) -> (usize, Option<i64>) {
    let c = rusqlite::Connection::open(store.strip_prefix("sqlite:").unwrap()).unwrap();
    let entries: i64 = c
        .query_row(
            "SELECT COUNT(DISTINCT seq) FROM log WHERE team_id = ?1 AND kind = 'autocomplete'",
            [team],
            |r| r.get(0),
        )
        .unwrap();
    let base = c
        .query_row(
            "SELECT seq FROM segments WHERE team_id = ?1 AND kind = 'autocomplete' AND part = 0",
            [team],
            |r| r.get(0),
        )
        .optional()
        .unwrap();
    (entries as usize, base)
}

#[tokio::test]
async fn kill9_during_compaction_loses_nothing() {
    const BASE_ROWS: usize = 250_000;
    let (mut t, mut rng) = Ingests::new("kill9_during_compaction", fixture);
    // A large segment, so that each fold takes a while; its identities are split among
    // the senders, which replace some.
    let base = new_records(&mut rng, BASE_ROWS, 0, 200);
    let file = t.f.log.with_file_name("base.jsonl");
    std::fs::write(&file, jsonl(&base)).unwrap();
    ok(&t.f.store, &import_args(&t.f, &file));
    t.model.apply(&base);
    for (i, (id, _)) in base.iter().enumerate() {
        t.owned[i % 2].push(*id);
    }

    let (mut log, mut segment) = stored_log(&t.f.store, &t.f.team);
    assert_eq!(log, 0, "the first import is the kind's segment");
    let (mut folded, mut long_log) = (0, 0);
    let mut senders = Vec::new();
    for round in 0..=ROUNDS {
        let after_kill = (round > 0).then(|| stored_log(&t.f.store, &t.f.team));
        let (s, committed) = t.verify(round, senders).await;
        if let Some((entries, base)) = after_kill {
            let ctx = format!("seed {}, round {}", t.seed, round - 1);
            if base == segment {
                // No fold committed: every write of the round is one more entry.
                assert_eq!(entries, log + committed, "{ctx}: log entries");
            } else {
                assert!(entries < log + committed, "{ctx}: a fold kept its entries");
                folded += 1;
            }
            if entries >= COMPACT_ENTRIES {
                long_log += 1;
            }
            (log, segment) = (entries, base);
        }
        if round == ROUNDS {
            eprintln!(
                "kill9_during_compaction: {folded} of {ROUNDS} kills came after a fold committed, {long_log} found a log of {COMPACT_ENTRIES}+ entries (killed before its fold committed); {} records; of {} batches in flight at a kill, {} were stored",
                t.model.map.len(),
                t.in_flight,
                t.in_flight_stored
            );
            assert!(
                folded >= 1 && long_log >= 1,
                "seed {}: {folded} kills after a fold, {long_log} before one",
                t.seed
            );
            same_as_fresh_load(&s, &t.f.key, &t.model, t.seed).await;
            s.kill9();
            return;
        }
        // Kill right after the write that makes the log long enough to fold (sometimes
        // the one 64 writes later), plus 0-350 ms: the fold starts at the next refresh
        // (every 250 ms) and takes some 50 ms here at 300k rows, so the kills fall before
        // it, in it and after it. A log that is long already is folded as the server
        // starts.
        let target = COMPACT_ENTRIES.saturating_sub(log)
            + COMPACT_ENTRIES * usize::from(rng.range(0, 3) == 0);
        let acked = Arc::new(AtomicUsize::new(0));
        senders = t.senders(&s, 2, (20, 60), &acked, &mut rng);
        let waiting = Instant::now();
        while acked.load(Ordering::SeqCst) < target {
            assert!(
                waiting.elapsed() < Duration::from_secs(120)
                    && senders.iter().all(|h| !h.is_finished()),
                "seed {}, round {round}: the senders stopped after {} batches",
                t.seed,
                acked.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.range(0, 350))).await;
        s.kill9();
    }
}
