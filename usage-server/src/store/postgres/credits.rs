//! Credits without the team-data cache (contract section 12): each user's spend in the
//! cycle summed in SQL, one row per `api_key`, and the users' credits computed from it by
//! the engine's own rule over the team's users and groups
//! ([`TeamData::credits_with`](usage_core::eval::TeamData::credits_with)).

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use usage_core::credits::{Cycle, Spend};
use usage_core::schema::records::{AGENT_RUNS, agent_runs};

use super::{names, pg_err};
use crate::store::StoreResult;

/// Σ `prompts_used` and Σ `flex_credits_used` of the team's readable runs in `cycle`, by
/// `api_key` (`only`: that key's alone); sums past `i64::MAX` stay there, as the engine's.
pub(super) async fn spend(
    c: &impl GenericClient,
    team: &str,
    cycle: Cycle,
    only: Option<&str>,
) -> StoreResult<HashMap<String, Spend>> {
    let q = names::quote;
    let (key, time) = (
        q(agent_runs::API_KEY.name()),
        q(agent_runs::TIMESTAMP.name()),
    );
    let sum = |f: &str| format!("LEAST(COALESCE(SUM({}), 0), {})::int8", q(f), i64::MAX);
    let statement = format!(
        "SELECT {key}, {}, {} FROM {} WHERE team_id = $1 AND {} AND {time} >= $2 AND {time} < $3 \
         AND ($4::text IS NULL OR {key} = $4) GROUP BY {key}",
        sum(agent_runs::PROMPTS_USED.name()),
        sum(agent_runs::FLEX_CREDITS_USED.name()),
        names::table(&AGENT_RUNS),
        names::READABLE,
    );
    let rows = c
        .query(
            statement.as_str(),
            &[&team, &cycle.start.0, &cycle.end.0, &only],
        )
        .await
        .map_err(pg_err)?;
    Ok(rows
        .iter()
        .map(|r| {
            (
                r.get::<_, String>(0),
                Spend {
                    prompts: r.get(1),
                    flex: r.get(2),
                },
            )
        })
        .collect())
}
