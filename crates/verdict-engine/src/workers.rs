//! Workers: a verification request taken to a decision with nobody at a shell.
//!
//! [`Engine::enqueue_request_jobs`] turns a stored request into jobs in the store's queue
//! ([`verdict_store::jobs`]): one `checks` job when its subject pins checks, one `verify` job
//! per verifier class it asks for, and one `gate` job. [`Engine::work_one`] claims one job of
//! the caller's worker role, performs it through the engine's own use cases as the caller (so
//! every effect is an ordinary audited write, checked like any other), and finishes it with
//! its fencing token. A worker whose lease lapsed cannot finish its job: the store refuses a
//! stale token. While a job runs, its lease is renewed every third of its length; when a
//! renewal is refused the job's work is dropped where it stands.

use crate::documents::VerificationRequest;
use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result};
use crate::notes::{RUN_TAKEOVER_SCHEMA, Requester, RunTakeover};
use crate::verify::{ClassRun, ClassSource, VerifyInputs, VerifyOptions};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use verdict_core::contracts::{GateDecision, Name, Role, Subject};
use verdict_core::digest::Digest;
use verdict_store::{
    Actor, Job, JobClaim, JobFilter, JobKind, JobState, NewJob, RequestJob, RunStatus, StoreError,
    Wakeup,
};

/// Attempts at one job before it is given up (each a claim of its own).
pub const MAX_ATTEMPTS: i64 = 5;

/// What a worker works.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerRole {
    /// Runs the checks a request's subject pins (a runner principal).
    Runner,
    /// Runs one model verifier class of a request (a verifier principal).
    Verifier,
    /// Runs the Gate for a request's execution (an operator principal, writing as the Gate).
    Gate,
}

impl WorkerRole {
    /// The kind of job this role claims.
    #[must_use]
    pub const fn kind(self) -> JobKind {
        match self {
            Self::Runner => JobKind::Checks,
            Self::Verifier => JobKind::Verify,
            Self::Gate => JobKind::Gate,
        }
    }

    /// The principal role that may work this role.
    #[must_use]
    pub const fn principal_role(self) -> Role {
        match self {
            Self::Runner => Role::Runner,
            Self::Verifier => Role::Verifier,
            Self::Gate => Role::Operator,
        }
    }

    /// The role's name, as `verdict worker --role` takes it.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Runner => "runner",
            Self::Verifier => "verifier",
            Self::Gate => "gate",
        }
    }
}

/// What a verifier worker needs from its face: the bytes a subject pins by digest, and the
/// verifier classes of its configuration.
#[async_trait]
pub trait VerifierKit: Send + Sync {
    /// The objective's and the resources' bytes of `subject`, or why they cannot be had.
    async fn inputs(&self, subject: &Subject) -> std::result::Result<VerifyInputs, String>;
    /// The verifier classes.
    fn classes(&self) -> &dyn ClassSource;
}

/// The queue's depth for one kind of job ([`Engine::queue_depth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDepth {
    /// The kind.
    pub kind: JobKind,
    /// Jobs ready (some perhaps still backing off or waiting for another job).
    pub ready: u64,
    /// Jobs claimed and not finished.
    pub running: u64,
    /// Of those running, the ones whose lease lapsed by the store's clock.
    pub lapsed: u64,
}

/// Why a job's attempt failed, and whether another attempt could do better.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFailure {
    /// Why, in words (recorded as the job's last error).
    pub why: String,
    /// Whether the job is tried again after a back-off (up to [`MAX_ATTEMPTS`]); `false` gives
    /// it up at once (nothing a retry could change, such as a definition the worker lacks).
    pub retry: bool,
}

impl From<String> for JobFailure {
    /// A failure worth retrying.
    fn from(why: String) -> Self {
        Self { why, retry: true }
    }
}

impl From<&str> for JobFailure {
    fn from(why: &str) -> Self {
        Self::from(why.to_owned())
    }
}

/// What a runner worker needs from its face: running the checks a subject pins. The engine
/// files the evidence they produced, as the caller and under the job's claim, in the
/// transaction that also ends the job: a runner whose claim was taken over files nothing.
#[async_trait]
pub trait ChecksKit: Send + Sync {
    /// Runs the checks of `subject` (stored as `subject_digest`) for `caller`, the runner the
    /// evidence names; returns the evidence and what to record as the job's outcome.
    async fn run_checks(
        &self,
        caller: &Principal,
        subject: &Subject,
        subject_digest: &Digest,
    ) -> std::result::Result<ChecksRun, JobFailure>;
}

