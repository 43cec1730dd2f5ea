//! The store on the local Citus cluster (`../shared/citus`: a coordinator and two workers;
//! [`crate::testing::citus_url`]): it makes every table a Citus table by itself, a store
//! made before the extension came is converted with its rows, two teams' rows live on
//! different workers and each team is answered from its own, and every statement of a
//! team runs on one shard. They fail, never skip, when the cluster is down.
//!
//! Every test on Citus runs its sessions with `citus.multi_task_query_log_level = error`
//! ([`crate::testing::CITUS_TEST_OPTIONS`], checked here), so that it fails on a statement
//! that would touch more than one shard.

use tokio_postgres::NoTls;
use usage_core::load::Batch;
use usage_core::plan::{CapAction, CapScope, Limits, TimeRange};
use usage_core::schema::records;
use usage_core::testing::bench;
use usage_core::time::{Date, Timestamp};
use usage_core::wire::AnalyticsRequest;
use usage_core::wire::decode::decode;

use super::schema::{REFERENCE_TABLES, team_tables};
use super::tests::{Engine, Schema, new_team, parsed};
use super::*;
use crate::store::{CapStore, RecordStore};

/// A table of a schema: its name, Citus partition method and replication model (`None`
/// for a table Citus does not know), and co-location group.
type CitusTable = (String, Option<String>, Option<String>, Option<i32>);

/// Each table of the schema `name`.
async fn citus_tables(c: &tokio_postgres::Client, name: &str) -> Vec<CitusTable> {
    c.query(
        "SELECT c.relname::text, p.partmethod::text, p.repmodel::text, p.colocationid \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         LEFT JOIN pg_dist_partition p ON p.logicalrelid = c.oid \
         WHERE n.nspname = $1 AND c.relkind = 'r' ORDER BY 1",
        &[&name],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
    .collect()
}

/// Every table is a reference table or distributed by `team_id`, the team tables in one
/// co-location group; none is local on the coordinator.
fn assert_every_table_is_a_citus_table(tables: &[CitusTable]) {
    let mut want: Vec<String> = team_tables();
    want.extend(REFERENCE_TABLES.iter().map(|t| t.to_string()));
    want.sort();
    let names: Vec<String> = tables.iter().map(|t| t.0.clone()).collect();
    assert_eq!(names, want);
    let mut groups = std::collections::BTreeSet::new();
    for (name, method, model, group) in tables {
        if REFERENCE_TABLES.contains(&name.as_str()) {
            assert_eq!(
                (method.as_deref(), model.as_deref()),
                (Some("n"), Some("t")),
                "{name} is a reference table"
            );
        } else {
            assert_eq!(method.as_deref(), Some("h"), "{name} is distributed");
            groups.insert(*group);
        }
    }
    assert_eq!(
        groups.len(),
        1,
        "the team tables are co-located: {tables:?}"
    );
}

#[tokio::test]
async fn the_store_makes_every_table_a_citus_table() {
    let schema = Schema::on(Engine::Citus, "dist").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let c = schema.client().await;
    let tables = citus_tables(&c, &schema.name).await;
    assert_every_table_is_a_citus_table(&tables);
    // Opening again changes nothing.
    drop(store);
    let store = PgStore::open(&schema.url()).await.unwrap();
    assert_eq!(store.migrate().await.unwrap(), 0);
    assert_eq!(citus_tables(&c, &schema.name).await, tables);
    // The cluster the tests use refuses a statement over more than one shard.
    let level: String = c
        .query_one("SHOW citus.multi_task_query_log_level", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(level, "error");
}

/// Autocomplete records of `users` users, one an hour from 2025-01-01, `n` acceptances
/// each.
fn autocomplete(users: usize, n: i64) -> Batch {
    let rows: Vec<serde_json::Value> = (0..users)
        .map(|i| {
            serde_json::json!({"api_key": format!("k{i}"),
                "hour": Timestamp(1_735_689_600_000_000 + i as i64 * 3_600_000_000).to_rfc3339(),
                "language": "GO", "ide": "vscode", "version": "1.0.0",
                "num_acceptances": n, "num_lines_accepted": 1, "num_bytes_accepted": 1})
        })
        .collect();
    Batch {
        kind: &records::AUTOCOMPLETE,
        records: parsed(&records::AUTOCOMPLETE, &rows),
    }
}

/// The team's total of acceptances and its number of users, as the store answers.
async fn totals(store: &PgStore, team: &str) -> (String, String) {
    let body = serde_json::json!({"query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [
            {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "a"},
            {"field": "distinct_users", "name": "u"}]}]});
    let req = decode::<AnalyticsRequest>(body.to_string().as_bytes())
        .unwrap()
        .request;
    let plan = usage_core::validate::analytics(&req, &Limits::default()).unwrap();
    let answer = store
        .analytics(team, &plan, &Limits::default())
        .await
        .unwrap();
    let item = serde_json::to_value(&answer.query_results[0].response_items[0].item).unwrap();
    (
        item["a"].as_str().unwrap().to_string(),
        item["u"].as_str().unwrap().to_string(),
    )
}

