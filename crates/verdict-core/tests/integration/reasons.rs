//! One test per reason code of docs/spec/gate.md, each on the smallest bundle that triggers it,
//! plus the boundaries around it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::contracts::{Outcome, ReasonCode as R};

/// A named change to the base bundle.
type Edit = (&'static str, Box<dyn Fn(&mut Bundle)>);

#[test]
fn base_bundle_passes() {
    let d = Bundle::base().eval();
    assert_eq!(d.outcome, Outcome::Pass, "{d:#?}");
    assert!(d.reasons.is_empty());
    assert!(d.evaluation_key.is_some());
}

#[test]
fn invalid_input_duplicate_key_in_the_raw_bytes() {
    let mut bytes = Bundle::base().bytes();
    let text = String::from_utf8(bytes.clone()).unwrap();
    // Give the policy a second "name": a reader that keeps the last one would see another policy.
    let text = text.replacen(
        "\"name\":\"merge\"",
        "\"name\":\"merge\",\"name\":\"lax\"",
        1,
    );
    bytes = text.into_bytes();
    let d = verdict_core::gate::evaluate(&bytes);
    assert_reason(&d, Outcome::Blocked, R::InvalidInput);
    assert!(
        d.reasons[0].detail.contains("duplicate object key"),
        "{}",
        d.reasons[0].detail
    );
    assert!(d.evaluation_key.is_none());
}

/// An integer member written with a fraction or an exponent (`4.0`, `4e0`) is refused, though
/// RFC 8785 writes it `4` and the digest is the same: integers are written as integers
/// (contract-notes.md, "Integers are written as integers").
#[test]
fn invalid_input_an_integer_written_with_a_fraction_or_an_exponent() {
    let text = String::from_utf8(Bundle::base().bytes()).unwrap();
    for written in ["1.0", "1e0"] {
        let changed = text.replacen("\"revision\":1", &format!("\"revision\":{written}"), 1);
        assert_ne!(changed, text, "the base policy's revision is 1");
        let d = verdict_core::gate::evaluate(changed.as_bytes());
        assert_reason(&d, Outcome::Blocked, R::InvalidInput);
    }
}

/// A struct is read only from an object: `serde_json`'s own reader would take an array of the
/// fields in declaration order, giving one document two encodings and two digests, and a body
/// that PostgreSQL's schema check refuses.
#[test]
fn invalid_input_a_struct_written_as_an_array() {
    use serde::Deserialize;
    use verdict_core::contracts::{Criterion, Execution, Producer};
    let criterion = json!(["works", "it works"]);
    let execution = json!(["ex-1", 3]);
    let producer = json!(["agent-1", "run-1"]);
    // The loose reader takes each: the case is one a reader could get wrong.
    assert!(Criterion::deserialize(&criterion).is_ok());
    assert!(Execution::deserialize(&execution).is_ok());
    assert!(Producer::deserialize(&producer).is_ok());
    for (pointer, replacement) in [
        ("/subject/criteria/items/0", criterion),
        ("/subject/execution", execution),
        ("/subject/producer", producer),
        ("/evidence/0/produced_by", json!(["ci-runner", "runner"])),
    ] {
        let mut b = Bundle::base();
        *b.v.pointer_mut(pointer).unwrap() = replacement;
        let d = b.eval();
        assert_reason(&d, Outcome::Blocked, R::InvalidInput);
        assert!(d.evaluation_key.is_none(), "{pointer}");
        // The strict way of reading says the same, byte for byte.
        let strict = verdict_core::gate::evaluate_value(&b.value());
        assert_eq!(
            d.canonical_bytes().unwrap(),
            strict.canonical_bytes().unwrap(),
            "{pointer}"
        );
    }
}

#[test]
fn invalid_input_misspelled_policy_field() {
    let mut b = Bundle::base();
    b.v["policy"]["requried_checks"] = json!([]);
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::InvalidInput);
    assert!(
        d.reasons
            .iter()
            .any(|r| r.detail.contains("requried_checks")),
        "{:?}",
        d.reasons
    );
}

