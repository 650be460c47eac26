//! The [`Store`] interface and its one implementation over either backend.

use crate::actor::{Actor, ActorRole};
use crate::audit::{AuditEvent, AuditReport, ChainHead};
use crate::backend::{Backend, CasOutcome, Filter, Prepared, PreparedCas};
use crate::error::{Result, StoreError};
use crate::records::{
    self, ADMISSION_NOTE_SCHEMA, Access, CANCELLATION_NOTE_SCHEMA, CLOCK_POINTER, ClockSetting,
    CredentialChange, DocKind, GrantRecord, PointerChange, PointerKind, PrincipalRecord,
    Revocation, RunAdmission, RunEvent, RunStatus, StoreClock, Table, canonical_text, finding_key,
    key_of,
};
use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use verdict_core::contracts::{
    Finding, HumanDecision, Id, Name, Policy, Role, Subject, Timestamp, UnavailableReason,
    VerificationResult,
};
use verdict_core::digest::{self, Digest};

/// A stored row: its canonical bytes, the digest they hash to, its key and audit seq.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Table.
    pub table: Table,
    /// What the row is unique by (the digest for most documents).
    pub key: String,
    /// Digest of `body` under the table's domain.
    pub digest: Digest,
    /// Canonical JSON, exactly the bytes that were hashed.
    pub body: String,
    /// Seq of the audit event that appended it.
    pub seq: u64,
    /// Whether this call appended it (false: it was already stored and is returned as it is).
    pub inserted: bool,
    /// For a verification result: whether its subject and generation were the execution's
    /// current ones when it was appended (otherwise it is history).
    pub counted: Option<bool>,
}

impl Stored {
    /// The body as a JSON value.
    pub fn value(&self) -> Result<Value> {
        verdict_core::json::parse(self.body.as_bytes()).map_err(|e| self.corrupt(e.to_string()))
    }

    /// The body decoded as `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        verdict_core::contracts::decode_plain(&self.value()?)
            .map_err(|e| self.corrupt(e.to_string()))
    }

    fn corrupt(&self, message: String) -> StoreError {
        StoreError::Corrupt {
            table: self.table.name(),
            key: self.key.clone(),
            message,
        }
    }
}

/// What a listing is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum About {
    /// One subject.
    Subject(Digest),
    /// Every subject of one execution.
    Execution(String),
}

/// A pointer's current state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    /// Kind.
    pub kind: PointerKind,
    /// Name (execution id, gate name, job name).
    pub name: String,
    /// How many times it changed (the revision of its last change).
    pub revision: u64,
    /// Canonical JSON of the value, or none (a released lease).
    pub value: Option<String>,
}

impl Pointer {
    fn decode<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        self.value
            .as_deref()
            .map(|v| {
                verdict_core::json::parse(v.as_bytes())
                    .map_err(|e| e.to_string())
                    .and_then(|v| {
                        verdict_core::contracts::decode_plain(&v).map_err(|e| e.to_string())
                    })
                    .map_err(|message| StoreError::Corrupt {
                        table: "pointers",
                        key: format!("{}:{}", self.kind.as_str(), self.name),
                        message,
                    })
            })
            .transpose()
    }

    /// The value of an execution pointer.
    pub fn execution(&self) -> Result<Option<ExecutionHead>> {
        self.decode()
    }

    /// The value of a gate pointer.
    pub fn gate(&self) -> Result<Option<GateHead>> {
        self.decode()
    }

    /// The value of a lease.
    pub fn lease(&self) -> Result<Option<LeaseHolder>> {
        self.decode()
    }
}

/// An execution's current subject and generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionHead {
    /// Current subject.
    pub subject_digest: Digest,
    /// Its generation.
    pub generation: u64,
}

/// A gate's current policy and its revision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateHead {
    /// Current policy.
    pub policy_digest: Digest,
    /// Its revision.
    pub revision: u64,
}

/// A policy a gate held, and when: from the audit seq of the change that set it to the seq of
/// the change that replaced it (`None`: it holds it still).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatePolicySpan {
    /// The policy.
    pub policy_digest: Digest,
    /// The seq of the change that set it.
    pub from_seq: u64,
    /// The seq of the change that replaced it, if one did.
    pub until_seq: Option<u64>,
}

impl GatePolicySpan {
    /// Whether the gate held `policy` at audit seq `seq`.
    #[must_use]
    pub fn held(&self, policy: &Digest, seq: u64) -> bool {
        self.policy_digest == *policy
            && seq >= self.from_seq
            && self.until_seq.is_none_or(|until| seq < until)
    }
}

/// Who holds a job's lease, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseHolder {
    /// The holder's principal.
    pub holder: Name,
    /// When the lease lapses (on the store's clock).
    pub expires_at: Timestamp,
}

/// A grant with its revocation, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The grant.
    pub record: GrantRecord,
    /// Its revocation.
    pub revocation: Option<Revocation>,
    /// Audit seq of the grant.
    pub seq: u64,
}

impl Grant {
    /// Whether the grant is in force for an act at `now` (the store's time): not expired and
    /// not revoked. A revocation on record revokes every act that comes after it, whatever
    /// time either carries: the store orders them, not a clock.
    #[must_use]
    pub fn is_active(&self, now: &Timestamp) -> bool {
        *now < self.record.expires_at && self.revocation.is_none()
    }

    /// Whether the grant's scope takes in the subject's execution (or its mission).
    #[must_use]
    pub fn covers(&self, subject: &Subject) -> bool {
        let scope = &self.record.scope;
        match scope.kind {
            records::ScopeKind::Execution => scope.id.as_str() == subject.execution.id.as_str(),
            records::ScopeKind::Mission => {
                subject.mission.as_ref().map(Name::as_str) == Some(scope.id.as_str())
            }
        }
    }
}

/// A database login of a principal's own (PostgreSQL): with it the principal connects as its
/// own identity and can do only what it may. The password is shown once and stored nowhere.
#[derive(Clone, PartialEq, Eq)]
pub struct DbLogin {
    /// The login's user name: the principal's database role.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The store's connection URL with this user and password.
    pub url: String,
}

/// A principal's database login taken back (PostgreSQL): its identity no longer logs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginTaken {
    /// The identity that no longer logs in.
    pub user: String,
    /// Its sessions still open after the store ended every one it could: where the routines'
    /// owner may not end another login's session (it lacks `pg_signal_backend`).
    pub sessions_left: u32,
}

impl std::fmt::Debug for DbLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DbLogin")
            .field("user", &self.user)
            .field("password", &"***")
            .finish_non_exhaustive()
    }
}

/// A principal as anyone who may look it up sees it: its name and role, not its token's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalInfo {
    /// Principal name.
    pub name: Name,
    /// The role it acts in.
    pub role: Role,
    /// Audit seq of the principal's record.
    pub seq: u64,
}

/// A verifier run: its admission and status history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// As admitted.
    pub admission: RunAdmission,
    /// Status transitions, in the order the store recorded them.
    pub events: Vec<RunEvent>,
    /// Audit seq of the admission.
    pub seq: u64,
}

impl Run {
    /// The run's status: its end once it has one, else its latest; `None` while only admitted.
    #[must_use]
    pub fn status(&self) -> Option<RunStatus> {
        self.end().or(self.events.last()).map(|e| e.status)
    }

    /// The run's end: its first terminal event in the order the store recorded them.
    #[must_use]
    pub fn end(&self) -> Option<&RunEvent> {
        self.events.iter().find(|e| e.status.is_terminal())
    }

    /// The run's events up to its end, included: what an event recorded after the end (which
    /// only a verifier's own login could write, before schema version 43) never changes.
    #[must_use]
    pub fn up_to_end(&self) -> &[RunEvent] {
        let upto = self
            .events
            .iter()
            .position(|e| e.status.is_terminal())
            .map_or(self.events.len(), |i| i + 1);
        self.events.get(..upto).unwrap_or(&self.events)
    }

    /// Whether the run's events are as the store writes them: numbered 1, 2, … in the order
    /// the store recorded them, nothing after the end. Before schema version 43 a verifier's own
    /// PostgreSQL login could number its events as it liked, so a run whose events are not in
    /// this order is not taken at its word: none of its results counts.
    #[must_use]
    pub fn in_order(&self) -> bool {
        let numbered = self.events.iter().zip(1_u64..).all(|(e, n)| e.n == n);
        numbered && self.up_to_end().len() == self.events.len()
    }
}

/// The durable evidence store: append-only documents and records, compare-and-set pointers,
/// and an audit chain. Every write names its [`Actor`]; the role is checked here on every
/// backend, and on PostgreSQL again by the database.
#[async_trait]
pub trait Store: Send + Sync {
    /// Backend and location, without secrets.
    fn describe(&self) -> String;

    /// The schema version of the database.
    async fn schema_version(&self) -> Result<i64>;

    /// The exchanges with the database this handle has waited for since it was opened:
    /// PostgreSQL statements (and the pool's check of each connection it hands out), SQLite
    /// calls on the database's thread. A counter, not a clock: what a use case costs in round
    /// trips is the same on every run, so tests can hold it.
    fn round_trips(&self) -> u64;

    /// Whether the write of `actor`'s check evidence is itself refused, in the same
    /// transaction, unless `actor` holds a write grant in force at the store's time on the
    /// execution (or mission) of the subject the evidence is about, and that subject is stored:
    /// true for a runner on a store that keeps the system clock: on PostgreSQL when the runner
    /// acts as its own database identity (the routine reads the database's clock, which is the
    /// store's time there; a manual clock is kept per handle, and that routine does not read
    /// it), on SQLite for a runner stored as a principal, which every principal the engine
    /// makes is (the append checks that runner's grant under its write lock; a name no stored
    /// runner has is the file's writer acting without the engine, as a login acting for no
    /// identity is on PostgreSQL).
    /// Where true, a caller need not read the subject and grants before the write to keep out
    /// what the write would refuse anyway; it still reads them to say why, when the write is
    /// refused.
    async fn binds_evidence_grants(&self, actor: &Actor) -> Result<bool>;

    /// The clock the store keeps: the one chosen when it was initialised, else the system's.
    async fn clock(&self) -> Result<StoreClock>;

    /// Chooses the store's clock, once, before its first principal exists (the store checks
    /// both in the transaction that records it). Operator only.
    async fn establish_clock(&self, actor: &Actor, clock: StoreClock) -> Result<Pointer>;

    /// Initialises an empty store: [`Store::establish_clock`] and [`Store::add_principal`] of
    /// its first principal, an operator named as `actor` is, in one transaction. Either both
    /// are stored or neither, so an `init` stopped half-way leaves an empty store that a
    /// second `init` can make, never a store with a clock and nobody to act in it. Refused,
    /// writing nothing, once the store holds a clock or a principal.
    async fn initialise(
        &self,
        actor: &Actor,
        clock: StoreClock,
        operator: &PrincipalRecord,
    ) -> Result<Stored>;

    /// Sets the time this handle's manual clock reads. Refused unless the store keeps a manual
    /// clock: a store on the system clock takes no time from anyone.
    async fn set_manual_time(&self, now: &Timestamp) -> Result<()>;

    /// The store's time: the system clock (on PostgreSQL, the database's clock), or the time
    /// set on a manual clock. Every time that decides authority is taken from here.
    async fn now(&self) -> Result<Timestamp>;

