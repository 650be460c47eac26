//! The Gate benchmark's bundles, built one way for every bench that measures them: verdict-core's
//! own (`gate.rs`) and the regorus baseline (`bench/regorus-baseline`), which includes this file,
//! so both always time the same input.

use serde_json::{Value, json};
use verdict_core::digest::{DigestKind, digest};

const DEF: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const CONTENT: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

/// A passing bundle with `n` criteria, `e` check evidence and `r` verifier results.
pub fn bundle(n: usize, e: usize, r: usize) -> Value {
    const ROLES: [&str; 3] = ["correctness", "safety", "catastrophic"];
    let criteria: Vec<Value> = (0..n)
        .map(|i| {
            let role = ROLES.get(i % 3).copied().unwrap_or("correctness");
            json!({"id": format!("c-{i}"), "text": format!("criterion {i} holds"), "role": role, "weight": 1 + i % 4})
        })
        .collect();
    let checks: Vec<Value> = (0..e)
        .map(|i| json!({"id": format!("k-{i}"), "definition_digest": DEF, "criteria": [format!("c-{}", i % n.max(1))]}))
        .collect();
    let subject = json!({
        "schema": "verdict.subject/v1", "mission": "m-1",
        "execution": {"id": "ex-1", "generation": 1},
        "work_items": [{"kind": "work_package", "id": "wp-1", "version": "1"}],
        "producer": {"principal": "agent", "run": "run-1"},
        "objective": {"revision": "o1", "digest": CONTENT},
        "criteria": {"revision": "c1", "items": criteria},
        "resources": [{"name": "diff", "kind": "git_diff", "digest": CONTENT}],
        "checks": checks, "workflow_revision": "wf-1",
        "risk": {"class": "low", "revision": "r1", "capabilities": []}
    });
    let s = digest(DigestKind::Subject, &subject).to_string();
    let evidence: Vec<Value> = (0..e)
        .map(|i| json!({
            "id": format!("ev-{i}"), "kind": "check", "check": format!("k-{i}"), "subject_digest": s, "definition_digest": DEF,
            "produced_by": {"principal": "ci", "role": "runner"}, "outcome": "pass", "content_digest": CONTENT,
            "observed_at": "2026-11-30T11:59:00Z", "freshness": {"kind": "time", "max_age_s": 900}
        }))
        .collect();
    let classes: Vec<String> = (0..r).map(|i| format!("class-{i}")).collect();
    let verifications: Vec<Value> = classes
        .iter()
        .enumerate()
        .map(|(i, class)| json!({
            "id": format!("vr-{i}"), "verifier": {"principal": format!("v-{i}"), "class": class, "run": format!("vrun-{i}")},
            "subject_digest": s, "generation": 1, "status": "completed",
            "criteria": (0..n).map(|j| json!({"id": format!("c-{j}"), "status": "passed", "method": "review", "evidence_refs": ["diff"]})).collect::<Vec<_>>(),
            "findings": [], "dispositions": []
        }))
        .collect();
    json!({
        "schema": "verdict.gate-bundle/v1",
        "policy": {"schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                   "required_checks": (0..e).map(|i| format!("k-{i}")).collect::<Vec<_>>(), "required_verifiers": classes},
        "subject": subject, "evidence": evidence, "verifications": verifications,
        "human_decisions": [], "prior_findings": [], "now": "2026-11-30T12:00:00Z"
    })
}
