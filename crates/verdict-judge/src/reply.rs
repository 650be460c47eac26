//! The reply a model must give, and its validation.
//!
//! The reply schema is derived from the Rust types below, so the schema sent to a provider and
//! the decoder can never disagree. Every object lists all of its properties as required (absent
//! values are `null`) and forbids others, which is what strict structured-output modes demand.
//! Validation is strict in layers: the strict JSON reader (duplicate keys, unsafe numbers), the
//! JSON Schema, the typed decode, then the checks a schema cannot express: the nonce is echoed,
//! there is exactly one row per asked criterion, every ref is a citable entry of the context
//! manifest, findings bear on asked criteria, and every prior blocker gets exactly one
//! disposition. Anything else is [`InvalidReply`], which a run reports as `invalid_output`.

use crate::manifest::{ContextManifest, FindingKey};
use crate::render::EntryKind;
use crate::sanitize::sanitize_str;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use verdict_core::contracts::{
    CriterionRow, CriterionStatus, Disposition, DispositionKind, Finding, Id, Location, Scope,
    Severity,
};
use verdict_core::digest::{self, Digest, DigestKind};

/// The version tag of the reply schema.
pub const RESULT_SCHEMA_VERSION: &str = "verdict.judge-reply/v1";
/// The `method` recorded on every row and finding a model verifier produces.
pub const METHOD: &str = "model_review";

const MAX_TEXT: usize = 4000;
const MAX_LABEL: usize = 128;
const MAX_REFS: usize = 64;

/// A model verifier's reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "verdict_result",
    description = "A verifier's report on one subject"
)]
pub struct ModelReply {
    /// The request nonce, echoed exactly.
    pub nonce: String,
    /// Exactly one row per criterion asked.
    pub criteria: Vec<ReplyRow>,
    /// Problems found (empty when none).
    pub findings: Vec<ReplyFinding>,
    /// Exactly one disposition per prior blocking finding listed (empty when none are listed).
    pub dispositions: Vec<ReplyDisposition>,
}

/// One criterion's grade.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyRow {
    /// The criterion id, exactly as listed.
    pub id: String,
    /// passed, failed, inconclusive or not_tested.
    pub status: CriterionStatus,
    /// Refs (from the refs you may cite) that support the status.
    pub evidence_refs: Vec<String>,
    /// One or two sentences on why.
    pub rationale: String,
}

/// Where a finding is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyLocation {
    /// A resource ref.
    pub resource: String,
    /// A path inside it, or null.
    pub path: Option<String>,
    /// A line, or null.
    pub line: Option<u64>,
}

/// A problem found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyFinding {
    /// The criterion id it bears on.
    pub criterion: String,
    /// A short kind of problem (e.g. `missing_test`, `sql_injection`).
    #[serde(rename = "type")]
    pub kind: String,
    /// blocker, major, minor or info.
    pub severity: Severity,
    /// change, adjacent or pre_existing.
    pub scope: Scope,
    /// Where, or null.
    pub location: Option<ReplyLocation>,
    /// Refs that show it.
    pub evidence_refs: Vec<String>,
    /// What to do about it, or null.
    pub remediation: Option<String>,
    /// Advisory confidence between 0 and 1, or null.
    #[schemars(range(min = 0, max = 1))]
    pub confidence: Option<f64>,
}

/// What became of a prior blocking finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyDisposition {
    /// The finding id.
    pub finding: String,
    /// The finding version.
    pub version: u64,
    /// resolved, still_present, superseded_by_subject_change or human_required.
    pub disposition: DispositionKind,
    /// Refs that show it.
    pub evidence_refs: Vec<String>,
    /// Why, or null (required for superseded_by_subject_change).
    pub reason: Option<String>,
}

/// Rewrites the derived schema into the subset strict structured-output modes accept: every
/// property required (optional ones are nullable instead), enums as `enum` lists, no
/// Rust-specific `format` annotations (ranges are checked after decoding anyway).
fn make_strict(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("format");
            map.remove("$schema");
            let consts: Option<Vec<Value>> = map
                .get("oneOf")
                .and_then(Value::as_array)
                .and_then(|alts| alts.iter().map(|a| a.get("const").cloned()).collect());
            if let Some(values) = consts {
                map.remove("oneOf");
                map.insert("type".into(), Value::String("string".into()));
                map.insert("enum".into(), Value::Array(values));
            }
            if let Some(keys) = map
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().map(Value::String).collect::<Vec<_>>())
            {
                map.insert("required".into(), Value::Array(keys));
            }
            for (_, x) in map.iter_mut() {
                make_strict(x);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(make_strict),
        _ => {}
    }
}