    /// Appends a contract document (its carried `"digest"`, if any, is checked and dropped).
    /// Storing the same document again appends nothing and returns the stored row; a gate
    /// decision whose evaluation key is stored returns the stored decision. A verification
    /// result is appended with its findings, in one transaction.
    async fn put(&self, actor: &Actor, kind: DocKind, doc: &Value) -> Result<Stored>;

    /// [`Store::put`] for a job `actor` claimed: made only while `claim` is the job's current
    /// claim, checked (and its lease renewed) in the same transaction as the append; otherwise
    /// refused with [`StoreError::StaleClaim`] and nothing is written.
    async fn put_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        kind: DocKind,
        doc: &Value,
    ) -> Result<Stored>;

    /// Appends many documents in one transaction (all or nothing), returning one row per
    /// document, in order.
    async fn put_batch(&self, actor: &Actor, docs: &[(DocKind, Value)]) -> Result<Vec<Stored>> {
        self.put_batch_claimed(actor, None, docs).await
    }

    /// Stores the verification request `doc` as [`Store::put`] would and, in the same
    /// transaction, enqueues `jobs` for it as [`crate::JobQueue::enqueue_jobs`] would (the
    /// caller an operator or a producer): the request and its jobs are stored together or
    /// neither is. Returns the stored request and one job per item of `jobs`, in order (a job
    /// already there, the request having been stored and enqueued before, as it stands).
    async fn put_request_enqueuing(
        &self,
        actor: &Actor,
        doc: &Value,
        jobs: &[crate::jobs::RequestJob],
    ) -> Result<(Stored, Vec<crate::jobs::Job>)>;

    /// [`Store::put_batch`], made under a job's claim when one is given, as
    /// [`Store::put_claimed`] is (and completing the job with the batch when the claim says so).
    async fn put_batch_claimed(
        &self,
        actor: &Actor,
        claim: Option<&crate::jobs::JobClaim>,
        docs: &[(DocKind, Value)],
    ) -> Result<Vec<Stored>>;

    /// A document by kind and digest.
    async fn get(&self, kind: DocKind, digest: &Digest) -> Result<Option<Stored>>;

    /// The gate decision stored for an evaluation key.
    async fn decision_by_key(&self, evaluation_key: &Digest) -> Result<Option<Stored>>;

    /// The evaluation records stored for an evaluation key, in the order they were appended.
    async fn evaluations(&self, evaluation_key: &Digest) -> Result<Vec<Stored>>;

    /// Up to `limit` denials appended after audit seq `after_seq`, in order.
    async fn denials(&self, after_seq: u64, limit: u32) -> Result<Vec<Stored>>;

    /// The denials of one principal (or of [`records::UNAUTHENTICATED`] attempts), in order.
    async fn denials_of(&self, principal: &str) -> Result<Vec<Stored>>;

    /// One version of a finding.
    async fn finding(&self, id: &Id, version: u64) -> Result<Option<Stored>>;

    /// Every stored version of a finding, in the order they were appended.
    async fn finding_versions(&self, id: &Id) -> Result<Vec<Stored>>;

    /// Documents of `kind` about a subject or an execution, in the order they were appended.
    async fn list(&self, kind: DocKind, about: &About) -> Result<Vec<Stored>>;

    /// Registers a principal (operator only).
    async fn add_principal(&self, actor: &Actor, principal: &PrincipalRecord) -> Result<Stored>;

    /// A principal by name: its name and role, never its token's hash.
    async fn principal(&self, name: &str) -> Result<Option<PrincipalInfo>>;

    /// Up to `limit` principals stored after audit seq `after_seq`, in order: names and roles,
    /// never token hashes (on PostgreSQL no principal's identity reads those).
    async fn principals(&self, after_seq: u64, limit: u32) -> Result<Vec<PrincipalInfo>>;

    /// Gives principal `name` a database login of its own with a fresh password (operator
    /// only; PostgreSQL only). A login in use is first taken back, as [`Store::take_login`]
    /// does, and given again with the new password only once no session of it is left open
    /// (else `Refused`, the login left taken back), so nothing opened with the old password
    /// outlives it. Each change is recorded by a note in the audit chain.
    async fn give_login(&self, actor: &Actor, name: &str) -> Result<DbLogin>;

    /// Takes principal `name`'s database login back (operator only; PostgreSQL only): its
    /// identity no longer logs in (recorded by a note in the audit chain), and once that has
    /// committed every session it has open is ended. Taken back already, nothing is appended
    /// and what is left open is ended. The principal's token, grants and acts are untouched.
    async fn take_login(&self, actor: &Actor, name: &str) -> Result<LoginTaken>;

    /// A principal by the SHA-256 of its token. On PostgreSQL this goes through a routine
    /// every principal's identity may call, so a principal's own login still authenticates
    /// tokens without reading any principal's row.
    async fn principal_by_token_hash(
        &self,
        token_sha256: &Digest,
    ) -> Result<Option<PrincipalRecord>>;

    /// Changes principal `principal`'s token (schema version 30): from this append on it holds
    /// only the token hashed to `token_sha256` (a rotation), or none (a revocation), and every
    /// token it held before is retired for good. An operator changes any principal's token;
    /// any other principal only replaces its own. The change is numbered after the principal's
    /// last one, so of two changes made from the same state one is refused (`Conflict`). A
    /// hash some principal held before is refused. `at` is the store's time.
    async fn change_token(
        &self,
        actor: &Actor,
        principal: &str,
        token_sha256: Option<&Digest>,
        at: &Timestamp,
        reason: &str,
    ) -> Result<Stored>;

    /// A number that moves whenever this handle learns that a principal's token changed: at
    /// once for a change it made itself and, on PostgreSQL, when the store's notification of
    /// a change made through another handle arrives, and when its listening connection starts
    /// listening, at first or after it was lost (a change made before was not heard). Read
    /// without a round trip; whoever keeps who holds a token keeps it only while
    /// this number stays where it was when the store answered.
    fn credential_epoch(&self) -> u64;

    /// Grants access (operator only).
    async fn add_grant(&self, actor: &Actor, grant: &GrantRecord) -> Result<Stored>;

    /// Revokes a grant by appending its revocation (operator only).
    async fn revoke_grant(&self, actor: &Actor, revocation: &Revocation) -> Result<Stored>;

    /// A principal's grants, each with its revocation.
    async fn grants_for(&self, principal: &str) -> Result<Vec<Grant>>;

    /// The subject stored under `digest`, if any, and [`Store::grants_for`] of `principal`,
    /// read together: what deciding whether `principal` may write about that subject needs,
    /// in one round trip.
    async fn subject_and_grants(
        &self,
        digest: &Digest,
        principal: &str,
    ) -> Result<(Option<Stored>, Vec<Grant>)>;

    /// Admits a verifier run: an operator, or a verifier admitting itself to a subject it did
    /// not produce under a grant in force. The request and the subject must be stored and the
    /// generation must be the subject's.
    async fn admit_run(&self, actor: &Actor, admission: &RunAdmission) -> Result<Stored>;

    /// [`Store::admit_run`] with the note that goes with it (a verification request document,
    /// appended after the admission), in one transaction: a refused admission leaves no note.
    /// Returns the admission's row.
    async fn admit_run_noted(
        &self,
        actor: &Actor,
        admission: &RunAdmission,
        note: &Value,
    ) -> Result<Stored>;

    /// [`Store::admit_run_noted`] for a job `actor` claimed: the admission and its note are
    /// appended only while `claim` is the job's current claim, checked (and its lease renewed)
    /// in the same transaction as [`Store::put_claimed`] is; otherwise refused with
    /// [`StoreError::StaleClaim`] and nothing is written.
    async fn admit_run_noted_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        admission: &RunAdmission,
        note: &Value,
    ) -> Result<Stored>;

    /// Appends a status transition of a run (the operator, the run's own verifier, or the
    /// producer cancelling the runs of its execution it cancelled). Nothing follows a terminal
    /// status; repeating the latest status is a no-op.
    async fn record_run_status(
        &self,
        actor: &Actor,
        run_id: &str,
        status: RunStatus,
        reason: Option<UnavailableReason>,
    ) -> Result<Stored>;

    /// [`Store::record_run_status`] for a job `actor` claimed, checked against the claim in
    /// the same transaction as [`Store::put_claimed`] is.
    async fn record_run_status_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        run_id: &str,
        status: RunStatus,
        reason: Option<UnavailableReason>,
    ) -> Result<Stored>;

    /// A run with its history.
    async fn run(&self, run_id: &str) -> Result<Option<Run>>;

    /// A pointer's current state.
    async fn pointer(&self, kind: PointerKind, name: &str) -> Result<Option<Pointer>>;

    /// Whether execution `execution`'s pointer was ever moved to `subject` (its history of
    /// changes, the current value included).
    async fn execution_was_at(&self, execution: &str, subject: &Digest) -> Result<bool>;

    /// Every policy gate `gate` was set to, with when it held it, from its audited history of
    /// changes, in the order set (the current one last); empty for a gate never set.
    async fn gate_policies(&self, gate: &str) -> Result<Vec<GatePolicySpan>>;

    /// Moves an execution to a stored subject of that execution, if its current head is
    /// `expected` (`None`: the execution has none yet). The generation never goes back, the
    /// execution keeps its current subject's mission, it never returns to a subject it left,
    /// and a producer moves another producer's execution only under a write grant on the
    /// execution itself.
    async fn set_current_subject(
        &self,
        actor: &Actor,
        execution: &str,
        expected: Option<&ExecutionHead>,
        subject: &Digest,
    ) -> Result<Pointer>;

    /// Moves a gate to a stored policy, if its current head is `expected`. The revision only
    /// goes up.
    async fn set_gate_policy(
        &self,
        actor: &Actor,
        gate: &str,
        expected: Option<&GateHead>,
        policy: &Digest,
    ) -> Result<Pointer>;

    /// Takes, renews, hands over or releases (`new: None`) a lease, if its holder is
    /// `expected`. Runners and verifiers take leases only for themselves and release only
    /// their own. A lease is named for its purpose: `admit <request>` for a stored request
    /// (operator role only), `run <run id>` for a stored run, which a runner or verifier moves
    /// only when the run was admitted to it; any other name is refused.
    async fn cas_lease(
        &self,
        actor: &Actor,
        job: &str,
        expected: Option<&LeaseHolder>,
        new: Option<&LeaseHolder>,
    ) -> Result<Pointer>;

    /// The last audit event.
    async fn audit_head(&self) -> Result<Option<ChainHead>>;

    /// [`Store::now`] and [`Store::audit_head`] together, in one read where the backend can:
    /// what a gate run asks before it knows whether its cached answer still holds.
    async fn now_and_head(&self) -> Result<(Timestamp, Option<ChainHead>)>;

    /// Up to `limit` audit events after `after_seq`, in order.
    async fn audit_events(&self, after_seq: u64, limit: u32) -> Result<Vec<AuditEvent>>;

    /// Walks the chain and re-hashes every stored row. With `anchor` (the head of a verified
    /// checkpoint), also checks the chain still holds that head.
    async fn verify_audit(&self, anchor: Option<&ChainHead>) -> Result<AuditReport>;

    /// [`Store::verify_audit`] reading `page` events and rows at a time (at least one) instead
    /// of its default, so tests can put page edges where they tamper. The report does not
    /// depend on the page size.
    #[doc(hidden)]
    async fn verify_audit_paged(
        &self,
        anchor: Option<&ChainHead>,
        page: u32,
    ) -> Result<AuditReport>;

    /// Up to `limit` rows of `table` after `after_seq`, in seq order: a listing a page at a time.
    async fn rows(&self, table: Table, after_seq: u64, limit: u32) -> Result<Vec<Stored>>;

    /// Every pointer of one kind (executions, gates or leases), by name.
    async fn pointers(&self, kind: PointerKind) -> Result<Vec<Pointer>>;

    /// The job queue: operational state beside the evidence ([`crate::jobs`]).
    fn queue(&self) -> &dyn crate::jobs::JobQueue;

    /// Stores bytes under their raw digest (schema version 12), with the writer and the store's
    /// time in their record: a producer, operator or runner, at most
    /// [`records::MAX_BLOB_BYTES`]. The digest is the identity: the same bytes put again
    /// store no bytes and return the stored record (`inserted: false`), whoever puts them; a
    /// principal other than the first writer putting them is recorded once as a holder
    /// ([`Table::BlobHolders`], schema version 27).
    async fn put_blob(
        &self,
        actor: &Actor,
        bytes: &[u8],
        media_type: Option<&str>,
    ) -> Result<Stored>;

    /// The record of the blob stored under a raw digest, without its bytes.
    async fn blob_record(&self, digest: &Digest) -> Result<Option<Stored>>;

    /// The record and the bytes of the blob stored under a raw digest.
    async fn blob(&self, digest: &Digest) -> Result<Option<(Stored, Vec<u8>)>>;

    /// Whether `principal` put the bytes stored under a raw digest: first (the blob's writer)
    /// or later (a holder). False when nothing is stored under it.
    async fn blob_put_by(&self, digest: &Digest, principal: &str) -> Result<bool>;
}

