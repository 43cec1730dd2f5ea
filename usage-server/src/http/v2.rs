//! Read-only `GET` endpoints in the style of the hosted service's successor (an extension):
//! `Authorization: Bearer` only, query parameters, opaque cursor pagination and `ETag`.
//! Each maps its parameters onto the operations' own engine (an `Analytics` query, a
//! `UserPageAnalytics` plan, the cap audit log); none evaluates anything itself.
//!
//! - `GET /api/v2/usage/daily?start=&end=[&source=][&group_by=][&tz=][&limit=][&cursor=]`
//!   (`analytics-read`): per day (and per user, language or IDE), the sums of the source's
//!   count fields and its distinct users, from an `Analytics` query grouped by `date`.
//! - `GET /api/v2/users/activity?start=&end=[&group=][&limit=][&cursor=]` (`teams-read`): the
//!   `UserPageAnalytics` rows of the period, by e-mail.
//! - `GET /api/v2/audit?[limit=][&cursor=]` (`billing-read`): the team's audit log (caps,
//!   billing, keys, the team's creation, webhooks), oldest first.
//! - `GET /api/v2/credits/users?[min_percent=][&limit=][&cursor=]` and
//!   `GET /api/v2/credits/users/{email}` (`billing-read`): users' credits in the current
//!   cycle against their caps, by e-mail (`v2/credits.rs`).
//!
//! **Pagination.** Rows come in a fixed order of a key (day and group value; e-mail; the
//! entry's place in the append-only log); a page holds the `limit` rows (default 100, at
//! most 1,000) after the cursor's key, and `next_cursor` is the key of its last row, or
//! null after the last page. A cursor is bound to its endpoint and its other parameters.
//! Because the next page starts after a key rather than at an offset, paging through a team
//! while records are ingested returns every row that existed when paging began exactly
//! once (a new row appears if its key is after the cursor).
//!
//! Answers are kept for their next pages (`pages.rs`) but for the credits, which change
//! with the clock too (a new cycle).
//!
//! **Conditional requests.** Every answer carries a strong `ETag`, a digest of its body; a
//! request whose `If-None-Match` names it is answered `304 Not Modified` without a body.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use usage_core::error::echo;
use usage_core::schema::{Agg, Permission, Role, Source, ValueType};
use usage_core::time::{Date, Timestamp};
use usage_core::wire::decode::decode;
use usage_core::wire::{AnalyticsRequest, UserPageAnalyticsRequest};
use usage_core::zone::LocalZone;
use usage_core::{JsonPath, Rule, Violation, Violations, WireEnum, validate};
use warp::http::{HeaderMap, Method};
use warp::reply::Response;

use super::ops::authorize_for;
use super::{App, LogCx};
use crate::error::{ApiError, Code};

/// Rows per page unless `limit` says otherwise.
pub const DEFAULT_LIMIT: usize = 100;
/// The largest `limit`.
pub const MAX_LIMIT: usize = 1000;

mod credits;
mod paging;
pub(super) mod preview;
pub(super) mod webhooks;

pub(super) use credits::MAX_MIN_PERCENT;
use paging::{conditional, cursor_key, hex, page};

/// The endpoints, by path (a user's credits: under [`credits::PATH`]).
const ENDPOINTS: [(&str, Endpoint); 4] = [
    ("/api/v2/usage/daily", Endpoint::Daily),
    ("/api/v2/users/activity", Endpoint::Activity),
    ("/api/v2/audit", Endpoint::Audit),
    (credits::PATH, Endpoint::Credits),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Endpoint {
    Daily,
    Activity,
    Audit,
    Credits,
    UserCredits,
    Preview,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Daily => "usage/daily",
            Endpoint::Activity => "users/activity",
            Endpoint::Audit => "audit",
            Endpoint::Credits => "credits/users",
            Endpoint::UserCredits => "credits/users/{email}",
            Endpoint::Preview => "caps/preview",
        }
    }

    pub(super) fn permission(self) -> Permission {
        match self {
            Endpoint::Daily => Permission::AnalyticsRead,
            Endpoint::Activity => Permission::TeamsRead,
            Endpoint::Audit | Endpoint::Credits | Endpoint::UserCredits | Endpoint::Preview => {
                Permission::BillingRead
            }
        }
    }

    /// Whether its answers are kept for their next pages until the team's data changes.
    fn kept(self) -> bool {
        !matches!(
            self,
            Endpoint::Credits | Endpoint::UserCredits | Endpoint::Preview
        )
    }

    /// The query parameters it takes.
    pub(super) fn params(self) -> &'static [&'static str] {
        match self {
            Endpoint::Daily => &[
                "start", "end", "source", "group_by", "tz", "limit", "cursor",
            ],
            Endpoint::Activity => &["start", "end", "group", "tz", "limit", "cursor"],
            Endpoint::Audit => &["limit", "cursor"],
            Endpoint::Credits => &["min_percent", "limit", "cursor"],
            Endpoint::UserCredits => &[],
            Endpoint::Preview => &["limit", "cursor"],
        }
    }
}