/// What a runner's checks produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ChecksRun {
    /// The check evidence documents to file, each naming the runner as its producer.
    pub evidence: Vec<serde_json::Value>,
    /// What to record as the job's outcome.
    pub outcome: String,
}

/// How a worker works.
#[derive(Clone)]
pub struct WorkOptions {
    /// The label of this worker instance (host and process, say), kept with each claim.
    pub holder: String,
    /// The lease taken with each claim, renewed every third of it while the job runs.
    pub lease: Duration,
    /// For verifier workers.
    pub verifier: Option<Arc<dyn VerifierKit>>,
    /// For runner workers.
    pub checks: Option<Arc<dyn ChecksKit>>,
    /// The back-off after a job's first failed attempt, doubled after each further one up to
    /// five minutes ([`DEFAULT_BACK_OFF`] unless a test needs a faster queue).
    pub back_off: Duration,
}

/// The back-off after a first failed attempt: 2 seconds.
pub const DEFAULT_BACK_OFF: Duration = Duration::from_secs(2);

/// What [`Engine::work_one`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worked {
    /// No job of the role was ready.
    Idle,
    /// The job was done and finished with the claim's token.
    Done(Job),
    /// The attempt failed; the job is ready again after a back-off, or was given up.
    Failed {
        /// The job as it stands.
        job: Job,
        /// Why.
        why: String,
    },
    /// The claim was lost (its lease lapsed and another worker took the job): its work was
    /// dropped or, if it had ended, its completion was refused.
    Lost {
        /// The job.
        job: Job,
    },
}

/// What one job's work came to.
struct Performed {
    /// What to record as the job's outcome.
    outcome: String,
    /// Whether the work's last write already completed the job, with `outcome`, in its own
    /// transaction ([`JobClaim::completes`]), so nothing is left to finish.
    completed: bool,
}

impl From<String> for Performed {
    /// Work whose job is still to be completed.
    fn from(outcome: String) -> Self {
        Self {
            outcome,
            completed: false,
        }
    }
}

/// A gate job's outcome: the decision's outcome and evaluation key, or, when the Gate decided
/// a later subject than the request's (`request_subject`), that it was superseded.
fn gate_outcome(decision: &GateDecision, request_subject: &Digest) -> String {
    let key = decision
        .evaluation_key
        .as_ref()
        .map_or_else(String::new, ToString::to_string);
    // The Gate decides the execution's current subject; a job whose request was about an
    // earlier one says so, rather than read as its request's outcome.
    match &decision.subject_digest {
        Some(decided) if decided != request_subject => format!(
            "superseded: request's subject {request_subject} is no longer current; the Gate decided subject {decided}: {} {key}",
            decision.outcome.as_str()
        ),
        _ => format!("{} {key}", decision.outcome.as_str()),
    }
}

/// The run a verify job's claim `fencing` admits.
fn run_name(job: i64, fencing: i64) -> String {
    format!("job-{job}-{fencing}")
}

/// The back-off before attempt `attempts + 1`: `first`, twice that, four times, ..., at most
/// five minutes (2, 4, 8, ... seconds by default).
fn back_off(first: Duration, attempts: i64) -> Duration {
    let exp = u32::try_from(attempts.clamp(1, 9) - 1).unwrap_or(8);
    first
        .saturating_mul(2u32.saturating_pow(exp))
        .min(Duration::from_secs(300))
}

/// The jobs of request `req` about `subject`: `checks` when the subject pins checks, one
/// `verify` per class the request asks for, and the `gate` job, with `deadline`.
pub(crate) fn request_jobs(
    subject: &Subject,
    req: &VerificationRequest,
    deadline: Option<Duration>,
) -> Vec<RequestJob> {
    let job = |kind, class: &str, deadline| RequestJob {
        kind,
        class: class.to_owned(),
        deadline,
    };
    let mut jobs = Vec::new();
    if !subject.checks.is_empty() {
        jobs.push(job(JobKind::Checks, "", None));
    }
    for class in &req.verifier_classes {
        jobs.push(job(JobKind::Verify, class.as_str(), None));
    }
    jobs.push(job(JobKind::Gate, "", deadline));
    jobs
}