/// The reply's JSON Schema (draft 2020-12, all subschemas inline), as sent to providers.
#[must_use]
pub fn result_schema() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut v = generator.into_root_schema_for::<ModelReply>().to_value();
    make_strict(&mut v);
    v
}

/// A reply that is not a valid result for its request; `detail` says precisely why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct InvalidReply {
    /// What is wrong.
    pub detail: String,
}

fn invalid(detail: impl Into<String>) -> InvalidReply {
    InvalidReply {
        detail: detail.into(),
    }
}

/// Quotes at most 60 characters of untrusted text for a message. Text that may hold a secret
/// is redacted before it comes here ([`ReplyRules::quote`]): a cut can leave a run of a secret
/// too short to be recognised afterwards.
pub(crate) fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(60).collect();
    if out.len() < s.len() {
        out.push_str("...");
    }
    format!("{:?}", sanitize_str(&out))
}

/// A compiled validator for replies to one context.
pub struct ReplyValidator {
    schema: jsonschema::Validator,
}

impl std::fmt::Debug for ReplyValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReplyValidator")
    }
}

/// The compiled schema could not be built (a defect, reported rather than panicking).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the result schema does not compile: {0}")]
pub struct SchemaError(pub String);

/// A valid reply, turned into contract rows, findings and dispositions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidReply {
    /// One row per asked criterion, in the asked order.
    pub rows: Vec<CriterionRow>,
    /// Findings with derived ids.
    pub findings: Vec<Finding>,
    /// One disposition per prior blocker, in the manifest's order.
    pub dispositions: Vec<Disposition>,
    /// The rationale given per criterion, in the asked order.
    pub rationales: Vec<(Id, String)>,
}

/// What a reply is checked against.
#[derive(Clone, Copy)]
pub struct ReplyRules<'a> {
    /// The nonce the call carried.
    pub nonce: &'a str,
    /// The context the call showed.
    pub manifest: &'a ContextManifest,
    /// The criteria whose `passed` rows need cite no ref: the policy's explicit, per-criterion
    /// waivers. Every other `passed` row must cite at least one ref, as the prompt's rules say.
    pub refs_waived: &'a [Id],
    /// Removes the provider's secrets from untrusted text before any of it is quoted in a
    /// message (redaction must come before the cut).
    pub redact: &'a (dyn Fn(&str) -> String + Sync),
}

impl std::fmt::Debug for ReplyRules<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplyRules")
            .field("nonce", &self.nonce)
            .field("refs_waived", &self.refs_waived)
            .finish_non_exhaustive()
    }
}

impl ReplyRules<'_> {
    /// Untrusted text quoted for a message: redacted whole, then clipped.
    fn quote(&self, s: &str) -> String {
        clip(&(self.redact)(s))
    }
}

/// A redactor for replies that can hold no secret (a provider without a key).
pub fn no_secrets(text: &str) -> String {
    text.to_owned()
}

fn check_text(what: &str, s: &str, max: usize) -> Result<String, InvalidReply> {
    if s.chars().count() > max {
        return Err(invalid(format!("{what} is longer than {max} characters")));
    }
    Ok(sanitize_str(s))
}

/// A finding's id within one run: the same for the same problem on the same subject, so the
/// run's samples that report it agree on its identity. A run's result carries these ids hashed
/// with a secret of the run (`judge.rs`), so no other writer can take them first.
fn finding_id(subject: &Digest, f: &ReplyFinding, location: Option<&Location>) -> Option<Id> {
    let key = serde_json::json!({
        "subject_digest": subject,
        "criterion": f.criterion,
        "type": f.kind,
        "severity": f.severity,
        "scope": f.scope,
        "location": location,
    });
    let d = digest::digest(DigestKind::Finding, &key);
    let hex = d.as_str().get(7..31)?;
    format!("f-{hex}").parse().ok()
}

