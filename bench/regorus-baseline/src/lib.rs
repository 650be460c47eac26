//! The Gate decision of docs/spec/gate.md written in Rego (`gate.rego`) and run by regorus over
//! input converted beforehand, as a measured baseline for verdict's own Gate benchmark.

use regorus::Engine;
use serde_json::Value;
use verdict_core::digest::{DigestKind, digest};

#[path = "../../../crates/verdict-core/benches/bundles.rs"]
mod bundles;
pub use bundles::bundle;

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
