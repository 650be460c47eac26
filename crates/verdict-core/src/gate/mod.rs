//! The Gate (docs/spec/gate.md): one pure, total, deterministic function from a bundle to a
//! decision.
//!
//! [`evaluate`] never panics outward, reads no clock, disk or network, and gives byte-identical
//! output ([`GateDecision::canonical_bytes`]) for the same set of inputs in any order. The steps,
//! each in its own module:
//! 1. `read` or `load`: the documents, with their digests. `read` takes a bundle that reads
//!    cleanly straight from its bytes (no JSON tree); everything else goes the strict way,
//!    `load` (strict parse, carried digests, typed documents, the reasons reading can earn);
//! 2. `validate`: contract rules beyond the types (`invalid_input`);
//! 3. `count`: which check evidence and verification results count for this subject;
//! 4. `criteria`: each criterion's status from its counted sources, without voting;
//! 5. `findings`: change-scoped rework, follow-ups, prior blockers and dispositions;
//! 6. `human`: human decisions and the risk policy's human requirement;
//! 7. `scores`: the advisory rollup;
//! 8. `rules`: the policy's CEL rules, which can only add stricter reasons.
//!
//! Then a counted human approval clears the `human_required` reasons it names (every one, for
//! an approval that names none), and the strongest remaining outcome is the decision's.
//!
//! Between reading and deciding, `tables` files the bundle once under criterion positions and
//! id ranks, so the decision compares positions rather than id strings; `output` writes the
//! decision's canonical bytes without building a JSON tree.

mod count;
mod criteria;
mod findings;
mod human;
mod index;
mod load;
mod output;
mod read;
mod reasons;
mod rules;
mod scores;
mod tables;
mod validate;

pub use count::FUTURE_TOLERANCE_S;
pub use validate::{clears_problems, policy_problems};

use crate::canonical;
use crate::contracts::{DecisionSchema, GateDecision, Outcome, ReasonCode, Scores};
use crate::digest::{self, Digest, DigestKind};
use crate::json;
use load::{Invalid, Loaded};
use reasons::{Reasons, fixed, reason};
use rules::CompiledRule;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use tables::Tables;

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
    guarded(|| {
        // A bundle that reads cleanly is read without a JSON tree; any other is read the strict
        // way, which names every problem. Both give the same documents.
        if let Some(loaded) = read::load(input) {
            return decide_prepared(prepare_loaded(loaded));
        }
        evaluate_strict(input)
    })
}

/// [`evaluate`] the strict way only: a JSON tree first, then the documents from it.
fn evaluate_strict(input: &[u8]) -> GateDecision {
    match json::parse(input) {
        Ok(v) => evaluate_value_unguarded(&v),
        Err(e) => {
            let mut inv = Invalid::default();
            inv.reasons
                .add(fixed(ReasonCode::InvalidInput), e.to_string());
            invalid_decision(inv)
        }
    }
}

/// Evaluates a bundle that is already a JSON value (read by the strict reader).
#[must_use]
pub fn evaluate_value(bundle: &Value) -> GateDecision {
    guarded(|| evaluate_value_unguarded(bundle))
}

/// A bundle read and validated once, so its decision can be made (or measured) on its own.
pub struct Prepared {
    loaded: Loaded,
    tables: Tables,
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
        guarded(|| decide(&self.loaded, &self.tables, &self.rules))
    }

    /// The digests of the check evidence the Gate counts for the subject: the same rule the
    /// decision applies, so a report of the evidence (JUnit, an attestation's test results)
    /// never shows as a result what the Gate did not count. Keyed by digest, not by place: the
    /// Gate reads the evidence once per digest, in digest order, not in the bundle's order.
    #[must_use]
    pub fn counted_evidence(&self) -> BTreeSet<Digest> {
        let mut reasons = Reasons::default();
        let counts = count::count_evidence(&self.loaded, &self.tables, &mut reasons)
            .counts()
            .to_vec();
        self.loaded
            .evidence
            .iter()
            .zip(counts)
            .filter(|(_, counted)| *counted)
            .map(|(item, _)| item.digest.clone())
            .collect()
    }
}

