//! Tests against the local PostgreSQL (127.0.0.1:5432, trust auth, database `test`); each
//! test uses its own schema and drops it. They fail, never skip, when PostgreSQL is down.

use std::sync::Arc;

use tokio_postgres::NoTls;

use super::schema::migrations;
use super::*;
use crate::store::{CapStore, NewTeam, RecordStore, Store, StoreOps, TeamStore};
use usage_core::eval::{EvalError, TeamData};
use usage_core::plan::{CapScope, Limits};
use usage_core::schema::Plan;
use usage_core::schema::records::{RecordKind, RecordType};
use usage_core::time::Timestamp;

/// The URL of the test database (env `USAGE_TEST_POSTGRES` overrides the default).
pub(crate) fn base_url() -> String {
    crate::testing::postgres_url()
}

/// The database engine a test runs the store on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// The local PostgreSQL ([`crate::testing::postgres_url`]).
    Postgres,
    /// The coordinator of the local Citus cluster ([`crate::testing::citus_url`]): the
    /// store distributes its tables itself.
    Citus,
}

impl Engine {
    /// The URL of the engine's test database.
    pub(crate) fn url(self) -> String {
        match self {
            Engine::Postgres => crate::testing::postgres_url(),
            Engine::Citus => crate::testing::citus_url(),
        }
    }
}

/// A fresh schema; dropped when the guard is.
pub(crate) struct Schema {
    pub(crate) name: String,
    base: String,
    engine: Engine,
}

impl Schema {
    /// A fresh schema of the PostgreSQL test database.
    pub(crate) async fn new(tag: &str) -> Schema {
        Schema::on(Engine::Postgres, tag).await
    }

    /// A fresh schema of `engine`'s test database.
    pub(crate) async fn on(engine: Engine, tag: &str) -> Schema {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let name = format!(
            "t_{tag}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let base = engine.url();
        let (c, conn) = tokio_postgres::connect(&base, NoTls)
            .await
            .unwrap_or_else(|e| panic!("{engine:?} at {base} is required for these tests: {e}"));
        tokio::spawn(conn);
        c.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
        ))
        .await
        .unwrap();
        Schema { name, base, engine }
    }

    /// The store URL of the schema (on Citus, with [`crate::testing::CITUS_TEST_OPTIONS`]).
    pub(crate) fn url(&self) -> String {
        let extra = match self.engine {
            Engine::Postgres => "",
            Engine::Citus => crate::testing::CITUS_TEST_OPTIONS,
        };
        format!("{}?options=-csearch_path%3D{}{extra}", self.base, self.name)
    }

    /// A client of the schema's database.
    pub(crate) async fn client(&self) -> tokio_postgres::Client {
        let (c, conn) = tokio_postgres::connect(&self.url(), NoTls).await.unwrap();
        tokio::spawn(conn);
        c
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let (name, base) = (self.name.clone(), self.base.clone());
        // Drop on a thread of its own: Drop may run inside a runtime.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                if let Ok((c, conn)) = tokio_postgres::connect(&base, NoTls).await {
                    tokio::spawn(conn);
                    let _ = c
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE"))
                        .await;
                }
            });
        })
        .join();
    }
}

/// A new team of `store` (enterprise plan, one seat); returns its id.
pub(crate) async fn new_team(store: &PgStore) -> String {
    store
        .create_team(
            NewTeam {
                name: "t".into(),
                plan: Plan::Enterprise,
                seats: 1,
                credits_per_seat: 1,
                unique_name: false,
            },
            "-",
            Timestamp(0),
        )
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn migrations_apply_once_even_when_two_instances_start_together() {
    let schema = Schema::new("mig").await;
    let url = schema.url();
    let (a, b) = tokio::join!(PgStore::open(&url), PgStore::open(&url));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        a.applied_at_open + b.applied_at_open,
        migrations().len() as u32
    );
    assert_eq!(a.migrate().await.unwrap(), a.applied_at_open);
}

