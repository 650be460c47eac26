//! A gate decision as signed statements, and the check of such a file.
//!
//! An attestation file is JSON Lines: one DSSE envelope per line. The first line is the
//! verification summary of the decision; each further line is the test result of one check
//! evidence the decision read. Everything is derived from the bundle the decision was made from,
//! and nothing is signed unless that bundle reproduces the decision byte for byte.

use crate::dsse::Envelope;
use crate::error::AttestError;
use crate::keys::key_id;
use crate::statement::{
    CheckExtension, Clock, DocumentRef, FAILED, GATE_PASS_LEVEL, GateExtension, PASSED,
    PAYLOAD_TYPE, ResourceDescriptor, STATEMENT_TYPE, SUBJECT_NAME, Statement,
    TEST_RESULT_PREDICATE, TestResult, VERDICT_URI, VERIFIER_ID, VSA_PREDICATE,
    VerificationSummary, VsaVerifier, digest_set, document_ref, hex_of,
};
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use verdict_core::canonical;
use verdict_core::contracts::{
    CheckEvidence, CheckOutcome, GateDecision, Outcome, Subject, Timestamp, decode, decode_plain,
};
use verdict_core::digest::{Digest, DigestKind, digest};

/// The items of a gate bundle, each kept as the document it is, so digests are taken over
/// exactly the stored bytes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct BundleItems {
    #[serde(rename = "schema")]
    _schema: String,
    policy: Value,
    subject: Value,
    evidence: Vec<Value>,
    verifications: Vec<Value>,
    human_decisions: Vec<Value>,
    prior_findings: Vec<Value>,
    now: Timestamp,
}

impl BundleItems {
    fn read(bundle: &Value) -> Result<Self, AttestError> {
        serde_json::from_value(bundle.clone())
            .map_err(|e| AttestError::Input(format!("gate bundle: {e}")))
    }

    /// Every document the Gate read besides subject and policy, as sorted references.
    fn inputs(&self) -> Vec<DocumentRef> {
        let groups: [(DigestKind, &[Value]); 4] = [
            (DigestKind::Evidence, &self.evidence),
            (DigestKind::Verification, &self.verifications),
            (DigestKind::HumanDecision, &self.human_decisions),
            (DigestKind::Finding, &self.prior_findings),
        ];
        let set: BTreeSet<DocumentRef> = groups
            .iter()
            .flat_map(|(kind, docs)| docs.iter().map(|d| document_ref(*kind, &digest(*kind, d))))
            .collect();
        set.into_iter().collect()
    }
}

/// What to attest: a stored decision and the bundle it replays from.
#[derive(Debug, Clone)]
pub struct DecisionInput<'a> {
    /// The gate's name.
    pub gate: &'a str,
    /// The decision document, as stored.
    pub decision: &'a Value,
    /// The bundle it was decided from.
    pub bundle: &'a Value,
    /// Whether to embed the bundle, so a verifier can re-evaluate it.
    pub include_bundle: bool,
    /// The clock of the store that made the decision.
    pub clock: Clock,
    /// Component name to version, for the summary's `verifier.version`.
    pub verifier_version: BTreeMap<String, String>,
}

/// A signed attestation: the summary's envelope first, then one per check evidence the Gate
/// counted.
#[derive(Debug, Clone)]
pub struct Attestation {
    /// The envelopes, in file order.
    pub envelopes: Vec<Envelope>,
    /// The verification subject.
    pub subject_digest: Digest,
    /// The decision's evaluation key.
    pub evaluation_key: Digest,
    /// The signing key's id.
    pub key_id: String,
}

impl Attestation {
    /// The file: one envelope per line.
    pub fn to_jsonl(&self) -> Result<String, AttestError> {
        let mut out = String::new();
        for e in &self.envelopes {
            out.push_str(&e.to_json()?);
            out.push('\n');
        }
        Ok(out)
    }
}

