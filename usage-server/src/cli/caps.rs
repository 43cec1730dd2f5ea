//! `cap set|get|clear` and `credits`: caps and what users spent against them, from the
//! command line (contract section 12). A change is checked as `UsageConfig` checks it (a
//! group or user of the team, a cap in `0..=1_000_000_000`) and audited with the key id
//! `cli`.

use clap::{ArgGroup, Args, Subcommand};
use serde_json::{Value, json};
use usage_core::plan::{CapAction, CapScope, MAX_CAP};
use usage_core::time::Timestamp;

use super::Failure;
use crate::store::{self, Store};

/// The key id the audit log names for a change made by the command line.
pub const CLI_ACTOR: &str = "cli";

/// `cap …`.
#[derive(Debug, Subcommand)]
pub enum CapCommand {
    /// Set the add-on credit cap of a scope; prints the scope, the cap before and after.
    Set {
        #[command(flatten)]
        scope: ScopeArgs,
        /// The cap, in credits (0 to 1,000,000,000; 0 blocks add-on credits).
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..=MAX_CAP))]
        credits: i64,
    },
    /// Print the cap set at exactly this scope: `{"addOnCreditCap": N}` or `{}`.
    Get {
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Clear the cap of a scope (clearing an unset cap succeeds); prints the scope, the
    /// cap before and after (null).
    Clear {
        #[command(flatten)]
        scope: ScopeArgs,
    },
    /// Print, changing nothing, every user whose cap, its source or access a change would
    /// change: `{"email", "before", "after"}` with their credits, one a line in e-mail
    /// order (as `POST /api/v2/caps/preview`). Give `--credits N` to preview setting the
    /// cap, `--clear` to preview clearing it.
    #[command(group(ArgGroup::new("change").required(true).args(["credits", "clear"])))]
    Preview {
        #[command(flatten)]
        scope: ScopeArgs,
        /// The cap to preview, in credits.
        #[arg(long, value_parser = clap::value_parser!(i64).range(0..=MAX_CAP))]
        credits: Option<i64>,
        /// Preview clearing the cap.
        #[arg(long)]
        clear: bool,
    },
}

/// A team and one cap scope of it.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("scope").required(true).args(["team_level", "group", "user"])))]
pub struct ScopeArgs {
    /// The team id.
    #[arg(long)]
    team: String,
    /// The team cap.
    #[arg(long)]
    team_level: bool,
    /// The cap of the group with this id.
    #[arg(long)]
    group: Option<String>,
    /// The cap of the user with this e-mail.
    #[arg(long)]
    user: Option<String>,
}

impl ScopeArgs {
    fn scope(&self) -> CapScope {
        match (&self.group, &self.user) {
            (Some(g), _) => CapScope::Group(g.clone()),
            (_, Some(e)) => CapScope::User(e.clone()),
            _ => CapScope::Team,
        }
    }
}

/// Flags of `credits`.
#[derive(Debug, Args)]
pub struct CreditsArgs {
    /// The team id.
    #[arg(long)]
    team: String,
    /// Only this user (an e-mail that is no user of the team fails).
    #[arg(long)]
    email: Option<String>,
    /// Only users with a cap who used at least this percentage of it.
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..=100_000))]
    min_percent: Option<i64>,
}

/// Runs `cap …`; returns the lines to print.
///
/// # Errors
/// An unknown team, a group or user the team lacks, or a store failure.
pub async fn cap(store: &dyn Store, command: CapCommand) -> Result<Vec<Value>, Failure> {
    let (args, action) = match &command {
        CapCommand::Set { scope, credits } => (scope, Some(CapAction::Set(*credits))),
        CapCommand::Clear { scope } => (scope, Some(CapAction::Clear)),
        CapCommand::Get { scope } => (scope, None),
        CapCommand::Preview { scope, credits, .. } => (
            scope,
            Some(credits.map_or(CapAction::Clear, CapAction::Set)),
        ),
    };
    let (team, scope) = (args.team.as_str(), args.scope());
    store.billing(team).await?;
    if let Some((field, value)) = store::missing_in_scope(store, team, &scope).await? {
        return Err(format!("{field} `{value}` is not in team {team}").into());
    }
    if let (CapCommand::Preview { .. }, Some(action)) = (&command, action) {
        let (was, would) =
            store::credits_with_change(store, team, &scope, action, Timestamp::now()).await?;
        return Ok(usage_core::credits::changed(&was, &would)
            .iter()
            .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
            .collect());
    }
    Ok(vec![change(store, team, scope, action).await?])
}

/// `cap set|get|clear` of one scope the team has.
async fn change(
    store: &dyn Store,
    team: &str,
    scope: CapScope,
    action: Option<CapAction>,
) -> Result<Value, Failure> {
    let old = store.cap(team, &scope).await?;
    let Some(action) = action else {
        return Ok(old.map_or(json!({}), |c| json!({"addOnCreditCap": c})));
    };
    store
        .change_cap(team, &scope, action, CLI_ACTOR, Timestamp::now())
        .await?;
    let new = match action {
        CapAction::Set(n) => Some(n),
        CapAction::Clear => None,
    };
    Ok(json!({"scope": scope.label(), "old": old, "new": new}))
}

/// Runs `credits`: one user's credits, or every user's (those reaching `--min-percent`),
/// one JSON object a line in e-mail order.
///
/// # Errors
/// An unknown team, an e-mail that is no user of the team, or a store failure.
pub async fn credits(store: &dyn Store, args: CreditsArgs) -> Result<Vec<Value>, Failure> {
    let team = args.team.as_str();
    let terms = store::terms(store, team, Timestamp::now()).await?;
    let all = match &args.email {
        Some(e) => match store.credits_of(team, e, &terms).await? {
            Some(c) => vec![c],
            None => return Err(format!("`{e}` is not a user of team {team}").into()),
        },
        None => store.credits(team, &terms).await?,
    };
    Ok(all
        .iter()
        .filter(|c| args.min_percent.is_none_or(|m| c.reaches(m)))
        .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
        .collect())
}
