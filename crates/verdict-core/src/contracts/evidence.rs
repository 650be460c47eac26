//! Evidence, verification results, findings, dispositions and human decisions (docs/spec/evidence.md).

use super::decision::{Reason, ReasonCode};
use super::primitives::{Id, Name, Timestamp};
use crate::digest::Digest;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A principal's role (docs/spec/authority.md).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Runs the system; manages principals and grants.
    Operator,
    /// Produces the work being graded.
    Producer,
    /// Runs deterministic checks.
    Runner,
    /// Reviews the work independently.
    Verifier,
    /// A person who approves or rejects.
    Human,
}

impl Role {
    /// Every role.
    pub const ALL: [Self; 5] = [
        Self::Operator,
        Self::Producer,
        Self::Runner,
        Self::Verifier,
        Self::Human,
    ];

    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Operator => "operator",
            Self::Producer => "producer",
            Self::Runner => "runner",
            Self::Verifier => "verifier",
            Self::Human => "human",
        }
    }
}

/// The `kind` tag of check evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceKind {
    /// Deterministic check evidence.
    Check,
}

/// Who produced a piece of evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProducedBy {
    /// Principal.
    pub principal: Name,
    /// The role it acted in.
    pub role: Role,
}

/// What a check observed.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CheckOutcome {
    /// The expectation held.
    Pass,
    /// The expectation did not hold.
    Fail,
    /// The check could not observe (infrastructure); proves nothing.
    Error,
}

impl CheckOutcome {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Error => "error",
        }
    }
}

/// How long an observation stays true.
///
/// Read by hand rather than by serde's tagged-enum support, which buffers the whole object
/// first and lets `{"kind": "content"}` carry a `max_age_s` it then ignores: here each kind
/// takes exactly its own fields (docs/spec/evidence.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Freshness {
    /// An immutable fact about content: no age limit.
    Content,
    /// An observation of a live system that goes stale after `max_age_s` seconds.
    Time {
        /// Seconds after `observed_at` at which it is stale.
        max_age_s: u64,
    },
}

impl<'de> Deserialize<'de> for Freshness {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(field_identifier, rename_all = "snake_case")]
        enum Field {
            Kind,
            MaxAgeS,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum FreshnessKind {
            Content,
            Time,
        }
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Freshness;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a freshness object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Freshness, A::Error> {
                use serde::de::Error;
                let mut kind = None;
                let mut max_age_s = None;
                while let Some(field) = map.next_key::<Field>()? {
                    match field {
                        Field::Kind if kind.is_some() => {
                            return Err(A::Error::duplicate_field("kind"));
                        }
                        Field::Kind => kind = Some(map.next_value::<FreshnessKind>()?),
                        Field::MaxAgeS if max_age_s.is_some() => {
                            return Err(A::Error::duplicate_field("max_age_s"));
                        }
                        Field::MaxAgeS => max_age_s = Some(map.next_value::<u64>()?),
                    }
                }
                match (kind, max_age_s) {
                    (None, _) => Err(A::Error::missing_field("kind")),
                    (Some(FreshnessKind::Content), None) => Ok(Freshness::Content),
                    (Some(FreshnessKind::Content), Some(_)) => {
                        Err(A::Error::unknown_field("max_age_s", &["kind"]))
                    }
                    (Some(FreshnessKind::Time), Some(max_age_s)) => {
                        Ok(Freshness::Time { max_age_s })
                    }
                    (Some(FreshnessKind::Time), None) => Err(A::Error::missing_field("max_age_s")),
                }
            }
        }
        d.deserialize_map(Visitor)
    }
}

fn default_true() -> bool {
    true
}

/// Check evidence (`kind: "check"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckEvidence {
    /// Evidence id.
    pub id: Id,
    /// `check`.
    pub kind: EvidenceKind,
    /// The check it ran.
    pub check: Id,
    /// The subject it is about.
    pub subject_digest: Digest,
    /// The exact definition it ran.
    pub definition_digest: Digest,
    /// Who produced it.
    pub produced_by: ProducedBy,
    /// What it found.
    pub outcome: CheckOutcome,
    /// A hard failure dominates any other source (default true).
    #[serde(default = "default_true")]
    pub hard: bool,
    /// Digest of what was observed.
    pub content_digest: Digest,
    /// When it was observed.
    pub observed_at: Timestamp,
    /// How long it stays true.
    pub freshness: Freshness,
}

