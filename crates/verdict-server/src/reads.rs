//! Reads the command line makes over the network that have no other home: the gates and their
//! current policies, a stored decision replayed, and the digests a subject names with whether
//! their bytes are stored.

use crate::AppState;
use crate::auth::Caller;
use crate::page::{ListQuery, PageQuery, paginate};
use crate::problem::{ApiError, Problem};
use crate::routes::{Segment, stored_decision};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use verdict_core::digest::Digest;
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

/// The digests a subject names.
#[derive(Debug, Serialize, ToSchema)]
pub struct SubjectBlobsOut {
    /// Each digest the subject names (its objective, resources and check definitions), with
    /// whether bytes are stored under it.
    #[schema(value_type = Vec<Object>)]
    pub items: Vec<SubjectBlob>,
}

/// The digests a subject names and whether their bytes are stored, for whoever may read the
/// subject's execution.
#[utoipa::path(get, path = "/v1/subjects/{digest}/blobs", tag = "blobs",
    params(("digest" = String, Path, description = "The subject's digest (sha256:...)")),
    responses(
        (status = 200, description = "What the subject names", body = SubjectBlobsOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn subject_blobs(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(digest): Segment,
) -> Result<Json<SubjectBlobsOut>, ApiError> {
    let items = state.engine.subject_blobs(&caller, &digest).await?;
    Ok(Json(SubjectBlobsOut { items }))
}
