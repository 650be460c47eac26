//! Domain-separated document digests (docs/spec/encoding.md).
//!
//! `digest(kind, doc) = "sha256:" + hex(SHA-256("verdict:" + kind + ":v1" + 0x00 + JCS(doc)))`.
//! The kind is part of the hashed bytes, so a subject can never be passed off as a policy with
//! the same digest. A document that carries its own top-level `"digest"` is hashed without it.

use crate::canonical;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use std::fmt;
use std::str::FromStr;

/// What a digest is of; the name is hashed into the digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DigestKind {
    /// A subject.
    Subject,
    /// A policy.
    Policy,
    /// A check evidence document.
    Evidence,
    /// A verification result.
    Verification,
    /// A finding.
    Finding,
    /// A human decision.
    HumanDecision,
    /// The sorted set of a bundle's item digests.
    EvidenceSet,
    /// The evaluation key document.
    Evaluation,
    /// A model verifier's context manifest.
    Context,
    /// A gate decision.
    Decision,
    /// A verification request.
    Request,
}

impl DigestKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 11] = [
        Self::Subject,
        Self::Policy,
        Self::Evidence,
        Self::Verification,
        Self::Finding,
        Self::HumanDecision,
        Self::EvidenceSet,
        Self::Evaluation,
        Self::Context,
        Self::Decision,
        Self::Request,
    ];

    /// The name hashed into the digest.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Subject => "subject",
            Self::Policy => "policy",
            Self::Evidence => "evidence",
            Self::Verification => "verification",
            Self::Finding => "finding",
            Self::HumanDecision => "human-decision",
            Self::EvidenceSet => "evidence-set",
            Self::Evaluation => "evaluation",
            Self::Context => "context",
            Self::Decision => "decision",
            Self::Request => "request",
        }
    }
}

impl fmt::Display for DigestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind name that is not one of [`DigestKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown digest kind {0:?} (expected one of subject, policy, evidence, verification, finding, human-decision, evidence-set, evaluation, context, decision, request)"
)]
pub struct UnknownKind(pub String);

impl FromStr for DigestKind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

/// A `sha256:<64 lowercase hex>` digest. Construction checks the form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

/// A string that is not of the form `sha256:` followed by 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed digest {0:?} (expected sha256: and 64 lowercase hex digits)")]
pub struct MalformedDigest(pub String);

/// Lowercase hex of `bytes`: the one encoder behind digests, key ids and public keys.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .flat_map(|b| {
            [
                char::from(canonical::hex_digit(b >> 4)),
                char::from(canonical::hex_digit(b & 0xf)),
            ]
        })
        .collect()
}

/// The bytes of lowercase hex text; `None` for odd length or any other character, so an
/// uppercase or padded spelling of a key is never taken as the same key.
#[must_use]
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    fn nibble(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| match pair {
            [hi, lo] => Some(nibble(*hi)? << 4 | nibble(*lo)?),
            _ => None,
        })
        .collect()
}

impl Digest {
    /// Wraps raw SHA-256 output.
    #[must_use]
    pub fn from_sha256(hash: &[u8]) -> Self {
        let mut s = Vec::with_capacity(7 + 2 * hash.len());
        s.extend_from_slice(b"sha256:");
        s.extend(
            hash.iter()
                .flat_map(|b| [canonical::hex_digit(b >> 4), canonical::hex_digit(b & 0xf)]),
        );
        // Only ASCII was written, so this never falls back.
        Self(String::from_utf8(s).unwrap_or_default())
    }

    /// The digest as text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Digest {
    type Err = MalformedDigest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = s.len() == 71
            && s.strip_prefix("sha256:").is_some_and(|hex| {
                // No early exit, so the check runs many bytes at a time.
                hex.bytes().fold(true, |ok, b| {
                    ok & ((b.wrapping_sub(b'0') < 10) | (b.wrapping_sub(b'a') < 6))
                })
            });
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(MalformedDigest(s.to_owned()))
        }
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Reads like `String` (same errors), copying the text once.
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Digest;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Digest, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<Digest, E> {
                match std::str::from_utf8(b) {
                    Ok(s) => self.visit_str(s),
                    Err(_) => Err(E::invalid_value(serde::de::Unexpected::Bytes(b), &self)),
                }
            }
        }
        d.deserialize_string(Visitor)
    }
}

impl schemars::JsonSchema for Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Digest".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^sha256:[0-9a-f]{64}$",
            "description": "sha256: followed by 64 lowercase hex digits"
        })
    }
}

/// The field name a document may carry its own digest in.
pub const CARRIED_FIELD: &str = "digest";

fn hasher(kind: DigestKind) -> Sha256 {
    let mut h = Sha256::new();
    h.update(b"verdict:");
    h.update(kind.as_str().as_bytes());
    h.update(b":v1\0");
    h
}

/// Digest of canonical bytes already produced by [`canonical::to_vec`].
#[must_use]
pub fn digest_canonical(kind: DigestKind, canonical_bytes: &[u8]) -> Digest {
    let mut h = hasher(kind);
    h.update(canonical_bytes);
    Digest::from_sha256(&h.finalize())
}

/// `digest(kind, doc)`: hashes the canonical form of `doc`, without a carried `"digest"` field.
///
/// ```
/// use verdict_core::digest::{digest, DigestKind};
/// let a = digest(DigestKind::Subject, &serde_json::json!({"x": 1}));
/// let b = digest(DigestKind::Policy, &serde_json::json!({"x": 1}));
/// assert_ne!(a, b); // domain separation
/// ```
#[must_use]
pub fn digest(kind: DigestKind, doc: &Value) -> Digest {
    digest_canonical(kind, &canonical_without_carried(doc))
}

/// The canonical bytes that [`digest`] hashes: `doc` without its top-level `"digest"` field.
#[must_use]
pub fn canonical_without_carried(doc: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_without_carried(doc, &mut out);
    out
}

fn write_without_carried(doc: &Value, out: &mut Vec<u8>) {
    match doc {
        Value::Object(map) => canonical::write_members(map, Some(CARRIED_FIELD), out),
        _ => canonical::write(doc, out),
    }
}

/// [`digest`], writing the canonical bytes into `buf` (cleared first), so that hashing many
/// documents reuses one buffer.
pub(crate) fn digest_into(kind: DigestKind, doc: &Value, buf: &mut Vec<u8>) -> Digest {
    buf.clear();
    write_without_carried(doc, buf);
    digest_canonical(kind, buf)
}

/// A carried digest that does not match its document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CarriedDigestError {
    /// The `"digest"` field is not a well-formed digest string.
    #[error("carried digest is malformed: {0}")]
    Malformed(String),
    /// The document hashes to something else.
    #[error("carried digest {carried} does not match the document's digest {actual}")]
    Mismatch {
        /// What the document claims.
        carried: String,
        /// What it hashes to.
        actual: Digest,
    },
}

