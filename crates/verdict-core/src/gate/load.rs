//! Reading a bundle into typed documents (docs/spec/bundle.md), before any decision is made.
//!
//! Carried digests are checked first: a mismatch is `evidence_tampered` and the item is not
//! read. A document that breaks its schema makes the whole bundle `invalid_input`, except a
//! verification result, which is the verifier's output: that one is `verifier_output_invalid`
//! and simply not counted. Details name items by id and digest, never by array position, so a
//! permutation of the bundle's arrays cannot change a single byte of the decision.

use super::reasons::{Reasons, fixed};
use crate::canonical;
use crate::contracts::{
    CheckEvidence, DecodeError, Finding, HumanDecision, Policy, ReasonCode, Subject, Timestamp,
    VerificationResult, decode_plain,
};
use crate::digest::{self, CarriedDigestError, Digest, DigestKind};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// A document with its digest.
pub(crate) struct Item<T> {
    pub doc: T,
    pub digest: Digest,
}

/// A bundle whose documents all read.
pub(crate) struct Loaded {
    pub policy: Policy,
    pub policy_digest: Digest,
    pub subject: Subject,
    pub subject_digest: Digest,
    pub now: Timestamp,
    /// Intact check evidence, one per digest, sorted by digest.
    pub evidence: Vec<Item<CheckEvidence>>,
    /// Intact, schema-valid verification results, one per digest, sorted by digest.
    pub verifications: Vec<Item<VerificationResult>>,
    pub human_decisions: Vec<Item<HumanDecision>>,
    pub prior_findings: Vec<Item<Finding>>,
    pub evidence_set_digest: Digest,
    /// The raw digest of each item whose carried digest failed, as it was sent (carried digest
    /// included), sorted and unique. The evidence set is made of digests taken without the
    /// carried field, so without these a tampered item and the same item sent honestly, or
    /// with another forged value, would share an evaluation key and not a decision.
    pub tampered: Vec<Digest>,
    /// Tampering and unreadable verifier output found while reading.
    pub reasons: Reasons,
}

/// What can still be said about a bundle that breaks the contract.
#[derive(Default)]
pub(crate) struct Invalid {
    pub subject_digest: Option<Digest>,
    pub policy_digest: Option<Digest>,
    pub evidence_set_digest: Option<Digest>,
    pub reasons: Reasons,
}

const ARRAYS: [(&str, DigestKind); 4] = [
    ("evidence", DigestKind::Evidence),
    ("verifications", DigestKind::Verification),
    ("human_decisions", DigestKind::HumanDecision),
    ("prior_findings", DigestKind::Finding),
];
pub(crate) const FIELDS: [&str; 8] = [
    "schema",
    "policy",
    "subject",
    "evidence",
    "verifications",
    "human_decisions",
    "prior_findings",
    "now",
];
pub(crate) const BUNDLE_SCHEMA: &str = "verdict.gate-bundle/v1";

/// Names an item for a reason's detail: by id where it has one, always by digest.
pub(crate) fn describe(doc: &Value, d: &Digest) -> String {
    match doc.get("id").and_then(Value::as_str) {
        Some(id) if crate::contracts::primitives::is_printable_name(id) => {
            format!("id {id:?} ({d})")
        }
        _ => format!("({d})"),
    }
}

/// `digest("evidence-set", sorted unique digests of every item in the bundle)`, from the
/// digests of the four arrays.
pub(crate) fn evidence_set<'a>(digests: impl IntoIterator<Item = &'a Digest>) -> Digest {
    let mut all: Vec<&Digest> = digests.into_iter().collect();
    all.sort();
    all.dedup();
    // The canonical form of a list of strings, written directly.
    let mut list = Vec::with_capacity(2 + 74 * all.len());
    list.push(b'[');
    for (i, d) in all.into_iter().enumerate() {
        if i > 0 {
            list.push(b',');
        }
        crate::canonical::write_str(d.as_str(), &mut list);
    }
    list.push(b']');
    digest::digest_canonical(DigestKind::EvidenceSet, &list)
}

