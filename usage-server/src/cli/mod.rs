//! The `usage-server` command line (contract section 10).
//!
//! Admin commands print one JSON object on stdout and exit 0; on failure they print
//! nothing on stdout, the reason on stderr (one line; `import` adds up to 20 lines of
//! violations) and exit 1. Bad flags print clap's usage and exit 2.

mod caps;
mod import;
mod serve;
mod webhooks;

pub use serve::ServeArgs;

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
    /// Print a team's audit log (caps, billing, keys, the team's creation, webhooks), oldest
    /// first, one JSON object a line.
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
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // A reader that stops early (`| head`) has what it wanted.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write the export: {e}").into())
        }
        _ => Ok(()),
    }
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
        /// Create it even when a team of this name exists (names need not be unique; by
        /// default a second one is refused, as it is usually a mistake).
        #[arg(long)]
        allow_duplicate_name: bool,
    },
    /// List the teams, oldest first, one JSON object a line: `team_id`, `name`, `created`.
    List,
    /// Show one team: its name, plan, seats, credits, billing cycle and key counts.
    Show {
        /// The team id.
        id: String,
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
    /// List a team's keys, oldest first, one JSON object a line: `key_id`, `name`,
    /// `permissions`, `created`, `revoked` (never the key itself).
    List {
        /// The team id.
        #[arg(long)]
        team: String,
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
        Ok(out) => print_lines(&out),
        Err(f) => {
            print_lines(&f.stdout);
            eprintln!("usage-server: {}", f.summary.replace('\n', " "));
            for l in f.lines {
                eprintln!("{l}");
            }
            1
        }
    }
}

/// Prints lines on stdout; 0, or 1 when stdout fails. A reader that stops early (`| head`)
/// is not an error: the rest is not printed and the command still exits 0.
fn print_lines(lines: &[String]) -> i32 {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for line in lines {
        if let Err(e) = writeln!(out, "{line}") {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                return 0;
            }
            eprintln!("usage-server: cannot write to stdout: {e}");
            return 1;
        }
    }
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("usage-server: cannot write to stdout: {e}");
            1
        }
        _ => 0,
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
    let creates = matches!(
        cli.command,
        Command::Serve(_) | Command::Migrate | Command::Team(TeamCommand::Create { .. })
    );
    if !creates && let Some(why) = store::missing_store(&cli.store) {
        return Err(why.into());
    }
    let store = store::open_with(&cli.store, cache).await?;
    let out = match cli.command {
        Command::Serve(args) => {
            serve::serve(store.clone(), args).await?;
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
            allow_duplicate_name,
        }) => {
            let t = store
                .create_team(
                    NewTeam {
                        name,
                        plan,
                        seats,
                        credits_per_seat,
                        unique_name: !allow_duplicate_name,
                    },
                    store::CLI_ACTOR,
                    Timestamp::now(),
                )
                .await
                .map_err(|e| match e {
                    StoreError::NameTaken { .. } => Failure::from(format!(
                        "{e}; pass --allow-duplicate-name to create another"
                    )),
                    e => e.into(),
                })?;
            vec![json!({"team_id": t.id})]
        }
        Command::Key(KeyCommand::Create {
            team,
            permissions,
            name,
        }) => {
            let perms = auth::parse_permissions(&permissions)?;
            let (key_id, service_key) =
                create_key(store.as_ref(), &team, name, perms, store::CLI_ACTOR).await?;
            vec![json!({"key_id": key_id, "service_key": service_key})]
        }
        Command::Team(TeamCommand::List) => store
            .teams()
            .await?
            .iter()
            .map(|t| json!({"team_id": t.id, "name": t.name, "created": t.created.to_rfc3339()}))
            .collect(),
        Command::Team(TeamCommand::Show { id }) => vec![team_show(store.as_ref(), &id).await?],
        Command::Key(KeyCommand::List { team }) => {
            store.billing(&team).await?;
            store
                .keys(&team)
                .await?
                .iter()
                .map(store::KeyListing::to_json)
                .collect()
        }
        Command::Key(KeyCommand::Revoke { key_id }) => {
            store.revoke_key(&key_id, store::CLI_ACTOR).await?;
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
        Command::Audit { team } => store::audit_log(store.as_ref(), &team).await?,
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

/// `team show`: the team, its billing state (the fields of a `billing` record) and how many
/// keys it has in force and revoked.
async fn team_show(store: &dyn Store, id: &str) -> Result<Value, Failure> {
    let Some(team) = store.teams().await?.into_iter().find(|t| t.id == id) else {
        return Err(StoreError::UnknownTeam(id.to_string()).into());
    };
    let keys = store.keys(id).await?;
    let revoked = keys.iter().filter(|k| k.revoked.is_some()).count();
    let mut v = json!({
        "team_id": team.id,
        "name": team.name,
        "created": team.created.to_rfc3339(),
    });
    if let (Value::Object(out), Value::Object(billing)) = (
        &mut v,
        store.billing(id).await?.current(Timestamp::now()).to_json(),
    ) {
        out.extend(billing);
    }
    v["keys"] = json!(keys.len() - revoked);
    v["keys_revoked"] = json!(revoked);
    Ok(v)
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
    by: &str,
) -> Result<(String, String), Failure> {
    if permissions.is_empty() {
        return Err("give at least one permission".to_string().into());
    }
    let (service_key, hash) = auth::new_key();
    let key_id = auth::new_id("key");
    store
        .insert_key(
            KeyRecord {
                key_id: key_id.clone(),
                team_id: team.to_string(),
                name,
                hash,
                permissions,
                created: Timestamp::now(),
            },
            by,
        )
        .await?;
    Ok((key_id, service_key))
}
