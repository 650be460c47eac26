//! # verdict-server: the HTTP API
//!
//! A thin face over the engine: each route reads its request, calls one engine use case as the
//! principal its bearer token names and renders the result. Every refusal is an RFC 9457
//! problem document (`application/problem+json`) carrying the engine's stable reason code and
//! whether a retry can help ([`problem`]). Bodies are read under a size limit by the core's
//! strict JSON reader before they are decoded ([`body`]). The OpenAPI 3.1 description is
//! generated from the handlers and served at `/openapi.json` ([`openapi`]).
//!
//! List routes are paginated ([`page`]); the pointer-like resources carry an `ETag` and the
//! writes that move them honour `If-Match` ([`etag`]). Failed authentication is rate-limited
//! per peer and across all peers ([`limit`]). Every request gets an id, a log line and metrics
//! ([`ops`]). Connections are capped in number and must send their requests in time
//! ([`listen`]).
//!
//! The human review pages under `/ui` are server-rendered HTML over the same engine ([`ui`]).
//!
//! Main items: [`app`] (the router), [`AppState`], [`serve`].

pub mod admin;
pub mod auth;
pub mod blobs;
pub mod body;
pub mod client;
pub mod etag;
pub mod events;
pub mod jobs;
pub mod limit;
pub mod listen;
pub mod openapi;
pub mod ops;
pub mod page;
pub mod problem;
pub mod reads;
pub mod routes;
pub mod ui;
pub mod webhooks;
pub mod work;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use limit::{AuthLimit, Limiter};
use ops::Metrics;
use problem::ApiError;
use std::future::Future;
use std::sync::Arc;
use tower_http::catch_panic::CatchPanicLayer;
use verdict_engine::Engine;

/// The body limit when none is configured: the store's limit on one document (4 MiB).
pub const DEFAULT_BODY_LIMIT: usize = 4 << 20;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The engine over the store.
    pub engine: Engine,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
    /// The buckets of failed authentication, per peer and shared.
    pub limiter: Arc<Limiter>,
    /// Request and decision metrics, served at `/metrics`.
    pub metrics: Arc<Metrics>,
    /// How event streams poll the store and keep idle connections alive.
    pub events: events::EventTiming,
    /// Set once the server stops: every event stream and delivery loop ends on it.
    pub stop: Arc<tokio::sync::watch::Sender<bool>>,
    /// The webhook key and delivery settings; without them no webhook is registered or
    /// delivered.
    pub webhooks: Option<Arc<webhooks::Webhooks>>,
    /// The review pages' CSRF key and cookie settings ([`ui`]).
    pub ui: Arc<ui::UiConfig>,
    /// The cap on open connections and the time a client has to send a request ([`listen`]).
    pub connections: listen::ConnLimits,
}

impl AppState {
    /// State over `engine` with the default body limit.
    #[must_use]
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            body_limit: DEFAULT_BODY_LIMIT,
            limiter: Arc::new(Limiter::new(AuthLimit::default())),
            metrics: Arc::new(Metrics::new()),
            events: events::EventTiming::default(),
            stop: Arc::new(tokio::sync::watch::Sender::new(false)),
            webhooks: None,
            ui: Arc::new(ui::UiConfig::new(false)),
            connections: listen::ConnLimits::default(),
        }
    }

    /// This state with another limit on failed authentication.
    #[must_use]
    pub fn with_auth_limit(mut self, limit: AuthLimit) -> Self {
        self.limiter = Arc::new(Limiter::new(limit));
        self
    }
}

