//! The primitive operations each database provides; everything else is shared.

use crate::actor::Actor;
use crate::audit::{AuditEvent, ChainHead};
use crate::error::{Result, StoreError};
use crate::records::{PointerKind, PrincipalRecord, Table};
use crate::store::{Pointer, PrincipalInfo, Stored};
use async_trait::async_trait;
use std::sync::atomic::{AtomicU64, Ordering};
use verdict_core::digest::Digest;

/// The exchanges with the database that callers of one store handle waited for, counted as
/// they are made ([`crate::Store::round_trips`]). PostgreSQL: every statement or batch of
/// statements sent and answered, and the health check the pool makes before handing out an
/// idle connection (the one it makes when a connection comes back runs after the caller has
/// its answer, and is not counted). SQLite: every call made on the database's thread (one
/// transaction or one read). A relaxed atomic add per exchange: cheap enough to stay on.
#[derive(Debug, Default)]
pub(crate) struct RoundTrips(AtomicU64);

impl RoundTrips {
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The time a handle's manual clock reads, in microseconds since the epoch, as the store set it
/// ([`crate::Store::set_manual_time`]). The job queue and the checks made under a job's claim
/// take the store's time from it on a store that keeps a manual clock: SQLite reads it in code,
/// PostgreSQL is given it at the start of every transaction the handle opens (the routines read
/// it as the store's time there, and refuse to go on without it).
#[derive(Debug, Default)]
pub(crate) struct ManualTime(std::sync::Mutex<Option<i64>>);

impl ManualTime {
    pub(crate) fn set(&self, micros: i64) {
        // A plain number: a panic elsewhere cannot leave it half-written.
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(micros);
    }

    pub(crate) fn get(&self) -> Option<i64> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A subject's row, if stored, and a principal's grants, each with its revocation if stored.
pub(crate) type SubjectAndGrants = (Option<Stored>, Vec<(Stored, Option<Stored>)>);

/// A record ready to append: validated, canonical, keyed and hashed.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub table: Table,
    pub key: String,
    pub digest: Digest,
    pub body: String,
    pub correlation: Option<String>,
    /// Whether a different record already stored under the key is returned (gate decisions
    /// converge on the first) instead of refused.
    pub converge: bool,
    /// For a verification result: its subject and generation, to decide whether it counts.
    pub counts_for: Option<(String, u64)>,
}

impl Prepared {
    /// What to return when the key is already stored as `existing`.
    pub(crate) fn settle(&self, existing: Stored) -> Result<Stored> {
        if existing.digest == self.digest || self.converge {
            Ok(existing)
        } else {
            Err(self.conflict(existing.digest.as_str()))
        }
    }

