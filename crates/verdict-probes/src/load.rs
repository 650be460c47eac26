//! Loading a spec: parse (YAML or strict JSON), substitute variables, validate everything,
//! normalise, compile, digest. Nothing runs until all of it succeeded.
//!
//! # Normalisation (what `definition_digest` is of)
//!
//! Each criterion's definition is normalised to a JSON object and digested as
//! `sha256(JCS(definition))` ([`verdict_core::digest::raw`] of [`verdict_core::canonical`]):
//!
//! - every `{{var}}` is substituted (spec `vars`, overridden by `--var`), so different values
//!   give different digests;
//! - `description` is dropped (it is for people and does not change what runs);
//! - `role` (default `correctness`), `weight` (default 1), `required` (default true) and `mode`
//!   (default by role) are always present;
//! - only the timing fields the mode uses are present, defaults filled in from the criterion,
//!   then `defaults`, then built-in values: converge has `timeout` (60s), `interval` (1s) and
//!   `max_interval` (8 × interval); hold has `window`, `interval` and `timeout` (window + the
//!   probe's timeout); unchanged has `ignore` (possibly empty); every mode has `max_age` (15m);
//! - durations are written canonically (`90s`, `1500ms`), HTTP methods in upper case, file
//!   modes as four octal digits, SHA-256 expectations as bare lowercase hex;
//! - the probe has its `kind` and every default of its kind: `timeout` (10s), `max_output`
//!   (8 MiB, where output is read), and the kind's own (`exit_code: 0`, `status: "2xx"`,
//!   `method: "GET"`, `follow_redirects: false`, `quantifier: "all"`, `expect: "open"`,
//!   `type: "A"`, `resolves: true`, `exists: true`, `count: {min: 1}`, `since_start: false`,
//!   `insecure: false` on TLS settings, the TLS `server_name`).
//!
//! A normalised definition is itself a valid criterion and normalises to itself.

use crate::check::{
    Check, DEFAULT_BACKOFF_FACTOR, DEFAULT_INTERVAL, DEFAULT_MAX_AGE, DEFAULT_TIMEOUT, Plan,
};
use crate::duration::Dur;
use crate::error::{Problem, SpecError};
use crate::output::DEFAULT_MAX_OUTPUT;
use crate::positions::Positions;
use crate::probe::{DEFAULT_PROBE_TIMEOUT, Probe, ProbeDefaults};
use crate::spec::{
    CommandProbe, CriterionDef, Defaults, DnsProbe, FileProbe, HttpProbe, JsonProbe, LogProbe,
    Mode, ProbeDef, SpecDoc, TcpProbe, TlsProbe,
};
use crate::vars;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json_path::JsonPath;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use verdict_core::digest::Digest;

/// How a spec's text is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// YAML 1.2 (the default for anything not named `.json`).
    Yaml,
    /// Strict JSON (docs/spec/encoding.md).
    Json,
}

/// A loaded spec, every criterion compiled.
#[derive(Debug)]
pub struct Spec {
    /// Raw SHA-256 of the spec's bytes as read.
    pub source_digest: Digest,
    /// The criteria, in spec order.
    pub checks: Vec<Arc<Check>>,
}

struct Ctx<'a> {
    positions: &'a Positions,
    doc: &'a Value,
}