#[test]
fn invalid_input_cases() {
    let cases: Vec<Edit> = vec![
        (
            "uppercase identifier",
            Box::new(|b| b.v["subject"]["criteria"]["items"][0]["id"] = json!("Works")),
        ),
        (
            "unsafe integer",
            Box::new(|b| {
                b.v["subject"]["execution"]["generation"] = json!(9_007_199_254_740_992_u64)
            }),
        ),
        (
            "zero weight",
            Box::new(|b| b.v["subject"]["criteria"]["items"][0]["weight"] = json!(0)),
        ),
        (
            "negative weight",
            Box::new(|b| b.v["subject"]["criteria"]["items"][0]["weight"] = json!(-1.5)),
        ),
        (
            "non-utc now",
            Box::new(|b| b.v["now"] = json!("2026-11-30T12:00:00+01:00")),
        ),
        (
            "rule with outcome pass",
            Box::new(|b| {
                b.v["policy"]["rules"] =
                    json!([{"id": "r", "when": "true", "outcome": "pass", "reason": "x"}])
            }),
        ),
        (
            "rule that does not parse",
            Box::new(|b| {
                b.v["policy"]["rules"] =
                    json!([{"id": "r", "when": "((", "outcome": "rework", "reason": "x"}])
            }),
        ),
        (
            "on_inconclusive pass",
            Box::new(|b| b.v["policy"]["on_inconclusive"] = json!("pass")),
        ),
        (
            "on_contradiction pass",
            Box::new(|b| b.v["policy"]["on_contradiction"] = json!("pass")),
        ),
        (
            "unknown bundle field",
            Box::new(|b| b.v["extra"] = json!(1)),
        ),
        (
            "missing bundle field",
            Box::new(|b| {
                b.v.as_object_mut().unwrap().remove("prior_findings");
            }),
        ),
        (
            "wrong schema",
            Box::new(|b| b.v["schema"] = json!("verdict.gate-bundle/v2")),
        ),
        (
            "check pin on unknown criterion",
            Box::new(|b| b.v["subject"]["checks"][0]["criteria"] = json!(["nope"])),
        ),
        (
            "repeated criterion id",
            Box::new(|b| {
                b.add_criterion(json!({"id": "works", "text": "again"}));
            }),
        ),
        (
            "evidence id reused for another document",
            Box::new(|b| {
                b.push("evidence", evidence("ev-unit", "unit", "fail"));
            }),
        ),
        (
            "evidence id equal to a resource name",
            Box::new(|b| {
                b.push("evidence", evidence("diff", "unit", "pass"));
            }),
        ),
        (
            "evidence with unknown field",
            Box::new(|b| b.v["evidence"][0]["extra"] = json!(true)),
        ),
        (
            "malformed digest",
            Box::new(|b| b.v["subject"]["objective"]["digest"] = json!("sha256:XYZ")),
        ),
        (
            "invisible char in principal",
            Box::new(|b| b.v["subject"]["producer"]["principal"] = json!("agent\u{200b}1")),
        ),
    ];
    for (name, edit) in cases {
        let mut b = Bundle::base();
        edit(&mut b);
        let d = b.eval();
        assert_eq!(d.outcome, Outcome::Blocked, "{name}: {d:#?}");
        assert!(
            codes(&d).contains(&R::InvalidInput),
            "{name}: {:?}",
            codes(&d)
        );
        assert!(d.evaluation_key.is_none(), "{name}");
    }
}

#[test]
fn gate_error_when_a_rule_fails_to_evaluate() {
    let mut b = Bundle::base();
    b.v["policy"]["rules"] = json!([{"id": "r", "when": "criteria['missing'] == 'passed'", "outcome": "rework", "reason": "x"}]);
    assert_reason(&b.eval(), Outcome::Blocked, R::GateError);
    // A rule that yields a non-bool is an error too, not "false".
    b.v["policy"]["rules"] =
        json!([{"id": "r", "when": "1 + 1", "outcome": "rework", "reason": "x"}]);
    assert_reason(&b.eval(), Outcome::Blocked, R::GateError);
}

#[test]
fn nothing_to_verify() {
    let mut b = Bundle::base();
    b.v["subject"]["criteria"]["items"][0]["required"] = json!(false);
    b.v["policy"]["required_checks"] = json!([]);
    assert_reason(&b.eval(), Outcome::Blocked, R::NothingToVerify);
    // Declaring the only criterion optional in the policy is the same.
    let mut b = Bundle::base();
    b.v["policy"]["optional_criteria"] = json!(["works"]);
    b.v["policy"]["required_checks"] = json!([]);
    assert_reason(&b.eval(), Outcome::Blocked, R::NothingToVerify);
}