impl Engine {
    /// Enqueues the jobs of the stored request `request`: `checks` when its subject pins
    /// checks, one `verify` per class it asks for, and the `gate` job, which runs once the
    /// others are finished or `deadline` passed (from now, on the queue's clock: the
    /// database's on PostgreSQL, the system's on SQLite; a manual store clock moves no lease).
    /// The caller is an operator or the producer of the request's subject. Enqueuing again
    /// adds nothing.
    pub async fn enqueue_request_jobs(
        &self,
        caller: &Principal,
        request: &Digest,
        deadline: Option<Duration>,
    ) -> Result<Vec<Job>> {
        self.require_role(
            caller,
            &[Role::Operator, Role::Producer],
            "enqueue a request's jobs",
        )
        .await?;
        let refusal = || EngineError::PermissionDenied {
            principal: caller.name().to_string(),
            role: caller.role().as_str(),
            action: format!("enqueue the jobs of request {request}"),
            why: "only an operator or the producer of the request's subject may".into(),
        };
        let req = match self.request(request).await {
            Ok(req) => req,
            // A producer is refused a request that is not stored in the same words as another
            // producer's, so the refusal does not say which requests exist.
            Err(EngineError::NotFound { .. }) if caller.role() == Role::Producer => {
                return Err(self.deny(caller, refusal()).await);
            }
            Err(e) => return Err(e),
        };
        let subject = self.subject(&req.subject_digest).await?;
        if caller.role() == Role::Producer && subject.producer.principal != *caller.name() {
            return Err(self.deny(caller, refusal()).await);
        }
        let jobs: Vec<NewJob> = request_jobs(&subject, &req, deadline)
            .iter()
            .map(|j| j.of(request))
            .collect();
        Ok(self
            .store
            .queue()
            .enqueue_jobs(&caller.actor(), &jobs)
            .await?)
    }

    /// The jobs `filter` matches, by id (operators only: the queue names requests of every
    /// execution).
    pub async fn jobs(&self, caller: &Principal, filter: &JobFilter) -> Result<Vec<Job>> {
        self.require_role(caller, &[Role::Operator], "read the job queue")
            .await?;
        Ok(self.store.queue().jobs(filter).await?)
    }

    /// How many jobs of each kind wait and run, and how many of those running hold a lease
    /// that has lapsed by the store's clock (a worker gone without finishing, whose job the
    /// next claim takes over): what `/metrics` shows as the queue's depth and its leases.
    /// Operators only, as the job queue and every platform-wide number are: the outer error is
    /// the refusal (its denial recorded). The inner one is the store failing to read the
    /// queue, which a scrape reports among its metrics rather than failing on. Reads the
    /// unfinished jobs only.
    pub async fn queue_depth(&self, caller: &Principal) -> Result<Result<Vec<QueueDepth>>> {
        self.require_role(caller, &[Role::Operator], "read the server's metrics")
            .await?;
        Ok(self.read_queue_depth().await)
    }

    async fn read_queue_depth(&self) -> Result<Vec<QueueDepth>> {
        let now = self.now().await?;
        let mut out: Vec<QueueDepth> = JobKind::ALL
            .iter()
            .map(|&kind| QueueDepth {
                kind,
                ready: 0,
                running: 0,
                lapsed: 0,
            })
            .collect();
        for state in [JobState::Ready, JobState::Running] {
            let filter = JobFilter {
                state: Some(state),
                ..JobFilter::default()
            };
            for job in self.store.queue().jobs(&filter).await? {
                let Some(depth) = out.iter_mut().find(|d| d.kind == job.kind) else {
                    continue;
                };
                if state == JobState::Ready {
                    depth.ready += 1;
                } else {
                    depth.running += 1;
                    if job
                        .lease_until
                        .is_some_and(|until| until.unix_nanos() <= now.unix_nanos())
                    {
                        depth.lapsed += 1;
                    }
                }
            }
        }
        Ok(out)
    }

    /// Waits until a job of `role` that `caller` may claim may have become claimable, for at
    /// most `max_wait` ([`verdict_store::JobQueue::wait_for_jobs_as`]): what an idle worker
    /// does between claims instead of sleeping. Only a hint; [`Engine::work_one`] decides.
    pub async fn wait_for_jobs(
        &self,
        caller: &Principal,
        role: WorkerRole,
        max_wait: Duration,
    ) -> Result<Wakeup> {
        Ok(self
            .store
            .queue()
            .wait_for_jobs_as(&caller.actor(), role.kind(), max_wait)
            .await?)
    }

