//! The handlers: each reads its body and path, calls one engine use case and renders what it
//! returns; every time that decides authority is the store's, so no handler reads a clock. No handler decides anything the CLI would have
//! to decide again; the request and response shapes here are the API's contract, described in
//! `/openapi.json` and docs/server.md.

use crate::AppState;
use crate::auth::Caller;
use crate::body::StrictJson;
use crate::etag;
use crate::problem::{ApiError, Problem};
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use verdict_core::contracts::HumanVerdict;
use verdict_core::digest::Digest;
use verdict_engine::{Cancellation, History, Reviewed, Status};

/// The execution id of a path (`/v1/executions/{id}/...`). A path the router matched but whose
/// segment cannot be read is a problem document, not axum's plain-text refusal; one that is
/// not an execution id (a name: 1 to 256 printable characters) is refused as `invalid_input`
/// before the store is asked.
#[derive(Debug)]
pub struct ExecutionId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for ExecutionId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Segment(id) = Segment::from_request_parts(parts, state).await?;
        execution_id("the path's execution id", &id)?;
        Ok(Self(id))
    }
}

/// Refuses `id` unless it can be an execution id, naming `field`; what a store could not hold
/// (U+0000, a control character) or no execution can have never reaches the store.
pub(crate) fn execution_id(field: &str, id: &str) -> Result<(), ApiError> {
    if verdict_core::contracts::primitives::is_printable_name(id) {
        return Ok(());
    }
    Err(ApiError::request(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_input",
        format!(
            "{field} is not an execution id (1 to 256 printable characters): {:?}",
            shown(id)
        ),
    ))
}

/// At most the first 64 characters of caller-controlled text, for an error message.
fn shown(text: &str) -> String {
    let mut out: String = text.chars().take(64).collect();
    if text.chars().nth(64).is_some() {
        out.push_str("...");
    }
    out
}

/// The longest path segment any route reads (a digest is 71 characters, a name at most 256).
const MAX_SEGMENT_CHARS: usize = 1024;

/// One path segment (`{id}`, `{name}`, `{digest}`), read as text. One that is not UTF-8 once
/// percent-decoded, one holding a control character (U+0000 among them), which no id, name or
/// digest has, or one longer than any of them is refused as `invalid_input` before the store
/// is asked.
#[derive(Debug)]
pub struct Segment(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Segment {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(segment) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|e| {
                    // A route whose path does not fit this reader is the server's fault; any
                    // other refusal is of the segment sent (not UTF-8 once percent-decoded),
                    // refused as one holding a control character is.
                    let (status, code) = if e.status().is_server_error() {
                        (StatusCode::INTERNAL_SERVER_ERROR, "internal")
                    } else {
                        (StatusCode::UNPROCESSABLE_ENTITY, "invalid_input")
                    };
                    ApiError::request(
                        status,
                        code,
                        format!("the path segment cannot be read: {}", e.body_text()),
                    )
                })?;
        if segment.chars().any(char::is_control) || segment.chars().count() > MAX_SEGMENT_CHARS {
            return Err(ApiError::request(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_input",
                format!(
                    "the path segment {:?} holds a control character or is over {MAX_SEGMENT_CHARS} characters",
                    shown(&segment)
                ),
            ));
        }
        Ok(Self(segment))
    }
}

/// The digest of what was stored.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct Stored {
    /// `sha256:` and 64 hex digits.
    #[schema(value_type = String)]
    pub digest: Digest,
}

/// `POST /v1/evidence`: check evidence documents, appended in one transaction.
#[derive(Debug, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceBatch {
    /// Check evidence documents (docs/spec/evidence.md); each may carry its digest.
    #[schema(value_type = Vec<Object>)]
    pub evidence: Vec<Value>,
}

/// The digests of appended evidence, in the order given.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct EvidenceStored {
    /// One digest per document.
    #[schema(value_type = Vec<String>)]
    pub digests: Vec<Digest>,
}

/// `POST /v1/requests`: a verification request for an execution's current subject.
#[derive(Debug, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewRequest {
    /// The execution id.
    pub execution: String,
    /// The request's budget (`max_runs`, `max_total_tokens`, `max_cost`, `timeout_s`); absent
    /// or null is no budget.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub budget: Value,
    /// The capability the reliability ledger files this attempt under (absent: the subject's
    /// mission and work item kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<String>,
    /// When given, the request's jobs are enqueued in the transaction that stores it, as
    /// `POST /v1/requests/{digest}/jobs` with this body would enqueue them (an operator or the
    /// producer of the execution's current subject may); the answer lists them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<crate::jobs::NewJobs>,
}

