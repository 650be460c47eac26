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

mod append_only;
mod audit_verify;
mod audit_verify_pages;
mod authority;
mod batches;
mod blobs;
mod bodies;
mod crash;
mod documents;
mod duties;
mod engine_records;
mod identity;
mod jobs;
mod migrations;
mod plans;
mod reads;
mod wakeups;
