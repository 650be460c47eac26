//! The Gate decision of CONTRACTS.md §6 written in Rego (`gate.rego`) and run by regorus over
//! input converted beforehand, as a measured baseline for verdict's own Gate benchmark.

use regorus::Engine;
use serde_json::{Value, json};
use verdict_core::digest::{DigestKind, digest};

/// The policy, compiled into the crate so the benchmark reads no file.
pub const POLICY: &str = include_str!("../gate.rego");

/// The rule that holds the decision.
pub const DECISION_RULE: &str = "data.verdict.gate.decision";

/// Why the policy could not be loaded or evaluated.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// regorus refused the policy.
    #[error("policy does not load: {0}")]
    Policy(String),
    /// The bundle lacks a document whose digest the policy needs.
    #[error("bundle has no {0}")]
    Missing(&'static str),
    /// regorus failed while evaluating; verdict's Gate would decide `blocked` (`gate_error`).
    #[error("evaluation failed: {0}")]
    Eval(String),
}

/// An engine with the Gate policy loaded and no input yet.
pub fn engine() -> Result<Engine, Error> {
    let mut engine = Engine::new();
    engine
        .add_policy("gate.rego".to_owned(), POLICY.to_owned())
        .map_err(|e| Error::Policy(e.to_string()))?;
    Ok(engine)
}

/// The bundle as Rego input: the bundle itself plus `subject_digest` and `policy_digest`, which
/// the policy cannot compute (verdict's own Gate computes them before deciding, too).
pub fn rego_input(bundle: &Value) -> Result<regorus::Value, Error> {
    let subject = bundle.get("subject").ok_or(Error::Missing("subject"))?;
    let policy = bundle.get("policy").ok_or(Error::Missing("policy"))?;
    let mut input = bundle.clone();
    if let Some(map) = input.as_object_mut() {
        map.insert(
            "subject_digest".to_owned(),
            Value::String(digest(DigestKind::Subject, subject).to_string()),
        );
        map.insert(
            "policy_digest".to_owned(),
            Value::String(digest(DigestKind::Policy, policy).to_string()),
        );
    }
    Ok(regorus::Value::from(input))
}

/// Evaluates the decision over the engine's current input.
pub fn decide(engine: &mut Engine) -> Result<regorus::Value, Error> {
    engine
        .eval_rule(DECISION_RULE.to_owned())
        .map_err(|e| Error::Eval(e.to_string()))
}

/// The decision's outcome, if it has one.
pub fn outcome(decision: &regorus::Value) -> Option<&str> {
    decision["outcome"].as_string().ok().map(|s| &**s)
}

/// The decision's criteria statuses, in the subject's order.
pub fn statuses(decision: &regorus::Value) -> Vec<String> {
    decision["criteria"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c["status"].as_string().ok().map(|s| s.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The decision's reason codes, sorted.
pub fn reasons(decision: &regorus::Value) -> Vec<String> {
    decision["reasons"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_string().ok().map(|s| s.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

const DEF: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const CONTENT: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";

/// A passing bundle with `n` criteria, `e` check evidence and `r` verifier results: the same
/// bundles as verdict-core's Gate benchmark (`benches/gate.rs`) builds.
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
