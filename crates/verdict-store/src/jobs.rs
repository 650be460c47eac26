//! The job queue: operational state that takes a verification request to a decision with
//! workers on as many machines as needed.
//!
//! Unlike every other table, a job row changes: it is claimed, its lease renewed, and it is
//! finished. Nothing counts through it: a job's effects are the engine's ordinary audited
//! writes (check evidence, runs and results, gate decisions), so `audit verify` neither covers
//! the queue nor needs it. What the queue guarantees is who may finish a job: every claim
//! increments the job's fencing token, and a heartbeat, completion or failure is refused
//! ([`StoreError::StaleClaim`]) unless it carries the current token, comes from the principal
//! that claimed, and its lease holds (a lapsed claim is lost though nobody took the job yet).
//! A claim takes a ready job, or one whose lease lapsed; on PostgreSQL with
//! `FOR UPDATE SKIP LOCKED` inside a SECURITY DEFINER routine, on SQLite inside a
//! `BEGIN IMMEDIATE` transaction. Every time is the store's: the database's clock on
//! PostgreSQL, the system clock on SQLite (one machine), or on a store that keeps a manual
//! clock the time the handle set, which the PostgreSQL routines are given with each
//! transaction.

use crate::actor::{Actor, ActorRole};
use crate::error::{Result, StoreError};
use async_trait::async_trait;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use verdict_core::contracts::Timestamp;
use verdict_core::digest::Digest;

/// What a job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobKind {
    /// Run the checks the request's subject pins (runners).
    Checks,
    /// Run one model verifier class for the request (verifiers).
    Verify,
    /// Run the Gate once the other jobs of the request are finished or its deadline passed.
    Gate,
}

impl JobKind {
    /// Every kind.
    pub const ALL: [Self; 3] = [Self::Checks, Self::Verify, Self::Gate];

    /// The name stored in the `kind` column.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Checks => "checks",
            Self::Verify => "verify",
            Self::Gate => "gate",
        }
    }

    /// The role that claims, renews and finishes jobs of this kind.
    #[must_use]
    pub const fn worker_role(self) -> ActorRole {
        match self {
            Self::Checks => ActorRole::Runner,
            Self::Verify => ActorRole::Verifier,
            Self::Gate => ActorRole::Gate,
        }
    }
}

impl fmt::Display for JobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobKind {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| StoreError::Invalid {
                what: "job kind",
                message: format!("{s:?} is not one of checks, verify, gate"),
            })
    }
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Waiting to be claimed (maybe not before a time).
    Ready,
    /// Claimed, under a lease.
    Running,
    /// Finished by the holder of its current claim.
    Done,
    /// Given up.
    Failed,
}

impl JobState {
    /// The name stored in the `state` column.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Running => "running",
            Self::Done => "done",
            Self::Failed => "failed",
        }
    }

    /// Whether the job will not run again.
    #[must_use]
    pub const fn is_finished(self) -> bool {
        matches!(self, Self::Done | Self::Failed)
    }
}

impl FromStr for JobState {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self> {
        [Self::Ready, Self::Running, Self::Done, Self::Failed]
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| StoreError::Invalid {
                what: "job state",
                message: format!("{s:?} is not one of ready, running, done, failed"),
            })
    }
}

/// A job to enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// What it does.
    pub kind: JobKind,
    /// The verification request it is for.
    pub request: Digest,
    /// The verifier class of a verify job; empty for the other kinds.
    pub class: String,
    /// A gate job's deadline, from now: past it the gate job is ready whatever the other jobs
    /// of the request are doing. `None`: it waits for them.
    pub deadline: Option<Duration>,
}

/// A job of a verification request that is being stored with it
/// ([`crate::Store::put_request_enqueuing`]): a [`NewJob`] whose request is that one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestJob {
    /// What it does.
    pub kind: JobKind,
    /// The verifier class of a verify job; empty for the other kinds.
    pub class: String,
    /// A gate job's deadline, from now ([`NewJob::deadline`]).
    pub deadline: Option<Duration>,
}

