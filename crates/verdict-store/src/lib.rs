//! # verdict-store: the durable evidence store
//!
//! One job: keep every document the verdict engine relies on durably, append-only and audited,
//! behind one interface with two backends: embedded SQLite (the default, one file in WAL mode)
//! and PostgreSQL (for several machines; the database itself enforces who may write what).
//!
//! Main items:
//! - [`Store`]: the object-safe async interface (`Arc<dyn Store>`), every write naming an
//!   [`Actor`]; [`open`] and [`open_with`] give one for a [`Location`], [`migrate()`] applies the
//!   schema.
//! - [`DocKind`] and [`Stored`]: contract documents kept as the canonical bytes that were
//!   hashed, keyed by digest; storing one twice returns the stored row.
//! - [`Table`], [`PointerKind`]: the append-only tables and the only mutable rows, pointers
//!   moved by compare-and-set, each move audited.
//! - [`EvaluationRecord`], [`DenialRecord`]: the engine's own records, in tables of their own
//!   (`gate_evaluations`, `denials`) that only the Gate and the system role may write.
//! - [`jobs`]: the job queue workers claim from ([`JobQueue`], [`Store::queue`]), operational
//!   state beside the evidence: leases and fencing tokens, no evidence of its own.
//! - [`audit`]: the hash chain, [`AuditReport`] of `audit verify`, and [`checkpoint`]: ed25519
//!   signatures over the chain head.
//! - [`schema`]: the JSON Schemas of the store's own records and audit events.
//!
//! ```no_run
//! # async fn demo() -> Result<(), verdict_store::StoreError> {
//! use verdict_store::{Actor, DocKind, Location, Store};
//! use verdict_core::contracts::Role;
//!
//! let store = verdict_store::open(&Location::resolve(None)?).await?;
//! let runner = Actor::new("ci-runner", Role::Runner);
//! let evidence = serde_json::json!({ /* a check evidence document */ });
//! let stored = store.put(&runner, DocKind::Evidence, &evidence).await?;
//! // Putting the same bytes again appends nothing and returns the same row.
//! assert_eq!(store.put(&runner, DocKind::Evidence, &evidence).await?.seq, stored.seq);
//! assert!(store.verify_audit(None).await?.is_intact());
//! # Ok(()) }
//! ```

pub mod actor;
pub mod audit;
mod backend;
pub mod checkpoint;
pub mod error;
mod fresh;
pub mod jobs;
pub mod location;
pub mod migrations;
mod postgres;
pub mod records;
pub mod schema;
pub mod scratch;
mod sqlite;
pub mod store;
mod verify;

pub use actor::{Actor, ActorRole};
pub use audit::{AuditEvent, AuditReport, ChainHead, Problem, ProblemKind};
pub use checkpoint::Checkpoint;
pub use error::{Result, StoreError};
pub use jobs::{
    Duty, DutyLease, Job, JobClaim, JobFilter, JobKind, JobQueue, JobState, LISTENER_APPLICATION,
    MAX_LEASE, NewJob, RequestJob, Wakeup,
};
pub use location::Location;
pub use migrations::{MigrationReport, SCHEMA_VERSION};
pub use postgres::{DEFAULT_ROLE_PREFIX, principal_db_role, role_names};
pub use records::{
    ADMISSION_LEASE_PREFIX, ADMISSION_LEASE_SECONDS, ADMISSION_NOTE_SCHEMA, Access, BlobRecord,
    CANCELLATION_NOTE_SCHEMA, CLOCK_POINTER, ClockSetting, CredentialChange, DENIALS_PER_MINUTE,
    DenialRecord, DocKind, EVALUATION_SCHEMA, EvaluationRecord, FindingRef, GrantRecord,
    GrantScope, LOGIN_NOTE_SCHEMA, LOGIN_TAKEN_NOTE_SCHEMA, LoginGiver, LoginNote, MAX_BLOB_BYTES,
    PointerKind, PrincipalRecord, RESULT_REFUSAL_NOTE_SCHEMA, RUN_CONTEXT_NOTE_SCHEMA,
    RUN_LEASE_PREFIX, RUN_TAKEOVER_NOTE_SCHEMA, Revocation, RunAdmission, RunEvent, RunStatus,
    ScopeKind, StoreClock, Table, UNAUTHENTICATED, credential_change_key, job_run,
    token_fingerprint, token_sha256,
};
pub use store::{
    About, DbLogin, ExecutionHead, GateHead, GatePolicySpan, Grant, LeaseHolder, LoginTaken,
    Pointer, PrincipalInfo, Run, Store, Stored,
};

use std::sync::Arc;

/// How to open a store.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Apply pending migrations on open (default true). When false, an older schema is an error.
    pub migrate: bool,
    /// PostgreSQL: the prefix of the database role names (default [`DEFAULT_ROLE_PREFIX`]; a
    /// migrated database remembers its own and refuses another).
    pub role_prefix: Option<String>,
    /// PostgreSQL: connections in the pool (default 8).
    pub max_connections: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            migrate: true,
            role_prefix: None,
            max_connections: 8,
        }
    }
}

/// Opens the store at `location` with default options, creating and migrating it on first use.
pub async fn open(location: &Location) -> Result<Arc<dyn Store>> {
    open_with(location, &OpenOptions::default()).await
}

/// Opens the store at `location`. The schema version is checked first: a newer schema than
/// this binary knows is refused.
pub async fn open_with(location: &Location, options: &OpenOptions) -> Result<Arc<dyn Store>> {
    match location {
        Location::Sqlite(path) => {
            let backend = sqlite::SqliteBackend::open(path, options.migrate).await?;
            Ok(Arc::new(store::StoreImpl::new(backend)))
        }
        Location::Postgres(url) => {
            let backend = postgres::PgBackend::open(
                url,
                options.migrate,
                options.role_prefix.as_deref(),
                options.max_connections,
            )
            .await?;
            Ok(Arc::new(store::StoreImpl::new(backend)))
        }
    }
}

/// Applies pending migrations at `location` (on PostgreSQL also creating the owner and
/// principal roles, and making the connecting role a member of each; that takes a superuser,
/// or a role with CREATEROLE that may create a schema in the database). Running it again
/// changes nothing.
pub async fn migrate(location: &Location, role_prefix: Option<&str>) -> Result<MigrationReport> {
    match location {
        Location::Sqlite(path) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || sqlite::migrate(&path))
                .await
                .map_err(|e| StoreError::Backend {
                    backend: "sqlite",
                    message: format!("migration task failed: {e}"),
                })?
        }
        Location::Postgres(url) => postgres::migrate(url, role_prefix).await,
    }
}
