//! # verdict-server: the HTTP API
//!
//! A thin face over the engine: each route reads its request, calls one engine use case as the
//! principal its bearer token names and renders the result. Every refusal is an RFC 9457
//! problem document (`application/problem+json`) carrying the engine's stable reason code and
//! whether a retry can help ([`problem`]). Bodies are read under a size limit by the core's
//! strict JSON reader before they are decoded ([`body`]). The OpenAPI 3.1 description is
//! generated from the handlers and served at `/openapi.json` ([`openapi`]).
//!
//! Main items: [`app`] (the router), [`AppState`], [`serve`].

pub mod auth;
pub mod body;
pub mod openapi;
pub mod problem;
pub mod routes;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use problem::ApiError;
use std::future::Future;
use tower_http::catch_panic::CatchPanicLayer;
use verdict_engine::Engine;

/// The body limit when none is configured: 1 MiB, well above any lifecycle document.
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The engine over the store.
    pub engine: Engine,
    /// The largest request body accepted, in bytes.
    pub body_limit: usize,
}

impl AppState {
    /// State over `engine` with the default body limit.
    #[must_use]
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

/// The router of every route (docs/server.md).
pub fn app(state: AppState) -> Router {
    let limit = state.body_limit;
    Router::new()
        .route("/v1/subjects", post(routes::put_subject))
        .route("/v1/evidence", post(routes::add_evidence))
        .route("/v1/requests", post(routes::create_request))
        .route("/v1/executions/{id}/gate-runs", post(routes::gate_run))
        .route("/v1/executions/{id}/status", get(routes::status))
        .route("/v1/executions/{id}/history", get(routes::history))
        .route("/v1/executions/{id}/cancel", post(routes::cancel_execution))
        .route("/v1/human-decisions", post(routes::decide))
        .route("/healthz", get(routes::healthz))
        .route("/readyz", get(routes::readyz))
        .route("/openapi.json", get(openapi::serve))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(limit))
        .layer(CatchPanicLayer::custom(panicked))
        .with_state(state)
}

/// Serves [`app`] on `listener` until `shutdown` completes, then lets requests in flight end.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
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
