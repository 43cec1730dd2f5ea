//! Add-on credit caps at team, group and user scope: set, read back, clear.
//!
//! A cap is always per user: a team or group cap applies to each of its users on their own.
//! `GetUsageConfig` reads the cap set at exactly one scope; the cap that applies to a user
//! is their own, else the smallest of their groups', else the team's.
//!
//! ```sh
//! cargo run --example caps
//! ```

use std::sync::Arc;

use serde_json::json;
use usage::client::{Client, Scope};
use usage::core::schema::{Permission, Plan};
use usage::core::time::Timestamp;
use usage_server::http;
use usage_server::store::memory::MemoryStore;
use usage_server::store::{NewTeam, Store, effective_cap};

async fn show(client: &Client, scopes: &[Scope]) -> Result<(), usage::client::Error> {
    for scope in scopes {
        let cap = client.get_usage_config(scope.clone()).send().await?;
        let cap = cap.map_or_else(|| "no cap".to_string(), |c| c.to_string());
        let label = match scope {
            Scope::Team => "team".to_string(),
            Scope::Group(id) => format!("group {id}"),
            Scope::User(email) => format!("user {email}"),
        };
        println!("  {label:<24} {cap}");
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let team = store
        .create_team(
            NewTeam {
                name: "acme".into(),
                plan: Plan::Enterprise,
                seats: 3,
                credits_per_seat: 500,
                unique_name: false,
            },
            "-",
            Timestamp::now(),
        )
        .await?
        .id;
    let (_, key) = usage_server::cli::create_key(
        store.as_ref(),
        &team,
        Some("billing-admin".into()),
        vec![
            Permission::BillingRead,
            Permission::BillingWrite,
            Permission::UsageWrite,
        ],
        "-",
    )
    .await
    .map_err(|f| f.summary)?;
    let server = http::spawn(
        store.clone(),
        http::Config::default(),
        "127.0.0.1:0".parse()?,
    )
    .await?;
    let client = Client::builder()
        .base_url(server.url())
        .service_key(key)
        .build()?;

    // Two groups and three users, loaded with the Ingest extension.
    client
        .ingest("groups")
        .records([
            json!({"group_id": "g-eng", "group_name": "engineering"}),
            json!({"group_id": "g-interns", "group_name": "interns"}),
        ])
        .send()
        .await?;
    client
        .ingest("users")
        .records([
            json!({"email": "ada@acme.example", "name": "Ada", "api_key": "k-ada", "groups": ["g-eng"]}),
            json!({"email": "bo@acme.example", "name": "Bo", "api_key": "k-bo", "groups": ["g-eng", "g-interns"]}),
            json!({"email": "cy@acme.example", "name": "Cy", "api_key": "k-cy"}),
        ])
        .send()
        .await?;

    let scopes = [
        Scope::Team,
        Scope::Group("g-eng".into()),
        Scope::Group("g-interns".into()),
        Scope::User("ada@acme.example".into()),
    ];
    println!("Caps before any change:");
    show(&client, &scopes).await?;

    client.set_usage_cap(Scope::Team, 1_000).send().await?;
    client
        .set_usage_cap(Scope::Group("g-eng".into()), 400)
        .send()
        .await?;
    client
        .set_usage_cap(Scope::Group("g-interns".into()), 0)
        .send()
        .await?;
    client
        .set_usage_cap(Scope::User("ada@acme.example".into()), 2_500)
        .send()
        .await?;
    println!("\nAfter setting team 1000, engineering 400, interns 0, ada 2500:");
    show(&client, &scopes).await?;

    // Which cap applies to whom (the server's view; also `usage-server effective-cap`).
    println!("\nThe cap that applies to each user:");
    for email in ["ada@acme.example", "bo@acme.example", "cy@acme.example"] {
        let applies = match effective_cap(store.as_ref(), &team, email).await? {
            Some((cap, source)) => format!("{cap} (from {source})"),
            None => "no cap".into(),
        };
        println!("  {email:<20} {applies}");
    }

    client
        .clear_usage_cap(Scope::Group("g-interns".into()))
        .send()
        .await?;
    client.clear_usage_cap(Scope::Team).send().await?;
    println!("\nAfter clearing the interns and team caps:");
    show(&client, &scopes).await?;

    server.shutdown().await;
    Ok(())
}

#[cfg(test)]
#[test]
fn example_runs() {
    main().unwrap();
}
