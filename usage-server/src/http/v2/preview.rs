//! `POST /api/v2/caps/preview` (`billing-read`, contract section 12): what a proposed
//! `UsageConfig` would change, without changing anything. The body is `UsageConfig`'s,
//! checked by the same rules (a key in it is not read: the key is the bearer's); the
//! answer lists, for every user whose cap, its source or access would change, the credits
//! before and after, in e-mail order, in pages like the v2 lists (`limit`, `cursor` in the
//! query string; a cursor is bound to the body too).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use usage_core::credits;
use usage_core::plan::CapAction;
use usage_core::time::Timestamp;
use usage_core::validate;
use usage_core::wire::UsageConfigRequest;
use usage_core::wire::decode::{KindErrors, decode};
use warp::http::HeaderMap;
use warp::reply::Response;

use super::{Endpoint, Params, cursor_key, hex, page};
use crate::error::{ApiError, Code};
use crate::http::ops::authorize_for;
use crate::http::{App, LogCx, json_response};
use crate::store;

/// The path.
pub const PATH: &str = "/api/v2/caps/preview";

/// Answers a preview request whose body was read.
pub(in crate::http) async fn answer(
    app: &App,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
    cx: &mut LogCx,
) -> Result<Response, ApiError> {
    let key = authorize_for(
        app,
        Endpoint::Preview.permission(),
        Endpoint::Preview.name(),
        None,
        headers,
        cx,
    )
    .await?;
    let params = Params::parse(Endpoint::Preview, query)?;
    let d = decode::<UsageConfigRequest>(body).map_err(|KindErrors(v)| ApiError::invalid(&v))?;
    let (scope, action) =
        validate::with_decoded(&d, validate::usage_config).map_err(|v| ApiError::invalid(&v))?;
    let team = key.team_id.as_str();
    if let Some((field, value)) = store::missing_in_scope(app.store.as_ref(), team, &scope).await? {
        return Err(ApiError::new(
            Code::NotFound,
            format!(
                "{field} `{}` was not found",
                usage_core::error::echo(&value)
            ),
        ));
    }
    // The cursor is bound to the change previewed as well as to the query parameters.
    let change = match action {
        CapAction::Set(n) => format!("{}={n}", scope.label()),
        CapAction::Clear => format!("{}=clear", scope.label()),
    };
    let mut h = Sha256::new();
    h.update(params.fingerprint(Endpoint::Preview));
    h.update([0]);
    h.update(change);
    let fingerprint = hex(&h.finalize()[..8]);
    let after_key = cursor_key(&params, &fingerprint)?;
    let limit = params.limit()?;
    let (rows, place) = app
        .gate
        .run(team, async {
            let (was, would) = store::credits_with_change(
                app.store.as_ref(),
                team,
                &scope,
                action,
                Timestamp::now(),
            )
            .await?;
            Ok::<_, ApiError>(
                credits::changed(&was, &would)
                    .into_iter()
                    .map(|c| {
                        let row = serde_json::to_value(&c).unwrap_or(Value::Null);
                        (vec![c.email.to_string()], row)
                    })
                    .collect::<Vec<(Vec<String>, Value)>>(),
            )
        })
        .await;
    let (items, next) = page(&rows?, after_key.as_deref(), limit, &fingerprint);
    let mut res = json_response(&json!({"data": items, "next_cursor": next}));
    crate::http::streamed::hold(&mut res, place);
    Ok(res)
}
