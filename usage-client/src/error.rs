//! The client's error type.

use std::time::Duration;

use usage_core::wire::ErrorDetail;

use crate::query::InvalidQuery;

/// An error answered by the service (any non-2xx status with the contract's error body).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// The error code (`invalid_argument`, `not_found`, …).
    pub code: String,
    /// The message.
    pub message: String,
    /// Every violation (400 only).
    pub details: Vec<ErrorDetail>,
    /// The request id (header `x-request-id`).
    pub request_id: Option<String>,
    /// How long the service asked to wait before trying again (`Retry-After`, in whole
    /// seconds; sent with 429 and 503).
    pub retry_after: Option<Duration>,
}

/// Everything that can go wrong in a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The service answered with an error.
    #[error("{} {}: {}{}", .0.status, .0.code, .0.message, request_id_suffix(&.0.request_id))]
    Api(ApiError),
    /// The service refused the call for its rate limit (after the retries); its
    /// `retry_after` is how long it asked to wait.
    #[error("rate limited (429 resource_exhausted){}: {}", retry_after_suffix(&.0.retry_after), .0.message)]
    RateLimited(ApiError),
    /// The call did not finish in time.
    #[error("timed out: {0}")]
    Timeout(#[source] reqwest::Error),
    /// The connection failed.
    #[error("transport error: {0}")]
    Transport(#[source] reqwest::Error),
    /// An answer that does not decode.
    #[error("could not decode the answer (status {status}) at `{path}`: {message}")]
    Decode {
        /// HTTP status of the answer.
        status: u16,
        /// JSON path where decoding failed.
        path: String,
        /// What failed.
        message: String,
    },
    /// A query that usage-core's validator rejects; nothing was sent.
    #[error(transparent)]
    InvalidQuery(#[from] InvalidQuery),
    /// A client that cannot be built (bad URL, missing key).
    #[error("cannot build the client: {0}")]
    Build(String),
}

fn request_id_suffix(id: &Option<String>) -> String {
    id.as_ref()
        .map(|i| format!(" (request {i})"))
        .unwrap_or_default()
}

fn retry_after_suffix(d: &Option<Duration>) -> String {
    d.map(|d| format!(", retry after {}s", d.as_secs()))
        .unwrap_or_default()
}

impl Error {
    /// The HTTP status, for errors the service answered.
    pub fn status(&self) -> Option<u16> {
        self.api().map(|e| e.status)
    }

    /// The service's error code, for errors the service answered.
    pub fn code(&self) -> Option<&str> {
        self.api().map(|e| e.code.as_str())
    }

    /// The service's error, if it answered one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) | Error::RateLimited(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the service refused the call for its rate limit.
    pub fn is_rate_limited(&self) -> bool {
        matches!(self, Error::RateLimited(_))
    }

    /// How long the service asked to wait (`Retry-After` of a 429 or a 503).
    pub fn retry_after(&self) -> Option<Duration> {
        self.api().and_then(|e| e.retry_after)
    }

    /// Whether the call timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
    }

    /// The request id of the failed call, if the service answered.
    pub fn request_id(&self) -> Option<&str> {
        self.api().and_then(|e| e.request_id.as_deref())
    }

    /// The violations of a 400 answer or of a query rejected before sending, as
    /// `(path, rule)` pairs.
    pub fn violations(&self) -> Vec<(String, String)> {
        match self {
            Error::InvalidQuery(q) => q
                .violations()
                .iter()
                .map(|v| (v.path(), v.rule().as_str().to_string()))
                .collect(),
            other => other
                .api()
                .map(|e| {
                    e.details
                        .iter()
                        .map(|d| (d.path.clone(), d.rule.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}
