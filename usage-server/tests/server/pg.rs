//! Fresh PostgreSQL schemas for the tests that run on the `postgres://` store: the local
//! database (127.0.0.1:5432, trust auth, database `test`; env `USAGE_TEST_POSTGRES`
//! overrides it). A test that needs it fails, never skips, when it is down.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

/// The URL of the test database.
pub fn base_url() -> String {
    std::env::var("USAGE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Runs `f` with a client of the test database, on a thread of its own (callers may be
/// inside a runtime).
fn with_client<T: Send + 'static>(
    f: impl FnOnce(
        tokio_postgres::Client,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>
    + Send
    + 'static,
) -> T {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let (c, conn) = tokio_postgres::connect(&base_url(), tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "PostgreSQL at {} is required for these tests: {e}",
                        base_url()
                    )
                });
            tokio::spawn(conn);
            f(c).await
        })
    })
    .join()
    .expect("PostgreSQL setup")
}

/// The `postgres://` store spec of a new, empty schema `it_<pid>_<n>`. Schemas of test
/// processes that no longer run are dropped first, so runs leave nothing behind.
pub fn fresh_store() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "it_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let create = name.clone();
    with_client(move |c| {
        Box::pin(async move {
            let rows = c
                .query(
                    "SELECT nspname FROM pg_namespace WHERE nspname ~ '^it_[0-9]+_[0-9]+$'",
                    &[],
                )
                .await
                .expect("list schemas");
            for r in rows {
                let s: String = r.get(0);
                let pid = s.split('_').nth(1).unwrap_or_default();
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = c
                        .batch_execute(&format!("DROP SCHEMA IF EXISTS {s} CASCADE"))
                        .await;
                }
            }
            c.batch_execute(&format!("CREATE SCHEMA {create}"))
                .await
                .expect("create schema");
        })
    });
    format!("{}?options=-csearch_path%3D{name}", base_url())
}
