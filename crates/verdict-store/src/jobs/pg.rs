//! The job queue on PostgreSQL: every change is one call of a SECURITY DEFINER routine of
//! schema 9 (`job_enqueue`, `job_claim`, `job_heartbeat`, `job_complete`, `job_fail`), which
//! checks the identity acting and the role the call claims, and keeps every time on the
//! store's time (`verdict._store_now()`: the database's clock, or the manual time the handle
//! names at the start of the transaction). Each call runs in a transaction acting as the
//! actor's identity.

use super::wake::Signals;
use super::{
    Duty, DutyLease, Job, JobFilter, JobKind, JobQueue, NewJob, RawJob, Wakeup, columns,
    may_enqueue, may_work, millis,
};
use crate::actor::Actor;
use crate::error::{Result, StoreError};
use crate::location::redact_url;
use crate::postgres::{PgBackend, pg_err};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Row as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The `application_name` of a handle's listening connection, so that an operator can tell it
/// from the pool's connections in `pg_stat_activity`.
pub const LISTENER_APPLICATION: &str = "verdict job wake-ups";

/// The first pause before the listener connects again after losing its connection, doubled
/// after each failed attempt up to [`RECONNECT_MAX`].
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The listening side of one PostgreSQL handle: a task, started by the first wait, that holds a
/// connection of its own (outside the pool) listening on the store's channel and turns each
/// notification into a signal for the kind it names. When the connection is lost the task
/// connects and listens again, then signals every kind [`Wakeup::Resumed`], since what was
/// notified meanwhile is lost. The task ends with the handle.
pub(crate) struct PgWakeups {
    signals: Arc<Signals>,
    /// Token changes heard on the channel (payload [`TOKEN_CHANGE_PAYLOAD`]), plus one each
    /// time listening starts, the first time included, since a change made before went
    /// unheard.
    token_changes: Arc<AtomicU64>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The payload the token-change routine notifies the store's channel with (schema version 30).
pub(crate) const TOKEN_CHANGE_PAYLOAD: &str = "credentials";

impl PgWakeups {
    pub(crate) fn new() -> Self {
        Self {
            signals: Arc::new(Signals::new()),
            token_changes: Arc::new(AtomicU64::new(0)),
            task: std::sync::Mutex::new(None),
        }
    }

    /// How many token changes were heard (or may have gone unheard) so far.
    pub(crate) fn token_changes_heard(&self) -> u64 {
        self.token_changes.load(Ordering::SeqCst)
    }

