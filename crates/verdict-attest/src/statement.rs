//! The in-toto Statement v1 layer and the two predicates verdict signs: the SLSA Verification
//! Summary (one per gate decision) and the in-toto test result (one per check evidence the Gate counted).
//!
//! verdict's own digests are domain-separated (`SHA-256("verdict:" + kind + ":v1" + 0x00 +
//! JCS(doc))`), not the SHA-256 of a file, so they are listed under algorithm names of their own
//! (`verdictSubject`, `verdictPolicy`, ...). Resources, whose digests are the SHA-256 of their
//! raw bytes, are listed under `sha256`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use verdict_core::contracts::{Outcome, Reason};
use verdict_core::digest::{Digest, DigestKind};

/// `_type` of an in-toto Statement v1.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The DSSE payload type of an in-toto statement.
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// Predicate type of a SLSA Verification Summary v1.
pub const VSA_PREDICATE: &str = "https://slsa.dev/verification_summary/v1";
/// Predicate type of an in-toto test result v0.1.
pub const TEST_RESULT_PREDICATE: &str = "https://in-toto.io/attestation/test-result/v0.1";
/// The base of verdict's own URIs (verifier id, resource and policy URIs, extension fields).
pub const VERDICT_URI: &str = "https://example.invalid/verdict";
/// The verifier id in every verification summary.
pub const VERIFIER_ID: &str = "https://example.invalid/verdict/gate";
/// The namespaced field of a verification summary that carries the Gate's exact decision.
pub const GATE_EXTENSION: &str = "https://example.invalid/verdict/attestation/gate-decision/v1";
/// The namespaced field of a test result that carries the check evidence it reports.
pub const CHECK_EXTENSION: &str = "https://example.invalid/verdict/attestation/check-evidence/v1";
/// The name of the subject entry that is the verification subject itself.
pub const SUBJECT_NAME: &str = "verdict-subject";
/// `verificationResult` of a summary whose decision is `pass`.
pub const PASSED: &str = "PASSED";
/// `verificationResult` of any other summary (and `result` of a failed test).
pub const FAILED: &str = "FAILED";
/// The level a passing summary reports. SLSA lets verifiers name their own levels as long as
/// they do not start with `SLSA_`; this one says only that verdict's Gate decided `pass`.
pub const GATE_PASS_LEVEL: &str = "VERDICT_GATE_PASS";

/// Which clock the store that made a decision keeps. On a manual clock the decision's time was
/// chosen by whoever ran it, so nothing made there is a real-time claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// The system (on PostgreSQL, the database's) clock.
    System,
    /// A clock the caller sets, for tests and simulations.
    Manual,
}

impl Clock {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Manual => "manual",
        }
    }
}

/// A digest set: algorithm name to lowercase hex.
pub type DigestSet = BTreeMap<String, String>;

/// An in-toto resource descriptor (the fields verdict uses).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ResourceDescriptor {
    /// Name, unique within a statement's subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// Its digests.
    #[serde(default)]
    pub digest: DigestSet,
}

/// An in-toto Statement v1 with a typed predicate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Statement<P> {
    /// [`STATEMENT_TYPE`].
    #[serde(rename = "_type")]
    pub statement_type: String,
    /// What the statement is about: the verification subject, then its resources.
    pub subject: Vec<ResourceDescriptor>,
    /// The predicate's type URI.
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    /// The predicate.
    pub predicate: P,
}

/// The verifier of a summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct VsaVerifier {
    /// [`VERIFIER_ID`].
    pub id: String,
    /// Component name to version.
    #[serde(default)]
    pub version: BTreeMap<String, String>,
}

/// A reference to a document by URI and digest (the policy, an input).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
pub struct DocumentRef {
    /// `VERDICT_URI/<kind>/<digest>`.
    pub uri: String,
    /// Its verdict digest.
    pub digest: DigestSet,
}

