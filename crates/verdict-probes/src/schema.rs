//! The JSON Schema (draft 2020-12) of a check spec, derived from the types in [`crate::spec`]
//! that read it, so editors and other languages can check a spec before `verdict check` does.
//!
//! What the types read as raw values is described here, beside them: the criteria (read one by
//! one), each criterion's `probe` (one schema per `kind`), `vars`. The schema is true of the
//! loader: every spec [`crate::load`] accepts validates. A string the spec constrains (an id,
//! a mode, a duration, a probe kind...) may instead hold a `{{name}}` reference, as the loader
//! substitutes variables before it reads anything. Left to the loader: durations beyond a week
//! or finer than a millisecond, regexes, CEL, JSONPath, fields a mode does not use when the mode
//! is a variable reference, empty programs and paths, undefined variables and duplicate ids.

use crate::spec::{
    CommandProbe, DnsProbe, FileProbe, HttpProbe, JsonProbe, LogProbe, ProbeDef, SpecDoc, TcpProbe,
    TlsProbe,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value, json};

/// A string holding a `{{name}}` reference (crate::vars): after substitution it can be any
/// text, so the schema cannot judge it.
const VAR_REFERENCE: &str = r"\{\{ *[A-Za-z_][A-Za-z0-9_.-]* *\}\}";

/// The JSON Schema (draft 2020-12) of a check spec.
#[must_use]
pub fn check_spec_schema() -> Value {
    let mut s = schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<SpecDoc>()
        .to_value();
    if let Some(o) = s.as_object_mut() {
        o.insert("title".into(), json!("verdict check spec"));
    }
    if let Some(source) = s
        .pointer_mut("/$defs/JsonSource")
        .and_then(Value::as_object_mut)
    {
        source.insert("oneOf".into(), exactly_one(&["command", "file", "url"]));
        source.insert(
            "allOf".into(),
            json!([
                {"if": given("headers"), "then": given("url")},
                {"if": given("tls"), "then": given("url")}
            ]),
        );
    }
    if let Some(c) = s
        .pointer_mut("/$defs/CriterionDef")
        .and_then(Value::as_object_mut)
    {
        c.insert("allOf".into(), mode_fields());
    }
    allow_references(&mut s);
    s
}

/// The timing fields each mode refuses, and hold's window, for a criterion whose mode is known
/// as written: given, or left to its role. (A mode or role given as a variable reference is
/// judged by the loader alone.)
fn mode_fields() -> Value {
    let mode = |m: &str| json!({"required": ["mode"], "properties": {"mode": {"const": m}}});
    let no_mode = json!({"properties": {"mode": {"type": "null"}}});
    let none_of = |fields: &[&str]| {
        let props: Map<String, Value> = fields
            .iter()
            .map(|f| ((*f).to_owned(), json!({"type": "null"})))
            .collect();
        json!({"properties": props})
    };
    let assert = json!({"anyOf": [
        mode("assert"),
        {"allOf": [no_mode, {"required": ["role"], "properties": {"role": {"enum": ["safety", "catastrophic"]}}}]}
    ]});
    let converge = json!({"anyOf": [
        mode("converge"),
        {"allOf": [no_mode, {"properties": {"role": {"enum": [null, "correctness"]}}}]}
    ]});
    json!([
        {"if": assert, "then": none_of(&["timeout", "interval", "max_interval", "window", "ignore"])},
        {"if": converge, "then": none_of(&["window", "ignore"])},
        {"if": mode("hold"), "then": {"allOf": [none_of(&["max_interval", "ignore"]), given("window")]}},
        {"if": mode("unchanged"), "then": none_of(&["timeout", "interval", "max_interval", "window"])}
    ])
}

/// A schema true of an object whose `field` is given (present and not null).
fn given(field: &str) -> Value {
    json!({"required": [field], "properties": {field: {"not": {"type": "null"}}}})
}