#[test]
fn evidence_missing() {
    let mut b = Bundle::base();
    b.v["evidence"] = json!([]);
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceMissing);
    // A required check the subject does not pin can never have counted evidence.
    let mut b = Bundle::base();
    b.v["policy"]["required_checks"] = json!(["unit", "lint"]);
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceMissing);
}

#[test]
fn evidence_stale_and_its_boundary() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["freshness"] = json!({"kind": "time", "max_age_s": 600});
    b.v["evidence"][0]["observed_at"] = json!("2026-11-30T11:50:00Z"); // exactly 600 s before now
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceStale);
    b.v["evidence"][0]["observed_at"] = json!("2026-11-30T11:50:00.001Z");
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Pass, "{d:#?}");
    assert_eq!(d.valid_until.unwrap().as_str(), "2026-11-30T12:00:00.001Z");
}

#[test]
fn evidence_from_future_and_its_boundary() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["observed_at"] = json!("2026-11-30T12:05:01Z");
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceFromFuture);
    b.v["evidence"][0]["observed_at"] = json!("2026-11-30T12:05:00Z");
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

#[test]
fn evidence_tampered() {
    let mut b = Bundle::base();
    let mut ev = b.value()["evidence"][0].clone();
    let real = verdict_core::digest::digest(verdict_core::digest::DigestKind::Evidence, &ev);
    ev["digest"] = json!(real.as_str());
    b.v["evidence"] = json!([ev.clone()]);
    assert_eq!(
        b.eval().outcome,
        Outcome::Pass,
        "an intact carried digest is accepted"
    );
    // Change what was observed after the digest was taken.
    b.v["evidence"][0]["content_digest"] = json!(OTHER_DEF);
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceTampered);
    // A tampered subject is refused outright.
    let mut b = Bundle::base();
    b.v["subject"]["digest"] = json!(CONTENT);
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceTampered);
}

#[test]
fn evidence_definition_mismatch() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["definition_digest"] = json!(OTHER_DEF);
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceDefinitionMismatch);
}

#[test]
fn self_verification_denied_for_every_kind_of_item() {
    let edits: Vec<Edit> = vec![
        (
            "verifier principal",
            Box::new(|b| b.v["verifications"][0]["verifier"]["principal"] = json!("agent-1")),
        ),
        (
            "verifier run",
            Box::new(|b| b.v["verifications"][0]["verifier"]["run"] = json!("run-1")),
        ),
        (
            "evidence principal",
            Box::new(|b| b.v["evidence"][0]["produced_by"]["principal"] = json!("agent-1")),
        ),
        (
            "human approver",
            Box::new(|b| {
                b.v["policy"]["risk"] = json!({"low": {"human": true}});
                b.push("human_decisions", human("hd-1", "agent-1", "approve"));
            }),
        ),
    ];
    for (name, edit) in edits {
        let mut b = Bundle::base();
        edit(&mut b);
        let d = b.eval();
        assert!(
            codes(&d).contains(&R::SelfVerificationDenied),
            "{name}: {:?}",
            codes(&d)
        );
        assert_eq!(d.outcome, Outcome::Blocked, "{name}");
    }
}

#[test]
fn producer_evidence_counts_only_when_the_policy_lists_producer() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["produced_by"] = json!({"principal": "agent-1", "role": "producer"});
    assert_reason(&b.eval(), Outcome::Blocked, R::SelfVerificationDenied);
    b.v["policy"]["check_evidence_from"] = json!(["runner", "producer"]);
    assert_eq!(b.eval().outcome, Outcome::Pass);
    // Another principal claiming the producer role is simply not counted.
    let mut b = Bundle::base();
    b.v["evidence"][0]["produced_by"] = json!({"principal": "someone", "role": "producer"});
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceMissing);
}

#[test]
fn verifier_missing() {
    let mut b = Bundle::base();
    b.v["verifications"] = json!([]);
    assert_reason(&b.eval(), Outcome::Blocked, R::VerifierMissing);
}

