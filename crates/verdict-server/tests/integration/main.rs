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

/// The API benchmark's code, run here with the smoke counts.
#[path = "../../benches/api/run.rs"]
mod api_bench;

mod api;
mod authority;
mod bench;
mod blobs;
mod connections;
mod events;
mod hostile;
mod jobs;
mod ops;
mod reads;
mod tokens;
mod ui;
mod webhooks;
mod work;
