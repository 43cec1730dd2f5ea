//! The HTTP layer: one catch-all route, the contract's check order (section 2), request
//! ids and body limits; serving on a listener with graceful shutdown is in `listen`.
//!
//! Every request goes through `handle`: path (404) → method (405) → size (413) →
//! `Content-Type` (415) → JSON syntax and kinds (400) → key (401) → rate (429) →
//! permission (403) → validation (400) → names (404). The operations are in `ops`; the
//! static dashboard of `GET /` and `GET /dashboard` is in `dashboard`, the rendered API
//! reference of `GET /docs` in `reference`.

mod conn;
pub mod dashboard;
mod gate;
mod listen;
pub mod metrics;
pub mod openapi;
mod ops;
mod pages;
pub mod reference;
mod streamed;
pub mod v2;

pub use conn::Timeouts;
pub use gate::Slots;
pub use listen::{DRAIN_TIMEOUT, Handle, serve, serve_with, spawn};

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures_util::{FutureExt, Stream, StreamExt};
use usage_core::error::echo;
use usage_core::plan::Limits;
use warp::Filter;
use warp::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use warp::path::FullPath;
use warp::reply::Response;

use crate::auth::rate::{RateConfig, RateLimiter};
use crate::error::{ApiError, Code};
use crate::store::Store;

/// The default [`Config::poll_interval`].
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// What a client may still send past a body limit before the server stops reading it
/// (the 413 is answered after the body is drained, so the client can read it).
const DRAIN_MAX: usize = 64 << 20;

/// Server settings (contract section 9 and the flags of `serve`).
#[derive(Debug, Clone)]
pub struct Config {
    /// Per-request limits.
    pub limits: Limits,
    /// Body limit of query operations, in bytes.
    pub max_body_bytes: usize,
    /// Body limit of `Ingest`, in bytes.
    pub max_ingest_bytes: usize,
    /// Rate limit per key.
    pub rate: RateConfig,
    /// How often the store is polled for changes made by other processes (its change
    /// counter; the records of teams that changed). 250 ms by default, so that cached
    /// keys, caps and billing ([`crate::store::cached`]) reflect another process's write
    /// well within their one-second bound.
    pub poll_interval: Duration,
    /// Slow and idle clients (contract section 11).
    pub timeouts: Timeouts,
    /// Queries computed at once, in all and per team (contract section 11).
    pub slots: Slots,
    /// Webhook deliveries (contract section 12).
    pub webhooks: crate::webhooks::Settings,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            limits: Limits::default(),
            max_body_bytes: 1 << 20,
            max_ingest_bytes: 16 << 20,
            rate: RateConfig::default(),
            poll_interval: POLL_INTERVAL,
            timeouts: Timeouts::default(),
            slots: Slots::default(),
            webhooks: crate::webhooks::Settings::default(),
        }
    }
}

/// What every request handler shares.
pub struct App {
    store: Arc<dyn Store>,
    config: Config,
    rate: RateLimiter,
    gate: gate::Gate,
    pages: pages::Pages,
    metrics: metrics::Metrics,
    /// Whether `GET /metrics` is served on the API's listener (not when `serve
    /// --metrics-listen` gave it an address of its own).
    metrics_on_api: bool,
}

impl App {
    /// An app over a store.
    pub fn new(store: Arc<dyn Store>, config: Config) -> App {
        App {
            rate: RateLimiter::new(config.rate),
            gate: gate::Gate::new(config.slots),
            pages: pages::Pages::default(),
            store,
            config,
            metrics: metrics::Metrics::new(),
            metrics_on_api: true,
        }
    }
}

/// The operations of `/api/v1/{op}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Custom analytics queries.
    Analytics,
    /// Per-user activity.
    UserPageAnalytics,
    /// Agent data.
    AgentAnalytics,
    /// Read a cap.
    GetUsageConfig,
    /// Set or clear a cap.
    UsageConfig,
    /// The credit balance.
    GetTeamCreditBalance,
    /// Load records (extension).
    Ingest,
}

