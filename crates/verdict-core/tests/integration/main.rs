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

mod appendix;
mod canonical;
mod conformance_findings;
mod conformance_keys;
mod conformance_rules;
mod conformance_scores;
mod conformance_time;
mod fixtures;
mod human_clears;
mod policy_pins;
mod properties;
mod purity;
mod reasons;
