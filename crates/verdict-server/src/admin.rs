//! Who may act and under which policy: principals, grants, the gate's policy and the audit
//! walk. Each handler calls one engine use case as the caller; the engine decides who may, and
//! records every refusal.

use crate::AppState;
use crate::auth::Caller;
use crate::body::StrictJson;
use crate::etag;
use crate::page::{GrantQuery, ListQuery, PageQuery, paginate};
use crate::problem::{ApiError, Problem};
use crate::routes::Segment;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use verdict_core::contracts::{Role, Timestamp};
use verdict_core::digest::Digest;
use verdict_engine::{GrantView, PrincipalView};
use verdict_store::{Access, ScopeKind};

/// A role (docs/spec/authority.md).
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoleName {
    /// Manages principals, grants and policies.
    Operator,
    /// Produces the work being verified.
    Producer,
    /// Runs deterministic checks.
    Runner,
    /// Reviews the work independently.
    Verifier,
    /// Approves or rejects.
    Human,
}

impl From<RoleName> for Role {
    fn from(r: RoleName) -> Self {
        match r {
            RoleName::Operator => Self::Operator,
            RoleName::Producer => Self::Producer,
            RoleName::Runner => Self::Runner,
            RoleName::Verifier => Self::Verifier,
            RoleName::Human => Self::Human,
        }
    }
}

/// `POST /v1/principals`.
#[derive(Debug, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewPrincipal {
    /// Its name.
    pub name: String,
    /// Its role, for good.
    pub role: RoleName,
}

/// A principal (never its token or the token's hash).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PrincipalOut {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
}

impl From<PrincipalView> for PrincipalOut {
    fn from(p: PrincipalView) -> Self {
        Self {
            name: p.name.to_string(),
            role: p.role.as_str().to_owned(),
        }
    }
}

/// A principal just added, with its token: shown this once, stored only as its SHA-256.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct PrincipalCreated {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// Its bearer token.
    pub token: String,
}

/// One principal and its grants.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PrincipalDetail {
    /// Its name.
    pub name: String,
    /// Its role.
    pub role: String,
    /// Every grant it was given, in force or not.
    pub grants: Vec<GrantOut>,
}

/// A page of principals.
#[derive(Debug, Serialize, ToSchema)]
pub struct PrincipalPage {
    /// The principals, oldest first.
    pub items: Vec<PrincipalOut>,
    /// The next page, when there is one.
    pub next: Option<String>,
}

/// What a grant covers.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeName {
    /// One execution.
    Execution,
    /// Every execution of a mission.
    Mission,
}

/// Read or write.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessName {
    /// Read.
    Read,
    /// Read and write.
    Write,
}

/// `POST /v1/grants`.
#[derive(Debug, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewGrant {
    /// The grant's id (unique).
    pub grant_id: String,
    /// Who receives it.
    pub principal: String,
    /// An execution or a mission.
    pub scope: ScopeName,
    /// The execution or mission id.
    pub scope_id: String,
    /// Read or write.
    pub access: AccessName,
    /// When it lapses (RFC 3339, UTC), after the store's now.
    pub expires_at: String,
}

/// A grant and whether it is in force at the store's now.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct GrantOut {
    /// Its id.
    pub grant_id: String,
    /// Who holds it.
    pub principal: String,
    /// `execution` or `mission`.
    pub scope: String,
    /// The execution or mission id.
    pub scope_id: String,
    /// `read` or `write`.
    pub access: String,
    /// When it lapses.
    pub expires_at: String,
    /// When it was revoked, if it was.
    pub revoked_at: Option<String>,
    /// Why it was revoked.
    pub revoked_because: Option<String>,
    /// Not expired and not revoked.
    pub in_force: bool,
}

impl From<GrantView> for GrantOut {
    fn from(g: GrantView) -> Self {
        Self {
            grant_id: g.grant_id.to_string(),
            principal: g.principal.to_string(),
            scope: g.scope.to_owned(),
            scope_id: g.scope_id.to_string(),
            access: g.access.to_owned(),
            expires_at: g.expires_at.to_string(),
            revoked_at: g.revoked_at.map(|t| t.to_string()),
            revoked_because: g.revoked_because,
            in_force: g.in_force,
        }
    }
}