/// The subject entries of every statement: the verification subject, then its resources.
fn subject_descriptors(subject_doc: &Value) -> Result<Vec<ResourceDescriptor>, AttestError> {
    let (subject, subject_digest): (Subject, _) = decode(DigestKind::Subject, subject_doc)
        .map_err(|e| AttestError::Input(format!("subject: {e}")))?;
    let mut out = vec![ResourceDescriptor {
        name: Some(SUBJECT_NAME.to_owned()),
        uri: Some(format!("{VERDICT_URI}/subject/{}", subject_digest.as_str())),
        digest: digest_set(DigestKind::Subject, &subject_digest),
    }];
    for r in &subject.resources {
        out.push(ResourceDescriptor {
            name: Some(format!("resource:{}", r.name)),
            uri: r.uri.clone(),
            digest: BTreeMap::from([("sha256".to_owned(), hex_of(&r.digest).to_owned())]),
        });
    }
    Ok(out)
}

/// Re-evaluates `bundle` and requires the decision's exact bytes.
fn replay(bundle: &Value, decision: &Value) -> Result<GateDecision, AttestError> {
    let again = verdict_core::gate::evaluate_value(bundle);
    let bytes = again
        .canonical_bytes()
        .map_err(|e| AttestError::Replay(e.to_string()))?;
    if bytes != canonical::to_vec(decision) {
        return Err(AttestError::Replay(
            "the bundle does not reproduce the decision's bytes".into(),
        ));
    }
    Ok(again)
}

/// The digests of the check evidence the Gate counts in `bundle`, by the Gate's own rule; none
/// for a bundle it cannot evaluate (its decision is then `blocked`, with nothing counted).
fn counted_evidence(bundle: &Value) -> BTreeSet<Digest> {
    verdict_core::gate::Prepared::new(bundle)
        .map(|p| p.counted_evidence())
        .unwrap_or_default()
}

fn test_result(evidence: &Value) -> Result<TestResult, AttestError> {
    let (e, evidence_digest): (CheckEvidence, _) = decode(DigestKind::Evidence, evidence)
        .map_err(|err| AttestError::Input(format!("check evidence: {err}")))?;
    let name = e.check.to_string();
    let passed = e.outcome == CheckOutcome::Pass;
    Ok(TestResult {
        result: if passed { PASSED } else { FAILED }.to_owned(),
        configuration: vec![ResourceDescriptor {
            name: Some(format!("check:{name}")),
            uri: None,
            digest: BTreeMap::from([(
                "verdictCheckDefinition".to_owned(),
                hex_of(&e.definition_digest).to_owned(),
            )]),
        }],
        passed_tests: if passed { vec![name.clone()] } else { vec![] },
        warned_tests: vec![],
        failed_tests: if passed { vec![] } else { vec![name] },
        evidence: CheckExtension {
            evidence_digest,
            evidence: evidence.clone(),
        },
    })
}

fn statement_bytes<P: Serialize>(statement: &Statement<P>) -> Result<Vec<u8>, AttestError> {
    let value = serde_json::to_value(statement).map_err(|e| AttestError::Input(e.to_string()))?;
    Ok(canonical::to_vec(&value))
}

