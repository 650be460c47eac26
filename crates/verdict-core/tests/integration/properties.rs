//! Properties of the Gate over generated bundles: order does not matter, more bad news never
//! makes a decision more lenient, withholding evidence never helps, and nothing panics.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use verdict_core::contracts::{Outcome, ReasonCode};
use verdict_core::gate;

const STATUSES: [&str; 4] = ["passed", "failed", "inconclusive", "not_tested"];
const CLASSES: [&str; 2] = ["reviewer", "security"];

/// A generated bundle: up to 4 criteria, each with a pinned check, a random evidence list, up
/// to 3 verification results with random rows, optional human decisions and a prior blocker.
#[derive(Debug, Clone)]
struct Spec {
    criteria: Vec<(bool, u8, u8)>,    // required, role, weight 1..4
    required_checks: Vec<bool>,       // per criterion's check
    evidence: Vec<(usize, u8, bool)>, // check index, outcome 0..3, time-sensitive
    results: Vec<(usize, Vec<Option<usize>>, i8)>, // class, row status per criterion, generation delta
    humans: Vec<bool>,                             // approve?
    prior: Option<u8>, // disposition kind of the prior blocker, 4 = none
    risk_human: bool,
    required_classes: Vec<bool>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (1usize..=4).prop_flat_map(|n| {
        (
            prop::collection::vec((any::<bool>(), 0u8..3, 1u8..4), n),
            prop::collection::vec(any::<bool>(), n),
            prop::collection::vec((0..n, 0u8..3, any::<bool>()), 0..5),
            prop::collection::vec(
                (
                    0usize..2,
                    prop::collection::vec(prop::option::of(0usize..4), n),
                    -1i8..=0,
                ),
                0..4,
            ),
            prop::collection::vec(any::<bool>(), 0..2),
            prop::option::of(0u8..5),
            any::<bool>(),
            prop::collection::vec(any::<bool>(), 2),
        )
            .prop_map(
                |(
                    criteria,
                    required_checks,
                    evidence,
                    results,
                    humans,
                    prior,
                    risk_human,
                    required_classes,
                )| Spec {
                    criteria,
                    required_checks,
                    evidence,
                    results,
                    humans,
                    prior,
                    risk_human,
                    required_classes,
                },
            )
    })
}

fn build(s: &Spec) -> Bundle {
    let mut b = Bundle::base();
    let roles = ["correctness", "safety", "catastrophic"];
    let items: Vec<Value> = s
        .criteria
        .iter()
        .enumerate()
        .map(|(i, (req, role, w))| json!({"id": format!("c{i}"), "text": "t", "required": req, "role": roles[*role as usize], "weight": w}))
        .collect();
    b.v["subject"]["criteria"]["items"] = json!(items);
    b.v["subject"]["checks"] = json!(
        (0..s.criteria.len()).map(|i| json!({"id": format!("k{i}"), "definition_digest": DEF, "criteria": [format!("c{i}")]})).collect::<Vec<_>>()
    );
    b.v["policy"]["required_checks"] = json!(
        s.required_checks
            .iter()
            .enumerate()
            .filter(|(_, r)| **r)
            .map(|(i, _)| format!("k{i}"))
            .collect::<Vec<_>>()
    );
    b.v["policy"]["required_verifiers"] = json!(
        s.required_classes
            .iter()
            .enumerate()
            .filter(|(_, r)| **r)
            .map(|(i, _)| CLASSES[i])
            .collect::<Vec<_>>()
    );
    if s.risk_human {
        b.v["policy"]["risk"] = json!({"low": {"human": true}});
    }
    b.v["evidence"] = json!(
        s.evidence
            .iter()
            .enumerate()
            .map(|(n, (k, o, timed))| {
                let mut e = evidence(
                    &format!("ev{n}"),
                    &format!("k{k}"),
                    ["pass", "fail", "error"][*o as usize],
                );
                if *timed {
                    e["freshness"] = json!({"kind": "time", "max_age_s": 300});
                }
                e
            })
            .collect::<Vec<_>>()
    );
    b.v["verifications"] = json!(
        s.results
            .iter()
            .enumerate()
            .map(|(n, (class, rows, gen_delta))| {
                let rows: Vec<Value> = rows
                    .iter()
                    .enumerate()
                    .filter_map(|(i, st)| st.map(|st| row(&format!("c{i}"), STATUSES[st], &["diff"])))
                    .collect();
                let mut v = verification(&format!("vr{n}"), CLASSES[*class], rows);
                v["generation"] = json!(3 + i64::from(*gen_delta));
                if let Some(kind) = s.prior.filter(|k| *k < 4) {
                    let d = ["resolved", "still_present", "superseded_by_subject_change", "human_required"][kind as usize];
                    v["dispositions"] = json!([{"finding": "f-old", "version": 1, "disposition": d, "evidence_refs": ["diff"], "reason": "moved"}]);
                }
                v
            })
            .collect::<Vec<_>>()
    );
    b.v["human_decisions"] = json!(
        s.humans
            .iter()
            .enumerate()
            .map(|(n, a)| human(
                &format!("hd{n}"),
                "alice",
                if *a { "approve" } else { "reject" }
            ))
            .collect::<Vec<_>>()
    );
    if s.prior.is_some() {
        let mut f = finding("f-old", 1, "c0", "blocker", "change");
        f["subject_digest"] = json!(CONTENT);
        b.v["prior_findings"] = json!([f]);
    }
    b
}

