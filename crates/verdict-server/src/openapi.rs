//! The OpenAPI 3.1 description, generated from the handlers' annotations and the request and
//! response types, so it cannot name a route the router lacks or miss one it has (a test holds
//! the two lists equal).

use crate::problem::Problem;
use crate::{admin, blobs, events, jobs, ops, reads, routes, webhooks, work};
use axum::Json;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(title = "verdict", description = "The verdict HTTP API: see docs/server.md."),
    paths(
        routes::put_subject,
        routes::add_evidence,
        routes::create_request,
        routes::gate_run,
        routes::status,
        routes::history,
        routes::cancel_execution,
        routes::decide,
        work::list_executions,
        work::show_execution,
        work::list_runs,
        work::admit,
        work::show_run,
        work::cancel_run,
        work::submit_result,
        work::run_context,
        work::execution_findings,
        work::finding,
        jobs::enqueue,
        jobs::list,
        reads::list_gates,
        reads::replay,
        reads::subject_blobs,
        reads::export_junit,
        reads::export_github,
        reads::ledger,
        blobs::put,
        blobs::get,
        admin::add_principal,
        admin::list_principals,
        admin::show_principal,
        admin::revoke_token,
        admin::rotate_token,
        admin::add_grant,
        admin::list_grants,
        admin::show_grant,
        admin::revoke_grant,
        admin::show_gate_policy,
        admin::set_gate_policy,
        admin::show_policy,
        admin::audit_verify,
        events::stream,
        webhooks::register,
        webhooks::list,
        webhooks::remove,
        routes::healthz,
        routes::readyz,
        ops::serve_metrics,
        serve,
    ),
    components(schemas(Problem)),
    modifiers(&Bearer),
)]
pub struct ApiDoc;

/// Declares the bearer scheme the routes name in `security`.
struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
            );
    }
}

/// This description.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "The OpenAPI 3.1 description", body = Object)))]
pub async fn serve() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
