//! What the store keeps: its tables, the record types it owns, and how each stored body is
//! checked, keyed and hashed.
//!
//! Every append-only row is `(seq, key, digest, body)`: `body` is canonical JSON (RFC 8785),
//! `digest = "sha256:" + hex(SHA-256("verdict:" + domain + ":v1" + 0x00 + body))` with the
//! table's domain (the contract's digest kind for documents, `store.*` for the store's own
//! records), and `key` is what the row is unique by. [`key_of`] derives the key from the body
//! alone, so a writer and `audit verify` always agree on it.

use crate::actor::ActorRole;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use verdict_core::canonical;
use verdict_core::contracts::{
    self, CheckEvidence, Finding, GateDecision, HumanDecision, Id, Name, Policy, Role, Subject,
    Timestamp, UnavailableReason, VerificationResult,
};
use verdict_core::digest::{Digest, DigestKind};

/// Largest canonical body the store accepts (documents carry digests, not content).
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Largest blob the store keeps, in bytes (8 MiB): the bytes a subject names by raw digest (an
/// objective's text, a diff, an artifact) are stored whole, in one row, so they are bounded.
pub const MAX_BLOB_BYTES: usize = 8 << 20;

/// The most denials naming one principal (or [`UNAUTHENTICATED`]) that the store appends within
/// any 60 seconds of the clock stamping its audit events. Each refusal is recorded while its
/// principal is under the bound; past it the refusal still stands, but no row is appended for
/// it, so no principal can grow the chain without end by being refused (schema 36).
pub const DENIALS_PER_MINUTE: u32 = 60;

/// Longest media type a blob may carry, in characters.
pub const MAX_MEDIA_TYPE_CHARS: usize = 255;

/// Longest principal name, pointer name or correlation an audit event holds, in characters
/// (principal and pointer names are names: 1 to 256 characters).
pub const MAX_NAME_CHARS: usize = 256;

/// Longest key a record is stored under, in characters: above the longest key a valid body
/// derives (a pointer change's: a pointer kind of up to 9 characters, a revision of up to 20
/// digits and a name of up to 256 characters, 287 in all).
pub const MAX_KEY_CHARS: usize = 320;

/// Largest pointer value, in bytes (the values are small records: a subject or policy digest
/// with its generation or revision, a lease holder's name with its expiry).
pub const MAX_POINTER_VALUE_BYTES: usize = 4096;

/// Checks the fields an audit event records beside the body's digest: the principal (1 to
/// [`MAX_NAME_CHARS`] characters), the key (at most [`MAX_KEY_CHARS`]) and the correlation (at
/// most [`MAX_NAME_CHARS`]). The PostgreSQL write routines hold every call to the same bounds.
pub fn check_audit_fields(
    principal: &str,
    key: &str,
    correlation: Option<&str>,
) -> Result<(), String> {
    let chars = |s: &str| s.chars().count();
    if !(1..=MAX_NAME_CHARS).contains(&chars(principal)) {
        return Err(format!(
            "a principal of {} characters is not 1 to {MAX_NAME_CHARS} characters",
            chars(principal)
        ));
    }
    if !(1..=MAX_KEY_CHARS).contains(&chars(key)) {
        return Err(format!(
            "a key of {} characters is not 1 to {MAX_KEY_CHARS} characters",
            chars(key)
        ));
    }
    if let Some(c) = correlation.filter(|c| chars(c) > MAX_NAME_CHARS) {
        return Err(format!(
            "a correlation of {} characters exceeds {MAX_NAME_CHARS} characters",
            chars(c)
        ));
    }
    Ok(())
}

/// A column a PostgreSQL table keeps beside the body, derived from it by the write routine
/// (for lookups by subject, run, principal and so on). `audit verify` derives each again from
/// the body, here in code, and compares it with what is stored; it never evaluates SQL it
/// reads from the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DerivedColumn {
    /// The column's name.
    pub column: &'static str,
    /// The member of the body it holds, by names from the top (`->>` or `#>>` in SQL).
    pub path: &'static [&'static str],
    /// Whether the column is a `bigint` (the member cast to an integer) rather than text.
    pub integer: bool,
}

/// What a derived column should hold for a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Derivation {
    /// This text (an integer column's value in decimal), or NULL.
    Value(Option<String>),
    /// A member of a kind no valid body holds there (an object, a fraction, ...): the body is
    /// reported as invalid on its own, and the column is not compared.
    Unknown,
}

/// A text column holding the member at `path` (a literal, so the tables below are constants).
macro_rules! text {
    ($column:literal, $path:expr) => {
        DerivedColumn {
            column: $column,
            path: $path,
            integer: false,
        }
    };
}

/// A `bigint` column holding the member at `path`.
macro_rules! integer {
    ($column:literal, $path:expr) => {
        DerivedColumn {
            column: $column,
            path: $path,
            integer: true,
        }
    };
}

impl DerivedColumn {
    /// What the column holds for `body`, as the write routine derives it: a string member as
    /// it is, an integer in decimal, a missing member or `null` as NULL.
    #[must_use]
    pub fn derive(&self, body: &Value) -> Derivation {
        let mut at = Some(body);
        for name in self.path {
            at = at.and_then(|v| v.get(name));
        }
        match at {
            None | Some(Value::Null) => Derivation::Value(None),
            Some(Value::String(s)) if self.integer => match s.trim().parse::<i64>() {
                Ok(i) => Derivation::Value(Some(i.to_string())),
                Err(_) => Derivation::Unknown,
            },
            Some(Value::String(s)) => Derivation::Value(Some(s.clone())),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(i) => Derivation::Value(Some(i.to_string())),
                None => Derivation::Unknown,
            },
            Some(Value::Bool(b)) if !self.integer => Derivation::Value(Some(b.to_string())),
            Some(_) => Derivation::Unknown,
        }
    }
}

