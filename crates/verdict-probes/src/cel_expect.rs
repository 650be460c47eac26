//! CEL expectations over JSON (`self` is the object under test).
//!
//! An expression is compiled when the spec loads, so a syntax error is refused there. At run time
//! anything but a boolean result is an error, never `false`: a field the expression reads that is
//! not there (`no such key`) means the check could not tell, which is not the same as the
//! system being wrong.

use cel::objects::{Key, Map};
use cel::{Context, Env, Program};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The name the object under test is bound to.
pub const SELF: &str = "self";

/// A compiled CEL expectation (cheap to clone, to evaluate off the async thread).
#[derive(Debug, Clone)]
pub struct Expect {
    source: Arc<str>,
    program: Arc<Program>,
}

fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib())).clone()
}

impl Expect {
    /// Compiles `source`; the message of an error says what is wrong.
    pub fn compile(source: &str) -> Result<Self, String> {
        if source.trim().is_empty() {
            return Err("empty cel expression".into());
        }
        let program = env()
            .compile(source)
            .map_err(|e| format!("invalid cel expression: {}", one_line(&e.to_string())))?;
        let refs = program.references();
        let mut unknown: Vec<&str> = refs
            .variables()
            .into_iter()
            .filter(|v| *v != SELF && !source_binds(source, v))
            .collect();
        unknown.sort_unstable();
        if let Some(v) = unknown.first() {
            return Err(format!(
                "invalid cel expression: unknown variable {v:?} (the object is `self`)"
            ));
        }
        Ok(Self {
            source: source.into(),
            program: Arc::new(program),
        })
    }

    /// The expression as written.
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates against `value` bound to `self`: `Ok(bool)` or an error message.
    pub fn eval(&self, value: &Value) -> Result<bool, String> {
        let mut ctx = Context::with_env(env());
        ctx.add_variable_from_value(SELF, to_cel(value));
        match self.program.execute(&ctx) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "cel expression {:?} gave {} instead of a boolean",
                self.source,
                type_name(&other)
            )),
            Err(e) => Err(format!(
                "cel expression {:?} could not be evaluated: {}",
                self.source,
                one_line(&e.to_string())
            )),
        }
    }
}

/// Whether `name` is bound by a comprehension macro in `source` (`x.all(name, ...)` and kin).
fn source_binds(source: &str, name: &str) -> bool {
    ["all", "exists", "exists_one", "map", "filter"]
        .iter()
        .any(|m| {
            source.match_indices(&format!(".{m}(")).any(|(i, pat)| {
                source
                    .get(i + pat.len()..)
                    .map(|rest| rest.trim_start())
                    .is_some_and(|rest| {
                        rest.strip_prefix(name)
                            .is_some_and(|r| r.trim_start().starts_with(','))
                    })
            })
        })
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn type_name(v: &cel::Value) -> &'static str {
    match v {
        cel::Value::List(_) => "a list",
        cel::Value::Map(_) => "a map",
        cel::Value::Int(_) | cel::Value::UInt(_) | cel::Value::Float(_) => "a number",
        cel::Value::String(_) => "a string",
        cel::Value::Null => "null",
        _ => "a non-boolean value",
    }
}

/// JSON to CEL: integers that fit become `int` (so `self.n == 2` compares like with like),
/// other numbers `double`.
#[must_use]
pub fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => cel::Value::Int(i),
            (None, Some(u), _) => cel::Value::UInt(u),
            (None, None, Some(f)) => cel::Value::Float(f),
            (None, None, None) => cel::Value::Null,
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let m: HashMap<Key, cel::Value> = map
                .iter()
                .map(|(k, v)| (Key::from(k.as_str()), to_cel(v)))
                .collect();
            cel::Value::Map(Map { map: Arc::new(m) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn booleans_over_self() {
        let e = Expect::compile("self.status.readyReplicas == self.spec.replicas").unwrap();
        assert_eq!(
            e.eval(&json!({"status": {"readyReplicas": 2}, "spec": {"replicas": 2}})),
            Ok(true)
        );
        assert_eq!(
            e.eval(&json!({"status": {"readyReplicas": 1}, "spec": {"replicas": 2}})),
            Ok(false)
        );
    }

    #[test]
    fn a_missing_field_is_an_error_not_false() {
        let e = Expect::compile("self.status.phase == 'Running'").unwrap();
        let err = e.eval(&json!({"metadata": {}})).unwrap_err();
        assert!(err.contains("could not be evaluated"), "{err}");
    }

    #[test]
    fn dotted_keys_and_comprehensions() {
        let e = Expect::compile(
            "self.metadata.labels['app.kubernetes.io/name'] == 'web' && self.status.conditions.exists(c, c.type == 'Available' && c.status == 'True')",
        )
        .unwrap();
        let ok = json!({"metadata": {"labels": {"app.kubernetes.io/name": "web"}},
                        "status": {"conditions": [{"type": "Available", "status": "True"}]}});
        assert_eq!(e.eval(&ok), Ok(true));
    }

    #[test]
    fn non_boolean_results_are_errors() {
        let e = Expect::compile("self.n + 1").unwrap();
        assert!(e.eval(&json!({"n": 1})).is_err());
    }

    #[test]
    fn invalid_expressions_are_refused_at_compile_time() {
        for bad in ["self.x ==", "", "slef.x == 1", "self.x == (1"] {
            assert!(Expect::compile(bad).is_err(), "{bad}");
        }
        assert!(Expect::compile("self.items.all(i, i.x > 0)").is_ok());
        assert!(Expect::compile("has(self.x)").is_ok());
    }
}
