//! `webhook list|add|remove`: a team's webhooks from the command line (contract section
//! 12), with the rules of `POST /api/v2/webhooks`.

use clap::Subcommand;
use serde_json::{Value, json};
use usage_core::alerts::MAX_WEBHOOKS;
use usage_core::time::Timestamp;

use super::Failure;
use crate::store::Store;

/// `webhook …`.
#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Print the team's webhooks, oldest first, one JSON object a line (no secrets).
    List {
        /// The team id.
        #[arg(long)]
        team: String,
    },
    /// Register a webhook; prints it with its signing secret, shown only here.
    Add {
        /// The team id.
        #[arg(long)]
        team: String,
        /// Where events go: an `https` URL (no private address literal).
        #[arg(long)]
        url: String,
        /// The events, comma-separated (default: all of them).
        #[arg(long, value_delimiter = ',')]
        events: Option<Vec<String>>,
        /// The thresholds in percent of the cap, comma-separated (default: 80,100).
        #[arg(long, value_delimiter = ',')]
        thresholds: Option<Vec<i64>>,
        /// Allow an `http` URL and private addresses (a server delivers there only with
        /// `serve --webhook-allow-private`).
        #[arg(long)]
        allow_private: bool,
    },
    /// Remove a webhook with its pending events and delivery log.
    Remove {
        /// The team id.
        #[arg(long)]
        team: String,
        /// The webhook's id.
        #[arg(long)]
        id: String,
    },
}

/// Runs `webhook …`; returns the lines to print.
///
/// # Errors
/// An unknown team or webhook, a URL or list that breaks a rule (named), a team at its
/// limit, or a store failure.
pub async fn webhook(store: &dyn Store, command: WebhookCommand) -> Result<Vec<Value>, Failure> {
    match command {
        WebhookCommand::List { team } => Ok(store
            .webhooks(&team)
            .await?
            .iter()
            .map(|h| h.to_json(false))
            .collect()),
        WebhookCommand::Add {
            team,
            url,
            events,
            thresholds,
            allow_private,
        } => {
            let now = Timestamp::now();
            let hook = crate::webhooks::register(
                &url,
                events.as_deref(),
                thresholds.as_deref(),
                allow_private,
                now,
            )
            .map_err(|(_, rule)| rule)?;
            if !store
                .add_webhook(&team, hook.clone(), crate::store::CLI_ACTOR, now)
                .await?
            {
                return Err(format!(
                    "team {team} has {MAX_WEBHOOKS} webhooks, the most it may have: remove one first"
                )
                .into());
            }
            Ok(vec![hook.to_json(true)])
        }
        WebhookCommand::Remove { team, id } => {
            if !store
                .remove_webhook(&team, &id, crate::store::CLI_ACTOR, Timestamp::now())
                .await?
            {
                return Err(format!("team {team} has no webhook `{id}`").into());
            }
            Ok(vec![json!({"removed": id})])
        }
    }
}
