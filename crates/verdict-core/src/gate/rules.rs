//! Policy rules: CEL expressions over the decision context. A rule can only add a reason with
//! its own (never `pass`) outcome; a rule that fails to evaluate, or yields something other
//! than a bool, is `gate_error`.
//!
//! The context every rule sees (the same for all rules, so their order does not matter):
//! - `criteria`: map of criterion id to status (`passed`, `failed`, `inconclusive`, `not_tested`)
//! - `required`: list of required criterion ids
//! - `scores`: map with `c`, `rec_v`, `cat_v` (double or null)
//! - `risk`: map with `class` (as the subject states it), `effective_class` (after the
//!   policy's `risk_floor`), `revision`, `capabilities`
//! - `reasons`: list of the reason codes found before any rule ran
//! - `outcome`: the outcome before any rule ran
//! - `policy`: map with `name` and `revision`
//!
//! A rule is bounded in size (512 bytes, brackets 5 deep, an expression tree 32 deep) and in
//! work: at most 100,000 loop iterations over one bundle, nested macros counted in full,
//! past which it is a `gate_error` whatever it would have said.
//!
//! CEL leaves the iteration order of a map unspecified, and the evaluator's maps iterate in a
//! different order in every process. So that a rule is deterministic, every macro
//! (`all`, `exists`, `exists_one`, `map`, `filter`) that ranges over a map ranges over its keys
//! in sorted order, and no error text carries a value (a map's printed form has that order too).

use crate::contracts::{Id, Outcome, Rule};
use cel::common::ast::{CallExpr, EntryExpr, Expr};
use cel::objects::Key;
use cel::{ExecutionError, IdedExpr};
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The function a macro's range goes through: a map's keys, sorted; anything else unchanged.
/// Its name cannot be written in CEL source, so no rule can call it or shadow it.
const SORTED_RANGE: &str = "@verdict_sorted_range";

/// The longest rule expression, in bytes, and the deepest nesting of brackets in it. The CEL
/// parser and evaluator recurse once per level, with frames large enough that a dozen nested
/// brackets, or an operator chain of a thousand terms, overflow a 2 MiB thread stack, which
/// aborts the process: the Gate must be total, so a rule past these bounds does not
/// compile. Written rules stay far below them.
const MAX_RULE_BYTES: usize = 512;
const MAX_RULE_NESTING: usize = 5;
/// The deepest expression tree a rule may parse to (an operator chain such as `1 + 1 + ...`
/// nests one level per term without a single bracket).
const MAX_RULE_DEPTH: usize = 32;

/// The most loop iterations one rule may take over one bundle, summed over every macro it runs
/// (`all`, `exists`, `exists_one`, `map`, `filter`), a nested one counted again for each
/// iteration of the loop around it. The producer decides how many criteria a subject has, so a
/// short rule with three nested macros over them would otherwise run for as long as the
/// producer likes (200 criteria: 8 million iterations, half a minute). A rule past the budget
/// stops there and is a `gate_error`, whatever it would have said: the same bundle always
/// spends the same count, so the decision stays a function of the bundle.
pub(crate) const MAX_RULE_ITERATIONS: u64 = 100_000;

/// A rule whose expression parsed.
pub(crate) struct CompiledRule {
    pub id: Id,
    pub outcome: Outcome,
    pub reason: String,
    expr: IdedExpr,
}

impl CompiledRule {
    pub(crate) fn compile(rule: &Rule) -> Result<Self, String> {
        if rule.when.len() > MAX_RULE_BYTES {
            return Err(format!(
                "the expression is longer than {MAX_RULE_BYTES} bytes"
            ));
        }
        match nesting(&rule.when) {
            None => return Err("a string literal in the expression is not well formed".into()),
            Some(n) if n > MAX_RULE_NESTING => {
                return Err(format!(
                    "the expression nests brackets deeper than {MAX_RULE_NESTING} levels"
                ));
            }
            Some(_) => {}
        }
        let program =
            cel::Program::compile(&rule.when).map_err(|e| e.to_string().replace('\n', " "))?;
        if depth(program.expression()) > MAX_RULE_DEPTH {
            return Err(format!(
                "the expression nests deeper than {MAX_RULE_DEPTH} levels"
            ));
        }
        let mut expr = program.expression().clone();
        sort_map_ranges(&mut expr);
        Ok(Self {
            id: rule.id.clone(),
            outcome: rule.outcome,
            reason: rule.reason.clone(),
            expr,
        })
    }