impl RequestJob {
    /// The job, for the stored request `request`.
    #[must_use]
    pub fn of(&self, request: &Digest) -> NewJob {
        NewJob {
            kind: self.kind,
            request: request.clone(),
            class: self.class.clone(),
            deadline: self.deadline,
        }
    }
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Its id.
    pub id: i64,
    /// What it does.
    pub kind: JobKind,
    /// The request.
    pub request: Digest,
    /// The class (verify jobs), else empty.
    pub class: String,
    /// Where it is.
    pub state: JobState,
    /// How many times it was claimed.
    pub attempts: i64,
    /// The label the last claim gave (a worker instance).
    pub holder: Option<String>,
    /// The principal of the last claim.
    pub principal: Option<String>,
    /// When the current lease lapses.
    pub lease_until: Option<Timestamp>,
    /// The fencing token of the last claim (0: never claimed).
    pub fencing: i64,
    /// Not claimable before this time (a retry's back-off).
    pub not_before: Option<Timestamp>,
    /// A gate job's deadline.
    pub deadline_at: Option<Timestamp>,
    /// What the job's completion said.
    pub outcome: Option<String>,
    /// Why its last attempt failed.
    pub last_error: Option<String>,
    /// Who enqueued it.
    pub enqueued_by: String,
    /// When it was enqueued.
    pub created_at: Timestamp,
    /// When it finished.
    pub done_at: Option<Timestamp>,
}

/// A worker's claim on a job, presented with a write done for the job: the store makes the
/// write only while the claim is the job's current one and its lease holds at the store's time,
/// checked and renewed (for `lease` from now) in the same transaction as the write, and refuses
/// it otherwise
/// ([`StoreError::StaleClaim`]) with nothing written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobClaim {
    /// The job.
    pub job: i64,
    /// The claim's fencing token.
    pub fencing: i64,
    /// The lease the write renews.
    pub lease: Duration,
    /// When set, the write is the job's last effect and also completes the job with this
    /// outcome, as [`JobQueue::complete_job`] would, in the write's own transaction: the effect
    /// and the job's end land together or not at all, in one commit instead of two.
    pub completes: Option<String>,
}

impl JobClaim {
    /// The claim for a job's writes before its last: it renews the lease and completes nothing.
    #[must_use]
    pub fn new(job: i64, fencing: i64, lease: Duration) -> Self {
        Self {
            job,
            fencing,
            lease,
            completes: None,
        }
    }

    /// The same claim, completing its job with `outcome` when the write it is given to lands.
    #[must_use]
    pub fn completing(&self, outcome: impl Into<String>) -> Self {
        Self {
            completes: Some(outcome.into()),
            ..self.clone()
        }
    }
}

/// Which jobs a listing shows (every field optional; all given must match).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    /// Jobs of one request.
    pub request: Option<Digest>,
    /// Jobs of one kind.
    pub kind: Option<JobKind>,
    /// Jobs in one state.
    pub state: Option<JobState>,
}

/// Why [`JobQueue::wait_for_jobs`] returned. Every answer is only a hint: the claim that
/// follows decides, with all its checks, and may still find nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wakeup {
    /// A change to the queue was seen that may have made a job of the kind claimable (on
    /// PostgreSQL a notification on the store's channel; on SQLite a job of the kind found
    /// claimable by a read).
    Signalled,
    /// PostgreSQL: the handle's listener (re)connected and listens again; changes made while it
    /// was away were not signalled, so the caller should look.
    Resumed,
    /// Nothing was signalled within the wait.
    TimedOut,
}

/// A duty one process at a time performs for the whole store, elected by a lease at the
/// store's time ([`JobQueue::hold_duty`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Duty {
    /// Delivering webhooks: the server that holds it runs the delivery loop.
    WebhookDelivery,
}

impl Duty {
    /// The name stored in the `duty` column.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::WebhookDelivery => "webhook-delivery",
        }
    }
}