/// The store over one backend.
pub(crate) struct StoreImpl<B> {
    pub(crate) backend: B,
    /// The clock, once known to be recorded (it never changes after that).
    clock: std::sync::OnceLock<StoreClock>,
    /// The time a manual clock reads, as set on this handle.
    manual_now: std::sync::Mutex<Option<Timestamp>>,
    /// How many token changes this handle made ([`Store::credential_epoch`]).
    token_changes: std::sync::atomic::AtomicU64,
    /// The system clock's reads, shared by callers asking at once ([`crate::fresh`]).
    fresh_now: crate::fresh::FreshRead<Timestamp>,
    /// The same for the clock read with the audit chain's head.
    fresh_now_and_head: crate::fresh::FreshRead<(Timestamp, Option<ChainHead>)>,
}

impl<B> StoreImpl<B> {
    pub(crate) fn new(backend: B) -> Self {
        Self {
            backend,
            clock: std::sync::OnceLock::new(),
            manual_now: std::sync::Mutex::new(None),
            token_changes: std::sync::atomic::AtomicU64::new(0),
            fresh_now: crate::fresh::FreshRead::default(),
            fresh_now_and_head: crate::fresh::FreshRead::default(),
        }
    }

    fn manual_now(&self) -> std::sync::MutexGuard<'_, Option<Timestamp>> {
        // The value is a plain timestamp: a panic elsewhere cannot leave it half-written.
        self.manual_now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn invalid(what: &'static str) -> impl Fn(String) -> StoreError {
    move |message| StoreError::Invalid { what, message }
}

fn invalid_utf8(e: std::string::FromUtf8Error) -> StoreError {
    StoreError::Invalid {
        what: "document",
        message: e.to_string(),
    }
}

fn doc_what(kind: DocKind) -> &'static str {
    match kind {
        DocKind::Subject => "subject",
        DocKind::Policy => "policy",
        DocKind::Evidence => "check evidence",
        DocKind::Request => "verification request",
        DocKind::Verification => "verification result",
        DocKind::Finding => "finding",
        DocKind::HumanDecision => "human decision",
        DocKind::Decision => "gate decision",
        DocKind::Evaluation => "gate evaluation record",
        DocKind::Denial => "denial",
    }
}

fn record(table: Table, body: String, correlation: Option<String>) -> Result<Prepared> {
    let (key, digest) = key_of(table, body.as_bytes()).map_err(invalid(table.name()))?;
    Ok(Prepared {
        table,
        key,
        digest,
        body,
        correlation,
        converge: false,
        counts_for: None,
    })
}

fn text_of<T: Serialize>(table: Table, value: &T) -> Result<String> {
    canonical_text(value).map_err(invalid(table.name()))
}

/// Refuses a document of `kind` with the first of `problems`, what the Gate's own reading of it
/// found: a document the Gate would refuse as `invalid_input` is never stored.
fn the_gate_reads(kind: DocKind, problems: Vec<String>) -> Result<()> {
    match problems.into_iter().next() {
        Some(message) => Err(StoreError::Invalid {
            what: doc_what(kind),
            message,
        }),
        None => Ok(()),
    }
}

fn decoded<T: DeserializeOwned>(kind: DocKind, value: &Value) -> Result<T> {
    verdict_core::contracts::decode_plain(value).map_err(|e| StoreError::Invalid {
        what: doc_what(kind),
        message: e.to_string(),
    })
}

/// Grants as read, each with its revocation if stored, decoded.
fn grants_of(rows: Vec<(Stored, Option<Stored>)>) -> Result<Vec<Grant>> {
    rows.into_iter()
        .map(|(row, revocation)| {
            Ok(Grant {
                record: row.decode()?,
                revocation: revocation.map(|r| r.decode()).transpose()?,
                seq: row.seq,
            })
        })
        .collect()
}

/// What the system role may append to the requests table (schema 19): the record of a
/// webhook's delivered event or of one whose delivery failed, holding its members, and nothing
/// else: anything else is refused as the role's write of a table it may not write. The engine's
/// bookkeeping, never authority; the PostgreSQL routines hold the same.
fn check_system_note(actor: &Actor, value: &Value) -> Result<()> {
    let required: &[&str] = match value.get("schema").and_then(Value::as_str) {
        Some(records::WEBHOOK_DELIVERED_NOTE_SCHEMA) => &["webhook", "event", "at"],
        Some(records::WEBHOOK_FAILURE_NOTE_SCHEMA) => {
            &["webhook", "event", "attempts", "error", "at"]
        }
        _ => &[],
    };
    if required.is_empty() || required.iter().any(|m| value.get(m).is_none()) {
        return Err(actor.forbidden(Table::VerificationRequests.name()));
    }
    Ok(())
}

fn one(mut rows: Vec<Stored>) -> Option<Stored> {
    rows.pop()
}

fn show(value: Option<&str>) -> String {
    value.unwrap_or("none").to_owned()
}

impl<B: Backend> StoreImpl<B> {
    /// Whether execution `execution` points at `subject` now, read afresh: a writer that
    /// raced this one to the same subject has made it current since, so this one's expectation
    /// is stale and its compare-and-set says so, rather than calling the move a return.
    async fn execution_is_at(&self, execution: &str, subject: &Digest) -> Result<bool> {
        Ok(self
            .execution_head(execution)
            .await?
            .is_some_and(|h| &h.subject_digest == subject))
    }

    /// Execution `execution`'s current head, read from its pointer.
    async fn execution_head(&self, execution: &str) -> Result<Option<ExecutionHead>> {
        match self
            .backend
            .pointer(PointerKind::Execution, execution)
            .await?
        {
            Some(p) => p.execution(),
            None => Ok(None),
        }
    }

    async fn prepare_doc(
        &self,
        actor: &Actor,
        claim: Option<&crate::jobs::JobClaim>,
        kind: DocKind,
        doc: &Value,
    ) -> Result<Vec<Prepared>> {
        let table = kind.table();
        actor.may_append(table)?;
        if actor.role == ActorRole::System && kind == DocKind::Request {
            check_system_note(actor, doc)?;
        }
        let what = doc_what(kind);
        // The stored body is the canonical form of the document without its carried digest;
        // a carried digest must be the digest of exactly that body.
        let (value, carried) = match doc {
            Value::Object(map) if map.contains_key(digest::CARRIED_FIELD) => {
                let mut map = map.clone();
                let carried = map.remove(digest::CARRIED_FIELD);
                (std::borrow::Cow::Owned(Value::Object(map)), carried)
            }
            other => (std::borrow::Cow::Borrowed(other), None),
        };
        let value: &Value = &value;
        let body =
            String::from_utf8(verdict_core::canonical::to_vec(value)).map_err(invalid_utf8)?;
        // The canonical form writes U+0000 as its escape, so only a body holding that text
        // needs the walk that tells a real U+0000 from an escaped backslash.
        if body.contains("\\u0000")
            && let Some(at) = verdict_core::json::nul_pointer(value)
        {
            return Err(StoreError::Invalid {
                what,
                message: format!("U+0000 is not allowed in a document, at {at:?}"),
            });
        }
        if body.len() > records::MAX_BODY_BYTES {
            return Err(StoreError::Invalid {
                what,
                message: format!(
                    "document of {} bytes exceeds {}",
                    body.len(),
                    records::MAX_BODY_BYTES
                ),
            });
        }
        let digest = records::row_digest(kind.table().domain(), body.as_bytes());
        match carried {
            None => {}
            Some(Value::String(c)) if c == digest.as_str() => {}
            Some(other) => {
                return Err(StoreError::Invalid {
                    what,
                    message: format!(
                        "carried digest {other} does not match the document's digest {digest}"
                    ),
                });
            }
        }
        let key = records::key_of_value(table, value, &digest).map_err(invalid(what))?;
        let subject_ref = value
            .get("subject_digest")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut items = Vec::new();
        let mut counts_for = None;
        let correlation = match kind {
            DocKind::Subject => {
                let s: Subject = decoded(kind, value)?;
                if actor.role == ActorRole::Producer
                    && s.producer.principal.as_str() != actor.principal
                {
                    return Err(StoreError::Refused(format!(
                        "producer {:?} may not register work of producer {:?}",
                        actor.principal,
                        s.producer.principal.as_str()
                    )));
                }
                Some(s.execution.id.to_string())
            }
            DocKind::Policy => {
                let p: Policy = decoded(kind, value)?;
                // The Gate's own reading of a policy: one it would refuse (a `pass` fallback or
                // rule, a repeated or contradictory criterion, a rule that does not compile) is
                // never stored, on either backend.
                the_gate_reads(kind, verdict_core::gate::policy_problems(&p))?;
                Some(p.name.to_string())
            }
            DocKind::Evidence => {
                // Already decoded by key_of_value; only who produced it matters here. Plain
                // lookups, not JSON pointers: a pointer allocates for every step of its path.
                fn text(v: Option<&Value>) -> &str {
                    v.and_then(Value::as_str).unwrap_or("")
                }
                let by = value.get("produced_by");
                let (principal, role) = (
                    text(by.and_then(|b| b.get("principal"))),
                    text(by.and_then(|b| b.get("role"))),
                );
                if principal != actor.principal || role != actor.role.as_str() {
                    return Err(StoreError::Refused(format!(
                        "evidence {} says it was produced by {principal:?} as {role}, but {:?} as {} is writing it",
                        text(value.get("id")),
                        actor.principal,
                        actor.role.as_str()
                    )));
                }
                subject_ref
            }
            DocKind::HumanDecision => {
                let d: HumanDecision = decoded(kind, value)?;
                // What the Gate would refuse as `invalid_input` is never stored.
                the_gate_reads(kind, verdict_core::gate::clears_problems(&d))?;
                if d.principal.as_str() != actor.principal {
                    return Err(StoreError::Refused(format!(
                        "human decision {} is signed by {:?}, not by {:?}",
                        d.id,
                        d.principal.as_str(),
                        actor.principal
                    )));
                }
                subject_ref
            }
            DocKind::Verification => {
                let r: VerificationResult = decoded(kind, value)?;
                self.check_admitted(actor, &r).await?;
                // Each finding is stored as the verifier wrote it, so its digest is the one
                // anyone computes from the result.
                let findings = value
                    .get("findings")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice);
                for (finding, doc) in r.findings.iter().zip(findings) {
                    if finding.subject_digest != r.subject_digest {
                        self.check_finding_subject(
                            actor,
                            finding.id.as_str(),
                            &finding.subject_digest,
                        )
                        .await?;
                    }
                    let text = String::from_utf8(verdict_core::canonical::to_vec(doc))
                        .map_err(invalid_utf8)?;
                    items.push(record(
                        Table::Findings,
                        text,
                        Some(finding.subject_digest.to_string()),
                    )?);
                }
                counts_for = Some((r.subject_digest.to_string(), r.generation));
                subject_ref
            }
            DocKind::Finding => {
                let f: Finding = decoded(kind, value)?;
                self.check_finding_subject(actor, f.id.as_str(), &f.subject_digest)
                    .await?;
                subject_ref
            }
            DocKind::Request => {
                if actor.role == ActorRole::Verifier {
                    self.check_verifier_note(actor, claim, value).await?;
                }
                subject_ref
            }
            DocKind::Decision | DocKind::Evaluation => subject_ref,
            DocKind::Denial => value
                .get("principal")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        items.push(Prepared {
            table,
            key,
            digest,
            body,
            correlation,
            converge: kind == DocKind::Decision,
            counts_for,
        });
        Ok(items)
    }