/// Whether `after` is at least as strict as `before` when only bad news was added. The contract
/// itself lets missing evidence (blocked) become a definite failure (rework) once a failing
/// item fills the gap; anything else must not move toward pass.
fn not_more_lenient(before: Outcome, after: Outcome) -> bool {
    after >= before || (before == Outcome::Blocked && after == Outcome::Rework)
}

fn canonical(b: &Bundle) -> Vec<u8> {
    gate::evaluate(&b.bytes()).canonical_bytes().unwrap()
}

fn assert_no_fault(d: &verdict_core::contracts::GateDecision) {
    assert!(
        !d.reasons.iter().any(|r| r.code == ReasonCode::GateError),
        "gate fault: {d:#?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn any_permutation_gives_the_same_bytes(s in spec(), seed in any::<u64>()) {
        let b = build(&s);
        let before = canonical(&b);
        let mut shuffled = b.clone();
        for (k, field) in ["evidence", "verifications", "human_decisions", "prior_findings"].iter().enumerate() {
            let arr = shuffled.v[*field].as_array_mut().unwrap();
            // A deterministic shuffle driven by the seed.
            let len = arr.len();
            for i in (1..len).rev() {
                let j = ((seed.rotate_left(k as u32 * 7 + i as u32) ^ (i as u64 * 0x9e37_79b9)) % (i as u64 + 1)) as usize;
                arr.swap(i, j);
            }
            arr.reverse();
        }
        prop_assert_eq!(before, canonical(&shuffled));
    }

    #[test]
    fn adding_a_failing_check_never_helps(s in spec(), k in 0usize..4) {
        let b = build(&s);
        let before = b.eval();
        assert_no_fault(&before);
        let mut worse = b.clone();
        let k = k % s.criteria.len();
        worse.push("evidence", evidence("ev-extra-fail", &format!("k{k}"), "fail"));
        let after = worse.eval().outcome;
        prop_assert!(not_more_lenient(before.outcome, after), "{:?} -> {:?}", before.outcome, after);
    }

    // A new verification result can legitimately satisfy a required verifier class, so the
    // baseline is the same bundle plus an empty result of the same class: only the bad news
    // inside the result (a failed row, a blocker) is compared.
    #[test]
    fn adding_a_failing_row_never_helps(s in spec(), c in 0usize..4, class in 0usize..2) {
        let mut neutral = build(&s);
        neutral.push("verifications", verification("vr-extra", CLASSES[class], vec![]));
        let before = neutral.eval().outcome;
        let mut worse = build(&s);
        let c = c % s.criteria.len();
        worse.push("verifications", verification("vr-extra", CLASSES[class], vec![row(&format!("c{c}"), "failed", &["diff"])]));
        let after = worse.eval().outcome;
        prop_assert!(not_more_lenient(before, after), "{before:?} -> {after:?}");
    }

    #[test]
    fn adding_a_change_scoped_blocker_never_helps(s in spec(), c in 0usize..4, class in 0usize..2) {
        let mut neutral = build(&s);
        neutral.push("verifications", verification("vr-extra", CLASSES[class], vec![]));
        let before = neutral.eval().outcome;
        let mut worse = build(&s);
        let c = c % s.criteria.len();
        let mut v = verification("vr-extra", CLASSES[class], vec![]);
        v["findings"] = json!([finding("f-new", 1, &format!("c{c}"), "blocker", "change")]);
        worse.push("verifications", v);
        let after = worse.eval().outcome;
        prop_assert!(not_more_lenient(before, after), "{before:?} -> {after:?}");
    }

    // The case that once slipped past a too-strong property, kept as a plain example: a
    // required reviewer's result that fails only an optional criterion fills the gap and the
    // optional failure never changes the outcome.
    #[test]
    fn a_failed_optional_row_from_a_missing_required_class_can_pass(_x in Just(())) {
        let s = Spec {
            criteria: vec![(false, 0, 1)],
            required_checks: vec![true],
            evidence: vec![(0, 0, false)],
            results: vec![],
            humans: vec![],
            prior: None,
            risk_human: false,
            required_classes: vec![true, false],
        };
        let b = build(&s);
        prop_assert_eq!(b.eval().outcome, Outcome::Blocked);
        let mut after = b.clone();
        after.push("verifications", verification("vr-extra", "reviewer", vec![row("c0", "failed", &["diff"])]));
        prop_assert_eq!(after.eval().outcome, Outcome::Pass);
    }

    #[test]
    fn withholding_required_evidence_never_helps(s in spec(), pick in any::<prop::sample::Index>()) {
        // One evidence item per required check and one result per required class: removing any
        // of them must not make the decision more lenient.
        let mut b = build(&s);
        let req_checks: Vec<String> = b.v["policy"]["required_checks"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_owned()).collect();
        let req_classes: Vec<String> = b.v["policy"]["required_verifiers"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_owned()).collect();
        let mut seen = std::collections::BTreeSet::new();
        let ev: Vec<Value> = b.v["evidence"].as_array().unwrap().iter().filter(|e| seen.insert(e["check"].as_str().unwrap().to_owned())).cloned().collect();
        b.v["evidence"] = json!(ev);
        let mut seen = std::collections::BTreeSet::new();
        let vr: Vec<Value> = b.v["verifications"].as_array().unwrap().iter().filter(|v| seen.insert(v["verifier"]["class"].as_str().unwrap().to_owned())).cloned().collect();
        b.v["verifications"] = json!(vr);
        let before = b.eval().outcome;
        let mut targets = Vec::new();
        for (i, e) in b.v["evidence"].as_array().unwrap().iter().enumerate() {
            if req_checks.iter().any(|c| c == e["check"].as_str().unwrap()) { targets.push(("evidence", i)); }
        }
        for (i, v) in b.v["verifications"].as_array().unwrap().iter().enumerate() {
            if req_classes.iter().any(|c| c == v["verifier"]["class"].as_str().unwrap()) { targets.push(("verifications", i)); }
        }
        if !targets.is_empty() {
            let (field, i) = targets[pick.index(targets.len())];
            let mut less = b.clone();
            less.v[field].as_array_mut().unwrap().remove(i);
            let after = less.eval().outcome;
            prop_assert!(after >= before, "removing {field}[{i}] went from {before:?} to {after:?}");
        }
    }

    // A human approval may clear only `human_required` reasons, so with one in the
    // bundle an inconclusive required criterion can still pass; a failed or untested one never.
    #[test]
    fn pass_implies_every_required_criterion_passed(s in spec()) {
        use verdict_core::contracts::CriterionStatus;
        let d = build(&s).eval();
        let approved = s.humans.iter().any(|a| *a);
        if d.outcome == Outcome::Pass {
            for c in d.criteria.iter().filter(|c| c.required) {
                let allowed = c.status == CriterionStatus::Passed
                    || (approved && c.status == CriterionStatus::Inconclusive);
                prop_assert!(allowed, "{} is {:?} in a pass (approved: {approved})", c.id, c.status);
            }
        }
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(|n| json!(n)),
        "[a-z0-9:$-]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer into a value.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, x)| pointers(x, format!("{at}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, x)| pointers(x, format!("{at}/{i}"), out)),
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bundles_never_fault(s in spec(), which in any::<prop::sample::Index>(), replacement in arb_json()) {
        // Replace one random node of a generated bundle with random JSON.
        let mut v = build(&s).value();
        let mut ptrs = Vec::new();
        pointers(&v, String::new(), &mut ptrs);
        let p = &ptrs[which.index(ptrs.len())];
        if p.is_empty() { v = replacement; } else if let Some(slot) = v.pointer_mut(p) { *slot = replacement; }
        let d = gate::evaluate(&serde_json::to_vec(&v).unwrap());
        assert_no_fault(&d);
        prop_assert!(d.canonical_bytes().is_ok());
    }

    #[test]
    fn random_bytes_never_fault(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let d = gate::evaluate(&bytes);
        assert_no_fault(&d);
        prop_assert_eq!(d.outcome, Outcome::Blocked);
    }
}

