//! The client, its builder and the retry policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER, USER_AGENT};
use serde::Serialize;
use serde::de::DeserializeOwned;
use usage_core::rng;
use usage_core::wire::ErrorBody;

use crate::error::{ApiError, Error};

/// How failed calls are retried.
///
/// 429 and 503 answers are retried after the `Retry-After` the service gives (capped by
/// `max_retry_after`), connection failures after a capped exponential backoff with
/// jitter; other errors are not retried. At most `max_attempts` attempts are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all (1 = no retries).
    pub max_attempts: u32,
    /// Backoff before the first retry of a connection failure.
    pub base_delay: Duration,
    /// Largest backoff.
    pub max_delay: Duration,
    /// Longest `Retry-After` honoured; a longer one ends the retries.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The backoff before retry `n` (1-based): `base * 2^(n-1)`, capped, with jitter in
    /// `[50%, 100%]`.
    pub fn backoff(&self, n: u32, jitter: f64) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX));
        exp.min(self.max_delay)
            .mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

/// Builds a [`Client`].
///
/// ```
/// use std::time::Duration;
/// let client = usage_client::Client::builder()
///     .base_url("http://127.0.0.1:8080")
///     .service_key("usk_example")
///     .timeout(Duration::from_secs(10))
///     .build()
///     .unwrap();
/// # let _ = client;
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until .build()"]
pub struct ClientBuilder {
    base_url: Option<String>,
    service_key: Option<String>,
    timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    user_agent: Option<String>,
    retry: RetryPolicy,
    http: Option<reqwest::Client>,
}

impl ClientBuilder {
    /// The service's base URL; operations are `POST {base_url}/api/v1/<Operation>`.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The service key sent in every request body.
    pub fn service_key(mut self, key: impl Into<String>) -> Self {
        self.service_key = Some(key.into());
        self
    }

    /// Total time allowed for one attempt (default 30 s).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// Time allowed to connect (default 10 s; ignored with a shared `reqwest::Client`).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = Some(d);
        self
    }

    /// The `User-Agent` header (default `usage-client/<version>`).
    pub fn user_agent(mut self, ua: impl Into<String>) -> Self {
        self.user_agent = Some(ua.into());
        self
    }

    /// The retry policy.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// A shared `reqwest::Client` (its connection pool is reused).
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Builds the client.
    ///
    /// # Errors
    /// [`Error::Build`] when the base URL or the service key is missing, the URL does not
    /// parse or is not `http`/`https`, or the HTTP client cannot be made.
    pub fn build(self) -> Result<Client, Error> {
        let raw = self.base_url.ok_or_else(|| {
            Error::Build("no base URL: call .base_url(\"http://host:port\")".into())
        })?;
        let mut base = reqwest::Url::parse(&raw)
            .map_err(|e| Error::Build(format!("base URL `{raw}`: {e}")))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() {
            return Err(Error::Build(format!(
                "base URL `{raw}` must be an http or https URL"
            )));
        }
        if !base.path().ends_with('/') {
            let p = format!("{}/", base.path());
            base.set_path(&p);
        }
        let api = base
            .join("api/v1/")
            .map_err(|e| Error::Build(format!("base URL `{raw}`: {e}")))?;
        let key = self
            .service_key
            .filter(|k| !k.is_empty())
            .ok_or_else(|| Error::Build("no service key: call .service_key(..)".into()))?;
        if self.retry.max_attempts == 0 {
            return Err(Error::Build(
                "retry policy: max_attempts must be at least 1".into(),
            ));
        }
        let timeout = self.timeout.unwrap_or(Duration::from_secs(30));
        let http = match self.http {
            Some(h) => h,
            None => reqwest::Client::builder()
                .connect_timeout(self.connect_timeout.unwrap_or(Duration::from_secs(10)))
                .build()
                .map_err(|e| Error::Build(format!("HTTP client: {e}")))?,
        };
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                api,
                key,
                timeout,
                user_agent: self
                    .user_agent
                    .unwrap_or_else(|| format!("usage-client/{}", env!("CARGO_PKG_VERSION"))),
                retry: self.retry,
                seed: AtomicU64::new(rng::GAMMA),
            }),
        })
    }
}

/// A client of the usage service. Cheap to clone; clones share one connection pool.
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    http: reqwest::Client,
    api: reqwest::Url,
    pub(crate) key: String,
    timeout: Duration,
    user_agent: String,
    retry: RetryPolicy,
    seed: AtomicU64,
}