/// Builds and signs the attestation of a decision. Refused when the bundle does not reproduce
/// the decision, or the decision has no evaluation key or subject.
pub fn attest(input: &DecisionInput<'_>, key: &SigningKey) -> Result<Attestation, AttestError> {
    let decision = replay(input.bundle, input.decision)?;
    let items = BundleItems::read(input.bundle)?;
    let subject_digest = digest(DigestKind::Subject, &items.subject);
    let policy_digest = digest(DigestKind::Policy, &items.policy);
    let evaluation_key = decision
        .evaluation_key
        .clone()
        .ok_or_else(|| AttestError::Input("the decision has no evaluation key".into()))?;
    if decision.subject_digest.as_ref() != Some(&subject_digest)
        || decision.policy_digest.as_ref() != Some(&policy_digest)
    {
        return Err(AttestError::Input(
            "the decision names another subject or policy than its bundle".into(),
        ));
    }
    let subject = subject_descriptors(&items.subject)?;
    let counted = counted_evidence(input.bundle);
    let pass = decision.outcome == Outcome::Pass;
    let summary = VerificationSummary {
        verifier: VsaVerifier {
            id: VERIFIER_ID.to_owned(),
            version: input.verifier_version.clone(),
        },
        time_verified: items.now.as_str().to_owned(),
        resource_uri: format!("{VERDICT_URI}/subject/{}", subject_digest.as_str()),
        policy: document_ref(DigestKind::Policy, &policy_digest),
        input_attestations: items.inputs(),
        verification_result: if pass { PASSED } else { FAILED }.to_owned(),
        verified_levels: vec![if pass { GATE_PASS_LEVEL } else { FAILED }.to_owned()],
        gate: GateExtension {
            gate: input.gate.to_owned(),
            clock: input.clock,
            outcome: decision.outcome,
            reasons: decision.reasons.clone(),
            evaluation_key: evaluation_key.clone(),
            decision_digest: digest(DigestKind::Decision, input.decision),
            decision: input.decision.clone(),
            counted_evidence: counted.iter().cloned().collect(),
            bundle: input.include_bundle.then(|| input.bundle.clone()),
        },
    };
    let mut envelopes = vec![Envelope::sign(
        PAYLOAD_TYPE,
        &statement_bytes(&Statement {
            statement_type: STATEMENT_TYPE.to_owned(),
            subject: subject.clone(),
            predicate_type: VSA_PREDICATE.to_owned(),
            predicate: summary,
        })?,
        key,
    )];
    let mut signed = BTreeSet::new();
    for evidence in &items.evidence {
        // One test result per evidence the Gate counted, and only for those.
        let d = digest(DigestKind::Evidence, evidence);
        if !counted.contains(&d) || !signed.insert(d) {
            continue;
        }
        envelopes.push(Envelope::sign(
            PAYLOAD_TYPE,
            &statement_bytes(&Statement {
                statement_type: STATEMENT_TYPE.to_owned(),
                subject: subject.clone(),
                predicate_type: TEST_RESULT_PREDICATE.to_owned(),
                predicate: test_result(evidence)?,
            })?,
            key,
        ));
    }
    Ok(Attestation {
        envelopes,
        subject_digest,
        evaluation_key,
        key_id: key_id(&key.verifying_key()),
    })
}

/// What a verified attestation file says.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The Gate's outcome.
    pub outcome: Outcome,
    /// `PASSED` or `FAILED`.
    pub verification_result: String,
    /// The verification subject.
    pub subject_digest: Digest,
    /// The gate whose policy decided (each gate has a policy of its own).
    pub gate: String,
    /// The policy the decision was made under.
    pub policy_digest: Digest,
    /// The decision's evaluation key.
    pub evaluation_key: Digest,
    /// The ids of the trusted keys whose signatures verified.
    pub key_ids: BTreeSet<String>,
    /// How many check evidence test results the file holds.
    pub test_results: usize,
    /// Whether an embedded bundle was re-evaluated and reproduced the decision.
    pub replayed: bool,
    /// The clock of the store that decided.
    pub clock: Clock,
    /// The Gate's `now` for the decision (`timeVerified`).
    pub time_verified: Timestamp,
    /// On a pass that read time-sensitive evidence, the first instant it no longer applies.
    pub valid_until: Option<Timestamp>,
}

/// Why a verified attestation is still not a pass to rely on at some instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "refusal", rename_all = "snake_case")]
pub enum Refusal {
    /// The decision is not `pass`.
    NotPassed {
        /// What it is.
        outcome: Outcome,
    },
    /// The pass stopped applying at `valid_until`, at or before the instant asked about.
    Expired {
        /// When it stopped applying.
        valid_until: Timestamp,
    },
    /// The decision was made on a store whose time the caller chose.
    ManualClock,
    /// The file is about another subject, gate or policy than the relying party pinned.
    Unpinned {
        /// `subject`, `gate` or `policy`.
        what: &'static str,
        /// What was pinned.
        wanted: String,
        /// What the file says.
        found: String,
    },
}

