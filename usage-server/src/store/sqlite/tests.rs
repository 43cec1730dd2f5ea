//! Tests of the SQLite store: its migrations, the conformance suite (with every team
//! held, and with none), a second process's writes seen after a refresh, and eviction
//! under a tiny budget.

use usage_core::JsonPath;
use usage_core::eval::TeamData;
use usage_core::load::parse_record;
use usage_core::schema::Plan;
use usage_core::schema::records::GROUPS;
use usage_core::time::Timestamp;

use crate::store::{NewTeam, RecordStore, Store, TeamStore};

use super::schema::MIGRATIONS;
use super::*;

#[tokio::test]
async fn migrations_apply_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.db");
    let s = SqliteStore::open(&p).await.unwrap();
    assert_eq!(s.migrate().await.unwrap(), MIGRATIONS.len() as u32);
    s.close().await.unwrap();
    let s = SqliteStore::open(&p).await.unwrap();
    assert_eq!(s.migrate().await.unwrap(), 0);
}

#[tokio::test]
async fn conformance() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicUsize::new(0);
    let dir_path = dir.path().to_path_buf();
    super::super::conformance::run_all(|| {
        let p = dir_path.join(format!("c{}.db", n.fetch_add(1, Ordering::Relaxed)));
        async move { Arc::new(SqliteStore::open(&p).await.unwrap()) as Arc<dyn Store> }
    })
    .await;
}

/// Finished deliveries past a webhook's last 100 leave the file.
#[tokio::test]
async fn finished_deliveries_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("s.db");
    let s = SqliteStore::open(&p).await.unwrap();
    let (team, id) = super::super::conformance::webhooks::finished_deliveries_are_pruned(&s).await;
    let held: i64 = rusqlite::Connection::open(&p)
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM webhook_outbox WHERE team_id = ?1 AND webhook_id = ?2",
            rusqlite::params![team, id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(held, usage_core::alerts::DELIVERY_LOG as i64 + 1);
}

/// The store contract, with a cache that holds no team: every query reads its team.
#[tokio::test]
async fn conformance_without_a_cache() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicUsize::new(0);
    let dir_path = dir.path().to_path_buf();
    super::super::conformance::run_all(|| {
        let p = dir_path.join(format!("c{}.db", n.fetch_add(1, Ordering::Relaxed)));
        async move {
            let s = SqliteStore::open_with(&p, CacheConfig::OFF).await.unwrap();
            Arc::new(s) as Arc<dyn Store>
        }
    })
    .await;
}

/// Eviction under a tiny budget keeps the answers (the test the PostgreSQL store runs
/// too); a write through another process is read at the next refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_under_a_tiny_budget_keeps_the_answers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evict.db");
    crate::store::team_cache::tests::eviction_keeps_the_answers(
        |cache| {
            let path = path.clone();
            async move {
                Arc::new(SqliteStore::open_with(&path, cache).await.unwrap()) as Arc<dyn Store>
            }
        },
        Duration::ZERO,
    )
    .await;
}

#[tokio::test]
async fn another_process_sees_writes_after_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("shared.db");
    let server = SqliteStore::open(&p).await.unwrap();
    let admin = SqliteStore::open(&p).await.unwrap();
    let t = admin
        .create_team(
            NewTeam {
                name: "t".into(),
                plan: Plan::Enterprise,
                seats: 1,
                credits_per_seat: 1,
                unique_name: false,
            },
            "-",
            Timestamp::now(),
        )
        .await
        .unwrap();
    server.preload().await.unwrap();
    assert!(!server.has_group_id(&t.id, "g").await.unwrap());
    let rec = parse_record(
        &GROUPS,
        &serde_json::json!({"group_id": "g", "group_name": "G"}),
        &JsonPath::root(),
    )
    .unwrap();
    admin
        .import(
            &t.id,
            &GROUPS,
            Box::new(std::iter::once(Ok(rec))),
            Timestamp::now(),
        )
        .await
        .unwrap();
    // The cached team is stale until the change counter is polled.
    assert!(!server.has_group_id(&t.id, "g").await.unwrap());
    server.refresh().await.unwrap();
    assert!(server.has_group_id(&t.id, "g").await.unwrap());
}