/// The runtime a verifier ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// Provider name.
    pub provider: Name,
    /// Model name.
    pub model: Name,
    /// The provider's model snapshot or fingerprint.
    pub snapshot: Name,
}

/// The verifier that produced a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Verifier {
    /// Verifier principal.
    pub principal: Name,
    /// Verifier class (`reviewer`, `security`, ...).
    pub class: Id,
    /// Verifier run.
    pub run: Name,
    /// Model runtime, when a model verified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
}

/// The context a verifier saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContextRef {
    /// Digest of the context manifest.
    pub digest: Digest,
    /// Whether every required item fit.
    pub complete: bool,
}

/// Whether a verification run completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VerificationStatus {
    /// The verifier returned a result.
    Completed,
    /// It did not; `unavailable_reason` says why.
    Unavailable,
}

/// Why a verification run is unavailable.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum UnavailableReason {
    /// The call ran out of time.
    Timeout,
    /// The provider failed.
    ProviderError,
    /// The budget ran out.
    BudgetExhausted,
    /// A required context item did not fit.
    ContextIncomplete,
    /// The verifier's grant was revoked mid-run.
    GrantRevoked,
    /// The run was cancelled.
    Cancelled,
    /// The verifier's output did not validate.
    InvalidOutput,
}

impl UnavailableReason {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::ProviderError => "provider_error",
            Self::BudgetExhausted => "budget_exhausted",
            Self::ContextIncomplete => "context_incomplete",
            Self::GrantRevoked => "grant_revoked",
            Self::Cancelled => "cancelled",
            Self::InvalidOutput => "invalid_output",
        }
    }
}

/// A criterion's status, as a source reports it or as the Gate derives it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CriterionStatus {
    /// Shown to hold.
    Passed,
    /// Shown not to hold.
    Failed,
    /// Looked at, could not tell.
    Inconclusive,
    /// Not looked at.
    NotTested,
}

impl CriterionStatus {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Inconclusive => "inconclusive",
            Self::NotTested => "not_tested",
        }
    }
}

/// One criterion row of a verification result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CriterionRow {
    /// Criterion id.
    pub id: Id,
    /// What the verifier found.
    pub status: CriterionStatus,
    /// How it looked.
    pub method: String,
    /// Refs to items in the bundle that support the row.
    pub evidence_refs: Vec<String>,
}

/// A verification result (the verifier's evidence; never a decision).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerificationResult {
    /// Result id.
    pub id: Id,
    /// Who verified.
    pub verifier: Verifier,
    /// The subject it is about.
    pub subject_digest: Digest,
    /// The execution generation the run was admitted for.
    pub generation: u64,
    /// The context the verifier saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextRef>,
    /// Completed or unavailable.
    pub status: VerificationStatus,
    /// Why unavailable (required when `status` is `unavailable`, refused otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable_reason: Option<UnavailableReason>,
    /// One row per criterion looked at.
    pub criteria: Vec<CriterionRow>,
    /// Findings.
    pub findings: Vec<Finding>,
    /// Dispositions of prior blocking findings.
    pub dispositions: Vec<Disposition>,
}

/// How bad a finding is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Must be fixed before passing.
    Blocker,
    /// Major.
    Major,
    /// Minor.
    Minor,
    /// For information.
    Info,
}

/// Whether the change caused a finding.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Caused, exposed or materially worsened by this change.
    Change,
    /// Near the change but not caused by it.
    Adjacent,
    /// There before the change.
    PreExisting,
}

/// Where a finding is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Location {
    /// Resource name.
    pub resource: String,
    /// Path inside it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
}