/// What a relying party requires an attestation to be about, beyond a verified pass: the
/// subject it is about to rely on, the gate whose policy it trusts, the policy itself. A pass
/// signed for a lenient gate of the same store is then no pass for a strict one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins {
    /// The verification subject.
    pub subject_digest: Option<Digest>,
    /// The gate.
    pub gate: Option<String>,
    /// The policy.
    pub policy_digest: Option<Digest>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotPassed { outcome } => {
                write!(f, "the decision is {}, not pass", outcome.as_str())
            }
            Self::Expired { valid_until } => {
                write!(f, "expired: the pass stopped applying at {valid_until}")
            }
            Self::ManualClock => f.write_str(
                "made on a store with a manual clock: its time was chosen by the caller",
            ),
            Self::Unpinned {
                what,
                wanted,
                found,
            } => write!(f, "about {what} {found}, not the pinned {wanted}"),
        }
    }
}

impl Report {
    /// Everything that keeps this verified file from being a pass to rely on at `now` (the
    /// relying party's instant; this crate reads no clock). Empty only for a pass from a store on
    /// a real clock (or, with `allow_manual_clock`, any clock) whose `valid_until`, if any, is
    /// after `now`.
    #[must_use]
    pub fn refusals(&self, now: &Timestamp, allow_manual_clock: bool) -> Vec<Refusal> {
        let mut out = Vec::new();
        if self.outcome != Outcome::Pass {
            out.push(Refusal::NotPassed {
                outcome: self.outcome,
            });
        }
        if let Some(until) = &self.valid_until {
            // `valid_until` is exclusive: at that instant the pass no longer applies.
            if now.unix_nanos() >= until.unix_nanos() {
                out.push(Refusal::Expired {
                    valid_until: until.clone(),
                });
            }
        }
        if self.clock == Clock::Manual && !allow_manual_clock {
            out.push(Refusal::ManualClock);
        }
        out
    }

    /// Each pin of `pins` this file does not match; empty when it matches every one given.
    #[must_use]
    pub fn unpinned(&self, pins: &Pins) -> Vec<Refusal> {
        let mut out = Vec::new();
        let mut check = |what: &'static str, wanted: Option<&str>, found: &str| {
            if let Some(wanted) = wanted.filter(|w| *w != found) {
                out.push(Refusal::Unpinned {
                    what,
                    wanted: wanted.to_owned(),
                    found: found.to_owned(),
                });
            }
        };
        check(
            "subject",
            pins.subject_digest.as_ref().map(Digest::as_str),
            self.subject_digest.as_str(),
        );
        check("gate", pins.gate.as_deref(), &self.gate);
        check(
            "policy",
            pins.policy_digest.as_ref().map(Digest::as_str),
            self.policy_digest.as_str(),
        );
        out
    }
}

fn content(message: impl Into<String>) -> AttestError {
    AttestError::Content(message.into())
}

