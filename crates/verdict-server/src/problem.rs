//! The server's one error type and its rendering as an RFC 9457 problem document. Every
//! refusal, whether the engine's or the server's own (a missing token, a body too large or not
//! JSON), leaves through [`ApiError::into_response`], so each has the same shape and the status
//! for an engine error is chosen here and nowhere else.

use crate::limit::Scope;
use crate::ops::ProblemCode;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use verdict_engine::EngineError;
use verdict_store::StoreError;

/// The media type of a problem document.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem document, with the stable reason code and whether repeating the same
/// request unchanged can succeed.
#[derive(Debug, Clone, Serialize, ToSchema, Deserialize)]
pub struct Problem {
    /// `urn:verdict:problem:` followed by [`Problem::code`].
    #[serde(rename = "type")]
    pub kind: String,
    /// A short summary of the problem type (the same for every occurrence of a code).
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// What went wrong with this request, and where.
    pub detail: String,
    /// The stable reason code (`permission_denied`, `invalid_input`, ...).
    pub code: String,
    /// Whether sending the same request again, unchanged, can succeed.
    pub retryable: bool,
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The peer, or every peer together, failed authentication too often; the engine was not
    /// asked and no denial was written ([`crate::limit`]).
    #[error("too many failed authentications {}; retry after {retry_after} s", limited_by(.scope))]
    TooManyRequests {
        /// Seconds until the peer may try again.
        retry_after: u64,
        /// Whose failures spent the allowance: the peer's own, or every peer's.
        scope: Scope,
    },
    /// A decision the store returned cannot be read back: the store's fault, not the
    /// client's.
    #[error("the stored {what} cannot be read: {message}")]
    StoredUnreadable {
        /// What was read.
        what: &'static str,
        /// Why not.
        message: String,
    },
    /// The request itself is unusable before any engine call: no token, a body that is not
    /// JSON, too large, of the wrong media type or shape, or a path that names nothing.
    #[error("{detail}")]
    Request {
        /// The HTTP status.
        status: StatusCode,
        /// The stable reason code.
        code: &'static str,
        /// What is wrong, and where.
        detail: String,
    },
}

impl ApiError {
    /// A refusal of the request itself.
    pub(crate) fn request(status: StatusCode, code: &'static str, detail: String) -> Self {
        Self::Request {
            status,
            code,
            detail,
        }
    }

    /// The HTTP status, the stable code and whether a retry can help.
    #[must_use]
    pub fn classify(&self) -> (StatusCode, &'static str, bool) {
        match self {
            // The request itself is wrong, or (readiness) the store is at another schema
            // version: sending it again unchanged cannot help.
            // Save a body that did not arrive in time: sent faster, the same request can succeed.
            Self::Request { status, code, .. } => {
                (*status, code, *status == StatusCode::REQUEST_TIMEOUT)
            }
            Self::TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited", true),
            Self::StoredUnreadable { .. } => {
                (StatusCode::INTERNAL_SERVER_ERROR, "store_error", false)
            }
            Self::Engine(e) => {
                let (status, retryable) = engine_status(e);
                (status, e.code(), retryable)
            }
        }
    }

    /// The problem document of this error.
    #[must_use]
    pub fn problem(&self) -> Problem {
        let (status, code, retryable) = self.classify();
        Problem {
            kind: format!("urn:verdict:problem:{code}"),
            title: title(code).to_owned(),
            status: status.as_u16(),
            // Errors quote what they refuse; a value sent megabytes long is shown cut.
            detail: verdict_core::quote::bound_message(&self.to_string()),
            code: code.to_owned(),
            retryable,
        }
    }
}