/// What `POST /v1/requests` stored.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct RequestStored {
    /// The request's digest, its identity: `sha256:` and 64 hex digits.
    #[schema(value_type = String)]
    pub digest: Digest,
    /// Its jobs, by id, when they were asked for (`jobs` in the body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<Vec<crate::jobs::JobOut>>,
}

/// `POST /v1/executions/{id}/cancel`.
#[derive(Debug, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewCancellation {
    /// Why (never empty).
    pub reason: String,
}

/// Approve or reject.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Clears `human_required` reasons only.
    Approve,
    /// Rework.
    Reject,
}

impl From<Verdict> for HumanVerdict {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Approve => Self::Approve,
            Verdict::Reject => Self::Reject,
        }
    }
}

/// `POST /v1/human-decisions`: a person's decision on the subject and policy it reviewed, both
/// named by digest as `status` shows them; if either moved since, the decision is refused.
#[derive(Debug, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewHumanDecision {
    /// The execution id.
    pub execution: String,
    /// Approve or reject.
    pub decision: Verdict,
    /// Why (never empty).
    pub reason: String,
    /// The subject reviewed.
    #[schema(value_type = String)]
    pub subject_digest: Digest,
    /// The policy reviewed under.
    #[schema(value_type = String)]
    pub policy_digest: Digest,
    /// The evaluation key of the gate decision reviewed (as `status` and `gate run` show it):
    /// when given, the decision is refused (409) unless that evaluation is still the current
    /// one. An approval clears exactly the `human_required` reasons of the current evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub reviewed_decision: Option<Digest>,
}

/// The outcome of a gate run.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct GateRunOutcome {
    /// Whether this run stored the decision (false: an equal evaluation was stored already,
    /// and this is it).
    pub inserted: bool,
    /// The store's clock, `system` or `manual`: on `manual` the decision's time was chosen by
    /// the caller, so it is never taken for a real one.
    #[schema(value_type = String)]
    pub clock: verdict_store::StoreClock,
    /// The gate decision (docs/spec/gate.md), exactly as stored.
    #[schema(value_type = Object)]
    pub decision: Value,
}

/// Liveness and readiness.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` or `ready`.
    pub status: &'static str,
    /// The store's schema version (readiness only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_version: Option<i64>,
}