    /// The conflict of this record with the one stored under its key with digest `existing`.
    pub(crate) fn conflict(&self, existing: &str) -> StoreError {
        StoreError::Conflict {
            table: self.table.name(),
            key: self.key.clone(),
            existing: existing.to_owned(),
            offered: self.digest.to_string(),
        }
    }
}

/// A compare-and-set ready to apply.
#[derive(Debug, Clone)]
pub(crate) struct PreparedCas {
    pub kind: PointerKind,
    pub name: String,
    pub expected_revision: u64,
    pub expected: Option<String>,
    pub new: Option<String>,
    /// The `pointer_changes` record of this change.
    pub change: Prepared,
}

/// What a compare-and-set did.
#[derive(Debug, Clone)]
pub(crate) enum CasOutcome {
    /// Applied; the pointer as it now is.
    Done(Pointer),
    /// Another value or revision was there; nothing changed.
    Stale(Option<Pointer>),
}

/// Which rows to list (always in seq order).
#[derive(Debug, Clone)]
pub(crate) enum Filter {
    /// The row with this key.
    Key(String),
    /// Rows whose generated column `column` (a fixed name, never input) equals the value.
    Column(&'static str, String),
    /// Rows about this subject digest.
    Subject(String),
    /// Rows about any subject of this execution (subjects: the execution's subjects).
    Execution(String),
}

/// The SQL a [`Filter`] is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// `?1`, tables unqualified.
    Sqlite,
    /// `$1`, tables in the `verdict` schema.
    Postgres,
}

impl Filter {
    /// The WHERE clause, with `$1` or `?1` as the one parameter.
    pub(crate) fn clause(&self, table: Table, dialect: Dialect) -> String {
        let param = match dialect {
            Dialect::Sqlite => "?1",
            Dialect::Postgres => "$1",
        };
        match self {
            Self::Key(_) => format!("key = {param}"),
            Self::Column(col, _) => format!("{col} = {param}"),
            Self::Subject(_) if table == Table::Subjects => format!("key = {param}"),
            Self::Subject(_) => format!("subject_digest = {param}"),
            Self::Execution(_) if table == Table::Subjects => format!("execution_id = {param}"),
            Self::Execution(_) => match dialect {
                Dialect::Sqlite => format!(
                    "subject_digest IN (SELECT key FROM subjects WHERE execution_id = {param})"
                ),
                // The execution's subjects first, then their rows by the subject index. Written
                // as a semi-join, PostgreSQL may plan it as a hash join over the whole table,
                // which reads every row the store keeps on each call.
                Dialect::Postgres => format!(
                    "subject_digest = ANY (ARRAY(SELECT key FROM verdict.subjects WHERE execution_id = {param}))"
                ),
            },
        }
    }