impl Table {
    /// The columns the PostgreSQL write routine of this table derives from each body (none for
    /// pointer changes, whose columns the database generates itself).
    #[must_use]
    pub const fn derived_columns(self) -> &'static [DerivedColumn] {
        const SUBJECT: DerivedColumn = text!("subject_digest", &["subject_digest"]);
        const POLICY: DerivedColumn = text!("policy_digest", &["policy_digest"]);
        const EVALUATION: DerivedColumn = text!("evaluation_key", &["evaluation_key"]);
        match self {
            Self::Principals => &[
                text!("name", &["name"]),
                text!("role", &["role"]),
                text!("token_sha256", &["token_sha256"]),
            ],
            Self::Grants => &[
                text!("principal", &["principal"]),
                text!("scope_kind", &["scope", "kind"]),
                text!("scope_id", &["scope", "id"]),
            ],
            Self::GrantRevocations => &[text!("grant_id", &["grant_id"])],
            Self::CredentialChanges => &[
                text!("principal", &["principal"]),
                integer!("n", &["n"]),
                text!("token_sha256", &["token_sha256"]),
            ],
            Self::Subjects => &[
                text!("execution_id", &["execution", "id"]),
                integer!("generation", &["execution", "generation"]),
            ],
            Self::Policies => &[
                text!("name", &["name"]),
                integer!("revision", &["revision"]),
            ],
            Self::CheckEvidence => &[
                SUBJECT,
                text!("evidence_id", &["id"]),
                text!("check_id", &["check"]),
            ],
            Self::VerificationRequests => &[SUBJECT],
            Self::VerifierRuns => &[
                text!("run_id", &["run_id"]),
                text!("request_digest", &["request_digest"]),
                SUBJECT,
                text!("verifier", &["verifier"]),
                text!("class", &["class"]),
                integer!("generation", &["admitted_generation"]),
            ],
            Self::RunEvents => &[
                text!("run_id", &["run_id"]),
                integer!("n", &["n"]),
                text!("status", &["status"]),
            ],
            Self::VerificationResults => &[
                SUBJECT,
                text!("run_id", &["verifier", "run"]),
                text!("verifier", &["verifier", "principal"]),
                text!("class", &["verifier", "class"]),
                integer!("generation", &["generation"]),
                text!("status", &["status"]),
            ],
            Self::Findings => &[
                text!("finding_id", &["id"]),
                integer!("version", &["version"]),
                SUBJECT,
            ],
            Self::HumanDecisions => &[SUBJECT, POLICY, text!("principal", &["principal"])],
            Self::GateDecisions => &[EVALUATION, SUBJECT, POLICY, text!("outcome", &["outcome"])],
            Self::Denials => &[
                text!("principal", &["principal"]),
                text!("role", &["role"]),
                text!("code", &["code"]),
                text!("at", &["at"]),
            ],
            Self::GateEvaluations => &[EVALUATION, SUBJECT, POLICY],
            // A blob's record derives no column; its bytes are checked against its key.
            Self::PointerChanges | Self::Blobs => &[],
            Self::BlobHolders => &[text!("blob", &["digest"]), text!("holder", &["writer"])],
        }
    }
}

/// An append-only table of the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// Principals: name, role, SHA-256 of the token (never the token).
    Principals,
    /// Grants of a principal on an execution or mission.
    Grants,
    /// Revocations of grants (a grant is never updated).
    GrantRevocations,
    /// Subjects.
    Subjects,
    /// Policies.
    Policies,
    /// Check evidence.
    CheckEvidence,
    /// Verification requests.
    VerificationRequests,
    /// Verifier runs as admitted.
    VerifierRuns,
    /// Status transitions of verifier runs.
    RunEvents,
    /// Verification results.
    VerificationResults,
    /// Findings, unique by id and version.
    Findings,
    /// Human decisions.
    HumanDecisions,
    /// Gate decisions, unique by evaluation key.
    GateDecisions,
    /// Every change of a pointer.
    PointerChanges,
    /// Refused actions: who (or the unauthenticated marker), what, why, when.
    Denials,
    /// The items each gate evaluation used, so its decision can be replayed.
    GateEvaluations,
    /// Content-addressed bytes (schema version 12): keyed by the raw digest of the bytes, the
    /// body is the [`BlobRecord`] and the bytes are kept beside it.
    Blobs,
    /// Each later principal that put a blob's bytes (schema version 27): a [`BlobRecord`]
    /// naming it as the writer, keyed by its own digest, at most one per blob and principal.
    /// The bytes are kept once, in [`Table::Blobs`].
    BlobHolders,
    /// Changes of a principal's token (schema version 30): the `n`th change of a principal
    /// names the one token it holds from then on, or none. A token is retired by the change
    /// after the one that gave it; nothing is updated.
    CredentialChanges,
}

impl Table {
    /// Every table, in the order `audit verify` walks them.
    pub const ALL: [Self; 19] = [
        Self::Principals,
        Self::Grants,
        Self::GrantRevocations,
        Self::Subjects,
        Self::Policies,
        Self::CheckEvidence,
        Self::VerificationRequests,
        Self::VerifierRuns,
        Self::RunEvents,
        Self::VerificationResults,
        Self::Findings,
        Self::HumanDecisions,
        Self::GateDecisions,
        Self::PointerChanges,
        Self::Denials,
        Self::GateEvaluations,
        Self::Blobs,
        Self::BlobHolders,
        Self::CredentialChanges,
    ];