impl Ctx<'_> {
    /// The criterion a pointer is in, by its `id` when it has a usable one, else by index.
    fn criterion_of(&self, pointer: &str) -> Option<String> {
        let rest = pointer.strip_prefix("/criteria/")?;
        let idx = rest.split('/').next()?;
        let i: usize = idx.parse().ok()?;
        let c = self.doc.get("criteria")?.get(i)?;
        Some(match c.get("id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            None => format!("#{}", i + 1),
        })
    }

    fn problem(&self, pointer: &str, message: impl Into<String>) -> SpecError {
        let pos = self.positions.find(pointer);
        SpecError::Invalid(Box::new(Problem {
            criterion: self.criterion_of(pointer),
            pointer: pointer.to_owned(),
            line: pos.map(|p| p.line),
            column: pos.map(|p| p.column),
            message: message.into(),
        }))
    }

    fn decode<T: DeserializeOwned>(&self, value: &Value, base: &str) -> Result<T, SpecError> {
        verdict_core::contracts::decode_plain::<T>(value).map_err(|e| match e {
            verdict_core::contracts::DecodeError::Schema { path, message } => {
                let path = if path == "/" { String::new() } else { path };
                match unknown_field(&message) {
                    // serde stops at the first unknown field of an object; report them all,
                    // each at the field itself, with the nearest known name.
                    Some((field, expected)) => {
                        // The path may name the field itself or the object holding it.
                        let own = format!("/{}", crate::positions::token(&field));
                        let inner = path.strip_suffix(&own).unwrap_or(&path);
                        let p = format!("{base}{inner}");
                        let object = value.pointer(inner);
                        let mut problems = object
                            .and_then(Value::as_object)
                            .map(|m| {
                                m.keys()
                                    .filter(|k| !expected.iter().any(|e| e == *k))
                                    .map(|k| self.unknown(&p, k, &expected))
                                    .collect::<Vec<_>>()
                            })
                            .unwrap_or_default();
                        // In the order they are written, not the order of the keys.
                        problems.sort_by_key(|q| (q.line, q.column));
                        SpecError::of(problems)
                            .unwrap_or_else(|| self.problem(&format!("{p}{own}"), message))
                    }
                    None => self.problem(&format!("{base}{path}"), message),
                }
            }
            verdict_core::contracts::DecodeError::Tampered(t) => self.problem(base, t.to_string()),
        })
    }

    fn unknown(&self, object: &str, field: &str, expected: &[String]) -> Problem {
        let at = format!("{object}/{}", crate::positions::token(field));
        let message = match nearest(field, expected) {
            Some(near) => format!("unknown field `{field}`; did you mean `{near}`?"),
            None => format!(
                "unknown field `{field}` (expected one of {})",
                expected
                    .iter()
                    .map(|e| format!("`{e}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        match self.problem(&at, message) {
            SpecError::Invalid(p) => *p,
            // `problem` always gives one located problem.
            other => Problem {
                criterion: None,
                pointer: at,
                line: None,
                column: None,
                message: other.to_string(),
            },
        }
    }
}

/// The unknown field serde names, and the fields it expected (empty when it expected none).
fn unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, rest) = rest.split_once('`')?;
    let expected = rest
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    Some((field.to_owned(), expected))
}

/// The known name closest to `field` by edit distance, if it is close enough to be a typo:
/// at most two edits, and fewer than half the letters.
fn nearest<'a>(field: &str, known: &'a [String]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(field, k), k.as_str()))
        .filter(|(d, k)| *d <= 2 && d * 2 < field.chars().count().max(k.chars().count()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance, counting an adjacent swap as one edit.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the table: two back (for swaps), one back, and the current one.
    let mut two_back: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev.get(j).copied().unwrap_or(usize::MAX) + usize::from(ca != cb);
            let delete = prev.get(j + 1).copied().unwrap_or(usize::MAX) + 1;
            let insert = cur.get(j).copied().unwrap_or(usize::MAX) + 1;
            let mut best = substitute.min(delete).min(insert);
            if i > 0 && j > 0 && a.get(i - 1) == Some(cb) && b.get(j - 1) == Some(ca) && ca != cb {
                best = best.min(two_back.get(j - 1).copied().unwrap_or(usize::MAX) + 1);
            }
            if let Some(slot) = cur.get_mut(j + 1) {
                *slot = best;
            }
        }
        two_back = std::mem::replace(&mut prev, cur);
    }
    prev.last().copied().unwrap_or(0)
}