/// The `operation` labels of the v2 endpoints in the metrics (those of the webhooks are
/// [`webhooks::LABELS`]).
pub(super) const LABELS: [&str; 6] = [
    "v2/usage/daily",
    "v2/users/activity",
    "v2/audit",
    "v2/credits/users",
    "v2/credits/user",
    "v2/caps/preview",
];

/// The `operation` label of a v2 path in the metrics (one of [`LABELS`] or
/// [`webhooks::LABELS`]).
pub(super) fn label(path: &str) -> Option<&'static str> {
    if let Some(Ok(t)) = webhooks::Target::of(path) {
        return Some(t.label());
    }
    let endpoint = match credits::email_in(path) {
        Some(_) => Endpoint::UserCredits,
        None if path == preview::PATH => Endpoint::Preview,
        None => ENDPOINTS.iter().find(|(p, _)| *p == path)?.1,
    };
    Some(match endpoint {
        Endpoint::Daily => LABELS[0],
        Endpoint::Activity => LABELS[1],
        Endpoint::Audit => LABELS[2],
        Endpoint::Credits => LABELS[3],
        Endpoint::UserCredits => LABELS[4],
        Endpoint::Preview => LABELS[5],
    })
}

/// A 400 naming a query parameter and the rule it breaks.
fn bad(param: &str, rule: Rule, message: impl Into<String>) -> ApiError {
    let mut v = Violations::new();
    v.push(Violation::new(
        JsonPath::root().key(echo(param).into_owned(), 0),
        rule,
        message,
    ));
    ApiError::invalid(&v)
}

/// The fields of the `UserPageAnalytics` request that `users/activity` makes, by the
/// parameter each comes from.
const ACTIVITY_NAMES: &[(&str, &str)] = &[
    ("start_timestamp", "start"),
    ("end_timestamp", "end"),
    ("group_name", "group"),
];

/// The parts of the `Analytics` request that `usage/daily` makes, by the parameter each
/// comes from: the date filters' values are `start` and `end`, the date field is `tz`'s.
const DAILY_NAMES: &[(&str, &str)] = &[
    ("query_requests[0].filters[0].value", "start"),
    ("query_requests[0].filters[1].value", "end"),
    ("query_requests[0].filters[0].name", "tz"),
    ("query_requests[0].filters[1].name", "tz"),
    ("query_requests[0].aggregations[0].field", "tz"),
];

/// A 400 of the request an endpoint made from its parameters, told in the parameters the
/// client sent (contract section 11): each violation at a path of `names` is moved to its
/// parameter, with the field's name in its message replaced by the parameter's. The
/// parameters are checked before the request is made, so this is a safety net.
fn sent(v: Violations, names: &[(&str, &str)]) -> ApiError {
    let mut out = Violations::new();
    for x in &v {
        let path = x.path();
        let (path, message) = match names.iter().find(|(field, _)| path == *field) {
            Some((field, param)) => {
                let short = field.rsplit('.').next().unwrap_or(field);
                (
                    JsonPath::root().key((*param).to_string(), 0),
                    x.message()
                        .replace(&format!("`{short}`"), &format!("`{param}`")),
                )
            }
            None => (
                JsonPath::root().key("(parameters)".to_string(), 0),
                x.message().to_string(),
            ),
        };
        out.push(Violation::new(path, x.rule(), message));
    }
    ApiError::invalid(&out)
}

/// The query parameters of a request, each given at most once.
struct Params(Vec<(String, String)>);