/// The digest of every item of each of the four arrays (`None` when one is not an array).
fn item_digests(top: &Map<String, Value>) -> Option<Vec<Vec<Digest>>> {
    ARRAYS
        .iter()
        .map(|(field, kind)| {
            top.get(*field)?.as_array().map(|a| {
                let mut buf = Vec::with_capacity(4096);
                a.iter()
                    .map(|v| digest::digest_into(*kind, v, &mut buf))
                    .collect()
            })
        })
        .collect()
}

fn object_digest(top: &Map<String, Value>, field: &str, kind: DigestKind) -> Option<Digest> {
    top.get(field)
        .filter(|v| v.is_object())
        .map(|v| digest::digest(kind, v))
}

/// Reads the bundle, or says why it cannot be evaluated.
pub(crate) fn load(v: &Value) -> Result<Loaded, Invalid> {
    let mut inv = Invalid::default();
    let Some(top) = v.as_object() else {
        inv.reasons.add(
            fixed(ReasonCode::InvalidInput),
            "the bundle is not a json object",
        );
        return Err(inv);
    };
    inv.subject_digest = object_digest(top, "subject", DigestKind::Subject);
    inv.policy_digest = object_digest(top, "policy", DigestKind::Policy);
    let digests = item_digests(top);
    inv.evidence_set_digest = digests.as_deref().map(|d| evidence_set(d.iter().flatten()));
    let digests_of = |i: usize| {
        digests
            .as_ref()
            .and_then(|d| d.get(i))
            .map(Vec::as_slice)
            .unwrap_or_default()
    };

    for k in top.keys() {
        if !FIELDS.contains(&k.as_str()) {
            inv.reasons.add(
                fixed(ReasonCode::InvalidInput),
                format!("unknown field {k:?} in the bundle"),
            );
        }
    }
    for f in FIELDS {
        if !top.contains_key(f) {
            inv.reasons.add(
                fixed(ReasonCode::InvalidInput),
                format!("missing field {f:?} in the bundle"),
            );
        }
    }
    match top.get("schema") {
        Some(Value::String(s)) if s == BUNDLE_SCHEMA => {}
        Some(_) => inv.reasons.add(
            fixed(ReasonCode::InvalidInput),
            format!("/schema: expected {BUNDLE_SCHEMA:?}"),
        ),
        None => {}
    }
    for (field, _) in ARRAYS {
        if top.get(field).is_some_and(|a| !a.is_array()) {
            inv.reasons.add(
                fixed(ReasonCode::InvalidInput),
                format!("/{field}: expected an array"),
            );
        }
    }

    let policy = top.get("policy").and_then(|p| {
        top_document::<Policy>(
            p,
            "policy",
            DigestKind::Policy,
            inv.policy_digest.as_ref(),
            &mut inv.reasons,
        )
    });
    let subject = top.get("subject").and_then(|s| {
        top_document::<Subject>(
            s,
            "subject",
            DigestKind::Subject,
            inv.subject_digest.as_ref(),
            &mut inv.reasons,
        )
    });
    let now = top
        .get("now")
        .and_then(|n| match decode_plain::<Timestamp>(n) {
            Ok(t) => Some(t),
            Err(e) => {
                inv.reasons.add(
                    fixed(ReasonCode::InvalidInput),
                    format!("/now: {}", schema_message(&e)),
                );
                None
            }
        });

    let mut reasons = Reasons::default();
    let mut tampered = Vec::new();
    let mut tamper = Tamper {
        reasons: &mut reasons,
        sent: &mut tampered,
    };
    let evidence = items::<CheckEvidence>(
        top,
        "evidence",
        digests_of(0),
        &mut inv.reasons,
        &mut tamper,
    );
    let verifications = verification_items(
        top,
        digests_of(1),
        subject.as_ref().map(|s| &s.1),
        &mut tamper,
    );
    let human_decisions = items::<HumanDecision>(
        top,
        "human_decisions",
        digests_of(2),
        &mut inv.reasons,
        &mut tamper,
    );
    let prior_findings = items::<Finding>(
        top,
        "prior_findings",
        digests_of(3),
        &mut inv.reasons,
        &mut tamper,
    );

    match (policy, subject, now, inv.evidence_set_digest.clone()) {
        (Some((policy, policy_digest)), Some((subject, subject_digest)), Some(now), Some(esd))
            if inv.reasons.is_empty() =>
        {
            Ok(Loaded {
                policy,
                policy_digest,
                subject,
                subject_digest,
                now,
                evidence,
                verifications,
                human_decisions,
                prior_findings,
                evidence_set_digest: esd,
                tampered: {
                    tampered.sort();
                    tampered.dedup();
                    tampered
                },
                reasons,
            })
        }
        _ => {
            if inv.reasons.is_empty() {
                inv.reasons.add(
                    fixed(ReasonCode::InvalidInput),
                    "the bundle could not be read",
                );
            }
            Err(inv)
        }
    }
}

