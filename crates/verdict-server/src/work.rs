//! Executions and the verifiers' work on them: executions (list, show with the head's `ETag`),
//! verifier runs (admit, show, list, cancel) and results.

use crate::AppState;
use crate::admin::Reason;
use crate::auth::Caller;
use crate::body::StrictJson;
use crate::etag;
use crate::page::{ListQuery, PageQuery, paginate};
use crate::problem::{ApiError, Problem};
use crate::routes::{ExecutionId, Segment};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use verdict_core::digest::Digest;
use verdict_engine::{Cancellation, ExecutionView, FindingView, RunContext, RunDetail};

/// One subject an execution had.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SubjectOut {
    /// Its digest.
    #[schema(value_type = String)]
    pub subject_digest: Digest,
    /// Its generation.
    pub generation: u64,
    /// Its producer.
    pub producer: String,
}

/// An execution: its current subject and, when shown alone, every subject it had.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ExecutionOut {
    /// Execution id.
    pub execution: String,
    /// Current subject.
    #[schema(value_type = String)]
    pub subject_digest: Digest,
    /// Its generation.
    pub generation: u64,
    /// Every subject put for it, oldest first (empty in a listing).
    pub subjects: Vec<SubjectOut>,
}

impl From<ExecutionView> for ExecutionOut {
    fn from(e: ExecutionView) -> Self {
        Self {
            execution: e.execution,
            subject_digest: e.subject_digest,
            generation: e.generation,
            subjects: e
                .subjects
                .into_iter()
                .map(|s| SubjectOut {
                    subject_digest: s.subject_digest,
                    generation: s.generation,
                    producer: s.producer.to_string(),
                })
                .collect(),
        }
    }
}

/// A page of executions.
#[derive(Debug, Serialize, ToSchema)]
pub struct ExecutionPage {
    /// The executions the caller may read.
    pub items: Vec<ExecutionOut>,
    /// The next page, when there is one.
    pub next: Option<String>,
}

/// One status change of a run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunEventOut {
    /// `started`, `completed`, `unavailable` or `cancelled`.
    pub status: String,
    /// Why, for `unavailable`.
    pub reason: Option<String>,
}

/// A verifier run.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RunOut {
    /// Run id.
    pub run_id: String,
    /// Verifier principal.
    pub verifier: String,
    /// Verifier class.
    pub class: String,
    /// The request it serves.
    #[schema(value_type = String)]
    pub request_digest: Digest,
    /// The subject it verifies.
    #[schema(value_type = String)]
    pub subject_digest: Digest,
    /// The generation it was admitted for.
    pub generation: u64,
    /// Its statuses in order.
    pub events: Vec<RunEventOut>,
}

impl From<RunDetail> for RunOut {
    fn from(r: RunDetail) -> Self {
        Self {
            run_id: r.run_id.to_string(),
            verifier: r.verifier.to_string(),
            class: r.class,
            request_digest: r.request_digest,
            subject_digest: r.subject_digest,
            generation: r.generation,
            events: r
                .events
                .into_iter()
                .map(|e| RunEventOut {
                    status: e.status.to_owned(),
                    reason: e.reason.map(str::to_owned),
                })
                .collect(),
        }
    }
}

/// A page of runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunPage {
    /// The runs, in admission order.
    pub items: Vec<RunOut>,
    /// The next page, when there is one.
    pub next: Option<String>,
}

/// `POST /v1/runs`: admit a verifier to a run of a request.
#[derive(Debug, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewRun {
    /// The request's digest (`POST /v1/requests` returned it).
    #[schema(value_type = String)]
    pub request: Digest,
    /// The verifier principal (a verifier may name only itself).
    pub verifier: String,
    /// Its class, as the policy names required verifiers.
    pub class: String,
    /// The run's id (unique).
    pub run_id: String,
}

/// An admission and its preflight.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct Admitted {
    /// Run id.
    pub run_id: String,
    /// What preflight says the decision would be without this run's result.
    pub preflight_outcome: String,
    /// Whether preflight settled it, so the run was ended at once.
    pub skipped: bool,
    /// Why.
    pub reasons: Vec<String>,
}