impl ReplyValidator {
    /// Compiles the reply schema.
    pub fn new() -> Result<Self, SchemaError> {
        let schema = jsonschema::draft202012::new(&result_schema())
            .map_err(|e| SchemaError(e.to_string()))?;
        Ok(Self { schema })
    }

    /// Validates reply text against the rules; see the module documentation for the layers.
    pub fn validate(&self, text: &str, rules: ReplyRules<'_>) -> Result<ValidReply, InvalidReply> {
        let doc = verdict_core::json::parse(text.trim().as_bytes())
            .map_err(|e| invalid(format!("reply is not strict JSON: {e}")))?;
        self.validate_value(&doc, rules)
    }

    /// [`ReplyValidator::validate`] for an already parsed document.
    pub fn validate_value(
        &self,
        doc: &Value,
        rules: ReplyRules<'_>,
    ) -> Result<ValidReply, InvalidReply> {
        let errors: Vec<String> = self
            .schema
            .iter_errors(doc)
            .take(3)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("{} at {at}", e.masked())
            })
            .collect();
        if !errors.is_empty() {
            return Err(invalid(format!(
                "reply does not match the result schema: {}",
                errors.join("; ")
            )));
        }
        let reply: ModelReply = verdict_core::contracts::decode_plain(doc)
            .map_err(|e| invalid(format!("reply does not decode: {e}")))?;
        semantic(&reply, rules)
    }
}

fn check_refs(
    what: &str,
    refs: &[String],
    citable: &BTreeSet<&str>,
    rules: ReplyRules<'_>,
) -> Result<Vec<String>, InvalidReply> {
    if refs.len() > MAX_REFS {
        return Err(invalid(format!("{what} cites more than {MAX_REFS} refs")));
    }
    let mut out: Vec<String> = Vec::with_capacity(refs.len());
    for r in refs {
        if !citable.contains(r.as_str()) {
            return Err(invalid(format!(
                "{what} cites {}, which is not a citable entry of the context manifest",
                rules.quote(r)
            )));
        }
        if !out.contains(r) {
            out.push(r.clone());
        }
    }
    Ok(out)
}