    pub(crate) fn value(&self) -> &str {
        match self {
            Self::Key(v) | Self::Column(_, v) | Self::Subject(v) | Self::Execution(v) => v,
        }
    }
}

/// A row exactly as stored, for `audit verify` (nothing parsed, so damage is reported, not
/// an error).
#[derive(Debug, Clone)]
pub(crate) struct RawRow {
    pub seq: i64,
    pub key: String,
    pub digest: String,
    pub body: String,
    pub counted: Option<bool>,
}

/// The operations a database backend provides; every backend keeps the job queue too
/// ([`crate::jobs`]).
#[async_trait]
pub(crate) trait Backend: crate::jobs::JobQueue + Send + Sync + 'static {
    /// Backend name and location, without secrets.
    fn describe(&self) -> String;
    /// The round trips made so far through this handle ([`RoundTrips`]).
    fn round_trips(&self) -> u64;
    /// The time this handle's manual clock reads, for the backend's own uses of the store's
    /// time ([`ManualTime`]).
    fn manual_time(&self) -> &ManualTime;
    /// Whether this backend's writes themselves refuse `actor`'s check evidence about a subject
    /// on whose execution (or mission) it holds no write grant in force at the store's time, in
    /// the same transaction as the write.
    async fn binds_evidence_grants(&self, actor: &Actor) -> Result<bool>;
    /// `principal`'s grants, each with its revocation if one is stored, in seq order: one read.
    async fn grants_with_revocations(
        &self,
        principal: &str,
    ) -> Result<Vec<(Stored, Option<Stored>)>>;
    /// The subject stored under `key`, if any, and [`Backend::grants_with_revocations`] of
    /// `principal`: one read.
    async fn subject_and_grants(&self, key: &str, principal: &str) -> Result<SubjectAndGrants>;
    /// The schema version applied.
    async fn schema_version(&self) -> Result<i64>;
    /// The system clock now: this machine's (SQLite) or the database server's (PostgreSQL).
    async fn clock_now(&self) -> Result<verdict_core::contracts::Timestamp>;
    /// Appends `items` in one transaction, each with its audit event, all or nothing. An item
    /// whose key is stored is settled by [`Prepared::settle`] instead.
    async fn append(&self, actor: &Actor, items: Vec<Prepared>) -> Result<Vec<Stored>>;
    /// Appends a blob's record with its bytes and audit event, in one transaction; a key
    /// stored already returns the stored record and appends nothing.
    /// `holder` is the same record as a [`Table::BlobHolders`] row, appended instead when the
    /// bytes are stored already under another writer and this one holds them not yet.
    async fn put_blob(
        &self,
        actor: &Actor,
        item: Prepared,
        holder: Prepared,
        bytes: Vec<u8>,
    ) -> Result<Stored>;
    /// The bytes stored under a blob's key, if any.
    async fn blob_bytes(&self, key: &str) -> Result<Option<Vec<u8>>>;
    /// [`Backend::append`] for a job's claim: in the same transaction, first the claim is
    /// checked and its lease renewed as a heartbeat would (refused with
    /// [`StoreError::StaleClaim`] unless `actor` holds the job under the claim's token, and
    /// then nothing is appended), then the items are appended.
    async fn append_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        items: Vec<Prepared>,
    ) -> Result<Vec<Stored>>;
    /// [`Backend::append`] of `items`, then, in the same transaction, the enqueue of `jobs` as
    /// [`crate::JobQueue::enqueue_jobs`] would make it (its checks and its wake-up): both or
    /// neither. Returns the stored rows and one job per item of `jobs`, in order.
    async fn append_enqueuing(
        &self,
        actor: &Actor,
        items: Vec<Prepared>,
        jobs: Vec<crate::jobs::NewJob>,
    ) -> Result<(Vec<Stored>, Vec<crate::jobs::Job>)>;
    /// Applies one compare-and-set with its change record and audit event.
    async fn cas(&self, actor: &Actor, cas: PreparedCas) -> Result<CasOutcome>;
    /// [`Backend::cas`], then [`Backend::append`] of `items`, in one transaction: both or
    /// neither. A compare-and-set that finds another value appends nothing; a refused item
    /// undoes the move.
    async fn cas_then_append(
        &self,
        actor: &Actor,
        cas: PreparedCas,
        items: Vec<Prepared>,
    ) -> Result<(CasOutcome, Vec<Stored>)>;
    /// Rows of `table` matching `filter`, in seq order.
    async fn find(&self, table: Table, filter: Filter) -> Result<Vec<Stored>>;
    /// A pointer's current state.
    async fn pointer(&self, kind: PointerKind, name: &str) -> Result<Option<Pointer>>;
    /// Every pointer.
    async fn pointers(&self) -> Result<Vec<Pointer>>;
    /// Up to `limit` rows of `table` with seq above `after_seq`, in seq order, as stored.
    async fn scan(&self, table: Table, after_seq: i64, limit: u32) -> Result<Vec<RawRow>>;
    /// Up to `limit` audit events with seq above `after_seq`, in seq order.
    async fn audit_events(&self, after_seq: u64, limit: u32) -> Result<Vec<AuditEvent>>;
    /// The last audit event.
    async fn audit_head(&self) -> Result<Option<ChainHead>>;
    /// [`Backend::clock_now`] and [`Backend::audit_head`], both read after the call began:
    /// where a backend can, in one read.
    async fn clock_now_and_head(
        &self,
    ) -> Result<(verdict_core::contracts::Timestamp, Option<ChainHead>)> {
        let now = self.clock_now().await?;
        Ok((now, self.audit_head().await?))
    }
    /// Rows whose columns derived from their body no longer hold what the body gives. Empty
    /// where the database computes such columns itself and nothing can set them.
    async fn derived_drift(&self) -> Result<Vec<Drift>>;
    /// Gives principal `principal`'s own database identity a login with a fresh password, as
    /// `actor` (an operator). Only PostgreSQL has logins to give.
    async fn give_login(&self, actor: &Actor, principal: &str) -> Result<crate::store::DbLogin> {
        let _ = (actor, principal);
        Err(no_logins())
    }
    /// Takes principal `principal`'s login back, as `actor` (an operator). Only PostgreSQL has
    /// logins to take.
    async fn take_login(&self, actor: &Actor, principal: &str) -> Result<crate::store::LoginTaken> {
        let _ = (actor, principal);
        Err(no_logins())
    }
    /// The row of the principal whose one token hashes to `token_sha256` now, if any (one
    /// read): the principal whose own record holds it, while it never changed its token, else
    /// the one whose latest token change names it (schema version 30). A retired token finds
    /// nobody.
    async fn principal_by_token(&self, token_sha256: &str) -> Result<Option<Stored>>;
    /// How many times `principal`'s token was changed.
    async fn token_changes(&self, principal: &str) -> Result<u64> {
        let n = self
            .find(
                Table::CredentialChanges,
                Filter::Column("principal", principal.to_owned()),
            )
            .await?
            .len();
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }
    /// Whether some principal held the token hashed to `token_sha256`, now or before.
    async fn token_hash_held(&self, token_sha256: &str) -> Result<bool> {
        for table in [Table::Principals, Table::CredentialChanges] {
            let column = Filter::Column("token_sha256", token_sha256.to_owned());
            if !self.find(table, column).await?.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }
    /// How many token changes made through other handles this handle has heard of (or may
    /// have missed, counted when its listening connection came back): 0 where nothing is heard.
    fn token_changes_heard(&self) -> u64 {
        0
    }
    /// Principals' names and roles in seq order: the one named `name`, or up to `limit` stored
    /// after seq `after_seq`. Never their bodies, which hold token hashes.
    async fn principal_entries(
        &self,
        name: Option<&str>,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<PrincipalInfo>> {
        let rows = match name {
            Some(name) => {
                self.find(Table::Principals, Filter::Key(name.to_owned()))
                    .await?
            }
            None => {
                let mut out = Vec::new();
                for row in self.scan(Table::Principals, after_seq, limit).await? {
                    out.push(Stored {
                        table: Table::Principals,
                        seq: seq_from(Table::Principals.name(), &row.key, row.seq)?,
                        digest: parse_digest(Table::Principals, &row.key, &row.digest)?,
                        key: row.key,
                        body: row.body,
                        inserted: false,
                        counted: None,
                    });
                }
                out
            }
        };
        rows.iter()
            .map(|row| {
                let p: PrincipalRecord = row.decode()?;
                Ok(PrincipalInfo {
                    name: p.name,
                    role: p.role,
                    seq: row.seq,
                })
            })
            .collect()
    }
    /// A backend whose reads all see the store as it was when this was called, whatever is
    /// appended meanwhile: `audit verify` reads through one, so a store written during the
    /// walk is not mistaken for a tampered one. For reading only.
    async fn snapshot(&self) -> Result<Self>
    where
        Self: Sized;
}

/// A derived column that disagrees with its row's body (or, with no key, a store whose record
/// of its derived columns is itself damaged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Drift {
    pub table: String,
    pub key: Option<String>,
    pub seq: Option<i64>,
    pub detail: String,
}

pub(crate) fn seq_from(table: &str, key: &str, seq: i64) -> Result<u64> {
    u64::try_from(seq).map_err(|_| StoreError::Corrupt {
        table: Table::from_name(table).map_or("audit_events", Table::name),
        key: key.to_owned(),
        message: format!("negative seq {seq}"),
    })
}

pub(crate) fn to_i64(n: u64, what: &'static str) -> Result<i64> {
    i64::try_from(n).map_err(|_| StoreError::Invalid {
        what,
        message: format!("{n} does not fit a signed 64-bit integer"),
    })
}

pub(crate) fn parse_digest(table: Table, key: &str, digest: &str) -> Result<Digest> {
    digest.parse().map_err(|_| StoreError::Corrupt {
        table: table.name(),
        key: key.to_owned(),
        message: format!("digest column {digest:?} is malformed"),
    })
}

/// The refusal of a login's change by a store that has no logins.
fn no_logins() -> crate::error::StoreError {
    crate::error::StoreError::Refused(
        "a SQLite store has no database logins; whoever can write its file controls it".into(),
    )
}
