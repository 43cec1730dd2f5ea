//! The server's tests over real HTTP: one test binary.

mod common;

mod cli;
mod errors;
mod fidelity;
mod ops;
mod permissions;
mod process;
mod props;
mod tenancy;
