//! JSON Schemas of the contract documents, derived from the Rust types.

use crate::contracts::{
    CheckEvidence, GateBundle, GateDecision, Policy, Subject, VerificationResult,
};
use schemars::{JsonSchema, schema_for};
use serde_json::{Value, json};

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
    let mut s = match name {
        "bundle" => of::<GateBundle>(),
        "subject" => of::<Subject>(),
        "policy" => of::<Policy>(),
        "decision" => of::<GateDecision>(),
        "evidence" => of::<CheckEvidence>(),
        "verification" => of::<VerificationResult>(),
        _ => return None,
    };
    contract_rules(&mut s);
    Some(s)
}

/// The documents that may carry their own `"digest"` (docs/spec/encoding.md), by schema title.
const CARRIERS: [&str; 6] = [
    "Subject",
    "Policy",
    "CheckEvidence",
    "VerificationResult",
    "Finding",
    "HumanDecision",
];

/// What the contract asks beyond the Rust types, so a document the schema accepts is one the
/// Gate reads: a carried `digest` is allowed on every document that may carry one (the Gate
/// checks it and hashes the document without it), a criterion's weight is above 0, the
/// policy's fallback outcomes and rule outcomes are never `pass`, the policy's required
/// criteria are each listed once and the checks it pins definitions of are named by ids, and a
/// human decision's `clears` names each reason once and only on an approval.
fn contract_rules(s: &mut Value) {
    let not_pass = json!({"const": "pass"});
    on_def(s, "Policy", |d| {
        for field in ["on_inconclusive", "on_contradiction"] {
            set(d, &["properties", field, "not"], not_pass.clone());
        }
        set(
            d,
            &["properties", "required_criteria", "uniqueItems"],
            json!(true),
        );
        // The same map said with the keywords the store's checks know: each key an id, each
        // value a digest (the derived form names the id's pattern as `patternProperties`).
        if let Some(map) = d
            .get_mut("properties")
            .and_then(|p| p.get_mut("check_definitions"))
            .and_then(Value::as_object_mut)
        {
            map.remove("patternProperties");
            map.insert(
                "additionalProperties".to_owned(),
                json!({"$ref": "#/$defs/Digest"}),
            );
            map.insert("propertyNames".to_owned(), json!({"$ref": "#/$defs/Id"}));
        }
    });
    on_def(s, "Rule", |d| {
        set(d, &["properties", "outcome", "not"], not_pass.clone());
    });
    on_def(s, "Criterion", |d| {
        set(d, &["properties", "weight", "exclusiveMinimum"], json!(0));
    });
    // An approval names each reason it clears once; a rejection clears nothing.
    on_def(s, "HumanDecision", |d| {
        set(d, &["properties", "clears", "uniqueItems"], json!(true));
        set(
            d,
            &["not"],
            json!({
                "description": "clears is allowed only on an approval",
                "required": ["clears", "decision"],
                "properties": {"clears": {"type": "array"}, "decision": {"const": "reject"}}
            }),
        );
    });
    for name in CARRIERS {
        on_def(s, name, |d| {
            if let Some(props) = d.get_mut("properties").and_then(Value::as_object_mut) {
                props.insert(
                    "digest".to_owned(),
                    json!({
                        "description": "the document's own digest, computed without this field; a mismatch is tampering",
                        "type": "string",
                        "pattern": "^sha256:[0-9a-f]{64}$"
                    }),
                );
            }
        });
    }
}

/// Applies `f` to the schema of type `name`: the root when it is that type, and its `$defs`
/// entry when it has one.
fn on_def(s: &mut Value, name: &str, mut f: impl FnMut(&mut Value)) {
    if s.get("title").and_then(Value::as_str) == Some(name) {
        f(s);
    }
    if let Some(d) = s.get_mut("$defs").and_then(|d| d.get_mut(name)) {
        f(d);
    }
}

/// Sets `value` at `path` inside `v` when everything but the last step exists.
fn set(v: &mut Value, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = v;
    for p in parents {
        match at.get_mut(*p) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(o) = at.as_object_mut() {
        o.insert((*last).to_owned(), value);
    }
}
