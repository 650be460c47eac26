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

mod command;
mod context;
mod envelope;
mod finish;
mod hostile;
mod hostile_provider;
mod providers;
mod sampling;
