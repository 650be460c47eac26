//! What the engine hands the model verifier: one subject, its criteria and the material to read.
//!
//! A request is checked before anything is built from it; a request that breaks a rule is an
//! error naming the item, never a run that grades something else than it claims to.

use std::collections::BTreeSet;
use verdict_core::contracts::{CheckEvidence, Criteria, Finding, Id, Name, Severity};
use verdict_core::digest::{self, Digest};

/// Who runs the verification: the verifier principal, its class and the run it was admitted to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifierIdentity {
    /// Verifier principal.
    pub principal: Name,
    /// Verifier class (`reviewer`, `security`, ...).
    pub class: Id,
    /// The verifier run.
    pub run: Name,
}

/// The objective the work was meant to meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectiveInput {
    /// Revision label (the subject's `objective.revision`).
    pub revision: Name,
    /// The objective text.
    pub text: String,
    /// When given, must equal the raw SHA-256 digest of `text`.
    pub digest: Option<Digest>,
}

/// One subject resource (a diff, an artifact) with its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceInput {
    /// The resource name; the model cites it as a ref.
    pub name: Name,
    /// The resource kind (`git_diff`, `log`, ...).
    pub kind: Name,
    /// The raw SHA-256 digest of `content`, as the subject pins it.
    pub digest: Digest,
    /// The bytes.
    pub content: Vec<u8>,
    /// Whether the run must see all of it (default true); optional resources may be truncated
    /// or left out to fit the budget.
    pub required: bool,
}

/// One piece of deterministic check evidence, with the output it observed if available.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceInput {
    /// The evidence document; the model cites its id.
    pub document: CheckEvidence,
    /// What the check observed (a log, a probe's output); optional context, may be truncated.
    pub output: Option<Vec<u8>>,
}

/// A verification request for one verifier class.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeRequest {
    /// The id the verification result will carry.
    pub result_id: Id,
    /// Who verifies.
    pub verifier: VerifierIdentity,
    /// The subject's digest.
    pub subject_digest: Digest,
    /// The execution generation the run was admitted for.
    pub generation: u64,
    /// The objective.
    pub objective: ObjectiveInput,
    /// The subject's criteria (revision and items).
    pub criteria: Criteria,
    /// The criteria this verifier is asked to grade; `None` asks all of them.
    pub ask: Option<Vec<Id>>,
    /// Subject resources with their bytes.
    pub resources: Vec<ResourceInput>,
    /// Deterministic evidence about this subject.
    pub evidence: Vec<EvidenceInput>,
    /// Open blocking findings from earlier subjects, to be dispositioned by id and version.
    pub prior_findings: Vec<Finding>,
    /// Criteria whose `passed` rows may cite no ref: the policy's `evidence_refs_waived`.
    /// Every other `passed` row must cite at least one ref or the reply is `invalid_output`,
    /// whatever `require_evidence_refs` says (that option is the Gate's own check).
    pub evidence_refs_waived: Vec<Id>,
}

/// A request that breaks a rule; nothing is built from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The subject has no criteria.
    #[error("the request has no criteria")]
    NoCriteria,
    /// Two criteria share an id.
    #[error("criterion {0:?} appears twice in the criteria")]
    DuplicateCriterion(String),
    /// A waiver names a criterion the subject does not have.
    #[error("evidence_refs_waived names {0:?}, which is not a criterion of the subject")]
    BadWaiver(String),
    /// The ask list is empty.
    #[error("the request asks no criteria")]
    NothingAsked,
    /// The ask list names a criterion the subject does not have, or names one twice.
    #[error("asked criterion {0:?} is not a criterion of the subject or is asked twice")]
    BadAsk(String),
    /// The objective text does not hash to its stated digest.
    #[error("objective text hashes to {actual}, not the stated {expected}")]
    ObjectiveDigest {
        /// Stated.
        expected: Digest,
        /// Computed.
        actual: Digest,
    },
    /// A resource's bytes do not hash to its pinned digest.
    #[error("resource {name:?}: bytes hash to {actual}, not the pinned {expected}")]
    ResourceDigest {
        /// Resource name.
        name: String,
        /// Pinned.
        expected: Digest,
        /// Computed.
        actual: Digest,
    },
    /// Evidence about another subject.
    #[error("evidence {id:?} is about subject {about}, not {subject}")]
    ForeignEvidence {
        /// Evidence id.
        id: String,
        /// The subject it is about.
        about: Digest,
        /// The request's subject.
        subject: Digest,
    },
    /// A prior finding that is not a blocker.
    #[error("prior finding {0:?} is not a blocker; only open blocking findings are dispositioned")]
    PriorNotBlocker(String),
    /// Two context items would be cited by the same ref.
    #[error(
        "ref {0:?} names two context items (refs must be unique across resources, evidence, findings, `objective` and `criteria`)"
    )]
    DuplicateRef(String),
    /// The verifier class of the request is not the class of the judge running it.
    #[error("request is for verifier class {request:?} but this judge runs class {judge:?}")]
    ClassMismatch {
        /// In the request.
        request: String,
        /// The judge's.
        judge: String,
    },
}

