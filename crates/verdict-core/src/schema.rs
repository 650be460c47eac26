//! JSON Schemas of the contract documents, derived from the Rust types.

use crate::contracts::{
    CheckEvidence, GateBundle, GateDecision, Policy, Subject, VerificationResult,
};
use schemars::{JsonSchema, schema_for};
use serde_json::Value;

/// The documents a schema can be printed for.
pub const NAMES: [&str; 6] = [
    "bundle",
    "subject",
    "policy",
    "decision",
    "evidence",
    "verification",
];

fn of<T: JsonSchema>() -> Value {
    schema_for!(T).to_value()
}

/// The JSON Schema (draft 2020-12) of the named document, or `None` for an unknown name.
#[must_use]
pub fn schema(name: &str) -> Option<Value> {
    Some(match name {
        "bundle" => of::<GateBundle>(),
        "subject" => of::<Subject>(),
        "policy" => of::<Policy>(),
        "decision" => of::<GateDecision>(),
        "evidence" => of::<CheckEvidence>(),
        "verification" => of::<VerificationResult>(),
        _ => return None,
    })
}