/// A store made on the coordinator before its tables were Citus tables (the extension came
/// later) is converted when it opens next: every table becomes a Citus table, and what it
/// stored reads back.
#[tokio::test]
async fn a_store_made_before_the_extension_is_converted_with_its_rows() {
    let schema = Schema::on(Engine::Citus, "convert").await;
    let store = PgStore::open_undistributed(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let now = Timestamp(1_746_000_000_000_000);
    store.ingest(&team, autocomplete(30, 2), now).await.unwrap();
    store
        .change_cap(&team, &CapScope::Team, CapAction::Set(300), "key_t", now)
        .await
        .unwrap();
    let c = schema.client().await;
    let before = citus_tables(&c, &schema.name).await;
    assert!(
        before.iter().all(|t| t.1.is_none()),
        "left local: {before:?}"
    );
    drop(store);

    let store = PgStore::open(&schema.url()).await.unwrap();
    assert_every_table_is_a_citus_table(&citus_tables(&c, &schema.name).await);
    assert_eq!(totals(&store, &team).await, ("60".into(), "30".into()));
    assert_eq!(store.cap(&team, &CapScope::Team).await.unwrap(), Some(300));
    let log = store.audit(&team).await.unwrap();
    assert_eq!(log.len(), 2, "the team's creation and the cap");
    assert_eq!(log[1].to_json(None)["action"], "cap.change");
    // Writes go on: the same identities replaced, new ones added.
    store.ingest(&team, autocomplete(40, 3), now).await.unwrap();
    assert_eq!(totals(&store, &team).await, ("120".into(), "40".into()));
}

/// The worker (its port) that holds `team`'s shard of `table`, and the shard's id.
async fn placement(c: &tokio_postgres::Client, table: &str, team: &str) -> (i32, i64) {
    let row = c
        .query_one(
            "SELECT n.nodeport, s.id FROM (SELECT get_shard_id_for_distribution_column($1::text::regclass, $2::text) AS id) s \
             JOIN pg_dist_placement p ON p.shardid = s.id JOIN pg_dist_node n ON n.groupid = p.groupid",
            &[&table, &team],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Two teams whose shards are on different workers each find their rows there, and only
/// there, and each is answered with its own.
#[tokio::test]
async fn two_teams_on_different_workers_are_each_answered_from_their_own() {
    let schema = Schema::on(Engine::Citus, "place").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let c = schema.client().await;
    let table = names::table(&records::AUTOCOMPLETE);
    let first = new_team(&store).await;
    let (first_port, first_shard) = placement(&c, &table, &first).await;
    let mut second = None;
    for _ in 0..64 {
        let team = new_team(&store).await;
        let (port, shard) = placement(&c, &table, &team).await;
        if port != first_port {
            second = Some((team, port, shard));
            break;
        }
    }
    let (second, second_port, second_shard) = second.expect("a team on the other worker");
    let now = Timestamp(1_746_000_000_000_000);
    store.ingest(&first, autocomplete(7, 1), now).await.unwrap();
    store
        .ingest(&second, autocomplete(11, 5), now)
        .await
        .unwrap();
    assert_eq!(totals(&store, &first).await, ("7".into(), "7".into()));
    assert_eq!(totals(&store, &second).await, ("55".into(), "11".into()));
    // On each worker, the team's shard holds its rows, and the other team has none there.
    let base = crate::testing::citus_url();
    let db = base.rsplit('/').next().unwrap().to_string();
    for (team, port, shard, rows, other) in [
        (&first, first_port, first_shard, 7i64, &second),
        (&second, second_port, second_shard, 11, &first),
    ] {
        let url = format!("postgres://postgres@127.0.0.1:{port}/{db}");
        let (w, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(conn);
        let shard_table = format!("{}.{table}_{shard}", schema.name);
        let count = |t: &str| {
            let sql = format!("SELECT count(*) FROM {shard_table} WHERE team_id = $1");
            let w = &w;
            let t = t.to_string();
            async move {
                w.query_one(sql.as_str(), &[&t])
                    .await
                    .unwrap()
                    .get::<_, i64>(0)
            }
        };
        assert_eq!(count(team).await, rows, "{team} on worker {port}");
        assert_eq!(
            count(other).await,
            0,
            "{other} is not on worker {port}'s shard"
        );
    }
}

/// Citus plans each of the six benchmark queries of a team, and the merge of a staged
/// write, on one shard (a router plan: `Task Count: 1`).
#[tokio::test]
async fn a_teams_queries_and_writes_each_run_on_one_shard() {
    let schema = Schema::on(Engine::Citus, "router").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let team = new_team(&store).await;
    let now = Timestamp(1_746_000_000_000_000);
    store.ingest(&team, autocomplete(5, 1), now).await.unwrap();
    let c = schema.client().await;
    let explain = |sql: String, params: Vec<expr::Param>| {
        let c = &c;
        async move {
            let b = boxed(&params);
            let plan: Vec<String> = c
                .query(format!("EXPLAIN {sql}").as_str(), &refs(&b))
                .await
                .unwrap_or_else(|e| panic!("{e}: {sql}"))
                .iter()
                .map(|r| r.get(0))
                .collect();
            plan.join("\n")
        }
    };
    let d0 = Date::parse("2025-01-01").unwrap();
    for (name, body, _) in bench::queries(d0) {
        let req = decode::<AnalyticsRequest>(body.to_string().as_bytes())
            .unwrap()
            .request;
        let plan = usage_core::validate::analytics(&req, &Limits::default()).unwrap();
        let (st, _) = sql::query(&plan.queries[0], &team, None, TimeRange::default(), 100);
        let shown = explain(st.sql.clone(), st.params.clone()).await;
        assert!(shown.contains("Task Count: 1"), "{name}:\n{shown}");
    }
    // The merge of staged records into the record table (the one write that joins a
    // session's table with a distributed one). Every other statement of every test on
    // Citus runs under `citus.multi_task_query_log_level = error`, which fails one that
    // would touch more than one shard.
    let writes = [(
        write::merge_update(&records::AUTOCOMPLETE),
        vec![
            expr::Param::Text(team.clone()),
            expr::Param::Int(0),
            expr::Param::Int(1),
        ],
    )];
    // The staging table of the merge, as a write's session makes it.
    c.batch_execute(&write::create_stage(&records::AUTOCOMPLETE))
        .await
        .unwrap();
    for (sql, params) in writes {
        let shown = explain(sql.clone(), params).await;
        assert!(shown.contains("Task Count: 1"), "{sql}:\n{shown}");
    }
}

/// `/metrics`' record counts on Citus sum the workers' shards (the coordinator holds no
/// rows of a distributed table). The counts are the statistics collector's, which the
/// workers report a moment after a write: the test waits for them.
#[tokio::test]
async fn record_counts_sum_the_rows_of_every_shard() {
    let schema = Schema::on(Engine::Citus, "counts").await;
    let store = PgStore::open(&schema.url()).await.unwrap();
    let now = Timestamp(1_746_000_000_000_000);
    for users in [30, 12] {
        let team = new_team(&store).await;
        store
            .ingest(&team, autocomplete(users, 1), now)
            .await
            .unwrap();
    }
    let mut seen = 0;
    for _ in 0..300 {
        let counts = store.record_counts().await.unwrap();
        seen = counts
            .iter()
            .find(|(k, _)| *k == records::AUTOCOMPLETE.name)
            .map_or(0, |(_, n)| *n);
        if seen == 42 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, 42);
}