/// Puts a subject; the execution's current subject moves to it. With `If-Match`, only when the
/// execution's head is still the one tagged (`GET /v1/executions/{id}`).
#[utoipa::path(post, path = "/v1/subjects", tag = "lifecycle",
    request_body(content = Object, description = "A subject document (docs/spec/subject.md)"),
    params(("If-Match" = Option<String>, Header, description = "The execution's ETag; 412 if it moved")),
    responses(
        (status = 201, description = "Stored and current", body = Stored),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn put_subject(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    StrictJson(doc): StrictJson<Value>,
) -> Result<(StatusCode, Json<Stored>), ApiError> {
    let expected = etag::precondition(&headers)?;
    let digest = state
        .engine
        .put_subject_if(&caller, &doc, expected.as_ref())
        .await?;
    Ok((StatusCode::CREATED, Json(Stored { digest })))
}

/// Appends check evidence.
#[utoipa::path(post, path = "/v1/evidence", tag = "lifecycle",
    request_body = EvidenceBatch,
    responses(
        (status = 201, description = "Appended", body = EvidenceStored),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn add_evidence(
    State(state): State<AppState>,
    Caller(caller): Caller,
    StrictJson(batch): StrictJson<EvidenceBatch>,
) -> Result<(StatusCode, Json<EvidenceStored>), ApiError> {
    let digests = state.engine.add_evidence(&caller, &batch.evidence).await?;
    Ok((StatusCode::CREATED, Json(EvidenceStored { digests })))
}

/// Creates the verification request for an execution's current subject.
#[utoipa::path(post, path = "/v1/requests", tag = "lifecycle",
    request_body = NewRequest,
    responses(
        (status = 201, description = "Stored; the digest is the request's identity", body = RequestStored),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn create_request(
    State(state): State<AppState>,
    Caller(caller): Caller,
    StrictJson(req): StrictJson<NewRequest>,
) -> Result<(StatusCode, Json<RequestStored>), ApiError> {
    execution_id("/execution", &req.execution)?;
    let Some(jobs) = &req.jobs else {
        let digest = state
            .engine
            .create_request_for(
                &caller,
                &req.execution,
                &req.budget,
                req.capability.as_deref(),
            )
            .await?;
        return Ok((
            StatusCode::CREATED,
            Json(RequestStored { digest, jobs: None }),
        ));
    };
    let deadline = crate::jobs::deadline(jobs, "/jobs/deadline_seconds")
        .map_err(crate::jobs::unprocessable)?;
    let (digest, jobs) = state
        .engine
        .create_request_enqueued(
            &caller,
            &req.execution,
            &req.budget,
            req.capability.as_deref(),
            deadline,
        )
        .await?;
    let jobs = Some(jobs.into_iter().map(Into::into).collect());
    Ok((StatusCode::CREATED, Json(RequestStored { digest, jobs })))
}

/// Runs the Gate over the execution's current subject and stores the decision.
#[utoipa::path(post, path = "/v1/executions/{id}/gate-runs", tag = "lifecycle",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 201, description = "Decision computed and stored", body = GateRunOutcome),
        (status = 200, description = "The same evaluation was stored already", body = GateRunOutcome),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn gate_run(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
) -> Result<(StatusCode, Json<GateRunOutcome>), ApiError> {
    let run = state.engine.gate_run(&caller, &id).await?;
    let clock = state.engine.clock().await?;
    // The stored bytes, not a re-serialisation: what a client replays against.
    let decision = stored_decision(&run.bytes)?;
    if run.inserted {
        let outcome = run.decision.outcome.as_str();
        let reasons: Vec<String> = run
            .decision
            .reasons
            .iter()
            .map(|r| r.code.as_str().to_owned())
            .collect();
        state.metrics.decision(outcome, &reasons);
    }
    let status = if run.inserted {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(GateRunOutcome {
            inserted: run.inserted,
            clock,
            decision,
        }),
    ))
}

/// A stored decision's bytes as JSON. The engine wrote them, so bytes that do not read are a
/// fault of the store, never of the request.
pub(crate) fn stored_decision(bytes: &str) -> Result<Value, ApiError> {
    verdict_core::json::parse_str(bytes).map_err(|e| ApiError::StoredUnreadable {
        what: "gate decision",
        message: e.to_string(),
    })
}

/// The execution's applicable decision, or the latest and why it does not apply. An operator
/// reads any execution; anyone else only one its grants in force cover (else 403). An
/// execution no subject was put for is 404.
#[utoipa::path(get, path = "/v1/executions/{id}/status", tag = "lifecycle",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "Status with derived applicability", body = Object),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn status(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
) -> Result<Json<Status>, ApiError> {
    Ok(Json(state.engine.status(&caller, &id).await?))
}

/// Every decision and verifier run of the execution, read as the status is.
#[utoipa::path(get, path = "/v1/executions/{id}/history", tag = "lifecycle",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "Decisions oldest first, runs in admission order", body = Object),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn history(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
) -> Result<Json<History>, ApiError> {
    Ok(Json(state.engine.history(&caller, &id).await?))
}

/// Cancels an execution: no decision of it applies from now on.
#[utoipa::path(post, path = "/v1/executions/{id}/cancel", tag = "lifecycle",
    params(("id" = String, Path, description = "Execution id")),
    request_body = NewCancellation,
    responses(
        (status = 200, description = "The cancellation record", body = Object),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn cancel_execution(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
    StrictJson(body): StrictJson<NewCancellation>,
) -> Result<Json<Cancellation>, ApiError> {
    Ok(Json(
        state
            .engine
            .cancel_execution(&caller, &id, &body.reason)
            .await?,
    ))
}

/// Records a person's decision on the subject and policy it reviewed.
#[utoipa::path(post, path = "/v1/human-decisions", tag = "lifecycle",
    request_body = NewHumanDecision,
    responses(
        (status = 201, description = "Stored", body = Stored),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn decide(
    State(state): State<AppState>,
    Caller(caller): Caller,
    StrictJson(body): StrictJson<NewHumanDecision>,
) -> Result<(StatusCode, Json<Stored>), ApiError> {
    execution_id("/execution", &body.execution)?;
    let reviewed = Reviewed {
        subject_digest: body.subject_digest,
        policy_digest: body.policy_digest,
        decision_key: body.reviewed_decision,
    };
    let digest = state
        .engine
        .decide(
            &caller,
            &body.execution,
            body.decision.into(),
            &body.reason,
            &reviewed,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(Stored { digest })))
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive", body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        schema_version: None,
    })
}

/// Readiness: the store answers and its schema is the version this server runs.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "Store unreachable or at another schema version", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let found = state
        .engine
        .store()
        .schema_version()
        .await
        .map_err(|e| ApiError::Engine(e.into()))?;
    if found != verdict_store::SCHEMA_VERSION {
        return Err(ApiError::request(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_error",
            format!(
                "the store is at schema version {found}; this server needs {}",
                verdict_store::SCHEMA_VERSION
            ),
        ));
    }
    Ok(Json(Health {
        status: "ready",
        schema_version: Some(found),
    }))
}
