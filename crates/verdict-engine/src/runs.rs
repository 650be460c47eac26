//! Verification requests, verifier runs (admission, preflight, the model call) and results.

use crate::budget::RequestBudget;
use crate::documents::{
    AdmissionNote, AdmissionSchema, PriorBlocker, RequestSchema, VerificationRequest,
};
use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use crate::notes::{RESULT_REFUSAL_SCHEMA, RUN_TAKEOVER_SCHEMA, ResultRefusal, RunTakeover};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use verdict_core::contracts::{
    CheckEvidence, Finding, Id, Name, Outcome, ReasonCode, Role, Subject, Timestamp,
    UnavailableReason, VerificationResult, VerificationStatus,
};
use verdict_core::digest::{Digest, DigestKind};
use verdict_judge::receipt::Receipt;
use verdict_store::{About, Actor, DocKind, Job, JobClaim, Run, RunAdmission, RunStatus, Stored};

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
const DETERMINISTIC: [ReasonCode; 12] = [
    ReasonCode::InvalidInput,
    ReasonCode::NothingToVerify,
    ReasonCode::CriterionAbsent,
    ReasonCode::EvidenceMissing,
    ReasonCode::EvidenceStale,
    ReasonCode::EvidenceFromFuture,
    ReasonCode::EvidenceTampered,
    ReasonCode::EvidenceDefinitionMismatch,
    ReasonCode::CheckDefinitionUnpinned,
    ReasonCode::CheckError,
    ReasonCode::CheckFailed,
    ReasonCode::PriorBlockerStillPresent,
];

/// A request that may still admit runs, read once per admission.
struct PinnedRequest {
    req: VerificationRequest,
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
    /// The request.
    pub request: VerificationRequest,
    /// The check evidence about the subject.
    pub evidence: Vec<CheckEvidence>,
    /// The prior blocking findings the request pinned, by id and version.
    pub prior_findings: Vec<Finding>,
}

/// A verifier the engine calls for a run: a model behind a provider, or a script.
#[async_trait]
pub trait ModelVerifier: Send + Sync {
    /// Returns a verification result document for the task.
    async fn verify(&self, task: &VerifyTask) -> std::result::Result<Value, String>;
}

/// Preflight: the pure Gate over the deterministic evidence alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
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
    /// Whether the write that ended the run also completed the worker's job it was made under
    /// (see [`crate::verify::VerifyOptions::complete_job`]).
    pub job_completed: bool,
}