/// The largest spec file read (16 MiB): a spec is written by people, not generated by the ton.
pub const MAX_SPEC_BYTES: u64 = 16 * 1024 * 1024;

/// Reads and loads a spec file (`.json` is strict JSON, anything else YAML).
pub fn load_file(path: &Path, overrides: &BTreeMap<String, String>) -> Result<Spec, SpecError> {
    use std::io::Read;
    let read_error = |message: String| SpecError::Read {
        path: path.display().to_string(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| read_error(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_SPEC_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| read_error(e.to_string()))?;
    if bytes.len() as u64 > MAX_SPEC_BYTES {
        return Err(read_error(format!("larger than {MAX_SPEC_BYTES} bytes")));
    }
    let format = if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        Format::Json
    } else {
        Format::Yaml
    };
    load_bytes(&bytes, format, overrides)
}

fn plain(message: String, line: usize, column: usize) -> SpecError {
    SpecError::Invalid(Box::new(Problem {
        criterion: None,
        pointer: String::new(),
        line: Some(line),
        column: Some(column),
        message,
    }))
}

/// Loads a spec from bytes.
pub fn load_bytes(
    bytes: &[u8],
    format: Format,
    overrides: &BTreeMap<String, String>,
) -> Result<Spec, SpecError> {
    let source_digest = verdict_core::digest::raw(bytes);
    let (mut doc, positions) = match format {
        Format::Json => {
            let v = verdict_core::json::parse(bytes)
                .map_err(|e| plain(e.kind.to_string(), e.line, e.column))?;
            // Positions only: JSON is YAML 1.2, and the strict reader above already decided.
            let pos = std::str::from_utf8(bytes)
                .ok()
                .and_then(|t| crate::yaml::parse(t).ok())
                .map(|(_, p)| p)
                .unwrap_or_default();
            (v, pos)
        }
        Format::Yaml => {
            let text = std::str::from_utf8(bytes)
                .map_err(|e| plain(format!("invalid utf-8: {e}"), 1, 1))?;
            crate::yaml::parse(text).map_err(|e| plain(e.message, e.line, e.column))?
        }
    };
    let raw = doc.clone();
    let ctx = Ctx {
        positions: &positions,
        doc: &raw,
    };
    let Value::Object(root) = &mut doc else {
        return Err(ctx.problem("", "a spec is an object with version and criteria"));
    };
    let var_values = build_vars(&ctx, root.get("vars"), overrides)?;
    for (k, v) in root.iter_mut() {
        if k != "vars" {
            vars::substitute(v, &var_values, &format!("/{}", crate::positions::token(k)))
                .map_err(|e| ctx.problem(e.pointer(), e.to_string()))?;
        }
    }
    // Every problem is collected and reported at once: the top of the spec, the defaults,
    // then each criterion (up to its first problem, or all its unknown fields).
    let mut problems = Vec::new();
    let mut keep = |e: SpecError| problems.extend(e.problems().iter().cloned());
    let spec: SpecDoc = match ctx.decode(&doc, "") {
        Ok(spec) => spec,
        Err(e) => {
            keep(e);
            // The criteria can still be checked against the built-in defaults.
            SpecDoc {
                version: 1,
                vars: BTreeMap::new(),
                defaults: Defaults::default(),
                criteria: match doc.get("criteria") {
                    Some(Value::Array(items)) => items.clone(),
                    _ => Vec::new(),
                },
            }
        }
    };
    if spec.version != 1 {
        keep(ctx.problem(
            "/version",
            format!("unsupported spec version {} (expected 1)", spec.version),
        ));
    }
    if spec.criteria.is_empty() && doc.get("criteria").is_some_and(Value::is_array) {
        keep(ctx.problem("/criteria", "a spec needs at least one criterion"));
    }
    let defaults = match check_defaults(&ctx, &spec.defaults) {
        Ok(d) => d,
        Err(e) => {
            keep(e);
            check_defaults(&ctx, &Defaults::default())?
        }
    };
    let mut seen = HashSet::new();
    let mut checks = Vec::with_capacity(spec.criteria.len());
    for (i, c) in spec.criteria.iter().enumerate() {
        let base = format!("/criteria/{i}");
        match compile_criterion(&ctx, c, &base, &defaults) {
            Ok(check) if !seen.insert(check.id.clone()) => keep(ctx.problem(
                &format!("{base}/id"),
                format!("duplicate criterion id {:?}", check.id.as_str()),
            )),
            Ok(check) => checks.push(Arc::new(check)),
            Err(e) => keep(e),
        }
    }
    if let Some(e) = SpecError::of(problems) {
        return Err(e);
    }
    Ok(Spec {
        source_digest,
        checks,
    })
}

fn build_vars(
    ctx: &Ctx<'_>,
    raw: Option<&Value>,
    overrides: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, SpecError> {
    let mut out = BTreeMap::new();
    match raw {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let p = format!("/vars/{}", crate::positions::token(k));
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    _ => {
                        return Err(ctx.problem(
                            &p,
                            format!("variable {k:?} must be a string, number or boolean"),
                        ));
                    }
                };
                if !is_var_name(k) {
                    return Err(ctx.problem(&p, format!("invalid variable name {k:?}")));
                }
                out.insert(k.clone(), text);
            }
        }
        Some(_) => return Err(ctx.problem("/vars", "vars must be an object")),
    }
    for (k, v) in overrides {
        if !is_var_name(k) {
            return Err(ctx.problem(
                "/vars",
                format!("invalid variable name {k:?} given with --var"),
            ));
        }
        out.insert(k.clone(), v.clone());
    }
    Ok(out)
}

