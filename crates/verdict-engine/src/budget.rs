//! The budget a verification request pins: how many runs may be admitted for it and what each
//! model run may spend. Parsed strictly when the request is created, so a typo never turns a
//! cap into no cap; enforced at admission (`max_runs`) and handed to the model verifier as caps
//! on its own budget (`max_total_tokens`, `max_cost`, `timeout_s`).

use crate::error::{Result, invalid};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request's budget. Every field is optional; an absent field sets no cap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestBudget {
    /// Runs that may be admitted for the request, over every class (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_runs: Option<u32>,
    /// Tokens in and out a single model run may use (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_total_tokens: Option<u64>,
    /// Estimated cost a single model run may reach (finite, at least 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_cost: Option<f64>,
    /// Wall time of a single model run in seconds (above 0, at most 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 86400), extend("exclusiveMinimum" = 0))]
    pub timeout_s: Option<f64>,
}

impl RequestBudget {
    /// Reads and checks a budget document; `null` is the empty budget.
    pub fn from_value(v: &Value) -> Result<Self> {
        let bad = invalid("budget");
        if v.is_null() {
            return Ok(Self::default());
        }
        // serde would also read a struct from an array; only an object is a budget.
        if !v.is_object() {
            return Err(bad("a budget is an object or null".into()));
        }
        let b: Self = serde_json::from_value(v.clone()).map_err(|e| bad(e.to_string()))?;
        b.check()?;
        Ok(b)
    }

    /// Checks the caps a type cannot: none is zero, negative or unbounded.
    pub fn check(&self) -> Result<()> {
        let bad = invalid("budget");
        let b = self;
        if b.max_runs == Some(0) {
            return Err(bad("max_runs must be at least 1".into()));
        }
        if b.max_total_tokens == Some(0) {
            return Err(bad("max_total_tokens must be at least 1".into()));
        }
        // A budget is stored with its request: past ±(2^53 - 1) no reader of the store could
        // read the request back, and no run could come near such a cap anyway.
        if b.max_total_tokens
            .is_some_and(|t| t > verdict_judge::tokens::MAX_STORED)
        {
            return Err(bad(format!(
                "max_total_tokens must be at most {}",
                verdict_judge::tokens::MAX_STORED
            )));
        }
        if b.max_cost.is_some_and(|c| !c.is_finite() || c < 0.0) {
            return Err(bad("max_cost must be finite and at least 0".into()));
        }
        if b.max_cost
            .is_some_and(|c| verdict_judge::tokens::storable_f64(c) < c)
        {
            return Err(bad(format!(
                "max_cost must be at most {}",
                verdict_judge::tokens::MAX_STORED
            )));
        }
        if b.timeout_s
            .is_some_and(|t| !t.is_finite() || t <= 0.0 || t > 86_400.0)
        {
            return Err(bad("timeout_s must be above 0 and at most 86400".into()));
        }
        Ok(())
    }

    /// This budget as a document.
    pub fn to_value(&self) -> Result<Value> {
        serde_json::to_value(self).map_err(|e| invalid("budget")(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn typos_and_impossible_caps_are_refused() {
        for (doc, why) in [
            (json!({"max_run": 2}), "unknown field"),
            (json!({"max_runs": 0}), "max_runs"),
            (json!({"max_runs": -1}), "invalid value"),
            (json!({"max_total_tokens": 0}), "max_total_tokens"),
            (json!({"max_cost": -0.5}), "max_cost"),
            (json!({"max_cost": 1e25}), "max_cost must be at most"),
            (
                json!({"max_total_tokens": 18_014_398_509_481_982_u64}),
                "max_total_tokens must be at most",
            ),
            (json!({"timeout_s": 0}), "timeout_s"),
            (json!({"timeout_s": 90000}), "timeout_s"),
            (json!("lots"), "an object"),
            (json!([2]), "an object"),
        ] {
            let err = RequestBudget::from_value(&doc).unwrap_err().to_string();
            assert!(err.contains(why), "{doc}: {err}");
        }
    }

    #[test]
    fn a_budget_round_trips_and_null_is_empty() {
        let b = RequestBudget::from_value(
            &json!({"max_runs": 2, "max_total_tokens": 9000, "max_cost": 0.25, "timeout_s": 30}),
        )
        .unwrap();
        assert_eq!(b.max_runs, Some(2));
        assert_eq!(
            RequestBudget::from_value(&b.to_value().unwrap()).unwrap(),
            b
        );
        assert_eq!(
            RequestBudget::from_value(&Value::Null).unwrap(),
            RequestBudget::default()
        );
    }
}
