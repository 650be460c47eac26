//! The verify use case ([`Engine::verify_request`]): the model verifier run for a stored
//! verification request, as the verifier principal who calls, one class after another. Per
//! class: admission with preflight, the judge over the stored subject, the run's context note,
//! and the result's submission; the request's budget caps each class's own.
//!
//! The face reads files; the engine is given bytes and typed values: the objective's and the
//! resources' bytes ([`VerifyInputs`]), the verifier classes resolved from the configuration
//! ([`ClassSource`]) and a result cache ([`VerifyOptions`]). Provider calls stay behind the
//! judge crate's types.

use crate::budget::RequestBudget;
use crate::documents::VerificationRequest;
use crate::engine::{Engine, Principal};
use crate::error::{EngineError, invalid};
use crate::runs::{ModelVerifier, Preflight, Produced, RunReport, Submitted, VerifyTask};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use verdict_core::contracts::{
    CheckEvidence, Finding, Id, Name, Role, Subject, UnavailableReason, VerificationStatus,
};
use verdict_core::digest::{self, Digest};
use verdict_judge::cache::ResultCache;
use verdict_judge::config::{Budget, ResolvedClass};
use verdict_judge::request::{
    EvidenceInput, JudgeRequest, ObjectiveInput, ResourceInput, VerifierIdentity,
};
use verdict_judge::{Judge, JudgeRun};
use verdict_store::{JobClaim, RunStatus, StoreError};

/// The bytes of what a subject pins by digest only, as the caller has them.
#[derive(Debug, Clone, Default)]
pub struct VerifyInputs {
    /// The objective text (UTF-8); its raw SHA-256 must be the subject's objective digest.
    pub objective: Vec<u8>,
    /// Each resource's bytes under the name the subject gives it, in the order given; every
    /// resource of the subject needs one whose raw SHA-256 is the digest it pins.
    pub resources: Vec<(String, Vec<u8>)>,
}

/// What the caller gave that does not fit the request or its subject; nothing was admitted.
/// Faces say it in their own terms (the CLI names its flags).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A class was named that the request does not ask for.
    #[error("class {class:?} is not asked for: the request asks for {asked:?} only")]
    UnaskedClass {
        /// The class named.
        class: String,
        /// The classes the request asks for.
        asked: Vec<String>,
    },
    /// The request asks for no class at all.
    #[error("the request asks for no verifier class; nothing to run")]
    NoClass,
    /// The objective's bytes are not UTF-8 text.
    #[error("the objective is not UTF-8 text")]
    ObjectiveNotText,
    /// The objective's bytes are not the ones the subject pins.
    #[error("the objective hashes to {actual}, not the subject's objective digest {pinned}")]
    ObjectiveMismatch {
        /// Their raw SHA-256.
        actual: Digest,
        /// The subject's objective digest.
        pinned: Digest,
    },
    /// Bytes were given for a resource the subject does not have.
    #[error("resource {name:?}: the subject has no resource of that name")]
    UnknownResource {
        /// The name given.
        name: String,
    },
    /// Bytes were given twice for one resource.
    #[error("resource {name:?} is given twice")]
    DuplicateResource {
        /// The resource.
        name: String,
    },
    /// No bytes were given for a resource of the subject.
    #[error("resource {name:?} of the subject has no content given")]
    MissingResource {
        /// The resource.
        name: String,
    },
    /// A resource's bytes are not the ones the subject pins.
    #[error("resource {name:?} hashes to {actual}, not the pinned {pinned}")]
    ResourceMismatch {
        /// The resource.
        name: String,
        /// Their raw SHA-256.
        actual: Digest,
        /// The digest the subject pins.
        pinned: Digest,
    },
}

/// Why [`Engine::verify_request`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The engine refused or failed (authority, a stale request, the store).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// What the caller gave does not fit; nothing was admitted.
    #[error("invalid input: {0}")]
    Input(#[from] InputError),
    /// A verifier class cannot run as configured; nothing was admitted.
    #[error("verifier class {class:?}: {message}")]
    Class {
        /// The class.
        class: String,
        /// What is wrong with it.
        message: String,
    },
}

impl VerifyError {
    /// The stable code of the error (an engine error's own).
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Engine(e) => e.code(),
            Self::Input(_) | Self::Class { .. } => "invalid_input",
        }
    }
}

