//! The one place where a failure gets its HTTP status and its contract body (section 2).

use std::fmt;

use usage_core::Violations;
use usage_core::eval::EvalError;
use usage_core::wire::{ErrorBody, ErrorDetail};
use warp::http::{HeaderValue, StatusCode, header};
use warp::reply::Response;

use crate::store::StoreError;

/// The error codes of the contract, each with its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 400: malformed JSON, wrong types, rule violations.
    InvalidArgument,
    /// 401: key missing, unknown or revoked.
    Unauthenticated,
    /// 403: key lacks the permission, or the plan lacks the feature.
    PermissionDenied,
    /// 404: unknown path, group or user.
    NotFound,
    /// 405: method not allowed on the path.
    MethodNotAllowed,
    /// 408: the body did not arrive in time (section 11).
    RequestTimeout,
    /// 413: body over the limit.
    PayloadTooLarge,
    /// 415: `Content-Type` not `application/json`.
    UnsupportedMediaType,
    /// 429: rate limit.
    ResourceExhausted,
    /// 500: a bug.
    Internal,
    /// 503: storage down or shutting down.
    Unavailable,
    /// 414: the request's target is longer than the HTTP layer reads (its own answer,
    /// given the contract's body; section 11).
    UriTooLong,
    /// 431: the request's headers are larger than the HTTP layer reads (its own answer,
    /// given the contract's body; section 11).
    HeadersTooLarge,
}

impl Code {
    /// Every code, in the contract's order.
    pub const ALL: &'static [Code] = &[
        Code::InvalidArgument,
        Code::Unauthenticated,
        Code::PermissionDenied,
        Code::NotFound,
        Code::MethodNotAllowed,
        Code::RequestTimeout,
        Code::PayloadTooLarge,
        Code::UnsupportedMediaType,
        Code::ResourceExhausted,
        Code::Internal,
        Code::Unavailable,
        Code::UriTooLong,
        Code::HeadersTooLarge,
    ];

    /// The code's row of the contract's table (section 2): HTTP status and wire identifier.
    fn row(self) -> (StatusCode, &'static str) {
        match self {
            Code::InvalidArgument => (StatusCode::BAD_REQUEST, "invalid_argument"),
            Code::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthenticated"),
            Code::PermissionDenied => (StatusCode::FORBIDDEN, "permission_denied"),
            Code::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            Code::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Code::RequestTimeout => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            Code::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Code::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            Code::ResourceExhausted => (StatusCode::TOO_MANY_REQUESTS, "resource_exhausted"),
            Code::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            Code::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Code::UriTooLong => (StatusCode::URI_TOO_LONG, "uri_too_long"),
            Code::HeadersTooLarge => (
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "headers_too_large",
            ),
        }
    }

    /// The HTTP status of this code.
    pub fn status(self) -> StatusCode {
        self.row().0
    }

    /// The wire identifier (`invalid_argument`, …).
    pub fn as_str(self) -> &'static str {
        self.row().1
    }
}

/// The most violations a 400 lists in `details` (contract section 11); the message says
/// how many there were. The one limit of usage-core, which keeps no more than these.
pub use usage_core::error::MAX_DETAILS;

/// The message of every 500 body.
pub const INTERNAL_MESSAGE: &str =
    "internal error: the server log has the details under this request's x-request-id";

