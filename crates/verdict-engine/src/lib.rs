//! # verdict-engine: the verification lifecycle
//!
//! One job: run verification as a system, combining the store, the core Gate, the checks and
//! the verifiers while enforcing docs/spec/applicability.md and authority.md end to end. Every action is taken as an
//! authenticated [`Principal`] and checked against its role and grants; every refusal is
//! audited; decisions are only ever computed here, from the store, and replay byte for byte.
//!
//! The engine is the one application layer: every use case is a method of [`Engine`], and the
//! faces (the CLI, the HTTP server, future workers) only parse, call one use case and render.
//! The engine does no file I/O for them: it takes bytes and typed values.
//!
//! Use cases:
//! - principals and tokens: [`Engine::init`], [`Engine::authenticate`],
//!   [`Engine::add_principal`], [`Engine::revoke_token`], [`Engine::rotate_token`]; grants: [`Engine::grant`], [`Engine::revoke`]; the gate's
//!   policy: [`Engine::set_policy`]; the store's manual clock: [`Engine::set_manual_time`].
//! - work and evidence: [`Engine::put_subject`], [`Engine::add_evidence`] (check evidence as a
//!   runner files it), [`scaffold`] (a subject built from specs and bytes, a result template);
//!   the bytes a subject names: [`Engine::put_blob`], [`Engine::blob`], [`Engine::blob_info`],
//!   [`Engine::subject_blobs`].
//! - verification: [`Engine::create_request`], [`Engine::admit`] with preflight,
//!   [`Engine::run_model`] with any [`ModelVerifier`], [`Engine::record_run_context`],
//!   [`Engine::submit_result`], and the whole of it for the model verifier in one call:
//!   [`Engine::verify_request`] (admission, judge, context note, submission, budget caps and
//!   refused results, per class).
//! - decisions: [`Engine::decide`] (a human's, pinned to what was reviewed, [`Reviewed`]),
//!   [`Engine::gate_run`], [`Engine::gate_replay`], cancellation ([`Engine::cancel_execution`],
//!   [`Engine::cancel_run`]), [`attest`]ations.
//! - workers: [`Engine::enqueue_request_jobs`] (a request's checks, verify and gate jobs in
//!   the store's queue) and [`Engine::work_one`] (claim one job of a worker role, perform it
//!   through the use cases above as the caller, finish it with the claim's fencing token).
//! - reads: [`Engine::status`] and [`Engine::history`] with derived applicability, the list and
//!   show reads ([`Engine::list_principals`], [`Engine::show_run`], ...), the [`ledger`].
//! - review: what the review pages show ([`review`]): [`Engine::review_queue`],
//!   [`Engine::board`], [`Engine::subject_review`], [`Engine::finding_lineage`],
//!   [`Engine::reliability_series`], and [`Engine::review_decide`] (a decision, then a gate run).
//!
//! The engine's own documents are typed ([`documents`]): [`VerificationRequest`],
//! [`AdmissionNote`] and [`RunContext`], with schemas derived from the same types.
//! [`EngineError`]: typed refusals with stable codes (`permission_denied`,
//! `self_verification_denied`, ...).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use verdict_engine::Engine;
//! let store = verdict_store::open(&verdict_store::Location::resolve(None)?).await?;
//! let engine = Engine::new(store, verdict_engine::DEFAULT_GATE);
//! // Only on an empty store; the token is shown once and stored only as its SHA-256.
//! let token = engine.init("ops", verdict_store::StoreClock::System).await?;
//! // A wrong token is refused, and the attempt is recorded as a denial. Every time that
//! // decides authority is the store's clock, never the caller's.
//! let ops = engine.authenticate(&token).await?;
//! // Reads are the caller's too: an operator reads every execution, anyone else only those
//! // its grants in force cover; a refused read is recorded as a denial.
//! let status = engine.status(&ops, "ex-1").await?;
//! assert!(status.applicable.is_none());
//! # Ok(()) }
//! ```

mod applicability;
pub mod attest;
mod blobs;
mod budget;
mod cancel;
pub mod documents;
mod engine;
pub mod error;
pub mod events;
mod findings;
mod gate_cache;
mod gate_run;
pub mod ledger;
mod ledger_read;
mod lineage;
mod listing;
mod notes;
pub mod precondition;
mod principal_cache;
pub mod review;
mod runner_kit;
mod runs;
pub mod scaffold;
mod subjects;
pub mod token;
mod verify;
pub mod webhooks;
mod workers;

pub use applicability::{DecisionView, History, NotApplicable, RunView, Status};
pub use blobs::{Blob, BlobInfo, BlobPut, NamedBy, SubjectBlob};
pub use budget::RequestBudget;
pub use documents::{
    ADMISSION_SCHEMA, AdmissionNote, AdmissionSchema, DOCUMENT_NAMES, PriorBlocker, REQUEST_SCHEMA,
    RequestSchema, VerificationRequest, document_schema,
};
pub use engine::{DEFAULT_GATE, ENGINE_PRINCIPAL, Engine, Principal};
pub use error::{EngineError, Result};
pub use findings::FindingView;
pub use gate_cache::GATE_CACHE_ENTRIES;
pub use gate_run::{Collected, EVALUATION_RECORD_SCHEMA, GateRun};
pub use listing::{
    ExecutionView, GateView, GrantView, PrincipalView, RunDetail, RunEventView, SubjectEntry,
};
pub use notes::{
    CANCELLATION_SCHEMA, Cancellation, Cancelled, RESULT_REFUSAL_SCHEMA, RUN_TAKEOVER_SCHEMA,
    Requester, ResultRefusal, RunTakeover,
};
pub use precondition::Precondition;
pub use principal_cache::PRINCIPAL_CACHE_BOUND;
pub use runner_kit::{CheckDefinitions, ProbeChecks};
pub use runs::{
    ModelVerifier, Preflight, RUN_CONTEXT_SCHEMA, RunContext, RunContextSchema, RunOutcome,
    RunReport, Submitted, VerifyTask,
};
pub use subjects::Reviewed;
pub use verify::{
    ClassOutcome, ClassRun, ClassSource, InputError, Judged, VerifyError, VerifyInputs,
    VerifyOptions,
};
pub use workers::{
    ChecksKit, ChecksRun, DEFAULT_BACK_OFF, JobFailure, MAX_ATTEMPTS, QueueDepth, VerifierKit,
    WorkOptions, Worked, WorkerRole,
};