    /// The table's name in both databases.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Principals => "principals",
            Self::Grants => "grants",
            Self::GrantRevocations => "grant_revocations",
            Self::Subjects => "subjects",
            Self::Policies => "policies",
            Self::CheckEvidence => "check_evidence",
            Self::VerificationRequests => "verification_requests",
            Self::VerifierRuns => "verifier_runs",
            Self::RunEvents => "run_events",
            Self::VerificationResults => "verification_results",
            Self::Findings => "findings",
            Self::HumanDecisions => "human_decisions",
            Self::GateDecisions => "gate_decisions",
            Self::PointerChanges => "pointer_changes",
            Self::Denials => "denials",
            Self::GateEvaluations => "gate_evaluations",
            Self::Blobs => "blobs",
            Self::BlobHolders => "blob_holders",
            Self::CredentialChanges => "credential_changes",
        }
    }

    /// The table named `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The digest domain of the table's bodies.
    #[must_use]
    pub const fn domain(self) -> &'static str {
        match self {
            Self::Principals => "store.principal",
            Self::Grants => "store.grant",
            Self::GrantRevocations => "store.grant-revocation",
            Self::Subjects => DigestKind::Subject.as_str(),
            Self::Policies => DigestKind::Policy.as_str(),
            Self::CheckEvidence => DigestKind::Evidence.as_str(),
            Self::VerificationRequests => DigestKind::Request.as_str(),
            Self::VerifierRuns => "store.verifier-run",
            Self::RunEvents => "store.run-event",
            Self::VerificationResults => DigestKind::Verification.as_str(),
            Self::Findings => DigestKind::Finding.as_str(),
            Self::HumanDecisions => DigestKind::HumanDecision.as_str(),
            Self::GateDecisions => DigestKind::Decision.as_str(),
            Self::PointerChanges => "store.pointer-change",
            Self::Denials => "store.denial",
            Self::GateEvaluations => "store.gate-evaluation",
            Self::Blobs => "store.blob",
            Self::BlobHolders => "store.blob-holder",
            Self::CredentialChanges => "store.credential-change",
        }
    }

    /// Roles that may append to the table. Pointer changes are appended only by a
    /// compare-and-set, so no role appends them directly.
    #[must_use]
    pub const fn writers(self) -> &'static [ActorRole] {
        use ActorRole::{Gate, Human, Operator, Producer, Runner, System, Verifier};
        match self {
            Self::Principals | Self::Grants | Self::GrantRevocations | Self::Policies => {
                &[Operator]
            }
            // A verifier appends only its own admission and its note (the store checks which).
            Self::VerifierRuns => &[Operator, Verifier],
            Self::Subjects => &[Producer, Operator],
            // The system role appends only the records of webhook deliveries and failures (the
            // store checks which).
            Self::VerificationRequests => &[Producer, Operator, Verifier, System],
            Self::CheckEvidence => &[Runner, Producer],
            // A producer appends only the end (`cancelled`) of a run of its own execution that
            // it cancelled (the store checks which).
            Self::RunEvents => &[Operator, Verifier, Producer],
            Self::VerificationResults | Self::Findings => &[Verifier],
            Self::HumanDecisions => &[Human],
            Self::GateDecisions | Self::GateEvaluations => &[Gate],
            Self::Denials => &[System],
            // The bytes a subject names are put by whoever holds them.
            Self::Blobs => &[Producer, Operator, Runner],
            // Appended only by a put of bytes stored already, through the blobs' own write.
            Self::BlobHolders => &[Producer, Operator, Runner],
            // An operator changes anyone's token; anyone else only replaces its own (the store
            // checks which).
            Self::CredentialChanges => &[Operator, Producer, Runner, Verifier, Human],
            Self::PointerChanges => &[],
        }
    }

    /// Whether rows carry a `subject_digest` (and so can be listed by subject or execution).
    #[must_use]
    pub const fn has_subject(self) -> bool {
        matches!(
            self,
            Self::CheckEvidence
                | Self::VerificationRequests
                | Self::VerifierRuns
                | Self::VerificationResults
                | Self::Findings
                | Self::HumanDecisions
                | Self::GateDecisions
                | Self::GateEvaluations
        )
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A contract document kind the store keeps, keyed by its digest (gate decisions by their
/// evaluation key, findings by id and version).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocKind {
    /// A subject.
    Subject,
    /// A policy.
    Policy,
    /// Check evidence.
    Evidence,
    /// A verification request (any JSON object; `subject_digest` is indexed when present).
    Request,
    /// A verification result; its findings are stored with it.
    Verification,
    /// A finding.
    Finding,
    /// A human decision.
    HumanDecision,
    /// A gate decision.
    Decision,
    /// The record of one gate evaluation ([`EvaluationRecord`]).
    Evaluation,
    /// The record of one refused action ([`DenialRecord`]).
    Denial,
}

impl DocKind {
    /// Every kind.
    pub const ALL: [Self; 10] = [
        Self::Subject,
        Self::Policy,
        Self::Evidence,
        Self::Request,
        Self::Verification,
        Self::Finding,
        Self::HumanDecision,
        Self::Decision,
        Self::Evaluation,
        Self::Denial,
    ];

    /// The table documents of this kind live in.
    #[must_use]
    pub const fn table(self) -> Table {
        match self {
            Self::Subject => Table::Subjects,
            Self::Policy => Table::Policies,
            Self::Evidence => Table::CheckEvidence,
            Self::Request => Table::VerificationRequests,
            Self::Verification => Table::VerificationResults,
            Self::Finding => Table::Findings,
            Self::HumanDecision => Table::HumanDecisions,
            Self::Decision => Table::GateDecisions,
            Self::Evaluation => Table::GateEvaluations,
            Self::Denial => Table::Denials,
        }
    }

    /// The contract digest kind; `None` for the store's own records (evaluations, denials),
    /// which are hashed under their table's `store.*` domain.
    #[must_use]
    pub const fn digest_kind(self) -> Option<DigestKind> {
        match self {
            Self::Subject => Some(DigestKind::Subject),
            Self::Policy => Some(DigestKind::Policy),
            Self::Evidence => Some(DigestKind::Evidence),
            Self::Request => Some(DigestKind::Request),
            Self::Verification => Some(DigestKind::Verification),
            Self::Finding => Some(DigestKind::Finding),
            Self::HumanDecision => Some(DigestKind::HumanDecision),
            Self::Decision => Some(DigestKind::Decision),
            Self::Evaluation | Self::Denial => None,
        }
    }
}

/// A mutable pointer kind. Pointers change only by compare-and-set, each change appended to
/// `pointer_changes` and audited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PointerKind {
    /// Execution id to its current subject digest and generation.
    Execution,
    /// Gate name to its current policy digest and revision.
    Gate,
    /// Job name to its lease holder and expiry.
    Lease,
    /// The store's clock ([`ClockSetting`]), named [`CLOCK_POINTER`]: set once, when the store
    /// is initialised, and never moved.
    Clock,
}