/// A submitted result.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct SubmittedOut {
    /// The result's digest.
    #[schema(value_type = String)]
    pub digest: Digest,
    /// Whether it counts toward the decision.
    pub counted: bool,
    /// Why not, when it does not.
    pub why_not: Option<String>,
}

/// The executions the caller may read, each with its current subject.
#[utoipa::path(get, path = "/v1/executions", tag = "lifecycle",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of executions", body = ExecutionPage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn list_executions(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ListQuery(q): ListQuery<PageQuery>,
) -> Result<(HeaderMap, Json<ExecutionPage>), ApiError> {
    let all: Vec<ExecutionOut> = state
        .engine
        .list_executions(&caller)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let page = paginate(all, |e| e.execution.as_str(), &q, "/v1/executions", &[])?;
    Ok((
        page.headers(),
        Json(ExecutionPage {
            items: page.items,
            next: page.next,
        }),
    ))
}

/// One execution with every subject it had, and its head's `ETag` for `If-Match` on
/// `POST /v1/subjects`.
#[utoipa::path(get, path = "/v1/executions/{id}", tag = "lifecycle",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "The execution", body = ExecutionOut,
            headers(("ETag" = String, description = "The current subject and generation"))),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn show_execution(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
) -> Result<(HeaderMap, Json<ExecutionOut>), ApiError> {
    let view = state.engine.show_execution(&caller, &id).await?;
    let tag = etag::of_execution(&verdict_store::ExecutionHead {
        subject_digest: view.subject_digest.clone(),
        generation: view.generation,
    });
    Ok((etag::header(&tag), Json(view.into())))
}

