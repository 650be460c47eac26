//! An approval clears only what the person saw (docs/spec/gate.md, "Human decisions"): one
//! that names the `human_required` reasons it clears leaves every other one standing, above
//! all one that appears after it; one that names none clears them all, as before.

use crate::common::*;
use serde_json::{Value, json};
use verdict_core::contracts::{Outcome, ReasonCode as R};

/// A bundle under a policy whose risk table asks a person to review low-risk work: it passes
/// everything else, so its one reason is the risk review.
fn risky() -> Bundle {
    let mut b = Bundle::base();
    b.v["policy"]["risk"] = json!({"low": {"human": true}});
    b
}

fn approval(id: &str, clears: Value) -> Value {
    let mut h = human(id, "alice", "approve");
    h["clears"] = clears;
    h
}

/// A second reviewer answers `inconclusive` on the required criterion after the approval.
fn later_inconclusive(b: &mut Bundle) {
    b.push(
        "verifications",
        verification("vr-2", "reviewer", vec![row("works", "inconclusive", &[])]),
    );
}

#[test]
fn an_approval_naming_the_risk_review_leaves_a_later_inconclusive_standing() {
    let mut b = risky();
    assert_reason(&b.eval(), Outcome::HumanRequired, R::HumanReviewRequired);
    b.push(
        "human_decisions",
        approval("hd-1", json!([{"code": "human_review_required"}])),
    );
    assert_eq!(b.eval().outcome, Outcome::Pass, "it clears what it names");

    later_inconclusive(&mut b);
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::HumanRequired, "{d:?}");
    assert_eq!(codes(&d), vec![R::CriterionInconclusive], "{d:?}");
    let standing = d.reasons.first().unwrap();
    assert_eq!(
        standing.criterion.as_ref().map(|c| c.as_str()),
        Some("works")
    );
    assert!(
        standing
            .detail
            .contains("no counted human approval names this reason"),
        "{}",
        standing.detail
    );

    // A second approval naming it clears it.
    b.push(
        "human_decisions",
        approval(
            "hd-2",
            json!([{"code": "criterion_inconclusive", "criterion": "works"}]),
        ),
    );
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

#[test]
fn an_entry_clears_only_the_reason_with_the_same_criterion_check_and_finding() {
    let mut b = risky();
    later_inconclusive(&mut b);
    for named in [
        json!([{"code": "human_review_required"}]),
        json!([{"code": "human_review_required"}, {"code": "criterion_inconclusive"}]),
        json!([{"code": "human_review_required"}, {"code": "criterion_inconclusive", "criterion": "other"}]),
        json!([{"code": "human_review_required"}, {"code": "criterion_inconclusive", "criterion": "works", "check": "unit"}]),
        json!([{"code": "human_review_required"}, {"code": "contradiction", "criterion": "works"}]),
        json!([]),
    ] {
        let mut with = b.clone();
        with.push("human_decisions", approval("hd-1", named.clone()));
        let d = with.eval();
        assert_reason(&d, Outcome::HumanRequired, R::CriterionInconclusive);
        let names_review = named
            .as_array()
            .unwrap()
            .contains(&json!({"code": "human_review_required"}));
        assert_eq!(
            codes(&d).contains(&R::HumanReviewRequired),
            !names_review,
            "{named}: {d:?}"
        );
    }
}

#[test]
fn an_approval_that_names_nothing_clears_every_human_required_reason_as_before() {
    let mut b = risky();
    later_inconclusive(&mut b);
    b.push("human_decisions", human("hd-1", "alice", "approve"));
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Pass, "{d:?}");
    assert!(d.reasons.is_empty(), "{d:?}");
    // And together with one that names a part, it still clears everything.
    b.push(
        "human_decisions",
        approval("hd-2", json!([{"code": "human_review_required"}])),
    );
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

#[test]
fn an_approval_that_names_reasons_never_clears_rework_or_blocked() {
    let mut b = risky();
    b.v["evidence"][0]["outcome"] = json!("fail");
    b.push(
        "human_decisions",
        approval(
            "hd-1",
            json!([{"code": "human_review_required"}, {"code": "check_failed", "criterion": "works", "check": "unit"}]),
        ),
    );
    assert_reason(&b.eval(), Outcome::Rework, R::CheckFailed);
}

