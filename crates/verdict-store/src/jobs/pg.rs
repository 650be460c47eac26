//! The job queue on PostgreSQL: every change is one call of a SECURITY DEFINER routine of
//! schema 9 (`job_enqueue`, `job_claim`, `job_heartbeat`, `job_complete`, `job_fail`), which
//! checks the identity acting and the role the call claims, and keeps every time on the
//! database's clock. Each call runs in a transaction acting as the actor's identity.

use super::{
    Job, JobFilter, JobKind, JobQueue, NewJob, RawJob, columns, may_enqueue, may_work, millis,
};
use crate::actor::Actor;
use crate::error::{Result, StoreError};
use crate::postgres::{PgBackend, pg_err};
use async_trait::async_trait;
use sqlx::postgres::PgRow;
use sqlx::{AssertSqlSafe, Row as _};
use std::time::Duration;

/// The SQLSTATE the routines raise for a token that is not the job's current claim.
const STALE: &str = "VRJ01";

fn micros(col: &str) -> String {
    format!("(extract(epoch FROM {col}) * 1000000)::bigint")
}

fn raw(r: &PgRow) -> std::result::Result<RawJob, sqlx::Error> {
    Ok(RawJob {
        id: r.try_get(0)?,
        kind: r.try_get(1)?,
        request: r.try_get(2)?,
        class: r.try_get(3)?,
        state: r.try_get(4)?,
        attempts: r.try_get(5)?,
        holder: r.try_get(6)?,
        principal: r.try_get(7)?,
        lease_until: r.try_get(8)?,
        fencing: r.try_get(9)?,
        not_before: r.try_get(10)?,
        deadline_at: r.try_get(11)?,
        outcome: r.try_get(12)?,
        last_error: r.try_get(13)?,
        enqueued_by: r.try_get(14)?,
        created_at: r.try_get(15)?,
        done_at: r.try_get(16)?,
    })
}

fn jobs_of(rows: &[PgRow]) -> Result<Vec<Job>> {
    rows.iter()
        .map(|r| raw(r).map_err(pg_err)?.into_job())
        .collect()
}

/// A routine's error, a stale claim as its own.
fn routine_err(e: sqlx::Error, id: i64, fencing: i64) -> StoreError {
    if let sqlx::Error::Database(db) = &e
        && db.code().as_deref() == Some(STALE)
    {
        return StoreError::StaleClaim { job: id, fencing };
    }
    pg_err(e)
}

/// `SELECT <columns> FROM verdict.<routine>(<args>)`.
fn call(routine: &str, args: usize) -> String {
    let params: Vec<String> = (1..=args).map(|i| format!("${i}")).collect();
    format!(
        "SELECT {} FROM verdict.{routine}({})",
        columns(micros),
        params.join(", ")
    )
}

impl PgBackend {
    /// A transaction acting as `actor`'s database identity, as every write of the store does:
    /// the routines bind the call to the principal that identity acts for.
    async fn acting(&self, actor: &Actor) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        let identity = self.identity(actor).await?;
        self.begin_as(identity.as_deref()).await
    }
}

/// Checks that `actor` holds the job under `claim` and renews its lease, inside the caller's
/// transaction (one acting as `actor`'s identity), through the `job_heartbeat` routine: it
/// locks the job's row until the transaction ends, so no claim of the job can come between the
/// check and a write made in the same transaction.
pub(crate) async fn renew_claim(
    tx: &mut sqlx::PgConnection,
    actor: &Actor,
    claim: &super::JobClaim,
) -> Result<()> {
    sqlx::query(AssertSqlSafe(call("job_heartbeat", 5)))
        .bind(&actor.principal)
        .bind(actor.role.as_str())
        .bind(claim.job)
        .bind(claim.fencing)
        .bind(millis(claim.lease))
        .fetch_all(tx)
        .await
        .map_err(|e| routine_err(e, claim.job, claim.fencing))?;
    Ok(())
}

fn one(rows: &[PgRow], id: i64) -> Result<Job> {
    jobs_of(rows)?.pop().ok_or_else(|| StoreError::NotFound {
        what: "job",
        key: id.to_string(),
    })
}

