//! Webhooks (contract section 12), with `Authorization: Bearer`:
//! - `POST /api/v2/webhooks` (`billing-write`): `{"url", "events", "thresholds"}`; 201
//!   with the webhook and its `secret`, shown only here;
//! - `GET /api/v2/webhooks` (`billing-read`): the team's webhooks, without secrets;
//! - `DELETE /api/v2/webhooks/{id}` (`billing-write`): 204;
//! - `GET /api/v2/webhooks/{id}/deliveries` (`billing-read`): the last 100 events;
//! - `POST /api/v2/webhooks/{id}/test` (`billing-write`): a signed `webhook.test` now,
//!   answered with the receiver's status or error.

use serde_json::{Map, Value, json};
use usage_core::Rule;
use usage_core::alerts::{self, EventType, MAX_WEBHOOKS};
use usage_core::error::echo;
use usage_core::schema::Permission;
use usage_core::time::Timestamp;
use warp::http::{HeaderMap, Method, StatusCode};
use warp::reply::Response;

use super::bad;
use crate::error::{ApiError, Code};
use crate::http::ops::authorize_for;
use crate::http::{App, LogCx, json_response};
use crate::store::webhooks::{Delivery, Webhook};

/// The path of the list.
pub const PATH: &str = "/api/v2/webhooks";

/// The `operation` labels of the webhook endpoints in the metrics: the list, one webhook,
/// its delivery log, its test delivery.
pub(in crate::http) const LABELS: [&str; 4] = [
    "v2/webhooks",
    "v2/webhook",
    "v2/webhook/deliveries",
    "v2/webhook/test",
];

/// What a path under [`PATH`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::http) enum Target {
    /// The list.
    List,
    /// One webhook.
    One(String),
    /// Its delivery log.
    Deliveries(String),
    /// Its test delivery.
    Test(String),
}

impl Target {
    /// The target of a path; `None` when the path is not under [`PATH`].
    pub(in crate::http) fn of(path: &str) -> Option<Result<Target, ApiError>> {
        let rest = path.strip_prefix(PATH)?;
        if rest.is_empty() {
            return Some(Ok(Target::List));
        }
        let rest = rest.strip_prefix('/')?;
        let parts: Vec<&str> = rest.split('/').collect();
        Some(match parts.as_slice() {
            [id] if !id.is_empty() => Ok(Target::One(id.to_string())),
            [id, "deliveries"] if !id.is_empty() => Ok(Target::Deliveries(id.to_string())),
            [id, "test"] if !id.is_empty() => Ok(Target::Test(id.to_string())),
            _ => Err(ApiError::new(
                Code::NotFound,
                format!(
                    "no endpoint at `{}`; the webhook endpoints are {PATH}, {PATH}/{{id}}, \
                     {PATH}/{{id}}/deliveries and {PATH}/{{id}}/test",
                    echo(path)
                ),
            )),
        })
    }

    /// The methods it answers.
    fn allowed(&self) -> &'static str {
        match self {
            Target::List => "GET, HEAD, POST",
            Target::One(_) => "DELETE",
            Target::Deliveries(_) => "GET, HEAD",
            Target::Test(_) => "POST",
        }
    }

    /// The `operation` label of the metrics (one of [`LABELS`]).
    pub(in crate::http) fn label(&self) -> &'static str {
        match self {
            Target::List => LABELS[0],
            Target::One(_) => LABELS[1],
            Target::Deliveries(_) => LABELS[2],
            Target::Test(_) => LABELS[3],
        }
    }

    /// Whether a request of `method` has a body to read.
    pub(in crate::http) fn reads_body(&self, method: &Method) -> bool {
        matches!(self, Target::List) && method == Method::POST
    }
}

/// A delivery-log entry.
fn logged(d: &Delivery) -> Value {
    json!({
        "event_id": d.event_id,
        "type": d.event_type,
        "created": d.created.to_rfc3339(),
        "attempts": d.attempts,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "next_attempt": d.next_attempt.map(|t| t.to_rfc3339()),
        "delivered": d.delivered.map(|t| t.to_rfc3339()),
    })
}

fn not_found(id: &str) -> ApiError {
    ApiError::new(
        Code::NotFound,
        format!("webhook `{}` was not found", echo(id)),
    )
}

/// The registration body: the webhook it makes (with a new id and secret), or a 400
/// naming the field and the rule.
fn registration(body: &[u8], allow_private: bool, now: Timestamp) -> Result<Webhook, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        bad(
            "(body)",
            Rule::MalformedJson,
            format!("the body is not JSON: {e}"),
        )
    })?;
    let Value::Object(o) = v else {
        return Err(bad(
            "(body)",
            Rule::MalformedJson,
            "the body is not a JSON object",
        ));
    };
    if let Some(k) = o
        .keys()
        .find(|k| !["url", "events", "thresholds"].contains(&k.as_str()))
    {
        return Err(bad(
            k,
            Rule::UnknownField,
            format!(
                "`{}` is not a field of a webhook; its fields are url, events, thresholds",
                echo(k)
            ),
        ));
    }
    let url = match o.get("url") {
        Some(Value::String(s)) if !s.is_empty() => s,
        None | Some(Value::Null) => {
            return Err(bad("url", Rule::MissingField, "`url` is required"));
        }
        Some(_) => {
            return Err(bad(
                "url",
                Rule::InvalidValue,
                "`url` must be a non-empty string",
            ));
        }
    };
    let events = strings(&o, "events")?;
    let thresholds = integers(&o, "thresholds")?;
    crate::webhooks::register(
        url,
        events.as_deref(),
        thresholds.as_deref(),
        allow_private,
        now,
    )
    .map_err(|(field, rule)| bad(&field, Rule::InvalidValue, rule))
}