/// The HTTP status of an engine error, and whether repeating the request can help. Exhaustive
/// on purpose: a new error variant must be placed here before the server builds.
fn engine_status(e: &EngineError) -> (StatusCode, bool) {
    match e {
        EngineError::Unauthenticated => (StatusCode::UNAUTHORIZED, false),
        EngineError::PermissionDenied { .. } | EngineError::SelfVerificationDenied { .. } => {
            (StatusCode::FORBIDDEN, false)
        }
        EngineError::Invalid { .. } => (StatusCode::UNPROCESSABLE_ENTITY, false),
        EngineError::NotFound { .. } | EngineError::NoSuchGate(_) => (StatusCode::NOT_FOUND, false),
        EngineError::Conflict(_) => (StatusCode::CONFLICT, false),
        EngineError::PreconditionFailed(_) => (StatusCode::PRECONDITION_FAILED, false),
        // A stored decision that no longer replays is a fault of the store's contents.
        EngineError::ReplayMismatch { .. } => (StatusCode::INTERNAL_SERVER_ERROR, false),
        // The refusal stands, but its denial is not in the audit chain: answering with the
        // refusal alone would claim a record that does not exist. The store failed, and once
        // it answers again the same request is refused and recorded.
        EngineError::DenialNotRecorded { .. } => (StatusCode::SERVICE_UNAVAILABLE, true),
        EngineError::Store(s) => store_status(s),
    }
}

fn store_status(e: &StoreError) -> (StatusCode, bool) {
    match e {
        StoreError::Forbidden { .. } | StoreError::Denied(_) => (StatusCode::FORBIDDEN, false),
        StoreError::Invalid { .. } | StoreError::Refused(_) => {
            (StatusCode::UNPROCESSABLE_ENTITY, false)
        }
        StoreError::NotFound { .. } => (StatusCode::NOT_FOUND, false),
        StoreError::Conflict { .. }
        | StoreError::Duplicate(_)
        | StoreError::StaleClaim { .. }
        | StoreError::LastOperator(_) => (StatusCode::CONFLICT, false),
        // The engine re-reads the head on every call, so a lost race can win when sent again.
        StoreError::CasFailed { .. } => (StatusCode::CONFLICT, true),
        // The engine answers a refusal whose denial is past its bound with the refusal itself;
        // met anywhere else, it is the store's and passes with time.
        StoreError::Backend { .. }
        | StoreError::Unavailable { .. }
        | StoreError::Io { .. }
        | StoreError::DenialBound(_) => (StatusCode::SERVICE_UNAVAILABLE, true),
        StoreError::SchemaTooNew { .. }
        | StoreError::SchemaTooOld { .. }
        | StoreError::Location { .. }
        | StoreError::Corrupt { .. }
        | StoreError::Checkpoint(_) => (StatusCode::SERVICE_UNAVAILABLE, false),
    }
}

/// The title of each code: fixed per code, as RFC 9457 asks of a problem type.
fn title(code: &str) -> &'static str {
    match code {
        "unauthenticated" => "No principal holds the token given",
        "permission_denied" => "The action is outside the caller's role or grants",
        "self_verification_denied" => "The action would let a producer verify its own work",
        "invalid_input" => "The document or argument breaks its contract",
        "not_found" => "Something the action depends on is not stored",
        "conflict" => "The state moved under the action",
        "replay_mismatch" => "A stored decision does not replay",
        "store_error" => "The store is unavailable or failed",
        "malformed_body" => "The body is not the JSON this route reads",
        "payload_too_large" => "The body is larger than the server accepts",
        "request_timeout" => "The body did not arrive in time",
        "unsupported_media_type" => "The body is not application/json",
        "route_not_found" => "No route has this path and method",
        "internal" => "The server failed",
        "rate_limited" => "Too many failed authentications from this address",
        "invalid_query" => "The query string is not what this route reads",
        "precondition_failed" => "The resource is not in the state If-Match names",
        "invalid_precondition" => "The If-Match header cannot be read",
        "webhooks_disabled" => "This server has no webhook key",
        _ => "The request failed",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (_, code, _) = self.classify();
        let mut response = self.problem().into_response();
        // RFC 9110: a 401 names the scheme that would be accepted.
        if response.status() == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Self::TooManyRequests { retry_after, .. } = &self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        response.extensions_mut().insert(ProblemCode(code));
        response
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self).unwrap_or_default();
        let mut response = (status, body).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}

