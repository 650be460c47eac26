//! The Gate (CONTRACTS.md §6): one pure, total, deterministic function from a bundle to a
//! decision.
//!
//! [`evaluate`] never panics outward, reads no clock, disk or network, and gives byte-identical
//! output ([`GateDecision::canonical_bytes`]) for the same set of inputs in any order. The steps,
//! each in its own module:
//! 1. [`load`](self): strict parse, carried digests, typed documents;
//! 2. `validate`: contract rules beyond the types (`invalid_input`);
//! 3. `count`: which check evidence and verification results count for this subject;
//! 4. `criteria`: each criterion's status from its counted sources, without voting;
//! 5. `findings`: change-scoped rework, follow-ups, prior blockers and dispositions;
//! 6. `human`: human decisions and the risk policy's human requirement;
//! 7. `scores`: the advisory rollup;
//! 8. `rules`: the policy's CEL rules, which can only add stricter reasons.
//!
//! Then a counted human approval clears the `human_required` reasons, and the strongest
//! remaining outcome is the decision's.

mod count;
mod criteria;
mod findings;
mod human;
mod index;
mod load;
mod reasons;
mod rules;
mod scores;
mod validate;

pub use count::FUTURE_TOLERANCE_S;

use crate::canonical;
use crate::contracts::{DecisionSchema, GateDecision, Id, Outcome, ReasonCode, Scores};
use crate::digest::{self, Digest, DigestKind};
use crate::json;
use load::{Invalid, Loaded};
use reasons::{Reasons, fixed, reason};
use rules::CompiledRule;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The version of the decision procedure, for people and logs; decisions are identified by
/// their `evaluation_key`, and replaying a bundle must reproduce a stored decision exactly.
pub const GATE_VERSION: &str = concat!("verdict-gate/", env!("CARGO_PKG_VERSION"));

/// Evaluates a bundle given as JSON bytes. Total: every input yields a decision.
///
/// ```
/// use verdict_core::{contracts::{Outcome, ReasonCode}, gate};
/// let d = gate::evaluate(b"{\"schema\": 1, \"schema\": 2}");
/// assert_eq!(d.outcome, Outcome::Blocked);
/// assert_eq!(d.reasons[0].code, ReasonCode::InvalidInput);
/// ```
#[must_use]
pub fn evaluate(input: &[u8]) -> GateDecision {
    guarded(|| match json::parse(input) {
        Ok(v) => evaluate_value_unguarded(&v),
        Err(e) => {
            let mut inv = Invalid::default();
            inv.reasons
                .add(fixed(ReasonCode::InvalidInput), e.to_string());
            invalid_decision(inv)
        }
    })
}

/// Evaluates a bundle that is already a JSON value (read by the strict reader).
#[must_use]
pub fn evaluate_value(bundle: &Value) -> GateDecision {
    guarded(|| evaluate_value_unguarded(bundle))
}

/// A bundle read and validated once, so its decision can be made (or measured) on its own.
pub struct Prepared {
    loaded: Loaded,
    rules: Vec<CompiledRule>,
}

impl Prepared {
    /// Reads and validates a bundle; a bundle that cannot be evaluated yields its decision.
    pub fn new(bundle: &Value) -> Result<Self, Box<GateDecision>> {
        match catch_unwind(AssertUnwindSafe(|| prepare(bundle))) {
            Ok(r) => r.map_err(|inv| Box::new(invalid_decision(inv))),
            Err(_) => Err(Box::new(fault_decision())),
        }
    }

    /// Makes the decision.
    #[must_use]
    pub fn decide(&self) -> GateDecision {
        guarded(|| decide(&self.loaded, &self.rules))
    }
}

impl GateDecision {
    /// The decision's canonical (RFC 8785) bytes: what is printed, stored and replayed.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        Ok(canonical::to_vec(&serde_json::to_value(self)?))
    }

    /// `digest("decision", self)`.
    pub fn digest(&self) -> Result<Digest, serde_json::Error> {
        Ok(digest::digest(
            DigestKind::Decision,
            &serde_json::to_value(self)?,
        ))
    }
}

