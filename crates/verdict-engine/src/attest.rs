//! Signed attestations of stored decisions, the public keys that sign them, and the exports
//! for others' tools (JUnit, GitHub). The formats are `verdict-attest`'s; this module reads the
//! store, checks authority and records which key signed what.
//!
//! The records of signing (which keys sign, which attestation each key made) are lifecycle
//! notes (`notes.rs`) among the requests, written by the operator who asked, and believed only
//! when the audit chain says an operator (or, for older records, the engine) wrote them.

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use ed25519_dalek::{SigningKey, VerifyingKey};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use verdict_attest::github::{Applicable, GithubPayloads};
use verdict_attest::{AttestError, DecisionInput};
use verdict_core::contracts::{Outcome, Role, Subject};
use verdict_core::digest::{Digest, DigestKind};
use verdict_store::{About, DocKind, StoreClock, Stored};

/// Schema of the engine's record of a public key it signs attestations with.
pub const SIGNING_KEY_SCHEMA: &str = "verdict.signing-key/v1";
/// Schema of the engine's record of one attestation it signed.
pub const ATTESTATION_SCHEMA: &str = "verdict.attestation/v1";

/// A public key the engine signs with. Its bytes depend on the key alone, so the record of a
/// key is found by its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SigningKeyRecord {
    /// [`SIGNING_KEY_SCHEMA`].
    pub schema: String,
    /// Hex SHA-256 of the raw public key.
    pub key_id: String,
    /// The ed25519 public key, 64 hex digits.
    pub public_key: String,
}

impl SigningKeyRecord {
    /// The record of `key`.
    #[must_use]
    pub fn of(key: &VerifyingKey) -> Self {
        Self {
            schema: SIGNING_KEY_SCHEMA.to_owned(),
            key_id: verdict_attest::keys::key_id(key),
            public_key: verdict_attest::keys::hex(key.as_bytes()),
        }
    }
}

/// One signed envelope of an attestation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignedEnvelope {
    /// SHA-256 of the signed payload bytes.
    pub payload_sha256: Digest,
    /// The base64 signature.
    pub signature: String,
}

/// Which key signed which decision, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttestationRecord {
    /// [`ATTESTATION_SCHEMA`].
    pub schema: String,
    /// The verification subject.
    pub subject_digest: Digest,
    /// The decision's evaluation key.
    pub evaluation_key: Digest,
    /// Its outcome.
    pub outcome: Outcome,
    /// The signing key's id.
    pub key_id: String,
    /// The signing key, so the record alone says how to check what it names.
    pub public_key: String,
    /// Whether the bundle was embedded.
    pub bundle_included: bool,
    /// The envelopes, in file order.
    pub envelopes: Vec<SignedEnvelope>,
}

/// What `attest` made.
#[derive(Debug, Clone)]
pub struct Attested {
    /// The attestation file: one DSSE envelope per line.
    pub jsonl: String,
    /// The record stored about it.
    pub record: AttestationRecord,
}

fn attest_error(e: AttestError) -> EngineError {
    EngineError::Invalid {
        what: "attestation",
        message: e.to_string(),
    }
}

/// The store's clock as the exports name it.
const fn export_clock(clock: StoreClock) -> verdict_attest::Clock {
    match clock {
        StoreClock::System => verdict_attest::Clock::System,
        StoreClock::Manual => verdict_attest::Clock::Manual,
    }
}

fn to_value<T: Serialize>(what: &'static str, t: &T) -> Result<Value> {
    serde_json::to_value(t).map_err(|e| invalid(what)(e.to_string()))
}

impl Engine {
    /// The engine's stored record of `key`, if it has one.
    async fn key_row(&self, key: &VerifyingKey) -> Result<Option<(Stored, bool)>> {
        let doc = to_value("signing key record", &SigningKeyRecord::of(key))?;
        let digest = verdict_core::digest::digest(DigestKind::Request, &doc);
        match self.store.get(DocKind::Request, &digest).await? {
            Some(row) => {
                let ours = self.written_by_an_operator(&row).await?;
                Ok(Some((row, ours)))
            }
            None => Ok(None),
        }
    }

