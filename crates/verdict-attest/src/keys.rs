//! Key ids and the text form of public keys.

use crate::error::AttestError;
use ed25519_dalek::VerifyingKey;
use sha2::{Digest as _, Sha256};

/// A key's id: lowercase hex of the SHA-256 of its 32 raw public-key bytes. It names a key in
/// envelopes and records; it proves nothing by itself.
#[must_use]
pub fn key_id(key: &VerifyingKey) -> String {
    hex(&Sha256::digest(key.as_bytes()))
}

/// Lowercase hex.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// A public key from its text form: 64 lowercase hex digits (surrounding whitespace ignored).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, AttestError> {
    let text = text.trim();
    let bad = || {
        AttestError::Key(format!(
            "public key {text:?} is not 64 lowercase hex digits"
        ))
    };
    if text.len() != 64 || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(bad());
    }
    let mut bytes = [0u8; 32];
    for (slot, pair) in bytes.iter_mut().zip(text.as_bytes().chunks(2)) {
        let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
        *slot = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
    }
    VerifyingKey::from_bytes(&bytes).map_err(|e| AttestError::Key(format!("public key: {e}")))
}