#[test]
fn clears_on_a_rejection_or_naming_a_reason_twice_is_invalid_input() {
    let mut on_reject = risky();
    let mut h = human("hd-1", "alice", "reject");
    h["clears"] = json!([{"code": "human_review_required"}]);
    on_reject.push("human_decisions", h);

    let mut twice = risky();
    twice.push(
        "human_decisions",
        approval(
            "hd-1",
            json!([
                {"code": "criterion_inconclusive", "criterion": "works"},
                {"code": "human_review_required"},
                {"code": "criterion_inconclusive", "criterion": "works"}
            ]),
        ),
    );
    for (name, b) in [("on a rejection", on_reject), ("twice", twice)] {
        let d = b.eval();
        assert_eq!(d.outcome, Outcome::Blocked, "{name}: {d:?}");
        assert_eq!(codes(&d), vec![R::InvalidInput], "{name}: {d:?}");
        assert!(d.evaluation_key.is_none(), "{name}");
        assert!(d.reasons[0].detail.contains("hd-1"), "{name}: {d:?}");
        // The strict reader says the same as the fast one.
        assert_eq!(
            verdict_core::gate::evaluate_value(&b.value()),
            d,
            "{name}: both readers"
        );
    }
}

#[test]
fn both_readers_give_the_same_decision_for_an_approval_that_names_reasons() {
    let mut b = risky();
    later_inconclusive(&mut b);
    b.push(
        "human_decisions",
        approval("hd-1", json!([{"code": "human_review_required"}])),
    );
    let fast = b.eval();
    let strict = verdict_core::gate::evaluate_value(&b.value());
    assert_eq!(fast, strict);
    assert_eq!(
        fast.canonical_bytes().unwrap(),
        strict.canonical_bytes().unwrap()
    );
    // The member changes the document, and so the evaluation key.
    let mut bare = risky();
    later_inconclusive(&mut bare);
    bare.push("human_decisions", human("hd-1", "alice", "approve"));
    assert_ne!(bare.eval().evaluation_key, fast.evaluation_key);
}

/// Two policy rules each ask for a person. An entry naming one rule clears that rule's reason
/// only; the other stands, so an approval given while one rule fired does not clear another
/// that fires later. An entry with no rule (as written before entries named rules) clears
/// every rule's reason, and a rule named on any other code is `invalid_input`.
#[test]
fn an_entry_naming_a_rule_clears_that_rules_reason_only() {
    let mut b = Bundle::base();
    b.v["policy"]["rules"] = json!([
        {"id": "r1", "when": "true", "outcome": "human_required", "reason": "first look"},
        {"id": "r2", "when": "true", "outcome": "human_required", "reason": "second look"}
    ]);
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::HumanRequired, "{d:?}");
    // What the engine writes for the reason of r1 names r1.
    let r1 = d
        .reasons
        .iter()
        .find(|r| r.detail.starts_with("rule \"r1\""))
        .unwrap();
    let entry = verdict_core::contracts::ClearedReason::of(r1);
    assert_eq!(entry.rule.as_ref().map(|r| r.as_str()), Some("r1"));

    let mut one = b.clone();
    one.push(
        "human_decisions",
        approval("hd-1", json!([serde_json::to_value(&entry).unwrap()])),
    );
    let d = one.eval();
    assert_eq!(d.outcome, Outcome::HumanRequired, "{d:?}");
    assert_eq!(codes(&d), vec![R::PolicyRule], "{d:?}");
    assert!(d.reasons[0].detail.starts_with("rule \"r2\""), "{d:?}");

    let mut both = b.clone();
    both.push(
        "human_decisions",
        approval("hd-1", json!([{"code": "policy_rule"}])),
    );
    assert_eq!(both.eval().outcome, Outcome::Pass);

    let mut wrong = b.clone();
    wrong.push(
        "human_decisions",
        approval(
            "hd-1",
            json!([{"code": "human_review_required", "rule": "r1"}]),
        ),
    );
    assert_reason(&wrong.eval(), Outcome::Blocked, R::InvalidInput);
}