/// A failed request: its code, message, and what the response must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The code (decides the status).
    pub code: Code,
    /// The message (`error` and `message` of the body).
    pub message: String,
    /// Violations (400 only).
    pub details: Vec<ErrorDetail>,
    /// `Retry-After` in whole seconds (429, 503).
    pub retry_after: Option<u64>,
    /// `Allow` (405).
    pub allow: Option<&'static str>,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// An error with a code and a message.
    pub fn new(code: Code, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
            details: Vec::new(),
            retry_after: None,
            allow: None,
        }
    }

    /// A 400 listing the violations (in document order), at most [`MAX_DETAILS`] of them,
    /// its message naming how many there were in all ([`Violations::total`]): every 400
    /// goes through here, before and after the key check (contract section 11).
    pub fn invalid(violations: &Violations) -> ApiError {
        let first = violations
            .first()
            .map(ToString::to_string)
            .unwrap_or_default();
        let message = match violations.total() {
            1 => format!("invalid request: {first}"),
            n if n > MAX_DETAILS => format!(
                "invalid request: {n} violations, the first {MAX_DETAILS} listed; the first: {first}"
            ),
            n => format!("invalid request: {n} violations; the first: {first}"),
        };
        ApiError {
            details: violations
                .iter()
                .take(MAX_DETAILS)
                .map(ErrorDetail::from)
                .collect(),
            ..ApiError::new(Code::InvalidArgument, message)
        }
    }

    /// A 503 with `Retry-After`.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(Code::Unavailable, message)
        }
    }

    /// The contract's JSON body of this error.
    ///
    /// A 500's message stays in the server log (the caller logs it under the request id):
    /// its body says only that the log has it, never a storage engine's own words.
    pub fn body(&self, request_id: &str) -> ErrorBody {
        let message = if self.code == Code::Internal {
            INTERNAL_MESSAGE.to_string()
        } else {
            self.message.clone()
        };
        ErrorBody {
            error: message.clone(),
            code: self.code.as_str().to_string(),
            message,
            details: (self.code == Code::InvalidArgument).then(|| self.details.clone()),
            request_id: request_id.to_string(),
        }
    }

    /// The response: status, headers and the contract's JSON body.
    pub fn into_response(self, request_id: &str) -> Response {
        let body = self.body(request_id);
        let bytes = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
        let mut res = Response::new(bytes.into());
        *res.status_mut() = self.code.status();
        let h = res.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(s) = self.retry_after {
            h.insert(header::RETRY_AFTER, HeaderValue::from(s.max(1)));
        }
        if let Some(a) = self.allow {
            h.insert(header::ALLOW, HeaderValue::from_static(a));
        }
        res
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::Unavailable(m) => {
                ApiError::unavailable(format!("storage unavailable: {m}"))
            }
            StoreError::Internal(m) => {
                ApiError::new(Code::Internal, format!("internal error: {m}"))
            }
            StoreError::UnknownTeam(t) => ApiError::new(
                Code::Internal,
                format!("internal error: team `{t}` is not stored"),
            ),
            StoreError::UnknownKey(k) => ApiError::new(
                Code::Internal,
                format!("internal error: key `{k}` is not stored"),
            ),
            // No operation creates teams: only `team create` meets this.
            StoreError::NameTaken { name, id } => ApiError::new(
                Code::Internal,
                format!("internal error: a team named `{name}` exists already ({id})"),
            ),
            StoreError::Invalid(v) => ApiError::invalid(&v),
            StoreError::Eval(e) => e.into(),
        }
    }
}

impl From<EvalError> for ApiError {
    fn from(e: EvalError) -> ApiError {
        match e.violation() {
            Some(v) => ApiError::invalid(&v.into()),
            None => ApiError::new(Code::NotFound, e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use usage_core::{JsonPath, Rule, Violation};

    /// `n` violations, pushed last first: the collector keeps the first ones in document
    /// order whatever order they come in.
    fn violations(n: usize) -> Violations {
        let mut v = Violations::new();
        for i in (0..n).rev() {
            v.push(Violation::new(
                JsonPath::root().key("query_requests", 4).index(i),
                Rule::InvalidValue,
                format!("bad {i}"),
            ));
        }
        v
    }

    #[test]
    fn a_500_body_never_carries_the_storage_engines_words() {
        let e: ApiError = StoreError::Internal(
            "PostgreSQL: index row size 4160 exceeds btree version 4 maximum 2704".into(),
        )
        .into();
        assert!(e.message.contains("index row size"), "kept for the log");
        assert_eq!(e.code.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let v = serde_json::to_value(e.body("rid-1")).unwrap();
        assert_eq!(v["message"], INTERNAL_MESSAGE);
        assert_eq!(v["error"], INTERNAL_MESSAGE);
        assert_eq!(v["code"], "internal");
        assert_eq!(v["requestId"], "rid-1");
    }

    #[test]
    fn a_400_lists_at_most_100_details_and_says_how_many() {
        for (n, listed) in [(1, 1), (99, 99), (100, 100), (101, 100), (500_000, 100)] {
            let e = ApiError::invalid(&violations(n));
            assert_eq!(e.code, Code::InvalidArgument);
            assert_eq!(e.details.len(), listed, "{n}");
            assert_eq!(e.details[0].path, "query_requests[0]");
            assert_eq!(e.details[listed - 1].message, format!("bad {}", listed - 1));
            if n > 100 {
                assert!(
                    e.message.starts_with(&format!(
                        "invalid request: {n} violations, the first 100 listed; the first: "
                    )),
                    "{}",
                    e.message
                );
            }
        }
        let one = ApiError::invalid(&violations(1));
        assert_eq!(
            one.message,
            "invalid request: query_requests[0]: invalid_value: bad 0"
        );
    }
}
