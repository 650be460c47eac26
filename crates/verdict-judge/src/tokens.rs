//! The deterministic token estimate every budget is counted in.
//!
//! Providers tokenise differently and a budget must be enforced before any call, so the
//! estimate is deliberately simple and reproducible: one token per four bytes of UTF-8, rounded
//! up. Budgets are converted to bytes once and every length is counted in bytes, so the sum of
//! the parts never drifts from the whole through rounding.

/// Bytes counted as one token.
pub const BYTES_PER_TOKEN: u64 = 4;

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
}
