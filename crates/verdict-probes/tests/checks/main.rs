//! Integration tests of verdict-probes against real servers on loopback, real processes and
//! real files.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod common;
mod loading;
mod modes;
mod probes;
mod reports;
mod schema;
