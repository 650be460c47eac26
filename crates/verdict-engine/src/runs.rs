//! Verification requests, verifier runs (admission, preflight, the model call) and results.

use crate::budget::RequestBudget;
use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use crate::notes::{RESULT_REFUSAL_SCHEMA, ResultRefusal};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use verdict_core::contracts::{
    Id, Name, Outcome, ReasonCode, Role, Subject, Timestamp, UnavailableReason, VerificationResult,
    VerificationStatus,
};
use verdict_core::digest::{Digest, DigestKind};
use verdict_judge::receipt::Receipt;
use verdict_store::{About, DocKind, Run, RunAdmission, RunStatus};

/// Schema of a verification request.
pub const REQUEST_SCHEMA: &str = "verdict.request/v1";
/// Schema of the engine's note of one admission and its preflight.
pub const ADMISSION_SCHEMA: &str = "verdict.admission/v1";
/// Schema of the note that records the context manifest a run's model was shown.
pub const RUN_CONTEXT_SCHEMA: &str = "verdict.run-context/v1";

/// The schema tag of a run context note.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RunContextSchema {
    /// Version 1.
    #[serde(rename = "verdict.run-context/v1")]
    V1,
}

/// What a model run reports besides its result, for [`Engine::record_run_context`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunReport {
    /// The context manifest the model was shown.
    pub manifest: Value,
    /// One receipt per provider call, in order (none when the result came from the cache).
    #[serde(default)]
    pub receipts: Vec<Receipt>,
    /// Why the run is unavailable, in full and with secrets redacted; `None` when it completed.
    #[serde(default)]
    pub detail: Option<String>,
    /// The cache key the result was served from, when it was.
    #[serde(default)]
    pub cache_key: Option<String>,
}

/// The engine's note of one model run: what the model was shown and what each call did.
/// Stored with the run's subject; `history` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunContext {
    /// `verdict.run-context/v1`.
    pub schema: RunContextSchema,
    /// The run.
    pub run_id: String,
    /// Its subject.
    pub subject_digest: Digest,
    /// `digest("context", manifest)`, computed by the engine.
    pub context_digest: Digest,
    /// The context manifest.
    pub manifest: Value,
    /// One receipt per provider call: provider, model and snapshot, tokens, cost, latency,
    /// attempt, outcome and the full (redacted) failure detail.
    #[serde(default)]
    pub receipts: Vec<Receipt>,
    /// Why the run is unavailable, in full; absent when it completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The cache key the result was served from; absent when the model was called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_key: Option<String>,
}

/// Reasons that deterministic evidence alone can raise; if preflight finds one that already
/// means rework or blocked, no model verifier can change the outcome and none is called.
const DETERMINISTIC: [ReasonCode; 10] = [
    ReasonCode::InvalidInput,
    ReasonCode::NothingToVerify,
    ReasonCode::EvidenceMissing,
    ReasonCode::EvidenceStale,
    ReasonCode::EvidenceFromFuture,
    ReasonCode::EvidenceTampered,
    ReasonCode::EvidenceDefinitionMismatch,
    ReasonCode::CheckError,
    ReasonCode::CheckFailed,
    ReasonCode::PriorBlockerStillPresent,
];

/// A request that may still admit runs, read once per admission.
struct PinnedRequest {
    req: Value,
    subject_digest: Digest,
    subject: Subject,
    execution: String,
    budget: RequestBudget,
}

/// What a model verifier is given for one run.
#[derive(Debug, Clone)]
pub struct VerifyTask {
    /// Run id (the result's `verifier.run`).
    pub run_id: Name,
    /// The admitted verifier principal.
    pub verifier: Name,
    /// Its class.
    pub class: Id,
    /// The subject.
    pub subject: Subject,
    /// Its digest.
    pub subject_digest: Digest,
    /// The generation admitted for.
    pub generation: u64,
    /// The request document.
    pub request: Value,
    /// The check evidence about the subject.
    pub evidence: Vec<Value>,
    /// The prior blocking findings the request pinned, by id and version.
    pub prior_findings: Vec<Value>,
}

/// A verifier the engine calls for a run: a model behind a provider, or a script.
#[async_trait]
pub trait ModelVerifier: Send + Sync {
    /// Returns a verification result document for the task.
    async fn verify(&self, task: &VerifyTask) -> std::result::Result<Value, String>;
}

/// Preflight: the pure Gate over the deterministic evidence alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preflight {
    /// The outcome of that evaluation.
    pub outcome: Outcome,
    /// Whether the model verifier is skipped.
    pub skipped: bool,
    /// The deterministic reasons that decided it (`code: detail`).
    pub reasons: Vec<String>,
}