/// The runs of an execution, in admission order.
#[utoipa::path(get, path = "/v1/executions/{id}/runs", tag = "runs",
    params(("id" = String, Path, description = "Execution id"), PageQuery),
    responses(
        (status = 200, description = "A page of runs", body = RunPage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn list_runs(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
    ListQuery(q): ListQuery<PageQuery>,
) -> Result<(HeaderMap, Json<RunPage>), ApiError> {
    let all: Vec<RunOut> = state
        .engine
        .list_runs(&caller, &id)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let path = format!("/v1/executions/{}/runs", crate::client::segment(&id));
    let page = paginate(all, |r| r.run_id.as_str(), &q, &path, &[])?;
    Ok((
        page.headers(),
        Json(RunPage {
            items: page.items,
            next: page.next,
        }),
    ))
}

/// Admits a verifier to a run (an operator, or the verifier itself), then runs preflight.
#[utoipa::path(post, path = "/v1/runs", tag = "runs",
    request_body = NewRun,
    responses(
        (status = 201, description = "Admitted", body = Admitted),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn admit(
    State(state): State<AppState>,
    Caller(caller): Caller,
    StrictJson(body): StrictJson<NewRun>,
) -> Result<(StatusCode, Json<Admitted>), ApiError> {
    let pre = state
        .engine
        .admit(
            &caller,
            &body.request,
            &body.verifier,
            &body.class,
            &body.run_id,
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(Admitted {
            run_id: body.run_id,
            preflight_outcome: pre.outcome.as_str().to_owned(),
            skipped: pre.skipped,
            reasons: pre.reasons,
        }),
    ))
}

/// One run: its verifier may read it, and so may whoever may read its execution.
#[utoipa::path(get, path = "/v1/runs/{id}", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses(
        (status = 200, description = "The run", body = RunOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn show_run(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(id): Segment,
) -> Result<Json<RunOut>, ApiError> {
    Ok(Json(state.engine.show_run(&caller, &id).await?.into()))
}

/// A page of findings: those filed about an execution, or the versions of one finding.
#[derive(Debug, Serialize, ToSchema)]
pub struct FindingPage {
    /// Findings as their verifiers stored them (docs/spec/evidence.md), oldest first; the
    /// cursor is a version's `digest`.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<FindingView>,
    /// The next page, when there is one.
    pub next: Option<String>,
}

/// The findings filed about an execution's subjects, for whoever may read the execution.
#[utoipa::path(get, path = "/v1/executions/{id}/findings", tag = "executions",
    params(("id" = String, Path, description = "Execution id"), PageQuery),
    responses(
        (status = 200, description = "A page of its findings, oldest first", body = FindingPage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn execution_findings(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
    ListQuery(q): ListQuery<PageQuery>,
) -> Result<(HeaderMap, Json<FindingPage>), ApiError> {
    let all = state.engine.execution_findings(&caller, &id).await?;
    let path = format!("/v1/executions/{}/findings", crate::client::segment(&id));
    finding_page(all, &q, &path)
}

/// A page of findings, each keyed by its digest (the cursor), as both findings routes answer.
fn finding_page(
    all: Vec<FindingView>,
    q: &PageQuery,
    path: &str,
) -> Result<(HeaderMap, Json<FindingPage>), ApiError> {
    let keyed: Vec<(String, FindingView)> =
        all.into_iter().map(|f| (f.digest.to_string(), f)).collect();
    let page = paginate(keyed, |(key, _)| key.as_str(), q, path, &[])?;
    let headers = page.headers();
    Ok((
        headers,
        Json(FindingPage {
            items: page.items.into_iter().map(|(_, f)| f).collect(),
            next: page.next,
        }),
    ))
}

/// Every version of one finding the caller may read, a page at a time.
#[utoipa::path(get, path = "/v1/findings/{id}", tag = "executions",
    params(("id" = String, Path, description = "Finding id"), PageQuery),
    responses(
        (status = 200, description = "A page of its versions, oldest first; the cursor is a version's digest", body = FindingPage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn finding(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(id): Segment,
    ListQuery(q): ListQuery<PageQuery>,
) -> Result<(HeaderMap, Json<FindingPage>), ApiError> {
    let all = state.engine.finding_versions(&caller, &id).await?;
    let path = format!("/v1/findings/{}", crate::client::segment(&id));
    finding_page(all, &q, &path)
}

/// The context records of one run: what its model verifier was shown and what each call did.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunContextOut {
    /// The run.
    pub run_id: String,
    /// Its run-context documents (schema `verdict.run-context/v1`, `verdict schema
    /// run-context`), oldest first; only those its own verifier (or, for an
    /// operator, the engine) wrote are believed.
    #[schema(value_type = Vec<Object>)]
    pub contexts: Vec<RunContext>,
}

/// A run's context: its verifier may read it, and so may whoever may read its execution.
#[utoipa::path(get, path = "/v1/runs/{id}/context", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    responses(
        (status = 200, description = "The run's context records", body = RunContextOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn run_context(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(id): Segment,
) -> Result<Json<RunContextOut>, ApiError> {
    let contexts = state.engine.run_contexts(&caller, &id).await?;
    Ok(Json(RunContextOut {
        run_id: id,
        contexts,
    }))
}

/// Cancels a run that has not ended (operators only).
#[utoipa::path(post, path = "/v1/runs/{id}/cancel", tag = "runs",
    params(("id" = String, Path, description = "Run id")),
    request_body = Reason,
    responses(
        (status = 200, description = "The cancellation record", body = Object),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn cancel_run(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(id): Segment,
    StrictJson(body): StrictJson<Reason>,
) -> Result<Json<Cancellation>, ApiError> {
    Ok(Json(
        state.engine.cancel_run(&caller, &id, &body.reason).await?,
    ))
}

/// Submits a verifier's result for a run it was admitted to.
#[utoipa::path(post, path = "/v1/results", tag = "runs",
    request_body(content = Object, description = "A verification result (docs/spec/evidence.md)"),
    responses(
        (status = 201, description = "Stored; `counted` says whether it counts", body = SubmittedOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn submit_result(
    State(state): State<AppState>,
    Caller(caller): Caller,
    StrictJson(doc): StrictJson<Value>,
) -> Result<(StatusCode, Json<SubmittedOut>), ApiError> {
    let s = state.engine.submit_result(&caller, &doc).await?;
    Ok((
        StatusCode::CREATED,
        Json(SubmittedOut {
            digest: s.digest,
            counted: s.counted,
            why_not: s.why_not,
        }),
    ))
}