#[tokio::test]
async fn files_it_creates_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("private.db");
    let s = SqliteStore::open(&p).await.unwrap();
    s.migrate().await.unwrap();
    s.create_team(
        NewTeam {
            name: "t".into(),
            plan: Plan::Enterprise,
            seats: 1,
            credits_per_seat: 500,
            unique_name: false,
        },
        "-",
        Timestamp::now(),
    )
    .await
    .unwrap();
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        seen.push((entry.file_name().to_string_lossy().into_owned(), mode));
    }
    seen.sort();
    let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"private.db"), "{seen:?}");
    assert!(names.contains(&"private.db-wal"), "{seen:?}");
    for (name, mode) in &seen {
        assert_eq!(*mode, 0o600, "{name} has mode {mode:o}");
    }
    s.close().await.unwrap();
}

/// A write of this process that waits for another process's write lock (a CLI `import`)
/// holds up no read: keys, teams, caps, billing and health are answered while it waits.
#[tokio::test]
async fn reads_never_wait_behind_a_write_waiting_for_the_lock() {
    use crate::store::{BillingStore, CapStore};
    use usage_core::plan::{CapAction, CapScope};

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("busy.db");
    let s = SqliteStore::open(&p).await.unwrap();
    let t = s
        .create_team(
            NewTeam {
                name: "t".into(),
                plan: Plan::Enterprise,
                seats: 2,
                credits_per_seat: 10,
                unique_name: false,
            },
            "-",
            Timestamp::now(),
        )
        .await
        .unwrap();
    // Another process takes the write lock and keeps it.
    let other = rusqlite::Connection::open(&p).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let writer = {
        let s = s.clone();
        let team = t.id.clone();
        tokio::spawn(async move {
            s.change_cap(
                &team,
                &CapScope::Team,
                CapAction::Set(5),
                "key_1",
                Timestamp::now(),
            )
            .await
        })
    };
    // Let the write reach its wait for the lock.
    while s.inner.conn.try_lock().is_ok() && !writer.is_finished() {
        tokio::task::yield_now().await;
    }
    assert_eq!(s.key_by_hash(&[7; 32]).await.unwrap(), None);
    assert_eq!(s.teams().await.unwrap().len(), 1);
    assert_eq!(s.cap(&t.id, &CapScope::Team).await.unwrap(), None);
    assert_eq!(s.billing(&t.id).await.unwrap().num_seats, 2);
    s.health().await.unwrap();
    assert!(!writer.is_finished(), "the write still waits for the lock");
    other.execute_batch("COMMIT").unwrap();
    writer.await.unwrap().unwrap();
    assert_eq!(s.cap(&t.id, &CapScope::Team).await.unwrap(), Some(5));
}