/// What a submission became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submitted {
    /// The result's digest.
    pub digest: Digest,
    /// Whether it counts (false: history only).
    pub counted: bool,
    /// Why not, when it does not.
    pub why_not: Option<String>,
}

/// What `run_model` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// Preflight had already decided; the verifier was never called.
    Skipped(Preflight),
    /// The verifier answered and its result was submitted.
    Submitted(Submitted),
}

impl Engine {
    /// Creates the verification request for the execution's current subject: it pins the
    /// subject, the gate's policy, the verifier classes the policy requires for the subject's
    /// risk, the open prior blockers (by id and version), the risk class and a budget. Its
    /// digest is its identity.
    pub async fn create_request(
        &self,
        caller: &Principal,
        execution: &str,
        budget: &Value,
    ) -> Result<Digest> {
        self.create_request_for(caller, execution, budget, None)
            .await
    }

    /// [`Engine::create_request`], naming the capability the reliability ledger files the
    /// attempt under instead of the one it derives from the subject.
    pub async fn create_request_for(
        &self,
        caller: &Principal,
        execution: &str,
        budget: &Value,
        capability: Option<&str>,
    ) -> Result<Digest> {
        let now = &self.now().await?;
        let capability = capability
            .map(|c| {
                c.parse::<Name>()
                    .map_err(|e| invalid("capability")(format!("{c:?}: {e}")))
            })
            .transpose()?;
        self.require_role(
            caller,
            &[Role::Producer, Role::Operator],
            "create verification requests",
        )
        .await?;
        let head = self.existing_execution_head(execution).await?;
        let subject = self.subject(&head.subject_digest).await?;
        self.require_grant(caller, &subject, true, "create a verification request", now)
            .await?;
        self.require_live(execution, "take a verification request")
            .await?;
        let budget = RequestBudget::from_value(budget)?.to_value()?;
        let gate = self
            .gate_head()
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "gate policy",
                key: self.gate.clone(),
            })?;
        let policy = self.policy(&gate.policy_digest).await?;
        let classes: BTreeSet<String> = policy
            .verifier_classes_for(subject.risk.class)
            .iter()
            .map(ToString::to_string)
            .collect();
        let prior: Vec<Value> = self
            .prior_blockers(execution, &head.subject_digest)
            .await?
            .into_iter()
            .map(|(id, version)| json!({"id": id.as_str(), "version": version}))
            .collect();
        let doc = json!({
            "schema": REQUEST_SCHEMA,
            "execution": execution,
            "subject_digest": head.subject_digest.as_str(),
            "generation": head.generation,
            "gate": self.gate,
            "policy_digest": gate.policy_digest.as_str(),
            "verifier_classes": classes,
            "prior_blockers": prior,
            "risk_class": serde_json::to_value(subject.risk.class).unwrap_or(Value::Null),
            "budget": budget,
        });
        let mut doc = doc;
        if let (Some(c), Value::Object(map)) = (&capability, &mut doc) {
            // Only when named, so requests that name none keep their digests.
            map.insert("capability".to_owned(), Value::from(c.as_str()));
        }
        Ok(self
            .store
            .put(&caller.actor(), DocKind::Request, &doc)
            .await?
            .digest)
    }

    /// Admits `verifier` to run `run_id` of class `class` for a request, then runs preflight.
    /// An operator admits any verifier; a verifier may only admit itself (the checks below are
    /// the same either way, so self-admission grants nothing an operator's would not). The
    /// verifier must hold a grant in force on the execution and must be neither the producer's
    /// principal nor its run; the request's subject must still be the execution's current one
    /// and its policy the gate's current revision, and the request's `max_runs` must not be
    /// used up. When preflight already ends in rework or blocked, the run is cancelled at once
    /// and records why.
    pub async fn admit(
        &self,
        caller: &Principal,
        request: &Digest,
        verifier: &str,
        class: &str,
        run_id: &str,
    ) -> Result<Preflight> {
        let now = &self.now().await?;
        self.require_role(
            caller,
            &[Role::Operator, Role::Verifier],
            "admit verifier runs",
        )
        .await?;
        if caller.role == Role::Verifier && caller.name.as_str() != verifier {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: format!("admit {verifier:?} to run {run_id:?}"),
                why: "a verifier may only admit itself".into(),
            };
            return Err(self.deny(caller, err).await);
        }
        let pinned = self.pinned_request(request).await?;
        // With a run cap, admissions of one request take turns (a lease on the request), so
        // two racing for the last run cannot both win.
        let slot = match pinned.budget.max_runs {
            Some(_) => Some(self.take_admission_slot(request, now).await?),
            None => None,
        };
        let admitted = self
            .admit_pinned(&pinned, request, verifier, class, run_id, now)
            .await;
        if let Some((job, holder)) = slot {
            // A release that fails never changes what the admission did: the lease lapses on
            // its own within a minute.
            let _ = self
                .store
                .cas_lease(&Self::system(), &job, Some(&holder), None)
                .await;
        }
        admitted
    }

    /// A stored request that may still admit runs: its subject is the execution's current one
    /// and its policy the gate's current revision.
    async fn pinned_request(&self, request: &Digest) -> Result<PinnedRequest> {
        let req = self
            .store
            .get(DocKind::Request, request)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "verification request",
                key: request.to_string(),
            })?
            .value()?;
        if req.get("schema") != Some(&json!(REQUEST_SCHEMA)) {
            return Err(invalid("verification request")(format!(
                "{request} is not a {REQUEST_SCHEMA}"
            )));
        }
        let subject_digest: Digest = req
            .get("subject_digest")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .parse()
            .map_err(|e| invalid("verification request")(format!("subject_digest: {e}")))?;
        let subject = self.subject(&subject_digest).await?;
        let execution = subject.execution.id.to_string();
        self.require_live(&execution, "admit runs").await?;
        let head = self.execution_head(&execution).await?;
        if head.as_ref().map(|h| &h.subject_digest) != Some(&subject_digest) {
            return Err(EngineError::Conflict(format!(
                "request {request} is for subject {subject_digest}, which is no longer execution {execution:?}'s current subject"
            )));
        }
        // A run for a request pinned to a replaced policy could only ever produce a result the
        // current policy did not ask for; a new request is needed.
        let pinned = req.get("policy_digest").and_then(Value::as_str);
        let gate = self.gate_head().await?;
        if pinned.is_none() || gate.as_ref().map(|g| g.policy_digest.as_str()) != pinned {
            return Err(EngineError::Conflict(format!(
                "request {request} pins policy {}, which is no longer gate {:?}'s current revision; create a new request",
                pinned.unwrap_or("(none)"),
                self.gate
            )));
        }
        let budget = RequestBudget::of_request(&req)?;
        Ok(PinnedRequest {
            req,
            subject_digest,
            subject,
            execution,
            budget,
        })
    }

    /// The admission proper, once the request is known to be current (and, with a run cap,
    /// under the request's lease): the cap, the verifier's independence, role, grant and class,
    /// then preflight, its note, the run and, when preflight decided, its cancellation.
    async fn admit_pinned(
        &self,
        pinned: &PinnedRequest,
        request: &Digest,
        verifier: &str,
        class: &str,
        run_id: &str,
        now: &Timestamp,
    ) -> Result<Preflight> {
        let PinnedRequest {
            req,
            subject_digest,
            subject,
            execution,
            budget,
        } = pinned;
        if let Some(max) = budget.max_runs {
            let used = self
                .admission_notes(execution)
                .await?
                .iter()
                .filter(|n| n.get("request_digest") == Some(&json!(request.as_str())))
                .count();
            if used >= usize::try_from(max).unwrap_or(usize::MAX) {
                return Err(EngineError::Conflict(format!(
                    "request {request} allows {max} run(s) and {used} were admitted; create a new request"
                )));
            }
        }
        let Some(record) = self.store.principal(verifier).await? else {
            return Err(EngineError::NotFound {
                what: "principal",
                key: verifier.to_owned(),
            });
        };
        let who = Principal {
            name: record.name,
            role: record.role,
        };
        if who.name == subject.producer.principal || run_id == subject.producer.run.as_str() {
            let err = EngineError::SelfVerificationDenied {
                principal: who.name.to_string(),
                action: format!("be admitted to run {run_id:?}"),
                why: "the producer's principal or run never verifies its own work".into(),
            };
            return Err(self.deny(&who, err).await);
        }
        if who.role != Role::Verifier {
            let err = EngineError::PermissionDenied {
                principal: who.name.to_string(),
                role: who.role.as_str(),
                action: format!("be admitted to run {run_id:?}"),
                why: "only verifier principals run verifications".into(),
            };
            return Err(self.deny(&who, err).await);
        }
        self.require_grant(&who, subject, false, "be admitted to a run", now)
            .await?;
        let classes = req
            .get("verifier_classes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if !classes.contains(&json!(class)) {
            return Err(invalid("verifier class")(format!(
                "request {request} does not ask for class {class:?}"
            )));
        }
        let admission = RunAdmission {
            run_id: run_id
                .parse()
                .map_err(|e| invalid("run id")(format!("{e}")))?,
            request_digest: request.clone(),
            subject_digest: subject_digest.clone(),
            verifier: who.name.clone(),
            class: class
                .parse()
                .map_err(|e| invalid("verifier class")(format!("{e}")))?,
            admitted_generation: subject.execution.generation,
        };
        // The run and its note are appended together: a run is never without the note that
        // says whether a model may be called for it, whatever crashes when.
        let preflight = self.preflight(execution).await?;
        let note = json!({
            "schema": ADMISSION_SCHEMA,
            "run_id": run_id,
            "request_digest": request.as_str(),
            "subject_digest": subject_digest.as_str(),
            "generation": subject.execution.generation,
            "verifier": who.name.as_str(),
            "class": class,
            "preflight": {
                "outcome": preflight.outcome.as_str(),
                "skipped": preflight.skipped,
                "reasons": preflight.reasons,
            },
        });
        // One transaction: an admission the store refuses (a run id already taken, say)
        // leaves no note behind.
        self.store
            .admit_run_noted(&Self::system(), &admission, &note)
            .await?;
        if preflight.skipped {
            self.store
                .record_run_status(&Self::system(), run_id, RunStatus::Cancelled, None)
                .await?;
        }
        Ok(preflight)
    }

    /// Takes the admission lease of a request, or refuses while another admission holds it.
    /// A lease left behind by a crashed admission lapses after a minute.
    async fn take_admission_slot(
        &self,
        request: &Digest,
        now: &Timestamp,
    ) -> Result<(String, verdict_store::LeaseHolder)> {
        let job = format!("{}{request}", verdict_store::ADMISSION_LEASE_PREFIX);
        let current = self
            .store
            .pointer(verdict_store::PointerKind::Lease, &job)
            .await?
            .map(|p| p.lease())
            .transpose()?
            .flatten();
        if let Some(held) = &current
            && held.expires_at.unix_nanos() > now.unix_nanos()
        {
            return Err(EngineError::Conflict(format!(
                "another admission for request {request} is in progress; retry"
            )));
        }
        let holder = verdict_store::LeaseHolder {
            holder: Self::system()
                .principal
                .parse()
                .map_err(|e| invalid("lease holder")(format!("{e}")))?,
            expires_at: now.plus_seconds(60),
        };
        self.store
            .cas_lease(&Self::system(), &job, current.as_ref(), Some(&holder))
            .await
            .map_err(|e| match e {
                verdict_store::StoreError::CasFailed { .. } => EngineError::Conflict(format!(
                    "another admission for request {request} is in progress; retry"
                )),
                other => other.into(),
            })?;
        Ok((job, holder))
    }

    /// The pure Gate over the execution's deterministic evidence alone.
    pub async fn preflight(&self, execution: &str) -> Result<Preflight> {
        let now = &self.now().await?;
        let mut collected = self.collect(execution).await?;
        collected.verifications.clear();
        collected.human_decisions.clear();
        let decision = verdict_core::gate::evaluate_value(&collected.bundle(now)?);
        let decisive: Vec<String> = decision
            .reasons
            .iter()
            .filter(|r| {
                DETERMINISTIC.contains(&r.code)
                    && matches!(r.outcome, Outcome::Rework | Outcome::Blocked)
            })
            .map(|r| format!("{}: {}", r.code.as_str(), r.detail))
            .collect();
        let blocked = decision
            .reasons
            .iter()
            .any(|r| DETERMINISTIC.contains(&r.code) && r.outcome == Outcome::Blocked);
        Ok(Preflight {
            // The outcome the deterministic evidence alone decides; a verifier cannot change it.
            outcome: match (decisive.is_empty(), blocked) {
                (true, _) => decision.outcome,
                (false, true) => Outcome::Blocked,
                (false, false) => Outcome::Rework,
            },
            skipped: !decisive.is_empty(),
            reasons: decisive,
        })
    }

    /// The admission notes of an execution's runs, in the order they were written, one per
    /// run. Notes share the requests table, which producers may write, so a note counts only
    /// when the run record (written by the engine alone) confirms its run, request, subject,
    /// verifier, class and generation; anything else is ignored.
    pub async fn admission_notes(&self, execution: &str) -> Result<Vec<Value>> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for row in self
            .store
            .list(DocKind::Request, &About::Execution(execution.to_owned()))
            .await?
        {
            let v = row.value()?;
            if v.get("schema") != Some(&json!(ADMISSION_SCHEMA)) {
                continue;
            }
            let Some(run_id) = v.get("run_id").and_then(Value::as_str) else {
                continue;
            };
            let Some(run) = self.store.run(run_id).await? else {
                continue;
            };
            let a = &run.admission;
            let confirmed = v.get("request_digest") == Some(&json!(a.request_digest.as_str()))
                && v.get("subject_digest") == Some(&json!(a.subject_digest.as_str()))
                && v.get("verifier") == Some(&json!(a.verifier.as_str()))
                && v.get("class") == Some(&json!(a.class.as_str()))
                && v.get("generation") == Some(&json!(a.admitted_generation));
            if confirmed && seen.insert(run_id.to_owned()) {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// The run `run_id`, for an operator or for the verifier it was admitted for; anyone else
    /// is refused (and the refusal audited).
    async fn own_run(
        &self,
        caller: &Principal,
        run_id: &str,
        what: &'static str,
        action: String,
    ) -> Result<Run> {
        self.require_role(caller, &[Role::Operator, Role::Verifier], what)
            .await?;
        let run = self
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "run",
                key: run_id.to_owned(),
            })?;
        if caller.role == Role::Verifier && run.admission.verifier != caller.name {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action,
                why: "it was admitted for another verifier".into(),
            };
            return Err(self.deny(caller, err).await);
        }
        Ok(run)
    }

    /// Calls the model verifier for an admitted run (an operator, or the run's own verifier) and
    /// submits its result as the run's verifier; a run preflight cancelled is never called.
    pub async fn run_model(
        &self,
        caller: &Principal,
        run_id: &str,
        model: &dyn ModelVerifier,
    ) -> Result<RunOutcome> {
        let run = self
            .own_run(
                caller,
                run_id,
                "start verifier runs",
                format!("start run {run_id:?}"),
            )
            .await?;
        let subject = self.subject(&run.admission.subject_digest).await?;
        let note = self
            .admission_notes(subject.execution.id.as_str())
            .await?
            .into_iter()
            .find(|n| n.get("run_id") == Some(&json!(run_id)));
        let pre = note.as_ref().and_then(|n| n.get("preflight"));
        let skipped = pre.filter(|p| p.get("skipped") == Some(&json!(true)));
        if run.status().is_some_and(RunStatus::is_terminal) || skipped.is_some() {
            if let Some(pre) = skipped {
                if run.status().is_none() {
                    // Admission stopped between its note and the cancellation: finish it.
                    self.store
                        .record_run_status(&Self::system(), run_id, RunStatus::Cancelled, None)
                        .await?;
                }
                return Ok(RunOutcome::Skipped(Preflight {
                    outcome: serde_json::from_value(
                        pre.get("outcome").cloned().unwrap_or_default(),
                    )
                    .unwrap_or(Outcome::Blocked),
                    skipped: true,
                    reasons: serde_json::from_value(
                        pre.get("reasons").cloned().unwrap_or_default(),
                    )
                    .unwrap_or_default(),
                }));
            }
            return Err(EngineError::Conflict(format!(
                "run {run_id:?} already ended"
            )));
        }
        let a = &run.admission;
        let subject = self.subject(&a.subject_digest).await?;
        self.require_live(subject.execution.id.as_str(), "start a run")
            .await?;
        let request = self
            .store
            .get(DocKind::Request, &a.request_digest)
            .await?
            .map(|r| r.value())
            .transpose()?
            .unwrap_or_default();
        let evidence = self
            .store
            .list(DocKind::Evidence, &About::Subject(a.subject_digest.clone()))
            .await?
            .iter()
            .map(|s| s.value())
            .collect::<Result<Vec<_>, _>>()?;
        let prior_findings = self.pinned_prior_findings(&request).await?;
        let task = VerifyTask {
            run_id: a.run_id.clone(),
            verifier: a.verifier.clone(),
            class: a.class.clone(),
            subject,
            subject_digest: a.subject_digest.clone(),
            generation: a.admitted_generation,
            request,
            evidence,
            prior_findings,
        };
        let verifier = Principal {
            name: a.verifier.clone(),
            role: Role::Verifier,
        };
        self.store
            .record_run_status(&verifier.actor(), run_id, RunStatus::Started, None)
            .await?;
        let doc = model
            .verify(&task)
            .await
            .map_err(|e| invalid("verifier output")(e))?;
        Ok(RunOutcome::Submitted(
            self.submit_result(&verifier, &doc).await?,
        ))
    }

    /// The prior blocking findings a request pinned, read by id and version; a pin whose
    /// finding is not stored is refused rather than silently dropped.
    pub async fn pinned_prior_findings(&self, request: &Value) -> Result<Vec<Value>> {
        let bad = invalid("verification request");
        let mut out = Vec::new();
        let pins = request
            .get("prior_blockers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (i, pin) in pins.iter().enumerate() {
            let id: Id = pin
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .parse()
                .map_err(|e| bad(format!("prior_blockers/{i}/id: {e}")))?;
            let version = pin
                .get("version")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad(format!("prior_blockers/{i}/version is not a count")))?;
            let found =
                self.store
                    .finding(&id, version)
                    .await?
                    .ok_or_else(|| EngineError::NotFound {
                        what: "prior finding",
                        key: format!("{id} version {version}"),
                    })?;
            out.push(found.value()?);
        }
        Ok(out)
    }

    /// Records what the model of run `run_id` was shown (the context manifest, with its digest
    /// `digest("context", manifest)`) and what each provider call did (its receipts and the
    /// run's full failure detail), as a note about the run's subject. Only the run's own
    /// verifier or an operator may record it; the digest is computed here, never taken on trust.
    pub async fn record_run_context(
        &self,
        caller: &Principal,
        run_id: &str,
        report: &RunReport,
    ) -> Result<Digest> {
        let run = self
            .own_run(
                caller,
                run_id,
                "record a run's context",
                format!("record the context of run {run_id:?}"),
            )
            .await?;
        let digest = verdict_core::digest::digest(DigestKind::Context, &report.manifest);
        let note = RunContext {
            schema: RunContextSchema::V1,
            run_id: run_id.to_owned(),
            subject_digest: run.admission.subject_digest.clone(),
            context_digest: digest.clone(),
            manifest: report.manifest.clone(),
            receipts: report.receipts.clone(),
            detail: report.detail.clone(),
            cache_key: report.cache_key.clone(),
        };
        // Stored by the engine, as its other notes are: the caller was checked above, and a
        // note of this shape written by anyone else is not believed when read back.
        self.put_note(&note).await?;
        Ok(digest)
    }

    /// The context notes recorded for a run, in the order they were stored.
    pub async fn run_contexts(&self, run_id: &str) -> Result<Vec<RunContext>> {
        let run = self
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "run",
                key: run_id.to_owned(),
            })?;
        self.contexts_about(&run.admission.subject_digest, run_id)
            .await
    }

    /// The context notes of run `run_id` among the engine's notes about `subject`.
    pub(crate) async fn contexts_about(
        &self,
        subject: &Digest,
        run_id: &str,
    ) -> Result<Vec<RunContext>> {
        let notes: Vec<RunContext> = self
            .notes(&About::Subject(subject.clone()), RUN_CONTEXT_SCHEMA)
            .await?;
        Ok(notes.into_iter().filter(|n| n.run_id == run_id).collect())
    }

    /// A verifier submits its result for its run. The engine validates it against the run and
    /// its subject (the run's subject, generation and class; every criterion of the subject
    /// answered exactly once when completed; findings on known criteria; evidence refs that
    /// exist; a disposition for every prior blocker the request pinned) and stores it as the
    /// verifier's evidence. A result that fails validation is refused, and its run ends
    /// `unavailable` with reason `invalid_output`, recorded with what was wrong
    /// ([`ResultRefusal`]); the document itself is not kept, so it can never be counted, and a
    /// new run may still bring a complete result. A result whose grant is no longer in force is
    /// stored as history and not counted; so is one whose subject or generation moved on, and
    /// one for a run (or an execution) that was cancelled.
    pub async fn submit_result(&self, caller: &Principal, doc: &Value) -> Result<Submitted> {
        let now = &self.now().await?;
        if caller.role == Role::Producer {
            let err = EngineError::SelfVerificationDenied {
                principal: caller.name.to_string(),
                action: "submit a verification result".into(),
                why: "producers never verify work".into(),
            };
            return Err(self.deny(caller, err).await);
        }
        self.require_role(caller, &[Role::Verifier], "submit verification results")
            .await?;
        let (r, _) =
            verdict_core::contracts::decode::<VerificationResult>(DigestKind::Verification, doc)
                .map_err(|e| invalid("verification result")(e.to_string()))?;
        let run = self.store.run(r.verifier.run.as_str()).await?;
        let Some(run) = run.filter(|run| {
            run.admission.verifier == caller.name && r.verifier.principal == caller.name
        }) else {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: format!("submit a result for run {:?}", r.verifier.run.as_str()),
                why: "it was not admitted to that run under that name".into(),
            };
            return Err(self.deny(caller, err).await);
        };
        let run_id = r.verifier.run.as_str();
        let subject = self.subject(&run.admission.subject_digest).await?;
        if subject.producer.principal == caller.name || subject.producer.run == r.verifier.run {
            let err = EngineError::SelfVerificationDenied {
                principal: caller.name.to_string(),
                action: "verify".into(),
                why: "the producer's principal or run never verifies its own work".into(),
            };
            return Err(self.deny(caller, err).await);
        }
        let execution = subject.execution.id.as_str();
        let execution_cancelled = self.execution_cancellation(execution).await?.is_some();
        let late = match run.status() {
            Some(RunStatus::Cancelled) => true,
            Some(s) if s.is_terminal() => {
                return Err(EngineError::Conflict(format!(
                    "run {run_id:?} already ended {}",
                    s.as_str()
                )));
            }
            _ => execution_cancelled,
        };
        if let Err(e) = self.validate_result(&r, &run, &subject).await {
            if run.status().is_some_and(RunStatus::is_terminal) {
                // The run already has its outcome; this document changes nothing.
                return Err(e);
            }
            return Err(self.refuse_result(&run, doc, e, now).await);
        }
        let actor = caller.actor();
        if late {
            // A cancelled run's result is history: its run is marked cancelled before the
            // document lands, so it is never read as counted.
            if run.status().is_none_or(|s| !s.is_terminal()) {
                // Recorded by the run's own verifier, in its own role: it needs no other.
                self.store
                    .record_run_status(&actor, run_id, RunStatus::Cancelled, None)
                    .await?;
            }
            let stored = self.store.put(&actor, DocKind::Verification, doc).await?;
            return Ok(Submitted {
                digest: stored.digest,
                counted: false,
                why_not: Some(
                    if execution_cancelled {
                        "its execution was cancelled"
                    } else {
                        "its run was cancelled"
                    }
                    .to_owned(),
                ),
            });
        }
        let grant_ok = self
            .has_grant(caller.name.as_str(), &subject, false, now)
            .await?;
        if !grant_ok {
            // Marked first, so the result can never be read as counted.
            self.store
                .record_run_status(
                    &actor,
                    run_id,
                    RunStatus::Unavailable,
                    Some(verdict_core::contracts::UnavailableReason::GrantRevoked),
                )
                .await?;
        }
        let stored = self.store.put(&actor, DocKind::Verification, doc).await?;
        if grant_ok {
            let (status, reason) = match r.status {
                VerificationStatus::Completed => (RunStatus::Completed, None),
                VerificationStatus::Unavailable => (RunStatus::Unavailable, r.unavailable_reason),
            };
            self.store
                .record_run_status(&actor, run_id, status, reason)
                .await?;
        }
        let counted = grant_ok && stored.counted != Some(false);
        let why_not = if !grant_ok {
            Some("the verifier's grant was not in force at submission".to_owned())
        } else if !counted {
            Some("its subject or generation is no longer the execution's current one".to_owned())
        } else {
            None
        };
        Ok(Submitted {
            digest: stored.digest,
            counted,
            why_not,
        })
    }

    /// Ends a run whose result failed validation: the record of what was wrong, then the run's
    /// `unavailable` / `invalid_output` event. Returns the refusal to report; if recording it
    /// failed, that is reported with it.
    async fn refuse_result(
        &self,
        run: &Run,
        doc: &Value,
        refusal: EngineError,
        now: &Timestamp,
    ) -> EngineError {
        let detail = match &refusal {
            EngineError::Invalid { message, .. } => message.clone(),
            other => other.to_string(),
        };
        let record = ResultRefusal {
            schema: RESULT_REFUSAL_SCHEMA.to_owned(),
            run_id: run.admission.run_id.clone(),
            subject_digest: run.admission.subject_digest.clone(),
            result_digest: verdict_core::digest::digest(DigestKind::Verification, doc),
            reason: UnavailableReason::InvalidOutput,
            detail: detail.clone(),
            at: now.clone(),
        };
        let recorded = match self.put_note(&record).await {
            Ok(_) => self
                .store
                .record_run_status(
                    &Self::system(),
                    run.admission.run_id.as_str(),
                    RunStatus::Unavailable,
                    Some(UnavailableReason::InvalidOutput),
                )
                .await
                .map(|_| ())
                .map_err(EngineError::from),
            Err(e) => Err(e),
        };
        match recorded {
            Ok(()) => EngineError::Invalid {
                what: "verification result",
                message: format!(
                    "{detail}; run {:?} ends unavailable (invalid_output), and a new run is needed",
                    run.admission.run_id.as_str()
                ),
            },
            Err(e) => EngineError::Conflict(format!(
                "{refusal} (and recording the run's end failed: {e})"
            )),
        }
    }

    /// Checks a result against its run and the run's subject (see [`Engine::submit_result`]).
    async fn validate_result(
        &self,
        r: &VerificationResult,
        run: &Run,
        subject: &Subject,
    ) -> Result<()> {
        let bad = invalid("verification result");
        let a = &run.admission;
        if r.subject_digest != a.subject_digest {
            return Err(bad(format!(
                "subject_digest {} is not {}, the subject run {:?} was admitted for, at /subject_digest",
                r.subject_digest,
                a.subject_digest,
                a.run_id.as_str()
            )));
        }
        if r.generation != a.admitted_generation {
            return Err(bad(format!(
                "generation {} is not {}, the generation run {:?} was admitted for, at /generation",
                r.generation,
                a.admitted_generation,
                a.run_id.as_str()
            )));
        }
        if r.verifier.class != a.class {
            return Err(bad(format!(
                "class {} is not {}, the class run {:?} was admitted for, at /verifier/class",
                r.verifier.class,
                a.class,
                a.run_id.as_str()
            )));
        }
        let request = &a.request_digest;
        let criteria: BTreeSet<&str> = subject
            .criteria
            .items
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        answers_each_criterion_once(r, subject).map_err(&bad)?;
        for (i, f) in r.findings.iter().enumerate() {
            if !criteria.contains(f.criterion.as_str()) {
                return Err(bad(format!(
                    "criterion {} is not in the subject at /findings/{i}/criterion",
                    f.criterion
                )));
            }
        }
        let mut known: BTreeSet<String> = subject
            .resources
            .iter()
            .map(|x| x.name.to_string())
            .collect();
        let about = About::Subject(r.subject_digest.clone());
        for kind in [DocKind::Evidence, DocKind::Verification, DocKind::Finding] {
            for row in self.store.list(kind, &about).await? {
                if let Some(id) = row.value()?.get("id").and_then(Value::as_str) {
                    known.insert(id.to_owned());
                }
            }
        }
        known.insert(r.id.to_string());
        known.extend(r.findings.iter().map(|f| f.id.to_string()));
        let prior: Vec<(String, u64)> = self
            .store
            .get(DocKind::Request, request)
            .await?
            .map(|s| s.value())
            .transpose()?
            .and_then(|v| v.get("prior_blockers").and_then(Value::as_array).cloned())
            .unwrap_or_default()
            .iter()
            .map(|p| {
                (
                    p.get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    p.get("version").and_then(Value::as_u64).unwrap_or_default(),
                )
            })
            .collect();
        known.extend(prior.iter().map(|(id, _)| id.clone()));
        let refs = r
            .criteria
            .iter()
            .enumerate()
            .flat_map(|(i, c)| {
                c.evidence_refs
                    .iter()
                    .map(move |x| (format!("/criteria/{i}/evidence_refs"), x))
            })
            .chain(r.findings.iter().enumerate().flat_map(|(i, f)| {
                f.evidence_refs
                    .iter()
                    .map(move |x| (format!("/findings/{i}/evidence_refs"), x))
            }))
            .chain(r.dispositions.iter().enumerate().flat_map(|(i, d)| {
                d.evidence_refs
                    .iter()
                    .map(move |x| (format!("/dispositions/{i}/evidence_refs"), x))
            }));
        for (path, x) in refs {
            if !known.contains(x.as_str()) {
                return Err(bad(format!(
                    "evidence ref {x:?} names nothing stored for this subject at {path}"
                )));
            }
        }
        if r.status == VerificationStatus::Completed {
            for (id, version) in &prior {
                if !r
                    .dispositions
                    .iter()
                    .any(|d| d.finding.as_str() == id && d.version == *version)
                {
                    return Err(bad(format!(
                        "no disposition for prior blocker {id} version {version} at /dispositions"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Whether a result's rows name only the subject's criteria, each at most once, and, when it is
/// completed, every one of them: what a result must be to count (docs/spec/authority.md). Says which
/// row or criterion is wrong.
pub(crate) fn answers_each_criterion_once(
    r: &VerificationResult,
    subject: &Subject,
) -> std::result::Result<(), String> {
    let criteria: BTreeSet<&str> = subject
        .criteria
        .items
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    let mut answered = BTreeSet::new();
    for (i, row) in r.criteria.iter().enumerate() {
        if !criteria.contains(row.id.as_str()) {
            return Err(format!(
                "criterion {} is not in the subject at /criteria/{i}/id",
                row.id
            ));
        }
        if !answered.insert(row.id.as_str()) {
            return Err(format!(
                "criterion {} is answered twice, again at /criteria/{i}/id",
                row.id
            ));
        }
    }
    if r.status == VerificationStatus::Completed {
        let missing: Vec<&str> = criteria.difference(&answered).copied().collect();
        if !missing.is_empty() {
            return Err(format!(
                "a completed result answers every criterion of its subject exactly once; \
                 no row for {} at /criteria",
                missing.join(", ")
            ));
        }
    }
    Ok(())
}
