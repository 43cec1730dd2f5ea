//! # usage-server
//!
//! The reference server of the usage service: the six operations of the spec and
//! `Ingest` over HTTP ([`http`]), service keys and rate limits ([`auth`]), storage behind
//! async traits with three implementations, in memory, SQLite (the embedded default) and
//! PostgreSQL ([`store`]), webhook deliveries ([`webhooks`]), the demo data set ([`demo`])
//! and the `usage-server` command line ([`cli`]).
//!
//! Run a server in-process (tests do this on an ephemeral port):
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use std::sync::Arc;
//! use usage_server::{http, store::memory::MemoryStore};
//! let server = http::spawn(Arc::new(MemoryStore::new()), http::Config::default(),
//!     "127.0.0.1:0".parse().unwrap()).await?;
//! println!("listening on {}", server.url());
//! server.shutdown().await;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod auth;
pub mod cli;
pub mod demo;
pub mod error;
pub mod http;
pub mod store;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod webhooks;
