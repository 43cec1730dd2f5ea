//! # usage
//!
//! Facade of the usage workspace: re-exports [`usage_core`] (engine, wire model,
//! validator). The client and server crates arrive with their issues.

pub use usage_core as core;
