//! The gate bundle (docs/spec/bundle.md): everything one evaluation reads.

use super::evidence::{CheckEvidence, Finding, HumanDecision, VerificationResult};
use super::policy::Policy;
use super::primitives::Timestamp;
use super::subject::Subject;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The schema tag of a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum BundleSchema {
    /// Version 1.
    #[serde(rename = "verdict.gate-bundle/v1")]
    V1,
}

/// One evaluation's input. The order of its arrays is irrelevant.
///
/// Every document in it may carry its own `"digest"`; the Gate checks and strips it before
/// reading the document (a mismatch is `evidence_tampered`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateBundle {
    /// `verdict.gate-bundle/v1`.
    pub schema: BundleSchema,
    /// The policy.
    pub policy: Policy,
    /// The subject.
    pub subject: Subject,
    /// Check evidence.
    pub evidence: Vec<CheckEvidence>,
    /// Verification results.
    pub verifications: Vec<VerificationResult>,
    /// Human decisions.
    pub human_decisions: Vec<HumanDecision>,
    /// Open blocking findings from earlier subjects of the same execution lineage.
    pub prior_findings: Vec<Finding>,
    /// The instant the decision is made at (the Gate reads no clock).
    pub now: Timestamp,
}
