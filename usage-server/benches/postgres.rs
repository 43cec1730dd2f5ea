//! The six queries of `shared/bench/QUERIES.md` on the PostgreSQL store against the
//! in-memory evaluator, on the same rows, in one run (`bench/postgres.sh`).
//!
//! `postgres --csv PATH --url URL [--runs R] [--duck REPORT]`: loads the CSV into a `TeamData` and, through
//! the store's own import path, into a fresh schema of the database at `URL`; then runs
//! each query `R` times on both as validated plans (the server's code path), checks that
//! the answers are equal, and prints a Markdown table of medians and ratios.

use std::time::Instant;

use usage_core::eval::TeamData;
use usage_core::plan::Limits;
use usage_core::schema::Plan;
use usage_core::schema::records::AUTOCOMPLETE;
use usage_core::time::Timestamp;
use usage_server::store::postgres::PgStore;
use usage_server::store::{NewTeam, RecordStore, StoreOps, TeamStore};

#[path = "../../usage-core/benches/common.rs"]
mod common;
use common::{load, median, plan_of, queries, read_records};

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let usage = "usage: postgres --csv PATH --url postgres://... [--runs R] [--duck REPORT.json]";
    let csv = flag(&args, "--csv").ok_or(usage)?;
    let url = flag(&args, "--url").ok_or(usage)?;
    let runs: usize = flag(&args, "--runs").map_or(Ok(5), |r| r.parse())?;
    // DuckDB's medians on the same CSV (bench/duck.py's report), for the pushdown target
    // of issue 16: PostgreSQL <= 10x DuckDB single-thread.
    let duck: Option<serde_json::Value> = match flag(&args, "--duck") {
        Some(p) => Some(serde_json::from_str(&std::fs::read_to_string(p)?)?),
        None => None,
    };
    let duck_ms = |name: &str| {
        duck.as_ref()
            .and_then(|d| d["queries"][name]["median_s"].as_f64())
            .map(|s| s * 1e3)
    };

    // A fresh schema, dropped at the end.
    let schema = format!("bench_{}", std::process::id());
    let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await?;
    tokio::spawn(conn);
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .await?;
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = PgStore::open(&format!("{url}{sep}options=-csearch_path%3D{schema}")).await?;

    let t = Instant::now();
    let mut team = TeamData::new();
    let (rows, d0) = load(&csv, &mut team)?;
    let mem_load = t.elapsed().as_secs_f64();
    eprintln!("in-memory: loaded {rows} rows in {mem_load:.1} s");

    let id = store
        .create_team(
            NewTeam {
                name: "bench".into(),
                plan: Plan::Enterprise,
                seats: 1,
                credits_per_seat: 1,
                unique_name: false,
            },
            "-",
            Timestamp::now(),
        )
        .await?
        .id;
    let t = Instant::now();
    let records = read_records(&csv)?.map(|r| r.map_err(|e| eprintln!("{e}")));
    let n = store
        .import(&id, &AUTOCOMPLETE, Box::new(records), Timestamp::now())
        .await?
        .ok_or("a bad CSV row")?;
    admin
        .batch_execute(&format!("ANALYZE {schema}.rec_autocomplete"))
        .await?;
    let pg_load = t.elapsed().as_secs_f64();
    eprintln!("PostgreSQL: imported {n} rows in {pg_load:.1} s");

    let version: String = admin.query_one("SHOW server_version", &[]).await?.get(0);
    println!("### {rows} rows: PostgreSQL {version} vs the in-memory evaluator\n");
    println!(
        "| query | in-memory (ms) | PostgreSQL (ms) | PostgreSQL / in-memory | DuckDB, 1 thread (ms) | PostgreSQL / DuckDB | result rows | answers |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for (name, body, _) in queries(d0) {
        let plan = plan_of(&body);
        let limits = Limits::default();
        let (mut mem, mut pg) = (Vec::new(), Vec::new());
        let (mut a, mut b) = (None, None);
        for _ in 0..runs {
            let t = Instant::now();
            a = Some(team.analytics(&plan, &limits)?);
            mem.push(t.elapsed().as_secs_f64());
            let t = Instant::now();
            b = Some(store.analytics(&id, &plan, &limits).await?);
            pg.push(t.elapsed().as_secs_f64());
        }
        let (a, b) = (a.ok_or("no run")?, b.ok_or("no run")?);
        let same = usage_core::testing::compare::check_analytics(&plan, &Ok(b), &Ok(a.clone()));
        let (m, p) = (median(&mut mem) * 1e3, median(&mut pg) * 1e3);
        let (dk, ratio) = match duck_ms(name) {
            Some(d) => (format!("{d:.1}"), format!("{:.2}x", p / d)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "| {name} | {m:.1} | {p:.1} | {:.1}x | {dk} | {ratio} | {} | {} |",
            p / m,
            a.query_results[0].response_items.len(),
            if same.is_ok() { "equal" } else { "DIFFERENT" }
        );
        if let Err(e) = same {
            eprintln!("{name}: answers differ: {e}");
            std::process::exit(1);
        }
    }
    println!(
        "| load | {:.0} | {:.0} | {:.1}x | | | | |",
        mem_load * 1e3,
        pg_load * 1e3,
        pg_load / mem_load
    );
    store.close().await?;
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await?;
    Ok(())
}
