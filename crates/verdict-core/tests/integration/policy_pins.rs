//! What the policy pins against the producer's word (docs/spec/policy.md): `risk_floor`,
//! `required_criteria` and `check_definitions`. Each test first shows the attack succeeding
//! without the member, then failing with it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use verdict_core::contracts::{GateDecision, Outcome, Policy, ReasonCode as R, SourceKind};
use verdict_core::gate;

fn details(d: &GateDecision, code: R) -> Vec<&str> {
    d.reasons
        .iter()
        .filter(|r| r.code == code)
        .map(|r| r.detail.as_str())
        .collect()
}

/// The producer states its work `low`; the policy asks a security verifier and a person of
/// `high` work.
fn stated_low() -> Bundle {
    let mut b = Bundle::base();
    b.v["policy"]["risk"] = json!({"high": {"required_verifiers": ["security"], "human": true}});
    b
}

#[test]
fn a_low_subject_under_a_high_risk_floor_needs_what_high_work_needs() {
    // Without a floor, the stated class is taken at its word: the low subject passes.
    assert_eq!(stated_low().eval().outcome, Outcome::Pass);

    let mut b = stated_low();
    b.v["policy"]["risk_floor"] = json!("high");
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::VerifierMissing);
    let missing = details(&d, R::VerifierMissing);
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(
        missing[0].contains("\"security\"") && missing[0].contains("risk_floor"),
        "{missing:?}"
    );
    let review = details(&d, R::HumanReviewRequired);
    assert_eq!(
        review,
        [
            "risk class low raised to high by the policy's risk_floor requires a human approval bound to this subject and policy"
        ]
    );

    // The high verifier class answers: a person is still needed.
    b.push(
        "verifications",
        verification(
            "vr-sec",
            "security",
            vec![row("works", "passed", &["ev-unit"])],
        ),
    );
    let d = b.eval();
    assert_reason(&d, Outcome::HumanRequired, R::HumanReviewRequired);
    assert_eq!(codes(&d), [R::HumanReviewRequired]);

    // A counted approval bound to this subject and policy clears it.
    b.push("human_decisions", human("h-1", "reviewer-human", "approve"));
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

#[test]
fn a_floor_below_the_stated_class_changes_nothing() {
    let mut b = stated_low();
    b.v["subject"]["risk"]["class"] = json!("critical");
    b.push(
        "verifications",
        verification(
            "vr-sec",
            "security",
            vec![row("works", "passed", &["ev-unit"])],
        ),
    );
    let without = b.eval();
    b.v["policy"]["risk_floor"] = json!("medium");
    let with = b.eval();
    assert_eq!(codes(&with), [R::HumanReviewRequired]);
    // The same reasons, word for word: the floor did not raise the class.
    assert_eq!(without.reasons, with.reasons);
    assert_eq!(
        details(&with, R::HumanReviewRequired),
        [
            "risk class critical (as class high does) requires a human approval bound to this subject and policy"
        ]
    );
}

#[test]
fn rules_see_the_stated_class_and_the_effective_one() {
    let mut b = stated_low();
    b.v["policy"]["risk_floor"] = json!("high");
    b.v["policy"]["rules"] = json!([
        {"id": "stated", "when": "risk.class == 'low'", "outcome": "rework", "reason": "stated low"},
        {"id": "effective", "when": "risk.effective_class == 'high'", "outcome": "rework", "reason": "treated as high"}
    ]);
    let d = b.eval();
    let fired = details(&d, R::PolicyRule);
    assert_eq!(
        fired,
        [
            "rule \"effective\": treated as high",
            "rule \"stated\": stated low"
        ]
    );
    // Without a floor the effective class is the stated one.
    let mut b = Bundle::base();
    b.v["policy"]["rules"] = json!([
        {"id": "same", "when": "risk.effective_class == risk.class", "outcome": "rework", "reason": "no floor"}
    ]);
    assert_reason(&b.eval(), Outcome::Rework, R::PolicyRule);
}