impl Params {
    fn parse(endpoint: Endpoint, query: Option<&str>) -> Result<Params, ApiError> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query.unwrap_or(""))
            .map_err(|e| {
                bad(
                    "(query)",
                    Rule::MalformedJson,
                    format!("the query string does not parse: {e}"),
                )
            })?;
        let allowed = endpoint.params();
        for (i, (k, _)) in pairs.iter().enumerate() {
            if !allowed.contains(&k.as_str()) {
                return Err(bad(
                    k,
                    Rule::UnknownField,
                    format!(
                        "GET /api/v2/{} takes no parameter `{}`; it takes {}",
                        endpoint.name(),
                        echo(k),
                        allowed.join(", ")
                    ),
                ));
            }
            if pairs[..i].iter().any(|(j, _)| j == k) {
                return Err(bad(
                    k,
                    Rule::ConflictingFields,
                    format!("`{}` is given twice", echo(k)),
                ));
            }
        }
        Ok(Params(pairs))
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| bad(name, Rule::MissingField, format!("`{name}` is required")))
    }

    /// `start` and `end`, days `YYYY-MM-DD`, `start <= end`.
    fn days(&self) -> Result<(Date, Date), ApiError> {
        let day = |name: &str| -> Result<(String, Date), ApiError> {
            let v = self.required(name)?;
            Date::parse(v).map(|d| (v.to_string(), d)).ok_or_else(|| {
                bad(
                    name,
                    Rule::InvalidValue,
                    format!("`{}` is not a day YYYY-MM-DD", echo(v)),
                )
            })
        };
        let (start, s) = day("start")?;
        let (end, e) = day("end")?;
        if s > e {
            return Err(bad(
                "end",
                Rule::InvalidValue,
                format!("`end` ({end}) is before `start` ({start})"),
            ));
        }
        Ok((s, e))
    }

    /// `tz`: `UTC` (the default), `UTC±H[:MM]` or an IANA zone name, any case.
    fn zone(&self) -> Result<LocalZone, ApiError> {
        // A `+` left unescaped in a query string reads as a space (`tz=UTC+8` is `UTC 8`):
        // no zone name holds a space, so it is read back as the `+` the user meant.
        let Some(tz) = self.get("tz").filter(|t| !t.is_empty()) else {
            return Ok(LocalZone::UTC);
        };
        let tz = tz.replacen("UTC ", "UTC+", 1);
        if tz == "UTC" {
            return Ok(LocalZone::UTC);
        }
        LocalZone::parse(&tz).ok_or_else(|| {
            bad(
                "tz",
                Rule::InvalidValue,
                format!(
                    "`{}` is no time zone: use UTC, an offset UTC±H[:MM] within −12:00 to \
                     +14:00 (e.g. UTC-8) or an IANA zone name (e.g. America/New_York)",
                    echo(&tz)
                ),
            )
        })
    }

    fn limit(&self) -> Result<usize, ApiError> {
        match self.get("limit") {
            None => Ok(DEFAULT_LIMIT),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    bad(
                        "limit",
                        Rule::InvalidValue,
                        format!(
                            "`limit` is a number from 1 to {MAX_LIMIT}, not `{}`",
                            echo(v)
                        ),
                    )
                }),
        }
    }

    /// A digest of every parameter but `limit` and `cursor`: what a cursor is bound to.
    fn fingerprint(&self, endpoint: Endpoint) -> String {
        let mut h = Sha256::new();
        h.update(endpoint.name());
        let mut kept: Vec<&(String, String)> = self
            .0
            .iter()
            .filter(|(k, _)| k != "limit" && k != "cursor")
            .collect();
        kept.sort();
        for (k, v) in kept {
            h.update([0]);
            h.update(k);
            h.update([0]);
            h.update(v);
        }
        hex(&h.finalize()[..8])
    }
}

