//! The test harness shared by the server's HTTP suite (`usage-server/tests/server`) and the
//! facade's client tests (`tests/client`): a server in this process on an ephemeral port,
//! over a fresh store of any kind, with a team and a key of every permission.
//!
//! Built only with the `testing` feature, which only dev-dependencies enable.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use usage_core::schema::{Permission, Plan};
use usage_core::time::Timestamp;

use crate::auth::rate::RateConfig;
use crate::http::{self, Config, Handle};
use crate::store::{self, NewTeam, Store};

/// Every permission.
pub const ALL: [Permission; 5] = [
    Permission::AnalyticsRead,
    Permission::TeamsRead,
    Permission::BillingRead,
    Permission::BillingWrite,
    Permission::UsageWrite,
];

/// A config whose rate limit no test reaches.
pub fn fast_config() -> Config {
    Config {
        rate: RateConfig {
            per_minute: 1_000_000,
            burst: 1_000_000,
        },
        ..Config::default()
    }
}

/// Creates a team with `plan`, 12 seats and 500 credits per seat; its id.
///
/// # Panics
/// When the store fails.
pub async fn add_team(store: &dyn Store, name: &str, plan: Plan) -> String {
    store
        .create_team(
            NewTeam {
                name: name.into(),
                plan,
                seats: 12,
                credits_per_seat: 500,
                unique_name: false,
            },
            "-",
            Timestamp::now(),
        )
        .await
        .unwrap()
        .id
}

/// Creates a key of `team` with `perms`; the service key.
///
/// # Panics
/// When the key cannot be made (unknown team, no permission, store failure).
pub async fn make_key(store: &dyn Store, team: &str, perms: &[Permission]) -> String {
    crate::cli::create_key(store, team, None, perms.to_vec(), "-")
        .await
        .map_err(|f| f.summary)
        .unwrap()
        .1
}

/// A kind of store the tests run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestStore {
    /// `memory:`.
    Memory,
    /// `sqlite:PATH`, a file in the test's temp dir.
    Sqlite,
    /// `postgres://…`, a schema of its own in the test database ([`fresh_postgres`]).
    Postgres,
    /// `postgres://…` on the coordinator of a Citus cluster: a schema of its own in the
    /// Citus test database ([`fresh_citus`]), whose tables the store distributes itself.
    Citus,
}

impl TestStore {
    /// Every kind, in this order.
    pub const EVERY: [TestStore; 4] = [
        TestStore::Memory,
        TestStore::Sqlite,
        TestStore::Postgres,
        TestStore::Citus,
    ];

    /// `memory`, `sqlite`, `postgres` or `citus`.
    pub fn name(self) -> &'static str {
        match self {
            TestStore::Memory => "memory",
            TestStore::Sqlite => "sqlite",
            TestStore::Postgres => "postgres",
            TestStore::Citus => "citus",
        }
    }

    /// Whether the store is the PostgreSQL store (on plain PostgreSQL or on Citus).
    pub fn is_postgres(self) -> bool {
        matches!(self, TestStore::Postgres | TestStore::Citus)
    }

    /// Whether the store keeps its data when closed.
    pub fn durable(self) -> bool {
        self != TestStore::Memory
    }

    /// The `--store` value of a new, empty store of this kind; a SQLite file goes in `dir`.
    ///
    /// # Panics
    /// [`TestStore::Postgres`] and [`TestStore::Citus`] when their test database is down.
    pub fn fresh_spec(self, dir: &Path) -> String {
        match self {
            TestStore::Memory => "memory:".to_string(),
            TestStore::Sqlite => format!("sqlite:{}", dir.join("usage.db").display()),
            TestStore::Postgres => fresh_postgres(),
            TestStore::Citus => fresh_citus(),
        }
    }
}

/// The store's team-data cache as `serve` runs it: PostgreSQL answers from it once a team
/// is loaded, by SQL while the load runs; SQLite waits for the load.
const SERVED: store::CacheConfig = store::CacheConfig {
    bytes: 1 << 30,
    wait_for_load: false,
};

