//! The engine's own documents, as strict types: the verification request, the admission note
//! and the run-context note. Each is written by serialising its type and read by decoding into
//! it (unknown fields refused), and its JSON Schema is derived from the same type
//! (`verdict schema request|admission-note|run-context`), so the schema and the reader cannot
//! drift apart. The field names are those the engine has always written, so documents already
//! stored read unchanged and keep their digests (docs/spec/request.md).

use crate::budget::RequestBudget;
use crate::error::{Result, invalid};
use crate::runs::{Preflight, RunContext};
use schemars::{JsonSchema, schema_for};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use verdict_core::contracts::{Id, Name, RiskClass};
use verdict_core::digest::Digest;

/// Schema of a verification request.
pub const REQUEST_SCHEMA: &str = "verdict.request/v1";
/// Schema of the engine's note of one admission and its preflight.
pub const ADMISSION_SCHEMA: &str = "verdict.admission/v1";

/// The engine documents a schema can be printed for.
pub const DOCUMENT_NAMES: [&str; 3] = ["request", "admission-note", "run-context"];

/// The schema tag of a verification request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RequestSchema {
    /// Version 1.
    #[serde(rename = "verdict.request/v1")]
    V1,
}

/// The schema tag of an admission note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AdmissionSchema {
    /// Version 1.
    #[serde(rename = "verdict.admission/v1")]
    V1,
}

/// A prior blocking finding a request pins, by id and version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PriorBlocker {
    /// Finding id.
    pub id: Id,
    /// Finding version.
    pub version: u64,
}

/// A verification request (`verdict.request/v1`): what runs admitted for it verify, pinned when
/// it was created. Its digest is its identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerificationRequest {
    /// `verdict.request/v1`.
    pub schema: RequestSchema,
    /// The execution.
    pub execution: Name,
    /// The execution's subject when the request was created.
    pub subject_digest: Digest,
    /// That subject's generation.
    pub generation: u64,
    /// The gate whose policy is pinned.
    pub gate: String,
    /// The gate's policy revision when the request was created.
    pub policy_digest: Digest,
    /// The verifier classes the policy requires for the subject's risk (sorted).
    pub verifier_classes: Vec<Id>,
    /// The open prior blockers a completed result must disposition.
    pub prior_blockers: Vec<PriorBlocker>,
    /// The subject's risk class.
    pub risk_class: RiskClass,
    /// What runs for the request may use.
    pub budget: RequestBudget,
    /// The capability the reliability ledger files the attempt under, when named (absent, the
    /// subject's decides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<Name>,
}

impl VerificationRequest {
    /// Reads a stored document as a request: its schema tag first (so another engine note in
    /// the requests table is named for what it is not), then every field strictly, then the
    /// budget's caps.
    pub fn from_value(doc: &Value) -> Result<Self> {
        let bad = invalid("verification request");
        if doc.get("schema").and_then(Value::as_str) != Some(REQUEST_SCHEMA) {
            return Err(bad(format!("the document is not a {REQUEST_SCHEMA}")));
        }
        let r: Self = verdict_core::contracts::decode_plain(doc).map_err(|e| bad(e.to_string()))?;
        r.budget.check()?;
        Ok(r)
    }

    /// The request as the document stored.
    pub fn to_value(&self) -> Result<Value> {
        serde_json::to_value(self).map_err(|e| invalid("verification request")(e.to_string()))
    }

    /// Whether the request asks for `class`.
    #[must_use]
    pub fn asks_for(&self, class: &str) -> bool {
        self.verifier_classes.iter().any(|c| c.as_str() == class)
    }
}

/// The engine's note of one admission (`verdict.admission/v1`): who was admitted to which run,
/// for which request, subject, generation and class, and what preflight decided. Stored in the
/// same transaction as the run; believed only where the run record confirms it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdmissionNote {
    /// `verdict.admission/v1`.
    pub schema: AdmissionSchema,
    /// The run.
    pub run_id: Name,
    /// The request it was admitted for.
    pub request_digest: Digest,
    /// The subject.
    pub subject_digest: Digest,
    /// The generation admitted for.
    pub generation: u64,
    /// The verifier admitted.
    pub verifier: Name,
    /// Its class.
    pub class: Id,
    /// Preflight at admission.
    pub preflight: Preflight,
}