/// An immutable finding; a change is a new version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    /// Stable finding id.
    pub id: Id,
    /// Version (≥ 1).
    pub version: u64,
    /// The criterion it bears on.
    pub criterion: Id,
    /// Kind of problem.
    #[serde(rename = "type")]
    pub kind: String,
    /// Severity.
    pub severity: Severity,
    /// Change scope.
    pub scope: Scope,
    /// The subject it was found on.
    pub subject_digest: Digest,
    /// Where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// Supporting refs.
    pub evidence_refs: Vec<String>,
    /// How it was found.
    pub method: String,
    /// What to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
    /// Advisory only; never read by the Gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
}

/// What became of a prior blocking finding.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DispositionKind {
    /// Fixed; needs evidence refs that exist in the bundle.
    Resolved,
    /// Still there.
    StillPresent,
    /// No longer applies because the subject changed; needs a reason.
    SupersededBySubjectChange,
    /// Needs a person.
    HumanRequired,
}

/// A verifier's disposition of a prior blocking finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Disposition {
    /// Finding id.
    pub finding: Id,
    /// Finding version.
    pub version: u64,
    /// What became of it.
    pub disposition: DispositionKind,
    /// Supporting refs.
    pub evidence_refs: Vec<String>,
    /// Why (required for `superseded_by_subject_change`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The `role` tag of a human decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HumanRole {
    /// A person.
    Human,
}

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HumanVerdict {
    /// Approve: clears `human_required` reasons only.
    Approve,
    /// Reject: rework.
    Reject,
}

/// A person's decision, bound to one subject and one policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HumanDecision {
    /// Decision id.
    pub id: Id,
    /// Who decided.
    pub principal: Name,
    /// `human`.
    pub role: HumanRole,
    /// The subject it binds.
    pub subject_digest: Digest,
    /// The policy it binds.
    pub policy_digest: Digest,
    /// Approve or reject.
    pub decision: HumanVerdict,
    /// Why.
    pub reason: String,
    /// When.
    pub decided_at: Timestamp,
    /// On an approval only: the `human_required` reasons the person reviewed, each once. An
    /// approval that names them clears exactly those; one without this member clears every
    /// `human_required` reason (what every approval did before the member existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clears: Option<Vec<ClearedReason>>,
}

/// One `human_required` reason an approval clears, by the identifying part of a decision's
/// reason: its code and the criterion, check and finding it names, and for a `policy_rule`
/// reason the rule. Criterion, check and finding left out match only a reason that names none;
/// `rule` left out matches every rule, as entries written before it existed do.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct ClearedReason {
    /// The reason's code.
    pub code: ReasonCode,
    /// The criterion it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criterion: Option<Id>,
    /// The check it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Id>,
    /// The finding it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding: Option<Id>,
    /// For a `policy_rule` reason, the rule whose reason it is (the id its detail names, as
    /// `rule "ID": ...`); only on that code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<Id>,
}

impl ClearedReason {
    /// The entry that names `r`, with its rule when `r` is a rule's.
    #[must_use]
    pub fn of(r: &Reason) -> Self {
        Self {
            code: r.code,
            criterion: r.criterion.clone(),
            check: r.check.clone(),
            finding: r.finding.clone(),
            rule: rule_of(r),
        }
    }

    /// Whether this entry names `r`: the same code, criterion, check and finding, and, when the
    /// entry names a rule, a `policy_rule` reason of that rule.
    #[must_use]
    pub fn names(&self, r: &Reason) -> bool {
        self.code == r.code
            && self.criterion == r.criterion
            && self.check == r.check
            && self.finding == r.finding
            && self
                .rule
                .as_ref()
                .is_none_or(|id| rule_of(r).as_ref() == Some(id))
    }
}

/// The rule a `policy_rule` reason is of: the Gate writes its detail as `rule "ID": REASON`,
/// and an id holds no quote.
fn rule_of(r: &Reason) -> Option<Id> {
    if r.code != ReasonCode::PolicyRule {
        return None;
    }
    let rest = r.detail.strip_prefix("rule \"")?;
    rest.split_once('"')?.0.parse().ok()
}