    /// Claims one ready job of `role` as `caller`, performs it through the engine's use cases
    /// as `caller`, and finishes it with the claim's fencing token. The caller's principal role
    /// must be the worker role's ([`WorkerRole::principal_role`]); a refusal is a denial.
    pub async fn work_one(
        &self,
        caller: &Principal,
        role: WorkerRole,
        options: &WorkOptions,
    ) -> Result<Worked> {
        self.require_role(
            caller,
            &[role.principal_role()],
            &format!("work {} jobs", role.as_str()),
        )
        .await?;
        let actor = match role {
            // The gate job's effect is written as the Gate, as `gate run` writes it.
            WorkerRole::Gate => Actor::gate(caller.name().as_str()),
            WorkerRole::Runner | WorkerRole::Verifier => caller.actor(),
        };
        let queue = self.store.queue();
        let Some(job) = queue
            .claim_job(&actor, role.kind(), &options.holder, options.lease)
            .await?
        else {
            return Ok(Worked::Idle);
        };
        let work = self.perform(caller, &job, options);
        let renew = self.keep_lease(&actor, &job, options.lease);
        let done = tokio::select! {
            // The work first: when both are ready, its last write may have completed the job,
            // which is why a renewal was refused.
            biased;
            done = work => done,
            lost = renew => return self.lost_unless_done(lost).await,
        };
        let finished = match done {
            Ok(Performed { outcome, completed }) => {
                // Taken as done only as the store has it.
                let ended = if completed {
                    self.done_under(&job).await?
                } else {
                    None
                };
                match ended {
                    Some(now) => Ok(Worked::Done(now)),
                    None => queue
                        .complete_job(&actor, job.id, job.fencing, &outcome)
                        .await
                        .map(Worked::Done),
                }
            }
            Err(JobFailure { why, retry }) => {
                let retry = (retry && job.attempts < MAX_ATTEMPTS)
                    .then(|| back_off(options.back_off, job.attempts));
                queue
                    .fail_job(&actor, job.id, job.fencing, &why, retry)
                    .await
                    .map(|job| Worked::Failed { job, why })
            }
        };
        match finished {
            Ok(w) => Ok(w),
            Err(StoreError::StaleClaim { .. }) => self.lost_unless_done(job).await,
            Err(e) => Err(e.into()),
        }
    }

    /// A claim on `job` was refused: the job is lost, unless this very claim completed it in
    /// the transaction of its last write (a renewal, or a late failure, then finds it done).
    async fn lost_unless_done(&self, job: Job) -> Result<Worked> {
        Ok(match self.done_under(&job).await? {
            Some(now) => Worked::Done(now),
            None => Worked::Lost { job },
        })
    }

    /// The job as the store has it, if it is done under the claim `job` was taken with.
    async fn done_under(&self, job: &Job) -> Result<Option<Job>> {
        Ok(self
            .store
            .queue()
            .job(job.id)
            .await?
            .filter(|now| now.state == JobState::Done && now.fencing == job.fencing))
    }

