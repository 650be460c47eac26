//! Reads the command line makes over the network that have no other home: the gates and their
//! current policies, a stored decision replayed, the digests a subject names with whether
//! their bytes are stored, an execution's exports (JUnit, GitHub) and the reliability ledger.

use crate::AppState;
use crate::auth::Caller;
use crate::page::{ListQuery, PageQuery, paginate};
use crate::problem::{ApiError, Problem};
use crate::routes::{ExecutionId, Segment, stored_decision};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa::ToSchema;
use verdict_core::digest::Digest;
use verdict_engine::ledger::{DEFAULT_WINDOW, Ledger, Window};
use verdict_engine::{GateView, SubjectBlob};

/// A gate and its current policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GateOut {
    /// The gate's name.
    pub gate: String,
    /// Its current policy's digest.
    #[schema(value_type = String)]
    pub policy_digest: Digest,
    /// How many times its policy was set.
    pub revision: u64,
}

impl From<GateView> for GateOut {
    fn from(g: GateView) -> Self {
        Self {
            gate: g.gate,
            policy_digest: g.policy_digest,
            revision: g.revision,
        }
    }
}

/// A page of gates.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GatePage {
    /// The gates, by name.
    pub items: Vec<GateOut>,
    /// The next page, when there is one.
    pub next: Option<String>,
}

/// Every gate with a policy, and its current policy (any authenticated principal: policies
/// are what everyone is judged by).
#[utoipa::path(get, path = "/v1/gates", tag = "authority",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of gates", body = GatePage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn list_gates(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ListQuery(q): ListQuery<PageQuery>,
) -> Result<(HeaderMap, Json<GatePage>), ApiError> {
    let all: Vec<GateOut> = state
        .engine
        .list_gates(&caller)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let page = paginate(all, |g| g.gate.as_str(), &q, "/v1/gates", &[])?;
    Ok((
        page.headers(),
        Json(GatePage {
            items: page.items,
            next: page.next,
        }),
    ))
}

/// A stored decision evaluated again from its record.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Replayed {
    /// The evaluation key replayed.
    #[schema(value_type = String)]
    pub key: Digest,
    /// The decision the Gate produced again, byte for byte the stored one (docs/spec/gate.md).
    #[schema(value_type = Object)]
    pub decision: Value,
}

/// Rebuilds the bundle of a stored decision from its evaluation record and evaluates it
/// again; answers only when the bytes equal the stored ones (`replay_mismatch` otherwise). An
/// operator, or a principal holding a grant in force on the decision's subject, may.
#[utoipa::path(get, path = "/v1/gate/decisions/{key}/replay", tag = "lifecycle",
    params(("key" = String, Path, description = "The decision's evaluation key (sha256:...)")),
    responses(
        (status = 200, description = "Reproduced exactly", body = Replayed),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable, or the decision is not reproduced", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn replay(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(key): Segment,
) -> Result<Json<Replayed>, ApiError> {
    let key: Digest = key.parse().map_err(|e| {
        ApiError::request(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!("evaluation key {key:?}: {e}"),
        )
    })?;
    let run = state.engine.gate_replay(&caller, &key).await?;
    Ok(Json(Replayed {
        key,
        decision: stored_decision(&run.bytes)?,
    }))
}

/// A page of the digests a subject names.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubjectBlobsOut {
    /// Each digest the subject names (its objective, resources and check definitions, in
    /// the subject's order), with whether bytes are stored under it.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<SubjectBlob>,
    /// The next page, when there is one.
    pub next: Option<String>,
}

