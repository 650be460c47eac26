//! `json` probe: a document from a command, a file or an HTTP GET; objects selected with
//! JSONPath; a CEL expectation over each; a quantifier over the results.
//!
//! Quantifiers use three-valued logic so an error never decides more than it must: `all` fails
//! on any false, `any` passes on any true, `none` fails on any true; otherwise an evaluation
//! error makes the observation an error. Zero selected objects fails `all`, `any` and `none`
//! (a selector matching nothing is usually a mistake); `{count: {max: 0}}` requires absence.

use super::http::{FetchError, Fetched, Request, fetch, header_map, parse_url, settings};
use super::net::TlsSettings;
use super::{
    FieldError, Judged, OutputInfo, ProbeDefaults, ProbeEnv, Sample, facts, positive_cap,
    positive_timeout, strict_json,
};
use crate::cel_expect::Expect;
use crate::output::Captured;
use crate::process::{self, ProcSpec};
use crate::spec::{JsonProbe, Quantifier, TlsOptions, Unreachable};
use bytes::Bytes;
use http::header::HeaderMap;
use http::{Method, Uri};
use serde_json::Value;
use serde_json_path::JsonPath;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug)]
enum Source {
    Command(Vec<String>),
    File(String),
    Url {
        url: Uri,
        headers: HeaderMap,
        tls: TlsSettings,
    },
}

/// A compiled `json` probe.
#[derive(Debug)]
pub struct JsonCheck {
    source: Source,
    judge: Arc<Judge>,
    cap: u64,
    pub(crate) timeout: Duration,
    pub(crate) unreachable: Unreachable,
}

/// The outcome of a quantifier over per-object results.
pub fn quantify(
    q: Quantifier,
    results: &[(String, Result<bool, String>)],
) -> Result<String, Judged> {
    let n = results.len();
    let trues = results
        .iter()
        .filter(|(_, r)| matches!(r, Ok(true)))
        .count();
    let first_false = results
        .iter()
        .find(|(_, r)| matches!(r, Ok(false)))
        .map(|(p, _)| p.as_str());
    let first_true = results
        .iter()
        .find(|(_, r)| matches!(r, Ok(true)))
        .map(|(p, _)| p.as_str());
    let first_error = results
        .iter()
        .find_map(|(p, r)| r.as_ref().err().map(|e| format!("at {p}: {e}")));
    let nothing = || {
        Judged::Fail(
            "the selector matched no object (use {count: {max: 0}} to require absence)".into(),
        )
    };
    match q {
        Quantifier::All => {
            if n == 0 {
                return Err(nothing());
            }
            if let Some(p) = first_false {
                return Err(Judged::Fail(format!(
                    "{} of {n} objects satisfy the expectation; first that does not: {p}",
                    trues
                )));
            }
            if let Some(e) = first_error {
                return Err(Judged::Error(e));
            }
            Ok(format!("all {n} objects satisfy the expectation"))
        }
        Quantifier::Any => {
            if n == 0 {
                return Err(nothing());
            }
            if let Some(p) = first_true {
                return Ok(format!(
                    "{trues} of {n} objects satisfy the expectation (first: {p})"
                ));
            }
            if let Some(e) = first_error {
                return Err(Judged::Error(e));
            }
            Err(Judged::Fail(format!(
                "none of {n} objects satisfies the expectation"
            )))
        }
        Quantifier::None => {
            if n == 0 {
                return Err(nothing());
            }
            if let Some(p) = first_true {
                return Err(Judged::Fail(format!(
                    "{trues} of {n} objects satisfy the expectation; first: {p}"
                )));
            }
            if let Some(e) = first_error {
                return Err(Judged::Error(e));
            }
            Ok(format!("none of {n} objects satisfies the expectation"))
        }
        Quantifier::Count(range) => {
            // The objects that errored could each be either, so the number that satisfy the
            // expectation lies between `trues` and `trues + errors`: a bound missed at both
            // ends fails whatever they are.
            let errors = results.iter().filter(|(_, r)| r.is_err()).count();
            let most = trues + errors;
            if let Some(max) = range.max
                && trues as u64 > max
            {
                return Err(Judged::Fail(format!(
                    "{trues} of {n} objects satisfy the expectation (expected {range})"
                )));
            }
            if let Some(min) = range.min
                && (most as u64) < min
            {
                return Err(Judged::Fail(format!(
                    "{trues} of {n} objects satisfy the expectation and {errors} could not be evaluated (expected {range})"
                )));
            }
            if let Some(e) = first_error {
                return Err(Judged::Error(e));
            }
            if range.contains(trues as u64) {
                Ok(format!(
                    "{trues} of {n} objects satisfy the expectation ({range})"
                ))
            } else {
                Err(Judged::Fail(format!(
                    "{trues} of {n} objects satisfy the expectation (expected {range})"
                )))
            }
        }
    }
}