fn schema_message(e: &DecodeError) -> String {
    match e {
        DecodeError::Schema { path, message } => format!("{path}: {message}"),
        DecodeError::Tampered(t) => t.to_string(),
    }
}

/// Reads the policy or the subject, whose digest `known` is already computed when it is an
/// object; the same as `decode`, without hashing the document a second time.
fn top_document<T: DeserializeOwned>(
    v: &Value,
    field: &str,
    kind: DigestKind,
    known: Option<&Digest>,
    reasons: &mut Reasons,
) -> Option<(T, Digest)> {
    let read = || -> Result<(T, Digest), DecodeError> {
        let d = known.cloned().unwrap_or_else(|| digest::digest(kind, v));
        let stripped = carried(v, &d).map_err(DecodeError::Tampered)?;
        let t = decode_plain::<T>(stripped.as_ref().unwrap_or(v))?;
        Ok((t, d))
    };
    match read() {
        Ok(x) => Some(x),
        Err(DecodeError::Tampered(t)) => {
            reasons.add(
                fixed(ReasonCode::EvidenceTampered),
                format!("the {field}: {t}"),
            );
            None
        }
        Err(DecodeError::Schema { path, message }) => {
            let path = if path == "/" { String::new() } else { path };
            reasons.add(
                fixed(ReasonCode::InvalidInput),
                format!("/{field}{path}: {message}"),
            );
            None
        }
    }
}

/// Checks a carried digest against the digest already computed for the document, and returns
/// the document without it.
fn carried(v: &Value, d: &Digest) -> Result<Option<Value>, CarriedDigestError> {
    digest::check_carried(v, d)?;
    if v.get(digest::CARRIED_FIELD).is_none() {
        return Ok(None);
    }
    let mut stripped = v.clone();
    if let Some(o) = stripped.as_object_mut() {
        o.remove(digest::CARRIED_FIELD);
    }
    Ok(Some(stripped))
}

/// Where reading an array reports an item whose carried digest failed.
struct Tamper<'a> {
    reasons: &'a mut Reasons,
    /// See [`Loaded::tampered`].
    sent: &'a mut Vec<Digest>,
}

impl Tamper<'_> {
    fn add(&mut self, sent: &Value, detail: String) {
        self.reasons
            .add(fixed(ReasonCode::EvidenceTampered), detail);
        self.sent.push(digest::raw(&canonical::to_vec(sent)));
    }
}

