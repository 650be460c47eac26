//! The scores of docs/spec/decision.md, recomputed from the formula as written:
//! `c = Σweight·[passed] / Σweight` over required correctness criteria, `rec_v` the same over
//! safety ones, summed in the subject's order.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;

/// `Σweight·[passed] / Σweight` with plain doubles, in order.
fn formula(rows: &[(f64, bool)]) -> f64 {
    let total: f64 = rows.iter().fold(0.0, |s, (w, _)| s + w);
    let passed: f64 = rows
        .iter()
        .fold(0.0, |s, (w, p)| if *p { s + w } else { s });
    passed / total
}

/// A bundle whose required criteria have these weights and roles; the reviewer passes those
/// marked passed and fails the others (the base criterion "works" stays, weight 1, passed).
fn bundle(criteria: &[(&str, f64, &str, bool)]) -> Bundle {
    let mut b = Bundle::base();
    for (id, w, role, passed) in criteria {
        b.add_criterion(json!({"id": id, "text": id, "weight": w, "role": role}));
        let status = if *passed { "passed" } else { "failed" };
        b.v["verifications"][0]["criteria"]
            .as_array_mut()
            .unwrap()
            .push(row(id, status, &["diff"]));
    }
    b
}

#[test]
fn scores_equal_the_formula_to_the_last_bit() {
    // "works" is correctness, weight 1, passed.
    let cases: &[&[(&str, f64, &str, bool)]] = &[
        &[("slow", 9.0, "correctness", false)],
        &[("a", 5.0, "correctness", false)],
        &[("s1", 2.0, "safety", false), ("s2", 3.0, "safety", true)],
        &[("s1", 1.5, "safety", false), ("s2", 0.7, "safety", true)],
        &[
            ("a", 0.1, "correctness", true),
            ("b", 0.2, "correctness", false),
            ("c", 0.7, "correctness", true),
        ],
    ];
    for criteria in cases {
        let d = bundle(criteria).eval();
        let mut c_rows = vec![(1.0, true)];
        let mut s_rows = Vec::new();
        for (_, w, role, passed) in *criteria {
            if *role == "safety" {
                s_rows.push((*w, *passed));
            } else {
                c_rows.push((*w, *passed));
            }
        }
        assert_eq!(d.scores.c, Some(formula(&c_rows)), "c for {criteria:?}");
        let want_rec = (!s_rows.is_empty()).then(|| formula(&s_rows));
        assert_eq!(d.scores.rec_v, want_rec, "rec_v for {criteria:?}");
    }
}

#[test]
fn one_in_ten_is_exactly_a_tenth() {
    let d = bundle(&[("slow", 9.0, "correctness", false)]).eval();
    assert_eq!(d.scores.c, Some(0.1));
    let text = String::from_utf8(d.canonical_bytes().unwrap()).unwrap();
    assert!(text.contains("\"c\":0.1,"), "{text}");
}