/// A duty's lease as it stands after [`JobQueue::hold_duty`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DutyLease {
    /// Who holds it (the label a process took it under).
    pub holder: String,
    /// How many holders it has had: a new holder's taking adds one, a renewal nothing.
    pub term: i64,
    /// When it lapses, at the store's time.
    pub lease_until: Timestamp,
}

impl DutyLease {
    /// Whether `holder` holds it.
    #[must_use]
    pub fn held_by(&self, holder: &str) -> bool {
        self.holder == holder
    }
}

/// Refuses a duty holder's label the store could not keep (1 to 256 printable characters).
pub(crate) fn check_duty(actor: &Actor, holder: &str, lease: Duration) -> Result<()> {
    if actor.role != ActorRole::System || actor.principal != crate::actor::ENGINE_PRINCIPAL {
        return Err(StoreError::Forbidden {
            principal: actor.principal.clone(),
            role: actor.role.as_str(),
            target: "duty leases",
        });
    }
    if !verdict_core::contracts::primitives::is_printable_name(holder) {
        return Err(StoreError::Invalid {
            what: "duty holder",
            message: format!("{holder:?} is not 1 to 256 printable characters"),
        });
    }
    check_lease(lease)
}

/// The job queue of a store.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Enqueues jobs (operators and producers; the engine checks which requests a producer
    /// may enqueue). A job whose kind, request and class are already queued is not added
    /// again; the stored one is returned. Returns one job per item, in order.
    async fn enqueue_jobs(&self, actor: &Actor, jobs: &[NewJob]) -> Result<Vec<Job>>;

    /// Claims one job of `kind` that is ready, or whose lease lapsed, for `lease`: the job's
    /// fencing token goes up by one and the returned job carries it. A verify job is ready only
    /// once the checks job of its request (if any) is finished, a gate job once every other
    /// job of its request is finished or its deadline passed. `None`: no job
    /// is ready. Only the kind's worker role may claim, and (schema version 27) only a checks
    /// or verify job whose request's subject the claimant holds a grant in force on (write
    /// access for checks, whose evidence needs it); a job no grant covers is skipped, left for
    /// a worker that may do it. Gate jobs are worked for the whole store.
    async fn claim_job(
        &self,
        actor: &Actor,
        kind: JobKind,
        holder: &str,
        lease: Duration,
    ) -> Result<Option<Job>>;

    /// Extends the lease of a job the caller holds under `fencing` to `lease` from now; a lease
    /// that already lapsed is not extended (the claim is lost).
    async fn heartbeat(&self, actor: &Actor, id: i64, fencing: i64, lease: Duration)
    -> Result<Job>;

    /// Finishes a job the caller holds under `fencing`, recording `outcome`.
    async fn complete_job(
        &self,
        actor: &Actor,
        id: i64,
        fencing: i64,
        outcome: &str,
    ) -> Result<Job>;

    /// Ends the caller's attempt at a job it holds under `fencing`: ready again after
    /// `retry_after`, or failed for good with `None`.
    async fn fail_job(
        &self,
        actor: &Actor,
        id: i64,
        fencing: i64,
        why: &str,
        retry_after: Option<Duration>,
    ) -> Result<Job>;

    /// One job, by id.
    async fn job(&self, id: i64) -> Result<Option<Job>>;

    /// The jobs `filter` matches, by id.
    async fn jobs(&self, filter: &JobFilter) -> Result<Vec<Job>>;

    /// Waits until a job of `kind` may have become claimable, for at most `max_wait`, so that
    /// an idle worker claims once per change instead of once per poll. On PostgreSQL each
    /// enqueue, completion and failure that leaves a job claimable sends a notification on the
    /// store's channel (`<role prefix>jobs`, the kind as payload) in its own transaction, and
    /// the handle keeps one listening connection (started by the first wait, reconnected when
    /// cut), whose notifications end the wait. On SQLite (one machine) the wait watches the
    /// file's `data_version`, which moves when another connection commits, and this handle's
    /// own queue writes, and returns once a read finds a job of the kind claimable (at once if
    /// one is claimable when the wait begins). A job that becomes claimable by time alone (a
    /// retry's back-off ending, a lease lapsing, a gate job's deadline passing) signals nothing
    /// and is found when the wait times out.
    async fn wait_for_jobs(&self, kind: JobKind, max_wait: Duration) -> Result<Wakeup>;

    /// Takes `duty` for `holder` for `lease` from the store's time when nobody holds it or its
    /// lease lapsed, renews it when `holder` holds it, and otherwise leaves it; returns the
    /// lease as it stands, so the caller performs the duty only while it is the holder. Only
    /// the engine, in the system role, holds duties. Renewals are operational state, like the
    /// queue's, and not in the audit chain.
    async fn hold_duty(
        &self,
        actor: &Actor,
        duty: Duty,
        holder: &str,
        lease: Duration,
    ) -> Result<DutyLease>;

    /// [`JobQueue::wait_for_jobs`] for a worker acting as `actor`: where the wait looks at the
    /// queue (SQLite), only a job `actor` could claim ends it, so a job its grants do not cover
    /// does not wake it again and again. PostgreSQL's wait is its notifications either way.
    async fn wait_for_jobs_as(
        &self,
        _actor: &Actor,
        kind: JobKind,
        max_wait: Duration,
    ) -> Result<Wakeup> {
        self.wait_for_jobs(kind, max_wait).await
    }
}

