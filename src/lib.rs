//! # usage
//!
//! Facade of the usage workspace: re-exports [`usage_core`] (engine, wire model,
//! validator, evaluator) as `usage::core` and [`usage_client`] (typed async client) as
//! `usage::client`. The server is the `usage-server` binary and library.

pub use usage_client as client;
pub use usage_core as core;
