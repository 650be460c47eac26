//! The documents of the specification (docs/spec/) as Rust types.
//!
//! Every document type refuses unknown fields, so a typo such as `requried_checks` is an error
//! rather than a silently weaker policy. Identifiers, principal names, digests and timestamps
//! are validated newtypes. [`decode`] reads any of them from a strict-parsed [`Value`], checking
//! a carried digest first and reporting the JSON pointer of the first problem.

mod bundle;
pub(crate) mod compact;
mod decision;
mod evidence;
mod policy;
pub mod primitives;
mod strict;
mod subject;

pub use bundle::{BundleSchema, GateBundle};
pub use decision::{
    CriterionDecision, DecisionSchema, FindingRef, GateDecision, Outcome, Reason, ReasonCode,
    Scores, Source, SourceKind, Sources,
};
pub use evidence::{
    CheckEvidence, CheckOutcome, ClearedReason, ContextRef, CriterionRow, CriterionStatus,
    Disposition, DispositionKind, EvidenceKind, Finding, Freshness, HumanDecision, HumanRole,
    HumanVerdict, Location, ProducedBy, Role, Runtime, Scope, Severity, UnavailableReason,
    VerificationResult, VerificationStatus, Verifier,
};
pub use policy::{Policy, PolicySchema, RiskRequirement, Rule};
pub use primitives::{Id, Name, ScalarError, Timestamp};
pub use strict::StrictValue;
pub use subject::{
    CheckPin, Criteria, Criterion, CriterionRole, Execution, Objective, Producer, Resource, Risk,
    RiskClass, Subject, SubjectSchema, WorkItem,
};

use crate::digest::{self, CarriedDigestError, Digest, DigestKind};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a document could not be read as its contract type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The carried digest does not match (tampering).
    #[error("{0}")]
    Tampered(CarriedDigestError),
    /// The document breaks its schema; `path` is a JSON pointer inside the document.
    #[error("{message} at {path}")]
    Schema {
        /// Where.
        path: String,
        /// What.
        message: String,
    },
}

/// Reads a document of `kind` as `T`: checks a carried `"digest"`, strips it, then decodes
/// strictly. Returns the document and its digest.
pub fn decode<T: DeserializeOwned>(
    kind: DigestKind,
    doc: &Value,
) -> Result<(T, Digest), DecodeError> {
    let d = digest::verify_carried(kind, doc).map_err(DecodeError::Tampered)?;
    // Only a document carrying its digest is copied, to read it without that member.
    let t = match doc {
        Value::Object(map) if map.contains_key(digest::CARRIED_FIELD) => {
            let mut m = map.clone();
            m.remove(digest::CARRIED_FIELD);
            decode_plain(&Value::Object(m))?
        }
        other => decode_plain(other)?,
    };
    Ok((t, d))
}

/// Decodes `value` as `T` with no digest handling, reporting the JSON pointer of a failure. A
/// struct is read only from an object ([`StrictValue`]).
pub fn decode_plain<T: DeserializeOwned>(value: &Value) -> Result<T, DecodeError> {
    // The fast path; only a failure pays for tracking the path.
    if let Ok(t) = T::deserialize(StrictValue(value)) {
        return Ok(t);
    }
    serde_path_to_error::deserialize::<_, T>(StrictValue(value)).map_err(|e| {
        let mut path = String::new();
        for seg in e.path().iter() {
            path.push('/');
            match seg {
                serde_path_to_error::Segment::Seq { index } => path.push_str(&index.to_string()),
                serde_path_to_error::Segment::Map { key } => {
                    path.push_str(&crate::json::pointer_token(key))
                }
                serde_path_to_error::Segment::Enum { variant } => {
                    path.push_str(&crate::json::pointer_token(variant))
                }
                serde_path_to_error::Segment::Unknown => path.push('?'),
            }
        }
        if path.is_empty() {
            path.push('/');
        }
        DecodeError::Schema {
            path,
            message: e.into_inner().to_string(),
        }
    })
}
