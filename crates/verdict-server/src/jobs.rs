//! The workers' queue over the network: enqueue a stored request's jobs, and read the queue.
//! A platform on another machine hands a request to the workers here and reads the decision
//! back from the status route, with nobody at a shell where the store is.

use crate::AppState;
use crate::auth::Caller;
use crate::body::StrictJson;
use crate::page::{ListQuery, PageQuery, paginate};
use crate::problem::{ApiError, Problem};
use crate::routes::Segment;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use utoipa::{IntoParams, ToSchema};
use verdict_core::digest::Digest;
use verdict_store::{Job, JobFilter, JobState};

/// The longest gate deadline accepted, in seconds (ten years): past it a deadline says
/// nothing a missing one does not, and a time that far out is refused rather than overflowed.
pub const MAX_DEADLINE_SECONDS: u64 = 315_360_000;

/// One job of the queue, as `verdict jobs list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct JobOut {
    /// Its id (increasing in enqueue order).
    pub id: i64,
    /// `checks`, `verify` or `gate`.
    pub kind: String,
    /// The verification request it is for.
    #[schema(value_type = String)]
    pub request: Digest,
    /// The verifier class of a `verify` job, else empty.
    pub class: String,
    /// `ready`, `running`, `done` or `failed`.
    pub state: String,
    /// How many times it was claimed.
    pub attempts: i64,
    /// The label the last claim gave (a worker instance).
    pub holder: Option<String>,
    /// The principal of the last claim.
    pub principal: Option<String>,
    /// When the current lease lapses.
    pub lease_until: Option<String>,
    /// The fencing token of the last claim (0: never claimed).
    pub fencing: i64,
    /// Not claimable before this time (a retry's back-off).
    pub not_before: Option<String>,
    /// A gate job's deadline.
    pub deadline_at: Option<String>,
    /// What the job's completion said.
    pub outcome: Option<String>,
    /// Why its last attempt failed.
    pub last_error: Option<String>,
    /// Who enqueued it.
    pub enqueued_by: String,
    /// When it was enqueued.
    pub created_at: String,
    /// When it finished.
    pub done_at: Option<String>,
}

impl From<Job> for JobOut {
    fn from(j: Job) -> Self {
        let text = |t: Option<verdict_core::contracts::Timestamp>| t.map(|t| t.to_string());
        Self {
            id: j.id,
            kind: j.kind.as_str().to_owned(),
            request: j.request,
            class: j.class,
            state: j.state.as_str().to_owned(),
            attempts: j.attempts,
            holder: j.holder,
            principal: j.principal,
            lease_until: text(j.lease_until),
            fencing: j.fencing,
            not_before: text(j.not_before),
            deadline_at: text(j.deadline_at),
            outcome: j.outcome,
            last_error: j.last_error,
            enqueued_by: j.enqueued_by,
            created_at: j.created_at.to_string(),
            done_at: text(j.done_at),
        }
    }
}

/// A request's jobs, or a page of the queue.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobPage {
    /// The jobs, by id.
    pub items: Vec<JobOut>,
    /// The next page, when there is one.
    pub next: Option<String>,
}

/// `POST /v1/requests/{digest}/jobs`.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewJobs {
    /// Past this many seconds (from now, on the queue's clock) the gate job runs whatever the
    /// other jobs are doing; without it the gate job waits for them. 1 to 315360000.
    #[schema(minimum = 1, maximum = 315_360_000)]
    pub deadline_seconds: Option<u64>,
}

/// Enqueues a stored request's jobs: its checks (when its subject pins any), one per verifier
/// class it asks for, and the gate. An operator or the producer of the request's subject may.
/// Enqueuing again adds nothing and answers with the jobs already there.
#[utoipa::path(post, path = "/v1/requests/{digest}/jobs", tag = "jobs",
    params(("digest" = String, Path, description = "The verification request's digest (sha256:...)")),
    request_body = NewJobs,
    responses(
        (status = 200, description = "The request's jobs, by id", body = JobPage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn enqueue(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(digest): Segment,
    StrictJson(body): StrictJson<NewJobs>,
) -> Result<Json<JobPage>, ApiError> {
    let request: Digest = digest
        .parse()
        .map_err(|e| unprocessable(format!("request digest {digest:?}: {e}")))?;
    let deadline = deadline(&body, "/deadline_seconds").map_err(unprocessable)?;
    let jobs = state
        .engine
        .enqueue_request_jobs(&caller, &request, deadline)
        .await?;
    Ok(Json(JobPage {
        items: jobs.into_iter().map(Into::into).collect(),
        next: None,
    }))
}

/// The gate job's deadline `body` asks for, checked against the bounds every face keeps; a
/// refusal names `at`, where the deadline was given.
///
/// # Errors
/// A deadline outside 1 to [`MAX_DEADLINE_SECONDS`].
pub fn deadline(body: &NewJobs, at: &str) -> Result<Option<Duration>, String> {
    match body.deadline_seconds {
        None => Ok(None),
        Some(s) if (1..=MAX_DEADLINE_SECONDS).contains(&s) => Ok(Some(Duration::from_secs(s))),
        Some(s) => Err(format!(
            "{at}: deadline_seconds must be between 1 and {MAX_DEADLINE_SECONDS}, not {s}"
        )),
    }
}

/// `?request=&state=&limit=&after=` of the queue.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct JobQuery {
    /// Only the jobs of this request (its digest).
    pub request: Option<String>,
    /// Only jobs in this state: `ready`, `running`, `done` or `failed`.
    pub state: Option<String>,
    /// Items per page, 1 to 500 (default 100).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<u32>,
    /// The id of the last job already seen.
    pub after: Option<String>,
}

/// The queue, by id, as the engine lets the caller read it (operators: it names requests of
/// every execution).
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    params(JobQuery),
    responses(
        (status = 200, description = "A page of jobs", body = JobPage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ListQuery(q): ListQuery<JobQuery>,
) -> Result<(HeaderMap, Json<JobPage>), ApiError> {
    let filter = JobFilter {
        request: q
            .request
            .as_deref()
            .map(|d| {
                d.parse::<Digest>()
                    .map_err(|e| bad_query(format!("request {d:?}: {e}")))
            })
            .transpose()?,
        kind: None,
        state: q
            .state
            .as_deref()
            .map(|s| {
                s.parse::<JobState>()
                    .map_err(|e| bad_query(format!("state: {e}")))
            })
            .transpose()?,
    };
    let all: Vec<(String, JobOut)> = state
        .engine
        .jobs(&caller, &filter)
        .await?
        .into_iter()
        .map(|j| (j.id.to_string(), JobOut::from(j)))
        .collect();
    let mut extra = Vec::new();
    if let Some(r) = &q.request {
        extra.push(("request", r.as_str()));
    }
    if let Some(s) = &q.state {
        extra.push(("state", s.as_str()));
    }
    let page = paginate(
        all,
        |(id, _)| id.as_str(),
        &PageQuery {
            limit: q.limit,
            after: q.after.clone(),
        },
        "/v1/jobs",
        &extra,
    )?;
    let headers = page.headers();
    Ok((
        headers,
        Json(JobPage {
            items: page.items.into_iter().map(|(_, j)| j).collect(),
            next: page.next,
        }),
    ))
}

pub(crate) fn unprocessable(detail: String) -> ApiError {
    ApiError::request(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", detail)
}

fn bad_query(detail: String) -> ApiError {
    ApiError::request(StatusCode::BAD_REQUEST, "invalid_query", detail)
}