/// A `oneOf`: exactly one of `fields` is given.
fn exactly_one(fields: &[&str]) -> Value {
    Value::Array(fields.iter().map(|f| given(f)).collect())
}

/// The schema of `vars`: names as `--var` takes them, values strings, numbers or booleans.
pub(crate) fn vars(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_.-]*$"},
        "additionalProperties": {"type": ["string", "number", "boolean"]}
    })
}

/// The schema of a criterion's `probe`: an object with a `kind` and that kind's fields.
pub(crate) fn probe(generator: &mut SchemaGenerator) -> Schema {
    let mut command = kind::<CommandProbe>(generator, "command");
    let mut json_probe = kind::<JsonProbe>(generator, "json");
    let mut log = kind::<LogProbe>(generator, "log");
    // Fields a probe needs one of, and one only; `unreachable` needs a `url` source.
    if let Some(o) = command.as_object_mut() {
        o.insert("oneOf".into(), exactly_one(&["argv", "shell"]));
    }
    if let Some(o) = log.as_object_mut() {
        o.insert("oneOf".into(), exactly_one(&["file", "command"]));
    }
    if let Some(o) = json_probe.as_object_mut() {
        o.insert("if".into(), given("unreachable"));
        o.insert(
            "then".into(),
            json!({"properties": {"source": given("url")}}),
        );
    }
    let kinds = [
        command,
        json_probe,
        kind::<HttpProbe>(generator, "http"),
        kind::<TcpProbe>(generator, "tcp"),
        kind::<DnsProbe>(generator, "dns"),
        kind::<FileProbe>(generator, "file"),
        log,
        kind::<TlsProbe>(generator, "tls"),
    ];
    json_schema!({
        "description": format!("What to observe: a probe of one kind ({}).", ProbeDef::KINDS.join(", ")),
        "type": "object",
        "required": ["kind"],
        // `anyOf`, not `oneOf`: a kind given as a variable reference can match several.
        "anyOf": kinds
    })
}

/// One kind's schema: its type's own, with `kind` added as a required field.
fn kind<T: JsonSchema>(generator: &mut SchemaGenerator, name: &str) -> Value {
    let mut s = T::json_schema(generator).to_value();
    if let Some(o) = s.as_object_mut() {
        if let Some(props) = o.get_mut("properties").and_then(Value::as_object_mut) {
            props.insert("kind".into(), json!({"const": name, "type": "string"}));
        }
        let required = o.entry("required").or_insert_with(|| json!([]));
        if let Some(r) = required.as_array_mut() {
            r.push(json!("kind"));
        }
    }
    s
}

/// Whether `s` constrains a string's text (an enum, a constant or a pattern).
fn constrains_text(s: &Map<String, Value>) -> bool {
    s.get("type").and_then(Value::as_str) == Some("string")
        && ["enum", "const", "pattern"]
            .iter()
            .any(|k| s.contains_key(*k))
}

/// Lets every string the schema constrains be a variable reference instead.
fn allow_references(s: &mut Value) {
    let Some(o) = s.as_object_mut() else {
        return;
    };
    let text_choice = o.get("oneOf").and_then(Value::as_array).is_some_and(|b| {
        !b.is_empty() && b.iter().all(|x| x.as_object().is_some_and(constrains_text))
    });
    if constrains_text(o) || text_choice {
        let inner = Value::Object(std::mem::take(o));
        o.insert(
            "anyOf".into(),
            json!([inner, {"type": "string", "pattern": VAR_REFERENCE}]),
        );
        return;
    }
    for key in ["$defs", "properties"] {
        if let Some(m) = o.get_mut(key).and_then(Value::as_object_mut) {
            m.values_mut().for_each(allow_references);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(v) = o.get_mut(key) {
            allow_references(v);
        }
    }
    for key in ["anyOf", "oneOf", "allOf", "prefixItems"] {
        if let Some(a) = o.get_mut(key).and_then(Value::as_array_mut) {
            a.iter_mut().for_each(allow_references);
        }
    }
}
