//! Test support (feature `testing`): proptest strategies built from the schema tables.
//!
//! [`query`] generates valid query requests for every source and shape from the schema
//! tables alone (no hand-written field list), with filter values drawn from a [`Pool`]
//! that dataset generators share, so that filters hit data; [`data`] generates such
//! datasets of every record kind; [`compare`] compares two answers and draws statistics
//! plans. The oracle they are compared with, [`crate::eval::reference`], is compiled with
//! this feature too.

pub mod bench;
pub mod compare;
pub mod data;
pub mod query;

pub use query::{Choices, Pool, arb_analytics_request, arb_query_request};