impl Op {
    /// Every operation.
    pub const ALL: [Op; 7] = [
        Op::Analytics,
        Op::UserPageAnalytics,
        Op::AgentAnalytics,
        Op::GetUsageConfig,
        Op::UsageConfig,
        Op::GetTeamCreditBalance,
        Op::Ingest,
    ];

    /// The path segment (exact case).
    pub fn name(self) -> &'static str {
        match self {
            Op::Analytics => "Analytics",
            Op::UserPageAnalytics => "UserPageAnalytics",
            Op::AgentAnalytics => "AgentAnalytics",
            Op::GetUsageConfig => "GetUsageConfig",
            Op::UsageConfig => "UsageConfig",
            Op::GetTeamCreditBalance => "GetTeamCreditBalance",
            Op::Ingest => "Ingest",
        }
    }

    fn parse(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.name() == s)
    }
}

/// What a request log line carries besides the request id.
#[derive(Default)]
struct LogCx {
    op: Option<Op>,
    team: Option<String>,
}

/// The warp filter of the whole API: every path, every method, one handler.
pub fn routes(app: Arc<App>) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone {
    warp::any()
        .and(warp::method())
        .and(warp::path::full())
        .and(
            warp::query::raw()
                .map(Some)
                .or(warp::any().map(|| None))
                .unify(),
        )
        .and(warp::header::headers_cloned())
        .and(warp::body::stream())
        .then(
            move |method: Method,
                  path: FullPath,
                  query: Option<String>,
                  headers: HeaderMap,
                  body| {
                let app = app.clone();
                async move { handle(app, method, path, query, headers, body).await }
            },
        )
        .recover(|_rejection: warp::Rejection| async move {
            // Every request is answered by `handle`; a rejection here is a bug.
            let rid = crate::auth::new_request_id();
            tracing::error!(request_id = %rid, "request rejected before the handler");
            let mut res = ApiError::new(Code::Internal, "internal error").into_response(&rid);
            set_request_id(&mut res, &rid);
            Ok::<_, Infallible>(res)
        })
        .unify()
}

/// The filter of a metrics-only listener (`serve --metrics-listen`): `GET /metrics`, and
/// 404 for every other path.
fn metrics_routes(app: Arc<App>) -> impl Filter<Extract = (Response,), Error = Infallible> + Clone {
    warp::any()
        .and(warp::method())
        .and(warp::path::full())
        .and(warp::header::headers_cloned())
        .then(move |method: Method, path: FullPath, headers: HeaderMap| {
            let app = app.clone();
            async move {
                let answer = if path.as_str() == "/metrics" {
                    metrics_response(&app, &method, path.as_str(), &headers).await
                } else {
                    Err(ApiError::new(
                        Code::NotFound,
                        format!(
                            "no endpoint at `{}`; this address serves GET /metrics",
                            echo(path.as_str())
                        ),
                    ))
                };
                answer.unwrap_or_else(|e| e.into_response(""))
            }
        })
}

fn valid_request_id(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

pub(crate) fn set_request_id(res: &mut Response, rid: &str) {
    if let Ok(v) = HeaderValue::from_str(rid) {
        res.headers_mut().insert("x-request-id", v);
    }
}

async fn handle<S, B>(
    app: Arc<App>,
    method: Method,
    path: FullPath,
    query: Option<String>,
    headers: HeaderMap,
    body: S,
) -> Response
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    let started = Instant::now();
    let rid = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| valid_request_id(s))
        .map_or_else(crate::auth::new_request_id, str::to_string);
    let mut cx = LogCx::default();
    let routed = std::panic::AssertUnwindSafe(route(
        &app,
        &method,
        path.as_str(),
        query.as_deref(),
        &headers,
        body,
        &mut cx,
    ))
    .catch_unwind()
    .await
    .unwrap_or_else(|_| {
        Err(ApiError::new(
            Code::Internal,
            "internal error: the request handler panicked",
        ))
    });
    let mut res = match routed {
        Ok(res) => res,
        Err(e) => {
            if e.code == Code::Internal {
                tracing::error!(request_id = %rid, error = %e.message, "internal error");
            }
            e.into_response(&rid)
        }
    };
    set_request_id(&mut res, &rid);
    let seconds = started.elapsed().as_secs_f64();
    // The log names the operation as the metrics do.
    let op = metrics::label(cx.op, path.as_str());
    app.metrics.request(op, res.status().as_u16(), seconds);
    tracing::info!(
        request_id = %rid,
        method = %method,
        op,
        team = cx.team.as_deref().unwrap_or("-"),
        status = res.status().as_u16(),
        latency_ms = seconds * 1000.0,
        "request"
    );
    res
}