impl GateDecision {
    /// The decision's canonical (RFC 8785) bytes: what is printed, stored and replayed.
    pub fn canonical_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = Vec::with_capacity(1024 + 256 * self.criteria.len());
        output::write_decision(self, &mut out);
        Ok(out)
    }

    /// `digest("decision", self)`.
    pub fn digest(&self) -> Result<Digest, serde_json::Error> {
        Ok(digest::digest_canonical(
            DigestKind::Decision,
            &self.canonical_bytes()?,
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
    prepare_loaded(load::load(bundle)?)
}

fn prepare_loaded(loaded: Loaded) -> Result<Prepared, Invalid> {
    match validate::validate(&loaded) {
        Ok(rules) => Ok(Prepared {
            tables: Tables::new(&loaded),
            loaded,
            rules,
        }),
        Err(reasons) => Err(Invalid {
            subject_digest: Some(loaded.subject_digest),
            policy_digest: Some(loaded.policy_digest),
            evidence_set_digest: Some(loaded.evidence_set_digest),
            reasons,
        }),
    }
}

fn evaluate_value_unguarded(bundle: &Value) -> GateDecision {
    decide_prepared(prepare(bundle))
}

fn decide_prepared(prepared: Result<Prepared, Invalid>) -> GateDecision {
    match prepared {
        Ok(p) => decide(&p.loaded, &p.tables, &p.rules),
        Err(inv) => invalid_decision(inv),
    }
}

/// Ids of evidence stale at `now` (the evaluation key's `stale`), and ids of evidence and human decisions
/// dated in the future; each sorted, each id once.
fn time_invalid_ids(l: &Loaded) -> (Vec<&str>, Vec<&str>) {
    let mut stale = Vec::new();
    let mut future = Vec::new();
    for e in &l.evidence {
        if count::is_stale(&e.doc, &l.now) {
            stale.push(e.doc.id.as_str());
        } else if count::is_from_future(&e.doc.observed_at, &l.now) {
            future.push(e.doc.id.as_str());
        }
    }
    for h in &l.human_decisions {
        if count::is_from_future(&h.doc.decided_at, &l.now) {
            future.push(h.doc.id.as_str());
        }
    }
    for ids in [&mut stale, &mut future] {
        ids.sort_unstable();
        ids.dedup();
    }
    (stale, future)
}

/// Writes `"name":[...]` for a sorted list of strings.
fn write_list<'a>(name: &str, items: impl IntoIterator<Item = &'a str>, out: &mut Vec<u8>) {
    canonical::write_str(name, out);
    out.extend_from_slice(b":[");
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        canonical::write_str(item, out);
    }
    out.push(b']');
}

/// `digest("evaluation", {"evidence_set", "policy", "stale", "subject"})` (docs/spec/decision.md), written
/// straight in canonical form (keys in order, every value a string or a list of strings).
///
/// Equal keys must mean equal decisions, and two things a decision depends on are not in those
/// four members: which items were dated in the future at `now` (not stale, yet not counted),
/// and which items failed their carried digest (the evidence set holds digests taken without
/// that field). Each is added as a member of its own, `future` and `tampered`, only when it is
/// not empty, so every other bundle's key is exactly the four-member form.
fn evaluation_key(l: &Loaded) -> Digest {
    let (stale, future) = time_invalid_ids(l);
    let mut out = Vec::with_capacity(320);
    out.extend_from_slice(b"{\"evidence_set\":");
    canonical::write_str(l.evidence_set_digest.as_str(), &mut out);
    if !future.is_empty() {
        out.push(b',');
        write_list("future", future, &mut out);
    }
    out.extend_from_slice(b",\"policy\":");
    canonical::write_str(l.policy_digest.as_str(), &mut out);
    out.push(b',');
    write_list("stale", stale, &mut out);
    out.extend_from_slice(b",\"subject\":");
    canonical::write_str(l.subject_digest.as_str(), &mut out);
    if !l.tampered.is_empty() {
        out.push(b',');
        write_list("tampered", l.tampered.iter().map(Digest::as_str), &mut out);
    }
    out.push(b'}');
    digest::digest_canonical(DigestKind::Evaluation, &out)
}

