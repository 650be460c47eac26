//! Policy rules: CEL expressions over the decision context. A rule can only add a reason with
//! its own (never `pass`) outcome; a rule that fails to evaluate, or yields something other
//! than a bool, is `gate_error`.
//!
//! The context every rule sees (the same for all rules, so their order does not matter):
//! - `criteria`: map of criterion id to status (`passed`, `failed`, `inconclusive`, `not_tested`)
//! - `required`: list of required criterion ids
//! - `scores`: map with `c`, `rec_v`, `cat_v` (double or null)
//! - `risk`: map with `class`, `revision`, `capabilities`
//! - `reasons`: list of the reason codes found before any rule ran
//! - `outcome`: the outcome before any rule ran
//! - `policy`: map with `name` and `revision`

use crate::contracts::{Id, Outcome, Rule};
use serde_json::Value;

/// A rule whose expression parsed.
pub(crate) struct CompiledRule {
    pub id: Id,
    pub outcome: Outcome,
    pub reason: String,
    program: cel::Program,
}

impl CompiledRule {
    pub(crate) fn compile(rule: &Rule) -> Result<Self, String> {
        let program =
            cel::Program::compile(&rule.when).map_err(|e| e.to_string().replace('\n', " "))?;
        Ok(Self {
            id: rule.id.clone(),
            outcome: rule.outcome,
            reason: rule.reason.clone(),
            program,
        })
    }

    /// Whether the rule fires over `context` (a JSON object of the variables above).
    pub(crate) fn fires(&self, context: &Value) -> Result<bool, String> {
        let mut ctx = cel::Context::default();
        if let Value::Object(vars) = context {
            for (name, v) in vars {
                let cv = cel::to_value(v).map_err(|e| e.to_string())?;
                ctx.add_variable_from_value(name.as_str(), cv);
            }
        }
        match self.program.execute(&ctx) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("expression yields {other:?}, expected a bool")),
            Err(e) => Err(e.to_string()),
        }
    }
}