    /// Starts the listening task unless it runs.
    pub(crate) fn start(&self, url: &str, channel: &str) -> Result<()> {
        let mut task = self
            .task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if task.is_some() {
            return Ok(());
        }
        let options = url
            .parse::<PgConnectOptions>()
            .map_err(|e| StoreError::Location {
                location: redact_url(url),
                message: format!("the job listener cannot connect: {e}"),
            })?
            .application_name(LISTENER_APPLICATION);
        *task = Some(tokio::spawn(listen(
            options,
            channel.to_owned(),
            Arc::clone(&self.signals),
            Arc::clone(&self.token_changes),
        )));
        Ok(())
    }
}

impl Drop for PgWakeups {
    fn drop(&mut self) {
        if let Some(task) = self
            .task
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

/// Listens on `channel` until aborted, connecting again whenever the connection is lost.
async fn listen(
    options: PgConnectOptions,
    channel: String,
    signals: Arc<Signals>,
    token_changes: Arc<AtomicU64>,
) {
    // A pool of one connection, used only to make and remake the listening connection.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(30))
        .connect_lazy_with(options);
    let mut pause = RECONNECT_FIRST;
    loop {
        if let Ok(mut listener) = subscribe(&pool, &channel).await {
            pause = RECONNECT_FIRST;
            // Listening from here on; whatever changed before was not heard. The first
            // subscription too: the handle was asked, and its answers kept, before it
            // listened (listening starts with the first question), so a change made between
            // that question and now would otherwise leave a retired token's holder kept until
            // its keeper's own bound.
            token_changes.fetch_add(1, Ordering::SeqCst);
            signals.signal_all(Wakeup::Resumed);
            loop {
                match listener.try_recv().await {
                    Ok(Some(note)) if note.payload() == TOKEN_CHANGE_PAYLOAD => {
                        token_changes.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(Some(note)) => match note.payload().parse::<JobKind>() {
                        Ok(kind) => signals.signal(kind, Wakeup::Signalled),
                        Err(_) => signals.signal_all(Wakeup::Signalled),
                    },
                    // The connection was lost and sqlx made a new one, listening again.
                    Ok(None) => {
                        token_changes.fetch_add(1, Ordering::SeqCst);
                        signals.signal_all(Wakeup::Resumed);
                    }
                    Err(_) => break,
                }
            }
            // Not listening until the next subscription: what is kept meanwhile is bounded by
            // its keeper's limit, and the next subscription moves the count on.
        }
        tokio::time::sleep(pause).await;
        pause = pause.saturating_mul(2).min(RECONNECT_MAX);
    }
}

async fn subscribe(
    pool: &sqlx::PgPool,
    channel: &str,
) -> std::result::Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(channel).await?;
    Ok(listener)
}

/// Inside the caller's transaction: notifies the store's channel once for each kind of which a
/// job of `requests` is claimable now, delivered when the transaction commits, through
/// `verdict._notify_claimable` (schema 41), which [`crate::postgres`]'s one-statement write
/// calls too. Any connection may notify any channel, so a notification is only ever a hint to
/// look.
async fn notify_claimable(
    tx: &mut sqlx::PgConnection,
    channel: &str,
    requests: &[String],
) -> Result<()> {
    sqlx::query("SELECT verdict._notify_claimable($1, $2)")
        .bind(channel)
        .bind(requests)
        .execute(tx)
        .await
        .map_err(pg_err)?;
    Ok(())
}

/// The SQLSTATE the routines raise for a token that is not the job's current claim.
const STALE: &str = "VRJ01";

fn micros(col: &str) -> String {
    format!("(extract(epoch FROM {col}) * 1000000)::bigint")
}

/// A job from the columns of `r` from `at` on, in [`columns`]'s order.
fn raw(r: &PgRow, at: usize) -> std::result::Result<RawJob, sqlx::Error> {
    Ok(RawJob {
        id: r.try_get(at)?,
        kind: r.try_get(at + 1)?,
        request: r.try_get(at + 2)?,
        class: r.try_get(at + 3)?,
        state: r.try_get(at + 4)?,
        attempts: r.try_get(at + 5)?,
        holder: r.try_get(at + 6)?,
        principal: r.try_get(at + 7)?,
        lease_until: r.try_get(at + 8)?,
        fencing: r.try_get(at + 9)?,
        not_before: r.try_get(at + 10)?,
        deadline_at: r.try_get(at + 11)?,
        outcome: r.try_get(at + 12)?,
        last_error: r.try_get(at + 13)?,
        enqueued_by: r.try_get(at + 14)?,
        created_at: r.try_get(at + 15)?,
        done_at: r.try_get(at + 16)?,
    })
}

/// The jobs of `rows`, each in the columns from `at` on.
pub(crate) fn jobs_at(rows: &[PgRow], at: usize) -> Result<Vec<Job>> {
    rows.iter()
        .map(|r| raw(r, at).map_err(pg_err)?.into_job())
        .collect()
}

fn jobs_of(rows: &[PgRow]) -> Result<Vec<Job>> {
    jobs_at(rows, 0)
}

/// A routine's error, a stale claim as its own.
pub(crate) fn routine_err(e: sqlx::Error, id: i64, fencing: i64) -> StoreError {
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

/// Enqueues `jobs` as `actor` in `tx` (one acting as `actor`'s identity) through the
/// `job_enqueue` routine and signals on `channel` the kinds this made claimable; one row per
/// item, in order, even when an item is named twice.
async fn enqueue_in(
    tx: &mut sqlx::PgConnection,
    channel: &str,
    actor: &Actor,
    jobs: &[NewJob],
) -> Result<Vec<Job>> {
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
        .fetch_all(&mut *tx)
        .await
        .map_err(pg_err)?;
    let stored = jobs_of(&rows)?;
    let mut requests: Vec<String> = stored.iter().map(|j| j.request.to_string()).collect();
    requests.sort_unstable();
    requests.dedup();
    notify_claimable(tx, channel, &requests).await?;
    in_order(jobs, &stored)
}

/// The stored job of each item of `jobs`, in order: `job_enqueue` answers each job once, in
/// the order of the ids, however often an item names it.
pub(crate) fn in_order(jobs: &[NewJob], stored: &[Job]) -> Result<Vec<Job>> {
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

/// Marks the job `actor` holds under `fencing` done with `outcome` and signals the jobs of its
/// request that this may have made claimable (its verify jobs, its gate), in `tx`.
async fn complete(
    tx: &mut sqlx::PgConnection,
    channel: &str,
    actor: &Actor,
    id: i64,
    fencing: i64,
    outcome: &str,
) -> Result<Job> {
    let rows = sqlx::query(AssertSqlSafe(call("job_complete", 5)))
        .bind(&actor.principal)
        .bind(actor.role.as_str())
        .bind(id)
        .bind(fencing)
        .bind(outcome)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| routine_err(e, id, fencing))?;
    let job = one(&rows, id)?;
    notify_claimable(tx, channel, &[job.request.to_string()]).await?;
    Ok(job)
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
        let channel = self.jobs_channel();
        let out = enqueue_in(self.counted(&mut *tx), &channel, actor, jobs).await?;
        self.commit(tx).await?;
        Ok(out)
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
        super::check_lease(lease)?;
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
        let channel = self.jobs_channel();
        let job = complete(
            self.counted(&mut *tx),
            &channel,
            actor,
            id,
            fencing,
            outcome,
        )
        .await?;
        self.commit(tx).await?;
        Ok(job)
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
        let job = one(&rows, id)?;
        // Finishing a job may make others of its request claimable (its verify jobs, its gate).
        notify_claimable(&mut tx, &self.jobs_channel(), &[job.request.to_string()]).await?;
        self.commit(tx).await?;
        Ok(job)
    }

    async fn wait_for_jobs(&self, kind: JobKind, max_wait: Duration) -> Result<Wakeup> {
        self.wakeups()
            .start(self.location_url(), &self.jobs_channel())?;
        Ok(self.wakeups().signals.wait(kind, max_wait).await)
    }

    async fn job(&self, id: i64) -> Result<Option<Job>> {
        let sql = format!("SELECT {} FROM verdict.jobs WHERE id = $1", columns(micros));
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .fetch_all(self.pooled())
            .await
            .map_err(pg_err)?;
        Ok(jobs_of(&rows)?.pop())
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

    async fn hold_duty(
        &self,
        actor: &Actor,
        duty: Duty,
        holder: &str,
        lease: Duration,
    ) -> Result<DutyLease> {
        super::check_duty(actor, holder, lease)?;
        let mut tx = self.acting(actor).await?;
        let row = sqlx::query(
            "SELECT r_holder, r_term, r_lease_until FROM verdict.duty_hold($1, $2, $3, $4, $5)",
        )
        .bind(&actor.principal)
        .bind(actor.role.as_str())
        .bind(duty.as_str())
        .bind(holder)
        .bind(millis(lease))
        .fetch_one(self.counted(&mut *tx))
        .await
        .map_err(pg_err)?;
        self.commit(tx).await?;
        Ok(DutyLease {
            holder: row.try_get(0).map_err(pg_err)?,
            term: row.try_get(1).map_err(pg_err)?,
            lease_until: super::micros_to_ts(row.try_get(2).map_err(pg_err)?),
        })
    }
}
