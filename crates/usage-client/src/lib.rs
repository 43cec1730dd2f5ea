//! # usage-client
//!
//! The async client of the usage service. It arrives with issue 6; until then this crate
//! re-exports the wire model it will speak.

pub use usage_core::wire;
