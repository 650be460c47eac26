//! The policy: how the Gate decides (docs/spec/policy.md).

use super::Outcome;
use super::evidence::Role;
use super::primitives::Id;
use super::subject::RiskClass;
use crate::digest::Digest;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The schema tag of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PolicySchema {
    /// Version 1.
    #[serde(rename = "verdict.policy/v1")]
    V1,
}

fn default_evidence_from() -> Vec<Role> {
    vec![Role::Runner]
}
fn default_human_required() -> Outcome {
    Outcome::HumanRequired
}
fn default_true() -> bool {
    true
}
#[expect(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes the field by reference"
)]
fn is_low(class: &RiskClass) -> bool {
    *class == RiskClass::Low
}

/// A versioned gate policy. Unknown fields are refused: a typo must not weaken it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// `verdict.policy/v1`.
    pub schema: PolicySchema,
    /// Policy name.
    pub name: Id,
    /// Policy revision.
    pub revision: u64,
    /// Checks that must have fresh, intact, independent evidence.
    #[serde(default)]
    pub required_checks: Vec<Id>,
    /// Roles whose check evidence counts.
    #[serde(default = "default_evidence_from")]
    pub check_evidence_from: Vec<Role>,
    /// Verifier classes that must each return a completed result.
    #[serde(default)]
    pub required_verifiers: Vec<Id>,
    /// Extra requirements per risk class.
    #[serde(default)]
    pub risk: BTreeMap<RiskClass, RiskRequirement>,
    /// The lowest risk class the Gate treats a subject as, whatever class the subject states:
    /// the producer writes its own class, so a policy can refuse to take `low` on its word.
    /// Left out when `low`, so a policy without it keeps its digest.
    #[serde(default, skip_serializing_if = "is_low")]
    pub risk_floor: RiskClass,
    /// Criteria declared non-required for this policy.
    #[serde(default)]
    pub optional_criteria: Vec<Id>,
    /// Criteria required whatever the subject says of them; a subject without one of them
    /// cannot pass. None may also be in `optional_criteria`, and none may be listed twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_criteria: Vec<Id>,
    /// The definition each named check must run, by digest: a subject that pins another
    /// definition for one of them is blocked and that check's evidence never counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub check_definitions: BTreeMap<Id, Digest>,
    /// Outcome for an inconclusive required criterion (never `pass`).
    #[serde(default = "default_human_required")]
    pub on_inconclusive: Outcome,
    /// Outcome when sources disagree on a required criterion (never `pass`).
    #[serde(default = "default_human_required")]
    pub on_contradiction: Outcome,
    /// Whether a verifier's `passed` must cite refs that exist in the bundle.
    #[serde(default = "default_true")]
    pub require_evidence_refs: bool,
    /// Criteria for which the model verifier accepts a `passed` row that cites no ref. Without
    /// a waiver every `passed` row must cite one (the verifier's own rule, whatever
    /// `require_evidence_refs` says). The Gate does not read it: with `require_evidence_refs`
    /// it still treats an uncited pass as `unsupported_pass`.
    #[serde(default)]
    pub evidence_refs_waived: Vec<Id>,
    /// Extra CEL rules; they only make a decision stricter.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl Policy {
    /// The class the policy treats work stated as of risk class `class` as: that class, or
    /// `risk_floor` when the floor is higher.
    #[must_use]
    pub fn effective_risk_class(&self, class: RiskClass) -> RiskClass {
        class.max(self.risk_floor)
    }

    /// The risk table's entries that apply to work stated as of risk class `class`: those of its
    /// effective class ([`Self::effective_risk_class`]) and of every lower class. What a policy
    /// asks of `high` work it asks of `critical` work too, so a table that names only `high`
    /// cannot leave critical work with fewer checks than high work.
    pub fn risk_requirements(
        &self,
        class: RiskClass,
    ) -> impl Iterator<Item = (&RiskClass, &RiskRequirement)> + '_ {
        self.risk.range(..=self.effective_risk_class(class))
    }

    /// The verifier classes work stated as of risk class `class` needs: `required_verifiers`
    /// plus those the risk table adds for its effective class; sorted, each once.
    #[must_use]
    pub fn verifier_classes_for(&self, class: RiskClass) -> Vec<Id> {
        let mut classes = self.required_verifiers.clone();
        for (_, extra) in self.risk_requirements(class) {
            classes.extend(extra.required_verifiers.iter().cloned());
        }
        classes.sort_unstable();
        classes.dedup();
        classes
    }
}

/// Requirements added on top for one risk class.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RiskRequirement {
    /// Extra verifier classes.
    #[serde(default)]
    pub required_verifiers: Vec<Id>,
    /// Whether a human approval bound to subject and policy is needed.
    #[serde(default)]
    pub human: bool,
}

/// A policy rule: when the CEL expression holds, add a reason with this outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Rule id.
    pub id: Id,
    /// CEL expression over the decision context; must evaluate to a bool.
    pub when: String,
    /// Outcome when it fires (`rework`, `human_required` or `blocked`).
    pub outcome: Outcome,
    /// Why, in words.
    pub reason: String,
}