/// A store of schema version 1 (identity columns as the primary key) keeps every row
/// through migration 2 (identity keys), and a later record with a stored record's
/// identity replaces it.
#[tokio::test]
async fn identity_key_migration_keeps_the_rows_of_a_version_1_store() {
    use usage_core::JsonPath;
    use usage_core::load::{Batch, parse_record};
    use usage_core::schema::records::AUTOCOMPLETE;

    let schema = Schema::new("idkey").await;
    let (c, conn) = tokio_postgres::connect(&schema.url(), NoTls).await.unwrap();
    tokio::spawn(conn);
    c.batch_execute(&format!(
        "CREATE TABLE schema_migrations (version INT PRIMARY KEY, applied BIGINT NOT NULL); \
         {}; INSERT INTO schema_migrations VALUES (1, 0); \
         INSERT INTO teams VALUES ('t1', 'one', 0); \
         INSERT INTO rec_autocomplete (team_id, api_key, hour, language, ide, version, \
           num_acceptances, num_lines_accepted, num_bytes_accepted) VALUES \
           ('t1', 'k', 3600000000, 'go', 'vscode', '1.0', 5, 1, 1), \
           ('t1', 'k', 3600000000, 'go', 'vscode', '1.1', 7, 1, 1)",
        migrations()[0]
    ))
    .await
    .unwrap();
    let store = PgStore::open(&schema.url()).await.unwrap();
    assert_eq!(store.applied_at_open, migrations().len() as u32 - 1);
    let sums = || async {
        c.query(
            "SELECT version, num_acceptances FROM rec_autocomplete WHERE team_id = 't1' ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1)))
        .collect::<Vec<_>>()
    };
    assert_eq!(sums().await, [("1.0".into(), 5), ("1.1".into(), 7)]);
    let again = serde_json::json!({"api_key": "k", "hour": "1970-01-01T01:00:00Z",
        "language": "go", "ide": "vscode", "version": "1.1",
        "num_acceptances": 70, "num_lines_accepted": 1, "num_bytes_accepted": 1});
    let batch = Batch {
        kind: &AUTOCOMPLETE,
        records: vec![parse_record(&AUTOCOMPLETE, &again, &JsonPath::root()).unwrap()],
    };
    assert_eq!(store.ingest("t1", batch, Timestamp(0)).await.unwrap(), 1);
    assert_eq!(sums().await, [("1.0".into(), 5), ("1.1".into(), 70)]);
}

#[tokio::test]
async fn conformance() {
    conformance_on(Engine::Postgres).await;
}

#[tokio::test]
async fn conformance_on_citus() {
    conformance_on(Engine::Citus).await;
}

async fn conformance_on(engine: Engine) {
    let schemas = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = schemas.clone();
    crate::store::conformance::run_all(move || {
        let schemas = schemas.clone();
        async move {
            let s = Schema::on(engine, "conf").await;
            let store = PgStore::open(&s.url()).await.unwrap();
            schemas.lock().unwrap().push(s);
            Arc::new(store) as Arc<dyn Store>
        }
    })
    .await;
    drop(keep);
}

/// Finished deliveries past a webhook's last 100 leave the table, on PostgreSQL and on
/// Citus (where the pruning statement must route to the team's shard).
#[tokio::test]
async fn finished_deliveries_are_pruned() {
    for engine in [Engine::Postgres, Engine::Citus] {
        let schema = Schema::on(engine, "prune").await;
        let s = PgStore::open(&schema.url()).await.unwrap();
        let (team, id) =
            crate::store::conformance::webhooks::finished_deliveries_are_pruned(&s).await;
        let held: i64 = schema
            .client()
            .await
            .query_one(
                "SELECT COUNT(*) FROM webhook_outbox WHERE team_id = $1 AND webhook_id = $2",
                &[&team, &id],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            held,
            usage_core::alerts::DELIVERY_LOG as i64 + 1,
            "{engine:?}"
        );
    }
}

#[test]
fn ddl_is_pinned() {
    // Migrations are generated from the record tables; a change of a table must come as a
    // new migration, not as an edit of an applied one: these snapshots show every such
    // change (migration 2: identity keys; 3: the readable column; 4: rate buckets;
    // 5: the change feed; 6: bulk writes).
    insta::assert_snapshot!(migrations()[0]);
    insta::assert_snapshot!("identity_key", migrations()[1]);
    insta::assert_snapshot!("readable", migrations()[2]);
    insta::assert_snapshot!("rate_buckets", migrations()[3]);
    insta::assert_snapshot!("change_feed", migrations()[4]);
    insta::assert_snapshot!("bulk_write", migrations()[5]);
}

/// Usage records of `kind` from JSON objects.
pub(crate) fn parsed(
    kind: &'static RecordKind,
    rows: &[serde_json::Value],
) -> Vec<usage_core::load::Record> {
    rows.iter()
        .map(|r| usage_core::load::parse_record(kind, r, &usage_core::JsonPath::root()).unwrap())
        .collect()
}

/// The identity key a write computes is the one migration 2's SQL computes from the stored
/// columns, byte for byte, for every kind with a record table and text that is awkward to
/// join (separators, multi-byte characters whose length in characters is not in bytes):
/// rows stored before migration 6 and rows written after it meet on one key.
#[tokio::test]
async fn identity_keys_are_the_ones_the_database_computes() {
    use serde_json::json;
    use usage_core::schema::records::{AGENT_LINES, AGENT_TOOL_USAGE, AUTOCOMPLETE, CHAT, PCW};
    let schema = Schema::new("idk").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let texts = ["k", "a|b:c", "1:x|2", "ü€𝄞", "", " ", "9"];
    for kind in [&AUTOCOMPLETE, &PCW, &CHAT, &AGENT_LINES, &AGENT_TOOL_USAGE] {
        let rows: Vec<serde_json::Value> = texts
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, t)| {
                let mut r = serde_json::Map::new();
                for f in kind.fields {
                    let v = match f.ty {
                        RecordType::Text => json!(format!("{t}{i}")),
                        RecordType::Hour => {
                            json!(Timestamp(3_600_000_000 * (i as i64 + 1)).to_rfc3339())
                        }
                        RecordType::Timestamp => {
                            json!(Timestamp(1_000_001 * (i as i64 + 1)).to_rfc3339())
                        }
                        RecordType::Day => json!(format!("2025-01-0{}", i + 1)),
                        RecordType::Count => json!(i),
                        RecordType::Bool => json!(i % 2 == 0),
                        RecordType::Enum(ids) => json!(ids[i % ids.len()]),
                        RecordType::GroupIds => continue,
                    };
                    r.insert(f.name.into(), v);
                }
                serde_json::Value::Object(r)
            })
            .collect();
        let records = parsed(kind, &rows);
        let want: Vec<Vec<u8>> = records
            .iter()
            .map(|r| dialect::identity_key_of(r).to_vec())
            .collect();
        let n = store
            .import(
                &team,
                kind,
                crate::store::shared::stream(records),
                Timestamp(0),
            )
            .await
            .unwrap();
        assert_eq!(n, Some(rows.len() as u64), "{}", kind.name);
        let cols: Vec<(String, bool)> = kind
            .identity
            .iter()
            .map(|name| {
                let f = kind.field(name).unwrap();
                (
                    format!("\"{name}\""),
                    matches!(f.ty, RecordType::Text | RecordType::Enum(_)),
                )
            })
            .collect();
        let c = store.client().await.unwrap();
        let got = c
            .query(
                format!(
                    "SELECT identity_key, {} FROM {} WHERE team_id = $1",
                    dialect::identity_key(&cols),
                    names::table(kind)
                )
                .as_str(),
                &[&team],
            )
            .await
            .unwrap();
        let mut stored: Vec<Vec<u8>> = Vec::new();
        for row in &got {
            let (kept, computed): (Vec<u8>, Vec<u8>) = (row.get(0), row.get(1));
            assert_eq!(kept, computed, "{}", kind.name);
            stored.push(kept);
        }
        let (mut stored, mut want) = (stored, want);
        stored.sort();
        want.sort();
        assert_eq!(stored, want, "{}", kind.name);
    }
}

