//! The operations: decode (kinds), key, rate, permission, validation, names, answer.

use std::future::Future;

use usage_core::Violations;
use usage_core::load;
use usage_core::plan::{CapAction, CapScope};
use usage_core::schema::Permission;
use usage_core::time::Timestamp;
use usage_core::validate;
use usage_core::wire::decode::{Decoded, KindErrors, Request, decode};
use usage_core::wire::export::{self, Format};
use usage_core::wire::{
    AgentAnalyticsRequest, AnalyticsRequest, GetTeamCreditBalanceRequest, GetUsageConfigRequest,
    GetUsageConfigResponse, IngestRequest, IngestResponse, UsageConfigRequest, UsageConfigResponse,
    UserPageAnalyticsRequest,
};
use warp::http::{HeaderMap, header};
use warp::reply::Response;

use super::{App, LogCx, Op, json_response};
use crate::auth::{self, rate::retry_after_secs};
use crate::error::{ApiError, Code};
use crate::store::{KeyInfo, Token};

/// The permission an operation needs (spec, Authentication; section 7).
pub fn permission(op: Op) -> Permission {
    match op {
        Op::Analytics => Permission::AnalyticsRead,
        Op::UserPageAnalytics | Op::AgentAnalytics => Permission::TeamsRead,
        Op::GetUsageConfig | Op::GetTeamCreditBalance => Permission::BillingRead,
        Op::UsageConfig => Permission::BillingWrite,
        Op::Ingest => Permission::UsageWrite,
    }
}

fn kinds<T: Request>(body: &[u8]) -> Result<Decoded<T>, ApiError> {
    decode::<T>(body).map_err(|KindErrors(v)| ApiError::invalid(&v))
}

fn invalid(v: Violations) -> ApiError {
    ApiError::invalid(&v)
}

fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, key) = v.split_once(' ')?;
    let key = key.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !key.is_empty()).then(|| key.to_string())
}

/// Key (401), rate (429), permission (403).
async fn authorize(
    app: &App,
    op: Op,
    given: Option<&str>,
    headers: &HeaderMap,
    cx: &mut LogCx,
) -> Result<KeyInfo, ApiError> {
    authorize_for(app, permission(op), op.name(), given, headers, cx).await
}

/// [`authorize`] for an endpoint `what` that needs `need`; without a key in the body
/// (`given`), the key of `Authorization: Bearer` (the only one of the GET endpoints).
pub(super) async fn authorize_for(
    app: &App,
    need: Permission,
    what: &str,
    given: Option<&str>,
    headers: &HeaderMap,
    cx: &mut LogCx,
) -> Result<KeyInfo, ApiError> {
    let key = given
        .map(str::to_string)
        .or_else(|| bearer(headers))
        .ok_or_else(|| {
            ApiError::new(
                Code::Unauthenticated,
                if what.contains('/') || what == "audit" {
                    "the service key is missing: give `Authorization: Bearer <key>`"
                } else {
                    "the service key is missing: give `service_key` in the body"
                },
            )
        })?;
    let hash = auth::hash_key(&key);
    let info = app
        .store
        .key_by_hash(&hash)
        .await?
        .filter(|k| auth::ct_eq(&k.hash, &hash))
        .ok_or_else(|| {
            ApiError::new(
                Code::Unauthenticated,
                "the service key is not valid (unknown or revoked)",
            )
        })?;
    cx.team = Some(info.team_id.clone());
    let limited = match app
        .store
        .take_token(&info.team_id, &info.key_id, app.config.rate)
        .await?
    {
        Token::NotShared => app.rate.check(&info.key_id),
        Token::Granted => Ok(()),
        Token::Wait(wait) => Err(wait),
    };
    if let Err(wait) = limited {
        let secs = retry_after_secs(wait);
        return Err(ApiError {
            retry_after: Some(secs),
            ..ApiError::new(
                Code::ResourceExhausted,
                format!("rate limit exceeded for this key; retry after {secs} s"),
            )
        });
    }
    if !info.permissions.contains(&need) {
        return Err(ApiError::new(
            Code::PermissionDenied,
            format!(
                "the service key lacks the permission {} that {what} needs",
                auth::describe(need),
            ),
        ));
    }
    Ok(info)
}

