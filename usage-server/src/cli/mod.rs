//! The `usage-server` command line (contract section 10).
//!
//! Admin commands print one JSON object on stdout and exit 0; on failure they print
//! nothing on stdout, the reason on stderr (one line; `import` adds up to 20 lines of
//! violations) and exit 1. Bad flags print clap's usage and exit 2.

mod caps;
mod import;
mod webhooks;

use std::net::SocketAddr;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use serde_json::{Value, json};
use usage_core::plan::Limits;
use usage_core::schema::Plan;
use usage_core::time::Timestamp;

use crate::auth;

/// Checks `--permissions` while parsing flags, so a bad one is clap's usage error (exit 2).
fn permission_list(s: &str) -> Result<String, String> {
    auth::parse_permissions(s).map(|_| s.to_string())
}
use crate::auth::rate::RateConfig;
use crate::http;
use crate::store::{self, KeyRecord, NewTeam, Store, StoreError, StoreOps};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "usage-server",
    version,
    about = "The reference server of the usage service and its admin commands."
)]
pub struct Cli {
    /// The store: `sqlite:PATH`, `memory:` or `postgres://…`.
    #[arg(
        long,
        global = true,
        env = "USAGE_STORE",
        default_value = "sqlite:usage.db"
    )]
    pub store: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API and `GET /healthz`.
    Serve(ServeArgs),
    /// Apply the store's schema migrations.
    Migrate,
    /// List the stored rows that cannot be read, one JSON object a line; exit 1 when
    /// there is any (contract section 11). The server leaves such rows out of answers.
    Check,
    /// Copy the embedded store, while it serves, to a new file (SQLite stores only;
    /// PostgreSQL is backed up with its own tools, e.g. pg_dump).
    Backup {
        /// The file to write; it must not exist yet.
        #[arg(long)]
        to: std::path::PathBuf,
    },
    /// Manage teams.
    #[command(subcommand)]
    Team(TeamCommand),
    /// Manage service keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// Load records of one kind from a JSONL file (`-` reads stdin), all or nothing.
    Import(ImportArgs),
    /// Answer one `Analytics` query of a team as CSV or NDJSON on stdout, as `POST
    /// /api/v1/Analytics` with `Accept: text/csv` would (the request body in FILE, `-`
    /// reads stdin; a `service_key` in it is ignored).
    Export {
        /// The team id.
        #[arg(long)]
        team: String,
        /// The request body: `{"query_requests": [ONE QUERY], ...}`.
        #[arg(long)]
        query: std::path::PathBuf,
        /// `csv` or `ndjson`.
        #[arg(long, default_value = "csv", value_parser = parse_format)]
        format: usage_core::wire::export::Format,
    },
    /// Print a team's cap audit log, oldest first, one JSON object a line.
    Audit {
        /// The team id.
        #[arg(long)]
        team: String,
    },
    /// Set, read or clear add-on credit caps at team, group or user scope (changes are
    /// audited with the key id `cli`).
    #[command(subcommand)]
    Cap(caps::CapCommand),
    /// Register, list or remove a team's webhooks (contract section 12).
    #[command(subcommand)]
    Webhook(webhooks::WebhookCommand),
    /// Print users' credits in the current cycle against their caps, one JSON object a
    /// line in e-mail order (as `GET /api/v2/credits/users`).
    Credits(caps::CreditsArgs),
    /// Print the cap that applies to a user and where it comes from.
    EffectiveCap {
        /// The team id.
        #[arg(long)]
        team: String,
        /// The user's e-mail.
        #[arg(long)]
        email: String,
    },
}

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

fn parse_format(s: &str) -> Result<usage_core::wire::export::Format, String> {
    usage_core::wire::export::Format::parse(s)
        .ok_or_else(|| format!("`{s}` is no export format: csv or ndjson"))
}

