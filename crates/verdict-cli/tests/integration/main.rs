//! The crate's integration tests, one binary: each module was a test binary of its own,
//! and linking one binary instead of many is most of what a cold test build costs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[macro_use]
mod common;

mod architecture;
mod attest;
mod audit;
mod check;
mod conformance_cli;
mod first_hour;
mod gate;
mod install;
mod judge;
mod lifecycle;
mod lifecycle_fences;
mod remote;
mod serve;
mod store;
mod verifiers;
mod verify;
mod workers;