impl PointerKind {
    /// Every kind.
    pub const ALL: [Self; 4] = [Self::Execution, Self::Gate, Self::Lease, Self::Clock];

    /// The kind's name in the `pointers` table.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Execution => "execution",
            Self::Gate => "gate",
            Self::Lease => "lease",
            Self::Clock => "clock",
        }
    }

    /// The kind named `name`.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    pub(crate) const fn target(self) -> &'static str {
        match self {
            Self::Execution => "execution pointers",
            Self::Gate => "gate pointers",
            Self::Lease => "job leases",
            Self::Clock => "the store clock",
        }
    }

    /// Roles that may move pointers of this kind.
    #[must_use]
    pub const fn writers(self) -> &'static [ActorRole] {
        use ActorRole::{Operator, Producer, Runner, Verifier};
        match self {
            Self::Gate | Self::Clock => &[Operator],
            // A producer moves the execution of a subject it produced (the store checks which).
            Self::Execution => &[Operator, Producer],
            Self::Lease => &[Operator, Runner, Verifier],
        }
    }
}

/// The prefix of the engine's admission leases (`admit <request digest>`): moved in the
/// operator role, or by a verifier holding it itself for its own admission, for at most
/// [`ADMISSION_LEASE_SECONDS`]; a runner cannot squat a request's admissions.
pub const ADMISSION_LEASE_PREFIX: &str = "admit ";

/// How long an admission lease is held for (the engine's), and the most a verifier may hold one.
pub const ADMISSION_LEASE_SECONDS: u64 = 60;

/// The prefix of a run's lease (`run <run id>`): taken only by the verifier the run was
/// admitted to, or in the operator role. A lease is named by one of these two prefixes.
pub const RUN_LEASE_PREFIX: &str = "run ";

/// The schema of the engine's admission notes: the one document a verifier may append to the
/// requests table, naming itself as the admitted verifier.
pub const ADMISSION_NOTE_SCHEMA: &str = "verdict.admission/v1";

/// The schema of the engine's cancellation records: a producer ends the runs of an execution
/// only once the requests table holds one naming it as the canceller of that execution.
pub const CANCELLATION_NOTE_SCHEMA: &str = "verdict.cancellation/v1";

/// The schema of the record of a worker's run ended because another claim took its job over:
/// appended to the requests table by the verifier holding the job's current claim (schema 15).
pub const RUN_TAKEOVER_NOTE_SCHEMA: &str = "verdict.run-takeover/v1";

/// The schema of the record of a verification result refused at submission: appended by the
/// verifier whose run it ends (schema 15).
pub const RESULT_REFUSAL_NOTE_SCHEMA: &str = "verdict.result-refusal/v1";

/// The schema of the note of what a run's model was shown: appended by the run's verifier
/// (schema 15) or by an operator, as itself (schema 19).
pub const RUN_CONTEXT_NOTE_SCHEMA: &str = "verdict.run-context/v1";

/// The schema of the record of an event a webhook's receiver took: appended to the requests
/// table in the system role (schema 19), the engine's bookkeeping of where delivery resumes.
pub const WEBHOOK_DELIVERED_NOTE_SCHEMA: &str = "verdict.webhook-delivered/v1";

/// The schema of the record of an event whose delivery to a webhook failed every attempt:
/// appended in the system role (schema 19).
pub const WEBHOOK_FAILURE_NOTE_SCHEMA: &str = "verdict.webhook-failure/v1";

/// The job and claim a worker's run is named after (`job-<job>-<fencing>`), if it is named so.
/// A run so named is a verify job's attempt: its verifier's notes about it are appended only
/// under that job's claim.
#[must_use]
pub fn job_run(run_id: &str) -> Option<(i64, i64)> {
    let rest = run_id.strip_prefix("job-")?;
    let (job, fencing) = rest.split_once('-')?;
    // At most 18 digits each, as the PostgreSQL routines read them.
    let digits = |t: &str| (1..=18).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(job) || !digits(fencing) {
        return None;
    }
    Some((job.parse().ok()?, fencing.parse().ok()?))
}