/// Answers of more items than this are encoded on the blocking pool, off the threads that
/// serve connections.
const BIG_ANSWER_ITEMS: usize = 2_000;

/// Runs a query of `team` in one of the query slots (`gate`); the answer holds the team's
/// place for it until it has been sent.
pub(super) async fn gated(
    app: &App,
    team: &str,
    query: impl Future<Output = Result<Response, ApiError>>,
) -> Result<Response, ApiError> {
    let (answer, place) = app.gate.run(team, query).await;
    let mut res = answer?;
    super::streamed::hold(&mut res, place);
    Ok(res)
}

/// The JSON answer of `value`; a `big` one is encoded (and later freed) on the blocking
/// pool.
pub(super) async fn json_answer<T: serde::Serialize + Send + 'static>(
    value: T,
    big: bool,
) -> Response {
    if !big {
        return json_response(&value);
    }
    tokio::task::spawn_blocking(move || json_response(&value))
        .await
        .unwrap_or_else(|e| {
            ApiError::new(Code::Internal, format!("internal error: {e}")).into_response("")
        })
}

fn not_found(what: &str, name: &str) -> ApiError {
    ApiError::new(
        Code::NotFound,
        format!("{what} `{}` was not found", usage_core::error::echo(name)),
    )
}

/// Checks that a cap scope names a group or user of the key's team (404 otherwise).
async fn check_scope(app: &App, team: &str, scope: &CapScope) -> Result<(), ApiError> {
    match crate::store::missing_in_scope(app.store.as_ref(), team, scope).await? {
        None => Ok(()),
        Some((field, value)) => Err(not_found(field, &value)),
    }
}