/// A page of grants.
#[derive(Debug, Serialize, ToSchema)]
pub struct GrantPage {
    /// The grants.
    pub items: Vec<GrantOut>,
    /// The next page, when there is one.
    pub next: Option<String>,
}

/// Why: a revocation or cancellation reason (never empty).
#[derive(Debug, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    /// Why.
    pub reason: String,
}

/// A gate's current policy.
#[derive(Debug, Serialize, ToSchema, Deserialize)]
pub struct GatePolicy {
    /// The gate.
    pub gate: String,
    /// The current policy's digest.
    #[schema(value_type = String)]
    pub policy_digest: Digest,
    /// How many times the gate's policy was set.
    pub revision: u64,
    /// The policy document (docs/spec/policy.md).
    #[schema(value_type = Object)]
    pub policy: Value,
}

/// A stored policy.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PolicyOut {
    /// Its digest.
    #[schema(value_type = String)]
    pub policy_digest: Digest,
    /// The policy document.
    #[schema(value_type = Object)]
    pub policy: Value,
}

/// The audit walk: the chain, every row re-hashed, every decision replayed.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AuditOut {
    /// The store walked, as the server names it (credentials left out).
    pub store: String,
    /// No problem found.
    pub intact: bool,
    /// Events walked.
    pub events: u64,
    /// Rows re-hashed.
    pub rows: u64,
    /// The chain's last event (`seq`, `hash`), if any.
    #[schema(value_type = Option<Object>)]
    pub head: Option<Value>,
    /// Everything found wrong.
    #[schema(value_type = Vec<Object>)]
    pub problems: Vec<Value>,
}

fn bad_input(what: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::request(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_input",
        format!("invalid {what}: {e}"),
    )
}

/// Adds a principal (operators only); its token is in the answer, once.
#[utoipa::path(post, path = "/v1/principals", tag = "authority",
    request_body = NewPrincipal,
    responses(
        (status = 201, description = "Added", body = PrincipalCreated),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn add_principal(
    State(state): State<AppState>,
    Caller(caller): Caller,
    StrictJson(body): StrictJson<NewPrincipal>,
) -> Result<(StatusCode, Json<PrincipalCreated>), ApiError> {
    let role: Role = body.role.into();
    let token = state
        .engine
        .add_principal(&caller, &body.name, role)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(PrincipalCreated {
            name: body.name,
            role: role.as_str().to_owned(),
            token,
        }),
    ))
}