/// `export`: the answer of one query as CSV or NDJSON, written to stdout.
async fn export(
    store: &dyn Store,
    team: &str,
    query: &std::path::Path,
    format: usage_core::wire::export::Format,
) -> Result<(), Failure> {
    use std::io::{Read, Write};
    use usage_core::wire::export;
    let mut body = Vec::new();
    let read = if query.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut body)
    } else {
        std::fs::File::open(query).and_then(|mut f| f.read_to_end(&mut body))
    };
    read.map_err(|e| format!("cannot read {}: {e}", query.display()))?;
    let limits = Limits::default();
    let invalid = |v: usage_core::Violations| Failure {
        summary: format!("{}: not a valid Analytics request", query.display()),
        lines: v.iter().map(ToString::to_string).collect(),
        stdout: Vec::new(),
    };
    let d = usage_core::wire::decode::decode::<usage_core::wire::AnalyticsRequest>(&body)
        .map_err(|usage_core::wire::decode::KindErrors(v)| invalid(v))?;
    let plan = usage_core::validate::with_decoded(&d, |r, _| {
        let plan = usage_core::validate::analytics(r, &limits)?;
        if plan.queries.len() == 1 {
            Ok(plan)
        } else {
            Err(export::one_query(format))
        }
    })
    .map_err(invalid)?;
    store.billing(team).await?;
    let res = store.analytics(team, &plan, &limits).await?;
    let text = export::encode(
        format,
        &plan.queries[0].output_aliases(),
        &res.query_results[0],
    );
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| format!("cannot write the export: {e}"))?;
    Ok(())
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

/// `team …`.
#[derive(Debug, Subcommand)]
pub enum TeamCommand {
    /// Create a team.
    Create {
        /// Its name.
        #[arg(long)]
        name: String,
        /// Its plan: enterprise, teams or pro.
        #[arg(long, default_value = "enterprise", value_parser = parse_plan)]
        plan: Plan,
        /// Seats.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
        seats: i64,
        /// Prompt credits per seat.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
        credits_per_seat: i64,
    },
}

/// `key …`.
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create a key; the key is shown once.
    Create {
        /// The team id.
        #[arg(long)]
        team: String,
        /// Comma-separated: analytics-read, teams-read, billing-read, billing-write, usage-write.
        #[arg(long, value_parser = permission_list)]
        permissions: String,
        /// A name for the key.
        #[arg(long)]
        name: Option<String>,
    },
    /// Revoke a key.
    Revoke {
        /// The key id.
        #[arg(long)]
        key_id: String,
    },
}

/// Flags of `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The team id.
    #[arg(long)]
    pub team: String,
    /// The record kind (autocomplete, chat, command, pcw, agent_lines, agent_runs,
    /// agent_tool_usage, users, groups, billing).
    #[arg(long)]
    pub kind: String,
    /// The JSONL file, or `-` for stdin.
    pub file: String,
}

fn parse_plan(s: &str) -> Result<Plan, String> {
    s.parse::<Plan>().map_err(|e| e.to_string())
}

/// Why a command failed: one line, plus more lines for `import`, and what it found for
/// `check` (printed on stdout).
#[derive(Debug, Default)]
pub struct Failure {
    /// The reason (first line on stderr).
    pub summary: String,
    /// Further lines (stderr).
    pub lines: Vec<String>,
    /// Lines for stdout, printed before the reason (`check`'s rows).
    pub stdout: Vec<String>,
}

impl From<String> for Failure {
    fn from(summary: String) -> Failure {
        Failure {
            summary,
            ..Failure::default()
        }
    }
}

impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Failure {
        e.to_string().into()
    }
}

/// Runs the command line; returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("usage-server: cannot start the runtime: {e}");
            return 1;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(out) => {
            for line in out {
                println!("{line}");
            }
            0
        }
        Err(f) => {
            for line in f.stdout {
                println!("{line}");
            }
            eprintln!("usage-server: {}", f.summary.replace('\n', " "));
            for l in f.lines {
                eprintln!("{l}");
            }
            1
        }
    }
}

