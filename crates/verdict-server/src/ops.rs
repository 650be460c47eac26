//! What an operator watches: a request id on every request (the client's `x-request-id` when
//! it sends a usable one, else one generated here), echoed in the response and carried by the
//! request's log line; one structured log event per request (`tracing`, rendered as JSON or
//! text by whoever installs the subscriber); and Prometheus metrics served at `/metrics` to
//! operators: requests by route, method and status, their latency, gate decisions by outcome
//! and reason, and the job queue's depth and lapsed leases. The recorder belongs to the
//! server's state, not to the process, so two servers in one process (tests) count apart.

use crate::AppState;
use crate::auth::Caller;
use crate::problem::{ApiError, Problem};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The request id header.
pub static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest client request id kept; a longer one is replaced.
const MAX_REQUEST_ID: usize = 128;

/// Latency buckets, in seconds.
const LATENCY_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// The id of one request, as handlers and logs see it.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The server's metrics.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Generated request ids: this process's start and a counter, unique per process.
    started: u128,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of metrics.
    #[must_use]
    pub fn new() -> Self {
        let builder = PrometheusBuilder::new();
        // Buckets make the latency a Prometheus histogram rather than a summary, so it can be
        // aggregated across servers.
        let builder = builder
            .set_buckets_for_metric(
                Matcher::Full("verdict_http_request_duration_seconds".into()),
                &LATENCY_BUCKETS,
            )
            .unwrap_or_else(|_| PrometheusBuilder::new());
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self {
            recorder,
            handle,
            started,
            next_id: AtomicU64::new(0),
        }
    }

    /// Runs `f` with this server's recorder as the one the `metrics` macros write to.
    pub fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        metrics::with_local_recorder(&self.recorder, f)
    }

    /// The Prometheus text exposition.
    #[must_use]
    pub fn render(&self) -> String {
        self.handle.run_upkeep();
        self.handle.render()
    }

    fn generate_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("{:x}-{n:x}", self.started)
    }

    /// Counts a decision the gate stored: one per outcome, and one per reason code it gives.
    pub fn decision(&self, outcome: &str, reasons: &[String]) {
        self.with(|| {
            metrics::counter!("verdict_gate_decisions_total", "outcome" => outcome.to_owned())
                .increment(1);
            for r in reasons {
                metrics::counter!("verdict_gate_decision_reasons_total", "reason" => r.clone())
                    .increment(1);
            }
        });
    }
}

/// A client's request id is kept when it is visible ASCII and not too long, so it cannot
/// break a log line or a header.
fn usable(v: &HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    (!s.is_empty() && s.len() <= MAX_REQUEST_ID && s.bytes().all(|b| b.is_ascii_graphic()))
        .then(|| s.to_owned())
}

/// The middleware around every route: request id, log line, metrics.
pub async fn observe(
    State(metrics): State<Arc<Metrics>>,
    mut req: Request,
    next: Next,
) -> Response {
    let start = Instant::now();
    let id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(usable)
        .unwrap_or_else(|| metrics.generate_id());
    let method = req.method().to_string();
    // The route's template, never the raw path: ids in paths would make every execution a
    // metric of its own.
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    req.extensions_mut().insert(RequestId(id.clone()));
    let mut response = next.run(req).await;
    let status = response.status().as_u16();
    let elapsed = start.elapsed();
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID.clone(), v);
    }
    let code = response
        .extensions()
        .get::<ProblemCode>()
        .map_or("", |c| c.0);
    tracing::info!(
        request_id = %id,
        method = %method,
        route = %route,
        status,
        code,
        latency_ms = elapsed.as_secs_f64() * 1000.0,
        "request"
    );
    metrics.with(|| {
        metrics::counter!(
            "verdict_http_requests_total",
            "route" => route.clone(),
            "method" => method.clone(),
            "status" => status.to_string()
        )
        .increment(1);
        metrics::histogram!(
            "verdict_http_request_duration_seconds",
            "route" => route,
            "method" => method
        )
        .record(elapsed.as_secs_f64());
        // Refusals by reason code: a rise in `unauthenticated` or `permission_denied` is what
        // an operator alerts on.
        if !code.is_empty() {
            metrics::counter!("verdict_http_problems_total", "code" => code).increment(1);
        }
    });
    response
}

/// The stable code of a refusal, left on its response for the log line.
#[derive(Debug, Clone, Copy)]
pub struct ProblemCode(pub &'static str);

/// `GET /metrics`: the Prometheus text exposition (operators only: the counts are the
/// platform's, over executions no other principal may read).
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text exposition format 0.0.4", body = String, content_type = "text/plain"),
        (status = "4XX", description = "Refused", body = Problem, content_type = "application/problem+json"),
        (status = "5XX", description = "Store unavailable", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = [])))]
pub async fn serve_metrics(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Response, ApiError> {
    // The queue is read at each scrape, from the store every server shares, so any server
    // reports the same depth. A store that cannot be read leaves the gauges as they were and
    // says so in `verdict_queue_read_ok`.
    let depth = state.engine.queue_depth(&caller).await?;
    state.metrics.with(|| {
        metrics::gauge!("verdict_queue_read_ok").set(if depth.is_ok() { 1.0 } else { 0.0 });
        for d in depth.iter().flatten() {
            let kind = d.kind.as_str();
            for (job_state, n) in [("ready", d.ready), ("running", d.running)] {
                #[expect(
                    clippy::cast_precision_loss,
                    reason = "a gauge is a float; job counts stay far below 2^53"
                )]
                metrics::gauge!("verdict_jobs", "kind" => kind, "state" => job_state).set(n as f64);
            }
            #[expect(
                clippy::cast_precision_loss,
                reason = "a gauge is a float; job counts stay far below 2^53"
            )]
            metrics::gauge!("verdict_job_leases_lapsed", "kind" => kind).set(d.lapsed as f64);
        }
    });
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response())
}
