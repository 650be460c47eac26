//! Request bodies: read whole under the body limit, parsed by the core's strict JSON reader
//! (duplicate keys, unsafe integers, NaN and deep nesting refused, with line, column and
//! pointer) and only then decoded into the route's typed shape, which refuses unknown fields.
//! Each way a body can be wrong is a 4xx problem document.

use crate::problem::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use serde::de::DeserializeOwned;

/// A JSON body read strictly and decoded into `T`.
#[derive(Debug)]
pub struct StrictJson<T>(pub T);

impl<S, T> FromRequest<S> for StrictJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let media = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !is_json(media) {
            return Err(ApiError::request(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                format!("the body must be application/json, not {media:?}"),
            ));
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| unreadable(&e, "the body is over the limit"))?;
        let value = verdict_core::json::parse(&bytes).map_err(|e| {
            ApiError::request(
                StatusCode::BAD_REQUEST,
                "malformed_body",
                format!("the body is not strict JSON: {e}"),
            )
        })?;
        // JSON can spell U+0000, but no store can hold it (PostgreSQL's text cannot), so no
        // body carrying one reaches the engine, whatever field it is in.
        if let Some(at) = verdict_core::json::nul_pointer(&value) {
            return Err(ApiError::request(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_input",
                format!("the body holds U+0000 at {at:?}, which no field may hold"),
            ));
        }
        // A struct reads only from an object, as every document does (an array of its fields in
        // order is not an object).
        let typed = serde_path_to_error::deserialize(verdict_core::contracts::StrictValue(&value))
            .map_err(|e| {
                // The path is made of the body's own keys, unquoted: one a megabyte long is shown
                // quoted, and so cut, like any other value the caller sent.
                let path = e.path().to_string();
                let path = if path.chars().count() > verdict_core::quote::MAX_QUOTED_CHARS {
                    verdict_core::quote::quoted(&path)
                } else {
                    path
                };
                ApiError::request(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_input",
                    format!("the body does not fit this route at {path}: {}", e.inner()),
                )
            })?;
        Ok(Self(typed))
    }
}

/// The refusal of a body that could not be read: over the limit (`too_large` says which), not
/// whole within the body timeout ([`crate::listen`]), or cut short.
pub(crate) fn unreadable(e: &BytesRejection, too_large: &str) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::request(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("{too_large}: {}", e.body_text()),
        )
    } else if let Some(late) = crate::listen::timed_out(e) {
        ApiError::request(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            late.to_string(),
        )
    } else {
        ApiError::request(
            StatusCode::BAD_REQUEST,
            "malformed_body",
            format!("the body could not be read: {}", e.body_text()),
        )
    }
}

/// `application/json` or any `application/*+json`, parameters ignored.
fn is_json(media: &str) -> bool {
    let essence = media
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}
