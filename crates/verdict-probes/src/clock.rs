//! Wall-clock time for results and evidence (the Gate reads no clock; the runner must).

use std::time::{SystemTime, UNIX_EPOCH};
use verdict_core::contracts::Timestamp;

/// Now, in nanoseconds since the Unix epoch, truncated to milliseconds.
#[must_use]
pub fn now_nanos() -> i128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
        i128::try_from(d.as_millis()).unwrap_or(0) * 1_000_000
    })
}

/// Now, in RFC 3339 UTC with millisecond precision.
#[must_use]
pub fn now() -> Timestamp {
    Timestamp::from_unix_nanos(now_nanos())
}