/// A server in this process on an ephemeral port, over a fresh store with one team and a
/// key of that team with every permission.
pub struct TestServer {
    /// The `--store` value, to open the same store again.
    pub spec: String,
    /// The store the server serves.
    pub store: Arc<dyn Store>,
    /// The server.
    pub server: Handle,
    /// The team's id.
    pub team: String,
    /// A key of the team with every permission.
    pub key: String,
    /// Holds a SQLite store's file.
    pub dir: tempfile::TempDir,
}

impl TestServer {
    /// A fresh store of `kind`, the team `make_team` makes in it, a key of that team with
    /// every permission, and a server with `config`.
    ///
    /// # Panics
    /// When the store cannot be opened or the server cannot start.
    pub async fn start(
        kind: TestStore,
        config: Config,
        make_team: impl AsyncFnOnce(&dyn Store) -> String,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let spec = kind.fresh_spec(dir.path());
        let store = store::open_with(&spec, SERVED)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
        let team = make_team(store.as_ref()).await;
        let key = make_key(store.as_ref(), &team, &ALL).await;
        let server = serve(&store, config).await;
        TestServer {
            spec,
            store,
            server,
            team,
            key,
            dir,
        }
    }

    /// The same store closed and opened again, under a new server with `config`.
    ///
    /// # Panics
    /// When the store cannot be opened again or the server cannot start.
    pub async fn reopen(self, config: Config) -> TestServer {
        self.server.shutdown().await;
        drop(self.store);
        let store = store::open_with(&self.spec, SERVED).await.unwrap();
        let server = serve(&store, config).await;
        TestServer {
            store,
            server,
            ..self
        }
    }
}

/// A server over `store` on an ephemeral port of 127.0.0.1.
async fn serve(store: &Arc<dyn Store>, config: Config) -> Handle {
    http::spawn(store.clone(), config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// The URL of the test database: 127.0.0.1:5432, trust auth, database `test`; the
/// environment variable `USAGE_TEST_POSTGRES` overrides it.
pub fn postgres_url() -> String {
    std::env::var("USAGE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// The URL of the Citus test database, on the coordinator of the local cluster of
/// `../shared/citus` (`cluster.sh start`, then `cluster.sh createdb usage_test`, which
/// `.ci/run` does): 127.0.0.1:5440, database `usage_test`; the environment variable
/// `USAGE_TEST_CITUS` overrides it.
pub fn citus_url() -> String {
    std::env::var("USAGE_TEST_CITUS")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5440/usage_test".into())
}

/// The session options every test on Citus adds to its store URL: a statement that would
/// run on more than one shard fails, so a test on Citus fails unless each statement of a
/// team runs on the team's shard alone.
pub const CITUS_TEST_OPTIONS: &str = "%20-ccitus.multi_task_query_log_level%3Derror";

/// Runs `f` with a client of the database at `url`, on a thread of its own (callers may be
/// inside a runtime).
fn with_database<T: Send + 'static>(
    url: String,
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
            let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| {
                    panic!("the test database {url} is required for these tests: {e}")
                });
            tokio::spawn(conn);
            f(c).await
        })
    })
    .join()
    .expect("test database setup")
}

/// The `postgres://` store spec of a new, empty schema `it_<pid>_<n>` of the test database
/// ([`postgres_url`]). Schemas of test processes that no longer run are dropped first, so
/// runs leave nothing behind.
///
/// # Panics
/// When the test database is down: a test that needs it fails, never skips.
pub fn fresh_postgres() -> String {
    fresh_schema(postgres_url())
}

/// The `postgres://` store spec of a new, empty schema of the Citus test database
/// ([`citus_url`]), as [`fresh_postgres`], with [`CITUS_TEST_OPTIONS`].
///
/// # Panics
/// When the Citus cluster is down or has no test database: a test that needs it fails,
/// never skips.
pub fn fresh_citus() -> String {
    format!("{}{CITUS_TEST_OPTIONS}", fresh_schema(citus_url()))
}

/// A new, empty schema `it_<pid>_<n>` of the database at `base`, as a store spec.
fn fresh_schema(base: String) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!(
        "it_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let create = name.clone();
    with_database(base.clone(), move |c| {
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
    format!("{base}?options=-csearch_path%3D{name}")
}