/// The schema of the note a PostgreSQL store appends to the requests table whenever an operator
/// gives a principal a login of its own ([`LoginNote`]).
pub const LOGIN_NOTE_SCHEMA: &str = "verdict.db-login/v1";

/// The schema of the note appended when an operator takes a principal's login back (schema
/// version 42): a [`LoginNote`] of this schema.
pub const LOGIN_TAKEN_NOTE_SCHEMA: &str = "verdict.db-login-taken/v1";

/// Who gave a login: the operator whose act it was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginGiver {
    /// The operator principal.
    pub principal: Name,
    /// Always `operator`.
    pub role: Role,
}

/// The audited note of a login given to a principal (`verdict.db-login/v1`), or taken back
/// (`verdict.db-login-taken/v1`). On PostgreSQL `principal_login` appends it itself, as the
/// operator and in the same transaction as the change, so no login is given or taken back
/// without one; the password is never in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoginNote {
    /// [`LOGIN_NOTE_SCHEMA`], or [`LOGIN_TAKEN_NOTE_SCHEMA`] for a login taken back.
    pub schema: String,
    /// The principal whose login was given or taken back.
    pub principal: Name,
    /// Its database identity.
    pub db_role: String,
    /// The operator who changed it.
    pub by: LoginGiver,
    /// The database's clock when it was changed.
    pub at: Timestamp,
}

/// The name of the one clock pointer.
pub const CLOCK_POINTER: &str = "store";

/// Which clock a store keeps. It is chosen when the store is initialised (before its first
/// principal), recorded as an audited pointer change, and never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StoreClock {
    /// The system clock (on PostgreSQL, the database server's clock). No caller supplies a time.
    System,
    /// A manual clock, for tests and simulations: the time is whatever the caller sets, and
    /// the store says so wherever it reports its state.
    Manual,
}

impl StoreClock {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Manual => "manual",
        }
    }
}

/// The value of the clock pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClockSetting {
    /// The clock the store keeps.
    pub clock: StoreClock,
}

/// A principal: its name, role and the SHA-256 of its token. The token itself is never stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrincipalRecord {
    /// Principal name.
    pub name: Name,
    /// The role it acts in.
    pub role: Role,
    /// `sha256:` of the token's bytes (see [`token_sha256`]).
    pub token_sha256: Digest,
}

/// A change of a principal's token (schema version 30): from this change on, the principal's
/// one token is the one hashed to `token_sha256`, or none at all (a revocation). The change
/// before it (or, for the first, the principal's own record) named the token it retires.
/// Numbered from 1 per principal; the key is `<principal>#<n>`, so two changes racing from
/// the same state cannot both be stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CredentialChange {
    /// Whose token changes.
    pub principal: Name,
    /// Which change of the principal's token this is, from 1.
    pub n: u64,
    /// `sha256:` of the token it holds from now on; none after a revocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256: Option<Digest>,
    /// When, at the store's time.
    pub changed_at: Timestamp,
    /// Why (at most 1024 characters).
    pub reason: String,
}

/// The key of a principal's `n`th change of token.
#[must_use]
pub fn credential_change_key(principal: &str, n: u64) -> String {
    format!("{principal}#{n}")
}

/// The digest under which a token is stored: plain SHA-256 of its bytes.
#[must_use]
pub fn token_sha256(token: &str) -> Digest {
    verdict_core::digest::raw(token.as_bytes())
}

/// What a grant covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// One execution.
    Execution,
    /// Every execution of a mission.
    Mission,
}

/// The scope of a grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantScope {
    /// Execution or mission.
    pub kind: ScopeKind,
    /// Its id.
    pub id: Name,
}

/// Read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    /// May read the scope.
    Read,
    /// May read and append within the scope.
    Write,
}

/// A grant of access to a principal. Immutable; revoked by appending a [`Revocation`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantRecord {
    /// Grant id.
    pub grant_id: Name,
    /// Who it is granted to.
    pub principal: Name,
    /// What it covers.
    pub scope: GrantScope,
    /// Read or write.
    pub access: Access,
    /// When it lapses.
    pub expires_at: Timestamp,
}

/// The revocation of a grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Revocation {
    /// The grant revoked.
    pub grant_id: Name,
    /// When.
    pub revoked_at: Timestamp,
    /// Why (at most 1024 characters).
    pub reason: String,
}

/// A verifier run as admitted: which verifier, which class, for which request, subject and
/// generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunAdmission {
    /// Run id (the `verifier.run` of its results).
    pub run_id: Name,
    /// The request it serves.
    pub request_digest: Digest,
    /// The subject it verifies.
    pub subject_digest: Digest,
    /// The verifier principal admitted.
    pub verifier: Name,
    /// The verifier class.
    pub class: Id,
    /// The execution generation it was admitted for.
    pub admitted_generation: u64,
}

/// A status a run moves to after admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The verifier started.
    Started,
    /// It returned a result (terminal).
    Completed,
    /// It could not (terminal; the event names why).
    Unavailable,
    /// It was cancelled (terminal).
    Cancelled,
}

impl RunStatus {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Completed => "completed",
            Self::Unavailable => "unavailable",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether no status may follow.
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        !matches!(self, Self::Started)
    }
}

/// One status transition of a run, numbered from 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunEvent {
    /// The run.
    pub run_id: Name,
    /// Position in the run's history, from 1.
    pub n: u64,
    /// New status.
    pub status: RunStatus,
    /// Why unavailable (required for `unavailable`, refused otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<UnavailableReason>,
}