    /// Whether the rule fires over `context` (a JSON object of the variables above).
    pub(crate) fn fires(&self, context: &Value) -> Result<bool, String> {
        let mut ctx = cel::Context::default();
        // Every macro's range passes through here once per run of the macro: the sum of their
        // lengths is the number of iterations the rule takes.
        let spent = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&spent);
        ctx.add_function(
            SORTED_RANGE,
            move |v: cel::Value| -> Result<cel::Value, ExecutionError> {
                let range = sorted_range(v);
                let n = match &range {
                    cel::Value::List(items) => u64::try_from(items.len()).unwrap_or(u64::MAX),
                    _ => 0,
                };
                let before = counter.fetch_add(n, Ordering::Relaxed);
                if before.saturating_add(n) > MAX_RULE_ITERATIONS {
                    return Err(ExecutionError::function_error(SORTED_RANGE, "budget"));
                }
                Ok(range)
            },
        )
        .map_err(|e| e.to_string())?;
        if let Value::Object(vars) = context {
            for (name, v) in vars {
                let cv = cel::to_value(v).map_err(|e| e.to_string())?;
                ctx.add_variable_from_value(name.as_str(), cv);
            }
        }
        let resolved = cel::Value::resolve(&self.expr, &ctx);
        // Past the budget nothing the rule says counts, even where `||`, `&&` or a macro
        // absorbed the refusal.
        if spent.load(Ordering::Relaxed) > MAX_RULE_ITERATIONS {
            return Err(format!(
                "the rule takes more than {MAX_RULE_ITERATIONS} loop iterations over this bundle"
            ));
        }
        match resolved {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "expression yields a {}, expected a bool",
                other.type_of()
            )),
            Err(e) => Err(describe(&e)),
        }
    }
}