#[async_trait]
impl JobQueue for PgBackend {
    async fn enqueue_jobs(&self, actor: &Actor, jobs: &[NewJob]) -> Result<Vec<Job>> {
        may_enqueue(actor)?;
        let mut tx = self.acting(actor).await?;
        let rows = sqlx::query(AssertSqlSafe(call("job_enqueue", 6)))
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(jobs.iter().map(|j| j.kind.as_str()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.request.as_str()).collect::<Vec<_>>())
            .bind(jobs.iter().map(|j| j.class.as_str()).collect::<Vec<_>>())
            .bind(
                jobs.iter()
                    .map(|j| j.deadline.map(millis))
                    .collect::<Vec<_>>(),
            )
            .fetch_all(self.counted(&mut *tx))
            .await
            .map_err(pg_err)?;
        self.commit(tx).await?;
        let stored = jobs_of(&rows)?;
        // One row per item, in order, even when an item is named twice.
        jobs.iter()
            .map(|j| {
                stored
                    .iter()
                    .find(|s| s.kind == j.kind && s.request == j.request && s.class == j.class)
                    .cloned()
                    .ok_or_else(|| StoreError::NotFound {
                        what: "enqueued job",
                        key: format!("{} {} {}", j.kind, j.request, j.class),
                    })
            })
            .collect()
    }

    async fn claim_job(
        &self,
        actor: &Actor,
        kind: JobKind,
        holder: &str,
        lease: Duration,
    ) -> Result<Option<Job>> {
        may_work(actor, kind)?;
        let mut tx = self.acting(actor).await?;
        let rows = sqlx::query(AssertSqlSafe(call("job_claim", 5)))
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(kind.as_str())
            .bind(holder)
            .bind(millis(lease))
            .fetch_all(self.counted(&mut *tx))
            .await
            .map_err(pg_err)?;
        self.commit(tx).await?;
        Ok(jobs_of(&rows)?.pop())
    }

    async fn heartbeat(
        &self,
        actor: &Actor,
        id: i64,
        fencing: i64,
        lease: Duration,
    ) -> Result<Job> {
        let mut tx = self.acting(actor).await?;
        let rows = sqlx::query(AssertSqlSafe(call("job_heartbeat", 5)))
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(id)
            .bind(fencing)
            .bind(millis(lease))
            .fetch_all(self.counted(&mut *tx))
            .await
            .map_err(|e| routine_err(e, id, fencing))?;
        self.commit(tx).await?;
        one(&rows, id)
    }

    async fn complete_job(
        &self,
        actor: &Actor,
        id: i64,
        fencing: i64,
        outcome: &str,
    ) -> Result<Job> {
        let mut tx = self.acting(actor).await?;
        let rows = sqlx::query(AssertSqlSafe(call("job_complete", 5)))
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(id)
            .bind(fencing)
            .bind(outcome)
            .fetch_all(self.counted(&mut *tx))
            .await
            .map_err(|e| routine_err(e, id, fencing))?;
        self.commit(tx).await?;
        one(&rows, id)
    }

    async fn fail_job(
        &self,
        actor: &Actor,
        id: i64,
        fencing: i64,
        why: &str,
        retry_after: Option<Duration>,
    ) -> Result<Job> {
        let mut tx = self.acting(actor).await?;
        let rows = sqlx::query(AssertSqlSafe(call("job_fail", 6)))
            .bind(&actor.principal)
            .bind(actor.role.as_str())
            .bind(id)
            .bind(fencing)
            .bind(why)
            .bind(retry_after.map(millis))
            .fetch_all(self.counted(&mut *tx))
            .await
            .map_err(|e| routine_err(e, id, fencing))?;
        self.commit(tx).await?;
        one(&rows, id)
    }

    async fn jobs(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        let sql = format!(
            "SELECT {} FROM verdict.jobs WHERE ($1::text IS NULL OR request = $1) \
             AND ($2::text IS NULL OR kind = $2) AND ($3::text IS NULL OR state = $3) ORDER BY id",
            columns(micros)
        );
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(filter.request.as_ref().map(|d| d.as_str().to_owned()))
            .bind(filter.kind.map(JobKind::as_str))
            .bind(filter.state.map(super::JobState::as_str))
            .fetch_all(self.pooled())
            .await
            .map_err(pg_err)?;
        jobs_of(&rows)
    }
}