/// Resolves a verifier class of the verifiers configuration: its provider, budget, sampling and
/// template text. The face does whatever reading that takes.
pub trait ClassSource: Send + Sync {
    /// The class `name`, or why it cannot be used.
    fn resolve(&self, name: &str) -> std::result::Result<ResolvedClass, String>;
}

impl<F> ClassSource for F
where
    F: Fn(&str) -> std::result::Result<ResolvedClass, String> + Send + Sync,
{
    fn resolve(&self, name: &str) -> std::result::Result<ResolvedClass, String> {
        self(name)
    }
}

/// How [`Engine::verify_request`] runs.
#[derive(Clone, Default)]
pub struct VerifyOptions {
    /// The classes to run, each one the request asks for; empty runs all of them.
    pub classes: Vec<String>,
    /// Where valid results are served from and kept (for classes that allow caching); `None`
    /// neither reads nor writes a cache.
    pub cache: Option<Arc<dyn ResultCache>>,
    /// The run id of the one class to run, instead of a fresh random one: a worker names the
    /// run by its job and fencing token, so each claim's attempt is a run of its own.
    pub run_id: Option<Name>,
    /// The worker's claim on the job this verification is for: the run's admission, start,
    /// context note, result and any refused result's record are written only under it, by
    /// the worker, each checked by the store in the write's own transaction (`None` outside a
    /// worker).
    pub claim: Option<JobClaim>,
    /// With `claim` and one class: the write that ends the run with its result (the last the
    /// verification makes) also completes the claim's job, in the same transaction, with the
    /// outcome `<run> completed` or `<run> ended`, as [`ClassRun::job_completed`] then says.
    pub complete_job: bool,
}

/// What became of one class's run.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassRun {
    /// The class.
    pub class: Id,
    /// Its fresh run.
    pub run_id: Name,
    /// What happened.
    pub outcome: ClassOutcome,
}

/// What happened to a class's run.
#[derive(Debug, Clone, PartialEq)]
pub enum ClassOutcome {
    /// Preflight had already decided from the deterministic evidence; no model was called.
    Skipped(Preflight),
    /// The judge ran; its result (or, when the engine refused that, an `unavailable` one in
    /// its place) ended the run.
    Judged(Judged),
    /// A result was submitted without the judge's record of the run.
    Submitted(Submitted),
}

/// A class's run that the judge ran.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// The result's status.
    pub status: VerificationStatus,
    /// Why it is unavailable, when it is.
    pub reason: Option<UnavailableReason>,
    /// The full (redacted) detail of why, when it is.
    pub detail: Option<String>,
    /// The cache key the result was served from, when it was.
    pub cache_key: Option<String>,
    /// What the submission became; `None` when the engine's refusal of the judge's result
    /// already ended the run (`invalid_output`, with the refusal recorded).
    pub submitted: Option<Submitted>,
}

impl ClassRun {
    /// Whether the write that ended the run also completed the worker's job
    /// ([`VerifyOptions::complete_job`]).
    #[must_use]
    pub fn job_completed(&self) -> bool {
        match &self.outcome {
            ClassOutcome::Judged(j) => j.submitted.as_ref().is_some_and(|s| s.job_completed),
            ClassOutcome::Skipped(_) | ClassOutcome::Submitted(_) => false,
        }
    }

    /// Whether the run completed with a result that counts.
    #[must_use]
    pub fn completed(&self) -> bool {
        match &self.outcome {
            ClassOutcome::Judged(j) => {
                j.status == VerificationStatus::Completed
                    && j.submitted.as_ref().is_some_and(|s| s.counted)
            }
            ClassOutcome::Skipped(_) | ClassOutcome::Submitted(_) => false,
        }
    }
}

/// What stays the same for every class: the subject's pinned material, checked.
struct Material {
    subject: Subject,
    subject_digest: Digest,
    objective: ObjectiveInput,
    resources: Vec<ResourceInput>,
    /// The subject's criteria the pinned policy waives the verifier's ref rule for.
    refs_waived: Vec<Id>,
}