#[test]
fn verifier_unavailable_keeps_the_cause() {
    for cause in [
        "timeout",
        "provider_error",
        "budget_exhausted",
        "context_incomplete",
        "grant_revoked",
        "cancelled",
        "invalid_output",
    ] {
        let mut b = Bundle::base();
        b.v["verifications"] = json!([unavailable("vr-u", "reviewer", cause)]);
        let d = b.eval();
        assert_reason(&d, Outcome::Blocked, R::VerifierUnavailable);
        assert!(
            !codes(&d).contains(&R::CriterionFailed),
            "an outage is not a failure"
        );
        assert!(
            d.reasons.iter().any(|r| r.detail.contains(cause)),
            "{cause}"
        );
    }
    // An unavailable run next to a completed one of the same class changes nothing.
    let mut b = Bundle::base();
    b.push("verifications", unavailable("vr-u", "reviewer", "timeout"));
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

#[test]
fn verifier_output_invalid_cases() {
    let cases: Vec<Edit> = vec![
        (
            "unknown criterion",
            Box::new(|b| b.v["verifications"][0]["criteria"][0]["id"] = json!("works-2")),
        ),
        (
            "look-alike criterion",
            Box::new(|b| b.v["verifications"][0]["criteria"][0]["id"] = json!("wоrks")),
        ),
        (
            "repeated row",
            Box::new(|b| {
                b.v["verifications"][0]["criteria"]
                    .as_array_mut()
                    .unwrap()
                    .push(row("works", "failed", &["diff"]));
            }),
        ),
        (
            "unknown status",
            Box::new(|b| b.v["verifications"][0]["criteria"][0]["status"] = json!("pass")),
        ),
        (
            "extra field",
            Box::new(|b| b.v["verifications"][0]["verdict"] = json!("pass")),
        ),
        (
            "newer generation",
            Box::new(|b| b.v["verifications"][0]["generation"] = json!(4)),
        ),
        (
            "completed with unavailable_reason",
            Box::new(|b| b.v["verifications"][0]["unavailable_reason"] = json!("timeout")),
        ),
        (
            "finding on unknown criterion",
            Box::new(|b| {
                b.v["verifications"][0]["findings"] =
                    json!([finding("f-1", 1, "other", "minor", "change")]);
            }),
        ),
        (
            "disposition of unknown prior finding",
            Box::new(|b| {
                b.v["verifications"][0]["dispositions"] = json!([{"finding": "f-9", "version": 1, "disposition": "still_present", "evidence_refs": []}]);
            }),
        ),
    ];
    for (name, edit) in cases {
        let mut b = Bundle::base();
        edit(&mut b);
        let d = b.eval();
        assert!(
            codes(&d).contains(&R::VerifierOutputInvalid),
            "{name}: {:?}",
            codes(&d)
        );
        assert_eq!(d.outcome, Outcome::Blocked, "{name}");
    }
}

#[test]
fn stale_generation_is_history() {
    let mut b = Bundle::base();
    b.v["verifications"][0]["generation"] = json!(2);
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::StaleGeneration);
    assert!(!codes(&d).contains(&R::VerifierMissing));
    // With a current result of the class as well, the old one is silent history.
    b.push(
        "verifications",
        verification(
            "vr-2",
            "reviewer",
            vec![row("works", "passed", &["ev-unit"])],
        ),
    );
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

#[test]
fn criterion_row_missing() {
    let mut b = Bundle::base();
    b.add_criterion(json!({"id": "fast", "text": "it is fast"}));
    b.v["subject"]["checks"][0]["criteria"] = json!(["works", "fast"]);
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::CriterionRowMissing);
    // The check passed "fast", but a required reviewer's missing row still blocks.
    assert_eq!(
        d.criteria[1].status,
        verdict_core::contracts::CriterionStatus::Passed
    );
}

#[test]
fn criterion_not_tested() {
    let mut b = Bundle::base();
    b.v["policy"]["required_checks"] = json!([]);
    b.v["subject"]["checks"] = json!([]);
    b.v["evidence"] = json!([]);
    b.v["verifications"][0]["criteria"][0]["status"] = json!("not_tested");
    assert_reason(&b.eval(), Outcome::Blocked, R::CriterionNotTested);
}

#[test]
fn check_error_proves_nothing() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["outcome"] = json!("error");
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::CheckError);
    assert!(
        d.criteria[0]
            .sources
            .iter()
            .all(|s| s.reference.as_str() != "ev-unit")
    );
}

#[test]
fn prior_blocker_unaddressed() {
    let mut b = Bundle::base();
    let mut f = finding("f-1", 1, "works", "blocker", "change");
    f["subject_digest"] = json!(CONTENT); // found on an earlier subject
    b.push("prior_findings", f);
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::PriorBlockerUnaddressed);
    assert_eq!(d.unresolved_prior_blockers.len(), 1);
}