    /// What a verifier may append to the requests table: the note of its own admission; the
    /// context note or the refused-result record of a run admitted to it (a run named as a
    /// job's attempt, `job-<job>-<fencing>`, only under that job's claim of that token); and
    /// the record of a job's earlier run ended by a takeover, only under the job's claim that
    /// superseded the run's, naming itself as the claimant. The claim itself is checked, in
    /// the append's own transaction, by [`Backend::append_claimed`].
    async fn check_verifier_note(
        &self,
        actor: &Actor,
        claim: Option<&crate::jobs::JobClaim>,
        value: &Value,
    ) -> Result<()> {
        let text = |path: &str| value.pointer(path).and_then(Value::as_str);
        let schema = text("/schema");
        let refuse = |why: &str| {
            Err(StoreError::Refused(format!(
                "verifier {:?} may not append {}: {why}",
                actor.principal,
                schema.unwrap_or("a document without a schema")
            )))
        };
        let run_id = text("/run_id").unwrap_or_default();
        match schema {
            Some(ADMISSION_NOTE_SCHEMA) => {
                if text("/verifier") != Some(actor.principal.as_str()) {
                    return refuse("an admission note names the verifier writing it");
                }
                Ok(())
            }
            Some(records::RUN_CONTEXT_NOTE_SCHEMA | records::RESULT_REFUSAL_NOTE_SCHEMA) => {
                let own = self.run(run_id).await?.is_some_and(|r| {
                    r.admission.verifier.as_str() == actor.principal
                        && Some(r.admission.subject_digest.as_str()) == text("/subject_digest")
                });
                if !own {
                    return refuse(&format!(
                        "run {run_id:?} is not a run of its own about that subject"
                    ));
                }
                if let Some((job, fencing)) = records::job_run(run_id)
                    && claim.is_none_or(|c| c.job != job || c.fencing != fencing)
                {
                    return refuse(&format!(
                        "run {run_id:?} is job {job}'s attempt, noted only under that job's claim {fencing}"
                    ));
                }
                Ok(())
            }
            Some(records::RUN_TAKEOVER_NOTE_SCHEMA) => {
                let number = |path: &str| value.pointer(path).and_then(Value::as_i64);
                let Some(c) = claim else {
                    return refuse("a takeover is recorded only under the job's claim");
                };
                let (job, stale, fencing) =
                    (number("/job"), number("/stale_fencing"), number("/fencing"));
                let consistent = job == Some(c.job)
                    && fencing == Some(c.fencing)
                    && stale.is_some_and(|s| s < c.fencing)
                    && stale.is_some_and(|s| run_id == format!("job-{}-{s}", c.job))
                    && text("/taken_by/principal") == Some(actor.principal.as_str())
                    && text("/taken_by/role") == Some(ActorRole::Verifier.as_str());
                if !consistent {
                    return refuse(
                        "a takeover names the job and token of the claim writing it, the writer as the claimant, and an earlier claim's run",
                    );
                }
                let known = self.run(run_id).await?.is_some_and(|r| {
                    Some(r.admission.subject_digest.as_str()) == text("/subject_digest")
                });
                if !known {
                    return refuse(&format!("no run {run_id:?} about that subject"));
                }
                Ok(())
            }
            _ => refuse(
                "a verifier appends only its admission note and the records of its job's runs",
            ),
        }
    }

    /// A verifier appends results only as itself, for a run it was admitted to, about the
    /// subject, class and generation of that admission.
    async fn check_admitted(&self, actor: &Actor, r: &VerificationResult) -> Result<()> {
        if r.verifier.principal.as_str() != actor.principal {
            return Err(StoreError::Refused(format!(
                "result {} names verifier {:?}, but {:?} is writing it",
                r.id,
                r.verifier.principal.as_str(),
                actor.principal
            )));
        }
        let run = self.run(r.verifier.run.as_str()).await?.ok_or_else(|| {
            StoreError::Refused(format!(
                "run {:?} of result {} was never admitted",
                r.verifier.run.as_str(),
                r.id
            ))
        })?;
        let a = &run.admission;
        let mismatch = if a.verifier.as_str() != actor.principal {
            Some(format!(
                "was admitted for verifier {:?}",
                a.verifier.as_str()
            ))
        } else if a.class != r.verifier.class {
            Some(format!("was admitted for class {}", a.class))
        } else if a.subject_digest != r.subject_digest {
            Some(format!("was admitted for subject {}", a.subject_digest))
        } else if a.admitted_generation != r.generation {
            Some(format!(
                "was admitted for generation {}",
                a.admitted_generation
            ))
        } else {
            None
        };
        if let Some(why) = mismatch {
            return Err(StoreError::Refused(format!(
                "run {:?} {why}",
                a.run_id.as_str()
            )));
        }
        // The verifier's grant must be in force at the store's time; a result whose run already
        // ended for a lapsed grant is kept as history (it never counts).
        let lapsed = run.end().is_some_and(|e| {
            e.status == RunStatus::Unavailable && e.reason == Some(UnavailableReason::GrantRevoked)
        });
        if !lapsed {
            let subject: Subject = self
                .get(DocKind::Subject, &r.subject_digest)
                .await?
                .ok_or_else(|| StoreError::NotFound {
                    what: "subject",
                    key: r.subject_digest.to_string(),
                })?
                .decode()?;
            let now = self.now().await?;
            let granted = self
                .grants_for(&actor.principal)
                .await?
                .iter()
                .any(|g| g.covers(&subject) && g.is_active(&now));
            if !granted {
                return Err(StoreError::Refused(format!(
                    "result {}: verifier {:?} holds no grant in force on its subject",
                    r.id, actor.principal
                )));
            }
        }
        Ok(())
    }

    /// A producer moves an execution only to a subject it produced, while it holds a write
    /// grant in force on the execution (or its mission) at the store's time.
    /// `current`: the execution's current subject, when it has one. Another producer's
    /// execution is taken over only under a write grant on the execution itself, by its id: a
    /// grant by mission lets producers work their own executions in it, not each other's.
    async fn check_producer_moves(
        &self,
        actor: &Actor,
        execution: &str,
        digest: &Digest,
        subject: &Subject,
        current: Option<&(Digest, Subject)>,
    ) -> Result<()> {
        if subject.producer.principal.as_str() != actor.principal {
            return Err(StoreError::Refused(format!(
                "execution {execution:?}: producer {:?} did not produce subject {digest}",
                actor.principal
            )));
        }
        let now = self.now().await?;
        let grants = self.grants_for(&actor.principal).await?;
        let in_force = |g: &&Grant| g.record.access == Access::Write && g.is_active(&now);
        if !grants.iter().filter(in_force).any(|g| g.covers(subject)) {
            return Err(StoreError::Refused(format!(
                "execution {execution:?}: producer {:?} holds no write grant in force on it",
                actor.principal
            )));
        }
        if let Some((current_digest, current)) = current
            && current.producer.principal.as_str() != actor.principal
            && !grants.iter().filter(in_force).any(|g| {
                g.record.scope.kind == records::ScopeKind::Execution
                    && g.record.scope.id.as_str() == execution
            })
        {
            return Err(StoreError::Refused(format!(
                "execution {execution:?}: its current subject {current_digest} is producer {:?}'s; producer {:?} takes it over only with a write grant in force on the execution itself",
                current.producer.principal.as_str(),
                actor.principal
            )));
        }
        Ok(())
    }