impl Material {
    /// Whether evidence can count at all: it ran the exact definition of a check the subject
    /// pins and is not the producer's own. The model is shown nothing the Gate would ignore for
    /// those reasons; the policy's other rules (roles, freshness) stay the Gate's to apply.
    fn could_count(&self, e: &CheckEvidence) -> bool {
        e.produced_by.principal != self.subject.producer.principal
            && self
                .subject
                .checks
                .iter()
                .any(|c| c.id == e.check && c.definition_digest == e.definition_digest)
    }

    /// The judge request for one run.
    fn request(
        &self,
        identity: VerifierIdentity,
        generation: u64,
        evidence: &[CheckEvidence],
        prior: &[Finding],
    ) -> Result<JudgeRequest, EngineError> {
        let bad = invalid("judge request");
        let req = JudgeRequest {
            result_id: format!("vr-{}", identity.run)
                .parse()
                .map_err(|e| bad(format!("result id for run {}: {e}", identity.run)))?,
            verifier: identity,
            subject_digest: self.subject_digest.clone(),
            generation,
            objective: self.objective.clone(),
            criteria: self.subject.criteria.clone(),
            ask: None,
            resources: self.resources.clone(),
            evidence: evidence
                .iter()
                .filter(|e| self.could_count(e))
                .map(|e| EvidenceInput {
                    document: e.clone(),
                    output: None,
                })
                .collect(),
            prior_findings: prior.to_vec(),
            evidence_refs_waived: self.refs_waived.clone(),
        };
        req.validate().map_err(|e| bad(e.to_string()))?;
        Ok(req)
    }
}

/// The judge seen as the engine's model verifier; it keeps the run record for the context note.
struct JudgeVerifier<'a> {
    judge: &'a Judge,
    material: &'a Material,
    last: Mutex<Option<JudgeRun>>,
}

#[async_trait]
impl ModelVerifier for JudgeVerifier<'_> {
    async fn verify(&self, task: &VerifyTask) -> std::result::Result<Value, String> {
        let identity = VerifierIdentity {
            principal: task.verifier.clone(),
            class: task.class.clone(),
            run: task.run_id.clone(),
        };
        let req = self
            .material
            .request(
                identity,
                task.generation,
                &task.evidence,
                &task.prior_findings,
            )
            .map_err(|e| e.to_string())?;
        let run = self.judge.run(&req).await.map_err(|e| e.to_string())?;
        let doc = serde_json::to_value(&run.result).map_err(|e| e.to_string())?;
        if let Ok(mut slot) = self.last.lock() {
            *slot = Some(run);
        }
        Ok(doc)
    }
}

impl Engine {
    /// Runs the model verifier for the stored request `request`, acting as `caller` (the
    /// verifier whose runs they become), for every class the request asks for or those of
    /// [`VerifyOptions::classes`]. See [`Engine::verify_request_each`].
    pub async fn verify_request(
        &self,
        caller: &Principal,
        request: &Digest,
        inputs: &VerifyInputs,
        classes: &dyn ClassSource,
        options: &VerifyOptions,
    ) -> Result<Vec<ClassRun>, VerifyError> {
        self.verify_request_each(caller, request, inputs, classes, options, &mut |_| {})
            .await
    }

