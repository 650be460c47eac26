//! The Gate is deterministic (docs/spec/gate.md): one bundle always gives the same bytes,
//! policy rules included. CEL leaves a map's iteration order open, and the evaluator's maps
//! iterate differently in every process and every build of the context.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use std::collections::BTreeSet;
use verdict_core::contracts::{Outcome, ReasonCode as R};

fn with_rule(when: &str) -> Bundle {
    let mut b = Bundle::base();
    for i in 0..6 {
        b.add_criterion(json!({"id": format!("c{i}"), "text": "x", "required": false}));
    }
    b.v["policy"]["rules"] = json!([{"id": "r", "when": when, "outcome": "rework", "reason": "x"}]);
    b
}

/// Each rule is evaluated many times; every decision must be the same bytes.
#[test]
fn rules_over_maps_decide_the_same_every_time() {
    for when in [
        "criteria.map(k, k)[0] == 'works'",
        "criteria.filter(k, criteria[k] == 'not_tested')[0] == 'c0'",
        "criteria.all(k, k == 'works' ? int(k) > 0 : false)",
        "criteria",
        "criteria + 1",
        "criteria.startsWith('c')",
        "scores < 1",
        "criteria.all(k, criteria[k] == 'passed')",
    ] {
        let b = with_rule(when);
        let seen: BTreeSet<Vec<u8>> = (0..40)
            .map(|_| b.eval().canonical_bytes().unwrap())
            .collect();
        assert_eq!(seen.len(), 1, "{when}: {} different decisions", seen.len());
    }
}

/// A macro over a map ranges over its keys in sorted order.
#[test]
fn a_map_is_iterated_in_key_order() {
    let d = with_rule("criteria.map(k, k)[0] == 'c0'").eval();
    assert_reason(&d, Outcome::Rework, R::PolicyRule);
    let d = with_rule("criteria.map(k, k) == ['c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'works']").eval();
    assert_reason(&d, Outcome::Rework, R::PolicyRule);
    // Lists keep their own order.
    let d = with_rule("['b', 'a'].map(x, x)[0] == 'b'").eval();
    assert_reason(&d, Outcome::Rework, R::PolicyRule);
}

/// A rule that yields a map is a gate error whose detail names the type, not the value.
#[test]
fn a_non_bool_result_is_described_by_its_type() {
    let d = with_rule("criteria").eval();
    assert_reason(&d, Outcome::Blocked, R::GateError);
    assert!(
        d.reasons[0]
            .detail
            .ends_with("expression yields a map, expected a bool"),
        "{}",
        d.reasons[0].detail
    );
}

/// CEL's parser and evaluator recurse once per nesting level with large frames: a rule nested a
/// dozen brackets deep, or a chain of a thousand operators, overflowed the stack and aborted the
/// process. The Gate is total: such a rule is refused like one that does not compile.
#[test]
fn rules_too_deep_for_the_parser_are_refused_not_fatal() {
    let deep = |n: usize| format!("{}true{}", "(".repeat(n), ")".repeat(n));
    let hidden = [
        deep(12),
        deep(1000),
        format!("{}1{} == 1", "[".repeat(40), "]".repeat(40)),
        format!("{}1{} == 1", "size(".repeat(40), ")".repeat(40)),
        format!("{} == 0", vec!["1"; 2000].join("+")),
        format!("{} == 0", vec!["1"; 60].join("+")),
        format!("has(policy{})", ".x".repeat(2000)),
        // Brackets a sloppy scanner would take for string content.
        format!("'abc {}", deep(40)),
        format!("'abc\n' == {}", deep(40)),
        format!("'\\q' == {}", deep(40)),
        format!("1r'\\' == {}'", deep(40)),
    ];
    for when in hidden {
        let d = with_rule(&when).eval();
        assert_reason(&d, Outcome::Blocked, R::InvalidInput);
    }
}

/// Rules within the bounds still work, at the bounds too, and brackets inside string literals
/// and comments do not count.
#[test]
fn rules_within_the_bounds_evaluate() {
    let fires = [
        "(((((true)))))".to_owned(),
        format!("((((({} == 25)))))", vec!["1"; 25].join("+")),
        "required.all(k, required.exists(j, criteria[k] == criteria[j] && (j in required)))"
            .to_owned(),
        "'(((((((((((' != 'x'".to_owned(),
        "r'\\' == '\\\\'".to_owned(),
        "'''a'b((((((((''' != '' // ((((((((((((\n && true".to_owned(),
        "[[[[[1]]]]] == [[[[[1]]]]]".to_owned(),
    ];
    for when in fires {
        assert!(when.len() <= 512, "{}", when.len());
        let d = with_rule(&when).eval();
        assert_reason(&d, Outcome::Rework, R::PolicyRule);
    }
}

/// The producer decides how many criteria a subject has: three nested macros over 200 of them
/// are 8 million iterations, which ran for half a minute. A rule's work is bounded (100,000
/// iterations, nested macros counted in full): past it the rule is a `gate_error`, also where
/// `||` would have absorbed the refusal, and the same bundle always decides the same. Two
/// nested macros over the same subject (40,000 iterations) still evaluate.
#[test]
fn a_rule_that_iterates_without_bound_over_a_large_subject_is_a_gate_error() {
    let mut b = Bundle::base();
    for i in 0..200 {
        b.add_criterion(json!({"id": format!("c{i}"), "text": "x", "required": false}));
    }
    for when in [
        "criteria.all(a, criteria.all(b, criteria.all(c, a != '')))",
        "criteria.exists(a, criteria.exists(b, criteria.exists(c, a == 'none'))) || true",
    ] {
        b.v["policy"]["rules"] =
            json!([{"id": "r", "when": when, "outcome": "rework", "reason": "x"}]);
        let d = b.eval();
        assert_reason(&d, Outcome::Blocked, R::GateError);
        assert!(
            d.reasons[0]
                .detail
                .contains("more than 100000 loop iterations"),
            "{}",
            d.reasons[0].detail
        );
        assert_eq!(b.eval(), d, "the same bundle decides the same");
    }
    b.v["policy"]["rules"] = json!([{"id": "r",
        "when": "criteria.all(a, criteria.all(b, a != ''))", "outcome": "rework", "reason": "x"}]);
    assert_reason(&b.eval(), Outcome::Rework, R::PolicyRule);
}
