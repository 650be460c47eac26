//! The subject: what is graded (docs/spec/subject.md).

use super::primitives::{Id, Name};
use crate::digest::Digest;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The schema tag of a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SubjectSchema {
    /// Version 1.
    #[serde(rename = "verdict.subject/v1")]
    V1,
}

/// One exact, immutable unit of work to grade. Its digest is its identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// `verdict.subject/v1`.
    pub schema: SubjectSchema,
    /// The mission this work belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission: Option<Name>,
    /// The execution and its state revision.
    pub execution: Execution,
    /// Work package / operation / result identities and versions.
    pub work_items: Vec<WorkItem>,
    /// Who produced the work.
    pub producer: Producer,
    /// The objective's revision and digest.
    pub objective: Objective,
    /// The acceptance criteria.
    pub criteria: Criteria,
    /// Exact diff / artifact / resource versions.
    pub resources: Vec<Resource>,
    /// Deterministic checks that apply, and the criteria each bears on.
    pub checks: Vec<CheckPin>,
    /// The workflow revision.
    pub workflow_revision: Name,
    /// Risk classification.
    pub risk: Risk,
}

/// An execution and its generation (state revision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Execution {
    /// Execution id.
    pub id: Name,
    /// State revision; a retry is a new generation.
    pub generation: u64,
}

/// A work package, operation or result identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkItem {
    /// What kind of item.
    pub kind: Name,
    /// Its id.
    pub id: Name,
    /// Its version.
    pub version: Name,
}

/// The principal and run that produced the work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Producer {
    /// Producer principal.
    pub principal: Name,
    /// Producer run.
    pub run: Name,
}

/// The objective's revision and digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Objective {
    /// Revision label.
    pub revision: Name,
    /// Digest of the objective text.
    pub digest: Digest,
}

/// The acceptance criteria at one revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    /// Revision label.
    pub revision: Name,
    /// The criteria, in their stated order.
    pub items: Vec<Criterion>,
}

/// How a criterion feeds the advisory scores.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CriterionRole {
    /// Did the work do what was asked (`c`).
    #[default]
    Correctness,
    /// Did it keep what must keep working (`rec_v`).
    Safety,
    /// Did it avoid disaster (`cat_v`).
    Catastrophic,
}

fn default_true() -> bool {
    true
}

/// One acceptance criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Criterion {
    /// Identifier.
    pub id: Id,
    /// What must be true.
    pub text: String,
    /// Whether the Gate requires it (default true).
    #[serde(default = "default_true")]
    pub required: bool,
    /// Score role (default correctness).
    #[serde(default)]
    pub role: CriterionRole,
    /// Score weight, finite and > 0 (default 1).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "positive_weight"
    )]
    pub weight: Option<f64>,
}

/// Reads a weight and refuses one that is not above 0, so the reader holds a document to what
/// its schema says (`exclusiveMinimum: 0`) and the store refuses such a subject on either
/// backend, not only where the database checks the schema.
fn positive_weight<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    match Option::<f64>::deserialize(d)? {
        Some(w) if !(w.is_finite() && w > 0.0) => Err(serde::de::Error::custom(format!(
            "weight {w} is not a finite number above 0"
        ))),
        w => Ok(w),
    }
}

impl Criterion {
    /// The weight, defaulting to 1.
    #[must_use]
    pub fn weight(&self) -> f64 {
        self.weight.unwrap_or(1.0)
    }
}

/// An exact resource version (diff, artifact, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    /// Name, usable as an evidence ref.
    pub name: Name,
    /// Kind of resource.
    pub kind: Name,
    /// Content digest.
    pub digest: Digest,
    /// Where to find it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// A deterministic check the subject pins, by exact definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckPin {
    /// Check id.
    pub id: Id,
    /// Digest of the exact check definition.
    pub definition_digest: Digest,
    /// Criteria the check bears on.
    pub criteria: Vec<Id>,
}

/// Risk class, lowest to highest.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RiskClass {
    /// Low.
    #[default]
    Low,
    /// Medium.
    Medium,
    /// High.
    High,
    /// Critical.
    Critical,
}

impl RiskClass {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }
}

/// Risk classification of a subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Risk {
    /// Class.
    pub class: RiskClass,
    /// Revision of the classification.
    pub revision: Name,
    /// Capabilities the work touches.
    pub capabilities: Vec<String>,
}