impl JsonCheck {
    /// Compiles and normalises.
    pub fn compile(mut p: JsonProbe, d: &ProbeDefaults) -> Result<(JsonProbe, Self), FieldError> {
        let s = &p.source;
        let given = [s.command.is_some(), s.file.is_some(), s.url.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        if given != 1 {
            return Err(FieldError::new(
                "/source",
                "source needs exactly one of command, file, url",
            ));
        }
        if s.url.is_none() && p.unreachable.is_some() {
            return Err(FieldError::new(
                "/unreachable",
                "unreachable applies to a url source only",
            ));
        }
        if s.url.is_none() && (s.headers.is_some() || s.tls.is_some()) {
            return Err(FieldError::new(
                "/source",
                "headers and tls apply to a url source only",
            ));
        }
        let source = if let Some(argv) = &s.command {
            if argv.first().is_none_or(String::is_empty) {
                return Err(FieldError::new(
                    "/source/command",
                    "command must name a program",
                ));
            }
            Source::Command(argv.clone())
        } else if let Some(f) = &s.file {
            if f.is_empty() {
                return Err(FieldError::new("/source/file", "file path is empty"));
            }
            Source::File(f.clone())
        } else {
            let u = s.url.clone().unwrap_or_default();
            let url = parse_url(&u, "/source/url")?;
            let headers = header_map(s.headers.as_ref(), "/source/headers")?;
            let tls = settings(s.tls.as_ref());
            if url.scheme_str() == Some("https") || s.tls.is_some() {
                p.source.tls = Some(TlsOptions {
                    ca: tls.ca.clone(),
                    insecure: Some(tls.insecure),
                });
            }
            Source::Url { url, headers, tls }
        };
        let select = p
            .select
            .as_deref()
            .map(|sel| {
                JsonPath::parse(sel).map_err(|e| {
                    FieldError::new("/select", format!("invalid jsonpath {sel:?}: {e}"))
                })
            })
            .transpose()?;
        let expect = p
            .expect
            .as_deref()
            .map(Expect::compile)
            .transpose()
            .map_err(|m| FieldError::new("/expect", m))?;
        let quantifier = p.quantifier.unwrap_or(Quantifier::All);
        if let Quantifier::Count(r) = quantifier {
            if r.min.is_none() && r.max.is_none() {
                return Err(FieldError::new(
                    "/quantifier",
                    "count needs min, max or both",
                ));
            }
            if let (Some(a), Some(b)) = (r.min, r.max)
                && a > b
            {
                return Err(FieldError::new(
                    "/quantifier",
                    format!("count min {a} is above max {b}"),
                ));
            }
        }
        p.quantifier = Some(quantifier);
        let timeout = positive_timeout(p.timeout, d)?;
        p.timeout = Some(timeout);
        let unreachable = super::unreachable_setting(&mut p.unreachable);
        let cap = positive_cap(p.max_output, d)?;
        p.max_output = Some(cap);
        Ok((
            p,
            Self {
                source,
                judge: Arc::new(Judge {
                    select,
                    expect,
                    quantifier,
                }),
                cap,
                timeout: timeout.std(),
                unreachable,
            },
        ))
    }

    /// The document, and why no excerpt of it may be kept if so.
    async fn read(&self, env: &ProbeEnv) -> Result<(Captured, Option<String>), Judged> {
        match &self.source {
            Source::Command(argv) => {
                let out = process::run(ProcSpec {
                    argv,
                    env: None,
                    cwd: None,
                    stdin: None,
                    cap: self.cap,
                })
                .await
                .map_err(Judged::Error)?;
                if out.code != Some(0) {
                    let err = out.stderr.excerpt().0;
                    return Err(Judged::Error(format!(
                        "source command ended with {}: {}",
                        out.status_text(),
                        err.trim()
                    )));
                }
                Ok((out.stdout, None))
            }
            Source::File(path) => {
                let opened = crate::files::open_regular(path)
                    .await
                    .map_err(Judged::Error)?;
                let c = crate::output::read_capped(opened.file, self.cap)
                    .await
                    .map_err(|e| Judged::Error(format!("cannot read {path:?}: {e}")))?;
                Ok((c, opened.withheld))
            }
            Source::Url { url, headers, tls } => {
                let client = env.http.get(tls).map_err(Judged::Error)?;
                let req = Request {
                    method: &Method::GET,
                    uri: url,
                    headers,
                    body: &Bytes::new(),
                    follow_redirects: false,
                };
                match fetch(&client, req, self.cap).await {
                    Ok(Fetched {
                        coded: Some(why), ..
                    }) => Err(Judged::Error(why)),
                    Ok(Fetched { status, body, .. }) if (200..300).contains(&status) => {
                        Ok((body, None))
                    }
                    Ok(Fetched { status, .. }) => Err(Judged::Error(format!(
                        "source url answered status {status}"
                    ))),
                    Err(FetchError::Certificate(why)) => Err(Judged::Fail(why)),
                    Err(FetchError::Unreachable(e)) => Err(Judged::Unreachable(e)),
                    Err(FetchError::Other(e)) => Err(Judged::Error(e)),
                }
            }
        }
    }

    /// Whether the document is fetched over the network.
    pub(crate) fn reaches(&self) -> bool {
        matches!(self.source, Source::Url { .. })
    }

    pub(crate) async fn observe(&self, env: &ProbeEnv, judge: bool) -> Sample {
        let (captured, withheld) = match self.read(env).await {
            Ok(c) => c,
            Err(j) => return Sample::observed(Default::default(), None).judged(Err(j)),
        };
        let output = OutputInfo::of_unless(&captured, withheld.as_deref());
        let mut sample = Sample::observed(Default::default(), Some(output));
        if captured.overflow {
            return sample.judged(Err(Judged::Error(format!(
                "document exceeds {} bytes",
                self.cap
            ))));
        }
        // Parsing, selecting and evaluating take time that grows with the document and the
        // expression (a nested all/exists over a large list): off the async thread, so the
        // probe's timeout (the caller's) and the run's deadline still stop the observation.
        // Neither the JSONPath nor the CEL crate can be cancelled; a blocking thread left
        // behind finishes on its own.
        let evaluator = self.judge.clone();
        let bytes = captured.bytes;
        let evaluated =
            tokio::task::spawn_blocking(move || evaluator.evaluate(&bytes, judge)).await;
        match evaluated {
            Ok(Evaluated {
                facts,
                snapshot,
                verdict,
            }) => {
                sample.facts = facts;
                sample.snapshot = snapshot;
                sample.judged(verdict)
            }
            Err(e) => sample.judged(Err(Judged::Error(format!("the evaluation failed: {e}")))),
        }
    }
}

/// What a `json` probe judges a document by.
#[derive(Debug)]
struct Judge {
    select: Option<JsonPath>,
    expect: Option<Expect>,
    quantifier: Quantifier,
}

/// What a document gave.
struct Evaluated {
    facts: serde_json::Map<String, Value>,
    snapshot: Option<Value>,
    verdict: Result<String, Judged>,
}

impl Judge {
    /// Parses, selects and evaluates (CPU-bound; see the caller). With `judge` false only the
    /// snapshot is taken.
    fn evaluate(&self, bytes: &[u8], judge: bool) -> Evaluated {
        let mut out = Evaluated {
            facts: serde_json::Map::new(),
            snapshot: None,
            verdict: Ok(String::new()),
        };
        let doc = match strict_json(bytes, "source") {
            Ok(d) => d,
            Err(r) => {
                out.verdict = Err(Judged::Error(r.message));
                return out;
            }
        };
        let located: Vec<(String, &Value)> = match &self.select {
            Some(path) => path
                .query_located(&doc)
                .iter()
                .map(|n| (n.location().to_string(), n.node()))
                .collect(),
            None => vec![("$".to_owned(), &doc)],
        };
        out.facts = facts([("matched", Value::from(located.len()))]);
        if !judge {
            out.snapshot = Some(match &self.select {
                Some(_) => Value::Array(located.iter().map(|(_, v)| (*v).clone()).collect()),
                None => doc.clone(),
            });
            out.verdict = Ok("observed".into());
            return out;
        }
        let results: Vec<(String, Result<bool, String>)> = located
            .iter()
            .map(|(p, v)| {
                (
                    p.clone(),
                    self.expect.as_ref().map_or(Ok(true), |e| e.eval(v)),
                )
            })
            .collect();
        let satisfied = results
            .iter()
            .filter(|(_, r)| matches!(r, Ok(true)))
            .count();
        out.facts.insert("satisfied".into(), Value::from(satisfied));
        // Without a selector there is one object, the document: say so plainly.
        out.verdict = match (&self.select, results.first(), &self.expect) {
            (None, Some((_, r)), Some(e)) if self.quantifier == Quantifier::All => match r {
                Ok(true) => Ok(format!("{} holds", e.source())),
                Ok(false) => Err(Judged::Fail(format!("{} is false", e.source()))),
                Err(m) => Err(Judged::Error(m.clone())),
            },
            _ => quantify(self.quantifier, &results),
        };
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Range;

    fn r(v: &[Result<bool, &str>]) -> Vec<(String, Result<bool, String>)> {
        v.iter()
            .enumerate()
            .map(|(i, x)| (format!("$[{i}]"), x.map_err(str::to_owned)))
            .collect()
    }

    #[test]
    fn zero_matches_fail_all_any_and_none() {
        for q in [Quantifier::All, Quantifier::Any, Quantifier::None] {
            assert!(
                matches!(quantify(q, &[]), Err(Judged::Fail(m)) if m.contains("matched no object"))
            );
        }
        let absent = Quantifier::Count(Range {
            min: None,
            max: Some(0),
        });
        assert!(quantify(absent, &[]).is_ok());
    }

    #[test]
    fn errors_decide_only_what_is_undecided() {
        assert!(matches!(
            quantify(Quantifier::All, &r(&[Ok(false), Err("x")])),
            Err(Judged::Fail(_))
        ));
        assert!(matches!(
            quantify(Quantifier::All, &r(&[Ok(true), Err("x")])),
            Err(Judged::Error(_))
        ));
        assert!(quantify(Quantifier::Any, &r(&[Err("x"), Ok(true)])).is_ok());
        assert!(matches!(
            quantify(Quantifier::Any, &r(&[Err("x"), Ok(false)])),
            Err(Judged::Error(_))
        ));
        assert!(matches!(
            quantify(Quantifier::None, &r(&[Err("x"), Ok(true)])),
            Err(Judged::Fail(_))
        ));
        let count = Quantifier::Count(Range {
            min: Some(1),
            max: None,
        });
        assert!(matches!(
            quantify(count, &r(&[Ok(true), Err("x")])),
            Err(Judged::Error(_))
        ));
    }

    #[test]
    fn a_count_bound_missed_whatever_the_errors_are_fails() {
        let at_most_none = Quantifier::Count(Range {
            min: None,
            max: Some(0),
        });
        // One true already exceeds the maximum; an error can only add another.
        assert!(matches!(
            quantify(at_most_none, &r(&[Ok(true), Err("x")])),
            Err(Judged::Fail(_))
        ));
        assert!(matches!(
            quantify(at_most_none, &r(&[Ok(false), Err("x")])),
            Err(Judged::Error(_))
        ));
        let at_least_three = Quantifier::Count(Range {
            min: Some(3),
            max: None,
        });
        // Even if both errors were true, two would not make three.
        assert!(matches!(
            quantify(at_least_three, &r(&[Ok(false), Err("x"), Err("y")])),
            Err(Judged::Fail(_))
        ));
        assert!(matches!(
            quantify(at_least_three, &r(&[Ok(true), Err("x"), Err("y")])),
            Err(Judged::Error(_))
        ));
    }

    #[test]
    fn count_bounds_are_inclusive() {
        let q = Quantifier::Count(Range {
            min: Some(2),
            max: Some(3),
        });
        assert!(quantify(q, &r(&[Ok(true), Ok(true), Ok(false)])).is_ok());
        assert!(quantify(q, &r(&[Ok(true), Ok(false)])).is_err());
        assert!(quantify(q, &r(&[Ok(true); 4])).is_err());
    }
}
