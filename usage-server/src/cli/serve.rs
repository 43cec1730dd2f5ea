//! `serve`: its flags, the line it prints when it is ready (for a person at a terminal,
//! or the JSON line of contract section 10), the demo's key, and the server's run until a
//! signal.

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Args;
use serde_json::{Value, json};
use usage_core::plan::Limits;
use usage_core::time::Timestamp;

use super::{Failure, create_key};
use crate::auth::rate::RateConfig;
use crate::http;
use crate::store::{self, Store};

/// Flags of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Fill an empty store with a demo team and print a fresh full-permission key.
    #[arg(long)]
    pub demo: bool,
    /// Sustained requests per minute per key.
    #[arg(long, default_value_t = 600)]
    pub rate_per_minute: u32,
    /// Requests a key may send at once.
    #[arg(long, default_value_t = 60)]
    pub rate_burst: u32,
    /// Body limit of the query operations, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body_bytes: usize,
    /// Body limit of `Ingest`, in bytes.
    #[arg(long, default_value_t = 16 << 20)]
    pub max_ingest_bytes: usize,
    /// Items of a whole `Analytics` answer, all its queries together.
    #[arg(long, default_value_t = 100_000)]
    pub max_result_items: usize,
    /// Bytes of a whole `Analytics` answer, counted as its aliases and values (suffixes K,
    /// M, G). Default: 64M.
    #[arg(long, value_parser = parse_bytes)]
    pub max_result_bytes: Option<usize>,
    /// Queries computed at once, all teams together. Default: one per core (at least 2).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub query_slots: Option<u16>,
    /// Queries of one team computed or being sent at once; a team's further queries wait
    /// in its own queue. Default: half the query slots (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub team_query_slots: Option<u16>,
    /// Memory for the team-data cache of the teams served (SQLite and PostgreSQL), in
    /// bytes (suffixes K, M, G: powers of 1024); a team that does not fit is answered
    /// without it (SQL on PostgreSQL, a read of the team on SQLite), and 0 holds none.
    /// Default: a quarter of the machine's memory.
    #[arg(long, value_parser = parse_bytes)]
    pub cache_bytes: Option<usize>,
    /// Serve `GET /metrics` on this address only (default: on the API's address). It is
    /// not authenticated: bind it where only the scraper reaches it.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Let webhooks use `http` URLs and send to loopback, private and link-local
    /// addresses (tests, private deployments). Without it, such a URL is refused at
    /// registration and a name that resolves to such an address fails each attempt.
    #[arg(long)]
    pub webhook_allow_private: bool,
}

/// The query slots of `serve`'s flags, the machine's defaults where a flag is not given.
fn slots(pool: Option<u16>, per_team: Option<u16>) -> http::Slots {
    let default = http::Slots::default();
    let pool = pool.map_or(default.pool, usize::from);
    http::Slots {
        pool,
        per_team: per_team.map_or((pool / 2).max(1), usize::from),
    }
}

/// A size in bytes: digits, optionally followed by K, M or G (powers of 1024; `KiB`,
/// `MiB`, `GiB` and `B` are read too).
fn parse_bytes(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let n: usize = n
        .parse()
        .map_err(|_| format!("`{s}` is no size: digits and an optional K, M or G"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return Err(format!("`{s}` is no size: the unit is K, M or G")),
    };
    n.checked_mul(1usize << shift)
        .ok_or_else(|| format!("`{s}` is too large"))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers, run until killed.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("shutdown signal received; draining in-flight requests");
}

/// The demo team (made on an empty store) and a fresh full-permission key for it. The demo
/// keys of earlier starts are revoked, so one demo key is in force at a time.
async fn demo_key(store: &dyn Store) -> Result<(String, String), Failure> {
    let team = crate::demo::ensure(store, Timestamp::now()).await?;
    for k in store.keys(&team).await? {
        if k.revoked.is_none() && k.name.as_deref() == Some(crate::demo::KEY_NAME) {
            store.revoke_key(&k.key_id, store::DEMO_ACTOR).await?;
        }
    }
    let (_, key) = create_key(
        store,
        &team,
        Some(crate::demo::KEY_NAME.into()),
        usage_core::schema::Permission::IDENTIFIERS
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect(),
        store::DEMO_ACTOR,
    )
    .await?;
    Ok((team, key))
}

/// What `serve` prints when it is ready, for a person at a terminal: the fields of the
/// JSON line it prints otherwise (contract section 10), one a line, and the demo's curl
/// as a command that pastes as shown.
fn started_text(line: &Value) -> String {
    let field = |k: &str| line[k].as_str().map(str::to_string);
    let mut out = String::new();
    if let Some(listen) = field("listen") {
        out.push_str(&format!("usage-server is serving on http://{listen}\n"));
    }
    if let Some(m) = field("metrics_listen") {
        out.push_str(&format!("metrics:     http://{m}/metrics\n"));
    }
    if let Some(key) = field("service_key") {
        out.push_str("\nThe demo team is ready (earlier demo keys are revoked).\n");
        let rows = [
            ("dashboard:", field("dashboard")),
            ("team id:", field("team_id")),
            ("service key:", Some(key)),
        ];
        for (label, v) in rows {
            if let Some(v) = v {
                out.push_str(&format!("  {label:<13}{v}\n"));
            }
        }
        if let Some(curl) = field("curl") {
            out.push_str(&format!("\nTry it (paste as shown):\n\n  {curl}\n"));
        }
    }
    out.push_str("\nStop it with Ctrl-C.");
    out
}

pub(super) async fn serve(store: Arc<dyn Store>, args: ServeArgs) -> Result<(), Failure> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_max_level(tracing::Level::INFO)
        .try_init();
    let demo = if args.demo {
        Some(demo_key(store.as_ref()).await?)
    } else {
        None
    };
    store.preload().await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    let metrics = match args.metrics_listen {
        Some(m) => Some(
            tokio::net::TcpListener::bind(m)
                .await
                .map_err(|e| format!("cannot listen on {m} (--metrics-listen): {e}"))?,
        ),
        None => None,
    };
    let mut line = json!({"listen": addr.to_string()});
    if let Some(m) = &metrics {
        let m = m
            .local_addr()
            .map_err(|e| format!("cannot read the metrics address: {e}"))?;
        line["metrics_listen"] = json!(m.to_string());
    }
    if let Some((team, key)) = &demo {
        line["service_key"] = json!(key);
        line["team_id"] = json!(team);
        line["curl"] = json!(crate::demo::curl(addr, key));
        line["dashboard"] = json!(crate::demo::dashboard_url(addr));
    }
    {
        use std::io::{IsTerminal, Write};
        let mut out = std::io::stdout().lock();
        let text = if out.is_terminal() {
            started_text(&line)
        } else {
            line.to_string()
        };
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
    }
    let config = http::Config {
        limits: Limits {
            result_items: args.max_result_items,
            result_bytes: args
                .max_result_bytes
                .unwrap_or(Limits::default().result_bytes),
            ..Limits::default()
        },
        max_body_bytes: args.max_body_bytes,
        max_ingest_bytes: args.max_ingest_bytes,
        rate: RateConfig {
            per_minute: args.rate_per_minute,
            burst: args.rate_burst,
        },
        poll_interval: http::POLL_INTERVAL,
        timeouts: http::Timeouts::default(),
        slots: slots(args.query_slots, args.team_query_slots),
        webhooks: crate::webhooks::Settings {
            allow_private: args.webhook_allow_private,
            ..crate::webhooks::Settings::default()
        },
    };
    http::serve_with(store, config, listener, metrics, shutdown_signal()).await;
    tracing::info!("stopped");
    Ok(())
}