pub(super) async fn dispatch(
    app: &App,
    op: Op,
    body: &[u8],
    headers: &HeaderMap,
    cx: &mut LogCx,
) -> Result<Response, ApiError> {
    let limits = &app.config.limits;
    match op {
        Op::Analytics => {
            let d = kinds::<AnalyticsRequest>(body)?;
            let key = authorize(app, op, d.request.service_key.as_deref(), headers, cx).await?;
            // An export (`Accept: text/csv` or `application/x-ndjson`) holds one query.
            let format = headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .and_then(Format::from_accept);
            let plan = validate::with_decoded(&d, |r, _| {
                let plan = validate::analytics(r, limits)?;
                match format {
                    Some(f) if plan.queries.len() != 1 => Err(export::one_query(f)),
                    _ => Ok(plan),
                }
            })
            .map_err(invalid)?;
            let team = key.team_id.as_str();
            gated(app, team, async {
                let mut res = app.store.analytics(team, &plan, limits).await?;
                Ok(match format {
                    Some(f) if !res.query_results.is_empty() => {
                        // Sent as it is encoded, a chunk of lines at a time.
                        let aliases = plan.queries[0]
                            .output_aliases()
                            .into_iter()
                            .map(String::from)
                            .collect();
                        let result = res.query_results.swap_remove(0);
                        let mut out = Response::new(Default::default());
                        super::streamed::stream_body(
                            &mut out,
                            super::streamed::chunked(export::into_lines(f, aliases, result)),
                        );
                        out.headers_mut().insert(
                            header::CONTENT_TYPE,
                            warp::http::HeaderValue::from_static(f.content_type()),
                        );
                        out
                    }
                    _ => {
                        let items = res.query_results.iter().map(|q| q.response_items.len());
                        let big = items.sum::<usize>() > BIG_ANSWER_ITEMS;
                        json_answer(res, big).await
                    }
                })
            })
            .await
        }
        Op::UserPageAnalytics => {
            let d = kinds::<UserPageAnalyticsRequest>(body)?;
            let key = authorize(app, op, d.request.service_key.as_deref(), headers, cx).await?;
            let plan =
                validate::with_decoded(&d, |r, _| validate::user_page(r)).map_err(invalid)?;
            let team = key.team_id.as_str();
            gated(app, team, async {
                let res = app.store.user_page(team, &plan).await?;
                let big = res.user_table_stats.len() > BIG_ANSWER_ITEMS;
                Ok(json_answer(res, big).await)
            })
            .await
        }
        Op::AgentAnalytics => {
            let d = kinds::<AgentAnalyticsRequest>(body)?;
            let key = authorize(app, op, d.request.service_key.as_deref(), headers, cx).await?;
            let plan =
                validate::with_decoded(&d, |r, _| validate::agent(r, limits)).map_err(invalid)?;
            let team = key.team_id.as_str();
            gated(app, team, async {
                let res = app.store.agent(team, &plan).await?;
                Ok(json_response(&res))
            })
            .await
        }
        Op::GetUsageConfig => {
            let d = kinds::<GetUsageConfigRequest>(body)?;
            let key = authorize(app, op, d.request.service_key.as_deref(), headers, cx).await?;
            let scope = validate::with_decoded(&d, validate::get_usage_config).map_err(invalid)?;
            check_scope(app, &key.team_id, &scope).await?;
            let cap = app.store.cap(&key.team_id, &scope).await?;
            Ok(json_response(&GetUsageConfigResponse {
                add_on_credit_cap: cap,
            }))
        }
        Op::UsageConfig => {
            let d = kinds::<UsageConfigRequest>(body)?;
            let key = authorize(app, op, d.request.service_key.as_deref(), headers, cx).await?;
            let (scope, action): (CapScope, CapAction) =
                validate::with_decoded(&d, validate::usage_config).map_err(invalid)?;
            check_scope(app, &key.team_id, &scope).await?;
            app.store
                .change_cap(&key.team_id, &scope, action, &key.key_id, Timestamp::now())
                .await?;
            Ok(json_response(&UsageConfigResponse {}))
        }
        Op::GetTeamCreditBalance => {
            let d = kinds::<GetTeamCreditBalanceRequest>(body)?;
            let key = authorize(app, op, d.request.service_key.as_deref(), headers, cx).await?;
            let billing = app.store.billing(&key.team_id).await?;
            if billing.plan != usage_core::schema::Plan::Enterprise {
                return Err(ApiError::new(
                    Code::PermissionDenied,
                    format!(
                        "GetTeamCreditBalance needs the `enterprise` plan; the team is on the `{}` plan",
                        billing.plan
                    ),
                ));
            }
            validate::with_decoded(&d, |_, _| Ok(())).map_err(invalid)?;
            Ok(json_response(&billing.response(Timestamp::now())))
        }
        Op::Ingest => {
            let d = kinds::<IngestRequest>(body)?;
            let key = authorize(app, op, d.request.service_key.as_deref(), headers, cx).await?;
            // `billing` records change plan, seats and credits: they need billing-write
            // too (contract section 11), and each change is audited with the key.
            let billing = usage_core::schema::records::BILLING.name;
            if d.request.kind.as_deref() == Some(billing)
                && !key.permissions.contains(&Permission::BillingWrite)
            {
                return Err(ApiError::new(
                    Code::PermissionDenied,
                    format!(
                        "the service key lacks the permission {} that Ingest of `{billing}` records needs (besides {})",
                        auth::describe(Permission::BillingWrite),
                        auth::describe(Permission::UsageWrite),
                    ),
                ));
            }
            let batch =
                validate::with_decoded(&d, |r, _| load::ingest(r, limits)).map_err(invalid)?;
            let kind = batch.kind.name;
            let n = app
                .store
                .ingest_by(&key.team_id, batch, &key.key_id, Timestamp::now())
                .await?;
            app.metrics.ingested(kind, n);
            Ok(json_response(&IngestResponse { accepted: n as i64 }))
        }
    }
}
