//! Tests of the SQLite store: its migrations, the conformance suite, and a second
//! process's writes seen after a refresh.

use usage_core::JsonPath;
use usage_core::load::parse_record;
use usage_core::schema::Plan;
use usage_core::schema::records::GROUPS;
use usage_core::time::Timestamp;

use crate::store::{NewTeam, RecordStore, TeamStore};

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
            },
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
        },
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
            },
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
