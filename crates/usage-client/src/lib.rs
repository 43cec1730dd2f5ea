//! # usage-client
//!
//! An async client of the usage service, with a typed query builder.
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
//! Every call returns [`Error`] on failure: the service's error (status, code, message,
//! violations, request id), rate limiting (with `Retry-After`), timeouts, transport and
//! decoding errors, and queries the validator rejects before sending. 429 and 503 answers
//! and connection failures are retried per the [`RetryPolicy`].
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