    /// A stored subject, decoded, with its digest.
    async fn stored_subject(&self, digest: &Digest) -> Result<(Digest, Subject)> {
        let s: Subject = self
            .get(DocKind::Subject, digest)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "subject",
                key: digest.to_string(),
            })?
            .decode()?;
        Ok((digest.clone(), s))
    }

    /// A verifier files a finding only about a subject it holds an admitted run for, whether
    /// the finding comes alone or inside a result.
    async fn check_finding_subject(&self, actor: &Actor, id: &str, subject: &Digest) -> Result<()> {
        let runs = self
            .backend
            .find(Table::VerifierRuns, Filter::Subject(subject.to_string()))
            .await?;
        for row in runs {
            let run: RunAdmission = row.decode()?;
            if run.verifier.as_str() == actor.principal {
                return Ok(());
            }
        }
        Err(StoreError::Refused(format!(
            "finding {id}: {:?} holds no run admitted for subject {subject}",
            actor.principal
        )))
    }

    /// A lease is named for its purpose: `admit <request>` names a stored request (its role
    /// was checked first), `run <run id>` a stored run, admitted to the caller unless it acts
    /// as an operator. The PostgreSQL routine makes the same checks.
    async fn check_lease_purpose(&self, actor: &Actor, job: &str) -> Result<()> {
        if let Some(request) = job.strip_prefix(records::ADMISSION_LEASE_PREFIX) {
            let stored = self
                .find_one(Table::VerificationRequests, Filter::Key(request.to_owned()))
                .await?;
            return match stored {
                Some(_) => Ok(()),
                None => Err(StoreError::Refused(format!(
                    "lease {job:?}: no verification request {request} is stored"
                ))),
            };
        }
        if let Some(run_id) = job.strip_prefix(records::RUN_LEASE_PREFIX) {
            let admission = self
                .find_one(Table::VerifierRuns, Filter::Key(run_id.to_owned()))
                .await?
                .map(|row| row.decode::<RunAdmission>())
                .transpose()?;
            return match admission {
                Some(a)
                    if actor.role == ActorRole::Operator
                        || a.verifier.as_str() == actor.principal =>
                {
                    Ok(())
                }
                _ => Err(StoreError::Refused(format!(
                    "lease {job:?}: no run {run_id:?} admitted to {:?}",
                    actor.principal
                ))),
            };
        }
        Err(StoreError::Refused(format!(
            "lease {job:?}: a lease is named `{}<request>` or `{}<run id>`",
            records::ADMISSION_LEASE_PREFIX,
            records::RUN_LEASE_PREFIX
        )))
    }

    /// The checked admission record of a run, ready to append.
    async fn prepare_admission(&self, actor: &Actor, admission: &RunAdmission) -> Result<Prepared> {
        actor.may_append(Table::VerifierRuns)?;
        if self
            .get(DocKind::Request, &admission.request_digest)
            .await?
            .is_none()
        {
            return Err(StoreError::NotFound {
                what: "verification request",
                key: admission.request_digest.to_string(),
            });
        }
        let subject: Subject = self
            .get(DocKind::Subject, &admission.subject_digest)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "subject",
                key: admission.subject_digest.to_string(),
            })?
            .decode()?;
        if subject.execution.generation != admission.admitted_generation {
            return Err(StoreError::Refused(format!(
                "run {:?} admitted for generation {}, but subject {} is generation {}",
                admission.run_id.as_str(),
                admission.admitted_generation,
                admission.subject_digest,
                subject.execution.generation
            )));
        }
        if actor.role == ActorRole::Verifier {
            self.check_self_admission(actor, admission, &subject)
                .await?;
        }
        let body = text_of(Table::VerifierRuns, admission)?;
        record(
            Table::VerifierRuns,
            body,
            Some(admission.run_id.to_string()),
        )
    }

    /// The records of one admission: the run, its admission note and, when preflight already
    /// decided, the run's end `cancelled`, all for one transaction: no run preflight stopped is
    /// ever open for a model (on PostgreSQL, since schema version 14, a verifier's own
    /// admission is refused otherwise). `claim` is the worker's claim the note is written under.
    async fn admission_items(
        &self,
        actor: &Actor,
        claim: Option<&crate::jobs::JobClaim>,
        admission: &RunAdmission,
        note: &Value,
    ) -> Result<Vec<Prepared>> {
        let mut items = vec![self.prepare_admission(actor, admission).await?];
        items.append(
            &mut self
                .prepare_doc(actor, claim, DocKind::Request, note)
                .await?,
        );
        if note.pointer("/preflight/skipped") == Some(&Value::Bool(true)) {
            actor.may_append(Table::RunEvents)?;
            let event = RunEvent {
                run_id: admission.run_id.clone(),
                n: 1,
                status: RunStatus::Cancelled,
                reason: None,
            };
            let body = text_of(Table::RunEvents, &event)?;
            items.push(record(
                Table::RunEvents,
                body,
                Some(admission.run_id.to_string()),
            )?);
        }
        Ok(items)
    }

    /// A verifier admits only itself, to a subject it did not produce (nor under the producer's
    /// run), while it holds a grant in force on the subject's execution or mission: what the
    /// engine requires of any admission, held here for a verifier acting on its own.
    async fn check_self_admission(
        &self,
        actor: &Actor,
        admission: &RunAdmission,
        subject: &Subject,
    ) -> Result<()> {
        let run = admission.run_id.as_str();
        if admission.verifier.as_str() != actor.principal {
            return Err(StoreError::Refused(format!(
                "verifier {:?} may not admit verifier {:?} to run {run:?}; a verifier admits only itself",
                actor.principal,
                admission.verifier.as_str()
            )));
        }
        if subject.producer.principal.as_str() == actor.principal
            || subject.producer.run.as_str() == run
        {
            return Err(StoreError::Refused(format!(
                "verifier {:?} may not verify the work of its own principal or run ({run:?})",
                actor.principal
            )));
        }
        let now = self.now().await?;
        let granted = self
            .grants_for(&actor.principal)
            .await?
            .iter()
            .any(|g| g.covers(subject) && g.is_active(&now));
        if !granted {
            return Err(StoreError::Refused(format!(
                "verifier {:?} holds no grant in force on the subject of run {run:?}",
                actor.principal
            )));
        }
        Ok(())
    }

    /// A producer ends a run only as `cancelled`, only a run admitted for a subject it produced,
    /// and only once the requests table holds a cancellation of that run's execution naming it
    /// as the canceller: the runs of the execution it cancelled, never one run on its own.
    async fn check_producer_cancels(
        &self,
        actor: &Actor,
        run: &Run,
        status: RunStatus,
        reason: Option<UnavailableReason>,
    ) -> Result<()> {
        let run_id = run.admission.run_id.as_str();
        let refuse = |why: &str| {
            Err(StoreError::Refused(format!(
                "producer {:?} may not end run {run_id:?}: {why}",
                actor.principal
            )))
        };
        // Any other status is not a producer's to write at all.
        if status != RunStatus::Cancelled || reason.is_some() {
            return Err(actor.forbidden(Table::RunEvents.name()));
        }
        let subject: Subject = self
            .get(DocKind::Subject, &run.admission.subject_digest)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "subject",
                key: run.admission.subject_digest.to_string(),
            })?
            .decode()?;
        if subject.producer.principal.as_str() != actor.principal {
            return refuse("it was admitted for another producer's subject");
        }
        let execution = subject.execution.id.as_str();
        let text =
            |v: &Value, path: &str| v.pointer(path).and_then(Value::as_str).map(str::to_owned);
        for row in self
            .list(DocKind::Request, &About::Execution(execution.to_owned()))
            .await?
        {
            let v = row.value()?;
            if text(&v, "/schema").as_deref() == Some(CANCELLATION_NOTE_SCHEMA)
                && text(&v, "/cancelled/kind").as_deref() == Some("execution")
                && text(&v, "/cancelled/id").as_deref() == Some(execution)
                && text(&v, "/by/principal").as_deref() == Some(actor.principal.as_str())
                && text(&v, "/by/role").as_deref() == Some("producer")
            {
                // The record names the producer; the audit chain must too, or another
                // producer's forgery would let this one end runs it never cancelled.
                let written = self
                    .backend
                    .audit_events(row.seq.saturating_sub(1), 1)
                    .await?
                    .iter()
                    .any(|e| {
                        e.seq == row.seq
                            && e.table == Table::VerificationRequests.name()
                            && e.principal == actor.principal
                            && e.role == ActorRole::Producer.as_str()
                    });
                if written {
                    return Ok(());
                }
            }
        }
        refuse("it has not cancelled the run's execution")
    }

    /// Appends after checking each record's audit fields against the bounds the PostgreSQL
    /// routines hold every call to, so both backends refuse the same records.
    async fn append(&self, actor: &Actor, items: Vec<Prepared>) -> Result<Vec<Stored>> {
        for item in &items {
            check_item(actor, item)?;
        }
        self.backend.append(actor, items).await
    }

    /// [`Self::append`], made under a job's claim when one is given (see
    /// [`Backend::append_claimed`]).
    async fn append_claimed(
        &self,
        actor: &Actor,
        claim: Option<&crate::jobs::JobClaim>,
        items: Vec<Prepared>,
    ) -> Result<Vec<Stored>> {
        let Some(claim) = claim else {
            return self.append(actor, items).await;
        };
        for item in &items {
            check_item(actor, item)?;
        }
        self.backend.append_claimed(actor, claim, items).await
    }

    /// A run's status transition, made under `claim` when one is given.
    async fn run_status(
        &self,
        actor: &Actor,
        claim: Option<&crate::jobs::JobClaim>,
        run_id: &str,
        status: RunStatus,
        reason: Option<UnavailableReason>,
    ) -> Result<Stored> {
        actor.may_append(Table::RunEvents)?;
        let run = self
            .run(run_id)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "run",
                key: run_id.to_owned(),
            })?;
        if actor.role == ActorRole::Producer {
            self.check_producer_cancels(actor, &run, status, reason)
                .await?;
        }
        // A verifier ends another's run only as a takeover: the run is an earlier claim's
        // attempt at the job whose current claim it holds (checked in the append's own
        // transaction), and the end is `cancelled`.
        let taken_over = claim.is_some_and(|c| {
            status == RunStatus::Cancelled
                && reason.is_none()
                && records::job_run(run_id).is_some_and(|(job, stale)| {
                    job == c.job && stale < c.fencing && run_id == format!("job-{job}-{stale}")
                })
        });
        if actor.role == ActorRole::Verifier
            && run.admission.verifier.as_str() != actor.principal
            && !taken_over
        {
            return Err(StoreError::Refused(format!(
                "run {run_id:?} belongs to verifier {:?}, not {:?}",
                run.admission.verifier.as_str(),
                actor.principal
            )));
        }
        // The run's end once it has one (nothing after it is taken), else its latest event.
        if let Some(last) = run.end().or(run.events.last()) {
            if last.status == status && last.reason == reason {
                let key = records::run_event_key(run_id, last.n);
                let found = self
                    .find_one(Table::RunEvents, Filter::Key(key.clone()))
                    .await?
                    .ok_or(StoreError::NotFound {
                        what: "run event",
                        key,
                    })?;
                // Nothing to write, but a claim that completes its job still does, as it
                // would with the write: a caller told `Ok` may count the job done.
                if let Some((c, outcome)) =
                    claim.and_then(|c| c.completes.as_deref().map(|o| (c, o)))
                {
                    self.queue()
                        .complete_job(actor, c.job, c.fencing, outcome)
                        .await?;
                }
                return Ok(found);
            }
            if last.status.is_terminal() {
                return Err(StoreError::Refused(format!(
                    "run {run_id:?} already ended {}; it cannot become {}",
                    last.status.as_str(),
                    status.as_str()
                )));
            }
        }
        let event = RunEvent {
            run_id: run.admission.run_id.clone(),
            n: run.events.iter().map(|e| e.n).max().map_or(1, |n| n + 1),
            status,
            reason,
        };
        let body = text_of(Table::RunEvents, &event)?;
        let item = record(Table::RunEvents, body, Some(run_id.to_owned()))?;
        let key = item.key.clone();
        one(self.append_claimed(actor, claim, vec![item]).await?).ok_or(StoreError::NotFound {
            what: Table::RunEvents.name(),
            key,
        })
    }

    async fn find_one(&self, table: Table, filter: Filter) -> Result<Option<Stored>> {
        Ok(one(self.backend.find(table, filter).await?))
    }

    async fn append_one(&self, actor: &Actor, item: Prepared) -> Result<Stored> {
        let table = item.table.name();
        let key = item.key.clone();
        one(self.append(actor, vec![item]).await?).ok_or(StoreError::NotFound { what: table, key })
    }

    async fn cas(
        &self,
        actor: &Actor,
        kind: PointerKind,
        name: &str,
        expected: Option<String>,
        new: Option<String>,
    ) -> Result<Pointer> {
        let cas = match self.prepare_cas(actor, kind, name, expected, new).await? {
            Ok(cas) => cas,
            Err(unchanged) => return Ok(unchanged),
        };
        let (kind, expected) = (cas.kind, cas.expected.clone());
        cas_outcome(
            kind,
            name,
            expected.as_deref(),
            self.backend.cas(actor, cas).await?,
        )
    }

    /// The compare-and-set of pointer `name` from `expected` to `new`, checked and ready for
    /// the backend; or, when `new` is what the pointer holds already, the pointer as it is
    /// (nothing to change: no record, no event). A pointer found holding another value is
    /// refused as [`StoreError::CasFailed`].
    async fn prepare_cas(
        &self,
        actor: &Actor,
        kind: PointerKind,
        name: &str,
        expected: Option<String>,
        new: Option<String>,
    ) -> Result<std::result::Result<PreparedCas, Pointer>> {
        let current = self.backend.pointer(kind, name).await?;
        let (revision, value) = current
            .as_ref()
            .map_or((0, None), |p| (p.revision, p.value.clone()));
        if value != expected {
            return Err(cas_failed(
                kind,
                name,
                expected.as_deref(),
                value.as_deref(),
            ));
        }
        if new == expected {
            return Ok(Err(current.unwrap_or(Pointer {
                kind,
                name: name.to_owned(),
                revision: 0,
                value: None,
            })));
        }
        let json = |v: &Option<String>| -> Result<Value> {
            v.as_deref().map_or(Ok(Value::Null), |t| {
                verdict_core::json::parse(t.as_bytes())
                    .map_err(|e| invalid("pointer value")(e.to_string()))
            })
        };
        let change = PointerChange {
            pointer: kind.as_str().to_owned(),
            name: name.to_owned(),
            revision: revision + 1,
            old: json(&expected)?,
            new: json(&new)?,
        };
        let body = text_of(Table::PointerChanges, &change)?;
        let change = record(Table::PointerChanges, body, Some(name.to_owned()))?;
        let cas = PreparedCas {
            kind,
            name: name.to_owned(),
            expected_revision: revision,
            expected: expected.clone(),
            new,
            change,
        };
        check_item(actor, &cas.change)?;
        check_pointer_name(name, "pointer name")?;
        for value in [&cas.expected, &cas.new].into_iter().flatten() {
            if value.len() > records::MAX_POINTER_VALUE_BYTES {
                return Err(StoreError::Invalid {
                    what: "pointer value",
                    message: format!(
                        "a value of {} bytes exceeds {} bytes",
                        value.len(),
                        records::MAX_POINTER_VALUE_BYTES
                    ),
                });
            }
        }
        Ok(Ok(cas))
    }
}