/// One change of a pointer: its name, new revision, and the values before and after (canonical
/// JSON, `null` for none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PointerChange {
    /// `execution`, `gate` or `lease`.
    pub pointer: String,
    /// Pointer name.
    pub name: String,
    /// The revision this change creates (from 1).
    pub revision: u64,
    /// Value before.
    pub old: Value,
    /// Value after.
    pub new: Value,
}

/// Schema of a gate evaluation record.
pub const EVALUATION_SCHEMA: &str = "verdict.evaluation-record/v1";

/// What a denial names instead of a principal when no principal could be authenticated.
pub const UNAUTHENTICATED: &str = "unauthenticated";

/// A finding an evaluation read, by id and version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindingRef {
    /// Finding id.
    pub id: Id,
    /// Its version.
    pub version: u64,
}

/// Exactly which stored items one gate evaluation read, and at which `now`: enough to rebuild
/// its bundle from the store and replay the decision byte for byte. Every list is sorted and
/// free of duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluationRecord {
    /// Always [`EVALUATION_SCHEMA`].
    pub schema: String,
    /// The evaluation key of the decision.
    pub evaluation_key: Digest,
    /// The subject evaluated.
    pub subject_digest: Digest,
    /// The policy applied.
    pub policy_digest: Digest,
    /// The `now` the Gate was given.
    pub now: Timestamp,
    /// Check evidence, by digest.
    pub evidence: Vec<Digest>,
    /// Counted verification results, by digest.
    pub verifications: Vec<Digest>,
    /// Human decisions, by digest.
    pub human_decisions: Vec<Digest>,
    /// Prior blocking findings, by id and version.
    pub prior_findings: Vec<FindingRef>,
}

/// One refused action. A denial with no `role` is an attempt no principal could be
/// authenticated for; it names [`UNAUTHENTICATED`] and at most a short fingerprint of the token
/// offered, never the token or its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DenialRecord {
    /// Random hex, so a refusal repeated word for word is still a row of its own.
    pub nonce: String,
    /// The principal refused, or [`UNAUTHENTICATED`].
    pub principal: String,
    /// Its role, when it was authenticated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The stable error code (`permission_denied`, `unauthenticated`, ...).
    pub code: String,
    /// What was attempted.
    pub action: String,
    /// The refusal as reported.
    pub message: String,
    /// The `now` of the attempt.
    pub at: Timestamp,
    /// For an unauthenticated attempt with a token: 8 hex digits of a domain-separated hash of
    /// it, enough to tell repeated attempts apart and useless to recover the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_fingerprint: Option<String>,
}

/// The fingerprint a denial may carry for a token no principal holds: the first 8 hex digits of
/// a hash under a domain of its own, so it matches no prefix of a stored token hash.
#[must_use]
pub fn token_fingerprint(token: &str) -> String {
    let d = row_digest("store.token-fingerprint", token.as_bytes());
    d.as_str()
        .trim_start_matches("sha256:")
        .chars()
        .take(FINGERPRINT_LEN)
        .collect()
}

const FINGERPRINT_LEN: usize = 8;

/// The record of a stored blob: which bytes (their raw digest, which is also the row's key),
/// how many, of which media type, who put them first and when, on the store's clock. The
/// bytes themselves are kept beside the record, and `audit verify` hashes them again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlobRecord {
    /// `sha256:` and the lowercase hex SHA-256 of the bytes (a raw digest).
    pub digest: Digest,
    /// The bytes' length.
    pub size: u64,
    /// The media type given when the bytes were put, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The principal that put the bytes first.
    pub writer: Name,
    /// When, on the store's clock.
    pub stored_at: Timestamp,
}

/// Checks a blob's media type: 1 to [`MAX_MEDIA_TYPE_CHARS`] visible ASCII characters or
/// spaces, a type and a subtype (`text/plain; charset=utf-8`).
pub fn check_media_type(media_type: &str) -> Result<(), String> {
    let n = media_type.chars().count();
    if !(1..=MAX_MEDIA_TYPE_CHARS).contains(&n) {
        return Err(format!(
            "a media type of {n} characters is not 1 to {MAX_MEDIA_TYPE_CHARS} characters"
        ));
    }
    if !media_type
        .bytes()
        .all(|b| b == b' ' || b.is_ascii_graphic())
    {
        return Err(format!(
            "media type {media_type:?} holds a character other than visible ASCII or a space"
        ));
    }
    let essence = media_type.split(';').next().unwrap_or_default().trim();
    match essence.split_once('/') {
        Some((t, s)) if !t.is_empty() && !s.is_empty() && !s.contains('/') => Ok(()),
        _ => Err(format!(
            "media type {media_type:?} is not a type and a subtype (such as text/plain)"
        )),
    }
}

fn check_blob(b: &BlobRecord) -> Result<(), String> {
    if usize::try_from(b.size).map_or(true, |n| n > MAX_BLOB_BYTES) {
        return Err(format!(
            "a blob of {} bytes exceeds the limit of {MAX_BLOB_BYTES} bytes at /size",
            b.size
        ));
    }
    if let Some(m) = &b.media_type {
        check_media_type(m).map_err(|e| format!("{e} at /media_type"))?;
    }
    Ok(())
}

/// `digest(domain, body)`: SHA-256 over `"verdict:" + domain + ":v1" + 0x00 + body`.
#[must_use]
pub fn row_digest(domain: &str, body: &[u8]) -> Digest {
    let mut h = Sha256::new();
    h.update(b"verdict:");
    h.update(domain.as_bytes());
    h.update(b":v1\0");
    h.update(body);
    Digest::from_sha256(&h.finalize())
}