/// The principals the caller may see: every one for an operator, else itself.
#[utoipa::path(get, path = "/v1/principals", tag = "authority",
    params(PageQuery),
    responses(
        (status = 200, description = "A page of principals", body = PrincipalPage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn list_principals(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ListQuery(q): ListQuery<PageQuery>,
) -> Result<(HeaderMap, Json<PrincipalPage>), ApiError> {
    let all: Vec<PrincipalOut> = state
        .engine
        .list_principals(&caller)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let page = paginate(all, |p| p.name.as_str(), &q, "/v1/principals", &[])?;
    Ok((
        page.headers(),
        Json(PrincipalPage {
            items: page.items,
            next: page.next,
        }),
    ))
}

/// One principal and its grants: any for an operator, else only the caller itself.
#[utoipa::path(get, path = "/v1/principals/{name}", tag = "authority",
    params(("name" = String, Path, description = "Principal name")),
    responses(
        (status = 200, description = "The principal and its grants", body = PrincipalDetail),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn show_principal(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(name): Segment,
) -> Result<Json<PrincipalDetail>, ApiError> {
    let (p, grants) = state.engine.show_principal(&caller, &name).await?;
    Ok(Json(PrincipalDetail {
        name: p.name.to_string(),
        role: p.role.as_str().to_owned(),
        grants: grants.into_iter().map(Into::into).collect(),
    }))
}

/// `POST /v1/principals/{name}/token/revoke` and `/rotate`: why the token changes.
#[derive(Debug, Default, Deserialize, ToSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenChange {
    /// Why (may be empty; at most 1024 characters).
    #[serde(default)]
    pub reason: String,
}

/// Revokes a principal's token (operators only): from now on it authenticates nobody. The
/// principal and its grants stay; a rotation by an operator gives it a token again.
#[utoipa::path(post, path = "/v1/principals/{name}/token/revoke", tag = "authority",
    params(("name" = String, Path, description = "Principal name")),
    request_body = TokenChange,
    responses(
        (status = 200, description = "Revoked", body = PrincipalOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn revoke_token(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(name): Segment,
    StrictJson(body): StrictJson<TokenChange>,
) -> Result<Json<PrincipalOut>, ApiError> {
    state
        .engine
        .revoke_token(&caller, &name, &body.reason)
        .await?;
    let (p, _) = state.engine.show_principal(&caller, &name).await?;
    Ok(Json(p.into()))
}

/// Replaces a principal's token with a fresh one, in the answer once; the old one is retired
/// in the same append. Operators for anyone; any other principal for itself only.
#[utoipa::path(post, path = "/v1/principals/{name}/token/rotate", tag = "authority",
    params(("name" = String, Path, description = "Principal name")),
    request_body = TokenChange,
    responses(
        (status = 200, description = "Rotated; the new token is shown only now", body = PrincipalCreated),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn rotate_token(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(name): Segment,
    StrictJson(body): StrictJson<TokenChange>,
) -> Result<Json<PrincipalCreated>, ApiError> {
    let token = state
        .engine
        .rotate_token(&caller, &name, &body.reason)
        .await?;
    let (p, _) = state.engine.show_principal(&caller, &name).await?;
    Ok(Json(PrincipalCreated {
        name: p.name.to_string(),
        role: p.role.as_str().to_owned(),
        token,
    }))
}

/// Grants a principal access to an execution or mission (operators only).
#[utoipa::path(post, path = "/v1/grants", tag = "authority",
    request_body = NewGrant,
    responses(
        (status = 201, description = "Granted", body = GrantOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn add_grant(
    State(state): State<AppState>,
    Caller(caller): Caller,
    StrictJson(body): StrictJson<NewGrant>,
) -> Result<(StatusCode, Json<GrantOut>), ApiError> {
    let expires_at: Timestamp = body
        .expires_at
        .parse()
        .map_err(|e| bad_input("expires_at", e))?;
    let scope = match body.scope {
        ScopeName::Execution => ScopeKind::Execution,
        ScopeName::Mission => ScopeKind::Mission,
    };
    let access = match body.access {
        AccessName::Read => Access::Read,
        AccessName::Write => Access::Write,
    };
    state
        .engine
        .grant(
            &caller,
            &body.grant_id,
            &body.principal,
            scope,
            &body.scope_id,
            access,
            &expires_at,
        )
        .await?;
    let view = state.engine.show_grant(&caller, &body.grant_id).await?;
    Ok((StatusCode::CREATED, Json(view.into())))
}

/// Revokes a grant with immediate effect (operators only).
#[utoipa::path(post, path = "/v1/grants/{id}/revoke", tag = "authority",
    params(("id" = String, Path, description = "Grant id")),
    request_body = Reason,
    responses(
        (status = 200, description = "Revoked", body = GrantOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn revoke_grant(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(id): Segment,
    StrictJson(body): StrictJson<Reason>,
) -> Result<Json<GrantOut>, ApiError> {
    state.engine.revoke(&caller, &id, &body.reason).await?;
    Ok(Json(state.engine.show_grant(&caller, &id).await?.into()))
}

/// The grants the caller may see: every one for an operator (or one principal's), else its own.
#[utoipa::path(get, path = "/v1/grants", tag = "authority",
    params(GrantQuery),
    responses(
        (status = 200, description = "A page of grants", body = GrantPage),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn list_grants(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ListQuery(q): ListQuery<GrantQuery>,
) -> Result<(HeaderMap, Json<GrantPage>), ApiError> {
    let all: Vec<GrantOut> = state
        .engine
        .list_grants(&caller, q.principal.as_deref())
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let extra: Vec<(&str, &str)> = q
        .principal
        .as_deref()
        .map(|p| ("principal", p))
        .into_iter()
        .collect();
    let page = paginate(
        all,
        |g| g.grant_id.as_str(),
        &q.page(),
        "/v1/grants",
        &extra,
    )?;
    Ok((
        page.headers(),
        Json(GrantPage {
            items: page.items,
            next: page.next,
        }),
    ))
}

/// One grant, if the caller may see it.
#[utoipa::path(get, path = "/v1/grants/{id}", tag = "authority",
    params(("id" = String, Path, description = "Grant id")),
    responses(
        (status = 200, description = "The grant", body = GrantOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn show_grant(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(id): Segment,
) -> Result<Json<GrantOut>, ApiError> {
    Ok(Json(state.engine.show_grant(&caller, &id).await?.into()))
}

async fn current_policy(
    state: &AppState,
    caller: &verdict_engine::Principal,
) -> Result<(GatePolicy, String), ApiError> {
    let head = state
        .engine
        .gate_policy_head(caller)
        .await?
        .ok_or_else(|| verdict_engine::EngineError::NoSuchGate(state.engine.gate().to_owned()))?;
    let (digest, policy) = state
        .engine
        .show_policy(caller, Some(&head.policy_digest))
        .await?;
    let policy = serde_json::to_value(&policy).map_err(|e| ApiError::StoredUnreadable {
        what: "policy",
        message: e.to_string(),
    })?;
    let tag = etag::of_gate(&head);
    Ok((
        GatePolicy {
            gate: state.engine.gate().to_owned(),
            policy_digest: digest,
            revision: head.revision,
            policy,
        },
        tag,
    ))
}

/// The gate's current policy, with its `ETag` for a later `PUT` with `If-Match`.
#[utoipa::path(get, path = "/v1/gate/policy", tag = "authority",
    responses(
        (status = 200, description = "The current policy", body = GatePolicy,
            headers(("ETag" = String, description = "The gate's policy and revision"))),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn show_gate_policy(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<(HeaderMap, Json<GatePolicy>), ApiError> {
    let (out, tag) = current_policy(&state, &caller).await?;
    Ok((etag::header(&tag), Json(out)))
}

/// Sets the gate's policy (operators only). With `If-Match`, only if the gate's policy is
/// still the one tagged; `412` otherwise, and nothing is written.
#[utoipa::path(put, path = "/v1/gate/policy", tag = "authority",
    request_body(content = Object, description = "A policy document (docs/spec/policy.md)"),
    params(("If-Match" = Option<String>, Header, description = "The gate policy's ETag; 412 if it moved")),
    responses(
        (status = 200, description = "Stored and current", body = GatePolicy,
            headers(("ETag" = String, description = "The gate's policy and revision"))),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn set_gate_policy(
    State(state): State<AppState>,
    Caller(caller): Caller,
    headers: HeaderMap,
    StrictJson(doc): StrictJson<Value>,
) -> Result<(HeaderMap, Json<GatePolicy>), ApiError> {
    let expected = etag::precondition(&headers)?;
    state
        .engine
        .set_policy_if(&caller, &doc, expected.as_ref())
        .await?;
    let (out, tag) = current_policy(&state, &caller).await?;
    Ok((etag::header(&tag), Json(out)))
}

/// A stored policy by digest.
#[utoipa::path(get, path = "/v1/policies/{digest}", tag = "authority",
    params(("digest" = String, Path, description = "Policy digest (sha256:...)")),
    responses(
        (status = 200, description = "The policy", body = PolicyOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn show_policy(
    State(state): State<AppState>,
    Caller(caller): Caller,
    Segment(digest): Segment,
) -> Result<Json<PolicyOut>, ApiError> {
    let digest: Digest = digest.parse().map_err(|e| bad_input("policy digest", e))?;
    let (digest, policy) = state.engine.show_policy(&caller, Some(&digest)).await?;
    let policy = serde_json::to_value(&policy).map_err(|e| ApiError::StoredUnreadable {
        what: "policy",
        message: e.to_string(),
    })?;
    Ok(Json(PolicyOut {
        policy_digest: digest,
        policy,
    }))
}

/// Walks the audit chain, re-hashes every row and replays every decision (operators only).
#[utoipa::path(post, path = "/v1/audit/verify", tag = "authority",
    responses(
        (status = 200, description = "The report; `intact` false names what is wrong", body = AuditOut),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn audit_verify(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<AuditOut>, ApiError> {
    let report = state.engine.verify_store_as(&caller, None).await?;
    let unreadable = |e: serde_json::Error| ApiError::StoredUnreadable {
        what: "audit report",
        message: e.to_string(),
    };
    Ok(Json(AuditOut {
        store: state.engine.describe_store(),
        intact: report.is_intact(),
        events: report.events,
        rows: report.rows,
        head: report
            .head
            .as_ref()
            .map(serde_json::to_value)
            .transpose()
            .map_err(unreadable)?,
        problems: report
            .problems
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()
            .map_err(unreadable)?,
    }))
}