/// The refusal of a compare-and-set that found pointer `name` holding `found`, not `expected`.
fn cas_failed(
    kind: PointerKind,
    name: &str,
    expected: Option<&str>,
    found: Option<&str>,
) -> StoreError {
    StoreError::CasFailed {
        pointer: kind.as_str(),
        name: name.to_owned(),
        expected: show(expected),
        found: show(found),
    }
}

/// The pointer a backend's compare-and-set of `name` from `expected` moved, or its refusal
/// naming what the pointer held instead.
fn cas_outcome(
    kind: PointerKind,
    name: &str,
    expected: Option<&str>,
    outcome: CasOutcome,
) -> Result<Pointer> {
    match outcome {
        CasOutcome::Done(p) => Ok(p),
        CasOutcome::Stale(found) => Err(cas_failed(
            kind,
            name,
            expected,
            found.as_ref().and_then(|p| p.value.as_deref()),
        )),
    }
}

/// A record's audit fields within their bounds ([`records::check_audit_fields`]).
fn check_item(actor: &Actor, item: &Prepared) -> Result<()> {
    records::check_audit_fields(&actor.principal, &item.key, item.correlation.as_deref()).map_err(
        |message| StoreError::Invalid {
            what: item.table.name(),
            message: format!(
                "{}: {message}",
                item.key.chars().take(80).collect::<String>()
            ),
        },
    )
}

/// A subject's mission as a refusal names it.
fn mission_name(s: &Subject) -> &str {
    s.mission.as_ref().map_or("none", Name::as_str)
}

fn check_pointer_name(name: &str, what: &'static str) -> Result<()> {
    if verdict_core::contracts::primitives::is_printable_name(name) {
        Ok(())
    } else {
        Err(StoreError::Invalid {
            what,
            message: format!("{name:?} is not 1-256 printable characters"),
        })
    }
}

#[async_trait]
impl<B: Backend> Store for StoreImpl<B> {
    fn describe(&self) -> String {
        self.backend.describe()
    }

    fn queue(&self) -> &dyn crate::jobs::JobQueue {
        &self.backend
    }

    async fn schema_version(&self) -> Result<i64> {
        self.backend.schema_version().await
    }

    fn round_trips(&self) -> u64 {
        self.backend.round_trips()
    }

    async fn binds_evidence_grants(&self, actor: &Actor) -> Result<bool> {
        Ok(self.clock().await? == StoreClock::System
            && self.backend.binds_evidence_grants(actor).await?)
    }

    async fn clock(&self) -> Result<StoreClock> {
        if let Some(clock) = self.clock.get() {
            return Ok(*clock);
        }
        let Some(pointer) = self
            .backend
            .pointer(PointerKind::Clock, CLOCK_POINTER)
            .await?
        else {
            // Not chosen (yet): a store keeps the system clock unless told otherwise.
            return Ok(StoreClock::System);
        };
        let setting: Option<ClockSetting> = pointer.decode()?;
        let clock = setting.map_or(StoreClock::System, |s| s.clock);
        Ok(*self.clock.get_or_init(|| clock))
    }

    async fn establish_clock(&self, actor: &Actor, clock: StoreClock) -> Result<Pointer> {
        actor.may_move(PointerKind::Clock)?;
        let new = Some(text_of(Table::PointerChanges, &ClockSetting { clock })?);
        self.cas(actor, PointerKind::Clock, CLOCK_POINTER, None, new)
            .await
    }

    async fn initialise(
        &self,
        actor: &Actor,
        clock: StoreClock,
        operator: &PrincipalRecord,
    ) -> Result<Stored> {
        actor.may_move(PointerKind::Clock)?;
        actor.may_append(Table::Principals)?;
        let new = Some(text_of(Table::PointerChanges, &ClockSetting { clock })?);
        let cas = match self
            .prepare_cas(actor, PointerKind::Clock, CLOCK_POINTER, None, new.clone())
            .await?
        {
            Ok(cas) => cas,
            Err(unchanged) => {
                return Err(cas_failed(
                    PointerKind::Clock,
                    CLOCK_POINTER,
                    None,
                    unchanged.value.as_deref(),
                ));
            }
        };
        let body = text_of(Table::Principals, operator)?;
        let item = record(Table::Principals, body, Some(operator.name.to_string()))?;
        check_item(actor, &item)?;
        let key = item.key.clone();
        let (outcome, stored) = self.backend.cas_then_append(actor, cas, vec![item]).await?;
        cas_outcome(PointerKind::Clock, CLOCK_POINTER, None, outcome)?;
        one(stored).ok_or(StoreError::NotFound {
            what: Table::Principals.name(),
            key,
        })
    }

    async fn set_manual_time(&self, now: &Timestamp) -> Result<()> {
        match self.clock().await? {
            StoreClock::Manual => {
                // Rounded up to the database's microseconds, so a lease the store measures
                // from `now` is never longer there than here.
                let micros =
                    i64::try_from((now.unix_nanos() + 999).div_euclid(1000)).map_err(|_| {
                        StoreError::Invalid {
                            what: "manual time",
                            message: format!("{now} is out of the store's range"),
                        }
                    })?;
                *self.manual_now() = Some(now.clone());
                self.backend.manual_time().set(micros);
                Ok(())
            }
            StoreClock::System => Err(StoreError::Refused(format!(
                "this store keeps the system clock; it takes no time from the caller (asked to act at {now})"
            ))),
        }
    }

    async fn now(&self) -> Result<Timestamp> {
        match self.clock().await? {
            StoreClock::System => self.fresh_now.get(|| self.backend.clock_now()).await,
            StoreClock::Manual => self.manual_now().clone().ok_or_else(|| {
                StoreError::Refused(
                    "this store keeps a manual clock and no time was set on it (--now)".into(),
                )
            }),
        }
    }

    async fn put(&self, actor: &Actor, kind: DocKind, doc: &Value) -> Result<Stored> {
        let items = self.prepare_doc(actor, None, kind, doc).await?;
        one(self.append(actor, items).await?).ok_or(StoreError::NotFound {
            what: kind.table().name(),
            key: String::new(),
        })
    }

