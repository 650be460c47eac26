//! The job queue on SQLite: each change one `BEGIN IMMEDIATE` transaction, which serialises
//! it against every other writer of the file, in this process or another. A claim first looks
//! for a claimable job with a plain read and takes the write lock only when it found one (and
//! looks again under it), so an idle worker never contends with the writers doing the work.

use super::{
    Duty, DutyLease, Job, JobFilter, JobKind, JobQueue, NewJob, RawJob, Wakeup, claimable, columns,
    may_enqueue, may_work, millis,
};
use crate::actor::{Actor, ActorRole};
use crate::backend::Backend as _;
use crate::error::{Result, StoreError};
use crate::sqlite::{SqliteBackend, err};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension as _, Row, TransactionBehavior, params};
use std::time::Duration;

/// The store's time in microseconds: the time the handle's manual clock reads (`manual`) if one
/// was set, which only a store that keeps a manual clock accepts; else the system clock, unless
/// the file says the store keeps a manual clock, whose time the handle never set.
pub(crate) fn store_now(conn: &Connection, manual: Option<i64>) -> Result<i64> {
    if let Some(us) = manual {
        return Ok(us);
    }
    let manual_store = conn
        .prepare_cached(
            "SELECT 1 FROM pointers WHERE pointer = 'clock' AND name = 'store' \
             AND value = '{\"clock\":\"manual\"}'",
        )
        .map_err(err)?
        .exists([])
        .map_err(err)?;
    if manual_store {
        return Err(StoreError::Refused(
            "this store keeps a manual clock and no time was set on it (--now)".into(),
        ));
    }
    system_now()
}

fn system_now() -> Result<i64> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| StoreError::Backend {
            backend: "sqlite",
            message: format!("the system clock is before 1970: {e}"),
        })?;
    i64::try_from(d.as_micros()).map_err(|e| StoreError::Backend {
        backend: "sqlite",
        message: format!("the system clock is out of range: {e}"),
    })
}

fn select() -> String {
    format!("SELECT {} FROM jobs", columns(|c| c.to_owned()))
}

fn raw(r: &Row<'_>) -> rusqlite::Result<RawJob> {
    Ok(RawJob {
        id: r.get(0)?,
        kind: r.get(1)?,
        request: r.get(2)?,
        class: r.get(3)?,
        state: r.get(4)?,
        attempts: r.get(5)?,
        holder: r.get(6)?,
        principal: r.get(7)?,
        lease_until: r.get(8)?,
        fencing: r.get(9)?,
        not_before: r.get(10)?,
        deadline_at: r.get(11)?,
        outcome: r.get(12)?,
        last_error: r.get(13)?,
        enqueued_by: r.get(14)?,
        created_at: r.get(15)?,
        done_at: r.get(16)?,
    })
}

fn job(conn: &Connection, id: i64) -> Result<Option<Job>> {
    conn.query_row(&format!("{} WHERE id = ?1", select()), [id], raw)
        .optional()
        .map_err(err)?
        .map(RawJob::into_job)
        .transpose()
}

fn add(us: i64, d: Duration) -> i64 {
    us.saturating_add(millis(d).saturating_mul(1000))
}

/// The job, if `actor` holds it under `fencing` and its lease holds at `now`; else why not.
fn held(conn: &Connection, actor: &Actor, id: i64, fencing: i64, now: i64) -> Result<Job> {
    let job = job(conn, id)?.ok_or_else(|| StoreError::NotFound {
        what: "job",
        key: id.to_string(),
    })?;
    may_work(actor, job.kind)?;
    if job.state != super::JobState::Running
        || job.fencing != fencing
        || job.principal.as_deref() != Some(actor.principal.as_str())
        // A claim whose lease lapsed is no longer held, whether or not another took the job.
        || job
            .lease_until
            .as_ref()
            .is_none_or(|until| until.unix_nanos() <= i128::from(now) * 1000)
    {
        return Err(StoreError::StaleClaim { job: id, fencing });
    }
    Ok(job)
}

