//! The server's tests over real HTTP, in one binary. The HTTP-level modules (`errors`,
//! `ops`, `permissions`, `props`, `tenancy`, `wire_props`) run each test on every store: memory, SQLite
//! and PostgreSQL, as `module::test::memory`, `::sqlite` and `::postgres`
//! ([`on_every_store!`]); `fidelity` runs on every store itself; `roundtrip` sends values at
//! the edges through `Ingest` and a restart on every store; `process` and `cli` run the
//! real binary; `dashboard` runs the dashboard of `serve --demo` in headless Chromium, `reference`
//! the API reference of `GET /docs`; `openapi_client` generates a Python client from the
//! OpenAPI document and runs it against `serve --demo`.

#[macro_use]
mod common;

mod admin;
mod bounds;
mod cli;
mod crash;
mod credits;
mod dashboard;
mod docs;
mod errors;
mod export;
mod fidelity;
mod hotpath;
mod metrics;
mod openapi_client;
mod ops;
mod permissions;
mod process;
mod props;
mod reference;
mod roundtrip;
mod tenancy;
mod v2;
mod webhooks;
mod wire_props;