/// Answers a `/api/v2/...` request.
pub(super) async fn route(
    app: &App,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    cx: &mut LogCx,
) -> Result<Response, ApiError> {
    let email = credits::email_in(path).transpose()?;
    let endpoint = match email {
        Some(_) => Endpoint::UserCredits,
        None => match ENDPOINTS.iter().find(|(p, _)| *p == path) {
            Some((_, e)) => *e,
            None => {
                return Err(ApiError::new(
                    Code::NotFound,
                    format!(
                        "no endpoint at `{}`; the GET endpoints are {}, {}/{{email}}",
                        echo(path),
                        ENDPOINTS.map(|(p, _)| p).join(", "),
                        credits::PATH
                    ),
                ));
            }
        },
    };
    if method != Method::GET && method != Method::HEAD {
        return Err(super::method_not_allowed(method, path, "GET, HEAD"));
    }
    let key = authorize_for(
        app,
        endpoint.permission(),
        endpoint.name(),
        None,
        headers,
        cx,
    )
    .await?;
    let params = Params::parse(endpoint, query)?;
    let team = key.team_id.as_str();
    if let Some(email) = email {
        let (answer, place) = app.gate.run(team, credits::user(app, team, &email)).await;
        let mut res = conditional(headers, &answer?);
        super::streamed::hold(&mut res, place);
        return Ok(res);
    }
    let fingerprint = params.fingerprint(endpoint);
    let after = cursor_key(&params, &fingerprint)?;
    let limit = params.limit()?;
    // The whole answer is computed once for all its pages (`pages`): on a store with a
    // change counter, it is kept until the team's data changes.
    let version = match app.store.change_version().await {
        Ok(Some(store)) => app
            .store
            .team_version(team)
            .await
            .ok()
            .map(|t| (store, t.unwrap_or(0))),
        _ => None,
    }
    .filter(|_| endpoint.kept());
    let kept = version.and_then(|v| app.pages.get(team, &fingerprint, v));
    app.metrics.v2_answer(kept.is_some());
    let (rows, place) = match kept {
        Some(rows) => (rows, None),
        None => {
            let (rows, place) = app
                .gate
                .run(team, async {
                    match endpoint {
                        Endpoint::Daily => daily(app, team, &params).await,
                        Endpoint::Activity => activity(app, team, &params).await,
                        Endpoint::Audit => audit(app, team).await,
                        // A user's credits were answered above; a preview is a POST.
                        Endpoint::Credits | Endpoint::UserCredits | Endpoint::Preview => {
                            credits::rows(app, team, &params).await
                        }
                    }
                })
                .await;
            let rows = std::sync::Arc::new(rows?);
            if let Some(v) = version {
                app.pages.put(team, &fingerprint, v, rows.clone());
            }
            (rows, Some(place))
        }
    };
    let (items, next) = page(&rows, after.as_deref(), limit, &fingerprint);
    let field = if endpoint == Endpoint::Audit {
        "entries"
    } else {
        "data"
    };
    let mut res = conditional(headers, &json!({ field: items, "next_cursor": next }));
    if let Some(place) = place {
        super::streamed::hold(&mut res, place);
    }
    Ok(res)
}

/// The sources of `usage/daily`, by the `source` parameter.
pub(super) const SOURCES: [(&str, Source); 3] = [
    ("autocomplete", Source::UserData),
    ("chat", Source::ChatData),
    ("command", Source::CommandData),
];

/// The `group_by` values and the fields they group by.
pub(super) const GROUPS: [(&str, &str); 3] = [
    ("user", usage_core::schema::records::API_KEY),
    ("language", "language"),
    ("ide", "ide"),
];

