//! The gate decision (docs/spec/decision.md) and its reason codes (docs/spec/gate.md).

use super::evidence::CriterionStatus;
use super::primitives::{Id, Timestamp};
use crate::digest::Digest;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

/// A decision's outcome. The order is the precedence: `Blocked` is the strongest.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Everything required was shown.
    Pass,
    /// A person must look.
    HumanRequired,
    /// The work must change.
    Rework,
    /// The evidence cannot be trusted or is incomplete.
    Blocked,
}

impl Outcome {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::HumanRequired => "human_required",
            Self::Rework => "rework",
            Self::Blocked => "blocked",
        }
    }
}

/// The stable reason codes (docs/spec/gate.md, "Reason codes"). Exhaustive on purpose: a new code breaks every `match`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ReasonCode {
    /// The bundle breaks the contract.
    InvalidInput,
    /// An internal fault, or a policy rule that failed to evaluate.
    GateError,
    /// No required criterion and no required check.
    NothingToVerify,
    /// A criterion the policy requires is not in the subject.
    CriterionAbsent,
    /// A required check has no counted evidence for this subject.
    EvidenceMissing,
    /// Time-sensitive evidence older than its `max_age_s`.
    EvidenceStale,
    /// `observed_at` more than 300 s after `now`.
    EvidenceFromFuture,
    /// A carried digest does not match its document.
    EvidenceTampered,
    /// Evidence ran another definition than the subject pins.
    EvidenceDefinitionMismatch,
    /// The subject pins another definition of a check than the policy does.
    CheckDefinitionUnpinned,
    /// A verifier or evidence principal/run is the producer's.
    SelfVerificationDenied,
    /// A required verifier class has no completed, counted result.
    VerifierMissing,
    /// The only results of a required class are unavailable.
    VerifierUnavailable,
    /// A result names an unknown criterion, repeats a row, or breaks the schema.
    VerifierOutputInvalid,
    /// A result was admitted for an older generation and is the only one of its class.
    StaleGeneration,
    /// A completed result of a required class has no row for a required criterion.
    CriterionRowMissing,
    /// No source tested a required criterion.
    CriterionNotTested,
    /// A required check errored.
    CheckError,
    /// A prior blocking finding is not addressed by any counted result.
    PriorBlockerUnaddressed,
    /// A required deterministic check failed.
    CheckFailed,
    /// A required criterion failed.
    CriterionFailed,
    /// A change-scoped blocker on a required criterion.
    BlockingFinding,
    /// A prior blocker is reported still present.
    PriorBlockerStillPresent,
    /// A human rejected this subject under this policy.
    HumanRejected,
    /// A required criterion is inconclusive.
    CriterionInconclusive,
    /// Sources disagree on a required criterion.
    Contradiction,
    /// A `passed` cites no ref, or a ref not in the bundle.
    UnsupportedPass,
    /// Risk policy or a disposition requires a human, and no approval binds.
    HumanReviewRequired,
    /// A policy rule fired.
    PolicyRule,
}

impl ReasonCode {
    /// Every code, in the order of the specification's table.
    pub const ALL: [Self; 29] = [
        Self::InvalidInput,
        Self::GateError,
        Self::NothingToVerify,
        Self::CriterionAbsent,
        Self::EvidenceMissing,
        Self::EvidenceStale,
        Self::EvidenceFromFuture,
        Self::EvidenceTampered,
        Self::EvidenceDefinitionMismatch,
        Self::CheckDefinitionUnpinned,
        Self::SelfVerificationDenied,
        Self::VerifierMissing,
        Self::VerifierUnavailable,
        Self::VerifierOutputInvalid,
        Self::StaleGeneration,
        Self::CriterionRowMissing,
        Self::CriterionNotTested,
        Self::CheckError,
        Self::PriorBlockerUnaddressed,
        Self::CheckFailed,
        Self::CriterionFailed,
        Self::BlockingFinding,
        Self::PriorBlockerStillPresent,
        Self::HumanRejected,
        Self::CriterionInconclusive,
        Self::Contradiction,
        Self::UnsupportedPass,
        Self::HumanReviewRequired,
        Self::PolicyRule,
    ];