    /// Whether the engine has recorded `key` as one it signs with. Signing keys are public, so
    /// any authenticated principal may ask.
    pub async fn signing_key_registered(
        &self,
        _caller: &Principal,
        key: &VerifyingKey,
    ) -> Result<bool> {
        Ok(self.key_row(key).await?.is_some_and(|(_, ours)| ours))
    }

    /// Records `key` as a key the engine signs attestations with (operator only). Recording a
    /// key again changes nothing; keys are never removed, so every attestation stays checkable
    /// after a rotation.
    pub async fn register_signing_key(
        &self,
        caller: &Principal,
        key: &VerifyingKey,
    ) -> Result<SigningKeyRecord> {
        self.require_role(caller, &[Role::Operator], "register signing keys")
            .await?;
        let record = SigningKeyRecord::of(key);
        match self.key_row(key).await? {
            Some((_, true)) => Ok(record),
            Some((_, false)) => Err(EngineError::Conflict(format!(
                "a record of key {} was written by someone other than an operator; it is not trusted",
                record.key_id
            ))),
            // The operator's own act, written as the operator.
            None => {
                self.put_note_as(&caller.actor(), &record).await?;
                Ok(record)
            }
        }
    }

    /// Signs the decision stored under `evaluation_key` (operator only): the decision is
    /// replayed from its record first, and only a bundle that reproduces it byte for byte is
    /// attested. A pass that no longer applies at `now` is refused; any other outcome can be
    /// attested at any time, since it never claims more than it says. The key is recorded if
    /// it was not, and the attestation is recorded with the key that signed it.
    pub async fn attest(
        &self,
        caller: &Principal,
        evaluation_key: &Digest,
        signer: &SigningKey,
        include_bundle: bool,
    ) -> Result<Attested> {
        self.require_role(caller, &[Role::Operator], "sign attestations")
            .await?;
        let (run, bundle) = self.replay_unscoped(evaluation_key).await?;
        let decision = run.decision;
        let subject_digest =
            decision
                .subject_digest
                .clone()
                .ok_or_else(|| EngineError::NotFound {
                    what: "subject of decision",
                    key: evaluation_key.to_string(),
                })?;
        if decision.outcome == Outcome::Pass {
            let execution = self.subject(&subject_digest).await?.execution.id;
            let history = self.history_unscoped(execution.as_str()).await?;
            let view = history
                .decisions
                .iter()
                .find(|v| v.decision.evaluation_key.as_ref() == Some(evaluation_key));
            // Fail closed: a pass this gate's history cannot place is never attested.
            let Some(view) = view else {
                return Err(EngineError::Conflict(format!(
                    "the pass {evaluation_key} is not among the decisions of gate {:?}; it is not attested",
                    self.gate()
                )));
            };
            if !view.applies() {
                let why: Vec<&str> = view.not_applicable.iter().map(|w| w.as_str()).collect();
                return Err(EngineError::Conflict(format!(
                    "the pass {evaluation_key} no longer applies ({}); it is not attested",
                    why.join(", ")
                )));
            }
        }
        let verifying = signer.verifying_key();
        if let Some((_, false)) = self.key_row(&verifying).await? {
            return Err(EngineError::Conflict(format!(
                "a record of key {} was written by someone other than an operator; it is not trusted",
                verdict_attest::keys::key_id(&verifying)
            )));
        }
        let decision_value = verdict_core::json::parse(run.bytes.as_bytes())
            .map_err(|e| invalid("stored decision")(e.to_string()))?;
        let attestation = verdict_attest::attest(
            &DecisionInput {
                gate: &self.gate,
                decision: &decision_value,
                bundle: &bundle,
                include_bundle,
                clock: export_clock(self.clock().await?),
                verifier_version: BTreeMap::from([(
                    "verdict".to_owned(),
                    env!("CARGO_PKG_VERSION").to_owned(),
                )]),
            },
            signer,
        )
        .map_err(attest_error)?;
        let mut envelopes = Vec::with_capacity(attestation.envelopes.len());
        for e in &attestation.envelopes {
            let payload =
                verdict_attest::dsse::b64_decode(&e.payload, "payload").map_err(attest_error)?;
            envelopes.push(SignedEnvelope {
                payload_sha256: verdict_core::digest::raw(&payload),
                signature: e
                    .signatures
                    .first()
                    .map(|s| s.sig.clone())
                    .unwrap_or_default(),
            });
        }
        let record = AttestationRecord {
            schema: ATTESTATION_SCHEMA.to_owned(),
            subject_digest,
            evaluation_key: evaluation_key.clone(),
            outcome: decision.outcome,
            key_id: attestation.key_id.clone(),
            public_key: verdict_attest::keys::hex(verifying.as_bytes()),
            bundle_included: include_bundle,
            envelopes,
        };
        let jsonl = attestation.to_jsonl().map_err(attest_error)?;
        // The key and the attestation in one transaction: an attestation is never on record
        // without the key that made it. Both are the operator's own acts, written as the
        // operator who asked.
        self.store
            .put_batch(
                &caller.actor(),
                &[
                    (
                        DocKind::Request,
                        to_value("signing key record", &SigningKeyRecord::of(&verifying))?,
                    ),
                    (DocKind::Request, to_value("attestation record", &record)?),
                ],
            )
            .await?;
        Ok(Attested { jsonl, record })
    }