/// When job `j` of `table` may be claimed at `now` (both SQL expressions): ready and past its
/// back-off, or running under a lapsed lease; and a verify job only once its request's checks
/// job is finished, a gate job only once every other job of its request is (or its deadline
/// passed). SQLite's claim and its wait use it; PostgreSQL's `job_claim` routine and
/// `_notify_claimable` (schema 41; what a write signals) hold the same condition in SQL. The leading `state IN (...)`, which the rest
/// implies, lets a search by kind and state on the `jobs_ready` index skip the finished jobs,
/// which are nearly all of them once a store has worked for a while: without it SQLite read
/// every job of the kind ever made, on every claim and every look of every idle worker.
pub(crate) fn claimable(table: &str, now: &str) -> String {
    format!(
        "j.state IN ('ready', 'running') \
         AND ((j.state = 'ready' AND (j.not_before IS NULL OR j.not_before <= {now})) \
           OR (j.state = 'running' AND j.lease_until <= {now})) \
         AND ((j.kind = 'gate' AND j.deadline_at <= {now}) OR NOT EXISTS ( \
           SELECT 1 FROM {table} o WHERE o.request = j.request \
             AND o.state NOT IN ('done', 'failed') \
             AND ((j.kind = 'gate' AND o.kind <> 'gate') \
               OR (j.kind = 'verify' AND o.kind = 'checks'))))"
    )
}

/// The longest lease a claim takes or a renewal gives: a day, the longest
/// `verdict worker --lease-seconds` takes. A longer one would let a worker hold a job against
/// every takeover; PostgreSQL's routines refuse it too (schema version 20).
pub const MAX_LEASE: Duration = Duration::from_secs(86_400);

/// Refuses a lease longer than [`MAX_LEASE`], before anything is read or written.
pub(crate) fn check_lease(lease: Duration) -> Result<()> {
    if lease > MAX_LEASE {
        return Err(StoreError::Invalid {
            what: "lease",
            message: format!(
                "a lease of {} ms is longer than a day ({} ms)",
                lease.as_millis(),
                MAX_LEASE.as_millis()
            ),
        });
    }
    Ok(())
}

/// Milliseconds of a duration for the database, at least one (a zero lease would lapse as it
/// is taken) and at most `i64::MAX`.
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX).max(1)
}

