//! The server's tests over real HTTP on the memory store. The HTTP-level modules also run
//! on SQLite (`tests/server_sqlite.rs`) and PostgreSQL (`tests/server_postgres.rs`);
//! `fidelity` runs on every store itself.

/// The store [`common::Env`] opens.
const STORE: &str = "memory";

mod common;

mod cli;
mod errors;
mod fidelity;
mod ops;
mod permissions;
mod pg;
mod process;
mod props;
mod tenancy;
