//! Timestamps are RFC 3339 UTC (docs/spec/encoding.md), the decision's own `valid_until` too, at the
//! extremes of `max_age_s`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::contracts::{Outcome, Timestamp};

/// The largest safe `max_age_s` reaches far past year 9999; `valid_until` must still be an
/// RFC 3339 timestamp, and no later than the evidence's true expiry.
#[test]
fn valid_until_is_a_timestamp_for_the_largest_max_age() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["freshness"] =
        json!({"kind": "time", "max_age_s": 9_007_199_254_740_991_u64});
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Pass, "{d:#?}");
    let v = d.valid_until.unwrap();
    let back: Timestamp = v.as_str().parse().unwrap();
    assert_eq!(back.as_str(), "9999-12-31T23:59:59.999999999Z");
}

/// An expiry that is writable is given exactly.
#[test]
fn valid_until_is_exact_when_writable() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["observed_at"] = json!("9999-12-31T23:00:00Z");
    b.v["evidence"][0]["freshness"] = json!({"kind": "time", "max_age_s": 3599});
    b.v["now"] = json!("9999-12-31T23:00:01Z");
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Pass, "{d:#?}");
    assert_eq!(d.valid_until.unwrap().as_str(), "9999-12-31T23:59:59Z");
}