/// The router of every route (docs/server.md).
pub fn app(state: AppState) -> Router {
    let limit = state.body_limit;
    let body_timeout = state.connections.body_timeout;
    let metrics = state.metrics.clone();
    Router::new()
        .route("/v1/subjects", post(routes::put_subject))
        .route("/v1/evidence", post(routes::add_evidence))
        .route("/v1/requests", post(routes::create_request))
        .route("/v1/executions/{id}/gate-runs", post(routes::gate_run))
        .route("/v1/executions/{id}/status", get(routes::status))
        .route("/v1/executions/{id}/history", get(routes::history))
        .route("/v1/executions/{id}/cancel", post(routes::cancel_execution))
        .route("/v1/human-decisions", post(routes::decide))
        .route("/v1/executions", get(work::list_executions))
        .route("/v1/executions/{id}", get(work::show_execution))
        .route("/v1/executions/{id}/runs", get(work::list_runs))
        .route("/v1/runs", post(work::admit))
        .route("/v1/runs/{id}", get(work::show_run))
        .route("/v1/runs/{id}/cancel", post(work::cancel_run))
        .route("/v1/results", post(work::submit_result))
        .route("/v1/runs/{id}/context", get(work::run_context))
        .route(
            "/v1/executions/{id}/findings",
            get(work::execution_findings),
        )
        .route("/v1/findings/{id}", get(work::finding))
        .route("/v1/requests/{digest}/jobs", post(jobs::enqueue))
        .route("/v1/jobs", get(jobs::list))
        .route("/v1/gates", get(reads::list_gates))
        .route("/v1/gate/decisions/{key}/replay", get(reads::replay))
        .route("/v1/subjects/{digest}/blobs", get(reads::subject_blobs))
        .route("/v1/executions/{id}/export/junit", get(reads::export_junit))
        .route(
            "/v1/executions/{id}/export/github",
            get(reads::export_github),
        )
        .route("/v1/ledger", get(reads::ledger))
        .route(
            "/v1/blobs/{digest}",
            get(blobs::get)
                .put(blobs::put)
                .layer(DefaultBodyLimit::max(verdict_store::MAX_BLOB_BYTES)),
        )
        .route(
            "/v1/principals",
            get(admin::list_principals).post(admin::add_principal),
        )
        .route("/v1/principals/{name}", get(admin::show_principal))
        .route(
            "/v1/principals/{name}/token/revoke",
            post(admin::revoke_token),
        )
        .route(
            "/v1/principals/{name}/token/rotate",
            post(admin::rotate_token),
        )
        .route("/v1/grants", get(admin::list_grants).post(admin::add_grant))
        .route("/v1/grants/{id}", get(admin::show_grant))
        .route("/v1/grants/{id}/revoke", post(admin::revoke_grant))
        .route(
            "/v1/gate/policy",
            get(admin::show_gate_policy).put(admin::set_gate_policy),
        )
        .route("/v1/policies/{digest}", get(admin::show_policy))
        .route("/v1/audit/verify", post(admin::audit_verify))
        .route("/v1/events", get(events::stream))
        .route("/v1/webhooks", get(webhooks::list).post(webhooks::register))
        .route("/v1/webhooks/{id}", delete(webhooks::remove))
        .route("/healthz", get(routes::healthz))
        .route("/readyz", get(routes::readyz))
        .route("/metrics", get(ops::serve_metrics))
        .route("/openapi.json", get(openapi::serve))
        .merge(ui::router())
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn(move |req, next| {
            listen::body_deadline(body_timeout, req, next)
        }))
        .layer(CatchPanicLayer::custom(panicked))
        .layer(axum::middleware::from_fn_with_state(metrics, ops::observe))
        .with_state(state)
}

/// Serves [`app`] on `listener` until `shutdown` completes, then lets requests in flight end.
/// Connections are held to `state.connections` ([`listen`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let stop = state.stop.clone();
    if let Some(hooks) = state.webhooks.clone() {
        tokio::spawn(webhooks::run(state.clone(), hooks));
    }
    let limits = state.connections;
    listen::run(listener, app(state), limits, async move {
        shutdown.await;
        // Event streams never end on their own: told to stop, they end, and the requests
        // in flight can finish.
        stop.send_replace(true);
    })
    .await;
    Ok(())
}

async fn no_route() -> ApiError {
    ApiError::request(
        StatusCode::NOT_FOUND,
        "route_not_found",
        "no route has this path".into(),
    )
}

async fn wrong_method() -> ApiError {
    ApiError::request(
        StatusCode::METHOD_NOT_ALLOWED,
        "route_not_found",
        "this path does not take this method".into(),
    )
}

/// A panic in a handler still answers with a problem document; its message is not shown.
fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::request(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "the server failed while handling this request".into(),
    )
    .into_response()
}