async fn daily(
    app: &App,
    team: &str,
    params: &Params,
) -> Result<Vec<(Vec<String>, Value)>, ApiError> {
    let (start, end) = params.days()?;
    let source_name = params.get("source").unwrap_or("autocomplete");
    let source = SOURCES
        .iter()
        .find(|(n, _)| *n == source_name)
        .map(|(_, s)| *s)
        .ok_or_else(|| {
            bad(
                "source",
                Rule::UnknownEnumValue,
                format!(
                    "`{}` is no source; use {}",
                    echo(source_name),
                    SOURCES.map(|(n, _)| n).join(", ")
                ),
            )
        })?;
    let spec = source.spec();
    let has = |name: &str| spec.fields.iter().any(|f| f.name == name);
    let date = match params.zone()? {
        LocalZone::Fixed(0) => "date".to_string(),
        zone => format!("date {}", zone.name()),
    };
    let group = match params.get("group_by").filter(|g| !g.is_empty()) {
        None => None,
        Some(g) => {
            let (label, field) = GROUPS.iter().find(|(n, _)| *n == g).ok_or_else(|| {
                bad(
                    "group_by",
                    Rule::UnknownEnumValue,
                    format!(
                        "`{}` is no grouping; use {}",
                        echo(g),
                        GROUPS.map(|(n, _)| n).join(", ")
                    ),
                )
            })?;
            if !has(field) {
                return Err(bad(
                    "group_by",
                    Rule::InvalidAggregation,
                    format!("the {source_name} source has no {label} to group by"),
                ));
            }
            Some((*label, *field))
        }
    };
    // Every count field of the source, summed (from the schema table), and its distinct
    // users unless grouped by user.
    let mut selections: Vec<Value> = spec
        .fields
        .iter()
        .filter(|f| f.role == Role::Metric && f.ty == ValueType::Int && f.select && f.aggs.contains(&Agg::Sum))
        .map(|f| json!({"field": f.name, "aggregation_function": Agg::Sum.identifier(), "name": f.name}))
        .collect();
    if group.is_none_or(|(l, _)| l != "user") && has("distinct_users") {
        selections.push(json!({"field": "distinct_users", "name": "distinct_users"}));
    }
    let mut aggregations = vec![json!({"field": date, "name": "date"})];
    if let Some((label, field)) = group {
        aggregations.push(json!({"field": field, "name": label}));
    }
    let body = json!({"query_requests": [{
        "data_source": source.identifier(),
        "selections": selections,
        "aggregations": aggregations,
        "filters": [
            {"name": date, "filter": "QUERY_FILTER_GE", "value": start.to_iso()},
            {"name": date, "filter": "QUERY_FILTER_LE", "value": end.to_iso()},
        ],
    }]});
    let d = decode::<AnalyticsRequest>(body.to_string().as_bytes())
        .map_err(|e| sent(e.0, DAILY_NAMES))?;
    let plan = validate::with_decoded(&d, |r, _| validate::analytics(r, &app.config.limits))
        .map_err(|v| sent(v, DAILY_NAMES))?;
    let res = app.store.analytics(team, &plan, &app.config.limits).await?;
    let items = res
        .query_results
        .into_iter()
        .next()
        .map(|q| q.response_items)
        .unwrap_or_default();
    let mut rows: Vec<(Vec<String>, Value)> = items
        .into_iter()
        .map(|it| {
            let mut key = vec![it.item.get("date").unwrap_or("").to_string()];
            if let Some((label, _)) = group {
                key.push(it.item.get(label).unwrap_or("").to_string());
            }
            (key, serde_json::to_value(&it.item).unwrap_or(Value::Null))
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(rows)
}

async fn activity(
    app: &App,
    team: &str,
    params: &Params,
) -> Result<Vec<(Vec<String>, Value)>, ApiError> {
    let (start, end) = params.days()?;
    let zone = params.zone()?;
    // The local days' first instants: from the start of `start` to the start of the day
    // after `end`, in the zone. An end past the last instant kept (the day after
    // 9999-12-31) or a start before the first is left open: no record lies beyond them.
    let mut body = json!({});
    let first = zone.day_start(start);
    if first >= Timestamp::MIN {
        body["start_timestamp"] = json!(first.to_rfc3339());
    }
    let after = zone.day_start(Date(end.0 + 1));
    if after <= Timestamp::MAX {
        body["end_timestamp"] = json!(after.to_rfc3339());
    }
    if let Some(g) = params.get("group").filter(|g| !g.is_empty()) {
        body["group_name"] = json!(g);
    }
    let d = decode::<UserPageAnalyticsRequest>(body.to_string().as_bytes())
        .map_err(|e| sent(e.0, ACTIVITY_NAMES))?;
    let plan = validate::with_decoded(&d, |r, _| validate::user_page(r))
        .map_err(|v| sent(v, ACTIVITY_NAMES))?;
    let res = app.store.user_page(team, &plan).await?;
    let mut rows: Vec<(Vec<String>, Value)> = res
        .user_table_stats
        .into_iter()
        .map(|u| {
            let v = serde_json::to_value(&u).unwrap_or(Value::Null);
            (vec![u.email.clone()], v)
        })
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(rows)
}

async fn audit(app: &App, team: &str) -> Result<Vec<(Vec<String>, Value)>, ApiError> {
    let entries = crate::store::audit_log(app.store.as_ref(), team).await?;
    Ok(entries
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            // The log only grows: an entry's place is its key, zero-padded to sort as text.
            (vec![format!("{i:020}")], a)
        })
        .collect())
}