/// `GET /metrics` (and `HEAD`), in the format the `Accept` header asks for.
async fn metrics_response(
    app: &App,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(method_not_allowed(method, path, "GET, HEAD"));
    }
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = metrics::Format::negotiate(accept);
    let text = app
        .metrics
        .render(app.store.as_ref(), app.gate.queries(), format)
        .await;
    let mut res = Response::new(text.into());
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    h.insert(header::VARY, HeaderValue::from_static("accept"));
    Ok(res)
}

async fn route<S, B>(
    app: &App,
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: S,
    cx: &mut LogCx,
) -> Result<Response, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>> + Send,
    B: Buf,
{
    if path == "/healthz" {
        if method != Method::GET && method != Method::HEAD {
            return Err(method_not_allowed(method, path, "GET, HEAD"));
        }
        return match app.store.health().await {
            // Rows the store cannot read are left out of answers; the count tells an
            // operator to run `usage-server check` (contract section 11).
            Ok(()) => Ok(json_response(&serde_json::json!({
                "status": "ok",
                "unreadable_records": app.store.unreadable_count(),
            }))),
            Err(e) => Err(ApiError::unavailable(format!("storage unavailable: {e}"))),
        };
    }
    if path == "/metrics" && app.metrics_on_api {
        return metrics_response(app, method, path, headers).await;
    }
    if path == v2::preview::PATH {
        if method != Method::POST {
            return Err(method_not_allowed(method, path, "POST"));
        }
        let bytes = read_body(
            headers,
            body,
            app.config.max_body_bytes,
            &app.config.timeouts,
        )
        .await?;
        check_content_type(headers)?;
        return v2::preview::answer(app, query, headers, &bytes, cx).await;
    }
    if let Some(target) = v2::webhooks::Target::of(path) {
        let target = target?;
        let bytes = if target.reads_body(method) {
            let bytes = read_body(
                headers,
                body,
                app.config.max_body_bytes,
                &app.config.timeouts,
            )
            .await?;
            check_content_type(headers)?;
            bytes
        } else {
            Bytes::new()
        };
        return v2::webhooks::answer(app, method, path, target, headers, &bytes, cx).await;
    }
    if path.starts_with("/api/v2/") {
        return v2::route(app, method, path, query, headers, cx).await;
    }
    if let Some(asset) = dashboard::asset(path) {
        return dashboard::response(asset, method);
    }
    if path.starts_with("/dashboard/") {
        return Err(ApiError::new(
            Code::NotFound,
            format!(
                "no dashboard file at `{}`; the dashboard is GET /dashboard",
                echo(path)
            ),
        ));
    }
    if let Some(asset) = reference::asset(path) {
        return dashboard::response(asset, method);
    }
    if path.starts_with("/docs/") {
        return Err(ApiError::new(
            Code::NotFound,
            format!(
                "no API reference file at `{}`; the reference is GET {}",
                echo(path),
                reference::PATH
            ),
        ));
    }
    if path == openapi::PATH {
        if method != Method::GET && method != Method::HEAD {
            return Err(method_not_allowed(method, path, "GET, HEAD"));
        }
        return Ok(json_response(&openapi::document()));
    }
    let op = path
        .strip_prefix("/api/v1/")
        .and_then(Op::parse)
        .ok_or_else(|| {
            ApiError::new(
                Code::NotFound,
                format!(
                    "no operation at `{}`; operations are POST /api/v1/{{{}}}",
                    echo(path),
                    Op::ALL.map(Op::name).join(", ")
                ),
            )
        })?;
    cx.op = Some(op);
    if method != Method::POST {
        return Err(method_not_allowed(method, path, "POST"));
    }
    let limit = if op == Op::Ingest {
        app.config.max_ingest_bytes
    } else {
        app.config.max_body_bytes
    };
    let bytes = read_body(headers, body, limit, &app.config.timeouts).await?;
    check_content_type(headers)?;
    ops::dispatch(app, op, &bytes, headers, cx).await
}

