//! # usage-client
//!
//! An async client of the usage service, with a typed query builder.
//!
//! A whole program that starts a `usage-server` in-process on demo data, makes a key and
//! queries it through this client is the workspace's `examples/quickstart.rs`
//! (`cargo run --example quickstart`); `examples/caps.rs` and `examples/agent_report.rs`
//! show the other operations. This crate does not depend on the server, so its examples
//! that need one are `no_run`.
//!
//! ## Calling the service
//!
//! ```no_run
//! use usage_client::{Client, query::autocomplete as ac};
//!
//! # async fn run() -> Result<(), usage_client::Error> {
//! let client = Client::builder()
//!     .base_url("http://127.0.0.1:8080")
//!     .service_key(std::env::var("USAGE_KEY").unwrap_or_default())
//!     .build()?;
//! let per_language = ac::query()
//!     .select(ac::num_acceptances().sum().alias("accepted"))
//!     .group_by(ac::language().group_by("lang"))
//!     .build()?;
//! let results = client.analytics().query(per_language).send().await?;
//! for row in results.rows(0) {
//!     println!("{}: {}", row.get_str("lang").unwrap_or("?"), row.get_u64("accepted")?);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! ## Queries are checked before they are sent
//!
//! The field functions are typed per data source ([`query`]), and
//! [`build`](query::QueryBuilder::build) runs usage-core's validator, so a query the
//! server would refuse is refused here with the same violations, and nothing is sent:
//!
//! ```
//! use serde_json::json;
//! use usage_client::Error;
//! use usage_client::query::autocomplete as ac;
//!
//! let q = ac::query()
//!     .select(ac::num_acceptances().sum())
//!     .group_by(ac::language().group_by("lang"))
//!     .build()
//!     .unwrap();
//! // The query as it goes on the wire.
//! assert_eq!(
//!     serde_json::to_value(q.request()).unwrap(),
//!     json!({
//!         "data_source": "QUERY_DATA_SOURCE_USER_DATA",
//!         "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
//!         "aggregations": [{"field": "language", "name": "lang"}]
//!     })
//! );
//!
//! // Rule 1: all selections aggregated, or none.
//! let err: Error = ac::query()
//!     .select(ac::num_acceptances().sum())
//!     .select(ac::language().select())
//!     .build()
//!     .unwrap_err()
//!     .into();
//! assert!(matches!(err, Error::InvalidQuery(_)));
//! assert_eq!(
//!     err.violations(),
//!     [("query_requests[0].selections".to_string(), "mixed_aggregation".to_string())]
//! );
//! ```
//!
//! ## Errors
//!
//! Every call returns [`Error`] on failure: the service's error (status, code, message,
//! violations, request id), rate limiting (with `Retry-After`), timeouts, transport and
//! decoding errors, queries the validator rejects before sending, and clients or calls
//! that cannot be built. 429 and 503 answers and connection failures are retried per the
//! [`RetryPolicy`]; timeouts are not (the service may have acted on the request).
//!
//! ```
//! use std::time::Duration;
//! use usage_client::{Client, Error, RetryPolicy};
//!
//! /// What a program might do with each kind of failure.
//! fn advice(e: &Error) -> String {
//!     match e {
//!         Error::RateLimited(a) => {
//!             format!("wait {}s", a.retry_after.unwrap_or(Duration::from_secs(1)).as_secs())
//!         }
//!         Error::Api(a) if a.status == 400 => format!("fix the request: {:?}", e.violations()),
//!         Error::Api(a) => format!("{} {}: {}", a.status, a.code, a.message),
//!         Error::Timeout(_) | Error::Transport(_) => "check the network".into(),
//!         Error::InvalidQuery(q) => format!("fix the query: {q}"),
//!         other => other.to_string(),
//!     }
//! }
//!
//! let e = Client::builder().service_key("usk_example").build().unwrap_err();
//! assert!(matches!(e, Error::Build(_)));
//! assert_eq!(
//!     advice(&e),
//!     "cannot build the client: no base URL: call .base_url(\"http://host:port\")"
//! );
//!
//! // Up to five attempts; a `Retry-After` over 10 s is returned as an error instead.
//! let client = Client::builder()
//!     .base_url("http://127.0.0.1:8080")
//!     .service_key("usk_example")
//!     .timeout(Duration::from_secs(5))
//!     .retry(RetryPolicy {
//!         max_attempts: 5,
//!         max_retry_after: Duration::from_secs(10),
//!         ..RetryPolicy::default()
//!     })
//!     .build()
//!     .unwrap();
//! # let _ = client;
//! ```
#![deny(missing_docs)]

mod calls;
mod client;
mod error;
pub mod query;
mod rows;

pub use calls::{
    AgentCall, AnalyticsCall, BalanceCall, GetUsageConfigCall, IngestCall, Scope, UsageConfigCall,
    UserPageCall,
};
pub use client::{Client, ClientBuilder, RetryPolicy};
pub use error::{ApiError, Error};
pub use rows::{AnalyticsResults, Row};
pub use usage_core::wire;
// The usage-core types this crate's signatures take or return, so a program needs no
// direct dependency on usage-core to call every method.
pub use usage_core::Violation;
pub use usage_core::plan::QueryPlan;
pub use usage_core::schema::{AgentMode, Agg, FilterOp, IdeType, Source, TeamStatus};
pub use usage_core::time::Timestamp;