    /// [`Engine::verify_request`], handing each class's run to `each` as soon as it has ended,
    /// so a face can report it before the next class runs.
    ///
    /// Everything that can be refused without a run is checked first, and a refusal admits
    /// nothing: the classes (each one the request asks for), the objective's and every
    /// resource's bytes against the digests the subject pins, each class's configuration (its
    /// budget lowered to the request's caps; a cost cap needs prices), and a dry build of each
    /// class's judge request from what is stored now. Then, per class: a fresh run is admitted
    /// (as the caller; preflight first, and when it already decides, no model is called), the
    /// judge runs, the context it was shown and its receipts are recorded with the run, and
    /// its result is submitted, `unavailable` ones included. A result the engine refuses ends
    /// the run `unavailable` (`invalid_output`) with the refusal as its detail, never left
    /// started with nothing submitted.
    pub async fn verify_request_each(
        &self,
        caller: &Principal,
        request: &Digest,
        inputs: &VerifyInputs,
        classes: &dyn ClassSource,
        options: &VerifyOptions,
        each: &mut (dyn FnMut(&ClassRun) + Send),
    ) -> Result<Vec<ClassRun>, VerifyError> {
        // Nothing about the request (not even which classes it asks for, or whether it is
        // stored) is told to a caller who may not read its execution: a request that is not
        // stored is refused in the same words as one out of scope.
        let named = format!("verification request {request}");
        let req = match self.request(request).await {
            Ok(req) => req,
            Err(EngineError::NotFound { .. }) if caller.role != Role::Operator => {
                return Err(self.deny_unseen(caller, named).await.into());
            }
            Err(e) => return Err(e.into()),
        };
        if caller.role != Role::Operator {
            let subject = self.subject(&req.subject_digest).await?;
            self.require_read_subject(caller, &subject, named).await?;
        }
        let to_run = chosen_classes(&req, &options.classes)?;
        let subject = self.subject(&req.subject_digest).await?;
        // The policy the request pinned says which criteria, if any, may pass without refs.
        let policy = self.policy(&req.policy_digest).await?;
        let refs_waived = subject
            .criteria
            .items
            .iter()
            .map(|c| c.id.clone())
            .filter(|id| policy.evidence_refs_waived.contains(id))
            .collect();
        let material = Material {
            objective: objective(&inputs.objective, &subject)?,
            resources: resources(&inputs.resources, &subject)?,
            subject,
            subject_digest: req.subject_digest.clone(),
            refs_waived,
        };
        let mut judges = Vec::new();
        for class in &to_run {
            judges.push((
                class.clone(),
                self.judge_for(class, &req.budget, classes, options)?,
            ));
        }
        // A dry build with what is stored now, so a request the judge would refuse is bad input
        // here, before any run is admitted and left half-done.
        let evidence = self.evidence_about(&material.subject_digest).await?;
        let prior = self.pinned_prior_findings(caller, &req).await?;
        for (class, _) in &judges {
            material.request(
                VerifierIdentity {
                    principal: caller.name.clone(),
                    class: class.clone(),
                    run: "vrun-check"
                        .parse()
                        .map_err(|e| invalid("run id")(format!("{e}")))?,
                },
                req.generation,
                &evidence,
                &prior,
            )?;
        }
        let mut out = Vec::new();
        for (class, judge) in &judges {
            let run = self
                .verify_class(caller, request, class, judge, &material, options)
                .await?;
            each(&run);
            out.push(run);
        }
        Ok(out)
    }

    /// The judge of one class, its budget lowered to the request's caps.
    fn judge_for(
        &self,
        class: &Id,
        cap: &RequestBudget,
        classes: &dyn ClassSource,
        options: &VerifyOptions,
    ) -> Result<Judge, VerifyError> {
        let refused = |message: String| VerifyError::Class {
            class: class.to_string(),
            message,
        };
        let mut resolved = classes.resolve(class.as_str()).map_err(refused)?;
        capped(&mut resolved.config.budget, cap);
        if resolved.config.budget.max_cost.is_some() && resolved.config.provider.price().is_none() {
            return Err(refused(
                "the request caps cost, but the class has no provider.price to estimate costs with"
                    .into(),
            ));
        }
        let provider = resolved
            .config
            .provider(class.as_str())
            .map_err(|e| refused(e.to_string()))?;
        let mut judge = Judge::new(resolved, provider).map_err(|e| refused(e.to_string()))?;
        if let Some(cache) = &options.cache {
            judge = judge.with_cache(cache.clone());
        }
        Ok(judge)
    }