/// Whether `s` can be a variable name (`[A-Za-z_][A-Za-z0-9_.-]*`).
#[must_use]
pub fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

struct Resolved {
    timeout: Dur,
    interval: Dur,
    max_age: Dur,
    probe: ProbeDefaults,
}

fn check_defaults(ctx: &Ctx<'_>, d: &Defaults) -> Result<Resolved, SpecError> {
    let probe_timeout = d.probe_timeout.unwrap_or(DEFAULT_PROBE_TIMEOUT);
    if probe_timeout.is_zero() {
        return Err(ctx.problem(
            "/defaults/probe_timeout",
            "probe_timeout must be greater than 0",
        ));
    }
    let max_output = d.max_output.unwrap_or(DEFAULT_MAX_OUTPUT);
    if max_output == 0 {
        return Err(ctx.problem("/defaults/max_output", "max_output must be greater than 0"));
    }
    let max_age = d.max_age.unwrap_or(DEFAULT_MAX_AGE);
    check_max_age(ctx, max_age, "/defaults/max_age")?;
    Ok(Resolved {
        timeout: d.timeout.unwrap_or(DEFAULT_TIMEOUT),
        interval: d.interval.unwrap_or(DEFAULT_INTERVAL),
        max_age,
        probe: ProbeDefaults {
            timeout: probe_timeout,
            max_output,
        },
    })
}

fn check_max_age(ctx: &Ctx<'_>, d: Dur, at: &str) -> Result<(), SpecError> {
    if d.is_zero() || !d.as_millis().is_multiple_of(1000) {
        return Err(ctx.problem(
            at,
            format!("max_age must be a whole number of seconds greater than 0, not {d}"),
        ));
    }
    Ok(())
}