    /// Renews the lease every third of its length until a renewal is refused; returns the
    /// job then. Any other failure to renew is retried at the next tick: the lease may still
    /// hold, and if it lapses the next renewal says so.
    async fn keep_lease(&self, actor: &Actor, job: &Job, lease: Duration) -> Job {
        let tick = (lease / 3).max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(tick).await;
            if let Err(StoreError::StaleClaim { .. }) = self
                .store
                .queue()
                .heartbeat(actor, job.id, job.fencing, lease)
                .await
            {
                return job.clone();
            }
        }
    }

    /// Ends the runs earlier claims of verify job `job` admitted and left open: their workers
    /// lost the job (a lapsed lease and a new claim), so nothing they do counts any more. Each
    /// is recorded ([`RunTakeover`], written by `caller`, the new claimant, under `claim`) and
    /// cancelled by it, which also gives its place under the request's `max_runs` back. Returns the
    /// id of an earlier claim's run that already completed, if one did: its result stands.
    async fn end_earlier_runs(
        &self,
        caller: &Principal,
        job: &Job,
        claim: &JobClaim,
    ) -> Result<Option<String>> {
        let mut completed = None;
        for fencing in 1..job.fencing {
            let run_id = run_name(job.id, fencing);
            let Some(run) = self.store.run(&run_id).await? else {
                continue;
            };
            match run.status() {
                Some(RunStatus::Completed) => completed = Some(run_id),
                Some(s) if s.is_terminal() => {}
                _ => {
                    let note = RunTakeover {
                        schema: RUN_TAKEOVER_SCHEMA.to_owned(),
                        run_id: run.admission.run_id.clone(),
                        subject_digest: run.admission.subject_digest.clone(),
                        job: job.id,
                        stale_fencing: fencing,
                        fencing: job.fencing,
                        taken_by: Requester {
                            principal: caller.name().clone(),
                            role: caller.role(),
                        },
                        reason: format!(
                            "claim {fencing} of the job ended without a result for this run (its lease lapsed or its attempt failed), and claim {} took the job",
                            job.fencing
                        ),
                        at: self.now().await?,
                    };
                    // Written by the new claimant, each only while its claim holds, checked in
                    // the write's own transaction: a worker that lost the job meanwhile ends
                    // nothing.
                    let actor = caller.actor();
                    self.put_note_claimed(&actor, Some(claim), &note).await?;
                    self.run_status_as(&actor, Some(claim), &run_id, RunStatus::Cancelled, None)
                        .await?;
                }
            }
        }
        Ok(completed)
    }

    /// One job's work; `Err` is why the attempt failed.
    async fn perform(
        &self,
        caller: &Principal,
        job: &Job,
        options: &WorkOptions,
    ) -> std::result::Result<Performed, JobFailure> {
        let req = self
            .request(&job.request)
            .await
            .map_err(|e| e.to_string())?;
        let claim = JobClaim::new(job.id, job.fencing, options.lease);
        match job.kind {
            JobKind::Gate => {
                // A decision this run stores is the job's effect: written under the claim, it
                // completes the job in the same transaction.
                let outcome = |d: &GateDecision| gate_outcome(d, &req.subject_digest);
                let (run, completed) = self
                    .gate_run_finishing(caller, req.execution.as_str(), Some((&claim, &outcome)))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Performed {
                    outcome: outcome(&run.decision),
                    completed,
                })
            }
            JobKind::Verify => {
                let kit = options
                    .verifier
                    .as_ref()
                    .ok_or("this worker has no verifier configuration")?;
                let subject = self
                    .subject(&req.subject_digest)
                    .await
                    .map_err(|e| e.to_string())?;
                let inputs = kit.inputs(&subject).await?;
                if let Some(run) = self
                    .end_earlier_runs(caller, job, &claim)
                    .await
                    .map_err(|e| e.to_string())?
                {
                    return Ok(format!("{run} completed (an earlier claim's run)").into());
                }
                // The run is named by the job and the claim's token: each claim's attempt is a
                // run of its own, and a retried admission of the same claim is refused.
                let run_id: Name = run_name(job.id, job.fencing)
                    .parse()
                    .map_err(|e| format!("run id: {e}"))?;
                let verify = VerifyOptions {
                    classes: vec![job.class.clone()],
                    cache: None,
                    run_id: Some(run_id),
                    claim: Some(claim),
                    // The write ending the run is the job's last effect, and completes it.
                    complete_job: true,
                };
                let runs = self
                    .verify_request(caller, &job.request, &inputs, kit.classes(), &verify)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Performed {
                    outcome: runs
                        .iter()
                        .map(|r| {
                            format!(
                                "{} {}",
                                r.run_id,
                                if r.completed() { "completed" } else { "ended" }
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", "),
                    completed: runs.iter().any(ClassRun::job_completed),
                })
            }
            JobKind::Checks => {
                let kit = options
                    .checks
                    .as_ref()
                    .ok_or("this worker has no checks configuration")?;
                let subject = self
                    .subject(&req.subject_digest)
                    .await
                    .map_err(|e| e.to_string())?;
                let run = kit
                    .run_checks(caller, &subject, &req.subject_digest)
                    .await?;
                if run.evidence.is_empty() {
                    return Ok(run.outcome.into());
                }
                // The evidence is the job's effect: filed under the claim, it ends the job in
                // the same transaction, or, the claim taken over, is not filed at all.
                let ending = claim.completing(run.outcome.clone());
                self.add_evidence_claimed(caller, &run.evidence, Some(&ending))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Performed {
                    outcome: run.outcome,
                    completed: true,
                })
            }
        }
    }
}