/// The SLSA Verification Summary v1 predicate, with verdict's decision in [`GATE_EXTENSION`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VerificationSummary {
    /// Who verified, and which version.
    pub verifier: VsaVerifier,
    /// The Gate's `now` for this decision.
    #[serde(rename = "timeVerified")]
    pub time_verified: String,
    /// The verification subject's URI.
    #[serde(rename = "resourceUri")]
    pub resource_uri: String,
    /// The policy applied.
    pub policy: DocumentRef,
    /// Every document the Gate read besides subject and policy.
    #[serde(rename = "inputAttestations")]
    pub input_attestations: Vec<DocumentRef>,
    /// [`PASSED`] only for `pass`; [`FAILED`] otherwise.
    #[serde(rename = "verificationResult")]
    pub verification_result: String,
    /// `[GATE_PASS_LEVEL]` on a pass, `["FAILED"]` otherwise.
    #[serde(rename = "verifiedLevels")]
    pub verified_levels: Vec<String>,
    /// The exact decision.
    #[serde(rename = "https://example.invalid/verdict/attestation/gate-decision/v1")]
    pub gate: GateExtension,
}

/// What the Gate decided, exactly; what a summary's `PASSED` / `FAILED` abbreviates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateExtension {
    /// The gate's name.
    pub gate: String,
    /// The clock of the store that decided: a `manual` one means `timeVerified` was chosen by
    /// the caller. Required, so a file that does not say is not read as a real-time claim.
    pub clock: Clock,
    /// The outcome: `pass | rework | human_required | blocked`.
    pub outcome: Outcome,
    /// Every reason, as in the decision.
    pub reasons: Vec<Reason>,
    /// The evaluation key.
    pub evaluation_key: Digest,
    /// `digest("decision", decision)`.
    pub decision_digest: Digest,
    /// The decision document, as stored.
    pub decision: Value,
    /// The check evidence the Gate counted for the subject, by digest, sorted: each has a test
    /// result in the file and no other evidence has one, so a signed `PASSED` test result is
    /// never a check the Gate did not count (the producer's own run of a check, say). The
    /// summary's inputs list every evidence the Gate read, counted or not.
    pub counted_evidence: Vec<Digest>,
    /// The gate bundle it was decided from, when included; a verifier re-evaluates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<Value>,
}

/// The in-toto test-result v0.1 predicate for one check evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TestResult {
    /// [`PASSED`] for a `pass` outcome, [`FAILED`] for `fail` and `error`.
    pub result: String,
    /// The check's definition, by digest.
    pub configuration: Vec<ResourceDescriptor>,
    /// The check id when it passed.
    #[serde(rename = "passedTests", default)]
    pub passed_tests: Vec<String>,
    /// Never used: a check has no warned outcome.
    #[serde(rename = "warnedTests", default)]
    pub warned_tests: Vec<String>,
    /// The check id when it failed or could not observe.
    #[serde(rename = "failedTests", default)]
    pub failed_tests: Vec<String>,
    /// The check evidence itself.
    #[serde(rename = "https://example.invalid/verdict/attestation/check-evidence/v1")]
    pub evidence: CheckExtension,
}

/// The check evidence a test result reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckExtension {
    /// `digest("evidence", evidence)`.
    pub evidence_digest: Digest,
    /// The evidence document, as stored.
    pub evidence: Value,
}

/// The algorithm name a verdict digest of `kind` is listed under.
#[must_use]
pub const fn algorithm(kind: DigestKind) -> &'static str {
    match kind {
        DigestKind::Subject => "verdictSubject",
        DigestKind::Policy => "verdictPolicy",
        DigestKind::Evidence => "verdictEvidence",
        DigestKind::Verification => "verdictVerification",
        DigestKind::Finding => "verdictFinding",
        DigestKind::HumanDecision => "verdictHumanDecision",
        DigestKind::EvidenceSet => "verdictEvidenceSet",
        DigestKind::Evaluation => "verdictEvaluation",
        DigestKind::Context => "verdictContext",
        DigestKind::Decision => "verdictDecision",
        DigestKind::Request => "verdictRequest",
    }
}

/// The hex part of a verdict digest (`sha256:<hex>`).
#[must_use]
pub fn hex_of(digest: &Digest) -> &str {
    digest
        .as_str()
        .strip_prefix("sha256:")
        .unwrap_or(digest.as_str())
}

/// The digest set of a verdict digest of `kind`.
#[must_use]
pub fn digest_set(kind: DigestKind, digest: &Digest) -> DigestSet {
    BTreeMap::from([(algorithm(kind).to_owned(), hex_of(digest).to_owned())])
}

/// The reference to a verdict document of `kind`.
#[must_use]
pub fn document_ref(kind: DigestKind, digest: &Digest) -> DocumentRef {
    DocumentRef {
        uri: format!("{VERDICT_URI}/{}/{}", kind.as_str(), digest.as_str()),
        digest: digest_set(kind, digest),
    }
}