/// The key a body is stored under in `table`, after checking the body is canonical JSON of
/// the table's type. Returns the key and the body's digest.
pub fn key_of(table: Table, body: &[u8]) -> Result<(String, Digest), String> {
    if body.len() > MAX_BODY_BYTES {
        return Err(format!(
            "body of {} bytes exceeds {MAX_BODY_BYTES}",
            body.len()
        ));
    }
    let value = verdict_core::json::parse(body).map_err(|e| e.to_string())?;
    if canonical::to_vec(&value) != body {
        return Err("body is not in canonical form".into());
    }
    let digest = row_digest(table.domain(), body);
    let key = key_of_value(table, &value, &digest)?;
    Ok((key, digest))
}

/// [`key_of`] for a body already known to be the canonical form of `value` and to hash to
/// `digest`: decodes `value` as the table's type and derives the key.
pub fn key_of_value(table: Table, value: &Value, digest: &Digest) -> Result<String, String> {
    let key = match table {
        Table::Principals => decode::<PrincipalRecord>(value)?.name.to_string(),
        Table::Grants => decode::<GrantRecord>(value)?.grant_id.to_string(),
        Table::GrantRevocations => {
            let r = decode::<Revocation>(value)?;
            check_reason(&r.reason)?;
            r.grant_id.to_string()
        }
        Table::CredentialChanges => {
            let c = decode::<CredentialChange>(value)?;
            check_reason(&c.reason)?;
            if c.n == 0 {
                return Err("credential changes are numbered from 1".into());
            }
            credential_change_key(c.principal.as_str(), c.n)
        }
        Table::VerifierRuns => decode::<RunAdmission>(value)?.run_id.to_string(),
        Table::RunEvents => {
            let e = decode::<RunEvent>(value)?;
            check_run_event(&e)?;
            run_event_key(e.run_id.as_str(), e.n)
        }
        Table::PointerChanges => {
            let c = decode::<PointerChange>(value)?;
            if PointerKind::from_name(&c.pointer).is_none() || c.revision == 0 {
                return Err(format!(
                    "pointer change names pointer {:?} revision {}",
                    c.pointer, c.revision
                ));
            }
            pointer_change_key(&c.pointer, &c.name, c.revision)
        }
        Table::Subjects => doc_key::<Subject>(value, digest)?,
        Table::Policies => doc_key::<Policy>(value, digest)?,
        Table::CheckEvidence => doc_key::<CheckEvidence>(value, digest)?,
        Table::VerificationRequests => {
            check_request(value)?;
            digest.to_string()
        }
        Table::VerificationResults => {
            let r = decode::<VerificationResult>(value)?;
            check_result(&r)?;
            digest.to_string()
        }
        Table::Findings => {
            let f = decode::<Finding>(value)?;
            finding_key(f.id.as_str(), f.version)
        }
        Table::HumanDecisions => doc_key::<HumanDecision>(value, digest)?,
        Table::GateEvaluations => {
            check_evaluation(&decode::<EvaluationRecord>(value)?)?;
            digest.to_string()
        }
        Table::Denials => {
            check_denial(&decode::<DenialRecord>(value)?)?;
            digest.to_string()
        }
        Table::Blobs => {
            let b = decode::<BlobRecord>(value)?;
            check_blob(&b)?;
            b.digest.to_string()
        }
        Table::BlobHolders => {
            check_blob(&decode::<BlobRecord>(value)?)?;
            digest.to_string()
        }
        Table::GateDecisions => {
            let d = decode::<GateDecision>(value)?;
            match d.evaluation_key {
                Some(k) => k.to_string(),
                None => return Err("a stored gate decision needs an evaluation_key".into()),
            }
        }
    };
    Ok(key)
}

fn decode<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, String> {
    contracts::decode_plain::<T>(value).map_err(|e| e.to_string())
}

fn doc_key<T: serde::de::DeserializeOwned>(
    value: &Value,
    digest: &Digest,
) -> Result<String, String> {
    decode::<T>(value)?;
    Ok(digest.to_string())
}

/// The key of a finding version.
#[must_use]
pub fn finding_key(id: &str, version: u64) -> String {
    format!("{id}@{version}")
}

/// The key of a run event.
#[must_use]
pub fn run_event_key(run_id: &str, n: u64) -> String {
    format!("{run_id}#{n}")
}

/// The key of a pointer change.
#[must_use]
pub fn pointer_change_key(pointer: &str, name: &str, revision: u64) -> String {
    format!("{pointer}:{revision}:{name}")
}

fn check_reason(reason: &str) -> Result<(), String> {
    if reason.chars().count() > 1024 {
        return Err("revocation reason is longer than 1024 characters".into());
    }
    Ok(())
}

fn check_run_event(e: &RunEvent) -> Result<(), String> {
    if e.n == 0 {
        return Err("run events are numbered from 1".into());
    }
    match (e.status, e.reason) {
        (RunStatus::Unavailable, None) => Err("an unavailable run event needs a reason".into()),
        (RunStatus::Unavailable, Some(_)) | (_, None) => Ok(()),
        (s, Some(_)) => Err(format!("a {} run event takes no reason", s.as_str())),
    }
}

fn check_request(value: &Value) -> Result<(), String> {
    let Value::Object(map) = value else {
        return Err("a verification request is a JSON object".into());
    };
    match map.get("subject_digest") {
        None => Ok(()),
        Some(Value::String(s)) if s.parse::<Digest>().is_ok() => Ok(()),
        Some(other) => Err(format!(
            "subject_digest {other} is not a digest at /subject_digest"
        )),
    }
}