/// A usage write in several rounds: a later record with an earlier one's identity wins,
/// within a round and across rounds, over a stored row too; the rows a write replaced or
/// added carry its change number.
#[tokio::test]
async fn usage_writes_keep_the_last_record_of_an_identity_across_rounds() {
    use serde_json::json;
    use usage_core::schema::records::AUTOCOMPLETE;
    let schema = Schema::new("rounds").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let row = |user: usize, n: usize| {
        json!({"api_key": format!("k{user}"), "hour": Timestamp(3_600_000_000 * (user as i64 % 5)).to_rfc3339(),
            "language": "go", "ide": "vim", "version": "1.0",
            "num_acceptances": n, "num_lines_accepted": 1, "num_bytes_accepted": 1})
    };
    let import = |rows: Vec<serde_json::Value>| {
        let records = parsed(&AUTOCOMPLETE, &rows);
        let store = &store;
        let team = team.clone();
        async move {
            store
                .import(
                    &team,
                    &AUTOCOMPLETE,
                    crate::store::shared::stream(records),
                    Timestamp(0),
                )
                .await
                .unwrap()
        }
    };
    const { assert!(super::records::ROUND < 150, "the test spans several rounds") };
    // 150 users; then users 0-9 again within the same write (a later round).
    let first: Vec<_> = (0..150)
        .map(|u| row(u, 1))
        .chain((0..10).map(|u| row(u, 2)))
        .collect();
    assert_eq!(import(first).await, Some(160));
    // A second write: user 5 twice (the last wins), user 200 new.
    assert_eq!(
        import(vec![row(5, 3), row(200, 4), row(5, 5)]).await,
        Some(3)
    );
    let c = store.client().await.unwrap();
    let rows = c
        .query(
            "SELECT api_key, num_acceptances, change_seq FROM rec_autocomplete WHERE team_id = $1",
            &[&team],
        )
        .await
        .unwrap();
    let got: std::collections::BTreeMap<String, (i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    assert_eq!(rows.len(), 151);
    assert_eq!(got.len(), 151);
    for u in (0..150).chain([200]) {
        let want = match u {
            5 => (5, 2),
            200 => (4, 2),
            u if u < 10 => (2, 1),
            _ => (1, 1),
        };
        assert_eq!(got[&format!("k{u}")], want, "user {u}");
    }
}

/// The store's session settings give way to the URL's options, setting by setting, and
/// its sessions run with them.
#[tokio::test]
async fn sessions_take_the_store_settings_unless_the_url_sets_them() {
    assert!(sets("-c work_mem=1GB", "work_mem"));
    assert!(sets("-cwork_mem=1GB", "work_mem"));
    assert!(sets("--work_mem=1GB", "work_mem"));
    assert!(sets(
        "-c search_path=x -c hash_mem_multiplier=2",
        "hash_mem_multiplier"
    ));
    assert!(!sets("-c maintenance_work_mem=1GB", "work_mem"));
    assert!(!sets("-csearch_path=work_mem", "work_mem"));
    assert!(!sets("-c", "work_mem"));
    assert!(!sets("", "work_mem"));
    let schema = Schema::new("settings").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let c = store.client().await.unwrap();
    for (name, value) in SESSION_SETTINGS {
        let row = c.query_one(&format!("SHOW {name}"), &[]).await.unwrap();
        assert_eq!(row.get::<_, String>(0), value, "{name}");
    }
    let url = format!("{}%20-chash_mem_multiplier%3D2", schema.url());
    let store = PgStore::open(&url).await.unwrap();
    let c = store.client().await.unwrap();
    let row = c.query_one("SHOW hash_mem_multiplier", &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "2");
    let row = c.query_one("SHOW work_mem", &[]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "64MB");
}

/// Whether the team stores any identity of `rows` (as one round of a write would ask).
async fn stores_any(
    c: &impl deadpool_postgres::GenericClient,
    team: &str,
    kind: &'static RecordKind,
    rows: &[serde_json::Value],
) -> bool {
    let round = super::records::encode(kind, team, 1, &parsed(kind, rows));
    PgStore::stores_any(c, team, kind, &round).await.unwrap()
}

/// A round of a usage write is copied straight into the record table only when the team
/// stores none of its identities: the probe at its edges, for a kind keyed by time (the
/// stored times meet the round's first or last; an identity stored at another time; the
/// same identity in another team) and for one keyed by id.
#[tokio::test]
async fn a_round_goes_straight_into_the_table_only_when_no_identity_of_it_is_stored() {
    use serde_json::json;
    use usage_core::schema::records::{AUTOCOMPLETE, COMMAND};
    let schema = Schema::new("probe").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let other = new_team(&store).await;
    let ac = |user: &str, hour: i64| {
        json!({"api_key": user, "hour": Timestamp(3_600_000_000 * hour).to_rfc3339(),
            "language": "go", "ide": "vim", "version": "1.0",
            "num_acceptances": 1, "num_lines_accepted": 1, "num_bytes_accepted": 1})
    };
    let cmd = |id: &str| {
        json!({"id": id, "api_key": "k", "timestamp": "2025-01-01T00:00:00Z",
            "language": "go", "ide": "vim", "version": "1.0",
            "command_source": "COMMAND_REQUEST_SOURCE_DEFAULT",
            "provider_source": "PROVIDER_SOURCE_COMMAND_EDIT",
            "lines_added": 1, "lines_removed": 0, "bytes_added": 1, "bytes_removed": 0,
            "selection_lines": 0, "selection_bytes": 0, "accepted": true})
    };
    for (kind, rows) in [
        (&AUTOCOMPLETE, vec![ac("a", 10), ac("b", 10), ac("a", 11)]),
        (&COMMAND, vec![cmd("x1"), cmd("x2")]),
    ] {
        let records = crate::store::shared::stream(parsed(kind, &rows));
        let written = store.import(&team, kind, records, Timestamp(0)).await;
        assert_eq!(written.unwrap(), Some(rows.len() as u64));
    }
    let c = store.client().await.unwrap();
    // (what, the round's rows as (user, hour), whether the team stores any of them)
    type Case<'a> = (&'a str, &'a [(&'a str, i64)], bool);
    let cases: [Case; 7] = [
        ("after the stored times", &[("a", 12), ("c", 13)], false),
        ("before them", &[("a", 5), ("c", 9)], false),
        (
            "a new identity at the last stored time",
            &[("c", 11), ("a", 12)],
            false,
        ),
        (
            "a stored user at another stored time",
            &[("b", 11), ("c", 12)],
            false,
        ),
        ("a stored identity last", &[("c", 9), ("b", 10)], true),
        ("a stored identity first", &[("a", 11), ("z", 20)], true),
        ("all stored", &[("a", 10), ("b", 10), ("a", 11)], true),
    ];
    for (what, rows, want) in cases {
        let rows: Vec<_> = rows.iter().map(|&(user, hour)| ac(user, hour)).collect();
        assert_eq!(
            stores_any(&c, &team, &AUTOCOMPLETE, &rows).await,
            want,
            "{what}"
        );
    }
    assert!(!stores_any(&c, &other, &AUTOCOMPLETE, &[ac("a", 10)]).await);
    assert!(!stores_any(&c, &team, &COMMAND, &[cmd("x3")]).await);
    assert!(stores_any(&c, &team, &COMMAND, &[cmd("x3"), cmd("x2")]).await);
    assert!(!stores_any(&c, &other, &COMMAND, &[cmd("x1")]).await);
}