/// What a run's verifier produced, before it is submitted.
#[derive(Debug)]
pub(crate) enum Produced {
    /// Preflight had already decided; the verifier was never called.
    Skipped(Preflight),
    /// The verifier's result document, to be submitted as `verifier`.
    Result {
        /// The run's verifier, whom the engine acts as.
        verifier: Principal,
        /// The result document.
        doc: Value,
    },
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
        let (request, _) = self
            .request_doc(caller, execution, budget, capability)
            .await?;
        Ok(self
            .store
            .put(&caller.actor(), DocKind::Request, &request.to_value()?)
            .await?
            .digest)
    }

    /// [`Engine::create_request_for`], enqueuing the request's jobs as
    /// [`Engine::enqueue_request_jobs`] would (the gate job's `deadline` included) in the
    /// transaction that stores the request: the request and its jobs are stored together or
    /// neither is, and a worker may take them as soon as they are. The caller must also be one
    /// who may enqueue them: an operator, or the producer of the execution's current subject;
    /// any other is refused before anything is written but its denial. Returns the request's
    /// digest and its jobs (those already there when the request was stored and enqueued
    /// before, as they stand).
    pub async fn create_request_enqueued(
        &self,
        caller: &Principal,
        execution: &str,
        budget: &Value,
        capability: Option<&str>,
        deadline: Option<std::time::Duration>,
    ) -> Result<(Digest, Vec<Job>)> {
        let (request, subject) = self
            .request_doc(caller, execution, budget, capability)
            .await?;
        if caller.role == Role::Producer && subject.producer.principal != caller.name {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: format!(
                    "enqueue the jobs of a verification request for execution {execution:?}"
                ),
                why: "only an operator or the producer of the request's subject may".into(),
            };
            return Err(self.deny(caller, err).await);
        }
        let jobs = crate::workers::request_jobs(&subject, &request, deadline);
        let (stored, jobs) = self
            .store
            .put_request_enqueuing(&caller.actor(), &request.to_value()?, &jobs)
            .await?;
        Ok((stored.digest, jobs))
    }

    /// The request [`Engine::create_request_for`] stores, with the execution's current subject
    /// it is about, every check made first.
    async fn request_doc(
        &self,
        caller: &Principal,
        execution: &str,
        budget: &Value,
        capability: Option<&str>,
    ) -> Result<(VerificationRequest, Subject)> {
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
        // Scope first, so that whether the execution exists, and whether it was cancelled, is
        // told only to a caller who may see it.
        self.require_in_scope(
            caller,
            execution,
            format!("create a verification request for execution {execution:?}"),
        )
        .await?;
        let head = self.existing_execution_head(execution).await?;
        let subject = self.subject(&head.subject_digest).await?;
        self.require_grant(caller, &subject, true, "create a verification request", now)
            .await?;
        self.require_live(execution, "take a verification request")
            .await?;
        let budget = RequestBudget::from_value(budget)?;
        let gate = self
            .gate_head()
            .await?
            .ok_or_else(|| EngineError::NoSuchGate(self.gate.clone()))?;
        let policy = self.policy(&gate.policy_digest).await?;
        // Sorted by their text, as requests have always listed them.
        let classes: BTreeSet<String> = policy
            .verifier_classes_for(subject.risk.class)
            .iter()
            .map(ToString::to_string)
            .collect();
        let prior_blockers = self
            .prior_blockers_unscoped(execution, &head.subject_digest)
            .await?
            .into_iter()
            .map(|(id, version)| PriorBlocker { id, version })
            .collect();
        let doc = VerificationRequest {
            schema: RequestSchema::V1,
            execution: subject.execution.id.clone(),
            subject_digest: head.subject_digest.clone(),
            generation: head.generation,
            gate: self.gate.clone(),
            policy_digest: gate.policy_digest.clone(),
            verifier_classes: classes
                .iter()
                .map(|c| c.parse())
                .collect::<std::result::Result<_, _>>()
                .map_err(|e| invalid("verifier class")(format!("{e}")))?,
            prior_blockers,
            risk_class: subject.risk.class,
            budget,
            // Only when named, so requests that name none keep their digests.
            capability,
        };
        Ok((doc, subject))
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
        self.admit_claimed(caller, request, verifier, class, run_id, None)
            .await
    }

    /// [`Engine::admit`] for a worker's job: the run and its admission note (and, when
    /// preflight decided, the run's cancellation) are written only while `claim` is its job's
    /// current claim, checked by the store in the same transaction as each write; once another
    /// worker took the job over, the admission is refused with
    /// [`verdict_store::StoreError::StaleClaim`] and writes nothing.
    pub async fn admit_claimed(
        &self,
        caller: &Principal,
        request: &Digest,
        verifier: &str,
        class: &str,
        run_id: &str,
        claim: Option<&JobClaim>,
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
        // A worker names its attempt at a verify job `job-<job>-<fencing>`. Anyone else taking
        // such a name first would have every attempt of the job refused as a run stored for
        // another admission, so only the claim it names admits it (the store holds the same,
        // from the job as it stands, in the admitting transaction).
        if let Some((job, fencing)) = verdict_store::records::job_run(run_id)
            && claim.is_none_or(|c| c.job != job || c.fencing != fencing)
        {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: format!("admit {verifier:?} to run {run_id:?}"),
                why: format!(
                    "a run id of that form names attempt {fencing} of verify job {job}; only the worker holding that claim admits it"
                ),
            };
            return Err(self.deny(caller, err).await);
        }
        let req = self
            .request_in_scope(
                caller,
                request,
                format!("admit {verifier:?} to run {run_id:?} for request {request}"),
            )
            .await?;
        let pinned = self.pinned_request(request, req).await?;
        // Every refusal that does not depend on another admission's turn is made before the
        // request's lease is taken, so a refused admission writes nothing but its denial (when
        // it is one): the cap as it stands, the verifier's independence, role, grant and
        // class, and a run id already stored for another admission.
        let admission = self
            .admission_for(&pinned, request, verifier, class, run_id, now)
            .await?;
        // With a run cap, admissions of one request take turns (a lease on the request), so
        // two racing for the last run cannot both win. The caller holds the lease itself: an
        // operator, or the verifier admitting itself, which the store (and on PostgreSQL the
        // database) lets hold it only for its own admission and for at most a minute.
        let lease_actor = caller.actor();
        let slot = match pinned.budget.max_runs {
            Some(_) => Some(self.take_admission_slot(&lease_actor, request, now).await?),
            None => None,
        };
        let admitted = self
            .admit_pinned(caller, &pinned, request, admission, claim)
            .await;
        if let Some((job, holder)) = slot {
            // A release that fails never changes what the admission did: the lease lapses on
            // its own within a minute.
            let _ = self
                .store
                .cas_lease(&lease_actor, &job, Some(&holder), None)
                .await;
        }
        admitted
    }

    /// A stored request that may still admit runs: its subject is the execution's current one
    /// and its policy the gate's current revision.
    async fn pinned_request(
        &self,
        request: &Digest,
        req: VerificationRequest,
    ) -> Result<PinnedRequest> {
        let subject_digest = req.subject_digest.clone();
        let subject = self.subject(&subject_digest).await?;
        let execution = subject.execution.id.to_string();
        self.require_live(&execution, "admit runs").await?;
        let head = self.execution_head_unscoped(&execution).await?;
        if head.as_ref().map(|h| &h.subject_digest) != Some(&subject_digest) {
            return Err(EngineError::Conflict(format!(
                "request {request} is for subject {subject_digest}, which is no longer execution {execution:?}'s current subject"
            )));
        }
        // A run for a request pinned to a replaced policy could only ever produce a result the
        // current policy did not ask for; a new request is needed.
        let pinned = &req.policy_digest;
        let gate = self.gate_head().await?;
        if gate.as_ref().map(|g| &g.policy_digest) != Some(pinned) {
            return Err(EngineError::Conflict(format!(
                "request {request} pins policy {pinned}, which is no longer gate {:?}'s current revision; create a new request",
                self.gate
            )));
        }
        let budget = req.budget.clone();
        Ok(PinnedRequest {
            req,
            subject_digest,
            subject,
            execution,
            budget,
        })
    }

    /// Refuses a request whose run cap is used up. Checked before the request's lease is
    /// taken, so a refusal moves nothing, and again under it, where two admissions racing for
    /// the last run meet.
    async fn require_run_left(&self, pinned: &PinnedRequest, request: &Digest) -> Result<()> {
        let Some(max) = pinned.budget.max_runs else {
            return Ok(());
        };
        let execution = &pinned.execution;
        // A run ended because its worker lost the job to another gives its place back: the
        // new claimant's attempt replaces it.
        let taken_over: BTreeSet<String> = self
            .notes::<RunTakeover>(&About::Execution(execution.clone()), RUN_TAKEOVER_SCHEMA)
            .await?
            .into_iter()
            .map(|t| t.run_id.to_string())
            .collect();
        let used = self
            .admission_notes_unscoped(execution)
            .await?
            .iter()
            .filter(|n| &n.request_digest == request)
            .filter(|n| !taken_over.contains(n.run_id.as_str()))
            .count();
        if used >= usize::try_from(max).unwrap_or(usize::MAX) {
            return Err(EngineError::Conflict(format!(
                "request {request} allows {max} run(s) and {used} were admitted; create a new request"
            )));
        }
        Ok(())
    }

    /// The admission a request that is still current would take, or the refusal of it: the
    /// cap, the verifier's independence, role, grant and class, and a run id stored for
    /// another admission. Reads only, but for the denial a refusal of authority records.
    async fn admission_for(
        &self,
        pinned: &PinnedRequest,
        request: &Digest,
        verifier: &str,
        class: &str,
        run_id: &str,
        now: &Timestamp,
    ) -> Result<RunAdmission> {
        let PinnedRequest {
            req,
            subject_digest,
            subject,
            ..
        } = pinned;
        self.require_run_left(pinned, request).await?;
        let Some(record) = self.store.principal(verifier).await? else {
            return Err(EngineError::NotFound {
                what: "principal",
                key: verifier.to_owned(),
            });
        };
        let who = Principal::new(record.name, record.role);
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
        if !req.asks_for(class) {
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
        // The same admission again is the store's to return as it stands; another under a
        // stored run's id is refused here, before any lease moves.
        if let Some(stored) = self.store.run(run_id).await?
            && stored.admission != admission
        {
            return Err(EngineError::Conflict(format!(
                "run {run_id:?} is already stored for another admission; choose another run id"
            )));
        }
        Ok(admission)
    }

    /// The admission proper, once it is known to be allowed (and, with a run cap, under the
    /// request's lease): the cap again, then preflight, its note, the run and, when preflight
    /// decided, its cancellation.
    async fn admit_pinned(
        &self,
        caller: &Principal,
        pinned: &PinnedRequest,
        request: &Digest,
        admission: RunAdmission,
        claim: Option<&JobClaim>,
    ) -> Result<Preflight> {
        let PinnedRequest {
            subject_digest,
            subject,
            execution,
            ..
        } = pinned;
        // Another admission may have taken the last run since the check above.
        self.require_run_left(pinned, request).await?;
        // The run and its note are appended together: a run is never without the note that
        // says whether a model may be called for it, whatever crashes when.
        let preflight = self.preflight_unscoped(execution).await?;
        let note = AdmissionNote {
            schema: AdmissionSchema::V1,
            run_id: admission.run_id.clone(),
            request_digest: request.clone(),
            subject_digest: subject_digest.clone(),
            generation: subject.execution.generation,
            verifier: admission.verifier.clone(),
            class: admission.class.clone(),
            preflight: preflight.clone(),
        }
        .to_value()?;
        // One transaction: an admission the store refuses (a run id already taken, say)
        // leaves no note behind. Written as the caller, an operator or the verifier admitting
        // itself, so the audit chain names who admitted and a principal's own database login
        // suffices.
        // When preflight decided, the run's cancellation is written in the same transaction.
        let writer = caller.actor();
        match claim {
            // Under a worker's claim, checked in the admission's own transaction.
            Some(c) => {
                self.store
                    .admit_run_noted_claimed(&writer, c, &admission, &note)
                    .await?
            }
            None => {
                self.store
                    .admit_run_noted(&writer, &admission, &note)
                    .await?
            }
        };
        Ok(preflight)
    }

    /// Takes the admission lease of a request, or refuses while another admission holds it.
    /// A lease left behind by a crashed admission lapses after a minute.
    async fn take_admission_slot(
        &self,
        actor: &Actor,
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
            holder: actor
                .principal
                .parse()
                .map_err(|e| invalid("lease holder")(format!("{e}")))?,
            expires_at: now.plus_seconds(verdict_store::ADMISSION_LEASE_SECONDS),
        };
        self.store
            .cas_lease(actor, &job, current.as_ref(), Some(&holder))
            .await
            .map_err(|e| match e {
                verdict_store::StoreError::CasFailed { .. } => EngineError::Conflict(format!(
                    "another admission for request {request} is in progress; retry"
                )),
                other => other.into(),
            })?;
        Ok((job, holder))
    }

    /// The pure Gate over the execution's deterministic evidence alone. Read by an operator,
    /// or by a principal holding a grant in force on the execution or its mission.
    pub async fn preflight(&self, caller: &Principal, execution: &str) -> Result<Preflight> {
        self.require_read(caller, execution, "the preflight")
            .await?;
        self.preflight_unscoped(execution).await
    }

    /// [`Engine::preflight`] for the engine's own use, for no caller.
    pub(crate) async fn preflight_unscoped(&self, execution: &str) -> Result<Preflight> {
        let now = &self.now().await?;
        let mut collected = self.collect_unscoped(execution).await?;
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
    /// verifier, class and generation; anything else is ignored. Read by an operator, or by a
    /// principal holding a grant in force on the execution or its mission.
    pub async fn admission_notes(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<Vec<AdmissionNote>> {
        self.require_read(caller, execution, "the admissions")
            .await?;
        self.admission_notes_unscoped(execution).await
    }

    /// [`Engine::admission_notes`] for the engine's own use, for no caller.
    pub(crate) async fn admission_notes_unscoped(
        &self,
        execution: &str,
    ) -> Result<Vec<AdmissionNote>> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for row in self
            .store
            .list(DocKind::Request, &About::Execution(execution.to_owned()))
            .await?
        {
            // Not a note, or one the engine could not have written: ignored.
            let Some(note) = AdmissionNote::from_value(&row.value()?) else {
                continue;
            };
            let Some(run) = self.store.run(note.run_id.as_str()).await? else {
                continue;
            };
            let a = &run.admission;
            let confirmed = note.request_digest == a.request_digest
                && note.subject_digest == a.subject_digest
                && note.verifier == a.verifier
                && note.class == a.class
                && note.generation == a.admitted_generation;
            if confirmed && seen.insert(note.run_id.clone()) {
                out.push(note);
            }
        }
        Ok(out)
    }

    /// The verification request stored under `digest`, read through its type.
    pub(crate) async fn request(&self, digest: &Digest) -> Result<VerificationRequest> {
        let doc = self
            .store
            .get(DocKind::Request, digest)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "verification request",
                key: digest.to_string(),
            })?
            .value()?;
        VerificationRequest::from_value(&doc).map_err(|e| match e {
            EngineError::Invalid { what, message } => EngineError::Invalid {
                what,
                message: format!("{digest}: {message}"),
            },
            other => other,
        })
    }

    /// The stored request `request`, named by a write `action` of `caller`, once the caller
    /// may see it: an operator always (a request not stored is `not_found`); anyone else only
    /// while a grant in force covers the request's subject, and is otherwise refused in the
    /// same words ([`Engine::deny_out_of_scope`]) for a request stored and one that is not,
    /// before anything about the request's state (its subject or policy moved on, its
    /// execution cancelled, its runs used up) is told.
    pub(crate) async fn request_in_scope(
        &self,
        caller: &Principal,
        request: &Digest,
        action: String,
    ) -> Result<VerificationRequest> {
        let req = match self.request(request).await {
            Ok(req) => req,
            Err(EngineError::NotFound { .. }) if caller.role != Role::Operator => {
                return Err(self.deny_out_of_scope(caller, action).await);
            }
            Err(e) => return Err(e),
        };
        if caller.role != Role::Operator {
            let subject = self.subject(&req.subject_digest).await?;
            if !self.may_read(caller, &subject).await? {
                return Err(self.deny_out_of_scope(caller, action).await);
            }
        }
        Ok(req)
    }

    /// The run `run_id`, for an operator or for the verifier it was admitted for; any other
    /// verifier is refused (and the refusal audited) in the same words whether the run is
    /// stored or not, so the refusal does not tell which run ids are in use.
    async fn own_run(
        &self,
        caller: &Principal,
        run_id: &str,
        what: &'static str,
        action: String,
    ) -> Result<Run> {
        self.require_role(caller, &[Role::Operator, Role::Verifier], what)
            .await?;
        let run = self.store.run(run_id).await?;
        match run {
            Some(run) if caller.role == Role::Operator || run.admission.verifier == caller.name => {
                Ok(run)
            }
            None if caller.role == Role::Operator => Err(EngineError::NotFound {
                what: "run",
                key: run_id.to_owned(),
            }),
            _ => {
                let err = EngineError::PermissionDenied {
                    principal: caller.name.to_string(),
                    role: caller.role.as_str(),
                    action,
                    why: "it was not admitted to that run".into(),
                };
                Err(self.deny(caller, err).await)
            }
        }
    }

    /// Calls the model verifier for an admitted run (an operator, or the run's own verifier) and
    /// submits its result as the run's verifier; a run preflight cancelled is never called.
    pub async fn run_model(
        &self,
        caller: &Principal,
        run_id: &str,
        model: &dyn ModelVerifier,
    ) -> Result<RunOutcome> {
        self.run_model_claimed(caller, run_id, model, None).await
    }

    /// [`Engine::run_model`] for a worker's job: the run's start and its result are written
    /// only under `claim` (see [`Engine::submit_result_claimed`]).
    pub(crate) async fn run_model_claimed(
        &self,
        caller: &Principal,
        run_id: &str,
        model: &dyn ModelVerifier,
        claim: Option<&JobClaim>,
    ) -> Result<RunOutcome> {
        Ok(
            match self.produce_claimed(caller, run_id, model, claim).await? {
                Produced::Skipped(pre) => RunOutcome::Skipped(pre),
                Produced::Result { verifier, doc } => {
                    RunOutcome::Submitted(self.submit_result_claimed(&verifier, &doc, claim).await?)
                }
            },
        )
    }

    /// The first half of [`Engine::run_model_claimed`]: the run started and its verifier
    /// called, the result not yet submitted, so a caller can record what the run did first.
    pub(crate) async fn produce_claimed(
        &self,
        caller: &Principal,
        run_id: &str,
        model: &dyn ModelVerifier,
        claim: Option<&JobClaim>,
    ) -> Result<Produced> {
        let run = self
            .own_run(
                caller,
                run_id,
                "start verifier runs",
                format!("start run {run_id:?}"),
            )
            .await?;
        let subject = self.subject(&run.admission.subject_digest).await?;
        let skipped = self
            .admission_notes_unscoped(subject.execution.id.as_str())
            .await?
            .into_iter()
            .find(|n| n.run_id.as_str() == run_id)
            .map(|n| n.preflight)
            .filter(|p| p.skipped);
        if run.status().is_some_and(RunStatus::is_terminal) || skipped.is_some() {
            if let Some(pre) = skipped {
                if run.status().is_none() {
                    // Admission stopped between its note and the cancellation: finish it, as
                    // the caller (an operator or the run's own verifier, checked above).
                    self.store
                        .record_run_status(&caller.actor(), run_id, RunStatus::Cancelled, None)
                        .await?;
                }
                return Ok(Produced::Skipped(pre));
            }
            return Err(EngineError::Conflict(format!(
                "run {run_id:?} already ended"
            )));
        }
        let a = &run.admission;
        let subject = self.subject(&a.subject_digest).await?;
        self.require_live(subject.execution.id.as_str(), "start a run")
            .await?;
        let request = self.request(&a.request_digest).await?;
        let evidence = self.evidence_about(&a.subject_digest).await?;
        let prior_findings = self.pinned_prior_findings_unscoped(&request).await?;
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
        // The engine acts as the run's verifier, for a caller `own_run` checked above.
        let verifier = Principal::new(a.verifier.clone(), Role::Verifier);
        self.run_status_as(&verifier.actor(), claim, run_id, RunStatus::Started, None)
            .await?;
        let doc = model
            .verify(&task)
            .await
            .map_err(|e| invalid("verifier output")(e))?;
        Ok(Produced::Result { verifier, doc })
    }

    /// The prior blocking findings a request pinned, read by id and version; a pin whose
    /// finding is not stored is refused rather than silently dropped. The request is the
    /// caller's to give, so each finding is checked, not the request: an operator reads any,
    /// anyone else only findings on subjects its grants in force cover.
    pub async fn pinned_prior_findings(
        &self,
        caller: &Principal,
        request: &VerificationRequest,
    ) -> Result<Vec<Finding>> {
        if caller.role == Role::Operator {
            return self.pinned_prior_findings_unscoped(request).await;
        }
        // Each pin is checked in turn; one naming a finding that is not stored is refused in
        // the same words as one out of scope.
        let mut found = Vec::new();
        for PriorBlocker { id, version } in &request.prior_blockers {
            let named = format!("prior finding {id} version {version}");
            let Some(row) = self.store.finding(id, *version).await? else {
                return Err(self.deny_unseen(caller, named).await);
            };
            let f: Finding = row.decode()?;
            let subject = self.subject(&f.subject_digest).await?;
            self.require_read_subject(caller, &subject, named).await?;
            found.push(f);
        }
        Ok(found)
    }

    /// [`Engine::pinned_prior_findings`] for the engine's own use, for no caller.
    pub(crate) async fn pinned_prior_findings_unscoped(
        &self,
        request: &VerificationRequest,
    ) -> Result<Vec<Finding>> {
        let mut out = Vec::new();
        for PriorBlocker { id, version } in &request.prior_blockers {
            let found =
                self.store
                    .finding(id, *version)
                    .await?
                    .ok_or_else(|| EngineError::NotFound {
                        what: "prior finding",
                        key: format!("{id} version {version}"),
                    })?;
            out.push(found.decode()?);
        }
        Ok(out)
    }

    /// The check evidence stored about `subject`, in the order it was stored.
    pub(crate) async fn evidence_about(&self, subject: &Digest) -> Result<Vec<CheckEvidence>> {
        let rows = self
            .store
            .list(DocKind::Evidence, &About::Subject(subject.clone()))
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(row.decode()?);
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
        self.record_run_context_claimed(caller, run_id, report, None)
            .await
    }

    /// [`Engine::record_run_context`] for a worker's job: the note is written by the run's
    /// verifier only while `claim` is its job's current claim, checked by the store in the
    /// note's own transaction.
    pub async fn record_run_context_claimed(
        &self,
        caller: &Principal,
        run_id: &str,
        report: &RunReport,
        claim: Option<&JobClaim>,
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
            receipts: report.receipts.iter().map(storable_receipt).collect(),
            detail: report
                .detail
                .as_deref()
                .map(|d| verdict_judge::sanitize::storable(d).into_owned()),
            cache_key: report.cache_key.clone(),
        };
        // The run's own verifier writes it as itself (and, a store's check, only about its own
        // run and, for a job's run, under the job's claim); an operator, as itself too. A note
        // of this shape written by anyone else is not believed when read back.
        if caller.role == Role::Verifier {
            self.put_note_claimed(&caller.actor(), claim, &note).await?;
        } else {
            self.put_note_as(&caller.actor(), &note).await?;
        }
        Ok(digest)
    }

    /// The context notes recorded for a run, in the order they were stored. Read by the run's
    /// verifier, an operator, or a principal holding a grant in force on the run's subject.
    pub async fn run_contexts(&self, caller: &Principal, run_id: &str) -> Result<Vec<RunContext>> {
        let named = format!("the context of run {run_id:?}");
        let run = self.stored_run(caller, run_id, named.clone()).await?;
        if run.admission.verifier != caller.name {
            let subject = self.subject(&run.admission.subject_digest).await?;
            self.require_read_subject(caller, &subject, named).await?;
        }
        self.contexts_about(&run.admission.subject_digest, run_id)
            .await
    }

    /// [`Engine::run_contexts`] for the engine's own use, for no caller.
    pub(crate) async fn run_contexts_unscoped(&self, run_id: &str) -> Result<Vec<RunContext>> {
        let run = self.known_run(run_id).await?;
        self.contexts_about(&run.admission.subject_digest, run_id)
            .await
    }

    /// The run `run_id`, or `not_found`.
    async fn known_run(&self, run_id: &str) -> Result<Run> {
        self.store
            .run(run_id)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "run",
                key: run_id.to_owned(),
            })
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
        self.submit_result_claimed(caller, doc, None).await
    }

    /// A run's status event, written under a worker's `claim` when one is given.
    pub(crate) async fn run_status_as(
        &self,
        actor: &Actor,
        claim: Option<&JobClaim>,
        run_id: &str,
        status: RunStatus,
        reason: Option<UnavailableReason>,
    ) -> Result<Stored> {
        Ok(match claim {
            Some(c) => {
                self.store
                    .record_run_status_claimed(actor, c, run_id, status, reason)
                    .await?
            }
            None => {
                self.store
                    .record_run_status(actor, run_id, status, reason)
                    .await?
            }
        })
    }

    /// [`Engine::submit_result`] for a worker's job: every write of the submission (the result
    /// and its run's events) is made only while `claim` is its job's current claim, checked by
    /// the store in the same transaction as the write; once another worker took the job over,
    /// the submission is refused with [`verdict_store::StoreError::StaleClaim`] and writes
    /// nothing.
    pub async fn submit_result_claimed(
        &self,
        caller: &Principal,
        doc: &Value,
        claim: Option<&JobClaim>,
    ) -> Result<Submitted> {
        self.submit_result_ending(caller, doc, claim, false).await
    }

    /// [`Engine::submit_result_claimed`]; with `complete_job`, the write that ends the run with
    /// its result (the submission's last) also completes the claim's job, in its transaction,
    /// with the outcome `<run> completed` (the run completed and its result counts) or
    /// `<run> ended`. [`Submitted::job_completed`] says whether it did: a submission that ends
    /// otherwise (late, without a grant, refused, or its run cancelled meanwhile) completes
    /// nothing.
    pub(crate) async fn submit_result_ending(
        &self,
        caller: &Principal,
        doc: &Value,
        claim: Option<&JobClaim>,
        complete_job: bool,
    ) -> Result<Submitted> {
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
        let execution_cancelled = self
            .execution_cancellation_unscoped(execution)
            .await?
            .is_some();
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
            // Recorded by the run's verifier, under its job's claim when it has one: a worker
            // that lost its job records nothing about its run.
            return Err(self
                .refuse_result(&caller.actor(), claim, &run, (&r.id, doc), e, now)
                .await);
        }
        let actor = caller.actor();
        if late {
            // A cancelled run's result is history: its run is marked cancelled before the
            // document lands, so it is never read as counted.
            if run.status().is_none_or(|s| !s.is_terminal()) {
                // Recorded by the run's own verifier, in its own role: it needs no other.
                self.run_status_as(&actor, claim, run_id, RunStatus::Cancelled, None)
                    .await?;
            }
            let stored = self.put_as(&actor, claim, doc).await?;
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
                job_completed: false,
            });
        }
        let grant_ok = self
            .has_grant(caller.name.as_str(), &subject, false, now)
            .await?;
        if !grant_ok {
            // Marked first, so the result can never be read as counted.
            self.run_status_as(
                &actor,
                claim,
                run_id,
                RunStatus::Unavailable,
                Some(verdict_core::contracts::UnavailableReason::GrantRevoked),
            )
            .await?;
        }
        let stored = self.put_as(&actor, claim, doc).await?;
        let mut job_completed = false;
        if grant_ok {
            let (status, reason) = match r.status {
                VerificationStatus::Completed => (RunStatus::Completed, None),
                VerificationStatus::Unavailable => (RunStatus::Unavailable, r.unavailable_reason),
            };
            let counts = status == RunStatus::Completed && stored.counted != Some(false);
            let end = match claim {
                Some(c) if complete_job => Some(c.completing(format!(
                    "{run_id} {}",
                    if counts { "completed" } else { "ended" }
                ))),
                _ => claim.cloned(),
            };
            match self
                .run_status_as(&actor, end.as_ref(), run_id, status, reason)
                .await
            {
                Ok(_) => job_completed = end.is_some_and(|c| c.completes.is_some()),
                Err(e) => {
                    // The result is stored. A run cancelled meanwhile (the cancellation landing
                    // between the two writes) keeps that end, so the result is history: say
                    // so, rather than an error that reads as if nothing was stored.
                    return match self.store.run(run_id).await?.and_then(|run| run.status()) {
                        Some(RunStatus::Cancelled) => Ok(Submitted {
                            digest: stored.digest,
                            counted: false,
                            why_not: Some(
                                "its run was cancelled while the result was being stored; the result is kept as history"
                                    .to_owned(),
                            ),
                            job_completed: false,
                        }),
                        _ => Err(e),
                    };
                }
            }
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
            job_completed,
        })
    }

    /// A verification result stored as `actor`, under a worker's `claim` when one is given.
    async fn put_as(&self, actor: &Actor, claim: Option<&JobClaim>, doc: &Value) -> Result<Stored> {
        Ok(match claim {
            Some(c) => {
                self.store
                    .put_claimed(actor, c, DocKind::Verification, doc)
                    .await?
            }
            None => self.store.put(actor, DocKind::Verification, doc).await?,
        })
    }

    /// Ends a run whose result failed validation: the record of what was wrong, the run's
    /// outcome as an `unavailable` result (`invalid_output`, under the refused document's id),
    /// then the run's `unavailable` / `invalid_output` event, all written by `actor` (the run's
    /// verifier), each under `claim` when one is given. Returns the refusal to report; if
    /// recording it failed, that is reported with it, except a stale claim, which is returned
    /// as it is (nothing was written).
    async fn refuse_result(
        &self,
        actor: &Actor,
        claim: Option<&JobClaim>,
        run: &Run,
        (id, doc): (&verdict_core::contracts::Id, &Value),
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
        let recorded = match self.put_note_claimed(actor, claim, &record).await {
            Ok(_) => {
                // A malformed result is kept only as its run's `unavailable` outcome with its
                // reason: a result the Gate reads, so a class whose only outcome it is is
                // `verifier_unavailable` (invalid_output), not `verifier_missing`.
                match self.unavailable_outcome(actor, claim, run, id).await {
                    Err(e @ EngineError::Store(verdict_store::StoreError::StaleClaim { .. })) => {
                        return e;
                    }
                    Err(e) => tracing::warn!(
                        run = run.admission.run_id.as_str(),
                        error = %e,
                        "the refused result's unavailable outcome was not stored; the run still ends"
                    ),
                    Ok(()) => {}
                }
                self.run_status_as(
                    actor,
                    claim,
                    run.admission.run_id.as_str(),
                    RunStatus::Unavailable,
                    Some(UnavailableReason::InvalidOutput),
                )
                .await
                .map(|_| ())
            }
            Err(e @ EngineError::Store(verdict_store::StoreError::StaleClaim { .. })) => {
                return e;
            }
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

    /// Stores run `run`'s outcome as an `unavailable` result (`invalid_output`) under `id`,
    /// written by `actor` under `claim` when one is given.
    async fn unavailable_outcome(
        &self,
        actor: &Actor,
        claim: Option<&JobClaim>,
        run: &Run,
        id: &verdict_core::contracts::Id,
    ) -> Result<()> {
        let a = &run.admission;
        let outcome = VerificationResult {
            id: id.clone(),
            verifier: verdict_core::contracts::Verifier {
                principal: a.verifier.clone(),
                class: a.class.clone(),
                run: a.run_id.clone(),
                runtime: None,
            },
            subject_digest: a.subject_digest.clone(),
            generation: a.admitted_generation,
            context: None,
            status: VerificationStatus::Unavailable,
            unavailable_reason: Some(UnavailableReason::InvalidOutput),
            criteria: Vec::new(),
            findings: Vec::new(),
            dispositions: Vec::new(),
        };
        let doc = serde_json::to_value(&outcome)
            .map_err(|e| invalid("verification result")(e.to_string()))?;
        self.put_as(actor, claim, &doc).await.map(|_| ())
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
                // Evidence, results and findings all carry an `id`; nothing else is read here.
                #[derive(serde::Deserialize)]
                struct Identified {
                    id: String,
                }
                known.insert(row.decode::<Identified>()?.id);
            }
        }
        known.insert(r.id.to_string());
        known.extend(r.findings.iter().map(|f| f.id.to_string()));
        let prior: Vec<(String, u64)> = self
            .request(request)
            .await?
            .prior_blockers
            .into_iter()
            .map(|p| (p.id.to_string(), p.version))
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

/// `r` as a stored note may hold it: every count within ±(2^53 - 1), and its text with every
/// control character shown as a visible escape (no U+0000, which the store refuses, and no
/// escape sequence for a terminal that prints it). The judge already keeps its receipts so; a
/// report is taken from any run's verifier, so the engine holds it to that itself.
fn storable_receipt(r: &Receipt) -> Receipt {
    use verdict_judge::sanitize::storable as text;
    use verdict_judge::tokens::{storable, storable_f64};
    Receipt {
        sample: r.sample,
        attempt: r.attempt,
        provider: text(&r.provider).into_owned(),
        model: text(&r.model).into_owned(),
        snapshot: r.snapshot.as_deref().map(|s| text(s).into_owned()),
        nonce: text(&r.nonce).into_owned(),
        tokens_in: r.tokens_in.map(storable),
        tokens_out: r.tokens_out.map(storable),
        tokens_estimated: r.tokens_estimated,
        tokens_charged: r.tokens_charged.map(storable),
        cost_estimate: r.cost_estimate.map(storable_f64),
        latency_ms: storable(r.latency_ms),
        outcome: text(&r.outcome).into_owned(),
        detail: r.detail.as_deref().map(|d| text(d).into_owned()),
    }
}