/// A store of the JSON-row layout (migration 1 only), written as the version before
/// segments wrote it: one JSON row per record, a change counter per write.
fn write_old_layout(path: &std::path::Path, data: &usage_core::testing::data::Dataset) -> TeamData {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied INTEGER NOT NULL)",
    )
    .unwrap();
    conn.execute_batch(MIGRATIONS[0].sql).unwrap();
    conn.execute("INSERT INTO migrations VALUES (1, 0)", [])
        .unwrap();
    // One transaction: a sync per row would make the test wait on a busy disk.
    conn.execute_batch("BEGIN").unwrap();
    conn.execute(
        "INSERT INTO teams (id, name, created, seq) VALUES ('t', 't', 0, 1)",
        [],
    )
    .unwrap();
    conn.execute("UPDATE meta SET value = 1", []).unwrap();
    let mut team = TeamData::new();
    for (i, batch) in data.parsed().iter().enumerate() {
        let seq = i as i64 + 2;
        let now = Timestamp(1_746_000_000_000_000 + i as i64 * 1_000_000);
        let batch = team.prepare(batch, now).expect("consistent").into_owned();
        team.apply(&batch);
        for r in &batch.records {
            let body = serde_json::Value::Object(r.to_json()).to_string();
            conn.execute(
                "INSERT OR REPLACE INTO records (team_id, kind, identity, seq, body) VALUES ('t', ?1, ?2, ?3, ?4)",
                rusqlite::params![batch.kind.name, r.identity(), seq, body],
            )
            .unwrap();
        }
        conn.execute("UPDATE teams SET seq = ?1", [seq]).unwrap();
        conn.execute("UPDATE meta SET value = ?1", [seq]).unwrap();
    }
    // A row no version could read: it stays where it is.
    conn.execute(
        "INSERT INTO records (team_id, kind, identity, seq, body) VALUES ('t', 'autocomplete', 'x', 99, '{\"api_key\":')",
        [],
    )
    .unwrap();
    conn.execute_batch("COMMIT").unwrap();
    team
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Opening a store of the JSON-row layout converts it to segments (migration 2, as
    /// `usage-server migrate` does): every answer is the one the records give, the row
    /// that cannot be read stays in place and is reported, and the converted team takes
    /// writes like any other.
    #[test]
    fn an_old_layout_store_converts_with_the_same_answers(
        data in usage_core::testing::data::arb_dataset(usage_core::testing::Pool::default()),
        reqs in proptest::collection::vec(usage_core::testing::arb_analytics_request(usage_core::testing::Pool::default()), 3),
        choices in proptest::collection::vec(proptest::prelude::any::<u32>(), 64),
    ) {
        use usage_core::plan::Limits;
        use usage_core::testing::Choices;
        use usage_core::testing::compare::{agent_plan, check_analytics, user_page_plan};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.db");
        let team = write_old_layout(&p, &data);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let s = SqliteStore::open(&p).await.unwrap();
            // Opening applied migration 2, with its conversion, and the webhooks' 3.
            proptest::prop_assert_eq!(s.migrate().await.unwrap(), 2);
            let mut c = Choices::new(choices);
            for req in &reqs {
                let Ok(plan) = usage_core::validate::analytics(req, &Limits::default()) else { continue };
                let limits = Limits::default();
                let got = s.analytics("t", &plan, &limits).await.map_err(|e| match e {
                    crate::store::StoreError::Eval(e) => e,
                    other => panic!("{other}"),
                });
                check_analytics(&plan, &got, &team.analytics(&plan, &limits))?;
            }
            let up = user_page_plan(&data, &mut c);
            proptest::prop_assert_eq!(s.user_page("t", &up).await.ok(), team.user_page(&up).ok());
            let ap = agent_plan(&data, &mut c);
            proptest::prop_assert_eq!(s.agent("t", &ap).await.ok(), team.agent(&ap).ok());
            // What the conversion left behind is met at start (counted for `/healthz`,
            // logged) and listed by the scan, by its row id.
            proptest::prop_assert_eq!(s.unreadable_count(), 0);
            s.preload().await.unwrap();
            proptest::prop_assert_eq!(s.unreadable_count(), 1);
            let bad = s.unreadable_rows().await.unwrap();
            proptest::prop_assert_eq!(bad.len(), 1);
            proptest::prop_assert_eq!(s.unreadable_count(), 1);
            s.close().await.unwrap();
            let (left, id): (i64, i64) = rusqlite::Connection::open(&p).unwrap()
                .query_row("SELECT COUNT(*), max(id) FROM records", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            proptest::prop_assert_eq!(left, 1);
            proptest::prop_assert_eq!(&bad[0].row, &format!("records id {id}"));
            proptest::prop_assert_eq!(&bad[0].team, "t");
            proptest::prop_assert_eq!(&bad[0].kind, "autocomplete");
            proptest::prop_assert!(bad[0].reason.contains("not JSON"), "{}", bad[0].reason);
            Ok(())
        })?;
    }
}

fn log_rows(p: &std::path::Path) -> (i64, i64) {
    let c = rusqlite::Connection::open(p).unwrap();
    let n = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    (
        n("SELECT COUNT(*) FROM log"),
        n("SELECT COUNT(*) FROM segments"),
    )
}