    /// The outcome the code always carries, or `None` where policy sets it.
    #[must_use]
    pub const fn fixed_outcome(self) -> Option<Outcome> {
        match self {
            Self::InvalidInput
            | Self::GateError
            | Self::NothingToVerify
            | Self::CriterionAbsent
            | Self::EvidenceMissing
            | Self::EvidenceStale
            | Self::EvidenceFromFuture
            | Self::EvidenceTampered
            | Self::EvidenceDefinitionMismatch
            | Self::CheckDefinitionUnpinned
            | Self::SelfVerificationDenied
            | Self::VerifierMissing
            | Self::VerifierUnavailable
            | Self::VerifierOutputInvalid
            | Self::StaleGeneration
            | Self::CriterionRowMissing
            | Self::CriterionNotTested
            | Self::CheckError
            | Self::PriorBlockerUnaddressed => Some(Outcome::Blocked),
            Self::CheckFailed
            | Self::CriterionFailed
            | Self::BlockingFinding
            | Self::PriorBlockerStillPresent
            | Self::HumanRejected => Some(Outcome::Rework),
            Self::HumanReviewRequired => Some(Outcome::HumanRequired),
            Self::CriterionInconclusive
            | Self::Contradiction
            | Self::UnsupportedPass
            | Self::PolicyRule => None,
        }
    }

    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidInput => "invalid_input",
            Self::GateError => "gate_error",
            Self::NothingToVerify => "nothing_to_verify",
            Self::CriterionAbsent => "criterion_absent",
            Self::EvidenceMissing => "evidence_missing",
            Self::EvidenceStale => "evidence_stale",
            Self::EvidenceFromFuture => "evidence_from_future",
            Self::EvidenceTampered => "evidence_tampered",
            Self::EvidenceDefinitionMismatch => "evidence_definition_mismatch",
            Self::CheckDefinitionUnpinned => "check_definition_unpinned",
            Self::SelfVerificationDenied => "self_verification_denied",
            Self::VerifierMissing => "verifier_missing",
            Self::VerifierUnavailable => "verifier_unavailable",
            Self::VerifierOutputInvalid => "verifier_output_invalid",
            Self::StaleGeneration => "stale_generation",
            Self::CriterionRowMissing => "criterion_row_missing",
            Self::CriterionNotTested => "criterion_not_tested",
            Self::CheckError => "check_error",
            Self::PriorBlockerUnaddressed => "prior_blocker_unaddressed",
            Self::CheckFailed => "check_failed",
            Self::CriterionFailed => "criterion_failed",
            Self::BlockingFinding => "blocking_finding",
            Self::PriorBlockerStillPresent => "prior_blocker_still_present",
            Self::HumanRejected => "human_rejected",
            Self::CriterionInconclusive => "criterion_inconclusive",
            Self::Contradiction => "contradiction",
            Self::UnsupportedPass => "unsupported_pass",
            Self::HumanReviewRequired => "human_review_required",
            Self::PolicyRule => "policy_rule",
        }
    }
}

/// The schema tag of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum DecisionSchema {
    /// Version 1.
    #[serde(rename = "verdict.gate-decision/v1")]
    V1,
}

/// One reason found by the Gate.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// Stable code.
    pub code: ReasonCode,
    /// The outcome this reason asks for.
    pub outcome: Outcome,
    /// The criterion it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criterion: Option<Id>,
    /// The check it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Id>,
    /// The finding it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<Id>,
    /// What exactly, in words (ids and digests, never document text).
    pub detail: String,
}

/// A reference to one version of a finding.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct FindingRef {
    /// Finding id.
    pub id: Id,
    /// Finding version.
    pub version: u64,
    /// The criterion it bears on.
    pub criterion: Id,
}

/// What kind of item a criterion source is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Check evidence.
    Check,
    /// A row of a verification result.
    Verification,
}

/// One counted source of a criterion's status.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Source {
    /// Check evidence or verification row.
    pub kind: SourceKind,
    /// The evidence id or verification id.
    #[serde(rename = "ref")]
    pub reference: Id,
    /// What it says, as counted (an unsupported `passed` counts as `inconclusive`).
    pub status: CriterionStatus,
}

/// A criterion's counted sources: a list that reads as a slice of [`Source`], and is written
/// and read as a JSON array, like a `Vec<Source>`.
///
/// The Gate keeps the sources of all of a decision's criteria in one shared list, each
/// criterion holding its part of it, so a decision takes one allocation for its sources rather
/// than one per criterion. A criterion kept (or cloned) alone keeps that whole list alive.
#[derive(Clone)]
pub struct Sources {
    all: Arc<Vec<Source>>,
    start: usize,
    end: usize,
}

impl Sources {
    /// Part `range` of a list shared with other criteria (empty if it is not in `all`).
    pub(crate) fn part_of(all: &Arc<Vec<Source>>, range: std::ops::Range<usize>) -> Self {
        Self {
            all: Arc::clone(all),
            start: range.start,
            end: range.end,
        }
    }

    /// The sources as a slice.
    #[must_use]
    pub fn as_slice(&self) -> &[Source] {
        self.all.get(self.start..self.end).unwrap_or_default()
    }
}

impl Default for Sources {
    fn default() -> Self {
        Vec::new().into()
    }
}

impl From<Vec<Source>> for Sources {
    fn from(v: Vec<Source>) -> Self {
        let end = v.len();
        Self {
            all: Arc::new(v),
            start: 0,
            end,
        }
    }
}