mod differential {
    //! The PostgreSQL store against the in-memory evaluator: random datasets of every
    //! record kind (one fresh team each) and random valid requests, through the store's
    //! trait, compared value by value (floats to 1e-12 relative). Each request is answered
    //! three ways: pushed down to SQL, from a second instance's columnar cache (loaded
    //! part-way through the dataset and caught up with the rest, written through it), and
    //! by the evaluator.

    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    use usage_core::eval::TeamData;
    use usage_core::plan::{Limits, UserPagePlan};
    use usage_core::schema::Plan;
    use usage_core::testing::compare::{agent_plan, check_analytics, group_choice, user_page_plan};
    use usage_core::testing::data::arb_dataset;
    use usage_core::testing::{Choices, Pool, arb_analytics_request};

    use super::*;
    use crate::store::NewTeam;

    /// Datasets per run; each answers [`REQUESTS`] Analytics requests, a user page and an
    /// agent request: 600 Analytics cases in all.
    const DATASETS: u32 = 120;
    const REQUESTS: usize = 5;

    /// A store answer as an evaluator answer; any other store failure fails the test.
    fn eval<T>(r: StoreResult<T>) -> Result<T, EvalError> {
        r.map_err(|e| match e {
            StoreError::Eval(e) => e,
            other => panic!("store failed: {other}"),
        })
    }

    fn block<F: std::future::Future>(rt: &tokio::runtime::Handle, f: F) -> F::Output {
        tokio::task::block_in_place(|| rt.block_on(f))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_matches_the_in_memory_evaluator() {
        matches_the_in_memory_evaluator(Engine::Postgres, DATASETS).await;
    }

    /// The same on Citus, with fewer datasets: each costs a team's writes through the
    /// coordinator to a worker.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn citus_matches_the_in_memory_evaluator() {
        matches_the_in_memory_evaluator(Engine::Citus, DATASETS / 4).await;
    }