/// Runs one command; returns the lines to print on stdout.
///
/// # Errors
/// What to print on stderr.
pub async fn run(cli: Cli) -> Result<Vec<String>, Failure> {
    let cache = match &cli.command {
        Command::Serve(args) => store::CacheConfig {
            bytes: args
                .cache_bytes
                .unwrap_or_else(store::CacheConfig::default_bytes),
            wait_for_load: false,
        },
        _ => store::CacheConfig::OFF,
    };
    let store = store::open_with(&cli.store, cache).await?;
    let out = match cli.command {
        Command::Serve(args) => {
            serve(store.clone(), args).await?;
            return Ok(Vec::new());
        }
        Command::Migrate => vec![json!({"migrations_applied": store.migrate().await?})],
        Command::Check => {
            let rows = store.unreadable_rows().await?;
            store.close().await?;
            let lines: Vec<String> = rows
                .iter()
                .map(|r| serde_json::to_string(r).unwrap_or_default())
                .collect();
            if lines.is_empty() {
                return Ok(Vec::new());
            }
            return Err(Failure {
                summary: format!(
                    "{} stored rows cannot be read; the server leaves them out of answers",
                    lines.len()
                ),
                stdout: lines,
                ..Failure::default()
            });
        }
        Command::Team(TeamCommand::Create {
            name,
            plan,
            seats,
            credits_per_seat,
        }) => {
            let t = store
                .create_team(
                    NewTeam {
                        name,
                        plan,
                        seats,
                        credits_per_seat,
                    },
                    Timestamp::now(),
                )
                .await?;
            vec![json!({"team_id": t.id})]
        }
        Command::Key(KeyCommand::Create {
            team,
            permissions,
            name,
        }) => {
            let perms = auth::parse_permissions(&permissions)?;
            let (key_id, service_key) = create_key(store.as_ref(), &team, name, perms).await?;
            vec![json!({"key_id": key_id, "service_key": service_key})]
        }
        Command::Key(KeyCommand::Revoke { key_id }) => {
            store.revoke_key(&key_id).await?;
            vec![json!({"key_id": key_id, "revoked": true})]
        }
        Command::Import(args) => vec![import::run(store.as_ref(), args).await?],
        Command::Backup { to } => {
            store.close().await?;
            vec![backup(&cli.store, &to).await?]
        }
        Command::Export {
            team,
            query,
            format,
        } => {
            export(store.as_ref(), &team, &query, format).await?;
            Vec::new()
        }
        Command::Audit { team } => {
            store.billing(&team).await?;
            store
                .audit(&team)
                .await?
                .into_iter()
                .map(|a| a.to_json())
                .collect()
        }
        Command::Cap(c) => caps::cap(store.as_ref(), c).await?,
        Command::Webhook(c) => webhooks::webhook(store.as_ref(), c).await?,
        Command::Credits(args) => caps::credits(store.as_ref(), args).await?,
        Command::EffectiveCap { team, email } => {
            store.billing(&team).await?;
            vec![
                match store::effective_cap(store.as_ref(), &team, &email).await? {
                    Some((cap, source)) => json!({"addOnCreditCap": cap, "source": source}),
                    None => json!({}),
                },
            ]
        }
    };
    store.close().await?;
    Ok(out.into_iter().map(|v: Value| v.to_string()).collect())
}

/// `backup`: copies an embedded store to `to` while it may be serving.
async fn backup(spec: &str, to: &std::path::Path) -> Result<Value, Failure> {
    let Some(s) = store::open_sqlite(spec).await else {
        return Err(format!(
            "`backup` copies an embedded (sqlite:) store; back up {} with its own tools (PostgreSQL: pg_dump)",
            spec.split(':').next().unwrap_or(spec)
        )
        .into());
    };
    let s = s?;
    let bytes = s.backup(to).await?;
    s.close().await?;
    Ok(json!({"backup": to.display().to_string(), "bytes": bytes}))
}

/// Creates a key for a team; returns its id and the key (shown once).
///
/// # Errors
/// An unknown team, an empty permission list, or a store failure.
pub async fn create_key(
    store: &dyn Store,
    team: &str,
    name: Option<String>,
    permissions: Vec<usage_core::schema::Permission>,
) -> Result<(String, String), Failure> {
    if permissions.is_empty() {
        return Err("give at least one permission".to_string().into());
    }
    let (service_key, hash) = auth::new_key();
    let key_id = auth::new_id("key");
    store
        .insert_key(KeyRecord {
            key_id: key_id.clone(),
            team_id: team.to_string(),
            name,
            hash,
            permissions,
            created: Timestamp::now(),
        })
        .await?;
    Ok((key_id, service_key))
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

async fn serve(store: Arc<dyn Store>, args: ServeArgs) -> Result<(), Failure> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .with_max_level(tracing::Level::INFO)
        .try_init();
    let demo = if args.demo {
        let team = crate::demo::ensure(store.as_ref(), Timestamp::now()).await?;
        let (_, key) = create_key(
            store.as_ref(),
            &team,
            Some("demo".into()),
            usage_core::schema::Permission::IDENTIFIERS
                .iter()
                .filter_map(|p| p.parse().ok())
                .collect(),
        )
        .await?;
        Some(key)
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
    if let Some(key) = demo {
        line["service_key"] = json!(key);
        line["curl"] = json!(crate::demo::curl(addr, &key));
        line["dashboard"] = json!(crate::demo::dashboard_url(addr));
    }
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
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