    /// One class: admission, the judge, the context note and the submission.
    async fn verify_class(
        &self,
        caller: &Principal,
        request: &Digest,
        class: &Id,
        judge: &Judge,
        material: &Material,
        options: &VerifyOptions,
    ) -> Result<ClassRun, VerifyError> {
        let run_id = match (&options.run_id, options.classes.as_slice()) {
            (Some(id), [_]) => id.clone(),
            _ => new_run_id(class)?,
        };
        let claim = options.claim.as_ref();
        // Only a run that is the verification's one class ends its job.
        let complete_job = options.complete_job && options.classes.len() == 1;
        let pre = self
            .admit_claimed(
                caller,
                request,
                caller.name.as_str(),
                class.as_str(),
                run_id.as_str(),
                claim,
            )
            .await?;
        let done = |outcome| ClassRun {
            class: class.clone(),
            run_id: run_id.clone(),
            outcome,
        };
        if pre.skipped {
            return Ok(done(ClassOutcome::Skipped(pre)));
        }
        let model = JudgeVerifier {
            judge,
            material,
            last: Mutex::new(None),
        };
        let produced = match self
            .produce_claimed(caller, run_id.as_str(), &model, claim)
            .await
        {
            // The job was taken over: this worker writes nothing more about its run. Nor is
            // a failure of the store a refusal of the result: the run is left as it stands
            // for another attempt (a worker's next claim ends it) rather than ended on a
            // connection that was cut.
            Err(e) if transient(&e) => return Err(e.into()),
            other => other,
        };
        let record = model.last.lock().ok().and_then(|mut s| s.take());
        let (verifier, doc, mut record) = match (produced, record) {
            (Ok(Produced::Skipped(pre)), _) => return Ok(done(ClassOutcome::Skipped(pre))),
            (Ok(Produced::Result { verifier, doc }), Some(run)) => (verifier, doc, run),
            (Ok(Produced::Result { verifier, doc }), None) => {
                let s = self.submit_result_claimed(&verifier, &doc, claim).await?;
                return Ok(done(ClassOutcome::Submitted(s)));
            }
            (Err(e), _) => return Err(e.into()),
        };
        let mut report = RunReport {
            manifest: record.manifest.to_value(),
            receipts: std::mem::take(&mut record.receipts),
            detail: record.detail.clone(),
            cache_key: record.cache_key.as_ref().map(|k| k.0.to_string()),
        };
        // The run's record is written before its result: a result is never stored, let alone
        // counted, without the record of the calls that made it. Should the record be refused,
        // the result is not submitted as it is: the run ends `unavailable` with why, kept in a
        // record without the receipts when that one can be stored.
        let doc = match self
            .record_run_context_claimed(caller, run_id.as_str(), &report, claim)
            .await
        {
            Ok(_) => doc,
            Err(e) if transient(&e) => return Err(e.into()),
            Err(refused) => {
                unavailable(
                    &mut record,
                    format!(
                        "the engine could not store the run's record, so its result is not kept: {refused}"
                    ),
                );
                report.receipts.clear();
                report.detail.clone_from(&record.detail);
                match self
                    .record_run_context_claimed(caller, run_id.as_str(), &report, claim)
                    .await
                {
                    Err(e) if transient(&e) => return Err(e.into()),
                    // The result's own status says the run is unavailable; the detail is
                    // returned to the caller below.
                    Ok(_) | Err(_) => {}
                }
                serde_json::to_value(&record.result)
                    .map_err(|e| invalid("verification result")(e.to_string()))?
            }
        };
        let submitted = match self
            .submit_result_ending(&verifier, &doc, claim, complete_job)
            .await
        {
            Ok(s) => Some(s),
            Err(e) if transient(&e) => return Err(e.into()),
            Err(refused) => {
                // The engine refused what the judge produced: the run must still end, so it
                // ends `unavailable` with `invalid_output` and the refusal as its reason,
                // recorded again with the receipts (the latest record is the one shown).
                unavailable(
                    &mut record,
                    format!("the engine refused the result: {refused}"),
                );
                report.detail.clone_from(&record.detail);
                self.record_run_context_claimed(caller, run_id.as_str(), &report, claim)
                    .await?;
                if self.run_ended(run_id.as_str()).await? {
                    // A refusal at validation already ended the run and recorded why.
                    None
                } else {
                    // Anything else left it open, and the `unavailable` result ends it.
                    let doc = serde_json::to_value(&record.result)
                        .map_err(|e| invalid("verification result")(e.to_string()))?;
                    Some(
                        self.submit_result_ending(caller, &doc, claim, complete_job)
                            .await?,
                    )
                }
            }
        };
        Ok(done(ClassOutcome::Judged(Judged {
            status: record.result.status,
            reason: record.result.unavailable_reason,
            detail: record.detail,
            cache_key: report.cache_key,
            submitted,
        })))
    }

    /// Whether run `run_id` has ended.
    async fn run_ended(&self, run_id: &str) -> Result<bool, EngineError> {
        Ok(self
            .store
            .run(run_id)
            .await?
            .and_then(|r| r.status())
            .is_some_and(RunStatus::is_terminal))
    }
}