/// The ref under which the objective is recorded.
pub const OBJECTIVE_REF: &str = "objective";
/// The ref under which the criteria are recorded.
pub const CRITERIA_REF: &str = "criteria";

/// The ref of an evidence item's observed output.
#[must_use]
pub fn output_ref(evidence_id: &Id) -> String {
    format!("{evidence_id}:output")
}

impl JudgeRequest {
    /// The asked criterion ids, in the order the subject states them.
    #[must_use]
    pub fn asked(&self) -> Vec<Id> {
        match &self.ask {
            None => self.criteria.items.iter().map(|c| c.id.clone()).collect(),
            Some(ask) => self
                .criteria
                .items
                .iter()
                .filter(|c| ask.contains(&c.id))
                .map(|c| c.id.clone())
                .collect(),
        }
    }

    /// Checks every rule; the first broken one is returned.
    pub fn validate(&self) -> Result<(), RequestError> {
        if self.criteria.items.is_empty() {
            return Err(RequestError::NoCriteria);
        }
        let mut ids = BTreeSet::new();
        for c in &self.criteria.items {
            if !ids.insert(c.id.as_str()) {
                return Err(RequestError::DuplicateCriterion(c.id.to_string()));
            }
        }
        if let Some(w) = self
            .evidence_refs_waived
            .iter()
            .find(|w| !ids.contains(w.as_str()))
        {
            return Err(RequestError::BadWaiver(w.to_string()));
        }
        if let Some(ask) = &self.ask {
            if ask.is_empty() {
                return Err(RequestError::NothingAsked);
            }
            let mut seen = BTreeSet::new();
            for a in ask {
                if !ids.contains(a.as_str()) || !seen.insert(a.as_str()) {
                    return Err(RequestError::BadAsk(a.to_string()));
                }
            }
        }
        if let Some(expected) = &self.objective.digest {
            let actual = digest::raw(self.objective.text.as_bytes());
            if &actual != expected {
                return Err(RequestError::ObjectiveDigest {
                    expected: expected.clone(),
                    actual,
                });
            }
        }
        let mut refs: BTreeSet<String> = [OBJECTIVE_REF.to_owned(), CRITERIA_REF.to_owned()].into();
        let mut claim = |r: String| {
            if refs.insert(r.clone()) {
                Ok(())
            } else {
                Err(RequestError::DuplicateRef(r))
            }
        };
        for r in &self.resources {
            let actual = digest::raw(&r.content);
            if actual != r.digest {
                return Err(RequestError::ResourceDigest {
                    name: r.name.to_string(),
                    expected: r.digest.clone(),
                    actual,
                });
            }
            claim(r.name.to_string())?;
        }
        for e in &self.evidence {
            let doc = &e.document;
            if doc.subject_digest != self.subject_digest {
                return Err(RequestError::ForeignEvidence {
                    id: doc.id.to_string(),
                    about: doc.subject_digest.clone(),
                    subject: self.subject_digest.clone(),
                });
            }
            claim(doc.id.to_string())?;
            if e.output.is_some() {
                claim(output_ref(&doc.id))?;
            }
        }
        for f in &self.prior_findings {
            if f.severity != Severity::Blocker {
                return Err(RequestError::PriorNotBlocker(f.id.to_string()));
            }
            claim(f.id.to_string())?;
        }
        Ok(())
    }
}