/// A second criterion the subject marks optional, which the reviewer fails.
fn optional_failed() -> Bundle {
    let mut b = Bundle::base();
    b.add_criterion(json!({"id": "safe", "text": "nothing unsafe", "required": false}));
    b.v["verifications"][0]["criteria"]
        .as_array_mut()
        .unwrap()
        .push(row("safe", "failed", &["diff"]));
    b
}

#[test]
fn a_criterion_the_policy_requires_counts_whatever_the_subject_says() {
    // The subject's `required: false` alone lets a failed criterion pass.
    let d = optional_failed().eval();
    assert_eq!(d.outcome, Outcome::Pass, "{d:#?}");

    let mut b = optional_failed();
    b.v["policy"]["required_criteria"] = json!(["safe"]);
    let d = b.eval();
    assert_reason(&d, Outcome::Rework, R::CriterionFailed);
    let safe = d.criteria.iter().find(|c| c.id.as_str() == "safe").unwrap();
    assert!(safe.required);
    assert!(d.reasons.iter().any(|r| r.code == R::CriterionFailed
        && r.criterion.as_ref().map(|c| c.as_str()) == Some("safe")));
}

#[test]
fn a_required_criterion_the_subject_lacks_is_blocked() {
    let mut b = Bundle::base();
    b.v["policy"]["required_criteria"] = json!(["works", "no-secrets"]);
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::CriterionAbsent);
    let absent: Vec<_> = d
        .reasons
        .iter()
        .filter(|r| r.code == R::CriterionAbsent)
        .collect();
    assert_eq!(absent.len(), 1, "{absent:?}");
    assert_eq!(
        absent[0].criterion.as_ref().map(|c| c.as_str()),
        Some("no-secrets")
    );
    assert!(absent[0].detail.contains("\"no-secrets\""));
    // Even with no other requirement at all: nothing required by the subject, nothing else.
    let mut b = Bundle::base();
    b.v["subject"]["criteria"]["items"][0]["required"] = json!(false);
    b.v["policy"]["required_checks"] = json!([]);
    b.v["policy"]["required_criteria"] = json!(["no-secrets"]);
    assert_reason(&b.eval(), Outcome::Blocked, R::CriterionAbsent);
}

#[test]
fn a_subject_pinning_another_definition_is_blocked_and_its_evidence_does_not_count() {
    let mut b = Bundle::base();
    // The subject pins DEF for "unit" and the runner ran DEF: without the member, it passes.
    assert_eq!(b.eval().outcome, Outcome::Pass);
    b.v["policy"]["check_definitions"] = json!({"unit": OTHER_DEF});
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::CheckDefinitionUnpinned);
    let r = d
        .reasons
        .iter()
        .find(|r| r.code == R::CheckDefinitionUnpinned)
        .unwrap();
    assert_eq!(r.check.as_ref().map(|c| c.as_str()), Some("unit"));
    assert!(
        r.detail.contains(DEF) && r.detail.contains(OTHER_DEF) && r.detail.contains("\"unit\""),
        "{}",
        r.detail
    );
    // The evidence is not counted: the required check has none, and no criterion cites it.
    assert_reason(&d, Outcome::Blocked, R::EvidenceMissing);
    assert!(
        d.criteria
            .iter()
            .flat_map(|c| c.sources.iter())
            .all(|s| s.kind != SourceKind::Check),
        "{d:#?}"
    );
    let prepared = gate::Prepared::new(&b.value()).map_err(|_| ()).unwrap();
    assert!(prepared.counted_evidence().is_empty());

    // Not even where the check is not required: its failure would otherwise be a source.
    let mut b = Bundle::base();
    b.v["policy"]["required_checks"] = json!([]);
    b.v["policy"]["check_definitions"] = json!({"unit": OTHER_DEF});
    let d = b.eval();
    assert_eq!(codes(&d), [R::CheckDefinitionUnpinned]);
    assert!(
        d.criteria
            .iter()
            .flat_map(|c| c.sources.iter())
            .all(|s| s.kind != SourceKind::Check)
    );
}

