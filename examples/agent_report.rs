//! Agent report over the demo team's last seven days: lines suggested and accepted per day
//! and the most used tools (`AgentAnalytics`), and prompt credits per model (the agent data
//! source of `Analytics`, checked against the raw runs of `AgentAnalytics`).
//!
//! ```sh
//! cargo run --example agent_report
//! ```

use std::sync::Arc;

use chrono::{Days, Utc};
use usage::client::Client;
use usage::client::query::agent;
use usage::core::schema::Permission;
use usage::core::time::Timestamp;
use usage_server::store::Store;
use usage_server::store::memory::MemoryStore;
use usage_server::{demo, http};

/// Prompt credits are counted in hundredths (`promptsUsed` 100 = 1 credit).
fn credits(hundredths: u64) -> String {
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let team = demo::ensure(store.as_ref(), Timestamp::now()).await?;
    let (_, key) = usage_server::cli::create_key(
        store.as_ref(),
        &team,
        Some("agent-report".into()),
        vec![Permission::AnalyticsRead, Permission::TeamsRead],
        "-",
    )
    .await
    .map_err(|f| f.summary)?;
    let server = http::spawn(store, http::Config::default(), "127.0.0.1:0".parse()?).await?;
    let client = Client::builder()
        .base_url(server.url())
        .service_key(key)
        .build()?;

    // The last seven UTC days, today included.
    let today = Utc::now().date_naive();
    let first = today
        .checked_sub_days(Days::new(6))
        .ok_or("date out of range")?;
    let start = first.and_hms_opt(0, 0, 0).ok_or("bad time")?.and_utc();

    // AgentAnalytics: raw entries, one per day for lines, one per tool for tool usage.
    let agent_data = client
        .agent_analytics()
        .lines()
        .tool_usage()
        .runs()
        .start(start)
        .send()
        .await?;
    let lines = agent_data.query_results[0]
        .agent_lines
        .as_ref()
        .map(|l| l.agent_lines.as_slice())
        .unwrap_or_default();
    println!("Agent lines per day since {first}");
    println!(
        "{:<12} {:>10} {:>10} {:>8}",
        "day", "suggested", "accepted", "rate"
    );
    for e in lines {
        let rate = if e.lines_suggested > 0 {
            100.0 * e.lines_accepted as f64 / e.lines_suggested as f64
        } else {
            0.0
        };
        println!(
            "{:<12} {:>10} {:>10} {:>7.1}%",
            e.day.date().to_iso(),
            e.lines_suggested,
            e.lines_accepted,
            rate
        );
    }

    // The agent data source: one record per run, so credits can be summed and grouped like
    // any other custom query.
    let per_model = agent::query()
        .select(agent::prompts_used().sum().alias("prompts"))
        .select(agent::flex_credits_used().sum().alias("flex"))
        .select(agent::agent_id().count().alias("runs"))
        .select(agent::distinct_users().count().alias("users"))
        .filter(agent::date().ge(first))
        .group_by(agent::model().group_by("model"))
        .build()?;
    let results = client.analytics().query(per_model).send().await?;
    println!("\nPrompt credits per model since {first}");
    println!(
        "{:<16} {:>9} {:>9} {:>6} {:>6}",
        "model", "prompt", "flex", "runs", "users"
    );
    let mut total = 0;
    for row in results.rows(0) {
        let prompts = row.get_u64("prompts")?;
        total += prompts;
        println!(
            "{:<16} {:>9} {:>9} {:>6} {:>6}",
            row.get_str("model").unwrap_or("?"),
            credits(prompts),
            credits(row.get_u64("flex")?),
            row.get_u64("runs")?,
            row.get_u64("users")?,
        );
    }
    println!("{:<16} {:>9}", "total", credits(total));

    // The same credits from the raw run entries (`promptsUsed` is omitted when zero, which
    // reads as 0).
    let runs = agent_data.query_results[2]
        .agent_runs
        .as_ref()
        .map(|r| r.agent_runs.as_slice())
        .unwrap_or_default();
    let from_runs: i64 = runs.iter().map(|r| r.prompts_used).sum();
    if u64::try_from(from_runs).ok() != Some(total) {
        return Err(format!(
            "AgentAnalytics runs sum to {from_runs}, the agent data source to {total}"
        )
        .into());
    }
    println!("({} runs in AgentAnalytics, same total)", runs.len());

    let tools = agent_data.query_results[1]
        .agent_tool_usage
        .as_ref()
        .map(|t| t.agent_tool_usage.as_slice())
        .unwrap_or_default();
    println!("\nMost used tools since {first}");
    for t in tools.iter().take(5) {
        println!("{:<16} {:>6}", t.tool, t.count);
    }

    server.shutdown().await;
    Ok(())
}

#[cfg(test)]
#[test]
fn example_runs() {
    main().unwrap();
}
