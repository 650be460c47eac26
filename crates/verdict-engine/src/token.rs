//! Bearer tokens: 32 random bytes from the operating system, shown once, stored as SHA-256.

use crate::error::{EngineError, Result};
use std::fmt::Write as _;

/// Prefix of every token, so a leaked one is recognisable in logs and scanners.
pub const TOKEN_PREFIX: &str = "vdt_";

/// A fresh token: the prefix and 64 lowercase hex digits of OS randomness.
pub fn generate() -> Result<String> {
    let mut bytes = [0_u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| EngineError::Invalid {
        what: "token",
        message: format!("the operating system gave no randomness: {e}"),
    })?;
    let mut out = String::with_capacity(TOKEN_PREFIX.len() + 64);
    out.push_str(TOKEN_PREFIX);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_prefixed_hex_and_never_repeat() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 64);
        assert!(
            a[TOKEN_PREFIX.len()..]
                .bytes()
                .all(|c| c.is_ascii_hexdigit())
        );
    }
}