#[test]
fn check_failed_is_rework() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["outcome"] = json!("fail");
    let d = b.eval();
    assert_reason(&d, Outcome::Rework, R::CheckFailed);
    assert!(codes(&d).contains(&R::CriterionFailed));
}

#[test]
fn criterion_failed_is_rework() {
    let mut b = Bundle::base();
    b.add_criterion(json!({"id": "fast", "text": "it is fast"}));
    b.v["verifications"][0]["criteria"]
        .as_array_mut()
        .unwrap()
        .push(row("fast", "failed", &["diff"]));
    assert_reason(&b.eval(), Outcome::Rework, R::CriterionFailed);
}

#[test]
fn blocking_finding_only_when_change_scoped_blocker_on_required_criterion() {
    let mut b = Bundle::base();
    b.v["verifications"][0]["findings"] = json!([finding("f-1", 1, "works", "blocker", "change")]);
    let d = b.eval();
    assert_reason(&d, Outcome::Rework, R::BlockingFinding);
    assert_eq!(d.rework.len(), 1);
    for (sev, scope) in [
        ("blocker", "adjacent"),
        ("blocker", "pre_existing"),
        ("major", "change"),
    ] {
        let mut b = Bundle::base();
        b.v["verifications"][0]["findings"] = json!([finding("f-1", 1, "works", sev, scope)]);
        let d = b.eval();
        assert_eq!(d.outcome, Outcome::Pass, "{sev}/{scope}");
        assert_eq!(d.follow_ups.len(), 1, "{sev}/{scope} is a follow-up");
        assert!(d.rework.is_empty());
    }
    // A change-scoped blocker on an optional criterion is a follow-up too.
    let mut b = Bundle::base();
    b.add_criterion(json!({"id": "docs", "text": "docs", "required": false}));
    b.v["verifications"][0]["findings"] = json!([finding("f-1", 1, "docs", "blocker", "change")]);
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

fn with_prior(disposition: serde_json::Value) -> Bundle {
    let mut b = Bundle::base();
    let mut f = finding("f-1", 1, "works", "blocker", "change");
    f["subject_digest"] = json!(CONTENT);
    b.push("prior_findings", f);
    b.v["verifications"][0]["dispositions"] = json!([disposition]);
    b
}

#[test]
fn prior_blocker_still_present_is_rework() {
    let b = with_prior(
        json!({"finding": "f-1", "version": 1, "disposition": "still_present", "evidence_refs": ["diff"]}),
    );
    let d = b.eval();
    assert_reason(&d, Outcome::Rework, R::PriorBlockerStillPresent);
    assert_eq!(d.rework.len(), 1);
}

#[test]
fn prior_blocker_resolution_needs_refs_and_supersession_needs_a_reason() {
    let ok = with_prior(
        json!({"finding": "f-1", "version": 1, "disposition": "resolved", "evidence_refs": ["ev-unit"]}),
    );
    assert_eq!(ok.eval().outcome, Outcome::Pass);
    for d in [
        json!({"finding": "f-1", "version": 1, "disposition": "resolved", "evidence_refs": []}),
        json!({"finding": "f-1", "version": 1, "disposition": "resolved", "evidence_refs": ["nowhere"]}),
        json!({"finding": "f-1", "version": 1, "disposition": "superseded_by_subject_change", "evidence_refs": []}),
        json!({"finding": "f-1", "version": 1, "disposition": "superseded_by_subject_change", "evidence_refs": [], "reason": "  "}),
    ] {
        assert_reason(
            &with_prior(d.clone()).eval(),
            Outcome::Blocked,
            R::PriorBlockerUnaddressed,
        );
    }
    let sup = with_prior(
        json!({"finding": "f-1", "version": 1, "disposition": "superseded_by_subject_change", "evidence_refs": [], "reason": "file deleted"}),
    );
    assert_eq!(sup.eval().outcome, Outcome::Pass);
}

#[test]
fn strictest_disposition_stands() {
    let mut b = with_prior(
        json!({"finding": "f-1", "version": 1, "disposition": "resolved", "evidence_refs": ["ev-unit"]}),
    );
    let mut other = verification(
        "vr-2",
        "security",
        vec![row("works", "passed", &["ev-unit"])],
    );
    other["dispositions"] = json!([{"finding": "f-1", "version": 1, "disposition": "still_present", "evidence_refs": []}]);
    b.push("verifications", other);
    assert_reason(&b.eval(), Outcome::Rework, R::PriorBlockerStillPresent);
}

#[test]
fn human_rejected_is_rework() {
    let mut b = Bundle::base();
    b.push("human_decisions", human("hd-1", "alice", "reject"));
    assert_reason(&b.eval(), Outcome::Rework, R::HumanRejected);
}

#[test]
fn criterion_inconclusive_follows_on_inconclusive() {
    let mut b = Bundle::base();
    b.v["verifications"][0]["criteria"][0]["status"] = json!("inconclusive");
    assert_reason(&b.eval(), Outcome::HumanRequired, R::CriterionInconclusive);
    b.v["policy"]["on_inconclusive"] = json!("blocked");
    assert_reason(&b.eval(), Outcome::Blocked, R::CriterionInconclusive);
}

#[test]
fn contradiction_follows_on_contradiction_without_voting() {
    let mut b = Bundle::base();
    b.push(
        "verifications",
        verification("vr-2", "security", vec![row("works", "failed", &["diff"])]),
    );
    let d = b.eval();
    assert!(codes(&d).contains(&R::Contradiction));
    assert!(codes(&d).contains(&R::CriterionFailed));
    assert_eq!(d.outcome, Outcome::Rework);
    b.v["policy"]["on_contradiction"] = json!("blocked");
    assert_reason(&b.eval(), Outcome::Blocked, R::Contradiction);
}

#[test]
fn unsupported_pass() {
    for refs in [json!([]), json!(["not-in-bundle"])] {
        let mut b = Bundle::base();
        b.v["verifications"][0]["criteria"][0]["evidence_refs"] = refs.clone();
        b.v["policy"]["required_checks"] = json!([]);
        b.v["subject"]["checks"] = json!([]);
        b.v["evidence"] = json!([]);
        let d = b.eval();
        assert_reason(&d, Outcome::HumanRequired, R::UnsupportedPass);
        assert_eq!(
            d.criteria[0].status,
            verdict_core::contracts::CriterionStatus::Inconclusive,
            "{refs}"
        );
        b.v["policy"]["require_evidence_refs"] = json!(false);
        assert_eq!(b.eval().outcome, Outcome::Pass, "{refs}");
    }
}

#[test]
fn human_review_required_until_an_approval_binds_subject_and_policy() {
    let mut b = Bundle::base();
    b.v["subject"]["risk"]["class"] = json!("high");
    b.v["policy"]["risk"] = json!({"high": {"human": true}});
    assert_reason(&b.eval(), Outcome::HumanRequired, R::HumanReviewRequired);
    // An approval bound to another policy does not count.
    let mut wrong = human("hd-1", "alice", "approve");
    wrong["policy_digest"] = json!(CONTENT);
    b.push("human_decisions", wrong);
    assert_reason(&b.eval(), Outcome::HumanRequired, R::HumanReviewRequired);
    b.push("human_decisions", human("hd-2", "alice", "approve"));
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

#[test]
fn approval_clears_only_human_required_reasons() {
    let mut b = Bundle::base();
    b.v["policy"]["risk"] = json!({"low": {"human": true}});
    b.v["evidence"][0]["outcome"] = json!("fail");
    b.push("human_decisions", human("hd-1", "alice", "approve"));
    assert_reason(&b.eval(), Outcome::Rework, R::CheckFailed);
}

#[test]
fn high_risk_requires_extra_verifier_classes() {
    let mut b = Bundle::base();
    b.v["subject"]["risk"]["class"] = json!("critical");
    b.v["policy"]["risk"] = json!({"critical": {"required_verifiers": ["security"]}});
    assert_reason(&b.eval(), Outcome::Blocked, R::VerifierMissing);
    b.push(
        "verifications",
        verification("vr-s", "security", vec![row("works", "passed", &["diff"])]),
    );
    assert_eq!(b.eval().outcome, Outcome::Pass);
}

#[test]
fn policy_rule_adds_a_stricter_reason() {
    let mut b = Bundle::base();
    b.v["policy"]["rules"] = json!([
        {"id": "low-score", "when": "scores.c < 1.0", "outcome": "rework", "reason": "all correctness criteria must pass"},
        {"id": "risky", "when": "'prod-write' in risk.capabilities", "outcome": "human_required", "reason": "production writes need a person"}
    ]);
    assert_eq!(b.eval().outcome, Outcome::Pass);
    b.v["subject"]["risk"]["capabilities"] = json!(["prod-write"]);
    assert_reason(&b.eval(), Outcome::HumanRequired, R::PolicyRule);
}
