//! The decision's finding lists (docs/spec/gate.md, "Findings"): what goes into `rework`, `follow_ups` and
//! `unresolved_prior_blockers`, each sorted by id and version and listing a finding once.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use verdict_core::contracts::{FindingRef, Outcome, ReasonCode};

const EARLIER: &str = "sha256:4444444444444444444444444444444444444444444444444444444444444444";

fn prior(id: &str, version: u64) -> Value {
    let mut f = finding(id, version, "works", "blocker", "change");
    f["subject_digest"] = Value::from(EARLIER);
    f
}

fn disposition(id: &str, version: u64, kind: &str) -> Value {
    json!({"finding": id, "version": version, "disposition": kind, "evidence_refs": ["ev-unit"]})
}

fn ids(list: &[FindingRef]) -> Vec<(String, u64)> {
    list.iter()
        .map(|f| (f.id.as_str().to_owned(), f.version))
        .collect()
}

fn pair(id: &str, version: u64) -> (String, u64) {
    (id.to_owned(), version)
}

fn second_reviewer(b: &mut Bundle) -> &mut Value {
    let mut v = verification(
        "vr-2",
        "reviewer",
        vec![row("works", "passed", &["ev-unit"])],
    );
    v["verifier"]["principal"] = Value::from("reviewer-2");
    b.push("verifications", v);
    b.v["verifications"]
        .as_array_mut()
        .unwrap()
        .last_mut()
        .unwrap()
}

/// Only scope `change` + severity `blocker` on a required criterion is rework; the same
/// blocker reported by two counted results is listed once; lists are sorted by id, version.
#[test]
fn change_blockers_are_rework_once_and_the_rest_follow_ups() {
    let mut b = Bundle::base();
    b.v["verifications"][0]["findings"] = json!([
        finding("f-b", 1, "works", "blocker", "change"),
        finding("f-a", 2, "works", "blocker", "change"),
        finding("f-a", 1, "works", "blocker", "adjacent"),
        finding("f-c", 1, "works", "blocker", "pre_existing"),
        finding("f-d", 1, "works", "major", "change"),
    ]);
    second_reviewer(&mut b)["findings"] = json!([finding("f-b", 1, "works", "blocker", "change")]);
    let d = b.eval();
    assert_reason(&d, Outcome::Rework, ReasonCode::BlockingFinding);
    assert_eq!(ids(&d.rework), [pair("f-a", 2), pair("f-b", 1)]);
    assert_eq!(
        ids(&d.follow_ups),
        [pair("f-a", 1), pair("f-c", 1), pair("f-d", 1)]
    );
    assert!(d.unresolved_prior_blockers.is_empty());
}

/// Follow-ups never change the outcome.
#[test]
fn adjacent_and_pre_existing_blockers_leave_a_pass() {
    let mut b = Bundle::base();
    b.v["verifications"][0]["findings"] = json!([
        finding("f-a", 1, "works", "blocker", "adjacent"),
        finding("f-b", 1, "works", "blocker", "pre_existing"),
    ]);
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Pass, "{:?}", codes(&d));
    assert_eq!(ids(&d.follow_ups), [pair("f-a", 1), pair("f-b", 1)]);
    assert!(d.rework.is_empty());
}

/// A prior blocker left out stays unresolved; `still_present` is rework and unresolved;
/// `human_required` keeps it unresolved; the strongest outcome wins.
#[test]
fn prior_blockers_by_disposition() {
    let mut b = Bundle::base();
    b.v["prior_findings"] = json!([prior("f-z", 1), prior("f-a", 1), prior("f-m", 3)]);
    b.v["verifications"][0]["dispositions"] = json!([
        disposition("f-z", 1, "still_present"),
        disposition("f-m", 3, "human_required"),
    ]);
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Blocked);
    assert_eq!(
        codes(&d).into_iter().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            ReasonCode::PriorBlockerUnaddressed,
            ReasonCode::PriorBlockerStillPresent,
            ReasonCode::HumanReviewRequired
        ])
    );
    assert_eq!(ids(&d.rework), [pair("f-z", 1)]);
    assert_eq!(
        ids(&d.unresolved_prior_blockers),
        [pair("f-a", 1), pair("f-m", 3), pair("f-z", 1)]
    );
    assert!(d.follow_ups.is_empty());
}

/// Two counted results dispose of one prior blocker differently: the strictest stands, and
/// a disposition that does not count (resolved without refs) never outranks one that does.
#[test]
fn conflicting_dispositions_strictest_counted_stands() {
    let mut b = Bundle::base();
    b.v["prior_findings"] = json!([prior("f-1", 1)]);
    b.v["verifications"][0]["dispositions"] = json!([disposition("f-1", 1, "resolved")]);
    second_reviewer(&mut b)["dispositions"] = json!([disposition("f-1", 1, "still_present")]);
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Rework, "{:?}", codes(&d));
    assert_eq!(ids(&d.unresolved_prior_blockers), [pair("f-1", 1)]);

    let mut b = Bundle::base();
    b.v["prior_findings"] = json!([prior("f-1", 1)]);
    b.v["verifications"][0]["dispositions"] = json!([disposition("f-1", 1, "resolved")]);
    let mut bare = disposition("f-1", 1, "resolved");
    bare["evidence_refs"] = json!([]);
    second_reviewer(&mut b)["dispositions"] = json!([bare]);
    let d = b.eval();
    assert_eq!(d.outcome, Outcome::Pass, "{:?}", codes(&d));
    assert!(d.unresolved_prior_blockers.is_empty());
}