fn decide(l: &Loaded, t: &Tables, rules: &[CompiledRule]) -> GateDecision {
    let mut reasons: Reasons = l.reasons.clone();
    let items = &l.subject.criteria.items;
    let mut required: Vec<bool> = items.iter().map(|c| c.required).collect();
    for id in &l.policy.optional_criteria {
        if let Some(r) = t.index.get(id).and_then(|k| required.get_mut(k)) {
            *r = false;
        }
    }
    // The subject says which criteria it requires; the policy's own list overrides it, and a
    // criterion the subject left out cannot be passed by omission.
    for id in &l.policy.required_criteria {
        match t.index.get(id).and_then(|k| required.get_mut(k)) {
            Some(r) => *r = true,
            None => reasons.add(
                fixed(ReasonCode::CriterionAbsent).criterion(id),
                format!(
                    "the policy requires criterion {:?} and the subject does not have it",
                    id.as_str()
                ),
            ),
        }
    }
    for (check, want) in &l.policy.check_definitions {
        if let Some(pin) = t.pin(check).and_then(|k| l.subject.checks.get(k))
            && pin.definition_digest != *want
        {
            reasons.add(
                fixed(ReasonCode::CheckDefinitionUnpinned).check(check),
                format!(
                    "the subject pins definition {} of check {:?}; the policy pins {want}",
                    pin.definition_digest,
                    check.as_str()
                ),
            );
        }
    }
    if !required.contains(&true) && l.policy.required_checks.is_empty() {
        reasons.add(
            fixed(ReasonCode::NothingToVerify),
            "no required criterion and no required check: zero checks is never a pass",
        );
    }

    let evidence = count::count_evidence(l, t, &mut reasons);
    count::required_checks(t, &evidence, &mut reasons);
    let verifications = count::count_verifications(l, t, &mut reasons);
    count::required_verifiers(t, &verifications, &mut reasons);
    let required_results: Vec<(usize, &crate::contracts::VerificationResult)> = verifications
        .counted
        .iter()
        .filter(|(_, r)| t.required_classes.binary_search(&r.verifier.class).is_ok())
        .copied()
        .collect();

    let mut results = vec![criteria::ResultUse::default(); l.verifications.len()];
    for (at, _) in &verifications.counted {
        if let Some(u) = results.get_mut(*at) {
            u.counts = true;
        }
    }
    for (at, _) in &required_results {
        if let Some(u) = results.get_mut(*at) {
            u.required = true;
        }
    }
    let criteria = criteria::criteria(
        &criteria::Inputs {
            loaded: l,
            tables: t,
            evidence: &evidence,
            required: &required,
            required_results: &required_results,
            results: &results,
        },
        &mut reasons,
    );
    let lists = findings::findings(l, t, &verifications, &required, &mut reasons);
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
    match &approved {
        human::Approval::None => {}
        human::Approval::All => reasons.clear_human_required(),
        human::Approval::Named(clears) => reasons.clear_named(clears),
    }

    let outcome = reasons.outcome();
    let valid_until = if outcome == Outcome::Pass {
        evidence
            .all()
            .filter(|e| matches!(e.freshness, crate::contracts::Freshness::Time { .. }))
            .min_by_key(|e| count::expiry_nanos(e))
            .and_then(count::expiry)
    } else {
        None
    };
    GateDecision {
        schema: DecisionSchema::V1,
        outcome,
        evaluation_key: Some(evaluation_key(l)),
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

/// The required criterion ids, sorted (the order the rules have always seen).
fn required_ids<'a>(
    criteria: &'a [crate::contracts::CriterionDecision],
    required: &[bool],
) -> Vec<&'a str> {
    let mut ids: Vec<&str> = criteria
        .iter()
        .zip(required)
        .filter(|(_, r)| **r)
        .map(|(c, _)| c.id.as_str())
        .collect();
    ids.sort_unstable();
    ids
}

fn rule_context(
    l: &Loaded,
    criteria: &[crate::contracts::CriterionDecision],
    required: &[bool],
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
        "required": required_ids(criteria, required),
        "scores": {"c": scores.c, "rec_v": scores.rec_v, "cat_v": scores.cat_v},
        "risk": {
            "class": l.subject.risk.class.as_str(),
            "effective_class": l.policy.effective_risk_class(l.subject.risk.class).as_str(),
            "revision": l.subject.risk.revision.as_str(),
            "capabilities": l.subject.risk.capabilities,
        },
        "reasons": codes,
        "outcome": reasons.outcome().as_str(),
        "policy": {"name": l.policy.name.as_str(), "revision": l.policy.revision},
    })
}