/// Checks that `actor` holds the job under `claim` and renews its lease, inside the caller's
/// transaction: a write made for the job in the same transaction is made only under a current
/// claim.
pub(crate) fn renew_claim(
    conn: &Connection,
    actor: &Actor,
    claim: &super::JobClaim,
    manual: Option<i64>,
) -> Result<()> {
    super::check_lease(claim.lease)?;
    let now = store_now(conn, manual)?;
    held(conn, actor, claim.job, claim.fencing, now)?;
    conn.execute(
        "UPDATE jobs SET lease_until = ?2 WHERE id = ?1",
        params![claim.job, add(now, claim.lease)],
    )
    .map_err(err)?;
    Ok(())
}

/// What PostgreSQL's `job_enqueue` holds (schema 20), held here in the same transaction: a
/// verify job has a class and a job of another kind none; and a producer queues only jobs of a
/// stored engine request (`verdict.request/v1`) whose subject it produced, a verify job only for
/// a class that request asks for. An operator may queue for any request (a job of a request
/// never stored finds nothing to do). A deadline is a duration from now, so never past.
fn may_queue(conn: &Connection, actor: &Actor, jobs: &[NewJob]) -> Result<()> {
    let producer = actor.role == ActorRole::Producer;
    for j in jobs {
        let mut held = (j.kind == JobKind::Verify) != j.class.is_empty();
        if held && producer {
            held = conn
                .prepare_cached(
                    "SELECT 1 FROM verification_requests q JOIN subjects s ON s.key = q.subject_digest \
                     WHERE q.key = ?1 AND json_extract(q.body, '$.schema') = 'verdict.request/v1' \
                       AND json_extract(s.body, '$.producer.principal') = ?2 \
                       AND (?3 = '' OR EXISTS (SELECT 1 FROM json_each(q.body, '$.verifier_classes') c \
                           WHERE c.type = 'text' AND c.value = ?3))",
                )
                .map_err(err)?
                .exists(params![j.request.as_str(), actor.principal, j.class])
                .map_err(err)?;
        }
        if !held {
            return Err(StoreError::Denied(format!(
                "jobs: {} may queue only jobs with no deadline past, a class for a verify job and none for another{}",
                actor.principal,
                if producer {
                    ", of stored requests whose subjects it produced and the classes they require"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(())
}

/// Enqueues `jobs` as `actor` in the caller's transaction (each one not already there; a job
/// already there is returned as it stands), one row per item, in order.
pub(crate) fn enqueue_tx(
    conn: &Connection,
    actor: &Actor,
    jobs: &[NewJob],
    manual: Option<i64>,
) -> Result<Vec<Job>> {
    may_queue(conn, actor, jobs)?;
    let now = store_now(conn, manual)?;
    let mut out = Vec::with_capacity(jobs.len());
    for j in jobs {
        conn.execute(
            "INSERT INTO jobs (kind, request, class, enqueued_by, created_at, deadline_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (kind, request, class) DO NOTHING",
            params![
                j.kind.as_str(),
                j.request.as_str(),
                j.class,
                actor.principal,
                now,
                j.deadline.map(|d| add(now, d)),
            ],
        )
        .map_err(err)?;
        let row = conn
            .query_row(
                &format!(
                    "{} WHERE kind = ?1 AND request = ?2 AND class = ?3",
                    select()
                ),
                params![j.kind.as_str(), j.request.as_str(), j.class],
                raw,
            )
            .map_err(err)?;
        out.push(row.into_job()?);
    }
    Ok(out)
}

/// Completes the job `claim` holds with [`super::JobClaim::completes`], when that is set, in
/// the transaction of the write it ends (checked as [`JobQueue::complete_job`] checks); returns
/// whether it did.
pub(crate) fn complete_claimed(
    conn: &Connection,
    actor: &Actor,
    claim: &super::JobClaim,
    manual: Option<i64>,
) -> Result<bool> {
    let Some(outcome) = &claim.completes else {
        return Ok(false);
    };
    let now = store_now(conn, manual)?;
    complete(conn, actor, claim.job, claim.fencing, outcome, now)?;
    Ok(true)
}

/// Marks the job `actor` holds under `fencing` done with `outcome`, at `now`.
fn complete(
    conn: &Connection,
    actor: &Actor,
    id: i64,
    fencing: i64,
    outcome: &str,
    now: i64,
) -> Result<Job> {
    held(conn, actor, id, fencing, now)?;
    conn.execute(
        "UPDATE jobs SET state = 'done', outcome = ?2, done_at = ?3, lease_until = NULL \
         WHERE id = ?1",
        params![id, outcome, now],
    )
    .map_err(err)?;
    found(conn, id)
}

/// How often a wait reads the file's `data_version` to see whether another connection
/// committed.
const WATCH_EVERY: Duration = Duration::from_millis(5);

/// The id of the job of `kind` a claim by `principal` at `now` takes, if any: of a checks or
/// verify job, only one whose request the principal's grants cover ([`covered`]); any gate job
/// (worked for the whole store under an operator's name).
fn next_claimable(
    conn: &Connection,
    kind: JobKind,
    principal: &str,
    now: i64,
) -> Result<Option<i64>> {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "SELECT j.id, j.request FROM jobs j WHERE j.kind = ?1 AND {} \
             ORDER BY coalesce(j.not_before, j.created_at), j.id",
            claimable("jobs", "?2")
        )
    });
    let mut stmt = conn.prepare_cached(sql).map_err(err)?;
    let mut rows = stmt.query(params![kind.as_str(), now]).map_err(err)?;
    while let Some(row) = rows.next().map_err(err)? {
        let (id, request): (i64, String) = (row.get(0).map_err(err)?, row.get(1).map_err(err)?);
        if kind == JobKind::Gate || covered(conn, kind, principal, &request, now)? {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Whether `principal` holds a grant in force at `now`, not revoked, on the execution (or the
/// mission) of the subject of `request`: one with write access for a checks job, whose
/// evidence needs it, any for a verify job. A request or subject not stored is covered by
/// nothing.
fn covered(
    conn: &Connection,
    kind: JobKind,
    principal: &str,
    request: &str,
    now: i64,
) -> Result<bool> {
    let subject: Option<String> = conn
        .prepare_cached("SELECT subject_digest FROM verification_requests WHERE key = ?1")
        .map_err(err)?
        .query_row([request], |r| r.get(0))
        .optional()
        .map_err(err)?;
    match subject {
        Some(subject) => crate::sqlite::grant_covers_subject(
            conn,
            principal,
            &subject,
            now,
            kind == JobKind::Checks,
        ),
        None => Ok(false),
    }
}

/// Whether any job of `kind` is claimable at `now`, whoever claims.
fn next_any(conn: &Connection, kind: JobKind, now: i64) -> Result<bool> {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "SELECT 1 FROM jobs j WHERE j.kind = ?1 AND {} LIMIT 1",
            claimable("jobs", "?2")
        )
    });
    conn.prepare_cached(sql)
        .map_err(err)?
        .exists(params![kind.as_str(), now])
        .map_err(err)
}

/// The file's `data_version`: it changes when another connection commits.
fn data_version(conn: &Connection) -> Result<i64> {
    conn.prepare_cached("PRAGMA data_version")
        .map_err(err)?
        .query_row([], |r| r.get(0))
        .map_err(err)
}

/// Runs `f` in one `BEGIN IMMEDIATE` transaction, committing only on success.
async fn immediate<T, F>(backend: &SqliteBackend, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
{
    backend
        .with(move |conn| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(err)?;
            let out = f(&tx)?;
            tx.commit().map_err(err)?;
            Ok(out)
        })
        .await
}

#[async_trait]
impl JobQueue for SqliteBackend {
    async fn enqueue_jobs(&self, actor: &Actor, jobs: &[NewJob]) -> Result<Vec<Job>> {
        may_enqueue(actor)?;
        let (jobs, actor) = (jobs.to_vec(), actor.clone());
        let manual = self.manual_time().get();
        let done = immediate(self, move |tx| enqueue_tx(tx, &actor, &jobs, manual)).await?;
        self.queue_changed();
        Ok(done)
    }

    async fn claim_job(
        &self,
        actor: &Actor,
        kind: JobKind,
        holder: &str,
        lease: Duration,
    ) -> Result<Option<Job>> {
        may_work(actor, kind)?;
        super::check_lease(lease)?;
        let (holder, principal) = (holder.to_owned(), actor.principal.clone());
        let manual = self.manual_time().get();
        self.with(move |conn| {
            // A claim that would find nothing takes no write lock.
            if next_claimable(conn, kind, &principal, store_now(conn, manual)?)?.is_none() {
                return Ok(None);
            }
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(err)?;
            let now = store_now(&tx, manual)?;
            // Under the lock again: another claim may have taken it meanwhile.
            let Some(id) = next_claimable(&tx, kind, &principal, now)? else {
                return Ok(None);
            };
            tx.execute(
                "UPDATE jobs SET state = 'running', holder = ?2, principal = ?3, \
                 lease_until = ?4, fencing = fencing + 1, attempts = attempts + 1 WHERE id = ?1",
                params![id, holder, principal, add(now, lease)],
            )
            .map_err(err)?;
            let claimed = job(&tx, id)?;
            tx.commit().map_err(err)?;
            Ok(claimed)
        })
        .await
    }

    async fn heartbeat(
        &self,
        actor: &Actor,
        id: i64,
        fencing: i64,
        lease: Duration,
    ) -> Result<Job> {
        super::check_lease(lease)?;
        let (actor, manual) = (actor.clone(), self.manual_time().get());
        immediate(self, move |tx| {
            let now = store_now(tx, manual)?;
            held(tx, &actor, id, fencing, now)?;
            tx.execute(
                "UPDATE jobs SET lease_until = ?2 WHERE id = ?1",
                params![id, add(now, lease)],
            )
            .map_err(err)?;
            found(tx, id)
        })
        .await
    }

    async fn complete_job(
        &self,
        actor: &Actor,
        id: i64,
        fencing: i64,
        outcome: &str,
    ) -> Result<Job> {
        let (actor, outcome) = (actor.clone(), outcome.to_owned());
        let manual = self.manual_time().get();
        let done = immediate(self, move |tx| {
            let now = store_now(tx, manual)?;
            complete(tx, &actor, id, fencing, &outcome, now)
        })
        .await?;
        self.queue_changed();
        Ok(done)
    }

    async fn fail_job(
        &self,
        actor: &Actor,
        id: i64,
        fencing: i64,
        why: &str,
        retry_after: Option<Duration>,
    ) -> Result<Job> {
        let (actor, why) = (actor.clone(), why.to_owned());
        let manual = self.manual_time().get();
        let done = immediate(self, move |tx| {
            let now = store_now(tx, manual)?;
            held(tx, &actor, id, fencing, now)?;
            match retry_after {
                Some(d) => tx.execute(
                    "UPDATE jobs SET state = 'ready', last_error = ?2, lease_until = NULL, \
                     not_before = ?3 WHERE id = ?1",
                    params![id, why, add(now, d)],
                ),
                None => tx.execute(
                    "UPDATE jobs SET state = 'failed', last_error = ?2, lease_until = NULL, \
                     done_at = ?3 WHERE id = ?1",
                    params![id, why, now],
                ),
            }
            .map_err(err)?;
            found(tx, id)
        })
        .await?;
        self.queue_changed();
        Ok(done)
    }

    async fn wait_for_jobs(&self, kind: JobKind, max_wait: Duration) -> Result<Wakeup> {
        self.wait_as(None, kind, max_wait).await
    }

    async fn wait_for_jobs_as(
        &self,
        actor: &Actor,
        kind: JobKind,
        max_wait: Duration,
    ) -> Result<Wakeup> {
        self.wait_as(Some(actor.principal.clone()), kind, max_wait)
            .await
    }

    async fn job(&self, id: i64) -> Result<Option<Job>> {
        self.with(move |conn| job(conn, id)).await
    }

    async fn jobs(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        let filter = filter.clone();
        self.with(move |conn| {
            let mut stmt = conn
                .prepare(&format!(
                    "{} WHERE (?1 IS NULL OR request = ?1) AND (?2 IS NULL OR kind = ?2) \
                     AND (?3 IS NULL OR state = ?3) ORDER BY id",
                    select()
                ))
                .map_err(err)?;
            let rows = stmt
                .query_map(
                    params![
                        filter.request.as_ref().map(|d| d.as_str().to_owned()),
                        filter.kind.map(JobKind::as_str),
                        filter.state.map(super::JobState::as_str),
                    ],
                    raw,
                )
                .map_err(err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(err)?;
            rows.into_iter().map(RawJob::into_job).collect()
        })
        .await
    }

    async fn hold_duty(
        &self,
        actor: &Actor,
        duty: Duty,
        holder: &str,
        lease: Duration,
    ) -> Result<DutyLease> {
        super::check_duty(actor, holder, lease)?;
        let (holder, manual) = (holder.to_owned(), self.manual_time().get());
        immediate(self, move |tx| {
            let now = store_now(tx, manual)?;
            // The same statement as PostgreSQL's routine: taken when free or lapsed, renewed
            // for its holder, else left as it is.
            tx.execute(
                "INSERT INTO duty_leases (duty, holder, term, lease_until) VALUES (?1, ?2, 1, ?3) \
                 ON CONFLICT (duty) DO UPDATE SET holder = excluded.holder, \
                   term = term + CASE WHEN holder = excluded.holder THEN 0 ELSE 1 END, \
                   lease_until = excluded.lease_until \
                 WHERE holder = excluded.holder OR lease_until <= ?4",
                params![duty.as_str(), holder, add(now, lease), now],
            )
            .map_err(err)?;
            let (holder, term, until): (String, i64, i64) = tx
                .query_row(
                    "SELECT holder, term, lease_until FROM duty_leases WHERE duty = ?1",
                    params![duty.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .map_err(err)?;
            Ok(DutyLease {
                holder,
                term,
                lease_until: super::micros_to_ts(until),
            })
        })
        .await
    }
}

fn found(conn: &Connection, id: i64) -> Result<Job> {
    job(conn, id)?.ok_or_else(|| StoreError::NotFound {
        what: "job",
        key: id.to_string(),
    })
}

impl SqliteBackend {
    /// [`JobQueue::wait_for_jobs`], looking only for jobs `principal` could claim when one is
    /// named: a job its grants do not cover would otherwise wake it again and again.
    async fn wait_as(
        &self,
        principal: Option<String>,
        kind: JobKind,
        max_wait: Duration,
    ) -> Result<Wakeup> {
        let deadline = tokio::time::Instant::now() + max_wait;
        // Subscribed before the first look: a change by this handle from then on is seen.
        let mut own = self.queue_changes();
        let mut seen = None;
        loop {
            // Read again on every look: the handle's manual clock may have moved meanwhile.
            let (last, manual, principal) = (seen, self.manual_time().get(), principal.clone());
            let (version, ready) = self
                .with(move |conn| {
                    let version = data_version(conn)?;
                    // Looked for only when something committed since the last look (always
                    // at the first: a job made claimable before the wait began counts).
                    let ready = if last == Some(version) {
                        false
                    } else {
                        let now = store_now(conn, manual)?;
                        match &principal {
                            Some(p) => next_claimable(conn, kind, p, now)?.is_some(),
                            None => next_any(conn, kind, now)?,
                        }
                    };
                    Ok((version, ready))
                })
                .await?;
            if ready {
                return Ok(Wakeup::Signalled);
            }
            seen = Some(version);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(Wakeup::TimedOut);
            }
            tokio::select! {
                // This handle's own commits do not move its data_version: look again.
                changed = own.changed() => match changed {
                    Ok(()) => seen = None,
                    // Not while the handle lives; were it so, the watch alone still serves.
                    Err(_) => tokio::time::sleep(left.min(WATCH_EVERY)).await,
                },
                () = tokio::time::sleep(left.min(WATCH_EVERY)) => {}
            }
        }
    }
}