/// Reads one array of documents whose digests are known. Unreadable items make the bundle
/// invalid; tampered ones are reported and left out.
fn items<T: DeserializeOwned>(
    top: &Map<String, Value>,
    field: &str,
    digests: &[Digest],
    invalid: &mut Reasons,
    tamper: &mut Tamper<'_>,
) -> Vec<Item<T>> {
    let mut out: Vec<Item<T>> = Vec::new();
    let mut seen = BTreeSet::new();
    let values = top
        .get(field)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (v, d) in values.iter().zip(digests) {
        // Every copy's carried digest is checked, so the order of copies never matters.
        let stripped = match carried(v, d) {
            Ok(s) => s,
            Err(t) => {
                tamper.add(v, format!("{field} item {}: {t}", describe(v, d)));
                continue;
            }
        };
        if !seen.insert(d) {
            continue; // the same document twice is the same member of the set
        }
        match decode_plain::<T>(stripped.as_ref().unwrap_or(v)) {
            Ok(doc) => out.push(Item {
                doc,
                digest: d.clone(),
            }),
            Err(e) => invalid.add(
                fixed(ReasonCode::InvalidInput),
                format!("{field} item {} at {}", describe(v, d), schema_message(&e)),
            ),
        }
    }
    out.sort_by(|a, b| a.digest.cmp(&b.digest));
    out
}

/// Drops the result's own carried digest (already checked), then checks and strips the carried
/// digests of the findings nested in it; `None` when there is no carried digest to strip.
fn strip_nested_findings(v: &Value) -> Result<Option<Value>, String> {
    let carries = |x: &Value| {
        x.as_object()
            .is_some_and(|o| o.contains_key(digest::CARRIED_FIELD))
    };
    let nested = v
        .get("findings")
        .and_then(Value::as_array)
        .is_some_and(|fs| fs.iter().any(carries));
    if !carries(v) && !nested {
        return Ok(None);
    }
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove(digest::CARRIED_FIELD);
    }
    if let Some(findings) = v.get_mut("findings").and_then(Value::as_array_mut) {
        for f in findings.iter_mut() {
            if f.as_object()
                .is_some_and(|o| o.contains_key(digest::CARRIED_FIELD))
            {
                digest::verify_carried(DigestKind::Finding, f).map_err(|e| {
                    format!(
                        "nested finding {}: {e}",
                        describe(f, &digest::digest(DigestKind::Finding, f))
                    )
                })?;
                if let Some(o) = f.as_object_mut() {
                    o.remove(digest::CARRIED_FIELD);
                }
            }
        }
    }
    Ok(Some(v))
}

/// Reads verification results. They are the verifiers' output: one that breaks the schema is
/// `verifier_output_invalid` (when it is about this subject) and is not counted.
fn verification_items(
    top: &Map<String, Value>,
    digests: &[Digest],
    subject_digest: Option<&Digest>,
    tamper: &mut Tamper<'_>,
) -> Vec<Item<VerificationResult>> {
    let mut out: Vec<Item<VerificationResult>> = Vec::new();
    let mut seen = BTreeSet::new();
    let values = top
        .get("verifications")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (v, d) in values.iter().zip(digests) {
        let about_other = match (
            v.get("subject_digest").and_then(Value::as_str),
            subject_digest,
        ) {
            (Some(s), Some(sd)) => s != sd.as_str(),
            _ => false,
        };
        // Every copy's carried digests are checked, so the order of copies never matters.
        if let Err(t) = carried(v, d) {
            tamper.add(v, format!("verifications item {}: {t}", describe(v, d)));
            continue;
        }
        let stripped = match strip_nested_findings(v) {
            Ok(s) => s,
            Err(t) => {
                tamper.add(v, format!("verifications item {}: {t}", describe(v, d)));
                continue;
            }
        };
        if !seen.insert(d) {
            continue;
        }
        match decode_plain::<VerificationResult>(stripped.as_ref().unwrap_or(v)) {
            Ok(doc) => out.push(Item {
                doc,
                digest: d.clone(),
            }),
            Err(e) if !about_other => tamper.reasons.add(
                fixed(ReasonCode::VerifierOutputInvalid),
                format!(
                    "verification {} breaks the schema: {}",
                    describe(v, d),
                    schema_message(&e)
                ),
            ),
            Err(_) => {} // about another subject: not counted either way
        }
    }
    out.sort_by(|a, b| a.digest.cmp(&b.digest));
    out
}