/// The decision the strict way only: the JSON tree first, then the documents read from it.
/// Bytes the strict reader refuses have one way only.
fn strict_bytes(bytes: &[u8]) -> Vec<u8> {
    match verdict_core::json::parse(bytes) {
        Ok(v) => gate::evaluate_value(&v).canonical_bytes().unwrap(),
        Err(_) => gate::evaluate(bytes).canonical_bytes().unwrap(),
    }
}

/// A carried digest on the first evidence item: its own (`right`) or another's.
fn carry_digest(v: &mut Value, right: bool) {
    if let Some(e) = v
        .get_mut("evidence")
        .and_then(Value::as_array_mut)
        .and_then(|a| a.first_mut())
        .filter(|e| e.is_object())
    {
        let d = verdict_core::digest::digest(verdict_core::digest::DigestKind::Evidence, e);
        e["digest"] = json!(if right {
            d.to_string()
        } else {
            CONTENT.to_owned()
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// `evaluate` reads a clean bundle without a JSON tree; whatever it reads that way must be
    /// decided exactly as the strict way decides it, and so must everything it hands over.
    #[test]
    fn both_ways_of_reading_give_the_same_bytes(
        s in spec(),
        damage in prop::option::of((any::<prop::sample::Index>(), arb_json())),
        pretty: bool,
        carried in prop::option::of(any::<bool>()),
    ) {
        let mut v = build(&s).value();
        if let Some((which, replacement)) = damage {
            let mut ptrs = Vec::new();
            pointers(&v, String::new(), &mut ptrs);
            let p = &ptrs[which.index(ptrs.len())];
            if p.is_empty() { v = replacement; } else if let Some(slot) = v.pointer_mut(p) { *slot = replacement; }
        }
        if let Some(right) = carried {
            carry_digest(&mut v, right);
        }
        let bytes = if pretty { serde_json::to_vec_pretty(&v) } else { serde_json::to_vec(&v) }.unwrap();
        let fast = gate::evaluate(&bytes).canonical_bytes().unwrap();
        prop_assert_eq!(String::from_utf8(fast).unwrap(), String::from_utf8(strict_bytes(&bytes)).unwrap());
    }
}