/// The deepest nesting of `(`, `[` and `{` in CEL source, outside comments and string
/// literals; `None` when a string literal is not one CEL's lexer reads with certainty (not
/// closed, a line break in a one-line string, an unknown escape, right after a number). Such a
/// literal would leave it unclear which brackets the parser sees, and the expression is not
/// valid CEL anyway.
fn nesting(src: &str) -> Option<usize> {
    let b = src.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let (mut at, mut depth, mut deepest) = (0, 0usize, 0);
    while let Some(&c) = b.get(at) {
        match c {
            b'/' if b.get(at + 1) == Some(&b'/') => {
                while b.get(at).is_some_and(|c| *c != b'\n') {
                    at += 1;
                }
            }
            b'\'' | b'"' => {
                // The word just before the quote is a string prefix (`r` raw, `b` bytes) or a
                // token of its own (an identifier or keyword: the string is plain). After a
                // number, or with both prefixes (which CEL versions read differently), the
                // literal's extent is uncertain unless both readings agree.
                let mut from = at;
                while from > 0 && b.get(from - 1).copied().is_some_and(word) {
                    from -= 1;
                }
                let run = b.get(from..at)?.to_ascii_lowercase();
                at = match run.as_slice() {
                    b"r" => string_end(b, at, true)?,
                    b"br" | b"rb" => {
                        let end = string_end(b, at, true)?;
                        (string_end(b, at, false)? == end).then_some(end)?
                    }
                    [d, ..] if d.is_ascii_digit() => return None,
                    _ => string_end(b, at, false)?,
                };
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    Some(deepest)
}

/// The position of the last quote of the string literal opening at `at`, read as CEL reads it;
/// `None` when it is not a well-formed literal.
fn string_end(b: &[u8], at: usize, raw: bool) -> Option<usize> {
    let q = *b.get(at)?;
    let triple = b.get(at + 1) == Some(&q) && b.get(at + 2) == Some(&q);
    let mut i = at + if triple { 3 } else { 1 };
    loop {
        let c = *b.get(i)?;
        if c == q && (!triple || (b.get(i + 1) == Some(&q) && b.get(i + 2) == Some(&q))) {
            return Some(i + if triple { 2 } else { 0 });
        }
        if !triple && (c == b'\n' || c == b'\r') {
            return None;
        }
        i += if c == b'\\' && !raw {
            escape_len(b.get(i + 1..)?)? + 1
        } else {
            1
        };
    }
}

/// The length of a CEL escape sequence after its backslash; `None` for one CEL does not know.
fn escape_len(rest: &[u8]) -> Option<usize> {
    let hex = |n: usize| {
        rest.get(1..=n)
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
            .then_some(n + 1)
    };
    match *rest.first()? {
        b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'\\' | b'\'' | b'"' | b'`' | b'?' => {
            Some(1)
        }
        b'x' | b'X' => hex(2),
        b'u' => hex(4),
        b'U' => hex(8),
        b'0'..=b'3' => rest
            .get(1..3)
            .is_some_and(|o| o.iter().all(|d| (b'0'..=b'7').contains(d)))
            .then_some(3),
        _ => None,
    }
}

/// A map's keys in sorted order; any other value as it is (iterating it fails as before).
fn sorted_range(v: cel::Value) -> cel::Value {
    match v {
        cel::Value::Map(m) => {
            let mut keys: Vec<&Key> = m.map.keys().collect();
            keys.sort_unstable();
            cel::Value::List(Arc::new(keys.into_iter().map(cel::Value::from).collect()))
        }
        other => other,
    }
}

/// The sub-expressions of `e`.
fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) => c.target.as_deref().into_iter().chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => m
            .entries
            .iter()
            .flat_map(|x| entry_parts(&x.expr))
            .collect(),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(|x| entry_parts(&x.expr))
            .collect(),
        Expr::Select(s) => vec![&*s.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

fn entry_parts(e: &EntryExpr) -> Vec<&IdedExpr> {
    match e {
        EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
        EntryExpr::StructField(f) => vec![&f.value],
    }
}

/// How deep the expression tree goes, measured without recursion (the tree may be too deep
/// for it).
fn depth(root: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut todo = vec![(root, 1)];
    while let Some((e, d)) = todo.pop() {
        deepest = deepest.max(d);
        todo.extend(children(e).into_iter().map(|c| (c, d + 1)));
    }
    deepest
}

/// Routes the range of every macro in `e` through [`SORTED_RANGE`].
fn sort_map_ranges(e: &mut IdedExpr) {
    match &mut e.expr {
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                sort_map_ranges(t);
            }
            c.args.iter_mut().for_each(sort_map_ranges);
        }
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                sort_map_ranges(part);
            }
            let range = std::mem::take(&mut c.iter_range);
            c.iter_range = IdedExpr {
                id: range.id,
                expr: Expr::Call(CallExpr {
                    func_name: SORTED_RANGE.to_owned(),
                    target: None,
                    args: vec![range],
                }),
            };
        }
        Expr::List(l) => l.elements.iter_mut().for_each(sort_map_ranges),
        Expr::Map(m) => m.entries.iter_mut().for_each(|x| entry(&mut x.expr)),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|x| entry(&mut x.expr)),
        Expr::Select(s) => sort_map_ranges(&mut s.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry(e: &mut EntryExpr) {
    match e {
        EntryExpr::MapEntry(m) => {
            sort_map_ranges(&mut m.key);
            sort_map_ranges(&mut m.value);
        }
        EntryExpr::StructField(f) => sort_map_ranges(&mut f.value),
    }
}

/// An evaluation error in words that name types, never values: a value's printed form may hold
/// a map, whose order differs from run to run.
fn describe(e: &ExecutionError) -> String {
    use ExecutionError as E;
    match e {
        E::InvalidArgumentCount { expected, actual } => {
            format!("invalid argument count: expected {expected}, got {actual}")
        }
        E::UnsupportedTargetType { target } => {
            format!("invalid argument type: {}", target.type_of())
        }
        E::NotSupportedAsMethod { method, target } => {
            format!("method {method:?} not supported on a {}", target.type_of())
        }
        E::UnsupportedKeyType(v) => format!("a {} cannot be a map key", v.type_of()),
        E::UnexpectedType { want, .. } => format!("unexpected type, want {want}"),
        E::NoSuchKey(k) => format!("no such key: {k}"),
        E::NoSuchOverload(o) => o.to_string(),
        E::UndeclaredReference(r) => format!("undeclared reference to {r:?}"),
        E::MissingArgumentOrTarget => "missing argument or target".to_owned(),
        E::ValuesNotComparable(a, b) => {
            format!("a {} cannot be compared to a {}", a.type_of(), b.type_of())
        }
        E::UnsupportedBinaryOperator(op, a, b) => format!(
            "unsupported binary operator {op:?} on a {} and a {}",
            a.type_of(),
            b.type_of()
        ),
        E::UnsupportedIndex(i, v) => {
            format!("a {} cannot index a {}", i.type_of(), v.type_of())
        }
        E::FunctionError { function, .. } => format!("error executing function {function:?}"),
        E::DivisionByZero(_) => "division by zero".to_owned(),
        E::RemainderByZero(_) => "remainder by zero".to_owned(),
        E::Overflow(op, ..) => format!("overflow from binary operator {op:?}"),
        E::IndexOutOfBounds(_) => "index out of bounds".to_owned(),
        E::DuplicateKey(_) => "a map literal repeats a key".to_owned(),
        _ => "evaluation failed".to_owned(),
    }
}