fn decode_probe(ctx: &Ctx<'_>, raw: &Value, base: &str) -> Result<ProbeDef, SpecError> {
    let Value::Object(map) = raw else {
        return Err(ctx.problem(base, "probe must be an object with a kind"));
    };
    let kind = match map.get("kind") {
        Some(Value::String(k)) => k.clone(),
        Some(_) => return Err(ctx.problem(&format!("{base}/kind"), "kind must be a string")),
        None => {
            return Err(ctx.problem(
                base,
                format!("probe needs a kind ({})", ProbeDef::KINDS.join(", ")),
            ));
        }
    };
    let mut rest = map.clone();
    rest.remove("kind");
    let rest = Value::Object(rest);
    Ok(match kind.as_str() {
        "command" => ProbeDef::Command(ctx.decode::<CommandProbe>(&rest, base)?),
        "json" => ProbeDef::Json(ctx.decode::<JsonProbe>(&rest, base)?),
        "http" => ProbeDef::Http(ctx.decode::<HttpProbe>(&rest, base)?),
        "tcp" => ProbeDef::Tcp(ctx.decode::<TcpProbe>(&rest, base)?),
        "dns" => ProbeDef::Dns(ctx.decode::<DnsProbe>(&rest, base)?),
        "file" => ProbeDef::File(ctx.decode::<FileProbe>(&rest, base)?),
        "log" => ProbeDef::Log(ctx.decode::<LogProbe>(&rest, base)?),
        "tls" => ProbeDef::Tls(ctx.decode::<TlsProbe>(&rest, base)?),
        other => {
            return Err(ctx.problem(
                &format!("{base}/kind"),
                format!(
                    "unknown probe kind {other:?} (expected one of {})",
                    ProbeDef::KINDS.join(", ")
                ),
            ));
        }
    })
}

/// Refuses a field the mode does not use: a spec that sets it expects an effect it would not get.
fn unused(
    ctx: &Ctx<'_>,
    base: &str,
    field: &str,
    given: bool,
    mode: Mode,
) -> Result<(), SpecError> {
    if given {
        return Err(ctx.problem(
            &format!("{base}/{field}"),
            format!("{field} does not apply to {} mode", mode.as_str()),
        ));
    }
    Ok(())
}