/// A kind's first write is its segment; later writes are log entries; a long log folds
/// into a new segment. A process that held the team before the fold reloads it from the
/// new segment and answers like the one that folded it and like a fresh one.
#[tokio::test]
async fn compaction_folds_the_log_and_other_processes_follow() {
    use crate::store::conformance::{batch, team, totals};
    use usage_core::schema::records::AUTOCOMPLETE;

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fold.db");
    let server = SqliteStore::open(&p).await.unwrap();
    let other = SqliteStore::open(&p).await.unwrap();
    // Folds happen where this test says, not in the background of a refresh.
    server.set_auto_compact(false);
    other.set_auto_compact(false);
    let t = team(&server, "t", Plan::Enterprise).await;
    let hour = |i: usize| Timestamp(1_746_057_600_000_000 + i as i64 * 3_600_000_000).to_rfc3339();
    let write = |i: usize| {
        batch(
            &AUTOCOMPLETE,
            vec![serde_json::json!({"api_key": "k", "hour": hour(i % 50),
                "language": "rust", "ide": "vscode", "version": "1.0.0",
                "num_acceptances": i, "num_lines_accepted": 1, "num_bytes_accepted": 1})],
        )
    };
    for i in 0..70 {
        server.ingest(&t, write(i), Timestamp::now()).await.unwrap();
    }
    assert_eq!(log_rows(&p), (69, 1));
    other.preload().await.unwrap();
    let before = totals(&server, &t, None).await.unwrap();
    assert_eq!(totals(&other, &t, None).await.unwrap(), before);
    // Records 50..70 replaced 0..20 (same identity): the sum is of the 50 kept.
    let want: usize = (20..70).sum();
    assert_eq!(before.0, want.to_string());

    assert_eq!(server.compact().await.unwrap(), 1);
    assert_eq!(log_rows(&p), (0, 1));
    assert_eq!(server.compact().await.unwrap(), 0, "nothing left to fold");
    assert_eq!(totals(&server, &t, None).await.unwrap(), before);

    // One more write after the fold: `other` must take the new segment whole, then it.
    server
        .ingest(&t, write(70), Timestamp::now())
        .await
        .unwrap();
    assert_eq!(log_rows(&p), (1, 1));
    other.refresh().await.unwrap();
    let after = totals(&server, &t, None).await.unwrap();
    assert_eq!(after.0, (want - 20 + 70).to_string());
    assert_eq!(totals(&other, &t, None).await.unwrap(), after);
    assert_eq!(
        other.compact().await.unwrap(),
        0,
        "one entry is no log to fold"
    );
    let fresh = SqliteStore::open(&p).await.unwrap();
    assert_eq!(totals(&fresh, &t, None).await.unwrap(), after);
}