/// Verifies an attestation file against trusted public keys: for each envelope the signature
/// first, then the payload type, then the statement; then the summary against its decision
/// (and the decision against its bundle, when embedded) and every test result against the
/// summary.
pub fn verify(file: &[u8], trusted: &[VerifyingKey]) -> Result<Report, AttestError> {
    let mut summary: Option<(Vec<ResourceDescriptor>, VerificationSummary)> = None;
    let mut results = Vec::new();
    let mut key_ids = BTreeSet::new();
    for (n, line) in file.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let at = |e: AttestError| match e {
            AttestError::Envelope(m) => AttestError::Envelope(format!("line {}: {m}", n + 1)),
            AttestError::Signature(m) => AttestError::Signature(format!("line {}: {m}", n + 1)),
            AttestError::Content(m) => AttestError::Content(format!("line {}: {m}", n + 1)),
            other => other,
        };
        let verified = Envelope::from_json(line)
            .and_then(|env| env.verify(trusted, PAYLOAD_TYPE))
            .map_err(at)?;
        key_ids.insert(verified.key_id.clone());
        let value = verdict_core::json::parse(&verified.body)
            .map_err(|e| at(content(format!("statement is not JSON: {e}"))))?;
        let statement: Statement<Value> = serde_json::from_value(value)
            .map_err(|e| at(content(format!("not an in-toto statement: {e}"))))?;
        if statement.statement_type != STATEMENT_TYPE {
            return Err(at(content(format!(
                "_type {:?} is not {STATEMENT_TYPE}",
                statement.statement_type
            ))));
        }
        match statement.predicate_type.as_str() {
            VSA_PREDICATE => {
                if summary.is_some() {
                    return Err(at(content("a second verification summary")));
                }
                let p: VerificationSummary = serde_json::from_value(statement.predicate)
                    .map_err(|e| at(content(format!("verification summary: {e}"))))?;
                summary = Some((statement.subject, p));
            }
            TEST_RESULT_PREDICATE => {
                let p: TestResult = serde_json::from_value(statement.predicate)
                    .map_err(|e| at(content(format!("test result: {e}"))))?;
                results.push((n + 1, statement.subject, p));
            }
            other => {
                return Err(at(content(format!("unknown predicate type {other:?}"))));
            }
        }
    }
    let Some((subject, vsa)) = summary else {
        return Err(content("the file holds no verification summary"));
    };
    let (subject_digest, policy_digest, replayed, valid_until) = check_summary(&subject, &vsa)?;
    let time_verified: Timestamp = vsa
        .time_verified
        .parse()
        .map_err(|e| content(format!("timeVerified: {e}")))?;
    let inputs: BTreeSet<&DocumentRef> = vsa.input_attestations.iter().collect();
    let mut reported = BTreeSet::new();
    for (line, s, r) in &results {
        if *s != subject {
            return Err(content(format!(
                "line {line}: the test result is about another subject than the summary"
            )));
        }
        check_test_result(r, &subject_digest).map_err(|e| content(format!("line {line}: {e}")))?;
        let reference = document_ref(DigestKind::Evidence, &r.evidence.evidence_digest);
        if !inputs.contains(&reference) {
            return Err(content(format!(
                "line {line}: evidence {} is not among the summary's inputs",
                r.evidence.evidence_digest
            )));
        }
        if !reported.insert(reference) {
            return Err(content(format!(
                "line {line}: evidence {} is reported twice",
                r.evidence.evidence_digest
            )));
        }
    }
    // Every check evidence the Gate counted has its test result, and no other evidence has one:
    // a file with a line removed (a failing check, say) is refused, not read as the checks that
    // remain, and so is one reporting as a result what the Gate did not count.
    let counted: BTreeSet<DocumentRef> = vsa
        .gate
        .counted_evidence
        .iter()
        .map(|d| document_ref(DigestKind::Evidence, d))
        .collect();
    if counted.len() != vsa.gate.counted_evidence.len() {
        return Err(content("the summary names a counted evidence twice"));
    }
    if let Some(stray) = counted.iter().find(|c| !inputs.contains(c)) {
        return Err(content(format!(
            "the summary counts evidence {} that is not among its inputs",
            stray.uri
        )));
    }
    if let Some(missing) = counted.iter().find(|c| !reported.contains(*c)) {
        return Err(content(format!(
            "no test result for the counted evidence {}",
            missing.uri
        )));
    }
    if let Some(extra) = reported.iter().find(|r| !counted.contains(*r)) {
        return Err(content(format!(
            "a test result for evidence {} the Gate did not count",
            extra.uri
        )));
    }
    Ok(Report {
        outcome: vsa.gate.outcome,
        verification_result: vsa.verification_result.clone(),
        subject_digest,
        gate: vsa.gate.gate.clone(),
        policy_digest,
        evaluation_key: vsa.gate.evaluation_key.clone(),
        key_ids,
        test_results: results.len(),
        replayed,
        clock: vsa.gate.clock,
        time_verified,
        valid_until,
    })
}