fn compile_criterion(
    ctx: &Ctx<'_>,
    raw: &Value,
    base: &str,
    d: &Resolved,
) -> Result<Check, SpecError> {
    let mut c: CriterionDef = ctx.decode(raw, base)?;
    let role = c.role.unwrap_or_default();
    let weight = c.weight.unwrap_or(1.0);
    if !weight.is_finite() || weight <= 0.0 {
        return Err(ctx.problem(
            &format!("{base}/weight"),
            format!("weight must be a finite number greater than 0, not {weight}"),
        ));
    }
    let required = c.required.unwrap_or(true);
    let mode = c.mode.unwrap_or(Mode::default_for(role));
    let probe_def = decode_probe(ctx, &c.probe, &format!("{base}/probe"))?;
    let (normal_probe, probe) = Probe::compile(probe_def, &d.probe)
        .map_err(|e| ctx.problem(&format!("{base}/probe{}", e.pointer), e.message))?;
    let probe_timeout =
        Dur::from_millis(u64::try_from(probe.timeout().as_millis()).unwrap_or(u64::MAX));
    let max_age = c.max_age.unwrap_or(d.max_age);
    check_max_age(ctx, max_age, &format!("{base}/max_age"))?;
    let interval = c.interval.unwrap_or(d.interval);
    let mut ignore = Vec::new();
    let plan = match mode {
        Mode::Assert => {
            unused(ctx, base, "timeout", c.timeout.is_some(), mode)?;
            unused(ctx, base, "interval", c.interval.is_some(), mode)?;
            unused(ctx, base, "max_interval", c.max_interval.is_some(), mode)?;
            unused(ctx, base, "window", c.window.is_some(), mode)?;
            unused(ctx, base, "ignore", c.ignore.is_some(), mode)?;
            Plan::Assert
        }
        Mode::Converge => {
            unused(ctx, base, "window", c.window.is_some(), mode)?;
            unused(ctx, base, "ignore", c.ignore.is_some(), mode)?;
            if interval.is_zero() {
                return Err(ctx.problem(
                    &format!("{base}/interval"),
                    "interval must be greater than 0 in converge mode",
                ));
            }
            let max_interval = c.max_interval.unwrap_or(Dur::from_millis(
                interval.as_millis().saturating_mul(DEFAULT_BACKOFF_FACTOR),
            ));
            if max_interval < interval {
                return Err(ctx.problem(
                    &format!("{base}/max_interval"),
                    "max_interval must not be shorter than interval",
                ));
            }
            Plan::Converge {
                timeout: c.timeout.unwrap_or(d.timeout),
                interval,
                max_interval,
            }
        }
        Mode::Hold => {
            unused(ctx, base, "max_interval", c.max_interval.is_some(), mode)?;
            unused(ctx, base, "ignore", c.ignore.is_some(), mode)?;
            let window = c
                .window
                .ok_or_else(|| ctx.problem(base, "hold mode needs a window"))?;
            if interval.is_zero() {
                return Err(ctx.problem(
                    &format!("{base}/interval"),
                    "interval: 0 is refused in hold mode",
                ));
            }
            let timeout = match c.timeout {
                Some(t) if t < window => {
                    return Err(ctx.problem(
                        &format!("{base}/timeout"),
                        format!("timeout {t} is shorter than the window {window}"),
                    ));
                }
                Some(t) => t,
                None => {
                    Dur::from_millis(window.as_millis().saturating_add(probe_timeout.as_millis()))
                }
            };
            Plan::Hold {
                window,
                interval,
                timeout,
            }
        }
        Mode::Unchanged => {
            unused(ctx, base, "timeout", c.timeout.is_some(), mode)?;
            unused(ctx, base, "interval", c.interval.is_some(), mode)?;
            unused(ctx, base, "max_interval", c.max_interval.is_some(), mode)?;
            unused(ctx, base, "window", c.window.is_some(), mode)?;
            for (i, p) in c.ignore.iter().flatten().enumerate() {
                let path = JsonPath::parse(p).map_err(|e| {
                    ctx.problem(
                        &format!("{base}/ignore/{i}"),
                        format!("invalid jsonpath {p:?}: {e}"),
                    )
                })?;
                ignore.push((p.clone(), path));
            }
            Plan::Unchanged
        }
    };
    // The normalised definition: same type, every default that applies filled in.
    let description = c.description.take();
    let normal = CriterionDef {
        id: c.id.clone(),
        description: None,
        role: Some(role),
        weight: Some(weight),
        required: Some(required),
        mode: Some(mode),
        timeout: match plan {
            Plan::Converge { timeout, .. } | Plan::Hold { timeout, .. } => Some(timeout),
            Plan::Assert | Plan::Unchanged => None,
        },
        interval: match plan {
            Plan::Converge { interval, .. } | Plan::Hold { interval, .. } => Some(interval),
            Plan::Assert | Plan::Unchanged => None,
        },
        max_interval: match plan {
            Plan::Converge { max_interval, .. } => Some(max_interval),
            _ => None,
        },
        window: match plan {
            Plan::Hold { window, .. } => Some(window),
            _ => None,
        },
        ignore: matches!(plan, Plan::Unchanged).then(|| c.ignore.clone().unwrap_or_default()),
        max_age: Some(max_age),
        probe: normal_probe.to_value().map_err(|e| {
            ctx.problem(
                &format!("{base}/probe"),
                format!("cannot normalise the probe: {e}"),
            )
        })?,
    };
    let definition = serde_json::to_value(&normal)
        .map_err(|e| ctx.problem(base, format!("cannot normalise the criterion: {e}")))?;
    let definition_digest = definition_digest(&definition);
    Ok(Check {
        id: c.id,
        description,
        role,
        weight,
        required,
        plan,
        max_age,
        probe,
        ignore,
        definition,
        definition_digest,
    })
}

/// The digest a subject pins: raw SHA-256 of the canonical (RFC 8785) normalised definition.
#[must_use]
pub fn definition_digest(definition: &Value) -> Digest {
    verdict_core::digest::raw(&verdict_core::canonical::to_vec(definition))
}
