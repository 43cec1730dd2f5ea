//! # usage-core
//!
//! The engine of the usage service, with no I/O: the wire model of every operation
//! ([`wire`]), one declarative table per data source ([`schema`]), the validator that
//! turns a request as sent into a plan or every violation ([`validate`], [`plan`]), and
//! the in-memory columnar store and evaluator that answers plans ([`eval`]).
//!
//! ## Features
//!
//! - `testing`: test support for this and other crates' tests: proptest strategies of
//!   requests and datasets (`testing`) and the naive oracle the evaluator and the stores
//!   are tested against (`eval::reference`). Neither is compiled without it.
//!
//! ## Validating a query
//!
//! ```
//! use usage_core::{plan::{Limits, QueryShape}, validate, wire::decode::decode, wire::AnalyticsRequest};
//!
//! let body = br#"{
//!   "service_key": "usk_example",
//!   "query_requests": [{
//!     "data_source": "QUERY_DATA_SOURCE_USER_DATA",
//!     "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}],
//!     "filters": [{"name": "date", "filter": "QUERY_FILTER_GE", "value": "2025-05-01"}],
//!     "aggregations": [{"field": "language", "name": "lang"}]
//!   }]
//! }"#;
//! let decoded = decode::<AnalyticsRequest>(body).expect("JSON kinds are right");
//! let plan = validate::with_decoded(&decoded, |r, _| validate::analytics(r, &Limits::default()))
//!     .expect("a valid query");
//! assert_eq!(plan.queries[0].shape, QueryShape::Grouped);
//! assert_eq!(plan.queries[0].selections[0].alias, "sum_num_acceptances");
//! ```
//!
//! ## Untrusted input
//!
//! Every function here takes untrusted requests: bodies nested deeper than
//! [`wire::decode::MAX_DEPTH`] are refused before parsing, arrays are bounded by
//! [`plan::Limits`], and no input makes these functions panic.
#![deny(missing_docs)]

pub mod alerts;
pub mod credits;
pub mod error;
pub mod eval;
pub mod ident;
pub mod load;
pub mod plan;
pub mod ranges;
pub mod rng;
pub mod schema;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
pub mod validate;
pub mod version;
pub mod wire;
pub mod zone;

pub use error::{JsonPath, Rule, Violation, Violations};
pub use ident::{Ident, WireEnum};
