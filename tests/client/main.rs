//! Cross-crate tests: `usage-client` against `usage-server` over real HTTP, in one binary.
//!
//! Every test starts its own server in-process on an ephemeral port (memory store), so the
//! tests run in parallel and share nothing.

mod common;

mod errors;
mod ops;
mod props;
