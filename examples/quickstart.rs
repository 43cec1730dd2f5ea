//! Quick start: a `usage-server` in this process serving the demo team, a service key, and
//! one typed query through the client, printed as a table.
//!
//! ```sh
//! cargo run --example quickstart
//! ```
//!
//! Against a server of your own (`usage-server serve --demo` prints a key), only the
//! client part is needed: `Client::builder().base_url(..).service_key(..).build()`.

use std::sync::Arc;

use chrono::{Days, Utc};
use usage::client::Client;
use usage::client::query::autocomplete as ac;
use usage::core::schema::Permission;
use usage::core::time::Timestamp;
use usage_server::store::Store;
use usage_server::store::memory::MemoryStore;
use usage_server::{demo, http};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A server on an ephemeral port, over a memory store holding the demo team (240 users,
    // 90 days of records ending today), and a key that may run queries.
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let team = demo::ensure(store.as_ref(), Timestamp::now()).await?;
    let (_key_id, key) = usage_server::cli::create_key(
        store.as_ref(),
        &team,
        Some("quickstart".into()),
        vec![Permission::AnalyticsRead],
        "-",
    )
    .await
    .map_err(|f| f.summary)?;
    let server = http::spawn(store, http::Config::default(), "127.0.0.1:0".parse()?).await?;

    // The client: a base URL and a service key.
    let client = Client::builder()
        .base_url(server.url())
        .service_key(key)
        .build()?;

    // Autocomplete per language over the last 30 days. The field functions are typed per
    // data source: a chat field or a SUM of a dimension would not compile, and `build()`
    // checks the rest (aggregations all-or-none, unique aliases) as the server would.
    let since = Utc::now()
        .date_naive()
        .checked_sub_days(Days::new(29))
        .ok_or("date out of range")?;
    let per_language = ac::query()
        .select(ac::num_acceptances().sum().alias("accepted"))
        .select(ac::num_lines_accepted().sum().alias("lines"))
        .select(ac::num_acceptances().avg().alias("per_hour"))
        .select(ac::distinct_users().count().alias("developers"))
        .filter(ac::date().ge(since))
        .group_by(ac::language().group_by("language"))
        .build()?;
    let results = client.analytics().query(per_language).send().await?;

    println!("Autocomplete since {since}, on {}", server.url());
    println!(
        "{:<12} {:>9} {:>9} {:>9} {:>10}",
        "language", "accepted", "lines", "per hour", "developers"
    );
    let mut total = 0;
    for row in results.rows(0) {
        let accepted = row.get_u64("accepted")?;
        total += accepted;
        println!(
            "{:<12} {:>9} {:>9} {:>9.2} {:>10}",
            row.get_str("language").unwrap_or("?"),
            accepted,
            row.get_u64("lines")?,
            row.get_f64("per_hour")?,
            row.get_u64("developers")?,
        );
    }
    println!("{:<12} {:>9}", "total", total);

    server.shutdown().await;
    Ok(())
}

#[cfg(test)]
#[test]
fn example_runs() {
    main().unwrap();
}