#[test]
fn a_subject_pinning_the_policys_definition_passes_and_an_unpinned_check_keeps_its_reason() {
    let mut b = Bundle::base();
    b.v["policy"]["check_definitions"] = json!({"unit": DEF, "lint": OTHER_DEF});
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Pass, "{d:#?}");
    // A required check the subject does not list keeps evidence_missing, nothing more.
    b.v["policy"]["required_checks"] = json!(["unit", "lint"]);
    let d = b.eval();
    assert_eq!(codes(&d), [R::EvidenceMissing]);
    assert_eq!(
        details(&d, R::EvidenceMissing),
        ["required check \"lint\": the subject does not pin it"]
    );
}

#[test]
fn contradictory_or_malformed_members_are_invalid_input() {
    let cases: Vec<(&str, Value)> = vec![
        (
            "both required and optional",
            json!({"required_criteria": ["works"], "optional_criteria": ["works"]}),
        ),
        (
            "required twice",
            json!({"required_criteria": ["works", "works"]}),
        ),
        ("not an id", json!({"required_criteria": ["Works"]})),
        ("unknown class", json!({"risk_floor": "extreme"})),
        (
            "check id not an id",
            json!({"check_definitions": {"Unit": DEF}}),
        ),
        (
            "not a digest",
            json!({"check_definitions": {"unit": "sha1:abc"}}),
        ),
    ];
    for (what, members) in cases {
        let mut b = Bundle::base();
        for (k, v) in members.as_object().unwrap() {
            b.v["policy"][k] = v.clone();
        }
        let d = b.eval();
        assert_eq!(codes(&d), [R::InvalidInput], "{what}: {d:#?}");
        assert!(d.evaluation_key.is_none(), "{what}");
    }
    // The reader `policy set` uses says the same, naming the criterion.
    let p: Policy = serde_json::from_value(json!({
        "schema": "verdict.policy/v1", "name": "merge", "revision": 1,
        "required_criteria": ["works", "safe", "safe"], "optional_criteria": ["works"]
    }))
    .unwrap();
    let problems = gate::policy_problems(&p);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("\"safe\" is repeated")));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("\"works\" is also in optional_criteria"))
    );
}

/// A policy that leaves the three members out serializes without them: its digest, and so every
/// decision stored under it, is what it was before they existed.
#[test]
fn a_policy_without_the_members_keeps_its_form() {
    let written = json!({
        "schema": "verdict.policy/v1", "name": "merge", "revision": 1,
        "required_checks": ["unit"], "required_verifiers": ["reviewer"]
    });
    let p: Policy = serde_json::from_value(written).unwrap();
    let back = serde_json::to_value(&p).unwrap();
    for member in ["risk_floor", "required_criteria", "check_definitions"] {
        assert!(back.get(member).is_none(), "{member} in {back}");
    }
    let mut floored = p.clone();
    floored.risk_floor = verdict_core::contracts::RiskClass::High;
    assert_eq!(
        serde_json::to_value(&floored).unwrap()["risk_floor"],
        json!("high")
    );
}

/// Every fixture and example bundle written before the three members existed is decided byte
/// for byte as the Gate decided it then: `tests/fixtures/decisions-before-policy-pins.json`
/// holds the raw digest of each decision's canonical bytes, made by that Gate.
#[test]
fn decisions_made_before_the_members_existed_replay_byte_for_byte() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let held: serde_json::Map<String, Value> = serde_json::from_slice(
        &std::fs::read(root.join("tests/fixtures/decisions-before-policy-pins.json")).unwrap(),
    )
    .unwrap();
    assert!(held.len() >= 70, "{}", held.len());
    for (path, want) in &held {
        let doc: Value = serde_json::from_slice(&std::fs::read(root.join(path)).unwrap()).unwrap();
        let bundle = if path.starts_with("tests/") {
            doc["bundle"].clone()
        } else {
            doc
        };
        let d = gate::evaluate(&serde_json::to_vec(&bundle).unwrap());
        let got = verdict_core::digest::raw(&d.canonical_bytes().unwrap());
        assert_eq!(got.as_str(), want.as_str().unwrap(), "{path}");
    }
}