impl FromIterator<Source> for Sources {
    fn from_iter<I: IntoIterator<Item = Source>>(iter: I) -> Self {
        iter.into_iter().collect::<Vec<_>>().into()
    }
}

impl std::ops::Deref for Sources {
    type Target = [Source];
    fn deref(&self) -> &[Source] {
        self.as_slice()
    }
}

impl<'a> IntoIterator for &'a Sources {
    type Item = &'a Source;
    type IntoIter = std::slice::Iter<'a, Source>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl PartialEq for Sources {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Sources {}

impl fmt::Debug for Sources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl Serialize for Sources {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.as_slice())
    }
}

impl<'de> Deserialize<'de> for Sources {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<Source>::deserialize(d).map(Self::from)
    }
}

impl JsonSchema for Sources {
    // Exactly the schema of `Vec<Source>`.
    fn inline_schema() -> bool {
        <Vec<Source>>::inline_schema()
    }
    fn schema_name() -> Cow<'static, str> {
        <Vec<Source>>::schema_name()
    }
    fn schema_id() -> Cow<'static, str> {
        <Vec<Source>>::schema_id()
    }
    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <Vec<Source>>::json_schema(generator)
    }
}

/// The Gate's view of one criterion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CriterionDecision {
    /// Criterion id.
    pub id: Id,
    /// Whether it is required under this policy.
    pub required: bool,
    /// Derived status.
    pub status: CriterionStatus,
    /// Counted sources, sorted.
    pub sources: Sources,
}

/// Advisory score rollup over required criteria; `null` where a class has no criteria.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scores {
    /// Weighted share of correctness criteria passed.
    pub c: Option<f64>,
    /// Weighted share of safety criteria passed.
    pub rec_v: Option<f64>,
    /// 0 if a catastrophic criterion failed, null if one is not passed, else 1.
    pub cat_v: Option<f64>,
}

/// The Gate's decision for one exact subject, policy and evidence set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateDecision {
    /// `verdict.gate-decision/v1`.
    pub schema: DecisionSchema,
    /// The strongest outcome of any reason; `pass` when there is none.
    pub outcome: Outcome,
    /// Equal keys mean equal decisions; `null` only for `invalid_input`.
    pub evaluation_key: Option<Digest>,
    /// The subject decided on; `null` when it could not be read.
    pub subject_digest: Option<Digest>,
    /// The policy applied; `null` when it could not be read.
    pub policy_digest: Option<Digest>,
    /// Digest of the set of items in the bundle; `null` when it could not be read.
    pub evidence_set_digest: Option<Digest>,
    /// Every criterion of the subject, in the subject's order.
    pub criteria: Vec<CriterionDecision>,
    /// Every reason found, sorted by precedence then code.
    pub reasons: Vec<Reason>,
    /// Findings that require rework.
    pub rework: Vec<FindingRef>,
    /// Findings kept for separate triage; they never change the outcome.
    pub follow_ups: Vec<FindingRef>,
    /// Prior blockers not resolved by a counted result.
    pub unresolved_prior_blockers: Vec<FindingRef>,
    /// Advisory scores.
    pub scores: Scores,
    /// On a pass: when the earliest time-sensitive evidence it used goes stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_types_have_the_schemas_of_what_they_replace() {
        assert_eq!(
            schemars::schema_for!(Sources),
            schemars::schema_for!(Vec<Source>)
        );
    }

    #[test]
    fn sources_read_write_and_compare_like_a_vec_of_sources() {
        let list: Vec<Source> = [
            "ev-1",
            "a-verification-id-longer-than-sixteen-bytes",
            "vr-2",
        ]
        .iter()
        .map(|r| Source {
            kind: SourceKind::Verification,
            reference: r.parse().unwrap(),
            status: CriterionStatus::Passed,
        })
        .collect();
        let all = Arc::new(list.clone());
        let part = Sources::part_of(&all, 1..3);
        assert_eq!(part.as_slice(), list.get(1..3).unwrap());
        assert_eq!(part, Sources::from(list.get(1..3).unwrap().to_vec()));
        assert_ne!(part, Sources::from(list.clone()));
        assert_eq!(
            format!("{part:?}"),
            format!("{:?}", list.get(1..3).unwrap())
        );
        assert_eq!(
            serde_json::to_value(&part).unwrap(),
            serde_json::to_value(list.get(1..3).unwrap()).unwrap()
        );
        let back: Sources = serde_json::from_value(serde_json::to_value(&part).unwrap()).unwrap();
        assert_eq!(back, part);
        assert_eq!((&part).into_iter().count(), 2);
        assert!(Sources::part_of(&all, 2..9).is_empty());
        assert!(Sources::default().is_empty());
        assert_eq!(
            list.iter().cloned().collect::<Sources>(),
            Sources::from(list)
        );
    }
}
