//! The deterministic token estimate every budget is counted in.
//!
//! Providers tokenise differently and a budget must be enforced before any call, so the
//! estimate is deliberately simple and reproducible: one token per four bytes of UTF-8, rounded
//! up. Budgets are converted to bytes once and every length is counted in bytes, so the sum of
//! the parts never drifts from the whole through rounding.

/// Bytes counted as one token.
pub const BYTES_PER_TOKEN: u64 = 4;

/// The most tokens a provider may report for one side (input or output) of one call. The
/// largest context windows offered hold about ten million tokens; a count a hundred times that
/// is no honest report of a single call, and a reply that makes one is refused. The bound also
/// keeps every sum a run makes far inside what a stored document may hold: a run charges at
/// most 16 replies (one per sample; failed attempts are not charged), each at most twice this
/// in and out, about 3.2e10 tokens, against 2^53 - 1 (about 9e15).
pub const MAX_REPORTED_TOKENS: u64 = 1_000_000_000;

/// The largest `context_tokens` a class may set: no prompt larger than the largest count a
/// provider may report for it can be charged honestly.
pub const MAX_BUDGET_TOKENS: u64 = MAX_REPORTED_TOKENS;

/// The largest integer a stored document may hold, ±(2^53 - 1): what every JSON reader
/// represents exactly, and what the store's own reader accepts.
pub const MAX_STORED: u64 = 9_007_199_254_740_991;

/// `n`, held to what a stored document may hold. The bounds above keep every count of a run
/// well inside it; this is the last guard, so a count can never make a record unreadable.
#[must_use]
pub fn storable(n: u64) -> u64 {
    n.min(MAX_STORED)
}

/// `x`, held to what a stored document may hold: finite and within ±(2^53 - 1), the range
/// beyond which the store's reader refuses a number (every double that large is an integer).
#[must_use]
pub fn storable_f64(x: f64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "2^53 - 1 is exact as a double")]
    let max = MAX_STORED as f64;
    if x.is_nan() { 0.0 } else { x.clamp(-max, max) }
}

/// The estimated token count of `bytes` bytes of text: `ceil(bytes / 4)`.
#[must_use]
pub fn estimate(bytes: usize) -> u64 {
    u64::try_from(bytes)
        .unwrap_or(u64::MAX)
        .div_ceil(BYTES_PER_TOKEN)
}

/// How many bytes of text a budget of `tokens` allows.
#[must_use]
pub fn budget_bytes(tokens: u64) -> u64 {
    tokens.saturating_mul(BYTES_PER_TOKEN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_up_and_round_trips_budgets() {
        assert_eq!(estimate(0), 0);
        assert_eq!(estimate(1), 1);
        assert_eq!(estimate(4), 1);
        assert_eq!(estimate(5), 2);
        assert_eq!(budget_bytes(10), 40);
        assert_eq!(estimate(40), 10);
        assert_eq!(budget_bytes(u64::MAX), u64::MAX);
    }

    #[test]
    fn stored_numbers_are_held_inside_what_the_reader_accepts() {
        assert_eq!(storable(u64::MAX), MAX_STORED);
        assert_eq!(storable(7), 7);
        assert!(storable_f64(f64::INFINITY) <= 9_007_199_254_740_991.0);
        assert!(storable_f64(2.092e22) <= 9_007_199_254_740_991.0);
        assert!(storable_f64(-1e300) >= -9_007_199_254_740_991.0);
        assert!(storable_f64(f64::NAN).abs() < f64::EPSILON);
        assert!((storable_f64(0.25) - 0.25).abs() < f64::EPSILON);
        // Should the bounds move, every count a run can charge must still stay inside.
        assert!(u128::from(MAX_REPORTED_TOKENS) * 2 * 16 < u128::from(MAX_STORED));
    }
}
