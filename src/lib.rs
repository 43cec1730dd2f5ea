#![doc = include_str!("../README.md")]
//!
//! ## This crate
//!
//! The facade of the workspace: it re-exports [`usage_core`] (engine, wire model,
//! validator, evaluator) as `usage::core` and [`usage_client`] (typed async client) as
//! `usage::client`. The server is the `usage-server` binary and library; it is only a
//! dev-dependency here (the tests, the examples and the doctests above start it
//! in-process), so depending on `usage` does not pull it in.

pub use usage_client as client;
pub use usage_core as core;