fn semantic(reply: &ModelReply, rules: ReplyRules<'_>) -> Result<ValidReply, InvalidReply> {
    let m = rules.manifest;
    if reply.nonce != rules.nonce {
        return Err(invalid(format!(
            "nonce mismatch: the reply echoes {} instead of the request nonce",
            rules.quote(&reply.nonce)
        )));
    }
    let citable: BTreeSet<&str> = m.citable_refs().map(|e| e.ref_.as_str()).collect();
    let resources: BTreeSet<&str> = m
        .citable_refs()
        .filter(|e| e.kind == EntryKind::Resource)
        .map(|e| e.ref_.as_str())
        .collect();
    let asked: BTreeSet<&str> = m.criteria.asked.iter().map(Id::as_str).collect();

    let mut by_id: BTreeMap<&str, &ReplyRow> = BTreeMap::new();
    for row in &reply.criteria {
        if !asked.contains(row.id.as_str()) {
            return Err(invalid(format!(
                "row for criterion {}, which was not asked",
                rules.quote(&row.id)
            )));
        }
        if by_id.insert(row.id.as_str(), row).is_some() {
            return Err(invalid(format!(
                "criterion {} has more than one row",
                rules.quote(&row.id)
            )));
        }
    }
    let mut rows = Vec::new();
    let mut rationales = Vec::new();
    for id in &m.criteria.asked {
        let row = by_id
            .get(id.as_str())
            .ok_or_else(|| invalid(format!("no row for asked criterion {:?}", id.as_str())))?;
        let refs = check_refs(
            &format!("criterion {:?}", id.as_str()),
            &row.evidence_refs,
            &citable,
            rules,
        )?;
        if row.status == CriterionStatus::Passed
            && refs.is_empty()
            && !rules.refs_waived.contains(id)
        {
            return Err(invalid(format!(
                "criterion {:?} is passed but cites no ref; a pass must cite the refs that show \
                 it holds unless the policy waives that for the criterion (evidence_refs_waived)",
                id.as_str()
            )));
        }
        rationales.push((
            id.clone(),
            check_text("a rationale", &row.rationale, MAX_TEXT)?,
        ));
        rows.push(CriterionRow {
            id: id.clone(),
            status: row.status,
            method: METHOD.to_owned(),
            evidence_refs: refs,
        });
    }

    let mut findings: Vec<Finding> = Vec::new();
    for (i, f) in reply.findings.iter().enumerate() {
        let what = format!("finding {i}");
        let criterion: Id = match f.criterion.parse::<Id>() {
            Ok(c) if asked.contains(c.as_str()) => c,
            _ => {
                return Err(invalid(format!(
                    "{what} bears on criterion {}, which was not asked",
                    rules.quote(&f.criterion)
                )));
            }
        };
        if f.kind.trim().is_empty() {
            return Err(invalid(format!("{what} has an empty type")));
        }
        let kind = check_text(&format!("{what}'s type"), &f.kind, MAX_LABEL)?;
        let location = match &f.location {
            None => None,
            Some(l) => {
                if !resources.contains(l.resource.as_str()) {
                    return Err(invalid(format!(
                        "{what} is located in {}, which is not a resource of the context manifest",
                        rules.quote(&l.resource)
                    )));
                }
                Some(Location {
                    resource: l.resource.clone(),
                    path: l
                        .path
                        .as_deref()
                        .map(|p| check_text(&format!("{what}'s path"), p, 1024))
                        .transpose()?,
                    line: l.line,
                })
            }
        };
        if let Some(c) = f.confidence
            && !(0.0..=1.0).contains(&c)
        {
            return Err(invalid(format!("{what} has confidence {c}, outside 0..=1")));
        }
        let refs = check_refs(&what, &f.evidence_refs, &citable, rules)?;
        let remediation = f
            .remediation
            .as_deref()
            .map(|r| check_text(&format!("{what}'s remediation"), r, MAX_TEXT))
            .transpose()?;
        let id = finding_id(&m.subject_digest, f, location.as_ref())
            .ok_or_else(|| invalid(format!("{what}: no id could be derived")))?;
        if findings.iter().any(|x| x.id == id) {
            // The same problem reported twice is one finding.
            continue;
        }
        findings.push(Finding {
            id,
            version: 1,
            criterion,
            kind,
            severity: f.severity,
            scope: f.scope,
            subject_digest: m.subject_digest.clone(),
            location,
            evidence_refs: refs,
            method: METHOD.to_owned(),
            remediation,
            confidence: f.confidence,
        });
    }

    let mut by_finding: BTreeMap<(&str, u64), &ReplyDisposition> = BTreeMap::new();
    for d in &reply.dispositions {
        let known = m
            .prior_findings
            .iter()
            .any(|k| k.id.as_str() == d.finding && k.version == d.version);
        if !known {
            return Err(invalid(format!(
                "disposition of finding {} version {}, which is not a listed prior blocker",
                rules.quote(&d.finding),
                d.version
            )));
        }
        if by_finding
            .insert((d.finding.as_str(), d.version), d)
            .is_some()
        {
            return Err(invalid(format!(
                "finding {} version {} has more than one disposition",
                rules.quote(&d.finding),
                d.version
            )));
        }
    }
    let mut dispositions = Vec::new();
    for FindingKey { id, version } in &m.prior_findings {
        let d = by_finding.get(&(id.as_str(), *version)).ok_or_else(|| {
            invalid(format!(
                "no disposition for prior blocker {:?} version {version}",
                id.as_str()
            ))
        })?;
        let what = format!("the disposition of {:?}", id.as_str());
        let reason = d
            .reason
            .as_deref()
            .map(|r| check_text(&format!("{what}'s reason"), r, MAX_TEXT))
            .transpose()?;
        if d.disposition == DispositionKind::SupersededBySubjectChange
            && reason.as_deref().is_none_or(|r| r.trim().is_empty())
        {
            return Err(invalid(format!(
                "{what} is superseded_by_subject_change without a reason"
            )));
        }
        dispositions.push(Disposition {
            finding: id.clone(),
            version: *version,
            disposition: d.disposition,
            evidence_refs: check_refs(&what, &d.evidence_refs, &citable, rules)?,
            reason,
        });
    }
    Ok(ValidReply {
        rows,
        findings,
        dispositions,
        rationales,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::{Construction, ManifestCriteria, ManifestEntry, ManifestSchema};
    use serde_json::json;

    fn every_object(v: &Value, f: &mut impl FnMut(&serde_json::Map<String, Value>)) {
        match v {
            Value::Object(m) => {
                f(m);
                m.values().for_each(|x| every_object(x, f));
            }
            Value::Array(a) => a.iter().for_each(|x| every_object(x, f)),
            _ => {}
        }
    }

    #[test]
    fn the_schema_is_strict_mode_compatible() {
        let schema = result_schema();
        let mut objects = 0;
        every_object(&schema, &mut |m| {
            assert!(
                !m.contains_key("oneOf") && !m.contains_key("format") && !m.contains_key("$ref")
            );
            if let Some(props) = m.get("properties").and_then(Value::as_object) {
                objects += 1;
                assert_eq!(m.get("additionalProperties"), Some(&json!(false)));
                let req: BTreeSet<&str> = m["required"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                assert_eq!(req, props.keys().map(String::as_str).collect());
            }
        });
        assert_eq!(objects, 5, "reply, row, finding, location, disposition");
    }

    fn manifest() -> ContextManifest {
        let d: Digest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
            .parse()
            .unwrap();
        let entry = |r: &str, kind| ManifestEntry {
            ref_: r.into(),
            kind,
            resource_kind: None,
            digest: d.clone(),
            bytes_total: 1,
            bytes_included: 1,
            truncated: false,
            required: true,
        };
        ContextManifest {
            schema: ManifestSchema::V1,
            construction: Construction {
                revision: "r".into(),
                token_estimate: "t".into(),
                budget_tokens: 1,
                estimated_tokens: 1,
            },
            subject_digest: d.clone(),
            generation: 1,
            verifier_class: "reviewer".parse().unwrap(),
            template_digest: d.clone(),
            result_schema: RESULT_SCHEMA_VERSION.into(),
            criteria: ManifestCriteria {
                revision: "c".parse().unwrap(),
                asked: vec!["a".parse().unwrap(), "b".parse().unwrap()],
            },
            prior_findings: vec![FindingKey {
                id: "f-1".parse().unwrap(),
                version: 2,
            }],
            entries: vec![
                entry("objective", EntryKind::Objective),
                entry("diff", EntryKind::Resource),
                entry("ev-1", EntryKind::CheckEvidence),
                entry("ev-1:output", EntryKind::CheckOutput),
            ],
            exclusions: vec![],
            complete: true,
        }
    }

    const N: &str = "0123456789abcdef0123456789abcdef";

    fn reply() -> Value {
        json!({"nonce": N,
            "criteria": [
                {"id": "b", "status": "failed", "evidence_refs": ["diff", "diff"], "rationale": "r"},
                {"id": "a", "status": "passed", "evidence_refs": ["ev-1"], "rationale": "r"}],
            "findings": [{"criterion": "b", "type": "bug", "severity": "blocker", "scope": "change",
                "location": {"resource": "diff", "path": "x.rs", "line": 3}, "evidence_refs": ["diff"],
                "remediation": null, "confidence": 0.5}],
            "dispositions": [{"finding": "f-1", "version": 2, "disposition": "still_present", "evidence_refs": [], "reason": null}]})
    }

    fn check(v: &Value) -> Result<ValidReply, InvalidReply> {
        let m = manifest();
        ReplyValidator::new().unwrap().validate(
            &v.to_string(),
            ReplyRules {
                nonce: N,
                manifest: &m,
                refs_waived: &[],
                redact: &no_secrets,
            },
        )
    }

    #[test]
    fn a_valid_reply_becomes_contract_rows_in_the_asked_order() {
        let v = check(&reply()).unwrap();
        let ids: Vec<&str> = v.rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(v.rows[1].evidence_refs, ["diff"], "repeated refs collapse");
        assert_eq!(v.findings[0].method, METHOD);
        assert_eq!(v.dispositions[0].disposition, DispositionKind::StillPresent);
        // The same problem gets the same id on every run.
        assert_eq!(check(&reply()).unwrap().findings[0].id, v.findings[0].id);
    }

    #[test]
    fn what_a_schema_cannot_say_is_still_refused() {
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Edit)> = vec![
            (
                "not a citable entry",
                Box::new(|v| v["criteria"][0]["evidence_refs"] = json!(["ev-1:output"])),
            ),
            (
                "not a resource",
                Box::new(|v| v["findings"][0]["location"]["resource"] = json!("ev-1")),
            ),
            (
                "greater than the maximum",
                Box::new(|v| v["findings"][0]["confidence"] = json!(1.5)),
            ),
            (
                "empty type",
                Box::new(|v| v["findings"][0]["type"] = json!("  ")),
            ),
            (
                "longer than",
                Box::new(|v| v["findings"][0]["type"] = json!("x".repeat(129))),
            ),
            (
                "no disposition",
                Box::new(|v| v["dispositions"] = json!([])),
            ),
            (
                "more than one disposition",
                Box::new(|v| {
                    let d = v["dispositions"][0].clone();
                    v["dispositions"].as_array_mut().unwrap().push(d);
                }),
            ),
            (
                "not a listed prior blocker",
                Box::new(|v| v["dispositions"][0]["version"] = json!(1)),
            ),
            (
                "without a reason",
                Box::new(|v| {
                    v["dispositions"][0]["disposition"] = json!("superseded_by_subject_change")
                }),
            ),
            (
                "result schema",
                Box::new(|v| v["criteria"][0]["evidence_refs"] = json!("diff")),
            ),
            (
                "result schema",
                Box::new(|v| {
                    v.as_object_mut().unwrap().remove("findings");
                }),
            ),
        ];
        for (want, edit) in cases {
            let mut v = reply();
            edit(&mut v);
            let err = check(&v).unwrap_err();
            assert!(err.detail.contains(want), "{want}: {}", err.detail);
        }
        let m = manifest();
        let val = ReplyValidator::new().unwrap();
        let rules = ReplyRules {
            nonce: N,
            manifest: &m,
            refs_waived: &[],
            redact: &no_secrets,
        };
        let dup = format!("{{\"nonce\": \"{N}\", \"nonce\": \"{N}\"}}");
        assert!(
            val.validate(&dup, rules)
                .unwrap_err()
                .detail
                .contains("duplicate object key")
        );
        assert!(
            val.validate("[]", rules)
                .unwrap_err()
                .detail
                .contains("result schema")
        );
    }

    #[test]
    fn messages_quote_untrusted_text_briefly_and_safely() {
        let mut v = reply();
        v["nonce"] = json!(format!("\u{202e}{}", "A".repeat(500)));
        let err = check(&v).unwrap_err();
        assert!(err.detail.len() < 200, "{}", err.detail);
        assert!(!err.detail.contains('\u{202e}'));
    }

    #[test]
    fn a_pass_cites_refs_unless_the_policy_waives_it_for_that_criterion() {
        let m = manifest();
        let val = ReplyValidator::new().unwrap();
        let mut v = reply();
        v["criteria"][1]["evidence_refs"] = json!([]);
        let text = v.to_string();
        let with = |waived: &[Id]| {
            val.validate(
                &text,
                ReplyRules {
                    nonce: N,
                    manifest: &m,
                    refs_waived: waived,
                    redact: &no_secrets,
                },
            )
        };
        let err = with(&[]).unwrap_err();
        assert!(
            err.detail.contains("\"a\" is passed but cites no ref"),
            "{}",
            err.detail
        );
        // A waiver for another criterion changes nothing; one for this criterion admits it.
        assert!(with(&["b".parse().unwrap()]).is_err());
        let ok = with(&["a".parse().unwrap()]).unwrap();
        assert!(ok.rows[0].evidence_refs.is_empty());
        // A failed row may cite nothing.
        let mut v = reply();
        v["criteria"][0]["evidence_refs"] = json!([]);
        assert!(check(&v).is_ok());
    }

    #[test]
    fn quoted_text_is_redacted_before_it_is_clipped() {
        let key = "k3y".repeat(32);
        let secret = crate::secret::Secret::new(key.clone());
        let redact = |t: &str| secret.redact(t);
        let m = manifest();
        let mut v = reply();
        v["nonce"] = json!(key);
        let err = ReplyValidator::new()
            .unwrap()
            .validate(
                &v.to_string(),
                ReplyRules {
                    nonce: N,
                    manifest: &m,
                    refs_waived: &[],
                    redact: &redact,
                },
            )
            .unwrap_err();
        assert!(err.detail.contains("[redacted]"), "{}", err.detail);
        assert!(
            !err.detail.contains(&key[..crate::secret::MIN_RUN]),
            "{}",
            err.detail
        );
    }
}