fn guarded(f: impl FnOnce() -> GateDecision) -> GateDecision {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| fault_decision())
}

fn fault_decision() -> GateDecision {
    let mut inv = Invalid::default();
    inv.reasons.add(
        fixed(ReasonCode::GateError),
        "internal fault in the gate; nothing was decided",
    );
    invalid_decision(inv)
}

fn invalid_decision(inv: Invalid) -> GateDecision {
    GateDecision {
        schema: DecisionSchema::V1,
        outcome: inv.reasons.outcome(),
        evaluation_key: None,
        subject_digest: inv.subject_digest,
        policy_digest: inv.policy_digest,
        evidence_set_digest: inv.evidence_set_digest,
        criteria: Vec::new(),
        reasons: inv.reasons.into_sorted(),
        rework: Vec::new(),
        follow_ups: Vec::new(),
        unresolved_prior_blockers: Vec::new(),
        scores: Scores::default(),
        valid_until: None,
    }
}

fn prepare(bundle: &Value) -> Result<Prepared, Invalid> {
    let loaded = load::load(bundle)?;
    match validate::validate(&loaded) {
        Ok(rules) => Ok(Prepared { loaded, rules }),
        Err(reasons) => Err(Invalid {
            subject_digest: Some(loaded.subject_digest),
            policy_digest: Some(loaded.policy_digest),
            evidence_set_digest: Some(loaded.evidence_set_digest),
            reasons,
        }),
    }
}

fn evaluate_value_unguarded(bundle: &Value) -> GateDecision {
    match prepare(bundle) {
        Ok(p) => decide(&p.loaded, &p.rules),
        Err(inv) => invalid_decision(inv),
    }
}

/// Ids of items whose time validity at `now` fails: stale evidence, and (so that equal keys
/// always mean equal decisions) evidence and human decisions dated in the future.
fn time_invalid_ids(l: &Loaded) -> Vec<String> {
    let mut ids = BTreeSet::new();
    for e in &l.evidence {
        if count::is_stale(&e.doc, &l.now) || count::is_from_future(&e.doc.observed_at, &l.now) {
            ids.insert(e.doc.id.as_str().to_owned());
        }
    }
    for h in &l.human_decisions {
        if count::is_from_future(&h.doc.decided_at, &l.now) {
            ids.insert(h.doc.id.as_str().to_owned());
        }
    }
    ids.into_iter().collect()
}

/// Names a bundle item can be cited by (CONTRACTS.md §4 "Refs"), restricted to items about
/// this subject, plus prior findings and the subject's resources.
fn citable(l: &Loaded) -> BTreeSet<&str> {
    let mut refs: BTreeSet<&str> = l
        .subject
        .resources
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    refs.extend(
        l.evidence
            .iter()
            .filter(|e| e.doc.subject_digest == l.subject_digest)
            .map(|e| e.doc.id.as_str()),
    );
    for v in l
        .verifications
        .iter()
        .filter(|v| v.doc.subject_digest == l.subject_digest)
    {
        refs.insert(v.doc.id.as_str());
        refs.extend(v.doc.findings.iter().map(|f| f.id.as_str()));
    }
    refs.extend(l.prior_findings.iter().map(|f| f.doc.id.as_str()));
    refs
}