/// The role check both backends make before anything else.
pub(crate) fn may_enqueue(actor: &Actor) -> Result<()> {
    if matches!(actor.role, ActorRole::Operator | ActorRole::Producer) {
        Ok(())
    } else {
        Err(forbidden(actor))
    }
}

/// The role check for claiming, renewing and finishing jobs of `kind`.
pub(crate) fn may_work(actor: &Actor, kind: JobKind) -> Result<()> {
    if actor.role == kind.worker_role() {
        Ok(())
    } else {
        Err(forbidden(actor))
    }
}

fn forbidden(actor: &Actor) -> StoreError {
    StoreError::Forbidden {
        principal: actor.principal.clone(),
        role: actor.role.as_str(),
        target: "jobs",
    }
}

pub(crate) fn micros_to_ts(us: i64) -> Timestamp {
    Timestamp::from_unix_nanos(i128::from(us) * 1000)
}

pub(crate) fn corrupt(id: i64, message: String) -> StoreError {
    StoreError::Corrupt {
        table: "jobs",
        key: id.to_string(),
        message,
    }
}

/// A job row as both backends read it: times as microseconds since the epoch.
pub(crate) struct RawJob {
    pub(crate) id: i64,
    pub(crate) kind: String,
    pub(crate) request: String,
    pub(crate) class: String,
    pub(crate) state: String,
    pub(crate) attempts: i64,
    pub(crate) holder: Option<String>,
    pub(crate) principal: Option<String>,
    pub(crate) lease_until: Option<i64>,
    pub(crate) fencing: i64,
    pub(crate) not_before: Option<i64>,
    pub(crate) deadline_at: Option<i64>,
    pub(crate) outcome: Option<String>,
    pub(crate) last_error: Option<String>,
    pub(crate) enqueued_by: String,
    pub(crate) created_at: i64,
    pub(crate) done_at: Option<i64>,
}

impl RawJob {
    pub(crate) fn into_job(self) -> Result<Job> {
        let id = self.id;
        Ok(Job {
            id,
            kind: self.kind.parse().map_err(|e| corrupt(id, format!("{e}")))?,
            request: self
                .request
                .parse()
                .map_err(|e| corrupt(id, format!("request: {e}")))?,
            class: self.class,
            state: self
                .state
                .parse()
                .map_err(|e| corrupt(id, format!("{e}")))?,
            attempts: self.attempts,
            holder: self.holder,
            principal: self.principal,
            lease_until: self.lease_until.map(micros_to_ts),
            fencing: self.fencing,
            not_before: self.not_before.map(micros_to_ts),
            deadline_at: self.deadline_at.map(micros_to_ts),
            outcome: self.outcome,
            last_error: self.last_error,
            enqueued_by: self.enqueued_by,
            created_at: micros_to_ts(self.created_at),
            done_at: self.done_at.map(micros_to_ts),
        })
    }
}

/// The columns both backends select, in [`RawJob`]'s order, times in microseconds.
pub(crate) fn columns(time: fn(&str) -> String) -> String {
    [
        "id".to_owned(),
        "kind".to_owned(),
        "request".to_owned(),
        "class".to_owned(),
        "state".to_owned(),
        "attempts".to_owned(),
        "holder".to_owned(),
        "principal".to_owned(),
        time("lease_until"),
        "fencing".to_owned(),
        time("not_before"),
        time("deadline_at"),
        "outcome".to_owned(),
        "last_error".to_owned(),
        "enqueued_by".to_owned(),
        time("created_at"),
        time("done_at"),
    ]
    .join(", ")
}

mod pg;
mod sqlite;
mod wake;

pub use pg::LISTENER_APPLICATION;
pub(crate) use pg::PgWakeups;
pub(crate) use pg::{in_order as enqueued_in_order, jobs_at as jobs_at_pg, routine_err};
pub(crate) use sqlite::store_now as store_now_sqlite;
pub(crate) use sqlite::{
    complete_claimed as complete_claimed_sqlite, enqueue_tx as enqueue_sqlite,
    renew_claim as renew_claim_sqlite,
};
