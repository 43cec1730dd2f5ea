//! The HTTP-level suite of `tests/server` (every operation, every error row, the check
//! order, the permission matrix, cross-tenant 404s, arbitrary bodies) on the SQLite store.

/// The store [`common::Env`] opens.
const STORE: &str = "sqlite";

#[path = "server/common.rs"]
mod common;
#[path = "server/errors.rs"]
mod errors;
#[path = "server/ops.rs"]
mod ops;
#[path = "server/permissions.rs"]
mod permissions;
#[path = "server/pg.rs"]
mod pg;
#[path = "server/props.rs"]
mod props;
#[path = "server/tenancy.rs"]
mod tenancy;
