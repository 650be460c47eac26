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

/// Lowercase hex (the workspace's one encoder).
pub use verdict_core::digest::hex;

/// A public key from its text form: 64 lowercase hex digits (surrounding whitespace ignored).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, AttestError> {
    let text = text.trim();
    let bad = || {
        AttestError::Key(format!(
            "public key {text:?} is not 64 lowercase hex digits"
        ))
    };
    let bytes: [u8; 32] = verdict_core::digest::unhex(text)
        .and_then(|v| v.try_into().ok())
        .ok_or_else(bad)?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| AttestError::Key(format!("public key: {e}")))
}