impl AdmissionNote {
    /// The note as the document stored.
    pub fn to_value(&self) -> Result<Value> {
        serde_json::to_value(self).map_err(|e| invalid("admission note")(e.to_string()))
    }

    /// Reads a stored document as an admission note; `None` when it is not one.
    #[must_use]
    pub fn from_value(doc: &Value) -> Option<Self> {
        if doc.get("schema").and_then(Value::as_str) != Some(ADMISSION_SCHEMA) {
            return None;
        }
        verdict_core::contracts::decode_plain(doc).ok()
    }
}

/// The JSON Schema (draft 2020-12) of the named engine document ([`DOCUMENT_NAMES`]), or `None`
/// for an unknown name.
#[must_use]
pub fn document_schema(name: &str) -> Option<Value> {
    let s = match name {
        "request" => schema_for!(VerificationRequest).to_value(),
        "admission-note" => schema_for!(AdmissionNote).to_value(),
        "run-context" => schema_for!(RunContext).to_value(),
        _ => return None,
    };
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The document the engine wrote before the types existed, field for field.
    fn written_before() -> Value {
        json!({
            "schema": "verdict.request/v1",
            "execution": "ex-1",
            "subject_digest": "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86",
            "generation": 2,
            "gate": "merge",
            "policy_digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
            "verifier_classes": ["reviewer", "security"],
            "prior_blockers": [{"id": "f-1", "version": 3}],
            "risk_class": "high",
            "budget": {"max_runs": 2, "timeout_s": 30.0},
        })
    }

    #[test]
    fn a_request_written_before_the_types_reads_and_writes_back_the_same_document() {
        let old = written_before();
        let r = VerificationRequest::from_value(&old).unwrap();
        assert_eq!(r.budget.max_runs, Some(2));
        assert_eq!(r.to_value().unwrap(), old);
        assert_eq!(
            verdict_core::canonical::to_vec(&r.to_value().unwrap()),
            verdict_core::canonical::to_vec(&old)
        );
        let mut named = old.clone();
        named["capability"] = json!("payments");
        let r = VerificationRequest::from_value(&named).unwrap();
        assert_eq!(r.capability.as_ref().map(Name::as_str), Some("payments"));
        assert_eq!(r.to_value().unwrap(), named);
    }

    #[test]
    fn a_request_with_an_unknown_field_a_bad_budget_or_another_schema_is_refused() {
        let mut extra = written_before();
        extra["verifier_classess"] = json!([]);
        let mut zero = written_before();
        zero["budget"] = json!({"max_runs": 0});
        let mut note = written_before();
        note["schema"] = json!(ADMISSION_SCHEMA);
        let mut missing = written_before();
        missing.as_object_mut().unwrap().remove("policy_digest");
        for (doc, why) in [
            (extra, "verifier_classess"),
            (zero, "max_runs"),
            (note, "not a verdict.request/v1"),
            (missing, "policy_digest"),
        ] {
            let err = VerificationRequest::from_value(&doc)
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn an_admission_note_written_before_the_types_reads_and_writes_back() {
        let old = json!({
            "schema": "verdict.admission/v1",
            "run_id": "run-1",
            "request_digest": "sha256:ec4556a178527361344d876629bb9533c63fc8fcd216f423dd8bce76787fce86",
            "subject_digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111",
            "generation": 1,
            "verifier": "rev",
            "class": "reviewer",
            "preflight": {"outcome": "rework", "skipped": true, "reasons": ["check_failed: x"]},
        });
        let n = AdmissionNote::from_value(&old).unwrap();
        assert!(n.preflight.skipped);
        assert_eq!(n.to_value().unwrap(), old);
        let mut other = old;
        other["schema"] = json!(REQUEST_SCHEMA);
        assert!(AdmissionNote::from_value(&other).is_none());
    }
}