    async fn matches_the_in_memory_evaluator(engine: Engine, datasets: u32) {
        let schema = Schema::on(engine, "diff").await;
        let store = PgStore::open(&schema.url()).await.unwrap();
        let cached = PgStore::open_with(
            &schema.url(),
            crate::store::CacheConfig {
                bytes: 1 << 30,
                wait_for_load: true,
            },
        )
        .await
        .unwrap();
        let rt = tokio::runtime::Handle::current();
        let strategy = (
            arb_dataset(Pool::default()),
            proptest::collection::vec(arb_analytics_request(Pool::default()), REQUESTS),
            proptest::collection::vec(any::<u32>(), 64),
        );
        let mut runner = TestRunner::new(Config {
            cases: datasets,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&strategy, |(data, requests, choices)| {
                let team = block(
                    &rt,
                    store.create_team(
                        NewTeam {
                            name: "diff".into(),
                            plan: Plan::Enterprise,
                            seats: 1,
                            credits_per_seat: 1,
                            unique_name: false,
                        },
                        "-",
                        Timestamp(0),
                    ),
                )
                .unwrap()
                .id;
                let mut model = TeamData::new();
                let batches = data.parsed();
                let half = batches.len() / 2;
                for (i, batch) in batches.into_iter().enumerate() {
                    let now = Timestamp(1_746_000_000_000_000 + i as i64 * 1_000_000);
                    let prepared = model
                        .prepare(&batch, now)
                        .expect("generated batches are consistent");
                    model.apply(&prepared);
                    if i == half {
                        // The cache loads the first half; the rest reaches it as changes.
                        let up = user_page_plan(&data, &mut Choices::new(vec![0]));
                        let _ = eval(block(&rt, cached.user_page(&team, &up)));
                    }
                    let via = if i < half { &store } else { &cached };
                    block(&rt, via.ingest(&team, batch, now)).unwrap();
                }
                let mut c = Choices::new(choices);
                for req in requests {
                    let req = usage_core::wire::AnalyticsRequest {
                        group_name: group_choice(&data, &mut c),
                        ..req
                    };
                    let plan = usage_core::validate::analytics(&req, &Limits::default())
                        .map_err(|e| TestCaseError::fail(format!("invalid request: {e:?}")))?;
                    let limits = Limits {
                        result_items: *c.one(&[100_000, 100_000, 100_000, 3, 1, 0]),
                        result_bytes: *c.one(&[64 << 20, 64 << 20, 64 << 20, 200, 20, 0]),
                        ..Limits::default()
                    };
                    let want = model.analytics(&plan, &limits);
                    let got = eval(block(&rt, store.analytics(&team, &plan, &limits)));
                    check_analytics(&plan, &got, &want)?;
                    let got = eval(block(&rt, cached.analytics(&team, &plan, &limits)));
                    prop_assert_eq!(got, want);
                }
                let up: UserPagePlan = user_page_plan(&data, &mut c);
                let got = eval(block(&rt, store.user_page(&team, &up)));
                prop_assert_eq!(got, model.user_page(&up));
                let got = eval(block(&rt, cached.user_page(&team, &up)));
                prop_assert_eq!(got, model.user_page(&up));
                let ap = agent_plan(&data, &mut c);
                let got = eval(block(&rt, store.agent(&team, &ap)));
                prop_assert_eq!(got, model.agent(&ap), "{:?}", ap);
                let got = eval(block(&rt, cached.agent(&team, &ap)));
                prop_assert_eq!(got, model.agent(&ap), "{:?}", ap);
                for email in data.emails() {
                    prop_assert_eq!(
                        block(&rt, store.groups_of(&team, &email)).unwrap(),
                        model.groups_of(&email)
                    );
                }
                Ok(())
            })
            .unwrap();
        // Every cached answer came from memory, and every team caught up with the writes
        // of its second half.
        let stats = cached.cache_stats();
        assert_eq!(stats.pushdowns, 0, "{stats:?}");
        assert_eq!(stats.loads, u64::from(datasets), "{stats:?}");
        assert!(stats.catch_ups > 0, "{stats:?}");
    }
}

#[tokio::test]
async fn version_key_orders_like_the_contract() {
    let schema = Schema::new("ver").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let c = store.client().await.unwrap();
    let mut versions: Vec<String> = [
        "1.10.x", "1.10.0", "1.9.12", "1.2.0", "1.2", "1.02", "a", "1.b", "1.9", "", ".", "1.",
        "1..2", "10", "9", "0009", "1.a.b", "1.a", "1.A", "2.0-beta", "2.0", "01.1", "1.01", "ü.1",
        "1.ü",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let got: Vec<String> = c
        .query(
            "SELECT v FROM UNNEST($1::text[]) v ORDER BY usage_version_key(v)",
            &[&versions],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    versions.sort_by(|a, b| usage_core::version::compare(a, b));
    assert_eq!(got, versions);
    // The key computed here for filter values is the database's, byte for byte.
    for v in &versions {
        let db: Vec<u8> = c
            .query_one("SELECT usage_version_key($1)", &[v])
            .await
            .unwrap()
            .get(0);
        assert_eq!(super::dialect::version_sort_key(v), db, "{v:?}");
    }
}

#[tokio::test]
async fn filter_values_holding_nul_compare_as_bytes() {
    use usage_core::testing::data::build_dataset;
    use usage_core::testing::{Choices, Pool};
    let schema = Schema::new("nul").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let data = build_dataset(
        &Pool::default(),
        &mut Choices::new((0..400).map(|i| i * 7 + 3).collect()),
    );
    let mut model = TeamData::new();
    for batch in data.parsed() {
        model.apply(&model.prepare(&batch, Timestamp(0)).unwrap());
        store.ingest(&team, batch, Timestamp(0)).await.unwrap();
    }
    for (name, op, value) in [
        ("api_key", "QUERY_FILTER_EQUAL", "k1\u{0}"),
        ("api_key", "QUERY_FILTER_NOT_EQUAL", "k1\u{0}"),
        ("api_key", "QUERY_FILTER_GREATER_THAN", "k1\u{0}"),
        ("api_key", "QUERY_FILTER_LE", "k\u{0}"),
        ("version", "QUERY_FILTER_GE", "1.10\u{0}"),
        ("version", "QUERY_FILTER_LESS_THAN", "1.\u{0}"),
        ("language", "QUERY_FILTER_EQUAL", "\u{0}"),
    ] {
        let body = serde_json::json!({"query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
                           {"field": "distinct_users"}],
            "filters": [{"name": name, "filter": op, "value": value},
                        {"name": "api_key", "filter": "QUERY_FILTER_EQUAL", "value": "k2"},
                        {"name": "api_key", "filter": "QUERY_FILTER_EQUAL", "value": "k\u{0}"}],
        }]});
        let req: usage_core::wire::AnalyticsRequest = serde_json::from_value(body).unwrap();
        let plan = usage_core::validate::analytics(&req, &Limits::default()).unwrap();
        let got = store
            .analytics(&team, &plan, &Limits::default())
            .await
            .unwrap();
        assert_eq!(
            got,
            model.analytics(&plan, &Limits::default()).unwrap(),
            "{name} {op} {value:?}"
        );
    }
    // Names holding U+0000 are simply not found.
    assert!(!store.has_user(&team, "a\u{0}").await.unwrap());
    assert!(!store.has_group_id(&team, "g\u{0}").await.unwrap());
    assert_eq!(
        store
            .cap(&team, &CapScope::User("a\u{0}".into()))
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn tool_usage_ties_on_clamped_counts_order_by_tool() {
    let schema = Schema::new("tool").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let rec = |tool: &str, day: &str, count: i64| serde_json::json!({"api_key": "k", "day": day, "ide_type": "editor", "tool": tool, "count": count});
    // y's exact sum is larger, but both answers show i64::MAX: the tie orders by tool.
    let req = usage_core::wire::IngestRequest {
        service_key: None,
        kind: Some("agent_tool_usage".into()),
        records: vec![
            rec("y", "2025-05-01", i64::MAX),
            rec("y", "2025-05-02", 10),
            rec("x", "2025-05-01", i64::MAX),
        ],
    };
    let batch = usage_core::load::ingest(&req, &Limits::default()).unwrap();
    let mut model = TeamData::new();
    model.apply(&batch);
    store.ingest(&team, batch, Timestamp(0)).await.unwrap();
    let req =
        serde_json::from_value(serde_json::json!({"query_requests": [{"agent_tool_usage": {}}]}));
    let plan = usage_core::validate::agent(&req.unwrap(), &Limits::default()).unwrap();
    let got = store.agent(&team, &plan).await.unwrap();
    assert_eq!(got, model.agent(&plan).unwrap());
    let tools: Vec<_> = got.query_results[0]
        .agent_tool_usage
        .as_ref()
        .unwrap()
        .agent_tool_usage
        .iter()
        .map(|e| e.tool.clone())
        .collect();
    assert_eq!(tools, ["x", "y"]);
}

#[tokio::test]
async fn users_and_groups_read_back_field_by_field() {
    use usage_core::JsonPath;
    use usage_core::load::{Batch, parse_record};
    use usage_core::schema::records;

    let schema = Schema::new("people").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let now = Timestamp::parse_rfc3339("2025-05-20T10:00:00Z").unwrap();
    // Every field given, and every optional one absent (group ids sorted: the store lists
    // them in order).
    let batches = [
        (
            &records::GROUPS,
            serde_json::json!([{"group_id": "g1", "group_name": "One"},
                               {"group_id": "g2", "group_name": "Two"}]),
        ),
        (
            &records::USERS,
            serde_json::json!([
                {"email": "a@x", "name": "A", "api_key": "ka",
                 "team_status": "USER_TEAM_STATUS_PENDING", "disable_vendor": true,
                 "groups": ["g1", "g2"], "signup_time": "2024-01-02T03:04:05Z"},
                {"email": "b@x", "name": "B", "api_key": "kb", "groups": []},
            ]),
        ),
    ];
    let mut model = TeamData::new();
    for (kind, values) in batches {
        let batch = Batch {
            kind,
            records: values
                .as_array()
                .unwrap()
                .iter()
                .map(|v| parse_record(kind, v, &JsonPath::root()).unwrap())
                .collect(),
        };
        model.apply(&model.prepare(&batch, now).unwrap());
        store.ingest(&team, batch, now).await.unwrap();
    }
    let c = store.client().await.unwrap();
    let loaded = super::people::load(&c, &team).await.unwrap();
    for kind in [&records::USERS, &records::GROUPS] {
        let got: Vec<_> = loaded.records(kind).collect();
        let want: Vec<_> = model.records(kind).collect();
        assert_eq!(got, want, "{}", kind.name);
    }
}

/// Distinct counts are answered by nested grouping (`sql::nested`): every shape of
/// selection list (one distinct count or several, of one key or of different keys, the
/// same one twice, with every other aggregate, totals or grouped, by a stored version key,
/// an empty answer, an answer over the limit) answers row for row as `COUNT(DISTINCT …)`
/// (`sql::flat_query`) does, and as the in-memory evaluator does.
#[tokio::test]
async fn nested_distinct_counts_answer_like_count_distinct() {
    use usage_core::JsonPath;
    use usage_core::load::{Batch, parse_record};
    use usage_core::plan::TimeRange;
    use usage_core::schema::records::AUTOCOMPLETE;
    use usage_core::testing::compare::check_analytics;
    use usage_core::wire::AnalyticsRequest;
    use usage_core::wire::decode::decode;

    let schema = Schema::new("nested").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let mut model = TeamData::new();
    // Pseudo-random autocomplete records: 7 developers over 4 days (hours crossing
    // midnight, so UTC and UTC-8 dates differ), 3 IDEs, 3 languages, versions ordered by
    // their parts.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut records = Vec::new();
    for _ in 0..900 {
        let h = next(96);
        let key = format!("k{}", next(7));
        let hour = format!("2025-03-{:02}T{:02}:00:00Z", 1 + h / 24, h % 24);
        let language = ["go", "python", "rust"][next(3) as usize];
        let ide = ["vscode", "jetbrains", "vim"][next(3) as usize];
        let version = ["1.9.0", "1.10.0", "1.2", "2.0"][next(4) as usize];
        let (a, l, b) = (next(50), next(9), next(400));
        let r = serde_json::json!({"api_key": key, "hour": hour, "language": language,
            "ide": ide, "version": version, "num_acceptances": a,
            "num_lines_accepted": l, "num_bytes_accepted": b});
        records.push(parse_record(&AUTOCOMPLETE, &r, &JsonPath::root()).unwrap());
    }
    let batch = Batch {
        kind: &AUTOCOMPLETE,
        records,
    };
    let now = Timestamp(1_746_000_000_000_000);
    let prepared = model.prepare(&batch, now).unwrap();
    model.apply(&prepared);
    store.ingest(&team, batch, now).await.unwrap();

    let sel = |f: &str, agg: &str, name: &str| serde_json::json!({"field": f, "aggregation_function": format!("QUERY_AGGREGATION_{agg}"), "name": name});
    let users = || serde_json::json!({"field": "distinct_users", "name": "u"});
    let days = || serde_json::json!({"field": "distinct_developer_days", "name": "dd"});
    let hours = || serde_json::json!({"field": "distinct_developer_hours", "name": "dh"});
    let by = |f: &str| serde_json::json!({"field": f, "name": format!("by_{f}")});
    let others = || {
        vec![
            sel("num_acceptances", "SUM", "s"),
            sel("ide", "COUNT", "c"),
            sel("num_bytes_accepted", "AVG", "a"),
            sel("num_bytes_accepted", "MIN", "mn"),
            sel("num_acceptances", "MAX", "mx"),
        ]
    };
    let with = |mut v: Vec<serde_json::Value>, extra: Vec<serde_json::Value>| {
        v.extend(extra);
        v
    };
    let python = serde_json::json!([{"name": "language", "filter": "QUERY_FILTER_EQUAL", "value": "python"}]);
    let nobody =
        serde_json::json!([{"name": "language", "filter": "QUERY_FILTER_EQUAL", "value": "cobol"}]);
    let cases: Vec<(
        Vec<serde_json::Value>,
        Vec<serde_json::Value>,
        serde_json::Value,
    )> = vec![
        (vec![users()], vec![], serde_json::json!([])),
        (vec![days()], vec![], serde_json::json!([])),
        (vec![hours()], vec![], serde_json::json!([])),
        (with(others(), vec![users()]), vec![], serde_json::json!([])),
        (
            with(vec![users(), days(), hours()], others()),
            vec![],
            serde_json::json!([]),
        ),
        (with(vec![hours()], others()), vec![], python.clone()),
        (vec![users(), hours()], vec![], nobody.clone()),
        (
            vec![days(), hours()],
            vec![by("ide")],
            serde_json::json!([]),
        ),
        (
            with(vec![users()], others()),
            vec![by("date"), by("ide")],
            serde_json::json!([]),
        ),
        (
            with(vec![hours(), users()], others()),
            vec![by("version")],
            serde_json::json!([]),
        ),
        (
            with(
                vec![
                    days(),
                    serde_json::json!({"field": "distinct_developer_days", "name": "dd2"}),
                ],
                others(),
            ),
            vec![by("language")],
            python.clone(),
        ),
        (
            vec![users(), days(), hours()],
            vec![by("api_key")],
            serde_json::json!([]),
        ),
        (
            with(vec![hours(), days()], others()),
            vec![by("date UTC-8"), by("version")],
            serde_json::json!([]),
        ),
        (vec![users(), days()], vec![by("ide")], nobody.clone()),
    ];
    let c = store.client().await.unwrap();
    for (selections, aggregations, filters) in cases {
        let body = serde_json::json!({"query_requests": [{
            "data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": selections,
            "aggregations": aggregations, "filters": filters}]});
        let req = decode::<AnalyticsRequest>(body.to_string().as_bytes())
            .unwrap()
            .request;
        let plan = usage_core::validate::analytics(&req, &Limits::default()).unwrap();
        for result_items in [100_000, 2] {
            let limits = Limits {
                result_items,
                ..Limits::default()
            };
            let q = &plan.queries[0];
            let range = TimeRange::default();
            let (nested, outs) = sql::query(q, &team, None, range, result_items);
            let (flat, flat_outs) = sql::flat_query(q, &team, None, range, result_items);
            assert!(
                nested.sql.contains("FROM (SELECT"),
                "{body}: {}",
                nested.sql
            );
            assert_eq!(outs, flat_outs);
            assert_eq!(
                text_rows(&c, &nested).await.unwrap(),
                text_rows(&c, &flat).await.unwrap(),
                "{body}: {}",
                nested.sql
            );
            let got = store.analytics(&team, &plan, &limits).await;
            let got = got.map_err(|e| match e {
                StoreError::Eval(e) => e,
                other => panic!("store failed: {other}"),
            });
            check_analytics(&plan, &got, &model.analytics(&plan, &limits))
                .unwrap_or_else(|e| panic!("{body}: {e}"));
        }
    }
}

/// Every table the migrations create is a reference table or keyed by `team_id` first, and
/// the Citus statements (docs/citus.md) name exactly those tables: the layout Citus needs,
/// checked on PostgreSQL (Citus itself is not installed here).
#[tokio::test]
async fn every_table_is_a_reference_table_or_keyed_by_team_first() {
    use super::schema::{REFERENCE_TABLES, team_tables};
    let schema = Schema::new("citus").await;
    let _store = PgStore::open(&schema.url()).await.unwrap();
    let (c, conn) = tokio_postgres::connect(&base_url(), NoTls).await.unwrap();
    tokio::spawn(conn);
    let rows = c
        .query(
            "SELECT c.relname::text, (SELECT a.attname::text FROM pg_index i \
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
               WHERE i.indrelid = c.oid AND i.indisprimary) \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1",
            &[&schema.name],
        )
        .await
        .unwrap();
    let found: Vec<(String, Option<String>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let mut want: Vec<String> = team_tables();
    want.extend(REFERENCE_TABLES.iter().map(|t| t.to_string()));
    want.sort();
    let names: Vec<String> = found.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(names, want);
    for (name, first) in &found {
        if team_tables().contains(name) {
            assert_eq!(first.as_deref(), Some("team_id"), "{name}");
        }
    }
}

/// docs/citus.md holds the statements [`super::schema::citus_statements`] makes.
#[test]
fn citus_docs_are_current() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/citus.md");
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let (begin, end) = ("<!-- citus:begin -->\n", "<!-- citus:end -->");
    let block = format!(
        "{begin}```sql\n{}\n```\n{end}",
        super::schema::citus_statements()
            .into_iter()
            .map(|(_, call)| call)
            .collect::<Vec<_>>()
            .join("\n")
    );
    let current = match (text.find(begin), text.find(end)) {
        (Some(a), Some(b)) => text[a..b + end.len()].to_string(),
        _ => String::new(),
    };
    if current != block && std::env::var_os("UPDATE_DOCS").is_some() {
        let (a, b) = (text.find(begin).unwrap(), text.find(end).unwrap());
        let updated = format!("{}{block}{}", &text[..a], &text[b + end.len()..]);
        std::fs::write(path, updated).unwrap();
        return;
    }
    assert_eq!(
        current, block,
        "docs/citus.md is stale: run UPDATE_DOCS=1 cargo test -p usage-server citus_docs_are_current"
    );
}

/// A key gets its rate limit once however many instances serve it: the bucket is a row
/// every instance takes its tokens from (section 9).
#[tokio::test]
async fn one_rate_limit_across_instances() {
    use crate::auth::rate::RateConfig;
    let schema = Schema::new("rate").await;
    let url = schema.url();
    let (a, b) = (
        PgStore::open(&url).await.unwrap(),
        PgStore::open(&url).await.unwrap(),
    );
    let team = new_team(&a).await;
    let no_refill = RateConfig {
        per_minute: 0,
        burst: 5,
    };
    let mut granted = 0;
    for i in 0..12 {
        let s = if i % 2 == 0 { &a } else { &b };
        match s.take_token(&team, "key_1", no_refill).await.unwrap() {
            Token::Granted => granted += 1,
            // No refill: a minute, less the time since the bucket was found empty.
            Token::Wait(wait) => assert!(
                wait <= std::time::Duration::from_secs(60)
                    && wait > std::time::Duration::from_secs(59),
                "{wait:?}"
            ),
            Token::NotShared => panic!("the PostgreSQL store shares its buckets"),
        }
    }
    assert_eq!(granted, 5, "burst 5 across both instances");
    // Another key has a bucket of its own; concurrent takes never over-grant.
    let takes = (0..20).map(|i| {
        let s = if i % 2 == 0 { &a } else { &b };
        s.take_token(&team, "key_2", no_refill)
    });
    let results = futures_util::future::join_all(takes).await;
    let ok = results
        .into_iter()
        .filter(|r| matches!(r, Ok(Token::Granted)))
        .count();
    assert_eq!(ok, 5);
    // A refill of 60 a minute: the wait for the next token is at most a second.
    let per_second = RateConfig {
        per_minute: 60,
        burst: 1,
    };
    assert_eq!(
        b.take_token(&team, "key_3", per_second).await.unwrap(),
        Token::Granted
    );
    let Token::Wait(wait) = a.take_token(&team, "key_3", per_second).await.unwrap() else {
        panic!("a second token at once");
    };
    assert!(
        wait <= std::time::Duration::from_secs(1) && wait > std::time::Duration::ZERO,
        "{wait:?}"
    );
}

/// Leases (rate.rs): with a burst of 60 an instance takes 6 tokens at a time, and a key's
/// burst is still granted whole and never more, sent one by one or all at once across
/// two instances, on PostgreSQL and on Citus. A key found empty is answered from memory
/// until its next token is due.
#[tokio::test]
async fn leased_tokens_grant_the_whole_burst_and_never_more() {
    use crate::auth::rate::RateConfig;
    let no_refill = RateConfig {
        per_minute: 0,
        burst: 60,
    };
    assert_eq!(super::rate::lease_size(no_refill), 6);
    for engine in [Engine::Postgres, Engine::Citus] {
        let schema = Schema::on(engine, "lease").await;
        let url = schema.url();
        let (a, b) = (
            PgStore::open(&url).await.unwrap(),
            PgStore::open(&url).await.unwrap(),
        );
        let team = new_team(&a).await;
        let count = |results: Vec<StoreResult<Token>>| {
            results
                .into_iter()
                .filter(|r| matches!(r.as_ref().unwrap(), Token::Granted))
                .count()
        };
        // One by one from one instance: 60, then a wait.
        let mut one_by_one = Vec::new();
        for _ in 0..70 {
            one_by_one.push(a.take_token(&team, "seq", no_refill).await);
        }
        assert_eq!(count(one_by_one), 60, "{engine:?}");
        // All at once across two instances: 60 of 200.
        let takes = (0..200).map(|i| {
            let s = if i % 2 == 0 { &a } else { &b };
            s.take_token(&team, "burst", no_refill)
        });
        let results = futures_util::future::join_all(takes).await;
        assert_eq!(count(results), 60, "{engine:?}");
        // The empty bucket's wait is known: no statement until it is due (a closed store
        // answers it from memory).
        a.close().await.unwrap();
        let Token::Wait(wait) = a.take_token(&team, "burst", no_refill).await.unwrap() else {
            panic!("a token past the burst");
        };
        assert!(wait > std::time::Duration::from_secs(59), "{wait:?}");
        assert!(a.take_token(&team, "never asked", no_refill).await.is_err());
    }
}

/// An import of 10,000 records or more leaves the planner's statistics of the table
/// current (`ANALYZE`), so the next query is planned for the rows there are; a smaller
/// import leaves them to autovacuum.
#[tokio::test]
async fn a_bulk_import_refreshes_the_planners_statistics() {
    let schema = Schema::new("analyze").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let kind = &usage_core::schema::records::AUTOCOMPLETE;
    let records = |n: i64, from: i64| -> Vec<usage_core::load::Record> {
        (from..from + n)
            .map(|i| {
                let r = serde_json::json!({"api_key": "k", "language": "GO", "ide": "vscode",
                    "version": "1.0", "num_acceptances": 1, "num_lines_accepted": 1,
                    "num_bytes_accepted": 1,
                    "hour": Timestamp(i * 3_600_000_000).to_rfc3339()});
                usage_core::load::parse_record(kind, &r, &usage_core::JsonPath::root()).unwrap()
            })
            .collect()
    };
    let stats = || async {
        let c = store.client().await.unwrap();
        let row = c
            .query_one(
                "SELECT c.reltuples::bigint, s.last_analyze IS NOT NULL FROM pg_class c \
                 JOIN pg_stat_user_tables s ON s.relid = c.oid \
                 WHERE c.oid = 'rec_autocomplete'::regclass",
                &[],
            )
            .await
            .unwrap();
        (row.get::<_, i64>(0), row.get::<_, bool>(1))
    };
    // Autovacuum could analyze the table between the imports: not on this one.
    store
        .client()
        .await
        .unwrap()
        .batch_execute("ALTER TABLE rec_autocomplete SET (autovacuum_enabled = false)")
        .await
        .unwrap();
    let small = crate::store::shared::stream(records(9_999, 0));
    assert_eq!(
        store
            .import(&team, kind, small, Timestamp(0))
            .await
            .unwrap(),
        Some(9_999)
    );
    assert!(!stats().await.1, "no ANALYZE below 10,000 records");
    let big = crate::store::shared::stream(records(10_000, 20_000));
    assert_eq!(
        store.import(&team, kind, big, Timestamp(0)).await.unwrap(),
        Some(10_000)
    );
    assert_eq!(stats().await, (19_999, true));
}

/// A text literal reads back as the text, whatever quotes and backslashes it holds, with
/// either setting of `standard_conforming_strings`; U+0000 has none.
#[tokio::test]
async fn text_literals_read_back_as_the_text() {
    let schema = Schema::new("lit").await;
    let c = schema.client().await;
    let texts = [
        "team_1",
        "",
        "it's",
        "a\\b",
        "\\'",
        "''\\\\",
        "é \u{1F600} \n\t",
    ];
    for conforming in ["on", "off"] {
        c.batch_execute(&format!("SET standard_conforming_strings = {conforming}"))
            .await
            .unwrap();
        for t in texts {
            let lit = dialect::text_literal(t).unwrap();
            let back: String = c
                .query_one(format!("SELECT {lit}::text").as_str(), &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(
                back, t,
                "{lit} with standard_conforming_strings = {conforming}"
            );
        }
    }
    assert_eq!(dialect::text_literal("a\0b"), None);
}