    async fn put_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        kind: DocKind,
        doc: &Value,
    ) -> Result<Stored> {
        let items = self.prepare_doc(actor, Some(claim), kind, doc).await?;
        one(self.append_claimed(actor, Some(claim), items).await?).ok_or(StoreError::NotFound {
            what: kind.table().name(),
            key: String::new(),
        })
    }

    async fn put_request_enqueuing(
        &self,
        actor: &Actor,
        doc: &Value,
        jobs: &[crate::jobs::RequestJob],
    ) -> Result<(Stored, Vec<crate::jobs::Job>)> {
        crate::jobs::may_enqueue(actor)?;
        let items = self.prepare_doc(actor, None, DocKind::Request, doc).await?;
        for item in &items {
            check_item(actor, item)?;
        }
        // The request is the last item prepared; its jobs are about its digest.
        let request = items
            .last()
            .map(|item| item.digest.clone())
            .ok_or(StoreError::NotFound {
                what: "verification request",
                key: String::new(),
            })?;
        let jobs = jobs.iter().map(|j| j.of(&request)).collect();
        let (stored, jobs) = self.backend.append_enqueuing(actor, items, jobs).await?;
        let stored = stored.into_iter().last().ok_or(StoreError::NotFound {
            what: "verification request",
            key: request.to_string(),
        })?;
        Ok((stored, jobs))
    }

    async fn put_batch_claimed(
        &self,
        actor: &Actor,
        claim: Option<&crate::jobs::JobClaim>,
        docs: &[(DocKind, Value)],
    ) -> Result<Vec<Stored>> {
        let mut items = Vec::with_capacity(docs.len());
        let mut positions = Vec::with_capacity(docs.len());
        for (kind, doc) in docs {
            let mut prepared = self.prepare_doc(actor, claim, *kind, doc).await?;
            items.append(&mut prepared);
            positions.push(items.len() - 1);
        }
        // Positions rise, so one pass moves each document's row out without copying its body.
        let mut stored = self
            .append_claimed(actor, claim, items)
            .await?
            .into_iter()
            .enumerate();
        Ok(positions
            .into_iter()
            .filter_map(|p| stored.find(|(i, _)| *i == p).map(|(_, s)| s))
            .collect())
    }

    async fn get(&self, kind: DocKind, digest: &Digest) -> Result<Option<Stored>> {
        let filter = match kind {
            DocKind::Finding | DocKind::Decision => Filter::Column("digest", digest.to_string()),
            _ => Filter::Key(digest.to_string()),
        };
        self.find_one(kind.table(), filter).await
    }

    async fn decision_by_key(&self, evaluation_key: &Digest) -> Result<Option<Stored>> {
        self.find_one(
            Table::GateDecisions,
            Filter::Key(evaluation_key.to_string()),
        )
        .await
    }

    async fn evaluations(&self, evaluation_key: &Digest) -> Result<Vec<Stored>> {
        self.backend
            .find(
                Table::GateEvaluations,
                Filter::Column("evaluation_key", evaluation_key.to_string()),
            )
            .await
    }

    async fn denials(&self, after_seq: u64, limit: u32) -> Result<Vec<Stored>> {
        self.rows(Table::Denials, after_seq, limit).await
    }

    async fn rows(&self, table: Table, after_seq: u64, limit: u32) -> Result<Vec<Stored>> {
        let after = crate::backend::to_i64(after_seq, "seq")?;
        self.backend
            .scan(table, after, limit)
            .await?
            .into_iter()
            .map(|row| {
                Ok(Stored {
                    table,
                    seq: crate::backend::seq_from(table.name(), &row.key, row.seq)?,
                    digest: crate::backend::parse_digest(table, &row.key, &row.digest)?,
                    key: row.key,
                    body: row.body,
                    inserted: false,
                    counted: row.counted,
                })
            })
            .collect()
    }

    async fn denials_of(&self, principal: &str) -> Result<Vec<Stored>> {
        self.backend
            .find(
                Table::Denials,
                Filter::Column("principal", principal.to_owned()),
            )
            .await
    }

    async fn finding(&self, id: &Id, version: u64) -> Result<Option<Stored>> {
        self.find_one(
            Table::Findings,
            Filter::Key(finding_key(id.as_str(), version)),
        )
        .await
    }

    async fn finding_versions(&self, id: &Id) -> Result<Vec<Stored>> {
        self.backend
            .find(
                Table::Findings,
                Filter::Column("finding_id", id.to_string()),
            )
            .await
    }

    async fn list(&self, kind: DocKind, about: &About) -> Result<Vec<Stored>> {
        let table = kind.table();
        if !table.has_subject() && table != Table::Subjects {
            return Err(StoreError::Invalid {
                what: "listing",
                message: format!("{} are not listed by subject or execution", table.name()),
            });
        }
        let filter = match about {
            About::Subject(d) => Filter::Subject(d.to_string()),
            About::Execution(e) => Filter::Execution(e.clone()),
        };
        self.backend.find(table, filter).await
    }

    async fn add_principal(&self, actor: &Actor, principal: &PrincipalRecord) -> Result<Stored> {
        actor.may_append(Table::Principals)?;
        let body = text_of(Table::Principals, principal)?;
        let item = record(Table::Principals, body, Some(principal.name.to_string()))?;
        self.append_one(actor, item).await
    }

    async fn principal(&self, name: &str) -> Result<Option<PrincipalInfo>> {
        Ok(self
            .backend
            .principal_entries(Some(name), 0, 1)
            .await?
            .pop())
    }

    async fn principals(&self, after_seq: u64, limit: u32) -> Result<Vec<PrincipalInfo>> {
        let after = crate::backend::to_i64(after_seq, "seq")?;
        self.backend.principal_entries(None, after, limit).await
    }

    async fn give_login(&self, actor: &Actor, name: &str) -> Result<DbLogin> {
        // Giving a login is the act of adding principals.
        actor.may_append(Table::Principals)?;
        if self.principal(name).await?.is_none() {
            return Err(StoreError::NotFound {
                what: "principal",
                key: name.to_owned(),
            });
        }
        self.backend.give_login(actor, name).await
    }

    async fn take_login(&self, actor: &Actor, name: &str) -> Result<LoginTaken> {
        actor.may_append(Table::Principals)?;
        if self.principal(name).await?.is_none() {
            return Err(StoreError::NotFound {
                what: "principal",
                key: name.to_owned(),
            });
        }
        self.backend.take_login(actor, name).await
    }

    async fn principal_by_token_hash(
        &self,
        token_sha256: &Digest,
    ) -> Result<Option<PrincipalRecord>> {
        self.backend
            .principal_by_token(token_sha256.as_str())
            .await?
            .map(|s| s.decode())
            .transpose()
    }

    async fn change_token(
        &self,
        actor: &Actor,
        principal: &str,
        token_sha256: Option<&Digest>,
        at: &Timestamp,
        reason: &str,
    ) -> Result<Stored> {
        actor.may_append(Table::CredentialChanges)?;
        // Anyone but an operator only replaces its own token: it may neither retire its token
        // without a new one nor touch another's. The PostgreSQL routine holds the same.
        if actor.role != ActorRole::Operator
            && (actor.principal != principal || token_sha256.is_none())
        {
            return Err(actor.forbidden(Table::CredentialChanges.name()));
        }
        let name: Name = principal.parse().map_err(|e| StoreError::Invalid {
            what: "principal name",
            message: format!("{e}"),
        })?;
        if self.principal(principal).await?.is_none() {
            return Err(StoreError::NotFound {
                what: "principal",
                key: principal.to_owned(),
            });
        }
        if let Some(hash) = token_sha256
            && self.backend.token_hash_held(hash.as_str()).await?
        {
            return Err(StoreError::Refused(
                "that token's hash was held by a principal before; a new token is never an old one"
                    .into(),
            ));
        }
        let change = CredentialChange {
            principal: name,
            n: self.backend.token_changes(principal).await? + 1,
            token_sha256: token_sha256.cloned(),
            changed_at: at.clone(),
            reason: reason.to_owned(),
        };
        let body = text_of(Table::CredentialChanges, &change)?;
        let item = record(Table::CredentialChanges, body, Some(principal.to_owned()))?;
        let stored = self.append_one(actor, item).await;
        // Moved whatever the answer: an error after the commit must not leave a holder kept.
        self.token_changes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        stored
    }

    fn credential_epoch(&self) -> u64 {
        self.token_changes
            .load(std::sync::atomic::Ordering::SeqCst)
            .wrapping_add(self.backend.token_changes_heard())
    }

    async fn add_grant(&self, actor: &Actor, grant: &GrantRecord) -> Result<Stored> {
        actor.may_append(Table::Grants)?;
        let body = text_of(Table::Grants, grant)?;
        let item = record(Table::Grants, body, Some(grant.principal.to_string()))?;
        self.append_one(actor, item).await
    }

    async fn revoke_grant(&self, actor: &Actor, revocation: &Revocation) -> Result<Stored> {
        actor.may_append(Table::GrantRevocations)?;
        let grant_id = revocation.grant_id.to_string();
        if self
            .find_one(Table::Grants, Filter::Key(grant_id.clone()))
            .await?
            .is_none()
        {
            return Err(StoreError::NotFound {
                what: "grant",
                key: grant_id,
            });
        }
        let body = text_of(Table::GrantRevocations, revocation)?;
        let item = record(Table::GrantRevocations, body, Some(grant_id))?;
        self.append_one(actor, item).await
    }

    async fn grants_for(&self, principal: &str) -> Result<Vec<Grant>> {
        // The grants and their revocations in one read, not one read per grant.
        grants_of(self.backend.grants_with_revocations(principal).await?)
    }

    async fn subject_and_grants(
        &self,
        digest: &Digest,
        principal: &str,
    ) -> Result<(Option<Stored>, Vec<Grant>)> {
        let (subject, grants) = self
            .backend
            .subject_and_grants(digest.as_str(), principal)
            .await?;
        Ok((subject, grants_of(grants)?))
    }

    async fn admit_run(&self, actor: &Actor, admission: &RunAdmission) -> Result<Stored> {
        let item = self.prepare_admission(actor, admission).await?;
        self.append_one(actor, item).await
    }

    async fn admit_run_noted(
        &self,
        actor: &Actor,
        admission: &RunAdmission,
        note: &Value,
    ) -> Result<Stored> {
        let items = self.admission_items(actor, None, admission, note).await?;
        let table = Table::VerifierRuns.name();
        let key = admission.run_id.to_string();
        self.backend
            .append(actor, items)
            .await?
            .into_iter()
            .next()
            .ok_or(StoreError::NotFound { what: table, key })
    }

    async fn admit_run_noted_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        admission: &RunAdmission,
        note: &Value,
    ) -> Result<Stored> {
        let items = self
            .admission_items(actor, Some(claim), admission, note)
            .await?;
        let table = Table::VerifierRuns.name();
        let key = admission.run_id.to_string();
        self.append_claimed(actor, Some(claim), items)
            .await?
            .into_iter()
            .next()
            .ok_or(StoreError::NotFound { what: table, key })
    }

    async fn record_run_status(
        &self,
        actor: &Actor,
        run_id: &str,
        status: RunStatus,
        reason: Option<UnavailableReason>,
    ) -> Result<Stored> {
        self.run_status(actor, None, run_id, status, reason).await
    }

    async fn record_run_status_claimed(
        &self,
        actor: &Actor,
        claim: &crate::jobs::JobClaim,
        run_id: &str,
        status: RunStatus,
        reason: Option<UnavailableReason>,
    ) -> Result<Stored> {
        self.run_status(actor, Some(claim), run_id, status, reason)
            .await
    }

    async fn run(&self, run_id: &str) -> Result<Option<Run>> {
        let Some(row) = self
            .find_one(Table::VerifierRuns, Filter::Key(run_id.to_owned()))
            .await?
        else {
            return Ok(None);
        };
        // In the order the store recorded them, not by their numbers: a number is the
        // writer's to choose (see `Run::in_order`).
        let mut rows = self
            .backend
            .find(
                Table::RunEvents,
                Filter::Column("run_id", run_id.to_owned()),
            )
            .await?;
        rows.sort_by_key(|r| r.seq);
        let events = rows
            .iter()
            .map(Stored::decode::<RunEvent>)
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Run {
            admission: row.decode()?,
            events,
            seq: row.seq,
        }))
    }

    async fn pointer(&self, kind: PointerKind, name: &str) -> Result<Option<Pointer>> {
        self.backend.pointer(kind, name).await
    }

    async fn execution_was_at(&self, execution: &str, subject: &Digest) -> Result<bool> {
        let changes = self
            .backend
            .find(
                Table::PointerChanges,
                Filter::Column("name", execution.to_owned()),
            )
            .await?;
        for row in changes {
            let change: PointerChange = row.decode()?;
            if change.pointer == PointerKind::Execution.as_str()
                && change.new.get("subject_digest").and_then(Value::as_str)
                    == Some(subject.as_str())
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn gate_policies(&self, gate: &str) -> Result<Vec<GatePolicySpan>> {
        let rows = self
            .backend
            .find(
                Table::PointerChanges,
                Filter::Column("name", gate.to_owned()),
            )
            .await?;
        let mut changes = Vec::new();
        for row in rows {
            let change: PointerChange = row.decode()?;
            if change.pointer == PointerKind::Gate.as_str() {
                changes.push((row.seq, change));
            }
        }
        changes.sort_by_key(|(seq, _)| *seq);
        let mut out: Vec<GatePolicySpan> = Vec::new();
        for (seq, c) in changes {
            let head: GateHead =
                serde_json::from_value(c.new).map_err(|e| StoreError::Corrupt {
                    table: Table::PointerChanges.name(),
                    key: gate.to_owned(),
                    message: format!("a change of gate {gate:?} holds no gate head: {e}"),
                })?;
            if let Some(last) = out.last_mut() {
                last.until_seq = Some(seq);
            }
            out.push(GatePolicySpan {
                policy_digest: head.policy_digest,
                from_seq: seq,
                until_seq: None,
            });
        }
        Ok(out)
    }

    async fn set_current_subject(
        &self,
        actor: &Actor,
        execution: &str,
        expected: Option<&ExecutionHead>,
        subject: &Digest,
    ) -> Result<Pointer> {
        actor.may_move(PointerKind::Execution)?;
        check_pointer_name(execution, "execution id")?;
        let s: Subject = self
            .get(DocKind::Subject, subject)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "subject",
                key: subject.to_string(),
            })?
            .decode()?;
        if s.execution.id.as_str() != execution {
            return Err(StoreError::Refused(format!(
                "subject {subject} belongs to execution {:?}, not {execution:?}",
                s.execution.id.as_str()
            )));
        }
        let new = ExecutionHead {
            subject_digest: subject.clone(),
            generation: s.execution.generation,
        };
        if let Some(old) = expected
            && new.generation < old.generation
        {
            return Err(StoreError::Refused(format!(
                "execution {execution:?} cannot go back from generation {} to {}",
                old.generation, new.generation
            )));
        }
        let current = match self.execution_head(execution).await? {
            Some(h) => Some(self.stored_subject(&h.subject_digest).await?),
            None => None,
        };
        if let Some((current_digest, current)) = &current {
            if current.mission != s.mission {
                return Err(StoreError::Refused(format!(
                    "execution {execution:?}: its current subject {current_digest} is of mission {}, but subject {subject} names mission {}; a subject does not change its execution's mission",
                    mission_name(current),
                    mission_name(&s)
                )));
            }
            if current_digest != subject
                && self.execution_was_at(execution, subject).await?
                && !self.execution_is_at(execution, subject).await?
            {
                return Err(StoreError::Refused(format!(
                    "execution {execution:?}: subject {subject} was its current subject before; an execution only moves forward"
                )));
            }
        }
        if actor.role == ActorRole::Producer {
            self.check_producer_moves(actor, execution, subject, &s, current.as_ref())
                .await?;
        }
        let expected = expected
            .map(|e| text_of(Table::PointerChanges, e))
            .transpose()?;
        let new = Some(text_of(Table::PointerChanges, &new)?);
        self.cas(actor, PointerKind::Execution, execution, expected, new)
            .await
    }

    async fn set_gate_policy(
        &self,
        actor: &Actor,
        gate: &str,
        expected: Option<&GateHead>,
        policy: &Digest,
    ) -> Result<Pointer> {
        actor.may_move(PointerKind::Gate)?;
        check_pointer_name(gate, "gate name")?;
        let p: Policy = self
            .get(DocKind::Policy, policy)
            .await?
            .ok_or_else(|| StoreError::NotFound {
                what: "policy",
                key: policy.to_string(),
            })?
            .decode()?;
        if let Some(old) = expected
            && p.revision <= old.revision
            && old.policy_digest != *policy
        {
            return Err(StoreError::Refused(format!(
                "gate {gate:?} is at policy revision {}; revision {} does not move it forward",
                old.revision, p.revision
            )));
        }
        let new = GateHead {
            policy_digest: policy.clone(),
            revision: p.revision,
        };
        let expected = expected
            .map(|e| text_of(Table::PointerChanges, e))
            .transpose()?;
        let new = Some(text_of(Table::PointerChanges, &new)?);
        self.cas(actor, PointerKind::Gate, gate, expected, new)
            .await
    }

    async fn cas_lease(
        &self,
        actor: &Actor,
        job: &str,
        expected: Option<&LeaseHolder>,
        new: Option<&LeaseHolder>,
    ) -> Result<Pointer> {
        actor.may_move(PointerKind::Lease)?;
        check_pointer_name(job, "job name")?;
        if job.starts_with(records::ADMISSION_LEASE_PREFIX) {
            match actor.role {
                ActorRole::Operator => {}
                // A verifier takes the lease of its own admission (holding itself, checked
                // below), and for no longer than the engine would hold it.
                ActorRole::Verifier => {
                    if let Some(n) = new {
                        let limit = self
                            .now()
                            .await?
                            .plus_seconds(records::ADMISSION_LEASE_SECONDS);
                        if n.expires_at.unix_nanos() > limit.unix_nanos() {
                            return Err(StoreError::Refused(format!(
                                "{job:?}: a verifier holds an admission lease for at most {} seconds, not until {}",
                                records::ADMISSION_LEASE_SECONDS,
                                n.expires_at
                            )));
                        }
                    }
                }
                _ => {
                    return Err(StoreError::Refused(format!(
                        "{job:?} is an admission lease; only an operator, or a verifier for its own admission, moves it"
                    )));
                }
            }
        }
        if actor.role != ActorRole::Operator {
            let own =
                |h: Option<&LeaseHolder>| h.is_some_and(|h| h.holder.as_str() == actor.principal);
            let taking_own = new.is_none_or(|n| n.holder.as_str() == actor.principal);
            let releasing_own = new.is_some() || own(expected);
            if !taking_own || !releasing_own {
                return Err(StoreError::Refused(format!(
                    "{:?} may take and release only its own leases",
                    actor.principal
                )));
            }
        }
        self.check_lease_purpose(actor, job).await?;
        let expected = expected
            .map(|e| text_of(Table::PointerChanges, e))
            .transpose()?;
        let new = new.map(|n| text_of(Table::PointerChanges, n)).transpose()?;
        self.cas(actor, PointerKind::Lease, job, expected, new)
            .await
    }

    async fn audit_head(&self) -> Result<Option<ChainHead>> {
        self.backend.audit_head().await
    }

    async fn now_and_head(&self) -> Result<(Timestamp, Option<ChainHead>)> {
        match self.clock().await? {
            StoreClock::System => {
                self.fresh_now_and_head
                    .get(|| self.backend.clock_now_and_head())
                    .await
            }
            StoreClock::Manual => Ok((self.now().await?, self.backend.audit_head().await?)),
        }
    }

    async fn audit_events(&self, after_seq: u64, limit: u32) -> Result<Vec<AuditEvent>> {
        self.backend.audit_events(after_seq, limit).await
    }

    async fn verify_audit(&self, anchor: Option<&ChainHead>) -> Result<AuditReport> {
        crate::verify::verify(&self.backend.snapshot().await?, anchor).await
    }

    async fn verify_audit_paged(
        &self,
        anchor: Option<&ChainHead>,
        page: u32,
    ) -> Result<AuditReport> {
        crate::verify::verify_paged(&self.backend.snapshot().await?, anchor, page.max(1)).await
    }

    async fn pointers(&self, kind: PointerKind) -> Result<Vec<Pointer>> {
        let mut all = self.backend.pointers().await?;
        all.retain(|p| p.kind == kind);
        Ok(all)
    }

    async fn put_blob(
        &self,
        actor: &Actor,
        bytes: &[u8],
        media_type: Option<&str>,
    ) -> Result<Stored> {
        actor.may_append(Table::Blobs)?;
        if bytes.len() > records::MAX_BLOB_BYTES {
            return Err(StoreError::Invalid {
                what: "blob",
                message: format!(
                    "a blob of {} bytes exceeds the limit of {} bytes",
                    bytes.len(),
                    records::MAX_BLOB_BYTES
                ),
            });
        }
        if let Some(m) = media_type {
            records::check_media_type(m).map_err(invalid("blob"))?;
        }
        let blob = records::BlobRecord {
            digest: digest::raw(bytes),
            size: u64::try_from(bytes.len()).map_err(|e| invalid("blob")(e.to_string()))?,
            media_type: media_type.map(str::to_owned),
            writer: actor
                .principal
                .parse()
                .map_err(|e| invalid("blob")(format!("{e}")))?,
            stored_at: self.now().await?,
        };
        let body = text_of(Table::Blobs, &blob)?;
        // Recorded only when the bytes are stored already under another writer.
        let holder = record(Table::BlobHolders, body.clone(), None)?;
        let mut item = record(Table::Blobs, body, None)?;
        // The digest is the identity: whoever puts the same bytes again gets the stored record.
        item.converge = true;
        check_item(actor, &item)?;
        self.backend
            .put_blob(actor, item, holder, bytes.to_vec())
            .await
    }

    async fn blob_record(&self, digest: &Digest) -> Result<Option<Stored>> {
        self.find_one(Table::Blobs, Filter::Key(digest.to_string()))
            .await
    }

    async fn blob(&self, digest: &Digest) -> Result<Option<(Stored, Vec<u8>)>> {
        let Some(row) = self.blob_record(digest).await? else {
            return Ok(None);
        };
        let bytes =
            self.backend
                .blob_bytes(&row.key)
                .await?
                .ok_or_else(|| StoreError::Corrupt {
                    table: Table::Blobs.name(),
                    key: row.key.clone(),
                    message: "the record is stored without its bytes".into(),
                })?;
        Ok(Some((row, bytes)))
    }

    async fn blob_put_by(&self, digest: &Digest, principal: &str) -> Result<bool> {
        let Some(row) = self.blob_record(digest).await? else {
            return Ok(false);
        };
        if row.decode::<records::BlobRecord>()?.writer.as_str() == principal {
            return Ok(true);
        }
        let holders = self
            .backend
            .find(
                Table::BlobHolders,
                Filter::Column("blob", digest.to_string()),
            )
            .await?;
        for h in holders {
            if h.decode::<records::BlobRecord>()?.writer.as_str() == principal {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn run(events: &[(u64, RunStatus)]) -> Run {
        let digest = Digest::from_sha256(&[0; 32]);
        Run {
            admission: RunAdmission {
                run_id: "vrun-1".parse().unwrap(),
                request_digest: digest.clone(),
                subject_digest: digest,
                verifier: "reviewer".parse().unwrap(),
                class: "reviewer".parse().unwrap(),
                admitted_generation: 1,
            },
            events: events
                .iter()
                .map(|&(n, status)| RunEvent {
                    run_id: "vrun-1".parse().unwrap(),
                    n,
                    status,
                    reason: (status == RunStatus::Unavailable)
                        .then_some(UnavailableReason::GrantRevoked),
                })
                .collect(),
            seq: 1,
        }
    }

    /// A run's end is its first terminal event in the store's order, and a run whose events
    /// are numbered otherwise than 1, 2, … in that order, or go on after the end, is not in
    /// order: the shapes a verifier's own login could write before schema version 43.
    #[test]
    fn a_runs_end_is_its_first_in_the_stores_order_and_only_an_ordered_run_is_believed() {
        use RunStatus::{Cancelled, Completed, Started, Unavailable};
        let ordered = run(&[(1, Started), (2, Completed)]);
        assert!(ordered.in_order());
        assert_eq!(ordered.end().map(|e| e.status), Some(Completed));
        assert_eq!(ordered.status(), Some(Completed));
        let open = run(&[(1, Started)]);
        assert!(open.in_order());
        assert!(open.end().is_none());
        assert_eq!(open.status(), Some(Started));
        assert!(run(&[]).in_order());
        // Recorded as 1000 then 1: the end is the first recorded, and the run is not in order.
        let renumbered = run(&[(1000, Unavailable), (1, Completed)]);
        assert!(!renumbered.in_order());
        assert_eq!(renumbered.end().map(|e| e.status), Some(Unavailable));
        assert_eq!(renumbered.status(), Some(Unavailable));
        // A `completed` numbered 0 after an operator's cancellation.
        let before = run(&[(1, Cancelled), (0, Completed)]);
        assert!(!before.in_order());
        assert_eq!(before.status(), Some(Cancelled));
        // Numbered in order but going on after the end.
        let after = run(&[(1, Cancelled), (2, Completed)]);
        assert!(!after.in_order());
        assert_eq!(after.status(), Some(Cancelled));
        assert_eq!(after.up_to_end().len(), 1);
        assert_eq!(ordered.up_to_end().len(), 2);
        // A gap.
        assert!(!run(&[(1, Started), (3, Completed)]).in_order());
    }
}