/// Computes `digest(kind, doc)` and, when `doc` carries a `"digest"`, checks that it matches.
pub fn verify_carried(kind: DigestKind, doc: &Value) -> Result<Digest, CarriedDigestError> {
    let actual = digest(kind, doc);
    check_carried(doc, &actual)?;
    Ok(actual)
}

/// Checks a carried `"digest"` (if any) against `actual`, the digest already computed for `doc`.
pub fn check_carried(doc: &Value, actual: &Digest) -> Result<(), CarriedDigestError> {
    match doc.get(CARRIED_FIELD) {
        None => Ok(()),
        Some(Value::String(s)) if s.parse::<Digest>().is_ok() => {
            if *s == actual.0 {
                Ok(())
            } else {
                Err(CarriedDigestError::Mismatch {
                    carried: s.clone(),
                    actual: actual.clone(),
                })
            }
        }
        Some(other) => Err(CarriedDigestError::Malformed(other.to_string())),
    }
}

/// Streaming SHA-256 of raw bytes (artifacts, diffs, probe output): `sha256:<hex>`, no domain.
#[derive(Clone, Default)]
pub struct RawHasher(Sha256);

impl RawHasher {
    /// A fresh hasher.
    #[must_use]
    pub fn new() -> Self {
        Self(Sha256::new())
    }
    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
    /// The digest of everything fed.
    #[must_use]
    pub fn finish(self) -> Digest {
        Digest::from_sha256(&self.0.finalize())
    }
}

/// Raw content digest of a byte string (`sha256:<hex>` of the bytes themselves).
#[must_use]
pub fn raw(bytes: &[u8]) -> Digest {
    Digest::from_sha256(&Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hex_round_trips_and_unhex_takes_only_lowercase_pairs() {
        let bytes: Vec<u8> = (0..=255).collect();
        let text = hex(&bytes);
        assert_eq!(text.len(), 512);
        assert!(text.starts_with("000102") && text.ends_with("fdfeff"));
        assert_eq!(unhex(&text), Some(bytes));
        assert_eq!(unhex(""), Some(Vec::new()));
        assert_eq!(unhex("abc"), None, "odd length");
        assert_eq!(unhex("AB"), None, "uppercase is another spelling");
        assert_eq!(unhex("0g"), None);
        assert_eq!(unhex(" 00"), None);
    }

    #[test]
    fn matches_the_definition_byte_for_byte() {
        let doc = json!({"b": 2, "a": [true, null]});
        let mut pre = b"verdict:subject:v1\0".to_vec();
        pre.extend_from_slice(br#"{"a":[true,null],"b":2}"#);
        assert_eq!(digest(DigestKind::Subject, &doc), raw(&pre));
    }

    #[test]
    fn carried_digest_is_excluded_and_checked() {
        let doc = json!({"a": 1});
        let d = digest(DigestKind::Evidence, &doc);
        let carried = json!({"a": 1, "digest": d.as_str()});
        assert_eq!(
            verify_carried(DigestKind::Evidence, &carried),
            Ok(d.clone())
        );
        let tampered = json!({"a": 2, "digest": d.as_str()});
        assert!(matches!(
            verify_carried(DigestKind::Evidence, &tampered),
            Err(CarriedDigestError::Mismatch { .. })
        ));
        // The same digest claimed under another kind is a mismatch too.
        assert!(verify_carried(DigestKind::Finding, &carried).is_err());
        let malformed = json!({"a": 1, "digest": "sha256:ABC"});
        assert!(matches!(
            verify_carried(DigestKind::Evidence, &malformed),
            Err(CarriedDigestError::Malformed(_))
        ));
    }

    #[test]
    fn digest_strings_are_validated() {
        assert!("sha256:".parse::<Digest>().is_err());
        let upper = format!("sha256:{}", "A".repeat(64));
        assert!(upper.parse::<Digest>().is_err());
        let good = format!("sha256:{}", "a".repeat(64));
        assert!(good.parse::<Digest>().is_ok());
        assert!(
            format!("sha512:{}", "a".repeat(64))
                .parse::<Digest>()
                .is_err()
        );
    }

    #[test]
    fn kinds_round_trip() {
        for k in DigestKind::ALL {
            assert_eq!(k.as_str().parse::<DigestKind>(), Ok(k));
        }
        assert!("Subject".parse::<DigestKind>().is_err());
    }
}