/// Whose failed authentications a `429` counts, as its detail says it.
fn limited_by(scope: &Scope) -> &'static str {
    match scope {
        Scope::Peer => "from this address",
        Scope::Server => "at this server, from every address together",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(e: EngineError) -> (u16, &'static str, bool) {
        let (status, code, retryable) = ApiError::from(e).classify();
        (status.as_u16(), code, retryable)
    }

    #[test]
    fn store_faults_are_503_and_only_a_failing_store_is_worth_retrying() {
        let backend = StoreError::Backend {
            backend: "postgres",
            message: "connection refused".into(),
        };
        assert_eq!(
            classify(EngineError::Store(backend)),
            (503, "store_error", true)
        );
        let away = StoreError::Unavailable {
            backend: "postgres",
            message: "the database said: terminating connection (SQLSTATE 57P01)".into(),
        };
        assert_eq!(
            classify(EngineError::Store(away)),
            (503, "store_error", true)
        );
        let too_new = StoreError::SchemaTooNew {
            found: 9,
            supported: 5,
        };
        assert_eq!(
            classify(EngineError::Store(too_new)),
            (503, "store_error", false)
        );
    }

    #[test]
    fn the_store_s_own_refusals_keep_their_meaning() {
        let forbidden = StoreError::Forbidden {
            principal: "ci".into(),
            role: "runner",
            target: "subjects",
        };
        assert_eq!(
            classify(EngineError::Store(forbidden)),
            (403, "permission_denied", false)
        );
        let conflict = StoreError::Conflict {
            table: "evidence",
            key: "ev-1".into(),
            existing: "a".into(),
            offered: "b".into(),
        };
        assert_eq!(
            classify(EngineError::Store(conflict)),
            (409, "conflict", false)
        );
        let cas = StoreError::CasFailed {
            pointer: "execution",
            name: "ex-1".into(),
            expected: "a".into(),
            found: "b".into(),
        };
        assert_eq!(classify(EngineError::Store(cas)), (409, "conflict", true));
        let refused = StoreError::Refused("evidence claims another writer".into());
        assert_eq!(
            classify(EngineError::Store(refused)),
            (422, "invalid_input", false)
        );
    }

    #[test]
    fn a_refusal_whose_denial_was_not_written_is_the_store_s_fault_and_retryable() {
        let refusal = EngineError::PermissionDenied {
            principal: "ci".into(),
            role: "runner",
            action: "put subjects".into(),
            why: "only producers".into(),
        };
        let e = EngineError::DenialNotRecorded {
            refusal: Box::new(refusal),
            cause: "disk full".into(),
        };
        assert_eq!(classify(e), (503, "store_error", true));
        let e = EngineError::DenialNotRecorded {
            refusal: Box::new(EngineError::Unauthenticated),
            cause: "disk full".into(),
        };
        assert_eq!(classify(e), (503, "store_error", true));
    }

    #[test]
    fn an_unreadable_stored_decision_is_a_server_fault_not_the_client_s() {
        let e = ApiError::StoredUnreadable {
            what: "gate decision",
            message: "expected value at line 1".into(),
        };
        let (status, code, retryable) = e.classify();
        assert_eq!(
            (status.as_u16(), code, retryable),
            (500, "store_error", false)
        );
    }

    #[test]
    fn a_problem_document_has_the_rfc_9457_members_and_the_code() {
        let p = ApiError::from(EngineError::Unauthenticated).problem();
        let v = serde_json::to_value(&p).unwrap_or_default();
        assert_eq!(v["type"], "urn:verdict:problem:unauthenticated");
        assert_eq!(v["status"], 401);
        assert_eq!(v["code"], "unauthenticated");
        assert_eq!(v["retryable"], false);
        assert!(v["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(
            v["detail"]
                .as_str()
                .is_some_and(|t| t.contains("no principal"))
        );
    }
}