/// The summary agrees with its own decision, and the decision with its bundle when embedded.
/// Returns the subject, the policy, whether the bundle was replayed, and the decision's
/// `valid_until`.
fn check_summary(
    subject: &[ResourceDescriptor],
    vsa: &VerificationSummary,
) -> Result<(Digest, Digest, bool, Option<Timestamp>), AttestError> {
    let ext = &vsa.gate;
    let decision: GateDecision =
        decode_plain(&ext.decision).map_err(|e| content(format!("embedded decision: {e}")))?;
    if digest(DigestKind::Decision, &ext.decision) != ext.decision_digest {
        return Err(content("the embedded decision does not match its digest"));
    }
    if decision.outcome != ext.outcome
        || decision.reasons != ext.reasons
        || decision.evaluation_key.as_ref() != Some(&ext.evaluation_key)
    {
        return Err(content(
            "outcome, reasons or evaluation key differ from the embedded decision",
        ));
    }
    let pass = decision.outcome == Outcome::Pass;
    let (result, level) = if pass {
        (PASSED, GATE_PASS_LEVEL)
    } else {
        (FAILED, FAILED)
    };
    if vsa.verification_result != result || vsa.verified_levels != [level] {
        return Err(content(format!(
            "verificationResult {:?} / verifiedLevels {:?} do not match outcome {}",
            vsa.verification_result,
            vsa.verified_levels,
            decision.outcome.as_str()
        )));
    }
    if vsa.verifier.id != VERIFIER_ID {
        return Err(content(format!("verifier id {:?}", vsa.verifier.id)));
    }
    let subject_digest = decision
        .subject_digest
        .clone()
        .ok_or_else(|| content("the embedded decision names no subject"))?;
    let policy_digest = decision
        .policy_digest
        .clone()
        .ok_or_else(|| content("the embedded decision names no policy"))?;
    let first = subject
        .first()
        .ok_or_else(|| content("the statement has no subject"))?;
    if first.name.as_deref() != Some(SUBJECT_NAME)
        || first.digest != digest_set(DigestKind::Subject, &subject_digest)
    {
        return Err(content(
            "the statement's subject is not the decision's verification subject",
        ));
    }
    if vsa.policy != document_ref(DigestKind::Policy, &policy_digest)
        || vsa.resource_uri != format!("{VERDICT_URI}/subject/{}", subject_digest.as_str())
    {
        return Err(content("policy or resourceUri differ from the decision"));
    }
    let valid_until = decision.valid_until.clone();
    let Some(bundle) = &ext.bundle else {
        return Ok((subject_digest, policy_digest, false, valid_until));
    };
    replay(bundle, &ext.decision)?;
    if counted_evidence(bundle).into_iter().collect::<Vec<_>>() != ext.counted_evidence {
        return Err(AttestError::Replay(
            "the embedded bundle counts other check evidence than the summary says".into(),
        ));
    }
    let items = BundleItems::read(bundle).map_err(|e| AttestError::Replay(e.to_string()))?;
    if subject_descriptors(&items.subject)? != subject
        || items.inputs() != vsa.input_attestations
        || items.now.as_str() != vsa.time_verified
    {
        return Err(AttestError::Replay(
            "subject, inputs or time verified differ from the embedded bundle".into(),
        ));
    }
    Ok((subject_digest, policy_digest, true, valid_until))
}

fn check_test_result(r: &TestResult, subject: &Digest) -> Result<(), AttestError> {
    let (e, evidence_digest): (CheckEvidence, _) =
        decode(DigestKind::Evidence, &r.evidence.evidence)
            .map_err(|err| content(format!("embedded evidence: {err}")))?;
    if evidence_digest != r.evidence.evidence_digest {
        return Err(content("the embedded evidence does not match its digest"));
    }
    if &e.subject_digest != subject {
        return Err(content("the evidence is about another subject"));
    }
    let expected = test_result(&r.evidence.evidence)?;
    if expected != *r {
        return Err(content(
            "result, configuration or test lists differ from the evidence",
        ));
    }
    Ok(())
}
