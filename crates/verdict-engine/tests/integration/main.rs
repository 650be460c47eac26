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

mod attest;
mod authentication;
mod authority;
mod cancel_authorship;
mod documents;
mod engine_login;
mod events;
mod gate_cache;
mod hostile;
mod ledger;
mod lifecycle;
mod read_scope;
mod reading;
mod records;
mod requests;
mod round_trips;
mod self_admission;
mod verify;
mod workers;