fn check_evaluation(r: &EvaluationRecord) -> Result<(), String> {
    if r.schema != EVALUATION_SCHEMA {
        return Err(format!(
            "schema {:?} is not {EVALUATION_SCHEMA} at /schema",
            r.schema
        ));
    }
    for (name, list) in [
        ("evidence", &r.evidence),
        ("verifications", &r.verifications),
        ("human_decisions", &r.human_decisions),
    ] {
        if list
            .windows(2)
            .any(|w| matches!(w, [a, b] if a.as_str() >= b.as_str()))
        {
            return Err(format!("/{name} is not sorted or repeats a digest"));
        }
    }
    if r.prior_findings
        .windows(2)
        .any(|w| matches!(w, [a, b] if (a.id.as_str(), a.version) >= (b.id.as_str(), b.version)))
    {
        return Err("/prior_findings is not sorted or repeats a finding".into());
    }
    Ok(())
}

fn check_denial(d: &DenialRecord) -> Result<(), String> {
    let hex = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    if !(16..=64).contains(&d.nonce.len()) || !hex(&d.nonce) {
        return Err("nonce is not 16-64 lowercase hex digits at /nonce".into());
    }
    if !verdict_core::contracts::primitives::is_printable_name(&d.principal) {
        return Err("principal is not 1-256 printable characters at /principal".into());
    }
    if d.role.is_none() && d.principal != UNAUTHENTICATED {
        return Err(format!(
            "a denial without a role names {UNAUTHENTICATED:?}, not a principal, at /principal"
        ));
    }
    if !(1..=64).contains(&d.code.len())
        || !d.code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    {
        return Err("code is not 1-64 characters a-z and _ at /code".into());
    }
    if !(1..=1024).contains(&d.action.chars().count()) {
        return Err("action is not 1-1024 characters at /action".into());
    }
    if d.message.chars().count() > 4096 {
        return Err("message is longer than 4096 characters at /message".into());
    }
    match &d.token_fingerprint {
        None => Ok(()),
        Some(_) if d.role.is_some() => {
            Err("only an unauthenticated denial carries a token fingerprint".into())
        }
        Some(f) if f.len() == FINGERPRINT_LEN && hex(f) => Ok(()),
        Some(_) => Err(format!(
            "token_fingerprint is not {FINGERPRINT_LEN} lowercase hex digits at /token_fingerprint"
        )),
    }
}

fn check_result(r: &VerificationResult) -> Result<(), String> {
    use verdict_core::contracts::VerificationStatus;
    match (r.status, r.unavailable_reason) {
        (VerificationStatus::Unavailable, None) => {
            Err("an unavailable result needs unavailable_reason at /unavailable_reason".into())
        }
        (VerificationStatus::Completed, Some(_)) => {
            Err("a completed result takes no unavailable_reason at /unavailable_reason".into())
        }
        _ => Ok(()),
    }
}

/// Canonical JSON text of a serialisable record.
pub(crate) fn canonical_text<T: Serialize>(record: &T) -> Result<String, String> {
    let value = serde_json::to_value(record).map_err(|e| e.to_string())?;
    let text = String::from_utf8(canonical::to_vec(&value)).map_err(|e| e.to_string())?;
    // No record holds U+0000 on any backend: PostgreSQL could not store it, and SQLite must
    // not take what PostgreSQL refuses.
    if text.contains("\\u0000")
        && let Some(at) = verdict_core::json::nul_pointer(&value)
    {
        return Err(format!("U+0000 is not allowed in a record, at {at:?}"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_fields_are_held_to_their_bounds() {
        let name = |n: usize| "é".repeat(n);
        assert!(
            check_audit_fields(&name(256), &"k".repeat(MAX_KEY_CHARS), Some(&name(256))).is_ok()
        );
        assert!(check_audit_fields("p", "k", None).is_ok());
        for (principal, key, correlation, says) in [
            (
                String::new(),
                "k".to_owned(),
                None,
                "a principal of 0 characters",
            ),
            (
                name(257),
                "k".to_owned(),
                None,
                "a principal of 257 characters",
            ),
            ("p".to_owned(), String::new(), None, "a key of 0 characters"),
            (
                "p".to_owned(),
                "k".repeat(321),
                None,
                "a key of 321 characters",
            ),
            (
                "p".to_owned(),
                "k".to_owned(),
                Some(name(257)),
                "a correlation of 257 characters",
            ),
        ] {
            let err = check_audit_fields(&principal, &key, correlation.as_deref()).unwrap_err();
            assert!(err.contains(says), "{err}");
        }
    }

    #[test]
    fn derived_columns_read_what_the_routines_write() {
        let body = serde_json::json!({
            "execution": {"id": "ex-1", "generation": 3},
            "subject_digest": null,
            "n": "7",
            "outcome": {"nested": true},
            "flag": false,
        });
        let col = |path: &'static [&'static str], integer: bool| DerivedColumn {
            column: "c",
            path,
            integer,
        };
        let value = |s: &str| Derivation::Value(Some(s.to_owned()));
        assert_eq!(
            col(&["execution", "id"], false).derive(&body),
            value("ex-1")
        );
        assert_eq!(
            col(&["execution", "generation"], true).derive(&body),
            value("3")
        );
        assert_eq!(
            col(&["subject_digest"], false).derive(&body),
            Derivation::Value(None)
        );
        assert_eq!(
            col(&["missing", "x"], false).derive(&body),
            Derivation::Value(None)
        );
        assert_eq!(col(&["n"], true).derive(&body), value("7"));
        assert_eq!(col(&["flag"], false).derive(&body), value("false"));
        assert_eq!(col(&["outcome"], false).derive(&body), Derivation::Unknown);
        assert_eq!(col(&["flag"], true).derive(&body), Derivation::Unknown);
    }
}