/// An optional array of strings.
fn strings(o: &Map<String, Value>, field: &str) -> Result<Option<Vec<String>>, ApiError> {
    let Some(v) = o.get(field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let wrong = || {
        bad(
            field,
            Rule::InvalidValue,
            format!("`{field}` must be an array of event names"),
        )
    };
    v.as_array()
        .ok_or_else(wrong)?
        .iter()
        .map(|x| x.as_str().map(str::to_string).ok_or_else(wrong))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// An optional array of integers.
fn integers(o: &Map<String, Value>, field: &str) -> Result<Option<Vec<i64>>, ApiError> {
    let Some(v) = o.get(field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let wrong = || {
        bad(
            field,
            Rule::InvalidValue,
            format!(
                "`{field}` must be an array of integers from {} to {}",
                alerts::THRESHOLD_RANGE.start(),
                alerts::THRESHOLD_RANGE.end()
            ),
        )
    };
    v.as_array()
        .ok_or_else(wrong)?
        .iter()
        .map(|x| x.as_i64().ok_or_else(wrong))
        .collect::<Result<_, _>>()
        .map(Some)
}

/// Answers a request under [`PATH`] (its body read when [`Target::reads_body`]).
pub(in crate::http) async fn answer(
    app: &App,
    method: &Method,
    path: &str,
    target: Target,
    headers: &HeaderMap,
    body: &[u8],
    cx: &mut LogCx,
) -> Result<Response, ApiError> {
    let read = method == Method::GET || method == Method::HEAD;
    let allowed = match &target {
        Target::List => read || method == Method::POST,
        Target::One(_) => method == Method::DELETE,
        Target::Deliveries(_) => read,
        Target::Test(_) => method == Method::POST,
    };
    if !allowed {
        return Err(crate::http::method_not_allowed(
            method,
            path,
            target.allowed(),
        ));
    }
    let need = if read {
        Permission::BillingRead
    } else {
        Permission::BillingWrite
    };
    let key = authorize_for(app, need, target.label(), None, headers, cx).await?;
    let team = key.team_id.as_str();
    let store = app.store.as_ref();
    match target {
        Target::List if read => {
            let hooks = store.webhooks(team).await?;
            let data: Vec<Value> = hooks.iter().map(|h| h.to_json(false)).collect();
            Ok(json_response(&json!({"data": data, "next_cursor": null})))
        }
        Target::List => {
            let hook = registration(body, app.config.webhooks.allow_private, Timestamp::now())?;
            if !store
                .add_webhook(team, hook.clone(), &key.key_id, hook.created)
                .await?
            {
                return Err(bad(
                    "url",
                    Rule::TooMany,
                    format!(
                        "the team has {MAX_WEBHOOKS} webhooks, the most it may have: delete one first"
                    ),
                ));
            }
            let mut res = json_response(&hook.to_json(true));
            *res.status_mut() = StatusCode::CREATED;
            Ok(res)
        }
        Target::One(id) => {
            if !store
                .remove_webhook(team, &id, &key.key_id, Timestamp::now())
                .await?
            {
                return Err(not_found(&id));
            }
            let mut res = Response::new(Vec::<u8>::new().into());
            *res.status_mut() = StatusCode::NO_CONTENT;
            Ok(res)
        }
        Target::Deliveries(id) => {
            if !store.webhooks(team).await?.iter().any(|h| h.id == id) {
                return Err(not_found(&id));
            }
            let log = store.deliveries(team, &id).await?;
            let data: Vec<Value> = log.iter().map(logged).collect();
            Ok(json_response(&json!({"data": data, "next_cursor": null})))
        }
        Target::Test(id) => {
            let hooks = store.webhooks(team).await?;
            let hook = hooks
                .iter()
                .find(|h| h.id == id)
                .ok_or_else(|| not_found(&id))?;
            let now = Timestamp::now();
            let t = EventType::Test;
            let body = alerts::body(t, now, json!({"webhook_id": hook.id}));
            let event_id = crate::auth::new_id("msg");
            let client = crate::webhooks::client(app.config.webhooks.allow_private);
            let sent = crate::webhooks::send(
                &client,
                &app.config.webhooks,
                &hook.url,
                &hook.secret,
                &event_id,
                &body,
            )
            .await;
            Ok(json_response(&json!({
                "event_id": event_id,
                "delivered": sent.error.is_none(),
                "status": sent.status,
                "error": sent.error,
            })))
        }
    }
}