fn retry_after(h: &HeaderMap) -> Option<Duration> {
    h.get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

fn request_id(h: &HeaderMap) -> Option<String> {
    h.get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Decodes a JSON answer, with the path of the failing field.
pub(crate) fn decode<T: DeserializeOwned>(status: u16, bytes: &[u8]) -> Result<T, Error> {
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| Error::Decode {
        status,
        path: e.path().to_string(),
        message: e.inner().to_string(),
    })
}

fn api_error(status: u16, headers: &HeaderMap, bytes: &[u8]) -> ApiError {
    let id = request_id(headers);
    match serde_json::from_slice::<ErrorBody>(bytes) {
        Ok(b) => ApiError {
            status,
            message: if b.message.is_empty() {
                b.error
            } else {
                b.message
            },
            code: b.code,
            details: b.details.unwrap_or_default(),
            request_id: id.or((!b.request_id.is_empty()).then_some(b.request_id)),
            retry_after: retry_after(headers),
        },
        Err(_) => ApiError {
            status,
            code: String::new(),
            message: String::from_utf8_lossy(bytes).chars().take(500).collect(),
            details: Vec::new(),
            request_id: id,
            retry_after: retry_after(headers),
        },
    }
}

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    fn jitter(&self) -> f64 {
        // SplitMix64's finalizer over a per-client counter mixed with the clock: enough to
        // spread retries of many clients, no dependency needed.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let z = self.inner.seed.fetch_add(rng::GAMMA, Ordering::Relaxed) ^ nanos;
        rng::unit_of(rng::mix(z))
    }

    /// Posts a request to an operation and decodes the answer, retrying per the policy.
    pub(crate) async fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        op: &str,
        body: &Req,
    ) -> Result<Resp, Error> {
        let inner = &self.inner;
        let url = inner
            .api
            .join(op)
            .map_err(|e| Error::Build(format!("operation {op}: {e}")))?;
        let bytes =
            serde_json::to_vec(body).map_err(|e| Error::Build(format!("request of {op}: {e}")))?;
        let policy = inner.retry;
        let mut attempt = 1;
        loop {
            let sent = inner
                .http
                .post(url.clone())
                .header(CONTENT_TYPE, "application/json")
                .header(USER_AGENT, &inner.user_agent)
                .timeout(inner.timeout)
                .body(bytes.clone())
                .send()
                .await;
            let resp = match sent {
                Ok(r) => r,
                Err(e) if e.is_timeout() => return Err(Error::Timeout(e)),
                Err(e) if e.is_connect() && attempt < policy.max_attempts => {
                    tokio::time::sleep(policy.backoff(attempt, self.jitter())).await;
                    attempt += 1;
                    continue;
                }
                Err(e) => return Err(Error::Transport(e)),
            };
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            let body = match resp.bytes().await {
                Ok(b) => b,
                Err(e) if e.is_timeout() => return Err(Error::Timeout(e)),
                Err(e) => return Err(Error::Transport(e)),
            };
            if (200..300).contains(&status) {
                return decode(status, &body);
            }
            let wait = retry_after(&headers);
            if matches!(status, 429 | 503) && attempt < policy.max_attempts {
                let delay = wait.unwrap_or_else(|| policy.backoff(attempt, self.jitter()));
                if delay <= policy.max_retry_after {
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                    continue;
                }
            }
            let error = api_error(status, &headers, &body);
            return Err(if status == 429 {
                Error::RateLimited(error)
            } else {
                Error::Api(error)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_errors_name_the_problem() {
        let e = Client::builder().service_key("k").build().unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot build the client: no base URL: call .base_url(\"http://host:port\")"
        );
        let e = Client::builder()
            .base_url("not a url")
            .service_key("k")
            .build()
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("cannot build the client: base URL `not a url`"),
            "{e}"
        );
        let e = Client::builder()
            .base_url("ftp://h")
            .service_key("k")
            .build()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot build the client: base URL `ftp://h` must be an http or https URL"
        );
        let e = Client::builder().base_url("http://h").build().unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot build the client: no service key: call .service_key(..)"
        );
    }

    #[test]
    fn operation_urls() {
        for base in ["http://h:1", "http://h:1/"] {
            let c = Client::builder()
                .base_url(base)
                .service_key("k")
                .build()
                .unwrap();
            assert_eq!(
                c.inner.api.join("Analytics").unwrap().as_str(),
                "http://h:1/api/v1/Analytics"
            );
        }
        let c = Client::builder()
            .base_url("http://h/prefix")
            .service_key("k")
            .build()
            .unwrap();
        assert_eq!(
            c.inner.api.join("Analytics").unwrap().as_str(),
            "http://h/prefix/api/v1/Analytics"
        );
    }

    #[test]
    fn backoff_is_capped_and_jittered() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 1.0), Duration::from_millis(200));
        assert_eq!(p.backoff(2, 0.0), Duration::from_millis(200));
        assert_eq!(p.backoff(30, 1.0), Duration::from_secs(5));
    }

    #[test]
    fn error_bodies_decode() {
        let mut h = HeaderMap::new();
        h.insert("x-request-id", "r1".parse().unwrap());
        h.insert(RETRY_AFTER, "3".parse().unwrap());
        let e = api_error(
            400,
            &h,
            br#"{"error":"bad","code":"invalid_argument","message":"bad","details":[{"path":"x","rule":"missing_field","message":"m"}],"requestId":"r1"}"#,
        );
        assert_eq!(e.code, "invalid_argument");
        assert_eq!(e.details[0].rule, "missing_field");
        assert_eq!(e.request_id.as_deref(), Some("r1"));
        assert_eq!(e.retry_after, Some(Duration::from_secs(3)));
        let e = api_error(502, &HeaderMap::new(), b"<html>bad gateway</html>");
        assert_eq!(e.retry_after, None);
        assert_eq!(e.message, "<html>bad gateway</html>");
        assert_eq!(e.code, "");
    }
}
