//! The Rego decision follows docs/spec/gate.md on the benchmark bundle and on small changes to
//! it, and agrees with verdict's own Gate on outcome, reason codes and criterion statuses.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    missing_docs
)]

use regorus_baseline::{bundle, decide, engine, outcome, reasons, rego_input, statuses};
use serde_json::{Value, json};
use verdict_core::digest::{DigestKind, digest};
use verdict_core::gate;

/// (outcome, sorted unique reason codes, criterion statuses) as the Rego policy decides.
fn rego(b: &Value) -> (String, Vec<String>, Vec<String>) {
    let mut e = engine().unwrap();
    e.set_input(rego_input(b).unwrap());
    let d = decide(&mut e).unwrap();
    (outcome(&d).unwrap().to_owned(), reasons(&d), statuses(&d))
}

/// The same triple as verdict's Gate decides.
fn verdict(b: &Value) -> (String, Vec<String>, Vec<String>) {
    let d: Value =
        serde_json::from_slice(&gate::evaluate_value(b).canonical_bytes().unwrap()).unwrap();
    let mut codes: Vec<String> = d["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["code"].as_str().unwrap().to_owned())
        .collect();
    codes.sort();
    codes.dedup();
    let statuses = d["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap().to_owned())
        .collect();
    (d["outcome"].as_str().unwrap().to_owned(), codes, statuses)
}

fn typical() -> Value {
    bundle(20, 10, 3)
}

/// Replaces the subject and rewrites every item's subject digest to the new one, so the
/// change under test is the only one.
fn with_subject(mut b: Value, change: impl FnOnce(&mut Value)) -> Value {
    change(&mut b["subject"]);
    let s = json!(digest(DigestKind::Subject, &b["subject"]).to_string());
    for list in ["evidence", "verifications"] {
        for item in b[list].as_array_mut().unwrap() {
            item["subject_digest"] = s.clone();
        }
    }
    b
}

/// The typical bundle with a high-risk subject whose policy asks for a human.
fn high_risk() -> Value {
    let mut b = with_subject(typical(), |s| s["risk"]["class"] = json!("high"));
    b["policy"]["risk"] = json!({"high": {"human": true}});
    b
}

/// A human decision bound to the bundle's subject and policy.
fn human(b: &Value, decision: &str, principal: &str) -> Value {
    json!({
        "id": format!("hd-{principal}"), "principal": principal, "role": "human",
        "subject_digest": digest(DigestKind::Subject, &b["subject"]).to_string(),
        "policy_digest": digest(DigestKind::Policy, &b["policy"]).to_string(),
        "decision": decision, "reason": "read the change", "decided_at": "2026-11-30T11:58:00Z"
    })
}

/// The typical bundle with one prior blocker, and the first verifier's dispositions of it.
fn with_prior(dispositions: Value) -> Value {
    let mut b = typical();
    b["prior_findings"] = json!([{
        "id": "f-0", "version": 1, "criterion": "c-0", "type": "bug", "severity": "blocker",
        "scope": "change",
        "subject_digest": "sha256:6666666666666666666666666666666666666666666666666666666666666666",
        "evidence_refs": ["diff"], "method": "review"
    }]);
    b["verifications"][0]["dispositions"] = dispositions;
    b
}

#[test]
fn benchmark_bundle_passes_with_every_criterion_passed() {
    let (o, codes, s) = rego(&typical());
    assert_eq!(o, "pass");
    assert!(codes.is_empty(), "{codes:?}");
    assert_eq!(s.len(), 20);
    assert!(s.iter().all(|x| x == "passed"), "{s:?}");
}

#[test]
fn one_failing_check_evidence_is_rework() {
    let mut b = typical();
    b["evidence"][3]["outcome"] = json!("fail");
    let (o, codes, s) = rego(&b);
    // A required check failed: rework, and the verifiers' passed on c-3 is a contradiction.
    assert_eq!(o, "rework");
    for code in ["check_failed", "contradiction", "criterion_failed"] {
        assert!(
            codes.iter().any(|c| c == code),
            "{code} missing from {codes:?}"
        );
    }
    assert_eq!(s[3], "failed");
    assert!(
        s.iter().enumerate().all(|(i, x)| i == 3 || x == "passed"),
        "{s:?}"
    );
}

#[test]
fn missing_required_verifier_class_is_not_pass() {
    let mut b = typical();
    b["verifications"].as_array_mut().unwrap().pop();
    let (o, codes, _) = rego(&b);
    assert_ne!(o, "pass");
    assert_eq!(o, "blocked");
    assert_eq!(codes, ["verifier_missing"]);
}

#[test]
fn agrees_with_verdict_on_outcome_reasons_and_statuses() {
    let cases: Vec<(&str, Value)> = vec![
        ("passing bundle", typical()),
        ("failing check", {
            let mut b = typical();
            b["evidence"][3]["outcome"] = json!("fail");
            b
        }),
        ("soft failing check", {
            let mut b = typical();
            b["evidence"][3]["outcome"] = json!("fail");
            b["evidence"][3]["hard"] = json!(false);
            b
        }),
        ("erroring check", {
            let mut b = typical();
            b["evidence"][0]["outcome"] = json!("error");
            b
        }),
        ("missing verifier class", {
            let mut b = typical();
            b["verifications"].as_array_mut().unwrap().pop();
            b
        }),
        ("missing check evidence", {
            let mut b = typical();
            b["evidence"].as_array_mut().unwrap().pop();
            b
        }),
        ("stale evidence", {
            let mut b = typical();
            b["evidence"][2]["observed_at"] = json!("2026-11-30T11:40:00Z");
            b
        }),
        ("evidence from the future", {
            let mut b = typical();
            b["evidence"][2]["observed_at"] = json!("2026-11-30T12:05:01Z");
            b
        }),
        ("content freshness never goes stale", {
            let mut b = typical();
            b["evidence"][2]["observed_at"] = json!("2020-01-01T00:00:00Z");
            b["evidence"][2]["freshness"] = json!({"kind": "content"});
            b
        }),
        ("definition mismatch", {
            let mut b = typical();
            b["evidence"][1]["definition_digest"] =
                json!("sha256:2222222222222222222222222222222222222222222222222222222222222222");
            b
        }),
        ("evidence about another subject", {
            let mut b = typical();
            b["evidence"][1]["subject_digest"] =
                json!("sha256:4444444444444444444444444444444444444444444444444444444444444444");
            b
        }),
        ("producer acting as runner", {
            let mut b = typical();
            b["evidence"][1]["produced_by"]["principal"] = json!("agent");
            b
        }),
        ("producer acting as verifier", {
            let mut b = typical();
            b["verifications"][0]["verifier"]["principal"] = json!("agent");
            b
        }),
        ("verifier row failed", {
            let mut b = typical();
            b["verifications"][1]["criteria"][5]["status"] = json!("failed");
            b
        }),
        ("verifier row inconclusive", {
            let mut b = typical();
            b["verifications"][1]["criteria"][5]["status"] = json!("inconclusive");
            b
        }),
        ("contradiction decided by policy", {
            let mut b = typical();
            b["verifications"][1]["criteria"][5]["status"] = json!("failed");
            b["policy"]["on_contradiction"] = json!("blocked");
            b
        }),
        ("pass citing a foreign ref", {
            let mut b = typical();
            b["verifications"][1]["criteria"][5]["evidence_refs"] = json!(["nowhere"]);
            b
        }),
        ("pass from an incomplete context", {
            let mut b = typical();
            b["verifications"][1]["context"] = json!({
                "digest": "sha256:5555555555555555555555555555555555555555555555555555555555555555",
                "complete": false
            });
            b
        }),
        ("pass without refs from an incomplete context", {
            let mut b = typical();
            b["verifications"][1]["context"] = json!({
                "digest": "sha256:5555555555555555555555555555555555555555555555555555555555555555",
                "complete": false
            });
            b["verifications"][1]["criteria"][5]["evidence_refs"] = json!([]);
            b
        }),
        ("change-scoped blocker", {
            let mut b = typical();
            let s = b["verifications"][0]["subject_digest"].clone();
            b["verifications"][0]["findings"] = json!([{
                "id": "f-1", "version": 1, "criterion": "c-2", "type": "bug",
                "severity": "blocker", "scope": "change", "subject_digest": s,
                "evidence_refs": ["diff"], "method": "review"
            }]);
            b
        }),
        ("high risk needs a human", high_risk()),
        ("high risk approved by a human", {
            let mut b = high_risk();
            b["human_decisions"] = json!([human(&b, "approve", "alice")]);
            b
        }),
        ("high risk approved by the producer", {
            let mut b = high_risk();
            b["human_decisions"] = json!([human(&b, "approve", "agent")]);
            b
        }),
        ("human rejection", {
            let mut b = typical();
            b["human_decisions"] = json!([human(&b, "reject", "alice")]);
            b
        }),
        ("prior blocker unaddressed", with_prior(json!([]))),
        (
            "prior blocker resolved with refs",
            with_prior(json!([
                {"finding": "f-0", "version": 1, "disposition": "resolved", "evidence_refs": ["ev-0"]}
            ])),
        ),
        (
            "prior blocker resolved without refs",
            with_prior(json!([
                {"finding": "f-0", "version": 1, "disposition": "resolved", "evidence_refs": []}
            ])),
        ),
        (
            "prior blocker still present",
            with_prior(json!([
                {"finding": "f-0", "version": 1, "disposition": "still_present", "evidence_refs": []}
            ])),
        ),
        (
            "prior blocker needs a human",
            with_prior(json!([
                {"finding": "f-0", "version": 1, "disposition": "human_required", "evidence_refs": []}
            ])),
        ),
        ("verifier unavailable", {
            let mut b = typical();
            b["verifications"][2]["status"] = json!("unavailable");
            b["verifications"][2]["unavailable_reason"] = json!("timeout");
            b
        }),
        ("row missing for a required criterion", {
            let mut b = typical();
            b["verifications"][2]["criteria"]
                .as_array_mut()
                .unwrap()
                .pop();
            b
        }),
        ("unknown criterion in a result", {
            let mut b = typical();
            b["verifications"][2]["criteria"][0]["id"] = json!("c-99");
            b
        }),
        ("older generation", {
            let b = with_subject(typical(), |s| s["execution"]["generation"] = json!(2));
            let mut b = b;
            for v in b["verifications"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .skip(1)
            {
                v["generation"] = json!(2);
            }
            b
        }),
        ("optional criterion not tested", {
            let mut b = with_subject(typical(), |s| {
                s["criteria"]["items"][19]["required"] = json!(false);
            });
            for v in b["verifications"].as_array_mut().unwrap() {
                v["criteria"].as_array_mut().unwrap().pop();
            }
            b
        }),
        ("required criterion not tested", {
            let mut b = with_subject(typical(), |s| {
                s["criteria"]["items"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"id": "c-new", "text": "new"}));
            });
            b["policy"]["required_verifiers"] = json!([]);
            b
        }),
        ("nothing to verify", {
            let mut b = typical();
            b["policy"]["required_checks"] = json!([]);
            b["policy"]["required_verifiers"] = json!([]);
            b["policy"]["optional_criteria"] =
                json!((0..20).map(|i| format!("c-{i}")).collect::<Vec<_>>());
            b
        }),
    ];
    let mut disagreements = Vec::new();
    for (name, b) in &cases {
        let (r, v) = (rego(b), verdict(b));
        if r != v {
            disagreements.push(format!("{name}:\n  rego    {r:?}\n  verdict {v:?}"));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}