/// Contract section 11 (v5): a stored row is unreadable whatever is wrong with it, its
/// bytes, its storage type or its value, in every column of `segments` and `log` (and the
/// team's change counter). Each edit of team A's rows: the store opens and loads, counts
/// the row (logged once) and lists it with team, kind and row; team A answers without
/// what the row held and takes writes; team B is untouched.
#[tokio::test]
async fn a_row_wrong_in_any_column_is_unreadable_and_touches_no_other_team() {
    use crate::store::conformance::{batch, team, totals};
    use usage_core::schema::records::AUTOCOMPLETE;
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.db");
    let (a, b) = {
        let s = SqliteStore::open(&clean).await.unwrap();
        s.set_auto_compact(false);
        let (a, b) = (
            team(&s, "a", Plan::Enterprise).await,
            team(&s, "b", Plan::Enterprise).await,
        );
        // Team A: a segment (1), then two log entries (10, 100); team B: a segment (7).
        let write = |key: &str, n: i64| {
            batch(
                &AUTOCOMPLETE,
                vec![
                    serde_json::json!({"api_key": key, "hour": "2025-05-01T10:00:00Z",
                    "language": "GO", "ide": "vscode", "version": "1", "num_acceptances": n,
                    "num_lines_accepted": 0, "num_bytes_accepted": 0}),
                ],
            )
        };
        for (t, key, n) in [
            (&a, "k1", 1),
            (&a, "k2", 10),
            (&a, "k3", 100),
            (&b, "k1", 7),
        ] {
            s.ingest(t, write(key, n), Timestamp::now()).await.unwrap();
        }
        s.close().await.unwrap();
        (a, b)
    };
    assert_eq!(log_rows(&clean), (2, 2));
    // (what is edited, the edit, team A's sum after it)
    let seg = |set: &str| format!("UPDATE segments SET {set} WHERE team_id = ?1");
    let last_log = |set: &str| {
        format!(
            "UPDATE log SET {set} WHERE team_id = ?1 AND seq = (SELECT max(seq) FROM log WHERE team_id = ?1)"
        )
    };
    let cases: Vec<(&str, String, &str)> = vec![
        // segments: every column, wrong storage types and wrong values.
        (
            "segments.team_id blob",
            seg("team_id = CAST(team_id AS BLOB)"),
            "110",
        ),
        ("segments.team_id unknown", seg("team_id = 'nobody'"), "110"),
        (
            "segments.kind blob",
            seg("kind = CAST(kind AS BLOB)"),
            "110",
        ),
        ("segments.kind unknown", seg("kind = 'nothing'"), "110"),
        ("segments.part text", seg("part = 'abc'"), "110"),
        ("segments.part real", seg("part = 0.5"), "110"),
        ("segments.part gap", seg("part = 3"), "110"),
        ("segments.seq text", seg("seq = 'abc'"), "110"),
        ("segments.seq blob", seg("seq = x'00'"), "110"),
        ("segments.rows real", seg("rows = 1.5"), "110"),
        ("segments.rows text", seg("rows = 'many'"), "110"),
        ("segments.body text", seg("body = 'abc'"), "110"),
        ("segments.body integer", seg("body = 5"), "110"),
        ("segments.body bytes", seg("body = x'00'"), "110"),
        // log: every column, of the last entry.
        (
            "log.team_id blob",
            last_log("team_id = CAST(team_id AS BLOB)"),
            "11",
        ),
        ("log.kind blob", last_log("kind = x'ff'"), "11"),
        ("log.kind unknown", last_log("kind = 'nothing'"), "11"),
        ("log.part text", last_log("part = 'abc'"), "11"),
        ("log.part gap", last_log("part = 1"), "11"),
        ("log.seq text", last_log("seq = 'abc'"), "11"),
        ("log.seq real", last_log("seq = 2.5"), "11"),
        ("log.rows blob", last_log("rows = x'01'"), "11"),
        ("log.body text", last_log("body = 'abc'"), "11"),
        ("log.body real", last_log("body = 2.5"), "11"),
        ("log.body bytes", last_log("body = x'0000'"), "11"),
        // The team's change counter: its rows are all read all the same.
        (
            "teams.seq text",
            "UPDATE teams SET seq = 'abc' WHERE id = ?1".into(),
            "111",
        ),
    ];
    for (i, (what, edit, want)) in cases.iter().enumerate() {
        let p = dir.path().join(format!("case{i}.db"));
        std::fs::copy(&clean, &p).unwrap();
        let c = rusqlite::Connection::open(&p).unwrap();
        let changed = c.execute(edit, [&a]).unwrap();
        assert!(changed >= 1, "{what}: nothing edited");
        drop(c);
        let s = SqliteStore::open(&p).await.unwrap();
        s.preload()
            .await
            .unwrap_or_else(|e| panic!("{what}: the store does not load: {e}"));
        assert_eq!(
            s.unreadable_count(),
            1,
            "{what}: {:?}",
            s.inner.unreadable.rows()
        );
        let rows = s
            .unreadable_rows()
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(rows.len(), 1, "{what}: {rows:?}");
        let r = &rows[0];
        let team_of_row = if what.ends_with("team_id unknown") {
            "nobody"
        } else {
            a.as_str()
        };
        assert_eq!(r.team, team_of_row, "{what}: {r:?}");
        assert!(!r.row.is_empty() && !r.reason.is_empty(), "{what}: {r:?}");
        if what.starts_with("segments") || what.starts_with("log") {
            assert!(
                ["autocomplete", "nothing", "\u{fffd}"].contains(&r.kind.as_str()),
                "{what}: {r:?}"
            );
        }
        // Met again by the scan: still one row, logged once.
        assert_eq!(s.unreadable_count(), 1, "{what}");
        assert_eq!(
            totals(&s, &a, None).await.unwrap().0,
            *want,
            "{what}: team A answers without the row"
        );
        assert_eq!(totals(&s, &b, None).await.unwrap().0, "7", "{what}: team B");
        // Team A still takes writes, seen at once.
        let more = batch(
            &AUTOCOMPLETE,
            vec![
                serde_json::json!({"api_key": "k9", "hour": "2025-05-02T10:00:00Z",
                "language": "GO", "ide": "vscode", "version": "1", "num_acceptances": 1000,
                "num_lines_accepted": 0, "num_bytes_accepted": 0}),
            ],
        );
        s.ingest(&a, more, Timestamp::now())
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let after: i64 = totals(&s, &a, None).await.unwrap().0.parse().unwrap();
        assert_eq!(after, want.parse::<i64>().unwrap() + 1000, "{what}");
        s.close().await.unwrap();
        // The row stays in place: a fresh store meets it again (but the team's change
        // counter, which the write set anew).
        let again = SqliteStore::open(&p).await.unwrap();
        again.preload().await.unwrap();
        let left = u64::from(!what.starts_with("teams.seq"));
        assert_eq!(again.unreadable_count(), left, "{what}");
        assert_eq!(
            totals(&again, &a, None).await.unwrap().0,
            (want.parse::<i64>().unwrap() + 1000).to_string(),
            "{what}"
        );
    }
}