/// The digests a subject names and whether their bytes are stored, for whoever may read the
/// subject's execution, a page at a time.
#[utoipa::path(get, path = "/v1/subjects/{digest}/blobs", tag = "blobs",
    params(("digest" = String, Path, description = "The subject's digest (sha256:...)"), PageQuery),
    responses(
        (status = 200, description = "A page of what the subject names, in its order; the cursor is an item's position (0: the objective)", body = SubjectBlobsOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn subject_blobs(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(digest): Segment,
    ListQuery(q): ListQuery<PageQuery>,
) -> Result<(HeaderMap, Json<SubjectBlobsOut>), ApiError> {
    let all: Vec<(String, SubjectBlob)> = state
        .engine
        .subject_blobs(&caller, &digest)
        .await?
        .into_iter()
        .enumerate()
        // A subject never changes, so an item's position in it is a cursor that stays valid;
        // its names need not be unique (a resource may share a check's name, or another's).
        .map(|(i, b)| (i.to_string(), b))
        .collect();
    let path = format!("/v1/subjects/{}/blobs", crate::client::segment(&digest));
    let page = paginate(all, |(key, _)| key.as_str(), &q, &path, &[])?;
    Ok((
        page.headers(),
        Json(SubjectBlobsOut {
            items: page.items.into_iter().map(|(_, b)| b).collect(),
            next: page.next,
        }),
    ))
}

/// JUnit XML of an execution's current subject's check evidence: the engine's `junit`, the
/// same report `verdict export junit` writes.
#[utoipa::path(get, path = "/v1/executions/{id}/export/junit", tag = "executions",
    params(("id" = String, Path, description = "Execution id")),
    responses(
        (status = 200, description = "The JUnit XML report; a pinned check without evidence is an error case",
            body = String, content_type = "application/xml"),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn export_junit(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
) -> Result<Response, ApiError> {
    let xml = state.engine.junit(&caller, &id).await?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/xml; charset=utf-8"),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        xml,
    )
        .into_response())
}

/// `?head_sha=` of the GitHub export.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HeadSha {
    /// The commit the check is about (40 or 64 lowercase hex digits).
    pub head_sha: String,
}

/// The execution's applicable decision as GitHub check-run and commit-status bodies: the
/// engine's `github_payloads`, what `verdict export github` writes.
#[utoipa::path(get, path = "/v1/executions/{id}/export/github", tag = "executions",
    params(("id" = String, Path, description = "Execution id"), HeadSha),
    responses(
        (status = 200, description = "`{\"check_run\", \"commit_status\"}`; only an applicable pass is `success`", body = Object),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn export_github(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ExecutionId(id): ExecutionId,
    ListQuery(q): ListQuery<HeadSha>,
) -> Result<Response, ApiError> {
    let payloads = state
        .engine
        .github_payloads(&caller, &id, &q.head_sha)
        .await?;
    Ok(Json(payloads).into_response())
}

/// The value of the query parameter `name` (`default` when absent), refused when it is beyond
/// ±(2^53−1): the ledger echoes its window, and no JSON reader holds such a number exactly.
fn json_safe<T>(name: &str, given: Option<T>, default: T) -> Result<T, ApiError>
where
    T: Copy + TryInto<i64> + std::fmt::Display,
{
    let Some(value) = given else {
        return Ok(default);
    };
    match value.try_into() {
        Ok(n) if n <= verdict_core::json::MAX_SAFE_INTEGER => Ok(value),
        _ => Err(ApiError::request(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!(
                "{name} must be at most {} (2^53-1), not {value}",
                verdict_core::json::MAX_SAFE_INTEGER
            ),
        )),
    }
}

/// `?attempts=&days=&min_sample=` of the ledger, with the command line's defaults.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LedgerQuery {
    /// At most this many of each cohort's most recent attempts (default 100; at most 2^53-1).
    #[param(maximum = 9_007_199_254_740_991_u64)]
    pub attempts: Option<usize>,
    /// Only attempts of the last this many days (default 30; at most 2^53-1).
    #[param(maximum = 9_007_199_254_740_991_u64)]
    pub days: Option<u64>,
    /// Fewer attempts than this is insufficient evidence (default 10; at most 2^53-1).
    #[param(maximum = 9_007_199_254_740_991_u64)]
    pub min_sample: Option<usize>,
}

/// The reliability ledger of every execution (operators only: it covers every execution):
/// the engine's `ledger`, what `verdict ledger` prints (docs/ledger.md).
#[utoipa::path(get, path = "/v1/ledger", tag = "authority",
    params(LedgerQuery),
    responses(
        (status = 200, description = "The ledger: its window, and one entry per cohort", body = Object),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn ledger(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ListQuery(q): ListQuery<LedgerQuery>,
) -> Result<Json<Ledger>, ApiError> {
    let window = Window {
        attempts: json_safe("attempts", q.attempts, DEFAULT_WINDOW.attempts)?,
        days: json_safe("days", q.days, DEFAULT_WINDOW.days)?,
        min_sample: json_safe("min_sample", q.min_sample, DEFAULT_WINDOW.min_sample)?,
    };
    Ok(Json(state.engine.ledger(&caller, window).await?))
}