/// Whether `e` is the store failing or the job taken over, not a refusal of what was written:
/// the run is then left as it stands for another attempt.
fn transient(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Store(
            StoreError::StaleClaim { .. }
                | StoreError::Backend { .. }
                | StoreError::Unavailable { .. }
        )
    )
}

/// Turns the judge's record of a run into an `unavailable` one (`invalid_output`) saying why.
fn unavailable(run: &mut JudgeRun, detail: String) {
    run.result.status = VerificationStatus::Unavailable;
    run.result.unavailable_reason = Some(UnavailableReason::InvalidOutput);
    run.result.criteria.clear();
    run.result.findings.clear();
    run.result.dispositions.clear();
    run.detail = Some(detail);
}

/// The classes to run: those named (each one the request asks for), else all it asks for.
fn chosen_classes(req: &VerificationRequest, named: &[String]) -> Result<Vec<Id>, VerifyError> {
    let asked = || {
        req.verifier_classes
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    let chosen: Vec<Id> = if named.is_empty() {
        req.verifier_classes.clone()
    } else {
        let mut out = Vec::new();
        for c in named {
            match req.verifier_classes.iter().find(|k| k.as_str() == c) {
                Some(k) => out.push(k.clone()),
                None => {
                    return Err(InputError::UnaskedClass {
                        class: c.clone(),
                        asked: asked(),
                    }
                    .into());
                }
            }
        }
        out
    };
    if chosen.is_empty() {
        return Err(InputError::NoClass.into());
    }
    Ok(chosen)
}

/// Lowers a class's budget to the caps the request pins; a cap never raises a limit.
fn capped(budget: &mut Budget, cap: &RequestBudget) {
    if let Some(t) = cap.max_total_tokens {
        budget.max_total_tokens = Some(budget.max_total_tokens.map_or(t, |b| b.min(t)));
    }
    if let Some(c) = cap.max_cost {
        budget.max_cost = Some(budget.max_cost.map_or(c, |b| b.min(c)));
    }
    if let Some(t) = cap.timeout_s {
        budget.timeout_s = budget.timeout_s.min(t);
    }
}

/// A fresh run id per class: runs are never reused, so a second verification starts new ones.
fn new_run_id(class: &Id) -> Result<Name, EngineError> {
    let token = crate::token::generate()?;
    let hex = token
        .trim_start_matches(crate::token::TOKEN_PREFIX)
        .get(..12)
        .unwrap_or_default();
    format!("vrun-{class}-{hex}")
        .parse()
        .map_err(|e| invalid("run id")(format!("{e}")))
}

fn objective(bytes: &[u8], subject: &Subject) -> Result<ObjectiveInput, InputError> {
    let text = String::from_utf8(bytes.to_vec()).map_err(|_| InputError::ObjectiveNotText)?;
    let actual = digest::raw(text.as_bytes());
    if actual != subject.objective.digest {
        return Err(InputError::ObjectiveMismatch {
            actual,
            pinned: subject.objective.digest.clone(),
        });
    }
    Ok(ObjectiveInput {
        revision: subject.objective.revision.clone(),
        text,
        digest: Some(actual),
    })
}

fn resources(
    given: &[(String, Vec<u8>)],
    subject: &Subject,
) -> Result<Vec<ResourceInput>, InputError> {
    let mut by_name: BTreeMap<&str, &[u8]> = BTreeMap::new();
    for (name, bytes) in given {
        if !subject.resources.iter().any(|r| r.name.as_str() == name) {
            return Err(InputError::UnknownResource { name: name.clone() });
        }
        if by_name.insert(name, bytes).is_some() {
            return Err(InputError::DuplicateResource { name: name.clone() });
        }
    }
    let mut out = Vec::new();
    for r in &subject.resources {
        let Some(content) = by_name.get(r.name.as_str()) else {
            return Err(InputError::MissingResource {
                name: r.name.to_string(),
            });
        };
        let actual = digest::raw(content);
        if actual != r.digest {
            return Err(InputError::ResourceMismatch {
                name: r.name.to_string(),
                actual,
                pinned: r.digest.clone(),
            });
        }
        out.push(ResourceInput {
            name: r.name.clone(),
            kind: r.kind.clone(),
            digest: actual,
            content: content.to_vec(),
            required: true,
        });
    }
    Ok(out)
}