fn decide(l: &Loaded, rules: &[CompiledRule]) -> GateDecision {
    let mut reasons: Reasons = l.reasons.clone();
    let optional: BTreeSet<&Id> = l.policy.optional_criteria.iter().collect();
    let required: BTreeSet<&Id> = l
        .subject
        .criteria
        .items
        .iter()
        .filter(|c| c.required && !optional.contains(&c.id))
        .map(|c| &c.id)
        .collect();
    if required.is_empty() && l.policy.required_checks.is_empty() {
        reasons.add(
            fixed(ReasonCode::NothingToVerify),
            "no required criterion and no required check: zero checks is never a pass",
        );
    }

    let evidence = count::count_evidence(l, &mut reasons);
    count::required_checks(l, &evidence, &mut reasons);
    let index = index::CriterionIndex::new(&l.subject);
    let verifications = count::count_verifications(l, &index, &mut reasons);
    count::required_verifiers(l, &verifications, &mut reasons);
    let required_classes = count::required_classes(l);
    let refs = citable(l);

    let criteria = criteria::criteria(
        &criteria::Inputs {
            loaded: l,
            index: &index,
            evidence: &evidence,
            verifications: &verifications,
            required: &required,
            required_classes: &required_classes,
            refs: &refs,
        },
        &mut reasons,
    );
    let lists = findings::findings(l, &verifications, &required, &refs, &mut reasons);
    let approved = human::human(l, &mut reasons);
    let scores = scores::scores(&l.subject, &criteria);

    if !rules.is_empty() {
        let context = rule_context(l, &criteria, &required, &scores, &reasons);
        for r in rules {
            match r.fires(&context) {
                Ok(true) => reasons.add(
                    reason(ReasonCode::PolicyRule, r.outcome),
                    format!("rule {:?}: {}", r.id.as_str(), r.reason),
                ),
                Ok(false) => {}
                Err(e) => reasons.add(
                    fixed(ReasonCode::GateError),
                    format!("policy rule {:?} failed to evaluate: {e}", r.id.as_str()),
                ),
            }
        }
    }
    if approved {
        reasons.clear_human_required();
    }

    let outcome = reasons.outcome();
    let valid_until = if outcome == Outcome::Pass {
        evidence
            .values()
            .flatten()
            .filter(|e| matches!(e.freshness, crate::contracts::Freshness::Time { .. }))
            .min_by_key(|e| count::expiry_nanos(e))
            .and_then(|e| count::expiry(e))
    } else {
        None
    };
    let key = json!({
        "policy": l.policy_digest.as_str(),
        "subject": l.subject_digest.as_str(),
        "evidence_set": l.evidence_set_digest.as_str(),
        "stale": time_invalid_ids(l),
    });
    GateDecision {
        schema: DecisionSchema::V1,
        outcome,
        evaluation_key: Some(digest::digest(DigestKind::Evaluation, &key)),
        subject_digest: Some(l.subject_digest.clone()),
        policy_digest: Some(l.policy_digest.clone()),
        evidence_set_digest: Some(l.evidence_set_digest.clone()),
        criteria,
        reasons: reasons.into_sorted(),
        rework: lists.rework.into_iter().collect(),
        follow_ups: lists.follow_ups.into_iter().collect(),
        unresolved_prior_blockers: lists.unresolved.into_iter().collect(),
        scores,
        valid_until,
    }
}

fn rule_context(
    l: &Loaded,
    criteria: &[crate::contracts::CriterionDecision],
    required: &BTreeSet<&Id>,
    scores: &Scores,
    reasons: &Reasons,
) -> Value {
    let statuses: serde_json::Map<String, Value> = criteria
        .iter()
        .map(|c| (c.id.as_str().to_owned(), Value::from(c.status.as_str())))
        .collect();
    let codes: BTreeSet<&str> = reasons.iter().map(|r| r.code.as_str()).collect();
    json!({
        "criteria": statuses,
        "required": required.iter().map(|i| i.as_str()).collect::<Vec<_>>(),
        "scores": {"c": scores.c, "rec_v": scores.rec_v, "cat_v": scores.cat_v},
        "risk": {
            "class": l.subject.risk.class.as_str(),
            "revision": l.subject.risk.revision.as_str(),
            "capabilities": l.subject.risk.capabilities,
        },
        "reasons": codes,
        "outcome": reasons.outcome().as_str(),
        "policy": {"name": l.policy.name.as_str(), "revision": l.policy.revision},
    })
}
