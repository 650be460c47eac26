//! DSSE (Dead Simple Signing Envelope) v1 with ed25519 signatures.
//!
//! A signature covers `PAE(payloadType, payload)`, never the payload alone, so a payload cannot
//! be re-labelled as another type. Verification follows the protocol's order: decode, check the
//! signature, then the payload type; the caller parses only the bytes that were verified.

use crate::error::AttestError;
use crate::keys::key_id;
use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use ed25519_dalek::{Signature as Ed25519Signature, Signer as _, SigningKey, VerifyingKey};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pre-authentication encoding of DSSE v1:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths in ASCII decimal.
#[must_use]
pub fn pae(payload_type: &str, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        body.len()
    );
    let mut out = Vec::with_capacity(head.len() + body.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(body);
    out
}

/// A signature in an envelope. `keyid` is an unauthenticated hint and is never trusted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EnvelopeSignature {
    /// The signer's key id (hex SHA-256 of the raw public key); empty when unset.
    #[serde(default)]
    pub keyid: String,
    /// Base64 of the 64-byte ed25519 signature over the PAE.
    pub sig: String,
}

/// The DSSE JSON envelope. Unknown fields are ignored, as the envelope format requires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Envelope {
    /// Base64 of the serialized body.
    pub payload: String,
    /// What the body is and how to read it.
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// One or more signatures.
    pub signatures: Vec<EnvelopeSignature>,
}

/// What a verified envelope carries: exactly the bytes whose signature was checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The payload type (authenticated by the signature).
    pub payload_type: String,
    /// The payload bytes.
    pub body: Vec<u8>,
    /// The key id of the trusted key whose signature verified.
    pub key_id: String,
}

fn engine(alphabet: &base64::alphabet::Alphabet) -> GeneralPurpose {
    GeneralPurpose::new(
        alphabet,
        GeneralPurposeConfig::new()
            .with_encode_padding(true)
            .with_decode_padding_mode(DecodePaddingMode::Indifferent),
    )
}

/// Base64 as DSSE writes it: the standard alphabet, padded.
#[must_use]
pub fn b64_encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Base64 as DSSE reads it: the standard or the URL-safe alphabet (one of them throughout),
/// padded or not; anything else, including stray bits in the last character, is refused.
pub fn b64_decode(text: &str, what: &'static str) -> Result<Vec<u8>, AttestError> {
    engine(&base64::alphabet::STANDARD)
        .decode(text)
        .or_else(|_| engine(&base64::alphabet::URL_SAFE).decode(text))
        .map_err(|e| AttestError::Envelope(format!("{what} is not base64: {e}")))
}

impl Envelope {
    /// Signs `body` as `payload_type` with `key`.
    #[must_use]
    pub fn sign(payload_type: &str, body: &[u8], key: &SigningKey) -> Self {
        let sig = key.sign(&pae(payload_type, body));
        Self {
            payload: b64_encode(body),
            payload_type: payload_type.to_owned(),
            signatures: vec![EnvelopeSignature {
                keyid: key_id(&key.verifying_key()),
                sig: b64_encode(&sig.to_bytes()),
            }],
        }
    }

    /// Reads an envelope from JSON with the strict reader (duplicate keys refused).
    pub fn from_json(text: &[u8]) -> Result<Self, AttestError> {
        let value = verdict_core::json::parse(text)
            .map_err(|e| AttestError::Envelope(format!("not JSON: {e}")))?;
        serde_json::from_value(value).map_err(|e| AttestError::Envelope(e.to_string()))
    }

    /// The envelope as one line of compact JSON.
    pub fn to_json(&self) -> Result<String, AttestError> {
        serde_json::to_string(self).map_err(|e| AttestError::Envelope(e.to_string()))
    }

    /// Verifies the envelope against `trusted` keys, then its payload type.
    ///
    /// The payload and every signature must decode; at least one signature must verify under
    /// one of the trusted keys (the `keyid` hint is not needed and never trusted); only then is
    /// the payload type compared with `expected_type`. A signature that does not verify is
    /// skipped, as the protocol allows for envelopes with several signers.
    pub fn verify(
        &self,
        trusted: &[VerifyingKey],
        expected_type: &str,
    ) -> Result<Verified, AttestError> {
        let body = b64_decode(&self.payload, "payload")?;
        if self.signatures.is_empty() {
            return Err(AttestError::Signature(
                "the envelope has no signature".into(),
            ));
        }
        let mut sigs = Vec::with_capacity(self.signatures.len());
        for (i, s) in self.signatures.iter().enumerate() {
            let bytes = b64_decode(&s.sig, "signature")?;
            let array: [u8; 64] = bytes.try_into().map_err(|_| {
                AttestError::Envelope(format!("signatures/{i}/sig is not 64 bytes"))
            })?;
            sigs.push(Ed25519Signature::from_bytes(&array));
        }
        let message = pae(&self.payload_type, &body);
        let signer = trusted.iter().find(|key| {
            sigs.iter()
                .any(|sig| key.verify_strict(&message, sig).is_ok())
        });
        let Some(signer) = signer else {
            return Err(AttestError::Signature(
                "no signature verifies under a trusted key".into(),
            ));
        };
        if self.payload_type != expected_type {
            return Err(AttestError::PayloadType {
                found: self.payload_type.clone(),
                expected: expected_type.to_owned(),
            });
        }
        Ok(Verified {
            payload_type: self.payload_type.clone(),
            body,
            key_id: key_id(signer),
        })
    }
}