pub(crate) fn method_not_allowed(method: &Method, path: &str, allow: &'static str) -> ApiError {
    ApiError {
        allow: Some(allow),
        ..ApiError::new(
            Code::MethodNotAllowed,
            format!(
                "method {} is not allowed on `{}`; use {allow}",
                echo(method.as_str()),
                echo(path)
            ),
        )
    }
}

fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()));
    let ok = given.as_deref().is_some_and(|v| {
        v.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            Code::UnsupportedMediaType,
            match given {
                Some(g) => format!(
                    "Content-Type `{}` is not supported; send application/json",
                    echo(&g)
                ),
                None => "Content-Type is missing; send application/json".to_string(),
            },
        ))
    }
}

async fn read_body<S, B>(
    headers: &HeaderMap,
    body: S,
    limit: usize,
    timeouts: &Timeouts,
) -> Result<Bytes, ApiError>
where
    S: Stream<Item = Result<B, warp::Error>>,
    B: Buf,
{
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        ApiError::new(
            Code::PayloadTooLarge,
            format!("the body is larger than the limit of {limit} bytes"),
        )
    };
    let mut over = declared.is_some_and(|n| n > limit as u64);
    if declared.is_some_and(|n| n > (limit + DRAIN_MAX) as u64) {
        return Err(too_large());
    }
    let mut buf = BytesMut::with_capacity(declared.map_or(0, |n| n.min(limit as u64) as usize));
    let mut seen = 0usize;
    let mut body = std::pin::pin!(body);
    let deadline = tokio::time::Instant::now() + timeouts.body_total;
    loop {
        let wait = timeouts
            .body_progress
            .min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        let Ok(next) = tokio::time::timeout(wait, body.next()).await else {
            return Err(ApiError::new(
                Code::RequestTimeout,
                format!(
                    "the body did not arrive in time: it must make progress every {}s and end within {}s of the headers",
                    timeouts.body_progress.as_secs(),
                    timeouts.body_total.as_secs()
                ),
            ));
        };
        let Some(chunk) = next else { break };
        let mut chunk = chunk.map_err(|e| {
            ApiError::invalid(
                &usage_core::Violation::new(
                    usage_core::JsonPath::root(),
                    usage_core::Rule::MalformedJson,
                    format!("the body could not be read: {e}"),
                )
                .into(),
            )
        })?;
        seen += chunk.remaining();
        if over || seen > limit {
            over = true;
            chunk.advance(chunk.remaining());
            if seen > limit + DRAIN_MAX {
                break;
            }
            continue;
        }
        buf.put(chunk);
    }
    if over {
        Err(too_large())
    } else {
        Ok(buf.freeze())
    }
}

fn json_response<T: serde::Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => {
            let mut res = Response::new(bytes.into());
            res.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            *res.status_mut() = StatusCode::OK;
            res
        }
        Err(e) => {
            tracing::error!(error = %e, "an answer did not serialize");
            ApiError::new(Code::Internal, format!("internal error: {e}")).into_response("")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids() {
        assert!(valid_request_id("abc-1.2:3_X"));
        assert!(!valid_request_id(""));
        assert!(!valid_request_id("a b"));
        assert!(valid_request_id(&"a".repeat(128)));
        assert!(!valid_request_id(&"a".repeat(129)));
    }
}
