//! The crate's one error type. Each variant says which layer refused, so a caller can tell a
//! forged signature from a mislabelled payload from a payload that says the wrong thing.

/// Why an attestation could not be made or did not verify.
#[derive(Debug, thiserror::Error)]
pub enum AttestError {
    /// The envelope could not be read (JSON, base64, sizes).
    #[error("envelope: {0}")]
    Envelope(String),
    /// No signature verifies under a trusted key.
    #[error("signature: {0}")]
    Signature(String),
    /// The signed payload type is not the one expected.
    #[error("payload type {found:?} is not {expected:?}")]
    PayloadType {
        /// What the envelope says.
        found: String,
        /// What was expected.
        expected: String,
    },
    /// The signed statement breaks its format or contradicts itself.
    #[error("content: {0}")]
    Content(String),
    /// The embedded bundle does not reproduce the attested decision.
    #[error("re-evaluation: {0}")]
    Replay(String),
    /// A key could not be read.
    #[error("key: {0}")]
    Key(String),
    /// The inputs to an attestation or export are inconsistent.
    #[error("input: {0}")]
    Input(String),
}
