//! Two decisions with the same evaluation key are the same bytes (docs/spec/decision.md). Each case gives
//! two bundles that the Gate must either key apart or decide to the same bytes.
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
use verdict_core::digest::{DigestKind, digest};

/// Equal keys must mean byte-identical decisions.
fn assert_key_law(a: &Bundle, b: &Bundle) {
    let (da, db) = (a.eval(), b.eval());
    if da.evaluation_key.is_some() && da.evaluation_key == db.evaluation_key {
        assert_eq!(
            String::from_utf8(da.canonical_bytes().unwrap()).unwrap(),
            String::from_utf8(db.canonical_bytes().unwrap()).unwrap(),
            "equal evaluation keys, different decisions"
        );
    }
}

/// Future-dated evidence at two different `now`s: the same items are future-dated in both, so
/// the keys are equal, and the decisions must be too (no detail may name `now`).
#[test]
fn future_dated_evidence_at_two_nows() {
    let mut a = Bundle::base();
    a.v["evidence"][0]["observed_at"] = json!("2026-11-30T12:20:00Z");
    let mut b = a.clone();
    b.v["now"] = json!("2026-11-30T12:00:10Z");
    let (da, db) = (a.eval(), b.eval());
    assert_reason(&da, Outcome::Blocked, R::EvidenceFromFuture);
    assert_reason(&db, Outcome::Blocked, R::EvidenceFromFuture);
    assert_eq!(da.evaluation_key, db.evaluation_key);
    assert_key_law(&a, &b);
}

/// The same time-sensitive evidence is future-dated at one `now` and stale at a later one:
/// two different decisions, so the keys must differ.
#[test]
fn future_at_one_now_stale_at_another() {
    let mut a = Bundle::base();
    a.v["evidence"][0]["observed_at"] = json!("2026-11-30T12:20:00Z");
    a.v["evidence"][0]["freshness"] = json!({"kind": "time", "max_age_s": 1});
    let mut b = a.clone();
    b.v["now"] = json!("2026-11-30T13:00:00Z");
    assert_reason(&a.eval(), Outcome::Blocked, R::EvidenceFromFuture);
    assert_reason(&b.eval(), Outcome::Blocked, R::EvidenceStale);
    assert_key_law(&a, &b);
}

/// A document is hashed without its carried digest (docs/spec/encoding.md), so an item with a wrong carried digest
/// and the same item carrying none have the same digest; one decision is `evidence_tampered`,
/// the other is not, so the keys must differ.
#[test]
fn tampered_item_and_the_same_item_without_a_carried_digest() {
    let clean = Bundle::base();
    let mut tampered = Bundle::base();
    let mut ev = clean.value()["evidence"][0].clone();
    ev["digest"] = json!(CONTENT); // not this document's digest
    tampered.v["evidence"] = json!([ev]);
    let d = tampered.eval();
    assert_reason(&d, Outcome::Blocked, R::EvidenceTampered);
    assert_eq!(clean.eval().outcome, Outcome::Pass);
    assert_key_law(&clean, &tampered);
}

/// Two different wrong carried digests on the same document: the tamper reports differ, so the
/// keys must differ too.
#[test]
fn two_different_forged_digests_on_one_item() {
    let base = Bundle::base();
    let ev = base.value()["evidence"][0].clone();
    let mut a = Bundle::base();
    let mut b = Bundle::base();
    let mut ea = ev.clone();
    ea["digest"] = json!(CONTENT);
    let mut eb = ev;
    eb["digest"] = json!(OTHER_DEF);
    a.v["evidence"] = json!([ea]);
    b.v["evidence"] = json!([eb]);
    assert_key_law(&a, &b);
}

/// A carried digest that matches changes neither the key nor the decision.
#[test]
fn an_intact_carried_digest_keys_like_none() {
    let clean = Bundle::base();
    let mut carried = Bundle::base();
    let mut ev = clean.value()["evidence"][0].clone();
    ev["digest"] = json!(digest(DigestKind::Evidence, &ev).as_str());
    carried.v["evidence"] = json!([ev]);
    let (a, b) = (clean.eval(), carried.eval());
    assert_eq!(a.evaluation_key, b.evaluation_key);
    assert_eq!(a.canonical_bytes().unwrap(), b.canonical_bytes().unwrap());
}

/// Two items whose forged values are swapped between them: the same evidence set and the same
/// forged values, but each report names another pair, so the keys must differ.
#[test]
fn forged_values_swapped_between_two_items() {
    let mut base = Bundle::base();
    base.push("evidence", evidence("ev-more", "unit", "pass"));
    let items = base.value()["evidence"].clone();
    let (mut a, mut b) = (Bundle::base(), Bundle::base());
    let mut ia = items.clone();
    ia[0]["digest"] = json!(CONTENT);
    ia[1]["digest"] = json!(OTHER_DEF);
    let mut ib = items;
    ib[0]["digest"] = json!(OTHER_DEF);
    ib[1]["digest"] = json!(CONTENT);
    a.v["evidence"] = ia;
    b.v["evidence"] = ib;
    assert_reason(&a.eval(), Outcome::Blocked, R::EvidenceTampered);
    assert_ne!(a.eval().evaluation_key, b.eval().evaluation_key);
    assert_key_law(&a, &b);
}

/// A tampered copy of a document next to an intact copy: reported whichever comes first, and the
/// two orders give the same decision bytes.
#[test]
fn a_tampered_copy_is_reported_in_either_order() {
    let base = Bundle::base();
    let intact = base.value()["evidence"][0].clone();
    let mut forged = intact.clone();
    forged["digest"] = json!(CONTENT);
    let decisions: Vec<_> = [
        json!([intact.clone(), forged.clone()]),
        json!([forged, intact]),
    ]
    .into_iter()
    .map(|items| {
        let mut b = Bundle::base();
        b.v["evidence"] = items;
        let d = b.eval();
        assert_reason(&d, Outcome::Blocked, R::EvidenceTampered);
        d.canonical_bytes().unwrap()
    })
    .collect();
    assert_eq!(decisions[0], decisions[1]);
}

/// With nothing dated in the future and nothing tampered, the key is exactly the four-member formula,
/// `stale` holding the ids of stale evidence.
#[test]
fn the_key_is_the_contract_formula_for_stale_evidence() {
    let mut b = Bundle::base();
    b.v["evidence"][0]["freshness"] = json!({"kind": "time", "max_age_s": 1});
    let d = b.eval();
    assert_reason(&d, Outcome::Blocked, R::EvidenceStale);
    let want = digest(
        DigestKind::Evaluation,
        &json!({
            "policy": b.policy_digest(),
            "subject": b.subject_digest(),
            "evidence_set": d.evidence_set_digest.as_ref().unwrap().as_str(),
            "stale": ["ev-unit"],
        }),
    );
    assert_eq!(d.evaluation_key.as_ref(), Some(&want));
}