    /// The engine's records of the attestations about `execution`'s subjects, in the order
    /// they were made. Read by an operator, or by a principal holding a grant in force on the
    /// execution or its mission.
    pub async fn attestations(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<Vec<AttestationRecord>> {
        self.require_read(caller, execution, "the attestations")
            .await?;
        self.notes(&About::Execution(execution.to_owned()), ATTESTATION_SCHEMA)
            .await
    }

    /// JUnit XML of the check evidence stored about `execution`'s current subject, judged as
    /// the Gate judges it now: evidence the Gate does not count is a skipped case with the
    /// reason, every pinned check without counted evidence an error case, and one case for the
    /// decision that applies (failing unless it is a pass). Read as [`Engine::attestations`]
    /// are.
    pub async fn junit(&self, caller: &Principal, execution: &str) -> Result<String> {
        self.require_read(caller, execution, "the check evidence")
            .await?;
        let collected = self.collect_unscoped(execution).await?;
        let bundle = collected.bundle(&self.now().await?)?;
        let (status, subject, why) = self.applicable_now(execution).await?;
        let clock = export_clock(self.clock().await?);
        verdict_attest::junit::junit(&bundle, applicable(&status, subject.as_ref(), &why), clock)
            .map_err(attest_error)
    }

    /// The execution's status, the subject its applicable decision is about (read from the
    /// store: the only place that says which commit a decision is about), and why none applies.
    async fn applicable_now(
        &self,
        execution: &str,
    ) -> Result<(crate::applicability::Status, Option<Subject>, String)> {
        let status = self.status_unscoped(execution).await?;
        let why = match (&status.applicable, &status.latest) {
            (Some(_), _) => "the applicable decision names no subject".to_owned(),
            (None, Some(latest)) => {
                let why: Vec<&str> = latest.not_applicable.iter().map(|w| w.as_str()).collect();
                format!("the latest decision does not apply ({})", why.join(", "))
            }
            (None, None) => "no decision yet".to_owned(),
        };
        let subject = match status
            .applicable
            .as_ref()
            .and_then(|v| v.decision.subject_digest.as_ref())
        {
            Some(d) => Some(self.subject(d).await?),
            None => None,
        };
        Ok((status, subject, why))
    }

    /// GitHub check-run and commit-status bodies for `execution` about commit `head_sha`: the
    /// decision that applies at `now`, or none and why. Read as [`Engine::status`] is.
    pub async fn github_payloads(
        &self,
        caller: &Principal,
        execution: &str,
        head_sha: &str,
    ) -> Result<GithubPayloads> {
        self.require_read(caller, execution, "the status").await?;
        let (status, subject, why) = self.applicable_now(execution).await?;
        let clock = export_clock(self.clock().await?);
        verdict_attest::github::payloads(
            &self.gate,
            head_sha,
            applicable(&status, subject.as_ref(), &why),
            clock,
        )
        .map_err(attest_error)
    }
}

/// The applicable decision with its subject, or why none applies.
fn applicable<'a>(
    status: &'a crate::applicability::Status,
    subject: Option<&'a Subject>,
    why: &'a str,
) -> Applicable<'a> {
    match (&status.applicable, subject) {
        (Some(view), Some(subject)) => Applicable::Decision(&view.decision, subject),
        _ => Applicable::None(why),
    }
}
